// ferrite._core.GraphBuilder: builds a Graph node by node from Python (the PyTorch frontend's
// ATen table emits ops through it). Every node is validated against its schema and inferred as it
// is added, so errors name the node that caused them and Python can read inferred types back.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <map>

#include "bindings.h"
#include "distributed/tensor_parallel.h"
#include "frontend/onnx/importer.h"
#include "ops/context.h"
#include "ops/op_schema.h"
#include "runtime/precision.h"
#include "runtime/session.h"
#include "tensor_interop.h"

namespace ferrite::py {

namespace {

// Default-domain opset the builder's nodes are read at: the newest ferrite supports (Reduce* take
// axes as inputs, Gelu exists), and the version of the internal "ferrite" domain.
constexpr int kBuilderOpset = kMaxOnnxOpset;
constexpr int kFerriteDomainVersion = 1;

Dim dim_from_py(nb::handle h) {
  if (h.is_none()) return Dim::unknown();
  if (nb::isinstance<nb::int_>(h)) return Dim(nb::cast<int64_t>(h));
  if (nb::isinstance<nb::str>(h)) return Dim::symbol(nb::cast<std::string>(h));
  throw nb::type_error("a dim is an int, a symbol name (str) or None");
}

Attribute attr_from_py(const std::string& name, nb::handle h) {
  if (nb::isinstance<nb::bool_>(h)) return Attribute(int64_t(nb::cast<bool>(h)));
  if (nb::isinstance<nb::int_>(h)) return Attribute(nb::cast<int64_t>(h));
  if (nb::isinstance<nb::float_>(h)) return Attribute(nb::cast<float>(h));
  if (nb::isinstance<nb::str>(h)) return Attribute(nb::cast<std::string>(h));
  if (nb::isinstance<nb::list>(h) || nb::isinstance<nb::tuple>(h)) {
    nb::sequence seq = nb::borrow<nb::sequence>(h);
    bool all_int = true, all_num = true, all_str = true;
    for (nb::handle e : seq) {
      bool is_int = nb::isinstance<nb::int_>(e) || nb::isinstance<nb::bool_>(e);
      all_int &= is_int;
      all_num &= is_int || nb::isinstance<nb::float_>(e);
      all_str &= nb::isinstance<nb::str>(e);
    }
    if (all_int) {
      std::vector<int64_t> v;
      for (nb::handle e : seq) v.push_back(nb::cast<int64_t>(e));
      return Attribute(std::move(v));
    }
    if (all_num) {
      std::vector<float> v;
      for (nb::handle e : seq) v.push_back(nb::cast<float>(e));
      return Attribute(std::move(v));
    }
    if (all_str) {
      std::vector<std::string> v;
      for (nb::handle e : seq) v.push_back(nb::cast<std::string>(e));
      return Attribute(std::move(v));
    }
  }
  InputArray arr;
  if (nb::try_cast(h, arr))
    return Attribute(unwrap(tensor_from_array(arr, "attribute '" + name + "'")).clone());
  throw nb::type_error(("attribute '" + name + "': unsupported Python type").c_str());
}

class GraphBuilder {
 public:
  explicit GraphBuilder(const std::string& name) : g_(std::make_unique<Graph>()) {
    g_->name = name;
    g_->opsets()[""] = kBuilderOpset;
    g_->opsets()["ferrite"] = kFerriteDomainVersion;
  }

  int add_input(const std::string& name, const std::string& dtype, nb::sequence dims) {
    Value* v = g_->add_value(g_->unique_name(name), TensorType{parse_dtype(dtype), shape(dims)});
    v->is_graph_input = true;
    g_->inputs().push_back(v);
    return remember(v);
  }

  // A constant over the array's memory (no copy; the graph keeps the array alive).
  int add_constant(const std::string& name, const InputArray& a) {
    Tensor t = unwrap(tensor_from_array(a, "constant '" + name + "'"));
    Value* v = g_->add_initializer(name, std::move(t));
    return remember(v);
  }

  // Constant `id` also lives in device memory at `address` (a parameter of a framework's GPU
  // model): a Session on that device reads it there instead of keeping a copy of its own
  // (RunOptions::constant_mirrors). The caller keeps that memory alive and unchanged.
  void mirror_constant(int id, uintptr_t address) {
    const Value* v = value(id);
    if (!v->constant) throw nb::value_error(("value '" + v->name + "' is not a constant").c_str());
    const Tensor& t = *v->constant;
    mirrors_[t.raw()] = {t, reinterpret_cast<const void*>(address)};
  }

  std::vector<int> add_node(const std::string& op, const std::vector<std::optional<int>>& inputs,
                            nb::dict attrs, int num_outputs, const std::string& domain,
                            const std::string& name) {
    Graph& g = graph();
    Node* node = g.add_node(op, name.empty() ? g.unique_name(op) : name);
    node->domain = domain;
    node->opset = g.opsets().count(domain) ? g.opsets()[domain] : 1;
    node->schema = OpRegistry::global().find(domain, op, node->opset);
    if (!node->schema)
      check(unsupported(node->describe(), ": op '", domain.empty() ? "" : domain + ".", op,
                        "' is not supported at opset ", node->opset));
    for (auto [k, v] : attrs) {
      std::string key = nb::cast<std::string>(k);
      node->attrs.emplace(key, attr_from_py(key, v));
    }
    for (const auto& i : inputs) node->inputs.push_back(i ? value(*i) : nullptr);
    std::vector<int> ids;
    for (int k = 0; k < num_outputs; ++k) {
      Value* v = g.add_value(g.unique_name(node->name + "_out"));
      v->producer = node;
      v->producer_output = k;
      node->outputs.push_back(v);
      ids.push_back(remember(v));
    }
    check(infer_node(*node));
    return ids;
  }

