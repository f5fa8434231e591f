// Row-kernel lowerings (see kernel_ir.h): Softmax and LogSoftmax over the last axis,
// LayerNormalization, Reduce{Sum,Mean,Max,Min,L1,L2,SumSquare} over any axes, and
// GlobalAveragePool. f32/f64 only; sums accumulate in double as the reference kernels do.
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"
#include "lower/lowered_value.h"

namespace ferrite::lower_impl {

// The pending row value (emit + row plan) computing output 0 of `n` from its lowered inputs
// (`in[i]` null when input i is absent), or nullopt when `n` has no row lowering and runs as a
// library step. `out_dims` are output 0's dims; the caller checks that other outputs are unused.
std::optional<Lowered> lower_row_op(const Node& n, const std::vector<const Lowered*>& in,
                                    const std::vector<Dim>& out_dims);

// MatMul / Gemm (f32, f64) as a row kernel over [batch..., M, N | K] that sums over K in double,
// one store per row; pointwise consumers (bias, activation) fuse into the store. For devices with
// no library GEMM (LoweringOptions::generate_matmul): correct and on the device, not fast.
std::optional<Lowered> lower_matmul(const Node& n, const std::vector<const Lowered*>& in,
                                    const std::vector<Dim>& out_dims);

}  // namespace ferrite::lower_impl
