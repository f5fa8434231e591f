// A plain, cache-friendly reference GEMM used by MatMul, Gemm and convolution kernels.
#pragma once

#include <cstdint>

namespace ferrite {

// C[m,n] = sum_k A[m,k] * B[k,n] (+ C if accumulate), with arbitrary row/col strides so that
// transposed operands need no copy. Accumulates in Acc.
template <class T, class Acc = T>
void reference_gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t a_row, int64_t a_col,
                    const T* B, int64_t b_row, int64_t b_col, T* C, int64_t c_row, bool accumulate);

}  // namespace ferrite
