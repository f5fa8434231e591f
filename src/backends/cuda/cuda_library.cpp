#include "backends/cuda/cuda_library.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "codegen/cuda_source.h"
#include "codegen/scalar_emitter.h"

namespace ferrite::cuda {

namespace {

// After the generated-code prelude, the scalar helpers and fe_act (codegen/cuda_source.h), so
// that the activations are the scalar-function table's, spelled as generated kernels spell them.
const char* kLibrarySource = R"(// ferrite cuda library kernels.
#define KMAXR 6
struct BroadcastDims { int64_t dims[KMAXR]; int64_t strides[KMAXR]; };
struct ConvParams {
  int64_t N, C, H, W, K, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, groups;
  int act;
  float lo, hi;
};
struct PoolParams { int64_t planes, C, H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw; };
struct SoftmaxParams {
  int64_t rows_per_batch, S, T, batch_rank;
  int64_t batch_dims[4];
  int64_t mask_batch_strides[4];
  int64_t mask_s_stride, mask_t_stride;
  int causal, nan_to_zero, has_mask;
  int masked_rows_zero;
};

// Element i of a buffer of dtype code dt (0 f32, 1 bf16, 2 f16), computed in float; stores round
// as the generated kernels do (fe_float_to_bf16 / fe_float_to_half of the prelude).
__device__ __forceinline__ float fe_ld(const void* p, int64_t i, int dt) {
  if (dt == 0) return ((const float*)p)[i];
  const unsigned short h = ((const unsigned short*)p)[i];
  if (dt == 1) return __uint_as_float(((unsigned int)h) << 16);
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ void fe_st(void* p, int64_t i, float v, int dt) {
  if (dt == 0) {
    ((float*)p)[i] = v;
    return;
  }
  ((unsigned short*)p)[i] = dt == 1 ? fe_float_to_bf16(v) : fe_float_to_half(v);
}

#define GRID_STRIDE(i, n) \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// Index arithmetic in I: 32-bit when every tensor of the call has fewer than 2^31 elements
// (64-bit division costs several times more), 64-bit otherwise.
template <class I, int DT>
__device__ __forceinline__ void conv2d_impl(const void* __restrict__ x, const void* __restrict__ w,
                                            const void* __restrict__ bias, void* __restrict__ y,
                                            const ConvParams& p) {
  const I OW = (I)p.OW, OH = (I)p.OH, K = (I)p.K, H = (I)p.H, W = (I)p.W, KH = (I)p.KH, KW = (I)p.KW;
  const I total = (I)p.N * K * OH * OW;
  const I cg = (I)(p.C / p.groups), kg = (I)(p.K / p.groups);
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * blockDim.x) {
    I r = i;
    const I ow = r % OW; r /= OW;
    const I oh = r % OH; r /= OH;
    const I k = r % K;
    const I n = r / K;
    const I g = k / kg;
    float acc = bias ? fe_ld(bias, k, DT) : 0.f;
    const I xb = (n * (I)p.C + g * cg) * H * W;
    const I wb = k * cg * KH * KW;
    const I ih0 = oh * (I)p.sh - (I)p.ph, iw0 = ow * (I)p.sw - (I)p.pw;
    for (I c = 0; c < cg; ++c) {
      for (I kh = 0; kh < KH; ++kh) {
        const I ih = ih0 + kh * (I)p.dh;
        if (ih < 0 || ih >= H) continue;
        for (I kw = 0; kw < KW; ++kw) {
          const I iw = iw0 + kw * (I)p.dw;
          if (iw < 0 || iw >= W) continue;
          acc += fe_ld(x, xb + (c * H + ih) * W + iw, DT) * fe_ld(w, wb + (c * KH + kh) * KW + kw, DT);
        }
      }
    }
    fe_st(y, i, fe_act(acc, p.act, p.lo, p.hi), DT);
  }
}

__device__ __forceinline__ bool fe_fits32(const ConvParams& p) {
  const int64_t lim = 0x7fffffffLL - (int64_t)gridDim.x * blockDim.x;
  return p.N * p.C * p.H * p.W < lim && p.N * p.K * p.OH * p.OW < lim &&
         p.C * p.KH * p.KW * p.N * p.OH * p.OW < lim && p.K * p.C * p.KH * p.KW < lim;
}

// One thread per output element; grouped and depthwise convolutions (and any other shape). All
// tensors of dtype code dt (fe_ld), accumulated in float.
template <int DT>
__device__ __forceinline__ void conv2d_dt(const void* x, const void* w, const void* bias, void* y,
                                          const ConvParams& p) {
  if (fe_fits32(p)) conv2d_impl<int, DT>(x, w, bias, y, p);
  else conv2d_impl<int64_t, DT>(x, w, bias, y, p);
}
extern "C" __global__ void fe_conv2d(const void* __restrict__ x, const void* __restrict__ w,
                                     const void* __restrict__ bias, void* __restrict__ y,
                                     ConvParams p, int dt) {
  if (dt == 0) conv2d_dt<0>(x, w, bias, y, p);
  else if (dt == 1) conv2d_dt<1>(x, w, bias, y, p);
  else conv2d_dt<2>(x, w, bias, y, p);
}

// col[c*KH*KW + kh*KW + kw][n*OH*OW + oh*OW + ow] (groups == 1): the images side by side, so
// one GEMM covers the batch.
template <class I, int DT>
__device__ __forceinline__ void im2col_impl(const void* __restrict__ x, void* __restrict__ col,
                                            const ConvParams& p) {
  const I OW = (I)p.OW, OH = (I)p.OH, KW = (I)p.KW, KH = (I)p.KH, H = (I)p.H, W = (I)p.W, C = (I)p.C;
  const I ohw = OH * OW, cols = (I)p.N * ohw;
  const I total = C * KH * KW * cols;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * blockDim.x) {
    const I row = i / cols, q = i - row * cols;
    const I n = q / ohw, pix = q - n * ohw;
    const I oh = pix / OW, ow = pix - oh * OW;
    const I kw = row % KW, t = row / KW;
    const I kh = t % KH, c = t / KH;
    const I ih = oh * (I)p.sh - (I)p.ph + kh * (I)p.dh, iw = ow * (I)p.sw - (I)p.pw + kw * (I)p.dw;
    // A copy: bf16 / f16 values pass through float exactly.
    fe_st(col, i, (ih >= 0 && ih < H && iw >= 0 && iw < W) ? fe_ld(x, ((n * C + c) * H + ih) * W + iw, DT) : 0.f, DT);
  }
}

template <int DT>
__device__ __forceinline__ void im2col_dt(const void* x, void* col, const ConvParams& p) {
  if (fe_fits32(p)) im2col_impl<int, DT>(x, col, p);
  else im2col_impl<int64_t, DT>(x, col, p);
}
extern "C" __global__ void fe_im2col(const void* __restrict__ x, void* __restrict__ col,
                                     ConvParams p, int dt) {
  if (dt == 0) im2col_dt<0>(x, col, p);
  else if (dt == 1) im2col_dt<1>(x, col, p);
  else im2col_dt<2>(x, col, p);
}

// y[n][k][pix] = act(t[k][n*plane + pix] + bias[k]): the batched GEMM's [K, N*plane] result
// back to NCHW, with the bias and activation.
extern "C" __global__ void fe_bias_act_unfold(const void* __restrict__ t, void* __restrict__ y,
                                              const void* __restrict__ bias, int64_t n_img,
                                              int64_t channels, int64_t plane, int act, int dt) {
  const int64_t total = n_img * channels * plane;
  const bool small = total + (int64_t)gridDim.x * blockDim.x < 0x7fffffffLL;
  GRID_STRIDE(i, total) {
    int64_t n, k, pix;
    if (small) {
      const int ii = (int)i, pl = (int)plane, ch = (int)channels;
      pix = ii % pl;
      const int r = ii / pl;
      k = r % ch;
      n = r / ch;
    } else {
      pix = i % plane;
      k = (i / plane) % channels;
      n = i / (plane * channels);
    }
    float v = fe_ld(t, k * n_img * plane + n * plane + pix, dt);
    if (bias) v += fe_ld(bias, k, dt);
    fe_st(y, i, fe_act(v, act, 0.f, 0.f), dt);
  }
}

// v rounded to the storage type dt, as a store and reload would.
__device__ __forceinline__ float fe_rnd(float v, int dt) {
  if (dt == 0) return v;
  unsigned short h;
  fe_st(&h, 0, v, dt);
  return fe_ld(&h, 0, dt);
}

// A convolution's epilogue in place: y = act(y + bias[c] + res), rounded to the storage type after
// the bias and after the residual add as the unfused Add would. c = (i / plane) % channels: plane
// = H * W for [N, C, H, W], 1 for channels-last [N, H, W, C].
extern "C" __global__ void fe_bias_act_nchw(void* __restrict__ y, const void* __restrict__ bias,
                                            const void* __restrict__ res, int64_t total,
                                            int64_t channels, int64_t plane, int act, float lo,
                                            float hi, int dt) {
  const bool small = total + (int64_t)gridDim.x * blockDim.x < 0x7fffffffLL;
  GRID_STRIDE(i, total) {
    float v = fe_ld(y, i, dt);
    if (bias) v += fe_ld(bias, small ? ((int)i / (int)plane) % (int)channels : (i / plane) % channels, dt);
    if (res) v = fe_rnd(fe_rnd(v, dt) + fe_ld(res, i, dt), dt);
    fe_st(y, i, fe_act(v, act, lo, hi), dt);
  }
}

// fe_bias_act_nchw for 16-bit storage (dt 1 bf16, 2 f16) in channels-last layout with channels
// % 8 == 0 and 16-byte aligned buffers: each thread takes 8 consecutive channels of one pixel
// with 16-byte loads and stores (the scalar kernel's 2-byte accesses and 64-bit index division
// ran at a fifth of the copy bandwidth). `groups` = total / 8.
template <int KIND, int DT>
__device__ __forceinline__ void bias_act_nhwc8_impl(void* __restrict__ y,
                                                    const void* __restrict__ bias,
                                                    const void* __restrict__ res, int64_t groups,
                                                    int channels, int act, float lo, float hi,
                                                    int res_after) {
  constexpr int dt = DT;  // a constant: fe_ld / fe_st compile to one conversion
  const int per_pixel = channels >> 3;
  GRID_STRIDE(g, groups) {
    const int c0 = (groups < 0x7fffffffLL ? (int)g % per_pixel : (int)(g % per_pixel)) << 3;
    uint4 yv = ((const uint4*)y)[g];
    uint4 rv = make_uint4(0, 0, 0, 0);
    if (res) rv = ((const uint4*)res)[g];
    unsigned short* ys = (unsigned short*)&yv;
    const unsigned short* rs = (const unsigned short*)&rv;
    // The 8 bias values in one 16-byte load where the bias is aligned (a GEMM's or a
    // convolution's bias always is: it is a constant of its own).
    uint4 bv = make_uint4(0, 0, 0, 0);
    const bool bias16 = bias && ((unsigned long long)bias & 15) == 0;
    if (bias16) bv = ((const uint4*)bias)[c0 >> 3];
    const unsigned short* bs = (const unsigned short*)&bv;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      float v = fe_ld(ys, k, dt);
      if (bias) v += bias16 ? fe_ld(bs, k, dt) : fe_ld(bias, c0 + k, dt);
      if (res_after) {  // a GEMM epilogue: act(y + bias) + res
        v = fe_act_k<KIND>(v, act, lo, hi);
        if (res) v = fe_rnd(v, dt) + fe_ld(rs, k, dt);
      } else {  // a convolution's: act(y + bias + res)
        if (res) v = fe_rnd(fe_rnd(v, dt) + fe_ld(rs, k, dt), dt);
        v = fe_act_k<KIND>(v, act, lo, hi);
      }
      fe_st(ys, k, v, dt);
    }
    ((uint4*)y)[g] = yv;
  }
}
extern "C" __global__ void fe_bias_act_nhwc8(void* __restrict__ y, const void* __restrict__ bias,
                                             const void* __restrict__ res, int64_t groups,
                                             int channels, int act, int kind, float lo, float hi,
                                             int res_after, int dt) {
#define FE_NHWC8(K, D) bias_act_nhwc8_impl<K, D>(y, bias, res, groups, channels, act, lo, hi, res_after)
  if (dt == 1) {
    FE_BY_KIND(FE_NHWC8, 1)
  } else {
    FE_BY_KIND(FE_NHWC8, 2)
  }
#undef FE_NHWC8
}

