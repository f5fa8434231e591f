#include "ops/shape_helpers.h"

#include <algorithm>
#include <cstring>

#include "support/checked_math.h"

namespace ferrite {

Dim dim_product(const std::vector<Dim>& dims) {
  return dim_product(dims, 0, dims.size());
}

Dim dim_product(const std::vector<Dim>& dims, size_t begin, size_t end) {
  // Static factors are multiplied with overflow checks (SymExpr arithmetic is unchecked); a
  // product past kHugeDim is no tensor's element count, so it is left unknown.
  int64_t factor = 1;
  Dim p(int64_t{1});
  for (size_t i = begin; i < end && i < dims.size(); ++i) {
    if (auto v = dims[i].value()) {
      auto f = checked_mul(factor, *v);
      if (!f || *f >= kHugeDim || *f <= -kHugeDim) return Dim::unknown();
      factor = *f;
    } else {
      p = p * dims[i];
    }
  }
  return p * Dim(factor);
}

bool small_static(const Dim& d) {
  auto v = d.value();
  return !v || (*v<kHugeDim&& * v> - kHugeDim);
}

std::optional<SymExpr> exact_quotient(const SymExpr& num, const SymExpr& den) {
  if (auto d = den.constant()) {
    if (*d == 0) return std::nullopt;
    SymExpr q = num.floordiv(den);
    if (q * den == num) return q;
    return std::nullopt;
  }
  if (num == den) return SymExpr(1);
  // The canonical polynomial form does not divide products by products, so guess the quotient
  // as c * prod(s^e_s): evaluate at a base point, then double one symbol at a time to read off
  // its exponent. The guess is only accepted if multiplying back gives num exactly.
  std::vector<std::string> syms;
  num.collect_symbols(syms);
  den.collect_symbols(syms);
  static constexpr int64_t kPoints[] = {3, 5, 7, 11, 13, 17, 19, 23, 29, 31};
  if (syms.size() > std::size(kPoints)) return std::nullopt;
  SymBindings base;
  for (size_t i = 0; i < syms.size(); ++i) base[syms[i]] = kPoints[i];
  auto ratio = [&](const SymBindings& b) -> std::optional<int64_t> {
    auto n = num.evaluate(b), d = den.evaluate(b);
    if (!n || !d || *d == 0 || *n % *d != 0) return std::nullopt;
    return *n / *d;
  };
  auto q0 = ratio(base);
  if (!q0 || *q0 == 0) return std::nullopt;
  int64_t coeff = *q0;
  SymExpr q(1);
  for (const auto& s : syms) {
    SymBindings b = base;
    b[s] *= 2;
    auto qs = ratio(b);
    if (!qs || *qs % *q0 != 0) return std::nullopt;
    int64_t f = *qs / *q0;
    int e = 0;
    while (f > 1 && f % 2 == 0) {
      f /= 2;
      ++e;
    }
    if (f != 1) return std::nullopt;
    for (int k = 0; k < e; ++k) {
      if (coeff % base[s] != 0) return std::nullopt;
      coeff /= base[s];
      q = q * SymExpr::symbol(s);
    }
  }
  q = q * SymExpr(coeff);
  if (q * den == num) return q;
  return std::nullopt;
}

Dim exact_quotient(const Dim& num, const Dim& den) {
  if (!num.is_known() || !den.is_known()) return Dim::unknown();
  auto q = exact_quotient(num.expr(), den.expr());
  return q ? Dim(*q) : Dim::unknown();
}

Dim ceil_div(const Dim& x, int64_t k) {
  if (!x.is_known() || k <= 0) return Dim::unknown();
  if (k == 1) return x;
  // Counts are below kHugeDim, so a larger divisor leaves 0 or 1 (and x+k-1 could overflow).
  if (k >= kHugeDim) return Dim(SymExpr::min(x.expr(), SymExpr(1)));
  return Dim((x.expr() + SymExpr(k - 1)).floordiv(SymExpr(k)));
}

std::optional<std::vector<int64_t>> static_values(const std::optional<std::vector<Dim>>& v) {
  if (!v) return std::nullopt;
  std::vector<int64_t> out;
  out.reserve(v->size());
  for (const Dim& d : *v) {
    auto x = d.value();
    if (!x) return std::nullopt;
    out.push_back(*x);
  }
  return out;
}

bool known_nonneg(const Dim& d) {
  if (!d.is_known()) return false;
  if (auto v = d.value()) return *v >= 0;
  // A dim symbol, or one plus a constant >= 0 (a decoding step's past + 1): symbols are sizes.
  const SymExpr& e = d.expr();
  if (e.is_symbol()) return true;
  std::vector<std::string> names;
  e.collect_symbols(names);
  SymBindings zero;
  for (const std::string& n : names) zero[n] = 0;
  const std::optional<int64_t> c = e.evaluate(zero);
  return c && *c >= 0 && (e - SymExpr(*c)).is_symbol();
}

SliceRange static_slice(int64_t d, int64_t start, int64_t end, int64_t step) {
  SliceRange r;
  r.step = step;
  if (d <= 0 || step == 0) return r;
  if (start < 0) start += d;
  if (end < 0) end += d;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, d);
    end = std::clamp<int64_t>(end, 0, d);
    // (end - start - 1) / step + 1 rather than a ceil that could overflow for huge steps.
    r.count = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    start = std::clamp<int64_t>(start, 0, d - 1);
    end = std::clamp<int64_t>(end, -1, d - 1);
    int64_t mag = step == INT64_MIN ? INT64_MAX : -step;
    r.count = start > end ? (start - end - 1) / mag + 1 : 0;
  }
  r.start = start;
  return r;
}

