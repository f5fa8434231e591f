// Matrix-vector products of run_gemm (one output row or column) on ferrite's own loop: each
// output is the dot product of one contiguous weight row with the vector, so the weights stream
// through once at memory speed. oneDNN's matmul ran these at half of ONNX Runtime's speed
// (MobileNetV3's and EfficientNet's squeeze-and-excitation 1x1 convolutions on one pixel:
// 0.41-0.55x of ORT per layer at batch 1; 0.61-0.92x on this loop).
#include <algorithm>

#include "backends/cpu/kernels/onednn_gemm.h"
#include "support/target_clones.h"

namespace ferrite::onednn {

namespace {

typedef float v16 __attribute__((vector_size(64)));

// sum_k w[k] * x[k], four 16-lane accumulators, then the tail. Vectors stay local, so the
// clones' ABI does not depend on their vector extensions.
FERRITE_TARGET_CLONES float dot(const float* __restrict w, const float* __restrict x, int64_t k) {
  v16 a0{}, a1{}, a2{}, a3{};
  int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
    v16 w0, w1, w2, w3, x0, x1, x2, x3;
    __builtin_memcpy(&w0, w + i, 64);
    __builtin_memcpy(&w1, w + i + 16, 64);
    __builtin_memcpy(&w2, w + i + 32, 64);
    __builtin_memcpy(&w3, w + i + 48, 64);
    __builtin_memcpy(&x0, x + i, 64);
    __builtin_memcpy(&x1, x + i + 16, 64);
    __builtin_memcpy(&x2, x + i + 32, 64);
    __builtin_memcpy(&x3, x + i + 48, 64);
    a0 += w0 * x0;
    a1 += w1 * x1;
    a2 += w2 * x2;
    a3 += w3 * x3;
  }
  for (; i + 16 <= k; i += 16) {
    v16 w0, x0;
    __builtin_memcpy(&w0, w + i, 64);
    __builtin_memcpy(&x0, x + i, 64);
    a0 += w0 * x0;
  }
  const v16 s = (a0 + a1) + (a2 + a3);
  float r = 0;
  for (int j = 0; j < 16; ++j) r += s[j];
  for (; i < k; ++i) r += w[i] * x[i];
  return r;
}

}  // namespace

bool run_gemv(const GemmProblem& p, ThreadPool& pool) {
  if (p.a_off.size() != 1 || p.b_off.size() != 1 || p.K < 16) return false;
  // The outputs j = 0..n-1: dot(rows + j * row_stride, vec).
  const float *rows, *vec;
  int64_t n, row_stride;
  if (p.N == 1 && p.a_cs == 1 && p.b_rs == 1) {  // y[m] = A[m, :] . B[:, 0]
    rows = p.a + p.a_off[0];
    row_stride = p.a_rs;
    vec = p.b + p.b_off[0];
    n = p.M;
  } else if (p.M == 1 && p.b_rs == 1 && p.a_cs == 1) {  // y[n] = A[0, :] . B[:, n]
    rows = p.b + p.b_off[0];
    row_stride = p.b_cs;
    vec = p.a + p.a_off[0];
    n = p.N;
  } else {
    return false;
  }
  if (n < 16) return false;
  const bool by_rows = p.N == 1;  // then j indexes M: row bias per output, column bias shared
  // Chunks of at least 32 outputs: one dot product is too little work to hand a thread.
  pool.parallel_for(n, 32, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      float v = p.scale * dot(rows + j * row_stride, vec, p.K);
      if (p.col_bias) v += p.col_bias[by_rows ? 0 : j];
      if (p.row_bias) v += p.row_bias[by_rows ? j : 0];
      // A residual is dense like y (res_full) or one [N] row for every output row.
      const float r = p.res ? p.res[p.res_full || !by_rows ? j : 0] : 0.f;
      if (p.res && p.res_first) v += r;
      v = apply_activation(p.act, v);
      if (p.res && !p.res_first) v += r;
      p.y[j] = v;
    }
  });
  return true;
}

}  // namespace ferrite::onednn
