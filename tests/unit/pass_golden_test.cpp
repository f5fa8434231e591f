// Golden before/after IR tests for graph passes. Each file in tests/golden/passes/ holds:
//   passes: NAME[,NAME...]
//   <ONNX textual model syntax>
//   --- expected
//   <ferrite IR text after the passes>
// Set FERRITE_UPDATE_GOLDEN=1 to rewrite the expected sections from the current output.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "frontend/onnx/importer.h"
#include "passes/pass.h"

namespace ferrite {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, sep);)
    if (!part.empty()) out.push_back(part);
  return out;
}

class PassGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(PassGolden, MatchesExpectedIR) {
  fs::path path = fs::path(FERRITE_TEST_DATA_DIR).parent_path() / "golden" / "passes" / GetParam();
  std::string text = read_all(path);
  const std::string marker = "--- expected\n";
  auto cut = text.find(marker);
  ASSERT_NE(cut, std::string::npos) << "missing '--- expected' in " << path;
  std::string head = text.substr(0, cut), expected = text.substr(cut + marker.size());
  auto first_nl = head.find('\n');
  std::string passes_line = head.substr(0, first_nl);
  ASSERT_EQ(passes_line.rfind("passes: ", 0), 0u) << "first line must be 'passes: ...'";
  std::string model_text = head.substr(first_nl + 1);

  onnx::ModelProto model;
  auto status = onnx::OnnxParser::Parse(model, model_text.c_str());
  ASSERT_TRUE(status.IsOK()) << status.ErrorMessage();
  std::string bytes;
  model.SerializeToString(&bytes);
  auto graph = import_onnx_bytes(bytes, "");
  ASSERT_TRUE(graph) << graph.status().message();
  Status st = run_pipeline(**graph, split(passes_line.substr(8), ','));
  ASSERT_TRUE(st) << st.message();
  std::string actual = print_graph(**graph);
  if (std::getenv("FERRITE_UPDATE_GOLDEN")) {
    std::ofstream(path) << head << marker << actual;
    GTEST_SKIP() << "updated " << path;
  }
  EXPECT_EQ(actual, expected) << "golden mismatch for " << path;
}

std::vector<std::string> golden_files() {
  std::vector<std::string> out;
  fs::path dir = fs::path(FERRITE_TEST_DATA_DIR).parent_path() / "golden" / "passes";
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".txt") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

INSTANTIATE_TEST_SUITE_P(Passes, PassGolden, ::testing::ValuesIn(golden_files()),
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.size() - 4);
                           for (char& c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace ferrite
