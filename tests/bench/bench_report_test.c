/* JSON and CSV results parsed back and checked; the text report's ordering and speed-ups. */
#include <cjson/cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "bench/bench.h"

/* Two ok conversions (the second faster), one error with a traceback, one unavailable. */
static alma_results *sample(void) {
  alma_results *rs = calloc(1, sizeof *rs);
  alma__system_info_basic(&rs->system);
  snprintf(rs->system.runtimes, sizeof rs->system.runtimes, "EAGER");
  alma_config_init(&rs->config);
  rs->model_path = strdup("m.onnx");
  snprintf(rs->model_hash, sizeof rs->model_hash, "%064d", 7);
  rs->n_inputs = 1;
  rs->inputs = calloc(1, sizeof *rs->inputs);
  snprintf(rs->inputs[0].name, sizeof rs->inputs[0].name, "x");
  snprintf(rs->inputs[0].dtype, sizeof rs->inputs[0].dtype, "float32");
  rs->inputs[0].rank = 2;
  rs->inputs[0].dims[0] = 4;
  rs->inputs[0].dims[1] = 16;
  snprintf(rs->inputs[0].declared, sizeof rs->inputs[0].declared, "[batch,16]");
  rs->data_desc = strdup("random");
  double lat[2][4] = {{2, 2.5, 3, 2.5}, {1, 1.25, 1.5, 1.25}};
  for (int k = 0; k < 2; k++) {
    alma_result *r = alma__results_add(rs);
    r->id = k;
    r->conversion = strdup(k ? "FOLD+EAGER" : "EAGER");
    r->status = ALMA_RESULT_OK;
    r->batch_size = 4;
    r->n_raw = 4;
    r->raw_ms = malloc(4 * sizeof(double));
    memcpy(r->raw_ms, lat[k], sizeof lat[k]);
    alma__latency_stats(r->raw_ms, 4, &r->latency);
    r->samples = 16;
    r->inference_s = 1e-3 * (lat[k][0] + lat[k][1] + lat[k][2] + lat[k][3]);
    r->throughput = (double)r->samples / r->inference_s;
    r->load_s = 0.01;
    r->convert_s = 0.002;
    r->first_inference_ms = 5;
    r->peak_rss_bytes = 1 << 20;
    r->threads = 2;
    r->affinity = strdup("0-1");
    r->check.performed = 1;
    r->check.passed = 1;
    r->check.max_abs_err = k ? 1e-7 : 0;
    r->check.max_rel_err = 0;
    r->check.argmax_agreement = 1;
    r->check.cosine_similarity = 1;
    r->stop_reason = strdup("reached n_samples");
  }
  alma__result_warn(&rs->items[1], "a warning, with \"quotes\" and a comma");
  /* labels: 200 samples, EAGER the baseline; FOLD+EAGER's graph saved */
  for (int k = 0; k < 2; k++) {
    alma_result *r = &rs->items[k];
    r->acc.samples = 200;
    r->acc.correct = k ? 179 : 180;
    r->acc.top1 = r->acc.correct / 200.0;
    r->acc.seconds = 0.5;
    alma__result_set_baseline(r, "EAGER", 0.9 - r->acc.top1);
  }
  rs->items[1].saved_path = strdup("out/FOLD+EAGER.onnx");
  alma_result *e = alma__results_add(rs);
  e->conversion = strdup("FOLD+FOLD+EAGER");
  e->status = ALMA_RESULT_ERROR;
  e->error_status = ALMA_ERR_CRASH;
  e->error = strdup("ERR_CRASH: crashed: signal 11 (SIGSEGV) during step 'timed'");
  e->failed_step = strdup("timed");
  e->traceback = strdup("line one\nline two");
  alma_result *u = alma__results_add(rs);
  u->id = 9;
  u->conversion = strdup("CUDA");
  u->status = ALMA_RESULT_UNAVAILABLE;
  u->error_status = ALMA_ERR_UNAVAILABLE;
  u->error = strdup("no CUDA device");
  return rs;
}

