// ferrite.Attention on the GPU: the fused kernels of cuda_attention.h, cuDNN's fused SDPA where
// it ran faster on the problem, and the f32 3-step path (GEMM, softmax kernel, GEMM).
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "backends/cuda/cuda_native_ops.h"
#include "ops/attention_layout.h"

namespace ferrite::cuda {

std::optional<CudnnSdpaProblem> cudnn_sdpa_problem(const FlashProblem& p, DType dtype) {
  if (dtype != DType::kBF16 && dtype != DType::kF16) return std::nullopt;
  // cuDNN's operation has no additive mask or NaN guard; a causal limit needs its mask subgraph.
  if (p.has_mask || p.causal || p.nan_to_zero || p.S == 0 || p.T == 0 || p.batch.size() > 2)
    return std::nullopt;
  CudnnSdpaProblem q;
  q.dtype = dtype;
  q.s = p.S, q.t = p.T, q.d = p.D, q.dv = p.Dv, q.scale = p.scale;
  // Batch dims [b, h] right-aligned; a missing one has size 1.
  int64_t dims[2] = {1, 1}, qb[2] = {0, 0}, kb[2] = {0, 0}, vb[2] = {0, 0}, ob[2] = {0, 0};
  const size_t off = 2 - p.batch.size();
  int64_t o_run = p.S * p.Dv;  // a contiguous output's batch strides, innermost first
  for (size_t i = p.batch.size(); i-- > 0;) {
    dims[off + i] = p.batch[i];
    qb[off + i] = p.q_bs[i], kb[off + i] = p.k_bs[i], vb[off + i] = p.v_bs[i];
    ob[off + i] = p.o_bs.empty() ? o_run : p.o_bs[i];
    o_run *= p.batch[i];
  }
  q.b = dims[0], q.h = q.hk = dims[1];
  auto fill = [&](int64_t* st, const int64_t* bs, int64_t rs, int64_t rows, int64_t width) {
    st[2] = rs ? rs : width, st[3] = 1;
    // A size-1 dim gets the stride a contiguous one would have (its stride is never applied).
    st[1] = dims[1] == 1 ? rows * st[2] : bs[1];
    st[0] = dims[0] == 1 ? dims[1] * st[1] : bs[0];
    for (int i = 0; i < 2; ++i)
      if (dims[i] > 1 && st[i] == 0) return false;  // broadcast over a batch dim
    return true;
  };
  if (!fill(q.q_st, qb, p.q_rs, p.S, p.D) || !fill(q.k_st, kb, p.k_rs, p.T, p.D) ||
      !fill(q.v_st, vb, p.v_rs, p.T, p.Dv) || !fill(q.o_st, ob, p.o_rs, p.S, p.Dv))
    return std::nullopt;
  return q;
}

namespace {

// bf16 / f16 attention without mask or causal limit: cuDNN's fused SDPA or ferrite's tensor-core
// kernel, whichever ran faster on this problem (H200, bf16, ViT-B/16 at batch 32: cuDNN's wgmma
// kernel 24 us a layer against fe_flash_pipe_d64's 47). Timed once per problem on its first call
// outside a CUDA graph capture, like the depthwise convolutions (cuda_conv_ops.cpp); until then,
// and whenever cuDNN declines, the own kernel runs. FERRITE_CUDA_SDPA=own or =cudnn forces one.
// True when cuDNN wrote `y`.
Expected<bool> attention_on_cudnn(NativeIO& io, CudaBackend& be, const FlashProblem& p, DType dt,
                                  void* y) {
  const char* env = std::getenv("FERRITE_CUDA_SDPA");
  const std::string force = env ? env : "";
  if (force == "own") return false;
  const auto q = cudnn_sdpa_problem(p, dt);
  if (!q) return false;
  CudnnConv* dnn = be.conv_library();
  if (!dnn) return false;
  const void *qp = io.in[0]->ptr, *kp = io.in[1]->ptr, *vp = io.in[2]->ptr;
  auto scratch = [&](size_t bytes) { return io.scratch(bytes); };
  bool declined = false;
  auto on_dnn = [&]() -> Status {
    FERRITE_ASSIGN_OR_RETURN(bool ran, dnn->run_attention(*q, qp, kp, vp, y, scratch));
    declined = !ran;
    return Status::ok();
  };
  if (force == "cudnn") {
    FERRITE_RETURN_IF_ERROR(on_dnn());
    return !declined;
  }
  const std::string key = "sdpa:" + q->key();
  std::optional<bool> faster = be.recorded_choice(key);
  if (!faster) {
    if (be.capturing()) return false;
    auto own = [&]() { return be.flash->run(p, dt, qp, kp, vp, nullptr, y); };
    FERRITE_ASSIGN_OR_RETURN(double t_own, time_stream_calls(be, own, 3));
    double t_dnn = 0;
    FERRITE_RETURN_IF_ERROR(on_dnn());
    if (!declined) {
      FERRITE_ASSIGN_OR_RETURN(t_dnn, time_stream_calls(be, on_dnn, 3));
    }
    faster = !declined && t_dnn < t_own;
    be.flash->note("attention " + key + ": own kernel " + std::to_string(t_own * 1e6) +
                       " us, cuDNN SDPA " +
                       (declined ? std::string("declined") : std::to_string(t_dnn * 1e6) + " us") +
                       (*faster ? ": cuDNN" : ": own"),
                   false);
    be.record_choice(key, *faster);
  }
  if (!*faster) return false;
  FERRITE_RETURN_IF_ERROR(on_dnn());
  return !declined;
}

}  // namespace

// Attention through the fused kernel (cuda_attention.h) when it takes the call; otherwise, for
// f32 with equal batch dims, QK^T GEMM + softmax kernel + P.V GEMM; otherwise the host.
Expected<bool> run_attention(const Node& node, NativeIO& io, CudaBackend& be) {
  if (!io.in[0] || !io.in[1] || !io.in[2]) return false;
  const DType dt = io.in[0]->dtype;
  for (const auto& v : io.in)
    if (v && v->dtype != dt) return false;
  if (dt != DType::kF32 && dt != DType::kBF16 && dt != DType::kF16) return false;
  auto layout_or = attention_layout(node);
  if (!layout_or) return false;
  const AttentionLayout layout = *layout_or;
  // Logical dims: an operand stored [B, S, H, D] or [S, B, H, D] stands for [B, H, S, D].
  std::vector<int64_t> dims[3];
  for (int i = 0; i < 3; ++i) {
    dims[i] = io.in[i]->dims;
    if (!layout.transposed[i]) continue;
    if (dims[i].size() != 4) return false;
    const std::array<int, 4> lp = logical_perm(layout.transposed[i]);
    dims[i] = {io.in[i]->dims[lp[0]], io.in[i]->dims[lp[1]], io.in[i]->dims[lp[2]],
               io.in[i]->dims[lp[3]]};
  }
  const auto& qd = dims[0];
  const auto& kd = dims[1];
  const auto& vd = dims[2];
  if (qd.size() < 2 || kd.size() < 2 || vd.size() < 2) return false;
  const int64_t S = qd[qd.size() - 2], D = qd.back(), T = kd[kd.size() - 2], Dv = vd.back();
  if (kd.back() != D || vd[vd.size() - 2] != T) return false;
  std::vector<int64_t> qb(qd.begin(), qd.end() - 2), kb(kd.begin(), kd.end() - 2),
      vb(vd.begin(), vd.end() - 2);
  auto batch = broadcast(qb, kb);
  if (batch) batch = broadcast(*batch, vb);
  if (!batch || batch->size() > 4) return false;
  const size_t br = batch->size();
  std::vector<int64_t> scores_dims = *batch;
  scores_dims.push_back(S);
  scores_dims.push_back(T);
  const DevView* mask = io.in.size() > 3 && io.in[3] ? &*io.in[3] : nullptr;
  FlashProblem p;
  p.batch = *batch;
  p.S = S, p.T = T, p.D = D, p.Dv = Dv;
  // Batch strides of a contiguous operand of batch dims `ob` and matrices of `mat` elements.
  auto batch_strides = [&](const std::vector<int64_t>& ob, int64_t mat) {
    std::vector<int64_t> st(br, 0);
    int64_t run = mat;
    for (size_t i = ob.size(); i-- > 0;) {
      const size_t d = br - ob.size() + i;
      if (ob[i] != 1) st[d] = run;
      run *= ob[i];
    }
    return st;
  };
  p.q_bs = batch_strides(qb, S * D);
  p.k_bs = batch_strides(kb, T * D);
  p.v_bs = batch_strides(vb, T * Dv);
  // An operand stored [B, S, H, D] (code 1) or [S, B, H, D] (code 2), batch [B, H]: heads D
  // apart; batch items S * H * D apart and rows H * D apart, or batch items H * D apart and rows
  // B * H * D apart. Its batch dims equal the broadcast ones (checked: no broadcasting).
  auto strided = [&](int code, int64_t rows, int64_t d, std::vector<int64_t>* bs, int64_t* rs) {
    const int64_t B = (*batch)[0], H = (*batch)[1];
    *bs = code == kSequenceFirst ? std::vector<int64_t>{H * d, d}
                                 : std::vector<int64_t>{rows * H * d, d};
    *rs = code == kSequenceFirst ? B * H * d : H * d;
  };
  auto operand = [&](int i, const std::vector<int64_t>& ob, int64_t rows, int64_t d,
                     std::vector<int64_t>* bs, int64_t* rs) {
    if (!layout.transposed[i]) return true;
    if (br != 2 || ob != *batch) return false;
    strided(layout.transposed[i], rows, d, bs, rs);
    return true;
  };
  if (!operand(0, qb, S, D, &p.q_bs, &p.q_rs) || !operand(1, kb, T, D, &p.k_bs, &p.k_rs) ||
      !operand(2, vb, T, Dv, &p.v_bs, &p.v_rs))
    return false;
  if (layout.transposed[3]) {
    if (br != 2) return false;
    strided(layout.transposed[3], S, Dv, &p.o_bs, &p.o_rs);
  }
  p.m_bs.assign(br, 0);
  if (mask) {
    BroadcastDims md{};
    if (!broadcast_strides(mask->dims, scores_dims, &md)) return false;
    for (size_t d = 0; d < br; ++d) p.m_bs[d] = md.strides[kMaxRank - 2 - br + d];
    p.m_s = md.strides[kMaxRank - 2];
    p.m_t = md.strides[kMaxRank - 1];
    p.has_mask = true;
  }
  p.causal = node.attr_int("causal") != 0;
  p.nan_to_zero = node.attr_int("nan_to_zero") != 0;
  p.masked_rows_zero = node.attr_int("masked_rows_zero") != 0;
  p.scale = node.has_attr("scale") ? node.attr_float("scale")
                                   : static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  std::vector<int64_t> out = *batch;
  out.push_back(S);
  out.push_back(Dv);
  if (layout.transposed[3]) {
    const std::array<int, 4> sp = stored_perm(layout.transposed[3]);
    out = {out[sp[0]], out[sp[1]], out[sp[2]], out[sp[3]]};
  }
  std::string why = be.flash ? be.flash->unsupported(p, dt) : "no fused attention kernel";
  if (why.empty()) {
    FERRITE_ASSIGN_OR_RETURN(void* yv, io.output(0, dt, out));
    FERRITE_ASSIGN_OR_RETURN(bool on_cudnn, attention_on_cudnn(io, be, p, dt, yv));
    if (on_cudnn) return true;
    FERRITE_RETURN_IF_ERROR(be.flash->run(p, dt, io.in[0]->ptr, io.in[1]->ptr, io.in[2]->ptr,
                                          mask ? mask->ptr : nullptr, yv));
    return true;
  }
  // The 3-step path reads contiguous [batch, S, D] operands only.
  const bool equal_batch = qb == *batch && kb == *batch && vb == *batch && !layout.any();
  if (be.flash)
    be.flash->note("node " + node.name + ": " +
                       (equal_batch ? "3-step attention (GEMM, softmax, GEMM)"
                                    : "attention on the host (broadcast batch dims)") +
                       ": the fused kernel does not take it: " + why,
                   true);
  // The 3-step path is f32 only; low-precision calls the fused kernel declines run on the host.
  if (!equal_batch || dt != DType::kF32) return false;
  FERRITE_ASSIGN_OR_RETURN(void* yv, io.output(0, DType::kF32, out));
  FERRITE_ASSIGN_OR_RETURN(void* sv, io.scratch(static_cast<size_t>(prod(*batch) * S * T) * 4));
  FERRITE_RETURN_IF_ERROR(attention_three_step(be, p, io.in[0]->f32(), io.in[1]->f32(),
                                               io.in[2]->f32(), mask ? mask->f32() : nullptr,
                                               static_cast<float*>(yv), static_cast<float*>(sv)));
  return true;
}

Status attention_three_step(CudaBackend& be, const FlashProblem& p, const float* q, const float* k,
                            const float* v, const float* mask, float* out, float* scores) {
  const size_t br = p.batch.size();
  const int64_t nb = prod(p.batch), S = p.S, T = p.T, D = p.D, Dv = p.Dv;
  SoftmaxParams sp{};
  if (mask) {
    for (size_t d = 0; d < br; ++d) sp.mask_batch_strides[d] = p.m_bs[d];
    sp.mask_s_stride = p.m_s;
    sp.mask_t_stride = p.m_t;
    sp.has_mask = 1;
  }
  sp.rows_per_batch = nb;
  sp.S = S;
  sp.T = T;
  sp.batch_rank = static_cast<int64_t>(br);
  for (size_t d = 0; d < br; ++d) sp.batch_dims[d] = p.batch[d];
  sp.causal = p.causal;
  sp.nan_to_zero = p.nan_to_zero;
  sp.masked_rows_zero = p.masked_rows_zero;
  GemmCall g;
  g.m = S, g.n = T, g.k = D, g.batch = nb;
  g.a = q, g.lda = D, g.stride_a = S * D;
  g.b = k, g.ldb = D, g.stride_b = T * D, g.trans_b = true;
  g.c = scores, g.ldc = T, g.stride_c = S * T;
  g.alpha = p.scale;
  FERRITE_RETURN_IF_ERROR(be.gemm->run(g));
  FERRITE_RETURN_IF_ERROR(be.lib->attention_softmax(scores, mask, sp));
  GemmCall h;
  h.m = S, h.n = Dv, h.k = T, h.batch = nb;
  h.a = scores, h.lda = T, h.stride_a = S * T;
  h.b = v, h.ldb = Dv, h.stride_b = T * Dv;
  h.c = out, h.ldc = Dv, h.stride_c = S * Dv;
  return be.gemm->run(h);
}

}  // namespace ferrite::cuda
