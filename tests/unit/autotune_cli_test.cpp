// Autotuning through the CLI on cpu and gxu: the first process times candidate launches and
// writes the tuning database; a second process with the same cache dir reuses every record and
// times nothing; results equal the untuned run's. Plus the candidate generator's legality.
#include <fstream>
#include <regex>
#include <sstream>

#include "cli_util.h"
#include "lower/kernel_ir.h"
#include "runtime/device.h"
#include "tune/autotuner.h"

namespace ferrite::testing {
namespace {

std::string read(const fs::path& p) {
  return read_text(p);
}

// Runs `ferrite run`; returns its stdout followed by its stderr (exit 0 asserted).
std::string run(const TempDir& dir, const fs::path& model, const std::string& device,
                const fs::path& cache, const std::string& tag, bool autotune) {
  fs::path out_dir = dir / ("out-" + tag);
  std::vector<std::string> args{"run",     model.string(),    "--device",     device,
                                "--input", "x=random:300x64", "--output-dir", out_dir.string()};
  if (autotune) args.push_back("--autotune");
  CliResult r =
      run_ferrite(dir, args, {{"FERRITE_CACHE_DIR", cache.string()}, {"FERRITE_PROGRESS", "0"}});
  EXPECT_TRUE(r.exited && r.code == 0) << r.out << r.err;
  return r.out + r.err;
}

// "autotune: T kernel launches timed (...), R reused ..."
std::pair<int, int> tuned_reused(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m,
                         std::regex(R"(autotune: (\d+) kernel launches timed .*, (\d+) reused)")))
    return {-1, -1};
  return {std::stoi(m[1]), std::stoi(m[2])};
}

void check_device(const std::string& device) {
  if (DeviceRegistry::global().origin(device).empty()) GTEST_SKIP() << device << " not available";
  TempDir dir;
  ModelBuilder b;
  b.input("x", kOnnxFloat, {"n", 64});
  b.node("Exp", {"x"}, {"e"}, "exp");
  b.node("Mul", {"e", "x"}, {"m"}, "mul");
  b.node("Softmax", {"m"}, {"y"}, "softmax");
  b.node("Sigmoid", {"x"}, {"z"}, "sigmoid");
  b.output("y");
  b.output("z");
  fs::path model = dir / "model.onnx";
  std::ofstream(model, std::ios::binary) << b.bytes();
  fs::path cache = dir / "cache";
  std::string first = run(dir, model, device, cache, "first", true);
  auto [t1, r1] = tuned_reused(first);
  EXPECT_GE(t1, 2) << first;
  EXPECT_EQ(r1, 0) << first;
  std::string second = run(dir, model, device, cache, "second", true);
  auto [t2, r2] = tuned_reused(second);
  EXPECT_EQ(t2, 0) << second;
  EXPECT_EQ(r2, t1) << second;
  // Random inputs are seeded: the untuned run computes the same outputs.
  run(dir, model, device, dir / "cache-untuned", "plain", false);
  for (const char* o : {"output_0.pb", "output_1.pb"})
    EXPECT_EQ(read(dir / "out-first" / "0" / o), read(dir / "out-plain" / "0" / o)) << o;
  EXPECT_EQ(read(dir / "out-second" / "0" / "output_0.pb"),
            read(dir / "out-plain" / "0" / "output_0.pb"));
  EXPECT_NE(read(dir / "out-first" / "run.json").find("\"autotune\""), std::string::npos);
}

TEST(AutotuneCli, CpuSecondProcessReusesTheDatabase) {
  check_device("cpu");
}
TEST(AutotuneCli, GxuSecondProcessReusesTheDatabase) {
  check_device("gxu");
}

TEST(TuningCandidates, AllLegalForTheVendorSpec) {
  DeviceProperties p;
  p.name = "vendor";
  p.compute_units = 5;
  p.launch.max_block = 32;
  p.launch.warp_size = 32;
  p.launch.max_warps_per_block = 1;
  p.launch.grid_any_upto = 48;
  p.launch.grid_multiple = 48;
  Kernel k;
  DefaultHeuristics h;
  for (int64_t rows : {1, 50, 977, 100000}) {
    LaunchConfig base = h.choose(k, rows, 64, p);
    auto c = tuning_candidates(k, rows, 64, p, base);
    if (rows > 1) {
      ASSERT_GE(c.size(), 2u) << rows;  // one row: one sensible launch
    }
    for (const auto& x : c) {
      EXPECT_TRUE(p.launch.grid_allowed(x.grid)) << x.grid;
      EXPECT_TRUE(p.launch.block_allowed(x.block)) << x.block;
    }
    auto round = parse_launch(format_launch(c.back()));
    ASSERT_TRUE(round);
    EXPECT_EQ(round->grid, c.back().grid);
  }
  EXPECT_FALSE(parse_launch("grid=0 block=32 rows=1 shared=0"));
  EXPECT_FALSE(parse_launch("garbage"));
}

}  // namespace
}  // namespace ferrite::testing
