// Golden tests for lowering + fusion (tests/golden/lowering/*.txt) and for the generated C++
// (tests/golden/codegen/*.txt). Format: an ONNX textual model, "--- expected", then the text of
// print_lowered (lowering) or generate_cpp_source (codegen). FERRITE_UPDATE_GOLDEN=1 rewrites
// the expected sections; review every diff before committing it.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "codegen/cpp_source.h"
#include "frontend/onnx/importer.h"
#include "lower/lowering.h"

namespace ferrite {
namespace {

namespace fs = std::filesystem;

fs::path golden_dir(const std::string& kind) {
  return fs::path(FERRITE_TEST_DATA_DIR).parent_path() / "golden" / kind;
}

std::vector<std::string> files(const std::string& kind) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(golden_dir(kind)))
    if (e.path().extension() == ".txt") out.push_back(kind + "/" + e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class LoweringGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(LoweringGolden, MatchesExpected) {
  fs::path path = fs::path(FERRITE_TEST_DATA_DIR).parent_path() / "golden" / GetParam();
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  const std::string marker = "--- expected\n";
  auto cut = text.find(marker);
  ASSERT_NE(cut, std::string::npos);
  std::string model_text = text.substr(0, cut), expected = text.substr(cut + marker.size());
  onnx::ModelProto model;
  auto status = onnx::OnnxParser::Parse(model, model_text.c_str());
  ASSERT_TRUE(status.IsOK()) << status.ErrorMessage();
  std::string bytes;
  model.SerializeToString(&bytes);
  auto graph = import_onnx_bytes(bytes, "");
  ASSERT_TRUE(graph) << graph.status().message();
  auto lowered = lower_graph(**graph);
  ASSERT_TRUE(lowered) << lowered.status().message();
  bool codegen = GetParam().rfind("codegen/", 0) == 0;
  std::string actual = codegen ? generate_cpp_source(*lowered) : print_lowered(*lowered);
  if (std::getenv("FERRITE_UPDATE_GOLDEN")) {
    std::ofstream(path) << model_text << marker << actual;
    GTEST_SKIP() << "updated " << path;
  }
  EXPECT_EQ(actual, expected) << "golden mismatch for " << path;
}

std::vector<std::string> all_files() {
  auto a = files("lowering");
  auto b = files("codegen");
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

INSTANTIATE_TEST_SUITE_P(Golden, LoweringGolden, ::testing::ValuesIn(all_files()),
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.size() - 4);
                           for (char& c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace ferrite
