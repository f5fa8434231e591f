#include "lower/lowering.h"

#include <algorithm>
#include <functional>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "ir/sym_ranges.h"
#include "lower/horizontal_fusion.h"
#include "lower/lowered_value.h"
#include "lower/pointwise_ops.h"
#include "lower/row_ops.h"
#include "lower/view_ops.h"
#include "ops/op_schema.h"

namespace ferrite {

namespace {

using lower_impl::contiguous;
using lower_impl::emit_value;
using lower_impl::loop_vars;
using lower_impl::Lowered;

using lower_impl::compute_dtype;
using lower_impl::is_low_float;

std::optional<std::vector<Dim>> known_dims(const Shape& s) {
  if (!s.rank_known()) return std::nullopt;
  for (const Dim& d : s.dims())
    if (!d.is_known()) return std::nullopt;
  return s.dims();
}

class Lowerer {
 public:
  Lowerer(const Graph& g, const LoweringOptions& opts) : g_(g), opts_(opts) {}

  bool kernel_dtype(DType t) const {
    if (!opts_.kernel_dtypes.empty() &&
        std::find(opts_.kernel_dtypes.begin(), opts_.kernel_dtypes.end(), t) ==
            opts_.kernel_dtypes.end())
      return false;
    return t == DType::kF32 || t == DType::kF64 || t == DType::kI32 || t == DType::kI64 ||
           t == DType::kBool || (opts_.low_precision_kernels && is_low_float(t));
  }

