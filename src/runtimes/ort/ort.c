/* ORT: ONNX Runtime as a runtime. PyPI's onnxruntime wheel has no C headers, so the runtime hosts
 * it through CPython's C API: the interpreter starts in the process that first needs it (a
 * conversion's child under the harness), imports onnxruntime and numpy from the configured Python
 * environment, and each plan is one InferenceSession over the whole graph, serialized to ONNX.
 * Inputs reach ONNX Runtime as numpy arrays over alma's own buffers (no copy); outputs are copied
 * into alma tensors. The interpreter's lock is taken per call (PyGILState), so plans may run on
 * several threads (throughput mode). Settings: the graph optimization level is the runtime
 * (ORT, ORT_EXTENDED, ORT_BASIC); ALMA_ORT_PYTHON picks the Python environment, the ort.spinning
 * option the thread pool's spinning (docs/runtimes/ort.md). */
#ifdef ALMA_HAVE_ORT
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#endif

#include "runtimes/placement.h"
#include "runtimes/runtime.h"

#ifdef ALMA_HAVE_ORT
#include <cjson/cJSON.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "onnx/onnx.h"
#include "onnx/onnx.pb-c.h"
#include "runtimes/ort/ort.h"

/* Under LeakSanitizer the interpreter's own allocations are left out of the leak report: the
 * interpreter is never finalized (finalizing with onnxruntime's threads loaded is not safe), so
 * its modules, interned objects and caches are alive at exit by design. Only allocations made
 * while this file holds the interpreter's lock are left out (__lsan_disable is per thread). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ALMA_ORT_LSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(ALMA_ORT_LSAN)
#define ALMA_ORT_LSAN 1
#endif
#ifdef ALMA_ORT_LSAN
#include <sanitizer/lsan_interface.h>
#define LSAN_OFF() __lsan_disable()
#define LSAN_ON() __lsan_enable()
#else
#define LSAN_OFF() ((void)0)
#define LSAN_ON() ((void)0)
#endif

static PyGILState_STATE py_enter(void) {
  LSAN_OFF();
  return PyGILState_Ensure();
}

static void py_leave(PyGILState_STATE g) {
  PyGILState_Release(g);
  LSAN_ON();
}

/* ---- the interpreter ------------------------------------------------------------------------- */
static struct {
  int state;                  /* 0 not tried, 1 ready, -1 failed (reason) */
  pid_t pid;                  /* the process that started it */
  char reason[2048];
  char python[512];           /* the environment's interpreter */
  char prefix[512];           /* its sys.prefix */
  char version[64];           /* onnxruntime.__version__ */
  char numpy_version[64];
  char py_version[32];
  int started;                /* this runtime started the interpreter (else the host program did) */
  PyObject *helpers;          /* the helper module's dict (below) */
  PyThreadState *main_ts;
} py;

/* Python-side helpers, run once in the interpreter: building sessions and zero-copy array views.
 * The per-call path (ort_call) uses only `view`. */
static const char helper_src[] =
    "import time, numpy as np, onnxruntime as ort\n"
    "ort.set_default_logger_severity(3)\n"
    "LEVELS = {'all': ort.GraphOptimizationLevel.ORT_ENABLE_ALL,\n"
    "          'extended': ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,\n"
    "          'basic': ort.GraphOptimizationLevel.ORT_ENABLE_BASIC}\n"
    "def make(model, threads, level, spinning, prof_prefix):\n"
    "    so = ort.SessionOptions()\n"
    "    so.intra_op_num_threads = threads\n"
    "    so.inter_op_num_threads = 1\n"
    "    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL\n"
    "    so.graph_optimization_level = LEVELS[level]\n"
    "    so.log_severity_level = 3\n"
    "    if spinning == 'off':\n"
    "        so.add_session_config_entry('session.intra_op.allow_spinning', '0')\n"
    "    elif spinning == 'run':\n"
    "        so.add_session_config_entry('session.force_spinning_stop', '1')\n"
    "    if prof_prefix:\n"
    "        so.enable_profiling = True\n"
    "        so.profile_file_prefix = prof_prefix\n"
    "    return ort.InferenceSession(model, sess_options=so, providers=['CPUExecutionProvider'])\n"
    "def view(mem, dtype, shape):\n"
    "    return np.frombuffer(mem, dtype=dtype).reshape(shape)\n"
    "def python_loop(sess, names, feeds, n):\n"
    "    t = []\n"
    "    for _ in range(n):\n"
    "        t0 = time.perf_counter_ns(); sess.run(names, feeds); t.append(time.perf_counter_ns() - t0)\n"
    "    t.sort()\n"
    "    return t[len(t) // 2] / 1e3\n";

/* The Python exception as text ("ExceptionType: message"), cleared; into buf. */
static const char *py_error_text(char *buf, size_t n) {
  PyObject *type = NULL, *val = NULL, *tb = NULL;
  PyErr_Fetch(&type, &val, &tb);
  PyErr_NormalizeException(&type, &val, &tb);
  buf[0] = 0;
  const char *tn = type ? ((PyTypeObject *)type)->tp_name : "error";
  const char *dot = strrchr(tn, '.');
  PyObject *s = val ? PyObject_Str(val) : NULL;
  const char *msg = s ? PyUnicode_AsUTF8(s) : NULL;
  snprintf(buf, n, "%s: %s", dot ? dot + 1 : tn, msg ? msg : "(no message)");
  PyErr_Clear();
  Py_XDECREF(s);
  Py_XDECREF(type);
  Py_XDECREF(val);
  Py_XDECREF(tb);
  /* ONNX Runtime's messages are long one-liners; drop a trailing newline */
  size_t len = strlen(buf);
  while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' ')) buf[--len] = 0;
  return buf;
}

