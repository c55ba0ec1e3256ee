"""benchmark_model: alma's conversions and PyTorch's own, one call, one result set."""
import json
import math
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

from . import _lib, _torch_conv
from .results import Results

EXPORT = "EXPORT+"


class BenchmarkError(RuntimeError):
    """fail_on_error: a conversion failed. .result is its row (with .traceback), .results the rows so far."""

    def __init__(self, result, results):
        msg = f"{result.conversion}: {result.status}: {result.error}"
        if result.traceback:
            msg += "\n" + result.traceback
        super().__init__(msg)
        self.result, self.results = result, results


def _is_module(model):
    try:
        import torch
    except ImportError:
        return False
    return isinstance(model, torch.nn.Module)


def _parse_conversions(conversions, module):
    """[(kind, name)] with kind "alma" (name: alma's chain or ID text) or "torch"."""
    if conversions is None:
        raise ValueError("conversions: give a list of conversion names or IDs")
    if isinstance(conversions, (str, int)):
        conversions = [conversions]
    out = []
    for c in conversions:
        if isinstance(c, bool) or not isinstance(c, (str, int)):
            raise ValueError(f"conversion {c!r}: give a name (str) or an ID (int)")
        text = str(c).strip()
        up = text.upper()
        torch_name = _torch_conv.BY_ID.get(int(text)) if text.isdigit() else (
            up if up in _torch_conv.CONVERSIONS else None)
        if torch_name:
            if not module:
                raise ValueError(f"conversion {text!r} ({torch_name}) runs a PyTorch nn.Module; the model is an ONNX "
                                 "file: use alma's conversions (EAGER, FOLD+FUSE+DNNL, ...)")
            out.append(("torch", torch_name))
        elif up.startswith(EXPORT):
            if not module:
                raise ValueError(f"conversion {text!r}: EXPORT exports an nn.Module to ONNX; the model is an ONNX "
                                 f"file already: say {text[len(EXPORT):]!r}")
            rest = text[len(EXPORT):]
            if not rest:
                raise ValueError(f"conversion {text!r}: EXPORT+ needs an alma conversion after it "
                                 "(EXPORT+EAGER, EXPORT+FOLD+FUSE+DNNL, EXPORT+12)")
            out.append(("alma", rest))
        elif module:
            hint = "TORCH_EAGER" if up in ("EAGER", "0") else "TORCH_JIT_TRACE" if up == "JIT_TRACE" else \
                "TORCH_JIT_SCRIPT" if up == "TORCH_SCRIPT" else None
            raise ValueError(
                f"conversion {text!r} is ambiguous for an nn.Module: alma's conversions run the exported ONNX graph "
                f"(say EXPORT+{text}); PyTorch's own are named TORCH_* (TORCH_EAGER, TORCH_JIT_TRACE, ...)"
                + (f"; PyTorch eager is {hint}" if hint else ""))
        else:
            out.append(("alma", text))
    return out


def _config(config):
    """alma's config from a dict (keys are alma_config fields), validated by alma; (text dict, typed dict)."""
    cfg = dict(config or {})
    text = {}
    for k, v in cfg.items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        text[k] = str(v)
    buf = _lib.new_config(text)
    typed = {}
    for k in _lib.config_keys():
        s = _lib.config_get(buf, k)
        if s in ("true", "false"):
            typed[k] = s == "true"
        else:
            try:
                typed[k] = int(s)
            except ValueError:
                try:
                    typed[k] = float(s)
                except ValueError:
                    typed[k] = s
    return text, typed


def _to_numpy(x):
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _batch_inputs(item):
    """A loader's item -> (input arrays, input names or None, labels or None): a tensor, a dict of
    name -> tensor, or a tuple/list whose first element holds the inputs and whose second, when
    there is one, the labels (a classification DataLoader's (images, labels))."""
    if isinstance(item, dict):
        return list(item.values()), list(item.keys()), None
    if isinstance(item, (tuple, list)):
        if not item:
            raise ValueError("data_loader yielded an empty batch")
        first = item[0]
        labels = item[1] if len(item) >= 2 else None
        if isinstance(first, (tuple, list)):
            return list(first), None, labels
        if isinstance(first, dict):
            return list(first.values()), list(first.keys()), labels
        return [first], None, labels
    return [item], None, None


