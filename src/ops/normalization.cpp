// Normalizations: BatchNormalization, InstanceNormalization, LayerNormalization,
// GroupNormalization, LpNormalization, MeanVarianceNormalization, LRN.
//
// Statistics are accumulated in double with a two-pass mean/variance (never E[x^2]-E[x]^2,
// which cancels badly), whatever the storage type.
#include <algorithm>
#include <cmath>

#include "ops/conv_util.h"

namespace ferrite {

namespace {

// Reads a float tensor (any float dtype) as doubles.
std::vector<double> as_doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.double_at(i);
  return v;
}

// Writes doubles into a float tensor of any float dtype.
void store_doubles(Tensor& t, const std::vector<double>& v) {
  visit_dtype(t.dtype(), [&]<class T>() {
    if constexpr (is_float_v<T>) {
      T* p = t.data<T>();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = convert<T>(v[i]);
    }
  });
}

// Mean and population variance of `count` doubles.
void moments(const double* x, int64_t count, double* mean, double* var) {
  double s = 0;
  for (int64_t i = 0; i < count; ++i) s += x[i];
  double m = count > 0 ? s / static_cast<double>(count) : 0.0;
  double q = 0;
  for (int64_t i = 0; i < count; ++i) q += (x[i] - m) * (x[i] - m);
  *mean = m;
  *var = count > 0 ? q / static_cast<double>(count) : 0.0;
}

// Checks that an input is 1-D with `n` entries (the per-channel parameters).
Status check_vector(const KernelContext& ctx, size_t i, int64_t n, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.rank() != 1 || t.dim(0) != n)
    return ctx.error(what, " must be 1-D with ", n, " entries, got ", t.type_string());
  return Status::ok();
}

Status infer_vector(const InferContext& ctx, size_t i, const Dim& n, const char* what) {
  if (i >= ctx.num_inputs() || !ctx.has_input(i)) return Status::ok();
  const Shape& s = ctx.input_shape(i);
  if (!s.rank_known()) return Status::ok();
  if (s.rank() != 1) return ctx.error(what, " must be 1-D, got ", s.to_string());
  if (s[0].is_static() && n.is_static() && s[0] != n)
    return ctx.error(what, " has ", s.to_string(), " entries, expected ", n.to_string());
  return Status::ok();
}

// ---- BatchNormalization -------------------------------------------------------------------

Status infer_batchnorm(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (x.rank_known() && x.rank() < 2)
    return ctx.error("input must have rank >= 2, got ", x.to_string());
  Dim c = x.rank_known() ? x[1] : Dim();
  const char* names[] = {"", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) FERRITE_RETURN_IF_ERROR(infer_vector(ctx, i, c, names[i]));
  ctx.set_output(0, ctx.input_type(0));
  if (ctx.num_outputs() > 1) ctx.set_output(1, ctx.input_dtype(3), Shape({c}));
  if (ctx.num_outputs() > 2) ctx.set_output(2, ctx.input_dtype(4), Shape({c}));
  return Status::ok();
}

