#!/usr/bin/env python3
"""ONNX Runtime's int4 weight-only MatMuls (com.microsoft.MatMulNBits) through alma and ONNX Runtime.

Each configuration is a float MatMul (or an MLP of them) with random weights, quantized by ONNX
Runtime's own MatMulNBitsQuantizer (default QOperator format: MatMulNBits nodes, 4 bits, asymmetric
unless the name says sym), then timed with random float32 inputs:
  - alma: `alma bench` EAGER (the kernel in src/ops/contrib_nbits.c, one thread) at accuracy_level 0
    and 4, and --convs (default FOLD+FUSE+DNNL and FOLD+BLAS, which run it on --threads threads) at
    level 4,
  - ONNX Runtime CPU provider with --threads intra-op threads and with 1, at accuracy_level 0 (what
    the quantizer writes by default: float32 compute) and 4 (A rounded to int8 per block, which
    onnxruntime-genai's model builder writes for CPU).
Prints p50 latencies (ms) and the ratios alma / ORT at level 0 and at level 4 (docs/performance.md
has the results). With --repeat R each configuration is timed R times, alma and ONNX Runtime
alternating, and the best p50 of each is printed (a shared machine's load then hits both alike).

usage: nbits_bench.py --alma build/alma [--threads 2] [--min-runs 20] [--min-time 1] [--only NAME,...]
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
import onnx
from onnx import TensorProto as TP, helper, numpy_helper

# name -> (rows M, layer sizes [K, N1, N2, ...], block_size, symmetric)
CONFIGS = {
    "4096x4096_b32_m1": (1, [4096, 4096], 32, False),
    "4096x4096_b128_m1": (1, [4096, 4096], 128, False),
    "4096x4096_b32_sym_m1": (1, [4096, 4096], 32, True),
    "4096x4096_b32_m8": (8, [4096, 4096], 32, False),
    "4096x4096_b128_m8": (8, [4096, 4096], 128, False),
    "4096x4096_b32_m32": (32, [4096, 4096], 32, False),
    "4096x4096_b32_m128": (128, [4096, 4096], 32, False),
    "4096x4096_b32_m512": (512, [4096, 4096], 32, False),
    "4096x4096_b128_m128": (128, [4096, 4096], 128, False),
    "4096x4096_b128_m512": (512, [4096, 4096], 128, False),
    # a 4-layer MLP as an LLM block's projections: 2048 -> 5632 -> 2048 -> 5632 -> 2048, Relu between
    "mlp4_2048_5632_b32_m1": (1, [2048, 5632, 2048, 5632, 2048], 32, False),
    "mlp4_2048_5632_b32_m32": (32, [2048, 5632, 2048, 5632, 2048], 32, False),
}


def float_model(sizes, rng):
    nodes, inits, x = [], [], "A"
    for i, (k, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"W{i}"))
        y = "Y" if i == len(sizes) - 2 else f"h{i}"
        if i < len(sizes) - 2:
            nodes.append(helper.make_node("MatMul", [x, f"W{i}"], [f"m{i}"], name=f"mm{i}"))
            nodes.append(helper.make_node("Relu", [f"m{i}"], [y], name=f"relu{i}"))
        else:
            nodes.append(helper.make_node("MatMul", [x, f"W{i}"], [y], name=f"mm{i}"))
        x = y
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("A", TP.FLOAT, ["M", sizes[0]])],
                          [helper.make_tensor_value_info("Y", TP.FLOAT, ["M", sizes[-1]])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def quantize(m, block_size, sym):
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    q = MatMulNBitsQuantizer(m, block_size=block_size, is_symmetric=sym)
    q.process()
    return q.model.model


def with_accuracy_level(m, level):
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    for n in m2.graph.node:
        if n.op_type == "MatMulNBits":
            for a in list(n.attribute):
                if a.name == "accuracy_level":
                    n.attribute.remove(a)
            n.attribute.append(helper.make_attribute("accuracy_level", level))
    return m2


def bench_ort(m, feeds, threads, a):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return statistics.median(time_samples(lambda: sess.run(None, feeds), a.min_runs, a.min_time, warmup=3))
    except Exception as e:  # a peer's refusal is reported, not fatal
        print(f"   ONNX Runtime: {str(e).splitlines()[0][:100]}", file=sys.stderr)
        return None


def bench_alma(path, feeds, td, a, conv="EAGER"):
    f = os.path.join(td, "A.npy")
    np.save(f, feeds["A"])
    lat = alma_bench(a.alma, path, ["--data", f, "-c", conv, "--threads", str(a.threads), "-b", str(len(feeds["A"])),
                                    "-n", str(a.min_runs), "--min-time", str(a.min_time)]).get(conv)
    return lat and lat["p50"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--alma", default="build/alma")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-runs", type=int, default=20)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--only", default="")
    ap.add_argument("--convs", default="FOLD+FUSE+DNNL,FOLD+BLAS", help="alma conversions timed at level 4")
    ap.add_argument("--repeat", type=int, default=1, help="alternating alma / ORT rounds; the best p50 of each")
    ap.add_argument("--no-level0", action="store_true", help="time accuracy_level 4 only (alma and ORT)")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    names = [n for n in a.only.split(",") if n] or list(CONFIGS)
    t = a.threads
    convs = [c for c in a.convs.split(",") if c]
    print(f"| configuration | alma EAGER (1 thread) | alma EAGER acc4 |" + "".join(f" {c} {t}T acc4 |" for c in convs)
          + f" ORT {t}T | ORT 1T | ORT {t}T acc4 | ORT 1T acc4 | alma / ORT 1T | alma / ORT 1T acc4 |"
          + "".join(f" {c} / ORT {t}T acc4 |" for c in convs))
    print("|---" * (10 + 2 * len(convs)) + "|")
    for name in names:
        rows, sizes, bs, sym = CONFIGS[name]
        qm = quantize(float_model(sizes, rng), bs, sym)
        q4 = with_accuracy_level(qm, 4)
        feeds = {"A": rng.standard_normal((rows, sizes[0])).astype(np.float32)}
        best = lambda x, y: y if x is None else x if y is None else min(x, y)  # noqa: E731
        al, al4, o = None, [None] * (1 + len(convs)), [None] * 4
        with tempfile.TemporaryDirectory() as td:
            path = os.path.join(td, name + ".onnx")
            onnx.save(qm, path)
            path4 = os.path.join(td, name + "_acc4.onnx")
            onnx.save(q4, path4)
            for _ in range(a.repeat):
                if not a.no_level0:
                    al = best(al, bench_alma(path, feeds, td, a))
                al4 = [best(v, bench_alma(path4, feeds, td, a, c)) for v, c in zip(al4, ["EAGER"] + convs)]
                o = [v if a.no_level0 and i < 2 else best(v, bench_ort(m, feeds, th, a))
                     for i, (v, (m, th)) in enumerate(zip(o, [(m, th) for m in (qm, q4) for th in (t, 1)]))]

        def ms(v):
            return f"{v:.3f}" if v else "failed"

        def ratio(x, y):
            return f"{x / y:.2f}" if x and y else "-"
        print(f"| {name} | {ms(al)} | " + " | ".join(ms(v) for v in al4) + " | " + " | ".join(ms(v) for v in o)
              + f" | {ratio(al, o[1])} | {ratio(al4[0], o[3])} |" + "".join(f" {ratio(v, o[2])} |" for v in al4[1:]),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
