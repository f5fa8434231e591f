// Internal fused ops of the "ferrite" domain (version 1). Graph passes create them; they never
// appear in ONNX files. Each is defined as the exact composition of the ONNX ops it replaces:
//
//   ferrite.FusedMatMul(A, B, bias?, residual?) {activation, transB}
//       Y = act(MatMul(A, transB ? B^T(last two axes) : B) + bias) + residual
//       A, B of rank >= 2 with NumPy batch broadcasting; bias is 1-D [N]; residual broadcasts to
//       Y without changing its shape. activation (+ activation_params): see
//       ops/activation_epilogue.h.
//
//   ferrite.FusedConv(X, W, B?, residual?) {Conv's attributes, activation, channels_last,
//                                          weights_last}
//       Y = act(Conv(X, W, B) + residual), residual of exactly Y's shape. Computed as the
//       unfused ops would, rounding to T after the convolution and after the residual add.
//       channels_last = 1 (2-D only): X, residual and Y are [N, H, W, C] instead of
//       [N, C, H, W]; W stays [M, C/group, KH, KW] unless weights_last = 1 (only with
//       channels_last), where W is [M, KH, KW, C/group] (the filter layout of channels-last
//       tensor-core convolutions, e.g. cuDNN's NHWC filters).
//
//   ferrite.Pool(X) {mode, channels_last, the pooling attributes}
//       MaxPool (mode "max") or AveragePool ("average") with ONNX's semantics, 2-D;
//       channels_last = 1: X and Y are [N, H, W, C].
//
//   ferrite.Attention(Q, K, V, mask?) {scale, causal, nan_to_zero, masked_rows_zero}
//       Y = softmax(Q @ K^T * scale + mask [+ causal mask]) @ V over the last axis, with
//       Q [..., S, D], K [..., T, D], V [..., T, Dv] (batch dims broadcast) and an additive mask
//       broadcasting to [..., S, T]. scale defaults to 1/sqrt(D). causal masks t > s with -inf.
//       nan_to_zero replaces NaN probabilities by 0 (the Where(IsNaN(p), 0, p) guard that
//       PyTorch exports; it makes fully masked rows produce 0). masked_rows_zero gives 0 for a
//       row whose scores are all -inf and leaves NaN alone (PyTorch's _safe_softmax, which
//       SDPA's math path uses: Where(All(x == -inf), 0, Softmax(x))). Softmax runs in double.
//       transposed = [q, k, v, y] (default all 0): how each is stored (ops/attention_layout.h):
//       0 as above, 1 [B, S, H, D] (heads after the sequence, as the projections produce them),
//       2 [S, B, H, D] (sequence first, nn.MultiheadAttention's layout); an operand marked 1 or 2
//       means its [B, H, S, D] view (for y: the result is stored so); fold-attention-layout sets
//       them where a Transpose would otherwise copy the operand.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>

#include "ops/activation_epilogue.h"
#include "ops/attention_layout.h"
#include "ops/conv_util.h"
#include "ops/gemm.h"
#include "ops/helpers.h"

