"""Exports tiny random-weight BERT and GPT-2 models (transformers 4.30.2, torch 1.13 torch.onnx.export,
opset 14; nothing downloaded) for check_models.py, which optimizes them with ONNX Runtime's transformer
optimizer and runs them through alma. The outputs are committed in tests/ops_bert/models/ (about 300 KB
together) so the test needs no torch; rerun this to regenerate them.

usage: export_bert.py OUTDIR    (.venv-hf's python: transformers + torch; OUTDIR: tests/ops_bert/models)
Writes OUTDIR/bert.onnx (input_ids, attention_mask, token_type_ids -> last_hidden_state, pooler_output)
and OUTDIR/gpt2.onnx (input_ids, attention_mask -> logits), batch and sequence dynamic.
Exit 77 (skip) without torch/transformers."""
import os
import sys

try:
    import torch
    import transformers as T
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)

bert = T.BertModel(T.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=64, max_position_embeddings=16)).eval()
ids = torch.randint(0, 100, (2, 7))
am = torch.ones(2, 7, dtype=torch.int64)
tt = torch.zeros(2, 7, dtype=torch.int64)
dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
       "token_type_ids": {0: "batch", 1: "seq"}}
with torch.no_grad():
    torch.onnx.export(bert, (ids, am, tt), os.path.join(out, "bert.onnx"), opset_version=14,
                      input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["last_hidden_state", "pooler_output"],
                      dynamic_axes={**dyn, "last_hidden_state": {0: "batch", 1: "seq"}, "pooler_output": {0: "batch"}})


class Gpt2(torch.nn.Module):
    """logits only: the optimizer's gpt2 fusion wants the no-past graph without present outputs"""
    def __init__(s, m):
        super().__init__()
        s.m = m

    def forward(s, input_ids, attention_mask):
        return s.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits


gpt2 = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_inner=64, n_positions=16)).eval()
with torch.no_grad():
    torch.onnx.export(Gpt2(gpt2), (ids, am), os.path.join(out, "gpt2.onnx"), opset_version=14,
                      input_names=["input_ids", "attention_mask"], output_names=["logits"],
                      dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                                    "logits": {0: "batch", 1: "seq"}})
print("exported", out)
