/* The DNNL runtime's copy-free transposes and the groups around attention, on the models
 * make_strided_models.py writes:
 *
 * 1. DNNL and FOLD+FUSE+DNNL at batch 1 and 3, 1 and 2 threads, with dnnl.strided on (the default)
 *    and off (strided views and output-strides groups off), against EAGER;
 * 2. what ran, from the plan after a FOLD+FUSE+DNNL run at batch 3: Transposes whose output was a
 *    view (lazy strided views for Attention, or unit-axis moves), Slices and Reshapes whose output
 *    was a strided view on the way to Attention, Attention+Transpose groups
 *    (DP_PERM) and alma.Fused* heads whose residual-sum group ran, against NAME.expect; at batch 1
 *    also the views (a sequence-first Transpose of a batch-1 tensor moves only the unit axis).
 *    With dnnl.strided=off no lazy view or DP_PERM group may run.
 *
 * Tolerance: each element within 1e-5 of the output's largest value plus 1e-5 of its own (the same
 * float32 products in another order than EAGER's).
 *
 * usage: dnnl_strided_test DIR   (exit 1 on failure) */
#ifdef ALMA_HAVE_DNNL
#include <math.h>

#include "alma/alma.h"
#include "core/core.h"
#include "dnnl_test_util.h"
#include "graph/model.h"
#include "runtimes/dnnl/dnnl_rt.h"
#include "runtimes/session.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

typedef struct ran {
  int views, lazy, perm, selfsum, moves;
} ran;

/* Runs g through DNNL's vtable and counts what ran (see ran). */
static int count_ran(const alma_graph *g, const alma_tensor *in, int nin, int nout, ran *r) {
  void *plan = NULL;
  int ok = dt_plan_run(g, 2, in, nin, nout, &plan);
  memset(r, 0, sizeof *r);
  for (int i = 0; plan && i < g->n_nodes; i++) {
    const dn_node *d = &((dn_plan *)plan)->nodes[i];
    if (d->kind == DK_TRANSPOSE && d->n_view > 0) {
      r->views++;
      r->lazy += d->lazy_view;
    }
    if ((d->kind == DK_SLICE || d->kind == DK_VIEW) && d->lazy_view && d->n_view > 0) r->moves++;
    if (d->head != i || d->n_group <= 0) continue;
    for (int k = 0; k < d->npost; k++) {
      if (d->post[k].type == DP_PERM) r->perm++;
      if (d->self_fused && k >= d->nself && d->post[k].type == DP_SUM) r->selfsum++;
    }
  }
  dt_plan_free(plan);
  return ok;
}

static int read_expect(const char *path, int *e) {
  char name[1024];
  size_t n = strlen(path);
  if (n < 5 || n + 8 > sizeof name) return 0;
  snprintf(name, sizeof name, "%.*s.expect", (int)(n - 5), path);
  FILE *f = fopen(name, "r");
  if (!f) return 0;
  int ok = fscanf(f, "%d %d %d %d", &e[0], &e[1], &e[2], &e[3]) == 4;
  fclose(f);
  return ok;
}

/* want -1: the residual sum may or may not fuse (oneDNN's choice by ISA: 2.6's gemm matmul takes a
 * sum only as its first post-op, its AVX-512 brgemm matmul takes it after an eltwise too) */
static int sums_ok(int got, int want) { return want < 0 ? got == 0 || got == 1 : got == want; }

static int run_checks(alma_model *m, int batch, const char *strided, const int *expect) {
  int nin = alma_model_num_inputs(m), nout = alma_model_num_outputs(m), ok = 1;
  static const char *convs[] = {"DNNL", "FOLD+FUSE+DNNL"};
  alma_tensor in[16], want[16], got[16];
  double worst = 0;
  memset(in, 0, sizeof in);
  dt_options = strided;
  if (!dt_make_inputs(m, batch, in, &rng_state)) return 0;
  ok = dt_run_session(m, "EAGER", 1, in, nin, want, nout, 1);
  for (int c = 0; c < 2 && ok; c++)
    for (int threads = 1; threads <= 2 && ok; threads++) {
      if (!dt_run_session(m, convs[c], threads, in, nin, got, nout, 2)) ok = 0;
      else if (!dt_outputs_close(m, convs[c], batch, threads, got, want, nout, 1e-5, &worst)) ok = 0;
    }
  alma_session *s = NULL;
  ran r;
  if (ok && (alma_session_create(m, "FOLD+FUSE+DNNL", dt_session_opts(), &s) != ALMA_OK ||
             !count_ran(alma__session_graph(s), in, nin, nout, &r))) {
    printf("  direct DNNL run failed: %s\n", alma_last_error());
    ok = 0;
  }
  alma_session_free(s);
  if (ok) {
    printf("  batch %d, %s: %d transposes as views (%d strided), %d slices/reshapes as strided "
           "views, %d attention+transpose, %d fused residual sums; max abs err %.3g of the output's scale\n",
           batch, strided ? strided : "dnnl.strided on (default)", r.views, r.lazy, r.moves, r.perm, r.selfsum, worst);
    int off = strided != NULL;
    if (off ? r.lazy || r.moves || r.perm || !sums_ok(r.selfsum, expect[2])
            : r.perm != expect[1] || !sums_ok(r.selfsum, expect[2]) || r.moves != expect[3] ||
                  (batch == 3 && r.views != expect[0])) {
      printf("  expected %d transpose views (batch 3), %d attention+transpose, %d fused residual sums, %d slice/reshape "
             "views%s\n", expect[0], off ? 0 : expect[1], expect[2], off ? 0 : expect[3], off ? ", no strided view" : "");
      ok = 0;
    }
    if (batch == 1 && !off && r.views < expect[0]) {
      printf("  expected at least %d views at batch 1\n", expect[0]);
      ok = 0;
    }
  }
  for (int k = 0; k < nin; k++) alma_tensor_free_data(&in[k]);
  for (int k = 0; k < nout; k++) alma_tensor_free_data(&want[k]);
  return ok;
}