/* ONNX Runtime's exception types name what went wrong: NotImplemented (an op, type or attribute it
 * lacks) is UNSUPPORTED; the rest (InvalidGraph, InvalidArgument, Fail, RuntimeException...) are
 * runtime errors. */
static alma_status py_fail(const char *what) {
  char buf[2048];
  py_error_text(buf, sizeof buf);
  alma_status st = !strncmp(buf, "NotImplemented:", 15) ? ALMA_ERR_UNSUPPORTED : ALMA_ERR_RUNTIME;
  return alma__errorf(st, "ONNX Runtime %s: %s: %s", py.version[0] ? py.version : "", what, buf);
}

static int attr_str(PyObject *o, const char *attr, char *out, size_t n) {
  PyObject *v = PyObject_GetAttrString(o, attr);
  PyObject *s = v ? PyObject_Str(v) : NULL;
  const char *c = s ? PyUnicode_AsUTF8(s) : NULL;
  if (c) snprintf(out, n, "%s", c);
  Py_XDECREF(s);
  Py_XDECREF(v);
  if (!c) PyErr_Clear();
  return c != NULL;
}

static void resolve_python(void) {
  const char *env = getenv("ALMA_ORT_PYTHON");
  const char *p = env && env[0] ? env : ALMA_ORT_DEFAULT_PYTHON;
  if (!p[0]) p = "/usr/bin/python3";
  struct stat sb;
  if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) snprintf(py.python, sizeof py.python, "%s/bin/python", p);
  else snprintf(py.python, sizeof py.python, "%s", p);
}

static int start_python(void) {
  resolve_python();
  if (access(py.python, X_OK) != 0) {
    snprintf(py.reason, sizeof py.reason,
             "no Python interpreter at %s (%s): point ALMA_ORT_PYTHON at a venv's bin/python with onnxruntime "
             "(scripts/test.sh makes .venv-test)",
             py.python, strerror(errno));
    return -1;
  }
  if (!Py_IsInitialized()) {
    /* Isolated: no PYTHON* variables, no user site; no signal handlers (the harness owns signals),
     * C stdio left alone. program_name makes sys.prefix the venv's (pyvenv.cfg beside it). */
    PyConfig c;
    PyConfig_InitIsolatedConfig(&c);
    c.install_signal_handlers = 0;
    PyStatus s = PyConfig_SetBytesString(&c, &c.program_name, py.python);
    if (!PyStatus_Exception(s)) s = Py_InitializeFromConfig(&c);
    PyConfig_Clear(&c);
    if (PyStatus_Exception(s)) {
      snprintf(py.reason, sizeof py.reason, "starting the Python %s interpreter (libpython) for %s failed: %s",
               ALMA_ORT_LIBPYTHON, py.python, s.err_msg ? s.err_msg : "unknown error");
      return -1;
    }
    py.started = 1;
  }
  /* else the host program runs Python already: its lock is taken like any other thread's */
  PyGILState_STATE g = py_enter();
  int ok = 0;
  PyObject *sys = PyImport_ImportModule("sys");
  if (sys) {
    attr_str(sys, "prefix", py.prefix, sizeof py.prefix);
    PyObject *vi = PyObject_GetAttrString(sys, "version_info");
    if (vi) {
      long maj = PyLong_AsLong(PyTuple_GetItem(vi, 0)), min = PyLong_AsLong(PyTuple_GetItem(vi, 1));
      snprintf(py.py_version, sizeof py.py_version, "%ld.%ld", maj, min);
    }
    Py_XDECREF(vi);
    Py_DECREF(sys);
  }
  PyErr_Clear();
  PyObject *mod = PyImport_ImportModule("onnxruntime");
  if (!mod) {
    char e[512];
    py_error_text(e, sizeof e);
    snprintf(py.reason, sizeof py.reason,
             "cannot import onnxruntime in the Python environment %s (interpreter %s, embedded Python %s): %s; "
             "install it there (pip install onnxruntime) or set ALMA_ORT_PYTHON",
             py.prefix, py.python, py.py_version, e);
  } else {
    attr_str(mod, "__version__", py.version, sizeof py.version);
    int maj = 0, min = 0;
    if (sscanf(py.version, "%d.%d", &maj, &min) != 2 || (maj == 1 && min < 14)) {
      snprintf(py.reason, sizeof py.reason, "onnxruntime %s in %s is too old (1.14 or newer needed)", py.version,
               py.prefix);
    } else {
      PyObject *np = PyImport_ImportModule("numpy");
      if (np) attr_str(np, "__version__", py.numpy_version, sizeof py.numpy_version);
      Py_XDECREF(np);
      PyObject *hm = np ? PyModule_New("alma_ort") : NULL;
      if (hm) {
        PyObject *d = PyModule_GetDict(hm);
        PyDict_SetItemString(d, "__builtins__", PyEval_GetBuiltins());
        PyObject *r = PyRun_String(helper_src, Py_file_input, d, d);
        if (r) {
          Py_DECREF(r);
          py.helpers = d;
          Py_INCREF(d);
          ok = 1;
        }
        Py_DECREF(hm);
      }
      if (!ok) {
        char e[512];
        py_error_text(e, sizeof e);
        snprintf(py.reason, sizeof py.reason, "onnxruntime %s in %s: setting up the binding failed: %s", py.version,
                 py.prefix, e);
      }
    }
    Py_DECREF(mod);
  }
  py_leave(g);
  if (py.started) py.main_ts = PyEval_SaveThread(); /* let other threads in */
  return ok ? 1 : -1;
}

/* Ready in this process, or why not. A process forked from one that had started the interpreter
 * re-initializes its threading state first, as os.fork does in the child. */
