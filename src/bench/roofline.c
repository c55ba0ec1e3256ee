/* Roofline figures (docs/methodology.md, Roofline): the machine's SGEMM peak and memory bandwidth,
 * measured once per machine in a child process and cached under its fingerprint in alma's cache
 * directory; a model's FLOPs and bytes moved per batch; and a result's achieved GFLOP/s against
 * them. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bench/bench.h"
#include "cache/cache.h"
#include "graph/infer.h"
#include "graph/model.h"

#ifdef ALMA_HAVE_BLAS
#include "runtimes/blas/internal.h"
#endif
#ifdef ALMA_HAVE_DNNL
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#endif

/* ---- the model's side ------------------------------------------------------------------------ */
alma_status alma__model_cost(const alma_model *m, const alma_tensor *shapes, int n_shapes, double *flops_out,
                             double *bytes_out) {
  *flops_out = *bytes_out = NAN;
  const alma_graph *g = m->graph;
  const alma_tensor **sp = calloc((size_t)g->n_inputs + 1, sizeof *sp);
  if (!sp) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (int i = 0; i < g->n_inputs && i < n_shapes; i++) sp[i] = &shapes[i];
  alma_infer_result r;
  alma_status st = alma__graph_infer(g, sp, 1, 1 << 16, &r);
  free(sp);
  if (st != ALMA_OK) return st;
  if (r.flops >= 0) *flops_out = (double)r.flops;
  /* Bytes moved: every weight read once, every tensor a node reads or writes moved once per use
   * (nothing kept in cache between nodes): the traffic of an unfused execution. */
  double bytes = 0;
  int known = r.n_unknown == 0;
  for (int v = 0; v < g->n_values; v++)
    if (g->values[v].init) bytes += (double)g->values[v].init->nbytes;
  for (int i = 0; i < g->n_nodes && known; i++) {
    const alma_node *nd = &g->nodes[i];
    for (int pass = 0; pass < 2; pass++) {
      int n = pass ? nd->n_outputs : nd->n_inputs;
      const int *ids = pass ? nd->outputs : nd->inputs;
      for (int k = 0; k < n; k++) {
        int v = ids[k];
        if (v < 0 || v >= r.n_values || g->values[v].init) continue;
        const alma_tensor *t = &r.info[v];
        int64_t numel = 1;
        for (int d = 0; d < t->rank; d++) numel *= t->dims[d] > 0 ? t->dims[d] : 0;
        bytes += (double)numel * (double)alma_dtype_size(t->dtype);
      }
    }
  }
  if (known && bytes > 0) *bytes_out = bytes;
  alma__infer_result_free(&r);
  return ALMA_OK;
}

alma__roofline alma__result_roofline(const alma_results *rs, const alma_result *x) {
  alma__roofline f = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, NULL};
  if (x->status != ALMA_RESULT_OK || !strcmp(x->mode, "build") || !(x->flops_per_batch > 0)) return f;
  double med = alma_result_median_ms(x, NULL);
  if (!(med > 0)) return f;
  f.flops = x->flops_per_batch;
  f.bytes = x->bytes_per_batch;
  f.achieved_gflops = f.flops / (med * 1e-3) / 1e9;
  f.intensity = f.bytes > 0 ? f.flops / f.bytes : NAN;
  const alma__machine_peak *p = &rs->peak;
  if (p->measured && p->gflops > 0) {
    f.share_of_peak = f.achieved_gflops / p->gflops;
    if (p->bandwidth_gbs > 0 && isfinite(f.intensity)) {
      f.attainable_gflops = fmin(p->gflops, f.intensity * p->bandwidth_gbs);
      f.share_of_attainable = f.achieved_gflops / f.attainable_gflops;
      f.bound = f.intensity < p->gflops / p->bandwidth_gbs ? "memory" : "compute";
    }
  }
  return f;
}

