// Unary elementwise ops: math functions, activations, IsNaN/IsInf, Clip, Cast and CastLike, and
// the casts through a scale: QuantizeLinear and DequantizeLinear.
// 16-bit floats compute in float; f32 in float and f64 in double.
#include <algorithm>
#include <cmath>

#include "ops/elementwise_util.h"
#include "ops/numeric_cast.h"

namespace ferrite {

namespace {

using namespace dtypes;

// Kernel for y = op(x) with y's dtype = x's. Make(node) returns the functor (reading attributes),
// which receives and returns the compute type; it is instantiated only for dtypes in class K.
template <TypeClass K, class Make>
KernelFn unary_kernel(Make make) {
  return [make](KernelContext& ctx) -> Status {
    const Tensor& x = ctx.input(0);
    auto op = make(ctx.node());
    return dispatch_dtype<K>(ctx, x.dtype(), [&]<class T>() -> Status {
      FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.dims()));
      using C = compute_t<T>;
      const T* px = x.data<T>();
      T* py = y->data<T>();
      for (int64_t i = 0; i < x.numel(); ++i)
        py[i] = convert<T>(static_cast<C>(op(convert<C>(px[i]))));
      return Status::ok();
    });
  };
}

// Adapts an attribute-free functor to unary_kernel's Make.
template <class Op>
auto plain(Op op) {
  return [op](const Node&) { return op; };
}

template <class Op>
KernelFn float_fn(Op op) {
  return unary_kernel<TypeClass::kFloat>(plain(op));
}

OpSchemaBuilder unary(const char* name, DTypeSet types, KernelFn k, int since = 13) {
  OpSchemaBuilder b(name);
  b.versions(since)
      .inputs(1)
      .outputs(1)
      .types("T", {0}, types)
      .infer(infer_same_as_input())
      .kernel(std::move(k));
  return b;
}

template <class C>
C softplus(C x) {
  // log(1 + e^x) without overflow for large x.
  return x > C(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

// ---- IsNaN / IsInf ----

template <class Pred>
Status float_predicate(KernelContext& ctx, Pred pred) {
  const Tensor& x = ctx.input(0);
  if (is_float8(x.dtype())) {
    FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kBool, x.dims()));
    visit_float8(x.dtype(), [&]<class T>() {
      const T* px = x.data<T>();
      bool* py = y->data<bool>();
      for (int64_t i = 0; i < x.numel(); ++i) py[i] = pred(static_cast<float>(px[i]));
    });
    return Status::ok();
  }
  return dispatch_dtype<TypeClass::kFloat>(ctx, x.dtype(), [&]<class T>() -> Status {
    FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kBool, x.dims()));
    const T* px = x.data<T>();
    bool* py = y->data<bool>();
    for (int64_t i = 0; i < x.numel(); ++i) py[i] = pred(convert<compute_t<T>>(px[i]));
    return Status::ok();
  });
}

Status infer_bool_like_input(InferContext& ctx) {
  ctx.set_output(0, DType::kBool, ctx.input_shape(0));
  return Status::ok();
}

// ---- Clip ----

Status infer_clip(InferContext& ctx) {
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const Shape& s = ctx.input_shape(i);
    if (s.rank_known() && s.rank() > 1)
      return ctx.error(i == 1 ? "min" : "max", " must be a scalar, got ", s.to_string());
  }
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

Status clip_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  return dispatch_dtype<TypeClass::kNumeric>(ctx, x.dtype(), [&]<class T>() -> Status {
    using C = compute_t<T>;
    C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
    for (size_t i = 1; i < 3; ++i) {
      if (!ctx.has_input(i)) continue;
      const Tensor& b = ctx.input(i);
      if (b.numel() != 1 || b.rank() > 1)
        return ctx.error(i == 1 ? "min" : "max", " must be a scalar, got ", b.type_string());
      if (b.dtype() != x.dtype()) return ctx.error("min and max must have the input's dtype");
      (i == 1 ? lo : hi) = convert<C>(b.data<T>()[0]);
    }
    FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.dims()));
    const T* px = x.data<T>();
    T* py = y->data<T>();
    // Applying max after min makes min > max give max everywhere, as the spec asks; NaN stays.
    for (int64_t i = 0; i < x.numel(); ++i) {
      C v = convert<C>(px[i]);
      v = v < lo ? lo : v;
      v = v > hi ? hi : v;
      py[i] = convert<T>(v);
    }
    return Status::ok();
  });
}

