/* The DNNL runtime's int8 path against EAGER, on the quantized graphs make_int8_models.py writes.
 *
 * For each DIR/NAME.onnx with its NAME.txt ("atol A", "step S", "int8 N", optionally "forced 0"):
 * batch sizes 1 and 3, thread counts 1 and 2, conversions DNNL and FOLD+DNNL, two runs each (the
 * second on cached primitives, reordered weights, pooled buffers and, for INT8_DYNAMIC's form, a
 * new batch's scale and zero point given to the same primitive), in four modes:
 *   - default: what the runtime does on this CPU (int8 matmuls only with VNNI);
 *   - dnnl.int8_matmul=on: int8 matmuls on any CPU (the models' 7-bit matmul weights cannot
 *     saturate oneDNN's u8 x s8 kernels), where at least N int8 primitives must run; skipped with
 *     "forced 0" (8-bit matmul weights, which saturate there by design);
 *   - dnnl.int8=fallback: every cluster declined at run time, so its nodes run one by one
 *     through the float path with the lazily computed DequantizeLinear inputs; no int8 primitive
 *     may run;
 *   - with "moved N" (DequantizeLinear -> MaxPool/Flatten/Reshape -> QuantizeLinear pairs of one
 *     scale and zero point), the default mode must run exactly 2 * N fewer int8 reorders (and the
 *     pools as int8 steps) than with dnnl.int8_move=off, which keeps those ops in float32;
 *   - with "dwfused N" (1x1 + depthwise 3x3 pairs): at batch 3 the default mode must run N int8
 *     primitives fewer than with dnnl.dw_fuse=off on AVX2 (oneDNN's fused jit kernel there; on other
 *     CPUs its size rule may keep the two apart: then 0 or N), both within the tolerance;
 *   - dnnl.int8_dyn_matmul=split: INT8_DYNAMIC matmuls with 8-bit weights on CPUs without
 *     VNNI as two exact 7-bit halves instead of float32 (the same as default elsewhere).
 * Every output must be within A of EAGER's, and 99% of its elements within S (one quantization
 * step: the int8 primitive requantizes once where EAGER rounds float sums, so a value near a half
 * step may round the other way, and that step then travels).
 *
 * usage: dnnl_int8_test DIR   (exit 1 on any mismatch) */
#ifdef ALMA_HAVE_DNNL
#include <math.h>

#include <oneapi/dnnl/dnnl.h>

#include "alma/alma.h"
#include "core/core.h"
#include "dnnl_test_util.h"
#include "graph/model.h"
#include "runtimes/dnnl/dnnl_rt.h"

/* The inputs' generator, seeded per model from its file name (test_model): a model's inputs do not
 * depend on which models the directory holds before it. */
static uint64_t rng_state;

static uint64_t name_seed(const char *path) {
  const char *base = strrchr(path, '/');
  uint64_t h = 0x2545f4914f6cdd1dull;
  for (const char *c = base ? base + 1 : path; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
  return h ? h : 1;
}

static int compare(const char *what, const alma_tensor *got, const alma_tensor *want, double atol, double step) {
  if (got->dtype != want->dtype || !alma__same_shape(got, want) || got->dtype != ALMA_DTYPE_FLOAT32) {
    printf("  %s: dtype or shape differs from EAGER's\n", what);
    return 0;
  }
  const float *a = got->data, *b = want->data;
  int64_t n = alma_tensor_numel(want), off = 0;
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - b[i]);
    if (!(d <= atol)) {
      printf("  %s: element %lld: got %.6g, expected %.6g (allowed %g)\n", what, (long long)i, a[i], b[i], atol);
      return 0;
    }
    off += d > step + 1e-5 * fabs(b[i]);
    if (d > worst) worst = d;
  }
  if (off > n / 100) {
    printf("  %s: %lld of %lld elements beyond one step (%g); largest difference %g\n", what, (long long)off, (long long)n,
           step, worst);
    return 0;
  }
  return 1;
}

/* White box, through the vtable (threads 2): a first run on other data (in * 3 + 0.5: another
 * scale and zero point for every DynamicQuantizeLinear), then one on in, whose outputs go to got;
 * the second run's int8 primitive count and constant weight reorders (a primitive built again
 * reorders its weights again). */
