// Tolerances, the known-unsupported list and output comparison.
#include <cmath>
#include <fstream>
#include <map>

#include "cts/cts.h"

namespace ferrite::cts {

namespace {

// Per-op looser tolerances (a factor on the dtype default), each with the reason a correct device
// can differ from the oracle by more than rounding of the last operation.
struct OpTolerance {
  double factor;
  const char* why;
};
const std::map<std::string, OpTolerance>& op_tolerances() {
  static const std::map<std::string, OpTolerance> t = {
      // Vectorised exp/log/tanh/erf approximations (a few ulp) instead of libm; composite
      // activations chain two of them.
      {"Exp", {4, "vector math exp is a few ulp from libm"}},
      {"Log", {4, "vector math log is a few ulp from libm"}},
      {"Tanh", {4, "vector math tanh"}},
      {"Sigmoid", {4, "1/(1+exp(-x)) with an approximate exp"}},
      {"Erf", {4, "polynomial erf"}},
      {"Gelu", {4, "erf or tanh approximation inside"}},
      {"Mish", {8, "tanh(softplus(x)): two transcendental functions"}},
      {"Softplus", {4, "log1p(exp(x))"}},
      {"Elu", {4, "expm1"}},
      {"Selu", {4, "expm1"}},
      {"Celu", {4, "expm1"}},
      {"Pow", {8, "pow via exp(b*log(a)) amplifies the log error by b"}},
      {"Tan", {8, "tan near pi/2 has a large derivative"}},
      {"Sinh", {4, "exp-based"}},
      {"Cosh", {4, "exp-based"}},
      {"Asinh", {4, "log-based"}},
      {"Acosh", {4, "log-based"}},
      {"Atanh", {4, "log-based"}},
      {"Sin", {4, "vector math sin"}},
      {"Cos", {4, "vector math cos"}},
      // Accumulations: the device may sum in another order (blocked GEMM, tree reductions).
      {"MatMul", {4, "blocked GEMM summation order"}},
      {"Gemm", {4, "blocked GEMM summation order"}},
      {"Einsum", {4, "contraction order"}},
      {"ferrite.FusedMatMul", {4, "blocked GEMM summation order"}},
      {"ferrite.Attention", {8, "two GEMMs and a softmax, each reordered"}},
      {"Conv", {4, "im2col/Winograd/direct convolution summation order"}},
      {"ConvTranspose", {4, "summation order"}},
      {"ferrite.ConvGradWeight", {4, "summation order (a reduction over batch and positions)"}},
      {"DeformConv", {4, "bilinear sampling then GEMM"}},
      {"ReduceSum", {4, "tree or vectorised summation"}},
      {"ReduceMean", {4, "tree or vectorised summation"}},
      {"ReduceL1", {4, "summation order"}},
      {"ReduceL2", {4, "summation order"}},
      {"ReduceSumSquare", {4, "summation order"}},
      {"ReduceLogSum", {4, "summation order then log"}},
      {"ReduceLogSumExp", {4, "summation order, exp and log"}},
      {"ReduceProd", {4, "product order"}},
      {"Softmax", {4, "exp and a reordered sum"}},
      {"LogSoftmax", {4, "exp, log and a reordered sum"}},
      {"LayerNormalization", {4, "mean/variance reductions (one- or two-pass)"}},
      {"GroupNormalization", {4, "mean/variance reductions"}},
      {"InstanceNormalization", {4, "mean/variance reductions"}},
      {"MeanVarianceNormalization", {4, "mean/variance reductions"}},
      {"BatchNormalization", {4, "folded into scale/shift: a*x+b instead of (x-m)/sqrt(v+e)*s+b"}},
      {"BatchNormalization@13", {4, "folded into scale/shift"}},
      {"BatchNormalization@14", {4, "folded into scale/shift"}},
      {"LpNormalization", {4, "reduction order"}},
      {"LRN", {4, "window sum and pow"}},
      {"CumSum", {4, "scan order"}},
      {"AveragePool", {4, "window sum order"}},
      {"LpPool", {4, "window sum, pow and root"}},
      {"GlobalAveragePool", {4, "summation order"}},
      {"GlobalLpPool", {4, "summation order"}},
      {"Det", {20, "LU with pivoting: error grows with the condition number"}},
      {"Resize", {4, "interpolation weights computed in another order"}},
      {"Mean", {4, "sum then divide vs running mean"}},
      {"fusion", {8, "multi-op patterns: fused kernels reorder every reduction and GEMM"}},
  };
  return t;
}

}  // namespace

Tolerance tolerance_for(DType t, const std::string& group) {
  Tolerance tol;
  switch (t) {
    case DType::kF32:
      tol = {1e-5, 1e-4};
      break;
    case DType::kF64:
      tol = {1e-12, 1e-10};
      break;
    // Both sides round to 16 bits: one or two units in the last place (2^-10 for f16).
    case DType::kF16:
      tol = {2e-3, 2e-3};
      break;
    case DType::kBF16:
      tol = {1.6e-2, 1.6e-2};
      break;
    default:
      return {0, 0};  // integers and bool: exact
  }
  auto it = op_tolerances().find(group);
  if (it != op_tolerances().end()) {
    tol.atol *= it->second.factor;
    tol.rtol *= it->second.factor;
  }
  return tol;
}

std::string tolerance_note(const std::string& group) {
  auto it = op_tolerances().find(group);
  return it == op_tolerances().end() ? "" : str_cat("x", it->second.factor, ": ", it->second.why);
}

bool glob_match(const std::string& p, const std::string& s) {
  // Iterative wildcard matching with one backtrack point (no recursion).
  size_t pi = 0, si = 0, star = std::string::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == s[si])) {
      ++pi, ++si;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = si;
    } else if (star != std::string::npos) {
      pi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

Expected<std::vector<KnownEntry>> read_known_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return err("cannot read known-unsupported list '", path, "'");
  std::vector<KnownEntry> out;
  std::string line;
  int lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    size_t e = line.find_first_of(" \t", b);
    KnownEntry k;
    k.pattern = line.substr(b, e == std::string::npos ? std::string::npos : e - b);
    if (e != std::string::npos) {
      size_t r = line.find_first_not_of(" \t", e);
      if (r != std::string::npos) k.reason = line.substr(r);
      while (!k.reason.empty() && (k.reason.back() == ' ' || k.reason.back() == '\r'))
        k.reason.pop_back();
    }
    if (k.reason.empty())
      return err(path, ":", lineno, ": entry '", k.pattern, "' needs a reason after the pattern");
    out.push_back(std::move(k));
  }
  return out;
}

