// The fused attention kernel of the cuda device (backends/cuda/cuda_attention.h).
//  - CudaCodegen.Flash*: the kernel source compiles with NVRTC for sm_90 for every tile and
//    storage type, and the tile choice follows the device's limits (no GPU needed).
//  - CudaDevice.FusedAttention*: ferrite.Attention on the GPU against the reference device on
//    random shapes (head dims 32/64/80/128, S != T, odd lengths, masks with -inf, causal,
//    broadcast batches), the bf16/f16 storage instantiations, and a timing of fused vs 3-step
//    (printed). Skipped without a GPU.
//  - CudnnSdpa* / CudnnAttention*: the mapping to cuDNN's SDPA operation and its results.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <tuple>

#include "test_util.h"

#if FERRITE_HAVE_CUDA
#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_attention.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_native_ops.h"
#endif

namespace ferrite {
namespace {

#if FERRITE_HAVE_CUDA

std::unique_ptr<Graph> parse(const std::string& text) {
  return ferrite::testing::parse_onnx_text(text);
}

TEST(CudaCodegen, FlashAttentionCompilesForSm90) {
  auto nv = cuda::nvrtc();
  if (!nv) GTEST_SKIP() << nv.status().message();
  for (int dp : {32, 64, 96, 128})
    for (int bm : {16, 32, 64}) {
      std::string src = cuda::flash_module_source(DType::kF32, dp, bm);
      ASSERT_FALSE(src.empty());
      auto c = cuda::compile_to_cubin(src, "sm_90", "flash_test");
      ASSERT_TRUE(c) << "dp " << dp << " bm " << bm << ": " << c.status().message();
      EXPECT_GT(c->cubin.size(), 1000u);
    }
  // Turing (no cp.async; the oldest architecture this CUDA compiles for) takes plain copies.
  {
    auto c = cuda::compile_to_cubin(cuda::flash_module_source(DType::kF32, 64, 64), "sm_75",
                                    "flash_test");
    ASSERT_TRUE(c) << "sm_75: " << c.status().message();
  }
  // The same source instantiates for 2-byte storage with f32 math.
  for (DType t : {DType::kBF16, DType::kF16})
    for (int dp : {64, 128}) {
      auto c = cuda::compile_to_cubin(cuda::flash_module_source(t, dp, 32), "sm_90", "flash_test");
      ASSERT_TRUE(c) << dtype_name(t) << " dp " << dp << ": " << c.status().message();
    }
  EXPECT_TRUE(cuda::flash_module_source(DType::kF64, 64, 32).empty());
}

TEST(CudaCodegen, TensorCoreFlashAttentionCompilesForSm80AndSm90) {
  auto nv = cuda::nvrtc();
  if (!nv) GTEST_SKIP() << nv.status().message();
  // Every head-dim bucket in bf16 on sm_90; f16 and sm_80 (the oldest taken) on two.
  const std::vector<std::tuple<DType, int, const char*>> builds = {
      {DType::kBF16, 32, "sm_90"},  {DType::kBF16, 64, "sm_90"}, {DType::kBF16, 96, "sm_90"},
      {DType::kBF16, 128, "sm_90"}, {DType::kF16, 64, "sm_90"},  {DType::kF16, 128, "sm_80"}};
  for (const auto& [t, dp, arch] : builds) {
    std::string src = cuda::flash_tc_module_source(t, dp);
    ASSERT_FALSE(src.empty());
    auto c = cuda::compile_to_cubin(src, arch, "flash_tc_test");
    ASSERT_TRUE(c) << dtype_name(t) << " dp " << dp << " " << arch << ": " << c.status().message();
    EXPECT_GT(c->cubin.size(), 1000u);
  }
  EXPECT_TRUE(cuda::flash_tc_module_source(DType::kF32, 64).empty());
}

cuda::FlashProblem problem(std::vector<int64_t> batch, int64_t S, int64_t T, int64_t D,
                           int64_t Dv) {
  cuda::FlashProblem p;
  p.batch = std::move(batch);
  p.S = S, p.T = T, p.D = D, p.Dv = Dv;
  p.q_bs.assign(p.batch.size(), 0);
  p.k_bs = p.v_bs = p.m_bs = p.q_bs;
  return p;
}

TEST(CudaCodegen, TensorCoreFlashConfig) {
  // bf16 / f16 on sm_80+ only, 64-row tiles, head dims to 128.
  auto p = problem({8, 12}, 128, 128, 64, 64);
  auto c = cuda::choose_flash_tc_config(p, DType::kBF16, "sm_90", 227 << 10);
  EXPECT_EQ(c.bm, 64);
  EXPECT_EQ(c.dp, 64);
  EXPECT_EQ(c.grid, 8 * 12 * 2);
  EXPECT_LE(c.smem, 48 << 10);
  EXPECT_EQ(cuda::choose_flash_tc_config(p, DType::kF32, "sm_90", 227 << 10).bm, 0);
  EXPECT_EQ(cuda::choose_flash_tc_config(p, DType::kF16, "sm_75", 227 << 10).bm, 0);
  EXPECT_EQ(
      cuda::choose_flash_tc_config(problem({2}, 9, 9, 160, 160), DType::kBF16, "sm_90", 227 << 10)
          .bm,
      0);
  // Head dim 128 needs more than the default 48 KiB: taken only where the opt-in allows it.
  auto big = problem({2}, 100, 100, 128, 128);
  EXPECT_EQ(cuda::choose_flash_tc_config(big, DType::kBF16, "sm_90", 48 << 10).bm, 0);
  EXPECT_EQ(cuda::choose_flash_tc_config(big, DType::kBF16, "sm_90", 227 << 10).dp, 128);
}

TEST(CudaCodegen, PipelinedFlashAttentionNeedsAlignedRows) {
  // The cp.async variant: 16-byte aligned operands, head dims and batch strides on 8 elements.
  auto p = problem({32, 12}, 197, 197, 64, 64);
  p.q_bs = p.k_bs = p.v_bs = {12 * 197 * 64, 197 * 64};
  auto c = cuda::choose_flash_tc_config(p, DType::kBF16, "sm_90", 227 << 10, true);
  EXPECT_TRUE(c.pipelined);
  EXPECT_EQ(c.smem, 2 * 5 * 64 * (64 + 8));
  EXPECT_EQ(cuda::flash_tc_kernel_name(c.dp, c.pipelined), "fe_flash_pipe_d64");
  EXPECT_FALSE(cuda::choose_flash_tc_config(p, DType::kBF16, "sm_90", 227 << 10, false).pipelined);
  auto odd = p;
  odd.D = odd.Dv = 60;  // 120-byte rows
  EXPECT_FALSE(cuda::choose_flash_tc_config(odd, DType::kBF16, "sm_90", 227 << 10, true).pipelined);
  auto stride = p;
  stride.k_bs[1] = 197 * 64 + 4;
  EXPECT_FALSE(
      cuda::choose_flash_tc_config(stride, DType::kBF16, "sm_90", 227 << 10, true).pipelined);
  // Head dim 128: 87 KiB, only with the opt-in.
  auto big = problem({2}, 100, 100, 128, 128);
  EXPECT_FALSE(cuda::choose_flash_tc_config(big, DType::kBF16, "sm_90", 64 << 10, true).pipelined);
  EXPECT_TRUE(cuda::choose_flash_tc_config(big, DType::kBF16, "sm_90", 227 << 10, true).pipelined);
}

TEST(CudaCodegen, FlashConfigFollowsDeviceLimits) {
  std::string why;
  // Small problems (bert_base of the zoo: 2 x 12 heads, S 64) take small row tiles so that the
  // 132 SMs get blocks; large ones the largest tile.
  auto small = cuda::choose_flash_config(problem({2, 12}, 64, 64, 64, 64), 132, 227 << 10, &why);
  EXPECT_TRUE(why.empty()) << why;
  EXPECT_EQ(small.dp, 64);
  EXPECT_EQ(small.bm, 16);
  EXPECT_EQ(small.grid, 2 * 12 * 4);
  auto big = cuda::choose_flash_config(problem({8, 12}, 384, 384, 64, 64), 132, 227 << 10, &why);
  EXPECT_TRUE(why.empty()) << why;
  EXPECT_EQ(big.bm, 64);
  EXPECT_EQ(big.grid, 8 * 12 * 6);
  // Head dims round up to a bucket; every choice fits the shared memory it was given.
  for (int64_t d : {1, 8, 32, 33, 64, 80, 96, 100, 128})
    for (int64_t limit : {int64_t{48} << 10, int64_t{100} << 10, int64_t{227} << 10}) {
      auto c = cuda::choose_flash_config(problem({3}, 200, 100, d, d), 132, limit, &why);
      ASSERT_TRUE(why.empty()) << d << ": " << why;
      EXPECT_GE(c.dp, d);
      EXPECT_LT(c.dp - d, 32);
      EXPECT_LE(c.smem, limit);
      EXPECT_GT(c.bm, 0);
    }
  // A short query (S <= 8) never gets a 64-row tile.
  EXPECT_EQ(cuda::choose_flash_config(problem({1000}, 5, 5, 8, 8), 132, 227 << 10, &why).bm, 16);
  cuda::choose_flash_config(problem({2}, 10, 10, 129, 64), 132, 227 << 10, &why);
  EXPECT_NE(why.find("head dim"), std::string::npos) << why;
  cuda::choose_flash_config(problem({2}, 10, 10, 128, 128), 132, 16 << 10, &why);
  EXPECT_NE(why.find("shared memory"), std::string::npos) << why;
}

// ---- GPU tests ------------------------------------------------------------------------------

struct Operand {
  std::string name;
  std::vector<int64_t> dims;
  double minus_inf = 0;  // fraction of elements set to -inf (masks)
};

Tensor random_f32(const std::vector<int64_t>& dims, std::mt19937& rng, double minus_inf) {
  Tensor t = Tensor::zeros(DType::kF32, dims);
  std::uniform_real_distribution<double> u(-2, 2), f(0, 1);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = minus_inf > 0 && f(rng) < minus_inf
                             ? -std::numeric_limits<float>::infinity()
                             : static_cast<float>(u(rng));
  return t;
}

// Element-wise |got - want| <= tol * (1 + |want|), NaN where the reference has NaN.
void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.dims(), want.dims()) << what;
  int bad = 0;
  for (int64_t i = 0; i < got.numel() && bad < 5; ++i) {
    const double x = got.data<float>()[i], y = want.data<float>()[i];
    const bool ok = std::isnan(y) ? std::isnan(x) : std::fabs(x - y) <= tol * (1 + std::fabs(y));
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << " element " << i << ": got " << x << ", reference " << y;
    }
  }
}

