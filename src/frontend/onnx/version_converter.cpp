#include "frontend/onnx/version_converter.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "ops/context.h"
#include "ops/numeric_cast.h"
#include "ops/op_schema.h"

namespace ferrite {

namespace {

// What an adapter works with: the node being upgraded (its inputs already inferred) and ways to
// add constants and nodes in front of it. Nodes it adds are at the target opset and inferred
// at once, so later adapters in the same chain see their types.
class UpgradeContext {
 public:
  UpgradeContext(Graph& g, Node& node) : g_(g), node_(node) {}
  Node& node() { return node_; }
  Graph& graph() { return g_; }

  Status unsupported_here(const std::string& why) const {
    return unsupported(node_.describe(), ": cannot upgrade from opset ", node_.opset, ": ", why);
  }
  // The input's inferred type; an error when the input is absent.
  Expected<const TensorType*> input_type(size_t i) const {
    Value* v = node_.input(i);
    if (!v) return err(node_.describe(), ": input ", i, " is required");
    return &v->type;
  }
  Value* const_i64(const std::vector<int64_t>& values, bool as_scalar = false) {
    std::vector<int64_t> dims;
    if (!as_scalar) dims.push_back(static_cast<int64_t>(values.size()));
    return g_.add_initializer(node_.name + "_upgraded",
                              Tensor::from_vector<int64_t>(values, std::move(dims)));
  }
  // A scalar of `dtype` holding `v` (saturating, as Cast does).
  Expected<Value*> const_scalar(double v, DType dtype) {
    FERRITE_ASSIGN_OR_RETURN(Tensor t, Tensor::create(dtype, {}));
    bool known = visit_dtype(dtype, [&]<class T>() { t.data<T>()[0] = saturate_cast<T>(v); });
    if (!known) return unsupported_here(str_cat("no constant of type ", dtype_name(dtype)));
    return g_.add_initializer(node_.name + "_upgraded", std::move(t));
  }
  // Adds `op` (default domain, target opset) in front of the node, infers it and returns it.
  Expected<Node*> insert_before(const std::string& op, std::vector<Value*> inputs,
                                AttributeMap attrs = {}) {
    Node* n = g_.add_node(op, g_.unique_name(node_.name + "_" + op));
    n->opset = kConvertTargetOpset;
    n->schema = OpRegistry::global().find("", op, kConvertTargetOpset);
    if (!n->schema) return err("version converter: no schema for ", op);
    n->inputs = std::move(inputs);
    n->attrs = std::move(attrs);
    Value* out = g_.add_value(g_.unique_name(n->name));
    out->producer = n;
    out->producer_output = 0;
    n->outputs.push_back(out);
    g_.move_before(n, &node_);
    FERRITE_RETURN_IF_ERROR(infer_node(*n));
    return n;
  }
  // The attribute if present (null if not), checked to have type `t`: adapters run before the
  // schema validates the node, and the model is untrusted.
  Expected<const Attribute*> attr(const std::string& name, AttrType t) const {
    auto it = node_.attrs.find(name);
    if (it == node_.attrs.end()) return nullptr;
    if (it->second.type() != t)
      return err(node_.describe(), ": attribute '", name, "' must be ", attr_type_name(t), ", got ",
                 attr_type_name(it->second.type()));
    return &it->second;
  }
  // Moves an ints attribute to input `index` as an i64 tensor (absent inputs before it stay
  // empty); an absent attribute leaves the input absent, which means the same at the target.
  Status ints_attr_to_input(const std::string& name, size_t index) {
    FERRITE_ASSIGN_OR_RETURN(const Attribute* a, attr(name, AttrType::kInts));
    if (!a) return Status::ok();
    Value* v = const_i64(a->ints());
    node_.attrs.erase(name);
    set_input(index, v);
    return Status::ok();
  }
  void set_input(size_t index, Value* v) {
    if (node_.inputs.size() <= index) node_.inputs.resize(index + 1, nullptr);
    node_.inputs[index] = v;
  }

