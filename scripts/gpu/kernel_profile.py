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

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cupti_kernels import kernel_table, print_table  # noqa: E402
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
        per_name = kernel_table(lambda: fn(*args), runs, warmup=20)
    print_table(f"{case} {mode}", per_name, runs, top=40, width=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
