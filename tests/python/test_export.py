"""ferrite.export (torch.export + the ONNX exporter, in memory) and ferrite.explain."""

from __future__ import annotations

import pytest
import torch

import ferrite
from conftest import MODEL_TOL, assert_close


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.ln = torch.nn.LayerNorm(8)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = torch.nn.functional.gelu(self.conv(x)).mean((2, 3))
        return torch.softmax(self.fc(self.ln(y)), -1)


def test_export_dynamic_batch(tmp_path):
    torch.manual_seed(0)
    m = Net().eval()
    x = torch.randn(2, 3, 8, 8)
    path = tmp_path / "net.onnx"
    sess = ferrite.export(m, (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch")}},
                          path=path, device="cpu")
    assert path.stat().st_size > 0
    name, _, dims = sess.inputs[0]
    assert isinstance(dims[0], str), f"batch dim should stay symbolic, got {dims}"
    with torch.no_grad():
        for bs in (2, 5):
            xb = torch.randn(bs, 3, 8, 8)
            (y,) = sess.run({name: xb})
            assert_close(y, m(xb), **MODEL_TOL[torch.float32])
    assert sess.compiles == 1


def test_explain_reports_partitions_and_eager_ops():
    torch.manual_seed(0)
    m = Net().eval()
    e = ferrite.explain(m, torch.randn(2, 3, 8, 8))
    assert len(e.partitions) == 1 and e.eager_op_count == 0 and not e.errors, str(e)
    assert "1 ferrite partition" in str(e)

    def with_unsupported(x):
        return torch.fft.rfft(torch.relu(x) + 1).abs() * 2  # FFT: no ferrite translation

    e = ferrite.explain(with_unsupported, torch.randn(4, 8))
    fft = [op for op in e.eager_ops if "fft" in op]
    assert fft and "no ferrite translation" in e.eager_ops[fft[0]]["reason"], str(e)
    assert fft[0] in str(e)


def test_backend_registered_by_entry_point():
    from torch._dynamo import list_backends

    assert "ferrite" in list_backends(exclude_tags=())
    f = torch.compile(lambda x: torch.tanh(x) * 2, backend="ferrite")
    x = torch.randn(8)
    assert_close(f(x), torch.tanh(x) * 2)


def test_compile_failure_falls_back_with_one_warning(monkeypatch):
    from ferrite.pytorch import compiled

    def boom(self, args):
        raise ferrite.FerriteError("injected compile failure")

    monkeypatch.setattr(compiled.CompiledPartition, "_build", boom)
    f = torch.compile(lambda x: torch.sigmoid(x) + 1, backend="ferrite")
    x = torch.randn(8)
    with pytest.warns(RuntimeWarning, match="injected compile failure"):
        y = f(x)
    assert_close(y, torch.sigmoid(x) + 1)
