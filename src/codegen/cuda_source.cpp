#include "codegen/cuda_source.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>

#include "codegen/row_analysis.h"
#include "codegen/scalar_emitter.h"
#include "lower/lowering.h"
#include "ops/scalar_functions.h"

namespace ferrite::cuda {

namespace {

const char* kPrelude =
#include "codegen/cuda_prelude.inc"
    ;

struct Gen {
  const LoweredGraph& lg;
  ScalarEmitter em;
  Ident ident;
  // A segment of a multi-tensor kernel: a device function over elements [fe_lo, fe_hi) of its
  // iteration space, run by the threads of one block.
  bool segment = false;
};

// Signature, dims d0.. and input names of a kernel.
// `bound`: the kernel's __launch_bounds__ (0: the default of its kind).
std::vector<std::string> emit_prologue(std::ostringstream& os, const Kernel& k, const Gen& g,
                                       int bound = 0) {
  os << "\n// " << k.name << ": ";
  for (size_t i = 0; i < k.source_nodes.size(); ++i) os << (i ? ", " : "") << k.source_nodes[i];
  if (k.source_nodes.empty()) os << "(copy)";
  if (g.segment)
    os << "\n__device__ __noinline__ void " << k.name << "(";
  else
    os << "\nextern \"C\" __global__ void __launch_bounds__("
       << (bound > 0    ? bound
           : k.is_row() ? row_block_max()
                        : 1024)
       << ") " << k.name << "(";
  std::vector<std::string> in_names;
  for (size_t i = 0; i < k.input_buffers.size(); ++i) {
    const Buffer& b = g.lg.buffers[k.input_buffers[i]];
    in_names.push_back("in" + std::to_string(i));
    bool alias = static_cast<int>(i) == k.in_place_slot || k.writes_input;
    os << "const " << *g.em.type(b.dtype) << "*" << (alias ? " " : " __restrict__ ") << "in" << i
       << ", ";
  }
  const bool out_alias = k.in_place_slot >= 0 || k.writes_input;
  os << *g.em.type(k.out_dtype) << "*" << (out_alias ? " " : " __restrict__ ") << "out";
  for (size_t s = 0; s < g.lg.symbols.size(); ++s) os << ", int64_t s" << s;
  if (g.segment) os << ", int64_t fe_lo, int64_t fe_hi";
  os << ") {\n";
  for (size_t d = 0; d < k.shape.size(); ++d)
    os << "  const int64_t d" << d << " = " << k.shape[d].expr().to_c_code(g.ident) << ";\n";
  return in_names;
}

// Splits `flat` into x<lo>..x<hi-1> (row-major over dims d<lo>..d<hi-1>), with 32-bit division
// when `small` holds at run time (64-bit division costs several times more on a GPU).
void emit_split(std::ostringstream& os, const std::string& indent, const std::string& flat,
                size_t lo, size_t hi, const std::string& small) {
  if (hi <= lo) return;
  for (size_t d = lo; d < hi; ++d) os << indent << "int64_t x" << d << ";\n";
  auto body = [&](const std::string& ty) {
    std::string in = indent + "  ";
    os << in << ty << " fe_r = (" << ty << ")(" << flat << ");\n";
    for (size_t d = hi; d-- > lo;) {
      if (d > lo)
        os << in << "x" << d << " = fe_r % (" << ty << ")d" << d << "; fe_r /= (" << ty << ")d" << d
           << ";\n";
      else
        os << in << "x" << d << " = fe_r;\n";
    }
  };
  if (hi - lo == 1) {
    os << indent << "x" << lo << " = " << flat << ";\n";
    return;
  }
  os << indent << "if (" << small << ") {\n";
  body("uint32_t");
  os << indent << "} else {\n";
  body("int64_t");
  os << indent << "}\n";
}

size_t dtype_bytes(DType t) {
  switch (t) {
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    default:
      return 1;
  }
}

// The store of `value` to `target` (an element of out).
std::string store(const std::string& target, const std::string& value) {
  return target + " = " + value + ";";
}

// The value of an element read from a buffer of `stored` type as the expression type `value`
// (the same today: the load spelling of the scalar emitter).
std::string loaded(DType stored, DType value, const std::string& element) {
  (void)stored;
  (void)value;
  return element;
}

// A load whose address is `base + x<var>` with a base free of x<var>: consecutive lanes read
// consecutive elements, so V lanes are one vector load (when the base is aligned).
bool unit_stride(const ScalarExpr& e, size_t var) {
  if (e.kind != ScalarKind::kLoad) return false;
  return !(e.address - SymExpr::symbol(loop_var(var))).uses(loop_var(var));
}

// Pointwise kernels. When the innermost dim is a multiple of V (16 bytes of the output type) and
// the output is 16-byte aligned, each thread of the grid-stride loop takes V consecutive
// elements of one row: unit-stride loads of the output's element size are one 16-byte load
// (scalar loads where that load's base turns out unaligned), expressions that do not depend on
// the innermost loop variable are computed once for the V lanes, and the store is one 16-byte
// store. Otherwise (and for 1-byte outputs) one element per iteration.
void emit_pointwise(std::ostringstream& os, const Kernel& k, const Gen& g) {
  std::vector<std::string> in_names = emit_prologue(os, k, g);
  const size_t rank = k.shape.size();
  const size_t n = k.body.size();
  std::vector<std::string> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = "t" + std::to_string(i);
  os << "  const int64_t fe_total = 1";
  for (size_t d = 0; d < rank; ++d) os << " * d" << d;
  os << ";\n";
  // A segment covers [fe_lo, fe_hi) with its block's threads; a kernel the whole space with the
  // grid's.
  const std::string first =
      g.segment ? "threadIdx.x" : "(int64_t)blockIdx.x * blockDim.x + threadIdx.x";
  if (g.segment)
    os << "  const int64_t fe_stride = blockDim.x;\n  if (fe_hi > fe_total) fe_hi = fe_total;\n";
  else
    os << "  const int64_t fe_stride = (int64_t)gridDim.x * blockDim.x;\n";
  const std::string lo = g.segment ? "fe_lo" : "", hi = g.segment ? "fe_hi" : "fe_total";
  const size_t ob = dtype_bytes(k.out_dtype);
  const int V = ob >= 2 && ob <= 8 && rank > 0 ? static_cast<int>(16 / ob) : 1;
  if (V > 1) {
    const size_t last = rank - 1;
    const std::string oty = *g.em.type(k.out_dtype);
    std::vector<bool> dep = depends_on_dims(k, last, last + 1);
    std::vector<bool> vec_load(n, false);
    for (size_t i = 0; i < n; ++i) {
      const ScalarExpr& e = k.body.at(static_cast<int>(i));
      vec_load[i] = dep[i] && unit_stride(e, last) &&
                    dtype_bytes(g.lg.buffers[k.input_buffers[e.input]].dtype) == ob;
    }
    os << "  if (d" << last << " % " << V << " == 0 && fe_aligned16(out)";
    std::vector<bool> slot_checked(k.input_buffers.size(), false);
    for (size_t i = 0; i < n; ++i)
      if (vec_load[i] && !slot_checked[k.body.at(static_cast<int>(i)).input]) {
        slot_checked[k.body.at(static_cast<int>(i)).input] = true;
        os << " && fe_aligned16(" << in_names[k.body.at(static_cast<int>(i)).input] << ")";
      }
    os << ") {\n"
       << "    const bool fe_small = fe_total + fe_stride * " << V << " < 0xffffffffLL;\n"
       << "    for (int64_t fe_q = " << (lo.empty() ? "" : lo + " / " + std::to_string(V) + " + ")
       << first << "; fe_q < " << hi << " / " << V << "; fe_q += fe_stride) {\n"
       << "      const int64_t fe_i = fe_q * " << V << ";\n";
    emit_split(os, "      ", "fe_i", 0, rank, "fe_small");
    const std::string xl = "x" + std::to_string(last);
    // Lane-invariant expressions once; lane-dependent ones per lane (t<i>_<u>).
    for (size_t i = 0; i < n; ++i)
      if (!dep[i]) os << "      " << g.em.def(k, i, t, in_names, g.ident);
    for (size_t i = 0; i < n; ++i) {
      if (!vec_load[i]) continue;
      const ScalarExpr& e = k.body.at(static_cast<int>(i));
      const std::string bty = *g.em.type(g.lg.buffers[k.input_buffers[e.input]].dtype);
      const std::string& in = in_names[e.input];
      const std::string a = "fe_a" + std::to_string(i), l = "fe_l" + std::to_string(i);
      os << "      const int64_t " << a << " = " << e.address.to_c_code(g.ident) << ";\n"
         << "      fe_vec<" << bty << ", " << V << "> " << l << ";\n"
         << "      if ((" << a << " & " << V - 1 << ") == 0) " << l << " = *(const fe_vec<" << bty
         << ", " << V << ">*)(" << in << " + " << a << ");\n"
         << "      else for (int fe_u = 0; fe_u < " << V << "; ++fe_u) " << l << ".v[fe_u] = " << in
         << "[" << a << " + fe_u];\n";
    }
    for (int u = 0; u < V; ++u) {
      std::vector<std::string> tl = t;
      for (size_t i = 0; i < n; ++i)
        if (dep[i]) tl[i] = t[i] + "_" + std::to_string(u);
      Ident lane = [&, u](const std::string& name) -> std::string {
        size_t d;
        if (is_loop_var(name, &d) && d == last) return "(" + xl + " + " + std::to_string(u) + ")";
        return g.ident(name);
      };
      for (size_t i = 0; i < n; ++i) {
        if (!dep[i]) continue;
        if (vec_load[i]) {
          const ScalarExpr& e = k.body.at(static_cast<int>(i));
          os << "      const " << *g.em.type(e.dtype) << " " << tl[i] << " = "
             << loaded(g.lg.buffers[k.input_buffers[e.input]].dtype, e.dtype,
                       "fe_l" + std::to_string(i) + ".v[" + std::to_string(u) + "]")
             << ";\n";
        } else {
          os << "      " << g.em.def(k, i, tl, in_names, lane);
        }
      }
    }
    os << "      fe_vec<" << oty << ", " << V << "> fe_o;\n";
    for (int u = 0; u < V; ++u)
      os << "      "
         << store("fe_o.v[" + std::to_string(u) + "]",
                  dep[k.root] ? t[k.root] + "_" + std::to_string(u) : t[k.root])
         << "\n";
    os << "      *(fe_vec<" << oty << ", " << V
       << ">*)(out + fe_i) = fe_o;\n    }\n    return;\n  }\n";
  }
  os << "  const bool fe_small = fe_total + fe_stride < 0xffffffffLL;\n"
     << "  for (int64_t fe_i = " << (lo.empty() ? "" : lo + " + ") << first << "; fe_i < " << hi
     << "; fe_i += fe_stride) {\n";
  emit_split(os, "    ", "fe_i", 0, rank, "fe_small");
  for (size_t i = 0; i < n; ++i) os << "    " << g.em.def(k, i, t, in_names, g.ident);
  os << "    " << store("out[fe_i]", t[k.root]) << "\n  }\n}\n";
}

// Row values kept in registers between passes: loads (the point: the row is read once) and
// costly function results (the table's cost class); casts and arithmetic are cheaper to redo
// than to hold (registers).
bool worth_caching(const ScalarExpr& e) {
  return e.kind == ScalarKind::kLoad || costly(e);
}

// A row kernel; the phase structure is the one every dialect shares (codegen/row_analysis.h):
// each live kReduce is a pass over the row, row-invariant expressions are computed once per row
// before the first pass that needs them, varying ones inside each pass that needs them.
//
// The row comes in two variants. The first keeps every costly varying value a pass computes in
// registers (unrolled per-thread arrays), so later passes neither reload the input nor
// recompute; it applies when the row has at most R elements per thread. Rows over one
// (innermost) dim whose length is a multiple of V = 16 bytes / output element take them as
// V consecutive elements per thread and chunk: unit-stride loads are 16-byte loads and the store
// a 16-byte store. Longer rows take block-strided passes that recompute.
class RowEmitter {
 public:
  RowEmitter(std::ostringstream& os, const Kernel& k, const Gen& g)
      : os_(os),
        k_(k),
        g_(g),
        phases_(k),
        rank_(k.shape.size()),
        outer_(k.outer_rank()),
        n_(k.body.size()) {}

