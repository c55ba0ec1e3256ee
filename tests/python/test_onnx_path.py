"""benchmark_model on an ONNX file: alma's conversions through the C library, results like the CLI's."""
import json
import subprocess

import pytest

import alma
from conftest import FAST


def test_rows_and_fields_match_the_cli(tmp_path, small_onnx, alma_cli):
    cfg = dict(FAST, batch_size=2)
    res = alma.benchmark_model(small_onnx, cfg, ["EAGER", 1, "FOLD+FUSE+EAGER"])
    assert [r.conversion for r in res] == ["EAGER", "FOLD+EAGER", "FOLD+FUSE+EAGER"]
    assert [r.id for r in res] == [0, 1, 3]
    for r in res:
        assert r.ok and r.check_passed and r.batch_size == 2 and r.samples >= 16
        assert r.latency_ms["n"] * 2 == r.samples and r.throughput > 0
    out = tmp_path / "cli.json"
    subprocess.run([alma_cli, "bench", small_onnx, "-c", "EAGER", "-b", "2", "-n", "16", "--min-time", "0.05",
                    "--no-cache", "--json", str(out)], check=True, capture_output=True)
    cli = json.load(open(out))
    mine = res.to_dict(include_raw=False)
    assert set(cli) <= set(mine)
    assert set(cli["results"][0]) == set(mine["results"][0])
    assert mine["config"]["batch_size"] == 2 and mine["config"]["n_samples"] == 16


def test_print_save_json_csv(tmp_path, small_onnx, capsys):
    res = alma.benchmark_model(small_onnx, FAST, ["EAGER"])
    alma.display_all_results(res)
    out = capsys.readouterr().out
    assert "[  0] EAGER: ok" in out and "speed-up" in out
    import io
    buf = io.StringIO()
    res.print(summary_only=True, file=buf)
    assert "speed-up" in buf.getvalue() and "[  0]" not in buf.getvalue()
    res.save_json(tmp_path / "r.json")
    back = json.load(open(tmp_path / "r.json"))
    assert back["results"][0]["conversion"] == "EAGER" and "raw_ms" not in back["results"][0]
    res.save_csv(tmp_path / "r.csv")
    lines = open(tmp_path / "r.csv").read().splitlines()
    assert lines[0].startswith("id,") or "conversion" in lines[0]
    assert len(lines) == 2


def test_numpy_data_and_random_shape(small_onnx):
    import numpy as np
    x = np.random.default_rng(0).standard_normal((10, 3, 8, 8)).astype(np.float32)
    res = alma.benchmark_model(small_onnx, dict(FAST, batch_size=4), ["EAGER", "FOLD+EAGER"],
                               data_loader=[x[i:i + 4] for i in range(0, 8, 4)])
    assert all(r.ok and r.check_passed for r in res) and res.data.startswith("loader: 8 samples")
    res = alma.benchmark_model(small_onnx, FAST, ["EAGER"], data=(3, 8, 8))
    assert res[0].ok and res.data.startswith("random: 3x8x8 float32")


def test_bad_conversions_are_refused_by_name(small_onnx):
    with pytest.raises(alma.AlmaError, match="NOPE"):
        alma.benchmark_model(small_onnx, FAST, ["EAGER", "NOPE"])
    with pytest.raises(ValueError, match="nn.Module"):
        alma.benchmark_model(small_onnx, FAST, ["TORCH_EAGER"])
    with pytest.raises(ValueError, match="ONNX file already"):
        alma.benchmark_model(small_onnx, FAST, ["EXPORT+EAGER"])
    with pytest.raises(alma.AlmaError, match="batch_size"):
        alma.benchmark_model(small_onnx, {"batch_size": 0}, ["EAGER"])
    with pytest.raises(FileNotFoundError):
        alma.benchmark_model("/nonexistent.onnx", FAST, ["EAGER"])


def test_argparser():
    p = alma.benchmark_argparser()
    a = p.parse_args(["--conversions", "TORCH_EAGER,EXPORT+FOLD+DNNL,12", "--batch-size", "4", "--keep-going"])
    assert a.conversions == ["TORCH_EAGER", "EXPORT+FOLD+DNNL", 12]
    cfg = alma.cli.config_from_args(a)
    assert cfg["batch_size"] == 4 and cfg["fail_on_error"] is False and cfg["multiprocessing"] is True


def test_ort_runs_in_the_sweeps_python(small_onnx):
    # alma's ORT embeds the Python of the process: the sweep's interpreter must import onnxruntime
    pytest.importorskip("onnxruntime")
    res = alma.benchmark_model(small_onnx, FAST, ["EAGER", "ORT"])
    assert [r.ok and r.check_passed for r in res] == [True, True], [r.error for r in res]


def test_batch_size_sweep(small_onnx):
    res = alma.benchmark_model(small_onnx, dict(FAST, batch_sizes="1,4"), ["EAGER", "FOLD+EAGER"])
    assert sorted((r.conversion, r.batch_size) for r in res) == [("EAGER", 1), ("EAGER", 4), ("FOLD+EAGER", 1),
                                                                  ("FOLD+EAGER", 4)]
    assert all(r.ok and r.check_passed for r in res)
