"""FUSE's rewrite of ONNX Attention (opset 23+) into alma.Attention, the DNNL fast path: where it
must fire (float32 3-D or 4-D inputs, grouped-query heads, a KV cache with present outputs, constant
or run-time float and bool masks, masks shorter than the keys (opset 24), fully masked rows, is_causal
with and without past keys, unknown sequence lengths) and where it must not (softcap, the qk output
read, nonpad_kv_seqlen), each run through FUSE+DNNL, FOLD+FUSE+EAGER, FUSE+BLAS and FUSE+XNNPACK and
compared with ONNX's reference implementation.

Then is_causal models whose sequence and past lengths are symbolic (dim_param): prefill and decode,
with and without past keys, bool and float run-time masks, GQA and MHA, 3-D and 4-D, a chunk of
queries after past keys, queries and keys of different lengths; each model run at several actual
lengths through EAGER, FOLD+FUSE+EAGER, FOLD+FUSE+DNNL and FOLD+FUSE+BLAS against ONNX Runtime (or
the reference evaluator without it), checking that FUSE rewrote the node and that DNNL and BLAS ran
it with their causal kernels (`alma run -v`'s placement), not on EAGER.

usage: check_fuse_attention.py ALMA WORKDIR      (python with onnx >= 1.18 and numpy)"""
import os
import re
import sys

import numpy as np

try:
    import onnx
    from onnx import TensorProto as TP, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)
