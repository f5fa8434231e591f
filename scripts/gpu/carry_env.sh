# Sourced on the GPU machine: the carried libraries (and Python package, where packed with
# PY_BUILD set) found by the ferrite binaries and python3 there; the CUDA libraries of the
# toolkit, else of the installed PyTorch wheels. Sets `carry` to the carry folder's path.
#   source scripts/gpu/carry_env.sh [CARRY_DIR]   (default .devcarry)
carry=$(cd "${1:-.devcarry}" && pwd)
[ -f "$carry/lib/libdnnl.so.2.xz" ] && [ ! -f "$carry/lib/libdnnl.so.2" ] && xz -dk "$carry/lib/libdnnl.so.2.xz"
extra=""
for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia, os; p = list(nvidia.__path__)[0]; print(" ".join(os.path.join(p, s, "lib") for s in ("cu13", "cublas", "cuda_nvrtc", "cudnn", "nccl")))' 2>/dev/null); do
  [ -d "$d" ] && extra="$extra:$d"
done
export LD_LIBRARY_PATH="$carry/lib$extra:${LD_LIBRARY_PATH:-}"
export PYTHONPATH="$carry/py${PYTHONPATH:+:$PYTHONPATH}"
export FERRITE_CACHE_DIR=${FERRITE_CACHE_DIR:-/tmp/ferrite-cache}