Status batchnorm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.error("input must have rank >= 2, got ", x.type_string());
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t inner = n * c == 0 ? 0 : x.numel() / (n * c);
  const char* names[] = {"", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) FERRITE_RETURN_IF_ERROR(check_vector(ctx, i, c, names[i]));
  const double eps = ctx.node().attr_float("epsilon", 1e-5f);
  const double momentum = ctx.node().attr_float("momentum", 0.9f);
  const bool training = ctx.node().attr_int("training_mode", 0) != 0;
  std::vector<double> scale = as_doubles(ctx.input(1)), bias = as_doubles(ctx.input(2));
  std::vector<double> mean = as_doubles(ctx.input(3)), var = as_doubles(ctx.input(4));
  std::vector<double> xd = as_doubles(x);
  std::vector<double> run_mean = mean, run_var = var;
  if (training) {
    // Batch statistics over N and the spatial dims; the running ones blend in with momentum.
    std::vector<double> buf(static_cast<size_t>(n * inner));
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t b = 0; b < n; ++b)
        std::copy_n(&xd[(b * c + ch) * inner], inner, &buf[b * inner]);
      moments(buf.data(), n * inner, &mean[ch], &var[ch]);
      run_mean[ch] = run_mean[ch] * momentum + mean[ch] * (1 - momentum);
      run_var[ch] = run_var[ch] * momentum + var[ch] * (1 - momentum);
    }
  }
  std::vector<double> y(xd.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      double a = scale[ch] / std::sqrt(var[ch] + eps), off = bias[ch] - mean[ch] * a;
      for (int64_t i = 0; i < inner; ++i) {
        int64_t k = (b * c + ch) * inner + i;
        y[k] = xd[k] * a + off;
      }
    }
  FERRITE_ASSIGN_OR_RETURN(Tensor * yt, ctx.allocate_output(0, x.dtype(), x.dims()));
  store_doubles(*yt, y);
  if (ctx.num_outputs() > 1 && ctx.has_output(1)) {
    FERRITE_ASSIGN_OR_RETURN(Tensor * t, ctx.allocate_output(1, ctx.input(3).dtype(), {c}));
    store_doubles(*t, run_mean);
  }
  if (ctx.num_outputs() > 2 && ctx.has_output(2)) {
    FERRITE_ASSIGN_OR_RETURN(Tensor * t, ctx.allocate_output(2, ctx.input(4).dtype(), {c}));
    store_doubles(*t, run_var);
  }
  return Status::ok();
}

// ---- InstanceNormalization and GroupNormalization -----------------------------------------

// Normalizes x viewed as [n, groups, size] per (n, group), then applies scale/bias indexed by
// group (affine_per_group) or by channel, a channel being `channel_size` consecutive elements.
void normalize_groups(const std::vector<double>& x, int64_t n, int64_t groups, int64_t size,
                      int64_t channel_size, double eps, const std::vector<double>& scale,
                      const std::vector<double>& bias, bool affine_per_group,
                      std::vector<double>& y) {
  y.resize(x.size());
  const int64_t channels_per_group = channel_size == 0 ? 0 : size / channel_size;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t base = (b * groups + g) * size;
      double mean, var;
      moments(&x[base], size, &mean, &var);
      double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t i = 0; i < size; ++i) {
        int64_t p = affine_per_group ? g : g * channels_per_group + i / channel_size;
        y[base + i] = (x[base + i] - mean) * inv * scale[p] + bias[p];
      }
    }
}

Status infer_instancenorm(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (x.rank_known() && x.rank() < 3)
    return ctx.error("input must have rank >= 3, got ", x.to_string());
  Dim c = x.rank_known() ? x[1] : Dim();
  FERRITE_RETURN_IF_ERROR(infer_vector(ctx, 1, c, "scale"));
  FERRITE_RETURN_IF_ERROR(infer_vector(ctx, 2, c, "B"));
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

Status instancenorm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 3) return ctx.error("input must have rank >= 3, got ", x.type_string());
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t size = n * c == 0 ? 0 : x.numel() / (n * c);
  FERRITE_RETURN_IF_ERROR(check_vector(ctx, 1, c, "scale"));
  FERRITE_RETURN_IF_ERROR(check_vector(ctx, 2, c, "B"));
  std::vector<double> y;
  normalize_groups(as_doubles(x), n, c, size, size, ctx.node().attr_float("epsilon", 1e-5f),
                   as_doubles(ctx.input(1)), as_doubles(ctx.input(2)), true, y);
  FERRITE_ASSIGN_OR_RETURN(Tensor * yt, ctx.allocate_output(0, x.dtype(), x.dims()));
  store_doubles(*yt, y);
  return Status::ok();
}

