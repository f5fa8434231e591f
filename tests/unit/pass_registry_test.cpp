// The pass table that the pass files fill (FERRITE_REGISTER_PASSES, passes/pass.h): every pass
// reaches the registry through the static library, and the slots give the default pipeline its
// order.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "passes/pass.h"
#include "runtime/device.h"

namespace ferrite {
namespace {

TEST(PassRegistry, HoldsEveryPassFileOnce) {
  std::set<std::string> names;
  for (const PassInfo& p : PassRegistry::global().all()) {
    EXPECT_TRUE(names.insert(p.name).second) << p.name;
    EXPECT_FALSE(p.description.empty()) << p.name;
    auto pass = p.create();
    ASSERT_TRUE(pass) << p.name;
    EXPECT_EQ(pass->name(), p.name);  // the name the pipeline logs and errors use
  }
  // One per pass file; a file the build failed to collect would be missing here.
  for (const char* name :
       {"remove-noops", "algebraic-simplification", "constant-folding",
        "common-subexpression-elimination", "fold-conv-batchnorm", "fuse-conv-activation",
        "fuse-layernorm", "fuse-gelu", "fuse-attention", "fuse-matmul-epilogue",
        "dead-code-elimination", "convert-precision-bf16", "convert-precision-fp16",
        "fold-batched-matmul-reshapes", "narrow-attention-precision", "transpose-before-layernorm",
        "fold-attention-layout", "fold-gqa-expand"})
    EXPECT_TRUE(names.count(name)) << name;
}

// The order that the reasons next to each slot argue for. A subsequence, so that a pass added to
// the pipeline needs no edit here.
TEST(PassRegistry, DefaultPipelineKeepsItsOrder) {
  const std::vector<std::string> expected = {"remove-noops",
                                             "algebraic-simplification",
                                             "constant-folding",
                                             "common-subexpression-elimination",
                                             "remove-noops",
                                             "fold-batched-matmul-reshapes",
                                             "fold-conv-batchnorm",
                                             "fuse-conv-activation",
                                             "fuse-layernorm",
                                             "transpose-before-layernorm",
                                             "fuse-gelu",
                                             "fuse-attention",
                                             "fuse-matmul-epilogue",
                                             "dead-code-elimination"};
  std::vector<std::string> pipeline = default_pipeline();
  auto it = pipeline.begin();
  for (const std::string& name : expected) {
    it = std::find(it, pipeline.end(), name);
    ASSERT_NE(it, pipeline.end()) << name << " missing or out of order";
    ++it;
  }
  EXPECT_EQ(pipeline.back(), "dead-code-elimination");
  // Precision conversion runs only when a session asks for it, after the device's passes.
  EXPECT_EQ(std::count(pipeline.begin(), pipeline.end(), "convert-precision-bf16"), 0);
  // A device that wants it lists it (cuda, after fuse-attention).
  EXPECT_EQ(std::count(pipeline.begin(), pipeline.end(), "narrow-attention-precision"), 0);
}

TEST(PassRegistry, ListsThePipelineFirstInItsOrder) {
  std::vector<std::string> listed, first_runs;
  for (const PassInfo& p : PassRegistry::global().all())
    if (!p.pipeline.empty() && !p.opt_in) listed.push_back(p.name);
  for (const std::string& name : default_pipeline())
    if (std::find(first_runs.begin(), first_runs.end(), name) == first_runs.end())
      first_runs.push_back(name);
  EXPECT_EQ(listed, first_runs);
  const auto& all = PassRegistry::global().all();
  EXPECT_TRUE(all.back().pipeline.empty()) << all.back().name;
}

std::vector<std::string> plan_of(const std::string& device) {
  auto d = DeviceRegistry::global().create(device);
  EXPECT_TRUE(d) << d.status().message();
  if (!d) return {};
  auto passes = default_passes(**d);
  EXPECT_TRUE(passes) << passes.status().message();
  return passes ? *passes : std::vector<std::string>{};
}

// Devices declare a PassPlan; the pipeline follows from the registry's slots. The built-in
// devices get what they used to list by hand.
TEST(PassRegistry, DevicePipelinesFollowTheirPlans) {
  std::vector<std::string> base = default_pipeline();
  EXPECT_TRUE(plan_of("reference").empty());  // the oracle runs graphs as given
  EXPECT_EQ(plan_of("null"), base);
  std::vector<std::string> cpu = base;
  cpu.insert(std::find(cpu.begin(), cpu.end(), "dead-code-elimination"), "layout-channels-last");
  EXPECT_EQ(plan_of("cpu"), cpu);
  if (DeviceRegistry::global().create("cuda")) {  // built with the CUDA toolkit
    std::vector<std::string> cuda = base;
    cuda.insert(std::find(cuda.begin(), cuda.end(), "dead-code-elimination"),
                "layout-channels-last{weights=last dtypes=bf16+f16}");
    cuda.insert(std::find(cuda.begin(), cuda.end(), "fuse-attention") + 1,
                "narrow-attention-precision");
    cuda.insert(std::find(cuda.begin(), cuda.end(), "narrow-attention-precision") + 1,
                "fold-attention-layout");
    EXPECT_EQ(plan_of("cuda"), cuda);
  }
}

// A device that does not run a library op loses the passes producing it, and only those; a
// plan naming something that is not an opt-in pass is an error.
TEST(PassRegistry, DevicePipelineLeavesOutPassesOfOpsTheDeviceLacks) {
  auto no_fused = [](const std::string& op) { return op == "ferrite.Attention"; };
  auto passes = device_pipeline(no_fused, {});
  ASSERT_TRUE(passes) << passes.status().message();
  std::vector<std::string> want;
  for (const std::string& p : default_pipeline())
    if (p != "fuse-matmul-epilogue" && p != "fuse-conv-activation") want.push_back(p);
  EXPECT_EQ(*passes, want);
  auto none = [](const std::string&) { return false; };
  for (const char* bad : {"fuse-gelu", "no-such-pass", "convert-precision-bf16"}) {
    auto r = device_pipeline(none, {bad});
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.status().message().find("not an opt-in pass"), std::string::npos);
  }
}

}  // namespace
}  // namespace ferrite
