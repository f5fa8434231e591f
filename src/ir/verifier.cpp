// Structural checks on a Graph. Iterative (no recursion) so that very deep graphs are fine.
#include <unordered_map>
#include <unordered_set>

#include "ir/graph.h"

namespace ferrite {

namespace {
// Constant data must match the type that inference and the devices rely on.
Status check_constant_type(const Value& v) {
  if (!v.constant) return Status::ok();
  const Tensor& t = *v.constant;
  if (t.dtype() != v.type.dtype)
    return err("value '", v.name, "' holds ", t.type_string(), " data but is typed ",
               v.type.to_string());
  const Shape& s = v.type.shape;
  if (!s.rank_known()) return Status::ok();
  bool ok = s.rank() == t.rank();
  for (size_t d = 0; ok && d < s.rank(); ++d) ok = !s[d].value() || *s[d].value() == t.dim(d);
  if (!ok)
    return err("value '", v.name, "' holds ", t.type_string(), " data but is typed ",
               v.type.to_string());
  return Status::ok();
}

// A node's subgraphs bind their captures to the node's trailing inputs.
Status check_captures(const Node& node) {
  std::vector<Graph*> subs = node.subgraphs();
  if (subs.empty()) return Status::ok();
  size_t n = subs[0]->captures().size();
  if (n > node.inputs.size())
    return err(node.describe(), ": its subgraphs capture ", n, " values but it has ",
               node.inputs.size(), " inputs");
  size_t first = node.inputs.size() - n;
  for (const Graph* sg : subs) {
    if (sg->captures().size() != n)
      return err(node.describe(), ": its subgraphs capture different numbers of values");
    for (size_t i = 0; i < n; ++i) {
      const Value* c = sg->captures()[i];
      const Value* in = node.inputs[first + i];
      if (!c || !in) return err(node.describe(), ": a captured value is null");
      if (c->type.dtype != DType::kUndefined && c->type.dtype != in->type.dtype)
        return err(node.describe(), ": subgraph '", sg->name, "' captures '", c->name, "' as ",
                   dtype_name(c->type.dtype), " but the outer value '", in->name, "' is ",
                   dtype_name(in->type.dtype));
    }
  }
  return Status::ok();
}

Status verify_one(const Graph& g) {
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
    if (!v) return err("a graph input is null");
    FERRITE_RETURN_IF_ERROR(define(v, "graph input"));
    if (v->producer) return err("graph input '", v->name, "' has a producer");
    FERRITE_RETURN_IF_ERROR(check_constant_type(*v));
  }
  for (const Value* v : g.captures()) {
    if (!v) return err("a captured value is null");
    FERRITE_RETURN_IF_ERROR(define(v, "captured value"));
    if (v->producer) return err("captured value '", v->name, "' has a producer");
  }
  for (const Value* v : g.initializers()) {
    if (!v) return err("an initializer is null");
    if (defined.count(v)) continue;  // an initializer may double as a graph input (IR < 4 style)
    FERRITE_RETURN_IF_ERROR(define(v, "initializer"));
    if (!v->constant) return err("initializer '", v->name, "' has no data");
    if (v->producer) return err("initializer '", v->name, "' has a producer");
    FERRITE_RETURN_IF_ERROR(check_constant_type(*v));
  }
  for (const auto& node : g.nodes()) {
    if (!node) return err("the graph holds a null node");
    for (const Value* in : node->inputs) {
      if (in && !defined.count(in))
        return err(node->describe(), ": input '", in->name,
                   "' is not defined before use (undefined value or cycle)");
    }
    FERRITE_RETURN_IF_ERROR(check_captures(*node));
    for (size_t i = 0; i < node->outputs.size(); ++i) {
      const Value* out = node->outputs[i];
      if (!out) continue;
      if (out->producer != node.get() || out->producer_output != static_cast<int>(i))
        return err(node->describe(), ": output '", out->name, "' has an inconsistent producer");
      FERRITE_RETURN_IF_ERROR(define(out, node->describe()));
    }
  }
  if (g.outputs().empty()) return err("the graph has no outputs");
  // An If branch whose inference failed (Graph::deferred_error) is untyped past the failure.
  const bool typed = g.deferred_error.empty();
  for (const Value* v : g.outputs()) {
    if (!v) return err("a graph output is null");
    if (!defined.count(v)) return err("graph output '", v->name, "' is never defined");
    if (typed && v->type.dtype == DType::kUndefined)
      return err("graph output '", v->name, "' has no inferred dtype");
  }
  for (const auto& node : g.nodes()) {
    for (const Value* out : node->outputs)
      if (typed && out && out->type.dtype == DType::kUndefined)
        return err(node->describe(), ": output '", out->name, "' has no inferred dtype");
  }
  return Status::ok();
}
}  // namespace

// Subgraphs through a worklist: nesting depth never becomes stack depth.
Status verify_graph(const Graph& root) {
  std::vector<const Graph*> work{&root};
  while (!work.empty()) {
    const Graph* g = work.back();
    work.pop_back();
    Status s = verify_one(*g);
    if (!s.is_ok()) return g == &root ? s : s.with_context("subgraph '" + g->name + "'");
    if (!g->deferred_error.empty()) continue;  // its nested bodies may be untyped too
    for (const auto& node : g->nodes())
      for (const Graph* sg : node->subgraphs()) work.push_back(sg);
  }
  return Status::ok();
}

}  // namespace ferrite
