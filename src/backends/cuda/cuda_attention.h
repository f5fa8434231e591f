// Fused attention for ferrite.Attention on the GPU: one kernel per call (FlashAttention-style:
// K/V tiles staged in shared memory, online softmax with a running max and sum in f32, the
// output accumulated in registers and written once), instead of QK^T GEMM + softmax kernel +
// P.V GEMM through an S x T score buffer. Math is f32 on the CUDA cores (no TF32); storage is
// f32, bf16 or f16 (one NVRTC module per storage type, head-dim bucket and row tile, compiled on
// first use and cached like generated code).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "backend_api/properties.h"
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/nvrtc_compiler.h"

namespace ferrite::cuda {

// Must match the kernel source's FlashParams field for field.
struct FlashParams {
  int64_t nb, S, T, D, Dv;
  int64_t q_tiles;
  int64_t batch_rank;
  int64_t batch_dims[4];
  int64_t q_bs[4], k_bs[4], v_bs[4], m_bs[4];
  int64_t m_s, m_t;
  float scale;
  int causal, nan_to_zero, has_mask;
  int vec;  // D, Dv, row strides multiples of 4 and Q, K, V 4-element aligned: 4-element loads
  int masked_rows_zero;
  int64_t q_rs, k_rs, v_rs, o_rs;  // element strides between rows
  int64_t o_bs[4];                 // the output's batch strides
  int mask_tile;  // the pipelined kernel stages mask tiles in shared memory (flash_mask_tiles)
};

// One attention call: Q [batch, S, D], K [batch, T, D], V [batch, T, Dv], out [batch, S, Dv]
// (batch = the broadcast batch dims), each with batch strides in elements (0 where it
// broadcasts) and a row stride (0: contiguous rows, D or Dv); a [B, S, H, D] operand standing for
// [B, H, S, D] (ferrite.Attention's `transposed`) has batch strides [S*H*D, D] and row stride
// H*D. The mask (same dtype) is read at m_bs . batch_index + s * m_s + t * m_t.
struct FlashProblem {
  std::vector<int64_t> batch;  // broadcast batch dims, at most 4
  int64_t S = 0, T = 0, D = 0, Dv = 0;
  std::vector<int64_t> q_bs, k_bs, v_bs, m_bs;  // one per batch dim
  std::vector<int64_t> o_bs;                    // empty: contiguous [batch, S, Dv]
  int64_t q_rs = 0, k_rs = 0, v_rs = 0, o_rs = 0;
  int64_t m_s = 0, m_t = 0;
  float scale = 1;
  bool causal = false, nan_to_zero = false, has_mask = false, masked_rows_zero = false;
};

// Tile choice of one call.
struct FlashConfig {
  int dp = 0;              // head-dim bucket: 32, 64, 96 or 128 (>= max(D, Dv))
  int bm = 0;              // query rows per block: 16, 32 or 64
  int bn = 0;              // keys per K/V tile (64 up to dp 64, else 32)
  int64_t smem = 0;        // dynamic shared memory, bytes
  int64_t grid = 0;        // blocks
  bool pipelined = false;  // tensor-core kernel: the cp.async / ldmatrix variant
};

inline constexpr int kFlashThreads = 128;
inline constexpr int kFlashTcRows = 64;  // query rows per block of the tensor-core kernel
inline constexpr int kFlashMaxHeadDim = 128;

// The tiles for `p` on a GPU with `sms` multiprocessors and `smem_limit` bytes of shared memory
// per block (the opt-in maximum): the largest row tile that fits and still gives every SM at
// least two blocks, else the smallest that fits. Empty reason when it can run; otherwise why not.
FlashConfig choose_flash_config(const FlashProblem& p, int sms, int64_t smem_limit,
                                std::string* why_not);

// The CUDA source of the module for one storage type and tile (for the NVRTC compile test).
std::string flash_module_source(DType dtype, int dp, int bm);
std::string flash_kernel_name(int dp, int bm);

// The tensor-core kernel (bf16 / f16 storage, mma.sync m16n8k16, sm_80 and later; f32
// accumulation, P rounded to the storage type): its tiles for `p`, or bm == 0 when it does not
// take the call (dtype, architecture, head dim > 128, shared memory, FERRITE_CUDA_FLASH_TC=0).
// `aligned16`: q, k and v start on 16 bytes; with head dims and batch strides that are multiples
// of 8 the call takes the pipelined variant (cp.async double buffering of K and V, ldmatrix
// operands; FERRITE_CUDA_FLASH_PIPE=0 turns it off). `mask_tiles`: the variant also stages the
// mask (flash_mask_tiles), which takes more shared memory.
FlashConfig choose_flash_tc_config(const FlashProblem& p, DType dtype, const std::string& arch,
                                   int64_t smem_limit, bool aligned16 = false,
                                   bool mask_tiles = false);
// Whether the pipelined kernel can copy `mask` tile by tile (16-byte copies): keys contiguous,
// query rows and batch offsets on 8 elements, the base on 16 bytes. Otherwise it reads the mask
// element by element.
bool flash_mask_tiles(const FlashProblem& p, const void* mask);
// The module holds both tensor-core variants for one head-dim bucket.
std::string flash_tc_module_source(DType dtype, int dp);
std::string flash_tc_kernel_name(int dp, bool pipelined = false);

class FlashAttention {
 public:
  static std::unique_ptr<FlashAttention> create(const CudaRuntime& rt,
                                                const DeviceProperties& props,
                                                const std::string& device_key);
  // Why the fused kernel does not take this call (dtype, head dims, shared memory, disabled by
  // FERRITE_CUDA_FLASH=0); empty when it does.
  std::string unsupported(const FlashProblem& p, DType dtype) const;
  // Runs the fused kernel on the runtime's stream; q, k, v, mask (null: none) and out hold
  // `dtype` elements. Compiles the needed module on first use.
  Status run(const FlashProblem& p, DType dtype, const void* q, const void* k, const void* v,
             const void* mask, void* out);
  // Logs once per distinct message: under FERRITE_LOG=attention, and under FERRITE_LOG=fallback
  // too when `fallback` (a call that does not take the fused kernel).
  void note(const std::string& msg, bool fallback);
  int64_t launches() const { return launches_; }

 private:
  FlashAttention() = default;
  const CudaRuntime* rt_ = nullptr;
  std::string arch_, device_key_;
  int sms_ = 1;
  int64_t smem_limit_ = 48 << 10;  // opt-in maximum of dynamic shared memory per block
  bool log_ = false, log_fallback_ = false;
  std::mutex mu_;
  struct Loaded {
    std::unique_ptr<CubinModule> module;
    CUfunction fn = nullptr;
    int64_t smem_set = 0;  // dynamic shared memory the function was opted in to
  };
  std::map<std::string, Loaded> modules_;  // by dtype + kernel name
  std::set<std::string> noted_;
  std::atomic<int64_t> launches_{0};
};

}  // namespace ferrite::cuda