const KnownEntry* match_known(const std::vector<KnownEntry>& known, const std::string& name) {
  for (const auto& k : known)
    if (glob_match(k.pattern, name)) return &k;
  return nullptr;
}

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kPass:
      return "pass";
    case Outcome::kFail:
      return "FAIL";
    case Outcome::kUnsupported:
      return "unsupported";
    case Outcome::kError:
      return "error";
    case Outcome::kSkipped:
      return "skipped";
  }
  return "?";
}

bool compare_output(const Tensor& actual, const Tensor& expected, const Tolerance& tol,
                    CaseResult& r) {
  if (actual.dtype() != expected.dtype() || actual.dims() != expected.dims()) {
    r.detail = str_cat("got ", actual.type_string(), ", reference ", expected.type_string());
    return false;
  }
  double scale = 1;
  for (int64_t i = 0; i < expected.numel(); ++i) {
    double e = expected.double_at(i);
    if (std::isfinite(e)) scale = std::max(scale, std::fabs(e));
  }
  bool ok = true;
  for (int64_t i = 0; i < expected.numel(); ++i) {
    double a = actual.double_at(i), e = expected.double_at(i);
    bool bad;
    double abs_err = 0, rel_err = 0;
    if (std::isnan(e) || std::isnan(a)) {
      bad = std::isnan(e) != std::isnan(a);  // NaN positions must match
    } else if (std::isinf(e) || std::isinf(a)) {
      bad = a != e;
    } else {
      abs_err = std::fabs(a - e);
      rel_err = abs_err / std::max(std::fabs(e), 1e-30);
      bad = abs_err > tol.atol * scale + tol.rtol * std::fabs(e);
    }
    if (!std::isnan(abs_err) && abs_err > 0) {
      r.max_abs_error = std::max(r.max_abs_error, abs_err);
      r.max_rel_error = std::max(r.max_rel_error, rel_err);
    }
    if (!bad) continue;
    if (abs_err == 0) r.max_abs_error = r.max_rel_error = INFINITY;  // NaN or inf mismatch
    if (ok) {
      ok = false;
      r.first_bad_index = i;
      r.detail = str_cat("first mismatch at flat index ", i, ": got ", a, ", reference ", e);
    }
  }
  if (!ok)
    r.detail += str_cat("; max abs error ", r.max_abs_error, ", max rel error ", r.max_rel_error,
                        " (atol ", tol.atol, " x scale ", scale, ", rtol ", tol.rtol, ")");
  return ok;
}

}  // namespace ferrite::cts
