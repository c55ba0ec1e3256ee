/* Throughput scaling (instances x workers), duration mode, batch-size sweeps, pre-/post-processing
 * hooks, and the list config keys. ALMA_TEST_NEEDS_MODELS: argv[1] holds linear.onnx. */
#include <cjson/cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <cmocka.h>

#include "bench/bench.h"

static char linear[512];

static void fast(alma_config *c) {
  alma_config_init(c);
  c->n_samples = 2;
  c->min_time_s = 0;
  c->warmup = 1;
  c->warmup_s = 0;
  c->timeout_s = 120;
  c->verbose = 0;
  c->cache = 0;
}

static void test_lists(void **state) {
  (void)state;
  int64_t v[8];
  assert_int_equal(alma__config_list("k", "8,1,MAX,1", 4, v, 8), 3);  /* sorted, deduplicated, MAX resolved */
  assert_true(v[0] == 1 && v[1] == 4 && v[2] == 8);
  assert_int_equal(alma__config_list("k", "1, 2", 0, v, 8), 2);
  assert_int_equal(alma__config_list("k", "MAX", 0, v, 8), -1);      /* MAX only where allowed */
  assert_int_equal(alma__config_list("k", "0", 0, v, 8), -1);
  assert_int_equal(alma__config_list("k", "2,x", 0, v, 8), -1);
  alma_config c;
  alma_config_init(&c);
  assert_string_equal(c.instances, "1,MAX");
  assert_string_equal(c.workers, "1,2");
  assert_int_equal(alma_config_set(&c, "instances", "1,MAX,4"), ALMA_OK);
  assert_int_equal(alma_config_set(&c, "workers", "MAX"), ALMA_ERR_INVALID_ARG);
  assert_int_equal(alma_config_set(&c, "batch_sizes", "1,8,32"), ALMA_OK);
  assert_int_equal(alma_config_set(&c, "batch_sizes", ""), ALMA_OK);
  assert_int_equal(alma_config_set(&c, "batch_sizes", "1,-8"), ALMA_ERR_INVALID_ARG);
  assert_int_equal(alma_config_set(&c, "duration_s", "2.5"), ALMA_OK);
  assert_true(c.duration_s == 2.5);
  char buf[64];
  assert_int_equal(alma_config_get(&c, "instances", buf, sizeof buf), ALMA_OK);
  assert_string_equal(buf, "1,MAX,4");
}

static void test_peak_rate(void **state) {
  (void)state;
  /* 10 completions in [0, 1), then a burst of 30 within 0.5 s, then 5 more */
  double t[45];
  int n = 0;
  for (int i = 0; i < 10; i++) t[n++] = 0.1 * i;
  for (int i = 0; i < 30; i++) t[n++] = 1.0 + 0.5 * i / 30;
  for (int i = 0; i < 5; i++) t[n++] = 2.0 + 0.2 * i;
  /* busiest 1-second window (t - 1, t]: the burst plus the first four of the tail ending at 2.6 */
  double peak = alma__peak_rate(t, n, 1.0, 2);
  assert_true(peak >= 2 * 30);
  assert_true(peak <= 2 * 40);
  assert_true(isnan(alma__peak_rate(t, 0, 1.0, 1)));
}

/* The default-style matrix on a small model: every configuration present, in order, with
 * consistent counts. */
