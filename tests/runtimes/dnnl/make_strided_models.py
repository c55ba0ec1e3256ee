#!/usr/bin/python3
"""Writes small ONNX models for the DNNL runtime's copy-free transposes and groups around attention
(dnnl_runtime.c plan_lazy_views / plan_fuse_perm / plan_fuse on alma.Fused* heads): multi-head
attention split as exporters write it (MatMul + bias -> Slice -> Reshape -> Transpose per head
input, Attention, Transpose -> Reshape -> MatMul + bias + residual Add), with and without an
additive mask, with a K transpose another node also reads, with the attention output also a graph
output, with a Reshape no strided view can express on the way to Q, with V's rows too far apart
(a multiple of 2 KiB) to read in place; a MatMul + bias + Relu whose residual Add broadcasts (the
group is planned and declined at run time) or does not; a sequence-first Transpose that only moves the unit batch axis at batch 1.

Next to each NAME.onnx, NAME.expect holds what dnnl_strided_test checks after FOLD+FUSE+DNNL at
batch 3: "views perm selfsum moves": Transposes run as views, Attention+Transpose groups that ran,
alma.Fused* heads whose residual-sum group ran, and Slices/Reshapes run as strided views.

usage: make_strided_models.py OUTDIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(11)
E, H, S = 24, 3, 7  # embedding, heads, sequence
D = E // H


def w(name, *shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def N(op, ins, outs, **kw):
    return helper.make_node(op, ins, outs, **kw)


def save(outdir, name, nodes, inputs, outputs, inits, expect):
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs]
    vo = [helper.make_tensor_value_info(o, TensorProto.FLOAT, [f"{o}{i}" for i in range(r)]) for o, r in outputs]
    m = helper.make_model(helper.make_graph(nodes, name, vi, vo, inits),
                          opset_imports=[helper.make_opsetid("", 13)], producer_name="alma-tests")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(outdir, name + ".onnx"))
    with open(os.path.join(outdir, name + ".expect"), "w") as f:
        f.write(" ".join(str(e) for e in expect) + "\n")


def mha(mask=False, k_shared=False, attn_out=False, k_direct=False, flat_q=False, E=E, H=H):
    """x [B, S, E] -> y [B, S, E]: attention block with residual, as PyTorch's batch-first MHA."""
    D = E // H
    nodes = [N("MatMul", ["x", "wqkv"], ["qkv0"]), N("Add", ["qkv0", "bqkv"], ["qkv"])]
    inits = [w("wqkv", E, 3 * E), w("bqkv", 3 * E), w("wo", E, E), w("bo", E), i64("shp4", [0, S, H, D]),
             i64("shp3", [0, S, E]), i64("ax", [2]), numpy_helper.from_array(np.array(D ** -0.5, np.float32), "sc")]
    for j, t in enumerate("qkv"):
        inits += [i64(f"st{t}", [j * E]), i64(f"en{t}", [(j + 1) * E])]
        nodes.append(N("Slice", ["qkv", f"st{t}", f"en{t}", "ax"], [f"{t}s"]))
        if t == "q" and flat_q:  # [B, S, E] of rows 3E apart -> [B, S*E]: no strided view can say that
            inits.append(i64("shpf", [0, S * E]))
            nodes += [N("Reshape", ["qs", "shpf"], ["qf"]), N("Reshape", ["qf", "shp4"], ["q4"])]
        else:
            nodes.append(N("Reshape", [f"{t}s", "shp4"], [f"{t}4"]))
        if t == "k" and k_direct:  # [B, S, H, D] -> [B, H, D, S]: K^T in one Transpose
            nodes.append(N("Transpose", ["k4"], ["kT"], perm=[0, 2, 3, 1]))
        else:
            nodes.append(N("Transpose", [f"{t}4"], [f"{t}h"], perm=[0, 2, 1, 3]))
    if not k_direct:
        nodes.append(N("Transpose", ["kh"], ["kT"], perm=[0, 1, 3, 2]))
    nodes += [N("MatMul", ["qh", "kT"], ["s0"]), N("Mul", ["s0", "sc"], ["s1"])]
    last = "s1"
    if mask:
        causal = np.triu(np.full((S, S), -1e4, np.float32), 1)
        inits.append(numpy_helper.from_array(causal, "mask"))
        nodes.append(N("Add", ["s1", "mask"], ["s2"]))
        last = "s2"
    nodes += [N("Softmax", [last], ["p"], axis=-1), N("MatMul", ["p", "vh"], ["o"]),
              N("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]), N("Reshape", ["ot", "shp3"], ["o3"]),
              N("MatMul", ["o3", "wo"], ["y0"]), N("Add", ["y0", "bo"], ["y1"]), N("Add", ["y1", "x"], ["y"])]
    outputs = [("y", 3)]
    if k_shared:  # the K head transpose is read by a ReduceSum too: it must stay a copy
        nodes.append(N("ReduceSum", ["kh"], ["ksum"], keepdims=0))
        outputs.append(("ksum", 0))
    if attn_out:  # the attention's output is a graph output too: no output-strides group
        outputs.append(("o", 4))
    return nodes, [("x", ["batch", S, E])], outputs, inits


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    # views: q, k, v head transposes (K's second transpose is absorbed by FUSE); perm: the output
    # transpose; selfsum: the output projection FusedMatMul + residual Add; moves: the Slice and
    # Reshape before each head transpose (not K's when that transpose must copy)
    save(outdir, "mha", *mha(), expect=(3, 1, 1, 6))
    save(outdir, "mha_mask", *mha(mask=True), expect=(3, 1, 1, 6))
    save(outdir, "mha_k_direct", *mha(k_direct=True), expect=(3, 1, 1, 6))
    save(outdir, "mha_k_shared", *mha(k_shared=True), expect=(2, 1, 1, 4))
    save(outdir, "mha_attn_out", *mha(attn_out=True), expect=(3, 0, 1, 6))
    # Q's first Reshape cannot view its strided input: it copies, the next Reshape aliases that copy
    save(outdir, "mha_flat_q", *mha(flat_q=True), expect=(3, 1, 1, 5))
    # E = 512: V's rows are 3E floats (6 KiB) apart, a stride gemm reads slowly (dnnl_matmul.c
    # aliasing_rows): its view is copied to plain just before the second matmul; Q and K stay views
    save(outdir, "mha_wide", *mha(E=512, H=4), expect=(3, 1, 1, 6))

    # FusedMatMul(+bias) + residual Add: one primitive. Planned but declined at run time, the node
    # then running alone with its own post-ops: a broadcast residual [N] (oneDNN's sum needs the
    # output's shape) and a Relu before the sum (oneDNN 2.6's gemm matmul takes a sum only first;
    # its AVX-512 brgemm matmul takes it after the Relu: -1, either)
    for name, rshape, relu, expect in (("mm_residual", ["batch", S, 16], False, (0, 0, 1, 0)),
                                       ("mm_residual_bcast", [16], False, (0, 0, 0, 0)),
                                       ("mm_residual_relu", ["batch", S, 16], True, (0, 0, -1, 0))):
        nodes = [N("MatMul", ["x", "w1"], ["m"]), N("Add", ["m", "b1"], ["a"])]
        nodes += [N("Relu", ["a"], ["r"]), N("Add", ["r", "res"], ["y"])] if relu else [N("Add", ["a", "res"], ["y"])]
        save(outdir, name, nodes, [("x", ["batch", S, E]), ("res", rshape)], [("y", 3)], [w("w1", E, 16), w("b1", 16)],
             expect)

    # sequence-first: [B, S, E] -> [S, B, E] -> MatMul -> back; at batch 1 both Transposes move only
    # the unit axis (views); at batch 3 they copy
    nodes = [N("Transpose", ["x"], ["xs"], perm=[1, 0, 2]), N("MatMul", ["xs", "w1"], ["m"]),
             N("Transpose", ["m"], ["y"], perm=[1, 0, 2])]
    save(outdir, "seq_first", nodes, [("x", ["batch", S, E])], [("y", 3)], [w("w1", E, 16)], expect=(0, 0, 0, 0))


if __name__ == "__main__":
    main(sys.argv[1])
