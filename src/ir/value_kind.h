// What a value holds. Nearly every value is a tensor; ONNX also has sequences of tensors and
// optionals (of a tensor or of a sequence), which the sequence ops (ops/sequence.cpp), Identity
// and control flow pass around. The kind rides next to the dtype and shape rather than in a
// separate type hierarchy, so that tensor-only graphs and every tensor path stay as they were.
#pragma once

#include <cstdint>

namespace ferrite {

enum class ValueKind : uint8_t {
  kTensor,
  kSequence,          // dtype and shape describe the elements (a shape every element satisfies)
  kOptionalTensor,    // dtype and shape describe the tensor it may hold
  kOptionalSequence,  // ... the elements of the sequence it may hold
};

inline bool is_optional_kind(ValueKind k) {
  return k == ValueKind::kOptionalTensor || k == ValueKind::kOptionalSequence;
}
// The kind of what an optional holds (kTensor / kSequence); other kinds are returned unchanged.
inline ValueKind optional_element_kind(ValueKind k) {
  if (k == ValueKind::kOptionalTensor) return ValueKind::kTensor;
  if (k == ValueKind::kOptionalSequence) return ValueKind::kSequence;
  return k;
}
// "seq(f32[2,3])"-style wrapping of an element type's text for messages and the printer.
const char* value_kind_prefix(ValueKind k);

}  // namespace ferrite
