// Building blocks shared by the data-movement ops (shape_ops.cpp, slice_pad.cpp,
// constant_ops.cpp, indexing.cpp): symbolic dim arithmetic for shape inference, and one
// byte-level copy routine that every reference kernel that only moves elements goes through.
#pragma once

#include <optional>
#include <vector>

#include "ops/helpers.h"

namespace ferrite {

// Dims beyond this are impossible (Tensor::create refuses more than 2^46 bytes), so slice
// bounds at or past it mean "to the end" whatever a symbolic dim turns out to be.
inline constexpr int64_t kHugeDim = int64_t{1} << 46;

// Product of dims; unknown if any is unknown.
Dim dim_product(const std::vector<Dim>& dims);
Dim dim_product(const std::vector<Dim>& dims, size_t begin, size_t end);

// False for a static value at or past kHugeDim in magnitude: such values (from user tensors)
// must not enter SymExpr arithmetic, which does not check for overflow.
bool small_static(const Dim& d);

// num / den when the division is exact, symbolically: a constant, or a monomial (constant times
// a product of symbols) that is verified by multiplying back. nullopt when that fails.
std::optional<SymExpr> exact_quotient(const SymExpr& num, const SymExpr& den);
// Dim version: unknown when either side is unknown or the quotient is not exact.
Dim exact_quotient(const Dim& num, const Dim& den);

// ceil(x / k) for k > 0, written (x+k-1)//k: it folds exactly like floordiv and reads
// unambiguously, unlike -((-x)//k).
Dim ceil_div(const Dim& x, int64_t k);

// The values of a dims value when all of them are static.
std::optional<std::vector<int64_t>> static_values(const std::optional<std::vector<Dim>>& v);

// True for an expression known to be >= 0: a static non-negative value or a bare symbol (symbols
// name tensor dims, which are never negative).
bool known_nonneg(const Dim& d);

// Length of an ONNX Slice along one axis of size d (starts/ends clamped per the spec). Static
// when everything is static; symbolic (with min/max where clamping cannot be decided) when d or
// the bounds are symbolic; unknown when it cannot be expressed.
Dim slice_length(const Dim& d, const Dim& start, const Dim& end, int64_t step);

// Static slice of one axis: first index, step and element count, clamped per the spec.
struct SliceRange {
  int64_t start = 0, step = 1, count = 0;
};
SliceRange static_slice(int64_t d, int64_t start, int64_t end, int64_t step);

// Copies elements of src into dst, which is treated as a contiguous array of shape
// [maps[0].size(), maps[1].size(), ...] (any row-major reshape of dst's dims with that element
// count): dst[i0, i1, ...] = src_flat[maps[0][i0] + maps[1][i1] + ...]. An element where any
// map entry is negative is left untouched (Pad fills those with the pad value first). The maps
// are element offsets, so transposes, slices, broadcasts, tiles and gathers are all one call.
void copy_by_axis_maps(const Tensor& src, Tensor& dst,
                       const std::vector<std::vector<int64_t>>& maps);

// maps for the identity copy of an axis of size n with element stride `stride`.
std::vector<int64_t> iota_map(int64_t n, int64_t stride, int64_t first = 0, int64_t step = 1);

// Calls f.template operator()<U>() with the unsigned integer type as wide as one element of
// `t`, for kernels that move elements without looking at them.
template <class F>
void visit_elem_size(DType t, F&& f) {
  switch (dtype_size(t)) {
    case 1:
      f.template operator()<uint8_t>();
      break;
    case 2:
      f.template operator()<uint16_t>();
      break;
    case 4:
      f.template operator()<uint32_t>();
      break;
    case 8:
      f.template operator()<uint64_t>();
      break;
    default:
      FERRITE_CHECK(false);
  }
}

// Fills every element of a freshly allocated (zeroed) t with the single element's bytes.
void fill_with(Tensor& t, const void* value_bytes);

// Normalises axes (Squeeze, Unsqueeze, Slice, Pad...) against `rank`, rejecting out-of-range values
// and duplicates.
template <class Ctx>
Expected<std::vector<int64_t>> normalize_axes(const Ctx& ctx, std::vector<int64_t> axes,
                                              int64_t rank, bool allow_repeats = false) {
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 0)), false);
  for (int64_t& a : axes) {
    int64_t n = a < 0 ? a + rank : a;
    if (n < 0 || n >= rank) return ctx.error("axis ", a, " is out of range for rank ", rank);
    if (seen[n] && !allow_repeats) return ctx.error("axis ", a, " is repeated");
    seen[n] = true;
    a = n;
  }
  return axes;
}

// Registration of the shape-family ops that live outside shape_ops.cpp.
void register_slice_pad_ops(OpRegistry& r);  // Slice, Pad, CenterCropPad, Trilu, DepthToSpace...
void register_constant_ops(OpRegistry& r);   // Constant, ConstantOfShape, Range

}  // namespace ferrite
