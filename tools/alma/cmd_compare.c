/* `alma compare BASE.json NEW.json...`: the regression gate. Each result row of NEW is matched with
 * BASE's row of the same conversion, batch size (and instances x workers for throughput rows); the
 * ratio of median batch latencies NEW/BASE gets a 95% interval: a percentile bootstrap over the raw
 * samples (`raw_ms`, written by `alma bench --raw`), or, without them, bounds from the two stored
 * median intervals. The method is in docs/methodology.md, the exit codes in docs/cli.md. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "bench/bench.h"
#include "cli.h"
#include "report/report.h"

#define CMP_DEFAULT_RESAMPLES 4000
#define CMP_MIN_RESAMPLES 1000

typedef struct {
  const char *conversion;
  int batch;
  int instances, workers;  /* 0 for a latency-mode row */
  const char *status;      /* "ok", "error", "unavailable", or "not timed" */
  double median, ci_lo, ci_hi;  /* ms; NaN when unknown */
  int64_t n;
  double *raw;  /* sorted raw_ms, or NULL */
  int64_t n_raw;
  int threads;
  int used;
  /* a row of repeats (alma bench --repeat): k processes, their batch counts in raw_ms order, and
   * raw_ms with each process's slice sorted (NULL without raw_ms) */
  int k;
  int64_t *run_n;
  double *slices;
} cmp_row;

typedef struct {
  const char *path;
  cJSON *doc;
  cmp_row *rows;
  int n_rows;
} cmp_file;

typedef struct {
  int resamples;
  uint64_t seed;
  double noise;  /* a change whose interval reaches within this fraction of 1 is no change */
} cmp_opts;

static double num_or_nan(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *str_or(const cJSON *o, const char *key, const char *dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) && v->valuestring ? v->valuestring : dflt;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Fills r from a latency_ms object (and a raw_ms array when given). Returns 0, or -1 with why. */
static int read_latency(const cJSON *lat, const cJSON *raw, cmp_row *r, char *why, size_t why_n) {
  r->median = r->ci_lo = r->ci_hi = NAN;
  r->n = 0;
  if (cJSON_IsObject(lat)) {
    r->median = num_or_nan(lat, "p50");
    double n = num_or_nan(lat, "n");
    r->n = isfinite(n) ? (int64_t)n : 0;
    const cJSON *ci = cJSON_GetObjectItemCaseSensitive(lat, "median_ci95");
    if (cJSON_IsArray(ci) && cJSON_GetArraySize(ci) == 2 && cJSON_IsNumber(cJSON_GetArrayItem(ci, 0)) &&
        cJSON_IsNumber(cJSON_GetArrayItem(ci, 1))) {
      r->ci_lo = cJSON_GetArrayItem(ci, 0)->valuedouble;
      r->ci_hi = cJSON_GetArrayItem(ci, 1)->valuedouble;
    }
  }
  if (raw && !cJSON_IsNull(raw)) {
    if (!cJSON_IsArray(raw)) {
      snprintf(why, why_n, "raw_ms is not an array");
      return -1;
    }
    int n = cJSON_GetArraySize(raw);
    if (n > 0) {
      r->raw = malloc(sizeof(double) * (size_t)n);
      if (!r->raw) {
        snprintf(why, why_n, "out of memory");
        return -1;
      }
      int i = 0;
      const cJSON *v;
      cJSON_ArrayForEach(v, raw) {
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0) {
          snprintf(why, why_n, "raw_ms[%d] is not a non-negative number", i);
          return -1;
        }
        r->raw[i++] = v->valuedouble;
      }
      r->n_raw = n;
      int64_t total = 0;
      for (int j = 0; j < r->k; j++) total += r->run_n[j];
      if (r->k >= 2 && total == n && (r->slices = malloc(sizeof(double) * (size_t)n))) {
        memcpy(r->slices, r->raw, sizeof(double) * (size_t)n);
        for (int j = 0, off = 0; j < r->k; off += (int)r->run_n[j], j++)
          qsort(r->slices + off, (size_t)r->run_n[j], sizeof(double), cmp_double);
      }
      qsort(r->raw, (size_t)n, sizeof(double), cmp_double);
      /* the raw samples decide: the same definition of the median as latency_ms.p50 */
      r->median = alma__percentile_sorted(r->raw, n, 0.5);
      r->n = n;
    }
  }
  return 0;
}

