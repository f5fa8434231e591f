// Hand-vectorised epilogue loops for the scalar-function rows whose generic loop (a per-element
// libm call) and whose library post-ops are both slow: y[i] = f(y[i] + res[i]) like
// ScalarEval::f32_epilogue, with the reference formula's results up to rounding (its exp within
// 2 ulp) and its NaN / infinity behaviour.
#pragma once

#include <cstdint>

namespace ferrite {

// SiLU, x * sigmoid(x): AVX-512 where the CPU has it (16 lanes; exp by range reduction and a
// degree-7 polynomial, 2^k by scalef), else the generic loop `fallback`. About 0.25 ns an
// element on the 2-core Zen 4 host against 0.55-0.65 ns for oneDNN's swish post-op (session 20).
void silu_epilogue(float* y, const float* res, int64_t n, const float* p,
                   void (*fallback)(float*, const float*, int64_t, const float*));

// Whether silu_epilogue runs its vector loop on this CPU (library kernels then leave SiLU to it
// rather than to their own post-op).
bool silu_epilogue_vectorised();

}  // namespace ferrite
