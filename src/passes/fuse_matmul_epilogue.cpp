// fuse-matmul-epilogue: a matrix product and the elementwise ops that follow it become one
// ferrite.FusedMatMul(a, b, bias?, residual?) {activation, transB}, computing
//   act(a @ b + bias) + residual
// The product is
//   - MatMul(a, b) with a, b of rank >= 2;
//   - Gemm(a, b, c?) with transA=0, alpha=1, c absent or 1-D [N] (beta=1), transB kept;
//   - Reshape(Gemm(Reshape(x, [P, K]), ...), x.shape[:-1] + [N]) (GPT-2's Conv1D): the Gemm
//     applied to x directly, since P = prod(x.shape[:-1]);
// followed, each optional and in this order, by Add of a 1-D bias [N] (not for a Gemm that has
// one), an activation (ops/activation_epilogue.h), and Add of a residual of exactly the output's
// shape; not the activation of a gated unit (gates()). A plain MatMul or Gemm needs at least one
// absorbed op to be rewritten. Every absorbed
// intermediate must be used only by the next op of the chain and must not be a graph output.
#include "ops/activation_epilogue.h"
#include "passes/rewrite_util.h"

namespace ferrite {

namespace {

using namespace rewrite;

bool rank_at_least(const Value* v, size_t r) {
  return v && v->type.shape.rank_known() && v->type.shape.rank() >= r;
}

struct Match {
  Value *a = nullptr, *b = nullptr, *bias = nullptr, *residual = nullptr;
  int64_t trans_b = 0;
  Activation activation;
  Value* cur = nullptr;  // output of the last matched node
  std::vector<const Node*> nodes;
  bool absorbed = false;  // something beyond a plain MatMul/Gemm
};

// P == product of x's leading dims and K == x's last dim, symbolically.
bool flattens(const Value* x, const Shape& flat) {
  const Shape& s = x->type.shape;
  if (!fully_known(s) || s.rank() < 2 || !fully_known(flat) || flat.rank() != 2) return false;
  Dim p(1);
  for (size_t i = 0; i + 1 < s.rank(); ++i) p = p * s[i];
  return p == flat[0] && s[s.rank() - 1] == flat[1];
}

std::optional<Match> match_product(const Graph& g, const Uses& uses, Node& n) {
  Match m;
  m.nodes.push_back(&n);
  m.cur = n.outputs[0];
  if (is_op(&n, "MatMul") && n.inputs.size() == 2) {
    m.a = n.inputs[0];
    m.b = n.inputs[1];
    if (!rank_at_least(m.a, 2) || !rank_at_least(m.b, 2)) return std::nullopt;
    return m;
  }
  if (!is_op(&n, "Gemm") || n.inputs.size() < 2 || n.attr_int("transA") != 0 ||
      n.attr_float("alpha", 1.0f) != 1.0f)
    return std::nullopt;
  m.a = n.inputs[0];
  m.b = n.inputs[1];
  m.trans_b = n.attr_int("transB") != 0;
  if (Value* c = n.input(2)) {
    const Shape& cs = c->type.shape;
    const Shape& ys = m.cur->type.shape;
    if (n.attr_float("beta", 1.0f) != 1.0f || !cs.rank_known() || cs.rank() != 1 ||
        !ys.rank_known() || ys.rank() != 2 || !cs[0].is_known() || cs[0] != ys[1])
      return std::nullopt;
    m.bias = c;
  }
  // Reshape sandwich: run the product on the un-flattened input.
  Node* in = m.a->producer;
  Node* out = sole_user(g, uses, m.cur);
  if (is_op(in, "Reshape") && is_op(out, "Reshape") && out->inputs[0] == m.cur &&
      flattens(in->inputs[0], m.a->type.shape)) {
    Value* x = in->inputs[0];
    const Shape& xs = x->type.shape;
    std::vector<Dim> want(xs.dims().begin(), xs.dims().end() - 1);
    want.push_back(m.cur->type.shape[1]);
    if (out->outputs[0]->type.shape == Shape(want) && fully_known(Shape(want))) {
      m.a = x;
      m.nodes.push_back(out);
      m.cur = out->outputs[0];
      m.absorbed = true;
    }
  }
  return m;
}

// The activation of a gated unit, act(x @ Wg) * (x @ Wu) (Llama's SwiGLU, GeGLU): its sole user
// is a Mul by another computed tensor of its type. It stays out of the product's epilogue so that
// the pointwise fusion computes it inside the Mul's kernel: in the epilogue it costs a pass over
// the product wherever the device's GEMM does not compute it (SiLU and exact GELU on cuda: two
// thirds of an H100 Llama MLP's non-GEMM time at 8x128 tokens), and the Mul a second pass.
bool gates(const Graph& g, const Uses& uses, const Node& act) {
  const Value* y = act.outputs[0];
  const Node* mul = sole_user(g, uses, y);
  if (!is_op(mul, "Mul", 2) || mul->inputs[0] == mul->inputs[1]) return false;
  const Value* other = other_operand(*mul, y);
  return other && !constant_of(other) && same_type(other->type, y->type);
}

// Appends the bias, activation and residual ops that follow m.cur.
void match_epilogue(const Graph& g, const Uses& uses, Match& m) {
  const Shape& ys = m.cur->type.shape;
  if (!fully_known(ys) || ys.rank() < 2) return;
  const Dim n = ys[ys.rank() - 1];
  auto advance = [&](Node* u) {
    m.nodes.push_back(u);
    m.cur = u->outputs[0];
    m.absorbed = true;
  };
  Node* u = sole_user(g, uses, m.cur);
  if (!m.bias && is_op(u, "Add") && u->inputs.size() == 2 && u->inputs[0] != u->inputs[1]) {
    Value* bias = other_operand(*u, m.cur);
    const Shape& bs = bias->type.shape;
    if (bs.rank_known() && bs.rank() == 1 && bs[0] == n &&
        same_type(u->outputs[0]->type, m.cur->type)) {
      m.bias = bias;
      advance(u);
      u = sole_user(g, uses, m.cur);
    }
  }
  if (u && !u->inputs.empty() && u->inputs[0] == m.cur) {
    auto act = activation_of_onnx_node(*u, scalar_constant);
    if (act && same_type(u->outputs[0]->type, m.cur->type) && !gates(g, uses, *u)) {
      m.activation = *act;
      advance(u);
      u = sole_user(g, uses, m.cur);
    }
  }
  if (is_op(u, "Add") && u->inputs.size() == 2 && u->inputs[0] != u->inputs[1]) {
    Value* r = other_operand(*u, m.cur);
    if (same_type(r->type, m.cur->type) && same_type(u->outputs[0]->type, m.cur->type)) {
      m.residual = r;
      advance(u);
    }
  }
}

class FuseMatMulEpilogue : public Pass {
 public:
  std::string name() const override { return "fuse-matmul-epilogue"; }
  Expected<bool> run(Graph& g) override {
    return rewrite_anchored(g, name(), {"MatMul", "Gemm"}, [](RewriteContext& c, Node& n) {
      auto m = match_product(c.g, c.uses, n);
      if (!m) return false;
      match_epilogue(c.g, c.uses, *m);
      return m->absorbed && apply(c.g, c.uses, *m, c.dead);
    });
  }

