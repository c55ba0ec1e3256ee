#!/usr/bin/env python3
"""INT8_STATIC on XNNPACK against EAGER, on the models of tests/passes_quant/make_quant_models.py.

usage: check_int8.py QUANT_RUN MODELS_DIR OUTDIR [--models mnist,resnet18,mobilenet_v2] [--time S]

For each model, on its test.npy (calibration: calib.npy, 8 batches of 8 samples; mnist 8 of 32):
  - fp32 EAGER: the accuracy reference;
  - [FOLD+]INT8_STATIC+EAGER: EAGER's float evaluation of the QDQ graph, the numeric reference of
    the int8 runtime (calibration is deterministic, so both conversions build the same graph);
  - [FOLD+]INT8_STATIC+XNNPACK.
Fails (exit 1) when an XNNPACK conversion
  - computes fewer convolution/matmul nodes, residual Adds or MaxPool/Flatten/Reshape nodes in
    int8 than expected for the model (its plan),
  - has cosine < 0.999 against fp32 EAGER, or (mnist) argmax agreement with it < 99% or a top-1
    drop of more than 1 point against the labels,
  - differs from EAGER's QDQ evaluation by cosine < 0.9999, or by a relative error norm
    |xnn - qdq| / |qdq| above half of the quantization's own |qdq - fp32| / |fp32|, or (mnist, whose
    trained logits have real margins) argmax agreement < 99%: each int8 value XNNPACK computes is
    within one quantization step of EAGER's (rounding of float sums near half steps), and such
    steps travel through the later layers, so deep models are compared as a whole rather than
    element by element (make_qmodels.py checks single layers element by element). The random-weight
    ResNet-18's logits differ between classes by about the int8 error (docs/quantization.md), so
    its argmax is no measure there.
--time S also times each conversion (quant_run -t: wall and process CPU time per batch).
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
from qmetrics import argmax_agreement, cosine, flat, load_outputs, rel_norm_err, top1  # noqa: E402

# convolution/matmul nodes and Add nodes XNNPACK computes in int8 on INT8_STATIC's graphs
# (docs/runtimes/xnnpack.md): every convolution but the 3-channel stems and those writing float
# values (a graph output, a global pooling's input, the float Add below); every residual Add but
# ResNet-18's last two: INT8_STATIC leaves the last one float (its Relu feeds the global pooling),
# so the conv feeding it writes float and the one before it, whose Relu the last Add also reads in
# float, keeps the float form
EXPECT_INT8 = {"mnist": 2, "resnet18": 18, "mobilenet_v2": 50}
EXPECT_ADDS = {"mnist": 0, "resnet18": 6, "mobilenet_v2": 10}
# MaxPool/Flatten/Reshape on int8 values: INT8_STATIC puts each MaxPool (and the Flatten after the
# digits CNN's second one) between two pairs of one quantization, so even the MaxPool after a
# float stem convolution (the digits CNN's conv1, ResNet-18's 3-channel conv1) pools int8 values;
# MobileNet-V2 has none (its Flatten follows the global average pooling, which stays float)
EXPECT_POOL = {"mnist": 3, "resnet18": 1, "mobilenet_v2": 0}


def run(quant_run, model, conv, outdir, extra):
    os.makedirs(outdir, exist_ok=True)
    for f in os.listdir(outdir):
        os.remove(os.path.join(outdir, f))
    p = subprocess.run([quant_run, model, conv, outdir] + extra, capture_output=True, text=True,
                       env=dict(os.environ, QUANT_VERBOSE="1"))
    info = {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.eE+-]+)", p.stdout)}
    m = re.search(r"(\d+) convolution/matmul nodes? computed in int8", p.stderr)
    info["int8"] = int(m.group(1)) if m else 0
    m = re.search(r"(\d+) Add nodes? computed in int8", p.stderr)
    info["adds"] = int(m.group(1)) if m else 0
    m = re.search(r"(\d+) MaxPool/Flatten/Reshape nodes? computed on int8", p.stderr)
    info["pools"] = int(m.group(1)) if m else 0
    outs = load_outputs(outdir)
    return p.returncode, (p.stderr.strip().splitlines() or [""])[-1], info, outs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("quant_run")
    ap.add_argument("models_dir")
    ap.add_argument("outdir")
    ap.add_argument("--models", default="mnist")
    ap.add_argument("--time", type=float, default=0)
    a = ap.parse_args()
    failures = []
    print(f"{'model':13s} {'conversion':26s} {'int8':>4s} {'adds':>4s} {'pool':>4s} {'cos fp32':>9s} {'argmax':>7s} {'top-1':>7s} "
          f"{'cos QDQ':>9s} {'argmax':>7s} {'err QDQ':>8s} {'err int8':>8s} {'ms/batch':>9s} {'cpu ms':>8s}")
    for name in a.models.split(","):
        md = os.path.join(a.models_dir, name)
        model, test = os.path.join(md, "model.onnx"), os.path.join(md, "test.npy")
        labels = np.load(os.path.join(md, "labels.npy")) if os.path.exists(os.path.join(md, "labels.npy")) else None
        bs = "32" if name == "mnist" else "8"
        timing = ["-t", str(a.time)] if a.time > 0 else []
        cal = ["-c", os.path.join(md, "calib.npy"), "-n", "8", "-b", bs]
        res = {}
        for conv in ("EAGER", "FOLD+INT8_STATIC+EAGER", "FOLD+INT8_STATIC+XNNPACK", "INT8_STATIC+EAGER",
                     "INT8_STATIC+XNNPACK"):
            rc, err, info, outs = run(a.quant_run, model, conv, os.path.join(a.outdir, name, conv.replace("+", "_")),
                                      ["-i", test] + (cal if "INT8" in conv else []) + timing)
            if rc != 0:
                failures.append(f"{name} {conv}: {err}")
                continue
            res[conv] = (info, outs)
        if "EAGER" not in res:
            continue
        ref = res["EAGER"][1]
        top1_ref = top1(ref[0], labels) if labels is not None else None
        for conv, (info, outs) in res.items():
            twin = res.get(conv.replace("XNNPACK", "EAGER"))
            if twin is None:
                continue
            qdq = twin[1]
            yflat = flat(outs)
            cos = cosine(yflat, flat(ref))
            agree = argmax_agreement(outs[0], ref[0])
            t1 = top1(outs[0], labels) if labels is not None else float("nan")
            qflat = flat(qdq).astype(np.float64)
            rflat = flat(ref).astype(np.float64)
            cq = cosine(yflat, qflat)
            e_rt = rel_norm_err(yflat, qflat)
            e_q = rel_norm_err(qflat, rflat)
            aq = argmax_agreement(outs[0], qdq[0])
            print(f"{name:13s} {conv:26s} {info['int8']:4d} {info['adds']:4d} {info['pools']:4d} {cos:9.6f} {agree:7.4f} {t1:7.4f} {cq:9.6f} {aq:7.4f} "
                  f"{e_rt:8.2g} {e_q:8.2g} {info.get('ms_per_batch', float('nan')):9.2f} {info.get('cpu_ms_per_batch', float('nan')):8.2f}")
            if "XNNPACK" not in conv:
                continue
            if info["int8"] < EXPECT_INT8.get(name, 1):
                failures.append(f"{name} {conv}: {info['int8']} convolution/matmul nodes in int8, expected "
                                f"{EXPECT_INT8.get(name, 1)}")
            if info["adds"] < EXPECT_ADDS.get(name, 0):
                failures.append(f"{name} {conv}: {info['adds']} Add nodes in int8, expected {EXPECT_ADDS.get(name, 0)}")
            if info["pools"] < EXPECT_POOL.get(name, 0):
                failures.append(f"{name} {conv}: {info['pools']} MaxPool/Flatten/Reshape nodes on int8 values, expected "
                                f"{EXPECT_POOL.get(name, 0)}")
            if not cos >= 0.999:
                failures.append(f"{name} {conv}: cosine {cos:.5f} against fp32 EAGER < 0.999")
            if labels is not None and (agree < 0.99 or t1 < top1_ref - 0.01):
                failures.append(f"{name} {conv}: argmax agreement {agree:.4f} (>= 0.99), top-1 {t1:.4f} "
                                f"(fp32 {top1_ref:.4f}, drop <= 1 point)")
            if not (cq >= 0.9999 and e_rt <= 0.5 * e_q + 1e-6 and (labels is None or aq >= 0.99)):
                failures.append(f"{name} {conv}: against EAGER's QDQ evaluation cosine {cq:.6f} (>= 0.9999), "
                                f"relative error {e_rt:.3g} (<= half of int8's own {e_q:.3g}), argmax agreement "
                                f"{aq:.4f} (>= 0.99 with labels)")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