  Expected<LoweredGraph> run() {
    for (const auto& n : g_.nodes())
      for (const Value* v : n->inputs)
        if (v) {
          uses_[v]++;
          consumers_[v].push_back(n.get());
        }
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

  // Whether `l` is its whole buffer in row-major order, so that a library step can take the
  // buffer itself (viewed with l.dims). Offset 0 and row-major strides are not enough: a prefix
  // Slice (Shape -> Slice [0:2] -> Concat, as exporters emit for dynamic reshapes) has both but
  // covers only part of the buffer.
  bool is_contiguous(const Lowered& l) const {
    if (!l.realized() || !l.dims_known) return l.realized();  // unknown dims: library output
    if (l.offset != SymExpr(0)) return false;
    auto c = contiguous(l.dims);
    for (size_t i = 0; i < c.size(); ++i)
      if (l.dims[i].value() != 1 && c[i] != l.strides[i]) return false;
    const Shape& whole = out_.buffers[l.buffer].shape;
    if (!whole.rank_known()) return false;
    SymExpr view_numel(1), buffer_numel(1);
    for (const Dim& d : l.dims) view_numel = view_numel * d.expr();
    for (const Dim& d : whole.dims()) {
      if (!d.is_known()) return false;
      buffer_numel = buffer_numel * d.expr();
    }
    return view_numel == buffer_numel;
  }

  // Whether the kernel storing reshaped value `l` iterates over the dims of the value before
  // the Reshape (l.reshape_src): more dims, whose innermost fills whole 16-byte vectors. ViT's
  // attention output [B, H, S, D] -> [S * B, H * D] (torchvision's MultiheadAttention) was
  // gathered element by element through floordiv / mod of the merged index at 1 TB/s (18.8 us a
  // layer at batch 32, bf16, H200).
  static bool store_over_source_dims(const Lowered& l) {
    const Lowered* s = l.reshape_src.get();
    if (!s || l.row || l.realized() || s->row || !s->dims_known) return false;
    if (s->dims.size() <= l.dims.size() || s->dims.empty()) return false;
    const size_t bytes = dtype_size(l.dtype);
    const int64_t lanes = bytes > 0 && bytes <= 16 ? static_cast<int64_t>(16 / bytes) : 1;
    auto last = s->dims.back().value();
    return last && *last % lanes == 0;
  }

  // Materializes `l` into a fresh contiguous buffer with a generated kernel.
  int materialize(Lowered& l, Buffer::Kind kind, const Value* v, const std::string& name) {
    Kernel k;
    k.name = "k" + std::to_string(out_.kernels);
    k.shape = l.dims;
    k.out_dtype = l.dtype;
    std::vector<SymExpr> idx = loop_vars(l.dims.size());
    const Lowered* stored = &l;  // the value whose expression the kernel evaluates
    if (store_over_source_dims(l)) {
      stored = l.reshape_src.get();
      k.shape = stored->dims;
      idx = loop_vars(k.shape.size());
    }
    if (l.row) {
      k.shape = l.row->iter;
      k.reduce_rank = l.row->reduce_rank;
      k.per_row = l.row->per_row;
      idx = l.row->out_idx;
      out_.row_kernels++;
    }
    // Loop variable i runs over [0, shape[i]): index arithmetic uses that (ir/sym_ranges.h).
    std::unordered_map<std::string, int64_t> extents;
    for (size_t i = 0; i < k.shape.size(); ++i)
      if (auto e = k.shape[i].value()) extents[loop_var(i)] = *e;
    SymRangeScope ranges(std::move(extents));
    EmitContext ctx{k.body, k.input_buffers};
    k.root = emit_value(*stored, ctx, idx);
    if (is_low_float(l.dtype)) k.root = k.body.cast(k.root, l.dtype);  // the store rounds
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
    l.reshape_src = nullptr;
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
    // A view of another output with the same dims shares its buffer; one with other dims (a
    // Reshape of an output that is itself an output: a training forward returns both) gets its
    // own, since an output's dims are its buffer's.
    if (l.realized() && is_contiguous(l) && out_.buffers[l.buffer].kind == Buffer::Kind::kOutput &&
        out_.buffers[l.buffer].shape == Shape(l.dims))
      return l.buffer;
    if (!l.dims_known) return err("internal: output '", v->name, "' has unknown dims");
    return materialize(l, Buffer::Kind::kOutput, v, v->name);
  }

  Status lower_node(const Node& n) {
    // A pending row kernel is complete unless `n` fuses into its store as an epilogue.
    const lower_impl::RowPlan* epilogue = epilogue_plan(n);
    for (const Value* v : n.inputs) {
      if (!v) continue;
      Lowered& l = values_.at(v);
      if (l.row && (l.row.get() != epilogue || (l.dims != n.outputs[0]->type.shape.dims() &&
                                                !row_broadcast(l, n.outputs[0]->type.shape))))
        materialize(l, Buffer::Kind::kIntermediate, v, v->name);
    }
    if (fixed_by_binding(n)) {
      for (const Value* o : n.outputs)
        if (o) fixed_values_.insert(o);
      return lower_library(n);
    }
    if (lower_row(n) || lower_view(n) || lower_pointwise(n) || lower_roll(n) || lower_concat(n))
      return Status::ok();
    return lower_library(n);
  }

  // Shape and Size, and deterministic nodes over their results and constants only: values the
  // shape binding fixes. Integer ones (a Slice or Concat of dims building a Reshape target) are
  // shape arithmetic and always stay library steps, so that the executor computes them on the
  // host: as a generated kernel the Slice ran on the device (cuda), and the host step reading it
  // copied its result back on every run. Others (float masks and rotary tables from Range) too
  // with LoweringOptions::fixed_values_on_host.
  bool fixed_by_binding(const Node& n) const {
    if (!n.domain.empty() || nondeterministic(n)) return false;
    // As the executor decides (execute/step_plan.cpp): a Shape is fixed when the lowering knows
    // every dim of its input, as expressions of the input dims; after a data-dependent shape
    // (NonZero) it is not, and neither is what is computed from it.
    if (n.op_type == "Shape" || n.op_type == "Size") {
      const Value* in = n.inputs.empty() ? nullptr : n.inputs[0];
      if (!in || !in->type.shape.rank_known()) return false;
      for (const Dim& d : in->type.shape.dims())
        if (!d.is_known()) return false;
      return true;
    }
    bool from_shape = false;
    for (const Value* v : n.inputs) {
      if (!v || v->constant) continue;
      if (!fixed_values_.count(v)) return false;
      from_shape = true;
    }
    if (!from_shape) return false;
    for (const Value* o : n.outputs)
      if (o && !is_integer(o->type.dtype) && !opts_.fixed_values_on_host) return false;
    return true;
  }

  // The pending row kernel that pointwise `n` may fuse into as a store epilogue: one read at the
  // output's own index (no broadcast) by its only user, or by converging users.
  const lower_impl::RowPlan* epilogue_plan(const Node& n) const {
    if (!find_pointwise_op(n) || n.outputs.size() != 1 || !n.outputs[0]) return nullptr;
    auto out_dims = known_dims(n.outputs[0]->type.shape);
    if (!out_dims) return nullptr;
    for (const Value* v : n.inputs) {
      if (!v) continue;
      const Lowered& l = values_.at(v);
      if (l.row && (l.dims == *out_dims || row_broadcast(l, Shape(*out_dims)))) return l.row.get();
    }
    return nullptr;
  }

  // Whether `l`, one value per row of a pending row kernel (ReduceMean with keepdims), is read
  // broadcast over the row by a pointwise node over the kernel's whole iteration space: RMSNorm's
  // x * rsqrt(mean(x^2) + eps). The node then becomes the kernel's store expression, per element,
  // instead of a second kernel reading the row again.
  static bool row_broadcast(const Lowered& l, const Shape& out) {
    if (!l.row || !l.row->per_row || !out.rank_known() || out.dims() != l.row->iter ||
        l.dims.size() != l.row->iter.size() || l.row->out_idx.size() != l.dims.size())
      return false;
    const size_t outer = l.dims.size() - l.row->reduce_rank;
    for (size_t d = 0; d < l.dims.size(); ++d) {
      const bool reduced = d >= outer;
      if (reduced ? l.dims[d].value() != 1 || l.row->out_idx[d] != SymExpr(0)
                  : l.dims[d] != out.dims()[d] || l.row->out_idx[d] != SymExpr::symbol(loop_var(d)))
        return false;
    }
    return true;
  }

  // The per-element form of per-row plan `p` (its store runs at every element of the row).
  std::shared_ptr<const lower_impl::RowPlan> per_element(
      const std::shared_ptr<const lower_impl::RowPlan>& p) {
    // Keyed by address: the entry keeps `p` alive, so no later plan can take its address.
    auto& [source, e] = per_element_plans_[p.get()];
    if (!e) {
      auto q = std::make_shared<lower_impl::RowPlan>(*p);
      q->per_row = false;
      q->out_idx = loop_vars(q->iter.size());
      source = p;
      e = std::move(q);
    }
    return e;
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
    std::vector<std::shared_ptr<const Lowered>> ins;
    std::vector<const Value*> consumed;
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
        if (l.dims[d] == (*out_dims)[off + d])
          map[d] = static_cast<int>(off + d);
        else if (l.dims[d].value() == 1)
          map[d] = -1;
        else
          return false;  // symbolic broadcast the kernel cannot decide statically
      }
      ins.push_back(for_closure(l));
      consumed.push_back(v);
      maps.push_back(std::move(map));
    }
    Lowered r;
    r.dtype = out->type.dtype;
    r.dims_known = true;
    r.dims = *out_dims;
    r.cost = 1;
    for (const Value* v : consumed) {
      const Lowered& l = values_.at(v);
      r.cost += l.cost;
      // Converging epilogue users reach the same row kernel twice (see converging_users).
      for (const std::string& name : l.nodes)
        if (!l.row || std::find(r.nodes.begin(), r.nodes.end(), name) == r.nodes.end())
          r.nodes.push_back(name);
      // An epilogue: every such input shares this plan (its per-element form when the input is
      // one value per row, read broadcast).
      if (l.row) r.row = l.dims != r.dims && l.row->per_row ? per_element(l.row) : l.row;
    }
    r.nodes.push_back(n.name);
    const Node* node = &n;
    r.emit = [ins, maps, op, node, dtype = r.dtype](EmitContext& ctx,
                                                    const std::vector<SymExpr>& idx) {
      std::vector<int> args;
      for (size_t i = 0; i < ins.size(); ++i) {
        std::vector<SymExpr> sub;
        for (int m : maps[i]) sub.push_back(m < 0 ? SymExpr(0) : idx[m]);
        args.push_back(emit_value(*ins[i], ctx, sub));
      }
      int v = op->emit(ctx, *node, args, compute_dtype(dtype));
      // A Cast to a low dtype rounds even when its result stays in a float register.
      if (is_low_float(dtype) && node->op_type == "Cast")
        v = ctx.body.cast(ctx.body.cast(v, dtype), DType::kF32);
      return v;
    };
    bool realize = uses_[out] > 1 || r.cost > opts_.max_inline_exprs;
    values_[out] = std::move(r);
    for (const Value* v : consumed) forget_nodes(v);
    if (realize) materialize(values_[out], Buffer::Kind::kIntermediate, out, out->name);
    return true;
  }

