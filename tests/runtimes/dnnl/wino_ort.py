#!/usr/bin/env python3
"""ONNX Runtime's output for one of make_wino_models.py's models on a seeded input (batch 3):
writes X.npy and Y.npy into OUTDIR for `dnnl_wino_test --ort`.

usage: wino_ort.py MODEL.onnx OUTDIR"""
import os
import sys

import numpy as np
import onnxruntime as ort


def main(model, outdir):
    os.makedirs(outdir, exist_ok=True)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    i = s.get_inputs()[0]
    shape = [3 if not isinstance(d, int) else d for d in i.shape]
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    (y,) = s.run(None, {i.name: x})
    np.save(os.path.join(outdir, "X.npy"), x)
    np.save(os.path.join(outdir, "Y.npy"), y)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
