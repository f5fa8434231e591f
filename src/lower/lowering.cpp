#include "lower/lowering.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "lower/pointwise_ops.h"

namespace ferrite {

namespace {

bool kernel_dtype(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kI32 || t == DType::kI64 ||
         t == DType::kBool;
}

std::optional<std::vector<Dim>> known_dims(const Shape& s) {
  if (!s.rank_known()) return std::nullopt;
  for (const Dim& d : s.dims())
    if (!d.is_known()) return std::nullopt;
  return s.dims();
}

std::vector<SymExpr> contiguous(const std::vector<Dim>& dims) {
  std::vector<SymExpr> st(dims.size(), SymExpr(1));
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i)
    st[i] = st[i + 1] * dims[i + 1].expr();
  return st;
}

// A row kernel waiting for its store expression to be complete (softmax, layernorm, Reduce*):
// pointwise consumers fuse into its store until something else needs the value.
struct RowPlan {
  std::vector<Dim> iter;  // iteration space: rows, then the reduced dims
  size_t reduce_rank = 0;
  bool per_row = false;          // one result per row (Reduce*) or per element (softmax)
  std::vector<SymExpr> out_idx;  // the value's index in terms of the iteration's loop variables
};

std::vector<SymExpr> loop_vars(size_t n) {
  std::vector<SymExpr> idx;
  for (size_t i = 0; i < n; ++i) idx.push_back(SymExpr::symbol(loop_var(i)));
  return idx;
}

SymExpr product(const std::vector<Dim>& dims, size_t begin, size_t end) {
  SymExpr p(1);
  for (size_t i = begin; i < end; ++i) p = p * dims[i].expr();
  return p;
}

bool float_dtype(DType t) {
  return t == DType::kF32 || t == DType::kF64;
}

// How a graph value is available while lowering: a strided view of a buffer, or an expression
// still to be inlined into its consumer.
struct Lowered {
  DType dtype = DType::kUndefined;
  bool dims_known = false;
  std::vector<Dim> dims;
  int buffer = -1;  // realized
  SymExpr offset;
  std::vector<SymExpr> strides;
  std::function<int(EmitContext&, const std::vector<SymExpr>&)> emit;  // inline
  std::vector<std::string> nodes;  // nodes folded into the inline expression
  size_t cost = 0;
  // Set while `emit` is the store expression of a pending row kernel: it creates kReduce
  // expressions over the loop variables of `row->iter`, so it may only be emitted into the
  // kernel that `materialize` builds for it.
  std::shared_ptr<const RowPlan> row;
  bool realized() const { return buffer >= 0; }
};

class Lowerer {
 public:
  Lowerer(const Graph& g, const LoweringOptions& opts) : g_(g), opts_(opts) {}

  Expected<LoweredGraph> run() {
    for (const auto& n : g_.nodes())
      for (const Value* v : n->inputs)
        if (v) uses_[v]++;
    for (const Value* v : g_.outputs()) uses_[v] += 2;  // outputs are always realized
    for (const Value* v : g_.inputs()) bind_buffer(v, Buffer::Kind::kInput);
    for (const Value* v : g_.initializers()) bind_buffer(v, Buffer::Kind::kConstant);
    for (const Value* v : g_.inputs()) out_.inputs.push_back(values_.at(v).buffer);
    for (const auto& n : g_.nodes()) FERRITE_RETURN_IF_ERROR(lower_node(*n));
    for (const Value* v : g_.outputs()) {
      FERRITE_ASSIGN_OR_RETURN(int b, realize_owned(v));
      out_.outputs.push_back(b);
    }
    collect_symbols();
    return std::move(out_);
  }

 private:
  int new_buffer(Buffer::Kind kind, DType dt, Shape shape, const Value* v, std::string name) {
    out_.buffers.push_back(Buffer{kind, dt, std::move(shape), v, std::move(name)});
    return static_cast<int>(out_.buffers.size()) - 1;
  }

  void bind_buffer(const Value* v, Buffer::Kind kind) {
    Lowered l;
    l.dtype = v->type.dtype;
    l.buffer = new_buffer(kind, v->type.dtype, v->type.shape, v, v->name);
    if (auto d = known_dims(v->type.shape)) {
      l.dims_known = true;
      l.dims = *d;
      l.strides = contiguous(*d);
    }
    values_[v] = std::move(l);
  }