  // A float Concat of a few pieces read by one pointwise node folds into it, as inductor does:
  // each element picks its piece by its index along the axis (rotary embeddings' rotate_half,
  // cat(-x2, x1), then costs no copy and no kernel of its own). Every piece is read at an index
  // clamped into it, so the reads of the pieces not picked stay in bounds (and, pinned to the
  // piece's edge, in cache). More pieces (DenseNet's feature maps) stay one library copy.
  static constexpr size_t kMaxInlineConcatPieces = 4;
  bool lower_concat(const Node& n) {
    if (!n.domain.empty() || n.op_type != "Concat" || n.outputs.size() != 1 || !n.outputs[0] ||
        n.inputs.size() < 2 || n.inputs.size() > kMaxInlineConcatPieces)
      return false;
    const Value* out = n.outputs[0];
    auto out_dims = known_dims(out->type.shape);
    if (uses_[out] != 1 || is_output(out) || !out_dims || !is_float(out->type.dtype) ||
        !kernel_dtype(out->type.dtype))
      return false;
    // Only into a pointwise reader: for a library reader (a convolution after SqueezeNet's fire
    // module) the library copy is the faster way to make the contiguous input. A channel shuffle
    // (ShuffleNet: Reshape, Transpose, Reshape) gathers its input anyway: the Concat folds into
    // that copy even when its pieces are all buffers, which saves one copy of the whole tensor.
    const auto& readers = consumers_[out];
    if (readers.size() != 1) return false;
    const bool shuffle = is_shuffle(*readers[0]);
    if (!shuffle && !find_pointwise_op(*readers[0])) return false;
    const auto rank = static_cast<int64_t>(out_dims->size());
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += rank;
    // The innermost axis only: there the pieces not picked are read at their edge element, the
    // same address along a run of outputs; along an outer axis every output would also read a
    // whole plane of each other piece.
    if (axis != rank - 1) return false;
    std::vector<std::shared_ptr<const Lowered>> ins;
    std::vector<int64_t> starts;
    int64_t total = 0;
    // Some piece must be an expression still to be computed (rotate_half's -x2): pieces that are
    // all buffers already (DenseNet's feature maps, channels-last on cpu) copy faster as the
    // library Concat than through a select per element, which the cpu code generator does not
    // vectorise (DenseNet 0.97x -> 0.77x of ONNX Runtime when they folded).
    bool any_inline = false;
    Lowered r;
    r.cost = 1;
    for (const Value* v : n.inputs) {
      if (!v) return false;
      const Lowered& l = values_.at(v);
      if (!l.dims_known || l.dtype != out->type.dtype || l.dims.size() != out_dims->size())
        return false;
      auto len = l.dims[axis].value();
      if (!len || *len <= 0) return false;  // symbolic or empty pieces: the library copy
      for (int64_t d = 0; d < rank; ++d)
        if (d != axis && l.dims[d] != (*out_dims)[d]) return false;
      any_inline = any_inline || !l.realized();
      ins.push_back(for_closure(l));
      starts.push_back(total);
      total += *len;
      r.cost += l.cost;
    }
    if (!(any_inline || shuffle) || (*out_dims)[axis].value() != total) return false;
    r.dtype = out->type.dtype;
    r.dims_known = true;
    r.dims = *out_dims;
    for (const Value* v : n.inputs)
      for (const std::string& name : values_.at(v).nodes) r.nodes.push_back(name);
    r.nodes.push_back(n.name);
    r.emit = [ins, starts, total, axis](EmitContext& ctx, const std::vector<SymExpr>& idx) {
      const SymExpr at = idx[axis];
      int v = -1;
      for (size_t i = ins.size(); i-- > 0;) {  // select chain from the last piece
        const int64_t end = i + 1 < starts.size() ? starts[i + 1] : total;
        std::vector<SymExpr> sub = idx;
        SymExpr local = at - SymExpr(starts[i]);
        if (i > 0) local = SymExpr::max(local, SymExpr(0));
        if (i + 1 < ins.size()) local = SymExpr::min(local, SymExpr(end - starts[i] - 1));
        sub[axis] = local;
        const int piece = emit_value(*ins[i], ctx, sub);
        if (v < 0) {
          v = piece;
          continue;
        }
        // Sequenced: argument evaluation order is unspecified, and it numbers the expressions.
        const int pos = ctx.body.symbol(DType::kI64, at);
        const int lim = ctx.body.constant(DType::kI64, double(end));
        const int before = ctx.body.binary("lt", pos, lim, DType::kBool);
        v = ctx.body.select(before, piece, v);
      }
      return v;
    };
    const bool realize = r.cost > opts_.max_inline_exprs;
    values_[out] = std::move(r);
    for (const Value* v : n.inputs) forget_nodes(v);
    if (realize) materialize(values_[out], Buffer::Kind::kIntermediate, out, out->name);
    return true;
  }

