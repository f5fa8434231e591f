#!/usr/bin/env bash
# The whole test suite, from a fresh machine: dependencies, build, unit/model/conformance tests,
# the Python tests (pytest), then the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer
# (clang), a short run of every libFuzzer target (scripts/fuzz.sh, docs/reliability.md) and the
# C API's concurrency tests under ThreadSanitizer when FERRITE_TSAN=1 (docs/embedding.md).
#   scripts/test.sh                 everything
#   FERRITE_SKIP_SANITIZERS=1 ...   skip the sanitizer build (and the fuzz targets)
#   FERRITE_TSAN=1 ...              also the C API concurrency tests under ThreadSanitizer
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)
echo "== tests (build/) =="
ctest --test-dir build --output-on-failure -j "$jobs"
echo "== Python tests (pytest: Session API, torch.compile backend, ATen table, models, Triton backend) =="
.venv/bin/python -m pytest -q -p no:cacheprovider tests/python tests/serving
if [ "${FERRITE_SKIP_SANITIZERS:-0}" != 1 ]; then
  # One clang build serves the sanitized unit tests and the libFuzzer targets (tests/fuzz):
  # everything is compiled with ASan + UBSan + coverage instrumentation.
  echo "== unit tests under ASan + UBSan (build-asan/, clang) =="
  if [ -f build-asan/CMakeCache.txt ] && ! grep -q '^CMAKE_CXX_COMPILER:.*clang' build-asan/CMakeCache.txt; then
    rm -rf build-asan  # a gcc build from before: its objects cannot be reused
  fi
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ \
    -DFERRITE_SANITIZE=ON -DFERRITE_FUZZ=ON >/dev/null
  cmake --build build-asan -j "$jobs" --target ferrite_unit_tests ferrite gxu_plugin ferrite_fuzzers
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" -L unit
  echo "== fuzz targets: each corpus, then 20 s of fuzzing each (ctest -L fuzz) =="
  ctest --test-dir build-asan --output-on-failure -j "$jobs" -L fuzz
fi
# The C API's concurrency contract (docs/embedding.md) under ThreadSanitizer: only the library
# and its test are built, in build-tsan/ (clang). Opt-in: a fresh TSan build of the stage libraries
# takes far longer than the few minutes this suite may grow by on the 2-core CI machine.
if [ "${FERRITE_TSAN:-0}" = 1 ]; then
  echo "== C API concurrency under ThreadSanitizer (build-tsan/, clang) =="
  # -O1 and line tables only: TSan reports need file:line, not full debug info, and these
  # flags keep the compile shorter.
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" \
    -DFERRITE_TSAN=ON -DFERRITE_BUILD_PYTHON=OFF -DFERRITE_BUILD_PLUGINS=OFF >/dev/null
  cmake --build build-tsan -j "$jobs" --target ferrite_capi_tests
  # 8 threads x 1,000 runs each, as in the normal suite; tsan.supp says why each entry is there.
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/capi/tsan.supp" \
    ctest --test-dir build-tsan --output-on-failure -j 1 -R '^CApi'
fi
