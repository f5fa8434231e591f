// The `cuda` device against the reference device. Two kinds of tests:
//  - CudaCodegen: generate CUDA C++ for lowered graphs and compile it for sm_90 with NVRTC. Needs
//    the CUDA toolkit's NVRTC library only (no driver, no GPU); skipped when NVRTC is absent.
//  - CudaDevice: run models on a GPU and compare every output with the reference device on
//    random inputs, several sizes per compile. Skipped cleanly when no GPU or driver is present.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "lower/lowering.h"
#include "memory/in_place.h"
#include "passes/pass.h"
#include "test_util.h"

#if FERRITE_HAVE_CUDA
#include "backends/cuda/nvrtc_compiler.h"
#include "codegen/cuda_source.h"
#endif

namespace ferrite {
namespace {

#if FERRITE_HAVE_CUDA

std::unique_ptr<Graph> parse(const std::string& text) {
  return ferrite::testing::parse_onnx_text(text);
}

const char* kRowModel = R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[b,s,n] x, float[b,1,n] m, float[n] gamma, float[n] beta, double[b,c] d)
    => (float[b,s,n] y, float[b,s,n] z, float[b,s,n] ln, float[b,s] r, float[b,1,1] mx,
        double[b,c] dd, float[b,s,n] e) {
  a = Add(x, m)
  y = Softmax<axis = -1>(a)
  z = LogSoftmax<axis = 2>(x)
  ln = LayerNormalization<epsilon = 1e-5>(a, gamma, beta)
  last = Constant<value = int64[1] {-1}>()
  two = Constant<value = int64[2] {-2, -1}>()
  r = ReduceSum<keepdims = 0>(x, last)
  mx = ReduceMax(x, two)
  dd = Softmax(d)
  t = Tanh(x)
  three = Constant<value = float {3.0}>()
  u = Mul(t, three)
  e = Sub(u, m)
}
)";

TEST(CudaCodegen, NvrtcCompilesGeneratedKernelsForSm90) {
  auto nv = cuda::nvrtc();
  if (!nv) GTEST_SKIP() << nv.status().message();
  auto g = parse(kRowModel);
  ASSERT_TRUE(g);
  auto lg = lower_graph(*g);
  ASSERT_TRUE(lg) << lg.status().message();
  EXPECT_GE(lg->row_kernels, 5);
  mark_in_place_candidates(*lg);
  cuda::CudaDialect dialect;
  auto src = dialect.generate(*lg, DeviceProperties{});
  ASSERT_TRUE(src) << src.status().message();
  // A row kernel's reduction over its row's threads (the prelude only defines the template).
  EXPECT_NE(src->find("fe_row_reduce<fe_op_sum, "), std::string::npos);
  EXPECT_NE(src->find("__global__"), std::string::npos);
  auto cubin = cuda::compile_to_cubin(*src, "sm_90", "test");
  ASSERT_TRUE(cubin) << cubin.status().message();
  EXPECT_GT(cubin->cubin.size(), 1000u);
  // The second compile of the same source is a compile-cache hit.
  auto again = cuda::compile_to_cubin(*src, "sm_90", "test");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->cubin, cubin->cubin);
}

