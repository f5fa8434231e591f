// Convolution library kernel for the cpu device: ONNX Conv (1-D to 3-D, groups incl. depthwise,
// strides, dilations, explicit or auto pads, bias), f32, on oneDNN's convolution primitive.
// ferrite's tensors are NCHW; oneDNN is asked for its preferred layouts (`any`), so activations
// are reordered in and out around each call and constant weights once.
#include <algorithm>
#include <cstdlib>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/kernels/onednn_common.h"
#include "ops/conv_util.h"

namespace ferrite {

namespace {

using namespace onednn;

struct ConvSpec {
  Dims src, wei, dst, strides, dilates, pad_l, pad_r;  // oneDNN's conventions (dilation - 1)
  bool bias = false;
  bool weights_constant = false;

  std::string key() const {
    Key k;
    k.add(src).add(wei).add(dst).add(strides).add(dilates).add(pad_l).add(pad_r);
    k.add(bias).add(weights_constant).add(current_threads());
    return k.str();
  }
};

struct ConvPlan {
  dnnl::convolution_forward prim;
  memory::desc src_plain, src_want, wei_plain, wei_want, bias, dst_plain, dst_want;
};

Cache<ConvPlan>& conv_cache() {
  static Cache<ConvPlan> cache;
  return cache;
}

// Whether to run on ferrite's NCHW activations directly rather than in oneDNN's preferred
// layout. Pointwise (1x1, stride 1, unpadded) convolutions are plain GEMMs, which oneDNN runs as
// fast on NCHW; for the others the blocked implementations win by more than the two reorders
// cost. FERRITE_CONV_LAYOUT=plain|blocked overrides this (for experiments).
bool force_onednn() {
  static const bool v = [] {
    const char* e = std::getenv("FERRITE_CONV_LAYOUT");
    return e && e[0] != 0;
  }();
  return v;
}

bool prefer_plain(const ConvSpec& s) {
  static const std::string force = [] {
    const char* v = std::getenv("FERRITE_CONV_LAYOUT");
    return std::string(v ? v : "");
  }();
  if (force == "plain") return true;
  if (force == "blocked") return false;
  bool pointwise = s.wei.size() == s.src.size();  // no group dim
  for (size_t d = 2; d < s.src.size(); ++d)
    pointwise = pointwise && s.wei[d] == 1 && s.strides[d - 2] == 1 && s.pad_l[d - 2] == 0 &&
                s.pad_r[d - 2] == 0;
  return pointwise;
}

std::shared_ptr<const ConvPlan> make_conv_plan(const ConvSpec& s) {
  auto plan = std::make_shared<ConvPlan>();
  plan->src_plain = plain_desc(s.src);
  plan->wei_plain = plain_desc(s.wei);
  plan->dst_plain = plain_desc(s.dst);
  if (s.bias) plan->bias = plain_desc({s.dst[1]});
  const auto any = memory::format_tag::any;
  const auto f32 = memory::data_type::f32;
  auto try_make = [&](bool plain_act) -> bool {
    try {
      memory::desc src = plain_act ? plan->src_plain : memory::desc(s.src, f32, any);
      memory::desc dst = plain_act ? plan->dst_plain : memory::desc(s.dst, f32, any);
      memory::desc wei = s.weights_constant ? memory::desc(s.wei, f32, any) : plan->wei_plain;
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::convolution_direct, src, wei, plan->bias,
                                        dst, s.strides, s.dilates, s.pad_l, s.pad_r);
      dnnl::convolution_forward::primitive_desc pd(d, engine());
      if (is_reference_impl(pd)) return false;
      plan->src_want = pd.src_desc();
      plan->wei_want = pd.weights_desc();
      plan->dst_want = pd.dst_desc();
      plan->prim = dnnl::convolution_forward(pd);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  };
  if (try_make(prefer_plain(s)) || try_make(!prefer_plain(s))) return plan;
  return nullptr;
}

// Depthwise 2-D convolution (one filter per channel) directly on NCHW planes: oneDNN's depthwise
// kernels want channel-blocked or NHWC activations, and the reorders around them cost more than
// the convolution itself. Each plane is copied into a zero-padded buffer, so that every output
// is a fixed sum of taps with no bounds checks; with the kernel size and stride known at compile
// time the taps unroll, stay in registers, and the loop over a row's outputs vectorises.
struct DwGeometry {
  int64_t H, W, OH, OW, KH, KW, sh, sw, dh, dw, pt, pl;
  int64_t PH() const { return (OH - 1) * sh + (KH - 1) * dh + 1; }
  int64_t PW() const { return (OW - 1) * sw + (KW - 1) * dw + 1; }
};

// K x K taps, stride S, dilation 1, over the padded plane P (row length pw).
template <int K, int S>
__attribute__((target_clones("avx512f", "avx2", "default"))) void dw_fixed(
    const float* __restrict P, int64_t pw, const float* __restrict wt, float bias,
    float* __restrict out, int64_t OH, int64_t OW) {
  float w[K * K];
  for (int t = 0; t < K * K; ++t) w[t] = wt[t];
  for (int64_t oh = 0; oh < OH; ++oh) {
    const float* r = P + oh * S * pw;
    float* o = out + oh * OW;
    for (int64_t ow = 0; ow < OW; ++ow) {
      float acc = bias;
      for (int kh = 0; kh < K; ++kh)
        for (int kw = 0; kw < K; ++kw) acc += w[kh * K + kw] * r[kh * pw + ow * S + kw];
      o[ow] = acc;
    }
  }
}

// Any kernel size, stride and dilation.
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
                     std::vector<float>& pad) {
  const int64_t ph = g.PH(), pw = g.PW();
  if (pad.size() < static_cast<size_t>(ph * pw)) pad.resize(static_cast<size_t>(ph * pw));
  // Input columns that land inside the padded row (the end padding may cut some off).
  const int64_t x0 = std::min(pw, g.pl), x1 = std::max(x0, std::min(pw, g.W + g.pl));
  for (int64_t y = 0; y < ph; ++y) {
    float* row = pad.data() + y * pw;
    const int64_t ih = y - g.pt;
    if (ih < 0 || ih >= g.H) {
      std::fill(row, row + pw, 0.0f);
      continue;
    }
    std::fill(row, row + x0, 0.0f);
    std::copy(in + ih * g.W, in + ih * g.W + (x1 - x0), row + x0);
    std::fill(row + x1, row + pw, 0.0f);
  }
  const bool unit_dilation = g.dh == 1 && g.dw == 1 && g.KH == g.KW && g.sh == g.sw;
  if (unit_dilation && g.KH == 3 && g.sh == 1) return dw_fixed<3, 1>(pad.data(), pw, wt, bias, out, g.OH, g.OW);
  if (unit_dilation && g.KH == 3 && g.sh == 2) return dw_fixed<3, 2>(pad.data(), pw, wt, bias, out, g.OH, g.OW);
  if (unit_dilation && g.KH == 5 && g.sh == 1) return dw_fixed<5, 1>(pad.data(), pw, wt, bias, out, g.OH, g.OW);
  if (unit_dilation && g.KH == 5 && g.sh == 2) return dw_fixed<5, 2>(pad.data(), pw, wt, bias, out, g.OH, g.OW);
  dw_generic(pad.data(), pw, wt, bias, out, g);
}

Status depthwise_run(const Tensor& x, const Tensor& w, const Tensor* bias, const ConvSpec& s,
                     Tensor& y, ThreadPool& pool) {
  DwGeometry g{s.src[2], s.src[3], s.dst[2],          s.dst[3],         s.wei[3],
               s.wei[4], s.strides[0], s.strides[1], s.dilates[0] + 1, s.dilates[1] + 1,
               s.pad_l[0], s.pad_l[1]};
  const int64_t C = s.src[1], planes = s.src[0] * C;
  const float* px = x.data<float>();
  const float* pw = w.data<float>();
  const float* pb = bias ? bias->data<float>() : nullptr;
  float* py = y.data<float>();
  const int64_t work = std::max<int64_t>(1, g.OH * g.OW * g.KH * g.KW);
  pool.parallel_for(planes, std::max<int64_t>(1, 32768 / work), [&](int64_t p0, int64_t p1) {
    thread_local std::vector<float> pad;
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t c = p % C;
      depthwise_plane(px + p * g.H * g.W, pw + c * g.KH * g.KW, pb ? pb[c] : 0.0f,
                      py + p * g.OH * g.OW, g, pad);
    }
  });
  return Status::ok();
}

