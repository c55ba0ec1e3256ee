/* Numbers that reproduce (ALMA_TEST_NEEDS_MODELS): contention caught in the timed phase (a CPU-bound
 * competitor pinned to the benchmark's CPU mid-run must flag the row, every time), the outside
 * check of alma's clock, --repeat's interleaved order and its figures, and the hierarchical
 * bootstrap against an exact enumeration and a brute-force resampling. argv[1]: the directory
 * holding make_model.py's models. */
#include <math.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "bench/bench.h"
#include "runtimes/runtime.h"

static const char *dir;
static char linear[512], profile[512];

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* NumPy's median (linear interpolation) of v[0..n), computed here on a sorted copy. */
static double np_median(const double *v, int64_t n) {
  double *c = malloc((size_t)n * sizeof *c);
  memcpy(c, v, (size_t)n * sizeof *c);
  qsort(c, (size_t)n, sizeof *c, cmp_d);
  double h = 0.5 * (double)(n - 1);
  int64_t lo = (int64_t)floor(h);
  double m = lo + 1 < n ? c[lo] + (h - (double)lo) * (c[lo + 1] - c[lo]) : c[lo];
  free(c);
  return m;
}

/* ---- the bootstrap ---------------------------------------------------------------------------- */

/* One process (k = 1): the replicates are the medians of resamples of x. Their distribution is
 * known exactly by enumerating every one of the n^n resamples; the drawn frequencies must match it
 * (within 5 standard errors), for an odd and an even n. */
static void check_exact(int n) {
  double x[6];
  for (int i = 0; i < n; i++) x[i] = (double)(i + 1);
  /* exact: every tuple of indices, each with probability n^-n */
  int total = 1;
  for (int i = 0; i < n; i++) total *= n;
  double vals[64];
  double prob[64];
  int nv = 0;
  for (int t = 0; t < total; t++) {
    double s[6];
    int u = t;
    for (int i = 0; i < n; i++, u /= n) s[i] = x[u % n];
    double m = np_median(s, n);
    int j = 0;
    while (j < nv && vals[j] != m) j++;
    if (j == nv) {
      vals[nv] = m;
      prob[nv++] = 0;
    }
    prob[j] += 1.0 / total;
  }
  enum { R = 200000 };
  double *reps = malloc(R * sizeof *reps), ci[2];
  const double *sorted[1] = {x};
  int64_t nn[1] = {n};
  assert_int_equal(alma__hier_bootstrap(sorted, nn, 1, R, 7, 0.95, ci, reps), 0);
  for (int j = 0; j < nv; j++) {
    int64_t c = 0;
    for (int b = 0; b < R; b++) c += reps[b] == vals[j];
    double f = (double)c / R, se = sqrt(prob[j] * (1 - prob[j]) / R);
    if (fabs(f - prob[j]) > 5 * se + 1e-4)
      fail_msg("n=%d: median %g drawn %.5f of the time, exactly %.5f", n, vals[j], f, prob[j]);
  }
  int64_t other = 0;
  for (int b = 0; b < R; b++) {
    int j = 0;
    while (j < nv && reps[b] != vals[j]) j++;
    other += j == nv;
  }
  assert_int_equal(other, 0);  /* no value a real resample cannot give */
  free(reps);
}

static void test_resampled_median_exact(void **state) {
  (void)state;
  check_exact(5);
  check_exact(4);
  check_exact(6);
}

static uint64_t lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 33;
}

/* k processes whose medians differ far more than their batches scatter: the hierarchical CI must
 * span the processes (the within-process interval would not), and agree with a brute-force
 * hierarchical bootstrap that really draws processes and then batches. */
/* The prediction interval of one more process's median: against the formula worked in Python
 * (statistics.stdev of the logs, the t table's 2.7764451 for 4 degrees of freedom); NaN below
 * three processes and for a median that is not positive. */
