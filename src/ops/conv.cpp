// Convolutions: Conv and ConvTranspose over any number of spatial dims and groups.
//
// Conv lowers each (image, group) to im2col + the reference GEMM; ConvTranspose to GEMM +
// col2im. Both work on chunks of whole output (resp. input) rows so that the column buffer and
// the GEMM's packed copy of it stay cache-sized. Everything is computed in compute_t<T> (float
// for 16-bit floats) and rounded to T once at the end.
#include <algorithm>
#include <type_traits>

#include "ops/conv_columns.h"
#include "ops/conv_util.h"
#include "ops/gemm.h"

namespace ferrite {

namespace {

using namespace conv_columns;

// Conv as GEMMs over column buffers that `fill(image, group, r0, r1, col)` builds (im2col for
// Conv, sampled im2col for DeformConv). `pointwise_ok` allows reading 1x1 stride-1 inputs in place.
template <class T, class C, class Fill>
void run_conv(const Tensor& x, const Tensor& wt, const Tensor* bias, Tensor& y, const Window& w,
              int64_t group, const std::vector<int64_t>& in, const std::vector<int64_t>& out,
              bool pointwise_ok, Fill&& fill) {
  const size_t n = w.rank;
  const int64_t batch = x.dim(0), cin = x.dim(1), m = wt.dim(0);
  const int64_t cg = cin / group, mg = m / group;
  const int64_t in_size = product(in), out_size = product(out);
  const int64_t kdim = cg * w.kernel_volume();
  const int64_t ow = out[n - 1];
  if (out_size == 0 || m == 0) return;
  const int64_t rows = out_size / ow;
  std::vector<C> wc = to_compute<T, C>(wt);
  std::vector<C> bc = bias ? to_compute<T, C>(*bias) : std::vector<C>(m, C(0));
  bool pointwise = pointwise_ok && std::is_same_v<T, C> && w.kernel_volume() == 1;
  for (size_t d = 0; d < n; ++d)
    pointwise = pointwise && w.strides[d] == 1 && w.pad_begin(d) == 0 && w.pad_end(d) == 0;
  const int64_t rows_per_chunk = chunk_rows(kdim, ow);
  const T* px = x.data<T>();
  T* py = y.data<T>();
  std::vector<C> col, ybuf;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t g = 0; g < group; ++g) {
      const T* xg = px + (b * cin + g * cg) * in_size;
      const C* wg = wc.data() + g * mg * kdim;
      const C* bg = bc.data() + g * mg;
      T* yg = py + (b * m + g * mg) * out_size;
      for (int64_t r0 = 0; r0 < rows; r0 += rows_per_chunk) {
        const int64_t r1 = std::min(rows, r0 + rows_per_chunk);
        const int64_t p0 = r0 * ow, P = (r1 - r0) * ow;
        const C* bmat = nullptr;  // set below: pointwise is only true when T is C
        int64_t b_row = 0;
        if constexpr (std::is_same_v<T, C>) {
          if (pointwise) {
            bmat = xg + p0;
            b_row = in_size;
          }
        }
        if (!pointwise) {
          col.resize(static_cast<size_t>(kdim * P));
          fill(b, g, r0, r1, col.data());
          bmat = col.data();
          b_row = P;
        }
        if constexpr (std::is_same_v<T, C>) {
          C* yc = yg + p0;
          reference_gemm<C, C>(mg, P, kdim, wg, kdim, 1, bmat, b_row, 1, yc, out_size, false);
          for (int64_t i = 0; i < mg; ++i)
            for (int64_t j = 0; j < P; ++j) yc[i * out_size + j] += bg[i];
        } else {
          ybuf.resize(static_cast<size_t>(mg * P));
          reference_gemm<C, C>(mg, P, kdim, wg, kdim, 1, bmat, b_row, 1, ybuf.data(), P, false);
          for (int64_t i = 0; i < mg; ++i)
            for (int64_t j = 0; j < P; ++j)
              yg[i * out_size + p0 + j] = convert<T>(static_cast<C>(ybuf[i * P + j] + bg[i]));
        }
      }
    }
  }
}

