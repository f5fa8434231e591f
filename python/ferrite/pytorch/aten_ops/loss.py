"""Losses: nll_loss forward and backward (cross_entropy reaches the table as _log_softmax +
nll_loss_forward, its gradient as nll_loss_backward + _log_softmax_backward_data). The
backward is pointwise: a one-hot compare of the class index with the target."""

from __future__ import annotations

import torch

from ..aten_table import FLOATS, INTS, aten
from ..fx_importer import fake_value, is_static_int

A = torch.ops.aten
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _nll_check(node):
    x = fake_value(node.args[0] if node.target == A.nll_loss_forward.default else node.args[1])
    if x.dim() not in (1, 2):
        return f"nll_loss over a rank-{x.dim()} input (1 or 2 supported)"
    if not is_static_int(x.shape[-1]):
        return "nll_loss with a symbolic class count"
    return None


def _target_weights(ctx, x, target, weight, ignore_index):
    """Per-sample target (int64, ignored entries as class 0) and weight (0 where ignored), each
    as [N] (or [] for an unbatched input), in x's dtype for the weight."""
    t = ctx.cast(target.id, torch.int64)
    keep = ctx.op("Not", [ctx.op("Equal", [t, ctx.const(int(ignore_index), torch.int64)])])
    safe = ctx.op("Where", [keep, t, ctx.const(0, torch.int64)])
    if weight is not None:
        wt = ctx.op("Gather", [ctx.cast(weight.id, x.dtype), safe], axis=0)
    else:
        wt = ctx.op("Expand", [ctx.const(1.0, x.dtype), ctx.op("Shape", [t])])
    wt = ctx.op("Where", [keep, wt, ctx.const(0.0, x.dtype)])
    return safe, wt


@aten(A.nll_loss_forward.default, check=_nll_check, dtypes=FLOATS | INTS)
def nll_loss_forward(ctx, node, x, target, weight, reduction, ignore_index):
    safe, wt = _target_weights(ctx, x, target, weight, ignore_index)
    axis = x.rank - 1
    picked = ctx.op("GatherElements", [x.id, ctx.op("Unsqueeze", [safe, ctx.const_i64([axis])])],
                    axis=axis)
    picked = ctx.op("Squeeze", [picked, ctx.const_i64([axis])])
    loss = ctx.op("Neg", [ctx.op("Mul", [picked, wt])])
    red = _REDUCTIONS[int(reduction)]
    if red == "none":
        return (loss, ctx.const(0.0, x.dtype))
    if x.rank == 1:
        total = wt
        s = loss
    else:
        total = ctx.op("ReduceSum", [wt, ctx.const_i64([0])], keepdims=0)
        s = ctx.op("ReduceSum", [loss, ctx.const_i64([0])], keepdims=0)
    if red == "mean":
        s = ctx.op("Div", [s, total])
    return (s, total)


@aten(A.nll_loss_backward.default, check=_nll_check, dtypes=FLOATS | INTS)
def nll_loss_backward(ctx, node, grad, x, target, weight, reduction, ignore_index, total_weight):
    # d loss / d x[n, c] = -w[t_n] * grad (/ total weight for mean) where c == t_n, else 0.
    safe, wt = _target_weights(ctx, x, target, weight, ignore_index)
    coef = ctx.op("Mul", [ctx.op("Neg", [wt]), grad.id])
    if _REDUCTIONS[int(reduction)] == "mean":
        coef = ctx.op("Div", [coef, total_weight.id])
    axis = x.rank - 1
    c = int(x.shape[-1])
    classes = ctx.const(list(range(c)), torch.int64)
    hit = ctx.op("Equal", [ctx.op("Unsqueeze", [safe, ctx.const_i64([axis])]), classes])
    coef = ctx.op("Unsqueeze", [coef, ctx.const_i64([axis])]) if x.rank == 2 else coef
    return ctx.op("Where", [hit, coef, ctx.const(0.0, x.dtype)])
