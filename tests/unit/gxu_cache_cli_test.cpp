// The GXU plugin's kernels through ferrite's compile cache (SDK 1.1 module_binary / module_load):
// a second process preparing the same model loads the module from the disk cache instead of
// calling the plugin's compiler, and gets the same results.
#include <fstream>

#include "cli_util.h"
#include "runtime/device.h"

namespace ferrite::testing {
namespace {

std::string run_gxu(const TempDir& dir, const fs::path& model, const fs::path& cache,
                    const std::string& tag) {
  fs::path out_dir = dir / ("out-" + tag);
  CliResult r = run_ferrite(dir,
                            {"run", model.string(), "--device", "gxu", "--input", "x=random:3x5",
                             "--quiet", "--output-dir", out_dir.string()},
                            {{"FERRITE_CACHE_DIR", cache.string()}, {"FERRITE_LOG", "compile"}});
  EXPECT_TRUE(r.exited && r.code == 0) << r.err;
  return r.err;
}

TEST(GxuCompileCache, SecondProcessLoadsTheModuleFromTheCache) {
  if (DeviceRegistry::global().origin("gxu").empty())
    GTEST_SKIP() << "GXU plugin not built (FERRITE_BUILD_PLUGINS)";
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

  std::string first = run_gxu(dir, model, cache, "first");
  EXPECT_NE(first.find("device compiler"), std::string::npos) << first;
  EXPECT_EQ(first.find("compile cache hit"), std::string::npos) << first;
  std::string second = run_gxu(dir, model, cache, "second");
  EXPECT_NE(second.find("compile cache hit"), std::string::npos) << second;
  EXPECT_EQ(read_text(dir / "out-first" / "0" / "output_0.pb"),
            read_text(dir / "out-second" / "0" / "output_0.pb"));

  // A corrupted entry is detected and compiled again, never handed to the plugin.
  for (const auto& e : fs::recursive_directory_iterator(cache))
    if (e.path().extension() == ".entry") std::ofstream(e.path(), std::ios::trunc) << "garbage";
  std::string third = run_gxu(dir, model, cache, "third");
  EXPECT_NE(third.find("device compiler"), std::string::npos) << third;
}

}  // namespace
}  // namespace ferrite::testing
