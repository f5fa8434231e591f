// 2-D convolution through cuDNN 9's legacy API (opened with dlopen, see cuda_api.h), and fused
// attention through its graph API (cuda_cudnn_graph.h). Optional:
// when the headers were absent at build time, the library is missing at run time, or
// FERRITE_CUDA_CUDNN=0, `create` returns null and the convolution keeps its im2col + cuBLASLt /
// direct-kernel path. The handle is created lazily (first convolution), so models without Conv
// start as fast as before.
//
// Math modes: f32 uses CUDNN_FMA_MATH (cuDNN's DEFAULT_MATH allows TF32 tensor cores on Ampere and
// later, which rounds inputs to 10 mantissa bits: results would leave the f32 tolerance), and
// TF32 only under --precision tf32; bf16 / f16 storage uses tensor cores with f32 accumulation.
// FFT and Winograd algorithms are excluded for f32 (not TF32): their rounding error exceeds the
// f32 tolerances against the reference.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "backends/cuda/cuda_library.h"
#include "backends/cuda/cuda_runtime.h"
#include "ir/dtype.h"

namespace ferrite::cuda {

struct CudnnConvProblem {
  ConvParams p{};                  // N, C, H, W, K, KH, KW, OH, OW, strides, dilations, groups
  int64_t ph_end = 0, pw_end = 0;  // cuDNN pads symmetrically: must equal p.ph / p.pw
  DType dtype = DType::kF32;
  bool tf32 = false;
  bool channels_last = false;  // x and y stored [N, H, W, C] (cuDNN's NHWC)
  bool weights_last = false;   // w stored [K, KH, KW, C/groups] (cuDNN's NHWC filter)
};

struct CudnnGraphPlan;  // cuda_cudnn_graph.h

// One attention O = softmax(scale * Q K^T) V without mask or causal limit, in cuDNN's logical
// layout: Q [b, h, s, d], K [b, hk, t, d], V [b, hk, t, dv], O [b, h, s, dv], each with a stride
// per dim in elements (the last 1). bf16 or f16 storage, f32 accumulation.
struct CudnnSdpaProblem {
  DType dtype = DType::kBF16;
  int64_t b = 1, h = 1, hk = 1, s = 0, t = 0, d = 0, dv = 0;
  int64_t q_st[4] = {}, k_st[4] = {}, v_st[4] = {}, o_st[4] = {};
  float scale = 1;
  // Identifies the problem (dims, strides, dtype; not the scale, a by-value operand).
  std::string key() const;
};

// The cuDNN version from which the SDPA operation descriptor exists (9.13.0).
inline constexpr int kCudnnSdpaMinVersion = 91300;

class CudnnConv {
 public:
  // Null (no error) when cuDNN is disabled (FERRITE_CUDA_CUDNN=0) or not available; the reason is
  // logged once under FERRITE_LOG=fallback. Errors only for a library that loads but fails.
  static Expected<std::unique_ptr<CudnnConv>> create(const CudaRuntime& rt);
  ~CudnnConv();

  // Empty when cuDNN can take the problem (pads, dims, dtype), else why not.
  static std::string unsupported(const CudnnConvProblem& q);

  // y = conv(x, w), no bias. Returns false (nothing launched) when cuDNN's heuristics offer no
  // usable algorithm for the problem; `scratch` provides the workspace (valid for the step).
  Expected<bool> run(const CudnnConvProblem& q, const void* x, const void* w, void* y,
                     const std::function<Expected<void*>(size_t)>& scratch);

  // y = act(conv(x, w) + bias + z) in one cuDNN call (cudnnConvolutionBiasActivationForward):
  // act is ReLU or none, z (the residual, y's shape and layout) may be null. Returns false
  // (nothing launched) when cuDNN cannot fuse this problem: the caller then runs run() and its own
  // epilogue. f32 accumulation, one rounding to the storage type at the end.
  Expected<bool> run_fused(const CudnnConvProblem& q, const void* x, const void* w,
                           const void* bias, const void* z, bool relu, void* y,
                           const std::function<Expected<void*>(size_t)>& scratch);

