#include "frontend/onnx/tensor_proto.h"

#include <onnx/onnx-data_pb.h>  // SequenceProto, OptionalProto (test data)
#include <onnx/onnx_pb.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <new>

#include "frontend/onnx/external_data.h"
#include "support/checked_math.h"
#include "support/result_dir.h"

namespace ferrite {

namespace {

template <class T, class Src>
void copy_field(Tensor& t, const Src& field) {
  T* out = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = static_cast<T>(field.Get(static_cast<int>(i)));
}

// 16-bit floats stored in int32_data hold the raw bits.
template <class T>
void copy_bits16(Tensor& t, const google::protobuf::RepeatedField<int32_t>& field) {
  T* out = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i)
    out[i].bits = static_cast<uint16_t>(field.Get(static_cast<int>(i)));
}

Status fill_from_typed_fields(const onnx::TensorProto& p, const std::string& what, Tensor& t) {
  auto expect = [&](int64_t got, const char* field) -> Status {
    if (got != t.numel())
      return err(what, ": ", field, " has ", got, " values, but dims ", dims_to_string(t.dims()),
                 " need ", t.numel());
    return Status::ok();
  };
  switch (t.dtype()) {
    case DType::kF32:
      FERRITE_RETURN_IF_ERROR(expect(p.float_data_size(), "float_data"));
      copy_field<float>(t, p.float_data());
      break;
    case DType::kF64:
      FERRITE_RETURN_IF_ERROR(expect(p.double_data_size(), "double_data"));
      copy_field<double>(t, p.double_data());
      break;
    case DType::kI64:
      FERRITE_RETURN_IF_ERROR(expect(p.int64_data_size(), "int64_data"));
      copy_field<int64_t>(t, p.int64_data());
      break;
    case DType::kU32:
      FERRITE_RETURN_IF_ERROR(expect(p.uint64_data_size(), "uint64_data"));
      copy_field<uint32_t>(t, p.uint64_data());
      break;
    case DType::kU64:
      FERRITE_RETURN_IF_ERROR(expect(p.uint64_data_size(), "uint64_data"));
      copy_field<uint64_t>(t, p.uint64_data());
      break;
    case DType::kF16:
      FERRITE_RETURN_IF_ERROR(expect(p.int32_data_size(), "int32_data"));
      copy_bits16<Half>(t, p.int32_data());
      break;
    case DType::kBF16:
      FERRITE_RETURN_IF_ERROR(expect(p.int32_data_size(), "int32_data"));
      copy_bits16<BFloat16>(t, p.int32_data());
      break;
    case DType::kF8E4M3FN:
    case DType::kF8E4M3FNUZ:
    case DType::kF8E5M2:
    case DType::kF8E5M2FNUZ: {
      // One bit pattern per int32_data entry, like the 16-bit floats.
      FERRITE_RETURN_IF_ERROR(expect(p.int32_data_size(), "int32_data"));
      auto* out = static_cast<uint8_t*>(t.raw());
      for (int64_t i = 0; i < t.numel(); ++i) {
        int32_t v = p.int32_data(static_cast<int>(i));
        if (v < 0 || v > 0xFF)
          return err(what, ": int32_data[", i, "] = ", v, " is not a ", dtype_name(t.dtype()),
                     " bit pattern");
        out[i] = static_cast<uint8_t>(v);
      }
      break;
    }
    default: {
      FERRITE_RETURN_IF_ERROR(expect(p.int32_data_size(), "int32_data"));
      bool ok = visit_dtype(t.dtype(), [&]<class T>() {
        if constexpr (std::is_integral_v<T>) copy_field<T>(t, p.int32_data());
      });
      FERRITE_CHECK(ok);
    }
  }
  return Status::ok();
}

// Bytes copied into a bool tensor must be 0 or 1: any other byte is not a valid C++ bool.
void normalize_bools(Tensor& t) {
  if (t.dtype() != DType::kBool || t.numel() == 0) return;
  auto* p = static_cast<uint8_t*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = p[i] != 0;
}

Expected<Tensor> tensor_from_bytes(DType dtype, const std::vector<int64_t>& dims,
                                   const std::string& bytes) {
  FERRITE_ASSIGN_OR_RETURN(Tensor t, Tensor::create(dtype, dims));
  if (t.nbytes()) std::memcpy(t.raw(), bytes.data(), t.nbytes());
  normalize_bools(t);
  return t;
}

}  // namespace

