// Matrix products: MatMul (NumPy semantics, batched with broadcasting) and Gemm.
#include "ops/gemm.h"
#include "ops/helpers.h"

namespace ferrite {

namespace {

// Runs f.template operator()<T, Acc>() for the dtypes that have a reference GEMM.
template <class F>
bool visit_gemm_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kF32: f.template operator()<float, float>(); return true;
    case DType::kF64: f.template operator()<double, double>(); return true;
    case DType::kF16: f.template operator()<Half, float>(); return true;
    case DType::kBF16: f.template operator()<BFloat16, float>(); return true;
    case DType::kI32: f.template operator()<int32_t, int64_t>(); return true;
    case DType::kI64: f.template operator()<int64_t, int64_t>(); return true;
    case DType::kU32: f.template operator()<uint32_t, uint64_t>(); return true;
    case DType::kU64: f.template operator()<uint64_t, uint64_t>(); return true;
    default: return false;
  }
}
constexpr DTypeSet kGemmTypes{DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
                              DType::kI32,  DType::kI64, DType::kU32, DType::kU64};

Status infer_matmul(InferContext& ctx) {
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  if (!a.rank_known() || !b.rank_known()) {
    ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
    return Status::ok();
  }
  if (a.rank() == 0 || b.rank() == 0) return ctx.error("MatMul inputs must have rank >= 1");
  std::vector<Dim> ad = a.dims(), bd = b.dims();
  bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) ad.insert(ad.begin(), Dim(1));
  if (b_vec) bd.push_back(Dim(1));
  const Dim& ka = ad.back();
  const Dim& kb = bd[bd.size() - 2];
  if (ka.is_static() && kb.is_static() && ka != kb)
    return ctx.error("inner dimensions differ: ", a.to_string(), " x ", b.to_string());
  std::string e;
  auto batch = broadcast_shapes(Shape(std::vector<Dim>(ad.begin(), ad.end() - 2)),
                                Shape(std::vector<Dim>(bd.begin(), bd.end() - 2)), &e);
  if (!batch) return ctx.error(e);
  std::vector<Dim> out = batch->dims();
  if (!a_vec) out.push_back(ad[ad.size() - 2]);
  if (!b_vec) out.push_back(bd.back());
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
  return Status::ok();
}

Status matmul_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.rank() == 0 || b.rank() == 0) return ctx.error("MatMul inputs must have rank >= 1");
  std::vector<int64_t> ad = a.dims(), bd = b.dims();
  bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) ad.insert(ad.begin(), 1);
  if (b_vec) bd.push_back(1);
  int64_t M = ad[ad.size() - 2], K = ad.back(), N = bd.back();
  if (bd[bd.size() - 2] != K)
    return ctx.error("inner dimensions differ: ", a.type_string(), " x ", b.type_string());
  std::vector<int64_t> a_batch(ad.begin(), ad.end() - 2), b_batch(bd.begin(), bd.end() - 2);
  FERRITE_ASSIGN_OR_RETURN(auto batch, broadcast_dims(ctx, a_batch, b_batch));
  std::vector<int64_t> out = batch;
  if (!a_vec) out.push_back(M);
  if (!b_vec) out.push_back(N);
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, a.dtype(), out));
  int64_t nbatch = 1;
  for (int64_t d : batch) nbatch *= d;
  // Batch offsets (in matrices) of a and b for each output batch index.
  std::vector<int64_t> sa = broadcast_strides(a_batch, batch), sb = broadcast_strides(b_batch, batch);
  std::vector<int64_t> zero(batch.size(), 0);
  Status st;
  bool ok = visit_gemm_dtype(a.dtype(), [&]<class T, class Acc>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* py = y->data<T>();
    std::array<std::vector<int64_t>, 2> strides{sa, sb};
    if (batch.empty()) {
      reference_gemm<T, Acc>(M, N, K, pa, K, 1, pb, N, 1, py, N, false);
      return;
    }
    for_each_index<2>(batch, strides, [&](int64_t i, const std::array<int64_t, 2>& off) {
      reference_gemm<T, Acc>(M, N, K, pa + off[0] * M * K, K, 1, pb + off[1] * K * N, N, 1,
                             py + i * M * N, N, false);
    });
    (void)nbatch;
  });
  if (!ok) return ctx.error("dtype ", dtype_name(a.dtype()), " is not supported");
  return st;
}

