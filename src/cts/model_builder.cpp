#include "cts/model_builder.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>

namespace ferrite::cts {

namespace {

std::string prefixed(size_t k, const std::string& name) {
  return name.empty() ? name : "c" + std::to_string(k) + "_" + name;
}

int64_t bind(const DimSpec& d, const std::map<std::string, int64_t>& binding) {
  if (auto* v = std::get_if<int64_t>(&d)) return *v;
  auto it = binding.find(std::get<std::string>(d));
  return it == binding.end() ? 3 : it->second;
}

// Cases spell integer edge values as doubles (INT64_MAX is 2^63 as a double, one past the
// range): clamp, since converting an out-of-range double to an integer is undefined.
template <class T>
T saturate(double v) {
  if (std::isnan(v)) return 0;
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  return static_cast<T>(v);
}

void set_element(Tensor& t, int64_t i, double v) {
  visit_dtype(t.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>)
      t.data<T>()[i] = v != 0;
    else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
      t.data<T>()[i] = T(static_cast<float>(v));
    else if constexpr (std::is_integral_v<T>)
      t.data<T>()[i] = saturate<T>(v);
    else
      t.data<T>()[i] = static_cast<T>(v);
  });
}

void to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p) {
  p->set_name(name);
  p->set_data_type(dtype_to_onnx(t.dtype()));
  for (int64_t d : t.dims()) p->add_dims(d);
  p->set_raw_data(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
}

Status set_attr(onnx::AttributeProto* a, const std::string& name, const Attribute& v) {
  a->set_name(name);
  switch (v.type()) {
    case AttrType::kInt:
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(v.i());
      break;
    case AttrType::kFloat:
      a->set_type(onnx::AttributeProto::FLOAT);
      a->set_f(v.f());
      break;
    case AttrType::kString:
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s(v.s());
      break;
    case AttrType::kInts:
      a->set_type(onnx::AttributeProto::INTS);
      for (int64_t x : v.ints()) a->add_ints(x);
      break;
    case AttrType::kFloats:
      a->set_type(onnx::AttributeProto::FLOATS);
      for (float x : v.floats()) a->add_floats(x);
      break;
    case AttrType::kTensor:
      a->set_type(onnx::AttributeProto::TENSOR);
      to_proto(v.t(), "", a->mutable_t());
      break;
    default:
      return err("attribute '", name, "': kind not supported by the cts model builder");
  }
  return Status::ok();
}

// FNV-1a of the case, tensor and run: inputs do not depend on which cases run or in what order.
uint64_t case_seed(const Case& c, const std::string& tensor, size_t run) {
  uint64_t h = 1469598103934665603ull;
  for (char ch : c.name + "/" + tensor + "/" + std::to_string(run)) {
    h ^= static_cast<uint8_t>(ch);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

Tensor generate_tensor(DType dtype, const std::vector<int64_t>& dims, const ValueGen& gen,
                       uint64_t seed) {
  Tensor t = Tensor::zeros(dtype, dims);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(gen.lo, gen.hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = 0;
    switch (gen.kind) {
      case ValueGen::kUniform:
        // Bounded redraws: a range entirely inside the excluded band keeps its last draw.
        for (int tries = 0; tries < 64; ++tries) {
          v = uni(rng);
          if (std::fabs(v) >= gen.away_from_zero) break;
        }
        // Integer dtypes get whole numbers from the range.
        if (!is_float(dtype)) v = std::floor(v);
        break;
      case ValueGen::kInt:
        v = static_cast<double>(std::uniform_int_distribution<int64_t>(
            static_cast<int64_t>(gen.lo), static_cast<int64_t>(gen.hi))(rng));
        break;
      case ValueGen::kBool:
        v = static_cast<double>(rng() & 1);
        break;
      case ValueGen::kValues:
        v = gen.values.empty() ? 0 : gen.values[static_cast<size_t>(i) % gen.values.size()];
        break;
    }
    set_element(t, i, v);
  }
  return t;
}

size_t run_count(const std::vector<const Case*>& cases) {
  size_t n = 1;
  for (const Case* c : cases) n = std::max(n, c->runs.size());
  return n;
}

Expected<std::string> build_model(const std::vector<const Case*>& cases) {
  onnx::ModelProto model;
  model.set_ir_version(9);
  model.set_producer_name("ferrite-cts");
  int opset = 0;
  // Other domains (ferrite, ai.onnx.ml, ai.onnx.preview.training) are imported at version 1.
  std::set<std::string> domains;
  for (const Case* c : cases) {
    opset = std::max(opset, c->opset ? c->opset : 17);
    for (const auto& n : c->nodes)
      if (!n.domain.empty()) domains.insert(n.domain);
  }
  auto* op = model.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  for (const auto& d : domains) {
    auto* dop = model.add_opset_import();
    dop->set_domain(d);
    dop->set_version(1);
  }
  auto* g = model.mutable_graph();
  g->set_name("cts");
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = *cases[k];
    for (const auto& t : c.tensors) {
      if (t.constant) {
        std::vector<int64_t> dims;
        for (const auto& d : t.dims) {
          if (!std::holds_alternative<int64_t>(d))
            return err("case ", c.name, ": constant '", t.name, "' has a symbolic dim");
          dims.push_back(std::get<int64_t>(d));
        }
        to_proto(generate_tensor(t.dtype, dims, t.gen, case_seed(c, t.name, 0)),
                 prefixed(k, t.name), g->add_initializer());
        continue;
      }
      auto* vi = g->add_input();
      vi->set_name(prefixed(k, t.name));
      auto* tt = vi->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(dtype_to_onnx(t.dtype));
      auto* shape = tt->mutable_shape();
      for (const auto& d : t.dims) {
        auto* dim = shape->add_dim();
        if (auto* v = std::get_if<int64_t>(&d))
          dim->set_dim_value(*v);
        else
          dim->set_dim_param(prefixed(k, std::get<std::string>(d)));
      }
    }
    for (size_t i = 0; i < c.nodes.size(); ++i) {
      const NodeSpec& ns = c.nodes[i];
      auto* n = g->add_node();
      n->set_op_type(ns.op);
      n->set_domain(ns.domain);
      n->set_name(prefixed(k, ns.op + std::to_string(i)));
      for (const auto& in : ns.inputs) n->add_input(prefixed(k, in));
      for (const auto& out : ns.outputs) n->add_output(prefixed(k, out));
      for (const auto& [name, v] : ns.attrs)
        FERRITE_RETURN_IF_ERROR(set_attr(n->add_attribute(), name, v).with_context(c.name));
    }
    for (const auto& out : c.outputs) g->add_output()->set_name(prefixed(k, out));
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes)) return err("cannot serialize the cts model");
  return bytes;
}

Expected<std::vector<Session::NamedInput>> make_inputs(const std::vector<const Case*>& cases,
                                                       size_t run) {
  std::vector<Session::NamedInput> inputs;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = *cases[k];
    size_t r = std::min(run, c.runs.size() - 1);
    for (const auto& t : c.tensors) {
      if (t.constant) continue;
      std::vector<int64_t> dims;
      for (const auto& d : t.dims) dims.push_back(bind(d, c.runs[r]));
      inputs.push_back(
          {prefixed(k, t.name), generate_tensor(t.dtype, dims, t.gen, case_seed(c, t.name, r))});
    }
  }
  return inputs;
}

}  // namespace ferrite::cts
