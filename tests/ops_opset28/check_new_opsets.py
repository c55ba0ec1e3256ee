"""The operators and operator versions of ONNX opsets 23-28 that alma implements in src/ops
(CumProd, TensorScatter, BitCast, LinearAttention, CausalConvWithState, Range-27, SpaceToDepth-28, Mod-28, BitShift-28,
QuantizeLinear-23, DequantizeLinear-23, Cast-23..25), run by alma (`alma run`, EAGER) and by
ONNX's reference implementation (onnx.reference.ReferenceEvaluator, onnx >= 1.23), on the forms
ONNX's backend test data does not reach. Invalid models must fail to load with a message naming
what is wrong.

usage: check_new_opsets.py ALMA WORKDIR      (python with onnx >= 1.23 and numpy)
Exit 0 when every case passes, 1 otherwise, 77 when onnx is too old to define these opsets."""
import os
import sys

import numpy as np

try:
    import onnx
    from onnx import TensorProto as TP, helper
    from onnx.reference import ReferenceEvaluator
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)
if onnx.defs.onnx_opset_version() < 28:
    print(f"SKIP: onnx {onnx.__version__} defines opsets up to {onnx.defs.onnx_opset_version()}, not 28")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from alma_cli import alma_run  # noqa: E402

ALMA, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(7)
failures = []
NP2TP = {np.float32: TP.FLOAT, np.float16: TP.FLOAT16, np.float64: TP.DOUBLE, np.int32: TP.INT32,
         np.int64: TP.INT64, np.int8: TP.INT8, np.uint8: TP.UINT8, np.int16: TP.INT16, np.uint16: TP.UINT16,
         np.uint32: TP.UINT32, np.uint64: TP.UINT64, np.bool_: TP.BOOL}


