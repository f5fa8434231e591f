// Convolution library kernel for the cpu device: ONNX Conv and ferrite.FusedConv (1-D to 3-D,
// groups incl. depthwise, strides, dilations, explicit or auto pads, bias; FusedConv's residual
// and activation), f32. FusedConv's epilogue runs inside each path: oneDNN post-ops (a sum
// post-op over the residual copied into the destination, then eltwise) for oneDNN's
// convolutions and the pointwise GEMMs, and a pass over each finished plane for the depthwise
// kernel and for post-ops oneDNN only has a reference implementation of.
//   - pointwise (1x1, stride 1, unpadded, one group): a GEMM per image on the NCHW data
//     (run_gemm), no layout changes;
//   - depthwise 2-D: ferrite's own kernel on NCHW planes (below);
//   - everything else: oneDNN's convolution in its preferred layouts (`any`), with activations
//     reordered in and out around each call and constant weights reordered once.
// FusedConv {channels_last} (2-D): activations stored [N, H, W, C] (the layout-channels-last
// pass): pointwise convolutions are one GEMM over all pixels, the others (depthwise included)
// oneDNN's convolutions reading and writing the tensors in place, with no reorders.
// Work is spread over ferrite's thread pool as single-threaded oneDNN calls on groups of images
// or, when there are fewer images than threads, on bands of output rows of one image (each band
// reads the input rows it needs, its halo included).
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/kernels/onednn_common.h"
#include "backends/cpu/kernels/onednn_gemm.h"
#include "ops/conv_util.h"

namespace ferrite {

namespace {

using namespace onednn;

// One oneDNN convolution call: images [n] x rows [h] of the input, as views into the NCHW
// tensors (strides of the whole tensors), with the band's own pads.
struct ConvSpec {
  Dims src, src_strides, wei, dst, dst_strides, strides, dilates, pad_l, pad_r;
  bool bias = false;
  bool weights_constant = false;
  bool residual = false;       // FusedConv's epilogue, as post-ops when oneDNN has them
  bool channels_last = false;  // src/dst strides are NHWC: oneDNN reads and writes them as such
  Activation act;

  std::string key() const {
    Key k;
    k.add(src).add(src_strides).add(wei).add(dst).add(dst_strides).add(strides).add(dilates);
    k.add(pad_l).add(pad_r).add(bias).add(weights_constant).add(residual).add(channels_last);
    k.add(static_cast<int64_t>(act.code()));
    for (float f : {act.alpha, act.beta}) {
      int32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      k.add(bits);
    }
    return k.str();
  }
};

struct ConvPlan {
  dnnl::convolution_forward prim;
  memory::desc src_view, src_want, wei_plain, wei_want, bias, dst_view, dst_want, scratchpad;
  bool post_ops = false;  // the epilogue runs inside the primitive (else after it)
};

// The post-ops for the spec's epilogue: the residual as a sum into the destination (which must
// hold it before the call), then the activation. Null when there is nothing to fuse or oneDNN
// does not compute the activation as defined.
std::optional<dnnl::primitive_attr> epilogue_attr(const ConvSpec& s) {
  if ((!s.residual && s.act.none()) || !can_fuse_activation(s.act)) return std::nullopt;
  dnnl::post_ops po;
  if (s.residual) po.append_sum(1.0f);
  append_activation(po, s.act);
  dnnl::primitive_attr attr = base_attr();
  attr.set_post_ops(po);
  return attr;
}

Cache<ConvPlan>& conv_cache() {
  static Cache<ConvPlan> cache;
  return cache;
}

bool winograd_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("FERRITE_CPU_WINOGRAD");
    return v && std::string(v) == "1";
  }();
  return on;
}

std::shared_ptr<const ConvPlan> make_conv_plan(const ConvSpec& s, const dnnl::primitive_attr& attr);

std::shared_ptr<const ConvPlan> make_conv_plan(const ConvSpec& s) {
  if (auto attr = epilogue_attr(s)) {
    auto plan = make_conv_plan(s, *attr);
    if (plan) return plan;
  }
  return make_conv_plan(s, base_attr());
}

