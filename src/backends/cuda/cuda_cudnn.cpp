#include "backends/cuda/cuda_cudnn.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "backends/cuda/cuda_cudnn_graph.h"

namespace ferrite::cuda {

namespace {

bool log_on(const char* topic) {
  const char* v = std::getenv("FERRITE_LOG");
  if (!v) return false;
  std::string s(v);
  return s == "all" || s.find(topic) != std::string::npos;
}

// Logged once per process: why there is no cuDNN path at all.
void note_unavailable(const std::string& why) {
  static std::once_flag flag;
  std::call_once(flag, [&] {
    if (log_on("fallback") || log_on("conv"))
      std::fprintf(stderr, "[fallback] cuda: no cuDNN convolution (%s): im2col + cuBLASLt\n",
                   why.c_str());
  });
}

// At most this much workspace per convolution: larger algorithms are skipped.
constexpr size_t kMaxWorkspace = size_t{256} << 20;

}  // namespace

// FERRITE_CUDA_CUDNN_GRAPH=0 keeps every convolution on the legacy calls (for comparison).
static bool graph_enabled() {
  const char* v = std::getenv("FERRITE_CUDA_CUDNN_GRAPH");
  return !(v && std::string(v) == "0");
}

bool cudnn_enabled() {
  const char* v = std::getenv("FERRITE_CUDA_CUDNN");
  return !(v && std::string(v) == "0");
}

bool cudnn_for(DType dtype, int64_t im2col_bytes) {
  const char* v = std::getenv("FERRITE_CUDA_CUDNN");
  const std::string mode = v ? v : "";
  if (mode == "0") return false;
  if (mode == "1") return true;
  if (dtype == DType::kBF16 || dtype == DType::kF16) return true;
  int64_t min_bytes = kF32CudnnMinBytes;
  if (const char* mb = std::getenv("FERRITE_CUDA_CUDNN_F32_MB")) {
    char* end = nullptr;
    const long long v = std::strtoll(mb, &end, 10);
    if (end != mb && *end == '\0' && v >= 0) min_bytes = static_cast<int64_t>(v) << 20;
  }
  return im2col_bytes > min_bytes;
}

std::string CudnnConv::unsupported(const CudnnConvProblem& q) {
  const ConvParams& p = q.p;
  if (q.dtype != DType::kF32 && q.dtype != DType::kBF16 && q.dtype != DType::kF16)
    return "dtype " + std::string(dtype_name(q.dtype));
  if (p.ph != q.ph_end || p.pw != q.pw_end)
    return "asymmetric pads (cuDNN pads both sides equally)";
  if (p.N * p.C * p.H * p.W == 0 || p.N * p.K * p.OH * p.OW == 0 || p.KH * p.KW == 0)
    return "an empty tensor";
  // The legacy API takes int dims and strides.
  for (int64_t v : {p.N * p.C * p.H * p.W, p.N * p.K * p.OH * p.OW, p.K * p.C * p.KH * p.KW, p.sh,
                    p.sw, p.ph, p.pw, p.dh, p.dw, p.groups})
    if (v > INT_MAX) return "dims beyond 32 bits";
  return "";
}

#if FERRITE_HAVE_CUDNN

namespace {

std::string status_text(const Cudnn& d, cudnnStatus_t s) {
  const char* t = d.cudnnGetErrorString(s);
  return t ? t : ("cudnnStatus " + std::to_string(static_cast<int>(s)));
}

#define FERRITE_CUDNN_CHECK(api, call, what)                                                \
  do {                                                                                      \
    cudnnStatus_t s_ = (call);                                                              \
    if (s_ != CUDNN_STATUS_SUCCESS) return err("cuDNN ", what, ": ", status_text(api, s_)); \
  } while (0)

cudnnDataType_t data_type(DType t) {
  return t == DType::kBF16  ? CUDNN_DATA_BFLOAT16
         : t == DType::kF16 ? CUDNN_DATA_HALF
                            : CUDNN_DATA_FLOAT;
}

bool accurate_algo(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
}

bool accurate_algo(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
}

bool accurate_algo(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

}  // namespace

// The algorithm of one direction (forward, backward data, backward filter), chosen on first use
// from cuDNN's heuristics.
struct CudnnConv::Choice {
  bool picked = false, usable = false;
  bool legacy = false;  // the legacy call has an algorithm (algo, workspace, math)
  int algo = 0;
  size_t workspace = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::string why;  // !usable: why not
  // The graph-API plan (cuda_cudnn_graph.h), preferred to the legacy call where cuDNN offers one.
  std::shared_ptr<CudnnGraphPlan> graph;
  std::string graph_why;  // why there is no graph plan
};

struct CudnnConv::Plan {
  const Cudnn* api = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  std::string key;              // for logs
  bool strict_f32 = false;      // f32 without TF32: FMA math only
  cudnnMathType_t want_math{};  // the math type the heuristics are asked for
  bool dims_ok = true;          // false: cuDNN's output dims differ from the node's (why)
  std::string why;
  Choice choice[3];  // by Direction
  // The fused bias + residual + activation call: descriptors made on first use; false once
  // cuDNN refused it for this problem.
  cudnnTensorDescriptor_t bias = nullptr;
  cudnnActivationDescriptor_t relu = nullptr, identity = nullptr;
  bool fused_ok = true;
  ~Plan() {
    if (!api) return;
    if (relu) api->cudnnDestroyActivationDescriptor(relu);
    if (identity) api->cudnnDestroyActivationDescriptor(identity);
    if (bias) api->cudnnDestroyTensorDescriptor(bias);
    if (conv) api->cudnnDestroyConvolutionDescriptor(conv);
    if (w) api->cudnnDestroyFilterDescriptor(w);
    if (y) api->cudnnDestroyTensorDescriptor(y);
    if (x) api->cudnnDestroyTensorDescriptor(x);
  }
};

Expected<std::unique_ptr<CudnnConv>> CudnnConv::create(const CudaRuntime& rt) {
  if (!cudnn_enabled()) {
    note_unavailable("FERRITE_CUDA_CUDNN=0");
    return std::unique_ptr<CudnnConv>();
  }
  auto lib = cudnn();
  if (!lib) {
    note_unavailable(lib.status().message());
    return std::unique_ptr<CudnnConv>();
  }
  const Cudnn& d = **lib;
  std::unique_ptr<CudnnConv> c(new CudnnConv());
  c->rt_ = &rt;
  c->api_ = &d;
  cudnnHandle_t h = nullptr;
  FERRITE_CUDNN_CHECK(d, d.cudnnCreate(&h), "cudnnCreate");
  c->handle_ = h;
  // CUstream and cudaStream_t are the same type (struct CUstream_st*).
  FERRITE_CUDNN_CHECK(d, d.cudnnSetStream(h, rt.stream()), "cudnnSetStream");
  if (log_on("conv") || log_on("compile"))
    std::fprintf(stderr, "[conv] cuda: %s\n", c->describe().c_str());
  return c;
}

CudnnConv::~CudnnConv() {
  plans_.clear();
  if (handle_) static_cast<const Cudnn*>(api_)->cudnnDestroy(static_cast<cudnnHandle_t>(handle_));
}

std::string CudnnConv::describe() const {
  const Cudnn& d = *static_cast<const Cudnn*>(api_);
  return "cuDNN " + std::to_string(d.version) + " (" + d.library + ")";
}

Expected<std::shared_ptr<CudnnConv::Plan>> CudnnConv::plan(const CudnnConvProblem& q) {
  const ConvParams& p = q.p;
  const bool f32 = q.dtype == DType::kF32;
  std::ostringstream key;
  key << p.N << "," << p.C << "," << p.H << "," << p.W << "," << p.K << "," << p.KH << "," << p.KW
      << "," << p.sh << "," << p.sw << "," << p.ph << "," << p.pw << "," << p.dh << "," << p.dw
      << "," << p.groups << "," << static_cast<int>(q.dtype) << "," << (f32 && q.tf32) << ","
      << q.channels_last << q.weights_last;
  std::shared_ptr<Plan>& slot = plans_[key.str()];
  if (slot) return slot;
  const Cudnn& d = *static_cast<const Cudnn*>(api_);
  auto pl = std::make_shared<Plan>();
  pl->api = &d;
  pl->key = key.str();
  const cudnnDataType_t dt = data_type(q.dtype);
  auto i = [](int64_t v) { return static_cast<int>(v); };
  FERRITE_CUDNN_CHECK(d, d.cudnnCreateTensorDescriptor(&pl->x), "cudnnCreateTensorDescriptor");
  FERRITE_CUDNN_CHECK(d, d.cudnnCreateTensorDescriptor(&pl->y), "cudnnCreateTensorDescriptor");
  FERRITE_CUDNN_CHECK(d, d.cudnnCreateFilterDescriptor(&pl->w), "cudnnCreateFilterDescriptor");
  FERRITE_CUDNN_CHECK(d, d.cudnnCreateConvolutionDescriptor(&pl->conv),
                      "cudnnCreateConvolutionDescriptor");
  // Dims are given as N, C, H, W (K, C/groups, KH, KW) whatever the storage format.
  const cudnnTensorFormat_t act_format = q.channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  const cudnnTensorFormat_t w_format = q.weights_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  FERRITE_CUDNN_CHECK(
      d, d.cudnnSetTensor4dDescriptor(pl->x, act_format, dt, i(p.N), i(p.C), i(p.H), i(p.W)),
      "input descriptor");
  FERRITE_CUDNN_CHECK(d,
                      d.cudnnSetFilter4dDescriptor(pl->w, dt, w_format, i(p.K), i(p.C / p.groups),
                                                   i(p.KH), i(p.KW)),
                      "filter descriptor");
  // ONNX Conv is a cross-correlation, as CUDNN_CROSS_CORRELATION; accumulation is always f32.
  FERRITE_CUDNN_CHECK(
      d,
      d.cudnnSetConvolution2dDescriptor(pl->conv, i(p.ph), i(p.pw), i(p.sh), i(p.sw), i(p.dh),
                                        i(p.dw), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
      "convolution descriptor");
  FERRITE_CUDNN_CHECK(d, d.cudnnSetConvolutionGroupCount(pl->conv, i(p.groups)),
                      "cudnnSetConvolutionGroupCount");
  // f32: FMA only (DEFAULT_MATH would allow TF32 on Ampere and later) unless --precision tf32.
  pl->strict_f32 = f32 && !q.tf32;
  pl->want_math = f32 ? (q.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH) : CUDNN_TENSOR_OP_MATH;
  int n = 0, c = 0, h = 0, w = 0;
  FERRITE_CUDNN_CHECK(
      d, d.cudnnGetConvolution2dForwardOutputDim(pl->conv, pl->x, pl->w, &n, &c, &h, &w),
      "cudnnGetConvolution2dForwardOutputDim");
  if (n != p.N || c != p.K || h != p.OH || w != p.OW) {
    pl->dims_ok = false;
    pl->why = "cuDNN's output dims differ from the node's";
    slot = pl;
    return slot;
  }
  FERRITE_CUDNN_CHECK(d, d.cudnnSetTensor4dDescriptor(pl->y, act_format, dt, n, c, h, w),
                      "output descriptor");
  slot = pl;
  return slot;
}

// Takes the first algorithm of cuDNN's heuristics (best first) that succeeds within the workspace
// bound and is accurate (no FFT / Winograd); strict f32 also needs an FMA-capable math type.
template <class Perf>
void CudnnConv::take_first(Plan& pl, Choice& ch, const Perf* perf, int found, const char* dir) {
  std::string offered;
  for (int k = 0; k < found; ++k) {
    const auto& r = perf[k];
    offered += (offered.empty() ? "" : " ") + std::to_string(static_cast<int>(r.algo)) + "/m" +
               std::to_string(static_cast<int>(r.mathType)) + "/s" +
               std::to_string(static_cast<int>(r.status));
    if (ch.usable || r.status != CUDNN_STATUS_SUCCESS || r.memory > kMaxWorkspace) continue;
    if (!accurate_algo(r.algo)) continue;
    // Strict f32: the heuristics may label FMA-capable algorithms DEFAULT_MATH; the descriptor
    // stays FMA_MATH, which restricts cuDNN to FMA kernels (a combination it cannot run is
    // refused by the call and the step falls back, see call()).
    if (pl.strict_f32 && r.mathType != CUDNN_FMA_MATH && r.mathType != CUDNN_DEFAULT_MATH) continue;
    ch.algo = static_cast<int>(r.algo);
    ch.workspace = r.memory;
    ch.math = pl.strict_f32 ? CUDNN_FMA_MATH : r.mathType;
    ch.usable = ch.legacy = true;
  }
  if (!ch.usable)
    ch.why = std::string(dir) + ": no accepted algorithm among cuDNN's (algo/mathType/status: " +
             (offered.empty() ? std::string("none") : offered) + ")";
  else if (log_on("conv"))
    std::fprintf(stderr, "[conv] cuda: cuDNN %s plan %s: algo %d, workspace %zu B (offered %s)\n",
                 dir, pl.key.c_str(), ch.algo, ch.workspace, offered.c_str());
}

// The plan for q with direction `dir`'s algorithm chosen (heuristics only, no kernels run: safe
// on any stream state, including graph capture). Called with mu_ and call_mu_ held.
Expected<std::shared_ptr<CudnnConv::Plan>> CudnnConv::plan(const CudnnConvProblem& q,
                                                           Direction dir) {
  FERRITE_ASSIGN_OR_RETURN(std::shared_ptr<Plan> pl, plan(q));
  Choice& ch = pl->choice[static_cast<int>(dir)];
  if (ch.picked) return pl;
  ch.picked = true;
  if (!pl->dims_ok) {
    ch.why = pl->why;
    return pl;
  }
  const Cudnn& d = *static_cast<const Cudnn*>(api_);
  const auto h = static_cast<cudnnHandle_t>(handle_);
  FERRITE_CUDNN_CHECK(d, d.cudnnSetConvolutionMathType(pl->conv, pl->want_math),
                      "cudnnSetConvolutionMathType");
  int found = 0;
  if (dir == Direction::kForward) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT * 4];
    FERRITE_CUDNN_CHECK(d,
                        d.cudnnGetConvolutionForwardAlgorithm_v7(
                            h, pl->x, pl->w, pl->conv, pl->y,
                            static_cast<int>(sizeof perf / sizeof perf[0]), &found, perf),
                        "cudnnGetConvolutionForwardAlgorithm_v7");
    take_first(*pl, ch, perf, found, "forward");
  } else if (dir == Direction::kBackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT * 4];
    FERRITE_CUDNN_CHECK(d,
                        d.cudnnGetConvolutionBackwardDataAlgorithm_v7(
                            h, pl->w, pl->y, pl->conv, pl->x,
                            static_cast<int>(sizeof perf / sizeof perf[0]), &found, perf),
                        "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    take_first(*pl, ch, perf, found, "backward-data");
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT * 4];
    FERRITE_CUDNN_CHECK(d,
                        d.cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                            h, pl->x, pl->y, pl->conv, pl->w,
                            static_cast<int>(sizeof perf / sizeof perf[0]), &found, perf),
                        "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    take_first(*pl, ch, perf, found, "backward-filter");
  }
  // Channels-last problems (inference after the layout pass, whose runs replay as CUDA graphs,
  // where a call's host cost is paid once) keep the legacy calls, except depthwise ones: for
  // those the legacy heuristics pick grouped kernels 20-30x slower than the graph API's
  // conv2d_c1_k1_nhwc_specialized (the kernel PyTorch's calls get; cuda_conv_ops.cpp times it
  // against fe_dwconv_nhwc8). The CTS and the depthwise families ran on both paths.
  const bool depthwise = q.p.groups > 1 && q.p.groups == q.p.C && q.p.K == q.p.C;
  if (graph_enabled() && (depthwise || (!q.channels_last && !q.weights_last))) {
    auto g = build_cudnn_graph_plan(d, h, q, static_cast<int>(dir));
    if (g) {
      ch.graph = std::move(*g);
      ch.usable = true;
      if (log_on("conv"))
        std::fprintf(stderr,
                     "[conv] cuda: cuDNN graph plan %s direction %d: engine config %d, "
                     "workspace %zu B\n",
                     pl->key.c_str(), static_cast<int>(dir), ch.graph->config, ch.graph->workspace);
    } else {
      // Logged by call(), outside the locks held here.
      ch.graph_why = "graph API, " + pl->key + " direction " +
                     std::to_string(static_cast<int>(dir)) + ": " + g.status().message() +
                     "; the legacy call runs";
    }
  }
  return pl;
}

