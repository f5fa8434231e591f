// Column-buffer helpers shared by the convolution reference kernels (conv.cpp: Conv,
// ConvTranspose, DeformConv; conv_grad.cpp: ferrite.ConvGradWeight): im2col over chunks of whole
// output rows, the dtype visit with its compute type, and small index helpers.
#pragma once

#include <algorithm>
#include <vector>

#include "ir/dtype.h"
#include "ops/conv_util.h"
#include "ops/helpers.h"

namespace ferrite::conv_columns {

// Elements of one column-buffer chunk (K x P): ~256 KB of float.
constexpr int64_t kChunkElems = int64_t{1} << 16;

// Rows (of `row_len` columns) per chunk of a `k`-row column buffer: about kChunkElems elements,
// but at least kMinCols columns so that the GEMM's inner loops stay long on small images.
constexpr int64_t kMinCols = 256;
inline int64_t chunk_rows(int64_t k, int64_t row_len) {
  int64_t by_size = kChunkElems / std::max<int64_t>(1, k * row_len);
  int64_t by_cols = (kMinCols + row_len - 1) / std::max<int64_t>(1, row_len);
  return std::max<int64_t>({1, by_size, by_cols});
}

// Floor division for a possibly negative numerator (ConvTranspose pads follow Python's //).
inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// The range [lo, hi) of j in [0, n) for which 0 <= base + j*s < limit.
inline void valid_range(int64_t base, int64_t s, int64_t n, int64_t limit, int64_t* lo,
                        int64_t* hi) {
  int64_t l = base >= 0 ? 0 : (-base + s - 1) / s;
  int64_t h = base >= limit ? 0 : (limit - base + s - 1) / s;
  *lo = std::min(l, n);
  *hi = std::max(*lo, std::min(h, n));
}

// Splits `flat` into a row-major multi-index over dims[0..count).
inline void unflatten(int64_t flat, const std::vector<int64_t>& dims, size_t count,
                      std::vector<int64_t>& idx) {
  for (size_t d = count; d-- > 0;) {
    idx[d] = flat % dims[d];
    flat /= dims[d];
  }
}

inline std::vector<int64_t> spatial_dims(const Tensor& t) {
  return std::vector<int64_t>(t.dims().begin() + 2, t.dims().end());
}

template <class T, class C>
std::vector<C> to_compute(const Tensor& t) {
  std::vector<C> out(static_cast<size_t>(t.numel()));
  const T* p = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = convert<C>(p[i]);
  return out;
}

// Column buffer rows (c, kernel offset) x columns (output rows r0..r1, whole last dim): the
// input value each kernel tap sees at each output position, 0 in the padding.
template <class T, class C>
void im2col(const T* x, int64_t channels, const std::vector<int64_t>& in,
            const std::vector<int64_t>& out, const Window& w, int64_t r0, int64_t r1, C* col) {
  const size_t n = w.rank, last = n - 1;
  const int64_t in_size = product(in), kvol = w.kernel_volume();
  const int64_t ow = out[last], iw = in[last], s = w.strides[last];
  const int64_t P = (r1 - r0) * ow;
  std::vector<int64_t> k(n), o(n);
  for (int64_t c = 0; c < channels; ++c) {
    const T* xc = x + c * in_size;
    for (int64_t kk = 0; kk < kvol; ++kk) {
      unflatten(kk, w.kernel, n, k);
      C* dst = col + (c * kvol + kk) * P;
      const int64_t base = k[last] * w.dilations[last] - w.pad_begin(last);
      int64_t lo, hi;
      valid_range(base, s, ow, iw, &lo, &hi);
      for (int64_t r = r0; r < r1; ++r, dst += ow) {
        unflatten(r, out, last, o);
        int64_t off = 0;
        bool inside = true;
        for (size_t d = 0; d < last && inside; ++d) {
          int64_t i = o[d] * w.strides[d] - w.pad_begin(d) + k[d] * w.dilations[d];
          inside = i >= 0 && i < in[d];
          off = off * in[d] + i;
        }
        if (!inside) {
          std::fill(dst, dst + ow, C(0));
          continue;
        }
        off = off * iw + base;
        std::fill(dst, dst + lo, C(0));
        if (s == 1) {
          for (int64_t j = lo; j < hi; ++j) dst[j] = convert<C>(xc[off + j]);
        } else {
          for (int64_t j = lo; j < hi; ++j) dst[j] = convert<C>(xc[off + j * s]);
        }
        std::fill(dst + hi, dst + ow, C(0));
      }
    }
  }
}

}  // namespace ferrite::conv_columns