// GroupNormalization-18 takes scale/bias per group; 21 per channel.
Status infer_groupnorm(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  int64_t groups = ctx.node().attr_int("num_groups");
  if (groups <= 0) return ctx.error("num_groups must be positive, got ", groups);
  if (x.rank_known() && x.rank() < 2)
    return ctx.error("input must have rank >= 2, got ", x.to_string());
  Dim c = x.rank_known() ? x[1] : Dim();
  if (auto cv = c.value(); cv && *cv % groups != 0)
    return ctx.error(*cv, " channels are not divisible by num_groups ", groups);
  Dim n = ctx.opset() >= 21 ? c : Dim(groups);
  FERRITE_RETURN_IF_ERROR(infer_vector(ctx, 1, n, "scale"));
  FERRITE_RETURN_IF_ERROR(infer_vector(ctx, 2, n, "bias"));
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

Status groupnorm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.error("input must have rank >= 2, got ", x.type_string());
  const int64_t groups = ctx.node().attr_int("num_groups");
  const int64_t n = x.dim(0), c = x.dim(1);
  if (groups <= 0 || c % groups != 0)
    return ctx.error(c, " channels are not divisible by num_groups ", groups);
  const bool per_group = ctx.opset() < 21;
  FERRITE_RETURN_IF_ERROR(check_vector(ctx, 1, per_group ? groups : c, "scale"));
  FERRITE_RETURN_IF_ERROR(check_vector(ctx, 2, per_group ? groups : c, "bias"));
  const int64_t channel_size = n * c == 0 ? 0 : x.numel() / (n * c);
  std::vector<double> y;
  normalize_groups(as_doubles(x), n, groups, channel_size * (c / groups), channel_size,
                   ctx.node().attr_float("epsilon", 1e-5f), as_doubles(ctx.input(1)),
                   as_doubles(ctx.input(2)), per_group, y);
  FERRITE_ASSIGN_OR_RETURN(Tensor * yt, ctx.allocate_output(0, x.dtype(), x.dims()));
  store_doubles(*yt, y);
  return Status::ok();
}

// ---- LayerNormalization -------------------------------------------------------------------

Expected<DType> stash_dtype(const Node& node) {
  int64_t st = node.attr_int("stash_type", 1);
  auto dt = dtype_from_onnx(static_cast<int>(st));
  if (!dt || !is_float(*dt))
    return err(node.describe(), ": stash_type ", st, " is not a float type");
  return *dt;
}

Status infer_layernorm(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  FERRITE_ASSIGN_OR_RETURN(DType stash, stash_dtype(ctx.node()));
  ctx.set_output(0, ctx.input_type(0));
  if (!x.rank_known()) {
    for (size_t i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, stash, Shape::unknown_rank());
    return Status::ok();
  }
  if (x.rank() == 0) return ctx.error("input must have rank >= 1");
  FERRITE_ASSIGN_OR_RETURN(int64_t axis,
                           normalize_axis(ctx, ctx.node().attr_int("axis", -1), x.rank()));
  std::vector<Dim> norm(x.dims().begin() + axis, x.dims().end());
  for (size_t i = 1; i < 3 && i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    std::string e;
    auto b = broadcast_shapes(ctx.input_shape(i), Shape(norm), &e);
    if (!b)
      return ctx.error(i == 1 ? "Scale" : "B", " does not broadcast to the normalized shape: ", e);
    if (b->rank_known() && b->rank() != norm.size())
      return ctx.error(i == 1 ? "Scale" : "B", " has higher rank than the normalized shape");
  }
  std::vector<Dim> stat(x.dims().begin(), x.dims().begin() + axis);
  stat.resize(x.rank(), Dim(1));
  for (size_t i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, stash, Shape(stat));
  return Status::ok();
}

