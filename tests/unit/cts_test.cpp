// The conformance suite itself: it must catch a device that computes one op wrongly (and only that
// op), classify unsupported/unimplemented devices, honour the known list, and report numbers.
#include "cts/cts.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>

#include "ops/op_schema.h"
#include "runtime/device.h"
#include "test_util.h"

namespace ferrite {
namespace {

// Runs the reference kernels, then adds 0.01 to the first finite element of every graph output
// that a node of `op` produces: a device with exactly one wrong op.
class PerturbingDevice : public Device {
 public:
  explicit PerturbingDevice(std::string op) : op_(std::move(op)) {}
  std::string name() const override { return "cts-test-perturb"; }
  std::string description() const override { return "test device"; }
  DeviceProperties properties() const override { return {}; }
  Expected<std::unique_ptr<PreparedModel>> prepare(const Graph& graph,
                                                   const RunOptions& opts) override {
    FERRITE_ASSIGN_OR_RETURN(auto ref, DeviceRegistry::global().create("reference"));
    FERRITE_ASSIGN_OR_RETURN(auto inner, ref->prepare(graph, opts));
    std::vector<bool> perturb;
    for (const Value* v : graph.outputs())
      perturb.push_back(v->producer && v->producer->op_type == op_);
    return std::unique_ptr<PreparedModel>(new Model(std::move(inner), std::move(perturb)));
  }

 private:
  class Model : public PreparedModel {
   public:
    Model(std::unique_ptr<PreparedModel> inner, std::vector<bool> perturb)
        : inner_(std::move(inner)), perturb_(std::move(perturb)) {}
    Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) override {
      FERRITE_ASSIGN_OR_RETURN(auto outs, inner_->run(inputs));
      for (size_t i = 0; i < outs.size(); ++i) {
        if (!perturb_[i] || outs[i].numel() == 0 || outs[i].dtype() != DType::kF32) continue;
        Tensor t = outs[i].clone();
        float* d = t.data<float>();
        for (int64_t k = 0; k < t.numel(); ++k)
          if (std::isfinite(d[k])) {
            d[k] += 0.01f;
            break;
          }
        outs[i] = std::move(t);
      }
      return outs;
    }

   private:
    std::unique_ptr<PreparedModel> inner_;
    std::vector<bool> perturb_;
  };
  std::string op_;
};

// Refuses everything, as a skeleton device does; `unsupported_kind` picks the status code.
class RefusingDevice : public Device {
 public:
  explicit RefusingDevice(bool unsupported_kind) : unsupported_(unsupported_kind) {}
  std::string name() const override { return "cts-test-refuse"; }
  std::string description() const override { return "test device"; }
  DeviceProperties properties() const override { return {}; }
  Expected<std::unique_ptr<PreparedModel>> prepare(const Graph&, const RunOptions&) override {
    if (unsupported_) return unsupported("unimplemented: skeleton");
    return err("compiler crashed");
  }

