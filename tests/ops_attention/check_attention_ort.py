"""ONNX Attention (opset 23, 24, 25) through alma, checked against ONNX Runtime.

usage: check_attention_ort.py ALMA WORKDIR     (python with onnx >= 1.20, onnxruntime, numpy)

Each case writes a one-node Attention model with onnx.helper, with random inputs, runs it with
`alma run` (EAGER; a few also through DNNL and FOLD+FUSE+EAGER, where Attention falls back to EAGER)
and with ONNX Runtime's CPU kernel, and compares every output. The cases cover what ONNX's node
tests do not: grouped-query heads with 3-D inputs and a KV cache, bool masks broadcast over heads,
causal masks with past keys, softcap with a mask, every qk_matmul_output_mode, odd sizes, float16,
opset 24's nonpad_kv_seqlen and shorter masks, and opset 25's sliding windows. Where ONNX Runtime
cannot run a case or disagrees with the ONNX spec, the reference is onnx.reference.ReferenceEvaluator
(the case says why). Then models that break the spec's shape rules must fail at load with a message
naming the problem.

Errors are relative to the reference output's largest magnitude (at least 1); float32 must agree to
1e-4, float16 to 4e-3, bfloat16 to 3e-2. Exit 0 when every check passes, 1 otherwise."""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from alma_cli import alma_run, read_outputs  # noqa: E402

NP = {TP.FLOAT: np.float32, TP.FLOAT16: np.float16, TP.DOUBLE: np.float64, TP.BOOL: np.bool_, TP.INT64: np.int64}
TOL = {TP.FLOAT: 1e-4, TP.FLOAT16: 4e-3, TP.BFLOAT16: 3e-2, TP.DOUBLE: 1e-9}
IN_NAMES = ["Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen"]
OUT_NAMES = ["Y", "present_key", "present_value", "qk_matmul_output"]


def model(opset, attrs, shapes, types, n_out, out_types):
    """shapes/types: per input name (missing = omitted); n_out: outputs 0..n_out-1 (None = omitted).
    bfloat16 tensors enter and leave as float32 through Casts: .npy has no bfloat16."""
    last = max(i for i, nm in enumerate(IN_NAMES) if nm in shapes)
    ins = [nm if nm in shapes else "" for nm in IN_NAMES[: last + 1]]
    outs = [nm if want else "" for nm, want in zip(OUT_NAMES, n_out)]
    while outs and not outs[-1]:
        outs.pop()
    b16 = lambda t: t == TP.BFLOAT16
    nodes = [helper.make_node("Cast", [nm], [nm + "_b"], to=TP.BFLOAT16) for nm in ins if nm and b16(types[nm])]
    a_ins = [nm + "_b" if nm and b16(types[nm]) else nm for nm in ins]
    a_outs = [nm + "_b" if nm and b16(out_types[i]) else nm for i, nm in enumerate(outs)]
    nodes.append(helper.make_node("Attention", a_ins, a_outs, **attrs))
    nodes += [helper.make_node("Cast", [nm + "_b"], [nm], to=TP.FLOAT) for i, nm in enumerate(outs)
              if nm and b16(out_types[i])]
    io = lambda t: TP.FLOAT if b16(t) else t
    gi = [helper.make_tensor_value_info(nm, io(types[nm]), shapes[nm]) for nm in ins if nm]
    go = [helper.make_tensor_value_info(nm, io(out_types[i]), None) for i, nm in enumerate(outs) if nm]
    g = helper.make_graph(nodes, "attention", gi, go)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m, [nm for nm in outs if nm]


def rand(rng, shape, t, kind=None):
    if t == TP.BOOL:
        return rng.random(shape) < 0.7
    if t == TP.INT64:
        return kind
    x = rng.standard_normal(shape)
    return x.astype(NP[t])


