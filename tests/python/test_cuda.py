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


def _two_layer(tmp_path, dtype=torch.float32):
    """A small ONNX model (MatMul, Add, Relu, Softmax) exported from torch, and its module."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32),
                            torch.nn.Softmax(dim=-1)).eval()
    x = torch.randn(8, 64)
    path = tmp_path / "two_layer.onnx"
    torch.onnx.export(m, (x,), str(path), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}}, dynamo=False)
    return m, path


def test_session_keeps_cuda_tensors_on_the_gpu(tmp_path):
    import ferrite

    m, path = _two_layer(tmp_path)
    s = ferrite.Session(path, device="cuda")
    for batch in (8, 8, 8, 3):  # step by step, recorded, replayed; then a new size
        x = torch.randn(batch, 64, device="cuda")
        (y,) = s.run({"x": x})
        assert y.device.type == "cuda" and y.shape == (batch, 32)
        with torch.no_grad():
            assert_close(y.cpu(), m(x.cpu()), rtol=1e-4, atol=1e-5)
    assert s.compiles == 1


@pytest.mark.parametrize("stream", ["side", "default"])
def test_session_is_ordered_on_the_current_stream(tmp_path, stream):
    """The input is written by work still queued on the current stream when ferrite is called,
    and the output is read by work queued after it: no host synchronisation in between. The
    default stream is PyTorch's usual current stream, CUDA's legacy stream with handle 0 (which
    once counted as "no stream", leaving ferrite's non-blocking stream unordered with it)."""
    import ferrite

    m, path = _two_layer(tmp_path)
    s = ferrite.Session(path, device="cuda")
    side = torch.cuda.Stream() if stream == "side" else torch.cuda.default_stream()
    big = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    for _ in range(3):
        with torch.cuda.stream(side):
            slow = big @ big @ big  # keeps the stream busy
            x = (slow[:8, :64] * 0 + 1.5).contiguous()
            (y,) = s.run([x])
            z = y * 2
        side.synchronize()
        with torch.no_grad():
            assert_close(z.cpu(), 2 * m(torch.full((8, 64), 1.5)), rtol=1e-4, atol=1e-5)


def test_compiled_module_outputs_stay_on_the_gpu():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64)).cuda()
    m.eval()
    x = torch.randn(4, 32, device="cuda")
    with torch.no_grad():
        expected = m(x)
    out, reports, _ = compile_report(m, x, device="cuda")
    assert out.device.type == "cuda"
    assert_close(out, expected, rtol=1e-4, atol=1e-4)
    assert all(len(r.partitions) == 1 for r in reports)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bert_layer_on_cuda(dtype):
    tr = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = tr.BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=256, vocab_size=1000)
    m = tr.BertModel(cfg).eval().cuda().to(dtype)
    ids = torch.randint(0, 1000, (2, 16), device="cuda")
    with torch.no_grad():
        expected = m(ids).last_hidden_state
    compiled = torch.compile(m, backend="ferrite", dynamic=False)
    with torch.no_grad():
        out = compiled(ids).last_hidden_state
    assert out.device.type == "cuda" and out.dtype == dtype
    tol = 1e-3 if dtype == torch.float32 else 3e-2
    assert_close(out.float(), expected.float(), rtol=tol, atol=tol)


def test_rotary_concat_runs_on_the_gpu():
    """rotate_half (Slice, Neg, Concat on the last axis) of device values: Concat is a device
    library step on cuda (it ran on the host, copying both halves back, before)."""
    def rotate(x, cos, sin):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    x = torch.randn(2, 4, 16, 64, device="cuda")
    cos, sin = torch.randn(16, 64, device="cuda"), torch.randn(16, 64, device="cuda")
    out, reports, _ = compile_report(rotate, x, cos, sin, device="cuda")
    assert out.device.type == "cuda"
    assert_close(out, rotate(x, cos, sin), rtol=1e-5, atol=1e-5)


def test_gpu_parameters_are_read_in_place():
    """A model's GPU parameters are not copied: the Session reads them where torch keeps them
    (a constant the passes rewrite, e.g. a folded batch norm, would be the exception)."""
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(4096, 4096), torch.nn.ReLU()]
    m = torch.nn.Sequential(*layers).eval().cuda()
    params = sum(p.numel() * p.element_size() for p in m.parameters())  # 512 MiB
    x = torch.randn(8, 4096, device="cuda")
    with torch.no_grad():
        expected = m(x)
    torch.cuda.synchronize()
    free_before = torch.cuda.mem_get_info()[0]
    out, reports, compiled = compile_report(m, x, device="cuda")
    with torch.no_grad():
        for _ in range(3):  # step by step, recorded, replayed
            out = compiled(x)
    torch.cuda.synchronize()
    used = free_before - torch.cuda.mem_get_info()[0]
    assert_close(out, expected, rtol=1e-3, atol=1e-3)
    assert all(len(r.partitions) == 1 and not r.eager_ops for r in reports)
    assert used < params // 4, f"compiling used {used >> 20} MiB for {params >> 20} MiB of parameters"


