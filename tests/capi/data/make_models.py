"""Writes the C API tests' small models (checked in; rerun to regenerate them bit-exactly).

mlp_batch.onnx: x[batch,16] -> MatMul+Add -> Relu -> MatMul+Add -> Softmax -> y[batch,8], with
a symbolic batch dim: one compile serves every batch size, each size its own arena plan.
mlp_open.onnx: the same with the batch dim left unnamed, so sessions specialise on the first
size and recompile (automatic dynamic) on the second: compiles happen while other threads run.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def mlp(batch_dim):
    rng = np.random.default_rng(16)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 8)).astype(np.float32), "w2")
    b2 = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h2"]),
        helper.make_node("MatMul", ["h2", "w2"], ["h3"]),
        helper.make_node("Add", ["h3", "b2"], ["h4"]),
        helper.make_node("Softmax", ["h4"], ["y"], axis=-1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch_dim, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch_dim, 8])
    g = helper.make_graph(nodes, "mlp", [x], [y], [w1, b1, w2, b2])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


here = os.path.dirname(os.path.abspath(__file__))
onnx.save(mlp("batch"), os.path.join(here, "mlp_batch.onnx"))
onnx.save(mlp(None), os.path.join(here, "mlp_open.onnx"))