# name, opset, dtype, dims (B, Hq, Hkv, Sq, Skv, P, D, Dv), is3d, attrs, mask (shape, dtype) or None,
# wanted outputs, nonpad lengths or None, conversions, reference ("ort" or "onnx" with a reason)
def cases():
    F, H, B16, D64 = TP.FLOAT, TP.FLOAT16, TP.BFLOAT16, TP.DOUBLE
    c = []
    add = lambda *a, **k: c.append(dict(zip(
        ["name", "opset", "dt", "dims", "is3d", "attrs", "mask", "outs", "nonpad", "convs", "ref"],
        list(a) + [k.get("nonpad"), k.get("convs", ["EAGER"]), k.get("ref", "ort")])))
    # GQA, 3-D inputs, KV cache, float mask broadcast over batch and heads, odd head sizes, all outputs
    add("gqa3d_past_mask", 23, F, (2, 6, 2, 3, 4, 5, 5, 7), True, {}, ((3, 9), F), (1, 1, 1, 1),
        convs=["EAGER", "DNNL", "FOLD+FUSE+EAGER"])
    add("gqa3d_past_causal", 23, F, (2, 6, 3, 3, 2, 4, 4, 3), True, {"is_causal": 1}, None, (1, 1, 1, 0))
    # bool mask [B, 1, Sq, T] broadcast over heads, 4-D
    add("bool_mask_bcast_heads", 23, F, (2, 4, 4, 5, 5, 0, 8, 8), False, {}, ((2, 1, 5, 5), TP.BOOL), (1, 0, 0, 0),
        convs=["EAGER", "XNNPACK"])
    # bool rank-3 mask [Hq, Sq, T] with past and causal: mask and causal frontier intersect
    add("bool_mask3_causal_past", 23, F, (1, 4, 2, 3, 3, 6, 8, 8), False, {"is_causal": 1},
        ((4, 3, 9), TP.BOOL), (1, 1, 1, 0))
    add("causal_past_gqa_mode3", 23, F, (2, 8, 2, 4, 4, 3, 16, 16), False,
        {"is_causal": 1, "qk_matmul_output_mode": 3}, None, (1, 1, 1, 1))
    add("softcap_mask_mode0", 23, F, (2, 2, 2, 4, 6, 0, 8, 8), False,
        {"softcap": 1.5, "qk_matmul_output_mode": 0}, ((4, 6), F), (1, 0, 0, 1))
    add("softcap_mask_mode1", 23, F, (2, 2, 2, 4, 6, 0, 8, 8), False,
        {"softcap": 1.5, "qk_matmul_output_mode": 1}, ((2, 2, 4, 6), F), (1, 0, 0, 1))
    # ONNX Runtime writes mode 2's masked scores as -FLT_MAX; the spec's bias (and the reference) is -inf
    add("mode2_bool_causal", 23, F, (1, 3, 3, 4, 4, 2, 8, 6), False,
        {"is_causal": 1, "qk_matmul_output_mode": 2}, ((1, 4, 6), TP.BOOL), (1, 1, 1, 1), ref="onnx")
    add("scaled_3d_cross", 23, F, (3, 2, 1, 5, 7, 0, 6, 4), True, {"scale": 0.37}, None, (1, 0, 0, 0))
    add("decode_step_odd", 23, F, (1, 5, 1, 1, 1, 3, 1, 3), True, {"is_causal": 1}, ((1, 4), F), (1, 1, 1, 1))
    add("single_key", 23, F, (2, 2, 2, 3, 1, 0, 5, 2), False, {}, None, (1, 0, 0, 1))
    add("softmax_precision_f32", 23, F, (1, 2, 2, 3, 4, 0, 8, 8), False, {"softmax_precision": 1}, None,
        (1, 0, 0, 0))
    add("fp16_past_mask", 23, H, (2, 4, 2, 3, 4, 5, 8, 8), False, {}, ((3, 9), H), (1, 1, 1, 0))
    add("fp16_3d_causal_softcap", 23, H, (1, 4, 4, 6, 6, 0, 8, 8), True, {"is_causal": 1, "softcap": 4.0},
        None, (1, 0, 0, 0))
    # a row whose mask is all False: zero output row (spec text; ORT agrees)
    add("fully_masked_row", 23, F, (1, 2, 2, 3, 4, 0, 4, 4), False, {}, ((3, 4), TP.BOOL), (1, 0, 0, 1))
    # opset 24: external cache (nonpad_kv_seqlen), causal offset per batch, shorter mask (padded)
    add("nonpad_causal", 24, F, (2, 2, 2, 3, 8, 0, 8, 8), False, {"is_causal": 1}, None, (1, 0, 0, 0),
        nonpad=[5, 8])
    # ONNX Runtime 1.32 rejects a shorter mask before opset 25 although opset 24's text allows it
    add("nonpad_short_mask", 24, F, (2, 4, 2, 2, 8, 0, 8, 6), False, {}, ((2, 1, 2, 6), F), (1, 0, 0, 0),
        nonpad=[6, 3], ref="onnx")
    # opset 25: sliding windows, alone, with causal, with past; a mask of last dim 1 is padded
    add("window_l2_r1", 25, F, (1, 2, 2, 4, 6, 0, 8, 8), False, {"left_window_size": 2, "right_window_size": 1},
        None, (1, 0, 0, 0))
    add("window_causal_past", 25, F, (1, 4, 2, 3, 3, 4, 8, 8), True,
        {"left_window_size": 3, "is_causal": 1, "q_num_heads": 4, "kv_num_heads": 2}, None, (1, 1, 1, 0))
    add("window_right_only_mask1", 25, F, (2, 2, 2, 4, 5, 0, 4, 4), False, {"right_window_size": 0},
        ((4, 1), F), (1, 0, 0, 0))
    add("opset25_gqa_mode2", 25, F, (1, 4, 1, 3, 5, 0, 8, 8), False, {"qk_matmul_output_mode": 2},
        ((1, 4, 3, 5), F), (1, 0, 0, 1))
    # ONNX Runtime 1.32 has no CPU Attention kernel for these types: the reference evaluator judges
    add("bf16_gqa_causal", 23, B16, (1, 4, 2, 3, 3, 2, 8, 8), False, {"is_causal": 1}, None, (1, 1, 1, 0),
        ref="onnx")
    add("f64_3d_mask", 23, D64, (2, 2, 2, 3, 4, 0, 4, 6), True, {}, ((3, 4), D64), (1, 0, 0, 1), ref="onnx")
    return c