static double num(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  assert_non_null(v);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void test_json_schema(void **state) {
  (void)state;
  alma_results *rs = sample();
  char *text;
  assert_int_equal(alma_results_to_json(rs, 1, &text), ALMA_OK);
  cJSON *root = cJSON_Parse(text);
  assert_non_null(root);
  const char *top[] = {"alma_version", "system", "model", "config", "results"};
  for (size_t i = 0; i < 5; i++) assert_non_null(cJSON_GetObjectItemCaseSensitive(root, top[i]));
  const cJSON *sys = cJSON_GetObjectItemCaseSensitive(root, "system");
  const char *sk[] = {"cpu_model", "physical_cores", "isa", "memory_bytes", "os", "kernel", "governor", "libraries"};
  for (size_t i = 0; i < 8; i++) assert_non_null(cJSON_GetObjectItemCaseSensitive(sys, sk[i]));
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(model, "path")->valuestring, "m.onnx");
  const cJSON *in0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(model, "inputs"), 0);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(in0, "name")->valuestring, "x");
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(in0, "shape")), 2);
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(root, "config");
  assert_true(num(cfg, "n_samples") == 100);
  assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "multiprocessing")));
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(cfg, "device")->valuestring, "cpu");

  const cJSON *res = cJSON_GetObjectItemCaseSensitive(root, "results");
  assert_int_equal(cJSON_GetArraySize(res), 4);
  const cJSON *r1 = cJSON_GetArrayItem(res, 1);
  const char *rk[] = {"id", "conversion", "status", "device", "batch_size", "samples", "throughput_samples_per_s",
                      "total_elapsed_s", "inference_s", "load_s", "convert_s", "first_inference_ms", "peak_rss_bytes",
                      "latency_ms", "check", "warnings", "error", "traceback", "raw_ms"};
  for (size_t i = 0; i < sizeof rk / sizeof rk[0]; i++)
    if (!cJSON_GetObjectItemCaseSensitive(r1, rk[i])) fail_msg("result lacks '%s'", rk[i]);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(r1, "status")->valuestring, "ok");
  assert_true(num(r1, "throughput_samples_per_s") == 16 / 5e-3);
  const cJSON *lat = cJSON_GetObjectItemCaseSensitive(r1, "latency_ms");
  const char *lk[] = {"mean", "stdev", "cv", "min", "p50", "p90", "p95", "p99", "max", "n"};
  for (size_t i = 0; i < sizeof lk / sizeof lk[0]; i++) assert_true(isfinite(num(lat, lk[i])));
  assert_true(num(lat, "p50") == 1.25 && num(lat, "n") == 4);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(lat, "mean_ci95")), 2);
  assert_true(cJSON_IsNull(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(lat, "median_ci95"), 0)));  /* n < 6 */
  const cJSON *chk = cJSON_GetObjectItemCaseSensitive(r1, "check");
  assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(chk, "passed")));
  assert_true(num(chk, "cosine") == 1);
  assert_null(cJSON_GetObjectItemCaseSensitive(chk, "cosine_similarity"));  /* renamed in schema 2 */
  assert_true(num(root, "schema_version") == 2);
  const cJSON *acc = cJSON_GetObjectItemCaseSensitive(r1, "accuracy");
  assert_true(num(acc, "top1") == 0.895 && num(acc, "samples") == 200 && num(acc, "correct") == 179);
  assert_true(fabs(num(acc, "top1_drop") - 0.005) < 1e-12);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(acc, "baseline")->valuestring, "EAGER");
  const cJSON *sv = cJSON_GetObjectItemCaseSensitive(r1, "saved_converted");
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(sv, "path")->valuestring, "out/FOLD+EAGER.onnx");
  assert_true(num(sv, "alma_ops") == 0);
  assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(res, 0), "saved_converted")));
  assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(res, 2), "accuracy")));
  assert_true(num(chk, "max_abs_err") == 1e-7 && num(chk, "argmax_agreement") == 1);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r1, "raw_ms")), 4);
  assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r1, "error")));
  const cJSON *r2 = cJSON_GetArrayItem(res, 2);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(r2, "status")->valuestring, "error");
  assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r2, "id")));
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(r2, "traceback")->valuestring, "line one\nline two");
  assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r2, "throughput_samples_per_s")));
  assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r2, "check"), "passed")));
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(res, 3), "status")->valuestring, "unavailable");

  /* every result reads back into the same values (this is also the child->parent record) */
  for (int i = 0; i < 4; i++) {
    alma_result back;
    alma__result_init(&back);
    assert_int_equal(alma__result_from_cjson(cJSON_GetArrayItem(res, i), &back), ALMA_OK);
    const alma_result *o = &rs->items[i];
    assert_int_equal(back.id, o->id);
    assert_string_equal(back.conversion, o->conversion);
    assert_int_equal(back.status, o->status);
    assert_int_equal(back.error_status, o->error_status);
    assert_int_equal(back.n_raw, o->n_raw);
    assert_int_equal(back.n_warnings, o->n_warnings);
    assert_true(back.throughput == o->throughput || (isnan(back.throughput) && isnan(o->throughput)));
    assert_true(back.latency.p99 == o->latency.p99 || (isnan(back.latency.p99) && isnan(o->latency.p99)));
    assert_true(back.latency.mean_ci95[1] == o->latency.mean_ci95[1] || isnan(o->latency.mean_ci95[1]));
    assert_int_equal(back.check.passed, o->check.passed);
    assert_true(back.check.cosine_similarity == o->check.cosine_similarity ||
                (isnan(back.check.cosine_similarity) && isnan(o->check.cosine_similarity)));
    assert_true(back.acc.samples == o->acc.samples && back.acc.correct == o->acc.correct);
    assert_true((back.saved_path == NULL) == (o->saved_path == NULL));
    alma__result_clear(&back);
  }
  cJSON_Delete(root);
  free(text);

  /* files of schema 1 named the cosine "cosine_similarity" */
  {
    cJSON *old = cJSON_Parse("{\"status\": \"ok\", \"check\": {\"performed\": true, \"cosine_similarity\": 0.5}}");
    alma_result back;
    alma__result_init(&back);
    assert_int_equal(alma__result_from_cjson(old, &back), ALMA_OK);
    assert_true(back.check.cosine_similarity == 0.5);
    assert_null(alma_result_accuracy(&back));
    assert_string_equal(alma_result_saved_path(&back), "");
    alma__result_clear(&back);
    cJSON_Delete(old);
  }

  /* without --raw there is no raw_ms */
  assert_int_equal(alma_results_to_json(rs, 0, &text), ALMA_OK);
  root = cJSON_Parse(text);
  assert_null(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "results"), 0), "raw_ms"));
  cJSON_Delete(root);
  free(text);
  alma_results_free(rs);
}

