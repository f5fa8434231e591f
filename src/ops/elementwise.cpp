// Elementwise ops: broadcasting binary arithmetic, comparisons, logic, and unary math.
#include <cmath>

#include "ops/helpers.h"

namespace ferrite {

namespace {

// Applies out[i] = f(a[i], b[i]) under broadcasting. In/Out are storage types; f works on
// compute types.
template <class In, class Out, class F>
Status binary_apply(KernelContext& ctx, DType out_dtype, F f) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  FERRITE_ASSIGN_OR_RETURN(auto dims, broadcast_dims(ctx, a.dims(), b.dims()));
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, out_dtype, dims));
  const In* pa = a.data<In>();
  const In* pb = b.data<In>();
  Out* py = y->data<Out>();
  using C = compute_t<In>;
  if (a.dims() == b.dims()) {
    for (int64_t i = 0; i < y->numel(); ++i)
      py[i] = convert<Out>(f(static_cast<C>(convert<C>(pa[i])), static_cast<C>(convert<C>(pb[i]))));
    return Status::ok();
  }
  if (b.numel() == 1) {
    C vb = convert<C>(pb[0]);
    for (int64_t i = 0; i < y->numel(); ++i) py[i] = convert<Out>(f(convert<C>(pa[i]), vb));
    return Status::ok();
  }
  std::array<std::vector<int64_t>, 2> strides{broadcast_strides(a.dims(), dims),
                                              broadcast_strides(b.dims(), dims)};
  for_each_index<2>(dims, strides, [&](int64_t i, const std::array<int64_t, 2>& off) {
    py[i] = convert<Out>(f(convert<C>(pa[off[0]]), convert<C>(pb[off[1]])));
  });
  return Status::ok();
}

// Kernel for an arithmetic op over the numeric dtypes: result has the input dtype.
template <class Op>
KernelFn arith_kernel(Op op) {
  return [op](KernelContext& ctx) -> Status {
    Status st;
    DType dt = ctx.input(0).dtype();
    visit_dtype(dt, [&]<class T>() {
      if constexpr (std::is_same_v<T, bool>) {
        st = ctx.error("bool is not supported");
      } else {
        st = binary_apply<T, T>(ctx, dt, [&](auto x, auto y) { return op(x, y); });
      }
    });
    return st;
  };
}

// Kernel for a comparison: bool result.
template <class Op>
KernelFn compare_kernel(Op op) {
  return [op](KernelContext& ctx) -> Status {
    Status st;
    visit_dtype(ctx.input(0).dtype(), [&]<class T>() {
      st = binary_apply<T, bool>(ctx, DType::kBool, [&](auto x, auto y) { return op(x, y); });
    });
    return st;
  };
}

template <class T>
T int_div(T x, T y, bool* div_by_zero) {
  if (y == 0) {
    *div_by_zero = true;
    return 0;
  }
  if constexpr (std::is_signed_v<T>) {
    if (x == std::numeric_limits<T>::min() && y == T(-1)) return x;  // wraps, like ORT
  }
  return static_cast<T>(x / y);
}

// Unary op over float types, computed in double for f64 and float otherwise.
template <class Op>
KernelFn unary_float_kernel(Op op) {
  return [op](KernelContext& ctx) -> Status {
    const Tensor& x = ctx.input(0);
    FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.dims()));
    Status st;
    visit_dtype(x.dtype(), [&]<class T>() {
      if constexpr (is_float_v<T>) {
        using C = compute_t<T>;
        const T* px = x.data<T>();
        T* py = y->data<T>();
        for (int64_t i = 0; i < x.numel(); ++i) py[i] = convert<T>(static_cast<C>(op(convert<C>(px[i]))));
      } else {
        st = ctx.error("dtype ", dtype_name(x.dtype()), " is not supported");
      }
    });
    return st;
  };
}