def build(case, rng, work):
    B, Hq, Hkv, Sq, Skv, P, D, Dv = case["dims"]
    dt, is3d, opset = case["dt"], case["is3d"], case["opset"]
    attrs = dict(case["attrs"])
    if is3d:
        attrs.setdefault("q_num_heads", Hq)
        attrs.setdefault("kv_num_heads", Hkv)
        shapes = {"Q": [B, Sq, Hq * D], "K": [B, Skv, Hkv * D], "V": [B, Skv, Hkv * Dv]}
    else:
        shapes = {"Q": [B, Hq, Sq, D], "K": [B, Hkv, Skv, D], "V": [B, Hkv, Skv, Dv]}
    types = {"Q": dt, "K": dt, "V": dt}
    if case["mask"]:
        shapes["attn_mask"], types["attn_mask"] = list(case["mask"][0]), case["mask"][1]
    if P:
        shapes["past_key"], shapes["past_value"] = [B, Hkv, P, D], [B, Hkv, P, Dv]
        types["past_key"] = types["past_value"] = dt
    if case["nonpad"] is not None:
        shapes["nonpad_kv_seqlen"], types["nonpad_kv_seqlen"] = [B], TP.INT64
    m, outs = model(opset, attrs, shapes, types, case["outs"], [dt] * 4)
    path = os.path.join(work, case["name"] + ".onnx")
    onnx.save(m, path)
    feeds = {}
    for nm in shapes:
        if nm == "nonpad_kv_seqlen":
            feeds[nm] = np.array(case["nonpad"], np.int64)
        elif types[nm] == TP.BFLOAT16:
            feeds[nm] = rng.standard_normal(shapes[nm]).astype(np.float32)
        else:
            feeds[nm] = rand(rng, shapes[nm], types[nm])
    if case["name"] == "fully_masked_row":
        feeds["attn_mask"][1, :] = False
    return m, path, feeds, outs


