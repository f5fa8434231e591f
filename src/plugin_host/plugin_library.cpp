#include "plugin_host/plugin_library.h"

#include <deque>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace ferrite {

namespace {

std::string_view canonical_domain(std::string_view d) {
  return d == "ai.onnx" ? "" : d;
}

// An fe_op_desc and the storage its pointers point into. Built per call: the op's dims change
// with the shape symbols, and the descriptions are small next to the op's work.
class OpDesc {
 public:
  explicit OpDesc(const Node& n) {
    desc_.struct_size = sizeof(fe_op_desc);
    desc_.domain = n.domain == "ai.onnx" ? "" : n.domain.c_str();
    desc_.op_type = n.op_type.c_str();
    desc_.name = n.name.c_str();
    for (const auto& [name, a] : n.attrs) add_attr(name, a);
  }

  // An input or output; `dims` null: absent (rank -1). Returns false for a dtype the SDK has no
  // number for.
  bool add(bool output, DType dtype, const std::vector<int64_t>* dims, void* data,
           const void* host_data) {
    fe_tensor_desc t{};
    if (dims) {
      int onnx = dtype_to_onnx(dtype);
      if (onnx <= 0) return false;
      t.dtype = onnx;
      t.rank = static_cast<int32_t>(dims->size());
      t.dims = dims_.emplace_back(*dims).data();
    } else {
      t.rank = -1;
    }
    t.data = data;
    t.host_data = host_data;
    (output ? outputs_ : inputs_).push_back(t);
    return true;
  }

  const fe_op_desc* get() {
    desc_.num_inputs = static_cast<int32_t>(inputs_.size());
    desc_.inputs = inputs_.data();
    desc_.num_outputs = static_cast<int32_t>(outputs_.size());
    desc_.outputs = outputs_.data();
    desc_.num_attrs = static_cast<int32_t>(attrs_.size());
    desc_.attrs = attrs_.data();
    return &desc_;
  }

 private:
  // Tensor and string-list attributes have no C form in the SDK: they are not passed (no op a
  // plugin library runs today has one).
  void add_attr(const std::string& name, const Attribute& a) {
    fe_attr r{};
    r.name = name.c_str();
    switch (a.type()) {
      case AttrType::kInt:
        r.kind = FE_ATTR_INT;
        r.i = a.i();
        break;
      case AttrType::kFloat:
        r.kind = FE_ATTR_FLOAT;
        r.f = a.f();
        break;
      case AttrType::kString:
        r.kind = FE_ATTR_STRING;
        r.s = a.s().c_str();
        break;
      case AttrType::kInts:
        r.kind = FE_ATTR_INTS;
        r.count = static_cast<int32_t>(a.ints().size());
        r.ints = a.ints().data();
        break;
      case AttrType::kFloats: {
        r.kind = FE_ATTR_FLOATS;
        r.count = static_cast<int32_t>(a.floats().size());
        auto& d = floats_.emplace_back(a.floats().begin(), a.floats().end());
        r.floats = d.data();
        break;
      }
      default:
        return;
    }
    attrs_.push_back(r);
  }