// ---- Cast / CastLike ----

// Casts to or from float8 go through double (exact for every source but 64-bit integers beyond
// 2^53, which are out of every float8 range anyway), so f64 sources round once, as the spec
// asks. `saturate` only affects float8 targets.
Status cast_float8(KernelContext& ctx, const Tensor& x, Tensor& y, bool saturate) {
  Status st = Status::ok();
  visit_any_dtype(x.dtype(), [&]<class From>() {
    const From* px = x.data<From>();
    auto read = [px](int64_t i) -> double {
      if constexpr (std::is_same_v<From, bool>) {
        return px[i] ? 1.0 : 0.0;
      } else {
        return static_cast<double>(static_cast<compute_t<From>>(px[i]));
      }
    };
    if (visit_float8(y.dtype(), [&]<class To>() {
          To* py = y.data<To>();
          for (int64_t i = 0; i < x.numel(); ++i) py[i] = To(read(i), saturate);
        }))
      return;
    // float8 -> anything else: float holds every float8 value; then the usual float cast.
    st = dispatch_dtype<TypeClass::kAll>(ctx, y.dtype(), [&]<class To>() -> Status {
      To* py = y.data<To>();
      for (int64_t i = 0; i < x.numel(); ++i)
        py[i] = safe_cast<To, float>(static_cast<float>(read(i)));
      return Status::ok();
    });
  });
  return st;
}

Status cast_to(KernelContext& ctx, DType to) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == to) {
    ctx.set_output(0, x);
    return Status::ok();
  }
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, to, x.dims()));
  if (is_float8(x.dtype()) || is_float8(to))
    return cast_float8(ctx, x, *y, ctx.node().attr_int("saturate", 1) != 0);
  return dispatch_dtype<TypeClass::kAll>(ctx, x.dtype(), [&]<class From>() -> Status {
    return dispatch_dtype<TypeClass::kAll>(ctx, to, [&]<class To>() -> Status {
      const From* px = x.data<From>();
      To* py = y->data<To>();
      for (int64_t i = 0; i < x.numel(); ++i) py[i] = safe_cast<To, From>(px[i]);
      return Status::ok();
    });
  });
}

Expected<DType> cast_target(const InferContext& ctx) {
  int64_t to = ctx.node().attr_int("to");
  auto dt = dtype_from_onnx(static_cast<int>(to));
  // 1..23 are ONNX element types (string, complex, float8, int4, float4 among them).
  if (to < 1 || to > 23) return ctx.error("'to' is not a valid ONNX element type: ", to);
  if (!dt)
    return unsupported(ctx.node().describe(), ": Cast to ONNX element type ", to,
                       " is not supported");
  return *dt;
}

// float8 types exist from opset 19 (with the `saturate` attribute).
Status check_float8_opset(const InferContext& ctx, DType from, DType to) {
  if ((is_float8(from) || is_float8(to)) && ctx.opset() < 19)
    return ctx.error("float8 types need opset 19 or later, the model has opset ", ctx.opset());
  return Status::ok();
}

// Integer/bool -> integer/bool casts keep symbolic dims values (Shape -> Cast -> arithmetic).
void cast_dims_value(InferContext& ctx, DType to) {
  DType from = ctx.input_dtype(0);
  bool from_int = is_integer(from) || from == DType::kBool;
  bool to_int = is_integer(to) || to == DType::kBool;
  if (!from_int || !to_int) return;
  propagate_dims_value(ctx, {0}, [to](const std::vector<Dim>& a) {
    if (to == DType::kBool && !a[0].is_static()) return Dim::unknown();
    return dim_wrap_to(a[0], to);
  });
}

