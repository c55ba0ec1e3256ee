"""The statistics and output check of the rows Python times, against independent references
(NumPy, the exact binomial law, a t table) and against the rows alma's harness times."""
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


def test_mean_interval_against_t_table():
    # two-sided 95% critical values of Student's t: half-width t * sd / sqrt(n)
    rng = np.random.default_rng(2)
    for df, t in ((1, 12.706204736174707), (5, 2.5705818356363146), (10, 2.2281388519862744),
                  (30, 2.0422724563012373), (1000, 1.9623390808264078)):
        x = list(rng.lognormal(0, 0.3, df + 1))
        s = _stats.latency_stats(x)
        half = t * np.std(x, ddof=1) / math.sqrt(len(x))
        assert s["mean_ci95"] == pytest.approx([np.mean(x) - half, np.mean(x) + half], rel=1e-9)


def test_median_interval_exact_binomial():
    rng = np.random.default_rng(3)
    for n in (6, 10, 17, 50, 101):
        x = list(rng.lognormal(0, 0.5, n))
        lo, hi = _stats.latency_stats(x)["median_ci95"]
        srt = sorted(x)
        j = srt.index(lo) + 1  # 1-based rank of the lower bound
        cdf = lambda k: sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n  # noqa: E731
        # coverage of [x_(j), x_(n+1-j)] is 1 - 2 P(B <= j - 1) >= 95%, and one rank tighter is not
        assert 1 - 2 * cdf(j - 1) >= 0.95
        assert 1 - 2 * cdf(j) < 0.95
        assert hi == srt[n - j]
    # n = 5: no order statistic gives 95%
    assert all(math.isnan(v) for v in _stats.latency_stats([1.0, 2, 3, 4, 5])["median_ci95"])


def test_warnings():
    assert _stats.latency_warnings([1.0] * 150) == []
    w = _stats.latency_warnings([1.0, 1.0, 2.0])
    assert any(v.startswith("high variability: CV") for v in w) and any("p99 rests on 3 batches" in v for v in w)
    # a step in the middle of the run: drift
    w = _stats.latency_warnings([1.0 + 0.001 * (i % 7) for i in range(100)] + [1.5 + 0.001 * (i % 7) for i in range(100)])
    assert any(v.startswith("drift: median of the second half") for v in w), w
    assert _stats.latency_stats([])["n"] == 0 and _stats.latency_warnings([]) == []
    # the pair from one computation equals the two calls (the median CI is NaN with 5 batches)
    x = [1.0, 1.0, 2.0, 1.2, 0.9]
    both = _stats.latency_stats_and_warnings(x)
    assert both[1] == _stats.latency_warnings(x)
    assert {k: v for k, v in both[0].items() if k != "median_ci95"} == \
        {k: v for k, v in _stats.latency_stats(x).items() if k != "median_ci95"}


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
    # independent figures: NumPy's max error, argmax and cosine on the same arrays
    ref = [np.array([[1.0, 2.0, 3.0], [0.0, 5.0, -1.0]], np.float32)]
    w = []
    c = _check.check(ref, [ref[0].copy()], 1e-3, 1e-4, False, w)
    assert c["passed"] and c["max_abs_err"] == 0 and c["argmax_agreement"] == 1 and c["cosine"] == pytest.approx(1)
    assert w == []
    bad = ref[0].copy()
    bad[1, 2] = 6.0  # moves row 1's argmax
    c = _check.check(ref, [bad], 1e-3, 1e-4, False, w)
    assert not c["passed"] and c["max_abs_err"] == pytest.approx(7.0)
    r64, b64 = ref[0].astype(np.float64).ravel(), bad.astype(np.float64).ravel()
    assert c["cosine"] == pytest.approx(np.dot(r64, b64) / np.linalg.norm(r64) / np.linalg.norm(b64), rel=1e-12)
    assert c["argmax_agreement"] == np.mean(np.argmax(bad, 1) == np.argmax(ref[0], 1)) == 0.5
    assert len(w) == 1 and "output_0' element 5 is 6" in w[0] and "1 of 6 elements" in w[0]
    w = []
    assert not _check.check(ref, [bad[:1]], 1e-3, 1e-4, False, w)["passed"] and "has shape [1,3], the reference [2,3]" in w[0]
    assert not _check.check(ref, [], 1e-3, 1e-4, False, [])["passed"]
    # NaN where the reference has NaN agrees; elsewhere it does not; integer outputs exactly
    a = np.array([np.nan, 1.0])
    assert _check.check([a], [a.copy()], 1e-3, 1e-4, False, [])["passed"]
    assert not _check.check([a], [np.array([0.0, 1.0])], 1e-3, 1e-4, False, [])["passed"]
    i = np.array([[3, 1]], np.int64)
    assert _check.check([i], [i.copy()], 0, 0, False, [])["passed"]
    assert not _check.check([i], [i + 1], 0, 0, False, [])["passed"]


def test_lossy_judged_by_cosine_and_argmax():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((8, 10))
    near = ref + 1e-2 * rng.standard_normal(ref.shape)
    w = []
    assert not _check.check([ref], [near], 1e-3, 1e-4, False, w)["passed"] and "outputs differ" in w[0]
    w = []
    assert _check.check([ref], [near], 1e-3, 1e-4, True, w)["passed"] and "reduced precision" in w[0]
    far = rng.standard_normal(ref.shape)  # unrelated: cosine near 0
    assert not _check.check([ref], [far], 1e-3, 1e-4, True, [])["passed"]


def test_check_refuses_what_it_cannot_read():
    from alma._lib import AlmaError
    with pytest.raises(AlmaError, match="dtype complex128"):
        _check.check([np.zeros(2, complex)], [np.zeros(2, complex)], 1e-3, 1e-4, False, [])
