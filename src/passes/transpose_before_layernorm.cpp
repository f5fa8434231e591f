// transpose-before-layernorm: Transpose(LayerNormalization(x), perm) with perm keeping the
// normalised dims in place becomes LayerNormalization(Transpose(x, perm)): the normalisation
// runs per row, so which order the rows come in does not matter. The Transpose then reads x, a
// value already in memory, where every device's lowering takes it as a view of x (the row kernel
// reads rows in the permuted order), instead of copying the normalisation's result once more.
// nn.MultiheadAttention's exports have this shape in every layer (ViT: the first LayerNorm's
// [B, S, E] result goes to [S, B, E] for the projections). The LayerNormalization must feed
// nothing but the Transpose.
#include "passes/rewrite_util.h"

namespace ferrite {

namespace {

using namespace rewrite;

int sink(RewriteContext& c, Node& tr) {
  if (!is_op(&tr, "Transpose", 1) || !tr.has_attr("perm")) return 0;
  Node* ln = producer_op(tr.inputs[0], "LayerNormalization");
  if (!ln || !is_op(ln, "LayerNormalization") || ln->inputs.size() < 2) return 0;
  const Shape& xs = ln->inputs[0]->type.shape;
  if (!xs.rank_known()) return 0;
  const int64_t rank = static_cast<int64_t>(xs.rank());
  const std::vector<int64_t> perm = tr.attr_ints("perm");
  if (static_cast<int64_t>(perm.size()) != rank) return 0;
  int64_t axis = ln->attr_int("axis", -1);
  if (axis < 0) axis += rank;
  if (axis <= 0 || axis >= rank) return 0;
  for (int64_t i = axis; i < rank; ++i)
    if (perm[i] != i) return 0;
  if (!used_only_by(c.g, c.uses, tr.inputs[0], {&tr})) return 0;
  const std::vector<const Node*> nodes{ln, &tr};
  if (!replaceable(c.g, c.uses, nodes, tr.outputs[0], c.dead)) return 0;
  AttributeMap tattrs;
  tattrs["perm"] = Attribute(perm);
  Node* moved = insert_node(c.g, "", "Transpose", tr.opset, {ln->inputs[0]}, std::move(tattrs), ln,
                            tr.name.empty() ? "transpose" : tr.name);
  if (!moved) return 0;
  std::vector<Value*> inputs = ln->inputs;
  inputs[0] = moved->outputs[0];
  if (swap_in_node(c.g, nodes, tr.outputs[0], c.dead, "", "LayerNormalization", ln->opset,
                   std::move(inputs), ln->attrs, ln->name))
    return 1;
  discard_node(c.g, moved);
  return 0;
}

class TransposeBeforeLayerNorm : public Pass {
 public:
  std::string name() const override { return "transpose-before-layernorm"; }
  Expected<bool> run(Graph& g) override { return rewrite_anchored(g, name(), {"Transpose"}, sink); }
};

}  // namespace

FERRITE_REGISTER_PASSES(transpose_before_layernorm) {
  // After fuse-layernorm (30), which makes the LayerNormalization of decomposed exports.
  r.add({"transpose-before-layernorm",
         "move a Transpose of a LayerNormalization's rows before it (read as a view, no copy)",
         [] { return std::make_unique<TransposeBeforeLayerNorm>(); },
         {{Stage::kRewrite, 35}}});
}

}  // namespace ferrite
