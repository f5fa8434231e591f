// The cuda device's backend parts (backend_api/backend.h) and what prepared models share: the
// runtime on one GPU, NVRTC, the CUDA dialect, launch heuristics, the library kernels and cuBLASLt.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "backend_api/backend.h"
#include "backends/cuda/cuda_attention.h"
#include "backends/cuda/cuda_cudnn.h"
#include "backends/cuda/cuda_gemm.h"
#include "backends/cuda/cuda_library.h"
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/nvrtc_compiler.h"
#include "execute/device_gate.h"

namespace ferrite::cuda {

// Properties of a GPU of compute capability `major.minor` with typical Hopper-class limits, for
// code generation without a GPU (tests compile for sm_90 with NVRTC alone).
DeviceProperties offline_properties(int major, int minor);
// Properties read off GPU `dev` through the driver.
Expected<DeviceProperties> read_properties(const Driver& d, CUdevice dev);
// Properties of GPU `ordinal` without creating a context (fast): what code generation and the
// compile-cache keys need, so that compiling can start before the GPU is open.
Expected<DeviceProperties> probe_properties(int ordinal);

// Pointwise kernels: 256 threads, enough blocks to fill every SM several times (grid-stride
// loops take the rest). Row kernels: one block per row, sized so that each thread handles a few
// elements of the row, grid-stride over rows beyond 32 blocks per SM.
class CudaHeuristics : public LaunchHeuristics {
 public:
  LaunchConfig choose(const Kernel& kernel, int64_t rows, int64_t row_len,
                      const DeviceProperties& props) const override;
};

struct CudaBackend {
  BackendParts parts;
  CudaRuntime* rt() const { return static_cast<CudaRuntime*>(parts.runtime.get()); }
  std::unique_ptr<LibraryKernels> lib;
  std::unique_ptr<CublasGemm> gemm;
  std::unique_ptr<FlashAttention> flash;  // fused attention (modules compiled on first use)
  // cuDNN convolution: created on the first convolution (start-up of conv-free models is
  // unchanged); null after that when cuDNN is disabled or missing (im2col path).
  std::unique_ptr<CudnnConv> cudnn;
  bool cudnn_tried = false;
  std::mutex cudnn_mutex;
  // The cuDNN object, created on first use. Called from library steps of any context.
  CudnnConv* conv_library();
  // Per problem, whether cuDNN ran faster than ferrite's kernel (timed once by
  // time_stream_calls): channels-last depthwise convolutions ("dwconv:" keys, cuDNN's kernel plus
  // the epilogue pass against fe_dwconv_nhwc8 with the epilogue fused, cuda_conv_ops.cpp), f32
  // NCHW depthwise convolutions ("dwconv_nchw:" keys, cuDNN or the direct kernel plus the
  // epilogue against fe_dwconv_nchw) and attention ("sdpa:" keys, cuDNN's SDPA against
  // fe_flash_*, cuda_attention_ops.cpp).
  std::mutex choice_mutex;
  std::map<std::string, bool> cudnn_faster;
  // cudnn_faster[key] under the lock; nullopt before the problem was timed.
  std::optional<bool> recorded_choice(const std::string& key);
  void record_choice(const std::string& key, bool faster);
  // Whether the current stream is capturing a CUDA graph (nothing may be timed or synchronised
  // then); a failed query counts as capturing.
  bool capturing() const;
  // Models of one device share its cuBLASLt plans, cuDNN handle and library kernels (each
  // thread-safe); each context runs on a stream of its own, and a recording runs alone.
  DeviceGate gate;
};

// Seconds per call of f on the backend's current stream: one call to warm up (plans, first-use
// compiles), then the mean of `reps` between two events. Never inside a CUDA graph capture.
Expected<double> time_stream_calls(CudaBackend& be, const std::function<Status()>& f, int reps);

// Opens GPU `ordinal`: the driver, its properties, a stream, NVRTC, the library kernels and
// cuBLASLt. Errors name what is missing (driver, GPU, NVRTC, cuBLASLt). The library kernels
// compile on another thread while the context and cuBLASLt start.
Expected<std::shared_ptr<CudaBackend>> open_cuda_backend(int ordinal);

}  // namespace ferrite::cuda
