// fuse-layernorm: the decomposed layer normalisation
//   mean = ReduceMean(x, axes), d = x - mean, var = ReduceMean(d^2 | d*d, axes),
//   n = d / Sqrt(var + eps) [* gamma] [+ beta]
// becomes LayerNormalization(x, gamma, beta) {axis, epsilon} when `axes` are the last k axes
// (axis = -k) and keepdims=1. gamma and beta may be any values that broadcast onto the
// normalised dims only (rank <= k) and leave the shape as it is; without gamma a ones initializer
// stands in (needs static normalised dims). The LayerNormalization node gets opset
// max(model, 17); it computes in float (stash_type=1), so 16-bit models only gain precision.
#include <algorithm>

#include "passes/rewrite_util.h"

namespace ferrite {

namespace {

using namespace rewrite;

// The normalised axis (-k) of a ReduceMean over the last k axes with keepdims=1, or nullopt.
std::optional<int64_t> suffix_axis(const Node& r) {
  const Shape& s = r.inputs[0]->type.shape;
  if (!s.rank_known() || r.attr_int("keepdims", 1) != 1) return std::nullopt;
  std::vector<int64_t> axes;
  if (r.has_attr("axes")) {
    axes = r.attr_ints("axes");
  } else if (r.inputs.size() > 1 && r.inputs[1]) {
    const Tensor* t = constant_of(r.inputs[1]);
    if (!t || !is_integer(t->dtype())) return std::nullopt;
    axes = t->to_int_vector();
  }
  const int64_t rank = static_cast<int64_t>(s.rank());
  if (axes.empty() || static_cast<int64_t>(axes.size()) > rank) return std::nullopt;
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != rank - static_cast<int64_t>(axes.size() - i)) return std::nullopt;
  return -static_cast<int64_t>(axes.size());
}

struct Match {
  Value* x = nullptr;
  Value* gamma = nullptr;
  Value* beta = nullptr;
  Value* y = nullptr;
  int64_t axis = -1;
  double eps = 0;
  std::vector<const Node*> nodes;
};

// From the Div node n = d / sqrt(var + eps).
std::optional<Match> match_core(const Graph& g, const Uses& uses, const Node& div) {
  if (!is_op(&div, "Div", 2)) return std::nullopt;
  Value* d = div.inputs[0];
  Node* sqrt = div.inputs[1]->producer;
  Node* sub = d->producer;
  if (!is_op(sqrt, "Sqrt", 1) || !is_op(sub, "Sub", 2) ||
      sole_user(g, uses, sqrt->outputs[0]) != &div)
    return std::nullopt;
  Node* add = sqrt->inputs[0]->producer;
  if (!is_op(add, "Add", 2) || sole_user(g, uses, add->outputs[0]) != sqrt) return std::nullopt;
  Node* var = nullptr;
  std::optional<double> eps;
  for (Value* v : add->inputs) {
    Node* p = v->producer;
    if (is_op(p, "ReduceMean", p ? p->inputs.size() : 0) &&
        (eps = scalar_constant(other_operand(*add, v)))) {
      var = p;
      break;
    }
  }
  if (!var || !eps || *eps < 0 || sole_user(g, uses, var->outputs[0]) != add) return std::nullopt;
  Node* sq = var->inputs[0]->producer;
  bool is_square = false;
  if (is_op(sq, "Pow", 2) && sq->inputs[0] == d) {
    auto e = scalar_constant(sq->inputs[1]);
    is_square = e && *e == 2.0;
  } else if (is_op(sq, "Mul", 2)) {
    is_square = sq->inputs[0] == d && sq->inputs[1] == d;
  }
  if (!is_square || sole_user(g, uses, sq->outputs[0]) != var) return std::nullopt;
  Node* mean = sub->inputs[1]->producer;
  Value* x = sub->inputs[0];
  if (!is_op(mean, "ReduceMean", mean ? mean->inputs.size() : 0) || mean->inputs[0] != x ||
      sole_user(g, uses, mean->outputs[0]) != sub)
    return std::nullopt;
  auto axis = suffix_axis(*mean);
  if (!axis || suffix_axis(*var) != axis) return std::nullopt;
  Match m;
  m.x = x;
  m.axis = *axis;
  m.eps = *eps;
  m.nodes = {mean, sub, sq, var, add, sqrt, &div};
  if (!used_only_by(g, uses, d, {sq, &div})) return std::nullopt;
  m.y = div.outputs[0];
  return m;
}

// gamma/beta: a value that only broadcasts over the normalised dims and keeps the shape.
bool fits_normalised(const Value* p, const Value* in, const Value* out, int64_t axis) {
  const Shape& s = p->type.shape;
  return s.rank_known() && static_cast<int64_t>(s.rank()) <= -axis &&
         same_type(in->type, out->type);
}

// Optional Mul(n, gamma) then Add(., beta) after the core.
void match_affine(const Graph& g, const Uses& uses, Match& m) {
  Node* mul = sole_user(g, uses, m.y);
  if (is_op(mul, "Mul", 2) && mul->inputs[0] != mul->inputs[1]) {
    Value* gamma = other_operand(*mul, m.y);
    if (fits_normalised(gamma, m.y, mul->outputs[0], m.axis)) {
      m.gamma = gamma;
      m.nodes.push_back(mul);
      m.y = mul->outputs[0];
    }
  }
  Node* add = sole_user(g, uses, m.y);
  if (is_op(add, "Add", 2) && add->inputs[0] != add->inputs[1]) {
    Value* beta = other_operand(*add, m.y);
    if (fits_normalised(beta, m.y, add->outputs[0], m.axis)) {
      m.beta = beta;
      m.nodes.push_back(add);
      m.y = add->outputs[0];
    }
  }
}

class FuseLayerNorm : public Pass {
 public:
  std::string name() const override { return "fuse-layernorm"; }
  Expected<bool> run(Graph& g) override {
    return rewrite_anchored(g, name(), {"Div"}, [](RewriteContext& c, Node& div) {
      auto m = match_core(c.g, c.uses, div);
      if (!m) return false;
      match_affine(c.g, c.uses, *m);
      return apply(c.g, c.uses, *m, c.dead);
    });
  }

