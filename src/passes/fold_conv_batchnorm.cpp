// fold-conv-batchnorm: a Conv with constant weight (and bias, if any) followed by an
// inference-mode BatchNormalization with constant parameters becomes one Conv with
//   W'[m] = W[m] * s[m],  B'[m] = (B[m] - mean[m]) * s[m] + beta[m],  s = gamma / sqrt(var + eps),
// computed in double. A following Mul, Add or Sub(y, c) by a per-channel constant (one value per
// output channel along axis 1, or a single value) folds the same way, so Conv -> BN -> Mul -> Add
// chains collapse into one new weight and bias. Each folded value must feed nothing but the next
// folded node, and each folded node must keep the Conv's output type (a constant that broadcasts
// to a bigger shape is never folded). The count of matches is the number of folded nodes.
#include <algorithm>
#include <cmath>

#include "ops/context.h"
#include "passes/rewrite_util.h"

namespace ferrite {

namespace {

using namespace rewrite;

// y' = y * scale[m] + shift[m] per output channel m.
struct ChannelAffine {
  std::vector<double> scale, shift;
};

std::vector<double> to_doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.double_at(i);
  return v;
}

Tensor from_doubles(DType dt, const std::vector<double>& v, std::vector<int64_t> dims) {
  Tensor t = Tensor::zeros(dt, std::move(dims));
  visit_dtype(dt, [&]<class T>() {
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = convert<T>(convert<compute_t<T>>(v[i]));
  });
  return t;
}

// Per-channel values of a constant operand of an elementwise op on y [N, M, ...]: the constant
// must have one value or M values along the channel axis, and 1 everywhere else (right-aligned).
std::optional<std::vector<double>> per_channel(const Tensor& c, size_t y_rank, int64_t m) {
  if (c.rank() > y_rank || c.numel() == 0) return std::nullopt;
  size_t channel_axis = 1 + c.rank() - y_rank;  // in c's dims; may be out of range (wraps)
  for (size_t i = 0; i < c.rank(); ++i) {
    bool is_channel = c.rank() + 1 >= y_rank && i == channel_axis;
    if (c.dim(i) != 1 && !(is_channel && c.dim(i) == m)) return std::nullopt;
  }
  std::vector<double> vals = to_doubles(c);
  if (vals.size() == 1) vals.assign(static_cast<size_t>(m), vals[0]);
  return vals;
}

// The affine map that node `u` applies to the Conv output y, or nullopt if it does not fold.
std::optional<ChannelAffine> affine_of(const Graph& g, const Uses& uses, const Node& u,
                                       const Value* y, int64_t m) {
  if (!u.domain.empty() || u.outputs.empty() || !u.outputs[0]) return std::nullopt;
  const Value* out = u.outputs[0];
  if (!same_type(out->type, y->type)) return std::nullopt;
  size_t rank = y->type.shape.rank();
  if (u.op_type == "BatchNormalization") {
    if (u.inputs.size() != 5 || u.inputs[0] != y || u.attr_int("training_mode") != 0)
      return std::nullopt;
    for (size_t i = 1; i < u.outputs.size(); ++i)  // running statistics must be unused
      if (u.outputs[i] && (use_count(uses, u.outputs[i]) || is_graph_output(g, u.outputs[i])))
        return std::nullopt;
    std::vector<double> p[4];
    for (int i = 0; i < 4; ++i) {
      const Tensor* t = constant_of(u.inputs[i + 1]);
      if (!t || t->rank() != 1 || t->numel() != m || t->dtype() != y->type.dtype)
        return std::nullopt;
      p[i] = to_doubles(*t);
    }
    double eps = u.attr_float("epsilon");
    ChannelAffine a{std::vector<double>(m), std::vector<double>(m)};
    for (int64_t c = 0; c < m; ++c) {
      a.scale[c] = p[0][c] / std::sqrt(p[3][c] + eps);
      a.shift[c] = p[1][c] - p[2][c] * a.scale[c];
    }
    return a;
  }
  bool mul = u.op_type == "Mul", add = u.op_type == "Add", sub = u.op_type == "Sub";
  if (!(mul || add || sub) || u.inputs.size() != 2 || u.inputs[0] == u.inputs[1])
    return std::nullopt;
  if (sub && u.inputs[0] != y) return std::nullopt;  // c - y would negate the weights
  const Tensor* c = constant_of(other_operand(u, y));
  if (!c || c->dtype() != y->type.dtype) return std::nullopt;
  auto vals = per_channel(*c, rank, m);
  if (!vals) return std::nullopt;
  ChannelAffine a{std::vector<double>(m, 1.0), std::vector<double>(m, 0.0)};
  if (mul) a.scale = *vals;
  for (int64_t i = 0; i < m && !mul; ++i) a.shift[i] = sub ? -(*vals)[i] : (*vals)[i];
  return a;
}

class FoldConvBatchNorm : public Pass {
 public:
  std::string name() const override { return "fold-conv-batchnorm"; }
  // Counts one match per folded node.
  Expected<bool> run(Graph& g) override {
    return rewrite_anchored(g, name(), {"Conv"}, [](RewriteContext& c, Node& conv) {
      return fold_chain(c.g, c.uses, conv, c.dead);
    });
  }