/* Minimal RFC 4180 reader: fields of one record starting at *p. */
static int csv_record(const char **p, char fields[96][512]) {
  int n = 0;
  size_t len = 0;
  int quoted = 0;
  fields[0][0] = 0;
  for (;; (*p)++) {
    char c = **p;
    if (quoted) {
      if (c == '"' && (*p)[1] == '"') {
        fields[n][len++] = '"';
        (*p)++;
      } else if (c == '"') {
        quoted = 0;
      } else {
        fields[n][len++] = c;
      }
    } else if (c == '"') {
      quoted = 1;
    } else if (c == ',' || c == '\r' || c == '\n' || c == 0) {
      fields[n][len] = 0;
      n++;
      len = 0;
      if (c == ',') continue;
      if (c == '\r') (*p)++;
      if (**p == '\n') (*p)++;
      return n;
    } else {
      fields[n][len++] = c;
    }
  }
}

static void test_csv(void **state) {
  (void)state;
  alma_results *rs = sample();
  /* row 0 disturbed, with the clock check; row 1 a row of two repeats, one disturbed */
  rs->items[0].cont.measured = 1;
  rs->items[0].cont.disturbed = 1;
  rs->items[0].cont.cpu_share = 0.4;
  rs->items[0].cont.reason = strdup("got 40% of the CPU it asked for");
  rs->items[0].clock_agreement = 0.999;
  for (int k = 0; k < 2; k++)
    assert_int_equal(alma__repeat_push(&rs->items[1].rep, &(alma_repeat_run){.run_index = k, .n = 2, .median_ms = 1 + k,
                                                                       .cpu_share = NAN, .disturbed = k}),
                     ALMA_OK);
  alma_repeat_stats *rep = &rs->items[1].rep;
  rep->median_ms = 1.5, rep->ci95[0] = 1, rep->ci95[1] = 2, rep->spread = 0.5, rep->n_disturbed = 1;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(alma_results_write_csv(rs, f), ALMA_OK);
  fclose(f);
  static char head[96][512], row[96][512];
  const char *p = buf;
  int nh = csv_record(&p, head);
  assert_true(nh > 30);
  assert_string_equal(head[0], "id");
  int col_conv = -1, col_tp = -1, col_warn = -1, col_err = -1, col_p50 = -1, col_pass = -1, col_cos = -1, col_top1 = -1,
      col_saved = -1, col_drop = -1;
  for (int i = 0; i < nh; i++) {
    if (!strcmp(head[i], "conversion")) col_conv = i;
    if (!strcmp(head[i], "throughput_samples_per_s")) col_tp = i;
    if (!strcmp(head[i], "warnings")) col_warn = i;
    if (!strcmp(head[i], "error")) col_err = i;
    if (!strcmp(head[i], "latency_p50_ms")) col_p50 = i;
    if (!strcmp(head[i], "check_passed")) col_pass = i;
    if (!strcmp(head[i], "check_cosine")) col_cos = i;
    if (!strcmp(head[i], "accuracy_top1")) col_top1 = i;
    if (!strcmp(head[i], "accuracy_top1_drop")) col_drop = i;
    if (!strcmp(head[i], "saved_converted")) col_saved = i;
  }
  int col_dist = -1, col_share = -1, col_clock = -1, col_reps = -1, col_rmed = -1, col_rdist = -1;
  for (int i = 0; i < nh; i++) {
    if (!strcmp(head[i], "disturbed")) col_dist = i;
    if (!strcmp(head[i], "cpu_share")) col_share = i;
    if (!strcmp(head[i], "clock_agreement")) col_clock = i;
    if (!strcmp(head[i], "repeats")) col_reps = i;
    if (!strcmp(head[i], "repeat_median_ms")) col_rmed = i;
    if (!strcmp(head[i], "repeats_disturbed")) col_rdist = i;
  }
  assert_true(col_dist >= 0 && col_share >= 0 && col_clock >= 0 && col_reps >= 0 && col_rmed >= 0 && col_rdist >= 0);
  assert_true(col_cos >= 0 && col_top1 >= 0 && col_saved >= 0 && col_drop >= 0);
  assert_true(col_conv >= 0 && col_tp >= 0 && col_warn >= 0 && col_err >= 0 && col_p50 >= 0 && col_pass >= 0);
  for (int k = 0; k < 4; k++) {
    assert_int_equal(csv_record(&p, row), nh);
    assert_string_equal(row[col_conv], rs->items[k].conversion);
    if (k < 2) {
      assert_true(strtod(row[col_tp], NULL) == rs->items[k].throughput);
      assert_true(strtod(row[col_p50], NULL) == rs->items[k].latency.p50);
      assert_string_equal(row[col_pass], "true");
      assert_true(strtod(row[col_cos], NULL) == 1);
      assert_true(strtod(row[col_top1], NULL) == rs->items[k].acc.top1);
      assert_true(strtod(row[col_drop], NULL) == rs->items[k].acc.top1_drop);
      assert_string_equal(row[col_saved], k ? "out/FOLD+EAGER.onnx" : "");
      assert_string_equal(row[col_dist], k ? "" : "true");
      assert_string_equal(row[col_share], k ? "" : "0.4");
      assert_string_equal(row[col_clock], k ? "" : "0.999");
      assert_string_equal(row[col_reps], k ? "2" : "");
      assert_string_equal(row[col_rmed], k ? "1.5" : "");
      assert_string_equal(row[col_rdist], k ? "1" : "");
    } else {
      assert_string_equal(row[col_tp], "");  /* unknown = empty */
      assert_string_equal(row[col_pass], "");
    }
  }
  assert_string_equal(rs->items[1].warnings[0], "a warning, with \"quotes\" and a comma");
  /* re-read row 1 to check the quoted warning */
  p = buf;
  csv_record(&p, head);
  csv_record(&p, row);
  csv_record(&p, row);
  assert_string_equal(row[col_warn], "a warning, with \"quotes\" and a comma");
  csv_record(&p, row);
  assert_string_equal(row[col_err], "ERR_CRASH: crashed: signal 11 (SIGSEGV) during step 'timed'");
  csv_record(&p, row);
  assert_string_equal(row[col_err], "no CUDA device");
  assert_string_equal(row[0], "9");
  assert_int_equal(*p, 0);
  free(buf);
  alma_results_free(rs);
}

