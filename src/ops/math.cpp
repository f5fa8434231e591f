// Matrix products: MatMul (NumPy semantics, batched with broadcasting), Gemm, Einsum,
// QLinearMatMul and MatMulInteger.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "ops/elementwise_util.h"
#include "ops/gemm.h"
#include "ops/helpers.h"
#include "ops/numeric_cast.h"

namespace ferrite {

namespace {

// Runs f.template operator()<T, Acc>() for the dtypes that have a reference GEMM.
template <class F>
bool visit_gemm_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kF32: f.template operator()<float, float>(); return true;
    case DType::kF64: f.template operator()<double, double>(); return true;
    case DType::kF16: f.template operator()<Half, float>(); return true;
    case DType::kBF16: f.template operator()<BFloat16, float>(); return true;
    case DType::kI32: f.template operator()<int32_t, int64_t>(); return true;
    case DType::kI64: f.template operator()<int64_t, int64_t>(); return true;
    case DType::kU32: f.template operator()<uint32_t, uint64_t>(); return true;
    case DType::kU64: f.template operator()<uint64_t, uint64_t>(); return true;
    default: return false;
  }
}
constexpr DTypeSet kGemmTypes{DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
                              DType::kI32,  DType::kI64, DType::kU32, DType::kU64};

Status infer_matmul(InferContext& ctx) {
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  if (!a.rank_known() || !b.rank_known()) {
    ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
    return Status::ok();
  }
  if (a.rank() == 0 || b.rank() == 0) return ctx.error("MatMul inputs must have rank >= 1");
  std::vector<Dim> ad = a.dims(), bd = b.dims();
  bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) ad.insert(ad.begin(), Dim(1));
  if (b_vec) bd.push_back(Dim(1));
  const Dim& ka = ad.back();
  const Dim& kb = bd[bd.size() - 2];
  if (ka.is_static() && kb.is_static() && ka != kb)
    return ctx.error("inner dimensions differ: ", a.to_string(), " x ", b.to_string());
  std::string e;
  auto batch = broadcast_shapes(Shape(std::vector<Dim>(ad.begin(), ad.end() - 2)),
                                Shape(std::vector<Dim>(bd.begin(), bd.end() - 2)), &e);
  if (!batch) return ctx.error(e);
  std::vector<Dim> out = batch->dims();
  if (!a_vec) out.push_back(ad[ad.size() - 2]);
  if (!b_vec) out.push_back(bd.back());
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
  return Status::ok();
}

Status matmul_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.rank() == 0 || b.rank() == 0) return ctx.error("MatMul inputs must have rank >= 1");
  std::vector<int64_t> ad = a.dims(), bd = b.dims();
  bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) ad.insert(ad.begin(), 1);
  if (b_vec) bd.push_back(1);
  int64_t M = ad[ad.size() - 2], K = ad.back(), N = bd.back();
  if (bd[bd.size() - 2] != K)
    return ctx.error("inner dimensions differ: ", a.type_string(), " x ", b.type_string());
  std::vector<int64_t> a_batch(ad.begin(), ad.end() - 2), b_batch(bd.begin(), bd.end() - 2);
  FERRITE_ASSIGN_OR_RETURN(auto batch, broadcast_dims(ctx, a_batch, b_batch));
  std::vector<int64_t> out = batch;
  if (!a_vec) out.push_back(M);
  if (!b_vec) out.push_back(N);
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, a.dtype(), out));
  int64_t nbatch = 1;
  for (int64_t d : batch) nbatch *= d;
  // Batch offsets (in matrices) of a and b for each output batch index.
  std::vector<int64_t> sa = broadcast_strides(a_batch, batch), sb = broadcast_strides(b_batch, batch);
  std::vector<int64_t> zero(batch.size(), 0);
  Status st;
  bool ok = visit_gemm_dtype(a.dtype(), [&]<class T, class Acc>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* py = y->data<T>();
    std::array<std::vector<int64_t>, 2> strides{sa, sb};
    if (batch.empty()) {
      reference_gemm<T, Acc>(M, N, K, pa, K, 1, pb, N, 1, py, N, false);
      return;
    }
    for_each_index<2>(batch, strides, [&](int64_t i, const std::array<int64_t, 2>& off) {
      reference_gemm<T, Acc>(M, N, K, pa + off[0] * M * K, K, 1, pb + off[1] * K * N, N, 1,
                             py + i * M * N, N, false);
    });
    (void)nbatch;
  });
  if (!ok) return ctx.error("dtype ", dtype_name(a.dtype()), " is not supported");
  return st;
}