Dim slice_length(const Dim& d, const Dim& start, const Dim& end, int64_t step) {
  if (!d.is_known() || !start.is_known() || !end.is_known() || step == 0) return Dim::unknown();
  auto dv = d.value(), sv = start.value(), ev = end.value();
  if (dv && sv && ev) return static_slice(*dv, *sv, *ev, step).count;
  const SymExpr& D = d.expr();
  using E = SymExpr;
  if (step > 0) {
    // Clamp a bound into [0, D]; nullopt when that cannot be written down.
    auto clamp_bound = [&](const Dim& x) -> std::optional<E> {
      if (auto v = x.value()) {
        if (*v >= kHugeDim) return D;
        if (*v >= 0) return *v == 0 ? E(0) : E::min(E(*v), D);
        if (*v <= -kHugeDim) return E(0);
        return E::max(D + E(*v), E(0));
      }
      if (x == d) return D;
      if (known_nonneg(x)) return E::min(x.expr(), D);
      return std::nullopt;
    };
    auto s = clamp_bound(start), e = clamp_bound(end);
    if (!s || !e) return Dim::unknown();
    // x[k:] and x[-k:] are common enough to deserve the short forms max(D-k,0) and min(k,D).
    if (*e == D && sv && *sv > 0 && *sv < kHugeDim)
      return ceil_div(Dim(E::max(D - E(*sv), E(0))), step);
    if (*e == D && sv && *sv < 0 && *sv > -kHugeDim) return ceil_div(Dim(E::min(E(-*sv), D)), step);
    // s <= D and e >= 0 always hold, so e - s >= 0 is known when s is 0 or e is D.
    E len = *e - *s;
    if (!(*s == E(0) || *e == D || *e == *s)) len = E::max(len, E(0));
    return ceil_div(Dim(len), step);
  }
  // Negative step: start clamps into [0, D-1], end into [-1, D-1].
  if (!sv || !ev || step == INT64_MIN) return Dim::unknown();
  E last = D - E(1);
  E s = *sv >= kHugeDim    ? last
        : *sv >= 0         ? E::min(E(*sv), last)
        : *sv <= -kHugeDim ? E::min(E(0), last)
                           : E::min(E::max(D + E(*sv), E(0)), last);
  if (*sv == -1) s = last;
  E e = *ev >= kHugeDim    ? last
        : *ev >= 0         ? E::min(E(*ev), last)
        : *ev <= -kHugeDim ? E(-1)
                           : E::max(D + E(*ev), E(-1));
  E len = s - e;
  if (!(e == E(-1))) len = E::max(len, E(0));
  return ceil_div(Dim(len), -step);
}

namespace {
template <class U>
void copy_maps_impl(const U* src, U* dst, const std::vector<std::vector<int64_t>>& maps) {
  size_t rank = maps.size();
  if (rank == 0) {
    dst[0] = src[0];
    return;
  }
  const std::vector<int64_t>& last = maps.back();
  int64_t inner = static_cast<int64_t>(last.size());
  int64_t outer = 1;
  for (size_t k = 0; k + 1 < rank; ++k) outer *= static_cast<int64_t>(maps[k].size());
  if (inner == 0 || outer == 0) return;
  bool contiguous = last[0] >= 0;
  for (int64_t i = 1; i < inner && contiguous; ++i) contiguous = last[i] == last[0] + i;
  std::vector<size_t> idx(rank - 1, 0);
  for (int64_t row = 0; row < outer; ++row) {
    int64_t base = 0;
    bool skip = false;
    for (size_t k = 0; k + 1 < rank; ++k) {
      int64_t m = maps[k][idx[k]];
      skip = skip || m < 0;
      base += m;
    }
    if (!skip) {
      U* d = dst + row * inner;
      if (contiguous) {
        std::memcpy(d, src + base + last[0], static_cast<size_t>(inner) * sizeof(U));
      } else {
        for (int64_t i = 0; i < inner; ++i)
          if (last[i] >= 0) d[i] = src[base + last[i]];
      }
    }
    for (size_t k = rank - 1; k-- > 0;) {
      if (++idx[k] < maps[k].size()) break;
      idx[k] = 0;
    }
  }
}
}  // namespace

void copy_by_axis_maps(const Tensor& src, Tensor& dst,
                       const std::vector<std::vector<int64_t>>& maps) {
  FERRITE_CHECK(src.dtype() == dst.dtype());
  visit_elem_size(src.dtype(), [&]<class U>() {
    copy_maps_impl(static_cast<const U*>(src.raw()), static_cast<U*>(dst.raw()), maps);
  });
}

std::vector<int64_t> iota_map(int64_t n, int64_t stride, int64_t first, int64_t step) {
  std::vector<int64_t> m(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) m[i] = (first + i * step) * stride;
  return m;
}

void fill_with(Tensor& t, const void* value_bytes) {
  size_t esz = dtype_size(t.dtype());
  auto* p = static_cast<uint8_t*>(t.raw());
  bool zero = true;
  for (size_t b = 0; b < esz; ++b) zero = zero && static_cast<const uint8_t*>(value_bytes)[b] == 0;
  if (zero) return;  // storage starts zeroed
  for (int64_t i = 0; i < t.numel(); ++i) std::memcpy(p + i * esz, value_bytes, esz);
}

}  // namespace ferrite
