"""The ready argparser and logging set-up of a benchmarking script."""
import argparse
import logging
import os
import warnings


def _conversion_list(text):
    return [int(c) if c.strip().isdigit() else c.strip() for c in text.split(",") if c.strip()]


def benchmark_argparser(description="Benchmark a model with alma", default_conversions="TORCH_EAGER,EXPORT+EAGER"):
    """--conversions (names or IDs, comma-separated), --batch-size, --n-samples, --model-path,
    --data-dir, --device, --keep-going, --no-multiprocessing. args.conversions is a list."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--conversions", type=_conversion_list, default=_conversion_list(default_conversions),
                   help="comma-separated conversion names or IDs (alma's: EXPORT+FOLD+FUSE+DNNL; PyTorch's: "
                        "TORCH_EAGER, TORCH_JIT_FROZEN, ...)")
    p.add_argument("--batch-size", type=int, default=32, help="samples per batch (default 32)")
    p.add_argument("--n-samples", type=int, default=1024, help="samples to time at least (default 1024)")
    p.add_argument("--model-path", default=None, help="a model file (ONNX, or what the script loads)")
    p.add_argument("--data-dir", default=None, help="where the data set is")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where conversions run (default cpu)")
    p.add_argument("--keep-going", action="store_true", help="fail_on_error off: a failed conversion is a row")
    p.add_argument("--no-multiprocessing", action="store_true",
                   help="PyTorch's conversions in this process (for a debugger); alma's still in children")
    return p


def config_from_args(args):
    """The benchmark_model config of benchmark_argparser's arguments."""
    return {"batch_size": args.batch_size, "n_samples": args.n_samples, "device": args.device,
            "fail_on_error": not args.keep_going, "multiprocessing": not args.no_multiprocessing}


def setup_logging(level=logging.INFO, quiet_libraries=True):
    """Logging to stderr with times; quiet_libraries: PyTorch's tracer/export and torchvision warnings
    and alma's own info lines (ALMA_LOG=warn in the processes alma starts) kept out of the way."""
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if quiet_libraries:
        for name in ("torch", "torchvision", "PIL", "matplotlib"):
            logging.getLogger(name).setLevel(logging.WARNING)
        for cat in ("torch.jit", "torch.onnx"):
            warnings.filterwarnings("ignore", module=cat)
        warnings.filterwarnings("ignore", message=".*TracerWarning.*")
        os.environ.setdefault("ALMA_LOG", "warn")
    return logging.getLogger("alma")