 private:
  // Folds the longest chain of foldable single users after `conv` into its weight and bias;
  // returns how many nodes were folded.
  static int fold_chain(Graph& g, const Uses& uses, Node& conv,
                        std::unordered_set<const Node*>& dead) {
    Value* y = conv.outputs[0];
    const Tensor* w = constant_of(conv.input(1));
    const Tensor* b = conv.input(2) ? constant_of(conv.input(2)) : nullptr;
    if (!y || !w || (conv.input(2) && !b) || !is_float_dtype(w->dtype()) || w->rank() < 1) return 0;
    if (!y->type.shape.rank_known() || y->type.shape.rank() < 3 || w->dtype() != y->type.dtype)
      return 0;
    const int64_t m = w->dim(0);
    if (y->type.shape[1] != Dim(m) || (b && (b->rank() != 1 || b->numel() != m))) return 0;
    // Compose y -> y * scale + shift along the chain.
    ChannelAffine total{std::vector<double>(m, 1.0), std::vector<double>(m, 0.0)};
    std::vector<const Node*> chain;
    for (Value* cur = y;;) {
      auto it = uses.find(cur);
      if (is_graph_output(g, cur) || it == uses.end() || it->second.size() != 1) break;
      const Node& u = *it->second[0].node;
      auto a = affine_of(g, uses, u, cur, m);
      if (!a) break;
      for (int64_t c = 0; c < m; ++c) {
        total.scale[c] *= a->scale[c];
        total.shift[c] = total.shift[c] * a->scale[c] + a->shift[c];
      }
      chain.push_back(&u);
      cur = u.outputs[0];
    }
    if (chain.empty()) return 0;

    std::vector<double> wd = to_doubles(*w), bd = b ? to_doubles(*b) : std::vector<double>(m, 0.0);
    const int64_t block = m ? w->numel() / m : 0;
    for (int64_t c = 0; c < m; ++c) {
      for (int64_t i = 0; i < block; ++i) wd[c * block + i] *= total.scale[c];
      bd[c] = bd[c] * total.scale[c] + total.shift[c];
    }
    Value* nw = g.add_initializer(conv.inputs[1]->name + "_folded",
                                  from_doubles(w->dtype(), wd, w->dims()));
    Value* nb = g.add_initializer((b ? conv.inputs[2]->name : conv.name + "_bias") + "_folded",
                                  from_doubles(w->dtype(), bd, {m}));
    std::vector<Value*> old_inputs = conv.inputs;
    conv.inputs.resize(3);
    conv.inputs[1] = nw;
    conv.inputs[2] = nb;
    TensorType before = y->type;
    Value* last = chain.back()->outputs[0];
    if (!infer_node(conv) || !(y->type == before) || !replace_value(g, last, y)) {
      conv.inputs = old_inputs;  // cannot happen for a valid Conv; keep the graph as it was
      y->type = before;
      return 0;
    }
    dead.insert(chain.begin(), chain.end());
    return static_cast<int>(chain.size());
  }
};

}  // namespace

FERRITE_REGISTER_PASSES(fold_conv_batchnorm) {
  // First of the rewrites: it needs the bare Conv -> BatchNormalization, before
  // fuse-conv-activation takes the Conv.
  r.add({"fold-conv-batchnorm",
         "fold inference BatchNormalization and per-channel Mul/Add constants into Conv weights",
         [] { return std::make_unique<FoldConvBatchNorm>(); },
         {{Stage::kRewrite, 10}}});
}

}  // namespace ferrite
