// The shared executor: every compiling device (cpu, cuda, null, plugins) prepares and runs its
// models here, from its BackendParts and a few per-model hooks (ExecutorConfig).
//
// prepare_model(): lowering, code generation and compilation (the device's compiler, or its own
// build hook), step planning (execute/step_plan.h), dumps and logs.
//
// A run binds the shape symbols from the inputs, plans the arena for that binding
// (memory/lowered_memory.h) and runs the steps in order:
//   - generated kernels: launched through ExecutorConfig::launch with the launch shape from the
//     heuristics or the tuning database (tune/autotuner.h), made legal for the device;
//   - library steps: the device's LibraryOp (backend_api/library.h) when it has one that takes
//     the node, else the op table's kernel on the host.
// Host-memory runtimes (DeviceRuntime::host_memory: cpu, null) run everything on tensors that
// alias device memory. Other runtimes keep each buffer on the host, the device or both and move
// it only when a step needs it elsewhere: a host step over device values copies them back (a
// "host fallback", FERRITE_LOG=fallback), host values are uploaded on first device use, constants
// once for the model's life, values fixed by the shape symbols once per binding. A binding whose
// steps all ran on the device is recorded on its second run and replayed afterwards when the
// runtime offers RunCapture (CUDA graphs). FERRITE_LOG=profile and `--trace` time every step
// (execute/step_recorder.h).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "backend_api/backend.h"
#include "execute/device_gate.h"
#include "lower/lowering.h"
#include "runtime/device.h"

namespace ferrite {

struct ExecutorConfig {
  LoweringOptions lowering;
  // Mark in-place candidates before code generation (dialects whose kernels allow it).
  bool in_place = false;
  // The dialect emits multi-tensor kernels (Kernel::segments; cpu, cuda): a graph that writes
  // outputs into its inputs (an optimizer step, RunOptions::outputs_into_inputs) gets its
  // independent pointwise kernels grouped into them (lower/multi_tensor.h).
  bool multi_tensor = false;
  // Bound on a multi-tensor kernel's parameters (buffers and shape symbols; 0: none): cuda passes
  // each as a kernel parameter, under the 4 KB parameter limit.
  size_t multi_tensor_max_params = 0;
  // Launches generated kernel `fn` (a LoadedModule symbol) over `rows` rows: `bufs` are device
  // addresses (inputs, output, extra outputs), `syms` the shape-symbol values.
  std::function<Status(void* fn, const LaunchConfig& launch, const std::vector<void*>& bufs,
                       const std::vector<int64_t>& syms, int64_t rows)>
      launch;
  // Compiles the generated kernels of `lg`; null: parts.dialect->generate, then
  // parts.compiler->compile. `source` receives the source for dumps (may stay empty). A device
  // that opens its hardware while compiling sets `parts` (and this config's state) here: the
  // parts given to prepare_model then only need the properties.
  std::function<Expected<CompiledModule>(const LoweredGraph& lg, std::string& source,
                                         std::shared_ptr<const BackendParts>& parts,
                                         ExecutorConfig& self)>
      build;
  // Passed to the library ops; `state_owner` keeps it alive with the model.
  void* library_state = nullptr;
  std::shared_ptr<void> state_owner;
  // Launch shapes may be autotuned (RunOptions::autotune): the device runs kernels synchronously
  // enough to time them.
  bool tunable = true;
  // Shared by the models of a device whose contexts run at once but record alone
  // (execute/device_gate.h); null: no coordination between models.
  DeviceGate* device_gate = nullptr;
  // Called first in every run and in destruction (e.g. making a GPU context and the model's own
  // stream current on the calling thread); `leave` at the end of each.
  std::function<Status()> enter;
  std::function<void()> leave;
  // What the FERRITE_LOG=compile line calls a compile that missed the cache ("C++ compile").
  std::string compiler_label = "device compiler";
};

Expected<std::unique_ptr<PreparedModel>> prepare_model(const Graph& graph,
                                                       std::shared_ptr<const BackendParts> parts,
                                                       const RunOptions& opts,
                                                       ExecutorConfig config);

}  // namespace ferrite
