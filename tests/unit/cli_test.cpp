// The `ferrite run` binary on hostile models and inputs: a non-zero exit, exactly one stderr line
// starting with "error:", and no crash signal.
#include "cli_util.h"
#include "frontend/onnx/tensor_proto.h"

namespace ferrite::testing {
namespace {

std::string slurp(const fs::path& p) {
  return read_text(p);
}

CliResult run_cli(const TempDir& dir, const std::vector<std::string>& args) {
  return run_ferrite(dir, args);
}

std::string add_model() {
  ModelBuilder b;
  b.input("a", kOnnxFloat, {"batch", 3});
  b.input("b", kOnnxFloat, {"batch", 3});
  b.node("Add", {"a", "b"}, {"y"}, "add");
  b.output("y");
  return b.bytes();
}

TEST(Cli, ValidRunSucceeds) {
  TempDir dir;
  auto model = dir.write("m.onnx", add_model());
  auto r = run_cli(dir, {"run", model.string(), "--input", "a=random:2x3", "--input",
                         "b=random:2x3", "--output-dir", (dir / "out").string(), "--device", "reference"});
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("y: f32[2,3]"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir / "out" / "0" / "output_0.pb"));
  auto t = read_tensor_file(dir / "out" / "0" / "output_0.pb");
  ASSERT_TRUE(t) << t.status().message();
  EXPECT_EQ(t->tensor.dims(), (std::vector<int64_t>{2, 3}));
}

// No --device: the best usable device (cuda where a GPU answers, else cpu), said in one line on
// stderr and recorded in run.json; `reference` only when named.
TEST(Cli, DefaultDeviceIsTheBestUsableAndSaid) {
  TempDir dir;
  auto model = dir.write("m.onnx", add_model());
  auto r = run_cli(dir, {"run", model.string(), "--input", "a=random:2x3", "--input",
                         "b=random:2x3", "--output-dir", (dir / "out").string(), "--quiet"});
  ASSERT_TRUE(r.exited);
  ASSERT_EQ(r.code, 0) << r.err;
  const bool cpu = r.err.rfind("ferrite: no --device given: running on cpu (", 0) == 0;
  const bool cuda = r.err.rfind("ferrite: no --device given: running on cuda (", 0) == 0;
  EXPECT_TRUE(cpu || cuda) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  std::string json = read_text(dir / "out" / "run.json");
  EXPECT_NE(json.find(cuda ? "\"device\": \"cuda\"" : "\"device\": \"cpu\""), std::string::npos)
      << json;
  // A model that fails to import is still one error line (the device is chosen after import).
  auto garbage = dir.write("garbage.onnx", std::string(100, '\xff'));
  EXPECT_TRUE(clean_failure(run_cli(dir, {"run", garbage.string(), "--input", "a=random:1x3"}),
                            {"garbage.onnx"}));
}

TEST(Cli, GarbageEmptyAndMissingModels) {
  TempDir dir;
  auto garbage = dir.write("garbage.onnx", std::string(100, '\xff'));
  EXPECT_TRUE(clean_failure(run_cli(dir, {"run", garbage.string(), "--input", "a=random:1x3", "--device", "reference"}),
                            {"garbage.onnx", "not a valid ONNX protobuf"}));
  auto empty = dir.write("empty.onnx", "");
  EXPECT_TRUE(clean_failure(run_cli(dir, {"run", empty.string(), "--input", "a=random:1x3", "--device", "reference"}),
                            {"model file is empty"}));
  EXPECT_TRUE(
      clean_failure(run_cli(dir, {"run", (dir / "absent.onnx").string(), "--input", "a=random:1", "--device", "reference"}),
                    {"absent.onnx", "not a readable file"}));
  std::string bytes = add_model();
  auto truncated = dir.write("trunc.onnx", bytes.substr(0, bytes.size() / 2));
  EXPECT_TRUE(clean_failure(run_cli(dir, {"run", truncated.string(), "--input", "a=random:1x3", "--device", "reference"}),
                            {"trunc.onnx"}));
}

TEST(Cli, CycleAndUnknownOp) {
  TempDir dir;
  ModelBuilder b;
  b.input("x", kOnnxFloat, {2});
  b.node("Add", {"x", "z"}, {"y"}, "loop_a");
  b.node("Relu", {"y"}, {"z"}, "loop_b");
  b.output("z");
  auto cyc = dir.write("cycle.onnx", b.bytes());
  EXPECT_TRUE(clean_failure(run_cli(dir, {"run", cyc.string(), "--input", "x=random:2", "--device", "reference"}),
                            {"cycle", "loop_"}));
  ModelBuilder c;
  c.input("x", kOnnxFloat, {2});
  c.node("NotAnOp", {"x"}, {"y"}, "mystery");
  c.output("y");
  auto unk = dir.write("unknown.onnx", c.bytes());
  EXPECT_TRUE(clean_failure(run_cli(dir, {"run", unk.string(), "--input", "x=random:2", "--device", "reference"}),
                            {"node 'mystery'", "unsupported op 'NotAnOp'"}));
}

TEST(Cli, ForgedNewlineInNodeNameStaysOneLine) {
  TempDir dir;
  ModelBuilder b;
  b.input("x", kOnnxFloat, {2});
  b.node("Relu", {"x"}, {"y"}, "a\nerror: forged");
  b.output("y");
  auto m = dir.write("forged.onnx", b.bytes());
  EXPECT_TRUE(clean_failure(run_cli(dir, {"run", m.string(), "--input", "x=random:2", "--device", "reference"}),
                            {"control character"}));
}

TEST(Cli, ExternalDataOutsideModelDir) {
  TempDir dir;
  dir.write("secret.bin", std::string(24, '\0'));
  ModelBuilder b;
  b.input("x", kOnnxFloat, {2, 3});
  auto* t = b.graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(kOnnxFloat);
  t->add_dims(2);
  t->add_dims(3);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = t->add_external_data();
  kv->set_key("location");
  kv->set_value("../secret.bin");
  b.node("Add", {"x", "w"}, {"y"}, "add");
  b.output("y");
  auto m = dir.write("model/m.onnx", b.bytes());
  EXPECT_TRUE(clean_failure(run_cli(dir, {"run", m.string(), "--input", "x=random:2x3", "--device", "reference"}),
                            {"initializer 'w'", "contains '..'"}));
}

TEST(Cli, RuntimeInputErrors) {
  TempDir dir;
  auto model = dir.write("m.onnx", add_model());
  // Wrong dtype through an input file.
  fs::path in1 = dir / "in1";
  fs::create_directories(in1);
  ASSERT_TRUE(write_tensor_file(in1 / "input_0.pb", "a", Tensor::zeros(DType::kF32, {2, 3})));
  ASSERT_TRUE(write_tensor_file(in1 / "input_1.pb", "b", Tensor::zeros(DType::kI32, {2, 3})));
  EXPECT_TRUE(clean_failure(run_cli(dir, {"run", model.string(), "--inputs", in1.string(), "--device", "reference"}),
                            {"input 'b' has dtype i32"}));
  // Inconsistent symbolic dim.
  fs::path in2 = dir / "in2";
  fs::create_directories(in2);
  ASSERT_TRUE(write_tensor_file(in2 / "input_0.pb", "a", Tensor::zeros(DType::kF32, {2, 3})));
  ASSERT_TRUE(write_tensor_file(in2 / "input_1.pb", "b", Tensor::zeros(DType::kF32, {3, 3})));
  EXPECT_TRUE(clean_failure(run_cli(dir, {"run", model.string(), "--inputs", in2.string(), "--device", "reference"}),
                            {"symbol 'batch' is already 2"}));
  // Missing input.
  EXPECT_TRUE(clean_failure(run_cli(dir, {"run", model.string(), "--input", "a=random:2x3", "--device", "reference"}),
                            {"missing input 'b'"}));
  // Wrong rank via a random input.
  EXPECT_TRUE(clean_failure(
      run_cli(dir, {"run", model.string(), "--input", "a=random:2x3x1", "--input", "b=random:2x3", "--device", "reference"}),
      {"input 'a' has rank 3"}));
  // A corrupt input file.
  fs::path in3 = dir / "in3";
  fs::create_directories(in3);
  dir.write("in3/input_0.pb", std::string(16, '\xff'));
  EXPECT_TRUE(clean_failure(run_cli(dir, {"run", model.string(), "--inputs", in3.string(), "--device", "reference"}),
                            {"input_0.pb", "not a valid TensorProto"}));
  // An input file that lies about its size.
  onnx::TensorProto liar;
  liar.set_name("a");
  liar.set_data_type(kOnnxFloat);
  liar.add_dims(int64_t{1} << 40);
  liar.add_dims(3);
  liar.set_raw_data(std::string(12, '\0'));
  fs::path in4 = dir / "in4";
  fs::create_directories(in4);
  dir.write("in4/input_0.pb", liar.SerializeAsString());
  EXPECT_TRUE(clean_failure(run_cli(dir, {"run", model.string(), "--inputs", in4.string(), "--device", "reference"}),
                            {"raw_data has 12 bytes"}));
}

TEST(Cli, OversizedRandomInputAndInfoOnGarbage) {
  TempDir dir;
  auto model = dir.write("m.onnx", add_model());
  EXPECT_TRUE(clean_failure(
      run_cli(dir, {"run", model.string(), "--input", "a=random:999999999999x999999999999", "--device", "reference"}),
      {"overflowing"}));
  EXPECT_TRUE(
      clean_failure(run_cli(dir, {"run", model.string(), "--input", "a=random:10000000x10000000", "--device", "reference"}),
                    {"too large"}));
  auto garbage = dir.write("garbage.onnx", std::string(100, '\xff'));
  EXPECT_TRUE(
      clean_failure(run_cli(dir, {"info", garbage.string()}), {"not a valid ONNX protobuf"}));
}

TEST(Cli, RuntimeKernelError) {
  TempDir dir;
  ModelBuilder b;
  b.input("a", kOnnxFloat, {"n"});
  b.input("b", kOnnxFloat, {"m"});
  b.node("Add", {"a", "b"}, {"y"}, "late_add");
  b.output("y");
  auto model = dir.write("m.onnx", b.bytes());
  EXPECT_TRUE(clean_failure(
      run_cli(dir, {"run", model.string(), "--input", "a=random:3", "--input", "b=random:4", "--device", "reference"}),
      {"node 'late_add' (Add)", "cannot broadcast [3] with [4]"}));
}

// x[?,4] -> MatMul (a library step) -> Softmax -> Relu (one generated kernel, Relu fused into
// its store).
std::string dump_model() {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {nullptr, 4});
  b.init_f32("w", {4, 3}, std::vector<float>(12, 0.5f));
  b.node("MatMul", {"x", "w"}, {"h"}, "proj");
  b.node("Softmax", {"h"}, {"r"}, "probs");
  b.node("Relu", {"r"}, {"y"}, "act");
  b.output("y");
  return b.bytes();
}

