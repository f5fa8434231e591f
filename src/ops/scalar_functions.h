// The scalar functions of pointwise code, in one table: one row per function with everything the
// stages need to know about it, so that adding a pointwise function is adding one row.
//
// A row says which ONNX op (and attribute variant) computes the function, its arity, operand
// types and parameters (attributes with defaults, or Clip's constant bounds), how costly it is
// next to keeping its value (row kernels decide what to keep and stash by it), its spelling in the
// C-family dialects (given the operands' text, the C type and the dialect's math prefix), a
// reference evaluation in the compute types, the activation name a fused epilogue stores when it
// is one, and how the libraries run it as an epilogue (oneDNN eltwise post-op, cuBLASLt epilogue).
// Readers: lowering (lower/pointwise_ops.cpp), the scalar emitter (codegen/scalar_emitter.cpp),
// row kernels' cost decisions (codegen/row_analysis.cpp), epilogue fusion and fused reference
// kernels (ops/activation_epilogue.h), the cpu oneDNN mapping and the cuda library's epilogue
// kernels (which spell every epilogue row in their `fe_act`).
//
// It lives in src/ops because the rows are function definitions, next to the op table whose
// reference kernels they must agree with (tests/unit/scalar_functions_test.cpp checks that on
// sample values, and that the cpu device's generated code agrees too).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace ferrite {

// What a value costs to compute again, next to keeping it: kCheap (arithmetic, compares,
// selects, min/max) is recomputed in every pass of a row kernel that needs it; kCostly (a libm
// call) is kept in registers between passes (cuda) or stashed in the output row (host).
enum class FnCost : uint8_t { kCheap, kCostly };

// Operand and result types: kFloat takes and gives the (float) compute type; kCompare takes two
// values of one type and gives bool; kLogic takes and gives bool; kPredicate takes a float and
// gives bool.
enum class FnTypes : uint8_t { kFloat, kCompare, kLogic, kPredicate };

// Where the parameters come from on the ONNX node: attributes (with defaults), or Clip's optional
// constant inputs 1 and 2 (absent: the compute type's lowest / max, as the reference kernel).
enum class ParamSource : uint8_t { kNone, kAttributes, kConstantBounds };

// The oneDNN eltwise post-op that computes an epilogue row, its alpha and beta being the row's
// parameters (0 when it has fewer). kLinearThenClip01: linear(alpha, beta), then clip(0, 1).
enum class OnednnEltwise : uint8_t {
  kNone,
  kRelu,
  kTanh,
  kLogistic,
  kGeluErf,
  kGeluTanh,
  kClip,
  kLinearThenClip01,
  kHardswish,
  kSwish  // x * sigmoid(alpha x), alpha 1
};

// The cuBLASLt epilogue that computes an epilogue row inside the GEMM (others run in the cuda
// library's epilogue kernel). cuBLASLt's GELU epilogues compute the tanh approximation.
enum class CublasLtEpilogue : uint8_t { kNone, kRelu, kGeluTanh };
// The cuDNN activation that computes an epilogue row inside the fused convolution call
// (cudnnConvolutionBiasActivationForward; others run in the cuda library's epilogue kernel).
enum class CudnnActivation : uint8_t { kNone, kRelu };

// The text a dialect writes for one application.
struct SpellContext {
  std::vector<std::string> a;  // operand expressions
  std::vector<std::string> p;  // parameter expressions (literals, or a library kernel's names)
  std::string T;               // the result's C type (kFloat rows; the operands' for the others)
  std::string math_prefix;     // "std::" on hosts, "" for CUDA's overloads
  std::string math(const char* fn) const { return math_prefix + fn; }
  std::string c(const char* v) const { return "(" + T + ")" + v; }  // a constant of type T
};

struct ScalarEval {
  float (*f32)(const float* a, const float* p) = nullptr;
  double (*f64)(const double* a, const double* p) = nullptr;
  // Unary rows: y[i] = f(y[i] + res[i]) (res may be null) for i < n, a loop the compiler
  // vectorises (the library epilogues that run after a GEMM or convolution).
  void (*f32_epilogue)(float* y, const float* res, int64_t n, const float* p) = nullptr;
};

struct ScalarFunction {
  const char* name;     // the kernel IR's fn ("hardsigmoid")
  const char* onnx_op;  // the op computing it (of `domain`)
  // "" (ONNX) or "ferrite": functions ONNX has no op for (SiLU) are internal ops that a pass
  // recognises.
  const char* domain = "";
  // Ops with several functions pick one by a string attribute (absent reads as "none").
  const char* variant_attr = nullptr;
  const char* variant_value = nullptr;
  int arity = 1;
  FnTypes types = FnTypes::kFloat;
  ParamSource param_source = ParamSource::kNone;
  int n_params = 0;
  const char* param_attrs[2] = {nullptr, nullptr};  // kAttributes: names
  float param_defaults[2] = {0, 0};                 // kAttributes: defaults (the op schema's)
  FnCost cost = FnCost::kCheap;
  std::string (*spell)(const SpellContext&) = nullptr;
  // The reference evaluation in the compute types (bool results as 0 / 1), with the same
  // formula and NaN behaviour as the op's reference kernel.
  ScalarEval ref;
  // Fused epilogues (ferrite.FusedMatMul, ferrite.FusedConv): the `activation` name, or nullptr.
  const char* epilogue = nullptr;
  OnednnEltwise onednn = OnednnEltwise::kNone;
  // oneDNN's post-op keeps NaN as the reference does (its JIT max / min return the bound).
  bool onednn_keeps_nan = true;
  // Where set and true, library kernels leave the row to the epilogue loop (ref.f32_epilogue)
  // rather than their own post-op: that loop is the faster (SiLU's vectorised one).
  bool (*epilogue_loop_faster)() = nullptr;
  CublasLtEpilogue cublaslt = CublasLtEpilogue::kNone;
  CudnnActivation cudnn = CudnnActivation::kNone;

  template <class C>
  C eval(const C* a, const C* p) const {
    if constexpr (sizeof(C) == sizeof(float))
      return ref.f32(a, p);
    else
      return ref.f64(a, p);
  }
  int index() const;  // position in scalar_functions() (stable within a build)
};

const std::vector<ScalarFunction>& scalar_functions();
// By kernel IR name; null when unknown.
const ScalarFunction* find_scalar_function(const std::string& name);
// The function a default-domain node computes (op type and variant), or null.
const ScalarFunction* scalar_function_of(const Node& n);
// The row whose epilogue name is `activation`; null when none.
const ScalarFunction* epilogue_function(const std::string& activation);
// The row's parameters on `n` (attributes, or Clip's bounds in the compute type of input 0);
// nullopt when a bound is not a compile-time scalar. `constant` reads a value's compile-time
// scalar (null when it has none).
std::optional<std::vector<double>> function_params(const ScalarFunction& f, const Node& n,
                                                   std::optional<double> (*constant)(const Value*));

}  // namespace ferrite
