"""Tensor parallelism with one rank per process, as under ``torchrun``: two processes with a gloo
process group on localhost (tp_processes_worker.py), each keeping its rank's shard and running
its collectives through ``torch.distributed``:

* the one-rank Session (``tensor_parallel="auto"``) on the zoo's BERT-base: every rank's outputs
  equal the whole model's (ferrite, TP 1) and the expected ones, and the split is Megatron's;
* ``torch.compile(backend="ferrite", options={"tensor_parallel": "auto"})`` on small GPT-2 and
  Llama decoders (random weights) on every rank: outputs equal eager's, and each partition was
  split the Megatron way, not run whole; where one rank cannot build its shard, every rank runs
  the partition whole (with a warning), still equal to eager;
* a collective that fails in Python (the process group destroyed) is a FerriteError naming the
  collective on every rank: no hang, no abort.

One job runs the three steps (a torchrun start costs seconds on 2 cores).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
onnx = pytest.importorskip("onnx")

import ferrite  # noqa: E402

from onnx import numpy_helper  # noqa: E402

RANKS = 2
SHARED = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "models"
BERT = SHARED / "bert_base"
WORKER = pathlib.Path(__file__).with_name("tp_processes_worker.py")


def _read_pb(path: pathlib.Path) -> np.ndarray:
    t = onnx.TensorProto()
    t.ParseFromString(path.read_bytes())
    return np.array(numpy_helper.to_array(t))  # a writable copy: the proto's bytes are read-only


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    """The zoo's BERT-base with its weights filled in, its first data set's inputs (as .npz,
    by name) and expected outputs."""
    if not (BERT / "model.onnx").exists():
        pytest.skip(f"{BERT} not found (the shared model zoo is expected at ../shared/models)")
    d = tmp_path_factory.mktemp("bert")
    model = d / "model.onnx"
    subprocess.run([sys.executable, str(SHARED / "materialize.py"), str(BERT / "model.onnx"),
                    str(model)], check=True)
    names = [i.name for i in onnx.load(str(BERT / "model.onnx"), load_external_data=False)
             .graph.input]
    case = BERT / "test_data_set_0"
    feeds = {n: _read_pb(case / f"input_{k}.pb") for k, n in enumerate(names)}
    np.savez(d / "inputs.npz", **feeds)
    expected = [_read_pb(p) for p in sorted(case.glob("output_*.pb"))]
    return model, d / "inputs.npz", feeds, expected


def _two_gpus() -> bool:
    return torch.cuda.device_count() >= RANKS and "cuda" in ferrite.devices()


# cpu: collectives through gloo (CI). cuda (a machine with 2 GPUs): ferrite's NCCL group,
# bootstrapped over the process group.
@pytest.fixture(scope="module", params=[
    "cpu", pytest.param("cuda", marks=pytest.mark.skipif(not _two_gpus(), reason="2 GPUs"))])
def job(request, bert, tmp_path_factory):
    """Runs the two-rank job once per device; returns the device, each rank's results and the
    output directory."""
    model, inputs, _, _ = bert
    device = request.param
    out = tmp_path_factory.mktemp(f"ranks-{device}")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={RANKS}", str(WORKER), str(out), device, str(model), str(inputs)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    results = []
    for r in range(RANKS):
        f = out / f"rank{r}.json"
        assert f.exists(), f"rank {r} wrote nothing (exit {p.returncode}):\n{p.stderr[-4000:]}"
        results.append(json.loads(f.read_text()))
    assert p.returncode == 0, p.stderr[-4000:]
    return device, results, out


def _ok(step: dict) -> dict:
    assert "error" not in step, step.get("traceback", step["error"])
    return step


def test_one_rank_sessions_match_the_whole_model(bert, job):
    model, _, feeds, expected = bert
    device, results, out = job
    whole = ferrite.Session(model, device).run(feeds)
    # Against the whole model on the same device: 1e-5 on cpu, as the threads' split
    # (test_tensor_parallel.py); NCCL sums in another order than the GPU's whole-model GEMMs
    # (1e-4, as scripts/gpu/tp_bench.py check).
    tol = 1e-5 if device == "cpu" else 1e-4
    library = "torch.distributed (gloo) rank" if device == "cpu" else "NCCL rank"
    for r in range(RANKS):
        s = _ok(results[r]["session"])
        assert s["rank"] == [r, RANKS]
        assert s["collectives"].startswith(library), s["collectives"]
        # Megatron's layout over 12 layers: q/k/v and the first MLP projection by columns, the
        # attention output and the second projection by rows.
        assert s["split"]["column_parallel"] >= 4 * 12, s["split"]
        assert s["split"]["row_parallel"] == 2 * 12, s["split"]
        got = [np.load(out / f"session_rank{r}_out{i}.npy") for i in range(s["outputs"])]
        assert len(got) == len(whole) == len(expected)
        for g, w, e in zip(got, whole, expected):
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)


# (architecture, attention): Megatron's layout over 2 layers. GPT-2: fused q/k/v and the first
# MLP projection by columns, attention and MLP output projections by rows, the tied LM head by
# columns. Llama: q, k, v, gate, up by columns, o and down by rows, the LM head by columns. Each:
# one AllReduce per row-parallel weight and per vocab-parallel embedding, one AllGather (logits).
LAYOUT = {
    ("gpt2", "sdpa"): dict(column_parallel=5, row_parallel=4, vocab_parallel=1, all_gathers=1),
    ("gpt2", "eager"): dict(column_parallel=5, row_parallel=4, vocab_parallel=1, all_gathers=1),
    ("llama", "sdpa"): dict(column_parallel=11, row_parallel=4, vocab_parallel=1, all_gathers=1),
}


@pytest.mark.parametrize("arch,attn", list(LAYOUT))
def test_torch_compile_in_every_rank_matches_eager_and_is_split(job, arch, attn):
    _, results, _ = job
    for r in range(RANKS):
        c = _ok(results[r][f"compile_{arch}_{attn}"])
        assert len(c["partitions"]) == 1, c  # one graph, all in ferrite
        p = c["partitions"][0]
        assert not p["eager"] and p["unsharded"] is None, p
        assert {k: p["split"][k] for k in LAYOUT[arch, attn]} == LAYOUT[arch, attn], p["split"]


def test_a_partition_one_rank_cannot_split_runs_whole_on_every_rank(job):
    _, results, _ = job
    reasons = ["another rank could not split it",
               "FerriteError: injected: this rank cannot split the partition"]
    for r in range(RANKS):
        c = _ok(results[r]["compile_refused"])  # outputs checked against eager in the worker
        (p,) = c["partitions"]
        assert not p["eager"] and p["split"] == {} and p["unsharded"] == reasons[r], p
        assert any("runs unsharded on every rank" in w for w in c["warnings"]), c["warnings"]


def test_a_collective_failing_in_python_is_an_error_of_the_run(job):
    device, results, _ = job
    if device != "cpu":
        pytest.skip("NCCL's collectives do not go through the process group")
    for r in range(RANKS):
        t = _ok(results[r]["teardown"])
        assert t["raised"] == "FerriteError", t
        assert "failed in Python" in t["message"], t["message"]
        assert "AllReduce" in t["message"] or "AllGather" in t["message"], t["message"]
        assert "process group" in t["message"], t["message"]
