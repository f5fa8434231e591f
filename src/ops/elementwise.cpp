// Elementwise ops with broadcasting: arithmetic (Add Sub Mul Div Pow Mod), variadic (Max Min Sum
// Mean), comparisons, logic (And Or Xor Not BitShift, Bitwise*), Where and PRelu. Integer
// arithmetic wraps around like the ONNX runtimes do; integer division or modulo by zero is an
// error.
//
// Inference also propagates symbolic dims values through the integer arithmetic, comparisons and
// Where, so that shape computations such as Shape -> Gather -> Mul -> Concat -> Reshape keep
// `batch*12` instead of collapsing to unknown.
#include "ops/elementwise_util.h"

namespace ferrite {

namespace {

using namespace dtypes;

// y = f(a, b) under broadcasting into output 0 (dtype `out_dtype`, storage Out). A and B are the
// inputs' storage types; f receives their compute types and returns something convert<Out> takes.
template <class A, class B, class Out, class F>
Expected<Tensor*> binary_apply(KernelContext& ctx, const Tensor& a, const Tensor& b,
                               DType out_dtype, F f) {
  if (a.dtype() != dtype_of<A>::value || b.dtype() != dtype_of<B>::value)
    return ctx.error("unexpected input dtypes ", dtype_name(a.dtype()), " and ",
                     dtype_name(b.dtype()));
  FERRITE_ASSIGN_OR_RETURN(auto dims, broadcast_dims(ctx, a.dims(), b.dims()));
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, out_dtype, dims));
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  Out* py = y->data<Out>();
  using CA = compute_t<A>;
  using CB = compute_t<B>;
  if (a.dims() == b.dims()) {
    for (int64_t i = 0; i < y->numel(); ++i)
      py[i] = convert<Out>(f(convert<CA>(pa[i]), convert<CB>(pb[i])));
    return y;
  }
  std::array<std::vector<int64_t>, 2> strides{broadcast_strides(a.dims(), dims),
                                              broadcast_strides(b.dims(), dims)};
  for_each_broadcast<2>(dims, strides, [&](int64_t i, const std::array<int64_t, 2>& off) {
    py[i] = convert<Out>(f(convert<CA>(pa[off[0]]), convert<CB>(pb[off[1]])));
  });
  return y;
}

// Kernel for a same-dtype binary op whose result has the input dtype. MakeOp(ctx) returns the
// functor (so ops can read attributes); it is instantiated only for dtypes in class K.
template <TypeClass K, class MakeOp>
KernelFn same_type_kernel(MakeOp make) {
  return [make](KernelContext& ctx) -> Status {
    DType dt = ctx.input(0).dtype();
    auto op = make(ctx);
    return dispatch_dtype<K>(ctx, dt, [&]<class T>() -> Status {
      return binary_apply<T, T, T>(ctx, ctx.input(0), ctx.input(1), dt, op).status();
    });
  };
}

template <TypeClass K, class Op>
KernelFn compare_kernel(Op op) {
  return [op](KernelContext& ctx) -> Status {
    return dispatch_dtype<K>(ctx, ctx.input(0).dtype(), [&]<class T>() -> Status {
      return binary_apply<T, T, bool>(ctx, ctx.input(0), ctx.input(1), DType::kBool, op).status();
    });
  };
}

// Integer Div and Mod fail on a zero divisor (undefined in C++; ONNX leaves it unspecified).
template <class T>
bool has_zero(const Tensor& t) {
  const T* p = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (p[i] == T(0)) return true;
  return false;
}

template <class C>
C int_div(C x, C y) {
  if (y == 0) return 0;
  if constexpr (std::is_signed_v<C>) {
    if (y == C(-1)) return wrap_neg(x);  // min / -1 overflows: wrap like the runtimes
  }
  return static_cast<C>(x / y);
}

