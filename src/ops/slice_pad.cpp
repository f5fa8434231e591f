// Region ops of the shape family: Slice, Pad, CenterCropPad, Trilu, DepthToSpace, SpaceToDepth.
#include <algorithm>
#include <cstring>

#include "ops/shape_helpers.h"

namespace ferrite {

namespace {

using namespace dtypes;

// ---- Slice ----

Status infer_slice(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  const Shape& in = ctx.input_shape(0);
  if (!in.rank_known()) {
    ctx.set_output(0, dt, Shape::unknown_rank());
    return Status::ok();
  }
  int64_t rank = static_cast<int64_t>(in.rank());
  auto starts = ctx.input_dims_value(1), ends = ctx.input_dims_value(2);
  std::optional<std::vector<int64_t>> axes, steps;
  bool axes_known = true, steps_known = true;
  if (ctx.has_input(3)) axes_known = (axes = static_values(ctx.input_dims_value(3))).has_value();
  if (ctx.has_input(4)) steps_known = (steps = static_values(ctx.input_dims_value(4))).has_value();
  std::vector<Dim> out = in.dims();
  if (!starts || !ends || !axes_known || !steps_known) {
    // The sliced axes lose their size; without known axes that is every axis.
    if (axes_known && axes) {
      FERRITE_ASSIGN_OR_RETURN(auto norm, normalize_axes(ctx, *axes, rank));
      for (int64_t a : norm) out[a] = Dim::unknown();
    } else if (axes_known && starts) {
      for (size_t a = 0; a < starts->size() && a < out.size(); ++a) out[a] = Dim::unknown();
    } else {
      out.assign(out.size(), Dim::unknown());
    }
    ctx.set_output(0, dt, Shape(out));
    return Status::ok();
  }
  size_t n = starts->size();
  if (ends->size() != n)
    return ctx.error("starts and ends have different lengths (", n, " vs ", ends->size(), ")");
  if (!axes) {
    axes.emplace();
    for (size_t i = 0; i < n; ++i) axes->push_back(static_cast<int64_t>(i));
  }
  if (!steps) steps = std::vector<int64_t>(n, 1);
  if (axes->size() != n || steps->size() != n)
    return ctx.error("starts, ends, axes and steps must have the same length");
  FERRITE_ASSIGN_OR_RETURN(auto norm, normalize_axes(ctx, *axes, rank));
  for (size_t k = 0; k < n; ++k) {
    if ((*steps)[k] == 0) return ctx.error("slice step cannot be 0");
    out[norm[k]] = slice_length(in[norm[k]], (*starts)[k], (*ends)[k], (*steps)[k]);
  }
  Shape result(out);
  ctx.set_output(0, dt, result);
  // Slicing a 1-D dims value (e.g. Shape(x)[-1:]) keeps its symbolic elements.
  auto value = ctx.input_dims_value(0);
  auto s = static_values(starts), e = static_values(ends);
  if (value && rank == 1 && n == 0) ctx.set_output_dims_value(0, *value);
  if (value && rank == 1 && n == 1 && s && e && out[0].value()) {
    SliceRange r = static_slice(static_cast<int64_t>(value->size()), (*s)[0], (*e)[0], (*steps)[0]);
    std::vector<Dim> sliced;
    for (int64_t i = 0; i < r.count; ++i) sliced.push_back((*value)[r.start + i * r.step]);
    if (static_cast<int64_t>(sliced.size()) == *out[0].value())
      ctx.set_output_dims_value(0, std::move(sliced));
  }
  return Status::ok();
}

Status slice_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t rank = static_cast<int64_t>(x.rank());
  for (size_t i = 1; i < 5; ++i)
    if (ctx.has_input(i) && ctx.input(i).rank() != 1)
      return ctx.error("input ", i, " must be 1-D, got ", ctx.input(i).type_string());
  auto starts = ctx.input(1).to_int_vector();
  auto ends = ctx.input(2).to_int_vector();
  size_t n = starts.size();
  std::vector<int64_t> axes = optional_int_input(ctx, 3);
  std::vector<int64_t> steps = optional_int_input(ctx, 4);
  if (!ctx.has_input(3))
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  if (!ctx.has_input(4)) steps.assign(n, 1);
  if (ends.size() != n || axes.size() != n || steps.size() != n)
    return ctx.error("starts, ends, axes and steps must have the same length");
  FERRITE_ASSIGN_OR_RETURN(auto norm, normalize_axes(ctx, axes, rank));
  auto strides = contiguous_strides(x.dims());
  std::vector<std::vector<int64_t>> maps;
  for (int64_t d = 0; d < rank; ++d) maps.push_back(iota_map(x.dim(d), strides[d]));
  for (size_t k = 0; k < n; ++k) {
    if (steps[k] == 0) return ctx.error("slice step cannot be 0");
    int64_t a = norm[k];
    SliceRange r = static_slice(x.dim(a), starts[k], ends[k], steps[k]);
    maps[a] = iota_map(r.count, strides[a], r.start, r.step);
  }
  std::vector<int64_t> out;
  for (const auto& m : maps) out.push_back(static_cast<int64_t>(m.size()));
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out));
  copy_by_axis_maps(x, *y, maps);
  return Status::ok();
}

