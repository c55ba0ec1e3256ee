#!/usr/bin/python3
"""Decoder-only LLMs from Hugging Face transformers exported with a KV cache, for sweep.py's compare.

Users benchmark generation as two graphs: prefill (input_ids and attention_mask of a dynamic
sequence length, no past; logits and every layer's present key/value out) and decode (one new token,
past_key_values of a dynamic past length, attention_mask over past + 1). This builds small random-
weight configs of transformers 4.30.2's LLaMA, GPT-2, GPT-NeoX, OPT, BLOOM, GPT-J, CodeGen and
GPTBigCode (nothing downloaded), exports both graphs of each with torch.onnx (torch 1.13, opsets 14
and 17; batch, sequence and past dims dynamic) and writes the inputs sweep.py compare feeds them
(`NAME.feeds.npz`: batch 2, prefill over 7 tokens, decode after a past of 5; the second row's
attention_mask has zeros, right-padded in prefill so that no query row is masked out entirely):

    .venv-hf/bin/python tests/models/sweep_llm.py export OUTDIR [--models llama,gpt2] [--opsets 14,17]
    .venv-test/bin/python tests/models/sweep.py compare OUTDIR --alma build/alma \
        --conversions EAGER,FOLD+FUSE+EAGER,FOLD+FUSE+DNNL,FOLD+FUSE+BLAS,FOLD+XNNPACK,FOLD+BLAS

.venv-hf: python3 -m venv --system-site-packages .venv-hf && .venv-hf/bin/pip install transformers==4.30.2
(Debian's torch 1.13 and onnx 1.12 seen through --system-site-packages).
"""
import argparse
import os
import sys


def configs():
    import transformers as T
    d = dict(vocab_size=1000)
    return {
        "llama": lambda: T.LlamaForCausalLM(T.LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                                           num_attention_heads=4, **d)),
        "gpt2": lambda: T.GPT2LMHeadModel(T.GPT2Config(n_embd=128, n_layer=2, n_head=4, n_positions=64, **d)),
        "gpt_neox": lambda: T.GPTNeoXForCausalLM(T.GPTNeoXConfig(hidden_size=128, intermediate_size=256,
                                                                  num_hidden_layers=2, num_attention_heads=4,
                                                                  rotary_pct=0.5, **d)),
        "opt": lambda: T.OPTForCausalLM(T.OPTConfig(hidden_size=128, ffn_dim=256, num_hidden_layers=2,
                                                    num_attention_heads=4, word_embed_proj_dim=128, **d)),
        "bloom": lambda: T.BloomForCausalLM(T.BloomConfig(hidden_size=128, n_layer=2, n_head=4, **d)),
        "gptj": lambda: T.GPTJForCausalLM(T.GPTJConfig(n_embd=128, n_layer=2, n_head=4, rotary_dim=16,
                                                       n_positions=64, **d)),
        "codegen": lambda: T.CodeGenForCausalLM(T.CodeGenConfig(n_embd=128, n_layer=2, n_head=4, rotary_dim=16,
                                                                n_positions=64, n_ctx=64, **d)),
        "gpt_bigcode": lambda: T.GPTBigCodeForCausalLM(T.GPTBigCodeConfig(n_embd=128, n_layer=2, n_head=4,
                                                                          n_positions=64, **d)),
    }


