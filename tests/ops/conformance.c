/* ONNX backend node conformance runner: for every case directory (model.onnx +
 * test_data_set_N/{input,output}_K.pb) it loads the model, runs it through a conversion (EAGER by
 * default) and compares with ONNX's expected outputs using ONNX's default tolerances
 * (rtol 1e-3, atol 1e-7, as onnx.backend.test's assert_allclose). A case is:
 *   PASS         every data set matched
 *   FAIL         a mismatch, or an error while running (a bug)
 *   UNSUPPORTED  the model uses an op/attribute/dtype alma rejects at load (reason printed)
 *   DEVIATION    a FAIL listed in --known FILE, where ONNX's expected data contradicts its own spec
 *                (each entry says why); reported, not hidden
 * Exit status is 1 if any case FAILs (or an --expect-pass case is not PASS), else 0.
 *
 * --csv FILE writes one row per case: its result and where its nodes ran (the session's placement
 * as data, after the runs: nodes on the conversion's runtime, fused into its kernels, on EAGER,
 * partly on EAGER, or taken by a whole-graph runtime), so a runtime's report says what the runtime
 * itself computed, not what EAGER computed for it (scripts/conformance-report.py). */
#include <dirent.h>
#include <fnmatch.h>
#include <math.h>
#include <sys/stat.h>

#include "alma/alma.h"
#include "core/core.h"
#include "onnx/onnx.h"
#include "runtimes/session.h"

typedef struct {
  const char *conversion;
  int verbose;
  double rtol, atol;
} opts_t;

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static char **read_list(const char *path, size_t *n_out) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "alma_conformance: cannot open %s\n", path);
    return NULL;
  }
  char **list = calloc(1, sizeof *list), line[1024];
  size_t n = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    line[strcspn(line, "\r\n\t ")] = '\0';
    if (!line[0]) continue;
    list = realloc(list, (n + 2) * sizeof *list);
    list[n++] = strdup(line);
  }
  fclose(f);
  *n_out = n;
  return list;
}

static int in_list(char **list, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(list[i], name)) return 1;
  return 0;
}

static int compare(const alma_tensor *got, const alma_tensor *want, const opts_t *o, char *why, size_t nwhy) {
  char s1[128], s2[128];
  if (got->dtype != want->dtype) {
    snprintf(why, nwhy, "dtype %s, expected %s", alma_dtype_name(got->dtype), alma_dtype_name(want->dtype));
    return 0;
  }
  if (!alma__same_shape(got, want)) {
    snprintf(why, nwhy, "shape %s, expected %s", alma__shape_str(got->rank, got->dims, s1, sizeof s1),
             alma__shape_str(want->rank, want->dims, s2, sizeof s2));
    return 0;
  }
  int64_t n = alma_tensor_numel(want);
  int is_float = alma__dtype_is_float(want->dtype);
  double rtol = o->rtol, atol = o->atol;
  if (want->dtype == ALMA_DTYPE_FLOAT16 || want->dtype == ALMA_DTYPE_BFLOAT16) {
    /* ONNX compares low-precision outputs after the kernels computed in that precision; allow one ulp-ish. */
    rtol = fmax(rtol, want->dtype == ALMA_DTYPE_BFLOAT16 ? 1e-2 : 1e-3);
    atol = fmax(atol, 1e-3);
  }
  for (int64_t i = 0; i < n; i++) {
    if (want->dtype == ALMA_DTYPE_STRING) { /* byte for byte (handles are interned, core.h) */
      if (alma__str_cmp(alma__strs(got)[i], alma__strs(want)[i])) {
        snprintf(why, nwhy, "element %lld: got \"%.60s\", expected \"%.60s\"", (long long)i,
                 alma__str_ptr(alma__strs(got)[i]), alma__str_ptr(alma__strs(want)[i]));
        return 0;
      }
    } else if (alma__dtype_is_lowbit(want->dtype)) {
      /* float8/float4/int4/int2: the codes bit for bit (one byte each in memory), any NaN for NaN */
      uint8_t a = ((const uint8_t *)got->data)[i], b = ((const uint8_t *)want->data)[i];
      if (a != b && !(isnan(alma__get_f64(got->data, got->dtype, i)) && isnan(alma__get_f64(want->data, want->dtype, i)))) {
        snprintf(why, nwhy, "element %lld: got code 0x%02x (%.9g), expected 0x%02x (%.9g)", (long long)i, a,
                 alma__get_f64(got->data, got->dtype, i), b, alma__get_f64(want->data, want->dtype, i));
        return 0;
      }
    } else if (is_float) {
      double a = alma__get_f64(got->data, got->dtype, i), b = alma__get_f64(want->data, want->dtype, i);
      if (isnan(a) && isnan(b)) continue;
      if (isinf(b) && a == b) continue;
      if (!(fabs(a - b) <= atol + rtol * fabs(b))) {
        snprintf(why, nwhy, "element %lld: got %.9g, expected %.9g", (long long)i, a, b);
        return 0;
      }
    } else {
      int64_t a = alma__get_i64(got->data, got->dtype, i), b = alma__get_i64(want->data, want->dtype, i);
      if (a != b) {
        snprintf(why, nwhy, "element %lld: got %lld, expected %lld", (long long)i, (long long)a, (long long)b);
        return 0;
      }
    }
  }
  return 1;
}

