"""`alma bench --labels` on the digits example: top-1 accuracy per conversion from the CLI.

usage: check_labels.py ALMA DIGITS_DIR OUTDIR

DIGITS_DIR is what train.py wrote. Checks, on the 360 held-out digits:
- fp32 EAGER and post-training static int8 (INT8_STATIC+EAGER, calibrated by default on the first
  8 batches of the benchmark data) keep top-1 >= 95%, and int8 loses at most 1 point (the int8
  target); the JSON's accuracy object agrees with the labels and the report prints the column;
- the same from the uint8 IDX files (images scaled by --data-scale, IDX labels);
- the QAT model, when train.py wrote it, keeps top-1 >= 95% on EAGER;
- a labels file one sample short is refused (exit 3) naming both counts.
Exit 0 when all hold.
"""
import json
import os
import subprocess
import sys

import numpy as np

FAST = ["--min-time", "0.2", "-n", "64", "--warmup", "1", "--no-cache"]


def bench(alma, args):
    p = subprocess.run([alma, "bench"] + args, capture_output=True, text=True)
    print(p.stdout, end="")
    return p


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    alma, d, out = sys.argv[1:]
    os.makedirs(out, exist_ok=True)
    failures = []
    labels = np.load(os.path.join(d, "test_labels.npy"))
    images = os.path.join(d, "test_images.npy")

    def check(tag, json_path, convs, min_top1=0.95):
        rs = json.load(open(json_path))["results"]
        if [r["conversion"] for r in rs] != convs:
            failures.append(f"{tag}: results {[r['conversion'] for r in rs]}, expected {convs}")
            return
        for r in rs:
            a = r["accuracy"]
            if r["status"] != "ok" or not a:
                failures.append(f"{tag} {r['conversion']}: {r['status']} {r['error']}, accuracy {a}")
                continue
            if a["samples"] != len(labels) or abs(a["top1"] - a["correct"] / len(labels)) > 1e-12:
                failures.append(f"{tag} {r['conversion']}: accuracy {a} for {len(labels)} labels")
            if a["top1"] < min_top1:
                failures.append(f"{tag} {r['conversion']}: top-1 {a['top1']:.4f} < {min_top1}")
            if "INT8" in r["conversion"] and not a["top1_drop"] <= 0.01:
                failures.append(f"{tag} {r['conversion']}: top-1 drops {100 * a['top1_drop']:.2f} points vs "
                                f"{a['baseline']} (at most 1 allowed)")

    def bench_checked(tag, args, convs):
        """alma bench ARGS --json labels_TAG.json, then check() on its results."""
        js = os.path.join(out, f"labels_{tag}.json")
        p = bench(alma, args + ["--json", js] + FAST)
        if p.returncode != 0:
            failures.append(f"{tag}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
        else:
            check(tag, js, convs)
        return p

    convs = ["EAGER", "INT8_STATIC+EAGER"]
    p = bench_checked("npy", [os.path.join(d, "mnist_cnn.onnx"), "-c", ",".join(convs), "-b", "32", "--data", images,
                              "--labels", os.path.join(d, "test_labels.npy")], convs)
    if p.returncode == 0 and "top-1: share of the 360 labelled samples" not in p.stdout:
        failures.append("npy: the report has no top-1 note")

    bench_checked("idx", [os.path.join(d, "mnist_cnn.onnx"), "-c", "EAGER", "-b", "32", "-q",
                          "--data", os.path.join(d, "test-images-idx3-ubyte"), "--data-scale", "0.00392156862745098",
                          "--labels", os.path.join(d, "test-labels-idx1-ubyte")], ["EAGER"])

    qat = os.path.join(d, "mnist_cnn_qat.onnx")
    if os.path.exists(qat):
        bench_checked("qat", [qat, "-c", "EAGER", "-b", "32", "-q", "--data", images,
                              "--labels", os.path.join(d, "test_labels.npy")], ["EAGER"])

    short = os.path.join(out, "labels_short.npy")
    np.save(short, labels[:-1])
    p = bench(alma, [os.path.join(d, "mnist_cnn.onnx"), "-c", "EAGER", "-b", "32", "--data", images,
                     "--labels", short] + FAST)
    want = f"{len(labels) - 1} labels for {len(labels)} samples"
    if p.returncode != 3 or want not in p.stderr:
        failures.append(f"a short labels file: exit {p.returncode} (3 expected), stderr lacks '{want}': "
                        f"{p.stderr.strip()[-400:]}")

    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