  void emit() {
    in_names_ = emit_prologue(os_, k_, g_);
    analyse();
    os_ << "  const int64_t fe_rows = 1";
    for (size_t d = 0; d < outer_; ++d) os_ << " * d" << d;
    os_ << ";\n  const int64_t fe_row_len = 1";
    for (size_t d = outer_; d < rank_; ++d) os_ << " * d" << d;
    os_ << ";\n  const int fe_nthr = fe_row_threads(fe_row_len, " << R_ << ", blockDim.x);\n"
        << "  const int fe_tid = (int)threadIdx.x % fe_nthr, fe_groups = (int)blockDim.x / "
           "fe_nthr;\n"
        << "  const bool fe_small_rows = fe_rows + gridDim.x * fe_groups < 0xffffffffLL;\n"
        << "  const bool fe_small_row = fe_row_len + fe_nthr < 0xffffffffLL;\n"
        << "  for (int64_t fe_row = (int64_t)blockIdx.x * fe_groups + (int)threadIdx.x / fe_nthr;\n"
        << "       fe_row < fe_rows; fe_row += (int64_t)gridDim.x * fe_groups) {\n";
    emit_split(os_, "    ", "fe_row", 0, outer_, "fe_small_rows");
    for (int cached = 1; cached >= 0; --cached) emit_variant(cached != 0);
    os_ << "    }\n  }\n}\n";
  }

