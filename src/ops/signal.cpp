// Signal processing (opset 17+): the window functions (HannWindow, HammingWindow,
// BlackmanWindow), DFT and STFT. DFT and STFT are the direct O(n^2) transform in double: the
// reference kernel is the oracle, not the fast path.
#include <cmath>
#include <complex>
#include <numbers>
#include <optional>

#include "ops/elementwise_util.h"
#include "ops/helpers.h"
#include "ops/numeric_cast.h"

namespace ferrite {

namespace {

// ---- windows ----

enum class Window { kHann, kHamming, kBlackman };

Expected<DType> window_dtype(const InferContext& ctx) {
  auto dt = dtype_from_onnx(static_cast<int>(ctx.node().attr_int("output_datatype", 1)));
  if (!dt || !(is_float(*dt) || is_integer(*dt)))
    return ctx.error("output_datatype ", ctx.node().attr_int("output_datatype", 1),
                     " is not a numeric type");
  return *dt;
}

Status infer_window(InferContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(DType dt, window_dtype(ctx));
  const Shape& s = ctx.input_shape(0);
  if (s.rank_known() && s.rank() != 0 && !(s.rank() == 1 && s.dims()[0] == Dim(1)))
    return ctx.error("size must be a scalar");
  auto v = ctx.input_dims_value(0);
  ctx.set_output(0, dt, Shape(std::vector<Dim>{v && v->size() == 1 ? (*v)[0] : Dim::unknown()}));
  return Status::ok();
}

Status window_kernel(KernelContext& ctx, Window w) {
  const Tensor& size_in = ctx.input(0);
  if (size_in.numel() != 1 || !is_integer(size_in.dtype()))
    return ctx.error("size must be an integer scalar");
  int64_t n = 0;
  visit_dtype(size_in.dtype(),
              [&]<class T>() { n = static_cast<int64_t>(to_double(size_in.data<T>()[0])); });
  if (n < 0) return ctx.error("size must be >= 0, got ", n);
  DType dt = ctx.node().output(0)->type.dtype;
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dt, {n}));
  // Periodic windows divide by N (one period of an N+1-long symmetric window), symmetric by N-1.
  const double denom = static_cast<double>(ctx.node().attr_int("periodic", 1) != 0 ? n : n - 1);
  const double pi = std::numbers::pi;
  return dispatch_dtype<TypeClass::kNumeric>(ctx, dt, [&]<class T>() -> Status {
    T* py = y->data<T>();
    for (int64_t i = 0; i < n; ++i) {
      double x = static_cast<double>(i), v = 0;
      if (w == Window::kHann) {
        double s = std::sin(x * pi / denom);
        v = s * s;
      } else if (w == Window::kHamming) {
        constexpr double a = 25.0 / 46.0;
        v = a - std::cos(x * pi * 2 / denom) * (1 - a);
      } else {
        v = 0.42 - 0.5 * std::cos(x * pi * 2 / denom) + 0.08 * std::cos(x * pi * 4 / denom);
      }
      py[i] = saturate_cast<T>(v);
    }
    return Status::ok();
  });
}

// ---- DFT ----
// x: [batch, n1, ..., 1 | 2] (real, or complex as (re, im) in the last dim); the transform runs
// along `axis` (an attribute before opset 20, default 1; input 2 from opset 20, default -2).

template <class Ctx, class Rank>
Expected<int64_t> dft_axis(const Ctx& ctx, std::optional<int64_t> axis_input, Rank rank) {
  int64_t axis = ctx.opset() >= 20 ? axis_input.value_or(-2) : ctx.node().attr_int("axis", 1);
  // The last dim holds (re, im): the signal axes are the others.
  if (axis < -rank || axis >= rank - 1 || axis == -1)
    return ctx.error("axis ", axis, " is not a signal axis of a rank-", rank, " input");
  return axis < 0 ? axis + rank : axis;
}