static int load_file(const char *path, cmp_file *f) {
  memset(f, 0, sizeof *f);
  f->path = path;
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    fprintf(stderr, "alma compare: error: %s: cannot open: %s\n", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
    fprintf(stderr, "alma compare: error: %s: not a regular file\n", path);
    fclose(fp);
    return -1;
  }
  char *buf = malloc((size_t)st.st_size + 1);
  size_t got = buf ? fread(buf, 1, (size_t)st.st_size, fp) : 0;
  fclose(fp);
  if (!buf || got != (size_t)st.st_size) {
    fprintf(stderr, "alma compare: error: %s: cannot read\n", path);
    free(buf);
    return -1;
  }
  buf[got] = 0;
  f->doc = cJSON_ParseWithLength(buf, got);
  free(buf);
  if (!f->doc) {
    fprintf(stderr, "alma compare: error: %s: not valid JSON\n", path);
    return -1;
  }
  const cJSON *results = cJSON_GetObjectItemCaseSensitive(f->doc, "results");
  const cJSON *schema = cJSON_GetObjectItemCaseSensitive(f->doc, "schema_version");
  if (!cJSON_IsObject(f->doc) || !cJSON_IsNumber(schema) || !cJSON_IsArray(results)) {
    fprintf(stderr, "alma compare: error: %s: not an alma results file (no schema_version and results array;"
                    " write one with alma bench --json)\n", path);
    return -1;
  }
  if (schema->valueint < 1 || schema->valueint > 2) {
    fprintf(stderr, "alma compare: error: %s: schema_version %d is not one this alma reads (1, 2)\n", path,
            schema->valueint);
    return -1;
  }
  int cap = 0;
  const cJSON *res;
  int idx = 0;
  cJSON_ArrayForEach(res, results) {
    char why[160] = "";
    const char *conv = str_or(res, "conversion", NULL);
    double batch = num_or_nan(res, "batch_size");
    if (!cJSON_IsObject(res) || !conv) {
      fprintf(stderr, "alma compare: error: %s: results[%d] has no conversion name\n", path, idx);
      return -1;
    }
    const cJSON *scaling = cJSON_GetObjectItemCaseSensitive(res, "scaling");
    int n_scaling = cJSON_IsArray(scaling) ? cJSON_GetArraySize(scaling) : 0;
    if (f->n_rows + 1 + n_scaling > cap) {
      cap = (f->n_rows + 1 + n_scaling) * 2;
      cmp_row *nr = realloc(f->rows, sizeof(cmp_row) * (size_t)cap);
      if (!nr) return -1;
      f->rows = nr;
    }
    cmp_row *r = &f->rows[f->n_rows++];
    memset(r, 0, sizeof *r);
    r->conversion = conv;
    r->batch = isfinite(batch) ? (int)batch : 0;
    r->status = str_or(res, "status", "unknown");
    double th = num_or_nan(res, "threads");
    r->threads = isfinite(th) ? (int)th : 0;
    if (!strcmp(str_or(res, "mode", "latency"), "build")) r->status = "not timed";
    const cJSON *reps = cJSON_GetObjectItemCaseSensitive(res, "repeats");
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(reps, "runs");
    if (cJSON_IsArray(runs) && cJSON_GetArraySize(runs) >= 2 && (r->run_n = calloc((size_t)cJSON_GetArraySize(runs), sizeof *r->run_n))) {
      const cJSON *run;
      cJSON_ArrayForEach(run, runs) {
        double rn = num_or_nan(run, "n");
        r->run_n[r->k++] = isfinite(rn) && rn > 0 ? (int64_t)rn : 0;
      }
    }
    if (read_latency(cJSON_GetObjectItemCaseSensitive(res, "latency_ms"),
                     cJSON_GetObjectItemCaseSensitive(res, "raw_ms"), r, why, sizeof why) != 0) {
      fprintf(stderr, "alma compare: error: %s: results[%d] (%s): %s\n", path, idx, conv, why);
      return -1;
    }
    if (r->k >= 2 && cJSON_IsObject(reps)) {
      /* the figures with the between-process variance decide */
      const cJSON *ci = cJSON_GetObjectItemCaseSensitive(reps, "ci95");
      r->median = num_or_nan(reps, "median_ms");
      r->ci_lo = r->ci_hi = NAN;
      if (cJSON_IsArray(ci) && cJSON_GetArraySize(ci) == 2 && cJSON_IsNumber(cJSON_GetArrayItem(ci, 0)) &&
          cJSON_IsNumber(cJSON_GetArrayItem(ci, 1))) {
        r->ci_lo = cJSON_GetArrayItem(ci, 0)->valuedouble;
        r->ci_hi = cJSON_GetArrayItem(ci, 1)->valuedouble;
      }
    }
    const cJSON *sc;
    cJSON_ArrayForEach(sc, scaling) {
      cmp_row *s = &f->rows[f->n_rows++];
      memset(s, 0, sizeof *s);
      s->conversion = conv;
      s->batch = r->batch;
      double in = num_or_nan(sc, "instances"), wk = num_or_nan(sc, "workers");
      s->instances = isfinite(in) ? (int)in : 0;
      s->workers = isfinite(wk) ? (int)wk : 0;
      double tpi = num_or_nan(sc, "threads_per_instance");
      s->threads = isfinite(tpi) ? (int)tpi : 0;
      s->status = cJSON_IsString(cJSON_GetObjectItemCaseSensitive(sc, "error")) ? "error" : r->status;
      read_latency(cJSON_GetObjectItemCaseSensitive(sc, "latency_ms"), NULL, s, why, sizeof why);
    }
    idx++;
  }
  return 0;
}

