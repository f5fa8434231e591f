// GEMM-family library kernels for the cpu device (MatMul, Gemm, ferrite.FusedMatMul), f32 only,
// on oneDNN's matmul primitive. FusedMatMul's bias, activation and residual become oneDNN bias
// and post-ops where oneDNN computes them exactly as the op defines; what it cannot fuse (an
// unusual residual broadcast) runs as a loop over the result. Other dtypes, empty tensors and
// shapes oneDNN rejects run the reference kernel.
#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/kernels/onednn_common.h"
#include "ops/helpers.h"

namespace ferrite {

namespace {

using namespace onednn;
using dnnl::algorithm;

enum class Act { kNone, kRelu, kTanh, kSigmoid, kGelu, kGeluTanh };

bool parse_activation(const std::string& a, Act* act) {
  static const std::pair<const char*, Act> kActs[] = {
      {"none", Act::kNone}, {"relu", Act::kRelu},  {"tanh", Act::kTanh},
      {"sigmoid", Act::kSigmoid}, {"gelu", Act::kGelu}, {"gelu_tanh", Act::kGeluTanh}};
  for (const auto& [name, v] : kActs)
    if (a == name) {
      *act = v;
      return true;
    }
  return false;
}

algorithm eltwise_of(Act a) {
  switch (a) {
    case Act::kRelu:
      return algorithm::eltwise_relu;
    case Act::kTanh:
      return algorithm::eltwise_tanh;
    case Act::kSigmoid:
      return algorithm::eltwise_logistic;
    case Act::kGelu:
      return algorithm::eltwise_gelu_erf;
    case Act::kGeluTanh:
      return algorithm::eltwise_gelu_tanh;
    case Act::kNone:
      break;
  }
  return algorithm::undef;
}

// The reference kernel's formulas, for the rare epilogue oneDNN does not fuse.
float activate(Act act, float x) {
  switch (act) {
    case Act::kNone:
      return x;
    case Act::kRelu:
      return x > 0.0f ? x : (x != x ? x : 0.0f);
    case Act::kTanh:
      return std::tanh(x);
    case Act::kSigmoid:
      return x >= 0.0f ? 1.0f / (1.0f + std::exp(-x)) : std::exp(x) / (1.0f + std::exp(x));
    case Act::kGelu:
      return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f));
    case Act::kGeluTanh: {
      const float k = 0.7978845608028654f;
      return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
    }
  }
  return x;
}

int64_t product_of(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t d : v) p *= d;
  return p;
}

// One matmul call: dst[batch.., M, N] = act(A @ B * scale + bias) + residual, all f32.
struct MatmulSpec {
  Dims a_dims, a_strides;  // logical [.., M, K]
  Dims b_dims, b_strides;  // logical [.., K, N] (strides express a transposed B)
  Dims dst_dims;           // plain
  bool bias = false;       // [N]
  Act act = Act::kNone;
  Dims res_dims;  // residual post-op operand ([] = none), plain, same rank as dst (1 = broadcast)
  float scale = 1.0f;
  bool b_constant = false;  // B may be reordered once into oneDNN's preferred layout

  std::string key() const {
    Key k;
    k.add(a_dims).add(a_strides).add(b_dims).add(b_strides).add(dst_dims).add(bias);
    k.add(static_cast<int64_t>(act)).add(res_dims).add(b_constant);
    int32_t bits;
    std::memcpy(&bits, &scale, sizeof bits);
    k.add(bits).add(current_threads());
    return k.str();
  }
};

struct MatmulPlan {
  dnnl::matmul prim;
  memory::desc a, b_have, b_want, bias, dst, res;
  bool act_fused = false, res_fused = false;
  int res_arg = 0;
};

Cache<MatmulPlan>& matmul_cache() {
  static Cache<MatmulPlan> cache;
  return cache;
}

