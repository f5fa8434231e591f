// Quantized convolutions (opset 10): ConvInteger (int32 result of (x - x_zp) * (w - w_zp)) and
// QLinearConv (that accumulator plus an int32 bias, rescaled and requantized). Both run Conv's
// reference kernel in double over the zero-point-shifted integers: every product and partial sum
// is an integer below 2^53, so the accumulation is exact.
#include <cmath>

#include "ops/conv_util.h"
#include "ops/elementwise_util.h"
#include "ops/numeric_cast.h"

namespace ferrite {

namespace {

// Conv's inference over inputs (x, w) of the node, with the output type `dt`.
Status infer_integer_conv(InferContext& ctx, size_t x, size_t w, DType dt) {
  Node tmp = ctx.node();
  tmp.inputs = {ctx.node().input(x), ctx.node().input(w)};
  Value out;
  tmp.outputs = {&out};
  InferContext conv(tmp);
  FERRITE_RETURN_IF_ERROR(infer_conv(conv));
  ctx.set_output(0, dt, out.type.shape);
  return Status::ok();
}

// t - zp as f64; zp is per tensor (one element) or per entry of dim 0 (w's output channels).
Expected<Tensor> shifted(const KernelContext& ctx, const Tensor& t, const Tensor* zp) {
  Tensor out = Tensor::zeros(DType::kF64, t.dims());
  double* po = out.data<double>();
  std::vector<double> z;
  if (zp) {
    visit_dtype(zp->dtype(), [&]<class T>() {
      for (int64_t i = 0; i < zp->numel(); ++i) z.push_back(to_double(zp->data<T>()[i]));
    });
    if (z.size() != 1 && (t.rank() == 0 || static_cast<int64_t>(z.size()) != t.dim(0)))
      return ctx.error("a zero point must have 1 element or one per output channel");
  }
  const int64_t per = t.rank() == 0 || t.dim(0) == 0 ? 1 : t.numel() / t.dim(0);
  visit_dtype(t.dtype(), [&]<class T>() {
    for (int64_t i = 0; i < t.numel(); ++i)
      po[i] = to_double(t.data<T>()[i]) - (z.empty() ? 0.0 : z[z.size() == 1 ? 0 : i / per]);
  });
  return out;
}

// Runs Conv's kernel on f64 copies of x and w shifted by their zero points.
Expected<Tensor> integer_conv(const KernelContext& ctx, size_t x, const Tensor* xzp, size_t w,
                              const Tensor* wzp) {
  FERRITE_ASSIGN_OR_RETURN(Tensor xs, shifted(ctx, ctx.input(x), xzp));
  FERRITE_ASSIGN_OR_RETURN(Tensor ws, shifted(ctx, ctx.input(w), wzp));
  std::vector<Tensor> outs(1);
  KernelContext conv(ctx.node(), {&xs, &ws}, outs);
  FERRITE_RETURN_IF_ERROR(conv_kernel(conv));
  return outs[0];
}

const Tensor* optional_input(const KernelContext& ctx, size_t i) {
  return ctx.num_inputs() > i && ctx.has_input(i) ? &ctx.input(i) : nullptr;
}

Status conv_integer_kernel(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(Tensor acc,
                           integer_conv(ctx, 0, optional_input(ctx, 2), 1, optional_input(ctx, 3)));
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kI32, acc.dims()));
  const double* pa = acc.data<double>();
  int32_t* py = y->data<int32_t>();
  for (int64_t i = 0; i < acc.numel(); ++i) py[i] = saturate_cast<int32_t>(pa[i]);
  return Status::ok();
}

// y = saturate(rint((acc + B) * x_scale * w_scale / y_scale) + y_zp), w_scale per tensor or per
// output channel, the factor in float as ONNX's reference computes it.
Status qlinear_conv_kernel(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(Tensor acc, integer_conv(ctx, 0, &ctx.input(2), 3, &ctx.input(5)));
  auto floats = [&](size_t i) {
    std::vector<double> v;
    const Tensor& t = ctx.input(i);
    visit_dtype(t.dtype(), [&]<class T>() {
      for (int64_t k = 0; k < t.numel(); ++k) v.push_back(to_double(t.data<T>()[k]));
    });
    return v;
  };
  std::vector<double> xs = floats(1), ws = floats(4), ys = floats(6), yzp = floats(7);
  std::vector<double> bias = optional_input(ctx, 8) ? floats(8) : std::vector<double>{};
  const int64_t m = acc.dim(1), per = acc.numel() / std::max<int64_t>(acc.dim(0) * m, 1);
  if (xs.size() != 1 || ys.size() != 1 || yzp.size() != 1 ||
      (ws.size() != 1 && static_cast<int64_t>(ws.size()) != m) ||
      (!bias.empty() && static_cast<int64_t>(bias.size()) != m))
    return ctx.error("scales, zero points or bias do not match the output channels");
  const Tensor& yz = ctx.input(7);
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, yz.dtype(), acc.dims()));
  const double* pa = acc.data<double>();
  return dispatch_dtype<TypeClass::kInt>(ctx, yz.dtype(), [&]<class Y>() -> Status {
    Y* py = y->data<Y>();
    for (int64_t i = 0; i < acc.numel(); ++i) {
      int64_t c = (i / per) % m;
      float factor = static_cast<float>(xs[0]) * static_cast<float>(ws[ws.size() == 1 ? 0 : c]) /
                     static_cast<float>(ys[0]);
      double v = (pa[i] + (bias.empty() ? 0.0 : bias[c])) * static_cast<double>(factor);
      py[i] = saturate_cast<Y>(std::nearbyint(v) + yzp[0]);
    }
    return Status::ok();
  });
}

}  // namespace

void register_conv_integer_ops(OpRegistry& r) {
  constexpr DTypeSet k8{DType::kI8, DType::kU8};
  OpSchemaBuilder ci("ConvInteger");
  conv_attrs(ci.versions(10).inputs(2, 4).outputs(1))
      .types("T1", {0, 2}, k8)
      .types("T2", {1, 3}, k8)
      .infer([](InferContext& ctx) { return infer_integer_conv(ctx, 0, 1, DType::kI32); })
      .kernel(conv_integer_kernel);
  r.add(ci);
  OpSchemaBuilder ql("QLinearConv");
  conv_attrs(ql.versions(10).inputs(8, 9).outputs(1))
      .types("T1", {0, 2}, k8)
      .types("T2", {3, 5}, k8)
      .types("T3", {7}, k8)
      .types("T4", {8}, {DType::kI32})
      .types("TS", {1, 4, 6}, {DType::kF32})
      .infer([](InferContext& ctx) { return infer_integer_conv(ctx, 0, 3, ctx.input_dtype(7)); })
      .kernel(qlinear_conv_kernel);
  r.add(ql);
}

}  // namespace ferrite
