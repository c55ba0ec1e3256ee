/* DNNL against EAGER on the models make_models.py writes (and any other *.onnx in the directory):
 * for batch sizes 1 and 3, thread counts 1 and 2, conversions DNNL, FOLD+DNNL (and FOLD+FUSE+DNNL
 * when the FUSE pass is built), every output must match EAGER's within rtol 1e-4 / atol 1e-5, on a
 * first run (primitives created, weights reordered) and a second (cached primitives, pooled
 * buffers, in-place post-ops). The runtime is also driven through its vtable to check that oneDNN
 * really ran nodes and fused groups (a test that silently fell back to EAGER everywhere would prove
 * nothing); models named native_* must run every node on oneDNN (none on EAGER). The Winograd
 * convolution kernel is off here (dnnl.winograd=off): dnnl_wino_test checks it.
 *
 * bfloat16: each model also goes through the BF16 pass (ALMA_FORCE_BF16=1 where the CPU lacks
 * bf16) with DNNL (FOLD+BF16+DNNL, FOLD+FUSE+BF16+DNNL, FOLD+BF16+FUSE+DNNL) against the same pass
 * on EAGER (FOLD+BF16+EAGER, FOLD+FUSE+BF16+EAGER): both compute in bfloat16 with float32
 * accumulation, in different orders, so outputs agree to a few bfloat16 ulps of the output's
 * scale (max abs error <= 2% of max |EAGER|, cosine >= 0.9995). On a CPU with AVX512_BF16/AMX the
 * converted model with Conv/MatMul/Gemm must have run bfloat16 primitives; elsewhere none can be
 * created (oneDNN 2.6 has no bf16 kernels below AVX512) and every bf16 compute node falls back to
 * EAGER, the Casts staying native.
 *
 * usage: dnnl_vs_eager DIR [MODEL.onnx...]   (exit 1 on any mismatch) */
#ifdef ALMA_HAVE_DNNL
#include <math.h>

#include "alma/alma.h"
#include "core/core.h"
#include "dnnl_test_util.h"
#include "graph/model.h"
#include "passes/pass.h"
#include "runtimes/dnnl/dnnl_rt.h"
#include "runtimes/session.h"

static int bf16_cpu; /* the BF16 pass is available without ALMA_FORCE_BF16 */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull; /* the inputs' seed */

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

/* Outputs of two bfloat16 computations: close relative to the output's scale. */
static int compare_bf16(const char *what, const alma_tensor *got, const alma_tensor *want) {
  if (got->dtype != want->dtype || !alma__same_shape(got, want) || got->dtype != ALMA_DTYPE_FLOAT32) {
    printf("  %s: dtype or shape differs\n", what);
    return 0;
  }
  const float *a = got->data, *b = want->data;
  double scale = 0, err = 0, ab = 0, aa = 0, bb = 0;
  int64_t n = alma_tensor_numel(want), worst = 0;
  for (int64_t i = 0; i < n; i++) {
    if (fabs(b[i]) > scale) scale = fabs(b[i]);
    double e = fabs((double)a[i] - b[i]);
    if (!(e <= err)) err = e, worst = i; /* NaN counts as the worst */
    ab += (double)a[i] * b[i];
    aa += (double)a[i] * a[i];
    bb += (double)b[i] * b[i];
  }
  double cos = aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb ? 1.0 : 0.0);
  if (!(err <= 0.02 * scale + 1e-6) || !(cos >= 0.9995)) {
    printf("  %s: max abs err %.4g (element %lld: %.6g vs %.6g) of scale %.4g, cosine %.6f\n", what, err,
           (long long)worst, a[worst], b[worst], scale, cos);
    return 0;
  }
  return 1;
}

/* White box: the plan's counters after a run of graph g through the vtable; *eager: the nodes
 * its placement (as data) sends to EAGER's kernels, in some runs or all. */
