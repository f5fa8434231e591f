// GEMM-family library kernels for the cpu device (MatMul, Gemm, ferrite.FusedMatMul), f32 only,
// on oneDNN's matmul primitive. FusedMatMul's bias, activation and residual become oneDNN bias
// and post-ops where oneDNN computes them exactly as the op defines; what it does not fuse runs
// as a loop over each finished block. Other dtypes, empty tensors and shapes oneDNN rejects run
// the reference kernel.
//
// Threads: every GEMM is cut into blocks (batch items, then row or column blocks) that run as
// single-threaded oneDNN calls on ferrite's thread pool; see ThreadScope for why.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/kernels/onednn_common.h"
#include "backends/cpu/kernels/onednn_gemm.h"
#include "ops/helpers.h"

namespace ferrite {

namespace onednn {

namespace {

using dnnl::algorithm;

// The epilogue steps after the product (and the column bias, which oneDNN's bias takes), in the
// order the problem defines them.
enum class Post { kRowBias, kRes, kAct };

std::vector<Post> epilogue_order(bool row_bias, bool res, const Activation& act, bool res_first) {
  std::vector<Post> order;
  if (row_bias) order.push_back(Post::kRowBias);
  if (res && res_first) order.push_back(Post::kRes);
  if (!act.none()) order.push_back(Post::kAct);
  if (res && !res_first) order.push_back(Post::kRes);
  return order;
}

// One block's matmul: [m, k] x [k, n] into a dense [m, n] destination.
struct BlockSpec {
  int64_t m, n, k, a_rs, a_cs, b_rs, b_cs;
  bool b_packed, col_bias, row_bias;
  Activation act;
  int res;  // 0 none, 1 dense [m, n], 2 one [n] row
  bool res_first;
  bool res_fusable;  // the block writes straight into y, so oneDNN may read the residual
  float scale;