def model(name, op, inputs, out_types, opset, attrs=None, consts=None, extra_nodes=()):
    """One node; inputs: list of (name, array); consts: name -> array given as initializers."""
    consts = consts or {}
    ins = [helper.make_tensor_value_info(n, NP2TP[a.dtype.type], a.shape) for n, a in inputs]
    outs = [helper.make_tensor_value_info(f"y{i}", t, None) for i, t in enumerate(out_types)]
    node_in = [n for n, _ in inputs] + list(consts)
    nodes = list(extra_nodes) + [helper.make_node(op, node_in, [o.name for o in outs], **(attrs or {}))]
    inits = [onnx.numpy_helper.from_array(a, n) for n, a in consts.items()]
    g = helper.make_graph(nodes, name, ins, outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def run_alma(m, name, inputs):
    d = os.path.join(WORK, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)
    return alma_run(ALMA, path, "EAGER", dict(inputs), d, check=False, timeout=60), d


def check(name, m, inputs, exact=True, tol=0.0):
    try:
        want = ReferenceEvaluator(m).run(None, dict(inputs))
    except Exception as e:  # the reference itself cannot run it: a test-writing error
        failures.append(f"{name}: reference failed: {e}")
        return
    r, d = run_alma(m, name, inputs)
    if r.returncode != 0:
        failures.append(f"{name}: alma failed: {r.stderr.strip()}")
        return
    for i, w in enumerate(want):
        got = np.ascontiguousarray(np.load(os.path.join(d, f"y{i}.npy")))
        w = np.ascontiguousarray(w)
        if got.shape != w.shape or got.dtype != w.dtype:
            failures.append(f"{name}: output {i} {got.dtype}{got.shape}, reference {w.dtype}{w.shape}")
            continue
        if exact:
            same = np.array_equal(got.view(np.uint8), w.view(np.uint8)) if got.size else True
            if not same and w.dtype.kind == "f":  # NaNs may differ in payload; compare as values
                same = np.array_equal(got, w, equal_nan=True) and np.array_equal(np.signbit(got), np.signbit(w))
            if not same:
                failures.append(f"{name}: output {i} differs: alma {got.ravel()[:8]} reference {w.ravel()[:8]}")
        elif not np.allclose(got.astype(np.float64), w.astype(np.float64), rtol=tol, atol=tol, equal_nan=True):
            failures.append(f"{name}: output {i} max error {np.nanmax(np.abs(got.astype(np.float64) - w)):.3g}")
    print(f"ok {name}")


def expect_error(name, m, inputs, words):
    r, _ = run_alma(m, name, inputs)
    msg = r.stderr + r.stdout
    if r.returncode == 0 or not all(w in msg for w in words) or "Sanitizer" in msg:
        failures.append(f"{name}: expected an error naming {words}, got rc {r.returncode}: {msg.strip()[:300]}")
    else:
        print(f"ok {name} (rejected)")


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- CumProd (26): float and integer (wrapping), exclusive, reverse, every axis
for dt in (np.float32, np.float64, np.int32, np.int64):
    x = (rng.uniform(0.5, 1.5, (3, 4, 5)) if dt in (np.float32, np.float64) else rng.integers(-3, 4, (3, 4, 5))).astype(dt)
    for axis in (0, 1, -1):
        for excl, rev in ((0, 0), (1, 0), (0, 1), (1, 1)):
            ax = np.array(axis, np.int64)
            check(f"cumprod_{dt.__name__}_a{axis}_e{excl}_r{rev}",
                  model("c", "CumProd", [("x", x)], [NP2TP[dt]], 26, {"exclusive": excl, "reverse": rev}, {"ax": ax}),
                  [("x", x)], exact=dt not in (np.float32,), tol=1e-6)
big = np.full((40,), 7, np.int32)  # overflows int32: wraps like the type
check("cumprod_int32_wrap", model("c", "CumProd", [("x", big)], [TP.INT32], 26, {}, {"ax": np.array(0, np.int32)}),
      [("x", big)])

# ---- TensorScatter (24): linear and circular, axis -2 and 1, with and without write_indices
cache = f32(2, 3, 8, 4)
for mode in ("linear", "circular"):
    for S, widx in ((3, np.array([0, 5], np.int64)), (2, np.array([7, 1], np.int64)), (8, None)):
        if mode == "linear" and widx is not None and (widx + S > 8).any():
            continue
        upd = f32(2, 3, S, 4)
        inputs = [("cache", cache), ("upd", upd)] + ([("w", widx)] if widx is not None else [])
        check(f"tensorscatter_{mode}_S{S}_{'w' if widx is not None else 'now'}",
              model("t", "TensorScatter", inputs, [TP.FLOAT], 24, {"mode": mode}), inputs)
cache3 = f32(2, 6, 5)
upd3 = f32(2, 4, 5)
w3 = np.array([4, 0], np.int64)
inp = [("cache", cache3), ("upd", upd3), ("w", w3)]
check("tensorscatter_axis1_circular", model("t", "TensorScatter", inp, [TP.FLOAT], 24, {"mode": "circular", "axis": 1}), inp)
bad = [("cache", cache3), ("upd", upd3), ("w", np.array([3, 0], np.int64))]
expect_error("tensorscatter_linear_overflow", model("t", "TensorScatter", bad, [TP.FLOAT], 24, {"axis": 1}), bad,
             ["write_indices[0] = 3", "do not fit"])
badshape = [("cache", cache3), ("upd", f32(2, 4, 6))]
expect_error("tensorscatter_bad_shape", model("t", "TensorScatter", badshape, [TP.FLOAT], 24, {"axis": 1}), badshape,
             ["does not fit past_cache"])
expect_error("tensorscatter_axis0", model("t", "TensorScatter", [("cache", cache3), ("upd", cache3)], [TP.FLOAT], 24,
                                          {"axis": 0}), [("cache", cache3), ("upd", cache3)], ["batch axis"])

# ---- BitCast (26)
for src, to in ((np.float32, TP.INT32), (np.int32, TP.FLOAT), (np.float16, TP.INT16), (np.uint16, TP.FLOAT16),
                (np.float64, TP.UINT64), (np.int64, TP.DOUBLE), (np.uint16, TP.BFLOAT16), (np.int8, TP.UINT8)):
    x = (f32(3, 5).astype(src) if np.dtype(src).kind == "f" else rng.integers(0, 100, (3, 5)).astype(src))
    m = model("b", "BitCast", [("x", x)], [to], 26, {"to": to})
    if to == TP.BFLOAT16:  # numpy has no bfloat16: read it back as float32 with a Cast behind
        m = model("b", "Cast", [("x", x)], [TP.FLOAT], 26, {"to": TP.FLOAT},
                  extra_nodes=[helper.make_node("BitCast", ["x"], ["bf"], to=TP.BFLOAT16)])
        m.graph.node[1].input[0] = "bf"
    check(f"bitcast_{np.dtype(src).name}_to_{to}", m, [("x", x)])
x = f32(4)
expect_error("bitcast_width", model("b", "BitCast", [("x", x)], [TP.INT64], 26, {"to": TP.INT64}), [("x", x)],
             ["widths differ"])

# ---- Range (27): float16 with stash_type float (default) and double; large starts where float16 steps are inexact
for start, limit, delta in ((2000.0, 2100.0, 0.7), (-3.0, 5.0, 0.3), (10.0, -10.0, -1.5)):
    for stash in (None, 1, 11):
        ins = [("s", np.array(start, np.float16)), ("l", np.array(limit, np.float16)), ("d", np.array(delta, np.float16))]
        attrs = {} if stash is None else {"stash_type": stash}
        check(f"range_f16_{start}_{stash}", model("r", "Range", ins, [TP.FLOAT16], 27, attrs), ins)
ins = [("s", np.array(1, np.float16)), ("l", np.array(2, np.float16)), ("d", np.array(0.5, np.float16))]
expect_error("range_bad_stash", model("r", "Range", ins, [TP.FLOAT16], 27, {"stash_type": 7}), ins, ["stash_type"])

# ---- SpaceToDepth (28): DCR and CRD
x = f32(2, 3, 6, 4)
for mode in ("DCR", "CRD"):
    check(f"spacetodepth_{mode}", model("s", "SpaceToDepth", [("x", x)], [TP.FLOAT], 28, {"blocksize": 2, "mode": mode}),
          [("x", x)])
    # DepthToSpace undoes it
    m = model("s", "DepthToSpace", [("x", x)], [TP.FLOAT], 28, {"blocksize": 2, "mode": mode},
              extra_nodes=[helper.make_node("SpaceToDepth", ["x"], ["z"], blocksize=2, mode=mode)])
    m.graph.node[1].input[0] = "z"
    check(f"spacetodepth_roundtrip_{mode}", m, [("x", x)])

# ---- Mod (28): floats with fmod 0 (floor) and 1 (trunc), the special values
vals = np.array([5.5, -5.5, 0.0, -0.0, np.inf, -np.inf, np.nan, 3.0, -3.0, 1e-30], np.float32)
a = np.repeat(vals, len(vals)).astype(np.float32)
b = np.tile(np.array([2.0, -2.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 3.0, -3.0, 7.0], np.float32), len(vals))
for fm in (0, 1):
    for dt in (np.float32, np.float64):
        ins = [("a", a.astype(dt)), ("b", b.astype(dt))]
        with np.errstate(all="ignore"):
            check(f"mod28_fmod{fm}_{dt.__name__}", model("m", "Mod", ins, [NP2TP[dt]], 28, {"fmod": fm}), ins)

# ---- BitShift (28): signed types, arithmetic right shifts, shifts out of range
for dt in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32):
    bits = np.dtype(dt).itemsize * 8
    lo = -50 if np.dtype(dt).kind == "i" else 0
    x = rng.integers(lo, 100, 24).astype(dt)
    y = np.array([0, 1, 3, bits - 1, bits, bits + 3] * 4, np.int64)
    if np.dtype(dt).kind == "i":
        y[:6] = [-1, -8, 2, bits - 1, bits, 200 % bits if bits > 64 else bits + 1]
    y = y.astype(dt) if np.dtype(dt).kind == "i" else np.clip(y, 0, None).astype(dt)
    for direction in ("LEFT", "RIGHT"):
        ins = [("x", x), ("y", y)]
        check(f"bitshift28_{np.dtype(dt).name}_{direction}",
              model("s", "BitShift", ins, [NP2TP[dt]], 28, {"direction": direction}), ins)

