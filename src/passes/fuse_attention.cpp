// fuse-attention: scaled dot-product attention as PyTorch exports it becomes one
// ferrite.Attention(q, k, v, mask?) {scale, nan_to_zero}:
//   s = MatMul(q [* c1], kT [* c2]) [* c3 | / c3]...   (scalar constants; scale = their product)
//   p = Softmax(z = s [+ mask], axis=-1) [then Where(IsNaN(p), 0, p)
//                                          or Where(Equal(ReduceMax(z, -1), -inf), 0, p)]
//   y = MatMul(p, v)
// BERT scales q and kT before the MatMul (c1 = c2 = D^-1/4), GPT-2 scales the scores. kT is K
// with its last two axes swapped; when kT is itself a Transpose (BERT, GPT-2: perm [0,2,3,1] of
// the [B,T,H,D] projection) the new K is one Transpose of the same input with the last two
// entries of perm swapped ([0,2,1,3]); otherwise a Transpose of kT swaps them back. The NaN guard
// becomes nan_to_zero=1 (NaN probabilities, e.g. of a fully masked row, count as 0); without it
// NaNs propagate as in the plain Softmax. The second guard is PyTorch's _safe_softmax (SDPA's math
// path): a row of -inf scores only gives 0 and NaN still propagates; it becomes masked_rows_zero=1.
// The mask must broadcast onto the scores without
// changing their shape; every removed intermediate must be used only inside the pattern.
// Shifted-window attention (torchvision's Swin) adds a per-window mask with the scores' batch dim
// split into images and windows and merged again before the Softmax:
//   z = Reshape(Add(Reshape(x, [N, W, H, S, T]), m2), [N*W, H, S, T]),  x = s [+ mask]
// Attention takes that as one call with batch dims [N, W, H]: q, k and v split the same way
// (Reshapes: views), the two masks summed into one [.., W, H, S, T] (a small tensor: it does not
// depend on the image) and the result merged back.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "passes/rewrite_util.h"

