// The cuda device's chunked, parallel kernel compile (backends/cuda/cuda_compile.h): splitting a
// graph's kernels into NVRTC programs, deduplication, chunk stability and the thread pool. Needs
// NVRTC only (no driver, no GPU); skipped when NVRTC is absent.
//
// CudaCompile.ZooTiming measures the cold compile of every materialized zoo model one program
// at a time, serially and on the thread pool: run it with
//   FERRITE_COMPILE_BENCH=1 FERRITE_CACHE=0 ferrite_unit_tests --gtest_filter=CudaCompile.ZooTiming
// (FERRITE_CUDA_COMPILE_THREADS=N picks the threads; FERRITE_COMPILE_BENCH=2 also times each kernel
// on its own and projects the wall time for 1..32 threads; FERRITE_COMPILE_BENCH_DUMP=dir writes
// the sources).
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>

#include "lower/lowering.h"
#include "lower/multi_tensor.h"
#include "memory/in_place.h"
#include "passes/pass.h"
#include "test_util.h"

#if FERRITE_HAVE_CUDA
#include "backends/cuda/cuda_compile.h"
#include "backends/cuda/cuda_library.h"
#include "codegen/cuda_source.h"
#include "runtime/compile_cache.h"
#endif

namespace ferrite {
namespace {

#if FERRITE_HAVE_CUDA

std::unique_ptr<Graph> parse(const std::string& text) {
  return ferrite::testing::parse_onnx_text(text);
}

// Two pairs of kernels that differ only in the buffers they read (same types and shapes), and a
// row kernel.
const char* kModel = R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[b,n] x, float[b,n] y) => (float[b,n] p, float[b,n] q, float[b,n] r, float[b,n] s,
                                 float[b,n] t) {
  p = Tanh(x)
  q = Tanh(y)
  r = Sigmoid(x)
  s = Sigmoid(y)
  t = Softmax<axis = -1>(x)
}
)";

Expected<LoweredGraph> lowered(const Graph& g) {
  FERRITE_ASSIGN_OR_RETURN(LoweredGraph lg, lower_graph(g));
  mark_in_place_candidates(lg);
  return lg;
}

// The cubin's symbol table holds the kernel's name.
bool cubin_defines(const std::string& cubin, const std::string& name) {
  return cubin.find(name + '\0') != std::string::npos;
}

TEST(CudaCompile, SplitDeduplicatesAndEveryKernelIsCompiled) {
  auto nv = cuda::nvrtc();
  if (!nv) GTEST_SKIP() << nv.status().message();
  auto g = parse(kModel);
  ASSERT_TRUE(g);
  auto lg = lowered(*g);
  ASSERT_TRUE(lg) << lg.status().message();
  cuda::CudaDialect dialect;
  auto ks = cuda::split_kernel_sources(*lg, dialect, DeviceProperties{});
  ASSERT_TRUE(ks) << ks.status().message();
  EXPECT_EQ(ks->kernels, lg->kernels);
  EXPECT_EQ(ks->alias.size(), static_cast<size_t>(lg->kernels));
  EXPECT_LT(ks->texts.size(), static_cast<size_t>(ks->kernels)) << "Tanh(x)/Tanh(y) are one kernel";
  EXPECT_EQ(ks->texts.size(), ks->names.size());
  // The whole-graph source is the prelude followed by the kernels.
  auto whole = dialect.generate(*lg, DeviceProperties{});
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->compare(0, ks->prelude.size(), ks->prelude), 0);
  for (const std::string& t : ks->texts) EXPECT_NE(whole->find(t), std::string::npos);

  auto chunks = cuda::make_chunks(*ks, 2);
  ASSERT_EQ(chunks.size(), std::min<size_t>(2, ks->texts.size()));
  auto c = cuda::compile_chunks(chunks, "sm_90", "", 2);
  ASSERT_TRUE(c) << c.status().message();
  ASSERT_EQ(c->cubins.size(), chunks.size());
  std::set<std::string> compiled;
  for (size_t i = 0; i < chunks.size(); ++i)
    for (const std::string& k : chunks[i].kernels) {
      EXPECT_TRUE(cubin_defines(c->cubins[i].cubin, k)) << k;
      compiled.insert(k);
    }
  for (const auto& [name, impl] : ks->alias) EXPECT_TRUE(compiled.count(impl)) << name;
}