static alma_status ort_ready(void) {
  if (py.state == 1 && py.pid != getpid()) {
    if (py.main_ts) {
      PyEval_RestoreThread(py.main_ts);
      PyOS_AfterFork_Child();
      py.main_ts = PyEval_SaveThread();
    }
    py.pid = getpid();
  }
  if (py.state == 0) {
    py.pid = getpid();
    LSAN_OFF();
    py.state = start_python();
    LSAN_ON();
  }
  if (py.state != 1) return alma__errorf(ALMA_ERR_UNAVAILABLE, "%s", py.reason);
  return ALMA_OK;
}

static alma_status ort_init(void) { return ort_ready(); }

int alma__ort_version(char *buf, size_t n) {
  if (ort_ready() != ALMA_OK) {
    snprintf(buf, n, "%s", py.reason);
    alma__error_clear();
    return -1;
  }
  snprintf(buf, n, "onnxruntime %s, numpy %s, Python %s in %s (interpreter %s)", py.version, py.numpy_version,
           py.py_version, py.prefix, py.python);
  return 0;
}

/* ---- dtypes ---------------------------------------------------------------------------------- */
static const char *np_dtype(alma_dtype t) {
  switch (t) {
    case ALMA_DTYPE_FLOAT32: return "float32";
    case ALMA_DTYPE_FLOAT64: return "float64";
    case ALMA_DTYPE_FLOAT16: return "float16";
    case ALMA_DTYPE_INT8: return "int8";
    case ALMA_DTYPE_INT16: return "int16";
    case ALMA_DTYPE_INT32: return "int32";
    case ALMA_DTYPE_INT64: return "int64";
    case ALMA_DTYPE_UINT8: return "uint8";
    case ALMA_DTYPE_UINT16: return "uint16";
    case ALMA_DTYPE_UINT32: return "uint32";
    case ALMA_DTYPE_UINT64: return "uint64";
    case ALMA_DTYPE_BOOL: return "bool";
    default: return NULL;
  }
}

/* An output array's element type from its buffer format (struct module codes). */
static alma_dtype from_format(const char *f, Py_ssize_t itemsize) {
  if (!f) f = "B";
  if (*f == '<' || *f == '=' || *f == '@') f++;
  switch (*f) {
    case 'f': return ALMA_DTYPE_FLOAT32;
    case 'd': return ALMA_DTYPE_FLOAT64;
    case 'e': return ALMA_DTYPE_FLOAT16;
    case '?': return ALMA_DTYPE_BOOL;
    case 'b': return ALMA_DTYPE_INT8;
    case 'B': return ALMA_DTYPE_UINT8;
    case 'h': return ALMA_DTYPE_INT16;
    case 'H': return ALMA_DTYPE_UINT16;
    case 'i': case 'l': case 'q':
      return itemsize == 8 ? ALMA_DTYPE_INT64 : itemsize == 4 ? ALMA_DTYPE_INT32 : ALMA_DTYPE_UNDEFINED;
    case 'I': case 'L': case 'Q':
      return itemsize == 8 ? ALMA_DTYPE_UINT64 : itemsize == 4 ? ALMA_DTYPE_UINT32 : ALMA_DTYPE_UNDEFINED;
    default: return ALMA_DTYPE_UNDEFINED;
  }
}

/* ---- a plan: one InferenceSession ------------------------------------------------------------ */
typedef struct {
  const void *data;           /* what the cached view covers */
  alma_dtype dtype;
  int rank;
  int64_t dims[ALMA_MAX_RANK];
  PyObject *arr;              /* numpy view over data, or NULL */
} in_cache;

typedef struct ort_plan {
  const alma_graph *g;
  const char *level;          /* "all" | "extended" | "basic" */
  int threads;
  char spinning[8];           /* ort.spinning: "run" | "on" | "off" */
  uint8_t *model;             /* the serialized graph */
  size_t model_n;
  char **node_names;          /* as written: live node k's name, with its node index */
  int *node_index;
  int n_named;
  PyObject *sess, *run;       /* the session and its bound run method */
  PyObject *prof_sess, *prof_run; /* profiling (profile_start..profile_read) */
  int prof_warm;              /* the profiling session's first run (untimed) is still to come */
  char prof_dir[PATH_MAX];
  PyObject *out_names, *feeds, **in_names;
  in_cache *cache;
  int n_in, n_out;
} ort_plan;

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *f) {
  (void)sb, (void)flag, (void)f;
  return remove(p);
}

static void plan_free(void *pv) {
  ort_plan *p = pv;
  if (!p) return;
  if (Py_IsInitialized()) {
    PyGILState_STATE g = py_enter();
    Py_XDECREF(p->run);
    Py_XDECREF(p->sess);
    Py_XDECREF(p->prof_run);
    Py_XDECREF(p->prof_sess);
    Py_XDECREF(p->out_names);
    Py_XDECREF(p->feeds);
    for (int i = 0; p->in_names && i < p->n_in; i++) Py_XDECREF(p->in_names[i]);
    for (int i = 0; p->cache && i < p->n_in; i++) Py_XDECREF(p->cache[i].arr);
    py_leave(g);
  }
  if (p->prof_dir[0]) nftw(p->prof_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
  for (int i = 0; p->node_names && i < p->n_named; i++) free(p->node_names[i]);
  free(p->node_names);
  free(p->node_index);
  free(p->in_names);
  free(p->cache);
  free(p->model);
  free(p);
}

/* Node names as the serializer wrote them (made unique, empty ones named): the k-th live node of
 * the graph is the k-th node of the file. ONNX Runtime's profile names its nodes by these. */
static alma_status read_node_names(ort_plan *p) {
  Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, p->model_n, p->model);
  if (!mp || !mp->graph) {
    if (mp) onnx__model_proto__free_unpacked(mp, NULL);
    return alma__errorf(ALMA_ERR_INTERNAL, "ORT: re-reading the serialized graph failed");
  }
  size_t nn = mp->graph->n_node;
  p->node_names = calloc(nn + 1, sizeof *p->node_names);
  p->node_index = calloc(nn + 1, sizeof *p->node_index);
  alma_status st = p->node_names && p->node_index ? ALMA_OK : alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  int k = 0;
  for (int i = 0; st == ALMA_OK && i < p->g->n_nodes && (size_t)k < nn; i++) {
    if (p->g->nodes[i].dead) continue;
    if (!(p->node_names[k] = alma__strdup(mp->graph->node[k]->name ? mp->graph->node[k]->name : "")))
      st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    p->node_index[k++] = i;
  }
  p->n_named = k;
  onnx__model_proto__free_unpacked(mp, NULL);
  return st;
}

