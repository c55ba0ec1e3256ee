"""BERT and GPT-2 rewritten by ONNX Runtime's transformer optimizer, through alma against ONNX Runtime.

usage: check_models.py ALMA WORKDIR   (python with onnx, numpy and onnxruntime)

models/bert.onnx and models/gpt2.onnx are tiny random-weight BERT and GPT-2 models exported from
transformers 4.30.2 by torch.onnx at opset 14 (export_bert.py regenerates them). Each is optimized the
two ways users do: onnxruntime.transformers.optimizer.optimize_model(model_type='bert'/'gpt2',
opt_level=0), the optimizer's fusions only, and ONNX Runtime's basic graph optimizations first (what
its opt_level 1 does; the optimizer itself needs torch for that level, so it is done here by a session
with ORT_ENABLE_BASIC), then the fusions. The optimized graphs must hold the contrib ops this test is
for (BERT: EmbedLayerNormalization, Attention, SkipLayerNormalization, BiasGelu; GPT-2 as exported
here: SkipLayerNormalization, FastGelu and LayerNormalization in the ONNX domain at opset 14 - the
optimizer does not fuse this GPT-2's attention). alma runs them on EAGER, FOLD+DNNL, FOLD+BLAS and
FOLD+XNNPACK (those this build has) with batch 2, 7 tokens, the second row right-padded and mixed
token types, and each output is compared with ONNX Runtime's on the same optimized model. Then FOLD+DNNL,
FOLD+BLAS and FOLD+XNNPACK run again with --threads 2 on a wider batch (8 rows of 16 tokens, padded to lengths
16..3: several items for each threaded contrib node, contrib_bert.h) against ONNX Runtime.
Exit 0 when everything passes, 1 otherwise; 77 (skip) without the python modules."""
import collections
import os
import sys

import numpy as np

try:
    import onnx
    import onnxruntime as ort
    from onnxruntime.transformers.optimizer import optimize_model
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from alma_cli import alma_run, available, read_outputs  # noqa: E402

ALMA, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
MODELS = os.path.join(HERE, "models")

CONVS = ["EAGER"] + available(ALMA, ("FOLD+DNNL", "FOLD+BLAS", "FOLD+XNNPACK"))
failures = []
count = [0]


def fail(msg):
    failures.append(msg)
    print("FAIL", msg)


def optimized(name, model_type, basic):
    src = os.path.join(MODELS, f"{name}.onnx")
    if basic:  # ONNX Runtime's basic optimizations first, as the optimizer's opt_level 1
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = os.path.join(WORK, f"{name}_basic.onnx")
        ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
        src = so.optimized_model_filepath
    m = optimize_model(src, model_type=model_type, num_heads=4, hidden_size=32, opt_level=0)
    path = os.path.join(WORK, f"{name}_{'basic_' if basic else ''}opt.onnx")
    m.save_model_to_file(path)
    return path


feeds_bert = {
    "input_ids": np.random.default_rng(1).integers(0, 100, (2, 7)).astype(np.int64),
    "attention_mask": np.array([[1] * 7, [1] * 4 + [0] * 3], np.int64),
    "token_type_ids": np.array([[0] * 3 + [1] * 4, [0] * 7], np.int64),
}
feeds_gpt2 = {k: feeds_bert[k] for k in ("input_ids", "attention_mask")}
CASES = [("bert", "bert", feeds_bert, {"EmbedLayerNormalization", "Attention", "SkipLayerNormalization", "BiasGelu"}),
         ("gpt2", "gpt2", feeds_gpt2, {"SkipLayerNormalization", "FastGelu", "LayerNormalization"})]
# the threaded runs: 8 x 16 tokens (the models' position limit), row r padded after 16 - 2r tokens
_wm = np.array([[1] * (16 - 2 * r) + [0] * (2 * r) for r in range(8)], np.int64)
WIDE = {"input_ids": np.random.default_rng(2).integers(0, 100, (8, 16)).astype(np.int64), "attention_mask": _wm,
        "token_type_ids": (np.arange(16)[None, :] >= 8).astype(np.int64).repeat(8, 0)}
RUNS = [(c, (), "") for c in CONVS] + [(c, ("--threads", "2"), "wide") for c in CONVS if c != "EAGER"]

for name, mt, feeds, want in CASES:
    for basic in (False, True):
        tag = f"{name}{'_basic' if basic else ''}_opt"
        path = optimized(name, mt, basic)
        m = onnx.load(path)
        ops = collections.Counter(n.op_type for n in m.graph.node)
        print(tag, dict(ops))
        count[0] += 1
        if not want <= set(ops):
            fail(f"{tag}: optimized graph lacks {sorted(want - set(ops))} (has {dict(ops)})")
        so = ort.SessionOptions()
        so.log_severity_level = 3
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        wide = {k: WIDE[k] for k in feeds}
        refs = {"": sess.run(None, feeds), "wide": sess.run(None, wide)}
        names = [o.name for o in m.graph.output]
        for conv, extra, fset in RUNS:
            label = f"{conv}{' ' + ' '.join(extra) if extra else ''}{' ' + fset if fset else ''}"
            out = os.path.join(WORK, "out", tag, conv.replace("+", "_") + (f"_{fset}" if fset else ""))
            try:
                alma_run(ALMA, path, conv, wide if fset else feeds, out, *extra)
            except RuntimeError as e:
                fail(f"{tag} {label}: {e}")
                continue
            ref = refs[fset]
            conv = label
            for nm, got, rf in zip(names, read_outputs(out, names), ref):
                count[0] += 1
                err = float(np.max(np.abs(got.astype(np.float64) - rf))) if got.shape == rf.shape else float("inf")
                scale = float(np.max(np.abs(rf))) + 1e-6
                ok = got.shape == rf.shape and err <= 1e-3 * (1 + scale)
                print(f"  {tag} {conv} {nm}: max abs err {err:.3g} (ref max {scale:.3g})", "" if ok else "FAIL")
                if not ok:
                    fail(f"{tag} {conv} {nm}: shape {got.shape} vs {rf.shape}, max abs err {err:.3g}")

print(f"{count[0]} checks, {len(failures)} failures")
sys.exit(1 if failures else 0)
