#include "frontend/onnx/importer.h"

#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <climits>
#include <deque>
#include <new>
#include <unordered_map>

#include "frontend/onnx/tensor_proto.h"
#include "frontend/onnx/version_converter.h"
#include "ops/context.h"
#include "ops/op_schema.h"

namespace ferrite {

namespace {

// protobuf parses at most INT_MAX bytes from one buffer.
constexpr size_t kMaxModelBytes = static_cast<size_t>(INT_MAX);

// Names end up in diagnostics (one line each) and in generated identifiers, so control
// characters are refused rather than passed through.
Status check_name(const std::string& name, const char* what) {
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7f)
      return err(what, " name '", printable_name(name), "' contains a control character");
  return Status::ok();
}

Expected<TensorType> import_tensor_type(const onnx::TypeProto::Tensor& tt,
                                        const std::string& name) {
  auto dtype = dtype_from_onnx(tt.elem_type());
  if (!dtype) {
    if (tt.elem_type() > 0 &&
        tt.elem_type() <= 23)  // a valid ONNX type ferrite lacks (string, fp8...)
      return unsupported("value '", name, "': elem_type ", onnx_dtype_description(tt.elem_type()),
                         " is not supported");
    return err("value '", name, "': invalid elem_type ", tt.elem_type());
  }
  if (!tt.has_shape()) return TensorType{*dtype, Shape::unknown_rank()};
  std::vector<Dim> dims;
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_param()) FERRITE_RETURN_IF_ERROR(check_name(d.dim_param(), "dimension"));
    if (d.has_dim_value()) {
      if (d.dim_value() < 0) return err("value '", name, "': negative dimension ", d.dim_value());
      dims.emplace_back(d.dim_value());
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      dims.push_back(Dim::symbol(d.dim_param()));
    } else {
      dims.push_back(Dim::unknown());
    }
  }
  return TensorType{*dtype, Shape(std::move(dims))};
}

// A tensor, a sequence of tensors, or an optional of either (ir/value_kind.h); sequences of
// sequences, maps and sparse tensors are kUnsupported.
Expected<TensorType> import_type_proto(const onnx::TypeProto& tp, const std::string& name) {
  if (tp.has_tensor_type()) return import_tensor_type(tp.tensor_type(), name);
  const onnx::TypeProto* inner = &tp;
  bool optional = false;
  if (tp.has_optional_type()) {
    optional = true;
    inner = &tp.optional_type().elem_type();
    if (inner->has_tensor_type()) {
      FERRITE_ASSIGN_OR_RETURN(TensorType t, import_tensor_type(inner->tensor_type(), name));
      t.kind = ValueKind::kOptionalTensor;
      return t;
    }
  }
  if (inner->has_sequence_type()) {
    const onnx::TypeProto& elem = inner->sequence_type().elem_type();
    if (!elem.has_tensor_type())
      return unsupported(
          "value '", name,
          "' is a sequence of non-tensors (only sequences of tensors are supported)");
    FERRITE_ASSIGN_OR_RETURN(TensorType t, import_tensor_type(elem.tensor_type(), name));
    t.kind = optional ? ValueKind::kOptionalSequence : ValueKind::kSequence;
    return t;
  }
  return unsupported("value '", name,
                     "' is not a tensor, a sequence of tensors or an optional of either (maps and "
                     "sparse tensors are not supported)");
}

Expected<TensorType> import_type(const onnx::ValueInfoProto& vi, bool untyped_ok = false) {
  // A subgraph's inputs may leave their type to the node (Loop's and Scan's bodies).
  if (untyped_ok && !vi.has_type()) return TensorType{};
  return import_type_proto(vi.type(), vi.name());
}

