#include "ir/shape.h"

#include "support/status.h"

namespace ferrite {

Shape Shape::of(const std::vector<int64_t>& dims) {
  std::vector<Dim> d;
  d.reserve(dims.size());
  for (int64_t v : dims) d.emplace_back(v);
  return Shape(std::move(d));
}

bool Shape::is_static() const {
  if (!rank_known_) return false;
  for (const auto& d : dims_)
    if (!d.is_static()) return false;
  return true;
}

std::optional<std::vector<int64_t>> Shape::static_dims() const {
  if (!is_static()) return std::nullopt;
  std::vector<int64_t> out;
  for (const auto& d : dims_) out.push_back(*d.value());
  return out;
}

Dim Shape::numel() const {
  if (!rank_known_) return Dim();
  Dim n(int64_t{1});
  for (const auto& d : dims_) n = n * d;
  return n;
}

std::string Shape::to_string() const {
  if (!rank_known_) return "[*]";
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ",";
    s += dims_[i].to_string();
  }
  return s + "]";
}

const char* value_kind_prefix(ValueKind k) {
  switch (k) {
    case ValueKind::kTensor:
      return "";
    case ValueKind::kSequence:
      return "seq(";
    case ValueKind::kOptionalTensor:
      return "optional(";
    case ValueKind::kOptionalSequence:
      return "optional(seq(";
  }
  return "";
}

TensorType merge_types(const TensorType& a, const TensorType& b) {
  if (!a.shape.rank_known() || !b.shape.rank_known() || a.shape.rank() != b.shape.rank())
    return {a.dtype, Shape::unknown_rank(), a.kind};
  std::vector<Dim> dims;
  for (size_t d = 0; d < a.shape.rank(); ++d)
    dims.push_back(a.shape[d] == b.shape[d] ? a.shape[d] : Dim::unknown());
  return {a.dtype, Shape(std::move(dims)), a.kind};
}

std::string TensorType::to_string() const {
  std::string t = std::string(dtype_name(dtype)) + shape.to_string();
  if (kind == ValueKind::kTensor) return t;
  return value_kind_prefix(kind) + t + (kind == ValueKind::kOptionalSequence ? "))" : ")");
}

namespace {
// True when m is min(x, c) for a bare symbol x and a constant c >= 1 (what Slice infers for
// t[:x] of a static axis c). Broadcasting x with such an m gives x for every valid input: either
// the two are equal, or one of them is 1, and min(x, c) = 1 with c >= 1 means x = 1 or c = 1.
bool is_min_of(const Dim& m, const Dim& x) {
  if (!m.is_known() || !x.is_known() || !x.expr().is_symbol()) return false;
  std::vector<std::string> xs, ms;
  x.expr().collect_symbols(xs);
  m.expr().collect_symbols(ms);
  if (ms.size() != 1 || ms[0] != xs[0]) return false;
  auto c = m.expr().evaluate({{xs[0], int64_t{1} << 40}});
  return c && *c >= 1 && SymExpr::min(x.expr(), SymExpr(*c)) == m.expr();
}
}  // namespace

namespace {
thread_local std::vector<ShapeAssumption>* g_assumptions = nullptr;
thread_local std::string g_assumption_label;

void note_assumption(const Dim& symbolic, int64_t value) {
  if (!g_assumptions || !symbolic.is_known()) return;
  for (const auto& a : *g_assumptions)
    if (a.value == value && a.expr == symbolic.expr()) return;
  g_assumptions->push_back({symbolic.expr(), value, g_assumption_label});
}
}  // namespace

ShapeAssumptionScope::ShapeAssumptionScope(std::vector<ShapeAssumption>* sink)
    : prev_(g_assumptions), prev_label_(g_assumption_label) {
  g_assumptions = sink;
}
ShapeAssumptionScope::~ShapeAssumptionScope() {
  g_assumptions = prev_;
  g_assumption_label = prev_label_;
}
void ShapeAssumptionScope::set_label(std::string label) { g_assumption_label = std::move(label); }

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b, std::string* error) {
  if (!a.rank_known() || !b.rank_known()) return Shape::unknown_rank();
  size_t rank = std::max(a.rank(), b.rank());
  std::vector<Dim> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim* da = i < rank - a.rank() ? nullptr : &a[i - (rank - a.rank())];
    const Dim* db = i < rank - b.rank() ? nullptr : &b[i - (rank - b.rank())];
    if (!da) { out[i] = *db; continue; }
    if (!db) { out[i] = *da; continue; }
    if (da->value() == 1) { out[i] = *db; continue; }
    if (db->value() == 1) { out[i] = *da; continue; }
    if (*da == *db) { out[i] = *da; continue; }
    if (da->is_static() && db->is_static()) {
      if (error)
        *error = str_cat("cannot broadcast ", a.to_string(), " with ", b.to_string(), " (dim ",
                         i, ": ", *da->value(), " vs ", *db->value(), ")");
      return std::nullopt;
    }
    // One side symbolic: the result equals the non-1 side, which we cannot tell statically
    // unless one side is a static non-1 value.
    if (da->is_static()) {
      out[i] = *da;
      note_assumption(*db, *da->value());
    } else if (db->is_static()) {
      out[i] = *db;
      note_assumption(*da, *db->value());
    } else if (is_min_of(*db, *da)) {
      out[i] = *da;
    } else if (is_min_of(*da, *db)) {
      out[i] = *db;
    } else {
      out[i] = Dim::unknown();
    }
  }
  return Shape(std::move(out));
}

}  // namespace ferrite