namespace ferrite {

namespace {

constexpr const char* kDomain = "ferrite";

// Batch dims of a and b broadcast; error text on mismatch.
std::optional<Shape> batch_broadcast(const std::vector<Dim>& a, const std::vector<Dim>& b,
                                     std::string* e) {
  return broadcast_shapes(Shape(a), Shape(b), e);
}

// ---- FusedMatMul ----------------------------------------------------------------------------

Status infer_fused_matmul(InferContext& ctx) {
  FERRITE_RETURN_IF_ERROR(activation_of(ctx.node()).status());
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  if (!a.rank_known() || !b.rank_known()) {
    ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
    return Status::ok();
  }
  if (a.rank() < 2 || b.rank() < 2) return ctx.error("A and B must have rank >= 2");
  bool tb = ctx.node().attr_int("transB") != 0;
  const Dim& ka = a[a.rank() - 1];
  const Dim& kb = b[b.rank() - (tb ? 1 : 2)];
  const Dim& n = b[b.rank() - (tb ? 2 : 1)];
  if (ka.is_static() && kb.is_static() && ka != kb)
    return ctx.error("inner dimensions differ: ", a.to_string(), " x ", b.to_string());
  std::string e;
  auto batch = batch_broadcast({a.dims().begin(), a.dims().end() - 2},
                               {b.dims().begin(), b.dims().end() - 2}, &e);
  if (!batch) return ctx.error(e);
  std::vector<Dim> out = batch->dims();
  out.push_back(a[a.rank() - 2]);
  out.push_back(n);
  Shape y(out);
  if (ctx.has_input(2)) {
    const Shape& bias = ctx.input_shape(2);
    if (bias.rank_known() && bias.rank() != 1) return ctx.error("bias must be 1-D");
    if (bias.rank_known() && bias[0].is_static() && n.is_static() && bias[0] != n)
      return ctx.error("bias ", bias.to_string(), " does not match N = ", n.to_string());
  }
  if (ctx.has_input(3)) {
    auto r = broadcast_shapes(ctx.input_shape(3), y, &e);
    if (!r) return ctx.error("residual does not broadcast to the output: ", e);
    if (r->rank_known() && r->rank() != y.rank())
      return ctx.error("residual ", ctx.input_shape(3).to_string(), " would change the shape ",
                       y.to_string());
  }
  ctx.set_output(0, ctx.input_dtype(0), y);
  return Status::ok();
}

Status fused_matmul_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.rank() < 2 || b.rank() < 2) return ctx.error("A and B must have rank >= 2");
  FERRITE_ASSIGN_OR_RETURN(const Activation act, activation_of(ctx.node()));
  bool tb = ctx.node().attr_int("transB") != 0;
  int64_t M = a.dim(a.rank() - 2), K = a.dim(a.rank() - 1);
  int64_t Kb = b.dim(b.rank() - (tb ? 1 : 2)), N = b.dim(b.rank() - (tb ? 2 : 1));
  if (K != Kb)
    return ctx.error("inner dimensions differ: ", a.type_string(), " x ", b.type_string());
  std::vector<int64_t> a_batch(a.dims().begin(), a.dims().end() - 2);
  std::vector<int64_t> b_batch(b.dims().begin(), b.dims().end() - 2);
  FERRITE_ASSIGN_OR_RETURN(auto batch, broadcast_dims(ctx, a_batch, b_batch));
  std::vector<int64_t> out = batch;
  out.push_back(M);
  out.push_back(N);
  const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const Tensor* res = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  if (bias && (bias->rank() != 1 || bias->dim(0) != N))
    return ctx.error("bias ", bias->type_string(), " must be [", N, "]");
  std::vector<int64_t> res_strides;
  if (res) {
    auto bc = broadcast_dims(ctx, res->dims(), out);
    if (!bc || *bc != out)
      return ctx.error("residual ", res->type_string(), " does not broadcast to ",
                       dims_to_string(out));
    res_strides = broadcast_strides(res->dims(), out);
  }
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, a.dtype(), out));
  std::vector<int64_t> sa = broadcast_strides(a_batch, batch),
                       sb = broadcast_strides(b_batch, batch);
  bool ok = visit_float_accumulate_dtype(a.dtype(), [&]<class T, class Acc>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* py = y->data<T>();
    const int64_t b_row = tb ? 1 : N, b_col = tb ? K : 1;
    auto one = [&](int64_t i, int64_t oa, int64_t ob) {
      reference_gemm<T, Acc>(M, N, K, pa + oa * M * K, K, 1, pb + ob * K * N, b_row, b_col,
                             py + i * M * N, N, false);
    };
    if (batch.empty()) {
      one(0, 0, 0);
    } else {
      std::array<std::vector<int64_t>, 2> strides{sa, sb};
      for_each_index<2>(batch, strides, [&](int64_t i, const std::array<int64_t, 2>& off) {
        one(i, off[0], off[1]);
      });
    }
    // Epilogue in the compute type, one rounding at the end.
    using C = compute_t<T>;
    const T* pbias = bias ? bias->data<T>() : nullptr;
    auto epilogue = [&](int64_t i, int64_t res_off) {
      C v = convert<C>(py[i]);
      if (pbias) v += convert<C>(pbias[i % N]);
      v = apply_activation<C>(act, v);
      if (res) v += convert<C>(res->data<T>()[res_off]);
      py[i] = convert<T>(v);
    };
    if (!res) {
      for (int64_t i = 0; i < y->numel(); ++i) epilogue(i, 0);
    } else {
      std::array<std::vector<int64_t>, 1> rs{res_strides};
      for_each_index<1>(out, rs,
                        [&](int64_t i, const std::array<int64_t, 1>& off) { epilogue(i, off[0]); });
    }
  });
  if (!ok) return ctx.error("dtype ", dtype_name(a.dtype()), " is not supported");
  return Status::ok();
}

