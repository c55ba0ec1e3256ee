"""ONNX Runtime's transformer LLM contrib ops (src/ops/contrib_llm.c) through alma against ONNX Runtime
1.32 and numpy references written from the contrib schemas.

usage: check_llm.py ALMA WORKDIR   (python with onnx, numpy and onnxruntime)

1. SimplifiedLayerNormalization (ONNX domain v1): axis, epsilon, inv_std_var output, float16.
2. SkipSimplifiedLayerNormalization / SkipLayerNormalization: bias, beta, skip broadcast over the batch,
   2-D input, input_skip_bias_sum and mean/inv_std_var outputs, float16.
3. RotaryEmbedding (com.microsoft): 3-D and 4-D input, position_ids [1] and [B, S], interleaved,
   rotary_embedding_dim < head size.
4. GroupQueryAttention: separate and packed QKV, prompt and decode with past (buffer longer than the
   past), right-padded batch rows in decode, do_rotary (interleaved, partial), local_window_size,
   softcap, scale, smooth_softmax, head_sink, attention_bias, qk_output 1 and 2, position_ids, float16.
   ORT's outputs are compared only where the schema defines them (present rows below each row's
   total length, output rows of valid tokens).
5. A small decoder layer (RMSNorm, GQA with rotary, SkipSimplifiedLayerNorm, MatMuls) through EAGER
   and FOLD+FUSE+DNNL against ONNX Runtime, prompt then one decode step fed with the present KV.
6. Malformed nodes fail at load with a message naming the node.
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
rng = np.random.default_rng(11)
failures = []
count = [0]
HAVE_DNNL = bool(available(ALMA, ("FOLD+FUSE+DNNL",)))
GQA_CONVS = ("EAGER",) + tuple(available(ALMA, ("FOLD+BLAS", "FOLD+FUSE+DNNL")))
F32, F16 = TP.FLOAT, TP.FLOAT16
NP = {TP.FLOAT: np.float32, TP.FLOAT16: np.float16, TP.INT32: np.int32, TP.INT64: np.int64}


def fail(msg):
    failures.append(msg)
    print("FAIL", msg)


def model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m


def vi(name, et, shape):
    return helper.make_tensor_value_info(name, et, shape)


def ort_run(m, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def alma_outputs(m, feeds, name, conv="EAGER"):
    d = os.path.join(WORK, name)
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, "model.onnx")
    onnx.save(m, p)
    out = os.path.join(d, "out-" + conv.replace("+", "_"))
    # the BLAS and DNNL runtimes run GroupQueryAttention's (batch, KV head) pairs on their threads: 2
    alma_run(ALMA, p, conv, feeds, out, "--threads", "1" if conv == "EAGER" else "2")
    return read_outputs(out, [o.name for o in m.graph.output])


def close(name, got, ref, tol, mask=None):
    count[0] += 1
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    if got.shape != ref.shape:
        fail(f"{name}: shape {got.shape} vs {ref.shape}")
        return
    if mask is not None:
        got, ref = got[mask], ref[mask]
    err = np.max(np.abs(got - ref) / (1 + np.abs(ref))) if ref.size else 0.0
    if not err <= tol:
        fail(f"{name}: max rel err {err:.3g} > {tol}")


def check(name, m, feeds, numpy_ref=None, tol=2e-5, masks=None, convs=("EAGER",), ort_ok=True, same_as_eager=False):
    """alma (each conversion) against ORT (unless ort_ok is False: numpy_ref only) and, when given,
    against numpy_ref outputs."""
    try:
        ref = ort_run(m, feeds) if ort_ok else None
    except Exception as e:  # noqa: BLE001
        fail(f"{name}: ONNX Runtime refused the test model: {e}")
        return
    eager = None
    for conv in convs:
        try:
            got = alma_outputs(m, feeds, name, conv)
        except Exception as e:  # noqa: BLE001
            fail(f"{name} [{conv}]: {e}")
            continue
        if conv == "EAGER":
            eager = got
        elif same_as_eager and eager is not None:  # the same kernel, its items on other threads
            for i, o in enumerate(m.graph.output):
                if not np.array_equal(got[i], eager[i], equal_nan=True):
                    fail(f"{name} [{conv}] {o.name}: not identical to EAGER's")
        for i, o in enumerate(m.graph.output):
            mk = masks[i] if masks else None
            if ref is not None:
                close(f"{name} [{conv}] {o.name} vs ORT", got[i], ref[i], tol, mk)
            if numpy_ref is not None and numpy_ref[i] is not None:
                close(f"{name} [{conv}] {o.name} vs numpy", got[i], numpy_ref[i], tol, mk)


def rnd(*shape, dt=np.float32, s=1.0):
    return (rng.standard_normal(shape) * s).astype(dt)


# ---- 1, 2: normalizations ---------------------------------------------------------------------

def np_rms(x, g, eps, axis=-1):
    x64 = x.astype(np.float64)
    ax = tuple(range(axis % x.ndim, x.ndim))
    inv = 1.0 / np.sqrt(np.mean(x64 * x64, axis=ax, keepdims=True) + eps)
    return x64 * inv * g.astype(np.float64).reshape(x.shape[axis % x.ndim:]), inv


def np_ln(x, g, b, eps):
    x64 = x.astype(np.float64)
    mu = x64.mean(-1, keepdims=True)
    inv = 1.0 / np.sqrt(((x64 - mu) ** 2).mean(-1, keepdims=True) + eps)
    return (x64 - mu) * inv * g + (0 if b is None else b), mu, inv


for et, tol in ((F32, 2e-5), (F16, 2e-3)):
    dt = NP[et]
    for shape, axis in (((2, 5, 64), -1), ((3, 4, 8, 16), 2), ((7, 33), 1)):
        x = rnd(*shape, dt=dt)
        gsh = shape[axis % len(shape):]
        g = rnd(*gsh, dt=dt)
        node = helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y", "inv"], name="rms", axis=axis,
                                epsilon=1e-4, stash_type=1)
        invshape = [d if i < axis % len(shape) else 1 for i, d in enumerate(shape)]
        m = model([node], [vi("x", et, shape), vi("g", et, gsh)], [vi("y", et, shape), vi("inv", F32, invshape)])
        y, inv = np_rms(x, g, 1e-4, axis)
        check(f"sln_{et}_{len(shape)}d_axis{axis}", m, {"x": x, "g": g}, [y, inv], tol)

for et, tol in ((F32, 2e-5), (F16, 3e-3)):
    dt = NP[et]
    for simplified in (1, 0):
        op = "SkipSimplifiedLayerNormalization" if simplified else "SkipLayerNormalization"
        for xs, ss, use_bias in (((2, 6, 32), (2, 6, 32), 1), ((2, 6, 32), (1, 6, 32), 0), ((2, 6, 32), (6, 32), 1),
                                 ((9, 48), (9, 48), 1)):
            H = xs[-1]
            x, sk, g, b, bias = rnd(*xs, dt=dt), rnd(*ss, dt=dt), rnd(H, dt=dt), rnd(H, dt=dt), rnd(H, dt=dt)
            ins = ["x", "s", "g"] + ([] if simplified else ["b"]) + (["bias"] if use_bias else [])
            feeds = {"x": x, "s": sk, "g": g}
            vis = [vi("x", et, xs), vi("s", et, ss), vi("g", et, [H])]
            if not simplified:
                feeds["b"] = b
                vis.append(vi("b", et, [H]))
            if use_bias:
                feeds["bias"] = bias
                vis.append(vi("bias", et, [H]))
            sum_ = x.astype(np.float64) + sk.astype(np.float64) + (bias.astype(np.float64) if use_bias else 0)
            sum_ = sum_.astype(dt).astype(np.float64)
            if simplified:
                y, _ = np_rms(sum_, g, 1e-5)
            else:
                y, _, _ = np_ln(sum_, g.astype(np.float64), b.astype(np.float64), 1e-5)
            # ORT's CPU kernel leaves mean/inv_std_var unwritten: ask for the sum (output 3) only
            node = helper.make_node(op, ins, ["y", "", "", "sum"], name="skipln", domain="com.microsoft", epsilon=1e-5)
            m = model([node], vis, [vi("y", et, xs), vi("sum", et, xs)])
            check(f"{op}_{et}_{xs}_{ss}_bias{use_bias}", m, feeds, [y, sum_], tol)
        # mean / inv_std_var (alma fills them) against numpy only
        xs = (2, 3, 16)
        x, sk, g, b = rnd(*xs), rnd(*xs), rnd(16), rnd(16)
        ins = ["x", "s", "g"] + ([] if simplified else ["b"])
        node = helper.make_node(op, ins, ["y", "mean", "inv"], name="skipln3", domain="com.microsoft", epsilon=1e-5)
        vis = [vi("x", F32, xs), vi("s", F32, xs), vi("g", F32, [16])] + ([] if simplified else [vi("b", F32, [16])])
        m = model([node], vis, [vi("y", F32, xs), vi("mean", F32, [2, 3, 1]), vi("inv", F32, [2, 3, 1])])
        feeds = {"x": x, "s": sk, "g": g} | ({} if simplified else {"b": b})
        v = x.astype(np.float64) + sk
        if simplified:
            y, inv = np_rms(v, g, 1e-5)
            mu = np.zeros_like(inv)
        else:
            y, mu, inv = np_ln(v, g, b, 1e-5)
        if et == F32:
            got = alma_outputs(m, feeds, f"{op}_stats")
            for nm, a, r in zip(("y", "mean", "inv"), got, (y, mu, inv)):
                close(f"{op} stats {nm} vs numpy", a, r, 2e-5)


# ---- 3: RotaryEmbedding -------------------------------------------------------------------------

def np_rope(x, pos, cos, sin, D, rot, il, bnsh):
    """x as [B, S, N, D] (or BNSH), pos [B, S] -> rotated copy, from the schema's formula."""
    x = x.astype(np.float64)
    if bnsh:
        x = x.transpose(0, 2, 1, 3)
    y = x.copy()
    c, s = cos[pos][:, :, None, :].astype(np.float64), sin[pos][:, :, None, :].astype(np.float64)
    h = rot // 2
    if il:
        a, b = x[..., 0:rot:2], x[..., 1:rot:2]
        y[..., 0:rot:2], y[..., 1:rot:2] = a * c - b * s, b * c + a * s
    else:
        a, b = x[..., :h], x[..., h:rot]
        y[..., :h], y[..., h:rot] = a * c - b * s, b * c + a * s
    return y.transpose(0, 2, 1, 3) if bnsh else y


