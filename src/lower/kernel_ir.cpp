#include "lower/kernel_ir.h"

#include <sstream>

namespace ferrite {

std::string loop_var(size_t i) {
  return "__loop_" + std::to_string(i);
}

bool is_loop_var(const std::string& symbol, size_t* index) {
  static const std::string prefix = "__loop_";
  if (symbol.rfind(prefix, 0) != 0) return false;
  if (index) *index = std::stoul(symbol.substr(prefix.size()));
  return true;
}

int KernelBody::add(ScalarExpr e) {
  std::string key;
  auto put = [&key](const void* p, size_t n) { key.append(static_cast<const char*>(p), n); };
  put(&e.kind, sizeof e.kind);
  put(&e.dtype, sizeof e.dtype);
  put(&e.input, sizeof e.input);
  put(&e.value, sizeof e.value);  // bitwise: -0.0 and 0.0 stay distinct, NaN matches NaN
  for (int a : e.args) put(&a, sizeof a);
  size_t nparams = e.params.size();
  put(&nparams, sizeof nparams);
  for (double p : e.params) put(&p, sizeof p);
  key += '|' + e.fn + '|' + e.address.to_string();
  auto [it, inserted] = index_.emplace(std::move(key), static_cast<int>(exprs_.size()));
  if (inserted) exprs_.push_back(std::move(e));
  return it->second;
}

KernelBody KernelBody::map_addresses(const std::function<SymExpr(const SymExpr&)>& f) const {
  KernelBody r;
  r.exprs_ = exprs_;  // not re-added: merging equal results would renumber the expressions
  for (ScalarExpr& e : r.exprs_)
    if (e.kind == ScalarKind::kLoad || e.kind == ScalarKind::kSymbol) e.address = f(e.address);
  return r;
}

int KernelBody::load(int input, DType dtype, SymExpr address) {
  ScalarExpr e{ScalarKind::kLoad, dtype};
  e.input = input;
  e.address = std::move(address);
  return add(std::move(e));
}
int KernelBody::constant(DType dtype, double value) {
  ScalarExpr e{ScalarKind::kConst, dtype};
  e.value = value;
  return add(std::move(e));
}
int KernelBody::symbol(DType dtype, SymExpr value) {
  ScalarExpr e{ScalarKind::kSymbol, dtype};
  e.address = std::move(value);
  return add(std::move(e));
}
int KernelBody::unary(const std::string& fn, int a, DType dtype, std::vector<double> params) {
  ScalarExpr e{ScalarKind::kUnary, dtype, fn, {a}};
  e.params = std::move(params);
  return add(std::move(e));
}
int KernelBody::binary(const std::string& fn, int a, int b, DType dtype) {
  return add(ScalarExpr{ScalarKind::kBinary, dtype, fn, {a, b}});
}
int KernelBody::select(int cond, int a, int b) {
  return add(ScalarExpr{ScalarKind::kSelect, exprs_[a].dtype, "select", {cond, a, b}});
}
int KernelBody::cast(int a, DType to) {
  if (exprs_[a].dtype == to) return a;
  return add(ScalarExpr{ScalarKind::kCast, to, "cast", {a}});
}

int KernelBody::reduce(const std::string& fn, int a) {
  return add(ScalarExpr{ScalarKind::kReduce, exprs_[a].dtype, fn, {a}});
}

std::string print_kernel(const Kernel& k) {
  std::ostringstream os;
  if (!k.segments.empty()) {
    os << "kernel " << k.name << " multi-tensor [" << k.shape[0].to_string() << " rows], "
       << k.segments.size() << " segments:\n";
    for (const Kernel& s : k.segments) os << "  segment " << print_kernel(s);
    return os.str();
  }
  os << "kernel " << k.name << (k.is_row() ? " row [" : " pointwise [");
  for (size_t i = 0; i < k.shape.size(); ++i) {
    if (k.is_row() && i == k.outer_rank())
      os << (i ? " | " : "| ");
    else if (i)
      os << ",";
    os << k.shape[i].to_string();
  }
  os << "]" << (k.is_row() ? (k.per_row ? " per-row" : " per-element") : "");
  os << " -> buf" << k.output_buffer << ":" << dtype_name(k.out_dtype);
  for (const auto& x : k.extra_outputs) os << ", buf" << x.buffer << ":" << dtype_name(x.dtype);
  os << "  # ";
  for (size_t i = 0; i < k.source_nodes.size(); ++i) os << (i ? ", " : "") << k.source_nodes[i];
  os << "\n";
  for (size_t i = 0; i < k.body.size(); ++i) {
    const ScalarExpr& e = k.body.at(static_cast<int>(i));
    os << "  t" << i << ": " << dtype_name(e.dtype) << " = ";
    switch (e.kind) {
      case ScalarKind::kLoad:
        os << "load buf" << k.input_buffers[e.input] << "[" << e.address.to_string() << "]";
        break;
      case ScalarKind::kConst:
        os << e.value;
        break;
      case ScalarKind::kSymbol:
        os << "sym(" << e.address.to_string() << ")";
        break;
      default:
        os << (e.kind == ScalarKind::kReduce ? "reduce_" : "") << e.fn << "(";
        for (size_t a = 0; a < e.args.size(); ++a) os << (a ? ", " : "") << "t" << e.args[a];
        for (double p : e.params) os << ", " << p;
        os << ")";
    }
    os << (static_cast<int>(i) == k.root ? "  <- stored" : "");
    for (const auto& x : k.extra_outputs)
      if (x.root == static_cast<int>(i)) os << "  <- stored buf" << x.buffer;
    os << "\n";
  }
  return os.str();
}

}  // namespace ferrite
