#!/usr/bin/env python3
"""Training steps through torch.compile(backend="ferrite") against PyTorch's modes, on the lent
GPU, in one job.

    python3 scripts/gpu/train_bench.py [--json OUT.json] [--cases NAME,...] [--modes ...]

A step is what a training loop runs: `zero_grad(set_to_none=True)`, the forward and the loss
(under `torch.autocast(dtype=bfloat16)` for the -amp cases, the loss in f32), `backward()`, and
`opt.step()`. Every compiled mode compiles both the model and `opt.step` with its backend
(eager runs both as they are; Inductor's modes compile the optimizer step too, as its docs
recommend). Each mode starts from the same initial weights and optimizer. Modes: eager;
inductor (torch.compile default); inductor-cg (mode="reduce-overhead": CUDA graphs); ferrite.

Timed with CUDA events around whole steps (inputs resident, no host synchronisation inside a
step but the loss is not read back), median over --steps steps after --warmup steps. The losses
of the first three steps are compared with eager's. GPU memory is the device's free memory drop
from before the mode's first step (torch's caching allocator keeps its peak reserved, ferrite's
pools what they hold), so eager, Inductor and ferrite are measured alike, weights, gradients and
optimizer states inside it for every mode: "peak, first steps" after the warm-up steps (the
first steps compile and run partitions whole once, which a later error could still fall back
from), and "peak, a step" after the timed steps, with torch's cache emptied between the two:
what a training loop holds in its steady state. Also torch's own peak of allocated bytes over
the timed steps (ferrite's outputs and run memory are torch allocations). f32 cases run with
TF32 off on both sides.
"""
import argparse
import copy
import gc
import json
import statistics
import sys
import time

import torch

DEV = "cuda"


def resnet50(batch):
    import torchvision

    model = torchvision.models.resnet50().to(DEV)
    x = torch.randn(batch, 3, 224, 224, device=DEV)
    y = torch.randint(0, 1000, (batch,), device=DEV)

    def loss_fn(m):
        return lambda: torch.nn.functional.cross_entropy(m(x), y)

    return model, loss_fn, lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9)


def gpt2_small(batch, seq, attn="sdpa"):
    import transformers as tr

    # GPT-2 small (12 layers, width 768, 12 heads), dropout off (ferrite leaves dropout's RNG to
    # eager PyTorch, which splits the graph at every dropout; most current recipes train at 0).
    cfg = tr.GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    cfg._attn_implementation = attn
    model = tr.GPT2LMHeadModel(cfg).to(DEV)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), device=DEV)

    def loss_fn(m):
        return lambda: m(ids, labels=ids).loss

    return model, loss_fn, lambda p: torch.optim.AdamW(p, lr=1e-4)


CASES = {
    "resnet50-b32": lambda: resnet50(32),
    "gpt2-small-8x512": lambda: gpt2_small(8, 512),
    # attention as its math: trains inside ferrite (its SDPA training path is eager)
    "gpt2-small-8x512-math": lambda: gpt2_small(8, 512, "eager"),
}


def compile_with(mode):
    import torch._dynamo

    torch._dynamo.reset()
    if mode == "eager":
        return lambda f: f
    if mode == "inductor":
        return torch.compile
    if mode == "inductor-cg":
        return lambda f: torch.compile(f, mode="reduce-overhead")
    if mode == "ferrite":
        return lambda f: torch.compile(f, backend="ferrite")
    raise ValueError(mode)


