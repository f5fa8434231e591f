#include "ops/scalar_functions.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/vector_epilogues.h"
#include "support/target_clones.h"

namespace ferrite {

namespace {

// The epilogue loop of a row: what runs over every output of a library GEMM or convolution whose
// activation the library does not compute as defined (oneDNN's relu and clip turn NaN into 0).
// It is a pass over every conv output of a CNN: cloned per ISA (support/target_clones.h).
template <class L>
FERRITE_TEMPLATE_TARGET_CLONES void epilogue_loop(float* __restrict y, const float* __restrict res,
                                                  int64_t n, const float* p) {
  // Two loops rather than adding a zero residual: -0 + 0 is +0.
  if (res) {
    for (int64_t i = 0; i < n; ++i) {
      const float a[2] = {y[i] + res[i], 0.0f};
      y[i] = static_cast<float>(L{}(a, p));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float a[2] = {y[i], 0.0f};
      y[i] = static_cast<float>(L{}(a, p));
    }
  }
}

// A reference evaluation from one generic lambda `(auto* a, auto* p)`, instantiated for both
// compute types and as the epilogue loop (binary rows read a[1] only through the scalar forms).
template <class L>
ScalarEval ev(L) {
  return {[](const float* a, const float* p) { return static_cast<float>(L{}(a, p)); },
          [](const double* a, const double* p) { return static_cast<double>(L{}(a, p)); },
          &epilogue_loop<L>};
}

// SiLU's: the hand-vectorised loop where the CPU allows (ops/vector_epilogues.h), else the
// generic one.
template <class L>
ScalarEval ev_silu(L l) {
  ScalarEval e = ev(l);
  e.f32_epilogue = [](float* y, const float* r, int64_t n, const float* p) {
    silu_epilogue(y, r, n, p, &epilogue_loop<L>);
  };
  return e;
}

using S = const SpellContext&;

// Spellings shared by several rows.
std::string infix(S c, const char* op) {
  return c.a[0] + " " + op + " " + c.a[1];
}
std::string call1(S c, const char* fn) {
  return c.math(fn) + "(" + c.a[0] + ")";
}

template <class C>
C sigmoid(C x) {  // never exp of a large positive number
  return x >= C(0) ? C(1) / (C(1) + std::exp(-x)) : std::exp(x) / (C(1) + std::exp(x));
}
template <class C>
C softplus(C x) {  // log(1 + e^x) without overflow for large x
  return x > C(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

const std::vector<ScalarFunction> kFunctions = {
    // Arithmetic.
    {.name = "add",
     .onnx_op = "Add",
     .arity = 2,
     .spell = [](S c) { return infix(c, "+"); },
     .ref = ev([](auto* a, auto*) { return a[0] + a[1]; })},
    {.name = "sub",
     .onnx_op = "Sub",
     .arity = 2,
     .spell = [](S c) { return infix(c, "-"); },
     .ref = ev([](auto* a, auto*) { return a[0] - a[1]; })},
    {.name = "mul",
     .onnx_op = "Mul",
     .arity = 2,
     .spell = [](S c) { return infix(c, "*"); },
     .ref = ev([](auto* a, auto*) { return a[0] * a[1]; })},
    {.name = "div",
     .onnx_op = "Div",
     .arity = 2,
     .spell = [](S c) { return infix(c, "/"); },
     .ref = ev([](auto* a, auto*) { return a[0] / a[1]; })},
    {.name = "pow",
     .onnx_op = "Pow",
     .arity = 2,
     .cost = FnCost::kCostly,
     .spell = [](S c) { return c.math("pow") + "(" + c.a[0] + ", " + c.a[1] + ")"; },
     .ref = ev([](auto* a, auto*) { return std::pow(a[0], a[1]); })},
    // NaN wins; otherwise the first operand on ties (max(+0, -0) is +0), as the reference folds.
    {.name = "max",
     .onnx_op = "Max",
     .arity = 2,
     .spell = [](S c) { return "fe_max_nan<" + c.T + ">(" + c.a[0] + ", " + c.a[1] + ")"; },
     .ref = ev([](auto* a, auto*) {
       return a[0] != a[0] ? a[0] : (a[1] != a[1] ? a[1] : (a[0] < a[1] ? a[1] : a[0]));
     })},
    {.name = "min",
     .onnx_op = "Min",
     .arity = 2,
     .spell = [](S c) { return "fe_min_nan<" + c.T + ">(" + c.a[0] + ", " + c.a[1] + ")"; },
     .ref = ev([](auto* a, auto*) {
       return a[0] != a[0] ? a[0] : (a[1] != a[1] ? a[1] : (a[1] < a[0] ? a[1] : a[0]));
     })},
    // Comparisons and logic.
    {.name = "eq",
     .onnx_op = "Equal",
     .arity = 2,
     .types = FnTypes::kCompare,
     .spell = [](S c) { return infix(c, "=="); },
     .ref = ev([](auto* a, auto*) { return a[0] == a[1]; })},
    {.name = "lt",
     .onnx_op = "Less",
     .arity = 2,
     .types = FnTypes::kCompare,
     .spell = [](S c) { return infix(c, "<"); },
     .ref = ev([](auto* a, auto*) { return a[0] < a[1]; })},
    {.name = "le",
     .onnx_op = "LessOrEqual",
     .arity = 2,
     .types = FnTypes::kCompare,
     .spell = [](S c) { return infix(c, "<="); },
     .ref = ev([](auto* a, auto*) { return a[0] <= a[1]; })},
    {.name = "gt",
     .onnx_op = "Greater",
     .arity = 2,
     .types = FnTypes::kCompare,
     .spell = [](S c) { return infix(c, ">"); },
     .ref = ev([](auto* a, auto*) { return a[0] > a[1]; })},
    {.name = "ge",
     .onnx_op = "GreaterOrEqual",
     .arity = 2,
     .types = FnTypes::kCompare,
     .spell = [](S c) { return infix(c, ">="); },
     .ref = ev([](auto* a, auto*) { return a[0] >= a[1]; })},
    {.name = "and",
     .onnx_op = "And",
     .arity = 2,
     .types = FnTypes::kLogic,
     .spell = [](S c) { return infix(c, "&&"); },
     .ref = ev([](auto* a, auto*) { return a[0] != 0 && a[1] != 0; })},
    {.name = "or",
     .onnx_op = "Or",
     .arity = 2,
     .types = FnTypes::kLogic,
     .spell = [](S c) { return infix(c, "||"); },
     .ref = ev([](auto* a, auto*) { return a[0] != 0 || a[1] != 0; })},
    {.name = "xor",
     .onnx_op = "Xor",
     .arity = 2,
     .types = FnTypes::kLogic,
     .spell = [](S c) { return infix(c, "!="); },
     .ref = ev([](auto* a, auto*) { return (a[0] != 0) != (a[1] != 0); })},
    {.name = "not",
     .onnx_op = "Not",
     .types = FnTypes::kLogic,
     .spell = [](S c) { return "!" + c.a[0]; },
     .ref = ev([](auto* a, auto*) { return a[0] == 0; })},
    {.name = "isnan",
     .onnx_op = "IsNaN",
     .types = FnTypes::kPredicate,
     .spell = [](S c) { return "fe_isnan(" + c.a[0] + ")"; },
     .ref = ev([](auto* a, auto*) { return a[0] != a[0]; })},
    // Math.
    {.name = "exp",
     .onnx_op = "Exp",
     .cost = FnCost::kCostly,
     .spell = [](S c) { return call1(c, "exp"); },
     .ref = ev([](auto* a, auto*) { return std::exp(a[0]); })},
    {.name = "log",
     .onnx_op = "Log",
     .cost = FnCost::kCostly,
     .spell = [](S c) { return call1(c, "log"); },
     .ref = ev([](auto* a, auto*) { return std::log(a[0]); })},
    {.name = "sqrt",
     .onnx_op = "Sqrt",
     .cost = FnCost::kCostly,
     .spell = [](S c) { return call1(c, "sqrt"); },
     .ref = ev([](auto* a, auto*) { return std::sqrt(a[0]); })},
    {.name = "erf",
     .onnx_op = "Erf",
     .cost = FnCost::kCostly,
     .spell = [](S c) { return call1(c, "erf"); },
     .ref = ev([](auto* a, auto*) { return std::erf(a[0]); })},
    {.name = "sin",
     .onnx_op = "Sin",
     .cost = FnCost::kCostly,
     .spell = [](S c) { return call1(c, "sin"); },
     .ref = ev([](auto* a, auto*) { return std::sin(a[0]); })},
    {.name = "cos",
     .onnx_op = "Cos",
     .cost = FnCost::kCostly,
     .spell = [](S c) { return call1(c, "cos"); },
     .ref = ev([](auto* a, auto*) { return std::cos(a[0]); })},
    {.name = "floor",
     .onnx_op = "Floor",
     .spell = [](S c) { return call1(c, "floor"); },
     .ref = ev([](auto* a, auto*) { return std::floor(a[0]); })},
    {.name = "ceil",
     .onnx_op = "Ceil",
     .spell = [](S c) { return call1(c, "ceil"); },
     .ref = ev([](auto* a, auto*) { return std::ceil(a[0]); })},
    // Half to even: nearbyint in the default rounding mode.
    {.name = "round",
     .onnx_op = "Round",
     .spell = [](S c) { return call1(c, "nearbyint"); },
     .ref = ev([](auto* a, auto*) { return std::nearbyint(a[0]); })},
    {.name = "abs",
     .onnx_op = "Abs",
     .spell = [](S c) { return call1(c, "fabs"); },
     .ref = ev([](auto* a, auto*) { return std::fabs(a[0]); })},
    // -x, not 0 - x: -(+0) is -0.
    {.name = "neg",
     .onnx_op = "Neg",
     .spell = [](S c) { return "-" + c.a[0]; },
     .ref = ev([](auto* a, auto*) { return -a[0]; })},
    {.name = "recip",
     .onnx_op = "Reciprocal",
     .spell = [](S c) { return c.c("1") + " / " + c.a[0]; },
     .ref = ev([](auto* a, auto*) { return decltype(a[0] + 0)(1) / a[0]; })},
    // Keeps 0 (with its sign) and NaN.
    {.name = "sign",
     .onnx_op = "Sign",
     .spell =
         [](S c) {
           const std::string& x = c.a[0];
           return "(" + x + " > " + c.c("0") + " ? " + c.c("1") + " : (" + x + " < " + c.c("0") +
                  " ? " + c.c("-1") + " : " + x + "))";
         },
     .ref = ev([](auto* a, auto*) {
       using C = decltype(a[0] + 0);
       return a[0] > C(0) ? C(1) : (a[0] < C(0) ? C(-1) : a[0]);
     })},
    // Activations.
    {.name = "relu",
     .onnx_op = "Relu",
     .spell =
         [](S c) {
           const std::string& x = c.a[0];
           return "(" + x + " > " + c.c("0") + " || " + x + " != " + x + ") ? " + x + " : " +
                  c.c("0");
         },
     .ref = ev([](auto* a, auto*) {
       using C = decltype(a[0] + 0);
       return a[0] > C(0) ? a[0] : (a[0] != a[0] ? a[0] : C(0));
     }),
     // oneDNN's JIT relu (alpha 0) is a max instruction: NaN -> 0 (measured, oneDNN 2.6 avx2).
     .epilogue = "relu",
     .onednn = OnednnEltwise::kRelu,
     .onednn_keeps_nan = false,
     .cublaslt = CublasLtEpilogue::kRelu,
     .cudnn = CudnnActivation::kRelu},
    {.name = "tanh",
     .onnx_op = "Tanh",
     .cost = FnCost::kCostly,
     .spell = [](S c) { return call1(c, "tanh"); },
     .ref = ev([](auto* a, auto*) { return std::tanh(a[0]); }),
     .epilogue = "tanh",
     .onednn = OnednnEltwise::kTanh},
    {.name = "sigmoid",
     .onnx_op = "Sigmoid",
     .cost = FnCost::kCostly,
     .spell = [](S c) { return "fe_sigmoid<" + c.T + ">(" + c.a[0] + ")"; },
     .ref = ev([](auto* a, auto*) { return sigmoid(a[0]); }),
     .epilogue = "sigmoid",
     .onednn = OnednnEltwise::kLogistic},
    // x * sigmoid(x) (SiLU / Swish): ferrite.Silu, which fuse-silu makes of Mul(x, Sigmoid(x)).
    {.name = "silu",
     .onnx_op = "Silu",
     .domain = "ferrite",
     .cost = FnCost::kCostly,
     .spell = [](S c) { return c.a[0] + " * fe_sigmoid<" + c.T + ">(" + c.a[0] + ")"; },
     .ref = ev_silu([](auto* a, auto*) { return a[0] * sigmoid(a[0]); }),
     .epilogue = "silu",
     .onednn = OnednnEltwise::kSwish,
     .epilogue_loop_faster = &silu_epilogue_vectorised},
    {.name = "gelu",
     .onnx_op = "Gelu",
     .variant_attr = "approximate",
     .variant_value = "none",
     .cost = FnCost::kCostly,
     .spell =
         [](S c) {
           return c.c("0.5") + " * " + c.a[0] + " * (" + c.c("1") + " + " + c.math("erf") + "(" +
                  c.a[0] + " * " + c.c("0.70710678118654752440") + "))";
         },
     .ref = ev([](auto* a, auto*) {
       using C = decltype(a[0] + 0);
       return C(0.5) * a[0] * (C(1) + std::erf(a[0] * C(0.7071067811865476)));
     }),
     .epilogue = "gelu",
     .onednn = OnednnEltwise::kGeluErf},
    {.name = "gelu_tanh",
     .onnx_op = "Gelu",
     .variant_attr = "approximate",
     .variant_value = "tanh",
     .cost = FnCost::kCostly,
     .spell =
         [](S c) {
           const std::string& x = c.a[0];
           return c.c("0.5") + " * " + x + " * (" + c.c("1") + " + " + c.math("tanh") + "(" +
                  c.c("0.79788456080286535588") + " * (" + x + " + " + c.c("0.044715") + " * " + x +
                  " * " + x + " * " + x + ")))";
         },
     .ref = ev([](auto* a, auto*) {
       using C = decltype(a[0] + 0);
       const C x = a[0];
       return C(0.5) * x *
              (C(1) + std::tanh(C(0.7978845608028654) * (x + C(0.044715) * x * x * x)));
     }),
     .epilogue = "gelu_tanh",
     .onednn = OnednnEltwise::kGeluTanh,
     .cublaslt = CublasLtEpilogue::kGeluTanh},
    {.name = "leakyrelu",
     .onnx_op = "LeakyRelu",
     .param_source = ParamSource::kAttributes,
     .n_params = 1,
     .param_attrs = {"alpha"},
     .param_defaults = {0.01f},
     .spell =
         [](S c) {
           return c.a[0] + " < " + c.c("0") + " ? " + c.p[0] + " * " + c.a[0] + " : " + c.a[0];
         },
     .ref = ev([](auto* a, auto* p) {
       using C = decltype(a[0] + 0);
       return a[0] < C(0) ? p[0] * a[0] : a[0];
     }),
     // oneDNN's relu with alpha != 0 selects by a compare and keeps NaN.
     .epilogue = "leaky_relu",
     .onednn = OnednnEltwise::kRelu},
    {.name = "elu",
     .onnx_op = "Elu",
     .param_source = ParamSource::kAttributes,
     .n_params = 1,
     .param_attrs = {"alpha"},
     .param_defaults = {1.0f},
     .cost = FnCost::kCostly,
     .spell =
         [](S c) {
           return c.a[0] + " < " + c.c("0") + " ? " + c.p[0] + " * " + c.math("expm1") + "(" +
                  c.a[0] + ") : " + c.a[0];
         },
     .ref = ev([](auto* a, auto* p) {
       using C = decltype(a[0] + 0);
       return a[0] < C(0) ? p[0] * std::expm1(a[0]) : a[0];
     })},
    {.name = "softplus",
     .onnx_op = "Softplus",
     .cost = FnCost::kCostly,
     .spell = [](S c) { return "fe_softplus<" + c.T + ">(" + c.a[0] + ")"; },
     .ref = ev([](auto* a, auto*) { return softplus(a[0]); })},
    {.name = "softsign",
     .onnx_op = "Softsign",
     .spell =
         [](S c) {
           return c.a[0] + " / (" + c.c("1") + " + " + c.math("fabs") + "(" + c.a[0] + "))";
         },
     .ref = ev([](auto* a, auto*) {
       using C = decltype(a[0] + 0);
       return a[0] / (C(1) + std::fabs(a[0]));
     })},
    // clip(alpha * x + beta, 0, 1), NaN kept (fmin / fmax would drop it).
    {.name = "hardsigmoid",
     .onnx_op = "HardSigmoid",
     .param_source = ParamSource::kAttributes,
     .n_params = 2,
     .param_attrs = {"alpha", "beta"},
     .param_defaults = {0.2f, 0.5f},
     .spell =
         [](S c) {
           return "fe_hardsigmoid<" + c.T + ">(" + c.a[0] + ", " + c.p[0] + ", " + c.p[1] + ")";
         },
     .ref = ev([](auto* a, auto* p) {
       using C = decltype(a[0] + 0);
       const C v = p[0] * a[0] + p[1];
       return v != v ? v : std::max(C(0), std::min(C(1), v));
     }),
     .epilogue = "hard_sigmoid",
     .onednn = OnednnEltwise::kLinearThenClip01,
     .onednn_keeps_nan = false},
    {.name = "hardswish",
     .onnx_op = "HardSwish",
     .spell =
         [](S c) {
           return c.a[0] + " * " + c.math("fmax") + "(" + c.c("0") + ", " + c.math("fmin") + "(" +
                  c.c("1") + ", " + c.a[0] + " / " + c.c("6") + " + " + c.c("0.5") + "))";
         },
     .ref = ev([](auto* a, auto*) {
       using C = decltype(a[0] + 0);
       return a[0] * std::max(C(0), std::min(C(1), a[0] / C(6) + C(0.5)));
     }),
     // Exact up to rounding: oneDNN associates differently.
     .epilogue = "hard_swish",
     .onednn = OnednnEltwise::kHardswish},
    // Max after min: min > max gives max everywhere, as the spec asks; NaN stays.
    {.name = "clip",
     .onnx_op = "Clip",
     .param_source = ParamSource::kConstantBounds,
     .n_params = 2,
     .spell =
         [](S c) { return "fe_clip<" + c.T + ">(" + c.a[0] + ", " + c.p[0] + ", " + c.p[1] + ")"; },
     .ref = ev([](auto* a, auto* p) {
       auto v = a[0] < p[0] ? p[0] : a[0];
       return v > p[1] ? p[1] : v;
     }),
     // oneDNN's JIT clip is min / max instructions: NaN -> the bound.
     .epilogue = "clip",
     .onednn = OnednnEltwise::kClip,
     .onednn_keeps_nan = false},
};

}  // namespace

int ScalarFunction::index() const {
  return static_cast<int>(this - kFunctions.data());
}

const std::vector<ScalarFunction>& scalar_functions() {
  return kFunctions;
}

const ScalarFunction* find_scalar_function(const std::string& name) {
  for (const ScalarFunction& f : kFunctions)
    if (name == f.name) return &f;
  return nullptr;
}

const ScalarFunction* scalar_function_of(const Node& n) {
  for (const ScalarFunction& f : kFunctions) {
    if (!f.onnx_op || n.op_type != f.onnx_op || n.domain != f.domain) continue;
    if (f.variant_attr && n.attr_string(f.variant_attr, "none") != f.variant_value) continue;
    return &f;
  }
  return nullptr;
}

const ScalarFunction* epilogue_function(const std::string& activation) {
  for (const ScalarFunction& f : kFunctions)
    if (f.epilogue && activation == f.epilogue) return &f;
  return nullptr;
}

std::optional<std::vector<double>> function_params(
    const ScalarFunction& f, const Node& n, std::optional<double> (*constant)(const Value*)) {
  std::vector<double> p;
  switch (f.param_source) {
    case ParamSource::kNone:
      break;
    case ParamSource::kAttributes:
      for (int i = 0; i < f.n_params; ++i)
        p.push_back(n.attr_float(f.param_attrs[i], f.param_defaults[i]));
      break;
    case ParamSource::kConstantBounds: {
      // An absent bound is the compute type's lowest / max, as in the reference kernel.
      const bool f64 = n.inputs[0] && n.inputs[0]->type.dtype == DType::kF64;
      const double hi = f64 ? std::numeric_limits<double>::max()
                            : static_cast<double>(std::numeric_limits<float>::max());
      for (size_t i = 1; i < 3; ++i) {
        const Value* b = n.input(i);
        if (!b) {
          p.push_back(i == 1 ? -hi : hi);
          continue;
        }
        auto v = constant(b);
        if (!v) return std::nullopt;
        p.push_back(*v);
      }
      break;
    }
  }
  return p;
}

}  // namespace ferrite
