// GEMM through cuBLASLt for MatMul, Gemm, ferrite.FusedMatMul, convolution (im2col) and
// attention. f32 in and out with f32 accumulation; TF32 tensor cores only when asked for
// (--precision tf32, or FERRITE_CUDA_TF32=1), since they round the inputs to 10 mantissa bits.
// bf16 / f16 operands (--precision bf16 / fp16) accumulate in f32. Tuning times cuBLASLt's
// candidate algorithms once per problem shape and keeps the fastest. By default only large f32
// GEMMs (m*n*k*batch >= 2^31) are tuned: there the heuristic's first choice for the non-
// transposed layouts is often a SIMT kernel (cutlass_80_simt_sgemm_256x128_8x4_nn_align1 on
// ViT-B/16's MLP at 32 images, H200), and tuning took ViT-B/16 f32 from 31.45 to 29.79 ms;
// on the zoo's small shapes it measured no gain (H200, 2026-11-22: bert_base 1.66 ms tuned vs
// 1.59 ms untuned). FERRITE_CUDA_GEMM_TUNE=1 tunes every GEMM, =0 none.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backends/cuda/cuda_runtime.h"
#include "ir/dtype.h"
#include "ops/scalar_functions.h"

namespace ferrite::cuda {

// Row-major C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * Cin, batched with element strides
// (0 broadcasts one matrix over the batch). lda/ldb/ldc are the row strides as stored. A, B, C,
// Cin and the bias share `dtype` (f32, or bf16 / f16 storage with f32 accumulation and f32
// alpha / beta: CUBLAS_COMPUTE_32F).
struct GemmCall {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  bool trans_a = false;  // A stored [k, m]
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  bool trans_b = false;  // B stored [n, k]
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  const void* c_in = nullptr;  // beta's operand, same layout as c (may equal c)
  float alpha = 1, beta = 0;
  const void* bias = nullptr;  // [n], added before the activation
  CublasLtEpilogue act = CublasLtEpilogue::kNone;
  DType dtype = DType::kF32;
  bool tf32 = false;  // f32 only: TF32 tensor cores (--precision tf32)
};

// `p` advanced by `elems` elements of `t`.
inline const void* elem_offset(const void* p, int64_t elems, DType t) {
  return static_cast<const char*>(p) + elems * static_cast<int64_t>(dtype_size(t));
}
inline void* elem_offset(void* p, int64_t elems, DType t) {
  return static_cast<char*>(p) + elems * static_cast<int64_t>(dtype_size(t));
}

class CublasGemm {
 public:
  static Expected<std::unique_ptr<CublasGemm>> create(const CudaRuntime& rt);
  ~CublasGemm();
  Status run(const GemmCall& g);
  bool tf32() const { return tf32_; }
  int64_t calls() const { return calls_; }
  std::string describe() const;

 private:
  CublasGemm() = default;
  struct Plan;
  Status run_locked(const GemmCall& g);
  Status tune(const GemmCall& g, Plan& p, const cublasLtMatmulHeuristicResult_t* results,
              int found);
  const CudaRuntime* rt_ = nullptr;
  const CublasLt* lt_ = nullptr;
  cublasLtHandle_t handle_ = nullptr;
  size_t workspace_bytes_ = 0;  // per stream (ContextStream::workspace)
  std::mutex mu_;
  bool tf32_ = false;
  std::atomic<int64_t> calls_{0};
  enum class Tune { kNone, kLargeF32, kAll } tune_ = Tune::kLargeF32;  // FERRITE_CUDA_GEMM_TUNE
  int64_t tuned_ = 0;
  std::map<std::string, std::shared_ptr<Plan>> plans_;  // per shape/layout/epilogue
};

}  // namespace ferrite::cuda
