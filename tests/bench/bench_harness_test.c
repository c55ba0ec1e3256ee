/* alma_benchmark_model end to end on tiny models (written by make_model.py): ALMA_TEST_NEEDS_MODELS.
 * Isolation with injected faults (segv, abort, hang past the timeout, runaway allocation under a
 * memory limit, early exit), fail-fast vs keep-going, in-process runs, data sources, the output
 * check. argv[1]: the directory holding linear.onnx etc. */
#include <math.h>
#include <setjmp.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "bench/bench.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

#ifdef UNDER_ASAN
/* ASan would catch SIGSEGV/SIGBUS/SIGFPE itself and exit 1: leave them to the harness's crash
 * handler, whose report these tests check. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "handle_segv=0:handle_sigbus=0:handle_sigfpe=0"; }
#endif

static const char *dir;
static char linear[512], two[512];

static void fast(alma_config *c) {
  alma_config_init(c);
  c->n_samples = 20;
  c->min_time_s = 0.02;
  c->warmup = 2;
  c->warmup_s = 0;
  c->timeout_s = 60;
}

static const char *both[] = {"EAGER", "FOLD+EAGER"};

static void test_sweep(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  c.batch_size = 4;
  alma_results *r = NULL;
  assert_int_equal(alma_benchmark_model(linear, &c, both, 2, NULL, &r), ALMA_OK);
  assert_non_null(r);
  assert_int_equal(alma_results_count(r), 2);
  assert_int_equal(alma_results_n_failed(r), 0);
  assert_int_equal(strlen(alma_results_model_hash(r)), 64);
  assert_string_equal(alma_results_model_path(r), linear);
  for (int i = 0; i < 2; i++) {
    const alma_result *x = alma_results_get(r, i);
    assert_string_equal(alma_result_conversion(x), both[i]);
    assert_int_equal(alma_result_id(x), i);
    assert_int_equal(alma_result_status_code(x), ALMA_RESULT_OK);
    assert_string_equal(alma_result_status_name(x), "ok");
    assert_string_equal(alma_result_device(x), "cpu");
    assert_int_equal(alma_result_batch_size(x), 4);
    const alma_latency_stats *s = alma_result_latency(x);
    assert_true(s->n >= 5);  /* ceil(20 / 4) batches at least */
    assert_int_equal(alma_result_n_raw(x), s->n);
    assert_int_equal(alma_result_samples(x), 4 * s->n);
    assert_true(s->min <= s->p50 && s->p50 <= s->p99 && s->p99 <= s->max);
    assert_true(alma_result_throughput(x) > 0);
    double sum = 0;
    for (int64_t k = 0; k < s->n; k++) sum += alma_result_raw_ms(x)[k];
    assert_true(fabs(sum * 1e-3 - alma_result_inference_s(x)) < 1e-6);
    assert_true(alma_result_inference_s(x) < alma_result_total_elapsed_s(x));
    assert_true(alma_result_load_s(x) > 0 && alma_result_convert_s(x) >= 0 && alma_result_first_inference_ms(x) > 0);
    assert_true(alma_result_peak_rss_bytes(x) > 0);
    assert_true(alma_result_warmup_batches(x) >= 2);
    assert_true(alma_result_threads(x) >= 1);
    assert_true(strlen(alma_result_affinity(x)) > 0);
    assert_true(alma_result_timer_overhead_ns(x) > 0);
    assert_non_null(strstr(alma_result_stop_reason(x), "n_samples"));
    const alma_output_check *k = alma_result_check(x);
    assert_true(k->performed && k->passed);
    assert_true(k->max_abs_err <= 1e-6 && k->argmax_agreement == 1.0 && fabs(k->cosine_similarity - 1) < 1e-9);
    assert_int_equal(alma_result_error_status(x), ALMA_OK);
    assert_string_equal(alma_result_error(x), "");
  }
  assert_int_equal(alma_results_config(r)->batch_size, 4);
  assert_true(alma_results_system(r)->logical_cores >= 1);
  alma_results_free(r);
}

