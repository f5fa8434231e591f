"""Multi-tensor (``_foreach_*``) ops: what foreach optimizers (``Adam(foreach=True)``, the
default for CUDA parameters) emit. Each becomes the per-tensor pointwise math for every element of
its lists; the lowering fuses each tensor's chain of updates into one kernel and horizontal
fusion merges the kernels of same-shaped tensors."""

from __future__ import annotations

import torch

from ..aten_table import FLOATS, aten
from ..fx_importer import TV, fake_value

A = torch.ops.aten


def _foreach(math):
    """A translation applying `math(ctx, dtype, *operands)` to the i-th element of each list
    argument (scalars and single tensors are shared by all elements)."""

    def fn(ctx, node, *args, **kwargs):
        n = next(len(a) for a in args if isinstance(a, (list, tuple)))
        vals = fake_value(node)
        outs = []
        for i in range(n):
            elem = [a[i] if isinstance(a, (list, tuple)) else a for a in args]
            kw = {k: (v[i] if isinstance(v, (list, tuple)) else v) for k, v in kwargs.items()}
            outs.append(math(ctx, vals[i].dtype, *elem, **kw))
        return tuple(outs)

    return fn


def _v(ctx, dt, x):
    return ctx.operand(x, dt)


def _scaled(ctx, dt, b, alpha):
    y = _v(ctx, dt, b)
    return y if alpha == 1 else ctx.op("Mul", [y, ctx.const(alpha, dt)])


def _add(ctx, dt, a, b, alpha=1):
    return ctx.op("Add", [_v(ctx, dt, a), _scaled(ctx, dt, b, alpha)])


def _sub(ctx, dt, a, b, alpha=1):
    return ctx.op("Sub", [_v(ctx, dt, a), _scaled(ctx, dt, b, alpha)])


def _binary(onnx_op):
    return lambda ctx, dt, a, b: ctx.op(onnx_op, [_v(ctx, dt, a), _v(ctx, dt, b)])


def _unary(onnx_op):
    return lambda ctx, dt, a: ctx.op(onnx_op, [_v(ctx, dt, a)])


def _addc(onnx_op):
    # self + value * (t1 op t2)
    def math(ctx, dt, x, t1, t2, value=1):
        p = ctx.op(onnx_op, [_v(ctx, dt, t1), _v(ctx, dt, t2)])
        return ctx.op("Add", [_v(ctx, dt, x), _scaled(ctx, dt, TV(p, dt, ()), value)])

    return math


def _pow(ctx, dt, base, exponent):
    return ctx.op("Pow", [_v(ctx, dt, base), _v(ctx, dt, exponent)])


def _lerp(ctx, dt, start, end, weight):
    s = _v(ctx, dt, start)
    d = ctx.op("Sub", [_v(ctx, dt, end), s])
    return ctx.op("Add", [s, ctx.op("Mul", [d, _v(ctx, dt, weight)])])


aten(A._foreach_add.Scalar, A._foreach_add.List, A._foreach_add.ScalarList, A._foreach_add.Tensor,
     dtypes=FLOATS)(_foreach(_add))
aten(A._foreach_sub.Scalar, A._foreach_sub.List, A._foreach_sub.ScalarList,
     dtypes=FLOATS)(_foreach(_sub))
aten(A._foreach_mul.Scalar, A._foreach_mul.List, A._foreach_mul.ScalarList, A._foreach_mul.Tensor,
     dtypes=FLOATS)(_foreach(_binary("Mul")))
aten(A._foreach_div.Scalar, A._foreach_div.List, A._foreach_div.ScalarList, A._foreach_div.Tensor,
     dtypes=FLOATS)(_foreach(_binary("Div")))
aten(A._foreach_maximum.List, dtypes=FLOATS)(_foreach(_binary("Max")))
aten(A._foreach_addcmul.Scalar, A._foreach_addcmul.ScalarList,
     dtypes=FLOATS)(_foreach(_addc("Mul")))
aten(A._foreach_addcdiv.Scalar, A._foreach_addcdiv.ScalarList,
     dtypes=FLOATS)(_foreach(_addc("Div")))
aten(A._foreach_pow.ScalarAndTensor, A._foreach_pow.Scalar, A._foreach_pow.List,
     dtypes=FLOATS)(_foreach(_pow))
aten(A._foreach_lerp.Scalar, A._foreach_lerp.List, dtypes=FLOATS)(_foreach(_lerp))
aten(A._foreach_sqrt.default, dtypes=FLOATS)(_foreach(_unary("Sqrt")))
aten(A._foreach_neg.default, dtypes=FLOATS)(_foreach(_unary("Neg")))
aten(A._foreach_reciprocal.default, dtypes=FLOATS)(_foreach(_unary("Reciprocal")))
aten(A._foreach_abs.default, dtypes=FLOATS)(_foreach(_unary("Abs")))
aten(A._foreach_exp.default, dtypes=FLOATS)(_foreach(_unary("Exp")))
aten(A._foreach_sign.default, dtypes=FLOATS)(_foreach(_unary("Sign")))