template <class C>
C int_mod(C x, C y, bool fmod) {
  if (y == 0) return 0;
  if constexpr (std::is_signed_v<C>) {
    if (y == C(-1)) return 0;  // avoids min % -1 overflow; the remainder is always 0
    C r = static_cast<C>(x % y);
    if (!fmod && r != 0 && ((r < 0) != (y < 0))) r = static_cast<C>(r + y);
    return r;
  } else {
    return static_cast<C>(x % y);
  }
}

// Integer power by squaring, wrapping on overflow; negative exponents follow truncation of the
// real result (1/x^n), with 0^negative defined as 0 instead of a division by zero.
template <class T>
T int_pow(T base, int64_t e) {
  if (e < 0) {
    if (base == T(1)) return T(1);
    if constexpr (std::is_signed_v<T>) {
      if (base == T(-1)) return (e % 2 == 0) ? T(1) : T(-1);
    }
    return T(0);
  }
  T result = 1;
  while (e > 0) {
    if (e & 1) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
    e >>= 1;
  }
  return result;
}

// Pow's base (T) and exponent (T1) may differ in dtype; the result has the base's dtype.
template <class CT, class CE>
CT pow_value(CT a, CE b) {
  if constexpr (std::is_integral_v<CT> && std::is_integral_v<CE>) {
    int64_t e = 0;
    if constexpr (std::is_same_v<CE, uint64_t>)
      e = b > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(b);
    else
      e = static_cast<int64_t>(b);
    return int_pow<CT>(a, e);
  } else if constexpr (std::is_same_v<CT, float> && !std::is_same_v<CE, double>) {
    return std::pow(a, static_cast<float>(b));
  } else {
    return safe_cast<CT>(std::pow(static_cast<double>(a), static_cast<double>(b)));
  }
}

Status pow_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& p = ctx.input(1);
  DType dt = x.dtype();
  return dispatch_dtype<TypeClass::kNumeric>(ctx, dt, [&]<class T>() -> Status {
    // The spec's T is {i32, i64, floats}; skip instantiating the other bases.
    constexpr bool base_ok =
        is_float_v<T> || std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;
    Status st = ctx.error("dtype ", dtype_name(dt), " is not supported");
    if constexpr (base_ok) {
      st = dispatch_dtype<TypeClass::kNumeric>(ctx, p.dtype(), [&]<class E>() -> Status {
        auto op = [](compute_t<T> a, compute_t<E> b) { return pow_value(a, b); };
        return binary_apply<T, E, T>(ctx, x, p, dt, op).status();
      });
    }
    return st;
  });
}

Status mod_kernel(KernelContext& ctx) {
  bool fmod = ctx.node().attr_int("fmod") != 0;
  const Tensor& b = ctx.input(1);
  return dispatch_dtype<TypeClass::kNumeric>(ctx, ctx.input(0).dtype(), [&]<class T>() -> Status {
    if constexpr (is_float_v<T>) {
      if (!fmod) return ctx.error("fmod must be 1 for floating-point inputs");
      auto op = [](auto x, auto y) { return std::fmod(x, y); };
      return binary_apply<T, T, T>(ctx, ctx.input(0), b, b.dtype(), op).status();
    } else {
      if (has_zero<T>(b)) return ctx.error("integer modulo by zero");
      auto op = [fmod](T x, T y) { return int_mod<T>(x, y, fmod); };
      return binary_apply<T, T, T>(ctx, ctx.input(0), b, b.dtype(), op).status();
    }
  });
}

Status div_kernel(KernelContext& ctx) {
  const Tensor& b = ctx.input(1);
  return dispatch_dtype<TypeClass::kNumeric>(ctx, b.dtype(), [&]<class T>() -> Status {
    if constexpr (is_float_v<T>) {
      auto op = [](auto x, auto y) { return x / y; };
      return binary_apply<T, T, T>(ctx, ctx.input(0), b, b.dtype(), op).status();
    } else {
      if (has_zero<T>(b)) return ctx.error("integer division by zero");
      auto op = [](T x, T y) { return int_div<T>(x, y); };
      return binary_apply<T, T, T>(ctx, ctx.input(0), b, b.dtype(), op).status();
    }
  });
}

