"""ferrite.Session: ONNX in, numpy/torch arrays in and out, errors as exceptions."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import ferrite
from ferrite import _core

ROOT = Path(__file__).resolve().parents[2]
CONVNET = ROOT / "examples" / "convnet" / "model.onnx"


def _tiny_onnx(dynamic=True):
    import onnx
    from onnx import TensorProto, helper

    batch = "batch" if dynamic else 2
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
    nodes = [helper.make_node("Mul", ["x", "w"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    g = helper.make_graph(nodes, "tiny", [x], [y], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return m.SerializeToString()


def test_devices_listed():
    d = ferrite.devices()
    assert "cpu" in d and "reference" in d


def test_no_device_named_picks_the_best_usable_one():
    name, why = ferrite.default_device()
    assert name in ("cuda", "cpu") and why
    if not has_gpu():
        assert name == "cpu"
    s = ferrite.Session(_tiny_onnx())
    assert s.device == name
    (y,) = s.run({"x": np.ones((2, 4), dtype=np.float32)})
    assert y.shape == (2, 4)


def has_gpu() -> bool:
    import shutil
    import subprocess

    smi = shutil.which("nvidia-smi")
    return bool(smi) and subprocess.run([smi, "-L"], capture_output=True).returncode == 0


@pytest.mark.parametrize("device", ["reference", "cpu"])
def test_bytes_numpy_roundtrip(device):
    s = ferrite.Session(_tiny_onnx(), device)
    x = np.array([[1, -1, 2, -2], [0.5, 0.5, -0.5, -0.5]], dtype=np.float32)
    (y,) = s.run({"x": x})
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    np.testing.assert_array_equal(y, np.maximum(x * [1, 2, 3, 4], 0))
    assert s.inputs == [("x", "f32", ["batch", 4])]
    # One compile for every batch size (the batch dim is symbolic).
    (y3,) = s.run([np.ones((3, 4), np.float32)])
    assert y3.shape == (3, 4)
    assert s.compiles == 1


def test_torch_in_torch_out_without_copies():
    torch = pytest.importorskip("torch")
    s = ferrite.Session(_tiny_onnx(), "cpu")
    x = torch.randn(5, 4)
    (y,) = s.run([x])
    assert isinstance(y, torch.Tensor)
    torch.testing.assert_close(y, torch.relu(x * torch.tensor([1.0, 2, 3, 4])))
    # The output is ferrite's buffer handed over through DLPack, and a second output is a new
    # buffer (outputs own their memory: nothing later overwrites an earlier result).
    (y2,) = s.run([x])
    assert y.data_ptr() != y2.data_ptr()
    torch.testing.assert_close(y, y2)


def test_non_contiguous_input_is_made_contiguous():
    torch = pytest.importorskip("torch")
    s = ferrite.Session(_tiny_onnx(), "cpu")
    x = torch.randn(4, 6)[:, :4]
    (y,) = s(x)
    torch.testing.assert_close(y, torch.relu(x * torch.tensor([1.0, 2, 3, 4])))


def test_read_only_arrays_are_inputs_without_a_copy():
    # onnx.numpy_helper and np.frombuffer give read-only arrays; they used to be a TypeError.
    s = ferrite.Session(_tiny_onnx(), "cpu")
    x = np.array([[1, -1, 2, -2]], dtype=np.float32)
    x.setflags(write=False)
    (y,) = s.run({"x": x})
    np.testing.assert_array_equal(y, np.maximum(x * [1, 2, 3, 4], 0))
    frozen = np.frombuffer(np.arange(8, dtype=np.float32).tobytes(), np.float32).reshape(2, 4)
    assert not frozen.flags.writeable
    (y,) = s.run([frozen])
    np.testing.assert_array_equal(y, frozen * [1, 2, 3, 4])


def test_onnx_file_on_cpu():
    s = ferrite.Session(CONVNET, "cpu", threads=1)
    name, dtype, dims = s.inputs[0]
    shape = [d if isinstance(d, int) else 1 for d in dims]
    (y,) = s.run({name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)})
    ref = ferrite.Session(CONVNET, "reference")
    (y_ref,) = ref.run({name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)})
    np.testing.assert_allclose(y, y_ref, rtol=1e-4, atol=1e-5)
    assert "compiles" in s.stats()
    assert "memory" in s.stats()


def test_errors_are_exceptions_naming_the_tensor():
    s = ferrite.Session(_tiny_onnx(), "cpu")
    with pytest.raises(ferrite.FerriteError, match="x"):
        s.run({"x": np.ones((2, 5), np.float32)})  # dim 1 must be 4
    with pytest.raises(ferrite.FerriteError):
        s.run({"x": np.ones((2, 4), np.int32)})  # wrong dtype
    with pytest.raises(ferrite.FerriteError):
        ferrite.Session(b"not a model", "cpu")
    with pytest.raises(ferrite.FerriteError):
        ferrite.Session(_tiny_onnx(), "no-such-device")
    with pytest.raises(ValueError):
        ferrite.Session(_tiny_onnx(), "cpu", precision="f8")


def test_run_device_checks_described_device_tensors():
    # The torch.compile backend passes CUDA tensors to run_device as (address, dims, dtype, gpu)
    # tuples; malformed ones, and device tensors on a host device, are errors naming the input.
    s = ferrite.Session(_tiny_onnx(), "cpu")._s

    def run(arrays):
        s.run_device([], arrays, lambda i, dims, dtype: 0, 0)

    with pytest.raises(ValueError, match="input 0.*cannot run on device 'cpu'"):
        run([(4096, (2, 4), "f32", 0)])
    with pytest.raises(ValueError, match="input 0.*address, dims, dtype, gpu"):
        run([(4096, (2, 4), "f32")])
    with pytest.raises(ValueError, match="input 0.*unknown dtype"):
        run([(4096, (2, 4), "float99", 0)])
    with pytest.raises(ValueError, match="input 0.*negative"):
        run([(4096, (2, -4), "f32", 0)])
    with pytest.raises(TypeError, match="input 0.*not an array"):
        run([object()])


def test_help_is_useful():
    doc = ferrite.Session.__doc__
    assert "device" in doc and "precision" in doc and "DLPack" in ferrite.__doc__


def test_type_stubs_match_the_extension(tmp_path):
    """python/ferrite/_core.pyi is what nanobind's stubgen writes for the built extension:
    regenerate it with `.venv/bin/python -m nanobind.stubgen -m ferrite._core -o
    python/ferrite/_core.pyi` after changing the bindings."""
    import pathlib
    import subprocess
    import sys

    out = tmp_path / "_core.pyi"
    subprocess.run([sys.executable, "-m", "nanobind.stubgen", "-q", "-m", "ferrite._core",
                    "-o", str(out)], check=True)
    kept = pathlib.Path(ferrite.__file__).with_name("_core.pyi")
    assert kept.read_text() == out.read_text(), "stale python/ferrite/_core.pyi"


def test_empty_arrays_are_contiguous_whatever_their_strides():
    # An empty array is contiguous whatever strides its exporter reports (they differ between
    # numpy, torch and versions). The PyTorch frontend makes empty shape constants
    # (new_ones(()) -> Expand to []); on the GPU machine's numpy they were refused.
    torch = pytest.importorskip("torch")
    for odd in (torch.empty_strided((0,), (5,), dtype=torch.int64),
                torch.empty_strided((2, 0), (0, 0), dtype=torch.int64)):
        _core.GraphBuilder("strided").add_constant("c", odd)
    b = _core.GraphBuilder("empty")
    x = b.add_input("x", "f32", [])
    shape = b.add_constant("shape", torch.empty_strided((0,), (5,), dtype=torch.int64))
    y = b.add_node("Expand", [x, shape], {})[0]
    b.set_outputs([y])
    s = b.build_session("cpu")
    (out,) = s.run([], [np.array(3.0, np.float32)], "numpy")
    assert out.shape == () and float(out) == 3.0


@pytest.mark.parametrize("contexts", [1, 3])
def test_threads_share_one_session(contexts):
    """Several threads call one Session at once (up to `contexts` runs proceed together); every
    output equals the single-threaded one."""
    import concurrent.futures

    s = ferrite.Session(_tiny_onnx(), "cpu", threads=1, contexts=contexts)
    xs = [np.random.default_rng(i).standard_normal((1 + i % 5, 4)).astype(np.float32)
          for i in range(64)]
    want = [s.run([x])[0] for x in xs]
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        got = list(pool.map(lambda x: s.run([x])[0], xs * 4))
    for g, w in zip(got, want * 4):
        np.testing.assert_array_equal(g, w)
    with pytest.raises(ValueError, match="contexts"):
        ferrite.Session(_tiny_onnx(), "cpu", contexts=-1)


def test_storage_precision_is_decided_before_the_layout_pass():
    # cuda's pipeline moves only bf16/f16 convolutions to channels-last
    # (layout-channels-last{dtypes=bf16+f16}); an f32 ONNX model run at precision bf16 must reach
    # that pass with its convolutions already in bf16, or it stays NCHW.
    passes = ["fuse-conv-activation", "layout-channels-last{dtypes=bf16}"]
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    (want,) = ferrite.Session(CONVNET, "cpu").run({"input": x})
    for precision, moved in [("f32", False), ("bf16", True)]:
        s = ferrite.Session(CONVNET, "cpu", precision=precision, passes=passes)
        convs = [line for line in s.ir().splitlines() if "ferrite.FusedConv(" in line]
        assert convs and all(("channels_last=1" in c) == moved for c in convs), precision
        (y,) = s.run({"input": x})
        assert y.dtype == np.float32
        np.testing.assert_allclose(y, want, rtol=0, atol=0.05 * np.abs(want).max())
