// GXU's fused attention (SDK 1.1 library op ferrite.Attention), f32 in and out:
// Y = softmax(Q @ K^T * scale + mask [+ causal mask]) @ V per row of scores (with the
// nan_to_zero and masked_rows_zero guards), computed in double
// in the order ferrite's reference kernel uses (so that the two agree to the last bits of f32),
// one (batch, query row) per work item on the compute units.
#include <cmath>
#include <limits>

#include "gxu_library.h"

namespace gxu::lib {

namespace {

std::vector<int64_t> batch_of(const std::vector<int64_t>& d) {
  return std::vector<int64_t>(d.begin(), d.end() - 2);
}

// Broadcast offsets of whole matrices: Broadcast works on rows of all dims but the last.
bool matrix_offsets(std::vector<int64_t> dims, std::vector<int64_t> batch, Broadcast* b) {
  dims.push_back(1);
  batch.push_back(1);
  return b->init(dims, batch);
}

}  // namespace

bool accepts_attention(const Op& op) {
  if (op.in.size() < 3 || !op.has(0) || !op.has(1) || !op.has(2) || op.out.size() != 1)
    return false;
  // Operands stored heads-after-sequence (`transposed`, set by cuda's fold-attention-layout):
  // not this library's layout; the host runs them.
  if (const fe_attr* t = op.attr("transposed"); t && t->kind == FE_ATTR_INTS)
    for (int32_t i = 0; i < t->count; ++i)
      if (t->ints[i] != 0) return false;
  for (const auto* list : {&op.in, &op.out})
    for (const Operand& o : *list)
      if (o.present && o.dtype != FE_DTYPE_F32) return false;
  return op.in[0].dims.size() >= 2 && op.in[1].dims.size() >= 2 && op.in[2].dims.size() >= 2;
}

fe_status run_attention(const Op& op) {
  const Operand &q = op.in[0], &k = op.in[1], &v = op.in[2], &y = op.out[0];
  const int64_t S = q.dims[q.dims.size() - 2], D = q.dims.back();
  const int64_t L = k.dims[k.dims.size() - 2], Dv = v.dims.back();
  if (k.dims.back() != D || v.dims[v.dims.size() - 2] != L)
    return fail(kInvalidValue,
                "gxuAttention: Q, K and V do not fit [..., S, D], [..., T, D], "
                "[..., T, Dv]");
  if (y.dims.size() < 2) return fail(kInvalidValue, "gxuAttention: output rank");
  const std::vector<int64_t> batch = batch_of(y.dims);
  Broadcast qb, kb, vb, mb;
  if (!matrix_offsets(batch_of(q.dims), batch, &qb) ||
      !matrix_offsets(batch_of(k.dims), batch, &kb) ||
      !matrix_offsets(batch_of(v.dims), batch, &vb))
    return fail(kNotImplemented, "gxuAttention: batch dims do not broadcast");
  std::vector<int64_t> scores = batch;
  scores.push_back(S);
  scores.push_back(L);
  const bool has_mask = op.has(3);
  if (has_mask && !mb.init(op.in[3].dims, scores))
    return fail(kNotImplemented, "gxuAttention: the mask does not broadcast to the scores");
  int64_t batches = 1;
  for (int64_t d : batch) batches *= d;
  if (batches * S * Dv != y.numel()) return fail(kInvalidValue, "gxuAttention: output size");
  const fe_attr* sa = op.attr("scale");
  const double scale = sa && sa->kind == FE_ATTR_FLOAT
                           ? static_cast<double>(static_cast<float>(sa->f))
                           : 1.0 / std::sqrt(static_cast<double>(D));
  const bool causal = op.attr_int("causal", 0) != 0;
  const bool nan_to_zero = op.attr_int("nan_to_zero", 0) != 0;
  const bool masked_rows_zero = op.attr_int("masked_rows_zero", 0) != 0;
  const auto* pq = static_cast<const float*>(q.data);
  const auto* pk = static_cast<const float*>(k.data);
  const auto* pv = static_cast<const float*>(v.data);
  const auto* pm = has_mask ? static_cast<const float*>(op.in[3].data) : nullptr;
  auto* py = static_cast<float*>(y.data);
  const double kNegInf = -std::numeric_limits<double>::infinity();
  run_on_units(batches * S, [&](int64_t r) {
    const int64_t bi = r / S, s = r % S;
    const float* qr = pq + qb.base(bi) * S * D + s * D;
    const float* km = pk + kb.base(bi) * L * D;
    const float* vm = pv + vb.base(bi) * L * Dv;
    std::vector<double> p(static_cast<size_t>(L)), acc(static_cast<size_t>(Dv), 0.0);
    const int64_t mrow = has_mask ? mb.base(r) : 0, mcol = has_mask ? mb.last_stride() : 0;
    double mx = kNegInf;
    bool all_neg_inf = true;
    for (int64_t t = 0; t < L; ++t) {
      double dot = 0;
      for (int64_t d = 0; d < D; ++d)
        dot += static_cast<double>(qr[d]) * static_cast<double>(km[t * D + d]);
      double x = dot * scale;
      if (pm) x += static_cast<double>(pm[mrow + t * mcol]);
      if (causal && t > s) x = kNegInf;
      p[t] = x;
      if (x > mx) mx = x;
      all_neg_inf &= x == kNegInf;
    }
    double sum = 0;  // a row whose max is -inf (or that holds a NaN) gives NaN, as Softmax does
    for (int64_t t = 0; t < L; ++t) sum += (p[t] = std::exp(p[t] - mx));
    // PyTorch's _safe_softmax (masked_rows_zero): a row of -inf scores only gives 0.
    for (int64_t t = 0; t < L && !(masked_rows_zero && all_neg_inf); ++t) {
      const double w = p[t] / sum;
      if (nan_to_zero && std::isnan(w)) continue;
      for (int64_t d = 0; d < Dv; ++d) acc[d] += w * static_cast<double>(vm[t * Dv + d]);
    }
    float* yr = py + r * Dv;
    for (int64_t d = 0; d < Dv; ++d) yr[d] = static_cast<float>(acc[d]);
  });
  return kSuccess;
}

}  // namespace gxu::lib