/* ---- the machine's side: probes ---------------------------------------------------------------- */
#define PEAK_N 1024      /* SGEMM size: 2.1 GFLOP, large enough for the peak, short enough to be cheap */
#define PEAK_REPS 5
#define BW_BYTES (64u << 20) /* per array, three of them: far beyond any last-level cache */
#define BW_REPS 4
#define PEAK_VERSION 1   /* bumps invalidate cached figures when the probe changes */

typedef void (*gemm_fn)(int n, const float *a, const float *b, float *c);

#ifdef ALMA_HAVE_BLAS
static void blas_gemm(int n, const float *a, const float *b, float *c) {
  alma__blas_sgemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
}
#endif
#ifdef ALMA_HAVE_DNNL
static void onednn_gemm(int n, const float *a, const float *b, float *c) {
  dnnl_sgemm('N', 'N', n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
}
#endif

/* Best of PEAK_REPS after one warm-up call, GFLOP/s. */
static double time_gemm(gemm_fn f, const float *a, const float *b, float *c) {
  double best = INFINITY, flops = 2.0 * PEAK_N * (double)PEAK_N * PEAK_N;
  f(PEAK_N, a, b, c); /* warm-up: threads started, pages touched */
  for (int r = 0; r < PEAK_REPS; r++) {
    double t0 = alma__bench_now();
    f(PEAK_N, a, b, c);
    best = fmin(best, alma__bench_now() - t0);
  }
  return best > 0 ? flops / best / 1e9 : NAN;
}

typedef struct {
  float *a;
  const float *b, *c;
  size_t lo, hi;
} triad_arg;

/* STREAM's triad a = b + s*c over one thread's slice. */
static void *triad_slice(void *p) {
  triad_arg *t = p;
  for (size_t i = t->lo; i < t->hi; i++) t->a[i] = t->b[i] + 3.0f * t->c[i];
  return NULL;
}

/* GB/s of the triad on `threads` threads (12 bytes per element: two reads and a write, as STREAM
 * counts them), best of BW_REPS; each rep starts its threads anew (microseconds against the
 * milliseconds of the sweep). */
static double triad_bandwidth(int threads, char *why, size_t wn) {
  size_t n = BW_BYTES / sizeof(float);
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
  triad_arg *ta = calloc((size_t)threads, sizeof *ta);
  pthread_t *th = calloc((size_t)threads, sizeof *th);
  double best = INFINITY, gbs = NAN;
  if (!a || !b || !c || !ta || !th) {
    snprintf(why, wn, "out of memory for the bandwidth probe");
    goto out;
  }
  for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = 1, c[i] = 2;  /* touched: no page faults timed */
  for (int k = 0; k < threads; k++)
    ta[k] = (triad_arg){a, b, c, n * (size_t)k / (size_t)threads, n * (size_t)(k + 1) / (size_t)threads};
  for (int r = 0; r < BW_REPS; r++) {
    double t0 = alma__bench_now();
    int started = 1;
    for (int k = 1; k < threads && started == k; k++)
      if (pthread_create(&th[k], NULL, triad_slice, &ta[k]) == 0) started++;
    triad_slice(&ta[0]);
    for (int k = started; k < threads; k++) triad_slice(&ta[k]);  /* a thread short: done here */
    for (int k = 1; k < started; k++) pthread_join(th[k], NULL);
    double t = alma__bench_now() - t0;
    if (started < threads) {
      snprintf(why, wn, "could not start %d threads for the bandwidth probe", threads);
      goto out;
    }
    best = fmin(best, t);
  }
  gbs = best > 0 ? 3.0 * (double)n * sizeof(float) / best / 1e9 : NAN;
out:
  free(a);
  free(b);
  free(c);
  free(ta);
  free(th);
  return gbs;
}

typedef struct {
  int threads;
} peak_job;

/* In a child: BLAS and OpenMP thread pools started here must not be inherited by the sweep's
 * later forks. Writes {"gflops", "library", "bandwidth_gbs"} or {"error"}. */
static void peak_job_fn(void *arg, alma__chan *ch) {
  const peak_job *pj = arg;
  cJSON *rec = cJSON_CreateObject();
  size_t cnt = (size_t)PEAK_N * PEAK_N;
  float *a = NULL, *b = NULL, *c = NULL;
  double best = NAN;
  const char *lib = NULL;
  if (posix_memalign((void **)&a, 64, cnt * sizeof *a) || posix_memalign((void **)&b, 64, cnt * sizeof *b) ||
      posix_memalign((void **)&c, 64, cnt * sizeof *c)) {
    cJSON_AddStringToObject(rec, "error", "out of memory for the SGEMM probe");
  } else {
    for (size_t i = 0; i < cnt; i++) a[i] = (float)(i % 17) * 0.01f, b[i] = (float)(i % 13) * 0.02f;
    char why[512] = "";
#ifdef ALMA_HAVE_BLAS
    if (alma__blas_load() == ALMA_OK) {
      alma__blas_set_threads(pj->threads);
      double g = time_gemm(blas_gemm, a, b, c);
      if (g > 0 && !(g <= best)) best = g, lib = alma__blas_info_get()->vendor;
    } else {
      snprintf(why, sizeof why, "%s", alma_last_error());
    }
#endif
#ifdef ALMA_HAVE_DNNL
    {
      void (*set)(int) = NULL;
      void *sym = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
      memcpy(&set, &sym, sizeof set);
      if (set) set(pj->threads);
      double g = time_gemm(onednn_gemm, a, b, c);
      if (g > 0 && !(g <= best)) best = g, lib = "oneDNN";
    }
#endif
    if (lib) {
      cJSON_AddNumberToObject(rec, "gflops", best);
      cJSON_AddStringToObject(rec, "library", lib);
    } else {
      cJSON_AddStringToObject(rec, "error", why[0] ? why : "no SGEMM library in this build (BLAS or DNNL runtime)");
    }
    char bw_why[160] = "";
    double bw = triad_bandwidth(pj->threads, bw_why, sizeof bw_why);
    if (bw > 0) cJSON_AddNumberToObject(rec, "bandwidth_gbs", bw);
    else cJSON_AddStringToObject(rec, "bandwidth_error", bw_why);
  }
  free(a);
  free(b);
  free(c);
  char *text = cJSON_PrintUnformatted(rec);
  alma__chan_record(ch, text ? text : "{\"error\":\"out of memory\"}");
  free(text);
  cJSON_Delete(rec);
}

/* What identifies the machine's peak: the CPU, its cores and ISA, the memory, the SGEMM libraries
 * the build has (known at compile time: loading them here would start their threads before the
 * sweep's forks), the threads used and the probe's own version. */
static void fingerprint(const alma_system_info *s, int threads, char hex[65]) {
  char text[2048];
  const char *libs = ""
#ifdef ALMA_HAVE_BLAS
                     "blas "
#endif
#ifdef ALMA_HAVE_DNNL
                     "dnnl"
#endif
      ;
  snprintf(text, sizeof text, "v%d|%s|%d|%d|%d|%s|%lld|%s|threads %d", PEAK_VERSION, s->cpu_model, s->logical_cores,
           s->physical_cores, s->sockets, s->isa, (long long)s->memory_bytes, libs, threads);
  alma_sha256 *h = alma__sha256_new();
  if (!h) {
    hex[0] = 0;
    return;
  }
  alma__sha256_update(h, text, strlen(text));
  alma__sha256_final(h, hex);
}

static int read_cached(const char *path, const char *fp, alma__machine_peak *p) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  char buf[4096];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  cJSON *j = cJSON_Parse(buf);
  const cJSON *g = cJSON_GetObjectItemCaseSensitive(j, "sgemm_gflops"), *bw = cJSON_GetObjectItemCaseSensitive(j, "bandwidth_gbs");
  const cJSON *jf = cJSON_GetObjectItemCaseSensitive(j, "fingerprint"), *lib = cJSON_GetObjectItemCaseSensitive(j, "sgemm_library");
  const cJSON *at = cJSON_GetObjectItemCaseSensitive(j, "measured_at"), *la = cJSON_GetObjectItemCaseSensitive(j, "load_average");
  int ok = cJSON_IsNumber(g) && g->valuedouble > 0 && cJSON_IsNumber(bw) && bw->valuedouble > 0 && cJSON_IsString(jf) &&
           !strcmp(jf->valuestring, fp) && cJSON_IsString(lib);
  if (ok) {
    p->measured = 1;
    p->cached = 1;
    p->gflops = g->valuedouble;
    p->bandwidth_gbs = bw->valuedouble;
    snprintf(p->sgemm_library, sizeof p->sgemm_library, "%s", lib->valuestring);
    if (cJSON_IsString(at)) snprintf(p->measured_at, sizeof p->measured_at, "%s", at->valuestring);
    p->load_average = cJSON_IsNumber(la) ? la->valuedouble : NAN;
  }
  cJSON_Delete(j);
  return ok;
}

