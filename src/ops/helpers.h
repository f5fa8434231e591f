// Shared building blocks for op inference functions and reference kernels.
#pragma once

#include <array>
#include <cmath>
#include <vector>

#include "ops/context.h"

namespace ferrite {

// Normalises a possibly negative axis into [0, rank); error names the node.
Expected<int64_t> normalize_axis(const InferContext& ctx, int64_t axis, int64_t rank);
Expected<int64_t> normalize_axis(const KernelContext& ctx, int64_t axis, int64_t rank);

// Inference: output i gets input `from`'s type.
InferFn infer_same_as_input(int from = 0);
// Inference: broadcast all present inputs; output dtype is `out` or input 0's dtype.
InferFn infer_broadcast(std::optional<DType> out = std::nullopt);

// Broadcast of concrete dims; error on mismatch.
Expected<std::vector<int64_t>> broadcast_dims(const KernelContext& ctx,
                                              const std::vector<int64_t>& a,
                                              const std::vector<int64_t>& b);

// Strides of `in` dims mapped onto `out` dims under broadcasting (0 where broadcast).
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in,
                                       const std::vector<int64_t>& out);

// Iterates a multi-index over `dims`, calling f(linear_out, offsets...) where each offset uses
// the matching strides. Used by broadcasting elementwise kernels.
template <size_t N, class F>
void for_each_index(const std::vector<int64_t>& dims,
                    const std::array<std::vector<int64_t>, N>& strides, F&& f) {
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  if (total == 0) return;
  size_t rank = dims.size();
  std::vector<int64_t> idx(rank, 0);
  std::array<int64_t, N> off{};
  for (int64_t lin = 0; lin < total; ++lin) {
    f(lin, off);
    for (int64_t ax = static_cast<int64_t>(rank) - 1; ax >= 0; --ax) {
      if (++idx[ax] < dims[ax]) {
        for (size_t k = 0; k < N; ++k) off[k] += strides[k][ax];
        break;
      }
      for (size_t k = 0; k < N; ++k) off[k] -= strides[k][ax] * (dims[ax] - 1);
      idx[ax] = 0;
    }
  }
}

// Reads the int64 values of an optional 1-d integer input (e.g. "axes"); empty if absent.
std::vector<int64_t> optional_int_input(const KernelContext& ctx, size_t i);

// Runs f.template operator()<T, Acc>() for the float storage types with the type they compute
// and accumulate in (f32 for the 16-bit ones): the GEMM-like reference kernels (convolutions,
// matmuls, attention).
template <class F>
bool visit_float_accumulate_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kF32:
      f.template operator()<float, float>();
      return true;
    case DType::kF64:
      f.template operator()<double, double>();
      return true;
    case DType::kF16:
      f.template operator()<Half, float>();
      return true;
    case DType::kBF16:
      f.template operator()<BFloat16, float>();
      return true;
    default:
      return false;
  }
}

}  // namespace ferrite