static void test_next95(void **state) {
  (void)state;
  const double med[] = {1.0, 1.1, 0.9, 1.05, 0.95};
  double pi[2];
  alma__repeat_next95(med, 5, pi);
  assert_true(fabs(pi[0] - 0.7836841086730945) < 1e-6 && fabs(pi[1] - 1.26963299197367) < 1e-6);
  alma__repeat_next95(med, 2, pi);
  assert_true(isnan(pi[0]) && isnan(pi[1]));
  const double bad[] = {1.0, 0.0, 1.0};
  alma__repeat_next95(bad, 3, pi);
  assert_true(isnan(pi[0]));
  /* wider than the spread of the processes themselves: it is for a new one */
  alma__repeat_next95(med, 5, pi);
  assert_true(pi[0] < 0.9 && pi[1] > 1.1);
}

static void test_hier_bootstrap_brute_force(void **state) {
  (void)state;
  enum { K = 5, N = 41, B = 4000 };
  double x[K][N];
  uint64_t s = 42;
  for (int p = 0; p < K; p++) {
    for (int i = 0; i < N; i++) x[p][i] = 10 + p + ((double)(lcg(&s) % 1000) / 1000.0 - 0.5);
    qsort(x[p], N, sizeof x[p][0], cmp_d);
  }
  const double *sorted[K];
  int64_t n[K];
  for (int p = 0; p < K; p++) {
    sorted[p] = x[p];
    n[p] = N;
  }
  double ci[2];
  assert_int_equal(alma__hier_bootstrap(sorted, n, K, B, 3, 0.95, ci, NULL), 0);
  /* brute force */
  double *rep = malloc(B * sizeof *rep), m[K], draw[N];
  for (int b = 0; b < B; b++) {
    for (int j = 0; j < K; j++) {
      int p = (int)(lcg(&s) % K);
      for (int i = 0; i < N; i++) draw[i] = x[p][lcg(&s) % N];
      m[j] = np_median(draw, N);
    }
    rep[b] = np_median(m, K);
  }
  qsort(rep, B, sizeof *rep, cmp_d);
  double lo = alma__percentile_sorted(rep, B, 0.025), hi = alma__percentile_sorted(rep, B, 0.975);
  double w = hi - lo;
  assert_true(w > 2.5);  /* spans the processes' medians 10..14 */
  if (fabs(ci[0] - lo) > 0.1 * w || fabs(ci[1] - hi) > 0.1 * w)
    fail_msg("hierarchical CI [%g, %g], brute force [%g, %g]", ci[0], ci[1], lo, hi);
  /* the batches alone give an interval a tenth as wide */
  const double *one[1] = {x[2]};
  int64_t n1[1] = {N};
  double ci1[2];
  assert_int_equal(alma__hier_bootstrap(one, n1, 1, B, 3, 0.95, ci1, NULL), 0);
  assert_true(ci1[1] - ci1[0] < 0.1 * (ci[1] - ci[0]));
  assert_int_equal(alma__hier_bootstrap(sorted, n, 0, B, 3, 0.95, ci, NULL), -1);
  free(rep);
}

/* ---- the contention rule ---------------------------------------------------------------------- */
static alma_contention figures(double wall, int threads, int cpus, double cpu, double delay, double others,
                               double steal) {
  alma_contention c;
  memset(&c, 0, sizeof c);
  c.measured = 1;
  c.wall_s = wall;
  c.threads = threads;
  c.cpus = cpus;
  c.cpu_s = cpu;
  c.run_delay_s = delay;
  c.cpu_share = isfinite(delay) ? cpu / (cpu + delay) : NAN;
  c.others_cpu_s = others;
  c.steal_s = steal;
  c.involuntary_switches = 10;
  c.psi_some_s = NAN;
  return c;
}

