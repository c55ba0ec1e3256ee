"""Writes the tanh-GELU forms PyTorch 1.13 exports (run with a python that has torch 1.13 and onnx,
e.g. .venv-test/bin/python tests/ops_gelu/export_torch_gelu.py tests/ops_gelu/models): torch's own
F.gelu(approximate='tanh') at opsets 13 and 17 (its newest) (before Gelu-20: Mul, Mul, Mul, Add, Mul, Tanh, Add,
Mul, Mul), and transformers' NewGELU (GPT-2, GPT-J, CodeGen), FastGELU and BLOOM's gelu as modules
written out here (transformers 4.30's code), each with a Linear before it so that FUSE can fold the
GELU into the Linear's kernel; <name>.onnx with <name>.x.npy (input) and <name>.torch.npy (PyTorch's
output) for check_gelu_tanh.py."""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F


class TorchTanh(torch.nn.Module):
    def forward(self, x):
        return F.gelu(x, approximate="tanh")


class NewGELU(torch.nn.Module):  # transformers.activations.NewGELUActivation
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class FastGELU(torch.nn.Module):  # transformers.activations.FastGELUActivation
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))


class BloomGELU(torch.nn.Module):  # transformers.models.bloom.modeling_bloom.bloom_gelu_forward
    def forward(self, x):
        return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


class Linear(torch.nn.Module):
    def __init__(self, act):
        super().__init__()
        self.fc = torch.nn.Linear(16, 24)
        self.act = act

    def forward(self, x):
        return self.act(self.fc(x))


def main(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    cases = [("torch_gelu_tanh_op13", TorchTanh(), 13), ("torch_gelu_tanh_op17", TorchTanh(), 17),
             ("newgelu_op17", NewGELU(), 17), ("fastgelu_op14", FastGELU(), 14), ("bloom_gelu_op14", BloomGELU(), 14),
             ("linear_newgelu_op17", Linear(NewGELU()), 17), ("linear_torch_gelu_tanh_op14", Linear(TorchTanh()), 14)]
    for name, mod, opset in cases:
        n = 16 if name.startswith("linear") else 40
        x = torch.cat([torch.linspace(-12, 12, 4 * n).reshape(4, n), 3 * torch.randn(3, n)]).float()
        with torch.no_grad():
            y = mod.eval()(x)
        torch.onnx.export(mod, x, os.path.join(out, name + ".onnx"), opset_version=opset, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
        np.save(os.path.join(out, name + ".x.npy"), x.numpy())
        np.save(os.path.join(out, name + ".torch.npy"), y.numpy())
        print("wrote", name)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