// An update graph's kernels over five shapes (a and b alike) become one multi-tensor kernel:
// one launched function, one device function per distinct segment, a table of the segments'
// first 4096-element units; NVRTC compiles it. A bound on its parameters splits it.
TEST(CudaCompile, MultiTensorKernelSharesSegmentFunctions) {
  const std::string text = R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[4,8] a, float[4,8] b, float[5] c, float[3,2,2] d, float[4097] e, float[1] s)
    => (float[4,8] a2, float[4,8] b2, float[5] c2, float[3,2,2] d2, float[4097] e2) {
  a2 = Mul(a, s)
  b2 = Mul(b, s)
  c2 = Mul(c, s)
  d2 = Mul(d, s)
  e2 = Mul(e, s)
}
)";
  auto g = parse(text);
  ASSERT_TRUE(g);
  auto lg = lower_graph(*g);
  ASSERT_TRUE(lg) << lg.status().message();
  auto split = *lg;
  EXPECT_EQ(fuse_multi_tensor(*lg), 4);
  ASSERT_EQ(lg->steps.size(), 1u);
  EXPECT_EQ(plan_outputs_into_inputs(*lg, {0, 1, 2, 3, 4}), 5);
  cuda::CudaDialect dialect;
  auto ks = cuda::split_kernel_sources(*lg, dialect, DeviceProperties{});
  ASSERT_TRUE(ks) << ks.status().message();
  ASSERT_EQ(ks->texts.size(), 1u);
  const std::string& src = ks->texts[0];
  const std::string name = lg->steps[0].kernel.name;
  EXPECT_NE(src.find("5 segments (4 distinct), 6 units of 4096 elements"), std::string::npos)
      << src;
  EXPECT_NE(src.find(name + "_units[] = {0, 1, 2, 3, 4, 6}"), std::string::npos) << src;
  EXPECT_EQ(src.find("__restrict__"), std::string::npos) << "outputs alias inputs";
  auto nv = cuda::nvrtc();
  if (!nv) GTEST_SKIP() << nv.status().message();
  auto c = cuda::compile_chunks(cuda::make_chunks(*ks, 1), "sm_90", "", 1);
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_TRUE(cubin_defines(c->cubins[0].cubin, name));
  // 5 kernels of 3 parameters each (2 buffers and 1 output): 7 parameters per merged kernel
  // leaves pairs.
  EXPECT_EQ(fuse_multi_tensor(split, 7), 2);
  EXPECT_EQ(split.kernels, 3);
}

TEST(CudaCompile, ChunksAreStableUnderAnEditOfOneKernel) {
  cuda::KernelSources ks;
  ks.prelude = "// prelude\n";
  for (int i = 0; i < 10; ++i) {
    ks.names.push_back("k" + std::to_string(i));
    ks.texts.push_back("\nextern \"C\" __global__ void k" + std::to_string(i) + "() {}\n");
  }
  for (int n : {1, 3, 4, 10, 16}) {
    auto a = cuda::make_chunks(ks, n);
    ASSERT_EQ(a.size(), static_cast<size_t>(std::min(n, 10)));
    size_t total = 0;
    for (const auto& c : a) {
      EXPECT_FALSE(c.kernels.empty());
      EXPECT_EQ(c.source.rfind(ks.prelude, 0), 0u);
      total += c.kernels.size();
    }
    EXPECT_EQ(total, 10u);
    cuda::KernelSources edited = ks;
    edited.texts[7] += "// edited\n";
    auto b = cuda::make_chunks(edited, n);
    int changed = 0;
    for (size_t i = 0; i < a.size(); ++i) changed += a[i].source != b[i].source;
    EXPECT_EQ(changed, 1) << n << " chunks";
  }
  EXPECT_TRUE(cuda::make_chunks(cuda::KernelSources{}, 4).empty());
}

TEST(CudaCompile, ParallelForRunsEveryIndexOnceAndReturnsTheFirstError) {
  std::vector<std::atomic<int>> hits(100);
  Status s = cuda::parallel_for(100, 4, [&](int i) {
    ++hits[i];
    return Status::ok();
  });
  EXPECT_TRUE(s);
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  s = cuda::parallel_for(
      50, 3, [](int i) { return i == 17 ? err("chunk ", i, " failed") : Status::ok(); });
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("chunk 17"), std::string::npos);
  EXPECT_TRUE(cuda::parallel_for(0, 8, [](int) { return err("never"); }));
}

