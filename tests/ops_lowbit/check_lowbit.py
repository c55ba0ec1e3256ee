"""The low-precision element types (float8e4m3fn/e4m3fnuz/e5m2/e5m2fnuz, float8e8m0, float4e2m1,
int4/uint4, int2/uint2) through `alma run`, bit for bit against ONNX's reference implementation
(onnx.reference with ml_dtypes, onnx >= 1.23) and, for weight-only int4 models and saved models,
against ONNX Runtime:

- every code of each type decoded (Cast to float32), from graph data and from packed initializers
  (odd element counts);
- float32 edge values (ties, largest finite, overflow, NaN, +-inf, +-0, subnormals) and every
  type's own values cast into each type with saturate 0/1 and float8e8m0's round modes, the codes
  compared through BitCast (opset 26);
- float to int4/uint4/int2/uint2 (truncation, wrap-around) and integer to them;
- QuantizeLinear / DequantizeLinear per tensor, per axis and blocked for each type, float8e8m0
  scales (opset 24/25);
- data-movement operators passing the types through, arithmetic refusing them by name;
- ONNX Runtime's MatMul4BitsQuantizer QDQ models (blocked uint4 DequantizeLinear -> MatMul) through
  EAGER, FOLD+EAGER, FOLD+FUSE+DNNL, XNNPACK and BLAS against ONNX Runtime (its graph optimizations
  off: with them it fuses the pair into MatMulNBits, which quantizes the activations too);
- `alma bench --save-converted` of a model with int4 and float8 initializers: ONNX Runtime loads
  the saved file and gives the same outputs as from the original;
- malformed packed initializers (raw_data of the wrong length, int32_data not bytes) fail at load
  naming the initializer.

usage: check_lowbit.py ALMA WORKDIR      (python with onnx >= 1.23, ml_dtypes, numpy; onnxruntime)"""
import os
import subprocess
import sys

import numpy as np

try:
    import ml_dtypes
    import onnx
    from onnx import TensorProto as TP, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
    if tuple(int(p) for p in onnx.__version__.split(".")[:2]) < (1, 23):
        raise ImportError(f"onnx {onnx.__version__} (needs 1.23: BitCast, opset 25 types)")
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)
try:
    import onnxruntime as ort
except ImportError:
    ort = None

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from alma_cli import alma_run  # noqa: E402

ALMA, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(5)
failures = []
RUNTIMES = ("EAGER", "FOLD+EAGER", "DNNL", "XNNPACK", "BLAS")

FLOAT8 = [TP.FLOAT8E4M3FN, TP.FLOAT8E4M3FNUZ, TP.FLOAT8E5M2, TP.FLOAT8E5M2FNUZ]
LOWFLOAT = FLOAT8 + [TP.FLOAT8E8M0, TP.FLOAT4E2M1]
LOWINT = [TP.INT4, TP.UINT4, TP.INT2, TP.UINT2]
BITS = {TP.FLOAT4E2M1: 4, TP.INT4: 4, TP.UINT4: 4, TP.INT2: 2, TP.UINT2: 2}
UNSIGNED_OF = {4: TP.UINT4, 2: TP.UINT2}
NAME = {t: TP.DataType.Name(t) for t in LOWFLOAT + LOWINT}


