#!/usr/bin/env python3
"""QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear through alma (EAGER, and DNNL with 1
and 2 threads) against ONNX Runtime and numpy's statement of the ONNX definitions, bit for bit.

The data aims at the vector kernels' edges: lengths that are not multiples of the vector widths,
exact ties at .5 (power-of-two scales make x / scale exact), near-ties with arbitrary scales (where
dividing and multiplying by 1 / scale round apart), values beyond the output range, +-inf, -0 and
NaN. NaN has no defined result in ONNX: alma gives 0 (docs/quantization.md), so NaN positions are
checked against 0 and left out of the ONNX Runtime comparison.

usage: check_qdq_ort.py ALMA WORKDIR [--no-dnnl]
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ALMA, WORK = sys.argv[1], sys.argv[2]
DNNL = "--no-dnnl" not in sys.argv[3:]
RANGES = {np.uint8: (0, 255), np.int8: (-128, 127)}
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL " + msg)


def float_data(rng, shape, scale_b):
    """Random floats around the quantized range, with ties, near-ties, inf, -0 and NaN; scale_b is
    the scale broadcast to shape."""
    x = (rng.standard_normal(shape) * 120.0).astype(np.float32) * scale_b
    flat, sb = x.reshape(-1), np.ascontiguousarray(scale_b).reshape(-1)
    n = flat.size
    k = rng.integers(-140, 140, n).astype(np.float32)
    tie = rng.random(n) < 0.3
    flat[tie] = ((k + 0.5) * sb)[tie]  # exact ties where the scale is a power of two
    near = rng.random(n) < 0.1
    flat[near] = np.nextafter(flat[near], np.float32(np.inf) * rng.choice([-1, 1], near.sum()).astype(np.float32))
    specials = np.array([np.inf, -np.inf, -0.0, 0.0, 1e30, -1e30, np.nan], np.float32)
    idx = rng.choice(n, min(n, 40), replace=False)
    flat[idx] = specials[rng.integers(0, len(specials), idx.size)]
    return x


def ref_quantize(x, s, zp, qt):
    lo, hi = RANGES[qt]
    q = (x / s).astype(np.float32)  # float32 division, as ONNX's reference
    with np.errstate(invalid="ignore"):
        r = np.clip(np.rint(q.astype(np.float64)) + zp.astype(np.float64), lo, hi)
    r[np.isnan(q)] = 0
    return r.astype(qt)


def ref_dequantize(xq, s, zp):
    return ((xq.astype(np.float32) - zp.astype(np.float32)) * s).astype(np.float32)


def bcast(v, shape, axis):
    if v.size == 1:
        return v.reshape(())
    sh = [1] * len(shape)
    sh[axis] = v.size
    return v.reshape(sh)


def run_alma(model, inputs, conv, threads, tag):
    d = os.path.join(WORK, tag)
    os.makedirs(d, exist_ok=True)
    args = [ALMA, "run", model, "-c", conv, "-t", str(threads), "-o", d]
    for name, arr in inputs.items():
        p = os.path.join(d, "in_" + name + ".npy")
        np.save(p, arr)
        args += ["-i", name + "=" + p]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        fail("%s: alma run failed (%d): %s" % (tag, r.returncode, r.stderr[-2000:]))
        return None
    return lambda name: np.load(os.path.join(d, name + ".npy"))


def compare(tag, got, want, nan_mask=None):
    if got.dtype != want.dtype or got.shape != want.shape:
        fail("%s: %s%s, expected %s%s" % (tag, got.dtype, got.shape, want.dtype, want.shape))
        return
    g, w = got, want
    if nan_mask is not None:
        g, w = got[~nan_mask], want[~nan_mask]
    if g.dtype.kind == "f":
        bad = g.view(np.uint32) != w.view(np.uint32)
    else:
        bad = g != w
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        fail("%s: %d of %d differ, first at %d: %r vs %r" % (tag, int(bad.sum()), bad.size, i, g.reshape(-1)[i],
                                                            w.reshape(-1)[i]))


def qdq_case(name, opset, shape, axis, qt, per_axis, seed):
    rng = np.random.default_rng(seed)
    C = shape[axis] if per_axis else 1
    # powers of two (exact ties) and arbitrary scales (near-ties), per channel
    pow2 = np.float32(2.0) ** rng.integers(-8, 2, C).astype(np.float32)
    arb = (rng.random(C) * 0.05 + 0.001).astype(np.float32)
    s = np.where(rng.random(C) < 0.5, pow2, arb).astype(np.float32)
    lo, hi = RANGES[qt]
    zp = rng.integers(lo // 2, hi // 2 + 1, C).astype(qt)
    if not per_axis:
        s, zp = s.reshape(()), zp.reshape(())
    sb, zb = bcast(s, shape, axis), bcast(zp, shape, axis)
    x = float_data(rng, shape, np.broadcast_to(sb, shape).astype(np.float32))
    xq = rng.integers(lo, hi + 1, shape).astype(qt)
    elem = TensorProto.UINT8 if qt == np.uint8 else TensorProto.INT8
    attrs = {"axis": axis} if opset >= 13 else {}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], **attrs),
             helper.make_node("DequantizeLinear", ["xq", "s", "zp"], ["y"], **attrs)]
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape)),
                           helper.make_tensor_value_info("xq", elem, list(shape))],
                          [helper.make_tensor_value_info("q", elem, list(shape)),
                           helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
                          [numpy_helper.from_array(s, "s"), numpy_helper.from_array(zp, "zp")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(m, path)
    want_q, want_y = ref_quantize(x, sb, zb, qt), ref_dequantize(xq, sb, zb)
    nan = np.isnan(x)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    oq, oy = sess.run(["q", "y"], {"x": x, "xq": xq})
    # the numpy statement agrees with ONNX Runtime (which checks the statement itself)
    compare(name + " numpy vs ORT q", want_q, oq, nan)
    compare(name + " numpy vs ORT y", want_y, oy)
    runs = [("EAGER", 1)] + ([("DNNL", 1), ("DNNL", 2)] if DNNL else [])
    for conv, t in runs:
        tag = "%s.%s.t%d" % (name, conv, t)
        out = run_alma(path, {"x": x, "xq": xq}, conv, t, tag)
        if out is None:
            continue
        compare(tag + " q vs ORT", out("q"), oq, nan)
        compare(tag + " q vs numpy (NaN -> 0)", out("q"), want_q)
        compare(tag + " y vs ORT", out("y"), oy)


def dyn_case(name, shape, seed, with_nan):
    rng = np.random.default_rng(seed)
    x = np.clip(rng.standard_normal(shape) * 3.0 + 0.7, -10.0, 15.0).astype(np.float32)
    flat = x.reshape(-1)
    # ties at .5 of the scale come only by construction: the extremes are set (late in the data:
    # the last thread's chunk, a vector loop's tail) so the scale is known, and values are put
    # half-way on its grid
    flat[-1], flat[flat.size * 3 // 4 + 1] = np.float32(-10.2), np.float32(15.3)
    sc = np.float32((np.float32(15.3) - np.float32(-10.2)) / np.float32(255))
    nt = min(3000, flat.size // 2)
    k = rng.integers(-100, 100, nt).astype(np.float32)
    flat[2:2 + nt] = (k + 0.5) * sc
    if with_nan:
        flat[rng.choice(flat.size, 50, replace=False)] = np.nan
    g = helper.make_graph([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "ys", "yzp"])], name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, list(shape)),
                           helper.make_tensor_value_info("ys", TensorProto.FLOAT, []),
                           helper.make_tensor_value_info("yzp", TensorProto.UINT8, [])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(m, path)
    ref = None
    if not with_nan:
        ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(["y", "ys", "yzp"], {"x": x})
    runs = [("EAGER", 1)] + ([("DNNL", 1), ("DNNL", 2)] if DNNL else [])
    outs = {}
    for conv, t in runs:
        tag = "%s.%s.t%d" % (name, conv, t)
        out = run_alma(path, {"x": x}, conv, t, tag)
        if out is None:
            continue
        outs[tag] = [out("y"), out("ys"), out("yzp")]
        if ref is not None:
            for o, r, what in zip(outs[tag], ref, ("y", "scale", "zero point")):
                compare(tag + " " + what + " vs ORT", o, r)
    # every run gives EAGER's bytes (with NaN too, where ONNX Runtime has no defined answer)
    base = "%s.EAGER.t1" % name
    for tag, o in outs.items():
        if tag != base and base in outs:
            for a, b, what in zip(o, outs[base], ("y", "scale", "zero point")):
                compare(tag + " " + what + " vs EAGER", a, b)


def main():
    os.makedirs(WORK, exist_ok=True)
    cases = [
        # name, opset, shape, axis, type, per axis
        ("pt_u8_o10", 10, (3, 37, 41), 1, np.uint8, False),
        ("pt_s8_o13", 13, (3, 37, 41), 1, np.int8, False),
        ("pt_u8_o21", 21, (5, 33), 1, np.uint8, False),
        ("pt_s8_big", 13, (2, 3, 150, 151), 1, np.int8, False),  # DNNL threads split it
        ("pa_u8_ax1", 13, (4, 37, 9, 7), 1, np.uint8, True),
        ("pa_s8_ax0", 19, (37, 50), 0, np.int8, True),
        ("pa_u8_last", 13, (50, 37), 1, np.uint8, True),  # one element per row
        ("pa_s8_ax1", 21, (2, 19, 131), 1, np.int8, True),
    ]
    for i, c in enumerate(cases):
        qdq_case(*c, seed=100 + i)
    dyn_case("dyn_big", (2, 3, 150, 151), 7, False)  # 135900 values: two DNNL chunks
    dyn_case("dyn_small", (5, 77), 8, False)
    dyn_case("dyn_nan", (2, 3, 150, 151), 9, True)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("ok: %d quantize/dequantize cases, 3 dynamic (EAGER%s)" % (len(cases), ", DNNL t1/t2" if DNNL else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