Status infer_gemm(InferContext& ctx) {
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  if ((a.rank_known() && a.rank() != 2) || (b.rank_known() && b.rank() != 2))
    return ctx.error("Gemm inputs A and B must be 2-D, got ", a.to_string(), " and ", b.to_string());
  bool ta = ctx.node().attr_int("transA") != 0, tb = ctx.node().attr_int("transB") != 0;
  Dim m = a.rank_known() ? a[ta ? 1 : 0] : Dim::unknown();
  Dim ka = a.rank_known() ? a[ta ? 0 : 1] : Dim::unknown();
  Dim kb = b.rank_known() ? b[tb ? 1 : 0] : Dim::unknown();
  Dim n = b.rank_known() ? b[tb ? 0 : 1] : Dim::unknown();
  if (ka.is_static() && kb.is_static() && ka != kb)
    return ctx.error("inner dimensions differ: ", a.to_string(), " x ", b.to_string(),
                     " (transA=", ta, ", transB=", tb, ")");
  Shape out(std::vector<Dim>{m, n});
  if (ctx.has_input(2)) {
    std::string e;
    auto bc = broadcast_shapes(ctx.input_shape(2), out, &e);
    if (!bc) return ctx.error("bias C is not broadcastable to the output: ", e);
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
  return Status::ok();
}

Status gemm_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.rank() != 2 || b.rank() != 2) return ctx.error("Gemm inputs A and B must be 2-D");
  bool ta = ctx.node().attr_int("transA") != 0, tb = ctx.node().attr_int("transB") != 0;
  float alpha = ctx.node().attr_float("alpha", 1.0f), beta = ctx.node().attr_float("beta", 1.0f);
  int64_t M = ta ? a.dim(1) : a.dim(0), K = ta ? a.dim(0) : a.dim(1);
  int64_t Kb = tb ? b.dim(1) : b.dim(0), N = tb ? b.dim(0) : b.dim(1);
  if (K != Kb) return ctx.error("inner dimensions differ: ", a.type_string(), " x ", b.type_string());
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, a.dtype(), {M, N}));
  const Tensor* c = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (c) {
    auto bc = broadcast_dims(ctx, c->dims(), {M, N});
    if (!bc || *bc != std::vector<int64_t>{M, N})
      return ctx.error("bias C ", c->type_string(), " is not broadcastable to [", M, ",", N, "]");
  }
  bool ok = visit_gemm_dtype(a.dtype(), [&]<class T, class Acc>() {
    T* py = y->data<T>();
    reference_gemm<T, Acc>(M, N, K, a.data<T>(), ta ? 1 : K, ta ? M : 1, b.data<T>(), tb ? 1 : N,
                           tb ? K : 1, py, N, false);
    std::vector<int64_t> cs = c ? broadcast_strides(c->dims(), {M, N}) : std::vector<int64_t>{0, 0};
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        Acc v = static_cast<Acc>(convert<Acc>(py[m * N + n]) * static_cast<Acc>(alpha));
        if (c) v += static_cast<Acc>(beta) * convert<Acc>(c->data<T>()[m * cs[0] + n * cs[1]]);
        py[m * N + n] = convert<T>(v);
      }
    }
  });
  if (!ok) return ctx.error("dtype ", dtype_name(a.dtype()), " is not supported");
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Einsum. Labels are the letters' ASCII codes; the dims an ellipsis stands for get labels
// kEllipsisLabel + k, right-aligned across inputs so that they broadcast like NumPy.
//
// Evaluation: each input first loses its diagonals and the labels nobody else needs; then inputs
// are contracted pairwise, left to right, as batched GEMMs over packed [batch, M, K] x [batch, K,
// N] operands; a last pass puts the labels in output order.

