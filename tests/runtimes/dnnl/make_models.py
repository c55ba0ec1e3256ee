#!/usr/bin/python3
"""Writes small ONNX models that exercise the DNNL runtime's paths beyond single-op conformance:
post-op fusion (conv+relu, conv+add+relu with the residual from a graph input or from a later
branch, matmul+bias+relu, matmul+residual), blocked layouts crossing EAGER nodes and view ops,
values read by several consumers, graph outputs that are also intermediates, ConvTranspose,
pooling variants, Gemm alpha/beta, LayerNormalization and attention-like batched MatMul, Casts
between float32 and bfloat16, constant Pad (blocked and plain, cropping, every opset form), LRN,
InstanceNormalization and Resize/Upsample (the coordinate modes oneDNN's resampling matches),
and the cases of those that stay on EAGER. dnnl_vs_eager runs each through DNNL and EAGER at two
batch sizes and compares, and through the BF16 pass with DNNL against the same pass with EAGER;
models named native_* must run every node on oneDNN.

usage: make_models.py OUTDIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)


def w(name, *shape, scale=0.2):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def c(name, value):
    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


def save(outdir, name, nodes, inputs, outputs, inits, opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="alma-tests")
    m.ir_version = 8
    if opset <= 17:  # python3-onnx 1.12 checks opsets up to 17
        onnx.checker.check_model(m)
    onnx.save(m, os.path.join(outdir, name + ".onnx"))


def x_in(name, *dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", *dims])


def y_out(name, rank):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [f"{name}_{i}" for i in range(rank)])


def N(op, ins, outs, **kw):
    return helper.make_node(op, ins, outs, **kw)


def resblock(d):
    nodes = [
        N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        N("Relu", ["c1"], ["r1"]),
        N("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        N("Add", ["c2", "x"], ["a2"]),  # residual from the graph input: copied, not taken over
        N("Relu", ["a2"], ["r2"]),
        N("Conv", ["r2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1]),
        N("Add", ["r2", "c3"], ["a3"]),  # residual r2 dies here: its buffer becomes the output
        N("Relu", ["a3"], ["r3"]),
        N("Conv", ["r3", "wd"], ["cd"], strides=[2, 2]),
        N("MaxPool", ["cd"], ["mp"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        N("GlobalAveragePool", ["mp"], ["gap"]),
        N("Flatten", ["gap"], ["fl"]),
        N("Gemm", ["fl", "wf", "bf"], ["logits"], transB=1),
        N("Softmax", ["logits"], ["y"], axis=1),
    ]
    inits = [w("w1", 16, 16, 3, 3), w("b1", 16), w("w2", 16, 16, 3, 3), w("b2", 16), w("w3", 16, 16, 3, 3),
             w("b3", 16), w("wd", 32, 16, 1, 1), w("wf", 10, 32), w("bf", 10)]
    save(d, "resblock", nodes, [x_in("x", 16, 9, 9)], [y_out("y", 2), y_out("r2", 4)], inits)


def downsample(d):
    # the Add's other operand is produced after the fused conv in file order
    nodes = [
        N("Conv", ["x", "wa"], ["ca"], strides=[2, 2], pads=[1, 1, 1, 1]),
        N("Relu", ["ca"], ["ra"]),
        N("Conv", ["ra", "wb"], ["cb"], pads=[1, 1, 1, 1]),
        N("Conv", ["x", "wdn"], ["cdn"], strides=[2, 2]),
        N("Add", ["cb", "cdn"], ["s"]),
        N("Relu", ["s"], ["y"]),
    ]
    inits = [w("wa", 24, 8, 3, 3), w("wb", 24, 24, 3, 3), w("wdn", 24, 8, 1, 1)]
    save(d, "downsample", nodes, [x_in("x", 8, 10, 10)], [y_out("y", 4)], inits)


def depthwise(d):
    nodes = [
        N("Conv", ["x", "we", "be"], ["e"]),
        N("Clip", ["e", "lo", "hi"], ["e6"]),
        N("Conv", ["e6", "wdw", "bdw"], ["dw"], group=24, pads=[1, 1, 1, 1], strides=[2, 2]),
        N("HardSwish", ["dw"], ["hs"]),
        N("Conv", ["hs", "wp"], ["pj"]),
        N("HardSigmoid", ["pj"], ["hsg"], alpha=0.25, beta=0.4),
        N("Conv", ["hsg", "wq"], ["q"], dilations=[2, 2], pads=[2, 2, 2, 2], auto_pad="NOTSET"),
        N("LeakyRelu", ["q"], ["lr"], alpha=0.1),
        N("Conv", ["lr", "wr"], ["rr"], auto_pad="SAME_UPPER", strides=[2, 2], kernel_shape=[3, 3]),
        N("Sigmoid", ["rr"], ["sg"]),
        N("Elu", ["sg"], ["y"]),
    ]
    inits = [w("we", 24, 4, 1, 1), w("be", 24), c("lo", 0.0), c("hi", 6.0), w("wdw", 24, 1, 3, 3), w("bdw", 24),
             w("wp", 12, 24, 1, 1), w("wq", 12, 12, 3, 3), w("wr", 6, 12, 3, 3)]
    save(d, "depthwise", nodes, [x_in("x", 4, 11, 11)], [y_out("y", 4)], inits, opset=14)


def native_se_scale(d):
    """Squeeze-and-excitation as EfficientNet/MobileNet-V3 write it: a per-channel scale [N,C,1,1]
    computed from the blocked activation multiplies it (oneDNN's jit binary takes it only in the
    activation's channel blocking), then a rank-3 [C,1,1] constant scale and a [1,C,1,1] shift; C = 20
    pads the 8/16-channel blocks."""
    nodes = [
        N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        N("Relu", ["c1"], ["r1"]),
        N("GlobalAveragePool", ["r1"], ["sq"]),
        N("Conv", ["sq", "w2", "b2"], ["ex"]),
        N("Sigmoid", ["ex"], ["sc"]),
        N("Mul", ["r1", "sc"], ["se"]),
        N("Mul", ["ks", "se"], ["se2"]),  # the broadcast operand first: swapped
        N("Add", ["se2", "kb"], ["se3"]),
        N("Conv", ["se3", "w3"], ["y"], pads=[1, 1, 1, 1]),
    ]
    inits = [w("w1", 20, 3, 3, 3), w("b1", 20), w("w2", 20, 20, 1, 1), w("b2", 20), w("w3", 8, 20, 3, 3),
             w("ks", 20, 1, 1, scale=1.0), w("kb", 1, 20, 1, 1)]
    save(d, "native_se_scale", nodes, [x_in("x", 3, 9, 9)], [y_out("y", 4)], inits)


def binary_bcast_eager(d):
    """Broadcasts oneDNN's jit binary does not take, which DNNL leaves to EAGER instead of its
    reference kernel: Swin's shifted-window mask ([N,W,H,L,L] + [1,W,1,L,L]) and a scale broadcast
    over N, H and W only."""
    nodes = [
        N("Add", ["x", "mask"], ["a"]),
        N("Relu", ["a"], ["r"]),
        N("Mul", ["r", "k"], ["y"]),
    ]
    inits = [w("mask", 1, 4, 1, 6, 6, scale=1.0), w("k", 4, 3, 1, 1, scale=1.0)]
    save(d, "binary_bcast_eager", nodes, [x_in("x", 4, 3, 6, 6)], [y_out("y", 5)], inits)


def boundaries(d):
    # blocked conv outputs read by EAGER nodes (Transpose, Reshape->Conv), by two convs, and
    # returned as a graph output while also used inside
    nodes = [
        N("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        N("Conv", ["c1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        N("Conv", ["c1", "w3"], ["c3"]),
        N("Mul", ["c2", "c3"], ["m"]),
        N("Transpose", ["m"], ["t"], perm=[0, 1, 3, 2]),
        N("Reshape", ["t", "shp"], ["rs"]),
        N("Conv", ["rs", "w4"], ["c4"]),
        N("Sub", ["c4", "bias4"], ["s4"]),
        N("Div", ["s4", "two"], ["y"]),
        N("Max", ["c1", "c2"], ["mx"]),
        N("Min", ["mx", "c3"], ["mn"]),
    ]
    inits = [w("w1", 8, 3, 3, 3), w("w2", 8, 8, 3, 3), w("w3", 8, 8, 1, 1), w("w4", 4, 8, 1, 1),
             numpy_helper.from_array(np.array([0, 8, 6, 6], dtype=np.int64), "shp"), w("bias4", 1, 4, 1, 1),
             c("two", 2.0)]
    save(d, "boundaries", nodes, [x_in("x", 3, 6, 6)], [y_out("y", 4), y_out("c1", 4), y_out("mn", 4)], inits)


def transformer(d):
    D, F, S = 32, 64, 6
    nodes = [
        N("MatMul", ["x", "w1"], ["h1"]),
        N("Add", ["h1", "b1"], ["h1b"]),
        N("Relu", ["h1b"], ["h1r"]),
        N("MatMul", ["h1r", "w2"], ["h2"]),
        N("Add", ["h2", "b2"], ["h2b"]),
        N("Add", ["h2b", "x"], ["res"]),
        N("LayerNormalization", ["res", "g", "beta"], ["ln"], axis=-1, epsilon=1e-5),
        N("Transpose", ["ln"], ["lnT"], perm=[0, 2, 1]),
        N("MatMul", ["ln", "lnT"], ["sc"]),
        N("Div", ["sc", "scale"], ["scs"]),
        N("Softmax", ["scs"], ["p"], axis=-1),
        N("MatMul", ["p", "ln"], ["ctx"]),
        N("Tanh", ["ctx"], ["th"]),
        N("Sigmoid", ["th"], ["ge"]),
        N("Mul", ["ge", "g"], ["y0"]),
        N("ReduceMean", ["y0"], ["y"], axes=[1], keepdims=0),
    ]
    inits = [w("w1", D, F), w("b1", F), w("w2", F, D), w("b2", D), w("g", D, scale=1.0), w("beta", D),
             c("scale", float(np.sqrt(D)))]
    save(d, "transformer", nodes, [x_in("x", S, D)], [y_out("y", 2), y_out("p", 3)], inits, opset=17)


def gemms(d):
    nodes = [
        N("Gemm", ["x", "wa", "ca"], ["ga"], transB=1, alpha=0.5, beta=2.0),
        N("Gemm", ["ga", "wb", "cb"], ["gb"], transA=0, alpha=1.0, beta=1.0),
        N("Relu", ["gb"], ["gr"]),
        N("Gemm", ["gr", "wc"], ["gc"], alpha=1.5),
        N("Gemm", ["gc", "wd", "cd"], ["y"], beta=0.5),
        N("Gemm", ["wt", "wz"], ["z"], transA=1, transB=1),  # both operands transposed, no C
        N("LogSoftmax", ["y"], ["ls"], axis=1),
    ]
    inits = [w("wa", 12, 20), w("ca", 1, 12), w("wb", 12, 16), w("cb", 16), w("wc", 16, 8), w("wd", 8, 5),
             w("cd", 5), w("wt", 3, 7), w("wz", 4, 3)]
    save(d, "gemms", nodes, [x_in("x", 20)], [y_out("ls", 2), y_out("z", 2)], inits)


def native_wide_gemms(d):
    """Constant weights whose rows are an even number of 64-byte lines apart (1 KiB, 2 KiB, 1.5 KiB)
    or not a whole number of lines (400 bytes): the DNNL runtime stores them with padded rows
    (dnnl_matmul.c matmul_pad_weights), through MatMul, Gemm with transB, and Gemm with a beta C."""
    nodes = [
        N("MatMul", ["x", "w1"], ["m1"]),  # [B, 5, 64] x [64, 256]
        N("Add", ["m1", "b1"], ["a1"]),
        N("Relu", ["a1"], ["r1"]),
        N("Flatten", ["r1"], ["f1"], axis=1),  # [B, 1280]
        N("Gemm", ["f1", "w2", "c2"], ["g2"], transB=1),  # [512, 1280]: rows of 5 KiB -> 81 lines
        N("Gemm", ["g2", "w3", "c3"], ["g3"], alpha=0.5, beta=2.0),  # [512, 384]: 1.5 KiB rows
        N("MatMul", ["g3", "w4"], ["y"]),  # [384, 100]: 400-byte rows
    ]
    inits = [w("w1", 64, 256), w("b1", 256), w("w2", 512, 1280, scale=0.05), w("c2", 512),
             w("w3", 512, 384, scale=0.05), w("c3", 1, 384), w("w4", 384, 100, scale=0.05)]
    save(d, "native_wide_gemms", nodes, [x_in("x", 5, 64)], [y_out("y", 2), y_out("m1", 3)], inits)


def native_pools_blocked(d):
    # pooling of convolution outputs, which oneDNN keeps blocked (nChw8c / nChw16c): alma's own
    # kernel (dnnl_native.c) reads that layout; 12 channels leave padded lanes in the last block.
    nodes = [
        N("Conv", ["x", "wc", "bc"], ["c"], pads=[1, 1, 1, 1]),
        N("MaxPool", ["c"], ["m1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        N("MaxPool", ["c"], ["m2"], kernel_shape=[2, 2], strides=[2, 2], dilations=[2, 1], ceil_mode=1),
        N("AveragePool", ["c"], ["a1"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, count_include_pad=1,
          pads=[1, 1, 1, 1]),
        N("AveragePool", ["c"], ["a2"], kernel_shape=[2, 3], strides=[1, 2], pads=[0, 1, 1, 0]),
        N("MaxPool", ["c"], ["m3"], kernel_shape=[1, 4], strides=[1, 3]),
        N("Abs", ["m1"], ["o1"]),
        N("Abs", ["m2"], ["o2"]),
        N("Abs", ["a1"], ["o3"]),
        N("Abs", ["a2"], ["o4"]),
        N("Abs", ["m3"], ["o5"]),
    ]
    inits = [w("wc", 12, 5, 3, 3), w("bc", 12)]
    save(d, "native_pools_blocked", nodes, [x_in("x", 5, 11, 13)],
         [y_out(f"o{i}", 4) for i in range(1, 6)], inits, opset=13)


def q8_pools(d):
    # MaxPool on uint8 and int8 data (opset 12+, as ONNX Runtime's QOperator models have it): after
    # an int8 convolution (QLinearConv) the value is NHWC int8, after a QuantizeLinear of the input
    # plain NCHW; alma's pooling kernel takes both. Max of integers: DNNL must equal EAGER exactly,
    # so the convolution is made exact on both too: power-of-two scales (float sums of the
    # dequantized products are exact) and even weights (oneDNN halves them on CPUs without VNNI).
    q = numpy_helper.from_array
    ws = (2 * rng.integers(-30, 31, (10, 5, 3, 3))).astype(np.int8)
    nodes = [
        N("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        N("QLinearConv", ["xq", "xs", "xz", "wq", "wsc", "wz", "ys", "yz", "bq"], ["cq"], pads=[1, 1, 1, 1]),
        N("MaxPool", ["cq"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        N("MaxPool", ["xq"], ["p2"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        N("DequantizeLinear", ["p1", "ys", "yz"], ["o1"]),
        N("DequantizeLinear", ["p2", "xs", "xz"], ["o2"]),
        N("QuantizeLinear", ["x", "xs", "sz"], ["xs8"]),
        N("MaxPool", ["xs8"], ["p3"], kernel_shape=[3, 2], strides=[1, 2], pads=[1, 0, 1, 1]),
        N("DequantizeLinear", ["p3", "xs", "sz"], ["o3"]),
    ]
    inits = [c("xs", 1 / 64), q(np.array(128, np.uint8), "xz"), q(np.array(-3, np.int8), "sz"), q(ws, "wq"),
             c("wsc", 1 / 128), q(np.array(0, np.int8), "wz"), c("ys", 1 / 16), q(np.array(100, np.uint8), "yz"),
             q(rng.integers(-200, 200, 10).astype(np.int32), "bq")]
    save(d, "native_q8_pools", nodes, [x_in("x", 5, 9, 11)], [y_out("o1", 4), y_out("o2", 4), y_out("o3", 4)], inits)


def pools(d):
    nodes = [
        N("AveragePool", ["x"], ["a1"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, count_include_pad=1,
          pads=[1, 1, 1, 1]),
        N("AveragePool", ["x"], ["a2"], kernel_shape=[2, 3], strides=[2, 1], pads=[0, 1, 1, 0]),
        N("MaxPool", ["x"], ["m1"], kernel_shape=[3, 3], strides=[2, 2], dilations=[2, 2], ceil_mode=1),
        N("GlobalMaxPool", ["m1"], ["gm"]),
        N("Conv", ["x1d", "w1d"], ["c1d"], pads=[2, 1], strides=[2]),
        N("MaxPool", ["c1d"], ["p1d"], kernel_shape=[2], strides=[2]),
        N("BatchNormalization", ["x", "sc", "bi", "mu", "var"], ["bn"], epsilon=1e-3),
        N("Relu", ["bn"], ["bnr"]),
        N("ConvTranspose", ["bnr", "wt", "bt"], ["ct"], strides=[2, 2], pads=[1, 1, 1, 1], group=2),
        N("Exp", ["ct"], ["ex"]),
        N("Sqrt", ["ex"], ["sq"]),
        N("Abs", ["a2"], ["ab"]),
        N("Neg", ["ab"], ["ng"]),
        N("Reciprocal", ["gm"], ["rc"]),
    ]
    C = 6
    inits = [w("w1d", 5, 3, 4), w("sc", C, scale=1.0), w("bi", C), w("mu", C),
             numpy_helper.from_array((rng.random(C) + 0.5).astype(np.float32), "var"), w("wt", C, 4, 3, 3),
             w("bt", 8)]
    save(d, "pools", nodes, [x_in("x", C, 9, 10), x_in("x1d", 3, 17)],
         [y_out("a1", 4), y_out("ng", 4), y_out("rc", 4), y_out("p1d", 3), y_out("sq", 4)], inits, opset=19)


def attention(d):
    # two heads of scaled dot-product attention with an additive mask, as FUSE turns it into
    # alma.Attention (DNNL runs that as matmul + softmax + matmul)
    S, D, H = 5, 16, 2
    nodes = [
        N("MatMul", ["x", "wq"], ["q0"]),
        N("MatMul", ["x", "wk"], ["k0"]),
        N("MatMul", ["x", "wv"], ["v0"]),
        N("Reshape", ["q0", "shp"], ["q1"]),
        N("Reshape", ["k0", "shp"], ["k1"]),
        N("Reshape", ["v0", "shp"], ["v1"]),
        N("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
        N("Transpose", ["k1"], ["kT"], perm=[0, 2, 3, 1]),
        N("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
        N("MatMul", ["q", "kT"], ["sc"]),
        N("Div", ["sc", "scale"], ["scs"]),
        N("Add", ["scs", "mask"], ["scm"]),
        N("Softmax", ["scm"], ["p"], axis=-1),
        N("MatMul", ["p", "v"], ["ctx"]),
        N("Transpose", ["ctx"], ["ctxT"], perm=[0, 2, 1, 3]),
        N("Reshape", ["ctxT", "shp2"], ["y"]),
    ]
    mask = np.triu(np.full((S, S), -1e4, np.float32), 1).reshape(1, 1, S, S)
    inits = [w("wq", D, D), w("wk", D, D), w("wv", D, D),
             numpy_helper.from_array(np.array([0, S, H, D // H], np.int64), "shp"),
             numpy_helper.from_array(np.array([0, S, D], np.int64), "shp2"),
             c("scale", float(np.sqrt(D // H))), numpy_helper.from_array(mask, "mask")]
    save(d, "attention", nodes, [x_in("x", S, D)], [y_out("y", 3)], inits)


def concat_split(d):
    # Concat of blocked conv outputs, Split on channel-block boundaries (a view of the blocked
    # layout) and off them, Slice with negative and clamped bounds, PRelu with a per-channel slope
    nodes = [
        N("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        N("Conv", ["x", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        N("Concat", ["c1", "c2", "x"], ["cat"], axis=1),
        N("Conv", ["cat", "w3"], ["c3"]),
        N("Split", ["c3", "sp"], ["s1", "s2", "s3"], axis=1),
        N("PRelu", ["s1", "slope"], ["pr"]),
        N("Slice", ["s2", "st", "en", "ax"], ["sl"]),
        N("Relu", ["s3"], ["r3"]),
        N("Concat", ["pr", "r3"], ["y"], axis=1),
    ]
    inits = [w("w1", 8, 3, 3, 3), w("w2", 8, 3, 3, 3), w("w3", 24, 19, 1, 1),
             numpy_helper.from_array(np.array([8, 12, 4], np.int64), "sp"), w("slope", 8, 1, 1, scale=0.5),
             numpy_helper.from_array(np.array([1, -100], np.int64), "st"),
             numpy_helper.from_array(np.array([-1, 100], np.int64), "en"),
             numpy_helper.from_array(np.array([2, 3], np.int64), "ax")]
    save(d, "concat_split", nodes, [x_in("x", 3, 7, 7)], [y_out("y", 4), y_out("sl", 4)], inits)


def casts(d):
    # Cast float32 -> bfloat16 of a blocked conv output and back, with exact bfloat16 ops between
    # (Relu, MaxPool, Add of values that are bfloat16 already, Concat): DNNL must round to nearest
    # even as ONNX's Cast does (EAGER), so the fp32 comparison (rtol 1e-4, a bfloat16 ulp is 2^-8)
    # catches a truncating Cast. Also a Cast to the same type.
    BF = TensorProto.BFLOAT16
    nodes = [
        N("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        N("Cast", ["c1"], ["cb"], to=BF),
        N("Relu", ["cb"], ["rb"]),
        N("MaxPool", ["rb"], ["mb"], kernel_shape=[2, 2], strides=[2, 2]),
        N("Cast", ["mb"], ["y1"], to=TensorProto.FLOAT),
        N("Add", ["rb", "cb"], ["ab"]),
        N("Concat", ["ab", "cb"], ["kb"], axis=1),
        N("Cast", ["kb"], ["y2"], to=TensorProto.FLOAT),
        N("Cast", ["x"], ["xb"], to=BF),
        N("Cast", ["xb"], ["y3"], to=TensorProto.FLOAT),
        N("Cast", ["c1"], ["y4"], to=TensorProto.FLOAT),
    ]
    save(d, "casts", nodes, [x_in("x", 3, 6, 6)], [y_out("y1", 4), y_out("y2", 4), y_out("y3", 4), y_out("y4", 4)],
         [w("w1", 5, 3, 3, 3, scale=1.0)], opset=14)


def i64(name, value):
    return numpy_helper.from_array(np.array(value, dtype=np.int64), name)


def native_pad(d):
    # zero Pad of a blocked conv output (stays blocked), a non-zero one on full channel blocks
    # (blocked), one that crops and pads with a non-zero value on partial blocks (plain), channel
    # pads (plain), a Pad of the plain graph input including the batch axis
    nodes = [
        N("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        N("Pad", ["c1", "p1"], ["q1"]),
        N("Conv", ["q1", "w2"], ["c2"]),
        N("Pad", ["c2", "p2", "v2"], ["q2"]),
        N("Conv", ["q2", "w3"], ["c3"]),
        N("Pad", ["c3", "p3", "v3"], ["y1"]),
        N("Pad", ["c3", "p4"], ["q4"]),
        N("Relu", ["q4"], ["y2"]),
        N("Pad", ["x", "p5", "v2"], ["y3"]),
    ]
    inits = [w("w1", 16, 8, 3, 3), w("w2", 16, 16, 3, 3), w("w3", 6, 16, 1, 1), i64("p1", [0, 0, 1, 2, 0, 0, 2, 1]),
             i64("p2", [0, 0, 1, 1, 0, 0, 1, 1]), c("v2", 0.5), i64("p3", [0, 0, -1, 1, 0, 0, 1, -2]), c("v3", -1.5),
             i64("p4", [0, 1, 0, 0, 0, 1, 0, 0]), i64("p5", [1, 0, 0, 0, 0, 0, 0, 3])]
    save(d, "native_pad", nodes, [x_in("x", 8, 7, 7)], [y_out("y1", 4), y_out("y2", 4), y_out("y3", 4)], inits)


def native_pad_attr(d):
    # opset 10: pads and value as attributes
    nodes = [
        N("Conv", ["x", "w1"], ["c1"]),
        N("Pad", ["c1"], ["q1"], pads=[0, 0, 2, 1, 0, 0, 0, 1], value=0.25),
        N("Pad", ["q1"], ["y"], pads=[0, 0, 0, -1, 0, 0, -1, 0]),
    ]
    save(d, "native_pad_attr", nodes, [x_in("x", 3, 6, 6)], [y_out("y", 4)], [w("w1", 8, 3, 3, 3)], opset=10)


def native_pad_axes(d):
    # opset 18: the axes input (negative axes), constant_value omitted
    nodes = [
        N("Conv", ["x", "w1"], ["c1"]),
        N("Pad", ["c1", "p1", "", "ax"], ["y"]),
    ]
    inits = [w("w1", 8, 3, 3, 3), i64("p1", [1, 0, 2, 3]), i64("ax", [-1, 2])]
    save(d, "native_pad_axes", nodes, [x_in("x", 3, 6, 6)], [y_out("y", 4)], inits, opset=18)


def native_norms(d):
    # LRN of a blocked conv output (size 3, then 5), InstanceNormalization of that (blocked input);
    # LRN of the plain input; InstanceNormalization of rank 3 and 5
    nodes = [
        N("LRN", ["x"], ["y4"], size=3, bias=0.5),
        N("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        N("LRN", ["c1"], ["l1"], size=3, alpha=1e-3, beta=0.75, bias=2.0),
        N("LRN", ["l1"], ["i1"], size=5, alpha=2e-2, beta=0.5),
        N("InstanceNormalization", ["i1", "s16", "b16"], ["y1"], epsilon=1e-3),
        N("InstanceNormalization", ["x3", "s4", "b4"], ["y2"]),
        N("InstanceNormalization", ["x5", "s3", "b3"], ["y3"], epsilon=1e-2),
    ]
    inits = [w("w1", 16, 8, 3, 3), w("s16", 16, scale=1.0), w("b16", 16), w("s4", 4, scale=1.0), w("b4", 4),
             w("s3", 3, scale=1.0), w("b3", 3)]
    save(d, "native_norms", nodes, [x_in("x", 8, 6, 5), x_in("x3", 4, 10), x_in("x5", 3, 2, 3, 4)],
         [y_out("y1", 4), y_out("y2", 3), y_out("y3", 5), y_out("y4", 4)], inits)


def native_resize(d):
    # what PyTorch exports for F.interpolate (nearest: asymmetric + floor; bilinear without
    # align_corners: pytorch_half_pixel) on a blocked conv output, a half_pixel 2x linear
    # downsample, a nearest downsample whose ties round up (round_prefer_ceil), 3-D nearest,
    # and Upsample-9
    nodes = [
        N("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        N("Resize", ["c1", "", "s2"], ["r1"], mode="nearest", coordinate_transformation_mode="asymmetric",
          nearest_mode="floor"),
        N("Resize", ["r1", "", "s2"], ["r2"], mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
        N("Resize", ["r2", "", "s05"], ["r3"], mode="linear"),
        N("Resize", ["r3", "", "s05"], ["y1"], mode="nearest", nearest_mode="round_prefer_ceil"),
        N("Resize", ["x5", "", "s3d"], ["y2"], mode="nearest", coordinate_transformation_mode="asymmetric",
          nearest_mode="floor"),
        N("Conv", ["x", "w2"], ["c2"]),
        N("Relu", ["c2"], ["rl"]),
        N("Resize", ["rl", "", "s13"], ["y3"], mode="linear", coordinate_transformation_mode="half_pixel"),
    ]
    inits = [w("w1", 8, 4, 3, 3), w("w2", 5, 4, 1, 1), c("s2", [1, 1, 2, 2]), c("s05", [1, 1, 0.5, 0.5]),
             c("s3d", [1, 1, 2, 3, 2]), c("s13", [1, 1, 3, 1])]
    save(d, "native_resize", nodes, [x_in("x", 4, 5, 6), x_in("x5", 2, 3, 2, 4)],
         [y_out("y1", 4), y_out("y2", 5), y_out("y3", 4)], inits)


def native_resize_sizes(d):
    # opset 18: sizes over axes [2, 3] (half_pixel linear, 3x)
    nodes = [
        N("Conv", ["x", "w1"], ["c1"]),
        N("Resize", ["c1", "", "", "sz"], ["y"], mode="linear", axes=[2, 3]),
    ]
    save(d, "native_resize_sizes", nodes, [x_in("x", 3, 4, 5)], [y_out("y", 4)], [w("w1", 8, 3, 2, 2), i64("sz", [9, 12])],
         opset=18)


def native_resize11(d):
    # opset 11 as PyTorch exports it: roi (and scales, when sizes are given) as empty tensors
    nodes = [
        N("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        N("Resize", ["c1", "roi", "s2"], ["r1"], mode="nearest", coordinate_transformation_mode="asymmetric",
          nearest_mode="floor"),
        N("Resize", ["r1", "roi", "none", "sz"], ["y"], mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
    ]
    inits = [w("w1", 4, 3, 3, 3), c("roi", np.zeros(0)), c("s2", [1, 1, 2, 2]), c("none", np.zeros(0)),
             i64("sz", [1, 4, 20, 18])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 6])
    save(d, "native_resize11", nodes, [x], [y_out("y", 4)], inits, opset=11)


def resize_f32_ties_eager(d):
    # nearest (half_pixel, round_prefer_floor) by float32(5/6) on 6 pixels: x_original of output 2
    # is 2.5 in float32 (ONNX Runtime's and EAGER's arithmetic: pixel 2) but 2.5000001 in double
    # (pixel 3, oneDNN's too); oneDNN must not take it. Also 20 -> 31 rows (1.55f, tf2onnx's scale).
    nodes = [N("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             N("Resize", ["c1", "", "s56"], ["y1"], mode="nearest"),
             N("Resize", ["x20", "", "s155"], ["y2"], mode="nearest", coordinate_transformation_mode="asymmetric",
               nearest_mode="floor")]
    s56 = float(np.float32(5) / np.float32(6))
    inits = [w("w1", 8, 4, 3, 3), c("s56", [1, 1, s56, s56]), c("s155", [1, 1, 1.55, 1])]
    save(d, "resize_f32_ties_eager", nodes, [x_in("x", 4, 6, 6), x_in("x20", 3, 20, 4)], [y_out("y1", 4), y_out("y2", 4)],
         inits)


def native_upsample(d):
    # Upsample-9 (scales input), then Resize-10 (asymmetric, floor when enlarging): nearest
    nodes = [N("Conv", ["x", "w1"], ["c1"]), N("Upsample", ["c1", "sc"], ["y"], mode="nearest")]
    save(d, "native_upsample", nodes, [x_in("x", 3, 4, 5)], [y_out("y", 4)],
         [w("w1", 8, 3, 2, 2), c("sc", [1, 1, 2, 3])], opset=9)
    nodes = [N("Conv", ["x", "w1"], ["c1"]), N("Resize", ["c1", "sc"], ["y"], mode="nearest")]
    save(d, "native_resize10", nodes, [x_in("x", 3, 4, 5)], [y_out("y", 4)],
         [w("w1", 8, 3, 2, 2), c("sc", [1, 1, 3, 2])], opset=10)


def native_upsample7(d):
    nodes = [N("Conv", ["x", "w1"], ["c1"]), N("Upsample", ["c1"], ["y"], mode="nearest", scales=[1.0, 1.0, 3.0, 2.0])]
    save(d, "native_upsample7", nodes, [x_in("x", 3, 4, 5)], [y_out("y", 4)], [w("w1", 8, 3, 2, 2)], opset=7)


def resize_pad_lrn_eager(d):
    # what stays on EAGER, between oneDNN nodes: LRN of even size, reflect and edge Pad, cubic,
    # align_corners linear, a nearest downsample whose ties ONNX rounds down (oneDNN rounds up),
    # Upsample's linear (asymmetric), a Resize whose N/C scale is not 1
    nodes = [
        N("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        N("LRN", ["c1"], ["l1"], size=4),
        N("Pad", ["l1", "p1"], ["q1"], mode="reflect"),
        N("Pad", ["q1", "p1"], ["q2"], mode="edge"),
        N("Resize", ["q2", "", "s2"], ["r1"], mode="cubic"),
        N("Resize", ["r1", "", "s2"], ["r2"], mode="linear", coordinate_transformation_mode="align_corners"),
        N("Resize", ["r2", "", "s05"], ["r3"], mode="nearest"),
        N("Conv", ["r3", "w2"], ["y1"]),
        N("Resize", ["c1", "", "sc"], ["y2"], mode="nearest"),
    ]
    inits = [w("w1", 8, 4, 3, 3), w("w2", 4, 8, 1, 1), i64("p1", [0, 0, 1, 2, 0, 0, 2, 1]), c("s2", [1, 1, 2, 2]),
             c("s05", [1, 1, 0.5, 0.5]), c("sc", [1, 2, 1, 1])]
    save(d, "resize_pad_lrn_eager", nodes, [x_in("x", 4, 5, 6)], [y_out("y1", 4), y_out("y2", 4)], inits, opset=13)


def upsample_linear_eager(d):
    nodes = [N("Conv", ["x", "w1"], ["c1"]), N("Upsample", ["c1", "sc"], ["y"], mode="linear")]
    save(d, "upsample_linear_eager", nodes, [x_in("x", 3, 4, 5)], [y_out("y", 4)],
         [w("w1", 8, 3, 2, 2), c("sc", [1, 1, 2, 2])], opset=9)


def native_unit_spatial(d):
    # convolutions whose kernel and image are 1 along a spatial dim (a [k,1] kernel over width 1, as
    # tf2onnx writes 1-D convolutions): DNNL runs them at the lower rank and hands rank-4 values on
    nodes = [
        N("Conv", ["x", "w1", "b1"], ["c1"], pads=[2, 0, 2, 0]),
        N("Relu", ["c1"], ["r1"]),
        N("Conv", ["r1", "w2"], ["c2"], group=4, strides=[2, 1]),
        N("Conv", ["c2", "w3"], ["c3"], kernel_shape=[3, 1], pads=[1, 0, 1, 0]),
        N("Add", ["c3", "c2"], ["y"]),
        N("Transpose", ["x"], ["xt"], perm=[0, 1, 3, 2]),
        N("Conv", ["xt", "w4"], ["y2"], dilations=[1, 2]),
        N("Conv", ["x5", "w5"], ["y3"], pads=[0, 0, 1, 0, 0, 1]),
    ]
    inits = [w("w1", 24, 16, 5, 1), w("b1", 24), w("w2", 24, 6, 3, 1), w("w3", 24, 24, 3, 1), w("w4", 8, 16, 1, 3),
             w("w5", 6, 4, 1, 1, 3)]
    save(d, "native_unit_spatial", nodes, [x_in("x", 16, 13, 1), x_in("x5", 4, 1, 1, 9)],
         [y_out("y", 4), y_out("y2", 4), y_out("y3", 5)], inits)


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    for f in (resblock, downsample, depthwise, native_se_scale, binary_bcast_eager, boundaries, transformer, gemms, native_wide_gemms, native_pools_blocked, q8_pools, pools, attention, concat_split, casts,
              native_pad, native_pad_attr, native_pad_axes, native_norms, native_resize, native_resize_sizes,
              native_resize11, resize_f32_ties_eager, native_upsample, native_upsample7, resize_pad_lrn_eager, upsample_linear_eager,
              native_unit_spatial):
        f(d)


if __name__ == "__main__":
    main()
