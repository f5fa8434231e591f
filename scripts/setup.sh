#!/usr/bin/env bash
# Installs what ferrite needs on a fresh Debian machine (idempotent) and configures + builds it.
#   scripts/setup.sh            deps, Python venv (.venv), a release build in build/, and the
#                               ferrite Python package installed into .venv in place
#   FERRITE_SKIP_BUILD=1 ...    deps and venv only
set -euo pipefail
cd "$(dirname "$0")/.."

# clang, its sanitizer and libFuzzer runtimes (libclang-rt-dev) and omp.h for clang (libomp-dev)
# build the sanitizer + fuzzing build of scripts/test.sh; pkgconf builds the C API's pkg-config
# consumer test (tests/capi/consumer_test.sh); nlohmann-json3-dev reads Triton model configurations
# in the Triton backend (src/serving/triton) and is the JSON library of the CLI and reports;
# libcli11-dev parses the command lines. The tritonserver its test runs (from the
# nvidia-pytriton wheel) brings its own libraries: it needs only libc, libstdc++ and zlib here.
APT_PACKAGES=(cmake ninja-build g++ libprotobuf-dev protobuf-compiler libonnx-dev libgtest-dev
              libdnnl-dev python3-venv python3-dev clang libclang-rt-dev libomp-dev pkgconf
              nlohmann-json3-dev libcli11-dev)
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

# Python: onnx (its backend node-test data), onnxruntime and numpy as oracles; nanobind for the
# extension; torch, torchvision and transformers for the PyTorch frontend and its tests;
# tritonclient and nvidia-pytriton's tritonserver for the Triton backend's test (tests/serving).
venv_ok() {
  .venv/bin/python -c "import onnx, numpy, onnxruntime, nanobind, torch, torchvision, transformers, \
onnxscript, pytest, tritonclient.http, tritonclient.grpc, importlib.util, os; \
assert onnx.__version__ == '1.16.2'; \
assert os.path.isfile(os.path.join(os.path.dirname(importlib.util.find_spec('pytriton').origin), \
'tritonserver', 'bin', 'tritonserver'))" 2>/dev/null
}
if [ ! -x .venv/bin/python ] || ! venv_ok; then
  echo "setup: installing the Python requirements into .venv (torch is large: minutes)"
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r scripts/requirements.txt
  .venv/bin/pip install -q --disable-pip-version-check --no-deps -r scripts/requirements-nodeps.txt
fi

if [ "${FERRITE_SKIP_BUILD:-0}" != 1 ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPython_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
  cmake --build build -j "$(nproc)"
  scripts/dev_install_python.sh build >/dev/null
fi
