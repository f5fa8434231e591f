// shard-tensor-parallel: see shard_tensor_parallel.h for what it does and why.
#include "passes/shard_tensor_parallel.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "ops/context.h"
#include "ops/scalar_functions.h"
#include "passes/pass.h"
#include "passes/rewrite_util.h"
#include "passes/shard_util.h"

namespace ferrite {

namespace {

using rewrite::constant_of;
using rewrite::insert_node;
using shard::divisible;
using shard::is_pointwise;
using shard::slice_chunk;
using shard::Split;
using shard::view_dim;

const char* const kMicrosoft = "com.microsoft";

class Sharder {
 public:
  // `whole`: column-parallel candidates a first attempt found wasted (below), kept unsplit.
  Sharder(Graph& g, int rank, int size, const std::unordered_set<std::string>& whole)
      : g_(g), rank_(rank), size_(size), whole_(whole) {
    report_.size = size;
  }

  // The column-parallel MatMul/Gemm nodes whose split was gathered again before any of it met a
  // row-parallel contraction: splitting them costs a gather and saves nothing (attention whose
  // heads N does not divide: GPT-2 XL's 25). The same on every rank: structure, not data.
  std::vector<std::string> wasted_seeds() const {
    std::vector<std::string> out;
    for (const std::string& s : gathered_seeds_)
      if (!contracted_seeds_.count(s)) out.push_back(s);
    std::sort(out.begin(), out.end());
    return out;
  }

  Expected<ShardReport> run() {
    report_.weight_bytes_before = shard::used_constant_bytes(g_);
    g_.opsets()[kMicrosoft] = 1;  // the collectives' domain
    std::vector<Node*> order;
    for (auto& n : g_.nodes()) order.push_back(n.get());
    for (size_t i = 0; i < order.size(); ++i) {
      next_ = i + 1 < order.size() ? order[i + 1] : nullptr;
      FERRITE_RETURN_IF_ERROR(visit(*order[i]));
    }
    FERRITE_RETURN_IF_ERROR(gather_outputs());
    FERRITE_RETURN_IF_ERROR(reinfer_and_check());
    report_.weight_bytes_after = shard::used_constant_bytes(g_);
    return report_;
  }

 private:
  // ---- the walk -------------------------------------------------------------------------------
  Status visit(Node& n) {
    // A value gathered once is read whole from then on (a residual stream stays whole).
    for (Value*& v : n.inputs)
      if (auto it = gathered_.find(v); v && it != gathered_.end()) v = it->second;
    bool any = false;
    for (Value* v : n.inputs) any = any || (v && split_.count(v));
    if (!any) return seed(n);
    FERRITE_ASSIGN_OR_RETURN(bool done, propagate(n));
    if (done) {
      // A split output descends from its first split input's column-parallel seed.
      if (auto it = origin_.find(first_split_input(n)); it != origin_.end())
        for (Value* o : n.outputs)
          if (o && split_.count(o) && !origin_.count(o)) origin_[o] = it->second;
      return Status::ok();
    }
    // The node needs its inputs whole.
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      Value* v = n.inputs[i];
      if (!v || !split_.count(v)) continue;
      if (auto it = origin_.find(v); it != origin_.end()) gathered_seeds_.insert(it->second);
      FERRITE_ASSIGN_OR_RETURN(Value * whole, gathered(v, n));
      n.inputs[i] = whole;
    }
    return seed(n);
  }

  // A node of unsplit inputs: column-parallel when it multiplies by a constant weight.
  Status seed(Node& n) {
    if (n.op_type == "MatMul" && n.domain.empty()) return seed_matmul(n, 1, false);
    if (n.op_type == "Gemm" && n.domain.empty() && n.attr_int("transA", 0) == 0)
      return seed_matmul(n, 1, n.attr_int("transB", 0) != 0);
    if (n.op_type == "Gather" && n.domain.empty() && n.attr_int("axis", 0) == 0)
      return seed_embedding(n);
    return Status::ok();
  }

