#!/usr/bin/env python3
"""CPU time per inference of recurrent and strided-softmax nodes: alma's conversions beside ONNX
Runtime, on one thread, so the numbers hold on a shared machine (CPU time, not wall clock); with
--threads T (T > 1), the wall-clock p50 at T threads instead (what splitting work over threads buys).

Models (written with onnx.helper, random weights):
    lstm_ocr   bidirectional LSTM, 40 steps, batch 1, input 512, hidden 256 (a text recogniser's head)
    lstm_vad   forward LSTM, 64 steps, batch 1, input 128, hidden 128 (a voice-activity detector)
    lstm_wide  bidirectional LSTM, 22 steps, batch 1, input 512, hidden 512 (ddddocr's head: R 4 MB a
               direction, more than a core's L2), and lstm_wide_fwd, its forward direction alone
    gru        bidirectional GRU, 40 steps, batch 4, input 256, hidden 192 (linear_before_reset=1)
    dfl        Softmax over axis 1 of [1, 16, 4, 2100] (YOLOv8's distribution-focal-loss head)
With --wild CACHE, also the models of tests/wild that hold LSTM nodes (fetched there with
`tests/wild/wild.py fetch CACHE`), on their own inputs: ddddocr_ocr (a CNN and a bidirectional LSTM),
silero_vad_seq and faster_whisper_vad (62 windows through Conv layers and an LSTM), oww_hey_mycroft
(two LSTMs), and the com.microsoft.DynamicQuantizeLSTM models ONNX Runtime's quantizer made:
ddddocr_ocr_int8, tashkeel_bilstm_int8 (three bidirectional layers), tashkeel_rawi_v2_int8 (two).
For each conversion, `alma bench -n N --threads 1` runs twice (N small and large); the difference in
the children's CPU time over the difference in timed runs is the CPU time of one inference (start-up,
build, warm-up and the output check cancel out). ONNX Runtime: InferenceSession.run in this process, one intra-op
thread, timed by time.process_time. With --threads T: `alma bench --threads T` p50 and ONNX
Runtime's p50 (T intra-op threads, wall clock) in --rounds rounds that alternate, the median of each.

    .venv-test/bin/python bench/rnn_bench.py --alma build/alma [--conversions EAGER,DNNL,BLAS,XNNPACK] [--wild CACHE]
        [--threads 2 [--rounds 3]]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def rnn_model(path, op, direction, S, B, I, H, **attrs):
    rng = np.random.default_rng(0)
    nd = 2 if direction == "bidirectional" else 1
    G = 4 if op == "LSTM" else 3
    sc = 1 / np.sqrt(H)
    inits = [numpy_helper.from_array((rng.standard_normal((nd, G * H, I)) * sc).astype(np.float32), "W"),
             numpy_helper.from_array((rng.standard_normal((nd, G * H, H)) * sc).astype(np.float32), "R"),
             numpy_helper.from_array((rng.standard_normal((nd, 2 * G * H)) * 0.1).astype(np.float32), "B")]
    node = helper.make_node(op, ["X", "W", "R", "B"], ["Y"], hidden_size=H, direction=direction, **attrs)
    g = helper.make_graph([node], op.lower(), [helper.make_tensor_value_info("X", TensorProto.FLOAT, [S, B, I])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [S, nd, B, H])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.save(m, path)
    return {"X": rng.standard_normal((S, B, I)).astype(np.float32)}


def softmax_model(path):
    node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    g = helper.make_graph([node], "dfl", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 4, 2100])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 4, 2100])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)
    return {"x": np.random.default_rng(0).standard_normal((1, 16, 4, 2100)).astype(np.float32) * 3}


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def alma_cpu_ms(alma, model, conv, n_small, n_large, data=None):
    """CPU ms of one run of the model (one batch; n_small and n_large count batches)."""
    cpu, runs = [], []
    with tempfile.TemporaryDirectory() as td:
        batch = 1
        for n in (n_small, n_large):
            out = os.path.join(td, "r.json")
            t0 = children_cpu()
            r = subprocess.run([alma, "bench", model, "-c", conv, "--threads", "1", "-n", str(n * batch),
                                "--min-time", "0", "--warmup", "2", "--warmup-time", "0", "-q", "--no-cache",
                                "--json", out] + (["--data", data] if data else []),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode:
                return None
            cpu.append(children_cpu() - t0)
            with open(out) as f:
                row = json.load(f)["results"][0]
            if row.get("status") != "ok":
                return None
            runs.append(row["latency_ms"]["n"])
            batch = max(1, int(row.get("batch_size") or 1))  # -n counts samples
    return (cpu[1] - cpu[0]) / (runs[1] - runs[0]) * 1e3 if runs[1] > runs[0] else None


def alma_p50_ms(alma, model, conv, threads, data=None):
    """alma bench's p50 (ms) of one batch at `threads` threads, or None."""
    with tempfile.TemporaryDirectory() as td:
        out = os.path.join(td, "r.json")
        r = subprocess.run([alma, "bench", model, "-c", conv, "--threads", str(threads), "-n", "50", "--min-time",
                            "0.5", "-q", "--no-cache", "--json", out] + (["--data", data] if data else []),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode:
            return None
        with open(out) as f:
            row = json.load(f)["results"][0]
        return float(row["latency_ms"]["p50"]) if row.get("status") == "ok" else None


def ort_p50_ms(model, feeds, threads, n=50, seconds=0.5):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    s.run(None, feeds)
    ts, t0 = [], time.perf_counter()
    while len(ts) < n or time.perf_counter() - t0 < seconds:
        t = time.perf_counter()
        s.run(None, feeds)
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)) * 1e3


