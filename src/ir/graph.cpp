#include "ir/graph.h"

#include <cstdio>
#include <unordered_map>

namespace ferrite {

const char* attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::kInt:
      return "int";
    case AttrType::kFloat:
      return "float";
    case AttrType::kString:
      return "string";
    case AttrType::kInts:
      return "ints";
    case AttrType::kFloats:
      return "floats";
    case AttrType::kStrings:
      return "strings";
    case AttrType::kTensor:
      return "tensor";
    case AttrType::kGraph:
      return "graph";
    case AttrType::kGraphs:
      return "graphs";
  }
  return "?";
}

namespace {
std::string format_float(float f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(f));
  return buf;
}
}  // namespace

std::string Attribute::to_string() const {
  switch (type()) {
    case AttrType::kInt:
      return std::to_string(i());
    case AttrType::kFloat:
      return format_float(f());
    case AttrType::kString:
      return "\"" + s() + "\"";
    case AttrType::kInts: {
      std::string r = "[";
      for (size_t k = 0; k < ints().size(); ++k) r += (k ? "," : "") + std::to_string(ints()[k]);
      return r + "]";
    }
    case AttrType::kFloats: {
      std::string r = "[";
      for (size_t k = 0; k < floats().size(); ++k) r += (k ? "," : "") + format_float(floats()[k]);
      return r + "]";
    }
    case AttrType::kStrings: {
      std::string r = "[";
      for (size_t k = 0; k < strings().size(); ++k) r += (k ? ",\"" : "\"") + strings()[k] + "\"";
      return r + "]";
    }
    case AttrType::kTensor:
      return "<" + t().type_string() + ">";
    // The printer shows the body itself (print_graph); this is the one-line form.
    case AttrType::kGraph:
      return "<graph " + g().name + ">";
    case AttrType::kGraphs:
      return "<" + std::to_string(graphs().size()) + " graphs>";
  }
  return "?";
}

SubgraphAttr::SubgraphAttr(std::unique_ptr<Graph> g) : g_(std::move(g)) {
  FERRITE_CHECK(g_);
}
SubgraphAttr::SubgraphAttr(const SubgraphAttr& o) : g_(o.g_->clone()) {}
SubgraphAttr& SubgraphAttr::operator=(const SubgraphAttr& o) {
  if (this != &o) g_ = o.g_->clone();
  return *this;
}
SubgraphAttr::SubgraphAttr(SubgraphAttr&&) noexcept = default;
SubgraphAttr& SubgraphAttr::operator=(SubgraphAttr&&) noexcept = default;
SubgraphAttr::~SubgraphAttr() = default;

std::vector<Graph*> Node::subgraphs() const {
  std::vector<Graph*> out;
  for (const auto& [name, a] : attrs) {
    if (a.type() == AttrType::kGraph) out.push_back(&a.g());
    if (a.type() == AttrType::kGraphs)
      for (const auto& sg : a.graphs()) out.push_back(&sg.graph());
  }
  return out;
}

size_t Node::num_captured_inputs() const {
  for (const auto& [name, a] : attrs) {
    if (a.type() == AttrType::kGraph) return a.g().captures().size();
    if (a.type() == AttrType::kGraphs && !a.graphs().empty())
      return a.graphs()[0].graph().captures().size();
  }
  return 0;
}

std::unique_ptr<Graph> Graph::clone() const {
  auto out = std::make_unique<Graph>();
  out->name = name;
  out->deferred_error = deferred_error;
  out->opsets_ = opsets_;
  out->name_counter_ = name_counter_;
  std::unordered_map<const Value*, Value*> map;
  auto value = [&](const Value* v) -> Value* {
    if (!v) return nullptr;
    auto it = map.find(v);
    if (it != map.end()) return it->second;
    Value* c = out->add_value(v->name, v->type);
    c->producer_output = v->producer_output;
    c->constant = v->constant;
    c->is_graph_input = v->is_graph_input;
    c->sym_value = v->sym_value;
    map.emplace(v, c);
    return c;
  };
  for (const Value* v : inputs_) out->inputs_.push_back(value(v));
  for (const Value* v : captures_) out->captures_.push_back(value(v));
  for (const Value* v : initializers_) out->initializers_.push_back(value(v));
  for (const auto& n : nodes_) {
    Node* c = out->add_node(n->op_type, n->name);
    c->domain = n->domain;
    c->opset = n->opset;
    c->attrs = n->attrs;  // subgraphs are deep-copied by SubgraphAttr
    c->schema = n->schema;
    for (const Value* v : n->inputs) c->inputs.push_back(value(v));
    for (const Value* v : n->outputs) {
      Value* o = value(v);
      if (o) o->producer = c;
      c->outputs.push_back(o);
    }
  }
  for (const Value* v : outputs_) out->outputs_.push_back(value(v));
  return out;
}

int64_t Node::attr_int(const std::string& n, int64_t def) const {
  auto it = attrs.find(n);
  return it != attrs.end() && it->second.type() == AttrType::kInt ? it->second.i() : def;
}
float Node::attr_float(const std::string& n, float def) const {
  auto it = attrs.find(n);
  return it != attrs.end() && it->second.type() == AttrType::kFloat ? it->second.f() : def;
}
std::string Node::attr_string(const std::string& n, const std::string& def) const {
  auto it = attrs.find(n);
  return it != attrs.end() && it->second.type() == AttrType::kString ? it->second.s() : def;
}
std::vector<int64_t> Node::attr_ints(const std::string& n, std::vector<int64_t> def) const {
  auto it = attrs.find(n);
  return it != attrs.end() && it->second.type() == AttrType::kInts ? it->second.ints() : def;
}
std::vector<float> Node::attr_floats(const std::string& n, std::vector<float> def) const {
  auto it = attrs.find(n);
  return it != attrs.end() && it->second.type() == AttrType::kFloats ? it->second.floats() : def;
}
std::string Node::describe() const {
  return "node '" + name + "' (" + op_type + ")";
}

Value* Graph::add_value(std::string name, TensorType type) {
  auto v = std::make_unique<Value>();
  v->name = std::move(name);
  v->type = std::move(type);
  Value* p = v.get();
  if (!p->name.empty()) by_name_[p->name] = p;
  values_.push_back(std::move(v));
  return p;
}

Node* Graph::add_node(std::string op_type, std::string name) {
  auto n = std::make_unique<Node>();
  n->op_type = std::move(op_type);
  n->name = std::move(name);
  Node* p = n.get();
  nodes_.push_back(std::move(n));
  return p;
}

Value* Graph::find_value(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

}  // namespace ferrite