std::string printable_name(const std::string& name) {
  constexpr size_t kMaxShown = 200;
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    if (i == kMaxShown) {
      out += str_cat("...(", name.size(), " bytes)");
      break;
    }
    auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string onnx_dtype_description(int onnx_type) {
  static const char* const kNames[] = {
      "undefined",      "float",      "uint8",          "int8",       "uint16",   "int16",
      "int32",          "int64",      "string",         "bool",       "float16",  "double",
      "uint32",         "uint64",     "complex64",      "complex128", "bfloat16", "float8e4m3fn",
      "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4",      "int4",     "float4e2m1"};
  if (onnx_type >= 0 && onnx_type < static_cast<int>(std::size(kNames)))
    return str_cat(onnx_type, " (", kNames[onnx_type], ")");
  return std::to_string(onnx_type);
}

Status check_dims(const std::string& what, const std::vector<int64_t>& dims) {
  for (int64_t d : dims)
    if (d < 0) return err(what, ": negative dimension in ", dims_to_string(dims));
  int64_t extent = 1;  // product of the non-zero dims: the largest stride times its dim
  for (int64_t d : dims) {
    auto r = checked_mul(extent, d == 0 ? 1 : d);
    if (!r) return err(what, ": element count of ", dims_to_string(dims), " overflows int64");
    extent = *r;
  }
  return Status::ok();
}

Expected<Tensor> tensor_from_proto(const onnx::TensorProto& p, const TensorProtoOptions& opts) {
  const std::string what =
      opts.label.empty() ? str_cat("tensor '", printable_name(p.name()), "'") : opts.label;
  auto dtype = dtype_from_onnx(p.data_type());
  if (!dtype) {
    if (p.data_type() > 0 && p.data_type() <= 23)
      return unsupported(what, ": data_type ", onnx_dtype_description(p.data_type()),
                         " is not supported");
    return err(what, ": invalid data_type ", p.data_type());
  }
  std::vector<int64_t> dims(p.dims().begin(), p.dims().end());
  FERRITE_RETURN_IF_ERROR(check_dims(what, dims));
  auto n = checked_numel(dims);
  FERRITE_CHECK(n.has_value());  // check_dims bounds the count
  auto nbytes = checked_mul(*n, static_cast<int64_t>(dtype_size(*dtype)));
  if (!nbytes) return err(what, ": byte size of ", dims_to_string(dims), " overflows");
  if (p.has_segment()) return err(what, ": segmented tensors are not supported");

  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    if (opts.external_data_dir.empty()) return err(what, ": external data is not allowed here");
    FERRITE_ASSIGN_OR_RETURN(ExternalDataRange range,
                             locate_external_data(p, what, opts.external_data_dir, *nbytes));
    if (*dtype != DType::kBool) {  // bools are normalised in place, so they are read
      if (auto mapped = map_external_data(range))
        return Tensor::over_storage(*dtype, dims, std::move(mapped));
    }
    // Allocated only after the range is known to exist in a real file.
    FERRITE_ASSIGN_OR_RETURN(Tensor t, Tensor::create(*dtype, dims));
    FERRITE_RETURN_IF_ERROR(read_external_data(range, what, t.raw()));
    normalize_bools(t);
    return t;
  }
  // Refuse absurd sizes before allocating: data must actually be present in the file.
  if (p.has_raw_data()) {
    if (static_cast<int64_t>(p.raw_data().size()) != *nbytes)
      return err(what, ": raw_data has ", p.raw_data().size(), " bytes, but ", dtype_name(*dtype),
                 dims_to_string(dims), " needs ", *nbytes);
    return tensor_from_bytes(*dtype, dims, p.raw_data());
  }
  int64_t typed_count = int64_t{p.float_data_size()} + p.int32_data_size() + p.int64_data_size() +
                        p.double_data_size() + p.uint64_data_size();
  if (typed_count != *n)
    return err(
        what, ": has ", typed_count, " values, but dims ", dims_to_string(dims), " need ", *n,
        (p.doc_string() == "materialize" ? " (weights were stripped: materialize the model first)"
                                         : ""));
  FERRITE_ASSIGN_OR_RETURN(Tensor t, Tensor::create(*dtype, dims));
  FERRITE_RETURN_IF_ERROR(fill_from_typed_fields(p, what, t));
  return t;
}

void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p) {
  p->Clear();
  p->set_name(name);
  p->set_data_type(dtype_to_onnx(t.dtype()));
  for (int64_t d : t.dims()) p->add_dims(d);
  p->set_raw_data(t.raw(), t.nbytes());
}

Expected<std::string> read_file_bytes(const std::filesystem::path& path, size_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return err("'", path.string(), "' is not a readable file");
  auto size = std::filesystem::file_size(path, ec);
  if (ec) return err("cannot stat '", path.string(), "': ", ec.message());
  if (size > max_bytes)
    return err("'", path.string(), "' is ", size, " bytes, larger than the limit of ", max_bytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) return err("cannot open '", path.string(), "'");
  std::string bytes;
  try {
    bytes.resize(size);
  } catch (const std::bad_alloc&) {
    return err("out of memory reading '", path.string(), "' (", size, " bytes)");
  }
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  if (static_cast<size_t>(in.gcount()) != size) return err("short read from '", path.string(), "'");
  return bytes;
}

Expected<NamedTensor> read_tensor_file(const std::filesystem::path& path) {
  FERRITE_ASSIGN_OR_RETURN(std::string bytes, read_file_bytes(path, size_t{1} << 31));
  onnx::TensorProto proto;
  if (bytes.empty() || !proto.ParseFromString(bytes))
    return err("'", path.string(), "' is not a valid TensorProto file");
  auto t = tensor_from_proto(proto, {});
  if (!t) return t.status().with_context(path.string());
  return NamedTensor{proto.name(), std::move(t).value()};
}

