#!/usr/bin/python3
"""Writes the tiny models the bench tests run: linear.onnx (MatMul+Add+Relu+Identity+Softmax with a
symbolic batch dim; FOLD has an Identity and a constant subgraph to remove), linear_b.onnx (the same
graph with other weights: another model hash, same inputs) and two_inputs.onnx (Add of two inputs,
fixed shapes). Usage: make_model.py OUTDIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def linear(path, seed=0):
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal((8,)).astype(np.float32), "B")
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


def data(outdir):
    rng = np.random.default_rng(1)
    np.save(os.path.join(outdir, "x.npy"), rng.standard_normal((10, 16)).astype(np.float32))
    d = os.path.join(outdir, "batches")
    os.makedirs(d, exist_ok=True)
    for i in range(3):
        np.save(os.path.join(d, "batch%02d.npy" % i), rng.standard_normal((4, 16)).astype(np.float32))


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    linear(os.path.join(out, "linear.onnx"))
    linear(os.path.join(out, "linear_b.onnx"), seed=1)
    two_inputs(os.path.join(out, "two_inputs.onnx"))
    data(out)
