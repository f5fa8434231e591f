#include "graph_gen.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <numeric>
#include <random>

namespace ferrite::fuzz {

namespace {

constexpr int64_t kDimChoices[] = {1, 2, 3, 4, 5, 8, 16};

struct Val {
  std::string name;
  std::vector<int64_t> dims;
};

int64_t numel(const std::vector<int64_t>& dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
}

class Generator {
 public:
  Generator(FuzzedDataProvider& fdp) : fdp_(fdp) {
    model_.set_ir_version(8);
    model_.set_producer_name("ferrite-fuzz");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(17);
    g_ = model_.mutable_graph();
    g_->set_name("fuzz");
  }

  GeneratedGraph run();

 private:
  std::string fresh(const char* prefix) { return prefix + std::to_string(counter_++); }
  int64_t pick_dim() { return fdp_.PickValueInArray(kDimChoices); }
  std::vector<int64_t> pick_dims(size_t min_rank, size_t max_rank) {
    std::vector<int64_t> dims(fdp_.ConsumeIntegralInRange<size_t>(min_rank, max_rank));
    for (int64_t& d : dims) d = pick_dim();
    for (size_t i = dims.size(); i > 0 && numel(dims) > kMaxElements; --i) dims[i - 1] = 1;
    return dims;
  }
  const Val& pick() { return vals_[fdp_.ConsumeIntegralInRange<size_t>(0, vals_.size() - 1)]; }
  int64_t pick_axis(size_t rank) {
    return fdp_.ConsumeIntegralInRange<int64_t>(-static_cast<int64_t>(rank),
                                                static_cast<int64_t>(rank) - 1);
  }
  static size_t positive(int64_t axis, size_t rank) {
    return static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(rank) : axis);
  }

  Val input(std::vector<int64_t> dims);
  std::string const_f32(float v);
  std::string const_i64(const std::vector<int64_t>& v);
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> ins, const Val& out);
  static void attr_int(onnx::NodeProto* n, const char* name, int64_t v);
  static void attr_ints(onnx::NodeProto* n, const char* name, const std::vector<int64_t>& v);

  // One op over existing values; false when the picked values do not fit it.
  bool add_op(int kind);
  bool unary();
  bool binary();
  bool reduce();
  bool softmax();
  bool matmul();
  bool reshape();
  bool transpose();
  bool unsqueeze_or_squeeze();
  bool concat();
  bool slice();
  bool layernorm();
  bool where();

  FuzzedDataProvider& fdp_;
  onnx::ModelProto model_;
  onnx::GraphProto* g_;
  bool symbolic_ = false;
  int counter_ = 0;
  std::vector<Val> vals_;
  std::vector<Val> inputs_;
  std::set<std::string> ops_;
};

