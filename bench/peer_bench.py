#!/usr/bin/env python3
"""alma beside its peers, in one run on one machine: ONNX Runtime (PyPI, intra-op threads = N, all
graph optimizations) and PyTorch (TorchScript, frozen, N threads) against alma's conversions, on
the same models, shapes and thread count. Prints (and with --markdown writes) p50 latency,
throughput, the ratio alma-best / ONNX Runtime, and GFLOP/s with the percentage of the machine's
peak measured here with a large SGEMM.

usage: bench/run.sh [--quick] [--threads N] [--markdown OUT.md] [--json OUT.json] [--conversions LIST]
--json writes every number with the machine, library versions, alma's commit and the command;
bench/run.sh writes one under bench/results/ unless given --json.
(bench/run.sh makes the virtual environment with onnxruntime; this script needs python3 with
torch, onnx, numpy and onnxruntime, and the alma binary.)
"""
import argparse
import inspect
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import time_samples  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


# ---- models (random weights, fixed seed) -----------------------------------------------------

def mnist_cnn():
    nn = torch.nn

    class Net(nn.Module):  # conv32-conv64-fc128: an MNIST-sized CNN
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(1, 32, 3)
            self.c2 = nn.Conv2d(32, 64, 3)
            self.fc1 = nn.Linear(64 * 12 * 12, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            x = torch.relu(self.c1(x))
            x = torch.max_pool2d(torch.relu(self.c2(x)), 2)
            x = torch.flatten(x, 1)
            return self.fc2(torch.relu(self.fc1(x)))

    return Net(), (1, 28, 28)


def resnet18():
    import torchvision
    return torchvision.models.resnet18(), (3, 224, 224)


def mobilenet_v2():
    import torchvision
    return torchvision.models.mobilenet_v2(), (3, 224, 224)


def transformer():
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=4), (128, 256)


MODELS = [  # name, builder, batch sizes (1, and a throughput batch)
    ("resnet18", resnet18, (1, 32)),
    ("mobilenet_v2", mobilenet_v2, (1, 32)),
    ("transformer", transformer, (1, 8)),
    ("mnist_cnn", mnist_cnn, (1, 32)),
]


def calibrate_bn(model, shape):
    """Random weights give degenerate BatchNorm statistics; run a few random batches in train mode
    so outputs stay in a sane range (matters for int8 calibration, harmless for fp32)."""
    if not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        return
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(8, *shape))


def export(name, builder, outdir):
    torch.manual_seed(0)
    model, shape = builder()
    calibrate_bn(model, shape)
    model.eval()
    path = os.path.join(outdir, name + ".onnx")
    x = torch.randn(1, *shape)
    # Not under no_grad: there PyTorch 1.13 takes the fused transformer fast path, which has no export.
    # PyTorch >= 2.9 defaults to its torch.export-based exporter; the TorchScript one (dynamo=False)
    # writes the same graphs as 1.13 does, so both machines benchmark the same model.
    kw = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, x, path, input_names=["input"], output_names=["output"], opset_version=14,
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, **kw)
    return model, shape, path


def precision(conversion):
    """The arithmetic a conversion computes in, from its steps."""
    steps = conversion.split("+")
    for k, tag in (("int8", "INT8_"), ("bf16", "BF16"), ("fp16", "FP16")):
        if any(s.startswith(tag) for s in steps):
            return k
    return "fp32"


# ---- timing helpers -------------------------------------------------------------------------

def time_fn(fn, min_runs, min_time):
    samples = time_samples(fn, min_runs, min_time)
    return statistics.median(samples), len(samples)


def bench_ort(path, x, threads, args):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feed = {"input": x}
    return time_fn(lambda: sess.run(None, feed), args.min_runs, args.min_time)


def bench_torch(model, x, threads, args):
    torch.set_num_threads(threads)
    xt = torch.from_numpy(x)
    with torch.no_grad():
        ts = torch.jit.freeze(torch.jit.trace(model, xt).eval())
        return time_fn(lambda: ts(xt), args.min_runs, args.min_time)


CHECKS = {}  # (model path, batch, conversion) -> (cosine, argmax agreement) vs fp32 EAGER


def bench_alma(path, batch, threads, args):
    with tempfile.TemporaryDirectory() as td:
        out = os.path.join(td, "r.json")
        cmd = [args.alma, "bench", path, "-b", str(batch), "--threads", str(threads), "--keep-going", "-q",
               "-n", str(args.min_runs * batch), "--min-time", str(args.min_time), "--json", out]
        if args.conversions:
            cmd += ["-c", args.conversions]
        cmd += args.alma_args.split()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not os.path.exists(out):
            return []
        with open(out) as f:
            res = json.load(f)["results"]
    rows = []
    for r in res:
        if r.get("status") == "ok" and r.get("latency_ms"):
            check = r.get("check") or {}
            rows.append((r["conversion"], r["latency_ms"]["p50"], check.get("passed", None)))
            CHECKS[(path, batch, r["conversion"])] = (check.get("cosine"), check.get("argmax_agreement"))
        else:
            rows.append((r["conversion"], None, (r.get("error") or r.get("status") or "")[:60]))
    return rows


