"""View and data-movement ATen ops: reshape, permute, expand, squeeze, concatenation, slicing,
indexing, casts, and tensor creation from sizes."""

from __future__ import annotations

import sys

import torch

from ..aten_table import ALL, FLOATS, INTS, aten
from ..fx_importer import (ONNX_DTYPE, TV, Sym, TranslationError, fake_value, is_static_int,
                           static_int)

A = torch.ops.aten
INT64_MAX = 2**63 - 1


def _norm(d, rank):
    d = int(d)
    return d + rank if d < 0 else d


def _out(node):
    return fake_value(node)


# ---- views -------------------------------------------------------------------------------------
@aten(A.view.default, A._unsafe_view.default, A.reshape.default)
def view(ctx, node, x, size):
    return ctx.op("Reshape", [x.id, ctx.shape_value(list(size))])


@aten(A.permute.default)
def permute(ctx, node, x, dims):
    return ctx.op("Transpose", [x.id], perm=[_norm(d, x.rank) for d in dims])


@aten(A.t.default)
def t(ctx, node, x):
    if x.rank < 2:
        return ctx.op("Identity", [x.id])
    return ctx.op("Transpose", [x.id], perm=[1, 0])


@aten(A.transpose.int)
def transpose(ctx, node, x, d0, d1):
    perm = list(range(x.rank))
    a, b = _norm(d0, x.rank), _norm(d1, x.rank)
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.op("Transpose", [x.id], perm=perm)


@aten(A.expand.default)
def expand(ctx, node, x, size, implicit=False):
    size = list(size)
    lead = len(size) - x.rank
    dims = [x.shape[i - lead] if (not isinstance(s, TV) and is_static_int(s) and static_int(s) == -1)
            else s for i, s in enumerate(size)]
    return ctx.op("Expand", [x.id, ctx.shape_value(dims)])


@aten(A.unsqueeze.default)
def unsqueeze(ctx, node, x, dim):
    return ctx.op("Unsqueeze", [x.id, ctx.const_i64([_norm(dim, x.rank + 1)])])


def _squeeze(ctx, node, x, dims):
    # torch drops only dims of size 1 and ignores the others.
    axes = [_norm(d, x.rank) for d in dims if is_static_int(x.shape[_norm(d, x.rank)]) and
            static_int(x.shape[_norm(d, x.rank)]) == 1]
    if not axes:
        return ctx.op("Identity", [x.id])
    return ctx.op("Squeeze", [x.id, ctx.const_i64(axes)])


@aten(A.squeeze.dim)
def squeeze_dim(ctx, node, x, dim):
    return _squeeze(ctx, node, x, [dim])


@aten(A.squeeze.dims)
def squeeze_dims(ctx, node, x, dims):
    return _squeeze(ctx, node, x, list(dims))


@aten(A.squeeze.default)
def squeeze(ctx, node, x):
    return _squeeze(ctx, node, x, list(range(x.rank)))


@aten(A.clone.default, A.alias.default, A.detach.default, A.lift_fresh_copy.default)
def identity(ctx, node, x, **_):
    return ctx.op("Identity", [x.id])


def _to_copy_check(node):
    dev = node.kwargs.get("device")
    src = fake_value(node.args[0]).device
    if dev is not None and torch.device(dev) != src:
        return f"copy to another device ({src} -> {dev})"
    return None


@aten(A._to_copy.default, check=_to_copy_check)
def to_copy(ctx, node, x, **kwargs):
    return ctx.cast(x.id, _out(node).dtype) if _out(node).dtype != x.dtype else \
        ctx.op("Identity", [x.id])


# ---- joining and splitting ---------------------------------------------------------------------
@aten(A.cat.default)
def cat(ctx, node, tensors, dim=0):
    dt = _out(node).dtype
    rank = _out(node).dim()
    # torch skips legacy empty 1-d tensors in cat.
    parts = [ctx.cast(t.id, dt) for t in tensors
             if not (t.rank == 1 and is_static_int(t.shape[0]) and static_int(t.shape[0]) == 0)]
    if len(parts) == 1:
        return ctx.op("Identity", [parts[0]])
    return ctx.op("Concat", parts, axis=_norm(dim, rank))


@aten(A.stack.default)
def stack(ctx, node, tensors, dim=0):
    rank = _out(node).dim()
    d = _norm(dim, rank)
    axes = ctx.const_i64([d])
    parts = [ctx.op("Unsqueeze", [ctx.cast(t.id, _out(node).dtype), axes]) for t in tensors]
    return ctx.op("Concat", parts, axis=d) if len(parts) > 1 else ctx.op("Identity", parts)


