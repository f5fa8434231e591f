#!/usr/bin/env bash
# Installs what ferrite needs on a fresh Debian machine (idempotent) and configures + builds it.
#   scripts/setup.sh            deps, Python venv (.venv) and a release build in build/
#   FERRITE_SKIP_BUILD=1 ...    deps and venv only
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(cmake ninja-build g++ libprotobuf-dev protobuf-compiler libonnx-dev libgtest-dev
              libdnnl-dev python3-venv)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python test tools: onnx (its backend node-test data), onnxruntime and numpy as oracles.
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import onnx, numpy, onnxruntime" 2>/dev/null; then
  echo "setup: creating .venv"
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r scripts/requirements.txt
fi

if [ "${FERRITE_SKIP_BUILD:-0}" != 1 ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build -j "$(nproc)"
fi
