// Reductions (Reduce*, ArgMax, ArgMin), normalisations along one axis (Softmax, LogSoftmax,
// Hardmax) and the losses that reduce over the class axis (NegativeLogLikelihoodLoss,
// SoftmaxCrossEntropyLoss).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/helpers.h"
#include "ops/numeric_cast.h"

namespace ferrite {

namespace {

enum class Red { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------------------------------------
// Group reductions. A group holds the values that reduce into one output element; an empty group
// yields the op's identity (0 for sums, 1 for products, -inf/+inf for max/min, log(0) = -inf for
// the log-sums, NaN for the mean).

double reduce_float_group(Red op, const double* v, int64_t n) {
  double acc = 0;
  switch (op) {
    case Red::kSum:
    case Red::kMean:
      for (int64_t i = 0; i < n; ++i) acc += v[i];
      return op == Red::kMean ? acc / static_cast<double>(n) : acc;
    case Red::kMax:
    case Red::kMin: {
      acc = op == Red::kMax ? -kInf : kInf;
      for (int64_t i = 0; i < n; ++i) {
        if (std::isnan(v[i])) return v[i];  // NaN propagates, as in NumPy
        acc = op == Red::kMax ? std::max(acc, v[i]) : std::min(acc, v[i]);
      }
      return acc;
    }
    case Red::kProd:
      acc = 1;
      for (int64_t i = 0; i < n; ++i) acc *= v[i];
      return acc;
    case Red::kL1:
      for (int64_t i = 0; i < n; ++i) acc += std::fabs(v[i]);
      return acc;
    case Red::kL2:
    case Red::kSumSquare:
      for (int64_t i = 0; i < n; ++i) acc += v[i] * v[i];
      return op == Red::kL2 ? std::sqrt(acc) : acc;
    case Red::kLogSum:
      for (int64_t i = 0; i < n; ++i) acc += v[i];
      return std::log(acc);
    case Red::kLogSumExp: {
      // Shift by the maximum so that large inputs do not overflow exp.
      double m = -kInf;
      for (int64_t i = 0; i < n; ++i) {
        if (std::isnan(v[i])) return v[i];
        m = std::max(m, v[i]);
      }
      if (!std::isfinite(m)) return m;
      for (int64_t i = 0; i < n; ++i) acc += std::exp(v[i] - m);
      return m + std::log(acc);
    }
  }
  return acc;
}

// Integer groups: sums and products wrap modulo 2^N like the storage type (computed in uint64 so
// that overflow is defined); the results that are not integers by nature (mean, L2, log-sums)
// are computed in double and truncated.
template <class T>
T reduce_int_group(Red op, const T* v, int64_t n) {
  auto wrap = [](T x) { return static_cast<uint64_t>(static_cast<int64_t>(x)); };
  auto as_double = [](uint64_t s) {
    if constexpr (std::is_signed_v<T>)
      return static_cast<double>(static_cast<int64_t>(s));
    else
      return static_cast<double>(s);
  };
  uint64_t acc = 0;
  switch (op) {
    case Red::kSum:
    case Red::kMean:
    case Red::kLogSum:
      for (int64_t i = 0; i < n; ++i) acc += wrap(v[i]);
      if (op == Red::kSum) return static_cast<T>(acc);
      if (op == Red::kLogSum) return saturate_cast<T>(std::log(as_double(acc)));
      return n == 0 ? T(0) : saturate_cast<T>(as_double(acc) / static_cast<double>(n));
    case Red::kMax:
    case Red::kMin: {
      T m = op == Red::kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
      for (int64_t i = 0; i < n; ++i) m = op == Red::kMax ? std::max(m, v[i]) : std::min(m, v[i]);
      return m;
    }
    case Red::kProd:
      acc = 1;
      for (int64_t i = 0; i < n; ++i) acc *= wrap(v[i]);
      return static_cast<T>(acc);
    case Red::kL1:
      for (int64_t i = 0; i < n; ++i) acc += v[i] < T(0) ? uint64_t{0} - wrap(v[i]) : wrap(v[i]);
      return static_cast<T>(acc);
    case Red::kSumSquare:
      for (int64_t i = 0; i < n; ++i) acc += wrap(v[i]) * wrap(v[i]);
      return static_cast<T>(acc);
    case Red::kL2: {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += static_cast<double>(v[i]) * static_cast<double>(v[i]);
      return saturate_cast<T>(std::sqrt(s));
    }
    case Red::kLogSumExp: {
      double m = -kInf, s = 0;
      for (int64_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(v[i]));
      if (n == 0) return saturate_cast<T>(-kInf);
      for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(v[i]) - m);
      return saturate_cast<T>(m + std::log(s));
    }
  }
  return T(0);
}

// ---------------------------------------------------------------------------------------------
// Axes.

// axes come from input 1 for ReduceSum (all opsets here) and for every Reduce op from opset 18;
// before that from the `axes` attribute.
bool axes_from_input(const Node& node) {
  return node.op_type == "ReduceSum" || node.opset >= 18;
}

// Normalises axes against `rank`; rejects out-of-range and repeated axes.
template <class Ctx>
Expected<std::vector<bool>> reduced_mask(const Ctx& ctx, const std::vector<int64_t>& axes,
                                         int64_t rank) {
  std::vector<bool> mask(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return ctx.error("axis ", a, " is out of range for rank ", rank);
    int64_t n = a < 0 ? a + rank : a;
    if (mask[n]) return ctx.error("axis ", a, " is repeated in axes");
    mask[n] = true;
  }
  return mask;
}

Status check_reduce_attrs(const InferContext& ctx) {
  const Node& node = ctx.node();
  if (axes_from_input(node)) {
    if (node.has_attr("axes"))
      return ctx.error("'axes' is an input, not an attribute, for ", node.op_type, " at opset ",
                       node.opset);
  } else {
    if (ctx.has_input(1))
      return ctx.error(node.op_type, " takes 'axes' as an attribute before opset 18");
    if (node.attr_int("noop_with_empty_axes") != 0)
      return ctx.error("noop_with_empty_axes needs opset 18 for ", node.op_type);
  }
  if (ctx.input_dtype(0) == DType::kBool && node.opset < 20)
    return ctx.error(node.op_type, " on bool needs opset 20");
  if ((ctx.input_dtype(0) == DType::kI8 || ctx.input_dtype(0) == DType::kU8) && node.opset < 18)
    return ctx.error(node.op_type, " on ", dtype_name(ctx.input_dtype(0)), " needs opset 18");
  return Status::ok();
}

// Shape arithmetic: ReduceSum/Prod/Max/Min over a 1-d shape-like tensor keeps its symbols.
void propagate_dims_value(InferContext& ctx, Red op) {
  auto v = ctx.input_dims_value(0);
  if (!v || ctx.input_shape(0).rank() != 1) return;
  if (v->empty() && (op == Red::kMax || op == Red::kMin)) return;
  Dim acc = op == Red::kProd ? Dim(1) : Dim(0);
  for (size_t i = 0; i < v->size(); ++i) {
    const Dim& d = (*v)[i];
    if (!d.is_known()) return;
    if (op == Red::kSum)
      acc = acc + d;
    else if (op == Red::kProd)
      acc = acc * d;
    else if (i == 0)
      acc = d;
    else
      acc = Dim(op == Red::kMax ? SymExpr::max(acc.expr(), d.expr())
                                : SymExpr::min(acc.expr(), d.expr()));
  }
  ctx.set_output_dims_value(0, {acc});
}

Status infer_reduce(InferContext& ctx, Red op) {
  FERRITE_RETURN_IF_ERROR(check_reduce_attrs(ctx));
  const Node& node = ctx.node();
  DType dt = ctx.input_dtype(0);
  const Shape& in = ctx.input_shape(0);
  bool keep = node.attr_int("keepdims", 1) != 0;
  bool noop = node.attr_int("noop_with_empty_axes", 0) != 0;
  std::optional<std::vector<int64_t>> axes;
  if (!axes_from_input(node)) {
    axes = node.attr_ints("axes");
  } else if (!ctx.has_input(1)) {
    axes = std::vector<int64_t>{};
  } else if (auto v = ctx.input_dims_value(1)) {
    std::vector<int64_t> a;
    for (const Dim& d : *v)
      if (d.is_static()) a.push_back(*d.value());
    if (a.size() == v->size()) axes = std::move(a);
  }
  if (!in.rank_known()) {
    ctx.set_output(0, dt, Shape::unknown_rank());
    return Status::ok();
  }
  int64_t rank = static_cast<int64_t>(in.rank());
  if (!axes) {
    // Which axes are reduced is only known at run time.
    const Shape& as = ctx.input_shape(1);
    if (keep) {
      std::vector<Dim> dims;
      for (const Dim& d : in.dims()) dims.push_back(d.value() == 1 ? Dim(1) : Dim::unknown());
      ctx.set_output(0, dt, Shape(dims));
    } else if (as.rank_known() && as.rank() == 1 && as[0].is_static() && *as[0].value() > 0 &&
               *as[0].value() <= rank) {
      ctx.set_output(0, dt, Shape(std::vector<Dim>(rank - *as[0].value(), Dim::unknown())));
    } else {
      ctx.set_output(0, dt, Shape::unknown_rank());
    }
    return Status::ok();
  }
  if (axes->empty() && noop) {
    ctx.set_output(0, ctx.input_type(0));
    return Status::ok();
  }
  FERRITE_ASSIGN_OR_RETURN(auto mask, reduced_mask(ctx, *axes, rank));
  std::vector<Dim> dims;
  for (int64_t i = 0; i < rank; ++i) {
    if (!mask[i])
      dims.push_back(in[i]);
    else if (keep)
      dims.push_back(Dim(1));
  }
  ctx.set_output(0, dt, Shape(dims));
  if (op == Red::kSum || op == Red::kProd || op == Red::kMax || op == Red::kMin)
    propagate_dims_value(ctx, op);
  return Status::ok();
}

Status reduce_kernel(KernelContext& ctx, Red op) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.input(0);
  bool keep = node.attr_int("keepdims", 1) != 0;
  bool noop = node.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<int64_t> axes =
      axes_from_input(node) ? optional_int_input(ctx, 1) : node.attr_ints("axes");
  int64_t rank = static_cast<int64_t>(x.rank());
  FERRITE_ASSIGN_OR_RETURN(auto mask, reduced_mask(ctx, axes, rank));
  if (axes.empty() && noop) {
    // Nothing is reduced, but the per-element part of the op still applies (|x| for ReduceL1,
    // x*x for ReduceSumSquare, ...), as the corrected ONNX spec and ONNX Runtime do.
    if (op == Red::kSum || op == Red::kMean || op == Red::kMax || op == Red::kMin ||
        op == Red::kProd) {
      ctx.set_output(0, x);
      return Status::ok();
    }
    mask.assign(mask.size(), false);
  }