static int check_native_g(const alma_graph *g, const alma_tensor *in, int nin, int nout, int64_t *native,
                          int64_t *fused, int64_t *bf16, int64_t *eager) {
  void *plan = NULL;
  int ok = dt_plan_run(g, 2, in, nin, nout, &plan);
  if (plan) {
    dn_plan *p = plan;
    *native = p->n_native;
    *fused = p->n_fused;
    if (bf16) *bf16 = p->n_native_bf16;
    alma__placement *pl = eager ? calloc((size_t)g->n_nodes + 1, sizeof *pl) : NULL;
    if (eager && (!pl || alma__runtime_find("DNNL")->placement(plan, pl) != ALMA_OK)) ok = 0;
    for (int i = 0; pl && ok && i < g->n_nodes; i++) *eager += alma__place_fell_back(pl[i].place);
    free(pl);
  }
  dt_plan_free(plan);
  return ok;
}

static int check_native(const alma_model *m, const alma_tensor *in, int nin, int nout, int64_t *native, int64_t *fused,
                        int64_t *eager) {
  return check_native_g(m->graph, in, nin, nout, native, fused, NULL, eager);
}

/* A node whose op type contains `op` (FusedConv, FusedMatMul ...), but not the integer forms
 * (QLinearConv, MatMulInteger ...), which the BF16 pass leaves as they are. */
static int has_op(const alma_graph *g, const char *op) {
  for (int i = 0; i < g->n_nodes; i++) {
    const char *t = g->nodes[i].op_type;
    if (strstr(t, op) && strncmp(t, "QLinear", 7) && !strstr(t, "Integer")) return 1;
  }
  return 0;
}

