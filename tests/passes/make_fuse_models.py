"""Builds small ONNX graphs for fuse_check:
  - one per FUSE pattern (and a few where FUSE must not fire), with the node counts expected after
    FUSE: OUTDIR/<case>.onnx;
  - graphs of the fused "alma" ops themselves with inputs and numpy reference outputs, to check
    their EAGER kernels: OUTDIR/kernels/<case>/{model.onnx,input_<i>.npy,output_<i>.npy};
  - invalid fused nodes that must fail to load, with the text the error must contain:
    OUTDIR/bad/<case>.onnx;
  - with --torch (and only then, nothing else), models exported by PyTorch with its own outputs as the
    reference and the node counts expected after FUSE: OUTDIR/torch/<case>/{model.onnx,input_0.npy,
    output_0.npy}.

usage: make_fuse_models.py [--torch] OUTDIR
       make_fuse_models.py --list | --list-kernels | --list-bad | --list-torch
           one line per case: "<case> <OP=N> ...", "<case>", "<case> <text>" (CMake makes the tests)
Runs with Debian's /usr/bin/python3 (python3-onnx, numpy; python3-torch for --torch).
"""
import os
import sys

import numpy as np

CASES = {}  # name -> (builder, [expectations])


def case(name, *expect):
    def reg(fn):
        CASES[name] = (fn, list(expect))
        return fn

    return reg


def H():
    import onnx.helper as h

    return h


rng = np.random.default_rng(1234)


def init(name, shape, lo=-1.0, hi=1.0):
    from onnx import numpy_helper

    return numpy_helper.from_array(rng.uniform(lo, hi, shape).astype(np.float32), name)


def const(name, value):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


def model(nodes, inputs, outputs, inits, opset=13, check=True):
    import onnx
    from onnx import TensorProto

    h = H()
    ins = [h.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs]
    outs = [onnx.ValueInfoProto(name=n) for n in outputs]
    g = h.make_graph(nodes, "g", ins, outs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    # output types from ONNX's shape inference (the checker wants them); alma ignores declared ones
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(m).graph.value_info}
    for o in m.graph.output:
        o.CopyFrom(inferred[o.name] if o.name in inferred else h.make_tensor_value_info(o.name, TensorProto.FLOAT, []))
    m.ir_version = 8 if opset > 15 else 7
    if check:  # python3-onnx 1.12 knows opsets up to 17
        onnx.checker.check_model(m)
    return m


def bn_params(prefix, c):
    return [init(prefix + "_s", [c], 0.5, 1.5), init(prefix + "_b", [c]), init(prefix + "_m", [c], -0.5, 0.5),
            init(prefix + "_v", [c], 0.5, 2.0)]


def bn_node(x, y, prefix, **kw):
    return H().make_node("BatchNormalization", [x, prefix + "_s", prefix + "_b", prefix + "_m", prefix + "_v"], [y],
                         epsilon=1e-3, **kw)


# ---- Pad into Conv / AveragePool ---------------------------------------------------------------


def ints(name, value):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.array(value, dtype=np.int64), name)


def pad_node(x, y, pads, opset, value=None, axes=None, mode=None):
    """A Pad in the form of its opset: pads (and value) as attributes before 11, as inputs after."""
    h = H()
    kw = {"mode": mode} if mode else {}
    if opset < 11:
        if value is not None:
            kw["value"] = value
        return [h.make_node("Pad", [x], [y], pads=pads, **kw)], []
    ins, inits = [x, y + "_pads"], [ints(y + "_pads", pads)]
    if value is not None or axes is not None:
        ins.append(y + "_val" if value is not None else "")
        if value is not None:
            inits.append(const(y + "_val", value))
    if axes is not None:
        ins.append(y + "_axes")
        inits.append(ints(y + "_axes", axes))
    return [h.make_node("Pad", ins, [y], **kw)], inits


@case("pad_conv_op13", "Conv=1", "*=1")
def _():
    h = H()
    pn, pi = pad_node("x", "p", [0, 0, 1, 2, 0, 0, 1, 0], 13)
    return model(pn + [h.make_node("Conv", ["p", "w", "b"], ["y"], pads=[1, 0, 0, 1])],
                 [("x", ["N", 3, 7, 6])], ["y"], [init("w", [4, 3, 3, 3]), init("b", [4])] + pi)


@case("pad_conv_attr_op7", "Conv=1", "*=1")
def _():
    # TF-style "SAME" padding as exporters write it: (0, 1) before a stride-2 conv, value 0 given
    h = H()
    pn, pi = pad_node("x", "p", [0, 0, 0, 0, 0, 0, 1, 1], 7, value=0.0)
    return model(pn + [h.make_node("Conv", ["p", "w"], ["y"], strides=[2, 2])],
                 [("x", ["N", 3, 8, 8])], ["y"], [init("w", [5, 3, 3, 3])] + pi, opset=7)


@case("pad_axes_conv_op18", "Conv=1", "*=1")
def _():
    h = H()
    pn, pi = pad_node("x", "p", [2, 1, 0, 1], 18, value=0.0, axes=[-2, 3])
    return model(pn + [h.make_node("Conv", ["p", "w"], ["y"], dilations=[2, 1])],
                 [("x", ["N", 3, 6, 6])], ["y"], [init("w", [4, 3, 3, 3])] + pi, opset=18, check=False)


@case("pad_conv_relu", "alma.FusedConv=1", "*=1")
def _():
    h = H()
    pn, pi = pad_node("x", "p", [0, 0, 1, 1, 0, 0, 1, 1], 11, value=0.0)
    return model(pn + [h.make_node("Conv", ["p", "w"], ["c"]), h.make_node("Relu", ["c"], ["y"])],
                 [("x", ["N", 3, 5, 5])], ["y"], [init("w", [4, 3, 3, 3])] + pi, opset=11)


@case("pad_conv1d_valid", "Conv=1", "*=1")
def _():
    h = H()
    pn, pi = pad_node("x", "p", [0, 0, 2, 0, 0, 1], 13)
    return model(pn + [h.make_node("Conv", ["p", "w"], ["y"], auto_pad="VALID", kernel_shape=[3])],
                 [("x", ["N", 2, 9])], ["y"], [init("w", [3, 2, 3])] + pi)


