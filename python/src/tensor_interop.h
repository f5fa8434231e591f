// Tensors across the Python boundary: DLPack/buffer-protocol arrays (numpy, torch, anything
// nanobind's ndarray accepts) in, ferrite Tensors out, both without copying.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <string>
#include <vector>

#include "ir/shape.h"
#include "ir/tensor.h"
#include "support/status.h"

namespace ferrite::py {

namespace nb = nanobind;

// The ferrite dtype of a DLPack dtype (error naming `what` when ferrite has no such type).
Expected<DType> dtype_from_dlpack(nb::dlpack::dtype t, const std::string& what);
nb::dlpack::dtype dlpack_from_dtype(DType t);

// An array ferrite reads: read-only ones too (onnx.numpy_helper's, a torch tensor's numpy view
// of a non-writable buffer); nanobind's default ndarray refuses them with a TypeError.
using InputArray = nb::ndarray<nb::ro>;

// A Tensor over the array's memory (no copy): the storage keeps the array alive. The array must
// be on the CPU and C-contiguous (callers make it so, or get an error naming `what`). ferrite
// writes into an input only where asked to (RunOptions::outputs_into_inputs, which the
// torch.compile backend sets for its own writable tensors).
Expected<Tensor> tensor_from_array(const InputArray& a, const std::string& what);

// An array in a device's memory (DLPack device type other than CPU), described without copying:
// what Session::run_device takes. Must be C-contiguous.
struct DeviceArray {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  const void* data = nullptr;
  int device_type = 0;  // DLPack's (2: CUDA)
  int device_id = 0;
};
Expected<DeviceArray> device_array(const InputArray& a, const std::string& what);

// An array of the given framework ("numpy" or "torch") over the tensor's storage (no copy).
nb::object array_from_tensor(Tensor t, const std::string& framework);

// A dim for Python: an int, a symbolic expression as text, or None when unknown.
nb::object dim_to_py(const Dim& d);

// Raises ferrite.FerriteError (or MemoryError / NotImplementedError by status code).
[[noreturn]] void raise_status(const Status& s);

template <class T>
T unwrap(Expected<T> e) {
  if (!e) raise_status(e.status());
  return std::move(*e);
}
inline void check(const Status& s) {
  if (!s.is_ok()) raise_status(s);
}

}  // namespace ferrite::py
