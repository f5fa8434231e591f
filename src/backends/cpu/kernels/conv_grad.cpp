// Convolution gradients for the cpu device on oneDNN's backward primitives, f32, 1-D to 3-D,
// groups, strides, dilations and pads:
//   - ONNX ConvTranspose (a training graph's input gradient, and transposed convolutions of ONNX
//     models): convolution_backward_data of the convolution it transposes, then the bias;
//   - ferrite.ConvGradWeight (the weight gradient): convolution_backward_weights.
// Work is spread over ferrite's thread pool as single-threaded oneDNN calls on groups of images
// (onednn_common.h says why oneDNN's own threads are not used); the weight gradient sums the
// groups' partial gradients. Activations and weights are reordered into the layouts oneDNN asks
// for around each call. Anything else (other dtypes, negative pads) runs the reference kernels.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/kernels/onednn_common.h"
#include "ops/conv_util.h"

namespace ferrite {

namespace {

using namespace onednn;

enum class Grad { kData, kWeights };

// One oneDNN call: `n` images of the forward convolution x [n, C, in...] -> y [n, K, out...]
// with weights [K, C/g, k...].
struct GradSpec {
  Grad kind = Grad::kData;
  Dims x, w, y, strides, dilates, pad_l, pad_r;
  int64_t groups = 1;

  std::string key() const {
    Key k;
    k.add(static_cast<int64_t>(kind)).add(x).add(w).add(y).add(strides).add(dilates);
    k.add(pad_l).add(pad_r).add(groups);
    return k.str();
  }
  // oneDNN's weight dims: [g, K/g, C/g, k...] for grouped convolutions.
  Dims onednn_w() const {
    if (groups == 1) return w;
    Dims d{groups, w[0] / groups};
    d.insert(d.end(), w.begin() + 1, w.end());
    return d;
  }
};

struct GradPlan {
  dnnl::primitive prim;
  memory::desc x_plain, w_plain, y_plain;  // the tensors as stored (dense, row-major)
  memory::desc x_want, w_want, y_want;     // the layouts the primitive takes
  memory::desc scratchpad;
};

Cache<GradPlan>& grad_cache() {
  static Cache<GradPlan> cache;
  return cache;
}

std::shared_ptr<const GradPlan> make_plan(const GradSpec& s) {
  const auto f32 = memory::data_type::f32;
  const auto any = memory::format_tag::any;
  auto plan = std::make_shared<GradPlan>();
  plan->x_plain = plain_desc(s.x);
  plan->y_plain = plain_desc(s.y);
  plan->w_plain = plain_desc(s.onednn_w());
  const memory::desc x(s.x, f32, any), w(s.onednn_w(), f32, any), y(s.y, f32, any);
  try {
    // The forward primitive is the backward ones' hint (their layouts follow it).
    dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training,
                                       dnnl::algorithm::convolution_direct, x, w, y, s.strides,
                                       s.dilates, s.pad_l, s.pad_r);
    dnnl::convolution_forward::primitive_desc fpd(fd, base_attr(), engine());
    if (s.kind == Grad::kData) {
      dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, x, w, y,
                                              s.strides, s.dilates, s.pad_l, s.pad_r);
      dnnl::convolution_backward_data::primitive_desc pd(d, base_attr(), engine(), fpd);
      if (is_reference_impl(pd)) return nullptr;
      plan->x_want = pd.diff_src_desc();
      plan->w_want = pd.weights_desc();
      plan->y_want = pd.diff_dst_desc();
      plan->scratchpad = pd.scratchpad_desc();
      plan->prim = dnnl::convolution_backward_data(pd);
    } else {
      dnnl::convolution_backward_weights::desc d(dnnl::algorithm::convolution_direct, x, w, y,
                                                 s.strides, s.dilates, s.pad_l, s.pad_r);
      dnnl::convolution_backward_weights::primitive_desc pd(d, base_attr(), engine(), fpd);
      if (is_reference_impl(pd)) return nullptr;
      plan->x_want = pd.src_desc();
      plan->w_want = pd.diff_weights_desc();
      plan->y_want = pd.diff_dst_desc();
      plan->scratchpad = pd.scratchpad_desc();
      plan->prim = dnnl::convolution_backward_weights(pd);
    }
  } catch (const dnnl::error&) {
    return nullptr;
  }
  return plan;
}

bool f32_inputs(const Node& node) {
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (node.input(i) && !input_is_f32(node, i)) return false;
  const Value* x = node.input(0);
  return !x->type.shape.rank_known() || (x->type.shape.rank() >= 3 && x->type.shape.rank() <= 5);
}

