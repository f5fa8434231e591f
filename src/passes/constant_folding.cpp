// constant-folding: evaluates nodes whose inputs are all known at compile time with the op
// table's reference kernels and replaces their outputs by initializers. Shape arithmetic whose
// dims are all static folds too (Shape of a static tensor, and chains over it), because inference
// records it as a dims value. Results that would be much larger than their inputs (Expand, Tile,
// ConstantOfShape) stay as nodes: folding must not bloat the model.
#include <unordered_set>

#include "ops/context.h"
#include "passes/pass.h"

namespace ferrite {

namespace {

constexpr int64_t kAlwaysFoldElements = 1 << 16;

// The value's contents when it is fully known: a constant, or an integer dims value whose dims
// are all static.
std::optional<Tensor> known_contents(const Value& v) {
  if (v.is_graph_input) return std::nullopt;
  if (v.constant) return *v.constant;
  if (!v.sym_value || !is_integer(v.type.dtype)) return std::nullopt;
  auto dims = v.type.shape.static_dims();
  if (!dims) return std::nullopt;
  auto t = Tensor::create(v.type.dtype, *dims);
  if (!t || t->numel() != static_cast<int64_t>(v.sym_value->size())) return std::nullopt;
  for (size_t i = 0; i < v.sym_value->size(); ++i) {
    auto x = (*v.sym_value)[i].value();
    if (!x) return std::nullopt;
    visit_dtype(t->dtype(), [&]<class T>() { t->data<T>()[i] = static_cast<T>(*x); });
  }
  return std::move(t).value();
}

class ConstantFolding : public Pass {
 public:
  std::string name() const override { return "constant-folding"; }
  Expected<bool> run(Graph& g) override {
    bool changed = false;
    std::vector<const Node*> dead;
    // Values something reads: folding a node nothing reads would only copy data (a dead
    // Transpose of a weight is a copy of the weight) for dead-code elimination to drop.
    std::unordered_set<const Value*> used(g.outputs().begin(), g.outputs().end());
    for (const auto& node : g.nodes())
      for (const Value* v : node->inputs) used.insert(v);
    for (auto& node : g.nodes()) {
      Node& n = *node;
      bool read = false;
      for (const Value* v : n.outputs) read = read || (v && used.count(v));
      if (!read) continue;
      std::vector<Tensor> outputs(n.outputs.size());
      bool folded = false;
      // Outputs already known from inference (Constant nodes, small folds, static dims values).
      bool all_known = true;
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        if (!n.outputs[i]) continue;
        auto c = known_contents(*n.outputs[i]);
        if (!c) {
          all_known = false;
          break;
        }
        outputs[i] = std::move(*c);
      }
      if (all_known && !n.outputs.empty()) {
        folded = true;
      } else {
        FERRITE_ASSIGN_OR_RETURN(folded, evaluate(n, outputs));
      }
      if (!folded) continue;
      bool all_replaced = true;
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        Value* out = n.outputs[i];
        if (!out) continue;
        Value* init = g.add_initializer(out->name + "_folded", std::move(outputs[i]));
        if (g.replace_all_uses(out, init)) {
          changed = true;
        } else {
          all_replaced = false;  // a graph output that must keep its node
        }
      }
      if (all_replaced) dead.push_back(&n);
    }
    g.erase_nodes(dead);
    g.compact();
    return changed;
  }

 private:
  static Expected<bool> evaluate(Node& n, std::vector<Tensor>& outputs) {
    std::vector<const Tensor*> inputs;
    std::vector<Tensor> held;
    held.reserve(n.inputs.size());
    int64_t in_elements = 0;
    for (const Value* v : n.inputs) {
      if (!v) {
        inputs.push_back(nullptr);
        continue;
      }
      auto c = known_contents(*v);
      if (!c) return false;
      in_elements += c->numel();
      held.push_back(std::move(*c));
      inputs.push_back(&held.back());
    }
    if (inputs.empty()) return false;  // e.g. random generators: not ours to fold
    if (!n.schema->foldable) return false;
    int64_t limit = std::max(in_elements, kAlwaysFoldElements);
    for (const Value* v : n.outputs) {
      if (!v) continue;
      auto dims = v->type.shape.static_dims();
      if (!dims) return false;
      int64_t numel = 1;
      for (int64_t d : *dims) numel = (d > 0 && numel > limit / d) ? limit + 1 : numel * d;
      if (numel > limit) return false;
    }
    KernelContext ctx(n, std::move(inputs), outputs);
    FERRITE_RETURN_IF_ERROR(n.schema->kernel(ctx));
    return true;
  }
};
}  // namespace

FERRITE_REGISTER_PASSES(constant_folding) {
  r.add({"constant-folding",
         "evaluate nodes whose inputs are all known into initializers",
         [] { return std::make_unique<ConstantFolding>(); },
         {{Stage::kSimplify, 30}}});
}

}  // namespace ferrite
