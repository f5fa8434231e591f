// Views that library steps take: prefix slices (x[0:k], and the empty x[0:0]) feeding Concat,
// a library op, reach it as their own elements, not the whole buffer. Found through
// torch.compile of Swin (functionalized `mask[a:b] = v` writes become Slice + Concat).
#include <gtest/gtest.h>

#include <random>

#include "test_util.h"

namespace ferrite {
namespace {

using testing::parse_onnx_text;

const char* kPrefixSlices = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[16,16] x, float[8,16] y) => (float[24,16] out, float[16,16] empty_cat) {
  s0 = Constant <value = int64[1] {0}> ()
  s8 = Constant <value = int64[1] {8}> ()
  ax = Constant <value = int64[1] {0}> ()
  head = Slice(x, s0, s8, ax)
  none = Slice(x, s0, s0, ax)
  x2 = Add(x, x)
  out = Concat <axis = 0> (head, y, head)
  empty_cat = Concat <axis = 0> (none, x2)
}
)";

TEST(LoweringViews, PrefixSlicesFeedLibraryStepsByTheirOwnElements) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  Tensor x = Tensor::zeros(DType::kF32, {16, 16}), y = Tensor::zeros(DType::kF32, {8, 16});
  for (auto* t : {&x, &y})
    for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = u(rng);
  std::vector<std::vector<Tensor>> results;
  for (const char* device : {"reference", "cpu"}) {
    auto g = parse_onnx_text(kPrefixSlices);
    ASSERT_TRUE(g);
    auto s = Session::from_graph(std::move(g), device);
    ASSERT_TRUE(s) << s.status().message();
    auto out = (*s)->run({{"x", x}, {"y", y}});
    ASSERT_TRUE(out) << device << ": " << out.status().message();
    results.push_back(std::move(*out));
  }
  for (size_t o = 0; o < results[0].size(); ++o) {
    ASSERT_EQ(results[0][o].dims(), results[1][o].dims());
    for (int64_t i = 0; i < results[0][o].numel(); ++i)
      ASSERT_EQ(results[0][o].data<float>()[i], results[1][o].data<float>()[i]) << o << " " << i;
  }
}

}  // namespace
}  // namespace ferrite
