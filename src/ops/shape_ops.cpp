// Shape-manipulation ops: Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat,
// Split, Expand, Tile, Identity. Inference keeps shapes symbolic and propagates the symbolic
// contents of shape tensors ("dims values"), so that the Shape -> Gather -> Unsqueeze -> Concat
// -> Reshape chains of exported transformers resolve to shapes like [batch,seq,12,64].
#include <algorithm>
#include <cstring>

#include "ops/shape_helpers.h"
#include "support/checked_math.h"

namespace ferrite {

namespace {

using namespace dtypes;

Shape vector_shape(Dim n) {
  return Shape(std::vector<Dim>{std::move(n)});
}

// Shape of a rank-`rank` tensor whose dims are all unknown.
Shape unknown_dims(size_t rank) {
  return Shape(std::vector<Dim>(rank));
}

// The static length of a 1-D input (shape/axes/repeats), if known.
std::optional<size_t> static_length(const InferContext& ctx, size_t i) {
  const Shape& s = ctx.input_shape(i);
  if (!s.rank_known() || s.rank() != 1) return std::nullopt;
  auto v = s[0].value();
  if (!v || *v < 0) return std::nullopt;
  return static_cast<size_t>(*v);
}

// Records `value` as the symbolic contents of output `out` when that output is 0-d or 1-d.
void propagate_dims_value(InferContext& ctx, size_t out, const Shape& shape,
                          std::vector<Dim> value) {
  if (!shape.rank_known() || shape.rank() > 1) return;
  int64_t n = shape.rank() == 0 ? 1 : shape[0].value().value_or(-1);
  if (n != static_cast<int64_t>(value.size())) return;
  ctx.set_output_dims_value(out, std::move(value));
}

// ---- Shape, Size ----

std::pair<int64_t, int64_t> shape_bounds(const Node& n, int64_t rank) {
  int64_t start = n.opset >= 15 ? n.attr_int("start", 0) : 0;
  int64_t end = rank;
  if (n.opset >= 15 && n.has_attr("end")) end = n.attr_int("end");
  auto norm = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  start = norm(start);
  end = norm(end);
  return {start, std::max(start, end)};
}

Status infer_shape(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  if (!in.rank_known()) {
    ctx.set_output(0, DType::kI64, vector_shape(Dim()));
    return Status::ok();
  }
  auto [b, e] = shape_bounds(ctx.node(), static_cast<int64_t>(in.rank()));
  ctx.set_output(0, DType::kI64, vector_shape(e - b));
  ctx.set_output_dims_value(0, std::vector<Dim>(in.dims().begin() + b, in.dims().begin() + e));
  return Status::ok();
}

Status shape_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto [b, e] = shape_bounds(ctx.node(), static_cast<int64_t>(x.rank()));
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kI64, {e - b}));
  for (int64_t i = b; i < e; ++i) y->data<int64_t>()[i - b] = x.dim(i);
  return Status::ok();
}

Status infer_size(InferContext& ctx) {
  ctx.set_output(0, DType::kI64, Shape::scalar());
  if (ctx.input_shape(0).rank_known()) ctx.set_output_dims_value(0, {ctx.input_shape(0).numel()});
  return Status::ok();
}

Status size_kernel(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kI64, {}));
  y->data<int64_t>()[0] = ctx.input(0).numel();
  return Status::ok();
}

// ---- Reshape, Flatten, Squeeze, Unsqueeze ----

bool reshape_allowzero(const Node& n) {
  return n.opset >= 14 && n.attr_int("allowzero") != 0;
}