std::shared_ptr<const ConvPlan> make_conv_plan(const ConvSpec& s,
                                               const dnnl::primitive_attr& attr) {
  auto plan = std::make_shared<ConvPlan>();
  plan->post_ops = attr.get_post_ops().len() > 0;
  plan->src_view = strided_desc(s.src, s.src_strides);
  plan->dst_view = strided_desc(s.dst, s.dst_strides);
  plan->wei_plain = plain_desc(s.wei);
  if (s.bias) plan->bias = plain_desc({s.dst[1]});
  const auto any = memory::format_tag::any;
  const auto f32 = memory::data_type::f32;
  const memory::desc wei = s.weights_constant ? memory::desc(s.wei, f32, any) : plan->wei_plain;
  // The plan runs the primitive `pd` describes, in the layouts it asks for.
  auto take = [&](const dnnl::convolution_forward::primitive_desc& pd) {
    plan->src_want = pd.src_desc();
    plan->wei_want = pd.weights_desc();
    plan->dst_want = pd.dst_desc();
    plan->scratchpad = pd.scratchpad_desc();
    plan->prim = dnnl::convolution_forward(pd);
    return plan;
  };
  // First choice: NCHW input, which oneDNN's direct JIT kernels read for few input channels
  // (the first layer of CNNs) and which saves the input reorder. Taken only when oneDNN runs it
  // with such a kernel, not its im2col GEMM; else its preferred layout for both.
  if (winograd_enabled()) {
    // Opt-in: 3x3 stride-1 convolutions through Winograd F(4x4, 3x3), about twice as fast and
    // less accurate (errors around 1e-5 relative instead of 1e-7).
    try {
      dnnl::convolution_forward::desc d(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_winograd,
          memory::desc(s.src, f32, any), wei, plan->bias, memory::desc(s.dst, f32, any), s.strides,
          s.dilates, s.pad_l, s.pad_r);
      dnnl::convolution_forward::primitive_desc pd(d, attr, engine());
      return take(pd);
    } catch (const dnnl::error&) {
    }
  }
  if (s.channels_last) {
    // Channels-last activations as they are (oneDNN's brgemm and depthwise kernels read NHWC):
    // no reorder in or out. Else the general choice below, with reorders.
    try {
      dnnl::convolution_forward::desc d(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, plan->src_view,
          wei, plan->bias, plan->dst_view, s.strides, s.dilates, s.pad_l, s.pad_r);
      dnnl::convolution_forward::primitive_desc pd(d, attr, engine());
      if (!is_reference_impl(pd) &&
          std::string(pd.impl_info_str()).find("gemm") == std::string::npos) {
        return take(pd);
      }
    } catch (const dnnl::error&) {
    }
  }
  for (bool plain_src : {true, false}) {
    try {
      dnnl::convolution_forward::desc d(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
          plain_src ? plain_desc(s.src) : memory::desc(s.src, f32, any), wei, plan->bias,
          memory::desc(s.dst, f32, any), s.strides, s.dilates, s.pad_l, s.pad_r);
      dnnl::convolution_forward::primitive_desc pd(d, attr, engine());
      const std::string impl = pd.impl_info_str();
      if (is_reference_impl(pd) || (plain_src && impl.find("gemm") != std::string::npos)) continue;
      return take(pd);
    } catch (const dnnl::error&) {
    }
  }
  return nullptr;
}

// Depthwise 2-D convolution (one filter per channel) directly on NCHW planes: oneDNN's depthwise
// kernels want channel-blocked or NHWC activations, and the reorders around them cost more than
// the convolution itself. For the common shapes (3x3 or 5x5, stride 1 or 2, no dilation) the
// kernel size and stride are compile-time constants: the taps unroll and stay in registers, and
// the loop over a row's interior outputs (window inside the row) vectorises; rows above or below
// the input read a zero row, and the few border columns test bounds per tap. Other shapes copy
// each plane into a zero-padded buffer first.
struct DwGeometry {
  int64_t H, W, OH, OW, KH, KW, sh, sw, dh, dw, pt, pl;
  int64_t PH() const { return (OH - 1) * sh + (KH - 1) * dh + 1; }
  int64_t PW() const { return (OW - 1) * sw + (KW - 1) * dw + 1; }
};

// 16 floats as one vector (one AVX-512 register, two AVX ones, four SSE ones).
typedef float v16 __attribute__((vector_size(64)));

