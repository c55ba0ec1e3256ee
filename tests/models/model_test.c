/* Runs one exported model (tests/models/export_models.py) with alma and compares every output with
 * PyTorch's, and with ONNX Runtime's when the export found onnxruntime, at batch 1 and batch 8.
 *
 * usage: model_test DATADIR NAME [CONVERSION]     (CONVERSION defaults to EAGER)
 *
 * Error measure per output: max|alma - ref| / max|ref| (so one tolerance serves outputs of any
 * scale; an all-zero reference falls back to the absolute error). Default tolerance 1e-4: float32
 * kernels that sum in a different order than PyTorch's differ by a few ulps per accumulation, which
 * over these models' depths (≤ ~60 layers, reductions ≤ 4608 long) stays around 1e-6..1e-5 of the
 * output range, while a wrong kernel gives errors of order 1. meta.txt may set `tolerance=` for a
 * model, with the reason in export_models.py. Integer and bool outputs must match exactly.
 * Exit status: 0 all outputs within tolerance, 1 otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alma/alma.h"
#include "core/core.h"

static double tolerance = 1e-4;

static int file_exists(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0;
}

static void read_meta(const char *dir) {
  char p[1200], line[256];
  snprintf(p, sizeof p, "%s/meta.txt", dir);
  FILE *f = fopen(p, "r");
  if (!f) return;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "tolerance=", 10)) tolerance = atof(line + 10);
  fclose(f);
}

/* Returns 1 if `got` matches `ref` within tolerance; prints one line either way. */
static int compare(const char *what, const alma_tensor *got, const alma_tensor *ref) {
  char sg[128], sr[128];
  alma__shape_str(got->rank, got->dims, sg, sizeof sg);
  alma__shape_str(ref->rank, ref->dims, sr, sizeof sr);
  if (!alma__same_shape(got, ref) || got->dtype != ref->dtype) {
    printf("  %-34s FAIL: alma gives %s %s, reference %s %s\n", what, alma_dtype_name(got->dtype), sg,
           alma_dtype_name(ref->dtype), sr);
    return 0;
  }
  int64_t n = alma_tensor_numel(ref), worst = -1;
  double max_err = 0, max_ref = 0;
  int nan_mismatch = 0;
  for (int64_t i = 0; i < n; i++) {
    double a = alma__get_f64(got->data, got->dtype, i), b = alma__get_f64(ref->data, ref->dtype, i);
    if (isnan(a) || isnan(b)) {
      if (isnan(a) != isnan(b)) nan_mismatch++;
      continue;
    }
    double e = fabs(a - b);
    if (e > max_err || worst < 0) {
      max_err = e;
      worst = i;
    }
    if (fabs(b) > max_ref) max_ref = fabs(b);
  }
  double rel = max_ref > 0 ? max_err / max_ref : max_err;
  int exact = !alma__dtype_is_float(ref->dtype);
  int ok = !nan_mismatch && (exact ? max_err == 0 : rel <= tolerance);
  printf("  %-34s %s %-8s %-14s rel err %.2e (max abs %.2e, max |ref| %.3g)", what, ok ? "ok  " : "FAIL",
         alma_dtype_name(ref->dtype), sr, rel, max_err, max_ref);
  if (nan_mismatch) printf(", %lld NaN mismatches", (long long)nan_mismatch);
  if (!ok && worst >= 0)
    printf(", worst at flat index %lld: alma %.8g, reference %.8g", (long long)worst,
           alma__get_f64(got->data, got->dtype, worst), alma__get_f64(ref->data, ref->dtype, worst));
  printf("\n");
  return ok;
}

static int run_batch(alma_session *s, const alma_model *m, const char *dir, const char *bname) {
  char p[1200];
  int n_in = alma_model_num_inputs(m), n_out = alma_model_num_outputs(m), ok = 1;
  alma_tensor *in = calloc((size_t)n_in + 1, sizeof *in), *out = calloc((size_t)n_out + 1, sizeof *out);
  for (int i = 0; i < n_in; i++) {
    snprintf(p, sizeof p, "%s/%s/input_%d.npy", dir, bname, i);
    if (alma_npy_load(p, &in[i]) != ALMA_OK) {
      printf("  %s: cannot load input %d: %s\n", bname, i, alma_last_error());
      ok = 0;
      goto done;
    }
  }
  double t0 = alma__now_s();
  alma_status st = alma_session_run(s, in, n_in, out, n_out);
  double dt = alma__now_s() - t0;
  if (st != ALMA_OK) {
    printf("  %s: run failed: %s: %s\n", bname, alma_status_name(st), alma_last_error());
    ok = 0;
    goto done;
  }
  printf(" %s (%.3f s):\n", bname, dt);
  for (int j = 0; j < n_out; j++) {
    static const char *refs[] = {"output", "ort_output"};
    static const char *who[] = {"torch", "onnxruntime"};
    for (int r = 0; r < 2; r++) {
      snprintf(p, sizeof p, "%s/%s/%s_%d.npy", dir, bname, refs[r], j);
      if (r == 1 && !file_exists(p)) continue; /* onnxruntime was not importable at export time */
      alma_tensor ref;
      if (alma_npy_load(p, &ref) != ALMA_OK) {
        printf("  cannot load reference: %s\n", alma_last_error());
        ok = 0;
        continue;
      }
      char what[200];
      snprintf(what, sizeof what, "%s vs %s", alma_model_output_name(m, j), who[r]);
      ok &= compare(what, &out[j], &ref);
      alma_tensor_free_data(&ref);
    }
  }
done:
  for (int i = 0; i < n_in; i++) alma_tensor_free_data(&in[i]);
  for (int j = 0; j < n_out; j++) alma_tensor_free_data(&out[j]);
  free(in);
  free(out);
  return ok;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s DATADIR NAME [CONVERSION]\n", argv[0]);
    return 2;
  }
  const char *conversion = argc > 3 ? argv[3] : "EAGER";
  char dir[1024], path[1100];
  snprintf(dir, sizeof dir, "%s/%s", argv[1], argv[2]);
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  read_meta(dir);
  alma_model *m = NULL;
  alma_session *s = NULL;
  double t0 = alma__now_s();
  alma_status st = alma_model_load(path, &m);
  if (st != ALMA_OK) {
    printf("%s: load failed: %s: %s\n", argv[2], alma_status_name(st), alma_last_error());
    return 1;
  }
  alma_session_options o;
  alma_session_options_init(&o);
  o.threads = 1;
  st = alma_session_create(m, conversion, &o, &s);
  if (st != ALMA_OK) {
    printf("%s: session (%s) failed: %s: %s\n", argv[2], conversion, alma_status_name(st), alma_last_error());
    alma_model_free(m);
    return 1;
  }
  printf("%s with %s (tolerance %.1e; load+compile %.3f s)\n", argv[2], conversion, tolerance, alma__now_s() - t0);
  int ok = run_batch(s, m, dir, "b1");
  ok &= run_batch(s, m, dir, "b8");
  alma_session_free(s);
  alma_model_free(m);
  printf("%s: %s\n", argv[2], ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