Status layernorm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() == 0) return ctx.error("input must have rank >= 1");
  FERRITE_ASSIGN_OR_RETURN(DType stash, stash_dtype(ctx.node()));
  FERRITE_ASSIGN_OR_RETURN(int64_t axis,
                           normalize_axis(ctx, ctx.node().attr_int("axis", -1), x.rank()));
  std::vector<int64_t> norm(x.dims().begin() + axis, x.dims().end());
  const int64_t inner = product(norm);
  const int64_t outer = inner == 0 ? 0 : x.numel() / inner;
  // Affine parameters broadcast (unidirectionally) onto the normalized dims.
  std::vector<double> params[2];
  for (size_t i = 1; i < 3; ++i) {
    std::vector<double>& p = params[i - 1];
    if (!ctx.has_input(i)) {
      p.assign(static_cast<size_t>(inner), i == 1 ? 1.0 : 0.0);
      continue;
    }
    const Tensor& t = ctx.input(i);
    auto b = broadcast_dims(ctx, t.dims(), norm);
    if (!b || *b != norm)
      return ctx.error(i == 1 ? "Scale " : "B ", t.type_string(),
                       " does not broadcast to the normalized shape ", dims_to_string(norm));
    std::vector<double> v = as_doubles(t);
    p.resize(static_cast<size_t>(inner));
    std::array<std::vector<int64_t>, 1> strides{broadcast_strides(t.dims(), norm)};
    for_each_index<1>(norm, strides,
                      [&](int64_t j, const std::array<int64_t, 1>& off) { p[j] = v[off[0]]; });
  }
  const double eps = ctx.node().attr_float("epsilon", 1e-5f);
  // Without B the output is the scaled value itself: adding a zero bias would turn the -0 of a
  // zero deviation times a negative scale into +0 (ONNX's function body adds B only if given).
  const bool has_bias = ctx.has_input(2);
  std::vector<double> xd = as_doubles(x), y(xd.size()), mean(outer), inv(outer);
  for (int64_t r = 0; r < outer; ++r) {
    double var;
    moments(&xd[r * inner], inner, &mean[r], &var);
    inv[r] = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < inner; ++j) {
      int64_t k = r * inner + j;
      y[k] = (xd[k] - mean[r]) * inv[r] * params[0][j];
      if (has_bias) y[k] += params[1][j];
    }
  }
  FERRITE_ASSIGN_OR_RETURN(Tensor * yt, ctx.allocate_output(0, x.dtype(), x.dims()));
  store_doubles(*yt, y);
  std::vector<int64_t> stat(x.dims().begin(), x.dims().begin() + axis);
  stat.resize(x.rank(), 1);
  for (size_t i = 1; i < 3 && i < ctx.num_outputs(); ++i) {
    if (!ctx.has_output(i)) continue;
    FERRITE_ASSIGN_OR_RETURN(Tensor * t, ctx.allocate_output(i, stash, stat));
    store_doubles(*t, i == 1 ? mean : inv);
  }
  return Status::ok();
}

// ---- LpNormalization, MeanVarianceNormalization, LRN --------------------------------------

Status lpnorm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t p = ctx.node().attr_int("p", 2);
  if (p != 1 && p != 2) return ctx.error("p must be 1 or 2, got ", p);
  FERRITE_ASSIGN_OR_RETURN(int64_t axis,
                           normalize_axis(ctx, ctx.node().attr_int("axis", -1), x.rank()));
  const int64_t len = x.rank() == 0 ? 1 : x.dim(axis);
  int64_t inner = 1;
  for (size_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const int64_t outer = len * inner == 0 ? 0 : x.numel() / (len * inner);
  std::vector<double> xd = as_doubles(x), y(xd.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * len * inner + i;
      double norm = 0;
      for (int64_t k = 0; k < len; ++k) {
        double v = xd[base + k * inner];
        norm += p == 1 ? std::fabs(v) : v * v;
      }
      if (p == 2) norm = std::sqrt(norm);
      // An all-zero slice stays zero rather than becoming NaN.
      for (int64_t k = 0; k < len; ++k)
        y[base + k * inner] = norm == 0 ? 0.0 : xd[base + k * inner] / norm;
    }
  FERRITE_ASSIGN_OR_RETURN(Tensor * yt, ctx.allocate_output(0, x.dtype(), x.dims()));
  store_doubles(*yt, y);
  return Status::ok();
}