  // A Reshape read only by a Transpose: the first two steps of a channel shuffle.
  bool is_shuffle(const Node& r) const {
    if (r.op_type != "Reshape" || !r.domain.empty() || r.outputs.empty() || !r.outputs[0])
      return false;
    auto it = consumers_.find(r.outputs[0]);
    return it != consumers_.end() && it->second.size() == 1 && !is_output(r.outputs[0]) &&
           it->second[0]->op_type == "Transpose" && it->second[0]->domain.empty();
  }

  // What a consumer's emit closure keeps of an input: shared, and without the input's node list.
  // Capturing a copy of each input's Lowered made every value of an inline chain hold a copy of
  // the whole chain below it (quadratic in the chain, ~140 KB per node of a 8,000-Add chain).
  static std::shared_ptr<const Lowered> for_closure(const Lowered& l) {
    auto p = std::make_shared<Lowered>();
    p->dtype = l.dtype;
    p->dims_known = l.dims_known;
    p->dims = l.dims;
    p->buffer = l.buffer;
    p->offset = l.offset;
    p->strides = l.strides;
    p->emit = l.emit;
    p->row = l.row;
    return p;
  }

  // An inline value read by one node only is folded into that node's value, names included: its
  // own copy of the names is dropped (it would otherwise hold the names of the chain below it).
  void forget_nodes(const Value* v) {
    Lowered& l = values_.at(v);
    if (l.realized() || l.row || uses_[v] != 1) return;  // graph outputs count 2 uses
    std::vector<std::string>().swap(l.nodes);
  }