Expected<Attribute> import_attribute(const onnx::AttributeProto& a, const std::string& where,
                                     const TensorProtoOptions& topts) {
  auto bad = [&](const char* why) { return err(where, ": attribute '", a.name(), "' ", why); };
  if (!a.ref_attr_name().empty()) return bad("refers to a function attribute (not supported)");
  switch (a.type()) {
    case onnx::AttributeProto::INT:
      return Attribute(static_cast<int64_t>(a.i()));
    case onnx::AttributeProto::FLOAT:
      return Attribute(a.f());
    case onnx::AttributeProto::STRING:
      return Attribute(a.s());
    case onnx::AttributeProto::INTS:
      return Attribute(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case onnx::AttributeProto::FLOATS:
      return Attribute(std::vector<float>(a.floats().begin(), a.floats().end()));
    case onnx::AttributeProto::STRINGS:
      return Attribute(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case onnx::AttributeProto::TENSOR: {
      TensorProtoOptions o = topts;
      o.label = where + ": attribute '" + a.name() + "'";
      FERRITE_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(a.t(), o));
      return Attribute(std::move(t));
    }
    case onnx::AttributeProto::TYPE_PROTO: {
      // Only Optional takes a type attribute (the type of an empty optional), and it needs the
      // kind and element dtype alone, so the attribute becomes ints {ValueKind, DType} rather
      // than a new attribute kind every pass and printer would have to learn; the element shape
      // is dropped (an empty optional holds no element to have one).
      FERRITE_ASSIGN_OR_RETURN(TensorType t, import_type_proto(a.tp(), where));
      return Attribute(
          std::vector<int64_t>{static_cast<int64_t>(t.kind), static_cast<int64_t>(t.dtype)});
    }
    case onnx::AttributeProto::SPARSE_TENSOR:
    case onnx::AttributeProto::SPARSE_TENSORS:
      return unsupported(where, ": attribute '", a.name(), "' is a sparse tensor (not supported)");
    case onnx::AttributeProto::GRAPH:
    case onnx::AttributeProto::GRAPHS:
      return bad("is a subgraph where none is expected");  // GraphImporter imports subgraphs
    default:
      return bad("has an unsupported or missing type");
  }
}

std::string node_label(const onnx::NodeProto& n, int index) {
  std::string name = n.name().empty() ? str_cat("#", index) : n.name();
  return str_cat("node '", name, "' (", n.op_type(), ")");
}

// Orders nodes so that producers come first (Kahn's algorithm, iterative); reports cycles and
// undefined inputs by node.
// `implicit[i]` lists the outer-scope names node i's subgraphs read: dependencies like inputs.
Expected<std::vector<int>> topological_order(
    const onnx::GraphProto& g, const std::unordered_map<std::string, int>& producer,
    const std::unordered_map<std::string, bool>& defined,
    const std::vector<std::vector<std::string>>& implicit) {
  int n = g.node_size();
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> users(n);
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> uses(g.node(i).input().begin(), g.node(i).input().end());
    uses.insert(uses.end(), implicit[i].begin(), implicit[i].end());
    for (const auto& in : uses) {
      if (in.empty()) continue;
      auto p = producer.find(in);
      if (p != producer.end()) {
        users[p->second].push_back(i);
        pending[i]++;
      } else if (!defined.count(in)) {
        return err(node_label(g.node(i), i), ": input '", in, "' is not defined by any node, ",
                   "graph input or initializer");
      }
    }
  }
  std::deque<int> ready;
  for (int i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push_back(i);
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    int i = ready.front();
    ready.pop_front();
    order.push_back(i);
    for (int u : users[i])
      if (--pending[u] == 0) ready.push_back(u);
  }
  if (static_cast<int>(order.size()) != n) {
    for (int i = 0; i < n; ++i)
      if (pending[i] > 0) return err("the graph has a cycle through ", node_label(g.node(i), i));
  }
  return order;
}

// Names defined by the enclosing graphs of a subgraph, innermost first.
struct Scope {
  const std::unordered_map<std::string, bool>* names;
  const Scope* parent;
  bool has(const std::string& n) const {
    for (const Scope* s = this; s; s = s->parent)
      if (s->names->count(n)) return true;
    return false;
  }
};

// Imports a GraphProto into a Graph: the model's graph, and recursively (one level of C++
// recursion per level of nesting, bounded by protobuf's recursion limit) the subgraphs of its
// nodes' graph attributes. A subgraph's uses of enclosing-scope names become its captures; the
// owning node takes those values as trailing inputs, so that passes, liveness and the executors
// see every use as an ordinary input.
class GraphImporter {
 public:
  GraphImporter(const ImportOptions& opts, ImportReport* report, TensorProtoOptions topts,
                bool upgrade)
      : opts_(opts), report_(report), topts_(std::move(topts)), upgrade_(upgrade) {}

  Status import_graph(const onnx::GraphProto& gp, Graph& g, const Scope* outer);