// NaN-propagating max/min (like NumPy's maximum/minimum, which the ONNX reference uses).
struct MaxOp {
  template <class C>
  C operator()(C x, C y) const {
    if (x != x) return x;
    if (y != y) return y;
    return x < y ? y : x;
  }
};
struct MinOp {
  template <class C>
  C operator()(C x, C y) const {
    if (x != x) return x;
    if (y != y) return y;
    return y < x ? y : x;
  }
};
struct AddOp {
  template <class C>
  C operator()(C x, C y) const {
    return wrap_add(x, y);
  }
};

// Variadic Max/Min/Sum/Mean: a left fold of broadcasting binary applications.
template <TypeClass K, class Op>
KernelFn variadic_kernel(Op op, bool mean) {
  return [op, mean](KernelContext& ctx) -> Status {
    DType dt = ctx.input(0).dtype();
    for (size_t i = 1; i < ctx.num_inputs(); ++i)
      if (ctx.input(i).dtype() != dt)
        return ctx.error("all inputs must share one dtype, got ", dtype_name(dt), " and ",
                         dtype_name(ctx.input(i).dtype()));
    return dispatch_dtype<K>(ctx, dt, [&]<class T>() -> Status {
      if (ctx.num_inputs() == 1) {
        ctx.set_output(0, ctx.input(0));
        return Status::ok();
      }
      Tensor acc = ctx.input(0);
      Tensor* y = nullptr;
      for (size_t i = 1; i < ctx.num_inputs(); ++i) {
        FERRITE_ASSIGN_OR_RETURN(y, (binary_apply<T, T, T>(ctx, acc, ctx.input(i), dt, op)));
        acc = *y;  // shares storage; the next allocation replaces output 0, not acc
      }
      if constexpr (is_float_v<T>) {
        if (mean) {
          using C = compute_t<T>;
          C n = static_cast<C>(ctx.num_inputs());
          T* p = y->data<T>();
          for (int64_t i = 0; i < y->numel(); ++i) p[i] = convert<T>(convert<C>(p[i]) / n);
        }
      }
      return Status::ok();
    });
  };
}

Status where_kernel(KernelContext& ctx) {
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  if (c.dtype() != DType::kBool) return ctx.error("condition must be bool");
  if (x.dtype() != y.dtype()) return ctx.error("X and Y must share one dtype");
  FERRITE_ASSIGN_OR_RETURN(auto d1, broadcast_dims(ctx, c.dims(), x.dims()));
  FERRITE_ASSIGN_OR_RETURN(auto dims, broadcast_dims(ctx, d1, y.dims()));
  FERRITE_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), dims));
  return dispatch_dtype<TypeClass::kAll>(ctx, x.dtype(), [&]<class T>() -> Status {
    const bool* pc = c.data<bool>();
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    T* po = out->data<T>();
    std::array<std::vector<int64_t>, 3> strides{broadcast_strides(c.dims(), dims),
                                                broadcast_strides(x.dims(), dims),
                                                broadcast_strides(y.dims(), dims)};
    for_each_broadcast<3>(dims, strides, [&](int64_t i, const std::array<int64_t, 3>& off) {
      po[i] = pc[off[0]] ? px[off[1]] : py[off[2]];
    });
    return Status::ok();
  });
}

Status prelu_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& slope = ctx.input(1);
  auto dims = broadcast_dims(ctx, x.dims(), slope.dims());
  if (!dims || *dims != x.dims())
    return ctx.error("slope ", slope.type_string(), " is not unidirectionally broadcastable to X ",
                     x.type_string());
  return dispatch_dtype<TypeClass::kNumeric>(ctx, x.dtype(), [&]<class T>() -> Status {
    auto op = [](auto v, auto s) {
      using C = decltype(v);
      return v < C(0) ? wrap_mul(v, s) : v;
    };
    return binary_apply<T, T, T>(ctx, x, slope, x.dtype(), op).status();
  });
}

