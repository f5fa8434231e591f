// decompose-batchnorm: an inference-mode BatchNormalization with constant parameters that no
// Conv took (fold-conv-batchnorm runs first) becomes
//   Add(Mul(X, scale), shift),  scale = gamma / sqrt(var + eps),  shift = beta - mean * scale
// with scale and shift computed in double and shaped [C, 1, ...] to broadcast over X's channel
// axis. Pre-activation nets (DenseNet, pre-act ResNets) put BatchNormalization after a Concat or
// an Add, where no Conv can absorb it; as two pointwise ops it fuses into the generated kernel of
// its neighbours (the Relu after it, the producer before it) instead of running as a library
// step, and layout passes carry it like any pointwise op.
#include <cmath>

#include "passes/rewrite_util.h"

namespace ferrite {

namespace {

using namespace rewrite;

Tensor channel_constant(DType dt, const std::vector<double>& v, size_t x_rank) {
  std::vector<int64_t> dims{static_cast<int64_t>(v.size())};
  dims.resize(x_rank - 1, 1);  // [C, 1, ...]: aligned with axis 1 of X
  Tensor t = Tensor::zeros(dt, dims);
  visit_dtype(dt, [&]<class T>() {
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = convert<T>(convert<compute_t<T>>(v[i]));
  });
  return t;
}

int decompose(RewriteContext& c, Node& bn) {
  Graph& g = c.g;
  if (bn.inputs.size() != 5 || bn.attr_int("training_mode", 0) != 0 || bn.outputs.empty()) return 0;
  for (size_t i = 1; i < bn.outputs.size(); ++i)  // running statistics must be unused
    if (bn.outputs[i] && (use_count(c.uses, bn.outputs[i]) || is_graph_output(g, bn.outputs[i])))
      return 0;
  Value* x = bn.input(0);
  Value* y = bn.outputs[0];
  if (!x || !is_float_dtype(x->type.dtype) || !x->type.shape.rank_known() ||
      x->type.shape.rank() < 2 || !(x->type == y->type))
    return 0;
  const Dim& cdim = x->type.shape[1];
  if (!cdim.is_static()) return 0;
  const int64_t ch = *cdim.value();
  std::vector<double> p[4];  // gamma, beta, mean, var
  for (int i = 0; i < 4; ++i) {
    const Tensor* t = constant_of(bn.input(i + 1));
    if (!t || t->rank() != 1 || t->numel() != ch) return 0;
    p[i].resize(static_cast<size_t>(ch));
    for (int64_t k = 0; k < ch; ++k) p[i][k] = t->double_at(k);
  }
  const double eps = bn.attr_float("epsilon", 1e-5f);
  std::vector<double> scale(static_cast<size_t>(ch)), shift(static_cast<size_t>(ch));
  for (int64_t k = 0; k < ch; ++k) {
    scale[k] = p[0][k] / std::sqrt(p[3][k] + eps);
    shift[k] = p[1][k] - p[2][k] * scale[k];
  }
  const size_t rank = x->type.shape.rank();
  const DType dt = x->type.dtype;
  if (!replaceable(g, c.uses, {&bn}, y, c.dead)) return 0;
  Value* s = g.add_initializer(bn.name + "_scale", channel_constant(dt, scale, rank));
  Value* b = g.add_initializer(bn.name + "_shift", channel_constant(dt, shift, rank));
  const int opset = onnx_opset_at_least(g, 7);
  Node* mul = insert_node(g, "", "Mul", opset, {x, s}, {}, &bn, bn.name + "_mul");
  if (!mul) return 0;
  if (!swap_in_node(g, {&bn}, y, c.dead, "", "Add", opset, {mul->outputs[0], b}, {},
                    bn.name + "_add")) {
    discard_node(g, mul);
    return 0;
  }
  return 1;
}

class DecomposeBatchNorm : public Pass {
 public:
  std::string name() const override { return "decompose-batchnorm"; }
  Expected<bool> run(Graph& g) override {
    return rewrite_anchored(g, name(), {"BatchNormalization"}, decompose);
  }
};

}  // namespace

FERRITE_REGISTER_PASSES(decompose_batchnorm) {
  // After fold-conv-batchnorm (which folds a BatchNormalization into the Conv before it, better
  // than two pointwise ops), before fuse-conv-activation (which may then take the Mul/Add chain
  // of a BatchNormalization that follows a Conv it could not fold into).
  r.add({"decompose-batchnorm",
         "inference BatchNormalization that no Conv absorbed -> Mul and Add by per-channel "
         "constants (pointwise ops the kernels fuse)",
         [] { return std::make_unique<DecomposeBatchNorm>(); },
         {{Stage::kRewrite, 15}}});
}

}  // namespace ferrite
