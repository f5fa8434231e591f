// The op table: each op's schema (name, domain, opset range, attributes, type constraints),
// shape/type inference and reference kernel are registered together in one OpSchema.
//
// Adding an op is one edit: a `registry.add(OpSchemaBuilder(...)...)` call in the family file
// under src/ops/ that fits it.
#pragma once

#include <climits>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace ferrite {

struct AttrSpec {
  std::string name;
  AttrType type;
  bool required = false;
  std::optional<Attribute> default_value;  // filled in at import when absent
};

// The listed inputs (and outputs, for documentation) must have a dtype in `allowed`; when
// `same` is set they must all share one dtype. A variadic constraint's last listed input stands
// for it and every input after it (Concat's, Sum's: inputs 1, 2, ... are T as input 0 is).
struct TypeConstraint {
  std::string name;
  std::vector<int> inputs;
  DTypeSet allowed;
  bool same = true;
  bool variadic = false;

  bool covers(int i) const {
    for (int idx : inputs)
      if (idx == i) return true;
    return variadic && !inputs.empty() && i > inputs.back();
  }
};

class InferContext;
class KernelContext;
using InferFn = std::function<Status(InferContext&)>;
using KernelFn = std::function<Status(KernelContext&)>;

struct OpSchema {
  std::string name;
  std::string domain;  // "" = ai.onnx
  int since_version = 1;
  int last_version = INT_MAX;  // inclusive
  int min_inputs = 0, max_inputs = 0;
  int min_outputs = 1, max_outputs = 1;
  std::vector<AttrSpec> attrs;
  std::vector<TypeConstraint> type_constraints;
  InferFn infer;
  KernelFn kernel;
  std::string doc;
  // False for ops whose result is not a function of their inputs alone (the collectives, which
  // combine the inputs of every rank): constant folding leaves them to run.
  bool foldable = true;
  // True for the ops that take or make sequences and optionals (ir/value_kind.h): the sequence
  // ops, Identity and control flow. Every other op gets tensors only; infer_node refuses a
  // sequence or optional input to it with an error naming the node.
  bool any_value_kind = false;

  const AttrSpec* find_attr(const std::string& n) const {
    for (const auto& a : attrs)
      if (a.name == n) return &a;
    return nullptr;
  }
};

class OpSchemaBuilder {
 public:
  explicit OpSchemaBuilder(std::string name, std::string domain = "") {
    s_.name = std::move(name);
    s_.domain = std::move(domain);
  }
  OpSchemaBuilder& versions(int since, int last = INT_MAX) {
    s_.since_version = since;
    s_.last_version = last;
    return *this;
  }
  OpSchemaBuilder& inputs(int min, int max) {
    s_.min_inputs = min;
    s_.max_inputs = max;
    return *this;
  }
  OpSchemaBuilder& inputs(int n) { return inputs(n, n); }
  OpSchemaBuilder& outputs(int min, int max) {
    s_.min_outputs = min;
    s_.max_outputs = max;
    return *this;
  }
  OpSchemaBuilder& outputs(int n) { return outputs(n, n); }
  OpSchemaBuilder& attr(std::string name, AttrType t, Attribute def) {
    s_.attrs.push_back({std::move(name), t, false, std::move(def)});
    return *this;
  }
  OpSchemaBuilder& optional_attr(std::string name, AttrType t) {
    s_.attrs.push_back({std::move(name), t, false, std::nullopt});
    return *this;
  }
  OpSchemaBuilder& required_attr(std::string name, AttrType t) {
    s_.attrs.push_back({std::move(name), t, true, std::nullopt});
    return *this;
  }
  OpSchemaBuilder& types(std::string name, std::vector<int> inputs, DTypeSet allowed,
                         bool same = true) {
    s_.type_constraints.push_back({std::move(name), std::move(inputs), allowed, same});
    return *this;
  }
  // Inputs `first`, first + 1, ... (a variadic input list) of one type.
  OpSchemaBuilder& variadic_types(std::string name, int first, DTypeSet allowed) {
    s_.type_constraints.push_back({std::move(name), {first}, allowed, true, true});
    return *this;
  }
  OpSchemaBuilder& infer(InferFn f) {
    s_.infer = std::move(f);
    return *this;
  }
  OpSchemaBuilder& kernel(KernelFn f) {
    s_.kernel = std::move(f);
    return *this;
  }
  OpSchemaBuilder& doc(std::string d) {
    s_.doc = std::move(d);
    return *this;
  }
  OpSchemaBuilder& not_foldable() {
    s_.foldable = false;
    return *this;
  }
  OpSchemaBuilder& any_value_kind() {
    s_.any_value_kind = true;
    return *this;
  }
  OpSchema build() { return std::move(s_); }

 private:
  OpSchema s_;
};

class OpRegistry {
 public:
  // The process-wide table with every built-in op registered.
  static const OpRegistry& global();

  void add(OpSchema schema);
  void add(OpSchemaBuilder& b) { add(b.build()); }
  void add(OpSchemaBuilder&& b) { add(b.build()); }
  // The schema for (domain, op) valid at `opset`, or null.
  const OpSchema* find(const std::string& domain, const std::string& op, int opset) const;
  // True if the op is known under any opset (to tell "unknown op" from "unsupported opset").
  bool knows(const std::string& domain, const std::string& op) const;
  const std::vector<OpSchema>& all() const { return schemas_; }

 private:
  std::vector<OpSchema> schemas_;
};

// One function per op family (src/ops/<family>.cpp); OpRegistry::global() calls them all.
void register_elementwise_ops(OpRegistry& r);    // binary arithmetic, comparison, logic, Where
void register_activation_ops(OpRegistry& r);     // unary math and activations, Cast, Clip
void register_math_ops(OpRegistry& r);           // MatMul, Gemm, Einsum
void register_conv_ops(OpRegistry& r);           // Conv, ConvTranspose, ConvGradWeight
void register_pool_ops(OpRegistry& r);           // MaxPool, AveragePool, Global*Pool
void register_normalization_ops(OpRegistry& r);  // Batch/Layer/Instance/GroupNormalization
void register_reduction_ops(OpRegistry& r);      // Reduce*, ArgMax/ArgMin, Softmax, LogSoftmax
void register_shape_ops(OpRegistry& r);          // Reshape, Transpose, Concat, Slice, Pad, ...
void register_indexing_ops(OpRegistry& r);       // Gather*, Scatter*, Trilu, Where-free indexing
void register_misc_ops(OpRegistry& r);           // CumSum, TopK, Resize, Dropout, Range, ...
void register_fused_ops(OpRegistry& r);         // internal "ferrite" domain: FusedMatMul, Attention
void register_collective_ops(OpRegistry& r);    // com.microsoft AllReduce, AllGather, ReduceScatter
void register_control_flow_ops(OpRegistry& r);  // If, Loop, Scan (subgraph bodies)
void register_sequence_ops(OpRegistry& r);      // Sequence*, SplitToSequence, Optional*

}  // namespace ferrite
