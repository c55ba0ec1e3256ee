"""Small quantized graphs for the DNNL runtime's int8 path (dnnl_int8_test.c).

usage: make_int8_models.py OUTDIR

Writes OUTDIR/<name>.onnx and OUTDIR/<name>.txt ("step S", "atol A", "int8 N": 99% of the outputs
within S of EAGER's (about one quantization step of the output), all within A, and how many int8
primitives (clusters, QLinear nodes) the DNNL runtime must run at least when it runs int8 matmuls).
Inputs are float32 [batch, ...] ~ N(0, 1).

The QDQ forms are the ones INT8_STATIC, ONNX Runtime's quantizer and PyTorch's QAT export write:
uint8 activations per tensor (zero points 0 and not 0, so padding and zero points are exercised),
int8 weights per channel or per tensor, int32 biases with scale x_scale * w_scale, eltwise and
residual Adds before the requantization. On CPUs without VNNI oneDNN's int8 kernels are inexact
(see dnnl_int8.h): its s8 convolutions halve the weights (exact on even values) and its u8 ones
saturate pairs of products beyond 32767 (impossible with |w| <= 64). So convolution weights are
even integers in [-64, 64] and matmul weights in [-63, 63]: these tests hold the structure
(clusters, layouts, parameters, fallbacks) to one step on every CPU, and the accuracy on real
weights is checked on real models (check_int8.py). Fallback cases (per-axis activations, non-zero
weight zero points) must give EAGER's results through the float path.

The dyn_* graphs are INT8_DYNAMIC's form (DynamicQuantizeLinear -> ConvInteger/MatMulInteger ->
Cast -> Mul.. -> bias -> activation), as alma's pass and ONNX Runtime's quantize_dynamic write it,
with the same kinds of weights (and even 8-bit ones in [-126, 126] where the source is given as s8).
Their .txt may add "rebuild 0" (a run on data with other scales and zero points must build no
primitive again) and "forced 0" (not run with int8 matmuls forced: 8-bit matmul weights, which
saturate there by design).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


class G:
    def __init__(self, name):
        self.name, self.nodes, self.inits, self.k = name, [], [], 0

    def uniq(self, base):
        self.k += 1
        return f"{base}_{self.k}"

    def init(self, base, arr):
        n = self.uniq(base)
        self.inits.append(const(n, arr))
        return n

    def node(self, op, ins, attrs=None, out=None, n_out=1):
        outs = [out or self.uniq(op.lower())] if n_out == 1 else [self.uniq(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, name=self.uniq(op), **(attrs or {})))
        return outs[0] if n_out == 1 else outs

    def q(self, x, s, zp, dt=np.uint8):
        return self.node("QuantizeLinear", [x, self.init("s", np.float32(s)), self.init("zp", dt(zp))])

    def dq(self, xq, s, zp, dt=np.uint8, axis=None):
        ins = [xq, self.init("s", np.asarray(s, np.float32)), self.init("zp", np.asarray(zp, dt))]
        return self.node("DequantizeLinear", ins, {"axis": axis} if axis is not None else None)

    def qdq(self, x, s, zp, dt=np.uint8):
        return self.dq(self.q(x, s, zp, dt), s, zp, dt)

    def wq(self, shape, axis=0, per_channel=True, bits7=False):
        """Even int8 weights (convolutions) or 7-bit ones (matmuls) and their scales; returns (DQ
        output, int8 array, scales)."""
        w = (rng.integers(-63, 64, size=shape) if bits7 else rng.integers(-32, 33, size=shape) * 2).astype(np.int8)
        nch = shape[axis]
        s = (rng.uniform(0.5, 2.0, size=nch) * 0.02).astype(np.float32) if per_channel else np.float32(0.02)
        wn = self.init("w", w)
        sn = self.init("ws", s)
        zn = self.init("wzp", np.zeros(nch if per_channel else (), np.int8))
        out = self.node("DequantizeLinear", [wn, sn, zn], {"axis": axis} if per_channel else None)
        return out, w, s

    def bias_q(self, xs, ws, n):
        b = rng.integers(-2000, 2000, size=n).astype(np.int32)
        bs = (np.float32(xs) * np.asarray(ws, np.float32)).astype(np.float32)
        if bs.ndim == 0:
            bs = np.full(n, bs, np.float32)
        return self.node("DequantizeLinear", [self.init("b", b), self.init("bs", bs)], {"axis": 0})

    def save(self, outdir, in_shape, out_name, step, atol, n_int8, opset=13, in_name="x", extra="", fixed=False):
        inp = helper.make_tensor_value_info(in_name, TensorProto.FLOAT, (list(in_shape[:1]) if fixed else ["N"]) + list(in_shape[1:]))
        out = helper.make_tensor_value_info(out_name, TensorProto.FLOAT, ["N"] + ["?"] * (len(in_shape) - 1))
        graph = helper.make_graph(self.nodes, self.name, [inp], [out], self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 7
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(outdir, self.name + ".onnx"))
        with open(os.path.join(outdir, self.name + ".txt"), "w") as f:
            f.write(f"step {step}\natol {atol}\nint8 {n_int8}\n{extra}")


def conv_relu_q(outdir):
    """Conv (pads, zero points) + bias + Relu + QuantizeLinear -> u8 dst; then a conv reading it,
    f32 out through a standalone DequantizeLinear of a requantized value."""
    g = G("int8_conv_relu_q")
    xs, xzp = 0.03, 120
    x = g.qdq("x", xs, xzp)
    w, _, ws = g.wq((16, 8, 3, 3))
    y = g.node("Conv", [x, w, g.bias_q(xs, ws, 16)], {"pads": [1, 1, 1, 1]})
    y = g.node("Relu", [y])
    ys, yzp = 0.05, 3
    yq = g.q(y, ys, yzp)
    y = g.dq(yq, ys, yzp)
    w2, _, ws2 = g.wq((8, 16, 3, 3))
    z = g.node("Conv", [y, w2, g.bias_q(ys, ws2, 8)], {"strides": [2, 2], "pads": [0, 1, 1, 0]})
    zs, zzp = 0.04, 128
    g.dq(g.q(z, zs, zzp), zs, zzp)
    g.nodes[-1].output[0] = "out"
    g.save(outdir, (1, 8, 10, 10), "out", 0.04, 0.2, 2)


def resblock(outdir):
    """ResNet basic block as INT8_STATIC writes it: the residual Add as a sum post-op with Relu, a
    standalone QuantizeLinear of the block output (read by the next conv and by the next Add)."""
    g = G("int8_resblock")
    xs, xzp = 0.03, 128
    xin = g.node("Relu", ["x"])
    x = g.qdq(xin, xs, 0)
    w1, _, ws1 = g.wq((8, 8, 3, 3))
    h = g.node("Relu", [g.node("Conv", [x, w1, g.bias_q(xs, ws1, 8)], {"pads": [1, 1, 1, 1]})])
    hs = 0.05
    h = g.qdq(h, hs, 0)
    w2, _, ws2 = g.wq((8, 8, 3, 3))
    y = g.node("Conv", [h, w2, g.bias_q(hs, ws2, 8)], {"pads": [1, 1, 1, 1]})
    y = g.node("Relu", [g.node("Add", [y, xin])])
    ys = 0.05
    yq = g.qdq(y, ys, 0)
    w3, _, ws3 = g.wq((8, 8, 1, 1))
    z = g.node("Conv", [yq, w3, g.bias_q(ys, ws3, 8)])
    g.node("Add", [z, y], out="out")
    del xzp
    g.save(outdir, (1, 8, 7, 7), "out", 0.05, 2.0, 3)


def depthwise(outdir):
    """Depthwise conv (group = C) with Clip(0, 6), per-tensor weights, an s8 activation."""
    g = G("int8_depthwise")
    x = g.qdq("x", 0.02, -5, np.int8)
    w, _, ws = g.wq((12, 1, 3, 3), per_channel=False)
    y = g.node("Conv", [x, w, g.bias_q(0.02, ws, 12)], {"group": 12, "pads": [1, 1, 1, 1]})
    y = g.node("Clip", [y, g.init("lo", np.float32(0)), g.init("hi", np.float32(6))])
    g.dq(g.q(y, 0.03, 0), 0.03, 0)
    g.nodes[-1].output[0] = "out"
    g.save(outdir, (1, 12, 9, 9), "out", 0.03, 0.1, 1)


def expand_dw(outdir):
    """MobileNet-V2's inverted residual as INT8_STATIC writes it: a 1x1 expand convolution of a
    source with a zero point (120), Clip(0, 6) and a u8 requantization of zero point 0, read only by
    a depthwise 3x3 convolution (stride 2, pads 1, per-channel weights) with Clip(0, 6), then a 1x1
    projection. The DNNL runtime runs the first two as one primitive (oneDNN's depthwise post-op)
    where oneDNN has a jit kernel for it, the expand source's zero point in the bias (no padding),
    and without VNNI the weights halved for that source (even weights: exact). 160x160 at batch 3
    is large enough for oneDNN 2.6's fused kernel on AVX2 (its size rule); "dwfused 1": that many
    primitives fewer than with dnnl.dw_fuse=off there."""
    g = G("mbv2_expand_dw")  # (named to sort last: the test draws inputs in name order)
    xs, xzp = 0.03, 120
    x = g.qdq("x", xs, xzp)
    w, _, ws = g.wq((32, 16, 1, 1))
    y = g.node("Conv", [x, w, g.bias_q(xs, ws, 32)])
    y = g.node("Clip", [y, g.init("lo", np.float32(0)), g.init("hi", np.float32(6))])
    hs = 0.025
    h = g.qdq(y, hs, 0)
    wd, _, wds = g.wq((32, 1, 3, 3))
    z = g.node("Conv", [h, wd, g.bias_q(hs, wds, 32)], {"group": 32, "pads": [1, 1, 1, 1], "strides": [2, 2]})
    z = g.node("Clip", [z, g.init("lo", np.float32(0)), g.init("hi", np.float32(6))])
    zs = 0.025
    zq = g.qdq(z, zs, 0)
    wp, _, wps = g.wq((8, 32, 1, 1))
    o = g.node("Conv", [zq, wp, g.bias_q(zs, wps, 8)])
    g.dq(g.q(o, 0.05, 128), 0.05, 128)
    g.nodes[-1].output[0] = "out"
    g.save(outdir, (1, 16, 160, 160), "out", 0.05, 0.3, 2, extra="dwfused 1\n")


def depthwise5(outdir):
    """Depthwise 5x5 convs (48 channels, pads 2) whose sources have non-zero zero points, as after
    MobileNet-V3's HardSwish and EfficientNet's SiLU: u8 (zero point 100), then s8 (zero point
    -60, the first conv's output); full 8-bit per-channel weights. oneDNN's depthwise kernels
    multiply in 32 bits: exact with u8 sources on every CPU, which the DNNL runtime gives them;
    oneDNN 2.6's AVX2 kernel computes garbage from s8 sources with a zero point at this size."""
    g = G("int8_depthwise5")
    x = g.qdq("x", 0.02, 100)
    for k, (dt, zp) in enumerate(((np.int8, -60), (np.uint8, 100))):  # each conv's output type: the next one's source
        w = rng.integers(-127, 128, size=(48, 1, 5, 5)).astype(np.int8)
        ws = (rng.uniform(0.5, 2.0, size=48) * 0.004).astype(np.float32)
        wd = g.node("DequantizeLinear", [g.init("w", w), g.init("ws", ws), g.init("wzp", np.zeros(48, np.int8))],
                    {"axis": 0})
        y = g.node("Conv", [x, wd, g.bias_q(0.02, ws, 48)], {"group": 48, "pads": [2, 2, 2, 2]})
        x = g.dq(g.q(y, 0.02, zp, dt), 0.02, zp, dt)
    g.nodes[-1].output[0] = "out"
    g.save(outdir, (1, 48, 9, 9), "out", 0.021, 0.1, 2)


def dyn_depthwise5(outdir):
    """INT8_DYNAMIC's depthwise 5x5 (48 channels, stride 2): DynamicQuantizeLinear of N(0, 1) data
    gives a non-zero zero point; the source must stay u8 (see depthwise5)."""
    g = G("dyn_depthwise5")
    xq, xs, xz = dyn_x(g, "x")
    w = rng.integers(-127, 128, size=(48, 1, 5, 5)).astype(np.int8)
    acc = g.node("ConvInteger", [xq, g.init("w", w), xz, g.init("wz", np.int8(0))],
                 {"group": 48, "pads": [2, 2, 2, 2], "strides": [2, 2]})
    ws = (rng.uniform(0.5, 2, (48, 1, 1)) * 0.004).astype(np.float32)
    y = dyn_tail(g, acc, xs, ws, rng.standard_normal((48, 1, 1)).astype(np.float32))
    g.nodes[-1].output[0] = "out"
    g.save(outdir, (1, 48, 11, 11), "out", 0.01, 0.1, 1, extra=NO_REBUILD)


def gemm_mlp(outdir):
    """Flatten -> Gemm (transB, per-channel, int32 bias) + Relu + Q -> Gemm (float bias) f32 out."""
    g = G("int8_gemm")
    f = g.node("Flatten", ["x"])
    xs = 0.03
    x = g.qdq(f, xs, 128)
    w, _, ws = g.wq((32, 48), axis=0, bits7=True)
    h = g.node("Relu", [g.node("Gemm", [x, w, g.bias_q(xs, ws, 32)], {"transB": 1})])
    hs = 0.04
    h = g.qdq(h, hs, 0)
    w2, _, _ = g.wq((32, 10), axis=1, bits7=True)
    g.node("Gemm", [h, w2, g.init("fb", rng.standard_normal(10).astype(np.float32))], out="out")
    g.save(outdir, (1, 3, 4, 4), "out", 0.1, 1.0, 2)


def matmul3d(outdir):
    """MatMul of a 3-D activation by constant [K, N] weights, bias as an Add of a constant (ORT's
    QDQ MatMul), then Q/DQ; a second MatMul with f32 out."""
    g = G("int8_matmul")
    xs = 0.03
    x = g.qdq("x", xs, 128)
    w, _, ws = g.wq((16, 24), axis=1, bits7=True)
    y = g.node("Add", [g.node("MatMul", [x, w]), g.init("bias", rng.standard_normal(24).astype(np.float32))])
    ys = 0.05
    y = g.qdq(y, ys, 128)
    w2, _, _ = g.wq((24, 8), axis=1, per_channel=False, bits7=True)
    g.node("MatMul", [y, w2], out="out")
    g.save(outdir, (1, 5, 16), "out", 0.1, 1.0, 2)


def qat_weights(outdir):
    """PyTorch QAT export: weights as QuantizeLinear(float constant) -> DequantizeLinear, zero
    points through Identity, a float bias."""
    g = G("int8_qat")
    zp_u8 = g.init("zpu", np.uint8(0))
    zpi = g.node("Identity", [zp_u8])
    s_in = g.init("sin", np.float32(0.03))
    x = g.node("DequantizeLinear", [g.node("QuantizeLinear", ["x", s_in, zpi]), s_in, zpi])
    wf = (rng.integers(-32, 33, size=(6, 4, 3, 3)) * 2 * 0.01).astype(np.float32)
    ws = g.init("wsc", np.full(6, 0.01, np.float32))
    wz = g.init("wz", np.zeros(6, np.int8))
    wq = g.node("QuantizeLinear", [g.init("wf", wf), ws, wz], {"axis": 0})
    w = g.node("DequantizeLinear", [wq, ws, wz], {"axis": 0})
    y = g.node("Relu", [g.node("Conv", [x, w, g.init("fb", rng.standard_normal(6).astype(np.float32))])])
    s_out = g.init("so", np.float32(0.05))
    zpo = g.node("Identity", [zp_u8])
    g.node("DequantizeLinear", [g.node("QuantizeLinear", [y, s_out, zpo]), s_out, zpo], out="out")
    g.save(outdir, (1, 4, 8, 8), "out", 0.05, 0.15, 1)


def qlinear(outdir):
    """QLinearConv and QLinearMatMul with constant s8 weights (what the QLINEAR pass and ORT's
    QOperator format write)."""
    g = G("int8_qlinear")
    xs, xzp = 0.03, 100
    xq = g.q("x", xs, xzp)
    w = (rng.integers(-32, 33, size=(8, 3, 3, 3)) * 2).astype(np.int8)
    ws = (rng.uniform(0.5, 2, 8) * 0.02).astype(np.float32)
    b = rng.integers(-500, 500, 8).astype(np.int32)
    ys, yzp = 0.05, 10
    yq = g.node("QLinearConv", [xq, g.init("xs", np.float32(xs)), g.init("xzp", np.uint8(xzp)), g.init("w", w),
                                g.init("ws", ws), g.init("wzp", np.zeros(8, np.int8)), g.init("ys", np.float32(ys)),
                                g.init("yzp", np.uint8(yzp)), g.init("b", b)], {"pads": [1, 1, 1, 1]})
    f = g.node("Reshape", [yq, g.init("shape", np.array([0, -1], np.int64))])
    w2 = rng.integers(-63, 64, size=(8 * 6 * 6, 5)).astype(np.int8)
    zs, zzp = 0.1, 128
    zq = g.node("QLinearMatMul", [f, g.init("fs", np.float32(ys)), g.init("fzp", np.uint8(yzp)), g.init("w2", w2),
                                  g.init("w2s", np.float32(0.01)), g.init("w2zp", np.int8(0)),
                                  g.init("zs", np.float32(zs)), g.init("zzp", np.uint8(zzp))])
    g.dq(zq, zs, zzp)
    g.nodes[-1].output[0] = "out"
    g.save(outdir, (1, 3, 6, 6), "out", 0.1, 0.3, 2)


def fallbacks(outdir):
    """What the int8 path leaves to the float path: per-axis activation scales, non-zero weight
    zero points; the result must still be EAGER's."""
    g = G("int8_fallback")
    xq = g.q("x", 0.03, 128)
    x = g.dq(xq, 0.03, 128)
    # per-axis dequantization of an activation (axis 1): not a cluster
    xa = g.dq(g.node("QuantizeLinear", ["x", g.init("sa", np.full(4, 0.03, np.float32)),
                                        g.init("za", np.full(4, 128, np.uint8))], {"axis": 1}),
              np.full(4, 0.03, np.float32), np.full(4, 128, np.uint8), axis=1)
    w = (rng.integers(-32, 33, size=(4, 4, 1, 1)) * 2).astype(np.int8)
    wz = g.node("DequantizeLinear", [g.init("w", w), g.init("ws", np.float32(0.02)), g.init("wzp", np.int8(3))])
    y1 = g.node("Conv", [x, wz])  # weight zero point 3: float path
    w2, _, _ = g.wq((4, 4, 1, 1))
    y2 = g.node("Conv", [xa, w2])
    g.node("Add", [y1, y2], out="out")
    g.save(outdir, (1, 4, 5, 5), "out", 0.01, 0.1, 0)


def quantize_exact(outdir):
    """QuantizeLinear of a plain input (the graph input) with a scale whose reciprocal is inexact:
    DNNL divides as ONNX does (its vectorized loop), so the result is EAGER's exactly; u8 and s8."""
    g = G("int8_quantize_exact")
    a = g.dq(g.q("x", 0.037, 120), 0.037, 120)
    b = g.dq(g.q("x", 0.011, -7, np.int8), 0.011, -7, np.int8)
    g.node("Sub", [a, b], out="out")  # (an Add of two DequantizeLinear would be an int8 add)
    g.save(outdir, (1, 3, 17, 5), "out", 1e-6, 1e-6, 0)


def int8_add(outdir):
    """Residual Adds as INT8_STATIC and ONNX Runtime's QDQ quantizer write them: both inputs through
    DequantizeLinear (different scales and zero points, u8 and s8) and the sum requantized, with a
    Relu between as in ResNet. A broadcasting Add (declined when it runs) and an Add into a float32
    output (a transformer's Add before LayerNorm) stay on the float path with EAGER's results."""
    g = G("int8_add")
    xs, xzp = 0.03, 120
    x = g.qdq("x", xs, xzp)
    w, _, ws = g.wq((8, 8, 3, 3))
    c = g.node("Conv", [x, w, g.bias_q(xs, ws, 8)], {"pads": [1, 1, 1, 1]})
    c = g.qdq(c, 0.0613, 131)                    # the conv requantizes into u8
    y = g.node("Relu", [g.node("Add", [c, x])])  # u8 + u8 -> Relu -> u8
    y = g.qdq(y, 0.0417, 0)
    e = g.qdq(g.node("Neg", [y]), 0.0253, -3, np.int8)  # an s8 value
    z = g.qdq(g.node("Add", [y, e]), 0.0519, 10)  # u8 + s8 -> u8
    b = g.qdq(g.node("ReduceMean", [z], {"axes": [2, 3], "keepdims": 1}), 0.0107, 128)
    wb = g.qdq(g.node("Add", [z, b]), 0.0611, 100)  # broadcasting: declined at run time
    g.node("Add", [wb, z], out="out")          # float32 destination: the float path
    # scales without short decimal forms (exact ties are rare); a flip in z moves out by both steps
    g.save(outdir, (2, 8, 9, 11), "out", 0.115, 0.3, 3)


def int8_pool(outdir):
    """DequantizeLinear -> MaxPool -> QuantizeLinear with one scale and zero point on both sides, as
    INT8_STATIC and ONNX Runtime's QDQ quantizer write it between convolutions: the DNNL runtime runs
    the pooling on the 8-bit values in the layout the convolution wrote ("moved N": N such pairs,
    each two int8 reorders fewer than with dnnl.int8_move=off). The max is exact, so the outputs
    stay within the convolutions' one step.
      int8_pool_u8: conv -> Relu -> u8 (zero point 0, ResNet's stem) -> MaxPool 3x3 stride 2 pads 1.
      int8_pool_s8: conv -> s8 with a zero point (negative values: the padding must not take part)
        -> MaxPool 3x3 stride 2, asymmetric pads -> conv -> s8 -> Flatten and Reshape back, each
        between the same scale and zero point (int8 views).
      int8_pool_nomatch: the QuantizeLinear after the MaxPool has another scale, and a Reshape has
        another zero point: both keep the float path (a requantization, not a move)."""
    for name, dt, zp, relu in (("int8_pool_u8", np.uint8, 0, True), ("int8_pool_s8", np.int8, 3, False)):
        g = G(name)
        xs, xzp = 0.03, 120
        x = g.qdq("x", xs, xzp)
        w, _, ws = g.wq((16, 8, 3, 3))
        y = g.node("Conv", [x, w, g.bias_q(xs, ws, 16)], {"pads": [1, 1, 1, 1]})
        if relu:
            y = g.node("Relu", [y])
        ys = 0.0517
        y = g.dq(g.q(y, ys, zp, dt), ys, zp, dt)
        pads = [1, 1, 1, 1] if relu else [0, 1, 1, 0]
        y = g.node("MaxPool", [y], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": pads})
        y = g.dq(g.q(y, ys, zp, dt), ys, zp, dt)
        w2, _, ws2 = g.wq((8, 16, 3, 3))
        z = g.node("Conv", [y, w2, g.bias_q(ys, ws2, 8)], {"pads": [1, 1, 1, 1]})
        zs = 0.0433
        z = g.dq(g.q(z, zs, zp, dt), zs, zp, dt)
        moved = 1
        if not relu:  # Flatten and back between the same parameters: int8 views
            z = g.dq(g.q(g.node("Flatten", [z]), zs, zp, dt), zs, zp, dt)
            z = g.node("Reshape", [z, g.init("shape", np.array([0, 8, 5, 5], np.int64))])
            z = g.dq(g.q(z, zs, zp, dt), zs, zp, dt)
            moved = 3
        g.node("Identity", [z], out="out")
        g.save(outdir, (1, 8, 10, 10), "out", 0.05, 0.25, 2, extra=f"moved {moved}\n")

    g = G("int8_pool_nomatch")
    x = g.qdq("x", 0.03, 120)
    w, _, ws = g.wq((8, 8, 3, 3))
    y = g.node("Relu", [g.node("Conv", [x, w, g.bias_q(0.03, ws, 8)], {"pads": [1, 1, 1, 1]})])
    y = g.dq(g.q(y, 0.05, 0), 0.05, 0)
    y = g.node("MaxPool", [y], {"kernel_shape": [2, 2], "strides": [2, 2]})
    y = g.dq(g.q(y, 0.0613, 0), 0.0613, 0)  # another scale: a requantization
    y = g.node("Reshape", [y, g.init("shape", np.array([0, 2, 16, 4], np.int64))])
    y = g.dq(g.q(y, 0.0613, 7), 0.0613, 7)  # another zero point
    g.node("Identity", [y], out="out")
    g.save(outdir, (1, 8, 8, 8), "out", 0.0613, 0.2, 1, extra="moved 0\n")


# ---- INT8_DYNAMIC's form: DynamicQuantizeLinear -> ConvInteger/MatMulInteger -> Cast -> Mul.. ----
# "rebuild 0": a run on data with other scales and zero points builds no primitive again (the
# batch's parameters are run-time arguments of the same primitives).
NO_REBUILD = "rebuild 0\n"


def dyn_x(g, x):
    """DynamicQuantizeLinear of x: (xq, x_scale, x_zero_point)."""
    return g.node("DynamicQuantizeLinear", [x], n_out=3)


def dyn_w(shape, even8=False):
    """int8 weights: even values in [-126, 126] (8-bit, exact in oneDNN's 7-bit s8 form) or 7-bit
    ones in [-63, 63] (u8 sources cannot saturate)."""
    w = rng.integers(-63, 64, size=shape) * (2 if even8 else 1)
    return w.astype(np.int8)


def dyn_tail(g, acc, xs, ws, bias=None, scale_first=True, bias_first=False, reshape_bias=None):
    """Cast -> Mul(Cast, Mul(xs, ws)) (alma's and ORT's form) or Mul(Mul(Cast, xs), ws), then
    Add(bias) (either operand order; as ORT's Conv: Reshape(bias, [1, -1, 1, 1]) -> Add)."""
    f = g.node("Cast", [acc], {"to": TensorProto.FLOAT})
    wsn = g.init("ws", ws)
    if scale_first:
        y = g.node("Mul", [f, g.node("Mul", [xs, wsn])])
    else:
        y = g.node("Mul", [g.node("Mul", [f, xs]), wsn])
    if bias is None:
        return y
    if reshape_bias is not None:
        b = g.node("Reshape", [g.init("b", bias), g.init("shape", np.array(reshape_bias, np.int64))])
    else:
        b = g.init("b", bias)
    return g.node("Add", [b, y] if bias_first else [y, b])


def dyn_conv(outdir):
    """alma's INT8_DYNAMIC Conv: uint8 weights q + 128 with zero point 128, per-channel scales
    [M, 1, 1], bias [M, 1, 1], Relu; the input's zero point is not 0 (s8 source without VNNI, even
    8-bit weights); then a strided grouped conv on the Relu output (zero point 0, u8 source, 7-bit
    weights) with a residual Add of a computed value (sum post-op) and Relu."""
    g = G("dyn_conv")
    xq, xs, xz = dyn_x(g, "x")
    w = dyn_w((12, 6, 3, 3), even8=True)
    acc = g.node("ConvInteger", [xq, g.init("w", (w.astype(np.int16) + 128).astype(np.uint8)), xz,
                                 g.init("wz", np.uint8(128))], {"pads": [1, 1, 1, 1]})
    ws = (rng.uniform(0.5, 2, (12, 1, 1)) * 0.004).astype(np.float32)
    y = g.node("Relu", [dyn_tail(g, acc, xs, ws, rng.standard_normal((12, 1, 1)).astype(np.float32))])
    yq, ys, yz = dyn_x(g, y)
    w2 = dyn_w((12, 4, 3, 3))
    acc2 = g.node("ConvInteger", [yq, g.init("w2", (w2.astype(np.int16) + 128).astype(np.uint8)), yz,
                                  g.init("wz2", np.uint8(128))], {"pads": [1, 1, 1, 1], "group": 3})
    ws2 = (rng.uniform(0.5, 2, (12, 1, 1)) * 0.004).astype(np.float32)
    z = dyn_tail(g, acc2, ys, ws2, rng.standard_normal((12, 1, 1)).astype(np.float32), bias_first=True)
    g.node("Relu", [g.node("Add", [z, y])], out="out")
    g.save(outdir, (1, 6, 9, 8), "out", 0.01, 0.1, 2, extra=NO_REBUILD)


def dyn_conv_odd_channels(outdir):
    """A convolution of 22 input channels (more than 16, not a multiple of 4: tf2onnx's NASNet) at
    8x8 whose u8 source has a non-zero zero point, with even 8-bit weights: without VNNI the source
    goes in as s8. oneDNN 2.6's one-step u8 NCHW -> s8 NHWC reorder with a zero point gave garbage
    at this size (cosine 0.2); the shift is now done apart from the layout change."""
    g = G("dyn_conv_odd_channels")
    xq, xs, xz = dyn_x(g, "x")
    w = dyn_w((18, 22, 3, 3), even8=True)
    acc = g.node("ConvInteger", [xq, g.init("w", w), xz, g.init("wz", np.int8(0))], {"pads": [1, 1, 1, 1]})
    ws = (rng.uniform(0.5, 2, (18, 1, 1)) * 0.004).astype(np.float32)
    dyn_tail(g, acc, xs, ws, rng.standard_normal((18, 1, 1)).astype(np.float32))
    g.nodes[-1].output[0] = "out"
    g.save(outdir, (1, 22, 8, 8), "out", 0.01, 0.1, 1, extra=NO_REBUILD)


def dyn_depthwise(outdir):
    """ONNX Runtime's quantize_dynamic Conv: int8 weights with zero point 0, one scale per tensor,
    Mul(Mul(Cast, xs), w_scale), bias through Reshape(bias, [1, -1, 1, 1]): a depthwise conv
    (group = C = 16) with stride 2 and Clip(0, 6); a 1x1 conv to 10 channels with Relu; a depthwise
    conv on those 10 (oneDNN 2.6 misapplies the run-time scale to the last partial block of channels
    of int8 depthwise kernels: this one runs in float32 on the dequantized values)."""
    g = G("dyn_depthwise")

    def ort_conv(x, w, attrs, bias):
        xq, xs, xz = dyn_x(g, x)
        acc = g.node("ConvInteger", [xq, g.init("w", w), xz, g.init("wz", np.int8(0))], attrs)
        return dyn_tail(g, acc, xs, np.float32(0.01), bias, scale_first=False, reshape_bias=[1, -1, 1, 1])

    y = ort_conv("x", dyn_w((16, 1, 3, 3), even8=True), {"group": 16, "pads": [1, 1, 1, 1], "strides": [2, 2]},
                 rng.standard_normal(16).astype(np.float32))
    y = g.node("Clip", [y, g.init("lo", np.float32(0)), g.init("hi", np.float32(6))])
    y = g.node("Relu", [ort_conv(y, dyn_w((10, 16, 1, 1)), {}, rng.standard_normal(10).astype(np.float32))])
    ort_conv(y, dyn_w((10, 1, 3, 3)), {"group": 10, "pads": [1, 1, 1, 1]}, rng.standard_normal(10).astype(np.float32))
    g.nodes[-1].output[0] = "out"
    g.save(outdir, (1, 16, 11, 11), "out", 0.02, 0.1, 2, extra=NO_REBUILD)


def dyn_matmul(outdir):
    """MatMulInteger on a 3-D activation [N, 5, 16] with 2-D weights (rows collapsed): alma's
    uint8 + 128 form with a per-column scale and the bias Add's constant first, Relu; then ONNX
    Runtime's form: int8 weights, per-column zero points 0, Mul(Mul(Cast, xs), ws), bias Add."""
    g = G("dyn_matmul")
    xq, xs, xz = dyn_x(g, "x")
    w = dyn_w((16, 24))
    acc = g.node("MatMulInteger", [xq, g.init("w", (w.astype(np.int16) + 128).astype(np.uint8)), xz,
                                   g.init("wz", np.uint8(128))])
    ws = (rng.uniform(0.5, 2, 24) * 0.01).astype(np.float32)
    y = g.node("Relu", [dyn_tail(g, acc, xs, ws, rng.standard_normal(24).astype(np.float32), bias_first=True)])
    yq, ys, yz = dyn_x(g, y)
    w2 = dyn_w((24, 8))
    acc2 = g.node("MatMulInteger", [yq, g.init("w2", w2), yz, g.init("wz2", np.zeros(8, np.int8))])
    dyn_tail(g, acc2, ys, (rng.uniform(0.5, 2, 8) * 0.01).astype(np.float32), rng.standard_normal(8).astype(np.float32),
             scale_first=False)
    g.nodes[-1].output[0] = "out"
    g.save(outdir, (1, 5, 16), "out", 0.01, 0.1, 2, extra=NO_REBUILD)


def dyn_matmul_batched(outdir):
    """MatMulInteger with batched constant weights [2, 16, 8] on an activation [2, 5, 16] (the
    input's first axis fixed at 2: one weight matrix per batch entry), per-column scales."""
    g = G("dyn_matmul_batched")
    xq, xs, xz = dyn_x(g, "x")
    w = dyn_w((2, 16, 8))
    acc = g.node("MatMulInteger", [xq, g.init("w", (w.astype(np.int16) + 128).astype(np.uint8)), xz,
                                   g.init("wz", np.uint8(128))])
    dyn_tail(g, acc, xs, (rng.uniform(0.5, 2, 8) * 0.01).astype(np.float32), rng.standard_normal(8).astype(np.float32))
    g.nodes[-1].output[0] = "out"
    g.save(outdir, (2, 5, 16), "out", 0.01, 0.1, 1, extra=NO_REBUILD, fixed=True)


def dyn_gemm8(outdir):
    """A Gemm as INT8_DYNAMIC writes it (Flatten -> MatMulInteger of 2-D [K, N] weights) with full
    8-bit weights: without VNNI oneDNN has no exact u8 x s8 matmul for them, so the cluster runs as a
    float32 matmul on the dequantized source (or as two 7-bit halves, dnnl.int8_dyn_matmul=
    split); the forced int8 matmul mode would saturate by design and is not compared ("forced 0")."""
    g = G("dyn_gemm8")
    f = g.node("Flatten", ["x"])
    xq, xs, xz = dyn_x(g, f)
    w = rng.integers(-127, 128, size=(48, 20)).astype(np.int8)
    acc = g.node("MatMulInteger", [xq, g.init("w", (w.astype(np.int16) + 128).astype(np.uint8)), xz,
                                   g.init("wz", np.uint8(128))])
    dyn_tail(g, acc, xs, (rng.uniform(0.5, 2, 20) * 0.002).astype(np.float32), rng.standard_normal(20).astype(np.float32))
    g.nodes[-1].output[0] = "out"
    g.save(outdir, (1, 3, 4, 4), "out", 0.01, 0.1, 0, extra=NO_REBUILD + "forced 0\n")


def dyn_fallback(outdir):
    """Dynamic forms the int8 path leaves alone, with EAGER's results: uint8 weights whose zero
    point (3) leaves values outside int8; an accumulator also read elsewhere (a graph output's
    Cast); a scale that is not the input's own DynamicQuantizeLinear scale."""
    g = G("dyn_fallback")
    xq, xs, xz = dyn_x(g, "x")
    w = rng.integers(0, 256, size=(4, 4, 1, 1)).astype(np.uint8)
    a1 = g.node("ConvInteger", [xq, g.init("w", w), xz, g.init("wz", np.uint8(3))])
    y1 = dyn_tail(g, a1, xs, np.float32(0.001))
    w2 = dyn_w((4, 4, 1, 1), even8=True)  # (alone, ConvInteger runs as an s8 convolution, see the top)
    a2 = g.node("ConvInteger", [xq, g.init("w2", w2), xz, g.init("wz2", np.int8(0))])
    c2 = g.node("Cast", [a2], {"to": TensorProto.FLOAT})
    y2 = g.node("Mul", [c2, g.node("Mul", [xs, g.init("ws2", np.float32(0.01))])])
    side = g.node("Mul", [c2, g.init("k", np.float32(1e-4))])  # a second reader of the Cast
    w3 = dyn_w((4, 4, 1, 1), even8=True)
    a3 = g.node("ConvInteger", [xq, g.init("w3", w3), xz])
    y3 = g.node("Mul", [g.node("Cast", [a3], {"to": TensorProto.FLOAT}), g.init("s3", np.float32(0.003))])
    g.node("Sum", [y1, y2, side, y3], out="out")
    g.save(outdir, (1, 4, 5, 5), "out", 0.01, 0.05, 0)


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    for f in (conv_relu_q, resblock, depthwise, depthwise5, gemm_mlp, matmul3d, qat_weights, qlinear, fallbacks, quantize_exact, int8_add,
              dyn_conv, dyn_conv_odd_channels, dyn_depthwise, dyn_depthwise5, dyn_matmul, dyn_matmul_batched, dyn_gemm8, dyn_fallback, int8_pool, expand_dw):
        f(outdir)


if __name__ == "__main__":
    main()