// Builds the primitive, dropping post-ops oneDNN will not run with an optimised implementation
// (the caller then applies them itself). Null when no fast implementation exists at all.
std::shared_ptr<const MatmulPlan> make_matmul_plan(const MatmulSpec& s) {
  auto plan = std::make_shared<MatmulPlan>();
  plan->a = strided_desc(s.a_dims, s.a_strides);
  plan->b_have = strided_desc(s.b_dims, s.b_strides);
  plan->dst = plain_desc(s.dst_dims);
  if (s.bias) {
    Dims bd(s.dst_dims.size(), 1);
    bd.back() = s.dst_dims.back();
    plan->bias = plain_desc(bd);
  }
  const bool want_act = s.act != Act::kNone, want_res = !s.res_dims.empty();
  // Most fused first: activation + residual, then activation only, then neither.
  for (int level = 0; level < 3; ++level) {
    bool act = want_act && level <= 1, res = want_res && level == 0;
    if ((level == 1 && !(want_res && want_act)) || (level == 2 && !want_act && !want_res)) continue;
    try {
      dnnl::post_ops po;
      if (act) po.append_eltwise(1.0f, eltwise_of(s.act), 0.0f, 0.0f);
      if (res) po.append_binary(algorithm::binary_add, plain_desc(s.res_dims));
      dnnl::primitive_attr attr;
      attr.set_post_ops(po);
      if (s.scale != 1.0f) attr.set_output_scales(0, {s.scale});
      memory::desc b_req =
          s.b_constant ? memory::desc(s.b_dims, memory::data_type::f32, memory::format_tag::any)
                       : plan->b_have;
      dnnl::matmul::desc d(plan->a, b_req, plan->bias, plan->dst);
      dnnl::matmul::primitive_desc pd(d, attr, engine());
      if (is_reference_impl(pd)) continue;
      plan->b_want = pd.weights_desc();
      plan->prim = dnnl::matmul(pd);
      plan->act_fused = act;
      plan->res_fused = res;
      plan->res = res ? plain_desc(s.res_dims) : memory::desc();
      plan->res_arg = act ? 1 : 0;
      return plan;
    } catch (const dnnl::error&) {
    }
  }
  return nullptr;
}

// y[i] += r[broadcast offset of i] over a dst of dims `out`; rows run on the pool.
void add_broadcast(float* y, const float* r, const std::vector<int64_t>& out,
                   const std::vector<int64_t>& rstrides, float beta, ThreadPool& pool) {
  const int64_t n = out.back(), rows = n ? product_of(out) / n : 0;
  const int64_t col_stride = rstrides.back();
  pool.parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)),
                    [&](int64_t r0, int64_t r1) {
                      for (int64_t row = r0; row < r1; ++row) {
                        int64_t off = 0, rem = row;
                        for (size_t d = out.size() - 1; d-- > 0;) {
                          off += (rem % out[d]) * rstrides[d];
                          rem /= out[d];
                        }
                        float* yr = y + row * n;
                        const float* rr = r + off;
                        if (col_stride == 0) {
                          const float v = beta * rr[0];
                          for (int64_t j = 0; j < n; ++j) yr[j] += v;
                        } else if (beta == 1.0f) {
                          for (int64_t j = 0; j < n; ++j) yr[j] += rr[j];
                        } else {
                          for (int64_t j = 0; j < n; ++j) yr[j] += beta * rr[j];
                        }
                      }
                    });
}

// Runs `s` on the given operands; false when oneDNN has no fast implementation for it.
bool run_matmul(const MatmulSpec& s, const Node& node, const Tensor& a, const Tensor& b,
                size_t b_input, const Tensor* bias, const Tensor* res,
                const std::vector<int64_t>& res_strides, Tensor& y, ThreadPool& pool) {
  ThreadScope threads(pool.size());
  auto plan = matmul_cache().get(s.key(), [&] { return make_matmul_plan(s); });
  if (!plan) return false;
  memory bm = operand(b, plan->b_have, plan->b_want,
                      s.b_constant && is_constant_input(node, b_input, b), 0);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(plan->a, a)},
                                       {DNNL_ARG_WEIGHTS, bm},
                                       {DNNL_ARG_DST, wrap(plan->dst, y)}};
  if (s.bias) args.emplace(DNNL_ARG_BIAS, wrap(plan->bias, *bias));
  if (plan->res_fused)
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(plan->res_arg) | DNNL_ARG_SRC_1,
                 wrap(plan->res, *res));
  plan->prim.execute(stream(), args);
  stream().wait();
  float* py = y.data<float>();
  if (s.act != Act::kNone && !plan->act_fused) {
    pool.parallel_for(y.numel(), 16384, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) py[i] = activate(s.act, py[i]);
    });
  }
  if (res && !plan->res_fused) add_broadcast(py, res->data<float>(), y.dims(), res_strides, 1.0f, pool);
  return true;
}

bool all_ones(const std::vector<int64_t>& v) {
  for (int64_t d : v)
    if (d != 1) return false;
  return true;
}

std::vector<int64_t> pad_front(std::vector<int64_t> v, size_t rank) {
  v.insert(v.begin(), rank - std::min(rank, v.size()), 1);
  return v;
}

std::vector<int64_t> plain_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * std::max<int64_t>(dims[i], 1);
  return s;
}