def sgemm_peak(threads):
    """GFLOP/s of a 2048^3 SGEMM: alma's bench/sgemm_peak (OpenBLAS) if built, else numpy's BLAS."""
    exe = os.path.join(os.path.dirname(os.path.abspath(ARGS.alma)), "sgemm_peak")
    if os.path.exists(exe):
        try:
            out = subprocess.run([exe, str(threads)], capture_output=True, text=True, timeout=300).stdout
            found = []  # (GFLOP/s, library): OpenBLAS, and oneDNN's sgemm when built in
            for line in out.splitlines():
                if "GFLOP/s" in line and f"threads={threads}" in line.replace(" ", ""):
                    lib = "oneDNN" if line.startswith("dnnl") else "OpenBLAS"
                    found.append((float(line.split("GFLOP/s")[0].split()[-1]), lib))
            if found:
                best = max(found)
                return best[0], f"bench/sgemm_peak, {best[1]} (the faster of {', '.join(f[1] for f in found)})"
        except Exception:
            pass
    n = 2048
    a = np.random.rand(n, n).astype(np.float32)
    b = np.random.rand(n, n).astype(np.float32)
    os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
    med, _ = time_fn(lambda: a @ b, 5, 2.0)
    return 2 * n ** 3 / (med * 1e-3) / 1e9, "numpy matmul (its BLAS)"


