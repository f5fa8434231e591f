#include "backends/cuda/cuda_gemm.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <sstream>

namespace ferrite::cuda {

namespace {

Status lt_check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::ok();
  return err("cuBLASLt: ", what, " failed (status ", static_cast<int>(s), ")");
}

}  // namespace

// Descriptors and the chosen algorithm for one problem; reused by every call of that shape.
struct CublasGemm::Plan {
  const CublasLt* lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (la) lt->cublasLtMatrixLayoutDestroy(la);
    if (lb) lt->cublasLtMatrixLayoutDestroy(lb);
    if (lc) lt->cublasLtMatrixLayoutDestroy(lc);
    if (desc) lt->cublasLtMatmulDescDestroy(desc);
  }
};

Expected<std::unique_ptr<CublasGemm>> CublasGemm::create(const CudaRuntime& rt) {
  FERRITE_ASSIGN_OR_RETURN(const CublasLt* lt, cublaslt());
  auto g = std::unique_ptr<CublasGemm>(new CublasGemm());
  g->rt_ = &rt;
  g->lt_ = lt;
  const char* tf = std::getenv("FERRITE_CUDA_TF32");
  g->tf32_ = tf && std::string(tf) == "1";
  const char* tune = std::getenv("FERRITE_CUDA_GEMM_TUNE");
  if (tune && std::string(tune) == "1") g->tune_ = Tune::kAll;
  if (tune && std::string(tune) == "0") g->tune_ = Tune::kNone;
  FERRITE_RETURN_IF_ERROR(rt.make_current());
  FERRITE_RETURN_IF_ERROR(lt_check(lt->cublasLtCreate(&g->handle_), "cublasLtCreate"));
  g->workspace_bytes_ = size_t{32} << 20;
  return g;
}

CublasGemm::~CublasGemm() {
  plans_.clear();
  if (rt_ && rt_->make_current().is_ok()) {
    if (handle_) lt_->cublasLtDestroy(handle_);
  }
}

std::string CublasGemm::describe() const {
  return "cuBLASLt " + std::to_string(lt_->version) + (tf32_ ? " (TF32)" : " (f32, TF32 off)");
}

// Times the heuristic's candidates on the call's own operands (a few runs each, CUDA events) and
// keeps the fastest: the first candidate is often not the best for the small-M f32 GEMMs of
// transformer inference. Skipped while a graph is captured and when C is updated in place (the
// trial runs would accumulate into it).
Status CublasGemm::tune(const GemmCall& g, Plan& p, const cublasLtMatmulHeuristicResult_t* results,
                        int found) {
  const Driver& d = rt_->api();
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  d.cuStreamIsCapturing(rt_->stream(), &cs);
  const bool has_c = g.beta != 0 && g.c_in;
  if (cs != CU_STREAM_CAPTURE_STATUS_NONE || (has_c && g.c_in == g.c)) return Status::ok();
  if (g.bias)
    lt_->cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                        sizeof g.bias);
  float beta = has_c ? g.beta : 0.f;
  const void* cin = has_c ? g.c_in : g.c;
  FERRITE_ASSIGN_OR_RETURN(void* workspace, rt_->current().workspace(workspace_bytes_));
  CUevent e0 = nullptr, e1 = nullptr;
  FERRITE_RETURN_IF_ERROR(check(d.cuEventCreate(&e0, CU_EVENT_DEFAULT), "cuEventCreate"));
  FERRITE_RETURN_IF_ERROR(check(d.cuEventCreate(&e1, CU_EVENT_DEFAULT), "cuEventCreate"));
  float best = 0;
  int best_i = -1;
  for (int i = 0; i < found; ++i) {
    auto once = [&] {
      return lt_->cublasLtMatmul(handle_, p.desc, &g.alpha, g.b, p.la, g.a, p.lb, &beta, cin, p.lc,
                                 g.c, p.lc, &results[i].algo, workspace, workspace_bytes_,
                                 rt_->stream());
    };
    if (once() != CUBLAS_STATUS_SUCCESS) continue;
    d.cuEventRecord(e0, rt_->stream());
    bool ok = true;
    for (int r = 0; r < 5 && ok; ++r) ok = once() == CUBLAS_STATUS_SUCCESS;
    d.cuEventRecord(e1, rt_->stream());
    d.cuEventSynchronize(e1);
    float ms = 0;
    d.cuEventElapsedTime(&ms, e0, e1);
    if (ok && (best_i < 0 || ms < best)) {
      best = ms;
      best_i = i;
    }
  }
  d.cuEventDestroy(e0);
  d.cuEventDestroy(e1);
  if (best_i >= 0) p.algo = results[best_i].algo;
  ++tuned_;
  return Status::ok();
}

