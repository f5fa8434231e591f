// The ONNX float8 storage types: conversions checked exhaustively against a brute-force
// nearest-value oracle, the Cast table's saturate / NaN / inf rules, and the paths that carry
// float8 tensors (TensorProto import, comparison, Cast/CastLike/IsNaN models).
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "frontend/onnx/tensor_proto.h"
#include "runtime/compare.h"
#include "test_util.h"

namespace ferrite::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Independent description of each format, written from the ONNX float8 spec.
struct Format {
  Float8Kind kind;
  DType dtype;
  int onnx;
  int exp_bits, man_bits, bias;
  bool fnuz, has_inf;
  float max;
};
const Format kFormats[] = {
    {Float8Kind::kE4M3FN, DType::kF8E4M3FN, 17, 4, 3, 7, false, false, 448.0f},
    {Float8Kind::kE4M3FNUZ, DType::kF8E4M3FNUZ, 18, 4, 3, 8, true, false, 240.0f},
    {Float8Kind::kE5M2, DType::kF8E5M2, 19, 5, 2, 15, false, true, 57344.0f},
    {Float8Kind::kE5M2FNUZ, DType::kF8E5M2FNUZ, 20, 5, 2, 16, true, false, 57344.0f},
};

std::string name_of(const Format& f) {
  return std::string(dtype_name(f.dtype));
}

// The value of a bit pattern by the textbook formula; nullopt-like NaN for NaN patterns.
double reference_value(const Format& f, int bits) {
  int sign = bits >> 7, mag = bits & 0x7F;
  int field = mag >> f.man_bits, frac = mag & ((1 << f.man_bits) - 1);
  int max_field = (1 << f.exp_bits) - 1;
  if (f.fnuz && bits == 0x80) return NAN;
  if (!f.fnuz && f.has_inf && field == max_field) return frac ? NAN : (sign ? -INFINITY : INFINITY);
  if (!f.fnuz && !f.has_inf && mag == 0x7F) return NAN;
  double v = field == 0 ? std::ldexp(frac, 1 - f.bias - f.man_bits)
                        : std::ldexp(frac + (1 << f.man_bits), field - f.bias - f.man_bits);
  return sign ? -v : v;
}

int nan_bits(const Format& f, bool negative) {
  return f.fnuz ? 0x80 : (negative ? 0xFF : 0x7F);
}

// Brute force: the nearest finite pattern, ties to the even pattern, then the Cast table's
// overflow rule applied to the value rounded as if the exponent range were unbounded.
int oracle(const Format& f, double x, bool saturate) {
  bool neg = std::signbit(x);
  int overflow = saturate
                     ? (neg ? 0x80 : 0) | (f.fnuz || f.has_inf ? (f.has_inf ? 0x7B : 0x7F) : 0x7E)
                     : (f.has_inf ? (neg ? 0xFC : 0x7C) : nan_bits(f, neg));
  if (std::isnan(x)) return nan_bits(f, neg);
  if (std::isinf(x)) return overflow;
  double a = std::fabs(x);
  // The top binade's ulp: max = 1.m * 2^e, ulp = 2^(e - man_bits).
  int e;
  std::frexp(static_cast<double>(f.max), &e);
  double ulp = std::ldexp(1.0, e - 1 - f.man_bits);
  double limit = f.max + ulp / 2;
  // Every format's max has an odd mantissa except E4M3FN's (1.75 = 1.110b).
  bool max_odd = f.kind != Float8Kind::kE4M3FN;
  if (a > limit || (a == limit && max_odd)) return overflow;
  int best = -1;
  double best_d = INFINITY;
  for (int b = 0; b < 0x80; ++b) {
    double v = reference_value(f, b);
    if (!std::isfinite(v)) continue;
    double d = std::fabs(v - a);
    if (d < best_d || (d == best_d && (b & 1) == 0)) {
      best = b;
      best_d = d;
    }
  }
  if (best == 0) return f.fnuz ? 0 : (neg ? 0x80 : 0);
  return (neg ? 0x80 : 0) | best;
}

