"""PyTorch's own ways of running an nn.Module, timed in the harness's way.

Each conversion is one function building a callable from the eval-mode module and an example
batch. Their names all start with TORCH_ so that PyTorch eager (TORCH_EAGER) cannot be taken for
alma's reference runtime EAGER (which runs the exported ONNX graph: EXPORT+EAGER).
"""
import math
import os
import resource
import time
import traceback

import numpy as np

from . import _check, _contention, _stats

# name -> (id, what it does, lossy precision)
CONVERSIONS = {
    "TORCH_EAGER": (100, "PyTorch eager: the nn.Module called as it is (eval mode, inference_mode)", False),
    "TORCH_JIT_TRACE": (101, "torch.jit.trace on the first batch", False),
    "TORCH_JIT_SCRIPT": (102, "torch.jit.script (TorchScript compiled from the Python source)", False),
    "TORCH_JIT_FROZEN": (103, "torch.jit.trace, then torch.jit.freeze (weights and attributes inlined as constants)",
                         False),
    "TORCH_JIT_OPTIMIZED": (104, "torch.jit.trace, torch.jit.freeze, then torch.jit.optimize_for_inference "
                                 "(Conv-BatchNorm folding, oneDNN layouts)", False),
    "TORCH_COMPILE_INDUCTOR_DEFAULT": (110, "torch.compile, Inductor backend, mode default", False),
    "TORCH_COMPILE_INDUCTOR_REDUCE_OVERHEAD": (111, "torch.compile, Inductor, mode reduce-overhead", False),
    "TORCH_COMPILE_INDUCTOR_MAX_AUTOTUNE": (112, "torch.compile, Inductor, mode max-autotune", False),
    "TORCH_EXPORT": (113, "torch.export.export, then the exported program's module", False),
    "TORCH_INT8_DYNAMIC": (120, "torch.ao.quantization.quantize_dynamic: int8 weights of Linear/LSTM/GRU, "
                                "activations quantized per batch", True),
    "TORCH_INT8_STATIC": (121, "FX graph mode post-training static int8 (prepare_fx, calibration on the data's "
                               "batches, convert_fx) for the fbgemm/x86 backend", True),
}
BY_ID = {v[0]: k for k, v in CONVERSIONS.items()}


def availability(name):
    """None when the installed torch has what `name` needs, else the reason it does not."""
    try:
        import torch
    except ImportError as e:
        return f"PyTorch is not installed ({e})"
    v = torch.__version__
    if name.startswith("TORCH_COMPILE_"):
        if not hasattr(torch, "compile"):
            return f"torch {v} has no torch.compile (it came with PyTorch 2.0)"
    if name == "TORCH_EXPORT":
        try:
            import torch.export as te
        except ImportError:
            te = None
        if te is None or not hasattr(te, "export") or not hasattr(getattr(te, "ExportedProgram", None), "module"):
            return f"torch {v} has no torch.export with ExportedProgram.module() (it came with PyTorch 2.1-2.2)"
    if name in ("TORCH_INT8_STATIC", "TORCH_INT8_DYNAMIC"):
        engines = torch.backends.quantized.supported_engines
        if not any(e in engines for e in ("x86", "fbgemm", "onednn")):
            return f"torch {v} has no x86 quantized engine (supported: {', '.join(engines)})"
        if name == "TORCH_INT8_STATIC":
            try:
                import torch.ao.quantization.quantize_fx  # noqa: F401
            except ImportError as e:
                return f"torch {v} has no FX graph mode quantization ({e})"
    return None


def _quant_engine(torch):
    engines = torch.backends.quantized.supported_engines
    for e in ("x86", "fbgemm", "onednn"):
        if e in engines:
            return e
    return engines[0]


def build(name, model, example, calib_batches):
    import torch
    ex = tuple(example)
    if name == "TORCH_EAGER":
        return model
    if name == "TORCH_JIT_TRACE":
        with torch.no_grad():
            return torch.jit.trace(model, ex)
    if name == "TORCH_JIT_SCRIPT":
        return torch.jit.script(model)
    if name in ("TORCH_JIT_FROZEN", "TORCH_JIT_OPTIMIZED"):
        with torch.no_grad():
            t = torch.jit.freeze(torch.jit.trace(model, ex).eval())
            return torch.jit.optimize_for_inference(t) if name == "TORCH_JIT_OPTIMIZED" else t
    if name.startswith("TORCH_COMPILE_INDUCTOR_"):
        mode = {"DEFAULT": "default", "REDUCE_OVERHEAD": "reduce-overhead",
                "MAX_AUTOTUNE": "max-autotune"}[name[len("TORCH_COMPILE_INDUCTOR_"):]]
        return torch.compile(model, backend="inductor", mode=mode)
    if name == "TORCH_EXPORT":
        return torch.export.export(model, ex).module()
    if name == "TORCH_INT8_DYNAMIC":
        torch.backends.quantized.engine = _quant_engine(torch)
        return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear, torch.nn.LSTM, torch.nn.GRU},
                                                      dtype=torch.qint8)
    if name == "TORCH_INT8_STATIC":
        from torch.ao.quantization import get_default_qconfig_mapping
        from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
        eng = _quant_engine(torch)
        torch.backends.quantized.engine = eng
        prepared = prepare_fx(model, get_default_qconfig_mapping(eng), ex)
        with torch.no_grad():
            for b in calib_batches:
                prepared(*b)
        return convert_fx(prepared)
    raise ValueError(f"unknown PyTorch conversion '{name}'")


