// cuDNN's graph (backend) API for one convolution of a direction: an execution plan finalized once
// per problem and direction, then executed with a variant pack per call. The legacy calls
// (cudnnConvolutionForward / BackwardData / BackwardFilter) finalize an execution plan inside every
// call in cuDNN 9 (its engine configs query cuBLASLt's heuristics each time): on a training step
// of ResNet-50 that was most of the host time, hundreds of microseconds per convolution, while a
// finalized plan costs a variant pack and cudnnBackendExecute.
//
// Numerics follow the legacy path's rules (cuda_cudnn.h): engines whose notes say FFT or Winograd
// are skipped, and for strict f32 (no TF32) also those on tensor cores or converting inputs down.
#include "backends/cuda/cuda_cudnn_graph.h"

#include <cstdint>
#include <cstdio>
#include <vector>

namespace ferrite::cuda {

std::string CudnnSdpaProblem::key() const {
  std::string k = std::string(dtype_name(dtype)) + ":" + std::to_string(b) + "," +
                  std::to_string(h) + "," + std::to_string(hk) + "," + std::to_string(s) + "," +
                  std::to_string(t) + "," + std::to_string(d) + "," + std::to_string(dv);
  for (const int64_t* st : {q_st, k_st, v_st, o_st})
    for (int i = 0; i < 4; ++i) k += (i ? "," : "/") + std::to_string(st[i]);
  return k;
}

#if FERRITE_HAVE_CUDNN

// The handle attributes are deprecated in cuDNN 9 but still read by the versions we load.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace {

using Desc = cudnnBackendDescriptor_t;

class Builder {
 public:
  explicit Builder(const Cudnn& d, std::vector<Desc>& owned) : d_(d), owned_(owned) {}

  Expected<Desc> make(cudnnBackendDescriptorType_t t, const char* what) {
    Desc x = nullptr;
    cudnnStatus_t s = d_.cudnnBackendCreateDescriptor(t, &x);
    if (s != CUDNN_STATUS_SUCCESS) return fail(s, "create", what);
    owned_.push_back(x);
    return x;
  }
  Status set(Desc x, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n,
             const void* v, const char* what) {
    cudnnStatus_t s = d_.cudnnBackendSetAttribute(x, a, t, n, v);
    if (s != CUDNN_STATUS_SUCCESS) return fail(s, "set attribute of", what).status();
    return Status::ok();
  }
  Status finalize(Desc x, const char* what) {
    cudnnStatus_t s = d_.cudnnBackendFinalize(x);
    if (s != CUDNN_STATUS_SUCCESS) return fail(s, "finalize", what).status();
    return Status::ok();
  }
  Expected<Desc> fail(cudnnStatus_t s, const char* verb, const char* what) {
    const char* t = d_.cudnnGetErrorString(s);
    return err("cuDNN graph: ", verb, " ", what, ": ", t ? t : "error");
  }

 private:
  const Cudnn& d_;
  std::vector<Desc>& owned_;
};

// A tensor of logical dims `d` with strides `st` (both of 4); a by-value tensor is a host scalar
// handed over in the variant pack.
Expected<Desc> tensor(Builder& b, int64_t uid, cudnnDataType_t dt, const int64_t* d,
                      const int64_t* st, bool by_value = false) {
  FERRITE_ASSIGN_OR_RETURN(Desc t, b.make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor"));
  const int64_t align = kCudnnGraphAlignment;
  FERRITE_RETURN_IF_ERROR(
      b.set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, "tensor dtype"));
  FERRITE_RETURN_IF_ERROR(
      b.set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, d, "tensor dims"));
  FERRITE_RETURN_IF_ERROR(
      b.set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, st, "tensor strides"));
  FERRITE_RETURN_IF_ERROR(
      b.set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor uid"));
  FERRITE_RETURN_IF_ERROR(
      b.set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment"));
  if (by_value) {
    const bool yes = true;
    FERRITE_RETURN_IF_ERROR(
        b.set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes, "tensor by value"));
  }
  FERRITE_RETURN_IF_ERROR(b.finalize(t, "tensor"));
  return t;
}

// A convolution operand of logical dims [a, b, h, w] with the strides of `layout` (NCHW, or
// NHWC / KRSC when `last`).
Expected<Desc> tensor(Builder& b, int64_t uid, cudnnDataType_t dt, const std::vector<int64_t>& d,
                      bool last) {
  std::vector<int64_t> st = last ? std::vector<int64_t>{d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]}
                                 : std::vector<int64_t>{d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
  return tensor(b, uid, dt, d.data(), st.data());
}