// Unary op over all numeric types (Abs, Neg, Sign, Relu...).
template <class Op>
KernelFn unary_numeric_kernel(Op op) {
  return [op](KernelContext& ctx) -> Status {
    const Tensor& x = ctx.input(0);
    FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.dims()));
    Status st;
    visit_dtype(x.dtype(), [&]<class T>() {
      if constexpr (std::is_same_v<T, bool>) {
        st = ctx.error("bool is not supported");
      } else {
        using C = compute_t<T>;
        const T* px = x.data<T>();
        T* py = y->data<T>();
        for (int64_t i = 0; i < x.numel(); ++i) py[i] = convert<T>(static_cast<C>(op(convert<C>(px[i]))));
      }
    });
    return st;
  };
}

void add_binary(OpRegistry& r, const char* name, DTypeSet types, KernelFn k, int since = 13,
                std::optional<DType> out = std::nullopt) {
  r.add(OpSchemaBuilder(name).versions(since).inputs(2).outputs(1).types("T", {0, 1}, types)
            .infer(infer_broadcast(out)).kernel(std::move(k)));
}

void add_unary(OpRegistry& r, const char* name, DTypeSet types, KernelFn k, int since = 13) {
  r.add(OpSchemaBuilder(name).versions(since).inputs(1).outputs(1).types("T", {0}, types)
            .infer(infer_same_as_input()).kernel(std::move(k)));
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  using namespace dtypes;
  add_binary(r, "Add", kNumeric, arith_kernel([](auto x, auto y) { return x + y; }));
  add_binary(r, "Sub", kNumeric, arith_kernel([](auto x, auto y) { return x - y; }));
  add_binary(r, "Mul", kNumeric, arith_kernel([](auto x, auto y) { return x * y; }));
  add_binary(r, "Div", kNumeric, [](KernelContext& ctx) -> Status {
    bool div_by_zero = false;
    Status st = arith_kernel([&](auto x, auto y) {
      using C = decltype(x);
      if constexpr (std::is_integral_v<C>) return int_div<C>(x, y, &div_by_zero);
      else return x / y;
    })(ctx);
    if (st && div_by_zero) return ctx.error("integer division by zero");
    return st;
  });

  add_unary(r, "Relu", kNumeric, unary_numeric_kernel([](auto x) {
              using C = decltype(x);
              return x > C(0) ? x : C(0);
            }));
  add_unary(r, "Abs", kNumeric, unary_numeric_kernel([](auto x) {
              using C = decltype(x);
              if constexpr (std::is_unsigned_v<C>) return x;
              else return x < C(0) ? C(-x) : x;
            }));
  add_unary(r, "Neg", kSignedInt | kFloat, unary_numeric_kernel([](auto x) { return -x; }));
  add_unary(r, "Exp", kFloat, unary_float_kernel([](auto x) { return std::exp(x); }));
  add_unary(r, "Log", kFloat, unary_float_kernel([](auto x) { return std::log(x); }));
  add_unary(r, "Sqrt", kFloat, unary_float_kernel([](auto x) { return std::sqrt(x); }));
  add_unary(r, "Tanh", kFloat, unary_float_kernel([](auto x) { return std::tanh(x); }));
  add_unary(r, "Erf", kNumeric, unary_numeric_kernel([](auto x) {
              using C = decltype(x);
              return static_cast<C>(std::erf(static_cast<double>(x)));
            }));
  add_unary(r, "Sigmoid", kFloat, unary_float_kernel([](auto x) {
              using C = decltype(x);
              return x >= C(0) ? C(1) / (C(1) + std::exp(-x)) : std::exp(x) / (C(1) + std::exp(x));
            }));

  add_binary(r, "Equal", kAll, compare_kernel([](auto x, auto y) { return x == y; }), 13,
             DType::kBool);
  add_binary(r, "Less", kNumeric, compare_kernel([](auto x, auto y) { return x < y; }), 13,
             DType::kBool);
  add_binary(r, "Greater", kNumeric, compare_kernel([](auto x, auto y) { return x > y; }), 13,
             DType::kBool);
}

}  // namespace ferrite
