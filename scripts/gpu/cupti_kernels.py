"""Kernels a callable launches, as the GPU ran them: torch.profiler with CUDA activity only
(CUPTI), so kernels inside CUDA graphs and those launched through the driver API (ferrite's) are
all recorded. Shared by kernel_profile.py and onnx_kernel_profile.py."""
from collections import defaultdict

import torch


def kernel_table(fn, runs, warmup=5):
    """{kernel name: [launches, microseconds]} summed over `runs` calls of fn, after `warmup`."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            fn()
        torch.cuda.synchronize()
    per_name = defaultdict(lambda: [0, 0.0])
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        name = e.name
        if name.startswith("Memcpy") or name.startswith("Memset"):
            name = name.split(" ")[0]
        per_name[name][0] += 1
        per_name[name][1] += getattr(e, "device_time_total", 0.0) or e.cuda_time_total
    return per_name


def print_table(title, per_name, runs, top, width=120):
    """Kernels per call, summed kernel time per call, then the `top` kernels by total time."""
    total = sum(v[1] for v in per_name.values()) / runs
    count = sum(v[0] for v in per_name.values()) / runs
    print(f"{title}: {count:.0f} kernels per call, {total / 1000:.3f} ms of kernel time per call "
          f"({torch.cuda.get_device_name()})")
    print(f"{'us/call':>9} {'n/call':>6}  kernel")
    for name, (n, us) in sorted(per_name.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"{us / runs:9.1f} {n / runs:6.1f}  {name[:width]}")