bool conv_accepts(const Node& node) {
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (node.input(i) && !input_is_f32(node, i)) return false;
  const Value* x = node.input(0);
  // 1-D to 3-D convolutions (oneDNN's range); unknown rank is decided at run time.
  return !x->type.shape.rank_known() ||
         (x->type.shape.rank() >= 3 && x->type.shape.rank() <= 5);
}

Status conv_run(KernelContext& ctx, ThreadPool& pool) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const Node& node = ctx.node();
  // Anything unusual (including every error case) goes to the reference kernel, which reports it.
  if (x.dtype() != DType::kF32 || w.dtype() != DType::kF32 || x.rank() < 3 || x.rank() > 5 ||
      w.rank() != x.rank() || (bias && (bias->dtype() != DType::kF32 || bias->rank() != 1)))
    return run_reference(ctx);
  const int64_t group = node.attr_int("group", 1);
  const int64_t n = x.dim(0), c = x.dim(1), m = w.dim(0);
  if (group < 1 || c % group != 0 || m % group != 0 || w.dim(1) * group != c ||
      (bias && bias->dim(0) != m))
    return run_reference(ctx);
  const size_t nsp = x.rank() - 2;
  std::vector<int64_t> kernel(w.dims().begin() + 2, w.dims().end());
  std::vector<int64_t> attr = node.attr_ints("kernel_shape");
  if (!attr.empty() && attr != kernel) return run_reference(ctx);
  auto win = read_window(node, kernel);
  if (!win) return run_reference(ctx);
  std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
  auto out_sp = resolve_window(node, *win, in);
  if (!out_sp) return run_reference(ctx);
  std::vector<int64_t> out{n, m};
  out.insert(out.end(), out_sp->begin(), out_sp->end());
  for (int64_t d : out)
    if (d == 0) return run_reference(ctx);
  for (int64_t d : x.dims())
    if (d == 0) return run_reference(ctx);

  ConvSpec s;
  s.src = x.dims();
  s.dst = out;
  if (group == 1) {
    s.wei = w.dims();
  } else {
    s.wei = {group, m / group};
    s.wei.insert(s.wei.end(), w.dims().begin() + 1, w.dims().end());
  }
  for (size_t d = 0; d < nsp; ++d) {
    s.strides.push_back(win->strides[d]);
    s.dilates.push_back(win->dilations[d] - 1);
    s.pad_l.push_back(win->pad_begin(d));
    s.pad_r.push_back(win->pad_end(d));
  }
  s.bias = bias != nullptr;
  s.weights_constant = is_constant_input(node, 1, w);

  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kF32, out));
  // Depthwise (channel multiplier 1), 2-D: ferrite's own kernel.
  if (nsp == 2 && group == c && m == c && group > 1 && !force_onednn())
    return depthwise_run(x, w, bias, s, *y, pool);
  ThreadScope threads(pool.size());
  auto plan = conv_cache().get(s.key(), [&] { return make_conv_plan(s); });
  if (!plan) return run_reference(ctx);
  memory src = operand(x, plan->src_plain, plan->src_want, false, 0);
  memory wei = operand(w, plan->wei_plain, plan->wei_want, s.weights_constant, 1);
  const bool dst_direct = plan->dst_want == plan->dst_plain;
  memory dst = dst_direct ? wrap(plan->dst_plain, *y) : scratch(plan->dst_want, 2);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
  if (bias) args.emplace(DNNL_ARG_BIAS, wrap(plan->bias, *bias));
  plan->prim.execute(stream(), args);
  stream().wait();
  if (!dst_direct) reorder(dst, wrap(plan->dst_plain, *y));
  return Status::ok();
}

}  // namespace

void register_cpu_conv_kernels(CpuKernelRegistry& r) { r.add("", "Conv", {conv_accepts, conv_run}); }

}  // namespace ferrite
