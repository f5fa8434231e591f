// Fuzz target tensor_proto: the two ways a user hands ferrite an input tensor.
//  - bytes as a TensorProto file (ONNX test data, `ferrite run --inputs DIR`): read_tensor_file,
//    then tensor_from_proto again with external data allowed (confined to a scratch directory),
//    the CLI's tensor summary, and an encode/decode round trip that must give the same tensor.
//  - bytes starting with "--input " as an `--input NAME=random:DIMS` spec, parsed by the CLI
//    against a graph with inputs of several dtypes (tools/ferrite/cli.cpp: random_input).
#include "frontend/onnx/tensor_proto.h"

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_util.h"
#include "tools/ferrite/cli.h"

using namespace ferrite;

namespace {

constexpr std::string_view kSpecPrefix = "--input ";

const std::filesystem::path& data_dir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d = fuzz::scratch_dir() / "data";
    std::filesystem::create_directories(d);
    std::string bytes(256, '\0');
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(255 - i);
    fuzz::write_file(d / "weights.bin", bytes);
    return d;
  }();
  return dir;
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.dims() == b.dims() && a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

void round_trip(const NamedTensor& t) {
  (void)cli::tensor_summary(t.tensor);
  auto bytes = encode_tensor_file(t.name, t.tensor);
  if (!bytes) {
    fuzz::check_error(bytes.status(), "encode");
    return;
  }
  onnx::TensorProto proto;
  if (!proto.ParseFromString(*bytes)) fuzz::finding("encoded tensor does not parse back");
  auto back = tensor_from_proto(proto, {});
  if (!back) fuzz::finding("encoded tensor does not decode back: " + back.status().message());
  if (proto.name() != t.name || !same_tensor(*back, t.tensor))
    fuzz::finding("tensor changed in an encode/decode round trip: " + t.tensor.type_string());
}

// A graph with one input per common dtype, for the --input specs to name.
const Graph& spec_graph() {
  static const Graph* g = [] {
    auto* graph = new Graph();
    int k = 0;
    for (DType t : {DType::kF32, DType::kF16, DType::kI64, DType::kI32, DType::kBool, DType::kU8,
                    DType::kF8E4M3FN}) {
      Value* v =
          graph->add_value(str_cat("x", k == 0 ? "" : std::to_string(k)), TensorType{t, Shape()});
      v->is_graph_input = true;
      graph->inputs().push_back(v);
      ++k;
    }
    return graph;
  }();
  return *g;
}

// A random tensor of any size the user names is what --input promises, so the harness skips
// specs asking for more than 2^20 elements rather than measuring the allocator.
bool spec_is_small(std::string_view spec) {
  size_t colon = spec.find(':');
  if (colon == std::string_view::npos) return true;
  double elements = 1;
  uint64_t dim = 0;
  bool digits = false;
  for (char c : spec.substr(colon + 1)) {
    if (c >= '0' && c <= '9') {
      dim = std::min<uint64_t>(dim * 10 + static_cast<uint64_t>(c - '0'), uint64_t{1} << 40);
      digits = true;
    } else {
      if (digits) elements *= static_cast<double>(dim);
      dim = 0;
      digits = false;
    }
  }
  if (digits) elements *= static_cast<double>(dim);
  return elements <= double(1 << 20);
}

void fuzz_spec(const std::string& spec) {
  if (!spec_is_small(spec)) return;
  auto t = cli::random_input(spec_graph(), spec);
  if (!t) {
    fuzz::check_error(t.status(), "--input spec");
    return;
  }
  (void)cli::tensor_summary(t->tensor);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.compare(0, kSpecPrefix.size(), kSpecPrefix) == 0) {
    fuzz_spec(bytes.substr(kSpecPrefix.size()));
    return 0;
  }
  const std::filesystem::path file = fuzz::scratch_dir() / "input_0.pb";
  fuzz::write_file(file, bytes);
  auto t = read_tensor_file(file);
  if (t)
    round_trip(*t);
  else
    fuzz::check_error(t.status(), "read_tensor_file");

  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) return 0;
  TensorProtoOptions opts;
  opts.external_data_dir = data_dir();
  auto ext = tensor_from_proto(proto, opts);
  if (ext)
    round_trip({proto.name(), std::move(ext).value()});
  else
    fuzz::check_error(ext.status(), "tensor_from_proto");
  return 0;
}
