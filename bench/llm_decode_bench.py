#!/usr/bin/env python3
"""Decoder-LLM prefill and KV-cache decode graphs of a bigger config than sweep_llm.py's, through alma
and ONNX Runtime in one run (docs/models.md's latency table).

export (with .venv-hf: transformers 4.30.2, torch): GPT-2, GPT-NeoX, BLOOM and GPTBigCode with hidden
512, 8 heads, 4 layers (GPT-NeoX: intermediate 2048, rotary_pct 0.5), vocabulary 1000, random weights (seed 0),
exported by tests/models/sweep_llm.py's export_one at --opset: prefill over 128 tokens and decode of
one token after a past of 127, batch 2 (the second row's mask has zeros), plus NAME.feeds.npz.

time (a python with onnxruntime and numpy, .venv-test): for each graph, --rounds rounds, alma
(`alma bench --threads T --min-time S`, p50 of each conversion) and ONNX Runtime (CPU provider, T
intra-op threads, all optimizations, median of >= S seconds of runs) alternating, so a shared
machine's load hits both alike; prints each round's p50 (and fastest run) and, per conversion, the
best and median round's p50 and the fastest run of all rounds.

    .venv-hf/bin/python bench/llm_decode_bench.py export llm512
    .venv-test/bin/python bench/llm_decode_bench.py time llm512 --alma build/alma \\
        [--graphs gpt2_decode,gpt_neox_decode] [--conversions FOLD+FUSE+DNNL,FOLD+FUSE+BLAS] [--rounds 4]
"""
import argparse
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def export(outdir, opset):
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "models"))
    import warnings
    warnings.filterwarnings("ignore")
    import sweep_llm
    import transformers as T
    specs = {
        "gpt2": lambda: T.GPT2LMHeadModel(T.GPT2Config(n_embd=512, n_layer=4, n_head=8, n_positions=256,
                                                       vocab_size=1000)),
        "gpt_neox": lambda: T.GPTNeoXForCausalLM(T.GPTNeoXConfig(hidden_size=512, intermediate_size=2048,
                                                                  num_hidden_layers=4, num_attention_heads=8,
                                                                  rotary_pct=0.5, max_position_embeddings=256,
                                                                  vocab_size=1000)),
        "bloom": lambda: T.BloomForCausalLM(T.BloomConfig(hidden_size=512, n_layer=4, n_head=8, vocab_size=1000)),
        "gpt_bigcode": lambda: T.GPTBigCodeForCausalLM(T.GPTBigCodeConfig(n_embd=512, n_layer=4, n_head=8,
                                                                          n_positions=256, vocab_size=1000)),
    }
    os.makedirs(outdir, exist_ok=True)
    for name, build in specs.items():
        for f in sweep_llm.export_one(build, outdir, name, opset, batch=2, seq=128, past=127):
            print("exported", os.path.join(outdir, f + ".onnx"), flush=True)
    return 0


def bench_alma(alma, path, feeds, td, convs, threads, min_time):
    import numpy as np
    # one batch directory holding <input>.npy: each input as the whole tensor, whatever its first
    # axis (stacked samples with -b would split BLOOM's [batch*heads, ...] cache wrongly)
    bdir = os.path.join(td, "batches", "b0")
    os.makedirs(bdir, exist_ok=True)
    for k, x in feeds.items():
        np.save(os.path.join(bdir, k + ".npy"), x)
    sys.path.insert(0, HERE)
    from timing import alma_bench
    res = alma_bench(alma, path, ["--data", os.path.dirname(bdir), "-c", ",".join(convs), "--threads", str(threads),
                                  "-n", "20", "--min-time", str(min_time)])
    return {c: lat and (lat["p50"], lat["min"]) for c, lat in res.items()}


def bench_ort(sess, feeds, min_time):
    sys.path.insert(0, HERE)
    from timing import time_samples
    t = time_samples(lambda: sess.run(None, feeds), 20, min_time)
    return statistics.median(t), min(t)


def time_graphs(a):
    import numpy as np
    import onnxruntime as ort
    convs = a.conversions.split(",")
    for g in a.graphs.split(","):
        path = os.path.join(a.dir, f"{g}_op{a.opset}.onnx")
        z = np.load(os.path.join(a.dir, f"{g}_op{a.opset}.feeds.npz"))
        feeds = {k: z[k] for k in z.files}
        so = ort.SessionOptions()
        so.intra_op_num_threads = a.threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        almas = a.alma.split(",")  # several binaries (a build before and after a change): "i:CONVERSION"
        keys = convs if len(almas) == 1 else [f"{i}:{c}" for i in range(len(almas)) for c in convs]
        rows = {c: [] for c in keys + ["ORT"]}
        with tempfile.TemporaryDirectory() as td:
            for r in range(a.rounds):
                for i, alma in enumerate(almas):
                    res = bench_alma(alma, path, feeds, td, convs, a.threads, a.min_time)
                    for c in convs:
                        rows[c if len(almas) == 1 else f"{i}:{c}"].append(res.get(c))
                rows["ORT"].append(bench_ort(sess, feeds, a.min_time))
                print(f"{g} round {r + 1} p50 (min): " + ", ".join(
                    f"{c} {v[-1][0]:.3f} ({v[-1][1]:.3f})" if v[-1] else f"{c} failed" for c, v in rows.items()),
                    flush=True)
        for c, v in rows.items():
            ok = [x for x in v if x]
            if ok:
                p50 = [x[0] for x in ok]
                print(f"{g} {c}: p50 best {min(p50):.3f} ms, median {statistics.median(p50):.3f} ms; "
                      f"fastest run {min(x[1] for x in ok):.3f} ms ({len(ok)} rounds)")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("export", "time"))
    ap.add_argument("dir")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--alma", default="build/alma",
                    help="alma binary, or several comma separated (timed in turn each round, shown as i:CONVERSION)")
    ap.add_argument("--graphs", default="gpt2_decode,gpt_neox_decode")
    ap.add_argument("--conversions", default="FOLD+FUSE+DNNL,FOLD+FUSE+BLAS,FOLD+BLAS")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=4)
    a = ap.parse_args()
    return export(a.dir, a.opset) if a.step == "export" else time_graphs(a)


if __name__ == "__main__":
    sys.exit(main())
