"""Kernels a callable launches, as the GPU ran them: torch.profiler with CUDA activity only
(CUPTI), so kernels inside CUDA graphs and those launched through the driver API (ferrite's) are
all recorded. Shared by kernel_profile.py and onnx_kernel_profile.py."""
import time
from collections import defaultdict

import torch


def kernel_table(fn, runs, warmup=5, timeline=None, sequence=None):
    """{kernel name: [launches, microseconds]} summed over `runs` calls of fn, after `warmup`.
    With a dict `timeline`, also where the GPU's time went over the profiled calls (see
    busy_and_idle). With a list `sequence`, also the last call's kernels in the order the GPU
    started them, as (name, microseconds): the layer-by-layer view that lines two compilers'
    kernels up against each other."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(runs):
            fn()
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    per_name = defaultdict(lambda: [0, 0.0])
    spans, events = [], []
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        name = e.name
        if name.startswith("Memcpy") or name.startswith("Memset"):
            name = name.split(" ")[0]
        per_name[name][0] += 1
        per_name[name][1] += getattr(e, "device_time_total", 0.0) or e.cuda_time_total
        spans.append((e.time_range.start, e.time_range.end))
        events.append((e.time_range.start, name, e.time_range.end - e.time_range.start))
    if sequence is not None and events:
        events.sort()
        per_call = len(events) // runs
        sequence.extend((n, us) for _, n, us in events[len(events) - per_call:])
    if timeline is not None:
        timeline.update(busy_and_idle(spans, runs, wall))
    return per_name


def busy_and_idle(spans, runs, wall_s):
    """Per call: the GPU's busy time (the union of kernel intervals), the idle time between the
    first kernel and the last, and the host's wall time. Idle time far above a few hundred
    nanoseconds a kernel means gaps the launches leave (host-bound calls or launch latency)."""
    spans.sort()
    busy, end = 0.0, None
    for s, e in spans:
        if end is None or s > end:
            busy += e - s
            end = e
        elif e > end:
            busy += e - end
            end = e
    first = spans[0][0] if spans else 0.0
    last = max((e for _, e in spans), default=0.0)
    return {"busy_us": busy / runs, "idle_us": (last - first - busy) / runs,
            "wall_us": wall_s * 1e6 / runs}


def print_table(title, per_name, runs, top, width=120, timeline=None):
    """Kernels per call, summed kernel time per call, then the `top` kernels by total time."""
    total = sum(v[1] for v in per_name.values()) / runs
    count = sum(v[0] for v in per_name.values()) / runs
    print(f"{title}: {count:.0f} kernels per call, {total / 1000:.3f} ms of kernel time per call "
          f"({torch.cuda.get_device_name()})")
    if timeline:
        print(f"  per call: GPU busy {timeline['busy_us']:.1f} us, idle between kernels "
              f"{timeline['idle_us']:.1f} us, host wall {timeline['wall_us']:.1f} us")
    print(f"{'us/call':>9} {'n/call':>6}  kernel")
    for name, (n, us) in sorted(per_name.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"{us / runs:9.1f} {n / runs:6.1f}  {name[:width]}")


def print_sequence(sequence, width=100):
    """One call's kernels in launch order: index, microseconds, running total, name."""
    total = 0.0
    print(f"{'#':>4} {'us':>8} {'sum us':>9}  kernel")
    for i, (name, us) in enumerate(sequence):
        total += us
        print(f"{i:4d} {us:8.1f} {total:9.1f}  {name[:width]}")