static void test_text(void **state) {
  (void)state;
  alma_results *rs = sample();
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(alma_results_print(rs, f, 1), ALMA_OK);
  fclose(f);
  /* summary sorted by throughput: FOLD+EAGER (2x) above EAGER, failures last */
  const char *table = strstr(buf, "speed-up  top-1             check");
  assert_non_null(table);
  const char *fold = strstr(table, "FOLD+EAGER "), *eager = strstr(table, " EAGER "), *err = strstr(table, "FOLD+FOLD+EAGER");
  assert_true(fold && eager && err && fold < eager && eager < err);
  assert_non_null(strstr(table, "2.00x"));
  assert_non_null(strstr(table, "1.00x"));
  assert_non_null(strstr(buf, "ranked by median latency per batch; samples/s = batch size / median; "
                              "speed-up = median of EAGER / median"));
  /* accuracy: a line per conversion, a column with the change in points against the baseline */
  assert_non_null(strstr(buf, "accuracy   top-1 90.00% (180 of 200 labelled samples"));
  assert_non_null(strstr(buf, "accuracy   top-1 89.50% (179 of 200 labelled samples; 0.5 s, not timed), -0.50 points vs EAGER"));
  assert_non_null(strstr(table, "89.50% (-0.50)"));
  assert_non_null(strstr(buf, "saved      out/FOLD+EAGER.onnx (standard ONNX ops only)"));
  assert_non_null(strstr(buf, "top-1: share of the 200 labelled samples"));
  assert_non_null(strstr(buf, "line two"));  /* traceback included */
  assert_non_null(strstr(buf, "unavailable: no CUDA device"));
  free(buf);
  alma_results_free(rs);
}

