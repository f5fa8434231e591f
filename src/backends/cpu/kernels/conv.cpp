// Convolution library kernel for the cpu device: ONNX Conv (1-D to 3-D, groups incl. depthwise,
// strides, dilations, explicit or auto pads, bias), f32, on oneDNN's convolution primitive.
// ferrite's tensors are NCHW; oneDNN is asked for its preferred layouts (`any`), so activations
// are reordered in and out around each call and constant weights once.
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

// Layout policy, overridable for experiments: FERRITE_CONV_LAYOUT=plain keeps NCHW activations
// (no reorders; oneDNN may then pick a slower implementation).
bool plain_activations() {
  static const bool plain = [] {
    const char* v = std::getenv("FERRITE_CONV_LAYOUT");
    return v && std::string(v) == "plain";
  }();
  return plain;
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
  if (try_make(plain_activations()) || try_make(!plain_activations())) return plan;
  return nullptr;
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
  ThreadScope threads(pool.size());
  auto plan = conv_cache().get(s.key(), [&] { return make_conv_plan(s); });
  if (!plan) return run_reference(ctx);
  std::vector<memory> keep;
  memory src = operand(x, plan->src_plain, plan->src_want, false, keep);
  memory wei = operand(w, plan->wei_plain, plan->wei_want, s.weights_constant, keep);
  const bool dst_direct = plan->dst_want == plan->dst_plain;
  memory dst = dst_direct ? wrap(plan->dst_plain, *y) : memory(plan->dst_want, engine());
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
