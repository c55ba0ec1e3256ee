"""Exports the model-test zoo from PyTorch and writes PyTorch's reference outputs.

usage: export_models.py OUTDIR [--set fast|slow|all] [--list] [NAME...]

For every model NAME it writes
  OUTDIR/NAME/model.onnx              exported with random weights (fixed seed, eval mode) and a
                                      dynamic batch axis named "batch"
  OUTDIR/NAME/b1/input_<i>.npy        inputs at batch 1, in the order of the graph's inputs
  OUTDIR/NAME/b1/output_<i>.npy       PyTorch's outputs, in the order of the graph's outputs
  OUTDIR/NAME/b1/ort_output_<i>.npy   ONNX Runtime's outputs, only when onnxruntime is importable
  OUTDIR/NAME/b8/...                  the same at batch 8
  OUTDIR/NAME/meta.txt                key=value lines read by model_test (tolerance)
A model whose files are already there from the same version of this script is skipped, so the
CTest fixture costs nothing on a second run.

--list prints the names of the selected set, one per line (CMake uses it to make one test each).
Runs with Debian's /usr/bin/python3 (python3-torch 1.13, python3-torchvision 0.14, python3-onnx).
"""
import argparse
import hashlib
import inspect
import io
import os
import sys
import warnings

# name -> (set, builder, opset). Builders return (module, [example inputs at batch B] as a function of B).
MODELS = {}


def model(name, opset, slow=False):
    def reg(fn):
        MODELS[name] = ("slow" if slow else "fast", fn, opset)
        return fn

    return reg


def _torch():
    import torch

    return torch


# ---- models ----------------------------------------------------------------------------------


def mnist_cnn(view_flatten):
    torch = _torch()
    nn = torch.nn

    class MnistCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(1, 8, 5, padding=2)
            self.c2 = nn.Conv2d(8, 16, 5)
            self.bn = nn.BatchNorm2d(16)
            self.fc1 = nn.Linear(16 * 5 * 5, 64)
            self.fc2 = nn.Linear(64, 10)

        def forward(self, x):
            x = torch.max_pool2d(torch.relu(self.c1(x)), 2)
            x = torch.nn.functional.avg_pool2d(torch.relu(self.bn(self.c2(x))), 2)
            # view(size(0), -1) exports Shape/Gather/Unsqueeze/Concat/Reshape; flatten exports Flatten
            x = x.view(x.size(0), -1) if view_flatten else torch.flatten(x, 1)
            return torch.log_softmax(self.fc2(torch.relu(self.fc1(x))), dim=1)

    m = MnistCNN()
    with torch.no_grad():  # non-trivial running statistics so BatchNormalization is really tested
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 2.0)
    return m, lambda b: [torch.randn(b, 1, 28, 28)]


for _op in (13, 11, 10):
    model(f"mnist_cnn_op{_op}", _op)(lambda: mnist_cnn(False))
model("mnist_cnn_view_op9", 9)(lambda: mnist_cnn(True))
model("mnist_cnn_view_op13", 13)(lambda: mnist_cnn(True))


def mlp():
    torch = _torch()
    nn = torch.nn
    m = nn.Sequential(
        nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.2),
        nn.Linear(256, 128), nn.Tanh(),
        nn.Linear(128, 64), nn.Sigmoid(),
        nn.Linear(64, 10), nn.Softmax(dim=-1))
    return m, lambda b: [torch.randn(b, 784)]


model("mlp_op14", 14)(mlp)
model("mlp_op9", 9)(mlp)


def mlp_gelu():
    torch = _torch()
    nn = torch.nn
    m = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 8), nn.LeakyReLU(0.1))
    return m, lambda b: [torch.randn(b, 32)]


model("mlp_gelu_op13", 13)(mlp_gelu)


def conv1d_net():
    """A keyword-spotting style 1-D CNN (audio frames x channels): dense, strided and depthwise
    Conv1d with BatchNorm1d and ReLU, a max pool, a global average and a linear head."""
    torch = _torch()
    nn = torch.nn

    class Conv1dNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv1d(12, 32, 5, padding=2)
            self.bn1 = nn.BatchNorm1d(32)
            self.c2 = nn.Conv1d(32, 32, 3, stride=2, padding=1, groups=32)  # depthwise
            self.c3 = nn.Conv1d(32, 48, 1)
            self.c4 = nn.Conv1d(48, 48, 3, dilation=2, padding=2)
            self.fc = nn.Linear(48, 6)

        def forward(self, x):
            x = torch.relu(self.bn1(self.c1(x)))
            x = torch.relu(self.c3(torch.relu(self.c2(x))))
            x = torch.max_pool1d(x, 2)
            x = torch.relu(self.c4(x)) + x
            return self.fc(x.mean(dim=2))

    m = Conv1dNet()
    with torch.no_grad():
        m.bn1.running_mean.uniform_(-0.5, 0.5)
        m.bn1.running_var.uniform_(0.5, 2.0)
    return m, lambda b: [torch.randn(b, 12, 40)]


model("conv1d_op13", 13)(conv1d_net)


