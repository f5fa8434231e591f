// Library steps that run on the GPU (GEMM-based ops, convolution, pooling, attention). The
// executor hands each one device views of its inputs and an allocator for its outputs; an op may
// decline a node it does not handle (dtype, rank, attribute combination) before it allocates
// anything, and the step then runs on the host through the op table's reference kernel.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "backends/cuda/cuda_attention.h"
#include "backends/cuda/cuda_backend.h"
#include "ir/graph.h"

namespace ferrite::cuda {

struct DevView {
  const void* ptr = nullptr;
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  const Tensor* host = nullptr;  // the value on the host too, when it is there (small constants)
  const float* f32() const { return static_cast<const float*>(ptr); }
};

struct NativeIO {
  std::vector<std::optional<DevView>> in;  // nullopt: input absent
  // Device memory for output i of (dtype, dims).
  std::function<Expected<void*>(size_t, DType, const std::vector<int64_t>&)> output;
  // Device scratch valid for the rest of the step.
  std::function<Expected<void*>(size_t)> scratch;
  // Device word a kernel sets to `error_tag` on invalid data (Gather's indices); the executor
  // checks it after the run and reports the step.
  int* error_flag = nullptr;
  int error_tag = 0;
  bool tf32 = false;  // f32 GEMMs on TF32 tensor cores (--precision tf32)
};

// Returns false when the op declines the node (nothing was written).
using NativeOp = Expected<bool> (*)(const Node& node, NativeIO& io, CudaBackend& be);

// The GPU implementation of `node`'s op, or null.
NativeOp find_native_op(const Node& node);
// Ops worth moving to the GPU even when all their inputs are on the host (compute-heavy).
bool is_compute_heavy(const Node& node);

// ferrite.Attention in three steps (f32, equal batch dims: p's operand batch strides are those of
// contiguous [batch, ...] operands): QK^T GEMM into `scores` (batch x S x T floats), the softmax
// kernel (mask, causal, nan_to_zero; exp and sum in double), P.V GEMM into `out`. The fallback
// of the fused kernel, and its baseline in the timing test.
Status attention_three_step(CudaBackend& be, const FlashProblem& p, const float* q, const float* k,
                            const float* v, const float* mask, float* out, float* scores);

}  // namespace ferrite::cuda
