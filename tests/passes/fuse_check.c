/* Checks a conversion's graph passes on one model: node counts by op type before and after the
 * passes (with expectations), the graph's validity after them, and numeric equivalence of the
 * converted model with EAGER on the same inputs.
 *
 * usage: fuse_check [--conversion C] [--inputs DIR] [--expected DIR] [--load-fails TEXT] [--expect OP=N]...
 *                   [--tol T] [-v] MODEL.onnx
 *   --conversion  chain to check (default FUSE+EAGER); its passes are applied to a copy of the graph
 *   --inputs      DIR/input_<i>.npy feed the run; otherwise random inputs (symbolic dims = 2)
 *   --expected    the converted model's outputs must also match DIR/output_<i>.npy (e.g. numpy's)
 *   --load-fails  the model must fail to load with a message containing TEXT (bad fused nodes)
 *   --expect      after the passes the graph has exactly N nodes of OP ("Conv", "alma.FusedConv",
 *                 "*" = all nodes); repeatable
 *   --tol         max |converted - EAGER| / max |EAGER| per output (default 1e-4)
 * Exit status 0 when every check holds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conversions/conversions.h"
#include "graph/model.h"

typedef struct count {
  char op[128];
  int n;
} count;

static int count_ops(const alma_graph *g, count *c, int cap) {
  int k = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    char key[128];
    const alma_node *n = &g->nodes[i];
    snprintf(key, sizeof key, "%s%s%s", n->domain[0] ? n->domain : "", n->domain[0] ? "." : "", n->op_type);
    int j = 0;
    while (j < k && strcmp(c[j].op, key)) j++;
    if (j == k) {
      if (k == cap) continue;
      snprintf(c[k].op, sizeof c[k].op, "%s", key);
      c[k++].n = 0;
    }
    c[j].n++;
  }
  return k;
}

static void print_counts(const char *what, int total, const count *c, int k) {
  printf("%s: %d nodes:", what, total);
  for (int i = 0; i < k; i++) printf(" %s=%d", c[i].op, c[i].n);
  printf("\n");
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

static int make_inputs(const alma_model *m, const char *dir, alma_tensor *in) {
  for (int i = 0; i < alma_model_num_inputs(m); i++) {
    if (dir) {
      char p[1200];
      snprintf(p, sizeof p, "%s/input_%d.npy", dir, i);
      if (alma_npy_load(p, &in[i]) != ALMA_OK) {
        printf("cannot load %s: %s\n", p, alma_last_error());
        return 0;
      }
      continue;
    }
    int64_t dims[ALMA_MAX_RANK];
    int r = alma_model_input_rank(m, i);
    for (int k = 0; k < r; k++) dims[k] = alma_model_input_dim(m, i, k) >= 0 ? alma_model_input_dim(m, i, k) : 2;
    alma_dtype dt = alma_model_input_dtype(m, i);
    if (alma__tensor_alloc(&in[i], dt, r, dims) != ALMA_OK) return 0;
    for (int64_t j = 0; j < alma_tensor_numel(&in[i]); j++) {
      if (alma__dtype_is_float(dt)) alma__set_f64(in[i].data, dt, j, 2 * urand() - 1);
      else alma__set_i64(in[i].data, dt, j, (int64_t)(urand() * 4));
    }
  }
  return 1;
}

/* max |got - ref| / max |ref| <= tol; prints one line. */
static int compare(const char *name, const char *who, const char *vs, const alma_tensor *got, const alma_tensor *ref,
                   double tol) {
  if (!alma__same_shape(ref, got) || ref->dtype != got->dtype) {
    char a[128], b[128];
    printf("output %s: %s gives %s %s, %s %s %s  FAIL\n", name, who, alma_dtype_name(got->dtype),
           alma__shape_str(got->rank, got->dims, a, sizeof a), vs, alma_dtype_name(ref->dtype),
           alma__shape_str(ref->rank, ref->dims, b, sizeof b));
    return 0;
  }
  double max_err = 0, max_ref = 0;
  int nan = 0;
  for (int64_t i = 0; i < alma_tensor_numel(ref); i++) {
    double a = alma__get_f64(got->data, got->dtype, i), b = alma__get_f64(ref->data, ref->dtype, i);
    if (isnan(a) || isnan(b)) {
      nan += isnan(a) != isnan(b);
      continue;
    }
    if (fabs(a - b) > max_err) max_err = fabs(a - b);
    if (fabs(b) > max_ref) max_ref = fabs(b);
  }
  double rel = max_ref > 0 ? max_err / max_ref : max_err;
  int good = !nan && rel <= tol;
  printf("output %s: %s vs %s rel err %.2e (max abs %.2e)%s\n", name, who, vs, rel, max_err, good ? "" : "  FAIL");
  return good;
}

static int run(const alma_model *m, const char *conv, const alma_tensor *in, alma_tensor *out) {
  alma_session *s = NULL;
  alma_session_options o;
  alma_session_options_init(&o);
  o.threads = 1;
  alma_status st = alma_session_create(m, conv, &o, &s);
  if (st == ALMA_OK) st = alma_session_run(s, in, alma_model_num_inputs(m), out, alma_model_num_outputs(m));
  if (st != ALMA_OK) printf("%s failed: %s: %s\n", conv, alma_status_name(st), alma_last_error());
  alma_session_free(s);
  return st == ALMA_OK;
}