 private:
  Status import_values(const onnx::GraphProto& gp, Graph& g, bool sub,
                       std::unordered_map<std::string, bool>& defined);
  Status check_nodes(const onnx::GraphProto& gp,
                     const std::unordered_map<std::string, bool>& defined,
                     std::unordered_map<std::string, int>& producer);
  // Imports node i's attributes, subgraphs included; `implicit` gets the union of the names its
  // subgraphs capture.
  Status import_attributes(const onnx::NodeProto& np, const std::string& label, const Graph& g,
                           const Scope& here, AttributeMap& attrs,
                           std::vector<std::string>& implicit);
  Status add_node(const onnx::NodeProto& np, int idx, Graph& g, AttributeMap attrs,
                  const std::vector<std::string>& implicit);

  const ImportOptions& opts_;
  ImportReport* report_;
  TensorProtoOptions topts_;
  bool upgrade_;
};

Status GraphImporter::import_values(const onnx::GraphProto& gp, Graph& g, bool sub,
                                    std::unordered_map<std::string, bool>& defined) {
  std::unordered_map<std::string, Tensor> init_data;
  for (const auto& init : gp.initializer()) {
    if (init.name().empty()) return err("an initializer has an empty name");
    FERRITE_RETURN_IF_ERROR(check_name(init.name(), "initializer"));
    if (init_data.count(init.name()))
      return err("initializer '", init.name(), "' is defined twice");
    TensorProtoOptions o = topts_;
    o.label = "initializer '" + init.name() + "'";
    FERRITE_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(init, o));
    init_data.emplace(init.name(), std::move(t));
  }
  for (const auto& sp : gp.sparse_initializer())
    return err("sparse initializer '", sp.values().name(), "' is not supported");
  // Graph inputs (an input may carry a default via a same-named initializer).
  for (const auto& vi : gp.input()) {
    if (vi.name().empty()) return err("a graph input has an empty name");
    FERRITE_RETURN_IF_ERROR(check_name(vi.name(), "graph input"));
    if (defined.count(vi.name())) return err("graph input '", vi.name(), "' is declared twice");
    FERRITE_ASSIGN_OR_RETURN(TensorType type, import_type(vi, sub));
    Value* v = g.add_value(vi.name(), type);
    v->is_graph_input = true;
    auto it = init_data.find(vi.name());
    if (it != init_data.end()) {
      v->constant = std::move(it->second);
      init_data.erase(it);
    }
    g.inputs().push_back(v);
    defined[vi.name()] = true;
  }
  for (const auto& init : gp.initializer()) {
    auto it = init_data.find(init.name());
    if (it == init_data.end()) continue;  // consumed as an input default
    Tensor& t = it->second;
    Value* v = g.add_value(init.name(), TensorType{t.dtype(), Shape::of(t.dims())});
    v->constant = std::move(t);
    g.initializers().push_back(v);
    defined[init.name()] = true;
  }
  return Status::ok();
}

// Producers: one per name. Names are checked first so that every later message is one line.
Status GraphImporter::check_nodes(const onnx::GraphProto& gp,
                                  const std::unordered_map<std::string, bool>& defined,
                                  std::unordered_map<std::string, int>& producer) {
  // Graph outputs too: a subgraph's are looked up in enclosing graphs before its nodes are added.
  for (const auto& vi : gp.output()) FERRITE_RETURN_IF_ERROR(check_name(vi.name(), "graph output"));
  for (int i = 0; i < gp.node_size(); ++i) {
    const onnx::NodeProto& np = gp.node(i);
    FERRITE_RETURN_IF_ERROR(check_name(np.name(), "node"));
    FERRITE_RETURN_IF_ERROR(check_name(np.op_type(), "op type"));
    FERRITE_RETURN_IF_ERROR(check_name(np.domain(), "domain"));
    if (np.op_type().empty()) return err(node_label(np, i), ": node has no op_type");
    for (const auto& in : np.input()) FERRITE_RETURN_IF_ERROR(check_name(in, "value"));
    for (const auto& a : np.attribute()) FERRITE_RETURN_IF_ERROR(check_name(a.name(), "attribute"));
    for (const auto& out : np.output()) {
      if (out.empty()) continue;
      FERRITE_RETURN_IF_ERROR(check_name(out, "value"));
      if (defined.count(out))
        return err(node_label(np, i), ": output '", out,
                   "' is already defined as a graph input or initializer");
      auto [it, inserted] = producer.emplace(out, i);
      if (!inserted) {
        if (it->second == i) return err(node_label(np, i), ": lists output '", out, "' twice");
        return err(node_label(np, i), ": output '", out, "' is also produced by ",
                   node_label(gp.node(it->second), it->second));
      }
    }
  }
  return Status::ok();
}