  std::string key() const {
    Key key;
    key.add(m).add(n).add(k).add(a_rs).add(a_cs).add(b_rs).add(b_cs).add(b_packed);
    key.add(col_bias).add(row_bias).add(static_cast<int64_t>(act.code())).add(res).add(res_first);
    key.add(res_fusable);
    for (float f : {act.alpha, act.beta, scale}) {
      int32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      key.add(bits);
    }
    return key.str();
  }
};

struct BlockPlan {
  dnnl::matmul prim;
  memory::desc a, b_have, b_want, bias, dst, row_bias, res, scratchpad;
  std::vector<Post> order;
  size_t fused = 0;  // order[0..fused) run inside oneDNN, the rest in the block loop
  int row_bias_arg = -1, res_arg = -1;  // post-op indices of the binary inputs
  bool row_bias_native = false;         // the row bias is oneDNN's bias input
};

// Whether the steps oneDNN did not take can run as one pass over a block `nb` columns wide: it
// spans whole rows of y (so its rows are contiguous, and a dense residual's too) and no step is
// per row (a row bias).
bool unfused_whole_block(const BlockPlan& plan, const GemmProblem& p, int64_t nb) {
  if (nb != p.N) return false;
  for (size_t j = plan.fused; j < plan.order.size(); ++j)
    if (plan.order[j] == Post::kRowBias || (plan.order[j] == Post::kRes && !p.res_full))
      return false;
  return true;
}

Cache<BlockPlan>& plan_cache() {
  static Cache<BlockPlan> cache;
  return cache;
}

// Builds the primitive with the longest prefix of the epilogue that oneDNN runs with a fast
// implementation (the block loop applies the rest). Null when no fast implementation exists.
std::shared_ptr<const BlockPlan> make_plan(const BlockSpec& s, bool row_bias_native);

std::shared_ptr<const BlockPlan> make_plan(const BlockSpec& s) {
  // A row bias is first offered as oneDNN's own bias of shape [m, 1].
  if (s.row_bias && !s.col_bias)
    if (auto plan = make_plan(s, true); plan && plan->fused == plan->order.size()) return plan;
  return make_plan(s, false);
}

std::shared_ptr<const BlockPlan> make_plan(const BlockSpec& s, bool row_bias_native) {
  auto plan = std::make_shared<BlockPlan>();
  plan->a = strided_desc({s.m, s.k}, {s.a_rs, s.a_cs});
  plan->b_have = strided_desc({s.k, s.n}, {s.b_rs, s.b_cs});
  plan->dst = plain_desc({s.m, s.n});
  if (s.col_bias) plan->bias = plain_desc({1, s.n});
  if (row_bias_native) plan->bias = plain_desc({s.m, 1});
  plan->row_bias_native = row_bias_native;
  plan->order = epilogue_order(s.row_bias && !row_bias_native, s.res != 0, s.act, s.res_first);
  const memory::desc row_md = plain_desc({s.m, 1});
  const memory::desc res_md = plain_desc({s.res == 1 ? s.m : 1, s.n});
  size_t fusable = 0;
  while (fusable < plan->order.size() && (plan->order[fusable] != Post::kRes || s.res_fusable) &&
         (plan->order[fusable] != Post::kAct || can_fuse_activation(s.act)))
    ++fusable;
  for (size_t fused = fusable + 1; fused-- > 0;) {
    try {
      dnnl::post_ops po;
      int row_arg = -1, res_arg = -1;
      for (size_t j = 0; j < fused; ++j) {
        switch (plan->order[j]) {
          case Post::kRowBias:
            row_arg = po.len();
            po.append_binary(algorithm::binary_add, row_md);
            break;
          case Post::kRes:
            res_arg = po.len();
            po.append_binary(algorithm::binary_add, res_md);
            break;
          case Post::kAct:
            append_activation(po, s.act);
            break;
        }
      }
      dnnl::primitive_attr attr = base_attr();
      attr.set_post_ops(po);
      if (s.scale != 1.0f) attr.set_output_scales(0, {s.scale});
      const memory::desc b_req =
          s.b_packed ? memory::desc({s.k, s.n}, memory::data_type::f32, memory::format_tag::any)
                     : plan->b_have;
      dnnl::matmul::desc d(plan->a, b_req, plan->bias, plan->dst);
      dnnl::matmul::primitive_desc pd(d, attr, engine());
      if (is_reference_impl(pd)) continue;
      plan->b_want = pd.weights_desc();
      plan->scratchpad = pd.scratchpad_desc();
      plan->prim = dnnl::matmul(pd);
      plan->fused = fused;
      plan->row_bias_arg = row_arg;
      plan->res_arg = res_arg;
      if (row_arg >= 0) plan->row_bias = row_md;
      if (res_arg >= 0) plan->res = res_md;
      return plan;
    } catch (const dnnl::error&) {
    }
  }
  return nullptr;
}

// Even split of [0, n) into `parts` ranges; range j.
std::pair<int64_t, int64_t> part(int64_t n, int64_t parts, int64_t j) {
  const int64_t base = n / parts, extra = n % parts;
  const int64_t begin = j * base + std::min(j, extra);
  return {begin, begin + base + (j < extra ? 1 : 0)};
}

}  // namespace

bool run_gemm(const GemmProblem& p, ThreadPool& pool) {
  if (run_gemv(p, pool)) return true;
  ThreadScope single(1);
  const int64_t items = static_cast<int64_t>(p.a_off.size());
  const int64_t threads = pool.size();
  // Blocks per item: none when the items alone keep every thread busy (or the work is tiny);
  // else row blocks, or column blocks when there are few rows (then each thread reads only its
  // part of B, which dominates the traffic).
  int64_t mparts = 1, nparts = 1;
  const int64_t splits = (threads + items - 1) / items;
  if (splits > 1 && p.M * p.N * p.K >= (int64_t{1} << 16)) {
    if (p.M >= 64 * splits)
      mparts = splits;
    else if (p.N >= 64 * splits)
      nparts = splits;
    else if (p.M >= 8 * splits)
      mparts = splits;
  }
  const bool packed = p.b_constant != nullptr;
  BlockSpec base{0,
                 0,
                 p.K,
                 p.a_rs,
                 p.a_cs,
                 p.b_rs,
                 p.b_cs,
                 packed,
                 p.col_bias != nullptr,
                 p.row_bias != nullptr,
                 p.act,
                 p.res ? (p.res_full ? 1 : 2) : 0,
                 p.res_first,
                 nparts == 1,  // a residual is fused only when blocks write straight into y
                 p.scale};
  // Plans for the (at most two) block heights and widths, made before the parallel loop.
  struct Shape {
    int64_t m, n;
    std::shared_ptr<const BlockPlan> plan;
  };
  std::vector<Shape> shapes;
  auto plan_for = [&](int64_t m, int64_t n) -> const BlockPlan* {
    for (const Shape& s : shapes)
      if (s.m == m && s.n == n) return s.plan.get();
    BlockSpec spec = base;
    spec.m = m;
    spec.n = n;
    shapes.push_back({m, n, plan_cache().get(spec.key(), [&] { return make_plan(spec); })});
    return shapes.back().plan.get();
  };
  std::vector<const BlockPlan*> mplans(mparts * nparts);
  for (int64_t mj = 0; mj < mparts; ++mj)
    for (int64_t nj = 0; nj < nparts; ++nj) {
      auto [m0, m1] = part(p.M, mparts, mj);
      auto [n0, n1] = part(p.N, nparts, nj);
      mplans[mj * nparts + nj] = plan_for(m1 - m0, n1 - n0);
      if (!mplans[mj * nparts + nj]) return false;
    }
  // B (or its column blocks) reordered once when constant (cached across calls).
  std::vector<memory> bmem(mparts * nparts);
  if (packed)
    for (int64_t j = 0; j < mparts * nparts; ++j) {
      const int64_t n0 = part(p.N, nparts, j % nparts).first;
      bmem[j] = operand(p.b_constant, p.b + p.b_off[0] + n0 * p.b_cs, mplans[j]->b_have,
                        mplans[j]->b_want, 0);
    }
  const int64_t blocks = mparts * nparts;
  pool.parallel_for(items * blocks, 1, [&](int64_t t0, int64_t t1) {
    ThreadScope one(1);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = t / blocks, mj = (t % blocks) / nparts, nj = t % nparts;
      auto [m0, m1] = part(p.M, mparts, mj);
      auto [n0, n1] = part(p.N, nparts, nj);
      const int64_t mb = m1 - m0, nb = n1 - n0;
      const BlockPlan& plan = *mplans[mj * nparts + nj];
      float* yb = p.y + i * p.M * p.N + m0 * p.N + n0;
      memory dst = nparts == 1 ? wrap(plan.dst, yb) : scratch(plan.dst, 3);
      std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC, wrap(plan.a, p.a + p.a_off[i] + m0 * p.a_rs)},
          {DNNL_ARG_WEIGHTS,
           packed ? bmem[mj * nparts + nj] : wrap(plan.b_have, p.b + p.b_off[i] + n0 * p.b_cs)},
          {DNNL_ARG_DST, dst}};
      if (p.col_bias) args.emplace(DNNL_ARG_BIAS, wrap(plan.bias, p.col_bias + n0));
      if (plan.row_bias_native) args.emplace(DNNL_ARG_BIAS, wrap(plan.bias, p.row_bias + m0));
      const float* res_block =
          p.res ? (p.res_full ? p.res + i * p.M * p.N + m0 * p.N : p.res) : nullptr;
      if (plan.row_bias_arg >= 0)
        args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(plan.row_bias_arg) | DNNL_ARG_SRC_1,
                     wrap(plan.row_bias, p.row_bias + m0));
      if (plan.res_arg >= 0)
        args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(plan.res_arg) | DNNL_ARG_SRC_1,
                     wrap(plan.res, res_block));
      execute(plan.prim, plan.scratchpad, std::move(args));
      if (nparts > 1) {
        const float* src = static_cast<const float*>(dst.get_data_handle());
        for (int64_t r = 0; r < mb; ++r) std::copy(src + r * nb, src + (r + 1) * nb, yb + r * p.N);
      }
      // The epilogue steps oneDNN did not take, in the problem's order.
      if (plan.fused == plan.order.size()) continue;
      if (unfused_whole_block(plan, p, nb)) {
        // One pass per step over the whole block, not one call per row (a 1x1 convolution's
        // rows are pixels of a few dozen channels each).
        for (size_t j = plan.fused; j < plan.order.size(); ++j)
          apply_epilogue(yb, plan.order[j] == Post::kRes ? res_block : nullptr, mb * nb,
                         plan.order[j] == Post::kRes ? Activation() : p.act);
        continue;
      }
      for (int64_t r = 0; r < mb; ++r) {
        float* row = yb + r * p.N;
        for (size_t j = plan.fused; j < plan.order.size(); ++j) {
          switch (plan.order[j]) {
            case Post::kRowBias: {
              const float bv = p.row_bias[m0 + r];
              for (int64_t c = 0; c < nb; ++c) row[c] += bv;
              break;
            }
            case Post::kRes: {
              const float* rr = (p.res_full ? res_block + r * p.N : p.res) + n0;
              for (int64_t c = 0; c < nb; ++c) row[c] += rr[c];
              break;
            }
            case Post::kAct:
              apply_epilogue(row, nullptr, nb, p.act);
              break;
          }
        }
      }
    }
  });
  return true;
}

}  // namespace onednn