Expected<bool> CudnnConv::call(const CudnnConvProblem& q, Direction dir, const void* a,
                               const void* b, void* out,
                               const std::function<Expected<void*>(size_t)>& scratch) {
  std::shared_ptr<Plan> pl;
  Choice* ch = nullptr;
  bool usable = false;
  std::string why;
  std::shared_ptr<CudnnGraphPlan> graph;
  std::string graph_why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::lock_guard<std::mutex> call(call_mu_);  // the heuristics query the handle
    FERRITE_ASSIGN_OR_RETURN(pl, plan(q, dir));
    ch = &pl->choice[static_cast<int>(dir)];
    usable = ch->usable;
    why = ch->why;
    graph = ch->graph;
    if (!graph) graph_why = ch->graph_why;
  }
  if (!graph_why.empty()) note(graph_why);
  if (!usable) {
    note(why);
    return false;
  }
  const Cudnn& d = *static_cast<const Cudnn*>(api_);
  const auto h = static_cast<cudnnHandle_t>(handle_);
  // Operands by role: x (or dx), w (or dw), y (or dy).
  void* role[3] = {const_cast<void*>(a), const_cast<void*>(b), out};
  if (dir == Direction::kBackwardData)
    role[0] = out, role[1] = const_cast<void*>(a), role[2] = const_cast<void*>(b);
  if (dir == Direction::kBackwardFilter) role[1] = out, role[2] = const_cast<void*>(b);
  bool aligned = true;
  for (void* r : role)
    aligned = aligned && reinterpret_cast<uintptr_t>(r) % kCudnnGraphAlignment == 0;
  if (graph && aligned) {
    void* gws = nullptr;
    if (graph->workspace > 0) {
      FERRITE_ASSIGN_OR_RETURN(gws, scratch(graph->workspace));
    }
    Status st;
    {
      std::lock_guard<std::mutex> call(call_mu_);
      cudnnStatus_t ss = d.cudnnSetStream(h, rt_->stream());
      st = ss == CUDNN_STATUS_SUCCESS
               ? execute_cudnn_graph_plan(d, h, *graph, role[0], role[1], role[2], gws)
               : err("cudnnSetStream: ", status_text(d, ss));
    }
    if (st) {
      ++calls_;
      return true;
    }
    // Nothing ran: the plan is dropped for good and the legacy call takes over.
    {
      std::lock_guard<std::mutex> lock(mu_);
      ch->graph.reset();
      ch->usable = ch->legacy;
    }
    note(pl->key + ": " + st.message());
  }
  if (!ch->legacy) {
    note(ch->why.empty() ? "no legacy algorithm for unaligned operands" : ch->why);
    return false;
  }
  void* ws = nullptr;
  if (ch->workspace > 0) {
    FERRITE_ASSIGN_OR_RETURN(ws, scratch(ch->workspace));
  }
  const float alpha = 1.0f, beta = 0.0f;
  const char* api = dir == Direction::kForward        ? "cudnnConvolutionForward"
                    : dir == Direction::kBackwardData ? "cudnnConvolutionBackwardData"
                                                      : "cudnnConvolutionBackwardFilter";
  cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
  {
    // One handle for all contexts: the call goes on the calling thread's stream, with the math
    // type of this direction's algorithm (the descriptor is shared by the directions).
    std::lock_guard<std::mutex> call(call_mu_);
    s = d.cudnnSetStream(h, rt_->stream());
    if (s == CUDNN_STATUS_SUCCESS) s = d.cudnnSetConvolutionMathType(pl->conv, ch->math);
    if (s == CUDNN_STATUS_SUCCESS) {
      if (dir == Direction::kForward)  // a = x, b = w, out = y
        s = d.cudnnConvolutionForward(h, &alpha, pl->x, a, pl->w, b, pl->conv,
                                      static_cast<cudnnConvolutionFwdAlgo_t>(ch->algo), ws,
                                      ch->workspace, &beta, pl->y, out);
      else if (dir == Direction::kBackwardData)  // a = w, b = dy, out = dx
        s = d.cudnnConvolutionBackwardData(h, &alpha, pl->w, a, pl->y, b, pl->conv,
                                           static_cast<cudnnConvolutionBwdDataAlgo_t>(ch->algo), ws,
                                           ch->workspace, &beta, pl->x, out);
      else  // a = x, b = dy, out = dw
        s = d.cudnnConvolutionBackwardFilter(h, &alpha, pl->x, a, pl->y, b, pl->conv,
                                             static_cast<cudnnConvolutionBwdFilterAlgo_t>(ch->algo),
                                             ws, ch->workspace, &beta, pl->w, out);
    }
  }
  if (s >= CUDNN_STATUS_NOT_SUPPORTED && s < CUDNN_STATUS_NOT_SUPPORTED + 1000) {
    // Nothing was launched: the choice is dropped for good and this call takes the other path.
    why = std::string(api) + " (algo " + std::to_string(ch->algo) + "): " + status_text(d, s);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ch->usable = ch->graph != nullptr;
      ch->legacy = false;
      ch->why = why;
    }
    note(why);
    return false;
  }
  if (s != CUDNN_STATUS_SUCCESS) return err("cuDNN ", api, ": ", status_text(d, s));
  ++calls_;
  return true;
}

