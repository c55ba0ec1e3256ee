"""Trains a small CNN on scikit-learn's bundled handwritten digits and exports it for alma.

usage: /usr/bin/python3 train.py OUTDIR [--epochs N] [--no-qat] [--threads N]

The data: sklearn.datasets.load_digits(), 1797 real handwritten digits shipped inside
scikit-learn (no download). They are 8x8 images with 17 grey levels (0..16); each one is scaled to
0..255 and upsampled bilinearly to 28x28 so the model has MNIST's input shape (1x1x28x28, float
in [0, 1]) and the files follow MNIST's layout. 20% of the samples (stratified, fixed seed) are
held out: the model never sees them in training, and they are what the C program and the CLI read.

It writes into OUTDIR
  mnist_cnn.onnx                  fp32 model, opset 13, input "image" [batch,1,28,28] float32 in
                                  [0, 1], output "logits" [batch,10]; "batch" is a dynamic axis
  mnist_cnn_qat.onnx              the same network fine-tuned with quantization-aware training
                                  (torch.ao.quantization) and exported as a QDQ model
                                  (QuantizeLinear/DequantizeLinear around fp32 ops); skipped with
                                  --no-qat, or with a note in train_log.txt if the export fails
  test-images-idx3-ubyte          held-out images, uint8 0..255, [N,28,28] (MNIST's IDX format)
  test-labels-idx1-ubyte          held-out labels, uint8 0..9, [N]
  test-images-f32.idx             the same images as float32 in [0, 1] (IDX type 0x0D), ready to
                                  feed the model without scaling
  test_images.npy                 float32 [N,1,28,28] in [0, 1]
  test_labels.npy                 int64 [N]
  train_log.txt                   seed, epochs, losses, held-out accuracies (fp32 and QAT)

Everything is seeded (torch, numpy, the split) and training runs on one thread (torch's and the
BLAS's), so a rerun on the same machine gives the same file, byte for byte. Another CPU, torch
build or BLAS gives slightly different weights: Debian's torch calls whichever libblas.so.3 the
alternatives system selects (reference BLAS or OpenBLAS), and the two round differently.
Runs with Debian's /usr/bin/python3 (python3-torch 1.13, python3-sklearn, python3-onnx).
"""
import argparse
import os
import struct
import sys
import time
import warnings

# One BLAS thread, set before numpy/torch load the library: repeatable sums, no oversubscription.
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

SEED = 0
SIZE = 28


def load_split():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x8 = digits.images.astype(np.float32) * (255.0 / 16.0)  # 0..16 -> 0..255
    y = digits.target.astype(np.int64)
    idx = np.arange(len(y))
    tr, te = train_test_split(idx, test_size=0.2, random_state=SEED, stratify=y)
    return x8, y, tr, te


def upsample_u8(torch, x8):
    """[N,8,8] float 0..255 -> [N,28,28] uint8 (bilinear, then rounded)."""
    t = torch.from_numpy(x8).unsqueeze(1)
    up = torch.nn.functional.interpolate(t, size=(SIZE, SIZE), mode="bilinear", align_corners=False)
    return np.clip(np.rint(up.squeeze(1).numpy()), 0, 255).astype(np.uint8)


def build_model(torch, qat=False):
    nn = torch.nn

    class DigitsCNN(nn.Module):
        """28x28 -> conv3x3(8) -> pool -> conv3x3(16) -> pool -> fc(32) -> fc(10). ~27k weights."""

        def __init__(self):
            super().__init__()
            self.quant = torch.ao.quantization.QuantStub() if qat else nn.Identity()
            self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
            self.relu1 = nn.ReLU()
            self.pool1 = nn.MaxPool2d(2)
            self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
            self.relu2 = nn.ReLU()
            self.pool2 = nn.MaxPool2d(2)
            self.fc1 = nn.Linear(16 * 7 * 7, 32)
            self.relu3 = nn.ReLU()
            self.fc2 = nn.Linear(32, 10)
            self.dequant = torch.ao.quantization.DeQuantStub() if qat else nn.Identity()

        def forward(self, x):
            x = self.quant(x)
            x = self.pool1(self.relu1(self.conv1(x)))
            x = self.pool2(self.relu2(self.conv2(x)))
            x = torch.flatten(x, 1)
            x = self.relu3(self.fc1(x))
            return self.dequant(self.fc2(x))

    return DigitsCNN()