// Runs `text` on cuda and reference for each input set (three cuda runs: step by step, graph
// capture, replay), with f32's tolerance of the other cuda tests.
void check_attention(const std::string& text, const std::vector<std::vector<Operand>>& runs) {
  auto gpu = Session::from_graph(parse(text), "cuda");
  if (!gpu) GTEST_SKIP() << "no GPU: " << gpu.status().message();
  auto ref = Session::from_graph(parse(text), "reference");
  ASSERT_TRUE(ref) << ref.status().message();
  std::mt19937 rng(1234);
  for (size_t r = 0; r < runs.size(); ++r) {
    std::vector<Session::NamedInput> inputs;
    std::string shapes;
    for (const Operand& o : runs[r]) {
      inputs.push_back({o.name, random_f32(o.dims, rng, o.minus_inf)});
      shapes += " " + o.name + dims_to_string(o.dims);
    }
    auto want = (*ref)->run(inputs);
    ASSERT_TRUE(want) << want.status().message();
    for (int rep = 0; rep < 3; ++rep) {
      auto got = (*gpu)->run(inputs);
      ASSERT_TRUE(got) << got.status().message();
      ASSERT_EQ(got->size(), want->size());
      for (size_t o = 0; o < got->size(); ++o)
        expect_close((*got)[o], (*want)[o], 1e-4,
                     "run " + std::to_string(r) + shapes + " rep " + std::to_string(rep) +
                         " output " + std::to_string(o));
    }
  }
}

