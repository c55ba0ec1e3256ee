/* XNNPACK against EAGER on the models of make_models.py: for each model in DIR/manifest.txt it
 * checks the placement (nodes on XNNPACK, partitions) against the manifest, then runs random
 * inputs at batch 1, 3, 17 and 1 again (new shape signatures, then the cached runtime) with 1 and 2
 * threads and compares every output with EAGER's.
 *
 * usage: xnnpack_vs_eager DIR
 * Error measure: max|xnn - eager| <= 1e-4 * max(1, max|eager|) (XNNPACK sums in another order and
 * its sigmoid/elu use polynomial approximations; a wrong kernel or layout errs by O(1)).
 *
 * int8 models (manifest lines with two to four more columns: the convolution/matmul nodes XNNPACK
 * must compute in int8, the quantization step S of the float outputs and, optionally, the Add
 * nodes and the MaxPool/Flatten/Reshape nodes it must compute on int8 values; -1: not checked;
 * S = -1: the outputs must be EAGER's exactly, for graphs where no value is rounded): XNNPACK's integer
 * requantization may land one step away from EAGER's float evaluation of the QDQ graph where a
 * value falls within float rounding of a half step, so float outputs must agree within
 * S * 1.001 + 1e-5 * max|eager| and 8-bit outputs within 1. uint8 / int8 inputs get uniform
 * random integers. An int8 model must also build every XNNPACK partition at batch 1 and 3: a
 * partition XNNPACK rejects runs its nodes on EAGER, which would hide a wrong translation behind
 * right outputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alma/alma.h"
#include "graph/model.h"
#include "runtimes/runtime.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 4.0f - 2.0f;
}

/* the count printed just before `what` in the plan description (0: not printed) */
static int plan_count(const char *buf, const char *what) {
  const char *p = strstr(buf, what);
  if (!p) return 0;
  while (p > buf && p[-1] >= '0' && p[-1] <= '9') p--;
  return atoi(p);
}

/* Nodes of the plan XNNPACK computes (placement as data: its own or folded into its operators),
 * and nodes XNNPACK refused to build for (sent to EAGER for those shapes). */
static void placed_counts(const alma_runtime *rt, void *plan, const alma_graph *g, int *on_xnn, int *refused) {
  alma__placement *pl = calloc((size_t)g->n_nodes + 1, sizeof *pl);
  *on_xnn = *refused = -1;
  if (!pl || rt->placement(plan, pl) != ALMA_OK) {
    free(pl);
    return;
  }
  *on_xnn = *refused = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    *on_xnn += pl[i].place == ALMA_PLACE_RUNTIME || pl[i].place == ALMA_PLACE_FUSED;
    *refused += pl[i].reason == ALMA_DECLINE_LIBRARY;
  }
  free(pl);
}

static int check_plan(const alma_model *m, int want_nodes, int want_parts, int want_q, int want_adds, int want_pools) {
  const alma_runtime *rt = alma__runtime_find("XNNPACK");
  alma_runtime_opts o = {.threads = 1};
  void *plan = NULL;
  if (!rt || rt->compile(m->graph, &o, &plan) != ALMA_OK) {
    printf("  compile failed: %s\n", alma_last_error());
    return 0;
  }
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  rt->describe(plan, f);
  fclose(f);
  int on_xnn = -1, refused = -1, nodes = -1, total = -1, parts = -1;
  placed_counts(rt, plan, m->graph, &on_xnn, &refused);
  rt->free(plan);
  /* partition membership is the plan's own detail (the manifest's counts), read from its
   * description; placement (as data) must agree: every partition node on XNNPACK, plus the
   * constants baked into its weights */
  const char *p = strstr(buf, "): ");
  if (p) sscanf(p, "): %d of %d nodes in %d partition", &nodes, &total, &parts);
  int qn = plan_count(buf, " convolution/matmul node"), qa = plan_count(buf, " Add node");
  int qp = plan_count(buf, " MaxPool/Flatten/Reshape node");
  int ok = on_xnn >= nodes && (want_nodes < 0 || nodes == want_nodes) && (want_parts < 0 || parts == want_parts) && (want_q < 0 || qn == want_q) &&
           (want_adds < 0 || qa == want_adds) && (want_pools < 0 || qp == want_pools);
  printf("  plan: %d of %d nodes on XNNPACK in %d partitions (%d placed on it), %d int8 conv/matmul, %d int8 Add, %d int8 "
         "pool/reshape%s\n",
         nodes, total, parts, on_xnn, qn, qa, qp, ok ? "" : "  <- MISMATCH");
  if (!ok) printf("%s", buf);
  free(buf);
  return ok;
}

