"""One test per ATen-table entry: the op compiled through ferrite against eager PyTorch.

Each case is a small function whose ATen graph contains the entry's overload; the test asserts
that the overload ran inside a ferrite partition (not in eager) and that the result matches eager
within the dtype's tolerance. A last test checks that every entry of the table has a case (here or, for the backward and
training-mode entries, a gradient case in test_training.py).
The translations are device-independent, so the cases run on `reference` (ferrite's oracle);
`test_models.py` runs whole models on `cpu`.
"""

from __future__ import annotations

import operator

import pytest
import torch

from conftest import assert_close, compile_report
from ferrite.pytorch.aten_table import table

A = torch.ops.aten
F = torch.nn.functional
g = torch.Generator().manual_seed(0)


def r(*shape, dtype=torch.float32, lo=-2.0, hi=2.0):
    return (torch.rand(*shape, generator=g) * (hi - lo) + lo).to(dtype)


def ri(*shape, lo=0, hi=5, dtype=torch.int64):
    return torch.randint(lo, hi, shape, generator=g, dtype=dtype)


def pos(*shape, dtype=torch.float32):
    return r(*shape, lo=0.1, hi=3.0, dtype=dtype)


def _setitem(x, key, y):
    z = x * 2
    z[key] = y
    return z + 1


def _masked_rows():
    x = r(4, 5)
    x[1] = float("-inf")
    x[2, 3] = float("nan")
    x[3, ::2] = float("-inf")
    return x


def _sdpa_math(q, k, v, m):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.MATH]):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)


