"""Neural-network ATen ops: convolution, matrix products, normalisation, softmax, pooling,
embedding, attention and padding (upsampling reaches the table as _unsafe_index arithmetic:
PyTorch decomposes it at the Autograd key while tracing). Each stays one fused-friendly ferrite op where ferrite
has one (Conv, Gemm/MatMul, LayerNormalization, BatchNormalization, Softmax, ferrite.Attention)."""

from __future__ import annotations

import math

import torch

from ..aten_table import FLOATS, aten
from ..fx_importer import TV, TranslationError, fake_value, is_static_int, static_int

A = torch.ops.aten


def _used_outputs(node) -> set:
    import operator

    used = set()
    for u in node.users:
        if u.op == "call_function" and u.target is operator.getitem:
            used.add(u.args[1])
        else:
            used.add(-1)  # the tuple itself escapes
    return used


# ---- convolution and matrix products -----------------------------------------------------------
def _conv_check(node):
    x = fake_value(node.args[0])
    if x.dim() not in (3, 4, 5):
        return f"convolution of rank {x.dim()}"
    return None


@aten(A.convolution.default, check=_conv_check, dtypes=FLOATS)
def convolution(ctx, node, x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    nd = x.rank - 2
    pads = [static_int(p) for p in padding]
    attrs = dict(strides=[static_int(s) for s in stride], pads=pads + pads,
                 dilations=[static_int(d) for d in dilation], group=int(groups),
                 kernel_shape=[static_int(k) for k in w.shape[2:]])
    if len(attrs["strides"]) == 1 and nd > 1:
        attrs["strides"] *= nd
    inputs = [x.id, w.id] + ([b.id] if b is not None else [])
    if transposed:
        attrs["output_padding"] = [static_int(p) for p in output_padding]
        return ctx.op("ConvTranspose", inputs, **attrs)
    return ctx.op("Conv", inputs, **attrs)


@aten(A.addmm.default, dtypes=FLOATS)
def addmm(ctx, node, bias, a, b, beta=1, alpha=1):
    bt = ctx.transposed_source(node.args[2])
    if bt is not None:  # x @ W.t() + bias: read W as it is stored
        return ctx.op("Gemm", [a.id, bt.id, bias.id], alpha=float(alpha), beta=float(beta),
                      transB=1)
    return ctx.op("Gemm", [a.id, b.id, bias.id], alpha=float(alpha), beta=float(beta))


@aten(A.mm.default, dtypes=FLOATS)
def mm(ctx, node, a, b):
    bt = ctx.transposed_source(node.args[1])
    if bt is not None:
        return ctx.op("Gemm", [a.id, bt.id], transB=1)
    return ctx.op("MatMul", [a.id, b.id])


@aten(A.bmm.default, dtypes=FLOATS)
def bmm(ctx, node, a, b):
    return ctx.op("MatMul", [a.id, b.id])


@aten(A.baddbmm.default, dtypes=FLOATS)
def baddbmm(ctx, node, bias, a, b, beta=1, alpha=1):
    dt = fake_value(node).dtype
    p = ctx.op("MatMul", [a.id, b.id])
    if alpha != 1:
        p = ctx.op("Mul", [p, ctx.const(alpha, dt)])
    if beta == 0:
        return p
    c = bias.id if beta == 1 else ctx.op("Mul", [bias.id, ctx.const(beta, dt)])
    return ctx.op("Add", [c, p])


# ---- normalisation -----------------------------------------------------------------------------
def _ones(ctx, shape, dtype, value=1.0):
    return ctx.const(torch.full([static_int(s) for s in shape], value, dtype=dtype).tolist(), dtype)


@aten(A.native_layer_norm.default, dtypes=FLOATS)
def native_layer_norm(ctx, node, x, normalized_shape, w, b, eps):
    k = len(normalized_shape)
    w_id = w.id if w is not None else _ones(ctx, normalized_shape, x.dtype)
    b_id = b.id if b is not None else _ones(ctx, normalized_shape, x.dtype, 0.0)
    used = _used_outputs(node)
    if used <= {0}:
        y = ctx.op("LayerNormalization", [x.id, w_id, b_id], axis=-k, epsilon=float(eps))
        return (y, None, None)
    # Training: the backward reads the row statistics. They are computed apart from the
    # normalisation (two row means, in f32 for 16-bit x, as torch's opmath) rather than as
    # LayerNormalization's optional outputs, which no device's row kernel writes (cuda ran the
    # whole op on the host for them); y keeps the device's LayerNormalization kernel.
    y = ctx.op("LayerNormalization", [x.id, w_id, b_id], axis=-k, epsilon=float(eps))
    ct = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    axes = ctx.const_i64(list(range(x.rank - k, x.rank)))
    xf = ctx.cast(x.id, ct)
    mean = ctx.op("ReduceMean", [xf, axes], keepdims=1)
    d = ctx.op("Sub", [xf, mean])
    var = ctx.op("ReduceMean", [ctx.op("Mul", [d, d]), axes], keepdims=1)
    inv = ctx.op("Reciprocal", [ctx.op("Sqrt", [ctx.op("Add", [var, ctx.const(float(eps), ct)])])])
    return (y, mean, inv)


@aten(A._native_batch_norm_legit_no_training.default, dtypes=FLOATS)
def batch_norm_inference(ctx, node, x, w, b, mean, var, momentum, eps):
    c = [x.shape[1]]
    w_id = w.id if w is not None else _ones(ctx, c, mean.dtype)
    b_id = b.id if b is not None else _ones(ctx, c, mean.dtype, 0.0)
    y = ctx.op("BatchNormalization", [x.id, w_id, b_id, mean.id, var.id], epsilon=float(eps))
    if not _used_outputs(node) - {0}:
        return (y, None, None)
    # Eval mode with gradients: the backward reads the running statistics, and what torch saves
    # differs by device: nothing on cpu, the running mean and rsqrt(running_var + eps) elsewhere
    # (torch._decomp's native_batch_norm_helper). The fake value says which.
    if fake_value(node)[1].numel() != 0:
        invstd = ctx.op("Reciprocal", [ctx.op("Sqrt", [
            ctx.op("Add", [var.id, ctx.const(float(eps), var.dtype)])])])
        return (y, ctx.op("Identity", [mean.id]), invstd)
    empty = ctx.op("Slice", [mean.id, ctx.const_i64([0]), ctx.const_i64([0]), ctx.const_i64([0])])
    return (y, empty, ctx.op("Identity", [empty]))


def _bn_train_check(node):
    training = node.args[5] if node.target == A._native_batch_norm_legit_functional.default \
        else True
    return None if training else "batch norm statistics update outside training mode"


@aten(A._native_batch_norm_legit_functional.default, check=_bn_train_check, dtypes=FLOATS)
def batch_norm_training(ctx, node, x, w, b, running_mean, running_var, training, momentum, eps):
    """Training-mode batch norm: batch statistics normalise, the running statistics are updated
    (unbiased variance), as pointwise math and reductions over N and the spatial dims."""
    y, mean, var, invstd = _batch_stats_norm(ctx, x, w, b, eps)
    m = float(momentum)
    sdt = running_mean.dtype
    n = 1
    for e in [x.shape[0]] + list(x.shape[2:]):
        n = n * e
    nf = ctx.operand(n, torch.float32)
    unbiased = ctx.op("Mul", [var, ctx.op("Div", [nf, ctx.op("Sub", [nf, ctx.const(1.0, torch.float32)])])])

    def update(old, new):
        keep = ctx.op("Mul", [ctx.cast(old.id, torch.float32), ctx.const(1.0 - m, torch.float32)])
        return ctx.cast(ctx.op("Add", [keep, ctx.op("Mul", [new, ctx.const(m, torch.float32)])]), sdt)

    return (y, mean, invstd, update(running_mean, mean), update(running_var, unbiased))


@aten(A._native_batch_norm_legit.no_stats, dtypes=FLOATS)
def batch_norm_no_stats(ctx, node, x, w, b, training, momentum, eps):
    y, mean, _, invstd = _batch_stats_norm(ctx, x, w, b, eps)
    return (y, mean, invstd)


def _batch_stats_norm(ctx, x, w, b, eps):
    """(y, mean, biased var, invstd); statistics in f32 as [C], y in x's dtype."""
    ct = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    axes = ctx.const_i64([0] + list(range(2, x.rank)))
    bshape = ctx.const_i64([1, -1] + [1] * (x.rank - 2))
    xf = ctx.cast(x.id, ct)
    mean = ctx.op("ReduceMean", [xf, axes], keepdims=1)
    d = ctx.op("Sub", [xf, mean])
    var = ctx.op("ReduceMean", [ctx.op("Mul", [d, d]), axes], keepdims=1)
    invstd = ctx.op("Reciprocal", [ctx.op("Sqrt", [ctx.op("Add", [var, ctx.const(float(eps), ct)])])])
    scale = invstd if w is None else ctx.op("Mul", [invstd, ctx.op("Reshape", [ctx.cast(w.id, ct), bshape])])
    y = ctx.op("Mul", [d, scale])
    if b is not None:
        y = ctx.op("Add", [y, ctx.op("Reshape", [ctx.cast(b.id, ct), bshape])])
    flat = ctx.const_i64([-1])
    return (ctx.cast(y, x.dtype), ctx.op("Reshape", [mean, flat]), ctx.op("Reshape", [var, flat]),
            ctx.op("Reshape", [invstd, flat]))


@aten(A.native_group_norm.default, dtypes=FLOATS)
def native_group_norm(ctx, node, x, w, b, n, c, hw, groups, eps):
    # y = (x - mean_g) / sqrt(var_g + eps) * w[c] + b[c], statistics over each group.
    g = int(groups)
    xs = ctx.op("Reshape", [x.id, ctx.const_i64([0, g, -1])])
    axes = ctx.const_i64([2])
    mean = ctx.op("ReduceMean", [xs, axes], keepdims=1)
    d = ctx.op("Sub", [xs, mean])
    var = ctx.op("ReduceMean", [ctx.op("Mul", [d, d]), axes], keepdims=1)
    inv = ctx.op("Reciprocal", [ctx.op("Sqrt", [ctx.op("Add", [var, ctx.const(float(eps), x.dtype)])])])
    y = ctx.op("Reshape", [ctx.op("Mul", [d, inv]), ctx.op("Shape", [x.id])])
    bshape = ctx.const_i64([-1] + [1] * (x.rank - 2))
    if w is not None:
        y = ctx.op("Mul", [y, ctx.op("Reshape", [w.id, bshape])])
    if b is not None:
        y = ctx.op("Add", [y, ctx.op("Reshape", [b.id, bshape])])
    return (y, None, None)


# ---- softmax -----------------------------------------------------------------------------------
@aten(A._softmax.default, dtypes=FLOATS)
def softmax(ctx, node, x, dim, half_to_float):
    return ctx.op("Softmax", [x.id], axis=int(dim))


@aten(A._safe_softmax.default, dtypes=FLOATS)
def safe_softmax(ctx, node, x, dim, dtype=None):
    # SDPA's math path: a row whose entries are all -inf (fully masked) gives 0, not NaN; a NaN
    # still propagates (max(row) is NaN then, not -inf). Kept whole rather than decomposed
    # (eq, not, any, not, full_like, where) so that fuse-attention sees one guard it knows:
    # Where(Equal(ReduceMax(x, dim, keepdims), -inf), 0, Softmax(x)).
    out_dtype = fake_value(node).dtype
    src = ctx.cast(x.id, out_dtype)
    sm = ctx.op("Softmax", [src], axis=int(dim))
    mx = ctx.op("ReduceMax", [src, ctx.const_i64([int(dim)])], keepdims=1)
    empty = ctx.op("Equal", [mx, ctx.const(float("-inf"), out_dtype)])
    return ctx.op("Where", [empty, ctx.const(0.0, out_dtype), sm])


@aten(A._log_softmax.default, dtypes=FLOATS)
def log_softmax(ctx, node, x, dim, half_to_float):
    return ctx.op("LogSoftmax", [x.id], axis=int(dim))


# ---- pooling -----------------------------------------------------------------------------------
def _pool_attrs(x, kernel, stride, padding, ceil_mode, dilation=None):
    nd = x.rank - 2
    k = [static_int(v) for v in kernel] * (nd if len(kernel) == 1 else 1)
    s = [static_int(v) for v in stride] if stride else list(k)
    s = s * (nd if len(s) == 1 else 1)
    p = [static_int(v) for v in padding] * (nd if len(padding) == 1 else 1)
    attrs = dict(kernel_shape=k, strides=s, pads=p + p, ceil_mode=int(bool(ceil_mode)))
    if dilation is not None:
        d = [static_int(v) for v in dilation] * (nd if len(dilation) == 1 else 1)
        attrs["dilations"] = d
    return attrs


@aten(A.max_pool2d_with_indices.default, A.max_pool3d_with_indices.default, dtypes=FLOATS)
def max_pool_with_indices(ctx, node, x, kernel, stride=(), padding=(0,), dilation=(1,),
                          ceil_mode=False):
    attrs = _pool_attrs(x, kernel, stride, padding, ceil_mode, dilation)
    if _used_outputs(node) <= {0}:
        return (ctx.op("MaxPool", [x.id], **attrs), None)
    # Training saves the indices for the backward: ONNX's index runs over the whole tensor, torch's
    # within each (n, c) plane; the plane's offset is a multiple of its size.
    y, idx = ctx.op("MaxPool", [x.id], outputs=2, **attrs)
    size = 1
    for e in x.shape[2:]:
        size = size * e
    plane = ctx.shape_value([size])
    return (y, ctx.op("Mod", [idx, plane]))


def _avgpool_check(node):
    if len(node.args) > 6 and node.args[6] is not None:
        return "avg_pool divisor_override is not supported"
    if node.kwargs.get("divisor_override") is not None:
        return "avg_pool divisor_override is not supported"
    return None


@aten(A.avg_pool2d.default, A.avg_pool3d.default, check=_avgpool_check, dtypes=FLOATS)
def avg_pool(ctx, node, x, kernel, stride=(), padding=(0,), ceil_mode=False,
             count_include_pad=True, divisor_override=None):
    attrs = _pool_attrs(x, kernel, stride, padding, ceil_mode)
    src = x.id
    if ceil_mode and count_include_pad:
        # torch counts the padding but not the overhang of a ceil-mode window past it (ONNX
        # counts the whole window): pad explicitly and count what the padded input covers.
        p = attrs["pads"][: x.rank - 2]
        if any(p):
            src = ctx.op("Pad", [x.id, ctx.const_i64([0, 0] + p + [0, 0] + p),
                                 ctx.const(0.0, x.dtype)], mode="constant")
            attrs["pads"] = [0] * len(attrs["pads"])
        count_include_pad = False
    return ctx.op("AveragePool", [src], count_include_pad=int(bool(count_include_pad)), **attrs)


def _adaptive_check(node):
    x = fake_value(node.args[0])
    out = [int(v) for v in node.args[1]]
    if all(v == 1 for v in out):
        return None
    spatial = x.shape[2:]
    if not all(is_static_int(s) for s in spatial):
        return "adaptive pooling to a size other than 1 needs static input sizes"
    if any(static_int(s) % o for s, o in zip(spatial, out)):
        return "adaptive pooling with input sizes not divisible by the output size"
    return None


@aten(A._adaptive_avg_pool2d.default, A.adaptive_avg_pool2d.default, check=_adaptive_check,
      dtypes=FLOATS)
def adaptive_avg_pool(ctx, node, x, output_size):
    out = [int(v) for v in output_size]
    if all(v == 1 for v in out):
        return ctx.op("GlobalAveragePool", [x.id])
    k = [static_int(s) // o for s, o in zip(x.shape[2:], out)]
    return ctx.op("AveragePool", [x.id], kernel_shape=k, strides=k)


# ---- embedding ---------------------------------------------------------------------------------
@aten(A.embedding.default)
def embedding(ctx, node, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return ctx.op("Gather", [weight.id, indices.id], axis=0)


# ---- attention ---------------------------------------------------------------------------------
def _attention(ctx, node, q, k, v, mask, causal, scale, enable_gqa=False):
    hq, hk = q.shape[-3] if q.rank >= 3 else None, k.shape[-3] if k.rank >= 3 else None
    kid, vid = k.id, v.id
    if hq is not None and hk is not None and is_static_int(hq) and is_static_int(hk) and \
            static_int(hq) != static_int(hk):
        rep = static_int(hq) // static_int(hk)
        kid, vid = _repeat_heads(ctx, k, rep), _repeat_heads(ctx, v, rep)
    inputs = [q.id, kid, vid]
    if mask is not None:
        if mask.dtype == torch.bool:
            zero = ctx.const(0.0, q.dtype)
            ninf = ctx.const(float("-inf"), q.dtype)
            inputs.append(ctx.op("Where", [mask.id, zero, ninf]))
        else:
            inputs.append(ctx.cast(mask.id, q.dtype))
    attrs = dict(causal=int(bool(causal)))
    if scale is not None:
        attrs["scale"] = float(scale)
    return ctx.op("Attention", inputs, domain="ferrite", **attrs)


def _repeat_heads(ctx, t, rep):
    # [B, Hk, T, D] -> [B, Hk, rep, T, D] -> [B, Hk*rep, T, D]
    b, h, s, d = t.shape
    u = ctx.op("Unsqueeze", [t.id, ctx.const_i64([2])])
    e = ctx.op("Expand", [u, ctx.shape_value([b, h, rep, s, d])])
    # (Reshape's 0 copies the input dim at the same index, which here is rep, not the length.)
    return ctx.op("Reshape", [e, ctx.shape_value([b, h * rep, s, d])])


def _sdpa_check(node):
    p = node.kwargs.get("dropout_p", node.args[3] if len(node.args) > 3 and
                        isinstance(node.args[3], float) else 0.0)
    if p:
        return "attention dropout"
    q = fake_value(node.args[0])
    if q.dim() != 4:
        return f"attention of rank {q.dim()} (4 supported)"
    cpu_flash = node.target == A._scaled_dot_product_flash_attention_for_cpu.default
    if _used_outputs(node) - {0} and not cpu_flash:
        return ("attention's logsumexp (what its backward reads) is produced for the cpu flash "
                "kernel's overload only")
    return None


@aten(A._scaled_dot_product_flash_attention_for_cpu.default, check=_sdpa_check, dtypes=FLOATS)
def sdpa_flash_cpu(ctx, node, q, k, v, dropout_p=0.0, is_causal=False, attn_mask=None,
                   scale=None):
    out = _attention(ctx, node, q, k, v, attn_mask, is_causal, scale)
    if 1 not in _used_outputs(node):
        return (out, None)
    # Training: the backward reads the rows' logsumexp of the scaled, masked scores (natural
    # log, f32, [B, H, L]), as PyTorch's kernel returns it; the output keeps the fused kernel.
    s, _, _ = _sdpa_scores(ctx, q, k, v, attn_mask, is_causal, scale)
    m = ctx.op("ReduceMax", [s, ctx.const_i64([-1])], keepdims=1)
    z = ctx.op("ReduceSum", [ctx.op("Exp", [ctx.op("Sub", [s, m])]), ctx.const_i64([-1])],
               keepdims=1)
    lse = ctx.op("Add", [m, ctx.op("Log", [z])])
    return (out, ctx.op("Squeeze", [lse, ctx.const_i64([-1])]))


def _sdpa_scores(ctx, q, k, v, mask, causal, scale):
    """(scores, k, v) of attention as its math, in f32 (k, v with their heads repeated for
    grouped-query attention): scale * q k^T with the mask and the causal limit applied
    (top-left aligned, as PyTorch's), masked places -inf."""
    ct = torch.float32
    kid, vid = k.id, v.id
    hq, hk = q.shape[-3], k.shape[-3]
    if is_static_int(hq) and is_static_int(hk) and static_int(hq) != static_int(hk):
        rep = static_int(hq) // static_int(hk)
        kid, vid = _repeat_heads(ctx, k, rep), _repeat_heads(ctx, v, rep)
    kf, vf = ctx.cast(kid, ct), ctx.cast(vid, ct)
    sc = float(scale) if scale is not None else 1.0 / math.sqrt(static_int(q.shape[-1]))
    s = ctx.op("Mul", [ctx.op("MatMul", [ctx.cast(q.id, ct), _swap_last(ctx, kf)]),
                       ctx.const(sc, ct)])
    ninf = ctx.const(float("-inf"), ct)
    if mask is not None:
        if mask.dtype == torch.bool:
            s = ctx.op("Where", [mask.id, s, ninf])
        else:
            s = ctx.op("Add", [s, ctx.cast(mask.id, ct)])
    if causal:
        def arange(n):
            end = ctx.op("Squeeze", [ctx.shape_value([n]), ctx.const_i64([0])])
            return ctx.op("Range", [ctx.const(0, torch.int64), end, ctx.const(1, torch.int64)])
        rows = ctx.op("Unsqueeze", [arange(q.shape[-2]), ctx.const_i64([1])])
        cols = ctx.op("Unsqueeze", [arange(k.shape[-2]), ctx.const_i64([0])])
        s = ctx.op("Where", [ctx.op("Greater", [cols, rows]), ninf, s])
    return s, kf, vf


def _swap_last(ctx, x):
    return ctx.op("Transpose", [x], perm=[0, 1, 3, 2])


@aten(A._scaled_dot_product_flash_attention_for_cpu_backward.default, dtypes=FLOATS)
def sdpa_flash_cpu_backward(ctx, node, dout, q, k, v, out, lse, dropout_p=0.0, is_causal=False,
                            attn_mask=None, scale=None):
    """Attention's gradients from the forward's logsumexp (its probabilities recomputed, as
    FlashAttention's backward does, here as whole [L, S] matrices): dV = P^T dO, dS = P (dO V^T -
    rowsum(dO o O)), dQ = scale dS K, dK = scale dS^T Q; grouped-query heads summed back."""
    ct = torch.float32
    s, kf, vf = _sdpa_scores(ctx, q, k, v, attn_mask, is_causal, scale)
    p = ctx.op("Exp", [ctx.op("Sub", [s, ctx.op("Unsqueeze", [ctx.cast(lse.id, ct),
                                                                ctx.const_i64([-1])])])])
    do, o = ctx.cast(dout.id, ct), ctx.cast(out.id, ct)
    dv = ctx.op("MatMul", [_swap_last(ctx, p), do])
    dp = ctx.op("MatMul", [do, _swap_last(ctx, vf)])
    rowdot = ctx.op("ReduceSum", [ctx.op("Mul", [do, o]), ctx.const_i64([-1])], keepdims=1)
    ds = ctx.op("Mul", [p, ctx.op("Sub", [dp, rowdot])])
    sc = ctx.const(float(scale) if scale is not None else
                   1.0 / math.sqrt(static_int(q.shape[-1])), ct)
    dq = ctx.op("Mul", [ctx.op("MatMul", [ds, kf]), sc])
    dk = ctx.op("Mul", [ctx.op("MatMul", [_swap_last(ctx, ds), ctx.cast(q.id, ct)]), sc])
    hq, hk = q.shape[-3], k.shape[-3]
    if is_static_int(hq) and is_static_int(hk) and static_int(hq) != static_int(hk):
        rep = static_int(hq) // static_int(hk)

        def fold(g, t):  # [B, Hk*rep, S, D] -> [B, Hk, rep, S, D] -> sum over rep
            b, h, n, d = t.shape
            g5 = ctx.op("Reshape", [g, ctx.shape_value([b, h, rep, n, d])])
            return ctx.op("ReduceSum", [g5, ctx.const_i64([2])], keepdims=0)

        dk, dv = fold(dk, k), fold(dv, v)
    return (ctx.cast(dq, q.dtype), ctx.cast(dk, k.dtype), ctx.cast(dv, v.dtype))


@aten(A._scaled_dot_product_flash_attention.default, check=_sdpa_check, dtypes=FLOATS)
def sdpa_flash(ctx, node, q, k, v, dropout_p=0.0, is_causal=False, return_debug_mask=False,
               scale=None):
    return (_attention(ctx, node, q, k, v, None, is_causal, scale),) + (None,) * 8


@aten(A._scaled_dot_product_efficient_attention.default, check=_sdpa_check, dtypes=FLOATS)
def sdpa_efficient(ctx, node, q, k, v, attn_bias, compute_log_sumexp, dropout_p=0.0,
                   is_causal=False, scale=None):
    return (_attention(ctx, node, q, k, v, attn_bias, is_causal, scale), None, None, None)


@aten(A._scaled_dot_product_cudnn_attention.default, check=_sdpa_check, dtypes=FLOATS)
def sdpa_cudnn(ctx, node, q, k, v, attn_bias, compute_log_sumexp, dropout_p=0.0, is_causal=False,
               return_debug_mask=False, scale=None):
    return (_attention(ctx, node, q, k, v, attn_bias, is_causal, scale),) + (None,) * 8


# ---- resizing and padding ----------------------------------------------------------------------
@aten(A.constant_pad_nd.default)
def constant_pad_nd(ctx, node, x, pad, value=0):
    pads = _onnx_pads(x.rank, pad)
    return ctx.op("Pad", [x.id, ctx.const_i64(pads), ctx.const(value, x.dtype)], mode="constant")


@aten(A.reflection_pad2d.default, A.reflection_pad1d.default, dtypes=FLOATS)
def reflection_pad(ctx, node, x, pad):
    return ctx.op("Pad", [x.id, ctx.const_i64(_onnx_pads(x.rank, pad))], mode="reflect")


@aten(A.replication_pad2d.default, A.replication_pad1d.default, dtypes=FLOATS)
def replication_pad(ctx, node, x, pad):
    return ctx.op("Pad", [x.id, ctx.const_i64(_onnx_pads(x.rank, pad))], mode="edge")


def _onnx_pads(rank, pad):
    # torch: (left_last, right_last, left_prev, right_prev, ...); ONNX: begins then ends.
    pad = [static_int(p) for p in pad]
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        begins[rank - 1 - i] = pad[2 * i]
        ends[rank - 1 - i] = pad[2 * i + 1]
    return begins + ends


@aten(A.pixel_shuffle.default, dtypes=FLOATS)
def pixel_shuffle(ctx, node, x, r):
    return ctx.op("DepthToSpace", [x.id], blocksize=int(r), mode="CRD")