void alma__machine_peak_get(const char *cache_dir, const alma_system_info *sys, int threads, alma__machine_peak *p) {
  alma__machine_peak old;
  int have_old = 0;
  memset(p, 0, sizeof *p);
  p->gflops = p->bandwidth_gbs = p->load_average = NAN;
  p->threads = threads;
  fingerprint(sys, threads, p->fingerprint);
  if (cache_dir && *cache_dir) {
    snprintf(p->path, sizeof p->path, "%s/machine-%.16s.json", cache_dir, p->fingerprint);
    if (read_cached(p->path, p->fingerprint, p)) {
      /* figures measured on a busy machine are low: measured again when it is quieter, the better kept */
      double la[1];
      int busy = isfinite(p->load_average) && sys->logical_cores > 0 && p->load_average >= sys->logical_cores;
      if (!busy || getloadavg(la, 1) != 1 || la[0] >= p->load_average / 2) return;
      old = *p;
      have_old = 1;
      memset(p, 0, sizeof *p);
      p->gflops = p->bandwidth_gbs = p->load_average = NAN;
      p->threads = threads;
      snprintf(p->fingerprint, sizeof p->fingerprint, "%s", old.fingerprint);
      snprintf(p->path, sizeof p->path, "%s", old.path);
    }
  }
  peak_job pj = {threads};
  alma__job_opts o = {.isolate = 1, .timeout_s = 120};
  alma__job_outcome oc;
  if (alma__job_run(peak_job_fn, &pj, &o, &oc) != ALMA_OK || oc.status != ALMA_OK || !oc.record) {
    snprintf(p->reason, sizeof p->reason, "the peak probe failed: %.400s", oc.reason[0] ? oc.reason : alma_last_error());
    alma__job_outcome_free(&oc);
    if (have_old) *p = old;
    return;
  }
  cJSON *j = cJSON_Parse(oc.record);
  alma__job_outcome_free(&oc);
  const cJSON *g = cJSON_GetObjectItemCaseSensitive(j, "gflops"), *bw = cJSON_GetObjectItemCaseSensitive(j, "bandwidth_gbs");
  const cJSON *lib = cJSON_GetObjectItemCaseSensitive(j, "library"), *err = cJSON_GetObjectItemCaseSensitive(j, "error");
  const cJSON *bwe = cJSON_GetObjectItemCaseSensitive(j, "bandwidth_error");
  if (cJSON_IsNumber(g) && cJSON_IsNumber(bw) && cJSON_IsString(lib)) {
    p->measured = 1;
    p->gflops = g->valuedouble;
    p->bandwidth_gbs = bw->valuedouble;
    snprintf(p->sgemm_library, sizeof p->sgemm_library, "%s", lib->valuestring);
  } else {
    snprintf(p->reason, sizeof p->reason, "%s", cJSON_IsString(err) ? err->valuestring
                                                 : cJSON_IsString(bwe) ? bwe->valuestring : "the peak probe gave no figures");
  }
  cJSON_Delete(j);
  if (!p->measured && have_old) *p = old;
  if (!p->measured) return;
  if (have_old) {  /* each figure's better measurement */
    if (old.gflops > p->gflops) p->gflops = old.gflops, snprintf(p->sgemm_library, sizeof p->sgemm_library, "%s", old.sgemm_library);
    if (old.bandwidth_gbs > p->bandwidth_gbs) p->bandwidth_gbs = old.bandwidth_gbs;
  }
  time_t now = time(NULL);
  struct tm tmv;
  if (gmtime_r(&now, &tmv)) strftime(p->measured_at, sizeof p->measured_at, "%Y-%m-%dT%H:%M:%SZ", &tmv);
  double la[3];
  p->load_average = getloadavg(la, 1) == 1 ? la[0] : NAN;
  if (!p->path[0]) return;
  cJSON *o2 = alma__machine_peak_to_cjson(p);
  char *text = o2 ? cJSON_Print(o2) : NULL;
  cJSON_Delete(o2);
  /* a cache that cannot be written costs a probe next time, nothing else */
  if (text && alma__write_atomic(p->path, text, strlen(text)) != ALMA_OK) alma__error_clear();
  free(text);
}