// The images of the batch per task: whole images, spread evenly over the threads.
std::vector<std::pair<int64_t, int64_t>> image_ranges(int64_t n, int64_t threads) {
  std::vector<std::pair<int64_t, int64_t>> r;
  const int64_t t = std::max<int64_t>(1, std::min(n, threads));
  for (int64_t i = 0; i < t; ++i) r.push_back({n * i / t, n * (i + 1) / t});
  return r;
}

// Fills spec's window from the node (pads non-negative); false when oneDNN cannot take it.
bool set_window(GradSpec& s, const Window& win) {
  for (size_t d = 0; d < win.rank; ++d) {
    if (win.pad_begin(d) < 0 || win.pad_end(d) < 0) return false;
    s.strides.push_back(win.strides[d]);
    s.dilates.push_back(win.dilations[d] - 1);
    s.pad_l.push_back(win.pad_begin(d));
    s.pad_r.push_back(win.pad_end(d));
  }
  return true;
}

Status conv_transpose_run(KernelContext& ctx, ThreadPool& pool) {
  const Tensor& dy = ctx.input(0);  // the transposed convolution's input: [N, K, out...]
  const Tensor& w = ctx.input(1);   // [K, C/g, k...]
  const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const Node& node = ctx.node();
  const int64_t g = node.attr_int("group", 1);
  if (dy.dtype() != DType::kF32 || w.dtype() != DType::kF32 || dy.rank() < 3 || dy.rank() > 5 ||
      w.rank() != dy.rank() || g < 1 || dy.dim(1) != w.dim(0) || w.dim(0) % g != 0 ||
      (bias && (bias->dtype() != DType::kF32 || bias->numel() != w.dim(1) * g)))
    return run_reference(ctx);
  std::vector<int64_t> kernel(w.dims().begin() + 2, w.dims().end());
  auto win = read_window(node, kernel);
  if (!win) return run_reference(ctx);
  std::vector<int64_t> in(dy.dims().begin() + 2, dy.dims().end());
  auto out = resolve_transpose(node, *win, in);
  if (!out) return run_reference(ctx);
  GradSpec s;
  s.kind = Grad::kData;
  s.groups = g;
  s.w = w.dims();
  if (!set_window(s, *win)) return run_reference(ctx);
  const int64_t n = dy.dim(0), c = w.dim(1) * g;
  Dims x_dims{n, c};
  x_dims.insert(x_dims.end(), out->begin(), out->end());
  for (int64_t d : x_dims)
    if (d == 0) return run_reference(ctx);
  for (int64_t d : dy.dims())
    if (d == 0) return run_reference(ctx);
  FERRITE_ASSIGN_OR_RETURN(Tensor * dx, ctx.allocate_output_uninitialized(0, DType::kF32, x_dims));
  const auto ranges = image_ranges(n, pool.size());
  std::vector<std::shared_ptr<const GradPlan>> plans;
  for (auto [n0, n1] : ranges) {
    GradSpec t = s;
    t.x = x_dims;
    t.x[0] = n1 - n0;
    t.y = dy.dims();
    t.y[0] = n1 - n0;
    auto plan = grad_cache().get(t.key(), [&] { return make_plan(t); });
    if (!plan) {
      // Nothing written yet: the reference kernel computes the whole output.
      return run_reference(ctx);
    }
    plans.push_back(plan);
  }
  const int64_t x_image = product(x_dims) / n, y_image = dy.numel() / n;
  const float* pdy = dy.data<float>();
  float* pdx = dx->data<float>();
  pool.parallel_for(static_cast<int64_t>(ranges.size()), 1, [&](int64_t t0, int64_t t1) {
    ThreadScope one(1);
    for (int64_t ti = t0; ti < t1; ++ti) {
      const GradPlan& p = *plans[ti];
      const int64_t n0 = ranges[ti].first;
      memory ddst = operand(nullptr, pdy + n0 * y_image, p.y_plain, p.y_want, 0);
      memory wei = operand(nullptr, w.raw(), p.w_plain, p.w_want, 1);
      float* dst = pdx + n0 * x_image;
      const bool direct = p.x_want == p.x_plain;
      memory dsrc = direct ? wrap(p.x_plain, dst) : scratch(p.x_want, 2);
      execute(p.prim, p.scratchpad,
              {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DIFF_SRC, dsrc}});
      if (!direct) reorder(dsrc, wrap(p.x_plain, dst));
    }
  });
  if (bias) {
    const float* b = bias->data<float>();
    const int64_t plane = x_image / c;
    for (int64_t i = 0; i < n * c; ++i) {
      float* row = pdx + i * plane;
      const float v = b[i % c];
      for (int64_t j = 0; j < plane; ++j) row[j] += v;
    }
  }
  return Status::ok();
}

