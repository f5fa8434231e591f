"""Tensor parallelism on a multi-GPU machine: ferrite (`Session(tensor_parallel=N)`, rank r on
cuda:r, NCCL) against PyTorch's own tensor parallelism (DTensor `parallelize_module`, one process
per GPU under torchrun), on decoder stacks with random bf16 weights.

    D=/tmp/tp/llama-7b
    python3 scripts/gpu/make_decoder_onnx.py graph llama-7b $D && \\
        python3 scripts/gpu/make_decoder_onnx.py weights $D          # the model (see there)
    python3 scripts/gpu/tp_bench.py check --config llama-tiny         # TP 2 == TP 1 == eager, cuda
    python3 scripts/gpu/tp_bench.py ferrite $D --tp 1 2 --shapes 8x512 1x128 --json out.json
    python3 scripts/gpu/tp_bench.py torch --config llama-7b --shapes 8x512 1x128
    torchrun --nproc_per_node 2 scripts/gpu/tp_bench.py torch --config llama-7b --shapes 8x512

The models are the transformers decoder stacks without their LM head (the timed output is the
last hidden state, so that its copy back to the host stays small). ferrite's times are wall
clock of `Session.run` on host arrays (token ids in, the bf16 hidden state out: its
tensor-parallel Session runs on host arrays) and device time with the inputs resident
(`Session.time_resident`: the recorded CUDA graph replayed, each sample the slowest rank's);
PyTorch's are GPU-resident forward passes with a synchronize. Medians of 10 runs after 3
warm-up runs.

A decoding step (`make_decoder_onnx.py graph --decode`, `torch --decode`): one new token per
sequence over a past of P tokens in every layer (shapes BATCHxP); ferrite's figure is device
time with the past resident, PyTorch's the step over transformers' DynamicCache on the GPU
(under DTensor, each rank's cache holds its own heads). `ferrite` also compares every TP's
outputs with the first TP's (max abs difference, on the last shape) and records each GPU's
memory in use after the Session is made.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_decoder_onnx as mk  # noqa: E402


def median_ms(fn, warmup=3, runs=10) -> float:
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def shapes(text: list[str]) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in s.split("x")) for s in text]  # type: ignore[misc]


def token_ids(config: str, b: int, s: int) -> np.ndarray:
    vocab = mk.CONFIGS[config][6]
    return np.random.default_rng(0).integers(0, vocab, size=(b, s), dtype=np.int64)


def past_arrays(config: str, b: int, p: int) -> list[np.ndarray]:
    """A decoding step's past keys and values (Decode.names order) as bf16 bits, N(0, 0.02)."""
    shape = mk.Decode.past_shape(config, b, p)
    return [mk.random_bits(int(np.prod(shape)), seed=i).reshape(shape)
            for i, _ in enumerate(mk.Decode.names(config))]


def as_bf16(bits: np.ndarray, scale: float = 50.0):
    """torch bf16 from bf16 bits, times `scale` (N(0, 0.02) bits -> about N(0, 1))."""
    return (torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16) * scale).contiguous()


def decode_feed(config: str, b: int, p: int) -> dict:
    """The decoding step's inputs: one new token per sequence and a past of length p."""
    feed = {"input_ids": torch.from_numpy(token_ids(config, b, 1))}
    for name, bits in zip(mk.Decode.names(config), past_arrays(config, b, p)):
        feed[name] = as_bf16(bits)
    return feed


def gpu_used_gib() -> list[float]:
    out = []
    for i in range(torch.cuda.device_count()):
        free, total = torch.cuda.mem_get_info(i)
        out.append(round((total - free) / 2**30, 2))
    return out


def emit(rec: dict, path: str | None) -> None:
    print("RESULT " + json.dumps(rec), flush=True)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(rec) + "\n")