Status infer_dft(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (ctx.opset() >= 20 && ctx.node().has_attr("axis"))
    return ctx.error("axis is an input from opset 20");
  if (!x.rank_known()) {
    ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
    return Status::ok();
  }
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (rank < 2) return ctx.error("input must have rank >= 2");
  const Dim& last = x.dims().back();
  if (last.is_static() && *last.value() != 1 && *last.value() != 2)
    return ctx.error("the last dim must be 1 (real) or 2 (complex), got ", last.to_string());
  std::vector<Dim> dims = x.dims();
  dims.back() = Dim(int64_t{2});
  std::optional<int64_t> axis_input;
  bool axis_known = true;
  if (ctx.opset() >= 20 && ctx.num_inputs() > 2 && ctx.has_input(2)) {
    const Tensor* a = ctx.input_constant(2);
    if (a && a->numel() == 1 && a->dtype() == DType::kI64)
      axis_input = a->data<int64_t>()[0];
    else
      axis_known = false;
  }
  const bool onesided = ctx.node().attr_int("onesided", 0) != 0;
  const bool has_length = ctx.num_inputs() > 1 && ctx.has_input(1);
  if (axis_known) {
    FERRITE_ASSIGN_OR_RETURN(int64_t axis, dft_axis(ctx, axis_input, rank));
    if (has_length) {
      auto v = ctx.input_dims_value(1);
      dims[axis] = v && v->size() == 1 ? (*v)[0] : Dim::unknown();
    }
    if (onesided)
      dims[axis] = dims[axis].is_static() ? Dim(*dims[axis].value() / 2 + 1) : Dim::unknown();
  } else if (has_length || onesided) {
    for (size_t k = 1; k + 1 < dims.size(); ++k) dims[k] = Dim::unknown();
  }
  ctx.set_output(0, ctx.input_dtype(0), Shape(std::move(dims)));
  return Status::ok();
}

Status dft_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (rank < 2 || (x.dims().back() != 1 && x.dims().back() != 2))
    return ctx.error("input must be [..., 1 | 2]");
  std::optional<int64_t> axis_input;
  if (ctx.opset() >= 20 && ctx.num_inputs() > 2 && ctx.has_input(2)) {
    const Tensor& a = ctx.input(2);
    if (a.numel() != 1 || !is_integer(a.dtype()))
      return ctx.error("axis must be an integer scalar");
    visit_dtype(a.dtype(),
                [&]<class T>() { axis_input = static_cast<int64_t>(to_double(a.data<T>()[0])); });
  }
  FERRITE_ASSIGN_OR_RETURN(int64_t axis, dft_axis(ctx, axis_input, rank));
  const int64_t n_in = x.dims()[axis];
  int64_t n = n_in;
  if (ctx.num_inputs() > 1 && ctx.has_input(1)) {
    const Tensor& l = ctx.input(1);
    if (l.numel() != 1 || !is_integer(l.dtype()))
      return ctx.error("dft_length must be an integer scalar");
    visit_dtype(l.dtype(), [&]<class T>() { n = static_cast<int64_t>(to_double(l.data<T>()[0])); });
    if (n < 1) return ctx.error("dft_length must be >= 1, got ", n);
  }
  const bool inverse = ctx.node().attr_int("inverse", 0) != 0;
  const bool onesided = ctx.node().attr_int("onesided", 0) != 0;
  const int64_t n_out = onesided ? n / 2 + 1 : n;
  std::vector<int64_t> out_dims = x.dims();
  out_dims[axis] = n_out;
  out_dims.back() = 2;
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out_dims));
  const int64_t comps = x.dims().back();
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= x.dims()[k];
  for (int64_t k = axis + 1; k + 1 < rank; ++k) inner *= x.dims()[k];
  return dispatch_dtype<TypeClass::kFloat>(ctx, x.dtype(), [&]<class T>() -> Status {
    const T* px = x.data<T>();
    T* py = y->data<T>();
    const double sign = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / static_cast<double>(n) : 1.0;
    std::vector<std::complex<double>> sig(static_cast<size_t>(n));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t in = 0; in < inner; ++in) {
        // The signal, zero-padded or truncated to n.
        for (int64_t t = 0; t < n; ++t) {
          if (t >= n_in) {
            sig[t] = 0;
            continue;
          }
          const T* e = px + ((o * n_in + t) * inner + in) * comps;
          sig[t] = {to_double(e[0]), comps == 2 ? to_double(e[1]) : 0.0};
        }
        for (int64_t f = 0; f < n_out; ++f) {
          std::complex<double> acc = 0;
          for (int64_t t = 0; t < n; ++t) {
            // Reduce the phase index mod n first: exact for any size, and keeps the angle small.
            double ang = sign * 2 * std::numbers::pi * static_cast<double>((f * t) % n) /
                         static_cast<double>(n);
            acc += sig[t] * std::complex<double>(std::cos(ang), std::sin(ang));
          }
          T* e = py + ((o * n_out + f) * inner + in) * 2;
          e[0] = convert<T>(acc.real() * scale);
          e[1] = convert<T>(acc.imag() * scale);
        }
      }
    }
    return Status::ok();
  });
}