namespace ferrite {

namespace {

using namespace rewrite;

struct Match {
  Value *q = nullptr, *kt = nullptr, *v = nullptr, *mask = nullptr, *y = nullptr;
  double scale = 1.0;
  bool nan_guard = false;
  bool masked_rows_guard = false;
  Value* window_mask = nullptr;  // m2 of a split batch dim (shifted windows); windows = W
  int64_t windows = 0;
  std::vector<const Node*> nodes;
};

// z = Reshape(Add(Reshape(x, [N, W, d1, ...]), m2), x's shape) with x [N*W, d1, ...] and the
// Add not broadcasting the scores: records m2 and W in `m`, and the three nodes; returns the
// split Reshape (x is its input), or null.
Node* window_split(const Graph& g, const Uses& uses, const Value* z, Match& m) {
  Node* merge = producer_op(z, "Reshape");
  if (!is_op(merge, "Reshape", 2)) return nullptr;
  const Value* a = merge->inputs[0];
  Node* add = producer_op(a, "Add");
  const Shape& zs = z->type.shape;
  if (!is_op(add, "Add", 2) || sole_user(g, uses, a) != merge || !zs.rank_known() || zs.rank() < 3)
    return nullptr;
  for (int i = 0; i < 2; ++i) {
    Value* s5 = add->inputs[i];
    Node* split = producer_op(s5, "Reshape");
    if (!is_op(split, "Reshape", 2) || sole_user(g, uses, s5) != add || add->inputs[1 - i] == s5)
      continue;
    const Shape& ss = s5->type.shape;
    if (!same_type(split->inputs[0]->type, z->type) || !same_type(a->type, s5->type) ||
        ss.rank() != zs.rank() + 1 || !ss[1].is_static())
      continue;
    // Dims past the batch dim unchanged (then the split is of the batch dim alone), and static
    // (the new Reshapes spell them out).
    bool rest = true;
    for (size_t d = 1; d < zs.rank() && rest; ++d)
      rest = ss[d + 1].is_static() && ss[d + 1] == zs[d];
    if (!rest) continue;
    m.window_mask = add->inputs[1 - i];
    m.windows = *ss[1].value();
    m.nodes.insert(m.nodes.end(), {merge, add, split});
    return split;
  }
  return nullptr;
}

// sm = Softmax(z) over the last axis; `guard` = Where(Equal(ReduceMax(z, last axis, keepdims),
// -inf), 0, sm). Returns the ReduceMax and the Equal on success.
std::optional<std::pair<Node*, Node*>> masked_rows_guard(const Graph& g, const Uses& uses,
                                                         const Node* where, const Value* sm) {
  Node* softmax = sm->producer;
  Node* eq = where->inputs[0]->producer;
  if (!is_op(softmax, "Softmax", 1) || !is_op(eq, "Equal", 2)) return std::nullopt;
  Node* rmax = eq->inputs[0]->producer;
  auto ninf = scalar_constant(eq->inputs[1]);
  if (!is_op(rmax, "ReduceMax") || !ninf || !std::isinf(*ninf) || *ninf > 0 ||
      rmax->inputs.empty() || rmax->inputs[0] != softmax->inputs[0] ||
      rmax->attr_int("keepdims", 1) != 1 || sole_user(g, uses, eq->inputs[0]) != eq ||
      sole_user(g, uses, where->inputs[0]) != where)
    return std::nullopt;
  const Shape& zs = softmax->inputs[0]->type.shape;
  if (!zs.rank_known()) return std::nullopt;
  std::vector<int64_t> axes;
  if (rmax->inputs.size() == 2) {
    auto axis = scalar_constant(rmax->inputs[1]);
    if (!axis) return std::nullopt;
    axes = {static_cast<int64_t>(*axis)};
  } else if (rmax->has_attr("axes")) {
    axes = rmax->attr_ints("axes");
  }
  const auto last = static_cast<int64_t>(zs.rank()) - 1;
  if (axes.size() != 1 || (axes[0] != -1 && axes[0] != last)) return std::nullopt;
  return std::make_pair(rmax, eq);
}

// Strips scalar-constant scaling (Mul by c, or Div by c when `allow_div`) off v, multiplying
// the factors into `scale`. Each stripped node must feed only the next one in the chain.
Value* strip_scale(const Graph& g, const Uses& uses, Value* v, const Node* user, bool allow_div,
                   double& scale, std::vector<const Node*>& nodes) {
  for (;;) {
    Node* p = v->producer;
    if (!(is_op(p, "Mul", 2) || (allow_div && is_op(p, "Div", 2))) || sole_user(g, uses, v) != user)
      return v;
    Value* base = nullptr;
    std::optional<double> c;
    if (p->op_type == "Div") {
      c = scalar_constant(p->inputs[1]);
      if (c && *c != 0) base = p->inputs[0], c = 1.0 / *c;
    } else {
      for (int i = 0; i < 2 && !base; ++i)
        if ((c = scalar_constant(p->inputs[1 - i])) && !constant_of(p->inputs[i]))
          base = p->inputs[i];
    }
    if (!base || !same_type(base->type, v->type)) return v;
    scale *= *c;
    nodes.push_back(p);
    user = p;
    v = base;
  }
}

std::optional<Match> match(const Graph& g, const Uses& uses, const Node& mm2) {
  if (!is_op(&mm2, "MatMul", 2)) return std::nullopt;
  Match m;
  m.v = mm2.inputs[1];
  m.y = mm2.outputs[0];
  m.nodes.push_back(&mm2);
  Value* p = mm2.inputs[0];
  // Optional NaN guard: Where(IsNaN(sm), 0, sm), or the masked-rows guard.
  Node* where = p->producer;
  Value* sm = p;
  Node* guard_max = nullptr;  // the masked-rows guard's ReduceMax: a second reader of z
  if (is_op(where, "Where", 3) && !is_op(where->inputs[0]->producer, "IsNaN", 1)) {
    auto zero = scalar_constant(where->inputs[1]);
    sm = where->inputs[2];
    auto guard = masked_rows_guard(g, uses, where, sm);
    if (!guard || !zero || *zero != 0 || sole_user(g, uses, p) != &mm2 ||
        sole_user(g, uses, sm) != where || !same_type(p->type, sm->type))
      return std::nullopt;
    m.masked_rows_guard = true;
    guard_max = guard->first;
    m.nodes.insert(m.nodes.end(), {where, guard->second, guard_max});
  } else if (is_op(where, "Where", 3)) {
    Node* isnan = where->inputs[0]->producer;
    auto zero = scalar_constant(where->inputs[1]);
    sm = where->inputs[2];
    if (!is_op(isnan, "IsNaN", 1) || isnan->inputs[0] != sm || !zero || *zero != 0 ||
        sole_user(g, uses, p) != &mm2 || sole_user(g, uses, isnan->outputs[0]) != where ||
        !used_only_by(g, uses, sm, {isnan, where}) || !same_type(p->type, sm->type))
      return std::nullopt;
    m.nan_guard = true;
    m.nodes.insert(m.nodes.end(), {where, isnan});
  } else if (sole_user(g, uses, sm) != &mm2) {
    return std::nullopt;
  }
  Node* softmax = sm->producer;
  if (!is_op(softmax, "Softmax", 1)) return std::nullopt;
  const Shape& ss = sm->type.shape;
  int64_t axis = softmax->attr_int("axis", -1);
  if (!ss.rank_known() || ss.rank() < 2 ||
      (axis != -1 && axis != static_cast<int64_t>(ss.rank()) - 1))
    return std::nullopt;
  m.nodes.push_back(softmax);
  // Optional additive mask: the operand that is not the (scaled) scores MatMul.
  Value* z = softmax->inputs[0];
  // z is read by the Softmax, and by the guard's ReduceMax when there is one.
  bool z_private =
      guard_max ? used_only_by(g, uses, z, {softmax, guard_max}) : sole_user(g, uses, z) == softmax;
  const Node* user = softmax;
  if (Node* split = z_private ? window_split(g, uses, z, m) : nullptr) {
    z = split->inputs[0];
    z_private = sole_user(g, uses, z) == split;
    user = split;
  }
  Value* scores = z;
  Node* add = z->producer;
  if (is_op(add, "Add", 2) && z_private) {
    for (int i = 0; i < 2; ++i) {
      double s = 1.0;
      std::vector<const Node*> tmp;
      Value* base = strip_scale(g, uses, add->inputs[i], add, true, s, tmp);
      if (is_op(base->producer, "MatMul", 2) && add->inputs[1 - i] != add->inputs[i]) {
        scores = add->inputs[i];
        m.mask = add->inputs[1 - i];
        break;
      }
    }
    if (!m.mask || !same_type(scores->type, z->type)) return std::nullopt;
    m.nodes.push_back(add);
    user = add;
  }
  Value* s0 = strip_scale(g, uses, scores, user, true, m.scale, m.nodes);
  Node* mm1 = s0->producer;
  // s0 feeds the last node matched so far: a stripped scale, else the Add or Softmax (and guard).
  const bool s0_private = s0 == z ? z_private : sole_user(g, uses, s0) == m.nodes.back();
  if (!is_op(mm1, "MatMul", 2) || !s0_private) return std::nullopt;
  m.nodes.push_back(mm1);
  m.q = strip_scale(g, uses, mm1->inputs[0], mm1, false, m.scale, m.nodes);
  m.kt = strip_scale(g, uses, mm1->inputs[1], mm1, false, m.scale, m.nodes);
  if (m.q == m.kt) return std::nullopt;
  return m;
}

bool same_known(const Dim& a, const Dim& b) {
  return a.is_known() && a == b;
}

// kT = Reshape(Transpose(Reshape(k, [P, T, D]), [0, 2, 1]), [..., D, T]): k [..., T, D] with its
// last two axes swapped, through the 3-D batched MatMul that DistilBERT's and GPT-2's exports
// reach K^T by. Both Reshapes keep the last two dims and only regroup the leading ones, which
// leaves the element order of each matrix alone. Returns k, or null when kT is not that.
Value* unbatched_transpose_source(Value* kt) {
  Node* r2 = producer_op(kt, "Reshape");
  Node* tr = r2 ? producer_op(r2->inputs[0], "Transpose") : nullptr;
  Node* r1 = tr ? producer_op(tr->inputs[0], "Reshape") : nullptr;
  if (!r1) return nullptr;
  Value* k = r1->inputs[0];
  const Shape &ks = k->type.shape, &mid = r1->outputs[0]->type.shape, &out = kt->type.shape;
  if (!ks.rank_known() || !mid.rank_known() || !out.rank_known() || ks.rank() != out.rank() ||
      ks.rank() < 2 || mid.rank() < 2)
    return nullptr;
  std::vector<int64_t> perm(mid.rank());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  if (!tr->has_attr("perm") || tr->attr_ints("perm") != perm) return nullptr;
  const size_t n = ks.rank(), m = mid.rank();
  if (!same_known(mid[m - 1], ks[n - 1]) || !same_known(mid[m - 2], ks[n - 2]) ||
      !same_known(out[n - 1], ks[n - 2]) || !same_known(out[n - 2], ks[n - 1]))
    return nullptr;
  for (size_t i = 0; i + 2 < n; ++i)
    if (!same_known(out[i], ks[i])) return nullptr;
  return k;
}

// k = kT with its last two axes swapped: a new Transpose placed before `before` (*created), or,
// when kT's own Transpose only swapped them (SDPA's math path) or kT is the batched detour
// above, that value.
Value* make_k(Graph& g, Value* kt, const Node* before, Node** created) {
  *created = nullptr;
  const Shape& s = kt->type.shape;
  if (!s.rank_known() || s.rank() < 2) return nullptr;
  if (Value* k = unbatched_transpose_source(kt)) return k;
  std::vector<int64_t> perm(s.rank());
  std::iota(perm.begin(), perm.end(), 0);
  Value* src = kt;
  if (Node* t = kt->producer; is_op(t, "Transpose", 1) && t->attr_ints("perm").size() == s.rank()) {
    perm = t->attr_ints("perm");
    src = t->inputs[0];
  }
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  if (identity && src != kt) return src;
  auto it = g.opsets().find("");
  int opset = it == g.opsets().end() ? 13 : it->second;
  Node* k = insert_node(g, "", "Transpose", opset, {src}, {{"perm", Attribute(perm)}}, before,
                        (kt->producer ? kt->producer->name : kt->name) + "_k");
  if (!k) return nullptr;
  if (!g.find_value(kt->name + "_k")) g.rename_value(k->outputs[0], kt->name + "_k");
  *created = k;
  return k->outputs[0];
}

class FuseAttention : public Pass {
 public:
  std::string name() const override { return "fuse-attention"; }
  Expected<bool> run(Graph& g) override {
    return rewrite_anchored(g, name(), {"MatMul"}, [](RewriteContext& c, Node& mm2) {
      auto m = match(c.g, c.uses, mm2);
      return m && apply(c.g, c.uses, *m, c.dead);
    });
  }

