// Row kernels on the cpu device (softmax, layernorm, Reduce*, GlobalAveragePool with fused
// prologues and epilogues) against the reference device, on random inputs whose symbolic dims
// take several sizes under one compile. Each model must really lower to row kernels.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <cmath>
#include <limits>
#include <random>

#include "codegen/cpp_source.h"
#include "lower/lowering.h"
#include "test_util.h"

namespace ferrite {
namespace {

std::unique_ptr<Graph> parse(const std::string& text) {
  return ferrite::testing::parse_onnx_text(text);
}

Tensor random_tensor(DType dt, const std::vector<int64_t>& dims, std::mt19937& rng, double scale) {
  Tensor t = Tensor::zeros(dt, dims);
  std::uniform_real_distribution<double> u(-scale, scale);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::kF32)
      t.data<float>()[i] = static_cast<float>(u(rng));
    else
      t.data<double>()[i] = u(rng);
  }
  return t;
}

double at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kF32 ? t.data<float>()[i] : t.data<double>()[i];
}

struct Input {
  std::string name;
  DType dtype;
  std::vector<int64_t> dims;
  double scale = 3.0;
  // Element indices set to special values (NaN, infinities) after the random fill.
  std::vector<std::pair<int64_t, double>> special = {};
};

// Runs `text` on cpu and reference for every input set and compares all outputs.
void check_model(const std::string& text, int min_row_kernels,
                 const std::vector<std::vector<Input>>& runs, double tol = 2e-5) {
  auto g = parse(text);
  ASSERT_TRUE(g);
  auto lowered = lower_graph(*g);
  ASSERT_TRUE(lowered) << lowered.status().message();
  EXPECT_GE(lowered->row_kernels, min_row_kernels) << print_lowered(*lowered);
  auto cpu = Session::from_graph(parse(text), "cpu");
  ASSERT_TRUE(cpu) << cpu.status().message();
  auto ref = Session::from_graph(parse(text), "reference");
  ASSERT_TRUE(ref) << ref.status().message();
  std::mt19937 rng(1234);
  for (const auto& run : runs) {
    std::vector<Session::NamedInput> inputs;
    for (const Input& in : run) {
      Tensor t = random_tensor(in.dtype, in.dims, rng, in.scale);
      for (auto [i, v] : in.special) {
        if (in.dtype == DType::kF32)
          t.data<float>()[i] = static_cast<float>(v);
        else
          t.data<double>()[i] = v;
      }
      inputs.push_back({in.name, t});
    }
    auto want = (*ref)->run(inputs);
    ASSERT_TRUE(want) << want.status().message();
    auto got = (*cpu)->run(inputs);
    ASSERT_TRUE(got) << got.status().message();
    ASSERT_EQ(got->size(), want->size());
    for (size_t o = 0; o < got->size(); ++o) {
      const Tensor &a = (*got)[o], &b = (*want)[o];
      ASSERT_EQ(a.dtype(), b.dtype()) << "output " << o;
      ASSERT_EQ(a.dims(), b.dims()) << "output " << o;
      for (int64_t i = 0; i < a.numel(); ++i) {
        double x = at(a, i), y = at(b, i);
        if (std::isnan(y)) {
          ASSERT_TRUE(std::isnan(x)) << "output " << o << " element " << i << ": " << x;
          continue;
        }
        if (std::isinf(y)) {
          ASSERT_EQ(x, y) << "output " << o << " element " << i;
          continue;
        }
        ASSERT_NEAR(x, y, tol * (1 + std::fabs(y))) << "output " << o << " element " << i;
      }
    }
  }
}

TEST(RowKernels, SoftmaxFamilyWithPrologueAndEpilogue) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[b,s,n] x, float[b,1,n] m)
    => (float[b,s,n] y, float[b,s,n] z, float[b,s,n] w, float[b,s,n] v) {
  y = Softmax<axis = -1>(x)
  z = LogSoftmax<axis = 2>(x)
  a = Add(x, m)
  p = Softmax(a)
  three = Constant<value = float {3.0}>()
  w = Mul(p, three)
  h = Neg(x)
  q = Softmax(h)
  nan = IsNaN(q)
  zero = Constant<value = float {0.0}>()
  v = Where(nan, zero, q)
}
)";
  // Row 0 is all -inf (softmax gives NaN, which v turns into 0), row 1 holds a NaN.
  auto special = [](int64_t n) {
    std::vector<std::pair<int64_t, double>> s;
    for (int64_t i = 0; i < n; ++i) s.push_back({i, -INFINITY});
    s.push_back({n + 1, NAN});
    return s;
  };
  check_model(text, 4,
              {{{"x", DType::kF32, {2, 3, 17}, 20.0, special(17)}, {"m", DType::kF32, {2, 1, 17}}},
               {{"x", DType::kF32, {1, 5, 1}}, {"m", DType::kF32, {1, 1, 1}}},
               {{"x", DType::kF32, {3, 2, 300}, 50.0}, {"m", DType::kF32, {3, 1, 300}}}});
}