Status infer_lpnorm(InferContext& ctx) {
  int64_t p = ctx.node().attr_int("p", 2);
  if (p != 1 && p != 2) return ctx.error("p must be 1 or 2, got ", p);
  const Shape& x = ctx.input_shape(0);
  if (x.rank_known())
    FERRITE_RETURN_IF_ERROR(
        normalize_axis(ctx, ctx.node().attr_int("axis", -1), x.rank()).status());
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

// MVN's axes, normalized and checked; a mask over the input dims.
template <class Ctx>
Expected<std::vector<bool>> mvn_axes(const Ctx& ctx, size_t rank) {
  std::vector<bool> reduced(rank, false);
  for (int64_t a : ctx.node().attr_ints("axes", {0, 2, 3})) {
    FERRITE_ASSIGN_OR_RETURN(int64_t ax, normalize_axis(ctx, a, static_cast<int64_t>(rank)));
    if (rank == 0) return ctx.error("axes must be empty for a scalar input");
    reduced[ax] = true;
  }
  return reduced;
}

Status infer_mvn(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (x.rank_known()) FERRITE_RETURN_IF_ERROR(mvn_axes(ctx, x.rank()).status());
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

Status mvn_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  FERRITE_ASSIGN_OR_RETURN(auto reduced, mvn_axes(ctx, x.rank()));
  // Group id of each element: its index over the kept dims.
  std::vector<int64_t> group(static_cast<size_t>(x.numel()));
  std::vector<int64_t> kept_dims(x.rank());
  for (size_t d = 0; d < x.rank(); ++d) kept_dims[d] = reduced[d] ? 1 : x.dim(d);
  std::array<std::vector<int64_t>, 1> strides{broadcast_strides(kept_dims, x.dims())};
  for_each_index<1>(x.dims(), strides,
                    [&](int64_t i, const std::array<int64_t, 1>& off) { group[i] = off[0]; });
  const int64_t groups = product(kept_dims);
  std::vector<double> xd = as_doubles(x), sum(groups, 0.0), sq(groups, 0.0), cnt(groups, 0.0);
  for (size_t i = 0; i < xd.size(); ++i) {
    sum[group[i]] += xd[i];
    cnt[group[i]] += 1;
  }
  for (int64_t g = 0; g < groups; ++g) sum[g] = cnt[g] > 0 ? sum[g] / cnt[g] : 0.0;
  for (size_t i = 0; i < xd.size(); ++i) {
    double dlt = xd[i] - sum[group[i]];
    sq[group[i]] += dlt * dlt;
  }
  std::vector<double> y(xd.size());
  // As the ONNX function body: (x - mean) / (sqrt(var) + 1e-9).
  for (size_t i = 0; i < xd.size(); ++i) {
    int64_t g = group[i];
    y[i] = (xd[i] - sum[g]) / (std::sqrt(cnt[g] > 0 ? sq[g] / cnt[g] : 0.0) + 1e-9);
  }
  FERRITE_ASSIGN_OR_RETURN(Tensor * yt, ctx.allocate_output(0, x.dtype(), x.dims()));
  store_doubles(*yt, y);
  return Status::ok();
}

Status lrn_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.error("input must have rank >= 2, got ", x.type_string());
  const int64_t size = ctx.node().attr_int("size");
  if (size <= 0) return ctx.error("size must be positive, got ", size);
  const double alpha = ctx.node().attr_float("alpha", 1e-4f);
  const double beta = ctx.node().attr_float("beta", 0.75f);
  const double bias = ctx.node().attr_float("bias", 1.0f);
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t inner = n * c == 0 ? 0 : x.numel() / (n * c);
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  std::vector<double> xd = as_doubles(x), y(xd.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < inner; ++i) {
        double sq = 0;
        for (int64_t k = std::max<int64_t>(0, ch - before); k <= std::min(c - 1, ch + after); ++k) {
          double v = xd[(b * c + k) * inner + i];
          sq += v * v;
        }
        int64_t idx = (b * c + ch) * inner + i;
        y[idx] = xd[idx] / std::pow(bias + alpha / static_cast<double>(size) * sq, beta);
      }
  FERRITE_ASSIGN_OR_RETURN(Tensor * yt, ctx.allocate_output(0, x.dtype(), x.dims()));
  store_doubles(*yt, y);
  return Status::ok();
}

Status infer_lrn(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (x.rank_known() && x.rank() < 2)
    return ctx.error("input must have rank >= 2, got ", x.to_string());
  if (ctx.node().attr_int("size") <= 0) return ctx.error("size must be positive");
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

}  // namespace