// ---- FusedConv ------------------------------------------------------------------------------

// FusedConv {channels_last = 1}: X, the residual and Y are [N, H, W, C] (2-D convolutions only;
// W stays [M, C/group, KH, KW], or [M, KH, KW, C/group] with weights_last). The
// layout-channels-last pass creates it for devices whose convolutions and pointwise kernels run
// faster on channels-last activations.
bool channels_last(const Node& n) {
  return n.attr_int("channels_last", 0) != 0;
}
bool weights_last(const Node& n) {
  return n.attr_int("weights_last", 0) != 0;
}

// [N, C, H, W] -> [N, H, W, C] (to_last) or back, for shapes.
Shape permute_shape(const Shape& s, bool to_last) {
  if (!s.rank_known() || s.rank() != 4) return s;
  return to_last ? Shape({s[0], s[2], s[3], s[1]}) : Shape({s[0], s[3], s[1], s[2]});
}

Status infer_fused_conv(InferContext& ctx) {
  FERRITE_RETURN_IF_ERROR(activation_of(ctx.node()).status());
  const bool last = channels_last(ctx.node());
  const Shape& x = ctx.input_shape(0);
  if (last && x.rank_known() && x.rank() != 4)
    return ctx.error("channels_last takes a 4-D input [N, H, W, C], got ", x.to_string());
  const bool w_last = weights_last(ctx.node());
  const Shape& w = ctx.input_shape(1);
  if (w_last && !last) return ctx.error("weights_last needs channels_last");
  if (w_last && w.rank_known() && w.rank() != 4)
    return ctx.error("weights_last takes a 4-D weight [M, KH, KW, C/group], got ", w.to_string());
  FERRITE_ASSIGN_OR_RETURN(Shape y_nchw, conv_output_shape(ctx, last ? permute_shape(x, false) : x,
                                                           w_last ? permute_shape(w, false) : w));
  const Shape y = last ? permute_shape(y_nchw, true) : y_nchw;
  ctx.set_output(0, ctx.input_dtype(0), y);
  if (ctx.num_inputs() > 3 && ctx.has_input(3)) {
    const Shape& r = ctx.input_shape(3);
    std::string e;
    auto b = broadcast_shapes(r, y, &e);
    if (!b || (r.rank_known() && y.rank_known() && (r.rank() != y.rank() || *b != y)))
      return ctx.error("residual ", r.to_string(), " must have the output's shape ", y.to_string());
  }
  return Status::ok();
}

Status fused_conv_nchw(KernelContext& ctx);

