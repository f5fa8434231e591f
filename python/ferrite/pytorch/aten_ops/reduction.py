"""Reductions: sum, mean, max/min (values and indices), argmax/argmin, prod, var/std, any/all,
logsumexp."""

from __future__ import annotations

import torch

from ..aten_table import FLOATS, INTS, aten
from ..fx_importer import fake_value, is_static_int, static_int

A = torch.ops.aten


def _axes(x, dims):
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(x.rank))
    if isinstance(dims, int):
        dims = [dims]
    return [int(d) + x.rank if int(d) < 0 else int(d) for d in dims]


def _reduce(ctx, onnx_op, x, dims, keepdim, dtype):
    src = ctx.cast(x.id, dtype)
    if x.rank == 0:
        return ctx.op("Identity", [src])
    return ctx.op(onnx_op, [src, ctx.const_i64(_axes(x, dims))], keepdims=int(bool(keepdim)))


@aten(A.sum.dim_IntList)
def sum_dim(ctx, node, x, dims=None, keepdim=False, dtype=None):
    return _reduce(ctx, "ReduceSum", x, dims, keepdim, fake_value(node).dtype)


@aten(A.sum.default)
def sum_all(ctx, node, x, dtype=None):
    return _reduce(ctx, "ReduceSum", x, None, False, fake_value(node).dtype)


@aten(A.mean.dim, dtypes=FLOATS)
def mean_dim(ctx, node, x, dims=None, keepdim=False, dtype=None):
    return _reduce(ctx, "ReduceMean", x, dims, keepdim, fake_value(node).dtype)


@aten(A.mean.default, dtypes=FLOATS)
def mean_all(ctx, node, x, dtype=None):
    return _reduce(ctx, "ReduceMean", x, None, False, fake_value(node).dtype)


@aten(A.amax.default, dtypes=FLOATS | INTS)
def amax(ctx, node, x, dims=(), keepdim=False):
    return _reduce(ctx, "ReduceMax", x, dims, keepdim, x.dtype)


@aten(A.amin.default, dtypes=FLOATS | INTS)
def amin(ctx, node, x, dims=(), keepdim=False):
    return _reduce(ctx, "ReduceMin", x, dims, keepdim, x.dtype)


@aten(A.max.default, dtypes=FLOATS | INTS)
def max_all(ctx, node, x):
    return _reduce(ctx, "ReduceMax", x, None, False, x.dtype)


@aten(A.min.default, dtypes=FLOATS | INTS)
def min_all(ctx, node, x):
    return _reduce(ctx, "ReduceMin", x, None, False, x.dtype)


def _values_indices(ctx, node, x, dim, keepdim, value_op, index_op):
    axis = _axes(x, [dim])[0]
    v = ctx.op(value_op, [x.id, ctx.const_i64([axis])], keepdims=int(bool(keepdim)))
    i = ctx.op(index_op, [x.id], axis=axis, keepdims=int(bool(keepdim)), select_last_index=0)
    return (v, i)


@aten(A.max.dim, dtypes=FLOATS | INTS)
def max_dim(ctx, node, x, dim, keepdim=False):
    return _values_indices(ctx, node, x, dim, keepdim, "ReduceMax", "ArgMax")


@aten(A.min.dim, dtypes=FLOATS | INTS)
def min_dim(ctx, node, x, dim, keepdim=False):
    return _values_indices(ctx, node, x, dim, keepdim, "ReduceMin", "ArgMin")


def _arg(ctx, node, x, dim, keepdim, op):
    if dim is None:
        flat = ctx.op("Reshape", [x.id, ctx.const_i64([-1])])
        r = ctx.op(op, [flat], axis=0, keepdims=0)
        if keepdim:
            r = ctx.op("Reshape", [r, ctx.const_i64([1] * x.rank)])
        return r
    return ctx.op(op, [x.id], axis=_axes(x, [dim])[0], keepdims=int(bool(keepdim)))


@aten(A.argmax.default, dtypes=FLOATS | INTS)
def argmax(ctx, node, x, dim=None, keepdim=False):
    return _arg(ctx, node, x, dim, keepdim, "ArgMax")


@aten(A.argmin.default, dtypes=FLOATS | INTS)
def argmin(ctx, node, x, dim=None, keepdim=False):
    return _arg(ctx, node, x, dim, keepdim, "ArgMin")


@aten(A.prod.dim_int)
def prod_dim(ctx, node, x, dim, keepdim=False, dtype=None):
    return _reduce(ctx, "ReduceProd", x, [dim], keepdim, fake_value(node).dtype)


def _var(ctx, node, x, dims, correction, keepdim):
    axes = _axes(x, dims)
    ax = ctx.const_i64(axes)
    mean = ctx.op("ReduceMean", [x.id, ax], keepdims=1)
    d = ctx.op("Sub", [x.id, mean])
    var = ctx.op("ReduceMean", [ctx.op("Mul", [d, d]), ax], keepdims=int(bool(keepdim)))
    c = 1.0 if correction is None else float(correction)
    if c == 0:
        return var
    n = 1
    for a in axes:
        n = n * x.shape[a]
    if is_static_int(n):
        n = static_int(n)
        return ctx.op("Mul", [var, ctx.const(n / max(n - c, 0.0) if n > c else float("inf"),
                                             x.dtype)])
    nv = ctx.cast(ctx.op("Squeeze", [ctx.sym(n), ctx.const_i64([0])]), x.dtype)
    return ctx.op("Mul", [var, ctx.op("Div", [nv, ctx.op("Sub", [nv, ctx.const(c, x.dtype)])])])


@aten(A.var.correction, dtypes=FLOATS)
def var(ctx, node, x, dims=None, correction=None, keepdim=False):
    return _var(ctx, node, x, dims, correction, keepdim)


@aten(A.std.correction, dtypes=FLOATS)
def std(ctx, node, x, dims=None, correction=None, keepdim=False):
    return ctx.op("Sqrt", [_var(ctx, node, x, dims, correction, keepdim)])


def _any_all(ctx, node, x, dims, keepdim, op):
    # The truth values as 0.0 / 1.0 (exact): float reductions become row kernels on every device
    # (integer ones ran on the host on cuda: a BERT forward copied 75 MB back per call).
    src = ctx.cast(ctx.cast(x.id, torch.bool), torch.float32)
    r = _reduce(ctx, op, type(x)(src, torch.float32, x.shape), dims, keepdim, torch.float32)
    return ctx.cast(r, torch.bool)


@aten(A.any.default, A.any.dim, A.any.dims)
def any_(ctx, node, x, dims=None, keepdim=False):
    return _any_all(ctx, node, x, dims, keepdim, "ReduceMax")


@aten(A.all.default, A.all.dim, A.all.dims)
def all_(ctx, node, x, dims=None, keepdim=False):
    return _any_all(ctx, node, x, dims, keepdim, "ReduceMin")


@aten(A.logsumexp.default, dtypes=FLOATS)
def logsumexp(ctx, node, x, dims, keepdim=False):
    return _reduce(ctx, "ReduceLogSumExp", x, dims, keepdim, x.dtype)