static void test_matrix(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  c.throughput = 1;
  c.batch_size = 2;
  c.threads = 2;
  c.duration_s = 0.15;
  snprintf(c.instances, sizeof c.instances, "1,MAX");
  snprintf(c.workers, sizeof c.workers, "1,2");
  const char *conv = "FOLD+EAGER";
  alma_results *r = NULL;
  assert_int_equal(alma_benchmark_model(linear, &c, &conv, 1, NULL, &r), ALMA_OK);
  const alma_result *x = alma_results_get(r, 0);
  int64_t inst[2];
  int ni = alma__config_list("instances", "1,MAX", alma__physical_cores(), inst, 2);
  assert_int_equal(alma_result_n_scaling(x), ni * 2);
  int k = 0, concurrent_warned = 0;
  for (int i = 0; i < ni; i++)
    for (int w = 1; w <= 2; w++, k++) {
      const alma_scaling_point *p = alma_result_scaling(x, k);
      assert_non_null(p);
      assert_null(p->error);
      assert_int_equal(p->instances, inst[i]);
      assert_int_equal(p->workers, w);
      assert_int_equal(p->threads_per_instance, 2 / inst[i] > 0 ? 2 / inst[i] : 1);
      assert_int_equal(p->concurrent, inst[i] * w > 1);
      assert_true(p->inferences > 0);
      assert_int_equal(p->samples, 2 * p->inferences);
      assert_int_equal(p->latency.n, p->inferences);
      assert_true(p->duration_s >= 0.15);
      assert_true(fabs(p->throughput_avg - (double)p->samples / p->duration_s) <= 1e-9 * p->throughput_avg);
      /* the window is the whole run here (< 1 s): the peak cannot be far from the average */
      assert_true(p->throughput_peak >= 0.9 * p->throughput_avg);
      assert_true(p->latency.p50 <= p->latency.p90 && p->latency.p90 <= p->latency.p99);
      assert_non_null(strstr(p->stop_reason, "duration_s"));
    }
  for (int i = 0; i < alma_result_n_warnings(x); i++)
    concurrent_warned |= strstr(alma_result_warning(x, i), "concurrent") != NULL;
  assert_true(concurrent_warned);
  /* the latency mode stays a single stream, and its numbers are the result's own */
  assert_string_equal(alma_result_mode(x), "latency");
  assert_true(alma_result_latency(x)->n > 0);
  /* JSON: one object per configuration; read back equal */
  char *json;
  assert_int_equal(alma_results_to_json(r, 0, &json), ALMA_OK);
  alma_results *back;
  assert_int_equal(alma_results_from_json(json, &back), ALMA_OK);
  const alma_result *y = alma_results_get(back, 0);
  assert_int_equal(alma_result_n_scaling(y), ni * 2);
  for (k = 0; k < ni * 2; k++) {
    assert_int_equal(alma_result_scaling(y, k)->inferences, alma_result_scaling(x, k)->inferences);
    assert_true(alma_result_scaling(y, k)->throughput_peak == alma_result_scaling(x, k)->throughput_peak);
  }
  char *json2;
  assert_int_equal(alma_results_to_json(back, 0, &json2), ALMA_OK);
  cJSON *a = cJSON_Parse(json), *b = cJSON_Parse(json2);
  cJSON_DeleteItemFromObject(a, "created");
  cJSON_DeleteItemFromObject(b, "created");
  assert_true(cJSON_Compare(a, b, 1));
  cJSON_Delete(a);
  cJSON_Delete(b);
  free(json);
  free(json2);
  /* CSV: the result's row, then one per configuration */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(alma_results_write_csv(back, f), ALMA_OK);
  fclose(f);
  int lines = 0, thr = 0;
  for (const char *p = buf; (p = strstr(p, "\r\n")); p += 2) lines++;
  for (const char *p = buf; (p = strstr(p, ",throughput,")); p++) thr++;
  assert_int_equal(lines, 1 + 1 + ni * 2);
  assert_int_equal(thr, ni * 2);
  free(buf);
  alma_results_free(back);
  alma_results_free(r);
}

/* Duration mode: timing stops within tolerance of the requested time, whatever n_samples says
 * (n_samples 1 is met at once). */
static void test_duration(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  c.n_samples = 1;
  c.duration_s = 0.4;
  c.throughput = 1;
  snprintf(c.instances, sizeof c.instances, "1");
  snprintf(c.workers, sizeof c.workers, "1");
  const char *conv = "EAGER";
  alma_results *r = NULL;
  assert_int_equal(alma_benchmark_model(linear, &c, &conv, 1, NULL, &r), ALMA_OK);
  const alma_result *x = alma_results_get(r, 0);
  assert_non_null(strstr(alma_result_stop_reason(x), "duration_s (0.4 s)"));
  /* the latency mode's timed phase is inside the child's life */
  assert_true(alma_result_total_elapsed_s(x) >= 0.4);
  const alma_scaling_point *p = alma_result_scaling(x, 0);
  assert_non_null(p);
  /* stops right after the deadline: one batch (microseconds here) plus the 2 ms polling step, and
   * whatever a loaded 2-core CI machine adds by descheduling a worker mid-batch */
  if (p->duration_s < 0.4 || p->duration_s > 0.4 + 0.5) fail_msg("duration %.3f s for 0.4 s asked", p->duration_s);
  alma_results_free(r);
  /* n_samples larger than the duration allows: both must be met */
  c.duration_s = 0.05;
  c.n_samples = 4000;
  c.batch_size = 4;
  assert_int_equal(alma_benchmark_model(linear, &c, &conv, 1, NULL, &r), ALMA_OK);
  x = alma_results_get(r, 0);
  assert_true(alma_result_samples(x) >= 4000);
  assert_true(alma_result_scaling(x, 0)->samples >= 4000);
  assert_true(alma_result_scaling(x, 0)->duration_s >= 0.05);
  alma_results_free(r);
}

