// Miscellaneous ops: CumSum, TopK, Dropout, EyeLike, Shrink, Det (Resize lives in resize.cpp).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/helpers.h"
#include "ops/numeric_cast.h"

namespace ferrite {

void register_resize_ops(OpRegistry& r);  // resize.cpp
void register_sampling_ops(OpRegistry& r);      // sampling.cpp: GridSample, AffineGrid
void register_detection_ops(OpRegistry& r);     // detection.cpp: NonMaxSuppression, RoiAlign
void register_signal_ops(OpRegistry& r);        // signal.cpp: windows, DFT, STFT
void register_col2im_ops(OpRegistry& r);        // col2im.cpp
void register_tfidf_ops(OpRegistry& r);         // tfidf.cpp: TfIdfVectorizer
void register_conv_integer_ops(OpRegistry& r);  // conv_integer.cpp: ConvInteger, QLinearConv
void register_training_ops(OpRegistry& r);      // training.cpp: Adagrad, Momentum, Adam
void register_ml_ops(OpRegistry& r);            // ml.cpp: Binarizer, ArrayFeatureExtractor

namespace {

// The tensor viewed as [outer, n, inner] around `axis`.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
AxisSplit split_at(const std::vector<int64_t>& dims, int64_t axis) {
  AxisSplit s;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
    if (i < axis)
      s.outer *= dims[i];
    else if (i == axis)
      s.n = dims[i];
    else
      s.inner *= dims[i];
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// CumSum

Expected<int64_t> scalar_axis_input(const KernelContext& ctx, size_t i) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1 || t.rank() > 1)
    return ctx.error("input ", i, " (axis) must hold exactly one value, got ", t.type_string());
  return t.int_at(0);
}

Status infer_cumsum(InferContext& ctx) {
  const Shape& axis_shape = ctx.input_shape(1);
  if (axis_shape.rank_known() &&
      (axis_shape.rank() > 1 || (axis_shape.rank() == 1 && axis_shape[0].value().value_or(1) != 1)))
    return ctx.error("axis must be a scalar or a 1-element tensor, got ", axis_shape.to_string());
  const Shape& in = ctx.input_shape(0);
  if (auto v = ctx.input_dims_value(1);
      v && v->size() == 1 && (*v)[0].is_static() && in.rank_known())
    FERRITE_RETURN_IF_ERROR(
        normalize_axis(ctx, *(*v)[0].value(), static_cast<int64_t>(in.rank())).status());
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

Status cumsum_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  FERRITE_ASSIGN_OR_RETURN(int64_t raw_axis, scalar_axis_input(ctx, 1));
  int64_t rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return ctx.error("input must have rank >= 1");
  FERRITE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, raw_axis, rank));
  bool exclusive = ctx.node().attr_int("exclusive") != 0;
  bool reverse = ctx.node().attr_int("reverse") != 0;
  AxisSplit s = split_at(x.dims(), axis);
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.dims()));
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      // Floats accumulate in double; integers wrap like the storage type.
      using Acc = std::conditional_t<is_float_v<T>, double, uint64_t>;
      const T* px = x.data<T>();
      T* py = y->data<T>();
      for (int64_t o = 0; o < s.outer; ++o) {
        for (int64_t i = 0; i < s.inner; ++i) {
          Acc acc = 0;
          for (int64_t step = 0; step < s.n; ++step) {
            int64_t k = reverse ? s.n - 1 - step : step;
            int64_t off = (o * s.n + k) * s.inner + i;
            Acc v;
            if constexpr (is_float_v<T>)
              v = convert<double>(px[off]);
            else
              v = static_cast<uint64_t>(static_cast<int64_t>(px[off]));
            if (exclusive) {
              py[off] = static_cast<T>(convert<T>(acc));
              acc += v;
            } else {
              acc += v;
              py[off] = static_cast<T>(convert<T>(acc));
            }
          }
        }
      }
    }
  });
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// TopK