// Scatter-adds the GEMM result (rows (m, kernel offset) x columns (input rows r0..r1)) into the
// output accumulators of one (image, group).
template <class C>
void col2im(const C* col, int64_t channels, const std::vector<int64_t>& in,
            const std::vector<int64_t>& out, const Window& w, int64_t r0, int64_t r1, C* y) {
  const size_t n = w.rank, last = n - 1;
  const int64_t out_size = product(out), kvol = w.kernel_volume();
  const int64_t ow = out[last], iw = in[last], s = w.strides[last];
  const int64_t P = (r1 - r0) * iw;
  std::vector<int64_t> k(n), i(n);
  for (int64_t c = 0; c < channels; ++c) {
    C* yc = y + c * out_size;
    for (int64_t kk = 0; kk < kvol; ++kk) {
      unflatten(kk, w.kernel, n, k);
      const C* src = col + (c * kvol + kk) * P;
      const int64_t base = k[last] * w.dilations[last] - w.pad_begin(last);
      int64_t lo, hi;
      valid_range(base, s, iw, ow, &lo, &hi);
      for (int64_t r = r0; r < r1; ++r, src += iw) {
        unflatten(r, in, last, i);
        int64_t off = 0;
        bool inside = true;
        for (size_t d = 0; d < last && inside; ++d) {
          int64_t o = i[d] * w.strides[d] - w.pad_begin(d) + k[d] * w.dilations[d];
          inside = o >= 0 && o < out[d];
          off = off * out[d] + o;
        }
        if (!inside) continue;
        off = off * ow + base;
        for (int64_t j = lo; j < hi; ++j) yc[off + j * s] += src[j];
      }
    }
  }
}

template <class T, class C>
void run_conv_transpose(const Tensor& x, const Tensor& wt, const Tensor* bias, Tensor& y,
                        const Window& w, int64_t group, const std::vector<int64_t>& in,
                        const std::vector<int64_t>& out) {
  const size_t n = w.rank;
  const int64_t batch = x.dim(0), cin = x.dim(1), mg = wt.dim(1);
  const int64_t cg = cin / group, m = mg * group;
  const int64_t in_size = product(in), out_size = product(out);
  const int64_t rdim = mg * w.kernel_volume();  // GEMM rows: (output channel, kernel offset)
  const int64_t iw = in[n - 1];
  if (out_size == 0 || m == 0) return;
  std::vector<C> wc = to_compute<T, C>(wt);
  std::vector<C> bc = bias ? to_compute<T, C>(*bias) : std::vector<C>(m, C(0));
  const int64_t rows = iw == 0 ? 0 : in_size / iw;
  const int64_t rows_per_chunk = chunk_rows(rdim, iw);
  const T* px = x.data<T>();
  T* py = y.data<T>();
  std::vector<C> xbuf, col, ybuf(static_cast<size_t>(mg * out_size));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t g = 0; g < group; ++g) {
      const T* xt = px + (b * cin + g * cg) * in_size;
      const C* xg;
      if constexpr (std::is_same_v<T, C>) {
        xg = xt;
      } else {
        xbuf.resize(static_cast<size_t>(cg * in_size));
        for (int64_t i = 0; i < cg * in_size; ++i) xbuf[i] = convert<C>(xt[i]);
        xg = xbuf.data();
      }
      // W is [cin, mg, k...]; this group's block is [cg, rdim] and the GEMM needs its transpose.
      const C* wg = wc.data() + g * cg * rdim;
      std::fill(ybuf.begin(), ybuf.end(), C(0));
      for (int64_t r0 = 0; r0 < rows; r0 += rows_per_chunk) {
        const int64_t r1 = std::min(rows, r0 + rows_per_chunk);
        const int64_t P = (r1 - r0) * iw;
        col.resize(static_cast<size_t>(rdim * P));
        reference_gemm<C, C>(rdim, P, cg, wg, 1, rdim, xg + r0 * iw, in_size, 1, col.data(), P,
                             false);
        col2im<C>(col.data(), mg, in, out, w, r0, r1, ybuf.data());
      }
      T* yg = py + (b * m + g * mg) * out_size;
      for (int64_t i = 0; i < mg; ++i)
        for (int64_t j = 0; j < out_size; ++j)
          yg[i * out_size + j] =
              convert<T>(static_cast<C>(ybuf[i * out_size + j] + bc[g * mg + i]));
    }
  }
}