  // Relative offsets of one group's elements, and the kept dims that enumerate the groups.
  std::vector<int64_t> strides = contiguous_strides(x.dims());
  std::vector<int64_t> rdims, rstr, kdims, kstr, out_dims;
  for (int64_t i = 0; i < rank; ++i) {
    if (mask[i]) {
      rdims.push_back(x.dim(i));
      rstr.push_back(strides[i]);
      if (keep) out_dims.push_back(1);
    } else {
      kdims.push_back(x.dim(i));
      kstr.push_back(strides[i]);
      out_dims.push_back(x.dim(i));
    }
  }
  std::vector<int64_t> group;
  for_each_index<1>(rdims, {rstr},
                    [&](int64_t, const std::array<int64_t, 1>& off) { group.push_back(off[0]); });
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out_dims));
  int64_t n = static_cast<int64_t>(group.size());
  visit_dtype(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* py = y->data<T>();
    if constexpr (std::is_same_v<T, bool>) {
      // Only ReduceMax/ReduceMin allow bool: any / all.
      for_each_index<1>(kdims, {kstr}, [&](int64_t o, const std::array<int64_t, 1>& off) {
        bool acc = op != Red::kMax;
        for (int64_t k = 0; k < n; ++k) {
          bool v = px[off[0] + group[k]];
          acc = op == Red::kMax ? acc || v : acc && v;
        }
        py[o] = acc;
      });
    } else if constexpr (is_float_v<T>) {
      std::vector<double> buf(static_cast<size_t>(n));
      for_each_index<1>(kdims, {kstr}, [&](int64_t o, const std::array<int64_t, 1>& off) {
        for (int64_t k = 0; k < n; ++k) buf[k] = convert<double>(px[off[0] + group[k]]);
        py[o] = convert<T>(reduce_float_group(op, buf.data(), n));
      });
    } else {
      std::vector<T> buf(static_cast<size_t>(n));
      for_each_index<1>(kdims, {kstr}, [&](int64_t o, const std::array<int64_t, 1>& off) {
        for (int64_t k = 0; k < n; ++k) buf[k] = px[off[0] + group[k]];
        py[o] = reduce_int_group<T>(op, buf.data(), n);
      });
    }
  });
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Ops along one axis: the tensor is viewed as [outer, n, inner].

struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisView axis_view(const std::vector<int64_t>& dims, int64_t axis) {
  AxisView v;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
    if (i < axis)
      v.outer *= dims[i];
    else if (i == axis)
      v.n = dims[i];
    else
      v.inner *= dims[i];
  }
  return v;
}

Status infer_arg(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  if (!in.rank_known()) {
    ctx.set_output(0, DType::kI64, Shape::unknown_rank());
    return Status::ok();
  }
  int64_t rank = static_cast<int64_t>(in.rank());
  if (rank == 0) return ctx.error("input must have rank >= 1");
  FERRITE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.node().attr_int("axis"), rank));
  std::vector<Dim> dims;
  for (int64_t i = 0; i < rank; ++i) {
    if (i != axis)
      dims.push_back(in[i]);
    else if (ctx.node().attr_int("keepdims", 1) != 0)
      dims.push_back(Dim(1));
  }
  ctx.set_output(0, DType::kI64, Shape(dims));
  return Status::ok();
}

Status arg_kernel(KernelContext& ctx, bool is_max) {
  const Tensor& x = ctx.input(0);
  int64_t rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return ctx.error("input must have rank >= 1");
  FERRITE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.node().attr_int("axis"), rank));
  bool keep = ctx.node().attr_int("keepdims", 1) != 0;
  bool last = ctx.node().attr_int("select_last_index") != 0;
  std::vector<int64_t> out_dims;
  for (int64_t i = 0; i < rank; ++i) {
    if (i != axis)
      out_dims.push_back(x.dim(i));
    else if (keep)
      out_dims.push_back(1);
  }
  AxisView v = axis_view(x.dims(), axis);
  if (v.n == 0 && v.outer * v.inner > 0)
    return ctx.error("cannot take the arg-extremum of an empty axis");
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kI64, out_dims));
  int64_t* py = y->data<int64_t>();
  visit_dtype(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    // NaN counts as the extremum for both ArgMax and ArgMin (NumPy's choice); among ties the first
    // index wins unless select_last_index.
    auto better = [&](double cand, double best) {
      if (std::isnan(best)) return last && std::isnan(cand);
      if (std::isnan(cand)) return true;
      if (cand == best) return last;
      return is_max ? cand > best : cand < best;
    };
    for (int64_t o = 0; o < v.outer; ++o) {
      for (int64_t i = 0; i < v.inner; ++i) {
        const T* p = px + o * v.n * v.inner + i;
        // int64 values beyond 2^53 could collide in double, so compare integers natively.
        if constexpr (is_float_v<T>) {
          double best = convert<double>(p[0]);
          int64_t bi = 0;
          for (int64_t k = 1; k < v.n; ++k) {
            double c = convert<double>(p[k * v.inner]);
            if (better(c, best)) best = c, bi = k;
          }
          py[o * v.inner + i] = bi;
        } else {
          T best = p[0];
          int64_t bi = 0;
          for (int64_t k = 1; k < v.n; ++k) {
            T c = p[k * v.inner];
            if (c == best ? last : (is_max ? c > best : c < best)) best = c, bi = k;
          }
          py[o * v.inner + i] = bi;
        }
      }
    }
  });
  return Status::ok();
}

