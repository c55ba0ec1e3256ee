/* DNNL against EAGER on the models make_models.py writes (and any other *.onnx in the directory):
 * for batch sizes 1 and 3, thread counts 1 and 2, conversions DNNL, FOLD+DNNL (and FOLD+FUSE+DNNL
 * when the FUSE pass is built), every output must match EAGER's within rtol 1e-4 / atol 1e-5, on a
 * first run (primitives created, weights reordered) and a second (cached primitives, pooled
 * buffers, in-place post-ops). The runtime is also driven through its vtable to check that oneDNN
 * really ran nodes and fused groups (a test that silently fell back to EAGER everywhere would prove
 * nothing).
 *
 * usage: dnnl_vs_eager DIR [MODEL.onnx...]   (exit 1 on any mismatch) */
#ifdef ALMA_HAVE_DNNL
#include <dirent.h>
#include <math.h>

#include "alma/alma.h"
#include "core/core.h"
#include "graph/model.h"
#include "passes/pass.h"
#include "runtimes/dnnl/dnnl_rt.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return ((rng_state >> 11) + 0.5) / 9007199254740992.0;
}
static float nrand(void) { return (float)(sqrt(-2 * log(urand())) * cos(6.283185307179586 * urand())); }

static int make_inputs(const alma_model *m, int batch, alma_tensor *in) {
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
    for (int64_t k = 0; k < alma_tensor_numel(&in[i]); k++) p[k] = nrand();
  }
  return 1;
}

static int compare(const char *what, const alma_tensor *got, const alma_tensor *want) {
  char s1[128], s2[128];
  if (got->dtype != want->dtype || !alma__same_shape(got, want)) {
    printf("  %s: shape %s, expected %s\n", what, alma__shape_str(got->rank, got->dims, s1, sizeof s1),
           alma__shape_str(want->rank, want->dims, s2, sizeof s2));
    return 0;
  }
  const float *a = got->data, *b = want->data;
  for (int64_t i = 0; i < alma_tensor_numel(want); i++)
    if (!(fabs(a[i] - b[i]) <= 1e-5 + 1e-4 * fabs(b[i]))) {
      printf("  %s: element %lld: got %.8g, expected %.8g\n", what, (long long)i, a[i], b[i]);
      return 0;
    }
  return 1;
}

static int run_session(const alma_model *m, const char *conv, int threads, const alma_tensor *in, int nin,
                       alma_tensor *out, int nout, int runs) {
  alma_session_options o;
  alma_session_options_init(&o);
  o.threads = threads;
  alma_session *s = NULL;
  if (alma_session_create(m, conv, &o, &s) != ALMA_OK) {
    printf("  %s: session: %s\n", conv, alma_last_error());
    return 0;
  }
  int ok = 1;
  for (int r = 0; r < runs && ok; r++) {
    if (r) for (int k = 0; k < nout; k++) alma_tensor_free_data(&out[k]);
    if (alma_session_run(s, in, nin, out, nout) != ALMA_OK) {
      printf("  %s: run %d: %s\n", conv, r, alma_last_error());
      ok = 0;
    }
  }
  alma_session_free(s);
  return ok;
}

/* White box: the plan's counters after a run through the vtable. */
static int check_native(const alma_model *m, const alma_tensor *in, int nin, int nout, int64_t *native, int64_t *fused) {
  const alma_runtime *rt = alma__runtime_find("DNNL");
  alma_runtime_opts ro = {.threads = 2};
  void *plan = NULL;
  if (!rt || rt->compile(m->graph, &ro, &plan) != ALMA_OK) return 0;
  alma_tensor out[16];
  memset(out, 0, sizeof out);
  int ok = rt->run(plan, in, nin, out, nout) == ALMA_OK;
  dn_plan *p = plan;
  *native = p->n_native;
  *fused = p->n_fused;
  for (int k = 0; k < nout; k++) alma_tensor_free_data(&out[k]);
  rt->free(plan);
  return ok;
}

static int test_model(const char *path) {
  alma_model *m = NULL;
  if (alma_model_load(path, &m) != ALMA_OK) {
    printf("%s: load failed: %s\n", path, alma_last_error());
    return 0;
  }
  int nin = alma_model_num_inputs(m), nout = alma_model_num_outputs(m), ok = 1;
  if (nin > 16 || nout > 16) {
    alma_model_free(m);
    return 0;
  }
  /* FOLD+FUSE+DNNL also when this build has the FUSE pass (alma.Fused* and alma.Attention nodes) */
  static const char *convs[] = {"DNNL", "FOLD+DNNL", "FOLD+FUSE+DNNL"};
  int nconv = alma__pass_find("FUSE") ? 3 : 2;
  for (int batch = 1; batch <= 3 && ok; batch += 2) {
    alma_tensor in[16], want[16], got[16];
    memset(in, 0, sizeof in);
    if (!make_inputs(m, batch, in)) {
      printf("%s: inputs must be float32\n", path);
      ok = 0;
      break;
    }
    ok = run_session(m, "EAGER", 1, in, nin, want, nout, 1);
    for (int c = 0; c < nconv && ok; c++)
      for (int threads = 1; threads <= 2 && ok; threads++) {
        if (!run_session(m, convs[c], threads, in, nin, got, nout, 2)) {
          ok = 0;
          break;
        }
        for (int k = 0; k < nout; k++) {
          char what[256];
          snprintf(what, sizeof what, "%s batch %d threads %d output '%s'", convs[c], batch, threads,
                   alma_model_output_name(m, k));
          ok &= compare(what, &got[k], &want[k]);
          alma_tensor_free_data(&got[k]);
        }
      }
    int64_t native = 0, fused = 0;
    if (ok && !check_native(m, in, nin, nout, &native, &fused)) {
      printf("  direct DNNL run failed: %s\n", alma_last_error());
      ok = 0;
    }
    if (ok && native == 0) {
      printf("  no node ran on oneDNN\n");
      ok = 0;
    }
    if (ok) printf("%s batch %d: %lld nodes on oneDNN, %lld fused groups\n", path, batch, (long long)native, (long long)fused);
    if (ok && strstr(path, "resblock") && fused < 3) {
      printf("  expected at least 3 fused groups\n");
      ok = 0;
    }
    for (int k = 0; k < nin; k++) alma_tensor_free_data(&in[k]);
    for (int k = 0; k < nout && ok; k++) alma_tensor_free_data(&want[k]);
  }
  printf("%s: %s\n", path, ok ? "PASS" : "FAIL");
  alma_model_free(m);
  return ok;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR [MODEL.onnx...]\n", argv[0]);
    return 2;
  }
  char *names[256];
  int nn = 0;
  if (argc > 2) {
    for (int i = 2; i < argc && nn < 256; i++) names[nn++] = strdup(argv[i]);
  } else {
    DIR *d = opendir(argv[1]);
    if (!d) {
      fprintf(stderr, "cannot open %s\n", argv[1]);
      return 2;
    }
    struct dirent *e;
    while ((e = readdir(d)) && nn < 256) {
      size_t l = strlen(e->d_name);
      if (l > 5 && !strcmp(e->d_name + l - 5, ".onnx")) names[nn++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)nn, sizeof *names, cmp_names);
  }
  int fails = 0;
  for (int i = 0; i < nn; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", argv[1], names[i]);
    fails += !test_model(path);
    free(names[i]);
  }
  printf("%d models, %d failed\n", nn, fails);
  return nn == 0 || fails ? 1 : 0;
}
#else
int main(void) { return 77; }
#endif
