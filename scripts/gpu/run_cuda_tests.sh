#!/usr/bin/env bash
# The cuda device on a lent GPU, in one call: GPU unit tests, the CTS, the PyTorch frontend's cuda
# tests (training included), the six shared models with --check,
# a per-step profile and `ferrite bench` on each. Logs go under $OUT (default ./gpu-out):
# log.txt (everything), profile.txt, bench.json (one object per model), summary.txt.
#
# It runs from a carry folder prepared on the build machine by scripts/gpu/pack_devcarry.sh:
#   CARRY/bin/{ferrite,ferrite_unit_tests,ferrite-materialize}  (stripped)
#   CARRY/lib/*       libraries the GPU machine lacks (protobuf, onnx, oneDNN as .xz, ...)
#   CARRY/models/<m>  the shared zoo's recipes (weights are regenerated here)
# Usage on the GPU machine: bash scripts/gpu/run_cuda_tests.sh [CARRY_DIR] [MODELS]
# (QUICK=1: unit tests and --check only.)
# PRECISION=bf16 (or fp16, tf32) runs the checks and benchmarks at that precision (--check then
# uses the precision's tolerance), adds the Precision/* unit tests and skips the f32 variants.
set -uo pipefail
prec=${PRECISION:-}
pflag=()
[ -n "$prec" ] && pflag=(--precision "$prec")
carry=${1:-.devcarry}
models=${2:-"mlp convnet resnet18 mobilenet_v2 bert_base gpt2"}
out=${OUT:-./gpu-out}
mkdir -p "$out"
carry=$(cd "$carry" && pwd)
source "$(dirname "$0")/carry_env.sh" "$carry"
export FERRITE_CACHE_DIR=/tmp/ferrite-cache
bin=$carry/bin
log=$out/log.txt
{
  date -u; cat "$carry/COMMIT" 2>/dev/null; nvidia-smi -L; nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.mem --format=csv
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  ldd "$bin/ferrite" | grep -i "not found"
  "$bin/ferrite" devices
} >> "$log" 2>&1
summary="$out/summary.txt"
: > "$summary"
# ONNX's backend node tests on the GPU (CARRY/node.tar.xz, packed from onnx's
# backend/test/data/node): every case through the cuda device, one process.
if [ -f "$carry/node.tar.xz" ] && [ -n "${CONFORMANCE:-}" ]; then
  mkdir -p /tmp/onnx-node && tar -C /tmp/onnx-node -xJf "$carry/node.tar.xz"
  timeout 500 "$bin/ferrite" test-onnx --device cuda --json "$out/conformance-cuda.json" \
    /tmp/onnx-node/node/* > /tmp/conformance.txt 2>&1
  echo "conformance rc=$? $(tail -3 /tmp/conformance.txt | tr '\n' ' ')" >> "$summary"
  grep -E "^(FAIL|fail)" /tmp/conformance.txt | head -200 >> "$log"
  [ -n "${ONLY_CONFORMANCE:-}" ] && { cat "$summary"; exit 0; }
fi
echo "== unit tests" >> "$log"
# Some unit tests list golden folders of the build machine's checkout (compiled-in paths) when
# they start; make those paths exist (empty) so that the binary starts here.
for d in $(strings "$bin/ferrite_unit_tests" | grep -oE '^/[^ ]*/tests/data$' | sort -u); do
  mkdir -p "$d" "${d%/data}/golden/lowering" "${d%/data}/golden/codegen" "${d%/data}/golden/passes"
done
filter='Cuda*'
[ -n "$prec" ] && filter='Cuda*:Precision/PrecisionRun.*cuda_*:Precision.*:ConvertPrecision*'
"$bin/ferrite_unit_tests" --gtest_filter="$filter" >> "$log" 2>&1
echo "unit tests rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$log" | tr '\n' ' ')" >> "$summary"
# The backend conformance suite on the GPU: every op and fusion pattern against `reference`.
if [ -z "${NO_CTS:-}" ]; then
  timeout 400 "$bin/ferrite" cts --device cuda --json "$out/cts-cuda.json" > "$out/cts-cuda.txt" 2>&1
  echo "cts rc=$? $(tail -2 "$out/cts-cuda.txt" | tr '\n' ' ')" >> "$summary"
  grep -E "^ *(FAIL|error)" "$out/cts-cuda.txt" | head -100 >> "$log"
