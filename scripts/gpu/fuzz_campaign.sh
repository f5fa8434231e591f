#!/usr/bin/env bash
# A libFuzzer campaign on a machine with many cores (a lent GPU machine's CPUs): every target of
# tests/fuzz at once, JOBS processes each (libFuzzer -fork), for SECONDS, continuing after
# findings. The fuzz binaries come prebuilt in CARRY/bin (stripped, xz-compressed, from a clang
# build with -DFERRITE_FUZZ=ON), the libraries they need in CARRY/lib. Logs and artifacts go to
# OUT_DIR.
#   scripts/gpu/fuzz_campaign.sh CARRY SECONDS OUT_DIR [TARGET=JOBS ...]
set -uo pipefail
cd "$(dirname "$0")/../.."
carry=$1 seconds=$2 out=$3
shift 3
specs=("$@")
((${#specs[@]})) || specs=(onnx_import=4 passes=5 tensor_proto=2 compile_cache=2 cpu_differential=3)
for f in "$carry"/bin/*.xz; do [ -e "$f" ] && xz -d "$f"; done
# shellcheck source=carry_env.sh
source scripts/gpu/carry_env.sh "$carry"
export FERRITE_FUZZ_ARGS="-ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1"
mkdir -p "$out"
for spec in "${specs[@]}"; do
  t=${spec%=*} j=${spec#*=}
  scripts/fuzz.sh --build-dir "$carry" --no-build "$t" "$seconds" "$j" > "$out/$t.txt" 2>&1 &
done
wait
for spec in "${specs[@]}"; do
  t=${spec%=*}
  echo "== $t"; tail -n 8 "$out/$t.txt"
  cp "$carry/fuzz/logs/$t.log" "$out/$t.log" 2>/dev/null
done
# One archive of every finding's input (reproduce here with BUILD/bin/fuzz_TARGET FILE).
tar -C "$carry/fuzz" -czf "$out/artifacts.tar.gz" artifacts