static double elem(const alma_tensor *t, int64_t i) {
  switch (t->dtype) {
    case ALMA_DTYPE_UINT8: return ((const uint8_t *)t->data)[i];
    case ALMA_DTYPE_INT8: return ((const int8_t *)t->data)[i];
    default: return ((const float *)t->data)[i];
  }
}

/* step > 0: an int8 model's outputs (see the top) */
static int compare(const char *what, const alma_tensor *got, const alma_tensor *ref, double step) {
  if (!alma__same_shape(got, ref) || got->dtype != ref->dtype ||
      (ref->dtype != ALMA_DTYPE_FLOAT32 && ref->dtype != ALMA_DTYPE_UINT8 && ref->dtype != ALMA_DTYPE_INT8)) {
    printf("  %s: shape or dtype differs (or not float32/uint8/int8)\n", what);
    return 0;
  }
  int64_t n = alma_tensor_numel(ref);
  double max_err = 0, max_ref = 0;
  for (int64_t i = 0; i < n; i++) {
    double a = elem(got, i), b = elem(ref, i), e = fabs(a - b);
    if (isnan(a) != isnan(b)) e = INFINITY;
    if (e > max_err) max_err = e;
    if (fabs(b) > max_ref) max_ref = fabs(b);
  }
  double tol = 1e-4 * (max_ref > 1 ? max_ref : 1);
  if (step > 0) tol = ref->dtype == ALMA_DTYPE_FLOAT32 ? step * 1.001 + 1e-5 * max_ref : 1;
  if (step < 0) tol = 0;
  int ok = max_err <= tol;
  if (!ok) printf("  %s: max abs err %.3g (max |ref| %.3g)  <- MISMATCH\n", what, max_err, max_ref);
  return ok;
}

/* random inputs for the model's inputs with symbolic dims bound to `batch` (caller frees .data) */
static void make_inputs(const alma_model *m, int batch, alma_tensor *in) {
  int ni = alma_model_num_inputs(m);
  memset(in, 0, sizeof(alma_tensor) * (size_t)(ni < 8 ? ni : 8));
  for (int i = 0; i < ni && i < 8; i++) {
    alma_dtype dt = alma_model_input_dtype(m, i);
    in[i].dtype = dt == ALMA_DTYPE_UINT8 || dt == ALMA_DTYPE_INT8 ? dt : ALMA_DTYPE_FLOAT32;
    in[i].rank = alma_model_input_rank(m, i);
    int64_t n = 1;
    for (int k = 0; k < in[i].rank; k++) {
      int64_t d = alma_model_input_dim(m, i, k);
      in[i].dims[k] = d < 0 ? batch : d;
      n *= in[i].dims[k];
    }
    size_t es = in[i].dtype == ALMA_DTYPE_FLOAT32 ? sizeof(float) : 1;
    void *p = malloc(es * (size_t)n + 1);
    for (int64_t j = 0; j < n; j++) {
      float r = frand(); /* [-2, 2) */
      if (in[i].dtype == ALMA_DTYPE_FLOAT32) ((float *)p)[j] = r;
      else if (in[i].dtype == ALMA_DTYPE_UINT8) ((uint8_t *)p)[j] = (uint8_t)(int)((r + 2.0f) * 64.0f);
      else ((int8_t *)p)[j] = (int8_t)(int)floorf(r * 64.0f);
    }
    in[i].data = p;
    in[i].nbytes = es * (size_t)n;
  }
}

/* int8 models: every partition builds for batch 1 and 3 (the plan's description names a shape
 * signature XNNPACK rejected) */
