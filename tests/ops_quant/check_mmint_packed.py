#!/usr/bin/env python3
"""ConvInteger split over threads, and MatMulInteger and QLinearMatMul on a constant B (the node's packed (B - zero point) copy, made in
chunks of K that keep the float sums exact) against numpy's integer arithmetic, bit for bit:
through EAGER, and the DNNL and BLAS runtimes where built (they run these nodes on EAGER's kernel
with their threads), and with ALMA_PACKED_GEMM=0 (the unpacked path). The data reaches the edges:
K not a multiple of the chunk, values at 0 and 255 against zero points far from them (sums past
2^24, where an unchunked float sum would round), per-column and scalar zero points, a batched A,
a K so deep that int32 wraps, and int8 operands.

usage: check_mmint_packed.py ALMA WORKDIR
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ALMA, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(7)
failures = []


def model(path, op, a_shape, b, bzp, azp):
    inits = [numpy_helper.from_array(b, "B"), numpy_helper.from_array(bzp, "bzp"), numpy_helper.from_array(azp, "azp")]
    if op == "MatMulInteger":
        nodes = [helper.make_node("MatMulInteger", ["A", "B", "azp", "bzp"], ["Y"])]
        out_t = TensorProto.INT32
    else:  # QLinearMatMul with unit scales and y_zero_point 0 into int32 is not allowed: scale down into uint8
        inits += [numpy_helper.from_array(np.array(1.0, np.float32), n) for n in ("as", "bs")]
        inits += [numpy_helper.from_array(np.array(4096.0, np.float32), "ys"), numpy_helper.from_array(np.array(128, np.uint8), "yzp")]
        nodes = [helper.make_node("QLinearMatMul", ["A", "as", "azp", "B", "bs", "bzp", "ys", "yzp"], ["Y"])]
        out_t = TensorProto.UINT8
    at = TensorProto.INT8 if azp.dtype == np.int8 else TensorProto.UINT8
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("A", at, list(a_shape))],
                          [helper.make_tensor_value_info("Y", out_t, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


def want_mm(a, b, azp, bzp):
    acc = (a.astype(np.int64) - azp.astype(np.int64)) @ (b.astype(np.int64) - bzp.astype(np.int64))
    return ((acc + 2**31) % 2**32 - 2**31).astype(np.int32)


def run(path, a, conv, env_extra, tag):
    d = os.path.join(WORK, tag)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "a.npy"), a)
    env = dict(os.environ, **env_extra)
    r = subprocess.run([ALMA, "run", path, "-c", conv, "-t", "2", "-i", "A=" + os.path.join(d, "a.npy"), "-o", d],
                       capture_output=True, text=True, env=env)
    if r.returncode:
        if "unavailable" in r.stderr:
            return None
        failures.append(f"{tag}: alma run failed ({r.returncode}): {r.stderr[-1500:]}")
        return None
    return np.load(os.path.join(d, "Y.npy"))


cases = []
K, N = 700, 45  # three chunks of K, the last short
a = rng.integers(0, 256, (2, 9, K)).astype(np.uint8)
a[0, 0, :] = 255
b = rng.integers(0, 256, (K, N)).astype(np.uint8)
b[:, 0] = 0
cases.append(("percol", "MatMulInteger", a, b, rng.integers(100, 140, N).astype(np.uint8), np.array(3, np.uint8)))
cases.append(("scalar", "MatMulInteger", a[1], b, np.array(255, np.uint8), np.array(0, np.uint8)))
KW = 33100  # 33100 products of 255 x 255 overflow int32
cases.append(("wrap", "MatMulInteger", np.full((1, KW), 255, np.uint8), np.zeros((KW, 3), np.uint8), np.array(255, np.uint8),
              np.array(0, np.uint8)))
cases.append(("qlinear", "QLinearMatMul", a, b, np.array(128, np.uint8), np.array(2, np.uint8)))
# int8 A and B (the integer kernel flips A to uint8), per-column zero points at both ends
a8 = rng.integers(-128, 128, (3, 5, 301)).astype(np.int8)
a8[0, 0, :] = -128
b8 = rng.integers(-128, 128, (301, 37)).astype(np.int8)
z8 = rng.integers(-128, 128, 37).astype(np.int8)
z8[0], z8[1] = -128, 127
cases.append(("s8", "MatMulInteger", a8, b8, z8, np.array(-5, np.int8)))

convs = ["EAGER", "DNNL", "BLAS", "FOLD+DNNL"]
for name, op, a_, b_, bzp, azp in cases:
    path = os.path.join(WORK, name + ".onnx")
    model(path, op, a_.shape, b_, bzp, azp)
    ref = want_mm(a_, b_, azp, bzp)
    if op == "QLinearMatMul":
        ref = np.clip(np.rint(ref.astype(np.float64) / 4096.0) + 128, 0, 255).astype(np.uint8)
    for conv in convs:
        for packed in ("1", "0"):
            got = run(path, a_, conv, {"ALMA_PACKED_GEMM": packed}, f"{name}_{conv.replace('+', '_')}_{packed}")
            if got is None:
                continue
            tag = f"{name} {conv} ALMA_PACKED_GEMM={packed}"
            if got.dtype != ref.dtype or got.shape != ref.shape:
                failures.append(f"{tag}: {got.dtype}{got.shape}, expected {ref.dtype}{ref.shape}")
            elif (got != ref).any():
                i = int(np.flatnonzero(got != ref)[0])
                failures.append(f"{tag}: {int((got != ref).sum())} of {got.size} differ, first at {i}: "
                                f"{got.reshape(-1)[i]} vs {ref.reshape(-1)[i]}")
            else:
                print(f"ok {tag}")
# ConvInteger with enough output channels that the runtimes' threads split them (DNNL and BLAS run
# it on EAGER's kernel with their parallel loop), against a direct integer convolution: uint8 x
# and weights with scalar zero points; int8 x and weights with per-channel weight zero points and
# enough output positions that the integer kernel (ops/qgemm.h) splits its rows over the threads.
def convint_case(tag, x, w, xz, wz, group, pads, strides):
    path = os.path.join(WORK, tag + ".onnx")
    xt = TensorProto.UINT8 if x.dtype == np.uint8 else TensorProto.INT8
    g = helper.make_graph([helper.make_node("ConvInteger", ["X", "W", "xz", "wz"], ["Y"], group=group, pads=pads,
                                            strides=strides)], "g",
                          [helper.make_tensor_value_info("X", xt, list(x.shape))],
                          [helper.make_tensor_value_info("Y", TensorProto.INT32, None)],
                          [numpy_helper.from_array(w, "W"), numpy_helper.from_array(xz, "xz"),
                           numpy_helper.from_array(wz, "wz")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)
    kh, kw = w.shape[2], w.shape[3]
    xp = np.pad(x.astype(np.int64) - int(xz), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    wi = w.astype(np.int64) - wz.astype(np.int64).reshape(-1, 1, 1, 1)
    OH, OW = (xp.shape[2] - kh) // strides[0] + 1, (xp.shape[3] - kw) // strides[1] + 1
    cg, mg = x.shape[1] // group, w.shape[0] // group
    ref = np.zeros((x.shape[0], w.shape[0], OH, OW), np.int64)
    for gr in range(group):
        for oh in range(OH):
            for ow in range(OW):
                h0, w0 = oh * strides[0], ow * strides[1]
                patch = xp[:, gr * cg:(gr + 1) * cg, h0:h0 + kh, w0:w0 + kw]
                ref[:, gr * mg:(gr + 1) * mg, oh, ow] = np.einsum("ncij,mcij->nm", patch, wi[gr * mg:(gr + 1) * mg])
    ref = ref.astype(np.int32)
    for conv in convs:
        d = os.path.join(WORK, tag + "_" + conv.replace("+", "_"))
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "x.npy"), x)
        r = subprocess.run([ALMA, "run", path, "-c", conv, "-t", "2", "-i", "X=" + os.path.join(d, "x.npy"), "-o", d],
                           capture_output=True, text=True)
        if r.returncode:
            if "unavailable" not in r.stderr:
                failures.append(f"{tag} {conv}: alma run failed ({r.returncode}): {r.stderr[-1500:]}")
            continue
        got = np.load(os.path.join(d, "Y.npy"))
        if got.shape != ref.shape or (got != ref).any():
            failures.append(f"{tag} {conv}: differs from the integer convolution ({got.shape} vs {ref.shape})")
        else:
            print(f"ok {tag} {conv}")


convint_case("convint", rng.integers(0, 256, (2, 6, 9, 11)).astype(np.uint8),
             rng.integers(0, 256, (40, 3, 3, 3)).astype(np.uint8), np.array(131, np.uint8), np.array(117, np.uint8),
             2, [1, 0, 1, 2], [1, 2])
convint_case("convint_s8", rng.integers(-128, 128, (1, 5, 21, 30)).astype(np.int8),
             rng.integers(-128, 128, (24, 5, 3, 2)).astype(np.int8), np.array(-7, np.int8),
             rng.integers(-128, 128, 24).astype(np.int8), 1, [1, 1, 1, 0], [1, 1])

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("PASS")
