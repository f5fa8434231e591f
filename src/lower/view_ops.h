// Internal to the lowering: the index maps of view ops (Transpose, Slice, Reshape, a Gather of one
// constant index, ...), so that they become strided views of a buffer or fold into the kernel
// that reads them instead of copying.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "ir/graph.h"
#include "ir/shape.h"

namespace ferrite::lower_impl {

// Output index -> input index, one expression per dim.
using IndexMap = std::function<std::vector<SymExpr>(const std::vector<SymExpr>&)>;
// The constant integer values of input `i` of a node, if it is a constant.
using ConstInts = std::function<std::optional<std::vector<int64_t>>(const Node&, size_t)>;

// The index map of view op `n` from `idims` to `odims` when it is affine (so a view of a strided
// buffer is again a strided view): Identity, Dropout (inference), Transpose, Expand, Unsqueeze,
// Squeeze, Slice with constant starts/ends/axes/steps over static dims, and Gather of one constant
// index (ViT's and Swin's `select` of q, k, v). nullopt for anything else.
std::optional<IndexMap> affine_view_map(const Node& n, const std::vector<Dim>& idims,
                                        const std::vector<Dim>& odims, const ConstInts& const_ints);

// torch.roll's export, Concat(Slice(x, [s, n)), Slice(x, [0, s))) along one axis with each Slice
// cutting only that axis (step 1): x with that axis rotated, out[.., i, ..] = x[.., (i + s) mod n,
// ..] (Swin's shifted windows, one Concat per rolled dim). nullopt for any other Concat.
struct RollView {
  const Value* source = nullptr;
  IndexMap map;
};
std::optional<RollView> roll_view(const Node& concat, const ConstInts& const_ints);

// A Reshape splits the dims into groups whose element counts agree on both sides ([197, 32, 768]
// -> [197, 384, 64] is {197} -> {197} and {32, 768} -> {384, 64}); indices only mix within a
// group. nullopt when the counts never agree before the end (symbolic dims that do not line up).
struct ReshapeGroup {
  size_t in_begin, in_end, out_begin, out_end;
};
std::optional<std::vector<ReshapeGroup>> reshape_groups(const std::vector<Dim>& idims,
                                                        const std::vector<Dim>& odims);

// The Reshape's index map through each group's linear index (floor division and modulo).
IndexMap reshape_index_map(const std::vector<Dim>& idims, const std::vector<Dim>& odims,
                           const std::vector<ReshapeGroup>& groups);

// Strides that make the Reshape of a strided view a strided view again (as torch's `view`
// allows): every group's input dims must be contiguous among themselves. nullopt otherwise.
std::optional<std::vector<SymExpr>> reshape_view_strides(const std::vector<Dim>& idims,
                                                         const std::vector<SymExpr>& istrides,
                                                         const std::vector<Dim>& odims,
                                                         const std::vector<ReshapeGroup>& groups);

}  // namespace ferrite::lower_impl
