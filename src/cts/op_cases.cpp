// Case generation from the op table: every registered schema gets cases from the per-op table
// (op_overrides.cpp) or, failing that, from its arity and type constraints.
#include <algorithm>
#include <limits>

#include "cts/case_util.h"

namespace ferrite::cts {

ValueGen default_gen(DType t) {
  if (t == DType::kBool) return ValueGen::boolean();
  if (is_float(t)) return ValueGen::uniform(-2, 2);
  if (is_signed(t)) return ValueGen::ints(-5, 5);
  return ValueGen::ints(0, 9);
}

TensorSpec in(std::string name, DType t, std::vector<DimSpec> dims) {
  return in(std::move(name), t, std::move(dims), default_gen(t));
}
TensorSpec in(std::string name, DType t, std::vector<DimSpec> dims, ValueGen g) {
  TensorSpec s;
  s.name = std::move(name);
  s.dtype = t;
  s.dims = std::move(dims);
  s.gen = std::move(g);
  return s;
}
TensorSpec cst(std::string name, DType t, std::vector<int64_t> dims, ValueGen g) {
  std::vector<DimSpec> d(dims.begin(), dims.end());
  TensorSpec s = in(std::move(name), t, std::move(d), std::move(g));
  s.constant = true;
  return s;
}
TensorSpec cst(std::string name, DType t, std::vector<int64_t> dims, std::vector<double> values) {
  return cst(std::move(name), t, std::move(dims), ValueGen::exactly(std::move(values)));
}
TensorSpec ints(std::string name, std::vector<int64_t> values, bool scalar) {
  std::vector<double> v(values.begin(), values.end());
  std::vector<int64_t> dims;
  if (!scalar) dims.push_back(static_cast<int64_t>(values.size()));
  return cst(std::move(name), kI64, dims, std::move(v));
}
TensorSpec omitted() {
  return TensorSpec{};
}

Case single(const std::string& op, const std::string& variant, std::vector<TensorSpec> inputs,
            Attrs attrs, int num_outputs, const std::string& domain) {
  Case c;
  c.group = domain.empty() ? op : domain + "." + op;
  c.name = c.group + "/" + variant;
  NodeSpec n;
  n.op = op;
  n.domain = domain;
  n.attrs = std::move(attrs);
  for (auto& t : inputs) {
    n.inputs.push_back(t.name);
    if (!t.name.empty()) c.tensors.push_back(std::move(t));
  }
  while (!n.inputs.empty() && n.inputs.back().empty()) n.inputs.pop_back();
  for (int i = 0; i < num_outputs; ++i) {
    n.outputs.push_back("y" + std::to_string(i));
    c.outputs.push_back(n.outputs.back());
  }
  c.nodes.push_back(std::move(n));
  return c;
}

Case with_runs(Case c, std::vector<int64_t> sizes) {
  c.runs.clear();
  for (int64_t n : sizes) c.runs.push_back({{"N", n}});
  return c;
}

std::vector<DType> pick_dtypes(DTypeSet allowed) {
  std::vector<DType> out;
  for (DType t : {kF32, kF16, kF64, kI32, kI64, kBool})
    if (allowed.contains(t)) out.push_back(t);
  if (out.empty())
    for (DType t : {kU8, kU32, DType::kI8})
      if (allowed.contains(t)) return {t};
  return out;
}

DTypeSet input_types(const OpSchema& s, int i) {
  for (const auto& tc : s.type_constraints)
    if (tc.covers(i)) return tc.allowed;
  return dtypes::kNumeric | dtypes::kBool;
}

std::string dtype_tag(DType t) {
  return std::string(dtype_name(t));
}

ValueGen special_values(size_t cycle) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {std::numeric_limits<double>::quiet_NaN(),
                           inf,
                           -inf,
                           0.0,
                           -0.0,
                           1,
                           -1,
                           0.5,
                           30,
                           -30,
                           1e-30,
                           100};
  if (cycle < v.size())
    std::rotate(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(cycle), v.end());
  return ValueGen::exactly(v);
}

void unary_cases(const OpSchema& s, const UnaryOpts& o, std::vector<Case>& out) {
  for (DType t : pick_dtypes(input_types(s, 0))) {
    ValueGen g = is_float(t) ? o.float_gen : default_gen(t);
    if (t == kF32) {
      out.push_back(single(s.name, "f32/static", {in("x", t, {2, 3, 5}, g)}));
      Case sym = single(s.name, "f32/symbolic", {in("x", t, {std::string("N"), 7}, g)});
      sym.runs = {{{"N", 4}}};
      out.push_back(std::move(sym));
      // Rows longer than a vector and than one thread's share, with a ragged tail.
      out.push_back(single(s.name, "f32/large", {in("x", t, {37, 1031}, g)}));
      // NaN, infinities, signed zeros, tiny and large values: fast approximations must keep
      // the reference's NaN positions and limits.
      out.push_back(single(s.name, "f32/special", {in("x", t, {3, 12}, special_values())}));
      // Zero elements: nothing to compute, but shapes, launches and allocations must cope.
      out.push_back(single(s.name, "f32/empty", {in("x", t, {0, 5}, g)}));
      for (const auto& [variant, attrs] : o.attr_variants)
        out.push_back(single(s.name, "f32/" + variant, {in("x", t, {3, 4}, g)}, attrs));
    } else {
      out.push_back(single(s.name, dtype_tag(t), {in("x", t, {4, 5}, g)}));
      if (t == kF16 || t == kF64)
        out.push_back(
            single(s.name, dtype_tag(t) + "/special", {in("x", t, {2, 12}, special_values())}));
    }
  }
}