  // Softmax, LayerNormalization, Reduce*, GlobalAveragePool: a pending row kernel.
  bool lower_row(const Node& n) {
    if (n.outputs.empty() || !n.outputs[0]) return false;
    const Value* out = n.outputs[0];
    auto out_dims = known_dims(out->type.shape);
    if (!out_dims || !kernel_dtype(out->type.dtype)) return false;
    for (size_t i = 1; i < n.outputs.size(); ++i)  // LayerNormalization's Mean, InvStdDev
      if (n.outputs[i] && uses_[n.outputs[i]] > 0) return false;
    std::vector<const Lowered*> in;
    for (const Value* v : n.inputs) in.push_back(v ? &values_.at(v) : nullptr);
    auto r = lower_impl::lower_row_op(n, in, *out_dims);
    if (!r && opts_.generate_matmul) r = lower_impl::lower_matmul(n, in, *out_dims);
    if (!r || r->dtype != out->type.dtype) return false;
    values_[out] = std::move(*r);
    if (uses_[out] > 1 && !converging_users(out))
      materialize(values_[out], Buffer::Kind::kIntermediate, out, out->name);
    return true;
  }

  // Whether the users of `v` are pointwise nodes at v's dims that all flow into one of them
  // (Where(IsNaN(p), 0, p) after a softmax): then they fuse into one store epilogue and `v`
  // is computed once. Each user but the last must have a single use: another user of `v`.
  bool converging_users(const Value* v) const {
    if (is_output(v)) return false;
    std::vector<const Node*> users;
    for (const Node* u : consumers_.at(v))
      if (std::find(users.begin(), users.end(), u) == users.end()) users.push_back(u);
    int sinks = 0;
    for (const Node* u : users) {
      if (!find_pointwise_op(*u) || u->outputs.size() != 1 || !u->outputs[0]) return false;
      const Value* o = u->outputs[0];
      auto dims = known_dims(o->type.shape);
      if (!dims || *dims != values_.at(v).dims) return false;
      auto it = consumers_.find(o);
      bool feeds_user = uses_.at(o) == 1 && it != consumers_.end() &&
                        std::find(users.begin(), users.end(), it->second[0]) != users.end();
      if (!feeds_user) ++sinks;
    }
    return sinks == 1;
  }

