// convert-precision-bf16 / convert-precision-fp16: rewrites a float32 graph to store its float
// tensors in bfloat16 or IEEE half; kernels compute in float32 (see docs/cuda-backend.md,
// "Precision"). The user-facing interface stays float32:
//  - float32 graph inputs get a Cast to the low dtype right after entry;
//  - float32 graph outputs get a Cast back to float32 before exit (they keep their names);
//  - float32 initializers are stored in the low dtype, rounded to nearest even but *saturating*:
//    a finite constant stays finite (attention masks built from float32's lowest value would
//    otherwise become -inf in bf16 and turn `0 * mask` into NaN);
//  - every node whose type constraints admit the low dtype for a float32 input takes that input
//    in the low dtype; Cast(to=float) becomes Cast(to=low) and a float ConstantOfShape / Constant
//    value is converted, so their users follow;
//  - inputs whose constraints do not admit it (Range, Resize scales, ...) keep float32 through a
//    Cast back, and nodes whose output stays float32 (ops with a float dtype attribute) are cast
//    to the low dtype for their users. Nothing is left half-converted: every edge between a low
//    and a float32 value is an explicit Cast.
// Integer values (shape arithmetic, indices) are untouched.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "ops/context.h"
#include "ops/op_schema.h"
#include "passes/pass.h"
#include "passes/rewrite_util.h"

namespace ferrite {

namespace {

// Rounds to `low` to nearest even; finite values beyond the low dtype's range become its largest
// finite value instead of infinity, NaN and infinities are kept.
template <class Low>
uint16_t saturate_bits(float f, uint16_t max_bits) {
  Low l(f);
  if (std::isfinite(f) && !std::isfinite(static_cast<float>(l)))
    return static_cast<uint16_t>(max_bits | (std::signbit(f) ? 0x8000 : 0));
  return l.bits;
}

Tensor convert_tensor(const Tensor& t, DType low) {
  Tensor r = Tensor::create_uninitialized(low, t.dims()).value();
  const float* src = t.data<float>();
  uint16_t* dst = static_cast<uint16_t*>(r.raw());
  for (int64_t i = 0; i < t.numel(); ++i)
    dst[i] = low == DType::kBF16 ? saturate_bits<BFloat16>(src[i], 0x7f7f)
                                 : saturate_bits<Half>(src[i], 0x7bff);
  return r;
}

std::string low_suffix(DType low) {
  return low == DType::kBF16 ? "bf16" : "fp16";
}

// Whether input `i` of `n` may be given in `low`: every type constraint listing it admits the
// dtype. Inputs no constraint lists keep their dtype (nothing says the op accepts another).
bool accepts_low(const Node& n, size_t i, DType low) {
  if (!n.schema) return false;
  if (n.domain.empty() && (n.op_type == "Cast" || n.op_type == "CastLike") && i == 0) return true;
  bool listed = false;
  for (const auto& tc : n.schema->type_constraints)
    if (tc.covers(static_cast<int>(i))) {
      listed = true;
      if (!tc.allowed.contains(low)) return false;
    }
  return listed;
}

class Converter {
 public:
  Converter(Graph& g, DType low)
      : g_(g), low_(low), cast_opset_(rewrite::onnx_opset_at_least(g, 13)) {}

