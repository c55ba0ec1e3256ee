/* Statistics of the harness against hand-computed values (NumPy/SciPy for the checks). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "bench/bench.h"

#define NEAR(a, b, tol) assert_true(fabs((a) - (b)) <= (tol))

static void test_percentiles_linear(void **state) {
  (void)state;
  /* numpy.percentile([1,1,2,3,4,5,6,9], [0,25,50,90,99,100]) = 1, 1.75, 3.5, 6.9, 8.79, 9 */
  double x[] = {1, 1, 2, 3, 4, 5, 6, 9};
  NEAR(alma__percentile_sorted(x, 8, 0.0), 1.0, 1e-12);
  NEAR(alma__percentile_sorted(x, 8, 0.25), 1.75, 1e-12);
  NEAR(alma__percentile_sorted(x, 8, 0.50), 3.5, 1e-12);
  NEAR(alma__percentile_sorted(x, 8, 0.90), 6.9, 1e-12);
  NEAR(alma__percentile_sorted(x, 8, 0.99), 8.79, 1e-12);
  NEAR(alma__percentile_sorted(x, 8, 1.0), 9.0, 1e-12);
  double one = 4.2;
  NEAR(alma__percentile_sorted(&one, 1, 0.99), 4.2, 0);
  assert_true(isnan(alma__percentile_sorted(x, 0, 0.5)));
}

static void test_t_quantile(void **state) {
  (void)state;
  /* scipy.stats.t.ppf(0.975, df) */
  NEAR(alma__t_quantile(0.975, 1), 12.706204736432095, 1e-9);
  NEAR(alma__t_quantile(0.975, 9), 2.2621571627409915, 1e-10);
  NEAR(alma__t_quantile(0.975, 30), 2.0422724563012373, 1e-10);
  NEAR(alma__t_quantile(0.975, 1000), 1.9623390808264074, 1e-10);
  NEAR(alma__t_quantile(0.025, 9), -2.2621571627409915, 1e-10);
  NEAR(alma__t_quantile(0.5, 7), 0, 0);
  assert_true(isnan(alma__t_quantile(1.5, 3)));
  assert_true(isnan(alma__t_quantile(0.9, 0)));
  /* scipy.stats.beta.cdf(0.3, 2, 5) */
  NEAR(alma__betainc(2, 5, 0.3), 0.579825, 1e-12);
}

static void test_median_ci_ranks(void **state) {
  (void)state;
  int64_t lo, hi;
  /* n < 6: even [min, max] covers less than 95% (1 - 2/32 for n = 5) */
  assert_int_equal(alma__median_ci_ranks(5, 0.95, &lo, &hi), 0);
  assert_int_equal(alma__median_ci_ranks(6, 0.95, &lo, &hi), 1);
  assert_int_equal(lo, 1);
  assert_int_equal(hi, 6);
  /* n = 10: P(B<=1) = 11/1024 -> 2x = 0.021 <= 0.05; P(B<=2) = 56/1024 -> 0.109 > 0.05: j = 2 */
  alma__median_ci_ranks(10, 0.95, &lo, &hi);
  assert_int_equal(lo, 2);
  assert_int_equal(hi, 9);
  /* n = 100: binom.cdf(39) = 0.0176, binom.cdf(40) = 0.0284: ranks 40 and 61 (the textbook pair) */
  alma__median_ci_ranks(100, 0.95, &lo, &hi);
  assert_int_equal(lo, 40);
  assert_int_equal(hi, 61);
  /* huge n: no overflow, interval around the middle */
  alma__median_ci_ranks(10000000, 0.95, &lo, &hi);
  assert_true(lo > 4990000 && lo < 5000000 && hi == 10000001 - lo);
}

static void test_latency_stats(void **state) {
  (void)state;
  double x[] = {7, 1, 10, 3, 5, 2, 8, 4, 9, 6};  /* 1..10, shuffled */
  alma_latency_stats s;
  assert_int_equal(alma__latency_stats(x, 10, &s), ALMA_OK);
  assert_int_equal(s.n, 10);
  NEAR(s.mean, 5.5, 1e-12);
  NEAR(s.stdev, 3.0276503540974917, 1e-12);
  NEAR(s.cv, 3.0276503540974917 / 5.5, 1e-12);
  NEAR(s.min, 1, 0);
  NEAR(s.max, 10, 0);
  NEAR(s.p50, 5.5, 1e-12);
  NEAR(s.p90, 9.1, 1e-12);
  NEAR(s.p95, 9.55, 1e-12);
  NEAR(s.p99, 9.91, 1e-12);
  double half = 2.2621571627409915 * 3.0276503540974917 / sqrt(10.0);
  NEAR(s.mean_ci95[0], 5.5 - half, 1e-9);
  NEAR(s.mean_ci95[1], 5.5 + half, 1e-9);
  NEAR(s.median_ci95[0], 2, 0);
  NEAR(s.median_ci95[1], 9, 0);
  assert_true(x[0] == 7);  /* the input is not reordered */

  assert_int_equal(alma__latency_stats(x, 1, &s), ALMA_OK);
  NEAR(s.mean, 7, 0);
  assert_true(isnan(s.stdev) && isnan(s.mean_ci95[0]) && isnan(s.median_ci95[0]));
  assert_int_equal(alma__latency_stats(NULL, 0, &s), ALMA_OK);
  assert_int_equal(s.n, 0);
  assert_true(isnan(s.mean) && isnan(s.p99));
}

