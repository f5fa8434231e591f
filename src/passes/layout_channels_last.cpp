// layout-channels-last: 2-D convolutions and the ops between them run on channels-last
// ([N, H, W, C]) activations, with layout changes only where a chain of them meets an op that
// needs [N, C, H, W]. For devices whose convolution library is fastest on channels-last data and
// whose generated pointwise kernels do not care (cpu: oneDNN's NHWC convolutions take the
// activations as they are, where NCHW ones cost a reorder in and out of every call).
//
// One walk in graph order gives each 4-D value v that can live channels-last a twin t(v) =
// Transpose(v, [0, 2, 3, 1]) computed directly:
//   - Conv / ferrite.FusedConv (2-D, float) -> FusedConv {channels_last = 1} on t(x) (and t(res));
//   - pointwise ops (the scalar-function table: Relu, Sigmoid, HardSwish, Clip, Add, Mul, ...)
//     whose 4-D operands have twins, or are constants (permuted at compile time), or scalars;
//   - GlobalAveragePool, and ReduceMean over H and W with keepdims (squeeze-excite, pooling
//     heads) -> ReduceMean over axes 1, 2;
//   - Concat on the channel axis -> Concat on axis 3 (densely connected blocks);
//   - MaxPool / AveragePool (2-D) -> ferrite.Pool {channels_last = 1};
//   - Split on the channel axis -> Split on axis 3; ShuffleNet's channel shuffle (Reshape to
//     [N, g, C/g, H, W], Transpose, Reshape back) -> the same shuffle of the twin's last axis;
//   - Transpose [0, 2, 3, 1] of a value with a twin is the twin (ConvNeXt's permute to
//     channels-last disappears), and Transpose [0, 3, 1, 2] of any 4-D value has that value as
//     its twin (the permute back).
// A value the rest of the graph still needs in [N, C, H, W] gets one Transpose back from its
// twin; an operand without a twin gets one Transpose to channels-last. Converted nodes are then
// removed. `FERRITE_LOG=layout` prints the decision: twins, transposes in and out.
//
// Options (`layout-channels-last{weights=last dtypes=bf16+f16}`):
//   weights=last   the convolutions' constant weights are permuted at compile time to
//                  [M, KH, KW, C/group] (FusedConv {weights_last = 1}), the filter layout of
//                  channels-last tensor-core convolutions (cuDNN's NHWC filters);
//   dtypes=A+B     only convolutions of these element types start a channels-last chain (cuda:
//                  bf16 and f16, whose tensor-core convolutions want NHWC; f32 stays NCHW).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "ops/context.h"
#include "ops/conv_util.h"
#include "ops/scalar_functions.h"
#include "passes/rewrite_util.h"

namespace ferrite {

namespace {

using namespace rewrite;

const std::vector<int64_t> kToLast{0, 2, 3, 1};
const std::vector<int64_t> kToFirst{0, 3, 1, 2};

bool rank4_float(const Value* v) {
  return v && v->type.shape.rank_known() && v->type.shape.rank() == 4 &&
         is_float_dtype(v->type.dtype);
}

std::vector<int64_t> perm_of(const Node& n) {
  return n.attr_ints("perm");
}

class LayoutChannelsLast : public Pass {
 public:
  LayoutChannelsLast() = default;
  LayoutChannelsLast(bool weights_last, std::vector<DType> dtypes)
      : weights_last_(weights_last), dtypes_(std::move(dtypes)) {}
  std::string name() const override { return "layout-channels-last"; }

  Expected<bool> run(Graph& g) override {
    g_ = &g;
    twin_.clear();
    replace_uses_.clear();
    to_last_.clear();
    converted_.clear();
    stats_ = {};
    std::vector<Node*> order;
    for (auto& n : g.nodes()) order.push_back(n.get());
    bool any_conv = false;
    for (Node* n : order) any_conv = any_conv || conv_like(*n);
    if (!any_conv) return false;
    uses_ = compute_uses(g);  // of the nodes there before the walk, which the patterns match
    for (Node* n : order) visit(*n);
    if (converted_.empty()) return false;
    restore_boundaries(order);
    std::vector<const Node*> dead(converted_.begin(), converted_.end());
    g.erase_nodes(dead);
    g.compact();
    const char* log = std::getenv("FERRITE_LOG");
    if (log && (std::strstr(log, "layout") || std::strstr(log, "all")))
      std::fprintf(stderr,
                   "[layout] channels-last: %d convolutions, %d other ops; %d transposes in, %d "
                   "back out, %d permutes removed\n",
                   stats_.convs, stats_.others, stats_.to_last, stats_.to_first,
                   stats_.permutes_removed);
    return true;
  }

