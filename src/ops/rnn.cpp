// Recurrent layers (opset 7 and 14): RNN, GRU and LSTM, forward, reverse or bidirectional, with
// sequence_lens, initial states, layout 0 ([seq, batch, ...]) or 1 ([batch, seq, ...]), the
// activation list, clip, GRU's linear_before_reset and LSTM's peepholes and input_forget.
// The reference kernels step through time in double.
#include <algorithm>
#include <cmath>
#include <map>

#include "ops/elementwise_util.h"
#include "ops/helpers.h"
#include "ops/numeric_cast.h"

namespace ferrite {

namespace {

enum class Cell { kRnn, kGru, kLstm };

int gates(Cell c) {
  return c == Cell::kRnn ? 1 : c == Cell::kGru ? 3 : 4;
}
// Activations per direction: RNN f; GRU f, g; LSTM f, g, h.
size_t num_acts(Cell c) {
  return c == Cell::kRnn ? 1 : c == Cell::kGru ? 2 : 3;
}

struct Act {
  std::string name;
  double alpha = 0, beta = 0;
  double operator()(double x) const {
    if (name == "Tanh") return std::tanh(x);
    if (name == "Sigmoid") return 1 / (1 + std::exp(-x));
    if (name == "Relu") return std::max(x, 0.0);
    if (name == "LeakyRelu") return x >= 0 ? x : alpha * x;
    if (name == "ThresholdedRelu") return x > alpha ? x : 0;
    if (name == "ScaledTanh") return alpha * std::tanh(beta * x);
    if (name == "HardSigmoid") return std::clamp(alpha * x + beta, 0.0, 1.0);
    if (name == "Elu") return x >= 0 ? x : alpha * (std::exp(x) - 1);
    if (name == "Softsign") return x / (1 + std::fabs(x));
    if (name == "Softplus") return std::log1p(std::exp(x));
    return alpha * x + beta;  // Affine
  }
};

// The activations for `dirs` directions, with their alpha/beta taken in order by the functions
// that have parameters (defaults as in ONNX).
template <class Ctx>
Expected<std::vector<Act>> activations(const Ctx& ctx, Cell cell, int64_t dirs) {
  const Node& n = ctx.node();
  std::vector<std::string> names =
      n.has_attr("activations") ? n.attrs.at("activations").strings() : std::vector<std::string>{};
  if (names.empty()) {
    std::vector<std::string> one = cell == Cell::kRnn ? std::vector<std::string>{"Tanh"}
                                   : cell == Cell::kGru
                                       ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                       : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
    for (int64_t d = 0; d < dirs; ++d) names.insert(names.end(), one.begin(), one.end());
  }
  if (names.size() != num_acts(cell) * static_cast<size_t>(dirs))
    return ctx.error("expected ", num_acts(cell) * dirs, " activations, got ", names.size());
  std::vector<float> alphas = n.attr_floats("activation_alpha"),
                     betas = n.attr_floats("activation_beta");
  size_t ai = 0, bi = 0;
  std::vector<Act> acts;
  for (const auto& name : names) {
    Act a{name};
    static const std::map<std::string, std::pair<double, double>> kDefaults = {
        {"Tanh", {0, 0}},           {"Sigmoid", {0, 0}},
        {"Relu", {0, 0}},           {"Softsign", {0, 0}},
        {"Softplus", {0, 0}},       {"LeakyRelu", {0.01, 0}},
        {"Elu", {1.0, 0}},          {"ThresholdedRelu", {1.0, 0}},
        {"ScaledTanh", {1.0, 1.0}}, {"HardSigmoid", {0.2, 0.5}},
        {"Affine", {1.0, 0}}};
    auto it = kDefaults.find(name);
    if (it == kDefaults.end()) return ctx.error("unknown activation '", name, "'");
    a.alpha = it->second.first;
    a.beta = it->second.second;
    bool has_alpha = name == "LeakyRelu" || name == "ThresholdedRelu" || name == "ScaledTanh" ||
                     name == "HardSigmoid" || name == "Elu" || name == "Affine";
    bool has_beta = name == "ScaledTanh" || name == "HardSigmoid" || name == "Affine";
    if (has_alpha && ai < alphas.size()) a.alpha = alphas[ai++];
    if (has_beta && bi < betas.size()) a.beta = betas[bi++];
    acts.push_back(a);
  }
  return acts;
}

Expected<int64_t> num_directions(const InferContext& ctx) {
  std::string d = ctx.node().attr_string("direction", "forward");
  if (d == "forward" || d == "reverse") return 1;
  if (d == "bidirectional") return 2;
  return ctx.error("direction must be forward, reverse or bidirectional, got '", d, "'");
}

Status infer_rnn(InferContext& ctx, Cell cell) {
  FERRITE_ASSIGN_OR_RETURN(int64_t dirs, num_directions(ctx));
  FERRITE_RETURN_IF_ERROR(activations(ctx, cell, dirs).status());
  const Shape& x = ctx.input_shape(0);
  const int64_t layout = ctx.node().attr_int("layout", 0);
  if (layout != 0 && layout != 1) return ctx.error("layout must be 0 or 1");
  if (ctx.node().attr_int("hidden_size", 0) <= 0) return ctx.error("hidden_size must be positive");
  const Dim h(ctx.node().attr_int("hidden_size", 0));
  if (x.rank_known() && x.rank() != 3) return ctx.error("X must have rank 3");
  Dim seq = x.rank_known() ? x.dims()[layout == 0 ? 0 : 1] : Dim::unknown();
  Dim batch = x.rank_known() ? x.dims()[layout == 0 ? 1 : 0] : Dim::unknown();
  DType dt = ctx.input_dtype(0);
  const Dim d(dirs);
  if (ctx.num_outputs() > 0 && ctx.has_output(0))
    ctx.set_output(0, dt, layout == 0 ? Shape({seq, d, batch, h}) : Shape({batch, seq, d, h}));
  for (size_t i = 1; i < ctx.num_outputs(); ++i)
    if (ctx.has_output(i))
      ctx.set_output(i, dt, layout == 0 ? Shape({d, batch, h}) : Shape({batch, d, h}));
  return Status::ok();
}

// Reads an optional input as doubles; empty when absent.
std::vector<double> doubles(const KernelContext& ctx, size_t i) {
  std::vector<double> v;
  if (ctx.num_inputs() <= i || !ctx.has_input(i)) return v;
  const Tensor& t = ctx.input(i);
  visit_dtype(t.dtype(), [&]<class T>() {
    for (int64_t k = 0; k < t.numel(); ++k) v.push_back(to_double(t.data<T>()[k]));
  });
  return v;
}

struct RnnDims {
  int64_t seq, batch, in, h, dirs, g;
};

// One direction over the whole batch. States h, c are [batch, H]; y is [seq, batch, H] for this
// direction (zero past each sequence's length).
void run_direction(Cell cell, const RnnDims& s, const std::vector<double>& x, const double* w,
                   const double* r, const double* bias, const double* peep, const Act* act,
                   double clip, bool lbr, bool input_forget, bool reverse,
                   const std::vector<int64_t>& lens, std::vector<double>& h, std::vector<double>& c,
                   std::vector<double>& y) {
  const int64_t H = s.h, G = s.g;
  std::vector<double> pre(static_cast<size_t>(G * H)), rh(static_cast<size_t>(G * H));
  auto clipped = [clip](double v) { return clip > 0 ? std::clamp(v, -clip, clip) : v; };
  for (int64_t b = 0; b < s.batch; ++b) {
    double* hb = &h[b * H];
    double* cb = &c[b * H];
    for (int64_t step = 0; step < lens[b]; ++step) {
      int64_t t = reverse ? lens[b] - 1 - step : step;
      const double* xt = &x[(t * s.batch + b) * s.in];
      // pre = x W^T + Wb; rh = h R^T + Rb, per gate row.
      for (int64_t j = 0; j < G * H; ++j) {
        double a = bias ? bias[j] : 0, q = bias ? bias[G * H + j] : 0;
        for (int64_t k = 0; k < s.in; ++k) a += xt[k] * w[j * s.in + k];
        for (int64_t k = 0; k < H; ++k) q += hb[k] * r[j * H + k];
        pre[j] = a;
        rh[j] = q;
      }
      std::vector<double> hn(static_cast<size_t>(H));
      for (int64_t k = 0; k < H; ++k) {
        if (cell == Cell::kRnn) {
          hn[k] = act[0](clipped(pre[k] + rh[k]));
        } else if (cell == Cell::kGru) {
          double z = act[0](clipped(pre[k] + rh[k]));
          double rr = act[0](clipped(pre[H + k] + rh[H + k]));
          double cand;
          if (lbr) {
            cand = pre[2 * H + k] + rr * rh[2 * H + k];
          } else {
            // (r . h) R_h^T + Rb_h: recomputed with the reset-gated state.
            double q = bias ? bias[G * H + 2 * H + k] : 0;
            for (int64_t m = 0; m < H; ++m) {
              double rm = act[0](clipped(pre[H + m] + rh[H + m]));
              q += rm * hb[m] * r[(2 * H + k) * H + m];
            }
            cand = pre[2 * H + k] + q;
          }
          double hh = act[1](clipped(cand));
          hn[k] = (1 - z) * hh + z * hb[k];
        } else {
          double pi = peep ? peep[k] : 0, po = peep ? peep[H + k] : 0,
                 pf = peep ? peep[2 * H + k] : 0;
          double i = act[0](clipped(pre[k] + rh[k] + pi * cb[k]));
          double f =
              input_forget ? 1 - i : act[0](clipped(pre[2 * H + k] + rh[2 * H + k] + pf * cb[k]));
          double g = act[1](clipped(pre[3 * H + k] + rh[3 * H + k]));
          double cn = f * cb[k] + i * g;
          double o = act[0](clipped(pre[H + k] + rh[H + k] + po * cn));
          cb[k] = cn;
          hn[k] = o * act[2](cn);
        }
      }
      std::copy(hn.begin(), hn.end(), hb);
      std::copy(hn.begin(), hn.end(), &y[(t * s.batch + b) * H]);
    }
  }
}

Status rnn_kernel(KernelContext& ctx, Cell cell) {
  const Node& n = ctx.node();
  const Tensor& xt = ctx.input(0);
  const int64_t layout = n.attr_int("layout", 0);
  const std::string direction = n.attr_string("direction", "forward");
  RnnDims s{};
  s.dirs = direction == "bidirectional" ? 2 : 1;
  s.h = n.attr_int("hidden_size", 0);
  s.g = gates(cell);
  if (xt.rank() != 3) return ctx.error("X must have rank 3");
  s.seq = xt.dims()[layout == 0 ? 0 : 1];
  s.batch = xt.dims()[layout == 0 ? 1 : 0];
  s.in = xt.dims()[2];
  const Tensor& w = ctx.input(1);
  const Tensor& r = ctx.input(2);
  // hidden_size is bounded by W before it is multiplied (a hostile value must not overflow).
  if (w.rank() != 3 || s.h < 1 || s.h > w.dims()[1] ||
      w.dims() != std::vector<int64_t>{s.dirs, s.g * s.h, s.in} ||
      r.dims() != std::vector<int64_t>{s.dirs, s.g * s.h, s.h})
    return ctx.error("W or R does not match X, hidden_size and direction");
  FERRITE_ASSIGN_OR_RETURN(std::vector<Act> acts, activations(ctx, cell, s.dirs));
  std::vector<double> x = doubles(ctx, 0), wd = doubles(ctx, 1), rd = doubles(ctx, 2);
  std::vector<double> bias = doubles(ctx, 3), init_h = doubles(ctx, 5);
  std::vector<double> init_c = cell == Cell::kLstm ? doubles(ctx, 6) : std::vector<double>{};
  std::vector<double> peep = cell == Cell::kLstm ? doubles(ctx, 7) : std::vector<double>{};
  const int64_t state = s.dirs * s.batch * s.h;
  if ((!bias.empty() && static_cast<int64_t>(bias.size()) != s.dirs * 2 * s.g * s.h) ||
      (!init_h.empty() && static_cast<int64_t>(init_h.size()) != state) ||
      (!init_c.empty() && static_cast<int64_t>(init_c.size()) != state) ||
      (!peep.empty() && static_cast<int64_t>(peep.size()) != s.dirs * 3 * s.h))
    return ctx.error("B, initial_h, initial_c or P has the wrong size");
  std::vector<int64_t> lens(static_cast<size_t>(s.batch), s.seq);
  if (ctx.num_inputs() > 4 && ctx.has_input(4)) {
    std::vector<double> l = doubles(ctx, 4);
    if (static_cast<int64_t>(l.size()) != s.batch)
      return ctx.error("sequence_lens must be [batch]");
    for (int64_t b = 0; b < s.batch; ++b) {
      if (l[b] < 0 || l[b] > static_cast<double>(s.seq))
        return ctx.error("sequence_lens[", b, "] is outside [0, ", s.seq, "]");
      lens[b] = static_cast<int64_t>(l[b]);
    }
  }
  // Work in layout 0: x [seq, batch, in]; states [dirs, batch, H].
  auto to_l0 = [&](std::vector<double>& v, int64_t a, int64_t b, int64_t inner) {
    if (layout == 0 || v.empty()) return;
    std::vector<double> t(v.size());
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        std::copy_n(&v[(i * b + j) * inner], inner, &t[(j * a + i) * inner]);
    v.swap(t);
  };
  to_l0(x, s.batch, s.seq, s.in);
  to_l0(init_h, s.batch, s.dirs, s.h);
  to_l0(init_c, s.batch, s.dirs, s.h);
  std::vector<double> h = init_h.empty() ? std::vector<double>(state, 0.0) : init_h;
  std::vector<double> c = init_c.empty() ? std::vector<double>(state, 0.0) : init_c;
  std::vector<double> y(static_cast<size_t>(s.dirs * s.seq * s.batch * s.h), 0.0);
  const double clip = n.has_attr("clip") ? n.attr_float("clip") : 0;
  for (int64_t d = 0; d < s.dirs; ++d) {
    std::vector<double> hd(&h[d * s.batch * s.h], &h[(d + 1) * s.batch * s.h]);
    std::vector<double> cd(&c[d * s.batch * s.h], &c[(d + 1) * s.batch * s.h]);
    std::vector<double> yd(static_cast<size_t>(s.seq * s.batch * s.h), 0.0);
    run_direction(cell, s, x, &wd[d * s.g * s.h * s.in], &rd[d * s.g * s.h * s.h],
                  bias.empty() ? nullptr : &bias[d * 2 * s.g * s.h],
                  peep.empty() ? nullptr : &peep[d * 3 * s.h], &acts[d * num_acts(cell)], clip,
                  n.attr_int("linear_before_reset", 0) != 0, n.attr_int("input_forget", 0) != 0,
                  direction == "reverse" || d == 1, lens, hd, cd, yd);
    std::copy(hd.begin(), hd.end(), &h[d * s.batch * s.h]);
    std::copy(cd.begin(), cd.end(), &c[d * s.batch * s.h]);
    for (int64_t t = 0; t < s.seq; ++t)
      std::copy_n(&yd[t * s.batch * s.h], s.batch * s.h, &y[(t * s.dirs + d) * s.batch * s.h]);
  }
  // Outputs, back in the requested layout.
  auto write = [&](size_t i, const std::vector<double>& v, std::vector<int64_t> l0_dims) -> Status {
    if (ctx.num_outputs() <= i || !ctx.has_output(i)) return Status::ok();
    std::vector<int64_t> dims = l0_dims;
    int64_t a = l0_dims[0], b = l0_dims[1], inner = 1;
    for (size_t k = 2; k < l0_dims.size(); ++k) inner *= l0_dims[k];
    if (layout == 1) {
      // [seq, dirs, batch, H] -> [batch, seq, dirs, H]; [dirs, batch, H] -> [batch, dirs, H].
      dims = l0_dims.size() == 4
                 ? std::vector<int64_t>{l0_dims[2], l0_dims[0], l0_dims[1], l0_dims[3]}
                 : std::vector<int64_t>{l0_dims[1], l0_dims[0], l0_dims[2]};
    }
    FERRITE_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(i, xt.dtype(), dims));
    return dispatch_dtype<TypeClass::kFloat>(ctx, xt.dtype(), [&]<class T>() -> Status {
      T* p = out->data<T>();
      if (layout == 0) {
        for (size_t k = 0; k < v.size(); ++k) p[k] = convert<T>(v[k]);
        return Status::ok();
      }
      if (l0_dims.size() == 3) {  // [a=dirs, b=batch, H] -> [batch, dirs, H]
        for (int64_t i0 = 0; i0 < a; ++i0)
          for (int64_t j = 0; j < b; ++j)
            for (int64_t k = 0; k < inner; ++k)
              p[(j * a + i0) * inner + k] = convert<T>(v[(i0 * b + j) * inner + k]);
        return Status::ok();
      }
      const int64_t dirs = l0_dims[1], batch = l0_dims[2], hh = l0_dims[3];
      for (int64_t t = 0; t < a; ++t)
        for (int64_t d = 0; d < dirs; ++d)
          for (int64_t bb = 0; bb < batch; ++bb)
            for (int64_t k = 0; k < hh; ++k)
              p[((bb * a + t) * dirs + d) * hh + k] =
                  convert<T>(v[((t * dirs + d) * batch + bb) * hh + k]);
      return Status::ok();
    });
  };
  FERRITE_RETURN_IF_ERROR(write(0, y, {s.seq, s.dirs, s.batch, s.h}));
  FERRITE_RETURN_IF_ERROR(write(1, h, {s.dirs, s.batch, s.h}));
  if (cell == Cell::kLstm) FERRITE_RETURN_IF_ERROR(write(2, c, {s.dirs, s.batch, s.h}));
  return Status::ok();
}

}  // namespace

