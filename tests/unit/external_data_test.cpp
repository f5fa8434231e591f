// External tensor data must stay inside the model's directory and match the tensor exactly.
#include "frontend/onnx/external_data.h"

#include <cstring>

#include "test_util.h"

namespace ferrite::testing {
namespace {

// y = x + w, w: f32[2,3] stored externally at `location` (offset/length optional).
std::string external_model(const std::string& location, const std::string& offset = "",
                           const std::string& length = "") {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {2, 3});
  auto* t = b.graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(kOnnxFloat);
  t->add_dims(2);
  t->add_dims(3);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const char* k, const std::string& v) {
    auto* kv = t->add_external_data();
    kv->set_key(k);
    kv->set_value(v);
  };
  add("location", location);
  if (!offset.empty()) add("offset", offset);
  if (!length.empty()) add("length", length);
  b.node("Add", {"x", "w"}, {"y"}, "add");
  b.output("y");
  return b.bytes();
}

const std::vector<float> kWeights = {1, 2, 3, 4, 5, 6};

class ExternalData : public ::testing::Test {
 protected:
  // model/ holds the model; outside/ is a sibling directory the model must not reach.
  void SetUp() override {
    model_dir_ = root_ / "model";
    outside_ = root_ / "outside";
    fs::create_directories(model_dir_);
    fs::create_directories(outside_);
  }
  Expected<std::unique_ptr<Graph>> load(const std::string& model_bytes) {
    fs::path p = model_dir_ / "model.onnx";
    std::ofstream(p, std::ios::binary) << model_bytes;
    return import_onnx_file(p);
  }
  void write(const fs::path& p, const std::string& bytes) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
  }
  TempDir root_;
  fs::path model_dir_, outside_;
};

