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
  bool cache_hit = false;
  std::string cache_note;  // why the cache was not used, when it was not
};

// Loads the module for `source` from the compile cache, or writes it to a private temp dir,
// compiles it with $FERRITE_CXX (default "c++") and flags for the host CPU, stores the shared
// object in the cache and loads it. The cache key covers the source, flags, compiler version
// and the host CPU's identity (the code is built with -march=native). Compiler diagnostics are
// returned in the error.
Expected<HostCompileResult> compile_and_load(const std::string& source, const std::string& tag);

}  // namespace ferrite
