#include "runtime/precision.h"

namespace ferrite {

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::kF32:
      return "f32";
    case Precision::kTF32:
      return "tf32";
    case Precision::kBF16:
      return "bf16";
    case Precision::kF16:
      return "fp16";
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
  // atol = rtol = 16 u, u the unit roundoff of the stored dtype (2^-p for p significant bits:
  // bf16 p = 8, fp16 and tf32 p = 11). Every stored value carries a relative error up to u and a
  // deep model compounds them: on the zoo the largest |got - want| / (1 + |want|) measured was
  // 13 u (bert_base on `reference`, which rounds after every op; `cpu`, which keeps fused
  // intermediates in float, 11.2 u), for bf16 and fp16 alike. The measurements and the reasoning:
  // docs/cuda-backend.md, "Precision".
  switch (p) {
    case Precision::kBF16:
      return {0.0625, 0.0625};  // 16 * 2^-8
    case Precision::kF16:
      return {0.0078125, 0.0078125};  // 16 * 2^-11
    // TF32 rounds GEMM operands to 11 significant bits, as fp16 storage does, and keeps every
    // stored value in float32: at most fp16's error (not measured here: no GPU).
    case Precision::kTF32:
      return {0.0078125, 0.0078125};
    case Precision::kF32:
      break;
  }
  return default_tolerance(expected);
}

}  // namespace ferrite
