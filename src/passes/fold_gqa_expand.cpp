// fold-gqa-expand: grouped-query attention's K/V head expansion becomes a broadcast batch dim of
// the ferrite.Attention, so that no expanded copy of K and V is written:
//   k' = Reshape(Expand(k5, [B, Hk, G, T, D]), [B, Hk*G, T, D])     k5 [B, Hk, 1, T, D] (v alike)
//   Attention(q, k', v', mask?)                                       q [B, Hk*G, S, D]
//   =>  Reshape(Attention(Reshape(q, [0, Hk, G, -1, D]), k5, v5, mask5?), [0, Hk*G, -1, Dv])
// with three batch dims [B, Hk, G] over which K and V broadcast (read G times, stored once). This
// is transformers' repeat_kv (Llama, Mistral, Qwen2 exports: Unsqueeze, Expand, Reshape per
// layer and operand). The mask, [B, 1, S, T] or any rank <= 3 shape that broadcasts over the
// heads, gets a unit dim for the new batch dim. The Reshapes are views. Opt-in, and in no device's
// pipeline yet: cuda's kernel reads the broadcast K and V without copies, but the rank-5 result
// then cannot take fold-attention-layout's heads-after-sequence store (rank 4 only), and the
// Transpose it leaves for the output projection cost more than the expansion saved (H200, bf16,
// the Llama family at 8x128: the K/V kernels 28.9 -> 21.5 us a call, a new 11 us transpose of
// the result; 0.394 -> 0.398 ms). It pays once that layout covers rank 5.
#include "ops/attention_layout.h"
#include "passes/rewrite_util.h"

