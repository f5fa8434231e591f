#!/usr/bin/env python3
"""The issue's CUDA microbenchmarks as ONNX models, for `ferrite bench` (scripts/gpu/micro_bench.sh).

    .venv/bin/python scripts/gpu/make_micro_models.py OUT_DIR

writes OUT_DIR/{pointwise,softmax,layernorm,gemm_gelu}/model.onnx (opset 20):
  pointwise  y = sin((x + 1) * 2), x f32 [2^28]
  softmax    y = softmax(x, axis=-1), x f32 [16384, 4096]
  layernorm  y = LayerNormalization(x, scale, bias), x f32 [16384, 4096]
  gemm_gelu  y = gelu(x @ W + b) (erf form), x [8192, 4096], W [4096, 4096], f32 interface;
             timed with --precision bf16 (includes casting x to bf16 and y back to f32)
  gemm_gelu_bf16  the same with x, y, W, b in bf16 (W and b are Cast from f32 recipes, folded
             at compile time): the issue's bf16 GEMM as torch runs it
Large initializers are written without data, marked for regeneration (doc_string "materialize", the
zoo's recipe in ../shared/models/README.md), so the files stay tiny; `ferrite-materialize` fills them
in on the GPU machine.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper


def recipe_initializer(name, dims):
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    t.doc_string = "materialize"
    return t


def save(out, name, graph):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))


def f32(name, dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def main(out):
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    save(out, "pointwise", helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["a"]), helper.make_node("Mul", ["a", "two"], ["m"]),
         helper.make_node("Sin", ["m"], ["y"])],
        "pointwise", [f32("x", [1 << 28])], [f32("y", [1 << 28])], [one, two]))
    save(out, "softmax", helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["y"], axis=-1)],
        "softmax", [f32("x", [16384, 4096])], [f32("y", [16384, 4096])]))
    scale = helper.make_tensor("scale", TensorProto.FLOAT, [4096],
                               (1.0 + 0.01 * np.sin(np.arange(4096))).astype(np.float32))
    bias = helper.make_tensor("bias", TensorProto.FLOAT, [4096],
                              (0.01 * np.cos(np.arange(4096))).astype(np.float32))
    save(out, "layernorm", helper.make_graph(
        [helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=-1,
                          epsilon=1e-5)],
        "layernorm", [f32("x", [16384, 4096])], [f32("y", [16384, 4096])], [scale, bias]))
    save(out, "gemm_gelu", helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["h"]),
         helper.make_node("Gelu", ["h"], ["y"])],
        "gemm_gelu", [f32("x", [8192, 4096])], [f32("y", [8192, 4096])],
        [recipe_initializer("W", [4096, 4096]), recipe_initializer("b", [4096])]))
    bf = TensorProto.BFLOAT16
    save(out, "gemm_gelu_bf16", helper.make_graph(
        [helper.make_node("Cast", ["W"], ["Wb"], to=bf), helper.make_node("Cast", ["b"], ["bb"], to=bf),
         helper.make_node("MatMul", ["x", "Wb"], ["xw"]), helper.make_node("Add", ["xw", "bb"], ["h"]),
         helper.make_node("Gelu", ["h"], ["y"])],
        "gemm_gelu_bf16", [helper.make_tensor_value_info("x", bf, [8192, 4096])],
        [helper.make_tensor_value_info("y", bf, [8192, 4096])],
        [recipe_initializer("W", [4096, 4096]), recipe_initializer("b", [4096])]))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