int main(int argc, char **argv) {
  const char *conversion = "FUSE+EAGER", *inputs_dir = NULL, *expected_dir = NULL, *load_fails = NULL, *path = NULL;
  const char *expect[64];
  int n_expect = 0, verbose = 0;
  double tol = 1e-4;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--conversion") && i + 1 < argc) conversion = argv[++i];
    else if (!strcmp(argv[i], "--inputs") && i + 1 < argc) inputs_dir = argv[++i];
    else if (!strcmp(argv[i], "--expected") && i + 1 < argc) expected_dir = argv[++i];
    else if (!strcmp(argv[i], "--load-fails") && i + 1 < argc) load_fails = argv[++i];
    else if (!strcmp(argv[i], "--expect") && i + 1 < argc && n_expect < 64) expect[n_expect++] = argv[++i];
    else if (!strcmp(argv[i], "--tol") && i + 1 < argc) tol = atof(argv[++i]);
    else if (!strcmp(argv[i], "-v")) verbose = 1;
    else if (argv[i][0] != '-' && !path) path = argv[i];
    else {
      fprintf(stderr, "usage: %s [--conversion C] [--inputs DIR] [--expected DIR] [--load-fails TEXT] [--expect OP=N]... "
              "[--tol T] [-v] MODEL.onnx\n", argv[0]);
      return 2;
    }
  }
  if (!path) return 2;
  alma_model *m = NULL;
  alma_status lst = alma_model_load(path, &m);
  if (load_fails) {
    int good = lst != ALMA_OK && strstr(alma_last_error(), load_fails);
    printf("%s: load %s%s%s\n", path, lst == ALMA_OK ? "succeeded" : "failed: ", lst == ALMA_OK ? "" : alma_last_error(),
           good ? "" : "  FAIL (expected a failure naming the problem)");
    alma_model_free(m);
    return good ? 0 : 1;
  }
  if (lst != ALMA_OK) {
    printf("%s: load failed: %s\n", path, alma_last_error());
    return 1;
  }
  int ok = 1;
  alma_conversion conv;
  alma_graph *g = NULL;
  if (alma__conversion_parse(conversion, &conv) != ALMA_OK || alma__graph_clone(m->graph, &g) != ALMA_OK) {
    printf("%s: %s\n", conversion, alma_last_error());
    return 1;
  }
  count before[256], after[256];
  int kb = count_ops(g, before, 256);
  print_counts("before", g->n_nodes, before, kb);
  alma_pass_opts po = {.verbose = verbose};
  for (int i = 0; i < conv.n_passes; i++)
    if (conv.passes[i]->run(g, &po) != ALMA_OK) {
      printf("pass %s failed: %s\n", conv.passes[i]->name, alma_last_error());
      return 1;
    }
  if (alma__graph_validate(g) != ALMA_OK) {
    printf("invalid graph after the passes: %s\n", alma_last_error());
    ok = 0;
  }
  for (int i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i].op || g->nodes[i].dead) {
      printf("node '%s' (%s) is %s after the passes\n", g->nodes[i].name, g->nodes[i].op_type,
             g->nodes[i].dead ? "dead" : "unresolved");
      ok = 0;
    }
  int ka = count_ops(g, after, 256);
  char what[300];
  snprintf(what, sizeof what, "after %s", conv.name);
  print_counts(what, g->n_nodes, after, ka);
  for (int e = 0; e < n_expect; e++) {
    char op[128];
    const char *eq = strchr(expect[e], '=');
    if (!eq || eq - expect[e] >= (long)sizeof op) {
      printf("bad --expect '%s'\n", expect[e]);
      return 2;
    }
    memcpy(op, expect[e], (size_t)(eq - expect[e]));
    op[eq - expect[e]] = '\0';
    int want = atoi(eq + 1), got = 0;
    if (!strcmp(op, "*")) got = g->n_nodes;
    for (int i = 0; i < ka && strcmp(op, "*"); i++)
      if (!strcmp(after[i].op, op)) got = after[i].n;
    if (got != want) {
      printf("expected %d %s node(s), found %d\n", want, op, got);
      ok = 0;
    }
  }
  alma__graph_free(g);

  int ni = alma_model_num_inputs(m), no = alma_model_num_outputs(m);
  alma_tensor *in = calloc((size_t)ni + 1, sizeof *in), *ref = calloc((size_t)no + 1, sizeof *ref),
              *got = calloc((size_t)no + 1, sizeof *got);
  if (!make_inputs(m, inputs_dir, in) || !run(m, "EAGER", in, ref) || !run(m, conversion, in, got)) {
    ok = 0;
  } else {
    for (int j = 0; j < no; j++) {
      ok &= compare(alma_model_output_name(m, j), conversion, "EAGER", &got[j], &ref[j], tol);
      if (expected_dir) {
        char p[1200];
        alma_tensor want;
        snprintf(p, sizeof p, "%s/output_%d.npy", expected_dir, j);
        if (alma_npy_load(p, &want) != ALMA_OK) {
          printf("cannot load %s: %s\n", p, alma_last_error());
          ok = 0;
          continue;
        }
        ok &= compare(alma_model_output_name(m, j), conversion, "expected", &got[j], &want, tol);
        alma_tensor_free_data(&want);
      }
    }
  }
  for (int i = 0; i < ni; i++) alma_tensor_free_data(&in[i]);
  for (int j = 0; j < no; j++) {
    alma_tensor_free_data(&ref[j]);
    alma_tensor_free_data(&got[j]);
  }
  free(in);
  free(ref);
  free(got);
  alma_model_free(m);
  printf("%s: %s\n", path, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