def cmd_check(a) -> None:
    """A small model on cuda: ferrite TP 1 and TP N against eager PyTorch on the same weights
    (with --decode, one decoding step over a past of 9 tokens, against transformers' cache)."""
    import ferrite
    from transformers import DynamicCache
    d = f"/tmp/tp_check_{a.config}{'_decode' if a.decode else ''}"
    if not os.path.exists(os.path.join(d, "model.json")):
        mk.cmd_graph(argparse.Namespace(config=a.config, dir=d, decode=a.decode))
        mk.cmd_weights(argparse.Namespace(dir=d))
    if a.decode:
        feed = decode_feed(a.config, 2, 9)
        names = mk.Decode.names(a.config)
        m = mk.eager_model(a.config, d, "cuda", wrap=False)
        cache = DynamicCache(ddp_cache_data=[(feed[names[2 * i]].cuda(), feed[names[2 * i + 1]].cuda())
                                             for i in range(len(names) // 2)])
        with torch.no_grad():
            eager = m(input_ids=feed["input_ids"].cuda(), past_key_values=cache,
                      use_cache=True).last_hidden_state.float().cpu()
    else:
        feed = {"input_ids": torch.from_numpy(token_ids(a.config, 2, 12))}
        with torch.no_grad():
            eager = mk.eager_model(a.config, d, "cuda")(feed["input_ids"].cuda()).float().cpu()
    whole = ferrite.Session(f"{d}/model.onnx", "cuda").run(feed)[0].float()
    print(f"cuda TP 1 vs eager: max abs diff {float((whole - eager).abs().max()):.3g} "
          f"(|eager| max {float(eager.abs().max()):.3g})")
    torch.testing.assert_close(whole, eager, rtol=0.0625, atol=0.0625)  # the CLI's bf16 --check
    for tp in a.tp:
        s = ferrite.Session(f"{d}/model.onnx", "cuda", tensor_parallel=tp)
        got = s.run(feed)[0].float()
        print(f"cuda TP {tp}: {s.split_report()['summary']}")
        print(f"cuda TP {tp} vs TP 1: max abs diff {float((got - whole).abs().max()):.3g}")
        torch.testing.assert_close(got, whole, rtol=0.0625, atol=0.0625)
        t = s.time_resident(feed, runs=5)
        print(f"cuda TP {tp}: resident {1e3 * statistics.median(t['seconds']):.3f} ms "
              f"({t['method']})")
        del s
    print("check: pass")


def cmd_ferrite(a) -> None:
    import ferrite
    with open(os.path.join(a.dir, "model.json")) as f:
        meta = json.load(f)
    config, decode = meta["config"], meta.get("decode", False)
    first = None
    eager = eager32 = None
    if a.eager:  # transformers on one GPU, same weights, the last shape (a prefill graph): in
        # bf16, and in f32 as the yardstick of both bf16 results' rounding
        b, sq = shapes(a.shapes)[-1]
        ids = torch.from_numpy(token_ids(config, b, sq)).to(a.device)
        m = mk.eager_model(config, a.dir, a.device)
        with torch.no_grad():
            eager = m(ids).float().cpu()
            eager32 = m.float()(ids).cpu()
        del m
        torch.cuda.empty_cache()
        emit({"impl": "torch-eager-bf16", "config": config, "step": "prefill",
              **differences(eager, eager32, "eager_f32")}, a.json)
    for tp in a.tp:
        rec = {"impl": "ferrite", "config": config, "tp": tp, "params": meta["params"],
               "step": "decode" if decode else "prefill", "device": a.device,
               "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
               "cuda_graphs": os.environ.get("FERRITE_CUDA_GRAPHS", "1") != "0"}
        t = time.time()
        try:
            s = ferrite.Session(os.path.join(a.dir, "model.onnx"), a.device, tensor_parallel=tp)
            rec["session_s"] = round(time.time() - t, 2)
            print(f"# {config} TP {tp}: session in {rec['session_s']} s", flush=True)
            rec["split"] = s.split_report()["summary"] if tp > 1 else "whole"
            out = None
            for b, sq in shapes(a.shapes):
                # prefill: b sequences of sq tokens; decode: b sequences, one new token each,
                # over a past of sq tokens
                feed = (decode_feed(config, b, sq) if decode else
                        {"input_ids": torch.from_numpy(token_ids(config, b, sq))})
                t = time.time()
                out = s.run(feed)[0]
                rec[f"first_run_s_{b}x{sq}"] = round(time.time() - t, 2)
                print(f"# {config} TP {tp}: first run {b}x{sq} in {time.time() - t:.2f} s",
                      flush=True)
                if not decode:  # a decode step's wall clock would be its past's copies
                    ms = median_ms(lambda: s.run(feed))
                    rec[f"ms_{b}x{sq}"] = round(ms, 2)
                    rec[f"tokens_per_s_{b}x{sq}"] = round(b * sq / ms * 1e3)
                if a.device != "cpu":  # host devices do not time runs themselves
                    timing = s.time_resident(feed, runs=10)
                    rec[f"device_ms_{b}x{sq}"] = round(
                        1e3 * statistics.median(timing["seconds"]), 3)
                    rec["device_method"] = timing["method"]
            rec["gpu_used_gib"] = gpu_used_gib()  # after the runs: weights are uploaded by the first
            dm = s.stats().get("device_memory")  # rank 0's own allocator
            if dm:
                rec["rank0_peak_reserved_gib"] = round(dm["peak_reserved_bytes"] / 2**30, 2)
            out = out.float()
            if not torch.isfinite(out).all():
                rec["error"] = "non-finite outputs"
            if first is None:
                first = (tp, out)
            else:
                rec.update(differences(out, first[1], f"tp{first[0]}"))
            if eager is not None:
                rec.update(differences(out, eager, "eager"))
                rec.update(differences(out, eager32, "eager_f32"))
            del s
        except Exception as e:  # a model too large for the GPU: the error is the result
            rec["error"] = f"{type(e).__name__}: {e}"[:600]
            rec["seconds_to_error"] = round(time.time() - t, 1)
        emit(rec, a.json)
        torch.cuda.empty_cache()


def differences(out: torch.Tensor, ref: torch.Tensor, name: str) -> dict:
    """Largest and relative RMS difference of `out` from `ref` (bf16 results of 32-80 layers
    drift apart by their rounding: the RMS figure says whether that is all it is)."""
    d = out - ref
    return {f"max_abs_diff_vs_{name}": float(d.abs().max()),
            f"rel_rms_diff_vs_{name}": float(d.norm() / ref.norm()),
            f"max_abs_{name}": float(ref.abs().max())}


def build_torch(config: str, device: str):
    fam, cfg = mk.hf_config(config)
    if fam == "llama":
        from transformers import LlamaModel as cls
    else:
        from transformers import GPT2Model as cls
    torch.manual_seed(0)
    with torch.device(device):
        return cls(cfg).to(torch.bfloat16).eval()


def cmd_torch(a) -> None:
    import torch.distributed as dist
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    torch.cuda.set_device(rank)
    m = build_torch(a.config, "cuda")
    if world > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                       parallelize_module)
        if mk.CONFIGS[a.config][0] != "llama":
            raise SystemExit("DTensor tensor parallelism here is for Llama (nn.Linear) models")
        mesh = init_device_mesh("cuda", (world,))
        for layer in m.layers:
            parallelize_module(layer, mesh, {
                "self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
                "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
                "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(),
                "mlp.down_proj": RowwiseParallel()})
    impl = "torch-dtensor" if world > 1 else "torch-eager"
    run = m
    if a.compile:  # torch.compile over the (parallelized) model: Inductor, per rank
        impl = ("torch-dtensor" if world > 1 else "torch") + f"-compile-{a.compile}"
        run = torch.compile(m, mode=a.compile)
    rec = {"impl": impl, "config": a.config, "tp": world,
           "step": "decode" if a.decode else "prefill",
           "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    for b, sq in shapes(a.shapes):
        if a.decode:
            from transformers import DynamicCache
            feed = decode_feed(a.config, b, sq)
            ids = feed.pop("input_ids").cuda()
            # this rank's heads of the past (ColwiseParallel k/v projections give local heads)
            past = [v.chunk(world, dim=1)[rank].contiguous().cuda() for v in feed.values()]

            @torch.no_grad()
            def step():
                cache = DynamicCache(ddp_cache_data=[(past[2 * i], past[2 * i + 1])
                                                     for i in range(len(past) // 2)])
                run(input_ids=ids, past_key_values=cache, use_cache=True)
                torch.cuda.synchronize()
        else:
            ids = torch.from_numpy(token_ids(a.config, b, sq)).cuda()

            @torch.no_grad()
            def step():
                run(input_ids=ids, use_cache=False)
                torch.cuda.synchronize()

        t = time.time()
        step()  # compiles, where compiled
        rec[f"first_s_{b}x{sq}"] = round(time.time() - t, 1)
        ms = median_ms(step)
        rec[f"ms_{b}x{sq}"] = round(ms, 2)
        rec[f"tokens_per_s_{b}x{sq}"] = round(b * (1 if a.decode else sq) / ms * 1e3)
    if rank == 0:
        emit(rec, a.json)
    if world > 1:
        dist.destroy_process_group()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    c = sub.add_parser("check", help="a small model: ferrite on cuda at TP 1 and N vs eager")
    c.add_argument("--config", default="llama-tiny", choices=sorted(mk.CONFIGS))
    c.add_argument("--tp", type=int, nargs="+", default=[2])
    c.add_argument("--decode", action="store_true", help="a decoding step's graph")
    f = sub.add_parser("ferrite", help="time a model directory at each TP")
    f.add_argument("dir", help="made by make_decoder_onnx.py (graph + weights)")
    f.add_argument("--tp", type=int, nargs="+", default=[1, 2])
    f.add_argument("--shapes", nargs="+", default=["8x512", "1x128"],
                   help="BATCHxSEQ ... (a decoding step's graph: BATCHxPAST)")
    f.add_argument("--json", help="append one JSON line per TP here")
    f.add_argument("--device", default="cuda", help="cuda (cpu: to try the script)")
    f.add_argument("--eager", action="store_true",
                   help="also compare each TP with transformers on one GPU (the last shape)")
    t = sub.add_parser("torch", help="PyTorch eager (one process) or DTensor TP (torchrun)")
    t.add_argument("--config", required=True, choices=sorted(mk.CONFIGS))
    t.add_argument("--shapes", nargs="+", default=["8x512", "1x128"],
                   help="BATCHxSEQ ... (with --decode: BATCHxPAST)")
    t.add_argument("--decode", action="store_true",
                   help="one decoding step (one new token per sequence) over a past")
    t.add_argument("--compile", metavar="MODE",
                   help="torch.compile the model in this mode (default, reduce-overhead, ...)")
    t.add_argument("--json")
    a = p.parse_args()
    {"check": cmd_check, "ferrite": cmd_ferrite, "torch": cmd_torch}[a.what](a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
