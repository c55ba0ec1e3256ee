"""Running `alma run` from the python checks: inputs saved as .npy files and passed with --input,
outputs written to a directory as <output name>.npy. numpy only.

Import from a script with
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "<up>", "common"))
    from alma_cli import alma_run, read_outputs
"""
import json
import os
import subprocess

import numpy as np


def available(alma, conversions):
    """The conversions (preset names as `alma list` prints them) this build can run here."""
    rows = [ln.split() for ln in subprocess.run([alma, "list"], capture_output=True, text=True).stdout.splitlines()]
    return [c for c in conversions if any(r[1:3] == [c, "yes"] for r in rows if len(r) >= 3)]


def alma_run(alma, model, conv, feeds, work, *extra, check=True, timeout=None):
    """Runs `alma run MODEL -c CONV --output-dir WORK [extra...]` with feeds {name: array}; returns
    the CompletedProcess. check: a non-zero exit raises RuntimeError with alma's message."""
    os.makedirs(work, exist_ok=True)
    args = [alma, "run", model, "-c", conv, "--output-dir", work, *extra]
    for k, v in feeds.items():
        # exporters' input names may hold '/' or ':' (tf2onnx: "einsum/inputs_1:0"): not in a file name
        f = os.path.join(work, "".join(c if c.isalnum() or c in "._-" else "_" for c in k) + ".npy")
        np.save(f, v)
        args += ["--input", f"{k}={f}"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode:
        raise RuntimeError(f"alma run {conv} failed: {r.stderr.strip()}")
    return r


def read_outputs(work, names):
    """The outputs alma_run wrote, in the order of names."""
    return [np.load(os.path.join(work, nm + ".npy")) for nm in names]


def bench_rows(json_path):
    """The rows of an `alma bench --json` file and what is wrong with them, one message per bad row: a
    status other than ok, or a conversion other than EAGER whose output check was not performed or
    did not pass."""
    with open(json_path) as f:
        rows = json.load(f)["results"]
    problems = []
    for row in rows:
        chk = row.get("check") or {}
        if row.get("status") != "ok":
            problems.append(f"{row.get('conversion')}: status {row.get('status')}: {row.get('error')}")
        elif row.get("conversion") != "EAGER" and not (chk.get("performed") and chk.get("passed")):
            problems.append(f"{row.get('conversion')}: output check {chk}")
    return rows, problems