void binary_cases(const OpSchema& s, const BinaryOpts& o, std::vector<Case>& out) {
  std::vector<DType> types = o.dtypes.empty() ? pick_dtypes(input_types(s, 0)) : o.dtypes;
  for (DType t : types) {
    bool f = is_float(t);
    ValueGen ga = f ? o.a_float : o.a_int.value_or(default_gen(t));
    ValueGen gb = f ? o.b_float : o.b_int.value_or(default_gen(t));
    auto add = [&](const std::string& v, std::vector<DimSpec> a, std::vector<DimSpec> b) {
      Case c =
          single(s.name, dtype_tag(t) + "/" + v, {in("a", t, a, ga), in("b", t, b, gb)}, o.attrs);
      c.runs = {{{"N", 5}}};
      out.push_back(std::move(c));
    };
    if (t == kF32) {
      add("same", {3, 4}, {3, 4});
      add("broadcast", {2, 3, 4}, {3, 1});
      add("broadcast-both", {2, 1, 4}, {3, 1});
      add("scalar", {3, 4}, {});
      add("symbolic", {std::string("N"), 4}, {4});
      add("large-broadcast", {64, 257}, {257});
      add("empty", {0, 4}, {4});
      Case sp = single(
          s.name, "f32/special",
          {in("a", t, {6, 7}, special_values()), in("b", t, {6, 7}, special_values(5))}, o.attrs);
      out.push_back(std::move(sp));
    } else {
      add("broadcast", {3, 4}, {4});
    }
  }
}

namespace {

// Generic cases from the schema alone: unary when one input, binary when two inputs share a type
// constraint. Other shapes of op need a table entry.
std::string generic_cases(const OpSchema& s, std::vector<Case>& out) {
  for (const auto& a : s.attrs)
    if (a.required) return "required attribute '" + a.name + "'";
  if (s.min_inputs <= 1 && s.max_inputs >= 1 && s.min_outputs == 1) {
    unary_cases(s, {}, out);
    return "";
  }
  if (s.min_inputs == 2 && s.min_outputs == 1) {
    for (const auto& tc : s.type_constraints) {
      if (std::find(tc.inputs.begin(), tc.inputs.end(), 1) != tc.inputs.end() &&
          std::find(tc.inputs.begin(), tc.inputs.end(), 0) != tc.inputs.end() && tc.same) {
        binary_cases(s, {}, out);
        return "";
      }
    }
  }
  return str_cat(s.min_inputs, "..", s.max_inputs, " inputs with distinct roles");
}

}  // namespace

std::vector<OpCases> op_cases() {
  std::vector<OpCases> all;
  const auto& schemas = OpRegistry::global().all();
  for (const OpSchema& s : schemas) {
    OpCases oc;
    oc.op = s.domain.empty() ? s.name : s.domain + "." + s.name;
    // Ops registered once per opset range get one row each ("BatchNormalization@13").
    int same_name = 0;
    for (const OpSchema& o : schemas) same_name += o.name == s.name && o.domain == s.domain;
    if (same_name > 1) oc.op += "@" + std::to_string(s.since_version);
    bool subgraph = false;
    for (const auto& a : s.attrs) subgraph = subgraph || a.type == AttrType::kGraph;
    if (!s.foldable && (s.any_value_kind || subgraph)) {
      // The generators make tensors; these ops take sequences, optionals or subgraphs.
      oc.skipped =
          "sequences, optionals or subgraphs: tests/unit/sequence_test.cpp, "
          "control_flow_test.cpp and the ONNX node suite";
    } else if (!s.foldable) {
      // A collective's result is its group's: tests/unit/collective_test.cpp runs them over
      // loopback groups, and the tensor-parallel model tests through every device's runs.
      oc.skipped = "collective: runs only in a tensor-parallel group";
    } else if (!override_cases(s, oc.cases)) {
      std::string why = generic_cases(s, oc.cases);
      if (!why.empty()) oc.skipped = "no generator: " + why;
    }
    int opset = std::clamp(21, s.since_version, s.last_version);
    if (!s.domain.empty()) opset = 21;
    for (Case& c : oc.cases) {
      c.group = oc.op;
      // Generic cases of an internal op (ferrite.Silu) are built in the schema's domain.
      for (auto& n : c.nodes)
        if (n.domain.empty() && n.op == s.name) n.domain = s.domain;
      // Keep names unique across the opset rows of one op.
      if (same_name > 1) c.name = oc.op + c.name.substr(c.name.find('/'));
      if (c.opset == 0) c.opset = opset;
    }
    all.push_back(std::move(oc));
  }
  return all;
}

}  // namespace ferrite::cts
