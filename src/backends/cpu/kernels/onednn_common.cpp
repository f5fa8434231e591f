#include "backends/cpu/kernels/onednn_common.h"

#include <atomic>

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/cpu/kernels/kernel_stats.h"
#include "ops/op_schema.h"

namespace ferrite::onednn {

static_assert(DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP,
              "ferrite sets oneDNN's thread count through OpenMP; this oneDNN uses another "
              "CPU runtime");

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

ThreadScope::ThreadScope(int n) : prev_(omp_get_max_threads()) {
  if (n < 1) n = 1;
  if (n != prev_) omp_set_num_threads(n);
}

ThreadScope::~ThreadScope() {
  if (omp_get_max_threads() != prev_) omp_set_num_threads(prev_);
}

int current_threads() { return omp_get_max_threads(); }

bool is_reference_impl(const dnnl::primitive_desc_base& pd) {
  const char* impl = pd.impl_info_str();
  return impl && std::strncmp(impl, "ref", 3) == 0;
}

memory::desc plain_desc(const Dims& dims) {
  Dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * std::max<int64_t>(dims[i], 1);
  return memory::desc(dims, memory::data_type::f32, strides);
}

memory::desc strided_desc(const Dims& dims, const Dims& strides) {
  return memory::desc(dims, memory::data_type::f32, strides);
}

bool is_constant_input(const Node& node, size_t i, const Tensor& t) {
  const Value* v = node.input(i);
  return v && v->constant && v->constant->raw() == t.raw() && v->constant->dims() == t.dims();
}

memory wrap(const memory::desc& md, const Tensor& t) {
  return memory(md, engine(), const_cast<void*>(t.raw()));
}

memory wrap(const memory::desc& md, Tensor& t) { return memory(md, engine(), t.raw()); }

namespace {

std::string desc_bytes(const memory::desc& md) {
  return std::string(reinterpret_cast<const char*>(&md.data), sizeof(md.data));
}

Cache<dnnl::reorder>& reorder_cache() {
  static Cache<dnnl::reorder> cache;
  return cache;
}

}  // namespace

void reorder(const memory& src, const memory& dst) {
  const memory::desc have = src.get_desc(), want = dst.get_desc();
  std::string key = desc_bytes(have) + desc_bytes(want) + std::to_string(current_threads());
  auto r = reorder_cache().get(key, [&] {
    return std::make_shared<const dnnl::reorder>(
        dnnl::reorder::primitive_desc(engine(), have, engine(), want));
  });
  r->execute(stream(), const_cast<memory&>(src), const_cast<memory&>(dst));
  stream().wait();
}

namespace {

// Reordered constants. The pinned tensor keeps the source storage alive, so a key's address
// always means the same data.
struct Packed {
  Tensor pinned;
  memory mem;
  size_t bytes;
};

class PackedCache {
 public:
  memory get(const Tensor& t, const memory::desc& have, const memory::desc& want) {
    std::string key = std::to_string(reinterpret_cast<uintptr_t>(t.raw())) + ":" +
                      desc_bytes(have) + desc_bytes(want);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = map_.find(key);
      if (it != map_.end()) return it->second.mem;
    }
    memory out(want, engine());
    reorder(wrap(have, t), out);
    std::lock_guard<std::mutex> lock(mu_);
    size_t bytes = want.get_size();
    // Bounded: a process that loads many models must not keep all their weights forever.
    if (total_ + bytes > (size_t{2} << 30)) {
      map_.clear();
      total_ = 0;
    }
    auto [it, inserted] = map_.emplace(key, Packed{t, out, bytes});
    if (inserted) total_ += bytes;
    return it->second.mem;
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, Packed> map_;
  size_t total_ = 0;
};

}  // namespace

memory scratch(const memory::desc& md, int slot) {
  struct Buffer {
    std::unique_ptr<float, decltype(&std::free)> p{nullptr, &std::free};
    size_t bytes = 0;
  };
  thread_local Buffer buffers[4];
  Buffer& b = buffers[slot];
  const size_t need = std::max<size_t>(md.get_size(), 64);
  if (b.bytes < need) {
    const size_t bytes = (need + 4095) / 4096 * 4096;
    void* p = std::aligned_alloc(4096, bytes);
    if (!p) throw dnnl::error(dnnl_out_of_memory, "scratch allocation failed");
    b.p.reset(static_cast<float*>(p));
    b.bytes = bytes;
  }
  return memory(md, engine(), b.p.get());
}

memory operand(const Tensor& t, const memory::desc& have, const memory::desc& want, bool constant,
               int slot) {
  if (have == want) return wrap(have, t);
  if (constant) {
    static PackedCache cache;
    return cache.get(t, have, want);
  }
  memory out = scratch(want, slot);
  reorder(wrap(have, t), out);
  return out;
}

namespace {
std::atomic<int64_t> g_fallbacks{0};
}  // namespace

Status run_reference(KernelContext& ctx) {
  g_fallbacks.fetch_add(1, std::memory_order_relaxed);
  return ctx.node().schema->kernel(ctx);
}

bool input_is_f32(const Node& node, size_t i) {
  const Value* v = node.input(i);
  return v && v->type.dtype == DType::kF32;
}

}  // namespace ferrite::onednn

namespace ferrite {
int64_t cpu_library_fallbacks() { return onednn::g_fallbacks.load(std::memory_order_relaxed); }
}  // namespace ferrite
