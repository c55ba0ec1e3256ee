"""`python -m alma._sweep REQUEST.json`: one alma_benchmark_model call in a fresh interpreter.

benchmark_model runs alma's conversions here rather than in the caller's process because alma's
harness forks a child per conversion, and a fork of a process whose OpenMP thread pool is running
(PyTorch's, after any multi-threaded torch op) hangs in the child at its first parallel region:
oneDNN uses the same libgomp. A fresh interpreter has no such pool, and a crash of the harness
itself cannot take the caller down.

The request: {"model": path, "config": {key: text}, "conversions": [...], "data": null or
{"npy": [paths], "scale": s, "offset": o} or {"dir": path}, "out": path}. The results JSON (with
raw latencies) goes to "out"; a failure before the sweep started goes to "out" + ".error" as
{"status": name, "error": message}. Exit status 0 whenever the sweep ran.
"""
import ctypes
import json
import sys

from . import _lib


def main(argv):
    req = json.load(open(argv[1]))
    out = req["out"]
    L = _lib.lib()
    data = ctypes.c_void_p()
    res = ctypes.c_void_p()
    try:
        cfg = _lib.new_config(req.get("config"))
        d = req.get("data")
        if d and d.get("npy"):
            paths = (ctypes.c_char_p * len(d["npy"]))(*[p.encode() for p in d["npy"]])
            _lib.check(L.alma_data_from_npy(paths, len(d["npy"]), ctypes.byref(data)), "data")
        elif d and d.get("dir"):
            _lib.check(L.alma_data_from_dir(d["dir"].encode(), ctypes.byref(data)), "data")
        convs = [str(c).encode() for c in req["conversions"]]
        arr = (ctypes.c_char_p * max(len(convs), 1))(*convs)
        st = L.alma_benchmark_model(req["model"].encode(), cfg, arr, len(convs), data, ctypes.byref(res))
        if not res.value:
            _lib.check(st, "benchmark")
        text = _lib.results_to_json_text(res, include_raw=True)
        with open(out, "w") as f:
            f.write(text)
        return 0
    except _lib.AlmaError as e:
        with open(out + ".error", "w") as f:
            json.dump({"status": e.status, "error": str(e)}, f)
        return 1
    finally:
        if res.value:
            L.alma_results_free(res)
        if data.value:
            L.alma_data_free(data)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