def _split_sizes(node):
    return [o.shape[_norm(node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0),
                          o.dim())] for o in fake_value(node)]


@aten(A.split.Tensor, A.split_with_sizes.default)
def split(ctx, node, x, split_size, dim=0):
    outs = _out(node)
    d = _norm(dim, x.rank)
    sizes = [o.shape[d] for o in outs]
    if len(sizes) == 1:
        return (ctx.op("Identity", [x.id]),)
    ids = ctx.op("Split", [x.id, ctx.shape_value(sizes)], outputs=len(sizes), axis=d)
    return tuple(ids)


@aten(A.unbind.int)
def unbind(ctx, node, x, dim=0):
    d = _norm(dim, x.rank)
    n = len(_out(node))
    ids = ctx.op("Split", [x.id, ctx.const_i64([1] * n)], outputs=n, axis=d) if n > 1 else [x.id]
    axes = ctx.const_i64([d])
    return tuple(ctx.op("Squeeze", [i, axes]) for i in ids)


# ---- slicing and indexing ----------------------------------------------------------------------
@aten(A.slice.Tensor)
def slice_(ctx, node, x, dim=0, start=None, end=None, step=1):
    d = _norm(dim, x.rank)
    start = 0 if start is None else start
    end = INT64_MAX if end is None or (is_static_int(end) and static_int(end) >= sys.maxsize) \
        else end
    starts, ends = ctx.shape_value([start]), ctx.shape_value([end])
    return ctx.op("Slice", [x.id, starts, ends, ctx.const_i64([d]), ctx.const_i64([int(step)])])


@aten(A.select.int)
def select(ctx, node, x, dim, index):
    d = _norm(dim, x.rank)
    if is_static_int(index):
        idx = ctx.const(static_int(index), torch.int64)
    else:
        idx = ctx.op("Squeeze", [ctx.sym(index), ctx.const_i64([0])])
    return ctx.op("Gather", [x.id, idx], axis=d)


def _index_check(node):
    for t in node.args[1]:
        if t is not None and fake_value(t).dtype == torch.bool:
            return "boolean-mask indexing (data-dependent shape)"
    return None


@aten(A.index.Tensor, A._unsafe_index.Tensor, check=_index_check)
def index(ctx, node, x, indices):
    present = [i for i, t in enumerate(indices) if t is not None]
    if len(present) == 1:
        axis = present[0]
        return ctx.op("Gather", [x.id, ctx.cast(indices[axis].id, torch.int64)], axis=axis)
    # Several index tensors: move their dims to the front, broadcast and stack the indices on a
    # new last axis, GatherND, then put the indexed dims where torch does (in place of the first
    # index when the index dims are adjacent, in front otherwise).
    m = len(present)
    others = [d for d in range(x.rank) if d not in present]
    xt = x.id if present == list(range(m)) else ctx.op("Transpose", [x.id], perm=present + others)
    shape = torch.broadcast_shapes(*[tuple(indices[i].shape) for i in present])
    target = ctx.shape_value(list(shape))
    last = ctx.const_i64([-1])
    parts = [ctx.op("Unsqueeze", [ctx.op("Expand", [ctx.cast(indices[i].id, torch.int64), target]),
                                  last]) for i in present]
    stacked = ctx.op("Concat", parts, axis=-1)
    # GatherND does not wrap negative indices: add the dim size where negative.
    dims = ctx.op("Shape", [xt], start=0, end=m)
    wrapped = ctx.op("Where", [ctx.op("Less", [stacked, ctx.const(0, torch.int64)]),
                               ctx.op("Add", [stacked, dims]), stacked])
    y = ctx.op("GatherND", [xt, wrapped])
    adjacent = present == list(range(present[0], present[0] + m))
    k = present[0]
    if not adjacent or k == 0:
        return y
    nb = len(shape)
    perm = [nb + i for i in range(k)] + list(range(nb)) + [nb + i for i in range(k, len(others))]
    return ctx.op("Transpose", [y], perm=perm)


@aten(A.index_select.default)
def index_select(ctx, node, x, dim, idx):
    return ctx.op("Gather", [x.id, ctx.cast(idx.id, torch.int64)], axis=_norm(dim, x.rank))


@aten(A.gather.default)
def gather(ctx, node, x, dim, idx, sparse_grad=False):
    return ctx.op("GatherElements", [x.id, idx.id], axis=_norm(dim, x.rank))


@aten(A.repeat.default)
def repeat(ctx, node, x, repeats):
    reps = list(repeats)
    src = x.id
    if len(reps) > x.rank:
        src = ctx.op("Reshape", [x.id, ctx.shape_value([1] * (len(reps) - x.rank) + list(x.shape))])
    return ctx.op("Tile", [src, ctx.shape_value(reps)])