// ---- Pad ----

template <class Ctx>
Status check_pad_mode(const Ctx& ctx, const std::string& mode) {
  if (mode == "constant" || mode == "reflect" || mode == "edge") return Status::ok();
  if (mode == "wrap") {
    if (ctx.opset() >= 19) return Status::ok();
    return ctx.error("pad mode 'wrap' needs opset 19, the model has ", ctx.opset());
  }
  return ctx.error("unknown pad mode '", mode, "'");
}

template <class Ctx>
Status check_pad_axes_input(const Ctx& ctx) {
  if (ctx.opset() < 18 && ctx.num_inputs() > 3 && ctx.has_input(3))
    return ctx.error("the axes input needs opset 18, the model has ", ctx.opset());
  return Status::ok();
}

Status infer_pad(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  std::string mode = ctx.node().attr_string("mode", "constant");
  FERRITE_RETURN_IF_ERROR(check_pad_mode(ctx, mode));
  FERRITE_RETURN_IF_ERROR(check_pad_axes_input(ctx));
  const Shape& in = ctx.input_shape(0);
  if (!in.rank_known()) {
    ctx.set_output(0, dt, Shape::unknown_rank());
    return Status::ok();
  }
  int64_t rank = static_cast<int64_t>(in.rank());
  std::vector<int64_t> axes;
  if (ctx.has_input(3)) {
    auto a = static_values(ctx.input_dims_value(3));
    if (!a) {
      ctx.set_output(0, dt, Shape(std::vector<Dim>(in.rank())));
      return Status::ok();
    }
    FERRITE_ASSIGN_OR_RETURN(axes, normalize_axes(ctx, *a, rank));
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  std::vector<Dim> out = in.dims();
  auto pads = ctx.input_dims_value(1);
  if (!pads) {
    for (int64_t a : axes) out[a] = Dim::unknown();
    ctx.set_output(0, dt, Shape(out));
    return Status::ok();
  }
  size_t n = axes.size();
  if (pads->size() != 2 * n)
    return ctx.error("pads has ", pads->size(), " entries, expected ", 2 * n);
  for (size_t k = 0; k < n; ++k) {
    if (!small_static((*pads)[k]) || !small_static((*pads)[k + n])) {
      out[axes[k]] = Dim::unknown();
      continue;
    }
    out[axes[k]] = in[axes[k]] + (*pads)[k] + (*pads)[k + n];
    if (auto v = out[axes[k]].value(); v && *v < 0)
      return ctx.error("pads make axis ", axes[k], " negative (", *v, ")");
    // Outside constant mode crops come off the original axis first, so they may not overlap.
    auto d = in[axes[k]].value(), pb = (*pads)[k].value(), pe = (*pads)[k + n].value();
    if (mode != "constant" && d && pb && pe &&
        *d + std::min<int64_t>(*pb, 0) + std::min<int64_t>(*pe, 0) < 0)
      return ctx.error("pads ", *pb, ", ", *pe, " crop more than axis ", axes[k], " of size ", *d);
  }
  ctx.set_output(0, dt, Shape(out));
  return Status::ok();
}

// Source coordinate of padded coordinate x (may be outside [0, d)) for the non-constant modes.
int64_t pad_source(const std::string& mode, int64_t x, int64_t d) {
  if (mode == "edge") return std::clamp<int64_t>(x, 0, d - 1);
  if (mode == "wrap") return ((x % d) + d) % d;
  // reflect: mirror without repeating the edge, periodically for pads wider than the axis.
  if (d == 1) return 0;
  int64_t period = 2 * (d - 1);
  int64_t m = ((x % period) + period) % period;
  return m < d ? m : period - m;
}

Status pad_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::string mode = ctx.node().attr_string("mode", "constant");
  FERRITE_RETURN_IF_ERROR(check_pad_mode(ctx, mode));
  FERRITE_RETURN_IF_ERROR(check_pad_axes_input(ctx));
  int64_t rank = static_cast<int64_t>(x.rank());
  auto pads = ctx.input(1).to_int_vector();
  std::vector<int64_t> axes;
  if (ctx.has_input(3)) {
    FERRITE_ASSIGN_OR_RETURN(axes, normalize_axes(ctx, ctx.input(3).to_int_vector(), rank));
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  size_t n = axes.size();
  if (pads.size() != 2 * n)
    return ctx.error("pads has ", pads.size(), " entries, expected ", 2 * n);
  // In constant mode a negative pad crops the padded axis (output coordinate o reads input
  // o - pads_begin). The other modes crop first and pad what is left of the axis, [lo, hi), as
  // ONNX Runtime does.
  bool constant = mode == "constant";
  std::vector<int64_t> before(x.rank(), 0), lo(x.rank(), 0), hi = x.dims(), out = x.dims();
  for (size_t k = 0; k < n; ++k) {
    int64_t a = axes[k], pb = pads[k], pe = pads[k + n];
    bool bad = pb <= -kHugeDim || pe <= -kHugeDim || pb >= kHugeDim || pe >= kHugeDim;
    if (!bad && constant) {
      before[a] = pb;
      out[a] = x.dim(a) + pb + pe;
      bad = out[a] < 0;
    } else if (!bad) {
      lo[a] = std::max<int64_t>(-pb, 0);
      hi[a] = x.dim(a) - std::max<int64_t>(-pe, 0);
      before[a] = std::max<int64_t>(pb, 0);
      out[a] = hi[a] - lo[a] + before[a] + std::max<int64_t>(pe, 0);
    }
    if (bad || hi[a] < lo[a])
      return ctx.error("pads ", dims_to_string(pads), " are invalid for input ", x.type_string());
  }
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out));
  if (constant) {
    if (ctx.has_input(2) && ctx.input(2).numel() > 0) fill_with(*y, ctx.input(2).raw());
  }
  auto strides = contiguous_strides(x.dims());
  std::vector<std::vector<int64_t>> maps;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t size = hi[d] - lo[d];
    if (!constant && size == 0 && out[d] > 0)
      return ctx.error("cannot pad the empty axis ", d, " in mode '", mode, "'");
    std::vector<int64_t> m(static_cast<size_t>(out[d]));
    for (int64_t o = 0; o < out[d]; ++o) {
      int64_t src = o - before[d];
      if (src < 0 || src >= size) src = constant ? -1 : pad_source(mode, src, size);
      m[o] = src < 0 ? -1 : (lo[d] + src) * strides[d];
    }
    maps.push_back(std::move(m));
  }
  if (y->numel() > 0 && x.numel() > 0) copy_by_axis_maps(x, *y, maps);
  return Status::ok();
}