TEST(CudaCompile, CompileErrorsNameTheProgram) {
  auto nv = cuda::nvrtc();
  if (!nv) GTEST_SKIP() << nv.status().message();
  std::vector<cuda::CompileChunk> chunks(3);
  for (int i = 0; i < 3; ++i) {
    chunks[i].source = "extern \"C\" __global__ void k" + std::to_string(i) + "() { " +
                       (i == 1 ? "undefined_thing();" : "") + " }";
    chunks[i].kernels = {"k" + std::to_string(i)};
  }
  auto r = cuda::compile_chunks(chunks, "sm_90", "", 2);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("undefined_thing"), std::string::npos);
  EXPECT_NE(r.status().message().find("kernels_1"), std::string::npos);
}

TEST(CudaCompile, SplitProgramKeepsHelpersAndSharesOutKernels) {
  const std::string src = R"(// a { comment
struct P { int a; };
template <class T> __device__ T twice(T x) { return x + x; }
extern "C" __global__ void k_decl(int* y);
extern "C" __global__ void __launch_bounds__(256) k_a(int* y) { if (y) { y[0] = twice(1); } }
/* } */
extern "C" __global__ void k_b(int* y, P p) {
  const char* s = "}{"; char c = '}';
  y[0] = p.a + (s[0] == c);
}
extern "C" __global__ void k_c(float* y) { y[0] = 1.f; }
)";
  auto one = cuda::split_program(src, 1);
  ASSERT_TRUE(one) << one.status().message();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].source, src);
  EXPECT_EQ((*one)[0].kernels, (std::vector<std::string>{"k_a", "k_b", "k_c"}));
  auto three = cuda::split_program(src, 5);
  ASSERT_TRUE(three);
  ASSERT_EQ(three->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const auto& c = (*three)[i];
    ASSERT_EQ(c.kernels.size(), 1u);
    EXPECT_NE(c.source.find("template <class T>"), std::string::npos);
    EXPECT_NE(c.source.find("void k_decl(int* y);"), std::string::npos);
    for (const char* k : {"k_a", "k_b", "k_c"})
      EXPECT_EQ(c.source.find(std::string(k) + "(") != std::string::npos, c.kernels[0] == k)
          << c.source;
  }
  auto nv = cuda::nvrtc();
  if (!nv) GTEST_SKIP() << nv.status().message();
  auto c = cuda::compile_chunks(*three, "sm_90", "", 2, "split");
  ASSERT_TRUE(c) << c.status().message();
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(cubin_defines(c->cubins[i].cubin, (*three)[i].kernels[0]));
  EXPECT_FALSE(cuda::split_program("extern \"C\" __global__ void k(int* y) { {", 2));
}

// The hand-written library compiles as several programs; every kernel is in exactly one.
TEST(CudaCompile, LibraryCompilesAsSeveralPrograms) {
  auto nv = cuda::nvrtc();
  if (!nv) GTEST_SKIP() << nv.status().message();
  auto c = cuda::LibraryKernels::compile("sm_90", "");
  ASSERT_TRUE(c) << c.status().message();
  std::set<std::string> seen;
  for (size_t i = 0; i < c->chunks.size(); ++i)
    for (const std::string& k : c->chunks[i].kernels) {
      EXPECT_TRUE(seen.insert(k).second) << k;
      EXPECT_TRUE(cubin_defines(c->cubins[i].cubin, k)) << k;
    }
  for (const char* k :
       {"fe_conv2d", "fe_gather", "fe_gather_4", "fe_epilogue", "fe_pool2d", "fe_gather_nd",
        "fe_cumsum", "fe_cumsum_int", "fe_split16", "fe_binary16_rows", "fe_gather_16"})
    EXPECT_TRUE(seen.count(k)) << k;
  EXPECT_EQ(c->chunks.size(), std::min<size_t>(cuda::compile_threads(), seen.size()));
}

// On a GPU: the deduplicated kernels run under every name, against the reference device (the
// tolerance of CudaDevice.PointwiseAndRowKernels). Skipped
// without a GPU.
TEST(CudaCompile, GpuRunsDeduplicatedKernels) {
  auto gpu = Session::from_graph(parse(kModel), "cuda");
  if (!gpu) GTEST_SKIP() << "no GPU: " << gpu.status().message();
  auto ref = Session::from_graph(parse(kModel), "reference");
  ASSERT_TRUE(ref) << ref.status().message();
  for (int64_t b : {3, 17}) {
    Tensor x = Tensor::zeros(DType::kF32, {b, 129}), y = Tensor::zeros(DType::kF32, {b, 129});
    for (int64_t i = 0; i < x.numel(); ++i) {
      x.data<float>()[i] = static_cast<float>(i % 23) * 0.25f - 3.0f;
      y.data<float>()[i] = static_cast<float>(i % 19) * -0.3f + 2.0f;
    }
    std::vector<Session::NamedInput> in = {{"x", x}, {"y", y}};
    auto want = (*ref)->run(in);
    ASSERT_TRUE(want) << want.status().message();
    for (int rep = 0; rep < 3; ++rep) {  // step by step, graph capture, replay
      auto got = (*gpu)->run(in);
      ASSERT_TRUE(got) << got.status().message();
      ASSERT_EQ(got->size(), want->size());
      for (size_t o = 0; o < got->size(); ++o)
        for (int64_t i = 0; i < (*got)[o].numel(); ++i)
          ASSERT_NEAR((*got)[o].data<float>()[i], (*want)[o].data<float>()[i],
                      2e-5 * (1 + std::fabs((*want)[o].data<float>()[i])))
              << "output " << o << " element " << i << " batch " << b;
    }
  }
}

