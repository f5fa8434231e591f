// The activation of a fused op's epilogue (ferrite.FusedMatMul, ferrite.FusedConv): how the
// passes recognise it in a graph, how the fused node stores it and how reference kernels apply
// it. What it computes is a row of the scalar-function table (ops/scalar_functions.h): the rows
// with an `epilogue` name are the activations, and their formulas, parameters and library
// mappings are read from there.
//
// On a node it is the string attribute `activation` (a row's epilogue name, or none) and, for
// the rows with parameters, the float list `activation_params`:
//   none, relu, tanh, sigmoid, gelu (erf), gelu_tanh, hard_swish   no parameters
//   leaky_relu [alpha]   clip [min, max]   hard_sigmoid [alpha, beta]
// Each computes exactly what the ONNX op of the same meaning computes (activation.cpp), in the
// compute type, so a fused reference kernel agrees bit for bit with the unfused graph.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ops/scalar_functions.h"
#include "support/status.h"

namespace ferrite {

struct Activation {
  const ScalarFunction* fn = nullptr;  // a row with an epilogue name; null: none
  float alpha = 0, beta = 0;           // its parameters (leaky_relu: alpha; clip: min, max; ...)

  bool none() const { return fn == nullptr; }
  const char* name() const { return fn ? fn->epilogue : "none"; }
  // 0 for none, else 1 + the row's index: cache keys, and the cuda library kernels' `act`.
  int code() const { return fn ? fn->index() + 1 : 0; }
  // The attribute values that store it on a fused node (`activation_params` empty when unused).
  std::vector<float> params() const;
};

// Parses the attribute pair; error text for an unknown name or a wrong parameter count.
Expected<Activation> parse_activation(const std::string& name, const std::vector<float>& params);
// The activation stored on a fused node.
Expected<Activation> activation_of(const Node& fused);
// Stores `a` on a fused node's attributes.
void set_activation_attrs(AttributeMap& attrs, const Activation& a);

// The activation an ONNX node computes when it is a default-domain node of a scalar-function row
// with an epilogue name (Relu, Tanh, Sigmoid, Gelu, LeakyRelu, HardSigmoid, HardSwish, Clip)
// whose parameters are exact as float; Clip's min and max must be absent or one-element
// constants. `constant` reads a value's compile-time scalar (null when it has none).
std::optional<Activation> activation_of_onnx_node(const Node& n,
                                                  std::optional<double> (*constant)(const Value*));

// y = act(x): the row's reference evaluation, in the compute type.
template <class C>
C apply_activation(const Activation& a, C x) {
  if (!a.fn) return x;
  const C p[2] = {C(a.alpha), C(a.beta)};
  return a.fn->eval<C>(&x, p);
}

}  // namespace ferrite
