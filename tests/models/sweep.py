#!/usr/bin/python3
"""A sweep over real exporters' graphs: every conversion of alma against ONNX Runtime.

The model zoo (export_models.py) holds a few models under test; this sweep is wider and slower and
is run by hand when a runtime, a pass or an operator changes: torchvision's classification,
segmentation, video and detection models, small PyTorch models of other families (encoder-decoder
transformer with a causal mask, stacked bidirectional GRU/LSTM, Conv1d audio, a UNet with
GroupNorm / ConvTranspose / PixelShuffle / Upsample, Einsum / TopK / CumSum / Where), at several
opsets, and Hugging Face models from configs when `transformers` is installed (random weights,
nothing downloaded: BERT, DistilBERT, GPT-2, T5 encoder, ViT, ConvNeXt, BART, Whisper's encoder,
CLIP, wav2vec2, Swin, MobileViT; BART, wav2vec2 and one BERT with a dynamic sequence axis, fed
another length than the traced one). Each model is exported, run by ONNX Runtime (the reference),
and run by `alma run` under each conversion; the table gives, per output, the largest difference
over the largest reference value, the cosine and the argmax agreement per row.

    .venv-hf/bin/python tests/models/sweep.py export OUTDIR [--models a,b]   (needs torch; transformers
                                                                           for the hf_* models)
    .venv-test/bin/python tests/models/sweep.py compare OUTDIR --alma build/alma \\
        [--models a,b] [--conversions EAGER,FOLD+FUSE+DNNL,...]              (needs onnxruntime)

compare exits 1 when a float conversion's cosine is below 0.9999 or an int8 one's below 0.99 on
some output (detection models' box lists are compared only when their shapes agree: with random
weights their scores nearly tie, and any rounding reorders them). Found this way (session 7): the
DNNL runtime's int8 depthwise 5x5 convolutions (MobileNet-V3, EfficientNet) and INT8_STATIC's
int32 bias overflow behind nearly constant inputs (LR-ASPP, GoogLeNet).
"""
import argparse
import os
import subprocess
import sys
import time

# FUSE on every runtime (its fused ops run on each runtime's own kernels) and each runtime unfused too
FLOAT = "EAGER,FOLD+FUSE+EAGER,FOLD+FUSE+DNNL,FOLD+FUSE+XNNPACK,FOLD+FUSE+BLAS,FOLD+XNNPACK,FOLD+BLAS"
INT8 = "FOLD+INT8_STATIC+DNNL,FOLD+INT8_DYNAMIC+DNNL,FOLD+INT8_STATIC+XNNPACK,FOLD+INT8_STATIC+EAGER"