Status GraphImporter::import_attributes(const onnx::NodeProto& np, const std::string& label,
                                        const Graph& g, const Scope& here, AttributeMap& attrs,
                                        std::vector<std::string>& implicit) {
  auto import_sub = [&](const onnx::GraphProto& sgp) -> Expected<SubgraphAttr> {
    FERRITE_RETURN_IF_ERROR(check_name(sgp.name(), "subgraph").with_context(label));
    auto sub = std::make_unique<Graph>();
    sub->name = sgp.name();
    sub->opsets() = g.opsets();
    FERRITE_RETURN_IF_ERROR(import_graph(sgp, *sub, &here)
                                .with_context(str_cat(label, ": subgraph '", sgp.name(), "'")));
    for (const Value* c : sub->captures())
      if (std::find(implicit.begin(), implicit.end(), c->name) == implicit.end())
        implicit.push_back(c->name);
    return SubgraphAttr(std::move(sub));
  };
  for (const auto& a : np.attribute()) {
    if (attrs.count(a.name())) return err(label, ": attribute '", a.name(), "' is repeated");
    if (a.type() == onnx::AttributeProto::GRAPH) {
      if (!a.ref_attr_name().empty())
        return err(label, ": attribute '", a.name(),
                   "' refers to a function attribute (not supported)");
      FERRITE_ASSIGN_OR_RETURN(SubgraphAttr sg, import_sub(a.g()));
      attrs.emplace(a.name(), Attribute(std::move(sg)));
    } else if (a.type() == onnx::AttributeProto::GRAPHS) {
      std::vector<SubgraphAttr> gs;
      for (const auto& sgp : a.graphs()) {
        FERRITE_ASSIGN_OR_RETURN(SubgraphAttr sg, import_sub(sgp));
        gs.push_back(std::move(sg));
      }
      attrs.emplace(a.name(), Attribute(std::move(gs)));
    } else {
      FERRITE_ASSIGN_OR_RETURN(Attribute attr, import_attribute(a, label, topts_));
      attrs.emplace(a.name(), std::move(attr));
    }
  }
  // Every subgraph of the node captures the same list (the union), bound to the same inputs.
  for (auto& [name, a] : attrs) {
    std::vector<Graph*> subs;
    if (a.type() == AttrType::kGraph) subs.push_back(&a.g());
    if (a.type() == AttrType::kGraphs)
      for (const auto& sg : a.graphs()) subs.push_back(&sg.graph());
    for (Graph* sub : subs) {
      std::vector<Value*> caps;
      for (const std::string& n : implicit) {
        Value* v = sub->find_value(n);
        if (v &&
            std::find(sub->captures().begin(), sub->captures().end(), v) == sub->captures().end())
          return err(label, ": subgraph '", sub->name, "' redefines '", n,
                     "', a value of an enclosing graph");
        caps.push_back(v ? v : sub->add_value(n));
      }
      sub->captures() = std::move(caps);
    }
  }
  return Status::ok();
}

