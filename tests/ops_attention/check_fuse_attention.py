"""FUSE's rewrite of ONNX Attention (opset 23+) into alma.Attention, the DNNL fast path: where it
must fire (4-D float32, as many kv heads as query heads, no cache, softcap or extra outputs; no
mask, a constant float or bool mask whose every row lets a key through, or is_causal) and where it
must not (a constant mask with a fully masked row, whose ONNX output is zeros; a mask computed at
run time; GQA; past keys; softcap; the qk output read), each run through FUSE+DNNL,
FOLD+FUSE+EAGER, FUSE+BLAS and FUSE+XNNPACK and compared with ONNX's reference implementation.

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
         past=0, qk_out=False):
    Hk = Hk or H
    shapes = {"Q": [B, H, Sq, D], "K": [B, Hk, Sk, D], "V": [B, Hk, Sk, Dv]}
    feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    inputs = [helper.make_tensor_value_info(k, TP.FLOAT, s) for k, s in shapes.items()]
    names, inits = ["Q", "K", "V"], []
    if mask is not None:
        names.append("mask")
        if mask_input:
            inputs.append(helper.make_tensor_value_info("mask", TP.FLOAT, list(mask.shape)))
            feeds["mask"] = mask
        else:
            inits.append(numpy_helper.from_array(mask, "mask"))
    if past:
        names += [""] * (4 - len(names)) + ["pk", "pv"]
        for nm, d in (("pk", D), ("pv", Dv)):
            inputs.append(helper.make_tensor_value_info(nm, TP.FLOAT, [B, Hk, past, d]))
            feeds[nm] = rng.standard_normal([B, Hk, past, d]).astype(np.float32)
    outs = ["Y"] + (["", "", "QK"] if qk_out else [])
    node = helper.make_node("Attention", names, outs, **(attrs or {}))
    g = helper.make_graph([node], name, inputs, [helper.make_tensor_value_info(o, TP.FLOAT, None) for o in outs if o],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])
    m.ir_version = 10
    return name, fused, m, feeds


def causal_cols_ok(Sq, Sk):
    return np.tril(np.ones((Sq, Sk), bool))


CASES = [
    case("plain", 1),
    case("causal", 1, Sq=6, Sk=6, attrs={"is_causal": 1}),
    case("causal_fewer_queries", 1, Sq=3, Sk=7, attrs={"is_causal": 1}),
    case("float_mask_scale", 1, attrs={"scale": 0.3},
         mask=np.where(rng.random((5, 7)) < 0.3, -np.inf, rng.standard_normal((5, 7))).astype(np.float32)),
    case("bool_mask_bcast", 1, mask=np.concatenate([np.ones((2, 1, 5, 1), bool), rng.random((2, 1, 5, 6)) < 0.5], 3)),
    case("bool_mask_full_row", 0, mask=np.concatenate([np.zeros((1, 7), bool), np.ones((4, 7), bool)], 0)),
    case("mask_at_run_time", 0, mask=rng.standard_normal((5, 7)).astype(np.float32), mask_input=True),
    case("gqa", 0, H=4, Hk=2),
    case("past", 0, past=3),
    case("softcap", 0, attrs={"softcap": 2.0}),
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