const char* kAttentionModel = R"(<ir_version: 8, opset_import: ["" : 17, "ferrite" : 1]>
g (float[b,h,s,d] q, float[b,h,t,d] k, float[b,h,t,e] v, float[b,1,1,t] m, float[b,h,s,t] m2)
    => (float[b,h,s,e] y1, float[b,h,s,e] y2, float[b,h,s,e] y3, float[b,h,s,e] y4,
        float[b,h,s,e] y5) {
  y1 = ferrite.Attention<nan_to_zero = 1>(q, k, v, m)
  y2 = ferrite.Attention<causal = 1>(q, k, v)
  y3 = ferrite.Attention<causal = 1, scale = 0.3>(q, k, v, m2)
  y4 = ferrite.Attention(q, k, v)
  y5 = ferrite.Attention<nan_to_zero = 1, causal = 1>(q, k, v, m2)
}
)";

std::vector<Operand> shapes(int64_t b, int64_t h, int64_t s, int64_t t, int64_t d, int64_t e,
                            double pad = 0.1) {
  return {{"q", {b, h, s, d}},
          {"k", {b, h, t, d}},
          {"v", {b, h, t, e}},
          {"m", {b, 1, 1, t}, pad},
          {"m2", {b, h, s, t}, pad}};
}

// Head dims 32, 64, 80, 128 (and small / unequal D, Dv), S != T, odd lengths, several key tiles,
// masks with -inf entries (rows fully masked by m2 in the short ones: NaN, or 0 under
// nan_to_zero), causal with S < T and S > T.
TEST(CudaDevice, FusedAttentionMatchesReference) {
  check_attention(kAttentionModel,
                  {shapes(2, 3, 5, 7, 8, 6, 0.5), shapes(1, 2, 70, 70, 32, 32),
                   shapes(2, 2, 77, 93, 64, 64), shapes(1, 3, 130, 61, 80, 80),
                   shapes(3, 1, 33, 200, 128, 128), shapes(1, 2, 300, 300, 64, 64, 0.02),
                   shapes(2, 1, 17, 1, 128, 100), shapes(1, 1, 1, 129, 96, 40)});
}

// Grouped-query attention as transformers exports it (repeat_kv: Unsqueeze, Expand, Reshape of K
// and V) on cuda's pipeline against the reference. (With fold-gqa-expand in cuda's pipeline, the
// rank-5 Attention with K and V broadcast over the group dim, it passed on an H200 in session 28;
// the pass is not in any pipeline yet, see its file.)
TEST(CudaDevice, GroupedQueryAttentionMatchesReference) {
  const std::string text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[B,8,S,64] q, float[B,2,T,64] k, float[B,2,T,64] v, float[B,1,S,T] mask) => (float[B,8,S,64] y) {
  ax = Constant<value = int64[1] {2}>()
  es = Constant<value = int64[5] {1, 2, 4, 1, 64}>()
  rs = Constant<value = int64[4] {0, 8, -1, 64}>()
  ku = Unsqueeze(k, ax)
  ke = Expand(ku, es)
  kr = Reshape(ke, rs)
  vu = Unsqueeze(v, ax)
  ve = Expand(vu, es)
  vr = Reshape(ve, rs)
  kt = Transpose<perm = [0, 1, 3, 2]>(kr)
  s = MatMul(q, kt)
  c = Constant<value = float {0.125}>()
  ss = Mul(s, c)
  z = Add(ss, mask)
  p = Softmax<axis = -1>(z)
  y = MatMul(p, vr)
}
)";
  auto set = [](int64_t B, int64_t S, int64_t T) {
    return std::vector<Operand>{{"q", {B, 8, S, 64}},
                                {"k", {B, 2, T, 64}},
                                {"v", {B, 2, T, 64}},
                                {"mask", {B, 1, S, T}, 0.2}};
  };
  check_attention(text, {set(2, 9, 11), set(1, 70, 70), set(3, 1, 33)});
}

