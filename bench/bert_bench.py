#!/usr/bin/env python3
"""A BERT as ONNX Runtime's transformer optimizer writes it (com.microsoft EmbedLayerNormalization,
Attention, SkipLayerNormalization, BiasGelu between MatMuls) through alma's conversions and ONNX
Runtime, in interleaved rounds.

Without --model the script builds that graph itself with random weights (onnx + numpy only), in the
shape `python -m onnxruntime.transformers.optimizer --model_type bert` gives a BERT export: input_ids,
attention_mask, token_type_ids (int64, Cast to int32), EmbedLayerNormalization (mask_index out), per
layer Attention (packed QKV weight, mask_index) -> MatMul -> SkipLayerNormalization (bias) -> MatMul ->
BiasGelu -> MatMul -> SkipLayerNormalization, then the pooler (Gather of token 0, Gemm, Tanh). The
default size is MiniLM's (hidden 384, 6 layers, 12 heads, intermediate 1536, vocabulary 30522); the
batch is 1 x 128 tokens, the last 16 padded. With --model FILE --data a.npy,b.npy,c.npy it times that
file instead (e.g. a real model optimized by ONNX Runtime's optimizer).

Each round runs `alma bench` (every conversion, the same thread count; again with
OMP_WAIT_POLICY=passive for the DNNL conversions with --dnnl-passive; again with --alma-base, a second
build to compare), then ONNX Runtime (CPU provider, all graph optimizations, intra_op_num_threads =
--threads; again with its threads not spinning with --ort-no-spin), and prints p50 latencies in ms with the load average; the last table is the median over
rounds and the best round. docs/performance.md ("ONNX Runtime-optimized BERT") has results.

usage: bert_bench.py --alma build/alma [--alma-base OTHER/alma] [--threads 2] [--rounds 3]
                     [--conversions EAGER,FOLD+DNNL,FOLD+BLAS,FOLD+XNNPACK] [--dnnl-passive] [--ort-no-spin]
                     [--min-runs 20] [--min-time 3] [--layers 6 --hidden 384 --heads 12 --inter 1536]
                     [--model FILE --data a.npy,b.npy,c.npy]
(a python with onnx, onnxruntime and numpy: .venv-ort/bin/python)
"""
import argparse
import os
import statistics
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import alma_bench, time_samples  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto as TP, helper, numpy_helper  # noqa: E402

MS = "com.microsoft"


