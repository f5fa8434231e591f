// Fuzz target passes: bytes as an ONNX model -> import -> the default pass pipeline
// (passes/pass.h), verifying the graph after every pass. A pass may return an error only when
// evaluating a constant subgraph fails (the model would fail the same way at run time); an
// "internal error" (graph invalid after a pass) or a changed graph interface is a finding.
// Small graphs with moderate constants are also run on the reference device before and after
// the passes (symbolic dims bound to 2): the passes must not change results beyond the
// fused-pattern tolerance, NaN and infinities included.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "cts/cts.h"
#include "frontend/onnx/importer.h"
#include "fuzz_util.h"
#include "passes/pass.h"

using namespace ferrite;

namespace {

// Bounds on the numeric check, so that one input costs milliseconds.
constexpr size_t kMaxCheckedNodes = 64;
constexpr int64_t kMaxCheckedElements = 4096;

struct Interface {
  std::vector<std::string> names;
  std::vector<TensorType> types;
};

Interface interface_of(const std::vector<Value*>& values) {
  Interface f;
  for (const Value* v : values) {
    f.names.push_back(v->name);
    f.types.push_back(v->type);
  }
  return f;
}

Expected<std::vector<Tensor>> run_reference(std::unique_ptr<Graph> g,
                                            const std::vector<Session::NamedInput>& inputs) {
  RunOptions opts;
  opts.passes = std::vector<std::string>{};  // the graph as given
  FERRITE_ASSIGN_OR_RETURN(auto s, Session::from_graph(std::move(g), "reference", opts));
  return s->run(inputs);
}

// Constants beyond this magnitude (a mutated weight of 1e38) make sums overflow in one
// summation order and not in another, which is no fault of the passes. Attention masks of -1e9
// and infinities stay in.
constexpr double kMaxConstant = 1e10;

bool moderate_constants(const Graph& g) {
  auto moderate = [](const Value* v) {
    if (!v || !v->constant || !is_float(v->constant->dtype())) return true;
    for (int64_t i = 0; i < v->constant->numel(); ++i) {
      double x = v->constant->double_at(i);
      if (std::isfinite(x) && std::fabs(x) > kMaxConstant) return false;
    }
    return true;
  };
  for (const Value* v : g.initializers())
    if (!moderate(v)) return false;
  for (const auto& n : g.nodes())
    for (const Value* v : n->inputs)
      if (!moderate(v)) return false;
  return true;
}

// A model may legitimately ask for a huge tensor (Expand to [2,3,16M]); running it twice under
// ASan would only measure memset. Values the inference sizes (symbols as 2) above this are not run.
constexpr double kMaxValueElements = 1 << 18;

bool small_values(const Graph& g) {
  for (const auto& n : g.nodes()) {
    for (const Value* v : n->outputs) {
      if (!v || !v->type.shape.rank_known()) continue;
      double elements = 1;
      for (const Dim& d : v->type.shape.dims())
        elements *= static_cast<double>(d.value().value_or(2));
      if (elements > kMaxValueElements) return false;
    }
  }
  return true;
}

void compare_runs(const std::string& bytes, std::unique_ptr<Graph> optimized, uint64_t seed) {
  auto original = import_onnx_bytes(bytes, {});
  if (!original) fuzz::finding("second import of the same bytes failed");
  if (!moderate_constants(**original) || !small_values(**original)) return;
  auto inputs = fuzz::small_inputs(**original, seed, kMaxCheckedElements);
  if (!inputs) return;
  auto before = run_reference(std::move(original).value(), *inputs);
  if (!before) return;  // an input the model rejects, or a kernel error: nothing to compare
  auto after = run_reference(std::move(optimized), *inputs);
  if (!after)
    fuzz::finding("the graph ran before the passes but not after: " + after.status().message());
  if (after->size() != before->size()) fuzz::finding("output count changed by the passes");
  for (size_t i = 0; i < before->size(); ++i) {
    cts::CaseResult r;
    cts::Tolerance tol = cts::tolerance_for((*before)[i].dtype(), "fusion");
    if (!cts::compare_output((*after)[i], (*before)[i], tol, r))
      fuzz::finding(str_cat("output ", i, " changed by the passes: ", r.detail));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto imported = import_onnx_bytes(bytes, {});
  if (!imported) {
    fuzz::check_error(imported.status(), "import");
    return 0;
  }
  Graph& g = **imported;
  const size_t nodes = g.nodes().size();
  const Interface inputs = interface_of(g.inputs()), outputs = interface_of(g.outputs());
  Status s = run_pipeline(g, default_pipeline());
  if (!s.is_ok()) {
    fuzz::check_error(s, "passes");
    if (s.message().find("internal error") != std::string::npos) fuzz::finding(s.message());
    return 0;
  }
  if (Status v = verify_graph(g); !v.is_ok())
    fuzz::finding("graph invalid after the default passes: " + v.message());
  Interface in_after = interface_of(g.inputs()), out_after = interface_of(g.outputs());
  if (in_after.names != inputs.names || in_after.types != inputs.types)
    fuzz::finding("the passes changed the graph inputs");
  if (out_after.names != outputs.names) fuzz::finding("the passes changed the graph output names");
  for (size_t i = 0; i < outputs.types.size(); ++i)
    if (out_after.types[i].dtype != outputs.types[i].dtype)
      fuzz::finding(str_cat("the passes changed the dtype of output '", outputs.names[i], "'"));
  if (nodes <= kMaxCheckedNodes) compare_runs(bytes, std::move(imported).value(), size);
  return 0;
}