  // View ops remap indices of their input; on a realized input they stay a strided view.
  bool lower_view(const Node& n) {
    if (!n.domain.empty() || n.outputs.empty() || !n.outputs[0] || n.inputs.empty() || !n.inputs[0])
      return false;
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
    if (n.op_type == "Reshape" || n.op_type == "Flatten") return lower_reshape(n, *out_dims);
    // A Gather of integers is shape arithmetic, which the executor keeps on the host (computed
    // once per shape binding); only data selections become views.
    if (n.op_type == "Gather" && compute_dtype(src.dtype) != DType::kF32 &&
        src.dtype != DType::kF64)
      return false;
    auto map = lower_impl::affine_view_map(n, src.dims, *out_dims, ints_of());
    if (!map) return false;
    Lowered r;
    if (src.realized()) {
      r = strided_view(src, *out_dims, *map);
    } else {
      r = inline_view(src, *out_dims, *map);
    }
    finish_view(n, std::move(r));
    return true;
  }

  // A Reshape is free on a contiguous buffer (new contiguous strides over the same storage) and
  // on a strided view whose merged dims are contiguous among themselves; otherwise it folds into
  // its reader through each dim group's linear index, so that `select` + `view` + `transpose`
  // chains (attention's q, k, v) cost one copy into the library op that needs them contiguous.
  bool lower_reshape(const Node& n, const std::vector<Dim>& odims) {
    const Value* in = n.inputs[0];
    const Value* out = n.outputs[0];
    const Lowered& src = values_.at(in);
    auto groups = lower_impl::reshape_groups(src.dims, odims);
    bool contiguous_src = src.realized() && is_contiguous(src);
    // A graph output that reshapes a value not yet computed is that value's kernel storing
    // through the reshape (a training graph's gradient of a view: the whole logits otherwise
    // went through a library step, on the host on cuda).
    if (!contiguous_src && groups && (!is_output(out) || !src.realized())) {
      if (src.realized()) {
        if (auto st = lower_impl::reshape_view_strides(src.dims, src.strides, odims, *groups)) {
          Lowered r = for_closure_copy(src);
          r.dims = odims;
          r.strides = *st;
          finish_view(n, std::move(r));
          return true;
        }
      }
      Lowered r = inline_view(src, odims, lower_impl::reshape_index_map(src.dims, odims, *groups));
      if (!src.row) r.reshape_src = for_closure(src);
      finish_view(n, std::move(r));
      return true;
    }
    if (is_output(out) && !src.realized()) return false;  // dims that do not regroup
    auto b = realize_contiguous(in);
    if (!b) return false;
    Lowered r = values_.at(in);
    r.dims = odims;
    r.strides = contiguous(odims);
    values_[out] = std::move(r);
    return true;
  }

  static Lowered for_closure_copy(const Lowered& src) {
    Lowered r;
    r.dtype = src.dtype;
    r.dims_known = true;
    r.buffer = src.buffer;
    r.offset = src.offset;
    r.strides = src.strides;
    return r;
  }

  // Stride transform of an affine index map: each output dim's stride through the map.
  static Lowered strided_view(const Lowered& src, const std::vector<Dim>& odims,
                              const lower_impl::IndexMap& to_input) {
    Lowered r = for_closure_copy(src);
    r.dims = odims;
    std::vector<SymExpr> zeros(odims.size(), SymExpr(0));
    std::vector<SymExpr> in_at_zero = to_input(zeros);
    for (size_t d = 0; d < src.dims.size(); ++d)
      r.offset = r.offset + in_at_zero[d] * src.strides[d];
    r.strides.assign(odims.size(), SymExpr(0));
    for (size_t k = 0; k < odims.size(); ++k) {
      std::vector<SymExpr> unit = zeros;
      unit[k] = SymExpr(1);
      std::vector<SymExpr> in_at_unit = to_input(unit);
      SymExpr s(0);
      for (size_t d = 0; d < src.dims.size(); ++d)
        s = s + (in_at_unit[d] - in_at_zero[d]) * src.strides[d];
      r.strides[k] = s;
    }
    return r;
  }

