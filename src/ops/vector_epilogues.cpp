#include "ops/vector_epilogues.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FERRITE_HAVE_AVX512_EPILOGUES 1
#endif

namespace ferrite {

namespace {

#if FERRITE_HAVE_AVX512_EPILOGUES
// x * sigmoid(x) for 16 lanes, with the reference's stable form: e = exp(-|x|) (never of a large
// positive number), sigmoid = 1 / (1 + e) for x >= 0 and e / (1 + e) below. NaN stays NaN (the
// clamp sends it down a finite path and x * s brings it back); x = -inf gives -inf * 0 = NaN and
// +inf gives +inf, as the reference does.
__attribute__((target("avx512f"))) inline __m512 silu16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 ax = _mm512_abs_ps(x);
  const __m512 c = _mm512_max_ps(_mm512_sub_ps(_mm512_setzero_ps(), ax), _mm512_set1_ps(-104.0f));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(c, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // c - k ln 2 in two parts (the first product is exact for |k| < 2^11).
  const __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.42860682030941723e-6f),
                                    _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145751953125f), c));
  __m512 q = _mm512_set1_ps(1.0f / 5040.0f);
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 720.0f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 120.0f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 24.0f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 6.0f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.5f));
  q = _mm512_fmadd_ps(q, r, one);
  q = _mm512_fmadd_ps(q, r, one);
  const __m512 e = _mm512_scalef_ps(q, k);  // q * 2^k, rounded once (subnormals included)
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 num = _mm512_mask_mov_ps(one, neg, e);
  return _mm512_mul_ps(x, _mm512_div_ps(num, _mm512_add_ps(one, e)));
}

__attribute__((target("avx512f"))) void silu_avx512(float* y, const float* res, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 x = _mm512_loadu_ps(y + i);
    if (res) x = _mm512_add_ps(x, _mm512_loadu_ps(res + i));
    _mm512_storeu_ps(y + i, silu16(x));
  }
  if (i < n) {  // the tail under a mask
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512 x = _mm512_maskz_loadu_ps(m, y + i);
    if (res) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, res + i));
    _mm512_mask_storeu_ps(y + i, m, silu16(x));
  }
}
#endif

}  // namespace

bool silu_epilogue_vectorised() {
#if FERRITE_HAVE_AVX512_EPILOGUES
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
#else
  return false;
#endif
}

void silu_epilogue(float* y, const float* res, int64_t n, const float* p,
                   void (*fallback)(float*, const float*, int64_t, const float*)) {
#if FERRITE_HAVE_AVX512_EPILOGUES
  if (silu_epilogue_vectorised()) {
    silu_avx512(y, res, n);
    return;
  }
#endif
  fallback(y, res, n, p);
}

}  // namespace ferrite
