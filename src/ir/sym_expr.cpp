#include "ir/sym_expr.h"

#include <algorithm>
#include <numeric>

#include "ir/sym_ranges.h"
#include "support/status.h"

namespace ferrite {

namespace {
// Coefficients come from untrusted model dims, so arithmetic on them wraps instead of being
// undefined; a wrapped dim can never match a real tensor, so the mismatch surfaces as an error.
int64_t wrap_add(int64_t a, int64_t b) {
  int64_t r;
  __builtin_add_overflow(a, b, &r);
  return r;
}
int64_t wrap_mul(int64_t a, int64_t b) {
  int64_t r;
  __builtin_mul_overflow(a, b, &r);
  return r;
}
int64_t wrap_neg(int64_t a) {
  return wrap_mul(a, -1);
}
// b != 0. INT64_MIN / -1 wraps to INT64_MIN.
int64_t floor_div(int64_t a, int64_t b) {
  if (b == -1) return wrap_neg(a);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}
int64_t floor_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}
bool divisible(int64_t a, int64_t b) {
  return b == -1 || a % b == 0;
}

thread_local const SymRangeScope* g_range_scope = nullptr;
}  // namespace

SymRangeScope::SymRangeScope(std::unordered_map<std::string, int64_t> extents)
    : extents_(std::move(extents)), outer_(g_range_scope) {
  g_range_scope = this;
}
SymRangeScope::~SymRangeScope() {
  g_range_scope = outer_;
}
std::optional<int64_t> SymRangeScope::extent(const std::string& symbol) {
  if (!g_range_scope) return std::nullopt;
  auto it = g_range_scope->extents_.find(symbol);
  if (it == g_range_scope->extents_.end()) return std::nullopt;
  return it->second;
}

SymExpr::SymExpr(int64_t constant) {
  if (constant != 0) terms_[{}] = constant;
}

SymExpr SymExpr::symbol(const std::string& name) {
  auto atom = std::make_shared<SymAtom>();
  atom->kind = SymAtom::Kind::kSymbol;
  atom->name = name;
  return from_atom(atom);
}

SymExpr SymExpr::from_atom(std::shared_ptr<const SymAtom> atom) {
  SymExpr e;
  std::string k = atom->key();
  e.atoms_[k] = atom;
  e.terms_[{k}] = 1;
  return e;
}

void SymExpr::add_term(const Monomial& m, int64_t c) {
  if (c == 0) return;
  auto [it, inserted] = terms_.emplace(m, c);
  if (!inserted) {
    it->second = wrap_add(it->second, c);
    if (it->second == 0) terms_.erase(it);
  }
}

bool SymExpr::is_constant() const {
  return terms_.empty() || (terms_.size() == 1 && terms_.begin()->first.empty());
}
std::optional<int64_t> SymExpr::constant() const {
  if (!is_constant()) return std::nullopt;
  return terms_.empty() ? 0 : terms_.begin()->second;
}
bool SymExpr::is_symbol() const {
  if (terms_.size() != 1) return false;
  const auto& [m, c] = *terms_.begin();
  return c == 1 && m.size() == 1 && atoms_.at(m[0])->kind == SymAtom::Kind::kSymbol;
}

SymExpr SymExpr::operator+(const SymExpr& o) const {
  SymExpr r = *this;
  for (const auto& [k, a] : o.atoms_) r.atoms_[k] = a;
  for (const auto& [m, c] : o.terms_) r.add_term(m, c);
  r.fold_div_mod();
  return r;
}
void SymExpr::fold_div_mod() {
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& [m, k] : terms_) {
      if (m.size() != 1) continue;
      const SymAtom& mod = *atoms_.at(m[0]);
      auto b = mod.b.constant();
      if (mod.kind != SymAtom::Kind::kMod || !b) continue;
      SymAtom div;
      div.kind = SymAtom::Kind::kFloorDiv;
      div.a = mod.a;
      div.b = mod.b;
      auto f = terms_.find(Monomial{div.key()});
      if (f == terms_.end() || f->second != wrap_mul(k, *b)) continue;
      const int64_t coeff = k;
      const SymExpr a = mod.a;
      terms_.erase(f);
      terms_.erase(Monomial{m});
      for (const auto& [key, atom] : a.atoms_) atoms_[key] = atom;
      for (const auto& [ma, ca] : a.terms_) add_term(ma, wrap_mul(ca, coeff));
      changed = true;
      break;
    }
  }
}
SymExpr SymExpr::operator-() const {
  SymExpr r = *this;
  for (auto& [m, c] : r.terms_) c = wrap_neg(c);
  return r;
}
SymExpr SymExpr::operator-(const SymExpr& o) const {
  return *this + (-o);
}
SymExpr SymExpr::operator*(const SymExpr& o) const {
  SymExpr r;
  r.atoms_ = atoms_;
  for (const auto& [k, a] : o.atoms_) r.atoms_[k] = a;
  for (const auto& [m1, c1] : terms_) {
    for (const auto& [m2, c2] : o.terms_) {
      Monomial m = m1;
      m.insert(m.end(), m2.begin(), m2.end());
      std::sort(m.begin(), m.end());
      r.add_term(m, wrap_mul(c1, c2));
    }
  }
  return r;
}