@aten(A.roll.default)
def roll(ctx, node, x, shifts, dims=()):
    if not dims:
        raise TranslationError("roll without dims")
    y = x.id
    for s, d in zip(shifts, dims):
        d = _norm(d, x.rank)
        n = x.shape[d]
        if not is_static_int(n):
            raise TranslationError("roll over a symbolic dim")
        s = static_int(s) % static_int(n)
        if s == 0:
            continue
        ax = ctx.const_i64([d])
        tail = ctx.op("Slice", [y, ctx.const_i64([-s]), ctx.const_i64([INT64_MAX]), ax])
        head = ctx.op("Slice", [y, ctx.const_i64([0]), ctx.const_i64([-s]), ax])
        y = ctx.op("Concat", [tail, head], axis=d)
    return y if y != x.id else ctx.op("Identity", [x.id])


@aten(A.flip.default)
def flip(ctx, node, x, dims):
    axes = [_norm(d, x.rank) for d in dims]
    n = len(axes)
    return ctx.op("Slice", [x.id, ctx.const_i64([-1] * n), ctx.const_i64([-(2**63)] * n),
                            ctx.const_i64(axes), ctx.const_i64([-1] * n)])


@aten(A.tril.default, A.triu.default)
def trilu(ctx, node, x, diagonal=0):
    upper = int(node.target == A.triu.default)
    return ctx.op("Trilu", [x.id, ctx.const(int(diagonal), torch.int64)], upper=upper)


@aten(A.cumsum.default)
def cumsum(ctx, node, x, dim, dtype=None):
    src = ctx.cast(x.id, _out(node).dtype)
    return ctx.op("CumSum", [src, ctx.const(_norm(dim, x.rank), torch.int64)])


@aten(A.topk.default)
def topk(ctx, node, x, k, dim=-1, largest=True, sorted=True):
    v, i = ctx.op("TopK", [x.id, ctx.shape_value([k])], outputs=2, axis=_norm(dim, x.rank),
                  largest=int(bool(largest)), sorted=int(bool(sorted)))
    return (v, i)


# ---- creation ----------------------------------------------------------------------------------
def _fill(ctx, node, sizes, value):
    dt = _out(node).dtype
    return ctx.op("Expand", [ctx.operand(value, dt), ctx.shape_value(list(sizes))])


@aten(A.full.default)
def full(ctx, node, size, fill_value, **_):
    return _fill(ctx, node, size, fill_value)


@aten(A.zeros.default, A.empty.memory_format)
def zeros(ctx, node, size, **_):
    return _fill(ctx, node, size, 0)


@aten(A.ones.default)
def ones(ctx, node, size, **_):
    return _fill(ctx, node, size, 1)


@aten(A.scalar_tensor.default)
def scalar_tensor(ctx, node, value, **_):
    return ctx.operand(value, _out(node).dtype)


@aten(A.full_like.default)
def full_like(ctx, node, x, value, **_):
    return ctx.op("Expand", [ctx.operand(value, _out(node).dtype), ctx.op("Shape", [x.id])])


@aten(A.zeros_like.default, A.empty_like.default)
def zeros_like(ctx, node, x, **_):
    return full_like(ctx, node, x, 0)


@aten(A.ones_like.default)
def ones_like(ctx, node, x, **_):
    return full_like(ctx, node, x, 1)


@aten(A.new_zeros.default, A.new_empty.default)
def new_zeros(ctx, node, x, size, **_):
    return _fill(ctx, node, size, 0)


@aten(A.new_ones.default)
def new_ones(ctx, node, x, size, **_):
    return _fill(ctx, node, size, 1)


@aten(A.new_full.default)
def new_full(ctx, node, x, size, value, **_):
    return _fill(ctx, node, size, value)


@aten(A.fill.Scalar, A.fill.Tensor)
def fill(ctx, node, x, value):
    return full_like(ctx, node, x, value)


@aten(A.copy.default)
def copy(ctx, node, dst, src, non_blocking=False):
    return ctx.op("Expand", [ctx.cast(src.id, dst.dtype), ctx.op("Shape", [dst.id])])


