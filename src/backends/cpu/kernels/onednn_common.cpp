#include "backends/cpu/kernels/onednn_common.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iterator>

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

bool is_reference_impl(const dnnl::primitive_desc_base& pd) {
  const char* impl = pd.impl_info_str();
  return impl && std::strncmp(impl, "ref", 3) == 0;
}

memory::desc plain_desc(const Dims& dims) {
  Dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;)
    strides[i - 1] = strides[i] * std::max<int64_t>(dims[i], 1);
  return memory::desc(dims, memory::data_type::f32, strides);
}

memory::desc strided_desc(const Dims& dims, const Dims& strides) {
  return memory::desc(dims, memory::data_type::f32, strides);
}

bool is_constant_input(const Node& node, size_t i, const Tensor& t) {
  const Value* v = node.input(i);
  return v && v->constant && v->constant->raw() == t.raw() && v->constant->dims() == t.dims();
}

bool packable_gemm_weight(const Node& node, size_t i, const Tensor& t) {
  return is_constant_input(node, i, t) && !t.borrowed();
}

memory wrap(const memory::desc& md, const void* ptr) {
  return memory(md, engine(), const_cast<void*>(ptr));
}

namespace {

std::string desc_bytes(const memory::desc& md) {
  return std::string(reinterpret_cast<const char*>(&md.data), sizeof(md.data));
}

struct ReorderPlan {
  dnnl::reorder prim;
  memory::desc scratchpad;
};

Cache<ReorderPlan>& reorder_cache() {
  static Cache<ReorderPlan> cache;
  return cache;
}

}  // namespace

void reorder(const memory& src, const memory& dst) {
  const memory::desc have = src.get_desc(), want = dst.get_desc();
  std::string key = desc_bytes(have) + desc_bytes(want);
  auto r = reorder_cache().get(key, [&] {
    dnnl::reorder::primitive_desc pd(engine(), have, engine(), want, base_attr());
    return std::make_shared<const ReorderPlan>(
        ReorderPlan{dnnl::reorder(pd), pd.scratchpad_desc()});
  });
  execute(r->prim, r->scratchpad, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
}

namespace {

// Reordered constants. The pinned tensor keeps the source storage alive, so a key's address
// always means the same data.
struct Packed {
  memory::desc have, want;
  Tensor pinned;
  memory mem;
};

class PackedCache {
 public:
  memory get(const Tensor& owner, const void* ptr, const memory::desc& have,
             const memory::desc& want) {
    // A borrowed tensor's memory may change between sessions: its key is the borrow, and the
    // entry does not pin it (the packed copy is all the entry needs). The layouts are compared
    // as descriptors, not as part of the key: this lookup runs on every call of a convolution
    // or GEMM with constant weights, and two descriptors as key bytes made it a 1.4 KB string
    // to build, hash and compare each time.
    std::string key = owner.borrowed()
                          ? "b" + std::to_string(owner.borrow_id()) + ":" +
                                std::to_string(reinterpret_cast<uintptr_t>(ptr) -
                                               reinterpret_cast<uintptr_t>(owner.raw()))
                          : std::to_string(reinterpret_cast<uintptr_t>(ptr));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (const Packed* hit = find(key, have, want)) return hit->mem;
    }
    memory out(want, engine());
    reorder(wrap(have, ptr), out);
    std::lock_guard<std::mutex> lock(mu_);
    // Another thread may have packed the same entry meanwhile: the first one stays.
    if (const Packed* hit = find(key, have, want)) return hit->mem;
    size_t bytes = want.get_size();
    // Bounded: a process that loads many models must not keep all their weights forever.
    if (total_ + bytes > (size_t{2} << 30)) {
      map_.clear();
      total_ = 0;
    }
    map_[key].push_back(Packed{have, want, owner.borrowed() ? Tensor() : owner, out});
    total_ += bytes;
    return out;
  }

 private:
  // Under mu_.
  const Packed* find(const std::string& key, const memory::desc& have, const memory::desc& want) {
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    for (const Packed& p : it->second)
      if (p.have == have && p.want == want) return &p;
    return nullptr;
  }

  std::mutex mu_;
  std::unordered_map<std::string, std::vector<Packed>> map_;  // by source; one per layout pair
  size_t total_ = 0;
};

}  // namespace

