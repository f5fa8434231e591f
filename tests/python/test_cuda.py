"""The PyTorch frontend on a GPU (skipped without one): CUDA tensors in, the cuda device, the
CUDA-only SDPA overloads of the ATen table."""

from __future__ import annotations

import pytest
import torch

from conftest import MODEL_TOL, assert_close, compile_report, has_cuda

pytestmark = pytest.mark.skipif(not has_cuda(), reason="no CUDA GPU and ferrite cuda device")
F = torch.nn.functional


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_cuda_overloads(causal):
    q, k, v = (torch.randn(2, 4, 16, 32, device="cuda") for _ in range(3))
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    out, reports, _ = compile_report(fn, q, k, v, device="cuda")
    assert out.device.type == "cuda"
    assert_close(out, fn(q, k, v), rtol=1e-4, atol=1e-4)
    ran = {op for r in reports for p in r.partitions for op in p["ops"]}
    assert any("scaled_dot_product" in op for op in ran), ran


def test_resnet_on_cuda():
    tv = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    torch.backends.cudnn.allow_tf32 = False  # eager in true f32, as ferrite at precision f32
    m = tv.models.resnet18(num_classes=10).eval().cuda()
    x = torch.randn(2, 3, 64, 64, device="cuda")
    with torch.no_grad():
        expected = m(x)
    out, reports, _ = compile_report(m, x, device="cuda")
    assert_close(out, expected, rtol=1e-3, atol=1e-3)
    assert all(len(r.partitions) == 1 and not r.eager_ops for r in reports)