Status GraphImporter::add_node(const onnx::NodeProto& np, int idx, Graph& g, AttributeMap attrs,
                               const std::vector<std::string>& implicit) {
  const OpRegistry& registry = OpRegistry::global();
  std::string label = node_label(np, idx);
  std::string domain = np.domain() == "ai.onnx" ? "" : np.domain();
  auto ops = g.opsets().find(domain);
  if (ops == g.opsets().end())
    return err(label, ": domain '", domain, "' is not imported by the model");
  Node* node =
      g.add_node(np.op_type(), np.name().empty() ? str_cat(np.op_type(), "_", idx) : np.name());
  node->domain = domain;
  node->opset = ops->second;
  Status upgradable = Status::ok();
  if (upgrade_ && domain.empty())
    upgradable = check_upgradable(np.op_type(), node->opset);
  else
    node->schema = registry.find(domain, np.op_type(), node->opset);
  if (!upgradable.is_ok()) {
    if (!opts_.allow_unknown_ops) return upgradable.with_context(label);
    if (report_) report_->unsupported_ops.push_back(str_cat(np.op_type(), " (", label, ")"));
  } else if (!node->schema && !(upgrade_ && domain.empty())) {
    std::string what;
    if (registry.knows(domain, np.op_type()))
      what = str_cat("op '", np.op_type(), "' is not supported at opset ", node->opset);
    else
      what = str_cat("unsupported op '", domain.empty() ? "" : domain + ".", np.op_type(), "'");
    if (!opts_.allow_unknown_ops) return unsupported(label, ": ", what);
    if (report_) report_->unsupported_ops.push_back(str_cat(np.op_type(), " (", label, ")"));
  }
  node->attrs = std::move(attrs);
  for (const auto& in : np.input()) node->inputs.push_back(in.empty() ? nullptr : g.find_value(in));
  for (const auto& in : implicit) node->inputs.push_back(g.find_value(in));
  // Trailing omitted outputs are dropped; interior ones stay as null.
  int nout = np.output_size();
  while (nout > 0 && np.output(nout - 1).empty()) --nout;
  for (int k = 0; k < nout; ++k) {
    const std::string& out = np.output(k);
    if (out.empty()) {
      node->outputs.push_back(nullptr);
      continue;
    }
    Value* v = g.add_value(out);
    v->producer = node;
    v->producer_output = k;
    node->outputs.push_back(v);
  }
  return Status::ok();
}

Status GraphImporter::import_graph(const onnx::GraphProto& gp, Graph& g, const Scope* outer) {
  std::unordered_map<std::string, bool> defined;
  FERRITE_RETURN_IF_ERROR(import_values(gp, g, outer != nullptr, defined));
  std::unordered_map<std::string, int> producer;
  FERRITE_RETURN_IF_ERROR(check_nodes(gp, defined, producer));
  // Every name of this graph, for the subgraphs' lookups.
  std::unordered_map<std::string, bool> here_names = defined;
  for (const auto& [name, i] : producer) here_names[name] = true;
  Scope here{&here_names, outer};
  std::vector<AttributeMap> attrs(gp.node_size());
  std::vector<std::vector<std::string>> implicit(gp.node_size());
  for (int i = 0; i < gp.node_size(); ++i)
    FERRITE_RETURN_IF_ERROR(
        import_attributes(gp.node(i), node_label(gp.node(i), i), g, here, attrs[i], implicit[i]));
  if (outer) {
    // Names of enclosing graphs this subgraph reads become its captures.
    auto capture = [&](const std::string& n, const std::string& who) -> Status {
      if (n.empty() || here_names.count(n)) return Status::ok();
      if (!outer->has(n))
        return err(who, ": '", n, "' is not defined by any node, graph input, initializer or ",
                   "enclosing graph");
      here_names[n] = true;
      defined[n] = true;
      g.captures().push_back(g.add_value(n));
      return Status::ok();
    };
    for (int i = 0; i < gp.node_size(); ++i) {
      std::string label = node_label(gp.node(i), i);
      for (const auto& in : gp.node(i).input()) FERRITE_RETURN_IF_ERROR(capture(in, label));
      for (const auto& in : implicit[i]) FERRITE_RETURN_IF_ERROR(capture(in, label));
    }
    for (const auto& vi : gp.output()) FERRITE_RETURN_IF_ERROR(capture(vi.name(), "graph output"));
  }
  FERRITE_ASSIGN_OR_RETURN(std::vector<int> order,
                           topological_order(gp, producer, defined, implicit));
  for (int idx : order)
    FERRITE_RETURN_IF_ERROR(add_node(gp.node(idx), idx, g, std::move(attrs[idx]), implicit[idx]));
  for (const auto& vi : gp.output()) {
    Value* v = g.find_value(vi.name());
    if (!v) return err("graph output '", vi.name(), "' is not produced by any node");
    g.outputs().push_back(v);
  }
  return Status::ok();
}

