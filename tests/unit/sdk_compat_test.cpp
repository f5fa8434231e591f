// Device SDK 1.1 against older plugins and the spec's launch rules: a plugin built against the
// frozen SDK 1.0 header (sdk_v1_0/) loads, reports the 1.0 defaults for what 1.1 added, and runs
// a model; tables smaller than 1.0's are refused; the exact warp counts of a spec are the only
// ones heuristics and tuning produce; the spec's dtypes reach the device properties.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "backend_api/heuristics.h"
#include "lower/lowering.h"
#include "plugin_host/plugin_device.h"
#include "plugin_host/plugin_loader.h"
#include "support/subprocess.h"
#include "test_util.h"
#include "tune/autotuner.h"

#ifndef FERRITE_TEST_PLUGIN_V1_0
#error "FERRITE_TEST_PLUGIN_V1_0 must name the SDK 1.0 test plugin"
#endif

namespace ferrite::testing {
namespace {

// y = Exp(Relu(MatMul(x, w))): a generated MatMul and pointwise kernels.
std::string matmul_model() {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {"batch", 8});
  b.input("w", kOnnxFloat, {8, 4});
  b.node("MatMul", {"x", "w"}, {"m"}, "matmul");
  b.node("Relu", {"m"}, {"r"}, "relu");
  b.node("Exp", {"r"}, {"y"}, "exp");
  b.output("y");
  return b.bytes();
}

Tensor filled(std::vector<int64_t> dims, float scale) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = scale * static_cast<float>((i * 7) % 13 - 6);
  return t;
}

TEST(SdkCompat, PluginBuiltAgainstSdk10LoadsAndRuns) {
  auto loaded = load_plugin(FERRITE_TEST_PLUGIN_V1_0);
  ASSERT_TRUE(loaded) << loaded.status().message();
  EXPECT_EQ(loaded->sdk_minor, 0u);
  // Everything SDK 1.1 appended reads as absent, whatever lies past the plugin's table.
  EXPECT_EQ(loaded->api->library_accepts, nullptr);
  EXPECT_EQ(loaded->api->library_run, nullptr);
  EXPECT_EQ(loaded->api->module_binary, nullptr);
  EXPECT_EQ(loaded->api->spec->dtypes, nullptr);
  EXPECT_EQ(loaded->api->spec->library_ops_count, 0);
  EXPECT_STREQ(loaded->api->spec->name, "v10dev");

  auto shared = std::make_shared<LoadedPlugin>(std::move(loaded).value());
  auto device = make_plugin_device(shared);
  ASSERT_TRUE(device) << device.status().message();
  const DeviceProperties props = (*device)->properties();
  EXPECT_EQ(props.dtypes,
            (std::vector<DType>{DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kBool}));

  auto g = import_bytes(matmul_model());
  ASSERT_TRUE(g) << g.status().message();
  auto model = (*device)->prepare(**g, RunOptions{});
  ASSERT_TRUE(model) << model.status().message();
  Tensor x = filled({3, 8}, 0.25f), w = filled({8, 4}, 0.5f);
  auto got = (*model)->run({x, w});
  ASSERT_TRUE(got) << got.status().message();
  ASSERT_EQ((*got)[0].dims(), (std::vector<int64_t>{3, 4}));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) {
      float s = 0;
      for (int64_t k = 0; k < 8; ++k) s += x.data<float>()[i * 8 + k] * w.data<float>()[k * 4 + j];
      EXPECT_NEAR((*got)[0].data<float>()[i * 4 + j], std::exp(std::max(s, 0.f)), 1e-4f)
          << i << "," << j;
    }
}

// A table that ends inside SDK 1.0's (struct_size too small) is refused, naming the sizes.
TEST(SdkCompat, RefusesTablesSmallerThanSdk10) {
  TempDir dir;
  fs::path src = dir.path() / "short.cpp", so = dir.path() / "libshort.so";
  std::ofstream(src) << R"(
#include <ferrite/device_sdk.h>
static fe_device_spec spec = {sizeof(fe_device_spec), "short"};
static fe_device_plugin p = {FE_SDK_VERSION_MAJOR, 0, 40, &spec};
extern "C" const fe_device_plugin* ferrite_device_plugin_v1(void) { return &p; }
)";
  auto built = run_process({"c++", "-shared", "-fPIC", std::string("-I") + FERRITE_SDK_INCLUDE_DIR,
                            "-o", so.string(), src.string()});
  ASSERT_TRUE(built && built->ok()) << (built ? built->output : built.status().message());
  auto loaded = load_plugin(so.string());
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.status().message().find("plugin table is 40 bytes, SDK 1.0 needs at least"),
            std::string::npos)
      << loaded.status().message();
}

