// Resize (opsets 13, 18, 19): nearest / linear / cubic interpolation with every coordinate
// transformation mode, antialiasing, axes and keep_aspect_ratio_policy.
//
// Each resized axis gets a list of (input index, weight) taps per output coordinate; nearest mode
// gathers, linear and cubic apply the taps one axis at a time in double (the N-d weights are the
// products of the per-axis ones, so separable passes compute the same sum).
#include <algorithm>
#include <cmath>

#include "ops/helpers.h"
#include "ops/numeric_cast.h"

namespace ferrite {

namespace {

struct ResizeAttrs {
  std::string mode, ctm, nearest_mode, policy;
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false, antialias = false;
  std::vector<int64_t> axes;  // as given (may be negative); empty = all
  bool has_axes = false;
};

template <class Ctx>
Expected<ResizeAttrs> read_attrs(const Ctx& ctx) {
  const Node& n = ctx.node();
  ResizeAttrs a;
  a.mode = n.attr_string("mode", "nearest");
  a.ctm = n.attr_string("coordinate_transformation_mode", "half_pixel");
  a.nearest_mode = n.attr_string("nearest_mode", "round_prefer_floor");
  a.policy = n.attr_string("keep_aspect_ratio_policy", "stretch");
  a.cubic_a = n.attr_float("cubic_coeff_a", -0.75f);
  a.extrapolation = n.attr_float("extrapolation_value", 0.0f);
  a.exclude_outside = n.attr_int("exclude_outside") != 0;
  a.antialias = n.attr_int("antialias") != 0;
  a.has_axes = n.has_attr("axes");
  a.axes = n.attr_ints("axes");
  if (a.mode != "nearest" && a.mode != "linear" && a.mode != "cubic")
    return ctx.error("unknown mode '", a.mode, "'");
  static const char* kModes[] = {"half_pixel",    "half_pixel_symmetric", "pytorch_half_pixel",
                                 "align_corners", "asymmetric",           "tf_crop_and_resize"};
  if (std::find(std::begin(kModes), std::end(kModes), a.ctm) == std::end(kModes))
    return ctx.error("unknown coordinate_transformation_mode '", a.ctm, "'");
  if (a.ctm == "half_pixel_symmetric" && n.opset < 19)
    return ctx.error("half_pixel_symmetric needs opset 19");
  if (a.nearest_mode != "round_prefer_floor" && a.nearest_mode != "round_prefer_ceil" &&
      a.nearest_mode != "floor" && a.nearest_mode != "ceil")
    return ctx.error("unknown nearest_mode '", a.nearest_mode, "'");
  if (a.policy != "stretch" && a.policy != "not_larger" && a.policy != "not_smaller")
    return ctx.error("unknown keep_aspect_ratio_policy '", a.policy, "'");
  if (n.opset < 18 && (a.antialias || a.has_axes || a.policy != "stretch"))
    return ctx.error("antialias, axes and keep_aspect_ratio_policy need opset 18");
  return a;
}

// Resized axes, normalised and checked; all axes when the attribute is absent.
template <class Ctx>
Expected<std::vector<int64_t>> resolve_axes(const Ctx& ctx, const ResizeAttrs& a, int64_t rank) {
  std::vector<int64_t> axes;
  if (!a.has_axes) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    return axes;
  }
  for (int64_t ax : a.axes) {
    if (ax < -rank || ax >= rank) return ctx.error("axis ", ax, " is out of range for rank ", rank);
    int64_t n = ax < 0 ? ax + rank : ax;
    if (std::find(axes.begin(), axes.end(), n) != axes.end())
      return ctx.error("axis ", ax, " is repeated in axes");
    axes.push_back(n);
  }
  return axes;
}

// Sizes take over when the sizes input is given and not empty (opset 13 models pass an empty
// scales tensor alongside sizes).
bool uses_sizes(const InferContext& ctx) {
  if (!ctx.has_input(3)) return false;
  const Shape& s = ctx.input_shape(3);
  return !(s.rank_known() && s.rank() == 1 && s[0].value() == 0);
}

// Output dims and per-axis scales of a concrete resize.
struct Plan {
  std::vector<int64_t> out;
  std::vector<double> scale;
  std::vector<double> out_width;  // scale * in: fractional when computed from scales
  std::vector<double> roi_start, roi_end;
};

Expected<Plan> make_plan(const KernelContext& ctx, const ResizeAttrs& a,
                         const std::vector<int64_t>& in) {
  int64_t rank = static_cast<int64_t>(in.size());
  FERRITE_ASSIGN_OR_RETURN(auto axes, resolve_axes(ctx, a, rank));
  size_t na = axes.size();
  Plan p;
  p.out = in;
  p.scale.assign(rank, 1.0);
  p.roi_start.assign(rank, 0.0);
  p.roi_end.assign(rank, 1.0);
  for (int64_t d : in) p.out_width.push_back(static_cast<double>(d));
  if (a.ctm == "tf_crop_and_resize") {
    if (!ctx.has_input(1)) return ctx.error("tf_crop_and_resize needs the roi input");
    const Tensor& roi = ctx.input(1);
    if (static_cast<size_t>(roi.numel()) != 2 * na)
      return ctx.error("roi must hold ", 2 * na, " values, got ", roi.type_string());
    for (size_t i = 0; i < na; ++i) {
      p.roi_start[axes[i]] = roi.double_at(static_cast<int64_t>(i));
      p.roi_end[axes[i]] = roi.double_at(static_cast<int64_t>(na + i));
    }
  }
  bool have_sizes = ctx.has_input(3) && ctx.input(3).numel() > 0;
  bool have_scales = ctx.has_input(2) && ctx.input(2).numel() > 0;
  if (have_sizes == have_scales) return ctx.error("exactly one of scales and sizes must be given");
  if (have_scales) {
    const Tensor& s = ctx.input(2);
    if (s.rank() != 1 || static_cast<size_t>(s.numel()) != na)
      return ctx.error("scales must be 1-d with ", na, " values, got ", s.type_string());
    for (size_t i = 0; i < na; ++i) {
      double sc = s.double_at(static_cast<int64_t>(i));
      if (!(sc > 0) || !std::isfinite(sc)) return ctx.error("scales must be positive, got ", sc);
      int64_t d = axes[i];
      p.scale[d] = sc;
      // floor(in * scale) in float, as ONNX shape inference and ONNX Runtime compute it (the roi
      // range is not applied here either, matching both).
      float prod = static_cast<float>(in[d]) * static_cast<float>(sc);
      if (!(prod < 9.0e15f)) return ctx.error("output dimension overflows");
      p.out[d] = static_cast<int64_t>(std::floor(prod));
      p.out_width[d] = sc * static_cast<double>(in[d]);
    }
    return p;
  }
  const Tensor& sz = ctx.input(3);
  if (sz.rank() != 1 || static_cast<size_t>(sz.numel()) != na)
    return ctx.error("sizes must be 1-d with ", na, " values, got ", sz.type_string());
  std::vector<int64_t> sizes = sz.to_int_vector();
  for (size_t i = 0; i < na; ++i) {
    if (sizes[i] < 0) return ctx.error("sizes must be >= 0, got ", sizes[i]);
    if (in[axes[i]] == 0 && sizes[i] > 0)
      return ctx.error("cannot resize an empty axis to ", sizes[i]);
  }
  if (a.policy == "stretch") {
    for (size_t i = 0; i < na; ++i) {
      int64_t d = axes[i];
      p.out[d] = sizes[i];
      p.out_width[d] = static_cast<double>(sizes[i]);
      p.scale[d] = in[d] == 0 ? 1.0 : static_cast<double>(sizes[i]) / static_cast<double>(in[d]);
    }
    return p;
  }
  double s = a.policy == "not_larger" ? HUGE_VAL : 0.0;
  for (size_t i = 0; i < na; ++i) {
    if (in[axes[i]] == 0) continue;
    double r = static_cast<double>(sizes[i]) / static_cast<double>(in[axes[i]]);
    s = a.policy == "not_larger" ? std::min(s, r) : std::max(s, r);
  }
  if (!std::isfinite(s) || s <= 0) s = 1.0;
  for (size_t i = 0; i < na; ++i) {
    int64_t d = axes[i];
    p.scale[d] = s;
    p.out_width[d] = s * static_cast<double>(in[d]);
    p.out[d] = static_cast<int64_t>(p.out_width[d] + 0.5);  // round half up
  }
  return p;
}

// Taps of one axis: `count` (index, weight) pairs per output coordinate.
struct AxisTaps {
  int64_t count = 1;
  std::vector<int64_t> idx;
  std::vector<double> w;
  std::vector<char> outside;  // tf_crop_and_resize: coordinate falls outside the input
  bool identity = false;
};

double cubic_weight(double x, double A) {
  x = std::fabs(x);
  if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
  if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  return 0;
}

Expected<AxisTaps> axis_taps(const KernelContext& ctx, const ResizeAttrs& a, int64_t in,
                             int64_t out, double scale, double out_width, double roi_start,
                             double roi_end) {
  AxisTaps t;
  bool nearest = a.mode == "nearest";
  // Window of tap offsets relative to `base` (see below) and the weight function.
  int64_t w_start = 0, w_end = 1;
  double ws = 1;  // argument scale: antialiasing stretches the filter by 1/scale on downsampling
  if (!nearest) {
    if (a.antialias) ws = std::min(scale, 1.0);
    if (ws < 1e-9) return ctx.error("scale ", scale, " is too small to antialias");
    if (a.mode == "linear") {
      w_start = a.antialias ? static_cast<int64_t>(std::floor(-1 / ws)) + 1 : 0;
      w_end = 2 - w_start;
    } else {
      w_start = a.antialias ? static_cast<int64_t>(std::floor(-2 / ws)) + 1 : -1;
      w_end = 2 - w_start;
    }
  }
  t.count = w_end - w_start;
  t.idx.resize(static_cast<size_t>(out * t.count));
  t.w.resize(static_cast<size_t>(out * t.count));
  t.outside.assign(static_cast<size_t>(out), 0);
  const double len = static_cast<double>(in);
  for (int64_t x = 0; x < out; ++x) {
    double xr = static_cast<double>(x);
    double xo = 0;
    if (a.ctm == "half_pixel") {
      xo = (xr + 0.5) / scale - 0.5;
    } else if (a.ctm == "half_pixel_symmetric") {
      double adjustment = static_cast<double>(out) / out_width;
      double offset = len / 2 * (1 - adjustment);
      xo = offset + (xr + 0.5) / scale - 0.5;
    } else if (a.ctm == "pytorch_half_pixel") {
      xo = out_width == 1 ? -0.5 : (xr + 0.5) / scale - 0.5;
    } else if (a.ctm == "align_corners") {
      xo = out_width == 1 ? 0 : xr * (len - 1) / (out_width - 1);
    } else if (a.ctm == "asymmetric") {
      xo = xr / scale;
    } else {  // tf_crop_and_resize
      xo = out_width == 1 ? (roi_end - roi_start) * (len - 1) / 2
                          : xr * (roi_end - roi_start) * (len - 1) / (out_width - 1);
      xo += roi_start * (len - 1);
      if (xo < 0 || xo > len - 1) t.outside[x] = 1;
    }
    if (!std::isfinite(xo) || std::fabs(xo) > 1e15)
      return ctx.error("coordinate transformation gives an invalid source coordinate");
    int64_t* idx = &t.idx[x * t.count];
    double* w = &t.w[x * t.count];
    auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
    double fl = std::floor(xo);
    if (nearest) {
      double r = xo - fl;
      int64_t i = static_cast<int64_t>(fl);
      if (r != 0) {
        bool up = a.nearest_mode == "ceil" || (a.nearest_mode == "round_prefer_floor" && r > 0.5) ||
                  (a.nearest_mode == "round_prefer_ceil" && r >= 0.5);
        if (up) ++i;
      }
      idx[0] = clamp(i);
      w[0] = 1;
      continue;
    }
    // The sample point lies in (base, base+1]; an integral coordinate counts as ratio 1 of the
    // interval to its left, which keeps antialias windows where the ONNX reference puts them.
    int64_t base = static_cast<int64_t>(fl);
    double ratio = xo - fl;
    if (ratio == 0) {
      base -= 1;
      ratio = 1;
    }
    double sum = 0;
    for (int64_t j = 0; j < t.count; ++j) {
      int64_t off = w_start + j;
      double arg = ws * (static_cast<double>(off) - ratio);
      double wt =
          a.mode == "linear" ? std::max(0.0, 1 - std::fabs(arg)) : cubic_weight(arg, a.cubic_a);
      int64_t pos = base + off;
      if (a.exclude_outside && (pos < 0 || pos >= in)) wt = 0;
      idx[j] = clamp(pos);
      w[j] = wt;
      sum += wt;
    }
    if ((a.antialias || a.exclude_outside) && sum != 0)
      for (int64_t j = 0; j < t.count; ++j) w[j] /= sum;
  }
  if (out == in && t.count == 1) {
    t.identity = true;
    for (int64_t x = 0; x < out && t.identity; ++x) t.identity = t.idx[x] == x && !t.outside[x];
  }
  return t;
}

Status resize_kernel(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(ResizeAttrs a, read_attrs(ctx));
  const Tensor& x = ctx.input(0);
  const std::vector<int64_t>& in = x.dims();
  int64_t rank = static_cast<int64_t>(in.size());
  FERRITE_ASSIGN_OR_RETURN(Plan p, make_plan(ctx, a, in));
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), p.out));
  if (y->numel() == 0) return Status::ok();
  if (x.numel() == 0) return ctx.error("cannot resize an empty tensor to a non-empty one");
  std::vector<AxisTaps> taps;
  for (int64_t d = 0; d < rank; ++d) {
    FERRITE_ASSIGN_OR_RETURN(AxisTaps t, axis_taps(ctx, a, in[d], p.out[d], p.scale[d],
                                                   p.out_width[d], p.roi_start[d], p.roi_end[d]));
    taps.push_back(std::move(t));
  }
  bool any_outside = false;
  for (const auto& t : taps)
    for (char c : t.outside) any_outside |= c != 0;
  std::vector<int64_t> in_strides = contiguous_strides(in);

  visit_dtype(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* py = y->data<T>();
    if (a.mode == "nearest") {
      // Gather: output offset -> input offset as a sum of per-axis contributions.
      std::vector<int64_t> idx(rank, 0);
      for (int64_t o = 0; o < y->numel(); ++o) {
        int64_t off = 0;
        bool outside = false;
        for (int64_t d = 0; d < rank; ++d) {
          off += taps[d].idx[idx[d]] * in_strides[d];
          outside |= taps[d].outside[idx[d]] != 0;
        }
        py[o] = outside ? saturate_cast<T>(a.extrapolation) : px[off];
        for (int64_t d = rank - 1; d >= 0; --d) {
          if (++idx[d] < p.out[d]) break;
          idx[d] = 0;
        }
      }
      return;
    }
    // Separable passes over a double buffer, one resized axis at a time.
    std::vector<double> cur(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) cur[i] = to_double(px[i]);
    std::vector<int64_t> dims = in;
    for (int64_t d = 0; d < rank; ++d) {
      const AxisTaps& t = taps[d];
      if (t.identity) continue;
      int64_t outer = 1, inner = 1;
      for (int64_t i = 0; i < d; ++i) outer *= dims[i];
      for (int64_t i = d + 1; i < rank; ++i) inner *= dims[i];
      int64_t n_in = dims[d], n_out = p.out[d];
      std::vector<double> next(static_cast<size_t>(outer * n_out * inner), 0.0);
      for (int64_t o = 0; o < outer; ++o) {
        const double* src = &cur[o * n_in * inner];
        double* dst = &next[o * n_out * inner];
        for (int64_t xo = 0; xo < n_out; ++xo) {
          double* drow = dst + xo * inner;
          for (int64_t j = 0; j < t.count; ++j) {
            double wt = t.w[xo * t.count + j];
            if (wt == 0) continue;
            const double* srow = src + t.idx[xo * t.count + j] * inner;
            for (int64_t i = 0; i < inner; ++i) drow[i] += wt * srow[i];
          }
        }
      }
      cur.swap(next);
      dims[d] = n_out;
    }
    for (int64_t i = 0; i < y->numel(); ++i) py[i] = saturate_cast<T>(cur[i]);
    if (any_outside) {
      std::vector<int64_t> idx(rank, 0);
      for (int64_t o = 0; o < y->numel(); ++o) {
        bool outside = false;
        for (int64_t d = 0; d < rank; ++d) outside |= taps[d].outside[idx[d]] != 0;
        if (outside) py[o] = saturate_cast<T>(a.extrapolation);
        for (int64_t d = rank - 1; d >= 0; --d) {
          if (++idx[d] < p.out[d]) break;
          idx[d] = 0;
        }
      }
    }
  });
  return Status::ok();
}

