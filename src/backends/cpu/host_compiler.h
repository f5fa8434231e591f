// Compiles generated C++ into a shared object with the system compiler and loads it.
#pragma once

#include <memory>
#include <string>

#include "support/status.h"

namespace ferrite {

class LoadedModule {
 public:
  ~LoadedModule();
  void* symbol(const std::string& name) const;
  static Expected<std::unique_ptr<LoadedModule>> open(const std::string& path);

 private:
  void* handle_ = nullptr;
};

struct HostCompileResult {
  std::unique_ptr<LoadedModule> module;
  double seconds = 0;
  std::string so_path;
};

// Writes `source` to a private temp dir, compiles it with $FERRITE_CXX (default "c++") and flags
// for the host CPU, and loads it. Compiler diagnostics are returned in the error.
Expected<HostCompileResult> compile_and_load(const std::string& source, const std::string& tag);

}  // namespace ferrite
