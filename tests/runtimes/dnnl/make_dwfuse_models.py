#!/usr/bin/python3
"""Writes small ONNX models for the DNNL runtime's 1x1 + depthwise 3x3 convolution fusion (oneDNN's
depthwise post-op, run_conv_dw in dnnl_conv.c): a 1x1 Conv (with Clip 0..6 or Relu after it)
feeding a depthwise 3x3 Conv (stride 1 or 2, pads 1, with and without bias, Clip after it), at odd
H/W and channel counts that are and are not multiples of 8. dnnl_dwfuse_test runs them through DNNL
and FOLD+FUSE+DNNL against EAGER and checks what was fused. The name says what it expects:

  fuse_*    planned as one group, and oneDNN's jit kernel runs it (the 1x1 output is larger than
            twice the L2 caches and its channels a multiple of 8: oneDNN 2.6's own conditions)
  plan_*    planned as one group; oneDNN may decline (small, or channels not a multiple of 8), the
            two parts then run apart
  nofuse_*  not planned: the 1x1 output has a second consumer or is a graph output

usage: make_dwfuse_models.py OUTDIR"""
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)


def w(name, *shape, scale=0.4):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def c(name, value):
    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


def N(op, ins, outs, **kw):
    return helper.make_node(op, ins, outs, **kw)


def save(outdir, name, nodes, cin, h, wd, outputs, inits):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", cin, h, wd])
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, [f"{o}_{i}" for i in range(4)]) for o in outputs]
    m = helper.make_model(helper.make_graph(nodes, name, [x], outs, inits + [c("lo", 0.0), c("hi", 6.0)]),
                          opset_imports=[helper.make_opsetid("", 13)], producer_name="alma-tests")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(outdir, name + ".onnx"))


def block(ch, cin, stride, bias_dw, act1="Clip", pre="", inp="x", out="y"):
    """1x1 Conv (cin -> ch, bias) -> act1 -> depthwise 3x3 Conv (stride, pads 1) -> Clip 0..6."""
    p = pre
    nodes = [N("Conv", [inp, p + "w1", p + "b1"], [p + "c1"])]
    nodes.append(N("Clip", [p + "c1", "lo", "hi"], [p + "a1"]) if act1 == "Clip" else N(act1, [p + "c1"], [p + "a1"]))
    dw_in = [p + "a1", p + "wd"] + ([p + "bd"] if bias_dw else [])
    nodes.append(N("Conv", dw_in, [p + "c2"], group=ch, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride, stride]))
    nodes.append(N("Clip", [p + "c2", "lo", "hi"], [out]))
    inits = [w(p + "w1", ch, cin, 1, 1), w(p + "b1", ch, scale=1.0), w(p + "wd", ch, 1, 3, 3)]
    if bias_dw:
        inits.append(w(p + "bd", ch, scale=1.0))
    return nodes, inits


def l2_per_core():
    """This CPU's L2 cache per core in bytes (1 MiB when the kernel does not say)."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index2/size") as f:
            v = f.read().strip().upper()
        mult = {"K": 1 << 10, "M": 1 << 20}.get(v[-1:], 1)
        return int(v.rstrip("KM")) * mult
    except (OSError, ValueError):
        return 1 << 20


def side(ch, base):
    """An odd H = W from `base` up so that a [1, ch, H, W] float output is 6x this CPU's L2 per
    core: oneDNN fuses the depthwise post-op only when each thread's share of the 1x1 output is
    over twice the L2 (the test runs 2 threads; 2 MiB of L2 per core on some AVX-512 CPUs, where
    fixed sizes fell under it)."""
    s = max(base, math.ceil(math.sqrt(6 * l2_per_core() / (4 * ch))))
    return s | 1


def main(d):
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):  # sizes follow the CPU: no model left from another machine's sizes
        if f.endswith(".onnx"):
            os.remove(os.path.join(d, f))
    # small, odd sizes: planned; oneDNN 2.6 declines these (output under 2x L2, or 12/20 channels)
    nodes, inits = block(12, 5, 1, True)
    save(d, "plan_c12_s1_9x9", nodes, 5, 9, 9, ["y"], inits)
    nodes, inits = block(20, 6, 2, False, act1="Relu")
    save(d, "plan_c20_s2_nobias_15x15", nodes, 6, 15, 15, ["y"], inits)
    nodes, inits = block(16, 5, 2, True)
    save(d, "plan_c16_s2_7x7", nodes, 5, 7, 7, ["y"], inits)
    # large enough for oneDNN's fused jit kernel (1x1 output over twice the L2 at batch 1)
    nodes, inits = block(32, 5, 1, True)
    h = side(32, 161)
    save(d, f"fuse_c32_s1_{h}x{h}", nodes, 5, h, h, ["y"], inits)
    nodes, inits = block(16, 3, 2, False)
    h = side(16, 201)
    save(d, f"fuse_c16_s2_nobias_{h + 2}x{h}", nodes, 3, h + 2, h, ["y"], inits)
    # two blocks in a row, the second's 1x1 reading the first's depthwise output (MobileNet-V2's shape)
    n1, i1 = block(32, 4, 2, True, out="m")
    n2, i2 = block(48, 32, 1, True, pre="s_", inp="m")
    h = side(32, 199)
    save(d, f"fuse_two_blocks_c32_c48_{h}x{h}", n1 + n2, 4, h, h, ["y"], i1 + i2)
    # the 1x1 output (after its Clip) read twice: not fused
    nodes, inits = block(16, 5, 1, True)
    nodes.append(N("Relu", ["a1"], ["z"]))
    save(d, "nofuse_second_consumer_161x161", nodes, 5, 161, 161, ["y", "z"], inits)
    # the 1x1 output is a graph output
    nodes, inits = block(16, 5, 2, True)
    save(d, "nofuse_graph_output_161x161", nodes, 5, 161, 161, ["y", "a1"], inits)


if __name__ == "__main__":
    main(sys.argv[1])
