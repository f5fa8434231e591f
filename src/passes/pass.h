// Graph passes: named, composable graph-to-graph transformations. One pass per file; each file
// registers its passes where they are defined (FERRITE_REGISTER_PASSES below), including their
// places in the default pipeline, so adding a pass is adding its file.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace ferrite {

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string name() const = 0;
  // Returns whether the graph changed. A pass leaves the graph verified and typed.
  virtual Expected<bool> run(Graph& g) = 0;
};

// The default pipeline runs in stages, in this order. Within a stage passes run by their `order`
// (unique within the stage, spaced by 10 so that a new pass fits between two); where the place
// matters, the pass file says why next to its slot. `ferrite info --list-passes` prints the result.
enum class Stage {
  // Local cleanups that expose patterns: identities, algebra, constant folding, CSE.
  kSimplify,
  // Pattern rewrites into bigger ops. After kSimplify: they match constants as initializers and
  // want clean subgraphs.
  kRewrite,
  // Removes what the rewrites left unused.
  kCleanup,
};

struct PipelineSlot {
  Stage stage;
  int order;
};

// Options of a pass that takes them, written after its name in a pipeline:
// `shard-tensor-parallel{rank=0 size=2}`.
using PassOptions = std::map<std::string, std::string>;

struct PassInfo {
  std::string name;  // kebab-case: `--passes`, `ferrite info --after NAME`
  std::string description;
  std::function<std::unique_ptr<Pass>()> create;
  // Where the pass runs in the default pipeline, once per slot (remove-noops runs twice); none:
  // only when a pipeline names it.
  std::vector<PipelineSlot> pipeline = {};
  // For a pass with options: makes it from them (an error names a bad or missing option).
  std::function<Expected<std::unique_ptr<Pass>>(const PassOptions&)> create_with = {};
  // Library ops the pass rewrites into ("ferrite.FusedMatMul": ops the shared lowering does not
  // generate kernels for). A device's pipeline leaves the pass out unless the device runs them
  // all (device_pipeline below).
  std::vector<std::string> produces = {};
  // Slots that run only in the pipeline of a device that asks for the pass.
  bool opt_in = false;
  // Decides by the dtypes values are stored in: when a Session stores float32 tensors in a low
  // dtype, convert-precision-* runs before the first such pass of its pipeline (and after the
  // fusion rewrites, whose patterns match the float32 graph), not at the end.
  bool after_precision = false;
};

class PassRegistry {
 public:
  // Every pass of src/passes, those of the default pipeline first in its order, then the rest by
  // name.
  static const PassRegistry& global();
  void add(PassInfo info) { passes_.push_back(std::move(info)); }
  const PassInfo* find(const std::string& name) const;
  const std::vector<PassInfo>& all() const { return passes_; }

 private:
  std::vector<PassInfo> passes_;
};

// Defines the function that registers the passes of one pass file, at namespace ferrite scope:
//   FERRITE_REGISTER_PASSES(fuse_gelu) { r.add({"fuse-gelu", ..., {{Stage::kRewrite, 40}}}); }
// The build collects these lines from src/passes/*.cpp into the function that fills
// PassRegistry::global() (src/CMakeLists.txt, cmake/collect_passes.cmake). A static registration
// object would not do: nothing references it, so the linker drops it from the static library.
#define FERRITE_REGISTER_PASSES(id) void register_passes_##id(::ferrite::PassRegistry& r)

// The default optimisation pipeline, in order: the registered slots sorted by stage and order,
// without the opt-in passes.
std::vector<std::string> default_pipeline();

// A device's pipeline, from what the device declares: the default pipeline without the passes
// producing a library op that `runs_op` refuses, plus the opt-in passes `opt_in` names (each a
// spec, "layout-channels-last{dtypes=bf16}"), each at its registered slot. An opt-in name that is
// not a registered opt-in pass is an error: a device's declaration is checked, not ignored.
Expected<std::vector<std::string>> device_pipeline(
    const std::function<bool(const std::string& op)>& runs_op,
    const std::vector<std::string>& opt_in);

struct PipelineOptions {
  // Called after each pass with its name and whether it changed the graph.
  std::function<void(const std::string& pass, bool changed, const Graph& g)> after_pass;
  bool verify_each = true;
};
// Runs the named passes in order; an unknown name is an error listing the known ones.
Status run_pipeline(Graph& g, const std::vector<std::string>& passes,
                    const PipelineOptions& opts = {});

// The pass that stores float32 tensors in `low` (kBF16 or kF16): "convert-precision-bf16" /
// "convert-precision-fp16" (passes/convert_precision.cpp).
std::string precision_pass_name(DType low);

// Helper for passes: users of each value (node, input index), for the current graph.
struct Use {
  Node* node;
  int input;
};
std::unordered_map<const Value*, std::vector<Use>> compute_uses(const Graph& g);
bool is_graph_output(const Graph& g, const Value* v);

}  // namespace ferrite