// Fills the A/B/dst part of `s` for a (batched, broadcasting) matmul of a [.., M, K] by b
// [.., K, N] (stored [.., N, K] when `tb`). A B without batch dims folds A's batch into M, so
// the common "activations x weight matrix" case is one 2-D GEMM. Returns the output dims.
std::vector<int64_t> plan_shapes(const std::vector<int64_t>& ad, const std::vector<int64_t>& bd,
                                 const std::vector<int64_t>& batch, bool tb, MatmulSpec& s) {
  const int64_t M = ad[ad.size() - 2], K = ad.back();
  const int64_t N = tb ? bd[bd.size() - 2] : bd.back();
  std::vector<int64_t> out = batch;
  out.insert(out.end(), {M, N});
  const std::vector<int64_t> b_batch(bd.begin(), bd.end() - 2);
  if (all_ones(b_batch)) {
    const int64_t rows = product_of(out) / std::max<int64_t>(N, 1);
    s.a_dims = {rows, K};
    s.a_strides = {K, 1};
    s.b_dims = {K, N};
    s.b_strides = tb ? Dims{1, K} : Dims{N, 1};
    s.dst_dims = {rows, N};
    return out;
  }
  const size_t nd = batch.size() + 2;
  s.a_dims = pad_front(ad, nd);
  s.a_strides = plain_strides(s.a_dims);
  std::vector<int64_t> bstore = pad_front(bd, nd);
  s.b_strides = plain_strides(bstore);
  s.b_dims = bstore;
  if (tb) {
    std::swap(s.b_dims[nd - 2], s.b_dims[nd - 1]);
    std::swap(s.b_strides[nd - 2], s.b_strides[nd - 1]);
  }
  s.dst_dims = out;
  return out;
}

bool any_zero(const std::vector<int64_t>& v) {
  for (int64_t d : v)
    if (d == 0) return true;
  return false;
}

// ---- MatMul -------------------------------------------------------------------------------

bool matmul_accepts(const Node& node) { return input_is_f32(node, 0) && input_is_f32(node, 1); }

Status matmul_run(KernelContext& ctx, ThreadPool& pool) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != DType::kF32 || b.dtype() != DType::kF32 || a.rank() == 0 || b.rank() == 0)
    return run_reference(ctx);
  std::vector<int64_t> ad = a.dims(), bd = b.dims();
  const bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) ad.insert(ad.begin(), 1);
  if (b_vec) bd.push_back(1);
  if (bd[bd.size() - 2] != ad.back() || any_zero(ad) || any_zero(bd)) return run_reference(ctx);
  std::vector<int64_t> a_batch(ad.begin(), ad.end() - 2), b_batch(bd.begin(), bd.end() - 2);
  auto batch = broadcast_dims(ctx, a_batch, b_batch);
  if (!batch) return run_reference(ctx);
  MatmulSpec s;
  std::vector<int64_t> full = plan_shapes(ad, bd, *batch, false, s);
  s.b_constant = is_constant_input(ctx.node(), 1, b);
  std::vector<int64_t> out = *batch;
  if (!a_vec) out.push_back(full[full.size() - 2]);
  if (!b_vec) out.push_back(full.back());
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kF32, out));
  if (!run_matmul(s, ctx.node(), a, b, 1, nullptr, nullptr, {}, *y, pool)) return run_reference(ctx);
  return Status::ok();
}

// ---- Gemm ---------------------------------------------------------------------------------

bool gemm_accepts(const Node& node) {
  return input_is_f32(node, 0) && input_is_f32(node, 1) &&
         (!node.input(2) || input_is_f32(node, 2));
}