@case("pad_conv3d_grouped", "Conv=1", "*=1")
def _():
    h = H()
    pn, pi = pad_node("x", "p", [0, 0, 1, 0, 1, 0, 0, 1, 0, 1], 13)
    return model(pn + [h.make_node("Conv", ["p", "w"], ["y"], group=2, pads=[0, 1, 0, 0, 0, 0])],
                 [("x", ["N", 4, 3, 4, 3])], ["y"], [init("w", [6, 2, 2, 3, 2])] + pi)


@case("pad_avgpool_include_pad", "AveragePool=1", "*=1")
def _():
    h = H()
    pn, pi = pad_node("x", "p", [0, 0, 1, 0, 0, 0, 0, 1], 13)
    return model(pn + [h.make_node("AveragePool", ["p"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                   count_include_pad=1, strides=[2, 2])],
                 [("x", ["N", 3, 7, 8])], ["y"], pi)


@case("pad_avgpool_no_pads", "AveragePool=1", "*=1")
def _():
    # count_include_pad=0 without pads of its own: the padded zeros count either way
    h = H()
    pn, pi = pad_node("x", "p", [0, 0, 1, 1, 0, 0, 1, 1], 13)
    return model(pn + [h.make_node("AveragePool", ["p"], ["y"], kernel_shape=[2, 3])],
                 [("x", ["N", 3, 6, 6])], ["y"], pi)


@case("pad_avgpool_exclude_pad_kept", "Pad=1", "AveragePool=1")
def _():
    h = H()
    pn, pi = pad_node("x", "p", [0, 0, 1, 1, 0, 0, 1, 1], 13)
    return model(pn + [h.make_node("AveragePool", ["p"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
                 [("x", ["N", 3, 6, 6])], ["y"], pi)


@case("pad_avgpool_ceil_kept", "Pad=1", "AveragePool=1")
def _():
    h = H()
    pn, pi = pad_node("x", "p", [0, 0, 1, 1, 0, 0, 0, 0], 13)
    return model(pn + [h.make_node("AveragePool", ["p"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1,
                                   count_include_pad=1)],
                 [("x", ["N", 3, 6, 6])], ["y"], pi)


@case("pad_maxpool_kept", "Pad=1", "MaxPool=1")
def _():
    # MaxPool pads with -inf: a zero Pad in front of it is not its padding
    h = H()
    pn, pi = pad_node("x", "p", [0, 0, 1, 1, 0, 0, 1, 1], 13)
    return model(pn + [h.make_node("MaxPool", ["p"], ["y"], kernel_shape=[3, 3])], [("x", ["N", 3, 6, 6])], ["y"], pi)


@case("pad_nonzero_kept", "Pad=1", "Conv=1")
def _():
    h = H()
    pn, pi = pad_node("x", "p", [0, 0, 1, 1, 0, 0, 1, 1], 13, value=0.5)
    return model(pn + [h.make_node("Conv", ["p", "w"], ["y"])], [("x", ["N", 3, 6, 6])], ["y"],
                 [init("w", [4, 3, 3, 3])] + pi)


@case("pad_nonzero_attr_kept_op2", "Pad=1", "Conv=1")
def _():
    h = H()
    pn, pi = pad_node("x", "p", [0, 0, 1, 1, 0, 0, 1, 1], 2, value=-1.0)
    return model(pn + [h.make_node("Conv", ["p", "w"], ["y"])], [("x", ["N", 3, 6, 6])], ["y"],
                 [init("w", [4, 3, 3, 3])] + pi, opset=2)


@case("pad_reflect_kept", "Pad=1", "Conv=1")
def _():
    h = H()
    pn, pi = pad_node("x", "p", [0, 0, 1, 1, 0, 0, 1, 1], 13, mode="reflect")
    return model(pn + [h.make_node("Conv", ["p", "w"], ["y"])], [("x", ["N", 3, 6, 6])], ["y"],
                 [init("w", [4, 3, 3, 3])] + pi)


@case("pad_channels_kept", "Pad=1", "Conv=1")
def _():
    h = H()
    pn, pi = pad_node("x", "p", [0, 1, 1, 1, 0, 0, 1, 1], 13)
    return model(pn + [h.make_node("Conv", ["p", "w"], ["y"])], [("x", ["N", 2, 6, 6])], ["y"],
                 [init("w", [4, 3, 3, 3])] + pi)


@case("pad_negative_kept", "Pad=1", "Conv=1")
def _():
    h = H()
    pn, pi = pad_node("x", "p", [0, 0, 1, -1, 0, 0, 1, 1], 13)
    return model(pn + [h.make_node("Conv", ["p", "w"], ["y"])], [("x", ["N", 3, 6, 6])], ["y"],
                 [init("w", [4, 3, 3, 3])] + pi)


@case("pad_conv_same_kept", "Pad=1", "Conv=1")
def _():
    h = H()
    pn, pi = pad_node("x", "p", [0, 0, 1, 1, 0, 0, 1, 1], 13)
    return model(pn + [h.make_node("Conv", ["p", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])],
                 [("x", ["N", 3, 7, 7])], ["y"], [init("w", [4, 3, 3, 3])] + pi)


@case("pad_wider_than_kernel_kept", "Pad=1", "Conv=1")
def _():
    # 1 + 2 >= 3: some windows would lie entirely in the padding
    h = H()
    pn, pi = pad_node("x", "p", [0, 0, 2, 0, 0, 0, 0, 0], 13)
    return model(pn + [h.make_node("Conv", ["p", "w"], ["y"], pads=[1, 0, 0, 0])], [("x", ["N", 3, 6, 6])], ["y"],
                 [init("w", [4, 3, 3, 3])] + pi)


@case("pad_used_twice_kept", "Pad=1", "Conv=2")
def _():
    h = H()
    pn, pi = pad_node("x", "p", [0, 0, 1, 1, 0, 0, 1, 1], 13)
    return model(pn + [h.make_node("Conv", ["p", "w"], ["y"]), h.make_node("Conv", ["p", "w2"], ["z"])],
                 [("x", ["N", 3, 6, 6])], ["y", "z"], [init("w", [4, 3, 3, 3]), init("w2", [2, 3, 3, 3])] + pi)


@case("pad_runtime_amounts_kept", "Pad=1", "Conv=1")
def _():
    # pads that depend on the input's height (H mod 2 on H's end): not known before run time
    h = H()
    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Slice", ["s", "two", "three"], ["hh"]),
             h.make_node("Mod", ["hh", "two"], ["m"]), h.make_node("Concat", ["z3", "m", "z3", "m"], ["pads"], axis=0),
             h.make_node("Pad", ["x", "pads"], ["p"]), h.make_node("Conv", ["p", "w"], ["y"])]
    return model(nodes, [("x", [2, 3, "H", 6])], ["y"],
                 [ints("two", [2]), ints("three", [3]), ints("z3", [0, 0, 0]), init("w", [4, 3, 2, 3])])


# ---- BatchNormalization ------------------------------------------------------------------------


@case("conv_bn", "Conv=1", "*=1")
def _():
    h = H()
    return model([h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), bn_node("c", "y", "bn")],
                 [("x", ["N", 3, 8, 8])], ["y"], [init("w", [4, 3, 3, 3]), init("b", [4])] + bn_params("bn", 4))


@case("conv_bn_relu_nobias", "alma.FusedConv=1", "*=1")
def _():
    h = H()
    return model([h.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2]), bn_node("c", "n", "bn"),
                  h.make_node("Relu", ["n"], ["y"])],
                 [("x", ["N", 3, 9, 9])], ["y"], [init("w", [6, 3, 3, 3])] + bn_params("bn", 6))


@case("depthwise_conv_bn_clip", "alma.FusedConv=1", "*=1")
def _():
    h = H()
    return model([h.make_node("Conv", ["x", "w", "b"], ["c"], group=4, pads=[1, 1, 1, 1]), bn_node("c", "n", "bn"),
                  h.make_node("Clip", ["n", "lo", "hi"], ["y"])],
                 [("x", ["N", 4, 7, 7])], ["y"],
                 [init("w", [4, 1, 3, 3]), init("b", [4]), const("lo", 0.0), const("hi", 0.5)] + bn_params("bn", 4))


@case("convtranspose_bn", "ConvTranspose=1", "*=1")
def _():
    h = H()
    return model([h.make_node("ConvTranspose", ["x", "w", "b"], ["c"], group=2, strides=[2, 2]),
                  bn_node("c", "y", "bn")],
                 [("x", ["N", 4, 5, 5])], ["y"], [init("w", [4, 3, 3, 3]), init("b", [6])] + bn_params("bn", 6))


@case("gemm_bn", "Gemm=1", "*=1")
def _():
    h = H()
    return model([h.make_node("Gemm", ["x", "w", "c"], ["g"], transB=1, beta=0.5, alpha=1.5), bn_node("g", "y", "bn")],
                 [("x", ["N", 8])], ["y"], [init("w", [6, 8]), init("c", [6])] + bn_params("bn", 6))


@case("matmul_bn", "Gemm=1", "*=1")
def _():
    h = H()
    return model([h.make_node("MatMul", ["x", "w"], ["g"]), bn_node("g", "y", "bn")],
                 [("x", ["N", 8])], ["y"], [init("w", [8, 6])] + bn_params("bn", 6))


@case("conv_bn_op7", "Conv=1", "*=1")
def _():
    h = H()
    return model([h.make_node("Conv", ["x", "w", "b"], ["c"]), bn_node("c", "y", "bn")],
                 [("x", ["N", 3, 6, 6])], ["y"], [init("w", [4, 3, 3, 3]), init("b", [4])] + bn_params("bn", 4), opset=7)


@case("bn_training_kept", "BatchNormalization=1", "Conv=1")
def _():
    h = H()
    return model([h.make_node("Conv", ["x", "w"], ["c"]), bn_node("c", "y", "bn", training_mode=1)],
                 [("x", [2, 3, 6, 6])], ["y"], [init("w", [4, 3, 3, 3])] + bn_params("bn", 4), opset=15)


# ---- bias, MatMul + Add -> Gemm ----------------------------------------------------------------


@case("conv_add_bias_relu", "alma.FusedConv=1", "*=1")
def _():
    h = H()
    return model([h.make_node("Conv", ["x", "w", "b"], ["c"]), h.make_node("Add", ["bias", "c"], ["a"]),
                  h.make_node("Relu", ["a"], ["y"])],
                 [("x", ["N", 3, 6, 6])], ["y"], [init("w", [4, 3, 3, 3]), init("b", [4]), init("bias", [4, 1, 1])])


@case("matmul_add_gemm", "Gemm=1", "*=1")
def _():
    h = H()
    return model([h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["m", "bias"], ["y"])],
                 [("x", ["N", 8])], ["y"], [init("w", [8, 5]), init("bias", [5])])


