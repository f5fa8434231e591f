// The device SDK through the GXU plugin: discovery and origin, version refusal, the device's own
// launch rules (illegal grids and warps refused with its error), grid adjustment up and down
// without changing results, and device pointers that are not host pointers.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "backends/cpu/host_compiler.h"
#include "codegen/cpp_source.h"
#include "lower/lowering.h"
#include "plugin_host/plugin_loader.h"
#include "runtime/device.h"
#include "runtime/session.h"
#include "support/subprocess.h"
#include "test_util.h"

namespace ferrite {
namespace {

namespace fs = std::filesystem;

const LoadedPlugin* gxu() {
  static std::optional<LoadedPlugin> plugin = []() -> std::optional<LoadedPlugin> {
    std::string origin = DeviceRegistry::global().origin("gxu");
    if (origin.empty() || origin == "built-in") return std::nullopt;
    auto p = load_plugin(origin);
    if (!p) return std::nullopt;
    return std::move(p).value();
  }();
  return plugin ? &*plugin : nullptr;
}

#define REQUIRE_GXU()                                                          \
  const LoadedPlugin* plugin = gxu();                                          \
  if (!plugin) GTEST_SKIP() << "GXU plugin not built (FERRITE_BUILD_PLUGINS)"; \
  const fe_device_plugin& api = *plugin->api

TEST(GxuPlugin, DiscoveredAsAPluginWithItsSpec) {
  REQUIRE_GXU();
  auto d = DeviceRegistry::global().create("gxu");
  ASSERT_TRUE(d) << d.status().message();
  DeviceProperties p = (*d)->properties();
  EXPECT_EQ(p.kind, "accelerator");
  EXPECT_EQ(p.launch.warp_size, 32);
  EXPECT_EQ(p.launch.max_warps_per_block, 1);
  EXPECT_EQ(p.launch.grid_any_upto, 48);
  EXPECT_EQ(p.launch.grid_multiple, 48);
  EXPECT_FALSE(p.host_addressable);
  EXPECT_NE(DeviceRegistry::global().origin("gxu").find("libferrite_gxu.so"), std::string::npos);
}

TEST(GxuPlugin, DevicePointersAreNotHostPointers) {
  REQUIRE_GXU();
  void* p = nullptr;
  ASSERT_EQ(api.malloc(&p, 1024), FE_OK);
  EXPECT_GE(reinterpret_cast<uintptr_t>(p), uintptr_t{1} << 52);
  std::vector<float> in(256), out(256, 0.f);
  for (int i = 0; i < 256; ++i) in[i] = static_cast<float>(i) * 0.5f;
  ASSERT_EQ(api.memcpy_h2d(p, in.data(), 1024), FE_OK);
  ASSERT_EQ(api.memcpy_d2h(out.data(), p, 1024), FE_OK);
  EXPECT_EQ(in, out);
  // Out of bounds and foreign pointers are the device's errors, not crashes.
  EXPECT_NE(api.memcpy_d2h(out.data(), p, 4096), FE_OK);
  EXPECT_NE(api.memcpy_d2h(out.data(), in.data(), 4), FE_OK);
  EXPECT_EQ(api.free(p), FE_OK);
  EXPECT_NE(api.free(p), FE_OK);  // double free
}

std::unique_ptr<Graph> parse(const char* text) {
  onnx::ModelProto model;
  EXPECT_TRUE(onnx::OnnxParser::Parse(model, text).IsOK());
  std::string bytes;
  model.SerializeToString(&bytes);
  auto g = import_onnx_bytes(bytes, "");
  return g ? std::move(*g) : nullptr;
}

// One pointwise kernel over [n, 64] reading only x: y = exp(x) * x + x.
const char* kPointwise = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[n,64] x) => (float[n,64] y) {
  e = Exp(x)
  m = Mul(e, x)
  y = Add(m, x)
}
)";

struct Compiled {
  LoweredGraph lg;
  fe_module module = nullptr;
  fe_function fn = nullptr;
};

