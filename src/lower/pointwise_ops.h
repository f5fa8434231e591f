// Which graph ops lower to scalar expressions, and how.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "lower/kernel_ir.h"

namespace ferrite {

// The kernel being built: its expression DAG and its input buffers (slot = position).
struct EmitContext {
  KernelBody& body;
  std::vector<int>& input_buffers;
  int slot(int buffer) {
    for (size_t i = 0; i < input_buffers.size(); ++i)
      if (input_buffers[i] == buffer) return static_cast<int>(i);
    input_buffers.push_back(buffer);
    return static_cast<int>(input_buffers.size()) - 1;
  }
};

struct PointwiseOp {
  // Whether input i takes part in the expression (Clip's min/max are read as constants).
  bool (*uses_input)(size_t i);
  // Builds the op's expression from its inputs' expressions.
  int (*emit_fn)(EmitContext& ctx, const Node& n, const std::vector<int>& args, DType out);
  int emit(EmitContext& ctx, const Node& n, const std::vector<int>& args, DType out) const {
    return emit_fn(ctx, n, args, out);
  }
};

// The lowering of `n`, or null when it has none (it then runs as a library step).
const PointwiseOp* find_pointwise_op(const Node& n);

}  // namespace ferrite