  // The gradients of y = conv(x, w) for the problem q (q describes that forward convolution):
  // dx = conv^T(dy, w) (cudnnConvolutionBackwardData: ONNX ConvTranspose and training's input
  // gradient) and dw (cudnnConvolutionBackwardFilter: ferrite.ConvGradWeight). Same contract as
  // run(): false (nothing launched) when cuDNN offers no usable algorithm.
  Expected<bool> run_backward_data(const CudnnConvProblem& q, const void* w, const void* dy,
                                   void* dx, const std::function<Expected<void*>(size_t)>& scratch);
  Expected<bool> run_backward_filter(const CudnnConvProblem& q, const void* x, const void* dy,
                                     void* dw,
                                     const std::function<Expected<void*>(size_t)>& scratch);

  // O = softmax(scale * Q K^T) V on cuDNN's fused SDPA engine (graph API, cuDNN 9.13 and later;
  // plan built once per problem). Returns false (nothing launched) when cuDNN has no engine for
  // the problem or an operand is not 16-byte aligned; the reason is noted once.
  Expected<bool> run_attention(const CudnnSdpaProblem& q, const void* qp, const void* k,
                               const void* v, void* o,
                               const std::function<Expected<void*>(size_t)>& scratch);

  // Logs once per distinct message under FERRITE_LOG=fallback (or conv).
  void note(const std::string& msg);
  // Whether FERRITE_LOG asks for the convolution log (plans and choices).
  static bool logging();
  int64_t calls() const { return calls_; }
  int64_t fused_calls() const { return fused_calls_; }
  int64_t attention_calls() const { return attention_calls_; }
  std::string describe() const;

 private:
  CudnnConv() = default;
  enum class Direction { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };
  struct Plan;
  struct Choice;
  // The descriptors of q (shared by the directions), then with `dir`'s algorithm chosen.
  Expected<std::shared_ptr<Plan>> plan(const CudnnConvProblem& q);
  Expected<std::shared_ptr<Plan>> plan(const CudnnConvProblem& q, Direction dir);
  template <class Perf>
  static void take_first(Plan& pl, Choice& ch, const Perf* perf, int found, const char* dir);
  // One convolution call of `dir` with operands (a, b) -> out: (x, w) -> y, (w, dy) -> dx or
  // (x, dy) -> dw.
  Expected<bool> call(const CudnnConvProblem& q, Direction dir, const void* a, const void* b,
                      void* out, const std::function<Expected<void*>(size_t)>& scratch);
  const CudaRuntime* rt_ = nullptr;
  const void* api_ = nullptr;  // const Cudnn* (cuda_api.h; opaque here for builds without cuDNN)
  void* handle_ = nullptr;     // cudnnHandle_t
  std::map<std::string, std::shared_ptr<Plan>> plans_;  // per shape / dtype / math key
  // Attention plans by CudnnSdpaProblem::key (null: cuDNN declined, the reason in sdpa_why_).
  std::map<std::string, std::shared_ptr<CudnnGraphPlan>> sdpa_plans_;
  std::map<std::string, std::string> sdpa_why_;
  std::mutex mu_;       // plans_ and noted_
  std::mutex call_mu_;  // the handle, during one call
  std::set<std::string> noted_;
  std::atomic<int64_t> calls_{0}, fused_calls_{0}, attention_calls_{0};
};

// FERRITE_CUDA_CUDNN != "0" (read per call, like FERRITE_CUDA_FLASH).
bool cudnn_enabled();
// Whether convolutions stored as `dtype` go to cuDNN: always bf16 / f16 (tensor cores; measured
// faster than im2col + cuBLASLt). f32 goes to cuDNN when the column matrix (`im2col_bytes`:
// N * C * KH * KW * OH * OW elements; C counts 1 for depthwise layers) exceeds kF32CudnnMinBytes
// (FERRITE_CUDA_CUDNN_F32_MB overrides, in MiB): below it im2col + cuBLASLt (and the direct
// kernel for grouped convolutions) won, e.g. ResNet-50 at batch 1 1.08 against 1.93 ms on an
// H100, because cuDNN's FMA-math kernels transpose NCHW around themselves; above it cuDNN won
// every torchvision family at batch 32 (ResNet-50 9.9 against 12.9 ms, DenseNet-121 11.3
// against 18.8 ms: im2col wrote 460 MB per 3x3 layer; RegNetY's grouped layers 4.1 against
// 8.7 ms), and training's zero-stuffed input-gradient convolutions need it (ResNet-50's stem at
// batch 32 needed 20 GB of columns). FERRITE_CUDA_CUDNN=1 sends every dtype, =0 none.
inline constexpr int64_t kF32CudnnMinBytes = int64_t{16} << 20;
bool cudnn_for(DType dtype, int64_t im2col_bytes = 0);

}  // namespace ferrite::cuda