 private:
  static bool apply(Graph& g, const Uses& uses, const Match& m,
                    std::unordered_set<const Node*>& dead) {
    if (!is_float_dtype(m.a->type.dtype)) return false;
    std::vector<Value*> inputs{m.a, m.b, m.bias, m.residual};
    while (!inputs.back()) inputs.pop_back();
    AttributeMap attrs{{"transB", Attribute(m.trans_b)}};
    set_activation_attrs(attrs, m.activation);
    return replace_subgraph(g, uses, m.nodes, m.cur, dead, kFerriteDomain, "FusedMatMul",
                            kFerriteOpset, std::move(inputs), std::move(attrs),
                            m.nodes[0]->name + "_fused");
  }
};

}  // namespace

FERRITE_REGISTER_PASSES(fuse_matmul_epilogue) {
  // Last of the rewrites: after fuse-attention (the attention MatMuls stay its) and fuse-gelu
  // (whose Gelu it absorbs).
  r.add({"fuse-matmul-epilogue",
         "fuse MatMul/Gemm with bias, activation and residual Add into ferrite.FusedMatMul",
         [] { return std::make_unique<FuseMatMulEpilogue>(); },
         {{Stage::kRewrite, 60}},
         {},
         {"ferrite.FusedMatMul"}});
}

}  // namespace ferrite