// The channels-last form through the NCHW reference: permute X, the residual (and W with
// weights_last), convolve, permute Y back.
Status fused_conv_channels_last(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 4)
    return ctx.error("channels_last takes a 4-D input [N, H, W, C], got ", x.type_string());
  FERRITE_ASSIGN_OR_RETURN(Tensor xt, permute_channels(x, false));
  std::optional<Tensor> rt, wt;
  std::vector<const Tensor*> ins{&xt};
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (i == 1 && weights_last(ctx.node())) {
      if (ctx.input(1).rank() != 4)
        return ctx.error("weights_last takes a 4-D weight, got ", ctx.input(1).type_string());
      FERRITE_ASSIGN_OR_RETURN(Tensor w, permute_channels(ctx.input(1), false));
      wt = std::move(w);
      ins.push_back(&*wt);
    } else if (i == 3 && ctx.has_input(3)) {
      if (ctx.input(3).rank() != 4)
        return ctx.error("residual ", ctx.input(3).type_string(), " must be 4-D");
      FERRITE_ASSIGN_OR_RETURN(Tensor r, permute_channels(ctx.input(3), false));
      rt = std::move(r);
      ins.push_back(&*rt);
    } else {
      ins.push_back(ctx.has_input(i) ? &ctx.input(i) : nullptr);
    }
  }
  std::vector<Tensor> outs(1);
  KernelContext inner(ctx.node(), std::move(ins), outs);
  FERRITE_RETURN_IF_ERROR(fused_conv_nchw(inner));
  FERRITE_ASSIGN_OR_RETURN(Tensor y, permute_channels(outs[0], true));
  ctx.set_output(0, std::move(y));
  return Status::ok();
}

Status fused_conv_kernel(KernelContext& ctx) {
  if (weights_last(ctx.node()) && !channels_last(ctx.node()))
    return ctx.error("weights_last needs channels_last");
  return channels_last(ctx.node()) ? fused_conv_channels_last(ctx) : fused_conv_nchw(ctx);
}

Status fused_conv_nchw(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(const Activation act, activation_of(ctx.node()));
  const Tensor* res = ctx.num_inputs() > 3 && ctx.has_input(3) ? &ctx.input(3) : nullptr;
  FERRITE_RETURN_IF_ERROR(conv_kernel(ctx));
  Tensor& y = ctx.output(0);
  if (res && (res->dtype() != y.dtype() || res->dims() != y.dims()))
    return ctx.error("residual ", res->type_string(), " must have the output's type ",
                     y.type_string());
  if (!res && act.none()) return Status::ok();
  bool ok = visit_float_accumulate_dtype(y.dtype(), [&]<class T, class Acc>() {
    using C = compute_t<T>;
    T* py = y.data<T>();
    const T* pr = res ? res->data<T>() : nullptr;
    // Rounded to T after each op, as the unfused Add and activation would.
    for (int64_t i = 0; i < y.numel(); ++i) {
      C v = convert<C>(py[i]);
      if (pr) v = convert<C>(convert<T>(static_cast<C>(v + convert<C>(pr[i]))));
      py[i] = convert<T>(apply_activation<C>(act, v));
    }
  });
  if (!ok) return ctx.error("dtype ", dtype_name(y.dtype()), " is not supported");
  return Status::ok();
}

// ---- Pool (channels-last pooling) -----------------------------------------------------------

// ferrite.Pool {mode, channels_last, the pooling attributes}: MaxPool (mode "max") or
// AveragePool ("average") of a 2-D [N, H, W, C] input (channels_last = 1; the layout pass's form)
// or of [N, C, H, W] (0). The reference permutes and runs the ONNX op's own kernel.
Status infer_pool_op(InferContext& ctx) {
  const Node& node = ctx.node();
  const std::string mode = node.attr_string("mode");
  if (mode != "max" && mode != "average")
    return ctx.error("mode must be \"max\" or \"average\", got \"", mode, "\"");
  const std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  if (kernel.size() != 2) return ctx.error("kernel_shape must have 2 entries (2-D pooling)");
  const Shape& x = ctx.input_shape(0);
  if (x.rank_known() && x.rank() != 4) return ctx.error("input must be 4-D, got ", x.to_string());
  FERRITE_ASSIGN_OR_RETURN(Window w, read_window(node, kernel));
  const bool last = channels_last(node);
  if (!x.rank_known()) {
    ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
    return Status::ok();
  }
  const size_t h = last ? 1 : 2;
  FERRITE_ASSIGN_OR_RETURN(Dim oh, window_output_dim(node, w, 0, x[h]));
  FERRITE_ASSIGN_OR_RETURN(Dim ow, window_output_dim(node, w, 1, x[h + 1]));
  ctx.set_output(0, ctx.input_dtype(0),
                 last ? Shape({x[0], oh, ow, x[3]}) : Shape({x[0], x[1], oh, ow}));
  return Status::ok();
}