  bool is_output(const Value* v) const {
    return std::find(g_.outputs().begin(), g_.outputs().end(), v) != g_.outputs().end();
  }

  // Emits `l` at index `idx` (one index expression per dim of l).
  static int emit_value(const Lowered& l, EmitContext& ctx, const std::vector<SymExpr>& idx) {
    if (!l.realized()) return l.emit(ctx, idx);
    SymExpr addr = l.offset;
    for (size_t i = 0; i < idx.size(); ++i) addr = addr + idx[i] * l.strides[i];
    return ctx.body.load(ctx.slot(l.buffer), l.dtype, addr);
  }

  bool is_contiguous(const Lowered& l) const {
    if (!l.realized() || !l.dims_known) return l.realized();  // unknown dims: library output
    if (l.offset != SymExpr(0)) return false;
    auto c = contiguous(l.dims);
    for (size_t i = 0; i < c.size(); ++i)
      if (l.dims[i].value() != 1 && c[i] != l.strides[i]) return false;
    return true;
  }

  // Materializes `l` into a fresh contiguous buffer with a generated kernel.
  int materialize(Lowered& l, Buffer::Kind kind, const Value* v, const std::string& name) {
    Kernel k;
    k.name = "k" + std::to_string(out_.kernels);
    k.shape = l.dims;
    k.out_dtype = l.dtype;
    std::vector<SymExpr> idx = loop_vars(l.dims.size());
    if (l.row) {
      k.shape = l.row->iter;
      k.reduce_rank = l.row->reduce_rank;
      k.per_row = l.row->per_row;
      idx = l.row->out_idx;
      out_.row_kernels++;
    }
    EmitContext ctx{k.body, k.input_buffers};
    k.root = emit_value(l, ctx, idx);
    k.source_nodes = l.nodes;
    k.output_buffer = new_buffer(kind, l.dtype, Shape(l.dims), v, name);
    out_.kernels++;
    out_.fused_nodes += static_cast<int>(l.nodes.size());
    int b = k.output_buffer;
    Step step;
    step.kind = Step::Kind::kKernel;
    step.kernel = std::move(k);
    out_.steps.push_back(std::move(step));
    l.buffer = b;
    l.offset = SymExpr(0);
    l.strides = contiguous(l.dims);
    l.emit = nullptr;
    l.row = nullptr;
    l.nodes.clear();
    l.cost = 0;
    return b;
  }

  // A buffer that holds exactly `v` (contiguous), realizing or copying as needed.
  Expected<int> realize_contiguous(const Value* v) {
    Lowered& l = values_.at(v);
    if (l.realized() && is_contiguous(l)) return l.buffer;
    if (!l.dims_known) return err("internal: cannot realize '", v->name, "' with unknown dims");
    return materialize(l, Buffer::Kind::kIntermediate, v, v->name);
  }

  // Graph outputs get a buffer of their own (never an alias of an input or constant).
  Expected<int> realize_owned(const Value* v) {
    Lowered& l = values_.at(v);
    if (l.realized() && is_contiguous(l) && out_.buffers[l.buffer].value == v &&
        out_.buffers[l.buffer].kind == Buffer::Kind::kIntermediate) {
      out_.buffers[l.buffer].kind = Buffer::Kind::kOutput;
      return l.buffer;
    }
    if (l.realized() && is_contiguous(l) && out_.buffers[l.buffer].kind == Buffer::Kind::kOutput)
      return l.buffer;
    if (!l.dims_known) return err("internal: output '", v->name, "' has unknown dims");
    return materialize(l, Buffer::Kind::kOutput, v, v->name);
  }

  Status lower_node(const Node& n) {
    // A pending row kernel is complete unless `n` fuses into its store as an epilogue.
    const Value* epilogue = epilogue_input(n);
    for (const Value* v : n.inputs) {
      if (!v || v == epilogue) continue;
      Lowered& l = values_.at(v);
      if (l.row) materialize(l, Buffer::Kind::kIntermediate, v, v->name);
    }
    if (lower_row(n) || lower_view(n) || lower_pointwise(n)) return Status::ok();
    return lower_library(n);
  }