def run_mode(case, base, loss_of, make_opt, mode, amp, steps, warmup):
    # What earlier modes of this process left allocated (cuBLAS workspaces, caches) is not this
    # mode's: its peak is also reported above what was allocated when it started.
    gc.collect()
    torch.cuda.synchronize()
    start_allocated = torch.cuda.memory_allocated()
    model = copy.deepcopy(base)
    opt = make_opt(model.parameters())
    comp = compile_with(mode)
    fwd = comp(loss_of(model))
    # reduce-overhead's CUDA graphs own their outputs until the next replay, and an optimizer's
    # states are made by its first step: the step is compiled in Inductor's default mode there.
    opt_step = (torch.compile if mode == "inductor-cg" else comp)(opt.step)

    def step():
        if mode == "inductor-cg":  # a new step: earlier CUDA-graph outputs may be overwritten
            torch.compiler.cudagraph_mark_step_begin()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(DEV, dtype=torch.bfloat16, enabled=amp):
            loss = fwd()
        loss.backward()
        opt_step()
        return loss

    gc.collect()
    torch.cuda.synchronize()
    free0 = torch.cuda.mem_get_info()[0]
    t0 = time.time()
    losses = [step().item()]
    first_s = time.time() - t0
    losses += [step().item() for _ in range(2)]
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    peak_all = free0 - torch.cuda.mem_get_info()[0]
    # Steady state: the first steps' transient peaks (compiles, first runs) leave torch's cache
    # reserved; emptied here, so the timed steps' own peak is what stays reserved after them.
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    torch.cuda.synchronize()
    row = {"case": case, "amp": amp, "mode": mode, "ms": statistics.median(times),
           "first_step_s": first_s, "peak_gpu_mib": peak_all / 2**20,
           "step_peak_gpu_mib": (free0 - torch.cuda.mem_get_info()[0]) / 2**20,
           "torch_peak_allocated_mib": torch.cuda.max_memory_allocated() / 2**20,
           "torch_peak_above_start_mib":
               (torch.cuda.max_memory_allocated() - start_allocated) / 2**20,
           "losses": losses}
    del model, opt, fwd, opt_step
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json")
    ap.add_argument("--cases", default="resnet50-b32,gpt2-small-8x512")
    ap.add_argument("--modes", default="eager,inductor,inductor-cg,ferrite")
    ap.add_argument("--precisions", default="f32,amp", help="f32 and/or amp (bf16 autocast)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    import ferrite  # noqa: F401  (registers the backend)

    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    rows = []
    for case in a.cases.split(","):
        for prec in a.precisions.split(","):
            torch.manual_seed(0)
            base, loss_of, make_opt = CASES[case]()
            ref = None
            for mode in a.modes.split(","):
                try:
                    row = run_mode(case, base, loss_of, make_opt, mode, prec == "amp", a.steps,
                                   a.warmup)
                    if mode == "eager":
                        ref = row["losses"]
                    if ref is not None:
                        row["loss_rel_diff"] = max(abs(x - y) / abs(y)
                                                   for x, y in zip(row["losses"], ref))
                except Exception as e:  # a mode that fails is reported, the others still run
                    row = {"case": case, "amp": prec == "amp", "mode": mode,
                           "error": f"{type(e).__name__}: {str(e)[:400]}"}
                gc.collect()
                torch.cuda.empty_cache()
                rows.append(row)
                print(json.dumps(row), flush=True)
                if a.json:
                    with open(a.json, "w") as f:
                        json.dump(rows, f, indent=1)
            del base
    print("\n| case | precision | mode | step ms | first step s | GPU MiB, a step | "
          "GPU MiB, first steps | torch allocated peak MiB (above the mode's start) | "
          "loss rel diff vs eager (3 steps) |")
    print("|---|---|---|---|---|---|---|---|---|")
    nan = float("nan")
    for r in rows:
        print(f"| {r['case']} | {'bf16 autocast' if r['amp'] else 'f32'} | {r['mode']} | "
              f"{r.get('ms', nan):.2f} | {r.get('first_step_s', nan):.1f} | "
              f"{r.get('step_peak_gpu_mib', nan):.0f} | {r.get('peak_gpu_mib', nan):.0f} | "
              f"{r.get('torch_peak_allocated_mib', nan):.0f} "
              f"({r.get('torch_peak_above_start_mib', nan):.0f}) | "
              f"{r.get('loss_rel_diff', r.get('error'))} |")


if __name__ == "__main__":
    sys.exit(main())
