#!/usr/bin/env bash
# Installs the ferrite Python package into .venv in place (like `pip install -e .`, without a
# second build): the package sources stay in python/ferrite, the extension built in build/ and
# the device plugins are linked beside them, and a dist-info registers the torch.compile backend
# (entry point torch_dynamo_backends: ferrite).
#   scripts/dev_install_python.sh [BUILD_DIR]      (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
root=$PWD
ext=$(ls "$build"/python/ferrite/_core*.so 2>/dev/null | head -n 1 || true)
if [ -z "$ext" ]; then
  echo "dev_install_python: no extension in $build/python/ferrite (is nanobind in .venv?)" >&2
  exit 1
fi
rm -f python/ferrite/_core*.so
ln -s "$root/$ext" python/ferrite/
ln -sfn "$root/$build/lib/ferrite/backends" python/ferrite/backends
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -n 1)
echo "$root/python" > "$site/ferrite-dev.pth"
dist="$site/ferrite-$version.dist-info"
rm -rf "$site"/ferrite-*.dist-info
mkdir -p "$dist"
printf 'Metadata-Version: 2.1\nName: ferrite\nVersion: %s\n' "$version" > "$dist/METADATA"
printf '[torch_dynamo_backends]\nferrite = ferrite.pytorch.backend:ferrite_backend\n' \
  > "$dist/entry_points.txt"
echo "development" > "$dist/INSTALLER"
printf 'ferrite-dev.pth,,\n%s/METADATA,,\n%s/entry_points.txt,,\n%s/INSTALLER,,\n%s/RECORD,,\n' \
  "${dist##*/}" "${dist##*/}" "${dist##*/}" "${dist##*/}" > "$dist/RECORD"
echo "dev_install_python: ferrite $version -> .venv (sources: python/, extension: $ext)"
