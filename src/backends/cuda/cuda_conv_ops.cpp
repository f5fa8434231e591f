// Convolution and pooling library ops of the cuda device: ONNX Conv, ferrite.FusedConv (bias,
// residual and activation; [N, C, H, W] or the layout pass's channels-last form with NHWC or
// [K, KH, KW, C] filters), the convolution gradients (ConvTranspose, ferrite.ConvGradWeight: cuDNN
// only), MaxPool, AveragePool and ferrite.Pool.
//
// A convolution runs on cuDNN where it takes the call (bf16 / f16 always; f32 by cuda_cudnn.h's
// rule, and always for channels-last, which has no other GPU path), else im2col + cuBLASLt or
// the direct kernel for grouped convolutions ([N, C, H, W] only). Depthwise layers have kernels
// of their own first: fe_dwconv_nhwc8 (channels-last 16-bit, timed against cuDNN) and
// fe_dwconv_nchw (f32 [N, C, H, W], square 3 / 5 / 7 filters). FusedConv's bias, residual and
// activation then run in one epilogue pass over y.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <sstream>
#include <string>

#include "backends/cuda/cuda_cudnn.h"
#include "backends/cuda/cuda_native_ops.h"
#include "ops/activation_epilogue.h"
#include "ops/conv_util.h"

