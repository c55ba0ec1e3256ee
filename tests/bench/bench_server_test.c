/* The server scenario's core against queueing theory: the Poisson schedule's gaps against the
 * exponential law; one worker with a fixed service time against Lindley's recursion for a FIFO
 * single-server queue fed the same arrivals and the service times measured (exact whatever the
 * machine does to the service), and against the Pollaczek-Khinchine mean wait of M/G/1 when the
 * service times stayed steady (a loaded machine stalls sleeps in bursts, which iid theory does not
 * cover). The service is a sleep, so the checks need little CPU. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <time.h>
#include <cmocka.h>

#include "bench/bench.h"

static void test_arrivals(void **state) {
  (void)state;
  int64_t n = 200000;
  double qps = 1000, *t = malloc((size_t)n * sizeof *t), *u = malloc((size_t)n * sizeof *u);
  assert_non_null(t);
  assert_non_null(u);
  alma__poisson_arrivals(qps, n, 7, t);
  double sum = 0, sum2 = 0, prev = 0;
  int64_t beyond = 0;
  for (int64_t i = 0; i < n; i++) {
    double g = t[i] - prev;
    assert_true(g > 0);
    prev = t[i];
    sum += g;
    sum2 += g * g;
    beyond += g > 2 / qps;
  }
  double mean = sum / (double)n, var = sum2 / (double)n - mean * mean;
  /* Exponential(rate qps): mean 1/qps, CV 1, P(gap > 2/qps) = e^-2; with 2e5 gaps each estimate
   * is within 1% (several standard errors). */
  assert_true(fabs(mean * qps - 1) < 0.01);
  assert_true(fabs(sqrt(var) / mean - 1) < 0.015);
  assert_true(fabs((double)beyond / (double)n - exp(-2)) < 0.004);
  /* A fixed seed: the same schedule every time, another seed another one. */
  alma__poisson_arrivals(qps, n, 7, u);
  assert_memory_equal(t, u, (size_t)n * sizeof *t);
  alma__poisson_arrivals(qps, n, 8, u);
  assert_true(t[0] != u[0]);
  free(t);
  free(u);
}

typedef struct {
  double service_s;
  double *svc;   /* when set: each query's service time, s */
} fake_t;