// 16 adjacent outputs of one row; r[kh] points at the input column of the block's first output
// (kw = 0) in input row kh. Vectors stay local (never passed or returned), so the functions'
// ABI does not depend on the vector extensions of each target clone.
template <int K, int S>
inline void dw_block16(const float* const* r, const float* w, float bias, float* out) {
  static_assert(S == 1 || S == 2);
  v16 acc = bias + v16{};
  for (int kh = 0; kh < K; ++kh)
    for (int kw = 0; kw < K; ++kw) {
      const float* p = r[kh] + kw;
      v16 x;
      if constexpr (S == 1) {
        __builtin_memcpy(&x, p, sizeof x);
      } else {
        // p[0], p[2], ..., p[30]: two loads, reading nothing past p[30].
        v16 lo, hi;
        __builtin_memcpy(&lo, p, sizeof lo);
        __builtin_memcpy(&hi, p + 15, sizeof hi);
        x = __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14, 17, 19, 21, 23, 25, 27, 29,
                                    31);
      }
      acc += w[kh * K + kw] * x;
    }
  __builtin_memcpy(out, &acc, sizeof acc);
}

// The bodies of the kernels below are templates inlined into one non-template function per
// (K, S), which is what is cloned per instruction set: clang multiversions only non-template
// functions.
template <int K, int S>
[[gnu::always_inline]] inline void dw_fixed_body(const float* __restrict in,
                                                 const float* __restrict wt, float bias,
                                                 float* __restrict out, const DwGeometry& g,
                                                 const float* __restrict zeros) {
  float w[K * K];
  for (int t = 0; t < K * K; ++t) w[t] = wt[t];
  const int64_t W = g.W, pl = g.pl, OW = g.OW;
  // Interior columns: ow * S - pl >= 0 and ow * S - pl + K <= W.
  const int64_t ow0 = std::min(OW, (pl + S - 1) / S);
  const int64_t ow1 = std::max(ow0, std::min(OW, W + pl - K < 0 ? 0 : (W + pl - K) / S + 1));
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const float* r[K];
    for (int kh = 0; kh < K; ++kh) {
      const int64_t ih = oh * S - g.pt + kh;
      r[kh] = ih >= 0 && ih < g.H ? in + ih * W : zeros;
    }
    float* o = out + oh * OW;
    auto at = [&](int64_t ow, const float** rb) {
      for (int kh = 0; kh < K; ++kh) rb[kh] = r[kh] + ow * S - pl;
    };
    int64_t ow = ow0;
    if (ow1 - ow0 >= 16) {
      const float* rb[K];
      for (; ow + 16 <= ow1; ow += 16) {
        at(ow, rb);
        dw_block16<K, S>(rb, w, bias, o + ow);
      }
      if (ow < ow1) {  // last block overlaps the previous one; it rewrites the same values
        at(ow1 - 16, rb);
        dw_block16<K, S>(rb, w, bias, o + ow1 - 16);
      }
      ow = ow1;
    }
    for (; ow < ow1; ++ow) {
      float acc = bias;
      for (int kh = 0; kh < K; ++kh)
        for (int kw = 0; kw < K; ++kw) acc += w[kh * K + kw] * r[kh][ow * S + kw - pl];
      o[ow] = acc;
    }
    auto border = [&](int64_t ow) {
      float acc = bias;
      for (int kh = 0; kh < K; ++kh)
        for (int kw = 0; kw < K; ++kw) {
          const int64_t iw = ow * S + kw - pl;
          if (iw >= 0 && iw < W) acc += w[kh * K + kw] * r[kh][iw];
        }
      o[ow] = acc;
    };
    for (int64_t c = 0; c < ow0; ++c) border(c);
    for (int64_t c = ow1; c < OW; ++c) border(c);
  }
}