// Every generated kernel of the shared zoo's models (after the default passes) compiles for
// sm_90. Uses materialized models ($FERRITE_MODELS_DIR, default build/models of this checkout).
TEST(CudaCodegen, ZooModelsCompileForSm90) {
  auto nv = cuda::nvrtc();
  if (!nv) GTEST_SKIP() << nv.status().message();
  const char* env = std::getenv("FERRITE_MODELS_DIR");
  std::filesystem::path dir =
      env && *env ? std::filesystem::path(env)
                  : std::filesystem::path(FERRITE_TEST_DATA_DIR) / ".." / ".." / "build" / "models";
  int compiled = 0;
  for (const char* m : {"mlp", "convnet", "resnet18", "mobilenet_v2", "bert_base", "gpt2"}) {
    auto path = dir / m / "model.onnx";
    if (!std::filesystem::exists(path)) continue;
    auto g = import_onnx_file(path);
    ASSERT_TRUE(g) << m << ": " << g.status().message();
    ASSERT_TRUE(run_pipeline(**g, default_pipeline()).is_ok()) << m;
    auto lg = lower_graph(**g);
    ASSERT_TRUE(lg) << m << ": " << lg.status().message();
    mark_in_place_candidates(*lg);
    auto src = cuda::CudaDialect().generate(*lg, DeviceProperties{});
    ASSERT_TRUE(src) << m << ": " << src.status().message();
    // For reading the generated CUDA without a GPU: FERRITE_CUDA_SOURCE_DIR=DIR writes DIR/<m>.cu.
    if (const char* out = std::getenv("FERRITE_CUDA_SOURCE_DIR"); out && *out)
      std::ofstream(std::filesystem::path(out) / (std::string(m) + ".cu")) << *src;
    auto cubin = cuda::compile_to_cubin(*src, "sm_90", m);
    ASSERT_TRUE(cubin) << m << ": " << cubin.status().message();
    ++compiled;
  }
  if (compiled == 0) GTEST_SKIP() << "no materialized models under " << dir;
}

// Column reductions (codegen/row_analysis.h, column_reduce): means and sums over the pixels of
// channels-last tensors (a realized input whose reduced dims merge, and a fused Relu whose two
// reduced dims stay apart) and a sum over the leading axis.
const char* kColumnModel = R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[n,h,w,c] x, double[r,k] d) => (float[n,1,1,c] m, float[n,c] s, double[k] t) {
  hw = Constant<value = int64[2] {1, 2}>()
  zero = Constant<value = int64[1] {0}>()
  m = ReduceMean(x, hw)
  rx = Relu(x)
  s = ReduceSum<keepdims = 0>(rx, hw)
  t = ReduceSum<keepdims = 0>(d, zero)
}
)";

TEST(CudaCodegen, ColumnReductionsTakeNeighbouringRowsPerBlock) {
  auto nv = cuda::nvrtc();
  if (!nv) GTEST_SKIP() << nv.status().message();
  auto g = parse(kColumnModel);
  ASSERT_TRUE(g);
  auto lg = lower_graph(*g);
  ASSERT_TRUE(lg) << lg.status().message();
  auto src = cuda::CudaDialect().generate(*lg, DeviceProperties{});
  ASSERT_TRUE(src) << src.status().message();
  if (const char* out = std::getenv("FERRITE_CUDA_SOURCE_DIR"); out && *out)
    std::ofstream(std::filesystem::path(out) / "columns.cu") << *src;
  size_t uses = 0;
  for (size_t at = src->find("= fe_col_reduce("); at != std::string::npos;
       at = src->find("= fe_col_reduce(", at + 1))
    ++uses;
  EXPECT_EQ(uses, 3u) << *src;
  EXPECT_EQ(src->find("= fe_row_reduce<"), std::string::npos) << *src;
  auto cubin = cuda::compile_to_cubin(*src, "sm_90", "columns");
  ASSERT_TRUE(cubin) << cubin.status().message();
}

TEST(CudaCodegen, CompileErrorsAreValues) {
  auto nv = cuda::nvrtc();
  if (!nv) GTEST_SKIP() << nv.status().message();
  auto r = cuda::compile_to_cubin("extern \"C\" __global__ void k() { undefined_thing(); }",
                                  "sm_90", "broken");
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("undefined_thing"), std::string::npos);
}

// A GPU session, or the reason there is none.
Expected<std::unique_ptr<Session>> cuda_session(const std::string& text) {
  return Session::from_graph(parse(text), "cuda");
}

Tensor random_tensor(DType dt, const std::vector<int64_t>& dims, std::mt19937& rng, double scale) {
  Tensor t = Tensor::zeros(dt, dims);
  std::uniform_real_distribution<double> u(-scale, scale);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::kF32)
      t.data<float>()[i] = static_cast<float>(u(rng));
    else if (dt == DType::kF64)
      t.data<double>()[i] = u(rng);
    else if (dt == DType::kI64)
      t.data<int64_t>()[i] = static_cast<int64_t>(std::floor(u(rng)));
  }
  return t;
}

