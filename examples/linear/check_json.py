"""Checks a results file written by alma_results_save_json / `alma bench --json`.

usage: /usr/bin/python3 check_json.py RESULTS.json [CONVERSION ...]

Passes (exit 0) when the file parses, has the top-level keys of docs/json.md, every result row has
status "ok" with a positive throughput and a passed output check, and, when CONVERSION names are
given, the rows are exactly those conversions in that order. Prints one line per row.
"""
import json
import math
import sys


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    errors = []
    for key in ("alma_version", "system", "model", "config", "results"):
        if key not in doc:
            errors.append(f"missing top-level key '{key}'")
    rows = doc.get("results") or []
    if not rows:
        errors.append("no result rows")
    for r in rows:
        name = r.get("conversion", "?")
        tp = r.get("throughput_samples_per_s")
        p50 = (r.get("latency_ms") or {}).get("p50")
        print(f"{name:24s} {r.get('status', '?'):12s} {tp if tp is not None else float('nan'):12.1f} samples/s"
              f"  p50 {p50 if p50 is not None else float('nan'):.4g} ms")
        if r.get("status") != "ok":
            errors.append(f"{name}: status {r.get('status')!r}: {r.get('error', '')}")
            continue
        if not isinstance(tp, (int, float)) or not math.isfinite(tp) or tp <= 0:
            errors.append(f"{name}: bad throughput {tp!r}")
        check = r.get("check") or {}
        if check.get("passed") is False:
            errors.append(f"{name}: output check against EAGER failed: {check}")
    want = sys.argv[2:]
    if want and [r.get("conversion") for r in rows] != want:
        errors.append(f"conversions {[r.get('conversion') for r in rows]} != expected {want}")
    for e in errors:
        print("error: " + e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