/* Sequences and optionals: the same kind, length and element types, then each element as above. */
static int compare_value(const alma_tensor *got, const alma_tensor *want, const opts_t *o, char *why, size_t nwhy) {
  if (!alma__dtype_is_container(want->dtype) && !alma__dtype_is_container(got->dtype)) return compare(got, want, o, why, nwhy);
  char s1[64], s2[64];
  if (got->dtype != want->dtype) {
    snprintf(why, nwhy, "a %s, expected a %s", alma_dtype_name(got->dtype), alma_dtype_name(want->dtype));
    return 0;
  }
  const alma__seq *g = alma__container(got), *w = alma__container(want);
  if (g->n != w->n) {
    snprintf(why, nwhy, "%s holds %d elements, expected %d", alma__container_type_str(got, s1, sizeof s1), g->n, w->n);
    return 0;
  }
  if (w->n == 0 && alma__container_elem(want) && alma__container_elem(got) != alma__container_elem(want)) {
    snprintf(why, nwhy, "empty %s, expected %s", alma__container_type_str(got, s1, sizeof s1),
             alma__container_type_str(want, s2, sizeof s2));
    return 0;
  }
  for (int i = 0; i < w->n; i++) {
    char sub[400];
    if (!compare_value(&g->items[i], &w->items[i], o, sub, sizeof sub)) {
      snprintf(why, nwhy, "element %d: %.380s", i, sub);
      return 0;
    }
  }
  return 1;
}

/* Loads files prefix_0.pb, prefix_1.pb ... from dir. Returns count (or -1 on error). kinds[k] is
 * the model's declared dtype for that input/output: a sequence or optional is read as a
 * SequenceProto/OptionalProto (the files do not say which message they hold). */
static int load_pbs(const char *dir, const char *prefix, alma_tensor *out, int max, const alma_dtype *kinds, int n_kinds,
                    char *why, size_t nwhy) {
  int n = 0;
  for (; n < max; n++) {
    char path[4400];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s_%d.pb", dir, prefix, n);
    if (stat(path, &sb) != 0) break;
    alma_dtype kind = n < n_kinds ? kinds[n] : ALMA_DTYPE_UNDEFINED;
    alma_status st = alma__dtype_is_container(kind) ? alma__onnx_load_container_file(path, kind, &out[n])
                                                    : alma__onnx_load_tensor_file(path, &out[n], NULL);
    if (st != ALMA_OK) {
      snprintf(why, nwhy, "%s", alma_last_error());
      for (int k = 0; k < n; k++) alma_tensor_free_data(&out[k]);
      return -1;
    }
  }
  return n;
}

typedef enum { R_PASS, R_FAIL, R_UNSUPPORTED } result_t;

