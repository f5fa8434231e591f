// Multi-tensor kernels: an optimizer step updates every parameter with the same short pointwise
// chain, each over its own shape. Horizontal fusion merges only kernels over one iteration
// space; here the independent pointwise kernels of a graph, whatever their (static) shapes, are
// grouped into one kernel with segments (Kernel::segments): one launch runs them all, its rows
// the segments' rows one after another, split across threads like any kernel's rows.
//
// Kernels are independent when neither reads what the other writes, directly or through other
// steps: each step gets a level (1 + the highest level among the steps that write its inputs),
// the steps are reordered by level (a topological order: a step's producers have lower levels)
// and the pointwise kernels of each level become one. An update graph has few levels (Adam:
// the moments and step counts, the bias corrections, the parameters), so a step over many
// parameters takes a few launches instead of a few per parameter shape. Reordering lengthens
// some buffers' lives (the planner sees the new order), so only update graphs use it.
#pragma once

#include "lower/lowering.h"

namespace ferrite {

// Groups in place; returns the number of kernels merged away (lg.kernels is updated).
// `max_params` > 0 bounds a merged kernel's parameters (its buffers plus the graph's shape
// symbols): a device whose launches pass every buffer as a kernel parameter (cuda: 4 KB, 8 bytes
// each) splits a level's kernels into several merged kernels under it, as PyTorch's
// multi_tensor_apply splits its tensor lists into chunks.
int fuse_multi_tensor(LoweredGraph& lg, size_t max_params = 0);

// Rows of a segment (the product of its leading dims; its shape is static).
int64_t segment_rows(const Kernel& k);

}  // namespace ferrite
