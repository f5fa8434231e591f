// Graph mutation primitives used by passes.
#include <algorithm>
#include <unordered_set>

#include "ir/graph.h"

namespace ferrite {

bool Graph::replace_all_uses(Value* old, Value* repl) {
  FERRITE_CHECK(old && repl && old != repl);
  bool old_is_output = std::find(outputs_.begin(), outputs_.end(), old) != outputs_.end();
  if (old_is_output) {
    bool repl_pinned = repl->is_graph_input || !repl->producer ||
                       std::find(outputs_.begin(), outputs_.end(), repl) != outputs_.end();
    if (repl_pinned) return false;
    // The user-visible output name moves to the replacement.
    std::string name = old->name;
    rename_value(old, unique_name(name + "__replaced"));
    rename_value(repl, name);
    for (auto& o : outputs_)
      if (o == old) o = repl;
  }
  for (auto& n : nodes_)
    for (auto& in : n->inputs)
      if (in == old) in = repl;
  return true;
}

void Graph::erase_nodes(const std::vector<const Node*>& dead) {
  if (dead.empty()) return;
  std::unordered_set<const Node*> set(dead.begin(), dead.end());
  for (auto& n : nodes_) {
    if (!set.count(n.get())) continue;
    for (Value* v : n->outputs)
      if (v) v->producer = nullptr, v->producer_output = -1;
  }
  nodes_.erase(
      std::remove_if(nodes_.begin(), nodes_.end(),
                     [&](const std::unique_ptr<Node>& n) { return set.count(n.get()) != 0; }),
      nodes_.end());
}

void Graph::compact() {
  std::unordered_set<const Value*> used;
  for (const Value* v : inputs_) used.insert(v);
  for (const Value* v : captures_) used.insert(v);
  for (const Value* v : outputs_) used.insert(v);
  for (const auto& n : nodes_) {
    for (const Value* v : n->inputs) used.insert(v);
    for (const Value* v : n->outputs) used.insert(v);
  }
  initializers_.erase(std::remove_if(initializers_.begin(), initializers_.end(),
                                     [&](const Value* v) { return !used.count(v); }),
                      initializers_.end());
  for (const Value* v : initializers_) used.insert(v);
  for (auto it = by_name_.begin(); it != by_name_.end();) {
    if (!used.count(it->second))
      it = by_name_.erase(it);
    else
      ++it;
  }
  values_.erase(
      std::remove_if(values_.begin(), values_.end(),
                     [&](const std::unique_ptr<Value>& v) { return !used.count(v.get()); }),
      values_.end());
}

std::string Graph::unique_name(const std::string& prefix) {
  for (;;) {
    std::string name = prefix + "_" + std::to_string(name_counter_++);
    if (!by_name_.count(name)) return name;
  }
}

void Graph::rename_value(Value* v, const std::string& name) {
  auto it = by_name_.find(v->name);
  if (it != by_name_.end() && it->second == v) by_name_.erase(it);
  v->name = name;
  if (!name.empty()) by_name_[name] = v;
}

Value* Graph::add_initializer(const std::string& name_prefix, Tensor data) {
  Value* v = add_value(unique_name(name_prefix), TensorType{data.dtype(), Shape::of(data.dims())});
  v->constant = std::move(data);
  initializers_.push_back(v);
  return v;
}

void Graph::move_before(Node* node, const Node* before) {
  auto from = std::find_if(nodes_.begin(), nodes_.end(),
                           [&](const std::unique_ptr<Node>& n) { return n.get() == node; });
  FERRITE_CHECK(from != nodes_.end());
  std::unique_ptr<Node> owned = std::move(*from);
  nodes_.erase(from);
  auto to = std::find_if(nodes_.begin(), nodes_.end(),
                         [&](const std::unique_ptr<Node>& n) { return n.get() == before; });
  nodes_.insert(to, std::move(owned));
}

}  // namespace ferrite
