#include "ops/context.h"

namespace ferrite {

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
  auto t = Tensor::create(dtype, std::move(dims));
  if (!t) return t.status().with_context(node_.describe() + " output " + std::to_string(i));
  outputs_.at(i) = std::move(t).value();
  return &outputs_.at(i);
}

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
    if (spec.required) return err(node.describe(), ": missing required attribute '", spec.name, "'");
    if (spec.default_value) node.attrs[spec.name] = *spec.default_value;
  }

  for (const auto& tc : s->type_constraints) {
    DType first = DType::kUndefined;
    for (int idx : tc.inputs) {
      if (idx >= nin || !node.inputs[idx]) continue;
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

  InferContext ctx(node);
  FERRITE_RETURN_IF_ERROR(s->infer(ctx));
  for (int i = 0; i < nout; ++i) {
    const Value* v = node.outputs[i];
    if (v && v->type.dtype == DType::kUndefined)
      return err(node.describe(), ": inference left output ", i, " without a dtype");
  }
  return Status::ok();
}

}  // namespace ferrite
