// Guards and recompiles: dims the model leaves unknown are specialised on the first call, go
// dynamic on the first change, and assumptions of shape inference are checked per call.
#include "runtime/guards.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "runtime/compare.h"
#include "test_util.h"

namespace ferrite::testing {
namespace {

Tensor ramp(std::vector<int64_t> dims, float start = -3.f) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = start + 0.25f * static_cast<float>(i);
  return t;
}

// y = Relu(x) * 2 + softmax over the last axis: x f32[?, 4] (dim 0 unknown).
std::string unknown_batch_model() {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {nullptr, 4});
  b.init_f32("two", {1}, {2.f});
  b.node("Relu", {"x"}, {"r"}, "relu");
  b.node("Mul", {"r", "two"}, {"m"}, "mul");
  b.node("Softmax", {"x"}, {"s"}, "softmax");
  b.node("Add", {"m", "s"}, {"y"}, "add");
  b.output("y");
  return b.bytes();
}

Expected<std::unique_ptr<Session>> session_on(const std::string& bytes, const std::string& device) {
  FERRITE_ASSIGN_OR_RETURN(auto g, import_onnx_bytes(bytes, {}));
  return Session::from_graph(std::move(g), device);
}

TEST(Guards, UnknownDimSpecialisesThenGoesDynamic) {
  auto s = session_on(unknown_batch_model(), "reference");
  ASSERT_TRUE(s) << s.status().message();
  std::vector<std::string> log;
  (*s)->set_log([&](const std::string& line) { log.push_back(line); });
  EXPECT_EQ((*s)->compiles(), 0);  // nothing to compile until the sizes are seen
  std::vector<int> counts;
  for (int64_t n : {4, 9, 13, 4}) {
    auto out = (*s)->run({{"x", ramp({n, 4})}});
    ASSERT_TRUE(out) << out.status().message();
    EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{n, 4}));
    counts.push_back((*s)->compiles());
  }
  EXPECT_EQ(counts, (std::vector<int>{1, 2, 2, 2}));
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0], "[recompile] test: specialising input 'x' dim 0 == 4 (compile #1)");
  EXPECT_EQ(log[1],
            "[recompile] test: guard failed: input 'x' dim 0 == 4 (got 9); compiling with x dim 0 "
            "dynamic (compile #2)");
  EXPECT_NE((*s)->guards().find("symbol: input 'x' dim 0 == x_d0"), std::string::npos)
      << (*s)->guards();
  EXPECT_EQ((*s)->compiled_graph().inputs()[0]->type.to_string(), "f32[x_d0,4]");
}

TEST(Guards, SpecialisedGraphIsStatic) {
  auto s = session_on(unknown_batch_model(), "reference");
  ASSERT_TRUE(s) << s.status().message();
  (*s)->set_log([](const std::string&) {});
  ASSERT_TRUE((*s)->run({{"x", ramp({3, 4})}}));
  EXPECT_EQ((*s)->compiled_graph().outputs()[0]->type.to_string(), "f32[3,4]");
  EXPECT_NE((*s)->guards().find("specialised: input 'x' dim 0 == 3"), std::string::npos);
  // The graph as given keeps its unknown dim.
  EXPECT_EQ((*s)->graph().inputs()[0]->type.to_string(), "f32[?,4]");
}

// Every variant of the cpu device computes what the oracle computes.
TEST(Guards, CpuVariantsMatchReference) {
  auto cpu = session_on(unknown_batch_model(), "cpu");
  auto ref = session_on(unknown_batch_model(), "reference");
  ASSERT_TRUE(cpu) << cpu.status().message();
  ASSERT_TRUE(ref) << ref.status().message();
  (*cpu)->set_log([](const std::string&) {});
  (*ref)->set_log([](const std::string&) {});
  std::vector<int> counts;
  for (int64_t n : {4, 9, 13, 4}) {
    Tensor x = ramp({n, 4});
    auto a = (*cpu)->run({{"x", x}});
    auto b = (*ref)->run({{"x", x}});
    ASSERT_TRUE(a) << a.status().message();
    ASSERT_TRUE(b) << b.status().message();
    auto cmp = compare_tensors((*a)[0], (*b)[0], default_tolerance(DType::kF32));
    EXPECT_TRUE(cmp.ok) << "n=" << n << ": " << cmp.message;
    counts.push_back((*cpu)->compiles());
  }
  EXPECT_EQ(counts, (std::vector<int>{1, 2, 2, 2}));
}

