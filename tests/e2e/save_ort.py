"""`alma bench --save-converted`: every saved converted graph is a valid ONNX model that ONNX
Runtime (PyPI's onnxruntime) loads and runs with alma's outputs.

usage: save_ort.py ALMA MODEL WORKDIR ORT_PYTHON

MODEL is a small CNN (examples/models/mnist_cnn.onnx: input "image" [batch,1,28,28]). The bench
runs EAGER, FOLD+EAGER, INT8_STATIC+EAGER (calibrated on the benchmark data), INT8_DYNAMIC+EAGER
and FOLD+FUSE+EAGER with --save-converted; then, for each saved file:

- `alma run SAVED` (EAGER) gives alma's outputs of the saved graph on x.npy;
- for the conversions that need no calibration, `alma run MODEL -c CONVERSION` must give the same
  outputs (the file is the graph that was benchmarked, not an approximation of it);
- ONNX Runtime (graph optimizations "basic", which keep the graph's arithmetic as written) runs the
  saved file on x.npy and must match alma's outputs: within 1e-4 of the largest output for fp32 and
  dynamic int8, 5e-2 with cosine >= 0.9999 for static QDQ int8 (a float sum rounded differently by
  another Conv can cross a quantization step); the static int8 outputs must also keep cosine >= 0.99
  against fp32 EAGER on the original model;
- a graph with alma-domain ops (FUSE) is saved and flagged (JSON alma_ops > 0, a warning, the
  report line), and ONNX Runtime must refuse it: alma says so instead of hiding it.

Exit 0 when all hold, 1 otherwise, 77 (CTest's SKIP_RETURN_CODE) when ORT_PYTHON is empty or
cannot import onnxruntime.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from qmetrics import cosine, rel_err  # noqa: E402

CONVERSIONS = ["EAGER", "FOLD+EAGER", "INT8_STATIC+EAGER", "INT8_DYNAMIC+EAGER", "FOLD+FUSE+EAGER"]

ORT_SCRIPT = r"""
import json, sys
import numpy as np
import onnxruntime as ort
model, x, out = sys.argv[1], np.load(sys.argv[2]), sys.argv[3]
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
so.intra_op_num_threads = 1
try:
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
except Exception as e:  # the file is refused: say why on one line
    print(json.dumps({"refused": str(e).splitlines()[0][:300]}))
    sys.exit(0)
ys = s.run(None, {s.get_inputs()[0].name: x})
for i, y in enumerate(ys):
    np.save(f"{out}_{i}.npy", y)
