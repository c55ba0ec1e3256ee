#!/usr/bin/python3
"""TensorFlow/Keras graphs exported by tf2onnx, for sweep.py's compare (alma against ONNX Runtime).

tf2onnx writes graphs unlike PyTorch's: NHWC models wrapped in Transposes, Keras LSTM/GRU rewritten
into ONNX LSTM/GRU (or left as Loop), int32 indices, Resize with TF's coordinate modes, fused
BatchNorm, Einsum, ScatterND, Where. This builds keras.applications models (weights=None: random
weights, nothing downloaded) and custom Keras / tf.function models, makes every BatchNormalization's
statistics non-trivial, and converts each with tf2onnx at opsets 13 and 17, batch dimension dynamic:

    .venv-tf/bin/python tests/models/sweep_tf.py export OUTDIR [--models a,b] [--opsets 13,17]
    .venv-test/bin/python tests/models/sweep.py compare OUTDIR --alma build/alma

--tiny exports the small set committed under tests/models/exporters/tf/ (tiny widths and inputs,
one model per tf2onnx pattern; opset 13, the transformer at 17 too, --opsets aside) that
tests/models/exporters/check_exporters.py runs in CTest:

    .venv-tf/bin/python tests/models/sweep_tf.py export tests/models/exporters/tf --tiny

.venv-tf: python3 -m venv .venv-tf && .venv-tf/bin/pip install tensorflow-cpu==2.15.1 tf2onnx==1.16.1
"numpy<2" onnxruntime
"""
import argparse
import os
import sys