// Checks shared by both ops in inference: channel counts against group, bias shape.
Status check_channels(const InferContext& ctx, const Dim& xc, const Dim& wc, const Dim& m,
                      int64_t group, bool transpose, size_t bias_input = 2) {
  if (group < 1) return ctx.error("group must be >= 1, got ", group);
  auto x = xc.value(), wv = wc.value(), mv = m.value();
  if (!transpose) {
    if (x && wv && *x != *wv * group)
      return ctx.error("input has ", *x, " channels, but weight expects ", *wv, " x group ", group);
    if (mv && *mv % group != 0)
      return ctx.error(*mv, " output channels are not divisible by group ", group);
  } else {
    if (x && wv && *x != *wv) return ctx.error("input has ", *x, " channels, weight has ", *wv);
    if (x && *x % group != 0)
      return ctx.error(*x, " input channels are not divisible by group ", group);
  }
  if (ctx.num_inputs() > bias_input && ctx.has_input(bias_input)) {
    const Shape& b = ctx.input_shape(bias_input);
    if (b.rank_known() && b.rank() != 1) return ctx.error("bias must be 1-D, got ", b.to_string());
    if (b.rank_known() && b[0].is_static() && mv && *b[0].value() != *mv)
      return ctx.error("bias has ", b.to_string(), " entries, expected ", *mv);
  }
  return Status::ok();
}

// Kernel-side validation shared by Conv and ConvTranspose. Returns the kernel shape.
Expected<std::vector<int64_t>> check_conv_inputs(const KernelContext& ctx, int64_t group,
                                                 bool transpose) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  if (x.rank() < 3)
    return ctx.error("input must have rank >= 3 (N, C, spatial...), got ", x.type_string());
  if (w.rank() != x.rank())
    return ctx.error("weight ", w.type_string(), " must have the input's rank ", x.rank());
  if (group < 1) return ctx.error("group must be >= 1, got ", group);
  int64_t c = x.dim(1);
  if (c % group != 0) return ctx.error(c, " input channels are not divisible by group ", group);
  int64_t m;
  if (!transpose) {
    if (w.dim(1) * group != c)
      return ctx.error("input has ", c, " channels, but weight ", w.type_string(), " expects ",
                       w.dim(1), " x group ", group);
    m = w.dim(0);
    if (m % group != 0) return ctx.error(m, " output channels are not divisible by group ", group);
  } else {
    if (w.dim(0) != c) return ctx.error("input has ", c, " channels, weight has ", w.dim(0));
    m = w.dim(1) * group;
  }
  if (ctx.has_input(2)) {
    const Tensor& b = ctx.input(2);
    if (b.rank() != 1 || b.dim(0) != m)
      return ctx.error("bias ", b.type_string(), " must be 1-D with ", m, " entries");
  }
  std::vector<int64_t> kernel = spatial_dims(w);
  std::vector<int64_t> attr = ctx.node().attr_ints("kernel_shape");
  if (!attr.empty() && attr != kernel)
    return ctx.error("kernel_shape ", dims_to_string(attr), " does not match weight ",
                     w.type_string());
  return kernel;
}

}  // namespace

