/* XNNPACK against EAGER on the models of make_models.py: for each model in DIR/manifest.txt it
 * checks the placement (nodes on XNNPACK, partitions) against the manifest, then runs random
 * inputs at batch 1, 3 and 1 again (a new shape signature, then the cached runtime) with 1 and 2
 * threads and compares every output with EAGER's.
 *
 * usage: xnnpack_vs_eager DIR
 * Error measure: max|xnn - eager| <= 1e-4 * max(1, max|eager|) (XNNPACK sums in another order and
 * its sigmoid/elu use polynomial approximations; a wrong kernel or layout errs by O(1)). */
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

static int check_plan(const alma_model *m, int want_nodes, int want_parts) {
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
  rt->free(plan);
  int nodes = -1, total = -1, parts = -1;
  const char *p = strstr(buf, "): ");
  if (p) sscanf(p, "): %d of %d nodes in %d partition", &nodes, &total, &parts);
  int ok = (want_nodes < 0 || nodes == want_nodes) && (want_parts < 0 || parts == want_parts);
  printf("  plan: %d of %d nodes on XNNPACK in %d partitions%s\n", nodes, total, parts, ok ? "" : "  <- MISMATCH");
  if (!ok) printf("%s", buf);
  free(buf);
  return ok;
}

static int compare(const char *what, const alma_tensor *got, const alma_tensor *ref) {
  if (!alma__same_shape(got, ref) || got->dtype != ref->dtype) {
    printf("  %s: shape or dtype differs\n", what);
    return 0;
  }
  int64_t n = alma_tensor_numel(ref);
  double max_err = 0, max_ref = 0;
  const float *a = got->data, *b = ref->data;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - b[i]);
    if (isnan(a[i]) != isnan(b[i])) e = INFINITY;
    if (e > max_err) max_err = e;
    if (fabs(b[i]) > max_ref) max_ref = fabs(b[i]);
  }
  int ok = max_err <= 1e-4 * (max_ref > 1 ? max_ref : 1);
  if (!ok) printf("  %s: max abs err %.3g (max |ref| %.3g)  <- MISMATCH\n", what, max_err, max_ref);
  return ok;
}

static int run_model(const char *path, int want_nodes, int want_parts) {
  alma_model *m = NULL;
  if (alma_model_load(path, &m) != ALMA_OK) {
    printf("  load failed: %s\n", alma_last_error());
    return 0;
  }
  int ok = check_plan(m, want_nodes, want_parts);
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
    static const int batches[] = {1, 3, 1};
    for (int bi = 0; bi < 3; bi++) {
      alma_tensor in[8], oe[8], ox[8];
      memset(in, 0, sizeof in);
      for (int i = 0; i < ni && i < 8; i++) {
        in[i].dtype = ALMA_DTYPE_FLOAT32;
        in[i].rank = alma_model_input_rank(m, i);
        int64_t n = 1;
        for (int k = 0; k < in[i].rank; k++) {
          int64_t d = alma_model_input_dim(m, i, k);
          in[i].dims[k] = d < 0 ? batches[bi] : d;
          n *= in[i].dims[k];
        }
        float *p = malloc(sizeof(float) * (size_t)n);
        for (int64_t j = 0; j < n; j++) p[j] = frand();
        in[i].data = p;
        in[i].nbytes = sizeof(float) * (size_t)n;
      }
      alma_status s1 = alma_session_run(se, in, ni, oe, no);
      alma_status s2 = s1 == ALMA_OK ? alma_session_run(sx, in, ni, ox, no) : s1;
      if (s1 != ALMA_OK || s2 != ALMA_OK) {
        printf("  batch %d, %d threads: run failed: %s\n", batches[bi], threads, alma_last_error());
        ok = 0;
      } else {
        for (int k = 0; k < no; k++) {
          char what[128];
          snprintf(what, sizeof what, "batch %d, %d threads, output '%s'", batches[bi], threads, alma_model_output_name(m, k));
          ok &= compare(what, &ox[k], &oe[k]);
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
    int nodes, parts;
    if (line[0] == '#' || sscanf(line, "%255s %d %d", name, &nodes, &parts) != 3) continue;
    snprintf(path, sizeof path, "%s/%s.onnx", argv[1], name);
    printf("%s\n", name);
    int ok = run_model(path, nodes, parts);
    printf("%s %s\n", ok ? "PASS" : "FAIL", name);
    n++;
    bad += !ok;
  }
  fclose(f);
  printf("xnnpack_vs_eager: %d models, %d failed\n", n, bad);
  return bad || !n;
}