enum class Norm { kSoftmax, kLogSoftmax, kHardmax };

Status infer_softmax(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  if (in.rank_known())
    FERRITE_RETURN_IF_ERROR(
        normalize_axis(ctx, ctx.node().attr_int("axis", -1), static_cast<int64_t>(in.rank()))
            .status());
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

Status softmax_kernel(KernelContext& ctx, Norm kind) {
  const Tensor& x = ctx.input(0);
  int64_t rank = static_cast<int64_t>(x.rank());
  FERRITE_ASSIGN_OR_RETURN(int64_t axis,
                           normalize_axis(ctx, ctx.node().attr_int("axis", -1), rank));
  AxisView v = rank == 0 ? AxisView{} : axis_view(x.dims(), axis);
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.dims()));
  Status st;
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (!is_float_v<T>) {
      st = ctx.error("dtype ", dtype_name(x.dtype()), " is not supported");
    } else {
      const T* px = x.data<T>();
      T* py = y->data<T>();
      std::vector<double> buf(static_cast<size_t>(v.n));
      for (int64_t o = 0; o < v.outer; ++o) {
        for (int64_t i = 0; i < v.inner; ++i) {
          int64_t base = o * v.n * v.inner + i;
          double m = -kInf;
          int64_t arg = 0;
          for (int64_t k = 0; k < v.n; ++k) {
            buf[k] = convert<double>(px[base + k * v.inner]);
            if (buf[k] > m) m = buf[k], arg = k;
          }
          if (kind == Norm::kHardmax) {
            for (int64_t k = 0; k < v.n; ++k)
              py[base + k * v.inner] = convert<T>(k == arg ? 1.0 : 0.0);
            continue;
          }
          double sum = 0;
          for (int64_t k = 0; k < v.n; ++k) {
            buf[k] -= m;
            sum += std::exp(buf[k]);
          }
          double log_sum = std::log(sum);
          for (int64_t k = 0; k < v.n; ++k)
            py[base + k * v.inner] =
                convert<T>(kind == Norm::kSoftmax ? std::exp(buf[k]) / sum : buf[k] - log_sum);
        }
      }
    }
  });
  return st;
}

