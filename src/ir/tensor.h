// A dense, row-major host tensor with shared storage. Used for initializers, constants and the
// reference executor's values.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/value_kind.h"
#include "support/status.h"

namespace ferrite {

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-initialised storage; fails cleanly on overflow or allocation failure.
  static Expected<Tensor> create(DType dtype, std::vector<int64_t> dims);
  // The same without the zero fill, for a producer that writes every element.
  static Expected<Tensor> create_uninitialized(DType dtype, std::vector<int64_t> dims);
  // A tensor over storage that the caller provides (e.g. a slice of a device's memory arena, made
  // with shared_ptr's aliasing constructor so it keeps the arena alive). The storage must hold
  // numel(dims) * dtype_size(dtype) bytes; the contents are used as they are.
  static Expected<Tensor> over_storage(DType dtype, std::vector<int64_t> dims,
                                       std::shared_ptr<uint8_t[]> storage);
  // A tensor over memory the caller owns and may change between runs (a framework's parameters,
  // bound without a copy). Kernels must not keep copies derived from it keyed by its address:
  // each borrow has its own id (borrow_id), never reused, for caches of such copies.
  static Expected<Tensor> borrow(DType dtype, std::vector<int64_t> dims,
                                 std::shared_ptr<uint8_t[]> storage);
  // For internal use where dims are known to be valid and small (constants the compiler makes,
  // tests): aborts when the allocation fails. Sizes that come from a model or its inputs use
  // create(), which returns the failure.
  static Tensor zeros(DType dtype, std::vector<int64_t> dims);
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, std::vector<int64_t> dims) {
    Tensor t = zeros(dtype_of<T>::value, std::move(dims));
    FERRITE_CHECK(static_cast<size_t>(t.numel()) == values.size());
    for (size_t i = 0; i < values.size(); ++i) t.data<T>()[i] = values[i];
    return t;
  }
  template <class T>
  static Tensor scalar(T v) {
    return from_vector<T>({v}, {});
  }

  // ONNX sequence and optional values (ir/value_kind.h) travel in a Tensor too, so that every
  // path that moves values (the interpreter, host steps, the Session) carries them unchanged.
  // Such a Tensor has no storage and no dims: dtype() is the elements' dtype and items() holds
  // the elements (a sequence) or the 0 or 1 values (an optional). Values are immutable once
  // made, so copies share the items.
  static Tensor sequence(DType elem, std::vector<Tensor> items);
  // `kind` is kOptionalTensor or kOptionalSequence; `value` (if any) is of the matching kind.
  static Tensor optional(ValueKind kind, DType elem, std::optional<Tensor> value);
  ValueKind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == ValueKind::kTensor; }
  const std::vector<Tensor>& items() const;

  bool defined() const { return dtype_ != DType::kUndefined || kind_ != ValueKind::kTensor; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  size_t rank() const { return dims_.size(); }
  int64_t dim(size_t i) const { return dims_[i]; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  bool borrowed() const { return borrow_id_ != 0; }
  uint64_t borrow_id() const { return borrow_id_; }

  void* raw() { return storage_ ? storage_.get() : nullptr; }
  const void* raw() const { return storage_ ? storage_.get() : nullptr; }
  template <class T>
  T* data() {
    FERRITE_CHECK(dtype_of<T>::value == dtype_);
    return static_cast<T*>(raw());
  }
  template <class T>
  const T* data() const {
    FERRITE_CHECK(dtype_of<T>::value == dtype_);
    return static_cast<const T*>(raw());
  }
  template <class T>
  std::span<const T> span() const {
    return {data<T>(), static_cast<size_t>(numel_)};
  }

  // Same storage, new dims with equal element count (checked: for dims a kernel validated).
  Tensor reshaped(std::vector<int64_t> dims) const;
  // The same as a value: an error naming both shapes when the element counts differ.
  Expected<Tensor> view(std::vector<int64_t> dims) const;
  // Deep copy; aborts when the allocation fails (small internal tensors, tests).
  Tensor clone() const;
  // Deep copy that returns an allocation failure.
  Expected<Tensor> try_clone() const;
  // Reads element i of an integer or bool tensor as int64 (for shape-like inputs); floats
  // truncate, saturating, with NaN -> 0.
  int64_t int_at(int64_t i) const;
  // Reads element i of any tensor (float8 included) as double.
  double double_at(int64_t i) const;
  // The values of a 0-d or 1-d integer tensor.
  std::vector<int64_t> to_int_vector() const;
  // Short human-readable rendering for diagnostics: "f32[2,3]", "seq(f32)[3 items]",
  // "optional(f32[2])", "optional(seq(f32))[none]".
  std::string type_string() const;

 private:
  static Expected<Tensor> create_storage(DType dtype, std::vector<int64_t> dims, bool zero);

  DType dtype_ = DType::kUndefined;
  std::vector<int64_t> dims_;
  int64_t numel_ = 0;
  uint64_t borrow_id_ = 0;  // nonzero: memory the caller owns (borrow)
  std::shared_ptr<uint8_t[]> storage_;
  ValueKind kind_ = ValueKind::kTensor;
  std::shared_ptr<const std::vector<Tensor>> items_;  // sequence / optional contents
};

// Row-major strides of dims.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims);
std::string dims_to_string(const std::vector<int64_t>& dims);

}  // namespace ferrite
