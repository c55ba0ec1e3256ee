#!/usr/bin/python3
"""PaddlePaddle exports through paddle2onnx, for sweep.py's compare step.

Each model (random weights from a fixed seed, eval mode, a dynamic batch) is saved with
paddle.jit.save (a PIR program) and converted by paddle2onnx; its own ONNX Runtime run is checked
against Paddle's output at batch 2, so that an exporter's error is not taken for alma's.

    .venv-paddle/bin/python tests/models/sweep_paddle.py export OUTDIR [--models a,b]
    .venv-test/bin/python tests/models/sweep.py compare OUTDIR --alma build/alma

.venv-paddle: python3 -m venv .venv-paddle && .venv-paddle/bin/pip install paddlepaddle paddle2onnx onnxruntime
(paddlepaddle 3.3.1 CPU, paddle2onnx 2.1.0 on Python 3.11). --small exports the tiny models kept
under tests/models/exporters/paddle/ (regenerated with `export tests/models/exporters/paddle --small`).
paddle2onnx 2.1 exits the process on a program it cannot convert (F.interpolate with scale_factor
here: sizes are given instead).
"""
import argparse
import os
import sys
import tempfile


# the tiny models kept under tests/models/exporters/paddle/ (about 100 KB)
COMMITTED = ["pd_mlp", "pd_cnn", "pd_text", "pd_rnn", "pd_unet", "pd_ops"]


def paddle_models(small=False):
    """name -> (builder, input specs [(shape, dtype)], opset)"""
    import paddle
    import paddle.nn as nn
    import paddle.nn.functional as F
    from paddle.vision import models as V

    class CNN(nn.Layer):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2D(3, 16, 3, padding=1)
            self.b1 = nn.BatchNorm2D(16)
            self.c2 = nn.Conv2D(16, 32, 3, stride=2, padding=1, groups=4)
            self.b2 = nn.BatchNorm2D(32)
            self.fc = nn.Linear(32, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2)
            x = F.hardswish(self.b2(self.c2(x)))
            x = F.adaptive_avg_pool2d(x, 1).flatten(1)
            return F.softmax(self.fc(x), -1)

    class Text(nn.Layer):
        def __init__(self, vocab=50, d=16 if small else 32):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.pos = self.create_parameter([1, 16, d])
            layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, activation="gelu", normalize_before=True)
            self.enc = nn.TransformerEncoder(layer, 1 if small else 2)
            self.head = nn.Linear(d, 3)

        def forward(self, ids):
            x = self.emb(ids) + self.pos
            mask = paddle.triu(paddle.full([16, 16], -1e9), 1)  # causal, additive
            return self.head(self.enc(x, mask)[:, 0])

    class RNN(nn.Layer):
        def __init__(self):
            super().__init__()
            h = 8 if small else 16
            self.lstm = nn.LSTM(8, h, num_layers=2, direction="bidirect")
            self.gru = nn.GRU(2 * h, 12)
            self.fc = nn.Linear(12, 4)

        def forward(self, x):
            y, _ = self.lstm(x)
            z, h = self.gru(y)
            return self.fc(z), h

    class UNet(nn.Layer):
        def __init__(self):
            super().__init__()
            self.d = nn.Conv2D(3, 16, 3, stride=2, padding=1)
            # no GroupNorm: paddle2onnx 2.1 writes its InstanceNormalization an uninitialized epsilon
            self.gn = nn.BatchNorm2D(16)
            self.up = nn.Conv2DTranspose(16, 8, 4, stride=2, padding=1)
            self.ps = nn.PixelShuffle(2)
            self.o = nn.Conv2D(14, 3, 1)

        def forward(self, x):
            y = F.silu(self.gn(self.d(x)))
            a = self.up(y)
            b = F.interpolate(y[:, 4:8], size=[32, 32], mode="bilinear", align_corners=False)
            c = F.interpolate(y[:, :4], size=[32, 32], mode="nearest")
            return self.o(paddle.concat([a[:, :2], self.ps(y), b, c], 1))

    def ops_fn():
        class Ops(nn.Layer):
            def forward(self, x, i):
                v, k = paddle.topk(x, 3, axis=-1)
                c = paddle.cumsum(x, axis=1)
                g = paddle.gather(x, i[0], axis=1)
                w = paddle.where(x > 0, x, paddle.exp(x) - 1)
                e = paddle.einsum("bi,bj->bij", x[:, :4], x[:, 4:8])
                n = F.normalize(x, axis=-1) + F.layer_norm(x, x.shape[-1:])
                return v, k, c, g, w, e, n, paddle.argsort(x, axis=-1), x.max(axis=-1) - x.logsumexp(axis=-1)
        return Ops()

    img = ([None, 3, 64, 64], "float32")
    return {
        "pd_mlp": (lambda: nn.Sequential(nn.Linear(20, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 8), nn.Sigmoid()),
                   [([None, 20], "float32")], 13),
        "pd_cnn": (CNN, [([None, 3, 32, 32], "float32")], 13),
        "pd_text": (Text, [([None, 16], "int64")], 14),
        "pd_rnn": (RNN, [([None, 7, 8], "float32")], 13),
        "pd_unet": (UNet, [([None, 3, 32, 32], "float32")], 13),
        "pd_ops": (ops_fn, [([None, 12], "float32"), ([2, 5], "int64")], 13),
        "pd_resnet18": (lambda: V.resnet18(num_classes=10), [img], 13),
        "pd_mobilenet_v2": (lambda: V.mobilenet_v2(scale=0.5, num_classes=10), [img], 13),
        "pd_mobilenet_v3": (lambda: V.mobilenet_v3_small(scale=0.5, num_classes=10), [img], 13),
        "pd_shufflenet": (lambda: V.shufflenet_v2_x0_5(num_classes=10), [img], 13),
        "pd_squeezenet": (lambda: V.squeezenet1_1(num_classes=10), [img], 13),
        "pd_densenet": (lambda: V.densenet121(num_classes=10), [img], 13),
        # older opsets: Upsample / Resize-10/11, Slice and Squeeze with attributes, Pad-2, Clip-6
        "pd_unet_op11": (UNet, [([None, 3, 32, 32], "float32")], 11),
        "pd_unet_op9": (UNet, [([None, 3, 32, 32], "float32")], 9),
        "pd_rnn_op9": (RNN, [([None, 7, 8], "float32")], 9),
        "pd_ops_op11": (ops_fn, [([None, 12], "float32"), ([2, 5], "int64")], 11),
        "pd_text_op11": (Text, [([None, 16], "int64")], 11),
        "pd_mobilenet_v3_op9": (lambda: V.mobilenet_v3_small(scale=0.5, num_classes=10), [img], 9),
        "pd_googlenet": (lambda: V.googlenet(num_classes=10), [([None, 3, 224, 224], "float32")], 13),
    }


