#!/usr/bin/env python3
"""The same alma conversion timed from Python (alma.benchmark_model) and from the CLI (alma bench),
interleaved: CLI, Python, CLI, Python, ... K rounds. Prints each run's median batch latency, then
the median of the rounds' paired ratios (Python / CLI) with its 95% order-statistic interval (a
load that changes between rounds moves both sides of a pair alike), and the ratio of the fastest
batches of each side (the least load-sensitive figure).

Usage: bench/python_vs_cli.py ALMA_CLI MODEL.onnx CONVERSION [--rounds K] [--batch-size B]
       [--min-time S] [--threads N]
(the alma package from python/ and libalma from ALMA_LIBRARY or the source tree's build)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import alma  # noqa: E402
from alma import _stats  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli")
    ap.add_argument("model")
    ap.add_argument("conversion")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--min-time", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    cfg = {"batch_size": a.batch_size, "n_samples": 1, "min_time_s": a.min_time, "threads": a.threads,
           "warmup_s": 0.5, "verbose": 0}
    cli_m, py_m, cli_min, py_min = [], [], [], []
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        for k in range(a.rounds):
            subprocess.run([a.cli, "bench", a.model, "-c", a.conversion, "-b", str(a.batch_size), "-n", "1",
                            "--min-time", str(a.min_time), "--threads", str(a.threads), "--warmup-time", "0.5",
                            "-q", "--json", out], check=True, stdout=subprocess.DEVNULL)
            lat = json.load(open(out))["results"][0]["latency_ms"]
            cli_m.append(lat["p50"])
            cli_min.append(lat["min"])
            r = alma.benchmark_model(a.model, cfg, [a.conversion])[0]
            py_m.append(r.latency_ms["p50"])
            py_min.append(r.latency_ms["min"])
            print(f"round {k + 1}: CLI median {cli_m[-1]:.4f} ms, Python median {py_m[-1]:.4f} ms", flush=True)
    c, p = statistics.median(cli_m), statistics.median(py_m)
    ratios = sorted(pm / cm for pm, cm in zip(py_m, cli_m))
    ci = _stats.median_ci_ranks(len(ratios))
    ci_text = f"[{ratios[ci[0] - 1]:.4f}, {ratios[ci[1] - 1]:.4f}]" if ci else "(too few rounds for an interval)"
    print(f"{a.conversion} on {os.path.basename(a.model)}, batch {a.batch_size}, {a.threads} thread(s), "
          f"{a.rounds} rounds of {a.min_time:g} s each side")
    print(f"median of medians: CLI {c:.4f} ms, Python {p:.4f} ms")
    print(f"Python/CLI, median of the paired ratios: {statistics.median(ratios):.4f} {ci_text} 95% CI")
    print(f"Python/CLI, fastest batch: {min(py_min) / min(cli_min):.4f} ({min(py_min):.4f} / {min(cli_min):.4f} ms)")

if __name__ == "__main__":
    main()