// Narrow planes (fewer than 16 interior outputs per row): every row in 16-wide blocks over a
// copy of the plane padded with zeros, wide enough for the last block.
template <int K, int S>
[[gnu::always_inline]] inline void dw_fixed_padded_body(const float* __restrict in,
                                                        const float* __restrict wt, float bias,
                                                        float* __restrict out, const DwGeometry& g,
                                                        std::vector<float>& buf) {
  float w[K * K];
  for (int t = 0; t < K * K; ++t) w[t] = wt[t];
  const int64_t blocks = (g.OW + 15) / 16;
  const int64_t pw = (blocks * 16 - 1) * S + K, ph = (g.OH - 1) * S + K;
  if (buf.size() < static_cast<size_t>(ph * pw)) buf.resize(static_cast<size_t>(ph * pw));
  float* P = buf.data();
  for (int64_t y = 0; y < ph; ++y) {
    float* row = P + y * pw;
    std::fill(row, row + pw, 0.0f);
    const int64_t ih = y - g.pt;
    if (ih < 0 || ih >= g.H) continue;
    const int64_t x0 = std::min(pw, g.pl), x1 = std::max(x0, std::min(pw, g.W + g.pl));
    std::copy(in + ih * g.W, in + ih * g.W + (x1 - x0), row + x0);
  }
  float tmp[16];
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* rb[K];
      for (int kh = 0; kh < K; ++kh) rb[kh] = P + (oh * S + kh) * pw + b * 16 * S;
      dw_block16<K, S>(rb, w, bias, tmp);
      const int64_t n = std::min<int64_t>(16, g.OW - b * 16);
      std::copy(tmp, tmp + n, out + oh * g.OW + b * 16);
    }
  }
}

#define FERRITE_DW_CLONES(K, S)                                                                  \
  FERRITE_TARGET_CLONES void dw_fixed_##K##_##S(                                                 \
      const float* __restrict in, const float* __restrict wt, float bias, float* __restrict out, \
      const DwGeometry& g, const float* __restrict zeros) {                                      \
    dw_fixed_body<K, S>(in, wt, bias, out, g, zeros);                                            \
  }                                                                                              \
  FERRITE_TARGET_CLONES void dw_fixed_padded_##K##_##S(                                          \
      const float* __restrict in, const float* __restrict wt, float bias, float* __restrict out, \
      const DwGeometry& g, std::vector<float>& buf) {                                            \
    dw_fixed_padded_body<K, S>(in, wt, bias, out, g, buf);                                       \
  }
FERRITE_DW_CLONES(3, 1)
FERRITE_DW_CLONES(3, 2)
FERRITE_DW_CLONES(5, 1)
FERRITE_DW_CLONES(5, 2)
#undef FERRITE_DW_CLONES

// Any kernel size, stride and dilation, over the zero-padded plane P (row length pw).
void dw_generic(const float* P, int64_t pw, const float* wt, float bias, float* out,
                const DwGeometry& g) {
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    float* o = out + oh * g.OW;
    for (int64_t ow = 0; ow < g.OW; ++ow) o[ow] = bias;
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const float wv = wt[kh * g.KW + kw];
        const float* r = P + (oh * g.sh + kh * g.dh) * pw + kw * g.dw;
        for (int64_t ow = 0; ow < g.OW; ++ow) o[ow] += wv * r[ow * g.sw];
      }
  }
}

