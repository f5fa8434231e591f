#include "runtime/compare.h"

#include <cmath>
#include <cstdio>

namespace ferrite {

Tolerance default_tolerance(DType t) {
  switch (t) {
    case DType::kF64: return {1e-7, 1e-5};
    case DType::kF32: return {1e-4, 1e-3};
    case DType::kF16: return {1e-3, 1e-2};
    case DType::kBF16: return {1e-2, 2e-2};
    // float8 is exact: both sides round the same source values with the same rule (ONNX's Cast
    // table), and one float8 ulp is too coarse (up to 12.5% for E4M3, 25% for E5M2) for a
    // tolerance to mean anything. See compare_tensors.
    default: return {0, 0};
  }
}

namespace {
unsigned float8_at(const Tensor& t, int64_t i) { return static_cast<const uint8_t*>(t.raw())[i]; }
}  // namespace

CompareResult compare_tensors(const Tensor& actual, const Tensor& expected, const Tolerance& tol) {
  CompareResult r;
  // Sequences and optionals: the same kind and number of items, each item compared in turn.
  if (!actual.is_tensor() || !expected.is_tensor()) {
    r.ok = false;
    if (actual.kind() != expected.kind() || actual.dtype() != expected.dtype()) {
      r.message = str_cat(actual.type_string(), " != expected ", expected.type_string());
      return r;
    }
    if (actual.items().size() != expected.items().size()) {
      r.message = str_cat(actual.items().size(), " items != expected ", expected.items().size());
      return r;
    }
    for (size_t i = 0; i < actual.items().size(); ++i) {
      CompareResult ri = compare_tensors(actual.items()[i], expected.items()[i], tol);
      if (!ri.ok) {
        ri.message = str_cat("item ", i, ": ", ri.message);
        return ri;
      }
      r.max_abs_error = std::max(r.max_abs_error, ri.max_abs_error);
    }
    r.ok = true;
    return r;
  }
  if (actual.dtype() != expected.dtype()) {
    r.ok = false;
    r.message = str_cat("dtype ", dtype_name(actual.dtype()), " != expected ",
                        dtype_name(expected.dtype()));
    return r;
  }
  if (actual.dims() != expected.dims()) {
    r.ok = false;
    r.message = str_cat("shape ", dims_to_string(actual.dims()), " != expected ",
                        dims_to_string(expected.dims()));
    return r;
  }
  // float8 with a zero tolerance compares bit patterns, so -0 differs from +0; any NaN still
  // matches any NaN (E5M2 has several NaN encodings).
  const bool float8_bits = is_float8(actual.dtype()) && tol.atol == 0 && tol.rtol == 0;
  int64_t bad = 0, first_bad = -1;
  int64_t nan_bad = 0, inf_bad = 0;  // mismatches a finite difference cannot describe
  for (int64_t i = 0; i < actual.numel(); ++i) {
    double a = actual.double_at(i), e = expected.double_at(i);
    bool match;
    if (float8_bits) {
      match = (std::isnan(a) && std::isnan(e)) || float8_at(actual, i) == float8_at(expected, i);
      if (std::isfinite(a) && std::isfinite(e))
        r.max_abs_error = std::max(r.max_abs_error, std::fabs(a - e));
    } else if (std::isnan(e) || std::isnan(a)) {
      match = std::isnan(e) && std::isnan(a);
      nan_bad += !match;
    } else if (std::isinf(e) || std::isinf(a)) {
      match = a == e;
      inf_bad += !match;
    } else if (!is_float(actual.dtype()) && !is_float8(actual.dtype())) {
      // Compare integers exactly (double holds i64 up to 2^53; beyond that use the int path).
      match = actual.dtype() == DType::kI64 || actual.dtype() == DType::kU64
                  ? actual.int_at(i) == expected.int_at(i)
                  : a == e;
    } else {
      double diff = std::fabs(a - e);
      r.max_abs_error = std::max(r.max_abs_error, diff);
      match = diff <= tol.atol + tol.rtol * std::fabs(e);
    }
    if (!match) {
      if (first_bad < 0) first_bad = i;
      ++bad;
    }
  }
  if (bad) {
    r.ok = false;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%lld of %lld elements differ; first at %lld: got %.9g, expected %.9g",
                  static_cast<long long>(bad), static_cast<long long>(actual.numel()),
                  static_cast<long long>(first_bad), actual.double_at(first_bad),
                  expected.double_at(first_bad));
    r.message = buf;
    // A NaN or infinity mismatch has no finite error: count it, so that "max abs error 0" never
    // stands for elements that are NaN on one side only.
    if (nan_bad)
      r.message +=
          str_cat("; ", nan_bad, " NaN mismatches (NaN on one side, a number on the other)");
    if (inf_bad) r.message += str_cat("; ", inf_bad, " infinity mismatches");
    if (bad > nan_bad + inf_bad) {
      std::snprintf(buf, sizeof buf, "; max abs error %.3g (atol %.1g, rtol %.1g)", r.max_abs_error,
                    tol.atol, tol.rtol);
      r.message += buf;
    }
    if (float8_bits) {
      std::snprintf(buf, sizeof buf, " (bits 0x%02x, expected 0x%02x)",
                    float8_at(actual, first_bad), float8_at(expected, first_bad));
      r.message += buf;
    }
  }
  return r;
}

}  // namespace ferrite
