#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

#include "passes/pass.h"

namespace ferrite {

// Generated from the FERRITE_REGISTER_PASSES lines of src/passes/*.cpp (pass_registry.cpp in the
// build tree).
void register_all_passes(PassRegistry& r);

namespace {

bool runs_before(const PipelineSlot& a, const PipelineSlot& b) {
  return std::tie(a.stage, a.order) < std::tie(b.stage, b.order);
}

// (slot, pass name) for every slot of every pass, sorted into the default pipeline.
std::vector<std::pair<PipelineSlot, std::string>> pipeline_slots(const std::vector<PassInfo>& all) {
  std::vector<std::pair<PipelineSlot, std::string>> slots;
  for (const auto& p : all)
    for (const PipelineSlot& s : p.pipeline) slots.emplace_back(s, p.name);
  std::sort(slots.begin(), slots.end(),
            [](const auto& a, const auto& b) { return runs_before(a.first, b.first); });
  return slots;
}

// Pipeline passes in the order of their first slot, then the others by name.
bool listed_before(const PassInfo& a, const PassInfo& b) {
  if (a.pipeline.empty() || b.pipeline.empty())
    return a.pipeline.empty() == b.pipeline.empty() ? a.name < b.name : b.pipeline.empty();
  return runs_before(*std::min_element(a.pipeline.begin(), a.pipeline.end(), runs_before),
                     *std::min_element(b.pipeline.begin(), b.pipeline.end(), runs_before));
}

}  // namespace

const PassRegistry& PassRegistry::global() {
  static const PassRegistry registry = [] {
    PassRegistry r;
    register_all_passes(r);
    // The files register in the order the build happens to list them.
    std::sort(r.passes_.begin(), r.passes_.end(), listed_before);
    auto slots = pipeline_slots(r.passes_);
    for (size_t i = 0; i + 1 < slots.size(); ++i)  // else two passes claim one slot
      FERRITE_CHECK(runs_before(slots[i].first, slots[i + 1].first));
    std::set<std::string> names;
    for (const PassInfo& p : r.passes_) FERRITE_CHECK(names.insert(p.name).second);
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
  std::vector<std::string> names;
  for (auto& [slot, name] : pipeline_slots(PassRegistry::global().all()))
    names.push_back(std::move(name));
  return names;
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
