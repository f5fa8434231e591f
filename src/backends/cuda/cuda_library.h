// Hand-written CUDA kernels for library steps (convolution, pooling, the attention softmax, GEMM
// epilogues), compiled once per GPU architecture with NVRTC (cached like generated code).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cuda/cuda_compile.h"
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/nvrtc_compiler.h"
#include "ir/dtype.h"
#include "ops/activation_epilogue.h"

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

struct ConvParams {
  int64_t N, C, H, W, K, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, groups;
  int act;       // Activation::code() (ops/activation_epilogue.h), as fe_act takes it
  float lo, hi;  // its parameters
};

struct PoolParams {
  int64_t planes, C, H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw;  // planes = N * C
};
enum class PoolMode { kMax, kAverage };

struct PadParams {
  int64_t in_dims[kMaxRank];
  int64_t out_dims[kMaxRank];
  int64_t begin[kMaxRank];  // pads before each dim (negative: cropped)
  unsigned long long fill;  // constant mode: the value's bytes (low esize bytes)
  int rank, mode, esize;    // mode 0 constant, 1 reflect, 2 edge, 3 wrap
};

// One concat launch over at most kConcatMax inputs (16-byte units; see fe_concat16).
inline constexpr int kConcatMax = 32;
struct ConcatParams {
  const void* src[kConcatMax];
  int64_t start[kConcatMax + 1];
  int64_t rows, out_width, col0;
  int n;
};

struct SoftmaxParams {
  int64_t rows_per_batch, S, T;  // scores [batch, S, T]
  int64_t batch_rank;            // batch dims below (<= 4)
  int64_t batch_dims[4];
  int64_t mask_batch_strides[4];
  int64_t mask_s_stride, mask_t_stride;
  int causal, nan_to_zero, has_mask;
  int masked_rows_zero;
};

// The CUDA C++ of the library kernels (for compile tests).
const char* library_source();

class LibraryKernels {
 public:
  // `precompiled`: what compile() made (it needs no GPU, so it can run while the GPU starts).
  static Expected<std::unique_ptr<LibraryKernels>> load(
      const CudaRuntime& rt, const std::string& arch, const std::string& device_key,
      const ChunkedCompile* precompiled = nullptr);
  // The kernels as several NVRTC programs compiled in parallel (cuda_compile.h).
  static Expected<ChunkedCompile> compile(const std::string& arch, const std::string& device_key);
  // Each launches on the runtime's stream; counts are in elements. `dtype` is the storage of
  // every float tensor of the call (f32, or bf16 / f16 computed in float).
  Status conv2d_direct(const void* x, const void* w, const void* bias, void* y, const ConvParams& p,
                       DType dtype = DType::kF32);
  Status im2col(const void* x, void* col, const ConvParams& p, DType dtype = DType::kF32);
  // Depthwise convolution of channels-last 16-bit storage with bias, residual (y's shape) and
  // p.act in the same pass: y = act(round(conv + bias) + res). dwconv_nhwc_takes: whether the
  // kernel handles the call (groups = C = K, C % 8 == 0, 16-byte aligned x / res / y).
  static bool dwconv_nhwc_takes(const ConvParams& p, DType dtype, const void* x, const void* res,
                                const void* y);
  // w_taps: scratch of C * KH * KW floats (16-byte aligned) for the filter as float [KH * KW, C].
  Status dwconv_nhwc(const void* x, const void* w, void* w_taps, const void* bias, const void* res,
                     void* y, const ConvParams& p, DType dtype);
  // Depthwise convolution of f32 [N, C, H, W] with bias, residual (y's shape) and p.act in the
  // same pass: y = act(conv + bias + res) (cuda_dwconv_nchw_source.inc). dwconv_nchw_takes:
  // whether the kernel handles the call (groups = C = K, square 3 / 5 / 7 filters, equal strides
  // 1 or 2, no dilation, non-negative pads, tensors under 2^31 elements, a width whose staged
  // rows fit in shared memory).
  static bool dwconv_nchw_takes(const ConvParams& p, DType dtype);
  Status dwconv_nchw(const void* x, const void* w, const void* bias, const void* res, void* y,
                     const ConvParams& p);
  // y = act(y + bias[c] + residual) in place, c = (i / plane) % channels (plane 1: channels-last);
  // rounded to dtype after the bias and after the residual add, as the unfused ops would.
  Status bias_act_nchw(void* y, const void* bias, int64_t total, int64_t channels, int64_t plane,
                       int act, float lo, float hi, DType dtype = DType::kF32,
                       const void* residual = nullptr);
  // y[n][k][p] = act(t[k][n * plane + p] + bias[k]) (the batched im2col GEMM back to NCHW).
  Status bias_act_unfold(const void* t, void* y, const void* bias, int64_t n_img, int64_t channels,
                         int64_t plane, int act, DType dtype = DType::kF32);
  // Gather along one axis of data viewed as [outer, axis_len, inner] (elements of esize bytes).
  Status gather(const void* data, const void* idx, bool idx64, void* out, int64_t outer,
                int64_t axis_len, int64_t n_idx, int64_t inner, int esize, int* err, int tag);
  // y = a (op) b, broadcast; op 0 add, 1 sub, 2 mul, 3 div.
  Status binary_f32(const void* a, const BroadcastDims& ab, const void* b, const BroadcastDims& bb,
                    void* y, int64_t total, int op, DType dtype = DType::kF32);
  // MaxPool / AveragePool (2-D) of [N, C, H, W] or channels-last [N, H, W, C] with the
  // reference's semantics (NaN first stays for max; include_pad divides by the kernel's size).
  // indices (max of [N, C, H, W] only, or null): MaxPool's Indices output as the reference
  // computes it (offsets in the whole input; column_major: storage_order 1).
  Status pool2d(const void* x, void* y, const PoolParams& p, PoolMode mode, bool channels_last,
                bool include_pad, DType dtype = DType::kF32, int64_t* indices = nullptr,
                bool column_major = false);
  // y = act(y + bias[col]) + residual(broadcast), over rows x cols; all of `dtype` (f32, or
  // bf16 / f16 storage computed in float). Any activation of the scalar-function table.
  // residual_dense: the residual is y's shape (no broadcast), which allows the vector kernel.
  Status epilogue(void* y, const void* bias, const void* residual, const BroadcastDims* res,
                  int64_t rows, int64_t cols, const Activation& act, DType dtype = DType::kF32,
                  bool residual_dense = false);
  // Pad (cuda_memory_bound_source.inc): y of p.out_dims from x.
  Status pad(const void* x, void* y, const PadParams& p);
  // Concat of inputs viewed as [rows, width_k] 16-byte units into y [rows, sum of widths]; any
  // number of inputs (one launch per kConcatMax). Pointers 16-byte aligned.
  Status concat16(const std::vector<const void*>& src, const std::vector<int64_t>& widths,
                  int64_t rows, void* y);
  // Split, concat16's mirror: x [rows, sum of widths] (16-byte units) into dst[k] [rows,
  // widths[k]]; one launch per kConcatMax outputs. Pointers 16-byte aligned.
  Status split16(const void* x, const std::vector<void*>& dst, const std::vector<int64_t>& widths,
                 int64_t rows);
  // y (= [rows, cols]) = broadcast(c) * beta, both of `dtype`.
  Status broadcast_fill(void* y, const void* c, const BroadcastDims& bd, int64_t total, float beta,
                        DType dtype = DType::kF32);
  // softmax over the last dim of scores [batch, S, T], in place, with mask/causal/nan_to_zero.
  Status attention_softmax(float* scores, const float* mask, const SoftmaxParams& p);
  // A library kernel by name (the indexing kernels of cuda_indexing_ops.cpp, whose launch
  // arguments are theirs), grid-stride over `total` elements, 256 threads per block.
  Status launch_named(const char* name, int64_t total, void** args);
  int64_t launches() const { return launches_; }