  Expected<bool> run() {
    std::vector<Node*> nodes;
    for (const auto& n : g_.nodes()) nodes.push_back(n.get());
    auto is_f32 = [](const Value* v) { return v && v->type.dtype == DType::kF32; };
    for (Value* v : g_.inputs())
      if (is_f32(v)) orig_f32_.insert(v);
    for (Value* v : g_.initializers())
      if (is_f32(v)) orig_f32_.insert(v);
    for (Node* n : nodes)
      for (Value* v : n->outputs)
        if (is_f32(v)) orig_f32_.insert(v);
    if (orig_f32_.empty()) return false;
    for (Node* n : nodes)
      for (size_t i = 0; i < n->inputs.size(); ++i)
        if (orig_f32_.count(n->inputs[i]) && !accepts_low(*n, i, low_))
          needs_f32_.insert(n->inputs[i]);

    for (Value* x : g_.inputs())
      if (orig_f32_.count(x)) FERRITE_RETURN_IF_ERROR(low_of(x).status());
    for (Node* n : nodes) FERRITE_RETURN_IF_ERROR(convert_node(*n));
    for (Value*& o : g_.outputs()) {
      if (!orig_f32_.count(o) || o->type.dtype == DType::kF32) continue;
      auto it = out_cast_.find(o);
      if (it == out_cast_.end()) {
        std::string name = o->name;
        g_.rename_value(o, fresh(name + "_" + low_suffix(low_)));
        FERRITE_ASSIGN_OR_RETURN(Value * f, add_cast(o, DType::kF32, name));
        it = out_cast_.emplace(o, f).first;
      }
      o = it->second;
    }
    // New Casts were appended; put every node where it was scheduled.
    std::unordered_map<const Node*, size_t> pos;
    for (size_t i = 0; i < order_.size(); ++i) pos[order_[i]] = i;
    FERRITE_CHECK(pos.size() == g_.nodes().size());
    std::stable_sort(g_.nodes().begin(), g_.nodes().end(), [&](const auto& a, const auto& b) {
      return pos.at(a.get()) < pos.at(b.get());
    });
    g_.compact();
    if (const char* log = std::getenv("FERRITE_LOG"); log && std::strstr(log, "passes")) {
      std::fprintf(stderr, "convert-precision-%s: %zu casts, %zu nodes kept in f32%s\n",
                   low_suffix(low_).c_str(), casts_, kept_.size(), kept_.empty() ? "" : ":");
      for (const std::string& k : kept_) std::fprintf(stderr, "  %s\n", k.c_str());
    }
    return true;
  }

 private:
  Status convert_node(Node& n) {
    std::vector<Value*> original = n.inputs;
    AttributeMap original_attrs = n.attrs;
    bool any_low = false;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      Value* v = n.inputs[i];
      if (!orig_f32_.count(v)) continue;
      if (accepts_low(n, i, low_)) {
        FERRITE_ASSIGN_OR_RETURN(n.inputs[i], low_of(v));
        any_low = true;
      } else {
        FERRITE_ASSIGN_OR_RETURN(n.inputs[i], f32_of(v));
      }
    }
    bool retyped = retarget_attrs(n);
    if (!any_low && !retyped) {
      if (touches_f32(n)) kept_.push_back(n.describe());
      order_.push_back(&n);
      return infer_node(n);
    }
    Status st = infer_node(n);
    if (!st) {
      // The op refuses the low dtype for a reason its constraints do not say: keep it in f32.
      n.attrs = original_attrs;
      for (size_t i = 0; i < n.inputs.size(); ++i)
        if (orig_f32_.count(original[i])) {
          FERRITE_ASSIGN_OR_RETURN(n.inputs[i], f32_of(original[i]));
        }
      kept_.push_back(n.describe() + " (" + st.message() + ")");
      FERRITE_RETURN_IF_ERROR(infer_node(n));
    }
    order_.push_back(&n);
    return Status::ok();
  }

  bool touches_f32(const Node& n) const {
    for (const Value* v : n.inputs)
      if (v && v->type.dtype == DType::kF32) return true;
    for (const Value* v : n.outputs)
      if (v && v->type.dtype == DType::kF32) return true;
    return false;
  }

  // Attributes that decide a float32 output dtype: Cast's target, the fill value of
  // ConstantOfShape, Constant's tensor.
  bool retarget_attrs(Node& n) {
    if (!n.domain.empty()) return false;
    if (n.op_type == "Cast" && n.attr_int("to") == dtype_to_onnx(DType::kF32)) {
      n.attrs["to"] = static_cast<int64_t>(dtype_to_onnx(low_));
      return true;
    }
    if (n.op_type == "ConstantOfShape" || n.op_type == "Constant") {
      auto it = n.attrs.find("value");
      if (it == n.attrs.end()) {
        if (n.op_type == "Constant") return false;
        n.attrs["value"] = convert_tensor(Tensor::from_vector<float>({0.0f}, {1}), low_);
        return true;
      }
      if (it->second.type() != AttrType::kTensor || it->second.t().dtype() != DType::kF32)
        return false;
      it->second = convert_tensor(it->second.t(), low_);
      return true;
    }
    return false;
  }