/* The run method the binding calls: the session's pybind object (`sess._sess.run`, what the Python
 * wrapper's run calls after checking the feed's names on every call, about a microsecond a call
 * here) where the installed onnxruntime has one, else the wrapper's. Both take (output names,
 * feeds, run options); ort_call passes every input by name, so the check has nothing to find. */
static PyObject *session_run(PyObject *sess) {
  PyObject *inner = PyObject_GetAttrString(sess, "_sess");
  PyObject *run = inner ? PyObject_GetAttrString(inner, "run") : NULL;
  Py_XDECREF(inner);
  if (run && PyCallable_Check(run)) return run;
  Py_XDECREF(run);
  PyErr_Clear();
  return PyObject_GetAttrString(sess, "run");
}

static PyObject *make_session(const ort_plan *p, const char *prof_prefix) {
  PyObject *fn = PyDict_GetItemString(py.helpers, "make");
  PyObject *bytes = PyBytes_FromStringAndSize((const char *)p->model, (Py_ssize_t)p->model_n);
  PyObject *r = fn && bytes ? PyObject_CallFunction(fn, "Oiss" "s", bytes, p->threads, p->level, p->spinning,
                                                    prof_prefix ? prof_prefix : "")
                            : NULL;
  Py_XDECREF(bytes);
  return r;
}

extern const alma_runtime alma__runtime_ort;

/* --runtime-option ort.NAME=VALUE (docs/runtimes/ort.md, Options), for ORT and its levels. */
static const alma__rt_option ort_options[] = {
    {"spinning", ALMA__OPT_CHOICE, "run", "run|on|off", 0, 0,
     "the intra-op threads' active wait: run (spin within a run, stop between runs), on (spin between runs "
     "too, ONNX Runtime's default), off (never spin: for loaded machines)"},
};

static const char *ort_spin_advice(const alma_runtime_opts *o, int threads) {
  if (threads <= 1 || alma__rt_opt_is(&alma__runtime_ort, o, "spinning", "off")) return NULL;
  return "ONNX Runtime's intra-op threads spin inside a run: --runtime-option ort.spinning=off "
         "(docs/runtimes/ort.md), or --threads 1";
}

static alma_status compile_level(const alma_graph *g, const alma_runtime_opts *opts, void **plan_out,
                                  const char *level) {
  *plan_out = NULL;
  ALMA_TRY(ort_ready());
  for (int i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i].dead && g->nodes[i].domain && !strcmp(g->nodes[i].domain, "alma"))
      return alma__errorf(ALMA_ERR_UNSUPPORTED,
                          "node '%s' is the alma-domain op %s, which ONNX Runtime cannot run (a FUSE step before ORT)",
                          g->nodes[i].name, g->nodes[i].op_type);
  for (int i = 0; i < g->n_inputs + g->n_outputs; i++) {
    const alma_value *v = &g->values[i < g->n_inputs ? g->inputs[i] : g->outputs[i - g->n_inputs]];
    if (v->dtype != ALMA_DTYPE_UNDEFINED && !np_dtype(v->dtype))
      return alma__errorf(ALMA_ERR_UNSUPPORTED,
                          "graph %s '%s' is %s, which the ORT binding does not pass (numpy has no such type, or "
                          "the binding takes numeric and bool tensors only)",
                          i < g->n_inputs ? "input" : "output", v->name, alma_dtype_name(v->dtype));
  }
  ort_plan *p = calloc(1, sizeof *p);
  if (!p) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  p->g = g;
  p->level = level;
  p->threads = opts->threads > 0 ? opts->threads : 1;
  alma__rt_opt(&alma__runtime_ort, opts, "spinning", p->spinning, sizeof p->spinning);
  p->n_in = g->n_inputs;
  p->n_out = g->n_outputs;
  alma_status st = alma__onnx_serialize(g, NULL, &p->model, &p->model_n);
  if (st == ALMA_OK) st = read_node_names(p);
  if (st != ALMA_OK) {
    plan_free(p);
    return st;
  }
  p->in_names = calloc((size_t)p->n_in + 1, sizeof *p->in_names);
  p->cache = calloc((size_t)p->n_in + 1, sizeof *p->cache);
  if (!p->in_names || !p->cache) {
    plan_free(p);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  PyGILState_STATE gs = py_enter();
  p->sess = make_session(p, NULL);
  if (!p->sess) st = py_fail("creating the session");
  if (st == ALMA_OK && !(p->run = session_run(p->sess))) st = py_fail("session.run");
  if (st == ALMA_OK) {
    p->out_names = PyList_New(p->n_out);
    p->feeds = PyDict_New();
    for (int i = 0; p->out_names && i < p->n_out; i++)
      PyList_SET_ITEM(p->out_names, i, PyUnicode_FromString(g->values[g->outputs[i]].name));
    for (int i = 0; i < p->n_in; i++) p->in_names[i] = PyUnicode_FromString(g->values[g->inputs[i]].name);
    if (!p->out_names || !p->feeds || PyErr_Occurred()) st = py_fail("building the call's arguments");
  }
  py_leave(gs);
  if (st != ALMA_OK) {
    plan_free(p);
    return st;
  }
  *plan_out = p;
  return ALMA_OK;
}