TEST(Guards, EachChangedDimGoesDynamicOnce) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {nullptr, nullptr});
  b.node("Neg", {"x"}, {"y"}, "neg");
  b.output("y");
  auto s = session_on(b.bytes(), "reference");
  ASSERT_TRUE(s) << s.status().message();
  std::vector<std::string> log;
  (*s)->set_log([&](const std::string& line) { log.push_back(line); });
  std::vector<int> counts;
  for (auto dims : std::vector<std::vector<int64_t>>{{2, 3}, {2, 5}, {7, 5}, {2, 3}, {7, 9}}) {
    auto out = (*s)->run({{"x", ramp(dims)}});
    ASSERT_TRUE(out) << out.status().message();
    EXPECT_EQ((*out)[0].dims(), dims);
    counts.push_back((*s)->compiles());
  }
  EXPECT_EQ(counts, (std::vector<int>{1, 2, 3, 3, 3}));
  ASSERT_EQ(log.size(), 3u);
  EXPECT_NE(log[1].find("input 'x' dim 1 == 3 (got 5); compiling with x dim 1 dynamic"),
            std::string::npos)
      << log[1];
  EXPECT_NE(log[2].find("input 'x' dim 0 == 2 (got 7); compiling with x dim 0 dynamic"),
            std::string::npos)
      << log[2];
}

TEST(Guards, DtypeAndRankMismatchesStayErrors) {
  auto s = session_on(unknown_batch_model(), "reference");
  ASSERT_TRUE(s) << s.status().message();
  (*s)->set_log([](const std::string&) {});
  // Before any compile, and after one: the declared dtype and rank are not up for recompiling.
  EXPECT_TRUE(failed_with((*s)->run({{"x", Tensor::zeros(DType::kF64, {2, 4})}}),
                          {"input 'x' has dtype f64", "expects f32"}));
  EXPECT_TRUE(failed_with((*s)->run({{"x", ramp({2, 4, 1})}}),
                          {"input 'x' has rank 3", "expects 2", "[?,4]"}));
  EXPECT_EQ((*s)->compiles(), 0);
  ASSERT_TRUE((*s)->run({{"x", ramp({2, 4})}}));
  EXPECT_TRUE(failed_with((*s)->run({{"x", Tensor::zeros(DType::kI64, {2, 4})}}),
                          {"input 'x' has dtype i64"}));
  EXPECT_TRUE(failed_with((*s)->run({{"x", ramp({2})}}), {"input 'x' has rank 1"}));
  EXPECT_TRUE(failed_with((*s)->run({{"x", ramp({2, 5})}}),
                          {"input 'x' has shape [2,5]", "expects [?,4]", "dim 1"}));
  EXPECT_EQ((*s)->compiles(), 1);
}

// a: f32[n] + b: f32[8] infers [8], assuming n is 1 or 8: other sizes must be refused by name.
std::string broadcast_model() {
  ModelBuilder b;
  b.input("a", kOnnxFloat, {"n"});
  b.init_f32("b", {8}, std::vector<float>(8, 1.f));
  b.node("Add", {"a", "b"}, {"y"}, "add");
  b.output("y");
  return b.bytes();
}

TEST(Guards, BroadcastAssumptionIsChecked) {
  for (const char* device : {"reference", "cpu"}) {
    SCOPED_TRACE(device);
    auto s = session_on(broadcast_model(), device);
    ASSERT_TRUE(s) << s.status().message();
    EXPECT_NE((*s)->guards().find("assumed: n in {1, 8} (broadcast in node 'add' (Add))"),
              std::string::npos)
        << (*s)->guards();
    for (int64_t n : {8, 1}) {
      auto out = (*s)->run({{"a", ramp({n})}});
      ASSERT_TRUE(out) << out.status().message();
      EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{8}));
    }
    EXPECT_TRUE(failed_with((*s)->run({{"a", ramp({5})}}),
                            {"input 'a' dim 0 is 5", "assumes n is 1 or 8", "node 'add' (Add)"}));
    EXPECT_EQ((*s)->compiles(), 1);
  }
}