std::filesystem::path models_dir() {
  const char* env = std::getenv("FERRITE_MODELS_DIR");
  return env && *env
             ? std::filesystem::path(env)
             : std::filesystem::path(FERRITE_TEST_DATA_DIR) / ".." / ".." / "build" / "models";
}

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// CPU seconds of the whole process (NVRTC's own threads included): on a shared machine, wall
// times of single-threaded work are inflated by other processes, CPU times are not.
double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Cold compile of the zoo: the whole graph as one program (what the device did before), the
// chunks one after another, and the chunks on the thread pool.
TEST(CudaCompile, ZooTiming) {
  const char* on = std::getenv("FERRITE_COMPILE_BENCH");
  if (!on || !*on) GTEST_SKIP() << "set FERRITE_COMPILE_BENCH=1 (and FERRITE_CACHE=0)";
  auto nv = cuda::nvrtc();
  if (!nv) GTEST_SKIP() << nv.status().message();
  if (CompileCache::global().enabled()) GTEST_SKIP() << "set FERRITE_CACHE=0: this times NVRTC";
  auto cuda_device = DeviceRegistry::global().create("cuda");  // its passes (no GPU needed)
  ASSERT_TRUE(cuda_device) << cuda_device.status().message();
  const char* dump = std::getenv("FERRITE_COMPILE_BENCH_DUMP");
  const int threads = cuda::compile_threads();
  std::printf("%-13s %7s %8s %17s %17s %10s %9s\n", "model", "kernels", "distinct",
              "one prog wall/cpu", "chunks x1 wall/cpu", "chunks xT", "programs");
  int n = 0;
  for (const char* m : {"mlp", "convnet", "resnet18", "mobilenet_v2", "bert_base", "gpt2"}) {
    auto path = models_dir() / m / "model.onnx";
    if (!std::filesystem::exists(path)) continue;
    auto g = import_onnx_file(path);
    ASSERT_TRUE(g) << m << ": " << g.status().message();
    auto passes = default_passes(**cuda_device);
    ASSERT_TRUE(passes) << passes.status().message();
    ASSERT_TRUE(run_pipeline(**g, *passes).is_ok()) << m;
    auto lw = std::chrono::steady_clock::now();
    auto lg = lowered(**g);
    ASSERT_TRUE(lg) << m;
    const double t_lower = since(lw);
    cuda::CudaDialect dialect;
    auto whole = dialect.generate(*lg, DeviceProperties{});
    ASSERT_TRUE(whole);
    auto t0 = std::chrono::steady_clock::now();
    double c0 = cpu_now();
    auto one = cuda::compile_to_cubin(*whole, "sm_90", m);
    ASSERT_TRUE(one) << one.status().message();
    const double t_one = since(t0), c_one = cpu_now() - c0;
    auto sp = std::chrono::steady_clock::now();
    auto ks = cuda::split_kernel_sources(*lg, dialect, DeviceProperties{});
    ASSERT_TRUE(ks);
    const double t_split = since(sp);
    const int programs = static_cast<int>(std::min<size_t>(ks->texts.size(), threads));
    auto chunks = cuda::make_chunks(*ks, programs);
    if (dump && *dump) {
      std::filesystem::create_directories(std::filesystem::path(dump) / m);
      std::ofstream(std::filesystem::path(dump) / m / "whole.cu") << *whole;
      for (size_t i = 0; i < chunks.size(); ++i)
        std::ofstream(std::filesystem::path(dump) / m / ("chunk" + std::to_string(i) + ".cu"))
            << chunks[i].source;
      for (size_t i = 0; i < ks->texts.size(); ++i)
        std::ofstream(std::filesystem::path(dump) / m / ("kernel" + std::to_string(i) + ".cu"))
            << ks->prelude << ks->texts[i];
    }
    c0 = cpu_now();
    auto serial = cuda::compile_chunks(chunks, "sm_90", "", 1);
    ASSERT_TRUE(serial) << serial.status().message();
    const double c_serial = cpu_now() - c0;
    auto par = cuda::compile_chunks(chunks, "sm_90", "", threads);
    ASSERT_TRUE(par) << par.status().message();
    std::printf("%-13s %7d %8zu %7.3f/%7.3fs %7.3f/%7.3fs %9.3fs %5zu x%d\n", m, ks->kernels,
                ks->texts.size(), t_one, c_one, serial->wall_seconds, c_serial, par->wall_seconds,
                chunks.size(), par->threads);
    std::printf("  %s: lowering %.3f s, per-kernel code generation %.3f s\n", m, t_lower, t_split);
    ++n;
    if (std::string(on) != "2") continue;
    // Per kernel: each distinct kernel as its own program, less the cost of a program holding
    // the prelude alone; then the wall time of P consecutive chunks on P threads, projected as
    // the slowest chunk (prelude once + its kernels).
    double p0 = cpu_now();
    ASSERT_TRUE(cuda::compile_to_cubin(ks->prelude, "sm_90", "prelude"));
    const double fixed = cpu_now() - p0;
    std::vector<double> cost;
    for (size_t i = 0; i < ks->texts.size(); ++i) {
      double k0 = cpu_now();
      ASSERT_TRUE(cuda::compile_to_cubin(ks->prelude + ks->texts[i], "sm_90", "k"));
      cost.push_back(std::max(0.0, cpu_now() - k0 - fixed));
    }
    double sum = 0, worst = 0;
    for (double c : cost) {
      sum += c;
      worst = std::max(worst, c);
    }
    std::printf(
        "  %s (CPU s): program start-up %.3f, kernels %.4f on average (max %.3f), sum %.3f; "
        "projected wall:",
        m, fixed, sum / std::max<size_t>(1, cost.size()), worst, sum);
    for (int p : {1, 2, 4, 8, 16, 32}) {
      const size_t c = std::min<size_t>(p, cost.size());
      double wall = 0;
      for (size_t i = 0; i < c; ++i) {
        double w = fixed;
        for (size_t k = cost.size() * i / c; k < cost.size() * (i + 1) / c; ++k) w += cost[k];
        wall = std::max(wall, w);
      }
      std::printf(" %dT %.3f s", p, wall);
    }
    std::printf("\n");
  }
  // The library: as one program (one thread); one program per kernel, each timed alone (CPU);
  // and split on the thread pool.
  const char* env = std::getenv("FERRITE_CUDA_COMPILE_THREADS");
  const std::string saved = env ? env : "";
  ::setenv("FERRITE_CUDA_COMPILE_THREADS", "1", 1);
  auto l0 = std::chrono::steady_clock::now();
  double lc = cpu_now();
  ASSERT_TRUE(cuda::LibraryKernels::compile("sm_90", ""));
  std::printf("library (cuda_library.cpp) as one program: %.3f s wall, %.3f s CPU\n", since(l0),
              cpu_now() - lc);
  ::setenv("FERRITE_CUDA_COMPILE_THREADS", "64", 1);
  auto each = cuda::LibraryKernels::compile("sm_90", "");
  ASSERT_TRUE(each);
  std::printf("library, one program per kernel (CPU s):");
  double lib_max = 0, lib_sum = 0;
  for (const auto& c : each->chunks) {
    lc = cpu_now();
    ASSERT_TRUE(cuda::compile_to_cubin(c.source, "sm_90", "lib"));
    const double t = cpu_now() - lc;
    lib_max = std::max(lib_max, t);
    lib_sum += t;
    std::printf(" %s %.3f", c.kernels[0].c_str(), t);
  }
  std::printf("; sum %.3f, max %.3f\n", lib_sum, lib_max);
  if (saved.empty())
    ::unsetenv("FERRITE_CUDA_COMPILE_THREADS");
  else
    ::setenv("FERRITE_CUDA_COMPILE_THREADS", saved.c_str(), 1);
  l0 = std::chrono::steady_clock::now();
  auto lib = cuda::LibraryKernels::compile("sm_90", "");
  ASSERT_TRUE(lib);
  std::printf("library as %zu programs on %d threads: %.3f s wall\n", lib->chunks.size(),
              lib->threads, since(l0));
  if (n == 0) GTEST_SKIP() << "no materialized models under " << models_dir();
}

#endif  // FERRITE_HAVE_CUDA

}  // namespace
}  // namespace ferrite
