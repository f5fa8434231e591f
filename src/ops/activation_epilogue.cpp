#include "ops/activation_epilogue.h"

namespace ferrite {

std::vector<float> Activation::params() const {
  if (!fn) return {};
  std::vector<float> p = {alpha, beta};
  p.resize(static_cast<size_t>(fn->n_params));
  return p;
}

Expected<Activation> parse_activation(const std::string& name, const std::vector<float>& params) {
  if (name == "none") {
    if (!params.empty())
      return err("activation \"none\" takes 0 activation_params, got ", params.size());
    return Activation{};
  }
  const ScalarFunction* f = epilogue_function(name);
  if (!f) return err("unknown activation \"", name, "\"");
  if (params.size() != static_cast<size_t>(f->n_params))
    return err("activation \"", name, "\" takes ", f->n_params, " activation_params, got ",
               params.size());
  Activation a;
  a.fn = f;
  if (f->n_params > 0) a.alpha = params[0];
  if (f->n_params > 1) a.beta = params[1];
  return a;
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
  if (n.outputs.size() != 1 || n.inputs.empty() || !n.inputs[0]) return std::nullopt;
  const ScalarFunction* f = scalar_function_of(n);
  if (!f || !f->epilogue) return std::nullopt;
  // Only Clip's bounds arrive as inputs.
  if (f->param_source != ParamSource::kConstantBounds && n.inputs.size() != 1) return std::nullopt;
  auto p = function_params(*f, n, constant);
  if (!p) return std::nullopt;
  // The fused node stores float parameters: they must be exact as float (an absent Clip bound
  // of a double input, double's lowest / max, is not).
  for (double v : *p)
    if (static_cast<double>(static_cast<float>(v)) != v) return std::nullopt;
  Activation a;
  a.fn = f;
  if (p->size() > 0) a.alpha = static_cast<float>((*p)[0]);
  if (p->size() > 1) a.beta = static_cast<float>((*p)[1]);
  return a;
}

}  // namespace ferrite