Status infer_reshape(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  const Shape& in = ctx.input_shape(0);
  const Shape& ts = ctx.input_shape(1);
  if (ts.rank_known() && ts.rank() != 1)
    return ctx.error("the shape input must be 1-D, got ", ts.to_string());
  auto target = ctx.input_dims_value(1);
  if (!target) {
    auto n = static_length(ctx, 1);
    ctx.set_output(0, dt, n ? unknown_dims(*n) : Shape::unknown_rank());
    return Status::ok();
  }
  bool allowzero = reshape_allowzero(ctx.node());
  std::vector<Dim> out;
  int neg = -1;
  bool literal_zero = false;
  for (size_t i = 0; i < target->size(); ++i) {
    const Dim& t = (*target)[i];
    auto v = t.value();
    if (v && *v == -1) {
      if (neg >= 0) return ctx.error("the shape has more than one -1");
      neg = static_cast<int>(i);
      out.emplace_back();
    } else if (v && *v < -1) {
      return ctx.error("invalid shape value ", *v);
    } else if (v && *v == 0 && !allowzero) {
      if (!in.rank_known()) {
        out.emplace_back();
      } else if (i >= in.rank()) {
        return ctx.error("shape[", i, "] is 0 (copy the input dim) but the input ", in.to_string(),
                         " has rank ", in.rank());
      } else {
        out.push_back(in[i]);
      }
    } else {
      literal_zero = literal_zero || (v && *v == 0);
      out.push_back(t);
    }
  }
  if (neg >= 0 && literal_zero) return ctx.error("the shape has both -1 and 0 with allowzero=1");
  Dim total = in.numel();
  if (neg >= 0) {
    std::vector<Dim> others = out;
    others.erase(others.begin() + neg);
    Dim rest = dim_product(others);
    auto tv = total.value(), rv = rest.value();
    if (tv && rv) {
      if (*rv == 0 || *tv % *rv != 0)
        return ctx.error("cannot reshape ", in.to_string(), " to ", Shape(*target).to_string());
      out[neg] = *tv / *rv;
    } else {
      out[neg] = exact_quotient(total, rest);
    }
  } else {
    auto tv = total.value(), ov = dim_product(out).value();
    if (tv && ov && *tv != *ov)
      return ctx.error("cannot reshape ", in.to_string(), " to ", Shape(*target).to_string());
  }
  Shape result(out);
  ctx.set_output(0, dt, result);
  if (auto v = ctx.input_dims_value(0)) propagate_dims_value(ctx, 0, result, *v);
  return Status::ok();
}

// The -1 of a Reshape of an empty tensor whose other output dims multiply to 0.
int64_t empty_reshape_size(const KernelContext& ctx, const Tensor& x,
                           const std::vector<int64_t>& out, int neg) {
  const Value* y = ctx.node().output(0);
  if (y && y->type.shape.rank_known() && y->type.shape.rank() == out.size())
    if (auto v = y->type.shape[neg].value(); v && *v >= 0) return *v;
  int64_t in = 1, other = 1;
  for (int64_t d : x.dims())
    if (d != 0) in *= d;
  for (size_t i = 0; i < out.size(); ++i)
    if (static_cast<int>(i) != neg && out[i] != 0) other *= out[i];
  return in % other == 0 ? in / other : 0;
}

Status reshape_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& s = ctx.input(1);
  if (s.rank() != 1) return ctx.error("the shape input must be 1-D, got ", s.type_string());
  bool allowzero = reshape_allowzero(ctx.node());
  std::vector<int64_t> out = s.to_int_vector();
  int neg = -1;
  bool literal_zero = false;
  int64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t v = out[i];
    if (v == -1) {
      if (neg >= 0) return ctx.error("the shape has more than one -1");
      neg = static_cast<int>(i);
      continue;
    }
    if (v < -1) return ctx.error("invalid shape value ", v);
    if (v == 0 && !allowzero) {
      if (i >= x.rank())
        return ctx.error("shape[", i, "] is 0 (copy the input dim) but the input ", x.type_string(),
                         " has rank ", x.rank());
      out[i] = x.dim(i);
    }
    literal_zero = literal_zero || (v == 0 && allowzero);
    auto k = checked_mul(known, out[i]);
    if (!k) return ctx.error("shape ", dims_to_string(out), " overflows");
    known = *k;
  }
  if (neg >= 0) {
    if (literal_zero) return ctx.error("the shape has both -1 and 0 with allowzero=1");
    if (known == 0 && x.numel() == 0) {
      // An empty input (batch 0) copied into a 0 dim: every size satisfies the -1. Take the one
      // shape inference derived from the symbolic dims, which the compiling devices use (e.g.
      // [batch,128,8,8] -> [batch,-1] gives 8192 at any batch), else ignore the zero dims.
      out[neg] = empty_reshape_size(ctx, x, out, neg);
      ctx.set_output(0, x.reshaped(out));
      return Status::ok();
    }
    if (known == 0 || x.numel() % known != 0)
      return ctx.error("cannot reshape ", x.type_string(), " to ",
                       dims_to_string(s.to_int_vector()));
    out[neg] = x.numel() / known;
  } else if (known != x.numel()) {
    return ctx.error("cannot reshape ", x.type_string(), " to ", dims_to_string(s.to_int_vector()));
  }
  ctx.set_output(0, x.reshaped(out));
  return Status::ok();
}

