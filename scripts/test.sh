#!/usr/bin/env bash
# The whole test suite, from a fresh machine: dependencies, build, unit/model/conformance tests,
# the Python tests (pytest), then the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
#   scripts/test.sh                 everything
#   FERRITE_SKIP_SANITIZERS=1 ...   skip the sanitizer build
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)
echo "== tests (build/) =="
ctest --test-dir build --output-on-failure -j "$jobs"
echo "== Python tests (pytest: Session API, torch.compile backend, ATen table, models) =="
.venv/bin/python -m pytest -q -p no:cacheprovider tests/python
if [ "${FERRITE_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "== unit tests under ASan + UBSan (build-asan/) =="
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFERRITE_SANITIZE=ON >/dev/null
  cmake --build build-asan -j "$jobs" --target ferrite_unit_tests ferrite gxu_plugin
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" -L unit
fi