// Depthwise filters [C, KH * KW] (2-byte elements of dtype code dt) -> [KH * KW, C] in float, so
// that fe_dwconv_nhwc8 reads 8 channels of a tap with two 16-byte loads and converts nothing
// (converting every tap in every thread made the depthwise kernels ALU-bound).
extern "C" __global__ void fe_tap_major(const unsigned short* __restrict__ w,
                                        float* __restrict__ t, int C, int taps, int dt) {
  GRID_STRIDE(i, (int64_t)C * taps) {
    const int c = (int)(i % C), tap = (int)(i / C);
    t[i] = fe_ld(w, (int64_t)c * taps + tap, dt);
  }
}
// Depthwise convolution (groups = C = K) of channels-last 16-bit x [N, H, W, C] with W
// [C, KH, KW] (the same bytes in both filter layouts; read as float [KH * KW, C] after
// fe_tap_major) and FusedConv's epilogue: each thread takes
// 8 consecutive channels of one output pixel with 16-byte loads; y = act(round(conv + bias) +
// res), rounded as the unfused ops. C % 8 == 0, x / y / res 16-byte aligned.
template <int KIND, int DT>
__device__ __forceinline__ void dwconv_nhwc8_impl(const void* __restrict__ x,
                                                  const void* __restrict__ w,
                                                  const void* __restrict__ bias,
                                                  const void* __restrict__ res, void* __restrict__ y,
                                                  const ConvParams& p, int act) {
  constexpr int dt = DT;
  // 32-bit indices (dwconv_nhwc_takes: every tensor under 2^31 elements) and no division per
  // thread beyond one by the channel groups: blockIdx.y walks the output rows (n, oh), x the
  // row's (column, channel group) pairs. ncu had the 64-bit version's divisions and address
  // arithmetic keep the ALU pipe the busiest (63%) at 10% of DRAM bandwidth.
  const int C = (int)p.C, H = (int)p.H, W = (int)p.W, OH = (int)p.OH, OW = (int)p.OW;
  const int KH = (int)p.KH, KW = (int)p.KW;
  const unsigned cg = (unsigned)C >> 3, rowt = (unsigned)OW * cg, rows = (unsigned)(p.N * p.OH);
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= rowt) return;
  const int ow = (int)(t / cg), c0 = (int)(t - (unsigned)ow * cg) << 3;
  const unsigned short* xs = (const unsigned short*)x + c0;
  const float* wc = (const float*)w + c0;  // float [KH * KW, C] (fe_tap_major)
  const int iw0 = ow * (int)p.sw - (int)p.pw;
  for (unsigned row = blockIdx.y; row < rows; row += gridDim.y) {
    const int n = (int)(row / (unsigned)OH), oh = (int)row - n * OH;
    const int ih0 = oh * (int)p.sh - (int)p.ph;
    float acc[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) acc[k] = 0.f;
    for (int kh = 0; kh < KH; ++kh) {
      const int ih = ih0 + kh * (int)p.dh;
      if (ih < 0 || ih >= H) continue;
      const unsigned short* xr = xs + (n * H + ih) * W * C;
      const float* wr = wc + kh * KW * C;
      for (int kw = 0; kw < KW; ++kw) {
        const int iw = iw0 + kw * (int)p.dw;
        if (iw < 0 || iw >= W) continue;
        const uint4 xv = *(const uint4*)(xr + iw * C);
        // w is float [KH * KW, C] here (fe_tap_major): two 16-byte loads per tap.
        const float4* wt = (const float4*)(wr + kw * C);
        const float4 w0 = wt[0], w1 = wt[1];
        const float we[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
        const unsigned short* xe = (const unsigned short*)&xv;
#pragma unroll
        for (int k = 0; k < 8; ++k) acc[k] += fe_ld(xe, k, dt) * we[k];
      }
    }
    const unsigned g = row * rowt + t;  // uint4 units
    uint4 rv = make_uint4(0, 0, 0, 0);
    if (res) rv = ((const uint4*)res)[g];
    const unsigned short* rs = (const unsigned short*)&rv;
    uint4 yv;
    unsigned short* ys = (unsigned short*)&yv;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      float v = acc[k];
      if (bias) v += fe_ld(bias, c0 + k, dt);
      v = fe_rnd(v, dt);
      if (res) v = fe_rnd(v + fe_ld(rs, k, dt), dt);
      fe_st(ys, k, fe_act_k<KIND>(v, act, p.lo, p.hi), dt);
    }
    ((uint4*)y)[g] = yv;
  }
}
extern "C" __global__ void fe_dwconv_nhwc8(const void* __restrict__ x, const void* __restrict__ w,
                                           const void* __restrict__ bias,
                                           const void* __restrict__ res, void* __restrict__ y,
                                           ConvParams p, int kind, int dt) {
#define FE_DW(K, D) dwconv_nhwc8_impl<K, D>(x, w, bias, res, y, p, p.act)
  if (dt == 1) {
    FE_BY_KIND(FE_DW, 1)
  } else {
    FE_BY_KIND(FE_DW, 2)
  }
#undef FE_DW
}