Status infer_gemm(InferContext& ctx) {
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  if ((a.rank_known() && a.rank() != 2) || (b.rank_known() && b.rank() != 2))
    return ctx.error("Gemm inputs A and B must be 2-D, got ", a.to_string(), " and ", b.to_string());
  bool ta = ctx.node().attr_int("transA") != 0, tb = ctx.node().attr_int("transB") != 0;
  Dim m = a.rank_known() ? a[ta ? 1 : 0] : Dim::unknown();
  Dim ka = a.rank_known() ? a[ta ? 0 : 1] : Dim::unknown();
  Dim kb = b.rank_known() ? b[tb ? 1 : 0] : Dim::unknown();
  Dim n = b.rank_known() ? b[tb ? 0 : 1] : Dim::unknown();
  if (ka.is_static() && kb.is_static() && ka != kb)
    return ctx.error("inner dimensions differ: ", a.to_string(), " x ", b.to_string(),
                     " (transA=", ta, ", transB=", tb, ")");
  Shape out(std::vector<Dim>{m, n});
  if (ctx.has_input(2)) {
    std::string e;
    auto bc = broadcast_shapes(ctx.input_shape(2), out, &e);
    if (!bc) return ctx.error("bias C is not broadcastable to the output: ", e);
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
  return Status::ok();
}

Status gemm_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.rank() != 2 || b.rank() != 2) return ctx.error("Gemm inputs A and B must be 2-D");
  bool ta = ctx.node().attr_int("transA") != 0, tb = ctx.node().attr_int("transB") != 0;
  float alpha = ctx.node().attr_float("alpha", 1.0f), beta = ctx.node().attr_float("beta", 1.0f);
  int64_t M = ta ? a.dim(1) : a.dim(0), K = ta ? a.dim(0) : a.dim(1);
  int64_t Kb = tb ? b.dim(1) : b.dim(0), N = tb ? b.dim(0) : b.dim(1);
  if (K != Kb) return ctx.error("inner dimensions differ: ", a.type_string(), " x ", b.type_string());
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, a.dtype(), {M, N}));
  const Tensor* c = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (c) {
    auto bc = broadcast_dims(ctx, c->dims(), {M, N});
    if (!bc || *bc != std::vector<int64_t>{M, N})
      return ctx.error("bias C ", c->type_string(), " is not broadcastable to [", M, ",", N, "]");
  }
  bool ok = visit_gemm_dtype(a.dtype(), [&]<class T, class Acc>() {
    T* py = y->data<T>();
    reference_gemm<T, Acc>(M, N, K, a.data<T>(), ta ? 1 : K, ta ? M : 1, b.data<T>(), tb ? 1 : N,
                           tb ? K : 1, py, N, false);
    std::vector<int64_t> cs = c ? broadcast_strides(c->dims(), {M, N}) : std::vector<int64_t>{0, 0};
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        Acc v = static_cast<Acc>(convert<Acc>(py[m * N + n]) * static_cast<Acc>(alpha));
        if (c) v += static_cast<Acc>(beta) * convert<Acc>(c->data<T>()[m * cs[0] + n * cs[1]]);
        py[m * N + n] = convert<T>(v);
      }
    }
  });
  if (!ok) return ctx.error("dtype ", dtype_name(a.dtype()), " is not supported");
  return Status::ok();
}

}  // namespace

void register_math_ops(OpRegistry& r) {
  r.add(OpSchemaBuilder("MatMul").versions(13).inputs(2).outputs(1)
            .types("T", {0, 1}, kGemmTypes).infer(infer_matmul).kernel(matmul_kernel));
  r.add(OpSchemaBuilder("Gemm").versions(13).inputs(2, 3).outputs(1)
            .attr("alpha", AttrType::kFloat, 1.0f).attr("beta", AttrType::kFloat, 1.0f)
            .attr("transA", AttrType::kInt, 0).attr("transB", AttrType::kInt, 0)
            .types("T", {0, 1, 2}, kGemmTypes).infer(infer_gemm).kernel(gemm_kernel));
}

}  // namespace ferrite