/* The BF16 pass through DNNL against the same pass through EAGER (see the top). */
static int test_bf16(const char *path, const alma_model *m, int batch, const alma_tensor *in, int nin, int nout) {
  static const char *convs[] = {"FOLD+BF16+DNNL", "FOLD+FUSE+BF16+DNNL", "FOLD+BF16+FUSE+DNNL"};
  static const char *refs[] = {"FOLD+BF16+EAGER", "FOLD+FUSE+BF16+EAGER", "FOLD+BF16+EAGER"};
  int nconv = alma__pass_find("FUSE") ? 3 : 1, ok = 1;
  for (int c = 0; c < nconv && ok; c++) {
    alma_tensor want[16], got[16];
    if (!dt_run_session(m, refs[c], 1, in, nin, want, nout, 1)) return 0;
    for (int threads = 1; threads <= 2 && ok; threads++) {
      if (!dt_run_session(m, convs[c], threads, in, nin, got, nout, 2)) {
        ok = 0;
        break;
      }
      for (int k = 0; k < nout; k++) {
        char what[256];
        snprintf(what, sizeof what, "%s batch %d threads %d output '%s' vs %s", convs[c], batch, threads,
                 alma_model_output_name(m, k), refs[c]);
        ok &= compare_bf16(what, &got[k], &want[k]);
        alma_tensor_free_data(&got[k]);
      }
    }
    for (int k = 0; k < nout; k++) alma_tensor_free_data(&want[k]);
    /* what ran natively, on the converted graph */
    alma_session *s = NULL;
    if (ok && alma_session_create(m, convs[c], dt_session_opts(), &s) != ALMA_OK) {
      printf("  %s: session: %s\n", convs[c], alma_last_error());
      ok = 0;
    }
    int64_t native = 0, fused = 0, bf16 = 0;
    if (ok && !check_native_g(alma__session_graph(s), in, nin, nout, &native, &fused, &bf16, NULL)) {
      printf("  %s: direct DNNL run failed: %s\n", convs[c], alma_last_error());
      ok = 0;
    }
    const alma_graph *g = s ? alma__session_graph(s) : NULL;
    int compute = g && (has_op(g, "Conv") || has_op(g, "MatMul") || has_op(g, "Gemm"));
    int casts = g && has_op(g, "Cast");
    if (ok) printf("%s batch %d %s: %lld nodes on oneDNN, %lld in bfloat16\n", path, batch, convs[c], (long long)native,
                   (long long)bf16);
    if (ok && bf16_cpu && compute && bf16 == 0) {
      printf("  %s: this CPU has bf16, but no bfloat16 primitive ran\n", convs[c]);
      ok = 0;
    }
    if (ok && !bf16_cpu && bf16 != 0) {
      printf("  %s: %lld bfloat16 primitives ran on a CPU without bf16 kernels?\n", convs[c], (long long)bf16);
      ok = 0;
    }
    if (ok && casts && native == 0) {
      printf("  %s: the Casts did not run on DNNL\n", convs[c]);
      ok = 0;
    }
    alma_session_free(s);
  }
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
    if (!dt_make_inputs(m, batch, in, &rng_state)) {
      printf("%s: inputs must be float32\n", path);
      ok = 0;
      break;
    }
    ok = dt_run_session(m, "EAGER", 1, in, nin, want, nout, 1);
    for (int c = 0; c < nconv && ok; c++)
      for (int threads = 1; threads <= 2 && ok; threads++) {
        if (!dt_run_session(m, convs[c], threads, in, nin, got, nout, 2)) {
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
    int64_t native = 0, fused = 0, eager = 0;
    if (ok && !check_native(m, in, nin, nout, &native, &fused, &eager)) {
      printf("  direct DNNL run failed: %s\n", alma_last_error());
      ok = 0;
    }
    if (ok && native == 0) {
      printf("  no node ran on oneDNN\n");
      ok = 0;
    }
    if (ok) printf("%s batch %d: %lld nodes on oneDNN, %lld fused groups, %lld on EAGER\n", path, batch,
                   (long long)native, (long long)fused, (long long)eager);
    const char *base = strrchr(path, '/');
    if (ok && !strncmp(base ? base + 1 : path, "native_", 7) && eager != 0) {
      printf("  expected every node on oneDNN\n");
      ok = 0;
    }
    if (ok && strstr(path, "resblock") && fused < 3) {
      printf("  expected at least 3 fused groups\n");
      ok = 0;
    }
    if (ok && alma__pass_find("BF16")) ok = test_bf16(path, m, batch, in, nin, nout);
    for (int k = 0; k < nin; k++) alma_tensor_free_data(&in[k]);
    for (int k = 0; k < nout && ok; k++) alma_tensor_free_data(&want[k]);
  }
  printf("%s: %s\n", path, ok ? "PASS" : "FAIL");
  alma_model_free(m);
  return ok;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR [MODEL.onnx...]\n", argv[0]);
    return 2;
  }
  char *names[256];
  int nn = 0;
  if (argc > 2) {
    for (int i = 2; i < argc && nn < 256; i++) names[nn++] = strdup(argv[i]);
  } else if ((nn = dt_list_models(argv[1], names, 256)) < 0) {
    return 2;
  }
  /* oneDNN's convolutions at this test's tight tolerance; the Winograd kernel, whose rounding
   * differs more from a direct convolution, has its own test (dnnl_wino_test.c) */
  /* and these small models' nodes stay on oneDNN at 2 threads too (the placement checks below) */
  dt_options = "dnnl.winograd=off,dnnl.tiny_eager=off";
  /* and their few-row Gemm/MatMul on oneDNN, not on EAGER's packed kernel (ops/gemm_packed.h) */
  setenv("ALMA_PACKED_GEMM", "0", 1);
  /* BF16 where the CPU has it, forced elsewhere (every bf16 primitive then falls back) */
  const alma_pass *bp = alma__pass_find("BF16");
  unsetenv("ALMA_FORCE_BF16");
  bf16_cpu = bp && (!bp->available || bp->available() == ALMA_OK);
  alma__error_clear();
  setenv("ALMA_FORCE_BF16", "1", 1);
  printf("BF16: %s\n", bf16_cpu ? "this CPU has bf16" : "forced (no bf16 on this CPU: bf16 compute falls back to EAGER)");
  return dt_test_all(argv[1], names, nn, test_model);
}
#else
int main(void) { return 77; }
#endif