static void test_judge(void **state) {
  (void)state;
  unsetenv("OMP_WAIT_POLICY");
  alma_contention c = figures(1, 1, 1, 0.5, 0.5, 0.5, 0);
  alma__contention_judge(&c, alma__spin_advice_of("EAGER", NULL, c.threads));
  assert_true(c.disturbed);
  assert_non_null(strstr(c.reason, "it got 50% of the CPU it was ready to use"));
  assert_false(c.spinning);
  alma__contention_clear(&c);
  c = figures(1, 1, 2, 0.99, 0.01, 0.9, 0);  /* others on the other CPU: not in its way */
  alma__contention_judge(&c, alma__spin_advice_of("EAGER", NULL, c.threads));
  assert_false(c.disturbed);
  assert_null(c.reason);
  alma__contention_clear(&c);
  c = figures(1, 1, 1, 0.5, NAN, 0.5, 0);  /* without schedstat: CPU time against the others' */
  alma__contention_judge(&c, alma__spin_advice_of("EAGER", NULL, c.threads));
  assert_true(c.disturbed);
  assert_non_null(strstr(c.reason, "it got 50% of the CPU time its 1 thread asked for"));
  alma__contention_clear(&c);
  c = figures(1, 2, 2, 1.0, NAN, 0.05, 0);  /* half used, others idle: a runtime that does not use its threads */
  alma__contention_judge(&c, alma__spin_advice_of("EAGER", NULL, c.threads));
  assert_false(c.disturbed);
  alma__contention_clear(&c);
  c = figures(1, 1, 1, 0.99, 0.0, 0.0, 0.2);
  alma__contention_judge(&c, alma__spin_advice_of("EAGER", NULL, c.threads));
  assert_true(c.disturbed);
  assert_non_null(strstr(c.reason, "the hypervisor stole"));
  alma__contention_clear(&c);
  c = figures(1, 2, 2, 1.2, 0.6, 0.8, 0);  /* a spinning runtime under contention */
  alma__contention_judge(&c, alma__spin_advice_of("DNNL", NULL, c.threads));
  assert_true(c.disturbed && c.spinning);
  assert_non_null(strstr(c.advice, "OMP_WAIT_POLICY=passive"));
  alma__contention_clear(&c);
  c = figures(1, 2, 2, 1.2, 0.6, 0.8, 0);
  alma__contention_judge(&c, alma__spin_advice_of("ORT", NULL, c.threads));
  assert_true(c.spinning);
  assert_non_null(strstr(c.advice, "ort.spinning=off"));
  alma__contention_clear(&c);
  if (alma__runtime_find("ORT")) { /* the setting that avoids it was given: no advice */
    c = figures(1, 2, 2, 1.2, 0.6, 0.8, 0);
    alma__contention_judge(&c, alma__spin_advice_of("ORT", "dnnl.winograd=on,ort.spinning=off", c.threads));
    assert_true(c.disturbed);
    assert_false(c.spinning);
    alma__contention_clear(&c);
  }
  setenv("OMP_WAIT_POLICY", "passive", 1);  /* already avoided: no advice */
  c = figures(1, 2, 2, 1.2, 0.6, 0.8, 0);
  alma__contention_judge(&c, alma__spin_advice_of("DNNL", NULL, c.threads));
  assert_true(c.disturbed);
  assert_false(c.spinning);
  alma__contention_clear(&c);
  unsetenv("OMP_WAIT_POLICY");
  c = figures(1, 1, 2, 0.5, 0.5, 0.5, 0);  /* one thread does not spin-wait for partners */
  alma__contention_judge(&c, alma__spin_advice_of("DNNL", NULL, c.threads));
  assert_true(c.disturbed);
  assert_false(c.spinning);
  alma__contention_clear(&c);
}

/* ---- a competitor mid-run --------------------------------------------------------------------- */
typedef struct {
  pid_t competitor;
  int cpu;
} compete_ctx;

static void start_competitor(void *user, int index, int count, const char *conversion, const char *phase,
                             int64_t done, int64_t total, double elapsed_s) {
  compete_ctx *c = user;
  (void)index, (void)count, (void)conversion, (void)done, (void)total, (void)elapsed_s;
  if (c->competitor || strcmp(phase, "timed")) return;
  pid_t p = fork();
  if (p == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    alarm(60);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(c->cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
    volatile uint64_t spin = 0;
    for (;;) spin++;
  }
  c->competitor = p;
}

static volatile double spin_sink; /* the busy loop's work, kept */

static void spin_for(double s) {
  double t0 = alma__bench_now();
  while (alma__bench_now() - t0 < s) spin_sink += 1;
}

/* Pins this process to the first CPU it may use (returned); *saved gets the affinity to restore. */
static int pin_to_one_cpu(cpu_set_t *saved) {
  cpu_set_t one;
  assert_int_equal(sched_getaffinity(0, sizeof *saved, saved), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, saved)) cpu++;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
  return cpu;
}