Expected<Shape> conv_output_shape(InferContext& ctx, const Shape& x, const Shape& w) {
  int64_t group = ctx.node().attr_int("group", 1);
  if (!x.rank_known()) {
    Shape out = Shape::unknown_rank();
    if (w.rank_known() && w.rank() >= 3) {
      out = Shape(std::vector<Dim>(w.rank(), Dim::unknown()));
      out.dims()[1] = w[0];
    }
    FERRITE_RETURN_IF_ERROR(check_channels(
        ctx, Dim(), Dim(), w.rank_known() && w.rank() >= 3 ? w[0] : Dim(), group, false));
    return out;
  }
  if (x.rank() < 3)
    return ctx.error("input must have rank >= 3 (N, C, spatial...), got ", x.to_string());
  if (w.rank_known() && w.rank() != x.rank())
    return ctx.error("weight ", w.to_string(), " must have the input's rank ", x.rank());
  size_t n = x.rank() - 2;
  Dim wc = w.rank_known() ? w[1] : Dim(), m = w.rank_known() ? w[0] : Dim();
  FERRITE_RETURN_IF_ERROR(check_channels(ctx, x[1], wc, m, group, false));
  FERRITE_ASSIGN_OR_RETURN(auto kernel, conv_kernel_shape(ctx.node(), n, w));
  std::vector<Dim> out{x[0], m};
  if (!kernel) {
    out.resize(x.rank(), Dim::unknown());
  } else {
    FERRITE_ASSIGN_OR_RETURN(Window win, read_window(ctx.node(), *kernel));
    for (size_t d = 0; d < n; ++d) {
      FERRITE_ASSIGN_OR_RETURN(Dim o, window_output_dim(ctx.node(), win, d, x[d + 2]));
      out.push_back(o);
    }
  }
  return Shape(out);
}

Status infer_conv(InferContext& ctx) {
  auto out = conv_output_shape(ctx, ctx.input_shape(0), ctx.input_shape(1));
  // An input of unknown rank still gets its (unknown-rank) output before a channel error.
  if (!out && !ctx.input_shape(0).rank_known())
    ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
  FERRITE_RETURN_IF_ERROR(out.status());
  ctx.set_output(0, ctx.input_dtype(0), *out);
  return Status::ok();
}

Status conv_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  int64_t group = ctx.node().attr_int("group", 1);
  FERRITE_ASSIGN_OR_RETURN(auto kernel, check_conv_inputs(ctx, group, false));
  FERRITE_ASSIGN_OR_RETURN(Window win, read_window(ctx.node(), kernel));
  std::vector<int64_t> in = spatial_dims(x);
  FERRITE_ASSIGN_OR_RETURN(auto out, resolve_window(ctx.node(), win, in));
  std::vector<int64_t> dims{x.dim(0), w.dim(0)};
  dims.insert(dims.end(), out.begin(), out.end());
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), dims));
  bool ok = visit_float_accumulate_dtype(x.dtype(), [&]<class T, class C>() {
    const T* px = x.data<T>();
    const int64_t cg = x.dim(1) / group, in_size = product(in);
    run_conv<T, C>(x, w, bias, *y, win, group, in, out, true,
                   [&](int64_t b, int64_t g, int64_t r0, int64_t r1, C* col) {
                     im2col<T, C>(px + (b * x.dim(1) + g * cg) * in_size, cg, in, out, win, r0, r1,
                                  col);
                   });
  });
  if (!ok) return ctx.error("dtype ", dtype_name(x.dtype()), " is not supported");
  return Status::ok();
}

OpSchemaBuilder& conv_attrs(OpSchemaBuilder& b) {
  return b.attr("auto_pad", AttrType::kString, "NOTSET")
      .optional_attr("dilations", AttrType::kInts)
      .attr("group", AttrType::kInt, 1)
      .optional_attr("kernel_shape", AttrType::kInts)
      .optional_attr("pads", AttrType::kInts)
      .optional_attr("strides", AttrType::kInts);
}

