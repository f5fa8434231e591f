// ferrite-materialize: regenerates the stripped weights of the shared model zoo, bit-exactly, by
// the recipe in shared/models/README.md (crc32 seed, splitmix64, uniform(mean, std)).
//
//   ferrite-materialize IN_CASE_DIR OUT_CASE_DIR
// writes OUT/model.onnx with every stripped initializer filled and links OUT/test_data_set_*
// to the input's data sets, so OUT is a complete ONNX test case.
#include <onnx/onnx_pb.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "frontend/onnx/tensor_proto.h"
#include "ir/dtype.h"
#include "support/result_dir.h"

namespace fs = std::filesystem;
using ferrite::BFloat16;
using ferrite::Half;

namespace {

uint32_t crc32(const std::string& s) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char ch : s) {
    c ^= ch;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct Use {
  const onnx::NodeProto* node;
  int index;
};

std::pair<double, double> mean_std(const std::vector<int64_t>& dims, const std::vector<Use>& uses) {
  for (const auto& u : uses) {
    const std::string& op = u.node->op_type();
    if (op == "BatchNormalization") {
      if (u.index == 4) return {1.0, 0.5 / std::sqrt(3.0)};
      if (u.index == 1) return {1.0, 0.1};
      return {0.0, 0.1};
    }
    if ((op == "LayerNormalization" || op == "InstanceNormalization" ||
         op == "GroupNormalization") && u.index == 1)
      return {1.0, 0.1};
  }
  auto prod_tail = [&] {
    int64_t p = 1;
    for (size_t i = 1; i < dims.size(); ++i) p *= dims[i];
    return p;
  };
  int64_t fan_in = -1;
  for (const auto& u : uses) {
    const std::string& op = u.node->op_type();
    if (op == "Conv" && u.index == 1 && dims.size() >= 3) fan_in = prod_tail();
    else if (op == "MatMul" && u.index == 1 && dims.size() == 2) fan_in = dims[0];
    else if (op == "Gemm" && u.index == 1 && dims.size() == 2) {
      bool tb = false;
      for (const auto& a : u.node->attribute())
        if (a.name() == "transB") tb = a.i() != 0;
      fan_in = tb ? dims[1] : dims[0];
    } else if (op == "Gather" && u.index == 0) fan_in = 2500;
    if (fan_in >= 0) break;
  }
  if (fan_in < 0) fan_in = dims.size() >= 2 ? prod_tail() : 100;
  return {0.0, 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(fan_in, 1)))};
}

template <class T>
std::string fill(const std::string& name, int64_t n, double mean, double std) {
  std::string raw(static_cast<size_t>(n) * sizeof(T), '\0');
  T* out = reinterpret_cast<T*>(raw.data());
  uint64_t seed = crc32(name);
  for (int64_t i = 0; i < n; ++i) {
    double u = static_cast<double>(splitmix64((seed << 32) + static_cast<uint64_t>(i)) >> 11) *
               0x1.0p-53;
    double v = mean + std * std::sqrt(3.0) * (2.0 * u - 1.0);
    if constexpr (std::is_same_v<T, Half>) out[i] = Half(static_cast<float>(v));
    else out[i] = static_cast<T>(v);
  }
  return raw;
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Regenerates the stripped weights of a shared model zoo case, bit-exactly, by the recipe in\n"
      "shared/models/README.md, into a complete ONNX test case.",
      "ferrite-materialize"};
  std::string in_dir, out_dir;
  app.add_option("IN_CASE_DIR", in_dir, "the stripped case: model.onnx and test_data_set_*/")
      ->required();
  app.add_option("OUT_CASE_DIR", out_dir,
                 "written: model.onnx with every stripped initializer filled, and links to\n"
                 "IN_CASE_DIR's data sets")
      ->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s (see --help)\n", e.what());
    return 2;
  }
  fs::path in = in_dir, out = out_dir;
  auto bytes = ferrite::read_file_bytes(in / "model.onnx", size_t{2} << 30);
  if (!bytes) return fail(bytes.status().message());
  onnx::ModelProto model;
  if (!model.ParseFromString(*bytes)) return fail("cannot parse " + (in / "model.onnx").string());
  auto* g = model.mutable_graph();
  std::map<std::string, std::vector<Use>> uses;
  for (const auto& n : g->node())
    for (int i = 0; i < n.input_size(); ++i) uses[n.input(i)].push_back({&n, i});
  int filled = 0;
  for (auto& init : *g->mutable_initializer()) {
    int dt = init.data_type();
    if (dt != onnx::TensorProto::FLOAT && dt != onnx::TensorProto::FLOAT16 &&
        dt != onnx::TensorProto::DOUBLE)
      continue;
    std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    if (n < 64 && init.doc_string() != "materialize") continue;
    auto [mean, std] = mean_std(dims, uses[init.name()]);
    std::string raw = dt == onnx::TensorProto::FLOAT    ? fill<float>(init.name(), n, mean, std)
                      : dt == onnx::TensorProto::DOUBLE ? fill<double>(init.name(), n, mean, std)
                                                        : fill<Half>(init.name(), n, mean, std);
    std::string name = init.name();
    init.Clear();
    init.set_name(name);
    init.set_data_type(dt);
    for (int64_t d : dims) init.add_dims(d);
    init.set_raw_data(raw);
    ++filled;
  }
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return fail("cannot create " + out.string());
  std::string encoded;
  if (!model.SerializeToString(&encoded))
    return fail("cannot encode " + (out / "model.onnx").string());
  if (ferrite::Status st = ferrite::write_file_atomic(out / "model.onnx", encoded); !st)
    return fail(st.message());
  for (const auto& e : fs::directory_iterator(in)) {
    if (!e.is_directory()) continue;
    fs::path link = out / e.path().filename();
    fs::remove_all(link, ec);
    fs::create_directory_symlink(fs::absolute(e.path()), link, ec);
    if (ec) return fail("cannot link " + link.string() + ": " + ec.message());
  }
  std::printf("materialized %d initializers into %s\n", filled, (out / "model.onnx").string().c_str());
  return 0;
}
