// Run-time input validation and run-time shape errors, plus valid edge cases (empty tensors,
// scalars) that must run correctly.
#include "test_util.h"

namespace ferrite::testing {
namespace {

// y = Relu(a + b), a: f32[batch,4], b: f32[batch,4].
std::string two_input_model() {
  ModelBuilder b;
  b.input("a", kOnnxFloat, {"batch", 4});
  b.input("b", kOnnxFloat, {"batch", 4});
  b.node("Add", {"a", "b"}, {"s"}, "add");
  b.node("Relu", {"s"}, {"y"}, "relu");
  b.output("y");
  return b.bytes();
}

Tensor f32(std::vector<int64_t> dims, float fill = 1.f) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = fill;
  return t;
}

class SessionInputs : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = session_from(two_input_model());
    ASSERT_TRUE(s) << s.status().message();
    session_ = std::move(s).value();
  }
  std::unique_ptr<Session> session_;
};

TEST_F(SessionInputs, ValidRunByNameAndByPosition) {
  auto out = session_->run({{"b", f32({3, 4}, 2)}, {"a", f32({3, 4}, -5)}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ((*out)[0].data<float>()[0], 0.f);
  out = session_->run({{"", f32({1, 4}, 1)}, {"", f32({1, 4}, 2)}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].data<float>()[3], 3.f);
}

TEST_F(SessionInputs, MissingInput) {
  EXPECT_TRUE(
      failed_with(session_->run({{"a", f32({3, 4})}}), {"missing input 'b'", "f32[batch,4]"}));
  EXPECT_TRUE(failed_with(session_->run({}), {"missing input 'a'"}));
}

TEST_F(SessionInputs, TooManyAndDuplicateInputs) {
  EXPECT_TRUE(failed_with(session_->run({{"", f32({1, 4})}, {"", f32({1, 4})}, {"", f32({1, 4})}}),
                          {"model has 2 inputs, but 3 were given"}));
  EXPECT_TRUE(failed_with(session_->run({{"a", f32({1, 4})}, {"a", f32({1, 4})}}),
                          {"input 'a' is given twice"}));
}

TEST_F(SessionInputs, WrongRank) {
  EXPECT_TRUE(failed_with(session_->run({{"a", f32({3, 4, 1})}, {"b", f32({3, 4})}}),
                          {"input 'a' has rank 3", "[3,4,1]", "expects 2", "[batch,4]"}));
  EXPECT_TRUE(failed_with(session_->run({{"a", f32({3, 4})}, {"b", Tensor::scalar<float>(1)}}),
                          {"input 'b' has rank 0"}));
}

TEST_F(SessionInputs, WrongDtype) {
  Tensor i64 = Tensor::zeros(DType::kI64, {3, 4});
  EXPECT_TRUE(failed_with(session_->run({{"a", f32({3, 4})}, {"b", i64}}),
                          {"input 'b' has dtype i64", "expects f32"}));
  EXPECT_TRUE(failed_with(session_->run({{"a", Tensor()}, {"b", f32({3, 4})}}),
                          {"input 'a' is an empty (undefined) tensor"}));
}

TEST_F(SessionInputs, StaticDimMismatch) {
  EXPECT_TRUE(failed_with(session_->run({{"a", f32({3, 5})}, {"b", f32({3, 4})}}),
                          {"input 'a' has shape [3,5]", "expects [batch,4]", "dim 1"}));
}

TEST_F(SessionInputs, InconsistentSymbolicDim) {
  EXPECT_TRUE(failed_with(session_->run({{"a", f32({2, 4})}, {"b", f32({3, 4})}}),
                          {"input 'b' dim 0 is 3", "symbol 'batch' is already 2"}));
}

TEST_F(SessionInputs, OverflowingDimsAreRefused) {
  // A zero dim makes the element count 0, but the strides over the other dims overflow: such a
  // tensor cannot even be created, so it can never reach a session or a kernel.
  auto t = Tensor::create(DType::kF32, {0, int64_t{1} << 40, int64_t{1} << 40});
  ASSERT_FALSE(t);
  EXPECT_NE(t.status().message().find("strides overflow"), std::string::npos)
      << t.status().message();
}

TEST_F(SessionInputs, SessionStaysUsableAfterErrors) {
  EXPECT_FALSE(session_->run({{"a", f32({2, 4})}, {"b", f32({3, 4})}}));
  auto out = session_->run({{"a", f32({5, 4}, 1)}, {"b", f32({5, 4}, 1)}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{5, 4}));
}

TEST(SessionRuntime, BroadcastMismatchWithSymbolicDims) {
  // n and m are independent symbols: inference cannot refuse, the kernel must.
  ModelBuilder b;
  b.input("a", kOnnxFloat, {"n"});
  b.input("b", kOnnxFloat, {"m"});
  b.node("Add", {"a", "b"}, {"y"}, "late_add");
  b.output("y");
  auto s = session_from(b.bytes());
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_TRUE(failed_with((*s)->run({{"a", f32({3})}, {"b", f32({4})}}),
                          {"node 'late_add' (Add)", "cannot broadcast [3] with [4]"}));
  auto ok = (*s)->run({{"a", f32({3}, 1)}, {"b", f32({1}, 2)}});
  ASSERT_TRUE(ok) << ok.status().message();
  EXPECT_EQ(values_of<float>((*ok)[0]), (std::vector<float>{3, 3, 3}));
}

TEST(SessionRuntime, MatMulInnerDimMismatch) {
  ModelBuilder b;
  b.input("a", kOnnxFloat, {"m", "k"});
  b.input("b", kOnnxFloat, {"k2", "n"});
  b.node("MatMul", {"a", "b"}, {"y"}, "late_mm");
  b.output("y");
  auto s = session_from(b.bytes());
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_TRUE(
      failed_with((*s)->run({{"a", f32({2, 3})}, {"b", f32({4, 5})}}),
                  {"node 'late_mm' (MatMul)", "inner dimensions differ", "f32[2,3]", "f32[4,5]"}));
  auto ok = (*s)->run({{"a", f32({2, 3}, 1)}, {"b", f32({3, 5}, 2)}});
  ASSERT_TRUE(ok) << ok.status().message();
  EXPECT_EQ((*ok)[0].dims(), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ((*ok)[0].data<float>()[0], 6.f);
}

TEST(SessionRuntime, GemmInnerDimMismatchAtRunTime) {
  ModelBuilder b;
  b.input("a", kOnnxFloat, {"m", "k"});
  b.input("w", kOnnxFloat, {"k2", 3});
  b.node("Gemm", {"a", "w"}, {"y"}, "late_gemm");
  b.output("y");
  auto s = session_from(b.bytes());
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_TRUE(failed_with((*s)->run({{"a", f32({2, 4})}, {"w", f32({5, 3})}}),
                          {"node 'late_gemm' (Gemm)", "inner dimensions differ"}));
}

TEST(SessionRuntime, UnknownRankInputAcceptsAnyShape) {
  ModelBuilder b;
  b.input_unranked("a", kOnnxFloat);
  b.node("Relu", {"a"}, {"y"}, "relu");
  b.output("y");
  auto s = session_from(b.bytes());
  ASSERT_TRUE(s) << s.status().message();
  auto out = (*s)->run({{"a", f32({2, 1, 3}, -1)}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{2, 1, 3}));
  EXPECT_TRUE(failed_with((*s)->run({{"a", Tensor::zeros(DType::kF64, {2})}}), {"dtype f64"}));
}

TEST(SessionRuntime, IntegerDivisionByZeroIsAnError) {
  ModelBuilder b;
  b.input("a", kOnnxInt64, {2});
  b.input("b", kOnnxInt64, {2});
  b.node("Div", {"a", "b"}, {"y"}, "div");
  b.output("y", kOnnxInt64);
  auto s = session_from(b.bytes());
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_TRUE(failed_with((*s)->run({{"a", Tensor::from_vector<int64_t>({1, 2}, {2})},
                                     {"b", Tensor::from_vector<int64_t>({1, 0}, {2})}}),
                          {"node 'div' (Div)", "division by zero"}));
}

// Zero-size batch through Gemm (with bias), Add and Relu.
TEST(SessionEdgeCases, ZeroSizeBatch) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {"batch", 4});
  b.init_f32("w", {4, 3}, std::vector<float>(12, 0.5f));
  b.init_f32("c", {3}, {1, 2, 3});
  b.node("Gemm", {"x", "w", "c"}, {"h"}, "fc");
  b.node("Add", {"h", "c"}, {"h2"}, "add");
  b.node("Relu", {"h2"}, {"y"}, "relu");
  b.output("y");
  auto s = session_from(b.bytes());
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_EQ((*s)->graph().outputs()[0]->type.to_string(), "f32[batch,3]");
  auto out = (*s)->run({{"x", f32({0, 4})}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ((*out)[0].numel(), 0);
  // And the same session with a real batch.
  out = (*s)->run({{"x", f32({2, 4}, 1)}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(values_of<float>((*out)[0]), (std::vector<float>{4, 6, 8, 4, 6, 8}));
}

TEST(SessionEdgeCases, ZeroInnerDimension) {
  // K = 0: the product is all zeros (plus bias), not garbage.
  ModelBuilder b;
  b.input("a", kOnnxFloat, {2, 0});
  b.input("w", kOnnxFloat, {0, 3});
  b.init_f32("c", {3}, {1, 2, 3});
  b.node("Gemm", {"a", "w", "c"}, {"y"}, "fc");
  b.node("MatMul", {"a", "w"}, {"z"}, "mm");
  b.output("y");
  b.output("z");
  auto s = session_from(b.bytes());
  ASSERT_TRUE(s) << s.status().message();
  auto out = (*s)->run({{"a", f32({2, 0})}, {"w", f32({0, 3})}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(values_of<float>((*out)[0]), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(values_of<float>((*out)[1]), (std::vector<float>(6, 0.f)));
}

TEST(SessionEdgeCases, Scalars) {
  ModelBuilder b;
  b.input("a", kOnnxFloat, {});
  b.input("b", kOnnxFloat, {});
  b.input("v", kOnnxFloat, {3});
  b.node("Mul", {"a", "b"}, {"ab"}, "mul");
  b.node("Add", {"ab", "v"}, {"y"}, "add");
  b.node("Sqrt", {"ab"}, {"r"}, "sqrt");
  b.output("ab");
  b.output("y");
  b.output("r");
  auto s = session_from(b.bytes());
  ASSERT_TRUE(s) << s.status().message();
  const Graph& g = (*s)->graph();
  EXPECT_EQ(g.outputs()[0]->type.to_string(), "f32[]");
  EXPECT_EQ(g.outputs()[1]->type.to_string(), "f32[3]");
  auto out = (*s)->run({{"a", Tensor::scalar<float>(3)},
                        {"b", Tensor::scalar<float>(3)},
                        {"v", Tensor::from_vector<float>({1, 2, 3}, {3})}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].rank(), 0u);
  EXPECT_EQ((*out)[0].data<float>()[0], 9.f);
  EXPECT_EQ(values_of<float>((*out)[1]), (std::vector<float>{10, 11, 12}));
  EXPECT_EQ((*out)[2].data<float>()[0], 3.f);
  // A rank-1 tensor of one element is not a scalar.
  EXPECT_TRUE(
      failed_with((*s)->run({{"a", f32({1})}, {"b", Tensor::scalar<float>(1)}, {"v", f32({3})}}),
                  {"input 'a' has rank 1"}));
}

TEST(SessionEdgeCases, GraphInputPassedStraightThrough) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {2});
  b.node("Neg", {"x"}, {"y"}, "neg");
  b.output("x");
  b.output("y");
  auto s = session_from(b.bytes());
  ASSERT_TRUE(s) << s.status().message();
  auto out = (*s)->run({{"x", Tensor::from_vector<float>({1, -2}, {2})}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(values_of<float>((*out)[0]), (std::vector<float>{1, -2}));
  EXPECT_EQ(values_of<float>((*out)[1]), (std::vector<float>{-1, 2}));
}

TEST(SessionEdgeCases, MixedDtypesThroughComparisons) {
  ModelBuilder b;
  b.input("a", kOnnxInt32, {"n"});
  b.input("b", kOnnxInt32, {"n"});
  b.node("Less", {"a", "b"}, {"lt"}, "lt");
  b.node("Greater", {"a", "b"}, {"gt"}, "gt");
  b.node("Equal", {"lt", "gt"}, {"eq"}, "eq");
  b.output("eq", kOnnxBool);
  auto s = session_from(b.bytes());
  ASSERT_TRUE(s) << s.status().message();
  auto out = (*s)->run({{"a", Tensor::from_vector<int32_t>({1, 5, 3}, {3})},
                        {"b", Tensor::from_vector<int32_t>({2, 4, 3}, {3})}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(values_of<bool>((*out)[0]), (std::vector<bool>{false, false, true}));
}

}  // namespace
}  // namespace ferrite::testing
