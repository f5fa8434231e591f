// Symbolic integer expressions for tensor dimensions ("batch", "batch*12", "seq-1", "(h+1)//2").
//
// Canonical form: a polynomial with integer coefficients over atoms. An atom is a symbol or an
// opaque floor-division / modulo / max / min term whose operands are themselves expressions.
// Equal expressions have equal canonical forms for the polynomial part, so `a+b == b+a` and
// `2*(x+1) == 2*x+2` compare equal.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ferrite {

class SymExpr;
using SymBindings = std::unordered_map<std::string, int64_t>;

struct SymAtom;

class SymExpr {
 public:
  SymExpr() = default;        // 0
  SymExpr(int64_t constant);  // NOLINT: implicit from integers on purpose
  static SymExpr symbol(const std::string& name);

  bool is_constant() const;
  std::optional<int64_t> constant() const;  // value when is_constant()
  bool is_symbol() const;                   // a bare symbol with coefficient 1

  SymExpr operator+(const SymExpr& o) const;
  SymExpr operator-(const SymExpr& o) const;
  SymExpr operator*(const SymExpr& o) const;
  SymExpr operator-() const;
  // Floor division and modulo (Python semantics); simplify when exact. `o` must be nonzero when
  // constant.
  SymExpr floordiv(const SymExpr& o) const;
  SymExpr ceildiv(const SymExpr& o) const;
  SymExpr mod(const SymExpr& o) const;
  static SymExpr max(const SymExpr& a, const SymExpr& b);
  static SymExpr min(const SymExpr& a, const SymExpr& b);

  bool operator==(const SymExpr& o) const { return terms_ == o.terms_; }
  bool operator!=(const SymExpr& o) const { return !(*this == o); }

  // Evaluates with all symbols bound; nullopt if a symbol is unbound or a division by zero occurs.
  std::optional<int64_t> evaluate(const SymBindings& bindings) const;
  // Names of all symbols that occur (recursively).
  void collect_symbols(std::vector<std::string>& out) const;
  // Whether the value depends on symbol `name` (only terms that are present count: x - x does not
  // use x, although collect_symbols may still list it).
  bool uses(const std::string& name) const;
  std::string to_string() const;
  // This expression with symbol `name` replaced by `value`, rebuilt through the operators above,
  // so that a SymRangeScope in effect simplifies the divisions, modulos, max and min it rebuilds
  // (`(2*q + 1) % 2` is 1 once q has a range).
  SymExpr substitute(const std::string& name, const SymExpr& value) const;
  // Calls `fn` on every atom that occurs in a term, then on the atoms of its operands.
  void for_each_atom(const std::function<void(const SymAtom&)>& fn) const;
  // [lo, hi] of the value where it is known: constants, symbols of the innermost SymRangeScope
  // (in [0, extent)), x % k and x // k for a constant k > 0, max and min of known ranges, and
  // sums of such terms times constants. nullopt otherwise (products of atoms, unbound symbols).
  std::optional<std::pair<int64_t, int64_t>> range() const;
  // C/C++ source for the expression over int64_t; symbols are renamed by `ident`, and // % max
  // min become calls to fe_floordiv, fe_mod, fe_max, fe_min (defined by the code generator).
  std::string to_c_code(const std::function<std::string(const std::string&)>& ident) const;

  // A monomial: sorted atom keys with multiplicity.
  using Monomial = std::vector<std::string>;

 private:
  friend struct SymAtom;
  // Monomial -> coefficient; the empty monomial is the constant term. No zero coefficients.
  std::map<Monomial, int64_t> terms_;
  // Atom definitions by key, shared (atoms are immutable).
  std::map<std::string, std::shared_ptr<const SymAtom>> atoms_;

  static SymExpr from_atom(std::shared_ptr<const SymAtom> atom);
  void add_term(const Monomial& m, int64_t c);
  // k*(a // b)*b + k*(a % b) == k*a for a constant b: folded so that a Reshape that splits and
  // re-merges a dim indexes with the plain linear index again.
  void fold_div_mod();
};

struct SymAtom {
  enum class Kind { kSymbol, kFloorDiv, kMod, kMax, kMin } kind;
  std::string name;  // for symbols
  SymExpr a, b;
  std::string key() const;
};

}  // namespace ferrite