@case("matmul_add_relu_op9", "alma.FusedGemm=1", "*=1")
def _():
    h = H()
    return model([h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["m", "bias"], ["a"]),
                  h.make_node("Relu", ["a"], ["y"])],
                 [("x", ["N", 8])], ["y"], [init("w", [8, 5]), init("bias", [1, 5])], opset=9)


@case("gemm_add_bias", "Gemm=1", "*=1")
def _():
    h = H()
    return model([h.make_node("Gemm", ["x", "w", "c"], ["g"], beta=2.0), h.make_node("Add", ["g", "bias"], ["y"])],
                 [("x", ["N", 8])], ["y"], [init("w", [8, 5]), init("c", [1, 5]), init("bias", [5])])


@case("gemm_bn_op6", "Gemm=1", "*=1")
def _():
    h = H()
    return model([h.make_node("Gemm", ["x", "w", "c"], ["g"], broadcast=1, beta=0.5), bn_node("g", "y", "bn", is_test=1)],
                 [("x", [3, 8])], ["y"], [init("w", [8, 5]), init("c", [5])] + bn_params("bn", 5), opset=6)


@case("legacy_broadcast_add_kept_op6", "Gemm=1", "Add=1")
def _():
    # before opset 7 Add broadcasts by its own rules (broadcast, axis): FUSE leaves it alone
    h = H()
    return model([h.make_node("Gemm", ["x", "w", "c"], ["g"], broadcast=1),
                  h.make_node("Add", ["g", "bias"], ["y"], broadcast=1)],
                 [("x", [3, 8])], ["y"], [init("w", [8, 5]), init("c", [5]), init("bias", [5])], opset=6)


@case("matmul_nd_bias_gelu", "alma.FusedMatMul=1", "*=1")
def _():
    h = H()
    return model([h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["bias", "m"], ["a"])] +
                 gelu_nodes("a", "y", "g_", 0),
                 [("x", ["N", 5, 8])], ["y"], [init("w", [8, 6]), init("bias", [1, 1, 6])] + gelu_consts("g_"))


# ---- residual ------------------------------------------------------------------------------------