  // (dtype, dims) as inferred; dims: int, symbol expression (str) or None; None when rank unknown.
  nb::tuple value_type(int id) const {
    const Value* v = value(id);
    const Shape& s = v->type.shape;
    if (!s.rank_known()) return nb::make_tuple(std::string(dtype_name(v->type.dtype)), nb::none());
    nb::list dims;
    for (size_t i = 0; i < s.rank(); ++i) dims.append(dim_to_py(s[i]));
    return nb::make_tuple(std::string(dtype_name(v->type.dtype)), dims);
  }

  void set_outputs(const std::vector<int>& ids) {
    Graph& g = graph();
    g.outputs().clear();
    for (int id : ids) g.outputs().push_back(value(id));
  }

  std::string text() const { return print_graph(graph()); }

  // Hands the graph to a Session (the builder is empty afterwards).
  std::unique_ptr<Session> build_session(const std::string& device, const std::string& precision,
                                         int threads, bool autotune,
                                         std::optional<std::vector<std::string>> passes,
                                         std::optional<std::string> dump_dir,
                                         std::vector<int> outputs_into_inputs) {
    RunOptions o = finish(precision, threads, autotune, passes, dump_dir);
    const Graph& g = *g_;
    if (!outputs_into_inputs.empty() && outputs_into_inputs.size() != g.outputs().size())
      throw nb::value_error("outputs_into_inputs needs one entry per graph output (-1: none)");
    for (int i : outputs_into_inputs)
      if (i < -1 || i >= static_cast<int>(g.inputs().size()))
        throw nb::value_error("outputs_into_inputs: an input index out of range");
    o.outputs_into_inputs = std::move(outputs_into_inputs);
    values_.clear();
    return session_from_graph(std::move(g_), device, o);
  }

  // One tensor-parallel rank of the graph (rank communicator.rank of communicator.size), its
  // collectives through `comm`: every rank builds the same graph and keeps its shard.
  std::unique_ptr<TensorParallelSession> build_rank_session(
      const CommunicatorHandle& comm, const std::string& device, const std::string& precision,
      int threads, bool autotune, std::optional<std::vector<std::string>> passes,
      std::optional<std::string> dump_dir) {
    RunOptions o = finish(precision, threads, autotune, passes, dump_dir);
    values_.clear();
    return rank_session_from_graph(std::move(g_), device, o, comm);
  }

 private:
  // The graph checked whole and the Session options, before it is handed over.
  RunOptions finish(const std::string& precision, int threads, bool autotune,
                    const std::optional<std::vector<std::string>>& passes,
                    const std::optional<std::string>& dump_dir) {
    Graph& g = graph();
    if (g.outputs().empty()) check(err("graph '", g.name, "' has no outputs"));
    check(verify_graph(g));
    RunOptions o = make_options(precision, threads, autotune, passes, dump_dir);
    o.constant_mirrors = std::move(mirrors_);
    return o;
  }
  Graph& graph() const {
    if (!g_) throw nb::value_error("this GraphBuilder's graph was already handed to a Session");
    return *g_;
  }
  Value* value(int id) const {
    if (id < 0 || static_cast<size_t>(id) >= values_.size())
      throw nb::index_error(("no value with id " + std::to_string(id)).c_str());
    return values_[static_cast<size_t>(id)];
  }
  int remember(Value* v) {
    values_.push_back(v);
    return static_cast<int>(values_.size() - 1);
  }
  static DType parse_dtype(const std::string& name) {
    auto d = dtype_from_name(name);
    if (!d) throw nb::value_error(("unknown dtype '" + name + "'").c_str());
    return *d;
  }
  static Shape shape(nb::sequence dims) {
    std::vector<Dim> out;
    for (nb::handle h : dims) out.push_back(dim_from_py(h));
    return Shape(std::move(out));
  }

  std::unique_ptr<Graph> g_;
  std::vector<Value*> values_;
  std::map<const void*, RunOptions::DeviceMirror> mirrors_;
};

}  // namespace

void bind_graph_builder(nb::module_& m) {
  nb::class_<GraphBuilder>(m, "GraphBuilder")
      .def(nb::init<const std::string&>(), nb::arg("name") = "graph")
      .def("add_input", &GraphBuilder::add_input, nb::arg("name"), nb::arg("dtype"),
           nb::arg("dims"))
      .def("add_constant", &GraphBuilder::add_constant, nb::arg("name"), nb::arg("array"))
      .def("mirror_constant", &GraphBuilder::mirror_constant, nb::arg("id"), nb::arg("address"))
      .def("add_node", &GraphBuilder::add_node, nb::arg("op"), nb::arg("inputs"), nb::arg("attrs"),
           nb::arg("num_outputs") = 1, nb::arg("domain") = "", nb::arg("name") = "")
      .def("value_type", &GraphBuilder::value_type, nb::arg("id"))
      .def("set_outputs", &GraphBuilder::set_outputs, nb::arg("ids"))
      .def("text", &GraphBuilder::text)
      .def("build_session", &GraphBuilder::build_session, nb::arg("device"),
           nb::arg("precision") = "f32", nb::arg("threads") = 0, nb::arg("autotune") = false,
           nb::arg("passes") = nb::none(), nb::arg("dump_dir") = nb::none(),
           nb::arg("outputs_into_inputs") = std::vector<int>{})
      .def("build_rank_session", &GraphBuilder::build_rank_session, nb::arg("communicator"),
           nb::arg("device"), nb::arg("precision") = "f32", nb::arg("threads") = 0,
           nb::arg("autotune") = false, nb::arg("passes") = nb::none(),
           nb::arg("dump_dir") = nb::none());
}

}  // namespace ferrite::py