// ---------------------------------------------------------------------------------------------
// Losses (opset 13): scores [N, C, d1..dk] and integer targets [N, d1..dk]; the class axis is 1.
// The kernels view the scores as [N, C, D] (D = d1*...*dk) and accumulate in double.

enum class LossReduction { kNone, kSum, kMean };

template <class Ctx>
Expected<LossReduction> reduction_of(const Ctx& ctx) {
  std::string r = ctx.node().attr_string("reduction", "mean");
  if (r == "none") return LossReduction::kNone;
  if (r == "sum") return LossReduction::kSum;
  if (r == "mean") return LossReduction::kMean;
  return ctx.error("reduction must be 'none', 'sum' or 'mean', not '", r, "'");
}

// Output 0: the target's shape for reduction 'none', a scalar otherwise; output 1 (SCE's
// log_prob): the scores' type.
Status infer_loss(InferContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(LossReduction red, reduction_of(ctx));
  const Shape& x = ctx.input_shape(0);
  const Shape& t = ctx.input_shape(1);
  if (x.rank_known() && x.rank() < 2)
    return ctx.error("scores must have rank >= 2 ([N, C, ...]), got ", x.to_string());
  if (x.rank_known() && t.rank_known()) {
    if (t.rank() + 1 != x.rank())
      return ctx.error("target ", t.to_string(), " must have the scores' rank minus one (scores ",
                       x.to_string(), ")");
    for (size_t i = 0; i < t.rank(); ++i) {
      const Dim& dx = x.dims()[i == 0 ? 0 : i + 1];
      const Dim& dt = t.dims()[i];
      if (dx.is_static() && dt.is_static() && *dx.value() != *dt.value())
        return ctx.error("target ", t.to_string(), " does not match scores ", x.to_string());
    }
  }
  if (ctx.num_inputs() > 2 && ctx.has_input(2)) {
    const Shape& w = ctx.input_shape(2);
    if (w.rank_known() && w.rank() != 1)
      return ctx.error("weight must be 1-D, got ", w.to_string());
  }
  Shape out = red == LossReduction::kNone ? t : Shape(std::vector<Dim>{});
  ctx.set_output(0, ctx.input_dtype(0), out);
  if (ctx.num_outputs() > 1 && ctx.has_output(1)) ctx.set_output(1, ctx.input_type(0));
  return Status::ok();
}

