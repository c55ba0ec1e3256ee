"""Shared by the bench/ scripts: a peer's call timed by wall clock (alma times itself), and alma bench run
for its JSON rows."""
import json
import os
import subprocess
import tempfile
import time


def time_samples(fn, min_runs, min_time, warmup=3, cap=100000):
    """Calls fn `warmup` times, then until it has run at least min_runs times AND for min_time
    seconds (at most `cap` samples); returns each timed call's latency in ms."""
    for _ in range(warmup):
        fn()
    samples, t_end = [], time.perf_counter() + min_time
    while (len(samples) < min_runs or time.perf_counter() < t_end) and len(samples) < cap:
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return samples


def alma_bench(alma, path, args, env=None):
    """Runs `alma bench PATH ARGS -q --keep-going --json FILE` and returns {conversion: the row's
    latency_ms object (p50, min, ...)} for rows that ran and whose output check did not fail, None for
    the others; {} when alma wrote no JSON (it could not start)."""
    with tempfile.TemporaryDirectory() as td:
        out = os.path.join(td, "r.json")
        subprocess.run([alma, "bench", path, *args, "-q", "--keep-going", "--json", out], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=env)
        if not os.path.exists(out):
            return {}
        with open(out) as f:
            rows = json.load(f)["results"]
    res = {}
    for r in rows:
        ok = r.get("status") == "ok" and r.get("latency_ms") and (r.get("check") or {}).get("passed", True) is not False
        res[r["conversion"]] = r["latency_ms"] if ok else None
    return res
