#include "ops/interpreter.h"

#include <climits>

#include "ops/context.h"
#include "ops/op_schema.h"

namespace ferrite {

GraphInterpreter::GraphInterpreter(const Graph& g) : graph_(g) {
  auto slot = [&](const Value* v) {
    if (v && !slots_.count(v)) slots_.emplace(v, static_cast<int>(slots_.size()));
  };
  for (const Value* v : g.inputs()) slot(v);
  for (const Value* v : g.captures()) slot(v);
  for (const Value* v : g.initializers()) slot(v);
  for (const auto& n : g.nodes()) {
    for (const Value* v : n->inputs) slot(v);
    for (const Value* v : n->outputs) slot(v);
  }
  for (const Value* v : g.outputs()) slot(v);
  // Last node index that reads each slot, so intermediates are freed early.
  last_use_.assign(slots_.size(), -1);
  for (size_t i = 0; i < g.nodes().size(); ++i)
    for (const Value* v : g.nodes()[i]->inputs)
      if (v) last_use_[slots_.at(v)] = static_cast<int>(i);
  for (const Value* v : g.outputs()) last_use_[slots_.at(v)] = INT32_MAX;
}

Expected<std::vector<Tensor>> GraphInterpreter::run(const std::vector<Tensor>& inputs,
                                                    const Hooks* hooks) const {
  const size_t nin = graph_.inputs().size(), ncap = graph_.captures().size();
  if (inputs.size() != nin + ncap)
    return err("graph '", graph_.name, "' takes ", nin + ncap, " inputs, got ", inputs.size());
  std::vector<Tensor> values(slots_.size());
  for (size_t i = 0; i < nin; ++i) values[slots_.at(graph_.inputs()[i])] = inputs[i];
  for (size_t i = 0; i < ncap; ++i) values[slots_.at(graph_.captures()[i])] = inputs[nin + i];
  for (const Value* v : graph_.initializers())
    if (!values[slots_.at(v)].defined()) values[slots_.at(v)] = *v->constant;
  const auto& nodes = graph_.nodes();
  for (size_t ni = 0; ni < nodes.size(); ++ni) {
    const Node& node = *nodes[ni];
    if (hooks && hooks->before) hooks->before(ni);
    std::vector<const Tensor*> ins;
    for (const Value* v : node.inputs) {
      if (!v) {
        ins.push_back(nullptr);
        continue;
      }
      const Tensor& t = values[slots_.at(v)];
      if (!t.defined()) return err(node.describe(), ": input '", v->name, "' has no value");
      ins.push_back(&t);
    }
    std::vector<Tensor> outs(node.outputs.size());
    KernelContext ctx(node, std::move(ins), outs);
    FERRITE_RETURN_IF_ERROR(node.schema->kernel(ctx));
    if (hooks && hooks->after) hooks->after(ni, node);
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const Value* v = node.outputs[k];
      if (!v) continue;
      if (!outs[k].defined()) return err(node.describe(), ": kernel did not produce output ", k);
      FERRITE_RETURN_IF_ERROR(check_inferred(node, *v, outs[k]));
      values[slots_.at(v)] = std::move(outs[k]);
    }
    for (const Value* v : node.inputs)
      if (v && last_use_[slots_.at(v)] == static_cast<int>(ni)) values[slots_.at(v)] = Tensor();
  }
  std::vector<Tensor> result;
  for (const Value* v : graph_.outputs()) {
    const Tensor& t = values[slots_.at(v)];
    if (!t.defined()) return err("graph '", graph_.name, "': output '", v->name, "' has no value");
    result.push_back(t);
  }
  return result;
}

Status GraphInterpreter::check_inferred(const Node& node, const Value& v, const Tensor& t) {
  if (t.kind() != v.type.kind || (!t.is_tensor() && t.dtype() != v.type.dtype))
    return err(node.describe(), ": output '", v.name, "' is ", t.type_string(),
               " but inference said ", v.type.to_string());
  if (!t.is_tensor()) return Status::ok();  // element shapes may vary along a sequence
  if (t.dtype() != v.type.dtype)
    return err(node.describe(), ": output '", v.name, "' has dtype ", dtype_name(t.dtype()),
               " but inference said ", dtype_name(v.type.dtype));
  const Shape& s = v.type.shape;
  if (!s.rank_known()) return Status::ok();
  if (s.rank() != t.rank())
    return err(node.describe(), ": output '", v.name, "' has shape ", dims_to_string(t.dims()),
               " but inference said ", s.to_string());
  for (size_t d = 0; d < s.rank(); ++d) {
    auto sv = s[d].value();
    if (sv && *sv != t.dim(d))
      return err(node.describe(), ": output '", v.name, "' has shape ", dims_to_string(t.dims()),
                 " but inference said ", s.to_string());
  }
  return Status::ok();
}

}  // namespace ferrite