def train(torch, model, x, y, epochs, lr, gen, log):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    n = x.shape[0]
    for ep in range(epochs):
        model.train()
        perm = torch.randperm(n, generator=gen)
        total = 0.0
        for s in range(0, n, 32):
            b = perm[s : s + 32]
            xb = x[b]
            # Light augmentation: shift by up to 2 pixels (the digits are centred in 8x8 cells).
            dx, dy = torch.randint(-2, 3, (2,), generator=gen).tolist()
            xb = torch.roll(xb, shifts=(dy, dx), dims=(2, 3))
            loss = torch.nn.functional.cross_entropy(model(xb), y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(b)
        sched.step()
        log(f"  epoch {ep + 1}/{epochs}: loss {total / n:.4f}")


def accuracy(torch, model, x, y):
    model.eval()
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def write_idx(path, arr):
    codes = {np.dtype(np.uint8): 0x08, np.dtype(np.int8): 0x09, np.dtype(">i2"): 0x0B,
             np.dtype(">i4"): 0x0C, np.dtype(">f4"): 0x0D, np.dtype(">f8"): 0x0E}
    be = arr.astype(arr.dtype.newbyteorder(">")) if arr.dtype.itemsize > 1 else arr
    code = codes[np.dtype(be.dtype)]
    with open(path, "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, code, arr.ndim))
        f.write(struct.pack(">" + "I" * arr.ndim, *arr.shape))
        f.write(np.ascontiguousarray(be).tobytes())


def export(torch, model, path, example):
    model.eval()
    torch.onnx.export(model, example, path, opset_version=13, input_names=["image"],
                      output_names=["logits"], dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
                      do_constant_folding=True)


def onnx_accuracy(path, x, y):
    """Accuracy of the exported file, run by the ONNX reference evaluator when this onnx has one
    (onnx >= 1.13), else None: the C program checks the file with alma anyway."""
    try:
        from onnx.reference import ReferenceEvaluator  # noqa: F401
    except ImportError:
        return None
    sess = ReferenceEvaluator(path)
    out = sess.run(None, {"image": x})[0]
    return float((out.argmax(1) == y).mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--qat-epochs", type=int, default=3)
    ap.add_argument("--no-qat", action="store_true")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (fixed for repeatability)")
    args = ap.parse_args()

    import torch

    torch.manual_seed(SEED)
    np.random.seed(SEED)
    torch.set_num_threads(args.threads)
    os.makedirs(args.outdir, exist_ok=True)
    lines = []

    def log(msg):
        print(msg, flush=True)
        lines.append(msg)

    t0 = time.time()
    x8, y, tr, te = load_split()
    u8 = upsample_u8(torch, x8)                       # [N,28,28] uint8
    xf = u8.astype(np.float32)[:, None] / 255.0        # [N,1,28,28] in [0, 1]
    xtr, ytr = torch.from_numpy(xf[tr]), torch.from_numpy(y[tr])
    xte, yte = torch.from_numpy(xf[te]), torch.from_numpy(y[te])
    log(f"digits: {len(tr)} train, {len(te)} held out; seed {SEED}; torch {torch.__version__}, {args.threads} thread(s)")

    # Held-out set, the files alma reads.
    write_idx(os.path.join(args.outdir, "test-images-idx3-ubyte"), u8[te])
    write_idx(os.path.join(args.outdir, "test-labels-idx1-ubyte"), y[te].astype(np.uint8))
    write_idx(os.path.join(args.outdir, "test-images-f32.idx"), xf[te][:, 0])
    np.save(os.path.join(args.outdir, "test_images.npy"), xf[te])
    np.save(os.path.join(args.outdir, "test_labels.npy"), y[te])

    gen = torch.Generator().manual_seed(SEED)
    model = build_model(torch)
    log(f"fp32 training, {args.epochs} epochs")
    train(torch, model, xtr, ytr, args.epochs, 3e-3, gen, log)
    acc = accuracy(torch, model, xte, yte)
    log(f"fp32 held-out accuracy (PyTorch): {acc * 100:.2f}%")
    fp32_path = os.path.join(args.outdir, "mnist_cnn.onnx")
    export(torch, model, fp32_path, xte[:1])
    oacc = onnx_accuracy(fp32_path, xf[te], y[te])
    if oacc is not None:
        log(f"fp32 held-out accuracy (ONNX file): {oacc * 100:.2f}%")
    if acc < 0.95:
        log("error: fp32 accuracy below 95%")
        return 1

    if not args.no_qat:
        qat_path = os.path.join(args.outdir, "mnist_cnn_qat.onnx")
        if os.path.exists(qat_path):
            os.remove(qat_path)
        try:
            qat_model(torch, model, xtr, ytr, xte, yte, xf[te], y[te], qat_path, args.qat_epochs, gen, log)
        except Exception as e:  # documented fallback: the fp32 example stands on its own
            log(f"QAT skipped: {type(e).__name__}: {e}")
            if os.path.exists(qat_path):
                os.remove(qat_path)

    log(f"done in {time.time() - t0:.1f} s")
    with open(os.path.join(args.outdir, "train_log.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


def qat_model(torch, fp32, xtr, ytr, xte, yte, xte_np, yte_np, path, epochs, gen, log):
    """Quantization-aware fine-tuning from the fp32 weights, exported with its fake-quantize nodes,
    which torch.onnx turns into QuantizeLinear/DequantizeLinear pairs (a QDQ model).

    Activations: per-tensor affine uint8 over the full 0..255 range; weights: per-channel symmetric
    int8 (-128..127, opset 13's per-axis QDQ). The default QAT qconfigs use
    FusedMovingAvgObsFakeQuantize, whose op (aten::fused_moving_avg_obs_fake_quant) torch 1.13
    cannot export, hence the explicit qconfig with plain FakeQuantize modules. The converted int8
    model (torch.ao.quantization.convert) is not exported either: torch 1.13 has no ONNX
    exporter for quantized::linear_relu."""
    import copy

    aq = torch.ao.quantization
    model = build_model(torch, qat=True)
    model.load_state_dict(fp32.state_dict(), strict=False)
    model.train()
    act = aq.FakeQuantize.with_args(observer=aq.MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                                    dtype=torch.quint8, qscheme=torch.per_tensor_affine)
    wt = aq.FakeQuantize.with_args(observer=aq.MovingAveragePerChannelMinMaxObserver, quant_min=-128,
                                   quant_max=127, dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
    model.qconfig = aq.QConfig(activation=act, weight=wt)
    aq.fuse_modules_qat(model, [["conv1", "relu1"], ["conv2", "relu2"], ["fc1", "relu3"]], inplace=True)
    aq.prepare_qat(model, inplace=True)
    log(f"QAT fine-tuning, {epochs} epochs")
    train(torch, model, xtr, ytr, epochs, 5e-4, gen, log)
    model.apply(aq.disable_observer)  # freeze the ranges before export
    acc = accuracy(torch, model, xte, yte)
    log(f"QAT (fake-quantized) held-out accuracy (PyTorch): {acc * 100:.2f}%")
    m = copy.deepcopy(model).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export(torch, m, path, xte[:1])
    import onnx

    ops = {}
    for n in onnx.load(path).graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    log("QAT ONNX ops: " + ", ".join(f"{k} x{v}" for k, v in sorted(ops.items())))
    oacc = onnx_accuracy(path, xte_np, yte_np)
    if oacc is not None:
        log(f"QAT held-out accuracy (ONNX file): {oacc * 100:.2f}%")


if __name__ == "__main__":
    sys.exit(main())
