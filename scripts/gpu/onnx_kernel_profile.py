#!/usr/bin/env python3
"""GPU kernels of one ONNX serving-bench row, ferrite against torch.compile, as the GPU ran them.

    python3 scripts/gpu/onnx_kernel_profile.py CASE[,CASE...] [--shape serving] [--precision bf16]
        [--modes ferrite,inductor] [--runs 10] [--top 30]

For each case (a family of scripts/families/export_families.py, exported to ONNX as
onnx_serving_bench.py exports it) and mode, the model is built and warmed up exactly as
onnx_serving_bench.py builds it, then RUNS calls run under torch.profiler with CUDA activity only
(CUPTI): every kernel launched in the process is recorded, those inside CUDA graphs and those
ferrite launches through the driver API included. Prints per mode the kernels per call, the summed
kernel time per call, and the kernels by total time, so that ferrite and inductor can be compared
kernel by kernel at the shapes people serve (no events are added between ferrite's steps, unlike
FERRITE_LOG=profile, and ferrite's CUDA graphs stay on).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_serving_bench as osb  # noqa: E402
from cupti_kernels import kernel_table, print_sequence, print_table  # noqa: E402


def build_fn(mode, base, feeds_f32, path, precision, device):
    if mode == "ferrite":
        import ferrite

        sess = ferrite.Session(path, device=device, precision=precision)
        return lambda: sess.run(feeds_f32)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    model = base.to(device=device, dtype=dtype).eval()
    feeds = osb.cast_inputs(feeds_f32, dtype)
    fn = model if mode == "eager" else torch.compile(model, mode=osb.COMPILE_MODES[mode])
    pos = tuple(feeds.values())
    return lambda: fn(*pos)


def add_row_args(ap):
    """The options that pick a row's shape, precision and export (shared with run_case.py)."""
    ap.add_argument("--shape", default="serving", choices=sorted(osb.TOKENS))
    ap.add_argument("--precision", default="bf16", choices=["f32", "bf16"])
    ap.add_argument("--onnx-dir", default="/tmp/ferrite-onnx-serving")
    ap.add_argument("--device", default="cuda")


def parse_row_args(ap):
    """Parses the command line; TF32 off, as the serving benchmark measures f32."""
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return args


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("cases")
    ap.add_argument("--modes", default="ferrite,inductor")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--sequence", action="store_true",
                    help="also print one call's kernels in launch order (layer by layer)")
    add_row_args(ap)
    args = parse_row_args(ap)
    for name in args.cases.split(","):
        if not osb.applies(name, args.shape):
            continue
        path = osb.onnx_path(name, args.onnx_dir)
        base = osb.ef.build_module(name)
        feeds_f32 = osb.make_inputs(name, args.shape, args.device)
        with torch.no_grad():
            for mode in args.modes.split(","):
                torch._dynamo.reset()
                fn = build_fn(mode, base, feeds_f32, path, args.precision, args.device)
                timeline, sequence = {}, []
                per_name = kernel_table(fn, args.runs, timeline=timeline,
                                        sequence=sequence if args.sequence else None)
                del fn
                print()
                print_table(f"## {name} {args.shape} {args.precision} {mode}", per_name,
                            args.runs, args.top, timeline=timeline)
                if args.sequence:
                    print_sequence(sequence)
                sys.stdout.flush()
        osb.free_memory(args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
