"""What CPU a PyTorch row's timed phase got, measured in its process by alma's C harness
(alma_contention_begin / alma_contention_end, src/bench/contention.c): CPU time, time its threads
waited for a CPU (schedstat), other processes' and the hypervisor's time on its CPUs (/proc/stat),
CPU pressure, and the same verdict as alma's own rows, worded the same."""
import ctypes
import math
import os

from . import _lib


class _Contention(ctypes.Structure):
    # alma_contention (include/alma/bench.h), field by field
    _fields_ = [("measured", ctypes.c_int), ("wall_s", ctypes.c_double), ("threads", ctypes.c_int),
                ("cpus", ctypes.c_int), ("cpu_s", ctypes.c_double), ("utilization", ctypes.c_double),
                ("run_delay_s", ctypes.c_double), ("cpu_share", ctypes.c_double),
                ("voluntary_switches", ctypes.c_int64), ("involuntary_switches", ctypes.c_int64),
                ("others_cpu_s", ctypes.c_double), ("steal_s", ctypes.c_double), ("psi_some_s", ctypes.c_double),
                ("disturbed", ctypes.c_int), ("reason", ctypes.c_char_p), ("spinning", ctypes.c_int),
                ("advice", ctypes.c_char_p), ("notes", ctypes.c_char_p)]


class Snapshot:
    """The counters at the start of a timed phase (one use: measure() consumes it)."""

    def __init__(self):
        self._h = _lib.lib().alma_contention_begin()
        if not self._h:
            raise MemoryError("alma_contention_begin")


def _advice(threads):
    # PyTorch's CPU parallel backend is OpenMP (libgomp), whose threads spin at barriers
    if threads > 1 and os.environ.get("OMP_WAIT_POLICY", "").lower() != "passive":
        return ("PyTorch's OpenMP threads spin at every barrier: set OMP_WAIT_POLICY=passive in the "
                "environment the benchmark starts in, or threads 1")
    return None


def measure(start, threads):
    """The results JSON's "contention" object of the phase since `start` (a Snapshot)."""
    L = _lib.lib()
    c = _Contention()
    h, start._h = start._h, None
    if not h:
        raise ValueError("this Snapshot was measured already")
    adv = _advice(threads)
    _lib.check(L.alma_contention_end(h, threads, adv.encode() if adv else None, ctypes.byref(c)), "contention")
    try:
        num = lambda v: v if math.isfinite(v) else None  # noqa: E731 (NaN: not measured here)
        cnt = lambda v: v if v >= 0 else None  # noqa: E731 (-1: not measured here)
        text = lambda v: v.decode() if v else None  # noqa: E731
        return {"wall_s": c.wall_s, "threads": c.threads, "cpus": c.cpus, "cpu_s": num(c.cpu_s),
                "utilization": num(c.utilization), "run_delay_s": num(c.run_delay_s), "cpu_share": num(c.cpu_share),
                "voluntary_switches": cnt(c.voluntary_switches), "involuntary_switches": cnt(c.involuntary_switches),
                "others_cpu_s": num(c.others_cpu_s), "steal_s": num(c.steal_s), "psi_some_s": num(c.psi_some_s),
                "disturbed": bool(c.disturbed), "reason": text(c.reason), "spinning": bool(c.spinning),
                "advice": text(c.advice), "notes": text(c.notes)}
    finally:
        L.alma_contention_clear(ctypes.byref(c))
