// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/), so that they can be
// regenerated when the formats or the op table change:
//   fuzz_make_seeds SOURCE_DIR OUT_DIR      (SOURCE_DIR: the repository, for tests/golden)
// and the dictionary OUT_DIR/../onnx.dict.
// onnx_import: one model per op of the op table (its first CTS case) and a model with external
//   data; passes: the golden pass, lowering and codegen models and the CTS fusion patterns;
//   tensor_proto: TensorProto files of every storage format and --input specs; compile_cache:
//   entries written by the cache itself; cpu_differential: fixed pseudo-random byte strings.
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "cache_fixture.h"
#include "cts/model_builder.h"
#include "frontend/onnx/tensor_proto.h"
#include "ops/op_schema.h"
#include "support/cleanup.h"

using namespace ferrite;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) std::fprintf(stderr, "cannot write %s\n", path.c_str());
}

std::string file_name(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
  return s;
}

void op_models(const fs::path& out) {
  for (const cts::OpCases& op : cts::op_cases()) {
    if (op.cases.empty()) continue;
    auto bytes = cts::build_model({&op.cases[0]});
    if (bytes) write(out / ("op_" + file_name(op.op) + ".onnx"), *bytes);
  }
}

// x + w, w read from 16 bytes at offset 16 of weights.bin, which the harnesses provide.
void external_data_model(const fs::path& out) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("external");
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto [k, v] : {std::pair{"location", "weights.bin"}, {"offset", "16"}, {"length", "16"}}) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  auto* x = g->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(4);
  auto* n = g->add_node();
  n->set_op_type("Add");
  n->add_input("x");
  n->add_input("w");
  n->add_output("y");
  g->add_output()->set_name("y");
  write(out / "external_data.onnx", m.SerializeAsString());
}

// Sequence and optional values (the op table's generators make tensors only): every sequence op,
// a SequenceMap body, and sequence / optional graph inputs.
void sequence_model(const fs::path& out) {
  const char* text = R"(
<ir_version: 8, opset_import: ["" : 18]>
agraph (float[4,2] x, int64 pos, seq(float[?]) s, optional(float[2]) o)
    => (float[?,2] cat, int64 len, seq(float[?]) m, bool has) {
  parts = SplitToSequence <axis = 0> (x)
  row = Constant <value = float[1,2] {7.0, 8.0}> ()
  ins = SequenceInsert (parts, row, pos)
  er = SequenceErase (ins, pos)
  len = SequenceLength (er)
  cat = ConcatFromSequence <axis = 0> (er)
  m = SequenceMap <body = g (float[?] e) => (float[?] r) { r = Neg (e) }> (s)
  has = OptionalHasElement (o)
}
)";
  onnx::ModelProto m;
  if (onnx::OnnxParser::Parse(m, text).IsOK())
    write(out / "sequence_ops.onnx", m.SerializeAsString());
}

void golden_models(const fs::path& source, const fs::path& out) {
  for (const char* dir : {"passes", "lowering", "codegen"}) {
    for (const auto& e : fs::directory_iterator(source / "tests" / "golden" / dir)) {
      std::ifstream in(e.path());
      std::stringstream ss;
      ss << in.rdbuf();
      std::string text = ss.str();
      text = text.substr(0, text.find("--- expected"));
      if (text.rfind("passes:", 0) == 0) text = text.substr(text.find('\n') + 1);
      onnx::ModelProto m;
      if (!onnx::OnnxParser::Parse(m, text.c_str()).IsOK()) continue;
      write(out / (std::string(dir) + "_" + e.path().stem().string() + ".onnx"),
            m.SerializeAsString());
    }
  }
  for (const cts::Case& c : cts::fusion_cases()) {
    auto bytes = cts::build_model({&c});
    if (bytes) write(out / (file_name(c.name) + ".onnx"), *bytes);
  }
}

