import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(scope="session")
def alma_cli():
    p = os.environ.get("ALMA_CLI") or shutil.which("alma")
    if not p:
        pytest.skip("no alma CLI (set ALMA_CLI)")
    return p


@pytest.fixture(scope="session")
def small_onnx(tmp_path_factory):
    import torch

    from models_for_tests import SmallCNN
    torch.manual_seed(0)
    p = str(tmp_path_factory.mktemp("onnx") / "small.onnx")
    torch.onnx.export(SmallCNN().eval(), torch.randn(1, 3, 8, 8), p, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    return p


# short timed phases: these tests check what is measured and reported, not speed
FAST = {"n_samples": 16, "min_time_s": 0.05, "warmup": 2, "warmup_s": 0.0, "cache": False, "verbose": 0}