static alma_status compile_all(const alma_graph *g, const alma_runtime_opts *o, void **p) { return compile_level(g, o, p, "all"); }
static alma_status compile_ext(const alma_graph *g, const alma_runtime_opts *o, void **p) { return compile_level(g, o, p, "extended"); }
static alma_status compile_basic(const alma_graph *g, const alma_runtime_opts *o, void **p) { return compile_level(g, o, p, "basic"); }

/* A numpy array over t's memory (read-only, no copy): reused while the caller passes the same
 * buffer with the same type and shape (the harness cycles through prepared batches). GIL held. */
static PyObject *input_view(in_cache *c, const alma_tensor *t) {
  if (c->arr && c->data == t->data && c->dtype == t->dtype && c->rank == t->rank &&
      !memcmp(c->dims, t->dims, sizeof(int64_t) * (size_t)t->rank))
    return c->arr;
  Py_CLEAR(c->arr);
  const char *dt = np_dtype(t->dtype);
  if (!dt) {
    alma__errorf(ALMA_ERR_UNSUPPORTED, "ORT: an input is %s, which the binding does not pass", alma_dtype_name(t->dtype));
    return NULL;
  }
  static char empty[1];
  size_t nb = alma_tensor_numel(t) * alma_dtype_size(t->dtype);
  PyObject *mem = PyMemoryView_FromMemory(nb && t->data ? (char *)t->data : empty, (Py_ssize_t)nb, PyBUF_READ);
  PyObject *shape = PyTuple_New(t->rank);
  for (int k = 0; shape && k < t->rank; k++) PyTuple_SET_ITEM(shape, k, PyLong_FromLongLong(t->dims[k]));
  PyObject *fn = PyDict_GetItemString(py.helpers, "view");
  PyObject *arr = mem && shape && fn ? PyObject_CallFunction(fn, "OsO", mem, dt, shape) : NULL;
  Py_XDECREF(mem);
  Py_XDECREF(shape);
  if (!arr) {
    py_fail("wrapping an input");
    return NULL;
  }
  c->arr = arr;
  c->data = t->data;
  c->dtype = t->dtype;
  c->rank = t->rank;
  memcpy(c->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
  return arr;
}

/* One call: feeds from inputs, session.run, outputs copied. GIL held. */
static alma_status ort_call(ort_plan *p, PyObject *run, const alma_tensor *inputs, int n_inputs, alma_tensor *outputs,
                            int n_outputs) {
  if (n_inputs != p->n_in || n_outputs != p->n_out)
    return alma__errorf(ALMA_ERR_INVALID_ARG, "ORT: %d inputs and %d outputs given, the graph has %d and %d", n_inputs,
                        n_outputs, p->n_in, p->n_out);
  for (int i = 0; i < n_inputs; i++) {
    PyObject *a = input_view(&p->cache[i], &inputs[i]);
    if (!a) return alma__error_prefix(ALMA_ERR_RUNTIME, "input '%s': ", p->g->values[p->g->inputs[i]].name);
    if (PyDict_SetItem(p->feeds, p->in_names[i], a) != 0) return py_fail("feeds");
  }
  PyObject *res = PyObject_CallFunctionObjArgs(run, p->out_names, p->feeds, Py_None, NULL);
  if (!res) return py_fail("run");
  alma_status st = ALMA_OK;
  if (!PyList_Check(res) || PyList_GET_SIZE(res) != n_outputs)
    st = alma__errorf(ALMA_ERR_RUNTIME, "ORT: run returned %zd results, expected %d",
                      PyList_Check(res) ? PyList_GET_SIZE(res) : (Py_ssize_t)-1, n_outputs);
  int done = 0;
  for (int i = 0; st == ALMA_OK && i < n_outputs; i++) {
    Py_buffer b;
    const char *name = p->g->values[p->g->outputs[i]].name;
    if (PyObject_GetBuffer(PyList_GET_ITEM(res, i), &b, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) != 0) {
      PyErr_Clear();
      st = alma__errorf(ALMA_ERR_UNSUPPORTED, "ORT: output '%s' is not a numeric array (strings, sequences and maps "
                                              "are not passed back by this binding)", name);
      break;
    }
    alma_dtype dt = from_format(b.format, b.itemsize);
    int64_t dims[ALMA_MAX_RANK];
    if (dt == ALMA_DTYPE_UNDEFINED || b.ndim > ALMA_MAX_RANK) {
      st = alma__errorf(ALMA_ERR_UNSUPPORTED, "ORT: output '%s' has element format '%s' and rank %d, which alma does "
                                              "not take back", name, b.format ? b.format : "?", b.ndim);
    } else {
      for (int k = 0; k < b.ndim; k++) dims[k] = b.shape[k];
      st = alma__tensor_alloc_uninit(&outputs[i], dt, b.ndim, dims);
      if (st == ALMA_OK && b.len) memcpy(outputs[i].data, b.buf, (size_t)b.len);
      if (st == ALMA_OK) done = i + 1;
    }
    PyBuffer_Release(&b);
  }
  Py_DECREF(res);
  if (st != ALMA_OK)
    for (int i = 0; i < done; i++) alma_tensor_free_data(&outputs[i]);
  return st;
}

/* The profiling session's first run, untimed in its profile: inputs of the last call's types and
 * shapes, zero-filled (the real ones may be gone by now). GIL held. */
static alma_status prof_warm_run(ort_plan *p, const alma_tensor *like) {
  alma_tensor *in = calloc((size_t)p->n_in + 1, sizeof *in), *out = calloc((size_t)p->n_out + 1, sizeof *out);
  alma_status st = in && out ? ALMA_OK : alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (int i = 0; st == ALMA_OK && i < p->n_in; i++) st = alma__tensor_alloc(&in[i], like[i].dtype, like[i].rank, like[i].dims);
  in_cache *saved = p->cache;
  in_cache fresh[64];
  if (st == ALMA_OK && p->n_in <= 64) {
    memset(fresh, 0, sizeof fresh);
    p->cache = fresh;
    st = ort_call(p, p->prof_run, in, p->n_in, out, p->n_out);
    for (int i = 0; i < p->n_in; i++) Py_XDECREF(fresh[i].arr);
    p->cache = saved;
    for (int i = 0; st == ALMA_OK && i < p->n_out; i++) alma_tensor_free_data(&out[i]);
  }
  for (int i = 0; in && i < p->n_in; i++) alma_tensor_free_data(&in[i]);
  free(in);
  free(out);
  return st;
}

static alma_status ort_run(void *plan, const alma_tensor *inputs, int n_inputs, alma_tensor *outputs, int n_outputs) {
  ort_plan *p = plan;
  ALMA_TRY(ort_ready());
  PyGILState_STATE gs = py_enter();
  alma_status st = ALMA_OK;
  if (p->prof_sess && p->prof_warm) {
    p->prof_warm = 0;
    st = prof_warm_run(p, inputs);
  }
  if (st == ALMA_OK) st = ort_call(p, p->prof_sess ? p->prof_run : p->run, inputs, n_inputs, outputs, n_outputs);
  py_leave(gs);
  return st;
}

/* ONNX Runtime takes the graph entire (a conversion emitting alma-domain ops before it is
 * unavailable, onnx_only): every node is its. */
static alma_status ort_placement(void *plan, alma__placement *nodes) {
  ort_plan *p = plan;
  alma__placement_fill(nodes, p->g->n_nodes, ALMA_PLACE_GRAPH);
  return ALMA_OK;
}

static void ort_describe(void *plan, FILE *f) {
  ort_plan *p = plan;
  fprintf(f, "  one ONNX Runtime %s InferenceSession over the whole graph (%d nodes, %zu bytes of ONNX): graph "
             "optimization level %s, intra-op threads %d, inter-op 1, sequential, spinning %s, CPUExecutionProvider\n",
          py.version, p->n_named, p->model_n, p->level, p->threads, p->spinning);
}

/* ---- the per-node profile: ONNX Runtime's own profiler --------------------------------------- */
static alma_status ort_profile_start(void *plan) {
  ort_plan *p = plan;
  ALMA_TRY(ort_ready());
  if (p->prof_sess) return ALMA_OK;
  const char *tmp = getenv("TMPDIR");
  snprintf(p->prof_dir, sizeof p->prof_dir, "%s/alma-ort-profile-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (!mkdtemp(p->prof_dir)) {
    alma_status st = alma__errorf(ALMA_ERR_IO, "ORT profile: cannot create a directory %s: %s", p->prof_dir, strerror(errno));
    p->prof_dir[0] = 0;
    return st;
  }
  char prefix[PATH_MAX + 16];
  snprintf(prefix, sizeof prefix, "%s/ort", p->prof_dir);
  PyGILState_STATE gs = py_enter();
  alma_status st = ALMA_OK;
  /* ONNX Runtime profiles a session from its creation: a second one, built with profiling on */
  if (!(p->prof_sess = make_session(p, prefix))) st = py_fail("creating the profiling session");
  else if (!(p->prof_run = session_run(p->prof_sess))) st = py_fail("session.run");
  p->prof_warm = 1;
  py_leave(gs);
  return st;
}

static int cmp_ts(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The graph node an ONNX Runtime node stands for: the node of the same name; else the longest of
 * our node names it contains (its fusions name the new node after their first source node:
 * "fused Conv_0"); else a value it is named after ("r_nchwc": an NCHWc convolution whose fused
 * chain ends in value r), mapped to the nearest node of its op type (op, from the profile's
 * args.op_name) at or above that value's producer, the chain's first node; else -1. */
static int map_node(const ort_plan *p, const char *name, const char *op) {
  int best = -1;
  size_t bl = 0;
  for (int k = 0; k < p->n_named; k++) {
    const char *n = p->node_names[k];
    if (!strcmp(n, name)) return p->node_index[k];
    size_t l = strlen(n);
    if (l > bl && l >= 2 && strstr(name, n)) best = p->node_index[k], bl = l;
  }
  if (best >= 0) return best;
  const alma_graph *g = p->g;
  int val = -1;
  for (int v = 0; v < g->n_values; v++) {
    const char *vn = g->values[v].name;
    size_t l = vn ? strlen(vn) : 0;
    if (l > bl && g->values[v].producer >= 0 && !strncmp(name, vn, l) && (name[l] == 0 || name[l] == '_'))
      val = v, bl = l;
  }
  if (val < 0) return -1;
  int node = g->values[val].producer;
  for (int step = 0, n = node; op && step < 16 && n >= 0; step++) {
    if (!strcmp(g->nodes[n].op_type, op)) return n;
    int in = g->nodes[n].n_inputs > 0 ? g->nodes[n].inputs[0] : -1;
    n = in >= 0 ? g->values[in].producer : -1;
  }
  return node;
}

static alma_status ort_profile_read(void *plan, alma__prof_node *nodes) {
  ort_plan *p = plan;
  if (!p->prof_sess) return alma__errorf(ALMA_ERR_INVALID_ARG, "ORT profile: profile_start was not called");
  ALMA_TRY(ort_ready());
  char path[PATH_MAX] = "";
  PyGILState_STATE gs = py_enter();
  PyObject *r = PyObject_CallMethod(p->prof_sess, "end_profiling", NULL);
  const char *c = r ? PyUnicode_AsUTF8(r) : NULL;
  alma_status st = c ? ALMA_OK : py_fail("end_profiling");
  if (c) snprintf(path, sizeof path, "%s", c);
  Py_XDECREF(r);
  Py_CLEAR(p->prof_run);
  Py_CLEAR(p->prof_sess);
  py_leave(gs);
  if (st != ALMA_OK) return st;
  char *text = NULL;
  size_t n = 0;
  FILE *f = fopen(path, "rb");
  if (f) {
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (len >= 0 && (text = malloc((size_t)len + 1))) n = fread(text, 1, (size_t)len, f), text[n] = 0;
    fclose(f);
  }
  if (!text) return alma__errorf(ALMA_ERR_IO, "ORT profile: cannot read %s", path);
  cJSON *ev = cJSON_Parse(text);
  free(text);
  remove(path);
  if (!cJSON_IsArray(ev)) {
    cJSON_Delete(ev);
    return alma__errorf(ALMA_ERR_RUNTIME, "ORT profile: %s is not a JSON array of events", path);
  }
  /* the first model_run is the untimed warm-up: node events before its end are left out */
  int n_runs = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, ev) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
    n_runs += cJSON_IsString(nm) && !strcmp(nm->valuestring, "model_run");
  }
  double *ends = calloc((size_t)n_runs + 1, sizeof *ends);
  if (!ends) {
    cJSON_Delete(ev);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  int k = 0;
  cJSON_ArrayForEach(e, ev) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
    if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "model_run"))
      ends[k++] = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "ts")) +
                  cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "dur"));
  }
  qsort(ends, (size_t)n_runs, sizeof *ends, cmp_ts);
  double warm_end = n_runs ? ends[0] : -1;
  free(ends);
  for (int i = 0; i < p->g->n_nodes; i++)
    nodes[i] = (alma__prof_node){.head = i, .members = 1, .where = "ORT (fused/removed)"};
  cJSON_ArrayForEach(e, ev) {
    const cJSON *cat = cJSON_GetObjectItemCaseSensitive(e, "cat"), *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
    if (!cJSON_IsString(cat) || strcmp(cat->valuestring, "Node") || !cJSON_IsString(nm)) continue;
    const char *s = nm->valuestring, *suf = "_kernel_time";
    size_t l = strlen(s), sl = strlen(suf);
    if (l < sl || strcmp(s + l - sl, suf)) continue;
    if (cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "ts")) < warm_end) continue;
    char base[1024];
    snprintf(base, sizeof base, "%.*s", (int)(l - sl), s);
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    const cJSON *opn = args ? cJSON_GetObjectItemCaseSensitive(args, "op_name") : NULL;
    int v = map_node(p, base, cJSON_IsString(opn) ? opn->valuestring : NULL);
    if (v < 0) continue; /* ONNX Runtime's own node with no source among ours: in the overhead */
    nodes[v].seconds += cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "dur")) * 1e-6;
    nodes[v].where = "ORT";
  }
  for (int i = 0; i < p->g->n_nodes; i++)
    if (nodes[i].seconds > 0) nodes[i].runs = n_runs > 1 ? n_runs - 1 : 0;
  cJSON_Delete(ev);
  return ALMA_OK;
}