Expected<bool> CudnnConv::run(const CudnnConvProblem& q, const void* x, const void* w, void* y,
                              const std::function<Expected<void*>(size_t)>& scratch) {
  return call(q, Direction::kForward, x, w, y, scratch);
}

Expected<bool> CudnnConv::run_backward_data(const CudnnConvProblem& q, const void* w,
                                            const void* dy, void* dx,
                                            const std::function<Expected<void*>(size_t)>& scratch) {
  return call(q, Direction::kBackwardData, w, dy, dx, scratch);
}

Expected<bool> CudnnConv::run_backward_filter(
    const CudnnConvProblem& q, const void* x, const void* dy, void* dw,
    const std::function<Expected<void*>(size_t)>& scratch) {
  return call(q, Direction::kBackwardFilter, x, dy, dw, scratch);
}

Expected<bool> CudnnConv::run_fused(const CudnnConvProblem& q, const void* x, const void* w,
                                    const void* bias, const void* z, bool relu, void* y,
                                    const std::function<Expected<void*>(size_t)>& scratch) {
  if (!bias) return false;  // the call takes a bias
  const Cudnn& d = *static_cast<const Cudnn*>(api_);
  std::shared_ptr<Plan> pl;
  const Choice* fwd = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::lock_guard<std::mutex> call(call_mu_);  // the heuristics query the handle
    FERRITE_ASSIGN_OR_RETURN(pl, plan(q, Direction::kForward));
    fwd = &pl->choice[static_cast<int>(Direction::kForward)];
    if (!fwd->legacy || !pl->fused_ok) return false;
    // Without an activation cuDNN fuses only with IMPLICIT_PRECOMP_GEMM.
    if (!relu && fwd->algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) return false;
    if (!pl->bias) {
      FERRITE_CUDNN_CHECK(d, d.cudnnCreateTensorDescriptor(&pl->bias),
                          "cudnnCreateTensorDescriptor");
      FERRITE_CUDNN_CHECK(
          d,
          d.cudnnSetTensor4dDescriptor(pl->bias, CUDNN_TENSOR_NCHW, data_type(q.dtype), 1,
                                       static_cast<int>(q.p.K), 1, 1),
          "bias descriptor");
      for (auto [desc, mode] : {std::pair{&pl->relu, CUDNN_ACTIVATION_RELU},
                                std::pair{&pl->identity, CUDNN_ACTIVATION_IDENTITY}}) {
        FERRITE_CUDNN_CHECK(d, d.cudnnCreateActivationDescriptor(desc),
                            "cudnnCreateActivationDescriptor");
        FERRITE_CUDNN_CHECK(d,
                            d.cudnnSetActivationDescriptor(*desc, mode, CUDNN_PROPAGATE_NAN, 0.0),
                            "cudnnSetActivationDescriptor");
      }
    }
  }
  void* ws = nullptr;
  if (fwd->workspace > 0) {
    FERRITE_ASSIGN_OR_RETURN(ws, scratch(fwd->workspace));
  }
  const float alpha1 = 1.0f, alpha2 = z ? 1.0f : 0.0f;
  // With alpha2 = 0 cuDNN does not read z; y is a valid tensor of z's descriptor.
  cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
  {
    std::lock_guard<std::mutex> call(call_mu_);
    s = d.cudnnSetStream(static_cast<cudnnHandle_t>(handle_), rt_->stream());
    if (s == CUDNN_STATUS_SUCCESS) s = d.cudnnSetConvolutionMathType(pl->conv, fwd->math);
    if (s == CUDNN_STATUS_SUCCESS)
      s = d.cudnnConvolutionBiasActivationForward(
          static_cast<cudnnHandle_t>(handle_), &alpha1, pl->x, x, pl->w, w, pl->conv,
          static_cast<cudnnConvolutionFwdAlgo_t>(fwd->algo), ws, fwd->workspace, &alpha2, pl->y,
          z ? z : y, pl->bias, bias, relu ? pl->relu : pl->identity, pl->y, y);
  }
  if (s >= CUDNN_STATUS_NOT_SUPPORTED && s < CUDNN_STATUS_NOT_SUPPORTED + 1000) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pl->fused_ok = false;
    }
    note("cudnnConvolutionBiasActivationForward (algo " + std::to_string(fwd->algo) +
         "): " + status_text(d, s) + "; convolution and epilogue run separately");
    return false;
  }
  if (s != CUDNN_STATUS_SUCCESS)
    return err("cuDNN cudnnConvolutionBiasActivationForward: ", status_text(d, s));
  ++calls_;
  ++fused_calls_;
  return true;
}