SymExpr SymExpr::floordiv(const SymExpr& o) const {
  auto a = constant(), b = o.constant();
  if (b && *b == 1) return *this;
  if (a && b && *b != 0) return SymExpr(floor_div(*a, *b));
  if (b && *b != 0) {
    // Exact when every coefficient is divisible by b.
    bool exact = true;
    for (const auto& [m, c] : terms_) exact = exact && divisible(c, *b);
    if (exact) {
      SymExpr r = *this;
      for (auto& [m, c] : r.terms_) c = floor_div(c, *b);
      return r;
    }
    if (g_range_scope) {
      // Within a SymRangeScope, this = b*q + r with r in [0, b) when the terms split so: q
      // collects the terms whose coefficient b divides (any atoms), r the others, each a
      // nonnegative coefficient times an atom of known range (a symbol of the scope, or x % k
      // for a constant k > 0) or a constant's remainder by b, their largest sum below b. Then this
      // // b is q (and mod() gets r as this - b*q).
      constexpr int64_t kLimit = int64_t{1} << 31;  // keeps every product below 2^62
      SymExpr q;
      q.atoms_ = atoms_;
      int64_t r_max = 0;
      bool split = *b > 1;
      for (const auto& [m, c] : terms_) {
        if (!split) break;
        if (divisible(c, *b)) {
          q.add_term(m, c / *b);
          continue;
        }
        if (m.empty()) {  // c = b * (c // b) + c % b: the remainder's part lies in [0, b)
          q.add_term(m, floor_div(c, *b));
          split = (r_max += floor_mod(c, *b)) < *b;
          continue;
        }
        std::optional<int64_t> top;  // the term's atom's largest value
        if (m.size() == 1) {
          const SymAtom& atom = *atoms_.at(m[0]);
          std::optional<int64_t> bound;  // the atom's values are in [0, bound)
          if (atom.kind == SymAtom::Kind::kSymbol) bound = SymRangeScope::extent(atom.name);
          if (atom.kind == SymAtom::Kind::kMod) bound = atom.b.constant();
          if (bound && *bound > 0 && *bound <= kLimit) top = *bound - 1;
        }
        split = top && c >= 0 && c <= kLimit && (r_max += c * *top) < *b;
      }
      if (split) return q;
    }
  }
  if (*this == o && !terms_.empty()) return SymExpr(1);
  if (!b && o.terms_.size() == 1 && !o.terms_.begin()->first.empty()) {
    // Exact division by a symbolic term (dims are sizes, so their symbols are positive): every
    // monomial holds the divisor's atoms and a multiple of its coefficient. `(batch*seq)//batch`
    // is `seq` (an exporter's `view(batch*seq) -> view(batch, -1)`).
    const auto& [om, oc] = *o.terms_.begin();
    SymExpr r;
    r.atoms_ = atoms_;
    bool exact = oc > 0;
    for (const std::string& key : om)
      exact = exact && o.atoms_.at(key)->kind == SymAtom::Kind::kSymbol;
    for (const auto& [m, c] : terms_) {
      if (!exact) break;
      Monomial rest = m;  // sorted: remove each divisor atom once
      for (const std::string& key : om) {
        auto it = std::find(rest.begin(), rest.end(), key);
        if (it == rest.end()) {
          exact = false;
          break;
        }
        rest.erase(it);
      }
      exact = exact && divisible(c, oc);
      if (exact) r.add_term(rest, c / oc);
    }
    if (exact) return r;
  }
  auto atom = std::make_shared<SymAtom>();
  atom->kind = SymAtom::Kind::kFloorDiv;
  atom->a = *this;
  atom->b = o;
  return from_atom(atom);
}
SymExpr SymExpr::ceildiv(const SymExpr& o) const {
  return -((-*this).floordiv(o));
}
SymExpr SymExpr::mod(const SymExpr& o) const {
  auto a = constant(), b = o.constant();
  if (a && b && *b != 0) return SymExpr(floor_mod(*a, *b));
  if (b && *b != 0) {
    bool exact = true;
    for (const auto& [m, c] : terms_) exact = exact && divisible(c, *b);
    if (exact) return SymExpr(0);
    if (g_range_scope) {  // the remainder of a quotient that floordiv split into digits
      SymExpr q = floordiv(o);
      SymAtom div;
      div.kind = SymAtom::Kind::kFloorDiv;
      div.a = *this;
      div.b = o;
      if (!q.terms_.count(Monomial{div.key()})) return *this - q * o;
    }
  }
  auto atom = std::make_shared<SymAtom>();
  atom->kind = SymAtom::Kind::kMod;
  atom->a = *this;
  atom->b = o;
  return from_atom(atom);
}
SymExpr SymExpr::max(const SymExpr& a, const SymExpr& b) {
  if (a == b) return a;
  auto ca = a.constant(), cb = b.constant();
  if (ca && cb) return SymExpr(std::max(*ca, *cb));
  // One operand never below the other (a clamp that a split loop variable makes dead).
  auto ra = a.range(), rb = b.range();
  if (ra && rb && ra->second <= rb->first) return b;
  if (ra && rb && rb->second <= ra->first) return a;
  auto atom = std::make_shared<SymAtom>();
  atom->kind = SymAtom::Kind::kMax;
  bool swap = a.to_string() > b.to_string();  // canonical operand order
  atom->a = swap ? b : a;
  atom->b = swap ? a : b;
  return from_atom(atom);
}
SymExpr SymExpr::min(const SymExpr& a, const SymExpr& b) {
  if (a == b) return a;
  auto ca = a.constant(), cb = b.constant();
  if (ca && cb) return SymExpr(std::min(*ca, *cb));
  auto ra = a.range(), rb = b.range();
  if (ra && rb && ra->second <= rb->first) return a;
  if (ra && rb && rb->second <= ra->first) return b;
  auto atom = std::make_shared<SymAtom>();
  atom->kind = SymAtom::Kind::kMin;
  bool swap = a.to_string() > b.to_string();
  atom->a = swap ? b : a;
  atom->b = swap ? a : b;
  return from_atom(atom);
}