  Status seed_matmul(Node& n, int w_input, bool trans_b) {
    Value* w = n.input(static_cast<size_t>(w_input));
    const Tensor* wt = constant_of(w);
    Value* x = n.input(0);
    if (!wt || wt->rank() != 2 || !is_float(wt->dtype()) || !x || x->constant) return Status::ok();
    if (whole_.count(n.name)) {
      note("kept whole ", n.op_type, " '", n.name, "': its split would be gathered before use");
      return Status::ok();
    }
    origin_[n.outputs[0]] = n.name;
    const size_t col_axis = trans_b ? 0 : 1;
    const int64_t cols = wt->dim(col_axis);
    const int sections = sections_after(n.outputs[0], static_cast<int>(cols));
    Value* c = n.op_type == "Gemm" ? n.input(2) : nullptr;
    if (cols % (static_cast<int64_t>(size_) * sections) != 0) {
      // An LM head over a vocabulary N does not divide (GPT-2's 50257): padded with zero columns
      // when its result is a graph output, which the final AllGather then cuts back.
      if (sections != 1 || c || !is_graph_output(g_, n.outputs[0])) return Status::ok();
      const int64_t chunk = (cols + size_ - 1) / size_;
      FERRITE_ASSIGN_OR_RETURN(Tensor padded, shard::padded(*wt, col_axis, chunk * size_));
      FERRITE_ASSIGN_OR_RETURN(n.inputs[static_cast<size_t>(w_input)],
                               sliced(w->name, padded, col_axis, 1));
      const int out_rank = static_cast<int>(n.outputs[0]->type.shape.rank());
      split_[n.outputs[0]] = {out_rank - 1, 1};
      padded_[n.outputs[0]] = cols;
      ++report_.column_parallel;
      note("column-parallel ", n.op_type, " '", n.name, "': ", w->name, " ",
           w->type.shape.to_string(), " padded to ", chunk * size_, " columns");
      return Status::ok();
    }
    if (c) {  // Gemm's bias: sliced with the columns when it has them
      const Tensor* ct = constant_of(c);
      if (!ct) return Status::ok();
      if (ct->rank() >= 1 && ct->dims().back() == cols) {
        FERRITE_ASSIGN_OR_RETURN(n.inputs[2], sliced(c->name, *ct, ct->rank() - 1, sections));
      } else if (ct->numel() != 1) {
        return Status::ok();
      }
    }
    FERRITE_ASSIGN_OR_RETURN(n.inputs[static_cast<size_t>(w_input)],
                             sliced(w->name, *wt, col_axis, sections));
    const int out_rank = static_cast<int>(n.outputs[0]->type.shape.rank());
    split_[n.outputs[0]] = {out_rank - 1, sections};
    ++report_.column_parallel;
    note("column-parallel ", n.op_type, " '", n.name, "': ", w->name, " ",
         w->type.shape.to_string(), sections > 1 ? str_cat(" in ", sections, " sections") : "");
    return Status::ok();
  }

  // Vocab-parallel embedding (Megatron): the rank keeps ceil(V/N) rows (the last rank's padded
  // with zeros), looks up the ids that fall in them, zeroes the others' rows, and an AllReduce
  // sums the ranks' partial lookups into the whole result.
  Status seed_embedding(Node& n) {
    // FERRITE_TP_VOCAB_PARALLEL=0 keeps embeddings whole on every rank (memory for fewer steps:
    // on cuda the index arithmetic is int64 and runs on the host).
    if (const char* v = std::getenv("FERRITE_TP_VOCAB_PARALLEL"); v && std::string(v) == "0")
      return Status::ok();
    const Tensor* wt = constant_of(n.input(0));
    Value* ids = n.input(1);
    if (!wt || wt->rank() != 2 || !is_float(wt->dtype()) || wt->dim(0) < size_ || !ids ||
        ids->constant || (ids->type.dtype != DType::kI64 && ids->type.dtype != DType::kI32))
      return Status::ok();
    const int64_t vocab = wt->dim(0), rows = (vocab + size_ - 1) / size_;
    Value* w = n.inputs[0];
    const int64_t first = rank_ * rows;
    FERRITE_ASSIGN_OR_RETURN(Tensor local, shard::vocab_rows(*wt, rank_, size_));
    const DType it = ids->type.dtype;
    auto scalar = [&](int64_t v) {
      return constant("tp_index", it == DType::kI64
                                      ? Tensor::scalar<int64_t>(v)
                                      : Tensor::scalar<int32_t>(static_cast<int32_t>(v)));
    };
    const int op13 = rewrite::onnx_opset_at_least(g_, 13);
    auto add = [&](const char* op, std::vector<Value*> in) -> Value* {
      Node* m = insert_node(g_, "", op, op13, std::move(in), {}, &n, n.name + "_tp_vocab");
      return m ? m->outputs[0] : nullptr;
    };
    // ids in [-V, V) as Gather reads them; then this rank's rows [first, first + rows).
    Value* neg = add("Less", {ids, scalar(0)});
    Value* wrapped = neg ? add("Add", {ids, scalar(vocab)}) : nullptr;
    Value* norm = wrapped ? add("Where", {neg, wrapped, ids}) : nullptr;
    Value* rel = norm ? add("Sub", {norm, scalar(first)}) : nullptr;
    Value* ge = rel ? add("GreaterOrEqual", {rel, scalar(0)}) : nullptr;
    Value* lt = ge ? add("Less", {rel, scalar(rows)}) : nullptr;
    Value* mine = lt ? add("And", {ge, lt}) : nullptr;
    Value* safe = mine ? add("Where", {mine, rel, scalar(0)}) : nullptr;
    Value* axes = constant("tp_axes", Tensor::from_vector<int64_t>({-1}, {1}));
    Value* mine3 = safe ? add("Unsqueeze", {mine, axes}) : nullptr;
    if (!mine3) return err(n.describe(), ": tensor-parallel: cannot split the embedding");
    n.inputs = {constant(w->name, std::move(local)), safe};
    Value* zero = constant("tp_zero", Tensor::zeros(wt->dtype(), {}));
    Node* masked = insert_node(g_, "", "Where", op13, {mine3, n.outputs[0], zero}, {}, next_,
                               n.name + "_tp_masked");
    if (!masked) return err(n.describe(), ": tensor-parallel: cannot mask the embedding");
    redirect(n.outputs[0], masked->outputs[0], masked);
    Node* ar = insert_node(g_, kMicrosoft, "AllReduce", 1, {masked->outputs[0]}, {}, next_,
                           n.name + "_allreduce");
    if (!ar) return err(n.describe(), ": tensor-parallel: cannot insert its AllReduce");
    redirect(masked->outputs[0], ar->outputs[0], ar);
    ++report_.vocab_parallel;
    note("vocab-parallel embedding '", n.name, "': ", w->name, " ", w->type.shape.to_string(), " (",
         rows, " rows per rank) + AllReduce");
    return Status::ok();
  }

