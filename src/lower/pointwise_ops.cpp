#include "lower/pointwise_ops.h"

#include <cmath>
#include <map>

namespace ferrite {

namespace {

bool all_inputs(size_t) { return true; }
bool first_input(size_t i) { return i == 0; }

// bf16 / f16 inputs arrive as float expressions (lower/lowered_value.h, compute_dtype).
bool is_f(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kBF16 || t == DType::kF16;
}

// Unary float functions with no parameters: ONNX op -> codegen function name.
const std::map<std::string, std::string>& unary_float() {
  static const std::map<std::string, std::string> m = {
      {"Exp", "exp"},   {"Log", "log"},     {"Sqrt", "sqrt"},   {"Tanh", "tanh"},
      {"Erf", "erf"},   {"Sigmoid", "sigmoid"}, {"Relu", "relu"}, {"Neg", "neg"},
      {"Abs", "abs"},   {"Reciprocal", "recip"}, {"Sin", "sin"}, {"Cos", "cos"},
      {"Floor", "floor"}, {"Ceil", "ceil"}, {"Softplus", "softplus"}, {"Softsign", "softsign"},
      {"HardSwish", "hardswish"}, {"Round", "round"}, {"Sign", "sign"}};
  return m;
}
const std::map<std::string, std::string>& binary_float() {
  static const std::map<std::string, std::string> m = {
      {"Add", "add"}, {"Sub", "sub"}, {"Mul", "mul"}, {"Div", "div"}, {"Pow", "pow"},
      {"Max", "max"}, {"Min", "min"}};
  return m;
}
const std::map<std::string, std::string>& compare() {
  static const std::map<std::string, std::string> m = {
      {"Equal", "eq"}, {"Less", "lt"}, {"LessOrEqual", "le"}, {"Greater", "gt"},
      {"GreaterOrEqual", "ge"}};
  return m;
}
const std::map<std::string, std::string>& logic() {
  static const std::map<std::string, std::string> m = {{"And", "and"}, {"Or", "or"}, {"Xor", "xor"}};
  return m;
}

int emit_unary(EmitContext& ctx, const Node& n, const std::vector<int>& a, DType out) {
  return ctx.body.unary(unary_float().at(n.op_type), a[0], out);
}
int emit_binary(EmitContext& ctx, const Node& n, const std::vector<int>& a, DType out) {
  return ctx.body.binary(binary_float().at(n.op_type), a[0], a[1], out);
}
int emit_compare(EmitContext& ctx, const Node& n, const std::vector<int>& a, DType) {
  return ctx.body.binary(compare().at(n.op_type), a[0], a[1], DType::kBool);
}
int emit_logic(EmitContext& ctx, const Node& n, const std::vector<int>& a, DType) {
  return ctx.body.binary(logic().at(n.op_type), a[0], a[1], DType::kBool);
}
int emit_not(EmitContext& ctx, const Node&, const std::vector<int>& a, DType) {
  return ctx.body.unary("not", a[0], DType::kBool);
}
int emit_where(EmitContext& ctx, const Node&, const std::vector<int>& a, DType) {
  return ctx.body.select(a[0], a[1], a[2]);
}
int emit_cast(EmitContext& ctx, const Node&, const std::vector<int>& a, DType out) {
  return ctx.body.cast(a[0], out);
}
int emit_isnan(EmitContext& ctx, const Node&, const std::vector<int>& a, DType) {
  return ctx.body.unary("isnan", a[0], DType::kBool);
}
int emit_param(EmitContext& ctx, const Node& n, const std::vector<int>& a, DType out) {
  const std::string& op = n.op_type;
  if (op == "LeakyRelu") return ctx.body.unary("leakyrelu", a[0], out, {n.attr_float("alpha", 0.01f)});
  if (op == "Elu") return ctx.body.unary("elu", a[0], out, {n.attr_float("alpha", 1.0f)});
  if (op == "HardSigmoid")
    return ctx.body.unary("hardsigmoid", a[0], out,
                          {n.attr_float("alpha", 0.2f), n.attr_float("beta", 0.5f)});
  if (op == "Gelu")
    return ctx.body.unary(n.attr_string("approximate", "none") == "tanh" ? "gelu_tanh" : "gelu",
                          a[0], out);
  // Clip: min/max are constant inputs (checked by find_pointwise_op); absent = unbounded.
  double lo = -INFINITY, hi = INFINITY;
  if (n.input(1)) lo = n.input(1)->constant->double_at(0);
  if (n.input(2)) hi = n.input(2)->constant->double_at(0);
  return ctx.body.unary("clip", a[0], out, {lo, hi});
}

bool const_scalar(const Value* v) {
  return !v || (v->constant && !v->is_graph_input && v->constant->numel() == 1);
}

}  // namespace

const PointwiseOp* find_pointwise_op(const Node& n) {
  static const PointwiseOp unary{all_inputs, emit_unary}, binary{all_inputs, emit_binary},
      cmp{all_inputs, emit_compare}, lgc{all_inputs, emit_logic}, nt{all_inputs, emit_not},
      where{all_inputs, emit_where}, cast{all_inputs, emit_cast}, isnan{all_inputs, emit_isnan},
      param{all_inputs, emit_param}, clip{first_input, emit_param};
  if (!n.domain.empty() || n.inputs.empty() || !n.inputs[0]) return nullptr;
  const std::string& op = n.op_type;
  DType t = n.inputs[0]->type.dtype;
  if (unary_float().count(op)) return is_f(t) ? &unary : nullptr;
  if (binary_float().count(op))
    return is_f(t) && n.inputs.size() == 2 && n.inputs[1] && n.inputs[1]->type.dtype == t ? &binary
                                                                                           : nullptr;
  if (compare().count(op)) return n.inputs.size() == 2 ? &cmp : nullptr;
  if (logic().count(op)) return &lgc;
  if (op == "Not") return &nt;
  if (op == "Where") return &where;
  if (op == "Cast") return &cast;
  if (op == "IsNaN") return is_f(t) ? &isnan : nullptr;
  if (op == "LeakyRelu" || op == "Elu" || op == "HardSigmoid" || op == "Gelu")
    return is_f(t) ? &param : nullptr;
  if (op == "Clip")
    return is_f(t) && const_scalar(n.input(1)) && const_scalar(n.input(2)) ? &clip : nullptr;
  return nullptr;
}

}  // namespace ferrite