std::optional<int64_t> SymExpr::evaluate(const SymBindings& bindings) const {
  int64_t total = 0;
  for (const auto& [m, c] : terms_) {
    int64_t v = c;
    for (const auto& k : m) {
      const SymAtom& atom = *atoms_.at(k);
      std::optional<int64_t> x;
      if (atom.kind == SymAtom::Kind::kSymbol) {
        auto it = bindings.find(atom.name);
        if (it == bindings.end()) return std::nullopt;
        x = it->second;
      } else {
        auto a = atom.a.evaluate(bindings), b = atom.b.evaluate(bindings);
        if (!a || !b) return std::nullopt;
        switch (atom.kind) {
          case SymAtom::Kind::kFloorDiv:
            if (*b == 0) return std::nullopt;
            x = floor_div(*a, *b);
            break;
          case SymAtom::Kind::kMod:
            if (*b == 0) return std::nullopt;
            x = floor_mod(*a, *b);
            break;
          case SymAtom::Kind::kMax:
            x = std::max(*a, *b);
            break;
          case SymAtom::Kind::kMin:
            x = std::min(*a, *b);
            break;
          default:
            return std::nullopt;
        }
      }
      if (__builtin_mul_overflow(v, *x, &v)) return std::nullopt;
    }
    if (__builtin_add_overflow(total, v, &total)) return std::nullopt;
  }
  return total;
}

void SymExpr::collect_symbols(std::vector<std::string>& out) const {
  for (const auto& [k, atom] : atoms_) {
    if (atom->kind == SymAtom::Kind::kSymbol) {
      if (std::find(out.begin(), out.end(), atom->name) == out.end()) out.push_back(atom->name);
    } else {
      atom->a.collect_symbols(out);
      atom->b.collect_symbols(out);
    }
  }
}