Status infer_resize(InferContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(ResizeAttrs a, read_attrs(ctx));
  const Shape& in = ctx.input_shape(0);
  DType dt = ctx.input_dtype(0);
  if (!in.rank_known()) {
    ctx.set_output(0, dt, Shape::unknown_rank());
    return Status::ok();
  }
  int64_t rank = static_cast<int64_t>(in.rank());
  FERRITE_ASSIGN_OR_RETURN(auto axes, resolve_axes(ctx, a, rank));
  std::vector<Dim> out = in.dims();
  for (int64_t d : axes) out[d] = Dim::unknown();
  if (uses_sizes(ctx)) {
    auto sizes = ctx.input_dims_value(3);
    if (sizes && sizes->size() != axes.size())
      return ctx.error("sizes must hold ", axes.size(), " values, got ", sizes->size());
    if (sizes && a.policy == "stretch") {
      for (size_t i = 0; i < axes.size(); ++i) out[axes[i]] = (*sizes)[i];
    } else if (sizes) {
      // The common scale needs concrete numbers.
      bool all_static = true;
      double s = a.policy == "not_larger" ? HUGE_VAL : 0.0;
      for (size_t i = 0; i < axes.size(); ++i) {
        const Dim& sd = (*sizes)[i];
        const Dim& id = in[axes[i]];
        if (!sd.is_static() || !id.is_static() || *id.value() <= 0) {
          all_static = false;
          break;
        }
        double r = static_cast<double>(*sd.value()) / static_cast<double>(*id.value());
        s = a.policy == "not_larger" ? std::min(s, r) : std::max(s, r);
      }
      if (all_static && std::isfinite(s) && s > 0)
        for (int64_t d : axes)
          out[d] = Dim(static_cast<int64_t>(s * static_cast<double>(*in[d].value()) + 0.5));
    }
  } else if (const Tensor* sc = ctx.has_input(2) ? ctx.input_constant(2) : nullptr) {
    if (sc->rank() != 1 || static_cast<size_t>(sc->numel()) != axes.size())
      return ctx.error("scales must be 1-d with ", axes.size(), " values, got ", sc->type_string());
    for (size_t i = 0; i < axes.size(); ++i) {
      double s = sc->double_at(static_cast<int64_t>(i));
      if (!(s > 0) || !std::isfinite(s)) return ctx.error("scales must be positive, got ", s);
      const Dim& id = in[axes[i]];
      if (id.is_static()) {
        float prod = static_cast<float>(*id.value()) * static_cast<float>(s);
        if (prod < 9.0e15f) out[axes[i]] = Dim(static_cast<int64_t>(std::floor(prod)));
      } else {
        // A scale p/q with q a small power of two is exact in float, so floor(dim * scale) is
        // the symbolic (dim * p) // q.
        for (int64_t q = 1; q <= 1024; q *= 2) {
          double pq = s * static_cast<double>(q);
          if (pq == std::floor(pq) && pq < 1e9) {
            out[axes[i]] = (id * Dim(static_cast<int64_t>(pq))).floordiv(Dim(q));
            break;
          }
        }
      }
    }
  } else if (!ctx.has_input(2)) {
    return ctx.error("one of scales and sizes must be given");
  }
  ctx.set_output(0, dt, Shape(out));
  return Status::ok();
}

}  // namespace

void register_resize_ops(OpRegistry& r) {
  r.add(OpSchemaBuilder("Resize")
            .versions(13)
            .inputs(1, 4)
            .outputs(1)
            .attr("antialias", AttrType::kInt, 0)
            .optional_attr("axes", AttrType::kInts)
            .attr("coordinate_transformation_mode", AttrType::kString, "half_pixel")
            .attr("cubic_coeff_a", AttrType::kFloat, -0.75f)
            .attr("exclude_outside", AttrType::kInt, 0)
            .attr("extrapolation_value", AttrType::kFloat, 0.0f)
            .attr("keep_aspect_ratio_policy", AttrType::kString, "stretch")
            .attr("mode", AttrType::kString, "nearest")
            .attr("nearest_mode", AttrType::kString, "round_prefer_floor")
            .types("T1", {0}, dtypes::kAll)
            .types("T2", {1}, dtypes::kFloat)
            .types("tensor(float)", {2}, {DType::kF32})
            .types("tensor(int64)", {3}, {DType::kI64})
            .infer(infer_resize)
            .kernel(resize_kernel));
}

}  // namespace ferrite
