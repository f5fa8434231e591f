// Node attributes: the ONNX attribute kinds ferrite supports, subgraphs (If/Loop/Scan bodies)
// included.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "ir/tensor.h"

namespace ferrite {

class Graph;

enum class AttrType { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor, kGraph, kGraphs };
const char* attr_type_name(AttrType t);

// A subgraph held by an attribute. Attributes are values: copying one copies the subgraph
// (Graph::clone), so a copied graph (a Session's specialised variant) never shares a body that
// inference rewrites. The subgraph sees its enclosing graphs only through its captures
// (Graph::captures), bound to the owning node's trailing inputs.
class SubgraphAttr {
 public:
  explicit SubgraphAttr(std::unique_ptr<Graph> g);
  SubgraphAttr(const SubgraphAttr& o);
  SubgraphAttr& operator=(const SubgraphAttr& o);
  SubgraphAttr(SubgraphAttr&&) noexcept;
  SubgraphAttr& operator=(SubgraphAttr&&) noexcept;
  ~SubgraphAttr();
  Graph& graph() const { return *g_; }

 private:
  std::unique_ptr<Graph> g_;
};

class Attribute {
 public:
  using Storage =
      std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
                   std::vector<std::string>, Tensor, SubgraphAttr, std::vector<SubgraphAttr>>;
  Attribute() : v_(int64_t{0}) {}
  Attribute(int64_t v) : v_(v) {}                               // NOLINT
  Attribute(int v) : v_(int64_t{v}) {}                          // NOLINT
  Attribute(float v) : v_(v) {}                                 // NOLINT
  Attribute(std::string v) : v_(std::move(v)) {}                // NOLINT
  Attribute(const char* v) : v_(std::string(v)) {}              // NOLINT
  Attribute(std::vector<int64_t> v) : v_(std::move(v)) {}       // NOLINT
  Attribute(std::vector<float> v) : v_(std::move(v)) {}         // NOLINT
  Attribute(std::vector<std::string> v) : v_(std::move(v)) {}   // NOLINT
  Attribute(Tensor v) : v_(std::move(v)) {}                     // NOLINT
  Attribute(SubgraphAttr v) : v_(std::move(v)) {}               // NOLINT
  Attribute(std::vector<SubgraphAttr> v) : v_(std::move(v)) {}  // NOLINT

  AttrType type() const { return static_cast<AttrType>(v_.index()); }
  int64_t i() const { return std::get<int64_t>(v_); }
  float f() const { return std::get<float>(v_); }
  const std::string& s() const { return std::get<std::string>(v_); }
  const std::vector<int64_t>& ints() const { return std::get<std::vector<int64_t>>(v_); }
  const std::vector<float>& floats() const { return std::get<std::vector<float>>(v_); }
  const std::vector<std::string>& strings() const { return std::get<std::vector<std::string>>(v_); }
  const Tensor& t() const { return std::get<Tensor>(v_); }
  // Subgraphs are mutable through a const attribute: inference types their values.
  Graph& g() const { return std::get<SubgraphAttr>(v_).graph(); }
  const std::vector<SubgraphAttr>& graphs() const {
    return std::get<std::vector<SubgraphAttr>>(v_);
  }
  std::string to_string() const;

 private:
  Storage v_;
};

using AttributeMap = std::map<std::string, Attribute>;

}  // namespace ferrite
