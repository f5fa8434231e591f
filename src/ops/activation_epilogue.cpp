#include "ops/activation_epilogue.h"

#include <limits>

namespace ferrite {

namespace {

struct KindInfo {
  ActKind kind;
  const char* name;
  size_t params;
};

constexpr KindInfo kKinds[] = {{ActKind::kNone, "none", 0},
                               {ActKind::kRelu, "relu", 0},
                               {ActKind::kTanh, "tanh", 0},
                               {ActKind::kSigmoid, "sigmoid", 0},
                               {ActKind::kGelu, "gelu", 0},
                               {ActKind::kGeluTanh, "gelu_tanh", 0},
                               {ActKind::kLeakyRelu, "leaky_relu", 1},
                               {ActKind::kClip, "clip", 2},
                               {ActKind::kHardSigmoid, "hard_sigmoid", 2},
                               {ActKind::kHardSwish, "hard_swish", 0}};

const KindInfo& info(ActKind k) {
  for (const auto& i : kKinds)
    if (i.kind == k) return i;
  return kKinds[0];
}

}  // namespace

const char* Activation::name() const {
  return info(kind).name;
}

std::vector<float> Activation::params() const {
  switch (info(kind).params) {
    case 1:
      return {alpha};
    case 2:
      return {alpha, beta};
    default:
      return {};
  }
}

Expected<Activation> parse_activation(const std::string& name, const std::vector<float>& params) {
  for (const auto& i : kKinds) {
    if (name != i.name) continue;
    if (params.size() != i.params)
      return err("activation \"", name, "\" takes ", i.params, " activation_params, got ",
                 params.size());
    Activation a;
    a.kind = i.kind;
    if (i.params > 0) a.alpha = params[0];
    if (i.params > 1) a.beta = params[1];
    return a;
  }
  return err("unknown activation \"", name, "\"");
}

Expected<Activation> activation_of(const Node& fused) {
  auto a = parse_activation(fused.attr_string("activation", "none"),
                            fused.attr_floats("activation_params"));
  if (!a) return err(fused.describe(), ": ", a.status().message());
  return a;
}

void set_activation_attrs(AttributeMap& attrs, const Activation& a) {
  attrs["activation"] = Attribute(std::string(a.name()));
  if (!a.params().empty()) attrs["activation_params"] = Attribute(a.params());
}

std::optional<Activation> activation_of_onnx_node(const Node& n,
                                                  std::optional<double> (*constant)(const Value*)) {
  if (!n.domain.empty() || n.outputs.size() != 1 || n.inputs.empty() || !n.inputs[0])
    return std::nullopt;
  const std::string& op = n.op_type;
  Activation a;
  if (op == "Clip") {
    // Bounds must be exact as float; an absent bound is the compute type's lowest / max, which
    // is float's only for types computed in float.
    const DType t = n.inputs[0]->type.dtype;
    const bool float_compute = t == DType::kF32 || t == DType::kF16 || t == DType::kBF16;
    a.kind = ActKind::kClip;
    a.alpha = std::numeric_limits<float>::lowest();
    a.beta = std::numeric_limits<float>::max();
    for (size_t i = 1; i < 3; ++i) {
      const Value* b = n.input(i);
      if (!b) {
        if (!float_compute) return std::nullopt;
        continue;
      }
      auto v = constant(b);
      if (!v || static_cast<double>(static_cast<float>(*v)) != *v) return std::nullopt;
      (i == 1 ? a.alpha : a.beta) = static_cast<float>(*v);
    }
    return a;
  }
  if (n.inputs.size() != 1) return std::nullopt;
  if (op == "Relu") {
    a.kind = ActKind::kRelu;
  } else if (op == "Tanh") {
    a.kind = ActKind::kTanh;
  } else if (op == "Sigmoid") {
    a.kind = ActKind::kSigmoid;
  } else if (op == "Gelu") {
    a.kind = n.attr_string("approximate", "none") == "tanh" ? ActKind::kGeluTanh : ActKind::kGelu;
  } else if (op == "LeakyRelu") {
    a.kind = ActKind::kLeakyRelu;
    a.alpha = n.attr_float("alpha", 0.01f);
  } else if (op == "HardSigmoid") {
    a.kind = ActKind::kHardSigmoid;
    a.alpha = n.attr_float("alpha", 0.2f);
    a.beta = n.attr_float("beta", 0.5f);
  } else if (op == "HardSwish") {
    a.kind = ActKind::kHardSwish;
  } else {
    return std::nullopt;
  }
  return a;
}

}  // namespace ferrite
