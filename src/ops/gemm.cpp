#include "ops/gemm.h"

#include <algorithm>
#include <vector>

#include "ir/dtype.h"

namespace ferrite {

template <class T, class Acc>
void reference_gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t a_row, int64_t a_col,
                    const T* B, int64_t b_row, int64_t b_col, T* C, int64_t c_row,
                    bool accumulate) {
  // Row-of-C at a time: acc[n] += A[m,k] * B[k,n]; the inner loop runs over contiguous n when B
  // is row-major, which the compiler vectorises. A transposed B is packed once per call.
  // Pack B into a contiguous K x N buffer of Acc (also converts 16-bit floats once).
  std::vector<Acc> bconv(static_cast<size_t>(K * N));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) bconv[k * N + n] = convert<Acc>(B[k * b_row + n * b_col]);
  std::vector<Acc> acc(static_cast<size_t>(N));
  for (int64_t m = 0; m < M; ++m) {
    std::fill(acc.begin(), acc.end(), Acc(0));
    for (int64_t k = 0; k < K; ++k) {
      Acc a = convert<Acc>(A[m * a_row + k * a_col]);
      const Acc* brow_p = &bconv[k * N];
      Acc* accp = acc.data();
      for (int64_t n = 0; n < N; ++n) accp[n] += a * brow_p[n];
    }
    T* c = C + m * c_row;
    for (int64_t n = 0; n < N; ++n)
      c[n] = accumulate ? convert<T>(static_cast<Acc>(convert<Acc>(c[n]) + acc[n])) : convert<T>(acc[n]);
  }
}

template void reference_gemm<float, float>(int64_t, int64_t, int64_t, const float*, int64_t,
                                           int64_t, const float*, int64_t, int64_t, float*,
                                           int64_t, bool);
template void reference_gemm<double, double>(int64_t, int64_t, int64_t, const double*, int64_t,
                                             int64_t, const double*, int64_t, int64_t, double*,
                                             int64_t, bool);
template void reference_gemm<Half, float>(int64_t, int64_t, int64_t, const Half*, int64_t, int64_t,
                                          const Half*, int64_t, int64_t, Half*, int64_t, bool);
template void reference_gemm<BFloat16, float>(int64_t, int64_t, int64_t, const BFloat16*, int64_t,
                                              int64_t, const BFloat16*, int64_t, int64_t,
                                              BFloat16*, int64_t, bool);
template void reference_gemm<int32_t, int64_t>(int64_t, int64_t, int64_t, const int32_t*, int64_t,
                                               int64_t, const int32_t*, int64_t, int64_t,
                                               int32_t*, int64_t, bool);
template void reference_gemm<int64_t, int64_t>(int64_t, int64_t, int64_t, const int64_t*, int64_t,
                                               int64_t, const int64_t*, int64_t, int64_t,
                                               int64_t*, int64_t, bool);
template void reference_gemm<uint32_t, uint64_t>(int64_t, int64_t, int64_t, const uint32_t*,
                                                 int64_t, int64_t, const uint32_t*, int64_t,
                                                 int64_t, uint32_t*, int64_t, bool);
template void reference_gemm<uint64_t, uint64_t>(int64_t, int64_t, int64_t, const uint64_t*,
                                                 int64_t, int64_t, const uint64_t*, int64_t,
                                                 int64_t, uint64_t*, int64_t, bool);

}  // namespace ferrite