  // How many equal parts of the last dim a projection's result is split into downstream (through
  // views that keep the last dim): GPT-2's c_attn output goes to Split(3) as q, k, v.
  int sections_after(const Value* v, int cols) {
    for (int hops = 0; hops < 4; ++hops) {
      const Node* user = sole_user(v);
      if (!user) return 1;
      if (user->op_type == "Split" && user->domain.empty()) {
        int64_t axis = user->attr_int("axis", 0);
        int64_t r = static_cast<int64_t>(v->type.shape.rank());
        if (axis != -1 && axis != r - 1) return 1;
        int k = static_cast<int>(user->outputs.size());
        return k > 1 && cols % k == 0 && equal_split(*user, cols / k) ? k : 1;
      }
      if (user->op_type != "Reshape" || !v->type.shape.rank_known()) return 1;
      const Value* out = user->outputs[0];
      if (!out->type.shape.rank_known() || out->type.shape.rank() == 0 ||
          out->type.shape.dims().back() != v->type.shape.dims().back())
        return 1;
      v = out;
    }
    return 1;
  }

  static bool equal_split(const Node& split, int64_t part) {
    const Tensor* sizes = split.inputs.size() > 1 ? constant_of(split.input(1)) : nullptr;
    if (!sizes) return split.inputs.size() < 2 || !split.input(1);
    for (int64_t i = 0; i < sizes->numel(); ++i)
      if (sizes->data<int64_t>()[i] != part) return false;
    return true;
  }

  const Node* sole_user(const Value* v) {
    const Node* found = nullptr;
    for (const auto& n : g_.nodes())
      for (const Value* in : n->inputs)
        if (in == v) {
          if (found && found != n.get()) return nullptr;
          found = n.get();
        }
    return found;
  }

  // ---- propagation ----------------------------------------------------------------------------
  // Gives the node's outputs their split, rewriting what it must; false: the node cannot take
  // split inputs (the caller gathers them).
  Expected<bool> propagate(Node& n) {
    // CastLike reads only the dtype of its second input: with only that one split, the output
    // is as whole as the first (no gather; exported graphs cast scalars "like" activations).
    if (n.domain.empty() && n.op_type == "CastLike" && !split_.count(n.inputs[0])) return true;
    if (is_pointwise(n)) return pointwise(n);
    if (n.domain == "ferrite" && n.op_type == "Attention") return attention(n);
    if (!n.domain.empty()) return false;
    const std::string& op = n.op_type;
    const Split in = split_.at(first_split_input(n));
    if (op == "Transpose") {
      if (n.inputs[0] != first_split_input(n)) return false;
      auto perm = n.attr_ints("perm");
      for (size_t e = 0; e < perm.size(); ++e)
        if (perm[e] == in.dim) return set(n.outputs[0], {static_cast<int>(e), in.sections});
      return false;
    }
    if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze")
      return view(n, in);
    if (op == "Expand") return expand(n, in);
    if (op == "MatMul") return matmul(n);
    if (op == "Gemm") return gemm(n, in);
    if (op == "Softmax" || op == "LogSoftmax") {
      if (n.inputs[0] != first_split_input(n)) return false;
      return axis_of(n, n.attr_int("axis", -1)) != in.dim && set(n.outputs[0], in);
    }
    if (op == "LayerNormalization") {
      if (n.inputs[0] != first_split_input(n) || in.dim >= axis_of(n, n.attr_int("axis", -1)))
        return false;
      for (size_t i = 1; i < n.outputs.size(); ++i)
        if (n.outputs[i]) return false;
      return set(n.outputs[0], in);
    }
    if (op == "Split") return split_op(n, in);
    if (op == "Slice") return slice_op(n, in);
    if (op == "Concat") return concat(n, in);
    if (op == "Gather") return gather_op(n, in);
    if (op == "Shape") return shape_op(n, in);
    return false;
  }

