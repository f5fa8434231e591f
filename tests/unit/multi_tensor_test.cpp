// Multi-tensor kernels (lower/multi_tensor.h) and outputs written into inputs
// (RunOptions::outputs_into_inputs, memory/in_place.h): an update graph's independent pointwise
// kernels over different shapes become one kernel with segments, a dependent kernel stays
// apart, and on cpu the new values land in the inputs' memory, equal to the reference device's.
#include "lower/multi_tensor.h"

#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <cmath>
#include <cstring>
#include <random>

#include "lower/lowering.h"
#include "memory/in_place.h"
#include "runtime/session.h"

namespace ferrite {
namespace {

std::unique_ptr<Graph> parse(const char* text) {
  onnx::ModelProto model;
  EXPECT_TRUE(onnx::OnnxParser::Parse(model, text).IsOK());
  std::string bytes;
  model.SerializeToString(&bytes);
  auto g = import_onnx_bytes(bytes, "");
  EXPECT_TRUE(g) << g.status().message();
  return g ? std::move(*g) : nullptr;
}

// Three updates of three shapes (x2, y2, z2: one level) and w, which reads x2 (the next level).
const char* kModel = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[4,8] x, float[5] y, float[3,2,2] z, float[1] s) =>
  (float[4,8] x2, float[5] y2, float[3,2,2] z2, float[4,8] w) {
  xs = Mul(x, s)
  x2 = Add(xs, x)
  y2 = Tanh(y)
  z2 = Sigmoid(z)
  w = Exp(x2)
}
)";

TEST(MultiTensor, GroupsIndependentKernelsOfDifferentShapes) {
  auto g = parse(kModel);
  ASSERT_TRUE(g);
  auto lg = lower_graph(*g, {});
  ASSERT_TRUE(lg);
  const int before = lg->kernels;
  EXPECT_EQ(fuse_multi_tensor(*lg), 2) << print_lowered(*lg);
  EXPECT_EQ(lg->kernels, before - 2);
  ASSERT_EQ(lg->steps.size(), 2u) << print_lowered(*lg);
  const Kernel& first = lg->steps[0].kernel;
  ASSERT_EQ(first.segments.size(), 3u);
  // Rows one after another: 4 rows of x, 1 of y, 6 of z.
  EXPECT_EQ(first.shape[0].value(), 11);
  EXPECT_EQ(first.extra_outputs.size(), 2u);
  EXPECT_TRUE(lg->steps[1].kernel.segments.empty());  // w depends on x2
  // x2, y2, z2 may be stored into x, y, z (each read only at the element stored); w is no
  // input's.
  EXPECT_EQ(plan_outputs_into_inputs(*lg, {0, 1, 2, -1}), 3);
  EXPECT_TRUE(lg->steps[0].kernel.writes_input);
}

TEST(MultiTensor, UpdatesInputsInPlaceLikeTheReference) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-2, 2);
  auto fill = [&](std::vector<int64_t> dims) {
    Tensor t = Tensor::zeros(DType::kF32, dims);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
    return t;
  };
  Tensor x = fill({4, 8}), y = fill({5}), z = fill({3, 2, 2}), s = fill({1});
  auto copy = [](const Tensor& t) {
    Tensor c = Tensor::zeros(t.dtype(), t.dims());
    std::memcpy(c.raw(), t.raw(), t.nbytes());
    return c;
  };
  auto ref = Session::from_graph(parse(kModel), "reference");
  ASSERT_TRUE(ref);
  auto want = (*ref)->run({{"x", copy(x)}, {"y", copy(y)}, {"z", copy(z)}, {"s", s}});
  ASSERT_TRUE(want);
  RunOptions o;
  o.outputs_into_inputs = {0, 1, 2, -1};
  auto cpu = Session::from_graph(parse(kModel), "cpu", o);
  ASSERT_TRUE(cpu) << cpu.status().message();
  auto got = (*cpu)->run({{"x", x}, {"y", y}, {"z", z}, {"s", s}});
  ASSERT_TRUE(got) << got.status().message();
  const Tensor* inputs[] = {&x, &y, &z};
  for (size_t o = 0; o < 4; ++o) {
    const Tensor& w = (*want)[o];
    // Outputs 0-2 are the inputs themselves, written in place.
    const Tensor& g = o < 3 ? *inputs[o] : (*got)[o];
    if (o < 3) {
      EXPECT_EQ((*got)[o].raw(), inputs[o]->raw());
    }
    ASSERT_EQ(g.dims(), w.dims());
    for (int64_t i = 0; i < w.numel(); ++i)
      ASSERT_NEAR(g.data<float>()[i], w.data<float>()[i],
                  1e-5f + 1e-5f * std::fabs(w.data<float>()[i]))
          << "output " << o << " at " << i;
  }
  auto st = (*cpu)->stats();
  ASSERT_TRUE(st.memory);
  EXPECT_EQ(st.memory->outputs_in_place, 3);
  EXPECT_EQ(st.memory->outputs_copied_into_inputs, 0);
}

}  // namespace
}  // namespace ferrite
