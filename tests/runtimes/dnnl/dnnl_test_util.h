/* Helpers shared by the DNNL runtime's test programs (dnnl_vs_eager.c, dnnl_int8_test.c,
 * dnnl_wino_test.c, dnnl_dwfuse_test.c): seeded normal inputs, a tolerance check, a session run a
 * given number of times, a white-box run of the runtime's plan, the sorted *.onnx files of a directory. Static inline so that each program
 * takes only what it uses, warning-free. */
#ifndef ALMA_TESTS_DNNL_TEST_UTIL_H
#define ALMA_TESTS_DNNL_TEST_UTIL_H

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alma/alma.h"
#include "core/core.h"
#include "runtimes/runtime.h"

/* xorshift64 uniform in (0, 1); each program keeps its own state (and seed). */
static inline double dt_urand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return ((*s >> 11) + 0.5) / 9007199254740992.0;
}

static inline float dt_nrand(uint64_t *s) {
  return (float)(sqrt(-2 * log(dt_urand(s))) * cos(6.283185307179586 * dt_urand(s)));
}

/* Whether every a[i] is within tol * max|b| + tol * |b[i]| (+1e-7) of b[i]; *rel: max |a - b| / max |b|.
 * NaN anywhere fails. */
static inline int dt_close(const float *a, const float *b, int64_t n, double tol, double *rel) {
  double scale = 0, err = 0;
  for (int64_t i = 0; i < n; i++)
    if (fabs(b[i]) > scale) scale = fabs(b[i]);
  int ok = 1;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - b[i]);
    if (!(e <= err)) err = e;
    if (!(e <= tol * scale + tol * fabs(b[i]) + 1e-7)) ok = 0;
  }
  *rel = scale > 0 ? err / scale : err;
  return ok;
}

/* Standard normal float32 inputs for m, free dimensions: batch for the first, 1 for the others.
 * 0 when an input is not float32 (or allocation fails). */
static inline int dt_make_inputs(const alma_model *m, int batch, alma_tensor *in, uint64_t *rng) {
  for (int i = 0; i < alma_model_num_inputs(m); i++) {
    int rank = alma_model_input_rank(m, i);
    int64_t dims[ALMA_MAX_RANK];
    for (int k = 0; k < rank; k++) {
      int64_t d = alma_model_input_dim(m, i, k);
      dims[k] = d >= 0 ? d : k == 0 ? batch : 1;
    }
    if (alma_model_input_dtype(m, i) != ALMA_DTYPE_FLOAT32 ||
        alma__tensor_alloc(&in[i], ALMA_DTYPE_FLOAT32, rank, dims) != ALMA_OK)
      return 0;
    float *p = in[i].data;
    for (int64_t k = 0; k < alma_tensor_numel(&in[i]); k++) p[k] = dt_nrand(rng);
  }
  return 1;
}

/* Compares conversion conv's outputs got (then freed) with want, each element within dt_close's
 * tol, printing each output that is not; *worst: the largest relative error seen so far. */
static inline int dt_outputs_close(const alma_model *m, const char *conv, int batch, int threads, alma_tensor *got,
                                   const alma_tensor *want, int nout, double tol, double *worst) {
  int ok = 1;
  for (int k = 0; k < nout; k++) {
    double rel = INFINITY;
    if (!alma__same_shape(&got[k], &want[k]) ||
        !dt_close(got[k].data, want[k].data, alma_tensor_numel(&want[k]), tol, &rel)) {
      printf("  %s batch %d threads %d output '%s': max abs err %.3g of scale\n", conv, batch, threads,
             alma_model_output_name(m, k), rel);
      ok = 0;
    }
    if (rel > *worst) *worst = rel;
    alma_tensor_free_data(&got[k]);
  }
  return ok;
}

/* Runtime options (--runtime-option text, "dnnl.strided=off") the helpers below compile with;
 * NULL: the defaults. */
static const char *dt_options __attribute__((unused)) = NULL;

/* Session options with dt_options (valid until the next call). */
static inline const alma_session_options *dt_session_opts(void) {
  static alma_session_options o;
  alma_session_options_init(&o);
  o.runtime_options = dt_options;
  return &o;
}

/* White box: compiles graph g for the DNNL runtime with `threads` and runs it once on in (its
 * outputs freed); *plan (a dn_plan) stays for the caller to read, then dt_plan_free. 0 when
 * compiling or running fails. */
static inline int dt_plan_run(const alma_graph *g, int threads, const alma_tensor *in, int nin, int nout, void **plan) {
  const alma_runtime *rt = alma__runtime_find("DNNL");
  alma_runtime_opts ro = {.threads = threads, .options = dt_options};
  *plan = NULL;
  if (!rt || nout > 16 || rt->compile(g, &ro, plan) != ALMA_OK) return 0;
  alma_tensor out[16];
  memset(out, 0, sizeof out);
  int ok = rt->run(*plan, in, nin, out, nout) == ALMA_OK;
  for (int k = 0; k < nout; k++) alma_tensor_free_data(&out[k]);
  return ok;
}

static inline void dt_plan_free(void *plan) {
  if (plan) alma__runtime_find("DNNL")->free(plan);
}

/* Runs conversion conv `runs` times on one session (later runs see cached primitives and pooled
 * buffers); out holds the last run's outputs. */
static inline int dt_run_session(const alma_model *m, const char *conv, int threads, const alma_tensor *in, int nin,
                                 alma_tensor *out, int nout, int runs) {
  alma_session_options o;
  alma_session_options_init(&o);
  o.threads = threads;
  o.runtime_options = dt_options;
  alma_session *s = NULL;
  if (alma_session_create(m, conv, &o, &s) != ALMA_OK) {
    printf("  %s: session: %s\n", conv, alma_last_error());
    return 0;
  }
  int ok = 1;
  for (int r = 0; r < runs && ok; r++) {
    if (r)
      for (int k = 0; k < nout; k++) alma_tensor_free_data(&out[k]);
    if (alma_session_run(s, in, nin, out, nout) != ALMA_OK) {
      printf("  %s: run %d: %s\n", conv, r, alma_last_error());
      ok = 0;
    }
  }
  alma_session_free(s);
  return ok;
}

static inline int dt_cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The names (strdup'ed) of the *.onnx files in dir, sorted, at most max; -1 when dir cannot be opened. */
static inline int dt_list_models(const char *dir, char **names, int max) {
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "cannot open %s\n", dir);
    return -1;
  }
  int nn = 0;
  struct dirent *e;
  while ((e = readdir(d)) && nn < max) {
    size_t l = strlen(e->d_name);
    if (l > 5 && !strcmp(e->d_name + l - 5, ".onnx")) names[nn++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, (size_t)nn, sizeof *names, dt_cmp_names);
  return nn;
}

/* test(DIR/NAME) for each name (freeing it), then the summary line; the exit status: 1 when a
 * model failed or there were none. */
static inline int dt_test_all(const char *dir, char **names, int nn, int (*test)(const char *path)) {
  int fails = 0;
  for (int i = 0; i < nn; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    fails += !test(path);
    free(names[i]);
  }
  printf("%d models, %d failed\n", nn, fails);
  return nn == 0 || fails ? 1 : 0;
}

/* A test program's main over DIR's models: usage check, the models listed, test() on each. */
static inline int dt_main(int argc, char **argv, int (*test)(const char *path)) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  char *names[256];
  int nn = dt_list_models(argv[1], names, 256);
  if (nn <= 0) return 2;
  return dt_test_all(argv[1], names, nn, test);
}

#endif