  // The Shape of a split value is the whole value's shape (the local extent times N): every
  // unsplit value then holds what it holds in the whole model. A view target computed from it
  // is divided where the view follows the split (divide_target) and used as it is where the
  // view's input is gathered; a local shape would be wrong in the second case.
  Expected<bool> shape_op(Node& n, Split in) {
    Value* v = n.inputs[0];
    if (padded_.count(v) || !v->type.shape.rank_known()) return false;
    const int64_t rank = static_cast<int64_t>(v->type.shape.rank());
    auto clamp = [&](int64_t x) { return std::clamp(x < 0 ? x + rank : x, int64_t{0}, rank); };
    const int64_t start = clamp(n.attr_int("start", 0)), end = clamp(n.attr_int("end", rank));
    if (in.dim < start || in.dim >= end) return true;  // the split dim is not in the result
    std::vector<int64_t> times(static_cast<size_t>(end - start), 1);
    times[static_cast<size_t>(in.dim - start)] = size_;
    Value* local = n.outputs[0];
    Value* factor =
        constant(local->name + "_tp_whole", Tensor::from_vector<int64_t>(times, {end - start}));
    Node* m = insert_node(g_, "", "Mul", rewrite::onnx_opset_at_least(g_, 14), {local, factor}, {},
                          next_, n.name + "_tp_whole");
    if (!m) return err(n.describe(), ": tensor-parallel: cannot scale its shape");
    redirect(local, m->outputs[0], m);
    return true;
  }

  Value* first_split_input(const Node& n) const {
    for (Value* v : n.inputs)
      if (v && split_.count(v)) return v;
    return nullptr;
  }

  int axis_of(const Node& n, int64_t axis) const {
    int64_t r = static_cast<int64_t>(n.inputs[0]->type.shape.rank());
    return static_cast<int>(axis < 0 ? axis + r : axis);
  }

  bool set(Value* v, Split s) {
    split_[v] = s;
    return true;
  }

  // The split that the node's split inputs share, as a dim of its first output (inputs aligned
  // to it from the right, as broadcasting does); none when they disagree or the rank is unknown.
  std::optional<Split> common_split(const Node& n) const {
    const Value* out = n.outputs[0];
    if (!out || !out->type.shape.rank_known()) return std::nullopt;
    const int r = static_cast<int>(out->type.shape.rank());
    std::optional<Split> s;
    for (Value* v : n.inputs) {
      if (!v || !split_.count(v)) continue;
      Split in = split_.at(v);
      Split o{in.dim + r - static_cast<int>(v->type.shape.rank()), in.sections};
      if (o.dim < 0) return std::nullopt;  // the output has fewer dims than the split input
      if (s && (s->dim != o.dim || s->sections != o.sections)) return std::nullopt;
      s = o;
    }
    return s;
  }

  // Elementwise: split inputs agree on the output dim; constants are sliced, broadcast operands
  // stay, other whole operands are sliced by a Slice node.
  Expected<bool> pointwise(Node& n) {
    std::optional<Split> s = common_split(n);
    if (!s) return false;
    Value* out = n.outputs[0];
    const int r = static_cast<int>(out->type.shape.rank());
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      Value* v = n.inputs[i];
      if (!v || split_.count(v) || !v->type.shape.rank_known()) continue;
      const int j = s->dim - (r - static_cast<int>(v->type.shape.rank()));
      if (j < 0 || v->type.shape[static_cast<size_t>(j)].value() == 1) continue;  // broadcast
      const Dim& full = out->type.shape[static_cast<size_t>(s->dim)];
      if (v->type.shape[static_cast<size_t>(j)] != full) return false;
      if (const Tensor* t = constant_of(v)) {
        FERRITE_ASSIGN_OR_RETURN(n.inputs[i],
                                 sliced(v->name, *t, static_cast<size_t>(j), s->sections));
        continue;
      }
      if (s->sections != 1 || !divisible(full, size_)) return false;
      FERRITE_ASSIGN_OR_RETURN(n.inputs[i], local_slice(v, j, *full.value(), n));
    }
    for (Value* o : n.outputs)
      if (o) split_[o] = *s;
    return true;
  }

  Expected<bool> view(Node& n, Split in) {
    if (n.inputs[0] != first_split_input(n)) return false;
    auto e = view_dim(n.inputs[0]->type.shape, n.outputs[0]->type.shape, in.dim, in, size_);
    if (!e) return false;
    if (n.op_type == "Reshape") {
      FERRITE_ASSIGN_OR_RETURN(bool ok, divide_target(n, 1, *e, n.outputs[0]->type.shape));
      if (!ok) return false;
    }
    return set(n.outputs[0], {*e, in.sections});
  }

  Expected<bool> expand(Node& n, Split in) {
    if (n.inputs[0] != first_split_input(n) || in.sections != 1) return false;
    const int r = static_cast<int>(n.outputs[0]->type.shape.rank());
    const int e = in.dim + r - static_cast<int>(n.inputs[0]->type.shape.rank());
    FERRITE_ASSIGN_OR_RETURN(bool ok, divide_target(n, 1, e, n.outputs[0]->type.shape));
    return ok && set(n.outputs[0], {e, 1});
  }

