#!/usr/bin/env python3
"""Throughput and latency of one ferrite Session called from several threads at once.

For each model and precision, threads (1, 2, 4, 8 by default) call ``Session.run`` on host inputs
in a loop for a fixed time, first on a session with one execution context (every run takes its
turn: ferrite before streams per context) and then on one with the device's default (cuda: 4
contexts, each on a stream of its own over shared weights). Every output is checked against a
single-threaded run. Prints a table and writes JSON lines.

    python3 scripts/gpu/concurrency_bench.py --models-dir /tmp/models \\
        --models resnet18,mobilenet_v2,bert_base,gpt2 --precisions f32,bf16 --out bench.jsonl

A model directory holds ``model.onnx`` and ``test_data_set_0/input_*.pb`` (the zoo's layout,
``ferrite-materialize``); the inputs are read with the ``onnx`` package.
"""
import argparse
import glob
import json
import os
import threading
import time

import numpy as np


def load_inputs(model_dir):
    import onnx
    from onnx import numpy_helper

    model = onnx.load(os.path.join(model_dir, "model.onnx"), load_external_data=False)
    names = [i.name for i in model.graph.input]
    arrays = []
    for path in sorted(glob.glob(os.path.join(model_dir, "test_data_set_0", "input_*.pb"))):
        t = onnx.TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        arrays.append(numpy_helper.to_array(t))
    return dict(zip(names, arrays))


def measure(session, inputs, threads, seconds, expected, tol):
    """Runs `threads` loops for `seconds`; returns runs/s, latency percentiles, worst error."""
    # Each thread's first runs compile nothing but prepare its context (step by step, then
    # recorded): warm every context up at once before the timed part.
    barrier = threading.Barrier(threads + 1)
    lat = [[] for _ in range(threads)]
    worst = [0.0] * threads
    errors = []
    stop_at = [0.0]

    def loop(k):
        try:
            for _ in range(3):
                session.run(inputs)
            barrier.wait()
            barrier.wait()
            while True:
                t0 = time.perf_counter()
                out = session.run(inputs)
                t1 = time.perf_counter()
                lat[k].append(t1 - t0)
                d = max(float(np.max(np.abs(np.asarray(o, dtype=np.float64) -
                                            np.asarray(e, dtype=np.float64)))) if o.size else 0.0
                        for o, e in zip(out, expected))
                worst[k] = max(worst[k], d)
                if t1 >= stop_at[0]:
                    break
        except Exception as e:  # noqa: BLE001 - reported in the row
            errors.append(repr(e))
            try:
                barrier.abort()
            except Exception:  # noqa: BLE001
                pass

    ts = [threading.Thread(target=loop, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    try:
        barrier.wait()  # all warmed up
        start = time.perf_counter()
        stop_at[0] = start + seconds
        barrier.wait()
    except threading.BrokenBarrierError:
        start = time.perf_counter()
    for t in ts:
        t.join()
    elapsed = time.perf_counter() - start
    all_lat = np.array([x for xs in lat for x in xs]) if any(lat) else np.array([0.0])
    return {
        "runs": int(sum(len(x) for x in lat)),
        "runs_per_s": sum(len(x) for x in lat) / elapsed,
        "p50_ms": float(np.percentile(all_lat, 50) * 1e3),
        "p99_ms": float(np.percentile(all_lat, 99) * 1e3),
        "max_abs_diff": max(worst),
        "ok": not errors and max(worst) <= tol,
        "error": errors[0] if errors else None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--models", default="resnet18,mobilenet_v2,bert_base,gpt2")
    ap.add_argument("--precisions", default="f32,bf16")
    ap.add_argument("--threads", default="1,2,4,8")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import ferrite

    rows = []
    for name in args.models.split(","):
        inputs = load_inputs(os.path.join(args.models_dir, name))
        path = os.path.join(args.models_dir, name, "model.onnx")
        for precision in args.precisions.split(","):
            ref = ferrite.Session(path, args.device, precision=precision, contexts=1)
            expected = [np.asarray(o) for o in ref.run(inputs)]
            # Other batch compositions are not involved: the same inputs give the same kernels,
            # so contexts agree closely; bf16 leaves room for its rounding of other algorithms.
            tol = 1e-4 if precision == "f32" else 5e-2
            for contexts in (1, 0):
                s = ferrite.Session(path, args.device, precision=precision, contexts=contexts)
                for n in (int(x) for x in args.threads.split(",")):
                    r = measure(s, inputs, n, args.seconds, expected, tol)
                    r.update(model=name, precision=precision, threads=n,
                             contexts=contexts or "default", device=args.device)
                    rows.append(r)
                    print(f"{name:14s} {precision:5s} contexts={str(r['contexts']):8s} threads={n}: "
                          f"{r['runs_per_s']:9.1f} runs/s  p50 {r['p50_ms']:7.3f} ms  "
                          f"p99 {r['p99_ms']:7.3f} ms  max|diff| {r['max_abs_diff']:.2e}"
                          f"{'' if r['ok'] else '  FAIL ' + str(r['error'])}", flush=True)
                del s
            del ref
    if args.out:
        with open(args.out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    # Speed-up of the default contexts over one context, per model/precision/threads.
    print("\nmodel          prec   threads  1 context runs/s  default runs/s  speed-up")
    by = {(r["model"], r["precision"], r["threads"], r["contexts"]): r for r in rows}
    for (m, p, n, c), r in by.items():
        if c != 1 or (m, p, n, "default") not in by:
            continue
        d = by[(m, p, n, "default")]
        print(f"{m:14s} {p:5s} {n:8d} {r['runs_per_s']:17.1f} {d['runs_per_s']:15.1f} "
              f"{d['runs_per_s'] / r['runs_per_s']:9.2f}x")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