/* The public pair (alma_contention_begin/end), as the Python package uses it around a phase it
 * times itself: figures of this process, and a competitor on the one CPU caught, with the
 * caller's spin advice given only to a phase whose threads can spin. */
static void test_public_pair(void **state) {
  (void)state;
  alma_contention c;
  assert_int_equal(alma_contention_end(NULL, 1, NULL, &c), ALMA_ERR_INVALID_ARG);
  alma_cpu_snapshot *s = alma_contention_begin();
  assert_non_null(s);
  spin_for(0.2);
  assert_int_equal(alma_contention_end(s, 1, "", &c), ALMA_OK);
  assert_true(c.measured && c.wall_s >= 0.2 && c.cpu_s > 0 && c.threads == 1 && c.cpus >= 1);
  assert_null(c.advice);
  alma_contention_clear(&c);

  cpu_set_t saved;
  pin_to_one_cpu(&saved);
  pid_t comp = fork();
  if (comp == 0) {
    for (;;) spin_for(1);
  }
  assert_true(comp > 0);
  s = alma_contention_begin();
  spin_for(0.6);
  assert_int_equal(alma_contention_end(s, 2, "the caller's advice", &c), ALMA_OK);
  kill(comp, SIGKILL);
  waitpid(comp, NULL, 0);
  assert_int_equal(sched_setaffinity(0, sizeof saved, &saved), 0);
  if (!c.disturbed) fail_msg("not flagged: cpu %.3f s over %.3f s, run delay %g s", c.cpu_s, c.wall_s, c.run_delay_s);
  assert_non_null(c.reason);
  assert_true(c.spinning); /* two threads asked for: the advice goes with the verdict */
  assert_string_equal(c.advice, "the caller's advice");
  alma_contention_clear(&c);
  assert_null(c.reason);
}

static void test_competitor_flagged(void **state) {
  (void)state;
  cpu_set_t saved;
  /* the benchmark's child inherits this: it and the competitor share one CPU */
  int cpu = pin_to_one_cpu(&saved);
  for (int round = 0; round < 2; round++) {
    alma_config c;
    alma_config_init(&c);
    c.threads = 1;
    c.batch_size = 8;
    c.n_samples = 1;
    c.min_time_s = 1.0;
    c.warmup = 1;
    c.warmup_s = 0;
    c.cache = 0;
    compete_ctx cc = {0, cpu};
    c.progress = start_competitor;
    c.progress_user = &cc;
    const char *conv[] = {"EAGER"};
    alma_results *r = NULL;
    alma_status st = alma_benchmark_model(profile, &c, conv, 1, NULL, &r);
    if (cc.competitor > 0) {
      kill(cc.competitor, SIGKILL);
      waitpid(cc.competitor, NULL, 0);
    }
    assert_int_equal(st, ALMA_OK);
    assert_true(cc.competitor > 0);
    const alma_result *x = alma_results_get(r, 0);
    const alma_contention *k = alma_result_contention(x);
    assert_non_null(k);
    if (!alma_result_disturbed(x))
      fail_msg("round %d: not flagged: cpu %.3f s over %.3f s, run delay %g s, others %g s", round, k->cpu_s, k->wall_s,
               k->run_delay_s, k->others_cpu_s);
    assert_int_equal(k->cpus, 1);
    assert_int_equal(k->threads, 1);
    /* the share it got: about half, the competitor took the rest */
    double share = isfinite(k->cpu_share) ? k->cpu_share : k->utilization;
    assert_true(share > 0.05 && share < ALMA__MIN_CPU_SHARE);
    assert_true(k->utilization < ALMA__MIN_CPU_SHARE);
    assert_non_null(k->reason);
    assert_non_null(strstr(k->reason, "% of the CPU"));
    int warned = 0;
    for (int i = 0; i < alma_result_n_warnings(x); i++)
      warned |= !strncmp(alma_result_warning(x, i), "disturbed: ", 11);
    assert_true(warned);
    char *json = NULL;
    assert_int_equal(alma_results_to_json(r, 0, &json), ALMA_OK);
    const char *d = strstr(json, "\"disturbed\":");
    assert_non_null(d);
    d += strlen("\"disturbed\":");
    while (*d == ' ' || *d == '\t' || *d == '\n') d++;
    assert_int_equal(strncmp(d, "true", 4), 0);
    alma_results *back = NULL;
    assert_int_equal(alma_results_from_json(json, &back), ALMA_OK);
    const alma_contention *kb = alma_result_contention(alma_results_get(back, 0));
    assert_non_null(kb);
    assert_true(kb->disturbed);
    assert_string_equal(kb->reason, k->reason);
    assert_true(kb->cpu_s == k->cpu_s && kb->involuntary_switches == k->involuntary_switches);
    /* the summary marks the row */
    char *txt = NULL;
    size_t tn = 0;
    FILE *f = open_memstream(&txt, &tn);
    alma_results_print_summary(r, f);
    fclose(f);
    assert_non_null(strstr(txt, "ok, disturbed"));
    free(txt);
    free(json);
    alma_results_free(back);
    alma_results_free(r);
  }
  assert_int_equal(sched_setaffinity(0, sizeof saved, &saved), 0);
}