 private:
  Graph& g_;
  Node& node_;
};

using Adapter = std::function<Status(UpgradeContext&)>;

// One step of an op's ONNX history: the version it reaches and the adapter from the previous
// version (null: compatible, the old behaviour is the new one's default).
struct Step {
  int version;
  Adapter adapt;
};

struct OpHistory {
  int first;                // the earliest version the converter accepts
  std::vector<Step> steps;  // later versions up to the target, ascending
};

// ---- adapters ---------------------------------------------------------------------------------

// Opset 6 dropped `consumed_inputs`, a legacy memory-planning hint without effect on results.
Status drop_consumed_inputs(UpgradeContext& c) {
  c.node().attrs.erase("consumed_inputs");
  return Status::ok();
}

// Before opset 7, binary ops broadcast only with `broadcast=1`, aligning B with A starting at
// `axis` (default: B's dims are a suffix of A's). NumPy broadcasting aligns at the end, so B gets
// trailing unit dims when `axis` puts it earlier.
Status legacy_broadcast(UpgradeContext& c) {
  Node& n = c.node();
  int64_t broadcast = n.attr_int("broadcast", 0);
  bool has_axis = n.has_attr("axis");
  int64_t axis = n.attr_int("axis", 0);
  n.attrs.erase("broadcast");
  n.attrs.erase("axis");
  if (broadcast == 0 || !has_axis) return Status::ok();
  FERRITE_ASSIGN_OR_RETURN(const TensorType* a, c.input_type(0));
  FERRITE_ASSIGN_OR_RETURN(const TensorType* b, c.input_type(1));
  if (!a->shape.rank_known() || !b->shape.rank_known())
    return c.unsupported_here("legacy broadcast with 'axis' needs inputs of known rank");
  int64_t ra = static_cast<int64_t>(a->shape.rank()), rb = static_cast<int64_t>(b->shape.rank());
  if (axis < 0) axis += ra;
  if (axis < 0 || axis + rb > ra)
    return err(n.describe(), ": broadcast axis ", axis, " does not fit ranks ", ra, " and ", rb);
  if (axis + rb == ra) return Status::ok();
  std::vector<int64_t> axes;
  for (int64_t k = rb; k < ra - axis; ++k) axes.push_back(k);
  FERRITE_ASSIGN_OR_RETURN(Node * unsq,
                           c.insert_before("Unsqueeze", {n.input(1), c.const_i64(axes)}));
  n.inputs[1] = unsq->outputs[0];
  return Status::ok();
}

Status drop_gemm_broadcast(UpgradeContext& c) {
  c.node().attrs.erase("broadcast");  // C broadcasts unidirectionally from opset 7 on
  return Status::ok();
}

// Opset 4 made Concat's axis required; before it defaulted to 1.
Status concat_default_axis(UpgradeContext& c) {
  if (!c.node().has_attr("axis")) c.node().attrs["axis"] = Attribute(int64_t{1});
  return Status::ok();
}

// Cast-1 named the target type as a string.
Status cast_string_to(UpgradeContext& c) {
  Node& n = c.node();
  auto it = n.attrs.find("to");
  if (it == n.attrs.end() || it->second.type() != AttrType::kString) return Status::ok();
  static const std::map<std::string, int64_t> kNames = {
      {"FLOAT", 1}, {"UINT8", 2}, {"INT8", 3},     {"UINT16", 4},  {"INT16", 5},   {"INT32", 6},
      {"INT64", 7}, {"BOOL", 9},  {"FLOAT16", 10}, {"DOUBLE", 11}, {"UINT32", 12}, {"UINT64", 13}};
  auto t = kNames.find(it->second.s());
  if (t == kNames.end()) return c.unsupported_here("Cast to '" + it->second.s() + "'");
  it->second = Attribute(t->second);
  return Status::ok();
}

// BatchNormalization before opset 9: `is_test` and `spatial` are gone; only inference (one
// output) and per-channel statistics (spatial = 1) have an opset-13 equivalent.
Status batchnorm_inference_only(UpgradeContext& c) {
  Node& n = c.node();
  if (n.outputs.size() > 1) return c.unsupported_here("BatchNormalization training outputs");
  if (n.attr_int("spatial", 1) != 1) return c.unsupported_here("BatchNormalization spatial = 0");
  n.attrs.erase("is_test");
  n.attrs.erase("spatial");
  return Status::ok();
}

// Dropout-6 `is_test`: from opset 7 inference is the runtime's choice, which here is always
// inference (Dropout is the identity).
Status dropout_drop_is_test(UpgradeContext& c) {
  c.node().attrs.erase("is_test");
  return Status::ok();
}

// Dropout-10 made the mask bool; before it was of the input's type.
Status dropout_mask_bool(UpgradeContext& c) {
  if (c.node().output(1))
    return c.unsupported_here("Dropout mask of the input's type (before opset 10)");
  return Status::ok();
}

// Dropout-12 takes the ratio as input 1 (and adds training_mode, absent meaning inference).
Status dropout_ratio_to_input(UpgradeContext& c) {
  Node& n = c.node();
  FERRITE_ASSIGN_OR_RETURN(const Attribute* a, c.attr("ratio", AttrType::kFloat));
  if (!a) return Status::ok();
  float ratio = a->f();
  n.attrs.erase("ratio");
  c.set_input(1, c.graph().add_initializer(n.name + "_ratio", Tensor::scalar<float>(ratio)));
  return Status::ok();
}

// Clip-11 takes min and max as inputs of the input's type.
Status clip_attrs_to_inputs(UpgradeContext& c) {
  Node& n = c.node();
  FERRITE_ASSIGN_OR_RETURN(const TensorType* x, c.input_type(0));
  DType dt = x->dtype;
  const char* names[2] = {"min", "max"};
  for (int k = 0; k < 2; ++k) {
    FERRITE_ASSIGN_OR_RETURN(const Attribute* a, c.attr(names[k], AttrType::kFloat));
    if (!a) continue;
    FERRITE_ASSIGN_OR_RETURN(Value * v, c.const_scalar(a->f(), dt));
    n.attrs.erase(names[k]);
    c.set_input(1 + k, v);
  }
  return Status::ok();
}

// Pad-2 renamed `paddings` to `pads`.
Status pad_rename_paddings(UpgradeContext& c) {
  Node& n = c.node();
  auto it = n.attrs.find("paddings");
  if (it != n.attrs.end()) {
    n.attrs["pads"] = it->second;
    n.attrs.erase("paddings");
  }
  return Status::ok();
}

// Pad-11 takes pads (i64) and the constant value (the input's type) as inputs.
Status pad_attrs_to_inputs(UpgradeContext& c) {
  Node& n = c.node();
  if (!n.has_attr("pads")) return err(n.describe(), ": attribute 'pads' is required");
  FERRITE_RETURN_IF_ERROR(c.ints_attr_to_input("pads", 1));
  FERRITE_ASSIGN_OR_RETURN(const Attribute* a, c.attr("value", AttrType::kFloat));
  if (!a) return Status::ok();
  float value = a->f();
  n.attrs.erase("value");
  FERRITE_ASSIGN_OR_RETURN(const TensorType* x, c.input_type(0));
  FERRITE_ASSIGN_OR_RETURN(Value * v, c.const_scalar(value, x->dtype));
  c.set_input(2, v);
  return Status::ok();
}

// Reshape-5 takes the shape as input 1.
Status reshape_shape_to_input(UpgradeContext& c) {
  if (!c.node().has_attr("shape"))
    return err(c.node().describe(), ": attribute 'shape' is required");
  return c.ints_attr_to_input("shape", 1);
}

// Slice-10 takes starts, ends and axes as inputs.
Status slice_attrs_to_inputs(UpgradeContext& c) {
  Node& n = c.node();
  if (!n.has_attr("starts") || !n.has_attr("ends"))
    return err(n.describe(), ": attributes 'starts' and 'ends' are required");
  FERRITE_RETURN_IF_ERROR(c.ints_attr_to_input("starts", 1));
  FERRITE_RETURN_IF_ERROR(c.ints_attr_to_input("ends", 2));
  return c.ints_attr_to_input("axes", 3);
}

// TopK-10 takes k as a 1-element i64 input.
Status topk_k_to_input(UpgradeContext& c) {
  Node& n = c.node();
  FERRITE_ASSIGN_OR_RETURN(const Attribute* a, c.attr("k", AttrType::kInt));
  if (!a) return err(n.describe(), ": attribute 'k' is required");
  Value* k = c.const_i64({a->i()});
  n.attrs.erase("k");
  c.set_input(1, k);
  return Status::ok();
}

// Split-1 could take the split sizes as a second input; Split-2 has only the attribute.
Status split_v1_input(UpgradeContext& c) {
  if (c.node().input(1)) return c.unsupported_here("Split-1 with split sizes as an input");
  c.node().inputs.resize(1);
  return Status::ok();
}

// Opset 13 moved `axes` (Squeeze, Unsqueeze, ReduceSum) and `split` (Split) to input 1.
Adapter ints_to_input1(const char* attr) {
  return [attr](UpgradeContext& c) { return c.ints_attr_to_input(attr, 1); };
}

// Before opset 13, Softmax, LogSoftmax and Hardmax coerce the input to 2-D at `axis` (default
// 1) and normalise over the whole trailing block. When `axis` is the last dim that is the
// opset-13 op over that dim; otherwise the node becomes Flatten -> op(axis=-1) -> Reshape back.
Status softmax_coerce_2d(UpgradeContext& c) {
  Node& n = c.node();
  FERRITE_ASSIGN_OR_RETURN(const TensorType* x, c.input_type(0));
  int64_t axis = n.attr_int("axis", 1);
  if (!x->shape.rank_known()) return c.unsupported_here("the input's rank is unknown");
  int64_t rank = static_cast<int64_t>(x->shape.rank());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank)
    return err(n.describe(), ": axis ", n.attr_int("axis", 1), " out of range");
  if (rank > 0 && axis == rank - 1) {
    n.attrs["axis"] = Attribute(int64_t{-1});
    return Status::ok();
  }
  Value* in = n.input(0);
  FERRITE_ASSIGN_OR_RETURN(Node * shape, c.insert_before("Shape", {in}));
  FERRITE_ASSIGN_OR_RETURN(Node * flat,
                           c.insert_before("Flatten", {in}, {{"axis", Attribute(axis)}}));
  FERRITE_ASSIGN_OR_RETURN(Node * op, c.insert_before(n.op_type, {flat->outputs[0]},
                                                      {{"axis", Attribute(int64_t{-1})}}));
  n.op_type = "Reshape";
  n.attrs.clear();
  n.inputs = {op->outputs[0], shape->outputs[0]};
  return Status::ok();
}

// Resize-10 (and Upsample): scales are input 1, no roi; coordinates map asymmetrically
// (x_in = x_out / scale) and nearest rounds down, which opset 11 spells out as attributes.
Status resize_v10(UpgradeContext& c) {
  Node& n = c.node();
  if (n.inputs.size() != 2) return err(n.describe(), ": Resize-10 takes 2 inputs");
  n.inputs = {n.inputs[0], nullptr, n.inputs[1]};
  n.attrs["coordinate_transformation_mode"] = Attribute("asymmetric");
  n.attrs["nearest_mode"] = Attribute("floor");
  return Status::ok();
}

// Upsample-7 took scales as an attribute; -9 as an input; Resize-10 replaced it.
Status upsample_scales_to_input(UpgradeContext& c) {
  Node& n = c.node();
  FERRITE_ASSIGN_OR_RETURN(const Attribute* a, c.attr("scales", AttrType::kFloats));
  if (!a) return err(n.describe(), ": attribute 'scales' is required");
  std::vector<float> scales = a->floats();
  n.attrs.erase("scales");
  c.set_input(1, c.graph().add_initializer(
                     n.name + "_scales",
                     Tensor::from_vector<float>(scales, {static_cast<int64_t>(scales.size())})));
  return Status::ok();
}

Status upsample_to_resize(UpgradeContext& c) {
  c.node().op_type = "Resize";
  return resize_v10(c);
}

// Scatter (deprecated at opset 11) is ScatterElements under another name.
Status scatter_to_scatter_elements(UpgradeContext& c) {
  c.node().op_type = "ScatterElements";
  return Status::ok();
}

// Scan-8 scans axis 1 of inputs that all have a leading batch axis (states included), with
// optional per-batch sequence lengths. Scan-9 has no batch axis: the node becomes a Scan-9 over
// the batch axis whose body runs a Scan-9 of the original body over the sequence (axis 0 once
// the batch axis is gone). Both bodies capture what the original one captured. Sequence lengths
// (padding semantics) have no Scan-9 equivalent and are refused.
Status scan8_batch_to_nested_scan(UpgradeContext& c) {
  Node& n = c.node();
  if (n.input(0)) return c.unsupported_here("sequence_lens (per-batch lengths) has no Scan-9 form");
  auto body_it = n.attrs.find("body");
  FERRITE_ASSIGN_OR_RETURN(const Attribute* m_attr, c.attr("num_scan_inputs", AttrType::kInt));
  if (body_it == n.attrs.end() || body_it->second.type() != AttrType::kGraph || !m_attr)
    return err(n.describe(), ": Scan-8 needs the graph attribute 'body' and 'num_scan_inputs'");
  FERRITE_ASSIGN_OR_RETURN(const Attribute* dirs, c.attr("directions", AttrType::kInts));
  const Graph& body = body_it->second.g();
  size_t nexp = n.num_explicit_inputs();
  int64_t m = m_attr->i();
  if (nexp < 1 || m < 1 || static_cast<size_t>(m) > nexp - 1)
    return err(n.describe(), ": num_scan_inputs is ", m, " but the node has ", nexp - 1,
               " state and scan inputs");
  size_t ns = nexp - 1 - static_cast<size_t>(m);
  if (body.outputs().size() < ns)
    return err(n.describe(), ": subgraph 'body' has fewer outputs than the ", ns, " states");
  // The per-batch-element body: one inner Scan over the original body.
  auto outer = std::make_unique<Graph>();
  outer->name = n.name + "_batch_element";
  outer->opsets() = body.opsets();
  Node* inner = outer->add_node("Scan", n.name + "_sequence");
  inner->opset = kConvertTargetOpset;
  inner->schema = OpRegistry::global().find("", "Scan", kConvertTargetOpset);
  for (size_t i = 0; i + 1 < nexp; ++i) {
    Value* v = outer->add_value(str_cat(n.name, "_element_", i));
    outer->inputs().push_back(v);
    inner->inputs.push_back(v);
  }
  for (const Value* cap : body.captures()) {
    Value* v = outer->add_value(cap->name);
    outer->captures().push_back(v);
    inner->inputs.push_back(v);
  }
  for (size_t k = 0; k < body.outputs().size(); ++k) {
    Value* v = outer->add_value(str_cat(n.name, "_element_out_", k));
    v->producer = inner;
    v->producer_output = static_cast<int>(k);
    inner->outputs.push_back(v);
    outer->outputs().push_back(v);
  }
  inner->attrs.emplace("num_scan_inputs", Attribute(m));
  if (dirs) inner->attrs.emplace("scan_input_directions", *dirs);
  inner->attrs.emplace("body", std::move(body_it->second));
  // The node itself scans the batch axis of every state and scan input; outputs stack on it.
  n.attrs.clear();
  n.attrs.emplace("body", Attribute(SubgraphAttr(std::move(outer))));
  n.attrs.emplace("num_scan_inputs", Attribute(static_cast<int64_t>(nexp - 1)));
  n.inputs.erase(n.inputs.begin());
  return Status::ok();
}

// ---- the table --------------------------------------------------------------------------------

// Ops unchanged from their first version to 13 apart from added types or attributes whose
// default is the old behaviour.
void add_unchanged_ops(std::map<std::string, OpHistory>& t) {
  for (auto [op, first] : std::initializer_list<std::pair<const char*, int>>{
           {"Acos", 7},
           {"Acosh", 9},
           {"Asin", 7},
           {"Asinh", 9},
           {"Atan", 7},
           {"Atanh", 9},
           {"Cos", 7},
           {"Cosh", 9},
           {"Sin", 7},
           {"Sinh", 9},
           {"Tan", 7},
           {"Not", 1},
           {"Softplus", 1},
           {"Softsign", 1},
           {"GlobalAveragePool", 1},
           {"GlobalMaxPool", 1},
           {"LpNormalization", 1},
           {"LRN", 1},
           {"SpaceToDepth", 1},
           {"DepthToSpace", 1},
           {"Transpose", 1},
           {"Identity", 1},
           {"Shape", 1},
           {"Size", 1},
           {"Flatten", 1},
           {"Gather", 1},
           {"MatMul", 1},
           {"Constant", 1},
           {"ConstantOfShape", 9},
           {"Expand", 8},
           {"Where", 9},
           {"NonZero", 9},
           {"Erf", 9},
           {"Sign", 9},
           {"IsNaN", 9},
           {"IsInf", 10},
           {"Mod", 10},
           {"Range", 11},
           {"Round", 11},
           {"CumSum", 11},
           {"GatherElements", 11},
           {"GatherND", 11},
           {"ScatterND", 11},
           {"ScatterElements", 11},
           {"OneHot", 9},
           {"EyeLike", 9},
           {"Einsum", 12},
           {"Det", 11},
           {"Celu", 12},
           {"Shrink", 9},
           {"ThresholdedRelu", 10},
           {"BitShift", 11},
           {"MaxUnpool", 9},
           {"MeanVarianceNormalization", 9},
           {"GreaterOrEqual", 12},
           {"LessOrEqual", 12},
           {"ArgMax", 1},
           {"ArgMin", 1},
           {"ReduceL1", 1},
           {"ReduceL2", 1},
           {"ReduceLogSum", 1},
           {"ReduceLogSumExp", 1},
           {"ReduceMax", 1},
           {"ReduceMean", 1},
           {"ReduceMin", 1},
           {"ReduceProd", 1},
           {"ReduceSumSquare", 1},
           {"Conv", 1},
           {"ConvTranspose", 1},
           {"AveragePool", 1},
           {"MaxPool", 1},
           {"GlobalLpPool", 2},
           {"LpPool", 2},
           {"Tile", 6},
           // QuantizeLinear-13 adds per-axis scales; -10 had only per-tensor ones.
           {"QuantizeLinear", 10},
           {"DequantizeLinear", 10},
           {"Compress", 9},
           {"ReverseSequence", 10},
           {"Unique", 11},
           {"NonMaxSuppression", 10},
           // The losses (opset 12) only gained types at 13.
           {"NegativeLogLikelihoodLoss", 12},
           {"SoftmaxCrossEntropyLoss", 12},
           {"QLinearMatMul", 10},
           {"MatMulInteger", 10},
           {"DynamicQuantizeLinear", 11},
           {"TfIdfVectorizer", 9},
           {"ConvInteger", 10},
           {"QLinearConv", 10},
           // Opset 14 added `layout` to the recurrent ops, defaulting to the old layout.
           {"RNN", 7},
           {"GRU", 7},
           {"LSTM", 7}})
    t[op] = {first, {}};
}

const std::map<std::string, OpHistory>& history_table() {
  static const std::map<std::string, OpHistory> table = [] {
    std::map<std::string, OpHistory> t;
    add_unchanged_ops(t);
    // Ops whose opset-1 form had `consumed_inputs`, otherwise unchanged.
    for (const char* op : {"Abs",
                           "Ceil",
                           "Exp",
                           "Floor",
                           "Log",
                           "Neg",
                           "Reciprocal",
                           "Relu",
                           "Sigmoid",
                           "Sqrt",
                           "Tanh",
                           "Elu",
                           "HardSigmoid",
                           "LeakyRelu",
                           "Selu",
                           "PRelu",
                           "InstanceNormalization",
                           "Clip",
                           "Max",
                           "Min",
                           "Mean",
                           "Sum"})
      t[op] = {1, {{6, drop_consumed_inputs}}};
    t["Clip"].steps.push_back({11, clip_attrs_to_inputs});
    for (const char* op : {"Add", "Sub", "Mul", "Div"})
      t[op] = {1, {{6, drop_consumed_inputs}, {7, legacy_broadcast}}};
    for (const char* op : {"And", "Or", "Xor", "Equal", "Greater", "Less", "Pow"})
      t[op] = {1, {{7, legacy_broadcast}}};
    t["Gemm"] = {1, {{7, drop_gemm_broadcast}}};
    t["BatchNormalization"] = {1, {{6, drop_consumed_inputs}, {9, batchnorm_inference_only}}};
    t["Dropout"] = {1,
                    {{6, drop_consumed_inputs},
                     {7, dropout_drop_is_test},
                     {10, dropout_mask_bool},
                     {12, dropout_ratio_to_input}}};
    t["Cast"] = {1, {{6, cast_string_to}}};
    t["Concat"] = {1, {{4, concat_default_axis}}};
    t["Reshape"] = {1, {{5, [](UpgradeContext& c) {
                           FERRITE_RETURN_IF_ERROR(drop_consumed_inputs(c));
                           return reshape_shape_to_input(c);
                         }}}};
    t["Slice"] = {1, {{10, slice_attrs_to_inputs}}};
    t["TopK"] = {1, {{10, topk_k_to_input}}};
    t["Pad"] = {1, {{2, pad_rename_paddings}, {11, pad_attrs_to_inputs}}};
    t["Split"] = {1, {{2, split_v1_input}, {13, ints_to_input1("split")}}};
    for (const char* op : {"Squeeze", "Unsqueeze", "ReduceSum"})
      t[op] = {1, {{13, ints_to_input1("axes")}}};
    for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"})
      t[op] = {1, {{13, softmax_coerce_2d}}};
    t["Resize"] = {10, {{11, resize_v10}}};
    t["Upsample"] = {7, {{9, upsample_scales_to_input}, {10, upsample_to_resize}}};
    t["Scatter"] = {9, {{11, scatter_to_scatter_elements}}};
    // RoiAlign-10's coordinates are what opset 16 calls output_half_pixel; the op table reads
    // the attribute's default from the node's opset, so the node keeps the old behaviour.
    t["RoiAlign"] = {10, {}};
    // Control flow: If-11 and Loop-11 let the branches' and iterations' shapes differ (what the
    // op table infers anyway), later versions add sequence and optional types. Scan-8 had a
    // batch axis, which Scan-9 dropped (scan8_batch_to_nested_scan).
    t["If"] = {1, {}};
    t["Loop"] = {1, {}};
    t["Scan"] = {8, {{9, scan8_batch_to_nested_scan}}};
    // The sequence ops are unchanged from their first version (11) to 13.
    for (const char* op :
         {"SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceAt", "SequenceErase",
          "SequenceLength", "SplitToSequence", "ConcatFromSequence"})
      t[op] = {11, {}};
    return t;
  }();
  return table;
}

}  // namespace

