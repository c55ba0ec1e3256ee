#!/usr/bin/env python3
"""ONNX's Attention operator (opset 23) through alma's conversions and ONNX Runtime, in one run.

Each configuration is one Attention node (float32, random inputs) as an exporter writes it for
multi-head, grouped-query and cached attention: 4-D and 3-D inputs, run-time float and bool masks,
is_causal, past_key/past_value. alma runs it with `alma bench` (EAGER: the reference kernel;
FUSE+DNNL and FUSE+BLAS: FUSE's rewrite into alma.Attention), ONNX Runtime with its CPU provider;
the same thread count for both. Prints p50 latencies and the ratio best alma / ONNX Runtime
(docs/performance.md has the results).

usage: attention_bench.py --alma build/alma [--threads 2] [--min-runs 20] [--min-time 1]
                          [--conversions EAGER,FUSE+DNNL,FUSE+BLAS] [--only NAME,...]
(a python with onnx >= 1.18, onnxruntime and numpy: .venv-ort/bin/python)
"""
import argparse
import os
import statistics
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import alma_bench, time_samples  # noqa: E402
import onnx
from onnx import TensorProto as TP, helper

# name -> (Q, K, V shapes, attributes, mask (shape, dtype) or None, past length or 0[, dyn]); dyn: the
# sequence dim of Q, K, V ("s", unless it is 1) and the past length ("p") declared symbolic
CONFIGS = {
    "mha_4d": ([8, 4, 128, 64], [8, 4, 128, 64], [8, 4, 128, 64], {}, None, 0),
    "mha_4d_padding_bool_mask": ([2, 8, 256, 64], [2, 8, 256, 64], [2, 8, 256, 64], {}, ([2, 1, 256, 256], "bool"), 0),
    "gqa_4d_float_mask": ([4, 16, 256, 64], [4, 4, 256, 64], [4, 4, 256, 64], {}, ([4, 1, 256, 256], "float"), 0),
    "gqa_3d_causal_prefill": ([1, 512, 32 * 64], [1, 512, 8 * 64], [1, 512, 8 * 64],
                              {"q_num_heads": 32, "kv_num_heads": 8, "is_causal": 1}, None, 0),
    "gqa_3d_causal_decode_past1023": ([4, 1, 32 * 64], [4, 1, 8 * 64], [4, 1, 8 * 64],
                                      {"q_num_heads": 32, "kv_num_heads": 8, "is_causal": 1}, None, 1023),
    # the same forms with the sequence and past lengths symbolic (dim_param), as LLM exports declare
    # them: FUSE cannot see the lengths, so is_causal runs as alma.Attention's causal mode
    "gqa_3d_causal_prefill_dyn": ([1, 512, 32 * 64], [1, 512, 8 * 64], [1, 512, 8 * 64],
                                  {"q_num_heads": 32, "kv_num_heads": 8, "is_causal": 1}, None, 0, True),
    "gqa_3d_causal_decode_dynpast1023": ([4, 1, 32 * 64], [4, 1, 8 * 64], [4, 1, 8 * 64],
                                         {"q_num_heads": 32, "kv_num_heads": 8, "is_causal": 1}, None, 1023, True),
    "gqa_3d_causal_chunk128_dynpast384": ([1, 128, 32 * 64], [1, 128, 8 * 64], [1, 128, 8 * 64],
                                          {"q_num_heads": 32, "kv_num_heads": 8, "is_causal": 1}, None, 384, True),
}


