// Attributes that contradict the node's inputs are import errors naming the node (the model file
// is untrusted): a Transpose perm of the wrong length or with repeats, a Concat axis out of range,
// a Reshape target that cannot hold the input, a Conv kernel_shape that disagrees with the weight.
#include "test_util.h"

namespace ferrite::testing {
namespace {

void add_ints_attr(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

TEST(AttributeConsistency, TransposePermWrongLength) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {"batch", 3, 4});
  add_ints_attr(b.node("Transpose", {"x"}, {"y"}, "tr"), "perm", {1, 0});
  b.output("y");
  EXPECT_TRUE(failed_with(import_bytes(b.bytes()), {"node 'tr' (Transpose)", "perm"}));
}

TEST(AttributeConsistency, TransposePermRepeatsAnAxis) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {2, 3, 4});
  add_ints_attr(b.node("Transpose", {"x"}, {"y"}, "tr"), "perm", {0, 0, 1});
  b.output("y");
  EXPECT_TRUE(failed_with(import_bytes(b.bytes()), {"node 'tr' (Transpose)", "perm"}));
}

TEST(AttributeConsistency, ConcatAxisOutOfRange) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {2, 3});
  add_int_attr(b.node("Concat", {"x", "x"}, {"y"}, "cat"), "axis", 5);
  b.output("y");
  EXPECT_TRUE(failed_with(import_bytes(b.bytes()), {"node 'cat' (Concat)", "axis"}));
}

TEST(AttributeConsistency, ReshapeTargetOfWrongSize) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {2, 3});
  auto* shape = b.init_raw("shape", 7 /* INT64 */, {2}, std::string(16, '\0'));
  int64_t dims[2] = {4, 4};
  shape->set_raw_data(std::string(reinterpret_cast<const char*>(dims), sizeof dims));
  b.node("Reshape", {"x", "shape"}, {"y"}, "rs");
  b.output("y");
  EXPECT_TRUE(failed_with(import_bytes(b.bytes()), {"node 'rs' (Reshape)"}));
}

TEST(AttributeConsistency, ConvKernelShapeDisagreesWithWeight) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {1, 2, 8, 8});
  b.init_f32("w", {4, 2, 3, 3}, std::vector<float>(72, 0.5f));
  add_ints_attr(b.node("Conv", {"x", "w"}, {"y"}, "conv"), "kernel_shape", {5, 5});
  b.output("y");
  EXPECT_TRUE(failed_with(import_bytes(b.bytes()), {"node 'conv' (Conv)", "kernel_shape"}));
}

}  // namespace
}  // namespace ferrite::testing