/* One conversion with a steady run, one with a faster median but a mean (and so a throughput)
 * pulled down by one outlier: the summary ranks and compares by the median alone, and marks the
 * outlier row noisy; a load average at the CPU count adds the busy-machine line. */
static alma_result *add_timed(alma_results *rs, const char *name, int id, const double *ms, int n) {
  alma_result *r = alma__results_add(rs);
  r->id = id;
  r->conversion = strdup(name);
  r->status = ALMA_RESULT_OK;
  r->batch_size = 4;
  alma__latency_stats(ms, n, &r->latency);
  r->samples = 4 * n;
  r->inference_s = 0;
  for (int i = 0; i < n; i++) r->inference_s += 1e-3 * ms[i];
  r->throughput = (double)r->samples / r->inference_s;
  r->threads = 1;
  r->check.performed = r->check.passed = 1;
  return r;
}

static char *summary_of(alma_results *rs) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(alma_results_print_summary(rs, f), ALMA_OK);
  fclose(f);
  return buf;
}

static void test_text_median(void **state) {
  (void)state;
  double steady[20], outlier[20];
  for (int i = 0; i < 20; i++) {
    steady[i] = 2.0 + 0.001 * (i % 3);
    outlier[i] = 1.0 + 0.001 * (i % 3);
  }
  outlier[7] = 100;  /* mean 5.95 ms: by mean throughput it would rank last, at 0.34x */
  alma_results *rs = calloc(1, sizeof *rs);
  alma_config_init(&rs->config);
  rs->system.logical_cores = 2;
  rs->system.load_average[0] = 0.5;
  add_timed(rs, "EAGER", 0, steady, 20);
  add_timed(rs, "FOLD+EAGER", 1, outlier, 20);  /* may move the first row: read both after */
  assert_true(rs->items[1].throughput < rs->items[0].throughput);
  char *buf = summary_of(rs);
  const char *fold = strstr(buf, "FOLD+EAGER"), *eager = strstr(buf, "   0  EAGER");
  assert_true(fold && eager && fold < eager);  /* ranked by the median */
  const char *line = fold;
  const char *nl = strchr(line, '\n');
  char row[256];
  snprintf(row, sizeof row, "%.*s", (int)(nl - line), line);
  assert_non_null(strstr(row, "ok, noisy"));
  assert_non_null(strstr(row, "2.00x"));            /* 2.001 / 1.001 from the medians */
  assert_non_null(strstr(row, "3996"));             /* 4 samples / 1.001 ms */
  assert_non_null(strstr(row, "1.001 ["));          /* the median with its CI */
  line = eager;
  nl = strchr(line, '\n');
  snprintf(row, sizeof row, "%.*s", (int)(nl - line), line);
  assert_null(strstr(row, "noisy"));
  assert_non_null(strstr(row, "1.00x"));
  assert_non_null(strstr(buf, "ranked by median latency per batch"));
  assert_non_null(strstr(buf, "noisy: CV above 10%"));
  assert_null(strstr(buf, "busy machine"));
  free(buf);
  rs->system.load_average[0] = 2.5;
  buf = summary_of(rs);
  assert_non_null(strstr(buf, "busy machine: load average 2.50 on 2 logical CPUs"));
  free(buf);
  alma_results_free(rs);
}

