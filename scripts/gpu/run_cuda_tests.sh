#!/usr/bin/env bash
# The cuda device on a lent GPU, in one call: GPU unit tests, the six shared models with --check,
# and `ferrite bench` on each. Logs go under $OUT (default ./gpu-out).
#
# It runs from a carry folder prepared on the build machine by scripts/gpu/pack_devcarry.sh:
#   .devcarry/bin/{ferrite,ferrite_unit_tests,ferrite-materialize}  (stripped)
#   .devcarry/lib/*       libraries the GPU machine lacks (protobuf, onnx, oneDNN as .xz, ...)
#   .devcarry/models/<m>  the shared zoo's recipes (weights are regenerated here)
# Usage on the GPU machine: bash scripts/gpu/run_cuda_tests.sh [CARRY_DIR] [MODELS]
set -uo pipefail
carry=${1:-.devcarry}
models=${2:-"mlp convnet resnet18 mobilenet_v2 bert_base gpt2"}
out=${OUT:-./gpu-out}
mkdir -p "$out"
carry=$(cd "$carry" && pwd)
[ -f "$carry/lib/libdnnl.so.2.xz" ] && [ ! -f "$carry/lib/libdnnl.so.2" ] && xz -dk "$carry/lib/libdnnl.so.2.xz"
# cuBLASLt / NVRTC: the toolkit's, else those of the installed PyTorch wheels.
extra=""
for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia, os; p = os.path.dirname(nvidia.__path__[0] if hasattr(nvidia, "__path__") else nvidia.__file__); print(" ".join(os.path.join(p, "nvidia", s, "lib") for s in ("cublas", "cuda_nvrtc", "cu13")))' 2>/dev/null); do
  [ -d "$d" ] && extra="$extra:$d"
done
export LD_LIBRARY_PATH="$carry/lib$extra:${LD_LIBRARY_PATH:-}"
export FERRITE_CACHE_DIR=/tmp/ferrite-cache
bin=$carry/bin
{
  date -u; nvidia-smi -L; nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.mem --format=csv
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  ldd "$bin/ferrite" | grep -i "not found"
  "$bin/ferrite" devices
} 2>&1 | tee "$out/env.txt"

echo "== unit tests" | tee "$out/unit.txt"
"$bin/ferrite_unit_tests" --gtest_filter='Cuda*' 2>&1 | tee -a "$out/unit.txt" | tail -40

summary="$out/summary.txt"
: > "$summary"
mkdir -p /tmp/models
for m in $models; do
  work=/tmp/models/$m
  [ -f "$work/model.onnx" ] || "$bin/ferrite-materialize" "$carry/models/$m" "$work" > /dev/null
  sets=()
  for d in "$work"/test_data_set_*; do sets+=(--inputs "$d"); done
  echo "== $m: run --check" | tee -a "$out/models.txt"
  FERRITE_LOG=fallback,compile,fusion timeout 300 "$bin/ferrite" run "$work/model.onnx" "${sets[@]}" \
    --device cuda --check --output-dir "/tmp/out-$m" >> "$out/models.txt" 2>&1
  rc=$?
  echo "$m check rc=$rc $(grep -h 'check:' "$out/models.txt" | tail -2 | tr '\n' ' ')" >> "$summary"
  timeout 300 "$bin/ferrite" bench "$work/model.onnx" --inputs "$work/test_data_set_0" --device cuda \
    --warmup 10 --runs 200 --min-seconds 2 --json "$out/bench-$m.json" >> "$out/bench.txt" 2>&1
  echo "$m bench rc=$? $(grep -o '"median_ms": [0-9.e-]*' "$out/bench-$m.json" 2>/dev/null | head -1)" >> "$summary"
done
cat "$summary"
