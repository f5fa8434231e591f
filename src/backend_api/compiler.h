// Kernel compiler: generated source -> a loaded module whose kernels can be looked up by name.
// Optional member of the backend contract: a device without one runs every step through its
// library kernels (or the reference kernels, staged through host memory).
#pragma once

#include <memory>
#include <string>

#include "support/status.h"

namespace ferrite {

// A loaded module. symbol() returns what the device's launcher needs: a host function pointer
// for host-run code, a CUfunction for CUDA, ...; nullptr when the name is absent.
class LoadedModule {
 public:
  virtual ~LoadedModule() = default;
  virtual void* symbol(const std::string& name) const = 0;
};

// A shared object opened with dlopen (host code, and plugin-compiled emulator code).
class SharedObjectModule : public LoadedModule {
 public:
  ~SharedObjectModule() override;
  void* symbol(const std::string& name) const override;
  static Expected<std::unique_ptr<SharedObjectModule>> open(const std::string& path);

 private:
  void* handle_ = nullptr;
};

struct CompiledModule {
  std::unique_ptr<LoadedModule> module;
  double seconds = 0;       // compile (or cache load) wall time
  bool cache_hit = false;
  std::string cache_note;   // why the cache was not used, when it was not
  std::string artifact;     // path or description of what was loaded, for logs
};

class KernelCompiler {
 public:
  virtual ~KernelCompiler() = default;
  // --- required ---
  // Toolchain, version and flags; part of every compile-cache key for this device.
  virtual std::string identity() const = 0;
  // Compiles a whole translation unit produced by the device's CodegenDialect. `tag` names the
  // module in temp files and logs. Compiler diagnostics are returned in the error.
  virtual Expected<CompiledModule> compile(const std::string& source, const std::string& tag) = 0;
  // --- optional ---
  virtual std::string source_extension() const { return ".cpp"; }
};

}  // namespace ferrite
