// Element types of tensors, with their ONNX enum mapping and C++ storage types.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace ferrite {

enum class DType : uint8_t {
  kUndefined = 0,
  kF32,
  kF16,
  kBF16,
  kF64,
  kI8,
  kI16,
  kI32,
  kI64,
  kU8,
  kU16,
  kU32,
  kU64,
  kBool,
  // ONNX float8 storage types (opset 19+). They are not visited by visit_dtype: only ops that
  // move bytes, Cast/CastLike and IsNaN/IsInf handle them (see visit_float8).
  kF8E4M3FN,
  kF8E4M3FNUZ,
  kF8E5M2,
  kF8E5M2FNUZ,
};

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // "f32", "i64", ...
std::optional<DType> dtype_from_name(std::string_view name);
bool is_float(DType t);     // f16, bf16, f32, f64 (not the float8 types)
bool is_float8(DType t);    // f8e4m3fn, f8e4m3fnuz, f8e5m2, f8e5m2fnuz
bool is_integer(DType t);   // signed or unsigned integers (not bool)
bool is_signed(DType t);    // signed integers and floats
// ONNX TensorProto.DataType enum values.
std::optional<DType> dtype_from_onnx(int onnx_type);
int dtype_to_onnx(DType t);

// IEEE half and bfloat16 storage types; arithmetic happens in float.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float f);
  operator float() const;
};
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f);
  operator float() const;
};

// ONNX float8 formats: 1 sign bit, E exponent bits, M mantissa bits.
//   E4M3FN   bias 7,  max 448,   no inf, NaN = S.1111.111 (0x7F/0xFF), has -0
//   E4M3FNUZ bias 8,  max 240,   no inf, no -0, NaN = 0x80 only
//   E5M2     bias 15, max 57344, +-inf = S.11111.00, NaN = S.11111.{01,10,11}, has -0
//   E5M2FNUZ bias 16, max 57344, no inf, no -0, NaN = 0x80 only
enum class Float8Kind : uint8_t { kE4M3FN, kE4M3FNUZ, kE5M2, kE5M2FNUZ };
// Rounds v to the nearest representable value, ties to even (exact from double: no double
// rounding for f64 inputs). Out of range (after rounding) and +-inf give +-max when `saturate`
// (the ONNX Cast default), otherwise +-inf for E5M2 and NaN for the others. NaN gives the
// canonical NaN (0x7F|sign for E4M3FN/E5M2, 0x80 for FNUZ); FNUZ types turn -0 into +0.
uint8_t float8_from_double(Float8Kind k, double v, bool saturate);
// Exact; NaN keeps the sign bit where the format has one.
float float8_to_float(Float8Kind k, uint8_t bits);

template <Float8Kind K>
struct Float8 {
  static constexpr Float8Kind kind = K;
  uint8_t bits = 0;
  Float8() = default;
  explicit Float8(float f, bool saturate = true) : bits(float8_from_double(K, f, saturate)) {}
  explicit Float8(double d, bool saturate = true) : bits(float8_from_double(K, d, saturate)) {}
  static Float8 from_bits(uint8_t b) {
    Float8 x;
    x.bits = b;
    return x;
  }
  // Explicit, unlike Half: float8 values must not silently join arithmetic.
  explicit operator float() const { return float8_to_float(K, bits); }
};
using Float8E4M3FN = Float8<Float8Kind::kE4M3FN>;
using Float8E4M3FNUZ = Float8<Float8Kind::kE4M3FNUZ>;
using Float8E5M2 = Float8<Float8Kind::kE5M2>;
using Float8E5M2FNUZ = Float8<Float8Kind::kE5M2FNUZ>;

// Set of dtypes, used by op type constraints.
class DTypeSet {
 public:
  constexpr DTypeSet() = default;
  constexpr DTypeSet(std::initializer_list<DType> types) {
    for (DType t : types) bits_ |= 1u << static_cast<unsigned>(t);
  }
  constexpr bool contains(DType t) const { return bits_ & (1u << static_cast<unsigned>(t)); }
  constexpr DTypeSet operator|(DTypeSet o) const {
    DTypeSet s;
    s.bits_ = bits_ | o.bits_;
    return s;
  }
  std::string to_string() const;

 private:
  uint32_t bits_ = 0;
};