  fe_op_desc desc_{};
  std::vector<fe_tensor_desc> inputs_, outputs_;
  std::vector<fe_attr> attrs_;
  std::deque<std::vector<int64_t>> dims_;  // a deque: pointers into it stay valid
  std::deque<std::vector<double>> floats_;
};

// Dims as the graph knows them before a run: -1 where a dim varies with the inputs.
std::vector<int64_t> static_dims(const Shape& s) {
  std::vector<int64_t> d;
  for (size_t i = 0; i < s.rank(); ++i) d.push_back(s[i].is_static() ? *s[i].value() : -1);
  return d;
}

bool accepts(const Node& n, void* state) {
  const auto& api = *static_cast<const fe_device_plugin*>(state);
  OpDesc desc(n);
  std::deque<std::vector<int64_t>> dims;
  for (const Value* v : n.inputs) {
    if (!v || !v->type.shape.rank_known()) {
      if (v) return false;  // unknown rank: nothing to describe
      desc.add(false, DType::kUndefined, nullptr, nullptr, nullptr);
      continue;
    }
    auto& d = dims.emplace_back(static_dims(v->type.shape));
    const void* host = v->constant ? v->constant->raw() : nullptr;
    if (!desc.add(false, v->type.dtype, &d, nullptr, host)) return false;
  }
  for (const Value* v : n.outputs) {
    if (!v) {
      desc.add(true, DType::kUndefined, nullptr, nullptr, nullptr);
      continue;
    }
    if (!v->type.shape.rank_known()) return false;
    auto& d = dims.emplace_back(static_dims(v->type.shape));
    if (!desc.add(true, v->type.dtype, &d, nullptr, nullptr)) return false;
  }
  int32_t accepted = 0;
  // A plugin's error here only means "not accepted": the step then runs elsewhere.
  return api.library_accepts(desc.get(), &accepted) == FE_OK && accepted == 1;
}

Expected<bool> run_device(const Node& n, DeviceCall& call, void* state) {
  const auto& api = *static_cast<const fe_device_plugin*>(state);
  OpDesc desc(n);
  for (const auto& in : call.in) {
    if (!in) {
      desc.add(false, DType::kUndefined, nullptr, nullptr, nullptr);
      continue;
    }
    const void* host = in->host ? in->host->raw() : nullptr;
    if (!desc.add(false, in->dtype, &in->dims, const_cast<void*>(in->ptr), host)) return false;
  }
  std::deque<std::vector<int64_t>> dims;
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (!n.outputs[i]) {
      desc.add(true, DType::kUndefined, nullptr, nullptr, nullptr);
      continue;
    }
    FERRITE_ASSIGN_OR_RETURN(auto d, call.output_dims(i));
    auto& kept = dims.emplace_back(std::move(d));
    const DType dt = n.outputs[i]->type.dtype;
    FERRITE_ASSIGN_OR_RETURN(void* p, call.output(i, dt, kept));
    if (!desc.add(true, dt, &kept, p, nullptr)) return false;
  }
  fe_status st = api.library_run(desc.get(), 0);
  if (st == FE_OK) return true;
  if (st == FE_ERROR_UNIMPLEMENTED) return false;  // declined at run time: the host runs it
  return err(n.describe(), ": ", api.spec->name,
             " library_run failed: ", describe_plugin_error(api, st));
}

bool on_device(const Node&, const std::vector<int64_t>&) {
  return true;
}

}  // namespace

std::string describe_plugin_error(const fe_device_plugin& api, fe_status code) {
  std::string s = api.error_string ? api.error_string(code) : "error";
  s += " (" + std::to_string(code) + ")";
  if (api.last_error_message) {
    const char* m = api.last_error_message();
    if (m && *m) s += ": " + std::string(m);
  }
  return s;
}

bool plugin_lists_op(const fe_device_spec& spec, std::string_view domain,
                     std::string_view op_type) {
  domain = canonical_domain(domain);
  for (int32_t i = 0; i < spec.library_ops_count; ++i) {
    const char* e = spec.library_ops[i];
    if (!e) continue;
    std::string_view entry = e, d = "", op = entry;
    if (size_t sep = entry.find("::"); sep != std::string_view::npos) {
      d = canonical_domain(entry.substr(0, sep));
      op = entry.substr(sep + 2);
    }
    if (d == domain && op == op_type) return true;
  }
  return false;
}

std::shared_ptr<const LibraryOps> make_plugin_library(const LoadedPlugin& plugin) {
  const fe_device_plugin& api = *plugin.api;
  if (!api.library_run || api.spec->library_ops_count <= 0) return nullptr;
  auto ops = std::make_shared<LibraryOps>();
  for (int32_t i = 0; i < api.spec->library_ops_count; ++i) {
    const char* e = api.spec->library_ops[i];
    if (!e) continue;
    std::string_view entry = e, domain = "", op = entry;
    if (size_t sep = entry.find("::"); sep != std::string_view::npos) {
      domain = entry.substr(0, sep);
      op = entry.substr(sep + 2);
    }
    LibraryOp o;
    o.accepts = accepts;
    o.run_device = run_device;
    // Graph inputs arrive on the host: the op still runs on the device (the input is uploaded)
    // rather than the whole step falling back to the host.
    o.prefer_device = on_device;
    ops->add(canonical_domain(domain), op, o);
  }
  return ops;
}

}  // namespace ferrite
