// Symbolic dims-value arithmetic for the elementwise families (see elementwise_util.h).
#include "ops/elementwise_util.h"

namespace ferrite {

void propagate_dims_value(InferContext& ctx, const std::vector<size_t>& inputs,
                          const std::function<Dim(const std::vector<Dim>&)>& f) {
  std::vector<std::vector<Dim>> values;
  size_t len = 1;
  for (size_t i : inputs) {
    if (!ctx.has_input(i)) return;
    const Shape& s = ctx.input_shape(i);
    DType dt = ctx.input_dtype(i);
    if (!s.rank_known() || s.rank() > 1 || !(is_integer(dt) || dt == DType::kBool)) return;
    auto v = ctx.input_dims_value(i);
    if (!v || v->empty()) return;
    if (s.rank() == 1) {
      if (s[0].value() && *s[0].value() != static_cast<int64_t>(v->size())) return;
    } else if (v->size() != 1) {
      return;
    }
    if (v->size() != 1) {
      if (len != 1 && len != v->size()) return;
      len = v->size();
    }
    values.push_back(std::move(*v));
  }
  std::vector<Dim> out;
  bool any_known = false;
  std::vector<Dim> args(values.size());
  for (size_t j = 0; j < len; ++j) {
    for (size_t k = 0; k < values.size(); ++k) args[k] = values[k][values[k].size() == 1 ? 0 : j];
    out.push_back(f(args));
    any_known = any_known || out.back().is_known();
  }
  if (any_known) ctx.set_output_dims_value(0, std::move(out));
}

Dim dim_div(const Dim& a, const Dim& b) {
  if (!a.is_known() || !b.is_known()) return Dim::unknown();
  auto av = a.value(), bv = b.value();
  if (bv && *bv == 0) return Dim::unknown();
  if (av && bv) {
    if (*av == std::numeric_limits<int64_t>::min() && *bv == -1) return Dim::unknown();
    return Dim(*av / *bv);  // ONNX integer Div truncates toward zero
  }
  // For a non-negative dividend, truncation equals floor division by |b| with b's sign.
  if (bv && *bv < 0) {
    if (*bv == std::numeric_limits<int64_t>::min()) return Dim::unknown();
    return Dim(0) - a.floordiv(Dim(-*bv));
  }
  return a.floordiv(b);
}

Dim dim_mod(const Dim& a, const Dim& b, bool fmod) {
  if (!a.is_known() || !b.is_known()) return Dim::unknown();
  auto av = a.value(), bv = b.value();
  if (bv && *bv == 0) return Dim::unknown();
  if (av && bv) {
    if (*bv == -1) return Dim(0);
    int64_t r = *av % *bv;
    if (!fmod && r != 0 && ((r < 0) != (*bv < 0))) r += *bv;
    return Dim(r);
  }
  if (fmod && bv && *bv < 0) {
    // C-style remainder of a non-negative dividend ignores the divisor's sign.
    if (*bv == std::numeric_limits<int64_t>::min()) return Dim::unknown();
    return Dim(a.expr().mod(SymExpr(-*bv)));
  }
  return Dim(a.expr().mod(b.expr()));
}

Dim dim_max(const Dim& a, const Dim& b) {
  if (!a.is_known() || !b.is_known()) return Dim::unknown();
  if (auto c = dim_compare(a, b)) return *c >= 0 ? a : b;
  return Dim(SymExpr::max(a.expr(), b.expr()));
}

Dim dim_min(const Dim& a, const Dim& b) {
  if (!a.is_known() || !b.is_known()) return Dim::unknown();
  if (auto c = dim_compare(a, b)) return *c <= 0 ? a : b;
  return Dim(SymExpr::min(a.expr(), b.expr()));
}

std::optional<int> dim_compare(const Dim& a, const Dim& b) {
  if (!a.is_known() || !b.is_known()) return std::nullopt;
  auto av = a.value(), bv = b.value();
  if (av && bv) return *av < *bv ? -1 : (*av > *bv ? 1 : 0);
  // A bare symbol is a dimension size, hence >= 0: it exceeds any negative constant (this decides
  // the common `Equal(shape, -1)` of exported Reshape/Expand shape computations).
  if (a.expr().is_symbol() && bv && *bv < 0) return 1;
  if (b.expr().is_symbol() && av && *av < 0) return -1;
  auto diff = (a.expr() - b.expr()).constant();
  if (diff) return *diff < 0 ? -1 : (*diff > 0 ? 1 : 0);
  return std::nullopt;
}

Dim dim_wrap_to(const Dim& d, DType dt) {
  auto v = d.value();
  if (!v) return d;  // symbolic sizes are assumed to fit any integer type
  int64_t out = *v;
  visit_dtype(dt, [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      out = *v != 0;
    } else if constexpr (std::is_integral_v<T>) {
      out = static_cast<int64_t>(static_cast<T>(*v));
    }
  });
  return Dim(out);
}

}  // namespace ferrite
