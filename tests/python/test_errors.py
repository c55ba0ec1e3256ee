"""Failures: a conversion that raises is an error row with its Python traceback (fail_on_error off)
or raises BenchmarkError carrying it (on); a conversion that crashes its process is a row, and the
caller lives on."""
import os

import pytest
import torch

import alma
from conftest import FAST
from models_for_tests import Hangs, NotExportable, NotScriptable, Segfaults


def test_script_failure_is_a_row_with_the_traceback():
    res = alma.benchmark_model(NotScriptable().eval(), dict(FAST, fail_on_error=False),
                               ["TORCH_JIT_SCRIPT", "TORCH_JIT_TRACE", "EXPORT+EAGER"], data=(4,))
    script, trace, exported = res
    assert script.status == "error" and script.failed_step == "convert"
    assert "Traceback (most recent call last)" in script.traceback and "torch/jit" in script.traceback
    assert "_python_only" in script.traceback or "_python_only" in script.error
    assert trace.ok and trace.check_passed and exported.ok


def test_fail_on_error_raises_with_the_traceback():
    with pytest.raises(alma.BenchmarkError) as e:
        alma.benchmark_model(NotScriptable().eval(), FAST, ["TORCH_EAGER", "TORCH_JIT_SCRIPT", "TORCH_JIT_TRACE"],
                             data=(4,))
    assert "Traceback" in str(e.value) and e.value.result.conversion == "TORCH_JIT_SCRIPT"
    # the sweep stopped there: the row after it did not run
    assert [r.conversion for r in e.value.results] == ["TORCH_EAGER", "TORCH_JIT_SCRIPT"]


def test_segfault_does_not_kill_the_caller():
    res = alma.benchmark_model(Segfaults().eval(), dict(FAST, fail_on_error=False, check_outputs=False),
                               ["TORCH_EAGER", "TORCH_JIT_SCRIPT"], data=(4,))
    r = res[0]
    assert r.status == "error" and r.error_status == "ERR_CRASH" and "SIGSEGV" in r.error
    assert "forward" in r.traceback  # faulthandler's Python stack of the crashed process
    assert os.getpid() > 0 and res[1].conversion == "TORCH_JIT_SCRIPT"


def test_a_local_class_runs_in_process():
    class Local(torch.nn.Module):  # defined here: the spawned processes cannot import it
        def forward(self, x):
            return x + 1
    with pytest.raises(ValueError, match="multiprocessing False"):
        alma.benchmark_model(Local(), FAST, ["TORCH_EAGER"], data=(4,))
    res = alma.benchmark_model(Local(), dict(FAST, multiprocessing=False, fail_on_error=False),
                               ["TORCH_EAGER", "EXPORT+EAGER"], data=(4,))
    assert [r.ok for r in res] == [True, True]


def test_export_failure_fails_every_export_row():
    res = alma.benchmark_model(NotExportable().eval(), dict(FAST, fail_on_error=False),
                               ["TORCH_EAGER", "EXPORT+EAGER", "EXPORT+FOLD+EAGER"], data=(8,))
    eager, e1, e2 = res
    if e1.ok:
        pytest.skip(f"torch {torch.__version__} exports rfft to ONNX")
    assert eager.ok and not eager.check["performed"]
    assert any("torch.onnx.export failed" in w for w in eager.warnings)
    for r in (e1, e2):
        assert r.status == "error" and r.failed_step == "export" and "Traceback" in r.traceback


def test_a_hung_conversion_is_killed_at_timeout_s():
    res = alma.benchmark_model(Hangs().eval(), dict(FAST, fail_on_error=False, check_outputs=False, timeout_s=40),
                               ["TORCH_EAGER"], data=(4,))
    assert res[0].status == "error" and res[0].error_status == "ERR_TIMEOUT" and "40 s" in res[0].error