def export(outdir, names, small):
    import numpy as np
    import onnxruntime as ort
    import paddle
    import paddle2onnx

    specs = paddle_models(small)
    bad = 0
    for n in names or (COMMITTED if small else list(specs)):
        build, inputs, opset = specs[n]
        try:
            paddle.seed(0)
            m = build()
            for name, p in list(m.named_parameters()) + list(m.named_buffers()):  # BatchNorm statistics made non-trivial
                if name.endswith("_mean"):
                    p.set_value(paddle.randn(p.shape) * 0.3)
                elif name.endswith("_variance"):
                    p.set_value(paddle.rand(p.shape) + 0.5)
            m.eval()
            # (paddle's dy2static takes a forward's first parameter for `self` only by that name)
            spec = [paddle.static.InputSpec(list(shape), t) for shape, t in inputs]
            with tempfile.TemporaryDirectory() as d:
                paddle.jit.save(m, os.path.join(d, "m"), input_spec=spec)
                path = os.path.join(outdir, n + ".onnx")
                paddle2onnx.export(os.path.join(d, "m.json"), os.path.join(d, "m.pdiparams"), path, opset_version=opset)
            rng = np.random.default_rng(0)
            feeds = [rng.integers(0, 5, [2 if d is None else d for d in s]).astype(t) if "int" in t else
                     rng.standard_normal([2 if d is None else d for d in s]).astype(t) for s, t in inputs]
            want = m(*[paddle.to_tensor(f) for f in feeds])
            want = [w.numpy() for w in (want if isinstance(want, (tuple, list)) else [want])]
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            got = sess.run(None, {i.name: f for i, f in zip(sess.get_inputs(), feeds)})
            errs = [float(np.abs(w.astype(np.float64) - g).max() / (np.abs(w).max() + 1e-12)) if w.shape == g.shape else -1
                    for w, g in zip(want, got)]
            print("exported", n, "(ONNX Runtime vs Paddle: " + " ".join(f"{e:.1e}" for e in errs) + ")", flush=True)
        except Exception as e:  # an exporter's failure is reported, not ours to judge
            import traceback
            traceback.print_exc(limit=-2)
            bad += 1
            print("export failed", n, type(e).__name__, str(e)[:300], flush=True)
    return 0 if not bad else 2


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("export",))
    ap.add_argument("outdir")
    ap.add_argument("--models", default="")
    ap.add_argument("--small", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    return export(a.outdir, [n for n in a.models.split(",") if n], a.small)


if __name__ == "__main__":
    sys.exit(main())