fi
# The PyTorch frontend on the GPU: test_cuda.py and the cuda parametrizations of the training
# tests (ferrite's Python package from the carry, packed with PY_BUILD set). NO_PYTEST=1 skips.
if [ -z "${NO_PYTEST:-}" ] && [ -d "$carry/py/ferrite" ]; then
  (cd "$(dirname "$0")/../../tests/python" && timeout 400 python3 -m pytest -q -p no:cacheprovider \
    -k cuda test_cuda.py test_training.py test_training_models.py) > "$out/pytest-cuda.txt" 2>&1
  echo "pytest (cuda) rc=$? $(tail -1 "$out/pytest-cuda.txt")" >> "$summary"
fi
mkdir -p /tmp/models
echo "[" > "$out/bench.json"
sep=""
for m in $models; do
  work=/tmp/models/$m
  [ -f "$work/model.onnx" ] || "$bin/ferrite-materialize" "$carry/models/$m" "$work" > /dev/null
  # Each data set three times: run 1 step by step, run 2 captures a CUDA graph, run 3 replays it;
  # every run is checked against the expected outputs.
  sets=()
  for d in "$work"/test_data_set_*; do sets+=(--inputs "$d" --inputs "$d" --inputs "$d"); done
  echo "== $m: run --check (cold compile: empty cache)" >> "$log"
  rm -rf "$FERRITE_CACHE_DIR"
  FERRITE_LOG=fallback,compile,fusion,graph,memory timeout 300 "$bin/ferrite" run "$work/model.onnx" "${sets[@]}" \
    --device cuda "${pflag[@]}" --check --output-dir "/tmp/out-$m" > "/tmp/run-$m.txt" 2>&1
  rc=$?
  cat "/tmp/run-$m.txt" >> "$log"
  echo "$m check rc=$rc $(grep -h 'check:' "/tmp/run-$m.txt" | tr '\n' ' ')" >> "$summary"
  [ -n "${QUICK:-}" ] && continue  # QUICK=1: correctness only
  echo "== $m" >> "$out/profile.txt"
  FERRITE_LOG=profile timeout 120 "$bin/ferrite" bench "$work/model.onnx" --inputs "$work/test_data_set_0" \
    --device cuda "${pflag[@]}" --warmup 2 --runs 20 --min-seconds 0 2>&1 | grep '^\[profile\]' >> "$out/profile.txt"
  timeout 300 "$bin/ferrite" bench "$work/model.onnx" --inputs "$work/test_data_set_0" --device cuda \
    "${pflag[@]}" --warmup 20 --runs 200 --min-seconds 2 --json "/tmp/bench-$m.json" >> "$log" 2>&1
  echo "$m bench rc=$? $(grep -o '"median_ms": [0-9.e-]*' "/tmp/bench-$m.json" 2>/dev/null | head -1)" >> "$summary"
  [ -f "/tmp/bench-$m.json" ] && { echo "$sep"; cat "/tmp/bench-$m.json"; } >> "$out/bench.json" && sep=","
  # Variants: TF32 tensor cores for the GEMMs (inputs rounded to 10 mantissa bits); no CUDA
  # graphs; the fastest of cuBLASLt's candidate algorithms, timed, instead of its first choice.
  variants="tf32:FERRITE_CUDA_TF32=1 no-graphs:FERRITE_CUDA_GRAPHS=0 tuned:FERRITE_CUDA_GEMM_TUNE=1"
  [ -n "$prec" ] && variants=""
  for v in $variants; do
    env "${v#*:}" timeout 300 "$bin/ferrite" bench "$work/model.onnx" --inputs "$work/test_data_set_0" \
      --device cuda --warmup 20 --runs 200 --min-seconds 1 --json "/tmp/bench-${v%%:*}-$m.json" >> "$log" 2>&1
    echo "$m bench-${v%%:*} rc=$? $(grep -o '"median_ms": [0-9.e-]*' "/tmp/bench-${v%%:*}-$m.json" 2>/dev/null | head -1)" >> "$summary"
  done
done
echo "]" >> "$out/bench.json"
# PyTorch eager and torch.compile on the same machine, same shapes (BENCHMARKS.md, GPU anchors).
if [ -n "${RUN_ANCHORS:-}" ] && [ -f "${ANCHORS:-scripts/gpu/anchors.py}" ]; then
  PYTHONUNBUFFERED=1 timeout 400 python3 "${ANCHORS:-scripts/gpu/anchors.py}" models --json "$out/anchors.json" >> "$log" 2>&1
  echo "anchors rc=$?" >> "$summary"
fi
cat "$out/profile.txt" "$summary"