constexpr int kEllipsisLabel = 128;
constexpr int kEllipsisMarker = -1;

struct EinsumEquation {
  std::vector<std::vector<int>> terms;  // letters, with kEllipsisMarker where "..." stands
  std::vector<int> output;              // same, when explicit
  bool explicit_output = false;
};

Expected<std::vector<int>> parse_einsum_term(const std::string& s) {
  std::vector<int> term;
  bool ellipsis = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '.') {
      if (s.compare(i, 3, "...") != 0 || ellipsis)
        return err("bad ellipsis in einsum term '", s, "'");
      ellipsis = true;
      term.push_back(kEllipsisMarker);
      i += 2;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      term.push_back(c);
    } else {
      return err("invalid character '", c, "' in einsum term '", s, "'");
    }
  }
  return term;
}

Expected<EinsumEquation> parse_einsum(std::string eq, size_t num_inputs) {
  eq.erase(std::remove_if(eq.begin(), eq.end(),
                          [](char c) { return std::isspace(static_cast<unsigned char>(c)); }),
           eq.end());
  EinsumEquation e;
  std::string lhs = eq;
  if (size_t arrow = eq.find("->"); arrow != std::string::npos) {
    lhs = eq.substr(0, arrow);
    FERRITE_ASSIGN_OR_RETURN(e.output, parse_einsum_term(eq.substr(arrow + 2)));
    e.explicit_output = true;
    for (size_t i = 0; i < e.output.size(); ++i)
      for (size_t j = i + 1; j < e.output.size(); ++j)
        if (e.output[i] == e.output[j] && e.output[i] != kEllipsisMarker)
          return err("label '", static_cast<char>(e.output[i]), "' repeats in the einsum output");
  }
  size_t start = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    FERRITE_ASSIGN_OR_RETURN(auto term, parse_einsum_term(lhs.substr(start, comma - start)));
    e.terms.push_back(std::move(term));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (e.terms.size() != num_inputs)
    return err("einsum equation has ", e.terms.size(), " terms for ", num_inputs, " inputs");
  for (int l : e.output) {
    if (l == kEllipsisMarker) continue;
    bool found = false;
    for (const auto& t : e.terms) found |= std::find(t.begin(), t.end(), l) != t.end();
    if (!found) return err("output label '", static_cast<char>(l), "' does not occur in any input");
  }
  return e;
}

// The equation bound to concrete input ranks: one label per input axis and the output labels.
struct EinsumBinding {
  std::vector<std::vector<int>> labels;
  std::vector<int> output;
  std::vector<int> ellipsis_count;  // per input
  int ellipsis_rank = 0;
};

Expected<EinsumBinding> bind_einsum(const EinsumEquation& e, const std::vector<size_t>& ranks) {
  EinsumBinding b;
  for (size_t i = 0; i < e.terms.size(); ++i) {
    const auto& t = e.terms[i];
    bool has_ellipsis = std::find(t.begin(), t.end(), kEllipsisMarker) != t.end();
    int64_t letters = static_cast<int64_t>(t.size()) - (has_ellipsis ? 1 : 0);
    int64_t extra = static_cast<int64_t>(ranks[i]) - letters;
    if (extra < 0 || (!has_ellipsis && extra != 0))
      return err("einsum input ", i, " has rank ", ranks[i], " but its term has ", letters,
                 " labels");
    b.ellipsis_count.push_back(static_cast<int>(extra));
    b.ellipsis_rank = std::max(b.ellipsis_rank, static_cast<int>(extra));
  }
  for (size_t i = 0; i < e.terms.size(); ++i) {
    std::vector<int> labels;
    int n = b.ellipsis_count[i];
    for (int l : e.terms[i]) {
      if (l != kEllipsisMarker) {
        labels.push_back(l);
        continue;
      }
      for (int k = 0; k < n; ++k) labels.push_back(kEllipsisLabel + b.ellipsis_rank - n + k);
    }
    b.labels.push_back(std::move(labels));
  }
  auto push_ellipsis = [&] {
    for (int k = 0; k < b.ellipsis_rank; ++k) b.output.push_back(kEllipsisLabel + k);
  };
  if (e.explicit_output) {
    for (int l : e.output) {
      if (l == kEllipsisMarker)
        push_ellipsis();
      else
        b.output.push_back(l);
    }
  } else {
    // Implicit output: the broadcast dims, then the letters that occur once, in ASCII order.
    push_ellipsis();
    std::map<int, int> count;
    for (const auto& t : e.terms)
      for (int l : t)
        if (l != kEllipsisMarker) count[l]++;
    for (const auto& [l, c] : count)
      if (c == 1) b.output.push_back(l);
  }
  return b;
}