@case("conv_residual_relu", "alma.FusedConv=2", "*=2")
def _():
    # ResNet basic block: relu(conv2(relu(conv1(x))) + x)
    h = H()
    return model([h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c1"], ["r1"]),
                  h.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
                  h.make_node("Add", ["c2", "x"], ["a"]), h.make_node("Relu", ["a"], ["y"])],
                 [("x", ["N", 4, 6, 6])], ["y"],
                 [init("w1", [4, 4, 3, 3]), init("b1", [4]), init("w2", [4, 4, 3, 3]), init("b2", [4])])


@case("conv_residual_two_convs", "alma.FusedConv=1", "Conv=1", "*=2")
def _():
    # ResNet downsample / MobileNet-V2 residual without activation: conv(x) + conv'(x)
    h = H()
    return model([h.make_node("Conv", ["x", "w1"], ["c1"], strides=[2, 2]),
                  h.make_node("Conv", ["x", "w2"], ["c2"], strides=[2, 2]), h.make_node("Add", ["c1", "c2"], ["y"])],
                 [("x", ["N", 3, 8, 8])], ["y"], [init("w1", [5, 3, 1, 1]), init("w2", [5, 3, 1, 1])])


# ---- activations ---------------------------------------------------------------------------------


@case("conv_clip_attrs_op10", "alma.FusedConv=1", "*=1")
def _():
    h = H()
    return model([h.make_node("Conv", ["x", "w"], ["c"]), h.make_node("Clip", ["c"], ["y"], min=0.0, max=0.3)],
                 [("x", ["N", 3, 6, 6])], ["y"], [init("w", [4, 3, 3, 3])], opset=10)


@case("conv_hardswish_op14", "alma.FusedConv=1", "*=1")
def _():
    h = H()
    return model([h.make_node("Conv", ["x", "w"], ["c"]), h.make_node("HardSwish", ["c"], ["y"])],
                 [("x", ["N", 3, 6, 6])], ["y"], [init("w", [4, 3, 3, 3], -2, 2)], opset=14)


@case("conv_x_hardsigmoid", "alma.FusedConv=1", "*=1")
def _():
    h = H()
    return model([h.make_node("Conv", ["x", "w"], ["c"]),
                  h.make_node("HardSigmoid", ["c"], ["s"], alpha=1.0 / 6, beta=0.5), h.make_node("Mul", ["c", "s"], ["y"])],
                 [("x", ["N", 3, 6, 6])], ["y"], [init("w", [4, 3, 3, 3], -2, 2)])


@case("conv_silu", "alma.FusedConv=1", "*=1")
def _():
    h = H()
    return model([h.make_node("Conv", ["x", "w"], ["c"]), h.make_node("Sigmoid", ["c"], ["s"]),
                  h.make_node("Mul", ["s", "c"], ["y"])],
                 [("x", ["N", 3, 6, 6])], ["y"], [init("w", [4, 3, 3, 3])])


@case("gemm_activations", "alma.FusedGemm=4", "*=4")
def _():
    h = H()
    nodes, inits, x = [], [], "x"
    acts = [("Sigmoid", {}), ("Tanh", {}), ("LeakyRelu", {"alpha": 0.2}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4})]
    for i, (op, kw) in enumerate(acts):
        nodes += [h.make_node("Gemm", [x, f"w{i}", f"b{i}"], [f"g{i}"], transB=1), h.make_node(op, [f"g{i}"], [f"a{i}"], **kw)]
        inits += [init(f"w{i}", [8, 8]), init(f"b{i}", [8])]
        x = f"a{i}"
    return model(nodes, [("x", ["N", 8])], [x], inits)


