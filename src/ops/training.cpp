// Optimizer steps of the ai.onnx.preview.training domain (version 1): Adagrad, Momentum, Adam.
// Inputs are R (learning rate), T (update count), then n tensors to optimize, their n gradients
// and the n (Adam: 2n) optimizer states; outputs are the n new tensors and the new states, each
// with its input's type. The kernels compute in double.
#include <climits>
#include <cmath>

#include "ops/elementwise_util.h"
#include "ops/helpers.h"
#include "ops/numeric_cast.h"

namespace ferrite {

namespace {

const char* const kTraining = "ai.onnx.preview.training";

enum class Optimizer { kAdagrad, kMomentum, kAdam };

// Tensors per optimized input: X and G plus the states.
int64_t per_tensor(Optimizer o) {
  return o == Optimizer::kAdam ? 4 : 3;
}

// Input that output j takes its type from: X_i for the new tensors, then the state groups.
template <class Ctx>
Expected<std::pair<int64_t, int64_t>> groups(const Ctx& ctx, Optimizer o, size_t num_inputs,
                                             size_t num_outputs) {
  const int64_t k = per_tensor(o);
  const int64_t rest = static_cast<int64_t>(num_inputs) - 2;
  if (rest <= 0 || rest % k != 0)
    return ctx.error("expected R, T and ", k, " tensors per optimized input, got ", num_inputs,
                     " inputs");
  const int64_t n = rest / k;
  if (static_cast<int64_t>(num_outputs) != (k - 1) * n)
    return ctx.error("expected ", (k - 1) * n, " outputs for ", n, " optimized inputs");
  return std::pair<int64_t, int64_t>{n, k};
}

int64_t source_input(int64_t j, int64_t n) {
  int64_t q = j / n, i = j % n;
  return 2 + (q == 0 ? 0 : q + 1) * n + i;
}

Status infer_optimizer(InferContext& ctx, Optimizer o) {
  FERRITE_ASSIGN_OR_RETURN(auto nk, groups(ctx, o, ctx.num_inputs(), ctx.num_outputs()));
  const int64_t n = nk.first;
  for (size_t i = 0; i < 2; ++i)
    if (ctx.input_shape(i).rank_known() && ctx.input_shape(i).rank() != 0)
      return ctx.error("R and T must be scalars");
  for (size_t i = 2; i < ctx.num_inputs(); ++i)
    if (!ctx.has_input(i) ||
        (ctx.input_dtype(i) != DType::kF32 && ctx.input_dtype(i) != DType::kF64))
      return ctx.error("input ", i, " must be a float or double tensor");
  if (o == Optimizer::kMomentum) {
    std::string mode = ctx.node().attr_string("mode");
    if (mode != "standard" && mode != "nesterov")
      return ctx.error("mode must be standard or nesterov, got '", mode, "'");
  }
  for (size_t j = 0; j < ctx.num_outputs(); ++j) {
    int64_t src = source_input(static_cast<int64_t>(j), n);
    for (int64_t g = 0; g < nk.second; ++g) {
      // X, G and the states of one tensor share its shape.
      const Shape& a = ctx.input_shape(2 + (j % n));
      const Shape& b = ctx.input_shape(2 + g * n + (j % n));
      if (a.rank_known() && b.rank_known() && a != b)
        return ctx.error("tensor ", j % n, " and its gradient or states differ in shape");
    }
    if (ctx.has_output(j)) ctx.set_output(j, ctx.input_type(src));
  }
  return Status::ok();
}

double scalar_of(const Tensor& t) {
  double v = 0;
  visit_dtype(t.dtype(), [&]<class T>() { v = to_double(t.data<T>()[0]); });
  return v;
}

Status optimizer_kernel(KernelContext& ctx, Optimizer o) {
  FERRITE_ASSIGN_OR_RETURN(auto nk, groups(ctx, o, ctx.num_inputs(), ctx.num_outputs()));
  const int64_t n = nk.first;
  if (ctx.input(0).numel() != 1 || ctx.input(1).numel() != 1)
    return ctx.error("R and T must be scalars");
  const double r = scalar_of(ctx.input(0)), t = scalar_of(ctx.input(1));
  const Node& node = ctx.node();
  const double norm = node.attr_float("norm_coefficient", 0);
  for (int64_t i = 0; i < n; ++i) {
    const Tensor& x = ctx.input(2 + i);
    std::vector<const Tensor*> in;
    for (int64_t g = 0; g < nk.second; ++g) {
      in.push_back(&ctx.input(2 + g * n + i));
      if (in.back()->dims() != x.dims() || in.back()->dtype() != x.dtype())
        return ctx.error("tensor ", i, " and its gradient or states differ in shape or type");
    }
    std::vector<Tensor*> out;
    for (int64_t q = 0; q < nk.second - 1; ++q) {
      FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(q * n + i, x.dtype(), x.dims()));
      out.push_back(y);
    }
    FERRITE_RETURN_IF_ERROR(
        dispatch_dtype<TypeClass::kFloat>(ctx, x.dtype(), [&]<class T>() -> Status {
          for (int64_t e = 0; e < x.numel(); ++e) {
            auto at = [&](int g) { return to_double(in[g]->data<T>()[e]); };
            const double xv = at(0), g = norm * xv + at(1);
            double x_new = 0, s1 = 0, s2 = 0;
            if (o == Optimizer::kAdagrad) {
              const double rate = r / (1 + t * node.attr_float("decay_factor", 0));
              s1 = at(2) + g * g;
              x_new = xv - rate * g / (std::sqrt(s1) + node.attr_float("epsilon", 1e-6f));
            } else if (o == Optimizer::kMomentum) {
              const double alpha = node.attr_float("alpha"),
                           beta = t > 0 ? node.attr_float("beta") : 1;
              s1 = alpha * at(2) + beta * g;
              x_new =
                  node.attr_string("mode") == "nesterov" ? xv - r * (g + alpha * s1) : xv - r * s1;
            } else {
              const double alpha = node.attr_float("alpha", 0.9f),
                           beta = node.attr_float("beta", 0.999f);
              s1 = alpha * at(2) + (1 - alpha) * g;
              s2 = beta * at(3) + (1 - beta) * g * g;
              const double rate =
                  t > 0 ? r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t)) : r;
              x_new = (xv - rate * (s1 / (std::sqrt(s2) + node.attr_float("epsilon", 1e-6f)))) *
                      (1 - node.attr_float("norm_coefficient_post", 0));
            }
            out[0]->data<T>()[e] = convert<T>(x_new);
            out[1]->data<T>()[e] = convert<T>(s1);
            if (out.size() > 2) out[2]->data<T>()[e] = convert<T>(s2);
          }
          return Status::ok();
        }));
  }
  return Status::ok();
}

