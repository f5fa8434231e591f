// Compiles generated C++ into a shared object with the system compiler and loads it.
#pragma once

#include <memory>
#include <string>

#include "backend_api/compiler.h"
#include "support/status.h"

namespace ferrite {

// The cpu device's KernelCompiler (see backend_api/compiler.h).
class HostCompiler : public KernelCompiler {
 public:
  // `device_key` (DeviceProperties::cache_key()) joins every cache key of this compiler.
  explicit HostCompiler(std::string device_key = {}) : device_key_(std::move(device_key)) {}
  std::string identity() const override;
  Expected<CompiledModule> compile(const std::string& source, const std::string& tag) override;

 private:
  std::string device_key_;
};

// Loads the module for `source` from the compile cache, or writes it to a private temp dir,
// compiles it with $FERRITE_CXX (default "c++") and flags for the host CPU, stores the shared
// object in the cache and loads it. The cache key covers the source, flags, compiler version
// and the host CPU's identity (the code is built with -march=native). Compiler diagnostics are
// returned in the error.
// `extra_key` adds to the cache key what the source alone does not say (the device's properties).
Expected<CompiledModule> compile_and_load(const std::string& source, const std::string& tag,
                                          const std::string& extra_key = {});

}  // namespace ferrite
