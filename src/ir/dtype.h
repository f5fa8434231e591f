// Element types of tensors, with their ONNX enum mapping and C++ storage types.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

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
};

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // "f32", "i64", ...
std::optional<DType> dtype_from_name(std::string_view name);
bool is_float(DType t);     // f16, bf16, f32, f64
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

// The type reference kernels compute in: float for the 16-bit floats, T otherwise.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<Half> { using type = float; };
template <> struct compute_type<BFloat16> { using type = float; };
template <class T> using compute_t = typename compute_type<T>::type;

template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                                   std::is_same_v<T, BFloat16>;

// Converts between storage types through the compute types (saturation is the caller's job).
template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return static_cast<To>(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace ferrite
