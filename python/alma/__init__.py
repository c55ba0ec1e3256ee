"""alma for Python: benchmark an ONNX model or a PyTorch nn.Module under alma's conversions and
PyTorch's own, each in its own process, checked against alma's EAGER, in one call.

    from alma import benchmark_model, display_all_results
    results = benchmark_model(model, {"batch_size": 8}, ["TORCH_EAGER", "EXPORT+FOLD+FUSE+DNNL"],
                              data=torch.randn(3, 224, 224))
    display_all_results(results)

docs/python.md has the reference.
"""
from ._lib import AlmaError, LibraryNotFound, library_path, version
from ._torch_conv import CONVERSIONS as TORCH_CONVERSIONS
from .benchmark import BenchmarkError, benchmark_model
from .cli import benchmark_argparser, setup_logging
from .results import Result, Results, display_all_results

__all__ = ["AlmaError", "BenchmarkError", "LibraryNotFound", "Result", "Results", "TORCH_CONVERSIONS",
           "benchmark_argparser", "benchmark_model", "display_all_results", "library_path", "setup_logging",
           "version"]