Status infer_topk(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  const Shape& ks = ctx.input_shape(1);
  if (ks.rank_known() && (ks.rank() != 1 || ks[0].value().value_or(1) != 1))
    return ctx.error("K must be a 1-d tensor with one element, got ", ks.to_string());
  Shape out = Shape::unknown_rank();
  if (in.rank_known()) {
    int64_t rank = static_cast<int64_t>(in.rank());
    if (rank == 0) return ctx.error("input must have rank >= 1");
    FERRITE_ASSIGN_OR_RETURN(int64_t axis,
                             normalize_axis(ctx, ctx.node().attr_int("axis", -1), rank));
    std::vector<Dim> dims = in.dims();
    dims[axis] = Dim::unknown();
    if (auto k = ctx.input_dims_value(1); k && k->size() == 1) {
      const Dim& kd = (*k)[0];
      if (kd.is_static() && *kd.value() < 0) return ctx.error("K must be >= 0, got ", *kd.value());
      if (kd.is_static() && in[axis].is_static() && *kd.value() > *in[axis].value())
        return ctx.error("K = ", *kd.value(), " exceeds the axis length ", *in[axis].value());
      dims[axis] = kd;
    }
    out = Shape(dims);
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
  ctx.set_output(1, DType::kI64, out);
  return Status::ok();
}

Status topk_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& kt = ctx.input(1);
  if (kt.numel() != 1 || kt.rank() != 1)
    return ctx.error("K must be a 1-d tensor with one element, got ", kt.type_string());
  int64_t k = kt.int_at(0);
  int64_t rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return ctx.error("input must have rank >= 1");
  FERRITE_ASSIGN_OR_RETURN(int64_t axis,
                           normalize_axis(ctx, ctx.node().attr_int("axis", -1), rank));
  AxisSplit s = split_at(x.dims(), axis);
  if (k < 0 || k > s.n) return ctx.error("K = ", k, " is out of range for axis length ", s.n);
  bool largest = ctx.node().attr_int("largest", 1) != 0;
  std::vector<int64_t> out_dims = x.dims();
  out_dims[axis] = k;
  FERRITE_ASSIGN_OR_RETURN(Tensor * vals, ctx.allocate_output(0, x.dtype(), out_dims));
  FERRITE_ASSIGN_OR_RETURN(Tensor * idxs, ctx.allocate_output(1, DType::kI64, out_dims));
  int64_t* pi = idxs->data<int64_t>();
  visit_dtype(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* pv = vals->data<T>();
    // Order: by value (NaN above every number, as NumPy sorts it), ties by lower index; sorted
    // results are returned even when sorted=0, which the spec allows.
    using C = std::conditional_t<is_float_v<T>, double, T>;
    std::vector<int64_t> order(static_cast<size_t>(s.n));
    std::vector<C> key(static_cast<size_t>(s.n));
    auto before = [&](int64_t a, int64_t b) {
      const C& va = key[a];
      const C& vb = key[b];
      if constexpr (is_float_v<T>) {
        bool na = std::isnan(va), nb = std::isnan(vb);
        if (na || nb) {
          if (na && nb) return a < b;
          return largest ? na : nb;
        }
      }
      if (va != vb) return largest ? va > vb : va < vb;
      return a < b;
    };
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        for (int64_t j = 0; j < s.n; ++j) {
          order[j] = j;
          if constexpr (is_float_v<T>)
            key[j] = convert<double>(px[(o * s.n + j) * s.inner + i]);
          else
            key[j] = px[(o * s.n + j) * s.inner + i];
        }
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          int64_t off = (o * k + j) * s.inner + i;
          pv[off] = px[(o * s.n + order[j]) * s.inner + i];
          pi[off] = order[j];
        }
      }
    }
  });
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Dropout

Status infer_dropout(InferContext& ctx) {
  ctx.set_output(0, ctx.input_type(0));
  ctx.set_output(1, DType::kBool, ctx.input_shape(0));
  return Status::ok();
}