void depthwise_plane(const float* in, const float* wt, float bias, float* out, const DwGeometry& g,
                     std::vector<float>& buf) {
  const bool square = g.dh == 1 && g.dw == 1 && g.KH == g.KW && g.sh == g.sw;
  if (square && (g.KH == 3 || g.KH == 5) && (g.sh == 1 || g.sh == 2)) {
    // Only ever holds zeros (the generic path's padded plane is another buffer).
    thread_local std::vector<float> zero_row;
    if (zero_row.size() < static_cast<size_t>(g.W)) zero_row.assign(static_cast<size_t>(g.W), 0.0f);
    const float* zeros = zero_row.data();
    const int64_t interior =
        g.W + g.pl - g.KH < 0 ? 0 : (g.W + g.pl - g.KH) / g.sw + 1 - (g.pl + g.sw - 1) / g.sw;
    if (interior < 16) {
      if (g.KH == 3 && g.sh == 1) return dw_fixed_padded_3_1(in, wt, bias, out, g, buf);
      if (g.KH == 3 && g.sh == 2) return dw_fixed_padded_3_2(in, wt, bias, out, g, buf);
      if (g.KH == 5 && g.sh == 1) return dw_fixed_padded_5_1(in, wt, bias, out, g, buf);
      return dw_fixed_padded_5_2(in, wt, bias, out, g, buf);
    }
    if (g.KH == 3 && g.sh == 1) return dw_fixed_3_1(in, wt, bias, out, g, zeros);
    if (g.KH == 3 && g.sh == 2) return dw_fixed_3_2(in, wt, bias, out, g, zeros);
    if (g.KH == 5 && g.sh == 1) return dw_fixed_5_1(in, wt, bias, out, g, zeros);
    return dw_fixed_5_2(in, wt, bias, out, g, zeros);
  }
  const int64_t ph = g.PH(), pw = g.PW();
  if (buf.size() < static_cast<size_t>(ph * pw)) buf.resize(static_cast<size_t>(ph * pw));
  // Input columns that land inside the padded row (the end padding may cut some off).
  const int64_t x0 = std::min(pw, g.pl), x1 = std::max(x0, std::min(pw, g.W + g.pl));
  for (int64_t y = 0; y < ph; ++y) {
    float* row = buf.data() + y * pw;
    const int64_t ih = y - g.pt;
    if (ih < 0 || ih >= g.H) {
      std::fill(row, row + pw, 0.0f);
      continue;
    }
    std::fill(row, row + x0, 0.0f);
    std::copy(in + ih * g.W, in + ih * g.W + (x1 - x0), row + x0);
    std::fill(row + x1, row + pw, 0.0f);
  }
  dw_generic(buf.data(), pw, wt, bias, out, g);
}

void depthwise_run(const Tensor& x, const Tensor& w, const Tensor* bias, const Window& win,
                   const std::vector<int64_t>& out, Tensor& y, const float* res,
                   const Activation& act, ThreadPool& pool) {
  DwGeometry g{x.dim(2),         x.dim(3),         out[2],           out[3],
               w.dim(2),         w.dim(3),         win.strides[0],   win.strides[1],
               win.dilations[0], win.dilations[1], win.pad_begin(0), win.pad_begin(1)};
  const int64_t C = x.dim(1), planes = x.dim(0) * C;
  const float* px = x.data<float>();
  const float* pw = w.data<float>();
  const float* pb = bias ? bias->data<float>() : nullptr;
  float* py = y.data<float>();
  const int64_t work = std::max<int64_t>(1, g.OH * g.OW * g.KH * g.KW);
  pool.parallel_for(planes, std::max<int64_t>(1, 32768 / work), [&](int64_t p0, int64_t p1) {
    thread_local std::vector<float> buf;
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t c = p % C;
      float* plane = py + p * g.OH * g.OW;
      depthwise_plane(px + p * g.H * g.W, pw + c * g.KH * g.KW, pb ? pb[c] : 0.0f, plane, g, buf);
      // While the plane is still in cache.
      if (res || !act.none())
        apply_epilogue(plane, res ? res + p * g.OH * g.OW : nullptr, g.OH * g.OW, act);
    }
  });
}

bool conv_accepts(const Node& node) {
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (node.input(i) && !input_is_f32(node, i)) return false;
  if (node.op_type == "FusedConv" && !activation_of(node)) return false;
  // [M, KH, KW, C/group] weights are cuda's channels-last filter layout (layout-channels-last
  // {weights=last}); cpu's own pipeline keeps [M, C/group, KH, KW], so the op table's kernel
  // runs what another device's pipeline made.
  if (node.attr_int("weights_last", 0) != 0) return false;
  const Value* x = node.input(0);
  // 1-D to 3-D convolutions (oneDNN's range); unknown rank is decided at run time.
  return !x->type.shape.rank_known() || (x->type.shape.rank() >= 3 && x->type.shape.rank() <= 5);
}

// A unit of work: images [n0, n1) and output rows (first spatial dim) [o0, o1).
struct ConvTask {
  int64_t n0, n1, o0, o1;
  const ConvPlan* plan;
  int64_t in_row0;  // first input row the band reads
};

// Plans every task, or returns false when oneDNN rejects one of the shapes.
// Dense strides of logical [N, C, spatial...] dims `d`, or NHWC ones (channels_last, 2-D).
Dims layout_strides(const Dims& d, bool channels_last) {
  if (channels_last) return {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]};
  Dims st(d.size(), 1);
  for (size_t i = d.size() - 1; i-- > 0;) st[i] = st[i + 1] * d[i + 1];
  return st;
}