std::string einsum_label_name(int l) {
  return l >= kEllipsisLabel ? str_cat("...[", l - kEllipsisLabel, "]")
                             : std::string(1, static_cast<char>(l));
}

Status infer_einsum(InferContext& ctx) {
  size_t n = ctx.num_inputs();
  // The type constraint of a variadic input, checked here because schemas list input indices.
  for (size_t i = 0; i < n; ++i) {
    if (!ctx.has_input(i)) return ctx.error("input ", i, " is missing");
    DType t = ctx.input_dtype(i);
    if (!dtypes::kNumeric.contains(t) || t != ctx.input_dtype(0))
      return ctx.error("inputs must share one numeric dtype, got ", dtype_name(ctx.input_dtype(0)),
                       " and ", dtype_name(t));
  }
  auto eq = parse_einsum(ctx.node().attr_string("equation"), n);
  if (!eq) return ctx.error(eq.status().message());
  std::vector<size_t> ranks;
  for (size_t i = 0; i < n; ++i) {
    if (!ctx.input_shape(i).rank_known()) {
      bool out_ellipsis =
          std::find(eq->output.begin(), eq->output.end(), kEllipsisMarker) != eq->output.end();
      ctx.set_output(0, ctx.input_dtype(0),
                     eq->explicit_output && !out_ellipsis
                         ? Shape(std::vector<Dim>(eq->output.size(), Dim::unknown()))
                         : Shape::unknown_rank());
      return Status::ok();
    }
    ranks.push_back(ctx.input_shape(i).rank());
  }
  auto b = bind_einsum(*eq, ranks);
  if (!b) return ctx.error(b.status().message());
  std::map<int, Dim> size;
  for (size_t i = 0; i < n; ++i) {
    const Shape& s = ctx.input_shape(i);
    for (size_t ax = 0; ax < s.rank(); ++ax) {
      int l = b->labels[i][ax];
      const Dim& d = s[ax];
      auto it = size.find(l);
      if (it == size.end()) {
        size[l] = d;
        continue;
      }
      Dim& cur = it->second;
      if (l >= kEllipsisLabel) {
        std::string e;
        auto bc = broadcast_shapes(Shape(std::vector<Dim>{cur}), Shape(std::vector<Dim>{d}), &e);
        if (!bc) return ctx.error("einsum: ", e);
        cur = (*bc)[0];
      } else if (cur.is_static() && d.is_static() && cur != d) {
        return ctx.error("einsum label '", einsum_label_name(l), "' has sizes ", cur.to_string(),
                         " and ", d.to_string());
      } else if (!cur.is_static() && d.is_static()) {
        cur = d;
      }
    }
  }
  std::vector<Dim> out;
  for (int l : b->output) out.push_back(size.count(l) ? size[l] : Dim(1));
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
  return Status::ok();
}

// A dense intermediate with one label per axis.
template <class Acc>
struct Labeled {
  std::vector<int> labels;
  std::vector<int64_t> dims;
  std::vector<Acc> data;
};

