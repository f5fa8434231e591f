// Indexing ops: Gather, GatherElements, GatherND, ScatterElements, ScatterND, OneHot, NonZero.
// Every index read from a tensor is range-checked (negative values count from the end); an
// out-of-range index is an error naming the node, never an out-of-bounds access.
#include <algorithm>
#include <cstring>

#include "ops/shape_helpers.h"

namespace ferrite {

namespace {

using namespace dtypes;

// Wraps a possibly negative index into [0, size); error when it is outside [-size, size).
template <class Ctx>
Status wrap_index(const Ctx& ctx, int64_t& idx, int64_t size, const char* what) {
  if (idx < -size || idx >= size)
    return ctx.error(what, " ", idx, " is out of range for a dim of size ", size);
  if (idx < 0) idx += size;
  return Status::ok();
}

// Steps a multi-index over `dims` (row-major); false after the last one.
bool next_index(std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  for (size_t k = idx.size(); k-- > 0;) {
    if (++idx[k] < dims[k]) return true;
    idx[k] = 0;
  }
  return false;
}

// ---- Gather ----

Status infer_gather(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  const Shape& data = ctx.input_shape(0);
  const Shape& ind = ctx.input_shape(1);
  if (!data.rank_known() || !ind.rank_known()) {
    ctx.set_output(0, dt, Shape::unknown_rank());
    return Status::ok();
  }
  if (data.rank() == 0) return ctx.error("data must have rank >= 1");
  int64_t rank = static_cast<int64_t>(data.rank());
  FERRITE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.node().attr_int("axis"), rank));
  std::vector<Dim> out(data.dims().begin(), data.dims().begin() + axis);
  out.insert(out.end(), ind.dims().begin(), ind.dims().end());
  out.insert(out.end(), data.dims().begin() + axis + 1, data.dims().end());
  Shape result(out);
  ctx.set_output(0, dt, result);
  auto idx = static_values(ctx.input_dims_value(1));
  if (!idx) return Status::ok();
  if (auto size = data[axis].value())
    for (int64_t v : *idx) FERRITE_RETURN_IF_ERROR(wrap_index(ctx, v, *size, "index"));
  // Picking elements of a shape vector (Shape(x)[1]) keeps them symbolic.
  auto value = ctx.input_dims_value(0);
  if (value && rank == 1 && ind.rank() <= 1) {
    std::vector<Dim> picked;
    for (int64_t v : *idx) {
      FERRITE_RETURN_IF_ERROR(wrap_index(ctx, v, static_cast<int64_t>(value->size()), "index"));
      picked.push_back((*value)[v]);
    }
    if (result.rank() == 0 || result[0].value() == static_cast<int64_t>(picked.size()))
      ctx.set_output_dims_value(0, std::move(picked));
  }
  return Status::ok();
}

Status gather_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  int64_t rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return ctx.error("data must have rank >= 1");
  FERRITE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.node().attr_int("axis"), rank));
  auto idx = ind.to_int_vector();
  auto strides = contiguous_strides(x.dims());
  std::vector<int64_t> out(x.dims().begin(), x.dims().begin() + axis);
  out.insert(out.end(), ind.dims().begin(), ind.dims().end());
  out.insert(out.end(), x.dims().begin() + axis + 1, x.dims().end());
  // The output seen as [data dims before axis, all indices, data dims after axis].
  std::vector<std::vector<int64_t>> maps;
  for (int64_t d = 0; d < axis; ++d) maps.push_back(iota_map(x.dim(d), strides[d]));
  std::vector<int64_t> m(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) {
    FERRITE_RETURN_IF_ERROR(wrap_index(ctx, idx[i], x.dim(axis), "index"));
    m[i] = idx[i] * strides[axis];
  }
  maps.push_back(std::move(m));
  for (int64_t d = axis + 1; d < rank; ++d) maps.push_back(iota_map(x.dim(d), strides[d]));
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out));
  if (y->numel() > 0) copy_by_axis_maps(x, *y, maps);
  return Status::ok();
}

// ---- GatherElements, ScatterElements ----

// Shared checks: data and indices of one rank, indices within data's dims off the axis.
template <class Ctx>
Expected<int64_t> elements_axis(const Ctx& ctx, const Tensor& x, const Tensor& ind) {
  int64_t rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return ctx.error("data must have rank >= 1");
  if (ind.rank() != x.rank())
    return ctx.error("indices ", ind.type_string(), " must have the rank of data ",
                     x.type_string());
  FERRITE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.node().attr_int("axis"), rank));
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && ind.dim(d) > x.dim(d))
      return ctx.error("indices ", ind.type_string(), " exceed data ", x.type_string(), " in dim ",
                       d);
  return axis;
}

