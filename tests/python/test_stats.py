"""The statistics and output check of the rows Python times, against independent references
(NumPy, the exact binomial law, a t table) and against alma's C harness on the same latencies."""
import json
import math
import os
import subprocess

import numpy as np
import pytest

from alma import _check, _stats


def test_percentiles_match_numpy():
    rng = np.random.default_rng(1)
    for n in (1, 2, 7, 100, 1001):
        x = list(rng.lognormal(0, 0.5, n))
        s = _stats.latency_stats(x)
        for k, p in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99)):
            assert s[k] == pytest.approx(np.percentile(x, p), rel=1e-12)
        assert s["mean"] == pytest.approx(np.mean(x), rel=1e-12)
        if n >= 2:
            assert s["stdev"] == pytest.approx(np.std(x, ddof=1), rel=1e-10)


def test_t_quantile_against_table():
    # two-sided 95% critical values of Student's t
    for df, t in ((1, 12.706204736174707), (5, 2.5705818356363146), (10, 2.2281388519862744),
                  (30, 2.0422724563012373), (1000, 1.9623390808264078)):
        assert _stats.t_quantile(0.975, df) == pytest.approx(t, rel=1e-9)


def test_median_ci_ranks_exact_binomial():
    for n in (6, 10, 17, 50, 101):
        lo, hi = _stats.median_ci_ranks(n)
        cdf = lambda k: sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n  # noqa: E731
        # coverage of [x_(lo), x_(hi)] is 1 - 2 P(B <= lo - 1) >= 95%, and one rank tighter is not
        assert 1 - 2 * cdf(lo - 1) >= 0.95
        assert 1 - 2 * cdf(lo) < 0.95
        assert hi == n + 1 - lo
    assert _stats.median_ci_ranks(5) is None


def test_same_figures_as_the_c_harness(tmp_path, small_onnx, alma_cli):
    out = tmp_path / "r.json"
    subprocess.run([alma_cli, "bench", small_onnx, "-c", "EAGER,FOLD+EAGER", "-b", "2", "-n", "40", "--min-time",
                    "0.05", "--raw", "--json", str(out), "--no-cache"], check=True, capture_output=True)
    for row in json.load(open(out))["results"]:
        mine = _stats.latency_stats(row["raw_ms"])
        for k, v in row["latency_ms"].items():
            if isinstance(v, list):
                assert mine[k] == pytest.approx(v, rel=1e-12)
            elif v is not None:
                assert mine[k] == pytest.approx(v, rel=1e-12), k


def test_check_rule():
    ref = [np.array([[1.0, 2.0, 3.0], [0.0, 5.0, -1.0]], np.float32)]
    c, detail = _check.compare(ref, [ref[0].copy()], 1e-3, 1e-4)
    assert c["passed"] and c["max_abs_err"] == 0 and c["argmax_agreement"] == 1 and c["cosine"] == pytest.approx(1)
    bad = ref[0].copy()
    bad[1, 2] = 6.0  # moves row 1's argmax
    c, detail = _check.compare(ref, [bad], 1e-3, 1e-4)
    assert not c["passed"] and c["max_abs_err"] == pytest.approx(7.0)
    assert c["argmax_agreement"] == 0.5 and "element 5" in detail
    c, detail = _check.compare(ref, [bad[:1]], 1e-3, 1e-4)
    assert not c["passed"] and "shape" in detail
    # NaN where the reference has NaN agrees; elsewhere it does not
    a = np.array([np.nan, 1.0])
    assert _check.compare([a], [a.copy()], 1e-3, 1e-4)[0]["passed"]
    assert not _check.compare([a], [np.array([0.0, 1.0])], 1e-3, 1e-4)[0]["passed"]


def test_lossy_judged_by_cosine_and_argmax():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((8, 10))
    near = ref + 1e-2 * rng.standard_normal(ref.shape)
    w = []
    c, d = _check.compare([ref], [near], 1e-3, 1e-4)
    assert not c["passed"]
    assert _check.judge(c, d, 1e-3, 1e-4, True, w)["passed"] and "reduced precision" in w[0]
