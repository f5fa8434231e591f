// fold-attention-layout: the head transposes around a ferrite.Attention become its `transposed`
// attribute (ops/attention_layout.h), so that the kernel reads Q, K, V where the projections
// wrote them and writes the result where the output projection reads it:
//   Attention(Transpose(q', [0,2,1,3]), Transpose(k', ...), Transpose(v', ...))   q' [B, S, H, D]
//   Transpose(that, [0,2,1,3])
//   =>  Attention(q', k', v') {transposed=[1, 1, 1, 1]}   (each operand independently)
// Every transformer export has this shape: the projections give [B, S, H*D], a Reshape makes
// [B, S, H, D], and the Transposes to [B, H, S, D] and back copy Q, K, V and the result once per
// layer (4-5 kernels a layer on cuda). nn.MultiheadAttention (ViT) runs its projections on
// [S, B, E]: its result goes back through Transpose(y, [2,0,1,3]) to [S, B, H, Dv], which folds
// as code 2 (operands Transpose(x, [1,2,0,3]) of [S, B, H, D] likewise). A Transpose another node
// also reads stays for that node (its copy then still runs); the result's Transpose is folded only
// when it is the sole reader. Opt-in: for devices whose attention kernel reads strided operands
// (cuda's fused kernel).
#include "ops/attention_layout.h"
#include "passes/rewrite_util.h"

namespace ferrite {

namespace {

using namespace rewrite;

// The layout code (ops/attention_layout.h) whose operand `t` = Transpose(x) reads into the
// [B, H, S, D] view (`result` false: perm = logical_perm(code)), or whose stored result it
// writes from that view (`result` true: perm = stored_perm(code)); 0 for none. x has rank 4.
int head_layout(const Node* t, bool result) {
  if (!is_op(t, "Transpose", 1) || !t->has_attr("perm")) return 0;
  const Shape& s = t->inputs[0]->type.shape;
  if (!s.rank_known() || s.rank() != 4) return 0;
  const std::vector<int64_t> perm = t->attr_ints("perm");
  for (int code : {kHeadsAfterSequence, kSequenceFirst}) {
    const std::array<int, 4> p = result ? stored_perm(code) : logical_perm(code);
    if (perm == std::vector<int64_t>(p.begin(), p.end())) return code;
  }
  return 0;
}

bool fold(RewriteContext& c, Node& att) {
  Graph& g = c.g;
  const Uses& uses = c.uses;
  std::unordered_set<const Node*>& dead = c.dead;
  if (att.outputs.size() != 1 || att.inputs.size() < 3) return false;
  auto layout = attention_layout(att);
  if (!layout) return false;
  std::vector<Value*> inputs = att.inputs;
  std::array<int, 4> t = layout->transposed;
  // The result's batch dims [B, H]: a folded operand must have them, not broadcast over them
  // (the kernels read a transposed operand with its own strides only when nothing broadcasts).
  const Shape& ys = att.outputs[0]->type.shape;
  if (!ys.rank_known() || ys.rank() != 4) return false;
  const std::array<int, 4> yp = logical_perm(t[3]);
  const Dim& B = ys[yp[0]];
  const Dim& H = ys[yp[1]];
  auto same_known = [](const Dim& a, const Dim& b) { return a.is_known() && a == b; };
  bool changed = false;
  for (int i = 0; i < 3; ++i) {
    Node* tr = inputs[i] ? inputs[i]->producer : nullptr;
    const int code = t[i] ? 0 : head_layout(tr, false);
    if (!code) continue;
    const Shape& src = tr->inputs[0]->type.shape;  // stored as `code` lays it out
    const std::array<int, 4> lp = logical_perm(code);
    if (!same_known(src[lp[0]], B) || !same_known(src[lp[1]], H)) continue;
    inputs[i] = tr->inputs[0];
    t[i] = code;
    changed = true;
  }
  std::vector<const Node*> nodes{&att};
  Value* result = att.outputs[0];
  if (Node* out = sole_user(g, uses, result); !t[3] && !dead.count(out)) {
    if (const int code = head_layout(out, true)) {
      nodes.push_back(out);
      result = out->outputs[0];
      t[3] = code;
      changed = true;
    }
  }
  if (!changed || !replaceable(g, uses, nodes, result, dead)) return false;
  AttributeMap attrs = att.attrs;
  attrs["transposed"] = Attribute(std::vector<int64_t>(t.begin(), t.end()));
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
