#include "tensor_interop.h"

#include <memory>
#include <vector>

namespace ferrite::py {

namespace {

using Code = nb::dlpack::dtype_code;

struct DTypeRow {
  DType dtype;
  uint8_t code;
  uint8_t bits;
};

// One row per dtype that crosses the boundary.
constexpr DTypeRow kDTypes[] = {
    {DType::kF32, uint8_t(Code::Float), 32},   {DType::kF16, uint8_t(Code::Float), 16},
    {DType::kBF16, uint8_t(Code::Bfloat), 16}, {DType::kF64, uint8_t(Code::Float), 64},
    {DType::kI8, uint8_t(Code::Int), 8},       {DType::kI16, uint8_t(Code::Int), 16},
    {DType::kI32, uint8_t(Code::Int), 32},     {DType::kI64, uint8_t(Code::Int), 64},
    {DType::kU8, uint8_t(Code::UInt), 8},      {DType::kU16, uint8_t(Code::UInt), 16},
    {DType::kU32, uint8_t(Code::UInt), 32},    {DType::kU64, uint8_t(Code::UInt), 64},
    {DType::kBool, uint8_t(Code::Bool), 8},
};

}  // namespace

Expected<DType> dtype_from_dlpack(nb::dlpack::dtype t, const std::string& what) {
  if (t.lanes == 1)
    for (const auto& r : kDTypes)
      if (r.code == t.code && r.bits == t.bits) return r.dtype;
  return unsupported(what, ": element type (DLPack code ", int(t.code), ", ", int(t.bits),
                     " bits) is not supported by ferrite");
}

nb::dlpack::dtype dlpack_from_dtype(DType t) {
  for (const auto& r : kDTypes)
    if (r.dtype == t) return nb::dlpack::dtype{r.code, r.bits, 1};
  throw nb::type_error(
      ("ferrite dtype " + std::string(dtype_name(t)) + " has no DLPack equivalent").c_str());
}

namespace {

// The array's dims, checked C-contiguous (strides of size-1 dims do not matter, nor any stride
// of an empty array: exporters report them differently, e.g. numpy 2's DLPack gives 0).
Expected<std::vector<int64_t>> contiguous_dims(const InputArray& a, const std::string& what) {
  std::vector<int64_t> dims(a.ndim());
  bool empty = false;
  for (size_t i = 0; i < a.ndim(); ++i) {
    dims[i] = static_cast<int64_t>(a.shape(i));
    empty = empty || dims[i] == 0;
  }
  if (empty) return dims;
  int64_t expect = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (dims[i] != 1 && a.stride(i) != expect) return err(what, ": the array is not C-contiguous");
    expect *= dims[i];
  }
  return dims;
}

}  // namespace

Expected<DeviceArray> device_array(const InputArray& a, const std::string& what) {
  DeviceArray d;
  FERRITE_ASSIGN_OR_RETURN(d.dtype, dtype_from_dlpack(a.dtype(), what));
  FERRITE_ASSIGN_OR_RETURN(d.dims, contiguous_dims(a, what));
  d.data = a.data();
  d.device_type = static_cast<int>(a.device_type());
  d.device_id = static_cast<int>(a.device_id());
  return d;
}

Expected<Tensor> tensor_from_array(const InputArray& a, const std::string& what) {
  if (a.device_type() != nb::device::cpu::value)
    return unsupported(what, ": the array is not in host memory (DLPack device type ",
                       a.device_type(), "); pass a CPU tensor");
  FERRITE_ASSIGN_OR_RETURN(DType dtype, dtype_from_dlpack(a.dtype(), what));
  FERRITE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, contiguous_dims(a, what));
  int64_t numel = 1;
  for (int64_t d : dims) numel *= d;
  if (numel == 0 || a.data() == nullptr) return Tensor::create(dtype, std::move(dims));
  // The storage holds a reference to the array; dropping it may run Python code (the DLPack
  // deleter), so it takes the GIL, from whatever thread releases the tensor last.
  auto* keep = new InputArray(a);
  auto* data = static_cast<uint8_t*>(const_cast<void*>(static_cast<const void*>(a.data())));
  std::shared_ptr<uint8_t[]> storage(data, [keep](uint8_t*) {
    if (!Py_IsInitialized()) return;  // interpreter gone: leak rather than crash at exit
    nb::gil_scoped_acquire gil;
    delete keep;
  });
  return Tensor::borrow(dtype, std::move(dims), std::move(storage));
}

nb::object dim_to_py(const Dim& d) {
  if (!d.is_known()) return nb::none();
  if (d.is_static()) return nb::int_(*d.value());
  return nb::str(d.to_string().c_str());
}

nb::object array_from_tensor(Tensor t, const std::string& framework) {
  auto* owned = new Tensor(std::move(t));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape(owned->dims().begin(), owned->dims().end());
  void* data = owned->raw();
  nb::dlpack::dtype dt = dlpack_from_dtype(owned->dtype());
  if (framework == "torch")
    return nb::ndarray<nb::pytorch>(data, shape.size(), shape.data(), owner, nullptr, dt).cast();
  return nb::ndarray<nb::numpy>(data, shape.size(), shape.data(), owner, nullptr, dt).cast();
}

}  // namespace ferrite::py
