// fuse-silu: Mul(x, Sigmoid(x)) (either operand order) becomes ferrite.Silu(x), the SiLU / Swish
// activation of EfficientNet, Llama's MLP gate and most recent CNNs, which PyTorch exports as the
// two ops. As one scalar function it fuses into a convolution's or GEMM's epilogue
// (fuse-conv-activation, fuse-matmul-epilogue run after it), where the two ops would cost a
// pass over memory after the library call. The Sigmoid must feed nothing but the Mul.
#include "passes/rewrite_util.h"

namespace ferrite {

namespace {

using namespace rewrite;

int fuse(RewriteContext& c, Node& mul) {
  if (!is_op(&mul, "Mul", 2)) return 0;
  for (int i = 0; i < 2; ++i) {
    Value* s = mul.inputs[i];
    Value* x = mul.inputs[1 - i];
    Node* sig = producer_op(s, "Sigmoid");
    if (!sig || sig->inputs.size() != 1 || sig->inputs[0] != x) continue;
    if (!is_float_dtype(x->type.dtype) || !same_type(x->type, mul.outputs[0]->type)) continue;
    if (!used_only_by(c.g, c.uses, s, {&mul})) continue;
    const std::vector<const Node*> nodes{sig, &mul};
    if (replace_subgraph(c.g, c.uses, nodes, mul.outputs[0], c.dead, kFerriteDomain, "Silu",
                         kFerriteOpset, {x}, {}, mul.name.empty() ? "silu" : mul.name))
      return 1;
  }
  return 0;
}

class FuseSilu : public Pass {
 public:
  std::string name() const override { return "fuse-silu"; }
  Expected<bool> run(Graph& g) override { return rewrite_anchored(g, name(), {"Mul"}, fuse); }
};

}  // namespace

FERRITE_REGISTER_PASSES(fuse_silu) {
  // Before fuse-conv-activation (20) and fuse-matmul-epilogue, which take ferrite.Silu as an
  // activation; after the batch-norm folds, which want the bare Conv.
  r.add({"fuse-silu",
         "recognise Mul(x, Sigmoid(x)) as ferrite.Silu (SiLU / Swish)",
         [] { return std::make_unique<FuseSilu>(); },
         {{Stage::kRewrite, 17}}});
}

}  // namespace ferrite
