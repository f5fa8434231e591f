// When may a generated kernel write its output over one of its inputs?
//
// A pointwise kernel computes out[i] from loads at addresses that are functions of i. If every
// load of input buffer `b` reads exactly element i of `b` (the load address equals the store
// index) and the element sizes match, then element i of `b` is read only by the iteration that
// writes out[i], before it writes it, so out may live in b's storage once b dies at this step.
// A transpose, broadcast, slice or any other remapped read of `b` disqualifies it.
#pragma once

#include "lower/kernel_ir.h"
#include "lower/lowering.h"

namespace ferrite {

// Whether kernel `k` may store its output into the storage of its input buffer `buffer`
// (a buffer id from k.input_buffers). Liveness (the buffer dies here, nothing else aliases it)
// is the caller's business.
bool pointwise_in_place_ok(const PointwiseKernel& k, int buffer);

// Before code generation: marks in each generated kernel the input slot (if any) that it may
// later overwrite (`PointwiseKernel::in_place_slot`): an intermediate that
// `pointwise_in_place_ok` accepts and that no later step of a known kind reads. The generated code
// then drops __restrict on that pair; the planner only runs a kernel in place where it is marked
// (and its own liveness agrees), so a mark is never unsafe, only a lost optimisation hint.
// Returns the number of kernels marked.
int mark_in_place_candidates(LoweredGraph& lg);

// Graph outputs that a run writes into graph inputs (RunOptions::outputs_into_inputs: an
// optimizer step's new parameters, moments and step counts). Sets lg.output_into_input[j] = i
// where output j may be stored straight into input i's memory: one generated pointwise kernel
// writes output j, j's dtype is i's, and nothing reads input i after that kernel, which itself
// reads input i only at the element it stores (pointwise_in_place_ok), so every old element is
// read before it is overwritten. That kernel is marked `writes_input` (no __restrict). Requests
// that do not qualify are left to the executor, which copies the output into the input after the
// run. Returns the number of outputs planned in place.
int plan_outputs_into_inputs(LoweredGraph& lg, const std::vector<int>& requested);

}  // namespace ferrite
