#!/usr/bin/env python3
"""GPU kernels of one torch_backends.py case in one mode, as the GPU ran them (CUPTI).

    python3 scripts/gpu/kernel_profile.py CASE MODE [RUNS]

MODE is one of torch_backends.py's modes (eager, inductor, inductor-cg, inductor-at, ferrite).
The case is compiled and warmed up, then RUNS forwards (default 10) run under torch.profiler
with CUDA activity only: every kernel launched in the process is recorded, including those
inside CUDA graphs and those ferrite launches through the driver API. Prints kernels per
forward, the summed kernel time per forward, and the kernels by total time, so that two modes
can be compared kernel by kernel (unlike FERRITE_LOG=profile, no events are added between steps
and CUDA graphs stay on).
"""
import os
import sys
from collections import defaultdict

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_backends import CASES, compiled  # noqa: E402


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in CASES:
        print(__doc__, "\ncases:", ", ".join(CASES), file=sys.stderr)
        return 2
    case, mode = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    torch.manual_seed(0)
    model, args = CASES[case]()
    with torch.no_grad():
        fn = compiled(model, mode)
        for _ in range(20):
            fn(*args)
        torch.cuda.synchronize()
        acts = [torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(runs):
                fn(*args)
            torch.cuda.synchronize()
    per_name = defaultdict(lambda: [0, 0.0])
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        name = e.name
        if name.startswith("Memcpy") or name.startswith("Memset"):
            name = name.split(" ")[0]
        per_name[name][0] += 1
        per_name[name][1] += e.device_time_total if hasattr(e, "device_time_total") else \
            e.cuda_time_total
    total_us = sum(v[1] for v in per_name.values()) / runs
    count = sum(v[0] for v in per_name.values()) / runs
    print(f"{case} {mode}: {count:.0f} kernels per forward, {total_us / 1000:.3f} ms of kernel "
          f"time per forward ({torch.cuda.get_device_name()})")
    print(f"{'us/fwd':>9} {'n/fwd':>6}  kernel")
    for name, (n, us) in sorted(per_name.items(), key=lambda kv: -kv[1][1])[:40]:
        print(f"{us / runs:9.1f} {n / runs:6.1f}  {name[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