def flops_per_sample(alma, path):
    out = subprocess.run([alma, "info", path, "--json"], capture_output=True, text=True).stdout
    try:
        info = json.loads(out)
        return float(info.get("flops") or info.get("flops_per_sample") or 0)
    except Exception:
        return 0.0


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--alma", default=os.path.join(ROOT, "build", "alma"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--conversions", default="")
    ap.add_argument("--min-runs", type=int, default=20)
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--quick", action="store_true", help="fewer runs (smoke test)")
    ap.add_argument("--models", default="", help="comma list of model names")
    ap.add_argument("--markdown", default="")
    ap.add_argument("--json", default="", help="write the results, machine and commit as JSON")
    ap.add_argument("--alma-args", default="", help="more options for alma bench, e.g. '--calibration-batches 2'")
    ARGS = args = ap.parse_args()
    if args.quick:
        args.min_runs, args.min_time = 3, 0.2
    import onnxruntime as ort
    peak, peak_src = sgemm_peak(args.threads)
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except Exception:
        pass
    header = (f"machine: {cpu}, {os.cpu_count()} logical CPUs; threads {args.threads}; "
              f"onnxruntime {ort.__version__}; torch {torch.__version__}; "
              f"SGEMM 2048^3 peak {peak:.0f} GFLOP/s ({peak_src})")
    print(header)
    rows = []
    with tempfile.TemporaryDirectory() as td:
        for name, builder, batches in MODELS:
            if args.models and name not in args.models.split(","):
                continue
            model, shape, path = export(name, builder, td)
            fps = flops_per_sample(args.alma, path)
            for b in batches:
                x = np.random.RandomState(0).randn(b, *shape).astype(np.float32)
                ort_p50, _ = bench_ort(path, x, args.threads, args)
                pt_p50, _ = bench_torch(model, x, args.threads, args)
                alma_rows = bench_alma(path, b, args.threads, args)
                # fp32 conversions compete with ONNX Runtime on latency; reduced-precision ones
                # (judged by cosine/argmax, see docs/methodology.md) are reported as speed-ups.
                ok = [(c, p) for c, p, chk in alma_rows if p is not None and chk is not False]
                fp32 = [r for r in ok if precision(r[0]) == "fp32"]
                best = min(fp32, key=lambda r: r[1]) if fp32 else ("-", float("nan"))
                gflops = fps * b / (best[1] * 1e-3) / 1e9 if fp32 and fps else float("nan")
                row = dict(model=name, batch=b, ort=ort_p50, torch=pt_p50, best=best[0], alma=best[1],
                           ratio=best[1] / ort_p50, gflops=gflops, pct=100 * gflops / peak,
                           all=alma_rows, lowp={})
                for kind in ("int8", "bf16", "fp16"):
                    # flagged ones too (the check beside): a random-weight model's near-tied logits can
                    # flip argmax under any rounding; cosine is in the JSON of alma bench
                    cand = [(c, p, chk) for c, p, chk in alma_rows if p is not None and precision(c) == kind]
                    if cand:
                        c, p, chk = min(cand, key=lambda r: (r[2] is False, r[1]))
                        # same batch: the p50 ratio is the throughput ratio
                        cos, am = CHECKS.get((path, b, c), (None, None))
                        acc = (f"cosine {cos:.5f}, argmax {100 * am:.1f}%" if cos is not None and am is not None
                               else "not checked")
                        row["lowp"][kind] = (c + ("" if chk is not False else " (check flagged)"), p,
                                             ort_p50 / p, best[1] / p, acc)
                rows.append(row)
                print(f"{name:13s} b={b:<3d} ORT {ort_p50:9.3f} ms  PyTorch {pt_p50:9.3f} ms  "
                      f"alma {best[1]:9.3f} ms ({best[0]})  alma/ORT {row['ratio']:.2f}x  "
                      f"{gflops:.0f} GFLOP/s ({row['pct']:.0f}% of peak)", flush=True)
                for kind, (c, p, vs_ort, vs_fp32, acc) in row["lowp"].items():
                    print(f"    best {kind}: {c} {p:.3f} ms = {vs_ort:.2f}x ORT fp32 throughput, "
                          f"{vs_fp32:.2f}x alma's best fp32; {acc} vs fp32 EAGER", flush=True)
                for c, p, chk in alma_rows:
                    print(f"    {c:28s} " + (f"{p:9.3f} ms  check {'ok' if chk else 'FAILED'}" if p is not None
                                             else f"   -  {chk}"))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("| model | batch | ONNX Runtime p50 ms | PyTorch p50 ms | alma best | alma p50 ms | "
                    "alma / ORT | GFLOP/s | % of SGEMM peak |\n|---|---|---|---|---|---|---|---|---|\n")
            for r in rows:
                f.write(f"| {r['model']} | {r['batch']} | {r['ort']:.3f} | {r['torch']:.3f} | {r['best']} | "
                        f"{r['alma']:.3f} | {r['ratio']:.2f}x | {r['gflops']:.0f} | {r['pct']:.0f}% |\n")
            lowp = [(r, k, v) for r in rows for k, v in r["lowp"].items()]
            if lowp:
                f.write("\nReduced precision (best conversion of each kind; throughput ratios at the same batch):\n\n"
                        "| model | batch | precision | conversion | p50 ms | × ORT fp32 | × alma best fp32 | vs fp32 EAGER |\n"
                        "|---|---|---|---|---|---|---|---|\n")
                for r, k, (c, p, vs_ort, vs_fp32, acc) in lowp:
                    f.write(f"| {r['model']} | {r['batch']} | {k} | {c} | {p:.3f} | {vs_ort:.2f}x | {vs_fp32:.2f}x | {acc} |\n")
            f.write("\nEvery alma conversion (p50 ms; outputs checked against EAGER):\n\n")
            for r in rows:
                cells = ", ".join(f"{c} {p:.3f}" if p is not None else f"{c} ({chk})" for c, p, chk in r["all"])
                f.write(f"- {r['model']} b={r['batch']}: {cells}\n")
            f.write(f"\n{header}\n")
    if args.json:
        save_json(args.json, args, header, dict(cpu=cpu, logical_cpus=os.cpu_count(), isa=cpu_flags(),
                                                 onnxruntime=ort.__version__, torch=torch.__version__,
                                                 sgemm_peak_gflops=peak, sgemm_peak_source=peak_src), rows)


def cpu_flags():
    """The SIMD/ML flags of /proc/cpuinfo that decide which kernels run (AVX2, AVX-512, VNNI, AMX)."""
    keep = ("avx", "fma", "vnni", "amx", "bf16", "f16c", "sse4")
    try:
        with open("/proc/cpuinfo") as f:
            flags = next(l.split(":", 1)[1].split() for l in f if l.startswith("flags"))
        return " ".join(x for x in flags if any(k in x for k in keep))
    except Exception:
        return ""


def save_json(path, args, header, machine, rows):
    """One result file: enough to compare with a later run (machine, versions, commit, command)."""
    import datetime
    try:
        commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True,
                                text=True, check=True).stdout.strip()
    except Exception:
        commit = ""

    def clean(v):  # NaN is not JSON
        if isinstance(v, float) and v != v:
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v
    doc = dict(date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               alma_commit=commit, alma=args.alma, command=sys.argv, threads=args.threads,
               load_average=list(os.getloadavg()), machine=machine, header=header, rows=clean(rows))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