Status conv_grad_weight_run(KernelContext& ctx, ThreadPool& pool) {
  const Tensor& x = ctx.input(0);   // [N, C, in...]
  const Tensor& dy = ctx.input(1);  // [N, K, out...]
  const Node& node = ctx.node();
  const int64_t g = node.attr_int("group", 1);
  const std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  if (x.dtype() != DType::kF32 || dy.dtype() != DType::kF32 || x.rank() < 3 || x.rank() > 5 ||
      dy.rank() != x.rank() || kernel.size() + 2 != x.rank() || g < 1 || x.dim(0) != dy.dim(0) ||
      x.dim(1) % g != 0 || dy.dim(1) % g != 0)
    return run_reference(ctx);
  auto win = read_window(node, kernel);
  if (!win) return run_reference(ctx);
  std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
  auto out = resolve_window(node, *win, in);
  if (!out || *out != std::vector<int64_t>(dy.dims().begin() + 2, dy.dims().end()))
    return run_reference(ctx);
  for (int64_t d : x.dims())
    if (d == 0) return run_reference(ctx);
  for (int64_t d : dy.dims())
    if (d == 0) return run_reference(ctx);
  GradSpec s;
  s.kind = Grad::kWeights;
  s.groups = g;
  s.w = {dy.dim(1), x.dim(1) / g};
  s.w.insert(s.w.end(), kernel.begin(), kernel.end());
  if (!set_window(s, *win)) return run_reference(ctx);
  const int64_t n = x.dim(0);
  const auto ranges = image_ranges(n, pool.size());
  std::vector<std::shared_ptr<const GradPlan>> plans;
  for (auto [n0, n1] : ranges) {
    GradSpec t = s;
    t.x = x.dims();
    t.x[0] = n1 - n0;
    t.y = dy.dims();
    t.y[0] = n1 - n0;
    auto plan = grad_cache().get(t.key(), [&] { return make_plan(t); });
    if (!plan) return run_reference(ctx);
    plans.push_back(plan);
  }
  FERRITE_ASSIGN_OR_RETURN(Tensor * dw, ctx.allocate_output_uninitialized(0, DType::kF32, s.w));
  const int64_t wn = dw->numel();
  // Task 0 writes dW itself; the others write partial sums, added at the end.
  std::vector<std::vector<float>> partial(ranges.size() - 1, std::vector<float>(wn));
  const int64_t x_image = x.numel() / n, y_image = dy.numel() / n;
  pool.parallel_for(static_cast<int64_t>(ranges.size()), 1, [&](int64_t t0, int64_t t1) {
    ThreadScope one(1);
    for (int64_t ti = t0; ti < t1; ++ti) {
      const GradPlan& p = *plans[ti];
      const int64_t n0 = ranges[ti].first;
      memory src = operand(nullptr, x.data<float>() + n0 * x_image, p.x_plain, p.x_want, 0);
      memory ddst = operand(nullptr, dy.data<float>() + n0 * y_image, p.y_plain, p.y_want, 2);
      float* dst = ti == 0 ? dw->data<float>() : partial[ti - 1].data();
      const bool direct = p.w_want == p.w_plain;
      memory dwei = direct ? wrap(p.w_plain, dst) : scratch(p.w_want, 1);
      execute(p.prim, p.scratchpad,
              {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_WEIGHTS, dwei}});
      if (!direct) reorder(dwei, wrap(p.w_plain, dst));
    }
  });
  float* pw = dw->data<float>();
  for (const auto& part : partial)
    for (int64_t i = 0; i < wn; ++i) pw[i] += part[i];
  return Status::ok();
}

bool conv_transpose_accepts(const Node& node) {
  return f32_inputs(node);
}

bool conv_grad_weight_accepts(const Node& node) {
  return f32_inputs(node);
}

}  // namespace

void register_cpu_conv_grad_kernels(CpuKernelRegistry& r) {
  r.add("", "ConvTranspose", {conv_transpose_accepts, conv_transpose_run});
  r.add("ferrite", "ConvGradWeight", {conv_grad_weight_accepts, conv_grad_weight_run});
}

}  // namespace ferrite