  // The pending row value that pointwise `n` may fuse into as a store epilogue: its only use,
  // read at the output's own index (no broadcast).
  const Value* epilogue_input(const Node& n) const {
    if (!find_pointwise_op(n) || n.outputs.size() != 1 || !n.outputs[0]) return nullptr;
    auto out_dims = known_dims(n.outputs[0]->type.shape);
    if (!out_dims) return nullptr;
    for (const Value* v : n.inputs) {
      if (!v) continue;
      const Lowered& l = values_.at(v);
      if (l.row && uses_.at(v) == 1 && l.dims == *out_dims) return v;
    }
    return nullptr;
  }

  // Inputs of a lowerable node: present, known dims, kernel dtypes.
  bool inputs_lowerable(const Node& n, size_t count) const {
    for (size_t i = 0; i < count; ++i) {
      const Value* v = n.input(i);
      if (!v) return false;
      const Lowered& l = values_.at(v);
      if (!l.dims_known || !kernel_dtype(l.dtype)) return false;
    }
    return true;
  }

  bool lower_pointwise(const Node& n) {
    const PointwiseOp* op = find_pointwise_op(n);
    if (!op || n.outputs.size() != 1 || !n.outputs[0]) return false;
    const Value* out = n.outputs[0];
    auto out_dims = known_dims(out->type.shape);
    if (!out_dims || !kernel_dtype(out->type.dtype)) return false;
    std::vector<Lowered> ins;
    std::vector<std::vector<int>> maps;  // per input: output dim feeding each input dim (-1: 0)
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (!op->uses_input(i)) continue;
      const Value* v = n.inputs[i];
      if (!v) return false;
      const Lowered& l = values_.at(v);
      if (!l.dims_known || !kernel_dtype(l.dtype) || l.dims.size() > out_dims->size()) return false;
      std::vector<int> map(l.dims.size());
      size_t off = out_dims->size() - l.dims.size();
      for (size_t d = 0; d < l.dims.size(); ++d) {
        if (l.dims[d] == (*out_dims)[off + d]) map[d] = static_cast<int>(off + d);
        else if (l.dims[d].value() == 1) map[d] = -1;
        else return false;  // symbolic broadcast the kernel cannot decide statically
      }
      ins.push_back(l);
      maps.push_back(std::move(map));
    }
    Lowered r;
    r.dtype = out->type.dtype;
    r.dims_known = true;
    r.dims = *out_dims;
    r.cost = 1;
    for (const auto& l : ins) {
      r.cost += l.cost;
      r.nodes.insert(r.nodes.end(), l.nodes.begin(), l.nodes.end());
      if (l.row) r.row = l.row;  // an epilogue (see epilogue_input): at most one such input
    }
    r.nodes.push_back(n.name);
    const Node* node = &n;
    r.emit = [ins, maps, op, node, dtype = r.dtype](EmitContext& ctx,
                                                  const std::vector<SymExpr>& idx) {
      std::vector<int> args;
      for (size_t i = 0; i < ins.size(); ++i) {
        std::vector<SymExpr> sub;
        for (int m : maps[i]) sub.push_back(m < 0 ? SymExpr(0) : idx[m]);
        args.push_back(emit_value(ins[i], ctx, sub));
      }
      return op->emit(ctx, *node, args, dtype);
    };
    bool realize = uses_[out] > 1 || r.cost > opts_.max_inline_exprs;
    values_[out] = std::move(r);
    if (realize) materialize(values_[out], Buffer::Kind::kIntermediate, out, out->name);
    return true;
  }

  // ---- Row kernels: softmax, layernorm and reductions --------------------------------------

  // The pending row value `r` (store expression already set) becomes the value of `out`.
  bool bind_row(const Node& n, const Lowered& in, Lowered r, RowPlan plan) {
    const Value* out = n.outputs[0];
    r.dtype = out->type.dtype;
    r.dims_known = true;
    r.cost = in.cost + 8;
    r.nodes = in.nodes;
    r.nodes.push_back(n.name);
    r.row = std::make_shared<const RowPlan>(std::move(plan));
    bool realize = uses_[out] > 1;
    values_[out] = std::move(r);
    if (realize) materialize(values_[out], Buffer::Kind::kIntermediate, out, out->name);
    return true;
  }

  bool lower_row(const Node& n) {
    if (!n.domain.empty() || n.inputs.empty() || !n.input(0) || n.outputs.empty() || !n.outputs[0])
      return false;
    const std::string& op = n.op_type;
    if (op == "Softmax" || op == "LogSoftmax") return lower_softmax(n);
    if (op == "LayerNormalization") return lower_layernorm(n);
    if (op == "GlobalAveragePool" || op.rfind("Reduce", 0) == 0) return lower_reduce(n);
    return false;
  }

