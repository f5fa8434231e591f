#!/usr/bin/env bash
# Whole-model test: materialize a shared model, run both of its data sets in ONE `ferrite run`
# (one compile), compare with the expected outputs and check run.json reports one compile.
#   run_model.sh FERRITE MATERIALIZE SHARED_CASE_DIR WORK_DIR [DEVICE] [PASSES] [PRECISION] [TP]
# PRECISION (f32, bf16, fp16, ...) is `--precision`; --check then uses its tolerance. TP > 1
# splits the model over that many ranks (`--tensor-parallel`, loopback communicator): the
# outputs must still match the whole model's expected ones.
set -euo pipefail
ferrite=$1 materialize=$2 src=$3 work=$4 device=${5:-reference} passes=${6:-none}
precision=${7:-f32} tp=${8:-1}
if [ ! -f "$src/model.onnx" ]; then
  echo "SKIP: $src not found (the shared model zoo is expected at ../shared/models)"
  exit 77
fi
mkdir -p "$work"
if [ ! -f "$work/model.onnx" ] || [ "$src/model.onnx" -nt "$work/model.onnx" ]; then
  "$materialize" "$src" "$work"
fi
sets=()
for d in "$work"/test_data_set_*; do sets+=(--inputs "$d"); done
out="$work/out-$device-$passes-$precision"
[ "$tp" = 1 ] || out="$out-tp$tp"
rm -rf "$out"
# A plugin accelerator logs its launches (GXU_LAUNCH_LOG); every one must have been legal.
launch_log="$out.launches.log"
rm -f "$launch_log"
# The executor's step summary (FERRITE_LOG=fallback): on gxu every step over data must run on the
# device, leaving only shape arithmetic (values fixed by the shape symbols) on the host.
step_log="$out.steps.log"
if ! FERRITE_LOG=fallback GXU_LAUNCH_LOG="$launch_log" "$ferrite" run "$work/model.onnx" \
  "${sets[@]}" --device "$device" --passes "$passes" --precision "$precision" --check \
  --tensor-parallel "$tp" --output-dir "$out" 2>"$step_log"; then
  cat "$step_log" >&2
  exit 1
fi
cat "$step_log" >&2
if [ "$device" = gxu ]; then
  summary=$(grep '^\[fallback\] gxu: ' "$step_log" | tail -n 1 || true)
  echo "gxu steps: ${summary#\[fallback\] gxu: }"
  if [ -z "$summary" ] || ! grep -q '; 0 host steps on data' <<<"$summary"; then
    echo "FAIL: gxu ran steps over data on the host ($step_log)"
    exit 1
  fi
  launches=0 illegal=0
  if [ -f "$launch_log" ]; then
    launches=$(grep -c '^launch ' "$launch_log" || true)
    illegal=$(grep -c 'legal=0' "$launch_log" || true)
  fi
  echo "gxu launches: $launches, illegal: $illegal"
  if [ "$illegal" != 0 ]; then
    echo "FAIL: illegal launches ($launch_log)"
    exit 1
  fi
fi
compiles=$(sed -n 's/.*"compiles": \([0-9]*\).*/\1/p' "$out/run.json")
if [ "$compiles" != 1 ]; then
  echo "FAIL: run.json reports $compiles compiles for ${#sets[@]} data sets, expected 1"
  exit 1
fi
echo "OK: ${#sets[@]} data sets, 1 compile"