 private:
  static bool apply(Graph& g, const Uses& uses, const Match& m,
                    std::unordered_set<const Node*>& dead) {
    for (const Value* v : {m.q, m.kt, m.v})
      if (!v->type.shape.rank_known() || v->type.shape.rank() < 2 || !is_float_dtype(v->type.dtype))
        return false;
    // kT's own Transpose goes with the pattern when only the scores read it (make_k reads
    // its input), so that a later pass sees K's producer with no stale user.
    std::vector<const Node*> nodes = m.nodes;
    Node* t = producer_op(m.kt, "Transpose");
    Node* kt_user = sole_user(g, uses, m.kt);
    if (t && kt_user && std::find(nodes.begin(), nodes.end(), kt_user) != nodes.end())
      nodes.push_back(t);
    if (!replaceable(g, uses, nodes, m.y, dead)) return false;
    Node* before = m.y->producer;
    Node* k = nullptr;
    Value* kv = make_k(g, m.kt, before, &k);
    if (!kv) return false;
    if (m.window_mask) {
      if (apply_windowed(g, m, nodes, kv, dead)) return true;
      if (k) discard_node(g, k);
      return false;
    }
    std::vector<Value*> inputs{m.q, kv, m.v};
    if (m.mask) inputs.push_back(m.mask);
    if (!swap_in_node(g, nodes, m.y, dead, kFerriteDomain, "Attention", kFerriteOpset,
                      std::move(inputs), attention_attrs(m), before->name + "_attention")) {
      if (k) discard_node(g, k);
      return false;
    }
    return true;
  }