// The negative log-likelihood of log-probabilities `logp` ([N, C, D], double) under targets;
// writes per-element losses (reduction none) or the reduced scalar to `out`.
template <class T, class I>
Status nll(const KernelContext& ctx, const std::vector<double>& logp, const I* target,
           const Tensor* weight, int64_t n, int64_t c, int64_t d, LossReduction red, T* out) {
  const bool has_ii = ctx.node().has_attr("ignore_index");
  const int64_t ii = ctx.node().attr_int("ignore_index", 0);
  const T* w = weight ? weight->data<T>() : nullptr;
  if (weight && weight->numel() != c)
    return ctx.error("weight has ", weight->numel(), " elements for ", c, " classes");
  double sum = 0, weight_sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < d; ++k) {
      int64_t cls = static_cast<int64_t>(target[i * d + k]);
      double loss = 0, wt = 0;
      if (!(has_ii && cls == ii)) {
        if (cls < 0 || cls >= c)
          return ctx.error("target ", cls, " is outside [0, ", c, ") and not ignore_index");
        wt = w ? to_double(w[cls]) : 1.0;
        loss = -logp[(i * c + cls) * d + k] * wt;
      }
      if (red == LossReduction::kNone) out[i * d + k] = convert<T>(loss);
      sum += loss;
      weight_sum += wt;
    }
  }
  if (red == LossReduction::kSum) out[0] = convert<T>(sum);
  // ONNX divides by the total weight of the counted elements (0/0 is NaN, as in the spec).
  if (red == LossReduction::kMean) out[0] = convert<T>(sum / weight_sum);
  return Status::ok();
}

// NLL (log_softmax = false) or softmax cross-entropy (true: log-softmax over the class axis
// first, written to output 1 when requested).
Status loss_kernel(KernelContext& ctx, bool log_softmax) {
  const Tensor& x = ctx.input(0);
  const Tensor& t = ctx.input(1);
  const Tensor* weight = ctx.num_inputs() > 2 && ctx.has_input(2) ? &ctx.input(2) : nullptr;
  FERRITE_ASSIGN_OR_RETURN(LossReduction red, reduction_of(ctx));
  if (x.rank() < 2 || t.rank() + 1 != x.rank()) return ctx.error("scores and target do not match");
  const int64_t n = x.dims()[0], c = x.dims()[1];
  int64_t d = 1;
  for (size_t i = 2; i < x.rank(); ++i) {
    if (x.dims()[i] != t.dims()[i - 1]) return ctx.error("scores and target do not match");
    d *= x.dims()[i];
  }
  if (t.dims()[0] != n) return ctx.error("scores and target do not match");
  std::vector<int64_t> out_dims = red == LossReduction::kNone ? t.dims() : std::vector<int64_t>{};
  FERRITE_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), out_dims));
  Tensor* log_prob = nullptr;
  if (log_softmax && ctx.has_output(1)) {
    FERRITE_ASSIGN_OR_RETURN(log_prob, ctx.allocate_output(1, x.dtype(), x.dims()));
  }
  Status st;
  bool known = visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (!is_float_v<T>) {
      st = ctx.error("dtype ", dtype_name(x.dtype()), " is not supported");
    } else {
      std::vector<double> logp(static_cast<size_t>(x.numel()));
      const T* px = x.data<T>();
      for (size_t i = 0; i < logp.size(); ++i) logp[i] = to_double(px[i]);
      if (log_softmax) {
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t k = 0; k < d; ++k) {
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < c; ++j) m = std::max(m, logp[(i * c + j) * d + k]);
            for (int64_t j = 0; j < c; ++j) s += std::exp(logp[(i * c + j) * d + k] - m);
            double lse = m + std::log(s);
            for (int64_t j = 0; j < c; ++j) logp[(i * c + j) * d + k] -= lse;
          }
        }
        if (log_prob) {
          T* lp = log_prob->data<T>();
          for (size_t i = 0; i < logp.size(); ++i) lp[i] = convert<T>(logp[i]);
        }
      }
      if (t.dtype() == DType::kI64)
        st = nll<T>(ctx, logp, t.data<int64_t>(), weight, n, c, d, red, out->data<T>());
      else if (t.dtype() == DType::kI32)
        st = nll<T>(ctx, logp, t.data<int32_t>(), weight, n, c, d, red, out->data<T>());
      else
        st = ctx.error("target must be int32 or int64");
    }
  });
  if (!known) return ctx.error("unsupported dtype");
  return st;
}

}  // namespace