TEST(GxuPlugin, IllegalLaunchesFailWithTheDevicesError_AdjustedGridsGiveTheSameResult) {
  REQUIRE_GXU();
  auto g = parse(kPointwise);
  ASSERT_TRUE(g);
  auto lg = lower_graph(*g);
  ASSERT_TRUE(lg) << lg.status().message();
  ASSERT_EQ(lg->kernels, 1) << print_lowered(*lg);
  for (const Step& s : lg->steps)
    if (s.kind == Step::Kind::kKernel) ASSERT_EQ(s.kernel.input_buffers.size(), 1u);
  const Kernel* k = nullptr;
  for (const Step& s : lg->steps)
    if (s.kind == Step::Kind::kKernel) k = &s.kernel;
  HostLoopStyle style;
  style.grid_launch = true;
  std::string src = generate_row_loop_source(*lg, style);
  fe_module m = nullptr;
  const char* log = nullptr;
  ASSERT_EQ(api.module_compile(src.data(), src.size(), &m, &log), FE_OK) << (log ? log : "");
  fe_function fn = nullptr;
  ASSERT_EQ(api.module_get_function(m, k->name.c_str(), &fn), FE_OK);

  // Reference: the row-range kernel on the host over all rows.
  const int64_t n = 1001;  // rows: a grid of 57 would be the natural choice; gxu refuses it
  std::vector<float> x(n * 64);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-2, 2);
  for (float& v : x) v = u(rng);
  HostCompiler host;
  auto rows_mod = host.compile(generate_cpp_source(*lg), "rows");
  ASSERT_TRUE(rows_mod) << rows_mod.status().message();
  using RowFn = void (*)(void* const*, const int64_t*, int64_t, int64_t);
  auto ref_fn = reinterpret_cast<RowFn>(rows_mod->module->symbol(k->name));
  ASSERT_TRUE(ref_fn);
  std::vector<float> want(n * 64, -7.f);
  std::vector<void*> host_bufs = {x.data(), want.data()};
  int64_t syms[] = {n};
  ref_fn(host_bufs.data(), syms, 0, n);

  void *dx = nullptr, *dy = nullptr;
  ASSERT_EQ(api.malloc(&dx, x.size() * 4), FE_OK);
  ASSERT_EQ(api.malloc(&dy, x.size() * 4), FE_OK);
  ASSERT_EQ(api.memcpy_h2d(dx, x.data(), x.size() * 4), FE_OK);
  void* bufs[] = {dx, dy};
  fe_kernel_args args{bufs, 2, syms, 1};

  fe_status st = api.launch_kernel(fn, 57, 1, 1, 32, 0, 0, &args);
  EXPECT_NE(st, FE_OK);
  EXPECT_STREQ(api.last_error_message(), "Invalid grid size 57 (must be <= 48 or multiple of 48)");
  st = api.launch_kernel(fn, 48, 1, 1, 64, 0, 0, &args);  // two warps
  EXPECT_NE(st, FE_OK);
  EXPECT_NE(std::string(api.last_error_message()).find("one warp"), std::string::npos);

  LaunchLimits lim;
  lim.grid_any_upto = 48;
  lim.grid_multiple = 48;
  // Rounded down (57 -> 48) and up (57 -> 96): any legal grid covers every row exactly once.
  for (int64_t grid : {lim.clamp_grid(57), int64_t{96}, int64_t{1}, int64_t{960}}) {
    ASSERT_TRUE(lim.grid_allowed(grid));
    std::vector<float> poison(x.size(), -1.f), got(x.size());
    ASSERT_EQ(api.memcpy_h2d(dy, poison.data(), poison.size() * 4), FE_OK);
    ASSERT_EQ(api.launch_kernel(fn, grid, 1, 1, 32, 0, 0, &args), FE_OK)
        << api.last_error_message();
    ASSERT_EQ(api.memcpy_d2h(got.data(), dy, got.size() * 4), FE_OK);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << "grid " << grid;
  }
  EXPECT_EQ(lim.clamp_grid(57), 48);
  api.free(dx);
  api.free(dy);
  api.module_unload(m);
}

// Session::run_device on a device with memory of its own: outputs are computed in the memory the
// caller's allocator gives (asked once per output, in the order the run places them), memory that
// overlaps an input is written at the end, intermediates live in memory the caller lends for the
// run (DeviceRun::memory) where it does, and every output equals the reference device's.
const char* kThreeOutputs = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[n,64] x) => (float[n,64] y, float[n,64] z, float[n,64] x2) {
  y = Relu(x)
  t = Transpose(x)
  g = MatMul(t, y)
  h = Sigmoid(g)
  m = MatMul(x, h)
  z = Add(m, y)
  x2 = Identity(x)
}
)";