static alma_status sleep_serve(void *user, int worker, int64_t q, double *t_start, double *t_done, char *err,
                               size_t errn) {
  (void)worker, (void)err, (void)errn;
  const fake_t *f = user;
  *t_start = alma__bench_now();
  double until = *t_start + f->service_s;
  struct timespec ts = {(time_t)until, (long)((until - (double)(time_t)until) * 1e9)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
  *t_done = alma__bench_now();
  if (f->svc) f->svc[q] = *t_done - *t_start;
  return ALMA_OK;
}

static alma_status failing_serve(void *user, int worker, int64_t q, double *t_start, double *t_done, char *err,
                                 size_t errn) {
  (void)user, (void)worker, (void)t_start, (void)t_done;
  if (q < 3) {
    *t_start = *t_done = alma__bench_now();
    return ALMA_OK;
  }
  snprintf(err, errn, "the runtime gave up");
  return ALMA_ERR_RUNTIME;
}

static alma__server_plan plan_of(fake_t *f, double qps, int64_t queries) {
  alma__server_plan p = {.qps = qps, .min_duration_s = 0, .min_queries = queries, .max_time_s = 120,
                         .bound_ms = 1000, .percentile = 99, .early_stop = 0, .seed = 1, .n_workers = 1,
                         .serve = sleep_serve, .user = f};
  return p;
}

static void test_md1(void **state) {
  (void)state;
  int64_t n = 1200;
  double *svc = calloc((size_t)n, sizeof *svc), *arr = calloc((size_t)n, sizeof *arr);
  assert_non_null(svc);
  assert_non_null(arr);
  fake_t f = {0.004, svc};
  alma__server_plan p = plan_of(&f, 125, n);  /* utilization 0.5 */
  alma_server_run r;
  memset(&r, 0, sizeof r);
  char err[600];
  assert_int_equal(alma__server_run(&p, &r, err, sizeof err), ALMA_OK);
  assert_int_equal(r.completed, n);
  assert_int_equal(r.queries, n);
  if (!r.valid) print_message("INVALID on this machine now (%s): the checks below do not need VALID\n", r.reason);
  /* Lindley: query k starts at max(its arrival, the previous one's completion). */
  alma__poisson_arrivals(p.qps, n, p.seed, arr);
  double done = 0, sum = 0;
  for (int64_t k = 0; k < n; k++) {
    done = fmax(arr[k], done) + svc[k];
    sum += done - arr[k];
  }
  double lindley_ms = 1e3 * sum / (double)n;
  /* Pollaczek-Khinchine: mean wait lambda E[S^2] / (2 (1 - lambda E[S])), from the measured
   * service times. */
  double lam = r.scheduled_qps, es = r.service.mean / 1e3;
  double es2 = es * es + pow(r.service.stdev / 1e3, 2);
  double wait_ms = 1e3 * lam * es2 / (2 * (1 - lam * es));
  double measured_wait = r.latency.mean - r.service.mean;
  print_message("M/D/1 at rho %.3f (service CV %.3f): mean latency %.3f ms, Lindley %.3f ms; mean wait %.3f ms, "
                "Pollaczek-Khinchine %.3f ms\n",
                lam * es, r.service.cv, r.latency.mean, lindley_ms, measured_wait, wait_ms);
  /* what Lindley leaves out: a worker waking late for a query that arrives while it is idle */
  assert_true(r.latency.mean >= lindley_ms - 1e-6);
  assert_true(r.latency.mean - lindley_ms < 0.2 * lindley_ms + 1.0);
  if (r.service.cv < 0.05) /* steady service: iid theory applies */
    assert_true(fabs(measured_wait - wait_ms) < 0.35 * wait_ms);
  else
    print_message("service times unsteady (CV %.3f): the Pollaczek-Khinchine check is skipped\n", r.service.cv);
  assert_true(r.latency.p99 >= r.service.p99);  /* queueing only adds */
  /* achieved: completions over the run, close to the schedule's rate when the server keeps up
   * (service slowed to a utilization near 1 by other work does not) */
  if (lam * es < 0.8) assert_true(fabs(r.achieved_qps / r.scheduled_qps - 1) < 0.05);
  free((char *)r.reason);
  free(svc);
  free(arr);
}

static void test_overload(void **state) {
  (void)state;
  fake_t f = {0.004, NULL};
  /* Twice what one worker serves: the queue grows, the p99 latency passes any short bound. */
  alma__server_plan p = plan_of(&f, 500, 400);
  p.bound_ms = 20;
  alma_server_run r;
  memset(&r, 0, sizeof r);
  char err[600];
  assert_int_equal(alma__server_run(&p, &r, err, sizeof err), ALMA_OK);
  assert_false(r.valid);
  assert_false(r.early_stopped);
  assert_int_equal(r.completed, 400);
  assert_non_null(r.reason);
  assert_non_null(strstr(r.reason, "over the 20 ms bound"));
  assert_true(r.percentile_ms > 20);
  assert_true(r.achieved_qps < 0.6 * r.scheduled_qps);
  free((char *)r.reason);
  /* A search's run stops as soon as the over-bound count alone makes it INVALID. */
  memset(&r, 0, sizeof r);
  p.early_stop = 1;
  assert_int_equal(alma__server_run(&p, &r, err, sizeof err), ALMA_OK);
  assert_false(r.valid);
  assert_true(r.early_stopped);
  assert_true(r.completed < 400);
  assert_true(r.over_bound > 400 - 1 - (int64_t)ceil(399 * 0.99));
  free((char *)r.reason);
  /* Four workers serve 1000 q/s between them: the same load is VALID (utilization 0.5; one
   * worker's p99 there is near 800 ms, the queue's growth over the run; four's a few ms, and the
   * bound leaves room for a busy machine's stalls). */
  memset(&r, 0, sizeof r);
  p.early_stop = 0;
  p.n_workers = 4;
  p.bound_ms = 250;
  assert_int_equal(alma__server_run(&p, &r, err, sizeof err), ALMA_OK);
  assert_true(r.valid);
  free((char *)r.reason);
}

static void test_rules(void **state) {
  (void)state;
  fake_t f = {0.0001, NULL};
  alma_server_run r;
  char err[600];
  /* the time cap: INVALID, saying so */
  alma__server_plan p = plan_of(&f, 50, 1000);  /* 20 s of arrivals */
  p.max_time_s = 0.3;
  memset(&r, 0, sizeof r);
  assert_int_equal(alma__server_run(&p, &r, err, sizeof err), ALMA_OK);
  assert_false(r.valid);
  assert_non_null(strstr(r.reason, "max_time_s"));
  assert_true(r.completed < 1000);
  free((char *)r.reason);
  /* the schedule spans min_duration_s at least and holds min_queries at least */
  p = plan_of(&f, 2000, 10);
  p.min_duration_s = 0.25;
  memset(&r, 0, sizeof r);
  assert_int_equal(alma__server_run(&p, &r, err, sizeof err), ALMA_OK);
  assert_true(r.queries >= 500);
  assert_true(r.valid);
  free((char *)r.reason);
  /* a serve error fails the run, naming the query */
  p = plan_of(&f, 1000, 50);
  p.serve = failing_serve;
  memset(&r, 0, sizeof r);
  assert_int_equal(alma__server_run(&p, &r, err, sizeof err), ALMA_ERR_RUNTIME);
  assert_non_null(strstr(err, "the runtime gave up"));
  assert_non_null(strstr(err, "query 3"));
  /* more queries than one run holds */
  p = plan_of(&f, 1e7, 10);
  p.min_duration_s = 100;
  assert_int_equal(alma__server_run(&p, &r, err, sizeof err), ALMA_ERR_INVALID_ARG);
}

static void test_config(void **state) {
  (void)state;
  alma_config c;
  alma_config_init(&c);
  assert_string_equal(c.scenario, "single_stream");
  assert_true(c.latency_percentile == 99);
  assert_int_equal(alma_config_set(&c, "scenario", "Server"), ALMA_OK);
  assert_string_equal(c.scenario, "server");
  assert_int_equal(alma_config_set(&c, "scenario", "multistream"), ALMA_ERR_INVALID_ARG);
  assert_int_equal(alma_config_set(&c, "latency_percentile", "100"), ALMA_ERR_INVALID_ARG);
  assert_int_equal(alma_config_set(&c, "target_qps", "-1"), ALMA_ERR_INVALID_ARG);
  /* scenario server without a bound is refused before anything runs */
  alma_results *res = NULL;
  const char *conv[] = {"EAGER"};
  assert_int_equal(alma_benchmark_model("no-such.onnx", &c, conv, 1, NULL, &res), ALMA_ERR_INVALID_ARG);
  assert_null(res);
  assert_non_null(strstr(alma_last_error(), "latency_bound_ms"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_arrivals), cmocka_unit_test(test_md1), cmocka_unit_test(test_overload),
      cmocka_unit_test(test_rules),    cmocka_unit_test(test_config),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
