/* OPENVINO: Intel's OpenVINO (its C API, openvino/c/openvino.h) as an alma runtime.
 *
 * compile() serializes the graph after the chain's passes to ONNX in memory (src/onnx/save.c) and
 * has OpenVINO's ONNX frontend read it: an operator or attribute OpenVINO cannot take fails here
 * with OpenVINO's own message. The model is compiled for the CPU device with explicit settings
 * (below) when its inputs have static shapes; a model with symbolic dims (a batch axis) is
 * reshaped to the shapes of the first run's inputs and compiled then, and again whenever they
 * change, so OpenVINO always plans for static shapes as its benchmark_app does. run() copies the
 * inputs into the request's tensors and has OpenVINO write static-shape outputs straight into
 * tensors alma owns (others are copied out).
 *
 * Settings given at every compile: INFERENCE_NUM_THREADS from --threads, NUM_STREAMS 1 (one
 * inference at a time per plan: alma's own throughput mode runs several plans),
 * PERFORMANCE_HINT LATENCY, ENABLE_CPU_PINNING NO (alma already sets the process's affinity, and
 * pinned threads on a shared machine wait for busy cores), ENABLE_HYPER_THREADING NO, and
 * INFERENCE_PRECISION_HINT f32 for OPENVINO (OpenVINO's own default on CPUs with bf16 arithmetic
 * is bf16) or bf16 for OPENVINO_BF16, whose compiled precision is read back and checked.
 *
 * The library is loaded with dlopen on first use, so the process that forks the conversions
 * never holds OpenVINO's threads (TBB) unless it compiles a model itself; the core is created
 * in the process that compiles, once, and a forked copy of a process that had created it refuses
 * to use it (TBB's threads do not survive fork). */
#ifdef ALMA_HAVE_OPENVINO

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openvino/c/openvino.h>

#include "onnx/onnx.h"
#include "passes/pass.h"
#include "runtimes/exec.h"
#include "runtimes/openvino/openvino.h"
#include "runtimes/placement.h"
#include "runtimes/runtime.h"

/* ---- the library: every entry point through dlsym ------------------------------------------- */
#define OV_FUNCS(X)                                                                                                   \
  X(ov_get_openvino_version) X(ov_version_free) X(ov_get_error_info) X(ov_get_last_err_msg) X(ov_free)              \
  X(ov_core_create) X(ov_core_free) X(ov_core_read_model_from_memory_buffer) X(ov_core_compile_model)               \
  X(ov_core_get_property) X(ov_model_free) X(ov_model_is_dynamic) X(ov_model_inputs_size) X(ov_model_outputs_size)  \
  X(ov_model_const_input_by_name) X(ov_model_const_output_by_name) X(ov_model_reshape)            \
  X(ov_port_get_any_name) X(ov_port_get_partial_shape) X(ov_port_get_element_type) X(ov_output_const_port_free)     \
  X(ov_partial_shape_create_static) X(ov_partial_shape_create) X(ov_partial_shape_free) X(ov_shape_free)      \
  X(ov_compiled_model_create_infer_request) X(ov_compiled_model_get_property)                      \
  X(ov_compiled_model_free) X(ov_infer_request_get_tensor_by_const_port) X(ov_infer_request_set_tensor_by_const_port) X(ov_compiled_model_output_by_name) X(ov_compiled_model_input_by_name) \
  X(ov_infer_request_infer) X(ov_infer_request_free) X(ov_infer_request_get_profiling_info)                         \
  X(ov_profiling_info_list_free) X(ov_tensor_create_from_host_ptr) X(ov_tensor_get_shape)                          \
  X(ov_tensor_get_element_type) X(ov_tensor_get_byte_size) X(ov_tensor_get_size) X(ov_tensor_data) X(ov_tensor_free)

static struct {
#define X(f) __typeof__(f) *f;
  OV_FUNCS(X)
#undef X
} ov;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[1024];
static char ov_version[128];     /* "2026.4.1-20931-..." */
static char ov_lib_path[1024];

#if defined(__SANITIZE_ADDRESS__)
#define ALMA_OV_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ALMA_OV_ASAN 1
#endif
#endif

static void load_library(void) {
#ifdef ALMA_OV_ASAN
  /* TBB loads its allocator with RTLD_DEEPBIND, which AddressSanitizer refuses (it aborts the
     process); told that a sanitizer is present, TBB leaves that out. A user's value is kept. */
  setenv("TBB_ENABLE_SANITIZERS", "1", 0);
#endif
  const char *path = getenv("ALMA_OPENVINO_LIB");
  if (!path || !*path) path = ALMA_OPENVINO_C_LIBRARY;
  snprintf(ov_lib_path, sizeof ov_lib_path, "%s", path);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(load_error, sizeof load_error, "cannot load OpenVINO's C library: %s (scripts/setup.sh installs the "
             "openvino wheel into .venv-openvino; ALMA_OPENVINO_LIB names another libopenvino_c)", dlerror());
    return;
  }