// Sums over the labels not in `target` and lays the rest out in `target` order with the sizes
// `size` (a local size of 1 broadcasts). Repeated labels in `in` select diagonals.
template <class Acc>
Labeled<Acc> einsum_contract_single(const Labeled<Acc>& in, const std::vector<int>& target,
                                    const std::map<int, int64_t>& size) {
  using Wide = std::conditional_t<std::is_floating_point_v<Acc>, double, Acc>;
  std::vector<int64_t> strides = contiguous_strides(in.dims);
  std::map<int, int64_t> lstride, lsize;
  for (size_t ax = 0; ax < in.labels.size(); ++ax) {
    lstride[in.labels[ax]] += strides[ax];
    lsize[in.labels[ax]] = in.dims[ax];
  }
  Labeled<Acc> out;
  out.labels = target;
  std::vector<int64_t> ostr;
  for (int l : target) {
    int64_t n = size.at(l);
    out.dims.push_back(n);
    bool present = lstride.count(l) != 0;
    ostr.push_back(present && !(lsize[l] == 1 && n != 1) ? lstride[l] : 0);
  }
  std::vector<int64_t> sdims, sstr;
  for (const auto& [l, st] : lstride) {
    if (std::find(target.begin(), target.end(), l) != target.end()) continue;
    sdims.push_back(lsize[l]);
    sstr.push_back(st);
  }
  std::vector<int64_t> group;
  for_each_index<1>(sdims, {sstr},
                    [&](int64_t, const std::array<int64_t, 1>& off) { group.push_back(off[0]); });
  int64_t total = 1;
  for (int64_t d : out.dims) total *= d;
  out.data.assign(static_cast<size_t>(total), Acc(0));
  const Acc* src = in.data.data();
  for_each_index<1>(out.dims, {ostr}, [&](int64_t o, const std::array<int64_t, 1>& off) {
    Wide acc = 0;
    for (int64_t g : group) acc += static_cast<Wide>(src[off[0] + g]);
    out.data[o] = static_cast<Acc>(acc);
  });
  return out;
}

// Contracts a and b over their shared labels that `keep` does not list.
template <class Acc>
Labeled<Acc> einsum_contract_pair(const Labeled<Acc>& a, const Labeled<Acc>& b,
                                  const std::set<int>& keep, const std::map<int, int64_t>& size) {
  auto has = [](const std::vector<int>& v, int l) {
    return std::find(v.begin(), v.end(), l) != v.end();
  };
  std::vector<int> batch, m, k, n;
  for (int l : a.labels) {
    if (has(batch, l) || has(m, l) || has(k, l)) continue;
    if (has(b.labels, l))
      (keep.count(l) ? batch : k).push_back(l);
    else if (keep.count(l))
      m.push_back(l);
  }
  for (int l : b.labels)
    if (!has(a.labels, l) && keep.count(l) && !has(n, l)) n.push_back(l);
  auto prod = [&](const std::vector<int>& ls) {
    int64_t p = 1;
    for (int l : ls) p *= size.at(l);
    return p;
  };
  auto cat = [](std::vector<int> x, const std::vector<int>& y, const std::vector<int>& z) {
    x.insert(x.end(), y.begin(), y.end());
    x.insert(x.end(), z.begin(), z.end());
    return x;
  };
  Labeled<Acc> pa = einsum_contract_single(a, cat(batch, m, k), size);
  Labeled<Acc> pb = einsum_contract_single(b, cat(batch, k, n), size);
  int64_t nb = prod(batch), nm = prod(m), nk = prod(k), nn = prod(n);
  Labeled<Acc> out;
  out.labels = cat(batch, m, n);
  for (int l : out.labels) out.dims.push_back(size.at(l));
  out.data.assign(static_cast<size_t>(nb * nm * nn), Acc(0));
  if (nm * nn == 0) return out;
  for (int64_t i = 0; i < nb; ++i)
    reference_gemm<Acc, Acc>(nm, nn, nk, pa.data.data() + i * nm * nk, nk, 1,
                             pb.data.data() + i * nk * nn, nn, 1, out.data.data() + i * nm * nn, nn,
                             false);
  return out;
}

// The type Einsum computes in: float for 32- and 16-bit floats, double, or 64-bit integers.
template <class T>
using einsum_acc_t = std::conditional_t<
    std::is_same_v<T, double>, double,
    std::conditional_t<is_float_v<T>, float,
                       std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>>;