static cJSON *num_or_null(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

struct cJSON *alma__machine_peak_to_cjson(const alma__machine_peak *p) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddBoolToObject(o, "measured", p->measured);
  cJSON_AddItemToObject(o, "sgemm_gflops", num_or_null(p->gflops));
  cJSON_AddItemToObject(o, "sgemm_library", p->sgemm_library[0] ? cJSON_CreateString(p->sgemm_library) : cJSON_CreateNull());
  cJSON_AddNumberToObject(o, "sgemm_size", PEAK_N);
  cJSON_AddItemToObject(o, "bandwidth_gbs", num_or_null(p->bandwidth_gbs));
  cJSON_AddNumberToObject(o, "threads", p->threads);
  cJSON_AddStringToObject(o, "fingerprint", p->fingerprint);
  cJSON_AddItemToObject(o, "measured_at", p->measured_at[0] ? cJSON_CreateString(p->measured_at) : cJSON_CreateNull());
  cJSON_AddItemToObject(o, "load_average", num_or_null(p->load_average));
  cJSON_AddBoolToObject(o, "cached", p->cached);
  cJSON_AddItemToObject(o, "reason", p->reason[0] ? cJSON_CreateString(p->reason) : cJSON_CreateNull());
  return o;
}

void alma__machine_peak_from_cjson(const struct cJSON *o, alma__machine_peak *p) {
  memset(p, 0, sizeof *p);
  p->gflops = p->bandwidth_gbs = p->load_average = NAN;
  if (!cJSON_IsObject(o)) {
    snprintf(p->reason, sizeof p->reason, "not recorded in the results file");
    return;
  }
  const cJSON *v;
#define GETS(key, dst)                                                                      \
  if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(o, key)))                         \
  snprintf(dst, sizeof dst, "%s", v->valuestring)
#define GETN(key, dst) \
  if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, key))) dst = v->valuedouble
  GETN("sgemm_gflops", p->gflops);
  GETN("bandwidth_gbs", p->bandwidth_gbs);
  GETN("load_average", p->load_average);
  if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, "threads"))) p->threads = v->valueint;
  GETS("sgemm_library", p->sgemm_library);
  GETS("fingerprint", p->fingerprint);
  GETS("measured_at", p->measured_at);
  GETS("reason", p->reason);
#undef GETS
#undef GETN
  p->cached = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "cached"));
  p->measured = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "measured")) && p->gflops > 0 && p->bandwidth_gbs > 0;
}

void alma__results_measure_peak(alma_results *rs, const void *cache, const alma_config *cfg) {
  alma__cache *tmp = NULL;
  const char *dir = NULL;
  if (cache) dir = alma__cache_dir(cache);
  else if (alma__cache_open(cfg->cache_dir, &tmp) == ALMA_OK) dir = alma__cache_dir(tmp);
  else alma__error_clear();  /* no cache directory: measured, not stored */
  alma__machine_peak_get(dir, &rs->system, alma__physical_cores(), &rs->peak);
  alma__cache_close(tmp);
}
