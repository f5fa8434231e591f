#!/usr/bin/env python3
"""Where a training step's time goes: one case of train_bench.py in one mode, a few steps, then
one step under torch.profiler (host and CUDA activity), its top ops printed.

    FERRITE_LOG=fallback python3 scripts/gpu/train_profile.py resnet50-b32 [ferrite] [--amp]
        [--loop SECONDS]

--loop runs steps for SECONDS after the warm-up instead (no torch.profiler) inside
`timed_loop`, for a sampling profiler: `py-spy record --native --format raw -o OUT -- python3
...`, then keep the stacks through `timed_loop` (the compile is outside it).
"""
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import train_bench as tb  # noqa: E402


def main():
    case = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 and not sys.argv[2].startswith("--") else "ferrite"
    amp = "--amp" in sys.argv
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    import ferrite  # noqa: F401

    torch.manual_seed(0)
    base, loss_of, make_opt = tb.CASES[case]()
    model = base
    opt = make_opt(model.parameters())
    comp = tb.compile_with(mode)
    fwd, opt_step = comp(loss_of(model)), comp(opt.step)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = fwd()
        loss.backward()
        opt_step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    if "--loop" in sys.argv:
        timed_loop(step, float(sys.argv[sys.argv.index("--loop") + 1]))
        return
    print("=== profiled step", flush=True)
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        step()
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=30, max_name_column_width=70))
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=70))


def timed_loop(step, seconds):
    import time

    t0, n = time.time(), 0
    while time.time() - t0 < seconds:
        step()
        torch.cuda.synchronize()
        n += 1
    print(f"=== {n} steps, {(time.time() - t0) / n * 1e3:.2f} ms a step (synchronized)", flush=True)


if __name__ == "__main__":
    main()