Status einsum_kernel(KernelContext& ctx) {
  size_t n = ctx.num_inputs();
  auto eq = parse_einsum(ctx.node().attr_string("equation"), n);
  if (!eq) return ctx.error(eq.status().message());
  std::vector<size_t> ranks;
  for (size_t i = 0; i < n; ++i) ranks.push_back(ctx.input(i).rank());
  auto bound = bind_einsum(*eq, ranks);
  if (!bound) return ctx.error(bound.status().message());
  const EinsumBinding& b = *bound;
  std::map<int, int64_t> size;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& t = ctx.input(i);
    std::map<int, int64_t> local;
    for (size_t ax = 0; ax < t.rank(); ++ax) {
      int l = b.labels[i][ax];
      int64_t d = t.dim(ax);
      if (local.count(l) && local[l] != d)
        return ctx.error("einsum label '", einsum_label_name(l), "' repeats in input ", i,
                         " with sizes ", local[l], " and ", d);
      local[l] = d;
      auto it = size.find(l);
      if (it == size.end() || it->second == d) {
        size[l] = d;
      } else if (l >= kEllipsisLabel && (it->second == 1 || d == 1)) {
        if (it->second == 1) it->second = d;
      } else {
        return ctx.error("einsum label '", einsum_label_name(l), "' has sizes ", it->second,
                         " and ", d);
      }
    }
  }
  std::vector<int64_t> out_dims;
  for (int l : b.output) {
    if (!size.count(l)) size[l] = 1;
    out_dims.push_back(size[l]);
  }
  DType dt = ctx.input(0).dtype();
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dt, out_dims));
  Status st;
  visit_dtype(dt, [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      st = ctx.error("bool is not supported");
    } else {
      using Acc = einsum_acc_t<T>;
      std::set<int> out_set(b.output.begin(), b.output.end());
      // Labels each input must keep: those of the output or of any other input.
      std::vector<Labeled<Acc>> ops;
      for (size_t i = 0; i < n; ++i) {
        const Tensor& t = ctx.input(i);
        Labeled<Acc> in{b.labels[i], t.dims(), std::vector<Acc>(static_cast<size_t>(t.numel()))};
        const T* p = t.data<T>();
        for (int64_t j = 0; j < t.numel(); ++j) in.data[j] = convert<Acc>(p[j]);
        if (n == 1) {
          ops.push_back(std::move(in));
          break;
        }
        std::vector<int> target;
        std::map<int, int64_t> local;
        for (size_t ax = 0; ax < in.labels.size(); ++ax) {
          int l = in.labels[ax];
          if (local.count(l)) continue;
          local[l] = in.dims[ax];
          bool needed = out_set.count(l) != 0;
          for (size_t j = 0; j < n && !needed; ++j)
            needed =
                j != i && std::find(b.labels[j].begin(), b.labels[j].end(), l) != b.labels[j].end();
          if (needed) target.push_back(l);
        }
        ops.push_back(einsum_contract_single(in, target, local));
      }
      Labeled<Acc> cur = std::move(ops[0]);
      for (size_t i = 1; i < n; ++i) {
        std::set<int> keep = out_set;
        for (size_t j = i + 1; j < n; ++j) keep.insert(ops[j].labels.begin(), ops[j].labels.end());
        cur = einsum_contract_pair(cur, ops[i], keep, size);
      }
      Labeled<Acc> fin = einsum_contract_single(cur, b.output, size);
      T* py = y->data<T>();
      for (int64_t j = 0; j < y->numel(); ++j) py[j] = convert<T>(fin.data[j]);
    }
  });
  return st;
}

// ---- QLinearMatMul ----
// y = saturate(rint((a - a_zp)(b - b_zp) * (a_scale * b_scale / y_scale)) + y_zp), the integer
// product exact in int64 and the scale factor rounded in the scales' own type, as ONNX's reference
// implementation computes it.

