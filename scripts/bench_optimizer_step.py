"""A torch.compile(backend="ferrite")d optimizer step over a model with many parameter tensors:
copies into the parameters outside ferrite (aten::copy_ in the profiler), ferrite's generated
kernels per step (the fusion plans), and the step's time.

  nice -n 10 .venv/bin/python scripts/bench_optimizer_step.py [--opt adam|adamw|sgd] [--foreach]
"""

from __future__ import annotations

import argparse
import functools
import re
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.nn as nn

from ferrite.pytorch.backend import ferrite_backend


def model(layers: int, width: int) -> nn.Module:
    # Widths vary so that parameters have many different shapes (2 tensors per layer).
    dims = [width + 8 * (i % 5) for i in range(layers + 1)]
    return nn.Sequential(*[nn.Linear(dims[i], dims[i + 1]) for i in range(layers)])


def make_opt(name: str, params, foreach: bool):
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-3, foreach=foreach)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, foreach=foreach)
    return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=foreach)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--opt", default="adam", choices=["adam", "adamw", "sgd"])
    ap.add_argument("--foreach", action="store_true")
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=0, help="ferrite's threads (0: default)")
    a = ap.parse_args()
    torch.manual_seed(0)
    m = model(a.layers, a.width)
    params = list(m.parameters())
    opt = make_opt(a.opt, params, a.foreach)
    m(torch.randn(8, a.width)).sum().backward()
    dump = tempfile.mkdtemp()
    reports = []
    backend = functools.partial(ferrite_backend, _report=reports,
                                options={"device": "cpu", "fallback": "raise", "dump_dir": dump,
                                         "threads": a.threads})
    step = torch.compile(opt.step, backend=backend)
    ptrs = [p.data_ptr() for p in params]
    step()
    step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
    copies = [e for e in prof.events() if e.name == "aten::copy_"]
    # Top-level copies only (a copy_ may call itself through a dispatch key).
    top = [e for e in copies if e.cpu_parent is None or e.cpu_parent.name != "aten::copy_"]
    kernels = 0
    for plan in Path(dump).glob("*/fusion_plan.txt"):
        found = re.search(r"-> (\d+) generated kernels", plan.read_text())
        kernels += int(found.group(1)) if found else 0
    # CPU time as well: on a shared host the wall time mostly measures the other processes.
    times, cpu = [], []
    for _ in range(a.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    parts = [p for _, r in reports if r is not None for p in r.partitions]
    eager_ops = sum(e["count"] for _, r in reports if r is not None for e in r.eager_ops.values())
    nbytes = sum(p.numel() * p.element_size() for p in params)
    print(f"{a.opt}{' foreach' if a.foreach else ''}: {len(params)} parameter tensors "
          f"({len({tuple(p.shape) for p in params})} shapes, {nbytes / 2**20:.2f} MiB), "
          f"{len(parts)} ferrite partition(s), {eager_ops} eager op(s)")
    print(f"  aten::copy_ per step (outside ferrite): {len(top)}")
    print(f"  ferrite generated kernels per step (fusion plans): {kernels}")
    for p in parts:
        cp = p["partition"]
        if hasattr(cp, "write_stats"):
            print(f"  {p['name']}: {len(cp.writes)} writes into inputs; Session, last run: "
                  f"{cp.write_stats()}")
    print(f"  parameters kept their storage: {ptrs == [p.data_ptr() for p in params]}")
    print(f"  step time: median {statistics.median(times) * 1e3:.2f} ms, "
          f"min {min(times) * 1e3:.2f} ms over {a.steps} steps; process CPU time median "
          f"{statistics.median(cpu) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
