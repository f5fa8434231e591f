// The activation of a fused op's epilogue (ferrite.FusedMatMul, ferrite.FusedConv), in one place:
// how the passes recognise it in a graph, how the fused node stores it, how reference kernels
// apply it and how library kernels map it to oneDNN.
//
// On a node it is the string attribute `activation` (a name below) and, for the kinds with
// parameters, the float list `activation_params`:
//   none, relu, tanh, sigmoid, gelu (erf), gelu_tanh, hard_swish   no parameters
//   leaky_relu [alpha]   clip [min, max]   hard_sigmoid [alpha, beta]
// Each computes exactly what the ONNX op of the same meaning computes (activation.cpp), in the
// compute type, so a fused reference kernel agrees bit for bit with the unfused graph.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace ferrite {

enum class ActKind {
  kNone,
  kRelu,
  kTanh,
  kSigmoid,
  kGelu,
  kGeluTanh,
  kLeakyRelu,
  kClip,
  kHardSigmoid,
  kHardSwish
};

struct Activation {
  ActKind kind = ActKind::kNone;
  float alpha = 0, beta = 0;  // leaky_relu: alpha; clip: min, max; hard_sigmoid: alpha, beta

  bool none() const { return kind == ActKind::kNone; }
  const char* name() const;
  // The attribute values that store it on a fused node (`activation_params` empty when unused).
  std::vector<float> params() const;
};

// Parses the attribute pair; error text for an unknown name or a wrong parameter count.
Expected<Activation> parse_activation(const std::string& name, const std::vector<float>& params);
// The activation stored on a fused node.
Expected<Activation> activation_of(const Node& fused);
// Stores `a` on a fused node's attributes.
void set_activation_attrs(AttributeMap& attrs, const Activation& a);

// The activation an ONNX node computes when it is a default-domain unary activation that a fused
// epilogue can take: Relu, Tanh, Sigmoid, Gelu, LeakyRelu, HardSigmoid, HardSwish, and Clip whose
// min and max are absent or one-element constants representable as float. `constant` reads a
// value's compile-time scalar (null when it has none).
std::optional<Activation> activation_of_onnx_node(const Node& n,
                                                  std::optional<double> (*constant)(const Value*));

// y = act(x), with the same formulas (and NaN behaviour) as the standalone ONNX kernels.
template <class C>
C apply_activation(const Activation& a, C x) {
  switch (a.kind) {
    case ActKind::kNone:
      return x;
    case ActKind::kRelu:
      return x > C(0) ? x : (x != x ? x : C(0));  // NaN stays NaN
    case ActKind::kTanh:
      return std::tanh(x);
    case ActKind::kSigmoid:  // never exp of a large positive number
      return x >= C(0) ? C(1) / (C(1) + std::exp(-x)) : std::exp(x) / (C(1) + std::exp(x));
    case ActKind::kGelu:
      return C(0.5) * x * (C(1) + std::erf(x * C(0.7071067811865476)));
    case ActKind::kGeluTanh: {
      const C k = C(0.7978845608028654);  // sqrt(2/pi)
      return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
    }
    case ActKind::kLeakyRelu:
      return x < 0 ? C(a.alpha) * x : x;
    case ActKind::kClip: {  // max after min: min > max gives max everywhere; NaN stays
      C v = x < C(a.alpha) ? C(a.alpha) : x;
      return v > C(a.beta) ? C(a.beta) : v;
    }
    case ActKind::kHardSigmoid: {
      C v = C(a.alpha) * x + C(a.beta);  // NaN stays NaN, as HardSigmoid
      return v != v ? v : std::max(C(0), std::min(C(1), v));
    }
    case ActKind::kHardSwish:
      return x * std::max(C(0), std::min(C(1), x / C(6) + C(0.5)));
  }
  return x;
}

}  // namespace ferrite
