#!/usr/bin/env python3
"""Per-step device profile of one torch_backends.py case compiled with backend="ferrite".

    FERRITE_LOG=profile python3 scripts/gpu/torch_profile.py CASE [RUNS]

Builds the case (same models and shapes as torch_backends.py), runs it RUNS times (default 20)
through torch.compile(backend="ferrite"), then drops the compiled function so that every ferrite
model prints its per-step profile (CUDA events around each step; FERRITE_LOG=profile turns
CUDA graphs off) to stderr. Also prints the partition report of ferrite.explain.
"""
import gc
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_backends import CASES  # noqa: E402


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in CASES:
        print(__doc__, "\ncases:", ", ".join(CASES), file=sys.stderr)
        return 2
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    import ferrite

    torch.manual_seed(0)
    model, args = CASES[sys.argv[1]]()
    with torch.no_grad():
        print(ferrite.explain(model, *args), flush=True)
        fn = torch.compile(model, backend="ferrite")
        for _ in range(runs):
            fn(*args)
        torch.cuda.synchronize()
    del fn
    torch._dynamo.reset()
    gc.collect()
    return 0


if __name__ == "__main__":
    sys.exit(main())
