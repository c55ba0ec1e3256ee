"""benchmark_model on an nn.Module: EXPORT+ conversions (alma on the exported graph) and PyTorch's own,
each in its own process, checked against alma's EAGER on the exported model."""
import math

import numpy as np
import pytest
import torch

import alma
from conftest import FAST
from models_for_tests import SmallCNN, TokensToTwoOutputs, TwoInputs

JIT = ["TORCH_EAGER", "TORCH_JIT_TRACE", "TORCH_JIT_SCRIPT", "TORCH_JIT_FROZEN", "TORCH_JIT_OPTIMIZED"]


def test_pytorch_and_alma_conversions_in_one_call(tmp_path):
    torch.manual_seed(0)
    model = SmallCNN().eval()
    res = alma.benchmark_model(model, dict(FAST, batch_size=4), JIT + ["EXPORT+EAGER", "EXPORT+12"],
                               data=torch.randn(3, 8, 8), keep_dir=str(tmp_path))
    assert [r.conversion for r in res] == JIT + ["EXPORT+EAGER", "EXPORT+FOLD+FUSE+DNNL"]
    assert [r.id for r in res] == [100, 101, 102, 103, 104, 0, 12]
    for r in res:
        assert r.ok, (r.conversion, r.error, r.traceback)
        assert r.check["performed"] and r.check_passed, (r.conversion, r.check, r.warnings)
        assert r.latency_ms["n"] >= 4 and r.samples == 4 * r.latency_ms["n"]
        assert r.throughput == pytest.approx(r.samples / r.inference_s)
        assert len(r.raw_ms) == r.latency_ms["n"]
        c = r.contention  # measured in the row's own process, alma's or PyTorch's
        assert c["cpu_s"] > 0 and c["wall_s"] > 0 and c["threads"] >= 1 and isinstance(c["disturbed"], bool)
    # PyTorch eager against an outside reference: ONNX Runtime on the exported model, first batch
    ort = pytest.importorskip("onnxruntime")
    x = np.load(tmp_path / "input_0.npy")[:4]
    sess = ort.InferenceSession(str(tmp_path / "SmallCNN.onnx"), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"input_0": x})[0]
    with torch.no_grad():
        got = model(torch.from_numpy(x)).numpy()
    assert np.allclose(got, want, rtol=1e-4, atol=1e-5)
    assert np.allclose(np.load(tmp_path / "ref_0.npy"), want, rtol=1e-4, atol=1e-5)


def test_loader_of_dicts_two_inputs():
    ds = [{"x": torch.randn(2, 6), "y": torch.randn(2, 5)} for _ in range(3)]
    res = alma.benchmark_model(TwoInputs().eval(), FAST, ["TORCH_EAGER", "EXPORT+FOLD+EAGER"], data_loader=ds)
    assert all(r.ok and r.check_passed for r in res), [(r.error, r.warnings) for r in res]
    assert res.config["batch_size"] == 2 and res.data.startswith("loader: 6 samples")


