"""Scatters: index_put (the gradient of indexing, accumulate=True), scatter and scatter_add (the
gradient of gather), onto ScatterND / ScatterElements."""

from __future__ import annotations

import torch

from ..aten_table import aten
from ..fx_importer import fake_value

A = torch.ops.aten


def _index_put_check(node):
    idx = list(node.args[1])
    present = [i for i, t in enumerate(idx) if t is not None]
    if not present or present != list(range(len(present))):
        return "index_put with index tensors not on the leading dims"
    for t in idx:
        if t is not None and fake_value(t).dtype == torch.bool:
            return "boolean-mask index_put (data-dependent shape)"
    return None


@aten(A.index_put.default, A._unsafe_index_put.default, check=_index_put_check)
def index_put(ctx, node, x, indices, values, accumulate=False):
    # x[i0, i1, ...] (+)= values, with the index tensors on the leading dims: the indices are
    # broadcast and stacked on a new last axis (negative ones wrapped), values broadcast to the
    # indexed shape plus the trailing dims of x.
    m = len(indices)
    shape = torch.broadcast_shapes(*[tuple(t.shape) for t in indices])
    target = ctx.shape_value(list(shape))
    last = ctx.const_i64([-1])
    parts = [ctx.op("Unsqueeze", [ctx.op("Expand", [ctx.cast(t.id, torch.int64), target]), last])
             for t in indices]
    stacked = parts[0] if m == 1 else ctx.op("Concat", parts, axis=-1)
    dims = ctx.op("Shape", [x.id], start=0, end=m)
    wrapped = ctx.op("Where", [ctx.op("Less", [stacked, ctx.const(0, torch.int64)]),
                               ctx.op("Add", [stacked, dims]), stacked])
    upd_shape = ctx.shape_value(list(shape) + list(x.shape[m:]))
    upd = ctx.op("Expand", [ctx.cast(values.id, x.dtype), upd_shape])
    return ctx.op("ScatterND", [x.id, wrapped, upd],
                  reduction="add" if accumulate else "none")


def _scatter_check(node):
    idx, src = fake_value(node.args[2]), node.args[3]
    if isinstance(src, torch.fx.Node) and tuple(fake_value(src).shape) != tuple(idx.shape):
        return "scatter with a source larger than its index"
    return None


def _norm(d, rank):
    d = int(d)
    return d + rank if d < 0 else d


@aten(A.scatter_add.default, check=_scatter_check)
def scatter_add(ctx, node, x, dim, index, src):
    return ctx.op("ScatterElements", [x.id, index.id, ctx.cast(src.id, x.dtype)],
                  axis=_norm(dim, x.rank), reduction="add")


@aten(A.scatter.src, A.scatter.value, check=_scatter_check)
def scatter(ctx, node, x, dim, index, src):
    if not hasattr(src, "id"):
        src_id = ctx.op("Expand", [ctx.operand(src, x.dtype), ctx.op("Shape", [index.id])])
    else:
        src_id = ctx.cast(src.id, x.dtype)
    return ctx.op("ScatterElements", [x.id, index.id, src_id], axis=_norm(dim, x.rank))
