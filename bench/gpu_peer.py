#!/usr/bin/env python3
"""alma's CUDA conversions beside PyTorch on the same GPU, in one run (docs/performance.md, GPU).

For each model of the zoo (tests/models/export_models.py: the same modules, seeds and exported ONNX
files alma runs) and batch size:
  - PyTorch rows: eager fp32 and fp16, TorchScript (torch.jit.trace) fp32, torch.compile default
    and mode="reduce-overhead" (CUDA graphs) fp32, torch.compile default fp16. Each is timed per
    call with the input on the host: copy to the device, forward, copy the output back, synchronize
    (what alma's run does), p50 over at least --min-time seconds after warm-up; "device p50" is the
    same with input and output left on the device (CUDA events around the forward only).
  - alma rows: `alma bench MODEL -c CUDA,FOLD+CUDA` at the same batch, p50 per batch, with the
    runtime's host-to-device / compute / device-to-host split from runtime_info.
fp32 everywhere means IEEE float32 products: TF32 is turned off in PyTorch (cuDNN and matmul) as it
is by default in alma (cuda.tf32=off). Prints one table with each alma row's ratio to
torch.compile default fp32 (the issue's goal: alma's best <= 1.0x) and writes --json.

usage: python3 bench/gpu_peer.py --alma ALMA --models DIR [--names a,b] [--batch-sizes 1,32]
       [--min-time 1] [--json out.json] [--device cuda] [--skip-compile]
DIR holds the exported models (export_models.py DIR NAME...); --device cpu runs the same on the CPU
(a dry run of the script: PyTorch rows only where they run there).
"""
import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
import export_models as em  # noqa: E402

import torch  # noqa: E402


def build(name):
    torch.manual_seed(int(hashlib.sha256(name.encode()).hexdigest()[:8], 16))  # export_models.export_one's seed
    m, make_inputs = em.MODELS[name][1]()
    return m.eval(), make_inputs


def sync(dev):
    if dev == "cuda":
        torch.cuda.synchronize()


def time_calls(fn, dev, min_time, warmup=10):
    for _ in range(warmup):
        fn()
    sync(dev)
    times, t_end = [], time.perf_counter() + min_time
    while time.perf_counter() < t_end or len(times) < 20:
        t0 = time.perf_counter()
        fn()
        sync(dev)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def time_device(fn, dev, min_time):
    """Forward only, inputs already on the device: CUDA events (wall clock on the CPU)."""
    if dev != "cuda":
        return time_calls(fn, dev, min_time)
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times, t_end = [], time.perf_counter() + min_time
    while time.perf_counter() < t_end or len(times) < 20:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def torch_rows(name, batch, dev, min_time, skip_compile):
    m, make_inputs = build(name)
    host_in = [x.contiguous() for x in make_inputs(batch)]
    if dev == "cuda":
        host_in = [x.pin_memory() for x in host_in]
    variants = [("eager fp32", "eager", torch.float32), ("eager fp16", "eager", torch.float16),
                ("torchscript fp32", "script", torch.float32)]
    if not skip_compile:
        variants += [("compile fp32", "default", torch.float32), ("compile reduce-overhead fp32", "reduce-overhead", torch.float32),
                     ("compile fp16", "default", torch.float16)]
    rows = []
    for label, how, dt in variants:
        try:
            mm = build(name)[0].to(dev)
            if dt == torch.float16:
                mm = mm.half()
            dev_in = [(x.to(dev).half() if dt == torch.float16 and x.is_floating_point() else x.to(dev)) for x in host_in]
            with torch.no_grad():
                if how == "script":
                    f = torch.jit.trace(mm, tuple(dev_in))
                elif how in ("default", "reduce-overhead"):
                    if not hasattr(torch, "compile"):
                        raise RuntimeError(f"torch {torch.__version__} has no torch.compile")
                    f = torch.compile(mm, mode=how)
                else:
                    f = mm
                t_build = time.perf_counter()
                f(*dev_in)  # compiles here for torch.compile
                sync(dev)
                t_build = time.perf_counter() - t_build

                def e2e():
                    xs = [(x.to(dev, non_blocking=True).half() if dt == torch.float16 and x.is_floating_point()
                           else x.to(dev, non_blocking=True)) for x in host_in]
                    y = f(*xs)
                    (y[0] if isinstance(y, (tuple, list)) else y).float().cpu()

                p50 = time_calls(e2e, dev, min_time)
                p50_dev = time_device(lambda: f(*dev_in), dev, min_time)
            rows.append({"model": name, "batch": batch, "variant": label, "p50_ms": p50, "device_p50_ms": p50_dev,
                         "first_call_s": t_build})
        except Exception as e:  # a variant that cannot run here says why
            rows.append({"model": name, "batch": batch, "variant": label, "error": f"{type(e).__name__}: {e}"[:300]})
        finally:
            if dev == "cuda":
                torch.cuda.empty_cache()
    return rows


