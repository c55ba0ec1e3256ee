"""The latency statistics of the rows the Python package times itself (PyTorch's conversions),
computed by alma's C harness (alma_latency_stats_of, alma_latency_warnings_of), so that every row
of a result has the same percentiles, intervals and warnings, worded the same."""
import ctypes

from . import _lib


class _LatencyStats(ctypes.Structure):
    # alma_latency_stats (include/alma/bench.h), field by field
    _fields_ = [("n", ctypes.c_int64), ("mean", ctypes.c_double), ("stdev", ctypes.c_double),
                ("cv", ctypes.c_double), ("min", ctypes.c_double), ("p50", ctypes.c_double),
                ("p90", ctypes.c_double), ("p95", ctypes.c_double), ("p99", ctypes.c_double),
                ("max", ctypes.c_double), ("mean_ci95", ctypes.c_double * 2), ("median_ci95", ctypes.c_double * 2)]


def _c(ms):
    s = _LatencyStats()
    arr = (ctypes.c_double * max(len(ms), 1))(*ms)
    _lib.check(_lib.lib().alma_latency_stats_of(arr, len(ms), ctypes.byref(s)), "latency statistics")
    return arr, s


def _as_dict(s):
    out = {k: getattr(s, k) for k in ("mean", "stdev", "cv", "min", "p50", "p90", "p95", "p99", "max")}
    out.update(mean_ci95=list(s.mean_ci95), median_ci95=list(s.median_ci95), n=s.n)
    return out


def _warnings(arr, n, cs):
    L = _lib.lib()
    need = L.alma_latency_warnings_of(arr, n, ctypes.byref(cs), None, 0)
    buf = ctypes.create_string_buffer(need + 1)
    L.alma_latency_warnings_of(arr, n, ctypes.byref(cs), buf, len(buf))
    return [w for w in buf.value.decode().split("\n") if w]


def latency_stats(ms):
    """The latency_ms object of alma's results JSON for batch latencies `ms` (milliseconds, run order)."""
    return _as_dict(_c(ms)[1])


def latency_warnings(ms):
    """The warnings alma's harness attaches to a row with these latencies."""
    arr, cs = _c(ms)
    return _warnings(arr, len(ms), cs)


def latency_stats_and_warnings(ms):
    """Both of the above from one computation of the statistics (the end of a timed phase)."""
    arr, cs = _c(ms)
    return _as_dict(cs), _warnings(arr, len(ms), cs)