// Elements one image of logical dims `d` with `strides` spans (the largest extent of dims 1..).
int64_t image_span(const Dims& d, const Dims& strides) {
  int64_t span = 1;
  for (size_t i = 1; i < d.size(); ++i) span = std::max(span, strides[i] * d[i]);
  return span;
}

// xd: the input's logical [N, C, spatial...] dims (its storage NCHW or, channels_last, NHWC).
bool plan_tasks(const Dims& xd, bool channels_last, const Tensor& w, const Window& win,
                const std::vector<int64_t>& out, int64_t group, bool bias, bool weights_constant,
                bool residual, const Activation& act, int64_t images_per_task, int64_t bands,
                std::vector<ConvTask>& tasks, std::vector<std::shared_ptr<const ConvPlan>>& keep) {
  const size_t nsp = xd.size() - 2;
  const int64_t N = xd[0], H = xd[2], OH = out[2];
  const int64_t s0 = win.strides[0], ext0 = win.extent(0), pt = win.pad_begin(0);
  const Dims x_strides = layout_strides(xd, channels_last);
  const Dims y_strides = layout_strides(out, channels_last);
  tasks.clear();
  for (int64_t n0 = 0; n0 < N; n0 += images_per_task)
    for (int64_t j = 0; j < bands; ++j) {
      ConvTask t;
      t.n0 = n0;
      t.n1 = std::min(N, n0 + images_per_task);
      t.o0 = OH * j / bands;
      t.o1 = OH * (j + 1) / bands;
      const int64_t lo = t.o0 * s0 - pt, hi = (t.o1 - 1) * s0 - pt + ext0;
      const int64_t ih0 = std::max<int64_t>(0, lo), ih1 = std::min(H, hi);
      if (ih1 <= ih0) return false;  // a band entirely in the padding
      t.in_row0 = ih0;
      ConvSpec s;
      s.channels_last = channels_last;
      s.src = xd;
      s.src[0] = t.n1 - t.n0;
      s.src[2] = ih1 - ih0;
      s.src_strides = x_strides;
      s.dst = out;
      s.dst[0] = t.n1 - t.n0;
      s.dst[2] = t.o1 - t.o0;
      s.dst_strides = y_strides;
      // One image per call: its batch stride is never stepped. It is set to the image's span in
      // this view, so that an NHWC band is the dense `acdb` layout: oneDNN matches layouts by
      // every stride, and its NHWC brgemm convolutions (grouped, first layers) take only `acdb`;
      // with the whole tensor's batch stride they fell back to blocked layouts with reorders.
      if (t.n1 - t.n0 == 1) {
        s.src_strides[0] = image_span(s.src, s.src_strides);
        s.dst_strides[0] = image_span(s.dst, s.dst_strides);
      }
      if (group == 1) {
        s.wei = w.dims();
      } else {
        s.wei = {group, w.dim(0) / group};
        s.wei.insert(s.wei.end(), w.dims().begin() + 1, w.dims().end());
      }
      for (size_t d = 0; d < nsp; ++d) {
        s.strides.push_back(win.strides[d]);
        s.dilates.push_back(win.dilations[d] - 1);
        s.pad_l.push_back(d == 0 ? ih0 - lo : win.pad_begin(d));
        s.pad_r.push_back(d == 0 ? hi - ih1 : win.pad_end(d));
      }
      s.bias = bias;
      s.weights_constant = weights_constant;
      s.residual = residual;
      s.act = act;
      auto plan = conv_cache().get(s.key(), [&] { return make_conv_plan(s); });
      if (!plan) return false;
      keep.push_back(plan);
      t.plan = plan.get();
      tasks.push_back(t);
    }
  return true;
}