static void test_all_conversions_and_in_process(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  c.fail_on_error = 0;
  alma_results *r = NULL;
  /* Every available preset, each isolated: whatever other runtimes do, EAGER and FOLD+EAGER are
   * there and fine, and every row is ok or an error with a message. */
  alma_benchmark_model(linear, &c, NULL, 0, NULL, &r);
  assert_non_null(r);
  assert_true(alma_results_count(r) >= 2);
  int seen = 0;
  for (int i = 0; i < alma_results_count(r); i++) {
    const alma_result *x = alma_results_get(r, i);
    if (!strcmp(alma_result_conversion(x), "EAGER") || !strcmp(alma_result_conversion(x), "FOLD+EAGER")) {
      assert_int_equal(alma_result_status_code(x), ALMA_RESULT_OK);
      assert_true(alma_result_check(x)->passed);
      seen++;
    } else if (alma_result_status_code(x) != ALMA_RESULT_OK) {
      assert_true(strlen(alma_result_error(x)) > 0);
    }
  }
  assert_int_equal(seen, 2);
  alma_results_free(r);
  /* in-process: the same results */
  c.multiprocessing = 0;
  c.fail_on_error = 1;
  assert_int_equal(alma_benchmark_model(linear, &c, both, 2, NULL, &r), ALMA_OK);
  for (int i = 0; i < 2; i++) {
    const alma_result *x = alma_results_get(r, i);
    assert_int_equal(alma_result_status_code(x), ALMA_RESULT_OK);
    assert_true(alma_result_check(x)->passed);
    assert_true(alma_result_latency(x)->n >= 20);
  }
  alma_results_free(r);
}

static void test_loaded_model(void **state) {
  (void)state;
  alma_model *m;
  assert_int_equal(alma_model_load(linear, &m), ALMA_OK);
  alma_config c;
  fast(&c);
  alma_results *r = NULL;
  const char *one[] = {"1"};
  assert_int_equal(alma_benchmark_model(m, &c, one, 1, NULL, &r), ALMA_OK);  /* _Generic: the model */
  assert_string_equal(alma_result_conversion(alma_results_get(r, 0)), "FOLD+EAGER");
  /* nothing loaded, unless the build cache had the conversion's graph (then that was loaded) */
  if (strcmp(alma_result_cache(alma_results_get(r, 0))->status, "hit"))
    assert_true(alma_result_load_s(alma_results_get(r, 0)) == 0);
  else
    assert_true(alma_result_load_s(alma_results_get(r, 0)) > 0);
  assert_string_equal(alma_results_model_path(r), "");
  alma_results_free(r);
  alma_model_free(m);
}

/* ALMA_TEST_FAULT=KIND@FOLD+EAGER: EAGER is fine, FOLD+EAGER fails, the sweep (this process) goes on. */
static const alma_result *faulty(const char *kind, alma_config *c, alma_results **r, alma_status *st) {
  char env[64];
  snprintf(env, sizeof env, "%s@FOLD+EAGER", kind);
  setenv("ALMA_TEST_FAULT", env, 1);
  c->fail_on_error = 0;
  const char *three[] = {"FOLD+EAGER", "EAGER", "FOLD+FOLD+EAGER"};
  *st = alma_benchmark_model(linear, c, three, 3, NULL, r);
  unsetenv("ALMA_TEST_FAULT");
  assert_non_null(*r);
  assert_int_equal(alma_results_count(*r), 3);
  assert_int_equal(alma_results_n_failed(*r), 1);
  assert_int_equal(alma_result_status_code(alma_results_get(*r, 1)), ALMA_RESULT_OK);
  assert_int_equal(alma_result_status_code(alma_results_get(*r, 2)), ALMA_RESULT_OK);
  const alma_result *x = alma_results_get(*r, 0);
  assert_int_equal(alma_result_status_code(x), ALMA_RESULT_ERROR);
  assert_string_equal(alma_result_status_name(x), "error");
  assert_int_equal(*st, alma_result_error_status(x));  /* the first failure's status */
  return x;
}