def _materialize(workdir, data_loader, data, batch_size, n_samples, seed, max_samples, whole_pass=False):
    """Stacked sample arrays (one .npy per input) in workdir, and the loader's labels (labels.npy)
    when every batch had integer class ids, one per sample; (paths, names, description, batch_size,
    labels path or None)."""
    arrays, names, labels_path = None, None, None
    if data_loader is not None:
        chunks, have, loader_bs, labels = None, 0, None, []
        limit = max_samples or (math.inf if whole_pass else max(n_samples, batch_size))
        for item in data_loader:
            ins, nm, lab = _batch_inputs(item)
            ins = [_to_numpy(a) for a in ins]
            if loader_bs is None:
                loader_bs, names = (ins[0].shape[0] if ins[0].ndim else 1), nm
                chunks = [[] for _ in ins]
            if len(ins) != len(chunks):
                raise ValueError(f"data_loader: a batch with {len(ins)} inputs after batches with {len(chunks)}")
            for c, a in zip(chunks, ins):
                c.append(a)
            n_here = ins[0].shape[0] if ins[0].ndim else 1
            lab = None if lab is None else _to_numpy(lab)
            if labels is not None and lab is not None and lab.shape == (n_here,) and \
                    np.issubdtype(lab.dtype, np.integer):
                labels.append(lab.astype(np.int64))
            else:
                labels = None
            have += n_here
            if have >= limit:
                break
        if not chunks:
            raise ValueError("data_loader yielded no batches")
        arrays = [np.concatenate(c, axis=0) for c in chunks]
        desc = f"loader: {arrays[0].shape[0]} samples from {type(data_loader).__name__}"
        batch_size = loader_bs
        if labels:
            labels_path = os.path.join(workdir, "labels.npy")
            np.save(labels_path, np.concatenate(labels))
    else:
        specs = data if isinstance(data, (tuple, list)) and data and not isinstance(data[0], int) else [data]
        rng = np.random.default_rng(seed)
        n = batch_size * 8
        arrays = []
        for s in specs:
            if isinstance(s, (tuple, list)) or isinstance(s, int):
                shape, dt = tuple([s] if isinstance(s, int) else s), np.dtype(np.float32)
            else:
                a = _to_numpy(s)
                shape, dt = a.shape, a.dtype
            per = int(np.prod(shape)) * dt.itemsize
            n = max(batch_size, min(n, (64 << 20) // max(per, 1) // batch_size * batch_size))
            if np.issubdtype(dt, np.floating):
                arrays.append(rng.standard_normal((n,) + shape).astype(dt))
            elif dt == np.bool_:
                arrays.append(rng.integers(0, 2, (n,) + shape).astype(dt))
            else:
                arrays.append(rng.integers(0, 10, (n,) + shape).astype(dt))
        arrays = [a[:n] for a in arrays]
        desc = "random: " + ", ".join(f"{'x'.join(map(str, a.shape[1:])) or 'scalar'} {a.dtype}" for a in arrays) + \
            f" (seed {seed}, {n} samples)"
    paths = []
    for i, a in enumerate(arrays):
        p = os.path.join(workdir, f"input_{i}.npy")
        np.save(p, np.ascontiguousarray(a))
        paths.append(p)
    return paths, names, desc, batch_size, labels_path


def _lossy(conversion):
    if conversion in _torch_conv.CONVERSIONS:
        return _torch_conv.CONVERSIONS[conversion][2]
    return any(t in conversion.split("+") for t in ("INT8_STATIC", "INT8_DYNAMIC", "BF16", "FP16", "QLINEAR",
                                                      "OPENVINO_BF16"))


def _accuracy_baselines(rows):
    """top1_drop against the first conversion at the same batch size without a lossy step that
    measured accuracy (alma's rule, applied across alma's and PyTorch's rows together)."""
    base = {}
    for r in rows:
        a = r.get("accuracy")
        if a and a.get("samples") and not _lossy(r["conversion"]):
            base.setdefault(r.get("batch_size"), (r["conversion"], a["top1"]))
    for r in rows:
        a = r.get("accuracy")
        if a and a.get("samples"):
            b = base.get(r.get("batch_size"))
            a["baseline"] = b[0] if b else ""
            a["top1_drop"] = b[1] - a["top1"] if b else None


def _export_job(spec, model=None):
    """Exports the module to ONNX (dynamic batch axis) and computes alma EAGER's outputs on the first
    batch (the reference PyTorch's conversions are checked against)."""
    out = {"ok": False}
    step = "export"
    try:
        import torch
        if model is None:
            model = torch.load(spec["model_path"], map_location="cpu")
        model = model.eval()
        batch = _torch_conv.batches_from_npy(spec["npy"], spec["batch_size"], max_batches=1)[0]
        ex = tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in batch)
        names = spec["input_names"]
        with torch.no_grad():
            outs = _torch_conv.flatten(model(*ex))
        onames = [f"output_{i}" for i in range(len(outs))]
        axes = {n: {0: "batch"} for n in names + onames}
        kw = {} if spec.get("opset") is None else {"opset_version": int(spec["opset"])}
        t0 = time.perf_counter()
        with torch.no_grad():
            torch.onnx.export(model, ex, spec["onnx"], input_names=names, output_names=onames, dynamic_axes=axes,
                              do_constant_folding=False, **kw)
        out["export_s"] = time.perf_counter() - t0
        out["ok"] = True
        if spec.get("reference_dir"):
            step = "reference"
            m = _lib.Model(spec["onnx"])
            ref = m.run("EAGER", batch)
            m.close()
            paths = []
            for i, r in enumerate(ref):
                p = os.path.join(spec["reference_dir"], f"ref_{i}.npy")
                np.save(p, r)
                paths.append(p)
            out["reference"] = paths
    except BaseException as e:  # noqa: BLE001
        out.update(error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc(), failed_step=step)
    return out


def _child(kind, spec, out_path, err_path):
    """Entry of a spawned process: one job, its result as JSON in out_path, stderr in err_path."""
    import faulthandler
    fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    faulthandler.enable(sys.stderr)
    res = _export_job(spec) if kind == "export" else _torch_conv.run(spec)
    with open(out_path + ".tmp", "w") as f:
        json.dump(res, f)
    os.replace(out_path + ".tmp", out_path)


def _remove(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _tail(path, n=4000):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _in_child(kind, spec, workdir, tag, timeout_s, verbose):
    """Runs a job in a spawned process; (result or None, failure text, traceback)."""
    ctx = multiprocessing.get_context("spawn")
    out_path, err_path = os.path.join(workdir, f"{tag}.json"), os.path.join(workdir, f"{tag}.stderr")
    _remove(out_path)  # a kept directory may hold an earlier run's: never read it as this one's
    p = ctx.Process(target=_child, args=(kind, spec, out_path, err_path), daemon=True)
    p.start()
    p.join(timeout_s if timeout_s and timeout_s > 0 else None)
    timed_out = p.is_alive()
    if timed_out:
        p.kill()
        p.join()
    tail = _tail(err_path)
    if verbose >= 2 and tail:
        sys.stderr.write(tail)
    if timed_out:
        return None, ("ERR_TIMEOUT", f"timed out after {timeout_s:g} s (timeout_s)"), tail
    if os.path.exists(out_path):
        with open(out_path) as f:
            return json.load(f), None, tail
    code = p.exitcode
    if code is not None and code < 0:
        try:
            sig = signal.Signals(-code).name
        except ValueError:
            sig = f"signal {-code}"
        return None, ("ERR_CRASH", f"the conversion's process crashed ({sig})"), tail
    return None, ("ERR_CRASH", f"the conversion's process exited with status {code} without a result"), tail


def _say(verbose, text):
    if verbose >= 1:
        print(f"alma: {text}", file=sys.stderr, flush=True)


def _failed_row(conv, cid, status, message, step, tb, batch_size, device):
    return {"id": cid, "conversion": conv, "status": "error", "device": device, "batch_size": batch_size,
            "samples": 0, "mode": "latency", "warnings": [], "error": message, "error_status": status,
            "failed_step": step, "traceback": tb}


def _sweep(model_path, text_cfg, convs, npy, workdir, tag):
    """alma's conversions through alma_benchmark_model in a fresh interpreter (see _sweep.py)."""
    out = os.path.join(workdir, f"{tag}.json")
    _remove(out)
    _remove(out + ".error")
    req = {"model": model_path, "config": text_cfg, "conversions": convs, "data": {"npy": npy} if npy else None,
           "out": out}
    with open(os.path.join(workdir, f"{tag}.request.json"), "w") as f:
        json.dump(req, f)
    env = dict(os.environ)
    env["ALMA_LIBRARY"] = _lib.library_path()
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # alma's ORT runtime embeds the Python it runs in when there is one: the interpreter named by
    # ALMA_ORT_PYTHON (a venv with onnxruntime) runs the sweep when set, else this one.
    py = os.environ.get("ALMA_ORT_PYTHON") or sys.executable
    if not os.access(py, os.X_OK):
        py = sys.executable
    p = subprocess.run([py, "-m", "alma._sweep", os.path.join(workdir, f"{tag}.request.json")], env=env)
    if os.path.exists(out):
        with open(out) as f:
            return json.load(f), None
    if os.path.exists(out + ".error"):
        with open(out + ".error") as f:
            e = json.load(f)
        raise _lib.AlmaError(e["status"], e["error"].split(": ", 1)[-1])
    return None, f"alma's sweep process ended with status {p.returncode} without results"


def benchmark_model(model, config=None, conversions=None, data_loader=None, data=None, *, keep_dir=None,
                    onnx_opset=None, max_samples=None):
    """Benchmarks `model` under each conversion; returns a Results.

    model: an ONNX file path, or a torch.nn.Module. config: a dict of alma's config keys (batch_size,
    n_samples, device, fail_on_error, multiprocessing, threads, ... : docs/python.md). conversions:
    names or IDs, mixed: for an ONNX file alma's (EAGER, FOLD+FUSE+DNNL, 12); for an nn.Module
    EXPORT+<alma conversion> (the module exported to ONNX) and PyTorch's own, TORCH_* (TORCH_EAGER,
    TORCH_JIT_FROZEN, ...). data_loader: any iterable of batches (tensors, (inputs, labels) tuples,
    dicts); data: a tensor or shape without the batch dimension (random batches of that shape), or a
    tuple of them for several inputs. keep_dir: a directory to keep the exported model, the data and
    every process's log in (default: a temporary one, removed). max_samples: samples taken from
    data_loader (default max(n_samples, batch_size)).
    """
    t_begin = time.perf_counter()
    module = _is_module(model)
    if not module and not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"model: an ONNX file path or a torch.nn.Module, not {type(model).__name__}")
    if not module and not os.path.exists(model):
        raise FileNotFoundError(f"model: no file '{model}'")
    items = _parse_conversions(conversions, module)
    config = dict(config or {})
    labels_wanted = config.pop("labels", None)
    if labels_wanted is not None and labels_wanted is not True:
        if isinstance(labels_wanted, (str, os.PathLike)):
            labels_wanted = str(labels_wanted)
        else:
            raise ValueError("labels: True (the data loader's labels) or a .npy/IDX file of class ids")
    text_cfg, cfg = _config(config)
    if cfg["batch_sizes"] and any(k == "torch" for k, _ in items):
        raise ValueError("batch_sizes: a batch-size sweep runs alma's conversions only; benchmark PyTorch's "
                         "(TORCH_*) once per batch_size instead")
    if module and data_loader is None and data is None:
        raise ValueError("an nn.Module needs data: data_loader= (an iterable of batches) or data= (a tensor or "
                         "shape without the batch dimension)")
    workdir = keep_dir or tempfile.mkdtemp(prefix="alma-")
    os.makedirs(workdir, exist_ok=True)
    try:
        return _run(model, module, items, text_cfg, cfg, data_loader, data, workdir, onnx_opset, max_samples,
                    t_begin, labels_wanted)
    finally:
        if not keep_dir:
            shutil.rmtree(workdir, ignore_errors=True)


def _run(model, module, items, text_cfg, cfg, data_loader, data, workdir, onnx_opset, max_samples, t_begin,
         labels_wanted):
    verbose, mp = int(cfg["verbose"]), bool(cfg["multiprocessing"])
    npy, names, desc, labels = None, None, None, None
    bs = int(cfg["batch_size"])
    if data_loader is not None or data is not None:
        npy, names, desc, loader_bs, labels = _materialize(workdir, data_loader, data, bs, int(cfg["n_samples"]),
                                                           int(cfg["seed"]), max_samples, labels_wanted is True)
        if labels_wanted is True:
            if not labels:
                raise ValueError("labels: True takes the data loader's labels, and it gave none (it must yield "
                                 "(inputs, labels) with labels integer class ids, one per sample)")
        elif labels_wanted is not None:
            labels = labels_wanted
        else:
            labels = None
        if labels:
            text_cfg["labels"] = labels
            cfg["labels"] = labels
        if loader_bs != bs:
            if "batch_size" in text_cfg and verbose:
                print(f"alma: batch_size {bs} replaced by the data loader's batch size {loader_bs}", file=sys.stderr)
            bs = loader_bs
            cfg["batch_size"] = bs
            text_cfg["batch_size"] = str(bs)
    device, torch_dev_warn = cfg["device"], []
    rows_by_index, base = {}, None
    onnx_path, export_fail, reference, no_ref = (model if not module else None), None, None, None
    model_pt = None
    need_torch_children = module and mp
    if module:
        input_names = names if names and len(names) == len(npy) else [f"input_{i}" for i in range(len(npy))]
        onnx_path = os.path.join(workdir, type(model).__name__ + ".onnx")
        need_ref = any(k == "torch" for k, _ in items) and cfg["check_outputs"]
        if need_torch_children:
            import torch
            model_pt = os.path.join(workdir, "model.pt")
            try:
                torch.save(model, model_pt)
            except Exception as e:  # noqa: BLE001
                raise ValueError(f"the model cannot be saved for an isolated process ({type(e).__name__}: {e}); "
                                 "define its class at module level, or set multiprocessing False") from e
        spec = {"model_path": model_pt, "npy": npy, "batch_size": bs, "input_names": input_names, "onnx": onnx_path,
                "opset": onnx_opset, "reference_dir": workdir if need_ref else None}
        if any(k == "alma" for k, _ in items) or need_ref:
            _say(verbose, f"exporting {type(model).__name__} to ONNX (torch.onnx.export)")
            if mp:
                res, fail, tail = _in_child("export", spec, workdir, "export", cfg["timeout_s"], verbose)
                if res is None:
                    res = {"ok": False, "error": fail[1], "traceback": tail, "failed_step": "export"}
            else:
                res = _export_job(spec, model)
            if not res["ok"]:
                if res.get("failed_step") == "reference":
                    no_ref = f"alma EAGER failed on the exported model: {res['error']}"
                else:
                    export_fail = res
                    no_ref = f"torch.onnx.export failed: {res['error']}"
            reference = res.get("reference")
    stopped = False
    i = 0
    while i < len(items) and not stopped:
        kind, name = items[i]
        if kind == "alma":
            j = i
            while j < len(items) and items[j][0] == "alma":
                j += 1
            group = [n for _, n in items[i:j]]
            if export_fail:
                for k in range(i, j):
                    rows_by_index[k] = _failed_row(EXPORT + items[k][1], -1, "ERR_RUNTIME", export_fail["error"],
                                                   "export", export_fail.get("traceback"), bs, device)
                stopped = bool(cfg["fail_on_error"])
            else:
                _say(verbose, f"[{i + 1}-{j}/{len(items)}] " + ", ".join(
                    (EXPORT if module else "") + n for n in group) + ": alma's harness")
                sweep, err = _sweep(onnx_path, text_cfg, group, npy, workdir, f"sweep{i}")
                if sweep is None:
                    for k in range(i, j):
                        rows_by_index[k] = _failed_row(items[k][1], -1, "ERR_CRASH", err, "sweep", "", bs, device)
                    stopped = bool(cfg["fail_on_error"])
                else:
                    if base is None:
                        base = sweep
                    got = sweep["results"]
                    for r in got:
                        if module:
                            r["conversion"] = EXPORT + r["conversion"]
                    if cfg["batch_sizes"]:
                        # a batch-size sweep: every conversion at each size, in alma's order
                        rows_by_index[i] = got
                        stopped = bool(cfg["fail_on_error"]) and any(r["status"] != "ok" for r in got)
                    else:
                        for k, r in zip(range(i, j), got):
                            rows_by_index[k] = r
                        stopped = len(got) < len(group) or (bool(cfg["fail_on_error"]) and
                                                            any(r["status"] != "ok" for r in got))
            i = j
            continue
        # a PyTorch conversion
        cid = _torch_conv.CONVERSIONS[name][0]
        why = _torch_conv.availability(name)
        tdev, warns = "cpu", []
        if device == "cuda":
            import torch
            if torch.cuda.is_available():
                tdev = "cuda"
            elif cfg["allow_device_override"]:
                warns.append("ran on cpu although device is cuda (allow_device_override): torch.cuda.is_available() "
                             "is False")
            else:
                why = why or "device cuda: torch.cuda.is_available() is False, and allow_device_override is off"
        if why:
            row = {"id": cid, "conversion": name, "status": "unavailable", "device": tdev, "batch_size": bs,
                   "samples": 0, "mode": "latency", "warnings": [], "error": why, "error_status": "ERR_UNAVAILABLE",
                   "failed_step": "convert", "traceback": None}
        else:
            spec = {"name": name, "model_path": model_pt, "npy": npy, "reference": reference, "config": cfg,
                    "labels": cfg.get("labels") or None,
                    "device": tdev, "warnings": warns,
                    "no_reference": no_ref or "no EAGER reference outputs"}
            _say(verbose, f"[{i + 1}/{len(items)}] {name}: PyTorch, {'own process' if mp else 'this process'}")
            if mp:
                row, fail, tail = _in_child("torch", spec, workdir, f"torch{i}", cfg["timeout_s"], verbose)
                if row is None:
                    row = _failed_row(name, cid, fail[0], fail[1], "run", tail, bs, tdev)
            else:
                row = _torch_conv.run(spec, model)
        rows_by_index[i] = row
        stopped = bool(cfg["fail_on_error"]) and row["status"] != "ok"
        i += 1
    rows = []
    for k in sorted(rows_by_index):
        v = rows_by_index[k]
        rows.extend(v if isinstance(v, list) else [v])
    _accuracy_baselines(rows)
    doc = _document(base, rows, cfg, model, module, onnx_path, desc, time.perf_counter() - t_begin)
    results = Results(doc)
    if stopped and cfg["fail_on_error"]:
        bad = next((r for r in results if r.status != "ok"), None)
        if bad is not None:
            raise BenchmarkError(bad, results)
    return results


def _document(base, rows, cfg, model, module, onnx_path, desc, total_s):
    if base is None:
        base = {"alma_version": _lib.version(), "alma_build": _lib.lib().alma_build_id().decode(),
                "schema_version": 2, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "system": _lib.system_info(), "model": {"path": None, "hash": None, "inputs": [], "outputs": []},
                "data": None, "config": cfg, "unavailable": None}
    doc = dict(base)
    doc["results"] = rows
    doc["config"] = cfg
    doc["data"] = desc if desc else base.get("data")
    doc["total_s"] = total_s
    if module:
        doc["model"] = dict(base.get("model") or {})
        doc["model"]["path"] = None
        doc["model"]["module"] = f"{type(model).__module__}.{type(model).__qualname__}"
    try:
        import torch
        doc["torch_version"] = torch.__version__
    except ImportError:
        pass
    return doc
