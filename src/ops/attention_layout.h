// How the operands and the result of a ferrite.Attention node are stored: the `transposed`
// attribute [q, k, v, y], one code each (absent: all 0):
//   0  [..., H, S, D]  the logical layout (any rank);
//   1  [B, S, H, D]    heads after the sequence, as per-token projections produce it (BERT,
//                      GPT-2, Llama exports);
//   2  [S, B, H, D]    sequence first, as nn.MultiheadAttention lays heads out (ViT exports:
//                      the projections run on [S, B, E]).
// An operand with code 1 or 2 is rank 4 and stands for its [B, H, S, D] view; a result with code
// 1 or 2 is stored so (Dv for D). fold-attention-layout sets the codes where a Transpose would
// otherwise copy the operand; kernels read the operand through strides, or (reference, cpu)
// through a permuted copy.
#pragma once

#include <array>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "support/status.h"

namespace ferrite {

enum HeadLayout : int { kHeadsBeforeSequence = 0, kHeadsAfterSequence = 1, kSequenceFirst = 2 };

struct AttentionLayout {
  std::array<int, 4> transposed{};  // q, k, v, y: HeadLayout codes
  bool any() const { return transposed[0] || transposed[1] || transposed[2] || transposed[3]; }
};

// The node's layout; an error naming the node when the attribute is not 4 codes of HeadLayout.
Expected<AttentionLayout> attention_layout(const Node& attention);

// For a rank-4 operand stored with `code`: dim i of its [B, H, S, D] view is stored dim
// logical_perm(code)[i]; dim j of the stored tensor is dim stored_perm(code)[j] of the view.
std::array<int, 4> logical_perm(int code);
std::array<int, 4> stored_perm(int code);

// A rank-4 tensor permuted (out dim i = in dim perm[i]), contiguous (any dtype).
Expected<Tensor> permute4(const Tensor& t, const std::array<int, 4>& perm);

}  // namespace ferrite