  static AttributeMap attention_attrs(const Match& m) {
    AttributeMap attrs{{"scale", Attribute(static_cast<float>(m.scale))},
                       {"nan_to_zero", Attribute(int64_t{m.nan_guard ? 1 : 0})}};
    if (m.masked_rows_guard) attrs.emplace("masked_rows_zero", Attribute(int64_t{1}));
    return attrs;
  }

  // The shifted-window form (see the top): q, k, v [N*W, d...] -> [N, W, d...], one mask of
  // both, the result merged back to [N*W, ...].
  static bool apply_windowed(Graph& g, const Match& m, const std::vector<const Node*>& nodes,
                             Value* kv, std::unordered_set<const Node*>& dead) {
    const size_t r = m.y->type.shape.rank();
    // The scores' mask broadcasts the same way in the split shape when it has no batch dim
    // (rank < r) or a unit one.
    if (m.mask) {
      const Shape& ms = m.mask->type.shape;
      if (!ms.rank_known() || ms.rank() > r || (ms.rank() == r && ms[0].value() != 1)) return false;
    }
    Node* before = m.y->producer;
    const int opset = onnx_opset_at_least(g, 14);
    std::vector<Node*> added;
    auto undo = [&]() {
      for (size_t i = added.size(); i-- > 0;) discard_node(g, added[i]);
      return false;
    };
    auto add = [&](const std::string& domain, const char* op, std::vector<Value*> in,
                   AttributeMap attrs, const std::string& hint) -> Value* {
      Node* n = insert_node(g, domain, op, domain.empty() ? opset : kFerriteOpset, std::move(in),
                            std::move(attrs), before, hint);
      if (!n) return nullptr;
      added.push_back(n);
      return n->outputs[0];
    };
    // [-1, lead..., dims[1:]] of v's static dims past the batch dim.
    auto shape_of = [&](const Value* v, std::vector<int64_t> lead,
                        const std::string& name) -> Value* {
      const Shape& s = v->type.shape;
      if (!s.rank_known() || s.rank() != r) return nullptr;
      for (size_t d = 1; d < r; ++d) {
        if (!s[d].is_static()) return nullptr;
        lead.push_back(*s[d].value());
      }
      const int64_t n = static_cast<int64_t>(lead.size());
      return g.add_initializer(name, Tensor::from_vector<int64_t>(lead, {n}));
    };
    const std::string base = before->name + "_attention";
    std::vector<Value*> in5;
    const std::pair<Value*, const char*> operands[] = {{m.q, "_q"}, {kv, "_k"}, {m.v, "_v"}};
    for (const auto& [v, tag] : operands) {
      Value* shape = shape_of(v, {-1, m.windows}, base + tag + "_windows");
      Value* v5 = shape ? add("", "Reshape", {v, shape}, {}, base + tag) : nullptr;
      if (!v5) return undo();
      in5.push_back(v5);
    }
    Value* mask = m.window_mask;
    if (m.mask && !(mask = add("", "Add", {m.mask, m.window_mask}, {}, base + "_mask")))
      return undo();
    in5.push_back(mask);
    Value* y5 = add(kFerriteDomain, "Attention", std::move(in5), attention_attrs(m), base);
    Value* merged = y5 ? shape_of(m.y, {-1}, base + "_merged") : nullptr;
    if (!merged) return undo();
    if (!swap_in_node(g, nodes, m.y, dead, "", "Reshape", opset, {y5, merged}, {}, base + "_merge"))
      return undo();
    return true;
  }
};

}  // namespace

FERRITE_REGISTER_PASSES(fuse_attention) {
  // Before fuse-matmul-epilogue, which would otherwise take the attention MatMuls.
  r.add({"fuse-attention",
         "recognise scaled dot-product attention (BERT, GPT-2 exports) as ferrite.Attention",
         [] { return std::make_unique<FuseAttention>(); },
         {{Stage::kRewrite, 50}},
         {},
         {"ferrite.Attention"}});
}

}  // namespace ferrite