void register_normalization_ops(OpRegistry& r) {
  using dtypes::kFloat;
  // BatchNormalization-15 lets scale/B and mean/var have their own float types; -14 ties them
  // to X, which the union admits.
  r.add(OpSchemaBuilder("BatchNormalization")
            .versions(14)
            .inputs(5)
            .outputs(1, 3)
            .attr("epsilon", AttrType::kFloat, 1e-5f)
            .attr("momentum", AttrType::kFloat, 0.9f)
            .attr("training_mode", AttrType::kInt, 0)
            .types("T", {0}, kFloat)
            .types("T1", {1, 2}, kFloat)
            .types("T2", {3, 4}, kFloat)
            .infer(infer_batchnorm)
            .kernel(batchnorm_kernel));
  // Opset 13 still has BatchNormalization-9: no training_mode; its optional outputs only exist
  // in training, which it signals by their presence.
  r.add(OpSchemaBuilder("BatchNormalization")
            .versions(13, 13)
            .inputs(5)
            .outputs(1, 5)
            .attr("epsilon", AttrType::kFloat, 1e-5f)
            .attr("momentum", AttrType::kFloat, 0.9f)
            .types("T", {0, 1, 2, 3, 4}, kFloat)
            .infer([](InferContext& ctx) -> Status {
              for (size_t i = 1; i < ctx.num_outputs(); ++i)
                if (ctx.has_output(i))
                  return unsupported(ctx.node().describe(),
                                     ": BatchNormalization-9 training outputs are not supported");
              return infer_batchnorm(ctx);
            })
            .kernel(batchnorm_kernel));
  r.add(OpSchemaBuilder("InstanceNormalization")
            .versions(13)
            .inputs(3)
            .outputs(1)
            .attr("epsilon", AttrType::kFloat, 1e-5f)
            .types("T", {0, 1, 2}, kFloat)
            .infer(infer_instancenorm)
            .kernel(instancenorm_kernel));
  r.add(OpSchemaBuilder("LayerNormalization")
            .versions(17)
            .inputs(2, 3)
            .outputs(1, 3)
            .attr("axis", AttrType::kInt, -1)
            .attr("epsilon", AttrType::kFloat, 1e-5f)
            .attr("stash_type", AttrType::kInt, 1)
            .types("T", {0, 1, 2}, kFloat)
            .infer(infer_layernorm)
            .kernel(layernorm_kernel));
  // stash_type is new in GroupNormalization-21 (declared as the union).
  r.add(OpSchemaBuilder("GroupNormalization")
            .versions(18)
            .inputs(3)
            .outputs(1)
            .attr("epsilon", AttrType::kFloat, 1e-5f)
            .required_attr("num_groups", AttrType::kInt)
            .attr("stash_type", AttrType::kInt, 1)
            .types("T", {0, 1, 2}, kFloat)
            .infer(infer_groupnorm)
            .kernel(groupnorm_kernel));
  r.add(OpSchemaBuilder("LpNormalization")
            .versions(13)
            .inputs(1)
            .outputs(1)
            .attr("axis", AttrType::kInt, -1)
            .attr("p", AttrType::kInt, 2)
            .types("T", {0}, kFloat)
            .infer(infer_lpnorm)
            .kernel(lpnorm_kernel));
  r.add(OpSchemaBuilder("MeanVarianceNormalization")
            .versions(13)
            .inputs(1)
            .outputs(1)
            .attr("axes", AttrType::kInts, std::vector<int64_t>{0, 2, 3})
            .types("T", {0}, kFloat)
            .infer(infer_mvn)
            .kernel(mvn_kernel));
  r.add(OpSchemaBuilder("LRN")
            .versions(13)
            .inputs(1)
            .outputs(1)
            .attr("alpha", AttrType::kFloat, 1e-4f)
            .attr("beta", AttrType::kFloat, 0.75f)
            .attr("bias", AttrType::kFloat, 1.0f)
            .required_attr("size", AttrType::kInt)
            .types("T", {0}, kFloat)
            .infer(infer_lrn)
            .kernel(lrn_kernel));
}

}  // namespace ferrite