/* ---- the binding's own cost, and what the results report -------------------------------------- */
/* A one-node model: Identity on a float32 [1], at opset 13. */
static alma_status identity_model(uint8_t **buf, size_t *n) {
  Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
  Onnx__GraphProto gp = ONNX__GRAPH_PROTO__INIT;
  Onnx__NodeProto np = ONNX__NODE_PROTO__INIT;
  Onnx__OperatorSetIdProto os = ONNX__OPERATOR_SET_ID_PROTO__INIT;
  Onnx__ValueInfoProto vi[2] = {ONNX__VALUE_INFO_PROTO__INIT, ONNX__VALUE_INFO_PROTO__INIT};
  Onnx__TypeProto tp = ONNX__TYPE_PROTO__INIT;
  Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
  Onnx__TensorShapeProto sh = ONNX__TENSOR_SHAPE_PROTO__INIT;
  Onnx__TensorShapeProto__Dimension d = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
  d.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
  d.dim_value = 1;
  Onnx__TensorShapeProto__Dimension *dims[] = {&d};
  sh.n_dim = 1;
  sh.dim = dims;
  tt.has_elem_type = 1;
  tt.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  tt.shape = &sh;
  tp.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp.tensor_type = &tt;
  char *x = "x", *y = "y";
  vi[0].name = x, vi[0].type = &tp;
  vi[1].name = y, vi[1].type = &tp;
  Onnx__ValueInfoProto *ins[] = {&vi[0]}, *outs[] = {&vi[1]};
  np.n_input = 1, np.input = &x, np.n_output = 1, np.output = &y, np.op_type = "Identity", np.name = "identity";
  Onnx__NodeProto *nodes[] = {&np};
  gp.name = "identity", gp.n_node = 1, gp.node = nodes, gp.n_input = 1, gp.input = ins, gp.n_output = 1, gp.output = outs;
  os.domain = "", os.has_version = 1, os.version = 13;
  Onnx__OperatorSetIdProto *ops[] = {&os};
  mp.has_ir_version = 1, mp.ir_version = 7, mp.n_opset_import = 1, mp.opset_import = ops, mp.graph = &gp;
  mp.producer_name = "alma";
  *n = onnx__model_proto__get_packed_size(&mp);
  if (!(*buf = malloc(*n))) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  onnx__model_proto__pack(&mp, *buf);
  return ALMA_OK;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_dbl(const void *a, const void *b) { return cmp_ts(a, b); }

/* The cost of one call of an Identity model through this binding (the same path as every run:
 * a cached input view, session.run, an output copied back) and through a Python loop calling
 * session.run directly, medians over 200 calls each, with the plan's session options. */
static alma_status measure_overhead(const ort_plan *like, double *binding_us, double *python_us) {
  *binding_us = *python_us = NAN;
  ort_plan p = {.level = like->level, .threads = like->threads, .n_in = 1, .n_out = 1};
  ALMA_TRY(identity_model(&p.model, &p.model_n));
  /* a one-input, one-output graph description for ort_call's checks and names */
  alma_value vals[2];
  memset(vals, 0, sizeof vals);
  vals[0].name = "x";
  vals[1].name = "y";
  int in_idx = 0, out_idx = 1;
  alma_graph g;
  memset(&g, 0, sizeof g);
  g.values = vals;
  g.n_values = 2;
  g.inputs = &in_idx;
  g.n_inputs = 1;
  g.outputs = &out_idx;
  g.n_outputs = 1;
  p.g = &g;
  in_cache cache = {0};
  PyObject *in_name = NULL;
  p.cache = &cache;
  p.in_names = &in_name;
  enum { N = 200 };
  double t[N];
  float xv = 1.0f;
  alma_tensor x = {.dtype = ALMA_DTYPE_FLOAT32, .rank = 1, .dims = {1}, .data = &xv, .nbytes = sizeof xv}, y;
  PyGILState_STATE gs = py_enter();
  alma_status st = ALMA_OK;
  if (!(p.sess = make_session(&p, NULL)) || !(p.run = session_run(p.sess))) st = py_fail("identity session");
  if (st == ALMA_OK) {
    p.out_names = Py_BuildValue("[s]", "y");
    p.feeds = PyDict_New();
    in_name = PyUnicode_FromString("x");
    if (!p.out_names || !p.feeds || !in_name) st = py_fail("identity arguments");
  }
  for (int i = -10; st == ALMA_OK && i < N; i++) {
    double t0 = now_ns();
    st = ort_call(&p, p.run, &x, 1, &y, 1);
    double t1 = now_ns();
    if (st == ALMA_OK) alma_tensor_free_data(&y);
    if (i >= 0) t[i] = (t1 - t0) * 1e-3;
  }
  if (st == ALMA_OK) {
    qsort(t, N, sizeof *t, cmp_dbl);
    *binding_us = t[N / 2];
    PyObject *fn = PyDict_GetItemString(py.helpers, "python_loop");
    PyObject *r = fn ? PyObject_CallFunction(fn, "OOOi", p.sess, p.out_names, p.feeds, N) : NULL;
    if (r) *python_us = PyFloat_AsDouble(r);
    else st = py_fail("timing the Python loop");
    Py_XDECREF(r);
  }
  Py_XDECREF(cache.arr);
  Py_XDECREF(in_name);
  Py_XDECREF(p.feeds);
  Py_XDECREF(p.out_names);
  Py_XDECREF(p.run);
  Py_XDECREF(p.sess);
  py_leave(gs);
  free(p.model);
  return st;
}

static alma_status ort_info(void *plan, char *buf, size_t n) {
  ort_plan *p = plan;
  ALMA_TRY(ort_ready());
  double bus, pus;
  alma_status st = measure_overhead(p, &bus, &pus);
  char ov[160];
  if (st == ALMA_OK) snprintf(ov, sizeof ov, "\"identity_call_us\": %.2f, \"identity_call_python_us\": %.2f", bus, pus);
  else snprintf(ov, sizeof ov, "\"identity_call_us\": null, \"identity_call_python_us\": null");
  alma__error_clear();
  cJSON *s = cJSON_CreateString(py.prefix), *pv = cJSON_CreateString(py.python);
  char *ps = cJSON_PrintUnformatted(s), *pp = cJSON_PrintUnformatted(pv);
  snprintf(buf, n,
           "{\"onnxruntime\": \"%s\", \"numpy\": \"%s\", \"python\": \"%s\", \"environment\": %s, \"interpreter\": %s, "
           "\"optimization\": \"%s\", \"intra_op_threads\": %d, \"inter_op_threads\": 1, \"spinning\": \"%s\", %s}",
           py.version, py.numpy_version, py.py_version, ps ? ps : "null", pp ? pp : "null", p->level, p->threads,
           p->spinning, ov);
  free(ps);
  free(pp);
  cJSON_Delete(s);
  cJSON_Delete(pv);
  return ALMA_OK;
}

#define ORT_RUNTIME(sym, nm, lvl, desc)                                                                   \
  const alma_runtime sym = {                                                                              \
      .name = nm,                                                                                         \
      .description = desc,                                                                                \
      .init = ort_init,                                                                                   \
      .placement = ort_placement,                                                                         \
      .compile = lvl,                                                                                     \
      .run = ort_run,                                                                                     \
      .free = plan_free,                                                                                  \
      .describe = ort_describe,                                                                           \
      .profile_start = ort_profile_start,                                                                 \
      .profile_read = ort_profile_read,                                                                   \
      .info = ort_info,                                                                                   \
      .onnx_only = 1,                                                                                     \
      .spin_advice = ort_spin_advice,                                                                     \
      .option_prefix = "ort",                                                                             \
      .options = ort_options,                                                                             \
      .n_options = (int)(sizeof ort_options / sizeof ort_options[0]),                                     \
  };

ORT_RUNTIME(alma__runtime_ort, "ORT", compile_all,
            "ONNX Runtime (PyPI onnxruntime through an embedded Python), CPU provider, all graph optimizations")
ORT_RUNTIME(alma__runtime_ort_extended, "ORT_EXTENDED", compile_ext,
            "ONNX Runtime at graph optimization level extended (no layout optimizations)")
ORT_RUNTIME(alma__runtime_ort_basic, "ORT_BASIC", compile_basic,
            "ONNX Runtime at graph optimization level basic (constant folding and redundant-node removal only)")
#endif
