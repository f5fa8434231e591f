"""Pointwise ATen ops: arithmetic, comparisons, logic, unary math and activations."""

from __future__ import annotations

import math

import torch

from ..aten_table import ALL, FLOATS, INTS, aten
from ..fx_importer import TV, fake_value

A = torch.ops.aten


def out_dtype(node) -> torch.dtype:
    return fake_value(node).dtype


def _compute_dtype(node, *operands) -> torch.dtype:
    """Type torch computes a comparison/logic op in: the promotion of its operands."""
    vals = []
    for o in operands:
        if isinstance(o, TV):
            vals.append(torch.empty((), dtype=o.dtype) if o.rank == 0 else torch.empty(1, dtype=o.dtype))
        else:
            vals.append(o)
    if len(vals) == 1:
        return vals[0].dtype if isinstance(vals[0], torch.Tensor) else torch.float32
    return torch.result_type(*vals) if isinstance(vals[0], torch.Tensor) else torch.result_type(
        vals[1], vals[0])


# ---- binary arithmetic -------------------------------------------------------------------------
def _binary(onnx_op: str):
    def fn(ctx, node, a, b, alpha=1, **_):
        dt = out_dtype(node)
        x, y = ctx.operand(a, dt), ctx.operand(b, dt)
        if alpha != 1:
            y = ctx.op("Mul", [y, ctx.const(alpha, dt)])
        return ctx.op(onnx_op, [x, y])

    return fn


aten(A.add.Tensor, A.add.Scalar)(_binary("Add"))
aten(A.sub.Tensor, A.sub.Scalar)(_binary("Sub"))
aten(A.mul.Tensor, A.mul.Scalar)(_binary("Mul"))
aten(A.maximum.default, dtypes=FLOATS | INTS)(_binary("Max"))
aten(A.minimum.default, dtypes=FLOATS | INTS)(_binary("Min"))


@aten(A.rsub.Tensor, A.rsub.Scalar)
def rsub(ctx, node, a, b, alpha=1):
    dt = out_dtype(node)
    x = ctx.operand(a, dt)
    if alpha != 1:
        x = ctx.op("Mul", [x, ctx.const(alpha, dt)])
    return ctx.op("Sub", [ctx.operand(b, dt), x])


def _div_check(node):
    mode = node.kwargs.get("rounding_mode")
    if mode not in (None, "trunc", "floor"):
        return f"div rounding_mode={mode!r}"
    return None


@aten(A.div.Tensor, A.div.Scalar, A.div.Tensor_mode, A.div.Scalar_mode, check=_div_check)
def div(ctx, node, a, b, rounding_mode=None):
    dt = out_dtype(node)
    x, y = ctx.operand(a, dt), ctx.operand(b, dt)
    if rounding_mode is None:
        return ctx.op("Div", [x, y])
    if dt.is_floating_point:
        q = ctx.op("Div", [x, y])
        return ctx.op("Floor", [q]) if rounding_mode == "floor" else _trunc(ctx, q)
    if rounding_mode == "trunc":
        return ctx.op("Div", [x, y])  # integer Div truncates
    # floor for integers: (a - a mod b) / b is exact, with mod taking the divisor's sign.
    return ctx.op("Div", [ctx.op("Sub", [x, ctx.op("Mod", [x, y], fmod=0)]), y])


def _trunc(ctx, q):
    # trunc(q) = sign(q) * floor(|q|)
    return ctx.op("Mul", [ctx.op("Sign", [q]), ctx.op("Floor", [ctx.op("Abs", [q])])])


@aten(A.remainder.Tensor, A.remainder.Scalar)
def remainder(ctx, node, a, b):
    dt = out_dtype(node)
    x, y = ctx.operand(a, dt), ctx.operand(b, dt)
    if dt.is_floating_point:
        # Python-style modulo: a - floor(a / b) * b
        return ctx.op("Sub", [x, ctx.op("Mul", [ctx.op("Floor", [ctx.op("Div", [x, y])]), y])])
    return ctx.op("Mod", [x, y], fmod=0)


@aten(A.fmod.Tensor, A.fmod.Scalar)
def fmod(ctx, node, a, b):
    dt = out_dtype(node)
    return ctx.op("Mod", [ctx.operand(a, dt), ctx.operand(b, dt)], fmod=1)


@aten(A.pow.Tensor_Scalar, A.pow.Tensor_Tensor, A.pow.Scalar, dtypes=FLOATS | INTS)
def pow_(ctx, node, a, b):
    dt = out_dtype(node)
    x = ctx.operand(a, dt)
    if not isinstance(b, TV) and float(b) == 2.0:
        return ctx.op("Mul", [x, x])
    if not isinstance(b, TV) and float(b) == 0.5 and dt.is_floating_point:
        return ctx.op("Sqrt", [x])
    return ctx.op("Pow", [x, ctx.operand(b, dt)])


