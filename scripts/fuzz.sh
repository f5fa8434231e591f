#!/usr/bin/env bash
# Runs a libFuzzer target of tests/fuzz on its corpus; see --help and docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(onnx_import tensor_proto passes cpu_differential compile_cache)

usage() {
  cat <<'EOF'
usage: scripts/fuzz.sh [OPTIONS] TARGET SECONDS [JOBS]
       scripts/fuzz.sh [OPTIONS] --replay TARGET

Fuzzes TARGET (onnx_import, tensor_proto, passes, cpu_differential, compile_cache) for
SECONDS, starting from its corpus tests/fuzz/corpus/TARGET (seeds and the inputs of fixed
findings; never written to). New inputs go to BUILD/fuzz/corpus/TARGET, crash, timeout and
out-of-memory inputs to BUILD/fuzz/artifacts/TARGET, the libFuzzer log to
BUILD/fuzz/logs/TARGET.log. JOBS > 1 runs that many fuzzing processes (libFuzzer -fork).
At the end it prints executions, executions per second, coverage (cov: edges, ft: features),
the corpus size and the artifacts found; the exit status is non-zero when it found any.

--replay runs every corpus input once and fuzzes nothing (CI's regression check).

Options:
  --build-dir DIR   the build to use (default build-asan, the clang ASan+UBSan+fuzzer build
                    that scripts/test.sh makes); configured and the target built unless
                    --no-build
  --no-build        use the binaries as they are
  -h, --help        this text

Environment:
  FERRITE_FUZZ_ARGS   extra libFuzzer flags, e.g. "-ignore_crashes=1" for a campaign that
                      keeps going after a finding, or "-seed=1"
  FERRITE_CACHE_DIR   compile cache of cpu_differential (default BUILD/fuzz/compile-cache)

Reproduce a finding:  BUILD/bin/fuzz_TARGET BUILD/fuzz/artifacts/TARGET/crash-...
Minimize it:          BUILD/bin/fuzz_TARGET -minimize_crash=1 -runs=10000 FILE
EOF
}

build_dir=build-asan
do_build=1
replay=0
args=()
while (($#)); do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --replay) replay=1; shift ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
target=${args[0]:-}
if [[ -z "$target" || ! " ${TARGETS[*]} " =~ " $target " ]]; then
  echo "fuzz.sh: give a target: ${TARGETS[*]} (see --help)" >&2
  exit 2
fi
if ((replay)); then
  seconds=0
  jobs=1
else
  seconds=${args[1]:-}
  jobs=${args[2]:-1}
  if ! [[ "$seconds" =~ ^[0-9]+$ && "$jobs" =~ ^[1-9][0-9]*$ ]]; then
    echo "fuzz.sh: SECONDS and JOBS must be numbers (see --help)" >&2
    exit 2
  fi
fi

if ((do_build)); then
  if [ ! -f "$build_dir/build.ninja" ]; then
    cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_CXX_COMPILER=clang++ \
      -DFERRITE_SANITIZE=ON -DFERRITE_FUZZ=ON >/dev/null
  fi
  cmake --build "$build_dir" -j "${FERRITE_BUILD_JOBS:-2}" --target "fuzz_$target" >/dev/null
fi
bin=$build_dir/bin/fuzz_$target
[ -x "$bin" ] || { echo "fuzz.sh: $bin not built (configure with -DFERRITE_FUZZ=ON)" >&2; exit 2; }

corpus=tests/fuzz/corpus/$target
# The ONNX targets read the same kind of input: each also starts from the other's corpus.
seeds=("$corpus")
case "$target" in
  onnx_import) seeds+=(tests/fuzz/corpus/passes) ;;
  passes) seeds+=(tests/fuzz/corpus/onnx_import) ;;
esac
work=$build_dir/fuzz
scratch=$work/corpus/$target
artifacts=$work/artifacts/$target
mkdir -p "$scratch" "$artifacts" "$work/logs"
log=$work/logs/$target.log
export FERRITE_CACHE_DIR=${FERRITE_CACHE_DIR:-$(cd "$work" && pwd)/compile-cache}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

# Per target: input size limit and the time one input may take (cpu_differential runs the
# host compiler on a new graph, slower under a loaded machine).
flags=(-artifact_prefix="$artifacts/" -print_final_stats=1 -rss_limit_mb=4096)
case "$target" in
  onnx_import|passes) flags+=(-max_len=65536 -timeout=60 -dict=tests/fuzz/onnx.dict) ;;
  tensor_proto) flags+=(-max_len=8192 -timeout=30 -dict=tests/fuzz/onnx.dict) ;;
  cpu_differential) flags+=(-max_len=256 -timeout=180) ;;
  compile_cache) flags+=(-max_len=4096 -timeout=30) ;;
esac
if ((replay)); then
  flags+=(-runs=0)
  dirs=("${seeds[@]}")
else
  flags+=(-max_total_time="$seconds")
  ((jobs > 1)) && flags+=(-fork="$jobs")
  # New inputs are written to the first directory only.
  dirs=("$scratch" "${seeds[@]}")
fi
# shellcheck disable=SC2206  # FERRITE_FUZZ_ARGS is a list of flags
flags+=(${FERRITE_FUZZ_ARGS:-})

before=$(find "$artifacts" -type f | wc -l)
start=$(date +%s)
set +e
"$bin" "${flags[@]}" "${dirs[@]}" >"$log" 2>&1
rc=$?
set -e
elapsed=$(($(date +%s) - start))
found=$(($(find "$artifacts" -type f | wc -l) - before))

last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1 || true)
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
if [ -z "$execs" ]; then  # -fork prints no final stats: the last status line has the count
  execs=$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"$last")
  rate=$((elapsed > 0 ? ${execs:-0} / elapsed : 0))
fi
echo "fuzz $target: $( ((replay)) && echo "replayed $corpus" || echo "${seconds}s x $jobs job(s)")," \
  "${elapsed}s wall, ${execs:-?} execs, ${rate:-?} execs/s"
echo "  $(sed -E 's/^#[0-9]+[:[:space:]]+([A-Z]+[[:space:]]+)?//' <<<"$last")"
echo "  corpus: $(find "${seeds[@]}" -type f | wc -l) committed files" \
  "($(find "${seeds[@]}" -type f -printf '%s\n' | awk '{s += $1} END {print s}') bytes)" \
  "+ $(find "$scratch" -type f | wc -l) new in $scratch"
echo "  log: $log"
if ((rc != 0 || found > 0)); then
  echo "  FINDINGS: $found new artifact(s) in $artifacts (exit $rc); the log ends:"
  grep -E 'ERROR|ferrite fuzz finding|runtime error|SUMMARY' "$log" | head -n 5 | sed 's/^/    /'
  exit 1
fi