template <class F>
void for_each_format(F&& f) {
  for (const Format& fmt : kFormats) {
    SCOPED_TRACE(name_of(fmt));
    f(fmt);
  }
}

int encode(const Format& f, double x, bool saturate = true) {
  return float8_from_double(f.kind, x, saturate);
}
float decode(const Format& f, int bits) {
  return float8_to_float(f.kind, static_cast<uint8_t>(bits));
}

TEST(Float8, DTypeTable) {
  for_each_format([](const Format& f) {
    EXPECT_EQ(dtype_size(f.dtype), 1u);
    EXPECT_EQ(dtype_from_onnx(f.onnx), f.dtype);
    EXPECT_EQ(dtype_to_onnx(f.dtype), f.onnx);
    EXPECT_EQ(dtype_from_name(dtype_name(f.dtype)), f.dtype);
    EXPECT_TRUE(is_float8(f.dtype));
    EXPECT_FALSE(is_float(f.dtype));
    EXPECT_FALSE(is_integer(f.dtype));
    EXPECT_FALSE(dtypes::kAll.contains(f.dtype));
    EXPECT_TRUE(dtypes::kAllWithFloat8.contains(f.dtype));
    // Not visited by the generic visitor, so generic kernels never see float8.
    EXPECT_FALSE(visit_dtype(f.dtype, []<class T>() {}));
    bool seen = false;
    EXPECT_TRUE(visit_float8(f.dtype, [&]<class T>() { seen = dtype_of<T>::value == f.dtype; }));
    EXPECT_TRUE(seen);
  });
  EXPECT_EQ(dtype_name(DType::kF8E4M3FN), "f8e4m3fn");
  EXPECT_EQ(dtype_name(DType::kF8E4M3FNUZ), "f8e4m3fnuz");
  EXPECT_EQ(dtype_name(DType::kF8E5M2), "f8e5m2");
  EXPECT_EQ(dtype_name(DType::kF8E5M2FNUZ), "f8e5m2fnuz");
  EXPECT_FALSE(is_float8(DType::kF16));
  EXPECT_FALSE(visit_float8(DType::kF32, []<class T>() {}));
}

TEST(Float8, DecodeMatchesFormulaForAllPatterns) {
  for_each_format([](const Format& f) {
    for (int b = 0; b < 256; ++b) {
      double want = reference_value(f, b);
      float got = decode(f, b);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << b;
      } else {
        EXPECT_EQ(static_cast<double>(got), want) << b;
        EXPECT_EQ(std::signbit(got), std::signbit(want)) << b;
      }
    }
  });
}

TEST(Float8, RoundTripAllPatterns) {
  for_each_format([](const Format& f) {
    for (int b = 0; b < 256; ++b) {
      float v = decode(f, b);
      for (bool sat : {true, false}) {
        int back = encode(f, v, sat);
        if (std::isnan(v)) {
          EXPECT_EQ(back, nan_bits(f, std::signbit(v))) << b;
        } else if (std::isinf(v)) {
          EXPECT_EQ(back, sat ? (b & 0x80) | 0x7B : b) << b;  // saturation clamps inf to max
        } else {
          EXPECT_EQ(back, b) << b << " sat " << sat;
        }
      }
      // Through the storage struct as well.
      visit_float8(f.dtype, [&]<class T>() {
        T x = T::from_bits(static_cast<uint8_t>(b));
        float fv = static_cast<float>(x);
        if (std::isfinite(fv)) {
          EXPECT_EQ(T(fv).bits, b);
        }
      });
    }
  });
}