dnnl::primitive_attr base_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void execute(const dnnl::primitive& prim, const memory::desc& scratchpad_md,
             std::unordered_map<int, memory> args) {
  if (scratchpad_md.get_size() > 0)
    args.emplace(DNNL_ARG_SCRATCHPAD, scratch(scratchpad_md, kScratchpadSlot));
  prim.execute(stream(), args);
  stream().wait();
}

memory scratch(const memory::desc& md, int slot) {
  struct Buffer {
    std::unique_ptr<float, decltype(&std::free)> p{nullptr, &std::free};
    size_t bytes = 0;
  };
  thread_local Buffer buffers[kScratchSlots];
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

memory operand(const Tensor* owner, const void* ptr, const memory::desc& have,
               const memory::desc& want, int slot) {
  if (have == want) return wrap(have, ptr);
  if (owner) {
    static PackedCache cache;
    return cache.get(*owner, ptr, have, want);
  }
  memory out = scratch(want, slot);
  reorder(wrap(have, ptr), out);
  return out;
}

namespace {
std::atomic<int64_t> g_fallbacks{0};
}  // namespace

Status run_reference(KernelContext& ctx) {
  g_fallbacks.fetch_add(1, std::memory_order_relaxed);
  return ctx.node().schema->kernel(ctx);
}

bool can_fuse_activation(const Activation& a) {
  if (a.fn && a.fn->epilogue_loop_faster && a.fn->epilogue_loop_faster()) return false;
  return !a.fn || (a.fn->onednn != OnednnEltwise::kNone && a.fn->onednn_keeps_nan);
}

namespace {
// The oneDNN algorithm of each OnednnEltwise (in the enum's order).
constexpr dnnl::algorithm kOnednnAlgorithm[] = {dnnl::algorithm::undef,
                                                dnnl::algorithm::eltwise_relu,
                                                dnnl::algorithm::eltwise_tanh,
                                                dnnl::algorithm::eltwise_logistic,
                                                dnnl::algorithm::eltwise_gelu_erf,
                                                dnnl::algorithm::eltwise_gelu_tanh,
                                                dnnl::algorithm::eltwise_clip,
                                                dnnl::algorithm::eltwise_linear,
                                                dnnl::algorithm::eltwise_hardswish,
                                                dnnl::algorithm::eltwise_swish};
static_assert(std::size(kOnednnAlgorithm) == static_cast<size_t>(OnednnEltwise::kSwish) + 1);
}  // namespace

void append_activation(dnnl::post_ops& po, const Activation& a) {
  if (!a.fn || a.fn->onednn == OnednnEltwise::kNone) return;
  // alpha and beta are the row's parameters, 0 where it has fewer.
  // Swish's alpha is the sigmoid's slope: 1 for SiLU, which has no parameters.
  const float alpha = a.fn->onednn == OnednnEltwise::kSwish ? 1.0f
                      : a.fn->n_params > 0                  ? a.alpha
                                                            : 0.0f;
  const float beta = a.fn->n_params > 1 ? a.beta : 0.0f;
  po.append_eltwise(1.0f, kOnednnAlgorithm[static_cast<int>(a.fn->onednn)], alpha, beta);
  if (a.fn->onednn == OnednnEltwise::kLinearThenClip01)
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, 0.0f, 1.0f);
}

void apply_epilogue(float* __restrict y, const float* __restrict res, int64_t n,
                    const Activation& a) {
  if (a.none()) {
    if (res)
      for (int64_t i = 0; i < n; ++i) y[i] += res[i];
    return;
  }
  // The table's epilogue loop: one vectorised pass, unlike a call per element.
  const float p[2] = {a.alpha, a.beta};
  a.fn->ref.f32_epilogue(y, res, n, p);
}

bool input_is_f32(const Node& node, size_t i) {
  const Value* v = node.input(i);
  return v && v->type.dtype == DType::kF32;
}

}  // namespace ferrite::onednn

namespace ferrite {
int64_t cpu_library_fallbacks() {
  return onednn::g_fallbacks.load(std::memory_order_relaxed);
}
}  // namespace ferrite