 private:
  using Body = std::function<std::string(const std::vector<std::string>&)>;

  const ScalarExpr& expr(size_t i) const { return k_.body.at(static_cast<int>(i)); }
  DType input_dtype(const ScalarExpr& e) const {
    return g_.lg.buffers[k_.input_buffers[e.input]].dtype;
  }

  std::vector<bool> needed(int root, bool through) const { return phases_.needed(root, through); }

  // Which loads are vector loads; V and R (what varies and what is live: phases_).
  void analyse() {
    hoisted_.assign(n_, false);
    t_.resize(n_);
    for (size_t i = 0; i < n_; ++i) t_[i] = "t" + std::to_string(i);
    last_ = rank_ - 1;
    const size_t ob = dtype_bytes(k_.out_dtype);
    V_ = rank_ - outer_ == 1 && ob >= 2 && ob <= 8 ? static_cast<int>(16 / ob) : 1;
    R_ = (std::max(row_cache(), V_) + V_ - 1) / V_ * V_;
    vec_load_.assign(n_, false);
    if (V_ > 1)
      for (size_t i = 0; i < n_; ++i) {
        const ScalarExpr& e = expr(i);
        vec_load_[i] = phases_.live[i] && phases_.varies[i] && unit_stride(e, last_) &&
                       dtype_bytes(input_dtype(e)) == ob;
      }
    xl_ = "x" + std::to_string(last_);
  }

