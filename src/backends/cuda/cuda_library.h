// Hand-written CUDA kernels for library steps (convolution, pooling, the attention softmax, GEMM
// epilogues), compiled once per GPU architecture with NVRTC (cached like generated code).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_compile.h"
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/nvrtc_compiler.h"

namespace ferrite::cuda {

// Up to kMaxRank dims, right-aligned; strides 0 where an operand broadcasts.
inline constexpr int kMaxRank = 6;
struct BroadcastDims {
  int64_t dims[kMaxRank];     // output dims (leading 1s)
  int64_t strides[kMaxRank];  // operand element strides per output dim
};
// Strides of an operand of `in` dims broadcast to `out` dims (right-aligned); false when the
// ranks exceed kMaxRank or the dims do not broadcast.
bool broadcast_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                       BroadcastDims* bd);

// Activation codes shared with the kernels.
enum class Act : int {
  kNone = 0,
  kRelu = 1,
  kTanh = 2,
  kSigmoid = 3,
  kGelu = 4,
  kGeluTanh = 5,
  kClip = 6
};
bool parse_act(const std::string& s, Act* a);

struct ConvParams {
  int64_t N, C, H, W, K, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, groups;
  int act;
  float lo, hi;  // kClip bounds
};

struct PoolParams {
  int64_t planes, H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw;
};

struct SoftmaxParams {
  int64_t rows_per_batch, S, T;  // scores [batch, S, T]
  int64_t batch_rank;            // batch dims below (<= 4)
  int64_t batch_dims[4];
  int64_t mask_batch_strides[4];
  int64_t mask_s_stride, mask_t_stride;
  int causal, nan_to_zero, has_mask;
};

class LibraryKernels {
 public:
  // `precompiled`: what compile() made (it needs no GPU, so it can run while the GPU starts).
  static Expected<std::unique_ptr<LibraryKernels>> load(const CudaRuntime& rt,
                                                        const std::string& arch,
                                                        const std::string& device_key,
                                                        const ChunkedCompile* precompiled = nullptr);
  // The kernels as several NVRTC programs compiled in parallel (cuda_compile.h).
  static Expected<ChunkedCompile> compile(const std::string& arch, const std::string& device_key);
  // Each launches on the runtime's stream; counts are in elements.
  Status conv2d_direct(const float* x, const float* w, const float* bias, float* y,
                       const ConvParams& p);
  Status im2col(const float* x, float* col, const ConvParams& p);
  Status bias_act_nchw(float* y, const float* bias, int64_t total, int64_t channels, int64_t plane,
                       int act, float lo, float hi);
  // y[n][k][p] = act(t[k][n * plane + p] + bias[k]) (the batched im2col GEMM back to NCHW).
  Status bias_act_unfold(const float* t, float* y, const float* bias, int64_t n_img,
                         int64_t channels, int64_t plane, int act);
  // Gather along one axis of data viewed as [outer, axis_len, inner] (elements of esize bytes).
  Status gather(const void* data, const void* idx, bool idx64, void* out, int64_t outer,
                int64_t axis_len, int64_t n_idx, int64_t inner, int esize, int* err, int tag);
  // y = a (op) b, broadcast; op 0 add, 1 sub, 2 mul, 3 div.
  Status binary_f32(const float* a, const BroadcastDims& ab, const float* b,
                    const BroadcastDims& bb, float* y, int64_t total, int op);
  Status maxpool2d(const float* x, float* y, const PoolParams& p);
  // y = act(y + bias[col]) + residual(broadcast), over rows x cols.
  Status epilogue(float* y, const float* bias, const float* residual, const BroadcastDims* res,
                  int64_t rows, int64_t cols, int act);
  // y (= [rows, cols]) = broadcast(c) * beta
  Status broadcast_fill(float* y, const float* c, const BroadcastDims& bd, int64_t total,
                        float beta);
  // softmax over the last dim of scores [batch, S, T], in place, with mask/causal/nan_to_zero.
  Status attention_softmax(float* scores, const float* mask, const SoftmaxParams& p);
  int64_t launches() const { return launches_; }

 private:
  Status launch(CUfunction f, int64_t grid, int64_t block, void** args);
  const CudaRuntime* rt_ = nullptr;
  std::unique_ptr<LoadedModule> module_;
  CUfunction conv_ = nullptr, im2col_ = nullptr, bias_act_ = nullptr, maxpool_ = nullptr,
             epilogue_ = nullptr, fill_ = nullptr, softmax_ = nullptr, unfold_ = nullptr,
             gather_ = nullptr, binary_ = nullptr;
  CUfunction gather1_ = nullptr, gather2_ = nullptr, gather4_ = nullptr;  // by element size
  int sms_ = 1;
  int64_t launches_ = 0;
};

}  // namespace ferrite::cuda
