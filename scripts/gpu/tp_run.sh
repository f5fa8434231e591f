#!/usr/bin/env bash
# Tensor-parallel runs on a lent multi-GPU machine (issue 17), in stages that fit one call each.
#   source scripts/gpu/carry_env.sh .devcarry
#   scripts/gpu/tp_run.sh STAGE OUT [CARRY]
# CARRY/tp_models/<model>/model.onnx.xz and model.json come from
#   scripts/gpu/make_decoder_onnx.py graph <config> DIR [--decode]   (seconds to minutes)
# (<model> is the config, with -decode for a decoding step's graph), and the weights are made
# here (make_decoder_onnx.py weights). Results: OUT/tp.jsonl, one line per implementation and TP.
# TPS (default "1 2 4", or "1 2" on two GPUs) says which group sizes run.
# Stages:
#   tests      the 2-process test (gloo, then NCCL on cuda) and `tp_bench.py check` (prefill and
#              a decoding step; every TP against TP 1 and eager)
#   7b         llama-7b prefill: ferrite at each TP; PyTorch eager and DTensor at each TP > 1
#   7b-decode  llama-7b, one decoding step over a past of 512: the same
#   xl         gpt2-xl prefill and decoding step: ferrite at each TP, PyTorch eager (GPT-2's
#              Conv1D layers are not nn.Linear: DTensor's plans do not apply)
#   compiled   llama-7b under torch.compile (PyTorch's strongest configuration): one GPU with
#              CUDA graphs (reduce-overhead), DTensor at each TP > 1 in the default mode; prefill
#              8x512 and a decoding step over 1x512 (COMPILE_SHAPES, DECODE_SHAPES)
#   70b        llama-70b-40l at each TP (outputs compared), llama-70b (129.5 GiB of bf16) at each
#              TP: on 80 GiB cards TP 1 cannot hold it
#   110b       llama-110b (Qwen1.5-110B's shape, 207 GiB of bf16) at each TP: no single H100 or
#              H200 holds it (TP 2 needs 104 GiB a card: H200s; TP 4 fits H100s too)
#   110b-decode  its decoding step over a past of 512 (1x512, 8x512) at each TP
set -u
stage=$1 out=$2 carry=${3:-.devcarry}
tps=${TPS:-"1 2 4"}
mkdir -p "$out"
model() {  # model NAME -> /tmp/tp/NAME with its weights
  local d=/tmp/tp/$1
  mkdir -p "$d"
  [ -f "$d/model.onnx" ] || xz -dc "$carry/tp_models/$1/model.onnx.xz" > "$d/model.onnx"
  cp "$carry/tp_models/$1/model.json" "$d/"
  python3 scripts/gpu/make_decoder_onnx.py weights "$d"
}
bench() { python3 scripts/gpu/tp_bench.py "$@" --json "$out/tp.jsonl"; }
dtensor() {  # dtensor CONFIG ARGS...: PyTorch's tensor parallelism at each TP > 1
  local config=$1; shift
  for n in $tps; do
    [ "$n" = 1 ] && continue
    local log="$out/dtensor_${config}_${n}_$(echo "$*" | tr -cd 'a-z0-9').log"
    timeout 240 torchrun --nproc_per_node "$n" scripts/gpu/tp_bench.py torch --config "$config" \
      "$@" --json "$out/tp.jsonl" > "$log" 2>&1
    grep RESULT "$log" | tail -2
  done
}
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
case $stage in
  tests)
    # the test reads the zoo from ../shared/models
    mkdir -p ../shared && [ -e ../shared/models ] || ln -s "$(cd "$carry" && pwd)/models" ../shared/models
    (cd tests/python && timeout 200 python3 -m pytest -q -rs test_tensor_parallel_processes.py \
      > "$out/processes.log" 2>&1; tail -15 "$out/processes.log")
    for c in "llama-tiny" "gpt2-tiny" "llama-tiny --decode"; do
      timeout 100 python3 scripts/gpu/tp_bench.py check --config $c --tp $(echo $tps | cut -d' ' -f2-) \
        > "$out/check_${c// /_}.log" 2>&1
      grep -v "Warning\|warn" "$out/check_${c// /_}.log" | tail -8
    done ;;
  7b)
    model llama-7b
    bench ferrite /tmp/tp/llama-7b --tp $tps
    bench torch --config llama-7b
    dtensor llama-7b ;;
  7b-decode)
    model llama-7b-decode
    bench ferrite /tmp/tp/llama-7b-decode --tp $tps --shapes 1x512 8x512
    bench torch --config llama-7b --decode --shapes 1x512 8x512
    dtensor llama-7b --decode --shapes 1x512 8x512 ;;
  compiled)
    timeout 200 python3 scripts/gpu/tp_bench.py torch --config llama-7b --compile reduce-overhead \
      --shapes ${COMPILE_SHAPES:-8x512} --json "$out/tp.jsonl" > "$out/compile_prefill.log" 2>&1
    timeout 200 python3 scripts/gpu/tp_bench.py torch --config llama-7b --decode \
      --compile reduce-overhead --shapes ${DECODE_SHAPES:-1x512} --json "$out/tp.jsonl" \
      > "$out/compile_decode.log" 2>&1
    grep -h RESULT "$out"/compile_*.log
    dtensor llama-7b --compile default --shapes ${COMPILE_SHAPES:-8x512}
    dtensor llama-7b --decode --compile default --shapes ${DECODE_SHAPES:-1x512} ;;
  xl)
    model gpt2-xl
    bench ferrite /tmp/tp/gpt2-xl --tp $tps
    bench torch --config gpt2-xl
    model gpt2-xl-decode
    bench ferrite /tmp/tp/gpt2-xl-decode --tp $tps --shapes 1x512 8x512
    bench torch --config gpt2-xl --decode --shapes 1x512 8x512 ;;
  70b)
    model llama-70b-40l
    bench ferrite /tmp/tp/llama-70b-40l --tp $tps --shapes 8x512 1x128
    model llama-70b
    bench ferrite /tmp/tp/llama-70b --tp $tps --shapes 8x512 1x128 ;;
  110b)
    model llama-110b
    bench ferrite /tmp/tp/llama-110b --tp $tps --shapes 8x512 1x128 ;;
  110b-decode)
    model llama-110b-decode
    bench ferrite /tmp/tp/llama-110b-decode --tp $tps --shapes 1x512 8x512 ;;
  *) echo "unknown stage $stage"; exit 2 ;;
esac
free -g | head -2
