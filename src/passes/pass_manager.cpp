#include <algorithm>
#include <map>
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
    if (!PassRegistry::global().find(name)->opt_in) names.push_back(std::move(name));
  return names;
}

Expected<std::vector<std::string>> device_pipeline(
    const std::function<bool(const std::string& op)>& runs_op,
    const std::vector<std::string>& opt_in) {
  const PassRegistry& reg = PassRegistry::global();
  std::map<std::string, std::string> wanted;  // opt-in pass name -> its spec
  for (const std::string& spec : opt_in) {
    const std::string name = spec.substr(0, spec.find('{'));
    const PassInfo* info = reg.find(name);
    if (!info || !info->opt_in || info->pipeline.empty())
      return err("'", name, "' is not an opt-in pass of the default pipeline");
    wanted[name] = spec;
  }
  std::vector<std::string> passes;
  for (auto& [slot, name] : pipeline_slots(reg.all())) {
    const PassInfo* info = reg.find(name);
    if (info->opt_in) {
      auto it = wanted.find(name);
      if (it != wanted.end()) passes.push_back(it->second);
      continue;
    }
    if (std::all_of(info->produces.begin(), info->produces.end(), runs_op)) passes.push_back(name);
  }
  return passes;
}

namespace {

// "name{k=v k2=v2}" -> the pass made from its options; "name" -> the pass.
Expected<std::unique_ptr<Pass>> make_pass(const std::string& spec) {
  const size_t brace = spec.find('{');
  const std::string name = spec.substr(0, brace);
  const PassInfo* info = PassRegistry::global().find(name);
  if (!info) {
    std::string known;
    for (const auto& p : PassRegistry::global().all())
      known += (known.empty() ? "" : ", ") + p.name;
    return err("unknown pass '", name, "' (known: ", known, ")");
  }
  if (brace == std::string::npos) return info->create();
  if (!info->create_with) return err("pass '", name, "' takes no options");
  if (spec.back() != '}') return err("pass '", spec, "': options end with '}'");
  PassOptions options;
  std::string body = spec.substr(brace + 1, spec.size() - brace - 2);
  for (size_t pos = 0; pos < body.size();) {
    size_t end = body.find(' ', pos);
    if (end == std::string::npos) end = body.size();
    std::string kv = body.substr(pos, end - pos);
    pos = end + 1;
    if (kv.empty()) continue;
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return err("pass '", name, "': option '", kv, "' is not key=value");
    options[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return info->create_with(options);
}

}  // namespace

Status run_pipeline(Graph& g, const std::vector<std::string>& passes, const PipelineOptions& opts) {
  for (const auto& name : passes) {
    FERRITE_ASSIGN_OR_RETURN(auto pass, make_pass(name));
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