print(json.dumps({"version": ort.__version__, "outputs": len(ys)}))
"""


def alma_run(alma, model, outdir, x, conversion=None):
    """alma's outputs (in output order) of MODEL on x; conversion None = EAGER."""
    shutil.rmtree(outdir, ignore_errors=True)
    cmd = [alma, "run", model, "--input", "image=" + x, "-o", outdir] + (["-c", conversion] if conversion else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-500:]}")
    return np.load(os.path.join(outdir, "logits.npy"))


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    alma, model, work, ort_py = sys.argv[1:]
    if not ort_py or subprocess.run([ort_py, "-c", "import onnxruntime, numpy"], capture_output=True).returncode != 0:
        print(f"SKIP: no python with onnxruntime (ALMA_ORT_PYTHON='{ort_py}'): the saved models are not run by "
              "ONNX Runtime; scripts/test.sh makes one (.venv-test)")
        return 77
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rng = np.random.default_rng(0)
    # digit-like inputs in [0, 1]: 32 samples for the bench (its 8 calibration batches of 4), 8 to check
    np.save(os.path.join(work, "data.npy"), rng.random((32, 1, 28, 28), dtype=np.float32))
    x = os.path.join(work, "x.npy")
    np.save(x, rng.random((8, 1, 28, 28), dtype=np.float32))
    saved = os.path.join(work, "saved")
    cmd = [alma, "bench", model, "-c", ",".join(CONVERSIONS), "-b", "4", "--data", os.path.join(work, "data.npy"),
           "--save-converted", saved, "--json", os.path.join(work, "r.json"), "--no-cache",
           "-n", "8", "--min-time", "0.05", "--warmup", "1", "--warmup-time", "0"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    print(p.stdout)
    if p.returncode != 0:
        print(f"FAIL: {' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
        return 1
    failures = []
    results = json.load(open(os.path.join(work, "r.json")))["results"]
    fp32 = alma_run(alma, model, os.path.join(work, "ref"), x)
    print(f"{'conversion':22s} {'alma ops':>8s} {'vs bench conv':>13s} {'ORT max err':>11s} {'ORT cosine':>10s}  note")
    for r in results:
        conv = r["conversion"]
        sv = r.get("saved_converted")
        want = os.path.join(saved, conv + ".onnx")
        if not sv or sv["path"] != want or not os.path.isfile(want):
            failures.append(f"{conv}: saved_converted is {sv}, expected the file {want}")
            continue
        if f"saved      {want}" not in p.stdout:
            failures.append(f"{conv}: the report has no 'saved' line for {want}")
        mine = alma_run(alma, want, os.path.join(work, conv + ".alma"), x)
        same = "-"
        if "INT8_STATIC" not in conv and not sv["alma_ops"]:
            direct = alma_run(alma, model, os.path.join(work, conv + ".direct"), x, conv)
            err = rel_err(mine, direct)
            same = f"{err:.2g}"
            if err > 1e-6:
                failures.append(f"{conv}: the saved graph's outputs differ from the conversion's by {err:.3g}")
        o = subprocess.run([ort_py, "-c", ORT_SCRIPT, want, x, os.path.join(work, conv + ".ort")],
                           capture_output=True, text=True)
        if o.returncode != 0:
            failures.append(f"{conv}: the ONNX Runtime script failed: {o.stderr.strip()[-500:]}")
            continue
        info = json.loads(o.stdout.strip().splitlines()[-1])
        if sv["alma_ops"]:
            warned = any("ONNX Runtime" in w and want in w for w in r["warnings"])
            print(f"{conv:22s} {sv['alma_ops']:8d} {same:>13s} {'-':>11s} {'-':>10s}  "
                  f"ONNX Runtime refuses it, as reported: {info.get('refused', 'LOADED')[:80]}")
            if "refused" not in info:
                failures.append(f"{conv}: alma says the file has alma-domain ops, yet ONNX Runtime loaded it")
            if not warned:
                failures.append(f"{conv}: no warning says ONNX Runtime cannot run {want}")
            continue
        if "refused" in info:
            failures.append(f"{conv}: ONNX Runtime refuses the saved model: {info['refused']}")
            continue
        y = np.load(os.path.join(work, conv + ".ort_0.npy"))
        err, cos = rel_err(y, mine), cosine(y, mine)
        static = "INT8_STATIC" in conv
        tol, min_cos = (5e-2, 0.9999) if static else (1e-4, 0.999999)
        note = f"onnxruntime {info['version']}"
        if static:
            c32 = cosine(mine, fp32)
            note += f", cosine {c32:.5f} vs fp32 EAGER"
            if not c32 >= 0.99:
                failures.append(f"{conv}: cosine {c32:.5f} against fp32 EAGER, below 0.99")
        print(f"{conv:22s} {sv['alma_ops']:8d} {same:>13s} {err:11.2g} {cos:10.7f}  {note}")
        if not (err <= tol and cos >= min_cos):
            failures.append(f"{conv}: ONNX Runtime's outputs differ from alma's: max error {err:.3g} of the largest "
                            f"output (limit {tol}), cosine {cos:.7f} (limit {min_cos})")
    if len(results) != len(CONVERSIONS):
        failures.append(f"{len(results)} results for {len(CONVERSIONS)} conversions")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
