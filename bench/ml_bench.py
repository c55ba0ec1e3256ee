#!/usr/bin/env python3
"""Classical ML models (ai.onnx.ml: tree ensembles, SVMs, linear models) through alma's EAGER and
ONNX Runtime, in one run.

Models: the committed scikit-learn pipelines of tests/ops_ml/models/ (small: a few trees, a few
support vectors), plus larger ones trained here on seeded synthetic data and exported by skl2onnx
(ZipMap off), kept in --models-dir: a 100-tree RandomForest classifier (unbounded depth, 35k
nodes), a 100-tree RandomForest regressor (depth 12, 282k nodes), a 100-stage GradientBoosting
classifier of 3 classes (300 trees of depth 4) and an RBF SVC with 822 support vectors. Each model runs at each batch size through `alma bench -c
EAGER` (one alma binary, or two: --alma-before, for a before/after comparison; EAGER is
single-threaded) and ONNX Runtime (CPU provider, intra-op threads = --threads), interleaved model
by model so that a shared machine's load affects all of them alike. Prints p50 latencies (ms)
and the ratios alma / ONNX Runtime from the same run (docs/ml-ops.md has the results).

usage: ml_bench.py --alma build/alma [--alma-before OLD/alma] [--threads 1] [--batches 1,256]
                   [--min-runs 30] [--min-time 1] [--only NAME,...] [--models-dir DIR]
(a python with scikit-learn, skl2onnx, onnxruntime and numpy: .venv-ml/bin/python)
"""
import argparse
import os
import statistics
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import alma_bench, time_samples  # noqa: E402
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
SMALL_DIR = os.path.join(HERE, "..", "tests", "ops_ml", "models")
SMALL = ["rf_classifier3", "rf_regressor", "gb_classifier3", "svc_rbf3", "scaler_logreg3"]
LARGE = ["rf100_classifier", "rf100_regressor", "gb300_classifier3", "svc800_rbf"]


def make_large(name, path):
    """Trains and exports one of LARGE (scikit-learn and skl2onnx needed only here)."""
    import warnings

    from skl2onnx import to_onnx
    from sklearn.datasets import make_classification, make_regression
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier, RandomForestRegressor
    from sklearn.svm import SVC

    warnings.filterwarnings("ignore")
    if name == "rf100_regressor":
        x, y = make_regression(n_samples=4000, n_features=20, noise=1.0, random_state=5)
        est = RandomForestRegressor(n_estimators=100, max_depth=12, random_state=0)
    else:
        ncls = 3 if name == "gb300_classifier3" else 2
        x, y = make_classification(n_samples=2000, n_features=20, n_informative=10, n_classes=ncls, random_state=4)
        est = {"rf100_classifier": RandomForestClassifier(n_estimators=100, random_state=0),
               "gb300_classifier3": GradientBoostingClassifier(n_estimators=100, max_depth=4, random_state=0),
               "svc800_rbf": SVC(C=0.3, random_state=0)}[name]
    x = x.astype(np.float32)
    est.fit(x, y)
    opts = {id(est): {"zipmap": False}} if name != "rf100_regressor" else None
    onx = to_onnx(est, x[:1], target_opset={"": 17, "ai.onnx.ml": 3}, options=opts)
    onnx.save(onx, path)


def model_path(name, models_dir):
    if name in SMALL:
        return os.path.join(SMALL_DIR, name + ".onnx")
    path = os.path.join(models_dir, name + ".onnx")
    if not os.path.exists(path):
        os.makedirs(models_dir, exist_ok=True)
        make_large(name, path)
    return path


def describe(path):
    """Tree nodes or support vectors of the model's ml node, for the table."""
    m = onnx.load(path)
    for n in m.graph.node:
        at = {a.name: a for a in n.attribute}
        if "nodes_nodeids" in at:
            trees = len(set(at["nodes_treeids"].ints))
            return f"{trees} trees, {len(at['nodes_nodeids'].ints)} nodes"
        if "vectors_per_class" in at:
            return f"{sum(at['vectors_per_class'].ints)} support vectors"
    return ""


def n_features(path):
    m = onnx.load(path)
    return m.graph.input[0].type.tensor_type.shape.dim[1].dim_value


def time_fn(fn, min_runs, min_time):
    return statistics.median(time_samples(fn, min_runs, min_time, warmup=5))


def bench_ort(path, x, a):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = {sess.get_inputs()[0].name: x}
    return time_fn(lambda: sess.run(None, feeds), a.min_runs, a.min_time)


def bench_alma(alma, path, xfile, batch, td, a):
    res = alma_bench(alma, path, ["--data", xfile, "-b", str(batch), "-c", "EAGER", "--threads", str(a.threads), "-n",
                                  str(a.min_runs), "--min-time", str(a.min_time), "--no-cache"])
    lat = res.get("EAGER")
    return lat and lat["p50"]


def fmt(v):
    return (f"{v:.4f}" if v < 0.1 else f"{v:.3f}") if v else "failed"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--alma", default="build/alma")
    ap.add_argument("--alma-before", default="", help="a second alma binary (before a change) timed beside --alma")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batches", default="1,256")
    ap.add_argument("--min-runs", type=int, default=30)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--only", default="")
    ap.add_argument("--models-dir", default=os.path.join(HERE, "..", "build-cache", "ml_bench"))
    a = ap.parse_args()
    names = [n for n in a.only.split(",") if n] or SMALL + LARGE
    batches = [int(b) for b in a.batches.split(",")]
    rng = np.random.default_rng(0)
    head = "| model | batch | " + ("alma before | " if a.alma_before else "") + "alma EAGER | ONNX Runtime | alma / ORT |"
    if a.alma_before:
        head += " before / ORT | before / after |"
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for name in names:
        path = model_path(name, a.models_dir)
        feats = n_features(path)
        for b in batches:
            with tempfile.TemporaryDirectory() as td:
                x = rng.standard_normal((b, feats)).astype(np.float32)
                xfile = os.path.join(td, "x.npy")
                np.save(xfile, x)
                before = bench_alma(a.alma_before, path, xfile, b, td, a) if a.alma_before else None
                after = bench_alma(a.alma, path, xfile, b, td, a)
                ort_ms = bench_ort(path, x, a)
            row = f"| {name} ({describe(path)}) | {b} | " + (f"{fmt(before)} | " if a.alma_before else "") + f"{fmt(after)} | {fmt(ort_ms)} | "
            row += f"{after / ort_ms:.2f} |" if after else "- |"
            if a.alma_before:
                row += f" {before / ort_ms:.1f} |" if before else " - |"
                row += f" {before / after:.1f} |" if before and after else " - |"
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
