// The graph IR: Values (SSA tensors), Nodes (op applications) and the Graph that owns them.
// Nodes are kept in a topological order; the verifier checks it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/shape.h"
#include "ir/tensor.h"

namespace ferrite {

struct OpSchema;
struct Node;

struct Value {
  std::string name;
  TensorType type;
  Node* producer = nullptr;  // null for graph inputs and initializers
  int producer_output = -1;
  std::optional<Tensor> constant;  // initializer (or folded constant) data
  bool is_graph_input = false;
  // Symbolic contents of small 1-d/0-d integer tensors (e.g. the result of Shape), so that shape
  // arithmetic chains keep symbols: Shape -> Gather -> Concat -> Reshape.
  std::optional<std::vector<Dim>> sym_value;
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;           // "" is the default ONNX domain
  int opset = 0;                // opset version of the node's domain in the model
  std::vector<Value*> inputs;   // nullptr for an omitted optional input
  std::vector<Value*> outputs;  // nullptr for an omitted optional output
  AttributeMap attrs;
  const OpSchema* schema = nullptr;

  bool has_attr(const std::string& n) const { return attrs.count(n) != 0; }
  // Typed accessors; defaults from the schema are filled at import, so these are for attributes
  // the schema declares (the default argument covers optional ones without a default).
  int64_t attr_int(const std::string& n, int64_t def = 0) const;
  float attr_float(const std::string& n, float def = 0) const;
  std::string attr_string(const std::string& n, const std::string& def = "") const;
  std::vector<int64_t> attr_ints(const std::string& n, std::vector<int64_t> def = {}) const;
  std::vector<float> attr_floats(const std::string& n, std::vector<float> def = {}) const;
  Value* input(size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  Value* output(size_t i) const { return i < outputs.size() ? outputs[i] : nullptr; }
  // The subgraphs of the node's graph attributes (If's branches, Loop's and Scan's bodies).
  std::vector<Graph*> subgraphs() const;
  // How many trailing inputs bind the subgraphs' captures: every subgraph of a node has the same
  // capture list (the values of enclosing scopes any of them reads), so that one input serves
  // all of them. 0 for a node without subgraphs.
  size_t num_captured_inputs() const;
  // Inputs before the captured ones: the op's own (ONNX) inputs.
  size_t num_explicit_inputs() const { return inputs.size() - num_captured_inputs(); }
  // "node 'name' (OpType)" for messages.
  std::string describe() const;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  // Values and nodes live on the heap: pointers to them stay valid across a move.
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;

  Value* add_value(std::string name, TensorType type = {});
  Node* add_node(std::string op_type, std::string name = "");
  Value* find_value(const std::string& name) const;

  std::vector<Value*>& inputs() { return inputs_; }
  const std::vector<Value*>& inputs() const { return inputs_; }
  std::vector<Value*>& outputs() { return outputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  std::vector<Value*>& initializers() { return initializers_; }
  const std::vector<Value*>& initializers() const { return initializers_; }
  // A subgraph's values of enclosing scopes (ONNX lexical scoping): each is a value of this graph
  // named as the outer value, bound at run time to the owning node's trailing inputs in order
  // (Node::num_captured_inputs). Empty for a top-level graph.
  std::vector<Value*>& captures() { return captures_; }
  const std::vector<Value*>& captures() const { return captures_; }
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  std::vector<std::unique_ptr<Node>>& nodes() { return nodes_; }
  size_t num_values() const { return values_.size(); }

  std::map<std::string, int>& opsets() { return opsets_; }
  const std::map<std::string, int>& opsets() const { return opsets_; }
  std::string name;
  // Set on an If branch whose inference failed while the other branch's succeeded: ONNX (and
  // ONNX Runtime) validate only the branch that runs, so the error waits for the branch to run
  // (the If kernel reports it, naming the node) instead of refusing the model.
  std::string deferred_error;

  // A deep copy (subgraphs included) with the same names, types, constants and order.
  std::unique_ptr<Graph> clone() const;

  // --- Editing (graph_edit.cpp); passes use these and never touch the vectors' invariants. ---
  // Redirects every use of `old` (node inputs and graph outputs) to `repl`. A graph output keeps
  // its user-visible name: `repl` is renamed to `old`'s name when it is an intermediate; if it is
  // a graph input, initializer or another output, the call refuses and returns false.
  bool replace_all_uses(Value* old, Value* repl);
  // Removes the given nodes; their outputs must be unused.
  void erase_nodes(const std::vector<const Node*>& dead);
  // Drops initializers and values no longer referenced by anything.
  void compact();
  // A fresh value name with the given prefix, unique in this graph.
  std::string unique_name(const std::string& prefix);
  void rename_value(Value* v, const std::string& name);
  // Adds an initializer holding `data`.
  Value* add_initializer(const std::string& name_prefix, Tensor data);
  // Inserts a node (created by add_node) right before `before` in the order; add_node appends.
  void move_before(Node* node, const Node* before);

 private:
  std::vector<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> inputs_, outputs_, initializers_, captures_;
  std::map<std::string, Value*> by_name_;
  std::map<std::string, int> opsets_;
  int64_t name_counter_ = 0;
};

// SSA, acyclicity (topological order), defined uses, consistent types; subgraphs too (each
// node's subgraphs capture as many values as it has captured inputs, of the same types).
Status verify_graph(const Graph& g);

// Readable text form for `ferrite info --ir` and golden tests.
struct PrintOptions {
  bool show_node_names = true;
  bool elide_constants = true;  // print initializers as "<f32[..]>" instead of their data
};
std::string print_graph(const Graph& g, const PrintOptions& opts = {});

}  // namespace ferrite
