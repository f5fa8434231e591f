// The `ferrite` command line (CLI11): help, unknown commands and options, option forms (repeated,
// `--key=value`, options before the model), and the JSON files the commands write (nlohmann-json):
// run.json, `test-onnx --json` and `cts --json` parse and keep their keys.
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "frontend/onnx/tensor_proto.h"

namespace ferrite::testing {
namespace {

using json = nlohmann::json;

// A one-Relu model on a [2] input, written into `dir` as `name`.
fs::path relu_model(TempDir& dir, const std::string& name = "m.onnx") {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {2});
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.output("y");
  return dir.write(name, b.bytes());
}

json read_json(const fs::path& p) {
  std::string text = read_text(p);
  json js = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(js.is_object()) << p << ": " << text;
  return js;
}

TEST(CliArgs, HelpListsCommandsAndOptions) {
  TempDir dir;
  CliResult top = run_ferrite(dir, {"--help"});
  EXPECT_TRUE(top.exited && top.code == 0) << top.err;
  for (const char* cmd : {"run", "info", "test-onnx", "bench", "cts", "ops", "devices"})
    EXPECT_NE(top.out.find(std::string("\n  ") + cmd + " "), std::string::npos) << cmd << top.out;
  EXPECT_NE(top.out.find("ferrite <command> --help"), std::string::npos) << top.out;
  // Without a command: the same help on stderr, exit 2.
  CliResult none = run_ferrite(dir, {});
  EXPECT_TRUE(none.exited && none.code == 2);
  EXPECT_EQ(none.err, top.out);
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> fragments;
  } cases[] = {
      {{"run", "--help"},
       {"ferrite run", "--inputs DIR", "--tensor-parallel N", "tensor-core GEMMs", "--check",
        "recompiles once"}},
      {{"bench", "-h"},
       {"ferrite bench", "--min-seconds S", "What is measured", "ratio (ort/ferrite) 0.82x"}},
      {{"info", "--help"}, {"--after PASS", "--list-passes", "histogram of its ops"}},
      {{"test-onnx", "--help"}, {"CASE_DIR", "--json FILE", "bf16 1e-2/2e-2"}},
      {{"cts", "--help"}, {"--known FILE", "Outcome of a case", "2 on usage errors"}},
      {{"ops", "--help"}, {"--names"}},
      {{"devices", "--help"}, {"-v,--verbose", "FERRITE_BACKEND_PATH"}},
  };
  for (const auto& c : cases) {
    CliResult r = run_ferrite(dir, c.args);
    EXPECT_TRUE(r.exited && r.code == 0) << c.args[0] << r.err;
    for (const auto& f : c.fragments) EXPECT_NE(r.out.find(f), std::string::npos) << f << r.out;
  }
}

TEST(CliArgs, UnknownCommandsAndOptionsAreOneErrorLine) {
  TempDir dir;
  auto model = relu_model(dir).string();
  CliResult cmd = run_ferrite(dir, {"frobnicate"});
  EXPECT_TRUE(clean_failure(cmd, {"unknown command 'frobnicate'"}));
  EXPECT_EQ(cmd.code, 2);
  // Each command's exit status for a bad command line (run, info, ops, bench: 1; the suites and
  // devices: 2).
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string fragment;
  } cases[] = {
      {{"run", model, "--bogus"}, 1, "unknown option '--bogus' (see --help)"},
      {{"run", model, "--device=reference", "--outputdir=x"}, 1, "unknown option '--outputdir'"},
      {{"run", model, "--device"}, 1, "--device"},
      {{"info", model, "--irr"}, 1, "unknown option '--irr'"},
      {{"ops", "--name"}, 1, "unknown option '--name'"},
      {{"test-onnx", "--device", "reference", "--bogus", dir.path().string()},
       2,
       "unknown option '--bogus'"},
      {{"cts", "--device", "reference", "--jsn", "x.json"}, 2, "unknown option '--jsn'"},
      {{"devices", "--all"}, 2, "unknown option '--all'"},
  };
  for (const auto& c : cases) {
    CliResult r = run_ferrite(dir, c.args);
    EXPECT_TRUE(clean_failure(r, {c.fragment})) << c.args[0] << " " << c.args.back();
    EXPECT_EQ(r.code, c.code) << c.args[0] << " " << c.args.back() << ": " << r.err;
  }
  // A second MODEL, and none: the help on stderr, then the error.
  for (std::vector<std::string> args : {std::vector<std::string>{"run", model, model},
                                        std::vector<std::string>{"run", "--device", "cpu"}}) {
    CliResult r = run_ferrite(dir, args);
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("error: run takes exactly one MODEL\n"), std::string::npos) << r.err;
  }
  // cts without --device: its help on stderr, exit 2.
  CliResult cts = run_ferrite(dir, {"cts"});
  EXPECT_EQ(cts.code, 2);
  EXPECT_NE(cts.err.find("--device NAME"), std::string::npos) << cts.err;
}

