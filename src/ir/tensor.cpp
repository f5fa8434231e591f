#include <atomic>
#include "ir/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "support/checked_math.h"

namespace ferrite {

namespace {
std::shared_ptr<uint8_t[]> allocate_storage(size_t bytes, bool zero) {
  // 64-byte alignment so vectorised kernels may assume it; at least 1 byte so raw() is non-null.
  size_t rounded = ((bytes + 63) / 64) * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) return nullptr;
  if (zero) {
    std::memset(p, 0, rounded);
  } else if (rounded > bytes) {
    std::memset(static_cast<uint8_t*>(p) + bytes, 0, rounded - bytes);  // padding stays defined
  }
  return std::shared_ptr<uint8_t[]>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
}
}  // namespace

Expected<Tensor> Tensor::create(DType dtype, std::vector<int64_t> dims) {
  return create_storage(dtype, std::move(dims), /*zero=*/true);
}

Expected<Tensor> Tensor::create_uninitialized(DType dtype, std::vector<int64_t> dims) {
  return create_storage(dtype, std::move(dims), /*zero=*/false);
}

Expected<Tensor> Tensor::create_storage(DType dtype, std::vector<int64_t> dims, bool zero) {
  if (dtype == DType::kUndefined) return err("tensor of undefined dtype");
  auto n = checked_numel(dims);
  if (!n) return err("invalid tensor dims ", dims_to_string(dims), " (negative or overflowing)");
  // With a zero dim the element count is 0, but strides over the other dims must still fit.
  int64_t stride_product = 1;
  for (int64_t d : dims) {
    auto p = checked_mul(stride_product, std::max<int64_t>(d, 1));
    if (!p) return err("invalid tensor dims ", dims_to_string(dims), " (strides overflow)");
    stride_product = *p;
  }
  auto bytes = checked_mul(*n, static_cast<int64_t>(dtype_size(dtype)));
  if (!bytes || *bytes > (int64_t{1} << 46))
    return err("tensor ", dims_to_string(dims), " is too large to allocate");
  Tensor t;
  t.storage_ = allocate_storage(static_cast<size_t>(*bytes), zero);
  if (!t.storage_)
    return err("out of memory allocating ", *bytes, " bytes for tensor ", dims_to_string(dims));
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  t.numel_ = *n;
  return t;
}

Expected<Tensor> Tensor::over_storage(DType dtype, std::vector<int64_t> dims,
                                      std::shared_ptr<uint8_t[]> storage) {
  if (dtype == DType::kUndefined) return err("tensor of undefined dtype");
  auto n = checked_numel(dims);
  if (!n) return err("invalid tensor dims ", dims_to_string(dims), " (negative or overflowing)");
  if (!storage) return err("tensor ", dims_to_string(dims), " over null storage");
  Tensor t;
  t.storage_ = std::move(storage);
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  t.numel_ = *n;
  return t;
}

Tensor Tensor::zeros(DType dtype, std::vector<int64_t> dims) {
  auto t = create(dtype, std::move(dims));
  FERRITE_CHECK(t.has_value());
  return std::move(t).value();
}

Expected<Tensor> Tensor::borrow(DType dtype, std::vector<int64_t> dims,
                                std::shared_ptr<uint8_t[]> storage) {
  static std::atomic<uint64_t> next_id{1};
  FERRITE_ASSIGN_OR_RETURN(Tensor t, over_storage(dtype, std::move(dims), std::move(storage)));
  t.borrow_id_ = next_id.fetch_add(1, std::memory_order_relaxed);
  return t;
}

Tensor Tensor::reshaped(std::vector<int64_t> dims) const {
  Tensor t = *this;
  auto n = checked_numel(dims);
  FERRITE_CHECK(n && *n == numel_);
  t.dims_ = std::move(dims);
  return t;
}

Expected<Tensor> Tensor::view(std::vector<int64_t> dims) const {
  auto n = checked_numel(dims);
  if (!n || *n != numel_)
    return err("cannot view ", type_string(), " (", numel_, " elements) as ", dims_to_string(dims));
  Tensor t = *this;
  t.dims_ = std::move(dims);
  return t;
}

Expected<Tensor> Tensor::try_clone() const {
  FERRITE_ASSIGN_OR_RETURN(Tensor t, create_uninitialized(dtype_, dims_));
  if (nbytes()) std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

Tensor Tensor::clone() const {
  auto t = try_clone();
  FERRITE_CHECK(t.has_value());
  return std::move(t).value();
}

int64_t Tensor::int_at(int64_t i) const {
  int64_t out = 0;
  bool ok = visit_any_dtype(dtype_, [&]<class T>() {
    if constexpr (is_float_v<T> || is_float8_v<T>) {
      // Saturating and NaN -> 0: a float cast to int64 out of range is undefined behaviour.
      double d = static_cast<double>(static_cast<compute_t<T>>(data<T>()[i]));
      if (std::isnan(d)) {
        out = 0;
      } else if (d >= 0x1p63) {
        out = std::numeric_limits<int64_t>::max();
      } else if (d < -0x1p63) {
        out = std::numeric_limits<int64_t>::min();
      } else {
        out = static_cast<int64_t>(d);
      }
    } else {
      out = static_cast<int64_t>(data<T>()[i]);
    }
  });
  FERRITE_CHECK(ok);
  return out;
}

double Tensor::double_at(int64_t i) const {
  double out = 0;
  bool ok = visit_any_dtype(dtype_, [&]<class T>() { out = convert<double>(data<T>()[i]); });
  FERRITE_CHECK(ok);
  return out;
}

std::vector<int64_t> Tensor::to_int_vector() const {
  std::vector<int64_t> v(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) v[i] = int_at(i);
  return v;
}

Tensor Tensor::sequence(DType elem, std::vector<Tensor> items) {
  Tensor t;
  t.dtype_ = elem;
  t.kind_ = ValueKind::kSequence;
  t.items_ = std::make_shared<const std::vector<Tensor>>(std::move(items));
  return t;
}

Tensor Tensor::optional(ValueKind kind, DType elem, std::optional<Tensor> value) {
  FERRITE_CHECK(is_optional_kind(kind));
  Tensor t;
  t.dtype_ = elem;
  t.kind_ = kind;
  std::vector<Tensor> items;
  if (value) items.push_back(std::move(*value));
  t.items_ = std::make_shared<const std::vector<Tensor>>(std::move(items));
  return t;
}

const std::vector<Tensor>& Tensor::items() const {
  static const std::vector<Tensor> kNone;
  return items_ ? *items_ : kNone;
}

std::string Tensor::type_string() const {
  switch (kind_) {
    case ValueKind::kTensor:
      return std::string(dtype_name(dtype_)) + dims_to_string(dims_);
    case ValueKind::kSequence:
      return str_cat("seq(", dtype_name(dtype_), ")[", items().size(), " items]");
    default:
      if (items().empty())
        return str_cat(value_kind_prefix(kind_), dtype_name(dtype_),
                       kind_ == ValueKind::kOptionalSequence ? "))" : ")", "[none]");
      return str_cat("optional(", items()[0].type_string(), ")");
  }
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * dims[i + 1];
  return s;
}

std::string dims_to_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

}  // namespace ferrite