// Batch dims that broadcast (K and V shared by the heads, Q shared by the batch), and a mask
// broadcast along S but not T per head.
TEST(CudaDevice, FusedAttentionBroadcastBatch) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 17, "ferrite" : 1]>
g (float[b,h,s,d] q, float[b,1,t,d] k, float[1,h,t,d] v, float[1,h,t,d] q1, float[h,1,t] m)
    => (float[b,h,s,d] y1, float[b,h,t,d] y2) {
  y1 = ferrite.Attention<nan_to_zero = 1>(q, k, v, m)
  y2 = ferrite.Attention(q1, k, v)
}
)";
  auto set = [](int64_t b, int64_t h, int64_t s, int64_t t, int64_t d) {
    return std::vector<Operand>{{"q", {b, h, s, d}},
                                {"k", {b, 1, t, d}},
                                {"v", {1, h, t, d}},
                                {"q1", {1, h, t, d}},
                                {"m", {h, 1, t}, 0.2}};
  };
  check_attention(text, {set(2, 3, 9, 11, 64), set(3, 4, 65, 40, 80)});
}

// The 3-step path (FERRITE_CUDA_FLASH=0) gives the same results: it is the fallback.
TEST(CudaDevice, FusedAttentionDisabledUsesThreeSteps) {
  setenv("FERRITE_CUDA_FLASH", "0", 1);
  check_attention(kAttentionModel, {shapes(2, 3, 5, 7, 8, 6, 0.5), shapes(2, 2, 77, 93, 64, 64)});
  unsetenv("FERRITE_CUDA_FLASH");
}

