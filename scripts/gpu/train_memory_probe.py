#!/usr/bin/env python3
"""Where a training step's GPU memory goes, phase by phase (issue 14's memory target).

    python3 scripts/gpu/train_memory_probe.py [--case resnet50-b32] [--mode ferrite|eager|inductor]

Runs three steps of scripts/gpu/train_bench.py's case and prints, after the forward, the backward
and the optimizer step of the last one: torch's allocated and reserved bytes (ferrite's lent
memory and outputs are torch allocations) and the device's free-memory drop since the start
(everything: torch's pool, ferrite's own pools, cuBLAS/cuDNN workspaces). Run it with
FERRITE_LOG=memory for ferrite's per-partition plans.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_bench as tb  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", default="resnet50-b32")
    ap.add_argument("--mode", default="ferrite")
    ap.add_argument("--amp", action="store_true", help="bf16 autocast, as train_bench's -amp rows")
    ap.add_argument("--steps", type=int, default=3, help="steps to run (the last is recorded)")
    ap.add_argument("--peak", action="store_true",
                    help="record the last step's allocations and print what is live at its peak, "
                         "by the Python function that allocated it")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    import ferrite  # noqa: F401

    torch.manual_seed(0)
    model, loss_of, make_opt = tb.CASES[a.case]()
    opt = make_opt(model.parameters())
    comp = tb.compile_with(a.mode)
    fwd, opt_step = comp(loss_of(model)), comp(opt.step)
    torch.cuda.synchronize()
    free0 = torch.cuda.mem_get_info()[0]
    gib = 2.0**30

    def show(step, what):
        torch.cuda.synchronize()
        print(f"step {step} {what:9s} allocated {torch.cuda.memory_allocated() / gib:6.3f} GiB "
              f"(peak in the phase {torch.cuda.max_memory_allocated() / gib:6.3f}), reserved "
              f"{torch.cuda.memory_reserved() / gib:6.2f} GiB, device drop "
              f"{(free0 - torch.cuda.mem_get_info()[0]) / gib:6.2f} GiB", flush=True)
        torch.cuda.reset_peak_memory_stats()

    for step in range(a.steps):
        if a.peak and step == a.steps - 1:
            torch.cuda.memory._record_memory_history(max_entries=1000000)
        opt.zero_grad(set_to_none=True)
        torch.cuda.reset_peak_memory_stats()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.amp):
            loss = fwd()
        show(step, "forward")
        loss.backward()
        show(step, "backward")
        opt_step()
        show(step, "optimizer")
    if a.peak:
        print_peak(torch.cuda.memory._snapshot())


def print_peak(snap):
    """Replays the recorded allocations and frees; prints the live bytes at the peak by the
    innermost frame of ferrite or torch that allocated them."""
    live, at_peak, cur, peak = {}, {}, 0, 0
    events = [e for t in snap["device_traces"] for e in t]
    timeline = []
    for ev in events:
        if ev["action"] == "alloc":
            frames = ev.get("frames") or []
            where = next((f"{f['filename'].split('/')[-1]}:{f['name']}" for f in frames
                          if "ferrite" in f["filename"] or "train_bench" in f["filename"]),
                         frames[0]["name"] if frames else "?")
            live[ev["addr"]] = (ev["size"], where)
            cur += ev["size"]
            if cur > peak:
                peak, at_peak = cur, dict(live)
        elif ev["action"] in ("free_requested",) and ev["addr"] in live:
            cur -= live.pop(ev["addr"])[0]
        else:
            continue
        by_now = {}
        for size, where in live.values():
            by_now[where] = by_now.get(where, 0) + size
        timeline.append((ev["action"], ev["size"], by_now))
    by = {}
    for size, where in at_peak.values():
        by[where] = by.get(where, 0) + size
    print(f"peak of the recorded step: {peak / 2**30:.2f} GiB above the start")
    step = max(1, len(timeline) // 40)
    for i in range(0, len(timeline), step):
        action, size, by_now = timeline[i]
        top = ", ".join(f"{w.split(':')[-1]} {b / 2**30:.2f}" for w, b in
                        sorted(by_now.items(), key=lambda x: -x[1])[:3])
        print(f"  event {i:6d} {action:14s} {size / 2**20:9.1f} MiB | live GiB: {top}")
    for where, size in sorted(by.items(), key=lambda x: -x[1])[:12]:
        print(f"  {size / 2**30:7.3f} GiB  {where}")


if __name__ == "__main__":
    main()