Status infer_qlinear_matmul(InferContext& ctx) {
  for (size_t i : {1, 2, 4, 5, 6, 7})
    if (ctx.input_shape(i).rank_known() && ctx.input_shape(i).rank() > 1)
      return ctx.error("QLinearMatMul supports per-tensor scales and zero points only");
  if (ctx.input_dtype(2) != ctx.input_dtype(0) || ctx.input_dtype(5) != ctx.input_dtype(3))
    return ctx.error("zero points must have their inputs' dtypes");
  // MatMul's inference over (a, b), which are inputs 0 and 3 here.
  Node tmp = ctx.node();
  tmp.inputs = {ctx.node().input(0), ctx.node().input(3)};
  Value out;
  tmp.outputs = {&out};
  InferContext mm(tmp);
  FERRITE_RETURN_IF_ERROR(infer_matmul(mm));
  ctx.set_output(0, ctx.input_dtype(7), out.type.shape);
  return Status::ok();
}

Status qlinear_matmul_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  for (size_t i : {1, 2, 4, 5, 6, 7})
    if (ctx.input(i).numel() != 1)
      return ctx.error("QLinearMatMul supports per-tensor scales and zero points only");
  if (a.rank() < 2 || b.rank() < 2) return ctx.error("QLinearMatMul inputs must have rank >= 2");
  const std::vector<int64_t>& ad = a.dims();
  const std::vector<int64_t>& bd = b.dims();
  int64_t M = ad[ad.size() - 2], K = ad.back(), N = bd.back();
  if (bd[bd.size() - 2] != K) return ctx.error("inner dimensions differ");
  std::vector<int64_t> a_batch(ad.begin(), ad.end() - 2), b_batch(bd.begin(), bd.end() - 2);
  FERRITE_ASSIGN_OR_RETURN(auto batch, broadcast_dims(ctx, a_batch, b_batch));
  std::vector<int64_t> out = batch;
  out.push_back(M);
  out.push_back(N);
  const Tensor& yzp = ctx.input(7);
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, yzp.dtype(), out));
  auto value = [](const Tensor& t, int64_t i) {
    double v = 0;
    visit_dtype(t.dtype(), [&]<class T>() { v = to_double(t.data<T>()[i]); });
    return v;
  };
  // The factor in the scales' type: each product and quotient rounds as numpy's would.
  double factor = 0;
  visit_dtype(ctx.input(1).dtype(), [&]<class S>() {
    if constexpr (is_float_v<S>) {
      using C = compute_t<S>;
      S ab =
          convert<S>(convert<C>(ctx.input(1).data<S>()[0]) * convert<C>(ctx.input(4).data<S>()[0]));
      factor = convert<double>(convert<S>(convert<C>(ab) / convert<C>(ctx.input(6).data<S>()[0])));
    }
  });
  const int64_t azp = static_cast<int64_t>(value(ctx.input(2), 0));
  const int64_t bzp = static_cast<int64_t>(value(ctx.input(5), 0));
  const double zp = value(yzp, 0);
  std::vector<int64_t> sa = broadcast_strides(a_batch, batch),
                       sb = broadcast_strides(b_batch, batch);
  std::array<std::vector<int64_t>, 2> strides{sa, sb};
  std::vector<int64_t> batch_dims = batch.empty() ? std::vector<int64_t>{1} : batch;
  if (batch.empty()) strides = {std::vector<int64_t>{0}, std::vector<int64_t>{0}};
  return dispatch_dtype<TypeClass::kInt>(ctx, yzp.dtype(), [&]<class Y>() -> Status {
    Y* py = y->data<Y>();
    for_each_index<2>(batch_dims, strides, [&](int64_t bi, const std::array<int64_t, 2>& off) {
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          int64_t acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc += (static_cast<int64_t>(value(a, off[0] * M * K + m * K + k)) - azp) *
                   (static_cast<int64_t>(value(b, off[1] * K * N + k * N + n)) - bzp);
          double d = static_cast<double>(acc) * factor + zp;
          py[bi * M * N + m * N + n] = saturate_cast<Y>(std::nearbyint(d));
        }
    });
    return Status::ok();
  });
}