  // Divides entry `e` of node input `i` (a Reshape/Expand target) by N when it is the full static
  // extent; -1 and 0 entries follow the input by themselves.
  Expected<bool> divide_target(Node& n, size_t i, int e, const Shape& full_out) {
    Value* t = n.input(i);
    if (!t) return false;
    std::optional<int64_t> entry;
    if (const Tensor* c = constant_of(t)) {
      if (c->dtype() != DType::kI64 || c->numel() <= e) return false;
      entry = c->data<int64_t>()[e];
    } else if (t->sym_value && static_cast<int>(t->sym_value->size()) > e) {
      entry = (*t->sym_value)[static_cast<size_t>(e)].value();
    }
    if (!entry) return false;
    if (*entry == -1 || *entry == 0) return true;
    if (Dim(*entry) != full_out[static_cast<size_t>(e)] || *entry % size_ != 0) return false;
    const int64_t len = t->type.shape.rank_known() && t->type.shape.rank() == 1
                            ? t->type.shape[0].value().value_or(-1)
                            : -1;
    if (len <= e) return false;
    std::vector<int64_t> div(static_cast<size_t>(len), 1);
    div[static_cast<size_t>(e)] = size_;
    if (const Tensor* c = constant_of(t)) {
      Tensor nt = c->clone();
      nt.data<int64_t>()[e] /= size_;
      n.inputs[i] = constant(t->name, std::move(nt));
      return true;
    }
    Value* d = constant(t->name + "_tp_div", Tensor::from_vector<int64_t>(div, {len}));
    Node* q = insert_node(g_, "", "Div", rewrite::onnx_opset_at_least(g_, 14), {t, d}, {}, &n,
                          t->name + "_tp");
    if (!q) return err(n.describe(), ": tensor-parallel: cannot divide its shape target");
    n.inputs[i] = q->outputs[0];
    return true;
  }

  Expected<bool> matmul(Node& n) {
    Value* a = n.input(0);
    Value* b = n.input(1);
    const int r = static_cast<int>(n.outputs[0]->type.shape.rank());
    const int ra = static_cast<int>(a->type.shape.rank());
    const int rb = static_cast<int>(b->type.shape.rank());
    const bool sa = split_.count(a) != 0, sb = split_.count(b) != 0;
    if (sa && !sb) {
      Split s = split_.at(a);
      if (s.dim == ra - 1) {  // contraction over the split: row-parallel with a constant weight
        if (auto it = origin_.find(a); it != origin_.end()) contracted_seeds_.insert(it->second);
        const Tensor* wt = constant_of(b);
        if (!wt || wt->rank() != 2 || s.sections != 1) return false;
        FERRITE_ASSIGN_OR_RETURN(n.inputs[1], sliced(b->name, *wt, 0, 1));
        FERRITE_RETURN_IF_ERROR(all_reduce_after(n, b->name));
        return true;
      }
      if (s.dim < ra - 2 || ra == 1) {  // a batch dim: b must broadcast there
        const int j = s.dim + r - ra - (r - rb);
        if (j >= 0 && j < rb - 2 && b->type.shape[static_cast<size_t>(j)].value() != 1)
          return false;
      }
      return set(n.outputs[0], {s.dim + r - ra, s.sections});
    }
    if (sa && sb) {  // per head: both split on the same batch dim
      Split x = split_.at(a), y = split_.at(b);
      const int da = x.dim + r - ra, db = y.dim + r - rb;
      if (da != db || da >= r - 2 || x.sections != y.sections) return false;
      return set(n.outputs[0], {da, x.sections});
    }
    // b split, a whole: a batch dim of b where a broadcasts, or b's columns.
    Split y = split_.at(b);
    const int db = y.dim + r - rb;
    if (db == r - 1) return set(n.outputs[0], {r - 1, y.sections});
    if (db >= r - 2) return false;
    const int j = db - (r - ra);
    if (j >= 0 && a->type.shape[static_cast<size_t>(j)].value() != 1) return false;
    return set(n.outputs[0], {db, y.sections});
  }