 private:
  struct Stats {
    int convs = 0, others = 0, to_last = 0, to_first = 0, permutes_removed = 0;
  };

  bool conv_like(const Node& n) const {
    const bool conv =
        is_op(&n, "Conv") || (n.domain == kFerriteDomain && n.op_type == "FusedConv" &&
                              n.attr_int("channels_last", 0) == 0);
    if (!conv || n.inputs.size() < 2 || !rank4_float(n.input(0)) || !rank4_float(n.output(0)))
      return false;
    const Tensor* w = constant_of(n.input(1));
    if (!w || w->rank() != 4) return false;
    return dtypes_.empty() ||
           std::find(dtypes_.begin(), dtypes_.end(), n.input(0)->type.dtype) != dtypes_.end();
  }

  Value* twin(const Value* v) const {
    auto it = twin_.find(v);
    return it == twin_.end() ? nullptr : it->second;
  }

  // v as channels-last: its twin, or a Transpose inserted before `user` (one per value).
  Value* as_last(Value* v, const Node& user) {
    if (Value* t = twin(v)) return t;
    auto it = to_last_.find(v);
    if (it != to_last_.end()) return it->second;
    Node* t = insert_node(*g_, "", "Transpose", onnx_opset_at_least(*g_, 1), {v},
                          {{"perm", Attribute(kToLast)}}, &user, v->name + "_nhwc");
    if (!t) return nullptr;
    ++stats_.to_last;
    return to_last_[v] = t->outputs[0];
  }

  // A constant operand of a pointwise op, broadcast against [N, C, H, W], permuted to broadcast
  // against [N, H, W, C]; null when it cannot be.
  Value* permuted_constant(const Value* v) {
    const Tensor* c = constant_of(v);
    if (!c || c->rank() > 4) return nullptr;
    if (c->numel() == 1) return const_cast<Value*>(v);  // a scalar broadcasts either way
    std::vector<int64_t> dims(4 - c->rank(), 1);
    dims.insert(dims.end(), c->dims().begin(), c->dims().end());
    auto p = permute_channels(c->reshaped(dims), true);
    if (!p) return nullptr;
    return g_->add_initializer(v->name + "_nhwc", std::move(*p));
  }

  void convert(Node& n, Node* repl) {
    if (!repl) return;
    twin_[n.outputs[0]] = repl->outputs[0];
    converted_.insert(&n);
  }

  void visit(Node& n) {
    if (n.domain.empty() && n.op_type == "Split" && twin(n.input(0))) return convert_split(n);
    if (n.outputs.size() != 1 || !n.outputs[0]) return;
    if (conv_like(n)) return convert_conv(n);
    if (is_op(&n, "Transpose", 1) && rank4_float(n.input(0))) {
      if (perm_of(n) == kToFirst) {
        // Its input is already the channels-last form of its output.
        twin_[n.outputs[0]] = n.input(0);
        converted_.insert(&n);
        ++stats_.permutes_removed;
      } else if (perm_of(n) == kToLast && twin(n.input(0))) {
        replace_uses_.emplace_back(n.outputs[0], twin(n.input(0)));
        converted_.insert(&n);
        ++stats_.permutes_removed;
      }
      return;
    }
    if (is_op(&n, "Reshape") && twin(n.input(0)) && convert_channel_shuffle(n)) return;
    if (!rank4_float(n.outputs[0])) return;
    if (const ScalarFunction* f = scalar_function_of(n)) return convert_pointwise(n, *f);
    if (is_op(&n, "GlobalAveragePool", 1) && twin(n.input(0))) return convert_mean(n, {2, 3});
    if (is_op(&n, "ReduceMean") && twin(n.input(0)) && n.attr_int("keepdims", 1) == 1) {
      auto axes = reduce_axes(n);
      if (axes && *axes == std::vector<int64_t>{2, 3}) return convert_mean(n, *axes);
      return;
    }
    if (is_op(&n, "Concat")) return convert_concat(n);
    if ((is_op(&n, "MaxPool") || is_op(&n, "AveragePool")) && twin(n.input(0)))
      return convert_pool(n);
  }