def caches(maxpos, half, dt=np.float32):
    inv = 1.0 / (10000 ** (np.arange(half) / half))
    f = np.outer(np.arange(maxpos), inv)
    return np.cos(f).astype(dt), np.sin(f).astype(dt)


for et, tol in ((F32, 2e-5), (F16, 2e-3)):
    dt = NP[et]
    for B, S, N, D, rot, il, bnsh, scalar_pos in ((2, 5, 3, 16, 0, 0, 0, 0), (2, 5, 3, 16, 0, 1, 0, 1),
                                                  (1, 4, 2, 32, 16, 0, 0, 0), (2, 3, 4, 8, 0, 0, 1, 0),
                                                  (2, 3, 4, 8, 0, 1, 1, 1), (1, 6, 2, 16, 8, 1, 0, 1)):
        r = rot or D
        cos, sin = caches(40, r // 2, dt)
        x = rnd(B, N, S, D, dt=dt) if bnsh else rnd(B, S, N * D, dt=dt)
        pos = np.array([7], np.int64) if scalar_pos else rng.integers(0, 40, (B, S)).astype(np.int64)
        pos2 = (7 + np.arange(S))[None, :].repeat(B, 0) if scalar_pos else pos
        attrs = {"interleaved": il}
        if rot:
            attrs.update(rotary_embedding_dim=rot, num_heads=N)
        node = helper.make_node("RotaryEmbedding", ["x", "p", "c", "s"], ["y"], name="rope", domain="com.microsoft",
                                **attrs)
        xs = list(x.shape)
        m = model([node], [vi("x", et, xs), vi("p", TP.INT64, list(pos.shape)), vi("c", et, list(cos.shape)),
                           vi("s", et, list(sin.shape))], [vi("y", et, xs)])
        xr = x.reshape(B, S, N, D) if not bnsh else x
        ref = np_rope(xr, pos2, cos, sin, D, r, il, bnsh).reshape(x.shape)
        check(f"rope_{et}_B{B}S{S}N{N}D{D}rot{rot}il{il}bnsh{bnsh}pos{scalar_pos}", m,
              {"x": x, "p": pos, "c": cos, "s": sin}, [ref], tol)


# ---- 4: GroupQueryAttention ---------------------------------------------------------------------

def np_gqa(q, k, v, pk, pv, seqlens, T, N, Nkv, D, scale=None, rotary=None, window=-1, softcap=0.0, bias=None,
           sink=None, smooth=False):
    """Dense reference from the schema: q [B,S,N*D], k,v [B,S,Nkv*D] (already unpacked), past BNSH."""
    B, S = q.shape[:2]
    first = S == T
    scale = scale or 1 / np.sqrt(D)
    q = q.astype(np.float64).reshape(B, S, N, D).transpose(0, 2, 1, 3)
    k = k.astype(np.float64).reshape(B, S, Nkv, D).transpose(0, 2, 1, 3)
    v = v.astype(np.float64).reshape(B, S, Nkv, D).transpose(0, 2, 1, 3)
    P = pk.shape[2] if pk is not None else 0
    L = max(P, T)
    out = np.zeros((B, S, N, D))
    pres_k = np.zeros((B, Nkv, L, D))
    pres_v = np.zeros((B, Nkv, L, D))
    for b in range(B):
        tot = seqlens[b] + 1
        past = 0 if first else tot - S
        pos = np.arange(S) + past if rotary is None or rotary[3] is None else rotary[3][b]
        qb, kb = q[b], k[b]
        if rotary is not None:
            cos, sin, il = rotary[:3]
            r = cos.shape[1] * 2
            qb = np_rope(qb.transpose(1, 0, 2)[None], pos[None], cos, sin, D, r, il, 0)[0].transpose(1, 0, 2)
            kb = np_rope(kb.transpose(1, 0, 2)[None], pos[None], cos, sin, D, r, il, 0)[0].transpose(1, 0, 2)
        if pk is not None:
            pres_k[b, :, :past] = pk[b, :, :past]
            pres_v[b, :, :past] = pv[b, :, :past]
        n_new = min(S, L - past)
        pres_k[b, :, past:past + n_new] = kb[:, :n_new]
        pres_v[b, :, past:past + n_new] = v[b][:, :n_new]
        for h in range(N):
            kh = h // (N // Nkv)
            for s in range(S):
                end = min(past + s + 1, tot)
                start = end - window if window > 0 and end > window else 0
                sc = pres_k[b, kh, start:end] @ qb[h, s] * scale
                if softcap > 0:
                    sc = softcap * np.tanh(sc / softcap)
                if bias is not None:
                    sc = sc + bias[b % bias.shape[0], h % bias.shape[1], s, start:end]
                mx = sc.max()
                snk = None
                if sink is not None or smooth:
                    snk = sink[h] if sink is not None else 0.0
                    mx = max(mx, snk)
                e = np.exp(sc - mx)
                den = e.sum() + (np.exp(snk - mx) if snk is not None else 0)
                out[b, s, h] = (e / den) @ pres_v[b, kh, start:end]
    return out.reshape(B, S, N * D), pres_k, pres_v


def gqa_case(name, B, S, N, Nkv, D, P=0, past_lens=None, packed=0, rotary=0, il=0, rot_half=None, window=-1,
             softcap=0.0, scale=None, smooth=0, sink=0, bias=0, qk_output=0, pos_ids=0, et=F32, tol=3e-5, ort_ok=True):
    dt = NP[et]
    q, k, v = rnd(B, S, N * D, dt=dt), rnd(B, S, Nkv * D, dt=dt), rnd(B, S, Nkv * D, dt=dt)
    if past_lens is None:  # first prompt: right padding below S
        past_lens = [0] * B
    first = P == 0
    if first:
        seqlens = np.array([S - 1] + [max(0, S - 2 - b) for b in range(1, B)], np.int32)
        T = S
    else:
        seqlens = np.array([pl + S - 1 for pl in past_lens], np.int32)
        T = int(seqlens.max()) + 1
    pk, pv = (rnd(B, Nkv, P, D, dt=dt), rnd(B, Nkv, P, D, dt=dt)) if P else (None, None)
    feeds = {}
    ins = []
    vis = []

    def add(nm, arr, et_=None):
        ins.append(nm)
        if arr is None:
            return
        feeds[nm] = arr
        vis.append(vi(nm, et_ if et_ is not None else et, list(arr.shape)))

    if packed:
        add("q", np.concatenate([q, k, v], -1))
        add("", None), add("", None)
    else:
        add("q", q), add("k", k), add("v", v)
    if P:
        add("pk", pk), add("pv", pv)
    else:
        add("", None), add("", None)
    add("sl", seqlens, TP.INT32)
    add("T", np.array(T, np.int32), TP.INT32)
    rot_ref = None
    posarr = None
    if rotary:
        half = rot_half or D // 2
        cos, sin = caches(64, half, dt)
        add("cos", cos), add("sin", sin)
        if pos_ids:
            posarr = rng.integers(0, 64, (B, S)).astype(np.int64)
            add("pos", posarr, TP.INT64)
        rot_ref = (cos, sin, il, posarr)
    extra = []
    if bias:
        extra.append(("bias", rnd(B if bias == 2 else 1, N if bias == 2 else 1, S, T, dt=dt)))
    if sink:
        extra.append(("sink", rnd(N, dt=dt)))
    if extra:
        while len(ins) < 10:
            add("", None)
        if not bias:
            add("", None)
        for nm, arr in extra:
            add(nm, arr)
    while ins and ins[-1] == "":
        ins.pop()
    attrs = dict(num_heads=N, kv_num_heads=Nkv, do_rotary=rotary, rotary_interleaved=il, local_window_size=window,
                 softcap=softcap, smooth_softmax=smooth, qk_output=qk_output)
    if scale:
        attrs["scale"] = scale
    outs = ["o", "pk_out", "pv_out"] + (["qk"] if qk_output else [])
    L = max(P, T)
    ovis = [vi("o", et, [B, S, N * D]), vi("pk_out", et, [B, Nkv, L, D]), vi("pv_out", et, [B, Nkv, L, D])]
    if qk_output:
        ovis.append(vi("qk", et, [B, N, S, T]))
    node = helper.make_node("GroupQueryAttention", ins, outs, name="gqa", domain="com.microsoft", **attrs)
    m = model([node], vis, ovis)
    ref = np_gqa(q, k, v, pk, pv, seqlens, T, N, Nkv, D, scale, rot_ref, window, softcap,
                 dict(extra).get("bias"), dict(extra).get("sink"), smooth)
    # defined parts: output rows of valid tokens, present rows below each row's total length
    omask = np.zeros((B, S, N * D), bool)
    pmask = np.zeros((B, Nkv, L, D), bool)
    for b in range(B):
        tot = seqlens[b] + 1
        omask[b, :tot if first else S] = True
        pmask[b, :, :tot] = True
    masks = [omask, pmask, pmask] + ([None] if qk_output else [])
    numpy_ref = list(ref) + ([None] if qk_output else [])
    if qk_output:  # ORT-only; its rows for padding tokens are unspecified
        masks[3] = np.zeros((B, N, S, T), bool)
        for b in range(B):
            masks[3][b, :, :(seqlens[b] + 1) if first else S, :seqlens[b] + 1] = True
    check(name, m, feeds, numpy_ref, tol, masks, convs=GQA_CONVS, ort_ok=ort_ok, same_as_eager=True)


gqa_case("gqa_prompt", 2, 5, 4, 2, 8)
gqa_case("gqa_prompt_packed", 2, 5, 4, 2, 8, packed=1)
gqa_case("gqa_prompt_mha", 1, 6, 3, 3, 16)
gqa_case("gqa_decode", 2, 1, 4, 2, 8, P=7, past_lens=[7, 4])
gqa_case("gqa_decode_packed_rot", 2, 1, 4, 1, 16, P=9, past_lens=[5, 9], packed=1, rotary=1)
gqa_case("gqa_chunk", 1, 3, 4, 2, 8, P=4, past_lens=[4])
gqa_case("gqa_chunk_static", 1, 3, 4, 2, 8, P=12, past_lens=[4])
gqa_case("gqa_rotary", 2, 5, 4, 2, 16, rotary=1)
gqa_case("gqa_rotary_il", 2, 5, 4, 2, 16, rotary=1, il=1)
gqa_case("gqa_rotary_partial", 1, 4, 2, 2, 32, rotary=1, rot_half=8)
gqa_case("gqa_rotary_pos", 2, 1, 4, 2, 16, P=5, past_lens=[5, 3], rotary=1, pos_ids=1)
gqa_case("gqa_window", 1, 9, 2, 1, 8, window=3)
gqa_case("gqa_window_decode", 2, 1, 2, 1, 8, P=10, past_lens=[10, 6], window=4)
gqa_case("gqa_softcap_scale", 2, 4, 4, 2, 8, softcap=2.5, scale=0.7)
gqa_case("gqa_smooth", 2, 4, 4, 2, 8, smooth=1)
gqa_case("gqa_sink", 2, 1, 4, 2, 8, P=4, past_lens=[4, 2], sink=1)
gqa_case("gqa_bias", 2, 4, 4, 2, 8, bias=1)
gqa_case("gqa_bias_full", 2, 1, 4, 2, 8, P=5, past_lens=[5, 3], bias=2)
gqa_case("gqa_qk1", 2, 4, 4, 2, 8, qk_output=1)
gqa_case("gqa_qk2", 2, 1, 4, 2, 8, P=5, past_lens=[5, 3], qk_output=2)
gqa_case("gqa_f16", 2, 5, 4, 2, 16, rotary=1, et=F16, tol=4e-3)
gqa_case("gqa_f16_decode", 1, 1, 4, 2, 16, P=6, past_lens=[6], rotary=1, et=F16, tol=4e-3)
# the vectorised kernel (tiles of 4 query rows sharing a KV head; lanes of 8 over the head with a
# scalar tail): head sizes not multiples of 8, groups that are not multiples of 4 (a tile spans
# tokens with different causal ranges), one KV head, a row with no past beside one with a long one,
# windows and sinks across tile rows, packed QKV with rotary
gqa_case("gqa_h24_grp5_kv1_prompt", 2, 7, 5, 1, 24)
gqa_case("gqa_h40_decode_past0_and_100", 2, 1, 8, 2, 40, P=100, past_lens=[0, 100])
gqa_case("gqa_h16_grp3_chunk_window", 1, 6, 6, 2, 16, P=9, past_lens=[9], window=5)
gqa_case("gqa_h32_packed_rot_decode_long", 1, 1, 6, 2, 32, P=60, past_lens=[50], packed=1, rotary=1)
# 16 tokens or more: the GEMM form (blocks of 64 tokens per query head): two blocks and right padding,
# a window across blocks, a chunk after a past, softcap with a sink, rotary, qk_output
gqa_case("gqa_gemm_prompt_s70_padded", 2, 70, 4, 2, 16)
gqa_case("gqa_gemm_window_s80", 1, 80, 4, 1, 32, window=37, qk_output=1)
gqa_case("gqa_gemm_chunk_s20_past40", 1, 20, 6, 3, 16, P=40, past_lens=[40], rotary=1)
gqa_case("gqa_gemm_softcap_sink_s33", 1, 33, 4, 2, 8, softcap=3.0, sink=1, scale=0.3)
# ONNX Runtime 1.32 refuses head sizes not multiples of 8 (16 with rotary); alma runs them: numpy only
gqa_case("gqa_h9_grp7_sink_window_decode", 2, 1, 7, 1, 9, P=30, past_lens=[30, 12], sink=1, window=8, ort_ok=False)
gqa_case("gqa_h12_grp5_kv1_prompt", 2, 7, 5, 1, 12, ort_ok=False)
gqa_case("gqa_h20_rot_decode", 1, 1, 4, 2, 20, P=12, past_lens=[12], rotary=1, ort_ok=False)
gqa_case("gqa_h64_grp4_prompt_bias_qk2", 1, 19, 8, 2, 64, bias=2, qk_output=2)
gqa_case("gqa_h128_decode_past200", 1, 1, 8, 2, 128, P=255, past_lens=[200])


# ---- 5: a small decoder layer, prompt then one decode step --------------------------------------

def layer_model(B, S, P, T, H=32, N=4, Nkv=2, D=16):
    wq = helper.make_tensor("wq", F32, [H, (N + 2 * Nkv) * D], rnd(H, (N + 2 * Nkv) * D, s=0.2).ravel())
    wo = helper.make_tensor("wo", F32, [N * D, H], rnd(N * D, H, s=0.2).ravel())
    g1 = helper.make_tensor("g1", F32, [H], rnd(H).ravel())
    g2 = helper.make_tensor("g2", F32, [H], rnd(H).ravel())
    cos, sin = caches(32, D // 2)
    cc = helper.make_tensor("cos", F32, list(cos.shape), cos.ravel())
    ss = helper.make_tensor("sin", F32, list(sin.shape), sin.ravel())
    nodes = [
        helper.make_node("SimplifiedLayerNormalization", ["x", "g1"], ["xn"], name="ln1", epsilon=1e-5, axis=-1),
        helper.make_node("MatMul", ["xn", "wq"], ["qkv"], name="qkv_proj"),
        helper.make_node("GroupQueryAttention", ["qkv", "", "", "past_k", "past_v", "seqlens_k", "total_len", "cos",
                                                 "sin"], ["attn", "present_k", "present_v"], name="gqa",
                         domain="com.microsoft", num_heads=N, kv_num_heads=Nkv, do_rotary=1),
        helper.make_node("MatMul", ["attn", "wo"], ["ao"], name="o_proj"),
        helper.make_node("SkipSimplifiedLayerNormalization", ["ao", "x", "g2"], ["y", "", "", "resid"], name="ln2",
                         domain="com.microsoft", epsilon=1e-5),
    ]
    ins = [vi("x", F32, ["B", "S", H]), vi("past_k", F32, ["B", Nkv, "P", D]), vi("past_v", F32, ["B", Nkv, "P", D]),
           vi("seqlens_k", TP.INT32, ["B"]), vi("total_len", TP.INT32, [])]
    outs = [vi("y", F32, ["B", "S", H]), vi("resid", F32, ["B", "S", H]), vi("present_k", F32, ["B", Nkv, "T", D]),
            vi("present_v", F32, ["B", Nkv, "T", D])]
    return model(nodes, ins, outs, [wq, wo, g1, g2, cc, ss])


lm = layer_model(1, 5, 0, 5)
convs = ("EAGER", "FOLD+FUSE+DNNL") if HAVE_DNNL else ("EAGER",)
x0 = rnd(1, 5, 32)
feeds0 = {"x": x0, "past_k": np.zeros((1, 2, 0, 16), np.float32), "past_v": np.zeros((1, 2, 0, 16), np.float32),
          "seqlens_k": np.array([4], np.int32), "total_len": np.array(5, np.int32)}
check("layer_prompt", lm, feeds0, None, 3e-5, convs=convs)
pres = ort_run(lm, feeds0)
feeds1 = {"x": rnd(1, 1, 32), "past_k": pres[2], "past_v": pres[3], "seqlens_k": np.array([5], np.int32),
          "total_len": np.array(6, np.int32)}
check("layer_decode", lm, feeds1, None, 3e-5, convs=convs)


# ---- 6: malformed nodes -------------------------------------------------------------------------

def refused(name, m, feeds, want):
    count[0] += 1
    d = os.path.join(WORK, name)
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, "model.onnx")
    onnx.save(m, p)
    r = alma_run(ALMA, p, "EAGER", feeds, os.path.join(d, "out"), check=False)
    msg = r.stdout + r.stderr
    if r.returncode == 0 or "'bad'" not in msg or want not in msg or r.returncode < 0:
        fail(f"{name}: expected a refusal naming node 'bad' and '{want}', got rc {r.returncode}: {msg.strip()[-300:]}")


x = rnd(2, 3, 16)
refused("bad_sln_scale", model([helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"], name="bad")],
                               [vi("x", F32, [2, 3, 16]), vi("g", F32, [8])], [vi("y", F32, [2, 3, 16])]),
        {"x": x, "g": rnd(8)}, "scale of shape")
refused("bad_skip_shape", model([helper.make_node("SkipSimplifiedLayerNormalization", ["x", "s", "g"], ["y"],
                                                  name="bad", domain="com.microsoft")],
                                [vi("x", F32, [2, 3, 16]), vi("s", F32, [2, 4, 16]), vi("g", F32, [16])],
                                [vi("y", F32, [2, 3, 16])]), {"x": x, "s": rnd(2, 4, 16), "g": rnd(16)},
        "skip of shape")
cos, sin = caches(4, 4)
refused("bad_rope_pos", model([helper.make_node("RotaryEmbedding", ["x", "p", "c", "s"], ["y"], name="bad",
                                                domain="com.microsoft")],
                              [vi("x", F32, [1, 2, 8]), vi("p", TP.INT64, [1, 2]), vi("c", F32, [4, 4]),
                               vi("s", F32, [4, 4])], [vi("y", F32, [1, 2, 8])]),
        {"x": rnd(1, 2, 8), "p": np.array([[3, 9]], np.int64), "c": cos, "s": sin}, "outside the caches")
gq = helper.make_node("GroupQueryAttention", ["q", "k", "v", "", "", "sl", "T"], ["o"], name="bad",
                      domain="com.microsoft", num_heads=3, kv_num_heads=2)
refused("bad_gqa_heads", model([gq], [vi("q", F32, [1, 2, 24]), vi("k", F32, [1, 2, 16]), vi("v", F32, [1, 2, 16]),
                                      vi("sl", TP.INT32, [1]), vi("T", TP.INT32, [])], [vi("o", F32, [1, 2, 24])]),
        {"q": rnd(1, 2, 24), "k": rnd(1, 2, 16), "v": rnd(1, 2, 16), "sl": np.array([1], np.int32),
         "T": np.array(2, np.int32)}, "num_heads=3")
gq = helper.make_node("GroupQueryAttention", ["q", "k", "v", "", "", "sl", "T"], ["o"], name="bad",
                      domain="com.microsoft", num_heads=2, kv_num_heads=2)
refused("bad_gqa_seqlens", model([gq], [vi("q", F32, [1, 2, 16]), vi("k", F32, [1, 2, 16]),
                                        vi("v", F32, [1, 2, 16]), vi("sl", TP.INT32, [1]), vi("T", TP.INT32, [])],
                                 [vi("o", F32, [1, 2, 16])]),
        {"q": rnd(1, 2, 16), "k": rnd(1, 2, 16), "v": rnd(1, 2, 16), "sl": np.array([5], np.int32),
         "T": np.array(2, np.int32)}, "seqlens_k[0]")
gq = helper.make_node("GroupQueryAttention", ["q", "k", "v", "", "", "sl", "T"], ["o"], name="bad",
                      domain="com.microsoft", num_heads=2, kv_num_heads=2, k_quant_type="PER_TENSOR")
refused("bad_gqa_quant", model([gq], [vi("q", F32, [1, 2, 16]), vi("k", F32, [1, 2, 16]), vi("v", F32, [1, 2, 16]),
                                      vi("sl", TP.INT32, [1]), vi("T", TP.INT32, [])], [vi("o", F32, [1, 2, 16])]),
        {"q": rnd(1, 2, 16), "k": rnd(1, 2, 16), "v": rnd(1, 2, 16), "sl": np.array([1], np.int32),
         "T": np.array(2, np.int32)}, "quantized KV cache")

print(f"{count[0]} comparisons, {len(failures)} failures")
sys.exit(1 if failures else 0)