TEST(Cli, DumpWritesKernelsAndPlans) {
  TempDir dir;
  auto model = dir.write("m.onnx", dump_model());
  fs::path dump = dir / "dump";
  auto r = run_cli(dir, {"run", model.string(), "--device", "cpu", "--input", "x=random:5x4",
                         "--dump", dump.string(), "--quiet"});
  ASSERT_TRUE(r.exited);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* f :
       {"kernels.cpp", "fusion_plan.txt", "memory_plan.txt", "graph.txt", "guards.txt"})
    EXPECT_TRUE(fs::exists(dump / f)) << f;
  std::string kernels = slurp(dump / "kernels.cpp");
  // Every step names its ONNX nodes and op types: the library MatMul and the fused kernel.
  EXPECT_NE(kernels.find("library <- 'proj' (MatMul)"), std::string::npos) << kernels;
  EXPECT_NE(kernels.find("<- 'probs' (Softmax), 'act' (Relu)"), std::string::npos) << kernels;
  EXPECT_NE(kernels.find("Generated by ferrite"), std::string::npos);
  std::string fusion = slurp(dump / "fusion_plan.txt");
  EXPECT_NE(fusion.find("library 'proj' (MatMul)"), std::string::npos) << fusion;
  EXPECT_NE(fusion.find("iteration: [5,3]"), std::string::npos) << fusion;
  std::string memory = slurp(dump / "memory_plan.txt");
  EXPECT_NE(memory.find("live ["), std::string::npos) << memory;
  EXPECT_NE(memory.find("planned peak"), std::string::npos) << memory;
  EXPECT_NE(slurp(dump / "guards.txt").find("specialised: input 'x' dim 0 == 5"),
            std::string::npos);
  std::string graph = slurp(dump / "graph.txt");
  EXPECT_NE(graph.find("proj"), std::string::npos) << graph;
  // The reference device compiles nothing and says so.
  fs::path none = dir / "none";
  r = run_cli(
      dir, {"run", model.string(), "--input", "x=random:5x4", "--dump", none.string(), "--quiet", "--device", "reference"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("note: --dump: device 'reference' compiles nothing"), std::string::npos)
      << r.err;
}

TEST(Cli, InfoIrAfterPass) {
  TempDir dir;
  auto model = dir.write("m.onnx", dump_model());
  auto r = run_cli(dir, {"info", model.string(), "--ir", "--after", "all"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("after all:"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ferrite::testing
