// prepare_model(): lowering, code generation, compilation and the prepared model (executor.h).
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "execute/model.h"
#include "lower/multi_tensor.h"
#include "memory/in_place.h"
#include "ops/interpreter.h"

namespace ferrite {

namespace {

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// FERRITE_DUMP_LOWERED=FILE: the lowered steps and the generated source.
void dump_lowered(const LoweredGraph& lg, const std::string& source) {
  const char* path = std::getenv("FERRITE_DUMP_LOWERED");
  if (!path) return;
  if (std::FILE* f = std::fopen(path, "w")) {
    std::fputs(print_lowered(lg).c_str(), f);
    std::fputs("\n", f);
    std::fputs(source.c_str(), f);
    std::fclose(f);
  }
}

Expected<CompiledModule> compile_default(const BackendParts& parts, const LoweredGraph& lg,
                                         std::string& source) {
  FERRITE_ASSIGN_OR_RETURN(source, parts.dialect->generate(lg, parts.properties));
  dump_lowered(lg, source);
  return parts.compiler->compile(source, "kernels");
}

// Whether any top-level value is a sequence or an optional (ir/value_kind.h). Subgraph values do
// not count: a control-flow node runs its bodies through the interpreter on every device.
bool has_non_tensor_values(const Graph& g) {
  for (const Value* v : g.inputs())
    if (!v->type.is_tensor()) return true;
  for (const auto& n : g.nodes())
    for (const Value* v : n->outputs)
      if (v && !v->type.is_tensor()) return true;
  return false;
}

// A graph that moves sequences or optionals between its nodes runs wholly on the host through
// the op table's kernels (ops/interpreter.h). The lowering, the arena and the device buffers
// know tensors only; such graphs (the ONNX sequence ops, list-building loops) are host work
// anyway, so they are interpreted rather than taught to every step kind.
class HostInterpretedModel : public PreparedModel {
 public:
  explicit HostInterpretedModel(const Graph& g) : interpreter_(g) {}
  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) override {
    return interpreter_.run(inputs);
  }

 private:
  GraphInterpreter interpreter_;
};

}  // namespace

Expected<std::unique_ptr<PreparedModel>> prepare_model(const Graph& graph,
                                                       std::shared_ptr<const BackendParts> parts,
                                                       const RunOptions& opts,
                                                       ExecutorConfig config) {
  auto t0 = std::chrono::steady_clock::now();
  const std::string name = parts->properties.name;
  if (has_non_tensor_values(graph)) {
    if (log_enabled("fallback"))
      std::fprintf(stderr,
                   "[fallback] %s: the graph has sequence or optional values; it runs "
                   "on the host through the op table's kernels\n",
                   name.c_str());
    return std::unique_ptr<PreparedModel>(new HostInterpretedModel(graph));
  }
  if (!parts->compiler && !config.build)
    return unsupported(name, ": the device has no compiler, so it cannot run generated kernels");
  // A device with memory of its own computes what the shape binding fixes on the host, once
  // per binding (Model::run_library_step keeps the results and their device copies).
  if (parts->properties.kind != "host") config.lowering.fixed_values_on_host = true;
  FERRITE_ASSIGN_OR_RETURN(LoweredGraph lg, lower_graph(graph, config.lowering));
  // An update graph (it writes its inputs: an optimizer step) runs its independent pointwise
  // kernels as few multi-tensor launches. FERRITE_MULTI_TENSOR=0 turns that off (measurements).
  const char* mt = std::getenv("FERRITE_MULTI_TENSOR");
  if (config.multi_tensor && !opts.outputs_into_inputs.empty() && !(mt && std::string(mt) == "0")) {
    int merged = fuse_multi_tensor(lg, config.multi_tensor_max_params);
    if (log_enabled("fusion"))
      std::fprintf(stderr, "[fusion] multi-tensor: %d kernels merged into others\n", merged);
  }
  if (config.in_place) mark_in_place_candidates(lg);  // before codegen: not __restrict
  // Outputs the caller wants in its inputs: stored there by their kernels where safe (host
  // memory: run() reads the caller's tensors in place; device memory: run_device, whose caller
  // hands the input's memory as that output's; elsewhere the executor copies them after the run).
  // Devices may prepare before their runtime exists (cuda starts the GPU meanwhile): the plan
  // depends on the lowered graph only.
  if (!opts.outputs_into_inputs.empty()) {
    int n = plan_outputs_into_inputs(lg, opts.outputs_into_inputs);
    if (log_enabled("fusion"))
      std::fprintf(stderr, "[fusion] %d graph outputs written straight into their inputs\n", n);
  }
  if (log_enabled("fusion"))
    std::fprintf(stderr,
                 "[fusion] %zu nodes -> %d generated kernels (%d with reductions; %d nodes "
                 "fused; %d horizontal merges) + %d library calls\n",
                 graph.nodes().size(), lg.kernels, lg.row_kernels, lg.fused_nodes,
                 lg.horizontal_merges, lg.library_steps);
  std::string source;
  auto compiled =
      config.build ? config.build(lg, source, parts, config) : compile_default(*parts, lg, source);
  FERRITE_RETURN_IF_ERROR(compiled.status());
  if (config.build) dump_lowered(lg, source);
  if (!config.launch) return err(name, ": the device has no kernel launcher");
  if (log_enabled("compile"))
    std::fprintf(stderr, "[compile] %s: %.3f s (%s %.3f s)%s%s\n", name.c_str(), since(t0),
                 compiled->cache_hit ? "compile cache hit, load" : config.compiler_label.c_str(),
                 compiled->seconds,
                 compiled->cache_note.empty() ? "" : "; cache: ", compiled->cache_note.c_str());
  auto model = std::make_unique<execute::Model>(graph, std::move(lg), std::move(compiled->module),
                                                std::move(parts), std::move(config), opts);
  FERRITE_RETURN_IF_ERROR(model->init(source, opts));
  return std::unique_ptr<PreparedModel>(std::move(model));
}

}  // namespace ferrite