static void test_batch_sweep(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  snprintf(c.batch_sizes, sizeof c.batch_sizes, "3,1");
  const char *conv[] = {"EAGER", "FOLD+EAGER"};
  alma_results *r = NULL;
  assert_int_equal(alma_benchmark_model(linear, &c, conv, 2, NULL, &r), ALMA_OK);
  assert_int_equal(alma_results_count(r), 4);
  int64_t want_bs[] = {1, 1, 3, 3};
  for (int i = 0; i < 4; i++) {
    const alma_result *x = alma_results_get(r, i);
    assert_string_equal(alma_result_conversion(x), conv[i % 2]);
    assert_int_equal(alma_result_batch_size(x), want_bs[i]);
    assert_int_equal(alma_result_samples(x) % want_bs[i], 0);
    assert_true(alma_result_check(x)->passed);  /* each batch size has its own reference */
  }
  /* the text report: a table per batch size */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(alma_results_print_summary(r, f), ALMA_OK);
  fclose(f);
  assert_non_null(strstr(buf, "batch size 1\n"));
  assert_non_null(strstr(buf, "batch size 3\n"));
  free(buf);
  alma_results_free(r);
}

/* Hooks: counted (in-process, so the counters are ours), timed apart, applied to the reference. */
static atomic_int n_pre, n_post;
static alma_status pre_double(void *user, const alma_tensor *batch, alma_tensor *in, int n) {
  (void)user;
  atomic_fetch_add(&n_pre, 1);
  for (int i = 0; i < n; i++) {
    alma_tensor t;
    alma_status st = alma__tensor_copy(&t, &batch[i]);
    if (st != ALMA_OK) return st;
    float *v = t.data;
    for (int64_t k = 0; k < alma_tensor_numel(&t); k++) v[k] *= 2;
    in[i] = t;  /* owned: alma frees it */
  }
  return ALMA_OK;
}
static alma_status post_count(void *user, const alma_tensor *out, int n) {
  (void)user;
  (void)out;
  (void)n;
  atomic_fetch_add(&n_post, 1);
  return ALMA_OK;
}
static alma_status pre_fail(void *user, const alma_tensor *batch, alma_tensor *in, int n) {
  (void)user;
  (void)batch;
  (void)in;
  (void)n;
  return alma__errorf(ALMA_ERR_INVALID_ARG, "bad image");
}

static void test_hooks(void **state) {
  (void)state;
  alma_config c;
  fast(&c);
  c.multiprocessing = 0;
  c.preprocess = pre_double;
  c.postprocess = post_count;
  c.throughput = 1;
  c.duration_s = 0.05;
  snprintf(c.instances, sizeof c.instances, "1");
  snprintf(c.workers, sizeof c.workers, "2");
  const char *conv = "FOLD+EAGER";
  alma_results *r = NULL;
  assert_int_equal(alma_benchmark_model(linear, &c, &conv, 1, NULL, &r), ALMA_OK);
  const alma_result *x = alma_results_get(r, 0);
  const alma_latency_stats *pre = alma_result_preprocess(x), *post = alma_result_postprocess(x);
  assert_int_equal(pre->n, alma_result_latency(x)->n);
  assert_int_equal(post->n, alma_result_latency(x)->n);
  assert_true(pre->mean > 0 && post->mean >= 0);
  assert_true(alma_result_check(x)->passed);  /* the reference saw doubled inputs too */
  /* probe reference + first + warm-up + timed + the throughput workers' batches */
  const alma_scaling_point *p = alma_result_scaling(x, 0);
  int64_t least = 1 + 1 + alma_result_warmup_batches(x) + alma_result_latency(x)->n + p->inferences;
  assert_true(atomic_load(&n_pre) >= least);
  assert_true(atomic_load(&n_post) >= least - 1);  /* the probe has no postprocess */
  /* JSON reports them */
  char *json;
  assert_int_equal(alma_results_to_json(r, 0, &json), ALMA_OK);
  assert_non_null(strstr(json, "\"preprocess_ms\":\t{"));
  free(json);
  alma_results_free(r);
  /* a failing hook fails the conversion, naming the hook */
  c.preprocess = pre_fail;
  c.throughput = 0;
  assert_int_not_equal(alma_benchmark_model(linear, &c, &conv, 1, NULL, &r), ALMA_OK);
  if (r) {
    x = alma_results_get(r, 0);
    assert_non_null(strstr(alma_result_error(x), "preprocess hook: bad image"));
    alma_results_free(r);
  } else {
    assert_non_null(strstr(alma_last_error(), "bad image"));  /* the probe's reference run */
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  snprintf(linear, sizeof linear, "%s/linear.onnx", argv[1]);  /* ALMA_TEST_NEEDS_MODELS */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lists),    cmocka_unit_test(test_peak_rate), cmocka_unit_test(test_matrix),
      cmocka_unit_test(test_duration), cmocka_unit_test(test_batch_sweep), cmocka_unit_test(test_hooks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