namespace {
Expected<Tensor> sequence_from_proto(const onnx::SequenceProto& sp, DType elem,
                                     const std::string& where) {
  // An empty sequence may leave its elem_type undefined.
  if (sp.elem_type() != onnx::SequenceProto::TENSOR &&
      !(sp.elem_type() == onnx::SequenceProto::UNDEFINED && sp.tensor_values_size() == 0))
    return unsupported(where, ": a sequence of non-tensors (elem_type ", sp.elem_type(),
                       ") is not supported");
  std::vector<Tensor> items;
  for (const auto& tp : sp.tensor_values()) {
    FERRITE_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(tp, {}));
    if (elem != DType::kUndefined && t.dtype() != elem)
      return err(where, ": sequence element is ", t.type_string(), ", declared ", dtype_name(elem));
    elem = t.dtype();
    items.push_back(std::move(t));
  }
  return Tensor::sequence(elem, std::move(items));
}
}  // namespace

Expected<NamedTensor> read_value_file(const std::filesystem::path& path, ValueKind kind,
                                      DType elem) {
  if (kind == ValueKind::kTensor) return read_tensor_file(path);
  FERRITE_ASSIGN_OR_RETURN(std::string bytes, read_file_bytes(path, size_t{1} << 31));
  const std::string where = path.string();
  // Protobuf parses a message of another type without complaint when the field numbers happen to
  // fit (a TensorProto reads as an empty SequenceProto); its other fields remain as unknown ones.
  if (kind == ValueKind::kSequence) {
    onnx::SequenceProto sp;
    if (!sp.ParseFromString(bytes) || !sp.unknown_fields().empty())
      return err("'", where, "' is not a valid SequenceProto file");
    FERRITE_ASSIGN_OR_RETURN(Tensor t, sequence_from_proto(sp, elem, where));
    return NamedTensor{sp.name(), std::move(t)};
  }
  onnx::OptionalProto op;
  if (!op.ParseFromString(bytes) || !op.unknown_fields().empty())
    return err("'", where, "' is not a valid OptionalProto file");
  std::optional<Tensor> value;
  if (op.has_tensor_value()) {
    if (kind != ValueKind::kOptionalTensor)
      return err(where, ": optional holds a tensor, declared a sequence");
    FERRITE_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(op.tensor_value(), {}));
    value = std::move(t);
  } else if (op.has_sequence_value()) {
    if (kind != ValueKind::kOptionalSequence)
      return err(where, ": optional holds a sequence, declared a tensor");
    FERRITE_ASSIGN_OR_RETURN(Tensor t, sequence_from_proto(op.sequence_value(), elem, where));
    value = std::move(t);
  }
  if (value && elem == DType::kUndefined) elem = value->dtype();
  return NamedTensor{op.name(), Tensor::optional(kind, elem, std::move(value))};
}

namespace {
void sequence_to_proto(const Tensor& seq, onnx::SequenceProto* sp) {
  sp->set_elem_type(onnx::SequenceProto::TENSOR);
  for (const Tensor& item : seq.items()) tensor_to_proto(item, "", sp->add_tensor_values());
}

// A sequence as a SequenceProto, an optional as an OptionalProto (the layout of ONNX test data).
Expected<std::string> encode_value_file(const std::string& name, const Tensor& t) {
  std::string bytes;
  bool ok = false;
  if (t.kind() == ValueKind::kSequence) {
    onnx::SequenceProto sp;
    sp.set_name(name);
    sequence_to_proto(t, &sp);
    ok = sp.SerializeToString(&bytes);
  } else {
    onnx::OptionalProto op;
    op.set_name(name);
    bool seq = t.kind() == ValueKind::kOptionalSequence;
    op.set_elem_type(seq ? onnx::OptionalProto::SEQUENCE : onnx::OptionalProto::TENSOR);
    if (!t.items().empty()) {
      if (seq)
        sequence_to_proto(t.items()[0], op.mutable_sequence_value());
      else
        tensor_to_proto(t.items()[0], "", op.mutable_tensor_value());
    }
    ok = op.SerializeToString(&bytes);
  }
  if (!ok) return err("value '", name, "' (", t.type_string(), ") cannot be encoded");
  return bytes;
}
}  // namespace

Expected<std::string> encode_tensor_file(const std::string& name, const Tensor& t) {
  if (!t.is_tensor()) return encode_value_file(name, t);
  onnx::TensorProto proto;
  tensor_to_proto(t, name, &proto);
  std::string bytes;
  // Protobuf messages are limited to 2 GiB; larger tensors fail here rather than on disk.
  if (!proto.SerializeToString(&bytes))
    return err("tensor '", name, "' (", t.nbytes(), " bytes) cannot be encoded as a TensorProto");
  return bytes;
}

Status write_tensor_file(const std::filesystem::path& path, const std::string& name,
                         const Tensor& t) {
  FERRITE_ASSIGN_OR_RETURN(std::string bytes, encode_tensor_file(name, t));
  return write_file_atomic(path, bytes);
}

}  // namespace ferrite