// Options may come before the model, `--inputs DIR` takes one value per occurrence (the model
// after it stays the model), the last of a repeated option counts, and `--key=value` works.
TEST(CliArgs, OptionForms) {
  TempDir dir;
  auto model = relu_model(dir);
  Tensor x = Tensor::from_vector<float>({-1.f, 2.f}, {2});
  for (const char* set : {"a", "b"}) {
    fs::create_directories(dir / set);
    ASSERT_TRUE(write_tensor_file(dir / set / "input_0.pb", "x", x));
  }
  CliResult r = run_ferrite(
      dir, {"run", "--inputs", (dir / "a").string(), model.string(), "--device", "nodevice",
            "--device=reference", "--inputs=" + (dir / "b").string(), "--output-dir",
            (dir / "ignored").string(), "--output-dir", (dir / "out").string(), "--quiet"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(fs::exists(dir / "ignored"));
  json js = read_json(dir / "out" / "run.json");
  EXPECT_EQ(js["device"], "reference");
  ASSERT_EQ(js["runs"].size(), 2u) << js;
  EXPECT_EQ(js["runs"][0]["inputs"], (dir / "a").string());
  EXPECT_EQ(js["runs"][1]["inputs"], (dir / "b").string());
}

// run.json: its keys in order, and valid JSON (UTF-8) whatever bytes the model path holds.
TEST(CliArgs, RunJsonKeysAndAnyPath) {
  TempDir dir;
  auto model = relu_model(dir, "m\xff\"\\\n.onnx");
  CliResult r = run_ferrite(dir, {"run", model.string(), "--input", "x=random:2", "--device", "cpu",
                                  "--output-dir", (dir / "out").string(), "--quiet"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.err;
  json js = read_json(dir / "out" / "run.json");
  auto ordered = nlohmann::ordered_json::parse(read_text(dir / "out" / "run.json"));
  std::vector<std::string> keys;  // in the file's order
  for (const auto& [k, v] : ordered.items()) keys.push_back(k);
  std::vector<std::string> want{"device",          "model", "compiles", "load_seconds",
                                "prepare_seconds", "runs",  "memory"};
  ASSERT_GE(keys.size(), want.size()) << js;
  keys.resize(want.size());
  EXPECT_EQ(keys, want) << js;
  EXPECT_EQ(js["model"], (dir / "m\xef\xbf\xbd\"\\\n.onnx").string()) << "0xff as U+FFFD";
  EXPECT_EQ(js["compiles"], 1);
  EXPECT_EQ(js["runs"][0]["inputs"], "random");
  EXPECT_TRUE(js["runs"][0]["memory"].contains("planned_peak_bytes")) << js;
}

// `test-onnx --json` and `cts --json`: the reports parse and keep their structure.
TEST(CliArgs, SuiteReportsAreJson) {
  TempDir dir;
  fs::create_directories(dir / "case" / "test_data_set_0");
  relu_model(dir, "case/model.onnx");
  Tensor x = Tensor::from_vector<float>({-1.f, 2.f}, {2}),
         y = Tensor::from_vector<float>({0.f, 2.f}, {2});
  ASSERT_TRUE(write_tensor_file(dir / "case" / "test_data_set_0" / "input_0.pb", "x", x));
  ASSERT_TRUE(write_tensor_file(dir / "case" / "test_data_set_0" / "output_0.pb", "y", y));
  CliResult t =
      run_ferrite(dir, {"test-onnx", (dir / "case").string(), "--json", (dir / "t.json").string()});
  ASSERT_TRUE(t.exited && t.code == 0) << t.err << t.out;
  json tj = read_json(dir / "t.json");
  EXPECT_EQ(tj["device"], "reference");
  ASSERT_EQ(tj["cases"].size(), 1u) << tj;
  const json& c = tj["cases"][0];
  EXPECT_EQ(c["name"], "case");
  EXPECT_EQ(c["status"], "pass");
  EXPECT_EQ(c["ops"], json::parse(R"(["Relu"])"));
  EXPECT_EQ(c["reason"], "");
  EXPECT_TRUE(c["opset"].is_number_integer() && c["seconds"].is_number()) << c;

  CliResult s = run_ferrite(dir, {"cts", "--device", "cpu", "--filter", "^Relu/", "--quiet",
                                  "--json", (dir / "c.json").string()});
  ASSERT_TRUE(s.exited && s.code == 0) << s.err << s.out;
  json cj = read_json(dir / "c.json");
  EXPECT_EQ(cj["device"], "cpu");
  const json& totals = cj["totals"];
  ASSERT_TRUE(totals.is_object()) << cj;
  ASSERT_GT(totals["cases"].get<int>(), 0) << cj;
  EXPECT_EQ(totals["cases"], cj["cases"].size());
  EXPECT_EQ(totals["pass"], totals["cases"]);
  EXPECT_TRUE(cj["skipped_ops"].is_array());
  for (const auto& k : {"name", "op", "outcome", "known", "max_abs_error", "max_rel_error",
                        "first_bad_index", "detail"})
    EXPECT_TRUE(cj["cases"][0].contains(k)) << k << cj["cases"][0];
  EXPECT_EQ(cj["cases"][0]["op"], "Relu");
  EXPECT_EQ(cj["cases"][0]["outcome"], "pass");
}

}  // namespace
}  // namespace ferrite::testing