// An unknown dim that went dynamic and meets a static dim: the new variant assumes 1 or 8.
TEST(Guards, DynamicDimGetsAssumptionGuard) {
  ModelBuilder b;
  b.input("a", kOnnxFloat, {nullptr});
  b.init_f32("b", {8}, std::vector<float>(8, 1.f));
  b.node("Add", {"a", "b"}, {"y"}, "add");
  b.output("y");
  auto s = session_on(b.bytes(), "reference");
  ASSERT_TRUE(s) << s.status().message();
  (*s)->set_log([](const std::string&) {});
  ASSERT_TRUE((*s)->run({{"a", ramp({8})}}));
  ASSERT_TRUE((*s)->run({{"a", ramp({1})}}));
  EXPECT_EQ((*s)->compiles(), 2);
  EXPECT_TRUE(failed_with((*s)->run({{"a", ramp({3})}}),
                          {"input 'a' dim 0 is 3", "assumes a_d0 is 1 or 8"}));
  EXPECT_EQ((*s)->compiles(), 2);
  ASSERT_TRUE((*s)->run({{"a", ramp({8})}}));
  EXPECT_EQ((*s)->compiles(), 2);
}

TEST(Guards, LogGoesToStderrWithFerriteLog) {
  auto s = session_on(unknown_batch_model(), "reference");
  ASSERT_TRUE(s) << s.status().message();
  const char* old = std::getenv("FERRITE_LOG");
  std::string saved = old ? old : "";
  setenv("FERRITE_LOG", "recompile", 1);
  ::testing::internal::CaptureStderr();
  auto a = (*s)->run({{"x", ramp({2, 4})}});
  auto b = (*s)->run({{"x", ramp({3, 4})}});
  std::string err = ::testing::internal::GetCapturedStderr();
  if (old)
    setenv("FERRITE_LOG", saved.c_str(), 1);
  else
    unsetenv("FERRITE_LOG");
  ASSERT_TRUE(a && b);
  EXPECT_NE(err.find("[recompile] test: guard failed: input 'x' dim 0 == 2 (got 3); compiling "
                     "with x dim 0 dynamic (compile #2)\n"),
            std::string::npos)
      << err;
}

TEST(Guards, GuardSetDescribesDeclaredInputs) {
  auto g = import_onnx_bytes(unknown_batch_model(), {});
  ASSERT_TRUE(g) << g.status().message();
  GuardSet gs = GuardSet::for_inputs(**g);
  EXPECT_EQ(gs.to_string(),
            "declared: input 'x' dtype == f32\ndeclared: input 'x' rank == 2\n"
            "declared: input 'x' dim 1 == 4\n");
  EXPECT_FALSE(gs.check({ramp({7, 4})}));
  auto f = gs.check({ramp({7, 3})});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->action, GuardFailure::Action::kError);
}

// Cost of a guard check (run by hand: --gtest_also_run_disabled_tests
// --gtest_filter='GuardsCost.*'): BERT-like inputs, three [batch, seq] tensors.
TEST(GuardsCost, DISABLED_CheckNanoseconds) {
  ModelBuilder b;
  for (const char* n : {"ids", "mask", "types"}) b.input(n, kOnnxInt64, {"batch", "seq"});
  b.node("Add", {"ids", "mask"}, {"s"}, "add");
  b.node("Add", {"s", "types"}, {"y"}, "add2");
  b.output("y", kOnnxInt64);
  auto g = import_onnx_bytes(b.bytes(), {});
  ASSERT_TRUE(g) << g.status().message();
  GuardSet gs = GuardSet::for_inputs(**g);
  std::vector<Tensor> in(3, Tensor::zeros(DType::kI64, {1, 128}));
  constexpr int kIters = 1000000;
  int fails = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kIters; ++i) fails += gs.check(in).has_value();
  double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(fails, 0);
  std::printf("%zu guards: %.1f ns per check\n", gs.guards().size(), ns / kIters);
}

}  // namespace
}  // namespace ferrite::testing
