"""ONNX Runtime's encoder-transformer contrib ops (src/ops/contrib_bert.c) through alma against ONNX Runtime
1.32's CPU kernels.

usage: check_bert.py ALMA WORKDIR   (python with onnx, numpy and onnxruntime)

1. Gelu, BiasGelu, FastGelu (with and without bias), QuickGelu (alpha) against ONNX Runtime; FastGelu
   in float16 against numpy (ONNX Runtime has no float16 CPU kernel).
2. BiasAdd and BiasSplitGelu against numpy written from the schema (ONNX Runtime has CUDA kernels only).
3. FusedMatMul: transA, transB, alpha, batch broadcasting, transBatchA / transBatchB.
4. EmbedLayerNormalization: segment ids or none, mask (with a fully padded row) or none, position_ids
   [B, S] and [1, S], the mask_index and embedding_sum outputs.
5. Attention: every mask_index form ONNX Runtime's CPU kernel implements ([B] lengths with 0, [2B] end and
   start, [3B+2], raw [B, T] with an all-zero row, [B, S, T]), unidirectional, past/present,
   attention_bias broadcast, qkv_hidden_sizes, scale, mask_filter_value, no bias.
6. MultiHeadAttention: 3-D key/value with bias, [B, N, L, D] key/value, key_padding_mask forms, past and
   present, attention_bias, unidirectional, the qk output, a V head size unlike K's; packed QKV and
   packed KV (ONNX Runtime's CPU kernel refuses them) against ONNX Runtime on the unpacked inputs.
7. What alma does not implement (Attention's 4-D mask, do_rotary) fails with a message naming it.
8. The threaded paths (contrib_bert.h: the BLAS and DNNL runtimes run these nodes on their threads):
   Attention, MultiHeadAttention, the Gelu family, BiasAdd, SkipLayerNormalization and
   SkipSimplifiedLayerNormalization with shapes of several items (row blocks, 64-column projection
   blocks, batch x heads) on FOLD+DNNL and FOLD+BLAS with --threads 2: their outputs must equal EAGER's
   bit for bit (the same code per item; the projection's column blocks sum each element as one call
   does), except the Gelus, which the runtimes compute with a vectorised erf/tanh (alma__gelu_row):
   within 1e-6 * (1 + |y|) of EAGER's and 1e-4 of ONNX Runtime's; plus alma__gelu_row's vector and
   scalar-tail code over -12..12 against the exact Gelus (float64).
Exit 0 when everything passes, 1 otherwise; 77 (skip) without the python modules."""
import os
import sys

import numpy as np

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto as TP, helper
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from alma_cli import alma_run, available, read_outputs  # noqa: E402

ALMA, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(5)
failures = []
count = [0]
ET = {np.float32: TP.FLOAT, np.float16: TP.FLOAT16, np.int32: TP.INT32, np.int64: TP.INT64, np.float64: TP.DOUBLE}


def fail(msg):
    failures.append(msg)
    print("FAIL", msg)


def f32(*s):
    return rng.standard_normal(s).astype(np.float32)