def export_one(build, outdir, name, opset, batch=2, seq=7, past=5):
    import numpy as np
    import torch

    torch.manual_seed(0)
    m = build().eval()
    m.config.return_dict = False
    m.config.use_cache = True

    def presents(s):  # the cache one forward pass leaves: its layout is the model's own
        with torch.no_grad():
            out = m(torch.randint(0, 1000, (batch, s)), attention_mask=torch.ones(batch, s, dtype=torch.long),
                    use_cache=True)
        return out[1]
    p5, p6 = presents(past), presents(past + 1)
    flat5 = [t for layer in p5 for t in (layer if isinstance(layer, (tuple, list)) else (layer,))]
    flat6 = [t for layer in p6 for t in (layer if isinstance(layer, (tuple, list)) else (layer,))]
    per_layer = len(flat5) // len(p5)
    # the past axis: the one that grows with the sequence; the batch axis: 0 (BLOOM: B*H rows)
    axes = [[i for i, (a, b) in enumerate(zip(x.shape, y.shape)) if a != b][0] for x, y in zip(flat5, flat6)]
    kv_names = [f"{i // per_layer}.{'key' if i % per_layer == 0 else 'value'}" if per_layer == 2 else f"{i}.kv"
                for i in range(len(flat5))]

    class Wrap(torch.nn.Module):
        def __init__(s, decode):
            super().__init__()
            s.m, s.decode = m, decode

        def forward(s, input_ids, attention_mask, *kv):
            pkv = None
            if s.decode:
                pkv = tuple(tuple(kv[i:i + per_layer]) if per_layer > 1 else kv[i] for i in range(0, len(kv), per_layer))
            out = s.m(input_ids=input_ids, attention_mask=attention_mask, past_key_values=pkv, use_cache=True)
            return (out[0], *[t for layer in out[1] for t in (layer if isinstance(layer, (tuple, list)) else (layer,))])

    rng = np.random.default_rng(1)
    files = []
    for decode in (False, True):
        n = f"{name}_{'decode' if decode else 'prefill'}_op{opset}"
        s = 1 if decode else seq
        ids = torch.from_numpy(rng.integers(0, 1000, (batch, s)))
        total = past + s if decode else s
        mask = np.ones((batch, total), np.int64)
        if decode:
            mask[1, 1:3] = 0  # padding inside the past
        else:
            mask[1, -2:] = 0  # right padding: no query row loses every key
        kv = [torch.from_numpy(rng.standard_normal(t.shape).astype(np.float32)) for t in flat5] if decode else []
        in_names = ["input_ids", "attention_mask"] + [f"past_key_values.{k}" for k in kv_names if decode]
        out_names = ["logits"] + [f"present.{k}" for k in kv_names]
        dyn = {"input_ids": {0: "batch", 1: "seq"} if not decode else {0: "batch"},
               "attention_mask": {0: "batch", 1: "total"}, "logits": {0: "batch", 1: "seq"} if not decode else {0: "batch"}}
        for i, k in enumerate(kv_names):
            # BLOOM keeps batch*heads on axis 0; symbolic either way
            if decode:
                dyn[f"past_key_values.{k}"] = {0: "batch_kv", axes[i]: "past"}
            dyn[f"present.{k}"] = {0: "batch_kv", axes[i]: "total"}
        args = (ids, torch.from_numpy(mask), *kv)
        path = os.path.join(outdir, n + ".onnx")
        with torch.no_grad():
            torch.onnx.export(Wrap(decode).eval(), args, path, opset_version=opset, input_names=in_names,
                              output_names=out_names, dynamic_axes=dyn)
        np.savez(os.path.join(outdir, n + ".feeds.npz"),
                 **{k: a.numpy() for k, a in zip(in_names, args)})
        files.append(n)
    return files


def export(outdir, names, opsets):
    import warnings
    warnings.filterwarnings("ignore")
    specs = configs()
    bad = 0
    for name in names or list(specs):
        for op in opsets:
            try:
                for f in export_one(specs[name], outdir, name, op):
                    print("exported", f, flush=True)
            except Exception as e:  # an exporter's failure is reported, not ours to judge
                bad += 1
                print("export failed", name, op, type(e).__name__, str(e)[:300], flush=True)
    return 2 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("export",))
    ap.add_argument("outdir")
    ap.add_argument("--models", default="")
    ap.add_argument("--opsets", default="14,17")
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    return export(a.outdir, [n for n in a.models.split(",") if n], [int(o) for o in a.opsets.split(",")])


if __name__ == "__main__":
    sys.exit(main())
