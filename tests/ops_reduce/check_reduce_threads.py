"""Large float32 sums (ReduceSum, ReduceMean, ReduceLogSum) through alma against ONNX Runtime, on 1,
2 and 3 threads, on EAGER and every other runtime available here.

usage: check_reduce_threads.py ALMA WORKDIR      (python with onnx, onnxruntime, numpy)

EAGER's kernel splits a float32 sum of at least 64K elements over the threads of the runtime that
runs it (BLAS and XNNPACK take these nodes from EAGER with their thread pools; DNNL runs its own
reduction) by the outer kept axis; each output is summed by one thread in one order, so a
runtime's outputs on 2 and 3 threads must be the same bits as on 1, and all within 1e-5 (relative to the largest magnitude) of ONNX Runtime's. Cases:
every reduced-axes pattern of a [4, 96, 200] tensor (middle, last, first, first+last, all kept
but one, keepdims 0 and 1, an odd last dim), a [3, 7, 5000] one (a long reduced row) and axes
given negative. Exit 0 when every case passes, 1 otherwise."""
import os
import sys

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from alma_cli import alma_run, available, read_outputs  # noqa: E402

TOL = 1e-5
CASES = [  # op, shape, axes, keepdims
    ("ReduceSum", (4, 96, 200), [1], 1),
    ("ReduceSum", (4, 96, 200), [2], 0),
    ("ReduceSum", (4, 96, 200), [0], 1),
    ("ReduceSum", (4, 96, 200), [0, 2], 0),
    ("ReduceSum", (4, 96, 201), [-2], 1),
    ("ReduceMean", (4, 96, 200), [1], 0),
    ("ReduceMean", (3, 7, 5000), [2], 1),
    ("ReduceMean", (3, 7, 5000), [1, 2], 1),
    ("ReduceLogSum", (4, 96, 200), [1], 1),
]


def make(op, shape, axes, keepdims):
    # opset 18: axes as an input for every Reduce op
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)
    g = helper.make_graph([node], "r", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [helper.make_tensor("axes", TensorProto.INT64, [len(axes)], axes)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m


def main():
    alma, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(7)
    convs = available(alma, ["EAGER", "BLAS", "XNNPACK", "DNNL"])
    bad = total = 0
    for i, (op, shape, axes, keep) in enumerate(CASES):
        m = make(op, shape, axes, keep)
        path = os.path.join(work, f"r{i}.onnx")
        with open(path, "wb") as f:
            f.write(m.SerializeToString())
        x = rng.standard_normal(shape).astype(np.float32)
        if op == "ReduceLogSum":
            x = np.abs(x) + 0.1  # a positive sum
        ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        for conv in convs:
            outs = {}
            for t in (1, 2, 3):
                d = os.path.join(work, f"r{i}_{conv}_t{t}")
                alma_run(alma, path, conv, {"x": x}, d, "--threads", str(t))
                outs[t] = read_outputs(d, ["y"])[0]
            name = f"{conv} {op} {shape} axes {axes} keepdims {keep}"
            err = float(np.max(np.abs(outs[1].astype(np.float64) - ref))) / max(1.0, float(np.max(np.abs(ref))))
            same = all(outs[t].shape == outs[1].shape and outs[t].tobytes() == outs[1].tobytes() for t in (2, 3))
            ok = outs[1].shape == ref.shape and err <= TOL and same
            print(f"{'ok ' if ok else 'BAD'} {name}: error {err:.2e} vs ONNX Runtime, "
                  f"{'same bits' if same else 'DIFFERENT bits'} on 1/2/3 threads")
            bad += not ok
            total += 1
    print(f"{total - bad} of {total} runs pass ({', '.join(convs)})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