Status infer_cast(InferContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(DType to, cast_target(ctx));
  FERRITE_RETURN_IF_ERROR(check_float8_opset(ctx, ctx.input_dtype(0), to));
  ctx.set_output(0, to, ctx.input_shape(0));
  cast_dims_value(ctx, to);
  return Status::ok();
}

Status infer_castlike(InferContext& ctx) {
  DType to = ctx.input_dtype(1);
  FERRITE_RETURN_IF_ERROR(check_float8_opset(ctx, ctx.input_dtype(0), to));
  ctx.set_output(0, to, ctx.input_shape(0));
  cast_dims_value(ctx, to);
  return Status::ok();
}

Status cast_kernel(KernelContext& ctx) {
  auto dt = dtype_from_onnx(static_cast<int>(ctx.node().attr_int("to")));
  if (!dt) return unsupported(ctx.node().describe(), ": unsupported Cast target type");
  return cast_to(ctx, *dt);
}

// ---- Gelu ----

Status infer_gelu(InferContext& ctx) {
  std::string a = ctx.node().attr_string("approximate");
  if (a != "none" && a != "tanh")
    return ctx.error("approximate must be \"none\" or \"tanh\", got \"", a, "\"");
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

// ---- QuantizeLinear / DequantizeLinear ----

// How scale and zero point map onto x: one value for the tensor (a scalar or 1 element), one per
// index of `axis` (1-D), or one per `block` consecutive indices of `axis` (x's rank, opset 21).
struct QuantLayout {
  int64_t outer = 1, axis_len = 1, inner = 1, block = 0, scale_axis_len = 1;
  bool per_tensor = true;
  int64_t scale_index(int64_t i) const {
    if (per_tensor) return 0;
    int64_t in = i % inner, a = (i / inner) % axis_len, o = i / (inner * axis_len);
    if (block == 0) return a;
    return (o * scale_axis_len + a / block) * inner + in;
  }
};

// Checks scale's dims against x's (static dims only; unknown ones pass until run time).
template <class Ctx>
Expected<QuantLayout> quant_layout(const Ctx& ctx, const std::vector<std::optional<int64_t>>& x,
                                   const std::vector<std::optional<int64_t>>& scale) {
  QuantLayout l;
  const Node& n = ctx.node();
  int64_t block = n.attr_int("block_size", 0);
  if (block < 0) return ctx.error("block_size must be >= 0, got ", block);
  if (block > 0 && ctx.opset() < 21) return ctx.error("block_size needs opset 21");
  int64_t numel = 1;
  for (const auto& d : scale) numel = d ? numel * *d : -1;
  if (block == 0 && (scale.empty() || (scale.size() == 1 && numel == 1))) return l;
  int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = n.attr_int("axis", 1);
  if (axis < -rank || axis >= rank)
    return ctx.error("axis ", axis, " out of range for rank ", rank);
  if (axis < 0) axis += rank;
  l.per_tensor = false;
  l.block = block;
  auto known = [](const std::optional<int64_t>& d) { return d.value_or(1); };
  for (int64_t k = 0; k < axis; ++k) l.outer *= known(x[k]);
  for (int64_t k = axis + 1; k < rank; ++k) l.inner *= known(x[k]);
  l.axis_len = known(x[axis]);
  if (block == 0) {
    if (scale.size() != 1) return ctx.error("a per-axis scale must be 1-D");
    if (scale[0] && x[axis] && *scale[0] != *x[axis])
      return ctx.error("scale has ", *scale[0], " elements for axis ", axis, " of size ", *x[axis]);
    l.scale_axis_len = l.axis_len;
    return l;
  }
  if (static_cast<int64_t>(scale.size()) != rank)
    return ctx.error("a blocked scale must have x's rank ", rank);
  for (int64_t k = 0; k < rank; ++k) {
    if (!scale[k] || !x[k]) continue;
    int64_t want = k == axis ? (*x[k] + block - 1) / block : *x[k];
    if (*scale[k] != want)
      return ctx.error("blocked scale dim ", k, " is ", *scale[k], ", expected ", want);
  }
  l.scale_axis_len = scale[axis].value_or((l.axis_len + block - 1) / block);
  return l;
}

std::vector<std::optional<int64_t>> static_dims(const Shape& s) {
  std::vector<std::optional<int64_t>> d;
  for (const Dim& dim : s.dims()) d.push_back(dim.value());
  return d;
}
std::vector<std::optional<int64_t>> static_dims(const Tensor& t) {
  return {t.dims().begin(), t.dims().end()};
}

// QuantizeLinear's output type: the zero point's, else `output_dtype` (opset 21), else uint8.
Expected<DType> quantized_type(const InferContext& ctx) {
  if (ctx.num_inputs() > 2 && ctx.has_input(2)) return ctx.input_dtype(2);
  int64_t od = ctx.node().attr_int("output_dtype", 0);
  if (od == 0) return DType::kU8;
  if (ctx.opset() < 21) return ctx.error("output_dtype needs opset 21");
  auto dt = dtype_from_onnx(static_cast<int>(od));
  if (!dt) return unsupported(ctx.node().describe(), ": output_dtype ", od, " is not supported");
  return *dt;
}

Status check_quant_type(const InferContext& ctx, DType q) {
  constexpr DTypeSet k8{DType::kI8, DType::kU8};
  constexpr DTypeSet k16{DType::kI16, DType::kU16};
  if (is_float8(q) && ctx.opset() < 19) return ctx.error("float8 quantization needs opset 19");
  if (k16.contains(q) && ctx.opset() < 21) return ctx.error("16-bit quantization needs opset 21");
  if (!k8.contains(q) && !k16.contains(q) && !is_float8(q) && q != DType::kI32)
    return ctx.error("cannot quantize to ", dtype_name(q));
  return Status::ok();
}

Status infer_quantize(InferContext& ctx, bool quantize) {
  DType q = quantize ? DType::kUndefined : ctx.input_dtype(0);
  if (quantize) {
    FERRITE_ASSIGN_OR_RETURN(q, quantized_type(ctx));
  }
  FERRITE_RETURN_IF_ERROR(check_quant_type(ctx, q));
  if (quantize && q == DType::kI32) return ctx.error("cannot quantize to int32");
  if (!quantize && ctx.num_inputs() > 2 && ctx.has_input(2) && ctx.input_dtype(2) != q)
    return ctx.error("x_zero_point must have x's dtype");
  if (ctx.input_shape(0).rank_known() && ctx.input_shape(1).rank_known()) {
    FERRITE_RETURN_IF_ERROR(
        quant_layout(ctx, static_dims(ctx.input_shape(0)), static_dims(ctx.input_shape(1)))
            .status());
  }
  if (ctx.num_inputs() > 2 && ctx.has_input(2) && ctx.input_shape(2).rank_known() &&
      ctx.input_shape(1).rank_known() && ctx.input_shape(2).rank() > 0 &&
      ctx.input_shape(1).rank() > 0 && ctx.input_shape(2) != ctx.input_shape(1))
    return ctx.error("zero point ", ctx.input_shape(2).to_string(), " does not match scale ",
                     ctx.input_shape(1).to_string());
  DType out = quantize ? q : ctx.input_dtype(1);
  ctx.set_output(0, out, ctx.input_shape(0));
  return Status::ok();
}

// Reads element i of a tensor of any storage type as double.
double read_any(const Tensor& t, int64_t i) {
  double v = 0;
  visit_any_dtype(t.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      v = t.data<bool>()[i] ? 1 : 0;
    } else {
      v = static_cast<double>(static_cast<compute_t<T>>(t.data<T>()[i]));
    }
  });
  return v;
}