double at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF32:
      return t.data<float>()[i];
    case DType::kF64:
      return t.data<double>()[i];
    case DType::kI64:
      return static_cast<double>(t.data<int64_t>()[i]);
    case DType::kBool:
      return t.data<bool>()[i];
    default:
      return NAN;
  }
}

struct Input {
  std::string name;
  DType dtype;
  std::vector<int64_t> dims;
  double scale = 2.0;
};

// Runs `text` on cuda and reference for each input set; the relative tolerance is for f32 GEMM
// accumulation order (cuBLASLt vs the reference's loops).
void check_on_gpu(const std::string& text, const std::vector<std::vector<Input>>& runs,
                  double tol = 1e-4) {
  auto gpu = cuda_session(text);
  if (!gpu) GTEST_SKIP() << "no GPU: " << gpu.status().message();
  auto ref = Session::from_graph(parse(text), "reference");
  ASSERT_TRUE(ref) << ref.status().message();
  std::mt19937 rng(77);
  for (const auto& run : runs) {
    std::vector<Session::NamedInput> inputs;
    for (const Input& in : run)
      inputs.push_back({in.name, random_tensor(in.dtype, in.dims, rng, in.scale)});
    auto want = (*ref)->run(inputs);
    ASSERT_TRUE(want) << want.status().message();
    // Run 1 runs step by step, run 2 captures a CUDA graph where it can, run 3 replays it.
    for (int rep = 0; rep < 3; ++rep) {
      auto got = (*gpu)->run(inputs);
      ASSERT_TRUE(got) << got.status().message();
      ASSERT_EQ(got->size(), want->size());
      for (size_t o = 0; o < got->size(); ++o) {
        const Tensor &a = (*got)[o], &b = (*want)[o];
        ASSERT_EQ(a.dtype(), b.dtype()) << "output " << o;
        ASSERT_EQ(a.dims(), b.dims()) << "output " << o;
        for (int64_t i = 0; i < a.numel(); ++i) {
          double x = at(a, i), y = at(b, i);
          if (std::isnan(y)) {
            ASSERT_TRUE(std::isnan(x)) << "output " << o << " element " << i;
            continue;
          }
          ASSERT_NEAR(x, y, tol * (1 + std::fabs(y))) << "output " << o << " element " << i;
        }
      }
    }
  }
}

TEST(CudaDevice, MissingGpuIsAnErrorValue) {
  auto s = cuda_session(kRowModel);
  if (s) GTEST_SKIP() << "a GPU is present";
  EXPECT_FALSE(s.status().message().empty());
}

TEST(CudaDevice, PointwiseAndRowKernels) {
  check_on_gpu(kRowModel,
               {{{"x", DType::kF32, {2, 3, 17}, 8.0},
                 {"m", DType::kF32, {2, 1, 17}},
                 {"gamma", DType::kF32, {17}},
                 {"beta", DType::kF32, {17}},
                 {"d", DType::kF64, {2, 5}}},
                {{"x", DType::kF32, {3, 7, 1500}, 8.0},
                 {"m", DType::kF32, {3, 1, 1500}},
                 {"gamma", DType::kF32, {1500}},
                 {"beta", DType::kF32, {1500}},
                 {"d", DType::kF64, {3, 70}}},
                // Short rows (24 elements: four threads each, 32 rows a block) in more blocks
                // than the grid holds: the loop over row groups steps by the grid. (Rows of two
                // made LayerNorm ill-conditioned wherever the pair nearly matched.)
                {{"x", DType::kF32, {1, 200001, 24}, 8.0},
                 {"m", DType::kF32, {1, 1, 24}},
                 {"gamma", DType::kF32, {24}},
                 {"beta", DType::kF32, {24}},
                 {"d", DType::kF64, {1, 3}}}},
               2e-5);
}

