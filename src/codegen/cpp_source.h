// C++ source for the generated kernels of a lowered graph (the CPU dialect).
//
// Each PointwiseKernel becomes
//   extern "C" void <name>(void* const* bufs, const int64_t* syms, int64_t row_begin,
//                          int64_t row_end)
// iterating rows (every dim but the last) in [row_begin, row_end) and the last dim in an inner
// loop that the C++ compiler vectorises. Shape symbols arrive in `syms` in LoweredGraph::symbols
// order, so one compiled module serves every batch and sequence size.
#pragma once

#include <string>

#include "lower/lowering.h"

namespace ferrite {

std::string generate_cpp_source(const LoweredGraph& lg);
// Number of rows (product of all dims but the last) and row length for a kernel's shape.
const char* cpp_kernel_abi();

}  // namespace ferrite
