// Which operands of a ferrite.Attention node are stored heads-after-sequence: the `transposed`
// attribute [q, k, v, y] (0 / 1; absent: all 0). An operand marked 1 is rank 4, stored
// [B, S, H, D] as the Q / K / V projections produce it, and stands for its [B, H, S, D]
// transpose; a marked y is stored [B, S, H, Dv]. fold-attention-layout sets it where a Transpose
// would otherwise copy the operand; kernels read the operand through strides, or (reference,
// cpu) through a transposed copy.
#pragma once

#include <array>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "support/status.h"

namespace ferrite {

struct AttentionLayout {
  std::array<bool, 4> transposed{};  // q, k, v, y
  bool any() const { return transposed[0] || transposed[1] || transposed[2] || transposed[3]; }
};

// The node's layout; an error naming the node when the attribute is not 4 entries of 0 / 1.
Expected<AttentionLayout> attention_layout(const Node& attention);

// A rank-4 tensor with axes 1 and 2 swapped, contiguous (any dtype).
Expected<Tensor> swap_axes_1_2(const Tensor& t);

}  // namespace ferrite