// ---- STFT (opset 17) ----
// signal [batch, length, 1 | 2], frame_step, optional window [w] and frame_length: frames of
// frame_length samples every frame_step, weighted by the window (ones when absent), each
// transformed with a frame_length-point DFT; output [batch, frames, bins, 2] with bins =
// frame_length / 2 + 1 when onesided (the default).

std::optional<int64_t> scalar_int(const InferContext& ctx, size_t i) {
  if (ctx.num_inputs() <= i || !ctx.has_input(i)) return std::nullopt;
  auto v = ctx.input_dims_value(i);
  if (!v || v->size() != 1 || !(*v)[0].is_static()) return std::nullopt;
  return *(*v)[0].value();
}

Status infer_stft(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (x.rank_known() && x.rank() != 3) return ctx.error("signal must be [batch, length, 1 | 2]");
  std::optional<int64_t> step = scalar_int(ctx, 1), flen = scalar_int(ctx, 3);
  if (!flen && ctx.num_inputs() > 2 && ctx.has_input(2) && ctx.input_shape(2).rank_known() &&
      ctx.input_shape(2).rank() == 1)
    flen = ctx.input_shape(2).dims()[0].value();
  Dim frames = Dim::unknown(), bins = Dim::unknown();
  const bool onesided = ctx.node().attr_int("onesided", 1) != 0;
  if (flen) bins = Dim(onesided ? *flen / 2 + 1 : *flen);
  if (x.rank_known() && step && flen && x.dims()[1].is_static() && *step > 0 &&
      *x.dims()[1].value() >= *flen)
    frames = Dim((*x.dims()[1].value() - *flen) / *step + 1);
  Dim batch = x.rank_known() ? x.dims()[0] : Dim::unknown();
  ctx.set_output(0, ctx.input_dtype(0), Shape({batch, frames, bins, Dim(int64_t{2})}));
  return Status::ok();
}

