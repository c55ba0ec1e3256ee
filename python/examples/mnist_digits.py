"""alma's MNIST example, in Python: train a small CNN on scikit-learn's bundled handwritten digits,
then benchmark it through a DataLoader, PyTorch's conversions beside alma's, with top-1 accuracy
per conversion on the held-out digits.

    python3 mnist_digits.py [--conversions 100,TORCH_JIT_SCRIPT,EXPORT+12,...] [--batch-size 32]
                            [--n-samples 1024] [--keep-going] [--no-multiprocessing] [--json out.json]

Conversions by ID and by name, mixed. Then the same model with a forward() that torch.jit.script
cannot compile, twice: fail-fast (fail_on_error, the default) raises BenchmarkError with the
conversion's Python traceback; keep-going (--keep-going) makes it an error row and runs the rest.
--no-multiprocessing runs PyTorch's conversions in this process, where a debugger can step in.
Needs torch and scikit-learn (Debian: python3-torch, python3-sklearn).
"""
import sys

import numpy as np
import torch

from alma import BenchmarkError, benchmark_argparser, benchmark_model, display_all_results, setup_logging
from alma.cli import config_from_args


class DigitsCNN(torch.nn.Module):
    """1x8x8 -> conv3x3(16) -> relu -> conv3x3(32) -> relu -> pool -> fc(10)."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(32 * 4 * 4, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv2(torch.relu(self.conv1(x)))))
        return self.fc(x.flatten(1))


class DigitsCNNUnscriptable(DigitsCNN):
    """The same network, with a forward() calling a Python function TorchScript cannot compile."""

    def forward(self, x):
        return super().forward(x) * _scale(x)


def _scale(x, *args, **kwargs):
    return 1.0


def digits():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0)[:, None]  # [N,1,8,8] in [0, 1]
    y = d.target.astype(np.int64)
    return train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)


def train(model, x, y, epochs=15):
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    for _ in range(epochs):
        perm = torch.randperm(len(ys))
        for i in range(0, len(ys), 64):
            b = perm[i:i + 64]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xs[b]), ys[b]).backward()
            opt.step()
    return model.eval()


def main():
    p = benchmark_argparser("alma's MNIST example in Python (scikit-learn's digits)",
                            default_conversions="100,TORCH_JIT_SCRIPT,TORCH_INT8_STATIC,EXPORT+12,"
                                                "EXPORT+FOLD+INT8_STATIC+DNNL")
    p.add_argument("--json", default=None, help="save the results as JSON")
    args = p.parse_args()
    log = setup_logging()
    torch.set_num_threads(1)  # training: repeatable
    x_tr, x_te, y_tr, y_te = digits()
    model = train(DigitsCNN(), x_tr, y_tr)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.from_numpy(x_te), torch.from_numpy(y_te)),
                                         batch_size=args.batch_size)
    config = config_from_args(args)
    config["labels"] = True  # top-1 against the loader's labels, over the whole held-out set
    log.info("benchmarking %s on %d held-out digits: %s", type(model).__name__, len(y_te), args.conversions)
    results = benchmark_model(model, config, args.conversions, data_loader=loader)
    display_all_results(results)
    if args.json:
        results.save_json(args.json)

    # A conversion that raises: fail-fast stops there with its traceback, keep-going records it.
    bad = DigitsCNNUnscriptable()
    bad.load_state_dict(model.state_dict())
    bad.eval()
    convs = ["TORCH_EAGER", "TORCH_JIT_SCRIPT", "TORCH_JIT_TRACE"]
    if not args.keep_going:
        try:
            benchmark_model(bad, dict(config, fail_on_error=True), convs, data_loader=loader)
        except BenchmarkError as e:
            print(f"\nfail-fast: {e.result.conversion} failed in step {e.result.failed_step}; "
                  f"{len(e.results)} rows ran. Its traceback:\n{e.result.traceback}")
    else:
        res = benchmark_model(bad, dict(config, fail_on_error=False), convs, data_loader=loader)
        display_all_results(res, summary_only=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
