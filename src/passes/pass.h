// Graph passes: named, composable graph-to-graph transformations. One pass per file; each
// registers itself in the PassRegistry under a kebab-case name (`ferrite info --ir --after NAME`).
#pragma once

#include <functional>
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

struct PassInfo {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<Pass>()> create;
};

class PassRegistry {
 public:
  static const PassRegistry& global();
  void add(PassInfo info) { passes_.push_back(std::move(info)); }
  const PassInfo* find(const std::string& name) const;
  const std::vector<PassInfo>& all() const { return passes_; }

 private:
  std::vector<PassInfo> passes_;
};

// The default optimisation pipeline, in order.
std::vector<std::string> default_pipeline();

struct PipelineOptions {
  // Called after each pass with its name and whether it changed the graph.
  std::function<void(const std::string& pass, bool changed, const Graph& g)> after_pass;
  bool verify_each = true;
};
// Runs the named passes in order; an unknown name is an error listing the known ones.
Status run_pipeline(Graph& g, const std::vector<std::string>& passes,
                    const PipelineOptions& opts = {});

// Per-pass registration functions (one per pass file); PassRegistry::global() calls them.
void register_dead_code_elimination(PassRegistry& r);
void register_common_subexpression_elimination(PassRegistry& r);
void register_constant_folding(PassRegistry& r);
void register_remove_noops(PassRegistry& r);
void register_algebraic_simplification(PassRegistry& r);
void register_fold_conv_batchnorm(PassRegistry& r);
void register_fuse_conv_activation(PassRegistry& r);
void register_fuse_layernorm(PassRegistry& r);
void register_fuse_gelu(PassRegistry& r);
void register_fuse_attention(PassRegistry& r);
void register_fuse_matmul_epilogue(PassRegistry& r);
void register_convert_precision(PassRegistry& r);

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