// y = saturate(round_half_even(x / scale) + zero_point); float8: y = float8(x / scale).
// The division is in float unless x or scale is f64, as in ONNX's reference implementation.
Status quantize_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* zp = ctx.num_inputs() > 2 && ctx.has_input(2) ? &ctx.input(2) : nullptr;
  FERRITE_ASSIGN_OR_RETURN(QuantLayout l, quant_layout(ctx, static_dims(x), static_dims(scale)));
  DType q = ctx.node().output(0)->type.dtype;
  if (zp && zp->numel() != scale.numel()) return ctx.error("zero point and scale differ in size");
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, q, x.dims()));
  const bool wide = x.dtype() == DType::kF64 || scale.dtype() == DType::kF64;
  const bool saturate = ctx.node().attr_int("saturate", 1) != 0;
  auto scaled = [&](int64_t i) -> double {
    int64_t s = l.scale_index(i);
    if (wide) return read_any(x, i) / read_any(scale, s);
    return static_cast<double>(static_cast<float>(read_any(x, i)) /
                               static_cast<float>(read_any(scale, s)));
  };
  if (visit_float8(q, [&]<class T>() {
        T* py = y->data<T>();
        for (int64_t i = 0; i < x.numel(); ++i)
          py[i] = T(scaled(i) + (zp ? read_any(*zp, l.scale_index(i)) : 0.0), saturate);
      }))
    return Status::ok();
  return dispatch_dtype<TypeClass::kInt>(ctx, q, [&]<class T>() -> Status {
    T* py = y->data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      double v = std::nearbyint(scaled(i)) + (zp ? read_any(*zp, l.scale_index(i)) : 0.0);
      py[i] = saturate_cast<T>(v);
    }
    return Status::ok();
  });
}

