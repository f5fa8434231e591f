// Structural checks on a Graph. Iterative (no recursion) so that very deep graphs are fine.
#include <unordered_map>
#include <unordered_set>

#include "ir/graph.h"

namespace ferrite {

Status verify_graph(const Graph& g) {
  std::unordered_set<const Value*> defined;
  std::unordered_set<std::string> names;
  auto define = [&](const Value* v, const std::string& who) -> Status {
    if (!v) return Status::ok();
    if (!defined.insert(v).second)
      return err("value '", v->name, "' is defined more than once (", who, ")");
    if (!v->name.empty() && !names.insert(v->name).second)
      return err("two values share the name '", v->name, "' (", who, ")");
    return Status::ok();
  };
  for (const Value* v : g.inputs()) {
    FERRITE_RETURN_IF_ERROR(define(v, "graph input"));
    if (v->producer) return err("graph input '", v->name, "' has a producer");
  }
  for (const Value* v : g.initializers()) {
    if (defined.count(v)) continue;  // an initializer may double as a graph input (IR < 4 style)
    FERRITE_RETURN_IF_ERROR(define(v, "initializer"));
    if (!v->constant) return err("initializer '", v->name, "' has no data");
  }
  for (const auto& node : g.nodes()) {
    for (const Value* in : node->inputs) {
      if (in && !defined.count(in))
        return err(node->describe(), ": input '", in->name,
                   "' is not defined before use (undefined value or cycle)");
    }
    for (size_t i = 0; i < node->outputs.size(); ++i) {
      const Value* out = node->outputs[i];
      if (!out) continue;
      if (out->producer != node.get() || out->producer_output != static_cast<int>(i))
        return err(node->describe(), ": output '", out->name, "' has an inconsistent producer");
      FERRITE_RETURN_IF_ERROR(define(out, node->describe()));
    }
  }
  for (const Value* v : g.outputs()) {
    if (!defined.count(v)) return err("graph output '", v->name, "' is never defined");
    if (v->type.dtype == DType::kUndefined)
      return err("graph output '", v->name, "' has no inferred dtype");
  }
  for (const auto& node : g.nodes()) {
    for (const Value* out : node->outputs)
      if (out && out->type.dtype == DType::kUndefined)
        return err(node->describe(), ": output '", out->name, "' has no inferred dtype");
  }
  return Status::ok();
}

}  // namespace ferrite