// Rows not a multiple of the block's rows (the last block's spare threads compute on the last
// row and do not store), long rows, more row blocks than the grid (the loop strides by it), and
// few rows (1, 2 or 4 a block on a GPU of 132 SMs: 48, 1040 and 1056 rows).
TEST(CudaDevice, ColumnReductions) {
  auto set = [](std::vector<int64_t> x, std::vector<int64_t> d) {
    return std::vector<Input>{{"x", DType::kF32, x}, {"d", DType::kF64, d}};
  };
  check_on_gpu(kColumnModel,
               {set({2, 7, 7, 96}, {5, 3}), set({3, 5, 3, 40}, {3, 300000}),
                set({2, 112, 112, 24}, {1000, 17}), set({1, 1, 1, 1}, {1, 1}),
                set({8, 9, 9, 130}, {2, 1040}), set({4, 20, 20, 264}, {7, 1056})},
               2e-6);
}

TEST(CudaDevice, GemmFamily) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 17, "ferrite" : 1]>
g (float[b,s,k] x, float[k,n] w, float[n] bias, float[b,h,s,k] q, float[b,h,k,s] kt,
   float[2,1,s,k] p, float[3,k,n] r, float[m,k] ga, float[n,k] gb, float[m,n] gc, float[b,s,n] res)
    => (float[b,s,n] y0, float[b,h,s,s] y1, float[2,3,s,n] y2, float[m,n] y3, float[m,n] y4,
        float[b,s,n] y5, float[b,s,n] y6, float[b,s,n] y7) {
  y0 = MatMul(x, w)
  y1 = MatMul(q, kt)
  y2 = MatMul(p, r)
  y3 = Gemm<transB = 1, alpha = 0.5>(ga, gb, bias)
  y4 = Gemm<transB = 1, beta = 0.25>(ga, gb, gc)
  y5 = ferrite.FusedMatMul<activation = "relu">(x, w, bias)
  y6 = ferrite.FusedMatMul<activation = "gelu">(x, w, bias, res)
  y7 = ferrite.FusedMatMul(x, w, bias, res)
}
)";
  auto set = [](int64_t b, int64_t s, int64_t m) {
    const int64_t k = 48, n = 40, h = 3;
    return std::vector<Input>{{"x", DType::kF32, {b, s, k}},     {"w", DType::kF32, {k, n}},
                              {"bias", DType::kF32, {n}},        {"q", DType::kF32, {b, h, s, k}},
                              {"kt", DType::kF32, {b, h, k, s}}, {"p", DType::kF32, {2, 1, s, k}},
                              {"r", DType::kF32, {3, k, n}},     {"ga", DType::kF32, {m, k}},
                              {"gb", DType::kF32, {n, k}},       {"gc", DType::kF32, {m, n}},
                              {"res", DType::kF32, {b, s, n}}};
  };
  check_on_gpu(text, {set(2, 5, 7), set(1, 33, 64)});
}

TEST(CudaDevice, ConvolutionAndPooling) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[b,4,h,w] x, float[6,4,3,3] w1, float[6] b1, float[4,2,3,3] w2, float[4,1,3,3] w3,
   float[5,4,1,1] w4)
    => (float[b,6,?,?] y1, float[b,4,?,?] y2, float[b,4,?,?] y3, float[b,5,h,w] y4,
        float[b,4,?,?] y5) {
  y1 = Conv<strides = [2, 2], pads = [1, 1, 1, 1]>(x, w1, b1)
  y2 = Conv<group = 2, pads = [0, 1, 2, 1], dilations = [2, 1]>(x, w2)
  y3 = Conv<group = 4, auto_pad = "SAME_UPPER">(x, w3)
  y4 = Conv(x, w4)
  y5 = MaxPool<kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]>(x)
}
)";
  check_on_gpu(text, {{{"x", DType::kF32, {2, 4, 9, 11}},
                       {"w1", DType::kF32, {6, 4, 3, 3}},
                       {"b1", DType::kF32, {6}},
                       {"w2", DType::kF32, {4, 2, 3, 3}},
                       {"w3", DType::kF32, {4, 1, 3, 3}},
                       {"w4", DType::kF32, {5, 4, 1, 1}}},
                      {{"x", DType::kF32, {1, 4, 16, 16}},
                       {"w1", DType::kF32, {6, 4, 3, 3}},
                       {"b1", DType::kF32, {6}},
                       {"w2", DType::kF32, {4, 2, 3, 3}},
                       {"w3", DType::kF32, {4, 1, 3, 3}},
                       {"w4", DType::kF32, {5, 4, 1, 1}}}});
}

