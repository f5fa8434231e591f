// The backend contract (backend_api/): launch rules, default heuristics, the host runtime, part
// validation, the grid-launch row-loop dialect (what emulated accelerators compile) and the
// runnable `null` example device and the shared executor's traces.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "backend_api/backend.h"
#include "backends/cpu/host_compiler.h"
#include "codegen/cpp_source.h"
#include "lower/lowering.h"
#include "runtime/session.h"

namespace ferrite {
namespace {

LaunchLimits vendor_limits() {
  // A chip whose grid must be at most 48 or a multiple of 48, with one 32-wide warp per block.
  LaunchLimits l;
  l.max_block = 32;
  l.warp_size = 32;
  l.max_warps_per_block = 1;
  l.grid_any_upto = 48;
  l.grid_multiple = 48;
  return l;
}

TEST(LaunchLimits, GridRules) {
  LaunchLimits l = vendor_limits();
  for (int64_t g : {1, 7, 47, 48, 96, 144, 4800}) EXPECT_TRUE(l.grid_allowed(g)) << g;
  for (int64_t g : {0, 49, 50, 95, 97, 143}) EXPECT_FALSE(l.grid_allowed(g)) << g;
  EXPECT_EQ(l.clamp_grid(49), 48);
  EXPECT_EQ(l.clamp_grid(100), 96);
  EXPECT_EQ(l.clamp_grid(30), 30);
  EXPECT_EQ(l.clamp_grid(0), 1);
  EXPECT_TRUE(l.block_allowed(32));
  EXPECT_FALSE(l.block_allowed(64));  // two warps
  EXPECT_FALSE(l.block_allowed(16));  // not whole warps
}

TEST(DefaultHeuristics, AlwaysChoosesAllowedLaunches) {
  DeviceProperties p;
  p.name = "vendor";
  p.compute_units = 6;
  p.launch = vendor_limits();
  Kernel pointwise, row;
  row.reduce_rank = 1;
  DefaultHeuristics h;
  for (int64_t rows : {1, 3, 47, 48, 49, 1000, 123457})
    for (int64_t len : {1, 31, 768}) {
      for (const Kernel* k : {&pointwise, &row}) {
        LaunchConfig c = h.choose(*k, rows, len, p);
        EXPECT_TRUE(p.launch.grid_allowed(c.grid)) << rows << "x" << len << " grid " << c.grid;
        EXPECT_TRUE(p.launch.block_allowed(c.block)) << c.block;
        EXPECT_GE(c.grid * c.rows_per_block, rows);
      }
    }
}

TEST(HostRuntime, RoundTripAndFill) {
  HostRuntime rt;
  auto p = rt.allocate(1000, 128);
  ASSERT_TRUE(p);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 128, 0u);
  std::vector<uint8_t> src(1000), dst(1000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7);
  ASSERT_TRUE(rt.copy_to_device(*p, src.data(), src.size()).is_ok());
  ASSERT_TRUE(rt.copy_to_host(dst.data(), *p, dst.size()).is_ok());
  EXPECT_EQ(src, dst);
  ASSERT_TRUE(rt.fill(*p, 0xAB, 10).is_ok());
  ASSERT_TRUE(rt.copy_to_host(dst.data(), *p, 10).is_ok());
  EXPECT_EQ(dst[9], 0xAB);
  EXPECT_FALSE(rt.allocate(16, 48));  // not a power of two: an error, not a crash
  rt.free(*p);
}

TEST(BackendParts, RequiredMembersAreChecked) {
  BackendParts parts;
  EXPECT_FALSE(parts.finalize().is_ok());  // no name
  parts.properties.name = "x";
  Status s = parts.finalize();
  EXPECT_NE(s.message().find("runtime"), std::string::npos) << s.message();
  parts.runtime = std::make_unique<HostRuntime>();
  parts.compiler = std::make_unique<HostCompiler>();
  s = parts.finalize();
  EXPECT_NE(s.message().find("dialect"), std::string::npos) << s.message();
  parts.compiler.reset();
  EXPECT_TRUE(parts.finalize().is_ok());
  EXPECT_TRUE(parts.heuristics);  // defaulted
}

std::unique_ptr<Graph> parse(const char* text) {
  onnx::ModelProto model;
  EXPECT_TRUE(onnx::OnnxParser::Parse(model, text).IsOK());
  std::string bytes;
  model.SerializeToString(&bytes);
  auto g = import_onnx_bytes(bytes, "");
  EXPECT_TRUE(g) << g.status().message();
  return g ? std::move(*g) : nullptr;
}

const char* kSoftmaxGelu = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[n,37] x, float[37] b) => (float[n,37] y, float[n,37] z) {
  t = Add(x, b)
  y = Softmax(t)
  e = Exp(x)
  z = Mul(e, t)
}
)";

