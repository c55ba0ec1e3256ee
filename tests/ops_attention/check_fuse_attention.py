"""FUSE's rewrite of ONNX Attention (opset 23+) into alma.Attention, the DNNL fast path: where it
must fire (float32 3-D or 4-D inputs, grouped-query heads, a KV cache with present outputs, constant
or run-time float and bool masks, masks shorter than the keys (opset 24), fully masked rows, is_causal
with and without past keys, unknown sequence lengths) and where it must not (softcap, the qk output
read, nonpad_kv_seqlen, is_causal with a run-time mask or unknown lengths), each run through
FUSE+DNNL, FOLD+FUSE+EAGER, FUSE+BLAS and FUSE+XNNPACK and compared with ONNX's reference
implementation.

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
    case("causal_dynamic", 0, attrs={"is_causal": 1}, dyn=True),
    case("causal_with_run_time_mask", 0, Sq=7, Sk=7, attrs={"is_causal": 1}, mask=fmask(7, 7), mask_input=True),
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

if failures:
    print("\n".join(["FAILED:"] + failures))
    sys.exit(1)
print("all cases passed")
