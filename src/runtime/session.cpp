#include "runtime/session.h"

#include "passes/pass.h"

#include "frontend/onnx/tensor_proto.h"

namespace ferrite {

Expected<std::unique_ptr<Session>> Session::load(const std::filesystem::path& model,
                                                 const std::string& device,
                                                 const RunOptions& opts) {
  FERRITE_ASSIGN_OR_RETURN(auto graph, import_onnx_file(model));
  return from_graph(std::move(graph), device, opts);
}

Expected<std::unique_ptr<Session>> Session::from_graph(std::unique_ptr<Graph> graph,
                                                       const std::string& device,
                                                       const RunOptions& opts) {
  if (!graph) return err("no graph to run");
  // A graph imported with allow_unknown_ops, or built by hand, may not be runnable: refuse it
  // here rather than let a device meet a node without a kernel.
  for (const auto& node : graph->nodes())
    if (!node->schema)
      return unsupported(node->describe(), ": op '", node->op_type, "' is not supported");
  FERRITE_RETURN_IF_ERROR(verify_graph(*graph));
  auto s = std::unique_ptr<Session>(new Session());
  s->graph_ = std::move(graph);
  s->opts_ = opts;
  FERRITE_ASSIGN_OR_RETURN(s->device_, DeviceRegistry::global().create(device));
  FERRITE_RETURN_IF_ERROR(s->prepare());
  return s;
}

Status Session::prepare() {
  std::vector<std::string> pipeline = opts_.passes ? *opts_.passes : device_->default_passes();
  if (pipeline.size() == 1 && pipeline[0] == "default") pipeline = default_pipeline();
  if (!pipeline.empty()) FERRITE_RETURN_IF_ERROR(run_pipeline(*graph_, pipeline));
  FERRITE_ASSIGN_OR_RETURN(prepared_, device_->prepare(*graph_, opts_));
  ++compiles_;
  return Status::ok();
}

Expected<std::vector<Tensor>> Session::bind_inputs(const std::vector<NamedInput>& inputs) const {
  const auto& decl = graph_->inputs();
  std::vector<Tensor> bound(decl.size());
  std::vector<bool> have(decl.size(), false);
  bool by_name = !inputs.empty();
  for (const auto& in : inputs) {
    bool found = false;
    for (const Value* v : decl) found = found || v->name == in.name;
    by_name = by_name && found;
  }
  if (!by_name && inputs.size() > decl.size())
    return err("model has ", decl.size(), " inputs, but ", inputs.size(), " were given");
  for (size_t k = 0; k < inputs.size(); ++k) {
    size_t slot = k;
    if (by_name) {
      for (size_t i = 0; i < decl.size(); ++i)
        if (decl[i]->name == inputs[k].name) slot = i;
    }
    if (have[slot]) return err("input '", decl[slot]->name, "' is given twice");
    bound[slot] = inputs[k].tensor;
    have[slot] = true;
  }
  SymBindings symbols;
  for (size_t i = 0; i < decl.size(); ++i) {
    const Value* v = decl[i];
    if (!have[i]) {
      if (v->constant) {
        bound[i] = *v->constant;
        continue;
      }
      return err("missing input '", v->name, "' (", v->type.to_string(), ")");
    }
    const Tensor& t = bound[i];
    if (!t.defined()) return err("input '", v->name, "' is an empty (undefined) tensor");
    FERRITE_RETURN_IF_ERROR(check_dims(str_cat("input '", v->name, "'"), t.dims()));
    if (t.dtype() != v->type.dtype)
      return err("input '", v->name, "' has dtype ", dtype_name(t.dtype()), ", but the model expects ",
                 dtype_name(v->type.dtype));
    const Shape& shape = v->type.shape;
    if (!shape.rank_known()) continue;
    if (t.rank() != shape.rank())
      return err("input '", v->name, "' has rank ", t.rank(), " (", dims_to_string(t.dims()),
                 "), but the model expects ", shape.rank(), " (", shape.to_string(), ")");
    for (size_t d = 0; d < shape.rank(); ++d) {
      const Dim& dim = shape[d];
      if (!dim.is_known()) continue;
      if (auto s = dim.value()) {
        if (*s != t.dim(d))
          return err("input '", v->name, "' has shape ", dims_to_string(t.dims()),
                     ", but the model expects ", shape.to_string(), " (dim ", d, ")");
      } else if (dim.expr().is_symbol()) {
        std::vector<std::string> names;
        dim.expr().collect_symbols(names);
        auto [it, inserted] = symbols.emplace(names[0], t.dim(d));
        if (!inserted && it->second != t.dim(d))
          return err("input '", v->name, "' dim ", d, " is ", t.dim(d), ", but symbol '", names[0],
                     "' is already ", it->second, " from another input");
      }
    }
  }
  return bound;
}

Expected<std::vector<Tensor>> Session::run(const std::vector<NamedInput>& inputs) {
  FERRITE_ASSIGN_OR_RETURN(auto bound, bind_inputs(inputs));
  return prepared_->run(bound);
}

}  // namespace ferrite