template <class Ctx>
Expected<int64_t> flatten_axis(const Ctx& ctx, int64_t rank) {
  int64_t axis = ctx.node().attr_int("axis", 1);
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a > rank) return ctx.error("axis ", axis, " is out of range for rank ", rank);
  return a;
}

Status infer_flatten(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  if (!in.rank_known()) {
    ctx.set_output(0, ctx.input_dtype(0), unknown_dims(2));
    return Status::ok();
  }
  FERRITE_ASSIGN_OR_RETURN(int64_t a, flatten_axis(ctx, static_cast<int64_t>(in.rank())));
  ctx.set_output(0, ctx.input_dtype(0),
                 Shape({dim_product(in.dims(), 0, a), dim_product(in.dims(), a, in.rank())}));
  return Status::ok();
}

Status flatten_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  FERRITE_ASSIGN_OR_RETURN(int64_t a, flatten_axis(ctx, static_cast<int64_t>(x.rank())));
  int64_t outer = 1;
  for (int64_t i = 0; i < a; ++i) outer *= x.dim(i);
  int64_t inner = 1;
  for (size_t i = a; i < x.rank(); ++i) inner *= x.dim(i);
  ctx.set_output(0, x.reshaped({outer, inner}));
  return Status::ok();
}

Status infer_squeeze(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  const Shape& in = ctx.input_shape(0);
  if (!in.rank_known()) {
    ctx.set_output(0, dt, Shape::unknown_rank());
    return Status::ok();
  }
  int64_t rank = static_cast<int64_t>(in.rank());
  std::vector<bool> drop(in.rank(), false);
  // An empty axes tensor means "no axes" (like the ONNX reference and ONNX Runtime).
  auto axes = ctx.has_input(1) ? static_values(ctx.input_dims_value(1)) : std::nullopt;
  if (ctx.has_input(1) && !axes && static_length(ctx, 1) != size_t{0}) {
    ctx.set_output(0, dt, Shape::unknown_rank());
    return Status::ok();
  }
  if (axes && !axes->empty()) {
    FERRITE_ASSIGN_OR_RETURN(auto norm, normalize_axes(ctx, *axes, rank, true));
    for (int64_t a : norm) {
      if (in[a].is_static() && in[a].value() != 1)
        return ctx.error("cannot squeeze axis ", a, " of size ", in[a].to_string(), " in ",
                         in.to_string());
      drop[a] = true;
    }
  } else {
    // Without axes every size-1 dim goes; a symbolic dim might be 1, so the rank is unknowable.
    for (size_t i = 0; i < in.rank(); ++i) {
      if (!in[i].is_static()) {
        ctx.set_output(0, dt, Shape::unknown_rank());
        return Status::ok();
      }
      drop[i] = in[i].value() == 1;
    }
  }
  std::vector<Dim> out;
  for (size_t i = 0; i < in.rank(); ++i)
    if (!drop[i]) out.push_back(in[i]);
  Shape result(out);
  ctx.set_output(0, dt, result);
  if (auto v = ctx.input_dims_value(0)) propagate_dims_value(ctx, 0, result, *v);
  return Status::ok();
}

Status squeeze_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<bool> drop(x.rank(), false);
  if (ctx.has_input(1) && ctx.input(1).numel() > 0) {
    FERRITE_ASSIGN_OR_RETURN(auto axes, normalize_axes(ctx, ctx.input(1).to_int_vector(),
                                                       static_cast<int64_t>(x.rank()), true));
    for (int64_t a : axes) {
      if (x.dim(a) != 1)
        return ctx.error("cannot squeeze axis ", a, " of size ", x.dim(a), " in ", x.type_string());
      drop[a] = true;
    }
  } else {
    for (size_t i = 0; i < x.rank(); ++i) drop[i] = x.dim(i) == 1;
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < x.rank(); ++i)
    if (!drop[i]) out.push_back(x.dim(i));
  ctx.set_output(0, x.reshaped(out));
  return Status::ok();
}

