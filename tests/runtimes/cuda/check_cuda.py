#!/usr/bin/env python3
"""The CUDA runtime through `alma bench` on a machine with a device (label gpu; if_device.sh skips it
elsewhere). For CUDA and FOLD+CUDA, with the default options and with each non-default one:
  - the row runs on device "cuda" and its outputs pass the check against EAGER (on the host);
  - every node of the MNIST CNN runs on the device (placement: no eager or partial node, no boundary copy);
  - runtime_info names the GPU and the library versions and splits each run into host-to-device,
    compute and device-to-host times (printed beside the run's wall time: a measurement, not asserted);
  - the options given are recorded.

usage: check_cuda.py ALMA MODEL
"""
import json
import os
import subprocess
import sys
import tempfile

alma, model = sys.argv[1], sys.argv[2]
failures = []


def bench(options):
    with tempfile.TemporaryDirectory() as td:
        out = os.path.join(td, "r.json")
        cmd = [alma, "bench", model, "-c", "CUDA,FOLD+CUDA", "-b", "1", "-n", "50", "--min-time", "0.2", "--no-cache",
               "-q", "--json", out] + (["-O", options] if options else [])
        p = subprocess.run(cmd, capture_output=True, text=True)
        if not os.path.exists(out):
            sys.exit(f"FAIL: {' '.join(cmd)} wrote no results (exit {p.returncode}):\n{p.stderr[-3000:]}")
        with open(out) as f:
            return json.load(f)["results"], p.returncode


for options in ["", "cuda.tf32=on", "cuda.conv_algo=search", "cuda.host_memory=pinned"]:
    rows, rc = bench(options)
    for r in rows:
        name = f"{r['conversion']} [{options or 'defaults'}]"
        if r["status"] != "ok":
            failures.append(f"{name}: {r['status']}: {r.get('error')}")
            continue
        if r["device"] != "cuda":
            failures.append(f"{name}: device {r['device']}, expected cuda")
        chk = r.get("check") or {}
        if not chk.get("passed"):
            failures.append(f"{name}: output check failed: {chk}")
        pl = r.get("placement") or {}
        places = pl.get("placements", {})
        if places.get("eager", 0) or places.get("partial", 0):
            failures.append(f"{name}: nodes on the host: {pl.get('op_types')}")
        info = r.get("runtime_info") or {}
        for k in ("device", "compute_capability", "driver", "cudnn", "cublas", "h2d_ms", "compute_ms", "d2h_ms"):
            if k not in info:
                failures.append(f"{name}: runtime_info lacks {k}: {info}")
        if info.get("boundary_copies_per_run", 0):
            failures.append(f"{name}: {info['boundary_copies_per_run']} boundary copies per run, expected none")
        given = r.get("runtime_options_given") or ""
        if options and options.split(".", 1)[1] not in given:
            failures.append(f"{name}: runtime_options_given {given!r} lacks {options}")
        split = info.get("h2d_ms", 0) + info.get("compute_ms", 0) + info.get("d2h_ms", 0)
        print(f"{name}: p50 {r['latency_ms']['p50']:.4g} ms; run wall {info.get('run_wall_ms', 0):.4g} ms = "
              f"h2d {info.get('h2d_ms', 0):.4g} + compute {info.get('compute_ms', 0):.4g} + d2h {info.get('d2h_ms', 0):.4g}"
              f" (sum {split:.4g}); {info.get('device')} cc {info.get('compute_capability')}")

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("PASS")
