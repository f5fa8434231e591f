// --precision bf16 / fp16 (RunOptions::precision, pass convert-precision-*): small graphs of the
// op families the zoo uses (GEMM + bias + GELU, LayerNorm, masked softmax, Conv + ReLU + MaxPool,
// depthwise Conv, attention) run at reduced precision on reference, cpu and cuda and must match
// the float32 reference within the precision's documented tolerance (runtime/precision.h). cuda
// cases skip without a GPU; the CudaCodegen cases compile the bf16 / fp16 kernels with NVRTC.
#include "runtime/precision.h"

#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "lower/lowering.h"
#include "memory/in_place.h"
#include "passes/pass.h"
#include "runtime/session.h"
#include "test_util.h"

#if FERRITE_HAVE_CUDA
#include "backends/cuda/cuda_library.h"
#include "backends/cuda/nvrtc_compiler.h"
#include "codegen/cuda_source.h"
#endif

namespace ferrite {
namespace {

std::unique_ptr<Graph> parse(const std::string& text) {
  return ferrite::testing::parse_onnx_text(text);
}

// `float[dims] name = {...}` with values uniform in [-scale, scale] (fixed seed per name).
std::string init(const std::string& name, const std::vector<int64_t>& dims, double scale,
                 double offset = 0) {
  std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>()(name)));
  std::uniform_real_distribution<double> u(-scale, scale);
  int64_t n = 1;
  std::ostringstream os;
  os << "float[";
  for (size_t i = 0; i < dims.size(); ++i) {
    os << (i ? "," : "") << dims[i];
    n *= dims[i];
  }
  os << "] " << name << " = {";
  for (int64_t i = 0; i < n; ++i) os << (i ? ", " : "") << offset + u(rng);
  os << "}";
  return os.str();
}

struct Case {
  std::string name;
  std::string text;
  std::vector<std::pair<std::string, std::vector<int64_t>>> inputs;  // f32 inputs
  std::vector<std::pair<std::string, std::vector<int64_t>>> masks;   // int64 0/1 inputs
};

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"MatMulBiasGelu",
               R"(<ir_version: 8, opset_import: ["" : 20]>
