"""The output check of the rows timed in Python (PyTorch's conversions), done by alma's harness
(alma_outputs_check): the same tolerance rule, figures and lossy-precision judgment as every
other row."""
import ctypes

from . import _lib


def check(ref, out, rtol, atol, lossy, warnings):
    """The check dict of the results JSON for outputs `out` (numpy arrays) against `ref`; the
    warning the harness attaches, if any, is appended to `warnings`."""
    keep_r, tr = _lib.tensors(ref, "reference output")
    keep_o, to = _lib.tensors(out, "output")
    c = _lib.OutputCheck()
    w = ctypes.create_string_buffer(2048)
    _lib.check(_lib.lib().alma_outputs_check(tr, len(keep_r), to, len(keep_o), float(rtol), float(atol),
                                             1 if lossy else 0, ctypes.byref(c), w, len(w)), "output check")
    if w.value:
        warnings.append(w.value.decode(errors="replace"))
    return {"performed": True, "passed": bool(c.passed), "max_abs_err": c.max_abs_err, "max_rel_err": c.max_rel_err,
            "argmax_agreement": c.argmax_agreement, "cosine": c.cosine_similarity}
