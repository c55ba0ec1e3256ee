"""GlobalLpPool (opsets 1, 2, 22: jax2onnx writes it for jnp.linalg.norm over whole planes), which
the ONNX backend node tests do not cover: alma (`alma run`, EAGER and FOLD+FUSE+DNNL) against the
spec's formula in numpy, Y[n, c] = (sum |X[n, c, ...]|^p)^(1/p), and against ONNX Runtime where it
has a kernel (float32). p is a float attribute at opset 1, an int from opset 2 (default 2).

usage: check_global_lppool.py ALMA WORKDIR      (python with onnx, numpy; onnxruntime optional)"""
import os
import sys

import numpy as np

try:
    import onnx
    from onnx import TensorProto as TP, helper
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)
try:
    import onnxruntime as ort
except ImportError:
    ort = None

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from alma_cli import alma_run  # noqa: E402

ALMA, WORK = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(11)
failures = []
TPS = {np.float32: TP.FLOAT, np.float64: TP.DOUBLE, np.float16: TP.FLOAT16}


def case(name, shape, dtype, opset, p=None):
    x = rng.standard_normal(shape).astype(dtype)
    attrs = {} if p is None else {"p": p}
    node = helper.make_node("GlobalLpPool", ["x"], ["y"], **attrs)
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TPS[dtype], shape)],
                          [helper.make_tensor_value_info("y", TPS[dtype], None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    pv = 2.0 if p is None else float(p)
    axes = tuple(range(2, len(shape)))
    want = (np.abs(x.astype(np.float64)) ** pv).sum(axis=axes, keepdims=True) ** (1 / pv)
    refs = [("numpy", want)]
    if ort is not None and dtype == np.float32 and opset >= 2:  # ONNX Runtime has no GlobalLpPool-1
        try:
            s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
            refs.append(("onnxruntime", s.run(None, {"x": x})[0]))
        except Exception as e:
            print(f"   {name}: onnxruntime cannot run it ({str(e).splitlines()[0][:90]})")
    d = os.path.join(WORK, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)
    tol = {np.float16: 2e-3, np.float32: 2e-6, np.float64: 1e-12}[dtype]
    for conv in ("EAGER", "FOLD+FUSE+DNNL"):
        r = alma_run(ALMA, path, conv, {"x": x}, os.path.join(d, conv), check=False, timeout=60)
        if r.returncode:
            failures.append(f"{name} {conv}: alma failed: {r.stderr.strip()}")
            continue
        got = np.load(os.path.join(d, conv, "y.npy"))
        for who, ref in refs:
            if got.shape != ref.shape or got.dtype != x.dtype or \
                    not np.allclose(got.astype(np.float64), ref, rtol=tol, atol=tol):
                failures.append(f"{name} {conv}: {got.dtype}{got.shape} differs from {who} {ref.shape}")
    print(f"ok {name}")


case("v1_float_p3", [2, 3, 4, 5], np.float32, 1, 3.0)
case("v2_default_p", [2, 3, 4, 5], np.float32, 2)
case("v2_p1_rank3", [3, 2, 7], np.float32, 13, 1)
case("v22_p2_rank5", [1, 2, 3, 4, 2], np.float32, 22, 2)
case("v22_p4_double", [2, 2, 3, 3], np.float64, 22, 4)
case("v22_p3_half", [2, 3, 4, 4], np.float16, 22, 3)
case("v2_no_spatial", [4, 5], np.float32, 18, 2)

for f in failures:
    print("FAIL", f)
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