void register_reduction_ops(OpRegistry& r) {
  using namespace dtypes;
  constexpr DTypeSet kReduceTypes =
      kFloat | DTypeSet{DType::kI32, DType::kI64, DType::kU32, DType::kU64};
  // Opset 18 adds int8/uint8 and opset 20 bool to ReduceMax/ReduceMin; infer checks the opset.
  constexpr DTypeSet kMinMaxTypes = kReduceTypes | DTypeSet{DType::kI8, DType::kU8, DType::kBool};
  struct Info {
    const char* name;
    Red op;
    DTypeSet types;
  };
  const Info infos[] = {
      {"ReduceSum", Red::kSum, kReduceTypes},
      {"ReduceMean", Red::kMean, kReduceTypes},
      {"ReduceMax", Red::kMax, kMinMaxTypes},
      {"ReduceMin", Red::kMin, kMinMaxTypes},
      {"ReduceProd", Red::kProd, kReduceTypes},
      {"ReduceL1", Red::kL1, kReduceTypes},
      {"ReduceL2", Red::kL2, kReduceTypes},
      {"ReduceLogSum", Red::kLogSum, kReduceTypes},
      {"ReduceLogSumExp", Red::kLogSumExp, kReduceTypes},
      {"ReduceSumSquare", Red::kSumSquare, kReduceTypes},
  };
  for (const Info& info : infos) {
    Red op = info.op;
    OpSchemaBuilder b(info.name);
    b.versions(13)
        .inputs(1, 2)
        .outputs(1)
        .attr("keepdims", AttrType::kInt, 1)
        .attr("noop_with_empty_axes", AttrType::kInt, 0)
        .types("T", {0}, info.types)
        .types("tensor(int64)", {1}, {DType::kI64})
        .infer([op](InferContext& ctx) { return infer_reduce(ctx, op); })
        .kernel([op](KernelContext& ctx) { return reduce_kernel(ctx, op); });
    // ReduceSum-13 already takes axes as an input; the others have the attribute until opset 18.
    if (op != Red::kSum) b.optional_attr("axes", AttrType::kInts);
    r.add(b);
  }

  for (bool is_max : {true, false}) {
    r.add(OpSchemaBuilder(is_max ? "ArgMax" : "ArgMin")
              .versions(13)
              .inputs(1)
              .outputs(1)
              .attr("axis", AttrType::kInt, 0)
              .attr("keepdims", AttrType::kInt, 1)
              .attr("select_last_index", AttrType::kInt, 0)
              .types("T", {0}, kNumeric)
              .infer(infer_arg)
              .kernel([is_max](KernelContext& ctx) { return arg_kernel(ctx, is_max); }));
  }

  const std::pair<const char*, Norm> norms[] = {
      {"Softmax", Norm::kSoftmax}, {"LogSoftmax", Norm::kLogSoftmax}, {"Hardmax", Norm::kHardmax}};
  for (const auto& [name, kind] : norms) {
    Norm k = kind;
    r.add(OpSchemaBuilder(name)
              .versions(13)
              .inputs(1)
              .outputs(1)
              .attr("axis", AttrType::kInt, -1)
              .types("T", {0}, kFloat)
              .infer(infer_softmax)
              .kernel([k](KernelContext& ctx) { return softmax_kernel(ctx, k); }));
  }

  // Losses.
  for (bool sce : {false, true}) {
    r.add(OpSchemaBuilder(sce ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss")
              .versions(13)
              .inputs(2, 3)
              .outputs(1, sce ? 2 : 1)
              .attr("reduction", AttrType::kString, "mean")
              .optional_attr("ignore_index", AttrType::kInt)
              .types("T", {0, 2}, kFloat)
              .types("Tind", {1}, {DType::kI32, DType::kI64})
              .infer(infer_loss)
              .kernel([sce](KernelContext& ctx) { return loss_kernel(ctx, sce); }));
  }
}

}  // namespace ferrite
