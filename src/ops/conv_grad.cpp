// Gradient ops of convolutions that ONNX has no op for ("ferrite" domain, version 1). Training
// graphs (the PyTorch frontend's convolution_backward) emit them; the input gradient needs none,
// it is ONNX ConvTranspose with Conv's window and an output_padding.
//
//   ferrite.ConvGradWeight(X, dY) {kernel_shape, strides, pads, dilations, group}
//       dW[m, c, k...] = sum over n and output positions o of dY[n, m, o] * X[n, g*C/G + c,
//       o*stride - pad_begin + k*dilation] (0 outside X), g = m / (M/G): the gradient of
//       Y = Conv(X, W) with respect to W, for W of shape [M, C/G, kernel_shape...] where M is
//       dY's channel count. dY's spatial dims must be Conv's output dims for X and the window.
//       Accumulated in f32 (f64 for f64) and rounded to T once.
#include <algorithm>
#include <type_traits>

#include "ops/conv_columns.h"
#include "ops/conv_util.h"
#include "ops/gemm.h"
#include "ops/op_schema.h"

namespace ferrite {

namespace {

using namespace conv_columns;

Status infer_conv_grad_weight(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& dy = ctx.input_shape(1);
  const int64_t group = ctx.node().attr_int("group", 1);
  if (group < 1) return ctx.error("group must be >= 1, got ", group);
  const std::vector<int64_t> kernel = ctx.node().attr_ints("kernel_shape");
  const size_t n = kernel.size();
  if (n == 0) return ctx.error("kernel_shape must name at least one spatial dim");
  FERRITE_ASSIGN_OR_RETURN(Window win, read_window(ctx.node(), kernel));
  for (const Shape* s : {&x, &dy})
    if (s->rank_known() && s->rank() != n + 2)
      return ctx.error("X and dY must have rank ", n + 2, " for kernel_shape of ", n, " dims, got ",
                       s->to_string());
  Dim c = x.rank_known() ? x[1] : Dim(), m = dy.rank_known() ? dy[1] : Dim();
  if (auto v = c.value(); v && *v % group != 0)
    return ctx.error(*v, " input channels are not divisible by group ", group);
  if (auto v = m.value(); v && *v % group != 0)
    return ctx.error(*v, " output channels are not divisible by group ", group);
  if (x.rank_known() && dy.rank_known())
    for (size_t d = 0; d < n; ++d) {
      FERRITE_ASSIGN_OR_RETURN(Dim o, window_output_dim(ctx.node(), win, d, x[d + 2]));
      auto ov = o.value(), dv = dy[d + 2].value();
      if (ov && dv && *ov != *dv)
        return ctx.error("dY ", dy.to_string(), " is not the convolution's output for X ",
                         x.to_string(), " (spatial dim ", d, " should be ", *ov, ")");
    }
  std::vector<Dim> out{m, c.value() ? Dim(*c.value() / group) : Dim()};
  for (int64_t k : kernel) out.push_back(Dim(k));
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
  return Status::ok();
}

// dW of one group accumulated over the batch: for each image, chunks of output rows give
// acc[mg, kdim] += dY[mg, P] * col[kdim, P]^T, col the chunk's im2col of X.
template <class T, class C>
void grad_weight(const Tensor& x, const Tensor& dy, Tensor& dw, const Window& w, int64_t group,
                 const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  const size_t n = w.rank;
  const int64_t batch = x.dim(0), cin = x.dim(1), m = dy.dim(1);
  const int64_t cg = cin / group, mg = m / group;
  const int64_t in_size = product(in), out_size = product(out);
  const int64_t kdim = cg * w.kernel_volume();
  const int64_t ow = out[n - 1];
  std::vector<C> acc(static_cast<size_t>(m * kdim), C(0));
  const int64_t rows = ow == 0 ? 0 : out_size / ow;
  const int64_t rows_per_chunk = chunk_rows(kdim, ow);
  const T* px = x.data<T>();
  const T* pdy = dy.data<T>();
  std::vector<C> col, dybuf;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t g = 0; g < group; ++g) {
      const T* xg = px + (b * cin + g * cg) * in_size;
      const T* dyg = pdy + (b * m + g * mg) * out_size;
      C* accg = acc.data() + g * mg * kdim;
      for (int64_t r0 = 0; r0 < rows; r0 += rows_per_chunk) {
        const int64_t r1 = std::min(rows, r0 + rows_per_chunk);
        const int64_t p0 = r0 * ow, P = (r1 - r0) * ow;
        col.resize(static_cast<size_t>(kdim * P));
        im2col<T, C>(xg, cg, in, out, w, r0, r1, col.data());
        const C* a;
        int64_t a_row;
        if constexpr (std::is_same_v<T, C>) {
          a = dyg + p0;
          a_row = out_size;
        } else {
          dybuf.resize(static_cast<size_t>(mg * P));
          for (int64_t i = 0; i < mg; ++i)
            for (int64_t j = 0; j < P; ++j)
              dybuf[i * P + j] = convert<C>(dyg[i * out_size + p0 + j]);
          a = dybuf.data();
          a_row = P;
        }
        // B = col^T: element (p, k) at col[k * P + p].
        reference_gemm<C, C>(mg, kdim, P, a, a_row, 1, col.data(), 1, P, accg, kdim, true);
      }
    }
  }
  T* pw = dw.data<T>();
  for (size_t i = 0; i < acc.size(); ++i) pw[i] = convert<T>(acc[i]);
}