namespace {

// ConvTranspose's output_padding, checked.
Expected<std::vector<int64_t>> output_padding(const Node& node, size_t n) {
  std::vector<int64_t> op = node.attr_ints("output_padding");
  if (op.empty()) op.assign(n, 0);
  if (op.size() != n)
    return err(node.describe(), ": output_padding has ", op.size(), " entries, expected ", n);
  for (int64_t v : op)
    if (v < 0 || v > kMaxWindowAttr)
      return err(node.describe(), ": output_padding must be in [0, ", kMaxWindowAttr, "]");
  return op;
}

// ConvTranspose's output_shape attribute reduced to its spatial entries, or empty.
Expected<std::vector<int64_t>> explicit_output_shape(const Node& node, size_t n) {
  std::vector<int64_t> os = node.attr_ints("output_shape");
  if (os.empty()) return os;
  if (os.size() == n + 2) os.erase(os.begin(), os.begin() + 2);
  if (os.size() != n)
    return err(node.describe(), ": output_shape has ", os.size(), " entries, expected ", n);
  for (int64_t v : os)
    if (v <= 0 || v > (int64_t{1} << 40))
      return err(node.describe(), ": output_shape entries must be positive and sane, got ", v);
  return os;
}

}  // namespace

Expected<std::vector<int64_t>> resolve_transpose(const Node& node, Window& w,
                                                 const std::vector<int64_t>& in) {
  size_t n = w.rank;
  FERRITE_ASSIGN_OR_RETURN(auto op, output_padding(node, n));
  FERRITE_ASSIGN_OR_RETURN(auto os, explicit_output_shape(node, n));
  bool same = w.auto_pad == AutoPad::kSameUpper || w.auto_pad == AutoPad::kSameLower;
  std::vector<int64_t> out(n);
  for (size_t d = 0; d < n; ++d) {
    int64_t natural = w.strides[d] * (in[d] - 1) + op[d] + w.extent(d);
    if (os.empty() && !same) {
      out[d] = natural - w.pad_begin(d) - w.pad_end(d);
      if (out[d] <= 0)
        return err(node.describe(), ": output spatial dim ", d, " would be ", out[d]);
      continue;
    }
    out[d] = os.empty() ? in[d] * w.strides[d] : os[d];
    int64_t total = natural - out[d];
    int64_t half = floor_div(total, 2);
    w.pads[d] = w.auto_pad == AutoPad::kSameUpper ? half : total - half;
    w.pads[n + d] = w.auto_pad == AutoPad::kSameUpper ? total - half : half;
  }
  return out;
}

