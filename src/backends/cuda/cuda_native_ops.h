// Library steps that run on the GPU (GEMM-based ops, convolution, pooling, attention). The
// executor hands each one device views of its inputs and an allocator for its outputs; an op may
// decline a node it does not handle (dtype, rank, attribute combination) before it allocates
// anything, and the step then runs on the host through the op table's reference kernel.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "backend_api/library.h"
#include "backends/cuda/cuda_attention.h"
#include "backends/cuda/cuda_backend.h"
#include "ir/graph.h"

namespace ferrite::cuda {

// The executor's device views and call (backend_api/library.h), by their cuda names.
using DevView = DeviceView;
using NativeIO = DeviceCall;

// Returns false when the op declines the node (nothing was written).
using NativeOp = Expected<bool> (*)(const Node& node, NativeIO& io, CudaBackend& be);

// The one float dtype of every present input that cuBLASLt multiplies (f32, bf16, f16), or
// kUndefined.
DType gemm_dtype(const NativeIO& io);

// cuda_conv_ops.cpp: Conv and ferrite.FusedConv (NCHW or channels-last); MaxPool, AveragePool
// and ferrite.Pool (2-D).
Expected<bool> run_conv(const Node& node, NativeIO& io, CudaBackend& be);
// ConvTranspose and ferrite.ConvGradWeight (2-D, [N, C, H, W]) on cuDNN's backward calls.
Expected<bool> run_conv_transpose(const Node& node, NativeIO& io, CudaBackend& be);
Expected<bool> run_conv_grad_weight(const Node& node, NativeIO& io, CudaBackend& be);
Expected<bool> run_pool(const Node& node, NativeIO& io, CudaBackend& be);

// cuda_attention_ops.cpp: ferrite.Attention (fused kernel, cuDNN's SDPA, or the f32 3-step path).
Expected<bool> run_attention(const Node& node, NativeIO& io, CudaBackend& be);
// The attention `p` in cuDNN's SDPA layout; nullopt where cuDNN's operation does not express it
// (f32, mask, causal limit, NaN guard, more than two batch dims, broadcast batch dims).
std::optional<CudnnSdpaProblem> cudnn_sdpa_problem(const FlashProblem& p, DType dtype);

// cuda_indexing_ops.cpp: GatherElements, ScatterElements (every reduction), ScatterND.
Expected<bool> run_gather_elements(const Node& node, NativeIO& io, CudaBackend& be);
Expected<bool> run_scatter_elements(const Node& node, NativeIO& io, CudaBackend& be);
Expected<bool> run_scatter_nd(const Node& node, NativeIO& io, CudaBackend& be);
Expected<bool> run_gather_nd(const Node& node, NativeIO& io, CudaBackend& be);
Expected<bool> run_cumsum(const Node& node, NativeIO& io, CudaBackend& be);
// Integer Div and Mod (int32 / int64, broadcast); a zero divisor sets the error flag.
Expected<bool> run_int_divmod(const Node& node, NativeIO& io, CudaBackend& be);

// Right-aligned broadcast of two shapes; nullopt when they do not broadcast.
std::optional<std::vector<int64_t>> broadcast(std::vector<int64_t> a, std::vector<int64_t> b);

// The product of dims [b, e).
int64_t prod(const std::vector<int64_t>& v, size_t b = 0, size_t e = SIZE_MAX);

// The cuda library table (BackendParts::library): the ops above, keyed by OpId; the executor
// passes the CudaBackend as their state. Compute-heavy ops (and Gathers from large constant
// tables) run on the GPU even when all their inputs are on the host.
std::shared_ptr<const LibraryOps> cuda_library_ops();

// ferrite.Attention in three steps (f32, equal batch dims: p's operand batch strides are those of
// contiguous [batch, ...] operands): QK^T GEMM into `scores` (batch x S x T floats), the softmax
// kernel (mask, causal, nan_to_zero; exp and sum in double), P.V GEMM into `out`. The fallback
// of the fused kernel, and its baseline in the timing test.
Status attention_three_step(CudaBackend& be, const FlashProblem& p, const float* q, const float* k,
                            const float* v, const float* mask, float* out, float* scores);

}  // namespace ferrite::cuda