#define X(f)                                                                                                 \
  {                                                                                                          \
    void *sym = dlsym(h, #f);                                                                                \
    if (!sym) {                                                                                              \
      snprintf(load_error, sizeof load_error, "%s has no %s: OpenVINO %s or newer is needed (alma was built " \
               "against its headers)", path, #f, ALMA_OPENVINO_HEADER_VERSION);                              \
      return;                                                                                                \
    }                                                                                                        \
    memcpy(&ov.f, &sym, sizeof sym);                                                                         \
  }
  OV_FUNCS(X)
#undef X
  ov_version_t v = {0};
  if (ov.ov_get_openvino_version(&v) != OK || !v.buildNumber) {
    snprintf(load_error, sizeof load_error, "%s: ov_get_openvino_version failed", path);
    return;
  }
  snprintf(ov_version, sizeof ov_version, "%s", v.buildNumber);
  ov.ov_version_free(&v);
  /* The C API's enums (element types among them) are renumbered between releases: only the
   * release whose headers alma was built with is safe to call. */
  size_t hl = strlen(ALMA_OPENVINO_HEADER_VERSION);
  if (strncmp(ov_version, ALMA_OPENVINO_HEADER_VERSION, hl) || (ov_version[hl] && ov_version[hl] != '-')) {
    snprintf(load_error, sizeof load_error, "%s is OpenVINO %s, but alma was built against OpenVINO %s's headers "
             "(the C API's enum values differ between releases): rebuild alma against this release", path, ov_version,
             ALMA_OPENVINO_HEADER_VERSION);
    return;
  }
}

static alma_status ov_load(void) {
  pthread_once(&load_once, load_library);
  if (load_error[0]) return alma__errorf(ALMA_ERR_UNAVAILABLE, "%s", load_error);
  return ALMA_OK;
}

const char *alma__openvino_version(void) { return ov_load() == ALMA_OK ? ov_version : NULL; }

/* OpenVINO's message for a failed call: its status and the exception text it kept. */
static alma_status ov_fail(ov_status_e s, alma_status as, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static alma_status ov_fail(ov_status_e s, alma_status as, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  /* the exception text is kept only by calls that caught one; a status the C layer returned
   * itself (INVALID_C_PARAM) would show an older call's message */
  int thrown = s == GENERAL_ERROR || s == NOT_IMPLEMENTED || s == UNKNOW_EXCEPTION || s == REQUEST_BUSY || s == INFER_CANCELLED;
  const char *msg = thrown && ov.ov_get_last_err_msg ? ov.ov_get_last_err_msg() : NULL;
  const char *info = ov.ov_get_error_info ? ov.ov_get_error_info(s) : "";
  char buf[3000];
  snprintf(buf, sizeof buf, "%s", msg && *msg ? msg : info ? info : "unknown error");
  /* OpenVINO's exception texts start with the source locations that threw ("Exception from
   * src/...cpp:105:", "Check 'false' failed at src/...cpp:151:"): the message is what follows */
  for (;;) {
    char *loc = strstr(buf, ".cpp:");
    char *colon = loc ? strchr(loc + 5, ':') : NULL;
    if (!colon) break;
    memmove(buf, colon + 1 + (colon[1] == ' '), strlen(colon + 1 + (colon[1] == ' ')) + 1);
  }
  size_t skip = strspn(buf, " ");
  memmove(buf, buf + skip, strlen(buf + skip) + 1);
  size_t n = strlen(buf);
  while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = 0;
  for (char *p = buf; *p; p++)
    if (*p == '\n') *p = ' ';
  return alma__errorf(as, "OPENVINO: %s: %s", what, buf);
}

#define OV_TRY(call, ...)                                                \
  do {                                                                   \
    ov_status_e ov_s_ = (call);                                          \
    if (ov_s_ != OK) return ov_fail(ov_s_, ALMA_ERR_RUNTIME, __VA_ARGS__); \
  } while (0)

/* ---- the core: one per process, created in the process that compiles ------------------------ */
static pthread_mutex_t core_mu = PTHREAD_MUTEX_INITIALIZER;
static ov_core_t *core;
static pid_t core_pid;
static char device_name[256];

static alma_status get_core(ov_core_t **out) {
  ALMA_TRY(ov_load());
  pthread_mutex_lock(&core_mu);
  alma_status st = ALMA_OK;
  if (core && core_pid != getpid()) {
    st = alma__errorf(ALMA_ERR_RUNTIME, "OPENVINO: this process is a fork of one that had started OpenVINO (its TBB "
                      "threads do not survive fork): run OPENVINO conversions in their own processes");
  } else if (!core) {
    ov_status_e s = ov.ov_core_create(&core);
    if (s != OK) {
      core = NULL;
      st = ov_fail(s, ALMA_ERR_UNAVAILABLE, "creating the core");
    } else {
      core_pid = getpid();
      char *v = NULL;
      if (ov.ov_core_get_property(core, "CPU", "FULL_DEVICE_NAME", &v) == OK && v) {
        snprintf(device_name, sizeof device_name, "%s", v);
        ov.ov_free(v);
      }
    }
  }
  *out = core;
  pthread_mutex_unlock(&core_mu);
  return st;
}

const char *alma__openvino_device_name(void) {
  ov_core_t *c;
  if (get_core(&c) != ALMA_OK) return NULL;
  return device_name[0] ? device_name : NULL;
}

/* ---- dtypes --------------------------------------------------------------------------------- */
static int ov_type_of(alma_dtype t, ov_element_type_e *out) {
  switch (t) {
    case ALMA_DTYPE_FLOAT32: *out = F32; return 1;
    case ALMA_DTYPE_FLOAT16: *out = F16; return 1;
    case ALMA_DTYPE_BFLOAT16: *out = BF16; return 1;
    case ALMA_DTYPE_FLOAT64: *out = F64; return 1;
    case ALMA_DTYPE_INT8: *out = I8; return 1;
    case ALMA_DTYPE_INT16: *out = I16; return 1;
    case ALMA_DTYPE_INT32: *out = I32; return 1;
    case ALMA_DTYPE_INT64: *out = I64; return 1;
    case ALMA_DTYPE_UINT8: *out = U8; return 1;
    case ALMA_DTYPE_UINT16: *out = U16; return 1;
    case ALMA_DTYPE_UINT32: *out = U32; return 1;
    case ALMA_DTYPE_UINT64: *out = U64; return 1;
    case ALMA_DTYPE_BOOL: *out = BOOLEAN; return 1; /* one byte per element in both */
    default: return 0;  /* strings, and the sub-byte/float8 types alma keeps one per byte */
  }
}

static alma_dtype alma_type_of(ov_element_type_e t) {
  switch (t) {
    case F32: return ALMA_DTYPE_FLOAT32;
    case F16: return ALMA_DTYPE_FLOAT16;
    case BF16: return ALMA_DTYPE_BFLOAT16;
    case F64: return ALMA_DTYPE_FLOAT64;
    case I8: return ALMA_DTYPE_INT8;
    case I16: return ALMA_DTYPE_INT16;
    case I32: return ALMA_DTYPE_INT32;
    case I64: return ALMA_DTYPE_INT64;
    case U8: return ALMA_DTYPE_UINT8;
    case U16: return ALMA_DTYPE_UINT16;
    case U32: return ALMA_DTYPE_UINT32;
    case U64: return ALMA_DTYPE_UINT64;
    case BOOLEAN: return ALMA_DTYPE_BOOL;
    default: return ALMA_DTYPE_UNDEFINED;
  }
}

/* ---- the plan ------------------------------------------------------------------------------- */
typedef struct ov_plan {
  const alma_graph *g;
  int bf16;                     /* OPENVINO_BF16 */
  int threads;
  ov_model_t *model;            /* as read from the ONNX bytes (reshaped for each compile) */
  int dynamic;                  /* some input dims are symbolic: compiled at run for the given shapes */
  int *in_port;                 /* -1: OpenVINO dropped g->inputs[i] (unused), which is then not fed */
  int *in_dynamic;              /* that input's shape has symbolic dims: reshaped to each run's */
  int *out_port;                /* found among the model's outputs (always, or compile fails) */
  ov_compiled_model_t *cm;      /* for the shapes in shapes[] */
  ov_infer_request_t *req;
  int profiled;                 /* cm was compiled with PERF_COUNT YES */
  int64_t *shapes;              /* n_inputs x ALMA_MAX_RANK dims, and ranks */
  int *ranks;
  /* outputs whose compiled shape is static: alma allocates them and OpenVINO writes into them */
  int *out_static;
  int *out_passthrough;         /* the graph input an output passes straight through, or -1 */
  int64_t *out_dims;            /* n_outputs x ALMA_MAX_RANK */
  int *out_rank;
  alma_dtype *out_dtype;
  char precision[16];           /* INFERENCE_PRECISION_HINT of the compiled model, as OpenVINO reads it back */
  int compiles;
  /* profile */
  int profiling;
  double *prof_s;
  int64_t *prof_runs;
  int64_t prof_batches;
  double unmapped_s;            /* time of OpenVINO layers named after no node of the graph */
  int unmapped_layers;
} ov_plan;

static void drop_compiled(ov_plan *p) {
  if (p->req) ov.ov_infer_request_free(p->req);
  if (p->cm) ov.ov_compiled_model_free(p->cm);
  p->req = NULL;
  p->cm = NULL;
}

static void ov_plan_free(void *plan) {
  ov_plan *p = plan;
  if (!p) return;
  drop_compiled(p);
  if (p->model) ov.ov_model_free(p->model);
  free(p->in_port);
  free(p->in_dynamic);
  free(p->out_static);
  free(p->out_passthrough);
  free(p->out_dims);
  free(p->out_rank);
  free(p->out_dtype);
  free(p->out_port);
  free(p->shapes);
  free(p->ranks);
  free(p->prof_s);
  free(p->prof_runs);
  free(p);
}

/* Compiles p->model (reshaped to `in`'s shapes when it is dynamic) with the runtime's settings. */
static alma_status compile_now(ov_plan *p, const alma_tensor *in, int profile) {
  drop_compiled(p);
  if (p->dynamic) {
    size_t nidx = 0;
    const char **idx = calloc((size_t)p->g->n_inputs + 1, sizeof *idx);
    ov_partial_shape_t *ps = calloc((size_t)p->g->n_inputs + 1, sizeof *ps);
    alma_status st = idx && ps ? ALMA_OK : alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    for (int i = 0; st == ALMA_OK && i < p->g->n_inputs; i++) {
      if (p->in_port[i] < 0 || !p->in_dynamic[i]) continue;
      /* ov_partial_shape_create_static refuses 0-sized dims, the dimension form takes them */
      int64_t one = 1;
      ov_dimension_t d[ALMA_MAX_RANK];
      for (int k = 0; k < in[i].rank; k++) d[k] = (ov_dimension_t){in[i].dims[k], in[i].dims[k]};
      ov_status_e s = in[i].rank ? ov.ov_partial_shape_create(in[i].rank, d, &ps[nidx])
                                 : ov.ov_partial_shape_create_static(0, &one, &ps[nidx]);
      if (s != OK) {
        st = ov_fail(s, ALMA_ERR_RUNTIME, "shape of input '%s'", p->g->values[p->g->inputs[i]].name);
        break;
      }
      idx[nidx++] = p->g->values[p->g->inputs[i]].name;
    }
    if (st == ALMA_OK) {
      ov_status_e s = ov.ov_model_reshape(p->model, idx, ps, nidx);
      if (s != OK) st = ov_fail(s, ALMA_ERR_RUNTIME, "reshaping the model to the inputs' shapes");
    }
    for (size_t k = 0; ps && k < nidx; k++) ov.ov_partial_shape_free(&ps[k]);
    free(idx);
    free(ps);
    ALMA_TRY(st);
  }
  ov_core_t *c;
  ALMA_TRY(get_core(&c));
  char threads[16];
  snprintf(threads, sizeof threads, "%d", p->threads);
  const char *prec = p->bf16 ? "bf16" : "f32";
  /* a model OpenVINO cannot compile is one it does not support (its message says what) */
  ov_status_e cs = ov.ov_core_compile_model(c, p->model, "CPU", 16, &p->cm, "INFERENCE_NUM_THREADS", threads, "NUM_STREAMS", "1",
                                  "PERFORMANCE_HINT", "LATENCY", "ENABLE_CPU_PINNING", "NO", "ENABLE_HYPER_THREADING",
                                  "NO", "INFERENCE_PRECISION_HINT", prec, "PERF_COUNT", profile ? "YES" : "NO",
                                  "LOG_LEVEL", "LOG_WARNING");
  if (cs != OK) {
    p->cm = NULL;
    return ov_fail(cs, ALMA_ERR_UNSUPPORTED, "compiling for CPU");
  }
  p->compiles++;
  p->profiled = profile;
  char *v = NULL;
  if (ov.ov_compiled_model_get_property(p->cm, "INFERENCE_PRECISION_HINT", &v) == OK && v) {
    snprintf(p->precision, sizeof p->precision, "%s", v);
    ov.ov_free(v);
  }
  if (strcmp(p->precision, prec)) {
    drop_compiled(p);
    return alma__errorf(ALMA_ERR_UNAVAILABLE, "OPENVINO%s: OpenVINO compiled the model with inference precision '%s', "
                        "not the %s asked for", p->bf16 ? "_BF16" : "", p->precision, prec);
  }
  OV_TRY(ov.ov_compiled_model_create_infer_request(p->cm, &p->req), "creating an infer request");
  for (int i = 0; i < p->g->n_outputs; i++) {
    p->out_static[i] = 0;
    ov_output_const_port_t *port = NULL;
    /* An output that is an input passed straight through (Dropout, Identity) is that input's
     * tensor: OpenVINO does not copy it into a tensor alma sets, so it is read back instead. */
    if (ov.ov_model_const_input_by_name(p->model, p->g->values[p->g->outputs[i]].name, &port) == OK) {
      ov.ov_output_const_port_free(port);
      continue;
    }
    if (ov.ov_compiled_model_output_by_name(p->cm, p->g->values[p->g->outputs[i]].name, &port) != OK) continue;
    ov_partial_shape_t ps;
    ov_element_type_e et;
    if (ov.ov_port_get_element_type(port, &et) == OK && ov.ov_port_get_partial_shape(port, &ps) == OK) {
      int st = ps.rank.min == ps.rank.max && ps.rank.min >= 0 && ps.rank.min <= ALMA_MAX_RANK;
      for (int64_t d = 0; st && d < ps.rank.min; d++) {
        st = ps.dims[d].min == ps.dims[d].max && ps.dims[d].min >= 0;
        p->out_dims[(size_t)i * ALMA_MAX_RANK + d] = ps.dims[d].min;
      }
      alma_dtype dt = alma_type_of(et);
      const alma_value *v = &p->g->values[p->g->outputs[i]];
      p->out_static[i] = st && dt != ALMA_DTYPE_UNDEFINED && (v->dtype == ALMA_DTYPE_UNDEFINED || v->dtype == dt);
      p->out_rank[i] = (int)ps.rank.min;
      p->out_dtype[i] = dt;
      ov.ov_partial_shape_free(&ps);
    }
    ov.ov_output_const_port_free(port);
  }
  for (int i = 0; in && i < p->g->n_inputs; i++) {
    p->ranks[i] = in[i].rank;
    memcpy(&p->shapes[(size_t)i * ALMA_MAX_RANK], in[i].dims, sizeof in[i].dims);
  }
  return ALMA_OK;
}


static char *port_name(const ov_output_const_port_t *port) {
  char *n = NULL;
  if (ov.ov_port_get_any_name(port, &n) != OK || !n) return NULL;
  char *r = alma__strdup(n);
  ov.ov_free(n);
  return r;
}

/* Finds the graph's inputs or outputs among the model's by tensor name (a value that passes
 * straight through is one tensor with both names, which the lookups by name resolve; port indexes
 * and any_name do not). An input OpenVINO dropped (unused) is marked -1 and not fed. */
static alma_status map_ports(ov_plan *p, int outputs) {
  int count = outputs ? p->g->n_outputs : p->g->n_inputs;
  const int *vals = outputs ? p->g->outputs : p->g->inputs;
  int *map = outputs ? p->out_port : p->in_port;
  for (int i = 0; i < count; i++) {
    const char *name = p->g->values[vals[i]].name;
    ov_output_const_port_t *port = NULL;
    ov_status_e s = outputs ? ov.ov_model_const_output_by_name(p->model, name, &port)
                            : ov.ov_model_const_input_by_name(p->model, name, &port);
    if (s != OK) {
      if (outputs)
        return alma__errorf(ALMA_ERR_UNSUPPORTED, "OPENVINO: output '%s' is not among the outputs of the model OpenVINO "
                            "read", name);
      map[i] = -1;
      continue;
    }
    map[i] = i;
    ov.ov_output_const_port_free(port);
    port = NULL;
    /* An output OpenVINO made one tensor with an input (Dropout, Identity: the value passes
     * straight through) is found among the inputs too, under the same port; OpenVINO's CPU plugin
     * returns such an output unwritten, so alma gives the input's data, which it is by definition. */
    if (outputs) {
      p->out_passthrough[i] = -1;
      if (ov.ov_model_const_input_by_name(p->model, name, &port) != OK) continue;
      char *a = port_name(port);
      ov.ov_output_const_port_free(port);
      for (int j = 0; a && j < p->g->n_inputs && p->out_passthrough[i] < 0; j++) {
        ov_output_const_port_t *q = NULL;
        if (ov.ov_model_const_input_by_name(p->model, p->g->values[p->g->inputs[j]].name, &q) != OK) continue;
        char *b = port_name(q);
        ov.ov_output_const_port_free(q);
        if (b && !strcmp(a, b)) p->out_passthrough[i] = j;
        free(b);
      }
      free(a);
      if (p->out_passthrough[i] < 0)
        return alma__errorf(ALMA_ERR_UNSUPPORTED, "OPENVINO: output '%s' is one of the model's inputs in the model "
                            "OpenVINO read, but alma cannot tell which", name);
      continue;
    }
    if (ov.ov_model_const_input_by_name(p->model, name, &port) != OK) continue;
    if (!outputs) {
      /* read the dims rather than ov_partial_shape_is_dynamic, which calls a scalar dynamic */
      int dyn = 1;
      ov_partial_shape_t ps;
      if (ov.ov_port_get_partial_shape(port, &ps) == OK) {
        dyn = ps.rank.min != ps.rank.max || ps.rank.min < 0;
        for (int64_t d = 0; !dyn && d < ps.rank.max; d++) dyn = ps.dims[d].min != ps.dims[d].max || ps.dims[d].min < 0;
        ov.ov_partial_shape_free(&ps);
      }
      p->in_dynamic[i] = dyn;
      p->dynamic |= dyn;
    }
    ov.ov_output_const_port_free(port);
  }
  return ALMA_OK;
}

static alma_status compile_plan(const alma_graph *g, const alma_runtime_opts *opts, void **plan_out, int bf16) {
  *plan_out = NULL;
  ALMA_TRY(ov_load());
  for (int i = 0; i < g->n_nodes; i++)
    if (!strcmp(g->nodes[i].domain, "alma"))
      return alma__errorf(ALMA_ERR_UNSUPPORTED, "OPENVINO: node '%s' is alma's own operator alma:%s (left by FUSE), "
                          "which OpenVINO cannot run", g->nodes[i].name, g->nodes[i].op_type);
  ov_element_type_e et;
  for (int i = 0; i < g->n_inputs; i++) {
    const alma_value *v = &g->values[g->inputs[i]];
    if (v->dtype != ALMA_DTYPE_UNDEFINED && !ov_type_of(v->dtype, &et))
      return alma__errorf(ALMA_ERR_UNSUPPORTED, "OPENVINO: input '%s' is %s, which alma does not pass to OpenVINO", v->name,
                          alma_dtype_name(v->dtype));
  }
  for (int i = 0; i < g->n_outputs; i++) {
    const alma_value *v = &g->values[g->outputs[i]];
    if (v->dtype != ALMA_DTYPE_UNDEFINED && !ov_type_of(v->dtype, &et))
      return alma__errorf(ALMA_ERR_UNSUPPORTED, "OPENVINO: output '%s' is %s, which alma does not take from OpenVINO",
                          v->name, alma_dtype_name(v->dtype));
  }
  ov_core_t *c;
  ALMA_TRY(get_core(&c));
  ov_plan *p = calloc(1, sizeof *p);
  if (!p) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  p->g = g;
  p->bf16 = bf16;
  p->threads = opts->threads > 0 ? opts->threads : 1;
  p->in_port = calloc((size_t)g->n_inputs + 1, sizeof *p->in_port);
  p->in_dynamic = calloc((size_t)g->n_inputs + 1, sizeof *p->in_dynamic);
  p->out_static = calloc((size_t)g->n_outputs + 1, sizeof *p->out_static);
  p->out_passthrough = calloc((size_t)g->n_outputs + 1, sizeof *p->out_passthrough);
  p->out_dims = calloc(((size_t)g->n_outputs + 1) * ALMA_MAX_RANK, sizeof *p->out_dims);
  p->out_rank = calloc((size_t)g->n_outputs + 1, sizeof *p->out_rank);
  p->out_dtype = calloc((size_t)g->n_outputs + 1, sizeof *p->out_dtype);
  p->out_port = calloc((size_t)g->n_outputs + 1, sizeof *p->out_port);
  p->shapes = calloc(((size_t)g->n_inputs + 1) * ALMA_MAX_RANK, sizeof *p->shapes);
  p->ranks = calloc((size_t)g->n_inputs + 1, sizeof *p->ranks);
  if (!p->in_port || !p->in_dynamic || !p->out_static || !p->out_passthrough || !p->out_dims || !p->out_rank || !p->out_dtype || !p->out_port || !p->shapes || !p->ranks) {
    ov_plan_free(p);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  uint8_t *bytes = NULL;
  size_t nb = 0;
  alma_status st = alma__onnx_serialize(g, NULL, &bytes, &nb);
  if (st != ALMA_OK) {
    ov_plan_free(p);
    return alma__error_prefix(st, "OPENVINO: writing the graph as ONNX: ");
  }
  /* weights NULL: the ONNX bytes carry their initializers */
  ov_status_e s = ov.ov_core_read_model_from_memory_buffer(c, (const char *)bytes, nb, NULL, &p->model);
  free(bytes);
  if (s != OK) {
    p->model = NULL;
    ov_plan_free(p);
    return ov_fail(s, ALMA_ERR_UNSUPPORTED, "reading the model");
  }
  if ((st = map_ports(p, 0)) != ALMA_OK || (st = map_ports(p, 1)) != ALMA_OK) {
    ov_plan_free(p);
    return st;
  }
  /* Static inputs: compile now, so that a model OpenVINO cannot compile fails at convert. */
  if (!p->dynamic) {
    alma_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
    if (!in) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    for (int i = 0; in && i < g->n_inputs; i++) {
      const alma_value *v = &g->values[g->inputs[i]];
      in[i].rank = v->rank < 0 ? 0 : v->rank;
      memcpy(in[i].dims, v->dims, sizeof v->dims);
    }
    if (st == ALMA_OK) st = compile_now(p, in, 0);
    free(in);
    if (st != ALMA_OK) {
      ov_plan_free(p);
      return st;
    }
  }
  *plan_out = p;
  return ALMA_OK;
}

static alma_status ov_compile_f32(const alma_graph *g, const alma_runtime_opts *o, void **plan) { return compile_plan(g, o, plan, 0); }
static alma_status ov_compile_bf16(const alma_graph *g, const alma_runtime_opts *o, void **plan) { return compile_plan(g, o, plan, 1); }

static int same_shapes(const ov_plan *p, const alma_tensor *in) {
  for (int i = 0; i < p->g->n_inputs; i++) {
    if (p->in_port[i] < 0) continue;
    if (p->ranks[i] != in[i].rank) return 0;
    for (int k = 0; k < in[i].rank; k++)
      if (p->shapes[(size_t)i * ALMA_MAX_RANK + k] != in[i].dims[k]) return 0;
  }
  return 1;
}

/* The request's tensor of the compiled model's input or output port named `name` (ports rather
 * than names: a value passed straight through is one tensor under two names, and a lookup by
 * name may land on the input when the output is meant). */
static ov_status_e port_tensor(ov_plan *p, int output, const char *name, ov_tensor_t **t) {
  ov_output_const_port_t *port = NULL;
  ov_status_e s = output ? ov.ov_compiled_model_output_by_name(p->cm, name, &port)
                         : ov.ov_compiled_model_input_by_name(p->cm, name, &port);
  if (s == OK) s = ov.ov_infer_request_get_tensor_by_const_port(p->req, port, t);
  if (port) ov.ov_output_const_port_free(port);
  return s;
}

static void add_profile(ov_plan *p);

/* Makes a host buffer the request's tensor for the compiled model's input or output `name`:
 * OpenVINO reads (or writes) that memory during the next infer, with no copy. */
static ov_status_e bind_host(ov_plan *p, int output, const char *name, alma_dtype dt, int rank, const int64_t *dims,
                             const void *data) {
  static char empty[16];
  ov_element_type_e et = F32;
  ov_type_of(dt, &et);
  ov_shape_t shape = {rank, (int64_t *)dims};
  ov_tensor_t *t = NULL;
  ov_output_const_port_t *port = NULL;
  ov_status_e s = ov.ov_tensor_create_from_host_ptr(et, shape, data ? (void *)data : empty, &t);
  if (s == OK) s = output ? ov.ov_compiled_model_output_by_name(p->cm, name, &port)
                          : ov.ov_compiled_model_input_by_name(p->cm, name, &port);
  if (s == OK) s = ov.ov_infer_request_set_tensor_by_const_port(p->req, port, t);
  if (port) ov.ov_output_const_port_free(port);
  if (t) ov.ov_tensor_free(t);
  return s;
}

static alma_status ov_run(void *plan, const alma_tensor *inputs, int n_inputs, alma_tensor *outputs, int n_outputs) {
  ov_plan *p = plan;
  const alma_graph *g = p->g;
  if (n_inputs != g->n_inputs || n_outputs != g->n_outputs)
    return alma__errorf(ALMA_ERR_INVALID_ARG, "OPENVINO: %d inputs and %d outputs given, the graph has %d and %d", n_inputs,
                        n_outputs, g->n_inputs, g->n_outputs);
  for (int i = 0; i < n_outputs; i++) memset(&outputs[i], 0, sizeof outputs[i]);
  if (!p->cm || p->profiled != p->profiling || (p->dynamic && !same_shapes(p, inputs)))
    ALMA_TRY(compile_now(p, inputs, p->profiling));
  static const int64_t no_dims[1];
  /* Outputs of static shape: OpenVINO writes them straight into tensors alma owns. */
  for (int i = 0; i < n_outputs; i++) {
    if (!p->out_static[i]) continue;
    alma_status st = alma__tensor_alloc_uninit(&outputs[i], p->out_dtype[i], p->out_rank[i],
                                               &p->out_dims[(size_t)i * ALMA_MAX_RANK]);
    if (st == ALMA_OK) {
      ov_status_e s = bind_host(p, 1, g->values[g->outputs[i]].name, p->out_dtype[i], p->out_rank[i],
                                &p->out_dims[(size_t)i * ALMA_MAX_RANK], outputs[i].data);
      if (s != OK) st = ov_fail(s, ALMA_ERR_RUNTIME, "setting output '%s'", g->values[g->outputs[i]].name);
    }
    if (st != ALMA_OK) {
      for (int k = 0; k <= i; k++) alma_tensor_free_data(&outputs[k]);
      return st;
    }
  }
  for (int i = 0; i < n_inputs; i++) {
    if (p->in_port[i] < 0) continue;
    ov_element_type_e et;
    if (!ov_type_of(inputs[i].dtype, &et)) {
      for (int k = 0; k < n_outputs; k++) alma_tensor_free_data(&outputs[k]);
      return alma__errorf(ALMA_ERR_UNSUPPORTED, "OPENVINO: input '%s' is %s, which alma does not pass to OpenVINO",
                          g->values[g->inputs[i]].name, alma_dtype_name(inputs[i].dtype));
    }
    /* The caller's buffer itself, not a copy: OpenVINO only reads its inputs, and an output
     * that passes an input straight through is taken from alma's input (out_passthrough). */
    const char *nm = g->values[g->inputs[i]].name;
    ov_status_e s = bind_host(p, 0, nm, inputs[i].dtype, inputs[i].rank, inputs[i].dims, inputs[i].data);
    if (s != OK) {
      for (int k = 0; k < n_outputs; k++) alma_tensor_free_data(&outputs[k]);
      return ov_fail(s, ALMA_ERR_RUNTIME, "setting input '%s' (%s, %zu bytes)", nm, alma_dtype_name(inputs[i].dtype),
                     inputs[i].nbytes);
    }
  }
  ov_status_e is = ov.ov_infer_request_infer(p->req);
  if (is != OK) {
    for (int k = 0; k < n_outputs; k++) alma_tensor_free_data(&outputs[k]);
    return ov_fail(is, ALMA_ERR_RUNTIME, "inference");
  }
  if (p->profiling) add_profile(p);
  for (int i = 0; i < n_outputs; i++) {
    if (p->out_static[i]) continue;
    if (p->out_passthrough[i] >= 0) {
      alma_status st = alma__tensor_copy(&outputs[i], &inputs[p->out_passthrough[i]]);
      if (st != ALMA_OK) {
        for (int k = 0; k < n_outputs; k++) alma_tensor_free_data(&outputs[k]);
        return st;
      }
      continue;
    }
    ov_tensor_t *t = NULL;
    alma_status st = ALMA_OK;
    ov_status_e s = port_tensor(p, 1, g->values[g->outputs[i]].name, &t);
    ov_shape_t shape = {0};
    ov_element_type_e et = DYNAMIC;
    void *data = NULL;
    size_t nbytes = 0;
    if (s == OK) s = ov.ov_tensor_get_shape(t, &shape);
    size_t numel = 0;
    /* the C API cannot make a rank-0 shape (ov_shape_create refuses it): a one-element tensor
     * whose shape it cannot give is a scalar */
    if (s == INVALID_C_PARAM && ov.ov_tensor_get_size(t, &numel) == OK && numel == 1) {
      s = OK;
      shape = (ov_shape_t){0, NULL};
    }
    if (s == OK) s = ov.ov_tensor_get_element_type(t, &et);
    if (s == OK) s = ov.ov_tensor_data(t, &data);
    if (s == OK) s = ov.ov_tensor_get_byte_size(t, &nbytes);
    const alma_value *v = &g->values[g->outputs[i]];
    alma_dtype dt = alma_type_of(et);
    if (s != OK) {
      st = ov_fail(s, ALMA_ERR_RUNTIME, "reading output '%s'", v->name);
    } else if (dt == ALMA_DTYPE_UNDEFINED || (v->dtype != ALMA_DTYPE_UNDEFINED && dt != v->dtype)) {
      st = alma__errorf(ALMA_ERR_RUNTIME, "OPENVINO: output '%s' came back as OpenVINO element type %d, not %s", v->name,
                        (int)et, alma_dtype_name(v->dtype));
    } else if (shape.rank > ALMA_MAX_RANK) {
      st = alma__errorf(ALMA_ERR_UNSUPPORTED, "OPENVINO: output '%s' has rank %lld (alma holds up to %d)", v->name,
                        (long long)shape.rank, ALMA_MAX_RANK);
    } else if ((st = alma__tensor_alloc_uninit(&outputs[i], dt, (int)shape.rank, shape.dims ? shape.dims : no_dims)) == ALMA_OK) {
      if (outputs[i].nbytes != nbytes)
        st = alma__errorf(ALMA_ERR_RUNTIME, "OPENVINO: output '%s' holds %zu bytes, its shape %zu", v->name, nbytes,
                          outputs[i].nbytes);
      else if (nbytes)
        memcpy(outputs[i].data, data, nbytes);
    }
    if (shape.dims) ov.ov_shape_free(&shape);
    if (t) ov.ov_tensor_free(t);
    if (st != ALMA_OK) {
      for (int k = 0; k < n_outputs; k++) alma_tensor_free_data(&outputs[k]);
      return st;
    }
  }
  return ALMA_OK;
}

/* ---- per-node profile ----------------------------------------------------------------------- */
/* OpenVINO's executed layers carry the names of the graph's nodes they came from (its ONNX
 * frontend names an operator after the node, or after its first output when the node has no
 * name; a node it decomposes gives layers "<node>/..."); fused nodes leave no layer of their own,
 * and layers it adds (reorders between layouts) are named after no node: their time is kept
 * apart as unmapped, never given to a node. */
static int node_of_layer(const alma_graph *g, const char *layer) {
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].name[0] && !strcmp(g->nodes[i].name, layer)) return i;
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_outputs; k++) {
      int v = g->nodes[i].outputs[k];
      if (v >= 0 && !strcmp(g->values[v].name, layer)) return i;
    }
  int best = -1;
  size_t bl = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    size_t l = strlen(g->nodes[i].name);
    if (l > bl && !strncmp(g->nodes[i].name, layer, l) && layer[l] == '/') best = i, bl = l;
  }
  return best;
}