 private:
  static bool apply(Graph& g, const Uses& uses, const Match& m,
                    std::unordered_set<const Node*>& dead) {
    if (!is_float_dtype(m.x->type.dtype) || !same_type(m.x->type, m.y->type) ||
        !replaceable(g, uses, m.nodes, m.y, dead))
      return false;
    Value* gamma = m.gamma;
    if (!gamma) {
      const Shape& s = m.x->type.shape;
      std::vector<int64_t> dims;
      for (size_t i = s.rank() + m.axis; i < s.rank(); ++i) {
        if (!s[i].value()) return false;
        dims.push_back(*s[i].value());
      }
      Tensor ones = Tensor::zeros(m.x->type.dtype, dims);
      visit_dtype(ones.dtype(), [&]<class T>() {
        for (int64_t i = 0; i < ones.numel(); ++i) ones.data<T>()[i] = convert<T>(1.0f);
      });
      gamma = g.add_initializer(m.y->name + "_ln_scale", std::move(ones));
    }
    std::vector<Value*> inputs{m.x, gamma};
    if (m.beta) inputs.push_back(m.beta);
    AttributeMap attrs{{"axis", Attribute(m.axis)},
                       {"epsilon", Attribute(static_cast<float>(m.eps))},
                       {"stash_type", Attribute(int64_t{1})}};
    // Fails e.g. for a gamma of another dtype; an unused ones initializer is compacted.
    return swap_in_node(g, m.nodes, m.y, dead, "", "LayerNormalization", onnx_opset_at_least(g, 17),
                        std::move(inputs), std::move(attrs), m.y->producer->name + "_layernorm");
  }
};

}  // namespace

FERRITE_REGISTER_PASSES(fuse_layernorm) {
  r.add({"fuse-layernorm",
         "recognise the decomposed layer normalisation as LayerNormalization",
         [] { return std::make_unique<FuseLayerNorm>(); },
         {{Stage::kRewrite, 30}}});
}

}  // namespace ferrite
