#include "frontend/onnx/importer.h"

#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>

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

Expected<TensorType> import_type(const onnx::ValueInfoProto& vi) {
  if (!vi.type().has_tensor_type())
    return unsupported("value '", vi.name(), "' is not a tensor (sequences and maps are not supported)");
  const auto& tt = vi.type().tensor_type();
  auto dtype = dtype_from_onnx(tt.elem_type());
  if (!dtype) {
    if (tt.elem_type() > 0 && tt.elem_type() <= 23)  // a valid ONNX type ferrite lacks (string, fp8...)
      return unsupported("value '", vi.name(), "': elem_type ",
                         onnx_dtype_description(tt.elem_type()), " is not supported");
    return err("value '", vi.name(), "': invalid elem_type ", tt.elem_type());
  }
  if (!tt.has_shape()) return TensorType{*dtype, Shape::unknown_rank()};
  std::vector<Dim> dims;
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_param()) FERRITE_RETURN_IF_ERROR(check_name(d.dim_param(), "dimension"));
    if (d.has_dim_value()) {
      if (d.dim_value() < 0)
        return err("value '", vi.name(), "': negative dimension ", d.dim_value());
      dims.emplace_back(d.dim_value());
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      dims.push_back(Dim::symbol(d.dim_param()));
    } else {
      dims.push_back(Dim::unknown());
    }
  }
  return TensorType{*dtype, Shape(std::move(dims))};
}

Expected<Attribute> import_attribute(const onnx::AttributeProto& a, const std::string& where,
                                     const TensorProtoOptions& topts) {
  auto bad = [&](const char* why) { return err(where, ": attribute '", a.name(), "' ", why); };
  if (!a.ref_attr_name().empty()) return bad("refers to a function attribute (not supported)");
  switch (a.type()) {
    case onnx::AttributeProto::INT: return Attribute(static_cast<int64_t>(a.i()));
    case onnx::AttributeProto::FLOAT: return Attribute(a.f());
    case onnx::AttributeProto::STRING: return Attribute(a.s());
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
    case onnx::AttributeProto::SPARSE_TENSOR:
    case onnx::AttributeProto::SPARSE_TENSORS:
      return unsupported(where, ": attribute '", a.name(), "' is a sparse tensor (not supported)");
    case onnx::AttributeProto::GRAPH:
    case onnx::AttributeProto::GRAPHS:
      return unsupported(where, ": attribute '", a.name(), "' is a subgraph (control flow is not supported yet)");
    default: return bad("has an unsupported or missing type");
  }
}

std::string node_label(const onnx::NodeProto& n, int index) {
  std::string name = n.name().empty() ? str_cat("#", index) : n.name();
  return str_cat("node '", name, "' (", n.op_type(), ")");
}

// Orders nodes so that producers come first (Kahn's algorithm, iterative); reports cycles and
// undefined inputs by node.
Expected<std::vector<int>> topological_order(const onnx::GraphProto& g,
                                             const std::unordered_map<std::string, int>& producer,
                                             const std::unordered_map<std::string, bool>& defined) {
  int n = g.node_size();
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> users(n);
  for (int i = 0; i < n; ++i) {
    for (const auto& in : g.node(i).input()) {
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
  // upgrades them while inferring (its adapters need their inputs' types).
  const bool upgrade = def != g.opsets().end() && def->second < kMinOnnxOpset;

  const onnx::GraphProto& gp = model.graph();
  g.name = gp.name();
  TensorProtoOptions topts;
  topts.external_data_dir = model_dir;

  std::unordered_map<std::string, bool> defined;
  // Initializers.
  std::unordered_map<std::string, Tensor> init_data;
  for (const auto& init : gp.initializer()) {
    if (init.name().empty()) return err("an initializer has an empty name");
    FERRITE_RETURN_IF_ERROR(check_name(init.name(), "initializer"));
    if (init_data.count(init.name())) return err("initializer '", init.name(), "' is defined twice");
    TensorProtoOptions o = topts;
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
    FERRITE_ASSIGN_OR_RETURN(TensorType type, import_type(vi));
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

  // Producers: one per name. Names are checked first so that every later message is one line.
  std::unordered_map<std::string, int> producer;
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
  FERRITE_ASSIGN_OR_RETURN(std::vector<int> order, topological_order(gp, producer, defined));

  const OpRegistry& registry = OpRegistry::global();
  for (int idx : order) {
    const onnx::NodeProto& np = gp.node(idx);
    std::string label = node_label(np, idx);
    std::string domain = np.domain() == "ai.onnx" ? "" : np.domain();
    auto ops = g.opsets().find(domain);
    if (ops == g.opsets().end())
      return err(label, ": domain '", domain, "' is not imported by the model");
    Node* node = g.add_node(np.op_type(), np.name().empty() ? str_cat(np.op_type(), "_", idx) : np.name());
    node->domain = domain;
    node->opset = ops->second;
    Status upgradable = Status::ok();
    if (upgrade && domain.empty())
      upgradable = check_upgradable(np.op_type(), node->opset);
    else
      node->schema = registry.find(domain, np.op_type(), node->opset);
    if (!upgradable.is_ok()) {
      if (!opts.allow_unknown_ops) return upgradable.with_context(label);
      if (report) report->unsupported_ops.push_back(str_cat(np.op_type(), " (", label, ")"));
    } else if (!node->schema && !(upgrade && domain.empty())) {
      std::string what;
      if (np.op_type() == "If" || np.op_type() == "Loop" || np.op_type() == "Scan")
        what = "control flow (" + np.op_type() + ") is not supported yet";
      else if (registry.knows(domain, np.op_type()))
        what = str_cat("op '", np.op_type(), "' is not supported at opset ", node->opset);
      else
        what = str_cat("unsupported op '", domain.empty() ? "" : domain + ".", np.op_type(), "'");
      if (!opts.allow_unknown_ops) return unsupported(label, ": ", what);
      if (report) report->unsupported_ops.push_back(str_cat(np.op_type(), " (", label, ")"));
    }
    for (const auto& a : np.attribute()) {
      if (node->attrs.count(a.name())) return err(label, ": attribute '", a.name(), "' is repeated");
      FERRITE_ASSIGN_OR_RETURN(Attribute attr, import_attribute(a, label, topts));
      node->attrs.emplace(a.name(), std::move(attr));
    }
    for (const auto& in : np.input()) node->inputs.push_back(in.empty() ? nullptr : g.find_value(in));
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
  }
  for (const auto& vi : gp.output()) {
    FERRITE_RETURN_IF_ERROR(check_name(vi.name(), "graph output"));
    Value* v = g.find_value(vi.name());
    if (!v) return err("graph output '", vi.name(), "' is not produced by any node");
    g.outputs().push_back(v);
  }
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
                                                  const ImportOptions& opts,
                                                  ImportReport* report) {
  FERRITE_ASSIGN_OR_RETURN(std::string bytes, read_file_bytes(path, kMaxModelBytes));
  auto g = import_onnx_bytes(bytes, path.parent_path().empty() ? "." : path.parent_path(), opts,
                             report);
  if (!g) return g.status().with_context(path.string());
  return g;
}

}  // namespace ferrite
