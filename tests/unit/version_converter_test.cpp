// The opset version converter (src/frontend/onnx/version_converter.cpp): each adapter, on a model
// at the old opset, gives the opset-13 graph it promises and the old op's results.
#include "frontend/onnx/version_converter.h"

#include <cmath>
#include <limits>

#include "ops/op_schema.h"
#include "test_util.h"

namespace ferrite::testing {
namespace {

std::string model(int opset, const std::string& signature, const std::string& body) {
  return str_cat("<ir_version: 7, opset_import: [\"\" : ", opset, "]>\ng ", signature, " {\n", body,
                 "\n}\n");
}

Expected<std::unique_ptr<Graph>> import_text(const std::string& text) {
  onnx::ModelProto proto;
  auto status = onnx::OnnxParser::Parse(proto, text.c_str());
  if (!status.IsOK()) return err("does not parse: ", status.ErrorMessage());
  std::string bytes;
  proto.SerializeToString(&bytes);
  return import_onnx_bytes(bytes, "");
}

std::vector<std::string> op_types(const Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes()) ops.push_back(n->op_type);
  return ops;
}

// Imports (checking every node now imports opset 13) and runs on `reference`; output 0 as floats.
std::vector<float> run_f32(const std::string& text, std::vector<Session::NamedInput> inputs,
                           std::vector<std::string>* ops = nullptr) {
  auto g = import_text(text);
  EXPECT_TRUE(g) << g.status().message();
  if (!g) return {};
  EXPECT_EQ((*g)->opsets().at(""), kConvertTargetOpset);
  for (const auto& n : (*g)->nodes()) EXPECT_EQ(n->opset, kConvertTargetOpset) << n->describe();
  if (ops) *ops = op_types(**g);
  auto s = Session::from_graph(std::move(*g), "reference");
  EXPECT_TRUE(s) << s.status().message();
  if (!s) return {};
  auto out = (*s)->run(inputs);
  EXPECT_TRUE(out) << out.status().message();
  if (!out) return {};
  return values_of<float>((*out)[0]);
}

Tensor f32(std::vector<float> v, std::vector<int64_t> dims) {
  return Tensor::from_vector<float>(v, std::move(dims));
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "element " << i;
}

const std::vector<float> k234 = [] {
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = 0.25f * static_cast<float>(i) - 3;
  return v;
}();

TEST(VersionConverter, DropsConsumedInputs) {
  auto y = run_f32(model(1, "(float[3] x) => (float[3] y)", "y = Relu<consumed_inputs = [0]>(x)"),
                   {{"x", f32({-1, 0, 2}, {3})}});
  expect_near(y, {0, 0, 2});
}

TEST(VersionConverter, LegacyBroadcastWithAxisUnsqueezesB) {
  std::vector<std::string> ops;
  auto y = run_f32(model(6, "(float[2,3,4] a, float[3] b) => (float[2,3,4] y)",
                         "y = Add<broadcast = 1, axis = 1>(a, b)"),
                   {{"a", f32(k234, {2, 3, 4})}, {"b", f32({10, 20, 30}, {3})}}, &ops);
  EXPECT_EQ(ops, (std::vector<std::string>{"Unsqueeze", "Add"}));
  std::vector<float> want(24);
  for (int i = 0; i < 24; ++i) want[i] = k234[i] + 10.0f * static_cast<float>((i / 4) % 3 + 1);
  expect_near(y, want);
}

TEST(VersionConverter, LegacyBroadcastSuffixIsNumpy) {
  std::vector<std::string> ops;
  auto y = run_f32(
      model(6, "(float[2,3] a, float[3] b) => (float[2,3] y)", "y = Mul<broadcast = 1>(a, b)"),
      {{"a", f32({1, 2, 3, 4, 5, 6}, {2, 3})}, {"b", f32({1, 0, -1}, {3})}}, &ops);
  EXPECT_EQ(ops, (std::vector<std::string>{"Mul"}));
  expect_near(y, {1, 0, -3, 4, 0, -6});
}

TEST(VersionConverter, ClipMinMaxBecomeInputs) {
  auto g =
      import_text(model(6, "(float[4] x) => (float[4] y)", "y = Clip<min = -1.0, max = 2.0>(x)"));
  ASSERT_TRUE(g) << g.status().message();
  const Node& clip = *(*g)->nodes()[0];
  ASSERT_EQ(clip.inputs.size(), 3u);
  EXPECT_FALSE(clip.has_attr("min"));
  ASSERT_TRUE(clip.inputs[2]->constant);
  EXPECT_EQ(clip.inputs[2]->constant->data<float>()[0], 2.0f);
  auto y = run_f32(model(6, "(float[4] x) => (float[4] y)", "y = Clip<min = -1.0, max = 2.0>(x)"),
                   {{"x", f32({-3, 0, 1.5, 7}, {4})}});
  expect_near(y, {-1, 0, 1.5, 2});
}

TEST(VersionConverter, ClipOnlyMaxLeavesMinEmpty) {
  auto y = run_f32(model(10, "(float[3] x) => (float[3] y)", "y = Clip<max = 0.5>(x)"),
                   {{"x", f32({-3, 0, 1}, {3})}});
  expect_near(y, {-3, 0, 0.5});
}

TEST(VersionConverter, PadAttributesBecomeInputs) {
  auto y = run_f32(
      model(2, "(float[1,2] x) => (float[1,4] y)", "y = Pad<pads = [0, 1, 0, 1], value = 5.0>(x)"),
      {{"x", f32({1, 2}, {1, 2})}});
  expect_near(y, {5, 1, 2, 5});
}

TEST(VersionConverter, PadPaddingsRenamed) {
  auto y =
      run_f32(model(1, "(float[1,2] x) => (float[1,3] y)", "y = Pad<paddings = [0, 1, 0, 0]>(x)"),
              {{"x", f32({1, 2}, {1, 2})}});
  expect_near(y, {0, 1, 2});
}

TEST(VersionConverter, SliceAttributesBecomeInputs) {
  auto y = run_f32(model(9, "(float[2,4] x) => (float[2,2] y)",
                         "y = Slice<starts = [1], ends = [3], axes = [1]>(x)"),
                   {{"x", f32({0, 1, 2, 3, 4, 5, 6, 7}, {2, 4})}});
  expect_near(y, {1, 2, 5, 6});
}

TEST(VersionConverter, AxesAndSplitMoveToInputAtOpset13) {
  auto y = run_f32(model(11, "(float[2,1,3] x) => (float[3] y)",
                         "s = Squeeze<axes = [1]>(x)\n"
                         "u = Unsqueeze<axes = [0]>(s)\n"
                         "r = ReduceSum<axes = [1], keepdims = 0>(u)\n"
                         "a, b = Split<axis = 1, split = [1, 2]>(r)\n"
                         "y = Squeeze<axes = [0]>(b)"),
                   {{"x", f32({1, 2, 3, 4, 5, 6}, {2, 1, 3})}});
  expect_near(y, {7, 9});
}

TEST(VersionConverter, SoftmaxBefore13NormalisesTheFlattenedBlock) {
  std::vector<std::string> ops;
  auto y = run_f32(model(11, "(float[2,3,4] x) => (float[2,3,4] y)", "y = Softmax<axis = 1>(x)"),
                   {{"x", f32(k234, {2, 3, 4})}}, &ops);
  EXPECT_EQ(ops, (std::vector<std::string>{"Shape", "Flatten", "Softmax", "Reshape"}));
  std::vector<float> want(24);
  for (int b = 0; b < 2; ++b) {
    double sum = 0;
    for (int k = 0; k < 12; ++k) sum += std::exp(k234[b * 12 + k]);
    for (int k = 0; k < 12; ++k)
      want[b * 12 + k] = static_cast<float>(std::exp(k234[b * 12 + k]) / sum);
  }
  expect_near(y, want);
}

TEST(VersionConverter, LogSoftmaxOnTheLastAxisStaysOneNode) {
  std::vector<std::string> ops;
  auto y = run_f32(model(12, "(float[1,2] x) => (float[1,2] y)", "y = LogSoftmax(x)"),
                   {{"x", f32({0, 0}, {1, 2})}}, &ops);
  EXPECT_EQ(ops, (std::vector<std::string>{"LogSoftmax"}));
  expect_near(y, {-std::log(2.0f), -std::log(2.0f)});
}

TEST(VersionConverter, TopKAndReshapeAttributesBecomeInputs) {
  auto y = run_f32(model(4, "(float[2,2] x) => (float[4] y)", "y = Reshape<shape = [4]>(x)"),
                   {{"x", f32({1, 2, 3, 4}, {2, 2})}});
  expect_near(y, {1, 2, 3, 4});
  auto t = run_f32(model(9, "(float[5] x) => (float[2] v, int64[2] i)", "v, i = TopK<k = 2>(x)"),
                   {{"x", f32({3, 9, 1, 7, 5}, {5})}});
  expect_near(t, {9, 7});
}

TEST(VersionConverter, DropoutRatioBecomesAnInputAndIsTheIdentity) {
  auto g = import_text(model(11, "(float[3] x) => (float[3] y)", "y = Dropout<ratio = 0.3>(x)"));
  ASSERT_TRUE(g) << g.status().message();
  ASSERT_EQ((*g)->nodes()[0]->inputs.size(), 2u);
  auto y =
      run_f32(model(6, "(float[3] x) => (float[3] y)", "y = Dropout<is_test = 1, ratio = 0.5>(x)"),
              {{"x", f32({1, 2, 3}, {3})}});
  expect_near(y, {1, 2, 3});
}

TEST(VersionConverter, CastNamedTypeAndConcatDefaultAxis) {
  auto y = run_f32(model(1, "(int64[2] x) => (float[2] y)", "y = Cast<to = \"FLOAT\">(x)"),
                   {{"x", Tensor::from_vector<int64_t>({3, -4}, {2})}});
  expect_near(y, {3, -4});
  auto c = run_f32(model(3, "(float[1,1] a, float[1,2] b) => (float[1,3] y)", "y = Concat(a, b)"),
                   {{"a", f32({1}, {1, 1})}, {"b", f32({2, 3}, {1, 2})}});
  expect_near(c, {1, 2, 3});
}

TEST(VersionConverter, Resize10AndUpsampleAreAsymmetricFloorNearest) {
  // Opset 10 maps output x to input x / scale: linear gives 1, 2, 3, 3 where opset 11's
  // default half-pixel mapping would give 1, 1.5, 2.5, 3.
  auto r = run_f32(model(10, "(float[1,1,1,2] x, float[4] s) => (float[1,1,1,4] y)",
                         "y = Resize<mode = \"linear\">(x, s)"),
                   {{"x", f32({1, 3}, {1, 1, 1, 2})}, {"s", f32({1, 1, 1, 2}, {4})}});
  expect_near(r, {1, 2, 3, 3});
  std::vector<float> want = {1, 1, 2, 2, 3, 3};
  auto u = run_f32(model(9, "(float[1,1,1,3] x, float[4] s) => (float[1,1,1,6] y)",
                         "y = Upsample<mode = \"nearest\">(x, s)"),
                   {{"x", f32({1, 2, 3}, {1, 1, 1, 3})}, {"s", f32({1, 1, 1, 2}, {4})}});
  expect_near(u, want);
  auto u7 = run_f32(model(7, "(float[1,1,1,3] x) => (float[1,1,1,6] y)",
                          "y = Upsample<mode = \"nearest\", scales = [1.0, 1.0, 1.0, 2.0]>(x)"),
                    {{"x", f32({1, 2, 3}, {1, 1, 1, 3})}});
  expect_near(u7, want);
}

TEST(VersionConverter, ScatterIsScatterElements) {
  auto y = run_f32(model(10, "(float[1,4] x, int64[1,2] i, float[1,2] u) => (float[1,4] y)",
                         "y = Scatter<axis = 1>(x, i, u)"),
                   {{"x", f32({0, 0, 0, 0}, {1, 4})},
                    {"i", Tensor::from_vector<int64_t>({3, 1}, {1, 2})},
                    {"u", f32({5, 6}, {1, 2})}});
  expect_near(y, {0, 6, 0, 5});
}

TEST(VersionConverter, RoiAlign10KeepsOutputHalfPixelCoordinates) {
  // One bin over [0, 3]^2 sampled once: at 1.5 (output_half_pixel, RoiAlign-10) the bilinear
  // sample averages x[1..2][1..2] = 7.5; half_pixel (opset 16's default) would sample x[1][1].
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i);
  auto y = run_f32(
      model(10, "(float[1,1,4,4] x, float[1,4] r, int64[1] b) => (float[1,1,1,1] y)",
            "y = RoiAlign<output_height = 1, output_width = 1, sampling_ratio = 1>(x, r, b)"),
      {{"x", f32(x, {1, 1, 4, 4})},
       {"r", f32({0, 0, 3, 3}, {1, 4})},
       {"b", Tensor::from_vector<int64_t>({0}, {1})}});
  expect_near(y, {7.5f});
}

