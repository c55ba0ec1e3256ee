#!/usr/bin/env python3
"""ONNX Runtime through alma's ORT runtime beside ONNX Runtime timed directly from Python, in one run.

For each model and batch size, alternating `rounds` times: `alma bench MODEL -c ORT` (its p50 per
batch) and the same model in an InferenceSession created here with the ORT runtime's session options
(intra-op threads, inter-op 1, sequential, every graph optimization, spinning stopped at the end of
each run unless --spinning says otherwise; the same value goes to alma as -O ort.spinning=...), fed random float inputs of the same shapes and
timed by wall clock per call (p50). Prints both medians over the rounds, their ratio (alma / direct;
the issue's goal is within 5%) and the identity-call cost alma measured for its binding. Run it with
the python of the environment alma's ORT loads (ALMA_ORT_PYTHON), so both use the same onnxruntime:

  .venv-test/bin/python bench/ort_overhead.py --alma build/alma examples/models/mnist_cnn.onnx \\
      [more.onnx ...] [--batch-sizes 1,32] [--threads 2] [--rounds 3] [--json out.json]

Models whose inputs are not all float32 or whose non-batch dims are symbolic are skipped with the
reason. Timings on a loaded machine are not comparable: run it on an idle one.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import time_samples  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def alma_row(alma, model, batch, threads, min_time, env, spinning):
    with tempfile.TemporaryDirectory() as td:
        out = os.path.join(td, "r.json")
        subprocess.run([alma, "bench", model, "-c", "ORT", "-b", str(batch), "--threads", str(threads), "--min-time",
                        str(min_time), "-O", f"ort.spinning={spinning}", "-q", "--no-cache", "--json", out],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        if not os.path.exists(out):
            return None
        with open(out) as f:
            r = json.load(f)["results"][0]
    return r if r.get("status") == "ok" else {"failed": r.get("error")}


def direct_session(model, threads, spin):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    if spin == "off":
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    elif spin == "run":
        so.add_session_config_entry("session.force_spinning_stop", "1")
    return ort.InferenceSession(model, sess_options=so, providers=["CPUExecutionProvider"])


def feeds_for(sess, batch, rng):
    feeds = {}
    for i in sess.get_inputs():
        if i.type != "tensor(float)":
            return None, f"input {i.name} is {i.type}, not float"
        shape = list(i.shape)
        if shape:
            shape[0] = batch  # alma's -b sets the first dim too
        if any(not isinstance(d, int) for d in shape):
            return None, f"input {i.name} has symbolic dims {i.shape} beyond the batch"
        feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds, None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", default=[os.path.join(ROOT, "examples", "models", "mnist_cnn.onnx")])
    ap.add_argument("--alma", default=os.path.join(ROOT, "build", "alma"))
    ap.add_argument("--batch-sizes", default="1,32")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--spinning", choices=("run", "on", "off"), default="run",
                    help="ONNX Runtime's intra-op spinning, on both sides (alma's ort.spinning option)")
    ap.add_argument("--min-time", type=float, default=2.0, help="seconds each timed phase lasts at least")
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args()
    env = dict(os.environ, ALMA_ORT_PYTHON=os.environ.get("ALMA_ORT_PYTHON", sys.executable))
    rng = np.random.default_rng(0)
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    print(f"onnxruntime {ort.__version__} ({sys.executable}); {cpu}; {a.threads} threads; "
          f"load average {os.getloadavg()[0]:.1f} at start")
    print(f"{'model':<24} {'batch':>5} {'alma ORT p50 ms':>16} {'direct p50 ms':>14} {'ratio':>7} {'identity us':>12}")
    rows = []
    for model in a.models:
        sess = direct_session(model, a.threads, a.spinning)
        for b in [int(x) for x in a.batch_sizes.split(",")]:
            feeds, why = feeds_for(sess, b, rng)
            name = os.path.basename(model)
            if feeds is None:
                print(f"{name:<24} {b:>5} skipped: {why}")
                continue
            al, di, ident = [], [], []
            for _ in range(a.rounds):
                r = alma_row(a.alma, model, b, a.threads, a.min_time, env, a.spinning)
                if not r or "failed" in r:
                    print(f"{name:<24} {b:>5} alma failed: {(r or {}).get('failed', 'no JSON written')}")
                    break
                al.append(r["latency_ms"]["p50"])
                ident.append((r.get("runtime_info") or {}).get("identity_call_us") or float("nan"))
                t = time_samples(lambda: sess.run(None, feeds), 20, a.min_time)
                di.append(statistics.median(t))
            if len(al) != a.rounds:
                continue
            am, dm = statistics.median(al), statistics.median(di)
            row = {"model": name, "batch": b, "threads": a.threads, "alma_p50_ms": am, "direct_p50_ms": dm,
                   "ratio": am / dm, "identity_call_us": statistics.median(ident), "alma_rounds": al, "direct_rounds": di}
            rows.append(row)
            print(f"{name:<24} {b:>5} {am:>16.4f} {dm:>14.4f} {am / dm:>7.3f} {row['identity_call_us']:>12.2f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"onnxruntime": ort.__version__, "cpu": cpu, "rows": rows}, f, indent=1)
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