def flatten(out):
    """Outputs in the order torch.onnx.export gives them: tensors, tuples/lists and dicts flattened."""
    import torch
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in flatten(o)]
    if hasattr(out, "_asdict"):
        return flatten(list(out._asdict().values()))
    raise TypeError(f"model output of type {type(out).__name__} is not a tensor, tuple, list or dict of them")


def batches_from_npy(paths, batch_size, max_batches=None):
    """Batches of batch_size consecutive samples of the stacked arrays, wrapping at the end (as alma's
    npy data source slices them)."""
    arrays = [np.load(p) for p in paths]
    n = arrays[0].shape[0]
    nb = max(1, math.ceil(n / batch_size))
    if max_batches:
        nb = min(nb, max_batches)
    out = []
    for k in range(nb):
        idx = [(k * batch_size + j) % n for j in range(batch_size)]
        out.append([a[idx] for a in arrays])
    return out


def _physical_cores():
    try:
        seen = set()
        phys = core = None
        for line in open("/proc/cpuinfo"):
            if line.startswith("physical id"):
                phys = line.split(":")[1].strip()
            elif line.startswith("core id"):
                core = line.split(":")[1].strip()
            elif not line.strip():
                if core is not None:
                    seen.add((phys, core))
                phys = core = None
        n = len(seen)
    except OSError:
        n = 0
    return min(n or os.cpu_count() or 1, len(os.sched_getaffinity(0)))


