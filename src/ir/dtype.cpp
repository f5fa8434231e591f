#include "ir/dtype.h"

#include <array>
#include <cmath>
#include <iterator>
#include <limits>

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
    {DType::kF8E4M3FN, "f8e4m3fn", 1, 17},  {DType::kF8E4M3FNUZ, "f8e4m3fnuz", 1, 18},
    {DType::kF8E5M2, "f8e5m2", 1, 19},      {DType::kF8E5M2FNUZ, "f8e5m2fnuz", 1, 20},
};
static_assert(std::size(kInfo) == static_cast<size_t>(DType::kF8E5M2FNUZ) + 1);
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
bool is_float8(DType t) { return dtypes::kFloat8.contains(t); }
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

// ---- float8 ----

namespace {
struct Float8Spec {
  int man_bits;
  int bias;
  bool fnuz;         // no -0, no inf, 0x80 is the only NaN
  bool has_inf;      // E5M2: exponent field all ones is inf (mantissa 0) or NaN
  uint32_t max_mag;  // bits of the largest finite magnitude
};
constexpr Float8Spec kFloat8Specs[] = {
    {3, 7, false, false, 0x7E},  // E4M3FN: 0x7F is NaN
    {3, 8, true, false, 0x7F},   // E4M3FNUZ
    {2, 15, false, true, 0x7B},  // E5M2: 0x7C is inf
    {2, 16, true, false, 0x7F},  // E5M2FNUZ
};
const Float8Spec& spec_of(Float8Kind k) { return kFloat8Specs[static_cast<size_t>(k)]; }

float decode_float8(const Float8Spec& s, uint8_t bits) {
  bool neg = bits & 0x80;
  uint32_t mag = bits & 0x7F;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if (s.fnuz) {
    if (bits == 0x80) return nan;
  } else if (s.has_inf) {
    if ((mag >> s.man_bits) == 0x1F) {
      float v = mag == 0x7C ? std::numeric_limits<float>::infinity() : nan;
      return std::copysign(v, neg ? -1.0f : 1.0f);
    }
  } else if (mag == 0x7F) {
    return std::copysign(nan, neg ? -1.0f : 1.0f);
  }
  uint32_t field = mag >> s.man_bits;
  uint32_t frac = mag & ((1u << s.man_bits) - 1);
  // Subnormals have an implicit 0 and the exponent of field 1.
  float v = field == 0 ? std::ldexp(static_cast<float>(frac), 1 - s.bias - s.man_bits)
                       : std::ldexp(static_cast<float>(frac | (1u << s.man_bits)),
                                    static_cast<int>(field) - s.bias - s.man_bits);
  return neg ? -v : v;
}

using Float8Table = std::array<float, 256>;
Float8Table make_table(Float8Kind k) {
  Float8Table t;
  for (int b = 0; b < 256; ++b) t[b] = decode_float8(spec_of(k), static_cast<uint8_t>(b));
  return t;
}
}  // namespace

uint8_t float8_from_double(Float8Kind k, double v, bool saturate) {
  const Float8Spec& s = spec_of(k);
  const uint32_t sign = std::signbit(v) ? 0x80 : 0;
  const uint8_t nan = s.fnuz ? 0x80 : static_cast<uint8_t>(sign | 0x7F);
  // The Cast table (opset 19+): a value whose rounding exceeds max clamps to +-max when
  // saturating; otherwise E5M2 overflows to +-inf and the rest to NaN. +-inf saturates to +-max
  // for every type: the table says NaN for the FNUZ types, but ONNX's reference, ONNX Runtime
  // and the node test data all give +-max. Where the reference contradicts the table we follow
  // the table: without saturation it gives +-448 for E4M3FN |x| in [480, 496) and NaN for E5M2
  // |x| in [61440, 65536) (NaN and +-inf here, consistent with the values around them).
  auto overflow = [&]() -> uint8_t {
    if (saturate) return static_cast<uint8_t>(sign | s.max_mag);
    if (s.has_inf) return static_cast<uint8_t>(sign | 0x7C);
    return nan;
  };
  if (std::isnan(v)) return nan;
  if (std::isinf(v)) return overflow();
  const uint8_t zero = s.fnuz ? 0 : static_cast<uint8_t>(sign);
  double a = std::fabs(v);
  if (a == 0) return zero;
  int e2;
  std::frexp(a, &e2);
  const int exp = e2 - 1;  // a = 1.f * 2^exp
  const int min_exp = 1 - s.bias;
  // Scale so that one unit in the last place of the target is 1; q < 2^(man_bits + 1), exact.
  const int ulp_exp = std::max(exp, min_exp) - s.man_bits;
  double q = std::ldexp(a, -ulp_exp);
  double r = std::floor(q);
  double rem = q - r;
  if (rem > 0.5 || (rem == 0.5 && std::fmod(r, 2.0) != 0)) r += 1;
  auto m = static_cast<uint32_t>(r);
  if (m == 0) return zero;
  uint32_t mag;
  if (exp < min_exp) {
    mag = m;  // subnormal; m == 2^man_bits rounds up to the smallest normal, the same bits
  } else {
    int e = exp;
    if (m == (2u << s.man_bits)) {  // rounding carried into the next binade
      m >>= 1;
      ++e;
    }
    int field = e + s.bias;
    if (field > 0x7F >> s.man_bits) return overflow();
    mag = (static_cast<uint32_t>(field) << s.man_bits) | (m & ((1u << s.man_bits) - 1));
  }
  if (mag > s.max_mag) return overflow();
  return static_cast<uint8_t>(sign | mag);
}

float float8_to_float(Float8Kind k, uint8_t bits) {
  static const Float8Table tables[] = {
      make_table(Float8Kind::kE4M3FN), make_table(Float8Kind::kE4M3FNUZ),
      make_table(Float8Kind::kE5M2), make_table(Float8Kind::kE5M2FNUZ)};
  return tables[static_cast<size_t>(k)][bits];
}

}  // namespace ferrite