Status dropout_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  bool training = false;
  if (ctx.has_input(2)) {
    const Tensor& t = ctx.input(2);
    if (t.numel() != 1) return ctx.error("training_mode must be a scalar, got ", t.type_string());
    training = t.int_at(0) != 0;
  }
  if (training) {
    double ratio = 0.5;
    if (ctx.has_input(1)) {
      const Tensor& r = ctx.input(1);
      if (r.numel() != 1) return ctx.error("ratio must be a scalar, got ", r.type_string());
      ratio = r.double_at(0);
    }
    if (!(ratio >= 0 && ratio < 1)) return ctx.error("ratio must be in [0, 1), got ", ratio);
    // A random mask has no single right answer to check other backends against.
    if (ratio != 0)
      return unsupported(ctx.node().describe(),
                         ": Dropout in training mode with ratio > 0 (random) is not supported");
  }
  ctx.set_output(0, x);
  if (ctx.has_output(1)) {
    FERRITE_ASSIGN_OR_RETURN(Tensor * m, ctx.allocate_output(1, DType::kBool, x.dims()));
    std::fill_n(m->data<bool>(), m->numel(), true);
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// EyeLike, Shrink, Det

Expected<DType> eyelike_dtype(const Node& node, DType input) {
  if (!node.has_attr("dtype")) return input;
  auto d = dtype_from_onnx(static_cast<int>(node.attr_int("dtype")));
  if (!d)
    return unsupported(node.describe(), ": dtype ", node.attr_int("dtype"), " is not supported");
  if (is_float8(*d))  // not in EyeLike's output types (opsets 13-21)
    return err(node.describe(), ": dtype ", node.attr_int("dtype"), " (", dtype_name(*d),
               ") is not allowed");
  return *d;
}

Status infer_eyelike(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  if (in.rank_known() && in.rank() != 2)
    return ctx.error("input must be 2-D, got ", in.to_string());
  FERRITE_ASSIGN_OR_RETURN(DType dt, eyelike_dtype(ctx.node(), ctx.input_dtype(0)));
  ctx.set_output(0, dt, in.rank_known() ? in : Shape(std::vector<Dim>(2)));
  return Status::ok();
}

Status eyelike_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) return ctx.error("input must be 2-D, got ", x.type_string());
  FERRITE_ASSIGN_OR_RETURN(DType dt, eyelike_dtype(ctx.node(), x.dtype()));
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dt, x.dims()));
  int64_t k = ctx.node().attr_int("k");
  int64_t rows = x.dim(0), cols = x.dim(1);
  visit_dtype(dt, [&]<class T>() {
    T* py = y->data<T>();
    for (int64_t i = 0; i < rows; ++i) {
      int64_t j = i + k;
      if (j >= 0 && j < cols) py[i * cols + j] = saturate_cast<T>(1.0);
    }
  });
  return Status::ok();
}

Status shrink_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  double bias = ctx.node().attr_float("bias", 0.0f);
  double lambd = ctx.node().attr_float("lambd", 0.5f);
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.dims()));
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      const T* px = x.data<T>();
      T* py = y->data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        double v = convert<double>(px[i]);
        py[i] = saturate_cast<T>(v < -lambd ? v + bias : v > lambd ? v - bias : 0.0);
      }
    }
  });
  return Status::ok();
}

Status infer_det(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  if (!in.rank_known()) {
    ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
    return Status::ok();
  }
  if (in.rank() < 2) return ctx.error("input must have rank >= 2, got ", in.to_string());
  const Dim& m = in[in.rank() - 2];
  const Dim& n = in[in.rank() - 1];
  if (m.is_static() && n.is_static() && m != n)
    return ctx.error("matrices must be square, got ", in.to_string());
  ctx.set_output(0, ctx.input_dtype(0),
                 Shape(std::vector<Dim>(in.dims().begin(), in.dims().end() - 2)));
  return Status::ok();
}

