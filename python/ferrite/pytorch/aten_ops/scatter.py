"""Scatters: index_put (the gradient of indexing, accumulate=True), scatter and scatter_add (the
gradient of gather), onto ScatterND / ScatterElements."""

from __future__ import annotations

import torch

from ..aten_table import aten
from ..fx_importer import fake_value

A = torch.ops.aten


def _index_put_check(node):
    idx = list(node.args[1])
    if not any(t is not None for t in idx):
        return "index_put without index tensors"
    for t in idx:
        if t is not None and fake_value(t).dtype == torch.bool:
            return "boolean-mask index_put (data-dependent shape)"
    return None


@aten(A.index_put.default, A._unsafe_index_put.default, check=_index_put_check)
def index_put(ctx, node, x, indices, values, accumulate=False):
    # x[..., i0, i1, ...] (+)= values as one ScatterND over x with the indexed dims moved to the
    # front: the indices broadcast and stacked on a new last axis (negative ones wrapped), values
    # broadcast to the indexing result's shape (the index dims where torch puts them: in place of
    # the first when adjacent, else in front) and moved the same way.
    present = [i for i, t in enumerate(indices) if t is not None]
    m = len(present)
    others = [d for d in range(x.rank) if d not in present]
    moved = present != list(range(m))
    xt = ctx.op("Transpose", [x.id], perm=present + others) if moved else x.id
    shape = list(torch.broadcast_shapes(*[tuple(indices[i].shape) for i in present]))
    target = ctx.shape_value(shape)
    last = ctx.const_i64([-1])
    parts = [ctx.op("Unsqueeze", [ctx.op("Expand", [ctx.cast(indices[i].id, torch.int64), target]),
                                  last]) for i in present]
    stacked = parts[0] if m == 1 else ctx.op("Concat", parts, axis=-1)
    dims = ctx.shape_value([x.shape[i] for i in present])
    wrapped = ctx.op("Where", [ctx.op("Less", [stacked, ctx.const(0, torch.int64)]),
                               ctx.op("Add", [stacked, dims]), stacked])
    rest = [x.shape[d] for d in others]
    adjacent = present == list(range(present[0], present[0] + m))
    k = present[0] if adjacent else 0
    nb = len(shape)
    result = rest[:k] + shape + rest[k:]  # the indexing result's layout
    upd = ctx.op("Expand", [ctx.cast(values.id, x.dtype), ctx.shape_value(result)])
    if k:
        upd = ctx.op("Transpose", [upd], perm=list(range(k, k + nb)) + list(range(k)) +
                     list(range(k + nb, len(result))))
    y = ctx.op("ScatterND", [xt, wrapped, upd], reduction="add" if accumulate else "none")
    if not moved:
        return y
    perm = present + others
    return ctx.op("Transpose", [y], perm=[perm.index(d) for d in range(x.rank)])


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