namespace {

Status infer_conv_transpose(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& w = ctx.input_shape(1);
  DType dt = ctx.input_dtype(0);
  int64_t group = ctx.node().attr_int("group", 1);
  if (!x.rank_known()) {
    ctx.set_output(0, dt, Shape::unknown_rank());
    return check_channels(ctx, Dim(), Dim(), Dim(), group, true);
  }
  if (x.rank() < 3)
    return ctx.error("input must have rank >= 3 (N, C, spatial...), got ", x.to_string());
  if (w.rank_known() && w.rank() != x.rank())
    return ctx.error("weight ", w.to_string(), " must have the input's rank ", x.rank());
  size_t n = x.rank() - 2;
  Dim wc = w.rank_known() ? w[0] : Dim();
  Dim m = w.rank_known() ? w[1] * Dim(group) : Dim();
  FERRITE_RETURN_IF_ERROR(check_channels(ctx, x[1], wc, m, group, true));
  FERRITE_ASSIGN_OR_RETURN(auto kernel, conv_kernel_shape(ctx.node(), n, w));
  FERRITE_ASSIGN_OR_RETURN(auto os, explicit_output_shape(ctx.node(), n));
  FERRITE_ASSIGN_OR_RETURN(auto op, output_padding(ctx.node(), n));
  std::vector<Dim> out{x[0], m};
  if (!kernel) {
    for (size_t d = 0; d < n; ++d) out.push_back(os.empty() ? Dim() : Dim(os[d]));
  } else {
    FERRITE_ASSIGN_OR_RETURN(Window win, read_window(ctx.node(), *kernel));
    std::vector<int64_t> in_static;
    for (size_t d = 0; d < n; ++d)
      if (auto v = x[d + 2].value()) in_static.push_back(*v);
    if (in_static.size() == n) {
      FERRITE_ASSIGN_OR_RETURN(auto o, resolve_transpose(ctx.node(), win, in_static));
      out.insert(out.end(), o.begin(), o.end());
    } else {
      bool same = win.auto_pad == AutoPad::kSameUpper || win.auto_pad == AutoPad::kSameLower;
      for (size_t d = 0; d < n; ++d) {
        const Dim& i = x[d + 2];
        int64_t s = win.strides[d];
        if (!os.empty())
          out.push_back(Dim(os[d]));
        else if (same)
          out.push_back(i * Dim(s));
        else
          out.push_back(i * Dim(s) +
                        Dim(op[d] + win.extent(d) - s - win.pad_begin(d) - win.pad_end(d)));
      }
    }
  }
  ctx.set_output(0, dt, Shape(out));
  return Status::ok();
}

Status conv_transpose_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  int64_t group = ctx.node().attr_int("group", 1);
  FERRITE_ASSIGN_OR_RETURN(auto kernel, check_conv_inputs(ctx, group, true));
  FERRITE_ASSIGN_OR_RETURN(Window win, read_window(ctx.node(), kernel));
  std::vector<int64_t> in = spatial_dims(x);
  FERRITE_ASSIGN_OR_RETURN(auto out, resolve_transpose(ctx.node(), win, in));
  std::vector<int64_t> dims{x.dim(0), w.dim(1) * group};
  dims.insert(dims.end(), out.begin(), out.end());
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), dims));
  bool ok = visit_float_accumulate_dtype(x.dtype(), [&]<class T, class C>() {
    run_conv_transpose<T, C>(x, w, bias, *y, win, group, in, out);
  });
  if (!ok) return ctx.error("dtype ", dtype_name(x.dtype()), " is not supported");
  return Status::ok();
}

// ---- DeformConv (opset 19) ----------------------------------------------------------------

// Column buffer of DeformConv for one (image, group): each kernel tap samples its input channel
// at the regular position plus a learned offset, by multilinear interpolation with zeros outside
// the input (GridSample with align_corners=1), scaled by the optional mask.
// offset is [offset_groups, kvol, n, out...] and mask [offset_groups, kvol, out...] of this image.
template <class T, class C>
void deform_im2col(const T* x, int64_t c0, int64_t channels, int64_t channels_per_og,
                   const T* offset, const T* mask, const std::vector<int64_t>& in,
                   const std::vector<int64_t>& out, const Window& w, int64_t p0, int64_t p1,
                   C* col) {
  const size_t n = w.rank;
  const int64_t in_size = product(in), out_size = product(out), kvol = w.kernel_volume();
  const int64_t P = p1 - p0;
  const int64_t corners = int64_t{1} << n;
  std::vector<int64_t> k(n), o(n), base(n);
  std::vector<C> frac(n);
  for (int64_t c = 0; c < channels; ++c) {
    const T* xc = x + (c0 + c) * in_size;
    const int64_t og = (c0 + c) / channels_per_og;
    for (int64_t kk = 0; kk < kvol; ++kk) {
      unflatten(kk, w.kernel, n, k);
      C* dst = col + (c * kvol + kk) * P;
      const T* off = offset + (og * kvol + kk) * static_cast<int64_t>(n) * out_size;
      const T* msk = mask ? mask + (og * kvol + kk) * out_size : nullptr;
      for (int64_t p = p0; p < p1; ++p) {
        unflatten(p, out, n, o);
        for (size_t d = 0; d < n; ++d) {
          C pos = static_cast<C>(o[d] * w.strides[d] - w.pad_begin(d) + k[d] * w.dilations[d]) +
                  convert<C>(off[d * out_size + p]);
          C fl = std::floor(pos);
          // Far outside the input (or NaN): every corner is out of range.
          if (!(fl > C(-2) && fl < static_cast<C>(in[d] + 1))) fl = C(-2);
          base[d] = static_cast<int64_t>(fl);
          frac[d] = pos - fl;
        }
        C v = 0;
        for (int64_t corner = 0; corner < corners; ++corner) {
          C weight = 1;
          int64_t idx = 0;
          bool inside = true;
          for (size_t d = 0; d < n && inside; ++d) {
            const bool up = (corner >> (n - 1 - d)) & 1;
            const int64_t i = base[d] + (up ? 1 : 0);
            inside = i >= 0 && i < in[d];
            weight *= up ? frac[d] : C(1) - frac[d];
            idx = idx * in[d] + i;
          }
          if (inside && weight != C(0)) v += weight * convert<C>(xc[idx]);
        }
        dst[p - p0] = msk ? static_cast<C>(v * convert<C>(msk[p])) : v;
      }
    }
  }
}