  Expected<Value*> low_of(Value* v) {
    if (v->type.dtype == low_) return v;
    if (auto it = low_map_.find(v); it != low_map_.end()) return it->second;
    Value* r = nullptr;
    if (v->constant && !v->is_graph_input && !v->producer) {
      if (!needs_f32_.count(v) && !is_graph_output(g_, v)) {
        v->constant = convert_tensor(*v->constant, low_);
        v->type.dtype = low_;
        return v;
      }
      r = g_.add_initializer(v->name + "_" + low_suffix(low_), convert_tensor(*v->constant, low_));
      g_.rename_value(r, fresh(v->name + "_" + low_suffix(low_)));
    } else {
      FERRITE_ASSIGN_OR_RETURN(r, add_cast(v, low_, v->name + "_" + low_suffix(low_)));
    }
    low_map_.emplace(v, r);
    return r;
  }

  Expected<Value*> f32_of(Value* v) {
    if (v->type.dtype == DType::kF32) return v;
    if (auto it = f32_map_.find(v); it != f32_map_.end()) return it->second;
    FERRITE_ASSIGN_OR_RETURN(Value * r, add_cast(v, DType::kF32, v->name + "_f32"));
    f32_map_.emplace(v, r);
    return r;
  }

  // `name` itself when no value has it yet (graph outputs keep theirs), else a numbered variant.
  std::string fresh(const std::string& name) {
    return g_.find_value(name) ? g_.unique_name(name) : name;
  }

  // Cast(v) -> `to`, scheduled at the current position (before the node being converted).
  Expected<Value*> add_cast(Value* v, DType to, const std::string& name) {
    Node* n = g_.add_node("Cast", name + "_cast");
    n->opset = cast_opset_;
    n->schema = OpRegistry::global().find("", "Cast", cast_opset_);
    FERRITE_CHECK(n->schema);
    n->inputs = {v};
    n->attrs["to"] = static_cast<int64_t>(dtype_to_onnx(to));
    Value* out = g_.add_value(fresh(name));
    out->producer = n;
    out->producer_output = 0;
    n->outputs = {out};
    FERRITE_RETURN_IF_ERROR(infer_node(*n));
    order_.push_back(n);
    ++casts_;
    return out;
  }

  Graph& g_;
  DType low_;
  int cast_opset_;
  std::unordered_set<const Value*> orig_f32_, needs_f32_;
  std::unordered_map<const Value*, Value*> low_map_, f32_map_, out_cast_;
  std::vector<Node*> order_;
  std::vector<std::string> kept_;
  size_t casts_ = 0;
};

class ConvertPrecision : public Pass {
 public:
  explicit ConvertPrecision(DType low) : low_(low) {}
  std::string name() const override { return "convert-precision-" + low_suffix(low_); }
  Expected<bool> run(Graph& g) override { return Converter(g, low_).run(); }

 private:
  DType low_;
};

}  // namespace

std::string precision_pass_name(DType low) {
  return "convert-precision-" + low_suffix(low);
}

FERRITE_REGISTER_PASSES(convert_precision) {
  r.add({"convert-precision-bf16",
         "store float32 tensors in bfloat16 (f32 interface and compute; see docs)",
         [] { return std::make_unique<ConvertPrecision>(DType::kBF16); }});
  r.add({"convert-precision-fp16",
         "store float32 tensors in IEEE half (f32 interface and compute; see docs)",
         [] { return std::make_unique<ConvertPrecision>(DType::kF16); }});
}

}  // namespace ferrite