// Every f16 value (all binades and all rounding situations of a 5-bit exponent), plus each
// midpoint between neighbouring float8 values and the floats just around it.
std::vector<double> probe_values(const Format& f) {
  std::vector<double> xs;
  for (int h = 0; h < 0x10000; ++h) {
    Half v;
    v.bits = static_cast<uint16_t>(h);
    xs.push_back(static_cast<float>(v));
  }
  std::vector<double> mags;
  for (int b = 0; b < 0x80; ++b)
    if (std::isfinite(reference_value(f, b))) mags.push_back(reference_value(f, b));
  double top = f.max * 2;  // past the overflow boundary
  mags.push_back(top);
  for (size_t i = 0; i + 1 < mags.size(); ++i) {
    float mid = static_cast<float>((mags[i] + mags[i + 1]) / 2);
    for (float m : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf)}) {
      xs.push_back(m);
      xs.push_back(-m);
    }
  }
  // Around the top: max, the next "virtual" value and the midpoint between them.
  for (double m : {double(f.max), f.max * 1.03, f.max * 1.0625, f.max * 1.07, f.max * 1.125,
                   f.max * 1.2, 1e6, 1e30, 3e38}) {
    xs.push_back(m);
    xs.push_back(-m);
  }
  for (double m : {1e-30, 1e-7, 1e-45}) {
    xs.push_back(m);
    xs.push_back(-m);
  }
  return xs;
}

TEST(Float8, EncodeMatchesBruteForceOracle) {
  for_each_format([](const Format& f) {
    int mismatches = 0;
    for (double x : probe_values(f)) {
      for (bool sat : {true, false}) {
        int want = oracle(f, x, sat), got = encode(f, x, sat);
        bool ok = want == got || (std::isnan(decode(f, want)) && std::isnan(decode(f, got)));
        if (!ok && ++mismatches <= 10)
          ADD_FAILURE() << "x=" << x << " saturate=" << sat << ": got 0x" << std::hex << got
                        << ", want 0x" << want;
      }
    }
    EXPECT_EQ(mismatches, 0);
  });
}

