"""ctypes binding over alma's public C API (include/alma/alma.h, include/alma/bench.h).

Only what the Python package needs is declared. Structs the caller allocates (alma_config,
alma_session_options) are treated as opaque buffers far larger than the C structs and touched only
through alma's own functions (alma_config_init/set/get), so a field added to the C struct does
not break the binding. alma_tensor is mirrored field by field: the binding builds input tensors.
"""
import ctypes
import ctypes.util
import os
from pathlib import Path


class AlmaError(RuntimeError):
    """A failed alma call: .status is the status name ("ERR_SHAPE", ...), the message alma's own."""

    def __init__(self, status, message):
        super().__init__(f"{status}: {message}" if message else status)
        self.status = status


class LibraryNotFound(AlmaError):
    pass


MAX_RANK = 8


class Tensor(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("rank", ctypes.c_int), ("dims", ctypes.c_int64 * MAX_RANK),
                ("data", ctypes.c_void_p), ("nbytes", ctypes.c_size_t), ("owns_data", ctypes.c_int)]


class SystemInfo(ctypes.Structure):
    # Every member is written by alma_system_info_get; the tail keeps a longer C struct from
    # writing past the buffer (the fields read here are the leading ones, which do not move).
    _fields_ = [("cpu_model", ctypes.c_char * 128), ("logical_cores", ctypes.c_int),
                ("physical_cores", ctypes.c_int), ("sockets", ctypes.c_int), ("isa", ctypes.c_char * 512),
                ("memory_bytes", ctypes.c_int64), ("os", ctypes.c_char * 128), ("kernel", ctypes.c_char * 192),
                ("machine", ctypes.c_char * 32), ("governor", ctypes.c_char * 32),
                ("alma_version", ctypes.c_char * 32), ("protobuf_c_version", ctypes.c_char * 32),
                ("cjson_version", ctypes.c_char * 32), ("openssl_version", ctypes.c_char * 64),
                ("libc_version", ctypes.c_char * 32), ("compiler", ctypes.c_char * 96),
                ("build_flags", ctypes.c_char * 256), ("runtimes", ctypes.c_char * 256),
                ("load_average", ctypes.c_double * 3), ("_tail", ctypes.c_char * 4096)]


# alma_dtype numbers (ONNX TensorProto.DataType) of the numpy kinds the package moves.
DTYPES = {"float32": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6, "int64": 7, "bool": 9,
          "float16": 10, "float64": 11, "uint32": 12, "uint64": 13}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}

_OPAQUE_BYTES = 64 * 1024  # alma_config is about 3.3 KiB


def _candidates():
    env = os.environ.get("ALMA_LIBRARY")
    if env:
        return [Path(env)]
    here = Path(__file__).resolve().parent
    out = [here / "_native" / "libalma.so",   # bundled by `pip install ./python`
           here.parent.parent / "build" / "libalma.so"]  # running from the source tree
    found = ctypes.util.find_library("alma")
    if found:
        out.append(Path(found))
    out.append(Path.home() / ".local" / "lib" / "libalma.so")  # cmake --install build --prefix ~/.local
    return out


_lib = None