// A 1x1 convolution with unit strides and no padding as a GEMM (false: the GEMM declined):
// channels-last, one GEMM over every pixel of every image; NCHW, one per image.
bool pointwise_conv(const Node& node, const Tensor& x, const Tensor& w, const Tensor* bias,
                    bool last, int64_t n, int64_t c, int64_t m, const std::vector<int64_t>& in,
                    Tensor& y, const float* pres, const Activation& act, ThreadPool& pool) {
  GemmProblem p;
  if (last) {
    // One GEMM over every pixel of every image: y [NHW, M] = x [NHW, C] @ W^T + bias.
    p.M = n * product(in);
    p.K = c;
    p.N = m;
    p.a = x.data<float>();
    p.a_rs = c;
    p.b = w.data<float>();
    p.b_rs = 1;
    p.b_cs = c;
    if (is_constant_input(node, 1, w)) p.b_constant = &w;
    if (bias) p.col_bias = bias->data<float>();
  } else {
    // Per image: y[n] = W [M, C] @ x[n] [C, spatial] + bias per row.
    p.M = m;
    p.K = c;
    p.N = product(in);
    p.a = w.data<float>();
    p.a_rs = c;
    p.b = x.data<float>();
    p.b_rs = p.N;
    p.b_off.resize(n);
    p.a_off.assign(n, 0);
    for (int64_t i = 0; i < n; ++i) p.b_off[i] = i * c * p.N;
    if (bias) p.row_bias = bias->data<float>();
  }
  p.y = y.data<float>();
  p.act = act;
  p.res = pres;
  p.res_full = true;
  p.res_first = true;
  return run_gemm(p, pool);
}

