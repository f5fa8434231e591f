#!/usr/bin/env bash
# Tensor-parallel runs on a lent multi-GPU machine (issue 17), in stages that fit one call each.
#   source scripts/gpu/carry_env.sh .devcarry
#   scripts/gpu/tp_run.sh STAGE OUT [CARRY]
# CARRY/tp_models/<config>/model.onnx.xz and model.json come from
#   scripts/gpu/make_decoder_onnx.py graph <config> DIR   (run where torch is; seconds to minutes)
# and the weights are made here (make_decoder_onnx.py weights). Results: OUT/tp.jsonl.
# Stages:
#   tests   the 2-process test (gloo, then NCCL on cuda) and `tp_bench.py check`
#   7b      ferrite llama-7b at TP 1 and 2; PyTorch eager and DTensor TP 2
#   xl      ferrite gpt2-xl at TP 1 and 2; PyTorch eager
#   70b     llama-70b-40l at TP 1 and 2 (outputs compared), llama-70b at TP 1 (too big) and 2
set -u
stage=$1 out=$2 carry=${3:-.devcarry}
mkdir -p "$out"
model() {  # model CONFIG -> /tmp/tp/CONFIG with its weights
  local d=/tmp/tp/$1
  mkdir -p "$d"
  [ -f "$d/model.onnx" ] || xz -dc "$carry/tp_models/$1/model.onnx.xz" > "$d/model.onnx"
  cp "$carry/tp_models/$1/model.json" "$d/"
  python3 scripts/gpu/make_decoder_onnx.py weights "$d"
}
bench() { python3 scripts/gpu/tp_bench.py "$@" --json "$out/tp.jsonl"; }
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
case $stage in
  tests)
    # the test reads the zoo from ../shared/models
    mkdir -p ../shared && [ -e ../shared/models ] || ln -s "$(cd "$carry" && pwd)/models" ../shared/models
    (cd tests/python && timeout 300 python3 -m pytest -q -rs test_tensor_parallel_processes.py 2>&1 | tail -15)
    timeout 200 python3 scripts/gpu/tp_bench.py check --config llama-tiny --tp 2
    timeout 200 python3 scripts/gpu/tp_bench.py check --config gpt2-tiny --tp 2 ;;
  7b)
    model llama-7b
    bench ferrite /tmp/tp/llama-7b --tp 1 2
    bench torch --config llama-7b
    timeout 240 torchrun --nproc_per_node 2 scripts/gpu/tp_bench.py torch --config llama-7b \
      --json "$out/tp.jsonl" 2>&1 | grep -v "^W1\|warn" | tail -5 ;;
  xl)
    model gpt2-xl
    bench ferrite /tmp/tp/gpt2-xl --tp 1 2
    bench torch --config gpt2-xl ;;
  70b)
    model llama-70b-40l
    bench ferrite /tmp/tp/llama-70b-40l --tp 1 2 --shapes 8x512 1x128
    model llama-70b
    bench ferrite /tmp/tp/llama-70b --tp 1 2 --shapes 8x512 1x128 ;;
  *) echo "unknown stage $stage"; exit 2 ;;
esac
free -g | head -2