// Grid-launch kernels (block, grid) compute exactly what row-range kernels compute, for any
// grid, including grids with more blocks than rows.
TEST(GridLaunchDialect, MatchesRowRangeKernels) {
  auto g = parse(kSoftmaxGelu);
  ASSERT_TRUE(g);
  auto lg = lower_graph(*g);
  ASSERT_TRUE(lg) << lg.status().message();
  HostLoopStyle grid_style;
  grid_style.grid_launch = true;
  HostCompiler compiler;
  auto rows_mod = compiler.compile(generate_cpp_source(*lg), "rows");
  auto grid_mod = compiler.compile(generate_row_loop_source(*lg, grid_style), "grid");
  ASSERT_TRUE(rows_mod) << rows_mod.status().message();
  ASSERT_TRUE(grid_mod) << grid_mod.status().message();
  using RowFn = void (*)(void* const*, const int64_t*, int64_t, int64_t);
  const int64_t n = 53;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-3, 3);
  // One float array per buffer (every buffer here is [n,37] or [37]); inputs random.
  auto fresh = [&](float poison) {
    std::vector<std::vector<float>> bufs(lg->buffers.size());
    for (size_t i = 0; i < bufs.size(); ++i)
      bufs[i].assign(lg->buffers[i].name == "b" ? 37 : n * 37, poison);
    return bufs;
  };
  auto want = fresh(-1.f);
  for (int in : lg->inputs)
    for (float& v : want[in]) v = u(rng);
  auto run_all = [&](std::vector<std::vector<float>>& bufs, const LoadedModule& mod, int64_t grid) {
    int kernels = 0;
    for (const Step& s : lg->steps) {
      if (s.kind != Step::Kind::kKernel) continue;
      ++kernels;
      auto fn = reinterpret_cast<RowFn>(mod.symbol(s.kernel.name));
      EXPECT_TRUE(fn) << s.kernel.name;
      if (!fn) return kernels;
      std::vector<void*> ptrs;
      for (int buf : s.kernel.input_buffers) ptrs.push_back(bufs[buf].data());
      ptrs.push_back(bufs[s.kernel.output_buffer].data());
      int64_t syms[] = {n};
      if (grid == 0)
        fn(ptrs.data(), syms, 0, n);  // rows of 37 for every kernel here
      else
        for (int64_t blk = 0; blk < grid; ++blk) fn(ptrs.data(), syms, blk, grid);
    }
    return kernels;
  };
  EXPECT_GE(run_all(want, *rows_mod->module, 0), 2) << print_lowered(*lg);
  for (int64_t grid : {1, 7, 48, 96}) {
    auto got = fresh(-2.f);
    for (int in : lg->inputs) got[in] = want[in];
    run_all(got, *grid_mod->module, grid);
    for (int out : lg->outputs)
      EXPECT_EQ(0, std::memcmp(want[out].data(), got[out].data(), want[out].size() * 4))
          << "grid " << grid;
  }
}

// `null` is the runnable example device: host memory, grid-launch kernels, the shared executor.
TEST(NullDevice, RunsThroughTheSharedExecutor) {
  auto d = DeviceRegistry::global().create("null");
  ASSERT_TRUE(d);
  EXPECT_EQ((*d)->properties().kind, "accelerator");
  auto ref = Session::from_graph(parse(kSoftmaxGelu), "reference");
  auto s = Session::from_graph(parse(kSoftmaxGelu), "null");
  ASSERT_TRUE(ref && s);
  Tensor x = Tensor::zeros(DType::kF32, {2, 37}), b = Tensor::zeros(DType::kF32, {37});
  for (int64_t i = 0; i < 74; ++i) x.data<float>()[i] = 0.1f * static_cast<float>(i % 11) - 0.4f;
  auto want = (*ref)->run({{"x", x}, {"b", b}});
  auto got = (*s)->run({{"x", x}, {"b", b}});
  ASSERT_TRUE(want && got) << (got ? want.status().message() : got.status().message());
  ASSERT_EQ(want->size(), got->size());
  for (size_t i = 0; i < want->size(); ++i)
    for (int64_t j = 0; j < (*want)[i].numel(); ++j)
      EXPECT_NEAR((*want)[i].data<float>()[j], (*got)[i].data<float>()[j], 1e-5);
}

// `--trace`: every compiling device writes a Chrome trace of its steps with their ONNX nodes
// when the prepared model goes away.
TEST(SharedExecutor, WritesATraceOfEveryStep) {
  for (const char* dev : {"cpu", "null", "reference"}) {
    auto path = std::filesystem::temp_directory_path() /
                ("ferrite-trace-" + std::string(dev) + "-" + std::to_string(::getpid()) + ".json");
    {
      RunOptions opts;
      opts.trace = path;
      auto s = Session::from_graph(parse(kSoftmaxGelu), dev, opts);
      ASSERT_TRUE(s) << s.status().message();
      Tensor x = Tensor::zeros(DType::kF32, {2, 37}), b = Tensor::zeros(DType::kF32, {37});
      ASSERT_TRUE((*s)->run({{"x", x}, {"b", b}}));
      ASSERT_TRUE((*s)->run({{"x", x}, {"b", b}}));
    }
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find("\"traceEvents\""), std::string::npos) << dev;
    EXPECT_NE(text.str().find("\"ph\":\"X\""), std::string::npos) << dev << text.str();
    EXPECT_NE(text.str().find("\"run\":1"), std::string::npos) << dev;
    std::filesystem::remove(path);
  }
}

TEST(DeviceRegistry, DevicesRegisterFromTheirFolders) {
  auto names = DeviceRegistry::global().names();
  for (const char* n : {"cpu", "null", "reference"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  for (const auto& n : names) {
    auto d = DeviceRegistry::global().create(n);
    ASSERT_TRUE(d);
    EXPECT_EQ((*d)->properties().name, n);
    EXPECT_FALSE((*d)->properties().cache_key().empty());
  }
}

}  // namespace
}  // namespace ferrite