bool SymExpr::uses(const std::string& name) const {
  for (const auto& [m, c] : terms_)
    for (const std::string& key : m) {
      auto it = atoms_.find(key);
      if (it == atoms_.end()) continue;
      const SymAtom& a = *it->second;
      if (a.kind == SymAtom::Kind::kSymbol ? a.name == name : a.a.uses(name) || a.b.uses(name))
        return true;
    }
  return false;
}

SymExpr SymExpr::substitute(const std::string& name, const SymExpr& value) const {
  if (!uses(name)) return *this;
  SymExpr r;
  for (const auto& [m, c] : terms_) {
    SymExpr term(c);
    for (const std::string& key : m) {
      const std::shared_ptr<const SymAtom>& atom = atoms_.at(key);
      SymExpr x;
      switch (atom->kind) {
        case SymAtom::Kind::kSymbol:
          x = atom->name == name ? value : from_atom(atom);
          break;
        case SymAtom::Kind::kFloorDiv:
          x = atom->a.substitute(name, value).floordiv(atom->b.substitute(name, value));
          break;
        case SymAtom::Kind::kMod:
          x = atom->a.substitute(name, value).mod(atom->b.substitute(name, value));
          break;
        case SymAtom::Kind::kMax:
          x = max(atom->a.substitute(name, value), atom->b.substitute(name, value));
          break;
        case SymAtom::Kind::kMin:
          x = min(atom->a.substitute(name, value), atom->b.substitute(name, value));
          break;
      }
      term = term * x;
    }
    r = r + term;
  }
  return r;
}

void SymExpr::for_each_atom(const std::function<void(const SymAtom&)>& fn) const {
  for (const auto& [m, c] : terms_)
    for (const std::string& key : m) {
      const SymAtom& atom = *atoms_.at(key);
      fn(atom);
      if (atom.kind != SymAtom::Kind::kSymbol) {
        atom.a.for_each_atom(fn);
        atom.b.for_each_atom(fn);
      }
    }
}

namespace {
using Range = std::pair<int64_t, int64_t>;
// c * [lo, hi], ordered; nullopt on overflow.
std::optional<Range> scale(Range r, int64_t c) {
  int64_t a, b;
  if (__builtin_mul_overflow(r.first, c, &a) || __builtin_mul_overflow(r.second, c, &b))
    return std::nullopt;
  return c >= 0 ? Range{a, b} : Range{b, a};
}
std::optional<Range> atom_range(const SymAtom& atom) {
  if (atom.kind == SymAtom::Kind::kSymbol) {
    auto n = SymRangeScope::extent(atom.name);
    if (!n || *n <= 0) return std::nullopt;
    return Range{0, *n - 1};
  }
  auto ra = atom.a.range(), rb = atom.b.range();
  auto k = atom.b.constant();
  switch (atom.kind) {
    case SymAtom::Kind::kMod:
      if (!k || *k <= 0) return std::nullopt;
      if (ra && ra->first >= 0 && ra->second < *k) return ra;
      return Range{0, *k - 1};
    case SymAtom::Kind::kFloorDiv:
      if (!k || *k <= 0 || !ra) return std::nullopt;
      return Range{floor_div(ra->first, *k), floor_div(ra->second, *k)};
    case SymAtom::Kind::kMax:
      if (!ra || !rb) return std::nullopt;
      return Range{std::max(ra->first, rb->first), std::max(ra->second, rb->second)};
    case SymAtom::Kind::kMin:
      if (!ra || !rb) return std::nullopt;
      return Range{std::min(ra->first, rb->first), std::min(ra->second, rb->second)};
    default:
      return std::nullopt;
  }
}
}  // namespace

std::optional<std::pair<int64_t, int64_t>> SymExpr::range() const {
  Range total{0, 0};
  for (const auto& [m, c] : terms_) {
    std::optional<Range> t;
    if (m.empty()) t = Range{c, c};
    if (m.size() == 1)
      if (auto r = atom_range(*atoms_.at(m[0]))) t = scale(*r, c);
    if (!t || __builtin_add_overflow(total.first, t->first, &total.first) ||
        __builtin_add_overflow(total.second, t->second, &total.second))
      return std::nullopt;
  }
  return total;
}

std::string SymAtom::key() const {
  switch (kind) {
    case Kind::kSymbol:
      return name;
    case Kind::kFloorDiv:
      return "(" + a.to_string() + ")//(" + b.to_string() + ")";
    case Kind::kMod:
      return "(" + a.to_string() + ")%(" + b.to_string() + ")";
    case Kind::kMax:
      return "max(" + a.to_string() + "," + b.to_string() + ")";
    case Kind::kMin:
      return "min(" + a.to_string() + "," + b.to_string() + ")";
  }
  return "?";
}