  // Split on the channel axis -> Split on axis 3; each output gets its twin.
  void convert_split(Node& n) {
    const int64_t axis = n.attr_int("axis", 0);
    if (axis != 1 && axis != -3) return;
    for (Value* o : n.outputs)
      if (!o || !rank4_float(o)) return;
    std::vector<Value*> ins = n.inputs;
    ins[0] = twin(n.input(0));
    AttributeMap attrs = n.attrs;
    attrs["axis"] = Attribute(int64_t{3});
    const std::string& base = n.name.empty() ? n.outputs[0]->name : n.name;
    Node* c = g_->add_node("Split", g_->unique_name(base));
    c->opset = n.opset;
    c->inputs = ins;
    c->attrs = attrs;
    for (Value* o : n.outputs) {
      Value* t = g_->add_value(g_->unique_name(o->name + "_nhwc"));
      t->producer = c;
      t->producer_output = static_cast<int>(c->outputs.size());
      c->outputs.push_back(t);
    }
    c->schema = n.schema;
    g_->move_before(c, &n);
    if (!infer_node(*c)) {
      discard_node(*g_, c);
      return;
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) twin_[n.outputs[i]] = c->outputs[i];
    converted_.insert(&n);
    ++stats_.others;
  }

  // ShuffleNet's channel shuffle on v [N, C, H, W]: Reshape to [N, g, C/g, H, W], Transpose
  // [0, 2, 1, 3, 4], Reshape back to [N, C, H, W]. On the twin: Reshape to [N, H, W, g, C/g],
  // Transpose [0, 1, 2, 4, 3], Reshape to [N, H, W, C] (static C, H, W, g; 0 keeps N).
  bool convert_channel_shuffle(Node& r1) {
    const Uses& uses = uses_;
    Value* v = r1.input(0);
    const Shape& vs = v->type.shape;
    const Shape& s5 = r1.outputs[0]->type.shape;
    if (!rank4_float(v) || !s5.rank_known() || s5.rank() != 5) return false;
    Node* t = sole_user(*g_, uses, r1.outputs[0]);
    if (!is_op(t, "Transpose", 1) || perm_of(*t) != std::vector<int64_t>{0, 2, 1, 3, 4})
      return false;
    Node* r2 = sole_user(*g_, uses, t->outputs[0]);
    if (!is_op(r2, "Reshape") || !(r2->outputs[0]->type == v->type)) return false;
    auto st = [](const Dim& d) { return d.value().value_or(-1); };
    const int64_t C = st(vs[1]), H = st(vs[2]), W = st(vs[3]), g = st(s5[1]);
    if (C <= 0 || H <= 0 || W <= 0 || g <= 0 || C % g != 0 || !(s5[0] == vs[0]) ||
        st(s5[2]) != C / g || !(s5[3] == vs[2]) || !(s5[4] == vs[3]))
      return false;
    auto shape = [&](std::vector<int64_t> d) {
      const int64_t n = static_cast<int64_t>(d.size());
      return g_->add_initializer(r1.outputs[0]->name + "_nhwc_shape",
                                 Tensor::from_vector<int64_t>(d, {n}));
    };
    const int opset = onnx_opset_at_least(*g_, 14);
    Node* a = insert_node(*g_, "", "Reshape", opset, {twin(v), shape({0, H, W, g, C / g})}, {}, r2,
                          r1.outputs[0]->name + "_nhwc");
    if (!a) return false;
    Node* b = insert_node(*g_, "", "Transpose", onnx_opset_at_least(*g_, 1), {a->outputs[0]},
                          {{"perm", Attribute(std::vector<int64_t>{0, 1, 2, 4, 3})}}, r2,
                          t->outputs[0]->name + "_nhwc");
    Node* c = b ? insert_node(*g_, "", "Reshape", opset, {b->outputs[0], shape({0, H, W, C})}, {},
                              r2, r2->outputs[0]->name + "_nhwc")
                : nullptr;
    if (!c) {
      if (b) discard_node(*g_, b);
      discard_node(*g_, a);
      return false;
    }
    twin_[r2->outputs[0]] = c->outputs[0];
    converted_.insert(&r1);
    converted_.insert(t);
    converted_.insert(r2);
    stats_.others += 3;
    return true;
  }

  // MaxPool / AveragePool (2-D, no Indices output) -> ferrite.Pool {channels_last = 1}.
  void convert_pool(Node& n) {
    if (n.attr_ints("kernel_shape").size() != 2) return;
    AttributeMap attrs;
    for (const char* k : {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape",
                          "pads", "strides"})
      if (n.has_attr(k)) attrs.emplace(k, n.attrs.at(k));
    attrs["mode"] = Attribute(std::string(n.op_type == "MaxPool" ? "max" : "average"));
    attrs["channels_last"] = Attribute(int64_t{1});
    Node* c = insert_node(*g_, kFerriteDomain, "Pool", kFerriteOpset, {twin(n.input(0))}, attrs, &n,
                          n.name.empty() ? n.outputs[0]->name : n.name);
    if (c) ++stats_.others;
    convert(n, c);
  }