TEST(Float8, KnownValues) {
  const Format &e4 = kFormats[0], &e4uz = kFormats[1], &e5 = kFormats[2], &e5uz = kFormats[3];
  // Largest finite values.
  EXPECT_EQ(encode(e4, 448), 0x7E);
  EXPECT_EQ(encode(e4uz, 240), 0x7F);
  EXPECT_EQ(encode(e5, 57344), 0x7B);
  EXPECT_EQ(encode(e5uz, 57344), 0x7F);
  // Smallest subnormals and one.
  EXPECT_EQ(decode(e4, 0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(decode(e4uz, 0x01), std::ldexp(1.0f, -10));
  EXPECT_EQ(decode(e5, 0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(decode(e5uz, 0x01), std::ldexp(1.0f, -17));
  EXPECT_EQ(encode(e4, 1.0), 0x38);
  EXPECT_EQ(encode(e4uz, 1.0), 0x40);
  EXPECT_EQ(encode(e5, 1.0), 0x3C);
  EXPECT_EQ(encode(e5uz, 1.0), 0x40);
  // The ONNX node test data: 0.47892547 -> 0x2F in E4M3FN, 0x37 in E4M3FNUZ.
  EXPECT_EQ(encode(e4, 0.47892547f), 47);
  EXPECT_EQ(encode(e4uz, 0.47892547f), 55);
  EXPECT_EQ(encode(e5, 0.47892547f), 56);
  EXPECT_EQ(encode(e5uz, 0.47892547f), 60);
}

TEST(Float8, RoundingTiesToEven) {
  const Format &e4 = kFormats[0], &e5 = kFormats[2];
  // E4M3FN around 1: neighbours 1 (0x38), 1.125 (0x39), 1.25 (0x3A).
  EXPECT_EQ(encode(e4, 1.0625), 0x38);                       // tie, down to even
  EXPECT_EQ(encode(e4, 1.1875), 0x3A);                       // tie, up to even
  EXPECT_EQ(encode(e4, std::nextafter(1.0625, 2.0)), 0x39);  // just above the tie
  EXPECT_EQ(encode(e4, std::nextafter(1.1875, 0.0)), 0x39);  // just below the tie
  // Subnormal ties: half the smallest subnormal goes to 0, 1.5 of it to 2 units.
  EXPECT_EQ(encode(e4, std::ldexp(1.0, -10)), 0x00);
  EXPECT_EQ(encode(e4, -std::ldexp(1.0, -10)), 0x80);
  EXPECT_EQ(encode(e4, 3 * std::ldexp(1.0, -10)), 0x02);
  EXPECT_EQ(encode(e4, std::nextafter(std::ldexp(1.0, -10), 1.0)), 0x01);
  // Rounding up out of the subnormals into the smallest normal (0x08 = 2^-6).
  EXPECT_EQ(encode(e4, std::ldexp(15.0, -10)), 0x08);
  // Rounding carries into the next binade: 1.9375 is the tie between 1.875 (odd) and 2.
  EXPECT_EQ(encode(e4, 1.9375), 0x40);
  // E5M2: 1.125 ties between 1 (0x3C) and 1.25 (0x3D).
  EXPECT_EQ(encode(e5, 1.125), 0x3C);
  EXPECT_EQ(encode(e5, 1.375), 0x3E);
  // A double just above a tie rounds up; through float the excess would be lost (no double
  // rounding for f64 sources).
  double above = 1.0625 + std::ldexp(1.0, -40);
  EXPECT_EQ(encode(e4, above), 0x39);
  EXPECT_EQ(encode(e4, static_cast<float>(above)), 0x38);
}

TEST(Float8, SaturateAndOverflow) {
  const Format &e4 = kFormats[0], &e4uz = kFormats[1], &e5 = kFormats[2], &e5uz = kFormats[3];
  // Saturating (the Cast default): beyond max and +-inf clamp to +-max for every type.
  for (double x : {1e6, double(kInf), 1e300}) {
    EXPECT_EQ(encode(e4, x), 0x7E);
    EXPECT_EQ(encode(e4, -x), 0xFE);
    EXPECT_EQ(encode(e4uz, x), 0x7F);
    EXPECT_EQ(encode(e4uz, -x), 0xFF);
    EXPECT_EQ(encode(e5, x), 0x7B);
    EXPECT_EQ(encode(e5, -x), 0xFB);
    EXPECT_EQ(encode(e5uz, x), 0x7F);
    EXPECT_EQ(encode(e5uz, -x), 0xFF);
  }
  // Non-saturating: E5M2 overflows to +-inf, the others to NaN.
  for (double x : {1e6, double(kInf)}) {
    EXPECT_EQ(encode(e4, x, false), 0x7F);
    EXPECT_EQ(encode(e4, -x, false), 0xFF);
    EXPECT_EQ(encode(e4uz, x, false), 0x80);
    EXPECT_EQ(encode(e4uz, -x, false), 0x80);
    EXPECT_EQ(encode(e5, x, false), 0x7C);
    EXPECT_EQ(encode(e5, -x, false), 0xFC);
    EXPECT_EQ(encode(e5uz, x, false), 0x80);
    EXPECT_EQ(encode(e5uz, -x, false), 0x80);
  }
  // Overflow is decided after rounding: E4M3FN max 448, next would be 480; the tie 464 rounds
  // to 448 (even), anything above it overflows.
  EXPECT_EQ(encode(e4, 464, false), 0x7E);
  EXPECT_EQ(encode(e4, 464.5, false), 0x7F);
  EXPECT_EQ(encode(e4, 464.5, true), 0x7E);
  // ONNX's reference and ONNX Runtime give 448 in [480, 496) (not RNE, and NaN just below);
  // ferrite follows the spec table.
  EXPECT_EQ(encode(e4, 490, false), 0x7F);
  // E4M3FNUZ: max 240 (odd), the tie 248 overflows.
  EXPECT_EQ(encode(e4uz, 247.9, false), 0x7F);
  EXPECT_EQ(encode(e4uz, 248, false), 0x80);
  // E5M2: max 57344 (odd), the tie 61440 overflows to inf.
  EXPECT_EQ(encode(e5, 61439, false), 0x7B);
  EXPECT_EQ(encode(e5, 61440, false), 0x7C);
  EXPECT_EQ(encode(e5, 61440, true), 0x7B);
  EXPECT_EQ(encode(e5, -62000, false), 0xFC);  // the ONNX reference gives NaN up to 65536
  EXPECT_EQ(encode(e5, 70000, false), 0x7C);
}

TEST(Float8, NaNInfAndZero) {
  const Format &e4 = kFormats[0], &e4uz = kFormats[1], &e5 = kFormats[2], &e5uz = kFormats[3];
  for (bool sat : {true, false}) {
    EXPECT_EQ(encode(e4, kNaN, sat), 0x7F);
    EXPECT_EQ(encode(e4, -kNaN, sat), 0xFF);
    EXPECT_EQ(encode(e5, kNaN, sat), 0x7F);
    EXPECT_EQ(encode(e4uz, kNaN, sat), 0x80);
    EXPECT_EQ(encode(e4uz, -kNaN, sat), 0x80);
    EXPECT_EQ(encode(e5uz, kNaN, sat), 0x80);
  }
  // NaN patterns.
  EXPECT_TRUE(std::isnan(decode(e4, 0x7F)));
  EXPECT_TRUE(std::isnan(decode(e4, 0xFF)));
  EXPECT_FALSE(std::isnan(decode(e4, 0x80)));  // -0
  EXPECT_TRUE(std::isnan(decode(e4uz, 0x80)));
  EXPECT_FALSE(std::isnan(decode(e4uz, 0xFF)));  // -240
  EXPECT_EQ(decode(e4uz, 0xFF), -240.0f);
  for (int b : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}) EXPECT_TRUE(std::isnan(decode(e5, b))) << b;
  EXPECT_TRUE(std::isnan(decode(e5uz, 0x80)));
  EXPECT_EQ(decode(e5uz, 0xFF), -57344.0f);
  // Infinity exists only in E5M2.
  EXPECT_EQ(decode(e5, 0x7C), kInf);
  EXPECT_EQ(decode(e5, 0xFC), -kInf);
  for (const Format* f : {&e4, &e4uz, &e5uz})
    for (int b = 0; b < 256; ++b) EXPECT_FALSE(std::isinf(decode(*f, b)));
  // Zeros: -0 exists in the FN / E5M2 types; FNUZ types have only +0 (0x80 is NaN).
  EXPECT_EQ(encode(e4, -0.0), 0x80);
  EXPECT_EQ(encode(e5, -0.0), 0x80);
  EXPECT_EQ(encode(e4uz, -0.0), 0x00);
  EXPECT_EQ(encode(e5uz, -0.0), 0x00);
  EXPECT_EQ(encode(e4, -1e-7), 0x80);  // underflow keeps the sign
  EXPECT_EQ(encode(e4uz, -1e-7), 0x00);
  EXPECT_EQ(encode(e5uz, -1e-9), 0x00);
  EXPECT_TRUE(std::signbit(decode(e4, 0x80)));
}

TEST(Float8, ConvertAndTensorAccess) {
  EXPECT_EQ(convert<Float8E4M3FN>(1.0f).bits, 0x38);
  EXPECT_EQ(convert<Float8E4M3FN>(1000.0).bits, 0x7E);  // saturates
  EXPECT_EQ(convert<Float8E5M2>(Half(2.0f)).bits, 0x40);
  EXPECT_EQ(convert<float>(Float8E5M2::from_bits(0x40)), 2.0f);
  EXPECT_EQ(convert<Float8E4M3FNUZ>(Float8E4M3FN::from_bits(0x38)).bits, 0x40);

  Tensor t = Tensor::zeros(DType::kF8E4M3FN, {4});
  auto* p = static_cast<uint8_t*>(t.raw());
  p[0] = 0x38;  // 1
  p[1] = 0xFE;  // -448
  p[2] = 0x7F;  // NaN
  p[3] = 0x3C;  // 1.5
  EXPECT_EQ(t.double_at(0), 1.0);
  EXPECT_EQ(t.double_at(1), -448.0);
  EXPECT_TRUE(std::isnan(t.double_at(2)));
  EXPECT_EQ(t.int_at(1), -448);
  EXPECT_EQ(t.int_at(2), 0);
  EXPECT_EQ(t.int_at(3), 1);
  EXPECT_EQ(t.data<Float8E4M3FN>()[3].bits, 0x3C);
}

TEST(Float8, TensorProtoImport) {
  onnx::TensorProto p;
  p.set_name("x");
  p.set_data_type(19);
  p.add_dims(3);
  for (int v : {0x3C, 0x7C, 0xFF}) p.add_int32_data(v);
  auto t = tensor_from_proto(p, {});
  ASSERT_TRUE(t) << t.status().message();
  EXPECT_EQ(t->dtype(), DType::kF8E5M2);
  EXPECT_EQ(t->double_at(0), 1.0);
  EXPECT_EQ(t->double_at(1), INFINITY);
  EXPECT_TRUE(std::isnan(t->double_at(2)));

  p.set_int32_data(1, 256);
  EXPECT_TRUE(failed_with(tensor_from_proto(p, {}), {"int32_data[1] = 256", "f8e5m2"}));
  p.clear_int32_data();
  EXPECT_TRUE(failed_with(tensor_from_proto(p, {}), {"has 0 values"}));

  p.set_data_type(18);
  p.set_raw_data(std::string("\x40\x80\x01", 3));
  t = tensor_from_proto(p, {});
  ASSERT_TRUE(t) << t.status().message();
  EXPECT_EQ(t->dtype(), DType::kF8E4M3FNUZ);
  EXPECT_EQ(t->double_at(0), 1.0);
  EXPECT_TRUE(std::isnan(t->double_at(1)));
  EXPECT_EQ(t->double_at(2), std::ldexp(1.0, -10));

  // Back out through raw_data and in again.
  onnx::TensorProto q;
  tensor_to_proto(*t, "y", &q);
  EXPECT_EQ(q.data_type(), 18);
  auto u = tensor_from_proto(q, {});
  ASSERT_TRUE(u);
  EXPECT_TRUE(compare_tensors(*u, *t, default_tolerance(DType::kF8E4M3FNUZ)).ok);
}

Tensor f8(DType dt, std::vector<uint8_t> bits) {
  Tensor t = Tensor::zeros(dt, {static_cast<int64_t>(bits.size())});
  std::memcpy(t.raw(), bits.data(), bits.size());
  return t;
}

TEST(Float8, CompareIsBitExactButNaNMatchesNaN) {
  const DType e5 = DType::kF8E5M2;
  auto tol = default_tolerance(e5);
  EXPECT_EQ(tol.atol, 0);
  EXPECT_EQ(tol.rtol, 0);
  EXPECT_TRUE(compare_tensors(f8(e5, {0x3C, 0x7C, 0x7D}), f8(e5, {0x3C, 0x7C, 0xFF}), tol).ok);
  auto r = compare_tensors(f8(e5, {0x3C, 0x00}), f8(e5, {0x3C, 0x80}), tol);  // +0 vs -0
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("bits 0x00, expected 0x80"), std::string::npos) << r.message;
  EXPECT_FALSE(compare_tensors(f8(e5, {0x3C}), f8(e5, {0x3D}), tol).ok);
  EXPECT_FALSE(compare_tensors(f8(e5, {0x7C}), f8(e5, {0x7B}), tol).ok);  // inf vs max
  // With a tolerance, values are compared numerically.
  EXPECT_TRUE(compare_tensors(f8(e5, {0x3C}), f8(e5, {0x3D}), {0, 0.3}).ok);
  EXPECT_FALSE(compare_tensors(f8(e5, {0x3C}), f8(DType::kF8E4M3FN, {0x38}), tol).ok);
}

// ---- ops on float8 through whole models ----

onnx::TensorProto* init_bits(ModelBuilder& m, const std::string& name, int type,
                             const std::vector<uint8_t>& bits) {
  return m.init_raw(name, type, {static_cast<int64_t>(bits.size())},
                    std::string(bits.begin(), bits.end()));
}

TEST(Float8Ops, CastHonoursSaturate) {
  for (int sat : {1, 0}) {
    ModelBuilder m(21);
    m.input("x", kOnnxFloat, {4});
    m.output("y", 17);
    auto* n = m.node("Cast", {"x"}, {"y"});
    add_int_attr(n, "to", 17);
    add_int_attr(n, "saturate", sat);
    auto out =
        run_model(m.bytes(), {{"x", Tensor::from_vector<float>({1.0f, 1e6f, -kInf, -0.0f}, {4})}});
    ASSERT_TRUE(out) << out.status().message();
    ASSERT_EQ((*out)[0].dtype(), DType::kF8E4M3FN);
    std::vector<uint8_t> want = sat ? std::vector<uint8_t>{0x38, 0x7E, 0xFE, 0x80}
                                    : std::vector<uint8_t>{0x38, 0x7F, 0xFF, 0x80};
    auto* got = static_cast<const uint8_t*>((*out)[0].raw());
    EXPECT_EQ(std::vector<uint8_t>(got, got + 4), want) << "saturate " << sat;
  }
}

TEST(Float8Ops, CastFromFloat8ToEveryType) {
  // E5M2 {1.5, -2, inf, NaN} to integers, bool, 16-bit floats and another float8.
  struct Case {
    int to;
    std::vector<double> want;
  };
  for (const Case& c :
       {Case{7, {1, -2, 9.2233720368547758e18, 0}}, Case{2, {1, 0, 255, 0}}, Case{9, {1, 1, 1, 1}},
        Case{10, {1.5, -2, INFINITY, NAN}}, Case{16, {1.5, -2, INFINITY, NAN}},
        Case{11, {1.5, -2, INFINITY, NAN}}, Case{17, {1.5, -2, 448, NAN}}}) {
    SCOPED_TRACE(c.to);
    ModelBuilder m(21);
    init_bits(m, "x", 19, {0x3E, 0xC0, 0x7C, 0x7F});
    m.output("y", c.to);
    add_int_attr(m.node("Cast", {"x"}, {"y"}), "to", c.to);
    auto out = run_model(m.bytes(), {});
    ASSERT_TRUE(out) << out.status().message();
    const Tensor& y = (*out)[0];
    ASSERT_EQ(dtype_to_onnx(y.dtype()), c.to);
    for (int64_t i = 0; i < 4; ++i) {
      if (std::isnan(c.want[i]))
        EXPECT_TRUE(std::isnan(y.double_at(i))) << i;
      else if (y.dtype() == DType::kI64)
        EXPECT_EQ(y.int_at(i), i == 2 ? std::numeric_limits<int64_t>::max() : int64_t(c.want[i]));
      else
        EXPECT_EQ(y.double_at(i), c.want[i]) << i;
    }
  }
}

TEST(Float8Ops, CastLikeAndDataMovement) {
  ModelBuilder m(21);
  m.input("x", kOnnxDouble, {2, 2});
  init_bits(m, "like", 20, {0x00});
  auto* shape = m.graph()->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(kOnnxInt64);
  shape->add_dims(1);
  shape->add_int64_data(4);
  m.output("y", 20);
  m.output("nan", kOnnxBool);
  m.node("CastLike", {"x", "like"}, {"c"});
  m.node("Transpose", {"c"}, {"t"});
  m.node("Reshape", {"t", "shape"}, {"r"});
  m.node("Identity", {"r"}, {"y"});
  m.node("IsNaN", {"y"}, {"nan"});
  m.output("inf", kOnnxBool);
  m.node("IsInf", {"y"}, {"inf"});
  auto out =
      run_model(m.bytes(), {{"x", Tensor::from_vector<double>({1.0, 2.0, 1e9, 3.0}, {2, 2})}});
  ASSERT_TRUE(out) << out.status().message();
  const Tensor& y = (*out)[0];
  ASSERT_EQ(y.dtype(), DType::kF8E5M2FNUZ);
  EXPECT_EQ(y.double_at(0), 1.0);
  EXPECT_EQ(y.double_at(1), 57344.0);  // transposed: 1e9 saturated
  EXPECT_EQ(y.double_at(2), 2.0);
  EXPECT_EQ(y.double_at(3), 3.0);
  EXPECT_EQ(values_of<bool>((*out)[1]), (std::vector<bool>{false, false, false, false}));
  EXPECT_EQ(values_of<bool>((*out)[2]), (std::vector<bool>{false, false, false, false}));
}

void add_tensor_attr(onnx::NodeProto* n, const std::string& name, int type,
                     std::vector<int64_t> dims, std::vector<int> bits) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::TENSOR);
  auto* t = a->mutable_t();
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  for (int b : bits) t->add_int32_data(b);
}