// MatMulInteger: (a - a_zp)(b - b_zp) in int32, with per-tensor zero points (or per-row of a /
// per-column of b, as 1-D zero points of the matching length).
Status infer_matmul_integer(InferContext& ctx) {
  FERRITE_RETURN_IF_ERROR(infer_matmul(ctx));
  ctx.set_output(0, DType::kI32, ctx.node().output(0)->type.shape);
  return Status::ok();
}

Status matmul_integer_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.rank() != 2 || b.rank() != 2 || a.dims()[1] != b.dims()[0])
    return ctx.error("MatMulInteger supports 2-D inputs [M, K] x [K, N]");
  const int64_t M = a.dims()[0], K = a.dims()[1], N = b.dims()[1];
  auto ints = [&](size_t i) {
    std::vector<int64_t> v;
    if (ctx.num_inputs() <= i || !ctx.has_input(i)) return v;
    const Tensor& t = ctx.input(i);
    visit_dtype(t.dtype(), [&]<class T>() {
      for (int64_t k = 0; k < t.numel(); ++k)
        v.push_back(static_cast<int64_t>(to_double(t.data<T>()[k])));
    });
    return v;
  };
  std::vector<int64_t> av = ints(0), bv = ints(1), azp = ints(2), bzp = ints(3);
  if (azp.size() > 1 && static_cast<int64_t>(azp.size()) != M)
    return ctx.error("a_zero_point must have 1 or M elements");
  if (bzp.size() > 1 && static_cast<int64_t>(bzp.size()) != N)
    return ctx.error("b_zero_point must have 1 or N elements");
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kI32, {M, N}));
  int32_t* py = y->data<int32_t>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      int64_t za = azp.empty() ? 0 : azp[azp.size() == 1 ? 0 : m];
      int64_t zb = bzp.empty() ? 0 : bzp[bzp.size() == 1 ? 0 : n];
      int64_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += (av[m * K + k] - za) * (bv[k * N + n] - zb);
      py[m * N + n] = static_cast<int32_t>(acc);  // |acc| < K * 2^16: fits for any real K
    }
  return Status::ok();
}

}  // namespace

void register_rnn_ops(OpRegistry& r);  // rnn.cpp: RNN, GRU, LSTM

void register_math_ops(OpRegistry& r) {
  register_rnn_ops(r);
  r.add(OpSchemaBuilder("MatMul").versions(13).inputs(2).outputs(1)
            .types("T", {0, 1}, kGemmTypes).infer(infer_matmul).kernel(matmul_kernel));
  r.add(OpSchemaBuilder("Gemm").versions(13).inputs(2, 3).outputs(1)
            .attr("alpha", AttrType::kFloat, 1.0f).attr("beta", AttrType::kFloat, 1.0f)
            .attr("transA", AttrType::kInt, 0).attr("transB", AttrType::kInt, 0)
            .types("T", {0, 1, 2}, kGemmTypes).infer(infer_gemm).kernel(gemm_kernel));
  r.add(OpSchemaBuilder("QLinearMatMul")
            .versions(10)
            .inputs(8)
            .outputs(1)
            .types("T1", {0, 2}, {DType::kI8, DType::kU8})
            .types("TS", {1, 4, 6}, dtypes::kFloat)
            .types("T2", {3, 5}, {DType::kI8, DType::kU8})
            .types("T3", {7}, {DType::kI8, DType::kU8})
            .infer(infer_qlinear_matmul)
            .kernel(qlinear_matmul_kernel));
  r.add(OpSchemaBuilder("MatMulInteger")
            .versions(10)
            .inputs(2, 4)
            .outputs(1)
            .types("T1", {0, 2}, {DType::kI8, DType::kU8})
            .types("T2", {1, 3}, {DType::kI8, DType::kU8})
            .infer(infer_matmul_integer)
            .kernel(matmul_integer_kernel));
  r.add(OpSchemaBuilder("Einsum")
            .versions(13)
            .inputs(1, INT_MAX)
            .outputs(1)
            .required_attr("equation", AttrType::kString)
            .variadic_types("T", 0, dtypes::kNumeric)
            .infer(infer_einsum)
            .kernel(einsum_kernel));
}

}  // namespace ferrite
