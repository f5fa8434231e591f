// cuDNN convolution on the `cuda` device (backends/cuda/cuda_cudnn.h). The library tests need no
// GPU (they load cuDNN's symbol table, or skip when the library is absent); the CudaDevice tests
// run Conv variants on a GPU against the reference device, with cuDNN and with
// FERRITE_CUDA_CUDNN=0 (im2col path), three runs each (step by step, graph capture, replay), and
// skip without a GPU.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "test_util.h"

#if FERRITE_HAVE_CUDA
#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_cudnn.h"
#endif

namespace ferrite {
namespace {

#if FERRITE_HAVE_CUDA

std::unique_ptr<Graph> parse(const std::string& text) {
  onnx::ModelProto model;
  auto status = onnx::OnnxParser::Parse(model, text.c_str());
  EXPECT_TRUE(status.IsOK()) << status.ErrorMessage();
  std::string bytes;
  model.SerializeToString(&bytes);
  auto g = import_onnx_bytes(bytes, "");
  EXPECT_TRUE(g) << g.status().message();
  return g ? std::move(*g) : nullptr;
}

Tensor random_f32(const std::vector<int64_t>& dims, std::mt19937& rng) {
  Tensor t = Tensor::zeros(DType::kF32, dims);
  std::uniform_real_distribution<float> u(-2, 2);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// Sets an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  std::string old;
  bool had = false;
  ScopedEnv(const char* n, const char* v) : name(n) {
    if (const char* o = std::getenv(n)) had = true, old = o;
    setenv(n, v, 1);
  }
  ~ScopedEnv() {
    if (had)
      setenv(name.c_str(), old.c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

TEST(CudaLibraries, CudnnSymbolTableLoadsOrSkipsCleanly) {
#if !FERRITE_HAVE_CUDNN
  GTEST_SKIP() << "built without cudnn.h: no cuDNN path";
#else
  auto d = cuda::cudnn();
  if (!d) {
    EXPECT_NE(d.status().message().find("cuDNN"), std::string::npos) << d.status().message();
    GTEST_SKIP() << d.status().message();
  }
  EXPECT_GE((*d)->version, 90000u);
  EXPECT_FALSE((*d)->library.empty());
#define FERRITE_EXPECT_FN(name, sym) EXPECT_NE((*d)->name, nullptr) << sym;
  FERRITE_CUDNN_FNS(FERRITE_EXPECT_FN)
#undef FERRITE_EXPECT_FN
  // Loaded once per process.
  auto again = cuda::cudnn();
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *d);
  EXPECT_STRNE((*d)->cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "");
#endif
}

// Which convolutions go to cuDNN: 16-bit storage always; f32 by the size of the column
// matrix, so that batch 1 keeps im2col and a serving batch takes cuDNN (measured both ways).
TEST(CudaLibraries, CudnnTakesF32ConvolutionsByColumnBytes) {
  ScopedEnv none("FERRITE_CUDA_CUDNN", "");
  ScopedEnv no_override("FERRITE_CUDA_CUDNN_F32_MB", "");
  EXPECT_TRUE(cuda::cudnn_for(DType::kBF16, 0));
  EXPECT_TRUE(cuda::cudnn_for(DType::kF16, 1));
  // ResNet-50's 3x3 layer at 56x56, 64 channels: 7 MB of columns at batch 1, 231 MB at 32.
  const int64_t b1 = int64_t{64} * 9 * 56 * 56 * 4;
  EXPECT_FALSE(cuda::cudnn_for(DType::kF32, b1));
  EXPECT_TRUE(cuda::cudnn_for(DType::kF32, 32 * b1));
  EXPECT_FALSE(cuda::cudnn_for(DType::kF32, cuda::kF32CudnnMinBytes));
  EXPECT_TRUE(cuda::cudnn_for(DType::kF32, cuda::kF32CudnnMinBytes + 1));
  {
    ScopedEnv mb("FERRITE_CUDA_CUDNN_F32_MB", "4");
    EXPECT_TRUE(cuda::cudnn_for(DType::kF32, b1));
  }
  {
    ScopedEnv bad("FERRITE_CUDA_CUDNN_F32_MB", "lots");  // ignored: the default stays
    EXPECT_FALSE(cuda::cudnn_for(DType::kF32, b1));
  }
  {
    ScopedEnv off("FERRITE_CUDA_CUDNN", "0");
    EXPECT_FALSE(cuda::cudnn_for(DType::kBF16, 0));
  }
  ScopedEnv all("FERRITE_CUDA_CUDNN", "1");
  EXPECT_TRUE(cuda::cudnn_for(DType::kF32, 0));
}

TEST(CudaLibraries, CudnnDeclinesWhatItCannotTake) {
  cuda::CudnnConvProblem q;
  q.p = cuda::ConvParams{};
  q.p.N = 2, q.p.C = 4, q.p.H = 9, q.p.W = 11, q.p.K = 6, q.p.KH = 3, q.p.KW = 3;
  q.p.OH = 9, q.p.OW = 11, q.p.sh = q.p.sw = q.p.dh = q.p.dw = 1, q.p.groups = 1;
  q.p.ph = q.p.pw = 1, q.ph_end = q.pw_end = 1;
  EXPECT_EQ(cuda::CudnnConv::unsupported(q), "");
  q.dtype = DType::kBF16;
  EXPECT_EQ(cuda::CudnnConv::unsupported(q), "");
  q.dtype = DType::kF64;
  EXPECT_NE(cuda::CudnnConv::unsupported(q), "");
  q.dtype = DType::kF32;
  q.ph_end = 2;
  EXPECT_NE(cuda::CudnnConv::unsupported(q).find("asymmetric"), std::string::npos);
  q.ph_end = 1;
  q.p.N = 0;
  EXPECT_NE(cuda::CudnnConv::unsupported(q), "");
}

// Conv variants of the zoo and beyond: groups 1 / depthwise / grouped, strides, symmetric and
// asymmetric pads (the latter declined by cuDNN: im2col), dilations, bias or not, 1x1, a 7x7
// stem followed by ReLU (the cuda pipeline keeps Conv -> Relu as two steps).
const char* kConvModel = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[b,8,h,w] x, float[16,8,3,3] w1, float[16] b1, float[8,1,3,3] w2, float[8] b2,
   float[6,4,3,3] w3, float[5,8,1,1] w4, float[5] b4, float[4,8,7,7] w5, float[4] b5,
   float[4,8,3,3] w6, float[8,2,3,3] w7)
    => (float[b,16,?,?] y1, float[b,8,?,?] y2, float[b,6,?,?] y3, float[b,5,h,w] y4,
        float[b,4,?,?] y5, float[b,4,?,?] y6, float[b,8,?,?] y7) {
  y1 = Conv<strides = [2, 2], pads = [1, 1, 1, 1]>(x, w1, b1)
  y2 = Conv<group = 8, strides = [2, 2], pads = [1, 1, 1, 1]>(x, w2, b2)
  y3 = Conv<group = 2, dilations = [2, 2], pads = [2, 2, 2, 2]>(x, w3)
  y4 = Conv(x, w4, b4)
  c5 = Conv<strides = [2, 2], pads = [3, 3, 3, 3]>(x, w5, b5)
  y5 = Relu(c5)
  y6 = Conv<pads = [0, 1, 2, 1]>(x, w6)
  y7 = Conv<group = 4, strides = [1, 2], dilations = [1, 2], pads = [0, 2, 0, 2]>(x, w7)
}
)";

void check_conv_model(const char* cudnn_env) {
  ScopedEnv env("FERRITE_CUDA_CUDNN", cudnn_env);
  auto gpu = Session::from_graph(parse(kConvModel), "cuda");
  if (!gpu) GTEST_SKIP() << "no GPU: " << gpu.status().message();
  auto ref = Session::from_graph(parse(kConvModel), "reference");
  ASSERT_TRUE(ref) << ref.status().message();
  std::mt19937 rng(5);
  const std::vector<std::pair<const char*, std::vector<int64_t>>> weights = {
      {"w1", {16, 8, 3, 3}}, {"b1", {16}},         {"w2", {8, 1, 3, 3}}, {"b2", {8}},
      {"w3", {6, 4, 3, 3}},  {"w4", {5, 8, 1, 1}}, {"b4", {5}},          {"w5", {4, 8, 7, 7}},
      {"b5", {4}},           {"w6", {4, 8, 3, 3}}, {"w7", {8, 2, 3, 3}}};
  for (std::vector<int64_t> xd :
       {std::vector<int64_t>{2, 8, 9, 11}, {1, 8, 16, 16}, {3, 8, 5, 7}}) {
    SCOPED_TRACE(::testing::Message() << "x " << xd[0] << "x8x" << xd[2] << "x" << xd[3]
                                      << " FERRITE_CUDA_CUDNN=" << cudnn_env);
    std::vector<Session::NamedInput> in{{"x", random_f32(xd, rng)}};
    for (const auto& [name, dims] : weights) in.push_back({name, random_f32(dims, rng)});
    auto want = (*ref)->run(in);
    ASSERT_TRUE(want) << want.status().message();
    // Run 1 runs step by step, run 2 captures a CUDA graph, run 3 replays it.
    for (int rep = 0; rep < 3; ++rep) {
      auto got = (*gpu)->run(in);
      ASSERT_TRUE(got) << got.status().message();
      ASSERT_EQ(got->size(), want->size());
      for (size_t o = 0; o < got->size(); ++o) {
        const Tensor &a = (*got)[o], &b = (*want)[o];
        ASSERT_EQ(a.dims(), b.dims()) << "output " << o;
        for (int64_t i = 0; i < a.numel(); ++i) {
          const double x = a.data<float>()[i], y = b.data<float>()[i];
          ASSERT_NEAR(x, y, 1e-4 * (1 + std::fabs(y)))
              << "run " << rep << " output " << o << " element " << i;
        }
      }
    }
  }
}

TEST(CudaDevice, CudnnConvolutionVariants) {
  check_conv_model("1");
}

TEST(CudaDevice, Im2colConvolutionVariantsWithCudnnOff) {
  check_conv_model("0");
}

// cuDNN takes the zoo's convolution shapes at f32 (FMA math, no FFT / Winograd) and bf16, with
// the algorithm filter of cuda_cudnn.cpp; the f32 results match the reference.
TEST(CudaDevice, CudnnTakesZooConvolutionShapes) {
  auto be = cuda::open_cuda_backend(0);
  if (!be) GTEST_SKIP() << "no GPU: " << be.status().message();
#if !FERRITE_HAVE_CUDNN
  GTEST_SKIP() << "built without cudnn.h";
#else
  if (!cuda::cudnn()) GTEST_SKIP() << cuda::cudnn().status().message();
  ScopedEnv env("FERRITE_CUDA_CUDNN", "1");
  ASSERT_TRUE((*be)->rt()->make_current().is_ok());
  cuda::CudnnConv* dnn = (*be)->conv_library();
  ASSERT_NE(dnn, nullptr);
  cuda::CudaRuntime* rt = (*be)->rt();
  struct Shape {
    int64_t n, c, hw, k, kk, s, pad, groups;
  };
  // resnet18 stem / 3x3 / downsample 1x1, mobilenet_v2 depthwise and pointwise.
  const Shape shapes[] = {{2, 3, 64, 64, 7, 2, 3, 1},      {2, 64, 28, 64, 3, 1, 1, 1},
                          {2, 64, 28, 128, 1, 2, 0, 1},    {2, 96, 28, 96, 3, 2, 1, 96},
                          {2, 144, 14, 144, 3, 1, 1, 144}, {2, 32, 14, 16, 1, 1, 0, 1}};
  std::mt19937 rng(3);
  for (const Shape& s : shapes) {
    cuda::CudnnConvProblem q;
    auto& p = q.p;
    p.N = s.n, p.C = s.c, p.H = p.W = s.hw, p.K = s.k, p.KH = p.KW = s.kk;
    p.sh = p.sw = s.s, p.ph = p.pw = s.pad, p.dh = p.dw = 1, p.groups = s.groups;
    p.OH = p.OW = (s.hw + 2 * s.pad - s.kk) / s.s + 1;
    q.ph_end = q.pw_end = s.pad;
    SCOPED_TRACE(::testing::Message() << "C " << s.c << " K " << s.k << " k " << s.kk << " s "
                                      << s.s << " groups " << s.groups);
    ASSERT_EQ(cuda::CudnnConv::unsupported(q), "");
    Tensor x = random_f32({p.N, p.C, p.H, p.W}, rng);
    Tensor w = random_f32({p.K, p.C / p.groups, p.KH, p.KW}, rng);
    Tensor y = Tensor::zeros(DType::kF32, {p.N, p.K, p.OH, p.OW});
    std::vector<void*> bufs;
    auto upload = [&](const Tensor& t) -> void* {
      auto d = rt->allocate(static_cast<size_t>(t.numel()) * 4, 256);
      EXPECT_TRUE(d) << d.status().message();
      if (!d) return nullptr;
      bufs.push_back(*d);
      EXPECT_TRUE(
          rt->copy_to_device(*d, t.data<float>(), static_cast<size_t>(t.numel()) * 4).is_ok());
      return *d;
    };
    void* dx = upload(x);
    void* dw = upload(w);
    void* dy = upload(y);
    auto scratch = [&](size_t bytes) -> Expected<void*> {
      FERRITE_ASSIGN_OR_RETURN(void* d, rt->allocate(std::max<size_t>(bytes, 16), 256));
      bufs.push_back(d);
      return d;
    };
    for (DType dt : {DType::kF32, DType::kBF16}) {
      q.dtype = dt;
      // bf16: only whether cuDNN takes it (the values are the f32 buffers' bits; the session
      // tests check bf16 results through --precision bf16).
      auto done = dnn->run(q, dx, dw, dy, scratch);
      ASSERT_TRUE(done) << done.status().message();
      if (dt != DType::kF32) {
        // Reported, not required: without cuDNN the bf16 call takes im2col (checked elsewhere).
        if (!*done)
          std::printf("[ note ] cuDNN declined this shape at bf16 (FERRITE_LOG=conv says why)\n");
        continue;
      }
      EXPECT_TRUE(*done) << "cuDNN declined f32 (FERRITE_LOG=conv says why)";
      Tensor got = Tensor::zeros(DType::kF32, {p.N, p.K, p.OH, p.OW});
      ASSERT_TRUE(
          rt->copy_to_host(got.data<float>(), dy, static_cast<size_t>(got.numel()) * 4).is_ok());
      ASSERT_TRUE(rt->synchronize().is_ok());
      std::string text =
          "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[" + std::to_string(p.N) + "," +
          std::to_string(p.C) + "," + std::to_string(p.H) + "," + std::to_string(p.W) +
          "] x, float[" + std::to_string(p.K) + "," + std::to_string(p.C / p.groups) + "," +
          std::to_string(p.KH) + "," + std::to_string(p.KW) +
          "] w) => (float[?,?,?,?] y) {\n  y = Conv<group = " + std::to_string(p.groups) +
          ", strides = [" + std::to_string(s.s) + ", " + std::to_string(s.s) + "], pads = [" +
          std::to_string(s.pad) + ", " + std::to_string(s.pad) + ", " + std::to_string(s.pad) +
          ", " + std::to_string(s.pad) + "]>(x, w)\n}\n";
      auto ref = Session::from_graph(parse(text), "reference");
      ASSERT_TRUE(ref) << ref.status().message();
      auto want = (*ref)->run({{"x", x}, {"w", w}});
      ASSERT_TRUE(want) << want.status().message();
      const Tensor& r = (*want)[0];
      ASSERT_EQ(r.dims(), got.dims());
      for (int64_t i = 0; i < r.numel(); ++i)
        ASSERT_NEAR(got.data<float>()[i], r.data<float>()[i],
                    1e-4 * (1 + std::fabs(r.data<float>()[i])))
            << "element " << i;
    }
    ASSERT_TRUE(rt->synchronize().is_ok());
    for (void* b : bufs) rt->free(b);
  }
  EXPECT_GT(dnn->calls(), 0);
#endif
}

#endif  // FERRITE_HAVE_CUDA

}  // namespace
}  // namespace ferrite
