"""One rank of test_tensor_parallel_processes.py's torchrun job (not a test module itself).

    python -m torch.distributed.run --standalone --nproc_per_node N tp_processes_worker.py \
        OUT_DIR DEVICE [ONNX_MODEL INPUTS.npz]

Every rank, in order (each step is a collective sequence every rank must take alike):
  1. session: ferrite.Session(ONNX_MODEL, DEVICE, tensor_parallel="auto"): this rank's shard,
     collectives over the default process group; outputs saved for the parent to compare.
  2. compile_*: torch.compile(backend="ferrite", tensor_parallel="auto") of small GPT-2 and
     Llama decoders (transformers, random weights seeded alike on every rank) against eager, and
     what each partition split.
  3. teardown (not on cuda, whose NCCL group no longer goes through the process group): the
     process group destroyed, then the Session of step 1 run again: its collective fails in
     Python, which must come back as a FerriteError naming the collective.
Each rank writes OUT_DIR/rank<R>.json (and session outputs as .npy); an exception in a step is
recorded there, not raised, so that the parent reports what failed on which rank.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import sys
import time
import traceback

import numpy as np
import torch
import torch.distributed as dist

import ferrite
from ferrite.pytorch.backend import ferrite_backend

# torch.compile'd models: transformers' default attention (SDPA: ferrite.Attention), and GPT-2's
# eager attention (bmm between views that merge batch and heads).
COMPILED = [("gpt2", "sdpa"), ("gpt2", "eager"), ("llama", "sdpa")]


def step_session(out_dir: str, rank: int, device: str, model: str, inputs: str) -> dict:
    feeds = dict(np.load(inputs))
    s = ferrite.Session(model, device, tensor_parallel="auto", threads=1)
    outs = s.run(feeds)
    for i, o in enumerate(outs):
        np.save(os.path.join(out_dir, f"session_rank{rank}_out{i}.npy"), o)
    r = s.split_report()
    step_session.session = s  # run again in the teardown step
    return {"rank": list(s.rank), "collectives": r["collectives"],
            "split": {k: r[k] for k in ("column_parallel", "row_parallel", "vocab_parallel",
                                         "all_gathers")},
            "outputs": len(outs)}


def _transformer(arch: str, attn: str) -> tuple:
    """A small decoder with random weights, alike on every rank, and its vocabulary size."""
    torch.manual_seed(0)
    if arch == "llama":  # rotary embeddings, grouped-query attention (8/4 heads), SwiGLU
        from transformers import LlamaConfig, LlamaForCausalLM

        cfg = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128,
                          num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4,
                          max_position_embeddings=64)
        cls = LlamaForCausalLM
    else:
        from transformers import GPT2Config, GPT2LMHeadModel

        cfg = GPT2Config(vocab_size=96, n_positions=32, n_embd=64, n_layer=2, n_head=4)
        cls = GPT2LMHeadModel
    cfg._attn_implementation = attn
    return cls(cfg).eval(), cfg.vocab_size


class _RefusingBuilder:
    """A GraphBuilder whose rank session cannot be built (what a graph the pass cannot split
    would do), on one rank only."""

    def __init__(self, builder: object) -> None:
        self._b = builder

    def build_rank_session(self, *args: object, **kwargs: object) -> None:
        raise ferrite.FerriteError("injected: this rank cannot split the partition")

    def __getattr__(self, name: str) -> object:
        return getattr(self._b, name)


def _refuse_on_rank_1() -> None:
    import dataclasses

    from ferrite.pytorch import compiled

    real = compiled.import_graph

    def import_graph(*args: object, **kwargs: object) -> object:
        imp = real(*args, **kwargs)
        if dist.get_rank() == 1 and not getattr(import_graph, "done", False):
            import_graph.done = True  # the first import only: the whole-model one must build
            return dataclasses.replace(imp, builder=_RefusingBuilder(imp.builder))
        return imp

    compiled.import_graph = import_graph


def step_compile(device: str, arch: str, attn: str, refuse: bool = False) -> dict:
    if refuse:
        _refuse_on_rank_1()
    model, vocab = _transformer(arch, attn)
    on = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if device == "cuda" else "cpu"
    model = model.to(on)

    def logits(ids):
        return model(input_ids=ids, use_cache=False).logits

    ids = torch.randint(0, vocab, (2, 10), generator=torch.Generator().manual_seed(1)).to(on)
    with torch.no_grad():
        want = logits(ids)
    reports: list = []
    opts = {"device": device, "tensor_parallel": "auto", "threads": 1, "fallback": "raise"}
    torch._dynamo.reset()
    compiled = torch.compile(logits,
                             backend=functools.partial(ferrite_backend, options=opts,
                                                       _report=reports))
    import warnings

    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = compiled(ids)
    err = (got - want).abs().max().item()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)  # conftest.MODEL_TOL
    parts = [p["partition"] for _, r in reports if r is not None for p in r.partitions]
    return {"max_abs_err": err,
            "warnings": [str(w.message) for w in caught if "ferrite" in str(w.message)],
            "partitions": [{"name": p.name, "device": p.device,
                            "split": {k: v for k, v in (p.split or {}).items() if k != "lines"},
                            "unsharded": p.unsharded_reason, "eager": p._eager}
                           for p in parts]}


def step_teardown(feeds_path: str) -> dict:
    dist.destroy_process_group()
    t = time.monotonic()
    try:
        step_session.session.run(dict(np.load(feeds_path)))
    except ferrite.FerriteError as e:
        return {"raised": type(e).__name__, "message": str(e), "seconds": time.monotonic() - t}
    return {"raised": None, "seconds": time.monotonic() - t}


def main() -> None:
    out_dir, device = sys.argv[1], sys.argv[2]
    model, inputs = (sys.argv[3], sys.argv[4]) if len(sys.argv) > 4 else (None, None)
    # A rank left waiting for one that failed gives up within a minute instead of gloo's 30.
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    if device == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    result: dict = {}
    steps = [(f"compile_{arch}_{attn}", functools.partial(step_compile, device, arch, attn))
             for arch, attn in COMPILED]
    # Last, as it patches the frontend: rank 1 cannot build its shard, so every rank must run
    # the partition whole (else rank 0 would wait in collectives rank 1 never joins).
    steps.append(("compile_refused", functools.partial(step_compile, device, "gpt2", "sdpa",
                                                       refuse=True)))
    if model:
        steps.insert(0, ("session", lambda: step_session(out_dir, rank, device, model, inputs)))
        if device != "cuda":  # NCCL does not go through the process group once made
            steps.append(("teardown", lambda: step_teardown(inputs)))
    for name, step in steps:
        t = time.monotonic()
        try:
            result[name] = step()
        except Exception as e:  # recorded for the parent, which fails the test with it
            result[name] = {"error": f"{type(e).__name__}: {e}",
                            "traceback": traceback.format_exc()}
        result[name]["seconds"] = time.monotonic() - t
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(result, f, indent=1)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