namespace ferrite::cuda {

namespace {

// One convolution call: logical [N, C, H, W] / [K, C/groups, KH, KW] sizes in `p` whatever the
// stored layouts, with what FusedConv adds.
struct ConvCall {
  ConvParams p{};
  int64_t ph_end = 0, pw_end = 0;
  bool last = false, w_last = false;  // channels-last activations / [K, KH, KW, C] filter
  const void* bias = nullptr;
  const void* res = nullptr;
  Activation act;
  DType dt = DType::kUndefined;
};

// Reads the call; nullopt declines the node (dtype, rank, attribute combination).
std::optional<ConvCall> read_conv(const Node& node, const NativeIO& io) {
  ConvCall c;
  c.dt = gemm_dtype(io);
  if (c.dt == DType::kUndefined || !io.in[0] || !io.in[1]) return std::nullopt;
  const bool fused = node.domain == "ferrite";
  c.last = fused && node.attr_int("channels_last", 0) != 0;
  c.w_last = fused && node.attr_int("weights_last", 0) != 0;
  if (c.w_last && !c.last) return std::nullopt;
  if (fused) {
    auto a = activation_of(node);
    if (!a) return std::nullopt;
    c.act = *a;
  }
  const auto& xs = io.in[0]->dims;
  const auto& ws = io.in[1]->dims;
  if (xs.size() != 4 || ws.size() != 4) return std::nullopt;
  // Logical dims.
  const std::vector<int64_t> xd = c.last ? std::vector<int64_t>{xs[0], xs[3], xs[1], xs[2]} : xs;
  const std::vector<int64_t> wd = c.w_last ? std::vector<int64_t>{ws[0], ws[3], ws[1], ws[2]} : ws;
  const int64_t groups = node.attr_int("group", 1);
  if (groups < 1 || xd[1] % groups || wd[0] % groups || wd[1] * groups != xd[1])
    return std::nullopt;
  auto win = read_window(node, {wd[2], wd[3]});
  if (!win) return std::nullopt;
  auto outsp = resolve_window(node, *win, {xd[2], xd[3]});
  if (!outsp) return std::nullopt;
  const DevView* bias = io.in.size() > 2 && io.in[2] ? &*io.in[2] : nullptr;
  if (bias && product(bias->dims) != wd[0]) return std::nullopt;
  c.bias = bias ? bias->ptr : nullptr;
  ConvParams& p = c.p;
  p.N = xd[0], p.C = xd[1], p.H = xd[2], p.W = xd[3], p.K = wd[0];
  p.OH = (*outsp)[0], p.OW = (*outsp)[1], p.KH = wd[2], p.KW = wd[3];
  p.sh = win->strides[0], p.sw = win->strides[1], p.ph = win->pads[0], p.pw = win->pads[1];
  p.dh = win->dilations[0], p.dw = win->dilations[1], p.groups = groups;
  c.ph_end = win->pads[2];
  c.pw_end = win->pads[3];
  if (io.in.size() > 3 && io.in[3]) {
    const std::vector<int64_t> yd = c.last ? std::vector<int64_t>{p.N, p.OH, p.OW, p.K}
                                           : std::vector<int64_t>{p.N, p.K, p.OH, p.OW};
    if (io.in[3]->dims != yd) return std::nullopt;
    c.res = io.in[3]->ptr;
  }
  return c;
}

// Whether FusedConv's bias, residual and activation go into cuDNN's fused call (none, or an
// activation whose scalar-function row has a cuDNN mapping; FERRITE_CUDA_CUDNN_FUSED=0 keeps them
// in the separate epilogue kernel, for comparison).
bool cudnn_can_fuse(const ConvCall& c) {
  const char* v = std::getenv("FERRITE_CUDA_CUDNN_FUSED");
  if (v && std::string(v) == "0") return false;
  return c.bias && (c.act.none() || c.act.fn->cudnn == CudnnActivation::kRelu);
}

enum class CudnnResult { kDeclined, kConvOnly, kWithEpilogue };

// The convolution on cuDNN, with bias, residual and activation fused into the call where cuDNN
// takes them (kWithEpilogue), else the convolution alone (kConvOnly); kDeclined when cuDNN does
// not take the problem (logged under FERRITE_LOG=conv).
Expected<CudnnResult> conv_on_cudnn(const Node& node, NativeIO& io, CudaBackend& be,
                                    const ConvCall& c, void* y, bool allow_fused = true) {
  const ConvParams& p = c.p;
  // The size of the work without cuDNN, as im2col's column matrix: what im2col writes for a
  // dense convolution, and for a grouped one what the direct kernel reads (every output reads
  // C / groups * KH * KW inputs). Depthwise layers (groups == C) count one channel: the direct
  // kernel's 9-49 taps per output stay memory-bound and beat cuDNN's grouped kernels at batch 1.
  const bool depthwise = p.groups > 1 && p.groups == p.C;
  const int64_t col = p.N * (depthwise ? 1 : p.C) * p.KH * p.KW * p.OH * p.OW *
                      static_cast<int64_t>(dtype_size(c.dt));
  const bool wanted = c.last || cudnn_for(c.dt, col);
  CudnnConv* dnn = wanted ? be.conv_library() : nullptr;
  if (!dnn) return CudnnResult::kDeclined;
  CudnnConvProblem q;
  q.p = c.p;
  q.ph_end = c.ph_end;
  q.pw_end = c.pw_end;
  q.dtype = c.dt;
  q.tf32 = io.tf32 || be.gemm->tf32();
  q.channels_last = c.last;
  q.weights_last = c.w_last;
  std::string why = CudnnConv::unsupported(q);
  if (!why.empty()) {
    dnn->note("node " + node.name + ": " + why);
    return CudnnResult::kDeclined;
  }
  if (allow_fused && cudnn_can_fuse(c)) {
    FERRITE_ASSIGN_OR_RETURN(bool fused, dnn->run_fused(q, io.in[0]->ptr, io.in[1]->ptr, c.bias,
                                                        c.res, !c.act.none(), y, io.scratch));
    if (fused) return CudnnResult::kWithEpilogue;
  }
  FERRITE_ASSIGN_OR_RETURN(bool done, dnn->run(q, io.in[0]->ptr, io.in[1]->ptr, y, io.scratch));
  return done ? CudnnResult::kConvOnly : CudnnResult::kDeclined;
}

// y = conv(x, w) + bias, [N, C, H, W], without cuDNN: the direct kernel (grouped), one GEMM for
// 1x1 convolutions, im2col + one GEMM for the batch otherwise.
Status conv_nchw_gemm(NativeIO& io, CudaBackend& be, const ConvCall& c, void* y) {
  const ConvParams& p = c.p;
  const DType dt = c.dt;
  if (p.groups != 1) return be.lib->conv2d_direct(io.in[0]->ptr, io.in[1]->ptr, c.bias, y, p, dt);
  const int64_t ohw = p.OH * p.OW, ckk = p.C * p.KH * p.KW;
  const bool pointwise = p.KH == 1 && p.KW == 1 && p.sh == 1 && p.sw == 1 && p.ph == 0 &&
                         p.pw == 0 && c.ph_end == 0 && c.pw_end == 0;
  GemmCall g;
  g.dtype = dt;
  g.tf32 = io.tf32;
  g.m = p.K;
  g.k = ckk;
  g.a = io.in[1]->ptr;
  g.lda = ckk;
  if (pointwise) {
    // y[n] (K x HW) = W (K x C) * x[n] (C x HW): the input is its own column matrix.
    g.n = ohw;
    g.batch = p.N;
    g.stride_a = 0;
    g.b = io.in[0]->ptr;
    g.ldb = ohw;
    g.stride_b = ckk * ohw;
    g.c = y;
    g.ldc = ohw;
    g.stride_c = p.K * ohw;
    FERRITE_RETURN_IF_ERROR(be.gemm->run(g));
    if (!c.bias) return Status::ok();
    return be.lib->bias_act_nchw(y, c.bias, p.N * p.K * ohw, p.K, ohw, 0, 0, 0, dt);
  }
  // One GEMM for the whole batch: T (K x N*OHW) = W (K x CKK) * col (CKK x N*OHW), then T goes
  // back to NCHW with the bias (directly into y when there is one image).
  const size_t es = dtype_size(dt);
  FERRITE_ASSIGN_OR_RETURN(void* cv, io.scratch(static_cast<size_t>(p.N * ckk * ohw) * es));
  FERRITE_RETURN_IF_ERROR(be.lib->im2col(io.in[0]->ptr, cv, p, dt));
  void* t = y;
  if (p.N > 1) {
    FERRITE_ASSIGN_OR_RETURN(t, io.scratch(static_cast<size_t>(p.N * p.K * ohw) * es));
  }
  g.n = p.N * ohw;
  g.b = cv;
  g.ldb = p.N * ohw;
  g.c = t;
  g.ldc = p.N * ohw;
  FERRITE_RETURN_IF_ERROR(be.gemm->run(g));
  if (p.N > 1) return be.lib->bias_act_unfold(t, y, c.bias, p.N, p.K, ohw, 0, dt);
  if (!c.bias) return Status::ok();
  return be.lib->bias_act_nchw(y, c.bias, p.K * ohw, p.K, ohw, 0, 0, 0, dt);
}

// Which path a depthwise problem takes when it is not timed now: FERRITE_CUDA_DWCONV=own (ours,
// false) or =cudnn (the other path, true), else what timing chose earlier (nullopt: not yet).
// Read per call.
std::optional<bool> depthwise_choice(CudaBackend& be, const std::string& key) {
  const char* env = std::getenv("FERRITE_CUDA_DWCONV");
  const std::string force = env ? env : "";
  if (force == "own" || force == "cudnn") return force == "cudnn";
  return be.recorded_choice(key);
}

// Channels-last depthwise convolution: fe_dwconv_nhwc8 with the epilogue fused, or cuDNN's
// graph-API kernel followed by the epilogue pass, whichever ran faster on this problem. Neither
// wins everywhere (H200, bf16, batch 32: cuDNN's conv2d_c1_k1_nhwc_specialized took EfficientNet-
// B0's depthwise layers in 287 us against our 508, but its SiLU epilogue pass costs ~170 us more;
// at batch 1 our kernel's launch is the smaller). Timed once per problem, on its first call
// outside a CUDA graph capture (calls inside a capture take our kernel until then);
// FERRITE_CUDA_DWCONV=own or =cudnn forces one. False: neither path took the call.
Expected<bool> run_depthwise_nhwc(const Node& node, NativeIO& io, CudaBackend& be,
                                  const ConvCall& c, void* y) {
  const ConvParams& p = c.p;
  ConvParams q = p;
  q.act = c.act.code();
  q.lo = c.act.alpha;
  q.hi = c.act.beta;
  FERRITE_ASSIGN_OR_RETURN(void* w_taps,
                           io.scratch(static_cast<size_t>(p.C * p.KH * p.KW) * sizeof(float)));
  const bool own_ok = reinterpret_cast<uintptr_t>(w_taps) % 16 == 0;
  auto own = [&]() -> Status {
    return be.lib->dwconv_nhwc(io.in[0]->ptr, io.in[1]->ptr, w_taps, c.bias, c.res, y, q, c.dt);
  };
  // cuDNN writes y before the epilogue reads the residual: not when they share a buffer.
  bool dnn_declined = c.res == y;
  auto dnn = [&]() -> Status {
    FERRITE_ASSIGN_OR_RETURN(CudnnResult r, conv_on_cudnn(node, io, be, c, y, false));
    if (r != CudnnResult::kConvOnly) {
      dnn_declined = true;
      return Status::ok();
    }
    if (!c.bias && !c.res && c.act.none()) return Status::ok();
    return be.lib->bias_act_nchw(y, c.bias, p.N * p.K * p.OH * p.OW, p.K, 1, c.act.code(),
                                 c.act.alpha, c.act.beta, c.dt, c.res);
  };
  std::ostringstream key;
  key << "dwconv:" << p.N << "," << p.C << "," << p.H << "," << p.W << "," << p.KH << "," << p.KW
      << "," << p.sh << "," << p.sw << "," << p.ph << "," << p.pw << "," << c.ph_end << ","
      << c.pw_end << "," << p.dh << "," << p.dw << "," << static_cast<int>(c.dt) << ","
      << c.act.code() << "," << (c.bias != nullptr) << (c.res != nullptr);
  std::optional<bool> on_cudnn = depthwise_choice(be, key.str());
  if (!on_cudnn && own_ok && !dnn_declined && !be.capturing()) {
    FERRITE_ASSIGN_OR_RETURN(double t_own, time_stream_calls(be, own, 3));
    FERRITE_ASSIGN_OR_RETURN(double t_dnn, time_stream_calls(be, dnn, 3));
    on_cudnn = !dnn_declined && t_dnn < t_own;
    if (CudnnConv::logging())
      std::fprintf(stderr, "[conv] cuda: depthwise %s: ours %.1f us, cuDNN + epilogue %.1f us%s\n",
                   key.str().c_str(), t_own * 1e6, t_dnn * 1e6,
                   dnn_declined ? " (cuDNN declined)" : (*on_cudnn ? ": cuDNN" : ": ours"));
    be.record_choice(key.str(), *on_cudnn);
  }
  if (on_cudnn.value_or(false) && !dnn_declined) {
    FERRITE_RETURN_IF_ERROR(dnn());
    if (!dnn_declined) return true;
  }
  if (!own_ok) return false;
  FERRITE_RETURN_IF_ERROR(own());
  return true;
}

// FERRITE_CUDA_DWCONV_NCHW=0: f32 NCHW depthwise layers skip fe_dwconv_nchw (cuDNN or the
// direct kernel, as before it), for comparison. Read per call.
bool nchw_depthwise_off() {
  const char* v = std::getenv("FERRITE_CUDA_DWCONV_NCHW");
  return v && (std::string(v) == "0" || std::string(v) == "off");
}

// The convolution without a depthwise kernel of its own: cuDNN (with or followed by the
// epilogue), else for [N, C, H, W] im2col / the direct kernel and the epilogue. False: a
// channels-last call cuDNN declined (no other GPU path; the step runs on the host, logged as a
// fallback).
Expected<bool> conv_general(const Node& node, NativeIO& io, CudaBackend& be, const ConvCall& c,
                            void* y) {
  const ConvParams& p = c.p;
  const int64_t total = p.N * p.K * p.OH * p.OW;
  const int64_t plane = c.last ? 1 : p.OH * p.OW;
  FERRITE_ASSIGN_OR_RETURN(CudnnResult dnn, conv_on_cudnn(node, io, be, c, y));
  if (dnn == CudnnResult::kWithEpilogue) return true;
  if (dnn == CudnnResult::kConvOnly) {
    if (!c.bias && !c.res && c.act.none()) return true;
    FERRITE_RETURN_IF_ERROR(be.lib->bias_act_nchw(y, c.bias, total, p.K, plane, c.act.code(),
                                                  c.act.alpha, c.act.beta, c.dt, c.res));
    return true;
  }
  if (c.last) return false;
  FERRITE_RETURN_IF_ERROR(conv_nchw_gemm(io, be, c, y));
  if (!c.res && c.act.none()) return true;
  FERRITE_RETURN_IF_ERROR(be.lib->bias_act_nchw(y, nullptr, total, p.K, plane, c.act.code(),
                                                c.act.alpha, c.act.beta, c.dt, c.res));
  return true;
}

// f32 [N, C, H, W] depthwise: fe_dwconv_nchw, or conv_general (the direct kernel or cuDNN, and
// the epilogue), whichever ran faster on this problem. The shared-memory kernel wins at serving
// batches (H200, batch 32: EfficientNet-B0 4.447 -> 3.433 ms with the float4 epilogues) but
// loses at batch 1, where its two phases (stage, then compute) cost more than the one-pass
// direct kernel's work (EfficientNet-B0 0.737 -> 0.852 ms, MobileNetV3 0.556 -> 0.651). Timed
// once per problem on its first call outside a CUDA graph capture (calls inside one take
// fe_dwconv_nchw until then), as run_depthwise_nhwc; FERRITE_CUDA_DWCONV=own / =cudnn forces
// fe_dwconv_nchw / the other path here too.
Status run_depthwise_nchw(const Node& node, NativeIO& io, CudaBackend& be, const ConvCall& c,
                          void* y) {
  const ConvParams& p = c.p;
  ConvParams q = p;
  q.act = c.act.code();
  q.lo = c.act.alpha;
  q.hi = c.act.beta;
  auto own = [&]() -> Status {
    return be.lib->dwconv_nchw(io.in[0]->ptr, io.in[1]->ptr, c.bias, c.res, y, q);
  };
  auto other = [&]() -> Status { return conv_general(node, io, be, c, y).status(); };
  std::ostringstream key;
  key << "dwconv_nchw:" << p.N << "," << p.C << "," << p.H << "," << p.W << "," << p.KH << ","
      << p.sh << "," << p.ph << "," << p.pw << "," << c.ph_end << "," << c.pw_end << ","
      << c.act.code() << "," << (c.bias != nullptr) << (c.res != nullptr);
  std::optional<bool> on_other = depthwise_choice(be, key.str());
  // Repeated calls would add a residual that aliases y more than once.
  if (!on_other && c.res != y && !be.capturing()) {
    FERRITE_ASSIGN_OR_RETURN(double t_own, time_stream_calls(be, own, 3));
    FERRITE_ASSIGN_OR_RETURN(double t_other, time_stream_calls(be, other, 3));
    on_other = t_other < t_own;
    if (CudnnConv::logging())
      std::fprintf(stderr, "[conv] cuda: depthwise %s: fe_dwconv_nchw %.1f us, other %.1f us%s\n",
                   key.str().c_str(), t_own * 1e6, t_other * 1e6, *on_other ? ": other" : ": ours");
    be.record_choice(key.str(), *on_other);
  }
  return on_other.value_or(false) ? other() : own();
}

}  // namespace

// Conv and FusedConv: the convolution, then bias + residual + activation in one pass where the
// convolution did not apply them.
Expected<bool> run_conv(const Node& node, NativeIO& io, CudaBackend& be) {
  auto call = read_conv(node, io);
  if (!call) return false;
  const ConvCall& c = *call;
  const ConvParams& p = c.p;
  const std::vector<int64_t> yd = c.last ? std::vector<int64_t>{p.N, p.OH, p.OW, p.K}
                                         : std::vector<int64_t>{p.N, p.K, p.OH, p.OW};
  FERRITE_ASSIGN_OR_RETURN(void* y, io.output(0, c.dt, yd));
  if (c.last && LibraryKernels::dwconv_nhwc_takes(p, c.dt, io.in[0]->ptr, c.res, y)) {
    FERRITE_ASSIGN_OR_RETURN(bool done, run_depthwise_nhwc(node, io, be, c, y));
    if (done) return true;
  }
  if (!c.last && LibraryKernels::dwconv_nchw_takes(p, c.dt) && !nchw_depthwise_off()) {
    FERRITE_RETURN_IF_ERROR(run_depthwise_nchw(node, io, be, c, y));
    return true;
  }
  return conv_general(node, io, be, c, y);
}

namespace {

// The cuDNN problem of the forward convolution whose gradients a ConvTranspose or ConvGradWeight
// node computes: logical x [N, C, H, W], w [K, C/groups, KH, KW], y [N, K, OH, OW], the node's
// window (`win`, pads resolved). Null (with the reason logged under FERRITE_LOG=conv) when cuDNN
// is absent or cannot take it; there is no other GPU path for these ops.
CudnnConv* grad_problem(const Node& node, const NativeIO& io, CudaBackend& be, DType dt,
                        const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                        const std::vector<int64_t>& y, const Window& win, int64_t groups,
                        CudnnConvProblem& q) {
  CudnnConv* dnn = cudnn_enabled() ? be.conv_library() : nullptr;
  if (!dnn) return nullptr;
  ConvParams& p = q.p;
  p.N = x[0], p.C = x[1], p.H = x[2], p.W = x[3];
  p.K = w[0], p.KH = w[2], p.KW = w[3], p.OH = y[2], p.OW = y[3];
  p.sh = win.strides[0], p.sw = win.strides[1], p.ph = win.pads[0], p.pw = win.pads[1];
  p.dh = win.dilations[0], p.dw = win.dilations[1], p.groups = groups;
  q.ph_end = win.pads[2];
  q.pw_end = win.pads[3];
  q.dtype = dt;
  q.tf32 = io.tf32 || be.gemm->tf32();
  std::string why = CudnnConv::unsupported(q);
  if (p.ph < 0 || p.pw < 0) why = "negative pads";
  if (!why.empty()) {
    dnn->note("node " + node.name + ": " + why);
    return nullptr;
  }
  return dnn;
}

}  // namespace

// ConvTranspose, 2-D: cuDNN's backward-data of the convolution it transposes (output [N, C, H, W]
// is that convolution's input), then the bias.
Expected<bool> run_conv_transpose(const Node& node, NativeIO& io, CudaBackend& be) {
  const DType dt = gemm_dtype(io);
  if (dt == DType::kUndefined || !io.in[0] || !io.in[1]) return false;
  const auto& xs = io.in[0]->dims;  // the gradient side: [N, K, OH, OW]
  const auto& ws = io.in[1]->dims;  // [K, C/groups, KH, KW]
  if (xs.size() != 4 || ws.size() != 4) return false;
  const int64_t groups = node.attr_int("group", 1);
  if (groups < 1 || xs[1] != ws[0] || ws[0] % groups) return false;
  auto win = read_window(node, {ws[2], ws[3]});
  if (!win) return false;
  auto out = resolve_transpose(node, *win, {xs[2], xs[3]});
  if (!out) return false;
  const std::vector<int64_t> yd{xs[0], ws[1] * groups, (*out)[0], (*out)[1]};
  const DevView* bias = io.in.size() > 2 && io.in[2] ? &*io.in[2] : nullptr;
  if (bias && product(bias->dims) != yd[1]) return false;
  CudnnConvProblem q;
  CudnnConv* dnn = grad_problem(node, io, be, dt, yd, ws, xs, *win, groups, q);
  if (!dnn) return false;
  FERRITE_ASSIGN_OR_RETURN(void* y, io.output(0, dt, yd));
  FERRITE_ASSIGN_OR_RETURN(bool done,
                           dnn->run_backward_data(q, io.in[1]->ptr, io.in[0]->ptr, y, io.scratch));
  if (!done) return false;
  if (!bias) return true;
  FERRITE_RETURN_IF_ERROR(
      be.lib->bias_act_nchw(y, bias->ptr, product(yd), yd[1], yd[2] * yd[3], 0, 0, 0, dt));
  return true;
}

// ferrite.ConvGradWeight, 2-D: cuDNN's backward-filter.
Expected<bool> run_conv_grad_weight(const Node& node, NativeIO& io, CudaBackend& be) {
  const DType dt = gemm_dtype(io);
  if (dt == DType::kUndefined || !io.in[0] || !io.in[1]) return false;
  const auto& xs = io.in[0]->dims;   // [N, C, H, W]
  const auto& dys = io.in[1]->dims;  // [N, K, OH, OW]
  const auto ks = node.attr_ints("kernel_shape");
  if (xs.size() != 4 || dys.size() != 4 || ks.size() != 2 || xs[0] != dys[0]) return false;
  const int64_t groups = node.attr_int("group", 1);
  if (groups < 1 || xs[1] % groups || dys[1] % groups) return false;
  auto win = read_window(node, ks);
  if (!win) return false;
  auto out = resolve_window(node, *win, {xs[2], xs[3]});
  if (!out || (*out)[0] != dys[2] || (*out)[1] != dys[3]) return false;
  const std::vector<int64_t> wd{dys[1], xs[1] / groups, ks[0], ks[1]};
  CudnnConvProblem q;
  CudnnConv* dnn = grad_problem(node, io, be, dt, xs, wd, dys, *win, groups, q);
  if (!dnn) return false;
  FERRITE_ASSIGN_OR_RETURN(void* dw, io.output(0, dt, wd));
  FERRITE_ASSIGN_OR_RETURN(
      bool done, dnn->run_backward_filter(q, io.in[0]->ptr, io.in[1]->ptr, dw, io.scratch));
  return done;
}

// MaxPool (without the indices output), AveragePool and ferrite.Pool, 2-D.
Expected<bool> run_pool(const Node& node, NativeIO& io, CudaBackend& be) {
  const DType dt = gemm_dtype(io);
  if (dt == DType::kUndefined || !io.in[0]) return false;
  const bool fused = node.domain == "ferrite";
  const bool with_indices = node.output(1) != nullptr;
  const std::string kind = fused ? node.attr_string("mode") : node.op_type;
  PoolMode mode;
  if (kind == "max" || kind == "MaxPool")
    mode = PoolMode::kMax;
  else if (kind == "average" || kind == "AveragePool")
    mode = PoolMode::kAverage;
  else
    return false;
  const bool last = fused && node.attr_int("channels_last", 1) != 0;
  const int64_t storage_order = node.attr_int("storage_order", 0);
  if (with_indices &&
      (mode != PoolMode::kMax || last || (storage_order != 0 && storage_order != 1)))
    return false;
  const auto& xs = io.in[0]->dims;
  if (xs.size() != 4) return false;
  const std::vector<int64_t> xd = last ? std::vector<int64_t>{xs[0], xs[3], xs[1], xs[2]} : xs;
  auto ks = node.attr_ints("kernel_shape");
  if (ks.size() != 2) return false;
  auto win = read_window(node, ks);
  if (!win) return false;
  auto outsp = resolve_window(node, *win, {xd[2], xd[3]});
  if (!outsp) return false;
  PoolParams p{};
  p.planes = xd[0] * xd[1], p.C = xd[1], p.H = xd[2], p.W = xd[3];
  p.OH = (*outsp)[0], p.OW = (*outsp)[1];
  p.KH = ks[0], p.KW = ks[1], p.sh = win->strides[0], p.sw = win->strides[1];
  p.ph = win->pads[0], p.pw = win->pads[1], p.dh = win->dilations[0], p.dw = win->dilations[1];
  const std::vector<int64_t> yd = last ? std::vector<int64_t>{xd[0], p.OH, p.OW, xd[1]}
                                       : std::vector<int64_t>{xd[0], xd[1], p.OH, p.OW};
  FERRITE_ASSIGN_OR_RETURN(void* yv, io.output(0, dt, yd));
  int64_t* indices = nullptr;
  if (with_indices) {
    FERRITE_ASSIGN_OR_RETURN(void* iv, io.output(1, DType::kI64, yd));
    indices = static_cast<int64_t*>(iv);
  }
  const bool include_pad = node.attr_int("count_include_pad", 0) != 0;
  FERRITE_RETURN_IF_ERROR(be.lib->pool2d(io.in[0]->ptr, yv, p, mode, last, include_pad, dt, indices,
                                         storage_order == 1));
  return true;
}

}  // namespace ferrite::cuda
