// remove-noops: drops nodes that return their input unchanged — Identity, inference-mode Dropout,
// Cast to the same dtype, Reshape/Expand/Squeeze/Unsqueeze/Flatten to the same shape, Transpose
// with the identity permutation, single-input Concat/Sum/Max/Min/Mean, Pad by zeros everywhere
// (Swin's and PatchMerging's F.pad when the size is already a multiple), Slice of everything with
// unit steps.
#include "passes/pass.h"

namespace ferrite {

namespace {

bool fully_known(const Shape& s) {
  if (!s.rank_known()) return false;
  for (const Dim& d : s.dims())
    if (!d.is_known()) return false;
  return true;
}

// Input index whose value the node passes through unchanged, or -1.
int passthrough_input(const Node& n,
                      const std::unordered_map<const Value*, std::vector<Use>>& uses) {
  const std::string& op = n.op_type;
  if (!n.domain.empty() || n.inputs.empty() || n.outputs.empty() || !n.outputs[0] || !n.inputs[0])
    return -1;
  const TensorType& in = n.inputs[0]->type;
  const TensorType& out = n.outputs[0]->type;
  bool same_type = in.dtype == out.dtype && fully_known(in.shape) && in.shape == out.shape;
  if (op == "Identity") return 0;
  if (op == "Dropout") {
    // Only without a requested mask and without training_mode set to true.
    for (size_t i = 1; i < n.outputs.size(); ++i)
      if (n.outputs[i] && uses.count(n.outputs[i])) return -1;
    if (n.inputs.size() > 2 && n.inputs[2]) {
      const auto& c = n.inputs[2]->constant;
      if (!c || n.inputs[2]->is_graph_input || c->numel() != 1 || c->int_at(0) != 0) return -1;
    }
    return 0;
  }
  if (op == "Cast" || op == "Reshape" || op == "Expand" || op == "Squeeze" || op == "Unsqueeze" ||
      op == "Flatten")
    return same_type ? 0 : -1;
  if (op == "Transpose") {
    auto perm = n.attr_ints("perm");
    for (size_t i = 0; i < perm.size(); ++i)
      if (perm[i] != static_cast<int64_t>(i)) return -1;
    return in.shape.rank_known() && !perm.empty() ? 0 : -1;
  }
  if (op == "Pad") {
    // All pads zero: the mode and the value do not matter.
    const Value* pads = n.input(1);
    if (!same_type || !pads || !pads->constant || pads->is_graph_input) return -1;
    for (int64_t p : pads->constant->to_int_vector())
      if (p != 0) return -1;
    return 0;
  }
  if (op == "Slice") {
    // Same shape with unit steps: every start is 0 (a shifted window would lose elements).
    if (!same_type) return -1;
    const Value* steps = n.input(4);
    if (steps) {
      if (!steps->constant || steps->is_graph_input) return -1;
      for (int64_t st : steps->constant->to_int_vector())
        if (st != 1) return -1;
    }
    return 0;
  }
  if ((op == "Concat" || op == "Sum" || op == "Max" || op == "Min" || op == "Mean") &&
      n.inputs.size() == 1)
    return same_type ? 0 : -1;
  return -1;
}

class RemoveNoops : public Pass {
 public:
  std::string name() const override { return "remove-noops"; }
  Expected<bool> run(Graph& g) override {
    auto uses = compute_uses(g);
    std::vector<const Node*> dead;
    for (auto& n : g.nodes()) {
      int from = passthrough_input(*n, uses);
      if (from < 0) continue;
      if (g.replace_all_uses(n->outputs[0], n->inputs[from])) dead.push_back(n.get());
    }
    g.erase_nodes(dead);
    g.compact();
    return !dead.empty();
  }
};
}  // namespace

FERRITE_REGISTER_PASSES(remove_noops) {
  // First, so that the other simplifications see through identities; again after
  // constant-folding and common-subexpression-elimination, which expose new ones.
  r.add({"remove-noops",
         "drop Identity, inference Dropout and same-type Cast/Reshape/Transpose...",
         [] { return std::make_unique<RemoveNoops>(); },
         {{Stage::kSimplify, 10}, {Stage::kSimplify, 50}}});
}

}  // namespace ferrite
