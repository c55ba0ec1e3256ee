"""Accuracy of alma's quantized and reduced-precision conversions against fp32 EAGER, and the saved
converted models run by ONNX Runtime against alma's outputs.

usage: check_quant.py QUANT_RUN MODELS_DIR OUTDIR [--models a,b] [--conversions A,B]
                      [--calibrators minmax,...] [--ort-python PY] [--min-cosine 0.99] [--time S]

MODELS_DIR is what make_quant_models.py wrote. For each model: EAGER's outputs on test.npy are the
reference; each conversion is created with calib.npy as calibration data (8 batches of 8 samples;
mnist 8 of 32), saved (quant_run -s) and run on test.npy. Reported per conversion: cosine
similarity of all outputs flattened, argmax agreement per row, max abs error, and for mnist the
top-1 accuracy against labels.npy beside fp32's. With --ort-python (a python with onnxruntime and
numpy), each saved model is run by ONNX Runtime (graph optimizations at "basic", which keeps
alma's exact arithmetic; "all" is reported too: it fuses Q/DQ into its own int8 kernels) and
compared with alma's outputs.

Fails (exit 1) when an INT8 conversion's cosine is below --min-cosine (entropy calibrator:
--entropy-min-cosine), when mnist's argmax agreement is below 99% or its top-1 drops by more than 1
point, or when ONNX Runtime's outputs (basic) differ from alma's beyond 1e-4 of the output's
largest value (FP16: 1e-2; static int8: 5e-2 and cosine >= 0.9998, see below).
QLINEAR's QLinearConv nodes on an x86 CPU without VNNI: ONNX Runtime's uint8 x int8 kernels there
sum pairs of products in saturating 16-bit lanes (docs/quantization.md; up to 69 quantization
steps off an exact integer evaluation on the digits CNN's first convolution), so its outputs of
those files are no reference: alma's are compared, with the same limits, with ONNX Runtime's outputs of
the QDQ graph they were rewritten from (the same conversion without +QLINEAR, run before it), which
ONNX Runtime computes exactly in float; its outputs of the QLinear file are still reported.
A conversion that is unavailable here (exit 3 of quant_run: BF16 on a CPU without AVX512_BF16)
is reported and skipped.
"""
import argparse
import json
import os
import platform
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from qmetrics import argmax_agreement, cosine, flat, load_outputs, max_abs_err, rel_err, top1  # noqa: E402

ORT_SCRIPT = r"""
import json, sys
import numpy as np
import onnxruntime as ort
model, x, out = sys.argv[1], np.load(sys.argv[2]), sys.argv[3]
res = {}
for lvl in ("ENABLE_BASIC", "ENABLE_ALL"):
    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, "ORT_" + lvl)
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    ys = s.run(None, {s.get_inputs()[0].name: x})
    for i, y in enumerate(ys):
        np.save(f"{out}_{lvl}_{i}.npy", y)
    res[lvl] = len(ys)
print(json.dumps({"version": ort.__version__, **res}))
"""


def ort_int8_saturates():
    """ONNX Runtime's uint8 x int8 kernels saturate pairs of products on x86 without VNNI."""
    if platform.machine().lower() not in ("x86_64", "amd64", "i686", "x86"):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read().split()
    except OSError:
        return True
    return not ({"avx512_vnni", "avx_vnni"} & set(flags))