Status gemm_run(KernelContext& ctx, ThreadPool& pool) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor* c = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (a.dtype() != DType::kF32 || b.dtype() != DType::kF32 || a.rank() != 2 || b.rank() != 2 ||
      (c && c->dtype() != DType::kF32))
    return run_reference(ctx);
  const Node& node = ctx.node();
  const bool ta = node.attr_int("transA") != 0, tb = node.attr_int("transB") != 0;
  const float alpha = node.attr_float("alpha", 1.0f), beta = node.attr_float("beta", 1.0f);
  const int64_t M = ta ? a.dim(1) : a.dim(0), K = ta ? a.dim(0) : a.dim(1);
  const int64_t Kb = tb ? b.dim(1) : b.dim(0), N = tb ? b.dim(0) : b.dim(1);
  if (K != Kb || M == 0 || N == 0 || K == 0 || (c && c->rank() > 2)) return run_reference(ctx);
  const std::vector<int64_t> out{M, N};
  std::vector<int64_t> cd;
  if (c) {
    cd = pad_front(c->dims(), 2);
    if ((cd[0] != 1 && cd[0] != M) || (cd[1] != 1 && cd[1] != N)) return run_reference(ctx);
  }
  MatmulSpec s;
  s.a_dims = {M, K};
  s.a_strides = ta ? Dims{1, M} : Dims{K, 1};
  s.b_dims = {K, N};
  s.b_strides = tb ? Dims{1, K} : Dims{N, 1};
  s.dst_dims = out;
  s.b_constant = is_constant_input(node, 1, b);
  // A per-column C with unit factors is exactly oneDNN's bias; anything else is added after.
  const bool c_as_bias = c && alpha == 1.0f && beta == 1.0f && cd[0] == 1 && cd[1] == N;
  s.bias = c_as_bias;
  s.scale = alpha;
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kF32, out));
  Tensor bias_view = c_as_bias ? c->reshaped({N}) : Tensor();
  if (!run_matmul(s, node, a, b, 1, c_as_bias ? &bias_view : nullptr, nullptr, {}, *y, pool))
    return run_reference(ctx);
  // Also for beta = 0: the reference adds 0 * C, which keeps C's NaN and infinities.
  if (c && !c_as_bias)
    add_broadcast(y->data<float>(), c->data<float>(), out, broadcast_strides(c->dims(), out), beta,
                  pool);
  return Status::ok();
}

// ---- ferrite.FusedMatMul --------------------------------------------------------------------

bool fused_matmul_accepts(const Node& node) {
  Act act;
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (node.input(i) && !input_is_f32(node, i)) return false;
  return parse_activation(node.attr_string("activation"), &act);
}

Status fused_matmul_run(KernelContext& ctx, ThreadPool& pool) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const Tensor* res = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  if (a.dtype() != DType::kF32 || b.dtype() != DType::kF32 || a.rank() < 2 || b.rank() < 2 ||
      (bias && bias->dtype() != DType::kF32) || (res && res->dtype() != DType::kF32))
    return run_reference(ctx);
  MatmulSpec s;
  if (!parse_activation(ctx.node().attr_string("activation"), &s.act)) return run_reference(ctx);
  const bool tb = ctx.node().attr_int("transB") != 0;
  const std::vector<int64_t>& ad = a.dims();
  const std::vector<int64_t>& bd = b.dims();
  const int64_t K = ad.back(), Kb = tb ? bd.back() : bd[bd.size() - 2];
  const int64_t N = tb ? bd[bd.size() - 2] : bd.back();
  if (K != Kb || any_zero(ad) || any_zero(bd)) return run_reference(ctx);
  if (bias && (bias->rank() != 1 || bias->dim(0) != N)) return run_reference(ctx);
  std::vector<int64_t> a_batch(ad.begin(), ad.end() - 2), b_batch(bd.begin(), bd.end() - 2);
  auto batch = broadcast_dims(ctx, a_batch, b_batch);
  if (!batch) return run_reference(ctx);
  std::vector<int64_t> out = plan_shapes(ad, bd, *batch, tb, s);
  std::vector<int64_t> res_strides;
  if (res) {
    if (res->rank() > out.size()) return run_reference(ctx);
    std::vector<int64_t> rd = pad_front(res->dims(), out.size());
    for (size_t i = 0; i < out.size(); ++i)
      if (rd[i] != out[i] && rd[i] != 1) return run_reference(ctx);
    res_strides = broadcast_strides(res->dims(), out);
    // Residuals oneDNN takes as a binary post-op: the full output, or one row broadcast.
    if (rd == out) {
      s.res_dims = s.dst_dims;
    } else if (all_ones({rd.begin(), rd.end() - 1}) && rd.back() == out.back()) {
      s.res_dims = Dims(s.dst_dims.size(), 1);
      s.res_dims.back() = out.back();
    }
  }
  s.bias = bias != nullptr;
  s.b_constant = is_constant_input(ctx.node(), 1, b);
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kF32, out));
  // A residual oneDNN does not take is added by run_matmul's loop; only a fused one is passed.
  if (!run_matmul(s, ctx.node(), a, b, 1, bias, res, res_strides, *y, pool))
    return run_reference(ctx);
  return Status::ok();
}

}  // namespace

void register_cpu_gemm_kernels(CpuKernelRegistry& r) {
  r.add("", "MatMul", {matmul_accepts, matmul_run});
  r.add("", "Gemm", {gemm_accepts, gemm_run});
  r.add("ferrite", "FusedMatMul", {fused_matmul_accepts, fused_matmul_run});
}

}  // namespace ferrite