Status conv_grad_weight_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& dy = ctx.input(1);
  const int64_t group = ctx.node().attr_int("group", 1);
  const std::vector<int64_t> kernel = ctx.node().attr_ints("kernel_shape");
  const size_t n = kernel.size();
  if (n == 0 || x.rank() != n + 2 || dy.rank() != n + 2)
    return ctx.error("X ", x.type_string(), " and dY ", dy.type_string(), " must have rank ", n + 2,
                     " for kernel_shape ", dims_to_string(kernel));
  if (x.dtype() != dy.dtype())
    return ctx.error("X ", x.type_string(), " and dY ", dy.type_string(), " differ in dtype");
  if (group < 1) return ctx.error("group must be >= 1, got ", group);
  if (x.dim(1) % group != 0 || dy.dim(1) % group != 0)
    return ctx.error("channels of X ", x.type_string(), " and dY ", dy.type_string(),
                     " are not divisible by group ", group);
  if (x.dim(0) != dy.dim(0))
    return ctx.error("X ", x.type_string(), " and dY ", dy.type_string(), " differ in batch");
  FERRITE_ASSIGN_OR_RETURN(Window win, read_window(ctx.node(), kernel));
  std::vector<int64_t> in = spatial_dims(x);
  FERRITE_ASSIGN_OR_RETURN(auto out, resolve_window(ctx.node(), win, in));
  if (out != spatial_dims(dy))
    return ctx.error("dY ", dy.type_string(), " is not the convolution's output for X ",
                     x.type_string(), " (spatial ", dims_to_string(out), ")");
  std::vector<int64_t> dims{dy.dim(1), x.dim(1) / group};
  dims.insert(dims.end(), kernel.begin(), kernel.end());
  FERRITE_ASSIGN_OR_RETURN(Tensor * dw, ctx.allocate_output(0, x.dtype(), dims));
  bool ok = visit_float_accumulate_dtype(
      x.dtype(), [&]<class T, class C>() { grad_weight<T, C>(x, dy, *dw, win, group, in, out); });
  if (!ok) return ctx.error("dtype ", dtype_name(x.dtype()), " is not supported");
  return Status::ok();
}

}  // namespace

void register_conv_grad_ops(OpRegistry& r) {
  r.add(OpSchemaBuilder("ConvGradWeight", "ferrite")
            .versions(1)
            .inputs(2)
            .outputs(1)
            .required_attr("kernel_shape", AttrType::kInts)
            .optional_attr("strides", AttrType::kInts)
            .optional_attr("pads", AttrType::kInts)
            .optional_attr("dilations", AttrType::kInts)
            .attr("group", AttrType::kInt, 1)
            .types("T", {0, 1}, dtypes::kFloat)
            .infer(infer_conv_grad_weight)
            .kernel(conv_grad_weight_kernel));
}

}  // namespace ferrite
