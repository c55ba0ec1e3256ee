#!/usr/bin/python3
"""Writes small ONNX models for the DNNL runtime's Winograd F(4x4, 3x3) kernel (dnnl_wino.c): 3x3
stride-1 convolutions on blocked activations (each model's first node is a 1x1 convolution, so
oneDNN hands the 3x3 ones an aBcd8b value), with odd H/W (partial edge tiles), asymmetric pads
0/1/2, channel counts that are and are not multiples of 8, with and without bias, and the post-ops
the kernel runs itself: Relu, Clip, LeakyRelu and a residual Add (before and after a Relu).
dnnl_wino_test runs them with dnnl.winograd=on against EAGER.

usage: make_wino_models.py OUTDIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(11)


def w(name, *shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def c(name, value):
    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


def N(op, ins, outs, **kw):
    return helper.make_node(op, ins, outs, **kw)


def save(outdir, name, nodes, h, wd, outputs, inits):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 5, h, wd])
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, [f"{o}_{i}" for i in range(4)]) for o in outputs]
    m = helper.make_model(helper.make_graph(nodes, name, [x], outs, inits),
                          opset_imports=[helper.make_opsetid("", 13)], producer_name="alma-tests")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(outdir, name + ".onnx"))


def front(oc):
    # a 1x1 convolution from the plain input: its output is blocked, as the 3x3 ones want it
    return N("Conv", ["x", "w0", "b0"], ["c0"]), [w("w0", oc, 5, 1, 1), w("b0", oc)]


def main(d):
    os.makedirs(d, exist_ok=True)
    # 5x7: one row of partial tiles; 12 -> 20 channels (padded lanes in and out), bias, Relu
    n0, i0 = front(12)
    save(d, "wino_relu", [n0, N("Conv", ["c0", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), N("Relu", ["c1"], ["y"])],
         5, 7, ["y"], i0 + [w("w1", 20, 12, 3, 3), w("b1", 20)])
    # 9x13, asymmetric pads (top 0, left 2, bottom 2, right 1), 20 -> 12, no bias, Clip
    n0, i0 = front(20)
    save(d, "wino_clip", [n0, N("Conv", ["c0", "w1"], ["c1"], pads=[0, 2, 2, 1]),
                          N("Clip", ["c1", "lo", "hi"], ["y"])],
         9, 13, ["y"], i0 + [w("w1", 12, 20, 3, 3), c("lo", -0.25), c("hi", 0.5)])
    # 13x13, pads (2, 0, 0, 2), 16 -> 16, LeakyRelu; and pads 0 (5x7 output from 7x9... here 11x11)
    n0, i0 = front(16)
    save(d, "wino_leaky", [n0, N("Conv", ["c0", "w1", "b1"], ["c1"], pads=[2, 0, 0, 2]),
                           N("LeakyRelu", ["c1"], ["y"], alpha=0.1),
                           N("Conv", ["c0", "w2", "b2"], ["z"])],
         13, 13, ["y", "z"], i0 + [w("w1", 16, 16, 3, 3), w("b1", 16), w("w2", 24, 16, 3, 3), w("b2", 24)])
    # 28x28: a residual block, the Add fused as a sum post-op before a Relu, then a Relu before
    # an Add, 8 -> 32 -> 8 channels; and 7x9 with pads 2 all round (output larger than the input)
    n0, i0 = front(8)
    save(d, "wino_residual", [n0, N("Conv", ["c0", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
                              N("Conv", ["x", "ws"], ["s"]), N("Add", ["c1", "s"], ["a"]), N("Relu", ["a"], ["r"]),
                              N("Conv", ["r", "w2"], ["c2"], pads=[1, 1, 1, 1]), N("Relu", ["c2"], ["r2"]),
                              N("Conv", ["x", "wt", "bt"], ["t"]), N("Add", ["r2", "t"], ["y"])],
         28, 28, ["y"], i0 + [w("w1", 32, 8, 3, 3), w("b1", 32), w("ws", 32, 5, 1, 1), w("w2", 8, 32, 3, 3, scale=0.1),
                              w("wt", 8, 5, 1, 1), w("bt", 8)])
    n0, i0 = front(8)
    save(d, "wino_pad2", [n0, N("Conv", ["c0", "w1", "b1"], ["y"], pads=[2, 2, 2, 2])],
         7, 9, ["y"], i0 + [w("w1", 24, 8, 3, 3), w("b1", 24)])


if __name__ == "__main__":
    main(sys.argv[1])