static int count_int8(const alma_model *m, const alma_tensor *in, int nin, int nout, alma_tensor *got, int64_t *n_int8,
                      int64_t *n_wei, int64_t *n_qre) {
  const alma_runtime *rt = alma__runtime_find("DNNL");
  alma_runtime_opts ro = {.threads = 2, .options = dt_options};
  void *plan = NULL;
  alma_tensor other[16];
  memset(other, 0, sizeof other);
  int ok = 1;
  for (int k = 0; k < nin && ok; k++) {
    ok = alma__tensor_copy(&other[k], &in[k]) == ALMA_OK;
    for (int64_t i = 0; ok && i < alma_tensor_numel(&in[k]); i++) ((float *)other[k].data)[i] = ((float *)in[k].data)[i] * 3 + 0.5f;
  }
  if (!ok || !rt || rt->compile(m->graph, &ro, &plan) != ALMA_OK) ok = 0;
  for (int r = 0; r < 2 && ok; r++) {
    memset(got, 0, sizeof(alma_tensor) * (size_t)nout);
    ok = rt->run(plan, r ? in : other, nin, got, nout) == ALMA_OK;
    for (int k = 0; k < nout && !r; k++) alma_tensor_free_data(&got[k]);
  }
  if (ok) {
    *n_int8 = ((dn_plan *)plan)->n_int8;
    *n_wei = ((dn_plan *)plan)->n_reorder_wei;
    *n_qre = ((dn_plan *)plan)->n_int8_reorder;
  }
  if (plan) rt->free(plan);
  for (int k = 0; k < nin; k++) alma_tensor_free_data(&other[k]);
  return ok;
}

static int read_spec(const char *model, double *atol, double *step, int *n_int8, int *forced, int *rebuild, int *moved,
                     int *dwfused) {
  char path[4096];
  snprintf(path, sizeof path, "%.*s.txt", (int)(strlen(model) - 5), model);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int got = 0;
  char key[32];
  double v;
  while (fscanf(f, "%31s %lf", key, &v) == 2) {
    if (!strcmp(key, "atol")) *atol = v, got |= 1;
    if (!strcmp(key, "step")) *step = v, got |= 2;
    if (!strcmp(key, "int8")) *n_int8 = (int)v, got |= 4;
    if (!strcmp(key, "forced")) *forced = (int)v;
    if (!strcmp(key, "rebuild")) *rebuild = (int)v;
    if (!strcmp(key, "moved")) *moved = (int)v;
    if (!strcmp(key, "dwfused")) *dwfused = (int)v;
  }
  fclose(f);
  return got == 7;
}

static const char *modes[][2] = {{"default", NULL},
                                 {"dnnl.int8_matmul=on", "dnnl.int8_matmul=on"},
                                 {"dnnl.int8=fallback", "dnnl.int8=fallback"},
                                 {"dnnl.int8_dyn_matmul=split", "dnnl.int8_dyn_matmul=split"}};