// Whether an engine's numerical notes fit the problem's precision rules.
bool acceptable(const Cudnn& d, Desc cfg, bool strict_f32, std::string* notes) {
  Desc engine = nullptr;
  if (d.cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) !=
      CUDNN_STATUS_SUCCESS)
    return false;
  int64_t n = 0;
  bool ok =
      d.cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                 &n, &engine) == CUDNN_STATUS_SUCCESS;
  cudnnBackendNumericalNote_t list[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t count = 0;
  if (ok)
    ok = d.cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                    CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT,
                                    &count, list) == CUDNN_STATUS_SUCCESS;
  d.cudnnBackendDestroyDescriptor(engine);
  if (!ok) return false;
  for (int64_t i = 0; i < count; ++i) {
    const auto note = list[i];
    *notes += std::to_string(static_cast<int>(note)) + ",";
    if (note == CUDNN_NUMERICAL_NOTE_FFT || note == CUDNN_NUMERICAL_NOTE_WINOGRAD ||
        note == CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4 ||
        note == CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6 ||
        note == CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13)
      return false;
    if (strict_f32 && (note == CUDNN_NUMERICAL_NOTE_TENSOR_CORE ||
                       note == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
                       note == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION))
      return false;
  }
  return true;
}

// The operation graph of the single operation `op`, the heuristics' engine configurations for it,
// and the first one whose numerical notes fit and whose plan finalizes within the workspace
// limit, into `plan` (whose `owned` list `b` appends to).
Expected<std::unique_ptr<CudnnGraphPlan>> plan_for_op(Builder& b, const Cudnn& d,
                                                      cudnnHandle_t handle, Desc op,
                                                      bool strict_f32,
                                                      std::unique_ptr<CudnnGraphPlan> plan) {
  const auto D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  FERRITE_ASSIGN_OR_RETURN(Desc graph,
                           b.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph"));
  FERRITE_RETURN_IF_ERROR(b.set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, D, 1, &op, "graph ops"));
  // Deprecated in cuDNN 9 (the handle comes with each call); older 9.x versions still need it.
  (void)d.cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                   &handle);
  FERRITE_RETURN_IF_ERROR(b.finalize(graph, "operation graph"));

  FERRITE_ASSIGN_OR_RETURN(Desc heur, b.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "heuristics"));
  const cudnnBackendHeurMode_t hm = CUDNN_HEUR_MODE_A;
  FERRITE_RETURN_IF_ERROR(
      b.set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, D, 1, &graph, "heuristics graph"));
  FERRITE_RETURN_IF_ERROR(
      b.set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm, "heuristics mode"));
  FERRITE_RETURN_IF_ERROR(b.finalize(heur, "heuristics"));
  int64_t count = 0;
  if (d.cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, D, 0, &count, nullptr) !=
          CUDNN_STATUS_SUCCESS ||
      count <= 0)
    return err("cuDNN graph: the heuristics offer no engine configuration");
  count = std::min<int64_t>(count, 16);
  std::vector<Desc> cfgs(static_cast<size_t>(count));
  for (auto& c : cfgs) {
    FERRITE_ASSIGN_OR_RETURN(c, b.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config"));
  }
  int64_t got = 0;
  if (d.cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, D, count, &got,
                                 cfgs.data()) != CUDNN_STATUS_SUCCESS)
    return err("cuDNN graph: reading the heuristics' engine configurations failed");
  std::string tried;
  for (int64_t i = 0; i < got; ++i) {
    std::string notes;
    if (!acceptable(d, cfgs[i], strict_f32, &notes)) {
      tried += " [" + notes + "]";
      continue;
    }
    Desc ep = nullptr;
    if (d.cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &ep) !=
        CUDNN_STATUS_SUCCESS)
      continue;
    int64_t ws = 0;
    int64_t n = 0;
    (void)d.cudnnBackendSetAttribute(ep, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                     &handle);
    bool ok = d.cudnnBackendSetAttribute(ep, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, D, 1,
                                         &cfgs[i]) == CUDNN_STATUS_SUCCESS &&
              d.cudnnBackendFinalize(ep) == CUDNN_STATUS_SUCCESS &&
              d.cudnnBackendGetAttribute(ep, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                         CUDNN_TYPE_INT64, 1, &n, &ws) == CUDNN_STATUS_SUCCESS;
    if (!ok || ws < 0 || static_cast<size_t>(ws) > kCudnnGraphMaxWorkspace) {
      d.cudnnBackendDestroyDescriptor(ep);
      tried += " (plan " + std::to_string(i) + (ok ? " workspace too large)" : " refused)");
      continue;
    }
    plan->owned.push_back(ep);
    plan->plan = ep;
    plan->workspace = static_cast<size_t>(ws);
    plan->config = static_cast<int>(i);
    return plan;
  }
  return err("cuDNN graph: no acceptable engine among ", got, " configurations (numerical notes",
             tried, ")");
}

