#!/usr/bin/env python3
"""Runs one ONNX serving-bench row CALLS times in one mode, for an outside profiler.

    ncu -k regex:NAME --launch-skip K --launch-count 1 python3 scripts/gpu/run_case.py \\
        distilbert ferrite [--shape serving] [--precision bf16] [--calls 20]

The model, its inputs and the mode are built as onnx_kernel_profile.py builds them (the ONNX
export and its cache are onnx_serving_bench.py's), then called CALLS times after a warm-up of
3 calls (ferrite records its CUDA graph on the second), so that a kernel profiler such as Nsight
Compute or Nsight Systems sees the steady state of exactly the row that was timed.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_kernel_profile as okp  # noqa: E402
import onnx_serving_bench as osb  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("case")
    ap.add_argument("mode", help="ferrite, eager, inductor, inductor-cg, ...")
    ap.add_argument("--calls", type=int, default=20)
    okp.add_row_args(ap)
    args = okp.parse_row_args(ap)
    if not osb.applies(args.case, args.shape):
        sys.exit(f"{args.case} has no {args.shape} shape")
    path = osb.onnx_path(args.case, args.onnx_dir)
    base = osb.ef.build_module(args.case)
    feeds = osb.make_inputs(args.case, args.shape, args.device)
    with torch.no_grad():
        fn = okp.build_fn(args.mode, base, feeds, path, args.precision, args.device)
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        for _ in range(args.calls):
            fn()
        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