def node_model(op, inputs, outputs, attrs, domain="com.microsoft"):
    """inputs: [(name, array or None)] (None: omitted optional input); outputs: names ('' omitted)"""
    node = helper.make_node(op, [n if a is not None else "" for n, a in inputs], outputs, domain=domain, **attrs)
    vis = [helper.make_tensor_value_info(n, ET[a.dtype.type], list(a.shape)) for n, a in inputs if a is not None]
    # outputs untyped (both runtimes infer them), but qk's type is free in the schema: float
    outs = [helper.make_tensor_value_info(o, TP.FLOAT, None) if o == "qk" else onnx.ValueInfoProto(name=o)
            for o in outputs if o]
    g = helper.make_graph([node], "g", vis, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m


def ort_run(m, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def alma_outputs(m, feeds, name, conv="EAGER", *extra):
    d = os.path.join(WORK, name)
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, "model.onnx")
    onnx.save(m, p)
    out = os.path.join(d, "out-" + conv.replace("+", "_"))
    alma_run(ALMA, p, conv, feeds, out, *extra)
    return read_outputs(out, [o.name for o in m.graph.output])


def close(name, got, ref, tol):
    count[0] += 1
    got = np.asarray(got)
    ref = np.asarray(ref)
    if got.shape != ref.shape:
        return fail(f"{name}: shape {got.shape}, expected {ref.shape}")
    if got.dtype.kind in "iu":
        if not np.array_equal(got, ref):
            return fail(f"{name}: {got.ravel()[:8]} expected {ref.ravel()[:8]}")
        return
    err = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    lim = tol * (1 + np.abs(ref.astype(np.float64)))
    if not np.all(err <= lim):
        i = int(np.argmax(err - lim))
        fail(f"{name}: max err {err.max():.3g} at {np.unravel_index(i, err.shape)} "
             f"(got {got.ravel()[i]}, ref {ref.ravel()[i]}, tol {tol})")


def vs_ort(name, op, inputs, outputs, attrs=None, tol=1e-4, ref_model=None, ref_feeds=None):
    """alma on the node against ONNX Runtime on the same node (or on ref_model with ref_feeds)"""
    attrs = attrs or {}
    m = node_model(op, inputs, outputs, attrs)
    feeds = {n: a for n, a in inputs if a is not None}
    try:
        got = alma_outputs(m, feeds, name)
    except RuntimeError as e:
        return fail(f"{name}: {e}")
    ref = ort_run(ref_model or m, ref_feeds or feeds)
    for o, g, r in zip([o for o in outputs if o], got, ref):
        close(f"{name}:{o}", g, r, tol)


# ---- 1. activations ----------------------------------------------------------------------------------
x, b = f32(2, 5, 16) * 3, f32(16)
vs_ort("gelu", "Gelu", [("x", x)], ["y"])
vs_ort("bias_gelu", "BiasGelu", [("x", x), ("b", b)], ["y"])
vs_ort("fast_gelu", "FastGelu", [("x", x)], ["y"])
vs_ort("fast_gelu_bias", "FastGelu", [("x", x), ("b", b)], ["y"])
vs_ort("quick_gelu", "QuickGelu", [("x", x)], ["y"])
vs_ort("quick_gelu_alpha", "QuickGelu", [("x", x)], ["y"], {"alpha": 0.5})
vs_ort("fast_gelu_2d", "FastGelu", [("x", f32(7, 16)), ("b", b)], ["y"])
xh, bh = x.astype(np.float16), b.astype(np.float16)
v = xh.astype(np.float32) + bh.astype(np.float32)
ref = (0.5 * v * (1 + np.tanh(0.7978845608 * (v + 0.044715 * v ** 3)))).astype(np.float16)
close("fast_gelu_f16", alma_outputs(node_model("FastGelu", [("x", xh), ("b", bh)], ["y"], {}), {"x": xh, "b": bh},
                                    "fast_gelu_f16")[0], ref, 2e-3)

# ---- 2. BiasAdd, BiasSplitGelu (schema semantics; no CPU kernel in ONNX Runtime) -----------------------
sk = f32(2, 5, 16)
m = node_model("BiasAdd", [("x", x), ("b", b), ("s", sk)], ["y"], {})
close("bias_add", alma_outputs(m, {"x": x, "b": b, "s": sk}, "bias_add")[0], x + b + sk, 1e-6)
m = node_model("BiasSplitGelu", [("x", x), ("b", b)], ["y"], {})
v = x + b
from math import erf  # noqa: E402
gelu = np.vectorize(lambda t: 0.5 * t * (1 + erf(t / np.sqrt(2))))
close("bias_split_gelu", alma_outputs(m, {"x": x, "b": b}, "bias_split_gelu")[0], v[..., :8] * gelu(v[..., 8:]), 1e-5)

# ---- 3. FusedMatMul -------------------------------------------------------------------------------------
vs_ort("fmm_plain", "FusedMatMul", [("a", f32(3, 4, 5)), ("b", f32(3, 5, 6))], ["y"])
vs_ort("fmm_tA_alpha", "FusedMatMul", [("a", f32(3, 5, 4)), ("b", f32(5, 6))], ["y"], {"transA": 1, "alpha": 0.125})
vs_ort("fmm_tB_bcast", "FusedMatMul", [("a", f32(2, 1, 4, 5)), ("b", f32(3, 6, 5))], ["y"], {"transB": 1})
vs_ort("fmm_tAtB", "FusedMatMul", [("a", f32(5, 4)), ("b", f32(6, 5))], ["y"], {"transA": 1, "transB": 1})
vs_ort("fmm_vec", "FusedMatMul", [("a", f32(5)), ("b", f32(2, 5, 6))], ["y"], {"alpha": 2.0})
vs_ort("fmm_tbA", "FusedMatMul", [("a", f32(4, 3, 5)), ("b", f32(3, 5, 6))], ["y"], {"transBatchA": 1})
vs_ort("fmm_tbA_tA", "FusedMatMul", [("a", f32(5, 2, 3, 4)), ("b", f32(2, 3, 5, 6))], ["y"],
       {"transBatchA": 1, "transA": 1})
vs_ort("fmm_tbB_tB", "FusedMatMul", [("a", f32(2, 3, 4, 5)), ("b", f32(6, 2, 3, 5))], ["y"],
       {"transBatchB": 1, "transB": 1, "alpha": 0.5})
vs_ort("fmm_tbAB", "FusedMatMul", [("a", f32(4, 3, 5)), ("b", f32(5, 3, 6))], ["y"],
       {"transBatchA": 1, "transBatchB": 1})

# ---- 4. EmbedLayerNormalization -------------------------------------------------------------------------
B, S, H, V, P = 3, 6, 32, 50, 16
ids = rng.integers(0, V, (B, S)).astype(np.int32)
seg = rng.integers(0, 2, (B, S)).astype(np.int32)
we, pe, se = f32(V, H), f32(P, H), f32(2, H)
gm, bt = f32(H), f32(H)
mask = np.ones((B, S), np.int32)
mask[1, 4:] = 0
mask[2, :] = 0
mask[0, 5] = 2  # mask_index counts the values equal to 1 only
pid = rng.integers(0, P, (B, S)).astype(np.int32)
base = [("ids", ids), ("seg", seg), ("we", we), ("pe", pe), ("se", se), ("g", gm), ("bt", bt)]
vs_ort("eln_mask", "EmbedLayerNormalization", base + [("mask", mask)], ["y", "mi", "sum"], tol=2e-5)
vs_ort("eln_nomask", "EmbedLayerNormalization", base, ["y", "mi"], {"epsilon": 1e-5}, tol=2e-5)
vs_ort("eln_noseg", "EmbedLayerNormalization", [("ids", ids), ("seg", None), ("we", we), ("pe", pe), ("se", None),
                                                 ("g", gm), ("bt", bt), ("mask", mask)], ["y", "mi"], tol=2e-5)
vs_ort("eln_pid", "EmbedLayerNormalization", base + [("mask", mask), ("pid", pid)], ["y", "mi", "sum"], tol=2e-5)
vs_ort("eln_pid1", "EmbedLayerNormalization", base + [("mask", None), ("pid", pid[:1])], ["y", "", "sum"], tol=2e-5)


# ---- 5. Attention -----------------------------------------------------------------------------------------
def attention(name, B, S, Hin, N, mask=None, past_len=0, ab=None, attrs=None, hs=None, bias=True, present=False):
    hs = hs or [N * 8] * 3
    x, w = f32(B, S, Hin), f32(Hin, sum(hs)) * 0.3
    ins = [("x", x), ("w", w), ("b", f32(sum(hs)) if bias else None), ("m", mask),
           ("past", f32(2, B, N, past_len, hs[0] // N) if past_len else None), ("ab", ab)]
    while ins[-1][1] is None:
        ins.pop()
    a = {"num_heads": N, **(attrs or {})}
    if hs[0] != hs[2] or hs[1] != hs[0]:
        a["qkv_hidden_sizes"] = hs
    vs_ort(name, "Attention", ins, ["y", "present"] if present or past_len else ["y"], a, tol=2e-4)


B, S, N = 3, 5, 2
attention("att_plain", B, S, 16, N)
attention("att_nobias", B, S, 16, N, bias=False)
attention("att_len", B, S, 16, N, mask=np.array([5, 2, 0], np.int32))
attention("att_end_start", B, S, 16, N, mask=np.array([5, 4, 3, 0, 1, 3], np.int32))
attention("att_3b2", B, S, 16, N, mask=np.array([5, 2, 1, 0, 5, 7, 10, 0, 5, 7, 10], np.int32))
raw = np.ones((B, S), np.int32)
raw[1, 3:] = 0
raw[2, :] = 0
raw[0, 0] = 0
attention("att_raw2d", B, S, 16, N, mask=raw)
attention("att_raw2d_filter", B, S, 16, N, mask=raw, attrs={"mask_filter_value": -1e9})
m3 = rng.integers(0, 2, (B, S, S)).astype(np.int32)
m3[0, 1, :] = 0
attention("att_3d", B, S, 16, N, mask=m3)
attention("att_causal", B, S, 16, N, attrs={"unidirectional": 1})
attention("att_causal_raw", B, S, 16, N, mask=raw, attrs={"unidirectional": 1})
attention("att_past", B, S, 16, N, past_len=4, attrs={"unidirectional": 1}, mask=np.ones((B, S + 4), np.int32))
attention("att_past_decode", B, 1, 16, N, past_len=6, attrs={"unidirectional": 1})
attention("att_present", B, S, 16, N, present=True)
attention("att_bias_bn", B, S, 16, N, ab=f32(B, N, S, S))
attention("att_bias_11", B, S, 16, N, ab=f32(1, 1, S, S), mask=np.array([3, 5, 1], np.int32))
attention("att_scale", B, S, 16, N, attrs={"scale": 0.05})
attention("att_qkv_sizes", B, S, 16, N, hs=[16, 16, 24])
attention("att_4heads_wide", 2, 9, 24, 4, hs=[32, 32, 32], mask=np.array([9, 4], np.int32))


# ---- 6. MultiHeadAttention --------------------------------------------------------------------------------
def mha(name, q, k=None, v=None, bias=None, mask=None, ab=None, pk=None, pv=None, attrs=None, outs=("y",),
        ref=None):
    ins = [("q", q), ("k", k), ("v", v), ("bias", bias), ("m", mask), ("ab", ab), ("pk", pk), ("pv", pv)]
    while ins[-1][1] is None:
        ins.pop()
    a = {"num_heads": N, **(attrs or {})}
    rm, rf = None, None
    if ref is not None:  # ONNX Runtime on equivalent unpacked inputs
        rins = [("q", ref[0]), ("k", ref[1]), ("v", ref[2])] + ins[3:]
        rm = node_model("MultiHeadAttention", rins, list(outs), a)
        rf = {n: x for n, x in rins if x is not None}
    vs_ort(name, "MultiHeadAttention", ins, list(outs), a, tol=2e-4, ref_model=rm, ref_feeds=rf)


B, S, L, N, D = 2, 4, 6, 2, 8
q, k, v = f32(B, S, N * D), f32(B, L, N * D), f32(B, L, N * D)
mha("mha_plain", q, k, v)
mha("mha_bias", q, k, v, bias=f32(3 * N * D))
mha("mha_dv", q, k, f32(B, L, N * 5), bias=f32(2 * N * D + N * 5))
mha("mha_bnsh", q, f32(B, N, L, D), f32(B, N, L, D), bias=f32(3 * N * D))
mha("mha_len", q, k, v, mask=np.array([6, 0], np.int32))
mha("mha_3b2", q, k, v, mask=np.array([3, 6, 0, 2, 4, 0, 1, 5], np.int32))
km = np.ones((B, L), np.int32)
km[1, 2:] = 0
mha("mha_2d", q, k, v, mask=km, attrs={"mask_filter_value": -3e4})
mha("mha_2d_zero", q, k, v, mask=np.zeros((B, L), np.int32))
mha("mha_3d", q, k, v, mask=rng.integers(0, 2, (B, S, L)).astype(np.int32))
mha("mha_ab", q, k, v, ab=f32(B, 1, S, L), attrs={"scale": 0.2})
mha("mha_causal_self", q, f32(B, S, N * D), f32(B, S, N * D), attrs={"unidirectional": 1})
pk_, pv_ = f32(B, N, 3, D), f32(B, N, 3, D)
mha("mha_past", q, f32(B, S, N * D), f32(B, S, N * D), bias=f32(3 * N * D), pk=pk_, pv=pv_,
    attrs={"unidirectional": 1}, outs=("y", "pk_out", "pv_out"))
mha("mha_past_mask", q, f32(B, S, N * D), f32(B, S, N * D), mask=np.array([[1] * 7, [1] * 5 + [0] * 2], np.int32),
    pk=pk_, pv=pv_, outs=("y", "pk_out", "pv_out"))
mha("mha_qk", q, k, v, mask=km, ab=f32(1, N, S, L), outs=("y", "", "", "qk"))
qkv = f32(B, S, N, 3, D)
mha("mha_packed_qkv", qkv, ref=(qkv[:, :, :, 0].reshape(B, S, N * D), qkv[:, :, :, 1].reshape(B, S, N * D),
                                 qkv[:, :, :, 2].reshape(B, S, N * D)), mask=np.array([4, 2], np.int32))
kv = f32(B, L, N, 2, D)
mha("mha_packed_kv", q, kv, ref=(q, kv[:, :, :, 0].reshape(B, L, N * D), kv[:, :, :, 1].reshape(B, L, N * D)),
    attrs={"unidirectional": 0})


# ---- 7. refused -------------------------------------------------------------------------------------------
def refused(name, m, feeds, words):
    count[0] += 1
    d = os.path.join(WORK, name)
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, "model.onnx")
    onnx.save(m, p)
    r = alma_run(ALMA, p, "EAGER", feeds, os.path.join(d, "out"), check=False)
    msg = r.stderr + r.stdout
    if r.returncode == 0 or not all(w in msg for w in words) or r.returncode < 0:
        fail(f"{name}: exit {r.returncode}, message {msg.strip()[:300]!r} (expected a failure naming {words})")


x, w, bb = f32(2, 3, 8), f32(8, 24), f32(24)
m4 = np.ones((2, 1, 3, 3), np.int32)
refused("att_4d_mask", node_model("Attention", [("x", x), ("w", w), ("b", bb), ("m", m4)], ["y"], {"num_heads": 2}),
        {"x": x, "w": w, "b": bb, "m": m4}, ["Attention", "4-D"])
refused("att_rotary", node_model("Attention", [("x", x), ("w", w), ("b", bb)], ["y"], {"num_heads": 2, "do_rotary": 1}),
        {"x": x, "w": w, "b": bb}, ["Attention", "do_rotary"])
refused("att_heads", node_model("Attention", [("x", x), ("w", w), ("b", bb)], ["y"], {"num_heads": 3}),
        {"x": x, "w": w, "b": bb}, ["Attention", "num_heads"])
refused("fmm_shape", node_model("FusedMatMul", [("a", f32(3, 4)), ("b", f32(5, 6))], ["y"], {}),
        {"a": f32(3, 4), "b": f32(5, 6)}, ["FusedMatMul", "multiply"])
ids_bad = np.array([[0, 60]], np.int32)
refused("eln_range", node_model("EmbedLayerNormalization", [("ids", ids_bad), ("seg", None), ("we", we), ("pe", pe),
                                                             ("se", None), ("g", gm), ("bt", bt)], ["y"], {}),
        {"ids": ids_bad, "we": we, "pe": pe, "g": gm, "bt": bt}, ["EmbedLayerNormalization", "60"])


# ---- 8. the threaded paths: FOLD+DNNL and FOLD+BLAS with 2 threads against EAGER and ONNX Runtime ---------
PAR_CONVS = available(ALMA, ("FOLD+DNNL", "FOLD+BLAS"))


def threaded(name, op, inputs, outputs, attrs=None, tol=1e-4, ref=True, exact=True):
    m = node_model(op, inputs, outputs, attrs or {})
    feeds = {n: a for n, a in inputs if a is not None}
    try:
        eager = alma_outputs(m, feeds, name, "EAGER", "--threads", "2")
    except RuntimeError as e:
        return fail(f"{name}: {e}")
    refs = ort_run(m, feeds) if ref else None
    if ref:
        for o, g, r in zip([o for o in outputs if o], eager, refs):
            close(f"{name}:{o}:EAGER", g, r, tol)
    for conv in PAR_CONVS:
        try:
            got = alma_outputs(m, feeds, name, conv, "--threads", "2")
        except RuntimeError as e:
            fail(f"{name} {conv}: {e}")
            continue
        for k, (o, g, e) in enumerate(zip([o for o in outputs if o], got, eager)):
            if not exact:
                close(f"{name}:{o}:{conv} vs EAGER", g, e, 1e-6)
                if ref:
                    close(f"{name}:{o}:{conv} vs ONNX Runtime", g, refs[k], tol)
                continue
            count[0] += 1
            if g.shape != e.shape or not np.array_equal(g, e):
                d = np.max(np.abs(g.astype(np.float64) - e)) if g.shape == e.shape else "shape"
                fail(f"{name}:{o} {conv} --threads 2 differs from EAGER (max abs diff {d})")


if PAR_CONVS:
    # BERT-base-like slices: 3 x 40 rows of 1536 (45 activation blocks of 4096 elements)
    xa, ba = f32(3, 40, 1536) * 2, f32(1536)
    threaded("par_bias_gelu", "BiasGelu", [("x", xa), ("b", ba)], ["y"], exact=False)
    threaded("par_fast_gelu", "FastGelu", [("x", xa), ("b", ba)], ["y"], exact=False)
    threaded("par_gelu", "Gelu", [("x", xa)], ["y"], exact=False)
    threaded("par_quick_gelu", "QuickGelu", [("x", xa)], ["y"], {"alpha": 1.5}, exact=False)
    # every float from -12 to 12 in steps of 2^-10 (a bias of 7 columns: segments of 7, the scalar tail)
    # against the exact functions in float64: within 2e-7 * (1 + |y|) and 4e-6 relative where |y| > 1e-6
    # (measured: 1.7e-6 in the GCC Release build, 2.0e-6 in clang's sanitizer build, at x near -4 where
    # exp(-x^2 / 2) inherits the rounding of x^2)
    from math import erf as _erf, tanh as _tanh, exp as _exp  # noqa: E402
    xg = (np.arange(-12 * 1024, 12 * 1024 + 1) / 1024.0).astype(np.float32).reshape(-1, 7)
    bg = np.zeros(7, np.float32)
    exact_f = {"BiasGelu": lambda t: 0.5 * t * (1 + _erf(t / np.sqrt(2))),
               "FastGelu": lambda t: 0.5 * t * (1 + _tanh(0.7978845608028654 * (t + 0.044715 * t ** 3))),
               "QuickGelu": lambda t: t / (1 + _exp(-1.702 * t))}
    for opn, fn in exact_f.items():
        mg = node_model(opn, [("x", xg)] + ([("b", bg)] if opn != "QuickGelu" else []), ["y"], {})
        want = np.vectorize(fn)(xg.astype(np.float64))
        for conv in PAR_CONVS:
            gotg = alma_outputs(mg, {"x": xg, "b": bg} if opn != "QuickGelu" else {"x": xg}, "gelu_row_" + opn, conv,
                                "--threads", "2")[0].astype(np.float64)
            close(f"gelu_row {opn} {conv}", gotg, want, 2e-7)
            big = np.abs(want) > 1e-6
            count[0] += 1
            rel = np.max(np.abs(gotg - want)[big] / np.abs(want)[big])
            if rel > 4e-6:
                fail(f"gelu_row {opn} {conv}: relative error {rel:.3g} where |y| > 1e-6")
    threaded("par_bias_add", "BiasAdd", [("x", xa), ("b", ba), ("s", f32(3, 40, 1536))], ["y"], ref=False)
    # 120 rows (> 1 block of 16), every output
    xs, ss, gs, bs, cs = f32(3, 40, 96), f32(3, 40, 96), f32(96), f32(96), f32(96)
    threaded("par_skip_ln", "SkipLayerNormalization", [("x", xs), ("s", ss), ("g", gs), ("b", bs), ("c", cs)],
             ["y", "mean", "inv", "sum"], {"epsilon": 1e-5}, tol=2e-5, ref=False)
    threaded("par_skip_ln_y", "SkipLayerNormalization", [("x", xs), ("s", ss), ("g", gs), ("b", bs), ("c", cs)],
             ["y", "", "", "sum"], {"epsilon": 1e-5}, tol=2e-5)
    threaded("par_skip_sln", "SkipSimplifiedLayerNormalization", [("x", xs), ("s", ss[0]), ("g", gs)], ["y"],
             {"epsilon": 1e-5}, tol=2e-5)
    # Attention: 2 x 4 (batch, head) items, a projection of 3 * 96 = 288 columns (4 blocks, the last of
    # 96), a padding mask; then a Q/K/V size split that leaves no full 64-column block for V alone
    B, S, Hin, N = 2, 33, 48, 4
    xq = f32(B, S, Hin)
    lens = np.array([33, 20], np.int32)
    threaded("par_att", "Attention", [("x", xq), ("w", f32(Hin, 288) * 0.3), ("b", f32(288)), ("m", lens)], ["y"],
             {"num_heads": N}, tol=2e-4)
    threaded("par_att_qkv_sizes", "Attention", [("x", xq), ("w", f32(Hin, 200) * 0.3), ("b", f32(200))], ["y"],
             {"num_heads": N, "qkv_hidden_sizes": [64, 64, 72]}, tol=2e-4)
    threaded("par_att_causal_present", "Attention", [("x", xq), ("w", f32(Hin, 288) * 0.3), ("b", f32(288))],
             ["y", "present"], {"num_heads": N, "unidirectional": 1}, tol=2e-4)
    raw2 = np.ones((B, S), np.int32)
    raw2[1, 25:] = 0
    threaded("par_att_raw_bias", "Attention", [("x", xq), ("w", f32(Hin, 288) * 0.3), ("b", f32(288)), ("m", raw2),
                                               ("past", None), ("ab", f32(1, N, S, S))], ["y"], {"num_heads": N},
             tol=2e-4)
    # one row (B * S < 4): the projection's few-rows path, 2 column blocks
    threaded("par_att_one_row", "Attention", [("x", f32(1, 1, Hin)), ("w", f32(Hin, 192) * 0.3), ("b", f32(192))],
             ["y"], {"num_heads": N}, tol=2e-4)
    qm, km_, vm = f32(B, S, N * 16), f32(B, 21, N * 16), f32(B, 21, N * 16)
    threaded("par_mha", "MultiHeadAttention", [("q", qm), ("k", km_), ("v", vm), ("bias", f32(3 * N * 16)),
                                               ("m", np.array([21, 9], np.int32))], ["y"], {"num_heads": N}, tol=2e-4)
    threaded("par_mha_qk", "MultiHeadAttention", [("q", qm), ("k", km_), ("v", vm), ("bias", None), ("m", None),
                                                  ("ab", f32(B, N, S, 21))], ["y", "", "", "qk"], {"num_heads": N},
             tol=2e-4)
else:
    print("section 8 skipped: this build has neither FOLD+DNNL nor FOLD+BLAS")

print(f"{count[0]} checks, {len(failures)} failures")
sys.exit(1 if failures else 0)