// Executes `plan` with the operands `ptrs` bound to `uids` (n of each).
Status execute_pack(const Cudnn& d, cudnnHandle_t handle, const CudnnGraphPlan& plan, int64_t n,
                    const int64_t* uids, void** ptrs, void* workspace) {
  Desc pack = nullptr;
  cudnnStatus_t s = d.cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
  if (s != CUDNN_STATUS_SUCCESS)
    return err("cuDNN graph: variant pack: ", d.cudnnGetErrorString(s));
  s = d.cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n,
                                 uids);
  if (s == CUDNN_STATUS_SUCCESS)
    s = d.cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                   n, ptrs);
  if (s == CUDNN_STATUS_SUCCESS)
    s = d.cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                                   &workspace);
  if (s == CUDNN_STATUS_SUCCESS) s = d.cudnnBackendFinalize(pack);
  if (s == CUDNN_STATUS_SUCCESS) s = d.cudnnBackendExecute(handle, plan.plan, pack);
  d.cudnnBackendDestroyDescriptor(pack);
  if (s != CUDNN_STATUS_SUCCESS)
    return err("cuDNN graph: cudnnBackendExecute: ", d.cudnnGetErrorString(s));
  return Status::ok();
}

}  // namespace

CudnnGraphPlan::~CudnnGraphPlan() {
  if (!api) return;
  for (size_t i = owned.size(); i-- > 0;) api->cudnnBackendDestroyDescriptor(owned[i]);
}

