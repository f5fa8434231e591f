// The host prelude's math (codegen/cpp_source.cpp): its vectorisable exp(float) against std::exp
// over every float, compiled exactly as the cpu device compiles kernels (host_compiler, the same
// flags), plus the loop over it vectorising.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>

#include "backends/cpu/host_compiler.h"
#include "codegen/cpp_source.h"

namespace ferrite {
namespace {

// Distance in units in the last place between two finite floats of the same sign (or both
// zero); large for anything else.
int64_t ulp_distance(float a, float b) {
  if (a == b) return 0;
  if (std::isnan(a) || std::isnan(b) || std::signbit(a) != std::signbit(b))
    return std::numeric_limits<int64_t>::max();
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::abs(static_cast<int64_t>(ia) - ib);
}

using ExpFn = void (*)(const float*, float*, int64_t);

const char* kSweep = R"(
extern "C" void fe_test_exp(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fe_m::exp(x[i]);
}
)";

TEST(HostMath, ExpIsWithinTwoUlpOfStdExpAcrossTheFloats) {
  auto mod = compile_and_load(std::string(host_prelude_source()) + kSweep, "host_math_test");
  ASSERT_TRUE(mod) << mod.status().message();
  auto fn = reinterpret_cast<ExpFn>(mod->module->symbol("fe_test_exp"));
  ASSERT_NE(fn, nullptr);
  // Every 7th float bit pattern (every exponent, both signs, subnormals, NaNs and infinities;
  // all 4 G take 30 s, which a full run once showed to agree: max 2 ulp), in blocks.
  constexpr int64_t kBlock = int64_t{1} << 20, kStride = 7;
  std::vector<float> x(kBlock), y(kBlock);
  int64_t worst = 0, nonfinite_mismatch = 0;
  float worst_x = 0;
  for (uint64_t base = 0; base < (uint64_t{1} << 32); base += kBlock * kStride) {
    for (int64_t i = 0; i < kBlock; ++i) {
      const uint32_t bits = static_cast<uint32_t>(base + i * kStride);
      std::memcpy(&x[i], &bits, 4);
    }
    fn(x.data(), y.data(), kBlock);
    for (int64_t i = 0; i < kBlock; ++i) {
      const float want = std::exp(x[i]);
      if (std::isnan(want) || std::isinf(want) || want == 0) {
        // NaN in, NaN out; overflow to inf and underflow to zero exactly as std::exp.
        if (!(std::isnan(want) ? std::isnan(y[i]) : y[i] == want)) ++nonfinite_mismatch;
        continue;
      }
      const int64_t d = ulp_distance(y[i], want);
      if (d > worst) {
        worst = d;
        worst_x = x[i];
      }
    }
  }
  EXPECT_EQ(nonfinite_mismatch, 0);
  EXPECT_LE(worst, 2) << "at x = " << worst_x;
  std::printf("exp(float): max %lld ulp from std::exp (at x = %.9g)\n",
              static_cast<long long>(worst), worst_x);
  RecordProperty("max_ulp", static_cast<int>(worst));
}

}  // namespace
}  // namespace ferrite
