// Internal to the lowering: how a graph value is available while the graph is lowered.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lower/pointwise_ops.h"

namespace ferrite::lower_impl {

// A row kernel waiting for its store expression to be complete (softmax, layernorm, Reduce*):
// pointwise consumers fuse into its store until something else needs the value.
struct RowPlan {
  std::vector<Dim> iter;  // iteration space: rows, then the reduced dims
  size_t reduce_rank = 0;
  bool per_row = false;          // one result per row (Reduce*) or per element (softmax)
  std::vector<SymExpr> out_idx;  // the value's index in terms of the iteration's loop variables
};

using EmitFn = std::function<int(EmitContext&, const std::vector<SymExpr>&)>;

// A strided view of a buffer, or an expression still to be inlined into its consumer.
struct Lowered {
  DType dtype = DType::kUndefined;
  bool dims_known = false;
  std::vector<Dim> dims;
  int buffer = -1;  // realized
  SymExpr offset;
  std::vector<SymExpr> strides;
  EmitFn emit;                     // inline: builds the value at an index (one expr per dim)
  std::vector<std::string> nodes;  // nodes folded into the inline expression
  size_t cost = 0;
  // Set while `emit` is the store expression of a pending row kernel: it creates kReduce
  // expressions over the loop variables of `row->iter`, so it may only be emitted into the
  // kernel that materializes this plan.
  std::shared_ptr<const RowPlan> row;
  // Set on an inline Reshape (lower_reshape): the value before it. A Reshape keeps row-major
  // order, so storing that value contiguously over its own (finer) dims writes the same bytes;
  // the kernel that materializes this value does so where those dims give affine indices (no
  // floordiv / mod splitting a merged dim) and vector loads (see materialize).
  std::shared_ptr<const Lowered> reshape_src;
  bool realized() const { return buffer >= 0; }
};

// bf16 / f16 values are stored in their dtype but computed in float: loads convert, every
// expression over them is float, and the store rounds (Kernel::out_dtype). A Lowered's dtype is
// the storage dtype; its expressions have the compute dtype.
inline bool is_low_float(DType t) {
  return t == DType::kBF16 || t == DType::kF16;
}
inline DType compute_dtype(DType t) {
  return is_low_float(t) ? DType::kF32 : t;
}

// Emits `l` at index `idx` (one index expression per dim of l), in compute_dtype(l.dtype).
inline int emit_value(const Lowered& l, EmitContext& ctx, const std::vector<SymExpr>& idx) {
  if (!l.realized()) return l.emit(ctx, idx);
  SymExpr addr = l.offset;
  for (size_t i = 0; i < idx.size(); ++i) addr = addr + idx[i] * l.strides[i];
  int v = ctx.body.load(ctx.slot(l.buffer), l.dtype, addr);
  return is_low_float(l.dtype) ? ctx.body.cast(v, DType::kF32) : v;
}

inline std::vector<SymExpr> loop_vars(size_t n) {
  std::vector<SymExpr> idx;
  for (size_t i = 0; i < n; ++i) idx.push_back(SymExpr::symbol(loop_var(i)));
  return idx;
}

// Row-major strides of `dims`.
inline std::vector<SymExpr> contiguous(const std::vector<Dim>& dims) {
  std::vector<SymExpr> st(dims.size(), SymExpr(1));
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i)
    st[i] = st[i + 1] * dims[i + 1].expr();
  return st;
}

}  // namespace ferrite::lower_impl