__device__ __forceinline__ int64_t fe_bcast_offset(int64_t i, const BroadcastDims& b) {
  int64_t off = 0;
  for (int d = KMAXR - 1; d >= 0; --d) {
    const int64_t n = b.dims[d];
    off += (i % n) * b.strides[d];
    i /= n;
  }
  return off;
}

// y, bias and res share the dtype code dt (see fe_ld).
extern "C" __global__ void fe_epilogue(void* __restrict__ y, const void* __restrict__ bias,
                                       const void* __restrict__ res, BroadcastDims rb,
                                       int64_t rows, int64_t cols, int act, float p0, float p1,
                                       int dt) {
  GRID_STRIDE(i, rows * cols) {
    float v = fe_ld(y, i, dt);
    if (bias) v += fe_ld(bias, i % cols, dt);
    v = fe_act(v, act, p0, p1);
    if (res) v += fe_ld(res, fe_bcast_offset(i, rb), dt);
    fe_st(y, i, v, dt);
  }
}

extern "C" __global__ void fe_broadcast_fill(void* __restrict__ y, const void* __restrict__ c,
                                             BroadcastDims b, int64_t total, float beta, int dt) {
  GRID_STRIDE(i, total) fe_st(y, i, beta * fe_ld(c, fe_bcast_offset(i, b), dt), dt);
}

