// The cpu device through the CLI: a second process compiling the same model loads the kernels
// from the disk compile cache instead of invoking the C++ compiler, and gets the same results.
#include <fstream>

#include "cli_util.h"

namespace ferrite::testing {
namespace {

std::string read(const fs::path& p) {
  return read_text(p);
}

// Runs `ferrite run` on the cpu device with the given cache dir; returns stderr (exit 0 asserted).
std::string run_cpu(const TempDir& dir, const fs::path& model, const fs::path& cache,
                    const std::string& tag) {
  fs::path out_dir = dir / ("out-" + tag);
  CliResult r = run_ferrite(dir,
                            {"run", model.string(), "--device", "cpu", "--input", "x=random:3x5",
                             "--quiet", "--output-dir", out_dir.string()},
                            {{"FERRITE_CACHE_DIR", cache.string()}, {"FERRITE_LOG", "compile"}});
  EXPECT_TRUE(r.exited && r.code == 0) << r.err;
  return r.err;
}

TEST(CpuCompileCache, SecondProcessHitsDiskCache) {
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

  std::string first = run_cpu(dir, model, cache, "first");
  EXPECT_NE(first.find("C++ compile"), std::string::npos) << first;
  std::string second = run_cpu(dir, model, cache, "second");
  EXPECT_NE(second.find("compile cache hit"), std::string::npos) << second;
  EXPECT_EQ(read(dir / "out-first" / "0" / "output_0.pb"),
            read(dir / "out-second" / "0" / "output_0.pb"));

  // A corrupted entry is detected and rebuilt, never loaded.
  for (const auto& e : fs::recursive_directory_iterator(cache))
    if (e.path().extension() == ".entry") std::ofstream(e.path(), std::ios::trunc) << "garbage";
  std::string third = run_cpu(dir, model, cache, "third");
  EXPECT_NE(third.find("C++ compile"), std::string::npos) << third;
}

}  // namespace
}  // namespace ferrite::testing