static void test_fault_segv(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  alma_results *r;
  alma_status st;
  const alma_result *x = faulty("segv", &c, &r, &st);
  assert_int_equal(st, ALMA_ERR_CRASH);
  assert_non_null(strstr(alma_result_error(x), "SIGSEGV"));
  assert_string_equal(alma_result_failed_step(x), "warmup");
  assert_non_null(strstr(alma_result_traceback(x), "native backtrace"));
  assert_non_null(strstr(alma_result_traceback(x), "alma__test_fault"));  /* a frame, symbolized */
  alma_results_free(r);
}

static void test_fault_abort_exit_error(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  alma_results *r;
  alma_status st;
  const alma_result *x = faulty("abort", &c, &r, &st);
  assert_int_equal(st, ALMA_ERR_CRASH);
  assert_non_null(strstr(alma_result_error(x), "SIGABRT"));
  alma_results_free(r);
  x = faulty("exit", &c, &r, &st);
  assert_non_null(strstr(alma_result_error(x), "exited with status 3"));
  alma_results_free(r);
  x = faulty("error", &c, &r, &st);
  assert_int_equal(st, ALMA_ERR_RUNTIME);
  assert_non_null(strstr(alma_result_error(x), "injected failure"));
  assert_non_null(strstr(alma_result_traceback(x), "load > data > convert > first > warmup"));
  alma_results_free(r);
}

static void test_fault_hang_timeout(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  c.timeout_s = 1.5;
  alma_results *r;
  alma_status st;
  const alma_result *x = faulty("hang", &c, &r, &st);
  assert_int_equal(st, ALMA_ERR_TIMEOUT);
  assert_non_null(strstr(alma_result_error(x), "timed out after 1.5 s"));
  alma_results_free(r);
}

static void test_fault_oom(void **state) {
  (void)state;
#ifdef UNDER_ASAN
  skip();  /* RLIMIT_AS cannot apply under ASan */
#endif
  alma_config c;
  fast(&c);
  /* The limit is on the child's whole address space, which starts as this process's (after the
   * tests before this one: thread pools, allocator arenas, 300+ MiB): room above that for EAGER to
   * run and for the runaway allocation to hit it. */
  long long pages = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%lld", &pages) != 1) pages = 0;
    fclose(f);
  }
  c.memory_limit_mb = (int64_t)(pages * sysconf(_SC_PAGESIZE) >> 20) + 160;
  alma_results *r;
  alma_status st;
  const alma_result *x = faulty("oom", &c, &r, &st);
  assert_int_equal(st, ALMA_ERR_NOMEM);
  assert_non_null(strstr(alma_result_error(x), "out of memory"));
  alma_results_free(r);
}

static void test_fail_fast(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  setenv("ALMA_TEST_FAULT", "segv@EAGER", 1);
  alma_results *r = NULL;
  alma_status st = alma_benchmark_model(linear, &c, both, 2, NULL, &r);
  unsetenv("ALMA_TEST_FAULT");
  assert_int_equal(st, ALMA_ERR_CRASH);
  assert_non_null(r);
  assert_int_equal(alma_results_count(r), 1);  /* stopped after the first failure */
  assert_non_null(strstr(alma_last_error(), "EAGER"));
  alma_results_free(r);
}

static void test_rejected_before_running(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  alma_results *r = (alma_results *)1;
  const char *bad[] = {"EAGER", "FOLD+EAGR"};
  assert_int_equal(alma_benchmark_model(linear, &c, bad, 2, NULL, &r), ALMA_ERR_INVALID_ARG);
  assert_null(r);
  assert_non_null(strstr(alma_last_error(), "did you mean FOLD+EAGER"));
  char missing[600];
  snprintf(missing, sizeof missing, "%s/nope.onnx", dir);
  assert_int_equal(alma_benchmark_model(missing, &c, both, 2, NULL, &r), ALMA_ERR_IO);
  assert_null(r);
  char garbage[600];
  snprintf(garbage, sizeof garbage, "%s/garbage.onnx", dir);
  FILE *f = fopen(garbage, "wb");
  fputs("this is not a protobuf \xff\xff\xff", f);
  fclose(f);
  alma_status st = alma_benchmark_model(garbage, &c, both, 2, NULL, &r);
  assert_true(st != ALMA_OK && st != ALMA_ERR_CRASH);
  assert_null(r);
  c.batch_size = 0;  /* a struct filled by hand is validated like alma_config_set */
  assert_int_equal(alma_benchmark_model(linear, &c, both, 2, NULL, &r), ALMA_ERR_INVALID_ARG);
  assert_non_null(strstr(alma_last_error(), "batch_size"));
  fast(&c);
  alma_data *d;
  alma_data_random(&d);
  alma_data_set_input_spec(d, "nosuch:1x16");
  assert_int_equal(alma_benchmark_model(linear, &c, both, 2, d, &r), ALMA_ERR_INVALID_ARG);
  assert_non_null(strstr(alma_last_error(), "nosuch"));
  alma_data_free(d);
}

