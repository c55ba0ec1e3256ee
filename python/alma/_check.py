"""The output check of alma's harness (src/bench/harness.c, compare_flat) on numpy arrays, for
the rows timed in Python: same tolerance rule, same figures, same lossy-precision judgment."""
import math

import numpy as np

LOSSY_MIN_COSINE = 0.99
LOSSY_MIN_ARGMAX = 0.99


def compare(ref, out, rtol, atol, names=None):
    """(check dict as in the results JSON, detail text) for outputs `out` against `ref`."""
    c = {"performed": True, "passed": True}
    detail = []
    if len(ref) != len(out):
        c["passed"] = False
        detail.append(f"{len(out)} outputs, the reference has {len(ref)}")
    max_abs = max_rel = dot = na = nb = 0.0
    rows = agree = bad = total = nfloat = 0
    floor = atol if atol > 0 else np.finfo(np.float64).tiny
    for k, (r, x) in enumerate(zip(ref, out)):
        name = names[k] if names and k < len(names) else f"output_{k}"
        r, x = np.asarray(r), np.asarray(x)
        if r.shape != x.shape:
            c["passed"] = False
            if not detail:
                detail.append(f"output '{name}' has shape {list(x.shape)}, the reference {list(r.shape)}")
            continue
        a, b = x.astype(np.float64).ravel(), r.astype(np.float64).ravel()
        total += a.size
        nan_a, nan_b = np.isnan(a), np.isnan(b)
        inf_any = (np.isinf(a) | np.isinf(b)) & ~(nan_a | nan_b)
        fin = ~(nan_a | nan_b | inf_any)
        badm = (nan_a != nan_b) | (inf_any & (a != b))
        d = np.abs(a[fin] - b[fin])
        if d.size:
            max_abs = max(max_abs, float(d.max()))
            max_rel = max(max_rel, float((d / np.maximum(np.abs(b[fin]), floor)).max()))
        badf = np.zeros_like(badm)
        badf[fin] = d > atol + rtol * np.abs(b[fin])
        badm |= badf
        nbad = int(badm.sum())
        bad += nbad
        if nbad and not detail:
            i = int(np.argmax(badm))
            detail.append(f"output '{name}' element {i} is {a[i]:.6g}, the reference {b[i]:.6g}")
        is_float = np.issubdtype(r.dtype, np.floating) or np.issubdtype(x.dtype, np.floating)
        if is_float:
            dot += float(np.dot(a[fin], b[fin]))
            na += float(np.dot(a[fin], a[fin]))
            nb += float(np.dot(b[fin], b[fin]))
            nfloat += 1
            last = r.shape[-1] if r.ndim >= 1 else 0
            if last >= 2:
                xa, ra = x.reshape(-1, last), r.reshape(-1, last)
                rows += xa.shape[0]
                agree += int((np.argmax(xa, axis=1) == np.argmax(ra, axis=1)).sum())
    if bad:
        c["passed"] = False
        detail.append(f"{bad} of {total} elements outside atol + rtol*|ref|")
    c["max_abs_err"] = max_abs
    c["max_rel_err"] = max_rel
    c["argmax_agreement"] = agree / rows if rows else math.nan
    c["cosine"] = (math.nan if not nfloat else 1.0 if na == 0 and nb == 0 else 0.0 if na == 0 or nb == 0
                   else dot / math.sqrt(na * nb))
    return c, "; ".join(detail)


def judge(c, detail, rtol, atol, lossy, warnings):
    """Applies the harness's rule: lossy conversions by cosine and argmax, others elementwise."""
    if lossy:
        cos, am = c["cosine"], c["argmax_agreement"]
        ok = math.isfinite(cos) and cos >= LOSSY_MIN_COSINE and (not math.isfinite(am) or am >= LOSSY_MIN_ARGMAX)
        if not c["passed"]:
            warnings.append(f"reduced precision: outputs differ from EAGER's beyond rtol {rtol:g}, atol {atol:g} "
                            f"({detail}); judged by cosine {cos:.6f} (>= {LOSSY_MIN_COSINE:.2f} needed) and argmax "
                            f"agreement {100 * am:.1f}% (>= {100 * LOSSY_MIN_ARGMAX:.0f}% needed)")
        c["passed"] = ok
    elif not c["passed"]:
        warnings.append(f"outputs differ from EAGER's (rtol {rtol:g}, atol {atol:g}): {detail}")
    return c