static void add_profile(ov_plan *p) {
  ov_profiling_info_list_t list = {0};
  if (ov.ov_infer_request_get_profiling_info(p->req, &list) != OK) return;
  p->prof_batches++;
  char *hit = calloc((size_t)p->g->n_nodes + 1, 1);
  for (size_t k = 0; k < list.size; k++) {
    const ov_profiling_info_t *e = &list.profiling_infos[k];
    if (e->status != EXECUTED) continue;
    double s = 1e-6 * (double)e->real_time;
    int i = e->node_name ? node_of_layer(p->g, e->node_name) : -1;
    if (i < 0) {
      p->unmapped_s += s;
      p->unmapped_layers++;
      continue;
    }
    p->prof_s[i] += s;
    if (hit && !hit[i]) p->prof_runs[i]++, hit[i] = 1;
  }
  free(hit);
  ov.ov_profiling_info_list_free(&list);
}

static alma_status ov_profile_start(void *plan) {
  ov_plan *p = plan;
  ALMA_TRY(alma__prof_counters(p->g->n_nodes, &p->prof_s, &p->prof_runs));
  p->prof_batches = 0;
  p->unmapped_s = 0;
  p->unmapped_layers = 0;
  /* PERF_COUNT is a compile setting: the profiled runs use a compilation of their own, so the
   * timed runs never paid for the counters. */
  p->profiling = 1;
  return ALMA_OK;
}