Status pool_op_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const bool last = channels_last(node);
  const Tensor& x = ctx.input(0);
  if (x.rank() != 4) return ctx.error("input must be 4-D, got ", x.type_string());
  Node onnx;  // the ONNX op this node computes, for its reference kernel
  onnx.name = node.name;
  onnx.op_type = node.attr_string("mode") == "max" ? "MaxPool" : "AveragePool";
  onnx.opset = 19;
  onnx.outputs = {node.output(0)};
  for (const auto& [k, v] : node.attrs)
    if (k != "mode" && k != "channels_last") onnx.attrs.emplace(k, v);
  const OpSchema* schema = OpRegistry::global().find("", onnx.op_type, onnx.opset);
  if (!schema || !schema->kernel) return ctx.error("no reference kernel for ", onnx.op_type);
  std::optional<Tensor> xt;
  if (last) {
    FERRITE_ASSIGN_OR_RETURN(Tensor t, permute_channels(x, false));
    xt = std::move(t);
  }
  std::vector<Tensor> outs(1);
  KernelContext inner(onnx, {last ? &*xt : &x}, outs);
  FERRITE_RETURN_IF_ERROR(schema->kernel(inner));
  if (!last) {
    ctx.set_output(0, std::move(outs[0]));
    return Status::ok();
  }
  FERRITE_ASSIGN_OR_RETURN(Tensor y, permute_channels(outs[0], true));
  ctx.set_output(0, std::move(y));
  return Status::ok();
}

// ---- Attention ------------------------------------------------------------------------------

// A rank-4 shape permuted (dim i = s's dim perm[i]): a stored operand's [B, H, S, D] view, or a
// result's stored shape (ops/attention_layout.h).
Shape permuted(const Shape& s, const std::array<int, 4>& perm) {
  std::vector<Dim> d(4);
  for (int i = 0; i < 4; ++i) d[i] = s[perm[i]];
  return Shape(d);
}