namespace {

using namespace onednn;

int64_t product_of(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t d : v) p *= d;
  return p;
}

bool all_ones(const std::vector<int64_t>& v) {
  for (int64_t d : v)
    if (d != 1) return false;
  return true;
}

bool any_zero(const std::vector<int64_t>& v) {
  for (int64_t d : v)
    if (d == 0) return true;
  return false;
}

std::vector<int64_t> pad_front(std::vector<int64_t> v, size_t rank) {
  v.insert(v.begin(), rank - std::min(rank, v.size()), 1);
  return v;
}

// y[i] += beta * r[broadcast offset of i] over a dst of dims `out`; rows run on the pool.
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

// Fills A/B/batch of `p` for a batched, broadcasting matmul of a [.., M, K] by b [.., K, N]
// (stored [.., N, K] when `tb`); returns the output dims [batch.., M, N]. A B without batch
// dims folds A's batch into M, so "activations x weight matrix" is one 2-D GEMM.
std::vector<int64_t> plan_matmul(const Tensor& a, const std::vector<int64_t>& ad, const Tensor& b,
                                 const std::vector<int64_t>& bd, const std::vector<int64_t>& batch,
                                 bool tb, GemmProblem& p) {
  const int64_t M = ad[ad.size() - 2], K = ad.back();
  const int64_t N = tb ? bd[bd.size() - 2] : bd.back();
  std::vector<int64_t> out = batch;
  out.insert(out.end(), {M, N});
  p.a = a.data<float>();
  p.b = b.data<float>();
  p.K = K;
  p.N = N;
  p.a_rs = K;
  p.a_cs = 1;
  p.b_rs = tb ? 1 : N;
  p.b_cs = tb ? K : 1;
  const std::vector<int64_t> b_batch(bd.begin(), bd.end() - 2);
  if (all_ones(b_batch)) {
    p.M = product_of(out) / std::max<int64_t>(N, 1);
    p.a_off = {0};
    p.b_off = {0};
    return out;
  }
  p.M = M;
  const std::vector<int64_t> a_batch(ad.begin(), ad.end() - 2);
  std::array<std::vector<int64_t>, 2> strides{broadcast_strides(a_batch, batch),
                                              broadcast_strides(b_batch, batch)};
  p.a_off.assign(product_of(batch), 0);
  p.b_off.assign(product_of(batch), 0);
  for_each_index<2>(batch, strides, [&](int64_t i, const std::array<int64_t, 2>& off) {
    p.a_off[i] = off[0] * M * K;
    p.b_off[i] = off[1] * K * N;
  });
  return out;
}