namespace {
// The largest power of two (up to 256, cuBLASLt's default assumption) dividing p's address.
uint32_t pointer_alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a != 0) a >>= 1;
  return a;
}
}  // namespace

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS's "A" is our B.
// Contexts on several threads call at once: the plans, and the bias pointer set on a plan's
// descriptor for one call, are the GEMM object's; the workspace is the calling stream's.
Status CublasGemm::run(const GemmCall& g) {
  std::lock_guard<std::mutex> lock(mu_);
  return run_locked(g);
}

Status CublasGemm::run_locked(const GemmCall& g) {
  if (g.m == 0 || g.n == 0) return Status::ok();
  ++calls_;
  const bool has_c = g.beta != 0 && g.c_in;
  // bf16 / f16 operands may start at any 2-byte boundary (per-matrix calls of a broadcast batch):
  // the plan asks only for the alignment the pointers have (f32 keeps cuBLASLt's default).
  uint32_t align = 256;
  if (g.dtype != DType::kF32)
    for (const void* p : {g.a, g.b, static_cast<const void*>(g.c), has_c ? g.c_in : nullptr})
      if (p) align = std::min(align, pointer_alignment(p));
  std::ostringstream key;
  key << g.m << "," << g.n << "," << g.k << "," << g.batch << "," << g.lda << "," << g.ldb << ","
      << g.ldc << "," << g.stride_a << "," << g.stride_b << "," << g.stride_c << "," << g.trans_a
      << g.trans_b << (g.bias != nullptr) << static_cast<int>(g.act) << has_c << ","
      << static_cast<int>(g.dtype) << (g.tf32 && g.dtype == DType::kF32) << "," << align;
  std::shared_ptr<Plan>& slot = plans_[key.str()];
  if (!slot) {
    auto p = std::make_shared<Plan>();
    p->lt = lt_;
    const bool f32 = g.dtype == DType::kF32;
    constexpr double kTuneWork = 2147483648.0;  // m*n*k*batch from which f32 GEMMs are tuned
    const bool try_all =
        tune_ == Tune::kAll || (tune_ == Tune::kLargeF32 && f32 &&
                                static_cast<double>(g.m) * g.n * g.k * g.batch >= kTuneWork);
    if (!f32 && g.dtype != DType::kBF16 && g.dtype != DType::kF16)
      return err("cuBLASLt: no GEMM for ", dtype_name(g.dtype));
    const cudaDataType_t dt =
        f32 ? CUDA_R_32F : (g.dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F);
    cublasComputeType_t ct =
        f32 && (tf32_ || g.tf32) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    // Scale type (alpha, beta) f32 for every dtype.
    FERRITE_RETURN_IF_ERROR(
        lt_check(lt_->cublasLtMatmulDescCreate(&p->desc, ct, CUDA_R_32F), "desc"));
    cublasOperation_t opa = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS A = our B
    cublasOperation_t opb = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    lt_->cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
    lt_->cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
    cublasLtEpilogue_t epi = g.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    if (g.act == CublasLtEpilogue::kRelu)
      epi = g.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    else if (g.act == CublasLtEpilogue::kGeluTanh)
      epi = g.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    lt_->cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    // Stored (pre-op) shapes in column-major terms.
    uint64_t a_rows = g.trans_b ? g.k : g.n, a_cols = g.trans_b ? g.n : g.k;
    uint64_t b_rows = g.trans_a ? g.m : g.k, b_cols = g.trans_a ? g.k : g.m;
    FERRITE_RETURN_IF_ERROR(
        lt_check(lt_->cublasLtMatrixLayoutCreate(&p->la, dt, a_rows, a_cols, g.ldb), "layout B"));
    FERRITE_RETURN_IF_ERROR(
        lt_check(lt_->cublasLtMatrixLayoutCreate(&p->lb, dt, b_rows, b_cols, g.lda), "layout A"));
    FERRITE_RETURN_IF_ERROR(
        lt_check(lt_->cublasLtMatrixLayoutCreate(&p->lc, dt, g.n, g.m, g.ldc), "layout C"));
    if (g.batch > 1) {
      int32_t count = static_cast<int32_t>(g.batch);
      int64_t sa = g.stride_b, sb = g.stride_a, sc = g.stride_c;
      for (auto [l, s] : {std::pair{p->la, sa}, std::pair{p->lb, sb}, std::pair{p->lc, sc}}) {
        lt_->cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                              sizeof count);
        lt_->cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s,
                                              sizeof s);
      }
    }
    cublasLtMatmulPreference_t pref = nullptr;
    FERRITE_RETURN_IF_ERROR(lt_check(lt_->cublasLtMatmulPreferenceCreate(&pref), "preference"));
    uint64_t ws = workspace_bytes_;
    lt_->cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                              sizeof ws);
    if (align < 256)
      for (auto attr :
           {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
        lt_->cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof align);
    cublasLtMatmulHeuristicResult_t results[8] = {};
    int found = 0;
    cublasStatus_t hs = lt_->cublasLtMatmulAlgoGetHeuristic(
        handle_, p->desc, p->la, p->lb, p->lc, p->lc, pref, try_all ? 8 : 1, results, &found);
    lt_->cublasLtMatmulPreferenceDestroy(pref);
    if ((hs != CUBLAS_STATUS_SUCCESS || found == 0) && g.batch > 1) {
      // Some batched layouts (a broadcast operand with stride 0) may have no algorithm: one
      // call per matrix then.
      plans_.erase(key.str());
      for (int64_t i = 0; i < g.batch; ++i) {
        GemmCall one = g;
        one.batch = 1;
        one.a = elem_offset(g.a, i * g.stride_a, g.dtype);
        one.b = elem_offset(g.b, i * g.stride_b, g.dtype);
        one.c = elem_offset(g.c, i * g.stride_c, g.dtype);
        if (g.c_in) one.c_in = elem_offset(g.c_in, i * g.stride_c, g.dtype);
        FERRITE_RETURN_IF_ERROR(run_locked(one));
      }
      return Status::ok();
    }
    if (hs != CUBLAS_STATUS_SUCCESS || found == 0)
      return err("cuBLASLt: no algorithm for a ", g.m, "x", g.n, "x", g.k, " GEMM (batch ", g.batch,
                 ", status ", static_cast<int>(hs), ")");
    p->algo = results[0].algo;
    if (found > 1) FERRITE_RETURN_IF_ERROR(tune(g, *p, results, found));
    slot = p;
  }
  Plan& p = *slot;
  if (g.bias)
    lt_->cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                        sizeof g.bias);
  float beta = has_c ? g.beta : 0.f;
  const void* cin = has_c ? g.c_in : g.c;
  FERRITE_RETURN_IF_ERROR(rt_->make_current());
  FERRITE_ASSIGN_OR_RETURN(void* workspace, rt_->current().workspace(workspace_bytes_));
  return lt_check(
      lt_->cublasLtMatmul(handle_, p.desc, &g.alpha, g.b, p.la, g.a, p.lb, &beta, cin, p.lc, g.c,
                          p.lc, &p.algo, workspace, workspace_bytes_, rt_->stream()),
      "cublasLtMatmul");
}

}  // namespace ferrite::cuda
