#include "memory/lowered_memory.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "memory/in_place.h"
#include "support/checked_math.h"

namespace ferrite {

namespace {

bool memory_log_enabled() {
  const char* v = std::getenv("FERRITE_LOG");
  return v && (std::string(v).find("memory") != std::string::npos || std::string(v) == "all");
}

std::optional<int64_t> byte_size(DType dtype, const std::vector<int64_t>& dims) {
  auto n = checked_numel(dims);
  if (!n) return std::nullopt;
  return checked_mul(*n, static_cast<int64_t>(dtype_size(dtype)));
}

// FERRITE_MEMORY_PLAN=off puts every intermediate on the heap again (for A/B timing and for
// bisecting a suspected planning bug).
bool planning_disabled() {
  const char* v = std::getenv("FERRITE_MEMORY_PLAN");
  return v && (std::string(v) == "off" || std::string(v) == "0");
}

}  // namespace

Status Arena::reserve(int64_t bytes) {
  if (bytes <= capacity_ && block_) return Status::ok();
  if (bytes > (int64_t{1} << 46)) return err("memory arena of ", bytes, " bytes is too large");
  // Rounded up, at least one line, so that every view (even of zero bytes) has a valid address.
  int64_t rounded =
      std::max<int64_t>(kArenaAlignment, (bytes + kArenaAlignment - 1) & ~(kArenaAlignment - 1));
  block_.reset();  // drop the old block first: the peak is the new size, not old + new
  void* p = std::aligned_alloc(kArenaAlignment, static_cast<size_t>(rounded));
  capacity_ = 0;
  if (!p) return err("out of memory allocating a ", rounded, "-byte memory arena");
  block_ = std::shared_ptr<uint8_t[]>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
  capacity_ = rounded;
  return Status::ok();
}

Expected<Tensor> Arena::view(int64_t offset, DType dtype, std::vector<int64_t> dims) const {
  auto bytes = byte_size(dtype, dims);
  if (!bytes || offset < 0 || offset > capacity_ || *bytes > capacity_ - offset)
    return err("arena view out of range");
  return Tensor::over_storage(dtype, std::move(dims),
                              std::shared_ptr<uint8_t[]>(block_, block_.get() + offset));
}

const void* Arena::address(int64_t offset) const {
  return block_ && offset >= 0 && offset <= capacity_ ? block_.get() + offset : nullptr;
}

bool Arena::contains(const void* p) const {
  if (!block_ || !p) return false;
  auto a = reinterpret_cast<uintptr_t>(block_.get());
  auto x = reinterpret_cast<uintptr_t>(p);
  return x >= a && x < a + static_cast<uintptr_t>(capacity_);
}

// Builds the planner's requests: one per arena buffer, with lifetimes and in-place hints.
std::vector<SymbolicRequest> arena_requests(const LoweredGraph& lg,
                                            const std::vector<int>& last_use,
                                            std::vector<int>& request_of_buffer,
                                            std::vector<int>& buffer_of_request, int& unplanned) {
  const size_t nb = lg.buffers.size();
  std::vector<int> def(nb, -1), writes(nb, 0);
  for (size_t si = 0; si < lg.steps.size(); ++si) {
    const Step& s = lg.steps[si];
    auto wrote = [&](int b) {
      if (b < 0 || static_cast<size_t>(b) >= nb) return;
      if (writes[b]++ == 0) def[b] = static_cast<int>(si);
    };
    // Only the step kinds known here; a buffer another kind writes stays on the heap.
    if (s.kind == Step::Kind::kKernel) {
      wrote(s.kernel.output_buffer);
      for (const auto& x : s.kernel.extra_outputs) wrote(x.buffer);
    } else if (s.kind == Step::Kind::kLibrary) {
      for (int b : s.outputs) wrote(b);
    }
  }
  request_of_buffer.assign(nb, -1);
  std::vector<SymbolicRequest> reqs;
  for (size_t b = 0; b < nb; ++b) {
    const Buffer& buf = lg.buffers[b];
    if (buf.kind != Buffer::Kind::kIntermediate) continue;
    Dim numel = buf.shape.rank_known() ? buf.shape.numel() : Dim::unknown();
    size_t esize = buf.dtype == DType::kUndefined ? 0 : dtype_size(buf.dtype);
    if (writes[b] != 1 || !numel.is_known() || esize == 0) {
      unplanned++;
      continue;
    }
    SymbolicRequest r;
    r.bytes = numel.expr() * SymExpr(static_cast<int64_t>(esize));
    r.first = def[b];
    r.last = std::max(def[b], b < last_use.size() ? last_use[b] : -1);
    request_of_buffer[b] = static_cast<int>(reqs.size());
    buffer_of_request.push_back(static_cast<int>(b));
    reqs.push_back(std::move(r));
  }
  // In-place: a generated kernel over an input slot that dies at its step.
  for (size_t si = 0; si < lg.steps.size(); ++si) {
    const Step& s = lg.steps[si];
    if (s.kind != Step::Kind::kKernel) continue;
    int out = s.kernel.output_buffer;
    if (out < 0 || static_cast<size_t>(out) >= nb || request_of_buffer[out] < 0) continue;
    // Only the slot marked before code generation: the generated code does not promise that
    // those two pointers never alias.
    int slot = s.kernel.in_place_slot;
    if (slot < 0 || static_cast<size_t>(slot) >= s.kernel.input_buffers.size()) continue;
    int in = s.kernel.input_buffers[slot];
    if (in < 0 || static_cast<size_t>(in) >= nb || request_of_buffer[in] < 0) continue;
    if (reqs[request_of_buffer[in]].last != static_cast<int>(si)) continue;
    if (!pointwise_in_place_ok(s.kernel, in)) continue;
    reqs[request_of_buffer[out]].in_place_of = request_of_buffer[in];
  }
  return reqs;
}

namespace {
std::vector<SymbolicRequest> aligned(std::vector<SymbolicRequest> reqs, int64_t alignment) {
  for (auto& r : reqs) r.alignment = std::max(r.alignment, alignment);
  return reqs;
}
}  // namespace

LoweredMemory::LoweredMemory(const LoweredGraph& lg, const std::vector<int>& last_use,
                             std::optional<DeviceArenaSource> device)
    : lg_(lg),
      planner_(
          aligned(arena_requests(lg, last_use, request_of_buffer_, buffer_of_request_, unplanned_),
                  device ? device->alignment : kArenaAlignment),
          lg.symbols),
      device_(std::move(device)),
      disabled_(planning_disabled()) {}

LoweredMemory::~LoweredMemory() {
  if (device_ && device_block_) (void)device_->release(device_block_);
}

Status LoweredMemory::reserve(int64_t bytes) {
  if (!device_) return arena_.reserve(bytes);
  const int64_t need = std::max<int64_t>(bytes, 256);
  if (need <= device_capacity_ && device_block_) return Status::ok();
  if (device_block_) FERRITE_RETURN_IF_ERROR(device_->release(device_block_));
  device_block_ = nullptr;
  device_capacity_ = 0;
  FERRITE_ASSIGN_OR_RETURN(device_block_, device_->allocate(static_cast<size_t>(need)));
  device_capacity_ = need;
  return Status::ok();
}

void* LoweredMemory::device_address(int b, int64_t bytes) const {
  int r = b >= 0 && static_cast<size_t>(b) < request_of_buffer_.size() ? request_of_buffer_[b] : -1;
  void* block = no_arena_ ? nullptr : lent_ ? lent_ : device_block_;
  if (!plan_ || r < 0 || bytes > plan_->bytes[r] || !block) return nullptr;
  return static_cast<uint8_t*>(block) + plan_->offsets[r];
}

std::string LoweredMemory::binding_text(const std::vector<int64_t>& values) const {
  std::string s;
  for (size_t i = 0; i < values.size() && i < lg_.symbols.size(); ++i)
    s += (i ? "," : "") + lg_.symbols[i] + "=" + std::to_string(values[i]);
  return s.empty() ? "static" : s;
}

Status LoweredMemory::reserve_plan() {
  if (!plan_) return Status::ok();
  FERRITE_RETURN_IF_ERROR(reserve(plan_->arena_bytes));
  stats_.arena_capacity_bytes = device_ ? device_capacity_ : arena_.capacity();
  return Status::ok();
}

void LoweredMemory::begin_run(const std::vector<int64_t>& symbol_values, bool reserve_arena) {
  plan_ = nullptr;
  lent_ = nullptr;
  no_arena_ = false;
  stats_ = MemoryStats{};
  stats_.unplanned_buffers = unplanned_;
  if (disabled_) {
    stats_.unplanned_buffers += static_cast<int64_t>(buffer_of_request_.size());
    return;
  }
  bool fresh = false;
  auto t0 = std::chrono::steady_clock::now();
  auto plan = planner_.plan_for(symbol_values, &fresh);
  double plan_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  Status st = !plan ? plan.status() : reserve_arena ? reserve((*plan)->arena_bytes) : Status::ok();
  if (!st) {
    // Sizes that do not evaluate here fail again, with a clear message, when the step runs.
    if (memory_log_enabled())
      std::fprintf(stderr, "[memory] %s: no plan, intermediates on the heap: %s\n",
                   binding_text(symbol_values).c_str(), st.message().c_str());
    stats_.unplanned_buffers += static_cast<int64_t>(buffer_of_request_.size());
    return;
  }
  plan_ = *plan;
  stats_.planned_peak_bytes = plan_->arena_bytes;
  stats_.intermediate_bytes = plan_->total_bytes;
  stats_.live_peak_bytes = plan_->live_peak_bytes;
  stats_.planned_buffers = plan_->buffers;
  stats_.in_place = plan_->in_place;
  stats_.arena_capacity_bytes = device_ ? device_capacity_ : arena_.capacity();
  if (fresh && memory_log_enabled())
    std::fprintf(stderr,
                 "[memory] %s: %d planned buffers (%d in place), peak %lld bytes, intermediates "
                 "%lld bytes, reuse %.2fx, live lower bound %lld bytes; %d intermediates on the "
                 "heap (size unknown before they run); planned in %.3f ms\n",
                 binding_text(symbol_values).c_str(), plan_->buffers, plan_->in_place,
                 static_cast<long long>(plan_->arena_bytes),
                 static_cast<long long>(plan_->total_bytes), plan_->reuse_ratio(),
                 static_cast<long long>(plan_->live_peak_bytes), unplanned_, plan_ms);
}

Expected<Tensor> LoweredMemory::allocate(int b, DType dtype, std::vector<int64_t> dims, bool zero) {
  int r = b >= 0 && static_cast<size_t>(b) < request_of_buffer_.size() ? request_of_buffer_[b] : -1;
  if (plan_ && r >= 0) {
    auto bytes = byte_size(dtype, dims);
    // The slot was sized from the inferred shape; a kernel producing something larger (it
    // should not) gets the heap instead of overrunning its neighbours.
    if (bytes && *bytes <= plan_->bytes[r]) {
      auto t = arena_.view(plan_->offsets[r], dtype, std::move(dims));
      if (t) {
        if (zero && *bytes > 0) std::memset(t->raw(), 0, static_cast<size_t>(*bytes));
        return t;
      }
      return t.status();
    }
    stats_.unplanned_buffers++;
  }
  return zero ? Tensor::create(dtype, std::move(dims))
              : Tensor::create_uninitialized(dtype, std::move(dims));
}

KernelContext::OutputAllocator LoweredMemory::output_allocator(
    const std::vector<int>& step_outputs) {
  return [this, &step_outputs](size_t i, DType dtype, const std::vector<int64_t>& dims, bool zero) {
    if (i >= step_outputs.size() || step_outputs[i] < 0 || !plan_ || !planned(step_outputs[i]))
      return Tensor();
    auto t = allocate(step_outputs[i], dtype, dims, zero);
    return t ? std::move(t).value() : Tensor();
  };
}

Expected<Tensor> LoweredMemory::adopt_output(int b, Tensor t) {
  if (!t.defined() || !arena_.contains(t.raw())) return t;
  int r = b >= 0 && static_cast<size_t>(b) < request_of_buffer_.size() ? request_of_buffer_[b] : -1;
  if (plan_ && r >= 0 && t.raw() == arena_.address(plan_->offsets[r])) return t;
  return t.try_clone();
}

}  // namespace ferrite