# ---- QuantizeLinear (23): precision; a scale type other than x's
x16 = (f32(4, 6) * 20).astype(np.float16)
for prec in (None, TP.FLOAT, TP.FLOAT16):
    attrs = {} if prec is None else {"precision": prec}
    consts = {"sc": np.array([0.37, 0.11, 0.9, 0.05], np.float32).reshape(4, 1).repeat(1, 1).ravel(),
              "zp": np.array([3, -2, 0, 5], np.int8)}
    m = model("q", "QuantizeLinear", [("x", x16)], [TP.INT8], 23, dict(attrs, axis=0), consts)
    check(f"quantize23_f16x_f32scale_prec{prec}", m, [("x", x16)])
x32 = f32(5, 8) * 30
for prec in (TP.FLOAT16, TP.DOUBLE):
    m = model("q", "QuantizeLinear", [("x", x32)], [TP.UINT8], 23, {"precision": prec},
              {"sc": np.array(0.173, np.float32), "zp": np.array(128, np.uint8)})
    check(f"quantize23_f32_prec{prec}", m, [("x", x32)])

# ---- DequantizeLinear (23): output_dtype
q = rng.integers(-128, 128, (3, 7)).astype(np.int8)
for od in (TP.FLOAT, TP.FLOAT16):
    m = model("d", "DequantizeLinear", [("q", q)], [od], 23, {"output_dtype": od},
              {"sc": np.array(0.0731, np.float32), "zp": np.array(-3, np.int8)})
    check(f"dequantize23_out{od}", m, [("q", q)])
m = model("d", "DequantizeLinear", [("q", q)], [TP.INT32], 23, {"output_dtype": TP.INT32},
          {"sc": np.array(0.0731, np.float32)})
expect_error("dequantize23_bad_output_dtype", m, [("q", q)], ["output_dtype int32"])

