/* Latency statistics: percentiles, Student-t interval of the mean, distribution-free interval of
 * the median, and the diagnostics that say when numbers should not be trusted. */
#include <float.h>
#include <math.h>

#include "bench/bench.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double alma__percentile_sorted(const double *x, int64_t n, double p) {
  if (n <= 0) return NAN;
  if (p <= 0) return x[0];
  if (p >= 1) return x[n - 1];
  double h = (double)(n - 1) * p;
  int64_t lo = (int64_t)floor(h);
  if (lo >= n - 1) return x[n - 1];
  double frac = h - (double)lo;
  return x[lo] + frac * (x[lo + 1] - x[lo]);
}

/* Continued fraction of the incomplete beta (modified Lentz), converges for x < (a+1)/(a+b+2). */
static double betacf(double a, double b, double x) {
  const double tiny = 1e-300, eps = 1e-15;
  double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (fabs(d) < tiny) d = tiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 1000; m++) {
    int m2 = 2 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (fabs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (fabs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (fabs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (fabs(c) < tiny) c = tiny;
    d = 1 / d;
    double del = d * c;
    h *= del;
    if (fabs(del - 1) < eps) break;
  }
  return h;
}

double alma__betainc(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
  if (x < (a + 1) / (a + b + 2)) return exp(lbt) * betacf(a, b, x) / a;
  return 1 - exp(lbt) * betacf(b, a, 1 - x) / b;
}

/* P(T <= t) for Student's t with df degrees of freedom. */
static double t_cdf(double t, double df) {
  double x = df / (df + t * t);
  double tail = 0.5 * alma__betainc(df / 2, 0.5, x);
  return t >= 0 ? 1 - tail : tail;
}

double alma__t_quantile(double p, double df) {
  if (!(p > 0 && p < 1) || !(df > 0)) return NAN;
  if (p == 0.5) return 0;
  if (p < 0.5) return -alma__t_quantile(1 - p, df);
  /* Bracket then bisect: t_cdf is monotone; 200 halvings reach double precision. */
  double lo = 0, hi = 1;
  while (t_cdf(hi, df) < p && hi < 1e300) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-15 * hi; i++) {
    double mid = 0.5 * (lo + hi);
    if (t_cdf(mid, df) < p) lo = mid;
    else hi = mid;
  }
  return 0.5 * (lo + hi);
}

int alma__median_ci_ranks(int64_t n, double conf, int64_t *lo, int64_t *hi) {
  *lo = *hi = 0;
  if (n < 1) return 0;
  double alpha = 1 - conf;
  /* pmf of Binomial(n, 1/2) by the ratio recurrence in log space (no overflow for any n). */
  double logp = -(double)n * log(2.0), cdf = 0;
  int64_t j = 0;
  for (int64_t k = 0; k <= n / 2; k++) {
    cdf += exp(logp);
    if (2 * cdf > alpha) {
      j = k;
      break;
    }
    logp += log((double)(n - k)) - log((double)(k + 1));
  }
  if (j < 1 || j > n + 1 - j) return 0;
  *lo = j;
  *hi = n + 1 - j;
  return 1;
}

alma_status alma__latency_stats(const double *ms, int64_t n, alma_latency_stats *s) {
  s->n = n < 0 ? 0 : n;
  s->mean = s->stdev = s->cv = s->min = s->p50 = s->p90 = s->p95 = s->p99 = s->max = NAN;
  s->mean_ci95[0] = s->mean_ci95[1] = s->median_ci95[0] = s->median_ci95[1] = NAN;
  if (n <= 0) return ALMA_OK;
  double *x = malloc((size_t)n * sizeof *x);
  if (!x) return alma__errorf(ALMA_ERR_NOMEM, "out of memory computing statistics of %lld samples", (long long)n);
  memcpy(x, ms, (size_t)n * sizeof *x);
  qsort(x, (size_t)n, sizeof *x, cmp_double);
  long double sum = 0;
  for (int64_t i = 0; i < n; i++) sum += x[i];
  double mean = (double)(sum / n);
  s->mean = mean;
  s->min = x[0];
  s->max = x[n - 1];
  s->p50 = alma__percentile_sorted(x, n, 0.50);
  s->p90 = alma__percentile_sorted(x, n, 0.90);
  s->p95 = alma__percentile_sorted(x, n, 0.95);
  s->p99 = alma__percentile_sorted(x, n, 0.99);
  if (n >= 2) {
    long double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += ((long double)x[i] - mean) * ((long double)x[i] - mean);
    s->stdev = sqrt((double)(ss / (n - 1)));
    s->cv = mean != 0 ? s->stdev / mean : NAN;
    double half = alma__t_quantile(0.975, (double)(n - 1)) * s->stdev / sqrt((double)n);
    s->mean_ci95[0] = mean - half;
    s->mean_ci95[1] = mean + half;
  }
  int64_t lo, hi;
  if (alma__median_ci_ranks(n, 0.95, &lo, &hi)) {
    s->median_ci95[0] = x[lo - 1];
    s->median_ci95[1] = x[hi - 1];
  }
  free(x);
  return ALMA_OK;
}

/* Median and its 95% interval of x[0..n) (unsorted). Returns 0 if the interval is undefined. */
static int median_with_ci(const double *ms, int64_t n, double *med, double ci[2]) {
  alma_latency_stats s;
  if (alma__latency_stats(ms, n, &s) != ALMA_OK) return 0;
  *med = s.p50;
  ci[0] = s.median_ci95[0];
  ci[1] = s.median_ci95[1];
  return !isnan(ci[0]);
}

void alma__latency_warnings(const double *ms, int64_t n, const alma_latency_stats *s,
                            alma__warn_fn warn, void *user) {
  char msg[384];
  if (n <= 0) return;
  if (!isnan(s->cv) && s->cv > ALMA__CV_WARN) {
    snprintf(msg, sizeof msg,
             "high variability: CV %.1f%% > %.0f%% (background load, frequency scaling or "
             "preemption; compare max and p99 with the median)",
             100 * s->cv, 100 * ALMA__CV_WARN);
    warn(user, msg);
  }
  /* Drift: the two halves of the run, in run order, each with the order-statistic 95% interval of
   * its median. Flagged when the medians differ by more than 5% of the overall median AND the
   * intervals do not overlap: a shift that noise alone is unlikely to produce. */
  if (n >= 20) {
    int64_t h = n / 2;
    double m1, m2, c1[2], c2[2];
    if (median_with_ci(ms, h, &m1, c1) && median_with_ci(ms + h, n - h, &m2, c2)) {
      double rel = s->p50 != 0 ? fabs(m2 - m1) / s->p50 : 0;
      int disjoint = c1[1] < c2[0] || c2[1] < c1[0];
      if (rel > ALMA__DRIFT_WARN && disjoint) {
        snprintf(msg, sizeof msg,
                 "drift: median of the second half %.4g ms vs first half %.4g ms (%+.1f%%, 95%% "
                 "CIs do not overlap): throttling, background load or caching changed the run",
                 m2, m1, 100 * (m2 - m1) / m1);
        warn(user, msg);
      }
    }
  }
  if (n < ALMA__P99_MIN_SAMPLES) {
    snprintf(msg, sizeof msg, "p99 rests on %lld batches (< %d): tail percentiles are unreliable",
             (long long)n, ALMA__P99_MIN_SAMPLES);
    warn(user, msg);
  }
}

alma_status alma_latency_stats_of(const double *ms, int64_t n, alma_latency_stats *out) {
  if (!out || n < 0 || (n > 0 && !ms))
    return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_latency_stats_of: %s", !out ? "out is NULL" : n < 0 ? "n < 0" : "ms is NULL");
  return alma__latency_stats(ms, n, out);
}

typedef struct {
  char *buf;
  size_t size, len;
} warn_text;

static void append_warning(void *user, const char *msg) {
  warn_text *w = user;
  size_t m = strlen(msg);
  if (w->buf && w->len + m + 1 < w->size) {
    memcpy(w->buf + w->len, msg, m);
    w->buf[w->len + m] = '\n';
    w->buf[w->len + m + 1] = '\0';
  }
  w->len += m + 1;
}

size_t alma_latency_warnings_of(const double *ms, int64_t n, const alma_latency_stats *s, char *buf, size_t size) {
  warn_text w = {buf, size, 0};
  if (buf && size) buf[0] = '\0';
  if (!s || n < 0 || (n > 0 && !ms)) return 0;
  alma__latency_warnings(ms, n, s, append_warning, &w);
  return w.len;
}