fe_device_spec spec_with_warps(std::initializer_list<int32_t> warps) {
  fe_device_spec s{};
  s.struct_size = sizeof(fe_device_spec);
  s.name = "warps";
  s.compute_units = 4;
  s.warp_size = 32;
  int i = 0;
  for (int32_t w : warps) s.allowed_num_warps[i++] = w;
  s.allowed_num_warps_count = i;
  s.max_threads_per_block = 1024;
  s.grid[0] = fe_dim_rule{int64_t{1} << 31, int64_t{1} << 31, 1};
  static const fe_dtype dtypes[] = {FE_DTYPE_F32, FE_DTYPE_I64};
  s.dtypes = dtypes;
  s.dtypes_count = 2;
  return s;
}

// The kernels of softmax over rows of `row_len` (a row kernel) and of Exp (pointwise).
LoweredGraph lowered(int64_t row_len) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {"n", row_len});
  b.node("Softmax", {"x"}, {"s"}, "softmax");
  b.node("Exp", {"x"}, {"e"}, "exp");
  b.output("s");
  b.output("e");
  auto g = import_bytes(b.bytes());
  EXPECT_TRUE(g) << g.status().message();
  auto lg = lower_graph(**g);
  EXPECT_TRUE(lg) << lg.status().message();
  return std::move(lg).value();
}

// Allowed warps {1, 4}: a block of 2 warps (what a 64-wide row asks for) is never launched, by
// the heuristics or among the tuning candidates. SDK 1.0 hosts kept only the maximum (4) and
// launched 2 warps.
TEST(SdkCompat, OnlyTheSpecsWarpCountsAreLaunched) {
  const DeviceProperties p = properties_from_spec(spec_with_warps({4, 1}));
  EXPECT_EQ(p.launch.allowed_warps, (std::vector<int64_t>{1, 4}));
  EXPECT_TRUE(p.launch.block_allowed(32));
  EXPECT_FALSE(p.launch.block_allowed(64));
  EXPECT_TRUE(p.launch.block_allowed(128));
  EXPECT_FALSE(p.launch.block_allowed(256));
  EXPECT_EQ(p.dtypes, (std::vector<DType>{DType::kF32, DType::kI64}));
  DefaultHeuristics h;
  int row_kernels = 0, pointwise = 0;
  for (int64_t row_len : {16, 48, 64, 100, 2048}) {
    LoweredGraph lg = lowered(row_len);
    for (const Step& s : lg.steps) {
      if (s.kind != Step::Kind::kKernel) continue;
      ++(s.kernel.is_row() ? row_kernels : pointwise);
      for (int64_t rows : {1, 7, 64, 5000}) {
        LaunchConfig c = h.choose(s.kernel, rows, row_len, p);
        EXPECT_TRUE(c.block == 32 || c.block == 128)
            << "block " << c.block << " row_len " << row_len << " rows " << rows;
        for (const LaunchConfig& t : tuning_candidates(s.kernel, rows, row_len, p, c))
          EXPECT_TRUE(t.block == 32 || t.block == 128) << "candidate block " << t.block;
      }
    }
  }
  EXPECT_GT(row_kernels, 0);
  EXPECT_GT(pointwise, 0);
  // Three warps only: not a power of two, still the one count used.
  const DeviceProperties three = properties_from_spec(spec_with_warps({3}));
  LoweredGraph lg = lowered(64);
  for (const Step& s : lg.steps)
    if (s.kind == Step::Kind::kKernel) {
      LaunchConfig c = h.choose(s.kernel, 100, 64, three);
      EXPECT_EQ(c.block, 96);
      auto cands = tuning_candidates(s.kernel, 100, 64, three, c);
      ASSERT_FALSE(cands.empty());
      for (const LaunchConfig& t : cands) EXPECT_EQ(t.block, 96);
    }
}

}  // namespace
}  // namespace ferrite::testing
