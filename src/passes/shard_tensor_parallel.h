// shard-tensor-parallel: rewrites a graph into what one rank of an N-way tensor-parallel group
// runs (Megatron-style), with the com.microsoft collectives between the parts.
//
// It follows where a split can travel rather than matching fixed patterns:
//   - a MatMul/Gemm of an unsplit activation by a constant weight becomes column-parallel (the
//     rank keeps 1/N of the weight's columns, and of each section's when the product is split
//     into equal parts later, like GPT-2's fused QKV; an LM head whose vocabulary N does not
//     divide is padded);
//   - an embedding Gather becomes vocab-parallel (1/N of the rows; ids outside them look up
//     zeros; an AllReduce sums the parts), so the residual stream stays whole;
//   - the split then propagates through elementwise ops (constant operands are sliced the same
//     way, broadcast ones stay), views (Reshape, Transpose, (Un)Squeeze, Flatten, Expand: the
//     head dim of attention is where a hidden split lands), batched MatMuls of two split values
//     (attention scores and context, per head), Softmax, LayerNormalization and reductions over
//     other axes, Split, Slice, Concat, Gather;
//   - a MatMul/Gemm that contracts over the split dim with a constant weight becomes
//     row-parallel (1/N of the weight's rows) and is followed by an AllReduce (the bias is added
//     after it);
//   - anywhere else a split value is needed whole (a LayerNormalization over the split axis, a
//     graph output) an AllGather restores it.
// So attention (by heads), MLPs (first projection by columns, second by rows), embeddings and
// LM heads come out as the Megatron layouts without naming them, and any graph stays correct.
// Shapes stay symbolic: Reshape/Expand targets have their split entry divided by N.
//
// Not in the default pipeline: it takes the rank and the group size, as pass options
// (`shard-tensor-parallel{rank=0 size=2}`). The tensor-parallel runner
// (distributed/tensor_parallel.h) runs it on the simplified graph (after constant folding, so that
// weights and shape targets are constants), before the pattern rewrites.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace ferrite {

struct ShardReport {
  int size = 1;
  int column_parallel = 0;  // weights split by output columns
  int vocab_parallel = 0;   // embeddings split by rows, each followed by an AllReduce
  int row_parallel = 0;     // weights split by input rows, each followed by an AllReduce
  int all_gathers = 0;      // split values made whole again
  int64_t weight_bytes_before = 0, weight_bytes_after = 0;  // constants of the graph, per rank
  std::vector<std::string> lines;                           // one per decision, with the node names
  std::string summary() const;
};

// Rewrites `g` in place into rank `rank` of `size`. size 1 leaves the graph alone.
Expected<ShardReport> shard_tensor_parallel(Graph& g, int rank, int size);

}  // namespace ferrite
