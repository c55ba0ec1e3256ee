"""One model written by another exporter (tests/models/exporters/<exporter>/*.onnx: tf2onnx, jax2onnx,
...) run by alma under each conversion and compared with ONNX Runtime on the same random inputs
(INT8_DYNAMIC too: its run-time zero points reach DNNL paths that static int8 rarely does).

Inputs come from the model's declared input types: symbolic dims are 2; floats are standard normal,
integers uniform in [0, 10), bools random. Float conversions must reach cosine >= 0.9999 and a
largest difference <= 1e-3 of the largest reference value on every output (integer outputs of
a float conversion must be equal); int8 conversions cosine >= 0.99. Output shapes must agree.

usage: check_exporters.py ALMA MODEL.onnx WORKDIR [--conversions A,B,...]
       (python with onnxruntime and numpy; exit 77 = SKIP without them)"""
import argparse
import os
import shutil
import sys

import numpy as np

try:
    import onnxruntime as ort
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
from alma_cli import alma_run  # noqa: E402

CONVS = "EAGER,FOLD+FUSE+EAGER,FOLD+FUSE+DNNL,FOLD+XNNPACK,FOLD+BLAS,FOLD+INT8_STATIC+DNNL,FOLD+INT8_DYNAMIC+DNNL"
NP = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
      "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int16)": np.int16, "tensor(int8)": np.int8,
      "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_}


def inputs(sess, rng):
    feeds = {}
    for i in sess.get_inputs():
        if i.type not in NP:
            raise SystemExit(f"FAIL: input {i.name} has type {i.type}, which this check cannot generate")
        t = NP[i.type]
        shape = [d if isinstance(d, int) and d >= 0 else 2 for d in i.shape]
        if t == np.bool_:
            feeds[i.name] = rng.random(shape) < 0.5
        elif np.issubdtype(t, np.integer):
            feeds[i.name] = rng.integers(0, 10, shape).astype(t)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(t)
    return feeds


def compare(name, conv, got, ref):
    """A list of problems of one output under one conversion."""
    if got.shape != ref.shape:
        return [f"{name}: shape {got.shape}, ONNX Runtime {ref.shape}"]
    if got.size == 0:
        return []
    int8 = "INT8" in conv
    if not int8 and not np.issubdtype(ref.dtype, np.floating):
        bad = int((got != ref).sum())
        return [f"{name}: {bad} of {ref.size} integer values differ"] if bad else []
    a, r = got.astype(np.float64), ref.astype(np.float64)
    if not (np.isfinite(a) == np.isfinite(r)).all():
        return [f"{name}: non-finite values where ONNX Runtime has finite ones (or the reverse)"]
    fin = np.isfinite(r)
    a, r = a[fin], r[fin]
    na, nr = np.linalg.norm(a), np.linalg.norm(r)
    cos = 1.0 if na == nr == 0 else float((a * r).sum() / (na * nr + 1e-30))
    err = float(np.abs(a - r).max(initial=0) / (np.abs(r).max(initial=0) + 1e-12))
    limit = 0.99 if int8 else 0.9999
    out = []
    if cos < limit:
        out.append(f"{name}: cosine {cos:.5f} < {limit}")
    if not int8 and err > 1e-3:
        out.append(f"{name}: largest difference {err:.2e} of the largest value > 1e-3")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("alma")
    ap.add_argument("model")
    ap.add_argument("work")
    ap.add_argument("--conversions", default=CONVS)
    a = ap.parse_args()
    ort.set_default_logger_severity(3)  # no deprecation warnings (tf2onnx's tf_half_pixel_for_nn)
    so = ort.SessionOptions()
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    feeds = inputs(sess, np.random.default_rng(0))
    outs = [o.name for o in sess.get_outputs()]
    refs = sess.run(None, feeds)
    model = os.path.relpath(a.model, os.path.join(os.path.dirname(os.path.abspath(__file__))))
    failures = []
    for conv in a.conversions.split(","):
        d = os.path.join(a.work, conv.replace("+", "_"))
        shutil.rmtree(d, ignore_errors=True)
        r = alma_run(a.alma, a.model, conv, feeds, d, "-t", "2", check=False, timeout=300)
        if r.returncode:
            msg = (r.stderr or r.stdout).strip().splitlines()
            failures.append(f"{model} {conv}: alma failed: {msg[-1] if msg else r.returncode}")
            continue
        probs = []
        for o, ref in zip(outs, refs):
            f = os.path.join(d, "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in o) + ".npy")
            if not os.path.exists(f):
                probs.append(f"{o}: no output written")
                continue
            probs += compare(o, conv, np.load(f), ref)
        print(f"{model:40s} {conv:24s} {'ok' if not probs else 'FAIL'}", flush=True)
        failures += [f"{model} {conv}: {p}" for p in probs]
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