  void convert_conv(Node& n) {
    Value* x = as_last(n.input(0), n);
    if (!x) return;
    std::vector<Value*> ins{x, n.input(1), n.input(2)};
    if (n.inputs.size() > 3 && n.input(3)) {
      Value* r = as_last(n.input(3), n);
      if (!r) return;
      ins.push_back(r);
    }
    if (weights_last_) {
      auto w = permute_channels(*constant_of(n.input(1)), true);
      if (!w) return;
      ins[1] = g_->add_initializer(n.input(1)->name + "_ohwi", std::move(*w));
    }
    while (!ins.empty() && !ins.back()) ins.pop_back();
    AttributeMap attrs = n.attrs;
    attrs["channels_last"] = Attribute(int64_t{1});
    if (weights_last_) attrs["weights_last"] = Attribute(int64_t{1});
    Node* c = insert_node(*g_, kFerriteDomain, "FusedConv", kFerriteOpset, ins, attrs, &n,
                          n.name.empty() ? n.outputs[0]->name : n.name);
    if (c) ++stats_.convs;
    convert(n, c);
  }

  void convert_pointwise(Node& n, const ScalarFunction& f) {
    if (f.types != FnTypes::kFloat && f.arity == 1) return;
    // Operands that take part in the broadcast: all for binary rows; Clip's bounds and other
    // parameter inputs are scalars and stay.
    const size_t operands = static_cast<size_t>(f.arity);
    bool has_twin = false;
    for (size_t i = 0; i < operands && i < n.inputs.size(); ++i)
      has_twin |= twin(n.input(i)) != nullptr;
    if (!has_twin) return;
    std::vector<Value*> ins = n.inputs;
    for (size_t i = 0; i < operands && i < ins.size(); ++i) {
      Value* v = ins[i];
      if (!v) continue;
      if (Value* t = twin(v)) {
        ins[i] = t;
      } else if (constant_of(v)) {
        ins[i] = permuted_constant(v);
      } else if (v->type.shape.rank_known() && v->type.shape.rank() == 4) {
        ins[i] = as_last(v, n);
      } else {
        return;  // a lower-rank non-constant operand: broadcasting would change meaning
      }
      if (!ins[i]) return;
    }
    Node* c = insert_node(*g_, n.domain, n.op_type, n.opset, ins, n.attrs, &n,
                          n.name.empty() ? n.outputs[0]->name : n.name);
    if (c && !(c->outputs[0]->type.shape.rank_known() && c->outputs[0]->type.shape.rank() == 4)) {
      discard_node(*g_, c);
      return;
    }
    if (c) ++stats_.others;
    convert(n, c);
  }

  std::optional<std::vector<int64_t>> reduce_axes(const Node& n) const {
    std::vector<int64_t> axes;
    if (n.has_attr("axes")) {
      axes = n.attr_ints("axes");
    } else if (n.inputs.size() > 1 && n.input(1)) {
      const Tensor* t = constant_of(n.input(1));
      if (!t || t->dtype() != DType::kI64) return std::nullopt;
      axes.assign(t->data<int64_t>(), t->data<int64_t>() + t->numel());
    } else {
      return std::nullopt;
    }
    for (int64_t& a : axes) a = a < 0 ? a + 4 : a;
    std::sort(axes.begin(), axes.end());
    return axes;
  }

  // Mean over H and W (GlobalAveragePool or ReduceMean [2, 3]) as ReduceMean [1, 2] of the twin.
  void convert_mean(Node& n, const std::vector<int64_t>&) {
    const int opset = onnx_opset_at_least(*g_, 18);
    Value* axes = g_->add_initializer(n.outputs[0]->name + "_axes",
                                      Tensor::from_vector<int64_t>({1, 2}, {2}));
    Node* c = insert_node(*g_, "", "ReduceMean", opset, {twin(n.input(0)), axes},
                          {{"keepdims", Attribute(int64_t{1})}}, &n,
                          n.name.empty() ? n.outputs[0]->name : n.name);
    if (c) ++stats_.others;
    convert(n, c);
  }

