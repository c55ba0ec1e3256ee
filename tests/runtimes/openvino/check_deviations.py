#!/usr/bin/env python3
"""Runs ONNX node test cases through OpenVINO from Python, on the original model.onnx (not alma's
re-serialized graph), and says which fail against ONNX's expected outputs the way they fail through
alma's OPENVINO runtime: those are OpenVINO's deviations (tests/runtimes/openvino/known_deviations.txt),
the others would be alma's bugs.

usage: check_deviations.py OV_PYTHON NODE_TESTS_DIR CASE... (run with a Python that has onnx and numpy;
OV_PYTHON is one with the openvino wheel, e.g. .venv-openvino/bin/python)
Prints one line per case: "<case> OV-FAILS: <why>" or "<case> OV-PASSES"."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

RUNNER = r"""
import sys, glob, os, numpy as np, openvino as ov
model, d, out = sys.argv[1:4]
c = ov.Core()
m = c.read_model(model)
cm = c.compile_model(m, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
ins = [np.load(os.path.join(d, "input_%d.npy" % i)) for i in range(len(glob.glob(os.path.join(d, "input_*.npy"))))]
req = cm.create_infer_request()
res = req.infer(ins)
for i, o in enumerate(cm.outputs):
    np.save(os.path.join(out, "output_%d.npy" % i), np.asarray(res[o]))
"""


def main():
    ov_python, root, cases = sys.argv[1], sys.argv[2], sys.argv[3:]
    for case in cases:
        d = os.path.join(root, case)
        with tempfile.TemporaryDirectory() as tmp:
            why = None
            sets = sorted(x for x in os.listdir(d) if x.startswith("test_data_set_"))
            for s in sets:
                sd = os.path.join(d, s)
                n_in = len([x for x in os.listdir(sd) if x.startswith("input_")])
                n_out = len([x for x in os.listdir(sd) if x.startswith("output_")])
                for i in range(n_in):
                    t = onnx.TensorProto()
                    t.ParseFromString(open(os.path.join(sd, "input_%d.pb" % i), "rb").read())
                    np.save(os.path.join(tmp, "input_%d.npy" % i), numpy_helper.to_array(t))
                r = subprocess.run([ov_python, "-c", RUNNER, os.path.join(d, "model.onnx"), tmp, tmp],
                                   capture_output=True, text=True)
                if r.returncode:
                    why = "OpenVINO raised: " + r.stderr.strip().splitlines()[-1][:200]
                    break
                for i in range(n_out):
                    t = onnx.TensorProto()
                    t.ParseFromString(open(os.path.join(sd, "output_%d.pb" % i), "rb").read())
                    want = numpy_helper.to_array(t)
                    got = np.load(os.path.join(tmp, "output_%d.npy" % i))
                    if got.shape != want.shape:
                        why = "%s output %d shape %s, expected %s" % (s, i, got.shape, want.shape)
                        break
                    if want.dtype.kind in "fc":
                        bad = ~np.isclose(got, want, rtol=1e-3, atol=1e-7, equal_nan=True)
                    else:
                        bad = got != want
                    if bad.any():
                        k = int(np.flatnonzero(bad)[0])
                        why = "%s output %d element %d: %s, expected %s" % (s, i, k, got.flat[k], want.flat[k])
                        break
                if why:
                    break
            print("%s %s" % (case, "OV-FAILS: " + why if why else "OV-PASSES"), flush=True)


if __name__ == "__main__":
    main()