// ---- CenterCropPad ----

template <class Ctx>
Expected<std::vector<int64_t>> crop_pad_axes(const Ctx& ctx, int64_t rank) {
  std::vector<int64_t> axes;
  if (ctx.node().has_attr("axes")) return normalize_axes(ctx, ctx.node().attr_ints("axes"), rank);
  for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  return axes;
}

Status infer_center_crop_pad(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  const Shape& in = ctx.input_shape(0);
  if (!in.rank_known()) {
    ctx.set_output(0, dt, Shape::unknown_rank());
    return Status::ok();
  }
  FERRITE_ASSIGN_OR_RETURN(auto axes, crop_pad_axes(ctx, static_cast<int64_t>(in.rank())));
  auto shape = ctx.input_dims_value(1);
  std::vector<Dim> out = in.dims();
  if (shape && shape->size() != axes.size())
    return ctx.error("shape has ", shape->size(), " entries for ", axes.size(), " axes");
  for (size_t k = 0; k < axes.size(); ++k) out[axes[k]] = shape ? (*shape)[k] : Dim::unknown();
  ctx.set_output(0, dt, Shape(out));
  return Status::ok();
}

Status center_crop_pad_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t rank = static_cast<int64_t>(x.rank());
  FERRITE_ASSIGN_OR_RETURN(auto axes, crop_pad_axes(ctx, rank));
  auto shape = ctx.input(1).to_int_vector();
  if (shape.size() != axes.size())
    return ctx.error("shape has ", shape.size(), " entries for ", axes.size(), " axes");
  std::vector<int64_t> out = x.dims(), shift(x.rank(), 0);
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t a = axes[k], d = x.dim(a), t = shape[k];
    if (t < 0) return ctx.error("target size ", t, " is negative");
    out[a] = t;
    shift[a] = t < d ? (d - t) / 2 : -((t - d) / 2);  // crop offset, or minus the pad before
  }
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out));
  auto strides = contiguous_strides(x.dims());
  std::vector<std::vector<int64_t>> maps;
  for (int64_t d = 0; d < rank; ++d) {
    std::vector<int64_t> m(static_cast<size_t>(out[d]));
    for (int64_t o = 0; o < out[d]; ++o) {
      int64_t src = o + shift[d];
      m[o] = src >= 0 && src < x.dim(d) ? src * strides[d] : -1;
    }
    maps.push_back(std::move(m));
  }
  if (y->numel() > 0 && x.numel() > 0) copy_by_axis_maps(x, *y, maps);
  return Status::ok();
}