// One block per score row: x = s + mask (+ causal -inf); softmax as the reference's Attention
// (max ignoring NaN, exp and sum in double); NaN probabilities become 0 under nan_to_zero, and
// a row of -inf scores only (no NaN) becomes 0 under masked_rows_zero.
extern "C" __global__ void fe_attention_softmax(float* __restrict__ s, const float* __restrict__ mask,
                                                SoftmaxParams p) {
  const int64_t rows = p.rows_per_batch * p.S;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t b = row / p.S, q = row % p.S;
    int64_t moff = q * p.mask_s_stride;
    int64_t rem = b;
    for (int64_t d = p.batch_rank - 1; d >= 0; --d) {
      moff += (rem % p.batch_dims[d]) * p.mask_batch_strides[d];
      rem /= p.batch_dims[d];
    }
    float* sr = s + row * p.T;
    float mx = -__int_as_float(0x7f800000), has_nan = 0.f;
    for (int64_t t = threadIdx.x; t < p.T; t += blockDim.x) {
      float x = sr[t];
      if (p.has_mask) x += mask[moff + t * p.mask_t_stride];
      if (p.causal && t > q) x = -__int_as_float(0x7f800000);
      sr[t] = x;
      mx = x > mx ? x : mx;
      if (x != x) has_nan = 1.f;
    }
    mx = fe_block_reduce<fe_op_max>(mx);  // the prelude's block reductions
    const bool zero_row = p.masked_rows_zero && mx == -__int_as_float(0x7f800000) &&
                          fe_block_reduce<fe_op_max>(has_nan) == 0.f;
    double sum = 0;
    for (int64_t t = threadIdx.x; t < p.T; t += blockDim.x) sum += exp((double)sr[t] - (double)mx);
    sum = fe_block_reduce<fe_op_sum>(sum);
    for (int64_t t = threadIdx.x; t < p.T; t += blockDim.x) {
      double w = exp((double)sr[t] - (double)mx) / sum;
      if ((p.nan_to_zero && isnan(w)) || zero_row) w = 0;
      sr[t] = (float)w;
    }
  }
}
)";