// Output dims of Unsqueeze: a 1 at every (normalised) axis, the input dims elsewhere.
template <class Ctx, class D>
Expected<std::vector<D>> unsqueeze_dims(const Ctx& ctx, const std::vector<D>& in,
                                        const std::vector<int64_t>& axes) {
  int64_t out_rank = static_cast<int64_t>(in.size() + axes.size());
  FERRITE_ASSIGN_OR_RETURN(auto norm, normalize_axes(ctx, axes, out_rank));
  std::vector<bool> is_new(static_cast<size_t>(out_rank), false);
  for (int64_t a : norm) is_new[a] = true;
  std::vector<D> out;
  size_t k = 0;
  for (int64_t i = 0; i < out_rank; ++i) out.push_back(is_new[i] ? D(int64_t{1}) : in[k++]);
  return out;
}

Status infer_unsqueeze(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  const Shape& in = ctx.input_shape(0);
  auto axes = static_values(ctx.input_dims_value(1));
  if (!in.rank_known() || !axes) {
    auto n = static_length(ctx, 1);
    ctx.set_output(0, dt,
                   in.rank_known() && n ? unknown_dims(in.rank() + *n) : Shape::unknown_rank());
    return Status::ok();
  }
  FERRITE_ASSIGN_OR_RETURN(auto out, unsqueeze_dims(ctx, in.dims(), *axes));
  Shape result(out);
  ctx.set_output(0, dt, result);
  if (auto v = ctx.input_dims_value(0)) propagate_dims_value(ctx, 0, result, *v);
  return Status::ok();
}

Status unsqueeze_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  FERRITE_ASSIGN_OR_RETURN(auto out, unsqueeze_dims(ctx, x.dims(), ctx.input(1).to_int_vector()));
  ctx.set_output(0, x.reshaped(out));
  return Status::ok();
}

// ---- Transpose ----

template <class Ctx>
Expected<std::vector<int64_t>> transpose_perm(const Ctx& ctx, size_t rank) {
  std::vector<int64_t> perm;
  if (ctx.node().has_attr("perm")) {
    perm = ctx.node().attr_ints("perm");
  } else {
    for (size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  if (perm.size() != rank)
    return ctx.error("perm ", dims_to_string(perm), " has ", perm.size(),
                     " entries but the input has rank ", rank);
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank))
      return ctx.error("perm ", dims_to_string(perm), " has entry ", p, " out of range for rank ",
                       rank);
    if (seen[p]) return ctx.error("perm ", dims_to_string(perm), " repeats axis ", p);
    seen[p] = true;
  }
  return perm;
}

Status infer_transpose(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  if (!in.rank_known()) {
    // Validate what can be validated; the rank follows from perm when it is given.
    if (ctx.node().has_attr("perm")) {
      FERRITE_ASSIGN_OR_RETURN(auto perm, transpose_perm(ctx, ctx.node().attr_ints("perm").size()));
      ctx.set_output(0, ctx.input_dtype(0), unknown_dims(perm.size()));
    } else {
      ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
    }
    return Status::ok();
  }
  FERRITE_ASSIGN_OR_RETURN(auto perm, transpose_perm(ctx, in.rank()));
  std::vector<Dim> out;
  for (int64_t p : perm) out.push_back(in[p]);
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
  return Status::ok();
}

Status transpose_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  FERRITE_ASSIGN_OR_RETURN(auto perm, transpose_perm(ctx, x.rank()));
  std::vector<int64_t> out;
  std::vector<std::vector<int64_t>> maps;
  auto strides = contiguous_strides(x.dims());
  for (int64_t p : perm) {
    out.push_back(x.dim(p));
    maps.push_back(iota_map(x.dim(p), strides[p]));
  }
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out));
  copy_by_axis_maps(x, *y, maps);
  return Status::ok();
}

// ---- Concat, Split ----

