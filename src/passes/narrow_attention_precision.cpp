// narrow-attention-precision: a ferrite.Attention computed in f32 on operands widened from a
// 2-byte float type T (bf16 or f16), whose result is only narrowed back to T, runs in T:
//   Cast<T>(Attention(Cast<f32>(q), [Transpose](Cast<f32>(k)), Cast<f32>(v), [Cast<f32>(m)]))
//   =>  Attention(q, [Transpose](k), v, [m])   (all of T)
// PyTorch's SDPA math path (taken for some masks on CUDA) upcasts bf16/f16 attention this way, so
// without the rewrite the attention runs in f32, off the tensor cores. The operands are the same
// values (widening is exact) and the kernel still accumulates scores, softmax and P.V in f32;
// what changes is that a device's 2-byte kernel may round the probabilities P to T before P.V,
// as FlashAttention and PyTorch's own fused kernels do, which is within T's precision of the
// result. An f32 mask that is not itself widened from T keeps the pattern as it is (rounding it
// would change the scores). Not in the default pipeline: a device whose 2-byte attention is fast
// (cuda's tensor-core kernel) lists it in its passes; elsewhere f32 is as fast or faster.
#include "passes/rewrite_util.h"

namespace ferrite {

namespace {

using namespace rewrite;

// v = Cast<f32>(x) with x of dtype `t`; returns x. The Cast joins the removed `nodes` when
// `user` is its only reader; a shared one (BERT's mask, widened once for every layer) stays.
Value* widened_from(const Graph& g, const Uses& uses, Value* v, const Node* user, DType t,
                    std::vector<const Node*>& nodes) {
  Node* c = producer_op(v, "Cast");
  if (!c || c->inputs.size() != 1 || v->type.dtype != DType::kF32 || c->inputs[0]->type.dtype != t)
    return nullptr;
  if (sole_user(g, uses, v) == user) nodes.push_back(c);
  return c->inputs[0];
}

bool narrow(RewriteContext& c, Node& cast) {
  if (!is_op(&cast, "Cast", 1)) return false;
  const DType t = cast.outputs[0]->type.dtype;
  Node* att = cast.inputs[0]->producer;
  if ((t != DType::kBF16 && t != DType::kF16) || !att || att->domain != kFerriteDomain ||
      att->op_type != "Attention" || att->outputs.size() != 1 ||
      att->outputs[0]->type.dtype != DType::kF32 ||
      sole_user(c.g, c.uses, att->outputs[0]) != &cast)
    return false;
  std::vector<const Node*> nodes;
  std::vector<Value*> inputs;
  Node* k_transpose = nullptr;
  for (size_t i = 0; i < att->inputs.size(); ++i) {
    Value* in = att->inputs[i];
    if (!in) return false;
    const Node* user = att;
    if (Node* tr = producer_op(in, "Transpose");
        i == 1 && tr && sole_user(c.g, c.uses, in) == att) {
      k_transpose = tr;  // fuse-attention's K: a Transpose of the widened projection
      nodes.push_back(tr);
      user = tr;
      in = tr->inputs[0];
    }
    Value* narrow_in = widened_from(c.g, c.uses, in, user, t, nodes);
    if (!narrow_in) return false;
    inputs.push_back(narrow_in);
  }
  nodes.push_back(att);
  nodes.push_back(&cast);
  if (!replaceable(c.g, c.uses, nodes, cast.outputs[0], c.dead)) return false;
  Node* new_k = nullptr;
  if (k_transpose) {
    new_k = insert_node(c.g, "", "Transpose", k_transpose->opset, {inputs[1]}, k_transpose->attrs,
                        &cast, k_transpose->name);
    if (!new_k) return false;
    inputs[1] = new_k->outputs[0];
  }
  if (!swap_in_node(c.g, nodes, cast.outputs[0], c.dead, kFerriteDomain, "Attention", kFerriteOpset,
                    std::move(inputs), att->attrs, att->name)) {
    if (new_k) discard_node(c.g, new_k);
    return false;
  }
  return true;
}

class NarrowAttentionPrecision : public Pass {
 public:
  std::string name() const override { return "narrow-attention-precision"; }
  Expected<bool> run(Graph& g) override {
    return rewrite_anchored(g, name(), {"Cast"},
                            [](RewriteContext& c, Node& n) { return narrow(c, n) ? 1 : 0; });
  }
};

}  // namespace

FERRITE_REGISTER_PASSES(narrow_attention_precision) {
  // Opt-in, right after fuse-attention: for devices with a 2-byte attention kernel (cuda).
  r.add({"narrow-attention-precision",
         "f32 attention between casts from and to bf16/f16 runs in the 2-byte type",
         [] { return std::make_unique<NarrowAttentionPrecision>(); },
         {{Stage::kRewrite, 55}},
         {},
         {"ferrite.Attention"},
         /*opt_in=*/true});
}

}  // namespace ferrite