static void test_data_sources(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  c.batch_size = 4;
  char path[600];
  alma_data *d;
  alma_results *r;
  snprintf(path, sizeof path, "%s/x.npy", dir);  /* 10 samples of 16 */
  assert_int_equal(alma_data_from_path(path, &d), ALMA_OK);
  assert_int_equal(alma_benchmark_model(linear, &c, both, 2, d, &r), ALMA_OK);
  assert_int_equal(alma_result_batch_size(alma_results_get(r, 1)), 4);
  assert_true(alma_result_check(alma_results_get(r, 1))->passed);
  alma_results_free(r);
  alma_data_free(d);
  snprintf(path, sizeof path, "%s/batches", dir);
  assert_int_equal(alma_data_from_path(path, &d), ALMA_OK);
  assert_int_equal(alma_benchmark_model(linear, &c, both, 2, d, &r), ALMA_OK);
  alma_results_free(r);
  alma_data_free(d);
  /* --input shape on a two-input model with fixed shapes: a mismatch (a fixed dim, the rank, the
   * dtype) is refused before any conversion runs, naming the input; the spec form refuses a
   * second spec for one input */
  assert_int_equal(alma_data_random(&d), ALMA_OK);
  assert_int_equal(alma_data_set_input_spec(d, "b:2x3"), ALMA_OK);
  assert_int_equal(alma_benchmark_model(two, &c, both, 2, d, &r), ALMA_OK);
  alma_results_free(r);
  assert_int_equal(alma_data_set_input_spec(d, "b:4x3"), ALMA_ERR_INVALID_ARG);
  assert_non_null(strstr(alma_last_error(), "given twice"));
  c.fail_on_error = 0;
  const struct {
    int rank;
    int64_t dims[3];
    alma_dtype dtype;
    alma_status want;
  } bad[] = {{2, {4, 3}, ALMA_DTYPE_UNDEFINED, ALMA_ERR_SHAPE},
             {3, {2, 3, 1}, ALMA_DTYPE_UNDEFINED, ALMA_ERR_SHAPE},
             {2, {2, 3}, ALMA_DTYPE_INT64, ALMA_ERR_TYPE}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    assert_int_equal(alma_data_set_input(d, "b", bad[k].rank, bad[k].dims, bad[k].dtype), ALMA_OK);
    assert_int_equal(alma_benchmark_model(two, &c, both, 2, d, &r), bad[k].want);
    assert_null(r);
    assert_non_null(strstr(alma_last_error(), "'b'"));
  }
  alma_data_free(d);
}

typedef struct {
  int pos;
  float x[16];
} lstate;

static alma_status lnext(void *user, alma_tensor *in, int n, int *end) {
  lstate *s = user;
  (void)n;
  if (s->pos == 3) {
    *end = 1;
    return ALMA_OK;
  }
  for (int i = 0; i < 16; i++) s->x[i] = (float)(s->pos + i) / 16;
  in[0].dtype = ALMA_DTYPE_FLOAT32;
  in[0].rank = 2;
  in[0].dims[0] = 1;
  in[0].dims[1] = 16;
  in[0].data = s->x;
  in[0].nbytes = sizeof s->x;
  s->pos++;
  return ALMA_OK;
}