#undef FERRITE_CUDNN_CHECK

Expected<bool> CudnnConv::run_attention(const CudnnSdpaProblem& q, const void* qp, const void* k,
                                        const void* v, void* o,
                                        const std::function<Expected<void*>(size_t)>& scratch) {
  for (const void* p : {qp, k, v, static_cast<const void*>(o)})
    if (reinterpret_cast<uintptr_t>(p) % kCudnnGraphAlignment != 0) {
      note("attention " + q.key() + ": an operand is not 16-byte aligned; the own kernel runs");
      return false;
    }
  const Cudnn& d = *static_cast<const Cudnn*>(api_);
  const auto h = static_cast<cudnnHandle_t>(handle_);
  const std::string key = q.key();
  std::shared_ptr<CudnnGraphPlan> plan;
  std::string why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sdpa_plans_.find(key);
    if (it == sdpa_plans_.end()) {
      std::lock_guard<std::mutex> call(call_mu_);  // plan finalization queries the handle
      auto built = build_cudnn_sdpa_plan(d, h, q);
      if (built) {
        if (log_on("conv") || log_on("attention"))
          std::fprintf(stderr,
                       "[attention] cuda: cuDNN SDPA plan %s: engine config %d, "
                       "workspace %zu B\n",
                       key.c_str(), (*built)->config, (*built)->workspace);
        it = sdpa_plans_.emplace(key, std::move(*built)).first;
      } else {
        sdpa_why_[key] = built.status().message();
        it = sdpa_plans_.emplace(key, nullptr).first;
      }
    }
    plan = it->second;
    if (!plan) why = sdpa_why_[key];
  }
  if (!plan) {
    note("attention " + key + ": " + why + "; the own kernel runs");
    return false;
  }
  void* ws = nullptr;
  if (plan->workspace > 0) {
    FERRITE_ASSIGN_OR_RETURN(ws, scratch(plan->workspace));
  }
  std::lock_guard<std::mutex> call(call_mu_);
  cudnnStatus_t ss = d.cudnnSetStream(h, rt_->stream());
  if (ss != CUDNN_STATUS_SUCCESS) return err("cudnnSetStream: ", status_text(d, ss));
  FERRITE_RETURN_IF_ERROR(execute_cudnn_sdpa_plan(d, h, *plan, q, qp, k, v, o, ws));
  ++attention_calls_;
  return true;
}