TEST(GxuPlugin, RunOnDeviceMemoryComputesOutputsInTheCallersMemory) {
  REQUIRE_GXU();
  auto session = Session::from_graph(parse(kThreeOutputs), "gxu");
  ASSERT_TRUE(session) << session.status().message();
  auto reference = Session::from_graph(parse(kThreeOutputs), "reference");
  ASSERT_TRUE(reference) << reference.status().message();
  const int64_t n = 37, count = n * 64;
  const size_t bytes = static_cast<size_t>(count) * 4;
  auto xt = Tensor::create_uninitialized(DType::kF32, {n, 64});
  ASSERT_TRUE(xt);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  float* x = xt->data<float>();
  for (int64_t k = 0; k < count; ++k) x[k] = u(rng);
  auto want = (*reference)->run({Session::NamedInput{"x", *xt}});
  ASSERT_TRUE(want) << want.status().message();
  void* dx = nullptr;
  ASSERT_EQ(api.malloc(&dx, bytes), FE_OK);

  // alias_z: the caller gives z the input's own memory (allowed; it is then written at the end).
  // lend: 0 the model's own arena, 1 the caller's block for the run, 2 a caller's block per value
  // given back after its last reader (memory_free), with input_done.
  for (bool alias_z : {false, true})
    for (int lend : {0, 1, 2}) {
      SCOPED_TRACE(std::string(alias_z ? "z in the input's memory" : "fresh output memory") +
                   ", lend " + std::to_string(lend));
      ASSERT_EQ(api.memcpy_h2d(dx, x, bytes), FE_OK);
      std::vector<void*> out(3, nullptr), lent;
      std::vector<size_t> order;
      DeviceRun run;
      run.input_dev = {dx};
      run.output = [&](size_t i, DType dtype, const std::vector<int64_t>& dims) -> Expected<void*> {
        EXPECT_EQ(dtype, DType::kF32);
        EXPECT_EQ(dims, (std::vector<int64_t>{n, 64}));
        EXPECT_EQ(out.at(i), nullptr) << "output " << i << " asked for twice";
        order.push_back(i);
        if (alias_z && i == 1) return out[i] = dx;
        if (api.malloc(&out[i], bytes) != FE_OK) return err("gxu malloc");
        return out[i];
      };
      std::set<void*> held;  // lend 2: blocks not given back yet
      int done = 0;
      if (lend)
        run.memory = [&](size_t nbytes) -> Expected<void*> {
          void* p = nullptr;
          if (api.malloc(&p, nbytes) != FE_OK) return err("gxu malloc");
          lent.push_back(p);
          held.insert(p);
          return p;
        };
      if (lend == 2) {
        run.memory_free = [&](void* p) {
          EXPECT_EQ(held.erase(p), 1u) << "a block given back twice or never lent";
          api.free(p);
        };
        run.input_done = [&](size_t i) {
          EXPECT_EQ(i, 0u);
          ++done;
        };
      }
      Session::RunInfo info;
      Status st = (*session)->run_device({Session::NamedInput{"x", *xt}}, run, &info);
      ASSERT_TRUE(st) << st.message();
      ASSERT_EQ(order.size(), 3u);
      for (int i = 0; i < 3; ++i) {
        std::vector<float> got(count);
        ASSERT_EQ(api.memcpy_d2h(got.data(), out[i], bytes), FE_OK);
        const float* w = (*want)[i].data<float>();
        for (int64_t k = 0; k < count; ++k)
          ASSERT_NEAR(got[k], w[k], 1e-4f * (1 + std::fabs(w[k]))) << "output " << i << " @" << k;
      }
      ASSERT_TRUE(info.stats.memory);
      // Every output is a kernel's (x2 a copy kernel's): computed in the caller's memory, except
      // z where that memory is the input's, which the later steps still read.
      EXPECT_EQ(info.stats.memory->outputs_in_caller_memory, alias_z ? 2 : 3);
      EXPECT_EQ(info.stats.memory->output_bytes_copied_to_caller,
                alias_z ? static_cast<int64_t>(bytes) : 0);
      // The planned intermediates (g, m, ...) are lent: as one block, or a block each, all given
      // back by the end of the run; z, where its memory is the input's, is computed in a block
      // of its own first.
      EXPECT_GT(info.stats.memory->planned_peak_bytes, 0);
      const auto planned = static_cast<size_t>(info.stats.memory->planned_buffers);
      EXPECT_GE(planned, 2u);
      EXPECT_EQ(lent.size(), lend == 0 ? 0u : (lend == 1 ? 1u : planned) + (alias_z ? 1u : 0u));
      if (lend == 2) {
        EXPECT_TRUE(held.empty());
        EXPECT_EQ(done, 1);
      }
      for (int i = 0; i < 3; ++i)
        if (out[i] != dx) api.free(out[i]);
      if (lend == 1)
        for (void* p : lent) api.free(p);
    }
  api.free(dx);
}