def _timer_overhead_ns():
    pc = time.perf_counter_ns
    d = []
    for _ in range(2001):
        a = pc()
        b = pc()
        d.append(b - a)
    d.sort()
    return float(d[len(d) // 2])


def _affinity():
    cpus = sorted(os.sched_getaffinity(0))
    parts, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        parts.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(parts)


def _accuracy(fn, npy, labels_path, bs, dev, sync):
    """Top-1 over every sample of the data once, in batches of bs (the last one shorter): argmax of
    the first output's last axis against the labels, as alma's accuracy pass."""
    import torch
    arrays = [np.load(p) for p in npy]
    labels = np.load(labels_path).reshape(-1)
    n = min(len(labels), arrays[0].shape[0])
    correct, t0 = 0, time.perf_counter()
    with torch.inference_mode():
        for s in range(0, n, bs):
            out = flatten(fn(*[torch.from_numpy(np.ascontiguousarray(a[s:s + bs])).to(dev) for a in arrays]))[0]
            sync()
            pred = out.detach().cpu().numpy().reshape(-1, out.shape[-1]).argmax(axis=1)
            correct += int((pred == labels[s:s + bs]).sum())
    return {"top1": correct / n if n else math.nan, "correct": correct, "samples": n, "top1_drop": None,
            "baseline": None, "seconds": time.perf_counter() - t0}


def run(spec, model=None):
    """Runs one PyTorch conversion; returns its row (a dict in alma's results schema).

    spec: name, model_path (torch.save file, when model is None), npy (stacked sample arrays),
    reference (EAGER's outputs on the first batch, .npy paths, or None), config (alma's keys,
    Python values), device, warnings (to start with)."""
    t_start = time.perf_counter()
    name, cfg = spec["name"], spec["config"]
    cid, _, lossy = CONVERSIONS[name]
    row = {"id": cid, "conversion": name, "status": "error", "device": spec.get("device", "cpu"),
           "batch_size": int(cfg["batch_size"]), "samples": 0, "mode": "latency",
           "warnings": list(spec.get("warnings", [])), "error": None, "error_status": None, "failed_step": None,
           "traceback": None}
    step = "load"
    try:
        import torch
        threads = int(cfg.get("threads", 0)) or _physical_cores()
        torch.set_num_threads(threads)
        row.update(threads=threads, affinity=_affinity(), timer_overhead_ns=_timer_overhead_ns())
        dev = torch.device(row["device"])
        t0 = time.perf_counter()
        if model is None:
            model = torch.load(spec["model_path"], map_location="cpu")
        model = model.eval().to(dev)
        row["load_s"] = time.perf_counter() - t0
        bs = int(cfg["batch_size"])
        batches = [[torch.from_numpy(np.ascontiguousarray(a)).to(dev) for a in b]
                   for b in batches_from_npy(spec["npy"], bs)]
        step = "convert"
        t0 = time.perf_counter()
        ncal = int(cfg.get("calibration_batches", 8)) or 8
        with torch.no_grad():
            fn = build(name, model, batches[0], batches[:ncal])
        row["convert_s"] = time.perf_counter() - t0
        sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
        pc = time.perf_counter_ns
        with torch.inference_mode():
            step = "first"
            t0 = pc()
            first = fn(*batches[0])
            sync()
            row["first_inference_ms"] = (pc() - t0) * 1e-6
            first = [t.detach().cpu().numpy() for t in flatten(first)]
            step = "warmup"
            nb = len(batches)
            k, t0 = 1, time.perf_counter()
            while k - 1 < int(cfg["warmup"]) or time.perf_counter() - t0 < float(cfg["warmup_s"]):
                fn(*batches[k % nb])
                sync()
                k += 1
            row["warmup_batches"], row["warmup_s"] = k - 1, time.perf_counter() - t0
            step = "timed"
            raw = []
            n_samples, min_t = int(cfg["n_samples"]), float(cfg["min_time_s"])
            max_t, target = float(cfg["max_time_s"]), float(cfg.get("target_rel_ci", 0))
            stop = None
            snap = _contention.Snapshot()
            wall0 = time.perf_counter()
            while True:
                b = batches[k % nb]
                t0 = pc()
                fn(*b)
                sync()
                raw.append((pc() - t0) * 1e-6)
                k += 1
                el = time.perf_counter() - wall0
                done = len(raw) * bs >= n_samples and el >= min_t
                if done and target > 0 and len(raw) >= 6:
                    s = _stats.latency_stats(raw)
                    lo, hi = s["median_ci95"]
                    done = math.isfinite(lo) and max(s["p50"] - lo, hi - s["p50"]) <= target * s["p50"]
                if done:
                    stop = (f"reached n_samples ({math.ceil(n_samples / bs)} batches) and min_time_s ({min_t:g} s)"
                            + (f" and the CI target (±{100 * target:g}%)" if target > 0 else ""))
                    break
                if max_t > 0 and el >= max_t:
                    stop = f"max_time_s ({max_t:g} s) reached before n_samples"
                    row["warnings"].append(f"stopped at max_time_s ({max_t:g} s) with {len(raw) * bs} of "
                                           f"{n_samples} samples")
                    break
            wall = time.perf_counter() - wall0
            cont = _contention.measure(snap, threads)
        s, lat_warnings = _stats.latency_stats_and_warnings(raw)
        inf_s = math.fsum(raw) * 1e-3
        row.update(status="ok", samples=len(raw) * bs, inference_s=inf_s,
                   throughput_samples_per_s=len(raw) * bs / inf_s if inf_s > 0 else math.nan,
                   stop_reason=stop, latency_ms=s, raw_ms=raw,
                   clock_agreement=(inf_s + len(raw) * row["timer_overhead_ns"] * 1e-9) / wall if wall > 0 else None,
                   peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
        row["warnings"].extend(lat_warnings)
        row["contention"], row["disturbed"] = cont, cont["disturbed"]
        if cont["disturbed"]:
            row["warnings"].append(f"disturbed: the timed phase got less CPU than it needed: {cont['reason']}")
        step = "check"
        if not int(cfg.get("check_outputs", 1)):
            row["check"] = {"performed": False}
        elif not spec.get("reference"):
            row["check"] = {"performed": False}
            row["warnings"].append("output check skipped: " + spec.get("no_reference", "no EAGER reference outputs"))
        else:
            ref = [np.load(p) for p in spec["reference"]]
            row["check"] = _check.check(ref, first, float(cfg["rtol"]), float(cfg["atol"]), lossy, row["warnings"])
        if spec.get("labels"):
            step = "accuracy"
            row["accuracy"] = _accuracy(fn, spec["npy"], spec["labels"], bs, dev, sync)
        row["runtime_info"] = {"torch": torch.__version__, "conversion": CONVERSIONS[name][1]}
    except BaseException as e:  # noqa: BLE001 - every failure becomes the row's error, with its traceback
        row.update(status="error", error=f"{type(e).__name__}: {e}".strip(), error_status="ERR_RUNTIME",
                   failed_step=step, traceback=traceback.format_exc())
        row["samples"] = 0
    row["total_elapsed_s"] = time.perf_counter() - t_start
    return row
