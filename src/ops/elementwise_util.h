// Building blocks shared by the elementwise (binary/logic) and activation (unary) op families:
// a broadcasting loop, wrap-around integer arithmetic, a UB-free numeric cast, dtype dispatch
// that reports unsupported dtypes, and propagation of symbolic dims values.
#pragma once

#include <cmath>
#include <functional>
#include <limits>
#include <type_traits>

#include "ops/helpers.h"

namespace ferrite {

// Calls f(out_index, offsets) for every element of `dims`, where offsets[k] indexes input k via
// strides[k] (0 where broadcast). Adjacent dims that are contiguous for every input are merged and
// the innermost dim is a plain loop, so the per-element cost stays low for the common cases.
template <size_t N, class F>
void for_each_broadcast(const std::vector<int64_t>& dims,
                        const std::array<std::vector<int64_t>, N>& strides, F&& f) {
  std::vector<int64_t> cd;
  std::array<std::vector<int64_t>, N> cs;
  for (size_t ax = 0; ax < dims.size(); ++ax) {
    if (dims[ax] == 0) return;
    if (dims[ax] == 1) continue;
    bool merge = !cd.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = cs[k].back() == strides[k][ax] * dims[ax];
    if (merge) {
      cd.back() *= dims[ax];
      for (size_t k = 0; k < N; ++k) cs[k].back() = strides[k][ax];
    } else {
      cd.push_back(dims[ax]);
      for (size_t k = 0; k < N; ++k) cs[k].push_back(strides[k][ax]);
    }
  }
  if (cd.empty()) {
    f(int64_t{0}, std::array<int64_t, N>{});
    return;
  }
  int64_t inner = cd.back();
  std::array<int64_t, N> step;
  for (size_t k = 0; k < N; ++k) {
    step[k] = cs[k].back();
    cs[k].pop_back();
  }
  cd.pop_back();
  for_each_index<N>(cd, cs, [&](int64_t o, const std::array<int64_t, N>& base) {
    std::array<int64_t, N> off = base;
    for (int64_t j = 0; j < inner; ++j) {
      f(o * inner + j, off);
      for (size_t k = 0; k < N; ++k) off[k] += step[k];
    }
  });
}

// Two's-complement wrap-around arithmetic for integers (signed overflow is UB in C++); plain
// arithmetic for floating point.
template <class C>
C wrap_add(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <class C>
C wrap_sub(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return a - b;
  }
}
template <class C>
C wrap_mul(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    // Multiply in at least unsigned int so that small types do not promote to signed int.
    using U = std::common_type_t<std::make_unsigned_t<C>, unsigned>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}
template <class C>
C wrap_neg(C a) {
  if constexpr (std::is_integral_v<C>)
    return wrap_sub(C(0), a);
  else
    return -a;  // not 0 - a: that makes -(+0) +0, and x / -(+0) +inf instead of -inf
}

// Numeric conversion between any two storage types without undefined behaviour.
//  - float -> integer truncates toward zero and saturates: NaN -> 0, values beyond the target's
//    range (including +-inf) -> its max / min.
//  - integer -> integer wraps modulo 2^bits (C++20 semantics, as ONNX runtimes do).
//  - anything -> bool is `x != 0` (NaN -> true); bool -> anything is 0 / 1.
//  - float -> float rounds to nearest (IEEE), overflowing to +-inf.
template <class To, class From>
To safe_cast(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<compute_t<From>>(convert<compute_t<From>>(v)) != compute_t<From>(0);
  } else if constexpr (std::is_same_v<From, bool>) {
    return convert<To>(static_cast<int>(v));
  } else if constexpr (std::is_integral_v<To> && is_float_v<From>) {
    double d = static_cast<double>(convert<compute_t<From>>(v));
    if (std::isnan(d)) return To(0);
    constexpr int digits = std::numeric_limits<To>::digits;  // 63 for int64, 64 for uint64
    const double limit = std::ldexp(1.0, digits);            // first value past max, exact
    if (d >= limit) return std::numeric_limits<To>::max();
    if constexpr (std::is_signed_v<To>) {
      if (d < -limit) return std::numeric_limits<To>::min();
    } else {
      if (d <= -1.0) return To(0);
    }
    return static_cast<To>(d);
  } else {
    return convert<To>(v);
  }
}

// Kinds of dtypes an op body may be instantiated for.
enum class TypeClass { kFloat, kSignedNumeric, kNumeric, kAll, kBool, kInt, kUnsigned };

template <TypeClass K, class T>
constexpr bool type_class_has() {
  constexpr bool fl = is_float_v<T>;
  constexpr bool b = std::is_same_v<T, bool>;
  constexpr bool in = std::is_integral_v<T> && !b;
  switch (K) {
    case TypeClass::kFloat:
      return fl;
    case TypeClass::kSignedNumeric:
      return fl || (in && std::is_signed_v<T>);
    case TypeClass::kNumeric:
      return fl || in;
    case TypeClass::kAll:
      return true;
    case TypeClass::kBool:
      return b;
    case TypeClass::kInt:
      return in;
    case TypeClass::kUnsigned:
      return in && std::is_unsigned_v<T>;
  }
  return false;
}

// Runs f.template operator()<T>() (returning Status) for dtype `dt` when T is in class K;
// otherwise an error naming the dtype. Keeps kernels from instantiating bodies for types they
// cannot handle.
template <TypeClass K, class Ctx, class F>
Status dispatch_dtype(const Ctx& ctx, DType dt, F&& f) {
  Status st = ctx.error("dtype ", dtype_name(dt), " is not supported");
  visit_dtype(dt, [&]<class T>() {
    if constexpr (type_class_has<K, T>()) st = f.template operator()<T>();
  });
  return st;
}

// Symbolic dims values (contents of small integer tensors such as Shape results).
//
// Computes output 0's dims value from the inputs' dims values, elementwise with broadcasting,
// when every listed input is a rank <= 1 integer/bool tensor whose dims value is known. `f`
// receives one Dim per input and returns the output Dim (Dim::unknown() when it cannot tell).
void propagate_dims_value(InferContext& ctx, const std::vector<size_t>& inputs,
                          const std::function<Dim(const std::vector<Dim>&)>& f);

// Dims arithmetic with the integer semantics of ONNX ops (truncating Div, Python-style or C-style
// Mod); unknown when not decidable. Symbolic operands are assumed non-negative (they are sizes).
Dim dim_div(const Dim& a, const Dim& b);
Dim dim_mod(const Dim& a, const Dim& b, bool fmod);
Dim dim_max(const Dim& a, const Dim& b);
Dim dim_min(const Dim& a, const Dim& b);
// Compares two dims: -1/0/1 for a<b, a==b, a>b when decidable, nullopt otherwise.
std::optional<int> dim_compare(const Dim& a, const Dim& b);
// Wraps a static dim to the value range of integer dtype `dt` (Cast between integer types).
Dim dim_wrap_to(const Dim& d, DType dt);

}  // namespace ferrite