// The bf16 and f16 instantiations on the GPU, called directly (the rest of the backend does not
// feed these dtypes yet): inputs rounded to the storage type, the reference run in f32 on the
// rounded values, tolerance f32's plus the output's rounding (2^-8 bf16, 2^-11 f16, relative).
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t h) {
  uint32_t u = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t to_f16(float f) {  // values here are normal halves (|x| in [2^-14, 65504])
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000;
  const int exp = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
  uint32_t man = u & 0x7fffff;
  if (exp <= 0) return static_cast<uint16_t>(sign);  // flush tiny values (test data avoids them)
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (man >> 13);
  const uint32_t rest = man & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}
float from_f16(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t u = exp == 0 ? sign : sign | ((exp - 15 + 127) << 23) | (man << 13);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct GpuBuffers {
  cuda::CudaRuntime* rt;
  std::vector<void*> ptrs;
  ~GpuBuffers() {
    for (void* p : ptrs) rt->free(p);
  }
  void* upload(const void* host, size_t bytes) {
    auto p = rt->allocate(std::max<size_t>(bytes, 16), 256);
    EXPECT_TRUE(p) << p.status().message();
    if (!p) return nullptr;
    ptrs.push_back(*p);
    if (host) {
      EXPECT_TRUE(rt->copy_to_device(*p, host, bytes).is_ok());
    }
    return *p;
  }
};

// How the mask of check_half_attention is laid out: one row per batch ([B, 1, 1, T]) or one per
// query ([B, 1, S, T]), rows `pad` elements longer than T in memory, a fraction of -inf entries.
struct HalfMask {
  int64_t T = 71;
  bool per_query = false;
  int64_t pad = 0;
  bool causal = true;
  double minus_inf = 0;
};

void check_half_attention(cuda::CudaBackend& backend, int64_t D, const HalfMask& mc);

TEST(CudaDevice, FusedAttentionHalfStorage) {
  auto be = cuda::open_cuda_backend(0);
  if (!be) GTEST_SKIP() << "no GPU: " << be.status().message();
  // Both tensor-core variants (the pipelined one takes these aligned calls unless turned off),
  // head dims 32, 64 and 128 (87 KiB of shared memory in the pipelined kernel), and the mask
  // layouts of the pipelined kernel: element by element (T 71: rows off 16 bytes) and staged in
  // shared memory (one row per batch, one per query, a padded row whose last 16-byte chunk is
  // partly past T), with fully masked rows (NaN) among the per-query ones.
  const HalfMask masks[] = {{71, false, 0, true, 0},
                            {72, false, 0, true, 0},
                            {136, true, 0, false, 0.3},
                            {71, true, 1, true, 0.1},
                            {5, true, 3, false, 0.5}};
  for (const char* pipe : {"1", "0"})
    for (int64_t D : {32, 64, 128})
      for (const HalfMask& mc : masks) {
        SCOPED_TRACE(std::string("FERRITE_CUDA_FLASH_PIPE=") + pipe + " D " + std::to_string(D) +
                     " T " + std::to_string(mc.T) + (mc.per_query ? " per query" : " per batch") +
                     " pad " + std::to_string(mc.pad) + (mc.causal ? " causal" : ""));
        setenv("FERRITE_CUDA_FLASH_PIPE", pipe, 1);
        check_half_attention(**be, D, mc);
      }
  unsetenv("FERRITE_CUDA_FLASH_PIPE");
}

void check_half_attention(cuda::CudaBackend& backend, int64_t D, const HalfMask& mc) {
  const int64_t B = 2, H = 3, S = 45, T = mc.T, Sm = mc.per_query ? S : 1, ld = T + mc.pad;
  const std::string text = std::string(R"(<ir_version: 8, opset_import: ["" : 17, "ferrite" : 1]>
g (float[b,h,s,d] q, float[b,h,t,d] k, float[b,h,t,d] v, float[b,1,)") +
                           (mc.per_query ? "s" : "1") +
                           R"(,t] m) => (float[b,h,s,d] y) {
  y = ferrite.Attention<causal = )" +
                           (mc.causal ? "1" : "0") + R"(>(q, k, v, m)
}
)";
  auto ref = Session::from_graph(parse(text), "reference");
  ASSERT_TRUE(ref);
  std::mt19937 rng(9);
  for (DType dt : {DType::kBF16, DType::kF16}) {
    const bool bf = dt == DType::kBF16;
    auto round = [&](Tensor t, std::vector<uint16_t>* bits) {
      for (int64_t i = 0; i < t.numel(); ++i) {
        float& x = t.data<float>()[i];
        if (std::fabs(x) < 1e-3f) x = 1e-3f;  // keep f16 values normal
        bits->push_back(bf ? to_bf16(x) : to_f16(x));
        x = bf ? from_bf16(bits->back()) : from_f16(bits->back());
      }
      return t;
    };
    std::vector<uint16_t> qb, kb, vb, mb;
    Tensor q = round(random_f32({B, H, S, D}, rng, 0), &qb);
    Tensor k = round(random_f32({B, H, T, D}, rng, 0), &kb);
    Tensor v = round(random_f32({B, H, T, D}, rng, 0), &vb);
    Tensor m = round(random_f32({B, 1, Sm, T}, rng, mc.minus_inf), &mb);
    auto want = (*ref)->run({{"q", q}, {"k", k}, {"v", v}, {"m", m}});
    ASSERT_TRUE(want) << want.status().message();
    std::vector<uint16_t> mpad(B * Sm * ld, 0x7fc0);  // NaN between rows: must not be read
    for (int64_t r = 0; r < B * Sm; ++r)
      std::copy(mb.begin() + r * T, mb.begin() + (r + 1) * T, mpad.begin() + r * ld);
    GpuBuffers g{backend.rt(), {}};
    void* dq = g.upload(qb.data(), qb.size() * 2);
    void* dk = g.upload(kb.data(), kb.size() * 2);
    void* dv = g.upload(vb.data(), vb.size() * 2);
    void* dm = g.upload(mpad.data(), mpad.size() * 2);
    void* dy = g.upload(nullptr, B * H * S * D * 2);
    cuda::FlashProblem p = problem({B, H}, S, T, D, D);
    p.q_bs = {H * S * D, S * D};
    p.k_bs = p.v_bs = {H * T * D, T * D};
    p.m_bs = {Sm * ld, 0};
    p.m_s = mc.per_query ? ld : 0, p.m_t = 1;
    p.has_mask = true;
    p.causal = mc.causal;
    p.scale = static_cast<float>(1 / std::sqrt(double(D)));
    ASSERT_EQ(backend.flash->unsupported(p, dt), "");
    ASSERT_TRUE(backend.flash->run(p, dt, dq, dk, dv, dm, dy).is_ok());
    std::vector<uint16_t> yb(B * H * S * D);
    ASSERT_TRUE(backend.rt()->copy_to_host(yb.data(), dy, yb.size() * 2).is_ok());
    Tensor got = Tensor::zeros(DType::kF32, {B, H, S, D});
    for (size_t i = 0; i < yb.size(); ++i)
      got.data<float>()[i] = bf ? from_bf16(yb[i]) : from_f16(yb[i]);
    const double out_round = bf ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    expect_close(got, (*want)[0], 1e-4 + out_round, std::string(dtype_name(dt)));
  }
}

// cuDNN's SDPA operation takes unmasked, non-causal bf16 / f16 attention in any of
// ferrite.Attention's operand layouts ([B, H, L, D], [B, L, H, D], [L, B, H, D]); f32, masks,
// causal limits, NaN guards and broadcast batch dims stay on ferrite's kernels.
TEST(CudaCodegen, CudnnSdpaProblemFromAttentionLayouts) {
  auto p = problem({32, 12}, 197, 197, 64, 64);
  p.q_bs = p.k_bs = p.v_bs = {12 * 64, 64};  // [S, B, H, D] (sequence first)
  p.q_rs = p.k_rs = p.v_rs = 32 * 12 * 64;
  p.o_bs = {197 * 12 * 64, 64};  // [B, S, H, D]
  p.o_rs = 12 * 64;
  p.scale = 0.125f;
  auto q = cuda::cudnn_sdpa_problem(p, DType::kBF16);
  ASSERT_TRUE(q);
  EXPECT_EQ(q->b, 32);
  EXPECT_EQ(q->h, 12);
  EXPECT_EQ(q->hk, 12);
  EXPECT_EQ(q->s, 197);
  EXPECT_EQ(std::vector<int64_t>(q->q_st, q->q_st + 4),
            (std::vector<int64_t>{12 * 64, 64, 32 * 12 * 64, 1}));
  EXPECT_EQ(std::vector<int64_t>(q->o_st, q->o_st + 4),
            (std::vector<int64_t>{197 * 12 * 64, 64, 12 * 64, 1}));
  EXPECT_EQ(q->scale, 0.125f);
  // One batch dim [H]: b = 1 with a contiguous stride; a contiguous output.
  auto one = problem({6}, 10, 20, 32, 16);
  one.q_bs = {320}, one.k_bs = {640}, one.v_bs = {320};
  auto q1 = cuda::cudnn_sdpa_problem(one, DType::kF16);
  ASSERT_TRUE(q1);
  EXPECT_EQ(std::vector<int64_t>(q1->k_st, q1->k_st + 4),
            (std::vector<int64_t>{6 * 640, 640, 32, 1}));
  EXPECT_EQ(std::vector<int64_t>(q1->o_st, q1->o_st + 4),
            (std::vector<int64_t>{6 * 160, 160, 16, 1}));
  EXPECT_NE(q->key(), q1->key());
  EXPECT_FALSE(cuda::cudnn_sdpa_problem(p, DType::kF32));
  for (int c = 0; c < 4; ++c) {
    auto x = p;
    if (c == 0) x.has_mask = true;
    if (c == 1) x.causal = true;
    if (c == 2) x.nan_to_zero = true;
    if (c == 3) x.k_bs[1] = 0;  // K shared by the heads
    EXPECT_FALSE(cuda::cudnn_sdpa_problem(x, DType::kBF16)) << c;
  }
  EXPECT_FALSE(cuda::cudnn_sdpa_problem(problem({2, 3, 4}, 8, 8, 64, 64), DType::kBF16));
}

// cuDNN's SDPA against the reference on each operand layout, bf16 and f16, head dims 32-128,
// S != T, one query; and the plan is cached (one per problem). Skipped without cuDNN 9.13.
TEST(CudaDevice, CudnnAttentionMatchesReference) {
  auto be = cuda::open_cuda_backend(0);
  if (!be) GTEST_SKIP() << "no GPU: " << be.status().message();
  cuda::CudnnConv* dnn = (*be)->conv_library();
  if (!dnn) GTEST_SKIP() << "no cuDNN";
#if FERRITE_HAVE_CUDNN
  auto lib = cuda::cudnn();
  ASSERT_TRUE(lib);
  if ((*lib)->version < cuda::kCudnnSdpaMinVersion)
    GTEST_SKIP() << "cuDNN " << (*lib)->version << " has no SDPA operation";
#endif
  struct Case {
    int64_t B, H, S, T, D;
    int layout;  // 0 [B, H, L, D], 1 [B, L, H, D], 2 [L, B, H, D] (operands and output)
  };
  const Case cases[] = {{2, 3, 45, 71, 64, 0},
                        {2, 12, 197, 197, 64, 1},
                        {3, 4, 49, 49, 32, 2},
                        {1, 2, 1, 33, 128, 0},
                        {2, 2, 100, 64, 128, 1}};
  std::mt19937 rng(5);
  for (const Case& c : cases)
    for (DType dt : {DType::kBF16, DType::kF16}) {
      const bool bf = dt == DType::kBF16;
      SCOPED_TRACE(std::string(dtype_name(dt)) + " B " + std::to_string(c.B) + " H " +
                   std::to_string(c.H) + " S " + std::to_string(c.S) + " T " + std::to_string(c.T) +
                   " D " + std::to_string(c.D) + " layout " + std::to_string(c.layout));
      const std::string text = R"(<ir_version: 8, opset_import: ["" : 17, "ferrite" : 1]>
g (float[b,h,s,d] q, float[b,h,t,d] k, float[b,h,t,d] v) => (float[b,h,s,d] y) {
  y = ferrite.Attention(q, k, v)
}
)";
      auto ref = Session::from_graph(parse(text), "reference");
      ASSERT_TRUE(ref);
      // Batch strides and row stride of a [B, H, L, D] tensor stored in c.layout.
      auto strides = [&](int64_t L, std::vector<int64_t>* bs, int64_t* rs) {
        const int64_t D = c.D, H = c.H, B = c.B;
        *bs = c.layout == 0   ? std::vector<int64_t>{H * L * D, L * D}
              : c.layout == 1 ? std::vector<int64_t>{L * H * D, D}
                              : std::vector<int64_t>{H * D, D};
        *rs = c.layout == 0 ? D : c.layout == 1 ? H * D : B * H * D;
      };
      auto pack = [&](Tensor t, int64_t L, std::vector<uint16_t>* bits) {
        std::vector<int64_t> bs;
        int64_t rs = 0;
        strides(L, &bs, &rs);
        bits->assign(static_cast<size_t>(t.numel()), 0);
        int64_t i = 0;
        for (int64_t b = 0; b < c.B; ++b)
          for (int64_t h = 0; h < c.H; ++h)
            for (int64_t l = 0; l < L; ++l)
              for (int64_t d = 0; d < c.D; ++d, ++i) {
                float& x = t.data<float>()[i];
                if (std::fabs(x) < 1e-3f) x = 1e-3f;  // keep f16 values normal
                const uint16_t h16 = bf ? to_bf16(x) : to_f16(x);
                x = bf ? from_bf16(h16) : from_f16(h16);
                (*bits)[b * bs[0] + h * bs[1] + l * rs + d] = h16;
              }
        return t;
      };
      std::vector<uint16_t> qb, kb, vb;
      Tensor q = pack(random_f32({c.B, c.H, c.S, c.D}, rng, 0), c.S, &qb);
      Tensor k = pack(random_f32({c.B, c.H, c.T, c.D}, rng, 0), c.T, &kb);
      Tensor v = pack(random_f32({c.B, c.H, c.T, c.D}, rng, 0), c.T, &vb);
      auto want = (*ref)->run({{"q", q}, {"k", k}, {"v", v}});
      ASSERT_TRUE(want) << want.status().message();
      cuda::FlashProblem p = problem({c.B, c.H}, c.S, c.T, c.D, c.D);
      strides(c.S, &p.q_bs, &p.q_rs);
      strides(c.T, &p.k_bs, &p.k_rs);
      p.v_bs = p.k_bs, p.v_rs = p.k_rs;
      if (c.layout != 0) strides(c.S, &p.o_bs, &p.o_rs);
      p.scale = static_cast<float>(1 / std::sqrt(double(c.D)));
      auto sq = cuda::cudnn_sdpa_problem(p, dt);
      ASSERT_TRUE(sq);
      GpuBuffers g{(*be)->rt(), {}};
      void* dq = g.upload(qb.data(), qb.size() * 2);
      void* dk = g.upload(kb.data(), kb.size() * 2);
      void* dv = g.upload(vb.data(), vb.size() * 2);
      const size_t n = static_cast<size_t>(c.B * c.H * c.S * c.D);
      void* dy = g.upload(nullptr, n * 2);
      auto scratch = [&](size_t bytes) -> Expected<void*> { return g.upload(nullptr, bytes); };
      for (int rep = 0; rep < 2; ++rep) {  // the second call reuses the plan
        auto ran = dnn->run_attention(*sq, dq, dk, dv, dy, scratch);
        ASSERT_TRUE(ran) << ran.status().message();
        ASSERT_TRUE(*ran) << "cuDNN declined (FERRITE_LOG=fallback says why)";
      }
      ASSERT_TRUE((*be)->rt()->synchronize().is_ok());
      std::vector<uint16_t> yb(n);
      ASSERT_TRUE((*be)->rt()->copy_to_host(yb.data(), dy, n * 2).is_ok());
      std::vector<int64_t> obs;
      int64_t ors = 0;
      strides(c.S, &obs, &ors);
      Tensor got = Tensor::zeros(DType::kF32, {c.B, c.H, c.S, c.D});
      int64_t i = 0;
      for (int64_t b = 0; b < c.B; ++b)
        for (int64_t h = 0; h < c.H; ++h)
          for (int64_t s = 0; s < c.S; ++s)
            for (int64_t d = 0; d < c.D; ++d, ++i) {
              const uint16_t y16 = yb[b * obs[0] + h * obs[1] + s * ors + d];
              got.data<float>()[i] = bf ? from_bf16(y16) : from_f16(y16);
            }
      const double out_round = bf ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
      expect_close(got, (*want)[0], 1e-4 + out_round, "cuDNN SDPA");
    }
  EXPECT_EQ(dnn->attention_calls(), 2 * 2 * static_cast<int64_t>(std::size(cases)));
}