  void convert_concat(Node& n) {
    const int64_t axis = n.attr_int("axis", 0);
    if (axis != 1 && axis != -3) return;
    bool has_twin = false;
    for (Value* v : n.inputs) has_twin |= twin(v) != nullptr;
    if (!has_twin) return;
    std::vector<Value*> ins;
    for (Value* v : n.inputs) {
      if (!rank4_float(v)) return;
      Value* t = as_last(v, n);
      if (!t) return;
      ins.push_back(t);
    }
    AttributeMap attrs = n.attrs;
    attrs["axis"] = Attribute(int64_t{3});
    Node* c = insert_node(*g_, "", "Concat", n.opset, ins, attrs, &n,
                          n.name.empty() ? n.outputs[0]->name : n.name);
    if (c) ++stats_.others;
    convert(n, c);
  }

  // Uses of converted values by nodes that stay (and graph outputs) read a Transpose back.
  void restore_boundaries(const std::vector<Node*>& order) {
    for (auto& [old, repl] : replace_uses_) g_->replace_all_uses(old, repl);
    std::unordered_map<const Node*, size_t> pos;
    for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = i;
    const Uses uses = compute_uses(*g_);
    for (Node* n : order) {
      if (!converted_.count(n)) continue;
      for (Value* v : n->outputs) restore(v, uses, pos);
    }
  }

  void restore(Value* v, const Uses& uses, std::unordered_map<const Node*, size_t>& pos) {
    Value* t = v ? twin(v) : nullptr;
    if (!t) return;
    auto it = uses.find(v);
    std::vector<Use> outside;
    if (it != uses.end())
      for (const Use& u : it->second)
        if (!converted_.count(u.node)) outside.push_back(u);
    const bool output = is_graph_output(*g_, v);
    if (outside.empty() && !output) return;
    // Before the first user that stays (or at the end, for a graph output only).
    const Node* before = nullptr;
    for (const Use& u : outside)
      if (pos.count(u.node) && (!before || pos[u.node] < pos[before])) before = u.node;
    Node* back = insert_node(*g_, "", "Transpose", onnx_opset_at_least(*g_, 1), {t},
                             {{"perm", Attribute(kToFirst)}}, before, v->name + "_nchw");
    if (!back) return;  // cannot happen for a 4-D value
    ++stats_.to_first;
    for (const Use& u : outside) u.node->inputs[u.input] = back->outputs[0];
    if (output) replace_value(*g_, v, back->outputs[0]);
  }

  bool weights_last_ = false;
  std::vector<DType> dtypes_;  // empty: every float type
  Graph* g_ = nullptr;
  std::unordered_map<const Value*, Value*> twin_, to_last_;
  std::unordered_set<const Node*> converted_;
  std::vector<std::pair<Value*, Value*>> replace_uses_;
  Uses uses_;
  Stats stats_;
};

Expected<std::unique_ptr<Pass>> make_with_options(const PassOptions& o) {
  bool weights_last = false;
  std::vector<DType> dtypes;
  for (const auto& [k, v] : o) {
    if (k == "weights") {
      if (v != "last" && v != "first")
        return err("layout-channels-last: weights expects 'last' or 'first', got '", v, "'");
      weights_last = v == "last";
    } else if (k == "dtypes") {
      for (size_t pos = 0; pos <= v.size();) {
        size_t end = v.find('+', pos);
        if (end == std::string::npos) end = v.size();
        const std::string name = v.substr(pos, end - pos);
        pos = end + 1;
        const std::optional<DType> t = dtype_from_name(name);
        if (!t || !is_float_dtype(*t))
          return err("layout-channels-last: dtypes expects float types joined by '+', got '", name,
                     "'");
        dtypes.push_back(*t);
      }
    } else {
      return err("layout-channels-last: unknown option '", k, "' (weights, dtypes)");
    }
  }
  return std::unique_ptr<Pass>(std::make_unique<LayoutChannelsLast>(weights_last, dtypes));
}

}  // namespace

FERRITE_REGISTER_PASSES(layout_channels_last) {
  // Opt-in, after the rewrites: for devices whose convolutions want channels-last activations
  // (cpu: oneDNN's NHWC convolutions and depthwise kernels; cuda: cuDNN's tensor-core ones).
  r.add({"layout-channels-last",
         "run 2-D convolutions and the pointwise, pooling and concat ops between them on "
         "[N, H, W, C] activations, transposing only at the chain's boundaries; options "
         "{weights=last|first dtypes=T1+T2}",
         [] { return std::make_unique<LayoutChannelsLast>(); },
         {{Stage::kRewrite, 90}},
         make_with_options,
         {"ferrite.FusedConv", "ferrite.Pool"},
         /*opt_in=*/true,
         // dtypes=bf16+f16 (cuda) must see an f32 model run at precision bf16 as bf16.
         /*after_precision=*/true});
}

}  // namespace ferrite