/* Where a case's nodes ran: counts, and the op types that fell back to EAGER with why
 * ("Loop:op If:op"). nodes < 0: no session to ask. */
typedef struct {
  const char *runtime;
  alma__place_counts c;
  char fallback[512];
} placed_t;

static void read_placement(alma_session *s, placed_t *pl) {
  alma__place_graph *graphs = NULL;
  int n = 0;
  pl->runtime = alma__session_runtime_name(s);
  if (alma__session_placement(s, &graphs, &n) != ALMA_OK) {
    alma__error_clear();
    return;
  }
  alma__placement_count(graphs, n, &pl->c);
  size_t len = 0;
  for (int gi = 0; gi < n; gi++)
    for (int i = 0; i < graphs[gi].g->n_nodes; i++) {
      const alma__placement *p = &graphs[gi].nodes[i];
      if (!alma__place_fell_back(p->place)) continue;
      char item[128];
      snprintf(item, sizeof item, "%s:%s%s", graphs[gi].g->nodes[i].op_type, alma__decline_name(p->reason),
               p->place == ALMA_PLACE_PARTIAL ? "(some runs)" : "");
      if (strstr(pl->fallback, item)) continue;
      int w = snprintf(pl->fallback + len, sizeof pl->fallback - len, "%s%s", len ? " " : "", item);
      if (w > 0 && len + (size_t)w < sizeof pl->fallback) len += (size_t)w;
    }
  alma__place_graphs_free(graphs, n);
}

static result_t run_case(const char *case_dir, const opts_t *o, char *why, size_t nwhy, placed_t *pl) {
  char path[4200];
  snprintf(path, sizeof path, "%s/model.onnx", case_dir);
  alma_model *m = NULL;
  alma_status st = alma_model_load(path, &m);
  if (st != ALMA_OK) {
    snprintf(why, nwhy, "%s: %s", alma_status_name(st), alma_last_error());
    return st == ALMA_ERR_UNSUPPORTED ? R_UNSUPPORTED : R_FAIL;
  }
  alma_session *s = NULL;
  st = alma_session_create(m, o->conversion, NULL, &s);
  if (st != ALMA_OK) {
    snprintf(why, nwhy, "session: %s: %s", alma_status_name(st), alma_last_error());
    alma_model_free(m);
    return st == ALMA_ERR_UNSUPPORTED || st == ALMA_ERR_UNAVAILABLE ? R_UNSUPPORTED : R_FAIL;
  }
  result_t res = R_PASS;
  int n_sets = 0;
  for (int set = 0; res == R_PASS; set++) {
    char dir[4200];
    struct stat sb;
    snprintf(dir, sizeof dir, "%s/test_data_set_%d", case_dir, set);
    if (stat(dir, &sb) != 0) break;
    n_sets++;
    alma_tensor ins[64], wants[64], outs[64];
    alma_dtype in_kinds[64], out_kinds[64];
    int n_in_kinds = alma_model_num_inputs(m) < 64 ? alma_model_num_inputs(m) : 64;
    int n_out_kinds = alma_model_num_outputs(m) < 64 ? alma_model_num_outputs(m) : 64;
    for (int k = 0; k < n_in_kinds; k++) in_kinds[k] = alma_model_input_dtype(m, k);
    for (int k = 0; k < n_out_kinds; k++) out_kinds[k] = alma_model_output_dtype(m, k);
    int nin = load_pbs(dir, "input", ins, 64, in_kinds, n_in_kinds, why, nwhy);
    if (nin < 0) {
      res = R_FAIL;
      break;
    }
    int nout = load_pbs(dir, "output", wants, 64, out_kinds, n_out_kinds, why, nwhy);
    if (nout < 0) {
      for (int k = 0; k < nin; k++) alma_tensor_free_data(&ins[k]);
      res = R_FAIL;
      break;
    }
    /* NumPy has no bfloat16, so ONNX's test data stores bfloat16 tensors as uint16 bits. */
    for (int k = 0; k < nin && k < alma_model_num_inputs(m); k++)
      if (ins[k].dtype == ALMA_DTYPE_UINT16 && alma_model_input_dtype(m, k) == ALMA_DTYPE_BFLOAT16)
        ins[k].dtype = ALMA_DTYPE_BFLOAT16;
    for (int k = 0; k < nout && k < alma_model_num_outputs(m); k++)
      if (wants[k].dtype == ALMA_DTYPE_UINT16 && alma_model_output_dtype(m, k) == ALMA_DTYPE_BFLOAT16)
        wants[k].dtype = ALMA_DTYPE_BFLOAT16;
    int n_model_out = alma_model_num_outputs(m);
    if (nin != alma_model_num_inputs(m) || nout != n_model_out) {
      snprintf(why, nwhy, "data set has %d inputs/%d outputs, model %d/%d", nin, nout, alma_model_num_inputs(m),
               n_model_out);
      res = R_FAIL;
    } else {
      st = alma_session_run(s, ins, nin, outs, nout);
      if (st != ALMA_OK) {
        snprintf(why, nwhy, "run: %s: %s", alma_status_name(st), alma_last_error());
        /* A feature only visible from input values (e.g. training-mode Dropout fed as an input). */
        res = st == ALMA_ERR_UNSUPPORTED ? R_UNSUPPORTED : R_FAIL;
      } else {
        for (int k = 0; k < nout && res == R_PASS; k++) {
          char w[512];
          if (!compare_value(&outs[k], &wants[k], o, w, sizeof w)) {
            snprintf(why, nwhy, "data set %d, output %d ('%s'): %s", set, k, alma_model_output_name(m, k), w);
            res = R_FAIL;
          }
        }
        for (int k = 0; k < nout; k++) alma_tensor_free_data(&outs[k]);
      }
    }
    for (int k = 0; k < nin; k++) alma_tensor_free_data(&ins[k]);
    for (int k = 0; k < nout; k++) alma_tensor_free_data(&wants[k]);
  }
  if (res == R_PASS && n_sets == 0) {
    snprintf(why, nwhy, "no test_data_set_* directory");
    res = R_FAIL;
  }
  read_placement(s, pl);
  alma_session_free(s);
  alma_model_free(m);
  return res;
}

