"""Output comparison helpers shared by the accuracy scripts (quantization, int8 runtimes, saved
models against ONNX Runtime). numpy only: the scripts run under /usr/bin/python3 and under venvs
with numpy 2.

Import from a script with
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "<up>", "common"))
    from qmetrics import cosine, ...
"""
import os

import numpy as np


def cosine(a, b, both_zero=float("nan"), one_zero=float("nan")):
    """Cosine similarity of a and b flattened, in float64; both_zero / one_zero when either norm is 0."""
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na > 0 and nb > 0:
        return float(a @ b / (na * nb))
    return both_zero if na == nb else one_zero


def flat(arrays):
    """All the outputs of a run as one vector (a model's outputs compared as a whole)."""
    return np.concatenate([x.ravel() for x in arrays])


def argmax_agreement(y, ref):
    """Share of rows (all axes but the last) whose argmax over the last axis agrees."""
    return float(np.mean(y.reshape(-1, y.shape[-1]).argmax(-1) == ref.reshape(-1, ref.shape[-1]).argmax(-1)))


def top1(y, labels):
    """Share of rows of y whose argmax is the label."""
    return float((y.argmax(-1) == labels).mean())


def max_abs_err(y, ref):
    """Largest absolute difference, in float64."""
    return float(np.abs(y.astype(np.float64) - ref).max())


def rel_err(y, ref, floor=1e-30):
    """Largest absolute difference relative to ref's largest magnitude (at least floor)."""
    return float(np.abs(y.astype(np.float64) - ref).max() / max(float(np.abs(ref).max()), floor))


def rel_norm_err(y, ref):
    """|y - ref| / |ref| (2-norms)."""
    return float(np.linalg.norm(y - ref) / max(np.linalg.norm(ref), 1e-30))


def load_outputs(d):
    """output_0.npy, output_1.npy, ... of directory d (quant_run's outputs), in order."""
    outs, i = [], 0
    while os.path.exists(os.path.join(d, f"output_{i}.npy")):
        outs.append(np.load(os.path.join(d, f"output_{i}.npy")))
        i += 1
    return outs