if onnx.defs.onnx_opset_version() < 23:
    print(f"SKIP: onnx {onnx.__version__} has no Attention (opset 23)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from alma_cli import alma_run  # noqa: E402

ALMA, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(11)
CONVS = ["FUSE+DNNL", "FOLD+FUSE+EAGER", "FUSE+BLAS", "FUSE+XNNPACK"]


def case(name, fused, B=2, H=3, Hk=None, Sq=5, Sk=7, D=8, Dv=6, attrs=None, mask=None, mask_input=False,
         past=0, qk_out=False, three_d=False, present=False, dyn=False, opset=23, nonpad=False):
    """One Attention node; dyn: the sequence dims of Q, K, V (and a run-time mask's last two) are
    symbolic, so FUSE cannot see them."""
    Hk = Hk or H
    attrs = dict(attrs or {})
    if three_d:
        shapes = {"Q": [B, Sq, H * D], "K": [B, Sk, Hk * D], "V": [B, Sk, Hk * Dv]}
        attrs.update(q_num_heads=H, kv_num_heads=Hk)
        seq = 1
    else:
        shapes = {"Q": [B, H, Sq, D], "K": [B, Hk, Sk, D], "V": [B, Hk, Sk, Dv]}
        seq = 2
    feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}

    def decl(k, s):
        return [("sq" if k == "Q" else "sk") if dyn and i == seq else d for i, d in enumerate(s)]
    inputs = [helper.make_tensor_value_info(k, TP.FLOAT, decl(k, s)) for k, s in shapes.items()]
    names, inits = ["Q", "K", "V"], []
    if mask is not None:
        names.append("mask")
        if mask_input:
            ms = list(mask.shape)
            if dyn:
                ms = ms[:-2] + ["mq", "mk"]
            inputs.append(helper.make_tensor_value_info("mask", TP.BOOL if mask.dtype == bool else TP.FLOAT, ms))
            feeds["mask"] = mask
        else:
            inits.append(numpy_helper.from_array(mask, "mask"))
    if past:
        names += [""] * (4 - len(names)) + ["pk", "pv"]
        for nm, d in (("pk", D), ("pv", Dv)):
            inputs.append(helper.make_tensor_value_info(nm, TP.FLOAT, [B, Hk, past, d]))
            feeds[nm] = rng.standard_normal([B, Hk, past, d]).astype(np.float32)
    if nonpad:
        names += [""] * (6 - len(names)) + ["nps"]
        inputs.append(helper.make_tensor_value_info("nps", TP.INT64, [B]))
        feeds["nps"] = np.array([Sk - 1] * B, np.int64)
    outs = ["Y"] + (["present_key", "present_value"] if present else ["", ""] if qk_out else []) + \
        (["QK"] if qk_out else [])
    node = helper.make_node("Attention", names, outs, **attrs)
    g = helper.make_graph([node], name, inputs, [helper.make_tensor_value_info(o, TP.FLOAT, None) for o in outs if o],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return name, fused, m, feeds


def fmask(*shape, p=0.3):
    return np.where(rng.random(shape) < p, -np.inf, rng.standard_normal(shape)).astype(np.float32)


CASES = [
    case("plain", 1),
    case("causal", 1, Sq=6, Sk=6, attrs={"is_causal": 1}),
    case("causal_fewer_queries", 1, Sq=3, Sk=7, attrs={"is_causal": 1}),
    case("float_mask_scale", 1, attrs={"scale": 0.3}, mask=fmask(5, 7)),
    case("bool_mask_bcast", 1, mask=np.concatenate([np.ones((2, 1, 5, 1), bool), rng.random((2, 1, 5, 6)) < 0.5], 3)),
    # a query with every key masked: ONNX says zeros, where Softmax alone would give NaN
    case("bool_mask_full_row", 1, mask=np.concatenate([np.zeros((1, 7), bool), np.ones((4, 7), bool)], 0)),
    case("float_mask_full_row_run_time", 1, mask=np.concatenate([np.full((2, 1, 1, 7), -np.inf, np.float32),
                                                                 fmask(2, 1, 4, 7)], 2), mask_input=True),
    case("bool_mask_full_row_run_time", 1, mask=np.concatenate([np.zeros((2, 3, 2, 7), bool),
                                                                rng.random((2, 3, 3, 7)) < 0.7], 2), mask_input=True),
    case("mask_at_run_time", 1, mask=rng.standard_normal((5, 7)).astype(np.float32), mask_input=True),
    case("mask_at_run_time_dynamic", 1, mask=fmask(2, 1, 5, 7), mask_input=True, dyn=True),
    # opset 24: a mask shorter than the keys is padded with -inf (constant: folded; run time: kernel)
    case("short_mask_opset24", 1, mask=fmask(5, 4), opset=24),
    case("short_mask_run_time_opset24", 1, mask=fmask(1, 1, 5, 1, p=0), mask_input=True, opset=24),
    case("gqa", 1, H=4, Hk=2),
    case("gqa_mask_per_head", 1, H=6, Hk=2, mask=fmask(2, 6, 5, 7)),
    case("gqa_run_time_mask_per_head", 1, H=6, Hk=3, mask=fmask(1, 6, 5, 7), mask_input=True),
    case("gqa_run_time_bool_mask_dynamic", 1, H=4, Hk=1, mask=rng.random((2, 1, 5, 7)) < 0.6, mask_input=True,
         dyn=True),
    case("gqa_causal", 1, H=4, Hk=2, Sq=7, Sk=7, attrs={"is_causal": 1}),
    # G query heads per kv head as rows of one product (no mask, or one the same for every row)
    case("gqa_decode_past_causal", 1, H=8, Hk=2, Sq=1, Sk=1, past=9, present=True, attrs={"is_causal": 1}),
    case("gqa_padding_mask_run_time", 1, H=6, Hk=2, mask=rng.random((2, 1, 1, 7)) < 0.7, mask_input=True),
    case("three_d_gqa_decode_padding_mask", 1, three_d=True, H=4, Hk=2, Sq=1, Sk=1, past=6, present=True,
         mask=fmask(2, 1, 1, 7, p=0.5), mask_input=True),
    case("past", 1, past=3),
    case("past_present_causal", 1, Sq=4, Sk=4, past=3, present=True, attrs={"is_causal": 1}),
    case("past_gqa_mask", 1, H=4, Hk=2, past=2, present=True, mask=fmask(2, 1, 5, 9)),
    case("three_d", 1, three_d=True),
    case("three_d_gqa_past_causal", 1, three_d=True, H=6, Hk=2, Sq=3, Sk=3, past=4, present=True,
         attrs={"is_causal": 1, "scale": 0.2}),
    case("three_d_gqa_bool_mask_dynamic", 1, three_d=True, H=4, Hk=2, mask=rng.random((5, 7)) < 0.5,
         mask_input=True, dyn=True),
    # is_causal with unknown lengths or a run-time mask: alma.Attention's causal mode
    case("causal_dynamic", 1, attrs={"is_causal": 1}, dyn=True),
    case("causal_with_run_time_mask", 1, Sq=7, Sk=7, attrs={"is_causal": 1}, mask=fmask(7, 7), mask_input=True),
    case("gqa_per_head_mask_dynamic", 0, H=4, Hk=2, mask=fmask(2, 4, 5, 7), mask_input=True, dyn=True),
    case("softcap", 0, attrs={"softcap": 2.0}),
    case("nonpad_kv_seqlen", 0, opset=24, nonpad=True),
    case("qk_output_read", 0, qk_out=True),
]

failures = []
for name, fused, m, feeds in CASES:
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(m, path)
    want = ReferenceEvaluator(m).run(None, feeds)
    for conv in CONVS:
        d = os.path.join(WORK, name, conv.replace("+", "_"))
        r = alma_run(ALMA, path, conv, feeds, d, "-v", check=False, timeout=120)
        if r.returncode != 0:
            failures.append(f"{name} {conv}: alma failed: {r.stderr.strip()[-300:]}")
            continue
        if "unavailable" in r.stdout + r.stderr:
            continue
        mt = re.search(r"FUSE: .*attention (\d+)", r.stderr + r.stdout)
        if not mt or int(mt.group(1)) != fused:
            failures.append(f"{name} {conv}: expected {'a' if fused else 'no'} fusion, FUSE said "
                            f"{mt.group(0) if mt else 'nothing'}")
        outs = [o for o in m.graph.output]
        for i, o in enumerate(outs):
            got = np.load(os.path.join(d, o.name + ".npy"))
            w = np.asarray(want[i])
            fin = np.isfinite(w)
            same = (got == w) | (np.isnan(got) & np.isnan(w))
            err = float(np.abs(np.where(same, 0, got - w)).max(initial=0)) / max(float(np.abs(w[fin]).max(initial=0)), 1)
            if got.shape != w.shape or not err <= 2e-5:
                failures.append(f"{name} {conv} {o.name}: max error {err:.3g} (shape {got.shape} vs {w.shape})")
    print(f"ok {name}")


# ---- is_causal with symbolic lengths, each model run at several lengths ---------------------------
try:
    import onnxruntime as ort
except ImportError:
    ort = None


def dyn_case(name, B=2, H=4, Hk=2, D=8, Dv=8, three_d=False, q="s", kv="s", past=None, mask=None, lengths=()):
    """One is_causal Attention node; q, kv, past: the query, new key and past lengths (a symbol name or a
    number); mask (a run-time input): None, "bool" [B, 1, q, kv + past], "float" [1, 1, q, kv + past]
    or "float_heads" [1, H, q, kv + past];
    lengths: dicts binding the symbols."""
    attrs = {"is_causal": 1}
    if three_d:
        shapes = {"Q": [B, q, H * D], "K": [B, kv, Hk * D], "V": [B, kv, Hk * Dv]}
        attrs.update(q_num_heads=H, kv_num_heads=Hk)
    else:
        shapes = {"Q": [B, H, q, D], "K": [B, Hk, kv, D], "V": [B, Hk, kv, Dv]}
    inputs = [helper.make_tensor_value_info(k, TP.FLOAT, s) for k, s in shapes.items()]
    names, outs = ["Q", "K", "V"], ["Y"]
    if mask:
        names.append("mask")
        mshape = [B, 1, q, "t"] if mask == "bool" else [1, H if mask == "float_heads" else 1, q, "t"]
        shapes["mask"] = mshape
        inputs.append(helper.make_tensor_value_info("mask", TP.BOOL if mask == "bool" else TP.FLOAT, mshape))
    if past is not None:
        names += [""] * (4 - len(names)) + ["pk", "pv"]
        outs += ["present_key", "present_value"]
        for nm, d in (("pk", D), ("pv", Dv)):
            shapes[nm] = [B, Hk, past, d]
            inputs.append(helper.make_tensor_value_info(nm, TP.FLOAT, shapes[nm]))
    node = helper.make_node("Attention", names, outs, **attrs)
    g = helper.make_graph([node], name, inputs, [helper.make_tensor_value_info(o, TP.FLOAT, None) for o in outs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])
    m.ir_version = 10
    runs = []
    for bind in lengths:
        b = dict(bind)
        b["t"] = (b.get(past, past) if past is not None else 0) + b.get(kv, kv)
        feeds = {}
        for k, sh in shapes.items():
            dims = [b.get(d, d) if isinstance(d, str) else d for d in sh]
            if k == "mask" and mask == "bool":
                x = rng.random(dims) < 0.7
                x[..., 0, :] = False  # a query with every key masked: zeros
            elif k == "mask":
                x = np.where(rng.random(dims) < 0.3, -np.inf, rng.standard_normal(dims)).astype(np.float32)
            else:
                x = rng.standard_normal(dims).astype(np.float32)
            feeds[k] = x
        runs.append((bind, feeds))
    return name, m, runs


DYN_CASES = [
    dyn_case("dyn_mha_4d_prefill", H=3, Hk=3, lengths=[{"s": 1}, {"s": 5}, {"s": 33}]),
    dyn_case("dyn_gqa_3d_prefill", three_d=True, lengths=[{"s": 2}, {"s": 19}]),
    # decoding one token after a cache of any length (is_causal is then a no-op)
    dyn_case("dyn_gqa_4d_decode_past", H=8, Hk=2, q=1, kv=1, past="p", lengths=[{"p": 1}, {"p": 7}, {"p": 40}]),
    dyn_case("dyn_gqa_3d_decode_past", three_d=True, q=1, kv=1, past="p", lengths=[{"p": 3}, {"p": 25}]),
    # prefill and chunked prefill after past keys, both lengths dynamic
    dyn_case("dyn_gqa_3d_chunk_past", three_d=True, H=6, Hk=2, past="p",
             lengths=[{"s": 1, "p": 9}, {"s": 4, "p": 6}, {"s": 17, "p": 30}, {"s": 8, "p": 0}]),
    dyn_case("dyn_mha_4d_chunk_past_bool_mask", H=2, Hk=2, past="p", mask="bool",
             lengths=[{"s": 1, "p": 5}, {"s": 6, "p": 3}, {"s": 12, "p": 20}]),
    dyn_case("dyn_gqa_4d_past_float_mask", H=4, Hk=2, past="p", mask="float",
             lengths=[{"s": 3, "p": 4}, {"s": 9, "p": 11}]),
    dyn_case("dyn_mha_4d_past_float_mask_per_head", H=3, Hk=3, past="p", mask="float_heads",
             lengths=[{"s": 2, "p": 4}, {"s": 7, "p": 1}]),
    dyn_case("dyn_gqa_3d_bool_mask", three_d=True, mask="bool", lengths=[{"s": 3}, {"s": 10}]),
    # queries and keys of their own lengths: ONNX's frontier is the past length (0 here), not Sk - Sq
    dyn_case("dyn_mha_4d_q_kv_apart", H=2, Hk=2, q="sq", kv="sk", lengths=[{"sq": 3, "sk": 7}, {"sq": 7, "sk": 3}]),
    dyn_case("dyn_gqa_3d_q_kv_apart_past", three_d=True, q="sq", kv="sk", past="p",
             lengths=[{"sq": 2, "sk": 5, "p": 3}, {"sq": 6, "sk": 2, "p": 4}]),
]
DYN_CONVS = ["EAGER", "FOLD+FUSE+EAGER", "FOLD+FUSE+DNNL", "FOLD+FUSE+BLAS"]
for name, m, runs in DYN_CASES:
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(m, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"]) if ort else None
    for bind, feeds in runs:
        want = sess.run(None, feeds) if sess else ReferenceEvaluator(m).run(None, feeds)
        tag = name + " " + ",".join(f"{k}={v}" for k, v in bind.items())
        for conv in DYN_CONVS:
            d = os.path.join(WORK, name, "_".join(f"{k}{v}" for k, v in bind.items()), conv.replace("+", "_"))
            r = alma_run(ALMA, path, conv, feeds, d, "-v", check=False, timeout=120)
            log = r.stdout + r.stderr
            if r.returncode != 0:
                failures.append(f"{tag} {conv}: alma failed: {r.stderr.strip()[-300:]}")
                continue
            if "unavailable" in log:
                continue
            if "FUSE" in conv:
                mt = re.search(r"FUSE: .*attention (\d+)", log)
                if not mt or int(mt.group(1)) != 1:
                    failures.append(f"{tag} {conv}: not fused ({mt.group(0) if mt else 'no FUSE line'})")
                causal = "q=1" not in tag and not ("s" not in bind and "sq" not in bind)
                line = next((ln for ln in log.splitlines() if re.match(r"\s+\S+\s+Attention\s", ln)), "")
                if conv.endswith("DNNL") and ("DNNL" not in line or "on EAGER" in line or
                                              (causal and "causal" not in line)):
                    failures.append(f"{tag} {conv}: Attention not on DNNL's kernel: {line.strip()!r}")
                if conv.endswith("BLAS") and ("BLAS" not in line or "EAGER" in line or
                                              (causal and "causal" not in line)):
                    failures.append(f"{tag} {conv}: Attention not on BLAS's kernel: {line.strip()!r}")
            for i, o in enumerate(m.graph.output):
                got = np.load(os.path.join(d, o.name + ".npy"))
                w = np.asarray(want[i])
                err = float(np.abs(got - w).max(initial=0)) / max(float(np.abs(w).max(initial=0)), 1)
                if got.shape != w.shape or not err <= 2e-5:
                    failures.append(f"{tag} {conv} {o.name}: max error {err:.3g} (shape {got.shape} vs {w.shape})")
        print(f"ok {tag}")

if failures:
    print("\n".join(["FAILED:"] + failures))
    sys.exit(1)
print("all cases passed")
