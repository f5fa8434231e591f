#!/usr/bin/env python3
"""ONNX Runtime side of `ferrite bench --compare onnxruntime`.

A long-lived child of `ferrite bench`: it loads the model once into an ONNX Runtime session (CPU
execution provider, ORT_ENABLE_ALL graph optimisations, intra-op threads = --threads, one inter-op
thread, sequential execution), reads the SAME input files ferrite runs on, and then answers
commands on stdin, so that ferrite can interleave blocks of ORT runs with blocks of its own runs.

Protocol (one line per message, UTF-8):
  child -> parent, once at start:  ready {"version": ..., "load_seconds": ..., ...}   (JSON)
                              or:  error MESSAGE                                     (then exit 1)
  parent -> child:                 run N       time N back-to-back session.run calls
  child -> parent:                 times T1 T2 ... TN   (seconds, one per run, perf_counter)
                              or:  error MESSAGE
  parent -> child:                 quit        (or end of stdin) exits 0

At start the child runs the model once and writes its outputs to OUTPUT_DIR/output_<i>.pb
(TensorProto, model output order) so that ferrite can compare ORT's results with its own.
Inputs are DIR/input_<i>.pb, matched to the model's inputs by name when every name is one of the
model's inputs, else by position (the rule `ferrite run` uses).

Anything a library prints to stdout is redirected to stderr so it cannot corrupt the protocol.
"""

import argparse
import json
import os
import re
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--inputs", required=True, help="directory of input_<i>.pb files")
    ap.add_argument("--output-dir", required=True, help="where to write output_<i>.pb")
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (0 = ORT default)")
    args = ap.parse_args()

    # The protocol channel is a private copy of the original stdout; fd 1 becomes stderr.
    proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(line):
        proto.write(line + "\n")
        proto.flush()

    try:
        import numpy as np
        import onnx
        from onnx import numpy_helper
        import onnxruntime as ort
    except Exception as e:  # noqa: BLE001 - reported to the parent
        send(f"error cannot import onnxruntime/onnx/numpy with {sys.executable}: {e}")
        return 1

    try:
        t0 = time.perf_counter()
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.log_severity_level = 3
        sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
        load_seconds = time.perf_counter() - t0

        files = []
        for name in os.listdir(args.inputs):
            m = re.fullmatch(r"input_([0-9]+)\.pb", name)
            if m:
                files.append((int(m.group(1)), os.path.join(args.inputs, name)))
        files.sort()
        tensors = []
        for _, path in files:
            tp = onnx.TensorProto()
            with open(path, "rb") as f:
                tp.ParseFromString(f.read())
            tensors.append((tp.name, numpy_helper.to_array(tp)))
        model_inputs = [i.name for i in sess.get_inputs()]
        if tensors and all(n in model_inputs for n, _ in tensors):
            feeds = {n: a for n, a in tensors}
        else:
            if len(tensors) > len(model_inputs):
                raise ValueError(f"{len(tensors)} input files for {len(model_inputs)} model inputs")
            feeds = {model_inputs[k]: a for k, (_, a) in enumerate(tensors)}

        t1 = time.perf_counter()
        outs = sess.run(None, feeds)
        first_run_seconds = time.perf_counter() - t1
        os.makedirs(args.output_dir, exist_ok=True)
        for i, (meta, value) in enumerate(zip(sess.get_outputs(), outs)):
            tp = numpy_helper.from_array(np.asarray(value), name=meta.name)
            with open(os.path.join(args.output_dir, f"output_{i}.pb"), "wb") as f:
                f.write(tp.SerializeToString())
    except Exception as e:  # noqa: BLE001 - reported to the parent
        send("error " + " ".join(f"{type(e).__name__}: {e}".split()))
        return 1

    send("ready " + json.dumps({
        "version": ort.__version__,
        "providers": sess.get_providers(),
        "graph_optimization_level": "ORT_ENABLE_ALL",
        "intra_op_num_threads": args.threads,
        "inter_op_num_threads": 1,
        "execution_mode": "ORT_SEQUENTIAL",
        "load_seconds": load_seconds,
        "first_run_seconds": first_run_seconds,
    }))

    clock = time.perf_counter
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "quit":
            break
        if cmd[0] == "run" and len(cmd) == 2 and cmd[1].isdigit():
            times = []
            try:
                for _ in range(int(cmd[1])):
                    t = clock()
                    sess.run(None, feeds)
                    times.append(clock() - t)
            except Exception as e:  # noqa: BLE001 - reported to the parent
                send("error " + " ".join(f"{type(e).__name__}: {e}".split()))
                continue
            send("times " + " ".join(f"{t:.9f}" for t in times))
        else:
            send(f"error unknown command {line.strip()!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