def lib():
    """The loaded libalma (loaded on first use)."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for p in _candidates():
        tried.append(str(p))
        if p.is_absolute() and not p.exists():
            continue
        try:
            handle = ctypes.CDLL(str(p))
        except OSError as e:
            tried[-1] += f" ({e})"
            continue
        _declare(handle)
        _lib = handle
        return _lib
    raise LibraryNotFound("ERR_NOT_FOUND", "libalma.so not found; tried " + ", ".join(tried) +
                          ". Build it (cmake --build build) and set ALMA_LIBRARY to its path, or reinstall "
                          "the package after building so that pip bundles it")


def library_path():
    lib()
    return _lib._name


def _declare(L):
    c = ctypes
    vp, cp, i, i64, d = c.c_void_p, c.c_char_p, c.c_int, c.c_int64, c.c_double
    sigs = {
        "alma_version": (cp, []), "alma_build_id": (cp, []),
        "alma_status_name": (cp, [i]), "alma_last_error": (cp, []),
        "alma_config_init": (None, [vp]), "alma_config_set": (i, [vp, cp, cp]),
        "alma_config_get": (i, [vp, cp, cp, c.c_size_t]), "alma_config_key": (cp, [i]),
        "alma_config_key_doc": (cp, [cp]),
        "alma_data_random": (i, [c.POINTER(vp)]), "alma_data_from_npy": (i, [c.POINTER(cp), i, c.POINTER(vp)]),
        "alma_data_from_dir": (i, [cp, c.POINTER(vp)]), "alma_data_free": (None, [vp]),
        "alma_benchmark_model": (i, [cp, vp, c.POINTER(cp), i, vp, c.POINTER(vp)]),
        "alma_results_to_json": (i, [vp, i, c.POINTER(vp)]), "alma_results_from_json": (i, [cp, c.POINTER(vp)]),
        "alma_results_free": (None, [vp]), "alma_results_print": (i, [vp, vp, i]),
        "alma_results_print_summary": (i, [vp, vp]), "alma_results_save_csv": (i, [vp, cp]),
        "alma_results_save_json": (i, [vp, cp, i]),
        "alma_system_info_get": (i, [vp]),
        "alma_model_load": (i, [cp, c.POINTER(vp)]), "alma_model_free": (None, [vp]),
        "alma_model_num_inputs": (i, [vp]), "alma_model_num_outputs": (i, [vp]),
        "alma_model_input_name": (cp, [vp, i]), "alma_model_output_name": (cp, [vp, i]),
        "alma_model_input_dtype": (i, [vp, i]), "alma_model_input_rank": (i, [vp, i]),
        "alma_model_input_dim": (i64, [vp, i, i]),
        "alma_session_options_init": (None, [vp]),
        "alma_session_create": (i, [vp, cp, vp, c.POINTER(vp)]), "alma_session_free": (None, [vp]),
        "alma_session_run": (i, [vp, c.POINTER(Tensor), i, c.POINTER(Tensor), i]),
        "alma_tensor_free_data": (None, [c.POINTER(Tensor)]),
        "alma_latency_stats_of": (i, [c.POINTER(d), i64, vp]),
        "alma_outputs_check": (i, [c.POINTER(Tensor), i, c.POINTER(Tensor), i, d, d, i, vp, cp, c.c_size_t]),
        "alma_latency_warnings_of": (c.c_size_t, [c.POINTER(d), i64, vp, vp, c.c_size_t]),
        "alma_contention_begin": (vp, []), "alma_contention_end": (i, [vp, i, cp, vp]),
        "alma_contention_clear": (None, [vp]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(L, name)
        f.restype, f.argtypes = res, args
    libc = c.CDLL(None)
    libc.free.argtypes, libc.free.restype = [vp], None
    libc.fdopen.argtypes, libc.fdopen.restype = [i, cp], vp
    libc.fflush.argtypes, libc.fflush.restype = [vp], i
    libc.fclose.argtypes, libc.fclose.restype = [vp], i
    L._libc = libc


def check(status, what=""):
    if status != 0:
        L = lib()
        name = L.alma_status_name(status).decode()
        msg = L.alma_last_error().decode(errors="replace")
        raise AlmaError(name, f"{what}: {msg}" if what else msg)


def version():
    return lib().alma_version().decode()


def new_config(values=None):
    """An initialised alma_config buffer with `values` (key -> text) set through alma_config_set."""
    L = lib()
    buf = ctypes.create_string_buffer(_OPAQUE_BYTES)
    L.alma_config_init(buf)
    for k, v in (values or {}).items():
        check(L.alma_config_set(buf, str(k).encode(), str(v).encode()), f"config key '{k}'")
    return buf


def config_get(buf, key):
    out = ctypes.create_string_buffer(1024)
    check(lib().alma_config_get(buf, key.encode(), out, len(out)), f"config key '{key}'")
    return out.value.decode()


def config_keys():
    L, out, i = lib(), [], 0
    while True:
        k = L.alma_config_key(i)
        if not k:
            return out
        out.append(k.decode())
        i += 1


def config_key_doc(key):
    d = lib().alma_config_key_doc(key.encode())
    return d.decode() if d else None


def system_info():
    """alma_system_info_get as the dict the results JSON's "system" holds."""
    s = SystemInfo()
    check(lib().alma_system_info_get(ctypes.byref(s)), "system info")
    t = lambda b: b.decode(errors="replace")  # noqa: E731
    return {"cpu_model": t(s.cpu_model), "logical_cores": s.logical_cores, "physical_cores": s.physical_cores,
            "sockets": s.sockets, "isa": [x for x in t(s.isa).split() if x != "none"],
            "memory_bytes": s.memory_bytes if s.memory_bytes >= 0 else None, "os": t(s.os),
            "kernel": t(s.kernel), "machine": t(s.machine), "governor": t(s.governor),
            "load_average": [x if x >= 0 else None for x in s.load_average],
            "libraries": {"alma": t(s.alma_version), "protobuf-c": t(s.protobuf_c_version),
                          "cjson": t(s.cjson_version), "openssl": t(s.openssl_version), "libc": t(s.libc_version)},
            "compiler": t(s.compiler), "build_flags": t(s.build_flags), "runtimes": t(s.runtimes).split()}


def results_to_json_text(handle, include_raw=True):
    L = lib()
    out = ctypes.c_void_p()
    check(L.alma_results_to_json(handle, 1 if include_raw else 0, ctypes.byref(out)), "results to JSON")
    try:
        return ctypes.string_at(out.value).decode()
    finally:
        L._libc.free(out)


