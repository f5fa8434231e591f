#include "ir/dtype.h"

#include <cmath>

namespace ferrite {

namespace {
struct DTypeInfo {
  DType type;
  const char* name;
  size_t size;
  int onnx;
};
constexpr DTypeInfo kInfo[] = {
    {DType::kUndefined, "undefined", 0, 0}, {DType::kF32, "f32", 4, 1},
    {DType::kF16, "f16", 2, 10},            {DType::kBF16, "bf16", 2, 16},
    {DType::kF64, "f64", 8, 11},            {DType::kI8, "i8", 1, 3},
    {DType::kI16, "i16", 2, 5},             {DType::kI32, "i32", 4, 6},
    {DType::kI64, "i64", 8, 7},             {DType::kU8, "u8", 1, 2},
    {DType::kU16, "u16", 2, 4},             {DType::kU32, "u32", 4, 12},
    {DType::kU64, "u64", 8, 13},            {DType::kBool, "bool", 1, 9},
};
const DTypeInfo& info(DType t) { return kInfo[static_cast<size_t>(t)]; }
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }
std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.type != DType::kUndefined && name == i.name) return i.type;
  return std::nullopt;
}
bool is_float(DType t) { return dtypes::kFloat.contains(t); }
bool is_integer(DType t) { return dtypes::kInt.contains(t); }
bool is_signed(DType t) { return dtypes::kFloat.contains(t) || dtypes::kSignedInt.contains(t); }

std::optional<DType> dtype_from_onnx(int onnx_type) {
  for (const auto& i : kInfo)
    if (i.type != DType::kUndefined && i.onnx == onnx_type) return i.type;
  return std::nullopt;
}
int dtype_to_onnx(DType t) { return info(t).onnx; }

std::string DTypeSet::to_string() const {
  std::string s = "{";
  for (const auto& i : kInfo) {
    if (i.type == DType::kUndefined || !contains(i.type)) continue;
    if (s.size() > 1) s += ",";
    s += i.name;
  }
  return s + "}";
}

// Round-to-nearest-even conversions; NaN stays NaN.
Half::Half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t exp = (x >> 23) & 0xff;
  uint32_t man = x & 0x7fffff;
  if (exp == 0xff) {
    bits = static_cast<uint16_t>(sign | 0x7c00 | (man ? 0x200 : 0));
    return;
  }
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 0x1f) {
    bits = static_cast<uint16_t>(sign | 0x7c00);
    return;
  }
  if (e <= 0) {
    if (e < -10) {
      bits = static_cast<uint16_t>(sign);
      return;
    }
    man |= 0x800000;
    int shift = 14 - e;
    uint32_t half_man = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_man & 1))) half_man++;
    bits = static_cast<uint16_t>(sign | half_man);
    return;
  }
  uint32_t half_man = man >> 13;
  uint32_t rem = man & 0x1fff;
  uint32_t out = sign | (static_cast<uint32_t>(e) << 10) | half_man;
  if (rem > 0x1000 || (rem == 0x1000 && (out & 1))) out++;  // may carry into exponent: correct
  bits = static_cast<uint16_t>(out);
}

Half::operator float() const {
  uint32_t sign = (bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1f;
  uint32_t man = bits & 0x3ff;
  uint32_t out;
  if (exp == 0) {
    if (man == 0) {
      out = sign;
    } else {
      int e = -1;
      do {
        e++;
        man <<= 1;
      } while (!(man & 0x400));
      out = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 0x1f) {
    out = sign | 0x7f800000 | (man << 13);
  } else {
    out = sign | ((exp - 15 + 127) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

BFloat16::BFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) {
    bits = static_cast<uint16_t>((x >> 16) | 0x40);
    return;
  }
  uint32_t lsb = (x >> 16) & 1;
  x += 0x7fff + lsb;
  bits = static_cast<uint16_t>(x >> 16);
}

BFloat16::operator float() const {
  uint32_t x = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace ferrite