static alma_status ov_profile_read(void *plan, alma__prof_node *nodes) {
  ov_plan *p = plan;
  if (!p->prof_s) return alma__errorf(ALMA_ERR_INVALID_ARG, "OPENVINO: profile_read before profile_start");
  for (int i = 0; i < p->g->n_nodes; i++)
    nodes[i] = (alma__prof_node){.seconds = p->prof_s[i], .runs = p->prof_runs[i], .head = i, .members = 1,
                                 .where = p->prof_runs[i] ? "OPENVINO" : "OPENVINO (fused/folded)"};
  if (p->unmapped_layers)
    ALMA_LOGI("OPENVINO profile: %.3f ms per batch in %d layer runs named after no node of the graph (reorders, "
              "converts OpenVINO added): not given to any node", p->prof_batches ? 1e3 * p->unmapped_s / (double)p->prof_batches : 0.0,
              p->unmapped_layers);
  p->profiling = 0;
  return ALMA_OK;
}

static void ov_describe(void *plan, FILE *f) {
  ov_plan *p = plan;
  fprintf(f, "  OpenVINO %s on CPU (%s): the whole graph as one model, %d thread%s, 1 stream, no pinning, inference "
          "precision %s%s, compiled %d time%s\n", ov_version, device_name[0] ? device_name : "?", p->threads,
          p->threads == 1 ? "" : "s", p->precision[0] ? p->precision : (p->bf16 ? "bf16" : "f32"),
          p->dynamic ? ", reshaped to each run's input shapes" : "", p->compiles, p->compiles == 1 ? "" : "s");
}