def with_results(json_text, fn):
    """Calls fn(handle) on alma results read back from JSON text (alma_results_from_json)."""
    L = lib()
    h = ctypes.c_void_p()
    check(L.alma_results_from_json(json_text.encode(), ctypes.byref(h)), "results from JSON")
    try:
        return fn(h)
    finally:
        L.alma_results_free(h)


def print_results(json_text, file=None, summary_only=False, include_traceback=True):
    """alma's own text report (the CLI's) of results JSON, written to `file` (default sys.stdout):
    the library writes into a temporary file, whose text then goes through Python's stream, so
    redirected and captured streams (pytest, notebooks) get it too."""
    import sys
    import tempfile
    L = lib()
    out = file if file is not None else sys.stdout

    def run(h):
        with tempfile.TemporaryFile() as tmp:
            f = L._libc.fdopen(os.dup(tmp.fileno()), b"w")
            if not f:
                raise AlmaError("ERR_IO", "cannot open a temporary file for the report")
            try:
                st = L.alma_results_print_summary(h, f) if summary_only else L.alma_results_print(
                    h, f, 1 if include_traceback else 0)
            finally:
                L._libc.fclose(f)
            check(st, "printing results")
            tmp.seek(0)
            out.write(tmp.read().decode(errors="replace"))
        out.flush()
    with_results(json_text, run)


def tensors(arrays, what):
    """alma_tensors viewing numpy arrays: (the contiguous arrays to keep alive, the Tensor array)."""
    import numpy as np
    keep = [np.ascontiguousarray(a) for a in arrays]
    ts = (Tensor * max(len(keep), 1))()
    for t, a in zip(ts, keep):
        if a.dtype.name not in DTYPES:
            raise AlmaError("ERR_TYPE", f"{what} dtype {a.dtype} is not one alma takes from numpy")
        if a.ndim > MAX_RANK:
            raise AlmaError("ERR_SHAPE", f"{what} has rank {a.ndim}, more than alma's {MAX_RANK}")
        t.dtype, t.rank = DTYPES[a.dtype.name], a.ndim
        for k, n in enumerate(a.shape):
            t.dims[k] = n
        t.data, t.nbytes, t.owns_data = a.ctypes.data, a.nbytes, 0
    return keep, ts


class OutputCheck(ctypes.Structure):
    # alma_output_check (include/alma/bench.h), field by field
    _fields_ = [("performed", ctypes.c_int), ("passed", ctypes.c_int), ("max_abs_err", ctypes.c_double),
                ("max_rel_err", ctypes.c_double), ("argmax_agreement", ctypes.c_double),
                ("cosine_similarity", ctypes.c_double)]


class Model:
    """An ONNX model loaded by alma (alma_model_load): its inputs, and EAGER sessions on it."""

    def __init__(self, path):
        L = lib()
        self._h = ctypes.c_void_p()
        check(L.alma_model_load(str(path).encode(), ctypes.byref(self._h)), f"loading '{path}'")

    def inputs(self):
        L, out = lib(), []
        for i in range(L.alma_model_num_inputs(self._h)):
            rank = L.alma_model_input_rank(self._h, i)
            dims = [L.alma_model_input_dim(self._h, i, a) for a in range(max(rank, 0))]
            out.append((L.alma_model_input_name(self._h, i).decode(),
                        DTYPE_NAMES.get(L.alma_model_input_dtype(self._h, i), "other"), dims))
        return out

    def run(self, conversion, arrays):
        """One inference of `conversion` (e.g. "EAGER") on numpy arrays (model input order)."""
        import numpy as np
        L = lib()
        opts = ctypes.create_string_buffer(4096)
        L.alma_session_options_init(opts)
        s = ctypes.c_void_p()
        check(L.alma_session_create(self._h, conversion.encode(), opts, ctypes.byref(s)), conversion)
        try:
            keep, ins = tensors(arrays, "input")
            n_out = L.alma_model_num_outputs(self._h)
            outs = (Tensor * max(n_out, 1))()
            check(L.alma_session_run(s, ins, len(keep), outs, n_out), f"running {conversion}")
            res = []
            for t in outs[:n_out]:
                name = DTYPE_NAMES.get(t.dtype)
                if name is None:
                    L.alma_tensor_free_data(ctypes.byref(t))
                    raise AlmaError("ERR_TYPE", f"output dtype {t.dtype} has no numpy counterpart here")
                shape = tuple(t.dims[k] for k in range(t.rank))
                buf = ctypes.string_at(t.data, t.nbytes) if t.nbytes else b""
                res.append(np.frombuffer(buf, dtype=name).reshape(shape).copy())
                L.alma_tensor_free_data(ctypes.byref(t))
            return res
        finally:
            L.alma_session_free(s)

    def close(self):
        if self._h:
            lib().alma_model_free(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
