// The cuda device's KernelCompiler: CUDA C++ -> cubin with NVRTC for the GPU's architecture
// (-arch=sm_XY from its compute capability), cached in the compile cache under
// (source, NVRTC version, arch, options), then loaded with cuModuleLoadData.
#pragma once

#include <memory>
#include <string>

#include "backend_api/compiler.h"
#include "backends/cuda/cuda_api.h"

namespace ferrite::cuda {

class CudaRuntime;

// A loaded CUmodule; symbol() returns the CUfunction of a kernel.
class CubinModule : public LoadedModule {
 public:
  ~CubinModule() override;
  void* symbol(const std::string& name) const override;
  static Expected<std::unique_ptr<CubinModule>> load(const CudaRuntime& rt,
                                                     const std::string& cubin);

 private:
  const CudaRuntime* rt_ = nullptr;
  CUmodule module_ = nullptr;
};

struct CubinResult {
  std::string cubin;
  bool cache_hit = false;
  std::string cache_note;
  double seconds = 0;
};

// Compiles `source` for `arch` ("sm_90"); needs NVRTC only (no driver, no GPU).
Expected<CubinResult> compile_to_cubin(const std::string& source, const std::string& arch,
                                       const std::string& tag, const std::string& device_key = {});

class NvrtcCompiler : public KernelCompiler {
 public:
  // `rt` may be null: compile() then fails, compile_to_cubin() still works.
  NvrtcCompiler(const CudaRuntime* rt, std::string arch, std::string device_key)
      : rt_(rt), arch_(std::move(arch)), device_key_(std::move(device_key)) {}
  std::string identity() const override;
  Expected<CompiledModule> compile(const std::string& source, const std::string& tag) override;
  std::string source_extension() const override { return ".cu"; }
  const std::string& arch() const { return arch_; }

 private:
  const CudaRuntime* rt_;
  std::string arch_;
  std::string device_key_;
};

}  // namespace ferrite::cuda