/* The results' runtime_info: what OpenVINO says it is and what it was told. */
static alma_status ov_info(void *plan, char *json, size_t n) {
  ov_plan *p = plan;
  cJSON *o = cJSON_CreateObject();
  if (!o) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  cJSON_AddStringToObject(o, "openvino_version", ov_version);
  cJSON_AddStringToObject(o, "device", "CPU");
  cJSON_AddStringToObject(o, "device_name", device_name);
  cJSON_AddStringToObject(o, "inference_precision", p->precision[0] ? p->precision : (p->bf16 ? "bf16" : "f32"));
  cJSON_AddNumberToObject(o, "inference_num_threads", p->threads);
  cJSON_AddNumberToObject(o, "num_streams", 1);
  cJSON_AddStringToObject(o, "cpu_pinning", "NO");
  cJSON_AddStringToObject(o, "shapes", p->dynamic ? "reshaped to each run's inputs" : "static, as declared");
  cJSON_AddNumberToObject(o, "compiles", p->compiles);
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!text) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  size_t len = strlen(text);
  alma_status st = len < n ? ALMA_OK : alma__errorf(ALMA_ERR_INTERNAL, "OPENVINO: runtime info needs %zu bytes", len + 1);
  if (st == ALMA_OK) memcpy(json, text, len + 1);
  free(text);
  return st;
}

