// Ops that select or reorder slices by data: Compress, ReverseSequence, Unique. Compress and
// Unique have data-dependent output sizes, inferred as unknown dims.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "ops/elementwise_util.h"
#include "ops/helpers.h"

namespace ferrite {

namespace {

// [outer, axis, inner] view of dims around `axis`.
struct Split3 {
  int64_t outer = 1, n = 1, inner = 1;
};
Split3 split3(const std::vector<int64_t>& dims, int64_t axis) {
  Split3 s;
  for (int64_t k = 0; k < axis; ++k) s.outer *= dims[k];
  s.n = dims[axis];
  for (size_t k = axis + 1; k < dims.size(); ++k) s.inner *= dims[k];
  return s;
}

// Copies slices `picks` (indices along the axis) of x into a new tensor.
Status gather_slices(KernelContext& ctx, const Tensor& x, int64_t axis,
                     const std::vector<int64_t>& picks, size_t out) {
  std::vector<int64_t> dims = x.dims();
  dims[axis] = static_cast<int64_t>(picks.size());
  Split3 s = split3(x.dims(), axis);
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output_uninitialized(out, x.dtype(), dims));
  const size_t es = dtype_size(x.dtype());
  const auto* px = static_cast<const char*>(x.raw());
  auto* py = static_cast<char*>(y->raw());
  const size_t row = static_cast<size_t>(s.inner) * es;
  for (int64_t o = 0; o < s.outer; ++o)
    for (size_t k = 0; k < picks.size(); ++k)
      std::copy_n(
          px + ((o * s.n + picks[k]) * s.inner) * es, row,
          py + ((o * static_cast<int64_t>(picks.size()) + static_cast<int64_t>(k)) * s.inner) * es);
  return Status::ok();
}

// ---- Compress ----

Status infer_compress(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& cond = ctx.input_shape(1);
  if (cond.rank_known() && cond.rank() != 1) return ctx.error("condition must be 1-D");
  if (!ctx.node().has_attr("axis")) {
    ctx.set_output(0, ctx.input_dtype(0), Shape(std::vector<Dim>{Dim::unknown()}));
    return Status::ok();
  }
  if (!x.rank_known()) {
    ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
    return Status::ok();
  }
  FERRITE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.node().attr_int("axis"),
                                                        static_cast<int64_t>(x.rank())));
  std::vector<Dim> dims = x.dims();
  dims[axis] = Dim::unknown();
  ctx.set_output(0, ctx.input_dtype(0), Shape(std::move(dims)));
  return Status::ok();
}

Status compress_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& cond = ctx.input(1);
  if (cond.dtype() != DType::kBool || cond.rank() != 1)
    return ctx.error("condition must be 1-D bool");
  const bool* c = cond.data<bool>();
  const bool has_axis = ctx.node().has_attr("axis");
  int64_t axis = 0;
  Tensor flat = x;
  if (has_axis) {
    FERRITE_ASSIGN_OR_RETURN(
        axis, normalize_axis(ctx, ctx.node().attr_int("axis"), static_cast<int64_t>(x.rank())));
  } else {
    flat = x.reshaped({x.numel()});
  }
  const int64_t len = flat.dims()[axis];
  // The condition may be shorter than the axis (the rest is dropped), never longer.
  if (cond.numel() > len)
    return ctx.error("condition has ", cond.numel(), " entries for an axis of ", len);
  std::vector<int64_t> picks;
  for (int64_t i = 0; i < cond.numel(); ++i)
    if (c[i]) picks.push_back(i);
  return gather_slices(ctx, flat, axis, picks, 0);
}

// ---- ReverseSequence ----

Status infer_reverse_sequence(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (x.rank_known()) {
    if (x.rank() < 2) return ctx.error("input must have rank >= 2");
    int64_t b = ctx.node().attr_int("batch_axis", 1), t = ctx.node().attr_int("time_axis", 0);
    if (!((b == 0 && t == 1) || (b == 1 && t == 0)))
      return ctx.error("batch_axis and time_axis must be 0 and 1 in some order");
  }
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

Status reverse_sequence_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& lens = ctx.input(1);
  const int64_t b_axis = ctx.node().attr_int("batch_axis", 1);
  const int64_t t_axis = ctx.node().attr_int("time_axis", 0);
  if (x.rank() < 2 || b_axis + t_axis != 1 || b_axis < 0 || t_axis < 0)
    return ctx.error("input rank or axes are invalid");
  const int64_t batch = x.dims()[b_axis], time = x.dims()[t_axis];
  if (lens.rank() != 1 || lens.numel() != batch || lens.dtype() != DType::kI64)
    return ctx.error("sequence_lens must be int64 [", batch, "]");
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output_uninitialized(0, x.dtype(), x.dims()));
  int64_t inner = 1;
  for (size_t k = 2; k < x.rank(); ++k) inner *= x.dims()[k];
  const size_t es = dtype_size(x.dtype()), row = static_cast<size_t>(inner) * es;
  const auto* px = static_cast<const char*>(x.raw());
  auto* py = static_cast<char*>(y->raw());
  const int64_t* pl = lens.data<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    if (pl[b] < 0 || pl[b] > time)
      return ctx.error("sequence_lens[", b, "] = ", pl[b], " is outside [0, ", time, "]");
    for (int64_t t = 0; t < time; ++t) {
      int64_t src = t < pl[b] ? pl[b] - 1 - t : t;
      auto at = [&](int64_t tt) { return (b_axis == 0 ? b * time + tt : tt * batch + b) * inner; };
      std::copy_n(px + at(src) * es, row, py + at(t) * es);
    }
  }
  return Status::ok();
}

