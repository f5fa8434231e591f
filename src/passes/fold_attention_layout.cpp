// fold-attention-layout: the head transposes around a ferrite.Attention become its `transposed`
// attribute (ops/attention_layout.h), so that the kernel reads Q, K, V where the projections
// wrote them and writes the result where the output projection reads it:
//   Attention(Transpose(q', [0,2,1,3]), Transpose(k', ...), Transpose(v', ...))   q' [B, S, H, D]
//   Transpose(that, [0,2,1,3])
//   =>  Attention(q', k', v') {transposed=[1, 1, 1, 1]}   (each operand independently)
// Every transformer export has this shape: the projections give [B, S, H*D], a Reshape makes
// [B, S, H, D], and the Transposes to [B, H, S, D] and back copy Q, K, V and the result once per
// layer (4-5 kernels a layer on cuda). A Transpose another node also reads stays for that node
// (its copy then still runs); the result's Transpose is folded only when it is the sole reader.
// Opt-in: for devices whose attention kernel reads strided operands (cuda's fused kernel).
#include "ops/attention_layout.h"
#include "passes/rewrite_util.h"

namespace ferrite {

namespace {

using namespace rewrite;

// t = Transpose(x, perm=[0, 2, 1, 3]) with x of rank 4: the heads/sequence swap.
bool swaps_heads(const Node* t) {
  if (!is_op(t, "Transpose", 1) || !t->has_attr("perm")) return false;
  const std::vector<int64_t> perm = t->attr_ints("perm");
  const Shape& s = t->inputs[0]->type.shape;
  return perm == std::vector<int64_t>{0, 2, 1, 3} && s.rank_known() && s.rank() == 4;
}

bool fold(RewriteContext& c, Node& att) {
  Graph& g = c.g;
  const Uses& uses = c.uses;
  std::unordered_set<const Node*>& dead = c.dead;
  if (att.outputs.size() != 1 || att.inputs.size() < 3) return false;
  auto layout = attention_layout(att);
  if (!layout) return false;
  std::vector<Value*> inputs = att.inputs;
  std::array<bool, 4> t = layout->transposed;
  // The result's batch dims [B, H]: a folded operand must have them, not broadcast over them
  // (the kernels read a transposed operand with its own strides only when nothing broadcasts).
  const Shape& ys = att.outputs[0]->type.shape;
  if (!ys.rank_known() || ys.rank() != 4) return false;
  const Dim& B = ys[0];
  const Dim& H = t[3] ? ys[2] : ys[1];
  auto same_known = [](const Dim& a, const Dim& b) { return a.is_known() && a == b; };
  bool changed = false;
  for (int i = 0; i < 3; ++i) {
    Node* tr = inputs[i] ? inputs[i]->producer : nullptr;
    if (t[i] || !swaps_heads(tr)) continue;
    const Shape& src = tr->inputs[0]->type.shape;  // [B, S, H, D]
    if (!same_known(src[0], B) || !same_known(src[2], H)) continue;
    inputs[i] = tr->inputs[0];
    t[i] = changed = true;
  }
  std::vector<const Node*> nodes{&att};
  Value* result = att.outputs[0];
  if (Node* out = sole_user(g, uses, result); !t[3] && swaps_heads(out) && !dead.count(out)) {
    nodes.push_back(out);
    result = out->outputs[0];
    t[3] = changed = true;
  }
  if (!changed || !replaceable(g, uses, nodes, result, dead)) return false;
  AttributeMap attrs = att.attrs;
  attrs["transposed"] = Attribute(std::vector<int64_t>{t[0], t[1], t[2], t[3]});
  // Named after the Attention; its result keeps the name of the value it replaces.
  return swap_in_node(g, nodes, result, dead, kFerriteDomain, "Attention", att.opset,
                      std::move(inputs), std::move(attrs), att.name);
}

class FoldAttentionLayout : public Pass {
 public:
  std::string name() const override { return "fold-attention-layout"; }
  Expected<bool> run(Graph& g) override {
    return rewrite_anchored_if(
        g, name(),
        [](const Node& n) { return n.domain == kFerriteDomain && n.op_type == "Attention"; },
        [](RewriteContext& c, Node& att) { return fold(c, att) ? 1 : 0; });
  }
};

}  // namespace

FERRITE_REGISTER_PASSES(fold_attention_layout) {
  // Opt-in, after fuse-attention (50) and narrow-attention-precision (55), which match the
  // Transposes this pass removes.
  r.add({"fold-attention-layout",
         "read Attention's Q, K, V and write its result heads-after-sequence, without Transposes",
         [] { return std::make_unique<FoldAttentionLayout>(); },
         {{Stage::kRewrite, 57}},
         {},
         {"ferrite.Attention"},
         /*opt_in=*/true});
}

}  // namespace ferrite
