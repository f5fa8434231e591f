// `ferrite bench` end to end on a tiny model: the JSON report's fields, --inputs directories,
// option errors, and (when the project venv has onnxruntime) the interleaved ORT comparison.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "cli_util.h"
#include "frontend/onnx/tensor_proto.h"

namespace ferrite::testing {
namespace {

using json = nlohmann::json;

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

// The JSON report (a test failure and null when it does not parse).
json read_json(const fs::path& p) {
  std::string text = read_text(p);
  json js = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(js.is_discarded()) << text;
  return js;
}

void expect_stats(const json& js, const std::string& runtime, int min_runs) {
  ASSERT_TRUE(js.contains(runtime)) << runtime << " missing in " << js;
  const json& st = js.at(runtime);
  EXPECT_GE(st.at("runs").get<int>(), min_runs) << js;
  double min = st.at("min_ms"), p10 = st.at("p10_ms"), median = st.at("median_ms"),
         p90 = st.at("p90_ms"), mean = st.at("mean_ms"), max = st.at("max_ms");
  EXPECT_GT(min, 0) << js;
  EXPECT_LE(min, p10);
  EXPECT_LE(p10, median);
  EXPECT_LE(median, p90);
  EXPECT_LE(p90, max);
  EXPECT_LE(min, mean);
  EXPECT_LE(mean, max);
  ASSERT_TRUE(st.at("samples_ms").is_array()) << js;
  EXPECT_EQ(st.at("samples_ms").size(), st.at("runs").get<size_t>());
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
  json js = read_json(dir / "b.json");
  ASSERT_TRUE(js.is_object());
  // No --device: the best usable device (cuda where a GPU answers, else cpu), said on stderr.
  const bool on_cpu = r.err.find("no --device given: running on cpu (") != std::string::npos;
  const bool on_cuda = r.err.find("no --device given: running on cuda (") != std::string::npos;
  EXPECT_TRUE(on_cpu || on_cuda) << r.err;
  EXPECT_EQ(js["device"], on_cuda ? "cuda" : "cpu") << js;
  EXPECT_EQ(js["model"], model.string());
  EXPECT_EQ(js["precision"], "f32");
  EXPECT_EQ(js["threads"], 1);
  EXPECT_EQ(js["warmup"], 1);
  EXPECT_EQ(js["min_runs"], 3);
  EXPECT_EQ(js["min_seconds"], 0);
  EXPECT_EQ(js["inputs"], json::parse(R"([{"name": "x", "type": "f32[2,8]"}])")) << js;
  for (const char* when : {"cold", "warm"}) {
    const json& c = js["compile"][when];
    ASSERT_TRUE(c.is_object()) << when << js;
    EXPECT_GE(c["import_seconds"].get<double>(), 0);
    EXPECT_GE(c["prepare_seconds"].get<double>(), 0);
    EXPECT_GE(c["total_seconds"].get<double>(), 0);
  }
  EXPECT_GT(js["first_run_seconds"].get<double>(), 0);
  EXPECT_GE(js["timed_wall_seconds"].get<double>(), 0);
  expect_stats(js, "ferrite", 3);
  EXPECT_EQ(js["ferrite"]["runs"], 3) << "stops at R when S is 0";
  EXPECT_FALSE(js.contains("onnxruntime")) << "no ORT section without --compare";
  EXPECT_FALSE(js.contains("ratio_ort_over_ferrite"));
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
  json js = read_json(dir / "b.json");
  ASSERT_TRUE(js.contains("ferrite")) << js;
  EXPECT_GE(js["ferrite"]["total_seconds"].get<double>(), 0.05)
      << "runs until S seconds are reached";
  EXPECT_EQ(js["inputs"][0]["type"], "f32[3,8]") << js;
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
      {{model, "other.onnx", "--input", "x=random:2x8"}, "exactly one MODEL"},
      {{model, "--input", "x=random:2x8", "--bogus", "1"}, "unknown option '--bogus'"},
      {{model, "--input", "x=random:2x8", "--runz=3"}, "unknown option '--runz'"},
      {{model, "--input"}, "--input"},
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

// The ONNX Runtime child's "ready" reply is JSON that ferrite reads: a reply that is not JSON, not
// an object, or with a field of the wrong type is a clean error, not an exception or an abort.
TEST(BenchCli, MalformedReadyReplyIsAnError) {
  TempDir dir;
  auto model = dir.write("m.onnx", tiny_model()).string();
  struct Case {
    std::string reply, fragment;
  } cases[] = {
      {R"(ready {"version": "1.0", "first_run_seconds": )", "not valid JSON"},
      {R"(ready {"version": 1.0.0})", "not valid JSON"},
      {R"(ready [1, 2])", "not a JSON object"},
      {R"(ready {"version": "1.0", "first_run_seconds": "soon"})", "not a JSON object with"},
  };
  for (const auto& c : cases) {
    // Stands in for the python: answers the one line, then waits for the quit.
    fs::path fake =
        dir.write("fake_python.sh", "#!/bin/sh\necho '" + c.reply + "'\ncat >/dev/null\n");
    fs::permissions(fake, fs::perms::owner_all);
    auto r = bench(dir, {model, "--input", "x=random:2x8", "--compare", "onnxruntime", "--quiet"},
                   {{"FERRITE_PYTHON", fake.string()}});
    EXPECT_EQ(r.code, 1) << c.reply << ": " << r.err;
    EXPECT_NE(r.err.find("error: onnxruntime child: its ready reply is " + c.fragment),
              std::string::npos)
        << r.err;
  }
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
  json js = read_json(dir / "b.json");
  expect_stats(js, "ferrite", 3);
  expect_stats(js, "onnxruntime", 3);
  const json& session = js.at("onnxruntime").at("session");
  EXPECT_EQ(session["graph_optimization_level"], "ORT_ENABLE_ALL") << js;
  EXPECT_EQ(session["intra_op_num_threads"], 1) << js;
  EXPECT_EQ(js["outputs"]["match"], true) << js;
  EXPECT_LT(js["outputs"]["max_abs_diff"].get<double>(), 1e-4) << js;
  EXPECT_EQ(js["outputs"]["per_output"][0]["name"], "y") << js;
  EXPECT_EQ(js["outputs"]["per_output"][0]["within_tolerance"], true) << js;
  double ratio = js["ratio_ort_over_ferrite"];
  double expected =
      js["onnxruntime"]["median_ms"].get<double>() / js["ferrite"]["median_ms"].get<double>();
  EXPECT_NEAR(ratio, expected, 1e-6 * expected) << js;
}

}  // namespace
}  // namespace ferrite::testing
