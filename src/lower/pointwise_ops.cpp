#include "lower/pointwise_ops.h"

#include "ops/scalar_functions.h"

namespace ferrite {

namespace {

bool all_inputs(size_t) {
  return true;
}
bool first_input(size_t i) {
  return i == 0;
}

bool is_int(DType t) {
  return t == DType::kI32 || t == DType::kI64;
}

// bf16 / f16 inputs arrive as float expressions (lower/lowered_value.h, compute_dtype).
bool is_f(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kBF16 || t == DType::kF16;
}

// A compile-time scalar that is not a graph input (Clip's bounds).
std::optional<double> const_scalar_value(const Value* v) {
  if (!v || !v->constant || v->is_graph_input || v->constant->numel() != 1) return std::nullopt;
  return v->constant->double_at(0);
}

// Every function of the scalar-function table: its row says the name, result type and params.
int emit_function(EmitContext& ctx, const Node& n, const std::vector<int>& a, DType out) {
  const ScalarFunction& f = *scalar_function_of(n);
  const DType t = f.types == FnTypes::kFloat ? out : DType::kBool;
  std::vector<double> params =
      function_params(f, n, const_scalar_value).value_or(std::vector<double>{});
  if (f.arity == 2) return ctx.body.binary(f.name, a[0], a[1], t);
  return ctx.body.unary(f.name, a[0], t, std::move(params));
}
int emit_where(EmitContext& ctx, const Node&, const std::vector<int>& a, DType) {
  return ctx.body.select(a[0], a[1], a[2]);
}
int emit_cast(EmitContext& ctx, const Node&, const std::vector<int>& a, DType out) {
  return ctx.body.cast(a[0], out);
}

// Whether the row's operand types and the node's inputs fit a generated expression.
bool lowerable(const ScalarFunction& f, const Node& n) {
  const DType t = n.inputs[0]->type.dtype;
  if (f.param_source == ParamSource::kConstantBounds && !function_params(f, n, const_scalar_value))
    return false;  // bounds computed at run time: a library step
  const bool two = n.inputs.size() == 2 && n.inputs[1];
  switch (f.types) {
    case FnTypes::kFloat:
      // Integer Add/Sub/Mul (index arithmetic: positions, vocab-parallel ids) wrap like the
      // reference kernels, Min/Max clamp (T5's relative-position buckets); integer Div and the
      // other functions stay library steps.
      if (is_int(t) && two && n.inputs[1]->type.dtype == t) {
        const std::string name = f.name;
        return name == "add" || name == "sub" || name == "mul" || name == "min" || name == "max";
      }
      if (!is_f(t)) return false;
      return f.arity == 1 || (two && n.inputs[1]->type.dtype == t);
    case FnTypes::kCompare:
      return n.inputs.size() == 2;
    case FnTypes::kLogic:
      return true;
    case FnTypes::kPredicate:
      return is_f(t);
  }
  return false;
}

}  // namespace

const PointwiseOp* find_pointwise_op(const Node& n) {
  static const PointwiseOp function{all_inputs, emit_function}, bounded{first_input, emit_function},
      where{all_inputs, emit_where}, cast{all_inputs, emit_cast};
  if (n.inputs.empty() || !n.inputs[0]) return nullptr;
  if (n.domain.empty() && n.op_type == "Where") return &where;
  if (n.domain.empty() && n.op_type == "Cast") return &cast;
  // Every row of the table, internal ones (ferrite.Silu) included.
  const ScalarFunction* f = scalar_function_of(n);
  if (!f || !lowerable(*f, n)) return nullptr;
  // Clip's bounds are read as constants, not as operands.
  return f->param_source == ParamSource::kConstantBounds ? &bounded : &function;
}

}  // namespace ferrite
