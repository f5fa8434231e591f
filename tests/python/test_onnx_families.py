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


@pytest.mark.parametrize("name", FAMILIES)
def test_family_matches_onnxruntime(name, tmp_path):
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