def run(quant_run, model, conv, outdir, args, extra):
    os.makedirs(outdir, exist_ok=True)
    for f in os.listdir(outdir):
        os.remove(os.path.join(outdir, f))
    cmd = [quant_run, model, conv, outdir, "-i", args["test"], "-s"] + extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    info = {}
    for tok in p.stdout.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            info[k] = float(v)
    return p.returncode, (p.stderr.strip().splitlines() or [""])[-1], info


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("quant_run")
    ap.add_argument("models_dir")
    ap.add_argument("outdir")
    ap.add_argument("--models", default="mnist")
    ap.add_argument("--conversions", default="INT8_STATIC+EAGER,INT8_DYNAMIC+EAGER")
    ap.add_argument("--calibrators", default="minmax")
    ap.add_argument("--ort-python", default="")
    ap.add_argument("--min-cosine", type=float, default=0.99)
    ap.add_argument("--entropy-min-cosine", type=float, default=0.98,
                    help="the entropy calibrator clips harder (mobilenet_v2: 0.984)")
    ap.add_argument("--time", type=float, default=0, help="time each conversion for this many seconds")
    ap.add_argument("--json", default="", help="write the rows here")
    a = ap.parse_args()
    failures, rows = [], []
    saturates = ort_int8_saturates()
    ort_basic = {}  # (model, conversion tag) -> ONNX Runtime's outputs (basic) of its saved model
    for name in a.models.split(","):
        md = os.path.join(a.models_dir, name)
        model = os.path.join(md, "model.onnx")
        paths = {"test": os.path.join(md, "test.npy")}
        calib = os.path.join(md, "calib.npy")
        bs = "32" if name == "mnist" else "8"
        labels = np.load(os.path.join(md, "labels.npy")) if os.path.exists(os.path.join(md, "labels.npy")) else None
        timing = ["-t", str(a.time)] if a.time > 0 else []
        ref_dir = os.path.join(a.outdir, name, "EAGER")
        rc, err, info = run(a.quant_run, model, "EAGER", ref_dir, paths, timing)
        if rc != 0:
            failures.append(f"{name} EAGER: {err}")
            continue
        ref = load_outputs(ref_dir)
        ref_top1 = top1(ref[0], labels) if labels is not None else None
        rows.append({"model": name, "conversion": "EAGER", "calibrator": "", "cosine": 1.0, "argmax": 1.0,
                     "max_abs": 0.0, "top1": ref_top1, "ms": info.get("ms_per_batch"), "convert_s": info.get("convert_s")})
        for conv in a.conversions.split(","):
            cals = a.calibrators.split(",") if "INT8_STATIC" in conv else [""]
            for cal in cals:
                tag = conv + (f"[{cal}]" if cal else "")
                od = os.path.join(a.outdir, name, tag.replace("[", "_").replace("]", ""))
                extra = ["-c", calib, "-n", "8", "-b", bs] + (["-k", cal] if cal else []) + timing
                rc, err, info = run(a.quant_run, model, conv, od, paths, extra)
                if rc == 3:
                    rows.append({"model": name, "conversion": tag, "unavailable": err})
                    continue
                if rc != 0:
                    failures.append(f"{name} {tag}: {err}")
                    continue
                outs = load_outputs(od)
                cos = cosine(flat(outs), flat(ref))
                agree = argmax_agreement(outs[0], ref[0])
                mae = max(max_abs_err(o, r) for o, r in zip(outs, ref))
                t1 = top1(outs[0], labels) if labels is not None else None
                row = {"model": name, "conversion": tag, "calibrator": cal, "cosine": cos, "argmax": agree,
                       "max_abs": mae, "top1": t1, "ms": info.get("ms_per_batch"), "convert_s": info.get("convert_s")}
                want_cos = a.entropy_min_cosine if cal == "entropy" else a.min_cosine
                if "INT8" in conv and not cos >= want_cos:
                    failures.append(f"{name} {tag}: cosine {cos:.5f} < {want_cos}")
                if labels is not None and "INT8" in conv:
                    if agree < 0.99:
                        failures.append(f"{name} {tag}: argmax agreement {agree:.4f} < 0.99")
                    if t1 < ref_top1 - 0.01:
                        failures.append(f"{name} {tag}: top-1 {t1:.4f} drops more than 1 point from {ref_top1:.4f}")
                # bfloat16 Conv/pooling only entered ONNX's schemas at opset 22: ONNX Runtime
                # rejects the saved BF16 graphs of these opset-13 models (documented)
                if a.ort_python and "BF16" not in conv:
                    p = subprocess.run([a.ort_python, "-c", ORT_SCRIPT, os.path.join(od, "model.onnx"), paths["test"],
                                        os.path.join(od, "ort")], capture_output=True, text=True)
                    if p.returncode != 0:
                        failures.append(f"{name} {tag}: ONNX Runtime failed on the saved model: "
                                        f"{(p.stderr.strip().splitlines() or [''])[-1]}")
                    else:
                        for lvl in ("ENABLE_BASIC", "ENABLE_ALL"):
                            ys = [np.load(os.path.join(od, f"ort_{lvl}_{i}.npy")) for i in range(len(outs))]
                            rel = max(rel_err(y, o) for y, o in zip(ys, outs))
                            row["ort_" + lvl.split("_")[1].lower() + "_rel"] = rel
                            row["ort_" + lvl.split("_")[1].lower() + "_cos"] = cosine(flat(ys), flat(outs))
                            if lvl == "ENABLE_BASIC":
                                ort_basic[(name, tag)] = ys
                        twin = tag.replace("+QLINEAR", "")
                        if saturates and twin != tag:
                            if (name, twin) not in ort_basic:
                                failures.append(f"{name} {tag}: no ONNX Runtime outputs of {twin} to compare with "
                                                f"(list it before {conv} in --conversions)")
                                rows.append(row)
                                continue
                            ys = ort_basic[(name, twin)]
                            row["ort_qlinear_rel"] = row["ort_basic_rel"]
                            row["ort_basic_rel"] = max(rel_err(y, o) for y, o in zip(ys, outs))
                            row["ort_basic_cos"] = cosine(flat(ys), flat(outs))
                            row["ort_reference"] = twin
                        # Static QDQ graphs: a float sum that rounds differently in another
                        # runtime's Conv can land on the other side of a quantization step, and
                        # the step then travels through the network, so deep models agree within
                        # a few steps only (mnist: exactly; resnet18: 1-2% of the largest logit,
                        # cosine 0.99989 at worst: its quantized residual Adds requantize the
                        # residual stream 8 more times, each a chance for a step to flip).
                        tol = 1e-2 if "FP16" in conv else 5e-2 if "INT8_STATIC" in conv else 1e-4
                        min_cos = 0.9998 if "INT8_STATIC" in conv else 0.999999
                        if not (row["ort_basic_rel"] <= tol and row["ort_basic_cos"] >= min_cos):
                            failures.append(f"{name} {tag}: ONNX Runtime's outputs differ from alma's: max error "
                                            f"{row['ort_basic_rel']:.3g} of the largest output (limit {tol}), cosine "
                                            f"{row['ort_basic_cos']:.6f} (limit {min_cos})")
                rows.append(row)
    hdr = f"{'model':14s} {'conversion':34s} {'cosine':>9s} {'argmax':>7s} {'max abs':>9s} {'top-1':>7s} " \
          f"{'ms/batch':>9s} {'convert s':>9s} {'ORT basic':>10s} {'ORT all cos':>11s}"
    print(hdr)
    for r in rows:
        if "unavailable" in r:
            print(f"{r['model']:14s} {r['conversion']:34s} unavailable: {r['unavailable']}")
            continue
        f = lambda k, fmt: (fmt % r[k]) if r.get(k) is not None else "-"  # noqa: E731
        note = (f"  (ORT basic: against ONNX Runtime on {r['ort_reference']}; on this file, whose QLinearConv it "
                f"saturates: {r['ort_qlinear_rel']:.2g})") if "ort_reference" in r else ""
        print(f"{r['model']:14s} {r['conversion']:34s} {f('cosine', '%.6f'):>9s} {f('argmax', '%.4f'):>7s} "
              f"{f('max_abs', '%.4g'):>9s} {f('top1', '%.4f'):>7s} {f('ms', '%.2f'):>9s} {f('convert_s', '%.3f'):>9s} "
              f"{f('ort_basic_rel', '%.2g'):>10s} {f('ort_all_cos', '%.6f'):>11s}{note}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
