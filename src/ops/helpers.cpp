#include "ops/helpers.h"

namespace ferrite {

template <class Ctx>
static Expected<int64_t> normalize_axis_impl(const Ctx& ctx, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1) || (rank == 0 && axis != 0 && axis != -1))
    return ctx.error("axis ", axis, " is out of range for rank ", rank);
  return a;
}
Expected<int64_t> normalize_axis(const InferContext& ctx, int64_t axis, int64_t rank) {
  return normalize_axis_impl(ctx, axis, rank);
}
Expected<int64_t> normalize_axis(const KernelContext& ctx, int64_t axis, int64_t rank) {
  return normalize_axis_impl(ctx, axis, rank);
}

InferFn infer_same_as_input(int from) {
  return [from](InferContext& ctx) {
    for (size_t i = 0; i < ctx.num_outputs(); ++i) ctx.set_output(i, ctx.input_type(from));
    return Status::ok();
  };
}

InferFn infer_broadcast(std::optional<DType> out) {
  return [out](InferContext& ctx) -> Status {
    Shape shape;
    bool first = true;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) continue;
      if (first) {
        shape = ctx.input_shape(i);
        first = false;
        continue;
      }
      std::string e;
      auto s = broadcast_shapes(shape, ctx.input_shape(i), &e);
      if (!s) return ctx.error(e);
      shape = *s;
    }
    ctx.set_output(0, out.value_or(ctx.input_dtype(0)), shape);
    return Status::ok();
  };
}

Expected<std::vector<int64_t>> broadcast_dims(const KernelContext& ctx,
                                              const std::vector<int64_t>& a,
                                              const std::vector<int64_t>& b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return ctx.error("cannot broadcast ", dims_to_string(a), " with ", dims_to_string(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in,
                                       const std::vector<int64_t>& out) {
  std::vector<int64_t> s(out.size(), 0);
  auto cs = contiguous_strides(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) s[off + i] = in[i] == 1 ? 0 : cs[i];
  return s;
}

std::vector<int64_t> optional_int_input(const KernelContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return {};
  return ctx.input(i).to_int_vector();
}

}  // namespace ferrite