  // Float input 0 and output 0 with known dims, and no other output in use.
  std::optional<Lowered> row_input(const Node& n) const {
    const Lowered& x = values_.at(n.input(0));
    const Value* out = n.outputs[0];
    if (!x.dims_known || !float_dtype(x.dtype) || out->type.dtype != x.dtype ||
        !known_dims(out->type.shape))
      return std::nullopt;
    for (size_t i = 1; i < n.outputs.size(); ++i)
      if (n.outputs[i] && uses_.count(n.outputs[i]) && uses_.at(n.outputs[i]) > 0)
        return std::nullopt;
    return x;
  }

  // Softmax / LogSoftmax over the last axis: max, sum of exp(x - max), then the store.
  bool lower_softmax(const Node& n) {
    auto x = row_input(n);
    if (!x || x->dims.empty()) return false;
    int64_t rank = static_cast<int64_t>(x->dims.size());
    int64_t axis = n.attr_int("axis", -1);
    if (axis != -1 && axis != rank - 1) return false;  // other axes: library
    RowPlan plan{x->dims, 1, false, loop_vars(x->dims.size())};
    bool log = n.op_type == "LogSoftmax";
    Lowered r;
    r.dims = x->dims;
    r.emit = [x = *x, log](EmitContext& ctx, const std::vector<SymExpr>& idx) {
      KernelBody& b = ctx.body;
      DType t = x.dtype;
      int v = emit_value(x, ctx, idx);
      int shifted = b.binary("sub", v, b.reduce("max", v), t);
      int e = b.unary("exp", shifted, t);
      int sum = b.reduce("sum", b.cast(e, DType::kF64));
      if (log) return b.binary("sub", shifted, b.cast(b.unary("log", sum, DType::kF64), t), t);
      return b.binary("div", e, b.cast(sum, t), t);
    };
    return bind_row(n, *x, std::move(r), std::move(plan));
  }

  // `p` read at iteration index `it` of a row over `norm` (the trailing dims of the iteration),
  // broadcasting right-aligned like LayerNormalization's Scale and B.
  static std::optional<std::vector<int>> param_map(const Lowered& p, const std::vector<Dim>& norm,
                                                   size_t first) {
    if (!p.dims_known || p.dims.size() > norm.size()) return std::nullopt;
    std::vector<int> map;
    size_t off = norm.size() - p.dims.size();
    for (size_t d = 0; d < p.dims.size(); ++d) {
      if (p.dims[d] == norm[off + d])
        map.push_back(static_cast<int>(first + off + d));
      else if (p.dims[d].value() == 1)
        map.push_back(-1);
      else
        return std::nullopt;
    }
    return map;
  }

  static int emit_mapped(const Lowered& l, const std::vector<int>& map, EmitContext& ctx,
                         const std::vector<SymExpr>& idx) {
    std::vector<SymExpr> sub;
    for (int m : map) sub.push_back(m < 0 ? SymExpr(0) : idx[m]);
    return emit_value(l, ctx, sub);
  }