/* ---- availability --------------------------------------------------------------------------- */
static alma_status ov_init_f32(void) { return ov_load(); }

static alma_status ov_init_bf16(void) {
  ALMA_TRY(ov_load());
  /* the BF16 pass's test of the CPU: bf16 arithmetic (AVX512_BF16 or AMX), not emulation */
  const alma_pass *bf = alma__pass_find("BF16");
  if (bf && bf->available) {
    alma_status st = bf->available();
    if (st != ALMA_OK) return alma__error_prefix(st, "OPENVINO_BF16: ");
  }
  return ALMA_OK;
}

/* OpenVINO takes the graph entire (onnx_only): every node is its. */
static alma_status ov_placement(void *plan, alma__placement *nodes) {
  ov_plan *p = plan;
  alma__placement_fill(nodes, p->g->n_nodes, ALMA_PLACE_GRAPH);
  return ALMA_OK;
}

const alma_runtime alma__runtime_openvino = {
    .name = "OPENVINO",
    .description = "Intel OpenVINO (C API) on the CPU device: the whole graph as ONNX, compiled with inference "
                   "precision f32, threads from --threads",
    .init = ov_init_f32,
    .placement = ov_placement,
    .compile = ov_compile_f32,
    .run = ov_run,
    .free = ov_plan_free,
    .describe = ov_describe,
    .profile_start = ov_profile_start,
    .profile_read = ov_profile_read,
    .onnx_only = 1,
    .info = ov_info,
};

const alma_runtime alma__runtime_openvino_bf16 = {
    .name = "OPENVINO_BF16",
    .description = "OpenVINO with inference precision bf16 (INFERENCE_PRECISION_HINT): it runs the layers it can in "
                   "bfloat16 (AMX/AVX512_BF16), the rest in f32",
    .init = ov_init_bf16,
    .placement = ov_placement,
    .compile = ov_compile_bf16,
    .run = ov_run,
    .free = ov_plan_free,
    .describe = ov_describe,
    .profile_start = ov_profile_start,
    .profile_read = ov_profile_read,
    .onnx_only = 1,
    .info = ov_info,
    .lossy = 1,
};

#endif
