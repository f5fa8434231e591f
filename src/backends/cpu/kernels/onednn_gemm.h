// A batch of 2-D f32 GEMMs with an epilogue, run as single-threaded oneDNN matmuls on blocks of
// the output spread over ferrite's thread pool (gemm.cpp). Shared by the GEMM-family kernels and
// by pointwise convolutions, which are GEMMs on NCHW data.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/thread_pool.h"
#include "ir/tensor.h"
#include "ops/activation_epilogue.h"

namespace ferrite::onednn {

// y[i] = act(scale * A_i @ B_i + col_bias + row_bias) + res, for batch items i (with res_first:
// act(... + res)); y is dense [items, M, N].
struct GemmProblem {
  int64_t M = 0, N = 0, K = 0;
  const float* a = nullptr;  // A_i[m][k] = a[a_off[i] + m * a_rs + k * a_cs]
  int64_t a_rs = 0, a_cs = 1;
  const float* b = nullptr;  // B_i[k][n] = b[b_off[i] + k * b_rs + n * b_cs]
  int64_t b_rs = 0, b_cs = 1;
  std::vector<int64_t> a_off{0}, b_off{0};  // one entry per batch item
  float* y = nullptr;
  // B's storage when B is a graph constant shared by all items: it is then reordered once into
  // oneDNN's preferred layout and cached.
  const Tensor* b_constant = nullptr;
  const float* col_bias = nullptr;  // [N]
  const float* row_bias = nullptr;  // [M]
  Activation act;
  // Residual: dense like y (res_full) or one [N] row for every output row.
  const float* res = nullptr;
  bool res_full = false;
  bool res_first = false;  // residual added before the activation (FusedConv), not after
  float scale = 1.0f;
};

// False when oneDNN has no fast implementation for some block (the caller falls back). Single
// matrix-vector products go to run_gemv first.
bool run_gemm(const GemmProblem& p, ThreadPool& pool);

// One item whose output is one column (N 1, A's rows contiguous, B's column contiguous) or one row
// (M 1, A's row contiguous, B stored [N, K]) with K >= 16 and at least 16 outputs: a dot product
// per output on ferrite's own loop (gemv.cpp). False when the problem is not such a product.
bool run_gemv(const GemmProblem& p, ThreadPool& pool);

}  // namespace ferrite::onednn
