#!/usr/bin/env python3
"""ferrite against ONNX Runtime on the zoo and the architecture-family set (issue 15's table).

    .venv/bin/python scripts/families/bench_families.py [--device cpu] [--threads 1,2]
        [--shapes b1,b2] [--models NAME,...] [--min-seconds S] [--out DIR] [--families-dir DIR]

For every model x input shape x thread count it runs `ferrite bench --compare onnxruntime`: one
ferrite process and one ONNX Runtime child (CPU EP, ORT_ENABLE_ALL, intra-op threads = ferrite's
threads), timed in alternating blocks in the same process pair, outputs compared in the same run.
It prints a markdown table (medians, ratio ORT/ferrite, max abs diff) and the geomean ratio per
group (zoo, families) and thread count.

Models:
  zoo       the six shared models (../shared/models, materialized into build/models); shape b2 is
            their own test_data_set_0 (the zoo's batch), b1 its first row
  families  scripts/families/export_families.py's set, exported into --families-dir (default
            build/families) on first use: b1 = batch 1, b2 = the zoo's batch (2 images, 2x64 tokens)

Per-run JSON goes to --out (default build/bench-families). Long: about 20 s per row; the whole
set at 1 and 2 threads takes ~25 minutes on 2 cores. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZOO = ["mlp", "convnet", "resnet18", "mobilenet_v2", "bert_base", "gpt2"]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _zoo_inputs(name, key, models_dir):
    """b2: the zoo's own inputs; b1: their first row (written once beside them)."""
    d = os.path.join(models_dir, name)
    if not os.path.exists(os.path.join(d, "model.onnx")):
        os.makedirs(d, exist_ok=True)
        subprocess.run([os.path.join(ROOT, "build/bin/ferrite-materialize"),
                        os.path.join(ROOT, "..", "shared", "models", name), d], check=True,
                       stdout=sys.stderr)
    src = os.path.join(d, "test_data_set_0")
    if key == "b2":
        return os.path.join(d, "model.onnx"), src
    dst = os.path.join(d, "b1")
    if not os.path.isdir(dst):
        import onnx
        from onnx import numpy_helper

        os.makedirs(dst)
        for p in sorted(glob.glob(os.path.join(src, "input_*.pb"))):
            t = onnx.TensorProto()
            with open(p, "rb") as f:
                t.ParseFromString(f.read())
            a = numpy_helper.to_array(t)[:1]
            with open(os.path.join(dst, os.path.basename(p)), "wb") as f:
                f.write(numpy_helper.from_array(a, t.name).SerializeToString())
    return os.path.join(d, "model.onnx"), dst


def _family_inputs(name, key, fam_dir):
    path = os.path.join(fam_dir, name, "model.onnx")
    if not os.path.exists(path):
        import export_families

        export_families.export(name, fam_dir)
    return path, os.path.join(fam_dir, name, key)


def _geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main():
    import export_families

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--shapes", default="b1,b2")
    ap.add_argument("--models", help="comma-separated (default: the zoo and every family)")
    ap.add_argument("--min-seconds", default="2")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench-families"))
    ap.add_argument("--families-dir", default=os.path.join(ROOT, "build", "families"))
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "build", "models"))
    ap.add_argument("--ferrite", default=os.environ.get("FERRITE", os.path.join(ROOT, "build/bin/ferrite")))
    args = ap.parse_args()
    names = args.models.split(",") if args.models else ZOO + list(export_families.FAMILIES)
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for name in names:
        group = "zoo" if name in ZOO else "families"
        for key in args.shapes.split(","):
            if group == "zoo":
                model, inputs = _zoo_inputs(name, key, args.models_dir)
            else:
                model, inputs = _family_inputs(name, key, args.families_dir)
            for t in args.threads.split(","):
                js = os.path.join(args.out, f"{name}-{key}-{args.device}-t{t}.json")
                cmd = [args.ferrite, "bench", model, "--inputs", inputs, "--device", args.device,
                       "--threads", t, "--min-seconds", args.min_seconds, "--warmup", "3",
                       "--compare", "onnxruntime", "--json", js, "--quiet"]
                print(f"== {name} {key} threads {t}", file=sys.stderr, flush=True)
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                if r.returncode != 0:
                    err = (r.stderr.strip().splitlines() or ["?"])[-1]
                    print(f"   FAILED: {err}", file=sys.stderr)
                    rows.append((group, name, key, t, None, err))
                    continue
                with open(js) as f:
                    j = json.load(f)
                print(f"   ferrite {j['ferrite']['median_ms']:.2f} ms, ort "
                      f"{j['onnxruntime']['median_ms']:.2f} ms, ratio "
                      f"{j['ratio_ort_over_ferrite']:.2f}x", file=sys.stderr, flush=True)
                rows.append((group, name, key, t, j, None))
    print("| group | model | inputs | threads | ferrite median (ms) | ORT median (ms) | "
          "ratio ORT/ferrite | max abs diff |")
    print("|---|---|---|---|---|---|---|---|")
    for group, name, key, t, j, err in rows:
        if j is None:
            print(f"| {group} | {name} | {key} | {t} | failed: {err} | | | |")
            continue
        ins = ", ".join(i["type"] for i in j["inputs"])
        diff = format(j["outputs"]["max_abs_diff"], ".2g")
        if not j["outputs"]["match"]:
            diff += " (MISMATCH)"
        print(f"| {group} | {name} | {ins} | {t} | {j['ferrite']['median_ms']:.2f} | "
              f"{j['onnxruntime']['median_ms']:.2f} | {j['ratio_ort_over_ferrite']:.2f}x | {diff} |")
    print()
    print("| group | threads | models | geomean ratio ORT/ferrite | min |")
    print("|---|---|---|---|---|")
    for group in ("zoo", "families"):
        for t in args.threads.split(","):
            rs = [j["ratio_ort_over_ferrite"] for g, _, _, tt, j, _ in rows if g == group and tt == t and j]
            if rs:
                print(f"| {group} | {t} | {len(rs)} | {_geomean(rs):.2f}x | {min(rs):.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