static int test_model(const char *path) {
  rng_state = name_seed(path);
  double atol = 0, step = 0;
  int want_int8 = 0, forced = 1, rebuild = 1, moved = -1, dwfused = -1;
  if (!read_spec(path, &atol, &step, &want_int8, &forced, &rebuild, &moved, &dwfused)) {
    printf("%s: no readable .txt beside it\n", path);
    return 0;
  }
  alma_model *m = NULL;
  if (alma_model_load(path, &m) != ALMA_OK) {
    printf("%s: load failed: %s\n", path, alma_last_error());
    return 0;
  }
  int nin = alma_model_num_inputs(m), nout = alma_model_num_outputs(m), ok = nin <= 16 && nout <= 16;
  static const char *convs[] = {"DNNL", "FOLD+DNNL"};
  for (int batch = 1; batch <= 3 && ok; batch += 2) {
    alma_tensor in[16], want[16], got[16];
    memset(in, 0, sizeof in);
    if (!dt_make_inputs(m, batch, in, &rng_state)) {
      printf("%s: inputs must be float32\n", path);
      ok = 0;
      break;
    }
    ok = dt_run_session(m, "EAGER", 1, in, nin, want, nout, 1);
    for (int md = 0; md < 4 && ok; md++) {
      if (md == 1 && !forced) continue;
      dt_options = modes[md][1];
      for (int c = 0; c < 2 && ok; c++)
        for (int threads = 1; threads <= 2 && ok; threads++) {
          if (!dt_run_session(m, convs[c], threads, in, nin, got, nout, 2)) {
            ok = 0;
            break;
          }
          for (int k = 0; k < nout; k++) {
            char what[256];
            snprintf(what, sizeof what, "%s (%s) batch %d threads %d output '%s'", convs[c], modes[md][0], batch, threads,
                     alma_model_output_name(m, k));
            ok &= compare(what, &got[k], &want[k], atol, step);
            alma_tensor_free_data(&got[k]);
          }
        }
      int64_t n8 = -1, nwei = -1, nqre = -1;
      if (ok && !count_int8(m, in, nin, nout, got, &n8, &nwei, &nqre)) {
        printf("  direct DNNL run failed: %s\n", alma_last_error());
        ok = 0;
      }
      for (int k = 0; k < nout && ok; k++) {
        char what[256];
        snprintf(what, sizeof what, "DNNL (%s) batch %d after a run on other data, output '%s'", modes[md][0], batch,
                 alma_model_output_name(m, k));
        ok &= compare(what, &got[k], &want[k], atol, step);
        alma_tensor_free_data(&got[k]);
      }
      if (ok && !rebuild && nwei != 0) {
        printf("  %s: %lld weight reorders in a run on new data: primitives were built again\n", modes[md][0], (long long)nwei);
        ok = 0;
      }
      if (ok && md == 1 && n8 < want_int8) {
        printf("  %s: %lld int8 primitives ran, expected at least %d\n", modes[md][0], (long long)n8, want_int8);
        ok = 0;
      }
      if (ok && md == 0 && moved >= 0) { /* the same run with the moves off: the float path around those ops */
        int64_t n8_off = -1, nwei_off = -1, nqre_off = -1;
        alma_tensor got2[16];
        dt_options = "dnnl.int8_move=off";
        ok = count_int8(m, in, nin, nout, got2, &n8_off, &nwei_off, &nqre_off);
        dt_options = NULL;
        for (int k = 0; k < nout && ok; k++) {
          ok &= compare("DNNL (dnnl.int8_move=off)", &got2[k], &want[k], atol, step);
          alma_tensor_free_data(&got2[k]);
        }
        if (ok && nqre_off - nqre != 2 * moved) {
          printf("  %lld int8 reorders, %lld without the int8 moves: expected %d fewer\n", (long long)nqre, (long long)nqre_off,
                 2 * moved);
          ok = 0;
        }
        if (ok && n8 <= n8_off && moved > 0) {
          printf("  %lld int8 steps, %lld without the int8 moves: the pooling did not run on int8\n", (long long)n8,
                 (long long)n8_off);
          ok = 0;
        }
        if (ok) printf("%s batch %d: %lld int8 reorders, %lld with dnnl.int8_move=off\n", path, batch, (long long)nqre,
                       (long long)nqre_off);
      }
      if (ok && md == 0 && dwfused >= 0 && batch == 3) { /* the same run with the int8 1x1 + depthwise fusion off */
        int64_t n8_off = -1, nwei_off = -1, nqre_off = -1;
        alma_tensor got2[16];
        dt_options = "dnnl.dw_fuse=off";
        ok = count_int8(m, in, nin, nout, got2, &n8_off, &nwei_off, &nqre_off);
        dt_options = NULL;
        for (int k = 0; k < nout && ok; k++) {
          ok &= compare("DNNL (dnnl.dw_fuse=off)", &got2[k], &want[k], atol, step);
          alma_tensor_free_data(&got2[k]);
        }
        int avx2 = dnnl_get_effective_cpu_isa() == dnnl_cpu_isa_avx2;
        if (ok && n8_off - n8 != dwfused && (avx2 || n8_off != n8)) {
          printf("  %lld int8 primitives, %lld with dnnl.dw_fuse=off: expected %d fewer%s\n", (long long)n8,
                 (long long)n8_off, dwfused, avx2 ? " (AVX2)" : " or none");
          ok = 0;
        }
        if (ok) printf("%s batch %d: %lld int8 primitives, %lld with dnnl.dw_fuse=off\n", path, batch, (long long)n8,
                       (long long)n8_off);
      }
      if (ok && md == 2 && n8 != 0) {
        printf("  fallback mode: %lld int8 primitives ran\n", (long long)n8);
        ok = 0;
      }
      if (ok) printf("%s batch %d %s: %lld int8 primitives\n", path, batch, modes[md][0], (long long)n8);
      dt_options = NULL;
    }
    for (int k = 0; k < nin; k++) alma_tensor_free_data(&in[k]);
    for (int k = 0; k < nout && ok; k++) alma_tensor_free_data(&want[k]);
  }
  printf("%s: %s\n", path, ok ? "PASS" : "FAIL");
  alma_model_free(m);
  return ok;
}

int main(int argc, char **argv) {
  return dt_main(argc, argv, test_model);
}
#else
int main(void) { return 77; }
#endif