# ---- comparisons and logic ---------------------------------------------------------------------
def _compare(onnx_op: str, negate: bool = False):
    def fn(ctx, node, a, b):
        dt = _compute_dtype(node, a, b)
        r = ctx.op(onnx_op, [ctx.operand(a, dt), ctx.operand(b, dt)])
        return ctx.op("Not", [r]) if negate else r

    return fn


aten(A.eq.Tensor, A.eq.Scalar)(_compare("Equal"))
aten(A.ne.Tensor, A.ne.Scalar)(_compare("Equal", negate=True))
aten(A.lt.Tensor, A.lt.Scalar)(_compare("Less"))
aten(A.le.Tensor, A.le.Scalar)(_compare("LessOrEqual"))
aten(A.gt.Tensor, A.gt.Scalar)(_compare("Greater"))
aten(A.ge.Tensor, A.ge.Scalar)(_compare("GreaterOrEqual"))


def _logic(onnx_op: str):
    def fn(ctx, node, a, b):
        return ctx.op(onnx_op, [ctx.operand(a, torch.bool), ctx.operand(b, torch.bool)])

    return fn


aten(A.logical_and.default)(_logic("And"))
aten(A.logical_or.default)(_logic("Or"))
aten(A.logical_xor.default)(_logic("Xor"))


def _bool_only(node):
    if fake_value(node).dtype != torch.bool:
        return "bitwise ops on integers are not supported yet (bool only)"
    return None


aten(A.bitwise_and.Tensor, check=_bool_only)(_logic("And"))
aten(A.bitwise_or.Tensor, check=_bool_only)(_logic("Or"))
aten(A.bitwise_xor.Tensor, check=_bool_only)(_logic("Xor"))


@aten(A.logical_not.default)
def logical_not(ctx, node, x):
    return ctx.op("Not", [ctx.operand(x, torch.bool)])


@aten(A.bitwise_not.default, check=_bool_only)
def bitwise_not(ctx, node, x):
    return ctx.op("Not", [x.id])


@aten(A.where.self, A.where.ScalarSelf, A.where.ScalarOther, A.where.Scalar)
def where(ctx, node, cond, a, b):
    dt = out_dtype(node)
    return ctx.op("Where", [ctx.operand(cond, torch.bool), ctx.operand(a, dt), ctx.operand(b, dt)])


@aten(A.masked_fill.Scalar, A.masked_fill.Tensor)
def masked_fill(ctx, node, x, mask, value):
    dt = out_dtype(node)
    return ctx.op("Where", [ctx.operand(mask, torch.bool), ctx.operand(value, dt), x.id])


# ---- unary math --------------------------------------------------------------------------------
_UNARY = {
    A.neg.default: "Neg",
    A.abs.default: "Abs",
    A.exp.default: "Exp",
    A.log.default: "Log",
    A.sqrt.default: "Sqrt",
    A.reciprocal.default: "Reciprocal",
    A.sin.default: "Sin",
    A.cos.default: "Cos",
    A.tan.default: "Tan",
    A.tanh.default: "Tanh",
    A.sinh.default: "Sinh",
    A.cosh.default: "Cosh",
    A.asin.default: "Asin",
    A.acos.default: "Acos",
    A.atan.default: "Atan",
    A.asinh.default: "Asinh",
    A.acosh.default: "Acosh",
    A.atanh.default: "Atanh",
    A.sigmoid.default: "Sigmoid",
    A.relu.default: "Relu",
    A.erf.default: "Erf",
    A.floor.default: "Floor",
    A.ceil.default: "Ceil",
    A.round.default: "Round",
    A.sign.default: "Sign",
}
_FLOAT_ONLY = {"Exp", "Log", "Sqrt", "Reciprocal", "Sin", "Cos", "Tan", "Tanh", "Sinh", "Cosh",
               "Asin", "Acos", "Atan", "Asinh", "Acosh", "Atanh", "Sigmoid", "Erf", "Floor",
               "Ceil", "Round"}


def _unary(onnx_op: str):
    def fn(ctx, node, x):
        return ctx.op(onnx_op, [ctx.operand(x, out_dtype(node))])

    return fn


for _o, _name in _UNARY.items():
    aten(_o, dtypes=FLOATS if _name in _FLOAT_ONLY else FLOATS | INTS)(_unary(_name))