def transformer(with_embedding):
    torch = _torch()
    nn = torch.nn
    d_model, seq, vocab = 64, 16, 100

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d_model)
            self.pos = nn.Parameter(torch.randn(1, seq, d_model) * 0.1)
            layer = nn.TransformerEncoderLayer(d_model=d_model, nhead=4, dim_feedforward=128, dropout=0.1,
                                               batch_first=True)
            self.enc = nn.TransformerEncoder(layer, num_layers=2)
            self.head = nn.Linear(d_model, 5)

        def forward(self, x):
            if with_embedding:
                x = self.emb(x) + self.pos
            return self.head(self.enc(x).mean(dim=1))

    if with_embedding:
        return Encoder(), lambda b: [torch.randint(0, vocab, (b, seq), dtype=torch.int64)]
    return Encoder(), lambda b: [torch.randn(b, seq, d_model)]


model("transformer_op14", 14)(lambda: transformer(False))
model("transformer_embed_op14", 14)(lambda: transformer(True))
model("transformer_op11", 11)(lambda: transformer(False))


def rnn(kind):
    torch = _torch()
    nn = torch.nn

    class Seq(nn.Module):
        def __init__(self):
            super().__init__()
            cls = nn.LSTM if kind == "lstm" else nn.GRU
            self.rnn = cls(input_size=12, hidden_size=32, num_layers=2, batch_first=True,
                           bidirectional=(kind == "lstm"))
            self.head = nn.Linear(32 * (2 if kind == "lstm" else 1), 4)

        def forward(self, x):
            y, _ = self.rnn(x)
            return self.head(y[:, -1, :]), y

    return Seq(), lambda b: [torch.randn(b, 10, 12)]


model("lstm_op13", 13)(lambda: rnn("lstm"))
model("lstm_op9", 9)(lambda: rnn("lstm"))
model("gru_op14", 14)(lambda: rnn("gru"))
model("gru_op10", 10)(lambda: rnn("gru"))


def tv(name):
    torch = _torch()
    import torchvision

    m = getattr(torchvision.models, name)(weights=None)
    return m, lambda b: [torch.randn(b, 3, 224, 224)]


model("resnet18_op13", 13, slow=True)(lambda: tv("resnet18"))
model("mobilenet_v2_op13", 13, slow=True)(lambda: tv("mobilenet_v2"))
model("mobilenet_v2_op10", 10, slow=True)(lambda: tv("mobilenet_v2"))  # Clip with min/max attributes

# Relative-error tolerances other than model_test's default 1e-4, with the reason.
TOLERANCE = {}

# ---- export ----------------------------------------------------------------------------------


def script_version():
    with open(__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def export_one(outdir, name):
    torch = _torch()
    import numpy as np
    import onnx

    kind, build, opset = MODELS[name]
    d = os.path.join(outdir, name)
    stamp = os.path.join(d, "meta.txt")
    version = script_version()
    if os.path.exists(stamp):
        with open(stamp) as f:
            if f"script={version}\n" in f.read():
                return "cached"
    os.makedirs(d, exist_ok=True)
    # every model gets the same seed whatever else was exported before it in this process
    torch.manual_seed(int(hashlib.sha256(name.encode()).hexdigest()[:8], 16))
    m, make_inputs = build()
    m.eval()
    example = make_inputs(2)
    with torch.no_grad():
        out = m(*example)
    n_out = len(out) if isinstance(out, (tuple, list)) else 1
    in_names = [f"input_{i}" if len(example) > 1 else "input" for i in range(len(example))]
    out_names = [f"output_{i}" if n_out > 1 else "output" for i in range(n_out)]
    dyn = {n: {0: "batch"} for n in in_names + out_names}
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the TorchScript exporter everywhere: PyTorch 2.9+ defaults to its dynamo exporter, whose
        # graphs differ (and whose opset floor is 18)
        legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
        torch.onnx.export(m, tuple(example), buf, opset_version=opset, input_names=in_names,
                          output_names=out_names, dynamic_axes=dyn, do_constant_folding=True, **legacy)
    proto = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(proto)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(buf.getvalue())

    try:
        import onnxruntime as ort  # optional: a second, independent reference

        sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    except Exception:
        sess = None
    for b in (1, 8):
        bd = os.path.join(d, f"b{b}")
        os.makedirs(bd, exist_ok=True)
        for f in os.listdir(bd):
            os.remove(os.path.join(bd, f))
        inputs = make_inputs(b)
        with torch.no_grad():
            outs = m(*inputs)
        outs = outs if isinstance(outs, (tuple, list)) else [outs]
        for i, x in enumerate(inputs):
            np.save(os.path.join(bd, f"input_{i}.npy"), x.numpy())
        for i, y in enumerate(outs):
            np.save(os.path.join(bd, f"output_{i}.npy"), y.numpy())
        if sess is not None:
            ort_outs = sess.run(None, {n: x.numpy() for n, x in zip(in_names, inputs)})
            for i, y in enumerate(ort_outs):
                np.save(os.path.join(bd, f"ort_output_{i}.npy"), y)
    with open(stamp, "w") as f:
        f.write(f"opset={opset}\n")
        if name in TOLERANCE:
            f.write(f"tolerance={TOLERANCE[name]}\n")
        f.write(f"script={version}\n")
    return "exported"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--set", default="all", choices=["fast", "slow", "all"])
    ap.add_argument("--list", action="store_true")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    names = a.names or [n for n, (k, _, _) in MODELS.items() if a.set in ("all", k)]
    if a.list:
        print("\n".join(names))
        return
    bad = [n for n in names if n not in MODELS]
    if bad:
        sys.exit(f"unknown model(s): {', '.join(bad)}; known: {', '.join(MODELS)}")
    for n in names:
        print(f"{n}: {export_one(a.outdir, n)}", flush=True)


if __name__ == "__main__":
    main()
