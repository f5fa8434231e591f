#include "ir/graph.h"

#include <cstdio>

namespace ferrite {

const char* attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::kInt: return "int";
    case AttrType::kFloat: return "float";
    case AttrType::kString: return "string";
    case AttrType::kInts: return "ints";
    case AttrType::kFloats: return "floats";
    case AttrType::kStrings: return "strings";
    case AttrType::kTensor: return "tensor";
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
    case AttrType::kInt: return std::to_string(i());
    case AttrType::kFloat: return format_float(f());
    case AttrType::kString: return "\"" + s() + "\"";
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
    case AttrType::kTensor: return "<" + t().type_string() + ">";
  }
  return "?";
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
std::string Node::describe() const { return "node '" + name + "' (" + op_type + ")"; }

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