namespace {
// Drops redundant parentheses around simple operands: "(x)//(2)" -> "x//2".
std::string atom_text(const SymAtom& atom) {
  auto wrap = [](const SymExpr& e) {
    std::string s = e.to_string();
    bool simple = e.is_constant() || e.is_symbol();
    return simple ? s : "(" + s + ")";
  };
  switch (atom.kind) {
    case SymAtom::Kind::kFloorDiv:
      return wrap(atom.a) + "//" + wrap(atom.b);
    case SymAtom::Kind::kMod:
      return wrap(atom.a) + "%" + wrap(atom.b);
    default:
      return atom.key();
  }
}
}  // namespace

std::string SymExpr::to_string() const {
  if (terms_.empty()) return "0";
  // Highest-degree monomials first, constant last: "batch*12", "seq-1".
  std::vector<std::pair<Monomial, int64_t>> ordered(terms_.begin(), terms_.end());
  // Then positive terms before negative ones, and plain symbols before // and % terms.
  auto opaque = [&](const Monomial& m) {
    int n = 0;
    for (const auto& k : m) n += atoms_.at(k)->kind != SymAtom::Kind::kSymbol;
    return n;
  };
  std::stable_sort(ordered.begin(), ordered.end(), [&](const auto& x, const auto& y) {
    if (x.first.size() != y.first.size()) return x.first.size() > y.first.size();
    if ((x.second > 0) != (y.second > 0)) return x.second > 0;
    return opaque(x.first) < opaque(y.first);
  });
  std::string s;
  bool first = true;
  for (const auto& [m, c] : ordered) {
    int64_t mag = c < 0 ? -c : c;
    if (first) {
      if (c < 0) s += "-";
    } else {
      s += c < 0 ? "-" : "+";
    }
    first = false;
    std::string body;
    // A // or % term multiplied or negated gets parentheses, so that the text reads the same in
    // Python: "-((-s)//2)" not "-(-s)//2".
    bool bare = m.size() == 1 && mag == 1 && c > 0;
    for (size_t i = 0; i < m.size(); ++i) {
      if (i) body += "*";
      const SymAtom& atom = *atoms_.at(m[i]);
      bool divmod = atom.kind == SymAtom::Kind::kFloorDiv || atom.kind == SymAtom::Kind::kMod;
      body += divmod && !bare ? "(" + atom_text(atom) + ")" : atom_text(atom);
    }
    if (m.empty()) {
      s += std::to_string(mag);
    } else if (mag == 1) {
      s += body;
    } else {
      s += body + "*" + std::to_string(mag);
    }
  }
  return s;
}

std::string SymExpr::to_c_code(const std::function<std::string(const std::string&)>& ident) const {
  if (terms_.empty()) return "0";
  std::string s;
  for (const auto& [m, c] : terms_) {
    std::string term;
    for (const auto& k : m) {
      const SymAtom& atom = *atoms_.at(k);
      std::string a;
      switch (atom.kind) {
        case SymAtom::Kind::kSymbol:
          a = ident(atom.name);
          break;
        case SymAtom::Kind::kFloorDiv:
          a = "fe_floordiv(" + atom.a.to_c_code(ident) + ", " + atom.b.to_c_code(ident) + ")";
          break;
        case SymAtom::Kind::kMod:
          a = "fe_mod(" + atom.a.to_c_code(ident) + ", " + atom.b.to_c_code(ident) + ")";
          break;
        case SymAtom::Kind::kMax:
          a = "fe_max(" + atom.a.to_c_code(ident) + ", " + atom.b.to_c_code(ident) + ")";
          break;
        case SymAtom::Kind::kMin:
          a = "fe_min(" + atom.a.to_c_code(ident) + ", " + atom.b.to_c_code(ident) + ")";
          break;
      }
      term += (term.empty() ? "" : "*") + a;
    }
    std::string coeff = std::to_string(c < 0 ? -c : c) + "LL";
    if (term.empty())
      term = coeff;
    else if (c != 1 && c != -1)
      term = term + "*" + coeff;
    s += (s.empty() ? (c < 0 ? "-" : "") : (c < 0 ? " - " : " + ")) + term;
  }
  return "(" + s + ")";
}

}  // namespace ferrite