// Calls f(linear index into indices, data element offset) for every index, after range checks.
template <class F>
Status for_each_element_index(const KernelContext& ctx, const Tensor& x, const Tensor& ind,
                              int64_t axis, F&& f) {
  auto idx = ind.to_int_vector();
  auto strides = contiguous_strides(x.dims());
  if (ind.numel() == 0) return Status::ok();
  std::vector<int64_t> pos(ind.rank(), 0);
  int64_t i = 0;
  do {
    int64_t v = idx[i];
    FERRITE_RETURN_IF_ERROR(wrap_index(ctx, v, x.dim(axis), "index"));
    int64_t off = 0;
    for (size_t d = 0; d < pos.size(); ++d)
      off += (static_cast<int64_t>(d) == axis ? v : pos[d]) * strides[d];
    f(i, off);
    ++i;
  } while (next_index(pos, ind.dims()));
  return Status::ok();
}

Status infer_gather_elements(InferContext& ctx) {
  const Shape& data = ctx.input_shape(0);
  const Shape& ind = ctx.input_shape(1);
  if (data.rank_known() && ind.rank_known() && data.rank() != ind.rank())
    return ctx.error("indices ", ind.to_string(), " must have the rank of data ", data.to_string());
  if (data.rank_known())
    FERRITE_RETURN_IF_ERROR(
        normalize_axis(ctx, ctx.node().attr_int("axis"), static_cast<int64_t>(data.rank()))
            .status());
  ctx.set_output(0, ctx.input_dtype(0), ind);
  return Status::ok();
}

Status gather_elements_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  FERRITE_ASSIGN_OR_RETURN(int64_t axis, elements_axis(ctx, x, ind));
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), ind.dims()));
  Status st;
  visit_elem_size(x.dtype(), [&]<class U>() {
    const U* src = static_cast<const U*>(x.raw());
    U* dst = static_cast<U*>(y->raw());
    st = for_each_element_index(ctx, x, ind, axis,
                                [&](int64_t i, int64_t off) { dst[i] = src[off]; });
  });
  return st;
}

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

template <class Ctx>
Expected<Reduction> scatter_reduction(const Ctx& ctx) {
  std::string r = ctx.node().attr_string("reduction", "none");
  if (r == "none") return Reduction::kNone;
  if ((r == "add" || r == "mul") && ctx.opset() < 16)
    return ctx.error("reduction '", r, "' needs opset 16, the model has ", ctx.opset());
  if ((r == "max" || r == "min") && ctx.opset() < 18)
    return ctx.error("reduction '", r, "' needs opset 18, the model has ", ctx.opset());
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return ctx.error("unknown reduction '", r, "'");
}

template <class T>
void reduce_into(T& dst, T v, Reduction r) {
  if constexpr (std::is_same_v<T, bool>) {
    bool any = r == Reduction::kAdd || r == Reduction::kMax;
    dst = r == Reduction::kNone ? v : any ? (dst || v) : (dst && v);
  } else {
    using C = compute_t<T>;
    C a = convert<C>(dst), b = convert<C>(v);
    switch (r) {
      case Reduction::kNone:
        dst = v;
        return;
      case Reduction::kAdd:
        dst = convert<T>(static_cast<C>(a + b));
        return;
      case Reduction::kMul:
        dst = convert<T>(static_cast<C>(a * b));
        return;
      case Reduction::kMax:
        dst = convert<T>(std::max(a, b));
        return;
      case Reduction::kMin:
        dst = convert<T>(std::min(a, b));
        return;
    }
  }
}