 private:
  bool unsupported_;
};

void register_test_devices() {
  static bool done = [] {
    auto& r = DeviceRegistry::global();
    r.add("cts-test-relu-broken",
          []() -> std::unique_ptr<Device> { return std::make_unique<PerturbingDevice>("Relu"); });
    r.add("cts-test-unsupported",
          []() -> std::unique_ptr<Device> { return std::make_unique<RefusingDevice>(true); });
    r.add("cts-test-erroring",
          []() -> std::unique_ptr<Device> { return std::make_unique<RefusingDevice>(false); });
    return true;
  }();
  (void)done;
}

cts::SuiteResult run(const std::string& device, const std::string& filter,
                     std::vector<cts::KnownEntry> known = {}) {
  register_test_devices();
  cts::RunConfig cfg;
  cfg.device = device;
  cfg.filter.emplace(filter);
  cfg.known = std::move(known);
  cfg.progress = false;
  auto r = cts::run_suite(cfg);
  EXPECT_TRUE(r.has_value()) << r.status().message();
  return r ? *r : cts::SuiteResult{};
}

TEST(Cts, CatchesOneBrokenOpOnly) {
  auto r = run("cts-test-relu-broken", "^(Relu|LeakyRelu|Add|Sigmoid|Transpose)/");
  std::set<std::string> failing_groups;
  int relu_cases = 0;
  for (const auto& c : r.cases) {
    if (c.group == "Relu") {
      ++relu_cases;
      // Every Relu case with f32 elements fails; the empty one has nothing to perturb.
      if (c.name.find("f32") != std::string::npos && c.name.find("empty") == std::string::npos) {
        EXPECT_EQ(c.outcome, cts::Outcome::kFail) << c.name;
        EXPECT_GE(c.first_bad_index, 0) << c.name;
        EXPECT_NEAR(c.max_abs_error, 0.01, 1e-3) << c.name;
        EXPECT_NE(c.detail.find("output 'y0'"), std::string::npos) << c.detail;
      }
    } else {
      EXPECT_EQ(c.outcome, cts::Outcome::kPass) << c.name << ": " << c.detail;
    }
    if (c.outcome == cts::Outcome::kFail) failing_groups.insert(c.group);
  }
  EXPECT_GE(relu_cases, 3);
  EXPECT_EQ(failing_groups, std::set<std::string>{"Relu"});
}

TEST(Cts, FusionPatternsPassOnReference) {
  auto r = run("reference", "^fusion/");
  EXPECT_GE(r.cases.size(), 10u);
  for (const auto& c : r.cases) EXPECT_EQ(c.outcome, cts::Outcome::kPass) << c.name << c.detail;
}

TEST(Cts, EveryGeneratedCaseIsValidOnReference) {
  // A case the oracle refuses is a generator bug; the null-like run costs no compiles.
  auto r = run("reference", ".");
  int n = 0;
  for (const auto& c : r.cases) {
    ++n;
    EXPECT_EQ(c.outcome, cts::Outcome::kPass) << c.name << ": " << c.detail;
  }
  EXPECT_GT(n, 500);
  // Most of the op table has a generator; the ops of sequences, optionals and subgraphs are
  // tested elsewhere (sequence_test.cpp, control_flow_test.cpp, the ONNX node suite).
  size_t without = 0;
  for (const auto& [op, why] : r.skipped_ops)
    without += why.rfind("sequences, optionals or subgraphs", 0) != 0;
  EXPECT_LT(without, 10u);
}

TEST(Cts, UnsupportedDeviceIsNotAFailure) {
  auto r = run("cts-test-unsupported", "^(Add|Conv|ReduceSum)/");
  ASSERT_FALSE(r.cases.empty());
  for (const auto& c : r.cases) {
    EXPECT_EQ(c.outcome, cts::Outcome::kUnsupported) << c.name;
    EXPECT_FALSE(c.known);
  }
}

TEST(Cts, KnownListTurnsErrorsIntoUnsupported) {
  auto plain = run("cts-test-erroring", "^Add/f32/");
  ASSERT_FALSE(plain.cases.empty());
  for (const auto& c : plain.cases) EXPECT_EQ(c.outcome, cts::Outcome::kError) << c.name;

  auto known = run("cts-test-erroring", "^Add/f32/", {{"*", "expected: skeleton device"}});
  for (const auto& c : known.cases) {
    EXPECT_EQ(c.outcome, cts::Outcome::kUnsupported) << c.name;
    EXPECT_TRUE(c.known);
    EXPECT_NE(c.detail.find("skeleton device"), std::string::npos) << c.detail;
  }
  // Entries apply per case: only the listed one is excused.
  auto one = run("cts-test-erroring", "^Add/f32/", {{"Add/f32/same", "no broadcasting yet"}});
  for (const auto& c : one.cases)
    EXPECT_EQ(c.outcome,
              c.name == "Add/f32/same" ? cts::Outcome::kUnsupported : cts::Outcome::kError)
        << c.name;
}

TEST(Cts, KnownFileFormat) {
  testing::TempDir dir;
  auto good =
      dir.write("d.known", "# comment\n\n*  expected: skeleton device\nConv/*\tno conv  # x\n");
  auto k = cts::read_known_file(good.string());
  ASSERT_TRUE(k.has_value()) << k.status().message();
  ASSERT_EQ(k->size(), 2u);
  EXPECT_EQ((*k)[0].pattern, "*");
  EXPECT_EQ((*k)[0].reason, "expected: skeleton device");
  EXPECT_EQ((*k)[1].reason, "no conv");
  auto bad = dir.write("bad.known", "Conv/*\n");
  EXPECT_TRUE(testing::failed_with(cts::read_known_file(bad.string()), {"bad.known:1", "reason"}));
  EXPECT_TRUE(testing::failed_with(cts::read_known_file((dir / "missing").string()), {"missing"}));
}

TEST(Cts, GlobMatch) {
  EXPECT_TRUE(cts::glob_match("*", "Add/f32/same"));
  EXPECT_TRUE(cts::glob_match("Add/*", "Add/f32/same"));
  EXPECT_TRUE(cts::glob_match("*/f16*", "Relu/f16"));
  EXPECT_TRUE(cts::glob_match("Re?u/*", "Relu/f16"));
  EXPECT_FALSE(cts::glob_match("Add/*", "AddX/f32"));
  EXPECT_FALSE(cts::glob_match("Add", "Add/f32"));
}

TEST(Cts, CompareReportsNumbersAndNaNPositions) {
  Tensor e = Tensor::from_vector<float>({1, 2, NAN, 4}, {4});
  cts::CaseResult r;
  EXPECT_TRUE(cts::compare_output(e, e, {1e-5, 1e-4}, r));
  Tensor a = Tensor::from_vector<float>({1, 2.5f, NAN, 4}, {4});
  r = {};
  EXPECT_FALSE(cts::compare_output(a, e, {1e-5, 1e-4}, r));
  EXPECT_EQ(r.first_bad_index, 1);
  EXPECT_NEAR(r.max_abs_error, 0.5, 1e-9);
  EXPECT_NEAR(r.max_rel_error, 0.25, 1e-9);
  Tensor n = Tensor::from_vector<float>({1, 2, 3, 4}, {4});
  r = {};
  EXPECT_FALSE(cts::compare_output(n, e, {1, 1}, r));  // a number where the reference has NaN
  EXPECT_EQ(r.first_bad_index, 2);
  Tensor i1 = Tensor::from_vector<int64_t>({1, 2}, {2}),
         i2 = Tensor::from_vector<int64_t>({1, 3}, {2});
  r = {};
  EXPECT_FALSE(cts::compare_output(i2, i1, cts::tolerance_for(DType::kI64, "Add"), r));
  r = {};
  EXPECT_FALSE(cts::compare_output(i1, e, {1, 1}, r));  // dtype/shape mismatch
}

TEST(Cts, EveryOpOfTheTableIsListed) {
  auto ops = cts::op_cases();
  EXPECT_EQ(ops.size(), OpRegistry::global().all().size());
  std::set<std::string> names;
  for (const auto& oc : ops)
    for (const auto& c : oc.cases)
      EXPECT_TRUE(names.insert(c.name).second) << "duplicate " << c.name;
}

}  // namespace
}  // namespace ferrite