TEST(CudaDevice, AttentionWithMaskAndCausal) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 17, "ferrite" : 1]>
g (float[b,h,s,d] q, float[b,h,t,d] k, float[b,h,t,e] v, float[b,1,1,t] m)
    => (float[b,h,s,e] y1, float[b,h,s,e] y2) {
  y1 = ferrite.Attention<nan_to_zero = 1>(q, k, v, m)
  y2 = ferrite.Attention<causal = 1, scale = 0.3>(q, k, v)
}
)";
  check_on_gpu(text, {{{"q", DType::kF32, {2, 3, 5, 8}},
                       {"k", DType::kF32, {2, 3, 5, 8}},
                       {"v", DType::kF32, {2, 3, 5, 6}},
                       {"m", DType::kF32, {2, 1, 1, 5}}},
                      {{"q", DType::kF32, {1, 2, 70, 16}},
                       {"k", DType::kF32, {1, 2, 70, 16}},
                       {"v", DType::kF32, {1, 2, 70, 4}},
                       {"m", DType::kF32, {1, 1, 1, 70}}}});
}

// Ops without a GPU implementation run on the host, between device steps, with correct results.
TEST(CudaDevice, SplitShapeAndHostFallback) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[b,n] x, float[c,3,12] z) => (float[b,n] y, int64[2] shp, float[c,3,2] s0, float[c,3,4] s1,
                                      float[c,3,6] s2, float[c,3,6] t0, float[c,3,6] t1) {
  r = Relu(x)
  ax = Constant<value = int64 {1}>()
  c = CumSum(r, ax)
  y = Sigmoid(c)
  shp = Shape(y)
  e = Exp(z)
  sizes = Constant<value = int64[3] {2, 4, 6}>()
  s0, s1, s2 = Split<axis = 2>(e, sizes)
  t0, t1 = Split<axis = -1, num_outputs = 2>(e)
}
)";
  check_on_gpu(text, {{{"x", DType::kF32, {3, 10}}, {"z", DType::kF32, {2, 3, 12}}},
                      {{"x", DType::kF32, {5, 100}}, {"z", DType::kF32, {1, 3, 12}}}});
}

// Integer CumSum (a warp scan per line: lengths across 32-element steps, exclusive, reverse,
// inner axes) and Gathers of whole 16-byte rows (a bf16 embedding table, negative indices) next to
// rows that are not (24-byte f32 rows).
TEST(CudaDevice, IntegerCumSumAndSixteenByteGather) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[b,n] x, float[50,64] table, float[50,6] narrow) => (float[b,n] c0, float[b,n] c1,
                                                          float[b,n] c2, float[5,64] e,
                                                          float[5,6] f) {
  xi = Cast<to = 7>(x)
  x32 = Cast<to = 6>(x)
  one = Constant<value = int64 {1}>()
  zero = Constant<value = int64 {0}>()
  s0 = CumSum(xi, one)
  s1 = CumSum<exclusive = 1, reverse = 1>(x32, one)
  s2 = CumSum<reverse = 1>(xi, zero)
  c0 = Cast<to = 1>(s0)
  c1 = Cast<to = 1>(s1)
  c2 = Cast<to = 1>(s2)
  idx = Constant<value = int64[5] {0, 3, -1, 49, 7}>()
  tb = Cast<to = 16>(table)
  eb = Gather(tb, idx)
  e = Cast<to = 1>(eb)
  f = Gather(narrow, idx)
}
)";
  check_on_gpu(text, {{{"x", DType::kF32, {3, 100}, 50.0},
                       {"table", DType::kF32, {50, 64}},
                       {"narrow", DType::kF32, {50, 6}}},
                      {{"x", DType::kF32, {70, 33}, 50.0},
                       {"table", DType::kF32, {50, 64}},
                       {"narrow", DType::kF32, {50, 6}}}});
}