// ---- MatMul -------------------------------------------------------------------------------

bool matmul_accepts(const Node& node) {
  return input_is_f32(node, 0) && input_is_f32(node, 1);
}

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
  GemmProblem p;
  std::vector<int64_t> full = plan_matmul(a, ad, b, bd, *batch, false, p);
  if (p.b_off.size() == 1 && packable_gemm_weight(ctx.node(), 1, b)) p.b_constant = &b;
  std::vector<int64_t> out = *batch;
  if (!a_vec) out.push_back(full[full.size() - 2]);
  if (!b_vec) out.push_back(full.back());
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output_uninitialized(0, DType::kF32, out));
  p.y = y->data<float>();
  if (!run_gemm(p, pool)) return run_reference(ctx);
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
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output_uninitialized(0, DType::kF32, out));
  GemmProblem p;
  p.M = M;
  p.N = N;
  p.K = K;
  p.a = a.data<float>();
  p.a_rs = ta ? 1 : K;
  p.a_cs = ta ? M : 1;
  p.b = b.data<float>();
  p.b_rs = tb ? 1 : N;
  p.b_cs = tb ? K : 1;
  p.y = y->data<float>();
  if (packable_gemm_weight(node, 1, b)) p.b_constant = &b;
  // A per-column C with unit factors is exactly oneDNN's bias; anything else is added after.
  const bool c_as_bias = c && alpha == 1.0f && beta == 1.0f && cd[0] == 1 && cd[1] == N;
  if (c_as_bias) p.col_bias = c->data<float>();
  p.scale = alpha;
  if (!run_gemm(p, pool)) return run_reference(ctx);
  // Also for beta = 0: the reference adds 0 * C, which keeps C's NaN and infinities.
  if (c && !c_as_bias)
    add_broadcast(y->data<float>(), c->data<float>(), out, broadcast_strides(c->dims(), out), beta,
                  pool);
  return Status::ok();
}