namespace ferrite {

namespace {

using namespace rewrite;

struct Expansion {
  Value* unexpanded = nullptr;  // [B, Hk, 1, T, D]
  int64_t kv_heads = 0, group = 0;
};

// v = Reshape(Expand(x5)) merging a broadcast group dim into the heads, or nullopt.
std::optional<Expansion> expansion(const Value* v) {
  Node* r = producer_op(v, "Reshape");
  if (!is_op(r, "Reshape", 2)) return std::nullopt;
  Node* e = producer_op(r->inputs[0], "Expand");
  if (!is_op(e, "Expand", 2)) return std::nullopt;
  const Shape& xs = e->inputs[0]->type.shape;
  const Shape& es = e->outputs[0]->type.shape;
  const Shape& rs = r->outputs[0]->type.shape;
  if (!fully_known(xs) || !fully_known(es) || !fully_known(rs) || xs.rank() != 5 ||
      es.rank() != 5 || rs.rank() != 4)
    return std::nullopt;
  const auto hk = xs[1].value(), one = xs[2].value(), g = es[2].value(), h = rs[1].value();
  if (!hk || !g || !h || one != 1 || *g < 1 || *hk * *g != *h || es[1] != xs[1])
    return std::nullopt;
  if (xs[0] != es[0] || rs[0] != es[0] || xs[3] != es[3] || rs[2] != es[3] || xs[4] != es[4] ||
      rs[3] != es[4])
    return std::nullopt;
  return Expansion{e->inputs[0], *hk, *g};
}

Value* i64_constant(Graph& g, const std::string& name, std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return g.add_initializer(name, Tensor::from_vector<int64_t>(v, {n}));
}

bool fold(RewriteContext& c, Node& att) {
  Graph& g = c.g;
  if (att.outputs.size() != 1 || att.inputs.size() < 3 || !att.inputs[0] || !att.inputs[1] ||
      !att.inputs[2])
    return false;
  auto layout = attention_layout(att);
  if (!layout || layout->any()) return false;
  const auto k = expansion(att.inputs[1]);
  const auto v = expansion(att.inputs[2]);
  if (!k || !v || k->kv_heads != v->kv_heads || k->group != v->group || k->group == 1) return false;
  const Shape& qs = att.inputs[0]->type.shape;
  const Shape& ys = att.outputs[0]->type.shape;
  if (!fully_known(qs) || qs.rank() != 4 || qs[1].value() != k->kv_heads * k->group ||
      !qs[3].is_static() || !fully_known(ys) || ys.rank() != 4 || !ys[3].is_static())
    return false;
  Value* mask = att.inputs.size() > 3 ? att.inputs[3] : nullptr;
  bool unsqueeze_mask = false;
  if (mask) {
    const Shape& ms = mask->type.shape;
    if (!ms.rank_known()) return false;
    // Rank <= 3 broadcasts over [Hk, G] as over H when its dim before [S, T] is 1 (or absent).
    if (ms.rank() == 4) {
      if (ms[1].value() != 1) return false;
      unsqueeze_mask = true;
    } else if (ms.rank() == 3 && ms[0].value() != 1) {
      return false;
    }
  }
  // Only the Attention is replaced: the Expand and Reshape stay for any other reader (exports
  // often take their Shape for the decomposed SDPA that fuse-attention replaced; that chain is
  // dead by now and dead-code-elimination removes it with them).
  std::vector<const Node*> nodes{&att};
  if (!replaceable(g, c.uses, nodes, att.outputs[0], c.dead)) return false;

  const int opset = onnx_opset_at_least(g, 14);
  const int64_t hk = k->kv_heads, grp = k->group, d = *qs[3].value(), dv = *ys[3].value();
  std::vector<Node*> added;
  auto undo = [&]() {
    for (size_t i = added.size(); i-- > 0;) discard_node(g, added[i]);
    return false;
  };
  auto add = [&](const char* op, std::vector<Value*> in, const std::string& hint) -> Value* {
    Node* n = insert_node(g, "", op, opset, std::move(in), {}, &att, hint);
    if (!n) return nullptr;
    added.push_back(n);
    return n->outputs[0];
  };
  Value* q5 =
      add("Reshape", {att.inputs[0], i64_constant(g, att.name + "_q_groups", {0, hk, grp, -1, d})},
          att.name + "_q");
  if (!q5) return undo();
  std::vector<Value*> inputs{q5, k->unexpanded, v->unexpanded};
  if (mask) {
    Value* m = mask;
    if (unsqueeze_mask)
      m = add("Unsqueeze", {mask, i64_constant(g, att.name + "_mask_axes", {1})},
              att.name + "_mask");
    if (!m) return undo();
    inputs.push_back(m);
  }
  Node* a5 = insert_node(g, kFerriteDomain, "Attention", att.opset, std::move(inputs), att.attrs,
                         &att, att.name);
  if (!a5) return undo();
  added.push_back(a5);
  Value* shape = i64_constant(g, att.name + "_heads", {0, hk * grp, -1, dv});
  if (swap_in_node(g, nodes, att.outputs[0], c.dead, "", "Reshape", opset, {a5->outputs[0], shape},
                   {}, att.name + "_merge"))
    return true;
  return undo();
}

class FoldGqaExpand : public Pass {
 public:
  std::string name() const override { return "fold-gqa-expand"; }
  Expected<bool> run(Graph& g) override {
    return rewrite_anchored_if(
        g, name(),
        [](const Node& n) { return n.domain == kFerriteDomain && n.op_type == "Attention"; },
        [](RewriteContext& c, Node& att) { return fold(c, att) ? 1 : 0; });
  }
};

}  // namespace

FERRITE_REGISTER_PASSES(fold_gqa_expand) {
  // Opt-in, after fuse-attention (50) and narrow-attention-precision (55), before
  // fold-attention-layout (57), which folds only rank-4 operands.
  r.add({"fold-gqa-expand",
         "read grouped-query attention's K and V once per KV head instead of expanding them",
         [] { return std::make_unique<FoldGqaExpand>(); },
         {{Stage::kRewrite, 56}},
         {},
         {"ferrite.Attention"},
         /*opt_in=*/true});
}

}  // namespace ferrite