@case("matmul_3d_relu", "alma.FusedMatMul=1", "*=1")
def _():
    h = H()
    return model([h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Relu", ["m"], ["y"])],
                 [("x", ["N", 4, 8])], ["y"], [init("w", [8, 3])])


# ---- where FUSE must not fire --------------------------------------------------------------------


@case("conv_output_used_twice", "Conv=1", "Relu=1")
def _():
    h = H()
    return model([h.make_node("Conv", ["x", "w"], ["c"]), h.make_node("Relu", ["c"], ["y"])],
                 [("x", ["N", 3, 6, 6])], ["y", "c"], [init("w", [4, 3, 3, 3])])


@case("conv_read_by_subgraph", "Conv=1", "Relu=1", "If=1")
def _():
    import onnx
    from onnx import TensorProto

    h = H()
    then_g = h.make_graph([h.make_node("Identity", ["c"], ["t"])], "then", [],
                          [h.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    else_g = h.make_graph([h.make_node("Neg", ["c"], ["e"])], "else", [],
                          [h.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    cond = onnx.numpy_helper.from_array(np.array(True), "cond")
    return model([h.make_node("Conv", ["x", "w"], ["c"]), h.make_node("Relu", ["c"], ["y"]),
                  h.make_node("If", ["cond"], ["z"], then_branch=then_g, else_branch=else_g)],
                 [("x", [2, 3, 6, 6])], ["y", "z"], [init("w", [4, 3, 3, 3]), cond])


@case("add_broadcast_expands", "MatMul=1", "Add=1")
def _():
    # the Add broadcasts the MatMul output up to [4, N, 5]: not a bias
    h = H()
    return model([h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["m", "bias"], ["y"])],
                 [("x", ["N", 8])], ["y"], [init("w", [8, 5]), init("bias", [4, 1, 5])])


# ---- PyTorch subgraph patterns -------------------------------------------------------------------


def gelu_nodes(x, y, p, variant):
    h = H()
    if variant == 0:  # PyTorch 1.13: x * (1 + erf(x / sqrt2)) * 0.5
        return [h.make_node("Div", [x, p + "sqrt2"], [p + "d"]), h.make_node("Erf", [p + "d"], [p + "e"]),
                h.make_node("Add", [p + "e", p + "one"], [p + "a"]), h.make_node("Mul", [x, p + "a"], [p + "m"]),
                h.make_node("Mul", [p + "m", p + "half"], [y])]
    # (x * 0.5) * (1 + erf(x * (1/sqrt2)))
    return [h.make_node("Mul", [x, p + "isqrt2"], [p + "d"]), h.make_node("Erf", [p + "d"], [p + "e"]),
            h.make_node("Add", [p + "one", p + "e"], [p + "a"]), h.make_node("Mul", [p + "half", x], [p + "h"]),
            h.make_node("Mul", [p + "h", p + "a"], [y])]


def gelu_consts(p):
    return [const(p + "sqrt2", np.sqrt(2.0)), const(p + "isqrt2", np.sqrt(0.5)), const(p + "one", 1.0),
            const(p + "half", 0.5)]


@case("gelu_pattern", "Gelu=1", "*=1")
def _():
    return model(gelu_nodes("x", "y", "g_", 1), [("x", ["N", 7])], ["y"], gelu_consts("g_"))


@case("gemm_gelu_pattern", "alma.FusedGemm=1", "*=1")
def _():
    h = H()
    return model([h.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1)] + gelu_nodes("g", "y", "g_", 0),
                 [("x", ["N", 8])], ["y"], [init("w", [6, 8]), init("b", [6])] + gelu_consts("g_"))


def ln_nodes(x, y, p, axes, affine=True, axes_input=False):
    h = H()
    rm = (lambda i, o: h.make_node("ReduceMean", [i, p + "axes"], [o])) if axes_input else \
        (lambda i, o: h.make_node("ReduceMean", [i], [o], axes=axes))
    nodes = [rm(x, p + "mu"), h.make_node("Sub", [x, p + "mu"], [p + "d"]),
             h.make_node("Pow", [p + "d", p + "two"], [p + "p"]), rm(p + "p", p + "var"),
             h.make_node("Add", [p + "var", p + "eps"], [p + "ve"]), h.make_node("Sqrt", [p + "ve"], [p + "sd"]),
             h.make_node("Div", [p + "d", p + "sd"], [p + "n" if affine else y])]
    if affine:
        nodes += [h.make_node("Mul", [p + "n", p + "gamma"], [p + "g"]), h.make_node("Add", [p + "g", p + "beta"], [y])]
    return nodes


def ln_consts(p, shape, axes=None):
    from onnx import numpy_helper

    c = [const(p + "two", 2.0), const(p + "eps", 1e-5), init(p + "gamma", shape, 0.5, 1.5), init(p + "beta", shape)]
    if axes is not None:
        c.append(numpy_helper.from_array(np.array(axes, dtype=np.int64), p + "axes"))
    return c


@case("layernorm_pattern", "LayerNormalization=1", "*=1")
def _():
    return model(ln_nodes("x", "y", "l_", [-1]), [("x", ["N", 5, 16])], ["y"], ln_consts("l_", [16]))


@case("layernorm_two_axes_no_affine", "LayerNormalization=1", "*=1")
def _():
    return model(ln_nodes("x", "y", "l_", [2, 3], affine=False), [("x", ["N", 3, 4, 5])], ["y"], ln_consts("l_", [5])[:2])


@case("layernorm_op18_axes_input", "LayerNormalization=1", "*=1")
def _():
    return model(ln_nodes("x", "y", "l_", None, axes_input=True), [("x", ["N", 6, 10])], ["y"],
                 ln_consts("l_", [10], axes=[-1]), opset=18, check=False)


def rms_nodes(x, y, p, square="pow", inv="div", affine=True):
    """x * rsqrt(mean(x^2, -1) + eps) [* gamma], in the forms exporters write."""
    h = H()
    sq = h.make_node("Pow", [x, p + "two"], [p + "sq"]) if square == "pow" else h.make_node("Mul", [x, x], [p + "sq"])
    nodes = [sq, h.make_node("ReduceMean", [p + "sq"], [p + "ms"], axes=[-1]),
             h.make_node("Add", [p + "eps", p + "ms"], [p + "me"]), h.make_node("Sqrt", [p + "me"], [p + "rt"])]
    out = p + "n" if affine else y
    if inv == "div":  # x / sqrt
        nodes.append(h.make_node("Div", [x, p + "rt"], [out]))
    elif inv == "reciprocal":  # rsqrt as PyTorch exports it, then Mul(rsqrt, x)
        nodes += [h.make_node("Reciprocal", [p + "rt"], [p + "r"]), h.make_node("Mul", [p + "r", x], [out])]
    else:  # 1 / sqrt, then Mul(x, ·)
        nodes += [h.make_node("Div", [p + "one", p + "rt"], [p + "r"]), h.make_node("Mul", [x, p + "r"], [out])]
    if affine:
        nodes.append(h.make_node("Mul", [p + "gamma", out], [y]))
    return nodes


def rms_consts(p, d):
    return [const(p + "two", 2.0), const(p + "eps", 1e-6), const(p + "one", 1.0), init(p + "gamma", [d], 0.5, 1.5)]


@case("rmsnorm_pow_div", "RMSNormalization=1", "*=1")
def _():
    return model(rms_nodes("x", "y", "r_"), [("x", ["N", 5, 16])], ["y"], rms_consts("r_", 16))


@case("rmsnorm_mul_reciprocal_no_affine", "RMSNormalization=1", "*=1")
def _():
    return model(rms_nodes("x", "y", "r_", square="mul", inv="reciprocal", affine=False), [("x", ["N", 7])], ["y"],
                 rms_consts("r_", 7)[:2])


@case("rmsnorm_one_over_sqrt", "RMSNormalization=1", "*=1")
def _():
    return model(rms_nodes("x", "y", "r_", inv="one"), [("x", [2, "S", 12])], ["y"], rms_consts("r_", 12))


@case("rmsnorm_not_x", "RMSNormalization=0", "ReduceMean=1")
def _():
    # the root divides a different tensor than the one squared: not an RMSNorm
    h = H()
    return model([h.make_node("Pow", ["x", "two"], ["sq"]), h.make_node("ReduceMean", ["sq"], ["ms"], axes=[-1]),
                  h.make_node("Add", ["ms", "eps"], ["me"]), h.make_node("Sqrt", ["me"], ["rt"]),
                  h.make_node("Div", ["z", "rt"], ["y"])], [("x", [3, 8]), ("z", [3, 8])], ["y"],
                 [const("two", 2.0), const("eps", 1e-6)])


@case("rmsnorm_middle_axis", "RMSNormalization=0", "ReduceMean=1")
def _():
    # mean over a middle axis: RMSNormalization normalizes trailing axes only
    h = H()
    return model([h.make_node("Pow", ["x", "two"], ["sq"]), h.make_node("ReduceMean", ["sq"], ["ms"], axes=[1]),
                  h.make_node("Add", ["ms", "eps"], ["me"]), h.make_node("Sqrt", ["me"], ["rt"]),
                  h.make_node("Div", ["x", "rt"], ["y"])], [("x", [3, 4, 8])], ["y"],
                 [const("two", 2.0), const("eps", 1e-6)])


@case("attention", "alma.Attention=1", "*=1")
def _():
    # softmax(Q Kᵀ / sqrt(d) + mask) V with K transposed on its last two axes (absorbed)
    h = H()
    return model([h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]), h.make_node("MatMul", ["q", "kt"], ["s"]),
                  h.make_node("Div", ["s", "scale"], ["ss"]), h.make_node("Add", ["ss", "mask"], ["sm"]),
                  h.make_node("Softmax", ["sm"], ["p"], axis=-1), h.make_node("MatMul", ["p", "v"], ["y"])],
                 [("q", ["N", 2, 5, 8]), ("k", ["N", 2, 6, 8]), ("v", ["N", 2, 6, 3]), ("mask", ["N", 1, 1, 6])], ["y"],
                 [const("scale", np.sqrt(8.0))])


@case("attention_torch_op11", "alma.Attention=1", "Transpose=1", "*=2")
def _():
    # as torch.nn.MultiheadAttention exports it: Q / sqrt(d) before the MatMul, Kᵀ from a [S, B*H, d] tensor
    h = H()
    return model([h.make_node("Div", ["q", "scale"], ["qs"]), h.make_node("Transpose", ["k"], ["kt"], perm=[1, 2, 0]),
                  h.make_node("MatMul", ["qs", "kt"], ["s"]), h.make_node("Softmax", ["s"], ["p"], axis=2),
                  h.make_node("MatMul", ["p", "v"], ["y"])],
                 [("q", [8, 5, 4]), ("k", [6, 8, 4]), ("v", [8, 6, 4])], ["y"], [const("scale", 2.0)], opset=11)


# ---- the fused ops' kernels against numpy ---------------------------------------------------------

KERNELS = {}  # name -> builder returning (model, inputs, outputs)
BAD = {}  # name -> (builder, text the load error must contain)


def kernel(name):
    def reg(fn):
        KERNELS[name] = fn
        return fn

    return reg


def bad(name, text):
    def reg(fn):
        BAD[name] = (fn, text)
        return fn

    return reg


def alma_model(nodes, inputs, outputs, inits=(), dtype=np.float32):
    """A graph of alma-domain nodes; inputs: [(name, array)], outputs: names."""
    from onnx import TensorProto, helper as h, mapping

    et = mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(dtype)]
    ins = [h.make_tensor_value_info(n, et, list(a.shape)) for n, a in inputs]
    outs = [h.make_tensor_value_info(n, et, None) for n in outputs]
    g = h.make_graph(nodes, "g", ins, outs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("alma", 1)])
    m.ir_version = 7
    return m


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_erf(x):
    import math

    return np.vectorize(math.erf)(x)