  // LayerNormalization over dims [axis, rank): mean, variance (two-pass, in double as the
  // reference computes them), then (x - mean) * rstd * scale + bias.
  bool lower_layernorm(const Node& n) {
    auto x = row_input(n);
    if (!x || x->dims.empty() || !n.input(1)) return false;
    int64_t rank = static_cast<int64_t>(x->dims.size());
    int64_t axis = n.attr_int("axis", -1);
    if (axis < -rank || axis >= rank) return false;
    if (axis < 0) axis += rank;
    std::vector<Dim> norm(x->dims.begin() + axis, x->dims.end());
    struct Param {
      Lowered l;
      std::vector<int> map;
    };
    std::vector<Param> params;
    for (size_t i = 1; i < 3 && i < n.inputs.size(); ++i) {
      if (!n.input(i)) continue;
      const Lowered& p = values_.at(n.input(i));
      if (p.dtype != x->dtype) return false;
      auto map = param_map(p, norm, static_cast<size_t>(axis));
      if (!map) return false;
      params.push_back({p, *map});
    }
    bool has_bias = n.inputs.size() > 2 && n.input(2);
    int64_t stash = n.attr_int("stash_type", 1);
    if (stash != 1 && stash != 10 && stash != 11 && stash != 16) return false;  // library errs
    double eps = n.attr_float("epsilon", 1e-5f);
    RowPlan plan{x->dims, norm.size(), false, loop_vars(x->dims.size())};
    SymExpr count = product(x->dims, axis, x->dims.size());
    Lowered r;
    r.dims = x->dims;
    r.emit = [x = *x, params, has_bias, eps, count](EmitContext& ctx,
                                                    const std::vector<SymExpr>& idx) {
      KernelBody& b = ctx.body;
      const DType d = DType::kF64;
      int v = b.cast(emit_value(x, ctx, idx), d);
      int cnt = b.symbol(d, count);
      int mean = b.binary("div", b.reduce("sum", v), cnt, d);
      int centered = b.binary("sub", v, mean, d);
      int var = b.binary("div", b.reduce("sum", b.binary("mul", centered, centered, d)), cnt, d);
      int rstd = b.binary("div", b.constant(d, 1.0),
                          b.unary("sqrt", b.binary("add", var, b.constant(d, eps), d), d), d);
      int y = b.binary("mul", centered, rstd, d);
      y = b.binary("mul", y, b.cast(emit_mapped(params[0].l, params[0].map, ctx, idx), d), d);
      if (has_bias)
        y = b.binary("add", y, b.cast(emit_mapped(params[1].l, params[1].map, ctx, idx), d), d);
      return b.cast(y, x.dtype);
    };
    return bind_row(n, *x, std::move(r), std::move(plan));
  }

