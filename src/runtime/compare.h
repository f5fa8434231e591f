// Numeric comparison of a result against an expected tensor with per-dtype tolerances. Used by
// `ferrite test-onnx`, the model tests and (later) device conformance against `reference`.
#pragma once

#include <string>

#include "ir/tensor.h"

namespace ferrite {

// |actual - expected| <= atol + rtol * |expected|, elementwise; NaN matches NaN and infinities
// must match exactly. Integers and bool must be equal. float8 with a zero tolerance (the default)
// must match bit for bit, except that NaN matches NaN.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
};
// The documented defaults (docs/conformance.md).
Tolerance default_tolerance(DType t);

struct CompareResult {
  bool ok = true;
  std::string message;  // first mismatch and the worst error, when !ok
  double max_abs_error = 0;
};
CompareResult compare_tensors(const Tensor& actual, const Tensor& expected, const Tolerance& tol);

}  // namespace ferrite
