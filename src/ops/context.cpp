#include "ops/context.h"

#include <atomic>

namespace ferrite {

namespace {
std::atomic<SubgraphInferFn> g_subgraph_inferrer{nullptr};
}  // namespace

void set_subgraph_inferrer(SubgraphInferFn f) {
  g_subgraph_inferrer.store(f);
}

Status infer_subgraph(Graph& g) {
  if (SubgraphInferFn f = g_subgraph_inferrer.load()) return f(g);
  for (const auto& node : g.nodes()) {
    if (!node->schema) return err(node->describe(), ": no schema");
    FERRITE_RETURN_IF_ERROR(infer_node(*node));
  }
  return Status::ok();
}

const Tensor* InferContext::input_constant(size_t i) const {
  const Value* v = node_.input(i);
  // A graph input's initializer is only a default that the caller may override.
  return v && v->constant && !v->is_graph_input ? &*v->constant : nullptr;
}

void InferContext::set_output_constant(size_t i, Tensor value) {
  if (Value* v = node_.output(i)) v->constant = std::move(value);
}

std::optional<std::vector<Dim>> InferContext::input_dims_value(size_t i) const {
  const Value* v = node_.input(i);
  if (!v) return std::nullopt;
  if (const Tensor* c = input_constant(i)) {
    const Tensor& t = *c;
    if (t.rank() > 1 || t.numel() > 1024 || !(is_integer(t.dtype()) || t.dtype() == DType::kBool))
      return std::nullopt;
    std::vector<Dim> out;
    for (int64_t k = 0; k < t.numel(); ++k) out.emplace_back(t.int_at(k));
    return out;
  }
  return v->sym_value;
}

void InferContext::set_output(size_t i, TensorType t) {
  if (Value* v = node_.output(i)) v->type = std::move(t);
}

void InferContext::set_output_dims_value(size_t i, std::vector<Dim> value) {
  if (Value* v = node_.output(i)) v->sym_value = std::move(value);
}

Expected<Tensor*> KernelContext::allocate_output(size_t i, DType dtype, std::vector<int64_t> dims) {
  return allocate(i, dtype, std::move(dims), /*zero=*/true);
}

Expected<Tensor*> KernelContext::allocate_output_uninitialized(size_t i, DType dtype,
                                                               std::vector<int64_t> dims) {
  return allocate(i, dtype, std::move(dims), /*zero=*/false);
}

Expected<Tensor*> KernelContext::allocate(size_t i, DType dtype, std::vector<int64_t> dims,
                                          bool zero) {
  if (allocator_ && i < outputs_.size()) {
    Tensor t = allocator_(i, dtype, dims, zero);
    if (t.defined()) {
      outputs_.at(i) = std::move(t);
      return &outputs_.at(i);
    }
  }
  auto t = zero ? Tensor::create(dtype, std::move(dims))
                : Tensor::create_uninitialized(dtype, std::move(dims));
  if (!t) return t.status().with_context(node_.describe() + " output " + std::to_string(i));
  outputs_.at(i) = std::move(t).value();
  return &outputs_.at(i);
}

Status fold_small_constants(Node& node);

Status infer_node(Node& node) {
  const OpSchema* s = node.schema;
  FERRITE_CHECK(s);
  int nin = static_cast<int>(node.inputs.size());
  int nout = static_cast<int>(node.outputs.size());
  if (nin < s->min_inputs || nin > s->max_inputs)
    return err(node.describe(), ": expects ", s->min_inputs,
               s->min_inputs == s->max_inputs ? "" : str_cat("..", s->max_inputs), " inputs, got ",
               nin);
  if (nout < s->min_outputs || nout > s->max_outputs)
    return err(node.describe(), ": expects ", s->min_outputs,
               s->min_outputs == s->max_outputs ? "" : str_cat("..", s->max_outputs),
               " outputs, got ", nout);
  for (int i = 0; i < s->min_inputs; ++i)
    if (!node.inputs[i]) return err(node.describe(), ": required input ", i, " is missing");

  for (const auto& [name, attr] : node.attrs) {
    const AttrSpec* spec = s->find_attr(name);
    if (!spec) return err(node.describe(), ": unknown attribute '", name, "'");
    if (attr.type() != spec->type)
      return err(node.describe(), ": attribute '", name, "' must be ", attr_type_name(spec->type),
                 ", got ", attr_type_name(attr.type()));
  }
  for (const auto& spec : s->attrs) {
    if (node.attrs.count(spec.name)) continue;
    if (spec.required)
      return err(node.describe(), ": missing required attribute '", spec.name, "'");
    if (spec.default_value) node.attrs[spec.name] = *spec.default_value;
  }

  if (!s->any_value_kind)
    for (int i = 0; i < nin; ++i)
      if (node.inputs[i] && !node.inputs[i]->type.is_tensor())
        return err(node.describe(), ": input ", i, " ('", node.inputs[i]->name, "') is ",
                   node.inputs[i]->type.to_string(), ", but ", s->name, " takes tensors only");

  for (const auto& tc : s->type_constraints) {
    DType first = DType::kUndefined;
    for (int idx = 0; idx < nin; ++idx) {
      if (!node.inputs[idx] || !tc.covers(idx)) continue;
      DType t = node.inputs[idx]->type.dtype;
      if (!tc.allowed.contains(t))
        return err(node.describe(), ": input ", idx, " ('", node.inputs[idx]->name, "') has dtype ",
                   dtype_name(t), ", but ", tc.name, " allows ", tc.allowed.to_string());
      if (tc.same && first != DType::kUndefined && t != first)
        return err(node.describe(), ": inputs of type ", tc.name, " must share one dtype, got ",
                   dtype_name(first), " and ", dtype_name(t));
      if (first == DType::kUndefined) first = t;
    }
  }

  // Re-inference (after a pass) must not see facts recorded by an earlier run.
  for (Value* v : node.outputs) {
    if (!v) continue;
    v->sym_value.reset();
    v->constant.reset();
  }
  InferContext ctx(node);
  FERRITE_RETURN_IF_ERROR(s->infer(ctx));
  for (int i = 0; i < nout; ++i) {
    const Value* v = node.outputs[i];
    if (v && v->type.dtype == DType::kUndefined)
      return err(node.describe(), ": inference left output ", i, " without a dtype");
  }
  return fold_small_constants(node);
}

// Evaluates a node whose inputs are all compile-time constants when its outputs are small, so
// that shape arithmetic on constants (and on Constant nodes) is known during inference. Large
// results are left to run time: folding must never make import slow or memory-hungry.
Status fold_small_constants(Node& node) {
  constexpr int64_t kMaxFoldElements = 1 << 16;
  bool all_outputs_constant = true;
  for (const Value* v : node.outputs)
    all_outputs_constant = all_outputs_constant && (!v || v->constant);
  if (all_outputs_constant) return Status::ok();    // e.g. Constant, folded by its own inference
  if (!node.schema->foldable) return Status::ok();  // a collective: its result is the group's
  // Sequences and optionals are never constants: they stay values of the run.
  for (const Value* v : node.outputs)
    if (v && !v->type.is_tensor()) return Status::ok();
  std::vector<const Tensor*> inputs;
  int64_t in_elements = 0;
  for (const Value* v : node.inputs) {
    if (!v) {
      inputs.push_back(nullptr);
      continue;
    }
    if (!v->constant || v->is_graph_input) return Status::ok();
    in_elements += v->constant->numel();
    inputs.push_back(&*v->constant);
  }
  if (inputs.empty() || in_elements > kMaxFoldElements) return Status::ok();
  for (const Value* v : node.outputs) {
    if (!v) continue;
    auto dims = v->type.shape.static_dims();
    if (!dims) return Status::ok();
    int64_t n = 1;
    for (int64_t d : *dims) n = d > 0 && n > kMaxFoldElements / d ? kMaxFoldElements + 1 : n * d;
    if (n > kMaxFoldElements) return Status::ok();
  }
  std::vector<Tensor> outputs(node.outputs.size());
  KernelContext kctx(node, std::move(inputs), outputs);
  // A failure here (e.g. an out-of-range Gather index in constants) is a real error in the model.
  FERRITE_RETURN_IF_ERROR(node.schema->kernel(kctx));
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    Value* v = node.outputs[i];
    if (!v || !outputs[i].defined()) continue;
    if (outputs[i].dtype() != v->type.dtype || outputs[i].dims() != *v->type.shape.static_dims())
      return err(node.describe(), ": constant evaluation disagrees with inference (",
                 outputs[i].type_string(), " vs ", v->type.to_string(), ")");
    v->constant = std::move(outputs[i]);
  }
  return Status::ok();
}

}  // namespace ferrite