Status infer_scatter(InferContext& ctx) {
  FERRITE_RETURN_IF_ERROR(scatter_reduction(ctx).status());
  const Shape& ind = ctx.input_shape(1);
  const Shape& upd = ctx.input_shape(2);
  if (ctx.node().op_type == "ScatterElements" && ind.rank_known() && upd.rank_known()) {
    if (ind.rank() != upd.rank())
      return ctx.error("indices ", ind.to_string(), " and updates ", upd.to_string(),
                       " must have the same shape");
  }
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

Status scatter_elements_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  FERRITE_ASSIGN_OR_RETURN(Reduction red, scatter_reduction(ctx));
  FERRITE_ASSIGN_OR_RETURN(int64_t axis, elements_axis(ctx, x, ind));
  if (upd.dims() != ind.dims())
    return ctx.error("updates ", upd.type_string(), " must have the shape of indices ",
                     ind.type_string());
  FERRITE_ASSIGN_OR_RETURN(Tensor out, x.try_clone());
  Status st;
  visit_dtype(x.dtype(), [&]<class T>() {
    const T* u = upd.data<T>();
    T* dst = out.data<T>();
    st = for_each_element_index(ctx, x, ind, axis,
                                [&](int64_t i, int64_t off) { reduce_into(dst[off], u[i], red); });
  });
  FERRITE_RETURN_IF_ERROR(st);
  ctx.set_output(0, std::move(out));
  return Status::ok();
}

// ---- GatherND, ScatterND ----

// Resolves index tuple j (the last indices dim has m entries) to an element offset in data,
// with data axes starting at `first_axis`.
template <class Ctx>
Expected<int64_t> nd_offset(const Ctx& ctx, const std::vector<int64_t>& idx, int64_t j, int64_t m,
                            const Tensor& x, int64_t first_axis,
                            const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (int64_t k = 0; k < m; ++k) {
    int64_t v = idx[j * m + k];
    FERRITE_RETURN_IF_ERROR(wrap_index(ctx, v, x.dim(first_axis + k), "index"));
    off += v * strides[first_axis + k];
  }
  return off;
}

Status infer_gather_nd(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  const Shape& data = ctx.input_shape(0);
  const Shape& ind = ctx.input_shape(1);
  int64_t b = ctx.node().attr_int("batch_dims", 0);
  if (!data.rank_known() || !ind.rank_known() || ind.rank() == 0 || !ind.dims().back().value()) {
    ctx.set_output(0, dt, Shape::unknown_rank());
    return Status::ok();
  }
  int64_t r = static_cast<int64_t>(data.rank()), q = static_cast<int64_t>(ind.rank());
  int64_t m = *ind.dims().back().value();
  if (b < 0 || b >= std::min(r, q)) return ctx.error("batch_dims ", b, " is out of range");
  if (m < 0 || m > r - b)
    return ctx.error("indices ", ind.to_string(), " index ", m, " dims of data ", data.to_string(),
                     " past batch_dims ", b);
  std::vector<Dim> out(ind.dims().begin(), ind.dims().end() - 1);
  out.insert(out.end(), data.dims().begin() + b + m, data.dims().end());
  ctx.set_output(0, dt, Shape(out));
  return Status::ok();
}

Status gather_nd_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  int64_t r = static_cast<int64_t>(x.rank()), q = static_cast<int64_t>(ind.rank());
  int64_t b = ctx.node().attr_int("batch_dims", 0);
  if (q < 1) return ctx.error("indices must have rank >= 1");
  if (b < 0 || b >= std::min(r, q)) return ctx.error("batch_dims ", b, " is out of range");
  int64_t m = ind.dim(q - 1);
  if (m < 0 || m > r - b)
    return ctx.error("indices ", ind.type_string(), " index ", m, " dims of data ", x.type_string(),
                     " past batch_dims ", b);
  for (int64_t d = 0; d < b; ++d)
    if (ind.dim(d) != x.dim(d))
      return ctx.error("batch dims of indices ", ind.type_string(), " and data ", x.type_string(),
                       " differ");
  std::vector<int64_t> out(ind.dims().begin(), ind.dims().end() - 1);
  out.insert(out.end(), x.dims().begin() + b + m, x.dims().end());
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out));
  int64_t batches = 1, inner = 1;
  for (int64_t d = 0; d < b; ++d) batches *= x.dim(d);
  for (int64_t d = b + m; d < r; ++d) inner *= x.dim(d);
  int64_t tuples = 1;
  for (int64_t d = 0; d + 1 < q; ++d) tuples *= ind.dim(d);
  int64_t per_batch = batches ? tuples / batches : 0;
  int64_t batch_stride = batches ? x.numel() / std::max<int64_t>(batches, 1) : 0;
  auto strides = contiguous_strides(x.dims());
  auto idx = ind.to_int_vector();
  size_t esz = dtype_size(x.dtype());
  const auto* src = static_cast<const uint8_t*>(x.raw());
  auto* dst = static_cast<uint8_t*>(y->raw());
  for (int64_t j = 0; j < tuples; ++j) {
    FERRITE_ASSIGN_OR_RETURN(int64_t off, nd_offset(ctx, idx, j, m, x, b, strides));
    int64_t base = per_batch ? (j / per_batch) * batch_stride : 0;
    if (inner) std::memcpy(dst + j * inner * esz, src + (base + off) * esz, inner * esz);
  }
  return Status::ok();
}

