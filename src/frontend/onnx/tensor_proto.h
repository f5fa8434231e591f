// Conversion between ONNX TensorProto and ferrite Tensors, with every size checked: a model file
// or input file is untrusted.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "support/status.h"

namespace onnx {
class TensorProto;
}

namespace ferrite {

struct TensorProtoOptions {
  // Directory that external data must live in; empty forbids external data.
  std::filesystem::path external_data_dir;
  // How diagnostics name the tensor ("initializer 'w'"); empty: "tensor '<proto name>'".
  std::string label;
};

// `name` with control characters escaped (\xNN) and very long names shortened, so that a
// diagnostic quoting an untrusted name stays one readable line.
std::string printable_name(const std::string& name);

// "8 (string)": an ONNX TensorProto.DataType value with its name, for messages.
std::string onnx_dtype_description(int onnx_type);

// Refuses dims that are negative or whose element count or row-major strides overflow int64
// (a zero dim makes the count 0, but the strides of the other dims must still be representable).
// `what` names the tensor in the message.
Status check_dims(const std::string& what, const std::vector<int64_t>& dims);

Expected<Tensor> tensor_from_proto(const onnx::TensorProto& proto, const TensorProtoOptions& opts);
void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* proto);

// Reads / writes a serialized TensorProto file (the layout of ONNX test data sets).
struct NamedTensor {
  std::string name;
  Tensor tensor;
};
Expected<NamedTensor> read_tensor_file(const std::filesystem::path& path);
// Reads a file of a value of `kind` (ir/value_kind.h): a TensorProto, or for sequences and
// optionals the SequenceProto / OptionalProto of ONNX test data. `elem` is the declared element
// dtype, which an empty sequence or optional does not carry.
Expected<NamedTensor> read_value_file(const std::filesystem::path& path, ValueKind kind,
                                      DType elem);
// The bytes of a TensorProto file holding `t` named `name` (a SequenceProto or OptionalProto for
// a sequence or optional, which read_value_file reads back).
Expected<std::string> encode_tensor_file(const std::string& name, const Tensor& t);
// Writes the file atomically (support/result_dir.h): checked, fsynced, renamed into place.
Status write_tensor_file(const std::filesystem::path& path, const std::string& name,
                         const Tensor& t);

// Reads a whole file, refusing files larger than `max_bytes`.
Expected<std::string> read_file_bytes(const std::filesystem::path& path, size_t max_bytes);

}  // namespace ferrite