def test_dataloader_with_labels_in_process():
    x, y = torch.randn(12, 3, 8, 8), torch.randint(0, 10, (12,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4)
    res = alma.benchmark_model(SmallCNN().eval(), dict(FAST, multiprocessing=False), ["TORCH_EAGER", "TORCH_JIT_TRACE"],
                               data_loader=loader)
    assert [r.ok and r.check_passed for r in res] == [True, True]
    assert res[0].batch_size == 4


def test_int8_rows_are_judged_as_lossy():
    res = alma.benchmark_model(SmallCNN().eval(), dict(FAST, fail_on_error=False),
                               ["TORCH_INT8_DYNAMIC", "TORCH_INT8_STATIC"], data=torch.randn(3, 8, 8))
    for r in res:
        assert r.ok, r.traceback
        assert r.check["performed"] and math.isfinite(r.check["cosine"])


@pytest.mark.skipif(hasattr(torch, "compile"), reason="this torch has torch.compile")
def test_compile_unavailable_with_reason():
    res = alma.benchmark_model(SmallCNN().eval(), dict(FAST, fail_on_error=False),
                               ["TORCH_COMPILE_INDUCTOR_DEFAULT", "TORCH_COMPILE_INDUCTOR_MAX_AUTOTUNE", "TORCH_EXPORT",
                                "TORCH_EAGER"], data=torch.randn(3, 8, 8))
    assert [r.status for r in res] == ["unavailable", "unavailable", "unavailable", "ok"]
    assert "torch.compile" in res[0].error and torch.__version__ in res[0].error
    assert "torch.export" in res[2].error and res[2].error_status == "ERR_UNAVAILABLE"


@pytest.mark.skipif(not hasattr(torch, "compile"), reason=f"torch {torch.__version__} has no torch.compile")
def test_compile_runs():
    res = alma.benchmark_model(SmallCNN().eval(), FAST, ["TORCH_COMPILE_INDUCTOR_DEFAULT"], data=torch.randn(3, 8, 8))
    assert res[0].ok and res[0].check_passed


def test_alma_names_are_not_taken_for_pytorch_ones():
    for bad in ("EAGER", 0, "FOLD+DNNL", "12"):
        with pytest.raises(ValueError, match="EXPORT\\+"):
            alma.benchmark_model(SmallCNN(), FAST, [bad], data=(3, 8, 8))
    with pytest.raises(ValueError, match="TORCH_EAGER"):
        alma.benchmark_model(SmallCNN(), FAST, ["EAGER"], data=(3, 8, 8))
    with pytest.raises(ValueError, match="needs data"):
        alma.benchmark_model(SmallCNN(), FAST, ["TORCH_EAGER"])


def test_top1_from_the_loaders_labels():
    # labels that the model's argmax gives on half the samples: top-1 0.5 for every fp32 conversion
    torch.manual_seed(0)
    model = SmallCNN().eval()
    x = torch.randn(20, 3, 8, 8)
    with torch.no_grad():
        pred = model(x).argmax(1)
    y = torch.where(torch.arange(20) % 2 == 0, pred, (pred + 1) % 10)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4)
    res = alma.benchmark_model(model, dict(FAST, labels=True),
                               ["TORCH_EAGER", "EXPORT+EAGER", "EXPORT+FOLD+DNNL", "TORCH_JIT_TRACE"],
                               data_loader=loader)
    for r in res:
        assert r.ok, r.traceback
        assert r.accuracy["samples"] == 20 and r.accuracy["correct"] == 10, (r.conversion, r.accuracy)
        assert r.accuracy["baseline"] == "TORCH_EAGER" and r.accuracy["top1_drop"] == 0
    with pytest.raises(ValueError, match="labels"):
        alma.benchmark_model(model, dict(FAST, labels=True), ["TORCH_EAGER"], data=(3, 8, 8))


def test_integer_inputs_and_several_outputs():
    # data= an int64 tensor: random ids in [0, 10); two outputs, checked in export order
    res = alma.benchmark_model(TokensToTwoOutputs().eval(), FAST, ["TORCH_EAGER", "TORCH_JIT_TRACE", "EXPORT+EAGER"],
                               data=torch.zeros(6, dtype=torch.long))
    assert all(r.ok and r.check_passed for r in res), [(r.conversion, r.error, r.warnings) for r in res]
    assert "6 int64" in res.data


def test_batch_size_sweep_is_alma_only():
    with pytest.raises(ValueError, match="batch_sizes"):
        alma.benchmark_model(SmallCNN(), dict(FAST, batch_sizes="1,2"), ["TORCH_EAGER", "EXPORT+EAGER"], data=(3, 8, 8))
    res = alma.benchmark_model(SmallCNN().eval(), dict(FAST, batch_sizes="1,2"), ["EXPORT+EAGER", "EXPORT+FOLD+EAGER"],
                               data=(3, 8, 8))
    assert sorted((r.conversion, r.batch_size) for r in res) == [
        ("EXPORT+EAGER", 1), ("EXPORT+EAGER", 2), ("EXPORT+FOLD+EAGER", 1), ("EXPORT+FOLD+EAGER", 2)]
    assert all(r.ok and r.check_passed for r in res)
