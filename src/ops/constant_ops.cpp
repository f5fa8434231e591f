// Ops that make tensors from attributes or scalars: Constant, ConstantOfShape, Range.
#include <cmath>

#include "ops/shape_helpers.h"

namespace ferrite {

namespace {

using namespace dtypes;

// ---- Constant ----

template <class Ctx>
Expected<Tensor> constant_attr_value(const Ctx& ctx) {
  const Node& n = ctx.node();
  if (n.has_attr("value_string") || n.has_attr("value_strings"))
    return unsupported(n.describe(), ": string constants are not supported");
  static const char* kNames[] = {"value", "value_float", "value_floats", "value_int", "value_ints"};
  int count = 0;
  for (const char* name : kNames) count += n.has_attr(name) ? 1 : 0;
  if (count != 1) return ctx.error("exactly one of the value attributes must be set, got ", count);
  if (n.has_attr("value")) return n.attrs.at("value").t();
  if (n.has_attr("value_float")) return Tensor::scalar<float>(n.attr_float("value_float"));
  if (n.has_attr("value_int")) return Tensor::scalar<int64_t>(n.attr_int("value_int"));
  if (n.has_attr("value_floats")) {
    auto v = n.attr_floats("value_floats");
    return Tensor::from_vector<float>(v, {static_cast<int64_t>(v.size())});
  }
  auto v = n.attr_ints("value_ints");
  return Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())});
}

Status infer_constant(InferContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(Tensor t, constant_attr_value(ctx));
  ctx.set_output(0, t.dtype(), Shape::of(t.dims()));
  ctx.set_output_constant(0, std::move(t));
  return Status::ok();
}

Status constant_kernel(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(Tensor t, constant_attr_value(ctx));
  ctx.set_output(0, std::move(t));
  return Status::ok();
}

// ---- ConstantOfShape ----

template <class Ctx>
Expected<Tensor> fill_value(const Ctx& ctx) {
  if (!ctx.node().has_attr("value")) return Tensor::scalar<float>(0.0f);
  const Tensor& t = ctx.node().attrs.at("value").t();
  if (t.numel() != 1)
    return ctx.error("value must have exactly one element, got ", t.type_string());
  return t;
}

Status infer_constant_of_shape(InferContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(Tensor value, fill_value(ctx));
  DType dt = value.dtype();
  const Shape& ss = ctx.input_shape(0);
  if (ss.rank_known() && ss.rank() != 1)
    return ctx.error("the shape input must be 1-D, got ", ss.to_string());
  auto dims = ctx.input_dims_value(0);
  if (!dims) {
    auto n = ss.rank_known() ? ss[0].value() : std::nullopt;
    ctx.set_output(0, dt,
                   n ? Shape(std::vector<Dim>(static_cast<size_t>(*n))) : Shape::unknown_rank());
    return Status::ok();
  }
  for (const Dim& d : *dims)
    if (auto v = d.value(); v && *v < 0) return ctx.error("negative dim ", *v, " in the shape");
  Shape out(*dims);
  ctx.set_output(0, dt, out);
  // A filled shape-like tensor (e.g. ones that a Where turns into an Expand shape) keeps its
  // contents.
  if (is_integer(dt) && out.rank() <= 1) {
    int64_t n = out.rank() == 0 ? 1 : out[0].value().value_or(-1);
    if (n >= 0 && n <= 1024) ctx.set_output_dims_value(0, std::vector<Dim>(n, value.int_at(0)));
  }
  return Status::ok();
}

Status constant_of_shape_kernel(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(Tensor value, fill_value(ctx));
  const Tensor& s = ctx.input(0);
  if (s.rank() != 1) return ctx.error("the shape input must be 1-D, got ", s.type_string());
  auto dims = s.to_int_vector();
  for (int64_t d : dims)
    if (d < 0) return ctx.error("negative dim ", d, " in the shape ", dims_to_string(dims));
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, value.dtype(), dims));
  fill_with(*y, value.raw());
  return Status::ok();
}

// ---- Range ----

// Element count of Range over int64 values, capped at kHugeDim (more cannot be allocated);
// nullopt when delta is 0.
std::optional<int64_t> int_range_count(int64_t start, int64_t limit, int64_t delta) {
  if (delta == 0) return std::nullopt;
  __int128 span = static_cast<__int128>(limit) - start;
  __int128 n = delta > 0 ? (span > 0 ? (span + delta - 1) / delta : 0)
                         : (span < 0 ? (-span + (-static_cast<__int128>(delta)) - 1) /
                                           (-static_cast<__int128>(delta))
                                     : 0);
  return static_cast<int64_t>(std::min<__int128>(n, kHugeDim));
}