Status infer_attention(InferContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(AttentionLayout layout, attention_layout(ctx.node()));
  Shape shapes[3];
  for (int i = 0; i < 3; ++i) {
    shapes[i] = ctx.input_shape(i);
    if (!layout.transposed[i] || !shapes[i].rank_known()) continue;
    if (shapes[i].rank() != 4)
      return ctx.error("transposed operand ", i, " must have rank 4, got ", shapes[i].to_string());
    shapes[i] = permuted(shapes[i], logical_perm(layout.transposed[i]));
  }
  const Shape &q = shapes[0], &k = shapes[1], &v = shapes[2];
  if (!q.rank_known() || !k.rank_known() || !v.rank_known()) {
    ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
    return Status::ok();
  }
  if (q.rank() < 2 || k.rank() < 2 || v.rank() < 2)
    return ctx.error("Q, K and V must have rank >= 2");
  const Dim &dq = q[q.rank() - 1], &dk = k[k.rank() - 1];
  const Dim &tk = k[k.rank() - 2], &tv = v[v.rank() - 2];
  if ((dq.is_static() && dk.is_static() && dq != dk) ||
      (tk.is_static() && tv.is_static() && tk != tv))
    return ctx.error("Q ", q.to_string(), ", K ", k.to_string(), " and V ", v.to_string(),
                     " do not fit [..., S, D], [..., T, D], [..., T, Dv]");
  std::string e;
  auto batch = batch_broadcast({q.dims().begin(), q.dims().end() - 2},
                               {k.dims().begin(), k.dims().end() - 2}, &e);
  if (batch) batch = batch_broadcast(batch->dims(), {v.dims().begin(), v.dims().end() - 2}, &e);
  if (!batch) return ctx.error(e);
  std::vector<Dim> scores = batch->dims(), out = batch->dims();
  scores.push_back(q[q.rank() - 2]);
  scores.push_back(tk);
  out.push_back(q[q.rank() - 2]);
  out.push_back(v[v.rank() - 1]);
  if (ctx.has_input(3)) {
    auto m = broadcast_shapes(ctx.input_shape(3), Shape(scores), &e);
    if (!m) return ctx.error("mask does not broadcast to the scores: ", e);
    if (m->rank_known() && m->rank() != scores.size())
      return ctx.error("mask ", ctx.input_shape(3).to_string(),
                       " has a higher rank than the scores");
  }
  if (layout.transposed[3] && out.size() != 4)
    return ctx.error("a transposed result needs rank 4, got ", Shape(out).to_string());
  ctx.set_output(
      0, ctx.input_dtype(0),
      layout.transposed[3] ? permuted(Shape(out), stored_perm(layout.transposed[3])) : Shape(out));
  return Status::ok();
}

// The attention of logical (un-transposed) operands; `alloc` makes the result of the given dims.
using AllocResult = std::function<Expected<Tensor*>(const std::vector<int64_t>&)>;
Status attention_math(KernelContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor* mask, const AllocResult& alloc);

Status attention_kernel(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(AttentionLayout layout, attention_layout(ctx.node()));
  const Tensor* mask = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  Tensor logical[3];
  for (int i = 0; i < 3; ++i) {
    const Tensor& in = ctx.input(i);
    if (!layout.transposed[i]) continue;
    if (in.rank() != 4) return ctx.error("transposed operand ", i, " must have rank 4");
    FERRITE_ASSIGN_OR_RETURN(logical[i], permute4(in, logical_perm(layout.transposed[i])));
  }
  auto pick = [&](int i) -> const Tensor& {
    return layout.transposed[i] ? logical[i] : ctx.input(i);
  };
  const Tensor &q = pick(0), &k = pick(1), &v = pick(2);
  if (!layout.transposed[3])
    return attention_math(ctx, q, k, v, mask, [&](const std::vector<int64_t>& dims) {
      return ctx.allocate_output(0, q.dtype(), dims);
    });
  Tensor tmp;
  FERRITE_RETURN_IF_ERROR(attention_math(
      ctx, q, k, v, mask, [&](const std::vector<int64_t>& dims) -> Expected<Tensor*> {
        if (dims.size() != 4) return ctx.error("a transposed result needs rank 4");
        FERRITE_ASSIGN_OR_RETURN(tmp, Tensor::create(q.dtype(), dims));
        return &tmp;
      }));
  FERRITE_ASSIGN_OR_RETURN(Tensor swapped, permute4(tmp, stored_perm(layout.transposed[3])));
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, q.dtype(), swapped.dims()));
  std::memcpy(y->raw(), swapped.raw(), swapped.nbytes());
  return Status::ok();
}