def torch_models():
    """name -> (builder, example inputs, input names, opset, dynamic batch (True) or torch.onnx's dynamic_axes
    [, the inputs compare feeds])"""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision

    M = torchvision.models

    def img(s=224, c=3):
        return lambda: (torch.randn(1, c, s, s),)

    def seg(f):
        return lambda: f(weights=None, weights_backbone=None, num_classes=21)

    def det(f):
        return lambda: f(weights=None, weights_backbone=None)

    class Seq2Seq(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(100, 64)
            s.t = nn.Transformer(64, 4, 2, 2, 128, batch_first=True, activation="gelu")
            s.out = nn.Linear(64, 100)

        def forward(s, src, tgt):
            m = torch.triu(torch.full((tgt.shape[1], tgt.shape[1]), float("-inf")), 1)
            return s.out(s.t(s.emb(src), s.emb(tgt), tgt_mask=m))

    class RNNs(nn.Module):
        def __init__(s):
            super().__init__()
            s.g = nn.GRU(16, 32, 2, batch_first=True, bidirectional=True)
            s.l = nn.LSTM(64, 24, 1, batch_first=True, bidirectional=True)
            s.fc = nn.Linear(48, 5)

        def forward(s, x):
            y, _ = s.g(x)
            y, _ = s.l(y)
            return s.fc(y[:, -1])

    class Audio(nn.Module):
        def __init__(s):
            super().__init__()
            s.c1 = nn.Conv1d(1, 16, 11, stride=2, padding=5)
            s.bn = nn.BatchNorm1d(16)
            s.c2 = nn.Conv1d(16, 32, 5, dilation=2, padding=4, groups=4)
            s.fc = nn.Linear(32, 10)

        def forward(s, x):
            y = F.max_pool1d(F.relu(s.bn(s.c1(x))), 3, 2)
            return s.fc(F.gelu(s.c2(y), approximate="tanh").mean(-1)).log_softmax(-1)

    class UNet(nn.Module):
        def __init__(s):
            super().__init__()
            s.d = nn.Conv2d(3, 16, 3, 2, 1)
            s.gn = nn.GroupNorm(4, 16)
            s.u = nn.ConvTranspose2d(16, 8, 4, 2, 1)
            s.ps = nn.Conv2d(8, 12, 3, padding=1)
            s.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)

        def forward(s, x):
            y = s.u(F.silu(s.gn(s.d(x))))
            z = F.interpolate(F.pixel_shuffle(s.ps(y), 2), size=y.shape[-2:], mode="nearest")
            return torch.cat([z, s.up(y)[..., ::2, ::2]], 1).sigmoid()

    class Misc(nn.Module):
        def forward(s, x):
            a = torch.einsum("bij,bjk->bik", x, x.transpose(1, 2))
            v, i = a.topk(3, dim=-1)
            c = torch.cumsum(x, 1)
            w = torch.where(c > 0, c, 0.1 * c)
            return v.sum(-1) + i.float().mean(-1) + w.amax(-1) + x.argmax(-1).float() + F.softplus(x).prod(-1) * 1e-3

    tv = {n: (getattr(M, n), img(), ["x"], 13, True) for n in (
        "squeezenet1_1", "shufflenet_v2_x1_0", "efficientnet_b0", "mnasnet0_5", "regnet_y_400mf", "mobilenet_v3_small",
        "densenet121", "resnext50_32x4d", "alexnet")}
    tv.update({
        "googlenet": (lambda: M.googlenet(aux_logits=False, init_weights=True), img(), ["x"], 13, True),
        "inception_v3": (lambda: M.inception_v3(aux_logits=False, init_weights=True), img(299), ["x"], 13, True),
        "convnext_tiny": (M.convnext_tiny, img(), ["x"], 14, True),
        "vit_b_16": (M.vit_b_16, img(), ["x"], 14, True),
        "swin_t": (M.swin_t, img(), ["x"], 14, True),
        "maxvit_t": (M.maxvit_t, img(), ["x"], 14, True),
        "vgg11_bn_op9": (M.vgg11_bn, img(), ["x"], 9, True),
        "efficientnet_v2_s_op17": (M.efficientnet_v2_s, img(), ["x"], 17, True),
        "deeplabv3_mnv3": (seg(M.segmentation.deeplabv3_mobilenet_v3_large), img(), ["x"], 13, True),
        "lraspp": (seg(M.segmentation.lraspp_mobilenet_v3_large), img(), ["x"], 13, True),
        "r3d_18": (M.video.r3d_18, lambda: (torch.randn(1, 3, 8, 56, 56),), ["x"], 13, True),
        "ssdlite": (det(M.detection.ssdlite320_mobilenet_v3_large), lambda: ([torch.rand(3, 320, 320)],), ["x"], 13, False),
        "retinanet": (det(M.detection.retinanet_resnet50_fpn), lambda: ([torch.rand(3, 320, 320)],), ["x"], 13, False),
        "keypointrcnn": (det(M.detection.keypointrcnn_resnet50_fpn), lambda: ([torch.rand(3, 320, 320)],), ["x"], 13, False),
        "seq2seq": (Seq2Seq, lambda: (torch.randint(0, 100, (2, 12)), torch.randint(0, 100, (2, 9))), ["src", "tgt"], 14, True),
        "rnns": (RNNs, lambda: (torch.randn(2, 7, 16),), ["x"], 14, True),
        "rnns_op9": (RNNs, lambda: (torch.randn(2, 7, 16),), ["x"], 9, True),
        "audio": (Audio, lambda: (torch.randn(2, 1, 400),), ["x"], 13, True),
        "unet": (UNet, lambda: (torch.randn(2, 3, 32, 32),), ["x"], 13, True),
        "unet_op11": (UNet, lambda: (torch.randn(2, 3, 32, 32),), ["x"], 11, True),
        "misc": (Misc, lambda: (torch.randn(2, 5, 6),), ["x"], 14, True),
    })
    try:
        import transformers as T
    except ImportError:
        return tv
    small = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256)

    def ids():
        return torch.randint(0, 1000, (2, 16))

    def with_mask():
        return ids(), torch.ones(2, 16, dtype=torch.long)

    for op in (14, 17):
        tv.update({
            f"hf_bert_op{op}": (lambda: T.BertModel(T.BertConfig(vocab_size=1000, **small)), with_mask,
                                ["input_ids", "attention_mask"], op, True),
            f"hf_gpt2_op{op}": (lambda: T.GPT2Model(T.GPT2Config(vocab_size=1000, n_embd=128, n_layer=2, n_head=4,
                                                                 n_positions=64)), lambda: (ids(),), ["input_ids"], op, True),
            f"hf_t5enc_op{op}": (lambda: T.T5EncoderModel(T.T5Config(vocab_size=1000, d_model=128, d_kv=32, d_ff=256,
                                                                     num_layers=2, num_heads=4)),
                                 lambda: (ids(),), ["input_ids"], op, True),
        })
    tv.update({
        "hf_distilbert": (lambda: T.DistilBertModel(T.DistilBertConfig(vocab_size=1000, dim=128, n_layers=2, n_heads=4,
                                                                      hidden_dim=256)), with_mask,
                          ["input_ids", "attention_mask"], 14, True),
        "hf_vit": (lambda: T.ViTModel(T.ViTConfig(image_size=64, patch_size=16, **small)),
                   lambda: (torch.randn(2, 3, 64, 64),), ["pixel_values"], 14, True),
        "hf_convnext": (lambda: T.ConvNextModel(T.ConvNextConfig(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1])),
                        lambda: (torch.randn(2, 3, 64, 64),), ["pixel_values"], 14, True),
    })
    # more Hugging Face families (session 13): encoder-decoder text, speech encoders, CLIP's two towers,
    # windowed and convolutional vision transformers, and a sequence length left dynamic at export
    # A model with a dynamic sequence axis also gives the inputs compare feeds it (NAME.feeds.npz), of
    # another length than the traced one, with padding in its attention mask.
    seq = {0: "batch", 1: "seq"}

    def padded(b, n):
        m = torch.ones(b, n, dtype=torch.long)
        m[1, n - 4:] = 0
        return m

    tv.update({
        "hf_bart": (lambda: T.BartModel(T.BartConfig(vocab_size=1000, d_model=64, encoder_layers=2, decoder_layers=2,
                                                     encoder_attention_heads=4, decoder_attention_heads=4,
                                                     encoder_ffn_dim=128, decoder_ffn_dim=128,
                                                     max_position_embeddings=64, use_cache=False)),
                    lambda: (ids(), torch.ones(2, 16, dtype=torch.long), torch.randint(0, 1000, (2, 9))),
                    ["input_ids", "attention_mask", "decoder_input_ids"], 14,
                    {"input_ids": seq, "attention_mask": seq, "decoder_input_ids": {0: "batch", 1: "dec_seq"}},
                    lambda: (torch.randint(0, 1000, (2, 11)), padded(2, 11), torch.randint(0, 1000, (2, 5)))),
        "hf_whisper_enc": (lambda: T.WhisperModel(T.WhisperConfig(
            vocab_size=1000, d_model=64, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=80,
            max_source_positions=32, max_target_positions=32, pad_token_id=0, bos_token_id=1, eos_token_id=2,
            decoder_start_token_id=1)).get_encoder(),
            lambda: (torch.randn(2, 80, 64),), ["input_features"], 17, True),
        "hf_clip": (lambda: T.CLIPModel(T.CLIPConfig(
            text_config=dict(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, max_position_embeddings=32),
            vision_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                               image_size=64, patch_size=16), projection_dim=32)),
            lambda: (ids(), torch.randn(2, 3, 64, 64), torch.ones(2, 16, dtype=torch.long)),
            ["input_ids", "pixel_values", "attention_mask"], 14, True),
        "hf_wav2vec2": (lambda: T.Wav2Vec2Model(T.Wav2Vec2Config(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
            conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=4, do_stable_layer_norm=False)),
            lambda: (torch.randn(2, 1600),), ["input_values"], 14, {"input_values": seq},
            lambda: (torch.randn(2, 2000),)),
        "hf_swin": (lambda: T.SwinModel(T.SwinConfig(image_size=64, patch_size=4, embed_dim=32, depths=[2, 2],
                                                     num_heads=[2, 4], window_size=4)),
                    lambda: (torch.randn(2, 3, 64, 64),), ["pixel_values"], 14, True),
        "hf_mobilevit": (lambda: T.MobileViTModel(T.MobileViTConfig(image_size=64, hidden_sizes=[48, 64, 80],
                                                                    neck_hidden_sizes=[16, 24, 32, 48, 64, 80, 160])),
                         lambda: (torch.randn(2, 3, 64, 64),), ["pixel_values"], 13, True),
        "hf_bert_dynseq": (lambda: T.BertModel(T.BertConfig(vocab_size=1000, **small)), with_mask,
                           ["input_ids", "attention_mask"], 17, {"input_ids": seq, "attention_mask": seq},
                           lambda: (torch.randint(0, 1000, (2, 23)), padded(2, 23))),
    })
    return tv


