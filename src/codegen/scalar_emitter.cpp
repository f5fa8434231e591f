#include "codegen/scalar_emitter.h"

#include <cmath>
#include <cstdio>

#include "lower/lowering.h"
#include "ops/scalar_functions.h"

namespace ferrite {

namespace {

std::optional<std::string> host_type(DType t) {
  switch (t) {
    case DType::kF32:
      return "float";
    case DType::kF64:
      return "double";
    case DType::kI32:
      return "int32_t";
    case DType::kI64:
      return "int64_t";
    case DType::kBool:
      return "bool";
    // Storage only: loads convert to float with fe_bf16_to_float / fe_half_to_float, stores
    // round with fe_float_to_bf16 / fe_float_to_half (defined by the dialect's prelude).
    case DType::kBF16:
    case DType::kF16:
      return "uint16_t";
    default:
      return std::nullopt;
  }
}

bool low_float(DType t) {
  return t == DType::kBF16 || t == DType::kF16;
}

}  // namespace

Ident symbol_ident(const LoweredGraph& lg) {
  return [&lg](const std::string& name) -> std::string {
    size_t i;
    if (is_loop_var(name, &i)) return "x" + std::to_string(i);
    for (size_t s = 0; s < lg.symbols.size(); ++s)
      if (lg.symbols[s] == name) return "s" + std::to_string(s);
    return "/*unbound " + name + "*/0";
  };
}

ScalarEmitter::ScalarEmitter(ScalarSpelling spelling) : s_(std::move(spelling)) {}

std::optional<std::string> ScalarEmitter::type(DType t) const {
  return s_.scalar_type ? s_.scalar_type(t) : host_type(t);
}

std::string ScalarEmitter::literal(DType t, double v) const {
  std::string ty = type(t).value_or("float");
  if (t == DType::kBool) return v != 0 ? "true" : "false";
  if (t == DType::kI32 || t == DType::kI64)
    return "(" + ty + ")" + std::to_string(static_cast<int64_t>(v)) + "LL";
  if (std::isnan(v)) return "fe_nan<" + ty + ">()";
  if (std::isinf(v)) return std::string(v < 0 ? "-" : "") + "fe_inf<" + ty + ">()";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return t == DType::kF32 ? "(float)" + s : "(" + ty + ")" + s;
}

std::string ScalarEmitter::cast(DType from, DType to, const std::string& v) const {
  if (from == to) return v;
  if (low_float(from)) {
    std::string f = (from == DType::kBF16 ? "fe_bf16_to_float(" : "fe_half_to_float(") + v + ")";
    return cast(DType::kF32, to, f);
  }
  if (low_float(to)) {
    std::string f = cast(from, DType::kF32, v);
    return (to == DType::kBF16 ? "fe_float_to_bf16(" : "fe_float_to_half(") + f + ")";
  }
  bool ff = is_float(from);
  bool ti = to == DType::kI32 || to == DType::kI64;
  std::string ty = type(to).value_or("float");
  if (ff && ti) return "fe_f2i<" + ty + ">(" + v + ")";
  if (to == DType::kBool) return "(" + v + " != 0)";
  return "(" + ty + ")" + v;
}

std::string ScalarEmitter::def(const Kernel& k, size_t i, const std::vector<std::string>& t,
                               const std::vector<std::string>& in_names, const Ident& ident) const {
  const ScalarExpr& e = k.body.at(static_cast<int>(i));
  std::string ty = type(e.dtype).value_or("float");
  std::string rhs = e.kind == ScalarKind::kCast
                        ? cast(k.body.at(e.args[0]).dtype, e.dtype, t[e.args[0]])
                        : expr(e, t, in_names, ident);
  return "const " + ty + " " + t[i] + " = " + rhs + ";\n";
}

std::string ScalarEmitter::expr(const ScalarExpr& e, const std::vector<std::string>& t,
                                const std::vector<std::string>& in_names,
                                const Ident& ident) const {
  auto a = [&](size_t i) { return t[e.args[i]]; };
  const std::string T = type(e.dtype).value_or("float");
  switch (e.kind) {
    case ScalarKind::kLoad:
      return in_names[e.input] + "[" + e.address.to_c_code(ident) + "]";
    case ScalarKind::kConst:
      return literal(e.dtype, e.value);
    case ScalarKind::kSelect:
      return "(" + a(0) + " ? " + a(1) + " : " + a(2) + ")";
    case ScalarKind::kCast:
      return "";  // needs the source dtype: see cast()
    case ScalarKind::kSymbol:
      return "(" + T + ")" + e.address.to_c_code(ident);
    case ScalarKind::kReduce:
      return "";  // accumulated by the row kernel's phase loop
    default:
      break;
  }
  // Every function is spelled by its row of the scalar-function table.
  const ScalarFunction* f = find_scalar_function(e.fn);
  if (!f) return "/* unknown fn " + e.fn + " */";
  SpellContext c;
  for (int arg : e.args) c.a.push_back(t[arg]);
  for (double p : e.params) c.p.push_back(literal(e.dtype, p));
  c.T = T;
  c.math_prefix = s_.math_prefix;
  return f->spell(c);
}

const char* scalar_helpers_source() {
  return R"(
FE_FN int64_t fe_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
FE_FN int64_t fe_mod(int64_t a, int64_t b) { return a - fe_floordiv(a, b) * b; }
FE_FN int64_t fe_max(int64_t a, int64_t b) { return a > b ? a : b; }
FE_FN int64_t fe_min(int64_t a, int64_t b) { return a < b ? a : b; }
// Float -> integer as the reference kernels do it: truncate, saturate, NaN -> 0.
template <class I, class F>
FE_FN I fe_f2i(F v) {
  if (fe_isnan(v)) return 0;
  if (v <= (F)fe_int_min<I>()) return fe_int_min<I>();
  if (v >= (F)fe_int_max<I>()) return fe_int_max<I>();
  return (I)v;
}
// One exp: e = exp(-|x|) is exp(-x) for x >= 0 and exp(x) below (NaN: e/(1+e) is NaN).
template <class T> FE_FN T fe_sigmoid(T x) {
  const T e = FE_MATH(exp)(x >= T(0) ? -x : x);
  return x >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
}
template <class T> FE_FN T fe_softplus(T x) {
  return x > T(0) ? x + FE_MATH(log1p)(FE_MATH(exp)(-x)) : FE_MATH(log1p)(FE_MATH(exp)(x));
}
// clip(alpha * x + beta, 0, 1) with NaN kept (fmin/fmax would drop it).
template <class T> FE_FN T fe_hardsigmoid(T x, T alpha, T beta) {
  T v = alpha * x + beta;
  return v != v ? v : (v < T(0) ? T(0) : (v > T(1) ? T(1) : v));
}
// NaN wins; on ties the first operand (max(+0, -0) is +0), as the reference kernels fold.
template <class T> FE_FN T fe_max_nan(T a, T b) {
  return fe_isnan(a) || fe_isnan(b) ? fe_nan<T>() : (a < b ? b : a);
}
template <class T> FE_FN T fe_min_nan(T a, T b) {
  return fe_isnan(a) || fe_isnan(b) ? fe_nan<T>() : (b < a ? b : a);
}
// Max after min: lo > hi gives hi everywhere, as the spec asks; NaN stays.
template <class T> FE_FN T fe_clip(T x, T lo, T hi) {
  const T v = x < lo ? lo : x;
  return v > hi ? hi : v;
}
)";
}

}  // namespace ferrite
