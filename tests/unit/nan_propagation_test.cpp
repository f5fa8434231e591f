// NaN through the cpu device's fused library kernels: Conv+Relu, Conv+Clip and MatMul+Add+Relu
// (fused by the default passes into ferrite.FusedConv / FusedMatMul) give NaN exactly where the
// reference device does. oneDNN's JIT relu and clip post-ops compute max(x, 0) / min / max, which
// turn NaN into the bound, so those activations must not run as post-ops.
#include <cmath>
#include <random>

#include "runtime/compare.h"
#include "test_util.h"

namespace ferrite::testing {
namespace {

// Uniform in [-1, 1) with NaN at every `stride`-th element, the first one included.
Tensor input_with_nans(const std::vector<int64_t>& dims, int seed, int64_t stride) {
  Tensor t = Tensor::zeros(DType::kF32, dims);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = u(rng);
  for (int64_t i = 0; i < t.numel(); i += stride) p[i] = std::nanf("");
  return t;
}

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * (static_cast<float>(i % 11) - 5.f);
  return v;
}

// Runs `model` on `device` with the device's default passes.
Tensor run_on(const std::string& model, const std::string& device, const std::string& input,
              const Tensor& x) {
  auto g = import_bytes(model);
  EXPECT_TRUE(g) << g.status().message();
  if (!g) return Tensor();
  auto s = Session::from_graph(std::move(g).value(), device);
  EXPECT_TRUE(s) << s.status().message();
  if (!s) return Tensor();
  auto out = (*s)->run({{input, x.clone()}});
  EXPECT_TRUE(out) << out.status().message();
  return out ? std::move((*out)[0]) : Tensor();
}

void expect_same_nans(const std::string& model, const std::string& input, const Tensor& x) {
  Tensor ref = run_on(model, "reference", input, x);
  Tensor cpu = run_on(model, "cpu", input, x);
  ASSERT_EQ(ref.dims(), cpu.dims());
  int64_t nans = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) nans += std::isnan(ref.data<float>()[i]);
  EXPECT_GT(nans, 0) << "the test needs NaN in the reference output";
  EXPECT_LT(nans, ref.numel()) << "and numbers";
  CompareResult c = compare_tensors(cpu, ref, {1e-4, 1e-4});
  EXPECT_TRUE(c.ok) << c.message;
}

std::string conv_model(const std::string& activation) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {1, 4, 9, 9});
  b.init_f32("w", {8, 4, 3, 3}, ramp(8 * 4 * 9, 0.05f));
  b.init_f32("b", {8}, ramp(8, 0.1f));
  b.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  if (activation == "Clip") {
    b.init_f32("lo", {}, {0.f});
    b.init_f32("hi", {}, {6.f});
    b.node("Clip", {"c", "lo", "hi"}, {"y"}, "act");
  } else {
    b.node(activation, {"c"}, {"y"}, "act");
  }
  b.output("y");
  return b.bytes();
}

TEST(NanPropagation, ConvReluOnCpu) {
  expect_same_nans(conv_model("Relu"), "x", input_with_nans({1, 4, 9, 9}, 1, 97));
}

TEST(NanPropagation, ConvClipOnCpu) {
  expect_same_nans(conv_model("Clip"), "x", input_with_nans({1, 4, 9, 9}, 2, 97));
}

TEST(NanPropagation, MatMulAddReluOnCpu) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {16, 32});
  b.init_f32("w", {32, 24}, ramp(32 * 24, 0.03f));
  b.init_f32("bias", {24}, ramp(24, 0.1f));
  b.node("MatMul", {"x", "w"}, {"m"}, "matmul");
  b.node("Add", {"m", "bias"}, {"a"}, "add");
  b.node("Relu", {"a"}, {"y"}, "relu");
  b.output("y");
  // NaN in whole rows only, so that other rows stay numbers.
  Tensor x = input_with_nans({16, 32}, 3, 7);
  float* p = x.data<float>();
  for (int64_t r = 0; r < 16; ++r)
    for (int64_t c = 0; c < 32; ++c)
      if (std::isnan(p[r * 32 + c]) && r % 2) p[r * 32 + c] = 0.25f;
  expect_same_nans(b.bytes(), "x", x);
}

// Neg keeps IEEE signed zeros on every device: -(+0) is -0, so 3 / -x is -inf at x = +0 (the
// reference computed 0 - x, giving +0 and +inf; found by the cpu_differential fuzz target).
TEST(SpecialValues, NegOfZeroIsNegativeZero) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {4});
  b.init_f32("three", {}, {3.f});
  b.node("Neg", {"x"}, {"n"}, "neg");
  b.node("Div", {"three", "n"}, {"y"}, "div");
  b.output("y");
  Tensor x = Tensor::zeros(DType::kF32, {4});
  float* p = x.data<float>();
  p[1] = -0.f, p[2] = 1.f, p[3] = -2.f;
  const float want[] = {-INFINITY, INFINITY, -3.f, 1.5f};
  for (const char* device : {"reference", "cpu"}) {
    Tensor y = run_on(b.bytes(), device, "x", x);
    ASSERT_EQ(y.numel(), 4) << device;
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(y.data<float>()[i], want[i]) << device << " element " << i;
  }
}

// LayerNormalization without B keeps the sign of a zero: a constant row normalizes to +0, times
// a negative scale -0, so Reciprocal gives -inf there (the reference added a zero bias and gave
// +inf; found by the cpu_differential fuzz target).
TEST(SpecialValues, LayerNormWithoutBiasKeepsNegativeZero) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {2, 4});
  b.init_f32("scale", {4}, {1.f, -1.f, 2.f, -2.f});
  b.node("LayerNormalization", {"x", "scale"}, {"n"}, "ln");
  b.node("Reciprocal", {"n"}, {"y"}, "recip");
  b.output("y");
  Tensor x = Tensor::zeros(DType::kF32, {2, 4});
  float* p = x.data<float>();
  for (int i = 0; i < 4; ++i) p[i] = 2.f, p[4 + i] = static_cast<float>(i);
  const float want[] = {INFINITY, -INFINITY, INFINITY, -INFINITY};
  for (const char* device : {"reference", "cpu"}) {
    Tensor y = run_on(b.bytes(), device, "x", x);
    ASSERT_EQ(y.numel(), 8) << device;
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(y.data<float>()[i], want[i]) << device << " element " << i;
    for (int i = 4; i < 8; ++i) EXPECT_TRUE(std::isfinite(y.data<float>()[i])) << device;
  }
}

}  // namespace
}  // namespace ferrite::testing
