#!/usr/bin/env bash
# Runs `ferrite bench` on the shared models and prints a markdown table (BENCHMARKS.md).
#
#   scripts/bench_models.sh [--device NAME] [--threads "1 2"] [--models "mlp convnet ..."]
#                           [--runs R] [--warmup K] [--min-seconds S] [--no-compare]
#                           [--out DIR]
#
# Defaults: --device reference, --threads "1", all six models, --runs 10 --warmup 2
# --min-seconds 1, compared with ONNX Runtime. Each model runs on its test_data_set_0 inputs.
# Environment:
#   FERRITE             the ferrite binary (default build/bin/ferrite)
#   FERRITE_MODELS_DIR  materialized models, <dir>/<name>/model.onnx (default build/models; a
#                       missing model is materialized there from ../shared/models with
#                       build/bin/ferrite-materialize)
#   FERRITE_PYTHON      the python with onnxruntime (default: .venv/bin/python, see
#                       `ferrite bench --help`)
# The per-run JSON files go to --out (default build/bench); the table goes to stdout, the
# benches' own output to stderr.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
ferrite=${FERRITE:-$root/build/bin/ferrite}
models_dir=${FERRITE_MODELS_DIR:-$root/build/models}
shared="$root/../shared/models"
device=reference threads="1" runs=10 warmup=2 min_seconds=1 compare=1 out="$root/build/bench"
models="mlp convnet resnet18 mobilenet_v2 bert_base gpt2"
while (($#)); do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --min-seconds) min_seconds=$2; shift 2 ;;
    --no-compare) compare=0; shift ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_models.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$ferrite" ] || { echo "bench_models.sh: no ferrite binary at $ferrite (set FERRITE)" >&2; exit 1; }
mkdir -p "$out"

jsons=()
for m in $models; do
  dir="$models_dir/$m"
  if [ ! -f "$dir/model.onnx" ]; then
    materialize="$(dirname "$ferrite")/ferrite-materialize"
    if [ -f "$shared/$m/model.onnx" ] && [ -x "$materialize" ]; then
      echo "materializing $m into $dir" >&2
      mkdir -p "$dir"
      "$materialize" "$shared/$m" "$dir" >&2
    else
      echo "bench_models.sh: $dir/model.onnx not found (and cannot materialize it)" >&2
      exit 1
    fi
  fi
  for t in $threads; do
    json="$out/$m-$device-t$t.json"
    args=("$dir/model.onnx" --inputs "$dir/test_data_set_0" --device "$device" --threads "$t"
          --runs "$runs" --warmup "$warmup" --min-seconds "$min_seconds" --json "$json")
    ((compare)) && args+=(--compare onnxruntime)
    echo "== $m, $device, --threads $t" >&2
    "$ferrite" bench "${args[@]}" >&2
    jsons+=("$json")
  done
done

python3 - "${jsons[@]}" <<'EOF'
import json, os, sys

def f(v, fmt):
    return "–" if v is None else format(v, fmt)

rows = [json.load(open(p)) for p in sys.argv[1:]]
has_ort = any("onnxruntime" in r for r in rows)
head = ["model", "inputs", "device", "threads", "compile cold (s)", "compile warm (s)",
        "ferrite median (ms)", "ferrite p10–p90 (ms)"]
if has_ort:
    head += ["ORT median (ms)", "ORT p10–p90 (ms)", "ratio ort/ferrite", "max abs diff"]
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for r in rows:
    fe = r["ferrite"]
    name = os.path.basename(os.path.dirname(r["model"]))
    ins = ", ".join(i["type"] for i in r["inputs"])
    cells = [name, ins, r["device"], str(r["threads"] or "default"),
             f(r["compile"]["cold"]["total_seconds"], ".3f"),
             f(r["compile"]["warm"]["total_seconds"], ".3f"),
             f(fe["median_ms"], ".3f"), f"{f(fe['p10_ms'], '.3f')}–{f(fe['p90_ms'], '.3f')}"]
    if has_ort:
        o = r.get("onnxruntime")
        if o:
            diff = f(r["outputs"]["max_abs_diff"], ".2g")
            if not r["outputs"]["match"]:
                diff += " (MISMATCH)"
            cells += [f(o["median_ms"], ".3f"), f"{f(o['p10_ms'], '.3f')}–{f(o['p90_ms'], '.3f')}",
                      f(r["ratio_ort_over_ferrite"], ".3f") + "x", diff]
        else:
            cells += ["–"] * 4
    print("| " + " | ".join(cells) + " |")
EOF