Status check_upgradable(const std::string& op, int from_opset) {
  const auto& table = history_table();
  auto it = table.find(op);
  if (it == table.end()) {
    if (!OpRegistry::global().knows("", op)) return unsupported("unsupported op '", op, "'");
    return unsupported("op '", op, "' at opset ", from_opset, " has no version adapter to opset ",
                       kConvertTargetOpset);
  }
  if (from_opset < it->second.first)
    return unsupported("op '", op, "' at opset ", from_opset, " has no version adapter (the ",
                       "converter starts at ", op, "-", it->second.first, ")");
  return Status::ok();
}

Status upgrade_and_infer(Graph& g) {
  const auto& table = history_table();
  std::vector<Node*> order;
  for (const auto& n : g.nodes()) order.push_back(n.get());
  for (Node* n : order) {
    if (n->domain.empty() && n->opset < kConvertTargetOpset) {
      FERRITE_RETURN_IF_ERROR(check_upgradable(n->op_type, n->opset).with_context(n->describe()));
      const OpHistory& h = table.at(n->op_type);
      UpgradeContext ctx(g, *n);
      for (const Step& s : h.steps)
        if (s.version > n->opset && s.version <= kConvertTargetOpset && s.adapt)
          FERRITE_RETURN_IF_ERROR(s.adapt(ctx));
      n->opset = kConvertTargetOpset;
      n->schema = OpRegistry::global().find("", n->op_type, kConvertTargetOpset);
      if (!n->schema)
        return unsupported(n->describe(), ": op '", n->op_type, "' is not supported at opset ",
                           kConvertTargetOpset);
    }
    if (!n->schema) return err(n->describe(), ": no schema");
    FERRITE_RETURN_IF_ERROR(infer_node(*n));
  }
  g.opsets()[""] = kConvertTargetOpset;
  return Status::ok();
}

std::vector<std::string> upgradable_ops() {
  std::vector<std::string> ops;
  for (const auto& [op, h] : history_table()) ops.push_back(op);
  return ops;
}

}  // namespace ferrite