def build_bert(layers, hidden, heads, inter, vocab, max_pos, seed=0):
    rng = np.random.default_rng(seed)
    inits = []

    def w(name, *shape, scale=0.05):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def ones(name, n):
        inits.append(numpy_helper.from_array((1 + 0.1 * rng.standard_normal(n)).astype(np.float32), name))
        return name

    nodes = [helper.make_node("Cast", [x], [x + "_i32"], to=TP.INT32)
             for x in ("input_ids", "attention_mask", "token_type_ids")]
    nodes.append(helper.make_node(
        "EmbedLayerNormalization",
        ["input_ids_i32", "token_type_ids_i32", w("word", vocab, hidden), w("pos", max_pos, hidden),
         w("seg", 2, hidden), ones("emb_g", hidden), w("emb_b", hidden), "attention_mask_i32"],
        ["h0", "mask_index"], domain=MS, epsilon=1e-12))
    h = "h0"
    for i in range(layers):
        p = f"l{i}_"
        nodes += [
            helper.make_node("Attention", [h, w(p + "qkv_w", hidden, 3 * hidden), w(p + "qkv_b", 3 * hidden),
                                           "mask_index"], [p + "att"], domain=MS, num_heads=heads),
            helper.make_node("MatMul", [p + "att", w(p + "o_w", hidden, hidden)], [p + "o"]),
            helper.make_node("SkipLayerNormalization", [p + "o", h, ones(p + "ln1_g", hidden), w(p + "ln1_b", hidden),
                                                        w(p + "o_b", hidden)], [p + "h1"], domain=MS, epsilon=1e-12),
            helper.make_node("MatMul", [p + "h1", w(p + "i_w", hidden, inter)], [p + "i"]),
            helper.make_node("BiasGelu", [p + "i", w(p + "i_b", inter)], [p + "g"], domain=MS),
            helper.make_node("MatMul", [p + "g", w(p + "f_w", inter, hidden)], [p + "f"]),
            helper.make_node("SkipLayerNormalization", [p + "f", p + "h1", ones(p + "ln2_g", hidden),
                                                        w(p + "ln2_b", hidden), w(p + "f_b", hidden)],
                             [p + "out"], domain=MS, epsilon=1e-12),
        ]
        h = p + "out"
    inits.append(numpy_helper.from_array(np.array(0, np.int64), "zero"))
    nodes += [helper.make_node("Gather", [h, "zero"], ["cls"], axis=1),
              helper.make_node("Gemm", ["cls", w("pool_w", hidden, hidden), w("pool_b", hidden)], ["pool"], transB=1),
              helper.make_node("Tanh", ["pool"], ["pooler_output"])]
    nodes.append(helper.make_node("Identity", [h], ["last_hidden_state"]))
    ins = [helper.make_tensor_value_info(n, TP.INT64, ["batch", "seq"])
           for n in ("input_ids", "attention_mask", "token_type_ids")]
    outs = [helper.make_tensor_value_info("last_hidden_state", TP.FLOAT, ["batch", "seq", hidden]),
            helper.make_tensor_value_info("pooler_output", TP.FLOAT, ["batch", hidden])]
    g = helper.make_graph(nodes, "bert_ort_optimized", ins, outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    return m


def feeds_for(vocab, batch, seq, pad):
    rng = np.random.default_rng(1)
    ids = rng.integers(0, vocab, (batch, seq)).astype(np.int64)
    am = np.ones((batch, seq), np.int64)
    if pad:
        am[:, seq - pad:] = 0
    tt = np.zeros((batch, seq), np.int64)
    tt[:, seq // 2:] = 1
    return {"input_ids": ids, "attention_mask": am, "token_type_ids": tt}


def bench_alma(alma, path, files, convs, a, env=None):
    res = alma_bench(alma, path, ["--data", ",".join(files), "-c", ",".join(convs), "--threads", str(a.threads),
                                  "-n", str(a.min_runs), "--min-time", str(a.min_time)], env)
    return {c: lat and lat["p50"] for c, lat in res.items()}


def bench_ort(path, feeds, a, spin=True):
    import onnxruntime as ort
    so = ort.SessionOptions()
    if not spin:  # ONNX Runtime's counterpart of OMP_WAIT_POLICY=passive
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return statistics.median(time_samples(lambda: sess.run(None, feeds), a.min_runs, a.min_time, warmup=5))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--alma", default="build/alma")
    ap.add_argument("--alma-base", default="", help="a second alma build to time in the same rounds")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-runs", type=int, default=20)
    ap.add_argument("--min-time", type=float, default=3.0)
    ap.add_argument("--conversions", default="EAGER,FOLD+DNNL,FOLD+BLAS,FOLD+XNNPACK")
    ap.add_argument("--dnnl-passive", action="store_true", help="also run the DNNL conversions with "
                    "OMP_WAIT_POLICY=passive")
    ap.add_argument("--ort-no-spin", action="store_true", help="also run ONNX Runtime with "
                    "session.intra_op.allow_spinning=0 (its threads sleep instead of spinning)")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--inter", type=int, default=1536)
    ap.add_argument("--vocab", type=int, default=30522)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--pad", type=int, default=16, help="padded tokens at the end of each row")
    ap.add_argument("--model", default="")
    ap.add_argument("--data", default="", help="with --model: .npy files in graph input order")
    a = ap.parse_args()
    convs = a.conversions.split(",")
    with tempfile.TemporaryDirectory() as td:
        if a.model:
            path, files = a.model, a.data.split(",")
            m = onnx.load(path, load_external_data=False)
            feeds = {i.name: np.load(f) for i, f in zip(m.graph.input, files)}
        else:
            path = os.path.join(td, "bert_opt.onnx")
            onnx.save(build_bert(a.layers, a.hidden, a.heads, a.inter, a.vocab, max(512, a.seq)), path)
            feeds = feeds_for(a.vocab, a.batch, a.seq, a.pad)
            files = []
            for k, x in feeds.items():
                files.append(os.path.join(td, k + ".npy"))
                np.save(files[-1], x)
        cols = [("alma " + c, a.alma, [c], None) for c in convs]
        dn = [c for c in convs if c.endswith("DNNL")]
        if a.dnnl_passive and dn:
            cols += [("alma " + c + " passive", a.alma, [c], dict(os.environ, OMP_WAIT_POLICY="passive")) for c in dn]
        if a.alma_base:
            cols += [("base " + c, a.alma_base, [c], None) for c in convs]
        names = [c[0] for c in cols] + ["ONNX Runtime"] + (["ONNX Runtime no spin"] if a.ort_no_spin else [])
        rows = []
        print("| round | load | " + " | ".join(names) + " |")
        print("|---" * (len(names) + 2) + "|")
        for r in range(a.rounds):
            load0 = os.getloadavg()[0]
            got = {}
            # one alma bench per binary and environment, all conversions in it
            groups = {}
            for name, binary, cv, env in cols:
                groups.setdefault((binary, id(env) if env else 0), (binary, env, []))[2].append((name, cv[0]))
            for binary, env, items in groups.values():
                res = bench_alma(binary, path, files, [c for _, c in items], a, env)
                for name, c in items:
                    got[name] = res.get(c)
            got["ONNX Runtime"] = bench_ort(path, feeds, a)
            if a.ort_no_spin:
                got["ONNX Runtime no spin"] = bench_ort(path, feeds, a, spin=False)
            rows.append(got)
            cells = [f"{got[n]:.1f}" if got.get(n) else "failed" for n in names]
            print(f"| {r + 1} | {load0:.1f}-{os.getloadavg()[0]:.1f} | " + " | ".join(cells) + " |", flush=True)
        print()
        print("| | " + " | ".join(names) + " |")
        print("|---" * (len(names) + 1) + "|")
        for label, fn in (("median of rounds", statistics.median), ("best round", min)):
            vals = []
            for n in names:
                xs = [row[n] for row in rows if row.get(n)]
                vals.append(f"{fn(xs):.1f}" if xs else "failed")
            print(f"| {label} | " + " | ".join(vals) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
