"""Modules the tests benchmark. At module level so that the processes alma starts can import them."""
import ctypes

import torch


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 6 * 6, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


class TwoInputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(6, 4)
        self.b = torch.nn.Linear(5, 4)

    def forward(self, x, y):
        return torch.tanh(self.a(x) + self.b(y))


class NotScriptable(torch.nn.Module):
    """torch.jit.script refuses it (a call to a plain Python function it cannot compile); tracing works."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x) * _python_only(x)


def _python_only(x, *args, **kwargs):
    return float(len(args) + len(kwargs) + 1)


class Segfaults(torch.nn.Module):
    """Reads address 0 when called: the process running it dies of SIGSEGV."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        ctypes.string_at(0)
        return self.fc(x)


class NotExportable(torch.nn.Module):
    """torch.onnx.export has no ONNX form for torch.fft.rfft (PyTorch 1.13); PyTorch runs it."""

    def forward(self, x):
        return torch.fft.rfft(x).abs()


class Hangs(torch.nn.Module):
    """Never returns from its first call."""

    def forward(self, x):
        import time
        time.sleep(3600)
        return x


class TokensToTwoOutputs(torch.nn.Module):
    """int64 token ids in, a tuple of two tensors out (logits, pooled)."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 8)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, ids):
        h = self.emb(ids)
        return self.fc(h), h.mean(1)
