#!/usr/bin/env python3
"""com.microsoft GroupQueryAttention (what onnxruntime-genai's model builder writes) through alma and
ONNX Runtime, in one run.

Each configuration is one GroupQueryAttention node (float32, random inputs, separate Q/K/V, causal,
no rotary): a decode step (S = 1) against a KV cache of `past` rows, or a first prompt of S tokens.
alma runs it with `alma bench` (EAGER: one thread; FOLD+BLAS and FOLD+FUSE+DNNL: the same kernel with
its (batch, KV head) pairs on the runtime's --threads threads), ONNX Runtime with its CPU provider at
--threads and at 1 intra-op thread. With --repeat R each configuration is timed R times, alma and ONNX
Runtime alternating, and the best p50 of each is printed (a shared machine's load then hits both
alike). Prints p50 latencies (ms) and the ratios alma / ORT (docs/performance.md has the results).

usage: gqa_bench.py --alma build/alma [--threads 2] [--min-runs 20] [--min-time 1] [--repeat 1]
                    [--conversions EAGER,FOLD+BLAS,FOLD+FUSE+DNNL] [--only NAME,...]
(a python with onnx, onnxruntime and numpy: .venv-ort/bin/python)
"""
import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_bench import bench_alma, bench_ort  # noqa: E402
import onnx
from onnx import TensorProto as TP, helper, numpy_helper

# name -> (B, S, past rows, num_heads, kv_num_heads, head size)
CONFIGS = {
    "decode_past1023_n32_kv8_h128": (1, 1, 1023, 32, 8, 128),
    "decode_past1023_n32_kv8_h64_b4": (4, 1, 1023, 32, 8, 64),
    "decode_past255_n32_kv8_h128": (1, 1, 255, 32, 8, 128),
    "decode_past1023_n16_kv1_h96": (1, 1, 1023, 16, 1, 96),
    "prefill_s128_n32_kv8_h128": (1, 128, 0, 32, 8, 128),
    "prefill_s512_n32_kv8_h128": (1, 512, 0, 32, 8, 128),
}


def build(B, S, P, N, Nkv, D):
    T = P + S
    vi = helper.make_tensor_value_info
    ins = [vi("q", TP.FLOAT, [B, S, N * D]), vi("k", TP.FLOAT, [B, S, Nkv * D]), vi("v", TP.FLOAT, [B, S, Nkv * D])]
    names = ["q", "k", "v"]
    if P:
        ins += [vi("past_key", TP.FLOAT, [B, Nkv, P, D]), vi("past_value", TP.FLOAT, [B, Nkv, P, D])]
        names += ["past_key", "past_value"]
    else:
        names += ["", ""]
    names += ["seqlens_k", "total_sequence_length"]
    # the lengths as initializers (alma bench's --data stacks samples along a first axis: no scalars)
    inits = [numpy_helper.from_array(np.full(B, T - 1, np.int32), "seqlens_k"),
             numpy_helper.from_array(np.array(T, np.int32), "total_sequence_length")]
    node = helper.make_node("GroupQueryAttention", names, ["o", "present_key", "present_value"], domain="com.microsoft",
                            num_heads=N, kv_num_heads=Nkv)
    outs = [vi("o", TP.FLOAT, [B, S, N * D]), vi("present_key", TP.FLOAT, [B, Nkv, T, D]),
            vi("present_value", TP.FLOAT, [B, Nkv, T, D])]
    g = helper.make_graph([node], "gqa", ins, outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    rng = np.random.default_rng(0)
    feeds = {"q": rng.standard_normal((B, S, N * D)).astype(np.float32),
             "k": rng.standard_normal((B, S, Nkv * D)).astype(np.float32),
             "v": rng.standard_normal((B, S, Nkv * D)).astype(np.float32)}
    if P:
        feeds["past_key"] = rng.standard_normal((B, Nkv, P, D)).astype(np.float32)
        feeds["past_value"] = rng.standard_normal((B, Nkv, P, D)).astype(np.float32)
    return m, feeds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--alma", default="build/alma")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-runs", type=int, default=20)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--conversions", default="EAGER,FOLD+BLAS,FOLD+FUSE+DNNL")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    convs = a.conversions.split(",")
    t = a.threads
    names = [n for n in a.only.split(",") if n] or list(CONFIGS)
    print("| configuration | " + " | ".join(f"{c} ({1 if c == 'EAGER' else t}T)" for c in convs)
          + f" | ORT {t}T | ORT 1T | EAGER / ORT 1T | best {t}T alma / ORT {t}T |")
    print("|---" * (len(convs) + 5) + "|")
    best = lambda x, y: y if x is None else x if y is None else min(x, y)  # noqa: E731
    for name in names:
        m, feeds = build(*CONFIGS[name])
        res, o = {}, [None, None]
        with tempfile.TemporaryDirectory() as td:
            path = os.path.join(td, name + ".onnx")
            onnx.save(m, path)
            for _ in range(a.repeat):
                for c in convs:  # EAGER is single-threaded whatever --threads says
                    r = bench_alma(path, feeds, td, argparse.Namespace(**{**vars(a), "conversions": c}))
                    res[c] = best(res.get(c), r.get(c))
                o = [best(v, bench_ort(path, feeds, th, a)[0]) for v, th in zip(o, (t, 1))]
        cells = [f"{res[c]:.3f}" if res.get(c) else "failed" for c in convs]
        par = [res[c] for c in convs if res.get(c) and c != "EAGER"]
        r1 = f"{res['EAGER'] / o[1]:.2f}" if res.get("EAGER") and o[1] else "-"
        rt = f"{min(par) / o[0]:.2f}" if par and o[0] else "-"
        print(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(f"{v:.3f}" if v else "failed" for v in o)
              + f" | {r1} | {rt} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
