#include "passes/rewrite_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ops/context.h"
#include "ops/op_schema.h"

namespace ferrite::rewrite {

bool rewrite_anchored(Graph& g, const std::string& pass,
                      std::initializer_list<const char*> anchor_ops,
                      const MatchAndRewrite& rewrite) {
  const std::vector<const char*> ops(anchor_ops);
  return rewrite_anchored_if(
      g, pass,
      [&](const Node& n) {
        return std::any_of(ops.begin(), ops.end(), [&](const char* op) { return is_op(&n, op); });
      },
      rewrite);
}

bool rewrite_anchored_if(Graph& g, const std::string& pass,
                         const std::function<bool(const Node&)>& is_anchor,
                         const MatchAndRewrite& rewrite) {
  Uses uses = compute_uses(g);
  std::unordered_set<const Node*> dead;
  RewriteContext ctx{g, uses, dead};
  // A snapshot: rewrites insert nodes, which must not be walked (nor invalidate the walk).
  std::vector<Node*> anchors;
  for (auto& n : g.nodes())
    if (is_anchor(*n)) anchors.push_back(n.get());
  int matches = 0;
  for (Node* anchor : anchors)
    if (!dead.count(anchor)) matches += rewrite(ctx, *anchor);
  g.erase_nodes({dead.begin(), dead.end()});
  g.compact();
  log_matches(pass, matches);
  return matches > 0;
}

const Tensor* constant_of(const Value* v) {
  if (!v || v->is_graph_input || !v->constant || !v->constant->defined()) return nullptr;
  return &*v->constant;
}

std::optional<double> scalar_constant(const Value* v) {
  const Tensor* t = constant_of(v);
  if (!t || t->numel() != 1 || !(is_float(t->dtype()) || is_integer(t->dtype())))
    return std::nullopt;
  return t->double_at(0);
}

bool near(double a, double b, double tol) {
  return std::isfinite(a) && std::fabs(a - b) <= tol * std::max(1.0, std::fabs(b));
}

Node* producer_op(const Value* v, const char* op) {
  if (!v || !v->producer) return nullptr;
  Node* p = v->producer;
  return p->domain.empty() && p->op_type == op ? p : nullptr;
}

Value* other_operand(const Node& n, const Value* x) {
  if (n.inputs.size() != 2) return nullptr;
  if (n.inputs[0] == x) return n.inputs[1];
  if (n.inputs[1] == x) return n.inputs[0];
  return nullptr;
}

size_t use_count(const Uses& uses, const Value* v) {
  auto it = uses.find(v);
  return it == uses.end() ? 0 : it->second.size();
}

Node* sole_user(const Graph& g, const Uses& uses, const Value* v) {
  auto it = uses.find(v);
  if (!v || is_graph_output(g, v) || it == uses.end() || it->second.size() != 1) return nullptr;
  return it->second[0].node;
}

bool is_op(const Node* n, const char* op, int inputs) {
  return n && n->domain.empty() && n->op_type == op &&
         (inputs < 0 || n->inputs.size() == static_cast<size_t>(inputs)) &&
         n->outputs.size() == 1 && n->outputs[0];
}

bool replace_subgraph(Graph& g, const Uses& uses, const std::vector<const Node*>& nodes,
                      Value* result, std::unordered_set<const Node*>& dead,
                      const std::string& domain, const std::string& op, int opset,
                      std::vector<Value*> inputs, AttributeMap attrs,
                      const std::string& name_hint) {
  return replaceable(g, uses, nodes, result, dead) &&
         swap_in_node(g, nodes, result, dead, domain, op, opset, std::move(inputs),
                      std::move(attrs), name_hint);
}

bool replaceable(const Graph& g, const Uses& uses, const std::vector<const Node*>& nodes,
                 const Value* result, const std::unordered_set<const Node*>& dead) {
  std::unordered_set<const Node*> inside(nodes.begin(), nodes.end());
  for (const Node* n : nodes) {
    if (dead.count(n)) return false;
    for (const Value* out : n->outputs)
      if (out != result && !used_only_by(g, uses, out, inside)) return false;
  }
  return true;
}

bool swap_in_node(Graph& g, const std::vector<const Node*>& nodes, Value* result,
                  std::unordered_set<const Node*>& dead, const std::string& domain,
                  const std::string& op, int opset, std::vector<Value*> inputs, AttributeMap attrs,
                  const std::string& name_hint) {
  Node* f = insert_node(g, domain, op, opset, std::move(inputs), std::move(attrs), result->producer,
                        name_hint);
  if (!f) return false;
  if (!replace_value(g, result, f->outputs[0])) {
    discard_node(g, f);
    return false;
  }
  dead.insert(nodes.begin(), nodes.end());
  return true;
}

bool used_only_by(const Graph& g, const Uses& uses, const Value* v,
                  const std::unordered_set<const Node*>& users) {
  if (!v || is_graph_output(g, v)) return false;
  auto it = uses.find(v);
  if (it == uses.end() || it->second.empty()) return false;
  for (const Use& u : it->second)
    if (!users.count(u.node)) return false;
  return true;
}

bool is_float_dtype(DType t) {
  return is_float(t);
}

bool fully_known(const Shape& s) {
  if (!s.rank_known()) return false;
  for (const Dim& d : s.dims())
    if (!d.is_known()) return false;
  return true;
}

bool same_type(const TensorType& a, const TensorType& b) {
  return a.dtype == b.dtype && fully_known(a.shape) && a.shape == b.shape;
}

Node* insert_node(Graph& g, const std::string& domain, const std::string& op, int opset,
                  std::vector<Value*> inputs, AttributeMap attrs, const Node* before,
                  const std::string& name_hint) {
  const OpSchema* schema = OpRegistry::global().find(domain, op, opset);
  if (!schema) return nullptr;
  Node* n = g.add_node(op, name_hint);  // node names need not be unique
  n->domain = domain;
  n->opset = opset;
  n->schema = schema;
  n->inputs = std::move(inputs);
  n->attrs = std::move(attrs);
  Value* out = g.add_value(g.unique_name(name_hint + "_output"));
  out->producer = n;
  out->producer_output = 0;
  n->outputs = {out};
  g.move_before(n, before);
  if (!infer_node(*n)) {
    discard_node(g, n);
    return nullptr;
  }
  if (domain == kFerriteDomain) g.opsets().emplace(domain, opset);
  return n;
}

void discard_node(Graph& g, Node* n) {
  g.erase_nodes({n});
  g.compact();
}

bool replace_value(Graph& g, Value* old, Value* repl) {
  if (!(old->type == repl->type)) return false;
  bool was_output = is_graph_output(g, old);
  if (!g.replace_all_uses(old, repl)) return false;
  if (!was_output) {  // replace_all_uses already moved the name of an output
    std::string name = old->name;
    g.rename_value(old, g.unique_name(name + "__replaced"));
    g.rename_value(repl, name);
  }
  return true;
}

int onnx_opset_at_least(const Graph& g, int min_version) {
  auto it = g.opsets().find("");
  int model = it == g.opsets().end() ? 0 : it->second;
  return std::max(model, min_version);
}

void log_matches(const std::string& pass, int matches) {
  const char* log = std::getenv("FERRITE_LOG");
  if (log && std::strstr(log, "passes"))
    std::fprintf(stderr, "%s: %d matches\n", pass.c_str(), matches);
}

}  // namespace ferrite::rewrite
