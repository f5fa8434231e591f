#include "lower/row_ops.h"

#include <algorithm>

namespace ferrite::lower_impl {

namespace {

// bf16 / f16 rows compute in float (compute_dtype): the loads convert, the store rounds.
bool float_dtype(DType t) {
  return t == DType::kF32 || t == DType::kF64 || is_low_float(t);
}

SymExpr product(const std::vector<Dim>& dims, size_t begin, size_t end) {
  SymExpr p(1);
  for (size_t i = begin; i < end; ++i) p = p * dims[i].expr();
  return p;
}

Lowered pending(const Lowered& x, std::vector<Dim> dims, RowPlan plan, EmitFn emit) {
  Lowered r;
  r.dtype = x.dtype;
  r.dims_known = true;
  r.dims = std::move(dims);
  r.emit = std::move(emit);
  r.cost = x.cost + 8;
  r.nodes = x.nodes;
  r.row = std::make_shared<const RowPlan>(std::move(plan));
  return r;
}

// Softmax / LogSoftmax over the last axis: max, sum of exp(x - max), then the store. exp and
// the sum run in the compute type (f32 for f32 / bf16 / f16: the terms are in [0, 1], and f64
// arithmetic and conversions made the row kernels compute-bound on GPUs).
std::optional<Lowered> softmax(const Node& n, const Lowered& x) {
  int64_t rank = static_cast<int64_t>(x.dims.size());
  int64_t axis = n.attr_int("axis", -1);
  if (rank == 0 || (axis != -1 && axis != rank - 1)) return std::nullopt;  // other axes: library
  bool log = n.op_type == "LogSoftmax";
  RowPlan plan{x.dims, 1, false, loop_vars(x.dims.size())};
  return pending(x, x.dims, std::move(plan),
                 [x, log](EmitContext& ctx, const std::vector<SymExpr>& idx) {
                   KernelBody& b = ctx.body;
                   DType t = compute_dtype(x.dtype);
                   int v = emit_value(x, ctx, idx);
                   int shifted = b.binary("sub", v, b.reduce("max", v), t);
                   int e = b.unary("exp", shifted, t);
                   int sum = b.reduce("sum", e);
                   if (log) return b.binary("sub", shifted, b.unary("log", sum, t), t);
                   return b.binary("div", e, sum, t);
                 });
}

// Index map of LayerNormalization's Scale / B onto the iteration: right-aligned against the
// normalized dims (iteration dims [first, first + norm.size())), size-1 dims broadcast.
std::optional<std::vector<int>> param_map(const Lowered& p, const std::vector<Dim>& norm,
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

struct Param {
  Lowered l;
  std::vector<int> map;
  int emit(EmitContext& ctx, const std::vector<SymExpr>& idx) const {
    std::vector<SymExpr> sub;
    for (int m : map) sub.push_back(m < 0 ? SymExpr(0) : idx[m]);
    return emit_value(l, ctx, sub);
  }
};

// LayerNormalization over dims [axis, rank): mean, then variance of the centred values (two
// passes, so no cancellation), then (x - mean) * rstd * scale + bias; in the compute type, as
// PyTorch and ONNX Runtime do (f32 for 16-bit storage). The reference computes in double; the
// two-pass f32 result is within a few ulps of it.
std::optional<Lowered> layernorm(const Node& n, const std::vector<const Lowered*>& in,
                                 const Lowered& x) {
  int64_t rank = static_cast<int64_t>(x.dims.size());
  int64_t axis = n.attr_int("axis", -1);
  if (rank == 0 || axis < -rank || axis >= rank || in.size() < 2 || !in[1]) return std::nullopt;
  if (axis < 0) axis += rank;
  int64_t stash = n.attr_int("stash_type", 1);
  if (stash != 1 && stash != 10 && stash != 11 && stash != 16) return std::nullopt;  // lib errs
  std::vector<Dim> norm(x.dims.begin() + axis, x.dims.end());
  std::vector<Param> params;
  for (size_t i = 1; i < 3 && i < in.size(); ++i) {
    if (!in[i]) continue;
    if (in[i]->dtype != x.dtype) return std::nullopt;
    auto map = param_map(*in[i], norm, static_cast<size_t>(axis));
    if (!map) return std::nullopt;
    params.push_back({*in[i], *map});
  }
  double eps = n.attr_float("epsilon", 1e-5f);
  SymExpr count = product(x.dims, axis, x.dims.size());
  RowPlan plan{x.dims, norm.size(), false, loop_vars(x.dims.size())};
  return pending(x, x.dims, std::move(plan),
                 [x, params, eps, count](EmitContext& ctx, const std::vector<SymExpr>& idx) {
                   KernelBody& b = ctx.body;
                   const DType d = compute_dtype(x.dtype);
                   int v = emit_value(x, ctx, idx);
                   int cnt = b.symbol(d, count);
                   int mean = b.binary("div", b.reduce("sum", v), cnt, d);
                   int centered = b.binary("sub", v, mean, d);
                   int var = b.binary(
                       "div", b.reduce("sum", b.binary("mul", centered, centered, d)), cnt, d);
                   // One call per statement: the calls number the expressions (and so spell the
                   // generated source and its cache key), which must not follow the compiler's
                   // argument order.
                   int root = b.unary("sqrt", b.binary("add", var, b.constant(d, eps), d), d);
                   int one = b.constant(d, 1.0);
                   int rstd = b.binary("div", one, root, d);
                   int y = b.binary("mul", centered, rstd, d);
                   y = b.binary("mul", y, b.cast(params[0].emit(ctx, idx), d), d);
                   if (params.size() > 1)
                     y = b.binary("add", y, b.cast(params[1].emit(ctx, idx), d), d);
                   return y;
                 });
}

// Which dims of a rank-`rank` input a Reduce* / GlobalAveragePool node reduces; nullopt when
// they are not known statically or are invalid (the library step reports the error).
std::optional<std::vector<bool>> reduced_dims(const Node& n, int64_t rank) {
  std::vector<bool> reduced(rank, false);
  if (n.op_type == "GlobalAveragePool") {
    if (rank < 3) return std::nullopt;
    for (int64_t i = 2; i < rank; ++i) reduced[i] = true;
    return reduced;
  }
  std::vector<int64_t> axes;
  if (n.op_type == "ReduceSum" || n.opset >= 18) {
    if (const Value* a = n.input(1)) {
      if (!a->constant || a->is_graph_input) return std::nullopt;
      axes = a->constant->to_int_vector();
    }
  } else {
    axes = n.attr_ints("axes");
  }
  if (axes.empty()) {
    if (n.attr_int("noop_with_empty_axes", 0) != 0) return std::nullopt;
    reduced.assign(rank, true);
  }
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    if (a < 0) a += rank;
    if (reduced[a]) return std::nullopt;
    reduced[a] = true;
  }
  return reduced;
}

// The accumulator of sums (Reduce*, the generated MatMul): f64 for f32 and f64 data, as the
// reference computes; f32 for bf16 / f16 data, as PyTorch accumulates them (the sum's error is
// far below the 16-bit result's rounding, and f64 arithmetic, conversions and shuffles cost a
// GPU row kernel more than the loads: RMSNorm's mean of squares).
DType accumulator(DType t) {
  return is_low_float(t) ? DType::kF32 : DType::kF64;
}

// Reduce* over any axes and GlobalAveragePool: the iteration space is the kept dims followed by
// the reduced ones, and the result is stored once per row.
std::optional<Lowered> reduce(const Node& n, const Lowered& x, const std::vector<Dim>& out_dims) {
  const std::string& op = n.op_type;
  int64_t rank = static_cast<int64_t>(x.dims.size());
  auto reduced = reduced_dims(n, rank);
  if (!reduced) return std::nullopt;
  // pos[i]: iteration position of input dim i.
  std::vector<int> pos(rank);
  std::vector<Dim> iter;
  for (bool second : {false, true})
    for (int64_t i = 0; i < rank; ++i)
      if ((*reduced)[i] == second) {
        pos[i] = static_cast<int>(iter.size());
        iter.push_back(x.dims[i]);
      }
  size_t outer = static_cast<size_t>(std::count(reduced->begin(), reduced->end(), false));
  if (outer == iter.size()) return std::nullopt;  // nothing reduced (rank 0)
  bool keep = op == "GlobalAveragePool" || n.attr_int("keepdims", 1) != 0;
  if (out_dims.size() != (keep ? iter.size() : outer)) return std::nullopt;
  SymExpr count = product(iter, outer, iter.size());
  // The input as the iteration reads it. A realized input is re-strided instead, and reduced
  // dims that are contiguous in it merge into one (a single, vectorisable inner loop).
  Lowered src;
  if (x.realized()) {
    src = x;
    src.dims = iter;
    for (int64_t i = 0; i < rank; ++i) src.strides[pos[i]] = x.strides[i];
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
    src.dtype = x.dtype;
    src.dims = iter;
    src.emit = [x, pos](EmitContext& ctx, const std::vector<SymExpr>& it) {
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
    if (!(*reduced)[i])
      plan.out_idx.push_back(vars[k++]);
    else if (keep)
      plan.out_idx.push_back(SymExpr(0));
  }
  return pending(x, out_dims, std::move(plan),
                 [src, vars, op, count](EmitContext& ctx, const std::vector<SymExpr>&) {
                   KernelBody& b = ctx.body;
                   const DType t = compute_dtype(src.dtype), d = accumulator(src.dtype);
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
                     // The reference pools an empty plane to 0 (a mean of nothing is NaN
                     // otherwise).
                     if (op == "GlobalAveragePool" && !count.is_constant()) {
                       int zero = b.constant(d, 0);
                       acc = b.select(b.binary("eq", cnt, zero, DType::kBool), zero, acc);
                     } else if (op == "GlobalAveragePool" && count == SymExpr(0)) {
                       acc = b.constant(d, 0);
                     }
                   }
                   return b.cast(acc, t);
                 });
}

}  // namespace

std::optional<Lowered> lower_matmul(const Node& n, const std::vector<const Lowered*>& in,
                                    const std::vector<Dim>& out_dims) {
  const std::string& op = n.op_type;
  if (!n.domain.empty() || (op != "MatMul" && op != "Gemm") || in.size() < 2 || !in[0] || !in[1])
    return std::nullopt;
  const Lowered& a = *in[0];
  const Lowered& b = *in[1];
  if (!a.dims_known || !b.dims_known || !float_dtype(a.dtype) || b.dtype != a.dtype)
    return std::nullopt;
  const size_t ra = a.dims.size(), rb = b.dims.size();
  if (ra < 2 || rb < 2) return std::nullopt;  // 1-D operands: library
  bool gemm = op == "Gemm";
  bool ta = gemm && n.attr_int("transA", 0) != 0, tb = gemm && n.attr_int("transB", 0) != 0;
  if (gemm && (ra != 2 || rb != 2)) return std::nullopt;
  // Batch dims: equal in both (after right-alignment), or missing / 1 in one of them.
  const size_t batch = std::max(ra, rb) - 2;
  std::vector<Dim> iter;
  for (size_t i = 0; i < batch; ++i) {
    auto dim_of = [&](const Lowered& x) -> std::optional<Dim> {
      size_t r = x.dims.size() - 2;
      if (i + r < batch) return std::nullopt;  // missing: broadcast
      return x.dims[i + r - batch];
    };
    auto da = dim_of(a), db = dim_of(b);
    if (da && db && *da != *db) return std::nullopt;  // size-1 broadcasting: library
    iter.push_back(da ? *da : *db);
  }
  Dim m = ta ? a.dims[ra - 1] : a.dims[ra - 2];
  Dim k = ta ? a.dims[ra - 2] : a.dims[ra - 1];
  Dim kb = tb ? b.dims[rb - 1] : b.dims[rb - 2];
  Dim nn = tb ? b.dims[rb - 2] : b.dims[rb - 1];
  if (k != kb) return std::nullopt;
  iter.push_back(m);
  iter.push_back(nn);
  std::vector<Dim> out = iter;
  iter.push_back(k);
  if (out != out_dims) return std::nullopt;
  const Lowered* c = gemm && in.size() > 2 ? in[2] : nullptr;
  if (c && (!c->dims_known || c->dtype != a.dtype || c->dims.size() > 2)) return std::nullopt;
  float alpha = gemm ? n.attr_float("alpha", 1.0f) : 1.0f;
  float beta = gemm ? n.attr_float("beta", 1.0f) : 1.0f;
  std::vector<SymExpr> vars = loop_vars(iter.size());
  const SymExpr xi = vars[batch], xj = vars[batch + 1], xk = vars[batch + 2];
  std::vector<SymExpr> ia, ib;
  for (size_t i = batch - (ra - 2); i < batch; ++i) ia.push_back(vars[i]);
  for (size_t i = batch - (rb - 2); i < batch; ++i) ib.push_back(vars[i]);
  ia.push_back(ta ? xk : xi);
  ia.push_back(ta ? xi : xk);
  ib.push_back(tb ? xj : xk);
  ib.push_back(tb ? xk : xj);
  // C broadcasts onto [M, N] (right-aligned, size-1 dims fixed at 0).
  std::vector<SymExpr> ic;
  if (c) {
    size_t off = 2 - c->dims.size();
    for (size_t d = 0; d < c->dims.size(); ++d) {
      const Dim& want = d + off == 0 ? m : nn;
      if (c->dims[d].value() == 1 && want.value() != 1)
        ic.push_back(SymExpr(0));
      else if (c->dims[d] == want)
        ic.push_back(d + off == 0 ? xi : xj);
      else
        return std::nullopt;
    }
  }
  RowPlan plan;
  plan.iter = iter;
  plan.reduce_rank = 1;
  plan.per_row = true;
  for (size_t i = 0; i + 1 < vars.size(); ++i) plan.out_idx.push_back(vars[i]);
  Lowered lead = a;
  lead.cost = a.cost + b.cost + (c ? c->cost : 0);
  lead.nodes = a.nodes;
  for (const auto& x : b.nodes) lead.nodes.push_back(x);
  if (c)
    for (const auto& x : c->nodes) lead.nodes.push_back(x);
  Lowered A = a, B = b;
  std::optional<Lowered> C;
  if (c) C = *c;
  Lowered r =
      pending(lead, out, std::move(plan),
              [A, B, C, ia, ib, ic, alpha, beta](EmitContext& ctx, const std::vector<SymExpr>&) {
                KernelBody& bd = ctx.body;
                const DType t = compute_dtype(A.dtype), d = accumulator(A.dtype);
                // One operand per statement, B first: the emission order numbers the
                // expressions, so it must not be left to the compiler (see layernorm).
                int bv = bd.cast(emit_value(B, ctx, ib), d);
                int av = bd.cast(emit_value(A, ctx, ia), d);
                int prod = bd.binary("mul", av, bv, d);
                int acc = bd.reduce("sum", prod);
                if (alpha != 1.0f) acc = bd.binary("mul", acc, bd.constant(d, alpha), d);
                int v = bd.cast(acc, t);
                if (C) {
                  int cv = emit_value(*C, ctx, ic);
                  if (beta != 1.0f) cv = bd.binary("mul", cv, bd.constant(t, beta), t);
                  v = bd.binary("add", v, cv, t);
                }
                return v;
              });
  r.nodes.push_back(n.name);
  return r;
}

std::optional<Lowered> lower_row_op(const Node& n, const std::vector<const Lowered*>& in,
                                    const std::vector<Dim>& out_dims) {
  static const char* kReduceOps[] = {"ReduceSum",       "ReduceMean",       "ReduceMax",
                                     "ReduceMin",       "ReduceL1",         "ReduceL2",
                                     "ReduceSumSquare", "GlobalAveragePool"};
  const std::string& op = n.op_type;
  if (!n.domain.empty() || in.empty() || !in[0]) return std::nullopt;
  const Lowered& x = *in[0];
  if (!x.dims_known || !float_dtype(x.dtype)) return std::nullopt;
  std::optional<Lowered> r;
  if (op == "Softmax" || op == "LogSoftmax") {
    r = softmax(n, x);
  } else if (op == "LayerNormalization") {
    r = layernorm(n, in, x);
  } else if (std::find_if(std::begin(kReduceOps), std::end(kReduceOps),
                          [&](const char* s) { return op == s; }) != std::end(kReduceOps)) {
    r = reduce(n, x, out_dims);
  }
  if (r && r->dims != out_dims)
    return std::nullopt;  // inference disagrees: leave it to the library
  if (r) r->nodes.push_back(n.name);
  return r;
}

}  // namespace ferrite::lower_impl
