#!/usr/bin/env python3
"""Few-row fully-connected products on XNNPACK against numpy (float64), not against EAGER: EAGER runs
the same packed few-row kernel (ops/gemm_packed.h), so comparing the two would not catch a wrong
kernel.

The XNNPACK runtime runs a partition made only of fully-connected nodes on constant weights (plus
the bias Adds and Relu/Clip folded into them, and reshapes) on EAGER's packed kernel on its own
thread pool when every product has at most 16 rows, and through XNNPACK's fully_connected above;
float Gemm/MatMul nodes outside partitions (here: FusedMatMul with a Gelu, which XNNPACK has no
node for) run EAGER's kernel on that pool. Each model runs at a batch giving few rows and one giving
more than 16, at 1 and 2 threads, through `alma run -c XNNPACK`, and the plan (`-v`) must show the
route. A wrong panel split, bias, alpha/beta or folded activation errs by O(1); the error allowed
is 1e-4 * max(1, max|ref|).

usage: check_few_rows.py ALMA WORKDIR"""
import math
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(4321)
F = TensorProto.FLOAT


def w(name, *shape):
    a = (rng.standard_normal(shape) * 0.3).astype(np.float32)
    return numpy_helper.from_array(a, name), a


def save(path, nodes, inputs, inits):
    g = helper.make_graph(nodes, os.path.basename(path), inputs, [helper.make_tensor_value_info("y", F, None)], inits)
    ops = [helper.make_opsetid("", 13)]
    if any(n.domain == "alma" for n in nodes):
        ops.append(helper.make_opsetid("alma", 1))
    m = helper.make_model(g, opset_imports=ops, producer_name="check_few_rows.py")
    m.ir_version = 7
    onnx.save(m, path)


def gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def models(d):
    out = []
    # MatMul -> Add(bias) -> Relu -> MatMul: one partition (the Add folds into the first product as
    # its bias, the Relu as its clamp); N * 8 rows: 8 (packed) at N = 1, 24 (XNNPACK) at N = 3
    t1, w1 = w("w1", 64, 48)
    tb, b1 = w("b1", 48)
    t2, w2 = w("w2", 48, 40)
    save(os.path.join(d, "fc_chain.onnx"), [
        helper.make_node("MatMul", ["x", "w1"], ["m"]),
        helper.make_node("Add", ["m", "b1"], ["a"]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["y"])],
        [helper.make_tensor_value_info("x", F, ["N", 8, 64])], [t1, tb, t2])
    out.append(("fc_chain", [8, 64], (1, 3), lambda x: np.maximum(x @ w1 + b1, 0) @ w2, None))
    # Reshape -> Gemm(transB, alpha, beta, C): 4 rows per batch item; 20 at N = 5
    tw, gw = w("gw", 40, 32)
    tc, gc = w("gc", 40)
    shp = numpy_helper.from_array(np.array([-1, 32], dtype=np.int64), "shp")
    save(os.path.join(d, "gemm_reshape.onnx"), [
        helper.make_node("Reshape", ["x", "shp"], ["r"]),
        helper.make_node("Gemm", ["r", "gw", "gc"], ["y"], transB=1, alpha=0.5, beta=2.0)],
        [helper.make_tensor_value_info("x", F, ["N", 4, 32])], [tw, tc, shp])
    out.append(("gemm_reshape", [4, 32], (1, 5), lambda x: 0.5 * (x.reshape(-1, 32) @ gw.T) + 2.0 * gc, None))
    # FusedMatMul with Gelu (no XNNPACK node: EAGER's kernel on the runtime's pool), 72 columns (4.5
    # panels of 16), then a Gemm with transA (XNNPACK declines it; EAGER's kernel, unpacked)
    tm, mw = w("mw", 64, 72)
    tmb, mb = w("mb", 72)
    tg, g2 = w("g2", 72, 24)
    save(os.path.join(d, "pooled_gelu.onnx"), [
        helper.make_node("FusedMatMul", ["x", "mw", "mb"], ["g"], domain="alma", activation="Gelu"),
        helper.make_node("Reshape", ["g", "shp"], ["g2d"]),
        helper.make_node("Transpose", ["g2d"], ["gt"], perm=[1, 0]),
        helper.make_node("Gemm", ["gt", "g2"], ["y"], transA=1)],
        [helper.make_tensor_value_info("x", F, ["N", 4, 64])],
        [tm, tmb, tg, numpy_helper.from_array(np.array([-1, 72], dtype=np.int64), "shp")])
    out.append(("pooled_gelu", [4, 64], (1, 3, 5), lambda x: gelu(x @ mw + mb).reshape(-1, 72) @ g2,
                "EAGER kernel on XNNPACK's threads"))
    return out


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    alma, d = sys.argv[1], sys.argv[2]
    os.makedirs(d, exist_ok=True)
    bad = 0
    for name, shape, batches, ref, route in models(d):
        path = os.path.join(d, name + ".onnx")
        for n in batches:
            x = rng.standard_normal([n] + shape).astype(np.float32)
            xp = os.path.join(d, "%s_x%d.npy" % (name, n))
            np.save(xp, x)
            want = ref(x.astype(np.float64))
            for threads in (1, 2):
                od = os.path.join(d, "%s_out_%d_%d" % (name, n, threads))
                r = subprocess.run([alma, "run", path, "-c", "XNNPACK", "-t", str(threads), "-i", "x=" + xp, "-o", od, "-v"],
                                   capture_output=True, text=True)
                what = "%s batch %d, %d thread%s" % (name, n, threads, "" if threads == 1 else "s")
                if r.returncode != 0:
                    print("FAIL %s: alma run failed\n%s%s" % (what, r.stdout, r.stderr))
                    bad += 1
                    continue
                # the plan (printed after the run): the packed route taken at few rows only
                rows = n * shape[0]
                want_route = route or ("packed kernel on XNNPACK's threads (%d run%s so far)" %
                                       (rows <= 16, "" if rows <= 16 else "s"))
                if want_route not in r.stdout + r.stderr:
                    print("FAIL %s: the plan does not say '%s'\n%s%s" % (what, want_route, r.stdout, r.stderr))
                    bad += 1
                got = np.load(os.path.join(od, "y.npy")).astype(np.float64)
                if got.shape != want.shape:
                    print("FAIL %s: shape %s, want %s" % (what, got.shape, want.shape))
                    bad += 1
                    continue
                err = float(np.max(np.abs(got - want)))
                tol = 1e-4 * max(1.0, float(np.max(np.abs(want))))
                ok = err <= tol
                bad += not ok
                print("%s %s: max abs err %.3g (allowed %.3g)" % ("ok  " if ok else "FAIL", what, err, tol))
    print("check_few_rows: %d failure%s" % (bad, "" if bad == 1 else "s"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
