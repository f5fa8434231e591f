// GXU's vendor GEMM, convolution and pooling (SDK 1.1 library ops), f32: MatMul, Gemm,
// ferrite.FusedMatMul (bias, activation and residual in the store), Conv and ferrite.FusedConv
// (2-D, groups, dilations, residual and activation), MaxPool (2-D, without Indices). Each kernel
// spreads independent output rows or planes over the compute units.
#include <algorithm>
#include <cmath>
#include <limits>

#include "gxu_library.h"

namespace gxu::lib {

namespace {

bool all_f32(const Op& op) {
  for (const auto* list : {&op.in, &op.out})
    for (const Operand& o : *list)
      if (o.present && o.dtype != FE_DTYPE_F32) return false;
  return true;
}

// C[i, :] = sum_k A[i, k] B[k, :] with A[i, k] = a[i * ars + k * acs], B[k, j] = b[k * brs + j *
// bcs].
void gemm_row(const float* a, int64_t ars, int64_t acs, const float* b, int64_t brs, int64_t bcs,
              int64_t i, int64_t N, int64_t K, float* c) {
  std::fill(c, c + N, 0.f);
  const float* ai = a + i * ars;
  if (bcs == 1) {  // rows of B contiguous: axpy over N
    for (int64_t k = 0; k < K; ++k) {
      const float v = ai[k * acs];
      const float* bk = b + k * brs;
      for (int64_t j = 0; j < N; ++j) c[j] += v * bk[j];
    }
    return;
  }
  for (int64_t j = 0; j < N; ++j) {  // B transposed (columns contiguous): dot products over K
    const float* bj = b + j * bcs;
    float s = 0;
    for (int64_t k = 0; k < K; ++k) s += ai[k * acs] * bj[k * brs];
    c[j] = s;
  }
}

struct Epilogue {
  float alpha = 1, beta = 1;
  const float* bias = nullptr;  // Gemm's C (times beta) or FusedMatMul's bias
  Broadcast bias_b;
  const float* residual = nullptr;
  Broadcast residual_b;
  Activation act;
  void apply(int64_t r, float* c, int64_t N) const {
    const int64_t bo = bias ? bias_b.base(r) : 0, bs = bias ? bias_b.last_stride() : 0;
    const int64_t ro = residual ? residual_b.base(r) : 0;
    const int64_t rs = residual ? residual_b.last_stride() : 0;
    for (int64_t j = 0; j < N; ++j) {
      float v = alpha * c[j];
      if (bias) v += beta * bias[bo + j * bs];
      v = act.apply(v);  // the residual joins after the activation (ferrite.FusedMatMul)
      if (residual) v += residual[ro + j * rs];
      c[j] = v;
    }
  }
};

std::vector<int64_t> broadcast_dims(std::vector<int64_t> a, std::vector<int64_t> b) {
  if (a.size() < b.size()) a.insert(a.begin(), b.size() - a.size(), 1);
  if (b.size() < a.size()) b.insert(b.begin(), a.size() - b.size(), 1);
  for (size_t i = 0; i < a.size(); ++i) a[i] = a[i] == 1 ? b[i] : a[i];
  return a;
}

}  // namespace

bool accepts_matmul(const Op& op) {
  if (!all_f32(op) || op.out.size() != 1 || !op.out[0].present || !op.has(0) || !op.has(1))
    return false;
  if (op.type == "Gemm") return op.in[0].dims.size() == 2 && op.in[1].dims.size() == 2;
  if (op.type == "MatMul") return op.in.size() == 2;
  Activation act;  // FusedMatMul
  return parse_activation(op, &act) && op.in[1].dims.size() >= 2;
}

fe_status run_matmul(const Op& op) {
  std::vector<int64_t> ad = op.in[0].dims, bd = op.in[1].dims;
  const bool gemm = op.type == "Gemm", fused = op.type == "ferrite::FusedMatMul";
  const bool ta = gemm && op.attr_int("transA", 0) != 0;
  const bool tb = (gemm || fused) && op.attr_int("transB", 0) != 0;
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  const size_t ar = ad.size(), br = bd.size();
  const int64_t M = ta ? ad[ar - 1] : ad[ar - 2], K = ta ? ad[ar - 2] : ad[ar - 1];
  const int64_t N = tb ? bd[br - 2] : bd[br - 1];
  if ((tb ? bd[br - 1] : bd[br - 2]) != K) return fail(kInvalidValue, "gxuGemm: inner dims differ");
  std::vector<int64_t> abatch(ad.begin(), ad.end() - 2), bbatch(bd.begin(), bd.end() - 2);
  std::vector<int64_t> batch = broadcast_dims(abatch, bbatch);
  std::vector<int64_t> full = batch;  // the output as [batch..., M, N]
  full.push_back(M);
  full.push_back(N);
  Broadcast ab, bb;
  if (!ab.init(abatch, batch) || !bb.init(bbatch, batch))
    return fail(kNotImplemented, "gxuGemm: batch dims do not broadcast");
  Epilogue ep;
  if (gemm) {
    ep.alpha = op.attr_float("alpha", 1.f);
    ep.beta = op.attr_float("beta", 1.f);
  }
  if (fused && !parse_activation(op, &ep.act)) return fail(kNotImplemented, "gxuGemm: activation");
  // Epilogue operands are matched against the output as ferrite infers it (dropped 1-D dims
  // included), which has the same rows and columns as `full`.
  const std::vector<int64_t>& out = op.out[0].dims;
  if ((gemm || fused) && op.has(2)) {
    ep.bias = static_cast<const float*>(op.in[2].data);
    if (!ep.bias_b.init(op.in[2].dims, out)) return fail(kNotImplemented, "gxuGemm: bias shape");
  }
  if (fused && op.has(3)) {
    ep.residual = static_cast<const float*>(op.in[3].data);
    if (!ep.residual_b.init(op.in[3].dims, out))
      return fail(kNotImplemented, "gxuGemm: residual shape");
  }
  int64_t batches = 1;
  for (int64_t d : batch) batches *= d;
  if (batches * M * N != op.out[0].numel())
    return fail(kInvalidValue, "gxuGemm: output size does not match the operands");
  // Batch offsets: Broadcast::base works on rows of all dims but the last, so give it a trailing 1.
  Broadcast abase, bbase;
  std::vector<int64_t> ab1 = abatch, bb1 = bbatch, batch1 = batch;
  ab1.push_back(1), bb1.push_back(1), batch1.push_back(1);
  abase.init(ab1, batch1);
  bbase.init(bb1, batch1);
  const auto* a = static_cast<const float*>(op.in[0].data);
  const auto* b = static_cast<const float*>(op.in[1].data);
  auto* c = static_cast<float*>(op.out[0].data);
  const int64_t ars = ta ? 1 : K, acs = ta ? M : 1, brs = tb ? 1 : N, bcs = tb ? K : 1;
  if (M * N == 0) return kSuccess;
  const bool epilogue = ep.bias || ep.residual || ep.act.kind != Activation::kNone || gemm;
  run_on_units(batches * M, [&](int64_t r) {
    const int64_t bi = r / M, i = r % M;
    const float* ap = a + abase.base(bi) * M * K;
    const float* bp = b + bbase.base(bi) * K * N;
    float* row = c + r * N;
    gemm_row(ap, ars, acs, bp, brs, bcs, i, N, K, row);
    if (epilogue) ep.apply(r, row, N);
  });
  return kSuccess;
}

// --- convolution and pooling (2-D, NCHW) ------------------------------------------------------

namespace {

bool known_auto_pad(const Op& op) {
  const std::string p = op.attr_string("auto_pad", "NOTSET");
  return p == "NOTSET" || p == "VALID" || p == "SAME_UPPER" || p == "SAME_LOWER";
}

struct Window {
  int64_t kh, kw, sh, sw, dh, dw, pt, pl;
};

// The window of a conv or pool from its attributes; explicit pads, or those auto_pad implies for
// the output size ferrite inferred.
bool window(const Op& op, int64_t kh, int64_t kw, int64_t H, int64_t W, int64_t OH, int64_t OW,
            Window* w) {
  std::vector<int64_t> s = op.attr_ints("strides"), d = op.attr_ints("dilations");
  std::vector<int64_t> p = op.attr_ints("pads");
  if (s.empty()) s = {1, 1};
  if (d.empty()) d = {1, 1};
  if (p.empty()) p = {0, 0, 0, 0};
  if (s.size() != 2 || d.size() != 2 || p.size() != 4) return false;
  *w = Window{kh, kw, s[0], s[1], d[0], d[1], p[0], p[1]};
  const std::string ap = op.attr_string("auto_pad", "NOTSET");
  if (ap == "VALID") w->pt = w->pl = 0;
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    auto begin = [&](int64_t in, int64_t out, int64_t k, int64_t st, int64_t dl) {
      int64_t total = std::max<int64_t>(0, (out - 1) * st + (k - 1) * dl + 1 - in);
      return ap == "SAME_UPPER" ? total / 2 : total - total / 2;
    };
    w->pt = begin(H, OH, kh, w->sh, w->dh);
    w->pl = begin(W, OW, kw, w->sw, w->dw);
  }
  return w->sh > 0 && w->sw > 0 && w->dh > 0 && w->dw > 0;
}

// Output columns [lo, hi) whose input column ow * sw - pl + kj * dw lies in [0, W).
void column_range(const Window& w, int64_t kj, int64_t W, int64_t OW, int64_t* lo, int64_t* hi) {
  const int64_t off = kj * w.dw - w.pl;  // input column of output column 0
  int64_t l = off >= 0 ? 0 : (-off + w.sw - 1) / w.sw;
  int64_t h = W - 1 - off < 0 ? 0 : (W - 1 - off) / w.sw + 1;
  *lo = std::min(l, OW);
  *hi = std::max(*lo, std::min(h, OW));
}

}  // namespace

