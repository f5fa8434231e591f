"""Tensor parallelism on a multi-GPU machine: ferrite (`Session(tensor_parallel=N)`, rank r on
cuda:r, NCCL) against PyTorch's own tensor parallelism (DTensor `parallelize_module`, one process
per GPU under torchrun) on a Llama-architecture decoder with random weights.

    python3 scripts/gpu/tp_bench.py check  [--config tiny]            # outputs: TP 2 == TP 1 == eager
    python3 scripts/gpu/tp_bench.py ferrite --config 1b --tp 1 2 --batch 8 --seq 512
    torchrun --nproc_per_node 2 scripts/gpu/tp_bench.py torch --config 1b --batch 8 --seq 512

The model is LlamaModel (the decoder stack without the LM head: the timed output is the last
hidden state, so that the result's copy back to the host stays small), bf16 weights and
activations on both sides (ferrite: `precision="bf16"`). Times are medians of wall-clock runs
after warm-up; ferrite's include copying the token ids in and the hidden state out (its
tensor-parallel Session runs on host arrays), PyTorch's do not (its tensors stay on the GPU).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch

CONFIGS = {
    # name: (hidden, layers, heads, kv heads, intermediate, vocab)
    "tiny": (64, 2, 8, 4, 128, 96),
    "1b": (2048, 16, 32, 8, 5632, 32000),
    "3b": (3072, 26, 24, 8, 8192, 32000),
}


def build(config: str):
    from transformers import LlamaConfig, LlamaModel

    h, layers, heads, kv, inter, vocab = CONFIGS[config]
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=h, intermediate_size=inter,
                      num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=kv, max_position_embeddings=4096)
    cfg._attn_implementation = "eager"
    return LlamaModel(cfg).eval()


class Hidden(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids):
        return self.m(input_ids=ids, use_cache=False).last_hidden_state


def export(config: str, path: str) -> str:
    if os.path.exists(path):
        return path
    m = Hidden(build(config))
    ids = torch.randint(0, CONFIGS[config][5], (2, 16))
    dims = {0: torch.export.Dim("batch", max=64), 1: torch.export.Dim("seq", max=4096)}
    t = time.time()
    torch.onnx.export(m, (ids,), path, input_names=["input_ids"], output_names=["hidden"],
                      dynamic_shapes=(dims,), opset_version=18, dynamo=True, external_data=True)
    print(f"exported {config} in {time.time() - t:.1f} s", flush=True)
    return path


def median_ms(fn, warmup=3, runs=10) -> float:
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def cmd_check(a):
    import ferrite

    path = export(a.config, f"/tmp/tp_{a.config}.onnx")
    ids = np.random.default_rng(0).integers(0, CONFIGS[a.config][5], size=(2, 12), dtype=np.int64)
    with torch.no_grad():
        eager = Hidden(build(a.config))(torch.from_numpy(ids)).numpy()
    whole = ferrite.Session(path, "cuda").run({"input_ids": ids})[0]
    print("cuda TP 1 vs eager: max abs diff", float(np.abs(whole - eager).max()))
    for tp in a.tp:
        s = ferrite.Session(path, "cuda", tensor_parallel=tp)
        got = s.run({"input_ids": ids})[0]
        print(f"cuda TP {tp}: {s.split_report()['summary']}")
        print(f"cuda TP {tp} vs TP 1: max abs diff {float(np.abs(got - whole).max()):.3g}")
        np.testing.assert_allclose(got, whole, rtol=1e-4, atol=1e-4)
    print("check: pass")


def cmd_ferrite(a):
    import ferrite

    path = export(a.config, f"/tmp/tp_{a.config}.onnx")
    ids = np.random.default_rng(0).integers(0, CONFIGS[a.config][5], size=(a.batch, a.seq),
                                            dtype=np.int64)
    for tp in a.tp:
        t = time.time()
        s = ferrite.Session(path, "cuda", precision="bf16", tensor_parallel=tp)
        s.run({"input_ids": ids})
        ready = time.time() - t
        ms = median_ms(lambda: s.run({"input_ids": ids}))
        tok = a.batch * a.seq / ms * 1e3
        print(f"RESULT ferrite {a.config} tp={tp} {a.batch}x{a.seq} bf16: {ms:.2f} ms "
              f"({tok:,.0f} tokens/s), load+compile+first run {ready:.1f} s", flush=True)
        del s


def cmd_torch(a):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    torch.cuda.set_device(rank)
    m = build(a.config).to(torch.bfloat16).cuda()
    if world > 1:
        mesh = init_device_mesh("cuda", (world,))
        for layer in m.layers:
            parallelize_module(layer, mesh, {
                "self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
                "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
                "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(),
                "mlp.down_proj": RowwiseParallel()})
    ids = torch.randint(0, CONFIGS[a.config][5], (a.batch, a.seq), device="cuda")

    @torch.no_grad()
    def step():
        m(input_ids=ids, use_cache=False)
        torch.cuda.synchronize()

    ms = median_ms(step)
    if rank == 0:
        tok = a.batch * a.seq / ms * 1e3
        print(f"RESULT torch-eager {a.config} tp={world} {a.batch}x{a.seq} bf16: {ms:.2f} ms "
              f"({tok:,.0f} tokens/s)", flush=True)
    if world > 1:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("what", choices=["check", "ferrite", "torch"])
    p.add_argument("--config", default="tiny", choices=sorted(CONFIGS))
    p.add_argument("--tp", type=int, nargs="+", default=[2])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    a = p.parse_args()
    {"check": cmd_check, "ferrite": cmd_ferrite, "torch": cmd_torch}[a.what](a)


if __name__ == "__main__":
    sys.exit(main())