Status scatter_nd_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  FERRITE_ASSIGN_OR_RETURN(Reduction red, scatter_reduction(ctx));
  int64_t r = static_cast<int64_t>(x.rank()), q = static_cast<int64_t>(ind.rank());
  if (q < 1) return ctx.error("indices must have rank >= 1");
  int64_t m = ind.dim(q - 1);
  if (m > r)
    return ctx.error("indices ", ind.type_string(), " index past the rank of data ",
                     x.type_string());
  std::vector<int64_t> want(ind.dims().begin(), ind.dims().end() - 1);
  want.insert(want.end(), x.dims().begin() + m, x.dims().end());
  if (upd.dims() != want)
    return ctx.error("updates ", upd.type_string(), " must have shape ", dims_to_string(want));
  int64_t inner = 1;
  for (int64_t d = m; d < r; ++d) inner *= x.dim(d);
  int64_t tuples = 1;
  for (int64_t d = 0; d + 1 < q; ++d) tuples *= ind.dim(d);
  auto strides = contiguous_strides(x.dims());
  auto idx = ind.to_int_vector();
  FERRITE_ASSIGN_OR_RETURN(Tensor out, x.try_clone());
  Status st;
  visit_dtype(x.dtype(), [&]<class T>() {
    const T* u = upd.data<T>();
    T* dst = out.data<T>();
    for (int64_t j = 0; j < tuples; ++j) {
      auto off = nd_offset(ctx, idx, j, m, x, 0, strides);
      if (!off) {
        st = off.status();
        return;
      }
      for (int64_t k = 0; k < inner; ++k) reduce_into(dst[*off + k], u[j * inner + k], red);
    }
  });
  FERRITE_RETURN_IF_ERROR(st);
  ctx.set_output(0, std::move(out));
  return Status::ok();
}

// ---- OneHot ----

template <class Ctx>
Expected<int64_t> onehot_axis(const Ctx& ctx, int64_t in_rank) {
  int64_t axis = ctx.node().attr_int("axis", -1);
  int64_t a = axis < 0 ? axis + in_rank + 1 : axis;
  if (a < 0 || a > in_rank)
    return ctx.error("axis ", axis, " is out of range for rank ", in_rank + 1);
  return a;
}

Status infer_onehot(InferContext& ctx) {
  DType dt = ctx.input_dtype(2);
  const Shape& in = ctx.input_shape(0);
  if (!in.rank_known()) {
    ctx.set_output(0, dt, Shape::unknown_rank());
    return Status::ok();
  }
  FERRITE_ASSIGN_OR_RETURN(int64_t a, onehot_axis(ctx, static_cast<int64_t>(in.rank())));
  Dim depth;
  if (const Tensor* c = ctx.input_constant(1); c && c->numel() == 1) {
    double d = c->double_at(0);
    if (!(d >= 1)) return ctx.error("depth must be positive, got ", d);
    if (d < static_cast<double>(kHugeDim)) depth = static_cast<int64_t>(d);
  } else if (auto v = ctx.input_dims_value(1); v && v->size() == 1) {
    depth = (*v)[0];
  }
  std::vector<Dim> out = in.dims();
  out.insert(out.begin() + a, depth);
  ctx.set_output(0, dt, Shape(out));
  return Status::ok();
}

