// Helpers shared by the unit tests: building ONNX models in-process, temp directories, running
// models on the reference device and checking error messages.
#pragma once

#include <gtest/gtest.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "frontend/onnx/importer.h"
#include "runtime/session.h"

namespace ferrite::testing {

namespace fs = std::filesystem;

// ONNX TensorProto.DataType values used by the tests.
enum OnnxType : int {
  kOnnxFloat = 1,
  kOnnxUint8 = 2,
  kOnnxInt32 = 6,
  kOnnxInt64 = 7,
  kOnnxString = 8,
  kOnnxBool = 9,
  kOnnxFloat16 = 10,
  kOnnxDouble = 11,
};

// A dim of a declared value: a number (dim_value), a name (dim_param) or unknown (nullptr_t).
using DimSpec = std::variant<int64_t, std::string, std::nullptr_t>;

class ModelBuilder {
 public:
  explicit ModelBuilder(int opset = 17) {
    model_.set_ir_version(8);
    model_.set_producer_name("ferrite-tests");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    graph()->set_name("test");
  }
  onnx::ModelProto& model() { return model_; }
  onnx::GraphProto* graph() { return model_.mutable_graph(); }

  onnx::ValueInfoProto* input(const std::string& name, int elem_type, std::vector<DimSpec> dims) {
    auto* vi = graph()->add_input();
    set_type(vi, name, elem_type, dims);
    return vi;
  }
  // A graph input without a shape (unknown rank).
  onnx::ValueInfoProto* input_unranked(const std::string& name, int elem_type) {
    auto* vi = graph()->add_input();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem_type);
    return vi;
  }
  onnx::ValueInfoProto* output(const std::string& name, int elem_type = kOnnxFloat) {
    auto* vi = graph()->add_output();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem_type);
    return vi;
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> inputs,
                        std::vector<std::string> outputs, const std::string& name = "") {
    auto* n = graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& i : inputs) n->add_input(i);
    for (auto& o : outputs) n->add_output(o);
    return n;
  }
  onnx::TensorProto* init_f32(const std::string& name, std::vector<int64_t> dims,
                              const std::vector<float>& values) {
    auto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(kOnnxFloat);
    for (int64_t d : dims) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
    return t;
  }
  onnx::TensorProto* init_raw(const std::string& name, int data_type, std::vector<int64_t> dims,
                              const std::string& raw) {
    auto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(data_type);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(raw);
    return t;
  }
  std::string bytes() const {
    std::string s;
    EXPECT_TRUE(model_.SerializeToString(&s));
    return s;
  }

  static void set_type(onnx::ValueInfoProto* vi, const std::string& name, int elem_type,
                       const std::vector<DimSpec>& dims) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    auto* shape = tt->mutable_shape();
    for (const auto& d : dims) {
      auto* dim = shape->add_dim();
      if (auto* v = std::get_if<int64_t>(&d)) dim->set_dim_value(*v);
      if (auto* p = std::get_if<std::string>(&d)) dim->set_dim_param(*p);
    }
  }

 private:
  onnx::ModelProto model_;
};

inline void add_int_attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

inline std::string f32_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("ferrite_unit_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& s) const { return path_ / s; }

  fs::path write(const std::string& name, const std::string& bytes) const {
    fs::path p = path_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good()) << p;
    return p;
  }

 private:
  fs::path path_;
};

// Checks that `status` failed with a message containing every fragment (and, if given, code).
inline ::testing::AssertionResult failed_with(const Status& status,
                                              std::initializer_list<std::string> fragments,
                                              StatusCode code = StatusCode::kError) {
  if (status.is_ok()) return ::testing::AssertionFailure() << "expected an error, got OK";
  if (status.code() != code)
    return ::testing::AssertionFailure() << "wrong status code " << static_cast<int>(status.code())
                                         << " for: " << status.message();
  for (const auto& f : fragments)
    if (status.message().find(f) == std::string::npos)
      return ::testing::AssertionFailure() << "message lacks '" << f << "': " << status.message();
  if (status.message().find('\n') != std::string::npos)
    return ::testing::AssertionFailure() << "message spans lines: " << status.message();
  return ::testing::AssertionSuccess();
}

template <class T>
::testing::AssertionResult failed_with(const Expected<T>& e,
                                       std::initializer_list<std::string> fragments,
                                       StatusCode code = StatusCode::kError) {
  if (e.has_value()) return ::testing::AssertionFailure() << "expected an error, got a value";
  return failed_with(e.status(), fragments, code);
}

inline Expected<std::unique_ptr<Graph>> import_bytes(const std::string& bytes,
                                                     const fs::path& dir = {}) {
  return import_onnx_bytes(bytes, dir);
}

inline Expected<std::unique_ptr<Session>> session_from(const std::string& model_bytes,
                                                       const fs::path& dir = {}) {
  FERRITE_ASSIGN_OR_RETURN(auto g, import_onnx_bytes(model_bytes, dir));
  return Session::from_graph(std::move(g), "reference");
}

// Imports and runs a model; fails the test on import errors, returns the run result.
inline Expected<std::vector<Tensor>> run_model(const std::string& model_bytes,
                                               const std::vector<Session::NamedInput>& inputs) {
  auto s = session_from(model_bytes);
  if (!s) return s.status();
  return (*s)->run(inputs);
}

template <class T>
std::vector<T> values_of(const Tensor& t) {
  auto s = t.span<T>();
  return std::vector<T>(s.begin(), s.end());
}

// The serialized ModelProto of a model written in ONNX's textual syntax (onnx/defs/parser.h);
// a test failure when it does not parse.
inline std::string text_bytes(const std::string& text) {
  onnx::ModelProto model;
  auto status = onnx::OnnxParser::Parse(model, text.c_str());
  EXPECT_TRUE(status.IsOK()) << status.ErrorMessage();
  std::string bytes;
  model.SerializeToString(&bytes);
  return bytes;
}

// Imports a model written in ONNX's textual syntax; null (with a test failure) when it does not
// parse or import.
inline std::unique_ptr<Graph> parse_onnx_text(const std::string& text) {
  auto g = import_onnx_bytes(text_bytes(text), "");
  EXPECT_TRUE(g) << g.status().message();
  return g ? std::move(*g) : nullptr;
}

}  // namespace ferrite::testing