def alma_rows(alma, model_path, name, batch, min_time):
    with tempfile.TemporaryDirectory() as td:
        out = os.path.join(td, "r.json")
        cmd = [alma, "bench", model_path, "-c", "CUDA,FOLD+CUDA", "-b", str(batch), "--min-time", str(min_time),
               "--no-cache", "-q", "--keep-going", "--json", out]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if not os.path.exists(out):
            return [{"model": name, "batch": batch, "variant": "alma", "error": f"exit {p.returncode}: {p.stderr[-300:]}"}]
        with open(out) as f:
            res = json.load(f)["results"]
    rows = []
    for r in res:
        row = {"model": name, "batch": batch, "variant": "alma " + r["conversion"]}
        if r["status"] != "ok":
            row["error"] = r.get("error") or r["status"]
        else:
            info = r.get("runtime_info") or {}
            pl = (r.get("placement") or {}).get("placements", {})
            row.update(p50_ms=r["latency_ms"]["p50"], device_p50_ms=info.get("compute_ms"), h2d_ms=info.get("h2d_ms"),
                       d2h_ms=info.get("d2h_ms"), run_wall_ms=info.get("run_wall_ms"),
                       check=(r.get("check") or {}).get("passed"), host_nodes=pl.get("eager", 0) + pl.get("partial", 0),
                       boundary_copies=info.get("boundary_copies_per_run"), gpu=info.get("device"))
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--alma", default=os.path.join(ROOT, "build", "alma"))
    ap.add_argument("--models", required=True, help="folder of exported models (export_models.py DIR NAME...)")
    ap.add_argument("--names", default="resnet18_op13,mobilenet_v2_op13,transformer_op14")
    ap.add_argument("--batch-sizes", default="1,32")
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--skip-compile", action="store_true", help="leave out the torch.compile rows (their compiles take minutes)")
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    gpu = torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu"
    print(f"torch {torch.__version__} on {gpu}; alma {a.alma}", flush=True)
    rows = []
    for name in a.names.split(","):
        path = os.path.join(a.models, name, "model.onnx")
        for b in [int(x) for x in a.batch_sizes.split(",")]:
            rows += torch_rows(name, b, a.device, a.min_time, a.skip_compile)
            rows += alma_rows(a.alma, path, name, b, a.min_time)
            for r in rows[-9:]:
                if r["model"] == name and r["batch"] == b:
                    print(json.dumps(r), flush=True)
    print(f"\n{'model':20} {'batch':>5} {'variant':32} {'p50 ms':>10} {'device ms':>10} {'vs compile fp32':>16}")
    for name in a.names.split(","):
        for b in [int(x) for x in a.batch_sizes.split(",")]:
            sel = [r for r in rows if r["model"] == name and r["batch"] == b]
            ref = next((r["p50_ms"] for r in sel if r["variant"] == "compile fp32" and "p50_ms" in r), None)
            for r in sel:
                if "error" in r:
                    print(f"{name:20} {b:5} {r['variant']:32} {'-':>10} {'-':>10}  {r['error'][:60]}")
                    continue
                ratio = f"{r['p50_ms'] / ref:.2f}x" if ref else "-"
                dv = f"{r['device_p50_ms']:.4g}" if r.get("device_p50_ms") is not None else "-"
                print(f"{name:20} {b:5} {r['variant']:32} {r['p50_ms']:10.4g} {dv:>10} {ratio:>16}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"torch": torch.__version__, "gpu": gpu, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