Status onehot_kernel(KernelContext& ctx) {
  const Tensor& ind = ctx.input(0);
  const Tensor& dep = ctx.input(1);
  const Tensor& vals = ctx.input(2);
  if (dep.numel() != 1) return ctx.error("depth must be a scalar");
  if (vals.numel() != 2) return ctx.error("values must have 2 elements [off, on]");
  double dd = dep.double_at(0);
  if (!(dd >= 1 && dd < 1e15)) return ctx.error("depth must be positive, got ", dd);
  int64_t depth = static_cast<int64_t>(dd);
  FERRITE_ASSIGN_OR_RETURN(int64_t a, onehot_axis(ctx, static_cast<int64_t>(ind.rank())));
  std::vector<int64_t> out = ind.dims();
  out.insert(out.begin() + a, depth);
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, vals.dtype(), out));
  size_t esz = dtype_size(vals.dtype());
  const auto* off_on = static_cast<const uint8_t*>(vals.raw());
  fill_with(*y, off_on);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < a; ++d) outer *= ind.dim(d);
  for (size_t d = a; d < ind.rank(); ++d) inner *= ind.dim(d);
  auto* dst = static_cast<uint8_t*>(y->raw());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double v = ind.double_at(o * inner + i);
      if (!(v >= -static_cast<double>(depth) && v < static_cast<double>(depth))) continue;
      int64_t k = static_cast<int64_t>(v);
      if (k < 0) k += depth;
      std::memcpy(dst + ((o * depth + k) * inner + i) * esz, off_on + esz, esz);
    }
  }
  return Status::ok();
}

// ---- NonZero ----

Status infer_nonzero(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  Dim rank = in.rank_known() ? Dim(static_cast<int64_t>(std::max<size_t>(in.rank(), 1))) : Dim();
  ctx.set_output(0, DType::kI64, Shape(std::vector<Dim>{rank, Dim::unknown()}));
  return Status::ok();
}

Status nonzero_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> hits;
  visit_dtype(x.dtype(), [&]<class T>() {
    const T* p = x.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i)
      if (convert<compute_t<T>>(p[i]) != compute_t<T>(0)) hits.push_back(i);
  });
  int64_t rank = static_cast<int64_t>(x.rank());
  int64_t rows = std::max<int64_t>(rank, 1), n = static_cast<int64_t>(hits.size());
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kI64, {rows, n}));
  int64_t* out = y->data<int64_t>();
  for (int64_t j = 0; j < n; ++j) {
    int64_t rest = hits[j];
    for (int64_t d = rank - 1; d >= 0; --d) {
      out[d * n + j] = rest % x.dim(d);
      rest /= x.dim(d);
    }
    if (rank == 0) out[j] = 0;
  }
  return Status::ok();
}

}  // namespace

// One compact schema chain per op reads best.
// clang-format off
void register_selection_ops(OpRegistry& r);  // selection.cpp: Compress, ReverseSequence, Unique

void register_indexing_ops(OpRegistry& r) {
  register_selection_ops(r);
  r.add(OpSchemaBuilder("Gather").versions(13).inputs(2).outputs(1)
            .attr("axis", AttrType::kInt, int64_t{0})
            .types("T", {0}, kAll).types("Tind", {1}, kIndex)
            .infer(infer_gather).kernel(gather_kernel));
  r.add(OpSchemaBuilder("GatherElements").versions(13).inputs(2).outputs(1)
            .attr("axis", AttrType::kInt, int64_t{0})
            .types("T", {0}, kAll).types("Tind", {1}, kIndex)
            .infer(infer_gather_elements).kernel(gather_elements_kernel));
  r.add(OpSchemaBuilder("GatherND").versions(13).inputs(2).outputs(1)
            .attr("batch_dims", AttrType::kInt, int64_t{0})
            .types("T", {0}, kAll).types("indices", {1}, {DType::kI64})
            .infer(infer_gather_nd).kernel(gather_nd_kernel));
  r.add(OpSchemaBuilder("ScatterElements").versions(13).inputs(3).outputs(1)
            .attr("axis", AttrType::kInt, int64_t{0})
            .attr("reduction", AttrType::kString, "none")
            .types("T", {0, 2}, kAll).types("Tind", {1}, kIndex)
            .infer(infer_scatter).kernel(scatter_elements_kernel));
  r.add(OpSchemaBuilder("ScatterND").versions(13).inputs(3).outputs(1)
            .attr("reduction", AttrType::kString, "none")
            .types("T", {0, 2}, kAll).types("indices", {1}, {DType::kI64})
            .infer(infer_scatter).kernel(scatter_nd_kernel));
  r.add(OpSchemaBuilder("OneHot").versions(13).inputs(3).outputs(1)
            .attr("axis", AttrType::kInt, int64_t{-1})
            .types("T1", {0}, kNumeric).types("T2", {1}, kNumeric).types("T3", {2}, kAll)
            .infer(infer_onehot).kernel(onehot_kernel));
  r.add(OpSchemaBuilder("NonZero").versions(13).inputs(1).outputs(1).types("T", {0}, kAll)
            .infer(infer_nonzero).kernel(nonzero_kernel));
}
// clang-format on

}  // namespace ferrite