g (float[N,S,32] x) => (float[N,S,24] y) <)" +
                   init("w", {32, 24}, 0.3) + ", " + init("b", {24}, 0.5) + R"(> {
  m = MatMul(x, w)
  a = Add(b, m)
  y = Gelu(a)
})",
               {{"x", {2, 5, 32}}},
               {}});
  c.push_back({"GemmRelu",
               R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N,64] x) => (float[N,16] y) <)" +
                   init("w", {16, 64}, 0.2) + ", " + init("b", {16}, 0.5) + R"(> {
  m = Gemm<transB = 1>(x, w, b)
  y = Relu(m)
})",
               {{"x", {3, 64}}},
               {}});
  // A full-shape residual: the GEMM's C operand (beta = 1) at bf16.
  c.push_back({"MatMulBiasResidual",
               R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N,S,32] x, float[N,S,24] r) => (float[N,S,24] y) <)" +
                   init("w", {32, 24}, 0.3) + ", " + init("b", {24}, 0.5) + R"(> {
  m = MatMul(x, w)
  a = Add(m, b)
  y = Add(a, r)
})",
               {{"x", {2, 5, 32}}, {"r", {2, 5, 24}}},
               {}});
  c.push_back({"LayerNorm",
               R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N,S,48] x) => (float[N,S,48] y) <)" +
                   init("gamma", {48}, 0.1, 1.0) + ", " + init("beta", {48}, 0.1) + R"(> {
  y = LayerNormalization<axis = -1, epsilon = 0.00001>(x, gamma, beta)
})",
               {{"x", {2, 7, 48}}},
               {}});
  // HF-style additive mask: (1 - mask) * float32's lowest value; in bf16 the constant must stay
  // finite, or 0 * -inf makes the kept positions NaN.
  c.push_back({"MaskedSoftmax",
               R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N,H,S,S] x, int64[N,S] mask) => (float[N,H,S,S] y) <float one = {1.0}, float lowest = {-3.4028234663852886e38}, int64[2] axes = {1, 2}> {
  mf = Cast<to = 1>(mask)
  inv = Sub(one, mf)
  neg = Mul(inv, lowest)
  m4 = Unsqueeze(neg, axes)
  s = Add(x, m4)
  y = Softmax<axis = -1>(s)
})",
               {{"x", {2, 3, 8, 8}}},
               {{"mask", {2, 8}}}});
  c.push_back({"ConvReluMaxPool",
               R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N,3,11,11] x) => (float[N,8,5,5] y) <)" +
                   init("w", {8, 3, 3, 3}, 0.3) + ", " + init("b", {8}, 0.2) + ", " +
                   init("w1", {8, 8, 1, 1}, 0.3) + R"(> {
  c = Conv<kernel_shape = [3, 3], pads = [1, 1, 1, 1]>(x, w, b)
  r = Relu(c)
  c1 = Conv<kernel_shape = [1, 1]>(r, w1)
  y = MaxPool<kernel_shape = [3, 3], strides = [2, 2]>(c1)
})",
               {{"x", {2, 3, 11, 11}}},
               {}});
  c.push_back({"DepthwiseConvClip",
               R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N,6,9,9] x) => (float[N,6,9,9] y) <)" +
                   init("w", {6, 1, 3, 3}, 0.4) + ", " + init("b", {6}, 0.2) +
                   R"(, float lo = {0.0}, float hi = {6.0}> {
  c = Conv<group = 6, kernel_shape = [3, 3], pads = [1, 1, 1, 1]>(x, w, b)
  y = Clip(c, lo, hi)
})",
               {{"x", {2, 6, 9, 9}}},
               {}});
  c.push_back(
      {"Attention",
       R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[B,2,S,16] q, float[B,2,S,16] k, float[B,2,S,16] v, float[B,1,1,S] mask) => (float[B,2,S,16] y) <float c = {0.25}> {
  kt = Transpose<perm = [0, 1, 3, 2]>(k)
  s = MatMul(q, kt)
  ss = Mul(s, c)
  z = Add(ss, mask)
  p = Softmax<axis = -1>(z)
  y = MatMul(p, v)
})",
       {{"q", {2, 2, 6, 16}}, {"k", {2, 2, 6, 16}}, {"v", {2, 2, 6, 16}}, {"mask", {2, 1, 1, 6}}},
       {}});
  return c;
}

std::vector<Session::NamedInput> inputs_for(const Case& c, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<Session::NamedInput> in;
  for (const auto& [name, dims] : c.inputs) {
    Tensor t = Tensor::zeros(DType::kF32, dims);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
    in.push_back({name, std::move(t)});
  }
  for (const auto& [name, dims] : c.masks) {
    Tensor t = Tensor::zeros(DType::kI64, dims);
    // Every row keeps its first position (a fully masked row is NaN in float32 too).
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<int64_t>()[i] = (i % dims.back() == 0) || rng() % 3 != 0;
    in.push_back({name, std::move(t)});
  }
  return in;
}

using Param = std::tuple<std::string, Precision>;  // device, precision

class PrecisionRun : public ::testing::TestWithParam<Param> {};