// Pooling, pad, concat, split, gather and broadcast binary ops (cuda_memory_bound_source.inc),
// compiled after kLibrarySource.
const char* kMemoryBoundSource =
#include "backends/cuda/cuda_memory_bound_source.inc"
    ;
// GatherElements, ScatterElements, ScatterND (cuda_indexing_source.inc).
const char* kIndexingSource =
#include "backends/cuda/cuda_indexing_source.inc"
    ;
// The activations of the 16-bit epilogue kernels (cuda_epilogue_act_source.inc).
const char* kEpilogueActSource =
#include "backends/cuda/cuda_epilogue_act_source.inc"
    ;
// Depthwise convolution with 4 output columns per thread (cuda_dwconv_source.inc).
const char* kDwconvSource =
#include "backends/cuda/cuda_dwconv_source.inc"
    ;
// Depthwise convolution of f32 NCHW, shared-memory tiles (cuda_dwconv_nchw_source.inc).
const char* kDwconvNchwSource =
#include "backends/cuda/cuda_dwconv_nchw_source.inc"
    ;

// fe_act_k's kind of an activation code: 0 none, 1 ReLU, 2 any other row.
// The specialisations of the 16-bit epilogue kernels: 0 none, 1 ReLU, 3 exact GELU, 4 SiLU, 5
// HardSwish, 6 tanh GELU (GPT-2: through the switch it took 18 us a layer at 8x128), 2 any other
// row through fe_act's per-element switch (a kernel without a case for a kind takes it as 2). The
// switch cost the GELU epilogue a third of its time.
int act_kind(int code) {
  if (code == 0) return 0;
  auto code_of = [](const char* name) {
    for (const ScalarFunction& f : scalar_functions())
      if (f.epilogue && std::string(f.epilogue) == name) return f.index() + 1;
    return -1;
  };
  static const int relu = code_of("relu"), gelu = code_of("gelu"), silu = code_of("silu"),
                   hard_swish = code_of("hard_swish"), gelu_tanh = code_of("gelu_tanh");
  if (code == relu) return 1;
  if (code == gelu) return 3;
  if (code == silu) return 4;
  if (code == gelu_tanh) return 6;
  return code == hard_swish ? 5 : 2;
}

// Read per call, so that a test can compare both kernels in one process.
bool env_off(const char* name) {
  const char* v = std::getenv(name);
  return v && (std::string(v) == "0" || std::string(v) == "off");
}

int64_t grid_for(int64_t total, int64_t block, int sms) {
  int64_t g = (total + block - 1) / block;
  return std::max<int64_t>(1, std::min<int64_t>(g, int64_t{sms} * 32));
}

}  // namespace

bool broadcast_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                       BroadcastDims* bd) {
  if (out.size() > kMaxRank || in.size() > out.size()) return false;
  std::vector<int64_t> in_strides(in.size(), 1);
  for (size_t i = in.size(); i-- > 1;) in_strides[i - 1] = in_strides[i] * in[i];
  for (int d = 0; d < kMaxRank; ++d) {
    bd->dims[d] = 1;
    bd->strides[d] = 0;
  }
  size_t off = kMaxRank - out.size(), ioff = out.size() - in.size();
  for (size_t d = 0; d < out.size(); ++d) {
    bd->dims[off + d] = out[d];
    if (d < ioff) continue;
    int64_t n = in[d - ioff];
    if (n == out[d])
      bd->strides[off + d] = in_strides[d - ioff];
    else if (n != 1)
      return false;
  }
  return true;
}

const char* library_source() {
  static const std::string source = std::string(cuda_prelude_source()) + scalar_helpers_source() +
                                    cuda_activation_source() + kEpilogueActSource + kLibrarySource +
                                    kMemoryBoundSource + kDwconvSource + kDwconvNchwSource +
                                    kIndexingSource;
  return source.c_str();
}

// The kernels' dtype code (see fe_ld): 0 f32, 1 bf16, 2 f16.
static int dtype_code(DType t) {
  return t == DType::kBF16 ? 1 : (t == DType::kF16 ? 2 : 0);
}

Expected<ChunkedCompile> LibraryKernels::compile(const std::string& arch,
                                                 const std::string& device_key) {
  const int threads = compile_threads();
  FERRITE_ASSIGN_OR_RETURN(auto programs, split_program(library_source(), threads));
  return compile_chunks(std::move(programs), arch, device_key, threads, "ferrite_library");
}

