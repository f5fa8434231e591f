// Library steps take whole buffers: a value that is only part of its buffer (a prefix Slice of a
// Shape, as exporters emit for dynamic reshapes -- torchvision's ViT with a dynamic batch) must
// be copied out first. Before the fix the cpu, cuda and gxu executors viewed the whole buffer
// with the slice's dims and aborted in Tensor::reshaped. Also: sizes from the model that cannot
// be allocated are errors, never aborts.
#include <algorithm>

#include "lower/lowering.h"
#include "runtime/device.h"
#include "test_util.h"

namespace ferrite::testing {
namespace {

std::vector<std::string> compiling_devices() {
  std::vector<std::string> d{"cpu"};
  if (!DeviceRegistry::global().origin("gxu").empty()) d.push_back("gxu");
  return d;
}

Expected<std::vector<Tensor>> run_on(const std::string& model, const std::string& device,
                                     std::vector<Session::NamedInput> inputs) {
  FERRITE_ASSIGN_OR_RETURN(auto g, import_bytes(model));
  FERRITE_ASSIGN_OR_RETURN(auto s, Session::from_graph(std::move(g), device));
  return s->run(inputs);
}

onnx::TensorProto* init_i64(ModelBuilder& b, const std::string& name,
                            const std::vector<int64_t>& v) {
  auto* t = b.graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(kOnnxInt64);
  t->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t->add_int64_data(x);
  return t;
}

// y = Reshape(Exp(x), Concat(Shape(x)[0:2], [-1])) with x [batch, 4, 6]: the Concat (a library
// step) reads the first two of Shape's three values.
TEST(LoweringViews, PrefixSliceIntoLibraryStep) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {"batch", 4, 6});
  init_i64(b, "zero", {0});
  init_i64(b, "two", {2});
  init_i64(b, "minus_one", {-1});
  b.node("Shape", {"x"}, {"shape"}, "shape");
  b.node("Slice", {"shape", "zero", "two"}, {"lead"}, "lead");
  add_int_attr(b.node("Concat", {"lead", "minus_one"}, {"target"}, "target"), "axis", 0);
  b.node("Exp", {"x"}, {"e"}, "exp");
  b.node("Reshape", {"e", "target"}, {"y"}, "reshape");
  b.output("y");
  Tensor x = Tensor::zeros(DType::kF32, {16, 4, 6});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 0.01f * static_cast<float>(i % 50);
  auto want = run_on(b.bytes(), "reference", {{"x", x.clone()}});
  ASSERT_TRUE(want) << want.status().message();
  for (const std::string& device : compiling_devices()) {
    SCOPED_TRACE(device);
    auto got = run_on(b.bytes(), device, {{"x", x.clone()}});
    ASSERT_TRUE(got) << got.status().message();
    ASSERT_EQ((*got)[0].dims(), (std::vector<int64_t>{16, 4, 6}));
    for (int64_t i = 0; i < x.numel(); ++i)
      EXPECT_FLOAT_EQ((*got)[0].data<float>()[i], (*want)[0].data<float>()[i]) << i;
  }
}