// ---- ferrite.FusedMatMul --------------------------------------------------------------------

bool fused_matmul_accepts(const Node& node) {
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (node.input(i) && !input_is_f32(node, i)) return false;
  return activation_of(node).has_value();
}

Status fused_matmul_run(KernelContext& ctx, ThreadPool& pool) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const Tensor* res = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  if (a.dtype() != DType::kF32 || b.dtype() != DType::kF32 || a.rank() < 2 || b.rank() < 2 ||
      (bias && bias->dtype() != DType::kF32) || (res && res->dtype() != DType::kF32))
    return run_reference(ctx);
  GemmProblem p;
  auto act = activation_of(ctx.node());
  if (!act) return run_reference(ctx);
  p.act = *act;
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
  std::vector<int64_t> out = plan_matmul(a, ad, b, bd, *batch, tb, p);
  if (p.b_off.size() == 1 && packable_gemm_weight(ctx.node(), 1, b)) p.b_constant = &b;
  // Residuals the blocks take: the full output, or one row for all rows. Other broadcasts are
  // added afterwards.
  bool res_later = false;
  if (res) {
    if (res->rank() > out.size()) return run_reference(ctx);
    std::vector<int64_t> rd = pad_front(res->dims(), out.size());
    for (size_t i = 0; i < out.size(); ++i)
      if (rd[i] != out[i] && rd[i] != 1) return run_reference(ctx);
    if (rd == out) {
      p.res = res->data<float>();
      p.res_full = true;
    } else if (all_ones({rd.begin(), rd.end() - 1}) && rd.back() == out.back()) {
      p.res = res->data<float>();
    } else {
      res_later = true;
    }
  }
  if (bias) p.col_bias = bias->data<float>();
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output_uninitialized(0, DType::kF32, out));
  p.y = y->data<float>();
  if (!run_gemm(p, pool)) return run_reference(ctx);
  if (res_later)
    add_broadcast(y->data<float>(), res->data<float>(), out, broadcast_strides(res->dims(), out),
                  1.0f, pool);
  return Status::ok();
}

}  // namespace

void register_cpu_gemm_kernels(CpuKernelRegistry& r) {
  r.add("", "MatMul", {matmul_accepts, matmul_run});
  r.add("", "Gemm", {gemm_accepts, gemm_run});
  r.add("ferrite", "FusedMatMul", {fused_matmul_accepts, fused_matmul_run});
}

}  // namespace ferrite