TEST_P(PrecisionRun, MatchesFloat32ReferenceWithinTolerance) {
  const auto& [device, prec] = GetParam();
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    RunOptions opts;
    opts.precision = prec;
    auto low = Session::from_graph(parse(c.text), device, opts);
    if (!low && device == "cuda") GTEST_SKIP() << "no GPU: " << low.status().message();
    ASSERT_TRUE(low) << low.status().message();
    // The compiled graph really is in the low dtype, with an f32 interface.
    const Graph& cg = (*low)->compiled_graph();
    bool has_low = false;
    for (const Value* v : cg.initializers())
      has_low = has_low || v->type.dtype == precision_storage(prec);
    for (const auto& n : cg.nodes())
      for (const Value* v : n->outputs)
        has_low = has_low || (v && v->type.dtype == precision_storage(prec));
    EXPECT_TRUE(has_low);
    for (const Value* v : cg.outputs()) EXPECT_EQ(v->type.dtype, DType::kF32);
    auto ref = Session::from_graph(parse(c.text), "reference");
    ASSERT_TRUE(ref) << ref.status().message();
    for (unsigned seed : {1u, 2u}) {
      auto in = inputs_for(c, seed);
      auto want = (*ref)->run(in);
      ASSERT_TRUE(want) << want.status().message();
      // cuda: step by step, then a CUDA graph capture, then its replay.
      for (int rep = 0; rep < (device == "cuda" ? 3 : 1); ++rep) {
        auto got = (*low)->run(in);
        ASSERT_TRUE(got) << got.status().message();
        ASSERT_EQ(got->size(), want->size());
        for (size_t o = 0; o < got->size(); ++o) {
          ASSERT_EQ((*got)[o].dtype(), DType::kF32);
          CompareResult r =
              compare_tensors((*got)[o], (*want)[o], precision_tolerance(prec, (*want)[o].dtype()));
          EXPECT_TRUE(r.ok) << device << " " << precision_name(prec) << " output " << o << ": "
                            << r.message;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precision, PrecisionRun,
                         ::testing::Combine(::testing::Values("reference", "cpu", "cuda"),
                                            ::testing::Values(Precision::kBF16, Precision::kF16)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  std::string(precision_name(std::get<1>(info.param)));
                         });

TEST(Precision, NamesAndTolerances) {
  for (Precision p : {Precision::kF32, Precision::kTF32, Precision::kBF16, Precision::kF16})
    EXPECT_EQ(precision_from_name(precision_name(p)), p);
  EXPECT_EQ(precision_from_name("fp32"), Precision::kF32);
  EXPECT_FALSE(precision_from_name("int8"));
  // No loosening at f32, and integer outputs stay exact at every precision.
  Tolerance f = precision_tolerance(Precision::kF32, DType::kF32);
  EXPECT_EQ(f.atol, default_tolerance(DType::kF32).atol);
  EXPECT_EQ(f.rtol, default_tolerance(DType::kF32).rtol);
  EXPECT_EQ(precision_tolerance(Precision::kBF16, DType::kI64).atol, 0);
  EXPECT_GT(precision_tolerance(Precision::kBF16, DType::kF32).rtol,
            precision_tolerance(Precision::kF16, DType::kF32).rtol);
}

TEST(Precision, DevicesRefuseWhatTheyCannotRun) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) { y = Relu(x) })";
  for (const char* dev : {"reference", "cpu"}) {
    RunOptions opts;
    opts.precision = Precision::kTF32;
    auto s = Session::from_graph(parse(text), dev, opts);
    ASSERT_FALSE(s) << dev;
    EXPECT_NE(s.status().message().find("tf32"), std::string::npos) << s.status().message();
  }
}

TEST(ConvertPrecision, ConstantsSaturateAndShapeMathStaysF32) {
  auto g = parse(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[8] x) => (float[8] y, float[8] z) <float lowest = {-3.4028234663852886e38}, float big = {100000.0}, float start = {0.0}, float limit = {8.0}, float delta = {1.0}> {
  r = Range(start, limit, delta)
  a = Add(x, r)
  y = Mul(a, lowest)
  z = Mul(x, big)
})");
  ASSERT_TRUE(g);
  ASSERT_TRUE(run_pipeline(*g, {"convert-precision-bf16"}));
  const Value* lowest = g->find_value("lowest");
  ASSERT_TRUE(lowest && lowest->constant);
  ASSERT_EQ(lowest->type.dtype, DType::kBF16);
  float l = lowest->constant->double_at(0);
  EXPECT_TRUE(std::isfinite(l)) << l;
  EXPECT_LT(l, -3.3e38f);
  // Range has no bf16 kernel: it keeps f32 inputs and its result is cast for the Add.
  for (const auto& n : g->nodes()) {
    if (n->op_type != "Range") continue;
    for (const Value* v : n->inputs) EXPECT_EQ(v->type.dtype, DType::kF32);
  }
  for (const Value* o : g->outputs()) EXPECT_EQ(o->type.dtype, DType::kF32);
  EXPECT_EQ(g->outputs()[0]->name, "y");

  auto h = parse(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] z) <float big = {100000.0}> { z = Mul(x, big) })");
  ASSERT_TRUE(run_pipeline(*h, {"convert-precision-fp16"}));
  const Value* big = h->find_value("big");
  ASSERT_TRUE(big && big->type.dtype == DType::kF16);
  EXPECT_EQ(big->constant->double_at(0), 65504.0);  // fp16's largest finite value
}

