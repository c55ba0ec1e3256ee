/* The server scenario (MLPerf LoadGen's Server): queries arrive as a Poisson process drawn from a
 * fixed seed, wait in one FIFO queue, and are served by instances x workers sessions, one query
 * each at a time. Latency runs from a query's scheduled arrival to its completion, so time spent
 * queueing counts. A run is VALID when every query completed, the latency at the chosen percentile
 * is within the bound, and the schedule met the minimum duration and query count
 * (docs/methodology.md, Scenarios).
 *
 * The queue needs no thread of its own: a free worker takes the next query number from a shared
 * counter and sleeps until its arrival time when that is still ahead. Numbers are taken in order,
 * so queries start in arrival order on whichever worker frees first: an M/G/c FIFO queue. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "bench/bench.h"

void alma__poisson_arrivals(double qps, int64_t n, uint64_t seed, double *t) {
  uint64_t s = seed ^ 0x5eed5e7e5eed5e7eULL;  /* another stream than the input data's */
  double now = 0;
  for (int64_t i = 0; i < n; i++) {
    now += -log(alma__uniform01(&s));
    t[i] = now;
  }
  /* One more gap, then every time scaled so that n queries span n / qps exactly. */
  now += -log(alma__uniform01(&s));
  double scale = (double)n / qps / now;
  for (int64_t i = 0; i < n; i++) t[i] *= scale;
}

typedef struct {
  const alma__server_plan *p;
  const double *arrival;      /* seconds from t0 */
  int64_t n;
  double t0;
  atomic_llong next;          /* the next query to take */
  atomic_llong over;          /* completed queries over the bound */
  atomic_llong completed;
  atomic_int stop;            /* 1 early stop, 2 a failure, 3 the time cap */
  int64_t allowed;            /* over-bound queries the percentile still allows */
  double *lat, *svc, *done;   /* per query: ms from arrival, ms of inference, completion (s from t0) */
  pthread_mutex_t err_lock;
  char err[600];
} run_t;

typedef struct {
  run_t *r;
  int worker;
} arg_t;

