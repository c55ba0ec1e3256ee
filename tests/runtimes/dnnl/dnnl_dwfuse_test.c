/* The DNNL runtime's 1x1 + depthwise 3x3 convolution fusion (oneDNN's depthwise post-op;
 * plan_fuse_dw in dnnl_runtime.c, run_conv_dw in dnnl_conv.c), on the models
 * make_dwfuse_models.py writes, with dnnl.dw_fuse on (the default):
 *
 * 1. through DNNL (the runtime's own eltwise groups) and FOLD+FUSE+DNNL (alma.FusedConv nodes) at
 *    batch 1 and 3, 1 and 2 threads, against EAGER;
 * 2. what was fused, from the plan: fuse_* models must have a depthwise group that ran as one
 *    oneDNN primitive (a jit kernel), plan_* models a planned one (oneDNN may decline it: the parts
 *    then run apart, which 1. checks too), nofuse_* models none.
 *
 * Tolerance: each element within 1e-5 of the output's largest value plus 1e-5 of its own (the two
 * convolutions in float32, summed in another order than EAGER's; measured differences ~1e-7).
 *
 * usage: dnnl_dwfuse_test DIR   (exit 1 on failure) */
#ifdef ALMA_HAVE_DNNL
#include <math.h>

#include "alma/alma.h"
#include "core/core.h"
#include "dnnl_test_util.h"
#include "graph/model.h"
#include "runtimes/dnnl/dnnl_rt.h"
#include "runtimes/session.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* Runs graph g through DNNL's vtable (threads): *planned: groups with a depthwise post-op, *fused:
 * those whose fused primitive ran (not declined), impl: the first one's implementation. */
static int count_dw(const alma_graph *g, int threads, const alma_tensor *in, int nin, int nout, int *planned,
                    int *fused, char *impl, size_t nimpl) {
  void *plan = NULL;
  int ok = dt_plan_run(g, threads, in, nin, nout, &plan);
  *planned = *fused = 0;
  impl[0] = 0;
  for (int i = 0; plan && i < g->n_nodes; i++) {
    const dn_node *d = &((dn_plan *)plan)->nodes[i];
    if (d->head != i || !d->dw_at) continue;
    ++*planned;
    const dn_prim *pr = d->prim[DN_PRIM_DW];
    if (pr && pr->valid && !pr->declined && d->n_native > 0) {
      if (!*fused) snprintf(impl, nimpl, "%s", pr->impl);
      ++*fused;
    }
  }
  dt_plan_free(plan);
  return ok;
}

static int has_prefix(const char *path, const char *pre) {
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  return !strncmp(b, pre, strlen(pre));
}

static int test_model(const char *path) {
  alma_model *m = NULL;
  if (alma_model_load(path, &m) != ALMA_OK) {
    printf("%s: load failed: %s\n", path, alma_last_error());
    return 0;
  }
  int nin = alma_model_num_inputs(m), nout = alma_model_num_outputs(m), ok = nin <= 16 && nout <= 16;
  int want_fused = has_prefix(path, "fuse_"), want_planned = want_fused || has_prefix(path, "plan_");
  static const char *convs[] = {"DNNL", "FOLD+FUSE+DNNL"};
  double worst = 0;
  for (int batch = 1; batch <= 3 && ok; batch += 2) {
    alma_tensor in[16], want[16], got[16];
    memset(in, 0, sizeof in);
    if (!dt_make_inputs(m, batch, in, &rng_state)) return 0;
    ok = dt_run_session(m, "EAGER", 1, in, nin, want, nout, 1);
    for (int c = 0; c < 2 && ok; c++) {
      for (int threads = 1; threads <= 2 && ok; threads++) {
        if (!dt_run_session(m, convs[c], threads, in, nin, got, nout, 2)) {
          ok = 0;
          break;
        }
        if (!dt_outputs_close(m, convs[c], batch, threads, got, want, nout, 1e-5, &worst)) ok = 0;
        alma_session *s = NULL;
        int planned = 0, fused = 0;
        char impl[64];
        if (ok && (alma_session_create(m, convs[c], dt_session_opts(), &s) != ALMA_OK ||
                   !count_dw(alma__session_graph(s), threads, in, nin, nout, &planned, &fused, impl, sizeof impl))) {
          printf("  %s: direct DNNL run failed: %s\n", convs[c], alma_last_error());
          ok = 0;
        }
        alma_session_free(s);
        if (ok && ((want_planned && !planned) || (!want_planned && planned) || (want_fused && !fused))) {
          printf("  %s batch %d threads %d: %d depthwise groups planned, %d ran fused (want %s)\n", convs[c], batch,
                 threads, planned, fused, want_fused ? "fused" : want_planned ? "planned" : "none");
          ok = 0;
        }
        if (ok && fused) printf("  %s batch %d threads %d: %d of %d depthwise groups fused [%s]\n", convs[c], batch,
                                threads, fused, planned, impl);
      }
    }
    for (int k = 0; k < nin; k++) alma_tensor_free_data(&in[k]);
    for (int k = 0; k < nout && ok; k++) alma_tensor_free_data(&want[k]);
  }
  printf("%s: max abs err %.3g of the output's scale: %s\n", path, worst, ok ? "PASS" : "FAIL");
  alma_model_free(m);
  return ok;
}

int main(int argc, char **argv) {
  return dt_main(argc, argv, test_model);
}
#else
int main(void) { return 77; }
#endif
