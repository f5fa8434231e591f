#!/usr/bin/env bash
# The small decoder at TP 2 on cuda under NCCL settings, each run watched by tp_diag.sh (40 s):
# how the teardown hang of session 14 was narrowed down (it hung under every setting; only
# FERRITE_CUDA_GRAPHS=0 avoided it). Needs .devcarry/tp_models/llama-tiny (make_decoder_onnx.py).
#   OUT=dir bash scripts/gpu/nccl_variants.sh
source scripts/gpu/carry_env.sh .devcarry
d=/tmp/tp/llama-tiny; mkdir -p $d; xz -dc .devcarry/tp_models/llama-tiny/model.onnx.xz > $d/model.onnx; cp .devcarry/tp_models/llama-tiny/model.json $d/
python3 -c "import torch; print('nccl', torch.cuda.nccl.version())"
for v in "NCCL_GRAPH_REGISTER=0" "NCCL_NVLS_ENABLE=0" "NCCL_GRAPH_MIXING_SUPPORT=0" "NONE=1" "NCCL_GRAPH_REGISTER=0 NCCL_NVLS_ENABLE=0 NCCL_GRAPH_MIXING_SUPPORT=0"; do
  env $v scripts/gpu/tp_diag.sh 40 $OUT/v.log python3 scripts/gpu/tp_bench.py ferrite $d --tp 2 --shapes 2x16 1x8 4x32
  echo "$v: $(grep -c RESULT $OUT/v.log) results, $(grep -c STILL $OUT/v.log) hang"; cp $OUT/v.log "$OUT/v_${v%%=*}.log"
done