static alma_status lreset(void *user) {
  ((lstate *)user)->pos = 0;
  return ALMA_OK;
}

static void test_loader(void **state) {
  (void)state;
  lstate s = {0};
  alma_data *d;
  assert_int_equal(alma_data_from_loader(lnext, lreset, &s, &d), ALMA_OK);
  for (int mp = 0; mp <= 1; mp++) {
    alma_config c;
    fast(&c);
    c.multiprocessing = mp;
    alma_results *r;
    assert_int_equal(alma_benchmark_model(linear, &c, both, 2, d, &r), ALMA_OK);
    assert_true(alma_result_check(alma_results_get(r, 1))->passed);
    assert_int_equal(alma_result_batch_size(alma_results_get(r, 1)), 1);
    alma_results_free(r);
  }
  alma_data_free(d);
}

static void test_compare_outputs(void **state) {
  (void)state;
  float rv[6] = {0.1f, 0.7f, 0.2f, 0.5f, 0.3f, 0.2f}, xv[6] = {0.1f, 0.7f, 0.2f, 0.2f, 0.3f, 0.5f};
  alma_tensor ref = {.dtype = ALMA_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}, .data = rv, .nbytes = sizeof rv};
  alma_tensor out = ref;
  out.data = xv;
  alma_output_check k;
  char detail[256];
  alma__compare_outputs(&ref, 1, &ref, 1, NULL, 1e-3, 1e-4, &k, detail, sizeof detail);
  assert_true(k.performed && k.passed && k.max_abs_err == 0 && k.argmax_agreement == 1);
  assert_string_equal(detail, "");
  alma__compare_outputs(&ref, 1, &out, 1, NULL, 1e-3, 1e-4, &k, detail, sizeof detail);
  assert_false(k.passed);
  assert_true(fabs(k.max_abs_err - 0.3) < 1e-6);
  assert_true(fabs(k.max_rel_err - 0.3 / 0.2) < 1e-5);
  assert_true(k.argmax_agreement == 0.5);  /* row 0 agrees, row 1 does not */
  double dot = 0, na = 0, nb = 0;
  for (int i = 0; i < 6; i++) dot += (double)rv[i] * xv[i], na += (double)xv[i] * xv[i], nb += (double)rv[i] * rv[i];
  assert_true(fabs(k.cosine_similarity - dot / sqrt(na * nb)) < 1e-9);
  assert_non_null(strstr(detail, "2 of 6 elements"));
  /* within tolerance */
  xv[3] = 0.5f + 5e-5f;
  xv[5] = 0.2f;
  alma__compare_outputs(&ref, 1, &out, 1, NULL, 1e-3, 1e-4, &k, detail, sizeof detail);
  assert_true(k.passed);
  /* NaN matches NaN only */
  rv[0] = xv[0] = NAN;
  alma__compare_outputs(&ref, 1, &out, 1, NULL, 1e-3, 1e-4, &k, detail, sizeof detail);
  assert_true(k.passed);
  xv[0] = 1;
  alma__compare_outputs(&ref, 1, &out, 1, NULL, 1e-3, 1e-4, &k, detail, sizeof detail);
  assert_false(k.passed);
  /* shape mismatch */
  out.dims[0] = 3;
  out.dims[1] = 2;
  alma__compare_outputs(&ref, 1, &out, 1, NULL, 1e-3, 1e-4, &k, detail, sizeof detail);
  assert_false(k.passed);
  assert_non_null(strstr(detail, "shape [3,2]"));
}

static int file_exists(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0;
}

/* Labels from make_model.py: the model's argmax computed with NumPy, shifted for 3 samples; top-1
 * is 7/10 on x.npy and 9/12 on batches/. The last batch of x.npy wraps around (samples 8, 9, 0,
 * 1 with batch 4): each sample counts once. */
