// Detection: NonMaxSuppression (opset 11; its output size depends on the data) and RoiAlign
// (opset 16).
#include <algorithm>
#include <cmath>

#include "ops/helpers.h"
#include "ops/numeric_cast.h"

namespace ferrite {

namespace {

Status infer_nms(InferContext& ctx) {
  const Shape& boxes = ctx.input_shape(0);
  const Shape& scores = ctx.input_shape(1);
  if (boxes.rank_known() && boxes.rank() != 3) return ctx.error("boxes must be [batch, boxes, 4]");
  if (scores.rank_known() && scores.rank() != 3)
    return ctx.error("scores must be [batch, classes, boxes]");
  if (boxes.rank_known() && boxes.dims()[2].is_static() && *boxes.dims()[2].value() != 4)
    return ctx.error("boxes must have 4 coordinates, got ", boxes.to_string());
  ctx.set_output(0, DType::kI64, Shape(std::vector<Dim>{Dim::unknown(), Dim(int64_t{3})}));
  return Status::ok();
}

// A box as (min, max) per axis, from corners in any order (center_point_box 0) or from
// center and size (1).
struct Box {
  double y0, x0, y1, x1;
};
Box make_box(const double* b, bool center) {
  if (center) return {b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2};
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

// Whether b suppresses a: IoU above the threshold (degenerate boxes never suppress).
bool suppresses(const Box& a, const Box& b, double iou_threshold) {
  double ix = std::min(a.x1, b.x1) - std::max(a.x0, b.x0);
  double iy = std::min(a.y1, b.y1) - std::max(a.y0, b.y0);
  if (ix <= 0 || iy <= 0) return false;
  double inter = ix * iy;
  double area_a = (a.x1 - a.x0) * (a.y1 - a.y0), area_b = (b.x1 - b.x0) * (b.y1 - b.y0);
  double uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > iou_threshold;
}

// A scalar or 1-element optional input as double; `def` when absent or empty.
double optional_scalar(const KernelContext& ctx, size_t i, double def) {
  if (ctx.num_inputs() <= i || !ctx.has_input(i) || ctx.input(i).numel() == 0) return def;
  const Tensor& t = ctx.input(i);
  double v = def;
  visit_dtype(t.dtype(), [&]<class T>() { v = to_double(t.data<T>()[0]); });
  return v;
}

Status nms_kernel(KernelContext& ctx) {
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  if (boxes.rank() != 3 || scores.rank() != 3 || boxes.dims()[2] != 4 ||
      scores.dims()[0] != boxes.dims()[0] || scores.dims()[2] != boxes.dims()[1])
    return ctx.error("boxes [batch, n, 4] and scores [batch, classes, n] do not match");
  const int64_t batches = boxes.dims()[0], n = boxes.dims()[1], classes = scores.dims()[1];
  const double max_out = std::max(0.0, optional_scalar(ctx, 2, 0));
  const double iou = optional_scalar(ctx, 3, 0);
  const bool has_score_threshold =
      ctx.num_inputs() > 4 && ctx.has_input(4) && ctx.input(4).numel() > 0;
  const double score_threshold = optional_scalar(ctx, 4, 0);
  const bool center = ctx.node().attr_int("center_point_box", 0) != 0;
  std::vector<double> b(static_cast<size_t>(boxes.numel())), s(static_cast<size_t>(scores.numel()));
  Status st = Status::ok();
  bool ok = visit_dtype(boxes.dtype(), [&]<class T>() {
    if constexpr (!is_float_v<T>) {
      st = ctx.error("boxes must be float");
    } else {
      for (size_t i = 0; i < b.size(); ++i) b[i] = to_double(boxes.data<T>()[i]);
      for (size_t i = 0; i < s.size(); ++i) s[i] = to_double(scores.data<T>()[i]);
    }
  });
  if (!ok || scores.dtype() != boxes.dtype()) return ctx.error("boxes and scores must be float");
  FERRITE_RETURN_IF_ERROR(st);
  std::vector<int64_t> selected;
  for (int64_t bi = 0; bi < batches; ++bi) {
    std::vector<Box> bx(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) bx[k] = make_box(&b[(bi * n + k) * 4], center);
    for (int64_t c = 0; c < classes; ++c) {
      const double* sc = &s[(bi * classes + c) * n];
      std::vector<int64_t> cand;
      for (int64_t k = 0; k < n; ++k)
        if (!has_score_threshold || sc[k] > score_threshold) cand.push_back(k);
      // Highest score first; equal scores keep the lower box index first.
      std::stable_sort(cand.begin(), cand.end(),
                       [&](int64_t a, int64_t z) { return sc[a] > sc[z]; });
      std::vector<int64_t> kept;
      for (int64_t k : cand) {
        if (static_cast<double>(kept.size()) >= max_out) break;
        bool keep = std::none_of(kept.begin(), kept.end(),
                                 [&](int64_t j) { return suppresses(bx[k], bx[j], iou); });
        if (!keep) continue;
        kept.push_back(k);
        selected.insert(selected.end(), {bi, c, k});
      }
    }
  }
  FERRITE_ASSIGN_OR_RETURN(
      Tensor * y,
      ctx.allocate_output(0, DType::kI64, {static_cast<int64_t>(selected.size() / 3), 3}));
  std::copy(selected.begin(), selected.end(), y->data<int64_t>());
  return Status::ok();
}

// ---- RoiAlign (opset 16) ----
// Each region [x1, y1, x2, y2] of image batch_indices[r] is split into output_height x
// output_width bins; each bin averages (or takes the max of) bilinear samples on a regular grid
// of sampling_ratio (or ceil(bin size)) points per axis. As in ONNX's reference (ORT's algorithm):
// samples more than one pixel outside the image count as 0, and max mode takes the largest
// weighted corner, not the interpolated value.

// RoiAlign-16 added coordinate_transformation_mode, defaulting to half_pixel; RoiAlign-10 (opsets
// 13 to 15, and older models through the version converter) maps as output_half_pixel.
const char* default_ctm(int opset) {
  return opset >= 16 ? "half_pixel" : "output_half_pixel";
}

Status infer_roi_align(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& rois = ctx.input_shape(1);
  if (x.rank_known() && x.rank() != 4) return ctx.error("X must be [N, C, H, W]");
  if (rois.rank_known() && rois.rank() != 2) return ctx.error("rois must be [num_rois, 4]");
  std::string mode = ctx.node().attr_string("mode", "avg");
  std::string ctm =
      ctx.node().attr_string("coordinate_transformation_mode", default_ctm(ctx.opset()));
  if (mode != "avg" && mode != "max") return ctx.error("mode must be avg or max");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return ctx.error("coordinate_transformation_mode must be half_pixel or output_half_pixel");
  int64_t oh = ctx.node().attr_int("output_height", 1), ow = ctx.node().attr_int("output_width", 1);
  if (oh < 1 || ow < 1) return ctx.error("output_height and output_width must be positive");
  Dim rois_n = rois.rank_known() ? rois.dims()[0] : Dim::unknown();
  Dim c = x.rank_known() ? x.dims()[1] : Dim::unknown();
  ctx.set_output(0, ctx.input_dtype(0), Shape({rois_n, c, Dim(oh), Dim(ow)}));
  return Status::ok();
}

Status roi_align_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  const Tensor& idx = ctx.input(2);
  const Node& node = ctx.node();
  if (x.rank() != 4 || rois.rank() != 2 || rois.dims()[1] != 4 || idx.rank() != 1 ||
      idx.numel() != rois.dims()[0])
    return ctx.error("X [N, C, H, W], rois [R, 4] and batch_indices [R] do not match");
  const int64_t channels = x.dims()[1], height = x.dims()[2], width = x.dims()[3];
  const int64_t oh = node.attr_int("output_height", 1), ow = node.attr_int("output_width", 1);
  const int64_t ratio = node.attr_int("sampling_ratio", 0);
  const double scale = node.attr_float("spatial_scale", 1.0f);
  const bool half_pixel =
      node.attr_string("coordinate_transformation_mode", default_ctm(ctx.opset())) == "half_pixel";
  const bool max_mode = node.attr_string("mode", "avg") == "max";
  const int64_t n_rois = rois.dims()[0];
  FERRITE_ASSIGN_OR_RETURN(Tensor * y,
                           ctx.allocate_output(0, x.dtype(), {n_rois, channels, oh, ow}));
  std::vector<double> r(static_cast<size_t>(rois.numel()));
  std::vector<int64_t> bi(static_cast<size_t>(n_rois));
  visit_dtype(rois.dtype(), [&]<class T>() {
    for (size_t k = 0; k < r.size(); ++k) r[k] = to_double(rois.data<T>()[k]);
  });
  visit_dtype(idx.dtype(), [&]<class T>() {
    for (size_t k = 0; k < bi.size(); ++k)
      bi[k] = static_cast<int64_t>(to_double(idx.data<T>()[k]));
  });
  Status st = Status::ok();
  bool ok = visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (!is_float_v<T>) {
      st = ctx.error("X must be float");
      return;
    } else {
      const T* px = x.data<T>();
      T* py = y->data<T>();
      for (int64_t n = 0; n < n_rois && st.is_ok(); ++n) {
        if (bi[n] < 0 || bi[n] >= x.dims()[0]) {
          st = ctx.error("batch_indices[", n, "] = ", bi[n], " is outside [0, ", x.dims()[0], ")");
          return;
        }
        const double off = half_pixel ? 0.5 : 0.0;
        double x0 = r[n * 4] * scale - off, y0 = r[n * 4 + 1] * scale - off;
        double rw = r[n * 4 + 2] * scale - off - x0, rh = r[n * 4 + 3] * scale - off - y0;
        if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
        const double bh = rh / static_cast<double>(oh), bw = rw / static_cast<double>(ow);
        // Sampling points per bin and axis: sampling_ratio, else ceil(bin size). A hostile or
        // corrupt region (huge, inf, NaN) would make that grid unbounded (and the conversion
        // undefined), so more than kMaxSamples points per axis is refused.
        constexpr double kMaxSamples = 4096;
        const double sh = ratio > 0 ? static_cast<double>(ratio) : std::ceil(rh / oh);
        const double sw = ratio > 0 ? static_cast<double>(ratio) : std::ceil(rw / ow);
        if (!(sh <= kMaxSamples) || !(sw <= kMaxSamples)) {
          st =
              unsupported(node.describe(), ": region of interest ", n, " needs a sampling grid of ",
                          sh, " x ", sw, " points per bin (at most 4096 per axis are taken)");
          return;
        }
        const int64_t gh = static_cast<int64_t>(std::max(sh, 0.0));
        const int64_t gw = static_cast<int64_t>(std::max(sw, 0.0));
        const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
        for (int64_t c = 0; c < channels; ++c) {
          const T* img = px + (bi[n] * channels + c) * height * width;
          auto at = [&](int64_t p) { return to_double(img[p]); };
          for (int64_t ph = 0; ph < oh; ++ph) {
            for (int64_t pw = 0; pw < ow; ++pw) {
              double acc = 0;
              bool first = true;
              for (int64_t iy = 0; iy < gh; ++iy) {
                for (int64_t ix = 0; ix < gw; ++ix) {
                  double yy = y0 + static_cast<double>(ph) * bh +
                              (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh);
                  double xx = x0 + static_cast<double>(pw) * bw +
                              (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw);
                  double v[4] = {0, 0, 0, 0};
                  if (!(yy < -1.0 || yy > static_cast<double>(height) || xx < -1.0 ||
                        xx > static_cast<double>(width))) {
                    yy = std::max(yy, 0.0);
                    xx = std::max(xx, 0.0);
                    auto yl = static_cast<int64_t>(yy), xl = static_cast<int64_t>(xx);
                    int64_t yh2 = yl + 1, xh2 = xl + 1;
                    if (yl >= height - 1) yh2 = yl = height - 1, yy = static_cast<double>(yl);
                    if (xl >= width - 1) xh2 = xl = width - 1, xx = static_cast<double>(xl);
                    double ly = yy - static_cast<double>(yl), lx = xx - static_cast<double>(xl);
                    double hy = 1 - ly, hx = 1 - lx;
                    v[0] = hy * hx * at(yl * width + xl);
                    v[1] = hy * lx * at(yl * width + xh2);
                    v[2] = ly * hx * at(yh2 * width + xl);
                    v[3] = ly * lx * at(yh2 * width + xh2);
                  }
                  if (max_mode) {
                    double m = std::max({v[0], v[1], v[2], v[3]});
                    acc = first ? m : std::max(acc, m);
                    first = false;
                  } else {
                    acc += v[0] + v[1] + v[2] + v[3];
                  }
                }
              }
              py[((n * channels + c) * oh + ph) * ow + pw] =
                  convert<T>(max_mode ? acc : acc / count);
            }
          }
        }
      }
    }
  });
  if (!ok) return ctx.error("unsupported dtype");
  return st;
}

}  // namespace

void register_detection_ops(OpRegistry& r) {
  r.add(OpSchemaBuilder("NonMaxSuppression")
            .versions(11)
            .inputs(2, 5)
            .outputs(1)
            .attr("center_point_box", AttrType::kInt, 0)
            .types("T", {0, 1, 3, 4}, {DType::kF32})
            .types("tensor(int64)", {2}, {DType::kI64})
            .infer(infer_nms)
            .kernel(nms_kernel));
  r.add(OpSchemaBuilder("RoiAlign")
            .versions(13)
            .inputs(3)
            .outputs(1)
            .optional_attr("coordinate_transformation_mode", AttrType::kString)
            .attr("mode", AttrType::kString, "avg")
            .attr("output_height", AttrType::kInt, 1)
            .attr("output_width", AttrType::kInt, 1)
            .attr("sampling_ratio", AttrType::kInt, 0)
            .attr("spatial_scale", AttrType::kFloat, 1.0f)
            .types("T1", {0, 1}, dtypes::kFloat)
            .types("T2", {2}, {DType::kI64})
            .infer(infer_roi_align)
            .kernel(roi_align_kernel));
}

}  // namespace ferrite