  // ferrite.Attention (the FX importer's SDPA, fuse-attention's result) is per batch item: a head
  // split that Q, K and V share carries to the output. A whole operand broadcasts there or has
  // every head (a mask expanded per head, as PyTorch's cuda SDPA takes it): sliced per rank.
  Expected<bool> attention(Node& n) {
    std::optional<Split> s = common_split(n);
    Value* out = n.outputs[0];
    if (!s || s->dim >= static_cast<int>(out->type.shape.rank()) - 2) return false;
    const int r = static_cast<int>(out->type.shape.rank());
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      Value* v = n.inputs[i];
      if (!v || split_.count(v)) continue;
      if (!v->type.shape.rank_known()) return false;
      const int j = s->dim - (r - static_cast<int>(v->type.shape.rank()));
      if (j < 0) continue;
      const Dim& d = v->type.shape[static_cast<size_t>(j)];
      if (d.value() == 1) continue;
      if (s->sections != 1 || d != out->type.shape[static_cast<size_t>(s->dim)] ||
          !divisible(d, size_))
        return false;
      FERRITE_ASSIGN_OR_RETURN(n.inputs[i], local_slice(v, j, *d.value(), n));
    }
    return set(out, *s);
  }

  Expected<bool> gemm(Node& n, Split in) {
    if (n.inputs[0] != first_split_input(n) || n.attr_int("transA", 0) != 0 || in.dim != 1 ||
        in.sections != 1)
      return false;
    const Tensor* wt = constant_of(n.input(1));
    if (!wt || wt->rank() != 2) return false;
    const bool tb = n.attr_int("transB", 0) != 0;
    Value* b = n.inputs[1];
    FERRITE_ASSIGN_OR_RETURN(n.inputs[1], sliced(b->name, *wt, tb ? 1 : 0, 1));
    Value* c = n.input(2);
    if (c) {  // the bias joins after the sum, once
      const Tensor* ct = constant_of(c);
      if (!ct) return err(n.describe(), ": tensor-parallel: a Gemm bias that is not a constant");
      const float beta = n.attr_float("beta", 1.0f);
      Tensor scaled = ct->clone();
      if (beta != 1.0f) {
        if (scaled.dtype() != DType::kF32) return false;
        for (int64_t k = 0; k < scaled.numel(); ++k) scaled.data<float>()[k] *= beta;
      }
      n.inputs.resize(2);
      FERRITE_RETURN_IF_ERROR(all_reduce_after(n, b->name));
      Value* summed = n.outputs[0];
      Value* bias = constant(c->name + "_tp", std::move(scaled));
      Node* add = insert_node(g_, "", "Add", rewrite::onnx_opset_at_least(g_, 14),
                              {reduced_[summed], bias}, {}, next_, n.name + "_bias");
      if (!add) return err(n.describe(), ": tensor-parallel: cannot add the bias after the sum");
      redirect(reduced_[summed], add->outputs[0], add);
      return true;
    }
    FERRITE_RETURN_IF_ERROR(all_reduce_after(n, b->name));
    return true;
  }

  // Every use of `from` (but by `except`) reads `to` instead; a graph output keeps its name.
  void redirect(Value* from, Value* to, const Node* except) {
    for (auto& m : g_.nodes()) {
      if (m.get() == except) continue;
      for (Value*& in : m->inputs)
        if (in == from) in = to;
    }
    for (Value*& o : g_.outputs())
      if (o == from) {
        std::string name = from->name;
        g_.rename_value(from, g_.unique_name(name + "_tp_partial"));
        g_.rename_value(to, name);
        o = to;
      }
  }

  // n's output is this rank's partial sum: an AllReduce after n makes it whole for every user.
  Status all_reduce_after(Node& n, const std::string& weight) {
    Value* partial = n.outputs[0];
    Node* ar =
        insert_node(g_, kMicrosoft, "AllReduce", 1, {partial}, {}, next_, n.name + "_allreduce");
    if (!ar) return err(n.describe(), ": tensor-parallel: cannot insert its AllReduce");
    redirect(partial, ar->outputs[0], ar);
    reduced_[partial] = ar->outputs[0];
    ++report_.row_parallel;
    note("row-parallel ", n.op_type, " '", n.name, "': ", weight, " + AllReduce");
    return Status::ok();
  }

  Expected<bool> split_op(Node& n, Split in) {
    if (n.inputs[0] != first_split_input(n)) return false;
    if (axis_of(n, n.attr_int("axis", 0)) != in.dim) {
      for (Value* o : n.outputs)
        if (o) split_[o] = in;
      return true;
    }
    const int k = static_cast<int>(n.outputs.size());
    if (in.sections != k) return false;
    if (n.inputs.size() > 1 && n.input(1)) {
      const Tensor* sizes = constant_of(n.input(1));
      if (!sizes) return false;
      Tensor ns = sizes->clone();
      for (int64_t i = 0; i < ns.numel(); ++i) ns.data<int64_t>()[i] /= size_;
      n.inputs[1] = constant(n.input(1)->name, std::move(ns));
    } else if (n.has_attr("split")) {
      auto sizes = n.attr_ints("split");
      for (auto& s : sizes) s /= size_;
      n.attrs["split"] = Attribute(sizes);
    }
    for (Value* o : n.outputs)
      if (o) split_[o] = {in.dim, 1};
    return true;
  }

  Expected<bool> slice_op(Node& n, Split in) {
    if (n.inputs[0] != first_split_input(n) || n.inputs.size() < 4) return false;
    const Tensor* axes = constant_of(n.input(3));
    if (!axes) return false;
    for (int64_t i = 0; i < axes->numel(); ++i) {
      int64_t a =
          axes->dtype() == DType::kI64 ? axes->data<int64_t>()[i] : axes->data<int32_t>()[i];
      if (axis_of(n, a) == in.dim) return false;
    }
    return set(n.outputs[0], in);
  }

  Expected<bool> concat(Node& n, Split in) {
    if (axis_of(n, n.attr_int("axis", 0)) == in.dim) return false;
    return pointwise_like_concat(n, in);
  }

  // Concat's operands must all be split the same way; whole ones are sliced.
  Expected<bool> pointwise_like_concat(Node& n, Split in) {
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      Value* v = n.inputs[i];
      if (!v) continue;
      if (split_.count(v)) {
        Split s = split_.at(v);
        if (s.dim != in.dim || s.sections != in.sections) return false;
        continue;
      }
      const Dim& full = v->type.shape[static_cast<size_t>(in.dim)];
      if (const Tensor* t = constant_of(v)) {
        FERRITE_ASSIGN_OR_RETURN(n.inputs[i],
                                 sliced(v->name, *t, static_cast<size_t>(in.dim), in.sections));
        continue;
      }
      if (in.sections != 1 || !divisible(full, size_)) return false;
      FERRITE_ASSIGN_OR_RETURN(n.inputs[i], local_slice(v, in.dim, *full.value(), n));
    }
    return set(n.outputs[0], in);
  }

  Expected<bool> gather_op(Node& n, Split in) {
    if (n.inputs[0] != first_split_input(n) || split_.count(n.input(1))) return false;
    const int axis = axis_of(n, n.attr_int("axis", 0));
    if (axis == in.dim) return false;
    const int idx_rank = static_cast<int>(n.input(1)->type.shape.rank());
    return set(n.outputs[0], {in.dim < axis ? in.dim : in.dim + idx_rank - 1, in.sections});
  }

  // ---- whole again ----------------------------------------------------------------------------
  Expected<Value*> gathered(Value* v, const Node& before) {
    if (auto it = gathered_.find(v); it != gathered_.end()) return it->second;
    Split s = split_.at(v);
    if (s.sections != 1)
      return err("tensor-parallel: '", v->name, "' (split in ", s.sections,
                 " sections) is needed whole by ", before.describe(),
                 ", which an AllGather cannot reorder");
    Node* ag = insert_node(
        g_, kMicrosoft, "AllGather", 1, {v},
        {{"group_size", Attribute(int64_t{size_})}, {"axis", Attribute(int64_t{s.dim})}}, &before,
        v->name + "_allgather");
    if (!ag) return err(before.describe(), ": tensor-parallel: cannot gather '", v->name, "'");
    ++report_.all_gathers;
    note("AllGather '", v->name, "' along dim ", s.dim, " for ", before.describe());
    gathered_[v] = ag->outputs[0];
    return ag->outputs[0];
  }

  Status gather_outputs() {
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      Value* v = g_.outputs()[i];
      if (!split_.count(v)) continue;
      Split s = split_.at(v);
      if (s.sections != 1) return err("tensor-parallel: output '", v->name, "' stays split");
      Node* ag = insert_node(
          g_, kMicrosoft, "AllGather", 1, {v},
          {{"group_size", Attribute(int64_t{size_})}, {"axis", Attribute(int64_t{s.dim})}}, nullptr,
          v->name + "_allgather");
      if (!ag) return err("tensor-parallel: cannot gather output '", v->name, "'");
      Value* whole = ag->outputs[0];
      if (auto p = padded_.find(v); p != padded_.end()) {  // cut the padding columns back off
        auto vec = [&](int64_t x) {
          return constant("tp_pad", Tensor::from_vector<int64_t>({x}, {1}));
        };
        Node* cut = insert_node(g_, "", "Slice", rewrite::onnx_opset_at_least(g_, 13),
                                {whole, vec(0), vec(p->second), vec(s.dim)}, {}, nullptr,
                                v->name + "_tp_unpad");
        if (!cut) return err("tensor-parallel: cannot unpad output '", v->name, "'");
        whole = cut->outputs[0];
      }
      std::string name = v->name;
      g_.rename_value(v, g_.unique_name(name + "_tp_local"));
      g_.rename_value(whole, name);
      g_.outputs()[i] = whole;
      ++report_.all_gathers;
      note("AllGather output '", name, "' along dim ", s.dim);
    }
    return Status::ok();
  }

  // This rank's chunk of a whole value along dim j (static extent `len`), for a node that
  // combines it with split ones.
  Expected<Value*> local_slice(Value* v, int j, int64_t len, const Node& before) {
    const int64_t chunk = len / size_;
    auto vec = [&](int64_t x) {
      return constant(v->name + "_tp", Tensor::from_vector<int64_t>({x}, {1}));
    };
    Node* s = insert_node(g_, "", "Slice", rewrite::onnx_opset_at_least(g_, 13),
                          {v, vec(rank_ * chunk), vec((rank_ + 1) * chunk), vec(j)}, {}, &before,
                          v->name + "_tp_slice");
    if (!s) return err(before.describe(), ": tensor-parallel: cannot slice '", v->name, "'");
    return s->outputs[0];
  }

  // ---- bookkeeping ----------------------------------------------------------------------------
  Value* constant(const std::string& name, Tensor t) {
    return g_.add_initializer(name + "_tp" + std::to_string(rank_), std::move(t));
  }
  // This rank's part of constant `t` (slice_chunk) as a new constant.
  Expected<Value*> sliced(const std::string& name, const Tensor& t, size_t axis, int sections) {
    FERRITE_ASSIGN_OR_RETURN(Tensor part, slice_chunk(t, axis, rank_, size_, sections));
    return constant(name, std::move(part));
  }

  // Re-infers every node (the split values get their local shapes) and checks each split value
  // came out as 1/N of its whole shape along its split dim.
  Status reinfer_and_check() {
    // Only values something still uses survive compact(); the others are not looked at again.
    std::unordered_set<const Value*> live(g_.outputs().begin(), g_.outputs().end());
    for (const auto& n : g_.nodes()) {
      live.insert(n->inputs.begin(), n->inputs.end());
      live.insert(n->outputs.begin(), n->outputs.end());
    }
    std::vector<std::pair<Value*, Shape>> check;
    for (const auto& [v, s] : split_)
      if (live.count(v)) {
        Shape want = v->type.shape;
        Dim& d = want.dims()[static_cast<size_t>(s.dim)];
        auto p = padded_.find(v);
        d = p == padded_.end() ? d.floordiv(Dim(size_)) : Dim((p->second + size_ - 1) / size_);
        check.emplace_back(const_cast<Value*>(v), std::move(want));
      }
    g_.compact();
    for (const auto& n : g_.nodes())
      FERRITE_RETURN_IF_ERROR(infer_node(*n).with_context("tensor-parallel"));
    for (const auto& [v, want] : check) {
      if (v->type.shape != want)
        return err("tensor-parallel: '", v->name, "' should be ", want.to_string(),
                   " on each rank but infers to ", v->type.shape.to_string(),
                   " (a view whose target this pass does not understand)");
    }
    return Status::ok();
  }

  template <class... Args>
  void note(const Args&... args) {
    report_.lines.push_back(str_cat(args...));
  }

  Graph& g_;
  const int rank_, size_;
  Node* next_ = nullptr;  // the node after the one being visited (where new nodes go)
  std::unordered_map<const Value*, Split> split_;
  std::unordered_map<const Value*, Value*> gathered_;
  std::unordered_map<const Value*, Value*> reduced_;  // partial sum -> its AllReduce
  std::unordered_map<const Value*, int64_t> padded_;  // split outputs padded: their true extent
  const std::unordered_set<std::string>& whole_;
  std::unordered_map<const Value*, std::string> origin_;  // split value -> its seed node
  std::unordered_set<std::string> gathered_seeds_, contracted_seeds_;
  ShardReport report_;
};

