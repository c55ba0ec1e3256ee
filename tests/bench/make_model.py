#!/usr/bin/python3
"""Writes the tiny models the bench tests run: linear.onnx (MatMul+Add+Relu+Identity+Softmax with a
symbolic batch dim; FOLD has an Identity and a constant subgraph to remove), linear_b.onnx (the same
graph with other weights: another model hash, same inputs), two_inputs.onnx (Add of two inputs,
fixed shapes), profile.onnx (a dominant MatMul+Add+Relu, then a small MatMul and Softmax),
profile_if.onnx (a MatMul and an If: a graph with a subgraph) and profile_conv.onnx (two Conv+Relu),
with
data: x.npy (10 samples) and batches/ (3 batches of 4), and labels for them computed here with NumPy
(labels.npy, batches_labels.idx: the model's argmax, then shifted for a known share of samples so
that top-1 is exactly 7/10 and 9/12), plus bad label files.
Usage: make_model.py OUTDIR"""
import struct
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def linear_weights(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal((8,)).astype(np.float32)


def linear_reference(x, seed=0):
    """The linear model's output in float64: softmax(relu(x W + B) / 4)."""
    w, b = linear_weights(seed)
    a = np.maximum(x.astype(np.float64) @ w.astype(np.float64) + b, 0) / 4
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def linear(path, seed=0):
    wv, bv = linear_weights(seed)
    w = numpy_helper.from_array(wv, "W")
    b = numpy_helper.from_array(bv, "B")
    two = numpy_helper.from_array(np.array([2.0], np.float32), "two")
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["mm"]),
        helper.make_node("Mul", ["two", "two"], ["four"]),          # constant subgraph: FOLD removes it
        helper.make_node("Add", ["mm", "B"], ["lin"]),
        helper.make_node("Identity", ["lin"], ["lin_id"]),
        helper.make_node("Relu", ["lin_id"], ["act"]),
        helper.make_node("Div", ["act", "four"], ["scaled"]),
        helper.make_node("Softmax", ["scaled"], ["y"], axis=-1),
    ]
    g = helper.make_graph(
        nodes, "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        [w, b, two])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="alma-tests")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def two_inputs(path):
    nodes = [helper.make_node("Add", ["a", "b"], ["c"])]
    g = helper.make_graph(
        nodes, "two_inputs",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="alma-tests")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def profiled(path):
    """profile.onnx: one MatMul that dominates (x[b,256] @ [256,1024], with its bias Add and Relu: a
    group BLAS and DNNL fuse), then a small MatMul and a Softmax; named nodes, for the profile tests."""
    rng = np.random.default_rng(2)
    w1 = numpy_helper.from_array(rng.standard_normal((256, 1024)).astype(np.float32) * 0.05, "W1")
    b1 = numpy_helper.from_array(rng.standard_normal((1024,)).astype(np.float32), "B1")
    w2 = numpy_helper.from_array(rng.standard_normal((1024, 8)).astype(np.float32) * 0.05, "W2")
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h"], name="big_matmul"),
        helper.make_node("Add", ["h", "B1"], ["hb"], name="big_bias"),
        helper.make_node("Relu", ["hb"], ["a"], name="big_relu"),
        helper.make_node("MatMul", ["a", "W2"], ["z"], name="small_matmul"),
        helper.make_node("Softmax", ["z"], ["y"], name="softmax", axis=-1),
    ]
    g = helper.make_graph(
        nodes, "profiled",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        [w1, b1, w2])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="alma-tests")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def profiled_if(path):
    """profile_if.onnx: MatMul, then an If on the sign of the input's sum (Relu or Neg of the MatMul's
    output in the branches): a graph with a subgraph, which DNNL and BLAS run through the shared
    executor (their hook mode)."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "W")
    zero = numpy_helper.from_array(np.array(0.0, np.float32), "zero")
    then_g = helper.make_graph([helper.make_node("Relu", ["h"], ["t"], name="then_relu")], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    else_g = helper.make_graph([helper.make_node("Neg", ["h"], ["e"], name="else_neg")], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="matmul"),
        helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"], name="positive"),
        helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g),
    ]
    g = helper.make_graph(
        nodes, "profiled_if",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32])],
        [w, zero])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="alma-tests")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def profiled_conv(path):
    """profile_conv.onnx: Conv+Relu twice, then GlobalAveragePool and Flatten: INT8_STATIC+DNNL
    makes int8 clusters of the convolutions with their activation and requantization."""
    rng = np.random.default_rng(4)
    w1 = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, "C1")
    b1 = numpy_helper.from_array(rng.standard_normal((8,)).astype(np.float32) * 0.1, "CB1")
    w2 = numpy_helper.from_array(rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.2, "C2")
    nodes = [
        helper.make_node("Conv", ["x", "C1", "CB1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "C2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["y"], name="flatten"),
    ]
    g = helper.make_graph(
        nodes, "profiled_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        [w1, b1, w2])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="alma-tests")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def labels_for(x, wrong):
    """argmax of the reference, shifted by one class for the first `wrong` samples; the top two
    scores of every sample must be far apart, so that float32 rounding cannot swap them."""
    y = linear_reference(x)
    top2 = np.sort(y, axis=-1)[:, -2:]
    assert (top2[:, 1] - top2[:, 0] > 1e-4).all(), "a near tie: pick another seed"
    lab = y.argmax(axis=-1).astype(np.int64)
    lab[:wrong] = (lab[:wrong] + 1) % y.shape[-1]
    return lab


def write_idx1(path, v):
    with open(path, "wb") as f:
        f.write(struct.pack(">BBBBI", 0, 0, 0x08, 1, len(v)))
        f.write(np.asarray(v, np.uint8).tobytes())


def data(outdir):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((10, 16)).astype(np.float32)
    np.save(os.path.join(outdir, "x.npy"), x)
    d = os.path.join(outdir, "batches")
    os.makedirs(d, exist_ok=True)
    xb = []
    for i in range(3):
        xb.append(rng.standard_normal((4, 16)).astype(np.float32))
        np.save(os.path.join(d, "batch%02d.npy" % i), xb[-1])
    lab = labels_for(x, 3)                       # top-1 7/10
    np.save(os.path.join(outdir, "labels.npy"), lab)
    write_idx1(os.path.join(outdir, "batches_labels.idx"), labels_for(np.concatenate(xb), 3))  # 9/12
    np.save(os.path.join(outdir, "labels_short.npy"), lab[:9])
    np.save(os.path.join(outdir, "labels_float.npy"), lab.astype(np.float32))
    big = lab.copy()
    big[4] = 8                                   # the output has 8 classes: 0..7
    np.save(os.path.join(outdir, "labels_big.npy"), big)


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    linear(os.path.join(out, "linear.onnx"))
    linear(os.path.join(out, "linear_b.onnx"), seed=1)
    two_inputs(os.path.join(out, "two_inputs.onnx"))
    profiled(os.path.join(out, "profile.onnx"))
    profiled_if(os.path.join(out, "profile_if.onnx"))
    profiled_conv(os.path.join(out, "profile_conv.onnx"))
    data(out)
