#include <algorithm>

#include "passes/pass.h"

namespace ferrite {

const PassRegistry& PassRegistry::global() {
  static const PassRegistry registry = [] {
    PassRegistry r;
    register_remove_noops(r);
    register_algebraic_simplification(r);
    register_constant_folding(r);
    register_common_subexpression_elimination(r);
    register_fold_conv_batchnorm(r);
    register_fuse_conv_activation(r);
    register_fuse_layernorm(r);
    register_fuse_gelu(r);
    register_fuse_attention(r);
    register_fuse_matmul_epilogue(r);
    register_convert_precision(r);
    register_dead_code_elimination(r);
    return r;
  }();
  return registry;
}

const PassInfo* PassRegistry::find(const std::string& name) const {
  for (const auto& p : passes_)
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<std::string> default_pipeline() {
  // remove-noops runs again after folding and CSE, which expose new identities. The rewrites
  // come after them (they match constants as initializers, and clean subgraphs): GELU and
  // LayerNorm first, attention before the epilogue fusion (which would otherwise take the
  // attention MatMuls), and the epilogue last so that it absorbs the fused Gelu. Convolutions
  // take their epilogue right after BatchNormalization folding, which needs the bare Conv.
  return {"remove-noops",
          "algebraic-simplification",
          "constant-folding",
          "common-subexpression-elimination",
          "remove-noops",
          "fold-conv-batchnorm",
          "fuse-conv-activation",
          "fuse-layernorm",
          "fuse-gelu",
          "fuse-attention",
          "fuse-matmul-epilogue",
          "dead-code-elimination"};
}

Status run_pipeline(Graph& g, const std::vector<std::string>& passes, const PipelineOptions& opts) {
  for (const auto& name : passes) {
    const PassInfo* info = PassRegistry::global().find(name);
    if (!info) {
      std::string known;
      for (const auto& p : PassRegistry::global().all())
        known += (known.empty() ? "" : ", ") + p.name;
      return err("unknown pass '", name, "' (known: ", known, ")");
    }
    auto pass = info->create();
    auto changed = pass->run(g);
    if (!changed) return changed.status().with_context("pass " + name);
    if (opts.verify_each) {
      Status st = verify_graph(g);
      if (!st) return err("internal error: graph invalid after pass ", name, ": ", st.message());
    }
    if (opts.after_pass) opts.after_pass(name, *changed, g);
  }
  return Status::ok();
}

std::unordered_map<const Value*, std::vector<Use>> compute_uses(const Graph& g) {
  std::unordered_map<const Value*, std::vector<Use>> uses;
  for (const auto& n : g.nodes())
    for (size_t i = 0; i < n->inputs.size(); ++i)
      if (n->inputs[i]) uses[n->inputs[i]].push_back({n.get(), static_cast<int>(i)});
  return uses;
}

bool is_graph_output(const Graph& g, const Value* v) {
  return std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
}

}  // namespace ferrite