def keras_models(tiny):
    """name -> (builder returning a keras.Model or (tf.function, input TensorSpecs))"""
    import numpy as np
    import tensorflow as tf
    from tensorflow import keras
    from tensorflow.keras import layers as L

    A = keras.applications

    def app(f, s, **kw):
        return lambda: f(weights=None, input_shape=(s, s, 3), classes=10, **kw)

    def text(vocab=100, seq=12, w=32):
        x = keras.Input((seq,), dtype="int32", name="tokens")
        e = L.Embedding(vocab, w)(x)
        y = L.Bidirectional(L.LSTM(w, return_sequences=True))(e)
        y = L.GRU(w, return_sequences=True)(y)
        y = L.LSTM(w // 2)(y)
        return keras.Model(x, L.Dense(5, activation="softmax")(y))

    def gru_reset_after_false(seq=10, w=16):
        x = keras.Input((seq, 8), name="x")
        y = L.GRU(w, reset_after=False, return_sequences=True)(x)
        y = L.Bidirectional(L.GRU(w, go_backwards=False))(y)
        return keras.Model(x, L.Dense(3)(y))

    def audio(n=400, w=16):
        x = keras.Input((n, 1), name="wave")
        y = L.Conv1D(w, 11, strides=2, padding="same")(x)
        y = L.BatchNormalization()(y)
        y = L.ReLU()(y)
        y = L.MaxPool1D(3, 2)(y)
        y = L.Conv1D(2 * w, 5, dilation_rate=2, padding="causal", activation="gelu")(y)
        y = L.AveragePooling1D(2)(y)
        y = L.Conv1D(2 * w, 3, padding="valid", activation="swish")(y)  # groups: tf2onnx leaves a PartitionedCall
        y = L.GlobalAveragePooling1D()(y)
        return keras.Model(x, L.Dense(10, activation="log_softmax")(y))

    def transformer(seq=16, d=32, heads=4, vocab=50, layers=2):
        x = keras.Input((seq,), dtype="int32", name="ids")
        pos = tf.range(seq)
        h = L.Embedding(vocab, d)(x) + L.Embedding(seq, d)(pos)
        for _ in range(layers):
            a = L.MultiHeadAttention(heads, d // heads, dropout=0.1)(h, h, use_causal_mask=True)
            h = L.LayerNormalization(epsilon=1e-6)(h + a)
            f = L.Dense(2 * d, activation="gelu")(h)
            h = L.LayerNormalization()(h + L.Dense(d)(f))
        return keras.Model(x, L.Dense(vocab)(h))

    def vit_ish(s=32, p=8, d=32):
        x = keras.Input((s, s, 3), name="img")
        y = L.Conv2D(d, p, strides=p)(x)
        y = L.Reshape(((s // p) ** 2, d))(y)
        a = L.MultiHeadAttention(2, d // 2, value_dim=8, output_shape=d)(y, y)
        y = L.LayerNormalization(axis=-1)(y + a)
        return keras.Model(x, L.Dense(4)(L.GlobalAveragePooling1D()(y)))

    def unet(s=32, w=8):
        x = keras.Input((s, s, 3), name="img")
        d1 = L.Conv2D(w, 3, padding="same", activation="relu")(x)
        d2 = L.Conv2D(2 * w, 3, strides=2, padding="same")(d1)
        d2 = L.BatchNormalization()(d2)
        d2 = L.LeakyReLU(0.1)(d2)
        d3 = L.MaxPool2D(2)(d2)
        d3 = L.Conv2D(4 * w, 3, padding="same", activation="elu")(d3)
        u2 = L.Conv2DTranspose(2 * w, 3, strides=2, padding="same")(d3)
        u2 = L.Concatenate()([u2, d2])
        u1 = L.UpSampling2D(2, interpolation="bilinear")(u2)
        u1b = L.UpSampling2D(2)(L.Conv2DTranspose(w, 4, strides=2, padding="valid")(d3))
        u1b = L.Cropping2D(((1, 3), (3, 1)))(u1b)
        u1 = L.Concatenate(axis=-1)([u1, d1, u1b])
        y = L.Conv2D(2, 1, activation="sigmoid")(u1)
        return keras.Model(x, y)

    def sepconv(s=32, w=8):
        x = keras.Input((s, s, 3), name="img")
        y = L.SeparableConv2D(w, 3, padding="same", depth_multiplier=2, activation="relu6")(x)
        y = L.DepthwiseConv2D(5, strides=2, padding="same")(y)
        y = L.BatchNormalization()(y)
        y = L.DepthwiseConv2D(3, dilation_rate=2, padding="same", depth_multiplier=3, activation="hard_sigmoid")(y)
        y = L.SeparableConv2D(2 * w, 3, strides=2, padding="valid")(y)
        y = L.ZeroPadding2D(((1, 0), (0, 2)))(y)
        y = L.Conv2D(w, 3, strides=(2, 1), padding="same", activation="selu")(y)
        y = L.GlobalMaxPool2D()(y)
        return keras.Model(x, L.Dense(6)(y))

    def resize(s=20):
        x = keras.Input((s, s, 3), name="img")
        a = L.Resizing(31, 27, interpolation="bilinear")(x)
        b = L.Resizing(31, 27, interpolation="nearest")(x)
        c = L.Resizing(31, 27, interpolation="bicubic")(x)
        d = tf.image.resize(x, (11, 13), method="bilinear", antialias=False)
        e = tf.compat.v1.image.resize_bilinear(x, (31, 27), align_corners=True)
        f = tf.compat.v1.image.resize_nearest_neighbor(x, (31, 27), half_pixel_centers=True)
        g = tf.compat.v1.image.resize_bilinear(x, (31, 27), half_pixel_centers=False)
        h = tf.image.resize(x, (40, 40), method="nearest")
        p = lambda t: tf.reduce_mean(t, axis=[1, 2])  # noqa: E731
        return keras.Model(x, [a + b + c + e + f + g, L.Concatenate()([p(d), p(h)])])

    def bn_stats(s=16):
        x = keras.Input((s, s, 4), name="img")
        y = L.BatchNormalization(epsilon=1e-3, center=False)(x)
        y = L.Conv2D(6, 3, use_bias=False)(y)
        y = L.BatchNormalization(scale=False)(y)
        y = L.Activation("softplus")(y)
        y = L.BatchNormalization(axis=1)(y)  # over H: a non-channel axis
        y = L.Flatten()(y)
        return keras.Model(x, L.Dense(4)(y))

    def misc_fn(n=6, c=8):
        spec = [tf.TensorSpec((None, n, c), tf.float32, name="x"), tf.TensorSpec((None, n), tf.int32, name="idx")]
        w = tf.constant(np.random.default_rng(1).standard_normal((c, c)).astype(np.float32))

        @tf.function(input_signature=spec)
        def f(x, idx):
            a = tf.einsum("bij,bkj->bik", x, x)
            b = tf.einsum("bnc,cd->bnd", x, w)
            g = tf.gather(x, [(k * 5 + 2) % n for k in range(n)], axis=1)
            gi = tf.gather(x, idx % n, axis=1, batch_dims=1)
            wh = tf.where(x > 0, x, 0.1 * x)
            r = (tf.reduce_sum(x, 2) + tf.reduce_max(x, 2) - tf.reduce_min(x, 2) + tf.reduce_prod(tf.tanh(x), 2)
                 + tf.reduce_mean(x * x, 2) + tf.math.reduce_logsumexp(x, 2) + tf.math.reduce_std(x, 2))
            v, i = tf.math.top_k(a, 3)
            cs = tf.math.cumsum(x, axis=1, exclusive=True, reverse=True)
            am = tf.cast(tf.argmax(x, axis=-1), tf.float32) + tf.cast(tf.argmin(x, axis=1), tf.float32)[:, :1]
            sl = x[:, 1:-1:2, ::-1]
            t = tf.tile(tf.reduce_sum(sl, 1, keepdims=True), [1, n, 1])
            pd = tf.pad(x, [[0, 0], [1, 2], [0, 0]], mode="REFLECT")[:, :n, :]
            cl = tf.clip_by_value(tf.nn.softmax(b, axis=1), 0.05, 0.5)
            sq = tf.squeeze(tf.expand_dims(x, 2), 2) * tf.math.rsqrt(tf.abs(x) + 1.0)
            oh = tf.one_hot(idx, c, dtype=tf.float32)
            out1 = tf.concat([g + gi + wh + cs + t + pd + cl + sq + oh + tf.math.floormod(x, 1.5), b], -1)
            return out1, r + am + tf.reduce_sum(v, -1) + tf.cast(tf.reduce_sum(i, -1), tf.float32)

        return f, spec

    def space_depth_fn(s=8, c=4):
        spec = [tf.TensorSpec((None, s, s, c), tf.float32, name="img")]

        @tf.function(input_signature=spec)
        def f(x):
            y = tf.nn.space_to_depth(x, 2)
            y = tf.nn.relu(y) - tf.nn.sigmoid(y) * tf.nn.elu(y)
            z = tf.nn.depth_to_space(y, 2) + x
            st = tf.nn.avg_pool2d(z, 3, 2, "SAME") + tf.nn.max_pool2d(z, 3, 2, "SAME")
            return tf.nn.depth_to_space(tf.concat([y, y], -1), 2), tf.nn.l2_normalize(st, axis=-1)

        return f, spec

    def mbconv(s=32, w=8):
        """keras.applications' building blocks (MobileNetV2/V3, EfficientNet) at a tiny width."""
        x = keras.Input((s, s, 3), name="img")
        y = L.Rescaling(1 / 127.5, offset=-1)(x)
        y = L.Conv2D(w, 3, strides=2, padding="same", use_bias=False)(y)
        y = L.BatchNormalization()(y)
        y = L.ReLU(6.0)(y)
        r = y
        y = L.Conv2D(2 * w, 1, use_bias=False)(y)
        y = L.BatchNormalization()(y)
        y = L.Activation("hard_swish" if hasattr(keras.activations, "hard_swish") else "swish")(y)
        y = L.DepthwiseConv2D(3, padding="same", use_bias=False)(y)
        y = L.BatchNormalization()(y)
        y = L.Activation("swish")(y)
        se = L.GlobalAveragePooling2D(keepdims=True)(y)
        se = L.Conv2D(w // 2, 1, activation="relu")(se)
        se = L.Conv2D(2 * w, 1, activation="hard_sigmoid")(se)
        y = L.Multiply()([y, se])
        y = L.Conv2D(w, 1, use_bias=False)(y)
        y = L.BatchNormalization()(y)
        y = L.Add()([y, r])
        y = L.GlobalAveragePooling2D()(y)
        y = L.Dropout(0.2)(y)
        return keras.Model(x, L.Dense(5, activation="softmax")(y))

    def layers_more(s=12, w=6):
        """Keras layers tf2onnx lowers in other ways: GroupNormalization, LayerNormalization over two
        axes, Conv3D, ConvLSTM-free TimeDistributed, SimpleRNN, Permute/RepeatVector, Attention."""
        x = keras.Input((s, s, 3), name="img")
        y = L.Conv2D(w, 3, padding="same")(x)
        if hasattr(L, "GroupNormalization"):
            y = L.GroupNormalization(groups=2)(y)
        y = L.LayerNormalization(axis=[1, 2])(y)
        y = L.Permute((2, 1, 3))(y)
        v = L.Reshape((s, s * w))(y)
        v = L.TimeDistributed(L.Dense(w, activation="tanh"))(v)
        q = L.SimpleRNN(w, return_sequences=True)(v)
        a = L.Attention(use_scale=True)([q, v])
        aa = L.AdditiveAttention()([q, v])
        z = L.Conv3D(2, (2, 3, 3), padding="same")(L.Reshape((s, s, w, 1))(y))
        z = L.GlobalAveragePooling3D()(z)
        r = L.RepeatVector(3)(L.Flatten()(L.GlobalMaxPool1D()(a + aa)[:, None, :]))
        return keras.Model(x, [L.Flatten()(r), z])

    def tf_ops2(n=6, c=4):
        spec = [tf.TensorSpec((None, n, c), tf.float32, name="x")]
        w = tf.constant(np.random.default_rng(2).standard_normal((3, c, c)).astype(np.float32))

        @tf.function(input_signature=spec)
        def f(x):
            s = tf.sort(x, axis=1, direction="DESCENDING") + tf.cast(tf.argsort(x, axis=-1), tf.float32)
            rv = tf.reverse(x, [1, 2]) + tf.roll(x, shift=2, axis=1)
            mean, var = tf.nn.moments(x, axes=[1], keepdims=True)
            sg = tf.math.unsorted_segment_sum(tf.transpose(x, [1, 0, 2]), [0, 1, 0, 2, 1, 2][:n], 3)
            cv = tf.nn.conv1d(x, w, stride=1, padding="SAME")
            m = tf.boolean_mask(tf.reshape(x, [-1]), tf.reshape(x, [-1]) > 0.5)
            sc = tf.tensor_scatter_nd_update(x, [[0, 1], [0, 3]], tf.ones([2, c]))
            lr = tf.nn.local_response_normalization(x[:, None], depth_radius=1)[:, 0]
            ss = x[:, tf.newaxis, 1:, ...][:, 0, :, 1]
            mm = tf.linalg.matmul(x, x, transpose_b=True) / tf.maximum(tf.norm(x, axis=-1, keepdims=True), 1e-3)
            sq = tf.math.squared_difference(x, mean) / tf.sqrt(var + 1e-3) + tf.math.erf(x) + tf.math.softsign(x)
            return (s + rv + cv + sc + lr + sq + tf.math.cumprod(tf.sigmoid(x), axis=2), tf.transpose(sg, [1, 0, 2]),
                    tf.reduce_sum(m)[None] + tf.reduce_sum(ss), mm, tf.cast(tf.math.is_finite(x), tf.int32))

        return f, spec

    def nasnet_cell(s=16, w=22):
        """NASNet's separable-conv cells at channel counts that are no multiple of 4 (22): ZeroPadding
        + strided valid SeparableConv2D, pre-activation BN, an AveragePooling2D branch, Add, concat."""
        x = keras.Input((s, s, 3), name="img")
        y = L.BatchNormalization()(L.Conv2D(w, 3, strides=2, padding="same", use_bias=False)(x))
        a = L.SeparableConv2D(w, 5, padding="same", use_bias=False)(y)  # its source has no Relu before it
        a = L.BatchNormalization()(a)
        b = L.SeparableConv2D(w, 3, padding="same", use_bias=False)(L.ReLU()(y))
        c = L.AveragePooling2D(3, strides=1, padding="same")(y)
        z = L.Concatenate()([L.Add()([a, b]), c])
        z = L.SeparableConv2D(w + 4, 3, strides=2, padding="valid")(L.ZeroPadding2D(((0, 1), (0, 1)))(z))
        return keras.Model(x, L.Dense(3)(L.GlobalAveragePooling2D()(z)))

    def bigru_lstm_masked(seq=9, vocab=30, w=12):
        x = keras.Input((seq,), dtype="int32", name="tokens")
        e = L.Embedding(vocab, w, mask_zero=True)(x)
        y = L.Bidirectional(L.LSTM(w, return_sequences=True), merge_mode="sum")(e)
        y = L.GRU(w)(y)
        return keras.Model(x, L.Dense(3)(y))

    if tiny:
        t = {
            "mbconv": lambda: mbconv(s=16, w=4),
            "gru_reset_after_false": lambda: gru_reset_after_false(seq=5, w=4),
            "masked_rnn": lambda: bigru_lstm_masked(seq=5, vocab=12, w=4),
            "bn_stats": lambda: bn_stats(s=6),
            "text_rnn": lambda: text(vocab=20, seq=6, w=8),
            "audio_conv1d": lambda: audio(n=64, w=4),
            "transformer_mha": lambda: transformer(seq=6, d=8, heads=2, vocab=16, layers=1),
            "nasnet_cell": lambda: nasnet_cell(s=16, w=22),
            "unet": lambda: unet(s=16, w=4),
            "sepconv_bn": lambda: sepconv(s=16, w=4),
            "resize": lambda: resize(s=6),
            "misc_ops": lambda: misc_fn(n=4, c=5),
            "space_depth": lambda: space_depth_fn(s=4, c=2),
        }
        return t
    return {
        "mobilenetv2": app(A.MobileNetV2, 96),
        "mobilenetv3small": app(A.MobileNetV3Small, 96),
        "resnet50": app(A.ResNet50, 64),
        "efficientnetb0": app(A.EfficientNetB0, 64),
        "densenet121": app(A.DenseNet121, 64),
        "inceptionv3": app(A.InceptionV3, 96),
        "xception": app(A.Xception, 80),
        "nasnetmobile": app(A.NASNetMobile, 64),
        # ConvNeXtTiny: its depthwise Conv2D(groups=C) stays a TF PartitionedCall in tf2onnx 1.16
        # (ONNX Runtime refuses the file), as do grouped Conv1D/Conv2D; not exported
        "vgg16": app(A.VGG16, 48),
        "mbconv": mbconv,
        "text_rnn": text,
        "gru_reset_after_false": gru_reset_after_false,
        "masked_rnn": bigru_lstm_masked,
        "nasnet_cell": nasnet_cell,
        "layers_more": layers_more,
        "tf_ops2": tf_ops2,
        "audio_conv1d": audio,
        "transformer_mha": transformer,
        "vit_ish": vit_ish,
        "unet": unet,
        "sepconv_bn": sepconv,
        "resize": resize,
        "bn_stats": bn_stats,
        "misc_ops": misc_fn,
        "space_depth": space_depth_fn,
    }


# the committed tiny set: opset 13 (tf2onnx writes nearly the same graphs at 17), and the
# transformer at 17 too (no Einsum there)
TINY_OPSETS = {"transformer_mha": (13, 17)}


def randomize_bn(model, rng):
    """Random BatchNormalization statistics (weights=None leaves mean 0, variance 1: a fold that
    drops them would pass unseen)."""
    from tensorflow import keras

    for layer in model.submodules:
        if isinstance(layer, keras.layers.BatchNormalization):
            ws = layer.get_weights()
            n = len(ws)
            new = []
            for k, w in enumerate(ws):
                if k == n - 1:  # moving variance
                    new.append(rng.uniform(0.5, 2.0, w.shape).astype(w.dtype))
                elif k == n - 2:  # moving mean
                    new.append(rng.normal(0, 0.5, w.shape).astype(w.dtype))
                else:  # gamma, beta
                    new.append(rng.normal(1 if k == 0 and layer.scale else 0, 0.2, w.shape).astype(w.dtype))
            layer.set_weights(new)


def export(outdir, names, opsets, tiny):
    import numpy as np
    import tensorflow as tf
    import tf2onnx

    specs = keras_models(tiny)
    bad = 0
    for n in names or list(specs):
        for op in (TINY_OPSETS.get(n, (13,)) if tiny else opsets):
            tf.keras.utils.set_random_seed(0)
            name = f"{n}_op{op}"
            try:
                m = specs[n]()
                path = os.path.join(outdir, name + ".onnx")
                if isinstance(m, tuple):
                    fn, sig = m
                    tf2onnx.convert.from_function(fn, input_signature=sig, opset=op, output_path=path)
                else:
                    randomize_bn(m, np.random.default_rng(0))
                    sig = [tf.TensorSpec((None,) + tuple(i.shape[1:]), i.dtype, name=i.name.split(":")[0])
                           for i in m.inputs]
                    tf2onnx.convert.from_keras(m, input_signature=sig, opset=op, output_path=path)
                print("exported", name, os.path.getsize(path), "bytes", flush=True)
            except Exception as e:  # an exporter's failure is reported, not ours to judge
                bad += 1
                print("export failed", name, type(e).__name__, str(e)[:300], flush=True)
    return 0 if not bad else 2


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("export",))
    ap.add_argument("outdir")
    ap.add_argument("--models", default="")
    ap.add_argument("--opsets", default="13,17")
    ap.add_argument("--tiny", action="store_true", help="the small set committed under tests/models/exporters/tf")
    a = ap.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.makedirs(a.outdir, exist_ok=True)
    names = [n for n in a.models.split(",") if n]
    return export(a.outdir, names, [int(o) for o in a.opsets.split(",")], a.tiny)


if __name__ == "__main__":
    sys.exit(main())