// y = (x - zero_point) * scale, in float (double for an f64 scale), stored as scale's dtype.
Status dequantize_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* zp = ctx.num_inputs() > 2 && ctx.has_input(2) ? &ctx.input(2) : nullptr;
  FERRITE_ASSIGN_OR_RETURN(QuantLayout l, quant_layout(ctx, static_dims(x), static_dims(scale)));
  if (zp && zp->numel() != scale.numel()) return ctx.error("zero point and scale differ in size");
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, scale.dtype(), x.dims()));
  return dispatch_dtype<TypeClass::kFloat>(ctx, scale.dtype(), [&]<class T>() -> Status {
    using C = compute_t<T>;
    T* py = y->data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t s = l.scale_index(i);
      C v = (static_cast<C>(read_any(x, i)) - static_cast<C>(zp ? read_any(*zp, s) : 0.0)) *
            static_cast<C>(read_any(scale, s));
      py[i] = convert<T>(v);
    }
    return Status::ok();
  });
}

// DynamicQuantizeLinear: uint8 quantization over the range of x widened to include 0, computed
// in float as ONNX's reference implementation does.
Status infer_dynamic_quantize(InferContext& ctx) {
  ctx.set_output(0, DType::kU8, ctx.input_shape(0));
  if (ctx.has_output(1)) ctx.set_output(1, DType::kF32, Shape(std::vector<Dim>{}));
  if (ctx.has_output(2)) ctx.set_output(2, DType::kU8, Shape(std::vector<Dim>{}));
  return Status::ok();
}

Status dynamic_quantize_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::kF32) return ctx.error("x must be float");
  const float* px = x.data<float>();
  float hi = 0, lo = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    hi = std::max(hi, px[i]);
    lo = std::min(lo, px[i]);
  }
  const float scale = (hi == lo ? 1.0f : hi - lo) / 255.0f;
  const float zp = std::nearbyint(std::clamp(0.0f - lo / scale, 0.0f, 255.0f));
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kU8, x.dims()));
  uint8_t* py = y->data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i)
    py[i] = static_cast<uint8_t>(std::clamp(std::nearbyint(px[i] / scale) + zp, 0.0f, 255.0f));
  if (ctx.has_output(1)) {
    FERRITE_ASSIGN_OR_RETURN(Tensor * s, ctx.allocate_output(1, DType::kF32, {}));
    s->data<float>()[0] = scale;
  }
  if (ctx.has_output(2)) {
    FERRITE_ASSIGN_OR_RETURN(Tensor * z, ctx.allocate_output(2, DType::kU8, {}));
    z->data<uint8_t>()[0] = static_cast<uint8_t>(zp);
  }
  return Status::ok();
}

}  // namespace