Expected<std::unique_ptr<CudnnGraphPlan>> build_cudnn_graph_plan(const Cudnn& d,
                                                                 cudnnHandle_t handle,
                                                                 const CudnnConvProblem& q,
                                                                 int direction) {
  auto plan = std::make_unique<CudnnGraphPlan>();
  plan->api = &d;
  Builder b(d, plan->owned);
  const ConvParams& p = q.p;
  const cudnnDataType_t dt = q.dtype == DType::kBF16  ? CUDNN_DATA_BFLOAT16
                             : q.dtype == DType::kF16 ? CUDNN_DATA_HALF
                                                      : CUDNN_DATA_FLOAT;
  const bool strict_f32 = q.dtype == DType::kF32 && !q.tf32;
  FERRITE_ASSIGN_OR_RETURN(Desc x, tensor(b, 1, dt, {p.N, p.C, p.H, p.W}, q.channels_last));
  FERRITE_ASSIGN_OR_RETURN(Desc w,
                           tensor(b, 2, dt, {p.K, p.C / p.groups, p.KH, p.KW}, q.weights_last));
  FERRITE_ASSIGN_OR_RETURN(Desc y, tensor(b, 3, dt, {p.N, p.K, p.OH, p.OW}, q.channels_last));

  FERRITE_ASSIGN_OR_RETURN(Desc conv, b.make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, "convolution"));
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2;
  const int64_t dil[2] = {p.dh, p.dw}, str[2] = {p.sh, p.sw}, pre[2] = {p.ph, p.pw},
                post[2] = {q.ph_end, q.pw_end};
  FERRITE_RETURN_IF_ERROR(b.set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
                                &comp, "compute type"));
  FERRITE_RETURN_IF_ERROR(
      b.set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, "mode"));
  FERRITE_RETURN_IF_ERROR(
      b.set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims, "spatial dims"));
  FERRITE_RETURN_IF_ERROR(
      b.set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil, "dilations"));
  FERRITE_RETURN_IF_ERROR(
      b.set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str, "strides"));
  FERRITE_RETURN_IF_ERROR(
      b.set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pre, "pads"));
  FERRITE_RETURN_IF_ERROR(
      b.set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, post, "pads"));
  FERRITE_RETURN_IF_ERROR(b.finalize(conv, "convolution"));

  // The operation: its operands by direction (uids 1 = x / dx, 2 = w / dw, 3 = y / dy).
  static const cudnnBackendDescriptorType_t kOp[3] = {
      CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
      CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
      CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR};
  static const cudnnBackendAttributeName_t kAttrs[3][6] = {
      {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
      {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
      {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA}};
  if (direction < 0 || direction > 2) return err("cuDNN graph: bad direction ", direction);
  const auto* at = kAttrs[direction];
  FERRITE_ASSIGN_OR_RETURN(Desc op, b.make(kOp[direction], "operation"));
  const auto D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  FERRITE_RETURN_IF_ERROR(b.set(op, at[0], D, 1, &x, "operand x"));
  FERRITE_RETURN_IF_ERROR(b.set(op, at[1], D, 1, &w, "operand w"));
  FERRITE_RETURN_IF_ERROR(b.set(op, at[2], D, 1, &y, "operand y"));
  FERRITE_RETURN_IF_ERROR(b.set(op, at[3], D, 1, &conv, "convolution"));
  const float alpha = 1.0f, beta = 0.0f;
  FERRITE_RETURN_IF_ERROR(b.set(op, at[4], CUDNN_TYPE_FLOAT, 1, &alpha, "alpha"));
  FERRITE_RETURN_IF_ERROR(b.set(op, at[5], CUDNN_TYPE_FLOAT, 1, &beta, "beta"));
  FERRITE_RETURN_IF_ERROR(b.finalize(op, "operation"));

  return plan_for_op(b, d, handle, op, strict_f32, std::move(plan));
}

Status execute_cudnn_graph_plan(const Cudnn& d, cudnnHandle_t handle, const CudnnGraphPlan& plan,
                                void* x, void* w, void* y, void* workspace) {
  const int64_t uids[3] = {1, 2, 3};
  void* ptrs[3] = {x, w, y};
  return execute_pack(d, handle, plan, 3, uids, ptrs, workspace);
}

// cuDNN 9.13's SDPA operation: one descriptor for the whole attention, which the library maps to
// its fused flash-attention engines (what PyTorch's scaled_dot_product_attention reaches through
// cudnn-frontend), instead of the composite matmul / softmax / matmul graph older versions need.
Expected<std::unique_ptr<CudnnGraphPlan>> build_cudnn_sdpa_plan(const Cudnn& d,
                                                                cudnnHandle_t handle,
                                                                const CudnnSdpaProblem& q) {
#if CUDNN_VERSION >= 91300
  if (d.version < kCudnnSdpaMinVersion)
    return err("cuDNN ", d.version, " has no SDPA operation (9.13 and later)");
  if (q.dtype != DType::kBF16 && q.dtype != DType::kF16)
    return err("cuDNN SDPA: dtype ", dtype_name(q.dtype));
  auto plan = std::make_unique<CudnnGraphPlan>();
  plan->api = &d;
  Builder b(d, plan->owned);
  const cudnnDataType_t dt = q.dtype == DType::kBF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
  const int64_t qd[4] = {q.b, q.h, q.s, q.d}, kd[4] = {q.b, q.hk, q.t, q.d},
                vd[4] = {q.b, q.hk, q.t, q.dv}, od[4] = {q.b, q.h, q.s, q.dv};
  const int64_t one[4] = {1, 1, 1, 1};
  FERRITE_ASSIGN_OR_RETURN(Desc tq, tensor(b, 1, dt, qd, q.q_st));
  FERRITE_ASSIGN_OR_RETURN(Desc tk, tensor(b, 2, dt, kd, q.k_st));
  FERRITE_ASSIGN_OR_RETURN(Desc tv, tensor(b, 3, dt, vd, q.v_st));
  FERRITE_ASSIGN_OR_RETURN(Desc to, tensor(b, 4, dt, od, q.o_st));
  FERRITE_ASSIGN_OR_RETURN(Desc ts, tensor(b, 5, CUDNN_DATA_FLOAT, one, one, true));
  FERRITE_ASSIGN_OR_RETURN(Desc op, b.make(CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, "SDPA"));
  const auto D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  FERRITE_RETURN_IF_ERROR(b.set(op, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, D, 1, &tq, "SDPA q"));
  FERRITE_RETURN_IF_ERROR(b.set(op, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, D, 1, &tk, "SDPA k"));
  FERRITE_RETURN_IF_ERROR(b.set(op, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, D, 1, &tv, "SDPA v"));
  FERRITE_RETURN_IF_ERROR(b.set(op, CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, D, 1, &to, "SDPA o"));
  FERRITE_RETURN_IF_ERROR(
      b.set(op, CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, D, 1, &ts, "SDPA scale"));
  FERRITE_RETURN_IF_ERROR(b.finalize(op, "SDPA operation"));
  return plan_for_op(b, d, handle, op, false, std::move(plan));
#else
  (void)d, (void)handle, (void)q;
  return err("built against cuDNN headers older than 9.13 (no SDPA operation)");
#endif
}

Status execute_cudnn_sdpa_plan(const Cudnn& d, cudnnHandle_t handle, const CudnnGraphPlan& plan,
                               const CudnnSdpaProblem& q, const void* qp, const void* k,
                               const void* v, void* o, void* workspace) {
  const int64_t uids[5] = {1, 2, 3, 4, 5};
  float scale = q.scale;  // by value: read when the call is issued (or captured)
  void* ptrs[5] = {const_cast<void*>(qp), const_cast<void*>(k), const_cast<void*>(v), o, &scale};
  return execute_pack(d, handle, plan, 5, uids, ptrs, workspace);
}

#pragma GCC diagnostic pop

#endif  // FERRITE_HAVE_CUDNN

}  // namespace ferrite::cuda