TEST(RoiAlignHostileRegions, UnboundedSamplingGridIsRefusedNotRun) {
  // sampling_ratio 0 samples ceil(bin size) points per axis: a region of 1e30 (or inf, NaN)
  // would loop for ever (and convert an out-of-range double). Refused as unsupported, at once.
  auto g =
      import_text(model(16, "(float[1,1,4,4] x, float[1,4] r, int64[1] b) => (float[1,1,1,1] y)",
                        "y = RoiAlign<output_height = 1, output_width = 1>(x, r, b)"));
  ASSERT_TRUE(g) << g.status().message();
  auto s = Session::from_graph(std::move(*g), "reference");
  ASSERT_TRUE(s) << s.status().message();
  const float inf = std::numeric_limits<float>::infinity();
  for (float big : {1e30f, inf, std::numeric_limits<float>::quiet_NaN()}) {
    auto out = (*s)->run({{"x", Tensor::from_vector<float>(std::vector<float>(16), {1, 1, 4, 4})},
                          {"r", Tensor::from_vector<float>({0, 0, big, 3}, {1, 4})},
                          {"b", Tensor::from_vector<int64_t>({0}, {1})}});
    ASSERT_FALSE(out) << big;
    EXPECT_NE(out.status().message().find("sampling grid"), std::string::npos)
        << out.status().message();
  }
}