TEST(Float8Ops, ConstantConstantOfShapeAndPad) {
  ModelBuilder m(21);
  auto* shape = m.graph()->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(kOnnxInt64);
  shape->add_dims(1);
  shape->add_int64_data(2);
  auto* pads = m.graph()->add_initializer();
  pads->set_name("pads");
  pads->set_data_type(kOnnxInt64);
  pads->add_dims(2);
  pads->add_int64_data(1);
  pads->add_int64_data(0);
  m.output("c", 17);
  m.output("f", 19);
  m.output("p", 17);
  add_tensor_attr(m.node("Constant", {}, {"c"}), "value", 17, {2}, {0x38, 0xFE});
  add_tensor_attr(m.node("ConstantOfShape", {"shape"}, {"f"}), "value", 19, {1}, {0x7C});
  m.node("Constant", {}, {"pv"});
  add_tensor_attr(m.graph()->mutable_node(2), "value", 17, {}, {0x7F});
  m.node("Pad", {"c", "pads", "pv"}, {"p"});
  auto out = run_model(m.bytes(), {});
  ASSERT_TRUE(out) << out.status().message();
  auto bits = [](const Tensor& t) {
    auto* p = static_cast<const uint8_t*>(t.raw());
    return std::vector<int>(p, p + t.numel());
  };
  EXPECT_EQ((*out)[0].dtype(), DType::kF8E4M3FN);
  EXPECT_EQ(bits((*out)[0]), (std::vector<int>{0x38, 0xFE}));
  EXPECT_EQ((*out)[1].dtype(), DType::kF8E5M2);
  EXPECT_EQ(bits((*out)[1]), (std::vector<int>{0x7C, 0x7C}));
  EXPECT_EQ(bits((*out)[2]), (std::vector<int>{0x7F, 0x38, 0xFE}));
}

