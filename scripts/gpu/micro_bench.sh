#!/usr/bin/env bash
# The issue's CUDA microbenchmarks on a lent GPU, ferrite and PyTorch in one job, one table.
#   bash scripts/gpu/micro_bench.sh [CARRY_DIR]        (CARRY as for run_cuda_tests.sh; it needs
#                                                       CARRY/micro/<bench>/model.onnx, made by
#                                                       scripts/gpu/make_micro_models.py)
# 1. scripts/gpu/anchors.py ceilings: copy bandwidth, bf16 cuBLAS GEMM, and the four benchmarks
#    in PyTorch eager and torch.compile (triton do_bench medians).
# 2. `ferrite bench --device cuda` on the same four: median device time (CUDA events around a
#    CUDA-graph launch, inputs resident on the GPU; see `ferrite bench --help`).
# 3. One table: time, GB/s or TFLOP/s, fraction of the measured ceiling, ferrite vs torch.compile.
# Output under $OUT (default ./gpu-out): micro.txt (the table), micro-*.json, micro-log.txt.
set -uo pipefail
carry=$(cd "${1:-.devcarry}" && pwd)
out=${OUT:-./gpu-out}
mkdir -p "$out"
source "$(dirname "$0")/carry_env.sh" "$carry"
export FERRITE_CACHE_DIR=${FERRITE_CACHE_DIR:-/tmp/ferrite-cache}
bin=$carry/bin
log=$out/micro-log.txt
here=$(cd "$(dirname "$0")" && pwd)
[ -f "$out/micro-torch.json" ] || PYTHONUNBUFFERED=1 timeout 300 python3 "$here/anchors.py" ceilings --json "$out/micro-torch.json" >> "$log" 2>&1
echo "anchors rc=$?" >> "$log"
# bench name, input spec, extra ferrite options
while read -r name spec opts; do
  work=/tmp/micro/$name
  mkdir -p "$work"
  [ -f "$work/model.onnx" ] || "$bin/ferrite-materialize" "$carry/micro/$name" "$work" >> "$log" 2>&1
  echo "== $name $opts" >> "$log"
  # shellcheck disable=SC2086
  timeout 200 "$bin/ferrite" bench "$work/model.onnx" --device cuda --input "$spec" $opts \
    --warmup 3 --runs 20 --min-seconds 0 --quiet --json "$out/micro-$name.json" >> "$log" 2>&1
  echo "$name rc=$?" >> "$log"
done <<'LIST'
pointwise x=random:268435456
softmax x=random:16384x4096
layernorm x=random:16384x4096
gemm_gelu x=random:8192x4096 --precision bf16
gemm_gelu_bf16 x=random:8192x4096
LIST
python3 - "$out" > "$out/micro.txt" <<'PY'
import json, os, sys
out = sys.argv[1]
t = json.load(open(os.path.join(out, "micro-torch.json")))
copy, gemm = t["copy_GBps"], t["bf16_gemm_TFLOPs"]
print(f"{t['gpu']}, torch {t['torch']}, {t['date']}: copy {copy:.0f} GB/s (read+write), bf16 GEMM {gemm:.0f} TFLOP/s")
benches = [("pointwise sin((x+1)*2) 2^28 f32", 2 * (1 << 28) * 4, None, [("pointwise", "ferrite")]),
           ("softmax 16384x4096 f32", 2 * 16384 * 4096 * 4, None, [("softmax", "ferrite")]),
           ("layernorm 16384x4096 f32", 2 * 16384 * 4096 * 4, None, [("layernorm", "ferrite")]),
           ("gelu(x@W+b) bf16 8192x4096x4096", None, 2 * 8192 * 4096 * 4096,
            [("gemm_gelu_bf16", "ferrite (bf16 model)"),
             ("gemm_gelu", "ferrite (f32 model, --precision bf16: + input/output casts)")])]
print("| benchmark | runtime | ms | rate | fraction of ceiling | torch time / ferrite time |")
print("|---|---|---:|---:|---:|---:|")
for label, nbytes, flops, ours in benches:
    def rate(ms):
        if nbytes:
            g = nbytes / ms / 1e6
            return f"{g:.0f} GB/s", f"{100 * g / copy:.0f}% of copy"
        f = flops / ms / 1e9
        return f"{f:.0f} TFLOP/s", f"{100 * f / gemm:.0f}% of GEMM"
    rows = {r["mode"]: r["ms"] for r in t["micro"] if r["bench"] == label}
    fms = {}
    for key, name in ours:
        try:
            fms[name] = json.load(open(os.path.join(out, f"micro-{key}.json")))["device_time"]["median_ms"]
        except Exception:  # a failed bench still prints its row
            fms[name] = None
    first = fms[ours[0][1]]
    for mode in ("eager", "compile"):
        if mode in rows:
            r, frac = rate(rows[mode])
            sp = f"{rows[mode] / first:.2f}x" if first else "-"
            print(f"| {label} | torch {mode} | {rows[mode]:.3f} | {r} | {frac} | {sp} |")
    for name, ms in fms.items():
        if ms:
            r, frac = rate(ms)
            print(f"| {label} | {name} | {ms:.3f} | {r} | {frac} | |")
        else:
            print(f"| {label} | {name} | failed (see micro-log.txt) | | | |")
PY
cat "$out/micro.txt"