  // The view as an expression its reader inlines (any index map, affine or not).
  static Lowered inline_view(const Lowered& src, const std::vector<Dim>& odims,
                             lower_impl::IndexMap to_input) {
    Lowered r;
    r.dtype = src.dtype;
    r.dims_known = true;
    r.dims = odims;
    r.cost = src.cost;
    r.nodes = src.nodes;
    r.emit = [in_l = for_closure(src), to_input = std::move(to_input)](
                 EmitContext& ctx, const std::vector<SymExpr>& idx) {
      return emit_value(*in_l, ctx, to_input(idx));
    };
    return r;
  }

  // torch.roll's Concat of two Slices of one value (lower_impl::roll_view: Swin's shifted windows)
  // is a view of that value with the axis index rotated; it folds into its reader like a
  // Reshape's view instead of a library copy per rolled dim.
  bool lower_roll(const Node& n) {
    if (n.outputs.size() != 1 || !n.outputs[0]) return false;
    auto out_dims = known_dims(n.outputs[0]->type.shape);
    auto roll = lower_impl::roll_view(n, ints_of());
    if (!out_dims || !roll) return false;
    const Lowered& src = values_.at(roll->source);
    if (!src.dims_known || !kernel_dtype(src.dtype) || src.dims != *out_dims) return false;
    Lowered r = inline_view(src, *out_dims, roll->map);
    for (const Value* v : n.inputs) r.nodes.push_back(v->producer->name);  // the Slices
    finish_view(n, std::move(r));
    return true;
  }

  // v is read by the two Slices of one roll only (read once per element: no buffer of its own).
  bool read_by_one_roll(const Value* v) const {
    auto it = consumers_.find(v);
    if (it == consumers_.end() || it->second.size() != 2 || is_output(v)) return false;
    const Node* concat = nullptr;
    for (const Node* s : it->second) {
      if (s->op_type != "Slice" || s->outputs.empty() || !s->outputs[0]) return false;
      auto c = consumers_.find(s->outputs[0]);
      if (uses_.at(s->outputs[0]) != 1 || c == consumers_.end() || c->second.size() != 1 ||
          (concat && c->second[0] != concat))
        return false;
      concat = c->second[0];
    }
    auto roll = lower_impl::roll_view(*concat, ints_of());
    return roll && roll->source == v;
  }

  void finish_view(const Node& n, Lowered r) {
    const Value* in = n.inputs[0];
    const Value* out = n.outputs[0];
    r.nodes.push_back(n.name);
    bool realize = !r.realized() && uses_[out] > 1 && !read_by_one_roll(out);
    values_[out] = std::move(r);
    forget_nodes(in);
    if (realize) materialize(values_[out], Buffer::Kind::kIntermediate, out, out->name);
  }

  std::optional<std::vector<int64_t>> const_ints(const Node& n, size_t i) const {
    const Value* v = n.input(i);
    if (!v || !v->constant || v->is_graph_input) return std::nullopt;
    return v->constant->to_int_vector();
  }
  lower_impl::ConstInts ints_of() const {
    return [this](const Node& m, size_t i) { return const_ints(m, i); };
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
  std::unordered_map<const Value*, std::vector<const Node*>> consumers_;  // one per input use
  std::unordered_set<const Value*> fixed_values_;  // fixed by the shape binding (see above)
  // Per-row plan -> (that plan, its per-element form): see per_element.
  std::unordered_map<const lower_impl::RowPlan*,
                     std::pair<std::shared_ptr<const lower_impl::RowPlan>,
                               std::shared_ptr<const lower_impl::RowPlan>>>
      per_element_plans_;
};

}  // namespace

bool nondeterministic(const Node& n) {
  const std::string& op = n.op_type;
  if (n.schema && !n.schema->foldable) return true;
  return op.rfind("Random", 0) == 0 || op == "Bernoulli" || op == "Multinomial";
}

Expected<LoweredGraph> lower_graph(const Graph& g, const LoweringOptions& opts) {
  FERRITE_ASSIGN_OR_RETURN(LoweredGraph lg, Lowerer(g, opts).run());
  if (opts.horizontal_fusion) lg.horizontal_merges = fuse_horizontal(lg, opts.max_inline_exprs);
  return lg;
}

}  // namespace ferrite
