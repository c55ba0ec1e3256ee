"""Do alma's numbers reproduce between processes and between invocations? (docs/methodology.md,
Repeats.) For one model and conversion:

1. `alma bench --repeat K` once: the median of medians, its between-process 95% CI and the 95%
   prediction interval of one more process's median (`next95`);
2. K fresh `alma bench` processes, one after another: how many of their medians each covers;
3. `alma bench --repeat K` again: how far its median of medians is from the first one's.

Each step also says how many of its processes were disturbed (contention in the timed phase).

usage: python3 bench/repro_check.py ALMA MODEL CONVERSION [-k 5] [-- extra alma bench arguments]
e.g.   python3 bench/repro_check.py build/alma examples/models/mnist_cnn.onnx FOLD+EAGER -- --threads 1 --min-time 2
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def bench(alma, model, conv, args, repeat):
    with tempfile.TemporaryDirectory() as td:
        out = os.path.join(td, "r.json")
        cmd = [alma, "bench", model, "-c", conv, "--no-cache", "-q", "--json", out, *args]
        if repeat > 1:
            cmd += ["--repeat", str(repeat)]
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0 or not os.path.exists(out):
            sys.exit(f"alma bench failed (exit {p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
        with open(out) as f:
            d = json.load(f)
    r = d["results"][0]
    if r["status"] != "ok":
        sys.exit(f"{conv}: {r['status']}: {r.get('error')}")
    return r, d["system"]


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("alma")
    ap.add_argument("model")
    ap.add_argument("conversion")
    ap.add_argument("-k", type=int, default=5, help="processes per repeat run and fresh processes (default 5)")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args(argv)

    first, system = bench(a.alma, a.model, a.conversion, extra, a.k)
    rep1 = first["repeats"]
    fresh = [bench(a.alma, a.model, a.conversion, extra, 1)[0] for _ in range(a.k)]
    second, _ = bench(a.alma, a.model, a.conversion, extra, a.k)
    rep2 = second["repeats"]

    lo, hi = rep1["ci95"]
    meds = [r["latency_ms"]["p50"] for r in fresh]
    covered = sum(lo <= m <= hi for m in meds)
    plo, phi = rep1.get("next95") or (float("nan"), float("nan"))
    covered_next = sum(plo <= m <= phi for m in meds)
    drift = rep2["median_ms"] / rep1["median_ms"] - 1
    res = {
        "machine": f"{system.get('cpu_model')}, {system.get('physical_cores')} cores",
        "load_average": system.get("load_average"),
        "model": a.model, "conversion": a.conversion, "args": extra, "k": a.k,
        "repeat_1": {"median_ms": rep1["median_ms"], "ci95": rep1["ci95"], "spread": rep1["spread"],
                     "process_medians": [x["median_ms"] for x in rep1["runs"]], "disturbed": rep1["n_disturbed"]},
        "fresh_medians": meds, "fresh_disturbed": sum(bool(r["disturbed"]) for r in fresh),
        "fresh_within_ms": [r["latency_ms"]["median_ci95"] for r in fresh],
        "covered": covered, "next95": [plo, phi], "covered_by_next95": covered_next,
        "repeat_2": {"median_ms": rep2["median_ms"], "ci95": rep2["ci95"], "spread": rep2["spread"],
                     "process_medians": [x["median_ms"] for x in rep2["runs"]], "disturbed": rep2["n_disturbed"]},
        "repeat_drift": drift,
    }
    print(f"{a.conversion} on {a.model} ({res['machine']}, load {res['load_average']})")
    print(f"--repeat {a.k}:  median of medians {rep1['median_ms']:.4g} ms, 95% CI [{lo:.4g}, {hi:.4g}], "
          f"spread {100 * rep1['spread']:.1f}%, {rep1['n_disturbed']} of {a.k} disturbed")
    print(f"  a new process's median, 95% prediction interval: [{plo:.4g}, {phi:.4g}]")
    print(f"fresh processes: medians {', '.join(f'{m:.4g}' for m in meds)} ms; {covered} of {a.k} inside the CI, "
          f"{covered_next} of {a.k} inside the prediction interval; {res['fresh_disturbed']} disturbed")
    print(f"--repeat {a.k} again: {rep2['median_ms']:.4g} ms [{rep2['ci95'][0]:.4g}, {rep2['ci95'][1]:.4g}], "
          f"{100 * drift:+.1f}% from the first; {rep2['n_disturbed']} of {a.k} disturbed")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
