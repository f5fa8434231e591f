// Smaller CLI and runtime contracts: an empty --output-dir is an error, zero-size batches run the
// same on every device, NaN mismatches and all-NaN outputs are reported as such, `ferrite info`
// explains its failure, and a model without graph inputs runs.
#include <cmath>
#include <limits>

#include "cli_util.h"
#include "runtime/compare.h"
#include "runtime/device.h"

namespace ferrite::testing {
namespace {

// A one-Relu model on a [2] input, written into `dir`.
std::filesystem::path relu_model(TempDir& dir) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {2});
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.output("y");
  return dir.write("m.onnx", b.bytes());
}

TEST(CliEdgeCases, EmptyOutputDirIsAnError) {
  TempDir dir;
  auto model = relu_model(dir);
  EXPECT_TRUE(clean_failure(
      run_ferrite(dir, {"run", model.string(), "--input", "x=random:2", "--output-dir", "", "--device", "reference"}),
      {"--output-dir"}));
}

// Found by the tensor_proto fuzz target: an --input spec with a newline in it was quoted as it
// was, so the error took two lines. Every part of the spec is now quoted escaped.
TEST(CliEdgeCases, InputSpecWithControlCharactersIsOneErrorLine) {
  TempDir dir;
  auto model = relu_model(dir);
  for (std::string spec : {"x\n=ran\ndom:2", "x\n=random:2", "x=random:2\nx3"})
    EXPECT_TRUE(clean_failure(run_ferrite(dir, {"run", model.string(), "--input", spec, "--device", "reference"}),
                              {"--input", "\\x0a"}))
        << spec;
}

// [batch,3,2,2] -> Reshape [0,-1] -> MatMul: at batch 0 the -1 is ambiguous (0 elements fit any
// size); every device takes the size shape inference derived, 12.
TEST(CliEdgeCases, BatchZeroRunsOnEveryDevice) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {"batch", 3, 2, 2});
  auto* shape = b.graph()->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(kOnnxInt64);
  shape->add_dims(2);
  shape->add_int64_data(0);
  shape->add_int64_data(-1);
  std::vector<float> w(12 * 5, 0.5f);
  b.init_f32("w", {12, 5}, w);
  b.node("Reshape", {"x", "shape"}, {"flat"}, "flatten");
  b.node("MatMul", {"flat", "w"}, {"m"}, "matmul");
  b.node("Relu", {"m"}, {"y"}, "relu");
  b.output("y");
  std::vector<std::string> devices{"reference", "cpu"};
  if (!DeviceRegistry::global().origin("gxu").empty()) devices.push_back("gxu");
  for (const std::string& device : devices) {
    SCOPED_TRACE(device);
    auto g = import_bytes(b.bytes());
    ASSERT_TRUE(g) << g.status().message();
    auto s = Session::from_graph(std::move(g).value(), device);
    ASSERT_TRUE(s) << s.status().message();
    for (int64_t batch : {2, 0}) {
      auto out = (*s)->run({{"x", Tensor::zeros(DType::kF32, {batch, 3, 2, 2})}});
      ASSERT_TRUE(out) << "batch " << batch << ": " << out.status().message();
      EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{batch, 5}));
    }
  }
}

TEST(CliEdgeCases, CompareCountsNanMismatches) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor got = Tensor::from_vector<float>({nan, nan, 3.f}, {3});
  Tensor want = Tensor::from_vector<float>({1.f, 2.f, 3.f}, {3});
  CompareResult r = compare_tensors(got, want, {1e-5, 1e-5});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("2 NaN mismatches"), std::string::npos) << r.message;
  EXPECT_EQ(r.message.find("max abs error 0"), std::string::npos) << r.message;
  // Mixed: the finite error is still reported.
  Tensor mixed = Tensor::from_vector<float>({nan, 2.f, 4.f}, {3});
  r = compare_tensors(mixed, want, {1e-5, 1e-5});
  EXPECT_NE(r.message.find("1 NaN mismatches"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("max abs error 1"), std::string::npos) << r.message;
}

// Sqrt of negative numbers: NaN everywhere, then one number among NaNs.
TEST(CliEdgeCases, SummaryOfNanOutputs) {
  TempDir dir;
  ModelBuilder b;
  b.input("x", kOnnxFloat, {3});
  b.init_f32("neg", {3}, {-1.f, -2.f, -3.f});
  b.init_f32("some", {3}, {-1.f, 4.f, -3.f});
  b.node("Sqrt", {"neg"}, {"all_nan"}, "sqrt_all");
  b.node("Sqrt", {"some"}, {"one_number"}, "sqrt_some");
  b.node("Relu", {"x"}, {"r"}, "relu");
  b.output("all_nan");
  b.output("one_number");
  b.output("r");
  auto model = dir.write("m.onnx", b.bytes());
  CliResult r = run_ferrite(dir, {"run", model.string(), "--input", "x=random:3", "--device", "reference"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.err;
  EXPECT_NE(r.out.find("all_nan: f32[3] all NaN"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("one_number: f32[3] mean=2 min=2 max=2 nan=2"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("inf"), std::string::npos) << r.out;
}

TEST(CliEdgeCases, InfoWithUnsupportedOpsSaysError) {
  TempDir dir;
  ModelBuilder b;
  b.input("x", kOnnxFloat, {2});
  b.node("NotAnOp", {"x"}, {"y"}, "mystery");
  b.output("y");
  auto model = dir.write("m.onnx", b.bytes());
  CliResult r = run_ferrite(dir, {"info", model.string()});
  EXPECT_TRUE(clean_failure(r, {"unsupported op", "NotAnOp"}));
  EXPECT_NE(r.out.find("unsupported ops (1):"), std::string::npos) << r.out;
}

TEST(CliEdgeCases, ModelWithoutInputsRuns) {
  TempDir dir;
  ModelBuilder b;
  b.init_f32("c", {2}, {-1.f, 2.f});
  b.node("Relu", {"c"}, {"y"}, "relu");
  b.output("y");
  auto model = dir.write("m.onnx", b.bytes());
  CliResult r = run_ferrite(dir, {"run", model.string(), "--output-dir", (dir / "out").string(), "--device", "reference"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.err;
  EXPECT_NE(r.out.find("y: f32[2] mean=1 min=0 max=2"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_regular_file(dir / "out" / "0" / "output_0.pb"));
  EXPECT_TRUE(fs::is_regular_file(dir / "out" / "run.json"));
}

}  // namespace
}  // namespace ferrite::testing