static void test_labels(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  c.batch_size = 4;
  char path[600];
  alma_data *d;
  alma_results *r;
  snprintf(path, sizeof path, "%s/x.npy", dir);
  assert_int_equal(alma_data_from_path(path, &d), ALMA_OK);
  snprintf(c.labels, sizeof c.labels, "%s/labels.npy", dir);
  const char *convs[] = {"INT8_DYNAMIC+EAGER", "EAGER", "FOLD+EAGER"};
  assert_int_equal(alma_benchmark_model(linear, &c, convs, 3, d, &r), ALMA_OK);
  for (int i = 0; i < 3; i++) {
    const alma_accuracy *a = alma_result_accuracy(alma_results_get(r, i));
    assert_non_null(a);
    assert_int_equal(a->samples, 10);
    /* the baseline is EAGER, the first without a lossy step, although listed second */
    assert_string_equal(a->baseline, "EAGER");
    assert_true(isfinite(a->seconds) && a->seconds >= 0);
    if (i == 0) {
      assert_true(a->correct >= 6 && a->correct <= 8);  /* int8: at most a sample either way */
      assert_true(fabs(a->top1_drop - (0.7 - a->top1)) < 1e-12);
    } else {
      assert_int_equal(a->correct, 7);
      assert_true(a->top1 == 0.7 && a->top1_drop == 0);
    }
  }
  alma_results_free(r);
  /* batch 3 (a last batch of 1 sample) and batch 16 (more than the data: 10 samples, then 6 again) */
  for (int k = 0; k < 2; k++) {
    c.batch_size = k ? 16 : 3;
    assert_int_equal(alma_benchmark_model(linear, &c, both, 2, d, &r), ALMA_OK);
    assert_int_equal(alma_result_accuracy(alma_results_get(r, 1))->correct, 7);
    assert_int_equal(alma_result_accuracy(alma_results_get(r, 1))->samples, 10);
    alma_results_free(r);
  }
  c.batch_size = 4;
  /* refused before anything runs: too few labels, non-integer labels, a label past the classes */
  const char *bad[] = {"labels_short.npy", "labels_float.npy", "labels_big.npy"};
  const alma_status want[] = {ALMA_ERR_SHAPE, ALMA_ERR_TYPE, ALMA_ERR_SHAPE};
  const char *says[] = {"9 labels for 10 samples", "integer", "label 8 is not a class of the first output 'y'"};
  for (int k = 0; k < 3; k++) {
    snprintf(c.labels, sizeof c.labels, "%s/%s", dir, bad[k]);
    r = (alma_results *)1;
    assert_int_equal(alma_benchmark_model(linear, &c, both, 2, d, &r), want[k]);
    assert_null(r);
    if (!strstr(alma_last_error(), says[k])) fail_msg("'%s' lacks '%s'", alma_last_error(), says[k]);
  }
  alma_data_free(d);
  /* labels without a data set, or with a loader */
  snprintf(c.labels, sizeof c.labels, "%s/labels.npy", dir);
  assert_int_equal(alma_benchmark_model(linear, &c, both, 2, NULL, &r), ALMA_ERR_INVALID_ARG);
  assert_null(r);
  assert_non_null(strstr(alma_last_error(), "random inputs have no labels"));
  lstate ls = {0};
  assert_int_equal(alma_data_from_loader(lnext, lreset, &ls, &d), ALMA_OK);
  assert_int_equal(alma_benchmark_model(linear, &c, both, 2, d, &r), ALMA_ERR_UNSUPPORTED);
  alma_data_free(d);
  /* a batch directory with IDX labels, in-process */
  snprintf(path, sizeof path, "%s/batches", dir);
  assert_int_equal(alma_data_from_path(path, &d), ALMA_OK);
  snprintf(c.labels, sizeof c.labels, "%s/batches_labels.idx", dir);
  c.multiprocessing = 0;
  assert_int_equal(alma_benchmark_model(linear, &c, both, 2, d, &r), ALMA_OK);
  for (int i = 0; i < 2; i++) {
    const alma_accuracy *a = alma_result_accuracy(alma_results_get(r, i));
    assert_true(a && a->samples == 12 && a->correct == 9);
  }
  alma_results_free(r);
  alma_data_free(d);
}

