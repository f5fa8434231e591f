#!/usr/bin/env python3
"""Runs ONNX's backend node test suite through `ferrite test-onnx` and publishes the per-op table.

    .venv/bin/python scripts/conformance.py [--ferrite build/bin/ferrite] [--device reference]
                                            [--write docs/conformance.md] [--check]

A case is *in scope* when every op it uses is in ferrite's op table (`ferrite ops --names`, plus the
deprecated ops the version converter renames) and its default-domain opset is one ferrite imports
(1..21; below 13 through the version converter). The rate is passed / in-scope; cases that
are in scope but unsupported (a dtype ferrite lacks, such as string or int4) count against it.
With --check the script exits non-zero when the rate is below the target or when an in-scope case
fails that tests/conformance/known_failures.txt does not list (a regression).
"""
import argparse
import collections
import datetime
import json
import os
import platform
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = 0.95
MIN_OPSET, MAX_OPSET = 1, 21
# Deprecated ops that the importer's version converter turns into op-table ops.
CONVERTED_OPS = {"Scatter": "ScatterElements", "Upsample": "Resize"}


def node_test_dir():
    import onnx  # the pinned release ships the node tests as files
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node"), onnx.__version__


def load_known_failures(path):
    known = {}
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, why = line.partition(" ")
            known[name] = why.strip()
    return known


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ferrite", default=os.path.join(ROOT, "build", "bin", "ferrite"))
    ap.add_argument("--device", default="reference")
    ap.add_argument("--write", help="write the markdown table here (e.g. docs/conformance.md)")
    ap.add_argument("--json", default=os.path.join(ROOT, "build", "conformance.json"))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()

    node_dir, onnx_version = node_test_dir()
    cases = sorted(os.path.join(node_dir, c) for c in os.listdir(node_dir))
    # Cases whose shipped outputs are wrong run against corrected copies (tests/conformance/errata.py).
    sys.path.insert(0, os.path.join(ROOT, "tests", "conformance"))
    from errata import ERRATA, write_corrected_case
    errata_dir = os.path.join(os.path.dirname(os.path.abspath(args.json)), "conformance-errata")
    stale = []
    for i, case in enumerate(cases):
        name = os.path.basename(case)
        if name in ERRATA:
            cases[i] = os.path.join(errata_dir, name)
            if write_corrected_case(case, cases[i], ERRATA[name][0]) == 0:
                stale.append(name)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    proc = subprocess.run([args.ferrite, "test-onnx", "--device", args.device, "--json", args.json] + cases,
                          capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stdout + proc.stderr)
        sys.exit(f"ferrite test-onnx exited with {proc.returncode}")
    results = json.load(open(args.json))["cases"]
    table_ops = set(subprocess.run([args.ferrite, "ops", "--names"], capture_output=True, text=True,
                                   check=True).stdout.split()) | set(CONVERTED_OPS)

    import onnx
    per_op = collections.defaultdict(collections.Counter)
    in_scope, out_of_scope, out_cases = [], collections.Counter(), []
    for r in results:
        # Ops and opset as ONNX itself reads them (ferrite may refuse the model before listing them).
        model = onnx.load(os.path.join(node_dir, r["name"], "model.onnx"), load_external_data=False)
        # Qualified as `ferrite ops --names` prints them: "domain.Op" outside the default domain.
        ops = sorted({(n.domain + "." if n.domain not in ("", "ai.onnx") else "") + n.op_type
                      for n in model.graph.node})
        # None for a model of only other domains (ai.onnx.ml, ai.onnx.preview.training).
        r["opset"] = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
        if not ops:
            out_of_scope["model has no nodes"] += 1
            continue
        if not all(op in table_ops for op in ops):
            out_of_scope["uses ops outside the op table"] += 1
            r["missing_ops"] = [op for op in ops if op not in table_ops]
            out_cases.append(r)
            continue
        if r["opset"] is not None and not (MIN_OPSET <= r["opset"] <= MAX_OPSET):
            out_of_scope[f"opset outside {MIN_OPSET}..{MAX_OPSET}"] += 1
            continue
        in_scope.append(r)
        for op in ops:
            per_op[op][r["status"]] += 1
    passed = sum(r["status"] == "pass" for r in in_scope)
    rate = passed / max(len(in_scope), 1)
    not_passing = [r for r in in_scope if r["status"] != "pass"]

    known = load_known_failures(os.path.join(ROOT, "tests", "conformance", "known_failures.txt"))
    regressions = [r for r in not_passing if r["name"] not in known]
    fixed = sorted(set(known) - {r["name"] for r in not_passing})

    print(f"node suite (onnx {onnx_version}): {len(results)} cases, {len(in_scope)} in scope, "
          f"{passed} pass ({100 * rate:.1f}%), "
          f"{sum(r['status'] == 'fail' for r in in_scope)} fail, "
          f"{sum(r['status'] == 'unsupported' for r in in_scope)} unsupported; device {args.device}")
    for why, n in sorted(out_of_scope.items()):
        print(f"  out of scope: {n} cases ({why})")
    for r in regressions:
        print(f"  NOT IN known_failures.txt: {r['name']} [{r['status']}] {r['reason']}")
    for name in fixed:
        print(f"  now passing (remove from known_failures.txt): {name}")
    corrected = [r for r in in_scope if r["name"] in ERRATA]
    print(f"  against corrected expected outputs: {len(corrected)} cases, "
          f"{sum(r['status'] == 'pass' for r in corrected)} pass (tests/conformance/errata.py)")
    for name in stale:
        print(f"  STALE erratum (the shipped outputs equal the corrected ones; remove it): {name}")

    if args.write:
        with open(args.write, "w") as f:
            f.write("# ONNX node-test conformance\n\n")
            cmd = ".venv/bin/python scripts/conformance.py" + (
                f" --device {args.device}" if args.device != "reference" else "") + f" --write {args.write}"
            f.write(f"Generated by `{cmd}` "
                    f"on {datetime.date.today()} ({platform.machine()}, onnx {onnx_version}, device "
                    f"`{args.device}`). Do not edit by hand.\n\n")
            f.write(f"- cases in the suite: {len(results)}\n")
            f.write(f"- in scope (every op in ferrite's op table, opset {MIN_OPSET}..{MAX_OPSET}; below 13 "
                    "through the version converter): "
                    f"{len(in_scope)}\n")
            f.write(f"- **pass: {passed} ({100 * rate:.1f}%)**, fail: "
                    f"{sum(r['status'] == 'fail' for r in in_scope)}, unsupported: "
                    f"{sum(r['status'] == 'unsupported' for r in in_scope)}\n")
            for why, n in sorted(out_of_scope.items()):
                f.write(f"- out of scope: {n} ({why})\n")
            f.write("\nTolerances: `|got - want| <= atol + rtol*|want|` with f64 1e-7/1e-5, f32 1e-4/1e-3, "
                    "f16 1e-3/1e-2, bf16 1e-2/2e-2; integers and bool exact; float8 bit-exact; NaN matches NaN.\n\n")
            f.write("## Per op (in-scope cases that use the op)\n\n| op | cases | pass | fail | unsupported |\n"
                    "|---|---:|---:|---:|---:|\n")
            for op in sorted(per_op):
                c = per_op[op]
                f.write(f"| {op} | {sum(c.values())} | {c['pass']} | {c['fail']} | {c['unsupported']} |\n")
            f.write("\n## Cases run against corrected expected outputs\n\n"
                    "Their shipped outputs are wrong; `tests/conformance/errata.py` recomputes them "
                    "from the inputs by an independent implementation, and ferrite must match those "
                    "within the usual tolerance.\n\n| case | status | why and how corrected |\n"
                    "|---|---|---|\n")
            for r in corrected:
                f.write(f"| {r['name']} | {r['status']} | {ERRATA[r['name']][1].replace('|', '/')} |\n")
            f.write("\n## In-scope cases that do not pass\n\n| case | status | reason |\n|---|---|---|\n")
            for r in not_passing:
                reason = known.get(r["name"]) or r["reason"]
                f.write(f"| {r['name']} | {r['status']} | {reason.replace('|', '/')} |\n")
            f.write("\n## Cases out of scope (ops outside the op table)\n\n"
                    "| case | ops outside the table | ferrite says |\n|---|---|---|\n")
            for r in out_cases:
                # The reason without the case's own path, which differs between machines.
                reason = r["reason"].split("model.onnx: ", 1)[-1].replace("|", "/")
                f.write(f"| {r['name']} | {', '.join(r['missing_ops'])} | {reason} |\n")
            f.write("\n## Op-table ops without any in-scope node case\n\n")
            f.write(", ".join(sorted(table_ops - set(per_op) - set(CONVERTED_OPS))) or "(none)")
            f.write("\n")

    if args.check:
        ok = rate >= TARGET and not regressions and not stale
        print("conformance check:", "ok" if ok else "FAILED",
              f"(rate {100 * rate:.1f}% vs target {100 * TARGET:.0f}%, {len(regressions)} unlisted failures, "
              f"{len(stale)} stale errata)")
        sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