Status infer_concat(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  int64_t rank = -1;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error("input ", i, " is missing");
    if (ctx.input_dtype(i) != dt)
      return ctx.error("inputs must share one dtype, got ", dtype_name(dt), " and ",
                       dtype_name(ctx.input_dtype(i)));
    const Shape& s = ctx.input_shape(i);
    if (!s.rank_known()) continue;
    if (rank >= 0 && static_cast<int64_t>(s.rank()) != rank)
      return ctx.error("inputs have different ranks: ", ctx.input_shape(0).to_string(), " and ",
                       s.to_string());
    rank = static_cast<int64_t>(s.rank());
  }
  if (rank < 0) {
    ctx.set_output(0, dt, Shape::unknown_rank());
    return Status::ok();
  }
  if (rank == 0) return ctx.error("cannot concatenate scalars");
  FERRITE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.node().attr_int("axis"), rank));
  std::vector<Dim> out(static_cast<size_t>(rank));
  Dim total(int64_t{0});
  bool first = true;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Shape& s = ctx.input_shape(i);
    if (!s.rank_known()) {
      total = Dim::unknown();
      continue;
    }
    total = small_static(s[axis]) ? total + s[axis] : Dim::unknown();
    for (int64_t d = 0; d < rank; ++d) {
      if (d == axis) continue;
      const Dim& cur = out[d];
      const Dim& next = s[d];
      if (first || !cur.is_known() || (!cur.is_static() && next.is_static())) {
        out[d] = next;
      } else if (cur.is_static() && next.is_static() && cur != next) {
        return ctx.error("inputs differ in dim ", d, " (", cur.to_string(), " vs ",
                         next.to_string(), "); only axis ", axis, " may differ");
      }
    }
    first = false;
  }
  out[axis] = total;
  Shape result(out);
  ctx.set_output(0, dt, result);
  if (rank == 1) {
    std::vector<Dim> value;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      auto v = ctx.input_dims_value(i);
      if (!v) return Status::ok();
      value.insert(value.end(), v->begin(), v->end());
    }
    propagate_dims_value(ctx, 0, result, value);
  }
  return Status::ok();
}

Status concat_kernel(KernelContext& ctx) {
  const Tensor& x0 = ctx.input(0);
  int64_t rank = static_cast<int64_t>(x0.rank());
  if (rank == 0) return ctx.error("cannot concatenate scalars");
  FERRITE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.node().attr_int("axis"), rank));
  std::vector<int64_t> out = x0.dims();
  out[axis] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& x = ctx.input(i);
    if (x.dtype() != x0.dtype()) return ctx.error("inputs must share one dtype");
    if (static_cast<int64_t>(x.rank()) != rank)
      return ctx.error("inputs have different ranks: ", x0.type_string(), " and ", x.type_string());
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && x.dim(d) != x0.dim(d))
        return ctx.error("inputs differ in dim ", d, " (", x0.type_string(), " vs ",
                         x.type_string(), "); only axis ", axis, " may differ");
    out[axis] += x.dim(axis);
  }
  // Every element is written below: no zero fill.
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output_uninitialized(0, x0.dtype(), out));
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out[d];
  size_t row =
      static_cast<size_t>(y->numel() / std::max<int64_t>(outer, 1)) * dtype_size(x0.dtype());
  if (outer == 0 || y->numel() == 0) return Status::ok();
  auto* dst = static_cast<uint8_t*>(y->raw());
  size_t offset = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& x = ctx.input(i);
    size_t chunk = static_cast<size_t>(x.numel() / outer) * dtype_size(x.dtype());
    const auto* src = static_cast<const uint8_t*>(x.raw());
    for (int64_t o = 0; o < outer; ++o)
      if (chunk) std::memcpy(dst + o * row + offset, src + o * chunk, chunk);
    offset += chunk;
  }
  return Status::ok();
}