static void test_save_converted(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  char out[512], p[700];
  snprintf(c.save_converted, sizeof c.save_converted, "%s/saved/sub", dir);  /* created, parents included */
  memcpy(out, c.save_converted, sizeof out);
  c.cache = 0;
  const char *convs[] = {"EAGER", "FOLD+EAGER", "FOLD+FUSE+EAGER"};
  alma_results *r;
  assert_int_equal(alma_benchmark_model(linear, &c, convs, 3, NULL, &r), ALMA_OK);
  for (int i = 0; i < 3; i++) {
    const alma_result *x = alma_results_get(r, i);
    snprintf(p, sizeof p, "%s/%s.onnx", out, convs[i]);
    assert_string_equal(alma_result_saved_path(x), p);
    assert_true(file_exists(p));
    alma_model *m;
    assert_int_equal(alma_model_load(p, &m), ALMA_OK);  /* what was written loads back */
    alma_model_free(m);
  }
  assert_int_equal(alma_result_saved_alma_ops(alma_results_get(r, 1)), 0);
  /* FUSE's fused ops are saved too, and said to be alma's own */
  const alma_result *fu = alma_results_get(r, 2);
  if (alma_result_saved_alma_ops(fu) > 0) {
    int said = 0;
    for (int k = 0; k < alma_result_n_warnings(fu); k++) said |= strstr(alma_result_warning(fu, k), "ONNX Runtime") != NULL;
    assert_true(said);
  }
  alma_results_free(r);
  /* a sweep names the batch size; build_only saves too */
  snprintf(c.batch_sizes, sizeof c.batch_sizes, "1,4");
  c.build_only = 1;
  assert_int_equal(alma_benchmark_model(linear, &c, both, 1, NULL, &r), ALMA_OK);
  assert_int_equal(alma_results_count(r), 2);
  snprintf(p, sizeof p, "%s/EAGER_b4.onnx", out);
  assert_string_equal(alma_result_saved_path(alma_results_get(r, 1)), p);
  assert_true(file_exists(p));
  alma_results_free(r);
  /* a directory that cannot be made (its parent is a file): each conversion's error, no crash */
  c.batch_sizes[0] = 0;
  c.build_only = 0;
  c.fail_on_error = 0;
  snprintf(c.save_converted, sizeof c.save_converted, "%s/x.npy/sub", dir);
  assert_int_equal(alma_benchmark_model(linear, &c, both, 2, NULL, &r), ALMA_ERR_IO);
  assert_int_equal(alma_results_n_failed(r), 2);
  for (int i = 0; i < 2; i++) {
    const alma_result *x = alma_results_get(r, i);
    assert_string_equal(alma_result_failed_step(x), "save");
    assert_non_null(strstr(alma_result_error(x), "save_converted: cannot create directory"));
  }
  alma_results_free(r);
}

/* INT8_STATIC's build depends on its calibration batches: the cache key has their SHA-256, so a
 * data file rewritten under the same name is a stale build, rebuilt; the same data is a hit. */
static void test_calibration_cache_key(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  c.batch_size = 2;
  snprintf(c.cache_dir, sizeof c.cache_dir, "%s/calib-cache", dir);
  char path[600];
  snprintf(path, sizeof path, "%s/calib.npy", dir);
  float v[4 * 16];
  alma_tensor t = {.dtype = ALMA_DTYPE_FLOAT32, .rank = 2, .dims = {4, 16}, .data = v, .nbytes = sizeof v};
  const char *conv[] = {"INT8_STATIC+EAGER"};
  const char *want[] = {NULL, "hit", "built"};
  for (int run = 0; run < 3; run++) {
    for (int i = 0; i < 4 * 16; i++) v[i] = (float)((i * 7 + (run == 2 ? 3 : 0)) % 11) / 11.0f;
    assert_int_equal(alma_npy_save(path, &t), ALMA_OK);
    alma_data *d;
    assert_int_equal(alma_data_from_path(path, &d), ALMA_OK);
    alma_results *r;
    assert_int_equal(alma_benchmark_model(linear, &c, conv, 1, d, &r), ALMA_OK);
    const alma_cache_info *ci = alma_result_cache(alma_results_get(r, 0));
    if (want[run]) assert_string_equal(ci->status, want[run]);
    if (run == 2 && !strstr(ci->reason, "options")) fail_msg("rebuilt for '%s', not for its options", ci->reason);
    /* random benchmark data is never said to calibrate well; real data is not warned about */
    const alma_result *x = alma_results_get(r, 0);
    for (int k = 0; k < alma_result_n_warnings(x); k++) assert_null(strstr(alma_result_warning(x, k), "calibrates poorly"));
    alma_results_free(r);
    alma_data_free(d);
  }
  alma_results *r;
  assert_int_equal(alma_benchmark_model(linear, &c, conv, 1, NULL, &r), ALMA_OK);
  int warned = 0;
  const alma_result *x = alma_results_get(r, 0);
  for (int k = 0; k < alma_result_n_warnings(x); k++)
    warned |= strstr(alma_result_warning(x, k), "the benchmark's random data, which calibrates poorly") != NULL;
  assert_true(warned);
  alma_results_free(r);
}