Status attention_math(KernelContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor* mask, const AllocResult& alloc) {
  if (q.rank() < 2 || k.rank() < 2 || v.rank() < 2)
    return ctx.error("Q, K and V must have rank >= 2");
  int64_t S = q.dim(q.rank() - 2), D = q.dim(q.rank() - 1);
  int64_t L = k.dim(k.rank() - 2), Dv = v.dim(v.rank() - 1);
  if (k.dim(k.rank() - 1) != D || v.dim(v.rank() - 2) != L)
    return ctx.error("Q ", q.type_string(), ", K ", k.type_string(), " and V ", v.type_string(),
                     " do not fit [..., S, D], [..., T, D], [..., T, Dv]");
  std::vector<int64_t> qb(q.dims().begin(), q.dims().end() - 2);
  std::vector<int64_t> kb(k.dims().begin(), k.dims().end() - 2);
  std::vector<int64_t> vb(v.dims().begin(), v.dims().end() - 2);
  FERRITE_ASSIGN_OR_RETURN(auto batch, broadcast_dims(ctx, qb, kb));
  FERRITE_ASSIGN_OR_RETURN(batch, broadcast_dims(ctx, batch, vb));
  std::vector<int64_t> scores_dims = batch, out = batch;
  scores_dims.insert(scores_dims.end(), {S, L});
  out.insert(out.end(), {S, Dv});
  std::vector<int64_t> mask_strides;
  if (mask) {
    auto bc = broadcast_dims(ctx, mask->dims(), scores_dims);
    if (!bc || *bc != scores_dims)
      return ctx.error("mask ", mask->type_string(), " does not broadcast to the scores ",
                       dims_to_string(scores_dims));
    mask_strides = broadcast_strides(mask->dims(), scores_dims);
  }
  double scale = ctx.node().has_attr("scale") ? ctx.node().attr_float("scale")
                                              : 1.0 / std::sqrt(static_cast<double>(D));
  bool causal = ctx.node().attr_int("causal") != 0;
  bool nan_to_zero = ctx.node().attr_int("nan_to_zero") != 0;
  bool masked_rows_zero = ctx.node().attr_int("masked_rows_zero") != 0;
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, alloc(out));
  // Batch offsets (in matrices) of each operand; the mask's batch strides are in elements.
  std::vector<int64_t> mbatch_strides(batch.size(), 0);
  int64_t mask_row = 0, mask_col = 0;
  if (mask) {
    std::copy(mask_strides.begin(), mask_strides.end() - 2, mbatch_strides.begin());
    mask_row = mask_strides[batch.size()];
    mask_col = mask_strides[batch.size() + 1];
  }
  std::array<std::vector<int64_t>, 4> strides{broadcast_strides(qb, batch),
                                              broadcast_strides(kb, batch),
                                              broadcast_strides(vb, batch), mbatch_strides};
  const double kNegInf = -std::numeric_limits<double>::infinity();
  bool ok = visit_float_accumulate_dtype(q.dtype(), [&]<class T, class Acc>() {
    const T* pq = q.data<T>();
    const T* pk = k.data<T>();
    const T* pv = v.data<T>();
    const T* pm = mask ? mask->data<T>() : nullptr;
    T* py = y->data<T>();
    std::vector<double> qrow(D), kmat(L * D), vmat(L * Dv), p(L), acc(Dv);
    auto one = [&](int64_t i, const std::array<int64_t, 4>& off) {
      const T* qm = pq + off[0] * S * D;
      const T* km = pk + off[1] * L * D;
      const T* vm = pv + off[2] * L * Dv;
      for (int64_t j = 0; j < L * D; ++j) kmat[j] = convert<double>(km[j]);
      for (int64_t j = 0; j < L * Dv; ++j) vmat[j] = convert<double>(vm[j]);
      for (int64_t s = 0; s < S; ++s) {
        for (int64_t d = 0; d < D; ++d) qrow[d] = convert<double>(qm[s * D + d]);
        double mx = kNegInf;
        bool all_neg_inf = true;
        for (int64_t t = 0; t < L; ++t) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += qrow[d] * kmat[t * D + d];
          double x = dot * scale;
          if (pm) x += convert<double>(pm[off[3] + s * mask_row + t * mask_col]);
          if (causal && t > s) x = kNegInf;
          p[t] = x;
          if (x > mx) mx = x;
          all_neg_inf &= x == kNegInf;
        }
        // Same arithmetic as Softmax: a row whose max is -inf (or has NaN) yields NaN.
        double sum = 0;
        for (int64_t t = 0; t < L; ++t) sum += (p[t] = std::exp(p[t] - mx));
        std::fill(acc.begin(), acc.end(), 0.0);
        // PyTorch's _safe_softmax: a row of -inf scores only (fully masked) gives 0.
        for (int64_t t = 0; t < L && !(masked_rows_zero && all_neg_inf); ++t) {
          double w = p[t] / sum;
          if (nan_to_zero && std::isnan(w)) continue;
          for (int64_t d = 0; d < Dv; ++d) acc[d] += w * vmat[t * Dv + d];
        }
        T* yr = py + (i * S + s) * Dv;
        for (int64_t d = 0; d < Dv; ++d) yr[d] = convert<T>(static_cast<Acc>(acc[d]));
      }
    };
    if (batch.empty()) {
      one(0, {0, 0, 0, 0});
    } else {
      for_each_index<4>(batch, strides, one);
    }
  });
  if (!ok) return ctx.error("dtype ", dtype_name(q.dtype()), " is not supported");
  return Status::ok();
}

}  // namespace

