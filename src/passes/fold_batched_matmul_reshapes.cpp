// fold-batched-matmul-reshapes: a batched MatMul between Reshapes that only merge and split its
// leading (batch) dims becomes one MatMul over the original batch dims:
//   Y = Reshape(MatMul(Reshape(A, [N, M, K]), Reshape(B, [N, K, P])), [b1..bn, M, P])
//   with A [b1..bn, M, K], B [b1..bn, K, P] and N = b1 * ... * bn
//   =>  Y = MatMul(A, B)
// PyTorch lowers `matmul` of two rank-4 tensors this way (expand, view to [B*H, S, D], bmm, view
// back), as does SDPA's math path, so attention arrives as bmm between views; with the reshapes
// gone, fuse-attention sees the MatMul -> Softmax -> MatMul chain it knows, and the rank-4 MatMul
// needs no copies of transposed operands (a Reshape of a Transpose must be materialised). Both
// operands must have the output's batch dims exactly (no broadcasting: a broadcast batch would
// not be N items), each inner Reshape must be used only by the MatMul and the MatMul only by the
// outer Reshape. Symbolic dims compare as expressions, so `[batch*12, S, 64]` folds.
#include "passes/rewrite_util.h"

namespace ferrite {

namespace {

using namespace rewrite;

// The product of dims, as a Dim (symbolic when any is).
Dim product(const std::vector<Dim>& dims) {
  Dim p(int64_t{1});
  for (const Dim& d : dims) p = p * d;
  return p;
}

// v = Reshape(x, [N, r, c]) with x of rank >= 3, x's trailing two dims [r, c] and N the product of
// x's leading dims; returns x's leading dims through `batch`.
Value* unmerged_operand(const Graph& g, const Uses& uses, const Value* v, const Node* mm,
                        std::vector<Dim>* batch, std::vector<const Node*>& nodes) {
  Node* r = producer_op(v, "Reshape");
  if (!r || r->inputs.size() != 2 || sole_user(g, uses, v) != mm) return nullptr;
  Value* x = r->inputs[0];
  const Shape& xs = x->type.shape;
  const Shape& vs = v->type.shape;
  if (!fully_known(xs) || !fully_known(vs) || xs.rank() < 3 || vs.rank() != 3) return nullptr;
  const size_t n = xs.rank();
  if (xs[n - 2] != vs[1] || xs[n - 1] != vs[2]) return nullptr;
  std::vector<Dim> lead(xs.dims().begin(), xs.dims().end() - 2);
  if (product(lead) != vs[0]) return nullptr;
  *batch = std::move(lead);
  nodes.push_back(r);
  return x;
}

bool fold(RewriteContext& c, Node& mm) {
  if (!is_op(&mm, "MatMul", 2)) return false;
  Value* y3 = mm.outputs[0];
  Node* out = sole_user(c.g, c.uses, y3);
  if (!is_op(out, "Reshape", 2) || out->inputs[0] != y3) return false;
  const Shape& ys = out->outputs[0]->type.shape;
  const Shape& y3s = y3->type.shape;
  if (!fully_known(ys) || !fully_known(y3s) || ys.rank() < 3 || y3s.rank() != 3) return false;
  std::vector<const Node*> nodes;
  std::vector<Dim> ab, bb;
  Value* a = unmerged_operand(c.g, c.uses, mm.inputs[0], &mm, &ab, nodes);
  Value* b = a ? unmerged_operand(c.g, c.uses, mm.inputs[1], &mm, &bb, nodes) : nullptr;
  if (!b) return false;
  const size_t n = ys.rank();
  std::vector<Dim> yb(ys.dims().begin(), ys.dims().end() - 2);
  if (ab != yb || bb != yb || ys[n - 2] != y3s[1] || ys[n - 1] != y3s[2]) return false;
  nodes.push_back(&mm);
  nodes.push_back(out);
  return replace_subgraph(c.g, c.uses, nodes, out->outputs[0], c.dead, "", "MatMul",
                          onnx_opset_at_least(c.g, 13), {a, b}, {}, mm.name);
}

class FoldBatchedMatMulReshapes : public Pass {
 public:
  std::string name() const override { return "fold-batched-matmul-reshapes"; }
  Expected<bool> run(Graph& g) override {
    return rewrite_anchored(g, name(), {"MatMul"},
                            [](RewriteContext& c, Node& mm) { return fold(c, mm) ? 1 : 0; });
  }
};

}  // namespace

FERRITE_REGISTER_PASSES(fold_batched_matmul_reshapes) {
  // First of the rewrites: fuse-attention and fuse-matmul-epilogue match the folded MatMuls.
  r.add({"fold-batched-matmul-reshapes",
         "a MatMul between Reshapes that merge and split its batch dims becomes one MatMul",
         [] { return std::make_unique<FoldBatchedMatMulReshapes>(); },
         {{Stage::kRewrite, 5}}});
}

}  // namespace ferrite
