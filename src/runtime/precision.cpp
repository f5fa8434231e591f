#include "runtime/precision.h"

namespace ferrite {

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::kF32: return "f32";
    case Precision::kTF32: return "tf32";
    case Precision::kBF16: return "bf16";
    case Precision::kF16: return "fp16";
  }
  return "?";
}

std::optional<Precision> precision_from_name(std::string_view n) {
  if (n == "f32" || n == "fp32") return Precision::kF32;
  if (n == "tf32") return Precision::kTF32;
  if (n == "bf16") return Precision::kBF16;
  if (n == "fp16" || n == "f16") return Precision::kF16;
  return std::nullopt;
}

DType precision_storage(Precision p) {
  if (p == Precision::kBF16) return DType::kBF16;
  if (p == Precision::kF16) return DType::kF16;
  return DType::kF32;
}

Tolerance precision_tolerance(Precision p, DType expected) {
  if (!is_float(expected) || expected == DType::kF64) return default_tolerance(expected);
  // Derivation and the errors measured on the zoo: docs/cuda-backend.md, "Precision". A stored
  // value carries a relative rounding error of 2^-9 (bf16, 8 significant bits) or 2^-12 (fp16,
  // 11 bits); a model's output is the result of many such roundings (weights, every stored
  // activation), which accumulate roughly like a random walk over the layers.
  switch (p) {
    case Precision::kBF16: return {6e-2, 6e-2};
    case Precision::kF16: return {1e-2, 1e-2};
    // TF32 rounds GEMM inputs to 11 significant bits, as fp16 does, but keeps every stored value
    // in float32.
    case Precision::kTF32: return {1e-2, 1e-2};
    case Precision::kF32: break;
  }
  return default_tolerance(expected);
}

}  // namespace ferrite