  // One variant of the row: its reductions, then the store.
  void emit_variant(bool cached) {
    cached_ = cached;
    first_pass_ = true;
    std::fill(hoisted_.begin(), hoisted_.end(), false);
    have_.assign(n_, false);
    if (cached_) {
      os_ << "    if (fe_row_len <= " << R_ << " * (int64_t)fe_nthr";
      if (V_ > 1) {
        os_ << " && fe_row_len % " << V_ << " == 0 && fe_aligned16(out)";
        std::vector<bool> checked(k_.input_buffers.size(), false);
        for (size_t i = 0; i < n_; ++i)
          if (vec_load_[i] && !checked[expr(i).input]) {
            checked[expr(i).input] = true;
            os_ << " && fe_aligned16(" << in_names_[expr(i).input] << ")";
          }
      }
      os_ << ") {\n";
      for (size_t i = 0; i < n_; ++i)
        if (phases_.live[i] && phases_.varies[i] && worth_caching(expr(i)))
          os_ << in_ << *g_.em.type(expr(i).dtype) << " fe_c" << i << "[" << R_ << "];\n";
    } else {
      os_ << "    } else {\n";
    }
    for (size_t i = 0; i < n_; ++i)
      if (phases_.live[i] && expr(i).kind == ScalarKind::kReduce) emit_reduction(i);
    std::vector<bool> store_need = needed(k_.root, false);
    if (k_.per_row) {
      for (size_t i = 0; i < n_; ++i)
        if (store_need[i] && !hoisted_[i] && expr(i).kind != ScalarKind::kReduce)
          os_ << in_ << g_.em.def(k_, i, t_, in_names_, g_.ident);
      os_ << in_ << "if (fe_tid == 0) " << store("out[fe_row]", t_[k_.root]) << "\n";
    } else {
      pass(store_need, -1, nullptr, true);
    }
  }

  // Reduction i: a pass accumulating per thread, then the block's result.
  void emit_reduction(size_t i) {
    const ScalarExpr& e = expr(i);
    const std::string ty = *g_.em.type(e.dtype);
    const std::string& acc = t_[i];
    if (e.fn == "sum") {
      os_ << in_ << ty << " " << acc << "_p = 0;\n";
      pass(
          needed(static_cast<int>(i), true), static_cast<int>(i),
          [&](const std::vector<std::string>& nm) {
            return acc + "_p += " + nm[e.args[0]] + ";\n";
          },
          false);
      os_ << in_ << "const " << ty << " " << acc << " = fe_row_reduce<fe_op_sum, " << ty << ">("
          << acc << "_p, fe_nthr);\n";
      return;
    }
    // max / min ignore NaN in the comparisons and propagate it through a flag, as on the host.
    bool mx = e.fn == "max";
    os_ << in_ << ty << " " << acc << "_p = " << (mx ? "-" : "") << "fe_inf<" << ty << ">();\n"
        << in_ << "int " << acc << "_nan = 0;\n";
    pass(
        needed(static_cast<int>(i), true), static_cast<int>(i),
        [&](const std::vector<std::string>& nm) {
          const std::string& v = nm[e.args[0]];
          return acc + "_p = " + v + (mx ? " > " : " < ") + acc + "_p ? " + v + " : " + acc +
                 "_p; " + acc + "_nan |= " + v + " != " + v + ";\n";
        },
        false);
    os_ << in_ << ty << " " << acc << " = fe_row_reduce<fe_op_" << (mx ? "max" : "min") << ", "
        << ty << ">(" << acc << "_p, fe_nthr);\n"
        << in_ << "if (fe_row_any(" << acc << "_nan, fe_nthr)) " << acc << " = fe_nan<" << ty
        << ">();\n";
  }

  // One pass over the row computing what `need` marks; `body` gets the names of the values of
  // one element (per lane in the vector variant). A store pass writes the root to out.
  void pass(const std::vector<bool>& need, int skip, const Body& body, bool store_pass) {
    for (size_t i = 0; i < n_; ++i)
      if (need[i] && !phases_.varies[i] && !hoisted_[i] && static_cast<int>(i) != skip &&
          expr(i).kind != ScalarKind::kReduce) {
        os_ << in_ << g_.em.def(k_, i, t_, in_names_, g_.ident);
        hoisted_[i] = true;
      }
    std::vector<bool> fresh(n_, false);
    if (cached_ && V_ > 1)
      vector_pass(need, body, store_pass, fresh);
    else
      scalar_pass(need, body, store_pass, fresh);
    for (size_t i = 0; i < n_; ++i) have_[i] = have_[i] || fresh[i];
  }

