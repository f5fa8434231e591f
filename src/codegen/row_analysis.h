// The analysis every dialect's kernels share: which expressions depend on which loop variables
// (the pointwise dependency walk) and, for row kernels, the phase structure (which expressions a
// pass needs, which phases are live, what varies along the row, what is worth keeping). The
// dialects differ only in the loops they write around it (codegen/cpp_source.cpp: host row
// loops; codegen/cuda_source.cpp: a CUDA grid).
#pragma once

#include <vector>

#include "lower/kernel_ir.h"

namespace ferrite {

// Which expressions of `k` depend on the loop variables of dims [lo, hi): through the addresses
// of loads and symbols, and through arguments. A kReduce's result is one value per row, so it
// depends on no reduced dim; callers ask about reduced dims, or about pointwise kernels.
std::vector<bool> depends_on_dims(const Kernel& k, size_t lo, size_t hi);

// Whether computing `e` again costs more than keeping its value: a function whose row in the
// scalar-function table is FnCost::kCostly (loads are the caller's business).
bool costly(const ScalarExpr& e);

// The phases of a row kernel (kernel_ir.h): each live kReduce is a pass over the row; a pass
// computes what `needed` marks, the row-invariant part once per row before the first pass that
// needs it, the varying part inside each pass that needs it.
class RowPhases {
 public:
  explicit RowPhases(const Kernel& k);

  // The expressions computing `root` needs, stopping at phase results (computed by earlier
  // passes); `through`: a phase's own pass, which starts below its kReduce. `leaf` is read, not
  // computed (the host's stash).
  std::vector<bool> needed(int root, bool through, int leaf = -1) const;

  std::vector<bool> varies;  // depends on a reduced dim's loop variable
  std::vector<bool> live;    // the root needs it, directly or through later phases
  int last_phase = -1;       // the last live kReduce; -1 for none
  // A costly varying value that the last phase and the store both compute (softmax's
  // exp(x - max)) and that has the output's type: the host writes it to the output row in the
  // last phase and reads it back in the store instead of computing it twice. -1 for none.
  int stash = -1;

 private:
  const Kernel& k_;
};

// The live kReduce of a row kernel whose reduction reads columns: one value per row, a single
// sum phase, and every load that varies along the row is contiguous across neighbouring rows
// (unit stride along the last row dim) but not along the row (channels-last global pooling, a
// squeeze-excite mean: rows are channels, the row runs over pixels), with at least 4 such rows
// side by side. The host emits such a kernel with a block of rows side by side
// (codegen/cpp_source.cpp) and gives its tasks whole images (backends/cpu/cpu_backend.cpp).
// -1 otherwise.
int column_reduce(const Kernel& k, const RowPhases& ph);

}  // namespace ferrite