TEST(RowKernels, LayerNormWithResidualPrologue) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[b,s,h] x, float[b,s,h] r, float[h] gamma, float[h] beta, float[b,4,6] u, float[4,6] g2)
    => (float[b,s,h] y, float[b,4,6] v, float[b,s,h] y2) {
  a = Add(x, r)
  y = LayerNormalization<epsilon = 1e-5>(a, gamma, beta)
  v = LayerNormalization<axis = 1, epsilon = 1e-3>(u, g2)
  y2 = LayerNormalization<axis = -1>(x, gamma, beta)
}
)";
  check_model(text, 3,
              {{{"x", DType::kF32, {2, 3, 768}, 4.0},
                {"r", DType::kF32, {2, 3, 768}},
                {"gamma", DType::kF32, {768}},
                {"beta", DType::kF32, {768}},
                {"u", DType::kF32, {2, 4, 6}},
                {"g2", DType::kF32, {4, 6}}},
               {{"x", DType::kF32, {1, 1, 5}, 1e-3},
                {"r", DType::kF32, {1, 1, 5}, 1e-3},
                {"gamma", DType::kF32, {5}},
                {"beta", DType::kF32, {5}},
                {"u", DType::kF32, {1, 4, 6}},
                {"g2", DType::kF32, {4, 6}}}});
}

TEST(RowKernels, LayerNormDouble) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (double[b,h] x, double[h] gamma, double[h] beta) => (double[b,h] y) {
  y = LayerNormalization(x, gamma, beta)
}
)";
  check_model(
      text, 1,
      {{{"x", DType::kF64, {3, 129}}, {"gamma", DType::kF64, {129}}, {"beta", DType::kF64, {129}}}},
      1e-12);
}

TEST(RowKernels, ReductionsAxesAsInputs) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[b,c,h] x) => (float[b,c] s, float[b,1,h] m, float[] mx, float[c] mn, float[b,c,1] sq,
                       float[b,1,1] l2, float[b,c] l1, float[b,c,h] e) {
  last = Constant<value = int64[1] {-1}>()
  mid = Constant<value = int64[1] {1}>()
  ends = Constant<value = int64[2] {0, 2}>()
  two = Constant<value = int64[2] {-2, -1}>()
  t = Tanh(x)
  s = ReduceSum<keepdims = 0>(t, last)
  m = ReduceMean(x, mid)
  mx = ReduceMax<keepdims = 0>(x)
  mn = ReduceMin<keepdims = 0>(x, ends)
  sq = ReduceSumSquare(x, last)
  l2 = ReduceL2(x, two)
  l1 = ReduceL1<keepdims = 0>(x, last)
  big = ReduceMax(x, last)
  e = Sub(x, big)
}
)";
  check_model(text, 8,
              {{{"x", DType::kF32, {2, 3, 5}, 3.0, {{7, NAN}}}},
               {{"x", DType::kF32, {4, 7, 200}}},
               {{"x", DType::kF32, {1, 1, 1}}},
               {{"x", DType::kF32, {2, 3, 0}}},  // empty rows: 0, NaN, -inf, +inf
               {{"x", DType::kF32, {2, 0, 3}}}});
}

TEST(RowKernels, ReductionsAxesAsAttribute) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 13]>
g (double[b,c,h] x) => (double[b,c,1] m, double[b,h] mx, double[b,c,h] k) {
  m = ReduceMean<axes = [-1]>(x)
  mx = ReduceMax<axes = [1], keepdims = 0>(x)
  n = ReduceMin<axes = [2]>(x)
  k = Add(n, x)
}
)";
  check_model(text, 3, {{{"x", DType::kF64, {2, 3, 5}}}, {{"x", DType::kF64, {3, 8, 33}}}}, 1e-12);
}

TEST(RowKernels, GlobalAveragePool) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[n,c,h,w] x) => (float[n,c,1,1] y, float[n,c,1,1] z) {
  y = GlobalAveragePool(x)
  r = Relu(x)
  z = GlobalAveragePool(r)
}
)";
  check_model(text, 2,
              {{{"x", DType::kF32, {2, 3, 7, 7}}},
               {{"x", DType::kF32, {2, 3, 0, 7}}},  // an empty plane pools to 0
               {{"x", DType::kF32, {1, 16, 1, 1}}},
               {{"x", DType::kF32, {1, 2, 33, 65}}}});
}

// Means over the pixels of channels-last maps (the squeeze-excite and head means of CNNs on the
// cpu's NHWC chains) read columns: the host emits them with a block of channels side by side
// (codegen/row_analysis.h, column_reduce). Channel counts below, at and above the block of 256,
// a per-channel prologue, an epilogue, NaN, an empty map, one and two images.
TEST(RowKernels, ColumnMeansOverChannelsLastMaps) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[n,h,w,c] x, float[1,1,1,c] s) => (float[n,1,1,c] y, float[n,c] z) {
  hw = Constant<value = int64[2] {1, 2}>()
  p = Mul(x, s)
  m = ReduceMean(p, hw)
  y = Sigmoid(m)
  z = ReduceSum<keepdims = 0>(x, hw)
}
)";
  auto lowered = lower_graph(*parse(text));
  ASSERT_TRUE(lowered) << lowered.status().message();
  EXPECT_NE(generate_cpp_source(*lowered).find("acc[j] +="), std::string::npos)
      << "no column reduction emitted";
  check_model(
      text, 2,
      {{{"x", DType::kF32, {1, 7, 7, 300}, 3.0, {{5, NAN}}}, {"s", DType::kF32, {1, 1, 1, 300}}},
       {{"x", DType::kF32, {2, 5, 3, 256}}, {"s", DType::kF32, {1, 1, 1, 256}}},
       {{"x", DType::kF32, {2, 9, 4, 17}}, {"s", DType::kF32, {1, 1, 1, 17}}},
       {{"x", DType::kF32, {2, 3, 3, 1}}, {"s", DType::kF32, {1, 1, 1, 1}}},
       {{"x", DType::kF32, {2, 0, 3, 20}}, {"s", DType::kF32, {1, 1, 1, 20}}}});
}

}  // namespace
}  // namespace ferrite
