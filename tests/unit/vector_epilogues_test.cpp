// The hand-vectorised epilogue loops (ops/vector_epilogues.h) against the scalar-function
// table's reference formula: every float class (zeros, subnormals, the exp overflow and
// underflow edges, infinities, NaN), every tail length of the 16-lane loop, with and without a
// residual. Results within 4 ulp of the reference (its exp is within 2 ulp of std::exp), special
// values exactly.
#include "ops/vector_epilogues.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/scalar_functions.h"

namespace ferrite {
namespace {

float reference_silu(float x) {
  const ScalarFunction* f = find_scalar_function("silu");
  const float a[2] = {x, 0.0f}, p[2] = {0.0f, 0.0f};
  return f->ref.f32(a, p);
}

void expect_close(float got, float want, float x) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << "silu(" << x << ") = " << got;
    return;
  }
  if (std::isinf(want) || want == 0.0f) {
    EXPECT_EQ(got, want) << "silu(" << x << ")";
    return;
  }
  // 4 ulp of the result, or of the smallest normal below it (subnormal results keep fewer bits).
  const float ulp = std::max(std::fabs(want), std::numeric_limits<float>::min()) *
                    std::numeric_limits<float>::epsilon();
  EXPECT_LE(std::fabs(got - want), 4 * ulp) << "silu(" << x << "): " << got << " vs " << want;
}

std::vector<float> sweep() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1e-30f,
                          -1e-30f,
                          1e-40f,
                          -1e-40f,
                          0.5f,
                          -0.5f,
                          1.0f,
                          -1.0f,
                          5.0f,
                          -5.0f,
                          20.0f,
                          -20.0f,
                          87.0f,
                          -87.0f,
                          88.72f,
                          -88.72f,
                          89.0f,
                          -89.0f,
                          103.0f,
                          -103.0f,
                          104.0f,
                          -104.0f,
                          120.0f,
                          -120.0f,
                          inf,
                          -inf,
                          std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max()};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-30.0f, 30.0f);
  for (int i = 0; i < 4000; ++i) v.push_back(u(rng));
  return v;
}

TEST(VectorEpilogues, SiluMatchesTheReferenceFormula) {
  if (!silu_epilogue_vectorised()) GTEST_SKIP() << "no AVX-512 on this CPU: the generic loop runs";
  const ScalarFunction* f = find_scalar_function("silu");
  ASSERT_NE(f, nullptr);
  const std::vector<float> x = sweep();
  std::vector<float> y = x;
  f->ref.f32_epilogue(y.data(), nullptr, static_cast<int64_t>(y.size()), nullptr);
  for (size_t i = 0; i < x.size(); ++i) expect_close(y[i], reference_silu(x[i]), x[i]);
}

TEST(VectorEpilogues, SiluTailsAndResidualsStayInTheirElements) {
  if (!silu_epilogue_vectorised()) GTEST_SKIP() << "no AVX-512 on this CPU: the generic loop runs";
  const ScalarFunction* f = find_scalar_function("silu");
  for (int64_t n = 0; n <= 40; ++n) {
    // Guard elements around the range must stay untouched (the tail is a masked store).
    std::vector<float> y(n + 2, 123.0f), r(n + 2, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      y[i + 1] = 0.25f * static_cast<float>(i) - 4.0f;
      r[i + 1] = 0.5f;
    }
    std::vector<float> x = y;
    f->ref.f32_epilogue(y.data() + 1, r.data() + 1, n, nullptr);
    EXPECT_EQ(y[0], 123.0f);
    EXPECT_EQ(y[n + 1], 123.0f);
    for (int64_t i = 0; i < n; ++i)
      expect_close(y[i + 1], reference_silu(x[i + 1] + 0.5f), x[i + 1] + 0.5f);
  }
}

}  // namespace
}  // namespace ferrite