// 16-bit Split into whole 16-byte rows (one fe_split16 launch for all outputs) and a broadcast
// Add whose operand has a symbolic min(64, s) dim (DistilBERT's position embeddings: the library
// binary kernel, 8 elements a thread).
TEST(CudaDevice, SplitAndBroadcastAddIn16ByteVectors) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[b,s,32] x, float[64,32] table) => (float[b,s,8] y0, float[b,s,16] y1, float[b,s,8] y2,
                                            float[b,s,32] a) {
  xb = Cast<to = 16>(x)
  sizes = Constant<value = int64[3] {8, 16, 8}>()
  s0, s1, s2 = Split<axis = 2>(xb, sizes)
  y0 = Cast<to = 1>(s0)
  y1 = Cast<to = 1>(s1)
  y2 = Cast<to = 1>(s2)
  tb = Cast<to = 16>(table)
  shp = Shape<start = 1, end = 2>(x)
  zero = Constant<value = int64[1] {0}>()
  pos = Slice(tb, zero, shp, zero)
  ab = Add(xb, pos)
  a = Cast<to = 1>(ab)
}
)";
  // bf16 rounding of the sum: 2^-8 relative.
  check_on_gpu(text,
               {{{"x", DType::kF32, {3, 10, 32}}, {"table", DType::kF32, {64, 32}}},
                {{"x", DType::kF32, {2, 64, 32}}, {"table", DType::kF32, {64, 32}}}},
               8e-3);
}

// The 16-bit epilogue activations (fe_act_k: GELU, SiLU and HardSwish in their float forms with a
// few float ulps of error, cuda_library.cpp) on every finite bf16 and f16 value: a GEMM with the
// identity passes x through exactly, then the library's epilogue kernel applies the activation.
// Each result must be the exact value (double, GELU through erfc) rounded to 16 bits or its
// neighbour (a float error that straddles a rounding boundary), and neighbours must stay rare;
// bf16 results below 2^-110 may be flushed to zero.
// (Not the reference device: its float 1 + erf(x / sqrt 2) cancels for x below about -3, 2% off
// at x = -4.84, which the GPU's form gets right.)
TEST(CudaDevice, SixteenBitEpilogueActivationsOnEveryValue) {
  const std::vector<std::function<double(double)>> exact = {
      [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); },
      [](double x) { return x / (1 + std::exp(-x)); },
      [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }};
  for (const char* type : {"bfloat16", "float16"}) {
    const bool bf = std::string(type) == "bfloat16";
    std::string text = R"(<ir_version: 8, opset_import: ["" : 17, "ferrite" : 1]>
g (T[m,8] x, T[8,8] w, T[8] bias) => (T[m,8] y0, T[m,8] y1, T[m,8] y2) {
  y0 = ferrite.FusedMatMul<activation = "gelu">(x, w, bias)
  y1 = ferrite.FusedMatMul<activation = "silu">(x, w, bias)
  y2 = ferrite.FusedMatMul<activation = "hard_swish">(x, w, bias)
}
)";
    for (size_t at = text.find("T["); at != std::string::npos; at = text.find("T[", at))
      text.replace(at, 1, type), at += std::strlen(type);
    auto gpu = cuda_session(text);
    if (!gpu) GTEST_SKIP() << "no GPU: " << gpu.status().message();
    const DType dt = bf ? DType::kBF16 : DType::kF16;
    const uint16_t exp_mask = bf ? 0x7f80 : 0x7c00;
    auto to_float = [&](uint16_t b) {
      BFloat16 v;
      Half h;
      v.bits = h.bits = b;
      return bf ? static_cast<float>(v) : static_cast<float>(h);
    };
    auto to_bits = [&](double v) {
      return bf ? BFloat16(static_cast<float>(v)).bits : Half(static_cast<float>(v)).bits;
    };
    std::vector<uint16_t> finite;
    for (uint32_t b = 0; b < 65536; ++b)
      if ((b & exp_mask) != exp_mask) finite.push_back(static_cast<uint16_t>(b));
    while (finite.size() % 8) finite.push_back(0);
    const int64_t m = static_cast<int64_t>(finite.size() / 8);
    Tensor x = Tensor::zeros(dt, {m, 8}), w = Tensor::zeros(dt, {8, 8}),
           bias = Tensor::zeros(dt, {8});
    auto* xb = static_cast<uint16_t*>(x.raw());
    for (size_t i = 0; i < finite.size(); ++i) xb[i] = finite[i];
    for (int i = 0; i < 8; ++i) static_cast<uint16_t*>(w.raw())[i * 8 + i] = to_bits(1.0);
    auto got = (*gpu)->run({{"x", x}, {"w", w}, {"bias", bias}});
    ASSERT_TRUE(got) << got.status().message();
    // As sign-magnitude integers, +0 and -0 both 0: adjacent values differ by 1.
    auto ordinal = [](uint16_t v) { return (v & 0x8000) ? -int32_t(v & 0x7fff) : int32_t(v); };
    for (size_t o = 0; o < exact.size(); ++o) {
      SCOPED_TRACE(std::string(type) + " output " + std::to_string(o));
      const auto* a = static_cast<const uint16_t*>((*got)[o].raw());
      int64_t neighbours = 0;
      for (int64_t i = 0; i < m * 8; ++i) {
        const double v = exact[o](to_float(finite[i]));
        const uint16_t want = to_bits(v);
        // The epilogue's exp and reciprocal flush float subnormals: results under about 2^-119
        // (SiLU below x = -87, GELU below x = -13) may be zero.
        if (std::fabs(v) < std::ldexp(1.0, -110) && (a[i] & 0x7fff) == 0) continue;
        const int32_t d = std::abs(ordinal(a[i]) - ordinal(want));
        ASSERT_LE(d, 1) << "x bits 0x" << std::hex << finite[i] << ": got 0x" << a[i]
                        << ", exact 0x" << want;
        neighbours += d;
      }
      EXPECT_LE(neighbours, m * 8 / 200) << neighbours << " of " << m * 8 << " one ulp off";
    }
  }
}