// The same graph lowered: the Slice and Concat of Shape's dims are shape arithmetic and stay
// library steps (the executor runs them on the host). As a generated kernel the Slice ran on the
// device on cuda, and the Concat reading it copied its result back on every run (torchvision's
// ViT: 12 such copies a run). An integer Slice of a graph input is data and stays a kernel. Float
// values fixed by the binding (a rotary table from Range) stay library steps only with
// fixed_values_on_host (devices with memory of their own: computed once per binding).
TEST(LoweringViews, ShapeArithmeticStaysOnTheHost) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {"batch", 4, 6});
  b.input("ids", kOnnxInt64, {"batch", 8});
  init_i64(b, "zero", {0});
  init_i64(b, "one", {1});
  init_i64(b, "two", {2});
  init_i64(b, "minus_one", {-1});
  auto* half = b.graph()->add_initializer();
  half->set_name("half");
  half->set_data_type(kOnnxFloat);
  half->add_float_data(0.5f);
  b.node("Shape", {"x"}, {"shape"}, "shape");
  b.node("Slice", {"shape", "zero", "two"}, {"lead"}, "lead");
  add_int_attr(b.node("Concat", {"lead", "minus_one"}, {"target"}, "target"), "axis", 0);
  b.node("Exp", {"x"}, {"e"}, "exp");
  b.node("Reshape", {"e", "target"}, {"y"}, "reshape");
  b.node("Slice", {"ids", "zero", "two", "one"}, {"cols"}, "cols");
  b.node("Add", {"cols", "cols"}, {"z"}, "add");
  add_int_attr(b.node("Cast", {"lead"}, {"lead_f"}, "to_float"), "to", kOnnxFloat);
  b.node("Mul", {"lead_f", "half"}, {"f"}, "scale");
  b.output("y");
  b.output("z");
  b.output("f");
  auto g = import_bytes(b.bytes());
  ASSERT_TRUE(g) << g.status().message();
  for (bool on_host : {false, true}) {
    SCOPED_TRACE(on_host);
    LoweringOptions opts;
    opts.fixed_values_on_host = on_host;
    auto lg = lower_graph(**g, opts);
    ASSERT_TRUE(lg) << lg.status().message();
    std::vector<std::string> library, kernel_nodes;
    for (const Step& s : lg->steps) {
      if (s.kind == Step::Kind::kKernel)
        kernel_nodes.insert(kernel_nodes.end(), s.kernel.source_nodes.begin(),
                            s.kernel.source_nodes.end());
      else
        library.push_back(s.node->name);
    }
    std::vector<std::string> want_library{"shape", "lead", "target"};
    std::vector<std::string> want_kernels{"exp", "cols", "add"};
    for (const char* n : {"to_float", "scale"})
      (on_host ? want_library : want_kernels).push_back(n);
    std::sort(library.begin(), library.end());
    std::sort(want_library.begin(), want_library.end());
    EXPECT_EQ(library, want_library);
    for (const std::string& n : want_kernels)
      EXPECT_NE(std::find(kernel_nodes.begin(), kernel_nodes.end(), n), kernel_nodes.end()) << n;
  }
}

// A graph output that is a Reshape of another graph output (a training forward returns an
// activation and its view, both saved for the backward): each output has its own dims. Before
// the fix the compiling devices returned the view's values with the first output's dims.
TEST(LoweringViews, OutputReshapeOfAnotherOutput) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {2, 3});
  init_i64(b, "shape", {3, 2});
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.node("Reshape", {"y", "shape"}, {"z"}, "reshape");
  b.node("Identity", {"y"}, {"w"}, "identity");
  b.output("y");
  b.output("z");
  b.output("w");
  Tensor x = Tensor::zeros(DType::kF32, {2, 3});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i) - 2.0f;
  std::vector<std::string> devices = compiling_devices();
  devices.insert(devices.begin(), "reference");
  for (const std::string& device : devices) {
    SCOPED_TRACE(device);
    auto got = run_on(b.bytes(), device, {{"x", x.clone()}});
    ASSERT_TRUE(got) << got.status().message();
    ASSERT_EQ(got->size(), 3u);
    EXPECT_EQ((*got)[0].dims(), (std::vector<int64_t>{2, 3}));
    EXPECT_EQ((*got)[1].dims(), (std::vector<int64_t>{3, 2}));
    EXPECT_EQ((*got)[2].dims(), (std::vector<int64_t>{2, 3}));
    for (size_t k = 0; k < 3; ++k)
      for (int64_t i = 0; i < 6; ++i)
        EXPECT_FLOAT_EQ((*got)[k].data<float>()[i], std::max(static_cast<float>(i) - 2.0f, 0.0f));
  }
}

// The reproduction: a Reshape to the constant shape [2^40, 2^40]. An error naming the
// size on every device, not an abort in Tensor::zeros (gxu downloaded the output that way).
TEST(LoweringViews, ImpossibleReshapeIsAnError) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {"n"});
  init_i64(b, "shape", {int64_t{1} << 40, int64_t{1} << 40});
  b.node("Reshape", {"x", "shape"}, {"y"}, "reshape");
  b.output("y");
  std::vector<std::string> devices = compiling_devices();
  devices.insert(devices.begin(), "reference");
  for (const std::string& device : devices) {
    SCOPED_TRACE(device);
    auto got = run_on(b.bytes(), device, {{"x", Tensor::zeros(DType::kF32, {4})}});
    EXPECT_FALSE(got.has_value());
    if (!got) {
      EXPECT_NE(got.status().message().find("1099511627776"), std::string::npos)
          << got.status().message();
    }
  }
}

}  // namespace
}  // namespace ferrite::testing
