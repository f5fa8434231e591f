# Sourced on the GPU machine: the carried ferrite package and libraries for its python3.
#   source scripts/gpu/py_env.sh [CARRY_DIR]   (default .devcarry, packed with PY_BUILD set)
carry=$(cd "${1:-.devcarry}" && pwd)
[ -f "$carry/lib/libdnnl.so.2.xz" ] && [ ! -f "$carry/lib/libdnnl.so.2" ] && xz -dk "$carry/lib/libdnnl.so.2.xz"
extra=""
for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia, os; p = list(nvidia.__path__)[0]; print(" ".join(os.path.join(p, s, "lib") for s in ("cu13", "cublas", "cuda_nvrtc", "cudnn")))' 2>/dev/null); do
  [ -d "$d" ] && extra="$extra:$d"
done
export LD_LIBRARY_PATH="$carry/lib$extra:${LD_LIBRARY_PATH:-}"
export PYTHONPATH="$carry/py${PYTHONPATH:+:$PYTHONPATH}"
export FERRITE_CACHE_DIR=${FERRITE_CACHE_DIR:-/tmp/ferrite-cache}
