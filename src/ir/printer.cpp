#include <sstream>

#include "ir/graph.h"

namespace ferrite {

namespace {
std::string ref(const Value* v) {
  return v ? "%" + v->name : "_";
}
std::string type_of(const Value* v) {
  return v ? v->type.to_string() : "_";
}

// Prints the body of `g` (inputs to return) at the given indent; a node's subgraphs follow its
// line, one indent deeper. Nesting depth is bounded by the importer's protobuf recursion limit.
void print_body(std::ostringstream& os, const Graph& g, const PrintOptions& opts,
                const std::string& pad) {
  // Tolerates null entries: the printer is also used to show graphs that failed verification.
  for (const Value* v : g.inputs()) os << pad << "input " << ref(v) << ": " << type_of(v) << "\n";
  for (const Value* v : g.captures())
    os << pad << "capture " << ref(v) << ": " << type_of(v) << "\n";
  for (const Value* v : g.initializers()) {
    if (v && v->is_graph_input) continue;
    os << pad << "const " << ref(v) << ": " << type_of(v);
    if (v && !opts.elide_constants && v->constant && v->constant->defined() &&
        v->constant->numel() <= 16) {
      os << " = [";
      for (int64_t i = 0; i < v->constant->numel(); ++i)
        os << (i ? "," : "") << v->constant->double_at(i);
      os << "]";
    }
    os << "\n";
  }
  for (const auto& n : g.nodes()) {
    if (!n) continue;
    os << pad;
    for (size_t i = 0; i < n->outputs.size(); ++i) os << (i ? ", " : "") << ref(n->outputs[i]);
    os << " = " << (n->domain.empty() ? "" : n->domain + ".") << n->op_type << "(";
    for (size_t i = 0; i < n->inputs.size(); ++i) os << (i ? ", " : "") << ref(n->inputs[i]);
    os << ")";
    if (!n->attrs.empty()) {
      os << " {";
      bool f = true;
      for (const auto& [k, a] : n->attrs) {
        os << (f ? "" : ", ") << k << "=" << a.to_string();
        f = false;
      }
      os << "}";
    }
    os << " :";
    for (size_t i = 0; i < n->outputs.size(); ++i) os << (i ? ", " : " ") << type_of(n->outputs[i]);
    if (opts.show_node_names && !n->name.empty()) os << "  # " << n->name;
    os << "\n";
    for (const auto& [k, a] : n->attrs) {
      std::vector<const Graph*> subs;
      if (a.type() == AttrType::kGraph) subs.push_back(&a.g());
      if (a.type() == AttrType::kGraphs)
        for (const auto& sg : a.graphs()) subs.push_back(&sg.graph());
      for (const Graph* sg : subs) {
        os << pad << "  " << k << ": graph " << (sg->name.empty() ? "_" : sg->name) << " {\n";
        print_body(os, *sg, opts, pad + "    ");
        os << pad << "  }\n";
      }
    }
  }
  os << pad << "return";
  for (size_t i = 0; i < g.outputs().size(); ++i) os << (i ? ", " : " ") << ref(g.outputs()[i]);
  os << "\n";
}
}  // namespace

std::string print_graph(const Graph& g, const PrintOptions& opts) {
  std::ostringstream os;
  os << "graph " << (g.name.empty() ? "main" : g.name) << " {";
  bool first = true;
  for (const auto& [domain, version] : g.opsets()) {
    os << (first ? " opset " : ", ") << (domain.empty() ? "ai.onnx" : domain) << ":" << version;
    first = false;
  }
  os << "\n";
  print_body(os, g, opts, "  ");
  os << "}\n";
  return os.str();
}

}  // namespace ferrite