# (overloads the case covers, function, inputs factory)
CASES = [
    ([A.add.Tensor], lambda x, y: x + y, lambda: (r(2, 3, 4), r(4))),
    ([A.add.Tensor], lambda x: x + 2.5, lambda: (r(3, 5),)),
    ([A.add.Tensor], lambda x, y: torch.add(x, y, alpha=3), lambda: (r(2, 3), r(2, 3))),
    ([A.sub.Tensor], lambda x, y: x - y, lambda: (r(4, 1), r(1, 5))),
    ([A.rsub.Scalar], lambda x: 1 - x, lambda: (r(7),)),
    ([A.mul.Tensor], lambda x, y: x * y, lambda: (r(2, 3), r(2, 3))),
    ([A.div.Tensor], lambda x, y: x / y, lambda: (r(3, 4), pos(3, 4))),
    ([A.div.Tensor], lambda x, y: x / y, lambda: (ri(3, 4), ri(3, 4, lo=1))),
    ([A.div.Tensor_mode], lambda x, y: torch.div(x, y, rounding_mode="floor"),
     lambda: (ri(4, 4, lo=-9, hi=9), ri(4, 4, lo=1, hi=4))),
    ([A.div.Tensor_mode], lambda x, y: torch.div(x, y, rounding_mode="trunc"),
     lambda: (r(4, 4, lo=-9, hi=9), pos(4, 4))),
    ([A.remainder.Scalar], lambda x: x % 3, lambda: (ri(5, 5, lo=-10, hi=10),)),
    ([A.remainder.Tensor], lambda x, y: torch.remainder(x, y), lambda: (r(5, 5), pos(5, 5))),
    ([A.fmod.Scalar], lambda x: torch.fmod(x, 1.5), lambda: (r(5, 5, lo=-5, hi=5),)),
    ([A.pow.Tensor_Scalar], lambda x: x ** 3, lambda: (r(3, 3),)),
    ([A.pow.Tensor_Scalar], lambda x: x ** 2, lambda: (r(3, 3),)),
    ([A.pow.Tensor_Tensor], lambda x, y: x ** y, lambda: (pos(3, 3), r(3, 3))),
    ([A.maximum.default], torch.maximum, lambda: (r(3, 4), r(3, 4))),
    ([A.minimum.default], torch.minimum, lambda: (r(3, 4), r(4))),
    ([A.eq.Tensor], lambda x, y: x == y, lambda: (ri(4, 4), ri(4, 4))),
    ([A.eq.Scalar], lambda x: x == 2, lambda: (ri(4, 4),)),
    ([A.ne.Scalar], lambda x: x != 2, lambda: (ri(4, 4),)),
    ([A.ne.Tensor], lambda x, y: x != y, lambda: (ri(4, 4), ri(4, 4))),
    ([A.lt.Tensor], lambda x, y: x < y, lambda: (r(4, 4), r(4, 4))),
    ([A.lt.Scalar], lambda x: x < 0.5, lambda: (r(4, 4),)),
    ([A.le.Tensor], lambda x, y: x <= y, lambda: (ri(4, 4), ri(4, 4))),
    ([A.le.Scalar], lambda x: x <= 1, lambda: (ri(4, 4),)),
    ([A.gt.Tensor], lambda x, y: x > y, lambda: (r(4, 4), r(4))),
    ([A.gt.Scalar], lambda x: x > 0, lambda: (r(4, 4),)),
    ([A.ge.Tensor], lambda x, y: x >= y, lambda: (r(4, 4), r(4, 4))),
    ([A.ge.Scalar], lambda x: x >= 0, lambda: (r(4, 4),)),
    ([A.logical_and.default], torch.logical_and, lambda: (r(4) > 0, r(4) > 0)),
    ([A.logical_or.default], torch.logical_or, lambda: (r(4) > 0, r(4) > 0)),
    ([A.logical_xor.default], torch.logical_xor, lambda: (r(4) > 0, r(4) > 0)),
    ([A.logical_not.default], torch.logical_not, lambda: (r(4) > 0,)),
    ([A.bitwise_and.Tensor], lambda a, b: a & b, lambda: (r(4) > 0, r(4) > 0)),
    ([A.bitwise_or.Tensor], lambda a, b: a | b, lambda: (r(4) > 0, r(4) > 0)),
    ([A.bitwise_xor.Tensor], lambda a, b: a ^ b, lambda: (r(4) > 0, r(4) > 0)),
    ([A.bitwise_not.default], lambda a: ~a, lambda: (r(4) > 0,)),
    ([A.where.self], torch.where, lambda: (r(3, 4) > 0, r(3, 4), r(4))),
    ([A.masked_fill.Scalar], lambda x, m: x.masked_fill(m, -1e4), lambda: (r(3, 4), r(3, 4) > 0)),
    ([A.neg.default], torch.neg, lambda: (r(5),)),
    ([A.abs.default], torch.abs, lambda: (r(5),)),
    ([A.exp.default], torch.exp, lambda: (r(5),)),
    ([A.log.default], torch.log, lambda: (pos(5),)),
    ([A.sqrt.default], torch.sqrt, lambda: (pos(5),)),
    ([A.rsqrt.default], torch.rsqrt, lambda: (pos(5),)),
    ([A.reciprocal.default], torch.reciprocal, lambda: (pos(5),)),
    ([A.sin.default], torch.sin, lambda: (r(5),)),
    ([A.cos.default], torch.cos, lambda: (r(5),)),
    ([A.tan.default], torch.tan, lambda: (r(5, lo=-1, hi=1),)),
    ([A.tanh.default], torch.tanh, lambda: (r(5),)),
    ([A.sinh.default], torch.sinh, lambda: (r(5),)),
    ([A.cosh.default], torch.cosh, lambda: (r(5),)),
    ([A.asin.default], torch.asin, lambda: (r(5, lo=-0.9, hi=0.9),)),
    ([A.acos.default], torch.acos, lambda: (r(5, lo=-0.9, hi=0.9),)),
    ([A.atan.default], torch.atan, lambda: (r(5),)),
    ([A.asinh.default], torch.asinh, lambda: (r(5),)),
    ([A.acosh.default], torch.acosh, lambda: (r(5, lo=1.1, hi=4),)),
    ([A.atanh.default], torch.atanh, lambda: (r(5, lo=-0.9, hi=0.9),)),
    ([A.sigmoid.default], torch.sigmoid, lambda: (r(5),)),
    ([A.relu.default], torch.relu, lambda: (r(5),)),
    ([A.erf.default], torch.erf, lambda: (r(5),)),
    ([A.floor.default], torch.floor, lambda: (r(5),)),
    ([A.ceil.default], torch.ceil, lambda: (r(5),)),
    ([A.round.default], torch.round, lambda: (torch.tensor([0.5, 1.5, 2.5, -0.5, 1.2]),)),
    ([A.sign.default], torch.sign, lambda: (r(5),)),
    ([A.log1p.default], torch.log1p, lambda: (pos(5),)),
    ([A.expm1.default], torch.expm1, lambda: (r(5),)),
    ([A.isnan.default], torch.isnan, lambda: (torch.tensor([1.0, float("nan"), 2.0]),)),
    ([A.isinf.default], torch.isinf, lambda: (torch.tensor([1.0, float("inf"), -float("inf")]),)),
    ([A.gelu.default], F.gelu, lambda: (r(4, 8),)),
    ([A.gelu.default], lambda x: F.gelu(x, approximate="tanh"), lambda: (r(4, 8),)),
    ([A.silu.default], F.silu, lambda: (r(4, 8),)),
    ([A.hardswish.default], F.hardswish, lambda: (r(4, 8, lo=-4, hi=4),)),
    ([A.hardsigmoid.default], F.hardsigmoid, lambda: (r(4, 8, lo=-4, hi=4),)),
    ([A.mish.default], F.mish, lambda: (r(4, 8),)),
    ([A.elu.default], F.elu, lambda: (r(4, 8),)),
    ([A.leaky_relu.default], lambda x: F.leaky_relu(x, 0.2), lambda: (r(4, 8),)),
    ([A.softplus.default], F.softplus, lambda: (r(4, 8),)),
    ([A.softplus.default], lambda x: F.softplus(x, beta=2.0), lambda: (r(4, 8),)),
    ([A.hardtanh.default], F.relu6, lambda: (r(4, 8, lo=-3, hi=9),)),
    ([A.clamp.default], lambda x: x.clamp(-0.5, 0.5), lambda: (r(4, 8),)),
    ([A.clamp.Tensor], lambda x, lo: x.clamp(min=lo), lambda: (r(4, 8), r(8))),
    ([A.clamp_min.default], lambda x: x.clamp_min(0.1), lambda: (r(4, 8),)),
    ([A.clamp_max.default], lambda x: x.clamp_max(0.1), lambda: (r(4, 8),)),
    # nn
    ([A.convolution.default], lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
     lambda: (r(2, 3, 9, 9), r(4, 3, 3, 3), r(4))),
    ([A.convolution.default], lambda x, w: F.conv2d(x, w, groups=4, padding=2, dilation=2),
     lambda: (r(1, 8, 10, 10), r(8, 2, 3, 3))),
    ([A.convolution.default], lambda x, w: F.conv1d(x, w, padding=1), lambda: (r(2, 3, 16), r(5, 3, 3))),
    ([A.convolution.default], lambda x, w: F.conv_transpose2d(x, w, stride=2),
     lambda: (r(1, 4, 5, 5), r(4, 3, 3, 3))),
    ([A.addmm.default], lambda b, x, w: torch.addmm(b, x, w), lambda: (r(6), r(4, 5), r(5, 6))),
    ([A.mm.default], torch.mm, lambda: (r(4, 5), r(5, 6))),
    ([A.bmm.default], torch.bmm, lambda: (r(2, 4, 5), r(2, 5, 6))),
    ([A.baddbmm.default], lambda c, a, b: torch.baddbmm(c, a, b, beta=0.5, alpha=2.0),
     lambda: (r(2, 4, 6), r(2, 4, 5), r(2, 5, 6))),
    ([A.native_layer_norm.default], lambda x, w, b: F.layer_norm(x, (8,), w, b),
     lambda: (r(2, 3, 8), r(8), r(8))),
    ([A.native_layer_norm.default], lambda x: F.layer_norm(x, (3, 8)), lambda: (r(2, 3, 8),)),
    ([A._native_batch_norm_legit_no_training.default],
     lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=False),
     lambda: (r(2, 3, 4, 4), r(3), pos(3), r(3), r(3))),
    ([A.native_group_norm.default], lambda x, w, b: F.group_norm(x, 2, w, b),
     lambda: (r(2, 4, 3, 3), r(4), r(4))),
    ([A._softmax.default], lambda x: torch.softmax(x, -1), lambda: (r(3, 7),)),
    ([A._softmax.default], lambda x: torch.softmax(x, 0), lambda: (r(3, 7),)),
    ([A._log_softmax.default], lambda x: torch.log_softmax(x, 1), lambda: (r(3, 7),)),
    ([A.max_pool2d_with_indices.default], lambda x: F.max_pool2d(x, 3, 2, 1),
     lambda: (r(1, 2, 9, 9),)),
    ([A.max_pool2d_with_indices.default], lambda x: F.max_pool2d(x, 2, ceil_mode=True),
     lambda: (r(1, 2, 9, 9),)),
    ([A.avg_pool2d.default], lambda x: F.avg_pool2d(x, 3, 2, 1), lambda: (r(1, 2, 9, 9),)),
    ([A.avg_pool2d.default], lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
     lambda: (r(1, 2, 9, 9),)),
    ([A.mean.dim], lambda x: F.adaptive_avg_pool2d(x, 1),
     lambda: (r(2, 3, 5, 5),)),
    ([A._adaptive_avg_pool2d.default], lambda x: F.adaptive_avg_pool2d(x, (2, 3)),
     lambda: (r(2, 3, 4, 6),)),
    ([A.embedding.default], lambda w, i: F.embedding(i, w), lambda: (r(10, 4), ri(2, 3, hi=10))),
    ([A._scaled_dot_product_flash_attention_for_cpu.default],
     lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
     lambda: (r(2, 3, 5, 8), r(2, 3, 7, 8), r(2, 3, 7, 8))),
    ([A._scaled_dot_product_flash_attention_for_cpu.default],
     lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     lambda: (r(2, 3, 6, 8), r(2, 3, 6, 8), r(2, 3, 6, 8))),
    ([A._scaled_dot_product_flash_attention_for_cpu.default],
     lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
     lambda: (r(2, 3, 5, 8), r(2, 3, 7, 8), r(2, 3, 7, 8), r(2, 1, 5, 7))),
    ([A._scaled_dot_product_flash_attention_for_cpu.default],
     lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.3),
     lambda: (r(2, 3, 5, 8), r(2, 3, 7, 8), r(2, 3, 7, 8), r(5, 7) > -1.0)),
    # Row 1 fully masked (0, not NaN), row 2 holds a NaN (NaN propagates), row 3 is partly -inf.
    ([A._safe_softmax.default], lambda x: A._safe_softmax(x, -1), lambda: (_masked_rows(),)),
    ([A._safe_softmax.default], lambda x: A._safe_softmax(x, 0), lambda: (_masked_rows().T,)),
    # SDPA's math path (the one CUDA takes for some masks): bmm, _safe_softmax, bmm.
    ([A._safe_softmax.default, A.bmm.default], _sdpa_math,
     lambda: (r(2, 3, 4, 8), r(2, 3, 5, 8), r(2, 3, 5, 8), _masked_rows().view(1, 1, 4, 5))),
    ([A._unsafe_index.Tensor], lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
     lambda: (r(1, 2, 3, 4),)),
    ([A._unsafe_index.Tensor], lambda x: F.interpolate(x, size=(5, 7), mode="bilinear"),
     lambda: (r(1, 2, 3, 4),)),
    ([A._unsafe_index.Tensor],
     lambda x: F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=True),
     lambda: (r(1, 2, 3, 4),)),
    ([A.constant_pad_nd.default], lambda x: F.pad(x, (1, 2, 0, 3), value=0.5),
     lambda: (r(2, 3, 4),)),
    ([A.reflection_pad2d.default], lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect"),
     lambda: (r(1, 2, 4, 5),)),
    ([A.replication_pad2d.default], lambda x: F.pad(x, (1, 2, 2, 1), mode="replicate"),
     lambda: (r(1, 2, 4, 5),)),
    ([A.pixel_shuffle.default], lambda x: F.pixel_shuffle(x, 2), lambda: (r(1, 8, 3, 3),)),
    # shape
    ([A.view.default], lambda x: (x + 1).view(6, 4), lambda: (r(2, 3, 4),)),
    ([A.permute.default], lambda x: (x + 1).permute(2, 0, 1) * 2, lambda: (r(2, 3, 4),)),
    ([A.t.default, A.addmm.default], lambda x, w, b: F.linear(x, w, b), lambda: (r(3, 5), r(4, 5), r(4))),
    ([A.transpose.int], lambda x: (x + 1).transpose(0, 2) * 2, lambda: (r(2, 3, 4),)),
    ([A.expand.default], lambda x: (x + 1).expand(3, 2, 4) * 2, lambda: (r(2, 1),)),
    ([A.unsqueeze.default], lambda x: (x + 1).unsqueeze(-1) * 2, lambda: (r(2, 3),)),
    ([A.squeeze.dim], lambda x: (x + 1).squeeze(1) * 2, lambda: (r(2, 1, 3),)),
    ([A.squeeze.dims], lambda x: (x + 1).squeeze((1, 3)) * 2, lambda: (r(2, 1, 3, 1),)),
    ([A.clone.default], lambda x: (x + 1).clone(memory_format=torch.contiguous_format),
     lambda: (r(2, 3),)),
    ([A._to_copy.default], lambda x: (x + 1).to(torch.int64) * 2, lambda: (r(3, 3, lo=0, hi=9),)),
    ([A._to_copy.default], lambda x: (x * 2).to(torch.float32), lambda: (ri(3, 3),)),
    ([A.cat.default], lambda x, y: torch.cat([x, y], 1) * 2, lambda: (r(2, 3), r(2, 5))),
    ([A.stack.default], lambda x, y: torch.stack([x, y], 1) * 2, lambda: (r(2, 3), r(2, 3))),
    ([A.split.Tensor], lambda x: [t * 2 for t in torch.split(x, 2, 1)], lambda: (r(2, 5),)),
    ([A.split_with_sizes.default], lambda x: [t * 2 for t in torch.split(x, [1, 4], 1)],
     lambda: (r(2, 5),)),
    ([A.unbind.int], lambda x: [t * 2 for t in torch.unbind(x, 1)], lambda: (r(2, 3),)),
    ([A.slice.Tensor], lambda x: x[:, 1:4] * 2, lambda: (r(3, 6),)),
    ([A.slice.Tensor], lambda x: x[::2, -3:] * 2, lambda: (r(5, 6),)),
    ([A.select.int], lambda x: x[:, 2] * 2, lambda: (r(3, 6),)),
    ([A.index.Tensor], lambda x, i: x[i] * 2, lambda: (r(6, 3), ri(4, hi=6))),
    ([A.index.Tensor], lambda x, i: x[:, i] * 2, lambda: (r(3, 6), ri(2, 2, lo=-6, hi=6))),
    ([A.index.Tensor], lambda x, i, j: x[i, j] * 2, lambda: (r(5, 6), ri(4, hi=5), ri(4, hi=6))),
    ([A.index.Tensor], lambda x, i, j: x[:, i, j] * 2,
     lambda: (r(2, 5, 6, 3), ri(4, hi=5), ri(4, hi=6))),
    ([A.index.Tensor], lambda x, i, j: x[i, :, j] * 2,
     lambda: (r(5, 2, 6), ri(2, 3, hi=5), ri(3, lo=-6, hi=6))),
    ([A.index_select.default], lambda x, i: torch.index_select(x, 1, i) * 2,
     lambda: (r(3, 6), ri(4, hi=6))),
    ([A.gather.default], lambda x, i: torch.gather(x, 1, i) * 2, lambda: (r(3, 6), ri(3, 4, hi=6))),
    ([A.repeat.default], lambda x: (x + 1).repeat(2, 1, 3), lambda: (r(2, 3),)),
    ([A.roll.default], lambda x: torch.roll(x + 1, shifts=(1, -2), dims=(0, 1)),
     lambda: (r(4, 5),)),
    ([A.flip.default], lambda x: torch.flip(x + 1, (0, 1)), lambda: (r(3, 4),)),
    ([A.slice_scatter.default], lambda x, y: _setitem(x, (slice(None), slice(1, 3)), y),
     lambda: (r(3, 5), r(3, 2))),
    ([A.select_scatter.default], lambda x, y: _setitem(x, (slice(None), -1), y),
     lambda: (r(3, 5), r(3))),
    ([A.as_strided.default], lambda x: torch.as_strided(x + 1, (3, 2), (1, 3)) * 2,
     lambda: (r(4, 3),)),
    ([A.tril.default], lambda x: torch.tril(x + 1), lambda: (r(4, 4),)),
    ([A.triu.default], lambda x: torch.triu(x + 1, 1), lambda: (r(4, 5),)),
    ([A.cumsum.default], lambda x: torch.cumsum(x, 1), lambda: (r(3, 5),)),
    ([A.topk.default], lambda x: torch.topk(x, 3, dim=1), lambda: (r(3, 6),)),
    ([A.full.default], lambda x: x + torch.full((2, 3), 1.5), lambda: (r(2, 3),)),
    ([A.zeros_like.default], lambda x: torch.zeros_like(x) + x, lambda: (r(2, 3),)),
    ([A.ones_like.default], lambda x: torch.ones_like(x) * x, lambda: (r(2, 3),)),
    ([A.full_like.default], lambda x: torch.full_like(x, 7.0) - x, lambda: (r(2, 3),)),
    ([A.new_zeros.default], lambda x: x.new_zeros(2, 3) + x, lambda: (r(2, 3),)),
    ([A.new_ones.default], lambda x: x.new_ones(2, 3) + x, lambda: (r(2, 3),)),
    ([A.new_full.default], lambda x: x.new_full((2, 3), 4.0) + x, lambda: (r(2, 3),)),
    ([A.zeros.default], lambda x: torch.zeros(2, 3) + x, lambda: (r(2, 3),)),
    ([A.ones.default], lambda x: torch.ones(2, 3) + x, lambda: (r(2, 3),)),
    ([A.fill.Scalar], lambda x: (x * 2).fill_(3.0) + x, lambda: (r(2, 3),)),
    ([A.copy.default], lambda x, y: (x * 2).copy_(y) + 1, lambda: (r(2, 3), r(3))),
    ([A.squeeze.default], lambda x: (x + 1).squeeze() * 2, lambda: (r(1, 3, 1, 2),)),
    ([A.scalar_tensor.default], lambda x: torch.where(x > 0, x, -1.0),
     lambda: (r(2, 3),)),
    ([A.arange.start_step], lambda x: x + torch.arange(0, 6, 2), lambda: (r(2, 3),)),
    ([A.arange.default], lambda x: x * torch.arange(3, dtype=torch.float32), lambda: (r(2, 3),)),
    # reductions
    ([A.sum.dim_IntList], lambda x: x.sum(1), lambda: (r(3, 4, 5),)),
    ([A.sum.dim_IntList], lambda x: x.sum((0, 2), keepdim=True), lambda: (r(3, 4, 5),)),
    ([A.sum.default], lambda x: x.sum(), lambda: (r(3, 4),)),
    ([A.sum.dim_IntList], lambda x: x.sum(1), lambda: (ri(3, 4),)),
    ([A.mean.dim], lambda x: x.mean(-1, keepdim=True), lambda: (r(3, 4, 5),)),
    ([A.mean.default], lambda x: x.mean(), lambda: (r(3, 4),)),
    ([A.amax.default], lambda x: x.amax(1), lambda: (r(3, 4),)),
    ([A.amin.default], lambda x: x.amin((0, 1)), lambda: (r(3, 4),)),
    ([A.max.default], lambda x: x.max(), lambda: (r(3, 4),)),
    ([A.min.default], lambda x: x.min(), lambda: (r(3, 4),)),
    ([A.max.dim], lambda x: torch.max(x, 1), lambda: (r(3, 4),)),
    ([A.min.dim], lambda x: torch.min(x, 0, keepdim=True), lambda: (r(3, 4),)),
    ([A.argmax.default], lambda x: x.argmax(-1), lambda: (r(3, 4),)),
    ([A.argmax.default], lambda x: x.argmax(), lambda: (r(3, 4),)),
    ([A.argmin.default], lambda x: x.argmin(0), lambda: (r(3, 4),)),
    ([A.prod.dim_int], lambda x: x.prod(1), lambda: (r(3, 4),)),
    ([A.var.correction], lambda x: x.var(1), lambda: (r(3, 8),)),
    ([A.var.correction], lambda x: x.var(1, unbiased=False, keepdim=True), lambda: (r(3, 8),)),
    ([A.std.correction], lambda x: x.std(-1), lambda: (r(3, 8),)),
    ([A.any.dim], lambda x: (x > 1).any(1), lambda: (r(3, 8),)),
    ([A.all.dim], lambda x: (x > -1.9).all(1), lambda: (r(3, 8),)),
    ([A.any.default], lambda x: (x > 1).any(), lambda: (r(3, 8),)),
    ([A.logsumexp.default], lambda x: torch.logsumexp(x, 1), lambda: (r(3, 8),)),
    # multi-tensor ops (foreach optimizers; test_training.py runs the optimizers themselves)
    ([A._foreach_add.List, A._foreach_mul.Scalar],
     lambda a, b, c, d: torch._foreach_mul(torch._foreach_add([a, b], [c, d], alpha=2), 0.5),
     lambda: (r(3, 4), r(5), r(3, 4), r(5))),
    ([A._foreach_div.ScalarList], lambda a, b: torch._foreach_div([a, b], [2.0, -3.0]),
     lambda: (r(3, 4), r(5))),
    ([A._foreach_lerp.Scalar], lambda a, b, c, d: torch._foreach_lerp([a, b], [c, d], 0.3),
     lambda: (r(3, 4), r(5), r(3, 4), r(5))),
    ([A._foreach_addcdiv.Scalar, A._foreach_sqrt.default],
     lambda a, b, c: torch._foreach_addcdiv([a], [b], torch._foreach_sqrt([c]), value=-0.1),
     lambda: (r(3, 4), r(3, 4), pos(3, 4))),
    ([A._foreach_addcmul.Scalar, A._foreach_sub.List, A._foreach_maximum.List],
     lambda a, b, c: torch._foreach_maximum(
         torch._foreach_addcmul(torch._foreach_sub([a], [b]), [b], [c], value=0.5), [c]),
     lambda: (r(3, 4), r(3, 4), r(3, 4))),
    ([A._foreach_pow.ScalarAndTensor, A._foreach_neg.default, A._foreach_reciprocal.default],
     lambda a, b: torch._foreach_reciprocal(torch._foreach_neg(torch._foreach_pow(0.9, [a, b]))),
     lambda: (r(3, 4), r(5))),
    ([A._foreach_abs.default], lambda a, b: torch._foreach_abs([a, b]), lambda: (r(3, 4), r(5))),
    ([A._foreach_exp.default], lambda a, b: torch._foreach_exp([a, b]), lambda: (r(3, 4), r(5))),
    ([A._foreach_sign.default], lambda a, b: torch._foreach_sign([a, b]),
     lambda: (r(3, 4), r(5))),
]


