// What shape inference and reference kernels see of a node.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "ir/graph.h"
#include "ops/op_schema.h"

namespace ferrite {

class InferContext {
 public:
  explicit InferContext(Node& node) : node_(node) {}
  const Node& node() const { return node_; }
  int opset() const { return node_.opset; }

  size_t num_inputs() const { return node_.inputs.size(); }
  bool has_input(size_t i) const { return node_.input(i) != nullptr; }
  const TensorType& input_type(size_t i) const { return node_.inputs.at(i)->type; }
  DType input_dtype(size_t i) const { return input_type(i).dtype; }
  const Shape& input_shape(size_t i) const { return input_type(i).shape; }
  // Data of an input whose value is known at compile time (initializer, Constant), or null.
  const Tensor* input_constant(size_t i) const;
  // The contents of a small integer input as dims, symbolic where the producer was Shape-like.
  std::optional<std::vector<Dim>> input_dims_value(size_t i) const;

  size_t num_outputs() const { return node_.outputs.size(); }
  bool has_output(size_t i) const { return node_.output(i) != nullptr; }
  void set_output(size_t i, TensorType t);
  void set_output(size_t i, DType dtype, Shape shape) { set_output(i, {dtype, std::move(shape)}); }
  // Records the symbolic contents of a small integer output (propagates shape arithmetic).
  void set_output_dims_value(size_t i, std::vector<Dim> value);
  // Records that output i is a compile-time constant (Constant, or an op over constants).
  void set_output_constant(size_t i, Tensor value);

  // An error naming the node.
  template <class... Args>
  Status error(const Args&... args) const {
    return Status::error(str_cat(node_.describe(), ": ", args...));
  }

 private:
  Node& node_;
};

class KernelContext {
 public:
  KernelContext(const Node& node, std::vector<const Tensor*> inputs, std::vector<Tensor>& outputs)
      : node_(node), inputs_(std::move(inputs)), outputs_(outputs) {}
  const Node& node() const { return node_; }
  int opset() const { return node_.opset; }

  size_t num_inputs() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  const Tensor& input(size_t i) const { return *inputs_.at(i); }

  size_t num_outputs() const { return outputs_.size(); }
  bool has_output(size_t i) const { return node_.output(i) != nullptr; }
  // Allocates output i (zero-filled). Fails cleanly if the size is invalid or too large.
  Expected<Tensor*> allocate_output(size_t i, DType dtype, std::vector<int64_t> dims);
  // The same without the zero fill, for kernels that write every element of the output (the
  // fill is a whole extra pass over memory that large library outputs cannot afford).
  Expected<Tensor*> allocate_output_uninitialized(size_t i, DType dtype, std::vector<int64_t> dims);
  // Output i as allocated or set so far (undefined before).
  Tensor& output(size_t i) { return outputs_.at(i); }
  // Lets a device place outputs in memory of its own (a planned arena): allocate_output asks it
  // first. It returns a tensor of exactly (dtype, dims), zero-filled when `zero`, or an
  // undefined Tensor to fall back to a fresh allocation.
  using OutputAllocator =
      std::function<Tensor(size_t i, DType dtype, const std::vector<int64_t>& dims, bool zero)>;
  void set_output_allocator(OutputAllocator a) { allocator_ = std::move(a); }
  // Sets output i to an existing tensor (may share storage with an input: tensors are immutable
  // once produced).
  void set_output(size_t i, Tensor t) { outputs_.at(i) = std::move(t); }

  template <class... Args>
  Status error(const Args&... args) const {
    return Status::error(str_cat(node_.describe(), ": ", args...));
  }

 private:
  const Node& node_;
  std::vector<const Tensor*> inputs_;
  Expected<Tensor*> allocate(size_t i, DType dtype, std::vector<int64_t> dims, bool zero);

  std::vector<Tensor>& outputs_;
  OutputAllocator allocator_;
};

// Validates a node against its schema (arity, attributes, type constraints), fills attribute
// defaults and runs the schema's inference. Errors name the node.
Status infer_node(Node& node);

// Infers a subgraph's nodes in order, for the inference of its control-flow node (If, Loop,
// Scan). The ONNX importer installs the version converter's upgrade_and_infer, which also
// upgrades the nodes of a model below opset 13; until then each node is inferred with its
// schema.
using SubgraphInferFn = Status (*)(Graph&);
void set_subgraph_inferrer(SubgraphInferFn f);
Status infer_subgraph(Graph& g);

}  // namespace ferrite
