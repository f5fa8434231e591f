// When may a generated kernel write its output over one of its inputs?
//
// A pointwise kernel computes out[i] from loads at addresses that are functions of i. If every
// load of input buffer `b` reads exactly element i of `b` (the load address equals the store
// index) and the element sizes match, then element i of `b` is read only by the iteration that
// writes out[i], before it writes it, so out may live in b's storage once b dies at this step.
// A transpose, broadcast, slice or any other remapped read of `b` disqualifies it.
#pragma once

#include "lower/kernel_ir.h"

namespace ferrite {

// Whether kernel `k` may store its output into the storage of its input buffer `buffer`
// (a buffer id from k.input_buffers). Liveness (the buffer dies here, nothing else aliases it)
// is the caller's business.
bool pointwise_in_place_ok(const PointwiseKernel& k, int buffer);

}  // namespace ferrite
