"""python/examples/mnist_digits.py runs: trains, benchmarks through a DataLoader with top-1, and shows
a failing conversion both ways."""
import os
import subprocess
import sys

import pytest

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "python", "examples", "mnist_digits.py")


@pytest.mark.parametrize("mode", ["fail-fast", "keep-going"])
def test_mnist_digits_example(tmp_path, mode):
    pytest.importorskip("sklearn")
    args = [sys.executable, EXAMPLE, "--conversions", "100,EXPORT+FOLD+EAGER", "--batch-size", "60",
            "--n-samples", "60", "--json", str(tmp_path / "r.json")]
    if mode == "keep-going":
        args.append("--keep-going")
    p = subprocess.run(args, capture_output=True, text=True, timeout=500)
    assert p.returncode == 0, p.stdout + p.stderr
    import json
    rows = json.load(open(tmp_path / "r.json"))["results"]
    assert [r["conversion"] for r in rows] == ["TORCH_EAGER", "EXPORT+FOLD+EAGER"]
    for r in rows:
        assert r["status"] == "ok" and r["check"]["passed"]
        assert r["accuracy"]["samples"] == 360 and r["accuracy"]["top1"] > 0.9
    if mode == "fail-fast":
        assert "fail-fast: TORCH_JIT_SCRIPT failed in step convert; 2 rows ran" in p.stdout
        assert "Traceback (most recent call last)" in p.stdout
    else:
        assert "TORCH_JIT_SCRIPT" in p.stdout and "error" in p.stdout and "TORCH_JIT_TRACE" in p.stdout
