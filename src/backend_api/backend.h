// The backend contract: what one device folder (src/backends/<device>/) provides.
//
//   member        required?                       what for
//   properties    yes                             codegen, heuristics, cache keys, `devices`
//   runtime       yes                             memory, copies, ordering
//   compiler      optional                        generated source -> loaded module
//   dialect       required with a compiler        lowered kernels -> source
//   heuristics    optional (DefaultHeuristics)    launch shapes
//   library       optional                        the device's own kernels for library steps
//
// The shared executor (src/execute) runs every device from these parts: step planning, shape
// symbols, liveness and the arena, host fallback, capture, profiling, traces and dumps.
// A device registers itself from its own folder with FERRITE_REGISTER_DEVICE (runtime/device.h)
// and its folder's CMakeLists.txt; adding a device touches no shared file. src/backends/null is
// the skeleton to copy; docs/adding-a-device.md walks through it.
#pragma once

#include <memory>

#include "backend_api/compiler.h"
#include "backend_api/dialect.h"
#include "backend_api/heuristics.h"
#include "backend_api/library.h"
#include "backend_api/properties.h"
#include "backend_api/runtime.h"

namespace ferrite {

struct BackendParts {
  DeviceProperties properties;
  std::unique_ptr<DeviceRuntime> runtime;
  std::unique_ptr<KernelCompiler> compiler;      // optional
  std::unique_ptr<CodegenDialect> dialect;       // required iff compiler
  std::unique_ptr<LaunchHeuristics> heuristics;  // optional
  std::shared_ptr<const LibraryOps> library;     // optional

  // Checks the required members and fills defaults for the optional ones.
  Status finalize();
  bool generates_code() const { return compiler != nullptr; }
};

}  // namespace ferrite
