"""Corrected expected outputs for ONNX node cases whose shipped outputs are wrong.

scripts/conformance.py runs each case listed here against a copy of the case whose output_*.pb
files are recomputed from its inputs by an independent implementation of the operator's
specification (numpy, or ONNX's own reference evaluator running the model as written). ferrite
must match the corrected outputs exactly as it must match any other case's; the case is reported
as passing "against corrected data" with the upstream issue. An erratum whose corrected outputs
equal the shipped ones is stale (the onnx release fixed its data) and fails the check, so a
correction never outlives the defect it works around.
"""
import glob
import os
import shutil

import numpy as np
import onnx
from onnx import numpy_helper


def qlinearmatmul_spec(model, inputs):
    """QLinearMatMul as its specification states: the integer product of the zero-point-shifted
    operands, requantized with a_scale * b_scale / y_scale, rounded half to even, plus
    y_zero_point, saturated to the output type (ONNX 1.16's reference wraps int8 around)."""
    a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp = inputs
    acc = (a.astype(np.int32) - a_zp.astype(np.int32)) @ (b.astype(np.int32) - b_zp.astype(np.int32))
    scale = a_scale.astype(np.float32) * b_scale.astype(np.float32) / y_scale.astype(np.float32)
    y = np.rint(acc.astype(np.float32) * scale) + y_zp.astype(np.float32)
    bounds = np.iinfo(y_zp.dtype)
    return [np.clip(y, bounds.min, bounds.max).astype(y_zp.dtype)]


def onnx_reference(model, inputs):
    """The model as written, run by ONNX's reference evaluator."""
    from onnx.reference import ReferenceEvaluator
    feeds = {vi.name: x for vi, x in zip(model.graph.input, inputs)}
    return ReferenceEvaluator(model).run(None, feeds)


_QLINEAR = ("expected output wraps int8 instead of saturating (onnx#7835; onnx PR #7868 "
            "regenerates it): corrected by numpy's QLinearMatMul of the specification")
ERRATA = {
    "test_qlinearmatmul_2D_int8_float16": (qlinearmatmul_spec, _QLINEAR),
    "test_qlinearmatmul_2D_int8_float32": (qlinearmatmul_spec, _QLINEAR),
    "test_qlinearmatmul_3D_int8_float16": (qlinearmatmul_spec, _QLINEAR),
    "test_qlinearmatmul_3D_int8_float32": (qlinearmatmul_spec, _QLINEAR),
    "test_adam_multiple": (
        onnx_reference,
        "expected outputs use epsilon 1e-2, the model's Adam has none (schema default) "
        "(onnx#7749): corrected by onnx.reference running the model as written"),
}


def _numbered(directory, prefix):
    """input_0.pb, input_1.pb, ... in numeric order (input_10 after input_9)."""
    files = glob.glob(os.path.join(directory, prefix + "_*.pb"))
    return sorted(files, key=lambda f: int(os.path.basename(f)[len(prefix) + 1:-3]))


def _load(path):
    return numpy_helper.to_array(onnx.load_tensor(path))


def write_corrected_case(src, dst, fn):
    """Copies the case at `src` to `dst` with every data set's outputs recomputed by `fn`.
    Returns the largest absolute difference from the shipped outputs (0 means stale)."""
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    shutil.copy(os.path.join(src, "model.onnx"), dst)
    model = onnx.load(os.path.join(src, "model.onnx"))
    worst = 0.0
    for ds in sorted(glob.glob(os.path.join(src, "test_data_set_*"))):
        out_dir = os.path.join(dst, os.path.basename(ds))
        os.makedirs(out_dir)
        in_files = _numbered(ds, "input")
        for f in in_files:
            shutil.copy(f, out_dir)
        shipped = [onnx.load_tensor(f) for f in _numbered(ds, "output")]
        corrected = fn(model, [_load(f) for f in in_files])
        if len(corrected) != len(shipped):
            raise RuntimeError(f"{src}: the erratum computes {len(corrected)} outputs, "
                               f"the case has {len(shipped)}")
        for i, (old, new) in enumerate(zip(shipped, corrected)):
            want = numpy_helper.to_array(old)
            new = np.asarray(new).astype(want.dtype).reshape(want.shape)
            worst = max(worst, float(np.max(np.abs(new.astype(np.float64) - want.astype(np.float64)))))
            t = numpy_helper.from_array(new, old.name)
            with open(os.path.join(out_dir, f"output_{i}.pb"), "wb") as f:
                f.write(t.SerializeToString())
    return worst