  // Reduce* over any axes and GlobalAveragePool: the iteration space is the kept dims followed by
  // the reduced ones; one result per row. Sums accumulate in double, as the reference does.
  bool lower_reduce(const Node& n) {
    static const char* kOps[] = {"ReduceSum", "ReduceMean",      "ReduceMax", "ReduceMin",
                                 "ReduceL1",  "ReduceSumSquare", "ReduceL2",  "GlobalAveragePool"};
    const std::string& op = n.op_type;
    if (std::find_if(std::begin(kOps), std::end(kOps), [&](const char* s) { return op == s; }) ==
        std::end(kOps))
      return false;
    auto x = row_input(n);
    if (!x) return false;
    int64_t rank = static_cast<int64_t>(x->dims.size());
    std::vector<bool> reduced(rank, false);
    if (op == "GlobalAveragePool") {
      if (rank < 3) return false;
      for (int64_t i = 2; i < rank; ++i) reduced[i] = true;
    } else {
      std::vector<int64_t> axes;
      if (op == "ReduceSum" || n.opset >= 18) {
        if (n.inputs.size() > 1 && n.input(1)) {
          auto a = const_ints(n, 1);
          if (!a) return false;
          axes = *a;
        }
      } else {
        axes = n.attr_ints("axes");
      }
      if (axes.empty()) {
        if (n.attr_int("noop_with_empty_axes", 0) != 0) return false;
        reduced.assign(rank, true);
      }
      for (int64_t a : axes) {
        if (a < -rank || a >= rank) return false;  // the library step reports the error
        if (a < 0) a += rank;
        if (reduced[a]) return false;
        reduced[a] = true;
      }
    }
    // Iteration: kept dims, then reduced dims; pos[i] = iteration position of input dim i.
    std::vector<int> pos(rank);
    std::vector<Dim> iter;
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t i = 0; i < rank; ++i)
        if (reduced[i] == (pass == 1)) {
          pos[i] = static_cast<int>(iter.size());
          iter.push_back(x->dims[i]);
        }
    size_t outer = 0;
    for (int64_t i = 0; i < rank; ++i) outer += reduced[i] ? 0 : 1;
    if (outer == iter.size()) return false;  // nothing reduced (rank 0)
    bool keep = op == "GlobalAveragePool" || n.attr_int("keepdims", 1) != 0;
    const std::vector<Dim> out_dims = *known_dims(n.outputs[0]->type.shape);
    if (out_dims.size() != (keep ? iter.size() : outer)) return false;
    SymExpr count = product(iter, outer, iter.size());
    // The input as seen by the iteration. A realized input is re-strided instead, and reduced
    // dims that are contiguous in it merge into one (a single, vectorisable inner loop).
    Lowered src;
    if (x->realized()) {
      src = *x;
      src.dims = iter;
      for (int64_t i = 0; i < rank; ++i) src.strides[pos[i]] = x->strides[i];
      bool merge = iter.size() - outer > 1;
      for (size_t i = outer; merge && i + 1 < iter.size(); ++i)
        merge = src.strides[i] == src.strides[i + 1] * iter[i + 1].expr();
      if (merge) {
        SymExpr inner = src.strides.back();
        src.dims.resize(outer);
        src.strides.resize(outer);
        src.dims.push_back(Dim(count));
        src.strides.push_back(inner);
      }
    } else {
      src.dtype = x->dtype;
      src.dims = iter;
      src.emit = [x = *x, pos](EmitContext& ctx, const std::vector<SymExpr>& it) {
        std::vector<SymExpr> in;
        for (int p : pos) in.push_back(it[p]);
        return emit_value(x, ctx, in);
      };
    }
    RowPlan plan;
    plan.iter = src.dims;
    plan.reduce_rank = src.dims.size() - outer;
    plan.per_row = true;
    std::vector<SymExpr> vars = loop_vars(src.dims.size());
    for (int64_t i = 0, k = 0; i < rank; ++i) {
      if (!reduced[i])
        plan.out_idx.push_back(vars[k++]);
      else if (keep)
        plan.out_idx.push_back(SymExpr(0));
    }
    Lowered r;
    r.dims = out_dims;
    r.emit = [src, vars, op, count](EmitContext& ctx, const std::vector<SymExpr>&) {
      KernelBody& b = ctx.body;
      const DType t = src.dtype, d = DType::kF64;
      int v = emit_value(src, ctx, vars);
      if (op == "ReduceMax" || op == "ReduceMin")
        return b.reduce(op == "ReduceMax" ? "max" : "min", v);
      int vd = b.cast(v, d);
      if (op == "ReduceSumSquare" || op == "ReduceL2") vd = b.binary("mul", vd, vd, d);
      if (op == "ReduceL1") vd = b.unary("abs", vd, d);
      int acc = b.reduce("sum", vd);
      if (op == "ReduceL2") acc = b.unary("sqrt", acc, d);
      if (op == "ReduceMean" || op == "GlobalAveragePool") {
        int cnt = b.symbol(d, count);
        acc = b.binary("div", acc, cnt, d);
        // The reference pools an empty plane to 0 (a mean of nothing is NaN otherwise).
        if (op == "GlobalAveragePool" && !count.is_constant()) {
          int zero = b.constant(d, 0);
          acc = b.select(b.binary("eq", cnt, zero, DType::kBool), zero, acc);
        } else if (op == "GlobalAveragePool" && count == SymExpr(0)) {
          acc = b.constant(d, 0);
        }
      }
      return b.cast(acc, t);
    };
    return bind_row(n, *x, std::move(r), std::move(plan));
  }

  // View ops remap indices of their input; on a realized input they stay a strided view.
  bool lower_view(const Node& n) {
    static const char* kViews[] = {"Transpose", "Expand",  "Unsqueeze", "Squeeze", "Slice",
                                   "Reshape",   "Flatten", "Identity",  "Dropout"};
    if (!n.domain.empty() || std::find_if(std::begin(kViews), std::end(kViews), [&](const char* s) {
                               return n.op_type == s;
                             }) == std::end(kViews))
      return false;
    if (n.outputs.empty() || !n.outputs[0] || !n.inputs[0]) return false;
    if (n.op_type == "Dropout") {
      for (size_t i = 1; i < n.outputs.size(); ++i)
        if (n.outputs[i] && uses_[n.outputs[i]]) return false;
      if (n.inputs.size() > 2 && n.inputs[2]) return false;  // training_mode given
    }
    const Value* in = n.inputs[0];
    const Value* out = n.outputs[0];
    auto out_dims = known_dims(out->type.shape);
    const Lowered& src = values_.at(in);
    if (!out_dims || !src.dims_known || !kernel_dtype(src.dtype)) return false;
    // Index map: input index expressions in terms of output index (for inline values), plus
    // the equivalent stride transform for realized ones.
    std::vector<Dim> idims = src.dims;
    std::vector<Dim> odims = *out_dims;
    std::function<std::vector<SymExpr>(const std::vector<SymExpr>&)> to_input;
    if (n.op_type == "Identity" || n.op_type == "Dropout") {
      to_input = [](const std::vector<SymExpr>& o) { return o; };
    } else if (n.op_type == "Transpose") {
      auto perm = n.attr_ints("perm");
      if (perm.empty())
        for (int64_t i = static_cast<int64_t>(idims.size()) - 1; i >= 0; --i) perm.push_back(i);
      to_input = [perm](const std::vector<SymExpr>& o) {
        std::vector<SymExpr> i(o.size());
        for (size_t k = 0; k < perm.size(); ++k) i[perm[k]] = o[k];
        return i;
      };
    } else if (n.op_type == "Expand") {
      size_t off = odims.size() - idims.size();
      for (size_t d = 0; d < idims.size(); ++d)
        if (idims[d] != odims[off + d] && idims[d].value() != 1) return false;
      to_input = [idims, odims, off](const std::vector<SymExpr>& o) {
        std::vector<SymExpr> i(idims.size());
        for (size_t d = 0; d < idims.size(); ++d)
          i[d] = idims[d] == odims[off + d] ? o[off + d] : SymExpr(0);
        return i;
      };
    } else if (n.op_type == "Unsqueeze" || n.op_type == "Squeeze") {
      // Dims of size 1 come and go; the others keep their order.
      std::vector<int> keep_out;  // output dim for each non-1 input dim, in order
      size_t o = 0;
      for (size_t d = 0; d < idims.size(); ++d) {
        if (n.op_type == "Squeeze" && idims[d].value() == 1 && idims.size() != odims.size()) {
          keep_out.push_back(-1);
          continue;
        }
        while (o < odims.size() && odims[o] != idims[d]) ++o;
        if (o == odims.size()) return false;
        keep_out.push_back(static_cast<int>(o++));
      }
      to_input = [keep_out](const std::vector<SymExpr>& out_idx) {
        std::vector<SymExpr> i;
        for (int k : keep_out) i.push_back(k < 0 ? SymExpr(0) : out_idx[k]);
        return i;
      };
    } else if (n.op_type == "Slice") {
      auto starts = const_ints(n, 1), ends = const_ints(n, 2);
      auto axes = n.inputs.size() > 3 && n.inputs[3] ? const_ints(n, 3) : std::optional<std::vector<int64_t>>();
      auto steps = n.inputs.size() > 4 && n.inputs[4] ? const_ints(n, 4) : std::optional<std::vector<int64_t>>();
      if (!starts || !ends || (n.inputs.size() > 3 && n.inputs[3] && !axes) ||
          (n.inputs.size() > 4 && n.inputs[4] && !steps))
        return false;
      std::vector<SymExpr> start(idims.size(), SymExpr(0)), step(idims.size(), SymExpr(1));
      for (size_t k = 0; k < starts->size(); ++k) {
        int64_t ax = axes ? (*axes)[k] : static_cast<int64_t>(k);
        if (ax < 0) ax += static_cast<int64_t>(idims.size());
        int64_t st = steps ? (*steps)[k] : 1;
        int64_t s = (*starts)[k];
        auto dim = idims[ax].value();
        // Static dims only: clamping a start against a symbolic dim needs a run-time min/max.
        if (!dim || st <= 0) return false;
        if (s < 0) s += *dim;
        s = std::clamp<int64_t>(s, 0, *dim);
        start[ax] = SymExpr(s);
        step[ax] = SymExpr(st);
      }
      to_input = [start, step](const std::vector<SymExpr>& o) {
        std::vector<SymExpr> i(o.size());
        for (size_t d = 0; d < o.size(); ++d) i[d] = start[d] + o[d] * step[d];
        return i;
      };
    } else if (n.op_type == "Reshape" || n.op_type == "Flatten") {
      // A reshape is free on a contiguous buffer: new contiguous strides over the same storage.
      if (is_output(out) && !src.realized()) return false;
      auto b = realize_contiguous(in);
      if (!b) return false;
      Lowered r = values_.at(in);
      r.dims = odims;
      r.strides = contiguous(odims);
      values_[out] = std::move(r);
      return true;
    } else {
      return false;
    }
    Lowered r;
    r.dtype = src.dtype;
    r.dims_known = true;
    r.dims = odims;
    if (src.realized()) {
      // Stride transform: express each output dim's stride through the index map.
      r.buffer = src.buffer;
      std::vector<SymExpr> zeros(odims.size(), SymExpr(0));
      std::vector<SymExpr> in_at_zero = to_input(zeros);
      r.offset = src.offset;
      for (size_t d = 0; d < idims.size(); ++d) r.offset = r.offset + in_at_zero[d] * src.strides[d];
      r.strides.resize(odims.size());
      for (size_t k = 0; k < odims.size(); ++k) {
        std::vector<SymExpr> unit = zeros;
        unit[k] = SymExpr(1);
        std::vector<SymExpr> in_at_unit = to_input(unit);
        SymExpr s(0);
        for (size_t d = 0; d < idims.size(); ++d) s = s + (in_at_unit[d] - in_at_zero[d]) * src.strides[d];
        r.strides[k] = s;
      }
    } else {
      r.cost = src.cost;
      r.nodes = src.nodes;
      r.emit = [src, to_input](EmitContext& ctx, const std::vector<SymExpr>& idx) {
        return emit_value(src, ctx, to_input(idx));
      };
    }
    r.nodes.push_back(n.name);
    bool realize = !r.realized() && uses_[out] > 1;
    values_[out] = std::move(r);
    if (realize) materialize(values_[out], Buffer::Kind::kIntermediate, out, out->name);
    return true;
  }

  std::optional<std::vector<int64_t>> const_ints(const Node& n, size_t i) const {
    const Value* v = n.input(i);
    if (!v || !v->constant || v->is_graph_input) return std::nullopt;
    return v->constant->to_int_vector();
  }

  Status lower_library(const Node& n) {
    Step s;
    s.kind = Step::Kind::kLibrary;
    s.node = &n;
    for (const Value* v : n.inputs) {
      if (!v) {
        s.inputs.push_back(-1);
        s.input_dims.emplace_back();
        continue;
      }
      FERRITE_ASSIGN_OR_RETURN(int b, realize_contiguous(v));
      s.inputs.push_back(b);
      const Lowered& l = values_.at(v);
      s.input_dims.push_back(l.dims_known ? std::optional<std::vector<Dim>>(l.dims) : std::nullopt);
    }
    for (const Value* v : n.outputs) {
      if (!v) {
        s.outputs.push_back(-1);
        continue;
      }
      Lowered l;
      l.dtype = v->type.dtype;
      l.buffer = new_buffer(Buffer::Kind::kIntermediate, v->type.dtype, v->type.shape, v, v->name);
      if (auto d = known_dims(v->type.shape)) {
        l.dims_known = true;
        l.dims = *d;
        l.strides = contiguous(*d);
      }
      s.outputs.push_back(l.buffer);
      values_[v] = std::move(l);
    }
    out_.library_steps++;
    out_.steps.push_back(std::move(s));
    return Status::ok();
  }

  void collect_symbols() {
    std::vector<std::string> names;
    for (const Buffer& b : out_.buffers)
      for (const Dim& d : b.shape.dims())
        if (d.is_known()) d.expr().collect_symbols(names);
    for (const Step& s : out_.steps)
      if (s.kind == Step::Kind::kKernel)
        for (const ScalarExpr& e : s.kernel.body.exprs())
          if (e.kind == ScalarKind::kLoad || e.kind == ScalarKind::kSymbol)
            e.address.collect_symbols(names);
    for (const auto& n : names)
      if (!is_loop_var(n) &&
          std::find(out_.symbols.begin(), out_.symbols.end(), n) == out_.symbols.end())
        out_.symbols.push_back(n);
  }

  const Graph& g_;
  LoweringOptions opts_;
  LoweredGraph out_;
  std::unordered_map<const Value*, Lowered> values_;
  std::unordered_map<const Value*, int> uses_;
};

}  // namespace

Expected<LoweredGraph> lower_graph(const Graph& g, const LoweringOptions& opts) {
  return Lowerer(g, opts).run();
}

std::string print_lowered(const LoweredGraph& lg) {
  std::ostringstream os;
  os << "lowered: " << lg.steps.size() << " steps (" << lg.kernels << " generated kernels, "
     << lg.library_steps << " library calls), " << lg.buffers.size() << " buffers\n";
  for (const Step& s : lg.steps) {
    if (s.kind == Step::Kind::kKernel) {
      os << print_kernel(s.kernel);
    } else {
      os << "library " << s.node->op_type << " (" << s.node->name << ") in:";
      for (int b : s.inputs) os << " buf" << b;
      os << " out:";
      for (int b : s.outputs) os << " buf" << b;
      os << "\n";
    }
  }
  return os.str();
}

}  // namespace ferrite
