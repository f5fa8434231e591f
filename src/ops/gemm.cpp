#include "ops/gemm.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "ir/dtype.h"

namespace ferrite {

namespace {
template <class A, bool = std::is_integral_v<A>>
struct wrap_type {
  using type = A;
};
template <class A>
struct wrap_type<A, true> {
  using type = std::make_unsigned_t<A>;
};
}  // namespace

template <class T, class Acc>
void reference_gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t a_row, int64_t a_col,
                    const T* B, int64_t b_row, int64_t b_col, T* C, int64_t c_row,
                    bool accumulate) {
  // Row-of-C at a time: acc[n] += A[m,k] * B[k,n]; the inner loop runs over contiguous n when B
  // is row-major, which the compiler vectorises. A transposed B is packed once per call.
  // Integer products and sums wrap modulo 2^64 (signed overflow would be undefined behaviour);
  // the final narrowing keeps the low bits, the two's-complement result ONNX runtimes produce.
  using U = typename wrap_type<Acc>::type;
  // Pack B into a contiguous K x N buffer (also converts 16-bit floats once).
  std::vector<U> bconv(static_cast<size_t>(K * N));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      bconv[k * N + n] = static_cast<U>(convert<Acc>(B[k * b_row + n * b_col]));
  std::vector<U> acc(static_cast<size_t>(N));
  for (int64_t m = 0; m < M; ++m) {
    std::fill(acc.begin(), acc.end(), U(0));
    for (int64_t k = 0; k < K; ++k) {
      U a = static_cast<U>(convert<Acc>(A[m * a_row + k * a_col]));
      const U* brow_p = &bconv[k * N];
      U* accp = acc.data();
      for (int64_t n = 0; n < N; ++n) accp[n] += a * brow_p[n];
    }
    T* c = C + m * c_row;
    for (int64_t n = 0; n < N; ++n) {
      U v = accumulate ? static_cast<U>(static_cast<U>(convert<Acc>(c[n])) + acc[n]) : acc[n];
      c[n] = convert<T>(static_cast<Acc>(v));
    }
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