void tensor_files(const fs::path& out) {
  struct Spec {
    DType dtype;
    std::vector<int64_t> dims;
  };
  const Spec specs[] = {{DType::kF32, {2, 3}}, {DType::kF16, {4}},      {DType::kBF16, {}},
                        {DType::kF64, {1}},    {DType::kI64, {3}},      {DType::kI32, {0, 5}},
                        {DType::kI8, {2, 2}},  {DType::kU8, {2, 1, 2}}, {DType::kBool, {5}},
                        {DType::kU16, {2}},    {DType::kF8E4M3FN, {3}}, {DType::kF8E5M2, {2}}};
  int k = 0;
  for (const Spec& s : specs) {
    Tensor t = Tensor::zeros(s.dtype, s.dims);
    auto* p = static_cast<uint8_t*>(t.raw());
    for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(i * 37 + 1);
    if (s.dtype == DType::kBool)
      for (size_t i = 0; i < t.nbytes(); ++i) p[i] &= 1;
    auto bytes = encode_tensor_file(str_cat("x", k), t);
    if (bytes) write(out / str_cat("raw_", dtype_name(s.dtype), ".pb"), *bytes);
    ++k;
  }
  // The typed repeated fields instead of raw_data, and external data.
  onnx::TensorProto f;
  f.set_name("x");
  f.set_data_type(onnx::TensorProto::FLOAT);
  f.add_dims(3);
  for (float v : {1.5f, -2.f, 0.25f}) f.add_float_data(v);
  write(out / "typed_float.pb", f.SerializeAsString());
  onnx::TensorProto h;
  h.set_name("h");
  h.set_data_type(onnx::TensorProto::FLOAT16);
  h.add_dims(2);
  h.add_int32_data(0x3c00);
  h.add_int32_data(0xc000);
  write(out / "typed_f16.pb", h.SerializeAsString());
  onnx::TensorProto l;
  l.set_name("i");
  l.set_data_type(onnx::TensorProto::INT64);
  l.add_dims(2);
  l.add_int64_data(-7);
  l.add_int64_data(1LL << 40);
  write(out / "typed_i64.pb", l.SerializeAsString());
  onnx::TensorProto e = f;
  e.clear_float_data();
  e.set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto [key, v] : {std::pair{"location", "weights.bin"}, {"offset", "4"}, {"length", "12"}}) {
    auto* kv = e.add_external_data();
    kv->set_key(key);
    kv->set_value(v);
  }
  write(out / "external.pb", e.SerializeAsString());
  const char* inputs[] = {"--input x=random:2x3", "--input x1=random:4,5", "--input x2=random:3",
                          "--input x4=random:1x1x2", "--input x6=random:2"};
  k = 0;
  for (const char* s : inputs) write(out / str_cat("spec_", k++, ".txt"), s);
}

int cache_entries(const fs::path& out) {
  auto tmp = TempDirectory::create("ferrite-cache-seeds-");
  if (!tmp) {
    std::fprintf(stderr, "%s\n", tmp.status().message().c_str());
    return 1;
  }
  CompileCache cache(fuzz::cache_fuzz_options(tmp->path() / "cache"));
  CacheKey key = fuzz::cache_fuzz_key();
  auto save = [&](const std::string& name) {
    fs::create_directories(out);
    fs::copy_file(cache.entry_path(key), out / (name + ".entry"),
                  fs::copy_options::overwrite_existing);
  };
  Status s = cache.put(key, "grid=4 block=1 rows=16 shared=0", "tuning record");
  if (s.is_ok()) save("blob_tuning_record");
  if (s.is_ok()) s = cache.put(key, "", "");
  if (s.is_ok()) save("blob_empty");
  fs::path artifact = tmp->path() / "kernels.so";
  std::ofstream(artifact, std::ios::binary) << fuzz::cache_fuzz_artifact();
  if (s.is_ok()) s = cache.put_file(key, artifact, "generated kernels").status();
  if (s.is_ok()) save("file_artifact");
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  return 0;
}

// libFuzzer dictionary for the ONNX targets: op, domain and attribute names of the op table, the
// names the seeds use, and ONNX / TensorProto field keys.
void dictionary(const fs::path& path) {
  std::set<std::string> words{"ai.onnx", "ferrite", "weights.bin", "location",
                              "offset",  "length",  "x",           "y",
                              "w",       "random:", "--input ",    "materialize"};
  for (const OpSchema& s : OpRegistry::global().all()) {
    words.insert(s.name);
    if (!s.domain.empty()) words.insert(s.domain);
    for (const auto& a : s.attrs) words.insert(a.name);
  }
  std::string text = "# Generated by fuzz_make_seeds (tests/fuzz/make_seeds.cpp).\n";
  for (const std::string& w : words) text += "\"" + w + "\"\n";
  write(path, text);
}

void differential_bytes(const fs::path& out) {
  std::mt19937_64 rng(12);
  for (int k = 0; k < 24; ++k) {
    std::string bytes(64, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    write(out / str_cat("random_", k, ".bin"), bytes);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fuzz_make_seeds SOURCE_DIR OUT_DIR\n");
    return 2;
  }
  fs::path source = argv[1], out = argv[2];
  dictionary(out.parent_path() / "onnx.dict");
  op_models(out / "onnx_import");
  external_data_model(out / "onnx_import");
  sequence_model(out / "onnx_import");
  golden_models(source, out / "passes");
  tensor_files(out / "tensor_proto");
  differential_bytes(out / "cpu_differential");
  return cache_entries(out / "compile_cache");
}