Status conv_run(KernelContext& ctx, ThreadPool& pool) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const Node& node = ctx.node();
  // FusedConv: y = act(conv + res).
  Activation act;
  const Tensor* res = nullptr;
  if (node.op_type == "FusedConv") {
    auto a = activation_of(node);
    if (!a) return run_reference(ctx);
    act = *a;
    if (ctx.num_inputs() > 3 && ctx.has_input(3)) res = &ctx.input(3);
  }
  // Anything unusual (including every error case) goes to the reference kernel, which reports it.
  if (x.dtype() != DType::kF32 || w.dtype() != DType::kF32 || x.rank() < 3 || x.rank() > 5 ||
      w.rank() != x.rank() || (bias && (bias->dtype() != DType::kF32 || bias->rank() != 1)) ||
      (res && res->dtype() != DType::kF32))
    return run_reference(ctx);
  // channels_last (FusedConv, 2-D): x, res and y are stored [N, H, W, C]; below, `xd` and `out`
  // are the logical [N, C, H, W] dims and the strides say how they are stored.
  const bool last = node.attr_int("channels_last", 0) != 0;
  if (last && x.rank() != 4) return run_reference(ctx);
  const Dims xd = last ? Dims{x.dim(0), x.dim(3), x.dim(1), x.dim(2)} : x.dims();
  const int64_t group = node.attr_int("group", 1);
  const int64_t n = xd[0], c = xd[1], m = w.dim(0);
  if (group < 1 || c % group != 0 || m % group != 0 || w.dim(1) * group != c ||
      (bias && bias->dim(0) != m))
    return run_reference(ctx);
  const size_t nsp = xd.size() - 2;
  std::vector<int64_t> kernel(w.dims().begin() + 2, w.dims().end());
  std::vector<int64_t> attr = node.attr_ints("kernel_shape");
  if (!attr.empty() && attr != kernel) return run_reference(ctx);
  auto win = read_window(node, kernel);
  if (!win) return run_reference(ctx);
  std::vector<int64_t> in(xd.begin() + 2, xd.end());
  auto out_sp = resolve_window(node, *win, in);
  if (!out_sp) return run_reference(ctx);
  std::vector<int64_t> out{n, m};
  out.insert(out.end(), out_sp->begin(), out_sp->end());
  for (int64_t d : out)
    if (d == 0) return run_reference(ctx);
  for (int64_t d : xd)
    if (d == 0) return run_reference(ctx);
  const Dims y_dims = last ? Dims{n, out[2], out[3], m} : Dims(out);
  if (res && res->dims() != y_dims) return run_reference(ctx);
  const float* pres = res ? res->data<float>() : nullptr;
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output_uninitialized(0, DType::kF32, y_dims));

  // Depthwise (channel multiplier 1), 2-D, NCHW: ferrite's own kernel (oneDNN's depthwise
  // kernels take channels-last data, below).
  if (!last && nsp == 2 && group == c && m == c && group > 1) {
    depthwise_run(x, w, bias, *win, out, *y, pres, act, pool);
    return Status::ok();
  }
  bool pointwise = group == 1;
  for (size_t d = 0; d < nsp; ++d)
    pointwise = pointwise && kernel[d] == 1 && win->strides[d] == 1 && win->pad_begin(d) == 0 &&
                win->pad_end(d) == 0;
  if (pointwise) {
    if (pointwise_conv(node, x, w, bias, last, n, c, m, in, *y, pres, act, pool))
      return Status::ok();
    return run_reference(ctx);
  }

  ThreadScope single(1);
  const bool weights_constant = is_constant_input(node, 1, w);
  const int64_t T = pool.size();
  // Whole images per task when they divide evenly over the threads; else bands of rows.
  int64_t per_task = n, bands = 1;
  if (n % T == 0) {
    per_task = n / T;
  } else {
    per_task = 1;
    bands = std::min<int64_t>(out[2], n < T ? (T + n - 1) / n : T);
  }
  std::vector<ConvTask> tasks;
  std::vector<std::shared_ptr<const ConvPlan>> keep;
  if (!plan_tasks(xd, last, w, *win, out, group, bias != nullptr, weights_constant, res != nullptr,
                  act, per_task, bands, tasks, keep) &&
      !plan_tasks(xd, last, w, *win, out, group, bias != nullptr, weights_constant, res != nullptr,
                  act, n, 1, tasks, keep))
    return run_reference(ctx);
  // Constant weights reordered once (cached), before the threads need them.
  std::vector<memory> wmem(tasks.size());
  if (weights_constant)
    for (size_t i = 0; i < tasks.size(); ++i)
      wmem[i] = operand(&w, w.raw(), tasks[i].plan->wei_plain, tasks[i].plan->wei_want, 1);
  const int64_t x_image = product(xd) / n, y_image = product(out) / n;
  // Elements from one row (first spatial dim) to the next: within a plane (NCHW), or whole
  // rows of pixels (NHWC).
  const int64_t x_row = product(in) / in[0] * (last ? c : 1);
  const int64_t y_row = product(*out_sp) / out[2] * (last ? m : 1);
  const float* px = x.data<float>();
  float* py = y->data<float>();
  pool.parallel_for(static_cast<int64_t>(tasks.size()), 1, [&](int64_t t0, int64_t t1) {
    ThreadScope one(1);
    for (int64_t ti = t0; ti < t1; ++ti) {
      const ConvTask& t = tasks[ti];
      const ConvPlan& plan = *t.plan;
      memory src = operand(nullptr, px + t.n0 * x_image + t.in_row0 * x_row, plan.src_view,
                           plan.src_want, 0);
      memory wei =
          weights_constant ? wmem[ti] : operand(nullptr, w.raw(), plan.wei_plain, plan.wei_want, 1);
      const int64_t band = t.n0 * y_image + t.o0 * y_row;
      float* yv = py + band;
      const bool direct = plan.dst_want == plan.dst_view;
      memory dst = direct ? wrap(plan.dst_view, yv) : scratch(plan.dst_want, 2);
      // The sum post-op adds to what the destination holds.
      if (plan.post_ops && res) reorder(wrap(plan.dst_view, pres + band), dst);
      std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
      if (bias) args.emplace(DNNL_ARG_BIAS, wrap(plan.bias, bias->raw()));
      execute(plan.prim, plan.scratchpad, std::move(args));
      if (!direct) reorder(dst, wrap(plan.dst_view, yv));
      if (!plan.post_ops && (res || !act.none())) {
        // Contiguous runs of the band: per (image, channel) plane (NCHW), per image (NHWC).
        const int64_t len = (t.o1 - t.o0) * y_row;
        const int64_t runs = (t.n1 - t.n0) * (last ? 1 : m);
        const int64_t step = last ? y_image : y_image / m;
        for (int64_t q = 0; q < runs; ++q) {
          const int64_t off = q * step;
          apply_epilogue(yv + off, res ? pres + band + off : nullptr, len, act);
        }
      }
    }
  });
  return Status::ok();
}

}  // namespace

void register_cpu_conv_kernels(CpuKernelRegistry& r) {
  r.add("", "Conv", {conv_accepts, conv_run});
  r.add("ferrite", "FusedConv", {conv_accepts, conv_run});
}

}  // namespace ferrite