// Split sizes along the axis: from the `split` input, else num_outputs (opset 18, last chunk
// smaller) or an equal split into the outputs. Works on Dims so inference and kernel share it.
// There may be more pieces than `nout` node outputs: the importer drops trailing unused ones.
template <class Ctx>
Expected<std::vector<Dim>> split_sizes(const Ctx& ctx, const Dim& d,
                                       const std::optional<std::vector<Dim>>& split,
                                       bool split_given, size_t nout) {
  if (split_given) {
    if (!split) return std::vector<Dim>(nout);
    if (split->size() < nout)
      return ctx.error("split has ", split->size(), " entries but there are ", nout, " outputs");
    Dim sum(int64_t{0});
    for (const Dim& s : *split) {
      if (s.value() && *s.value() < 0) return ctx.error("split sizes must be >= 0");
      if (!small_static(s)) return ctx.error("split size ", s.to_string(), " is too large");
      sum = sum + s;
    }
    if (sum.is_static() && d.is_static() && sum != d)
      return ctx.error("split sizes sum to ", sum.to_string(), " but the axis has size ",
                       d.to_string());
    return *split;
  }
  int64_t n = static_cast<int64_t>(nout);
  bool uneven_ok = false;
  if (ctx.opset() >= 18 && ctx.node().has_attr("num_outputs")) {
    n = ctx.node().attr_int("num_outputs");
    if (n < 1 || n > (1 << 16)) return ctx.error("num_outputs must be in [1, 65536], got ", n);
    if (n < static_cast<int64_t>(nout))
      return ctx.error("num_outputs is ", n, " but the node has ", nout, " outputs");
    uneven_ok = true;
  }
  if (auto v = d.value()) {
    if (*v % n == 0) return std::vector<Dim>(n, Dim(*v / n));
    if (!uneven_ok)
      return ctx.error("axis of size ", *v, " cannot be split evenly into ", n, " outputs");
    int64_t chunk = *v / n + 1;
    int64_t last = *v - chunk * (n - 1);
    if (last < 0)
      return ctx.error("axis of size ", *v, " cannot be split into ", n, " chunks of ", chunk);
    std::vector<Dim> out(n, Dim(chunk));
    out.back() = last;
    return out;
  }
  if (!d.is_known()) return std::vector<Dim>(n);
  if (!uneven_ok) return std::vector<Dim>(n, d.floordiv(Dim(n)));
  Dim chunk = ceil_div(d, n);
  std::vector<Dim> out(n, chunk);
  out.back() = d - chunk * Dim(n - 1);
  return out;
}

int64_t split_axis_attr(const Node& n) {
  return n.attr_int("axis", 0);
}

Status infer_split(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  const Shape& in = ctx.input_shape(0);
  size_t nout = ctx.num_outputs();
  if (!in.rank_known()) {
    for (size_t i = 0; i < nout; ++i) ctx.set_output(i, dt, Shape::unknown_rank());
    return Status::ok();
  }
  int64_t rank = static_cast<int64_t>(in.rank());
  FERRITE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, split_axis_attr(ctx.node()), rank));
  if (rank == 0) return ctx.error("cannot split a scalar");
  std::optional<std::vector<Dim>> split;
  if (ctx.has_input(1)) split = ctx.input_dims_value(1);
  FERRITE_ASSIGN_OR_RETURN(auto sizes, split_sizes(ctx, in[axis], split, ctx.has_input(1), nout));
  auto value = ctx.input_dims_value(0);
  Dim offset(int64_t{0});
  for (size_t i = 0; i < nout; ++i) {
    std::vector<Dim> dims = in.dims();
    dims[axis] = sizes[i];
    Shape s(dims);
    ctx.set_output(i, dt, s);
    auto off = offset.value(), len = sizes[i].value();
    if (value && rank == 1 && off && len && *off + *len <= static_cast<int64_t>(value->size()))
      propagate_dims_value(ctx, i, s,
                           std::vector<Dim>(value->begin() + *off, value->begin() + *off + *len));
    offset = offset + sizes[i];
  }
  return Status::ok();
}

Status split_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return ctx.error("cannot split a scalar");
  FERRITE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, split_axis_attr(ctx.node()), rank));
  std::optional<std::vector<Dim>> split;
  if (ctx.has_input(1)) {
    std::vector<Dim> s;
    for (int64_t v : ctx.input(1).to_int_vector()) s.emplace_back(v);
    split = s;
  }
  FERRITE_ASSIGN_OR_RETURN(
      auto sizes, split_sizes(ctx, x.dim(axis), split, ctx.has_input(1), ctx.num_outputs()));
  auto strides = contiguous_strides(x.dims());
  int64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    int64_t len = *sizes[i].value();
    if (offset + len > x.dim(axis))
      return ctx.error("split sizes exceed the axis size ", x.dim(axis));
    if (ctx.has_output(i)) {
      std::vector<int64_t> dims = x.dims();
      dims[axis] = len;
      FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output_uninitialized(i, x.dtype(), dims));
      std::vector<std::vector<int64_t>> maps;
      for (int64_t d = 0; d < rank; ++d)
        maps.push_back(iota_map(dims[d], strides[d], d == axis ? offset : 0));
      copy_by_axis_maps(x, *y, maps);
    }
    offset += len;
  }
  if (offset != x.dim(axis))
    return ctx.error("split sizes sum to ", offset, " but the axis has size ", x.dim(axis));
  return Status::ok();
}

