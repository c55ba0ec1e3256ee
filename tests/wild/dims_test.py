#!/usr/bin/python3
"""Unknown dimensions written as dim_param "?" or "" (paddle2onnx declares its OCR models' inputs
[-1,3,?,?]) are each their own unknown size, not one symbol shared by every such dimension: a
[2,3,6,10] input runs on every float conversion, its outputs equal numpy's, and its Shape is the
real one. A named symbol used twice ([N,3,s,s]) still refuses two different sizes.

    dims_test.py ALMA WORKDIR
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper as h, numpy_helper as nh

CONVS = ["EAGER", "FOLD+EAGER", "FOLD+FUSE+EAGER", "FOLD+FUSE+DNNL", "FOLD+DNNL", "FOLD+BLAS", "FOLD+FUSE+BLAS",
         "FOLD+XNNPACK", "FOLD+FUSE+XNNPACK"]


def model(path, dims):
    """x[dims] -> Conv 1x1 (3 -> 4) + bias -> Relu -> MaxPool 2x2 s2 -> y; Shape(x) -> s."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 3, 1, 1)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    g = h.make_graph(
        [h.make_node("Conv", ["x", "w", "b"], ["c"]), h.make_node("Relu", ["c"], ["r"]),
         h.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
         h.make_node("Shape", ["x"], ["s"])],
        "dims", [h.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, None), h.make_tensor_value_info("s", TensorProto.INT64, [4])],
        [nh.from_array(w, "w"), nh.from_array(b, "b")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, path)
    return w, b


def reference(x, w, b):
    c = np.maximum(np.einsum("nchw,oc->nohw", x, w[:, :, 0, 0]) + b[None, :, None, None], 0)
    n, o, hh, ww = c.shape
    return c[:, :, :hh // 2 * 2, :ww // 2 * 2].reshape(n, o, hh // 2, 2, ww // 2, 2).max(axis=(3, 5))


def main():
    alma, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 10)).astype(np.float32)
    xf = os.path.join(work, "x.npy")
    np.save(xf, x)
    listed = subprocess.run([alma, "list"], capture_output=True, text=True).stdout
    fails = 0
    for tag, dims in (("question", [-1, 3, "?", "?"]), ("empty", ["", 3, "", "?"])):
        path = os.path.join(work, f"dims_{tag}.onnx")
        w, b = model(path, dims)
        if tag == "empty":  # helper writes "" as a dim_param only when set by hand
            m = onnx.load(path)
            for d, v in zip(m.graph.input[0].type.tensor_type.shape.dim, dims):
                if v == "":
                    d.Clear()
                    d.dim_param = ""
            onnx.save(m, path)
        want = reference(x, w, b)
        for c in CONVS:
            if not any(line.split()[1:3] == [c, "yes"] for line in listed.splitlines() if len(line.split()) > 2):
                print(f"{tag} {c}: not available here")
                continue
            od = os.path.join(work, f"out_{tag}_{c.replace('+', '_')}")
            r = subprocess.run([alma, "run", path, "-i", f"x={xf}", "-c", c, "-o", od], capture_output=True, text=True)
            if r.returncode:
                print(f"FAIL {tag} {c}: exit {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}")
                fails += 1
                continue
            y, s = np.load(os.path.join(od, "y.npy")), np.load(os.path.join(od, "s.npy"))
            ok = y.shape == want.shape and np.allclose(y, want, rtol=1e-5, atol=1e-5) and list(s) == [2, 3, 6, 10]
            print(f"{'ok' if ok else 'FAIL'} {tag} {c}: y {list(y.shape)} s {list(s)}"
                  + ("" if ok else f" (want y {list(want.shape)}, s [2, 3, 6, 10])"))
            fails += not ok
    # a named symbol is one size: [N,3,s,s] fed 6x10 is refused, naming the symbol
    path = os.path.join(work, "dims_named.onnx")
    model(path, ["N", 3, "s", "s"])
    r = subprocess.run([alma, "run", path, "-i", f"x={xf}"], capture_output=True, text=True)
    msg = (r.stderr + r.stdout).strip()
    named_ok = r.returncode not in (0,) and r.returncode < 128 and "'s'" in msg
    print(f"{'ok' if named_ok else 'FAIL'} named symbol 's' bound twice: exit {r.returncode}: {msg[-200:]}")
    fails += not named_ok
    print(f"{fails} failure(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
