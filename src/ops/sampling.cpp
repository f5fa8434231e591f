// Sampling at computed coordinates: GridSample (opset 16: 4-D with bilinear/bicubic; opset 20:
// N-D with linear/cubic) and AffineGrid (opset 20), which makes the grids GridSample reads.
//
// GridSample follows ONNX's reference implementation step by step, including where it rounds:
// the denormalised coordinates are float32, out-of-range coordinates are clamped (border) or
// reflected (reflection) before interpolating, and every tap then reads its pixel through the
// padding mode again. The N-d interpolation is the product of per-axis weights.
#include <algorithm>
#include <array>
#include <cmath>

#include "ops/elementwise_util.h"
#include "ops/helpers.h"
#include "ops/numeric_cast.h"

namespace ferrite {

namespace {

enum class Pad { kZeros, kBorder, kReflection };
enum class Mode { kNearest, kLinear, kCubic };

struct GridAttrs {
  Mode mode;
  Pad pad;
  bool align_corners;
};

template <class Ctx>
Expected<GridAttrs> grid_attrs(const Ctx& ctx) {
  const Node& n = ctx.node();
  GridAttrs a{};
  std::string mode = n.attr_string("mode", ctx.opset() >= 20 ? "linear" : "bilinear");
  // Opset 20 renamed bilinear/bicubic to linear/cubic (they now apply to any rank).
  const bool v20 = ctx.opset() >= 20;
  if (mode == "nearest")
    a.mode = Mode::kNearest;
  else if (mode == (v20 ? "linear" : "bilinear"))
    a.mode = Mode::kLinear;
  else if (mode == (v20 ? "cubic" : "bicubic"))
    a.mode = Mode::kCubic;
  else
    return ctx.error("mode '", mode, "' is not valid at opset ", ctx.opset());
  std::string pad = n.attr_string("padding_mode", "zeros");
  if (pad == "zeros")
    a.pad = Pad::kZeros;
  else if (pad == "border")
    a.pad = Pad::kBorder;
  else if (pad == "reflection")
    a.pad = Pad::kReflection;
  else
    return ctx.error("padding_mode '", pad, "' is not valid");
  a.align_corners = n.attr_int("align_corners", 0) != 0;
  return a;
}

Status infer_grid_sample(InferContext& ctx) {
  FERRITE_RETURN_IF_ERROR(grid_attrs(ctx).status());
  const Shape& x = ctx.input_shape(0);
  const Shape& grid = ctx.input_shape(1);
  if (!x.rank_known() || !grid.rank_known()) {
    ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
    return Status::ok();
  }
  if (x.rank() < 3 || grid.rank() != x.rank())
    return ctx.error("X ", x.to_string(), " and grid ", grid.to_string(),
                     " must be [N, C, D1..Dr] and [N, H1..Hr, r]");
  if (ctx.opset() < 20 && x.rank() != 4) return ctx.error("GridSample before opset 20 is 4-D");
  const Dim& r = grid.dims().back();
  if (r.is_static() && *r.value() != static_cast<int64_t>(x.rank()) - 2)
    return ctx.error("grid's last dim must be ", x.rank() - 2, ", got ", r.to_string());
  std::vector<Dim> out = {x.dims()[0], x.dims()[1]};
  for (size_t k = 1; k + 1 < grid.rank(); ++k) out.push_back(grid.dims()[k]);
  ctx.set_output(0, ctx.input_dtype(0), Shape(std::move(out)));
  return Status::ok();
}

// Reflects x into [lo, hi] by the nearer border until it lies within.
double reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (!(range > 0)) return lo;  // a 1-long axis with align_corners: nothing to reflect over
  if (x < lo) {
    double dx = lo - x;
    auto n = static_cast<int64_t>(dx / range);
    double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi;
    auto n = static_cast<int64_t>(dx / range);
    double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

void cubic_coeffs(double x, double c[4]) {
  constexpr double a = -0.75;
  x = std::fabs(x);
  c[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
  c[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
  c[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
  c[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
}

struct Sampler {
  GridAttrs a;
  std::vector<int64_t> dims;     // spatial dims of X
  std::vector<double> lo, hi;    // the coordinate borders per axis
  std::vector<int64_t> strides;  // of X's spatial block

  // The index along `axis` that tap index i reads, or -1 for a zero (padding 'zeros').
  int64_t tap_index(size_t axis, int64_t i) const {
    int64_t d = dims[axis];
    if (a.pad == Pad::kZeros) return i >= 0 && i < d ? i : -1;
    if (a.pad == Pad::kBorder) return std::clamp<int64_t>(i, 0, d - 1);
    auto r = static_cast<int64_t>(reflect(static_cast<double>(i), lo[axis], hi[axis]));
    return std::clamp<int64_t>(r, 0, d - 1);
  }

  // Samples one channel (`src`, spatial block) at coordinates x (per axis, X's order).
  double sample(const std::vector<double>& src, std::vector<double> x) const {
    const size_t r = dims.size();
    for (size_t k = 0; k < r; ++k) {
      if (a.mode == Mode::kNearest) x[k] = std::nearbyint(x[k]);
      if (x[k] < lo[k] || x[k] > hi[k]) {
        if (a.pad == Pad::kBorder) x[k] = std::clamp(x[k], 0.0, static_cast<double>(dims[k] - 1));
        if (a.pad == Pad::kReflection) x[k] = reflect(x[k], lo[k], hi[k]);
        x[k] = static_cast<float>(x[k]);
      }
    }
    // Per axis: the taps' first index and weights.
    const int taps = a.mode == Mode::kNearest ? 1 : a.mode == Mode::kLinear ? 2 : 4;
    std::vector<int64_t> first(r);
    std::vector<std::array<double, 4>> w(r);
    for (size_t k = 0; k < r; ++k) {
      if (a.mode == Mode::kNearest) {
        first[k] = static_cast<int64_t>(x[k]);  // truncates, as the reference's int32 cast
        w[k] = {1, 0, 0, 0};
        continue;
      }
      double f = std::floor(x[k]);
      double t = x[k] - f;
      if (a.mode == Mode::kLinear) {
        first[k] = static_cast<int64_t>(f);
        w[k] = {1 - t, t, 0, 0};
      } else {
        first[k] = static_cast<int64_t>(f) - 1;
        cubic_coeffs(t, w[k].data());
      }
    }
    double sum = 0;
    std::vector<int> tap(r, 0);
    while (true) {
      double weight = 1;
      int64_t off = 0;
      for (size_t k = 0; k < r && off >= 0; ++k) {
        weight *= w[k][tap[k]];
        int64_t i = tap_index(k, first[k] + tap[k]);
        off = i < 0 ? -1 : off + i * strides[k];
      }
      if (off >= 0) sum += weight * src[static_cast<size_t>(off)];
      size_t k = r;
      while (k > 0 && ++tap[k - 1] == taps) tap[--k] = 0;
      if (k == 0) break;
    }
    return sum;
  }
};

Status grid_sample_kernel(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(GridAttrs a, grid_attrs(ctx));
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  const size_t r = x.rank() - 2;
  if (x.rank() < 3 || grid.rank() != x.rank() || grid.dims().back() != static_cast<int64_t>(r) ||
      grid.dims()[0] != x.dims()[0])
    return ctx.error("X and grid do not match");
  Sampler s{a, {x.dims().begin() + 2, x.dims().end()}, {}, {}, {}};
  int64_t block = 1;
  s.strides.assign(r, 1);
  for (size_t k = r; k-- > 0;) {
    s.strides[k] = block;
    block *= s.dims[k];
    s.lo.insert(s.lo.begin(), a.align_corners ? 0.0 : -0.5);
    s.hi.insert(s.hi.begin(), static_cast<double>(s.dims[k]) - (a.align_corners ? 1.0 : 0.5));
  }
  std::vector<int64_t> out_dims = {x.dims()[0], x.dims()[1]};
  int64_t points = 1;
  for (size_t k = 1; k + 1 < grid.rank(); ++k) {
    out_dims.push_back(grid.dims()[k]);
    points *= grid.dims()[k];
  }
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out_dims));
  const int64_t n_batch = x.dims()[0], channels = x.dims()[1];
  Status st = Status::ok();
  bool ok = visit_dtype(x.dtype(), [&]<class T>() {
    visit_dtype(grid.dtype(), [&]<class G>() {
      if constexpr (!is_float_v<T> || !is_float_v<G>) {
        st = ctx.error("X and grid must be float");
      } else {
        const T* px = x.data<T>();
        const G* pg = grid.data<G>();
        T* py = y->data<T>();
        std::vector<double> src(static_cast<size_t>(block));
        std::vector<double> coord(r);
        for (int64_t n = 0; n < n_batch; ++n) {
          for (int64_t c = 0; c < channels; ++c) {
            const T* xc = px + (n * channels + c) * block;
            for (int64_t i = 0; i < block; ++i) src[i] = to_double(xc[i]);
            for (int64_t p = 0; p < points; ++p) {
              const G* g = pg + (n * points + p) * static_cast<int64_t>(r);
              // The grid's last dim lists coordinates innermost axis first (x, y, z).
              for (size_t k = 0; k < r; ++k) {
                double v = to_double(g[r - 1 - k]);
                double len = static_cast<double>(s.dims[k]);
                double d = a.align_corners ? (v + 1) / 2.0 * (len - 1) : ((v + 1) * len - 1) / 2.0;
                coord[k] = static_cast<float>(d);
              }
              py[(n * channels + c) * points + p] = convert<T>(s.sample(src, coord));
            }
          }
        }
      }
    });
  });
  if (!ok) return ctx.error("unsupported dtype");
  return st;
}

// AffineGrid: theta [N, r, r+1] and size [N, C, D1..Dr] (r = 2 or 3) give the grid [N, D1..Dr, r]
// of theta applied to the normalised coordinates of every output point (innermost axis first).
Status infer_affine_grid(InferContext& ctx) {
  const Shape& theta = ctx.input_shape(0);
  if (theta.rank_known() && theta.rank() != 3) return ctx.error("theta must be [N, r, r+1]");
  auto size = ctx.input_dims_value(1);
  const Shape& size_shape = ctx.input_shape(1);
  if (size_shape.rank_known() && size_shape.rank() != 1) return ctx.error("size must be 1-D");
  if (!size) {
    ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
    return Status::ok();
  }
  if (size->size() != 4 && size->size() != 5) return ctx.error("size must have 4 or 5 elements");
  std::vector<Dim> out = {(*size)[0]};
  for (size_t k = 2; k < size->size(); ++k) out.push_back((*size)[k]);
  out.emplace_back(static_cast<int64_t>(size->size() - 2));
  ctx.set_output(0, ctx.input_dtype(0), Shape(std::move(out)));
  return Status::ok();
}

Status affine_grid_kernel(KernelContext& ctx) {
  const Tensor& theta = ctx.input(0);
  const Tensor& size = ctx.input(1);
  if (size.dtype() != DType::kI64 || size.rank() != 1 || (size.numel() != 4 && size.numel() != 5))
    return ctx.error("size must be int64 with 4 or 5 elements");
  const int64_t* sz = size.data<int64_t>();
  const size_t r = static_cast<size_t>(size.numel()) - 2;
  const int64_t n_batch = sz[0];
  for (int64_t k = 0; k < size.numel(); ++k)
    if (sz[k] < 0) return ctx.error("size has a negative entry");
  if (theta.rank() != 3 || theta.dims()[0] != n_batch ||
      theta.dims()[1] != static_cast<int64_t>(r) || theta.dims()[2] != static_cast<int64_t>(r + 1))
    return ctx.error("theta must be [", n_batch, ", ", r, ", ", r + 1, "]");
  const bool align = ctx.node().attr_int("align_corners", 0) != 0;
  std::vector<int64_t> out_dims = {n_batch};
  for (size_t k = 0; k < r; ++k) out_dims.push_back(sz[2 + k]);
  out_dims.push_back(static_cast<int64_t>(r));
  // Allocated first: the allocation refuses sizes whose product would overflow.
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, theta.dtype(), out_dims));
  const int64_t points = n_batch == 0 ? 0 : y->numel() / (n_batch * static_cast<int64_t>(r));
  // Normalised coordinate of index i along an axis of length len.
  auto coord = [align](int64_t i, int64_t len) {
    double di = static_cast<double>(i), dl = static_cast<double>(len);
    return align ? (len > 1 ? -1 + 2 * di / (dl - 1) : -1.0) : -1 + (2 * di + 1) / dl;
  };
  return dispatch_dtype<TypeClass::kFloat>(ctx, theta.dtype(), [&]<class T>() -> Status {
    const T* pt = theta.data<T>();
    T* py = y->data<T>();
    std::vector<double> h(r + 1);
    for (int64_t n = 0; n < n_batch; ++n) {
      for (int64_t p = 0; p < points; ++p) {
        // Homogeneous point, innermost axis first: (x, y[, z], 1).
        int64_t rest = p;
        for (size_t k = r; k-- > 0;) {
          int64_t len = sz[2 + k];
          h[r - 1 - k] = coord(rest % len, len);
          rest /= len;
        }
        h[r] = 1;
        for (size_t row = 0; row < r; ++row) {
          double acc = 0;
          for (size_t col = 0; col <= r; ++col)
            acc += to_double(pt[(n * static_cast<int64_t>(r) + static_cast<int64_t>(row)) *
                                    static_cast<int64_t>(r + 1) +
                                static_cast<int64_t>(col)]) *
                   h[col];
          py[(n * points + p) * static_cast<int64_t>(r) + static_cast<int64_t>(row)] =
              convert<T>(acc);
        }
      }
    }
    return Status::ok();
  });
}

}  // namespace

void register_sampling_ops(OpRegistry& r) {
  r.add(OpSchemaBuilder("GridSample")
            .versions(16)
            .inputs(2)
            .outputs(1)
            .attr("align_corners", AttrType::kInt, 0)
            .optional_attr("mode", AttrType::kString)
            .attr("padding_mode", AttrType::kString, "zeros")
            .types("T1", {0}, dtypes::kFloat)
            .types("T2", {1}, dtypes::kFloat)
            .infer(infer_grid_sample)
            .kernel(grid_sample_kernel));
  r.add(OpSchemaBuilder("AffineGrid")
            .versions(20)
            .inputs(2)
            .outputs(1)
            .attr("align_corners", AttrType::kInt, 0)
            .types("T1", {0}, dtypes::kFloat)
            .types("tensor(int64)", {1}, {DType::kI64})
            .infer(infer_affine_grid)
            .kernel(affine_grid_kernel));
}

}  // namespace ferrite