// ---- Expand, Tile, Identity ----

Status infer_expand(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  const Shape& ss = ctx.input_shape(1);
  if (ss.rank_known() && ss.rank() != 1)
    return ctx.error("the shape input must be 1-D, got ", ss.to_string());
  std::optional<std::vector<Dim>> target = ctx.input_dims_value(1);
  if (!target) {
    auto n = static_length(ctx, 1);
    if (!n) {
      ctx.set_output(0, dt, Shape::unknown_rank());
      return Status::ok();
    }
    target = std::vector<Dim>(*n);
  }
  std::string e;
  auto out = broadcast_shapes(ctx.input_shape(0), Shape(*target), &e);
  if (!out) return ctx.error(e);
  ctx.set_output(0, dt, *out);
  if (auto v = ctx.input_dims_value(0)) {
    if (out->rank() == 1 && v->size() == 1 && out->dims()[0].value())
      propagate_dims_value(ctx, 0, *out, std::vector<Dim>(*out->dims()[0].value(), (*v)[0]));
    else if (out->rank() <= 1)
      propagate_dims_value(ctx, 0, *out, *v);
  }
  return Status::ok();
}

Status expand_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& s = ctx.input(1);
  if (s.rank() != 1) return ctx.error("the shape input must be 1-D, got ", s.type_string());
  FERRITE_ASSIGN_OR_RETURN(auto out, broadcast_dims(ctx, x.dims(), s.to_int_vector()));
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out));
  auto strides = broadcast_strides(x.dims(), out);
  std::vector<std::vector<int64_t>> maps;
  for (size_t d = 0; d < out.size(); ++d) maps.push_back(iota_map(out[d], strides[d]));
  copy_by_axis_maps(x, *y, maps);
  return Status::ok();
}

Status infer_tile(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  const Shape& in = ctx.input_shape(0);
  auto reps = ctx.input_dims_value(1);
  if (!in.rank_known()) {
    auto n = static_length(ctx, 1);
    ctx.set_output(0, dt, n ? unknown_dims(*n) : Shape::unknown_rank());
    return Status::ok();
  }
  if (!reps) {
    ctx.set_output(0, dt, unknown_dims(in.rank()));
    return Status::ok();
  }
  if (reps->size() != in.rank())
    return ctx.error("repeats has ", reps->size(), " entries but the input has rank ", in.rank());
  std::vector<Dim> out;
  for (size_t i = 0; i < in.rank(); ++i) {
    if (auto r = (*reps)[i].value(); r && *r < 0) return ctx.error("repeats must be >= 0");
    out.push_back(small_static((*reps)[i]) ? in[i] * (*reps)[i] : Dim::unknown());
  }
  Shape result(out);
  ctx.set_output(0, dt, result);
  auto v = ctx.input_dims_value(0);
  auto r = static_values(reps);
  if (v && r && r->size() == 1 && (*r)[0] <= 1024) {
    std::vector<Dim> tiled;
    for (int64_t k = 0; k < (*r)[0]; ++k) tiled.insert(tiled.end(), v->begin(), v->end());
    propagate_dims_value(ctx, 0, result, tiled);
  }
  return Status::ok();
}

Status tile_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto reps = ctx.input(1).to_int_vector();
  if (ctx.input(1).rank() != 1 || reps.size() != x.rank())
    return ctx.error("repeats ", ctx.input(1).type_string(),
                     " must be 1-D with one entry per "
                     "input dim (rank ",
                     x.rank(), ")");
  std::vector<int64_t> out;
  for (size_t i = 0; i < x.rank(); ++i) {
    if (reps[i] < 0) return ctx.error("repeats must be >= 0, got ", reps[i]);
    auto n = checked_mul(x.dim(i), reps[i]);
    if (!n) return ctx.error("output dims overflow");
    out.push_back(*n);
  }
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out));
  if (y->numel() == 0) return Status::ok();
  auto strides = contiguous_strides(x.dims());
  std::vector<std::vector<int64_t>> maps;
  for (size_t d = 0; d < out.size(); ++d) {
    std::vector<int64_t> m(static_cast<size_t>(out[d]));
    for (int64_t i = 0; i < out[d]; ++i) m[i] = (i % x.dim(d)) * strides[d];
    maps.push_back(std::move(m));
  }
  copy_by_axis_maps(x, *y, maps);
  return Status::ok();
}

