/* Repeats across processes: one row per conversion gathers its K processes (interleaved with the
 * other conversions by the sweep), and its between-process figures come from a hierarchical
 * bootstrap over processes, then batches (docs/methodology.md, Repeats). */
#include <math.h>

#include "bench/bench.h"

/* splitmix64: small, fast, and the same stream for the same seed everywhere */
static uint64_t next_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static double uniform01(uint64_t *s) { return ((double)(next_u64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
double alma__uniform01(uint64_t *s) { return uniform01(s); }

static double normal01(uint64_t *s) {
  double u = uniform01(s), v = uniform01(s);
  return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* Gamma(a, 1) for a >= 1 (Marsaglia & Tsang 2000). */
static double gamma_ge1(double a, uint64_t *s) {
  double d = a - 1.0 / 3, c = 1 / sqrt(9 * d);
  for (;;) {
    double x = normal01(s), v = 1 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double u = uniform01(s);
    if (u < 1 - 0.0331 * x * x * x * x || log(u) < 0.5 * x * x + d * (1 - v + log(v))) return d * v;
  }
}

static double beta_draw(double a, double b, uint64_t *s) {
  double x = gamma_ge1(a, s), y = gamma_ge1(b, s);
  return x / (x + y);
}

/* Index (0-based) of the value a uniform u in (0, 1) picks when drawing one of n sorted values. */
static int64_t pick(double u, int64_t n) {
  int64_t i = (int64_t)ceil(u * (double)n) - 1;
  return i < 0 ? 0 : i >= n ? n - 1 : i;
}

/* The median of n draws with replacement from sorted x, without drawing them: the draws are
 * x[ceil(n U_i) - 1] for iid uniforms U_i, so their j-th smallest is x[ceil(n U_(j)) - 1] with
 * U_(j) ~ Beta(j, n - j + 1); and given U_(j), U_(j+1) = U_(j) + (1 - U_(j))(1 - V^(1/(n-j))). */
static double resampled_median(const double *x, int64_t n, uint64_t *s) {
  if (n == 1) return x[0];
  int64_t j = n % 2 ? (n + 1) / 2 : n / 2;
  double uj = beta_draw((double)j, (double)(n - j + 1), s);
  if (n % 2) return x[pick(uj, n)];
  double uj1 = uj + (1 - uj) * (1 - pow(uniform01(s), 1.0 / (double)(n - j)));
  return 0.5 * (x[pick(uj, n)] + x[pick(uj1, n)]);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median_of(double *v, int k) {
  qsort(v, (size_t)k, sizeof *v, cmp_d);
  return alma__percentile_sorted(v, k, 0.5);
}

int alma__hier_bootstrap(const double *const *sorted, const int64_t *n, int k, int resamples, uint64_t seed,
                         double conf, double ci[2], double *reps) {
  ci[0] = ci[1] = NAN;
  if (k < 1 || resamples < 2) return -1;
  for (int i = 0; i < k; i++)
    if (n[i] < 1) return -1;
  double *r = malloc((size_t)resamples * sizeof *r), *m = malloc((size_t)k * sizeof *m);
  if (!r || !m) {
    free(r);
    free(m);
    return -1;
  }
  uint64_t s = seed ^ 0x5bd1e9955bd1e995ULL;
  for (int b = 0; b < resamples; b++) {
    for (int i = 0; i < k; i++) {
      int p = (int)(next_u64(&s) % (uint64_t)k);
      m[i] = resampled_median(sorted[p], n[p], &s);
    }
    r[b] = median_of(m, k);
  }
  if (reps) memcpy(reps, r, (size_t)resamples * sizeof *r);
  qsort(r, (size_t)resamples, sizeof *r, cmp_d);
  ci[0] = alma__percentile_sorted(r, resamples, (1 - conf) / 2);
  ci[1] = alma__percentile_sorted(r, resamples, (1 + conf) / 2);
  free(r);
  free(m);
  return 0;
}

void alma__repeat_clear(alma_repeat_stats *s) {
  for (int i = 0; i < s->k; i++) free((char *)s->runs[i].reason);
  free((alma_repeat_run *)s->runs);
  memset(s, 0, sizeof *s);
  s->median_ms = s->ci95[0] = s->ci95[1] = s->min_ms = s->max_ms = s->spread = s->cv = NAN;
}

alma_status alma__repeat_push(alma_repeat_stats *s, const alma_repeat_run *run) {
  alma_repeat_run *nr = realloc((alma_repeat_run *)s->runs, (size_t)(s->k + 1) * sizeof *nr);
  if (!nr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  nr[s->k] = *run;
  nr[s->k].reason = run->reason ? alma__strdup(run->reason) : NULL;
  s->runs = nr;
  s->k++;
  return ALMA_OK;
}

static alma_status push_run(alma_result *row, const alma_result *run, int run_index) {
  alma_repeat_run e = {.run_index = run_index, .n = run->n_raw, .median_ms = run->latency.p50,
                       .cpu_share = run->cont.measured ? run->cont.cpu_share : NAN,
                       .disturbed = run->cont.disturbed, .reason = run->cont.reason};
  return alma__repeat_push(&row->rep, &e);
}

alma_status alma__repeat_start(alma_result *row, int run_index) {
  alma__repeat_clear(&row->rep);
  return push_run(row, row, run_index);
}

static void copy_contention(alma_contention *dst, const alma_contention *src) {
  alma__contention_clear(dst);
  *dst = *src;
  dst->reason = src->reason ? alma__strdup(src->reason) : NULL;
  dst->advice = src->advice ? alma__strdup(src->advice) : NULL;
  dst->notes = src->notes ? alma__strdup(src->notes) : NULL;
}

alma_status alma__repeat_add(alma_result *row, const alma_result *run, int run_index) {
  if (run->n_raw > 0) {
    double *nr = realloc(row->raw_ms, (size_t)(row->n_raw + run->n_raw) * sizeof *nr);
    if (!nr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory keeping %lld latencies", (long long)(row->n_raw + run->n_raw));
    memcpy(nr + row->n_raw, run->raw_ms, (size_t)run->n_raw * sizeof *nr);
    row->raw_ms = nr;
    row->n_raw += run->n_raw;
  }
  row->samples += run->samples;
  row->inference_s += run->inference_s;
  if (run->peak_rss_bytes > row->peak_rss_bytes) row->peak_rss_bytes = run->peak_rss_bytes;
  /* a later repeat's own warnings say which repeat; ones every repeat gives (the model's, the
   * cache's) once */
  for (int i = 0; i < run->n_warnings; i++) {
    int seen = 0;
    for (int j = 0; j < row->n_warnings && !seen; j++) seen = !strcmp(row->warnings[j], run->warnings[i]);
    if (!seen) alma__result_warn(row, "repeat %d: %s", row->rep.k + 1, run->warnings[i]);
  }
  if (run->cont.measured && (!row->cont.measured || (run->cont.disturbed && !row->cont.disturbed)))
    copy_contention(&row->cont, &run->cont);
  if (isfinite(run->clock_agreement) &&
      (!isfinite(row->clock_agreement) || fabs(run->clock_agreement - 1) > fabs(row->clock_agreement - 1)))
    row->clock_agreement = run->clock_agreement;
  return push_run(row, run, run_index);
}

/* The interval of the median of the medians says where the typical process lands; the user who
 * runs again gets one more process, which the between-process spread moves far more: a normal
 * prediction interval on log medians (latencies are positive and spread multiplicatively),
 * exp(m +- t(0.975, k-1) * sd * sqrt(1 + 1/k)). */
void alma__repeat_next95(const double *med, int k, double out[2]) {
  out[0] = out[1] = NAN;
  if (k < 3) return;
  double m = 0, v = 0;
  for (int i = 0; i < k; i++) {
    if (!(med[i] > 0) || !isfinite(med[i])) return;
    m += log(med[i]) / k;
  }
  for (int i = 0; i < k; i++) v += (log(med[i]) - m) * (log(med[i]) - m);
  double half = alma__t_quantile(0.975, k - 1) * sqrt(v / (k - 1)) * sqrt(1 + 1.0 / k);
  out[0] = exp(m - half);
  out[1] = exp(m + half);
}

alma_status alma__repeat_finish(alma_result *row, uint64_t seed) {
  alma_repeat_stats *s = &row->rep;
  int k = s->k;
  if (k < 1) return ALMA_OK;
  double *med = malloc((size_t)k * sizeof *med);
  const double **sorted = calloc((size_t)k, sizeof *sorted);
  int64_t *n = malloc((size_t)k * sizeof *n);
  alma_status st = med && sorted && n ? ALMA_OK : alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  int64_t off = 0, total = 0;
  for (int i = 0; i < k; i++) total += s->runs[i].n;
  if (st == ALMA_OK && total != row->n_raw)
    st = alma__errorf(ALMA_ERR_INTERNAL, "repeats: %lld batches in the runs, %lld kept", (long long)total,
                      (long long)row->n_raw);
  for (int i = 0; st == ALMA_OK && i < k; i++) {
    double *c = malloc((size_t)(s->runs[i].n > 0 ? s->runs[i].n : 1) * sizeof *c);
    if (!c) {
      st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      break;
    }
    memcpy(c, row->raw_ms + off, (size_t)s->runs[i].n * sizeof *c);
    qsort(c, (size_t)s->runs[i].n, sizeof *c, cmp_d);
    sorted[i] = c;
    n[i] = s->runs[i].n;
    off += s->runs[i].n;
    med[i] = ((alma_repeat_run *)s->runs)[i].median_ms = alma__percentile_sorted(c, n[i], 0.5);
  }
  if (st == ALMA_OK) {
    double mean = 0, var = 0;
    s->n_disturbed = 0;
    for (int i = 0; i < k; i++) {
      mean += med[i] / k;
      s->n_disturbed += s->runs[i].disturbed;
    }
    for (int i = 0; i < k; i++) var += (med[i] - mean) * (med[i] - mean);
    s->cv = k > 1 && mean > 0 ? sqrt(var / (k - 1)) / mean : NAN;
    s->median_ms = median_of(med, k);
    s->min_ms = med[0];
    s->max_ms = med[k - 1];
    s->spread = s->median_ms > 0 ? (s->max_ms - s->min_ms) / s->median_ms : NAN;
    if (alma__hier_bootstrap(sorted, n, k, ALMA__REPEAT_RESAMPLES, seed, 0.95, s->ci95, NULL) != 0)
      s->ci95[0] = s->ci95[1] = NAN;
    alma__repeat_next95(med, k, s->next95);
    alma__latency_stats(row->raw_ms, row->n_raw, &row->latency);
    row->throughput = row->inference_s > 0 ? (double)row->samples / row->inference_s : NAN;
    if (s->n_disturbed && row->cont.reason) {
      char list[128] = "";
      for (int i = 0, w = 0; i < k; i++)
        if (s->runs[i].disturbed && w >= 0 && (size_t)w < sizeof list)
          w += snprintf(list + w, sizeof list - (size_t)w, "%s%d", w ? ", " : "", i + 1);
      char buf[1024];
      snprintf(buf, sizeof buf, "repeat%s %s of %d: %s", s->n_disturbed == 1 ? "" : "s", list, k, row->cont.reason);
      free((char *)row->cont.reason);
      row->cont.reason = alma__strdup(buf);
      row->cont.disturbed = 1;
    }
  }
  for (int i = 0; i < k && sorted; i++) free((double *)sorted[i]);
  free(sorted);
  free(med);
  free(n);
  return st;
}