TEST_F(ExternalData, ValidModelLoadsAndRuns) {
  // 8 bytes of padding before the weights exercise the offset.
  write(model_dir_ / "weights" / "w.bin", std::string(8, '\x7f') + f32_bytes(kWeights) + "tail");
  auto g = load(external_model("weights/w.bin", "8", "24"));
  ASSERT_TRUE(g) << g.status().message();
  auto s = Session::from_graph(std::move(g).value(), "reference");
  ASSERT_TRUE(s) << s.status().message();
  auto out = (*s)->run({{"x", Tensor::from_vector<float>({10, 20, 30, 40, 50, 60}, {2, 3})}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(values_of<float>((*out)[0]), (std::vector<float>{11, 22, 33, 44, 55, 66}));
}

TEST_F(ExternalData, ValidWithoutOffsetOrLengthAndThroughInnerSymlink) {
  write(model_dir_ / "w.bin", f32_bytes(kWeights));
  ASSERT_TRUE(load(external_model("w.bin")));
  // A symlink that stays inside the model directory is fine.
  fs::create_symlink("w.bin", model_dir_ / "alias.bin");
  ASSERT_TRUE(load(external_model("alias.bin")));
}

TEST_F(ExternalData, AbsolutePath) {
  write(outside_ / "w.bin", f32_bytes(kWeights));
  std::string abs = (outside_ / "w.bin").string();
  EXPECT_TRUE(failed_with(load(external_model(abs)), {"initializer 'w'", "is absolute"}));
}

TEST_F(ExternalData, DotDotPath) {
  write(outside_ / "w.bin", f32_bytes(kWeights));
  EXPECT_TRUE(
      failed_with(load(external_model("../outside/w.bin")), {"initializer 'w'", "contains '..'"}));
  write(model_dir_ / "sub" / "w.bin", f32_bytes(kWeights));
  EXPECT_TRUE(failed_with(load(external_model("sub/../sub/w.bin")), {"contains '..'"}));
}

TEST_F(ExternalData, SymlinkResolvingOutside) {
  write(outside_ / "secret.bin", f32_bytes(kWeights));
  fs::create_symlink(outside_ / "secret.bin", model_dir_ / "w.bin");
  EXPECT_TRUE(failed_with(load(external_model("w.bin")),
                          {"initializer 'w'", "'w.bin'", "resolves outside the model directory"}));
  // A symlinked directory is no way around it either.
  fs::create_directory_symlink(outside_, model_dir_ / "linkdir");
  EXPECT_TRUE(failed_with(load(external_model("linkdir/secret.bin")), {"resolves outside"}));
  // Nor a sibling whose name merely starts with the model directory's name.
  fs::create_directories(root_ / "model2");
  write(root_ / "model2" / "w.bin", f32_bytes(kWeights));
  fs::create_symlink(root_ / "model2" / "w.bin", model_dir_ / "prefix.bin");
  EXPECT_TRUE(failed_with(load(external_model("prefix.bin")), {"resolves outside"}));
}

TEST_F(ExternalData, MissingFileAndNotAFile) {
  EXPECT_TRUE(failed_with(load(external_model("absent.bin")),
                          {"initializer 'w'", "'absent.bin' does not exist"}));
  fs::create_directories(model_dir_ / "adir");
  EXPECT_TRUE(failed_with(load(external_model("adir")), {"initializer 'w'", "not a regular file"}));
  fs::create_symlink("nowhere.bin", model_dir_ / "dangling.bin");
  EXPECT_TRUE(
      failed_with(load(external_model("dangling.bin")), {"initializer 'w'", "does not exist"}));
  EXPECT_TRUE(failed_with(load(external_model("")), {"initializer 'w'", "no location"}));
}

TEST_F(ExternalData, RangeOutsideFile) {
  write(model_dir_ / "w.bin", f32_bytes(kWeights));  // 24 bytes
  EXPECT_TRUE(failed_with(load(external_model("w.bin", "4")),
                          {"initializer 'w'", "range [4, +24)", "(24 bytes)"}));
  EXPECT_TRUE(failed_with(load(external_model("w.bin", "100", "24")), {"lies outside 'w.bin'"}));
  // offset + length overflows int64.
  EXPECT_TRUE(
      failed_with(load(external_model("w.bin", "9223372036854775807", "24")), {"lies outside"}));
  write(model_dir_ / "short.bin", std::string(10, '\0'));
  EXPECT_TRUE(failed_with(load(external_model("short.bin")), {"lies outside 'short.bin'"}));
}

TEST_F(ExternalData, LengthMismatchAndBadNumbers) {
  write(model_dir_ / "w.bin", f32_bytes(kWeights) + std::string(16, '\0'));
  EXPECT_TRUE(failed_with(load(external_model("w.bin", "0", "20")),
                          {"initializer 'w'", "length 20 does not match the 24 bytes"}));
  EXPECT_TRUE(failed_with(load(external_model("w.bin", "0", "40")), {"length 40"}));
  EXPECT_TRUE(failed_with(load(external_model("w.bin", "-8")), {"bad external offset '-8'"}));
  EXPECT_TRUE(failed_with(load(external_model("w.bin", "0x10")), {"bad external offset"}));
  // Larger than int64: must be refused, not overflow.
  EXPECT_TRUE(failed_with(load(external_model("w.bin", "9999999999999999999")),
                          {"bad external offset '9999999999999999999'"}));
  EXPECT_TRUE(failed_with(load(external_model("w.bin", "0", "99999999999999999999999")),
                          {"bad external length"}));
}

TEST_F(ExternalData, ControlCharacterInLocation) {
  write(model_dir_ / "w.bin", f32_bytes(kWeights));
  EXPECT_TRUE(failed_with(load(external_model(std::string("w.bin\0x", 7))), {"control character"}));
  EXPECT_TRUE(failed_with(load(external_model("w\n.bin")), {"'w\\x0a.bin'", "control character"}));
}

// A sparse file can claim terabytes while costing nothing on disk. The tensor must be refused
// through the allocator's failure (an error), not by reading terabytes into memory (bad_alloc).
TEST_F(ExternalData, SparseTerabyteFileIsRefusedCleanly) {
  std::ifstream oc("/proc/sys/vm/overcommit_memory");
  int mode = -1;
  if (!(oc >> mode) || mode == 1) GTEST_SKIP() << "needs heuristic or strict overcommit";
  constexpr int64_t kBytes = int64_t{1} << 43;  // 8 TiB, within ext4's file size limit
  fs::path file = model_dir_ / "huge.bin";
  { std::ofstream(file, std::ios::binary); }
  std::error_code ec;
  fs::resize_file(file, static_cast<uintmax_t>(kBytes), ec);
  if (ec) GTEST_SKIP() << "file system cannot hold a sparse 8 TiB file: " << ec.message();
  ModelBuilder b;
  b.input("x", kOnnxFloat, {1});
  auto* t = b.graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(kOnnxFloat);
  t->add_dims(kBytes / 4);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = t->add_external_data();
  kv->set_key("location");
  kv->set_value("huge.bin");
  b.node("Add", {"x", "w"}, {"y"}, "add");
  b.output("y");
  EXPECT_TRUE(failed_with(load(b.bytes()), {"out of memory allocating 8796093022208 bytes"}));
  fs::remove(file);
}

TEST_F(ExternalData, BoolExternalDataIsNormalised) {
  write(model_dir_ / "m.bin", std::string("\x00\x07\x01", 3));
  ModelBuilder b;
  b.input("x", kOnnxBool, {3});
  auto* t = b.graph()->add_initializer();
  t->set_name("m");
  t->set_data_type(kOnnxBool);
  t->add_dims(3);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = t->add_external_data();
  kv->set_key("location");
  kv->set_value("m.bin");
  b.node("Equal", {"x", "m"}, {"y"}, "eq");
  b.output("y", kOnnxBool);
  auto g = load(b.bytes());
  ASSERT_TRUE(g) << g.status().message();
  auto s = Session::from_graph(std::move(g).value(), "reference");
  ASSERT_TRUE(s);
  auto out = (*s)->run({{"x", Tensor::from_vector<bool>({false, true, true}, {3})}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(values_of<bool>((*out)[0]), (std::vector<bool>{true, true, true}));
}

// Large aligned ranges are mapped, not read (a model larger than memory loads, a rank touches
// only its shard's pages); small or unaligned ones are read. Both give the file's values.
TEST_F(ExternalData, LargeAlignedRangesAreMappedOthersRead) {
  constexpr int64_t kCount = kMinMappedBytes / 4;
  std::vector<float> w(kCount);
  for (int64_t i = 0; i < kCount; ++i) w[i] = static_cast<float>(i % 1000) * 0.5f;
  const std::string bytes = f32_bytes(w);
  write(model_dir_ / "big.bin", std::string(4096, '\0') + bytes + std::string(8, '\0') + bytes);
  auto model = [&](const std::string& offset) {
    ModelBuilder b;
    b.input("x", kOnnxFloat, {kCount});
    auto* t = b.graph()->add_initializer();
    t->set_name("w");
    t->set_data_type(kOnnxFloat);
    t->add_dims(kCount);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto [k, v] :
         {std::pair<const char*, std::string>{"location", "big.bin"}, {"offset", offset}}) {
      auto* kv = t->add_external_data();
      kv->set_key(k);
      kv->set_value(v);
    }
    b.node("Add", {"x", "w"}, {"y"}, "add");
    b.output("y");
    return b.bytes();
  };
  const std::string aligned = "4096", unaligned = std::to_string(4096 + kMinMappedBytes + 8);
  for (const std::string& offset : {aligned, unaligned}) {
    onnx::ModelProto m;
    ASSERT_TRUE(m.ParseFromString(model(offset)));
    auto range = locate_external_data(m.graph().initializer(0), "w", model_dir_, kMinMappedBytes);
    ASSERT_TRUE(range) << range.status().message();
    auto mapped = map_external_data(*range);
    EXPECT_EQ(mapped != nullptr, offset == aligned) << offset;
    if (mapped) {
      EXPECT_EQ(std::memcmp(mapped.get(), bytes.data(), bytes.size()), 0);
    }

    auto g = load(model(offset));
    ASSERT_TRUE(g) << g.status().message();
    auto s = Session::from_graph(std::move(g).value(), "reference");
    ASSERT_TRUE(s) << s.status().message();
    auto out = (*s)->run({{"x", Tensor::zeros(DType::kF32, {kCount})}});
    ASSERT_TRUE(out) << out.status().message();
    EXPECT_EQ(values_of<float>((*out)[0]), w) << offset;
  }
}

}  // namespace
}  // namespace ferrite::testing