@aten(A.arange.start_step, A.arange.default, A.arange.start)
def arange(ctx, node, *args, **kwargs):
    nums = [a for a in args]
    if len(nums) == 1:
        start, end, step = 0, nums[0], 1
    elif len(nums) == 2:
        start, end, step = nums[0], nums[1], 1
    else:
        start, end, step = nums[0], nums[1], nums[2]
    dt = _out(node).dtype

    def scalar(v):
        if isinstance(v, (Sym, torch.SymInt)) and not is_static_int(v):
            return ctx.cast(ctx.op("Squeeze", [ctx.sym(v), ctx.const_i64([0])]), dt)
        return ctx.const(v if not isinstance(v, (Sym, torch.SymInt)) else static_int(v), dt)

    return ctx.op("Range", [scalar(start), scalar(end), scalar(step)])


# ---- scatters into slices and strided views (functionalized in-place writes) -------------------
@aten(A.slice_scatter.default,
      check=lambda n: None if (n.args[5] if len(n.args) > 5 else n.kwargs.get("step", 1)) == 1
      else "slice_scatter with a step")
def slice_scatter(ctx, node, x, src, dim=0, start=None, end=None, step=1):
    # x with x[start:end] along dim replaced by src: the parts before and after, and src between.
    d = _norm(dim, x.rank)
    start = 0 if start is None else start
    end = INT64_MAX if end is None else end
    ax = ctx.const_i64([d])
    head = ctx.op("Slice", [x.id, ctx.const_i64([0]), ctx.shape_value([start]), ax])
    tail = ctx.op("Slice", [x.id, ctx.shape_value([end]), ctx.const_i64([INT64_MAX]), ax])
    return ctx.op("Concat", [head, ctx.cast(src.id, x.dtype), tail], axis=d)


@aten(A.select_scatter.default,
      check=lambda n: None if is_static_int(fake_value(n.args[0]).shape[int(n.args[2])])
      else "select_scatter over a symbolic dim")
def select_scatter(ctx, node, x, src, dim, index):
    d = _norm(dim, x.rank)
    i = static_int(index)
    if i < 0:
        i += static_int(x.shape[d])
    s = ctx.op("Unsqueeze", [src.id, ctx.const_i64([d])])
    ax = ctx.const_i64([d])
    head = ctx.op("Slice", [x.id, ctx.const_i64([0]), ctx.const_i64([i]), ax])
    tail = ctx.op("Slice", [x.id, ctx.const_i64([i + 1]), ctx.const_i64([INT64_MAX]), ax])
    return ctx.op("Concat", [head, ctx.cast(s, x.dtype), tail], axis=d)


def _as_strided_check(node):
    x = fake_value(node.args[0])
    if not all(is_static_int(s) for s in list(x.shape) + list(node.args[1])):
        return "as_strided with symbolic sizes"
    if x.numel() > (1 << 22) or fake_value(node).numel() > (1 << 22):
        return "as_strided over more than 4M elements"
    return None


@aten(A.as_strided.default, check=_as_strided_check)
def as_strided(ctx, node, x, size, stride, storage_offset=None):
    """A strided read of x's storage as eager lays it out (the fake value's strides); ferrite's
    values are contiguous, so each read position is mapped back to x's logical element."""
    import numpy as np

    xin = fake_value(node.args[0])
    size = [static_int(s) for s in size]
    stride = [static_int(s) for s in stride]
    in_shape = [static_int(s) for s in xin.shape]
    in_strides = list(xin.stride())
    n_in = int(np.prod(in_shape)) if in_shape else 1
    # storage position of each logical element of x, and its inverse
    pos = np.zeros(in_shape or [1], dtype=np.int64)
    for k, (n, s) in enumerate(zip(in_shape, in_strides)):
        pos = pos + (np.arange(n, dtype=np.int64) * s).reshape([-1 if j == k else 1
                                                                 for j in range(len(in_shape))])
    pos = pos.reshape(-1)
    base = int(xin.storage_offset())
    off = static_int(storage_offset) if storage_offset is not None else base
    inverse = {base + int(p): i for i, p in enumerate(pos)}  # storage position -> element
    want = np.full(size or [1], off, dtype=np.int64)
    for k, (n, s) in enumerate(zip(size, stride)):
        want = want + (np.arange(n, dtype=np.int64) * s).reshape([-1 if j == k else 1
                                                                   for j in range(len(size))])
    flat = want.reshape(-1)
    try:
        logical = np.array([inverse[int(p)] for p in flat], dtype=np.int64)
    except KeyError:
        raise TranslationError("as_strided reads outside its input's elements")
    if np.array_equal(logical, np.arange(len(logical))) and len(logical) == n_in:
        return ctx.op("Reshape", [x.id, ctx.const_i64(size)])
    src = ctx.op("Reshape", [x.id, ctx.const_i64([-1])])
    idx = ctx.const(logical.reshape(size).tolist(), torch.int64)
    return ctx.op("Gather", [src, idx], axis=0)
