// Shared driver, matching and editing helpers for the pattern-rewrite passes
// (fold-conv-batchnorm, fuse-gelu, fuse-layernorm, fuse-matmul-epilogue, fuse-attention,
// fuse-conv-activation).
//
// `rewrite_anchored` walks the nodes a pattern is rooted at. A rewrite matches a subgraph rooted at
// some node, checks that every intermediate value it removes is used only inside the pattern (and
// is not a graph output), builds the replacement node with `insert_node` (which runs inference) and
// then swaps the old output for the new one with `replace_value`. A match whose replacement does
// not infer to exactly the old output type is dropped, so a rewrite can never change what the rest
// of the graph sees.
#pragma once

#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "passes/pass.h"

namespace ferrite::rewrite {

using Uses = std::unordered_map<const Value*, std::vector<Use>>;

// The internal domain of ferrite's fused ops (never appears in ONNX files) and its version.
inline constexpr const char* kFerriteDomain = "ferrite";
inline constexpr int kFerriteOpset = 1;

// What the callback of rewrite_anchored works with.
struct RewriteContext {
  Graph& g;
  // The users of each value when the walk began, not updated by the rewrites: the nodes they
  // replace stay in the graph (in `dead`) until the walk ends, and no later match may take them.
  const Uses& uses;
  // The nodes that earlier matches replaced (replaceable() refuses to take them again).
  std::unordered_set<const Node*>& dead;
};
// Tries the pattern rooted at `anchor`; returns how many rewrites it applied (0: the graph is as
// it was, apart from nodes added to ctx.dead).
using MatchAndRewrite = std::function<int(RewriteContext& ctx, Node& anchor)>;

// The driver of every pattern rewrite: computes the uses once, calls `rewrite` on each node that
// is_op(node, one of `anchor_ops`), in graph order, among the nodes there when it starts (not
// those the rewrites insert) and skipping those an earlier match replaced; then erases the
// replaced nodes and compacts the graph. Logs the count (log_matches) under `pass`; returns
// whether anything was rewritten.
bool rewrite_anchored(Graph& g, const std::string& pass,
                      std::initializer_list<const char*> anchor_ops,
                      const MatchAndRewrite& rewrite);
// The same driver over the nodes `is_anchor` accepts (e.g. ops of the ferrite domain, which
// is_op does not match).
bool rewrite_anchored_if(Graph& g, const std::string& pass,
                         const std::function<bool(const Node&)>& is_anchor,
                         const MatchAndRewrite& rewrite);

// Compile-time data of v (initializer or folded constant); null for graph inputs, even those
// with a default initializer, which the caller may override.
const Tensor* constant_of(const Value* v);
// The single element of a one-element numeric constant.
std::optional<double> scalar_constant(const Value* v);
// |a - b| <= tol * max(1, |b|): exporters round constants like sqrt(2) differently.
bool near(double a, double b, double tol = 1e-4);

// The producer of v when it is a default-domain node of type `op`, else null.
Node* producer_op(const Value* v, const char* op);
// For a two-input node, the input that is not `x` (either order), or null.
Value* other_operand(const Node& n, const Value* x);

size_t use_count(const Uses& uses, const Value* v);
// The single user of v, or null when v has several users (or none) or is a graph output.
Node* sole_user(const Graph& g, const Uses& uses, const Value* v);
// n is a default-domain `op` node with one present output and, unless -1, `inputs` inputs.
bool is_op(const Node* n, const char* op, int inputs = -1);
// v is not a graph output and each of its uses is by one of `users` (at least one use).
bool used_only_by(const Graph& g, const Uses& uses, const Value* v,
                  const std::unordered_set<const Node*>& users);

bool is_float_dtype(DType t);
// Rank known and every dim known (static or symbolic).
bool fully_known(const Shape& s);
// Same dtype and the same fully known shape.
bool same_type(const TensorType& a, const TensorType& b);

// Creates `domain.op(inputs) {attrs}` with one fresh output, placed right before `before`, and
// infers it. Returns null, leaving the graph as it was, when the op has no schema at `opset` or
// inference fails. The output is named after `name_hint`. A node of the internal domain adds
// that domain to the graph's opset map.
Node* insert_node(Graph& g, const std::string& domain, const std::string& op, int opset,
                  std::vector<Value*> inputs, AttributeMap attrs, const Node* before,
                  const std::string& name_hint);
// The usual end of a match: `nodes` (the matched subgraph; `result` is the output of its last
// node) become one new node `domain.op(inputs) {attrs}` placed before result's producer.
// Refused (graph unchanged, false) unless replaceable(), or when the new node does not infer to
// result's type. On success `nodes` join `dead` (the caller erases them at the end).
bool replace_subgraph(Graph& g, const Uses& uses, const std::vector<const Node*>& nodes,
                      Value* result, std::unordered_set<const Node*>& dead,
                      const std::string& domain, const std::string& op, int opset,
                      std::vector<Value*> inputs, AttributeMap attrs, const std::string& name_hint);
// replace_subgraph in two steps, for a rewrite that adds to the graph (an initializer, a
// Transpose) between checking the match and replacing it.
// No node of `nodes` is in `dead` (taken by an earlier match), and no output of theirs but
// `result` is used outside them.
bool replaceable(const Graph& g, const Uses& uses, const std::vector<const Node*>& nodes,
                 const Value* result, const std::unordered_set<const Node*>& dead);
// Inserts the new node and swaps it in for `result` (`nodes` join `dead`); on failure removes it
// again and returns false.
bool swap_in_node(Graph& g, const std::vector<const Node*>& nodes, Value* result,
                  std::unordered_set<const Node*>& dead, const std::string& domain,
                  const std::string& op, int opset, std::vector<Value*> inputs, AttributeMap attrs,
                  const std::string& name_hint);
// Removes a node created by insert_node that is no longer wanted.
void discard_node(Graph& g, Node* n);
// Redirects every use of `old` to `repl` when their types agree; `repl` takes over the name of
// `old` so that the IR keeps the names users know. Returns false (changing nothing) otherwise.
bool replace_value(Graph& g, Value* old, Value* repl);

// The opset version to give a new default-domain node that needs at least `min_version`: the
// model's own when new enough (each node keeps its own opset, so older neighbours are unaffected).
int onnx_opset_at_least(const Graph& g, int min_version);

// Prints "<pass>: N matches" to stderr when FERRITE_LOG contains "passes".
void log_matches(const std::string& pass, int matches);

}  // namespace ferrite::rewrite
