// Row-loop C++ source for the kernels of a lowered graph: the loop structure of host-run code
// (the cpu device, and accelerator emulators that run blocks on host threads).
//
// Each kernel becomes, by default (thread-pool style),
//   extern "C" void <name>(void* const* bufs, const int64_t* syms, int64_t row_begin,
//                          int64_t row_end)
// iterating rows (the dims before the last, or before the reduced dims of a row kernel) in
// [row_begin, row_end), with an inner loop over the row that the C++ compiler vectorises. With
// HostLoopStyle::grid_launch the kernel instead takes (bufs, syms, block, grid) and computes its
// share of the rows itself. Shape symbols arrive in `syms` in LoweredGraph::symbols order, so one
// compiled module serves every batch and sequence size. Expressions are spelled by the shared
// ScalarEmitter (codegen/scalar_emitter.h).
#pragma once

#include <string>

#include "backend_api/dialect.h"
#include "lower/lowering.h"

namespace ferrite {

struct HostLoopStyle {
  std::string qualifier = "extern \"C\"";
  bool grid_launch = false;
  // fe_m:: (the host prelude's math namespace: std's functions and a vectorisable exp(float)).
  ScalarSpelling spelling{.math_prefix = "fe_m::"};
  // Replaces the default host prelude (headers and the fe_* macros scalar_emitter.h needs).
  std::string prelude;
};

std::string generate_row_loop_source(const LoweredGraph& lg, const HostLoopStyle& style);
// The cpu device's source: generate_row_loop_source with the default style.
std::string generate_cpp_source(const LoweredGraph& lg);
const char* host_prelude_source();
// Calling conventions (part of compile-cache keys).
const char* cpp_kernel_abi();
const char* grid_kernel_abi();

}  // namespace ferrite