static void test_json_load_back(void **state) {
  (void)state;
  alma_results *rs = sample();
  rs->config.batch_size = 4;
  rs->config.seed = 12345;
  rs->config.multiprocessing = 0;
  char *a, *b;
  assert_int_equal(alma_results_to_json(rs, 1, &a), ALMA_OK);
  alma_results *back;
  assert_int_equal(alma_results_from_json(a, &back), ALMA_OK);
  assert_int_equal(alma_results_count(back), 4);
  assert_int_equal(alma_results_config(back)->batch_size, 4);
  assert_true(alma_results_config(back)->seed == 12345);
  assert_int_equal(alma_results_config(back)->multiprocessing, 0);
  assert_string_equal(alma_results_system(back)->cpu_model, rs->system.cpu_model);
  assert_string_equal(alma_results_model_hash(back), rs->model_hash);
  assert_int_equal(alma_result_n_raw(alma_results_get(back, 1)), 4);
  /* writing what was read gives the same document (but for the time it was written) */
  assert_int_equal(alma_results_to_json(back, 1, &b), ALMA_OK);
  cJSON *ja = cJSON_Parse(a), *jb = cJSON_Parse(b);
  cJSON_DeleteItemFromObject(ja, "created");
  cJSON_DeleteItemFromObject(jb, "created");
  if (!cJSON_Compare(ja, jb, 1)) fail_msg("round trip differs:\n%s\n---\n%s", a, b);
  cJSON_Delete(ja);
  cJSON_Delete(jb);
  free(a);
  free(b);
  alma_results_free(back);
  assert_int_equal(alma_results_from_json("{\"results\": []}", &back), ALMA_ERR_PARSE);
  assert_int_equal(alma_results_from_json("[1, 2", &back), ALMA_ERR_PARSE);
  assert_null(back);
  alma_results_free(rs);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_json_schema),
      cmocka_unit_test(test_json_load_back),
      cmocka_unit_test(test_csv),
      cmocka_unit_test(test_text),
      cmocka_unit_test(test_text_median),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
