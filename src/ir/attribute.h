// Node attributes (the ONNX attribute kinds ferrite supports; subgraphs are refused at import).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "ir/tensor.h"

namespace ferrite {

enum class AttrType { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor };
const char* attr_type_name(AttrType t);

class Attribute {
 public:
  using Storage = std::variant<int64_t, float, std::string, std::vector<int64_t>,
                               std::vector<float>, std::vector<std::string>, Tensor>;
  Attribute() : v_(int64_t{0}) {}
  Attribute(int64_t v) : v_(v) {}                       // NOLINT
  Attribute(int v) : v_(int64_t{v}) {}                  // NOLINT
  Attribute(float v) : v_(v) {}                         // NOLINT
  Attribute(std::string v) : v_(std::move(v)) {}        // NOLINT
  Attribute(const char* v) : v_(std::string(v)) {}      // NOLINT
  Attribute(std::vector<int64_t> v) : v_(std::move(v)) {}  // NOLINT
  Attribute(std::vector<float> v) : v_(std::move(v)) {}    // NOLINT
  Attribute(std::vector<std::string> v) : v_(std::move(v)) {}  // NOLINT
  Attribute(Tensor v) : v_(std::move(v)) {}             // NOLINT

  AttrType type() const { return static_cast<AttrType>(v_.index()); }
  int64_t i() const { return std::get<int64_t>(v_); }
  float f() const { return std::get<float>(v_); }
  const std::string& s() const { return std::get<std::string>(v_); }
  const std::vector<int64_t>& ints() const { return std::get<std::vector<int64_t>>(v_); }
  const std::vector<float>& floats() const { return std::get<std::vector<float>>(v_); }
  const std::vector<std::string>& strings() const { return std::get<std::vector<std::string>>(v_); }
  const Tensor& t() const { return std::get<Tensor>(v_); }
  std::string to_string() const;

 private:
  Storage v_;
};

using AttributeMap = std::map<std::string, Attribute>;

}  // namespace ferrite