static void test_count_top1(void **state) {
  (void)state;
  float v[8] = {0.1f, 0.9f, 0.0f, 0.0f,  /* argmax 1 */
                0.5f, 0.5f, 0.2f, NAN};  /* a tie: the first, 0; NaN ignored */
  alma_tensor t = {.dtype = ALMA_DTYPE_FLOAT32, .rank = 2, .dims = {2, 4}, .data = v, .nbytes = sizeof v};
  int64_t lab[2] = {1, 0}, correct = 0;
  assert_int_equal(alma__count_top1(&t, "y", 2, lab, 2, &correct), ALMA_OK);
  assert_int_equal(correct, 2);
  lab[1] = 1;
  assert_int_equal(alma__count_top1(&t, "y", 2, lab, 2, &correct), ALMA_OK);
  assert_int_equal(correct, 3);
  assert_int_equal(alma__count_top1(&t, "y", 2, lab, 1, &correct), ALMA_OK);  /* a wrapped batch: 1 of 2 */
  assert_int_equal(correct, 4);
  lab[0] = 4;
  assert_int_equal(alma__count_top1(&t, "y", 2, lab, 2, &correct), ALMA_ERR_SHAPE);
  assert_non_null(strstr(alma_last_error(), "label 4 is not a class of output 'y', whose last axis has 4 entries"));
  lab[0] = 1;
  assert_int_equal(alma__count_top1(&t, "y", 4, lab, 2, &correct), ALMA_ERR_SHAPE);  /* rows != samples */
  assert_non_null(strstr(alma_last_error(), "one row of class scores per sample"));
  float nan4[4] = {NAN, NAN, NAN, NAN};
  alma_tensor u = {.dtype = ALMA_DTYPE_FLOAT32, .rank = 2, .dims = {1, 4}, .data = nan4, .nbytes = sizeof nan4};
  correct = 0;
  assert_int_equal(alma__count_top1(&u, "y", 1, lab, 1, &correct), ALMA_OK);
  assert_int_equal(correct, 0);  /* no maximum: wrong */
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR (holding the models of make_model.py)\n", argv[0]);
    return 2;
  }
  dir = argv[1];
  snprintf(linear, sizeof linear, "%s/linear.onnx", dir);
  snprintf(two, sizeof two, "%s/two_inputs.onnx", dir);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sweep),          cmocka_unit_test(test_all_conversions_and_in_process),
      cmocka_unit_test(test_loaded_model),   cmocka_unit_test(test_fault_segv),
      cmocka_unit_test(test_fault_abort_exit_error), cmocka_unit_test(test_fault_hang_timeout),
      cmocka_unit_test(test_fault_oom),      cmocka_unit_test(test_fail_fast),
      cmocka_unit_test(test_rejected_before_running), cmocka_unit_test(test_data_sources),
      cmocka_unit_test(test_loader),         cmocka_unit_test(test_compare_outputs),
      cmocka_unit_test(test_count_top1),     cmocka_unit_test(test_labels),
      cmocka_unit_test(test_save_converted), cmocka_unit_test(test_calibration_cache_key),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
