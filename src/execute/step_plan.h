// What the shared executor knows about a lowered graph before any run: per step, what runs it
// (generated kernel, the device's library op, or the op table's kernel on the host), the last
// use of every buffer, which values are fixed by the shape symbols alone, and labels for logs,
// profiles and traces. Also the binding of shape symbols from a run's inputs.
#pragma once

#include <string>
#include <vector>

#include "backend_api/compiler.h"
#include "backend_api/library.h"
#include "ir/sym_expr.h"
#include "lower/lowering.h"

namespace ferrite {

// FERRITE_LOG=topic[,topic...] or all.
bool log_enabled(const char* topic);

struct StepPlan {
  std::vector<void*> kernel_fns;          // per step: the module symbol of a kernel step
  std::vector<const LibraryOp*> library;  // per step: the device's library op, or null
  std::vector<int> last_use;              // per buffer: last step reading it (outputs: INT32_MAX)
  std::vector<std::vector<int>> dying;    // per step: buffers last read there (not outputs)
  // Values (per buffer) and host steps fixed by the binding of the shape symbols (constants,
  // Shape of buffers with known dims, deterministic steps over such values).
  std::vector<bool> fixed, fixed_step;
  std::vector<std::string> labels;              // "k3: node, node" or "node (op)"
  std::vector<std::vector<std::string>> nodes;  // per step: the ONNX node names it computes
};

// Fails when a kernel step's symbol is missing from `module`.
Expected<StepPlan> plan_steps(const LoweredGraph& lg, const LoadedModule* module,
                              const LibraryOps* library, void* library_state,
                              const std::string& device);

// The shape-symbol values of a run, bound from the inputs' dims (the Session has checked that
// they agree), in lg.symbols order.
struct SymbolBinding {
  SymBindings names;
  std::vector<int64_t> values;
};
Expected<SymbolBinding> bind_symbols(const Graph& g, const LoweredGraph& lg,
                                     const std::vector<Tensor>& inputs, const std::string& device);

Expected<std::vector<int64_t>> eval_dims(const std::vector<Dim>& dims, const SymBindings& bind,
                                         const std::string& device);

size_t byte_count(DType t, const std::vector<int64_t>& dims);
// Whether a value of these dims has a negative dim or a byte size that overflows int64.
bool too_large(DType t, const std::vector<int64_t>& dims);

}  // namespace ferrite