Expected<std::unique_ptr<LibraryKernels>> LibraryKernels::load(const CudaRuntime& rt,
                                                               const std::string& arch,
                                                               const std::string& device_key,
                                                               const ChunkedCompile* precompiled) {
  ChunkedCompile c;
  if (precompiled) {
    c = *precompiled;
  } else {
    FERRITE_ASSIGN_OR_RETURN(c, compile(arch, device_key));
  }
  auto lib = std::unique_ptr<LibraryKernels>(new LibraryKernels());
  lib->rt_ = &rt;
  FERRITE_ASSIGN_OR_RETURN(lib->module_, ModuleSet::load(rt, c));
  struct {
    const char* name;
    CUfunction* fn;
  } fns[] = {{"fe_conv2d", &lib->conv_},
             {"fe_im2col", &lib->im2col_},
             {"fe_bias_act_nchw", &lib->bias_act_},
             {"fe_bias_act_nhwc8", &lib->bias_act8_},
             {"fe_dwconv_nhwc8", &lib->dwconv8_},
             {"fe_dwconv_nhwc8_w4", &lib->dwconv8w4_},
             {"fe_dwconv_nchw_k3s1", &lib->dwconv_nchw_[0]},
             {"fe_dwconv_nchw_k3s2", &lib->dwconv_nchw_[1]},
             {"fe_dwconv_nchw_k5s1", &lib->dwconv_nchw_[2]},
             {"fe_dwconv_nchw_k5s2", &lib->dwconv_nchw_[3]},
             {"fe_dwconv_nchw_k7s1", &lib->dwconv_nchw_[4]},
             {"fe_dwconv_nchw_k7s2", &lib->dwconv_nchw_[5]},
             {"fe_tap_major", &lib->tap_major_},
             {"fe_pad", &lib->pad_},
             {"fe_concat16", &lib->concat_},
             {"fe_split16", &lib->split_},
             {"fe_pool2d", &lib->pool_},
             {"fe_epilogue", &lib->epilogue_},
             {"fe_epilogue_f32x4", &lib->epilogue4_},
             {"fe_bias_act_nchw_f32x4", &lib->bias_act4_},
             {"fe_broadcast_fill", &lib->fill_},
             {"fe_bias_act_unfold", &lib->unfold_},
             {"fe_gather", &lib->gather_},
             {"fe_gather_1", &lib->gather1_},
             {"fe_gather_2", &lib->gather2_},
             {"fe_gather_4", &lib->gather4_},
             {"fe_gather_16", &lib->gather16_},
             {"fe_binary_f32", &lib->binary_},
             {"fe_binary16_rows", &lib->binary16_},
             {"fe_attention_softmax", &lib->softmax_}};
  for (auto& f : fns) {
    *f.fn = reinterpret_cast<CUfunction>(lib->module_->symbol(f.name));
    if (!*f.fn) return err("cuda: library kernel ", f.name, " missing from its module");
  }
  rt.api().cuDeviceGetAttribute(&lib->sms_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, rt.device());
  return lib;
}

Status LibraryKernels::launch(CUfunction f, int64_t grid, int64_t block, void** args) {
  ++launches_;
  return check(
      rt_->api().cuLaunchKernel(f, static_cast<unsigned>(grid), 1, 1, static_cast<unsigned>(block),
                                1, 1, 0, rt_->stream(), args, nullptr),
      "library kernel launch");
}

Status LibraryKernels::launch3(CUfunction f, const int64_t grid[3], const int block[2], void** args,
                               unsigned shared_bytes) {
  ++launches_;
  return check(rt_->api().cuLaunchKernel(
                   f, static_cast<unsigned>(grid[0]), static_cast<unsigned>(grid[1]),
                   static_cast<unsigned>(grid[2]), static_cast<unsigned>(block[0]),
                   static_cast<unsigned>(block[1]), 1, shared_bytes, rt_->stream(), args, nullptr),
               "library kernel launch");
}

Status LibraryKernels::launch_named(const char* name, int64_t total, void** args) {
  CUfunction f = nullptr;
  {
    std::lock_guard<std::mutex> lock(named_mutex_);
    auto it = named_.find(name);
    if (it == named_.end()) {
      f = reinterpret_cast<CUfunction>(module_->symbol(name));
      if (!f) return err("cuda: library kernel ", name, " missing from its module");
      named_.emplace(name, f);
    } else {
      f = it->second;
    }
  }
  return launch(f, grid_for(total, 256, sms_), 256, args);
}

Status LibraryKernels::conv2d_direct(const void* x, const void* w, const void* bias, void* y,
                                     const ConvParams& p, DType dtype) {
  ConvParams q = p;
  int dt = dtype_code(dtype);
  void* args[] = {&x, &w, &bias, &y, &q, &dt};
  return launch(conv_, grid_for(p.N * p.K * p.OH * p.OW, 256, sms_), 256, args);
}

bool LibraryKernels::dwconv_nhwc_takes(const ConvParams& p, DType dtype, const void* x,
                                       const void* res, const void* y) {
  auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  const int64_t in = p.N * p.H * p.W * p.C, out = p.N * p.OH * p.OW * p.K;
  return dtype_code(dtype) != 0 && p.groups == p.C && p.K == p.C && p.C % 8 == 0 &&
         in < INT32_MAX && out < INT32_MAX && aligned(x) && aligned(res) && aligned(y);
}

