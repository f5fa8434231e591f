// CUDA C++ for the kernels of a lowered graph (backend_api/dialect.h), from the same Kernel IR as
// the host dialects, with the shared scalar emitter spelling the expressions and the shared row
// analysis (codegen/row_analysis.h) deciding the phases. Source text only: it builds without the
// CUDA toolkit, and the cuda device (src/backends/cuda) compiles it with NVRTC and launches it.
//
// Calling convention (kernel_abi()): every kernel is
//   extern "C" __global__ void <name>(const T0* in0, ..., Tout* out, int64_t s0, int64_t s1, ...)
// with one int64 per LoweredGraph::symbols entry, so one compile serves every batch and sequence
// size. Pointwise kernels walk the flat output with a grid-stride loop (32-bit index arithmetic
// when the iteration space fits, 64-bit otherwise), 16 bytes per thread and iteration with vector
// loads and stores where the innermost dim allows; row kernels give each block one row at a time
// (grid-stride over rows): every phase is a pass over the row whose per-thread partials are
// combined with warp shuffles and shared memory, and the store is a pass too (or thread 0 for one
// value per row). Rows of at most row_cache() elements per thread are read once, into registers.
#pragma once

#include <string>

#include "backend_api/dialect.h"

namespace ferrite::cuda {

class CudaDialect : public CodegenDialect {
 public:
  std::string name() const override { return "cuda"; }
  Expected<std::string> generate(const LoweredGraph& lg,
                                 const DeviceProperties& props) const override;
  std::string kernel_abi() const override { return "cuda:v1:inputs,out,int64 syms by value"; }
  ScalarSpelling spelling() const override;
};

// Row kernels keep the row in registers when it has at most row_cache() elements per thread of
// the block (the launch heuristics size blocks for it; longer rows take recomputing passes), and
// run at most row_block_max() threads per block (their __launch_bounds__: the register budget).
// FERRITE_CUDA_ROW_CACHE / FERRITE_CUDA_ROW_BLOCK override them for experiments.
int row_cache();
int row_block_max();
// Column reductions (codegen/row_analysis.h, column_reduce) take up to column_rows()
// neighbouring rows per block: the largest power of two C <= column_rows() with
// ceil(rows / C) >= the grid (so a launch sizes its grid for the C it wants), and blocks of at
// most column_block_max() threads (their __launch_bounds__).
int column_rows();
int column_block_max();

// The prelude every generated CUDA module starts with (types, fe_* helpers, block reductions); the
// scalar helpers (scalar_helpers_source()) follow it.
const char* cuda_prelude_source();
// `fe_act(v, act, p0, p1)`: every epilogue row of the scalar-function table in CUDA, selected by
// Activation::code() (ops/activation_epilogue.h); needs the prelude and the scalar helpers.
std::string cuda_activation_source();
// The CUDA expression spelling (overloaded math functions, __restrict__, CUDA types).
ScalarSpelling cuda_spelling();

}  // namespace ferrite::cuda