#else   // !FERRITE_HAVE_CUDNN

struct CudnnConv::Plan {};

Expected<std::unique_ptr<CudnnConv>> CudnnConv::create(const CudaRuntime&) {
  note_unavailable("built without cudnn.h");
  return std::unique_ptr<CudnnConv>();
}
CudnnConv::~CudnnConv() = default;
std::string CudnnConv::describe() const {
  return "no cuDNN";
}
Expected<std::shared_ptr<CudnnConv::Plan>> CudnnConv::plan(const CudnnConvProblem&) {
  return err("cuDNN: not built");
}
Expected<bool> CudnnConv::run(const CudnnConvProblem&, const void*, const void*, void*,
                              const std::function<Expected<void*>(size_t)>&) {
  return false;
}
Expected<bool> CudnnConv::run_fused(const CudnnConvProblem&, const void*, const void*, const void*,
                                    const void*, bool, void*,
                                    const std::function<Expected<void*>(size_t)>&) {
  return false;
}
Expected<bool> CudnnConv::run_backward_data(const CudnnConvProblem&, const void*, const void*,
                                            void*, const std::function<Expected<void*>(size_t)>&) {
  return false;
}
Expected<bool> CudnnConv::run_backward_filter(const CudnnConvProblem&, const void*, const void*,
                                              void*,
                                              const std::function<Expected<void*>(size_t)>&) {
  return false;
}

Expected<bool> CudnnConv::run_attention(const CudnnSdpaProblem&, const void*, const void*,
                                        const void*, void*,
                                        const std::function<Expected<void*>(size_t)>&) {
  return false;
}
#endif  // FERRITE_HAVE_CUDNN

bool CudnnConv::logging() {
  return log_on("conv");
}

void CudnnConv::note(const std::string& msg) {
  if (!log_on("fallback") && !log_on("conv")) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!noted_.insert(msg).second) return;
  std::fprintf(stderr, "[fallback] cuda: convolution not on cuDNN: %s\n", msg.c_str());
}

}  // namespace ferrite::cuda