TEST(CudaCodegen, FlashMaskTilesNeedAlignedRows) {
  auto p = problem({8, 12}, 128, 128, 64, 64);
  p.has_mask = true;
  p.m_bs = {128 * 128, 0};
  p.m_s = 128, p.m_t = 1;
  alignas(16) static const uint16_t buf[16] = {};
  EXPECT_TRUE(cuda::flash_mask_tiles(p, buf));
  EXPECT_FALSE(cuda::flash_mask_tiles(p, buf + 1));  // base off 16 bytes
  EXPECT_FALSE(cuda::flash_mask_tiles(p, nullptr));
  auto row = p;
  row.m_s = 0, row.m_bs = {128, 0};
  EXPECT_TRUE(cuda::flash_mask_tiles(row, buf));
  auto odd = p;
  odd.m_s = 127;
  EXPECT_FALSE(cuda::flash_mask_tiles(odd, buf));
  auto strided = p;
  strided.m_t = 2;
  EXPECT_FALSE(cuda::flash_mask_tiles(strided, buf));
  auto batch = p;
  batch.m_bs = {128 * 128 + 4, 0};
  EXPECT_FALSE(cuda::flash_mask_tiles(batch, buf));
  // Two more [64][72] tiles of shared memory.
  EXPECT_EQ(cuda::choose_flash_tc_config(p, DType::kBF16, "sm_90", 227 << 10, true, true).smem,
            2 * (5 * 64 * (64 + 8) + 2 * 64 * 72));
}

