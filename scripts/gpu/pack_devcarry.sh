#!/usr/bin/env bash
# Packs what scripts/gpu/run_cuda_tests.sh needs on a GPU machine into DEST (default
# .devcarry): stripped binaries of BUILD, the shared libraries GPU machines lack, and the shared
# model zoo's recipes and the microbenchmarks (weights are regenerated there by
# ferrite-materialize). Stays under 64 MiB.
#   scripts/gpu/pack_devcarry.sh BUILD_DIR DEST [SHARED_MODELS]
set -euo pipefail
build=$1 dest=$2 shared=${3:-/work/shared/models}
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib" "$dest/models"
for b in ferrite ferrite_unit_tests ferrite-materialize; do strip -o "$dest/bin/$b" "$build/bin/$b"; done
libdir=/usr/lib/x86_64-linux-gnu
for l in libprotobuf.so.32 libonnx.so.1 libonnx_proto.so.1 libgomp.so.1 libgtest.so.1.12.1 libgtest_main.so.1.12.1; do
  [ -e "$libdir/$l" ] && cp -L "$libdir/$l" "$dest/lib/"  # the soname only (not its link target too)
done
xz -T2 -6 -c "$libdir/libdnnl.so.2" > "$dest/lib/libdnnl.so.2.xz"
for m in "$shared"/*/; do cp -r "$m" "$dest/models/"; done
# The microbenchmarks (scripts/gpu/micro_bench.sh), as recipes too.
repo=$(cd "$(dirname "$0")/../.." && pwd)
py=${FERRITE_PYTHON:-$repo/.venv/bin/python}
"$py" "$repo/scripts/gpu/make_micro_models.py" "$dest/micro"
# The Python package for the GPU machine's interpreter (PY_BUILD: a build of target _core for
# that Python, e.g. build-py312): CARRY/py goes on PYTHONPATH there; the dist-info registers the
# torch.compile backend.
if [ -n "${PY_BUILD:-}" ]; then
  mkdir -p "$dest/py"
  cp -rL "$repo/python/ferrite" "$dest/py/ferrite"
  rm -rf "$dest/py/ferrite/_core"*.so "$dest/py/ferrite/backends" "$dest/py/ferrite"/__pycache__ "$dest/py/ferrite"/*/__pycache__
  for so in "$PY_BUILD"/python/ferrite/_core*.so; do strip -o "$dest/py/ferrite/${so##*/}" "$so"; done
  dist="$dest/py/ferrite-0.1.0.dist-info"
  mkdir -p "$dist"
  printf 'Metadata-Version: 2.1\nName: ferrite\nVersion: 0.1.0\n' > "$dist/METADATA"
  printf '[torch_dynamo_backends]\nferrite = ferrite.pytorch.backend:ferrite_backend\n' > "$dist/entry_points.txt"
fi
git -C "$(dirname "$0")" log -1 --format='%h %cd' --date=iso > "$dest/COMMIT" 2>/dev/null || true
chmod -R u+w "$dest"
du -sh "$dest"
