"""Backward ATen ops of training graphs (AOTAutograd's backward graph): convolution, pooling,
normalisation, activations, softmax, embedding. Each is written as existing ferrite IR ops:
pointwise math and row reductions that the lowering fuses into generated kernels, ConvTranspose
and ferrite.ConvGradWeight for the convolution gradients, and a scatter-add only where windows
overlap.
Gradients of low-precision inputs are computed in f32 (PyTorch's opmath) and cast back."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..aten_table import FLOATS, aten
from ..fx_importer import fake_value, is_static_int, static_int

A = torch.ops.aten
_LOW = (torch.float16, torch.bfloat16)


def _opmath(dtype):
    return torch.float32 if dtype in _LOW else dtype


def _masked(outputs, mask):
    """Outputs of an op with an output_mask: None where the mask is False."""
    return tuple(o if m else None for o, m in zip(outputs, mask))


def _bcast_channel(ctx, v, rank):
    """A per-channel [C] value as [1, C, 1, ...] against an N,C,... tensor of `rank`."""
    return ctx.op("Reshape", [v, ctx.const_i64([1, -1] + [1] * (rank - 2))])


# ---- convolution ---------------------------------------------------------------------------------
def _conv_backward_check(node):
    if node.args[7]:
        return "convolution_backward of a transposed convolution"
    x = fake_value(node.args[1])
    if x.dim() not in (3, 4, 5):
        return f"convolution_backward of rank {x.dim()}"
    if not all(is_static_int(s) for s in list(x.shape[2:]) + list(fake_value(node.args[2]).shape)):
        return "convolution_backward with symbolic spatial or weight sizes"
    return None


def _expand_nd(v, nd):
    v = [static_int(e) for e in v]
    return v * nd if len(v) == 1 else v


@aten(A.convolution_backward.default, check=_conv_backward_check, dtypes=FLOATS)
def convolution_backward(ctx, node, grad, x, w, bias_sizes, stride, padding, dilation,
                         transposed, output_padding, groups, output_mask):
    nd = x.rank - 2
    s, p, d = _expand_nd(stride, nd), _expand_nd(padding, nd), _expand_nd(dilation, nd)
    g = int(groups)
    k = [static_int(v) for v in w.shape[2:]]
    spatial = [static_int(v) for v in x.shape[2:]]
    gi = gw = gb = None
    if output_mask[0]:
        gi = _conv_input_grad(ctx, grad, w, s, p, d, g, k, spatial)
    if output_mask[1]:
        gw = _conv_weight_grad(ctx, grad, x, s, p, d, g, k)
    if output_mask[2]:
        gb = ctx.op("ReduceSum", [grad.id, ctx.const_i64([0] + list(range(2, x.rank)))],
                    keepdims=0)
    return (gi, gw, gb)


def _conv_input_grad(ctx, grad, w, s, p, d, g, k, spatial):
    """dX is the transposed convolution of the gradient with the forward's weight and window
    (ONNX ConvTranspose: cuDNN's backward-data on cuda). output_padding restores the input rows
    the forward's floor division dropped."""
    op = [(h + 2 * pp - (kk - 1) * dd - 1) % ss for h, pp, kk, dd, ss in zip(spatial, p, k, d, s)]
    attrs = dict(strides=s, pads=p + p, dilations=d, group=g, kernel_shape=k)
    if any(op):
        attrs["output_padding"] = op
    return ctx.op("ConvTranspose", [grad.id, w.id], **attrs)


def _conv_weight_grad(ctx, grad, x, s, p, d, g, k):
    """dW as ferrite.ConvGradWeight (cuDNN's backward-filter on cuda, the reference's im2col
    GEMM elsewhere)."""
    return ctx.op("ConvGradWeight", [x.id, grad.id], domain="ferrite", kernel_shape=k, strides=s,
                  pads=p + p, dilations=d, group=g)


# ---- pooling -------------------------------------------------------------------------------------
def _pool_params(x, kernel, stride, padding, dilation=(1,)):
    nd = x.rank - 2
    k = _expand_nd(kernel, nd)
    s = _expand_nd(stride, nd) if stride else list(k)
    return k, s, _expand_nd(padding, nd), _expand_nd(dilation, nd)


def _tiles(x, out, k, s, p, d):
    """The windows tile the input exactly: stride == kernel, no padding or dilation."""
    spatial = [static_int(v) for v in x.shape[2:]]
    return (k == s and not any(p) and all(v == 1 for v in d)
            and [o * kk for o, kk in zip(out, k)] == spatial)


def _upsample(ctx, v, k):
    """Each element of an [N, C, h, w] value repeated over a k-window: [N, C, h*k0, w*k1]
    (Reshape + Expand + Reshape: views the lowering folds into the consumer's loads)."""
    nd = v.rank - 2
    out = [static_int(e) for e in v.shape[2:]]
    inter = [0, 0]
    full = list(v.shape[:2])
    for o, kk in zip(out, k):
        inter += [o, 1]
        full += [o, kk]
    r = ctx.op("Reshape", [v.id, ctx.const_i64(inter)])
    e = ctx.op("Expand", [r, ctx.shape_value(full)])
    return ctx.op("Reshape", [e, ctx.const_i64([0, 0] + [o * kk for o, kk in zip(out, k)])])


def _pool_backward_check(node):
    x = fake_value(node.args[1])
    if not all(is_static_int(v) for v in x.shape[1:]):
        return "pooling backward with symbolic channel or spatial sizes"
    return None


@aten(A.max_pool2d_with_indices_backward.default, A.max_pool3d_with_indices_backward.default,
      check=_pool_backward_check, dtypes=FLOATS | {torch.int64})
def max_pool_backward(ctx, node, grad, x, kernel, stride, padding, dilation, ceil_mode, indices):
    k, s, p, d = _pool_params(x, kernel, stride, padding, dilation)
    out = [static_int(v) for v in grad.shape[2:]]
    spatial = [static_int(v) for v in x.shape[2:]]
    plane = int(np.prod(spatial))
    if _tiles(x, out, k, s, p, d):
        # Each input element lies in one window: its gradient is the window's when it is the
        # element the forward picked (torch's index within the plane), else 0. Pointwise.
        pos = ctx.const(np.arange(plane, dtype=np.int64).reshape(spatial).tolist(), torch.int64)
        up_i = _upsample(ctx, indices, k)
        up_g = _upsample(ctx, grad, k)
        hit = ctx.op("Equal", [up_i, pos])
        return ctx.op("Where", [hit, up_g, ctx.const(0.0, grad.dtype)])
    # Overlapping windows: scatter-add each window's gradient to its picked element.
    flat = ctx.const_i64([0, 0, -1])
    zeros = ctx.op("Expand", [ctx.const(0.0, grad.dtype),
                              ctx.shape_value(list(x.shape[:2]) + [plane])])
    acc = ctx.op("ScatterElements", [zeros, ctx.op("Reshape", [indices.id, flat]),
                                     ctx.op("Reshape", [grad.id, flat])], axis=2, reduction="add")
    return ctx.op("Reshape", [acc, ctx.const_i64([0, 0] + spatial)])


def _avg_divisors(spatial, out, k, s, p, ceil_mode, count_include_pad, divisor_override):
    """1 / divisor of each output window, as PyTorch's avg_pool kernels compute it."""
    per_dim = []
    for n, o, kk, ss, pp in zip(spatial, out, k, s, p):
        start = np.arange(o) * ss - pp
        end = np.minimum(start + kk, n + pp)
        size = end - start
        start, end = np.maximum(start, 0), np.minimum(end, n)
        per_dim.append((size, end - start))
    inc = np.ones(out)
    exc = np.ones(out)
    for i, (size, valid) in enumerate(per_dim):
        shape = [1] * len(out)
        shape[i] = -1
        inc = inc * size.reshape(shape)
        exc = exc * valid.reshape(shape)
    if divisor_override:
        div = np.full(out, float(divisor_override))
    else:
        div = inc if count_include_pad else exc
    return 1.0 / div


@aten(A.avg_pool2d_backward.default, A.avg_pool3d_backward.default, check=_pool_backward_check,
      dtypes=FLOATS)
def avg_pool_backward(ctx, node, grad, x, kernel, stride, padding, ceil_mode, count_include_pad,
                      divisor_override=None):
    k, s, p, _ = _pool_params(x, kernel, stride, padding)
    out = [static_int(v) for v in grad.shape[2:]]
    spatial = [static_int(v) for v in x.shape[2:]]
    recip = _avg_divisors(spatial, out, k, s, p, ceil_mode, count_include_pad, divisor_override)
    if np.all(recip == recip.flat[0]):
        scale = ctx.const(float(recip.flat[0]), grad.dtype)
    else:
        scale = ctx.const(recip.astype(np.float64).tolist(), grad.dtype)
    g = type(grad)(ctx.op("Mul", [grad.id, scale]), grad.dtype, grad.shape)
    if _tiles(x, out, k, s, p, [1] * len(k)):
        return _upsample(ctx, g, k)
    # Spread each window's share over its elements: a depthwise transposed convolution with a
    # kernel of ones, padded rows cut off, rows no window reached (floor mode) zero.
    c = static_int(x.shape[1])
    ones = ctx.const(np.ones([c, 1] + k, dtype=np.float32).tolist(), grad.dtype)
    ct = ctx.op("ConvTranspose", [g.id, ones], strides=s, group=c, kernel_shape=k)
    full = [(o - 1) * ss + kk for o, ss, kk in zip(out, s, k)]
    nd = len(k)
    axes = ctx.const_i64(list(range(2, 2 + nd)))
    ends = [min(pp + n, f) for pp, n, f in zip(p, spatial, full)]
    y = ctx.op("Slice", [ct, ctx.const_i64(p), ctx.const_i64(ends), axes])
    short = [pp + n - e for pp, n, e in zip(p, spatial, ends)]
    if any(short):
        pads = [0] * (2 + nd) + [0, 0] + short
        y = ctx.op("Pad", [y, ctx.const_i64(pads), ctx.const(0.0, grad.dtype)], mode="constant")
    return y


# ---- normalisation -------------------------------------------------------------------------------
@aten(A.native_batch_norm_backward.default, dtypes=FLOATS)
def native_batch_norm_backward(ctx, node, dy, x, w, running_mean, running_var, save_mean,
                               save_invstd, train, eps, output_mask):
    ct = _opmath(x.dtype)
    rank = x.rank
    axes = ctx.const_i64([0] + list(range(2, rank)))
    xf, dyf = ctx.cast(x.id, ct), ctx.cast(dy.id, ct)
    if train:
        mean, invstd = ctx.cast(save_mean.id, ct), ctx.cast(save_invstd.id, ct)
    else:
        mean = ctx.cast(running_mean.id, ct)
        var = ctx.op("Add", [ctx.cast(running_var.id, ct), ctx.const(float(eps), ct)])
        invstd = ctx.op("Reciprocal", [ctx.op("Sqrt", [var])])
    mean_b, invstd_b = _bcast_channel(ctx, mean, rank), _bcast_channel(ctx, invstd, rank)
    xmu = ctx.op("Sub", [xf, mean_b])
    sum_dy = ctx.op("ReduceSum", [dyf, axes], keepdims=0)
    sum_dy_xmu = ctx.op("ReduceSum", [ctx.op("Mul", [dyf, xmu]), axes], keepdims=0)
    scale = invstd if w is None else ctx.op("Mul", [invstd, ctx.cast(w.id, ct)])
    gi = gw = gb = None
    if output_mask[0]:
        if train:
            cnt = 1
            for e in [x.shape[0]] + list(x.shape[2:]):
                cnt = cnt * e
            inv_n = ctx.op("Reciprocal", [ctx.operand(cnt, ct)])
            mean_dy = ctx.op("Mul", [sum_dy, inv_n])
            # (x - mean) * invstd^2 * mean(dy * (x - mean))
            proj = ctx.op("Mul", [ctx.op("Mul", [sum_dy_xmu, inv_n]),
                                  ctx.op("Mul", [invstd, invstd])])
            inner = ctx.op("Sub", [ctx.op("Sub", [dyf, ctx.op("Mul", [xmu, _bcast_channel(
                ctx, proj, rank)])]), _bcast_channel(ctx, mean_dy, rank)])
        else:
            inner = dyf
        gi = ctx.cast(ctx.op("Mul", [inner, _bcast_channel(ctx, scale, rank)]), x.dtype)
    if output_mask[1]:
        gw = ctx.op("Mul", [sum_dy_xmu, invstd])
    if output_mask[2]:
        gb = sum_dy
    wdt = w.dtype if w is not None else x.dtype
    gw = None if gw is None else ctx.cast(gw, wdt)
    return (gi, gw, None if gb is None else ctx.cast(gb, wdt))


@aten(A.native_layer_norm_backward.default, dtypes=FLOATS)
def native_layer_norm_backward(ctx, node, dy, x, normalized_shape, mean, rstd, w, b, output_mask):
    ct = _opmath(x.dtype)
    k = len(normalized_shape)
    inner_axes = ctx.const_i64(list(range(x.rank - k, x.rank)))
    outer_axes = ctx.const_i64(list(range(x.rank - k)))
    xf, dyf = ctx.cast(x.id, ct), ctx.cast(dy.id, ct)
    r = ctx.cast(rstd.id, ct)
    xhat = ctx.op("Mul", [ctx.op("Sub", [xf, ctx.cast(mean.id, ct)]), r])
    gi = gw = gb = None
    if output_mask[0]:
        wdy = dyf if w is None else ctx.op("Mul", [dyf, ctx.cast(w.id, ct)])
        m1 = ctx.op("ReduceMean", [wdy, inner_axes], keepdims=1)
        m2 = ctx.op("ReduceMean", [ctx.op("Mul", [wdy, xhat]), inner_axes], keepdims=1)
        d = ctx.op("Sub", [ctx.op("Sub", [wdy, m1]), ctx.op("Mul", [xhat, m2])])
        gi = ctx.cast(ctx.op("Mul", [d, r]), x.dtype)
    if output_mask[1] and w is not None:
        gw = _sum_outer(ctx, ctx.op("Mul", [dyf, xhat]), outer_axes, x.rank - k, w.dtype)
    if output_mask[2] and b is not None:
        gb = _sum_outer(ctx, dyf, outer_axes, x.rank - k, b.dtype)
    return (gi, gw, gb)


def _sum_outer(ctx, v, axes, n_outer, dtype):
    if n_outer == 0:
        return ctx.cast(v, dtype)
    return ctx.cast(ctx.op("ReduceSum", [v, axes], keepdims=0), dtype)


# ---- activations and softmax ---------------------------------------------------------------------
@aten(A.threshold_backward.default, dtypes=FLOATS)
def threshold_backward(ctx, node, grad, x, threshold):
    dt = grad.dtype
    le = ctx.op("LessOrEqual", [x.id, ctx.operand(threshold, x.dtype)])
    return ctx.op("Where", [le, ctx.const(0.0, dt), grad.id])


def _gelu_backward_check(node):
    approx = node.kwargs.get("approximate", node.args[2] if len(node.args) > 2 else "none")
    return None if approx in ("none", "tanh") else f"gelu approximate={approx!r}"


@aten(A.gelu_backward.default, check=_gelu_backward_check, dtypes=FLOATS)
def gelu_backward(ctx, node, grad, x, approximate="none"):
    ct = _opmath(x.dtype)
    xf, g = ctx.cast(x.id, ct), ctx.cast(grad.id, ct)

    def c(v):
        return ctx.const(v, ct)

    def mul(*vs):
        acc = vs[0]
        for v in vs[1:]:
            acc = ctx.op("Mul", [acc, v])
        return acc

    if approximate == "tanh":
        kb, kk = math.sqrt(2.0 / math.pi), 0.044715
        x2 = mul(xf, xf)
        inner = mul(c(kb), ctx.op("Add", [xf, mul(c(kk), x2, xf)]))
        t = ctx.op("Tanh", [inner])
        left_d = mul(c(0.5), ctx.op("Add", [c(1.0), t]))
        t_d = ctx.op("Sub", [c(1.0), mul(t, t)])
        inner_d = mul(c(kb), ctx.op("Add", [c(1.0), mul(c(3.0 * kk), x2)]))
        d = ctx.op("Add", [left_d, mul(c(0.5), xf, t_d, inner_d)])
    else:
        cdf = mul(c(0.5), ctx.op("Add", [c(1.0), ctx.op("Erf", [mul(xf, c(math.sqrt(0.5)))])]))
        pdf = mul(ctx.op("Exp", [mul(c(-0.5), xf, xf)]), c(1.0 / math.sqrt(2.0 * math.pi)))
        d = ctx.op("Add", [cdf, mul(xf, pdf)])
    return ctx.cast(mul(g, d), grad.dtype)


@aten(A._softmax_backward_data.default, dtypes=FLOATS)
def softmax_backward(ctx, node, grad, y, dim, input_dtype):
    ct = _opmath(y.dtype)
    g, yf = ctx.cast(grad.id, ct), ctx.cast(y.id, ct)
    gy = ctx.op("Mul", [g, yf])
    s = ctx.op("ReduceSum", [gy, ctx.const_i64([int(dim)])], keepdims=1)
    return ctx.cast(ctx.op("Mul", [yf, ctx.op("Sub", [g, s])]), fake_value(node).dtype)


@aten(A._log_softmax_backward_data.default, dtypes=FLOATS)
def log_softmax_backward(ctx, node, grad, y, dim, input_dtype):
    ct = _opmath(y.dtype)
    g, yf = ctx.cast(grad.id, ct), ctx.cast(y.id, ct)
    s = ctx.op("ReduceSum", [g, ctx.const_i64([int(dim)])], keepdims=1)
    return ctx.cast(ctx.op("Sub", [g, ctx.op("Mul", [ctx.op("Exp", [yf]), s])]),
                    fake_value(node).dtype)


# ---- embedding -----------------------------------------------------------------------------------
def _embedding_backward_check(node):
    scale = node.args[4] if len(node.args) > 4 else node.kwargs.get("scale_grad_by_freq", False)
    return "embedding backward with scale_grad_by_freq" if scale else None


@aten(A.embedding_dense_backward.default, check=_embedding_backward_check, dtypes=FLOATS | {
    torch.int32, torch.int64})
def embedding_dense_backward(ctx, node, grad, indices, num_weights, padding_idx,
                             scale_grad_by_freq):
    dim = grad.shape[-1]
    g = ctx.op("Reshape", [grad.id, ctx.shape_value([-1, dim])])
    idx = ctx.op("Reshape", [ctx.cast(indices.id, torch.int64), ctx.const_i64([-1, 1])])
    if padding_idx is not None and int(padding_idx) >= 0:
        pad = ctx.op("Equal", [idx, ctx.const(int(padding_idx), torch.int64)])
        g = ctx.op("Where", [pad, ctx.const(0.0, grad.dtype), g])
    zeros = ctx.op("Expand", [ctx.const(0.0, grad.dtype), ctx.shape_value([num_weights, dim])])
    return ctx.op("ScatterND", [zeros, idx, g], reduction="add")