Val Generator::input(std::vector<int64_t> dims) {
  Val v{fresh("x"), std::move(dims)};
  auto* vi = g_->add_input();
  vi->set_name(v.name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = tt->mutable_shape();
  for (int64_t d : v.dims) {
    // Symbolic inputs name every dim by its size ("d4"), so that equal sizes share a symbol and
    // broadcasting stays provable; 1 stays static (it broadcasts).
    if (symbolic_ && d != 1)
      shape->add_dim()->set_dim_param("d" + std::to_string(d));
    else
      shape->add_dim()->set_dim_value(d);
  }
  inputs_.push_back(v);
  vals_.push_back(v);
  return v;
}

std::string Generator::const_f32(float v) {
  auto* t = g_->add_initializer();
  t->set_name(fresh("c"));
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_float_data(v);
  return t->name();
}

std::string Generator::const_i64(const std::vector<int64_t>& v) {
  auto* t = g_->add_initializer();
  t->set_name(fresh("c"));
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t->add_int64_data(x);
  return t->name();
}

onnx::NodeProto* Generator::node(const std::string& op, std::vector<std::string> ins,
                                 const Val& out) {
  auto* n = g_->add_node();
  n->set_op_type(op);
  n->set_name(fresh("n"));
  for (auto& i : ins) n->add_input(i);
  n->add_output(out.name);
  ops_.insert(op);
  vals_.push_back(out);
  return n;
}

void Generator::attr_int(onnx::NodeProto* n, const char* name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void Generator::attr_ints(onnx::NodeProto* n, const char* name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

bool Generator::unary() {
  static const char* kOps[] = {"Relu", "Neg", "Abs", "Exp",        "Tanh",  "Sigmoid",
                               "Sqrt", "Erf", "Sin", "Reciprocal", "Floor", "LeakyRelu"};
  Val a = pick();
  node(fdp_.PickValueInArray(kOps), {a.name}, {fresh("v"), a.dims});
  return true;
}

bool Generator::binary() {
  static const char* kOps[] = {"Add", "Sub", "Mul", "Div", "Max", "Min"};
  Val a = pick();
  std::string b;
  int source = fdp_.ConsumeIntegralInRange(0, 2);
  if (source == 0) {
    b = const_f32(static_cast<float>(fdp_.ConsumeIntegralInRange(-8, 8)) / 4);
  } else {
    // A new input broadcasting against `a`: a suffix of its dims with some set to 1.
    std::vector<int64_t> dims(
        a.dims.begin() + fdp_.ConsumeIntegralInRange<size_t>(0, a.dims.size()), a.dims.end());
    for (int64_t& d : dims)
      if (fdp_.ConsumeBool()) d = 1;
    b = source == 1 ? input(dims).name : "";
    if (source == 2) {
      // Or an existing value of exactly a's shape (a itself when there is no other).
      for (const Val& v : vals_)
        if (v.dims == a.dims && (b.empty() || fdp_.ConsumeBool())) b = v.name;
    }
  }
  bool swap = fdp_.ConsumeBool();
  node(fdp_.PickValueInArray(kOps), swap ? std::vector{b, a.name} : std::vector{a.name, b},
       {fresh("v"), a.dims});
  return true;
}

bool Generator::reduce() {
  static const char* kOps[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"};
  Val a = pick();
  if (a.dims.empty()) return false;
  const char* op = fdp_.PickValueInArray(kOps);
  int64_t axis = pick_axis(a.dims.size());
  bool keep = fdp_.ConsumeBool();
  std::vector<int64_t> out = a.dims;
  if (keep)
    out[positive(axis, a.dims.size())] = 1;
  else
    out.erase(out.begin() + static_cast<int64_t>(positive(axis, a.dims.size())));
  onnx::NodeProto* n;
  // Opset 17: ReduceSum takes its axes as an input, the others as an attribute.
  if (std::string(op) == "ReduceSum") {
    n = node(op, {a.name, const_i64({axis})}, {fresh("v"), out});
  } else {
    n = node(op, {a.name}, {fresh("v"), out});
    attr_ints(n, "axes", {axis});
  }
  attr_int(n, "keepdims", keep);
  return true;
}

bool Generator::softmax() {
  Val a = pick();
  if (a.dims.empty()) return false;
  auto* n = node(fdp_.ConsumeBool() ? "Softmax" : "LogSoftmax", {a.name}, {fresh("v"), a.dims});
  attr_int(n, "axis", pick_axis(a.dims.size()));
  return true;
}

bool Generator::matmul() {
  Val a = pick();
  if (a.dims.empty()) return false;
  int64_t k = a.dims.back(), n = pick_dim();
  std::vector<int64_t> out = a.dims;
  out.back() = n;
  if (a.dims.size() == 1) out = {n};
  if (numel(out) > kMaxElements) return false;
  if (fdp_.ConsumeBool() && a.dims.size() == 2) {
    // The value as the right operand: [n, a0] x [a0, a1].
    Val x = input({n, a.dims[0]});
    node("MatMul", {x.name, a.name}, {fresh("v"), {n, a.dims[1]}});
    return true;
  }
  Val w = input({k, n});
  node("MatMul", {a.name, w.name}, {fresh("v"), out});
  return true;
}

bool Generator::reshape() {
  Val a = pick();
  std::vector<int64_t> target;
  int64_t total = numel(a.dims);
  switch (fdp_.ConsumeIntegralInRange(0, 2)) {
    case 0:  // flatten
      target = {total};
      break;
    case 1:  // [-1, last]
      if (a.dims.empty()) return false;
      target = {-1, a.dims.back()};
      break;
    default:  // a leading 1
      target = a.dims;
      target.insert(target.begin(), 1);
      break;
  }
  std::vector<int64_t> out = target;
  if (out.size() == 2 && out[0] == -1) out[0] = a.dims.back() == 0 ? 0 : total / a.dims.back();
  node("Reshape", {a.name, const_i64(target)}, {fresh("v"), out});
  return true;
}

bool Generator::transpose() {
  Val a = pick();
  if (a.dims.size() < 2) return false;
  std::vector<int64_t> perm(a.dims.size());
  std::iota(perm.begin(), perm.end(), 0);
  for (size_t i = perm.size() - 1; i > 0; --i)
    std::swap(perm[i], perm[fdp_.ConsumeIntegralInRange<size_t>(0, i)]);
  std::vector<int64_t> out;
  for (int64_t p : perm) out.push_back(a.dims[static_cast<size_t>(p)]);
  attr_ints(node("Transpose", {a.name}, {fresh("v"), out}), "perm", perm);
  return true;
}

bool Generator::unsqueeze_or_squeeze() {
  Val a = pick();
  std::vector<int64_t> out = a.dims;
  for (size_t i = 0; i < a.dims.size(); ++i) {
    if (a.dims[i] != 1 || !fdp_.ConsumeBool()) continue;
    out.erase(out.begin() + static_cast<int64_t>(i));
    node("Squeeze", {a.name, const_i64({static_cast<int64_t>(i)})}, {fresh("v"), out});
    return true;
  }
  if (a.dims.size() >= 4) return false;
  int64_t axis = fdp_.ConsumeIntegralInRange<int64_t>(0, static_cast<int64_t>(a.dims.size()));
  out.insert(out.begin() + axis, 1);
  node("Unsqueeze", {a.name, const_i64({axis})}, {fresh("v"), out});
  return true;
}

bool Generator::concat() {
  Val a = pick();
  if (a.dims.empty() || numel(a.dims) * 2 > kMaxElements) return false;
  int64_t axis = pick_axis(a.dims.size());
  std::vector<int64_t> out = a.dims;
  out[positive(axis, a.dims.size())] *= 2;
  Val b = fdp_.ConsumeBool() ? input(a.dims) : a;
  attr_int(node("Concat", {a.name, b.name}, {fresh("v"), out}), "axis", axis);
  return true;
}

bool Generator::slice() {
  Val a = pick();
  if (a.dims.empty()) return false;
  size_t axis = fdp_.ConsumeIntegralInRange<size_t>(0, a.dims.size() - 1);
  int64_t d = a.dims[axis];
  int64_t start = fdp_.ConsumeIntegralInRange<int64_t>(0, d - 1);
  int64_t end = fdp_.ConsumeIntegralInRange<int64_t>(start + 1, d);
  std::vector<int64_t> out = a.dims;
  out[axis] = end - start;
  node("Slice",
       {a.name, const_i64({start}), const_i64({end}), const_i64({static_cast<int64_t>(axis)})},
       {fresh("v"), out});
  return true;
}

bool Generator::layernorm() {
  Val a = pick();
  if (a.dims.empty()) return false;
  Val scale = input({a.dims.back()});
  std::vector<std::string> ins{a.name, scale.name};
  if (fdp_.ConsumeBool()) ins.push_back(input({a.dims.back()}).name);
  attr_int(node("LayerNormalization", ins, {fresh("v"), a.dims}), "axis", -1);
  return true;
}

bool Generator::where() {
  Val a = pick();
  Val b = pick();
  if (a.dims != b.dims) b = a;
  Val cond{fresh("v"), a.dims};
  node("Greater", {a.name, const_f32(0)}, cond);
  vals_.pop_back();  // bool: not an operand for the float ops
  node("Where", {cond.name, a.name, b.name}, {fresh("v"), a.dims});
  return true;
}

bool Generator::add_op(int kind) {
  switch (kind) {
    case 0:
      return unary();
    case 1:
      return binary();
    case 2:
      return reduce();
    case 3:
      return softmax();
    case 4:
      return matmul();
    case 5:
      return reshape();
    case 6:
      return transpose();
    case 7:
      return unsqueeze_or_squeeze();
    case 8:
      return concat();
    case 9:
      return slice();
    case 10:
      return layernorm();
    default:
      return where();
  }
}

GeneratedGraph Generator::run() {
  symbolic_ = fdp_.ConsumeBool();
  uint64_t seed = fdp_.ConsumeIntegral<uint64_t>();
  input(pick_dims(1, 4));
  int ops = fdp_.ConsumeIntegralInRange(1, kMaxOps);
  for (int i = 0; i < ops && fdp_.remaining_bytes() > 0; ++i)
    add_op(fdp_.ConsumeIntegralInRange(0, 11));
  // The last value is an output; sometimes an intermediate too (a value read inside a fused
  // kernel and also stored).
  std::vector<const Val*> outs{&vals_.back()};
  if (vals_.size() > 2 && fdp_.ConsumeBool()) outs.push_back(&vals_[vals_.size() / 2]);
  if (outs.size() == 2 && outs[1]->name == outs[0]->name) outs.pop_back();
  for (const Val* v : outs) {
    auto* vi = g_->add_output();
    vi->set_name(v->name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  GeneratedGraph out;
  model_.SerializeToString(&out.model);
  out.ops = ops_;
  std::mt19937_64 rng(seed);
  for (const Val& v : inputs_) {
    Tensor t = Tensor::zeros(DType::kF32, v.dims);
    // Multiples of 1/4 in [-2, 2]: sums and products stay exact, so differences come from the
    // device, not from rounding in another summation order.
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = static_cast<float>(static_cast<int>(rng() % 17) - 8) / 4;
    out.inputs.push_back({v.name, std::move(t)});
  }
  return out;
}

}  // namespace

GeneratedGraph generate_graph(FuzzedDataProvider& fdp) {
  return Generator(fdp).run();
}

}  // namespace ferrite::fuzz