// An update graph run on device memory with RunOptions::outputs_into_inputs: the caller hands
// each such output its input's memory, and the output's kernel updates that input in place (no
// copy at the end).
const char* kUpdate = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[n,64] p, float[n,64] m, float[n,64] gr) => (float[n,64] p2, float[n,64] m2, float[n,64] s) {
  c = Constant <value = float {0.9}> ()
  lr = Constant <value = float {0.01}> ()
  mc = Mul(m, c)
  m2 = Add(mc, gr)
  d = Mul(m2, lr)
  p2 = Sub(p, d)
  s = Mul(m, gr)
}
)";

TEST(GxuPlugin, RunOnDeviceMemoryWritesOutputsIntoTheirInputs) {
  REQUIRE_GXU();
  RunOptions o;
  o.outputs_into_inputs = {0, 1, -1};
  auto session = Session::from_graph(parse(kUpdate), "gxu", o);
  ASSERT_TRUE(session) << session.status().message();
  auto reference = Session::from_graph(parse(kUpdate), "reference");
  ASSERT_TRUE(reference) << reference.status().message();
  const int64_t n = 21, count = n * 64;
  const size_t bytes = static_cast<size_t>(count) * 4;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<Tensor> host;
  std::vector<Session::NamedInput> named;
  std::vector<void*> dev(3, nullptr);
  for (int i = 0; i < 3; ++i) {
    auto t = Tensor::create_uninitialized(DType::kF32, {n, 64});
    ASSERT_TRUE(t);
    for (int64_t k = 0; k < count; ++k) t->data<float>()[k] = u(rng);
    ASSERT_EQ(api.malloc(&dev[i], bytes), FE_OK);
    ASSERT_EQ(api.memcpy_h2d(dev[i], t->raw(), bytes), FE_OK);
    named.push_back({std::string(1, "pmg"[i]) + (i == 2 ? "r" : ""), *t});
    host.push_back(*t);
  }
  auto want = (*reference)->run(named);
  ASSERT_TRUE(want) << want.status().message();
  std::vector<void*> out(3, nullptr);
  DeviceRun run;
  run.input_dev = {dev[0], dev[1], dev[2]};
  run.output = [&](size_t i, DType, const std::vector<int64_t>&) -> Expected<void*> {
    if (i < 2) return out[i] = dev[i];  // p2 into p, m2 into m
    if (api.malloc(&out[i], bytes) != FE_OK) return err("gxu malloc");
    return out[i];
  };
  Session::RunInfo info;
  Status st = (*session)->run_device(named, run, &info);
  ASSERT_TRUE(st) << st.message();
  for (int i = 0; i < 3; ++i) {
    std::vector<float> got(count);
    ASSERT_EQ(api.memcpy_d2h(got.data(), out[i], bytes), FE_OK);
    const float* w = (*want)[i].data<float>();
    for (int64_t k = 0; k < count; ++k)
      ASSERT_NEAR(got[k], w[k], 1e-5f * (1 + std::fabs(w[k]))) << "output " << i << " @" << k;
  }
  ASSERT_TRUE(info.stats.memory);
  // The pointwise chain fuses into kernels that read each element of p and m before storing it:
  // both updates are written in place, none copied at the end.
  EXPECT_EQ(info.stats.memory->outputs_in_place, 2);
  EXPECT_EQ(info.stats.memory->outputs_copied_into_inputs, 0);
  api.free(out[2]);
  for (void* p : dev) api.free(p);
}

// A plugin built for another SDK major version is refused with a message saying so.
TEST(PluginLoader, RefusesOtherSdkVersions) {
  ferrite::testing::TempDir dir;
  fs::path src = dir.path() / "old.cpp", so = dir.path() / "libold.so";
  std::ofstream(src) << R"(
#include <ferrite/device_sdk.h>
static fe_device_spec spec = {sizeof(fe_device_spec), "old"};
static fe_device_plugin p = {FE_SDK_VERSION_MAJOR + 1, 0, sizeof(fe_device_plugin), &spec};
extern "C" const fe_device_plugin* ferrite_device_plugin_v1(void) { return &p; }
)";
  auto built = run_process({"c++", "-shared", "-fPIC", std::string("-I") + FERRITE_SDK_INCLUDE_DIR,
                            "-o", so.string(), src.string()});
  ASSERT_TRUE(built && built->ok()) << (built ? built->output : built.status().message());
  auto loaded = load_plugin(so.string());
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.status().message().find("built for device SDK 2.0"), std::string::npos)
      << loaded.status().message();
  auto junk = load_plugin((dir.path() / "missing.so").string());
  EXPECT_FALSE(junk);
}

}  // namespace
}  // namespace ferrite