# ---- Cast (23-25): the usual types still convert; a type alma does not hold (float6, ONNX 1.23's
# addition) is refused by name (float8/float4/int4/int2: tests/ops_lowbit)
x = f32(3, 4)
check("cast25_f32_to_f16", model("c", "Cast", [("x", x)], [TP.FLOAT16], 25, {"to": TP.FLOAT16}), [("x", x)])
expect_error("cast25_to_float6", model("c", "Cast", [("x", x)], [27], 25, {"to": 27}), [("x", x)], ["float6e2m3"])

# ---- LinearAttention (27): every update rule, GQA, per-head and per-key decay, beta per head or
# shared, with and without past state, float16
def la_case(name, B, T, Hq, Hkv, dk, dv, rule, gdim, bdim, past, dt=np.float32, scale=None):
    q = (f32(B, T, Hq * dk) * 0.5).astype(dt)
    k = (f32(B, T, Hkv * dk) * 0.5).astype(dt)
    v = f32(B, T, Hkv * dv).astype(dt)
    ins = [("q", q), ("k", k), ("v", v)]
    names = ["q", "k", "v", "", "", ""]
    if past:
        ins.append(("s", (f32(B, Hkv, dk, dv) * 0.3).astype(dt)))
        names[3] = "s"
    if rule in ("gated", "gated_delta"):
        ins.append(("g", (-np.abs(f32(B, T, Hkv * gdim)) * 0.3).astype(dt)))
        names[4] = "g"
    if rule in ("delta", "gated_delta"):
        ins.append(("be", (1 / (1 + np.exp(-f32(B, T, bdim)))).astype(dt)))
        names[5] = "be"
    while names and names[-1] == "":
        names.pop()
    attrs = {"q_num_heads": Hq, "kv_num_heads": Hkv, "update_rule": rule}
    if scale is not None:
        attrs["scale"] = scale
    m = model("la", "LinearAttention", ins, [NP2TP[dt], NP2TP[dt]], 27, attrs)
    m.graph.node[0].ClearField("input")
    m.graph.node[0].input.extend(names)
    check(name, m, ins, exact=False, tol=2e-5 if dt == np.float32 else 2e-2)


for rule in ("linear", "gated", "delta", "gated_delta"):
    for Hq, Hkv in ((4, 4), (6, 2), (3, 1)):
        la_case(f"linear_attention_{rule}_{Hq}x{Hkv}", 2, 5, Hq, Hkv, 4, 3, rule, 4, Hkv, past=True)
la_case("linear_attention_gated_per_head_no_past", 1, 7, 2, 2, 5, 6, "gated", 1, 2, past=False)
la_case("linear_attention_gated_delta_shared_beta", 2, 3, 4, 2, 3, 3, "gated_delta", 1, 1, past=True, scale=0.25)
la_case("linear_attention_fp16", 1, 4, 2, 1, 4, 4, "gated_delta", 4, 1, past=True, dt=np.float16)
q = f32(1, 2, 8)
bad_ins = [("q", q), ("k", q), ("v", q)]
expect_error("linear_attention_needs_decay",
             model("la", "LinearAttention", bad_ins, [TP.FLOAT], 27, {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "gated"}),
             bad_ins, ["requires the decay input"])
expect_error("linear_attention_heads",
             model("la", "LinearAttention", bad_ins, [TP.FLOAT], 27, {"q_num_heads": 3, "kv_num_heads": 2, "update_rule": "linear"}),
             bad_ins, ["multiple of kv_num_heads"])

# ---- CausalConvWithState (27)
for K in (1, 2, 4):
    for act in ("none", "silu"):
        for with_bias, with_past in ((0, 0), (1, 1), (0, 1)):
            x = f32(2, 3, 6)
            ins = [("x", x), ("w", f32(3, 1, K))]
            names = ["x", "w", "", ""]
            if with_bias:
                ins.append(("b", f32(3)))
                names[2] = "b"
            if with_past:
                ins.append(("p", f32(2, 3, K - 1)))
                names[3] = "p"
            while names[-1] == "":
                names.pop()
            m = model("cc", "CausalConvWithState", ins, [TP.FLOAT, TP.FLOAT], 27, {"activation": act})
            m.graph.node[0].ClearField("input")
            m.graph.node[0].input.extend(names)
            check(f"causal_conv_k{K}_{act}_b{with_bias}_p{with_past}", m, ins, exact=False, tol=1e-5)
bad_ins = [("x", f32(2, 3, 6)), ("w", f32(3, 2, 3))]
expect_error("causal_conv_bad_weight", model("cc", "CausalConvWithState", bad_ins, [TP.FLOAT], 27), bad_ins,
             ["weight must be"])

if failures:
    print("\n".join(["FAILED:"] + failures))
    sys.exit(1)
print("all cases passed")
