// Compiling devices through the CLI and the disk compile cache: a second process compiling the
// same model loads the kernels from the cache instead of invoking the device's compiler (cpu: the
// host C++ compiler; gxu: the plugin's module_compile, cached through SDK 1.1's module_binary /
// module_load), gets the same results, and a corrupted entry is compiled again, never loaded.
#include <fstream>

#include "cli_util.h"
#include "runtime/device.h"

namespace ferrite::testing {
namespace {

struct CacheCase {
  const char* device;
  const char* compiler_log;  // what FERRITE_LOG=compile prints when the compiler runs
};

class CompileCacheCli : public ::testing::TestWithParam<CacheCase> {};

// Runs `ferrite run` on the device with the given cache dir; returns stderr (exit 0 asserted).
std::string run_with_cache(const char* device, const TempDir& dir, const fs::path& model,
                           const fs::path& cache, const std::string& tag) {
  fs::path out_dir = dir / ("out-" + tag);
  CliResult r = run_ferrite(dir,
                            {"run", model.string(), "--device", device, "--input", "x=random:3x5",
                             "--quiet", "--output-dir", out_dir.string()},
                            {{"FERRITE_CACHE_DIR", cache.string()}, {"FERRITE_LOG", "compile"}});
  EXPECT_TRUE(r.exited && r.code == 0) << r.err;
  return r.err;
}

TEST_P(CompileCacheCli, SecondProcessHitsDiskCache) {
  const CacheCase& c = GetParam();
  if (DeviceRegistry::global().origin(c.device).empty())
    GTEST_SKIP() << "device " << c.device << " not built";
  TempDir dir;
  ModelBuilder b;
  b.input("x", kOnnxFloat, {"batch", 5});
  b.node("Exp", {"x"}, {"e"}, "exp");
  b.node("Add", {"e", "x"}, {"s"}, "add");
  b.node("Relu", {"s"}, {"y"}, "relu");
  b.output("y");
  fs::path model = dir / "model.onnx";
  std::ofstream(model, std::ios::binary) << b.bytes();
  fs::path cache = dir / "cache";

  std::string first = run_with_cache(c.device, dir, model, cache, "first");
  EXPECT_NE(first.find(c.compiler_log), std::string::npos) << first;
  EXPECT_EQ(first.find("compile cache hit"), std::string::npos) << first;
  std::string second = run_with_cache(c.device, dir, model, cache, "second");
  EXPECT_NE(second.find("compile cache hit"), std::string::npos) << second;
  EXPECT_EQ(read_text(dir / "out-first" / "0" / "output_0.pb"),
            read_text(dir / "out-second" / "0" / "output_0.pb"));

  for (const auto& e : fs::recursive_directory_iterator(cache))
    if (e.path().extension() == ".entry") std::ofstream(e.path(), std::ios::trunc) << "garbage";
  std::string third = run_with_cache(c.device, dir, model, cache, "third");
  EXPECT_NE(third.find(c.compiler_log), std::string::npos) << third;
}

INSTANTIATE_TEST_SUITE_P(Devices, CompileCacheCli,
                         ::testing::Values(CacheCase{"cpu", "C++ compile"},
                                           CacheCase{"gxu", "device compiler"}),
                         [](const ::testing::TestParamInfo<CacheCase>& i) {
                           return std::string(i.param.device);
                         });

}  // namespace
}  // namespace ferrite::testing