// Determinant by LU decomposition with partial pivoting, in double.
double determinant(std::vector<double>& a, int64_t n) {
  double det = 1;
  for (int64_t c = 0; c < n; ++c) {
    int64_t p = c;
    for (int64_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r * n + c]) > std::fabs(a[p * n + c])) p = r;
    if (a[p * n + c] == 0) return 0;
    if (p != c) {
      for (int64_t j = 0; j < n; ++j) std::swap(a[p * n + j], a[c * n + j]);
      det = -det;
    }
    double pivot = a[c * n + c];
    det *= pivot;
    for (int64_t r = c + 1; r < n; ++r) {
      double f = a[r * n + c] / pivot;
      if (f == 0) continue;
      for (int64_t j = c + 1; j < n; ++j) a[r * n + j] -= f * a[c * n + j];
    }
  }
  return det;
}

Status det_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t rank = static_cast<int64_t>(x.rank());
  if (rank < 2) return ctx.error("input must have rank >= 2, got ", x.type_string());
  int64_t n = x.dim(rank - 1);
  if (x.dim(rank - 2) != n) return ctx.error("matrices must be square, got ", x.type_string());
  std::vector<int64_t> out_dims(x.dims().begin(), x.dims().end() - 2);
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out_dims));
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (is_float_v<T>) {
      const T* px = x.data<T>();
      T* py = y->data<T>();
      std::vector<double> a(static_cast<size_t>(n * n));
      for (int64_t b = 0; b < y->numel(); ++b) {
        for (int64_t i = 0; i < n * n; ++i) a[i] = convert<double>(px[b * n * n + i]);
        py[b] = convert<T>(determinant(a, n));
      }
    }
  });
  return Status::ok();
}

}  // namespace

void register_misc_ops(OpRegistry& r) {
  using namespace dtypes;
  constexpr DTypeSet kCumSumTypes =
      kFloat | DTypeSet{DType::kI32, DType::kI64, DType::kU32, DType::kU64};
  r.add(OpSchemaBuilder("CumSum")
            .versions(13)
            .inputs(2)
            .outputs(1)
            .attr("exclusive", AttrType::kInt, 0)
            .attr("reverse", AttrType::kInt, 0)
            .types("T", {0}, kCumSumTypes)
            .types("T2", {1}, kIndex)
            .infer(infer_cumsum)
            .kernel(cumsum_kernel));
  r.add(OpSchemaBuilder("TopK")
            .versions(13)
            .inputs(2)
            .outputs(2)
            .attr("axis", AttrType::kInt, -1)
            .attr("largest", AttrType::kInt, 1)
            .attr("sorted", AttrType::kInt, 1)
            .types("T", {0}, kNumeric)
            .types("tensor(int64)", {1}, {DType::kI64})
            .infer(infer_topk)
            .kernel(topk_kernel));
  r.add(OpSchemaBuilder("Dropout")
            .versions(13)
            .inputs(1, 3)
            .outputs(1, 2)
            .optional_attr("seed", AttrType::kInt)
            .types("T", {0}, kFloat)
            .types("T1", {1}, kFloat)
            .types("T2", {2}, kBool)
            .infer(infer_dropout)
            .kernel(dropout_kernel));
  r.add(OpSchemaBuilder("EyeLike")
            .versions(13)
            .inputs(1)
            .outputs(1)
            .optional_attr("dtype", AttrType::kInt)
            .attr("k", AttrType::kInt, 0)
            .types("T1", {0}, kAll)
            .infer(infer_eyelike)
            .kernel(eyelike_kernel));
  r.add(OpSchemaBuilder("Shrink")
            .versions(13)
            .inputs(1)
            .outputs(1)
            .attr("bias", AttrType::kFloat, 0.0f)
            .attr("lambd", AttrType::kFloat, 0.5f)
            .types("T", {0}, kNumeric)
            .infer(infer_same_as_input())
            .kernel(shrink_kernel));
  r.add(OpSchemaBuilder("Det")
            .versions(13)
            .inputs(1)
            .outputs(1)
            .types("T", {0}, kFloat)
            .infer(infer_det)
            .kernel(det_kernel));
  register_resize_ops(r);
  register_sampling_ops(r);
  register_detection_ops(r);
  register_signal_ops(r);
  register_col2im_ops(r);
  register_tfidf_ops(r);
  register_conv_integer_ops(r);
  register_training_ops(r);
  register_ml_ops(r);
}

}  // namespace ferrite
