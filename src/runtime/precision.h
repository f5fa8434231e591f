// Execution precision of float tensors (RunOptions::precision, `--precision`), and the tolerance
// that outputs computed at each precision are checked with against float32 expectations. The
// numbers and how they were derived: docs/cuda-backend.md, "Precision".
#pragma once

#include <optional>
#include <string_view>

#include "ir/dtype.h"
#include "runtime/compare.h"

namespace ferrite {

enum class Precision : uint8_t {
  kF32,   // float32 storage and arithmetic (the default; TF32 off)
  kTF32,  // float32 storage, GEMMs on TF32 tensor cores where the device has them
  kBF16,  // bfloat16 storage (weights and activations), float32 compute and accumulation
  kF16,   // IEEE half storage, float32 compute and accumulation
};

std::string_view precision_name(Precision p);  // "f32", "tf32", "bf16", "fp16"
// Accepts f32 / fp32, tf32, bf16, fp16 / f16.
std::optional<Precision> precision_from_name(std::string_view name);
// The dtype float32 tensors are stored in: kBF16 / kF16 for the reduced precisions, else kF32.
DType precision_storage(Precision p);
// Tolerance for comparing an output (expected dtype `expected`) of a model run at precision `p`
// with float32 expectations. Float outputs under the reduced precisions get the precision's
// tolerance; everything else the per-dtype default (no loosening at f32).
Tolerance precision_tolerance(Precision p, DType expected);

}  // namespace ferrite