def export(outdir, names):
    import warnings

    import numpy as np
    import torch

    warnings.filterwarnings("ignore")
    specs = torch_models()
    bad = 0
    for n in names or list(specs):
        build, args, inputs, opset, dyn = specs[n][:5]
        torch.manual_seed(0)
        try:
            m = build().eval()
            if hasattr(m, "config"):
                m.config.return_dict = False
            torch.onnx.export(m, args(), os.path.join(outdir, n + ".onnx"), opset_version=opset, input_names=inputs,
                              dynamic_axes=dyn if isinstance(dyn, dict) else
                              {k: {0: "batch"} for k in inputs} if dyn else None)
            if len(specs[n]) > 5:
                np.savez(os.path.join(outdir, n + ".feeds.npz"), **{k: v.numpy() for k, v in zip(inputs, specs[n][5]())})
            print("exported", n, flush=True)
        except Exception as e:  # an exporter's failure is reported, not ours to judge
            bad += 1
            print("export failed", n, type(e).__name__, str(e)[:200], flush=True)
    return 0 if not bad else 2


def compare(outdir, alma, names, convs):
    import numpy as np
    import onnxruntime as ort

    names = names or sorted(f[:-5] for f in os.listdir(outdir) if f.endswith(".onnx"))
    failures = []
    for m in names:
        path = os.path.join(outdir, m + ".onnx")
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        feeds, iargs = {}, []
        # an exporter script's own inputs (sweep_llm.py: a past length and a mask that agree)
        given = np.load(os.path.join(outdir, m + ".feeds.npz")) if os.path.exists(
            os.path.join(outdir, m + ".feeds.npz")) else {}
        for k, inp in enumerate(sess.get_inputs()):
            if inp.name in given:
                x = given[inp.name]
                fn = os.path.join(outdir, f"{m}.in{k}.npy")
                np.save(fn, x)
                feeds[inp.name] = x
                iargs += ["-i", f"{inp.name}={fn}"]
                continue
            shape = [2 if not isinstance(d, int) else d for d in inp.shape]
            rng = np.random.default_rng(k)
            if "int" in inp.type:  # int64 (PyTorch) or int32 (tf2onnx) ids, indices, masks
                x = rng.integers(0, 2 if "mask" in inp.name else 10, shape).astype(
                    np.int32 if "int32" in inp.type else np.int64)
                if "mask" in inp.name:
                    x[:, 0] = 1
            else:
                # float32, or the float64 / float16 of jax2onnx's double or half models
                x = rng.standard_normal(shape).astype({"tensor(double)": np.float64,
                                                       "tensor(float16)": np.float16}.get(inp.type, np.float32))
                if m in ("ssdlite", "retinanet", "keypointrcnn"):
                    x = np.abs(x) / 4  # an image in [0, 1]-ish
            fn = os.path.join(outdir, f"{m}.in{k}.npy")
            np.save(fn, x)
            feeds[inp.name] = x
            iargs += ["-i", f"{inp.name}={fn}"]
        refs = sess.run(None, feeds)
        detection = m in ("ssdlite", "retinanet", "keypointrcnn")
        for c in convs:
            od = os.path.join(outdir, f"out_{m}_{c}")
            t = time.time()
            r = subprocess.run([alma, "run", path, *iargs, "-o", od, "-c", c, "-t", "2"], capture_output=True, text=True)
            dt = time.time() - t
            if r.returncode:
                msg = ((r.stderr or r.stdout).strip().splitlines() or ["?"])[-1][:200]
                print(f"{m:24s} {c:26s} ERROR rc={r.returncode}: {msg}", flush=True)
                failures.append((m, c, msg))
                continue
            limit = 0.99 if "INT8" in c else 0.9999
            parts = []
            for o, ref in zip([o.name for o in sess.get_outputs()], refs):
                fn = os.path.join(od, "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in o) + ".npy")
                a = np.load(fn).astype(np.float64)
                ref = ref.astype(np.float64)
                if a.shape != ref.shape:
                    parts.append(f"{o}: shape {a.shape} vs {ref.shape}")
                    if not detection:
                        failures.append((m, c, f"{o} shape"))
                    continue
                if a.size == 0:
                    parts.append(f"{o}: empty")
                    continue
                err = np.abs(a - ref).max() / (np.abs(ref).max() + 1e-12)
                na, nr = np.linalg.norm(a), np.linalg.norm(ref)
                cos = 1.0 if na == nr == 0 else (a * ref).sum() / (na * nr + 1e-30)
                am = (a.reshape(a.shape[0], -1).argmax(1) == ref.reshape(ref.shape[0], -1).argmax(1)).mean() if a.ndim >= 2 else 1.0
                parts.append(f"{o}: err {err:.1e} cos {cos:.5f} argmax {am:.2f}")
                if cos < limit and not detection:
                    failures.append((m, c, f"{o} cosine {cos:.5f}"))
            print(f"{m:24s} {c:26s} {dt:5.1f}s " + "; ".join(parts), flush=True)
    print(f"\n{len(failures)} failure(s)")
    for f in failures:
        print("  ", *f)
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("export", "compare"))
    ap.add_argument("outdir")
    ap.add_argument("--models", default="")
    ap.add_argument("--alma", default="build/alma")
    ap.add_argument("--conversions", default=FLOAT + "," + INT8)
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    names = [n for n in a.models.split(",") if n]
    if a.step == "export":
        return export(a.outdir, names)
    return compare(a.outdir, a.alma, names, a.conversions.split(","))


if __name__ == "__main__":
    sys.exit(main())