static void free_file(cmp_file *f) {
  for (int i = 0; i < f->n_rows; i++) {
    free(f->rows[i].raw);
    free(f->rows[i].run_n);
    free(f->rows[i].slices);
  }
  free(f->rows);
  cJSON_Delete(f->doc);
}

static int same_key(const cmp_row *a, const cmp_row *b) {
  return !strcmp(a->conversion, b->conversion) && a->batch == b->batch && a->instances == b->instances &&
         a->workers == b->workers;
}

static void row_label(const cmp_row *r, char *buf, size_t n) {
  if (r->instances)
    snprintf(buf, n, "%s b%d %dx%d", r->conversion, r->batch, r->instances, r->workers);
  else
    snprintf(buf, n, "%s b%d", r->conversion, r->batch);
}

/* splitmix64: a fixed seed gives the same intervals on every run of the same files. */
static uint64_t next_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* k-th smallest of x[0..n) (reorders x), Hoare selection. */
static double select_kth(double *x, int64_t n, int64_t k) {
  int64_t lo = 0, hi = n - 1;
  while (lo < hi) {
    double piv = x[lo + (hi - lo) / 2];
    int64_t i = lo, j = hi;
    while (i <= j) {
      while (x[i] < piv) i++;
      while (x[j] > piv) j--;
      if (i <= j) {
        double t = x[i];
        x[i] = x[j];
        x[j] = t;
        i++;
        j--;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return x[k];
  }
  return x[k];
}

/* Median of a resample with replacement of sorted[0..n), by the linear-interpolation definition. */
static double resample_median(const double *sorted, int64_t n, double *tmp, uint64_t *rng) {
  /* an index from the top 32 bits by multiply-shift: bias below n / 2^32, no division */
  for (int64_t i = 0; i < n; i++) tmp[i] = sorted[((next_u64(rng) >> 32) * (uint64_t)n) >> 32];
  double h = (double)(n - 1) * 0.5;
  int64_t k = (int64_t)floor(h);
  double a = select_kth(tmp, n, k);
  if (h == (double)k) return a;
  /* the next order statistic is the smallest of those above position k after selection */
  double b = INFINITY;
  for (int64_t i = k + 1; i < n; i++)
    if (tmp[i] < b) b = tmp[i];
  return a + 0.5 * (b - a);
}

/* Percentile bootstrap of median(new)/median(base): 95% interval into ci. Returns 0 or -1. */
static int bootstrap_ratio(const cmp_row *b, const cmp_row *n, const cmp_opts *o, double ci[2]) {
  int64_t mx = b->n_raw > n->n_raw ? b->n_raw : n->n_raw;
  double *tmp = malloc(sizeof(double) * (size_t)mx);
  double *ratios = malloc(sizeof(double) * (size_t)o->resamples);
  if (!tmp || !ratios) {
    free(tmp);
    free(ratios);
    return -1;
  }
  uint64_t rng = o->seed;
  for (int i = 0; i < o->resamples; i++) {
    double mb = resample_median(b->raw, b->n_raw, tmp, &rng);
    double mn = resample_median(n->raw, n->n_raw, tmp, &rng);
    ratios[i] = mb > 0 ? mn / mb : INFINITY;
  }
  qsort(ratios, (size_t)o->resamples, sizeof(double), cmp_double);
  ci[0] = alma__percentile_sorted(ratios, o->resamples, 0.025);
  ci[1] = alma__percentile_sorted(ratios, o->resamples, 0.975);
  free(tmp);
  free(ratios);
  return 0;
}

/* Rows of repeats: the hierarchical bootstrap (processes, then batches) of each side's median of
 * medians, paired replicate by replicate into the ratio; a side without repeats is one process. */
static int hier_ratio(const cmp_row *b, const cmp_row *n, const cmp_opts *o, double ci[2]) {
  const cmp_row *side[2] = {b, n};
  double *reps[2] = {malloc(sizeof(double) * (size_t)o->resamples), malloc(sizeof(double) * (size_t)o->resamples)};
  int rc = reps[0] && reps[1] ? 0 : -1;
  for (int s2 = 0; s2 < 2 && rc == 0; s2++) {
    const cmp_row *r = side[s2];
    int k = r->k >= 2 && r->slices ? r->k : 1;
    const double **sl = calloc((size_t)k, sizeof *sl);
    int64_t one = r->n_raw;
    const int64_t *nn = k >= 2 ? r->run_n : &one;
    if (!sl) {
      rc = -1;
      break;
    }
    for (int j = 0, off = 0; j < k; off += (int)nn[j], j++) sl[j] = (k >= 2 ? r->slices : r->raw) + off;
    double dummy[2];
    rc = alma__hier_bootstrap(sl, nn, k, o->resamples, o->seed + (uint64_t)s2, 0.95, dummy, reps[s2]);
    free(sl);
  }
  if (rc == 0) {
    for (int i = 0; i < o->resamples; i++) reps[0][i] = reps[0][i] > 0 ? reps[1][i] / reps[0][i] : INFINITY;
    qsort(reps[0], (size_t)o->resamples, sizeof(double), cmp_double);
    ci[0] = alma__percentile_sorted(reps[0], o->resamples, 0.025);
    ci[1] = alma__percentile_sorted(reps[0], o->resamples, 0.975);
  }
  free(reps[0]);
  free(reps[1]);
  return rc;
}

/* The minimum sample counts: a bootstrap of fewer than 6 samples per side cannot reach 95%, the
 * same floor as the stored median interval. */
#define CMP_MIN_RAW 6

typedef struct {
  const cmp_row *base, *new_;
  double ratio, ci[2];
  const char *method;  /* "bootstrap", "stored_ci", or NULL when not compared */
  const char *verdict;
  int fails;
} cmp_result;

static void compare_rows(const cmp_row *b, const cmp_row *n, const cmp_opts *o, double fail_above,
                         cmp_result *out) {
  memset(out, 0, sizeof *out);
  out->base = b;
  out->new_ = n;
  out->ratio = out->ci[0] = out->ci[1] = NAN;
  int b_ok = !strcmp(b->status, "ok"), n_ok = !strcmp(n->status, "ok");
  if (!n_ok) {
    out->verdict = b_ok ? "now failing" : "not compared: failed in both";
    if (b_ok && !strcmp(n->status, "not timed")) out->verdict = "not compared: not timed in NEW";
    out->fails = b_ok && fail_above >= 0 && strcmp(n->status, "not timed");
    return;
  }
  if (!b_ok) {
    out->verdict = "not compared: failed in BASE";
    return;
  }
  if (!(b->median > 0) || !isfinite(n->median)) {
    out->verdict = "not compared: no median";
    return;
  }
  out->ratio = n->median / b->median;
  int repeated = (b->k >= 2 && b->slices) || (n->k >= 2 && n->slices);
  if (repeated && b->n_raw >= 1 && n->n_raw >= 1 && hier_ratio(b, n, o, out->ci) == 0) {
    out->method = "hierarchical_bootstrap";
  } else if ((b->k >= 2 || n->k >= 2) && b->ci_lo > 0 && isfinite(b->ci_hi) && isfinite(n->ci_lo) && isfinite(n->ci_hi)) {
    /* repeats without raw samples: their stored between-process intervals (below) */
    out->method = "stored_ci";
    out->ci[0] = n->ci_lo / b->ci_hi;
    out->ci[1] = n->ci_hi / b->ci_lo;
  } else if (b->n_raw >= CMP_MIN_RAW && n->n_raw >= CMP_MIN_RAW && bootstrap_ratio(b, n, o, out->ci) == 0) {
    out->method = "bootstrap";
  } else if (b->ci_lo > 0 && isfinite(b->ci_hi) && isfinite(n->ci_lo) && isfinite(n->ci_hi)) {
    /* each stored interval covers its median with >= 95%: both hold with >= 90%, and then the true
     * ratio lies within these bounds */
    out->method = "stored_ci";
    out->ci[0] = n->ci_lo / b->ci_hi;
    out->ci[1] = n->ci_hi / b->ci_lo;
  } else {
    out->verdict = "undetermined: too few samples";
    return;
  }
  if (out->ci[0] > 1 + o->noise) out->verdict = "slower";
  else if (out->ci[1] < 1 / (1 + o->noise)) out->verdict = "faster";
  else out->verdict = "no significant change";
  out->fails = fail_above >= 0 && out->ci[0] > 1 + fail_above;
}

static const char *sys_str(const cJSON *doc, const char *key, char *buf, size_t n) {
  const cJSON *sys = cJSON_GetObjectItemCaseSensitive(doc, "system");
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(sys, key);
  if (cJSON_IsString(v)) return v->valuestring;
  if (!v) return "(not recorded)";
  char *p = cJSON_PrintUnformatted(v);
  snprintf(buf, n, "%s", p ? p : "?");
  free(p);
  return buf;
}

/* Differences that make a comparison suspect: machine, alma and library versions, build, model. */
static int environment_warnings(const cmp_file *b, const cmp_file *n, cJSON *warnings, FILE *out) {
  int count = 0;
  static const struct {
    const char *key, *what;
  } sys_keys[] = {{"cpu_model", "CPU model"}, {"isa", "CPU ISA"}, {"libraries", "library versions"},
                  {"compiler", "compiler"}, {"build_flags", "build flags"}, {"logical_cores", "logical cores"}};
  char w[2048], ba[512], na[512];
  for (size_t i = 0; i < sizeof sys_keys / sizeof sys_keys[0]; i++) {
    const char *bv = sys_str(b->doc, sys_keys[i].key, ba, sizeof ba);
    const char *nv = sys_str(n->doc, sys_keys[i].key, na, sizeof na);
    if (!strcmp(bv, "(not recorded)") || !strcmp(nv, "(not recorded)")) continue;
    if (strcmp(bv, nv)) {
      snprintf(w, sizeof w, "different %s: %s (BASE) vs %s (NEW)", sys_keys[i].what, bv, nv);
      cJSON_AddItemToArray(warnings, cJSON_CreateString(w));
      fprintf(out, "warning: %s\n", w);
      count++;
    }
  }
  const char *bv = str_or(b->doc, "alma_version", "(not recorded)");
  const char *nv = str_or(n->doc, "alma_version", "(not recorded)");
  if (strcmp(bv, nv)) {
    snprintf(w, sizeof w, "different alma version: %s (BASE) vs %s (NEW)", bv, nv);
    cJSON_AddItemToArray(warnings, cJSON_CreateString(w));
    fprintf(out, "warning: %s\n", w);
    count++;
  }
  /* Same version, other code (a local change, other flags): worth knowing, not a different release. */
  bv = str_or(b->doc, "alma_build", "(not recorded)");
  nv = str_or(n->doc, "alma_build", "(not recorded)");
  if (strcmp(bv, "(not recorded)") && strcmp(nv, "(not recorded)") && strcmp(bv, nv)) {
    snprintf(w, sizeof w, "different alma build: %s (BASE) vs %s (NEW)", bv, nv);
    cJSON_AddItemToArray(warnings, cJSON_CreateString(w));
    fprintf(out, "warning: %s\n", w);
    count++;
  }
  bv = str_or(cJSON_GetObjectItemCaseSensitive(b->doc, "model"), "hash", "(not recorded)");
  nv = str_or(cJSON_GetObjectItemCaseSensitive(n->doc, "model"), "hash", "(not recorded)");
  if (strcmp(bv, nv)) {
    snprintf(w, sizeof w, "different model (hash %.16s vs %.16s): the rows compare different graphs", bv, nv);
    cJSON_AddItemToArray(warnings, cJSON_CreateString(w));
    fprintf(out, "warning: %s\n", w);
    count++;
  }
  return count;
}

static cJSON *json_num(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

static void add_row_key(cJSON *o, const cmp_row *r) {
  cJSON_AddStringToObject(o, "conversion", r->conversion);
  cJSON_AddNumberToObject(o, "batch_size", r->batch);
  if (r->instances) {
    cJSON_AddNumberToObject(o, "instances", r->instances);
    cJSON_AddNumberToObject(o, "workers", r->workers);
  }
}

/* Compares one NEW file with BASE: prints the table, appends to the JSON. Returns rows failing. */
static int compare_files(cmp_file *b, cmp_file *n, const cmp_opts *o, double fail_above, cJSON *jout,
                         FILE *out) {
  cJSON *jc = cJSON_CreateObject();
  cJSON_AddItemToArray(jout, jc);
  cJSON_AddStringToObject(jc, "base", b->path);
  cJSON_AddStringToObject(jc, "new", n->path);
  cJSON *warnings = cJSON_AddArrayToObject(jc, "warnings");
  cJSON *jrows = cJSON_AddArrayToObject(jc, "rows");
  cJSON *only_b = cJSON_AddArrayToObject(jc, "only_in_base");
  cJSON *only_n = cJSON_AddArrayToObject(jc, "only_in_new");
  fprintf(out, "BASE %s\nNEW  %s\n", b->path, n->path);
  environment_warnings(b, n, warnings, out);
  for (int i = 0; i < b->n_rows; i++) b->rows[i].used = 0;
  for (int i = 0; i < n->n_rows; i++) n->rows[i].used = 0;
  fprintf(out, "%-30s %14s %14s  %-28s %s\n", "conversion", "BASE median ms", "NEW median ms",
          "NEW/BASE [95% CI]", "verdict");
  int failing = 0, n_stored = 0;
  char label[256], w[512];
  for (int i = 0; i < n->n_rows; i++) {
    cmp_row *nr = &n->rows[i];
    cmp_row *br = NULL;
    for (int j = 0; j < b->n_rows && !br; j++)
      if (!b->rows[j].used && same_key(&b->rows[j], nr)) br = &b->rows[j];
    if (!br) {
      cJSON *k = cJSON_CreateObject();
      add_row_key(k, nr);
      cJSON_AddItemToArray(only_n, k);
      continue;
    }
    br->used = nr->used = 1;
    cmp_result r;
    compare_rows(br, nr, o, fail_above, &r);
    failing += r.fails;
    n_stored += r.method && !strcmp(r.method, "stored_ci");
    row_label(nr, label, sizeof label);
    char ratio[64] = "-";
    if (isfinite(r.ratio) && r.method)
      snprintf(ratio, sizeof ratio, "%.3f [%.3f, %.3f]", r.ratio, r.ci[0], r.ci[1]);
    else if (isfinite(r.ratio))
      snprintf(ratio, sizeof ratio, "%.3f", r.ratio);
    char verdict[160];
    if (isfinite(r.ratio) && r.method && strcmp(r.verdict, "no significant change"))
      snprintf(verdict, sizeof verdict, "%s (%+.1f%%)", r.verdict, (r.ratio - 1) * 100);
    else
      snprintf(verdict, sizeof verdict, "%s", r.verdict);
    fprintf(out, "%-30s %14.5g %14.5g  %-28s %s%s%s\n", label, br->median, nr->median, ratio, verdict,
            r.method && !strcmp(r.method, "stored_ci") ? " *" : "", r.fails ? "  FAIL" : "");
    cJSON *jr = cJSON_CreateObject();
    add_row_key(jr, nr);
    cJSON_AddItemToObject(jr, "base_median_ms", json_num(br->median));
    cJSON_AddItemToObject(jr, "new_median_ms", json_num(nr->median));
    cJSON_AddNumberToObject(jr, "base_n", (double)br->n);
    cJSON_AddNumberToObject(jr, "new_n", (double)nr->n);
    cJSON_AddStringToObject(jr, "base_status", br->status);
    cJSON_AddStringToObject(jr, "new_status", nr->status);
    cJSON_AddItemToObject(jr, "ratio", json_num(r.ratio));
    cJSON *ci = cJSON_CreateArray();
    cJSON_AddItemToArray(ci, json_num(r.ci[0]));
    cJSON_AddItemToArray(ci, json_num(r.ci[1]));
    cJSON_AddItemToObject(jr, "ratio_ci95", r.method ? ci : (cJSON_Delete(ci), cJSON_CreateNull()));
    cJSON_AddItemToObject(jr, "method", r.method ? cJSON_CreateString(r.method) : cJSON_CreateNull());
    cJSON_AddStringToObject(jr, "verdict", r.verdict);
    cJSON_AddBoolToObject(jr, "fails_gate", r.fails);
    cJSON_AddItemToArray(jrows, jr);
    if (br->threads && nr->threads && br->threads != nr->threads) {
      snprintf(w, sizeof w, "%s: threads %d in BASE, %d in NEW", label, br->threads, nr->threads);
      cJSON_AddItemToArray(warnings, cJSON_CreateString(w));
      fprintf(out, "  warning: %s\n", w);
    }
  }
  for (int j = 0; j < b->n_rows; j++) {
    if (b->rows[j].used) continue;
    cJSON *k = cJSON_CreateObject();
    add_row_key(k, &b->rows[j]);
    cJSON_AddItemToArray(only_b, k);
    row_label(&b->rows[j], label, sizeof label);
    fprintf(out, "only in BASE (not compared): %s\n", label);
  }
  for (int i = 0; i < n->n_rows; i++) {
    if (n->rows[i].used) continue;
    row_label(&n->rows[i], label, sizeof label);
    fprintf(out, "only in NEW (not compared): %s\n", label);
  }
  if (n_stored)
    fprintf(out, "* interval bounded by the two stored median intervals (coverage >= 90%%): a side had no raw"
                 " samples (write both files with alma bench --raw), or a throughput configuration, which keeps none\n");
  cJSON_AddNumberToObject(jc, "failing", failing);
  return failing;
}

static int parse_percent(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno || !isfinite(v) || v < 0) return -1;
  if (*end == '%') end++;
  if (*end) return -1;
  *out = v / 100.0;
  return 0;
}

/* The HTML page: the comparison, then every file's own report (read again as results). */
static int write_html(const char *path, const cJSON *jdoc, char **paths, int n) {
  alma_results **rs = calloc((size_t)n, sizeof *rs);
  int rc = rs ? 0 : -1, loaded = 0;
  for (int i = 0; i < n && rc == 0; i++, loaded++)
    if (alma_results_load_json(paths[i], &rs[i]) != ALMA_OK) {
      fprintf(stderr, "alma compare: error: --html: %s: %s\n", paths[i], alma_last_error());
      rc = -1;
    }
  if (rc == 0 && alma__html_write(path, (const alma_results *const *)rs, (const char *const *)paths, n, jdoc, NULL) != ALMA_OK) {
    fprintf(stderr, "alma compare: error: --html: %s\n", alma_last_error());
    rc = -1;
  }
  for (int i = 0; i < loaded; i++) alma_results_free(rs[i]);
  free(rs);
  return rc;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: alma compare BASE.json NEW.json... [--fail-above P%%] [--noise P%%] [--json FILE|-]\n"
          "                    [--html FILE|-] [--resamples N] [--seed N]\n\n"
          "Compares each NEW results file (alma bench --json) with BASE, row by row (conversion, batch size,\n"
          "instances x workers): the ratio of median batch latencies NEW/BASE with its 95%% interval (a\n"
          "percentile bootstrap over raw_ms, written by alma bench --raw; without raw samples, bounds from the\n"
          "stored median intervals), and a verdict: slower or faster when the whole interval lies beyond\n"
          "--noise, no significant change otherwise.\n\n"
          "  --fail-above P%%  exit 1 when a row is slower by more than P%% with 95%% confidence (the interval's\n"
          "                   lower bound above 1 + P), or ran in BASE and fails in NEW\n"
          "  --noise P%%       changes smaller than this are no significant change (default 1%%)\n"
          "  --json FILE      the comparison as JSON; - for standard output (the table then goes to stderr)\n"
          "  --html FILE      the comparison as an HTML page (a chart of the ratios), followed by each file's\n"
          "                   report (docs/report.md); - for standard output\n"
          "  --resamples N    bootstrap resamples (default %d, at least %d)\n"
          "  --seed N         bootstrap seed (default 0): the same files give the same intervals\n\n"
          "Exit status: 0 no failing row, 1 a row fails --fail-above, 2 usage error, 3 a file that cannot be\n"
          "read or is no alma results file.\n",
          CMP_DEFAULT_RESAMPLES, CMP_MIN_RESAMPLES);
}

int alma_cmd_compare(int argc, char **argv) {
  static const struct option opts[] = {{"fail-above", required_argument, 0, 'f'},
                                       {"json", required_argument, 0, 'j'},
                                       {"resamples", required_argument, 0, 'r'},
                                       {"seed", required_argument, 0, 's'},
                                       {"noise", required_argument, 0, 'n'},
                                       {"html", required_argument, 0, 'H'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  double fail_above = -1;
  const char *json_path = NULL, *html_path = NULL;
  cmp_opts o = {CMP_DEFAULT_RESAMPLES, 0, 0.01};
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    char *end;
    switch (c) {
      case 'f':
        if (parse_percent(optarg, &fail_above) != 0) {
          fprintf(stderr, "alma compare: error: --fail-above '%s' is not a non-negative percentage (e.g. 5%%)\n", optarg);
          return ALMA_EXIT_USAGE;
        }
        break;
      case 'j': json_path = optarg; break;
      case 'H': html_path = optarg; break;
      case 'n':
        if (parse_percent(optarg, &o.noise) != 0 || o.noise >= 1) {
          fprintf(stderr, "alma compare: error: --noise '%s' is not a percentage from 0 to 100 (e.g. 1%%)\n", optarg);
          return ALMA_EXIT_USAGE;
        }
        break;
      case 'r': {
        errno = 0;
        long v = strtol(optarg, &end, 10);
        if (end == optarg || *end || errno || v < CMP_MIN_RESAMPLES || v > 1000000) {
          fprintf(stderr, "alma compare: error: --resamples '%s': give a whole number from %d to 1000000\n", optarg,
                  CMP_MIN_RESAMPLES);
          return ALMA_EXIT_USAGE;
        }
        o.resamples = (int)v;
        break;
      }
      case 's': {
        errno = 0;
        unsigned long long v = strtoull(optarg, &end, 10);
        if (end == optarg || *end || errno || optarg[0] == '-') {
          fprintf(stderr, "alma compare: error: --seed '%s' is not a non-negative whole number\n", optarg);
          return ALMA_EXIT_USAGE;
        }
        o.seed = v;
        break;
      }
      case 'h': usage(stdout); return ALMA_EXIT_OK;
      default:
        if (optopt && strchr("fjrsnH", optopt))
          fprintf(stderr, "alma compare: error: option '%s' needs a value\n", argv[optind - 1]);
        else
          fprintf(stderr, "alma compare: error: unknown option '%s'\n", argv[optind - 1]);
        usage(stderr);
        return ALMA_EXIT_USAGE;
    }
  }
  int n_files = argc - optind;
  if (n_files < 2) {
    fprintf(stderr, "alma compare: error: give a BASE results file and at least one NEW one\n");
    usage(stderr);
    return ALMA_EXIT_USAGE;
  }
  if (json_path && html_path && !strcmp(json_path, "-") && !strcmp(html_path, "-")) {
    fprintf(stderr, "alma compare: error: --json - and --html - both write to standard output: give one a file\n");
    return ALMA_EXIT_USAGE;
  }
  FILE *out = (json_path && !strcmp(json_path, "-")) || (html_path && !strcmp(html_path, "-")) ? stderr : stdout;
  cmp_file *files = calloc((size_t)n_files, sizeof(cmp_file));
  if (!files) return ALMA_EXIT_FAILED;
  int rc = ALMA_EXIT_OK;
  for (int i = 0; i < n_files && rc == ALMA_EXIT_OK; i++)
    if (load_file(argv[optind + i], &files[i]) != 0) rc = ALMA_EXIT_INPUT;
  if (rc == ALMA_EXIT_OK) {
    cJSON *jdoc = cJSON_CreateObject();
    cJSON_AddStringToObject(jdoc, "alma_version", alma_version());
    cJSON_AddStringToObject(jdoc, "statistic", "median latency per batch, NEW/BASE (> 1: NEW is slower)");
    cJSON_AddStringToObject(jdoc, "method", "percentile bootstrap of the ratio of medians over raw_ms");
    cJSON_AddNumberToObject(jdoc, "resamples", o.resamples);
    cJSON_AddNumberToObject(jdoc, "seed", (double)o.seed);
    cJSON_AddNumberToObject(jdoc, "confidence", 0.95);
    cJSON_AddNumberToObject(jdoc, "noise", o.noise);
    cJSON_AddItemToObject(jdoc, "fail_above", fail_above >= 0 ? cJSON_CreateNumber(fail_above) : cJSON_CreateNull());
    cJSON *jcmp = cJSON_AddArrayToObject(jdoc, "comparisons");
    int failing = 0;
    for (int i = 1; i < n_files; i++) {
      if (i > 1) fprintf(out, "\n");
      failing += compare_files(&files[0], &files[i], &o, fail_above, jcmp, out);
    }
    fprintf(out, "95%% intervals: percentile bootstrap of the ratio of medians, %d resamples, seed %llu;"
                 " slower/faster: the whole interval beyond %g%%\n",
            o.resamples, (unsigned long long)o.seed, o.noise * 100);
    if (fail_above >= 0)
      fprintf(out, "%s: %d row%s slower by more than %g%% with 95%% confidence, or failing in NEW\n",
              failing ? "FAIL" : "PASS", failing, failing == 1 ? "" : "s", fail_above * 100);
    cJSON_AddBoolToObject(jdoc, "regression", failing > 0);
    if (json_path) {
      char *text = cJSON_Print(jdoc);
      FILE *jf = !strcmp(json_path, "-") ? stdout : fopen(json_path, "w");
      if (!text || !jf || fprintf(jf, "%s\n", text) < 0 || (jf != stdout && fclose(jf) != 0)) {
        fprintf(stderr, "alma compare: error: cannot write %s: %s\n", json_path, strerror(errno));
        rc = ALMA_EXIT_INPUT;
      }
      free(text);
    }
    if (html_path && write_html(html_path, jdoc, argv + optind, n_files) != 0) rc = ALMA_EXIT_INPUT;
    cJSON_Delete(jdoc);
    if (rc == ALMA_EXIT_OK && failing) rc = ALMA_EXIT_FAILED;
  }
  for (int i = 0; i < n_files; i++) free_file(&files[i]);
  free(files);
  return rc;
}
