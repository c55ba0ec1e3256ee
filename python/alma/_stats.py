"""The latency statistics of alma's harness (src/bench/stats.c), for the rows the Python package
times itself (PyTorch's conversions), so that every row of a result is computed the same way:
NumPy-style linear percentiles, a Student-t interval of the mean, the distribution-free
order-statistic interval of the median, and the same warnings (CV, drift, short tails)."""
import math

CV_WARN = 0.10
DRIFT_WARN = 0.05
P99_MIN_SAMPLES = 100


def _percentile_sorted(x, p):
    n = len(x)
    if n == 0:
        return math.nan
    if p <= 0:
        return x[0]
    if p >= 1:
        return x[-1]
    h = (n - 1) * p
    lo = int(math.floor(h))
    if lo >= n - 1:
        return x[-1]
    return x[lo] + (h - lo) * (x[lo + 1] - x[lo])


def _betacf(a, b, x):
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (tiny if abs(d) < tiny else d)
    h = d
    for m in range(1, 1001):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        de = d * c
        h *= de
        if abs(de - 1) < eps:
            break
    return h


def _betainc(a, b, x):
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1 - math.exp(lbt) * _betacf(b, a, 1 - x) / b


def _t_cdf(t, df):
    tail = 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t >= 0 else tail


def t_quantile(p, df):
    if not (0 < p < 1) or not df > 0:
        return math.nan
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1 - p, df)
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, df) < p and hi < 1e300:
        hi *= 2
    for _ in range(200):
        if not hi - lo > 1e-15 * hi:
            break
        mid = 0.5 * (lo + hi)
        if _t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def median_ci_ranks(n, conf=0.95):
    """1-based ranks (lo, hi) of the order statistics bounding the median's interval, or None."""
    if n < 1:
        return None
    alpha = 1 - conf
    logp, cdf, j = -n * math.log(2.0), 0.0, 0
    for k in range(n // 2 + 1):
        cdf += math.exp(logp)
        if 2 * cdf > alpha:
            j = k
            break
        logp += math.log(n - k) - math.log(k + 1)
    if j < 1 or j > n + 1 - j:
        return None
    return j, n + 1 - j


def latency_stats(ms):
    """The latency_ms object of alma's results JSON for batch latencies `ms` (milliseconds)."""
    n = len(ms)
    nan = math.nan
    s = {"mean": nan, "stdev": nan, "cv": nan, "min": nan, "p50": nan, "p90": nan, "p95": nan, "p99": nan,
         "max": nan, "mean_ci95": [nan, nan], "median_ci95": [nan, nan], "n": n}
    if n == 0:
        return s
    x = sorted(ms)
    mean = math.fsum(x) / n
    s.update(mean=mean, min=x[0], max=x[-1], p50=_percentile_sorted(x, 0.5), p90=_percentile_sorted(x, 0.9),
             p95=_percentile_sorted(x, 0.95), p99=_percentile_sorted(x, 0.99))
    if n >= 2:
        sd = math.sqrt(math.fsum((v - mean) ** 2 for v in x) / (n - 1))
        half = t_quantile(0.975, n - 1) * sd / math.sqrt(n)
        s.update(stdev=sd, cv=sd / mean if mean else nan, mean_ci95=[mean - half, mean + half])
    r = median_ci_ranks(n)
    if r:
        s["median_ci95"] = [x[r[0] - 1], x[r[1] - 1]]
    return s


def latency_warnings(ms, s):
    """The warnings alma's harness attaches to a row for these latencies (same wording)."""
    out, n = [], len(ms)
    if n == 0:
        return out
    if not math.isnan(s["cv"]) and s["cv"] > CV_WARN:
        out.append(f"high variability: CV {100 * s['cv']:.1f}% > {100 * CV_WARN:.0f}% (background load, frequency "
                   "scaling or preemption; compare max and p99 with the median)")
    if n >= 20:
        h = n // 2
        a, b = latency_stats(ms[:h]), latency_stats(ms[h:])
        if not math.isnan(a["median_ci95"][0]) and not math.isnan(b["median_ci95"][0]):
            m1, m2 = a["p50"], b["p50"]
            rel = abs(m2 - m1) / s["p50"] if s["p50"] else 0
            disjoint = a["median_ci95"][1] < b["median_ci95"][0] or b["median_ci95"][1] < a["median_ci95"][0]
            if rel > DRIFT_WARN and disjoint:
                out.append(f"drift: median of the second half {m2:.4g} ms vs first half {m1:.4g} ms "
                           f"({100 * (m2 - m1) / m1:+.1f}%, 95% CIs do not overlap): throttling, background load "
                           "or caching changed the run")
    if n < P99_MIN_SAMPLES:
        out.append(f"p99 rests on {n} batches (< {P99_MIN_SAMPLES}): tail percentiles are unreliable")
    return out
