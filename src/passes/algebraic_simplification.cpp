// algebraic-simplification: identities with constants (x+0, 0+x, x-0, x*1, 1*x, x/1, x^1), x^2
// as x*x (RMSNorm's Pow(x, 2): a multiply, where pow is a libm call per element),
// Transpose∘Transpose composed into one Transpose (or removed), and Reshape∘Reshape into one
// Reshape. A rewrite applies only when the result keeps the node's output dtype and shape, so
// broadcasting by the constant is never lost.
#include "ops/context.h"
#include "passes/pass.h"

namespace ferrite {

namespace {

bool is_constant_filled_with(const Value* v, double x) {
  if (!v || v->is_graph_input || !v->constant) return false;
  const Tensor& t = *v->constant;
  if (!is_float(t.dtype()) && !is_integer(t.dtype())) return false;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.double_at(i) != x) return false;
  return t.numel() > 0;
}

bool same_type(const Value* a, const Value* b) {
  if (a->type.dtype != b->type.dtype || !a->type.shape.rank_known()) return false;
  for (const Dim& d : a->type.shape.dims())
    if (!d.is_known()) return false;
  return a->type.shape == b->type.shape;
}

// The input that the node reduces to, or null.
Value* identity_operand(const Node& n) {
  if (!n.domain.empty() || n.inputs.size() != 2 || n.outputs.size() != 1 || !n.outputs[0])
    return nullptr;
  Value* a = n.inputs[0];
  Value* b = n.inputs[1];
  Value* out = n.outputs[0];
  auto pick = [&](Value* keep) { return keep && same_type(keep, out) ? keep : nullptr; };
  const std::string& op = n.op_type;
  if (op == "Add") {
    if (is_constant_filled_with(b, 0)) return pick(a);
    if (is_constant_filled_with(a, 0)) return pick(b);
  } else if (op == "Sub") {
    if (is_constant_filled_with(b, 0)) return pick(a);
  } else if (op == "Mul") {
    if (is_constant_filled_with(b, 1)) return pick(a);
    if (is_constant_filled_with(a, 1)) return pick(b);
  } else if (op == "Div" || op == "Pow") {
    if (is_constant_filled_with(b, 1)) return pick(a);
  }
  return nullptr;
}

// Pow(x, 2) with a one-element float constant 2 that does not broadcast x: x.
Value* squared_operand(const Node& n) {
  if (!n.domain.empty() || n.op_type != "Pow" || n.inputs.size() != 2 || n.outputs.size() != 1 ||
      !n.outputs[0])
    return nullptr;
  Value* x = n.inputs[0];
  const Value* e = n.inputs[1];
  if (!x || !e || n.opset < 7 || !e->constant || e->constant->numel() != 1 ||
      !is_float(e->constant->dtype()) || !is_float(x->type.dtype) ||
      !is_constant_filled_with(e, 2) || !same_type(x, n.outputs[0]))
    return nullptr;
  return x;
}

class AlgebraicSimplification : public Pass {
 public:
  std::string name() const override { return "algebraic-simplification"; }
  Expected<bool> run(Graph& g) override {
    bool changed = false;
    std::vector<const Node*> dead;
    for (auto& n : g.nodes()) {
      if (Value* x = squared_operand(*n)) {
        // The exactly rounded square; libm's pow(x, 2) is within an ulp of it.
        n->op_type = "Mul";
        n->inputs = {x, x};
        n->schema = OpRegistry::global().find("", "Mul", n->opset);
        if (!n->schema) return err(n->describe(), ": no Mul at opset ", n->opset);
        FERRITE_RETURN_IF_ERROR(infer_node(*n));
        changed = true;
        continue;
      }
      if (Value* keep = identity_operand(*n)) {
        if (g.replace_all_uses(n->outputs[0], keep)) {
          dead.push_back(n.get());
          changed = true;
        }
        continue;
      }
      FERRITE_ASSIGN_OR_RETURN(bool c, compose_with_producer(*n));
      changed = changed || c;
    }
    g.erase_nodes(dead);
    g.compact();  // composed-away producers die in dead-code-elimination
    return changed;
  }

 private:
  // Transpose(Transpose(x, p), q) -> Transpose(x, p∘q); Reshape(Reshape(x, s), t) -> Reshape(x, t)
  // when t has no 0 entries (0 copies a dim of the *immediate* input). The inner node stays for
  // its other users; dead-code-elimination removes it when it has none.
  static Expected<bool> compose_with_producer(Node& n) {
    if (!n.domain.empty() || n.inputs.empty() || !n.inputs[0] || !n.inputs[0]->producer)
      return false;
    Node& p = *n.inputs[0]->producer;
    if (n.op_type == "Transpose" && p.op_type == "Transpose" && p.domain.empty()) {
      auto outer = n.attr_ints("perm"), inner = p.attr_ints("perm");
      if (outer.empty() || inner.size() != outer.size()) return false;
      std::vector<int64_t> composed(outer.size());
      for (size_t i = 0; i < outer.size(); ++i) composed[i] = inner[outer[i]];
      n.attrs["perm"] = Attribute(composed);
      n.inputs[0] = p.inputs[0];
      return true;
    }
    if (n.op_type == "Reshape" && p.op_type == "Reshape" && p.domain.empty() &&
        n.inputs.size() > 1) {
      const Value* shape = n.inputs[1];
      if (!shape->constant || shape->is_graph_input) return false;
      for (int64_t i = 0; i < shape->constant->numel(); ++i)
        if (shape->constant->int_at(i) == 0) return false;
      n.inputs[0] = p.inputs[0];
      return true;
    }
    return false;
  }
};
}  // namespace

FERRITE_REGISTER_PASSES(algebraic_simplification) {
  r.add({"algebraic-simplification",
         "x+0, x*1, x/1 identities, x^2 as x*x; compose Transpose pairs and Reshape pairs",
         [] { return std::make_unique<AlgebraicSimplification>(); },
         {{Stage::kSimplify, 20}}});
}

}  // namespace ferrite