Expected<std::unique_ptr<Graph>> import_model(const onnx::ModelProto& model,
                                              const std::filesystem::path& model_dir,
                                              const ImportOptions& opts, ImportReport* report) {
  if (report) {
    report->ir_version = model.ir_version();
    report->producer = model.producer_name() + " " + model.producer_version();
  }
  if (!model.has_graph()) return err("model has no graph");
  auto graph = std::make_unique<Graph>();
  Graph& g = *graph;
  if (model.opset_import_size() == 0) return err("model declares no opset_import");
  for (const auto& op : model.opset_import()) {
    FERRITE_RETURN_IF_ERROR(check_name(op.domain(), "opset domain"));
    std::string domain = op.domain() == "ai.onnx" ? "" : op.domain();
    std::string shown = domain.empty() ? "ai.onnx" : domain;
    // Checked before narrowing: a version of 2^32+13 must not pass as 13.
    if (op.version() < 1 || op.version() > INT_MAX)
      return err("opset_import of domain '", shown, "' has invalid version ", op.version());
    int version = static_cast<int>(op.version());
    auto [it, inserted] = g.opsets().emplace(domain, version);
    if (!inserted && it->second != version)
      return err("opset_import lists domain '", shown, "' twice, with versions ", it->second,
                 " and ", version);
  }
  // A model may import only other domains (ai.onnx.ml, ai.onnx.preview.training); each node's
  // domain is checked against the imports below.
  auto def = g.opsets().find("");
  if (def != g.opsets().end() &&
      (def->second < kMinConvertibleOpset || def->second > kMaxOnnxOpset))
    return unsupported("model uses ONNX opset ", def->second, "; ferrite supports opsets ",
                       kMinConvertibleOpset, " to ", kMaxOnnxOpset, " (below ", kMinOnnxOpset,
                       " through the version converter)");
  // Default-domain nodes of an older model get their schema from the version converter, which
  // upgrades them while inferring (its adapters need their inputs' types); subgraphs too, when
  // their node's inference infers them.
  const bool upgrade = def != g.opsets().end() && def->second < kMinOnnxOpset;
  set_subgraph_inferrer(&upgrade_and_infer);

  const onnx::GraphProto& gp = model.graph();
  FERRITE_RETURN_IF_ERROR(check_name(gp.name(), "graph"));
  g.name = gp.name();
  TensorProtoOptions topts;
  topts.external_data_dir = model_dir;
  GraphImporter importer(opts, report, topts, upgrade);
  FERRITE_RETURN_IF_ERROR(importer.import_graph(gp, g, nullptr));
  if (g.outputs().empty()) return err("model has no outputs");
  if (opts.allow_unknown_ops && report && !report->unsupported_ops.empty()) return graph;
  FERRITE_RETURN_IF_ERROR(upgrade ? upgrade_and_infer(g) : infer_graph(g));
  FERRITE_RETURN_IF_ERROR(verify_graph(g));
  return graph;
}

}  // namespace

Status infer_graph(Graph& g) {
  for (const auto& node : g.nodes()) {
    if (!node->schema) return err(node->describe(), ": no schema");
    FERRITE_RETURN_IF_ERROR(infer_node(*node));
  }
  return Status::ok();
}

Expected<std::unique_ptr<Graph>> import_onnx_bytes(const std::string& bytes,
                                                   const std::filesystem::path& model_dir,
                                                   const ImportOptions& opts,
                                                   ImportReport* report) {
  if (bytes.empty()) return err("model file is empty");
  if (bytes.size() > kMaxModelBytes)
    return err("model is ", bytes.size(), " bytes; protobuf models are limited to ", kMaxModelBytes,
               " bytes (use external data for the weights)");
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream stream(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                static_cast<int>(bytes.size()));
  stream.SetTotalBytesLimit(INT_MAX);
  stream.SetRecursionLimit(64);
  // The model is untrusted and may be large: running out of memory is an error, not a crash.
  try {
    if (!model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage())
      return err("model file is not a valid ONNX protobuf (truncated or corrupt)");
    return import_model(model, model_dir, opts, report);
  } catch (const std::bad_alloc&) {
    return err("out of memory while importing the model (", bytes.size(), " bytes)");
  }
}

Expected<std::unique_ptr<Graph>> import_onnx_file(const std::filesystem::path& path,
                                                  const ImportOptions& opts, ImportReport* report) {
  FERRITE_ASSIGN_OR_RETURN(std::string bytes, read_file_bytes(path, kMaxModelBytes));
  auto g =
      import_onnx_bytes(bytes, path.parent_path().empty() ? "." : path.parent_path(), opts, report);
  if (!g) return g.status().with_context(path.string());
  return g;
}

}  // namespace ferrite