@aten(A.rsqrt.default, dtypes=FLOATS)
def rsqrt(ctx, node, x):
    return ctx.op("Reciprocal", [ctx.op("Sqrt", [x.id])])


@aten(A.log1p.default, dtypes=FLOATS)
def log1p(ctx, node, x):
    return ctx.op("Log", [ctx.op("Add", [x.id, ctx.const(1.0, x.dtype)])])


@aten(A.expm1.default, dtypes=FLOATS)
def expm1(ctx, node, x):
    return ctx.op("Sub", [ctx.op("Exp", [x.id]), ctx.const(1.0, x.dtype)])


@aten(A.isnan.default, dtypes=FLOATS)
def isnan(ctx, node, x):
    return ctx.op("IsNaN", [x.id])


@aten(A.isinf.default, dtypes=FLOATS)
def isinf(ctx, node, x):
    return ctx.op("IsInf", [x.id])


# ---- activations -------------------------------------------------------------------------------
def _gelu_check(node):
    approx = node.kwargs.get("approximate", "none")
    return None if approx in ("none", "tanh") else f"gelu approximate={approx!r}"


@aten(A.gelu.default, check=_gelu_check, dtypes=FLOATS)
def gelu(ctx, node, x, approximate="none"):
    return ctx.op("Gelu", [x.id], approximate=approximate)


@aten(A.silu.default, dtypes=FLOATS)
def silu(ctx, node, x):
    return ctx.op("Mul", [x.id, ctx.op("Sigmoid", [x.id])])


@aten(A.hardswish.default, dtypes=FLOATS)
def hardswish(ctx, node, x):
    return ctx.op("HardSwish", [x.id])


@aten(A.hardsigmoid.default, dtypes=FLOATS)
def hardsigmoid(ctx, node, x):
    return ctx.op("HardSigmoid", [x.id], alpha=1.0 / 6.0, beta=0.5)


@aten(A.mish.default, dtypes=FLOATS)
def mish(ctx, node, x):
    return ctx.op("Mish", [x.id])


@aten(A.elu.default, dtypes=FLOATS,
      check=lambda n: None if list(n.args[2:]) in ([], [1], [1.0], [1, 1], [1.0, 1.0], [1, 1.0],
                                                   [1.0, 1]) else "elu with scale/input_scale")
def elu(ctx, node, x, alpha=1.0, scale=1.0, input_scale=1.0):
    return ctx.op("Elu", [x.id], alpha=float(alpha))


@aten(A.leaky_relu.default, dtypes=FLOATS)
def leaky_relu(ctx, node, x, negative_slope=0.01):
    return ctx.op("LeakyRelu", [x.id], alpha=float(negative_slope))


@aten(A.softplus.default, dtypes=FLOATS)
def softplus(ctx, node, x, beta=1, threshold=20):
    # torch returns x where beta*x > threshold; Softplus(x) equals x there to float precision.
    if beta == 1:
        return ctx.op("Softplus", [x.id])
    b = ctx.const(float(beta), x.dtype)
    return ctx.op("Div", [ctx.op("Softplus", [ctx.op("Mul", [x.id, b])]), b])


@aten(A.hardtanh.default, dtypes=FLOATS)
def hardtanh(ctx, node, x, min_val=-1.0, max_val=1.0):
    return ctx.op("Clip", [x.id, ctx.const(min_val, x.dtype), ctx.const(max_val, x.dtype)])


@aten(A.clamp.default, A.clamp.Tensor, dtypes=FLOATS | INTS)
def clamp(ctx, node, x, min=None, max=None):
    dt = out_dtype(node)
    y = ctx.operand(x, dt)
    if isinstance(min, TV) or isinstance(max, TV):
        if min is not None:
            y = ctx.op("Max", [y, ctx.operand(min, dt)])
        if max is not None:
            y = ctx.op("Min", [y, ctx.operand(max, dt)])
        return y
    lo = ctx.const(min, dt) if min is not None else None
    hi = ctx.const(max, dt) if max is not None else None
    return ctx.op("Clip", [y, lo, hi])


@aten(A.clamp_min.default, A.clamp_min.Tensor, dtypes=FLOATS | INTS)
def clamp_min(ctx, node, x, m):
    dt = out_dtype(node)
    return ctx.op("Max", [ctx.operand(x, dt), ctx.operand(m, dt)])


@aten(A.clamp_max.default, A.clamp_max.Tensor, dtypes=FLOATS | INTS)
def clamp_max(ctx, node, x, m):
    dt = out_dtype(node)
    return ctx.op("Min", [ctx.operand(x, dt), ctx.operand(m, dt)])