static void usage(void) {
  fprintf(stderr,
          "usage: alma_conformance [--conversion C] [--expect-pass FILE] [--known FILE] [--csv FILE] [-v] NODE_TESTS_DIR "
          "[GLOB...]\n"
          "  runs each case directory under NODE_TESTS_DIR whose name matches a GLOB (default: all)\n"
          "  --csv FILE: one row per case with its result and where its nodes ran\n");
}

int main(int argc, char **argv) {
  opts_t o = {.conversion = "EAGER", .rtol = 1e-3, .atol = 1e-7};
  const char *expect_file = NULL, *known_files[4] = {NULL}, *csv_file = NULL;
  int n_known_files = 0;
  int ai = 1;
  for (; ai < argc && argv[ai][0] == '-'; ai++) {
    if (!strcmp(argv[ai], "--conversion") && ai + 1 < argc) o.conversion = argv[++ai];
    else if (!strcmp(argv[ai], "--expect-pass") && ai + 1 < argc) expect_file = argv[++ai];
    else if (!strcmp(argv[ai], "--known") && ai + 1 < argc && n_known_files < 4) known_files[n_known_files++] = argv[++ai];
    else if (!strcmp(argv[ai], "--csv") && ai + 1 < argc) csv_file = argv[++ai];
    else if (!strcmp(argv[ai], "-v")) o.verbose = 1;
    else {
      usage();
      return 2;
    }
  }
  if (ai >= argc) {
    usage();
    return 2;
  }
  const char *root = argv[ai++];
  DIR *d = opendir(root);
  if (!d) {
    fprintf(stderr, "alma_conformance: cannot open %s\n", root);
    return 2;
  }
  char **names = NULL;
  size_t nn = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    int match = ai >= argc;
    for (int k = ai; k < argc && !match; k++) match = fnmatch(argv[k], e->d_name, 0) == 0;
    if (!match) continue;
    if (nn == cap) {
      cap = cap ? cap * 2 : 256;
      names = realloc(names, cap * sizeof *names);
    }
    names[nn++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, nn, sizeof *names, cmp_names);
  /* Cases that must pass (regression guard), and known deviations: one name per line, text after
   * the name is the reason, '#' starts a comment line. */
  size_t ne = 0, nk = 0;
  char **expect = expect_file ? read_list(expect_file, &ne) : NULL;
  /* --known may be given more than once (ONNX's data against the spec, then a runtime's own) */
  char **known = NULL;
  for (int k = 0; k < n_known_files; k++) {
    size_t n1 = 0;
    char **l = read_list(known_files[k], &n1);
    if (!l) return 2;
    known = realloc(known, (nk + n1 + 1) * sizeof *known);
    memcpy(known + nk, l, n1 * sizeof *l);
    nk += n1;
    free(l);
  }
  if (expect_file && !expect) return 2;
  FILE *csv = csv_file ? fopen(csv_file, "w") : NULL;
  if (csv_file && !csv) {
    fprintf(stderr, "alma_conformance: cannot write %s\n", csv_file);
    return 2;
  }
  /* placement: "runtime" (every node on the runtime, fused into its kernels, or in a whole-graph
   * runtime's graph), "fallback" (some on EAGER's kernels), "" (no session was made) */
  if (csv) fprintf(csv, "case,conversion,runtime,result,placement,nodes,on_runtime,fused,eager,partial,graph,fallback_ops\n");
  int pass = 0, fail = 0, unsup = 0, deviation = 0, missing_expected = 0;
  for (size_t i = 0; i < nn; i++) {
    char dir[2048], why[2048] = "";
    snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
    placed_t pl = {.runtime = ""};
    result_t r = run_case(dir, &o, why, sizeof why, &pl);
    int expected = in_list(expect, ne, names[i]);
    const char *label = r == R_PASS ? "PASS" : r == R_FAIL ? "FAIL" : "UNSUPPORTED";
    if (r == R_FAIL && in_list(known, nk, names[i])) {
      label = "DEVIATION";
      deviation++;
    } else if (r == R_PASS) pass++;
    else if (r == R_FAIL) fail++;
    else unsup++;
    if (expected && r != R_PASS) missing_expected++;
    if (csv) {
      const int *bp = pl.c.by_place;
      int fell = bp[ALMA_PLACE_EAGER] + bp[ALMA_PLACE_PARTIAL];
      fprintf(csv, "%s,%s,%s,%s,%s,%d,%d,%d,%d,%d,%d,%s\n", names[i], o.conversion, pl.runtime, label,
              !pl.runtime[0] ? "" : fell ? "fallback" : "runtime", pl.c.nodes, bp[ALMA_PLACE_RUNTIME], bp[ALMA_PLACE_FUSED],
              bp[ALMA_PLACE_EAGER], bp[ALMA_PLACE_PARTIAL], bp[ALMA_PLACE_GRAPH], pl.fallback);
    }
    if (r != R_PASS || o.verbose)
      printf("%-12s %s%s%s%s\n", label, names[i], why[0] ? "  -- " : "", why,
             expected && r != R_PASS ? "  [expected to pass]" : "");
    fflush(stdout);
  }
  printf("conformance (%s): %d cases: %d passed, %d failed, %d unsupported, %d known deviations\n", o.conversion,
         (int)nn, pass, fail, unsup, deviation);
  if (missing_expected) printf("%d cases expected to pass did not\n", missing_expected);
  printf("%d passed, %d failed, %d skipped\n", pass, fail + missing_expected, unsup + deviation);
  if (csv) fclose(csv);
  for (size_t i = 0; i < nn; i++) free(names[i]);
  free(names);
  for (size_t k = 0; k < ne; k++) free(expect[k]);
  free(expect);
  for (size_t k = 0; k < nk; k++) free(known[k]);
  free(known);
  return fail || missing_expected ? 1 : 0;
}