ACTS = {  # name -> (activation_params, numpy function)
    "Relu": ([], lambda v: np.maximum(v, 0)),
    "Clip": ([-0.2, 0.3], lambda v: np.clip(v, -0.2, 0.3)),
    "Clip_inverted": ([0.3, -0.2], lambda v: np.minimum(np.maximum(v, 0.3), -0.2)),  # min > max: max everywhere
    "HardSwish": ([], lambda v: v * np.clip(v / 6 + 0.5, 0, 1)),
    "HardSigmoid": ([0.3, 0.4], lambda v: np.clip(0.3 * v + 0.4, 0, 1)),
    "Sigmoid": ([], lambda v: 1 / (1 + np.exp(-v))),
    "SiLU": ([], lambda v: v / (1 + np.exp(-v))),
    "Gelu": ([], lambda v: 0.5 * v * (1 + np_erf(v / np.sqrt(2)))),
    "Gelu_tanh": ([1.0], lambda v: 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))),
    "Tanh": ([], np.tanh),
    "LeakyRelu": ([0.3], lambda v: np.where(v < 0, 0.3 * v, v)),
}


@kernel("fused_matmul_activations")
def _():
    # every activation on A @ B + bias, bias of shape [1] (broadcast over everything)
    from onnx import helper as h

    a, b, bias = rng.normal(0, 2, (2, 3, 4)).astype(np.float32), rng.normal(size=(4, 5)).astype(np.float32), \
        np.array([0.1], np.float32)
    nodes, outs, refs = [], [], []
    for name, (params, fn) in ACTS.items():
        kw = {"activation": name.split("_")[0]}
        if params:
            kw["activation_params"] = params
        nodes.append(h.make_node("FusedMatMul", ["a", "b", "bias"], [f"y_{name}"], domain="alma", **kw))
        outs.append(f"y_{name}")
        refs.append(fn((a.astype(np.float64) @ b + bias)).astype(np.float32))
    return alma_model(nodes, [("a", a), ("b", b), ("bias", bias)], outs), [a, b, bias], refs


def conv2d(x, w, b, pad):
    n, c, hh, ww = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = hh + 2 * pad - kh + 1, ww + 2 * pad - kw + 1
    y = np.zeros((n, m, oh, ow))
    for i in range(oh):
        for j in range(ow):
            y[:, :, i, j] = np.einsum("nckl,mckl->nm", xp[:, :, i:i + kh, j:j + kw], w)
    return y + b.reshape(1, m, 1, 1)


@kernel("fused_conv_residual_broadcast")
def _():
    # act(conv(x) + b + z), z of shape [3, 1, 1] broadcast onto [N, 3, H, W]
    from onnx import helper as h

    x, w, b, z = (rng.normal(size=s).astype(np.float32) for s in ((2, 2, 5, 5), (3, 2, 3, 3), (3,), (3, 1, 1)))
    node = h.make_node("FusedConv", ["x", "w", "b", "z"], ["y"], domain="alma", pads=[1, 1, 1, 1],
                       activation="LeakyRelu", activation_params=[0.3])
    ref = conv2d(x.astype(np.float64), w, b, 1) + z
    ref = np.where(ref < 0, 0.3 * ref, ref).astype(np.float32)
    return alma_model([node], [("x", x), ("w", w), ("b", b), ("z", z)], ["y"]), [x, w, b, z], [ref]


@kernel("fused_gemm_trans")
def _():
    from onnx import helper as h

    a, b, c = (rng.normal(size=s).astype(np.float32) for s in ((6, 3), (5, 6), (1, 5)))
    node = h.make_node("FusedGemm", ["a", "b", "c"], ["y"], domain="alma", transA=1, transB=1, alpha=0.5, beta=2.0,
                       activation="HardSigmoid", activation_params=[0.3, 0.4])
    ref = np.clip(0.3 * (0.5 * a.T.astype(np.float64) @ b.T + 2 * c) + 0.4, 0, 1).astype(np.float32)
    return alma_model([node], [("a", a), ("b", b), ("c", c)], ["y"]), [a, b, c], [ref]


