// Turns CTS cases into in-memory ONNX models and seeded input tensors. Several cases can share one
// model (one compile serving many cases): each case's names are prefixed with "c<k>_".
#pragma once

#include <string>
#include <vector>

#include "cts/cts.h"
#include "runtime/session.h"

namespace ferrite::cts {

// The cases as one ONNX model (ModelProto bytes). The graph outputs are the cases' outputs in
// order; the graph inputs their non-constant tensors in order.
Expected<std::string> build_model(const std::vector<const Case*>& cases);

// The inputs of the model for run `run` (cases with fewer runs repeat their last binding).
Expected<std::vector<Session::NamedInput>> make_inputs(const std::vector<const Case*>& cases,
                                                       size_t run);

// Number of runs of a batch: the most of any case.
size_t run_count(const std::vector<const Case*>& cases);

// A tensor filled from `gen` with a generator seeded from `seed`.
Tensor generate_tensor(DType dtype, const std::vector<int64_t>& dims, const ValueGen& gen,
                       uint64_t seed);

}  // namespace ferrite::cts