Status bitshift_kernel(KernelContext& ctx) {
  bool left = ctx.node().attr_string("direction") == "LEFT";
  return dispatch_dtype<TypeClass::kUnsigned>(ctx, ctx.input(0).dtype(), [&]<class T>() -> Status {
    auto op = [left](T v, T s) -> T {
      // Shifting by the bit width or more is undefined in C++; every bit is shifted out.
      if (s >= std::numeric_limits<T>::digits) return T(0);
      return left ? static_cast<T>(v << s) : static_cast<T>(v >> s);
    };
    return binary_apply<T, T, T>(ctx, ctx.input(0), ctx.input(1), ctx.input(0).dtype(), op)
        .status();
  });
}

Status not_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::kBool) return ctx.error("input must be bool");
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kBool, x.dims()));
  const bool* px = x.data<bool>();
  bool* py = y->data<bool>();
  for (int64_t i = 0; i < x.numel(); ++i) py[i] = !px[i];
  return Status::ok();
}

Status bitwise_not_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.dims()));
  return dispatch_dtype<TypeClass::kInt>(ctx, x.dtype(), [&]<class T>() -> Status {
    const T* px = x.data<T>();
    T* py = y->data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) py[i] = static_cast<T>(~px[i]);
    return Status::ok();
  });
}

// ---- inference ----

// Broadcasts the shapes of the present inputs in `which`; dtype comes from the caller.
Status infer_broadcast_of(InferContext& ctx, const std::vector<size_t>& which, DType out) {
  std::optional<Shape> shape;
  for (size_t i : which) {
    if (!ctx.has_input(i)) continue;
    if (!shape) {
      shape = ctx.input_shape(i);
      continue;
    }
    std::string e;
    auto s = broadcast_shapes(*shape, ctx.input_shape(i), &e);
    if (!s) return ctx.error(e);
    shape = *s;
  }
  ctx.set_output(0, out, shape.value_or(Shape::unknown_rank()));
  return Status::ok();
}

std::vector<size_t> all_inputs(const InferContext& ctx) {
  std::vector<size_t> v(ctx.num_inputs());
  for (size_t i = 0; i < v.size(); ++i) v[i] = i;
  return v;
}

using DimFn = std::function<Dim(const std::vector<Dim>&)>;

// Inference for a broadcasting op with dims-value propagation `dim_fn` (may be empty).
InferFn infer_elementwise(std::optional<DType> out, DimFn dim_fn = nullptr) {
  return [out, dim_fn](InferContext& ctx) -> Status {
    auto in = all_inputs(ctx);
    DType dt = ctx.input_dtype(0);
    for (size_t i : in)
      if (ctx.has_input(i) && ctx.input_dtype(i) != dt)
        return ctx.error("all inputs must share one dtype, got ", dtype_name(dt), " and ",
                         dtype_name(ctx.input_dtype(i)));
    FERRITE_RETURN_IF_ERROR(infer_broadcast_of(ctx, in, out.value_or(dt)));
    if (dim_fn && (is_integer(dt) || dt == DType::kBool)) propagate_dims_value(ctx, in, dim_fn);
    return Status::ok();
  };
}

// Folds a binary Dim function over all arguments (for variadic Max/Min).
DimFn fold_dims(Dim (*f)(const Dim&, const Dim&)) {
  return [f](const std::vector<Dim>& a) {
    Dim r = a[0];
    for (size_t i = 1; i < a.size(); ++i) r = f(r, a[i]);
    return r;
  };
}

DimFn compare_dims(bool (*pred)(int)) {
  return [pred](const std::vector<Dim>& a) {
    auto c = dim_compare(a[0], a[1]);
    return c ? Dim(pred(*c) ? 1 : 0) : Dim::unknown();
  };
}