def test_threads_share_one_cuda_session():
    """8 threads on one cuda Session with 4 contexts (each on a stream of its own, sharing the
    weights): every output equals the single-threaded run's, batch sizes mixed."""
    import concurrent.futures
    from pathlib import Path

    import numpy as np

    import ferrite

    model = Path(__file__).resolve().parents[2] / "examples" / "convnet" / "model.onnx"
    s = ferrite.Session(model, "cuda", contexts=4)
    xs = [np.random.default_rng(i).standard_normal((1 + i % 4, 3, 32, 32)).astype(np.float32)
          for i in range(32)]
    want = [s.run([x])[0] for x in xs]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda x: s.run([x])[0], xs * 8))
    for g, w in zip(got, want * 8):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def _indexing_model():
    """GatherND (plain and with batch_dims), CumSum (int64 and f32, exclusive and reverse) and an
    integer Min: the index arithmetic transformers' exports run on their inputs (padding masks,
    position ids, T5's relative-position buckets)."""
    from onnx import TensorProto as T
    from onnx import helper as h

    ax = h.make_tensor("ax", T.INT64, [], [1])
    nodes = [
        h.make_node("GatherND", ["x", "pairs"], ["g0"]),
        h.make_node("GatherND", ["x", "rows"], ["g1"], batch_dims=1),
        h.make_node("CumSum", ["ids", "ax"], ["c0"]),
        h.make_node("CumSum", ["x", "ax"], ["c1"], exclusive=1, reverse=1),
        h.make_node("Min", ["ids", "c0"], ["m0"]),
    ]
    ins = [h.make_tensor_value_info("x", T.FLOAT, ["b", 6, 4]),
           h.make_tensor_value_info("ids", T.INT64, ["b", 6]),
           h.make_tensor_value_info("pairs", T.INT64, [5, 2]),
           h.make_tensor_value_info("rows", T.INT64, ["b", 3, 1])]
    outs = [h.make_tensor_value_info(n, t, None) for n, t in
            [("g0", T.FLOAT), ("g1", T.FLOAT), ("c0", T.INT64), ("c1", T.FLOAT), ("m0", T.INT64)]]
    g = h.make_graph(nodes, "indexing", ins, outs, [ax])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def test_index_arithmetic_on_cuda_tensors_stays_on_the_gpu(capfd, monkeypatch):
    import numpy as np

    import ferrite

    rng = np.random.default_rng(0)
    b = 3
    feeds = {"x": rng.standard_normal((b, 6, 4)).astype(np.float32),
             "ids": rng.integers(-4, 9, (b, 6)).astype(np.int64),
             "pairs": np.stack([rng.integers(-b, b, 5), rng.integers(-6, 6, 5)], 1).astype(np.int64),
             "rows": rng.integers(0, 6, (b, 3, 1)).astype(np.int64)}
    want = ferrite.Session(_indexing_model(), "reference").run(feeds)
    monkeypatch.setenv("FERRITE_LOG", "fallback")
    s = ferrite.Session(_indexing_model(), "cuda")
    got = s.run({k: torch.from_numpy(v).cuda() for k, v in feeds.items()})
    assert all(t.device.type == "cuda" for t in got)
    for name, w, g in zip(["g0", "g1", "c0", "c1", "m0"], want, got):
        np.testing.assert_allclose(g.cpu().numpy(), w, rtol=1e-6, atol=1e-6, err_msg=name)
    log = capfd.readouterr().err
    assert " 0 host fallbacks" in log, log


def _embedding_session(tmp_path, table):
    """A Gather of token ids from `table` (then a Relu), on the cuda device."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    import ferrite

    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["rows"], name="embed"),
         helper.make_node("Relu", ["rows"], ["y"])],
        "embedding",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["b", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 8, 16])],
        [numpy_helper.from_array(table.numpy(), "table")])
    path = tmp_path / "embedding.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return ferrite.Session(path, device="cuda")


def test_index_errors_of_device_runs_are_reported_at_the_next_call(tmp_path):
    """A run on CUDA tensors does not wait for the GPU to check its indices: an index out of
    range is reported by the next call (on device or host tensors), naming the Gather, whichever
    path ran it (step by step, recorded, replayed); the session then runs correctly again."""
    import ferrite

    torch.manual_seed(0)
    table = torch.randn(50, 16)
    good = torch.randint(0, 50, (4, 8), device="cuda")
    bad = good.clone()
    bad[2, 3] = 50

    for runs_before in range(3):  # the bad run is step by step, recorded, then replayed
        s = _embedding_session(tmp_path, table)

        def expect(ids):
            (y,) = s.run({"ids": ids})
            assert y.device.type == "cuda"
            assert_close(y.cpu(), torch.relu(table[ids.cpu()]), rtol=0, atol=0)

        for _ in range(runs_before):
            expect(good)
        s.run({"ids": bad})  # queued; nothing waited for the GPU
        torch.cuda.synchronize()
        with pytest.raises(ferrite.FerriteError, match=r"embed.*out of range in an earlier run"):
            s.run({"ids": good})
        for _ in range(3):
            expect(good)
    # A host run waits for the earlier device runs' checks.
    s.run({"ids": bad})
    with pytest.raises(ferrite.FerriteError, match="out of range"):
        s.run({"ids": good.cpu().numpy()})
    (y,) = s.run({"ids": good.cpu().numpy()})
    assert_close(torch.from_numpy(y), torch.relu(table[good.cpu()]), rtol=0, atol=0)
    # A host run's error is reported at once and does not resurface in a later device run.
    with pytest.raises(ferrite.FerriteError, match="out of range"):
        s.run({"ids": bad.cpu().numpy()})
    s.run({"ids": good})
    torch.cuda.synchronize()
    s.run({"ids": good})
