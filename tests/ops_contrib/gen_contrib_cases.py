"""ONNX Runtime's outputs for alma's quantized contrib operators (domain com.microsoft).

usage: gen_contrib_cases.py HEADER.h          writes the unit test's cases (contrib_cases.h)
       gen_contrib_cases.py --fuzz ALMA [N]   N random cases per operator (default 40) through
                                              `alma run ALMA`, compared with ONNX Runtime

Needs a python with onnxruntime, onnx and numpy (tested with onnxruntime 1.32, onnx 1.23). Every
case is one node; its quantized data inputs are graph inputs and its scales and zero points are
initializers, as in the models ONNX Runtime's quantizer writes. ONNX Runtime runs on its CPU
provider with one thread. The header holds the inputs and ONNX Runtime's output of each case, so
the C test (contrib_test.c) runs without onnxruntime.

The cases pick values that exercise what differs between implementations: rounding ties (x.5
after scaling), saturation at both ends, zero points, the broadcasting forms ONNX Runtime's kernels
treat apart (a scalar A or B within a span), per-column B parameters. QGemm and the MatMul*ToFloat
ops keep int8 weights within [-63, 63] with uint8 activations: on x86 CPUs without VNNI, ONNX
Runtime's u8s8 kernels add pairs of products in saturating 16-bit lanes (exact on ARM and VNNI),
and alma computes the exact product. QLinearReduceMean has no CPU kernel in ONNX Runtime; its cases
take QLinearGlobalAveragePool's output on the same data viewed so that the reduced axes are the
image.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

F32, U8, I8, I32, BOOL = np.float32, np.uint8, np.int8, np.int32, np.bool_
# alma_dtype codes (include/alma/alma.h)
ALMA_DT = {np.dtype(F32): 1, np.dtype(U8): 2, np.dtype(I8): 3, np.dtype(I32): 6, np.dtype(BOOL): 9}
C_TYPE = {1: "float", 2: "uint8_t", 3: "int8_t", 6: "int32_t", 9: "uint8_t"}
DATA_INPUTS = {"A", "B", "X", "x", "data", "condition", "Y"}


def f(v):
    return np.array(v, F32)


def zp(v, dt):
    return np.array(v, dt)


def make_model(op, inputs, attrs, out_dt):
    ins, inits, gin, feeds = [], [], [], {}
    for i, (nm, arr) in enumerate(inputs):
        if arr is None:
            ins.append("")
            continue
        name = f"{nm}_{i}"
        ins.append(name)
        if nm in DATA_INPUTS:
            gin.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(arr.dtype), list(arr.shape)))
            feeds[name] = arr
        else:
            inits.append(numpy_helper.from_array(arr, name))
    node = helper.make_node(op, ins, ["y"], domain="com.microsoft", **attrs)
    out = helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(np.dtype(out_dt)), None)
    g = helper.make_graph([node], "g", gin, [out], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    return m, feeds


def ort_run(op, inputs, attrs, out_dt):
    m, feeds = make_model(op, inputs, attrs, out_dt)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


# ---- the unit test's cases --------------------------------------------------------------------

def rnd(rng, dt, shape, lo=None, hi=None):
    info = np.iinfo(dt)
    return rng.integers(info.min if lo is None else lo, (info.max if hi is None else hi) + 1, shape).astype(dt)


def cases():
    rng = np.random.default_rng(2024)
    out = []

    def add(test, op, inputs, attrs, out_dt, expect=None, note=""):
        y = ort_run(op, inputs, attrs, out_dt) if expect is None else expect(inputs)
        out.append(dict(test=test, op=op, inputs=inputs, attrs=attrs, y=np.asarray(y), note=note))

    # QLinearAdd / QLinearMul
    a, b = rnd(rng, U8, (3, 20)), rnd(rng, U8, (3, 20))
    add("add_u8_full", "QLinearAdd", [("A", a), ("A_scale", f(0.031)), ("A_zero_point", zp(121, U8)), ("B", b),
        ("B_scale", f(0.047)), ("B_zero_point", zp(7, U8)), ("C_scale", f(0.05)), ("C_zero_point", zp(100, U8))], {}, U8,
        note="random codes with both ends saturating")
    a = np.arange(0, 16, dtype=U8).reshape(4, 4)
    b = np.arange(0, 16, dtype=U8)[::-1].copy().reshape(4, 4) // 3
    add("add_u8_ties", "QLinearAdd", [("A", a), ("A_scale", f(0.5)), ("A_zero_point", zp(0, U8)), ("B", b),
        ("B_scale", f(0.5)), ("B_zero_point", zp(0, U8)), ("C_scale", f(1.0)), ("C_zero_point", zp(0, U8))], {}, U8,
        note="(a + b) / 2: odd sums are ties, rounded to even")
    a, b = rnd(rng, I8, (2, 3, 4, 5)), rnd(rng, I8, (1, 3, 1, 1))
    add("add_s8_bias_per_channel", "QLinearAdd", [("A", a), ("A_scale", f(0.02)), ("A_zero_point", zp(-5, I8)), ("B", b),
        ("B_scale", f(0.013)), ("B_zero_point", zp(3, I8)), ("C_scale", f(0.03)), ("C_zero_point", zp(-2, I8))], {}, I8,
        note="B broadcast per channel: a scalar B within each span")
    a, b = rnd(rng, I8, (1, 3, 1, 1)), rnd(rng, I8, (2, 3, 4, 5))
    add("add_s8_scalar_a_span", "QLinearAdd", [("A", a), ("A_scale", f(0.013)), ("A_zero_point", zp(3, I8)), ("B", b),
        ("B_scale", f(0.02)), ("B_zero_point", zp(-5, I8)), ("C_scale", f(0.03)), ("C_zero_point", zp(-2, I8))], {}, I8,
        note="A broadcast per channel: ONNX Runtime passes A to MLAS as its B")
    a, b = np.array([[-44]], I8), np.arange(-128, 128).astype(I8).reshape(2, 128)
    add("add_s8_scalar_a_swap", "QLinearAdd", [("A", a), ("A_scale", f(0.6505247)), ("A_zero_point", zp(-47, I8)),
        ("B", b), ("B_scale", f(0.19724862)), ("B_zero_point", zp(32, I8)), ("C_scale", f(0.051670168)),
        ("C_zero_point", zp(-20, I8))], {}, I8, note="A span-scalar: parameters where the evaluation order matters (b = 28)")
    a, b = rnd(rng, U8, (4, 6)), rnd(rng, U8, (6,))
    add("add_u8_row", "QLinearAdd", [("A", a), ("A_scale", f(0.1)), ("A_zero_point", zp(128, U8)), ("B", b),
        ("B_scale", f(0.07)), ("B_zero_point", zp(90, U8)), ("C_scale", f(0.15)), ("C_zero_point", zp(128, U8))], {}, U8)
    a, b = rnd(rng, U8, (2, 5, 7)), rnd(rng, U8, (2, 5, 7))
    add("mul_u8_full", "QLinearMul", [("A", a), ("A_scale", f(0.02)), ("A_zero_point", zp(128, U8)), ("B", b),
        ("B_scale", f(0.03)), ("B_zero_point", zp(100, U8)), ("C_scale", f(0.05)), ("C_zero_point", zp(60, U8))], {}, U8)
    a, b = rnd(rng, I8, (3, 8), -12, 12), rnd(rng, I8, (8,), -12, 12)
    add("mul_s8_ties", "QLinearMul", [("A", a), ("A_scale", f(0.5)), ("A_zero_point", zp(1, I8)), ("B", b),
        ("B_scale", f(1.0)), ("B_zero_point", zp(-1, I8)), ("C_scale", f(1.0)), ("C_zero_point", zp(0, I8))], {}, I8,
        note="products of halves: ties and saturation")
    # lookup-table activations
    x = np.arange(256, dtype=np.uint16).astype(U8)
    add("sigmoid_u8_all", "QLinearSigmoid", [("X", x), ("X_scale", f(0.05)), ("X_zero_point", zp(128, U8)),
        ("Y_scale", f(1 / 256)), ("Y_zero_point", zp(0, U8))], {}, U8)
    xs = x.view(I8)
    add("sigmoid_s8_all", "QLinearSigmoid", [("X", xs), ("X_scale", f(0.1)), ("X_zero_point", zp(-10, I8)),
        ("Y_scale", f(1 / 255)), ("Y_zero_point", zp(-128, I8))], {}, I8)
    add("leaky_u8_all", "QLinearLeakyRelu", [("X", x), ("X_scale", f(0.03)), ("X_zero_point", zp(100, U8)),
        ("Y_scale", f(0.02)), ("Y_zero_point", zp(20, U8))], {"alpha": 0.1}, U8)
    add("leaky_s8_default_alpha", "QLinearLeakyRelu", [("X", xs), ("X_scale", f(0.03)), ("X_zero_point", None),
        ("Y_scale", f(0.01)), ("Y_zero_point", None)], {}, I8, note="alpha 0.01, zero points omitted")
    # pooling
    x = rnd(rng, U8, (2, 3, 4, 5))
    add("gap_u8_nchw", "QLinearGlobalAveragePool", [("X", x), ("x_scale", f(0.04)), ("x_zero_point", zp(110, U8)),
        ("y_scale", f(0.02)), ("y_zero_point", zp(120, U8))], {}, U8)
    x = rnd(rng, I8, (2, 4, 5, 3))
    add("gap_s8_nhwc", "QLinearGlobalAveragePool", [("X", x), ("x_scale", f(0.04)), ("x_zero_point", zp(-3, I8)),
        ("y_scale", f(0.01)), ("y_zero_point", zp(5, I8))], {"channels_last": 1}, I8)
    x = rnd(rng, U8, (1, 2, 7, 6))
    pool_in = lambda x, xs, xz, ys, yz, dt: [("X", x), ("x_scale", f(xs)), ("x_zero_point", zp(xz, dt)),  # noqa: E731
                                             ("y_scale", f(ys)), ("y_zero_point", zp(yz, dt))]
    add("avgpool_u8_pad", "QLinearAveragePool", pool_in(x, 0.05, 100, 0.04, 90, U8),
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, U8, note="count_include_pad 0")
    add("avgpool_u8_pad_count_ceil", "QLinearAveragePool", pool_in(x, 0.05, 100, 0.04, 90, U8),
        {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 0], "count_include_pad": 1, "ceil_mode": 1}, U8)
    add("avgpool_u8_same_upper", "QLinearAveragePool", pool_in(x, 0.05, 100, 0.04, 90, U8),
        {"kernel_shape": [2, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}, U8)
    add("avgpool_u8_global_fallback", "QLinearAveragePool", pool_in(x, 0.05, 100, 0.04, 90, U8),
        {"kernel_shape": [7, 6]}, U8, note="kernel covering the image: ONNX Runtime's integer global pool")
    x = rnd(rng, I8, (2, 5, 6, 3))
    add("avgpool_s8_nhwc", "QLinearAveragePool", pool_in(x, 0.02, -7, 0.03, 4, I8),
        {"kernel_shape": [2, 2], "strides": [1, 2], "channels_last": 1}, I8)
    x = rnd(rng, I8, (2, 3, 9))
    add("avgpool_s8_1d", "QLinearAveragePool", pool_in(x, 0.02, -7, 0.03, 4, I8),
        {"kernel_shape": [4], "strides": [2], "pads": [2, 1]}, I8)
    x = rnd(rng, U8, (1, 2, 4, 3, 5))
    add("avgpool_u8_3d", "QLinearAveragePool", pool_in(x, 0.05, 100, 0.04, 90, U8),
        {"kernel_shape": [2, 2, 3], "strides": [2, 1, 2], "pads": [0, 1, 1, 1, 0, 1]}, U8)
    # concat
    x1, x2, x3 = rnd(rng, U8, (2, 1, 3)), rnd(rng, U8, (2, 2, 3)), rnd(rng, U8, (2, 3, 3))
    add("concat_u8_axis1", "QLinearConcat", [("Y_scale", f(0.05)), ("Y_zero_point", zp(128, U8)),
        ("X", x1), ("s", f(0.05)), ("z", zp(128, U8)), ("X", x2), ("s", f(0.1)), ("z", zp(100, U8)),
        ("X", x3), ("s", f(0.025)), ("z", zp(140, U8))], {"axis": 1}, U8, note="one input with the output's parameters")
    x1, x2 = rnd(rng, I8, (3, 2)), rnd(rng, I8, (3, 4))
    add("concat_s8_last", "QLinearConcat", [("Y_scale", f(0.02)), ("Y_zero_point", zp(-1, I8)),
        ("X", x1), ("s", f(0.03)), ("z", zp(2, I8)), ("X", x2), ("s", f(0.01)), ("z", zp(-128, I8))], {"axis": -1}, I8)
    # softmax
    x = rnd(rng, U8, (3, 10))
    add("softmax_u8_last", "QLinearSoftmax", [("X", x), ("X_scale", f(0.08)), ("x_zero_point", zp(100, U8)),
        ("y_scale", f(1 / 256)), ("y_zero_point", zp(0, U8))], {"opset": 13, "axis": -1}, U8)
    x = rnd(rng, U8, (2, 3, 4))
    add("softmax_u8_opset12_flat", "QLinearSoftmax", [("X", x), ("X_scale", f(0.05)), ("x_zero_point", None),
        ("y_scale", f(1 / 256)), ("y_zero_point", zp(0, U8))], {"opset": 12, "axis": 1}, U8,
        note="opset < 13: softmax over the flattened dims from axis")
    x = rnd(rng, I8, (2, 5, 3))
    add("softmax_s8_axis1", "QLinearSoftmax", [("X", x), ("X_scale", f(0.1)), ("x_zero_point", zp(0, I8)),
        ("y_scale", f(1 / 256)), ("y_zero_point", zp(-128, I8))], {"opset": 13, "axis": 1}, I8)
    x = np.array([[127, -128, -128, -128], [10, 10, 10, 10], [127, 120, -20, 0]], I8)
    add("softmax_s8_wrap", "QLinearSoftmax", [("X", x), ("X_scale", f(1.0)), ("x_zero_point", zp(0, I8)),
        ("y_scale", f(1 / 256)), ("y_zero_point", zp(-128, I8))], {"opset": 13}, I8,
        note="a probability of 1 reaches +128 and wraps to -128 in ONNX Runtime's int8 kernel; axis defaults to -1")
    x = rnd(rng, U8, (2, 6))
    add("softmax_u8_no_axis_opset11", "QLinearSoftmax", [("X", x), ("X_scale", f(0.2)), ("x_zero_point", None),
        ("y_scale", f(1 / 200)), ("y_zero_point", zp(5, U8))], {"opset": 11}, U8,
        note="no axis attribute: the schema's default -1")
    # where
    c = np.array([[True], [False], [True]])
    x, y = rnd(rng, U8, (1, 4)), rnd(rng, U8, (3, 4))
    add("where_u8_broadcast", "QLinearWhere", [("condition", c), ("X", x), ("x_scale", f(0.1)), ("x_zero_point", zp(10, U8)),
        ("Y", y), ("y_scale", f(0.2)), ("y_zero_point", zp(200, U8)), ("z_scale", f(0.15)), ("z_zero_point", zp(128, U8))],
        {}, U8)
    c = rng.integers(0, 2, (2, 3)).astype(BOOL)
    x, y = rnd(rng, I8, (2, 3)), rnd(rng, I8, (3,))
    add("where_s8", "QLinearWhere", [("condition", c), ("X", x), ("x_scale", f(0.05)), ("x_zero_point", zp(-3, I8)),
        ("Y", y), ("y_scale", f(0.05)), ("y_zero_point", zp(-3, I8)), ("z_scale", f(0.05)), ("z_zero_point", zp(-3, I8))],
        {}, I8, note="same parameters everywhere: a plain selection")
    # reduce mean, checked against ONNX Runtime's global average pool on the same values
    x = rnd(rng, U8, (2, 3, 4, 5))
    rm = [("data", x), ("data_scale", f(0.04)), ("data_zero_point", zp(110, U8)), ("reduced_scale", f(0.02)),
          ("reduced_zero_point", zp(120, U8))]
    gap = lambda xv, cl: ort_run("QLinearGlobalAveragePool", [("X", xv)] + [(n, v) for n, v in rm[1:]],  # noqa: E731
                                 {"channels_last": cl}, U8)
    add("reducemean_u8_spatial", "QLinearReduceMean", rm, {"axes": [2, 3], "keepdims": 1}, U8,
        expect=lambda ins: gap(x, 0))
    add("reducemean_u8_axis1", "QLinearReduceMean", rm, {"axes": [-3], "keepdims": 0}, U8,
        expect=lambda ins: gap(x.reshape(2, 3, 20), 1).reshape(2, 4, 5))
    # QGemm
    a, b = rnd(rng, U8, (4, 9)), rnd(rng, I8, (9, 5), -63, 63)
    add("qgemm_u8s8_quant", "QGemm", [("A", a), ("a_scale", f(0.02)), ("a_zero_point", zp(120, U8)), ("B", b),
        ("b_scale", f(0.01)), ("b_zero_point", zp(0, I8)), ("C", rng.integers(-3000, 3000, (5,)).astype(I32)),
        ("y_scale", f(0.03)), ("y_zero_point", zp(128, U8))], {}, U8)
    a, b = rnd(rng, U8, (3, 7)), rnd(rng, U8, (6, 7))
    add("qgemm_u8u8_float_transb", "QGemm", [("A", a), ("a_scale", f(0.02)), ("a_zero_point", zp(3, U8)), ("B", b),
        ("b_scale", f(0.015)), ("b_zero_point", zp(130, U8)), ("C", rng.integers(-99, 99, (1, 6)).astype(I32))],
        {"transB": 1, "alpha": 0.5}, F32, note="no y_scale: float output")
    a, b = rnd(rng, I8, (8, 3)), rnd(rng, I8, (8, 4))
    add("qgemm_s8s8_transa_per_column", "QGemm", [("A", a), ("a_scale", f(0.05)), ("a_zero_point", zp(-4, I8)), ("B", b),
        ("b_scale", np.array([0.01, 0.02, 0.005, 0.04], F32)), ("b_zero_point", np.array([0, 1, -2, 0], I8)),
        ("C", rng.integers(-500, 500, (3, 1)).astype(I32)), ("y_scale", f(0.5)), ("y_zero_point", zp(-10, I8))],
        {"transA": 1}, I8, note="per-column B scale and zero point, C per row")
    # MatMulIntegerToFloat / DynamicQuantizeMatMul
    a, b = rnd(rng, U8, (2, 3, 8)), rnd(rng, U8, (8, 5))
    add("mmitf_u8u8_bias", "MatMulIntegerToFloat", [("A", a), ("B", b), ("a_scale", f(0.03)), ("b_scale", f(0.02)),
        ("a_zero_point", zp(128, U8)), ("b_zero_point", np.array([120, 128, 0, 255, 7], U8)),
        ("bias", rng.standard_normal(5).astype(F32))], {}, F32)
    a, b = rnd(rng, U8, (4, 6)), rnd(rng, I8, (2, 6, 3), -63, 63)
    add("mmitf_u8s8_batched_b", "MatMulIntegerToFloat", [("A", a), ("B", b), ("a_scale", f(0.03)),
        ("b_scale", rng.uniform(0.01, 0.05, (2, 1, 3)).astype(F32)), ("a_zero_point", zp(100, U8)),
        ("b_zero_point", None)], {}, F32, note="B scale per batch matrix and column")
    a, b = rnd(rng, I8, (5, 6)), rnd(rng, I8, (6, 3))
    add("mmitf_s8s8", "MatMulIntegerToFloat", [("A", a), ("B", b), ("a_scale", f(0.1)), ("b_scale", f(0.02)),
        ("a_zero_point", zp(-3, I8)), ("b_zero_point", zp(2, I8))], {}, F32, note="int8 A (full range: no u8s8 pairs)")
    a = rng.standard_normal((3, 10)).astype(F32)
    b = rnd(rng, I8, (10, 4), -63, 63)
    add("dqmm_s8_per_column", "DynamicQuantizeMatMul", [("A", a), ("B", b),
        ("b_scale", np.array([0.01, 0.02, 0.03, 0.04], F32)), ("b_zero_point", np.array([0, 0, 0, 0], I8)),
        ("bias", rng.standard_normal(4).astype(F32))], {}, F32)
    a = (rng.standard_normal((2, 2, 5)) + 1.5).astype(F32)
    b = rnd(rng, U8, (5, 3))
    add("dqmm_u8_positive_a", "DynamicQuantizeMatMul", [("A", a), ("B", b), ("b_scale", f(0.02)),
        ("b_zero_point", zp(128, U8))], {}, F32, note="all-positive A: the range widened to include 0")
    return out


def c_array(name, arr):
    dt = ALMA_DT[arr.dtype]
    vals = arr.reshape(-1)
    if dt == 1:
        items = ["%.9g" % float(v) for v in vals]
        items = [v + ("f" if any(ch in v for ch in ".e") else ".0f") for v in items]
    else:
        items = [str(int(v)) for v in vals]
    lines = []
    for i in range(0, len(items), 16):
        lines.append("  " + ", ".join(items[i:i + 16]) + ",")
    body = "\n".join(lines) if items else "  0"
    return f"static const {C_TYPE[dt]} {name}[] = {{\n{body}\n}};\n"


def c_tensor(name, arr):
    if arr is None:
        return "{0}"
    dt = ALMA_DT[arr.dtype]
    dims = ", ".join(str(d) for d in arr.shape) or "0"
    return f"{{{dt}, {arr.ndim}, {{{dims}}}, {name}}}"


def c_attrs(attrs):
    if not attrs:
        return "{0}"
    parts = []
    for k, v in attrs.items():
        if isinstance(v, str):
            parts.append(f'{{"{k}", CC_S, 0, 0, 0, {{0}}, "{v}"}}')
        elif isinstance(v, float):
            parts.append(f'{{"{k}", CC_F, 0, {v!r}f, 0, {{0}}, 0}}')
        elif isinstance(v, list):
            parts.append(f'{{"{k}", CC_INTS, 0, 0, {len(v)}, {{{", ".join(str(x) for x in v)}}}, 0}}')
        else:
            parts.append(f'{{"{k}", CC_I, {int(v)}, 0, 0, {{0}}, 0}}')
    return ", ".join(parts)


# ---- a small QOperator graph for the runtimes -------------------------------------------------

def small_model():
    """A graph chaining most of the ops the way ONNX Runtime's quantizer and optimizer write them
    (QuantizeLinear in, DequantizeLinear out, MatMul*ToFloat beside), with ONNX Runtime's outputs on
    one input: (model bytes, input, outputs)."""
    rng = np.random.default_rng(5)
    ini = []

    def const(name, arr):
        ini.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    s, z = lambda v: const(f"s{len(ini)}", f(v)), lambda v: const(f"z{len(ini)}", zp(v, U8))  # noqa: E731
    N = [
        helper.make_node("QuantizeLinear", ["x", s(0.05), z(128)], ["q"]),
        helper.make_node("QLinearAdd", ["q", s(0.05), z(128), const("bias_q", rnd(rng, U8, (1, 4, 1, 1))), s(0.02),
                                        z(100), s(0.06), z(120)], ["a"], domain="com.microsoft"),
        helper.make_node("QLinearLeakyRelu", ["a", s(0.06), z(120), s(0.04), z(20)], ["l"], domain="com.microsoft",
                         alpha=0.1),
        helper.make_node("QLinearAveragePool", ["l", s(0.04), z(20), s(0.03), z(25)], ["p"], domain="com.microsoft",
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("QLinearGlobalAveragePool", ["p", s(0.03), z(25), s(0.02), z(30)], ["g"],
                         domain="com.microsoft"),
        helper.make_node("Flatten", ["g"], ["fl"]),
        helper.make_node("QLinearMul", ["fl", s(0.02), z(30), "fl", s(0.02), z(30), s(0.01), z(5)], ["m"],
                         domain="com.microsoft"),
        helper.make_node("QLinearConcat", [s(0.02), z(30), "fl", s(0.02), z(30), "m", s(0.01), z(5)], ["c"],
                         domain="com.microsoft", axis=1),
        helper.make_node("QGemm", ["c", s(0.02), z(30), const("w", rnd(rng, I8, (8, 5), -63, 63)), s(0.01),
                                   const("wz", zp(0, I8)), const("wb", rng.integers(-200, 200, (5,)).astype(I32)),
                                   s(0.05), z(128)], ["gm"], domain="com.microsoft"),
        helper.make_node("QLinearSigmoid", ["gm", s(0.05), z(128), s(1 / 256), z(0)], ["sg"], domain="com.microsoft"),
        helper.make_node("QLinearSoftmax", ["gm", s(0.05), z(128), s(1 / 256), z(0)], ["sm"], domain="com.microsoft",
                         opset=13, axis=-1),
        helper.make_node("QLinearWhere", [const("cond", np.array([[True, False, True, False, True]])), "sm", s(1 / 256),
                                          z(0), "sg", s(1 / 256), z(0), s(1 / 256), z(0)], ["wh"], domain="com.microsoft"),
        helper.make_node("DequantizeLinear", ["wh", s(1 / 256), z(0)], ["y0"]),
        helper.make_node("MatMulIntegerToFloat", ["c", const("w2", rnd(rng, U8, (8, 3))), s(0.02), s(0.01), z(30),
                                                  z(128), const("b2", rng.standard_normal(3).astype(F32))], ["y1"],
                         domain="com.microsoft"),
        helper.make_node("Flatten", ["x"], ["xf"]),
        helper.make_node("DynamicQuantizeMatMul", ["xf", const("w3", rnd(rng, I8, (144, 3), -63, 63)), s(0.003)], ["y2"],
                         domain="com.microsoft"),
    ]
    g = helper.make_graph(N, "contrib_small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 6, 6])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y0", "y1", "y2")],
                          initializer=ini)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    x = rng.standard_normal((2, 4, 6, 6)).astype(F32) * 2
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    ys = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    return m.SerializeToString(), x, ys


def write_header(path):
    cs = cases()
    o = ["/* Generated by tests/ops_contrib/gen_contrib_cases.py with onnxruntime %s: inputs and ONNX Runtime's"
         " output\n * of each case. Do not edit; rerun the script. */\n" % ort.__version__]
    for k, c in enumerate(cs):
        for i, (nm, arr) in enumerate(c["inputs"]):
            if arr is not None:
                o.append(c_array(f"c{k}_in{i}", np.ascontiguousarray(arr)))
        o.append(c_array(f"c{k}_y", np.ascontiguousarray(c["y"])))
    o.append("static const cc_case contrib_cases[] = {\n")
    for k, c in enumerate(cs):
        ins = ", ".join(c_tensor(f"c{k}_in{i}", arr) for i, (nm, arr) in enumerate(c["inputs"]))
        note = f"  /* {c['note']} */\n" if c["note"] else ""
        o.append(f'{note}  {{"{c["test"]}", "{c["op"]}", {len(c["inputs"])}, {{{ins}}}, {len(c["attrs"])}, '
                 f'{{{c_attrs(c["attrs"])}}}, {c_tensor(f"c{k}_y", c["y"])}}},\n')
    o.append("};\n")
    mb, x, ys = small_model()
    o.append("\n/* small_model(): a QOperator graph, its input and ONNX Runtime's outputs */\n")
    o.append(c_array("model_bytes", np.frombuffer(mb, U8)).replace("uint8_t", "unsigned char"))
    o.append(c_array("model_x", x))
    for k, y in enumerate(ys):
        o.append(c_array(f"model_y{k}", np.ascontiguousarray(y)))
    o.append("static const cc_tensor model_ys[] = {%s};\n" % ", ".join(c_tensor(f"model_y{k}", y) for k, y in enumerate(ys)))
    with open(path, "w") as fh:
        fh.write("".join(o))
    print(f"{len(cs)} cases written to {path}")


# ---- fuzzing through the CLI ------------------------------------------------------------------

def fuzz_case(op, rng):
    """A random node of `op`: (inputs, attrs, output dtype)."""
    dt = U8 if rng.random() < 0.5 else I8
    sc = lambda: f(np.exp(rng.uniform(-6, 0)))  # noqa: E731
    z = lambda: zp(rnd(rng, dt, ()), dt) if rng.random() < 0.85 else None  # noqa: E731
    shape = tuple(int(d) for d in rng.integers(1, 6, rng.integers(1, 5)))
    if op in ("QLinearAdd", "QLinearMul"):
        if op == "QLinearMul" and rng.random() < 0.3:
            dt = U8
        sa = list(shape)
        sb = [d if rng.random() < 0.6 else 1 for d in shape][int(rng.integers(0, len(shape))):]
        if rng.random() < 0.5:
            sa, sb = sb, sa
        zz = lambda: zp(rnd(rng, dt, ()), dt)  # noqa: E731  (ONNX Runtime refuses omitted zero points here)
        return ([("A", rnd(rng, dt, sa)), ("A_scale", sc()), ("A_zero_point", zz()), ("B", rnd(rng, dt, sb)),
                 ("B_scale", sc()), ("B_zero_point", zz()), ("C_scale", sc()), ("C_zero_point", zz())], {}, dt)
    if op in ("QLinearSigmoid", "QLinearLeakyRelu"):
        attrs = {"alpha": float(rng.uniform(0, 1))} if op == "QLinearLeakyRelu" and rng.random() < 0.7 else {}
        return ([("X", rnd(rng, dt, shape)), ("X_scale", sc()), ("X_zero_point", z()), ("Y_scale", sc()),
                 ("Y_zero_point", z())], attrs, dt)
    if op in ("QLinearGlobalAveragePool", "QLinearAveragePool"):
        nsp = int(rng.integers(1, 4)) if op == "QLinearAveragePool" else int(rng.integers(1, 3))
        cl = int(rng.random() < 0.4)
        sp = [int(d) for d in rng.integers(2, 8, nsp)]
        n_, c_ = int(rng.integers(1, 3)), int(rng.integers(1, 5))
        xs = [n_] + sp + [c_] if cl else [n_, c_] + sp
        ins = [("X", rnd(rng, dt, xs)), ("x_scale", sc()), ("x_zero_point", zp(rnd(rng, dt, ()), dt)), ("y_scale", sc()),
               ("y_zero_point", zp(rnd(rng, dt, ()), dt))]
        if op == "QLinearGlobalAveragePool":
            return ins, {"channels_last": cl}, dt
        k = [int(rng.integers(1, d + 1)) for d in sp]
        attrs = {"kernel_shape": k, "channels_last": cl, "strides": [int(s) for s in rng.integers(1, 3, nsp)],
                 "count_include_pad": int(rng.random() < 0.5)}
        r = rng.random()
        if r < 0.4:
            attrs["pads"] = [int(rng.integers(0, kk)) for kk in k] + [int(rng.integers(0, kk)) for kk in k]
            attrs["ceil_mode"] = int(rng.random() < 0.5)
        elif r < 0.6:
            attrs["auto_pad"] = ["SAME_UPPER", "SAME_LOWER", "VALID"][int(rng.integers(0, 3))]
        return ins, attrs, dt
    if op == "QLinearConcat":
        axis = int(rng.integers(0, len(shape)))
        ins = [("Y_scale", sc()), ("Y_zero_point", zp(rnd(rng, dt, ()), dt))]
        for _ in range(int(rng.integers(1, 4))):
            s = list(shape)
            s[axis] = int(rng.integers(1, 4))
            ins += [("X", rnd(rng, dt, s)), ("s", sc()), ("z", zp(rnd(rng, dt, ()), dt))]
        return ins, {"axis": axis - len(shape) if rng.random() < 0.3 else axis}, dt
    if op == "QLinearSoftmax":
        opset = int(rng.choice([11, 12, 13]))
        attrs = {"opset": opset}
        if rng.random() < 0.8:
            attrs["axis"] = int(rng.integers(-len(shape), len(shape)))
        yz = -128 if dt == I8 and rng.random() < 0.5 else int(rnd(rng, dt, ()))
        return ([("X", rnd(rng, dt, shape)), ("X_scale", sc()), ("x_zero_point", z()),
                 ("y_scale", f(1 / float(rng.choice([256, 255, 200, 100])))), ("y_zero_point", zp(yz, dt))], attrs, dt)
    if op == "QLinearWhere":
        sc_ = [d if rng.random() < 0.6 else 1 for d in shape]
        sx = [d if rng.random() < 0.6 else 1 for d in shape]
        return ([("condition", rng.integers(0, 2, sc_).astype(BOOL)), ("X", rnd(rng, dt, sx)), ("x_scale", sc()),
                 ("x_zero_point", zp(rnd(rng, dt, ()), dt)), ("Y", rnd(rng, dt, shape)), ("y_scale", sc()),
                 ("y_zero_point", zp(rnd(rng, dt, ()), dt)), ("z_scale", sc()), ("z_zero_point", zp(rnd(rng, dt, ()), dt))],
                {}, dt)
    if op == "QGemm":
        at = U8 if rng.random() < 0.6 else I8
        bt = I8 if at == I8 or rng.random() < 0.5 else U8
        M, K, N = (int(v) for v in rng.integers(1, 20, 3))
        ta, tb = int(rng.random() < 0.3), int(rng.random() < 0.5)
        a = rnd(rng, at, (K, M) if ta else (M, K))
        b = rnd(rng, bt, (N, K) if tb else (K, N), -63 if at == U8 and bt == I8 else None, 63 if at == U8 and bt == I8 else None)
        pc = rng.random() < 0.4
        bs = rng.uniform(0.001, 0.05, N).astype(F32) if pc else sc()
        bz = rnd(rng, bt, (N,)) if pc else zp(rnd(rng, bt, ()), bt)
        c = [None, rng.integers(-5000, 5000, (N,)), rng.integers(-5000, 5000, (M, N)), rng.integers(-5000, 5000, (1,))][int(rng.integers(0, 4))]
        ins = [("A", a), ("a_scale", sc()), ("a_zero_point", zp(rnd(rng, at, ()), at)), ("B", b), ("b_scale", bs),
               ("b_zero_point", bz), ("C", None if c is None else c.astype(I32))]
        quant = rng.random() < 0.7
        if quant:
            ins += [("y_scale", sc()), ("y_zero_point", zp(rnd(rng, at, ()), at))]
        attrs = {"transA": ta, "transB": tb}
        if rng.random() < 0.3:
            attrs["alpha"] = float(rng.uniform(0.1, 2))
        return ins, attrs, at if quant else F32
    if op in ("MatMulIntegerToFloat", "DynamicQuantizeMatMul"):
        bt = U8 if rng.random() < 0.5 else I8
        M, K, N = (int(v) for v in rng.integers(1, 12, 3))
        batch = [int(d) for d in rng.integers(1, 3, int(rng.integers(0, 2)))]
        bbatch = batch if rng.random() < 0.4 else []
        b = rnd(rng, bt, bbatch + [K, N], -63 if bt == I8 else None, 63 if bt == I8 else None)
        form = rng.integers(0, 2 if not bbatch else 3)
        bs = sc() if form == 0 else rng.uniform(0.001, 0.05, [N] if form == 1 and not bbatch else bbatch + [1, N]).astype(F32)
        bz = zp(rnd(rng, bt, ()), bt) if rng.random() < 0.6 else None
        bias = rng.standard_normal(N).astype(F32) if rng.random() < 0.5 else None
        if op == "DynamicQuantizeMatMul":
            a = (rng.standard_normal(batch + [M, K]) * rng.uniform(0.1, 3) + rng.uniform(-1, 1)).astype(F32)
            return [("A", a), ("B", b), ("b_scale", bs), ("b_zero_point", bz), ("bias", bias)], {}, F32
        at = I8 if bt == I8 and rng.random() < 0.5 else U8
        a = rnd(rng, at, batch + [M, K])
        return ([("A", a), ("B", b), ("a_scale", sc()), ("b_scale", bs), ("a_zero_point", zp(rnd(rng, at, ()), at)),
                 ("b_zero_point", bz), ("bias", bias)], {}, F32)
    raise ValueError(op)


FUZZ_OPS = ["QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearGlobalAveragePool",
            "QLinearAveragePool", "QLinearConcat", "QLinearSoftmax", "QLinearWhere", "QGemm", "MatMulIntegerToFloat",
            "DynamicQuantizeMatMul"]


def fuzz(alma, n):
    rng = np.random.default_rng(7)
    bad_total = 0
    with tempfile.TemporaryDirectory() as td:
        for op in FUZZ_OPS:
            runs = mism = worst = 0
            for k in range(n):
                inputs, attrs, out_dt = fuzz_case(op, rng)
                try:
                    ref = ort_run(op, inputs, attrs, out_dt)
                except Exception as e:  # a form ONNX Runtime itself rejects: not a reference
                    print(f"  {op}: ONNX Runtime refused a case ({str(e).splitlines()[0][:120]})")
                    continue
                m, feeds = make_model(op, inputs, attrs, out_dt)
                path = os.path.join(td, "m.onnx")
                onnx.save(m, path)
                args = [alma, "run", path, "-o", os.path.join(td, "out"), "-t", "1"]
                for name, v in feeds.items():
                    np.save(os.path.join(td, name + ".npy"), v)
                    args += ["-i", f"{name}={os.path.join(td, name + '.npy')}"]
                r = subprocess.run(args, capture_output=True, text=True)
                runs += 1
                if r.returncode:
                    mism += 1
                    print(f"  {op}: alma failed: {r.stderr.strip().splitlines()[-1]}")
                    continue
                y = np.load(os.path.join(td, "out", "y.npy"))
                if y.shape != ref.shape:
                    mism += 1
                    print(f"  {op}: shape {y.shape} vs ONNX Runtime {ref.shape} ({attrs})")
                    continue
                if out_dt == F32:
                    d = float(np.max(np.abs(y.astype(np.float64) - ref) / (1 + np.abs(ref)))) if y.size else 0.0
                    ok = d <= 1e-6
                else:
                    d = int(np.max(np.abs(y.astype(np.int32) - ref.astype(np.int32)))) if y.size else 0
                    ok = d == 0
                worst = max(worst, d)
                if not ok:
                    mism += 1
                    print(f"  {op}: differs by {d} ({attrs}, shapes {[None if v is None else v.shape for _, v in inputs]})")
            bad_total += mism
            print(f"{op:26s} {runs:4d} cases, {mism} differ from ONNX Runtime (largest difference {worst})")
    return 1 if bad_total else 0


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--fuzz":
        return fuzz(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 40)
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    write_header(sys.argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
