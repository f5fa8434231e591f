// fuse-gelu: the decomposed GELU subgraphs that exporters emit become one ONNX Gelu (opset 20):
//   erf:   0.5 * x * (1 + erf(x / sqrt(2)))          (x / 1.4142 or x * 0.7071)
//   tanh:  0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))   (Pow(x, 3) or x * x * x)
// with the final product in any association and operand order: ((x * a) * 0.5), ((0.5 * a) * x),
// ((x * 0.5) * a). Constants are compared numerically (relative 1e-4: exporters round them),
// never by bits. Every removed intermediate must be used only inside the pattern, and the Gelu
// must have exactly the type of the value it replaces (a constant that broadcasts the result to a
// bigger shape keeps the subgraph as it is). The Gelu node gets opset max(model, 20); the other
// nodes keep theirs.
#include <cmath>

#include "passes/rewrite_util.h"

namespace ferrite {

namespace {

using namespace rewrite;

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubeCoeff = 0.044715;

struct Match {
  Value* x = nullptr;
  Value* y = nullptr;              // the value the Gelu replaces
  std::vector<const Node*> nodes;  // removed nodes; the last one produces y
  std::string approximate;
};

// n is a binary default-domain `op` node with `x` as one operand and a one-element constant
// near `c` as the other.
bool is_op_with_const(const Node* n, const char* op, const Value* x, double c, double tol = 1e-4) {
  if (!n || !n->domain.empty() || n->op_type != op || n->inputs.size() != 2) return false;
  if (std::string(op) == "Div" || std::string(op) == "Pow" || std::string(op) == "Sub") {
    if (n->inputs[0] != x) return false;
  }
  auto v = scalar_constant(other_operand(*n, x));
  return v && near(*v, c, tol);
}

bool is_mul(const Node* n) {
  return n && n->domain.empty() && n->op_type == "Mul" && n->inputs.size() == 2 &&
         n->inputs[0] != n->inputs[1];
}

// Completes 0.5 * x * a from a = 1 + f(x): appends the product nodes and sets m.y.
bool match_product(const Graph& g, const Uses& uses, Value* a, Match& m) {
  Node* m1 = sole_user(g, uses, a);
  if (!is_mul(m1)) return false;
  Value* o = other_operand(*m1, a);
  m.nodes.push_back(m1);
  if (o == m.x || is_op_with_const(m1, "Mul", a, 0.5)) {
    // (x * a) * 0.5  or  (a * 0.5) * x
    Node* m2 = sole_user(g, uses, m1->outputs[0]);
    if (!is_mul(m2)) return false;
    if (o == m.x ? !is_op_with_const(m2, "Mul", m1->outputs[0], 0.5)
                 : other_operand(*m2, m1->outputs[0]) != m.x)
      return false;
    m.nodes.push_back(m2);
    m.y = m2->outputs[0];
    return true;
  }
  // (x * 0.5) * a
  Node* h = o ? o->producer : nullptr;
  if (!is_op_with_const(h, "Mul", m.x, 0.5) || sole_user(g, uses, o) != m1) return false;
  m.nodes.push_back(h);
  m.y = m1->outputs[0];
  return true;
}

// a = Add(t, 1) with t the single-use output of node `f` (Erf or Tanh).
Value* plus_one(const Graph& g, const Uses& uses, const Node& f) {
  Node* add = sole_user(g, uses, f.outputs[0]);
  return is_op_with_const(add, "Add", f.outputs[0], 1.0) ? add->outputs[0] : nullptr;
}

std::optional<Match> match_erf(const Graph& g, const Uses& uses, const Node& erf) {
  Match m;
  Node* d = erf.inputs.size() == 1 && erf.inputs[0] ? erf.inputs[0]->producer : nullptr;
  if (!d || !d->domain.empty() || d->inputs.size() != 2 ||
      sole_user(g, uses, d->outputs[0]) != &erf)
    return std::nullopt;
  for (Value* x : d->inputs) {
    if (is_op_with_const(d, "Div", x, kSqrt2) || is_op_with_const(d, "Mul", x, 1 / kSqrt2)) {
      m.x = x;
      break;
    }
  }
  if (!m.x) return std::nullopt;
  Value* a = plus_one(g, uses, erf);
  if (!a) return std::nullopt;
  m.nodes = {d, &erf, a->producer};
  if (!match_product(g, uses, a, m)) return std::nullopt;
  m.approximate = "none";
  return m;
}

// v = x^3 as Pow(x, 3), Mul(Mul(x, x), x) or Mul(x, Mul(x, x)); returns x and the nodes.
Value* match_cube(const Graph& g, const Uses& uses, Value* v, std::vector<const Node*>& nodes) {
  Node* p = v ? v->producer : nullptr;
  if (!p || !p->domain.empty() || p->inputs.size() != 2) return nullptr;
  if (p->op_type == "Pow" && is_op_with_const(p, "Pow", p->inputs[0], 3.0, 1e-6)) {
    nodes.push_back(p);
    return p->inputs[0];
  }
  if (p->op_type != "Mul") return nullptr;
  for (int i = 0; i < 2; ++i) {
    Value* sq = p->inputs[i];
    Value* x = p->inputs[1 - i];
    Node* s = sq ? sq->producer : nullptr;
    if (s && s->domain.empty() && s->op_type == "Mul" && s->inputs.size() == 2 &&
        s->inputs[0] == x && s->inputs[1] == x && sole_user(g, uses, sq) == p) {
      nodes.push_back(s);
      nodes.push_back(p);
      return x;
    }
  }
  return nullptr;
}

std::optional<Match> match_tanh(const Graph& g, const Uses& uses, const Node& tanh) {
  Match m;
  // s = inner * sqrt(2/pi)
  Value* s = tanh.inputs.size() == 1 ? tanh.inputs[0] : nullptr;
  Node* sn = s ? s->producer : nullptr;
  if (!is_mul(sn) || sole_user(g, uses, s) != &tanh) return std::nullopt;
  Value* inner = nullptr;
  for (Value* c : sn->inputs)
    if (is_op_with_const(sn, "Mul", c, kSqrt2OverPi)) inner = c;
  Node* in = inner ? inner->producer : nullptr;
  if (!in || !in->domain.empty() || in->op_type != "Add" || in->inputs.size() != 2 ||
      sole_user(g, uses, inner) != sn)
    return std::nullopt;
  // inner = x + 0.044715 * x^3
  for (int i = 0; i < 2 && !m.x; ++i) {
    Value* scaled = in->inputs[i];
    Node* sc = scaled ? scaled->producer : nullptr;
    if (!is_mul(sc) || sole_user(g, uses, scaled) != in) continue;
    for (Value* cube : sc->inputs) {
      if (!is_op_with_const(sc, "Mul", cube, kCubeCoeff) || sole_user(g, uses, cube) != sc)
        continue;
      std::vector<const Node*> cube_nodes;
      Value* x = match_cube(g, uses, cube, cube_nodes);
      if (!x || in->inputs[1 - i] != x) continue;
      m.x = x;
      m.nodes = cube_nodes;
      m.nodes.push_back(sc);
      break;
    }
  }
  if (!m.x) return std::nullopt;
  Value* a = plus_one(g, uses, tanh);
  if (!a) return std::nullopt;
  m.nodes.insert(m.nodes.end(), {in, sn, &tanh, a->producer});
  if (!match_product(g, uses, a, m)) return std::nullopt;
  m.approximate = "tanh";
  return m;
}

class FuseGelu : public Pass {
 public:
  std::string name() const override { return "fuse-gelu"; }
  Expected<bool> run(Graph& g) override {
    return rewrite_anchored(g, name(), {"Erf", "Tanh"}, [](RewriteContext& c, Node& anchor) {
      auto m = anchor.op_type == "Erf" ? match_erf(c.g, c.uses, anchor)
                                       : match_tanh(c.g, c.uses, anchor);
      return m && apply(c.g, c.uses, *m, c.dead);
    });
  }

 private:
  static bool apply(Graph& g, const Uses& uses, const Match& m,
                    std::unordered_set<const Node*>& dead) {
    if (!is_float_dtype(m.x->type.dtype) || !same_type(m.x->type, m.y->type)) return false;
    return replace_subgraph(g, uses, m.nodes, m.y, dead, "", "Gelu", onnx_opset_at_least(g, 20),
                            {m.x}, {{"approximate", Attribute(m.approximate)}},
                            m.y->producer->name + "_gelu");
  }
};

}  // namespace

FERRITE_REGISTER_PASSES(fuse_gelu) {
  // Before fuse-matmul-epilogue, which takes the fused Gelu as its activation.
  r.add({"fuse-gelu",
         "recognise the erf and tanh GELU subgraphs as one Gelu",
         [] { return std::make_unique<FuseGelu>(); },
         {{Stage::kRewrite, 40}}});
}

}  // namespace ferrite