static void sleep_until(double t) {
  struct timespec ts = {(time_t)t, (long)((t - (double)(time_t)t) * 1e9)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

static void *worker_main(void *v) {
  arg_t *a = v;
  run_t *r = a->r;
  char err[600];
  while (!atomic_load(&r->stop)) {
    int64_t q = atomic_fetch_add(&r->next, 1);
    if (q >= r->n) break;
    double due = r->t0 + r->arrival[q];
    if (alma__bench_now() < due) sleep_until(due);
    if (atomic_load(&r->stop)) break;
    double t_start = 0, t_done = 0;
    err[0] = 0;
    if (r->p->serve(r->p->user, a->worker, q, &t_start, &t_done, err, sizeof err) != ALMA_OK) {
      pthread_mutex_lock(&r->err_lock);
      if (!r->err[0]) snprintf(r->err, sizeof r->err, "query %lld on worker %d: %s", (long long)q, a->worker, err);
      pthread_mutex_unlock(&r->err_lock);
      atomic_store(&r->stop, 2);
      break;
    }
    double ms = 1e3 * (t_done - due);
    r->lat[q] = ms;
    r->svc[q] = 1e3 * (t_done - t_start);
    r->done[q] = t_done - r->t0;
    atomic_fetch_add(&r->completed, 1);
    if (ms > r->p->bound_ms && atomic_fetch_add(&r->over, 1) + 1 > r->allowed && r->p->early_stop) {
      int zero = 0;
      atomic_compare_exchange_strong(&r->stop, &zero, 1);
    }
  }
  return NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Queries of the schedule: arrivals until both the duration and the count are met. */
static int64_t schedule_length(const alma__server_plan *p) {
  double want = ceil(p->qps * p->min_duration_s);
  if (want < (double)p->min_queries) want = (double)p->min_queries;
  if (want < 1) want = 1;
  return want > ALMA__SERVER_MAX_QUERIES ? -1 : (int64_t)want;
}

alma_status alma__server_run(const alma__server_plan *p, alma_server_run *out, char *err, size_t errn) {
  out->target_qps = p->qps;
  int64_t n = schedule_length(p);
  if (!(p->qps > 0) || n < 0) {
    snprintf(err, errn, "%g queries/s for %g s is more than %d queries in one run", p->qps, p->min_duration_s,
             ALMA__SERVER_MAX_QUERIES);
    return alma__errorf(ALMA_ERR_INVALID_ARG, "%s", err);
  }
  double *arr = malloc((size_t)n * sizeof *arr), span = (double)n / p->qps;
  if (arr) alma__poisson_arrivals(p->qps, n, p->seed, arr);
  run_t r;
  memset(&r, 0, sizeof r);
  r.p = p;
  r.arrival = arr;
  r.n = n;
  /* NumPy's linear percentile of n latencies stays within the bound while at most
   * n - 1 - ceil((n - 1) p) of them exceed it. */
  r.allowed = n - 1 - (int64_t)ceil((double)(n - 1) * p->percentile / 100.0);
  r.lat = malloc((size_t)n * sizeof(double));
  r.svc = malloc((size_t)n * sizeof(double));
  r.done = calloc((size_t)n, sizeof(double)); /* 0: not completed */
  pthread_t *tid = calloc((size_t)p->n_workers, sizeof *tid);
  arg_t *args = calloc((size_t)p->n_workers, sizeof *args);
  if (!arr || !r.lat || !r.svc || !r.done || !tid || !args) {
    free(arr), free(r.lat), free(r.svc), free(r.done), free(tid), free(args);
    snprintf(err, errn, "out of memory for %lld queries", (long long)n);
    return alma__errorf(ALMA_ERR_NOMEM, "%s", err);
  }
  pthread_mutex_init(&r.err_lock, NULL);
  r.t0 = alma__bench_now() + 0.001;  /* the threads start before the first arrival */
  int started = 0, prc = 0;
  for (; started < p->n_workers; started++) {
    args[started] = (arg_t){&r, started};
    if ((prc = pthread_create(&tid[started], NULL, worker_main, &args[started])) != 0) break;
  }
  if (started < p->n_workers) {
    atomic_store(&r.stop, 2);
    snprintf(r.err, sizeof r.err, "could not start worker thread %d of %d: %s", started + 1, p->n_workers, strerror(prc));
  }
  while (!atomic_load(&r.stop) && atomic_load(&r.completed) < n) {
    if (p->max_time_s > 0 && alma__bench_now() - r.t0 > p->max_time_s) {
      atomic_store(&r.stop, 3);
      break;
    }
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
  free(tid);
  free(args);
  pthread_mutex_destroy(&r.err_lock);
  alma_status st = ALMA_OK;
  int stop = atomic_load(&r.stop);
  if (stop == 2) {
    snprintf(err, errn, "%s", r.err);
    st = alma__errorf(ALMA_ERR_RUNTIME, "%s", err);
  } else {
    /* Completed queries are those with a completion time; a stopped run leaves gaps. */
    int64_t k = 0;
    double last = 0;
    for (int64_t q = 0; q < n && q < atomic_load(&r.next); q++) {
      if (!(r.done[q] > 0)) continue;
      if (r.done[q] > last) last = r.done[q];
      r.lat[k] = r.lat[q];
      r.svc[k] = r.svc[q];
      k++;
    }
    /* Workers stopped early may have left queries taken but not run: count what completed. */
    out->queries = n;
    out->completed = k;
    out->over_bound = 0;
    for (int64_t i = 0; i < k; i++) out->over_bound += r.lat[i] > p->bound_ms;
    out->scheduled_qps = (double)n / span;
    out->duration_s = fmax(last, span);
    out->achieved_qps = (double)k / out->duration_s;
    alma__latency_stats(r.svc, k, &out->service);
    alma__latency_stats(r.lat, k, &out->latency);
    qsort(r.lat, (size_t)k, sizeof *r.lat, cmp_double);
    out->percentile_ms = k ? alma__percentile_sorted(r.lat, k, p->percentile / 100.0) : NAN;
    out->early_stopped = stop == 1;
    char why[400] = "";
    if (stop == 1)
      snprintf(why, sizeof why,
               "stopped early: %lld of %lld queries over the %g ms bound, more than the %lld that p%g allows",
               (long long)out->over_bound, (long long)n, p->bound_ms, (long long)r.allowed, p->percentile);
    else if (stop == 3)
      snprintf(why, sizeof why, "stopped by max_time_s (%g s) after %lld of %lld queries", p->max_time_s, (long long)k,
               (long long)n);
    else if (!(out->percentile_ms <= p->bound_ms))
      snprintf(why, sizeof why, "p%g latency %.4g ms over the %g ms bound", p->percentile, out->percentile_ms,
               p->bound_ms);
    else if (span < p->min_duration_s)
      snprintf(why, sizeof why, "the schedule spans %.3g s, under the minimum duration %g s", span, p->min_duration_s);
    else if (k < p->min_queries)
      snprintf(why, sizeof why, "%lld queries, under the minimum %lld", (long long)k, (long long)p->min_queries);
    out->valid = !why[0];
    free((char *)out->reason);
    out->reason = why[0] ? alma__strdup(why) : NULL;
  }
  free(arr);
  free(r.lat);
  free(r.svc);
  free(r.done);
  return st;
}

/* ---- the scenario on sessions ------------------------------------------------------------- */
typedef struct {
  const alma__scaling_job *job;
  alma_session **s;
  alma_tensor *in, *out;      /* per worker: job->n_inputs and job->n_outputs tensors */
} serve_ctx;

static alma_status serve_batch(void *user, int worker, int64_t q, double *t_start, double *t_done, char *err,
                               size_t errn) {
  serve_ctx *c = user;
  const alma__scaling_job *j = c->job;
  const char *what;
  alma_status st = alma__scaling_batch(j, c->s[worker], q, c->in + (size_t)worker * (size_t)(j->n_inputs + 1),
                                       c->out + (size_t)worker * (size_t)(j->n_outputs + 1), t_start, t_done, &what);
  if (st != ALMA_OK)
    snprintf(err, errn, "%s: %s", what, alma_last_error()[0] ? alma_last_error() : alma_status_str(st));
  return st;
}

alma_server_run *alma__server_add_run(alma_server_result *s) {
  alma_server_run *nr = realloc((void *)s->runs, (size_t)(s->n_runs + 1) * sizeof *nr);
  if (!nr) return NULL;
  s->runs = nr;
  alma_server_run *r = &nr[s->n_runs++];
  memset(r, 0, sizeof *r);
  r->target_qps = r->scheduled_qps = r->achieved_qps = r->duration_s = r->percentile_ms = NAN;
  alma__latency_stats(NULL, 0, &r->latency);
  alma__latency_stats(NULL, 0, &r->service);
  return r;
}

void alma__server_result_clear(alma_server_result *s) {
  for (int i = 0; i < s->n_runs; i++) free((char *)s->runs[i].reason);
  free((void *)s->runs);
  free((char *)s->error);
  memset(s, 0, sizeof *s);
  s->best = -1;
}

/* The search: a VALID rate below and an INVALID one above, by doubling or halving from the
 * estimate, then bisection until they are within SEARCH_TOL of each other. */
#define SEARCH_TOL 0.02
#define SEARCH_MAX_RUNS 30
#define SEARCH_MAX_HALVINGS 12
#define SEARCH_MIN_UTIL 0.02

alma_status alma__server_scenario(const alma__scaling_job *job, int instances, int workers, double est_ms,
                                  alma_server_result *out) {
  const alma_config *cfg = job->cfg;
  int n = instances * workers;
  alma__server_result_clear(out);
  out->instances = instances;
  out->workers = workers;
  out->threads_per_instance = job->total_threads / instances > 0 ? job->total_threads / instances : 1;
  out->latency_bound_ms = cfg->latency_bound_ms;
  out->percentile = cfg->latency_percentile;
  out->search = !(cfg->target_qps > 0);
  out->min_duration_s = cfg->duration_s > 0 ? cfg->duration_s : cfg->min_time_s;
  int64_t spb = job->samples_per_batch > 0 ? job->samples_per_batch : 1;
  out->min_queries = (cfg->n_samples + spb - 1) / spb;
  char msg[800] = "";
  alma_status st = ALMA_OK;
  serve_ctx c = {job, calloc((size_t)n, sizeof(alma_session *)),
                 calloc((size_t)n * (size_t)(job->n_inputs + 1), sizeof(alma_tensor)),
                 calloc((size_t)n * (size_t)(job->n_outputs + 1), sizeof(alma_tensor))};
  if (!c.s || !c.in || !c.out) {
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    snprintf(msg, sizeof msg, "out of memory");
    goto done;
  }
  for (int i = 0; i < n && st == ALMA_OK; i++) {
    if ((st = alma__scaling_session(job, out->threads_per_instance, i, n, &c.s[i], msg, sizeof msg)) != ALMA_OK) break;
    /* Warm-up on every session: lazy initialization stays out of the runs. */
    int64_t nw = cfg->warmup > 0 ? cfg->warmup : 1;
    double t0, t1;
    char err[600];
    for (int64_t k = 0; k < nw && st == ALMA_OK; k++)
      if ((st = serve_batch(&c, i, k, &t0, &t1, err, sizeof err)) != ALMA_OK)
        snprintf(msg, sizeof msg, "warm-up on session %d: %s", i + 1, err);
  }
  if (st != ALMA_OK) goto done;
  alma__server_plan plan = {.min_duration_s = out->min_duration_s,
                            .min_queries = out->min_queries,
                            .max_time_s = cfg->max_time_s > 0 ? fmax(cfg->max_time_s, out->min_duration_s) : 0,
                            .bound_ms = cfg->latency_bound_ms,
                            .percentile = cfg->latency_percentile,
                            .early_stop = out->search,
                            .seed = cfg->seed,
                            .n_workers = n,
                            .serve = serve_batch,
                            .user = &c};
  /* The first guess: half of what n sessions would serve back to back at the single-stream
   * latency, with no more sessions busy than the threads allow. */
  int busy = n;
  int cores = job->total_threads > 0 ? job->total_threads : 1;
  if (busy * out->threads_per_instance > cores) busy = cores / out->threads_per_instance > 0 ? cores / out->threads_per_instance : 1;
  double q = out->search ? (est_ms > 0 && isfinite(est_ms) ? 0.5 * 1e3 * busy / est_ms : 10) : cfg->target_qps;
  double lo = 0, hi = INFINITY;
  int halvings = 0;
  for (int k = 0; k < (out->search ? SEARCH_MAX_RUNS : 1); k++) {
    alma_server_run *run = alma__server_add_run(out);
    if (!run) {
      st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      snprintf(msg, sizeof msg, "out of memory");
      break;
    }
    plan.qps = q;
    char err[700] = "";
    if ((st = alma__server_run(&plan, run, err, sizeof err)) != ALMA_OK) {
      snprintf(msg, sizeof msg, "at %g queries/s: %s", q, err);
      break;
    }
    if (!out->search) {
      out->best = 0;
      break;
    }
    if (run->valid) {
      lo = q;
      out->best = out->n_runs - 1;
    } else {
      hi = q;
    }
    if (lo > 0 && isfinite(hi) && (hi - lo) <= SEARCH_TOL * lo) break;
    /* Nothing meets the bound: after many halvings, or once the sessions were nearly idle (below
     * SEARCH_MIN_UTIL busy): queueing is gone there, and what exceeds the bound is single queries'
     * own latency, which a lower rate does not help. */
    if (lo == 0 && (++halvings > SEARCH_MAX_HALVINGS || q * run->service.mean / 1e3 / busy < SEARCH_MIN_UTIL)) break;
    q = lo == 0 ? q / 2 : !isfinite(hi) ? q * 2 : 0.5 * (lo + hi);
  }
done:
  for (int i = 0; c.s && i < n; i++) alma_session_free(c.s[i]);
  free(c.s);
  free(c.in);
  free(c.out);
  if (st != ALMA_OK) {
    free((char *)out->error);
    out->error = alma__strdup(msg[0] ? msg : alma_status_str(st));
  }
  return st;
}
