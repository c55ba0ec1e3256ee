"""Models and data for the quantization tests.

usage: make_quant_models.py OUTDIR [NAME...]      (NAME: mnist, resnet18, mobilenet_v2,
                                                  mobilenet_v3_small; default all)

For each NAME it writes OUTDIR/NAME/
  model.onnx    fp32 model, opset 13, input [batch, ...] with a dynamic batch axis
  calib.npy     calibration samples, float32 [N, ...]
  test.npy      evaluation samples (disjoint from calib.npy), float32 [M, ...]
  labels.npy    (mnist only) int64 [M], the true digits of test.npy
mnist: the trained digit classifier checked in as examples/models/mnist_cnn.onnx; calibration uses
256 digits of its training split, evaluation its 360 held-out digits (the split and preprocessing
of examples/mnist/train.py). resnet18/mobilenet_v2/mobilenet_v3_small: torchvision architectures
with random weights (seeded) whose BatchNorm statistics are calibrated on random batches in train
mode, as bench/peer_bench.py does, so activations are not degenerate; inputs N(0, 1).
Existing outputs are kept (delete the folder to rebuild). Needs /usr/bin/python3 with torch,
torchvision, sklearn and onnx.
"""
import importlib.util
import os
import shutil
import sys

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def mnist(d):
    import torch

    spec = importlib.util.spec_from_file_location("mnist_train", os.path.join(ROOT, "examples", "mnist", "train.py"))
    tr_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tr_mod)
    x8, y, tr, te = tr_mod.load_split()
    u8 = tr_mod.upsample_u8(torch, x8)
    xf = u8.astype(np.float32)[:, None] / 255.0
    rng = np.random.default_rng(0)
    cal = rng.permutation(tr)[:256]
    np.save(os.path.join(d, "calib.npy"), xf[cal])
    np.save(os.path.join(d, "test.npy"), xf[te])
    np.save(os.path.join(d, "labels.npy"), y[te].astype(np.int64))
    shutil.copyfile(os.path.join(ROOT, "examples", "models", "mnist_cnn.onnx"), os.path.join(d, "model.onnx"))


def torchvision_model(name, d):
    import torch
    import torchvision

    torch.manual_seed(0)
    torch.set_num_threads(1)
    m = getattr(torchvision.models, name)(weights=None)
    # random weights give degenerate BatchNorm statistics: a few random batches in train mode
    m.train()
    with torch.no_grad():
        for _ in range(4):
            m(torch.randn(8, 3, 224, 224))
    m.eval()
    x = torch.randn(1, 3, 224, 224)
    torch.onnx.export(m, x, os.path.join(d, "model.onnx"), input_names=["input"], output_names=["output"],
                      opset_version=13, dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    g = torch.Generator().manual_seed(1)
    np.save(os.path.join(d, "calib.npy"), torch.randn(64, 3, 224, 224, generator=g).numpy())
    np.save(os.path.join(d, "test.npy"), torch.randn(16, 3, 224, 224, generator=g).numpy())


# mobilenet_v3_small: depthwise 5x5 convolutions after HardSwish (sources with non-zero zero
# points), squeeze-excitation Muls, HardSigmoid
BUILDERS = {"mnist": mnist, "resnet18": lambda d: torchvision_model("resnet18", d),
            "mobilenet_v2": lambda d: torchvision_model("mobilenet_v2", d),
            "mobilenet_v3_small": lambda d: torchvision_model("mobilenet_v3_small", d)}


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    out = sys.argv[1]
    names = sys.argv[2:] or list(BUILDERS)
    for n in names:
        d = os.path.join(out, n)
        if os.path.exists(os.path.join(d, "test.npy")):
            print(f"{n}: cached")
            continue
        os.makedirs(d, exist_ok=True)
        BUILDERS[n](d)
        print(f"{n}: written to {d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
