"""Tensor parallelism from Python: ``Session(model, tensor_parallel=N)`` on a Llama-architecture
decoder (rotary embeddings, grouped-query attention, RMSNorm, SwiGLU; random weights, a small
config) exported from transformers, split 2 and 4 ways over the loopback communicator. Its
outputs must be the whole model's (TP = 1) and eager PyTorch's, and the split must be the
Megatron layout: q/k/v and gate/up by columns, o/down by rows, a vocab-parallel embedding and a
column-parallel LM head gathered at the output."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import ferrite  # noqa: E402

LAYERS = 2


def _config():
    """A small Llama: rotary, GQA (8 query / 4 key-value heads), RMSNorm, SwiGLU; eager attention
    (its matmuls and softmax export as themselves)."""
    from transformers import LlamaConfig

    cfg = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128,
                      num_hidden_layers=LAYERS, num_attention_heads=8, num_key_value_heads=4,
                      max_position_embeddings=64)
    cfg._attn_implementation = "eager"
    return cfg


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    cfg = _config()
    model = LlamaForCausalLM(cfg).eval()

    class Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids):
            return self.m(input_ids=ids, use_cache=False).logits

    wrapped = Logits(model).eval()
    ids = torch.randint(0, cfg.vocab_size, (2, 12))
    path = tmp_path_factory.mktemp("llama") / "llama.onnx"
    dims = {0: torch.export.Dim("batch", max=64), 1: torch.export.Dim("seq", max=64)}
    torch.onnx.export(wrapped, (ids,), str(path), input_names=["input_ids"],
                      output_names=["logits"], dynamic_shapes=(dims,), opset_version=18,
                      dynamo=True)
    with torch.no_grad():
        want = wrapped(ids).numpy()
    return path, ids.numpy(), want


@pytest.mark.parametrize("tp", [2, 4])
def test_llama_split_matches_whole_model_and_eager(llama, tp):
    path, ids, eager = llama
    whole = ferrite.Session(path, "cpu").run({"input_ids": ids})[0]
    np.testing.assert_allclose(whole, eager, rtol=1e-4, atol=1e-4)
    s = ferrite.Session(path, "cpu", tensor_parallel=tp)
    got = s.run({"input_ids": ids})[0]
    np.testing.assert_allclose(got, whole, rtol=1e-5, atol=1e-5)
    # Another batch and sequence length: shapes stay symbolic through the split.
    ids2 = np.random.default_rng(1).integers(0, 96, size=(3, 7), dtype=np.int64)
    np.testing.assert_allclose(s.run({"input_ids": ids2})[0],
                               ferrite.Session(path, "cpu").run({"input_ids": ids2})[0],
                               rtol=1e-5, atol=1e-5)
    assert s.compiles == 1

    r = s.split_report()
    # Per layer: q, k, v, gate, up by columns and o, down by rows; plus the LM head by columns.
    assert r["column_parallel"] == 5 * LAYERS + 1, r["lines"]
    assert r["row_parallel"] == 2 * LAYERS, r["lines"]
    assert r["vocab_parallel"] == 1, r["lines"]
    assert r["all_gathers"] == 1, r["lines"]  # the logits, once
    assert r["weight_bytes_after"] < r["weight_bytes_before"] / tp * 1.2
    assert "AllReduce" in s.ir() and "AllGather" in s.ir()


def test_tensor_parallel_refuses_what_it_cannot_do(llama):
    path, _, _ = llama
    with pytest.raises(ferrite.FerriteError, match="tensor-parallel"):
        ferrite.Session(path, "cpu", tensor_parallel=0)
    with pytest.raises(ferrite.UnsupportedError, match="model path"):
        ferrite.Session(path.read_bytes(), "cpu", tensor_parallel=2)


def test_auto_without_torch_distributed_is_the_whole_model(llama):
    """tensor_parallel="auto" outside torchrun: a whole-model Session (the same script runs with
    and without a process group). One rank per process is tested in
    test_tensor_parallel_processes.py."""
    import torch.distributed as dist

    assert not dist.is_initialized()
    path, ids, eager = llama
    s = ferrite.Session(path, "cpu", tensor_parallel="auto")
    assert s.rank == (0, 1) and s.split_report() == {}
    np.testing.assert_allclose(s.run({"input_ids": ids})[0], eager, rtol=1e-4, atol=1e-4)


def test_a_communicator_is_checked_before_it_is_used(llama):
    path, _, _ = llama

    class Incomplete:
        def all_reduce(self, inp, out):
            pass

    with pytest.raises(TypeError, match="all_gather"):
        ferrite._core.Communicator.from_python(Incomplete(), 0, 2)
    with pytest.raises(ValueError, match="rank 2 of 2"):
        ferrite._core.Communicator.from_python(ferrite.distributed.ProcessGroupCommunicator(), 2, 2)
    c = ferrite._core.Communicator.from_python(ferrite.distributed.ProcessGroupCommunicator(), 1, 2)
    assert (c.rank, c.size) == (1, 2)
    with pytest.raises(ValueError, match="communicator has 2 ranks"):
        ferrite.Session(path, "cpu", tensor_parallel=4, communicator=c)


@pytest.fixture(scope="module")
def llama_decode(tmp_path_factory):
    """One decoding step of the same architecture: the new token's ids and every layer's past
    keys and values in (transformers' DynamicCache, concatenated inside), hidden state out."""
    from transformers import DynamicCache, LlamaModel

    torch.manual_seed(0)
    cfg = _config()
    model = LlamaModel(cfg).eval()

    class Step(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids, *past):
            cache = DynamicCache(ddp_cache_data=[(past[2 * i], past[2 * i + 1])
                                                 for i in range(len(past) // 2)])
            return self.m(input_ids=ids, past_key_values=cache, use_cache=True).last_hidden_state

    step = Step(model).eval()
    names = [f"past_{w}_{i}" for i in range(LAYERS) for w in ("key", "value")]
    ids = torch.randint(0, cfg.vocab_size, (2, 1))
    past = tuple(torch.randn(2, 4, 9, 8) for _ in names)  # batch, kv heads, past, head dim
    path = tmp_path_factory.mktemp("llama_decode") / "step.onnx"
    batch, plen = torch.export.Dim("batch", max=64), torch.export.Dim("past", max=64)
    torch.onnx.export(step, (ids,) + past, str(path), input_names=["input_ids"] + names,
                      output_names=["hidden"],
                      dynamic_shapes=({0: batch}, tuple({0: batch, 2: plen} for _ in names)),
                      opset_version=18, dynamo=True)
    with torch.no_grad():
        want = step(ids, *past).numpy()
    feed = {"input_ids": ids.numpy(), **{n: p.numpy() for n, p in zip(names, past)}}
    return path, feed, want


@pytest.mark.parametrize("tp", [2, 4])
def test_decoding_step_splits_the_past_by_heads(llama_decode, tp):
    """Each rank attends over its own heads of the past (sliced from the whole input, no gather
    of keys or values), and the step's output is the whole model's and eager's."""
    path, feed, eager = llama_decode
    whole = ferrite.Session(path, "cpu").run(feed)[0]
    np.testing.assert_allclose(whole, eager, rtol=1e-4, atol=1e-4)
    s = ferrite.Session(path, "cpu", tensor_parallel=tp)
    np.testing.assert_allclose(s.run(feed)[0], whole, rtol=1e-5, atol=1e-5)
    r = s.split_report()
    assert r["column_parallel"] == 5 * LAYERS and r["row_parallel"] == 2 * LAYERS, r["lines"]
    assert r["all_gathers"] == 0, r["lines"]
    # A longer past: the past length stays symbolic.
    longer = {k: (np.concatenate([v, v], axis=2) if k.startswith("past") else v)
              for k, v in feed.items()}
    np.testing.assert_allclose(s.run(longer)[0],
                               ferrite.Session(path, "cpu").run(longer)[0], rtol=1e-5, atol=1e-5)
    assert s.compiles == 1
    # Host devices run at the caller's pace: device timing is the GPU's (tp_bench.py uses it).
    with pytest.raises(ferrite.UnsupportedError, match="time runs"):
        s.time_resident(feed, runs=2)