// ---- Trilu ----

Status infer_trilu(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  if (in.rank_known() && in.rank() < 2)
    return ctx.error("input must have rank >= 2, got ", in.to_string());
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

Status trilu_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.error("input must have rank >= 2, got ", x.type_string());
  int64_t k = 0;
  if (ctx.has_input(1)) {
    if (ctx.input(1).numel() != 1) return ctx.error("k must be a scalar");
    k = ctx.input(1).int_at(0);
  }
  bool upper = ctx.node().attr_int("upper", 1) != 0;
  FERRITE_ASSIGN_OR_RETURN(Tensor out, x.try_clone());
  int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  int64_t mats = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  size_t esz = dtype_size(x.dtype());
  auto* p = static_cast<uint8_t*>(out.raw());
  for (int64_t b = 0; b < mats; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        bool keep = upper ? j - i >= k : j - i <= k;
        if (!keep) std::memset(p + ((b * rows + i) * cols + j) * esz, 0, esz);
      }
  ctx.set_output(0, std::move(out));
  return Status::ok();
}

// ---- DepthToSpace, SpaceToDepth ----

template <class Ctx>
Expected<int64_t> blocksize(const Ctx& ctx) {
  int64_t b = ctx.node().attr_int("blocksize");
  if (b <= 0 || b > (int64_t{1} << 20)) return ctx.error("blocksize must be in [1, 2^20], got ", b);
  return b;
}

Status infer_depth_to_space(InferContext& ctx, bool to_space) {
  DType dt = ctx.input_dtype(0);
  const Shape& in = ctx.input_shape(0);
  FERRITE_ASSIGN_OR_RETURN(int64_t b, blocksize(ctx));
  if (ctx.node().op_type == "DepthToSpace") {
    std::string mode = ctx.node().attr_string("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") return ctx.error("unknown mode '", mode, "'");
  }
  if (!in.rank_known()) {
    ctx.set_output(0, dt, Shape(std::vector<Dim>(4)));
    return Status::ok();
  }
  if (in.rank() != 4) return ctx.error("input must be 4-D, got ", in.to_string());
  Dim bb(b), b2(b * b);
  std::vector<Dim> out = in.dims();
  if (to_space) {
    if (auto c = in[1].value(); c && *c % (b * b) != 0)
      return ctx.error("channels ", *c, " are not divisible by blocksize^2 = ", b * b);
    out[1] = in[1].is_known() ? Dim(in[1].expr().floordiv(b * b)) : Dim::unknown();
    out[2] = in[2] * bb;
    out[3] = in[3] * bb;
  } else {
    for (int a = 2; a < 4; ++a)
      if (auto v = in[a].value(); v && *v % b != 0)
        return ctx.error("spatial dim ", *v, " is not divisible by blocksize ", b);
    out[1] = in[1] * b2;
    out[2] = in[2].is_known() ? Dim(in[2].expr().floordiv(b)) : Dim::unknown();
    out[3] = in[3].is_known() ? Dim(in[3].expr().floordiv(b)) : Dim::unknown();
  }
  ctx.set_output(0, dt, Shape(out));
  return Status::ok();
}

