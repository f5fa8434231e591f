// `ferrite bench` end to end on a tiny model: the JSON report's fields, --inputs directories,
// option errors, and (when the project venv has onnxruntime) the interleaved ORT comparison.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "cli_util.h"
#include "frontend/onnx/tensor_proto.h"

namespace ferrite::testing {
namespace {

std::string read_all(const fs::path& p) {
  return read_text(p);
}

struct Result {
  int code = -1;  // -1: killed by a signal
  std::string out, err;
};

Result bench(const TempDir& dir, const std::vector<std::string>& args, const EnvVars& env = {}) {
  std::vector<std::string> argv{"bench"};
  argv.insert(argv.end(), args.begin(), args.end());
  CliResult c = run_ferrite(dir, argv, env);
  Result r;
  if (c.exited) r.code = c.code;
  r.out = c.out;
  r.err = c.err;
  return r;
}

// x[batch, 8] @ w[8, 4] -> Relu -> y
std::string tiny_model() {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {"batch", 8});
  std::vector<float> w(32);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
  b.init_f32("w", {8, 4}, w);
  b.node("MatMul", {"x", "w"}, {"h"}, "mm");
  b.node("Relu", {"h"}, {"y"}, "relu");
  b.output("y");
  return b.bytes();
}

// The number after "key": in a JSON text (first occurrence after `from`).
double json_number(const std::string& js, const std::string& key, size_t from = 0) {
  size_t k = js.find("\"" + key + "\": ", from);
  if (k == std::string::npos) return NAN;
  return std::strtod(js.c_str() + k + key.size() + 4, nullptr);
}

void expect_stats(const std::string& js, const std::string& runtime, int min_runs) {
  size_t at = js.find("\"" + runtime + "\": {");
  ASSERT_NE(at, std::string::npos) << runtime << " missing in " << js;
  EXPECT_GE(json_number(js, "runs", at), min_runs) << js;
  double min = json_number(js, "min_ms", at), p10 = json_number(js, "p10_ms", at),
         median = json_number(js, "median_ms", at), p90 = json_number(js, "p90_ms", at),
         mean = json_number(js, "mean_ms", at), max = json_number(js, "max_ms", at);
  EXPECT_GT(min, 0) << js;
  EXPECT_LE(min, p10);
  EXPECT_LE(p10, median);
  EXPECT_LE(median, p90);
  EXPECT_LE(p90, max);
  EXPECT_LE(min, mean);
  EXPECT_LE(mean, max);
  EXPECT_NE(js.find("\"samples_ms\": [", at), std::string::npos);
}

TEST(BenchCli, RandomInputsJsonFields) {
  TempDir dir;
  auto model = dir.write("m.onnx", tiny_model());
  auto r =
      bench(dir, {model.string(), "--input", "x=random:2x8", "--runs", "3", "--warmup", "1",
                  "--min-seconds", "0", "--threads", "1", "--json", (dir / "b.json").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("median"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("compile      cold"), std::string::npos) << r.out;
  std::string js = read_all(dir / "b.json");
  ASSERT_FALSE(js.empty());
  // No --device: the best usable device (cuda where a GPU answers, else cpu), said on stderr.
  const bool on_cpu = r.err.find("no --device given: running on cpu (") != std::string::npos;
  const bool on_cuda = r.err.find("no --device given: running on cuda (") != std::string::npos;
  EXPECT_TRUE(on_cpu || on_cuda) << r.err;
  EXPECT_NE(js.find(on_cuda ? "\"device\": \"cuda\"" : "\"device\": \"cpu\""),
            std::string::npos)
      << js;
  EXPECT_EQ(json_number(js, "threads"), 1);
  EXPECT_EQ(json_number(js, "min_runs"), 3);
  EXPECT_NE(js.find("{\"name\": \"x\", \"type\": \"f32[2,8]\"}"), std::string::npos) << js;
  size_t cold = js.find("\"cold\": {"), warm = js.find("\"warm\": {");
  ASSERT_NE(cold, std::string::npos) << js;
  ASSERT_NE(warm, std::string::npos) << js;
  for (size_t at : {cold, warm}) {
    EXPECT_GE(json_number(js, "import_seconds", at), 0);
    EXPECT_GE(json_number(js, "prepare_seconds", at), 0);
    EXPECT_GE(json_number(js, "total_seconds", at), 0);
  }
  EXPECT_GT(json_number(js, "first_run_seconds"), 0);
  expect_stats(js, "ferrite", 3);
  EXPECT_EQ(json_number(js, "runs", js.find("\"ferrite\": {")), 3) << "stops at R when S is 0";
  EXPECT_EQ(js.find("\"onnxruntime\""), std::string::npos) << "no ORT section without --compare";
}

TEST(BenchCli, InputsDirAndMinSeconds) {
  TempDir dir;
  auto model = dir.write("m.onnx", tiny_model());
  fs::create_directories(dir / "set");
  Tensor x = Tensor::from_vector<float>(std::vector<float>(24, 0.5f), {3, 8});
  ASSERT_TRUE(write_tensor_file(dir / "set" / "input_0.pb", "x", x));
  auto r =
      bench(dir, {model.string(), "--inputs", (dir / "set").string(), "--runs", "3", "--warmup",
                  "0", "--min-seconds", "0.05", "--json", (dir / "b.json").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  std::string js = read_all(dir / "b.json");
  size_t at = js.find("\"ferrite\": {");
  ASSERT_NE(at, std::string::npos) << js;
  EXPECT_GE(json_number(js, "total_seconds", at), 0.05) << "runs until S seconds are reached";
  EXPECT_NE(js.find("\"type\": \"f32[3,8]\""), std::string::npos) << js;
  // Not a terminal: progress comes as plain "bench:" lines, never a carriage return.
  EXPECT_NE(r.err.find("bench: "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
}

TEST(BenchCli, OptionErrors) {
  TempDir dir;
  auto model = dir.write("m.onnx", tiny_model()).string();
  struct Case {
    std::vector<std::string> args;
    std::string fragment;
  } cases[] = {
      {{model, "--input", "x=random:2x8", "--runs", "0"}, "--runs"},
      {{model, "--input", "x=random:2x8", "--threads", "-1"}, "--threads"},
      {{model, "--input", "x=random:2x8", "--min-seconds", "abc"}, "--min-seconds"},
      {{model, "--input", "x=random:2x8", "--compare", "tvm"}, "--compare"},
      {{model}, "no inputs"},
      {{model, "--input", "nope=random:2x8"}, "nope"},
      {{model, "--input", "x=random:2x8", "--device", "nodevice"}, "nodevice"},
      {{}, "exactly one MODEL"},
  };
  for (const auto& c : cases) {
    auto a = c.args;
    a.push_back("--quiet");
    auto r = bench(dir, a);
    EXPECT_EQ(r.code, 1) << c.fragment << ": " << r.err;
    EXPECT_NE(r.err.find("error: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos) << r.err;
  }
  // A python that does not exist: a clean error naming it.
  auto r = bench(dir, {model, "--input", "x=random:2x8", "--compare", "onnxruntime", "--quiet"},
                 {{"FERRITE_PYTHON", "/nonexistent/python"}});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/python"), std::string::npos) << r.err;
}

// The venv python with onnxruntime, or "" (the test is then skipped).
std::string ort_python() {
  std::string py;
  if (const char* env = std::getenv("FERRITE_PYTHON"); env && *env) {
    py = env;
  } else {
    // Lexical parents: tests/data need not exist, and "missing/.." does not resolve.
    py = (fs::path(FERRITE_TEST_DATA_DIR).parent_path().parent_path() / ".venv" / "bin" / "python")
             .string();
  }
  ProcessOptions quiet;
  quiet.stdout_file = quiet.stderr_file = "/dev/null";
  auto r = run_process({py, "-c", "import onnxruntime, onnx, numpy"}, quiet);
  return r && r->ok() ? py : "";
}

TEST(BenchCli, CompareOnnxRuntime) {
  std::string py = ort_python();
  if (py.empty()) GTEST_SKIP() << "no python with onnxruntime (set FERRITE_PYTHON)";
  TempDir dir;
  auto model = dir.write("m.onnx", tiny_model());
  auto r = bench(
      dir,
      {model.string(), "--input", "x=random:4x8", "--runs", "3", "--warmup", "1", "--min-seconds",
       "0", "--threads", "1", "--compare", "onnxruntime", "--json", (dir / "b.json").string()},
      {{"FERRITE_PYTHON", py}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("ferrite [0-9.]+ ms \\| onnxruntime [0-9.]+ ms \\| ratio \\(ort/ferrite\\) "
                        "[0-9.]+x")))
      << r.out;
  EXPECT_NE(r.out.find("all within tolerance"), std::string::npos) << r.out;
  std::string js = read_all(dir / "b.json");
  expect_stats(js, "ferrite", 3);
  expect_stats(js, "onnxruntime", 3);
  EXPECT_NE(js.find("\"graph_optimization_level\": \"ORT_ENABLE_ALL\""), std::string::npos) << js;
  EXPECT_EQ(json_number(js, "intra_op_num_threads"), 1) << js;
  EXPECT_NE(js.find("\"match\": true"), std::string::npos) << js;
  EXPECT_LT(json_number(js, "max_abs_diff"), 1e-4) << js;
  double ratio = json_number(js, "ratio_ort_over_ferrite");
  double expected = json_number(js, "median_ms", js.find("\"onnxruntime\": {")) /
                    json_number(js, "median_ms", js.find("\"ferrite\": {"));
  EXPECT_NEAR(ratio, expected, 1e-6 * expected) << js;
}

}  // namespace
}  // namespace ferrite::testing