def build(name, qs, ks, vs, attrs, mask, past, dyn=False):
    ax = 1 if len(qs) == 3 else 2

    def sym(shape, axis, name):
        return [name if dyn and i == axis and d != 1 else d for i, d in enumerate(shape)]
    inputs = [helper.make_tensor_value_info(n, TP.FLOAT, sym(s, ax, "s")) for n, s in (("Q", qs), ("K", ks), ("V", vs))]
    names = ["Q", "K", "V"]
    if mask:
        names.append("mask")
        inputs.append(helper.make_tensor_value_info("mask", TP.BOOL if mask[1] == "bool" else TP.FLOAT, mask[0]))
    outs = ["Y"]
    if past:
        hkv = ks[1] if len(ks) == 4 else attrs["kv_num_heads"]
        d = ks[3] if len(ks) == 4 else ks[2] // hkv
        dv = vs[3] if len(vs) == 4 else vs[2] // hkv
        names += [""] * (4 - len(names)) + ["past_key", "past_value"]
        inputs += [helper.make_tensor_value_info("past_key", TP.FLOAT, sym([qs[0], hkv, past, d], 2, "p")),
                   helper.make_tensor_value_info("past_value", TP.FLOAT, sym([qs[0], hkv, past, dv], 2, "p"))]
        outs += ["present_key", "present_value"]
    node = helper.make_node("Attention", names, outs, **attrs)
    g = helper.make_graph([node], name, inputs, [helper.make_tensor_value_info(o, TP.FLOAT, None) for o in outs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])
    m.ir_version = 10
    return m


def feeds_for(m, rng, cfg):
    qs, ks, vs, attrs, mask, past = cfg[:6]
    concrete = {"Q": qs, "K": ks, "V": vs}
    f = {}
    for i in m.graph.input:
        shape = [d.dim_value if d.dim_value else None for d in i.type.tensor_type.shape.dim]
        if None in shape:  # a symbolic dim: the configuration's length
            shape = concrete[i.name] if i.name in concrete else [s if s else past for s in shape]
        if i.type.tensor_type.elem_type == TP.BOOL:
            x = rng.random(shape) < 0.8
            x[..., 0] = True
        else:
            x = rng.standard_normal(shape).astype(np.float32)
        f[i.name] = x
    return f


def time_fn(fn, min_runs, min_time):
    return statistics.median(time_samples(fn, min_runs, min_time, warmup=3))


def bench_ort(path, feeds, threads, a):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        return time_fn(lambda: sess.run(None, feeds), a.min_runs, a.min_time), ""
    except Exception as e:  # a peer's refusal is reported, not fatal
        return None, str(e).splitlines()[0][:80]


def bench_alma(path, feeds, td, a):
    files = []
    for k, x in feeds.items():  # graph input order, as --data takes them
        files.append(os.path.join(td, k + ".npy"))
        np.save(files[-1], x)
    res = alma_bench(a.alma, path, ["--data", ",".join(files), "-c", a.conversions, "--threads", str(a.threads),
                                     "-n", str(a.min_runs), "--min-time", str(a.min_time)])
    return {c: lat and lat["p50"] for c, lat in res.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--alma", default="build/alma")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-runs", type=int, default=20)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--conversions", default="EAGER,FUSE+DNNL,FUSE+BLAS")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    convs = a.conversions.split(",")
    rng = np.random.default_rng(0)
    names = [n for n in a.only.split(",") if n] or list(CONFIGS)
    print("| configuration | " + " | ".join(convs) + " | ONNX Runtime | best alma / ORT |")
    print("|---" * (len(convs) + 3) + "|")
    for name in names:
        m = build(name, *CONFIGS[name])
        with tempfile.TemporaryDirectory() as td:
            path = os.path.join(td, name + ".onnx")
            onnx.save(m, path)
            feeds = feeds_for(m, rng, CONFIGS[name])
            res = bench_alma(path, feeds, td, a)
            ort_ms, why = bench_ort(path, feeds, a.threads, a)
        cells = [f"{res[c]:.3f}" if res.get(c) else "failed" for c in convs]
        fast = [res[c] for c in convs if res.get(c) and c != "EAGER"]
        ratio = f"{min(fast) / ort_ms:.2f}" if fast and ort_ms else "-"
        print(f"| {name} | " + " | ".join(cells) + f" | {f'{ort_ms:.3f}' if ort_ms else 'n/a: ' + why} | {ratio} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
