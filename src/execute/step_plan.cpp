#include "execute/step_plan.h"

#include <climits>
#include <cstdlib>

#include "ops/op_schema.h"

namespace ferrite {

bool log_enabled(const char* topic) {
  const char* v = std::getenv("FERRITE_LOG");
  return v && (std::string(v).find(topic) != std::string::npos || std::string(v) == "all");
}

// Unsigned, so never undefined; callers that take dims from a model check `too_large` first.
size_t byte_count(DType t, const std::vector<int64_t>& dims) {
  size_t n = dtype_size(t);
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

bool too_large(DType t, const std::vector<int64_t>& dims) {
  int64_t n = static_cast<int64_t>(dtype_size(t));
  for (int64_t d : dims)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return true;
  return false;
}

namespace {

bool is_shape_query(const Node& n) {
  return n.domain.empty() && (n.op_type == "Shape" || n.op_type == "Size");
}

void plan_liveness(const LoweredGraph& lg, StepPlan& p) {
  const size_t nb = lg.buffers.size();
  p.last_use.assign(nb, -1);
  for (size_t i = 0; i < lg.steps.size(); ++i) {
    const Step& s = lg.steps[i];
    for (int b : s.kind == Step::Kind::kKernel ? s.kernel.input_buffers : s.inputs)
      if (b >= 0) p.last_use[b] = static_cast<int>(i);
  }
  for (int b : lg.outputs) p.last_use[b] = INT32_MAX;
  p.dying.assign(lg.steps.size(), {});
  for (size_t b = 0; b < nb; ++b)
    if (p.last_use[b] >= 0 && p.last_use[b] < static_cast<int>(lg.steps.size()) &&
        lg.buffers[b].kind != Buffer::Kind::kOutput)
      p.dying[p.last_use[b]].push_back(static_cast<int>(b));
}

void plan_fixed(const LoweredGraph& lg, StepPlan& p) {
  const size_t nb = lg.buffers.size();
  p.fixed.assign(nb, false);
  p.fixed_step.assign(lg.steps.size(), false);
  for (size_t b = 0; b < nb; ++b) p.fixed[b] = lg.buffers[b].kind == Buffer::Kind::kConstant;
  for (size_t i = 0; i < lg.steps.size(); ++i) {
    const Step& s = lg.steps[i];
    if (s.kind == Step::Kind::kKernel) {
      bool d = true;
      for (int b : s.kernel.input_buffers) d = d && p.fixed[b];
      p.fixed[s.kernel.output_buffer] = d;
      continue;
    }
    bool d = !nondeterministic(*s.node);
    if (is_shape_query(*s.node) && !s.inputs.empty() && s.inputs[0] >= 0) {
      const Shape& sh = lg.buffers[s.inputs[0]].shape;
      d = sh.rank_known();
      for (size_t k = 0; d && k < sh.rank(); ++k) d = sh[k].is_known();
    } else {
      for (int b : s.inputs) d = d && (b < 0 || p.fixed[b]);
    }
    for (int b : s.outputs)
      if (b >= 0) p.fixed[b] = d && lg.buffers[b].kind == Buffer::Kind::kIntermediate;
    p.fixed_step[i] = d;
  }
}

}  // namespace

Expected<StepPlan> plan_steps(const LoweredGraph& lg, const LoadedModule* module,
                              const LibraryOps* library, void* library_state,
                              const std::string& device) {
  StepPlan p;
  for (const Step& s : lg.steps) {
    void* fn = nullptr;
    const LibraryOp* op = nullptr;
    std::string label;
    std::vector<std::string> nodes;
    if (s.kind == Step::Kind::kKernel) {
      fn = module ? module->symbol(s.kernel.name) : nullptr;
      if (!fn)
        return err(device, ": kernel '", s.kernel.name, "' is missing from the compiled module");
      label = s.kernel.name + ":";
      for (const std::string& n : s.kernel.source_nodes) label += " " + n;
      nodes = s.kernel.source_nodes;
    } else {
      if (library) op = library->find(*s.node, library_state);
      label = s.node->name.empty() ? s.node->op_type : s.node->name;
      nodes.push_back(s.node->name);
    }
    if (label.size() > 110) label = label.substr(0, 107) + "...";
    p.kernel_fns.push_back(fn);
    p.library.push_back(op);
    p.labels.push_back(std::move(label));
    p.nodes.push_back(std::move(nodes));
  }
  plan_liveness(lg, p);
  plan_fixed(lg, p);
  return p;
}

Expected<SymbolBinding> bind_symbols(const Graph& g, const LoweredGraph& lg,
                                     const std::vector<Tensor>& inputs, const std::string& device) {
  SymbolBinding b;
  for (size_t i = 0; i < g.inputs().size() && i < inputs.size(); ++i) {
    const Shape& s = g.inputs()[i]->type.shape;
    if (!s.rank_known()) continue;
    for (size_t d = 0; d < s.rank() && d < inputs[i].rank(); ++d)
      if (s[d].is_known() && s[d].expr().is_symbol()) {
        std::vector<std::string> names;
        s[d].expr().collect_symbols(names);
        b.names[names[0]] = inputs[i].dim(d);
      }
  }
  for (const auto& name : lg.symbols) {
    auto it = b.names.find(name);
    if (it == b.names.end())
      return err(device, ": shape symbol '", name, "' is not bound by any input");
    b.values.push_back(it->second);
  }
  return b;
}

Expected<std::vector<int64_t>> eval_dims(const std::vector<Dim>& dims, const SymBindings& bind,
                                         const std::string& device) {
  std::vector<int64_t> out;
  out.reserve(dims.size());
  for (const Dim& d : dims) {
    if (!d.is_known()) return err(device, ": cannot evaluate the unknown dim of a shape");
    auto v = d.expr().evaluate(bind);
    if (!v || *v < 0) return err(device, ": cannot evaluate dim ", d.to_string());
    out.push_back(*v);
  }
  return out;
}

}  // namespace ferrite