typedef struct {
  int n;
  char msgs[8][400];
} warns;

static void collect(void *user, const char *msg) {
  warns *w = user;
  if (w->n < 8) snprintf(w->msgs[w->n++], sizeof w->msgs[0], "%s", msg);
}

static int has(const warns *w, const char *needle) {
  for (int i = 0; i < w->n; i++)
    if (strstr(w->msgs[i], needle)) return 1;
  return 0;
}

static void test_warnings(void **state) {
  (void)state;
  enum { N = 200 };
  double x[N];
  alma_latency_stats s;
  warns w = {0};
  /* steady: 1.00 .. 1.02, no warning */
  for (int i = 0; i < N; i++) x[i] = 1.0 + 0.0001 * ((i * 37) % 200);
  alma__latency_stats(x, N, &s);
  alma__latency_warnings(x, N, &s, collect, &w);
  assert_int_equal(w.n, 0);
  /* a step half way through: the halves' medians differ by ~20% with disjoint CIs */
  for (int i = N / 2; i < N; i++) x[i] += 0.2;
  memset(&w, 0, sizeof w);
  alma__latency_stats(x, N, &s);
  alma__latency_warnings(x, N, &s, collect, &w);
  assert_true(has(&w, "drift"));
  assert_false(has(&w, "p99"));
  /* noisy: CV well above 10% */
  for (int i = 0; i < N; i++) x[i] = (i % 2) ? 1.0 : 2.0;
  memset(&w, 0, sizeof w);
  alma__latency_stats(x, N, &s);
  alma__latency_warnings(x, N, &s, collect, &w);
  assert_true(has(&w, "CV"));
  assert_false(has(&w, "drift"));
  /* few samples: p99 flagged */
  memset(&w, 0, sizeof w);
  alma__latency_stats(x, 50, &s);
  alma__latency_warnings(x, 50, &s, collect, &w);
  assert_true(has(&w, "p99 rests on 50"));
}

/* The public pair the Python package calls: the same figures, and the warnings as lines. */
static void test_public(void **state) {
  (void)state;
  double x[50];
  for (int i = 0; i < 50; i++) x[i] = (i % 2) ? 1.0 : 2.0;
  alma_latency_stats a, b;
  assert_int_equal(alma_latency_stats_of(x, 50, &a), ALMA_OK);
  alma__latency_stats(x, 50, &b);
  assert_memory_equal(&a, &b, sizeof a);
  assert_int_not_equal(alma_latency_stats_of(NULL, 3, &a), ALMA_OK);
  assert_int_not_equal(alma_latency_stats_of(x, -1, &a), ALMA_OK);
  char buf[1024], tiny[8] = "xxxxxxx";
  size_t need = alma_latency_warnings_of(x, 50, &a, NULL, 0);
  assert_int_equal(alma_latency_warnings_of(x, 50, &a, buf, sizeof buf), need);
  assert_int_equal(strlen(buf), need);
  /* two lines: CV, then p99 */
  assert_non_null(strstr(buf, "high variability: CV"));
  char *nl = strchr(buf, '\n');
  assert_non_null(nl);
  assert_non_null(strstr(nl + 1, "p99 rests on 50 batches"));
  assert_int_equal(buf[need - 1], '\n');
  /* too small: no partial line, still NUL-terminated, the full length returned */
  assert_int_equal(alma_latency_warnings_of(x, 50, &a, tiny, sizeof tiny), need);
  assert_string_equal(tiny, "");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_percentiles_linear), cmocka_unit_test(test_t_quantile),
      cmocka_unit_test(test_median_ci_ranks),    cmocka_unit_test(test_latency_stats),
      cmocka_unit_test(test_warnings),           cmocka_unit_test(test_public),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
