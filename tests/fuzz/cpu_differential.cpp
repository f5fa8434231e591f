// Fuzz target cpu_differential: bytes decode to a small random graph (graph_gen.h), which runs
// on the `reference` device (the oracle) and on `cpu` (default passes, lowering, fusion,
// generated C++ compiled by the host compiler, oneDNN library kernels); outputs must agree within
// the conformance suite's tolerances (cts/tolerance.cpp). A graph the reference runs but cpu
// refuses, or a mismatch, is a finding.
//
// Cost: every graph the cpu device has not seen compiles its kernels with the host C++ compiler
// (about 0.3-1 s); the compile cache ($FERRITE_CACHE_DIR, which scripts/fuzz.sh points into
// the build directory) serves graphs whose generated source was compiled before, so mutations
// that only change input values or shapes of symbolic inputs run in milliseconds.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cts/cts.h"
#include "frontend/onnx/importer.h"
#include "fuzz_util.h"
#include "graph_gen.h"

using namespace ferrite;

namespace {

bool verbose() {
  static const bool v = std::getenv("FERRITE_FUZZ_VERBOSE") != nullptr;
  return v;
}

Expected<std::vector<Tensor>> run_on(const std::string& model, const std::string& device,
                                     const std::vector<Session::NamedInput>& inputs) {
  FERRITE_ASSIGN_OR_RETURN(auto g, import_onnx_bytes(model, {}));
  RunOptions opts;
  opts.threads = 1;  // the fuzzer is the parallelism (-jobs / -fork)
  FERRITE_ASSIGN_OR_RETURN(auto s, Session::from_graph(std::move(g), device, opts));
  return s->run(inputs);
}

// The loosest tolerance of the ops used, and of a fused multi-op pattern when there are several.
cts::Tolerance tolerance(const std::set<std::string>& ops) {
  cts::Tolerance tol = cts::tolerance_for(DType::kF32, ops.size() > 1 ? "fusion" : "");
  for (const std::string& op : ops) {
    cts::Tolerance t = cts::tolerance_for(DType::kF32, op);
    tol.atol = std::max(tol.atol, t.atol);
    tol.rtol = std::max(tol.rtol, t.rtol);
  }
  return tol;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  fuzz::GeneratedGraph gen = fuzz::generate_graph(fdp);
  auto expected = run_on(gen.model, "reference", gen.inputs);
  if (!expected) {
    // The generator only builds valid graphs, but a symbolic declaration can make inference
    // refuse what it cannot prove; that is an error value, which is all the contract asks.
    fuzz::check_error(expected.status(), "reference");
    if (verbose()) std::fprintf(stderr, "reference: %s\n", expected.status().message().c_str());
    return 0;
  }
  if (verbose()) {  // the graph of a finding, to reproduce it outside the fuzzer
    if (auto g = import_onnx_bytes(gen.model, {}))
      std::fprintf(stderr, "%s\n", print_graph(**g).c_str());
  }
  auto actual = run_on(gen.model, "cpu", gen.inputs);
  if (!actual)
    fuzz::finding("the reference ran the graph, cpu failed: " + actual.status().message());
  if (actual->size() != expected->size()) fuzz::finding("cpu returned another number of outputs");
  cts::Tolerance tol = tolerance(gen.ops);
  for (size_t i = 0; i < expected->size(); ++i) {
    cts::CaseResult r;
    if (!cts::compare_output((*actual)[i], (*expected)[i], tol, r))
      fuzz::finding(str_cat("cpu output ", i, " differs from the reference: ", r.detail));
  }
  return 0;
}