// Gather on the GPU (device data, host or device indices, negative indices, any element size),
// and an out-of-range index is an error value naming the node, in graph replays too.
TEST(CudaDevice, GatherOnGpu) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[v,e] table, int64[b,s] ids, int64[b,s] ids2) => (float[b,s,e] y, float[v,b,s] z, int64[b,s,s] w) {
  t = Relu(table)
  y = Gather(t, ids)
  z = Gather<axis = 1>(t, ids2)
  one = Constant<value = int64 {1}>()
  d = Add(ids2, one)
  w = Gather(d, ids2)
}
)";
  auto gpu = cuda_session(text);
  if (!gpu) GTEST_SKIP() << "no GPU: " << gpu.status().message();
  auto ref = Session::from_graph(parse(text), "reference");
  ASSERT_TRUE(ref);
  std::mt19937 rng(5);
  Tensor table = random_tensor(DType::kF32, {40, 6}, rng, 1.0);
  auto ids = [](std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(v, {2, 3}); };
  std::vector<Session::NamedInput> good = {
      {"table", table}, {"ids", ids({0, 5, -1, 39, 2, -40})}, {"ids2", ids({0, 1, -2, 1, 0, -1})}};
  auto want = (*ref)->run(good);
  ASSERT_TRUE(want) << want.status().message();
  for (int rep = 0; rep < 4; ++rep) {
    auto got = (*gpu)->run(good);
    ASSERT_TRUE(got) << got.status().message();
    for (size_t o = 0; o < got->size(); ++o)
      for (int64_t i = 0; i < (*got)[o].numel(); ++i)
        ASSERT_EQ(at((*got)[o], i), at((*want)[o], i)) << "output " << o << " element " << i;
    if (rep == 2) {
      std::vector<Session::NamedInput> bad = good;
      bad[1].tensor = ids({0, 1, 40, 0, 0, 0});
      auto r = (*gpu)->run(bad);
      ASSERT_FALSE(r);
      EXPECT_NE(r.status().message().find("out of range"), std::string::npos)
          << r.status().message();
    }
  }
}

