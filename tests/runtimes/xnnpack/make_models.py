#!/usr/bin/env python3
"""Small ONNX models that exercise the XNNPACK runtime's translations and partitioning, with a
dynamic batch dimension "N" and random constant weights. xnnpack_vs_eager runs each through EAGER
and XNNPACK and compares; manifest.txt gives, per model, the nodes and partitions XNNPACK must take
(-1: not checked).

usage: make_models.py OUT_DIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(1234)
F = TensorProto.FLOAT


def w(name, *shape, scale=0.5):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def i64(name, vals):
    return numpy_helper.from_array(np.array(vals, dtype=np.int64), name)


def f32(name, vals):
    return numpy_helper.from_array(np.array(vals, dtype=np.float32), name)


def vinfo(name, shape):
    return helper.make_tensor_value_info(name, F, shape)


def save(out, name, nodes, inputs, outputs, inits, expect, opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    ops = [helper.make_opsetid("", opset)]
    if any(n.domain == "alma" for n in nodes):
        ops.append(helper.make_opsetid("alma", 1))  # FUSE's fused ops, as alma saves them
    m = helper.make_model(g, opset_imports=ops, producer_name="make_models.py")
    m.ir_version = 7
    # graph outputs carry no shapes (alma infers them), which onnx.checker would reject
    onnx.save(m, os.path.join(out, name + ".onnx"))
    return "%s %d %d" % (name, expect[0], expect[1])


def models(out):
    N = "N"
    man = []
    # grouped conv: asymmetric pads, strides, dilations, then Relu (folded into the conv)
    man.append(save(out, "conv_group", [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], group=2, pads=[0, 1, 1, 2], strides=[2, 1], dilations=[2, 1]),
        helper.make_node("Relu", ["c"], ["y"])],
        [vinfo("x", [N, 4, 11, 9])], [vinfo("y", None)], [w("w", 6, 2, 3, 3), w("b", 6)], (2, 1)))
    # depthwise with channel multiplier 2, no bias, then Clip(0, 6) from constant inputs
    man.append(save(out, "dwconv_mult", [
        helper.make_node("Conv", ["x", "w"], ["c"], group=3, pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["c", "lo", "hi"], ["y"])],
        [vinfo("x", [N, 3, 8, 8])], [vinfo("y", None)], [w("w", 6, 1, 3, 3), f32("lo", 0.0), f32("hi", 0.6)], (2, 1)))
    # SAME_LOWER with an even kernel and stride 2; activations XNNPACK has nodes for
    man.append(save(out, "conv_same_act", [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], auto_pad="SAME_LOWER", strides=[2, 2], kernel_shape=[4, 4]),
        helper.make_node("HardSwish", ["c"], ["h"]),
        helper.make_node("LeakyRelu", ["h"], ["l"], alpha=0.2),
        helper.make_node("Sigmoid", ["l"], ["s"]),
        helper.make_node("Elu", ["s"], ["y"], alpha=0.7)],
        [vinfo("x", [N, 2, 9, 7])], [vinfo("y", None)], [w("w", 5, 2, 4, 4), w("b", 5)], (5, 1), opset=14))
    # pools with ceil_mode and padding, global pooling, flatten, fc, softmax
    man.append(save(out, "pools_fc", [
        helper.make_node("MaxPool", ["x"], ["m"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
        helper.make_node("AveragePool", ["m"], ["a"], kernel_shape=[2, 3], strides=[2, 2], pads=[0, 1, 0, 1],
                         ceil_mode=1, count_include_pad=0),
        helper.make_node("MaxPool", ["a"], ["m2"], kernel_shape=[2, 2], auto_pad="SAME_UPPER"),
        helper.make_node("GlobalAveragePool", ["m2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w", "b"], ["o"], transB=1, alpha=0.5, beta=2.0),
        helper.make_node("Softmax", ["o"], ["y"])],
        [vinfo("x", [N, 4, 13, 12])], [vinfo("y", None)], [w("w", 7, 4), w("b", 7)], (7, 1)))
    # a partition split: Tanh (EAGER) reads the first conv's output before the Add that ends the set
    man.append(save(out, "split", [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Tanh", ["c1"], ["t"]),
        helper.make_node("Conv", ["t", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c1", "c2"], ["y"])],
        [vinfo("x", [N, 3, 6, 5])], [vinfo("y", None), ], [w("w1", 4, 3, 3, 3), w("w2", 4, 4, 3, 3)], (3, 2)))
    # binary ops in NHWC with constants of lower rank, a second rank-4 graph input, an exported
    # intermediate (graph output) and Max/Min
    man.append(save(out, "nhwc_binary", [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Mul", ["c", "k"], ["m"]),
        helper.make_node("Add", ["s", "m"], ["a"]),
        helper.make_node("Sub", ["a", "x2"], ["d"]),
        helper.make_node("Div", ["d", "k2"], ["e"]),
        helper.make_node("Max", ["e", "lo"], ["f"]),
        helper.make_node("Min", ["f", "c"], ["y"])],
        [vinfo("x", [N, 3, 5, 6]), vinfo("x2", [N, 4, 5, 6])], [vinfo("y", None), vinfo("m", None)],
        [w("w", 4, 3, 1, 1), w("k", 4, 1, 1), f32("s", 0.25), w("k2", 1, 4, 5, 1), w("lo", 6)], (7, 1)))
    # BatchNormalization (inference) and PRelu with per-channel slopes
    man.append(save(out, "bn_prelu", [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "sc", "bi", "mu", "var"], ["n"], epsilon=1e-3),
        helper.make_node("PRelu", ["n", "sl"], ["y"])],
        [vinfo("x", [N, 2, 6, 6])], [vinfo("y", None)],
        [w("w", 5, 2, 3, 3), w("sc", 5), w("bi", 5), w("mu", 5),
         numpy_helper.from_array((rng.random(5) + 0.5).astype(np.float32), "var"), w("sl", 5, 1, 1)], (3, 1)))
    # plain layout: rank-3 MatMul with a constant weight, unary ops, softmax over the last axis,
    # and a reshape
    man.append(save(out, "plain_ops", [
        helper.make_node("MatMul", ["x", "w"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["a"]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Softmax", ["r"], ["s"], axis=-1),
        helper.make_node("Neg", ["s"], ["n"]),
        helper.make_node("Abs", ["n"], ["ab"]),
        helper.make_node("Sqrt", ["ab"], ["q"]),
        helper.make_node("Reshape", ["q", "shape"], ["rs"]),
        helper.make_node("Mul", ["rs", "ten"], ["t"]),
        helper.make_node("Floor", ["t"], ["fl"]),
        helper.make_node("Ceil", ["t"], ["ce"]),
        helper.make_node("Round", ["t"], ["ro"]),
        helper.make_node("Add", ["fl", "ce"], ["fc"]),
        helper.make_node("Add", ["fc", "ro"], ["y"])],
        [vinfo("x", [N, 4, 16])], [vinfo("y", None)],
        [w("w", 16, 12), w("b", 12), i64("shape", [0, 6, 8]), f32("ten", 10.0)], (14, 1)))
    # Pad (constant mode) inside an NHWC partition and in a plain one
    man.append(save(out, "pads", [
        helper.make_node("Pad", ["x", "p4", "v"], ["px"]),
        helper.make_node("Conv", ["px", "w"], ["c"]),
        helper.make_node("GlobalAveragePool", ["c"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Pad", ["f", "p2"], ["y"])],
        [vinfo("x", [N, 2, 5, 4])], [vinfo("y", None)],
        [i64("p4", [0, 1, 2, 0, 0, 0, 1, 3]), f32("v", 0.5), w("w", 3, 3, 2, 2), i64("p2", [0, 1, 0, 2])], (5, 1)))
    # an external input the executor frees before the partition's last node (copied at capture),
    # and a graph input read both by EAGER and by the partition
    man.append(save(out, "capture_copy", [
        helper.make_node("Tanh", ["x"], ["t1"]),
        helper.make_node("Relu", ["t1"], ["r"]),
        helper.make_node("Tanh", ["x"], ["t2"]),
        helper.make_node("Add", ["r", "t2"], ["y"])],
        [vinfo("x", [N, 3, 4])], [vinfo("y", None)], [], (2, 1)))
    # a shape XNNPACK's dilated max pooling cannot pad: SAME padding found at run time, so the
    # partition falls back to EAGER kernels for it (outputs must still match)
    man.append(save(out, "fallback", [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], dilations=[2, 2], auto_pad="SAME_UPPER")],
        [vinfo("x", [N, 2, 7, 7])], [vinfo("y", None)], [], (2, 1)))
    # Softmax before opset 13 on [N, C, 1, 1] after global pooling: axis 1 is C in NHWC
    man.append(save(out, "softmax11_nhwc", [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("GlobalAveragePool", ["c"], ["g"]),
        helper.make_node("Softmax", ["g"], ["y"], axis=1)],
        [vinfo("x", [N, 3, 4, 4])], [vinfo("y", None)], [w("w", 6, 3, 1, 1)], (3, 1), opset=11))
    # Identity/Constant chains in front of weights (as PyTorch exports shared weights): baked in
    man.append(save(out, "const_chain", [
        helper.make_node("Constant", [], ["wc"], value=w("wv", 4, 3, 3, 3)),
        helper.make_node("Identity", ["wc"], ["wi"]),
        helper.make_node("Identity", ["b"], ["bi"]),
        helper.make_node("Conv", ["x", "wi", "bi"], ["y"], pads=[1, 1, 1, 1])],
        [vinfo("x", [N, 3, 5, 5])], [vinfo("y", None)], [w("b", 4)], (1, 1)))
    # Flatten of NHWC data read by fully-connected nodes only: their weights take the NHWC order
    man.append(save(out, "flatten_fc", [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Flatten", ["c"], ["f"]),
        helper.make_node("Gemm", ["f", "w1"], ["g"], transB=1),
        helper.make_node("MatMul", ["f", "w2"], ["m"]),
        helper.make_node("Add", ["g", "m"], ["y"])],
        [vinfo("x", [N, 3, 5, 4])], [vinfo("y", None)], [w("w", 4, 3, 2, 2), w("w1", 5, 48), w("w2", 48, 5)], (5, 1)))
    # ... not when the Flatten's output is also a graph output: it runs on EAGER, ending the partition
    man.append(save(out, "flatten_out", [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Flatten", ["c"], ["f"]),
        helper.make_node("Gemm", ["f", "w1"], ["y"], transB=1)],
        [vinfo("x", [N, 3, 5, 4])], [vinfo("y", None), vinfo("f", None)], [w("w", 4, 3, 2, 2), w("w1", 5, 48)], (2, 2)))
    # MatMul + Add of a constant [N] (+ Relu): one fully-connected node with bias and clamp; an Add
    # of a [5, 6] constant is no bias and stays a binary node
    man.append(save(out, "fc_bias", [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["b", "m"], ["a"]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["m2"]),
        helper.make_node("Add", ["m2", "b2"], ["y"])],
        [vinfo("x", [N, 5, 8])], [vinfo("y", None)], [w("w", 8, 6), w("b", 1, 6), w("w2", 6, 6), w("b2", 5, 6)], (5, 1)))
    # FUSE's fused ops (alma domain): FusedConv with each activation XNNPACK has a node for, a
    # residual Z (an add after the conv) with and without an activation, a Relu after a fused
    # conv without activation (folded into the add's clamp), a depthwise FusedConv with Relu6
    A = "alma"
    man.append(save(out, "fused_conv", [
        helper.make_node("FusedConv", ["x", "w1", "b1"], ["a"], domain=A, pads=[1, 1, 1, 1], activation="HardSwish"),
        helper.make_node("FusedConv", ["a", "w2", "b2", "a"], ["r"], domain=A, pads=[1, 1, 1, 1], activation="Relu"),
        helper.make_node("FusedConv", ["r", "w3"], ["c"], domain=A, pads=[1, 1, 1, 1], group=4, activation="Clip",
                         activation_params=[0.0, 0.8]),
        helper.make_node("FusedConv", ["c", "w4", "b4"], ["s"], domain=A, activation="SiLU"),
        helper.make_node("FusedConv", ["s", "w5", "b5", "c"], ["sg"], domain=A, activation="Sigmoid"),
        helper.make_node("FusedConv", ["sg", "w6", "b6", "s"], ["z"], domain=A),
        helper.make_node("Relu", ["z"], ["zr"]),
        helper.make_node("FusedConv", ["zr", "w7"], ["y"], domain=A, strides=[2, 2], activation="LeakyRelu",
                         activation_params=[0.2])],
        [vinfo("x", [N, 3, 7, 7])], [vinfo("y", None)],
        [w("w1", 4, 3, 3, 3), w("b1", 4), w("w2", 4, 4, 3, 3), w("b2", 4), w("w3", 4, 1, 3, 3), w("w4", 4, 4, 1, 1),
         w("b4", 4), w("w5", 4, 4, 1, 1), w("b5", 4), w("w6", 4, 4, 1, 1), w("b6", 4), w("w7", 5, 4, 3, 3)], (8, 1)))
    # FusedGemm (alpha, transB, C, LeakyRelu) and FusedMatMul (bias, Sigmoid; Clip) in plain layout
    man.append(save(out, "fused_fc", [
        helper.make_node("FusedGemm", ["x", "wg", "cg"], ["g"], domain=A, transB=1, alpha=0.5, activation="LeakyRelu",
                         activation_params=[0.1]),
        helper.make_node("FusedMatMul", ["g", "wm", "bm"], ["m"], domain=A, activation="Sigmoid"),
        helper.make_node("FusedMatMul", ["m", "wm2"], ["y"], domain=A, activation="Clip", activation_params=[-0.5, 0.5])],
        [vinfo("x", [N, 8])], [vinfo("y", None)], [w("wg", 6, 8), w("cg", 6), w("wm", 6, 5), w("bm", 5), w("wm2", 5, 4)],
        (3, 1)))
    # activations XNNPACK has no node for stay on EAGER (Tanh, Gelu, HardSigmoid)
    man.append(save(out, "fused_eager_acts", [
        helper.make_node("FusedConv", ["x", "w1"], ["a"], domain=A, activation="Tanh"),
        helper.make_node("FusedConv", ["a", "w2"], ["b"], domain=A, activation="Gelu"),
        helper.make_node("FusedConv", ["b", "w3"], ["c"], domain=A, activation="HardSigmoid"),
        helper.make_node("FusedConv", ["c", "w4"], ["y"], domain=A, activation="Relu")],
        [vinfo("x", [N, 3, 4, 4])], [vinfo("y", None)],
        [w("w1", 3, 3, 1, 1), w("w2", 3, 3, 1, 1), w("w3", 3, 3, 1, 1), w("w4", 2, 3, 1, 1)], (1, 1)))
    # 1-D convs ([N, C, L]): XNNPACK's 2-D conv with H = 1 on NLC data.
    # grouped: asymmetric pads, stride 2, dilation 2, then Relu (folded into the conv)
    man.append(save(out, "conv1d_group", [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], group=2, pads=[0, 2], strides=[2], dilations=[2]),
        helper.make_node("Relu", ["c"], ["y"])],
        [vinfo("x", [N, 4, 23])], [vinfo("y", None)], [w("w", 6, 2, 3), w("b", 6)], (2, 1)))
    # depthwise with channel multiplier 2, no bias, then Clip(0, 0.6)
    man.append(save(out, "conv1d_dw", [
        helper.make_node("Conv", ["x", "w"], ["c"], group=4, pads=[1, 1]),
        helper.make_node("Clip", ["c", "lo", "hi"], ["y"])],
        [vinfo("x", [N, 4, 16])], [vinfo("y", None)], [w("w", 8, 1, 3), f32("lo", 0.0), f32("hi", 0.6)], (2, 1)))
    # groups = 1, stride 2 with SAME_UPPER and an even kernel, Relu, a second conv, a residual Add of
    # two computed NLC values and a Sigmoid: one partition, reordered only at its boundary
    man.append(save(out, "conv1d_chain", [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], auto_pad="SAME_UPPER", strides=[2], kernel_shape=[4]),
        helper.make_node("Relu", ["c1"], ["r"]),
        helper.make_node("Conv", ["r", "w2", "b2"], ["c2"], pads=[1, 1]),
        helper.make_node("Add", ["c2", "r"], ["s"]),
        helper.make_node("Sigmoid", ["s"], ["y"])],
        [vinfo("x", [N, 3, 31])], [vinfo("y", None)],
        [w("w1", 6, 3, 4), w("b1", 6), w("w2", 6, 6, 3), w("b2", 6)], (5, 1)))
    # an Add of a constant [C, 1] to a 1-D conv's output: the constant is in ONNX order, so the Add
    # leaves the NLC partition for EAGER, the conv stays on XNNPACK
    man.append(save(out, "conv1d_const_add", [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1]),
        helper.make_node("Add", ["c", "k"], ["y"])],
        [vinfo("x", [N, 2, 10])], [vinfo("y", None)], [w("w", 5, 2, 3), w("k", 5, 1)], (1, 1)))
    return man


def write_all(doc, models, columns, name):
    """main() of make_models.py and make_qmodels.py: models(OUT) writes the files, manifest.txt lists them."""
    if len(sys.argv) != 2:
        sys.exit(doc)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    man = models(out)
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.write("# model  " + columns + "\n")
        for line in man:
            f.write(line + "\n")
    print("%s: %d models in %s" % (name, len(man), out))


def main():
    write_all(__doc__, models, "nodes-on-XNNPACK  partitions", "make_models")


if __name__ == "__main__":
    main()