  // The cached variant over V consecutive elements per thread and chunk.
  void vector_pass(const std::vector<bool>& need, const Body& body, bool store_pass,
                   std::vector<bool>& fresh) {
    std::string lp = in_ + "  ";
    os_ << in_ << "#pragma unroll\n"
        << in_ << "for (int fe_k = 0; fe_k < " << R_ / V_ << "; ++fe_k) {\n"
        << lp << "const int64_t fe_j = ((int64_t)fe_k * fe_nthr + fe_tid) * " << V_ << ";\n"
        << lp << "if (fe_j < fe_row_len) {\n";
    lp += "  ";
    os_ << lp << "const int64_t " << xl_ << " = fe_j;\n";
    // The first pass also loads what only later passes read (LayerNorm's scale and bias, an
    // RMSNorm's weight) into the registers that keep the row: their latency then overlaps the
    // row's own loads instead of following the reductions' barriers.
    std::vector<bool> prefetch(n_, false), load = need;
    if (first_pass_)
      for (size_t i = 0; i < n_; ++i)
        if (!need[i] && vec_load_[i] && !have_[i] && worth_caching(expr(i)))
          prefetch[i] = load[i] = true;
    first_pass_ = false;
    emit_vector_loads(load, lp);
    for (size_t i = 0; i < n_; ++i)
      for (int u = 0; prefetch[i] && u < V_; ++u) {
        const std::string lane = "fe_l" + std::to_string(i) + ".v[" + std::to_string(u) + "]";
        os_ << lp << "fe_c" << i << "[fe_k * " << V_ << " + " << u
            << "] = " << loaded(input_dtype(expr(i)), expr(i).dtype, lane) << ";\n";
        fresh[i] = true;
      }
    std::vector<std::string> roots;
    for (int u = 0; u < V_; ++u) {
      std::vector<std::string> tl = t_;
      for (size_t i = 0; i < n_; ++i)
        if (phases_.varies[i]) tl[i] = t_[i] + "_" + std::to_string(u);
      emit_lane(need, u, tl, lp, fresh);
      if (store_pass)
        roots.push_back(tl[k_.root]);
      else
        os_ << lp << body(tl);
    }
    if (store_pass) {
      const std::string oty = *g_.em.type(k_.out_dtype);
      os_ << lp << "fe_vec<" << oty << ", " << V_ << "> fe_o;\n";
      for (int u = 0; u < V_; ++u)
        os_ << lp << store("fe_o.v[" + std::to_string(u) + "]", roots[u]) << "\n";
      os_ << lp << "*(fe_vec<" << oty << ", " << V_
          << ">*)(out + fe_row * fe_row_len + fe_j) = fe_o;\n";
    }
    os_ << in_ << "  }\n" << in_ << "}\n";
  }

  // The vector loads a vector pass needs that no earlier pass kept.
  void emit_vector_loads(const std::vector<bool>& need, const std::string& lp) {
    for (size_t i = 0; i < n_; ++i) {
      if (!need[i] || !vec_load_[i] || have_[i]) continue;
      const ScalarExpr& e = expr(i);
      const std::string bty = *g_.em.type(input_dtype(e));
      const std::string& src = in_names_[e.input];
      const std::string a = "fe_a" + std::to_string(i), l = "fe_l" + std::to_string(i);
      os_ << lp << "const int64_t " << a << " = " << e.address.to_c_code(g_.ident) << ";\n"
          << lp << "fe_vec<" << bty << ", " << V_ << "> " << l << ";\n"
          << lp << "if ((" << a << " & " << V_ - 1 << ") == 0) " << l << " = *(const fe_vec<" << bty
          << ", " << V_ << ">*)(" << src << " + " << a << ");\n"
          << lp << "else for (int fe_u = 0; fe_u < " << V_ << "; ++fe_u) " << l
          << ".v[fe_u] = " << src << "[" << a << " + fe_u];\n";
    }
  }

  // The varying values of lane u of a vector pass, named `tl`.
  void emit_lane(const std::vector<bool>& need, int u, const std::vector<std::string>& tl,
                 const std::string& lp, std::vector<bool>& fresh) {
    Ident lane = [&, u](const std::string& name) -> std::string {
      size_t d;
      if (is_loop_var(name, &d) && d == last_) return "(" + xl_ + " + " + std::to_string(u) + ")";
      return g_.ident(name);
    };
    const std::string slot = "[fe_k * " + std::to_string(V_) + " + " + std::to_string(u) + "]";
    for (size_t i = 0; i < n_; ++i) {
      if (!need[i] || !phases_.varies[i]) continue;
      const ScalarExpr& e = expr(i);
      const std::string ty = *g_.em.type(e.dtype);
      if (have_[i] && worth_caching(e)) {
        os_ << lp << "const " << ty << " " << tl[i] << " = fe_c" << i << slot << ";\n";
        continue;
      }
      if (vec_load_[i])
        os_ << lp << "const " << ty << " " << tl[i] << " = "
            << loaded(input_dtype(e), e.dtype,
                      "fe_l" + std::to_string(i) + ".v[" + std::to_string(u) + "]")
            << ";\n";
      else
        os_ << lp << g_.em.def(k_, i, tl, in_names_, lane);
      if (worth_caching(e)) {
        os_ << lp << "fe_c" << i << slot << " = " << tl[i] << ";\n";
        fresh[i] = true;
      }
    }
  }