// Both ops are a 6-D transpose of a reshaped view: `view` is the input seen as 6-D and `perm`
// orders its axes into the output.
Status block_transpose(KernelContext& ctx, const std::vector<int64_t>& view,
                       const std::vector<int64_t>& perm, const std::vector<int64_t>& out) {
  const Tensor& x = ctx.input(0);
  auto strides = contiguous_strides(view);
  std::vector<std::vector<int64_t>> maps;
  for (int64_t p : perm) maps.push_back(iota_map(view[p], strides[p]));
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out));
  if (y->numel() > 0) copy_by_axis_maps(x, *y, maps);
  return Status::ok();
}

Status depth_to_space_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  FERRITE_ASSIGN_OR_RETURN(int64_t b, blocksize(ctx));
  if (x.rank() != 4) return ctx.error("input must be 4-D, got ", x.type_string());
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (c % (b * b) != 0)
    return ctx.error("channels ", c, " are not divisible by blocksize^2 = ", b * b);
  int64_t oc = c / (b * b);
  std::vector<int64_t> out{n, oc, h * b, w * b};
  if (ctx.node().attr_string("mode", "DCR") == "DCR")
    return block_transpose(ctx, {n, b, b, oc, h, w}, {0, 3, 4, 1, 5, 2}, out);
  return block_transpose(ctx, {n, oc, b, b, h, w}, {0, 1, 4, 2, 5, 3}, out);
}

Status space_to_depth_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  FERRITE_ASSIGN_OR_RETURN(int64_t b, blocksize(ctx));
  if (x.rank() != 4) return ctx.error("input must be 4-D, got ", x.type_string());
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (h % b != 0 || w % b != 0)
    return ctx.error("spatial dims ", h, "x", w, " are not divisible by blocksize ", b);
  return block_transpose(ctx, {n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4},
                         {n, c * b * b, h / b, w / b});
}

}  // namespace

// One compact schema chain per op reads best.
// clang-format off
void register_slice_pad_ops(OpRegistry& r) {
  r.add(OpSchemaBuilder("Slice").versions(13).inputs(3, 5).outputs(1)
            .types("T", {0}, kAll).types("Tind", {1, 2, 3, 4}, kIndex)
            .infer(infer_slice).kernel(slice_kernel));
  r.add(OpSchemaBuilder("Pad").versions(13).inputs(2, 4).outputs(1)
            .attr("mode", AttrType::kString, "constant")
            .types("T", {0, 2}, kAllWithFloat8).types("pads", {1}, {DType::kI64})
            .types("Tind", {3}, kIndex).infer(infer_pad).kernel(pad_kernel));
  r.add(OpSchemaBuilder("CenterCropPad").versions(18).inputs(2).outputs(1)
            .optional_attr("axes", AttrType::kInts)
            .types("T", {0}, kAll).types("Tind", {1}, kIndex)
            .infer(infer_center_crop_pad).kernel(center_crop_pad_kernel));
  r.add(OpSchemaBuilder("Trilu").versions(14).inputs(1, 2).outputs(1)
            .attr("upper", AttrType::kInt, int64_t{1})
            .types("T", {0}, kAll).types("k", {1}, {DType::kI64})
            .infer(infer_trilu).kernel(trilu_kernel));
  r.add(OpSchemaBuilder("DepthToSpace").versions(13).inputs(1).outputs(1)
            .required_attr("blocksize", AttrType::kInt).attr("mode", AttrType::kString, "DCR")
            .types("T", {0}, kAll)
            .infer([](InferContext& ctx) { return infer_depth_to_space(ctx, true); })
            .kernel(depth_to_space_kernel));
  r.add(OpSchemaBuilder("SpaceToDepth").versions(13).inputs(1).outputs(1)
            .required_attr("blocksize", AttrType::kInt).types("T", {0}, kAll)
            .infer([](InferContext& ctx) { return infer_depth_to_space(ctx, false); })
            .kernel(space_to_depth_kernel));
}
// clang-format on

}  // namespace ferrite
