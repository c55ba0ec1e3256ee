"""Runs models quantized by ONNX Runtime's quantizer (ort_quantize.py) through alma's conversions
and compares them with ONNX Runtime's outputs on the same data.

usage: check_ort_quant.py ALMA DIR TEST.npy [--conversions A,B,...] [--labels LABELS.npy]
                          [--min-cosine C] [--min-argmax A] [--max-err E]

For every variant in DIR/variants.json and every conversion: `alma run` on TEST.npy, then against
ONNX Runtime's outputs (DIR/<variant>.ref_<k>.npy): cosine similarity, argmax agreement per row,
and max abs error relative to the output's largest magnitude. Pass (defaults, for the trained
digits model on real digits): cosine >= 0.999, argmax agreement >= 99%, error <= 5% of the largest
magnitude. Integer kernels round requantization differently from ONNX Runtime's float evaluation
of QDQ, and even float kernels that differ in the last bit flip a QuantizeLinear rounding now and
then; through 20 quantized layers of a random-weight ResNet those flips add up to a few
quantization steps at the output, and its near-tied logits flip argmax. Deep random-weight models
therefore pass on cosine alone (the CMake file gives --min-cosine 0.99 --min-argmax 0 --max-err 1),
with argmax and error still printed. With --labels the top-1
accuracy of each run is printed beside ONNX Runtime's and fp32's. A conversion unavailable on this
machine is reported and skipped. Exit 1 when any available conversion fails.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from qmetrics import argmax_agreement, cosine, rel_err, top1  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("alma")
    ap.add_argument("dir")
    ap.add_argument("test")
    ap.add_argument("--conversions", default="EAGER,FOLD+EAGER,QLINEAR+EAGER,DNNL,XNNPACK,BLAS")
    ap.add_argument("--labels", default="")
    ap.add_argument("--min-cosine", type=float, default=0.999)
    ap.add_argument("--min-argmax", type=float, default=0.99)
    ap.add_argument("--max-err", type=float, default=0.05)
    a = ap.parse_args()
    meta = json.load(open(os.path.join(a.dir, "variants.json")))
    labels = np.load(a.labels) if a.labels else None
    fp32 = np.load(os.path.join(a.dir, "fp32.ref_0.npy"))
    print(f"ONNX Runtime {meta['onnxruntime']}; fp32 top-1 "
          + (f"{100 * top1(fp32, labels):.2f}%" if labels is not None else "-"))
    failed = []
    for v in meta["variants"]:
        refs = [np.load(os.path.join(a.dir, f"{v}.ref_{k}.npy")) for k in range(meta["outputs"])]
        line = f"{v}: ONNX Runtime top-1 {100 * top1(refs[0], labels):.2f}%" if labels is not None else v
        print(line)
        for conv in a.conversions.split(","):
            with tempfile.TemporaryDirectory() as td:
                r = subprocess.run([a.alma, "run", os.path.join(a.dir, v + ".onnx"), "-c", conv,
                                    "--input", f"{meta['input']}={a.test}", "--output-dir", td],
                                   capture_output=True, text=True)
                outs = sorted(f for f in os.listdir(td) if f.endswith(".npy"))
                if r.returncode != 0 or len(outs) != len(refs):
                    err = (r.stderr.strip().splitlines() or ["no output"])[-1]
                    if "unavailable" in err:
                        print(f"  {conv:16s} unavailable here: {err}")
                        continue
                    print(f"  {conv:16s} FAILED: {err}")
                    failed.append((v, conv))
                    continue
                # alma run names files after the outputs; ORT's are in graph order: match by order
                # of the model's outputs, which alma run also prints in order.
                names = [l.split()[0].rstrip(":") for l in r.stdout.splitlines() if l.strip() and not l.startswith(" ")]
                ys = []
                for k in range(len(refs)):
                    f = next((o for o in outs if names and o[:-4] == names[k]), outs[k])
                    ys.append(np.load(os.path.join(td, f)))
            ok, parts = True, []
            for y, ref in zip(ys, refs):
                if y.shape != ref.shape:
                    ok = False
                    parts.append(f"shape {y.shape} vs {ref.shape}")
                    continue
                c = cosine(y, ref, both_zero=1.0, one_zero=0.0)
                am = argmax_agreement(y, ref)
                err = rel_err(y, ref, floor=1e-12)
                ok &= c >= a.min_cosine and am >= a.min_argmax and err <= a.max_err
                parts.append(f"cosine {c:.6f} argmax {100 * am:.1f}% err {100 * err:.2f}% of max")
            if labels is not None and ys[0].shape[0] == len(labels):
                parts.append(f"top-1 {100 * top1(ys[0], labels):.2f}%")
            print(f"  {conv:16s} {'ok' if ok else 'FAILED'}  " + ", ".join(parts))
            if not ok:
                failed.append((v, conv))
    if failed:
        print("failed: " + ", ".join(f"{v} on {c}" for v, c in failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