  // A pass of one element per thread: unrolled over R register slots in the cached variant,
  // block-strided in the other.
  void scalar_pass(const std::vector<bool>& need, const Body& body, bool store_pass,
                   std::vector<bool>& fresh) {
    std::string lp = in_ + "  ";
    if (cached_)
      os_ << in_ << "#pragma unroll\n"
          << in_ << "for (int fe_r = 0; fe_r < " << R_ << "; ++fe_r) {\n"
          << lp << "const int64_t fe_j = fe_tid + (int64_t)fe_r * fe_nthr;\n"
          << lp << "if (fe_j < fe_row_len) {\n";
    else
      os_ << in_ << "for (int64_t fe_j = fe_tid; fe_j < fe_row_len; fe_j += fe_nthr) {\n";
    if (cached_) lp += "  ";
    emit_split(os_, lp, "fe_j", outer_, rank_, "fe_small_row");
    for (size_t i = 0; i < n_; ++i) {
      if (!need[i] || !phases_.varies[i]) continue;
      if (cached_ && have_[i] && worth_caching(expr(i))) {
        os_ << lp << "const " << *g_.em.type(expr(i).dtype) << " " << t_[i] << " = fe_c" << i
            << "[fe_r];\n";
        continue;
      }
      os_ << lp << g_.em.def(k_, i, t_, in_names_, g_.ident);
      if (cached_ && worth_caching(expr(i))) {
        os_ << lp << "fe_c" << i << "[fe_r] = " << t_[i] << ";\n";
        fresh[i] = true;
      }
    }
    const std::string b =
        store_pass ? store("out[fe_row * fe_row_len + fe_j]", t_[k_.root]) + "\n" : body(t_);
    os_ << lp << b << (cached_ ? in_ + "  }\n" : "") << in_ << "}\n";
  }