namespace dtypes {
inline constexpr DTypeSet kFloat{DType::kF32, DType::kF16, DType::kBF16, DType::kF64};
inline constexpr DTypeSet kSignedInt{DType::kI8, DType::kI16, DType::kI32, DType::kI64};
inline constexpr DTypeSet kUnsignedInt{DType::kU8, DType::kU16, DType::kU32, DType::kU64};
inline constexpr DTypeSet kInt = kSignedInt | kUnsignedInt;
inline constexpr DTypeSet kNumeric = kFloat | kInt;
inline constexpr DTypeSet kBool{DType::kBool};
inline constexpr DTypeSet kAll = kNumeric | kBool;
inline constexpr DTypeSet kIndex{DType::kI32, DType::kI64};
inline constexpr DTypeSet kFloat8{DType::kF8E4M3FN, DType::kF8E4M3FNUZ, DType::kF8E5M2,
                                  DType::kF8E5M2FNUZ};
// kAll plus float8: for ops whose ONNX type constraints list the float8 types (opsets 19-21).
inline constexpr DTypeSet kAllWithFloat8 = kAll | kFloat8;
}  // namespace dtypes

// Calls f.template operator()<T>() with the C++ storage type of `t`.
// Returns false for kUndefined.
template <class F>
bool visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kF32: f.template operator()<float>(); return true;
    case DType::kF16: f.template operator()<Half>(); return true;
    case DType::kBF16: f.template operator()<BFloat16>(); return true;
    case DType::kF64: f.template operator()<double>(); return true;
    case DType::kI8: f.template operator()<int8_t>(); return true;
    case DType::kI16: f.template operator()<int16_t>(); return true;
    case DType::kI32: f.template operator()<int32_t>(); return true;
    case DType::kI64: f.template operator()<int64_t>(); return true;
    case DType::kU8: f.template operator()<uint8_t>(); return true;
    case DType::kU16: f.template operator()<uint16_t>(); return true;
    case DType::kU32: f.template operator()<uint32_t>(); return true;
    case DType::kU64: f.template operator()<uint64_t>(); return true;
    case DType::kBool: f.template operator()<bool>(); return true;
    default: return false;
  }
}

// Calls f.template operator()<T>() with the float8 storage type of `t`; false for other dtypes.
template <class F>
bool visit_float8(DType t, F&& f) {
  switch (t) {
    case DType::kF8E4M3FN: f.template operator()<Float8E4M3FN>(); return true;
    case DType::kF8E4M3FNUZ: f.template operator()<Float8E4M3FNUZ>(); return true;
    case DType::kF8E5M2: f.template operator()<Float8E5M2>(); return true;
    case DType::kF8E5M2FNUZ: f.template operator()<Float8E5M2FNUZ>(); return true;
    default: return false;
  }
}

// visit_dtype, then visit_float8: for code that must handle every storage type.
template <class F>
bool visit_any_dtype(DType t, F&& f) {
  return visit_dtype(t, f) || visit_float8(t, f);
}

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::kF32; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::kF16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::kBF16; };
template <> struct dtype_of<double> { static constexpr DType value = DType::kF64; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::kI8; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::kI16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::kI32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::kI64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::kU8; };
template <> struct dtype_of<uint16_t> { static constexpr DType value = DType::kU16; };
template <> struct dtype_of<uint32_t> { static constexpr DType value = DType::kU32; };
template <> struct dtype_of<uint64_t> { static constexpr DType value = DType::kU64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::kBool; };
template <> struct dtype_of<Float8E4M3FN> { static constexpr DType value = DType::kF8E4M3FN; };
template <> struct dtype_of<Float8E4M3FNUZ> { static constexpr DType value = DType::kF8E4M3FNUZ; };
template <> struct dtype_of<Float8E5M2> { static constexpr DType value = DType::kF8E5M2; };
template <> struct dtype_of<Float8E5M2FNUZ> { static constexpr DType value = DType::kF8E5M2FNUZ; };

template <class T> inline constexpr bool is_float8_v = false;
template <Float8Kind K> inline constexpr bool is_float8_v<Float8<K>> = true;

// The type reference kernels compute in: float for the 16- and 8-bit floats, T otherwise.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<Half> { using type = float; };
template <> struct compute_type<BFloat16> { using type = float; };
template <Float8Kind K> struct compute_type<Float8<K>> { using type = float; };
template <class T> using compute_t = typename compute_type<T>::type;

// Not true for float8: generic kernels are never instantiated with it.
template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                                   std::is_same_v<T, BFloat16>;

// Converts between storage types through the compute types (saturation is the caller's job,
// except that float8 targets saturate, the ONNX Cast default).
template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_float8_v<From>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (is_float8_v<To>) {
    return To(static_cast<double>(convert<compute_t<From>>(v)), true);
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return static_cast<To>(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace ferrite
