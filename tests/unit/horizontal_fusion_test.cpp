// Horizontal fusion: independent pointwise kernels over the same space that share an input merge
// into one kernel with several outputs (read once, one launch); dependent kernels and kernels
// over other spaces do not. Results on cpu and gxu equal the reference device's.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <cstring>
#include <random>

#include "lower/lowering.h"
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

// Three outputs over x: two independent pointwise chains (merge) and a third with a different
// shape (a transpose view realized over another space: no merge); `d` depends on `a`.
const char* kModel = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[n,48] x, float[48] b) => (float[n,48] a, float[n,48] c, float[48,n] t, float[n,48] d) {
  s = Sigmoid(x)
  a = Mul(s, x)
  e = Add(x, b)
  c = Tanh(e)
  t = Transpose <perm = [1, 0]> (x)
  ad = Mul(a, a)
  d = Exp(ad)
}
)";

TEST(HorizontalFusion, MergesIndependentKernelsSharingInputs) {
  auto g = parse(kModel);
  ASSERT_TRUE(g);
  LoweringOptions off, on;
  on.horizontal_fusion = true;
  auto plain = lower_graph(*g, off);
  auto fused = lower_graph(*g, on);
  ASSERT_TRUE(plain && fused);
  EXPECT_EQ(fused->horizontal_merges, 1) << print_lowered(*fused);
  EXPECT_EQ(fused->kernels, plain->kernels - 1);
  int with_extra = 0;
  for (const Step& s : fused->steps)
    if (s.kind == Step::Kind::kKernel && !s.kernel.extra_outputs.empty()) {
      ++with_extra;
      EXPECT_EQ(s.kernel.extra_outputs.size(), 1u);
      EXPECT_EQ(s.kernel.source_nodes.size(), 4u)
          << print_lowered(*fused);  // Sigmoid, Mul, Add, Tanh
    }
  EXPECT_EQ(with_extra, 1);
}

TEST(HorizontalFusion, MultiOutputKernelsMatchReference) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-3, 3);
  for (const char* device : {"cpu", "gxu"}) {
    if (DeviceRegistry::global().origin(device).empty()) continue;
    auto dev = Session::from_graph(parse(kModel), device);
    auto ref = Session::from_graph(parse(kModel), "reference");
    ASSERT_TRUE(dev) << dev.status().message();
    ASSERT_TRUE(ref);
    for (int64_t n : {5, 130}) {
      Tensor x = Tensor::zeros(DType::kF32, {n, 48}), b = Tensor::zeros(DType::kF32, {48});
      for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng);
      for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = u(rng);
      auto got = (*dev)->run({{"x", x}, {"b", b}});
      auto want = (*ref)->run({{"x", x}, {"b", b}});
      ASSERT_TRUE(got) << device << ": " << got.status().message();
      ASSERT_TRUE(want);
      ASSERT_EQ(got->size(), 4u);
      for (size_t o = 0; o < 4; ++o) {
        const Tensor &gt = (*got)[o], &wt = (*want)[o];
        ASSERT_EQ(gt.dims(), wt.dims());
        for (int64_t i = 0; i < gt.numel(); ++i)
          ASSERT_NEAR(gt.data<float>()[i], wt.data<float>()[i],
                      1e-5f + 1e-5f * std::fabs(wt.data<float>()[i]))
              << device << " output " << o << " at " << i << " n=" << n;
      }
    }
  }
}

}  // namespace
}  // namespace ferrite
