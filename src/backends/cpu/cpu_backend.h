// The cpu device's backend parts (backend_api/backend.h): host runtime, the system C++
// compiler, the row-loop C++ dialect, launch heuristics and the host's properties.
#pragma once

#include "backend_api/backend.h"
#include "backend_api/heuristics.h"

namespace ferrite {

DeviceProperties cpu_properties();
BackendParts make_cpu_backend_parts();

// Row-loop C++ for a thread pool (codegen/cpp_source.h).
class CppDialect : public CodegenDialect {
 public:
  std::string name() const override { return "c++ (host row loops)"; }
  Expected<std::string> generate(const LoweredGraph& lg,
                                 const DeviceProperties& props) const override;
  std::string kernel_abi() const override;
};

// The default host launch (tasks of about 16K elements), except for column reductions.
class CpuHeuristics : public LaunchHeuristics {
 public:
  LaunchConfig choose(const Kernel& kernel, int64_t rows, int64_t row_len,
                      const DeviceProperties& props) const override;
};

}  // namespace ferrite