void register_rnn_ops(OpRegistry& r) {
  const std::pair<const char*, Cell> cells[] = {
      {"RNN", Cell::kRnn}, {"GRU", Cell::kGru}, {"LSTM", Cell::kLstm}};
  for (const auto& [name, kind] : cells) {
    Cell cell = kind;
    OpSchemaBuilder b(name);
    // Opset 13 still has RNN/GRU/LSTM-7, which is -14 without `layout` (that is, layout 0).
    b.versions(13)
        .inputs(3, cell == Cell::kLstm ? 8 : 6)
        .outputs(0, cell == Cell::kLstm ? 3 : 2)
        .optional_attr("activation_alpha", AttrType::kFloats)
        .optional_attr("activation_beta", AttrType::kFloats)
        .optional_attr("activations", AttrType::kStrings)
        .optional_attr("clip", AttrType::kFloat)
        .attr("direction", AttrType::kString, "forward")
        .required_attr("hidden_size", AttrType::kInt)
        .attr("layout", AttrType::kInt, 0)
        .types("T", {0, 1, 2, 3, 5, 6, 7}, dtypes::kFloat)
        .types("T1", {4}, {DType::kI32})
        .infer([cell](InferContext& ctx) { return infer_rnn(ctx, cell); })
        .kernel([cell](KernelContext& ctx) { return rnn_kernel(ctx, cell); });
    if (cell == Cell::kGru) b.attr("linear_before_reset", AttrType::kInt, 0);
    if (cell == Cell::kLstm) b.attr("input_forget", AttrType::kInt, 0);
    r.add(b);
  }
}

}  // namespace ferrite