namespace {

void register_unary_math(OpRegistry& r) {
  using TC = TypeClass;
  // Math.
  r.add(unary("Abs", kNumeric, unary_kernel<TC::kNumeric>(plain([](auto x) {
                using C = decltype(x);
                if constexpr (std::is_floating_point_v<C>)
                  return std::fabs(x);
                else if constexpr (std::is_unsigned_v<C>)
                  return x;
                else
                  return x < C(0) ? wrap_neg(x) : x;
              }))));
  r.add(unary("Neg", kSignedInt | kFloat,
              unary_kernel<TC::kSignedNumeric>(plain([](auto x) { return wrap_neg(x); }))));
  r.add(unary("Sign", kNumeric, unary_kernel<TC::kNumeric>(plain([](auto x) {
                using C = decltype(x);
                return x > C(0) ? C(1) : (x < C(0) ? C(-1) : x);  // keeps 0 and NaN
              }))));
  r.add(unary("Exp", kFloat, float_fn([](auto x) { return std::exp(x); })));
  r.add(unary("Log", kFloat, float_fn([](auto x) { return std::log(x); })));
  r.add(unary("Sqrt", kFloat, float_fn([](auto x) { return std::sqrt(x); })));
  r.add(unary("Reciprocal", kFloat, float_fn([](auto x) { return decltype(x)(1) / x; })));
  r.add(unary("Floor", kFloat, float_fn([](auto x) { return std::floor(x); })));
  r.add(unary("Ceil", kFloat, float_fn([](auto x) { return std::ceil(x); })));
  // Round half to even: nearbyint in the default rounding mode.
  r.add(unary("Round", kFloat, float_fn([](auto x) { return std::nearbyint(x); })));
  r.add(unary("Sin", kFloat, float_fn([](auto x) { return std::sin(x); })));
  r.add(unary("Cos", kFloat, float_fn([](auto x) { return std::cos(x); })));
  r.add(unary("Tan", kFloat, float_fn([](auto x) { return std::tan(x); })));
  r.add(unary("Asin", kFloat, float_fn([](auto x) { return std::asin(x); })));
  r.add(unary("Acos", kFloat, float_fn([](auto x) { return std::acos(x); })));
  r.add(unary("Atan", kFloat, float_fn([](auto x) { return std::atan(x); })));
  r.add(unary("Sinh", kFloat, float_fn([](auto x) { return std::sinh(x); })));
  r.add(unary("Cosh", kFloat, float_fn([](auto x) { return std::cosh(x); })));
  r.add(unary("Asinh", kFloat, float_fn([](auto x) { return std::asinh(x); })));
  r.add(unary("Acosh", kFloat, float_fn([](auto x) { return std::acosh(x); })));
  r.add(unary("Atanh", kFloat, float_fn([](auto x) { return std::atanh(x); })));
  r.add(unary("Tanh", kFloat, float_fn([](auto x) { return std::tanh(x); })));
  r.add(unary("Erf", kNumeric, unary_kernel<TC::kNumeric>(plain([](auto x) {
                using C = decltype(x);
                if constexpr (std::is_integral_v<C>)
                  return safe_cast<C>(std::erf(double(x)));
                else
                  return std::erf(x);
              }))));
}

void register_unary_activations(OpRegistry& r) {
  using TC = TypeClass;
  const auto kFloatAttr = AttrType::kFloat;
  // Activations.
  r.add(unary("Sigmoid", kFloat, float_fn([](auto x) {
                using C = decltype(x);
                // Never evaluates exp of a large positive number.
                return x >= C(0) ? C(1) / (C(1) + std::exp(-x))
                                 : std::exp(x) / (C(1) + std::exp(x));
              })));
  // SiLU / Swish, x * sigmoid(x): internal (ONNX has no op for it); fuse-silu makes it of
  // Mul(x, Sigmoid(x)), so that it fuses as one activation (oneDNN's swish post-op).
  r.add(OpSchemaBuilder("Silu", "ferrite")
            .versions(1)
            .inputs(1)
            .outputs(1)
            .types("T", {0}, kFloat)
            .infer(infer_same_as_input())
            .kernel(float_fn([](auto x) {
              using C = decltype(x);
              const C s =
                  x >= C(0) ? C(1) / (C(1) + std::exp(-x)) : std::exp(x) / (C(1) + std::exp(x));
              return x * s;
            }))
            .doc("x * sigmoid(x)"));
  r.add(unary("Relu", kSignedInt | kFloat, unary_kernel<TC::kSignedNumeric>(plain([](auto x) {
                using C = decltype(x);
                return x > C(0) ? x : (x != x ? x : C(0));
              }))));
  r.add(unary("LeakyRelu", kFloat, unary_kernel<TC::kFloat>([](const Node& n) {
                float a = n.attr_float("alpha");
                return [a](auto x) { return x < 0 ? decltype(x)(a) * x : x; };
              }))
            .attr("alpha", kFloatAttr, 0.01f));
  r.add(unary("Elu", kFloat, unary_kernel<TC::kFloat>([](const Node& n) {
                float a = n.attr_float("alpha");
                return [a](auto x) { return x < 0 ? decltype(x)(a) * std::expm1(x) : x; };
              }))
            .attr("alpha", kFloatAttr, 1.0f));
  r.add(unary("Selu", kFloat, unary_kernel<TC::kFloat>([](const Node& n) {
                float a = n.attr_float("alpha"), g = n.attr_float("gamma");
                return [a, g](auto x) {
                  using C = decltype(x);
                  return C(g) * (x > 0 ? x : C(a) * std::expm1(x));
                };
              }))
            .attr("alpha", kFloatAttr, 1.67326319217681884765625f)
            .attr("gamma", kFloatAttr, 1.05070102214813232421875f));
  r.add(unary("Celu", kFloat, unary_kernel<TC::kFloat>([](const Node& n) {
                float a = n.attr_float("alpha");
                return [a](auto x) {
                  using C = decltype(x);
                  return std::max(C(0), x) + std::min(C(0), C(a) * std::expm1(x / C(a)));
                };
              }))
            .attr("alpha", kFloatAttr, 1.0f));
  r.add(unary("HardSigmoid", kFloat, unary_kernel<TC::kFloat>([](const Node& n) {
                float a = n.attr_float("alpha"), b = n.attr_float("beta");
                return [a, b](auto x) {
                  using C = decltype(x);
                  C v = C(a) * x + C(b);  // NaN stays NaN (ONNX: clip(alpha*x+beta, 0, 1))
                  return v != v ? v : std::max(C(0), std::min(C(1), v));
                };
              }))
            .attr("alpha", kFloatAttr, 0.2f)
            .attr("beta", kFloatAttr, 0.5f));
  r.add(unary("HardSwish", kFloat, float_fn([](auto x) {
                using C = decltype(x);
                return x * std::max(C(0), std::min(C(1), x / C(6) + C(0.5)));
              }),
              14));
  r.add(unary("Softplus", kFloat, float_fn([](auto x) { return softplus(x); })));
  r.add(unary("Softsign", kFloat, float_fn([](auto x) { return x / (1 + std::fabs(x)); })));
  r.add(unary("Mish", kFloat, float_fn([](auto x) { return x * std::tanh(softplus(x)); }), 18));
  r.add(unary("ThresholdedRelu", kFloat, unary_kernel<TC::kFloat>([](const Node& n) {
                float a = n.attr_float("alpha");
                return [a](auto x) {
                  using C = decltype(x);
                  return x > C(a) ? x : C(0);
                };
              }))
            .attr("alpha", kFloatAttr, 1.0f));
  r.add(unary("Gelu", kFloat, unary_kernel<TC::kFloat>([](const Node& n) {
                bool tanh_approx = n.attr_string("approximate") == "tanh";
                return [tanh_approx](auto x) {
                  using C = decltype(x);
                  if (tanh_approx) {
                    const C k = C(0.7978845608028654);  // sqrt(2/pi)
                    return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
                  }
                  return C(0.5) * x * (C(1) + std::erf(x * C(0.7071067811865476)));
                };
              }),
              20)
            .attr("approximate", AttrType::kString, "none")
            .infer(infer_gelu));
}

// IsNaN, IsInf, Clip, Cast, CastLike and the quantization ops.
void register_casts_and_quantization(OpRegistry& r) {
  r.add(OpSchemaBuilder("IsNaN")
            .versions(13)
            .inputs(1)
            .outputs(1)
            .types("T1", {0}, kFloat | kFloat8)  // float8 from opset 20
            .infer(infer_bool_like_input)
            .kernel([](KernelContext& ctx) {
              return float_predicate(ctx, [](auto x) { return x != x; });
            }));
  r.add(OpSchemaBuilder("IsInf")
            .versions(13)
            .inputs(1)
            .outputs(1)
            .types("T1", {0}, kFloat | kFloat8)
            .attr("detect_negative", AttrType::kInt, 1)
            .attr("detect_positive", AttrType::kInt, 1)
            .infer(infer_bool_like_input)
            .kernel([](KernelContext& ctx) {
              bool neg = ctx.node().attr_int("detect_negative") != 0;
              bool pos = ctx.node().attr_int("detect_positive") != 0;
              return float_predicate(
                  ctx, [neg, pos](auto x) { return std::isinf(x) && (x > 0 ? pos : neg); });
            }));

  r.add(OpSchemaBuilder("Clip")
            .versions(13)
            .inputs(1, 3)
            .outputs(1)
            .types("T", {0, 1, 2}, kNumeric)
            .infer(infer_clip)
            .kernel(clip_kernel));
  // `saturate` (opset 19) only affects float8 targets.
  r.add(OpSchemaBuilder("Cast")
            .versions(13)
            .inputs(1)
            .outputs(1)
            .types("T1", {0}, kAllWithFloat8)
            .required_attr("to", AttrType::kInt)
            .attr("saturate", AttrType::kInt, 1)
            .infer(infer_cast)
            .kernel(cast_kernel));
  r.add(OpSchemaBuilder("CastLike")
            .versions(15)
            .inputs(2)
            .outputs(1)
            .types("T1", {0}, kAllWithFloat8)
            .types("T2", {1}, kAllWithFloat8)
            .attr("saturate", AttrType::kInt, 1)
            .infer(infer_castlike)
            .kernel([](KernelContext& ctx) { return cast_to(ctx, ctx.input(1).dtype()); }));

  // Quantization (opset 13; float8 from 19; 16-bit types, blocks and output_dtype from 21).
  constexpr DTypeSet kQuantized =
      DTypeSet{DType::kI8, DType::kU8, DType::kI16, DType::kU16} | kFloat8;
  r.add(OpSchemaBuilder("QuantizeLinear")
            .versions(13)
            .inputs(2, 3)
            .outputs(1)
            .attr("axis", AttrType::kInt, 1)
            .attr("saturate", AttrType::kInt, 1)
            .attr("block_size", AttrType::kInt, 0)
            .attr("output_dtype", AttrType::kInt, 0)
            .types("T1", {0}, kFloat | DTypeSet{DType::kI32})
            .types("T2", {1}, kFloat)
            .types("T3", {2}, kQuantized)
            .infer([](InferContext& ctx) { return infer_quantize(ctx, true); })
            .kernel(quantize_kernel));
  r.add(OpSchemaBuilder("DequantizeLinear")
            .versions(13)
            .inputs(2, 3)
            .outputs(1)
            .attr("axis", AttrType::kInt, 1)
            .attr("block_size", AttrType::kInt, 0)
            .types("T1", {0, 2}, kQuantized | DTypeSet{DType::kI32})
            .types("T2", {1}, kFloat)
            .infer([](InferContext& ctx) { return infer_quantize(ctx, false); })
            .kernel(dequantize_kernel));
  r.add(OpSchemaBuilder("DynamicQuantizeLinear")
            .versions(11)
            .inputs(1)
            .outputs(3)
            .types("T1", {0}, {DType::kF32})
            .infer(infer_dynamic_quantize)
            .kernel(dynamic_quantize_kernel));
}

}  // namespace

void register_activation_ops(OpRegistry& r) {
  register_unary_math(r);
  register_unary_activations(r);
  register_casts_and_quantization(r);
}

}  // namespace ferrite