  std::ostringstream& os_;
  const Kernel& k_;
  const Gen& g_;
  const RowPhases phases_;
  const size_t rank_, outer_, n_;
  size_t last_ = 0;
  std::vector<std::string> in_names_, t_;
  std::vector<bool> vec_load_;
  std::vector<bool> hoisted_;  // row-invariant values computed in this variant
  std::vector<bool> have_;     // cached variant: values kept in registers by an earlier pass
  int V_ = 1, R_ = 1;
  bool cached_ = true;
  bool first_pass_ = true;  // the cached variant's first pass prefetches (vector_pass)
  std::string xl_;
  const std::string in_ = "      ";
};

// A column reduction (codegen/row_analysis.h, column_reduce: channels-last global pooling, the
// squeeze-excite mean): rows are channels and a row runs over pixels, so a block per row reads
// one element per 32-byte sector. Instead a block takes C neighbouring rows (fe_col_count: 16, or
// fewer when there are too few rows to give every block of the grid its own), thread t row t % C
// and every (blockDim.x / C)-th element of it from t / C on: a warp's load instruction reads C
// contiguous elements at 32 / C positions of the rows. The partial sums meet in fe_col_reduce
// (warp shuffles, then shared memory); the block's first C threads store. Rows past the end
// compute on the last row and do not store, so every thread reaches every barrier. Any block of
// whole warps and any grid is valid.
constexpr int kColumns = 16;
constexpr int kColumnLoads = 8;

void emit_column_row(std::ostringstream& os, const Kernel& k, const Gen& g, const RowPhases& ph,
                     int reduce) {
  std::vector<std::string> in_names = emit_prologue(os, k, g, column_block_max());
  const size_t rank = k.shape.size(), outer = k.outer_rank(), n = k.body.size();
  std::vector<std::string> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = "t" + std::to_string(i);
  const ScalarExpr& r = k.body.at(reduce);
  const std::string ty = *g.em.type(r.dtype);
  std::vector<bool> defined(n, false);
  // Emits what `need` marks (but kReduces), varying or row-invariant, in argument order.
  auto defs = [&](const std::vector<bool>& need, bool varying, const std::string& indent) {
    for (size_t i = 0; i < n; ++i)
      if (need[i] && !defined[i] && ph.varies[i] == varying &&
          k.body.at(static_cast<int>(i)).kind != ScalarKind::kReduce) {
        os << indent << g.em.def(k, i, t, in_names, g.ident);
        defined[i] = !varying;
      }
  };
  os << "  const int64_t fe_rows = 1";
  for (size_t d = 0; d < outer; ++d) os << " * d" << d;
  os << ";\n  const int64_t fe_row_len = 1";
  for (size_t d = outer; d < rank; ++d) os << " * d" << d;
  os << ";\n  const int fe_cols = fe_col_count(fe_rows);\n"
     << "  const int fe_col = (int)threadIdx.x % fe_cols, fe_tid = (int)threadIdx.x / fe_cols, "
        "fe_nthr = (int)blockDim.x / fe_cols;\n"
     << "  const bool fe_small_rows = fe_rows + (int64_t)gridDim.x * fe_cols < 0xffffffffLL;\n"
     << "  const bool fe_small_row = fe_row_len + fe_nthr < 0xffffffffLL;\n"
     << "  for (int64_t fe_row0 = (int64_t)blockIdx.x * fe_cols; fe_row0 < fe_rows;\n"
     << "       fe_row0 += (int64_t)gridDim.x * fe_cols) {\n"
     << "    const bool fe_ok = fe_row0 + fe_col < fe_rows;\n"
     << "    const int64_t fe_row = fe_ok ? fe_row0 + fe_col : fe_rows - 1;\n";
  emit_split(os, "    ", "fe_row", 0, outer, "fe_small_rows");
  const std::vector<bool> need = ph.needed(reduce, true);
  defs(need, false, "    ");
  // kColumnLoads elements a thread at once, their loads issued before the sums (a loop whose
  // trip count the compiler cannot see would test it between loads: one load in flight), then
  // the rest one by one. Each thread still sums its elements in row order.
  const std::string loads = std::to_string(kColumnLoads);
  // The varying values of the row element at offset `j` (its dims' indices first).
  auto element = [&](const std::string& j, const std::string& indent) {
    emit_split(os, indent, j, outer, rank, "fe_small_row");
    defs(need, true, indent);
  };
  os << "    " << ty << " fe_acc = 0;\n"
     << "    int64_t fe_j = fe_tid;\n"
     << "    for (; fe_j + " << kColumnLoads - 1
     << " * (int64_t)fe_nthr < fe_row_len; fe_j += " << loads << " * (int64_t)fe_nthr) {\n"
     << "      " << ty << " fe_v[" << loads << "];\n"
     << "#pragma unroll\n"
     << "      for (int fe_u = 0; fe_u < " << loads << "; ++fe_u) {\n"
     << "        const int64_t fe_jj = fe_j + (int64_t)fe_u * fe_nthr;\n";
  element("fe_jj", "        ");
  os << "        fe_v[fe_u] = " << t[r.args[0]] << ";\n      }\n"
     << "#pragma unroll\n"
     << "      for (int fe_u = 0; fe_u < " << loads << "; ++fe_u) fe_acc += fe_v[fe_u];\n    }\n"
     << "    for (; fe_j < fe_row_len; fe_j += fe_nthr) {\n";
  element("fe_j", "      ");
  os << "      fe_acc += " << t[r.args[0]] << ";\n    }\n"
     << "    const " << ty << " " << t[reduce] << " = fe_col_reduce(fe_acc, fe_cols);\n"
     << "    if (fe_tid == 0 && fe_ok) {\n";
  defs(ph.needed(k.root, false), false, "      ");
  os << "      " << store("out[fe_row]", t[k.root]) << "\n    }\n  }\n}\n";
}

void emit_row(std::ostringstream& os, const Kernel& k, const Gen& g) {
  const RowPhases ph(k);
  if (const int reduce = column_reduce(k, ph); reduce >= 0)
    return emit_column_row(os, k, g, ph, reduce);
  RowEmitter(os, k, g).emit();
}

// Elements of a multi-tensor kernel's work unit: a multiple of every vector width (8), so units
// start on vector boundaries; 4096 is 4 iterations of a 256-thread block at 4 f32 lanes.
constexpr int64_t kUnitElements = 4096;

// A multi-tensor kernel (Kernel::segments): each segment is a device function over a range of
// its elements (segments with the same text are one function), and the launched kernel splits
// the segments into units of kUnitElements; block b takes units b, b + grid, ... (any grid covers
// them all) and finds a unit's segment by binary search over the segments' first units. Its
// parameters are every segment's buffers (inputs, then outputs, in segment order) and the
// symbols; fuse_multi_tensor keeps them under the 4 KB parameter limit.
Status emit_multi_tensor(std::ostringstream& os, const Kernel& k, const Gen& g) {
  Gen sg = g;
  sg.segment = true;
  std::map<std::string, std::string> fn_of_text;  // a segment's text (its name blanked) -> function
  std::vector<std::string> fns;
  std::vector<int64_t> first_unit{0};
  for (const Kernel& seg : k.segments) {
    if (!seg.extra_outputs.empty() || seg.is_row())
      return err("cuda: multi-tensor kernel ", k.name, ": segment ", seg.name,
                 " is not a single-output pointwise kernel");
    Kernel s = seg;
    s.writes_input = s.writes_input || k.writes_input;
    std::ostringstream text;
    emit_pointwise(text, s, sg);
    // The key skips the leading comment (its source nodes) and blanks the name.
    std::string key = text.str();
    key.erase(0, key.find("\n__device__"));
    for (size_t at = key.find(seg.name); at != std::string::npos; at = key.find(seg.name, at))
      key.replace(at, seg.name.size(), "@");
    auto [it, fresh] = fn_of_text.emplace(key, seg.name);
    if (fresh) os << text.str();
    fns.push_back(it->second);
    int64_t n = 1;
    for (const Dim& d : seg.shape) n *= *d.value();
    first_unit.push_back(first_unit.back() + (n + kUnitElements - 1) / kUnitElements);
  }
  os << "\n// " << k.name << ": " << k.segments.size() << " segments (" << fn_of_text.size()
     << " distinct), " << first_unit.back() << " units of " << kUnitElements
     << " elements\n__device__ const long long " << k.name << "_units[] = {";
  for (size_t i = 0; i < first_unit.size(); ++i) os << (i ? ", " : "") << first_unit[i];
  os << "};\nextern \"C\" __global__ void __launch_bounds__(1024) " << k.name << "(";
  for (size_t i = 0; i < k.input_buffers.size(); ++i)
    os << "const " << *g.em.type(g.lg.buffers[k.input_buffers[i]].dtype) << "* in" << i << ", ";
  for (size_t j = 0; j < k.segments.size(); ++j)
    os << *g.em.type(k.segments[j].out_dtype) << "* out" << j
       << (j + 1 < k.segments.size() ? ", " : "");
  for (size_t s = 0; s < g.lg.symbols.size(); ++s) os << ", int64_t s" << s;
  os << ") {\n  for (long long fe_u = blockIdx.x; fe_u < " << first_unit.back()
     << "; fe_u += gridDim.x) {\n    int fe_a = 0, fe_b = " << k.segments.size() << ";\n"
     << "    while (fe_b - fe_a > 1) {\n      const int fe_m = (fe_a + fe_b) / 2;\n"
     << "      if (" << k.name << "_units[fe_m] <= fe_u) fe_a = fe_m; else fe_b = fe_m;\n    }\n"
     << "    const int64_t fe_lo = (fe_u - " << k.name << "_units[fe_a]) * " << kUnitElements
     << ";\n    switch (fe_a) {\n";
  size_t in_at = 0;
  for (size_t j = 0; j < k.segments.size(); ++j) {
    const Kernel& seg = k.segments[j];
    os << "      case " << j << ": " << fns[j] << "(";
    for (size_t i = 0; i < seg.input_buffers.size(); ++i) os << "in" << in_at + i << ", ";
    os << "out" << j;
    for (size_t s = 0; s < g.lg.symbols.size(); ++s) os << ", s" << s;
    os << ", fe_lo, fe_lo + " << kUnitElements << "); break;\n";
    in_at += seg.input_buffers.size();
  }
  os << "    }\n  }\n}\n";
  return Status::ok();
}

int env_int(const char* name, int def, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return def;
  int x = std::atoi(v);
  return x < lo || x > hi ? def : x;
}

}  // namespace

// 8 elements per thread and blocks of at most 512 threads (rows up to 4096 elements stay in
// registers, as with 4 x 1024 before): on an H200, f32 rows of 4096 went from 66% / 73% to 72% /
// 89% of copy bandwidth (softmax / LayerNorm, scripts/gpu/micro_bench.sh; session 17's sweep of
// 4/8/16 x 256/512/1024 in BENCHMARKS.md), and the zoo's models did not move (within 0.5%).
int row_cache() {
  static const int v = env_int("FERRITE_CUDA_ROW_CACHE", 8, 1, 64);
  return v;
}
int row_block_max() {
  static const int v = env_int("FERRITE_CUDA_ROW_BLOCK", 512, 32, 1024) / 32 * 32;
  return v;
}

int column_rows() {
  return kColumns;
}
int column_block_max() {
  return 1024;
}

ScalarSpelling CudaDialect::spelling() const {
  return cuda_spelling();
}

ScalarSpelling cuda_spelling() {
  ScalarSpelling s;
  s.math_prefix = "";
  s.restrict_keyword = "__restrict__";
  return s;
}

Expected<std::string> CudaDialect::generate(const LoweredGraph& lg,
                                            const DeviceProperties& props) const {
  (void)props;
  std::ostringstream os;
  os << kPrelude << scalar_helpers_source();
  Gen g{lg, ScalarEmitter(spelling()), symbol_ident(lg)};
  for (const Step& s : lg.steps) {
    if (s.kind != Step::Kind::kKernel) continue;
    const Kernel& k = s.kernel;
    if (!g.em.type(k.out_dtype))
      return err("cuda: kernel ", k.name, " stores ", dtype_name(k.out_dtype),
                 ", which the cuda dialect cannot generate");
    for (int b : k.input_buffers)
      if (!g.em.type(lg.buffers[b].dtype))
        return err("cuda: kernel ", k.name, " reads ", dtype_name(lg.buffers[b].dtype),
                   ", which the cuda dialect cannot generate");
    if (!k.segments.empty())
      FERRITE_RETURN_IF_ERROR(emit_multi_tensor(os, k, g));
    else if (k.is_row())
      emit_row(os, k, g);
    else
      emit_pointwise(os, k, g);
  }
  return os.str();
}

const char* cuda_prelude_source() {
  return kPrelude;
}

std::string cuda_activation_source() {
  std::string s =
      "// Epilogue activations, one case per row of the scalar-function table (act = 1 + row).\n"
      "__device__ __forceinline__ float fe_act(float v, int act, float p0, float p1) {\n"
      "  switch (act) {\n";
  // FE_ACT_<NAME>: a kernel specialised on one activation passes the constant, so the switch
  // folds away.
  for (const ScalarFunction& f : scalar_functions()) {
    if (!f.epilogue) continue;
    std::string name = f.epilogue;
    for (char& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    s = "#define FE_ACT_" + name + " " + std::to_string(f.index() + 1) + "\n" + s;
  }
  for (const ScalarFunction& f : scalar_functions()) {
    if (!f.epilogue) continue;
    SpellContext c;
    c.a = {"v"};
    c.p = {"p0", "p1"};
    c.T = "float";
    c.math_prefix = cuda_spelling().math_prefix;
    s += "    case " + std::to_string(f.index() + 1) + ": return " + f.spell(c) + ";  // " +
         f.epilogue + "\n";
  }
  return s + "    default: return v;\n  }\n}\n";
}

}  // namespace ferrite::cuda