def main():
    alma, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(2025)
    bad = 0
    worst = {}
    for case in cases():
        m, path, feeds, outs = build(case, rng, work)
        try:
            if case["ref"] == "ort":
                sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
                ref = sess.run(outs, feeds)
            else:
                ref = ReferenceEvaluator(m).run(outs, feeds)
        except Exception as e:  # noqa: BLE001 (the reference must run: a failure is a test failure)
            print(f"FAIL {case['name']}: reference ({case['ref']}) failed: {str(e)[:300]}")
            bad += 1
            continue
        cw = os.path.join(work, case["name"])
        os.makedirs(cw, exist_ok=True)
        for conv in case["convs"]:
            try:
                alma_run(alma, path, conv, feeds, cw)
                got = read_outputs(cw, outs)
            except RuntimeError as e:
                print(f"FAIL {case['name']} {conv}: {e}")
                bad += 1
                continue
            errs = []
            for nm, g, r in zip(outs, got, ref):
                g64, r64 = np.asarray(g, np.float64), np.asarray(r, np.float64)
                if g64.shape != r64.shape:
                    errs.append((nm, float("inf")))
                    continue
                # equal infinities (mode 2's masked scores are -inf) count as agreeing
                same = (g64 == r64) | (np.isnan(g64) & np.isnan(r64))
                fin = np.isfinite(r64)
                scale = max(float(np.abs(r64[fin]).max(initial=0)), 1.0)
                with np.errstate(invalid="ignore"):
                    e = float(np.abs(np.where(same, 0.0, g64 - r64)).max(initial=0)) / scale
                if np.isnan(e):
                    e = float("inf")
                errs.append((nm, e))
            tol = TOL[case["dt"]]
            ok = all(e <= tol for _, e in errs)
            bad += not ok
            key = (case["dt"], case["ref"])
            worst[key] = max([worst.get(key, 0.0)] + [e for _, e in errs])
            print(f"{'PASS' if ok else 'FAIL'} {case['name']} opset {case['opset']} {conv} vs {case['ref']}: " +
                  ", ".join(f"{nm} {e:.2e}" for nm, e in errs))
    for (dt, ref), e in sorted(worst.items()):
        print(f"max error {TP.DataType.Name(dt)} vs {ref}: {e:.2e}")
    bad += check_bad_models(alma, work)
    print("OK" if not bad else f"{bad} check(s) failed")
    return 1 if bad else 0


def check_bad_models(alma, work):
    """Models that break the spec's shape rules: `alma run` must fail at load naming the problem."""
    F = TP.FLOAT
    cases = [
        ("rank2_q", 23, {}, {"Q": [4, 8], "K": [4, 8], "V": [4, 8]}, "3-D or all 4-D"),
        ("heads_not_multiple", 23, {}, {"Q": [1, 3, 2, 8], "K": [1, 2, 4, 8], "V": [1, 2, 4, 8]},
         "multiple of kv heads"),
        ("hidden_not_divisible", 23, {"q_num_heads": 3, "kv_num_heads": 3},
         {"Q": [1, 2, 10], "K": [1, 4, 12], "V": [1, 4, 12]}, "divisible"),
        ("mask_bad_qdim", 23, {}, {"Q": [1, 2, 3, 8], "K": [1, 2, 4, 8], "V": [1, 2, 4, 8], "attn_mask": [5, 4]},
         "does not broadcast"),
        ("mask_too_long", 24, {}, {"Q": [1, 2, 3, 8], "K": [1, 2, 4, 8], "V": [1, 2, 4, 8], "attn_mask": [3, 6]},
         "does not broadcast"),
        ("mask_short_opset23", 23, {}, {"Q": [1, 2, 3, 8], "K": [1, 2, 4, 8], "V": [1, 2, 4, 8],
                                        "attn_mask": [3, 2]}, "opset 24 allows"),
        ("heads_attr_4d_opset25", 25, {"q_num_heads": 2, "kv_num_heads": 2},
         {"Q": [1, 2, 3, 8], "K": [1, 2, 4, 8], "V": [1, 2, 4, 8]}, "must not be given"),
        ("head_size_mismatch", 23, {}, {"Q": [1, 2, 3, 8], "K": [1, 2, 4, 6], "V": [1, 2, 4, 8]}, "do not agree"),
        ("bad_mode", 23, {"qk_matmul_output_mode": 4}, {"Q": [1, 2, 3, 8], "K": [1, 2, 4, 8], "V": [1, 2, 4, 8]},
         "qk_matmul_output_mode 4"),
        ("past_without_value", 23, {}, {"Q": [1, 2, 3, 8], "K": [1, 2, 4, 8], "V": [1, 2, 4, 8],
                                        "past_key": [1, 2, 5, 8]}, "given together"),
    ]
    bad = 0
    for name, opset, attrs, shapes, want in cases:
        types = {nm: F for nm in shapes}
        m, _ = model(opset, attrs, shapes, types, (1, 0, 0, 0), [F] * 4)
        path = os.path.join(work, "bad_" + name + ".onnx")
        onnx.save(m, path)
        r = subprocess.run([alma, "run", path], capture_output=True, text=True)
        ok = r.returncode != 0 and want in r.stderr and "Attention" in r.stderr
        bad += not ok
        msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "(no message)"
        print(f"{'PASS' if ok else 'FAIL'} bad model {name}: exit {r.returncode}: {msg}")
    return bad


if __name__ == "__main__":
    sys.exit(main())