void register_fused_ops(OpRegistry& r) {
  using namespace dtypes;
  r.add(OpSchemaBuilder("FusedMatMul", kDomain)
            .versions(1)
            .inputs(2, 4)
            .outputs(1)
            .attr("activation", AttrType::kString, "none")
            .optional_attr("activation_params", AttrType::kFloats)
            .attr("transB", AttrType::kInt, 0)
            .types("T", {0, 1, 2, 3}, kFloat)
            .infer(infer_fused_matmul)
            .kernel(fused_matmul_kernel)
            .doc("act(A @ B + bias) + residual"));
  OpSchemaBuilder fused_conv("FusedConv", kDomain);
  r.add(
      conv_attrs(fused_conv.versions(1).inputs(2, 4).outputs(1))
          .attr("activation", AttrType::kString, "none")
          .optional_attr("activation_params", AttrType::kFloats)
          .attr("channels_last", AttrType::kInt, 0)
          .attr("weights_last", AttrType::kInt, 0)
          .types("T", {0, 1, 2, 3}, kFloat)
          .infer(infer_fused_conv)
          .kernel(fused_conv_kernel)
          .doc("act(Conv(X, W, B) + residual); channels_last: X, residual and Y are [N, H, W, C]; "
               "weights_last: W is [M, KH, KW, C/group]"));
  r.add(OpSchemaBuilder("Pool", kDomain)
            .versions(1)
            .inputs(1)
            .outputs(1)
            .attr("mode", AttrType::kString, "max")
            .attr("channels_last", AttrType::kInt, 1)
            .attr("auto_pad", AttrType::kString, "NOTSET")
            .attr("ceil_mode", AttrType::kInt, 0)
            .attr("count_include_pad", AttrType::kInt, 0)
            .optional_attr("dilations", AttrType::kInts)
            .optional_attr("kernel_shape", AttrType::kInts)
            .optional_attr("pads", AttrType::kInts)
            .optional_attr("strides", AttrType::kInts)
            .types("T", {0}, kFloat)
            .infer(infer_pool_op)
            .kernel(pool_op_kernel)
            .doc("MaxPool (mode max) or AveragePool (average), 2-D; channels_last: [N, H, W, C]"));
  r.add(OpSchemaBuilder("Attention", kDomain)
            .versions(1)
            .inputs(3, 4)
            .outputs(1)
            .optional_attr("scale", AttrType::kFloat)
            .attr("causal", AttrType::kInt, 0)
            .attr("nan_to_zero", AttrType::kInt, 0)
            .attr("masked_rows_zero", AttrType::kInt, 0)
            .optional_attr("transposed", AttrType::kInts)
            .types("T", {0, 1, 2, 3}, kFloat)
            .infer(infer_attention)
            .kernel(attention_kernel)
            .doc("softmax(Q @ K^T * scale + mask) @ V"));
}

}  // namespace ferrite