Status infer_range(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  for (size_t i = 0; i < 3; ++i) {
    const Shape& s = ctx.input_shape(i);
    // A 1-d input of unknown length (an If's merged branches) is checked at run time.
    if (s.rank_known() && s.rank() != 0 && !(s.rank() == 1 && (!s[0].value() || s[0].value() == 1)))
      return ctx.error("input ", i, " must be a scalar, got ", s.to_string());
  }
  Dim n;
  if (is_integer(dt)) {
    auto s = ctx.input_dims_value(0), l = ctx.input_dims_value(1), d = ctx.input_dims_value(2);
    if (s && l && d && s->size() == 1 && l->size() == 1 && d->size() == 1) {
      const Dim &S = (*s)[0], &L = (*l)[0], &D = (*d)[0];
      auto sv = S.value(), lv = L.value(), dv = D.value();
      if (dv && *dv == 0) return ctx.error("delta cannot be 0");
      if (sv && lv && dv) {
        int64_t count = *int_range_count(*sv, *lv, *dv);
        if (count < kHugeDim) n = count;  // larger ones fail to allocate at run time
        if (count <= 1024) {
          std::vector<Dim> values;
          for (int64_t i = 0; i < *n.value(); ++i) values.emplace_back(*sv + i * *dv);
          ctx.set_output(0, dt, Shape(std::vector<Dim>{n}));
          ctx.set_output_dims_value(0, std::move(values));
          return Status::ok();
        }
      } else if (dv && S.is_known() && L.is_known() && small_static(S) && small_static(L)) {
        // Symbolic bounds: count = ceil((limit - start) / delta), clamped at 0 unless that is
        // evidently non-negative (counting up from 0 to a dim).
        Dim span = *dv > 0 ? L - S : S - L;
        int64_t mag = *dv > 0 ? *dv : -*dv;
        bool nonneg = *dv > 0 ? (sv == 0 && known_nonneg(L)) : (lv == 0 && known_nonneg(S));
        n = ceil_div(span, mag);
        if (!nonneg) n = Dim(SymExpr::max(n.expr(), SymExpr(0)));
      }
    }
  } else {
    const Tensor *s = ctx.input_constant(0), *l = ctx.input_constant(1), *d = ctx.input_constant(2);
    if (s && l && d && s->numel() == 1 && l->numel() == 1 && d->numel() == 1) {
      double sv = s->double_at(0), lv = l->double_at(0), dv = d->double_at(0);
      if (dv == 0) return ctx.error("delta cannot be 0");
      double c = std::ceil((lv - sv) / dv);
      if (std::isfinite(c) && c < 1e15) n = static_cast<int64_t>(std::max(c, 0.0));
    }
  }
  ctx.set_output(0, dt, Shape(std::vector<Dim>{n}));
  return Status::ok();
}

Status range_kernel(KernelContext& ctx) {
  for (size_t i = 0; i < 3; ++i)
    if (ctx.input(i).numel() != 1)
      return ctx.error("input ", i, " must be a scalar, got ", ctx.input(i).type_string());
  DType dt = ctx.input(0).dtype();
  Status st;
  visit_dtype(dt, [&]<class T>() {
    if constexpr (is_float_v<T>) {
      double s = ctx.input(0).double_at(0), l = ctx.input(1).double_at(0),
             d = ctx.input(2).double_at(0);
      if (d == 0) {
        st = ctx.error("delta cannot be 0");
        return;
      }
      double c = std::ceil((l - s) / d);
      if (!std::isfinite(c) || c > 1e15) {
        st = ctx.error("range from ", s, " to ", l, " by ", d, " is too long");
        return;
      }
      int64_t n = static_cast<int64_t>(std::max(c, 0.0));
      auto y = ctx.allocate_output(0, dt, {n});
      if (!y) {
        st = y.status();
        return;
      }
      T* p = (*y)->template data<T>();
      for (int64_t i = 0; i < n; ++i) p[i] = convert<T>(s + static_cast<double>(i) * d);
    } else if constexpr (!std::is_same_v<T, bool>) {
      int64_t s = ctx.input(0).int_at(0), l = ctx.input(1).int_at(0), d = ctx.input(2).int_at(0);
      auto n = int_range_count(s, l, d);
      if (!n) {
        st = ctx.error("delta cannot be 0");
        return;
      }
      auto y = ctx.allocate_output(0, dt, {*n});
      if (!y) {
        st = y.status();
        return;
      }
      T* p = (*y)->template data<T>();
      for (int64_t i = 0; i < *n; ++i) p[i] = static_cast<T>(s + i * d);
    } else {
      st = ctx.error("bool is not supported");
    }
  });
  return st;
}

}  // namespace

// One compact schema chain per op reads best.
// clang-format off
void register_constant_ops(OpRegistry& r) {
  r.add(OpSchemaBuilder("Constant").versions(13).inputs(0).outputs(1)
            .optional_attr("value", AttrType::kTensor)
            .optional_attr("value_float", AttrType::kFloat)
            .optional_attr("value_floats", AttrType::kFloats)
            .optional_attr("value_int", AttrType::kInt)
            .optional_attr("value_ints", AttrType::kInts)
            .optional_attr("value_string", AttrType::kString)
            .optional_attr("value_strings", AttrType::kStrings)
            .infer(infer_constant).kernel(constant_kernel));
  r.add(OpSchemaBuilder("ConstantOfShape").versions(13).inputs(1).outputs(1)
            .optional_attr("value", AttrType::kTensor).types("T1", {0}, {DType::kI64})
            .infer(infer_constant_of_shape).kernel(constant_of_shape_kernel));
  constexpr DTypeSet kRangeTypes{DType::kF32, DType::kF64, DType::kI16, DType::kI32, DType::kI64};
  r.add(OpSchemaBuilder("Range").versions(13).inputs(3).outputs(1)
            .types("T", {0, 1, 2}, kRangeTypes).infer(infer_range).kernel(range_kernel));
}
// clang-format on

}  // namespace ferrite