// Fused vs 3-step on bert_base- and gpt2-like shapes (12 heads, head dim 64): GPU time per
// call from CUDA events over 50 calls, printed; both results must agree within f32 tolerance.
// FLOPs counted as 4 * batch * heads * S * T * D (two GEMMs), halved for causal.
TEST(CudaDevice, FusedAttentionTiming) {
  auto be = cuda::open_cuda_backend(0);
  if (!be) GTEST_SKIP() << "no GPU: " << be.status().message();
  cuda::CudaRuntime* rt = (*be)->rt();
  const auto& api = rt->api();
  struct Case {
    const char* name;
    int64_t B, S;
    bool causal;
  };
  const Case cases[] = {{"bert_base zoo 2x64", 2, 64, false},  {"bert 8x128", 8, 128, false},
                        {"bert 8x384", 8, 384, false},         {"bert 32x512", 32, 512, false},
                        {"gpt2 zoo 1x16 causal", 1, 16, true}, {"gpt2 8x512 causal", 8, 512, true},
                        {"gpt2 4x1024 causal", 4, 1024, true}};
  const int64_t H = 12, D = 64;
  std::mt19937 rng(3);
  CUevent e0 = nullptr, e1 = nullptr;
  ASSERT_EQ(api.cuEventCreate(&e0, 0), CUDA_SUCCESS);
  ASSERT_EQ(api.cuEventCreate(&e1, 0), CUDA_SUCCESS);
  std::printf("%-24s %12s %12s %8s %14s %14s\n", "case", "fused ms", "3-step ms", "speedup",
              "fused TFLOP/s", "3-step TFLOP/s");
  for (const Case& c : cases) {
    const int64_t n = c.B * H * c.S * D;
    Tensor q = random_f32({n}, rng, 0), k = random_f32({n}, rng, 0), v = random_f32({n}, rng, 0);
    Tensor m = random_f32({c.B * c.S}, rng, 0.1);
    GpuBuffers g{rt, {}};
    const float* dq = static_cast<float*>(g.upload(q.data<float>(), n * 4));
    const float* dk = static_cast<float*>(g.upload(k.data<float>(), n * 4));
    const float* dv = static_cast<float*>(g.upload(v.data<float>(), n * 4));
    const float* dm = static_cast<float*>(g.upload(m.data<float>(), c.B * c.S * 4));
    float* y1 = static_cast<float*>(g.upload(nullptr, n * 4));
    float* y2 = static_cast<float*>(g.upload(nullptr, n * 4));
    float* sc = static_cast<float*>(g.upload(nullptr, c.B * H * c.S * c.S * 4));
    cuda::FlashProblem p = problem({c.B, H}, c.S, c.S, D, D);
    p.q_bs = p.k_bs = p.v_bs = {H * c.S * D, c.S * D};
    p.causal = c.causal;
    p.has_mask = !c.causal;
    p.m_bs = {c.S, 0};
    p.m_s = 0, p.m_t = 1;
    p.scale = 0.125f;
    const float* mask = c.causal ? nullptr : dm;
    auto fused = [&] { return (*be)->flash->run(p, DType::kF32, dq, dk, dv, mask, y1); };
    auto three = [&] { return cuda::attention_three_step(**be, p, dq, dk, dv, mask, y2, sc); };
    double ms[2];
    for (int w = 0; w < 2; ++w) {
      auto call = [&] { return w == 0 ? fused() : three(); };
      for (int i = 0; i < 3; ++i) ASSERT_TRUE(call().is_ok());
      ASSERT_EQ(api.cuEventRecord(e0, rt->stream()), CUDA_SUCCESS);
      const int reps = 50;
      for (int i = 0; i < reps; ++i) ASSERT_TRUE(call().is_ok());
      ASSERT_EQ(api.cuEventRecord(e1, rt->stream()), CUDA_SUCCESS);
      ASSERT_EQ(api.cuEventSynchronize(e1), CUDA_SUCCESS);
      float t = 0;
      api.cuEventElapsedTime(&t, e0, e1);
      ms[w] = t / reps;
    }
    const double flop = 4.0 * c.B * H * c.S * c.S * D * (c.causal ? 0.5 : 1.0);
    std::printf("%-24s %12.4f %12.4f %7.2fx %14.2f %14.2f\n", c.name, ms[0], ms[1], ms[1] / ms[0],
                flop / ms[0] * 1e-9, flop / ms[1] * 1e-9);
    Tensor a = Tensor::zeros(DType::kF32, {n}), b = Tensor::zeros(DType::kF32, {n});
    ASSERT_TRUE(rt->copy_to_host(a.data<float>(), y1, n * 4).is_ok());
    ASSERT_TRUE(rt->copy_to_host(b.data<float>(), y2, n * 4).is_ok());
    expect_close(a, b, 1e-4, c.name);
  }
  api.cuEventDestroy(e0);
  api.cuEventDestroy(e1);
}

#endif  // FERRITE_HAVE_CUDA

}  // namespace
}  // namespace ferrite