Status LibraryKernels::dwconv_nhwc(const void* x, const void* w, void* w_taps, const void* bias,
                                   const void* res, void* y, const ConvParams& p, DType dtype) {
  ConvParams q = p;
  int dt = dtype_code(dtype), kind = act_kind(p.act);
  int c = static_cast<int>(p.C), taps = static_cast<int>(p.KH * p.KW);
  void* targs[] = {&w, &w_taps, &c, &taps, &dt};
  FERRITE_RETURN_IF_ERROR(launch(tap_major_, grid_for(int64_t{c} * taps, 256, sms_), 256, targs));
  void* args[] = {&x, &w_taps, &bias, &res, &y, &q, &kind, &dt};
  // Both kernels: blockIdx.y walks the output rows, x a row's (column, channel group) pairs.
  const int block[2] = {128, 1};
  const int64_t rows = std::min<int64_t>(p.N * p.OH, 65535);
  // 7 wide with stride 1 along the width (ConvNeXt): 4 output columns per thread (see
  // cuda_dwconv_source.inc for why only this filter width).
  if (p.sw == 1 && p.dw == 1 && p.KW == 7 && !env_off("FERRITE_CUDA_DWCONV_W4")) {
    const int64_t grid[3] = {((p.OW + 3) / 4 * (p.C / 8) + 127) / 128, rows, 1};
    return launch3(dwconv8w4_, grid, block, args);
  }
  const int64_t grid[3] = {(p.OW * (p.C / 8) + 127) / 128, rows, 1};
  return launch3(dwconv8_, grid, block, args);
}

Status LibraryKernels::im2col(const void* x, void* col, const ConvParams& p, DType dtype) {
  ConvParams q = p;
  int dt = dtype_code(dtype);
  void* args[] = {&x, &col, &q, &dt};
  return launch(im2col_, grid_for(p.N * p.C * p.KH * p.KW * p.OH * p.OW, 256, sms_), 256, args);
}

Status LibraryKernels::bias_act_nchw(void* y, const void* bias, int64_t total, int64_t channels,
                                     int64_t plane, int act, float lo, float hi, DType dtype,
                                     const void* residual) {
  int dt = dtype_code(dtype);
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (dt != 0 && plane == 1 && channels % 8 == 0 && channels <= INT32_MAX && aligned(y) &&
      aligned(residual)) {  // the bias is read per channel: any alignment
    int64_t groups = total / 8;
    int ch = static_cast<int>(channels), kind = act_kind(act), res_after = 0;
    void* args[] = {&y, &bias, &residual, &groups, &ch, &act, &kind, &lo, &hi, &res_after, &dt};
    return launch(bias_act8_, grid_for(groups, 256, sms_), 256, args);
  }
  if (dt == 0 && plane % 4 == 0 && aligned(y) && aligned(residual) &&
      !env_off("FERRITE_CUDA_EPILOGUE_F32X4")) {
    int64_t groups = total / 4, plane4 = plane / 4;
    void* args[] = {&y, &bias, &residual, &groups, &channels, &plane4, &act, &lo, &hi};
    return launch(bias_act4_, grid_for(groups, 256, sms_), 256, args);
  }
  void* args[] = {&y, &bias, &residual, &total, &channels, &plane, &act, &lo, &hi, &dt};
  return launch(bias_act_, grid_for(total, 256, sms_), 256, args);
}

Status LibraryKernels::bias_act_unfold(const void* t, void* y, const void* bias, int64_t n_img,
                                       int64_t channels, int64_t plane, int act, DType dtype) {
  int dt = dtype_code(dtype);
  void* args[] = {&t, &y, &bias, &n_img, &channels, &plane, &act, &dt};
  return launch(unfold_, grid_for(n_img * channels * plane, 256, sms_), 256, args);
}

Status LibraryKernels::gather(const void* data, const void* idx, bool idx64, void* out,
                              int64_t outer, int64_t axis_len, int64_t n_idx, int64_t inner,
                              int esize, int* err, int tag) {
  int i64 = idx64 ? 1 : 0;
  CUfunction f = esize == 1 ? gather1_ : esize == 2 ? gather2_ : esize == 4 ? gather4_ : gather_;
  auto on16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if ((inner * esize) % 16 == 0 && on16(data) && on16(out)) {
    inner = inner * esize / 16;
    f = gather16_;
  }
  void* args[] = {&data, &idx, &i64, &out, &outer, &axis_len, &n_idx, &inner, &esize, &err, &tag};
  return launch(f, grid_for(outer * n_idx * inner, 256, sms_), 256, args);
}

Status LibraryKernels::binary_f32(const void* a, const BroadcastDims& ab, const void* b,
                                  const BroadcastDims& bb, void* y, int64_t total, int op,
                                  DType dtype) {
  BroadcastDims x = ab, z = bb;
  int dt = dtype_code(dtype);
  auto on16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const int64_t cols = ab.dims[kMaxRank - 1];
  if (dt != 0 && cols % 8 == 0 && ab.strides[kMaxRank - 1] == 1 && bb.strides[kMaxRank - 1] == 1 &&
      on16(a) && on16(b) && on16(y)) {
    int64_t groups = total / 8;
    void* args[] = {&a, &x, &b, &z, &y, &groups, &op, &dt};
    return launch(binary16_, grid_for(groups, 256, sms_), 256, args);
  }
  void* args[] = {&a, &x, &b, &z, &y, &total, &op, &dt};
  return launch(binary_, grid_for(total, 256, sms_), 256, args);
}

