#!/usr/bin/env bash
# device_test.sh [PROBE ARGS...] -- COMMAND ARGS...
# Runs COMMAND when PROBE succeeds (or is empty); exits 77 (ctest: skipped) when it fails, e.g.
# a GPU device's tests on a machine without a GPU.
probe=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do probe+=("$1"); shift; done
shift
if [ ${#probe[@]} -gt 0 ] && ! "${probe[@]}" > /dev/null 2>&1; then
  echo "SKIP: '${probe[*]}' failed: the device is not present on this machine"
  exit 77
fi
exec "$@"
