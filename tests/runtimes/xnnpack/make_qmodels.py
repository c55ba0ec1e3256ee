#!/usr/bin/env python3
"""Small int8 models for the XNNPACK runtime: QDQ clusters (DequantizeLinear -> Conv/Gemm/MatMul
with int8 weights behind DequantizeLinear -> [Relu|Clip] -> [MaxPool] -> [Flatten] ->
QuantizeLinear), quantized residual Adds (Add(DequantizeLinear(a), DequantizeLinear(b)) ->
[Relu|Clip] -> QuantizeLinear: uint8, int8 and mixed operands, zero points 0 and not 0,
broadcasting), QLinearConv / QLinearMatMul with uint8 and int8 tensors, and the cases that must
fall back to float (weights that do not fit int8, parameters that disagree, Adds XNNPACK cannot
take in int8) or to EAGER (a quint8 node reading an int8-path tensor). Weights are random; activation scales come from the float
ranges numpy computes on random inputs in [-2, 2] (the range xnnpack_vs_eager feeds).

xnnpack_vs_eager runs each through EAGER (the QDQ graph in float: the reference) and XNNPACK and
compares. manifest.txt gives per model: nodes on XNNPACK, partitions, convolution/matmul nodes in
int8, the float outputs' quantization step (8-bit outputs must agree within 1) and, for the Add
models, the Add nodes in int8.

usage: make_qmodels.py OUT_DIR"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from make_models import write_all  # beside this script (sys.path[0])

rng = np.random.default_rng(4321)
F, U8, S8 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8


def conv2d(x, w, b=None, stride=1, pad=0, group=1):
    """NCHW convolution in float64 (calibration only)."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, m, oh, ow))
    mg = m // group
    for g in range(group):
        xs = x[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
                y[:, g * mg:(g + 1) * mg] += np.einsum("nchw,mc->nmhw", patch, w[g * mg:(g + 1) * mg, :, i, j])
    if b is not None:
        y += b[None, :, None, None]
    return y


def act_q(lo, hi, signed=False):
    """asymmetric 8-bit parameters for a range containing 0"""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    s = np.float32((hi - lo) / 255.0)
    z = int(np.clip(np.rint(-lo / s) + (-128 if signed else 0), -128 if signed else 0, 127 if signed else 255))
    return s, z


def quant(x, s, z, signed=False):
    return np.clip(np.rint(x / s) + z, -128 if signed else 0, 127 if signed else 255)


def deq(q, s, z):
    return (q.astype(np.float64) - z) * s


def w_q(w, axis):
    """symmetric int8 weights, one scale per index of `axis`"""
    red = tuple(i for i in range(w.ndim) if i != axis)
    s = (np.abs(w).max(axis=red) / 127.0).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.rint(w / s.reshape(shape)), -127, 127).astype(np.int8)
    return q, s


