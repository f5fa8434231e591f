// ferrite.Attention library kernel for the cpu device (f32): per (batch, head) and block of query
// rows, scores = Q K^T * scale with oneDNN's sgemm, + mask, causal mask, softmax row by row, then
// P V with sgemm. Work units run on the device's thread pool with single-threaded GEMMs.
// Softmax keeps the reference kernel's semantics: a row whose maximum is not finite or that holds
// a NaN (fully masked, NaN mask) goes through the exact formula and yields NaN, or 0 with
// nan_to_zero, or 0 under masked_rows_zero when every score is -inf; every other row takes the
// vectorised path, where no NaN can arise.
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/kernels/onednn_common.h"
#include "ops/attention_layout.h"
#include "ops/helpers.h"

namespace ferrite {

namespace {

using namespace onednn;

// exp(z) for z <= 0 (including -inf, which gives 0), within a few ulp: Cephes-style range
// reduction and polynomial, written as plain arithmetic so that loops over it vectorise.
inline float exp_nonpositive(float z) {
  const float zc = z < -87.0f ? -87.0f : z;
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (zc * 1.44269504088896341f + magic) - magic;
  const float r = (zc - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return z < -87.0f ? 0.0f : p * scale;
}

// One row: x[t] = x[t] + mask[t * mask_col] (mask may be null), x[t] = -inf for t >= causal_from,
// then x = softmax(x). Cloned for wide vector units; the library runs on any x86-64.
FERRITE_TARGET_CLONES void softmax_row(float* x, int64_t L, const float* mask, int64_t mask_col,
                                       int64_t causal_from, bool nan_to_zero,
                                       bool masked_rows_zero) {
  if (mask) {
    if (mask_col == 1) {
      for (int64_t t = 0; t < L; ++t) x[t] += mask[t];
    } else {
      const float m = mask[0];
      for (int64_t t = 0; t < L; ++t) x[t] += m;
    }
  }
  const float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t t = causal_from; t < L; ++t) x[t] = kNegInf;
  float mx = kNegInf;
  bool nan = false;
  for (int64_t t = 0; t < L; ++t) {
    mx = x[t] > mx ? x[t] : mx;
    nan |= x[t] != x[t];
  }
  if (masked_rows_zero && !nan && mx == kNegInf) {  // PyTorch's _safe_softmax
    for (int64_t t = 0; t < L; ++t) x[t] = 0.0f;
    return;
  }
  if (nan || !std::isfinite(mx)) {
    // The reference's arithmetic: exp(x - max) / sum, where NaNs appear and spread.
    float sum = 0;
    for (int64_t t = 0; t < L; ++t) sum += (x[t] = std::exp(x[t] - mx));
    for (int64_t t = 0; t < L; ++t) {
      float w = x[t] / sum;
      x[t] = nan_to_zero && std::isnan(w) ? 0.0f : w;
    }
    return;
  }
  float sum = 0;
  for (int64_t t = 0; t < L; ++t) {
    x[t] = exp_nonpositive(x[t] - mx);
    sum += x[t];
  }
  const float inv = 1.0f / sum;
  for (int64_t t = 0; t < L; ++t) x[t] *= inv;
}

bool attention_accepts(const Node& node) {
  // Operands stored heads-after-sequence (fold-attention-layout, which cpu's pipeline does not
  // run) take the reference kernel.
  auto layout = attention_layout(node);
  if (!layout || layout->any()) return false;
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (node.input(i) && !input_is_f32(node, i)) return false;
  return true;
}

Status attention_run(KernelContext& ctx, ThreadPool& pool) {
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  const Tensor* mask = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  if (q.dtype() != DType::kF32 || k.dtype() != DType::kF32 || v.dtype() != DType::kF32 ||
      (mask && mask->dtype() != DType::kF32) || q.rank() < 2 || k.rank() < 2 || v.rank() < 2)
    return run_reference(ctx);
  const int64_t S = q.dim(q.rank() - 2), D = q.dim(q.rank() - 1);
  const int64_t L = k.dim(k.rank() - 2), Dv = v.dim(v.rank() - 1);
  if (k.dim(k.rank() - 1) != D || v.dim(v.rank() - 2) != L) return run_reference(ctx);
  std::vector<int64_t> qb(q.dims().begin(), q.dims().end() - 2);
  std::vector<int64_t> kb(k.dims().begin(), k.dims().end() - 2);
  std::vector<int64_t> vb(v.dims().begin(), v.dims().end() - 2);
  auto b1 = broadcast_dims(ctx, qb, kb);
  if (!b1) return run_reference(ctx);
  auto b2 = broadcast_dims(ctx, *b1, vb);
  if (!b2) return run_reference(ctx);
  const std::vector<int64_t>& batch = *b2;
  std::vector<int64_t> scores_dims = batch, out = batch;
  scores_dims.insert(scores_dims.end(), {S, L});
  out.insert(out.end(), {S, Dv});
  std::vector<int64_t> mask_strides;
  if (mask) {
    auto bc = broadcast_dims(ctx, mask->dims(), scores_dims);
    if (!bc || *bc != scores_dims) return run_reference(ctx);
    mask_strides = broadcast_strides(mask->dims(), scores_dims);
  }
  if (S == 0 || D == 0 || L == 0 || Dv == 0) return run_reference(ctx);
  for (int64_t d : batch)
    if (d == 0) return run_reference(ctx);
  const float scale = ctx.node().has_attr("scale")
                          ? ctx.node().attr_float("scale")
                          : static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  const bool causal = ctx.node().attr_int("causal") != 0;
  const bool nan_to_zero = ctx.node().attr_int("nan_to_zero") != 0;
  const bool masked_rows_zero = ctx.node().attr_int("masked_rows_zero") != 0;
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output_uninitialized(0, DType::kF32, out));