Status infer_deform_conv(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& w = ctx.input_shape(1);
  DType dt = ctx.input_dtype(0);
  int64_t group = ctx.node().attr_int("group", 1);
  int64_t og = ctx.node().attr_int("offset_group", 1);
  if (og < 1) return ctx.error("offset_group must be >= 1, got ", og);
  Dim m = w.rank_known() && w.rank() >= 3 ? w[0] : Dim();
  if (!x.rank_known()) {
    ctx.set_output(0, dt, Shape::unknown_rank());
    return check_channels(ctx, Dim(), Dim(), m, group, false, 3);
  }
  if (x.rank() < 3) return ctx.error("input must have rank >= 3, got ", x.to_string());
  if (w.rank_known() && w.rank() != x.rank())
    return ctx.error("weight ", w.to_string(), " must have the input's rank ", x.rank());
  FERRITE_RETURN_IF_ERROR(
      check_channels(ctx, x[1], w.rank_known() ? w[1] : Dim(), m, group, false, 3));
  if (auto c = x[1].value(); c && *c % og != 0)
    return ctx.error(*c, " input channels are not divisible by offset_group ", og);
  size_t n = x.rank() - 2;
  FERRITE_ASSIGN_OR_RETURN(auto kernel, conv_kernel_shape(ctx.node(), n, w));
  std::vector<Dim> out{x[0], m};
  if (!kernel) {
    out.resize(x.rank(), Dim::unknown());
  } else {
    FERRITE_ASSIGN_OR_RETURN(Window win, read_window(ctx.node(), *kernel));
    for (size_t d = 0; d < n; ++d) {
      FERRITE_ASSIGN_OR_RETURN(Dim o, window_output_dim(ctx.node(), win, d, x[d + 2]));
      out.push_back(o);
    }
  }
  ctx.set_output(0, dt, Shape(out));
  return Status::ok();
}

