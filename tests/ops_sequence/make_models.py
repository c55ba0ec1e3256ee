"""Builds the sequence test models with onnx.helper (opset 17):

seq_mix.onnx: X[1,4,6,6] -> Conv(4->6, 3x3, pad 1) -> SplitToSequence(axis 1, split [2,1,3])
  -> Loop over SequenceLength: SequenceAt(i) -> ReduceMean(axis 1, keepdims) -> MatMul(W[6,6])
     -> Relu, SequenceInsert into a loop-carried sequence (from SequenceEmpty)
  -> ConcatFromSequence(axis 1) -> Y[1,3,6,6]; also SequenceMap(Sigmoid) over the split sequence
  -> ConcatFromSequence(axis 1, new_axis 0) -> Z[1,6,6,6], and the loop's sequence itself as the
  third graph output S (a seq(tensor(float)) output).
seq_input.onnx: a graph whose input is a sequence (what `alma bench` must refuse clearly).

usage: make_models.py OUT_DIR
"""
import sys, os
import numpy as np
import onnx
from onnx import helper as h, TensorProto as TP, numpy_helper as nh


def seq_mix():
    rng = np.random.default_rng(7)
    W = nh.from_array(rng.standard_normal((6, 4, 3, 3)).astype(np.float32) * 0.3, "W")
    B = nh.from_array(rng.standard_normal(6).astype(np.float32) * 0.1, "B")
    M = nh.from_array(rng.standard_normal((6, 6)).astype(np.float32) * 0.5, "M")
    split = nh.from_array(np.array([2, 1, 3], np.int64), "split")
    body = h.make_graph(
        [
            h.make_node("Identity", ["cond_in"], ["cond_out"]),
            h.make_node("SequenceAt", ["parts", "i"], ["part"]),
            h.make_node("ReduceMean", ["part"], ["mean"], axes=[1], keepdims=1),
            h.make_node("MatMul", ["mean", "M"], ["mm"]),
            h.make_node("Relu", ["mm"], ["act"]),
            h.make_node("SequenceInsert", ["acc_in", "act"], ["acc_out"]),
        ],
        "body",
        [h.make_tensor_value_info("i", TP.INT64, []), h.make_tensor_value_info("cond_in", TP.BOOL, []),
         h.make_tensor_sequence_value_info("acc_in", TP.FLOAT, None)],
        [h.make_tensor_value_info("cond_out", TP.BOOL, []), h.make_tensor_sequence_value_info("acc_out", TP.FLOAT, None)],
    )
    sig = h.make_graph([h.make_node("Sigmoid", ["e"], ["s"])], "sig",
                       [h.make_tensor_value_info("e", TP.FLOAT, [1, None, 6, 6])], [h.make_tensor_value_info("s", TP.FLOAT, [1, None, 6, 6])])
    nodes = [
        h.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
        h.make_node("SplitToSequence", ["c", "split"], ["parts"], axis=1),
        h.make_node("SequenceLength", ["parts"], ["n"]),
        h.make_node("SequenceEmpty", [], ["empty"], dtype=TP.FLOAT),
        h.make_node("Loop", ["n", "", "empty"], ["S"], body=body),
        h.make_node("ConcatFromSequence", ["S"], ["Y"], axis=1),
        h.make_node("SequenceMap", ["parts"], ["sg"], body=sig),
        h.make_node("ConcatFromSequence", ["sg"], ["Z"], axis=1, new_axis=0),
    ]
    g = h.make_graph(nodes, "seq_mix", [h.make_tensor_value_info("X", TP.FLOAT, [1, 4, 6, 6])],
                     [h.make_tensor_value_info("Y", TP.FLOAT, [1, 3, 6, 6]), h.make_tensor_value_info("Z", TP.FLOAT, [1, 6, 6, 6]),
                      h.make_tensor_sequence_value_info("S", TP.FLOAT, None)],
                     [W, B, M, split])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def seq_input():
    g = h.make_graph([h.make_node("ConcatFromSequence", ["xs"], ["y"], axis=0)], "seq_input",
                     [h.make_tensor_sequence_value_info("xs", TP.FLOAT, None)],
                     [h.make_tensor_value_info("y", TP.FLOAT, [None, 3])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    onnx.save(seq_mix(), os.path.join(out, "seq_mix.onnx"))
    onnx.save(seq_input(), os.path.join(out, "seq_input.onnx"))