OpSchemaBuilder optimizer(const char* name, Optimizer o) {
  OpSchemaBuilder b(name, kTraining);
  b.versions(1)
      .inputs(2 + per_tensor(o), INT_MAX)
      .outputs(per_tensor(o) - 1, INT_MAX)
      .attr("norm_coefficient", AttrType::kFloat, 0.0f)
      .types("T1", {0}, {DType::kF32, DType::kF64})
      .types("T2", {1}, {DType::kI64})
      .infer([o](InferContext& ctx) { return infer_optimizer(ctx, o); })
      .kernel([o](KernelContext& ctx) { return optimizer_kernel(ctx, o); });
  return b;
}

}  // namespace

void register_training_ops(OpRegistry& r) {
  r.add(optimizer("Adagrad", Optimizer::kAdagrad)
            .attr("decay_factor", AttrType::kFloat, 0.0f)
            .attr("epsilon", AttrType::kFloat, 1e-6f));
  r.add(optimizer("Momentum", Optimizer::kMomentum)
            .required_attr("alpha", AttrType::kFloat)
            .required_attr("beta", AttrType::kFloat)
            .required_attr("mode", AttrType::kString));
  r.add(optimizer("Adam", Optimizer::kAdam)
            .attr("alpha", AttrType::kFloat, 0.9f)
            .attr("beta", AttrType::kFloat, 0.999f)
            .attr("epsilon", AttrType::kFloat, 1e-6f)
            .attr("norm_coefficient_post", AttrType::kFloat, 0.0f));
}

}  // namespace ferrite