// The indexing ops of training graphs on the GPU (max-pool indices made per-plane by an integer
// Mod, their gradient scattered back, an embedding gradient, a loss's target gather) against
// the reference; a bad index and a zero divisor are error values naming what went wrong.
TEST(CudaDevice, IndexingOnGpu) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[2,3,8,8] x, int64[2,3,4,4] g, int64[4,1] ids, float[4,5] rows, int64[2,3,1,1] k, int64[1] plane) => (float[2,3,8,8] dx, float[6,5] emb, float[2,3,1,1] picked, int64[2,3,4,4] rel) {
  shape = Constant<value = int64[3] {2, 3, 64}>()
  shape2 = Constant<value = int64[3] {2, 3, 16}>()
  xshape = Constant<value = int64[4] {2, 3, 8, 8}>()
  kshape = Constant<value = int64[4] {2, 3, 1, 1}>()
  r = Relu(x)
  p, idx = MaxPool<kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]>(r)
  rel = Mod(idx, plane)
  zeros = Sub(r, r)
  flat = Reshape(zeros, shape)
  pf = Reshape(p, shape2)
  relf = Reshape(rel, shape2)
  dxf = ScatterElements<axis = 2, reduction = "add">(flat, relf, pf)
  dx = Reshape(dxf, xshape)
  table = Constant<value = float[6,5] {0,0,0,0,0, 0,0,0,0,0, 0,0,0,0,0, 0,0,0,0,0, 0,0,0,0,0, 0,0,0,0,0}>()
  emb = ScatterND<reduction = "add">(table, ids, rows)
  picked = GatherElements<axis = 2>(r, kk)
  kk = Reshape(k, kshape)
}
)";
  auto gpu = cuda_session(text);
  if (!gpu) GTEST_SKIP() << "no GPU: " << gpu.status().message();
  auto ref = Session::from_graph(parse(text), "reference");
  ASSERT_TRUE(ref);
  std::mt19937 rng(7);
  auto i64 = [](std::vector<int64_t> v, std::vector<int64_t> d) {
    return Tensor::from_vector<int64_t>(v, d);
  };
  std::vector<Session::NamedInput> good = {
      {"x", random_tensor(DType::kF32, {2, 3, 8, 8}, rng, 1.0)},
      {"g", i64(std::vector<int64_t>(96, 0), {2, 3, 4, 4})},
      {"ids", i64({5, 0, 5, -1}, {4, 1})},
      {"rows", random_tensor(DType::kF32, {4, 5}, rng, 1.0)},
      {"k", i64({0, 7, -1, 3, 4, 2}, {2, 3, 1, 1})},
      {"plane", i64({64}, {1})}};
  auto want = (*ref)->run(good);
  ASSERT_TRUE(want) << want.status().message();
  auto got = (*gpu)->run(good);
  ASSERT_TRUE(got) << got.status().message();
  for (size_t o = 0; o < got->size(); ++o)
    for (int64_t i = 0; i < (*got)[o].numel(); ++i)
      ASSERT_NEAR(at((*got)[o], i), at((*want)[o], i), 1e-5) << "output " << o << " element " << i;
  auto bad = good;
  bad[2].tensor = i64({5, 0, 6, 1}, {4, 1});
  auto r = (*gpu)->run(bad);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("ScatterND"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("out of range"), std::string::npos) << r.status().message();
  bad = good;
  bad[5].tensor = i64({0}, {1});
  r = (*gpu)->run(bad);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("division or modulo by zero"), std::string::npos)
      << r.status().message();
  ASSERT_TRUE((*gpu)->run(good));  // and it runs again
}

#endif  // FERRITE_HAVE_CUDA

}  // namespace
}  // namespace ferrite