Status stft_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 3 || (x.dims()[2] != 1 && x.dims()[2] != 2))
    return ctx.error("signal must be [batch, length, 1 | 2]");
  auto read_int = [&](size_t i, int64_t& out) -> Status {
    const Tensor& t = ctx.input(i);
    if (t.numel() != 1 || !is_integer(t.dtype()))
      return ctx.error("input ", i, " must be an integer scalar");
    visit_dtype(t.dtype(),
                [&]<class T>() { out = static_cast<int64_t>(to_double(t.data<T>()[0])); });
    return Status::ok();
  };
  int64_t step = 0;
  FERRITE_RETURN_IF_ERROR(read_int(1, step));
  const bool has_window = ctx.num_inputs() > 2 && ctx.has_input(2);
  const int64_t len = x.dims()[1], comps = x.dims()[2], batch = x.dims()[0];
  int64_t flen = has_window ? ctx.input(2).numel() : len;
  if (ctx.num_inputs() > 3 && ctx.has_input(3)) FERRITE_RETURN_IF_ERROR(read_int(3, flen));
  if (step < 1 || flen < 1 || flen > len)
    return ctx.error("frame_step and frame_length do not fit the signal");
  if (has_window && ctx.input(2).numel() != flen)
    return ctx.error("window length must equal frame_length");
  const bool onesided = ctx.node().attr_int("onesided", 1) != 0;
  const int64_t frames = (len - flen) / step + 1, bins = onesided ? flen / 2 + 1 : flen;
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), {batch, frames, bins, 2}));
  std::vector<double> window(static_cast<size_t>(flen), 1.0);
  if (has_window) {
    const Tensor& w = ctx.input(2);
    visit_dtype(w.dtype(), [&]<class T>() {
      for (int64_t k = 0; k < flen; ++k) window[k] = to_double(w.data<T>()[k]);
    });
  }
  return dispatch_dtype<TypeClass::kFloat>(ctx, x.dtype(), [&]<class T>() -> Status {
    const T* px = x.data<T>();
    T* py = y->data<T>();
    std::vector<std::complex<double>> sig(static_cast<size_t>(flen));
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t f = 0; f < frames; ++f) {
        for (int64_t t = 0; t < flen; ++t) {
          const T* e = px + (b * len + f * step + t) * comps;
          sig[t] =
              std::complex<double>(to_double(e[0]), comps == 2 ? to_double(e[1]) : 0.0) * window[t];
        }
        for (int64_t k = 0; k < bins; ++k) {
          std::complex<double> acc = 0;
          for (int64_t t = 0; t < flen; ++t) {
            double ang = -2 * std::numbers::pi * static_cast<double>((k * t) % flen) /
                         static_cast<double>(flen);
            acc += sig[t] * std::complex<double>(std::cos(ang), std::sin(ang));
          }
          T* e = py + ((b * frames + f) * bins + k) * 2;
          e[0] = convert<T>(acc.real());
          e[1] = convert<T>(acc.imag());
        }
      }
    }
    return Status::ok();
  });
}

}  // namespace

void register_signal_ops(OpRegistry& r) {
  const std::pair<const char*, Window> windows[] = {{"HannWindow", Window::kHann},
                                                    {"HammingWindow", Window::kHamming},
                                                    {"BlackmanWindow", Window::kBlackman}};
  for (const auto& [name, kind] : windows) {
    Window w = kind;
    r.add(OpSchemaBuilder(name)
              .versions(17)
              .inputs(1)
              .outputs(1)
              .attr("output_datatype", AttrType::kInt, 1)
              .attr("periodic", AttrType::kInt, 1)
              .types("T1", {0}, dtypes::kIndex)
              .infer(infer_window)
              .kernel([w](KernelContext& ctx) { return window_kernel(ctx, w); }));
  }
  r.add(OpSchemaBuilder("DFT")
            .versions(17)
            .inputs(1, 3)
            .outputs(1)
            .optional_attr("axis", AttrType::kInt)
            .attr("inverse", AttrType::kInt, 0)
            .attr("onesided", AttrType::kInt, 0)
            .types("T1", {0}, dtypes::kFloat)
            .types("T2", {1, 2}, dtypes::kIndex, false)
            .infer(infer_dft)
            .kernel(dft_kernel));
  r.add(OpSchemaBuilder("STFT")
            .versions(17)
            .inputs(2, 4)
            .outputs(1)
            .attr("onesided", AttrType::kInt, 1)
            .types("T1", {0, 2}, dtypes::kFloat)
            .types("T2", {1, 3}, dtypes::kIndex, false)
            .infer(infer_stft)
            .kernel(stft_kernel));
}

}  // namespace ferrite