TEST(ConvertPrecision, IntegerGraphIsUnchanged) {
  auto g = parse(R"(<ir_version: 8, opset_import: ["" : 17]>
g (int64[3] x) => (int64[3] y) { y = Add(x, x) })");
  ASSERT_TRUE(g);
  std::string before = print_graph(*g);
  ASSERT_TRUE(run_pipeline(*g, {"convert-precision-bf16"}));
  EXPECT_EQ(print_graph(*g), before);
}

#if FERRITE_HAVE_CUDA
// Generated kernels over bf16 / f16 buffers and the library kernels compile for sm_90.
TEST(CudaCodegen, LowPrecisionKernelsCompileForSm90) {
  auto nv = cuda::nvrtc();
  if (!nv) GTEST_SKIP() << nv.status().message();
  for (const char* pass : {"convert-precision-bf16", "convert-precision-fp16"}) {
    for (const Case& c : cases()) {
      SCOPED_TRACE(std::string(pass) + " " + c.name);
      auto g = parse(c.text);
      ASSERT_TRUE(g);
      std::vector<std::string> pipeline = default_pipeline();
      pipeline.push_back(pass);
      ASSERT_TRUE(run_pipeline(*g, pipeline));
      LoweringOptions lo;
      lo.low_precision_kernels = true;
      auto lg = lower_graph(*g, lo);
      ASSERT_TRUE(lg) << lg.status().message();
      mark_in_place_candidates(*lg);
      auto src = cuda::CudaDialect().generate(*lg, DeviceProperties{});
      ASSERT_TRUE(src) << src.status().message();
      EXPECT_NE(src->find("unsigned short"), std::string::npos);
      auto cubin = cuda::compile_to_cubin(*src, "sm_90", c.name);
      ASSERT_TRUE(cubin) << cubin.status().message();
    }
  }
  auto lib = cuda::compile_to_cubin(cuda::library_source(), "sm_90", "ferrite_library");
  ASSERT_TRUE(lib) << lib.status().message();
}

// The zoo's models as the cuda device compiles them at bf16 and fp16 ($FERRITE_MODELS_DIR,
// default build/models of this checkout; materialized by `ctest -L model`).
TEST(CudaCodegen, ZooModelsCompileForSm90AtLowPrecision) {
  auto nv = cuda::nvrtc();
  if (!nv) GTEST_SKIP() << nv.status().message();
  const char* env = std::getenv("FERRITE_MODELS_DIR");
  std::filesystem::path dir =
      env && *env ? std::filesystem::path(env)
                  : std::filesystem::path(FERRITE_TEST_DATA_DIR) / ".." / ".." / "build" / "models";
  int compiled = 0;
  for (const char* m : {"mlp", "convnet", "resnet18", "mobilenet_v2", "bert_base", "gpt2"}) {
    auto path = dir / m / "model.onnx";
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) continue;
    for (const char* pass : {"convert-precision-bf16", "convert-precision-fp16"}) {
      SCOPED_TRACE(std::string(m) + " " + pass);
      auto g = import_onnx_file(path);
      ASSERT_TRUE(g) << g.status().message();
      std::vector<std::string> pipeline;
      for (auto& p : default_pipeline())
        if (p != "fuse-conv-activation") pipeline.push_back(p);  // the cuda device's passes
      pipeline.push_back(pass);
      ASSERT_TRUE(run_pipeline(**g, pipeline));
      LoweringOptions lo;
      lo.low_precision_kernels = true;
      auto lg = lower_graph(**g, lo);
      ASSERT_TRUE(lg) << lg.status().message();
      mark_in_place_candidates(*lg);
      auto src = cuda::CudaDialect().generate(*lg, DeviceProperties{});
      ASSERT_TRUE(src) << src.status().message();
      // FERRITE_CUDA_SOURCE_DIR=DIR writes DIR/<m>.<pass>.cu (reading the kernels without a GPU).
      if (const char* out = std::getenv("FERRITE_CUDA_SOURCE_DIR"); out && *out)
        std::ofstream(std::filesystem::path(out) / (std::string(m) + "." + pass + ".cu")) << *src;
      auto cubin = cuda::compile_to_cubin(*src, "sm_90", m);
      ASSERT_TRUE(cubin) << cubin.status().message();
      ++compiled;
    }
  }
  if (compiled == 0) GTEST_SKIP() << "no materialized models under " << dir;
}
#endif

}  // namespace
}  // namespace ferrite