def attention_ref(q, k, v, mask, scale, kt):
    kk = k if kt else np.swapaxes(k, -1, -2)
    s = scale * (q.astype(np.float64) @ kk)
    if mask is not None:
        s = s + mask
    return softmax(s) @ v


@kernel("attention_broadcast_mask")
def _():
    from onnx import helper as h

    q, k, v = (rng.normal(size=s).astype(np.float32) for s in ((2, 1, 5, 4), (1, 3, 6, 4), (2, 3, 6, 3)))
    mask = np.where(rng.uniform(size=(5, 6)) < 0.3, -1e4, 0).astype(np.float32)
    node = h.make_node("Attention", ["q", "k", "v", "mask"], ["y"], domain="alma", scale=0.7)
    ref = attention_ref(q, k, v, mask, 0.7, False).astype(np.float32)
    return alma_model([node], [("q", q), ("k", k), ("v", v), ("mask", mask)], ["y"]), [q, k, v, mask], [ref]


@kernel("attention_kt_f64_default_scale")
def _():
    from onnx import helper as h

    q, kt, v = (rng.normal(size=s) for s in ((3, 4, 5), (3, 5, 7), (7, 2)))
    node = h.make_node("Attention", ["q", "kt", "v"], ["y"], domain="alma", k_transposed=1)
    ref = attention_ref(q, kt, v, None, 1 / np.sqrt(5), True)
    return alma_model([node], [("q", q), ("kt", kt), ("v", v)], ["y"], dtype=np.float64), [q, kt, v], [ref]


@bad("unknown_activation", "activation 'Swish'")
def _():
    from onnx import helper as h

    a = np.zeros((2, 3), np.float32)
    return alma_model([h.make_node("FusedMatMul", ["a", "b"], ["y"], domain="alma", activation="Swish")],
                      [("a", a), ("b", a.T.copy())], ["y"])


@bad("too_many_activation_params", "at most 1 activation_params")
def _():
    from onnx import helper as h

    a = np.zeros((2, 3), np.float32)
    return alma_model([h.make_node("FusedGemm", ["a", "b"], ["y"], domain="alma", transB=1, activation="LeakyRelu",
                                   activation_params=[0.1, 0.2])], [("a", a), ("b", a)], ["y"])


@bad("residual_does_not_broadcast", "does not broadcast")
def _():
    from onnx import helper as h

    x, w, z = np.zeros((1, 2, 4, 4), np.float32), np.zeros((3, 2, 1, 1), np.float32), np.zeros((2, 4, 4), np.float32)
    return alma_model([h.make_node("FusedConv", ["x", "w", "", "z"], ["y"], domain="alma")],
                      [("x", x), ("w", w), ("z", z)], ["y"])


@bad("attention_shapes_disagree", "do not agree")
def _():
    from onnx import helper as h

    q, k, v = np.zeros((2, 5, 4), np.float32), np.zeros((2, 6, 3), np.float32), np.zeros((2, 6, 3), np.float32)
    return alma_model([h.make_node("Attention", ["q", "k", "v"], ["y"], domain="alma")],
                      [("q", q), ("k", k), ("v", v)], ["y"])


@kernel("fold_symbol_difference")
def _():
    # An LLM decode step's positions: the new tokens' slice [past : total] of the attention mask,
    # whose length (total - past = S) is 1 at run time. FOLD once bound every symbol to one value
    # and folded that length to 0. (Plain ONNX ops: CMake also runs these cases through FOLD+EAGER.)
    from onnx import TensorProto, helper as h, numpy_helper as nh

    B, S, P = 2, 1, 5
    x, mask, past = (rng.normal(size=s).astype(np.float32) for s in ((B, S, 4), (B, P + S), (B, P, 4)))
    ints = lambda n, v: nh.from_array(np.array(v, np.int64), n)  # noqa: E731
    nodes = [h.make_node("Shape", ["past"], ["ps"]), h.make_node("Gather", ["ps", "one"], ["plen"], axis=0),
             h.make_node("Unsqueeze", ["plen", "zero1"], ["start"]),
             h.make_node("Slice", ["mask", "start", "big", "one1"], ["pos"]),
             h.make_node("Unsqueeze", ["pos", "two1"], ["pos3"]), h.make_node("Add", ["x", "pos3"], ["y"]),
             h.make_node("Shape", ["y"], ["ys"]), h.make_node("Gather", ["ys", "one1"], ["slen"], axis=0),
             h.make_node("Concat", ["two1", "slen"], ["shape"], axis=0),
             h.make_node("Expand", ["half", "shape"], ["z"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 1, 4]),
                                  h.make_tensor_value_info("mask", TensorProto.FLOAT, ["B", "T"]),
                                  h.make_tensor_value_info("past", TensorProto.FLOAT, ["B", "P", 4])],
                     [h.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "z")],
                     [ints("one", 1), ints("zero1", [0]), ints("big", [2**63 - 1]), ints("one1", [1]),
                      ints("two1", [2]), nh.from_array(np.array([0.5], np.float32), "half")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 7
    return m, [x, mask, past], [x + mask[:, P:, None], np.full((2, S), 0.5, np.float32)]


# ---- PyTorch exports, checked against PyTorch's outputs -------------------------------------------

TORCH = {}  # name -> (builder returning (module, input), opset, [expectations])


def torch_case(name, opset, *expect):
    def reg(fn):
        TORCH[name] = (fn, opset, list(expect))
        return fn

    return reg


def pad_net():
    """nn.ZeroPad2d and F.pad in front of convolutions and pools, as CNN exporters write them."""
    import torch
    import torch.nn.functional as F

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pad = torch.nn.ZeroPad2d((1, 2, 0, 1))  # left, right, top, bottom
            self.conv1 = torch.nn.Conv2d(3, 8, 3, stride=2)
            self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1, groups=2)
            self.pool = torch.nn.AvgPool2d(3, stride=1, padding=1)  # count_include_pad=True
            self.pool2 = torch.nn.AvgPool2d(2, count_include_pad=False)

        def forward(self, x):
            y = torch.relu(self.conv1(self.pad(x)))
            y = self.conv2(F.pad(y, (1, 1, 1, 1)))
            y = self.pool(F.pad(y, (0, 1, 1, 0)))
            z = F.max_pool2d(F.pad(y, (1, 1, 1, 1)), 2)  # -inf padding: the Pad stays
            return self.pool2(F.pad(z, (1, 0, 1, 0)))

    torch.manual_seed(0)
    return Net().eval(), torch.randn(2, 3, 11, 12)