def model(nodes, inputs, outputs, opset, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 11
    return m


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def to_codes(src, t, out):
    """Nodes giving the uint8 codes of `src` (type t) as `out`: BitCast for 8-bit types; the 4- and
    2-bit ones BitCast to their unsigned type first, then Cast (exact)."""
    if t in BITS:
        u = UNSIGNED_OF[BITS[t]]
        if t == u:
            return [helper.make_node("Cast", [src], [out], to=TP.UINT8)]
        return [helper.make_node("BitCast", [src], [src + "_u"], to=u), helper.make_node("Cast", [src + "_u"], [out], to=TP.UINT8)]
    return [helper.make_node("BitCast", [src], [out], to=TP.UINT8)]


def same(got, want):
    """Bit-exact equality; floats: equal bits, or both NaN."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{got.dtype}{got.shape}, expected {want.dtype}{want.shape}"
    if want.dtype.kind == "f":
        ut = {2: np.uint16, 4: np.uint32, 8: np.uint64}[want.itemsize]
        gb, wb = got.view(ut), want.view(ut)
        bad = (gb != wb) & ~(np.isnan(got) & np.isnan(want))
    else:
        bad = got != want
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        return f"{int(bad.sum())} element(s) differ, first at {i}: got {got.ravel()[i]!r}, expected {want.ravel()[i]!r}"
    return None


def check(name, m, feeds, convs=("EAGER",), ref=None):
    """Runs m through alma for each conversion and compares every output with `ref` (default: ONNX's
    reference evaluator), bit for bit."""
    d = os.path.join(WORK, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)
    want = ref if ref is not None else ReferenceEvaluator(m).run(None, feeds)
    outs = [o.name for o in m.graph.output]
    for conv in convs:
        r = alma_run(ALMA, path, conv, feeds, os.path.join(d, conv), check=False, timeout=60)
        if r.returncode:
            failures.append(f"{name} {conv}: alma failed: {r.stderr.strip()[-400:]}")
            continue
        for o, w in zip(outs, want):
            got = np.load(os.path.join(d, conv, o + ".npy"))
            why = same(got, np.asarray(w))
            if why:
                failures.append(f"{name} {conv} output {o}: {why}")
    print(f"ok {name}" if not any(f.startswith(name + " ") for f in failures) else f"FAILED {name}")


# ---- every code decoded ---------------------------------------------------------------------
for t in LOWFLOAT + LOWINT:
    n = 1 << BITS.get(t, 8)
    codes = np.arange(n, dtype=np.uint8)
    u = UNSIGNED_OF.get(BITS.get(t, 8), TP.UINT8)
    nodes = [helper.make_node("Cast", ["c"], ["cu"], to=u)] if u != TP.UINT8 else [helper.make_node("Identity", ["c"], ["cu"])]
    nodes += [helper.make_node("BitCast", ["cu"], ["v"], to=t) if t != u else helper.make_node("Identity", ["cu"], ["v"]),
              helper.make_node("Cast", ["v"], ["f"], to=TP.FLOAT)]
    outs = [vi("f", TP.FLOAT, [n])]
    if t in LOWINT:
        nodes.append(helper.make_node("Cast", ["v"], ["i"], to=TP.INT32))
        outs.append(vi("i", TP.INT32, [n]))
    check(f"decode_{NAME[t]}", model(nodes, [vi("c", TP.UINT8, [n])], outs, 26), {"c": codes}, RUNTIMES)

# the same values from a packed initializer of an odd count (the loader unpacks, the last byte padded)
for t in LOWFLOAT + LOWINT:
    npt = helper.tensor_dtype_to_np_dtype(t)
    n = (1 << BITS.get(t, 8)) + 1
    vals = (np.arange(n) % (1 << BITS.get(t, 8))).astype(np.uint8)
    arr = vals.view(npt) if t not in LOWINT else np.array([int(v) for v in vals.view(npt)], dtype=npt)
    init = numpy_helper.from_array(arr.reshape(1, n), "w")
    m = model([helper.make_node("Cast", ["w"], ["f"], to=TP.FLOAT)], [], [vi("f", TP.FLOAT, [1, n])], 25, [init])
    check(f"init_{NAME[t]}", m, {}, ("EAGER", "FOLD+EAGER"))

# ---- casts into each type: edge values and every value of the type ----------------------------
edges = [0.0, -0.0, 0.5, -0.5, 1.0, 1.5, 2.5, 3.5, 7.5, 8.5, 100.0, 239.0, 240.0, 247.9, 248.0, 255.0, 256.0, 447.0,
         448.0, 449.0, 463.9, 464.0, 464.1, 480.0, 500.0, 57343.0, 57344.0, 61439.0, 61440.0, 65536.0, 1e9, 3e38, -448.0,
         -464.0, -464.1, -1e9, 2.0 ** -6, 2.0 ** -7, 2.0 ** -9, 2.0 ** -10, 2.0 ** -11, 3 * 2.0 ** -11, 2.0 ** -14,
         2.0 ** -16, 2.0 ** -17, 1.5 * 2.0 ** -17, 2.0 ** -18, 2.0 ** -127, 2.0 ** -126, 1e-40, -1e-40, 0.25, 0.75, 1.25,
         1.75, 2.25, 2.75, 3.0, 4.0, 5.0, 6.0, 6.5, 7.0, 0.24, 0.26, 0.124, 0.126, 1.0001, 1.4999, 0.99, 3.4e38,
         float("inf"), float("-inf"), float("nan"), -float("nan")]
edges_f32 = np.array(edges, dtype=np.float32)
edges_f32[-1] = np.float32(np.uint32(0xFFC00000).view(np.float32))  # a NaN with its sign bit set
for t in LOWFLOAT:
    allv = np.arange(1 << BITS.get(t, 8), dtype=np.uint8).view(np.uint8)
    npt = helper.tensor_dtype_to_np_dtype(t)
    own = (allv if t != TP.FLOAT4E2M1 else allv[:16]).view(npt).astype(np.float32)
    x = np.concatenate([edges_f32, own, -own, own * np.float32(1.0625), own * np.float32(0.96875)]).astype(np.float32)
    modes = [dict(saturate=s) for s in (1, 0)] if t != TP.FLOAT8E8M0 else \
        [dict(saturate=s, round_mode=r) for s in (1, 0) for r in ("up", "down", "nearest")]
    if t == TP.FLOAT4E2M1:
        modes = [{}]
    for mode in modes:
        nodes = [helper.make_node("Cast", ["x"], ["v"], to=t, **mode)] + to_codes("v", t, "c") + \
            [helper.make_node("Cast", ["v"], ["f"], to=TP.FLOAT)]
        m = model(nodes, [vi("x", TP.FLOAT, [len(x)])], [vi("c", TP.UINT8, [len(x)]), vi("f", TP.FLOAT, [len(x)])], 26)
        tag = "_".join(f"{k}{v}" for k, v in mode.items())
        check(f"cast_f32_to_{NAME[t]}_{tag}", m, {"x": x}, ("EAGER", "FOLD+EAGER"))
    # float16 inputs and CastLike
    xh = x[np.isfinite(x) & (np.abs(x) < 60000) | ~np.isfinite(x)].astype(np.float16)
    like = numpy_helper.from_array(np.zeros(1, dtype=npt), "like")
    nodes = [helper.make_node("CastLike", ["x", "like"], ["v"])] + to_codes("v", t, "c")
    m = model(nodes, [vi("x", TP.FLOAT16, [len(xh)])], [vi("c", TP.UINT8, [len(xh)])], 26, [like])
    check(f"castlike_f16_to_{NAME[t]}", m, {"x": xh})
    # lowfloat to lowfloat, to integers and to bool
    for t2 in (TP.FLOAT8E5M2, TP.FLOAT8E4M3FN, TP.FLOAT4E2M1, TP.INT32, TP.BOOL):
        if t2 == t or (t == TP.FLOAT8E8M0 and t2 == TP.FLOAT4E2M1):  # ml_dtypes has no such cast
            continue
        nodes = [helper.make_node("Cast", ["x"], ["v"], to=t), helper.make_node("Cast", ["v"], ["w"], to=t2)]
        nodes += to_codes("w", t2, "c") if t2 in LOWFLOAT else [helper.make_node("Identity", ["w"], ["c"])]
        ct = TP.UINT8 if t2 in LOWFLOAT else t2
        x2 = x
        if t2 == TP.INT32:  # float to int32 out of range is undefined: values of t that fit
            with np.errstate(invalid="ignore", over="ignore"):
                vt = x.astype(npt).astype(np.float64) if t != TP.FLOAT8E8M0 else \
                    numpy_helper.to_float8e8m0(x).astype(np.float64)
            x2 = x[np.isfinite(vt) & (np.abs(vt) < 2 ** 31)]
        m = model(nodes, [vi("x", TP.FLOAT, [len(x2)])], [vi("c", ct, [len(x2)])], 26)
        check(f"cast_{NAME[t]}_to_{TP.DataType.Name(t2)}", m, {"x": x2})

# float and integer to int4/uint4/int2/uint2: integers wrap around as ONNX's reference does; floats
# truncate, and only those whose truncation is in the type's range are compared (ONNX leaves
# out-of-range float casts undefined: onnx's reference wraps in some versions and gives 0 in others,
# ONNX Runtime saturates)
LOWINT_RANGE = {TP.INT4: (-8, 7), TP.UINT4: (0, 15), TP.INT2: (-2, 1), TP.UINT2: (0, 3)}
xi = np.array([0, -0.0, 0.4, 0.5, 0.9, -0.9, 1.5, -1.5, 2.5, -2.7, 3.9, 7.4, 7.6, 8, 9, 15.5, 16, 17, -8, -9, -17, 100,
               -100, 1e6, 3e9, -3e9, 2.0 ** 40], dtype=np.float32)
ii = np.array([0, 1, 2, 3, 4, 7, 8, 15, 16, 17, -1, -2, -3, -8, -9, 200, -56, 1 << 40, -(1 << 40) - 3], dtype=np.int64)
for t in LOWINT:
    lo, hi = LOWINT_RANGE[t]
    xt = xi[(np.trunc(xi) >= lo) & (np.trunc(xi) <= hi)]
    nodes = [helper.make_node("Cast", ["x"], ["v"], to=t), helper.make_node("Cast", ["v"], ["y"], to=TP.INT32),
             helper.make_node("Cast", ["i"], ["w"], to=t), helper.make_node("Cast", ["w"], ["z"], to=TP.INT32),
             helper.make_node("Cast", ["w"], ["f"], to=TP.FLOAT16)]
    m = model(nodes, [vi("x", TP.FLOAT, [len(xt)]), vi("i", TP.INT64, [len(ii)])],
              [vi("y", TP.INT32, [len(xt)]), vi("z", TP.INT32, [len(ii)]), vi("f", TP.FLOAT16, [len(ii)])], 25)
    check(f"cast_to_{NAME[t]}", m, {"x": xt, "i": ii}, ("EAGER", "FOLD+EAGER"))

# ---- QuantizeLinear / DequantizeLinear ---------------------------------------------------------
def qdq_case(t, opset, layout, saturate=None):
    npt = helper.tensor_dtype_to_np_dtype(t)
    x = (rng.standard_normal((4, 6)) * 6).astype(np.float32)
    x[0, :6] = [0.0, -0.0, 2.5, -2.5, 1e6, -1e6]  # ties and saturation
    attrs = {}
    if layout == "tensor":
        s = np.array(0.5, np.float32)
    elif layout == "axis":
        s, attrs["axis"] = np.array([0.5, 0.25, 1.0, 2.0, 0.75, 1.5], np.float32), 1
    else:
        s, attrs["axis"], attrs["block_size"] = (rng.uniform(0.1, 1.0, (2, 6))).astype(np.float32), 0, 3
    if t in LOWINT:
        lo, hi = {TP.INT4: (-8, 7), TP.UINT4: (0, 15), TP.INT2: (-2, 1), TP.UINT2: (0, 3)}[t]
        z = rng.integers(lo, hi + 1, s.shape).astype(npt)
    else:
        z = np.zeros(s.shape, dtype=npt)  # float8/float4 zero points are 0 in practice (and ONNX's data)
    inits = [numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")]
    qattrs = dict(attrs)
    if saturate is not None:
        qattrs["saturate"] = saturate
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], **qattrs),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], **attrs),
             helper.make_node("Cast", ["q"], ["qf"], to=TP.FLOAT)]
    m = model(nodes, [vi("x", TP.FLOAT, [4, 6])], [vi("y", TP.FLOAT, [4, 6]), vi("qf", TP.FLOAT, [4, 6])], opset, inits)
    tag = f"_sat{saturate}" if saturate is not None else ""
    check(f"qdq_{NAME[t]}_{layout}_op{opset}{tag}", m, {"x": x}, RUNTIMES)


for t in FLOAT8:
    for layout in ("tensor", "axis", "blocked"):
        qdq_case(t, 21 if layout == "blocked" else 19, layout)
    qdq_case(t, 25, "tensor", saturate=0)
for t in (TP.INT4, TP.UINT4):
    for layout in ("tensor", "axis", "blocked"):
        qdq_case(t, 21, layout)
qdq_case(TP.FLOAT4E2M1, 23, "axis")
qdq_case(TP.FLOAT4E2M1, 25, "blocked")
for t in (TP.INT2, TP.UINT2):
    for layout in ("tensor", "axis", "blocked"):
        qdq_case(t, 25, layout)

# no zero point: DequantizeLinear of constants, QuantizeLinear by output_dtype (runtimes must not read
# these as 8-bit data)
for t in (TP.INT4, TP.FLOAT8E4M3FN, TP.UINT2, TP.FLOAT4E2M1):
    npt = helper.tensor_dtype_to_np_dtype(t)
    w = np.array([[-3, 1, 2], [5, -7, 0]] if t not in (TP.UINT2,) else [[1, 2, 3], [0, 1, 3]]).astype(npt)
    nodes = [helper.make_node("DequantizeLinear", ["w", "s"], ["d"]), helper.make_node("Mul", ["d", "x"], ["e"]),
             helper.make_node("QuantizeLinear", ["e", "s"], ["q"], output_dtype=t),
             helper.make_node("DequantizeLinear", ["q", "s"], ["y"])]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(0.5, np.float32), "s")]
    m = model(nodes, [vi("x", TP.FLOAT, [2, 3])], [vi("y", TP.FLOAT, [2, 3])], 25, inits)
    check(f"qdq_nozp_{NAME[t]}", m, {"x": np.array([[1, -1, 2], [0.5, 1, 3]], np.float32)}, RUNTIMES + ("FOLD+FUSE+DNNL",))

# float8e8m0 scales (opset 24): powers of two, the MX formats' block scales
x = (rng.standard_normal((4, 8)) * 5).astype(np.float32)
se = np.array([[0.5] * 8, [2.0] * 8], dtype=ml_dtypes.float8_e8m0fnu)
inits = [numpy_helper.from_array(se, "s"), numpy_helper.from_array(np.zeros((2, 8), dtype=ml_dtypes.float4_e2m1fn), "z")]
nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=0, block_size=2),
         helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=0, block_size=2, output_dtype=TP.FLOAT)]
check("qdq_float4e2m1_e8m0_scale_op24", model(nodes, [vi("x", TP.FLOAT, [4, 8])], [vi("y", TP.FLOAT, [4, 8])], 24, inits),
      {"x": x}, ("EAGER", "FOLD+EAGER"))

# ---- data movement passes the types through ---------------------------------------------------
for t in (TP.FLOAT8E4M3FN, TP.INT4, TP.UINT2, TP.FLOAT4E2M1):
    nodes = [helper.make_node("Cast", ["x"], ["v"], to=t),
             helper.make_node("Transpose", ["v"], ["t"], perm=[1, 0]),
             helper.make_node("Reshape", ["t", "shp"], ["r"]),
             helper.make_node("Unsqueeze", ["r", "ax"], ["u"]),
             helper.make_node("Squeeze", ["u", "ax"], ["sq"]),
             helper.make_node("Flatten", ["sq"], ["fl"], axis=1),
             helper.make_node("Identity", ["fl"], ["id"]),
             helper.make_node("Pad", ["id", "pads"], ["p"]),
             helper.make_node("Cast", ["p"], ["y"], to=TP.FLOAT),
             helper.make_node("Shape", ["p"], ["sh"])]
    inits = [numpy_helper.from_array(np.array([2, 6], np.int64), "shp"), numpy_helper.from_array(np.array([0], np.int64), "ax"),
             numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "pads")]
    m = model(nodes, [vi("x", TP.FLOAT, [3, 4])], [vi("y", TP.FLOAT, [2, 8]), vi("sh", TP.INT64, [2])], 25, inits)
    x = (rng.standard_normal((3, 4)) * 3).astype(np.float32)
    if t in LOWINT_RANGE:  # in the type's range (see the casts above)
        x = np.clip(x, LOWINT_RANGE[t][0], LOWINT_RANGE[t][1] + 0.5).astype(np.float32)
    check(f"datamove_{NAME[t]}", m, {"x": x}, RUNTIMES)

# ---- arithmetic refuses them, naming the type ---------------------------------------------------
for op, t in (("Add", TP.FLOAT8E4M3FN), ("Mul", TP.INT4), ("Relu", TP.FLOAT8E5M2), ("MatMul", TP.UINT4),
              ("ReduceSum", TP.FLOAT4E2M1), ("Neg", TP.INT2), ("Sub", TP.FLOAT8E8M0)):
    ins = ["v", "v"] if op in ("Add", "Mul", "MatMul", "Sub") else ["v"]
    nodes = [helper.make_node("Cast", ["x"], ["v"], to=t), helper.make_node(op, ins, ["a"]),
             helper.make_node("Cast", ["a"], ["y"], to=TP.FLOAT)]
    m = model(nodes, [vi("x", TP.FLOAT, [2, 2])], [vi("y", TP.FLOAT, None)], 25)
    d = os.path.join(WORK, f"refuse_{op}")
    os.makedirs(d, exist_ok=True)
    onnx.save(m, os.path.join(d, "model.onnx"))
    for conv in ("EAGER", "XNNPACK"):
        r = alma_run(ALMA, os.path.join(d, "model.onnx"), conv, {"x": np.ones((2, 2), np.float32)}, d, check=False, timeout=60)
        if not 0 < r.returncode < 126 or NAME[t].lower() not in r.stderr.lower().replace("_", ""):
            failures.append(f"refuse_{op} {conv}: expected a clean error naming {NAME[t].lower()}, got rc {r.returncode}: "
                            f"{r.stderr.strip()[-300:]}")
    print(f"ok refuse_{op} ({NAME[t].lower()})")

# ---- ONNX Runtime's int4 weight-only QDQ models ----------------------------------------------------
if ort is None:
    print("   (onnxruntime missing: the MatMul4Bits and saved-model checks are skipped)")
else:
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization import matmul_nbits_quantizer as mq

    def ort_run(path_or_bytes, feeds):
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        return ort.InferenceSession(path_or_bytes, so, providers=["CPUExecutionProvider"]).run(None, feeds)

    W1 = rng.standard_normal((64, 48)).astype(np.float32)
    W2 = rng.standard_normal((48, 33)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
                           helper.make_node("MatMul", ["r", "W2"], ["y"])], "mlp", [vi("x", TP.FLOAT, ["n", 64])],
                          [vi("y", TP.FLOAT, ["n", 33])], [numpy_helper.from_array(W1, "W1"), numpy_helper.from_array(W2, "W2")])
    fm = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    fm.ir_version = 10
    xm = rng.standard_normal((5, 64)).astype(np.float32)
    for sym, bs in ((False, 32), (True, 16)):
        cfg = mq.DefaultWeightOnlyQuantConfig(block_size=bs, is_symmetric=sym, quant_format=QuantFormat.QDQ)
        q = mq.MatMulNBitsQuantizer(onnx.ModelProto.FromString(fm.SerializeToString()), algo_config=cfg)
        q.process()
        qm = q.model.model
        kinds = sorted({i.data_type for i in qm.graph.initializer})
        if not any(k in (TP.INT4, TP.UINT4) for k in kinds):
            failures.append(f"matmul4bits sym={sym}: the quantizer wrote no int4/uint4 initializer ({kinds})")
        ref = ort_run(qm.SerializeToString(), {"x": xm})
        name = f"matmul4bits_qdq_sym{int(sym)}_b{bs}"
        d = os.path.join(WORK, name)
        os.makedirs(d, exist_ok=True)
        onnx.save(qm, os.path.join(d, "model.onnx"))
        for conv in ("EAGER", "FOLD+EAGER", "FOLD+FUSE+DNNL", "XNNPACK", "BLAS"):
            r = alma_run(ALMA, os.path.join(d, "model.onnx"), conv, {"x": xm}, os.path.join(d, conv), check=False, timeout=60)
            if r.returncode:
                failures.append(f"{name} {conv}: alma failed: {r.stderr.strip()[-300:]}")
                continue
            got = np.load(os.path.join(d, conv, "y.npy"))
            err = float(np.abs(got - ref[0]).max())
            if got.shape != ref[0].shape or not err <= 1e-4 * max(1.0, float(np.abs(ref[0]).max())):
                failures.append(f"{name} {conv}: largest difference from ONNX Runtime {err}")
        print(f"ok {name}")

    # --save-converted: int4 and float8 initializers written packed; ONNX Runtime runs the saved file
    w4 = rng.integers(-8, 8, (7, 5)).astype(ml_dtypes.int4)  # 35 elements: an odd count
    f8 = (rng.standard_normal((5,)) * 3).astype(ml_dtypes.float8_e4m3fn)
    inits = [numpy_helper.from_array(w4, "w4"), numpy_helper.from_array(np.array(0.25, np.float32), "s4"),
             numpy_helper.from_array(f8, "f8"), numpy_helper.from_array(np.array(0.5, np.float32), "s8")]
    nodes = [helper.make_node("DequantizeLinear", ["w4", "s4"], ["w"]), helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("DequantizeLinear", ["f8", "s8"], ["b"]), helper.make_node("Add", ["h", "b"], ["y"])]
    sm = model(nodes, [vi("x", TP.FLOAT, [3, 7])], [vi("y", TP.FLOAT, [3, 5])], 21, inits)
    d = os.path.join(WORK, "save_converted")
    os.makedirs(d, exist_ok=True)
    onnx.save(sm, os.path.join(d, "model.onnx"))
    r = subprocess.run([ALMA, "bench", os.path.join(d, "model.onnx"), "-c", "EAGER", "--save-converted", d,
                        "-n", "1", "--warmup", "0", "--warmup-time", "0", "--min-time", "0"], capture_output=True, text=True, timeout=120)
    saved = os.path.join(d, "EAGER.onnx")
    if r.returncode or not os.path.exists(saved):
        failures.append(f"save_converted: alma bench failed: {r.stderr.strip()[-300:]}")
    else:
        sv = onnx.load(saved)
        types = {i.name: i.data_type for i in sv.graph.initializer}
        if types.get("w4") != TP.INT4 or types.get("f8") != TP.FLOAT8E4M3FN:
            failures.append(f"save_converted: initializer types {types}")
        xs = rng.standard_normal((3, 7)).astype(np.float32)
        a, b = ort_run(sm.SerializeToString(), {"x": xs}), ort_run(saved, {"x": xs})
        why = same(b[0], a[0])
        if why:
            failures.append(f"save_converted: ONNX Runtime on the saved model: {why}")
        r = alma_run(ALMA, saved, "EAGER", {"x": xs}, os.path.join(d, "alma"), check=False, timeout=60)
        # alma's float32 MatMul sums in its own order: equal within float32 rounding, not bit for bit
        if r.returncode or not np.allclose(np.load(os.path.join(d, "alma", "y.npy")), a[0], rtol=1e-5, atol=1e-5):
            failures.append(f"save_converted: alma on the saved model differs from ONNX Runtime ({r.stderr.strip()[-200:]})")
    print("ok save_converted")

# ---- malformed packed initializers fail at load, naming them -------------------------------------
def raw_tensor(name, t, dims, raw):
    tp = TP()
    tp.name, tp.data_type, tp.raw_data = name, t, raw
    tp.dims.extend(dims)
    return tp


def malformed(name, tensor, expect):
    m = model([helper.make_node("Cast", [tensor.name], ["y"], to=TP.FLOAT)], [], [vi("y", TP.FLOAT, None)], 25, [tensor])
    p = os.path.join(WORK, f"bad_{name}.onnx")
    with open(p, "wb") as f:
        f.write(m.SerializeToString())
    r = subprocess.run([ALMA, "run", p], capture_output=True, text=True, timeout=60)
    if not 0 < r.returncode < 126 or tensor.name not in r.stderr or expect not in r.stderr:
        failures.append(f"bad_{name}: expected a load error naming '{tensor.name}' and '{expect}', got rc {r.returncode}: "
                        f"{r.stderr.strip()[-300:]}")
    print(f"ok bad_{name}")


malformed("int4_raw_unpacked", raw_tensor("w_int4", TP.INT4, [5], bytes(5)), "needs 3")
malformed("int4_raw_short", raw_tensor("w_int4b", TP.INT4, [5], bytes(2)), "needs 3")
malformed("uint2_raw_long", raw_tensor("w_uint2", TP.UINT2, [9], bytes(4)), "needs 3")
malformed("f8_raw_short", raw_tensor("w_f8", TP.FLOAT8E5M2, [4], bytes(3)), "needs 4")
bad = helper.make_tensor("w_i32", TP.UINT4, [4], [1, 2, 3, 4])
del bad.int32_data[:]
bad.int32_data.extend([0x21, 300])
malformed("uint4_int32_not_byte", bad, "300")

for f in failures:
    print("FAIL", f[:600])
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
