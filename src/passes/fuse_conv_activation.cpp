// fuse-conv-activation: a Conv and the elementwise ops that follow it become one
// ferrite.FusedConv(x, w, b?, residual?) {Conv's attributes, activation}, computing
//   act(Conv(x, w, b) + residual)
// The Conv is followed, each optional and in this order, by Add of a residual of exactly the
// Conv output's type (either operand order; ResNet's shortcut, MobileNetV2's inverted-residual
// sum) and an activation (ops/activation_epilogue.h: Relu, Clip with constant bounds (ReLU6),
// LeakyRelu, Sigmoid, HardSigmoid, HardSwish, Tanh, Gelu). At least one of them must be there.
// Every absorbed intermediate must be used only by the next op of the chain and must not be a
// graph output. Runs after fold-conv-batchnorm, which needs the bare Conv -> BatchNormalization.
#include "ops/activation_epilogue.h"
#include "passes/rewrite_util.h"

namespace ferrite {

namespace {

using namespace rewrite;

struct Match {
  Node* conv = nullptr;
  Value* residual = nullptr;
  Activation activation;
  Value* cur = nullptr;  // output of the last matched node
  std::vector<const Node*> nodes;
};

std::optional<Match> match(const Graph& g, const Uses& uses, Node& conv) {
  if (!is_op(&conv, "Conv") || conv.inputs.size() < 2) return std::nullopt;
  Match m;
  m.conv = &conv;
  m.cur = conv.outputs[0];
  m.nodes.push_back(&conv);
  if (!is_float_dtype(m.cur->type.dtype) || !fully_known(m.cur->type.shape)) return std::nullopt;
  Node* u = sole_user(g, uses, m.cur);
  if (is_op(u, "Add", 2) && u->inputs[0] != u->inputs[1]) {
    Value* r = other_operand(*u, m.cur);
    if (r && same_type(r->type, m.cur->type) && same_type(u->outputs[0]->type, m.cur->type)) {
      m.residual = r;
      m.nodes.push_back(u);
      m.cur = u->outputs[0];
      u = sole_user(g, uses, m.cur);
    }
  }
  if (u && !u->inputs.empty() && u->inputs[0] == m.cur) {
    auto act = activation_of_onnx_node(*u, scalar_constant);
    if (act && same_type(u->outputs[0]->type, m.cur->type)) {
      m.activation = *act;
      m.nodes.push_back(u);
      m.cur = u->outputs[0];
    }
  }
  if (m.nodes.size() == 1) return std::nullopt;
  return m;
}

class FuseConvActivation : public Pass {
 public:
  std::string name() const override { return "fuse-conv-activation"; }
  Expected<bool> run(Graph& g) override {
    return rewrite_anchored(g, name(), {"Conv"}, [](RewriteContext& c, Node& conv) {
      auto m = match(c.g, c.uses, conv);
      return m && apply(c.g, c.uses, *m, c.dead);
    });
  }

 private:
  static bool apply(Graph& g, const Uses& uses, const Match& m,
                    std::unordered_set<const Node*>& dead) {
    std::vector<Value*> inputs{m.conv->input(0), m.conv->input(1), m.conv->input(2), m.residual};
    while (!inputs.back()) inputs.pop_back();
    AttributeMap attrs = m.conv->attrs;
    set_activation_attrs(attrs, m.activation);
    return replace_subgraph(g, uses, m.nodes, m.cur, dead, kFerriteDomain, "FusedConv",
                            kFerriteOpset, std::move(inputs), std::move(attrs),
                            m.conv->name + "_fused");
  }
};

}  // namespace

FERRITE_REGISTER_PASSES(fuse_conv_activation) {
  // Right after fold-conv-batchnorm, which needs the bare Conv.
  r.add({"fuse-conv-activation",
         "fuse Conv with a residual Add and an activation into ferrite.FusedConv",
         [] { return std::make_unique<FuseConvActivation>(); },
         {{Stage::kRewrite, 20}},
         {},
         {"ferrite.FusedConv"}});
}

}  // namespace ferrite