WILD = {"ddddocr_ocr": 1, "silero_vad_seq": 10, "faster_whisper_vad": 10, "oww_hey_mycroft": 20, "ddddocr_ocr_int8": 1,
        "tashkeel_bilstm_int8": 10, "tashkeel_rawi_v2_int8": 10}


def wild_models(cache):
    """(name, model path, alma --data directory, ONNX Runtime feeds, runs per --samples) of the
    recurrent models of tests/wild found in cache."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "wild"))
    import wild
    out = []
    for m in wild.manifest():
        d = os.path.join(cache, m["name"])
        if m["name"] not in WILD or not os.path.exists(os.path.join(d, "ref.json")):
            continue
        with open(os.path.join(d, "ref.json")) as f:
            inputs = json.load(f)["inputs"]
        feeds = {k: np.load(os.path.join(d, "in", fn)) for k, fn in inputs.items()}
        bd = os.path.join(d, "bench_cpu")  # one batch: a .npy per input (in b0/ when there are several)
        sub = bd if len(feeds) == 1 else os.path.join(bd, "b0")
        os.makedirs(sub, exist_ok=True)
        for k, v in feeds.items():
            np.save(os.path.join(sub, k + ".npy"), v)
        out.append((m["name"], wild.model_path(cache, m), bd, feeds, WILD[m["name"]]))
    return out


def ort_cpu_ms(model, feeds, n):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3  # ddddocr_ocr's declared output shape is wrong: one warning per run
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    for _ in range(3):
        s.run(None, feeds)
    t0 = time.process_time()
    for _ in range(n):
        s.run(None, feeds)
    return (time.process_time() - t0) / n * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--alma", required=True)
    ap.add_argument("--conversions", default="EAGER,DNNL,BLAS,XNNPACK")
    ap.add_argument("--samples", type=int, default=60, help="runs the large bench adds, and ONNX Runtime's runs (default 60)")
    ap.add_argument("--wild", metavar="CACHE", help="also the recurrent models of tests/wild fetched into CACHE")
    ap.add_argument("--threads", type=int, default=1, help="above 1: wall-clock p50 at this many threads")
    ap.add_argument("--rounds", type=int, default=3, help="with --threads: alternating rounds (default 3)")
    a = ap.parse_args()
    try:
        import onnxruntime  # noqa: F401
        have_ort = True
    except ImportError:
        have_ort = False
    convs = a.conversions.split(",")
    with tempfile.TemporaryDirectory() as td:
        models = {  # name: (writer, runs per --samples: short runs need more to rise above start-up noise)
            "lstm_ocr": (lambda p: rnn_model(p, "LSTM", "bidirectional", 40, 1, 512, 256), 1),
            "lstm_vad": (lambda p: rnn_model(p, "LSTM", "forward", 64, 1, 128, 128), 5),
            "lstm_wide": (lambda p: rnn_model(p, "LSTM", "bidirectional", 22, 1, 512, 512), 1),
            "lstm_wide_fwd": (lambda p: rnn_model(p, "LSTM", "forward", 22, 1, 512, 512), 1),
            "gru": (lambda p: rnn_model(p, "GRU", "bidirectional", 40, 4, 256, 192, linear_before_reset=1), 1),
            "dfl": (softmax_model, 20),
        }
        print(f"{'model':18s} " + " ".join(f"{c:>10s}" for c in convs) + (f" {'ORT':>10s}" if have_ort else "")
              + ("   (CPU ms per inference, 1 thread)" if a.threads <= 1 else
                 f"   (p50 ms, {a.threads} threads, median of {a.rounds} alternating rounds)"))
        todo = []
        for name, (make, mult) in models.items():
            path = os.path.join(td, name + ".onnx")
            todo.append((name, path, None, make(path), mult))
        todo += wild_models(a.wild) if a.wild else []
        for name, path, data, feeds, mult in todo:
            runs = a.samples * mult
            if a.threads > 1:
                rounds = []
                for _ in range(max(1, a.rounds)):
                    rounds.append([alma_p50_ms(a.alma, path, c, a.threads, data) for c in convs] +
                                  ([ort_p50_ms(path, feeds, a.threads)] if have_ort else []))
                row = [None if any(r[k] is None for r in rounds) else float(np.median([r[k] for r in rounds]))
                       for k in range(len(rounds[0]))]
            else:
                row = [alma_cpu_ms(a.alma, path, c, 1, 1 + runs, data) for c in convs]
                if have_ort:
                    row.append(ort_cpu_ms(path, feeds, runs))
            print(f"{name:18s} " + " ".join(f"{v:10.3f}" if v is not None else f"{'-':>10s}" for v in row))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