// ---- Unique ----

// Lexicographic order in which NaN sorts after every number and equals NaN (a strict weak
// order, which plain < is not once NaN is involved).
template <class C>
struct KeyLess {
  static bool lt(C a, C b) {
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(a) || std::isnan(b)) return !std::isnan(a) && std::isnan(b);
    }
    return a < b;
  }
  bool operator()(const std::vector<C>& a, const std::vector<C>& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), lt);
  }
};

Status infer_unique(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (!ctx.node().has_attr("axis") || !x.rank_known()) {
    ctx.set_output(0, ctx.input_dtype(0),
                   ctx.node().has_attr("axis") ? Shape::unknown_rank()
                                               : Shape(std::vector<Dim>{Dim::unknown()}));
  } else {
    FERRITE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.node().attr_int("axis"),
                                                          static_cast<int64_t>(x.rank())));
    std::vector<Dim> dims = x.dims();
    dims[axis] = Dim::unknown();
    ctx.set_output(0, ctx.input_dtype(0), Shape(std::move(dims)));
  }
  for (size_t i = 1; i < ctx.num_outputs(); ++i)
    if (ctx.has_output(i)) ctx.set_output(i, DType::kI64, Shape(std::vector<Dim>{Dim::unknown()}));
  return Status::ok();
}

// Unique slices along the axis (elements when there is none): sorted ascending
// (lexicographically for slices) or in order of first occurrence.
Status unique_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const bool has_axis = ctx.node().has_attr("axis");
  const bool sorted = ctx.node().attr_int("sorted", 1) != 0;
  Tensor src = x;
  int64_t axis = 0;
  if (has_axis) {
    FERRITE_ASSIGN_OR_RETURN(
        axis, normalize_axis(ctx, ctx.node().attr_int("axis"), static_cast<int64_t>(x.rank())));
  } else {
    src = x.reshaped({x.numel()});
  }
  Split3 s = split3(src.dims(), axis);
  std::vector<int64_t> first, inverse(static_cast<size_t>(s.n)), counts;
  Status st = dispatch_dtype<TypeClass::kAll>(ctx, x.dtype(), [&]<class T>() -> Status {
    const T* p = src.data<T>();
    // Slice i as a key: its elements in (outer, inner) order, compared in the compute type.
    auto key = [&](int64_t i) {
      std::vector<compute_t<T>> k;
      k.reserve(static_cast<size_t>(s.outer * s.inner));
      for (int64_t o = 0; o < s.outer; ++o)
        for (int64_t in = 0; in < s.inner; ++in)
          k.push_back(convert<compute_t<T>>(p[(o * s.n + i) * s.inner + in]));
      return k;
    };
    std::map<std::vector<compute_t<T>>, int64_t, KeyLess<compute_t<T>>>
        seen;  // -> index in `first`
    for (int64_t i = 0; i < s.n; ++i) {
      auto [it, inserted] = seen.emplace(key(i), static_cast<int64_t>(first.size()));
      if (inserted) {
        first.push_back(i);
        counts.push_back(0);
      }
      inverse[i] = it->second;
      counts[it->second]++;
    }
    if (sorted) {
      // Renumber in key order (std::map iterates sorted).
      std::vector<int64_t> rank(first.size());
      std::vector<int64_t> f2, c2;
      for (const auto& [k, idx] : seen) {
        rank[idx] = static_cast<int64_t>(f2.size());
        f2.push_back(first[idx]);
        c2.push_back(counts[idx]);
      }
      for (auto& v : inverse) v = rank[v];
      first = std::move(f2);
      counts = std::move(c2);
    }
    return Status::ok();
  });
  FERRITE_RETURN_IF_ERROR(st);
  FERRITE_RETURN_IF_ERROR(gather_slices(ctx, src, axis, first, 0));
  const std::vector<int64_t>* extra[3] = {&first, &inverse, &counts};
  for (size_t i = 1; i < ctx.num_outputs() && i < 4; ++i) {
    if (!ctx.has_output(i)) continue;
    const auto& v = *extra[i - 1];
    FERRITE_ASSIGN_OR_RETURN(Tensor * t,
                             ctx.allocate_output(i, DType::kI64, {static_cast<int64_t>(v.size())}));
    std::copy(v.begin(), v.end(), t->data<int64_t>());
  }
  return Status::ok();
}

}  // namespace

void register_selection_ops(OpRegistry& r) {
  using namespace dtypes;
  r.add(OpSchemaBuilder("Compress")
            .versions(11)
            .inputs(2)
            .outputs(1)
            .optional_attr("axis", AttrType::kInt)
            .types("T", {0}, kAll)
            .types("T1", {1}, {DType::kBool})
            .infer(infer_compress)
            .kernel(compress_kernel));
  r.add(OpSchemaBuilder("ReverseSequence")
            .versions(10)
            .inputs(2)
            .outputs(1)
            .attr("batch_axis", AttrType::kInt, 1)
            .attr("time_axis", AttrType::kInt, 0)
            .types("T", {0}, kAll)
            .types("tensor(int64)", {1}, {DType::kI64})
            .infer(infer_reverse_sequence)
            .kernel(reverse_sequence_kernel));
  r.add(OpSchemaBuilder("Unique")
            .versions(11)
            .inputs(1)
            .outputs(1, 4)
            .optional_attr("axis", AttrType::kInt)
            .attr("sorted", AttrType::kInt, 1)
            .types("T", {0}, kAll)
            .infer(infer_unique)
            .kernel(unique_kernel));
}

}  // namespace ferrite
