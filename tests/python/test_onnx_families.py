"""Architecture families through the ONNX path on cpu: exported with torch.onnx.export (as a user
would, random weights, BatchNorm statistics calibrated so activations stay O(1)), run by a
ferrite Session on cpu (its default passes: channels-last layout, BatchNorm decomposition, SiLU
fusion, channels-last pooling) and compared with ONNX Runtime on the same inputs. The timing of
the same families is scripts/families/bench_families.py."""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tv = pytest.importorskip("torchvision")
ort = pytest.importorskip("onnxruntime")

import ferrite  # noqa: E402


def _calibrate(model):
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(4, 3, 64, 64, generator=torch.Generator().manual_seed(3)))
    model.eval()


def _model(name):
    from torchvision import models as M
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt

    torch.manual_seed(0)
    if name == "convnext":
        return ConvNeXt([CNBlockConfig(32, 64, 2), CNBlockConfig(64, None, 2)], num_classes=10)
    return getattr(M, name)(weights=None, num_classes=10)


# Residual + max pooling, depthwise/SE with hard-swish, SE with SiLU, dense blocks with
# pre-activation BatchNorm and average pooling, channel shuffle, ConvNeXt's permutes and
# LayerNorm.
FAMILIES = ["resnet18", "mobilenet_v3_small", "efficientnet_b0", "densenet121",
            "shufflenet_v2_x0_5", "convnext"]


def _export(name, tmp_path):
    import warnings

    model = _model(name).eval()
    _calibrate(model)
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    path = os.fspath(tmp_path / "model.onnx")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
                          opset_version=18, dynamo=True, external_data=False)
    return path, x


@pytest.mark.parametrize("name", FAMILIES)
def test_family_matches_onnxruntime(name, tmp_path):
    path, x = _export(name, tmp_path)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    want = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(
        None, {"input": x.numpy()})[0]
    sess = ferrite.Session(path, device="cpu")
    for batch in (2, 1):  # one compile, two batch sizes
        (got,) = sess.run({"input": x[:batch].numpy()})
        got = np.asarray(got)
        assert got.shape == want[:batch].shape
        scale = max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(got, want[:batch], rtol=1e-4, atol=1e-4 * scale)


@pytest.mark.parametrize("name", FAMILIES)
def test_family_in_bf16_keeps_no_value_in_f32(name, tmp_path):
    """Under precision="bf16" only the graph's input and output stay float32: a value left in
    float32 inside costs casts (and on cuda, layout transposes) around it. DenseNet's Concats
    stayed float32 NCHW while the op table covered Concat's first input only."""
    path, x = _export(name, tmp_path)
    dump = tmp_path / "dump"
    sess = ferrite.Session(path, device="cpu", precision="bf16", dump_dir=dump)
    (got,) = sess.run({"input": x.numpy()})
    assert np.isfinite(np.asarray(got)).all()
    graph = (dump / "graph.txt").read_text()
    f32 = [line.strip() for line in graph.splitlines() if ": f32[" in line]
    assert len(f32) == 2, "values left in f32:\n" + "\n".join(f32)
    assert f32[0].startswith("input %input:") and "output_cast" in f32[1], f32
