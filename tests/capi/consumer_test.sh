#!/usr/bin/env bash
# The installed package as an application sees it: `cmake --install` of BUILD into a temporary
# prefix, then a C89 program built with pkg-config and a C++ one built with find_package(ferrite),
# each run on the convnet example (default device, and the gxu plugin found next to the installed
# library where it was built) and checked against its expected output.
#   consumer_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd); src=$(cd "$2" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
# Only the C API is exported.
bad=$(nm -D --defined-only "$prefix/lib/libferrite.so" | awk '{print $3}' | grep -v '^ferrite_' || true)
if [ -n "$bad" ]; then echo "libferrite.so exports more than the C API:"; echo "$bad" | head; exit 1; fi

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc -std=c89 -pedantic-errors -Wall -Wextra -Werror "$src/tests/capi/consumer/convnet.c" \
  $(pkg-config --cflags ferrite) $(pkg-config --libs ferrite) -lm -Wl,-rpath,"$prefix/lib" \
  -o "$tmp/convnet_c"
cmake -S "$src/tests/capi/consumer" -B "$tmp/cpp" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/cpp" >/dev/null

data=$src/examples/convnet/test_data_set_0
model=$src/examples/convnet/model.onnx
# Outside the source and build trees, so that nothing but the installed files can be found.
cd "$tmp"
"$tmp/convnet_c" "$model" "$data/input_0.pb" "$data/output_0.pb" "" | tee c.log
grep -q "^default device " c.log
"$tmp/cpp/convnet_cpp" "$model" "$data/input_0.pb" "$data/output_0.pb" cpu
if [ -f "$prefix/lib/ferrite/backends/libferrite_gxu.so" ]; then
  grep -q "^device gxu usable=1" c.log || { echo "installed gxu plugin not found"; exit 1; }
  "$tmp/convnet_c" "$model" "$data/input_0.pb" "$data/output_0.pb" gxu
fi
echo "consumer test passed"
