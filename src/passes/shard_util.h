// Helpers of the shard-tensor-parallel pass (shard_tensor_parallel.cpp).
#pragma once

#include <optional>

#include "ir/graph.h"
#include "passes/pass.h"

namespace ferrite::shard {

// How a value is split across the ranks: along `dim`, each rank holding 1/N of each of
// `sections` equal consecutive parts (sections > 1: a fused projection split later, like
// GPT-2's [q | k | v]).
struct Split {
  int dim = 0;
  int sections = 1;
};

// `t` with `axis` cut into `sections` parts of which this rank keeps chunk `rank` of `size` each
// (a view of `t`'s storage where that is one aligned run).
Expected<Tensor> slice_chunk(const Tensor& t, size_t axis, int rank, int size, int sections);
// A vocab-parallel rank's rows of an embedding table [V, H]: ceil(V/N) of them, the last rank's
// padded with zero rows (a view of the table where N divides V).
Expected<Tensor> vocab_rows(const Tensor& table, int rank, int size);
// `t` grown along `axis` to `to` with zeros after its own elements.
Expected<Tensor> padded(const Tensor& t, size_t axis, int64_t to);
// `dst` (larger along `axis`) gets `src` at its start along `axis`.
void copy_columns(const Tensor& src, Tensor& dst, size_t axis);
// A static dim, positive and a multiple of `by`.
bool divisible(const Dim& d, int64_t by);
// Where dim `d` of `in` lands in `out` for a view that keeps the element order (Reshape,
// Flatten, (Un)Squeeze), or nullopt when the split cannot follow.
std::optional<int> view_dim(const Shape& in, const Shape& out, int d, const Split& sp, int size);
// An elementwise op the split passes through unchanged.
bool is_pointwise(const Node& n);
// Bytes of the constants some node reads (a rank's weights, for the report).
int64_t used_constant_bytes(const Graph& g);
// The pass's options {rank=R size=N}, checked: (rank, size).
Expected<std::pair<int, int>> rank_and_size(const PassOptions& o);

}  // namespace ferrite::shard