/* ---- the clock -------------------------------------------------------------------------------- */
/* A known workload (a 256x1024 MatMul at batch 32, about a millisecond a batch): the batch
 * latencies and the clock reads must account for the timed phase's own wall time within 2%. */
/* 2% in optimized builds. Under the sanitizers the loop's own bookkeeping between the timed calls
 * (the batch cursor, the checks) is several times slower, and 8 batches of 60 ms left 8% outside. */
#if defined(__SANITIZE_ADDRESS__)
#define ALMA_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ALMA_TEST_SANITIZED 1
#endif
#endif
#ifdef ALMA_TEST_SANITIZED
static const double clock_tolerance = 0.15;
#else
static const double clock_tolerance = 0.02;
#endif

/* One run's agreement, 0 when it is outside the tolerance (the message then says by how much). */
static int clock_run(char *msg, size_t n) {
  alma_config c;
  alma_config_init(&c);
  c.threads = 1;
  c.batch_size = 32;
  c.n_samples = 1;
  c.min_time_s = 0.5;
  c.cache = 0;
  const char *conv[] = {"EAGER"};
  alma_results *r = NULL;
  double t0 = alma__bench_now();
  assert_int_equal(alma_benchmark_model(profile, &c, conv, 1, NULL, &r), ALMA_OK);
  double outside = alma__bench_now() - t0;
  const alma_result *x = alma_results_get(r, 0);
  double a = alma_result_clock_agreement(x);
  const alma_contention *k = alma_result_contention(x);
  assert_non_null(k);
  int ok = fabs(a - 1) <= clock_tolerance;
  if (!ok)
    snprintf(msg, n, "batch latencies account for %.2f%% of the timed phase (%.4f s of %.4f s, %lld batches)", 100 * a,
             alma_result_inference_s(x), k->wall_s, (long long)alma_result_latency(x)->n);
  /* and the test's own clock around the whole call holds the phase, which holds the batches */
  assert_true(outside > k->wall_s && k->wall_s >= alma_result_inference_s(x));
  assert_true(k->wall_s >= c.min_time_s);
  alma_results_free(r);
  return ok;
}

/* Up to three runs: another process preempting this one between two timed calls puts time outside
 * the batches (ctest runs tests side by side on two cores), but bookkeeping that is slow on every
 * call fails all three. */
static void test_clock_agreement(void **state) {
  (void)state;
  char msg[256] = "";
  for (int i = 0; i < 3; i++)
    if (clock_run(msg, sizeof msg)) return;
  fail_msg("%s", msg);
}