Status deform_conv_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& offset = ctx.input(2);
  const Tensor* bias = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  const Tensor* mask = ctx.num_inputs() > 4 && ctx.has_input(4) ? &ctx.input(4) : nullptr;
  const int64_t group = ctx.node().attr_int("group", 1);
  const int64_t og = ctx.node().attr_int("offset_group", 1);
  // The shared checks read the bias from input 2; DeformConv's bias is input 3.
  if (x.rank() < 3 || w.rank() != x.rank())
    return ctx.error("input ", x.type_string(), " and weight ", w.type_string(),
                     " must have the same rank >= 3");
  if (group < 1 || x.dim(1) % group != 0 || w.dim(1) * group != x.dim(1) || w.dim(0) % group != 0)
    return ctx.error("input ", x.type_string(), " and weight ", w.type_string(),
                     " do not fit group ", group);
  if (og < 1 || x.dim(1) % og != 0)
    return ctx.error(x.dim(1), " input channels are not divisible by offset_group ", og);
  if (bias && (bias->rank() != 1 || bias->dim(0) != w.dim(0)))
    return ctx.error("bias ", bias->type_string(), " must be 1-D with ", w.dim(0), " entries");
  const size_t n = x.rank() - 2;
  std::vector<int64_t> kernel = spatial_dims(w);
  std::vector<int64_t> attr = ctx.node().attr_ints("kernel_shape");
  if (!attr.empty() && attr != kernel)
    return ctx.error("kernel_shape ", dims_to_string(attr), " does not match weight ",
                     w.type_string());
  FERRITE_ASSIGN_OR_RETURN(Window win, read_window(ctx.node(), kernel));
  std::vector<int64_t> in = spatial_dims(x);
  FERRITE_ASSIGN_OR_RETURN(auto out, resolve_window(ctx.node(), win, in));
  const int64_t kvol = win.kernel_volume(), out_size = product(out);
  std::vector<int64_t> want_off{x.dim(0), og * kvol * static_cast<int64_t>(n)};
  want_off.insert(want_off.end(), out.begin(), out.end());
  if (offset.dims() != want_off)
    return ctx.error("offset ", offset.type_string(), " must have shape ",
                     dims_to_string(want_off));
  if (mask) {
    std::vector<int64_t> want_mask{x.dim(0), og * kvol};
    want_mask.insert(want_mask.end(), out.begin(), out.end());
    if (mask->dims() != want_mask)
      return ctx.error("mask ", mask->type_string(), " must have shape ",
                       dims_to_string(want_mask));
  }
  std::vector<int64_t> dims{x.dim(0), w.dim(0)};
  dims.insert(dims.end(), out.begin(), out.end());
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), dims));
  bool ok = visit_float_accumulate_dtype(x.dtype(), [&]<class T, class C>() {
    const T* px = x.data<T>();
    const T* po = offset.data<T>();
    const T* pm = mask ? mask->data<T>() : nullptr;
    const int64_t cin = x.dim(1), cg = cin / group, in_size = product(in);
    const int64_t ow = out[n - 1];
    run_conv<T, C>(x, w, bias, *y, win, group, in, out, false,
                   [&](int64_t b, int64_t g, int64_t r0, int64_t r1, C* col) {
                     deform_im2col<T, C>(px + b * cin * in_size, g * cg, cg, cin / og,
                                         po + b * og * kvol * static_cast<int64_t>(n) * out_size,
                                         pm ? pm + b * og * kvol * out_size : nullptr, in, out, win,
                                         r0 * ow, r1 * ow, col);
                   });
  });
  if (!ok) return ctx.error("dtype ", dtype_name(x.dtype()), " is not supported");
  return Status::ok();
}

OpSchemaBuilder conv_common(const char* name) {
  OpSchemaBuilder b(name);
  conv_attrs(b.versions(13).inputs(2, 3).outputs(1)).types("T", {0, 1, 2}, dtypes::kFloat);
  return b;
}

}  // namespace

void register_conv_ops(OpRegistry& r) {
  register_conv_grad_ops(r);
  r.add(conv_common("Conv").infer(infer_conv).kernel(conv_kernel));
  r.add(conv_common("ConvTranspose")
            .optional_attr("output_padding", AttrType::kInts)
            .optional_attr("output_shape", AttrType::kInts)
            .infer(infer_conv_transpose)
            .kernel(conv_transpose_kernel));
  r.add(OpSchemaBuilder("DeformConv")
            .versions(19)
            .inputs(3, 5)
            .outputs(1)
            .optional_attr("dilations", AttrType::kInts)
            .attr("group", AttrType::kInt, 1)
            .optional_attr("kernel_shape", AttrType::kInts)
            .attr("offset_group", AttrType::kInt, 1)
            .optional_attr("pads", AttrType::kInts)
            .optional_attr("strides", AttrType::kInts)
            .types("T", {0, 1, 2, 3, 4}, dtypes::kFloat)
            .infer(infer_deform_conv)
            .kernel(deform_conv_kernel));
}

}  // namespace ferrite