Status LibraryKernels::pool2d(const void* x, void* y, const PoolParams& p, PoolMode mode,
                              bool channels_last, bool include_pad, DType dtype, int64_t* indices,
                              bool column_major) {
  PoolParams q = p;
  int dt = dtype_code(dtype), m = mode == PoolMode::kMax ? 0 : 1, last = channels_last ? 1 : 0,
      inc = include_pad ? 1 : 0, col = column_major ? 1 : 0;
  void* args[] = {&x, &y, &q, &m, &last, &inc, &dt, &indices, &col};
  return launch(pool_, grid_for(p.planes * p.OH * p.OW, 256, sms_), 256, args);
}

Status LibraryKernels::epilogue(void* y, const void* bias, const void* residual,
                                const BroadcastDims* res, int64_t rows, int64_t cols,
                                const Activation& act, DType dtype, bool residual_dense) {
  int dt = dtype_code(dtype), code = act.code();
  float p0 = act.alpha, p1 = act.beta;
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  // 16-bit storage, 8 columns per thread (fe_epilogue's per-element broadcast index and 2-byte
  // accesses ran several times below the copy bandwidth, e.g. ConvNeXt's exact-GELU MLPs).
  if (dt != 0 && cols % 8 == 0 && cols <= INT32_MAX && (!residual || residual_dense) &&
      aligned(y) && aligned(residual)) {
    int64_t groups = rows * cols / 8;
    int ch = static_cast<int>(cols), kind = act_kind(code), res_after = 1;
    void* args[] = {&y, &bias, &residual, &groups, &ch, &code, &kind, &p0, &p1, &res_after, &dt};
    return launch(bias_act8_, grid_for(groups, 256, sms_), 256, args);
  }
  if (dt == 0 && cols % 4 == 0 && cols / 4 <= INT32_MAX && (!residual || residual_dense) &&
      aligned(y) && aligned(bias) && aligned(residual) && !env_off("FERRITE_CUDA_EPILOGUE_F32X4")) {
    int64_t groups = rows * cols / 4;
    int cols4 = static_cast<int>(cols / 4);
    void* args[] = {&y, &bias, &residual, &groups, &cols4, &code, &p0, &p1};
    return launch(epilogue4_, grid_for(groups, 256, sms_), 256, args);
  }
  BroadcastDims rb{};
  if (res) rb = *res;
  void* args[] = {&y, &bias, &residual, &rb, &rows, &cols, &code, &p0, &p1, &dt};
  return launch(epilogue_, grid_for(rows * cols, 256, sms_), 256, args);
}

Status LibraryKernels::pad(const void* x, void* y, const PadParams& p) {
  PadParams q = p;
  int64_t total = 1;
  for (int d = 0; d < p.rank; ++d) total *= p.out_dims[d];
  if (total == 0) return Status::ok();
  void* args[] = {&x, &y, &q, &total};
  return launch(pad_, grid_for(total, 256, sms_), 256, args);
}

Status LibraryKernels::columns16(CUfunction f, const void* whole,
                                 const std::vector<const void*>& parts,
                                 const std::vector<int64_t>& widths, int64_t rows) {
  int64_t whole_width = 0;
  for (int64_t w : widths) whole_width += w;
  int64_t col = 0;
  for (size_t first = 0; first < parts.size(); first += kConcatMax) {
    ConcatParams p{};
    p.rows = rows;
    p.out_width = whole_width;
    p.col0 = col;
    p.n = static_cast<int>(std::min<size_t>(kConcatMax, parts.size() - first));
    for (int k = 0; k < p.n; ++k) {
      p.src[k] = parts[first + k];
      p.start[k + 1] = p.start[k] + widths[first + k];
    }
    col += p.start[p.n];
    if (rows * p.start[p.n] == 0) continue;
    void* args[] = {&p, &whole};
    FERRITE_RETURN_IF_ERROR(launch(f, grid_for(rows * p.start[p.n], 256, sms_), 256, args));
  }
  return Status::ok();
}

Status LibraryKernels::split16(const void* x, const std::vector<void*>& dst,
                               const std::vector<int64_t>& widths, int64_t rows) {
  return columns16(split_, x, std::vector<const void*>(dst.begin(), dst.end()), widths, rows);
}

Status LibraryKernels::concat16(const std::vector<const void*>& src,
                                const std::vector<int64_t>& widths, int64_t rows, void* y) {
  return columns16(concat_, y, src, widths, rows);
}

Status LibraryKernels::broadcast_fill(void* y, const void* c, const BroadcastDims& bd,
                                      int64_t total, float beta, DType dtype) {
  BroadcastDims b = bd;
  int dt = dtype_code(dtype);
  void* args[] = {&y, &c, &b, &total, &beta, &dt};
  return launch(fill_, grid_for(total, 256, sms_), 256, args);
}

Status LibraryKernels::attention_softmax(float* scores, const float* mask, const SoftmaxParams& p) {
  SoftmaxParams q = p;
  int64_t rows = p.rows_per_batch * p.S;
  int64_t block = std::min<int64_t>(256, std::max<int64_t>(32, (p.T + 31) / 32 * 32));
  void* args[] = {&scores, &mask, &q};
  return launch(softmax_, std::max<int64_t>(1, std::min<int64_t>(rows, int64_t{sms_} * 32)), block,
                args);
}

}  // namespace ferrite::cuda