class G:
    """collects nodes and initializers of one model"""

    def __init__(self):
        self.nodes, self.inits = [], []

    def c(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def n(self, op, ins, outs, **kw):
        self.nodes.append(helper.make_node(op, ins, outs, **kw))
        return outs[0]

    def q(self, x, s, z, name, signed=False):
        self.c(name + "_s", np.float32(s))
        self.c(name + "_z", np.array(z, dtype=np.int8 if signed else np.uint8))
        return self.n("QuantizeLinear", [x, name + "_s", name + "_z"], [name])

    def dq(self, x, s, z, name, signed=False):
        self.c(name + "_s", np.float32(s))
        self.c(name + "_z", np.array(z, dtype=np.int8 if signed else np.uint8))
        return self.n("DequantizeLinear", [x, name + "_s", name + "_z"], [name])

    def dq_w(self, q, s, axis, name):
        """DequantizeLinear of constant int8 weights (per channel along axis, or per tensor)"""
        self.c(name + "_q", q)
        self.c(name + "_s", s)
        self.c(name + "_z", np.zeros(s.shape, dtype=q.dtype))
        kw = {"axis": axis} if s.ndim else {}
        return self.n("DequantizeLinear", [name + "_q", name + "_s", name + "_z"], [name], **kw)

    def dq_b(self, b, xs, ws, name):
        """int32 bias in units of x_scale * w_scale, as INT8_STATIC writes it"""
        bs = (np.float32(xs) * ws).astype(np.float32)
        self.c(name + "_q", np.rint(b / bs).astype(np.int32))
        self.c(name + "_s", bs)
        return self.n("DequantizeLinear", [name + "_q", name + "_s"], [name], axis=0)

    def save(self, out, name, inputs, outputs, expect, opset=13):
        g = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="make_qmodels.py")
        m.ir_version = 7
        onnx.save(m, os.path.join(out, name + ".onnx"))
        line = "%s %d %d %d %.9g" % ((name,) + tuple(expect[:4]))
        return line + "".join(" %d" % e for e in expect[4:6])


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def models(out):
    N = "N"
    man = []
    x = rng.uniform(-2, 2, (16, 3, 8, 8))
    x4c = rng.uniform(-2, 2, (16, 4, 8, 8))

    # Conv + Relu between a QuantizeLinear pair: one int8 convolution (per-channel weights, int32 bias)
    g = G()
    xs, xz = act_q(-2, 2)
    w = rng.standard_normal((4, 4, 3, 3)) * 0.3
    b = rng.standard_normal(4) * 0.2
    wq, ws = w_q(w, 0)
    y = np.maximum(conv2d(deq(quant(x4c, xs, xz), xs, xz), wq * ws[:, None, None, None], b, pad=1), 0)
    ys, yz = act_q(y.min(), y.max())
    t = g.dq(g.q("x", xs, xz, "xq"), xs, xz, "xd")
    t = g.n("Conv", [t, g.dq_w(wq, ws, 0, "w"), g.dq_b(b, xs, ws, "b")], ["c"], pads=[1, 1, 1, 1])
    t = g.n("Relu", [t], ["r"])
    g.dq(g.q(t, ys, yz, "rq"), ys, yz, "y")
    man.append(g.save(out, "q_conv_relu", [vi("x", F, [N, 4, 8, 8])], [vi("y", F, None)], (6, 1, 1, ys)))

    # depthwise (multiplier 2, stride 2) + Clip(0, 6) + MaxPool before the QuantizeLinear: the
    # max pooling runs on int8 too
    g = G()
    x4 = rng.uniform(-2, 2, (16, 4, 9, 9))
    w = rng.standard_normal((8, 1, 3, 3)) * 0.5
    b = rng.standard_normal(8) * 0.2
    wq, ws = w_q(w, 0)
    c = np.clip(conv2d(deq(quant(x4, xs, xz), xs, xz), wq * ws[:, None, None, None], b, stride=2, pad=1, group=4), 0, 6)
    ys, yz = act_q(0, c.max())
    t = g.dq(g.q("x", xs, xz, "xq"), xs, xz, "xd")
    t = g.n("Conv", [t, g.dq_w(wq, ws, 0, "w"), g.dq_b(b, xs, ws, "b")], ["c"], pads=[1, 1, 1, 1], strides=[2, 2], group=4)
    t = g.n("Clip", [t, g.c("lo", np.float32(0)), g.c("hi", np.float32(6))], ["r"])
    t = g.n("MaxPool", [t], ["m"], kernel_shape=[2, 2], strides=[2, 2])
    g.dq(g.q(t, ys, yz, "mq"), ys, yz, "y")
    man.append(g.save(out, "q_dwconv_clip_pool", [vi("x", F, [N, 4, 9, 9])], [vi("y", F, None)], (7, 1, 1, ys)))

    # two int8 convolutions in a row (int8 between them), the middle DequantizeLinear also read by
    # a float Add (so it is computed), and a float convolution (its output is a graph output)
    g = G()
    x6 = rng.uniform(-2, 2, (16, 4, 6, 6))
    w1, w2, w3 = (rng.standard_normal((4, 4, 3, 3)) * 0.3 for _ in range(3))
    q1, s1 = w_q(w1, 0)
    q2, s2 = w_q(w2, 0)
    q3, s3 = w_q(w3, 0)
    d1 = deq(quant(x6, xs, xz), xs, xz)
    r1 = np.maximum(conv2d(d1, q1 * s1[:, None, None, None], pad=1), 0)
    as_, az = act_q(0, r1.max())
    c2 = conv2d(deq(quant(r1, as_, az), as_, az), q2 * s2[:, None, None, None], pad=1)
    cs, cz = act_q(c2.min(), c2.max())
    t = g.dq(g.q("x", xs, xz, "xq"), xs, xz, "xd")
    t1 = g.n("Conv", [t, g.dq_w(q1, s1, 0, "w1")], ["c1"], pads=[1, 1, 1, 1])
    t1 = g.n("Relu", [t1], ["r1"])
    d2 = g.dq(g.q(t1, as_, az, "r1q"), as_, az, "r1d")
    t2 = g.n("Conv", [d2, g.dq_w(q2, s2, 0, "w2")], ["c2"], pads=[1, 1, 1, 1])
    g.dq(g.q(t2, cs, cz, "c2q"), cs, cz, "y1")
    g.n("Add", [d2, g.c("k", np.float32(0.5))], ["y2"])
    g.n("Conv", [t, g.dq_w(q3, s3, 0, "w3")], ["y3"], pads=[1, 1, 1, 1])
    man.append(g.save(out, "q_chain", [vi("x", F, [N, 4, 6, 6])], [vi("y1", F, None), vi("y2", F, None), vi("y3", F, None)],
                      (11, 1, 2, max(cs, as_))))

    # Conv -> Relu -> Flatten (of NHWC data) -> Q -> DQ -> Gemm (per-channel, transB) -> Relu -> Q ->
    # DQ -> MatMul (per-tensor weights, int8 activations): the flatten runs on int8 and the two
    # fully-connected nodes take its NHWC order in their weights
    g = G()
    x5 = rng.uniform(-2, 2, (16, 4, 5, 4))
    w = rng.standard_normal((4, 4, 2, 2)) * 0.4
    qw, sw = w_q(w, 0)
    f = np.maximum(conv2d(deq(quant(x5, xs, xz), xs, xz), qw * sw[:, None, None, None]), 0).reshape(16, -1)
    fs, fz = act_q(0, f.max())
    wg = rng.standard_normal((6, 48)) * 0.2
    bg = rng.standard_normal(6) * 0.1
    qg, sg = w_q(wg, 0)
    h = np.maximum(deq(quant(f, fs, fz), fs, fz) @ (qg * sg[:, None]).T + bg, 0)
    hs, hz = act_q(h.min(), h.max(), signed=True)
    wm = rng.standard_normal((6, 5)) * 0.4
    sm = np.float32(np.abs(wm).max() / 127)
    qm = np.clip(np.rint(wm / sm), -127, 127).astype(np.int8)
    o = deq(quant(h, hs, hz, True), hs, hz) @ (qm * sm)
    os_, oz = act_q(o.min(), o.max(), signed=True)
    t = g.dq(g.q("x", xs, xz, "xq"), xs, xz, "xd")
    t = g.n("Conv", [t, g.dq_w(qw, sw, 0, "w")], ["c"])
    t = g.n("Relu", [t], ["r"])
    t = g.n("Flatten", [t], ["f"])
    t = g.dq(g.q(t, fs, fz, "fq"), fs, fz, "fd")
    t = g.n("Gemm", [t, g.dq_w(qg, sg, 0, "wg"), g.dq_b(bg, fs, sg, "bg")], ["gm"], transB=1)
    t = g.n("Relu", [t], ["gr"])
    t = g.dq(g.q(t, hs, hz, "hq", True), hs, hz, "hd", True)
    t = g.n("MatMul", [t, g.dq_w(qm, np.float32(sm), 0, "wm")], ["mm"])
    g.dq(g.q(t, os_, oz, "oq", True), os_, oz, "y", True)
    man.append(g.save(out, "q_flatten_fc", [vi("x", F, [N, 4, 5, 4])], [vi("y", F, None)], (14, 1, 3, os_)))

    # float fallbacks inside a partition: uint8 weights whose per-channel zero points leave w - zp
    # outside int8 (a float convolution on the dequantized weights), a cluster whose convolution has
    # 3 input channels (float: faster here), and a DequantizeLinear whose parameters differ from its
    # QuantizeLinear's (EAGER)
    g = G()
    wu = rng.integers(0, 256, (4, 3, 3, 3)).astype(np.uint8)
    wz = np.array([0, 255, 128, 7], dtype=np.uint8)
    wsu = np.float32([0.01, 0.02, 0.015, 0.01])
    wf = (wu.astype(np.float64) - wz[:, None, None, None]) * wsu[:, None, None, None]
    c = conv2d(deq(quant(x, xs, xz), xs, xz), wf, pad=1)
    cs, cz = act_q(c.min(), c.max())
    t = g.dq(g.q("x", xs, xz, "xq"), xs, xz, "xd")
    g.c("wu", wu)
    g.c("wu_s", wsu)
    g.c("wu_z", wz)
    wd = g.n("DequantizeLinear", ["wu", "wu_s", "wu_z"], ["wdq"], axis=0)
    t = g.n("Conv", [t, wd], ["c"], pads=[1, 1, 1, 1])
    g.dq(g.q(t, cs, cz, "cq"), cs, cz, "y")
    g.dq("xq", xs * 2, xz, "y2")
    w3 = rng.standard_normal((4, 3, 1, 1)) * 0.3
    q3, s3 = w_q(w3, 0)
    c3 = np.maximum(conv2d(deq(quant(x, xs, xz), xs, xz), q3 * s3[:, None, None, None]), 0)
    c3s, c3z = act_q(0, c3.max())
    t = g.n("Conv", ["xd", g.dq_w(q3, s3, 0, "w3")], ["c3"])
    t = g.n("Relu", [t], ["r3"])
    g.dq(g.q(t, c3s, c3z, "r3q"), c3s, c3z, "y3")
    man.append(g.save(out, "q_fallbacks", [vi("x", F, [N, 3, 8, 8])], [vi("y", F, None), vi("y2", F, None),
                                                                        vi("y3", F, None)], (9, 2, 0, max(cs, c3s))))

    # the int8 result as a uint8 graph output of rank 4 (NHWC -> NCHW byte reorder, uint8 from the
    # int8 domain), from a uint8 graph input
    g = G()
    t = g.dq("x", xs, xz, "xd")
    w = rng.standard_normal((5, 4, 3, 3)) * 0.3
    wq, ws = w_q(w, 0)
    xu = rng.integers(0, 256, (16, 4, 7, 7))
    c = np.maximum(conv2d(deq(xu, xs, xz), wq * ws[:, None, None, None], stride=2), 0)
    ys, yz = act_q(0, c.max())
    t = g.n("Conv", [t, g.dq_w(wq, ws, 0, "w")], ["c"], strides=[2, 2])
    t = g.n("Relu", [t], ["r"])
    g.q(t, ys, yz, "y")
    man.append(g.save(out, "q_u8_io", [vi("x", U8, [N, 4, 7, 7])], [vi("y", U8, None)], (4, 1, 1, 1)))

    # DequantizeLinear -> MaxPool / Flatten -> QuantizeLinear with equal parameters (as ONNX Runtime's
    # quantizer writes them): the pooling and the flatten run on int8, no converts; with other
    # parameters the MaxPool stays float between converts
    g = G()
    wm = rng.standard_normal((48, 5)) * 0.2
    qm, sm = w_q(wm, 1)
    mp = deq(quant(x, xs, xz), xs, xz)[:, :, :8:2, :8:2]  # a bound for the range only
    o = mp.reshape(16, -1) @ (qm * sm)
    os_, oz = act_q(o.min() * 1.5, o.max() * 1.5)
    t = g.dq(g.q("x", xs, xz, "xq"), xs, xz, "xd")
    t = g.n("MaxPool", [t], ["m"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    t = g.dq(g.q(t, xs, xz, "mq"), xs, xz, "md")
    t = g.n("Flatten", [t], ["f"])
    t = g.dq(g.q(t, xs, xz, "fq"), xs, xz, "fd")
    t = g.n("MatMul", [t, g.dq_w(qm, sm, 1, "wm")], ["mm"])
    g.dq(g.q(t, os_, oz, "oq"), os_, oz, "y")
    t = g.n("MaxPool", ["xd"], ["m2"], kernel_shape=[2, 2], strides=[2, 2])
    g.dq(g.q(t, xs * 2, xz, "m2q"), xs * 2, xz, "y2")
    man.append(g.save(out, "q_passthrough", [vi("x", F, [N, 3, 8, 8])], [vi("y", F, None), vi("y2", F, None)],
                      (14, 1, 1, max(os_, xs * 2), 0, 2)))

    # INT8_STATIC's pooling (conv -> Relu -> MaxPool -> conv becomes DQ -> MaxPool -> Q, one scale
    # and zero point on both sides): with 8-bit values in and out nothing is rounded, so XNNPACK's
    # int8 max pooling must give EAGER's values exactly. uint8 with ResNet's 3x3/2 pool (padding:
    # XNNPACK reads edge pixels for padded taps); int8 with the digits CNN's 2x2/2 pool on an odd
    # size (the last row and column unused), then a 2x2/2 pool with ceil_mode (a last window half
    # outside), out through DequantizeLinear (the same float arithmetic on both runtimes)
    g = G()
    us, uz = np.float32(0.0371), 17
    t = g.n("MaxPool", [g.dq("x", us, uz, "xd")], ["m"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    g.q(t, us, uz, "y")
    ss, sz = np.float32(0.0213), -5
    t = g.n("MaxPool", [g.dq("b", ss, sz, "bd", True)], ["m2"], kernel_shape=[2, 2], strides=[2, 2])
    t = g.dq(g.q(t, ss, sz, "m2q", True), ss, sz, "m2d", True)
    t = g.n("MaxPool", [t], ["m3"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
    g.dq(g.q(t, ss, sz, "m3q", True), ss, sz, "y2", True)
    man.append(g.save(out, "q_pool_exact", [vi("x", U8, [N, 4, 9, 9]), vi("b", S8, [N, 3, 7, 7])],
                      [vi("y", U8, None), vi("y2", F, None)], (10, 2, 0, -1, 0, 3)))

    man += add_models(out)

    # QLinearConv with per-channel int8 weights and bias (groups, stride, padding), uint8 in and out
    g = G()
    wq, ws = w_q(rng.standard_normal((6, 2, 3, 3)) * 0.3, 0)
    bq = rng.integers(-500, 500, 6).astype(np.int32)
    g.c("xs", np.float32(xs)), g.c("xz", np.uint8(xz)), g.c("w", wq), g.c("ws", ws), g.c("wz", np.zeros(6, np.int8))
    g.c("ys", np.float32(0.05)), g.c("yz", np.uint8(100)), g.c("b", bq)
    g.n("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], group=2, strides=[2, 1],
        pads=[1, 0, 1, 2])
    man.append(g.save(out, "qlinear_conv", [vi("x", U8, [N, 4, 7, 6])], [vi("y", U8, None)], (1, 1, 1, 1)))

    # QLinearMatMul with asymmetric uint8 weights (the quint8 path), rank-3 input
    g = G()
    g.c("as", np.float32(0.02)), g.c("az", np.uint8(128)), g.c("b", rng.integers(0, 256, (8, 6)).astype(np.uint8))
    g.c("bs", np.float32(0.01)), g.c("bz", np.uint8(100)), g.c("ys", np.float32(0.05)), g.c("yz", np.uint8(120))
    g.n("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    man.append(g.save(out, "qlinear_matmul_u8", [vi("a", U8, [N, 5, 8])], [vi("y", U8, None)], (1, 1, 1, 1)))

    # QLinearMatMul with int8 input, per-column scales, then DequantizeLinear
    g = G()
    bq, bs = w_q(rng.standard_normal((8, 6)), 1)
    g.c("as", np.float32(0.02)), g.c("az", np.int8(-3)), g.c("b", bq), g.c("bs", bs), g.c("bz", np.zeros(6, np.int8))
    g.c("ys", np.float32(0.04)), g.c("yz", np.int8(5))
    t = g.n("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["q"])
    g.dq(t, 0.04, 5, "y", True)
    man.append(g.save(out, "qlinear_matmul_s8", [vi("a", S8, [N, 8])], [vi("y", F, None)], (2, 1, 1, 0.04)))

    # a uint8 tensor written by an int8-path QLinearConv and read by a QLinearConv that needs the
    # quint8 path (asymmetric weights): the second runs on EAGER
    g = G()
    wq, ws = w_q(rng.standard_normal((3, 3, 1, 1)), 0)
    g.c("xs", np.float32(xs)), g.c("xz", np.uint8(xz)), g.c("w", wq), g.c("ws", ws), g.c("wz", np.zeros(3, np.int8))
    g.c("ys", np.float32(0.05)), g.c("yz", np.uint8(100))
    g.c("w2", rng.integers(0, 256, (2, 3, 1, 1)).astype(np.uint8)), g.c("ws2", np.float32(0.01)), g.c("wz2", np.uint8(10))
    g.c("ys2", np.float32(0.1)), g.c("yz2", np.uint8(90))
    t = g.n("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y1"])
    g.n("QLinearConv", [t, "ys", "yz", "w2", "ws2", "wz2", "ys2", "yz2"], ["y2"])
    man.append(g.save(out, "qlinear_domains", [vi("x", U8, [N, 3, 5, 5])], [vi("y1", U8, None), vi("y2", U8, None)],
                      (1, 1, 1, 1), opset=13))
    return man


def add_models(out):
    """Quantized residual Adds. Scales come from random ranges (no short decimal forms, so exact
    half-step ties between EAGER's float sum and XNNPACK's fixed-point one are rare)."""
    N = "N"
    man = []
    xs, xz = act_q(-2, 2)  # uint8, zero point 128

    def conv_q(x, xd_np, wname, cname, signed=False, chans=4):
        """an int8 convolution cluster DQ(x) -> Conv -> Q: returns the 8-bit output name, its
        parameters and its dequantized numpy value"""
        w = rng.standard_normal((chans, xd_np.shape[1], 3, 3)) * 0.3
        wq, ws = w_q(w, 0)
        c = conv2d(xd_np, wq * ws[:, None, None, None], pad=1)
        cs, cz = act_q(c.min(), c.max(), signed)
        t = g.n("Conv", [x, g.dq_w(wq, ws, 0, wname)], [cname], pads=[1, 1, 1, 1])
        return g.q(t, cs, cz, cname + "q", signed), cs, cz, deq(quant(c, cs, cz, signed), cs, cz)

    # uint8 with zero points not 0: a convolution's int8 output (written directly, no convert) plus the
    # block input, both through DequantizeLinear, then QuantizeLinear: one quantized add
    g = G()
    xa = rng.uniform(-2, 2, (16, 4, 6, 6))
    xd = deq(quant(xa, xs, xz), xs, xz)
    t = g.dq(g.q("x", xs, xz, "xq"), xs, xz, "xd")
    cq, cs, cz, c = conv_q(t, xd, "w", "c")
    s_ = c + xd
    ss, sz = act_q(s_.min(), s_.max())
    t2 = g.n("Add", [g.dq(cq, cs, cz, "cd"), t], ["s"])
    g.dq(g.q(t2, ss, sz, "sq"), ss, sz, "y")
    man.append(g.save(out, "q_add_u8", [vi("x", F, [N, 4, 6, 6])], [vi("y", F, None)], (8, 1, 1, ss, 1)))

    # int8: the block input quantized symmetrically (zero point 0), the convolution's output not;
    # Add -> Relu -> QuantizeLinear with a zero point inside the range, so the Relu clamps
    g = G()
    xs8 = np.float32(2.0 / 127.3)
    xd = deq(quant(xa, xs8, 0, True), xs8, 0)
    t = g.dq(g.q("x", xs8, 0, "xq", True), xs8, 0, "xd", True)
    cq, cs, cz, c = conv_q(t, xd, "w", "c", signed=True)
    s_ = c + xd
    rs, rz = act_q(-0.6 * s_.max(), s_.max(), signed=True)
    t2 = g.n("Add", [t, g.dq(cq, cs, cz, "cd", True)], ["s"])
    t2 = g.n("Relu", [t2], ["r"])
    g.dq(g.q(t2, rs, rz, "rq", True), rs, rz, "y", True)
    man.append(g.save(out, "q_add_s8_relu", [vi("x", F, [N, 4, 6, 6])], [vi("y", F, None)], (9, 1, 1, rs, 1)))

    # mixed operands (opset 10, plain layout): a uint8 operand quantized in the graph and an int8 graph
    # input, Clip (attributes), a uint8 graph output: the add runs in the result's type, the int8
    # input flipped at the boundary
    g = G()
    as_, az = act_q(-2, 2)
    bs, bz = np.float32(0.0173), -9  # int8 inputs of xnnpack_vs_eager: [-128, 127]
    ys, yz = act_q(-0.7, 1.9)
    t = g.dq(g.q("x", as_, az, "xq"), as_, az, "xd")
    t2 = g.n("Add", [t, g.dq("b", bs, bz, "bd", True)], ["s"])
    t2 = g.n("Clip", [t2], ["r"], min=-0.7, max=1.9)
    g.q(t2, ys, yz, "y")
    man.append(g.save(out, "q_add_mixed", [vi("x", F, [N, 3, 5]), vi("b", S8, [N, 3, 5])], [vi("y", U8, None)],
                      (6, 1, 0, 1, 1), opset=10))

    # broadcasting (NHWC): the global average of the block input, quantized, added to a convolution's
    # int8 output on either side ([N,C,1,1] as the first operand, then as the second), with and without
    # Relu; XNNPACK broadcasts int8 operands as float ones
    g = G()
    xd = deq(quant(xa, xs, xz), xs, xz)
    t = g.dq(g.q("x", xs, xz, "xq"), xs, xz, "xd")
    cq, cs, cz, c = conv_q(t, xd, "w", "c")
    gp = xd.mean(axis=(2, 3), keepdims=True)
    gs, gz = act_q(gp.min(), gp.max())
    gq = g.q(g.n("GlobalAveragePool", [t], ["gp"]), gs, gz, "gq")
    gpd = deq(quant(gp, gs, gz), gs, gz)
    s1 = gpd + c
    r1s, r1z = act_q(-0.3 * s1.max(), s1.max())
    t1 = g.n("Add", [g.dq(gq, gs, gz, "gd"), g.dq(cq, cs, cz, "cd")], ["s1"])
    t1 = g.n("Relu", [t1], ["r1"])
    g.dq(g.q(t1, r1s, r1z, "r1q"), r1s, r1z, "y1")
    s2s, s2z = act_q(s1.min(), s1.max())
    t2 = g.n("Add", ["cd", "gd"], ["s2"])
    g.dq(g.q(t2, s2s, s2z, "s2q"), s2s, s2z, "y2")
    man.append(g.save(out, "q_add_bcast", [vi("x", F, [N, 4, 6, 6])], [vi("y1", F, None), vi("y2", F, None)],
                      (15, 1, 1, max(r1s, s2s), 2)))

    # Adds that stay float (between XNNPACK converts) or go to EAGER:
    # - an operand scale below 2^-10 of the result's (XNNPACK's add refuses it);
    # - the Add's output also a graph output (the float sum is needed);
    # - a constant operand;
    # - operands forced into different XNNPACK types: one from an int8-path convolution (per-channel
    #   int8 weights), one from a quint8-path convolution (uint8 weights that do not fit int8);
    # - a rank-3 operand in an NHWC partition (EAGER, as the float Add).
    g = G()
    xd = deq(quant(xa, xs, xz), xs, xz)
    t = g.dq(g.q("x", xs, xz, "xq"), xs, xz, "xd")
    cq, cs, cz, c = conv_q(t, xd, "w", "c")
    cd = g.dq(cq, cs, cz, "cd")
    tiny = np.float32(cs * 0.37e-3)
    big = np.float32(cs * 2.1)
    g.q(g.n("Add", [g.dq(g.q(cd, tiny, 0, "tq", True), tiny, 0, "td", True), cd], ["s1"]), big, 3, "y1")
    s2 = g.n("Add", [cd, "xd"], ["y2"])
    g.q(s2, cs * 2, cz, "s2q")
    g.dq("s2q", cs * 2, cz, "y3")
    g.q(g.n("Add", [cd, g.c("k", np.full((4, 1, 1), 0.25, np.float32))], ["s4"]), cs, cz, "y4")
    xs2 = np.float32(xs * 1.13)
    x2d = deq(quant(xa, xs2, xz), xs2, xz)
    wu = rng.integers(0, 256, (4, 4, 3, 3)).astype(np.uint8)
    wsu, wzu = np.float32(0.0041), np.uint8(9)
    c2 = conv2d(x2d, (wu.astype(np.float64) - int(wzu)) * wsu, pad=1)
    c2s, c2z = act_q(c2.min(), c2.max())
    t2 = g.dq(g.q("x", xs2, xz, "x2q"), xs2, xz, "x2d")
    g.c("wu", wu), g.c("wu_s", wsu), g.c("wu_z", wzu)
    wd = g.n("DequantizeLinear", ["wu", "wu_s", "wu_z"], ["wud"])
    t2 = g.n("Conv", [t2, wd], ["c2"], pads=[1, 1, 1, 1])
    c2d = g.dq(g.q(t2, c2s, c2z, "c2q"), c2s, c2z, "c2d")
    s5 = deq(quant(c2, c2s, c2z), c2s, c2z) + c
    s5s, s5z = act_q(s5.min(), s5.max())
    g.dq(g.q(g.n("Add", [c2d, cd], ["s5"]), s5s, s5z, "s5q"), s5s, s5z, "y5")
    bd = g.dq(g.q("b", xs, xz, "bq"), xs, xz, "bd")
    g.q(g.n("Add", [cd, bd], ["s6"]), cs * 2, cz, "y6")
    man.append(g.save(out, "q_add_fallbacks", [vi("x", F, [N, 4, 6, 6]), vi("b", F, [4, 1, 1])],
                      [vi("y1", U8, None), vi("y2", F, None), vi("y3", F, None), vi("y4", U8, None), vi("y5", F, None),
                       vi("y6", U8, None)], (25, 3, 2, max(cs * 2, s5s), 0)))
    return man


def main():
    write_all(__doc__, models, "nodes-on-XNNPACK  partitions  int8-conv/matmul  output-step", "make_qmodels")


if __name__ == "__main__":
    main()