for _op in (9, 11, 13):
    torch_case(f"torch_pad_net_op{_op}", _op, "Pad=1", "alma.FusedConv=1", "Conv=1", "AveragePool=2", "MaxPool=1",
               "*=6")(pad_net)


@torch_case("torch_causal_conv1d_op13", 13, "alma.FusedConv=1", "Conv=1", "*=2")
def _():
    # causal (left-padded) 1-D convolutions, as TCN/WaveNet-style models write them
    import torch
    import torch.nn.functional as F

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv1d(4, 6, 3, dilation=2)
            self.c2 = torch.nn.Conv1d(6, 5, 2)

        def forward(self, x):
            return self.c2(F.pad(torch.relu(self.c1(F.pad(x, (4, 0)))), (1, 0)))

    torch.manual_seed(1)
    return Net().eval(), torch.randn(2, 4, 16)


def encoder_layer(batch):
    """nn.TransformerEncoderLayer (batch_first, as the peer benchmark's encoder): multi-head attention
    split by Slice/Reshape/Transpose, a residual Add after each block. At batch 1 its sequence-first
    transposes move only the unit batch axis."""
    import torch

    def build():
        torch.manual_seed(3)
        layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=48, dropout=0.0,
                                                 batch_first=True)
        return layer.eval(), torch.randn(batch, 10, 32)

    return build


for _b in (1, 2):
    torch_case(f"torch_encoder_layer_b{_b}_op14", 14, "alma.Attention=1", "alma.FusedMatMul=3",
               "LayerNormalization=2")(encoder_layer(_b))


def rmsnorm_block(kind):
    """The RMSNorm of T5 (`hidden * torch.rsqrt(variance + eps)`, weight after) and of LLaMA (cast to
    float32 first, weight times the result cast back), in front of a Linear, as Hugging Face writes them."""
    import torch

    class RMS(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.rand(d) + 0.5)
            self.lin = torch.nn.Linear(d, 8)

        def forward(self, x):
            if kind == "t5":
                variance = x.pow(2).mean(-1, keepdim=True)
                h = x * torch.rsqrt(variance + 1e-6)
                return self.lin(self.weight * h)
            dt = x.dtype
            h = x.to(torch.float32)
            variance = h.pow(2).mean(-1, keepdim=True)
            h = h * torch.rsqrt(variance + 1e-5)
            return self.lin(self.weight * h.to(dt))

    def build():
        torch.manual_seed(5)
        return RMS(24).eval(), torch.randn(2, 6, 24) * 3

    return build


torch_case("torch_t5_rmsnorm_op13", 13, "RMSNormalization=1", "Pow=0", "Sqrt=0", "*=2")(rmsnorm_block("t5"))
torch_case("torch_llama_rmsnorm_op14", 14, "RMSNormalization=1", "Pow=0", "Sqrt=0", "*=2")  # FOLD drops both Casts(rmsnorm_block("llama"))


@torch_case("torch_bert_attention_op14", 14, "alma.Attention=1", "LayerNormalization=1")
def _():
    """BERT-style self-attention (as Hugging Face writes it): separate Q/K/V Linears, heads split by
    view + transpose(1, 2) to [B, H, S, D], Kᵀ by transpose(-1, -2), an additive padding mask, the
    heads merged by transpose + contiguous + view, output Linear, residual and LayerNorm."""
    import math

    import torch

    class Attn(torch.nn.Module):
        def __init__(self, e=32, h=4):
            super().__init__()
            self.h, self.d = h, e // h
            self.q, self.k, self.v, self.o = (torch.nn.Linear(e, e) for _ in range(4))
            self.ln = torch.nn.LayerNorm(e)

        def split(self, t):
            b, s, _ = t.shape
            return t.view(b, s, self.h, self.d).transpose(1, 2)

        def forward(self, x):
            q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
            mask = torch.zeros(x.shape[0], 1, 1, x.shape[1])
            mask[..., -2:] = -10000.0  # the last two positions are padding
            p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.d) + mask, dim=-1)
            y = (p @ v).transpose(1, 2).contiguous().view(x.shape)
            return self.ln(self.o(y) + x)

    torch.manual_seed(5)
    return Attn().eval(), torch.randn(3, 9, 32)


def export_torch(build, opset):
    import io

    import onnx
    import torch

    net, x = build()
    f = io.BytesIO()
    torch.onnx.export(net, (x,), f, opset_version=opset, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    with torch.no_grad():
        y = net(x)
    return onnx.load_from_string(f.getvalue()), x.numpy(), y.numpy()


def main():
    lists = {"--list": lambda: [" ".join([n] + e) for n, (_, e) in CASES.items()],
             "--list-kernels": lambda: list(KERNELS), "--list-bad": lambda: [f"{n} {t}" for n, (_, t) in BAD.items()],
             "--list-torch": lambda: [" ".join([n] + e) for n, (_, _, e) in TORCH.items()]}
    if len(sys.argv) == 2 and sys.argv[1] in lists:
        print("\n".join(lists[sys.argv[1]]()))
        return
    import onnx

    args = sys.argv[1:]
    with_torch = "--torch" in args
    out = [a for a in args if a != "--torch"][0]
    os.makedirs(out, exist_ok=True)
    for name, (build, opset, _) in TORCH.items() if with_torch else ():
        d = os.path.join(out, "torch", name)
        os.makedirs(d, exist_ok=True)
        m, x, y = export_torch(build, opset)
        onnx.save(m, os.path.join(d, "model.onnx"))
        np.save(os.path.join(d, "input_0.npy"), x)
        np.save(os.path.join(d, "output_0.npy"), y)
    if with_torch:
        return
    for name, (build, _) in CASES.items():
        onnx.save(build(), os.path.join(out, name + ".onnx"))
    for name, build in KERNELS.items():
        d = os.path.join(out, "kernels", name)
        os.makedirs(d, exist_ok=True)
        m, ins, outs = build()
        onnx.save(m, os.path.join(d, "model.onnx"))
        for i, x in enumerate(ins):
            np.save(os.path.join(d, f"input_{i}.npy"), x)
        for i, y in enumerate(outs):
            np.save(os.path.join(d, f"output_{i}.npy"), y)
    os.makedirs(os.path.join(out, "bad"), exist_ok=True)
    for name, (build, _) in BAD.items():
        onnx.save(build(), os.path.join(out, "bad", name + ".onnx"))


if __name__ == "__main__":
    main()