def _ferrite_targets(reports):
    targets = set()
    for rep in reports:
        for p in rep.partitions:
            for op in p["ops"]:
                targets.add(op)
    return targets


@pytest.mark.parametrize("case", range(len(CASES)), ids=lambda i: str(CASES[i][0][0]))
def test_aten_entry(case):
    overloads, fn, make = CASES[case]
    args = make()
    expected = fn(*args)
    out, reports, _ = compile_report(fn, *args, device="reference")
    assert_close(out, expected)
    ran = _ferrite_targets(reports)
    for o in overloads:
        assert str(o) in ran, f"{o} did not run in ferrite; partitions ran {sorted(ran)}; " \
                              f"eager: {[r.eager_ops for r in reports]}"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_float_dtypes(dtype):
    # A chain of the common ops in each float dtype the entries claim.
    def fn(x, w, b):
        y = F.layer_norm(F.gelu(x @ w + b), (8,))
        return torch.softmax(y * 0.5, -1).sum(-1, keepdim=True) + y

    args = (r(4, 8, dtype=dtype), r(8, 8, dtype=dtype), r(8, dtype=dtype))
    out, _, _ = compile_report(fn, *args, device="reference")
    expected = fn(*[a.float() for a in args]).to(dtype)
    assert out.dtype == dtype
    assert_close(out.float(), expected.float(), rtol=4e-2 if dtype != torch.float64 else 1e-6,
                 atol=4e-2 if dtype != torch.float64 else 1e-6)


# Entries PyTorch emits only for CUDA tensors; their cases run in the GPU tests (test_cuda.py).
CUDA_ONLY = {str(A._scaled_dot_product_flash_attention.default),
             str(A._scaled_dot_product_efficient_attention.default),
             str(A._scaled_dot_product_cudnn_attention.default)}


def test_every_entry_has_a_case():
    from test_training import GRAD_CASES  # the backward and training-forward entries

    covered = {str(o) for ovs, _, _ in CASES for o in ovs} | CUDA_ONLY
    covered |= {str(o) for bw, fw, _, _ in GRAD_CASES for o in bw + fw}
    # Overloads whose translation is shared with a tested sibling (same function) count once.
    missing = sorted(str(o) for o, e in table().items()
                     if str(o) not in covered and not any(
                         str(o2) in covered for o2, e2 in table().items() if e2.fn is e.fn))
    assert not missing, f"ATen entries without a test case: {missing}"