TEST(VersionConverter, GemmBroadcastAndBatchNormLegacyAttributes) {
  auto y = run_f32(model(6, "(float[1,2] a, float[2,1] b, float[1] c) => (float[1,1] y)",
                         "y = Gemm<broadcast = 1>(a, b, c)"),
                   {{"a", f32({1, 2}, {1, 2})}, {"b", f32({3, 4}, {2, 1})}, {"c", f32({1}, {1})}});
  expect_near(y, {12});
  auto bn = run_f32(
      model(7,
            "(float[1,2,1] x, float[2] s, float[2] b, float[2] m, float[2] v) => (float[1,2,1] y)",
            "y = BatchNormalization<spatial = 1, epsilon = 0.0>(x, s, b, m, v)"),
      {{"x", f32({3, 4}, {1, 2, 1})},
       {"s", f32({1, 2}, {2})},
       {"b", f32({0, 1}, {2})},
       {"m", f32({1, 0}, {2})},
       {"v", f32({4, 1}, {2})}});
  expect_near(bn, {1, 9});
}

TEST(VersionConverter, RefusesWhatItCannotExpress) {
  auto spatial = import_text(model(
      7, "(float[1,2,1] x, float[2] s, float[2] b, float[2] m, float[2] v) => (float[1,2,1] y)",
      "y = BatchNormalization<spatial = 0>(x, s, b, m, v)"));
  EXPECT_TRUE(
      failed_with(spatial, {"BatchNormalization", "spatial = 0"}, StatusCode::kUnsupported));
  auto unknown = import_text(model(11, "(float[1,2] x) => (float[1,2] y)", "y = Foo(x)"));
  EXPECT_TRUE(failed_with(unknown, {"unsupported op 'Foo'"}, StatusCode::kUnsupported));
  auto no_entry = import_text(model(11, "(float[1,2] x) => (float[1,2] y)", "y = Trilu(x)"));
  EXPECT_TRUE(failed_with(no_entry, {"Trilu", "no version adapter"}, StatusCode::kUnsupported));
  auto before_first = import_text(model(11, "(float[1,2] x) => (float[1,2] y)", "y = Celu(x)"));
  EXPECT_TRUE(failed_with(before_first, {"Celu", "Celu-12"}, StatusCode::kUnsupported));
  auto too_old =
      import_text(model(1, "(float[1,2,3] x) => (float[1,2,1] y)", "y = GlobalLpPool(x)"));
  EXPECT_TRUE(failed_with(too_old, {"GlobalLpPool", "GlobalLpPool-2"}, StatusCode::kUnsupported));
  auto mask =
      import_text(model(7, "(float[3] x) => (float[3] y, float[3] m)", "y, m = Dropout(x)"));
  EXPECT_TRUE(failed_with(mask, {"Dropout", "mask"}, StatusCode::kUnsupported));
  // Adapters read attributes before the schema checks them: a wrong type is an error, not a
  // crash or a silent default.
  auto int_min = import_text(model(6, "(float[4] x) => (float[4] y)", "y = Clip<min = 1>(x)"));
  EXPECT_TRUE(failed_with(int_min, {"Clip", "attribute 'min' must be float"}));
  auto float_axes =
      import_text(model(11, "(float[1,3] x) => (float[3] y)", "y = Squeeze<axes = 0.5>(x)"));
  EXPECT_TRUE(failed_with(float_axes, {"Squeeze", "attribute 'axes' must be ints"}));
  auto float_k =
      import_text(model(9, "(float[5] x) => (float[2] v, int64[2] i)", "v, i = TopK<k = 2.0>(x)"));
  EXPECT_TRUE(failed_with(float_k, {"TopK", "attribute 'k' must be int"}));
  auto axis = import_text(model(6, "(float[2,3] a, float[3] b) => (float[2,3] y)",
                                "y = Add<broadcast = 1, axis = 5>(a, b)"));
  EXPECT_TRUE(failed_with(axis, {"Add", "broadcast axis 5"}));
}

TEST(VersionConverter, EveryTableOpHasASchemaAtTheTarget) {
  // Renamed ops (Upsample, Scatter) land on another op; every other entry must exist at 13.
  for (const auto& op : upgradable_ops()) {
    if (op == "Upsample" || op == "Scatter") continue;
    EXPECT_NE(OpRegistry::global().find("", op, kConvertTargetOpset), nullptr) << op;
  }
}

}  // namespace
}  // namespace ferrite::testing