bool accepts_conv(const Op& op) {
  if (!all_f32(op) || !op.has(0) || !op.has(1) || op.out.size() != 1) return false;
  if (op.in[0].dims.size() != 4 || op.in[1].dims.size() != 4 || !known_auto_pad(op)) return false;
  if (op.has(2) && op.in[2].dims.size() != 1) return false;
  // NCHW only: a channels-last FusedConv (a pass for other devices made it) runs on the host.
  if (op.attr_int("channels_last", 0) != 0) return false;
  Activation act;
  return op.type != "ferrite::FusedConv" || parse_activation(op, &act);
}

fe_status run_conv(const Op& op) {
  const Operand &x = op.in[0], &wt = op.in[1], &y = op.out[0];
  const int64_t N = x.dims[0], C = x.dims[1], H = x.dims[2], W = x.dims[3];
  const int64_t M = wt.dims[0], Cg = wt.dims[1], kh = wt.dims[2], kw = wt.dims[3];
  const int64_t G = op.attr_int("group", 1);
  if (y.dims.size() != 4 || y.dims[0] != N || y.dims[1] != M || G <= 0 || C != Cg * G || M % G != 0)
    return fail(kInvalidValue, "gxuConv: operand shapes do not match");
  const int64_t OH = y.dims[2], OW = y.dims[3];
  Window w;
  if (!window(op, kh, kw, H, W, OH, OW, &w)) return fail(kNotImplemented, "gxuConv: attributes");
  const bool fused = op.type == "ferrite::FusedConv";
  Activation act;
  if (fused && !parse_activation(op, &act)) return fail(kNotImplemented, "gxuConv: activation");
  const float* residual = fused && op.has(3) ? static_cast<const float*>(op.in[3].data) : nullptr;
  if (residual && op.in[3].dims != y.dims)
    return fail(kNotImplemented, "gxuConv: a residual of another shape than the output");
  const auto* px = static_cast<const float*>(x.data);
  const auto* pw = static_cast<const float*>(wt.data);
  const float* bias = op.has(2) ? static_cast<const float*>(op.in[2].data) : nullptr;
  if (bias && op.in[2].dims[0] != M) return fail(kInvalidValue, "gxuConv: bias size");
  auto* py = static_cast<float*>(y.data);
  const int64_t plane = OH * OW, Mg = M / G;
  run_on_units(N * M, [&](int64_t item) {
    const int64_t n = item / M, m = item % M, g = m / Mg;
    float* o = py + item * plane;
    std::fill(o, o + plane, bias ? bias[m] : 0.f);
    for (int64_t c = 0; c < Cg; ++c) {
      const float* xp = px + (n * C + g * Cg + c) * H * W;
      const float* wp = pw + (m * Cg + c) * kh * kw;
      for (int64_t ki = 0; ki < kh; ++ki)
        for (int64_t kj = 0; kj < kw; ++kj) {
          const float v = wp[ki * kw + kj];
          int64_t lo, hi;
          column_range(w, kj, W, OW, &lo, &hi);
          const int64_t col0 = kj * w.dw - w.pl;
          for (int64_t oh = 0; oh < OH; ++oh) {
            const int64_t ih = oh * w.sh - w.pt + ki * w.dh;
            if (ih < 0 || ih >= H) continue;
            const float* xr = xp + ih * W + col0;
            float* orow = o + oh * OW;
            if (w.sw == 1)
              for (int64_t ow = lo; ow < hi; ++ow) orow[ow] += v * xr[ow];
            else
              for (int64_t ow = lo; ow < hi; ++ow) orow[ow] += v * xr[ow * w.sw];
          }
        }
    }
    if (residual || act.kind != Activation::kNone) {
      const float* r = residual ? residual + item * plane : nullptr;
      for (int64_t i = 0; i < plane; ++i) o[i] = act.apply(r ? o[i] + r[i] : o[i]);
    }
  });
  return kSuccess;
}