 private:
  Status launch(CUfunction f, int64_t grid, int64_t block, void** args);
  // A launch of grid[0] x grid[1] x grid[2] blocks of block[0] x block[1] threads.
  Status launch3(CUfunction f, const int64_t grid[3], const int block[2], void** args,
                 unsigned shared_bytes = 0);
  // fe_concat16 / fe_split16 over `parts` (16-byte units, widths[k] per row) and the whole
  // [rows, sum of widths] buffer; one launch per kConcatMax parts.
  Status columns16(CUfunction f, const void* whole, const std::vector<const void*>& parts,
                   const std::vector<int64_t>& widths, int64_t rows);
  const CudaRuntime* rt_ = nullptr;
  std::unique_ptr<LoadedModule> module_;
  CUfunction conv_ = nullptr, im2col_ = nullptr, bias_act_ = nullptr, bias_act8_ = nullptr,
             dwconv8_ = nullptr, dwconv8w4_ = nullptr, tap_major_ = nullptr, pad_ = nullptr,
             concat_ = nullptr, split_ = nullptr, pool_ = nullptr, epilogue_ = nullptr,
             epilogue4_ = nullptr, bias_act4_ = nullptr, fill_ = nullptr, softmax_ = nullptr,
             unfold_ = nullptr, gather_ = nullptr, binary_ = nullptr, binary16_ = nullptr;
  CUfunction gather1_ = nullptr, gather2_ = nullptr, gather4_ = nullptr;  // by element size
  CUfunction gather16_ = nullptr;   // whole 16-byte units per row
  CUfunction dwconv_nchw_[6] = {};  // fe_dwconv_nchw_k{3,5,7}s{1,2}, in that order
  int sms_ = 1;
  std::atomic<int64_t> launches_{0};
  std::mutex named_mutex_;
  std::unordered_map<std::string, CUfunction> named_;
};

}  // namespace ferrite::cuda