static int check_builds(const alma_model *m) {
  const alma_runtime *rt = alma__runtime_find("XNNPACK");
  alma_runtime_opts o = {.threads = 1};
  void *plan = NULL;
  if (!rt || rt->init() != ALMA_OK || rt->compile(m->graph, &o, &plan) != ALMA_OK) {
    printf("  compile failed: %s\n", alma_last_error());
    return 0;
  }
  int ok = 1, ni = alma_model_num_inputs(m), no = alma_model_num_outputs(m);
  for (int batch = 1; batch <= 3 && ok; batch += 2) {
    alma_tensor in[8], out[8];
    make_inputs(m, batch, in);
    memset(out, 0, sizeof out);
    if (rt->run(plan, in, ni, out, no) != ALMA_OK) {
      printf("  batch %d: run failed: %s\n", batch, alma_last_error());
      ok = 0;
    }
    for (int k = 0; k < no; k++) alma_tensor_free_data(&out[k]);
    for (int i = 0; i < ni && i < 8; i++) free(in[i].data);
  }
  int on_xnn = -1, refused = -1;
  placed_counts(rt, plan, m->graph, &on_xnn, &refused);
  if (refused != 0) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    rt->describe(plan, f);
    fclose(f);
    printf("  a partition XNNPACK rejected (%d nodes on EAGER for it)  <- MISMATCH\n%s", refused, buf);
    free(buf);
    ok = 0;
  }
  rt->free(plan);
  return ok;
}

static int run_model(const char *path, int want_nodes, int want_parts, int want_q, int want_adds, int want_pools, double step) {
  alma_model *m = NULL;
  if (alma_model_load(path, &m) != ALMA_OK) {
    printf("  load failed: %s\n", alma_last_error());
    return 0;
  }
  int ok = check_plan(m, want_nodes, want_parts, want_q, want_adds, want_pools);
  if (want_q >= 0) ok &= check_builds(m);
  int ni = alma_model_num_inputs(m), no = alma_model_num_outputs(m);
  for (int threads = 1; threads <= 2; threads++) {
    alma_session_options so;
    alma_session_options_init(&so);
    so.threads = threads;
    alma_session *se = NULL, *sx = NULL;
    if (alma_session_create(m, "EAGER", &so, &se) != ALMA_OK || alma_session_create(m, "XNNPACK", &so, &sx) != ALMA_OK) {
      printf("  session failed: %s\n", alma_last_error());
      alma_session_free(se);
      alma_model_free(m);
      return 0;
    }
    /* 17: partitions of fully-connected nodes run EAGER's packed kernel up to 16 rows, XNNPACK's
     * fully_connected above (check_few_rows.py checks the few-row side against numpy) */
    static const int batches[] = {1, 3, 17, 1};
    for (int bi = 0; bi < 4; bi++) {
      alma_tensor in[8], oe[8], ox[8];
      make_inputs(m, batches[bi], in);
      alma_status s1 = alma_session_run(se, in, ni, oe, no);
      alma_status s2 = s1 == ALMA_OK ? alma_session_run(sx, in, ni, ox, no) : s1;
      if (s1 != ALMA_OK || s2 != ALMA_OK) {
        printf("  batch %d, %d threads: run failed: %s\n", batches[bi], threads, alma_last_error());
        ok = 0;
      } else {
        for (int k = 0; k < no; k++) {
          char what[128];
          snprintf(what, sizeof what, "batch %d, %d threads, output '%s'", batches[bi], threads, alma_model_output_name(m, k));
          ok &= compare(what, &ox[k], &oe[k], step);
          alma_tensor_free_data(&oe[k]);
          alma_tensor_free_data(&ox[k]);
        }
      }
      if (s1 == ALMA_OK && s2 != ALMA_OK)
        for (int k = 0; k < no; k++) alma_tensor_free_data(&oe[k]);
      for (int i = 0; i < ni && i < 8; i++) free(in[i].data);
    }
    alma_session_free(se);
    alma_session_free(sx);
  }
  alma_model_free(m);
  return ok;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: xnnpack_vs_eager DIR\n");
    return 2;
  }
  char path[4096], line[512];
  snprintf(path, sizeof path, "%s/manifest.txt", argv[1]);
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "xnnpack_vs_eager: cannot open %s\n", path);
    return 2;
  }
  int n = 0, bad = 0;
  while (fgets(line, sizeof line, f)) {
    char name[256];
    int nodes, parts, qn = -1, qa = -1, qp = -1;
    double step = 0;
    if (line[0] == '#' || sscanf(line, "%255s %d %d %d %lf %d %d", name, &nodes, &parts, &qn, &step, &qa, &qp) < 3) continue;
    snprintf(path, sizeof path, "%s/%s.onnx", argv[1], name);
    printf("%s\n", name);
    int ok = run_model(path, nodes, parts, qn, qa, qp, step);
    printf("%s %s\n", ok ? "PASS" : "FAIL", name);
    n++;
    bad += !ok;
  }
  fclose(f);
  printf("xnnpack_vs_eager: %d models, %d failed\n", n, bad);
  return bad || !n;
}
