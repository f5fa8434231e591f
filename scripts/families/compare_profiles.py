#!/usr/bin/env python3
"""Per-convolution times of ferrite's cpu device against ONNX Runtime's, on one model (issue 15:
which layers lose, and by how much).

    .venv/bin/python scripts/families/compare_profiles.py MODEL.onnx INPUT_DIR [--threads 1]
        [--runs 30]

ferrite: `ferrite run --trace` over --runs runs (the first dropped), each step's time summed per
ONNX node. ORT (CPU EP, ORT_ENABLE_ALL, same intra-op threads): its profiler, per node. The two
name nodes differently after fusion, so convolutions are matched by what they compute: output
shape, kernel size, stride and group count (equal signatures are summed on both sides). Prints
one row per signature, slowest ratio first, and the totals by op type.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _conv_signatures(model_path):
    """ONNX node name -> (output dims, kernel, stride, group) for each Conv of the model."""
    import onnx
    from onnx import helper, shape_inference

    m = shape_inference.infer_shapes(onnx.load(model_path))
    dims = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in list(m.graph.value_info) + list(m.graph.output)}
    inits = {i.name: list(i.dims) for i in m.graph.initializer}
    sig = {}
    for n in m.graph.node:
        if n.op_type != "Conv":
            continue
        a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
        w = inits.get(n.input[1], [])
        out = dims.get(n.output[0], [])
        out = [1 if d == 0 else d for d in out[:1]] + out[1:]
        sig[n.name] = (tuple(out), tuple(w[2:]), tuple(a.get("strides", [1, 1])), a.get("group", 1))
    return sig


def _ferrite_times(model, inputs, threads, runs):
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "trace.json")
        cmd = [os.path.join(ROOT, "build/bin/ferrite"), "run", model, "--device", "cpu",
               "--threads", str(threads), "--trace", trace, "--output-dir", os.path.join(d, "out")]
        for _ in range(runs):
            cmd += ["--inputs", inputs]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(trace) as f:
            ev = json.load(f)
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    # Steps of every run but the first (which pays one-time work).
    steps = [e for e in ev if e.get("ph") == "X" and (e.get("args") or {}).get("run", 0) > 0]
    runs_seen = max(1, len({e["args"]["run"] for e in steps}))
    per_node = collections.Counter()
    kind = {}
    for e in steps:
        names = e["args"].get("nodes") or [e.get("name", "")]
        for nm in names:
            per_node[nm] += e["dur"] / len(names)
            kind[nm] = e.get("cat", "")
    return {k: v / runs_seen / 1000 for k, v in per_node.items()}, kind


def _ort_times(model, inputs, threads, runs):
    import numpy as np  # noqa: F401
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    feeds = {}
    for i, p in enumerate(sorted(glob.glob(os.path.join(inputs, "input_*.pb")))):
        t = onnx.TensorProto()
        with open(p, "rb") as f:
            t.ParseFromString(f.read())
        feeds[s.get_inputs()[i].name] = numpy_helper.to_array(t)
    for _ in range(runs):
        s.run(None, feeds)
    with open(s.end_profiling()) as f:
        ev = json.load(f)
    by_sig, by_op = collections.Counter(), collections.Counter()
    for e in ev:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        a = e["args"]
        by_op[a["op_name"]] += e["dur"]
        if a["op_name"] == "Conv":
            out = tuple(next(iter(a["output_type_shape"][0].values())))
            w = next(iter(a["input_type_shape"][1].values())) if len(a["input_type_shape"]) > 1 else []
            by_sig[(out, tuple(w[2:]))] += e["dur"]
    scale = 1 / runs / 1000
    return {k: v * scale for k, v in by_sig.items()}, {k: v * scale for k, v in by_op.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("inputs")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=30)
    a = ap.parse_args()
    sig = _conv_signatures(a.model)
    fer, kind = _ferrite_times(a.model, a.inputs, a.threads, a.runs)
    ort_sig, ort_op = _ort_times(a.model, a.inputs, a.threads, a.runs)
    # ORT's NCHWc convolutions report padded channel counts in their shapes: match on the
    # output's spatial dims and the kernel, with the channels as reported by each.
    rows = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for name, t in fer.items():
        base = name.split("_fused")[0]
        if base in sig:
            out, k, stride, group = sig[base]
            key = (out[2:], out[1], k, stride, group)
            rows[key][0] += t
            rows[key][2] += 1
    ort_by_spatial = collections.defaultdict(list)
    for (out, k), t in ort_sig.items():
        ort_by_spatial[(tuple(out[2:]), k)].append((out[1], t))
    for key, r in rows.items():
        spatial, ch, k, _, _ = key
        cands = ort_by_spatial.get((spatial, k), [])
        best = min(cands, key=lambda c: abs(c[0] - ch), default=None)
        if best is not None and abs(best[0] - ch) < 16:
            r[1] = best[1]
    print(f"| out HxW | out C | kernel | stride | groups | convs | ferrite ms | ORT ms | ORT/ferrite |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key, (f, o, n) in sorted(rows.items(), key=lambda kv: (kv[1][1] or 1e9) / kv[1][0]):
        spatial, ch, k, stride, group = key
        ratio = f"{o / f:.2f}x" if o else "-"
        print(f"| {'x'.join(map(str, spatial))} | {ch} | {'x'.join(map(str, k))} | "
              f"{'x'.join(map(str, stride))} | {group} | {n} | {f:.3f} | {o:.3f} | {ratio} |")
    print(f"\nferrite total {sum(fer.values()):.3f} ms; ORT by op: " +
          ", ".join(f"{k} {v:.3f}" for k, v in sorted(ort_op.items(), key=lambda kv: -kv[1])))


if __name__ == "__main__":
    sys.exit(main())