Status infer_identity(InferContext& ctx) {
  ctx.set_output(0, ctx.input_type(0));
  if (auto v = ctx.input_dims_value(0)) propagate_dims_value(ctx, 0, ctx.input_shape(0), *v);
  if (const Tensor* c = ctx.input_constant(0)) ctx.set_output_constant(0, *c);
  return Status::ok();
}

Status identity_kernel(KernelContext& ctx) {
  ctx.set_output(0, ctx.input(0));
  return Status::ok();
}

}  // namespace

// One compact schema chain per op reads best. kAllWithFloat8 where ONNX (opsets 19-21) lists
// the float8 types: Shape, Size, Reshape, Identity from 19; Flatten, (Un)Squeeze, Transpose from
// 21. Concat, Split, Expand, Tile, Slice and Gather do not list them up to opset 21.
// clang-format off
void register_shape_ops(OpRegistry& r) {
  r.add(OpSchemaBuilder("Shape").versions(13).inputs(1).outputs(1)
            .attr("start", AttrType::kInt, int64_t{0}).optional_attr("end", AttrType::kInt)
            .types("T", {0}, kAllWithFloat8).infer(infer_shape).kernel(shape_kernel));
  r.add(OpSchemaBuilder("Size").versions(13).inputs(1).outputs(1).types("T", {0}, kAllWithFloat8)
            .infer(infer_size).kernel(size_kernel));
  r.add(OpSchemaBuilder("Reshape").versions(13).inputs(2).outputs(1)
            .attr("allowzero", AttrType::kInt, int64_t{0})
            .types("T", {0}, kAllWithFloat8).types("shape", {1}, {DType::kI64})
            .infer(infer_reshape).kernel(reshape_kernel));
  r.add(OpSchemaBuilder("Flatten").versions(13).inputs(1).outputs(1)
            .attr("axis", AttrType::kInt, int64_t{1}).types("T", {0}, kAllWithFloat8)
            .infer(infer_flatten).kernel(flatten_kernel));
  r.add(OpSchemaBuilder("Squeeze").versions(13).inputs(1, 2).outputs(1)
            .types("T", {0}, kAllWithFloat8).types("axes", {1}, {DType::kI64})
            .infer(infer_squeeze).kernel(squeeze_kernel));
  r.add(OpSchemaBuilder("Unsqueeze").versions(13).inputs(2).outputs(1)
            .types("T", {0}, kAllWithFloat8).types("axes", {1}, {DType::kI64})
            .infer(infer_unsqueeze).kernel(unsqueeze_kernel));
  r.add(OpSchemaBuilder("Transpose").versions(13).inputs(1).outputs(1)
            .optional_attr("perm", AttrType::kInts).types("T", {0}, kAllWithFloat8)
            .infer(infer_transpose).kernel(transpose_kernel));
  r.add(OpSchemaBuilder("Concat").versions(13).inputs(1, INT_MAX).outputs(1)
            .required_attr("axis", AttrType::kInt)
            .variadic_types("T", 0, kAll)
            .infer(infer_concat).kernel(concat_kernel));
  r.add(OpSchemaBuilder("Split").versions(13).inputs(1, 2).outputs(1, INT_MAX)
            .attr("axis", AttrType::kInt, int64_t{0}).optional_attr("num_outputs", AttrType::kInt)
            .types("T", {0}, kAll).types("split", {1}, {DType::kI64})
            .infer(infer_split).kernel(split_kernel));
  r.add(OpSchemaBuilder("Expand").versions(13).inputs(2).outputs(1)
            .types("T", {0}, kAll).types("shape", {1}, {DType::kI64})
            .infer(infer_expand).kernel(expand_kernel));
  r.add(OpSchemaBuilder("Tile").versions(13).inputs(2).outputs(1)
            .types("T", {0}, kAll).types("repeats", {1}, {DType::kI64})
            .infer(infer_tile).kernel(tile_kernel));
  r.add(OpSchemaBuilder("Identity").versions(13).inputs(1).outputs(1)
            .types("T", {0}, kAllWithFloat8).any_value_kind()
            .infer(infer_identity).kernel(identity_kernel));
  register_slice_pad_ops(r);
  register_constant_ops(r);
}
// clang-format on

}  // namespace ferrite
