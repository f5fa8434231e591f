"""Shared helpers of the Python tests: compile with backend="ferrite" and compare with eager."""

from __future__ import annotations

import functools
import os

import pytest

torch = pytest.importorskip("torch")

import ferrite  # noqa: E402  (must import: a broken install fails every test, never skips)
from ferrite.pytorch.backend import ferrite_backend  # noqa: E402

# Per-dtype tolerances of single ops: torch.testing's defaults for the dtype.
TOL = {
    torch.float32: dict(rtol=1.3e-6, atol=1e-5),
    torch.float64: dict(rtol=1e-7, atol=1e-7),
    torch.float16: dict(rtol=1e-3, atol=1e-5),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-5),
}
# Whole models in f32: tens of layers of GEMMs and convolutions summed in another order (oneDNN
# and generated kernels against ATen's) differ by accumulated rounding, not by a wrong op. The
# bound is 1e-4 relative/absolute on outputs of unit scale (random-weight models, inputs ~N(0,1)).
MODEL_TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4)}


def has_cuda() -> bool:
    return torch.cuda.is_available() and "cuda" in ferrite.devices()


# Devices the training and model tests run on: cpu everywhere, cuda where a GPU answers (eager
# then runs in true f32 on it, as ferrite does at precision f32: TF32 off).
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not (torch.cuda.is_available() and "cuda" in ferrite.devices()),
    reason="no CUDA GPU and ferrite cuda device"))]
if torch.cuda.is_available():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def compile_report(fn, *args, device="cpu", options=None):
    """Compiles fn with ferrite (fallback='raise'), runs it once, returns (out, reports)."""
    import torch._dynamo

    reports = []
    opts = {"device": device, "fallback": "raise"}
    opts.update(options or {})
    backend = functools.partial(ferrite_backend, options=opts, _report=reports)
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend, fullgraph=False)
    with torch.no_grad():
        out = compiled(*args)
    return out, [r for _, r in reports if r is not None], compiled


def assert_close(actual, expected, dtype=None, **kw):
    if isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_close(a, e, dtype, **kw)
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected
        return
    tol = dict(TOL.get(expected.dtype, dict(rtol=0, atol=0)))
    tol.update(kw)
    torch.testing.assert_close(actual, expected, equal_nan=True, **tol)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    import torch._dynamo

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