/* ---- repeats ---------------------------------------------------------------------------------- */
static void test_repeat_interleaved(void **state) {
  (void)state;
  alma_config c;
  alma_config_init(&c);
  c.batch_size = 4;
  c.n_samples = 40;
  c.min_time_s = 0.05;
  c.warmup = 2;
  c.warmup_s = 0;
  c.cache = 0;
  assert_int_equal(alma_config_set(&c, "repeat", "3"), ALMA_OK);
  assert_int_equal(alma_config_set(&c, "repeat", "101"), ALMA_ERR_INVALID_ARG);
  const char *conv[] = {"EAGER", "FOLD+EAGER", "FUSE+EAGER"};
  alma_results *r = NULL;
  assert_int_equal(alma_benchmark_model(linear, &c, conv, 3, NULL, &r), ALMA_OK);
  assert_int_equal(alma_results_count(r), 3);
  char *json = NULL;
  assert_int_equal(alma_results_to_json(r, 1, &json), ALMA_OK);
  alma_results *back = NULL;
  assert_int_equal(alma_results_from_json(json, &back), ALMA_OK);
  for (int i = 0; i < 3; i++) {
    const alma_result *x = alma_results_get(r, i);
    const alma_repeat_stats *s = alma_result_repeats(x);
    assert_non_null(s);
    assert_int_equal(s->k, 3);
    int64_t off = 0;
    double med[3];
    for (int j = 0; j < 3; j++) {
      /* A B C A B C A B C: conversion i's repeat j ran (3j + i)-th */
      assert_int_equal(s->runs[j].run_index, 3 * j + i);
      assert_true(s->runs[j].n >= 10);
      med[j] = np_median(alma_result_raw_ms(x) + off, s->runs[j].n);
      assert_true(med[j] == s->runs[j].median_ms);
      off += s->runs[j].n;
    }
    assert_int_equal(off, alma_result_n_raw(x));
    assert_int_equal(alma_result_latency(x)->n, off);
    qsort(med, 3, sizeof med[0], cmp_d);
    assert_true(s->median_ms == med[1] && s->min_ms == med[0] && s->max_ms == med[2]);
    assert_true(fabs(s->spread - (med[2] - med[0]) / med[1]) < 1e-12);
    assert_true(s->ci95[0] <= s->median_ms && s->median_ms <= s->ci95[1]);
    /* the prediction interval holds the interval of the median of medians' centre, and is what the
     * JSON and text report carry */
    assert_true(s->next95[0] <= s->median_ms && s->median_ms <= s->next95[1]);
    double ci[2];
    assert_true(alma_result_median_ms(x, ci) == s->median_ms && ci[0] == s->ci95[0]);
    const alma_repeat_stats *b = alma_result_repeats(alma_results_get(back, i));
    assert_non_null(b);
    assert_int_equal(b->k, 3);
    /* cJSON keeps 15 significant digits when they read back within DBL_EPSILON: not always exact */
    assert_true(fabs(b->median_ms - s->median_ms) <= 1e-14 * s->median_ms &&
                fabs(b->ci95[0] - s->ci95[0]) <= 1e-14 * s->ci95[0] && fabs(b->ci95[1] - s->ci95[1]) <= 1e-14 * s->ci95[1]);
    for (int j = 0; j < 3; j++) assert_int_equal(b->runs[j].run_index, s->runs[j].run_index);
  }
  free(json);
  alma_results_free(back);
  alma_results_free(r);
  /* the default runs once: no repeat figures */
  alma_config_init(&c);
  c.n_samples = 4;
  c.min_time_s = 0.01;
  c.cache = 0;
  assert_int_equal(alma_benchmark_model(linear, &c, conv, 1, NULL, &r), ALMA_OK);
  assert_null(alma_result_repeats(alma_results_get(r, 0)));
  alma_results_free(r);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR (holding the models of make_model.py)\n", argv[0]);
    return 2;
  }
  dir = argv[1];
  snprintf(linear, sizeof linear, "%s/linear.onnx", dir);
  snprintf(profile, sizeof profile, "%s/profile.onnx", dir);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_resampled_median_exact), cmocka_unit_test(test_hier_bootstrap_brute_force),
      cmocka_unit_test(test_judge),                  cmocka_unit_test(test_competitor_flagged),
      cmocka_unit_test(test_public_pair),            cmocka_unit_test(test_next95),
      cmocka_unit_test(test_clock_agreement),        cmocka_unit_test(test_repeat_interleaved),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