static int test_model(const char *path) {
  int expect[4];
  if (!read_expect(path, expect)) {
    printf("%s: no readable .expect next to it\n", path);
    return 0;
  }
  alma_model *m = NULL;
  if (alma_model_load(path, &m) != ALMA_OK) {
    printf("%s: load failed: %s\n", path, alma_last_error());
    return 0;
  }
  int ok = alma_model_num_inputs(m) <= 16 && alma_model_num_outputs(m) <= 16;
  printf("%s\n", path);
  for (int batch = 1; batch <= 3 && ok; batch += 2) {
    ok = run_checks(m, batch, NULL, expect);
    if (ok) ok = run_checks(m, batch, "dnnl.strided=off", expect);
  }
  printf("%s: %s\n", path, ok ? "PASS" : "FAIL");
  alma_model_free(m);
  return ok;
}

/* ---- alma__dn_reshape_strides against brute force ------------------------------------------------
 * Random strided views (a dense tensor's axes permuted, one axis sliced) reshaped to random dims of
 * the same count. Brute force: the element offset of each row-major index through the view; the
 * new dims are viewable iff the strides read off unit steps (the offset of one step along each new
 * dim) reproduce every offset. alma__dn_reshape_strides must say viewable exactly then, with
 * strides giving every offset. */
static int64_t view_offset(int r, const int64_t *d, const int64_t *st, int64_t l) {
  int64_t off = 0;
  for (int i = r - 1; i >= 0; i--) {
    off += (l % d[i]) * st[i];
    l /= d[i];
  }
  return off;
}

static int reshape_unit(void) {
  uint64_t rng = 0x1234567ull;
  int bad = 0, viewable = 0, tried = 0;
  for (int t = 0; t < 20000 && bad < 5; t++) {
    int r = 1 + (int)(dt_urand(&rng) * 5);
    int64_t bd[6], bs[6], vd[6], vs[6];
    for (int i = 0; i < r; i++) bd[i] = 1 + (int64_t)(dt_urand(&rng) * 4);
    int sl = (int)(dt_urand(&rng) * r); /* a slice along axis sl of the base: strides kept, dims cut */
    int64_t full = bd[sl];
    bd[sl] += (int64_t)(dt_urand(&rng) * 3); /* the base is wider there */
    bs[r - 1] = 1;
    for (int i = r - 2; i >= 0; i--) bs[i] = bs[i + 1] * bd[i + 1];
    int perm[6];
    for (int i = 0; i < r; i++) perm[i] = i;
    for (int i = r - 1; i > 0; i--) {
      int j = (int)(dt_urand(&rng) * (i + 1)), tmp = perm[i];
      perm[i] = perm[j];
      perm[j] = tmp;
    }
    for (int i = 0; i < r; i++) {
      vd[i] = perm[i] == sl ? full : bd[perm[i]];
      vs[i] = bs[perm[i]];
    }
    int64_t n = alma__numel(r, vd);
    int64_t nd[6], nst[6], want[6];
    int nr = 0;
    for (int64_t left = n; nr < 5 && (left > 1 || nr == 0);) { /* random factors of n */
      int64_t f = left;
      for (int k = 0; k < 3; k++) {
        int64_t c = 2 + (int64_t)(dt_urand(&rng) * 4);
        if (left % c == 0) {
          f = c;
          break;
        }
      }
      if (nr == 4) f = left;
      nd[nr++] = f;
      left /= f;
    }
    if (dt_urand(&rng) < 0.3 && nr < 6) { /* a unit dim somewhere */
      int at = (int)(dt_urand(&rng) * (nr + 1));
      for (int i = nr; i > at; i--) nd[i] = nd[i - 1];
      nd[at] = 1;
      nr++;
    }
    /* brute force */
    int64_t inner = 1;
    for (int j = nr - 1; j >= 0; j--) {
      want[j] = nd[j] > 1 ? view_offset(r, vd, vs, inner) - view_offset(r, vd, vs, 0) : 0;
      inner *= nd[j];
    }
    int ok = 1;
    for (int64_t l = 0; l < n && ok; l++) ok = view_offset(r, vd, vs, l) == view_offset(nr, nd, want, l);
    int got = alma__dn_reshape_strides(r, vd, vs, nr, nd, nst);
    int right = got == ok;
    for (int64_t l = 0; l < n && right && got; l++) right = view_offset(r, vd, vs, l) == view_offset(nr, nd, nst, l);
    tried++;
    viewable += ok;
    if (!right) {
      bad++;
      printf("reshape_strides: view dims");
      for (int i = 0; i < r; i++) printf(" %lld/%lld", (long long)vd[i], (long long)vs[i]);
      printf(" -> dims");
      for (int j = 0; j < nr; j++) printf(" %lld", (long long)nd[j]);
      printf(": said %s, brute force %s\n", got ? "viewable" : "copy", ok ? "viewable" : "copy");
    }
  }
  printf("reshape_strides: %d random reshapes of strided views (%d viewable): %s\n", tried, viewable,
         bad ? "FAIL" : "PASS");
  return !bad;
}

int main(int argc, char **argv) {
  /* the fusion checks want oneDNN's matmul groups: a few-row MatMul on constant weights would run on
   * EAGER's packed kernel instead (ops/gemm_packed.h) */
  setenv("ALMA_PACKED_GEMM", "0", 1);
  if (!reshape_unit()) return 1;
  return dt_main(argc, argv, test_model);
}
#else
int main(void) { return 77; }
#endif