bool accepts_maxpool(const Op& op) {
  if (!all_f32(op) || !op.has(0) || op.in[0].dims.size() != 4 || !known_auto_pad(op)) return false;
  if (op.out.empty() || !op.out[0].present) return false;
  for (size_t i = 1; i < op.out.size(); ++i)
    if (op.out[i].present) return false;  // Indices: the host computes them
  return op.attr_ints("kernel_shape").size() == 2;
}

fe_status run_maxpool(const Op& op) {
  const Operand &x = op.in[0], &y = op.out[0];
  const int64_t H = x.dims[2], W = x.dims[3];
  if (y.dims.size() != 4 || y.dims[0] != x.dims[0] || y.dims[1] != x.dims[1])
    return fail(kInvalidValue, "gxuMaxPool: operand shapes do not match");
  const int64_t OH = y.dims[2], OW = y.dims[3];
  const std::vector<int64_t> k = op.attr_ints("kernel_shape");
  Window w;
  if (!window(op, k[0], k[1], H, W, OH, OW, &w))
    return fail(kNotImplemented, "gxuMaxPool: attributes");
  const auto* px = static_cast<const float*>(x.data);
  auto* py = static_cast<float*>(y.data);
  run_on_units(x.dims[0] * x.dims[1], [&](int64_t p) {
    const float* xp = px + p * H * W;
    float* o = py + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        // The first tap inside the input, then strictly greater ones: ferrite's reference order
        // (a NaN first stays, a later one is skipped).
        float best = std::numeric_limits<float>::lowest();
        bool any = false;
        for (int64_t ki = 0; ki < w.kh; ++ki) {
          const int64_t ih = oh * w.sh - w.pt + ki * w.dh;
          if (ih < 0 || ih >= H) continue;
          for (int64_t kj = 0; kj < w.kw; ++kj) {
            const int64_t iw = ow * w.sw - w.pl + kj * w.dw;
            if (iw < 0 || iw >= W) continue;
            const float v = xp[ih * W + iw];
            if (!any || v > best) best = v;
            any = true;
          }
        }
        o[oh * OW + ow] = best;
      }
  });
  return kSuccess;
}

}  // namespace gxu::lib