TEST(Float8Ops, RefusedWhereTheSpecDoesNotAllowIt) {
  {  // float8 needs opset 19.
    ModelBuilder m(18);
    m.input("x", kOnnxFloat, {1});
    m.output("y", 17);
    add_int_attr(m.node("Cast", {"x"}, {"y"}), "to", 17);
    EXPECT_TRUE(failed_with(session_from(m.bytes()), {"opset 19"}));
  }
  {  // Concat does not take float8 up to opset 21.
    ModelBuilder m(21);
    init_bits(m, "a", 17, {0x38});
    m.output("y", 17);
    m.node("Concat", {"a", "a"}, {"y"});
    add_int_attr(m.graph()->mutable_node(0), "axis", 0);
    EXPECT_TRUE(failed_with(session_from(m.bytes()), {"f8e4m3fn"}));
  }
  {  // Nor EyeLike's dtype.
    ModelBuilder m(21);
    m.input("x", kOnnxFloat, {2, 2});
    m.output("y", 17);
    add_int_attr(m.node("EyeLike", {"x"}, {"y"}), "dtype", 17);
    EXPECT_TRUE(failed_with(session_from(m.bytes()), {"f8e4m3fn", "not allowed"}));
  }
  {  // Nor do arithmetic ops.
    ModelBuilder m(21);
    init_bits(m, "a", 19, {0x3C});
    m.output("y", 19);
    m.node("Add", {"a", "a"}, {"y"});
    EXPECT_TRUE(failed_with(session_from(m.bytes()), {"f8e5m2"}));
  }
}

}  // namespace
}  // namespace ferrite::testing