  // Element offsets of each batch item's matrices (and mask plane).
  int64_t nbatch = 1;
  for (int64_t d : batch) nbatch *= d;
  std::vector<int64_t> qoff(nbatch), koff(nbatch), voff(nbatch), moff(nbatch, 0);
  {
    std::vector<int64_t> mbatch(batch.size(), 0);
    if (mask) std::copy(mask_strides.begin(), mask_strides.end() - 2, mbatch.begin());
    std::array<std::vector<int64_t>, 4> strides{broadcast_strides(qb, batch),
                                                broadcast_strides(kb, batch),
                                                broadcast_strides(vb, batch), mbatch};
    auto record = [&](int64_t i, const std::array<int64_t, 4>& off) {
      qoff[i] = off[0] * S * D;
      koff[i] = off[1] * L * D;
      voff[i] = off[2] * L * Dv;
      moff[i] = off[3];
    };
    if (batch.empty())
      record(0, {0, 0, 0, 0});
    else
      for_each_index<4>(batch, strides, record);
  }
  const int64_t mask_row = mask ? mask_strides[batch.size()] : 0;
  const int64_t mask_col = mask ? mask_strides[batch.size() + 1] : 0;

  // Work units: (batch item, block of query rows), enough of them to keep every thread busy.
  const int64_t threads = pool.size();
  const int64_t want_blocks = std::max<int64_t>(1, (4 * threads + nbatch - 1) / nbatch);
  const int64_t blocks = std::min<int64_t>(want_blocks, std::max<int64_t>(1, S / 16));
  const int64_t rows_per_block = (S + blocks - 1) / blocks;
  const int64_t units = nbatch * blocks;

  const float* pq = q.data<float>();
  const float* pk = k.data<float>();
  const float* pv = v.data<float>();
  const float* pm = mask ? mask->data<float>() : nullptr;
  float* py = y->data<float>();
  Status failure;
  std::mutex failure_mu;
  pool.parallel_for(units, 1, [&](int64_t u0, int64_t u1) {
    ThreadScope single(1);  // the pool provides the parallelism; GEMMs stay on this thread
    std::vector<float> p(static_cast<size_t>(rows_per_block * L));
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t i = u / blocks;
      const int64_t s0 = (u % blocks) * rows_per_block, s1 = std::min(S, s0 + rows_per_block);
      if (s0 >= s1) continue;
      const int64_t rows = s1 - s0;
      dnnl_status_t st = dnnl_sgemm('N', 'T', rows, L, D, scale, pq + qoff[i] + s0 * D, D,
                                    pk + koff[i], D, 0.0f, p.data(), L);
      for (int64_t r = 0; r < rows && st == dnnl_success; ++r) {
        const int64_t s = s0 + r;
        softmax_row(p.data() + r * L, L, pm ? pm + moff[i] + s * mask_row : nullptr, mask_col,
                    causal ? std::min(L, s + 1) : L, nan_to_zero, masked_rows_zero);
      }
      if (st == dnnl_success)
        st = dnnl_sgemm('N', 'N', rows, Dv, L, 1.0f, p.data(), L, pv + voff[i], Dv, 0.0f,
                        py + (i * S + s0) * Dv, Dv);
      if (st != dnnl_success) {
        std::lock_guard<std::mutex> lock(failure_mu);
        failure = ctx.error("oneDNN sgemm failed with status ", static_cast<int>(st));
      }
    }
  });
  return failure;
}

}  // namespace

void register_cpu_attention_kernels(CpuKernelRegistry& r) {
  r.add("ferrite", "Attention", {attention_accepts, attention_run});
}

}  // namespace ferrite