// The pass-table face of the rewrite: `shard-tensor-parallel{rank=R size=N}` in a pipeline
// (golden tests, `ferrite info --passes ... --after all` to see one rank's graph).
class ShardTensorParallel : public Pass {
 public:
  ShardTensorParallel(int rank, int size) : rank_(rank), size_(size) {}
  std::string name() const override { return "shard-tensor-parallel"; }
  Expected<bool> run(Graph& g) override {
    if (size_ < 1) return err("shard-tensor-parallel needs its options: {rank=R size=N}");
    FERRITE_ASSIGN_OR_RETURN(ShardReport r, shard_tensor_parallel(g, rank_, size_));
    return r.column_parallel + r.row_parallel + r.vocab_parallel + r.all_gathers > 0;
  }

 private:
  int rank_, size_;
};

}  // namespace

FERRITE_REGISTER_PASSES(shard_tensor_parallel) {
  r.add({"shard-tensor-parallel",
         "{rank=R size=N}: rank R's part of an N-way tensor-parallel split (--tensor-parallel)",
         [] { return std::make_unique<ShardTensorParallel>(0, 0); },
         {},
         [](const PassOptions& o) -> Expected<std::unique_ptr<Pass>> {
           FERRITE_ASSIGN_OR_RETURN(auto rs, shard::rank_and_size(o));
           return std::unique_ptr<Pass>(std::make_unique<ShardTensorParallel>(rs.first, rs.second));
         }});
}

Expected<ShardReport> shard_tensor_parallel(Graph& g, int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size)
    return err("tensor-parallel: rank ", rank, " of ", size, " is not a rank of the group");
  if (size == 1) return ShardReport{};
  // A second attempt, from the graph as it was, keeps whole what the first found wasted; its
  // own choices change nothing the first attempt split usefully, so two attempts settle it
  // (a third is allowed for chains of such decisions).
  std::unique_ptr<Graph> before = g.clone();  // constants shared, not copied
  std::unordered_set<std::string> whole;
  for (int attempt = 0;; ++attempt) {
    Sharder sharder(g, rank, size, whole);
    FERRITE_ASSIGN_OR_RETURN(ShardReport report, sharder.run());
    std::vector<std::string> wasted = sharder.wasted_seeds();
    if (wasted.empty() || attempt == 2) return report;
    whole.insert(wasted.begin(), wasted.end());
    g = std::move(*before->clone());
  }
}

}  // namespace ferrite