Status infer_where(InferContext& ctx) {
  FERRITE_RETURN_IF_ERROR(infer_broadcast_of(ctx, {0, 1, 2}, ctx.input_dtype(1)));
  DType dt = ctx.input_dtype(1);
  if (is_integer(dt) || dt == DType::kBool) {
    propagate_dims_value(ctx, {0, 1, 2}, [](const std::vector<Dim>& a) {
      if (auto c = a[0].value()) return *c ? a[1] : a[2];
      return a[1] == a[2] ? a[1] : Dim::unknown();
    });
  }
  return Status::ok();
}

Status infer_prelu(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& s = ctx.input_shape(1);
  if (x.rank_known() && s.rank_known()) {
    if (s.rank() > x.rank())
      return ctx.error("slope ", s.to_string(), " has a higher rank than X ", x.to_string());
    for (size_t i = 0; i < s.rank(); ++i) {
      auto sd = s[i].value(), xd = x[x.rank() - s.rank() + i].value();
      if (sd && xd && *sd != 1 && *sd != *xd)
        return ctx.error("slope ", s.to_string(), " is not unidirectionally broadcastable to X ",
                         x.to_string());
    }
  }
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

Status infer_mod(InferContext& ctx) {
  bool fmod = ctx.node().attr_int("fmod") != 0;
  if (is_float(ctx.input_dtype(0)) && !fmod)
    return ctx.error("fmod must be 1 for floating-point inputs");
  return infer_elementwise(
      std::nullopt, [fmod](const std::vector<Dim>& a) { return dim_mod(a[0], a[1], fmod); })(ctx);
}

Status infer_pow(InferContext& ctx) {
  return infer_broadcast_of(ctx, {0, 1}, ctx.input_dtype(0));
}

Status infer_bitshift(InferContext& ctx) {
  std::string d = ctx.node().attr_string("direction");
  if (d != "LEFT" && d != "RIGHT")
    return ctx.error("direction must be \"LEFT\" or \"RIGHT\", got \"", d, "\"");
  return infer_elementwise(std::nullopt)(ctx);
}

OpSchemaBuilder binary(const char* name, DTypeSet types, InferFn infer, KernelFn k,
                       int since = 13) {
  OpSchemaBuilder b(name);
  b.versions(since)
      .inputs(2)
      .outputs(1)
      .types("T", {0, 1}, types)
      .infer(std::move(infer))
      .kernel(std::move(k));
  return b;
}

OpSchemaBuilder variadic(const char* name, DTypeSet types, InferFn infer, KernelFn k) {
  OpSchemaBuilder b(name);
  b.versions(13)
      .inputs(1, INT_MAX)
      .outputs(1)
      .variadic_types("T", 0, types)
      .infer(std::move(infer))
      .kernel(std::move(k));
  return b;
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  using TC = TypeClass;
  auto add = [](const std::vector<Dim>& a) { return a[0] + a[1]; };
  auto sub = [](const std::vector<Dim>& a) { return a[0] - a[1]; };
  auto mul = [](const std::vector<Dim>& a) { return a[0] * a[1]; };
  auto div = [](const std::vector<Dim>& a) { return dim_div(a[0], a[1]); };

  r.add(binary("Add", kNumeric, infer_elementwise(std::nullopt, add),
               same_type_kernel<TC::kNumeric>([](KernelContext&) { return AddOp{}; })));
  r.add(binary("Sub", kNumeric, infer_elementwise(std::nullopt, sub),
               same_type_kernel<TC::kNumeric>(
                   [](KernelContext&) { return [](auto x, auto y) { return wrap_sub(x, y); }; })));
  r.add(binary("Mul", kNumeric, infer_elementwise(std::nullopt, mul),
               same_type_kernel<TC::kNumeric>(
                   [](KernelContext&) { return [](auto x, auto y) { return wrap_mul(x, y); }; })));
  r.add(binary("Div", kNumeric, infer_elementwise(std::nullopt, div), div_kernel));
  r.add(binary("Mod", kNumeric, infer_mod, mod_kernel).attr("fmod", AttrType::kInt, 0));
  r.add(OpSchemaBuilder("Pow")
            .versions(13)
            .inputs(2)
            .outputs(1)
            .types("T", {0},
                   {DType::kI32, DType::kI64, DType::kF16, DType::kF32, DType::kF64, DType::kBF16})
            .types("T1", {1}, kNumeric)
            .infer(infer_pow)
            .kernel(pow_kernel));

  r.add(variadic("Max", kNumeric, infer_elementwise(std::nullopt, fold_dims(dim_max)),
                 variadic_kernel<TC::kNumeric>(MaxOp{}, false)));
  r.add(variadic("Min", kNumeric, infer_elementwise(std::nullopt, fold_dims(dim_min)),
                 variadic_kernel<TC::kNumeric>(MinOp{}, false)));
  r.add(variadic("Sum", kFloat, infer_elementwise(std::nullopt),
                 variadic_kernel<TC::kFloat>(AddOp{}, false)));
  r.add(variadic("Mean", kFloat, infer_elementwise(std::nullopt),
                 variadic_kernel<TC::kFloat>(AddOp{}, true)));

  auto cmp = [&](const char* name, DTypeSet types, auto op, bool (*pred)(int)) {
    r.add(binary(name, types, infer_elementwise(DType::kBool, compare_dims(pred)),
                 compare_kernel<TC::kAll>(op)));
  };
  cmp("Equal", kAll, std::equal_to<>{}, [](int c) { return c == 0; });
  cmp("Less", kNumeric, std::less<>{}, [](int c) { return c < 0; });
  cmp("LessOrEqual", kNumeric, std::less_equal<>{}, [](int c) { return c <= 0; });
  cmp("Greater", kNumeric, std::greater<>{}, [](int c) { return c > 0; });
  cmp("GreaterOrEqual", kNumeric, std::greater_equal<>{}, [](int c) { return c >= 0; });

  auto logic = [&](const char* name, auto op) {
    r.add(binary(name, kBool, infer_elementwise(DType::kBool),
                 same_type_kernel<TC::kBool>([op](KernelContext&) { return op; })));
  };
  logic("And", [](bool x, bool y) { return x && y; });
  logic("Or", [](bool x, bool y) { return x || y; });
  logic("Xor", [](bool x, bool y) { return x != y; });
  r.add(OpSchemaBuilder("Not")
            .versions(13)
            .inputs(1)
            .outputs(1)
            .types("T", {0}, kBool)
            .infer(infer_same_as_input())
            .kernel(not_kernel));
  r.add(binary("BitShift", kUnsignedInt, infer_bitshift, bitshift_kernel)
            .required_attr("direction", AttrType::kString));
  // Bitwise ops (opset 18) on the integers' two's-complement bits.
  auto bitwise = [&](const char* name, auto op) {
    r.add(binary(name, kInt, infer_elementwise(std::nullopt),
                 same_type_kernel<TC::kInt>([op](KernelContext&) { return op; }), 18));
  };
  bitwise("BitwiseAnd", [](auto x, auto y) { return static_cast<decltype(x)>(x & y); });
  bitwise("BitwiseOr", [](auto x, auto y) { return static_cast<decltype(x)>(x | y); });
  bitwise("BitwiseXor", [](auto x, auto y) { return static_cast<decltype(x)>(x ^ y); });
  r.add(OpSchemaBuilder("BitwiseNot")
            .versions(18)
            .inputs(1)
            .outputs(1)
            .types("T", {0}, kInt)
            .infer(infer_same_as_input())
            .kernel(bitwise_not_kernel));

  r.add(OpSchemaBuilder("Where")
            .versions(13)
            .inputs(3)
            .outputs(1)
            .types("B", {0}, kBool)
            .types("T", {1, 2}, kAll)
            .infer(infer_where)
            .kernel(where_kernel));
  r.add(OpSchemaBuilder("PRelu")
            .versions(13)
            .inputs(2)
            .outputs(1)
            .types("T", {0, 1}, kFloat | kIndex | DTypeSet{DType::kU32, DType::kU64})
            .infer(infer_prelu)
            .kernel(prelu_kernel));
}

}  // namespace ferrite
