#include "backends/cpu/cpu_library.h"

namespace ferrite {

namespace {

bool low_float(DType t) {
  return t == DType::kBF16 || t == DType::kF16;
}

// bf16 / f16 values widened to f32 (exact).
Tensor widen(const Tensor& t) {
  Tensor r = Tensor::create_uninitialized(DType::kF32, t.dims()).value();
  float* d = r.data<float>();
  if (t.dtype() == DType::kBF16) {
    const BFloat16* x = t.data<BFloat16>();
    for (int64_t i = 0; i < t.numel(); ++i) d[i] = static_cast<float>(x[i]);
  } else {
    const Half* x = t.data<Half>();
    for (int64_t i = 0; i < t.numel(); ++i) d[i] = static_cast<float>(x[i]);
  }
  return r;
}

// f32 `from` rounded into bf16 / f16 `to` (same element count).
void narrow(const Tensor& from, Tensor& to) {
  const float* x = from.data<float>();
  if (to.dtype() == DType::kBF16) {
    BFloat16* d = to.data<BFloat16>();
    for (int64_t i = 0; i < from.numel(); ++i) d[i] = BFloat16(x[i]);
  } else {
    Half* d = to.data<Half>();
    for (int64_t i = 0; i < from.numel(); ++i) d[i] = Half(x[i]);
  }
}

}  // namespace

// A bf16 / f16 library node seen as its f32 twin, so that the cpu kernels that take f32 (oneDNN
// GEMM and convolution, attention, pooling) run it: inputs widen exactly, the f32 kernel runs,
// outputs round once to the node's dtype. That is what the op table's kernels compute (float
// arithmetic, one rounding per output), without their scalar single-threaded loops.
struct CpuLibraryState::WideNode {
  Node node;
  std::vector<std::unique_ptr<Value>> values;
  const CpuKernel* kernel = nullptr;
};

// The f32 twin of a bf16 / f16 library node whose op has a cpu kernel, or null.
const CpuLibraryState::WideNode* CpuLibraryState::widened(const Node& n) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = wide_.find(&n);
  if (it != wide_.end()) return it->second.get();
  auto w = std::make_shared<WideNode>();
  w->node = n;
  bool low = false;
  auto twin = [&](Value*& v) {
    if (!v || !low_float(v->type.dtype)) return;
    auto c = std::make_unique<Value>(*v);
    c->type.dtype = DType::kF32;
    if (c->constant) c->constant = widen(*c->constant);
    v = c.get();
    w->values.push_back(std::move(c));
    low = true;
  };
  for (Value*& v : w->node.inputs) twin(v);
  for (Value*& v : w->node.outputs) twin(v);
  w->kernel = low ? CpuKernelRegistry::global().find(w->node) : nullptr;
  if (!w->kernel) w.reset();
  return (wide_[&n] = std::move(w)).get();
}

bool CpuLibraryState::accepts(const Node& n) {
  return CpuKernelRegistry::global().find(n) || widened(n);
}

Status CpuLibraryState::run(KernelContext& ctx) {
  const Node& node = ctx.node();
  if (const CpuKernel* k = CpuKernelRegistry::global().find(node)) return k->run(ctx, pool);
  const WideNode* w = widened(node);
  if (!w) return node.schema->kernel(ctx);
  const size_t n_in = ctx.num_inputs();
  std::vector<Tensor> wide_in(n_in);
  std::vector<const Tensor*> wins(n_in, nullptr);
  for (size_t i = 0; i < n_in; ++i) {
    if (!ctx.has_input(i)) continue;
    wins[i] = &ctx.input(i);
    if (!low_float(wins[i]->dtype())) continue;
    // Constants (weights) are widened once: the kernels then see the same f32 tensor every run
    // and keep their prepacked copies of it.
    const Value* v = node.input(i);
    const Value* tw = w->node.input(i);
    if (v && v->constant && tw->constant && v->constant->raw() == wins[i]->raw() &&
        v->constant->dims() == wins[i]->dims()) {
      wins[i] = &*tw->constant;
      continue;
    }
    wide_in[i] = widen(*wins[i]);
    wins[i] = &wide_in[i];
  }
  std::vector<Tensor> wouts(ctx.num_outputs());
  KernelContext wctx(w->node, std::move(wins), wouts);
  FERRITE_RETURN_IF_ERROR(w->kernel->run(wctx, pool));
  for (size_t i = 0; i < wouts.size(); ++i) {
    const Value* v = node.output(i);
    if (!v || !wouts[i].defined()) continue;
    if (wouts[i].dtype() == v->type.dtype) {
      ctx.set_output(i, std::move(wouts[i]));
      continue;
    }
    FERRITE_ASSIGN_OR_RETURN(Tensor * o,
                             ctx.allocate_output_uninitialized(i, v->type.dtype, wouts[i].dims()));
    narrow(wouts[i], *o);
  }
  return Status::ok();
}

std::shared_ptr<const LibraryOps> cpu_library_ops() {
  static const std::shared_ptr<const LibraryOps> table = [] {
    auto t = std::make_shared<LibraryOps>();
    LibraryOp op;
    op.accepts = [](const Node& n, void* s) {
      return static_cast<CpuLibraryState*>(s)->accepts(n);
    };
    op.run_host = [](KernelContext& ctx, void* s) {
      return static_cast<CpuLibraryState*>(s)->run(ctx);
    };
    for (OpId id : CpuKernelRegistry::global().ops()) t->add(id, op);
    return t;
  }();
  return table;
}

}  // namespace ferrite
