/* Throughput mode (NeuronPerf's data-parallel matrix): `instances` model copies, each fed by
 * `workers` threads, all busy at once. Every worker has its own session: a session is not
 * promised reentrant (runtimes keep per-plan buffers), so two threads never run one session;
 * sessions of one model share its weights (graph clones share initializers). An instance is the
 * unit of the intra-op thread budget: each of its sessions gets threads / instances threads.
 * Workers fetch no data while timed: they cycle through a ring of batches prepared beforehand. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "bench/bench.h"

#define MAX_KEPT 1000000   /* latencies kept over all workers, as the latency mode */

typedef struct {
  atomic_int ready;        /* workers done warming up */
  atomic_int go;           /* the timed window is open */
  atomic_int stop;
  atomic_llong samples;
  double t0;
} shared_t;

typedef struct {
  const alma__scaling_job *job;
  shared_t *sh;
  alma_session *s;
  int index, n_workers;
  int64_t cap;
  double *lat, *done;      /* latency ms, completion time s (absolute, monotonic) */
  int64_t n;
  int64_t skipped;         /* completions beyond cap (counted, not kept) */
  alma_status st;
  char err[600];
} worker_t;

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

static int ws_fail(worker_t *w, alma_status st, const char *what) {
  w->st = st;
  snprintf(w->err, sizeof w->err, "worker %d: %s: %s", w->index, what, alma_last_error()[0] ? alma_last_error() : alma_status_str(st));
  atomic_store(&w->sh->stop, 1);
  return -1;
}

alma_status alma__scaling_batch(const alma__scaling_job *j, alma_session *s, int64_t k, alma_tensor *in, alma_tensor *out,
                                double *t_start, double *t_done, const char **what) {
  const alma_tensor *batch = &j->batches[(k % j->n_batches) * j->n_inputs];
  /* Views of the ring (which owns the data): only what the hook allocates is freed here. */
  for (int i = 0; i < j->n_inputs; i++) in[i] = alma__tensor_view(&batch[i]);
  alma_status st = ALMA_OK;
  *what = "preprocess hook";
  if (j->cfg->preprocess) st = j->cfg->preprocess(j->cfg->hook_user, batch, in, j->n_inputs);
  if (st == ALMA_OK) {
    *what = "alma_session_run";
    *t_start = alma__bench_now();
    st = alma_session_run(s, in, j->n_inputs, out, j->n_outputs);
    *t_done = alma__bench_now();
  }
  if (st == ALMA_OK && j->cfg->postprocess) {
    *what = "postprocess hook";
    st = j->cfg->postprocess(j->cfg->hook_user, out, j->n_outputs);
  }
  for (int i = 0; i < j->n_outputs; i++) alma_tensor_free_data(&out[i]);
  for (int i = 0; i < j->n_inputs; i++)
    if (in[i].owns_data && in[i].data != batch[i].data) alma_tensor_free_data(&in[i]);
  return st;
}

/* One batch of worker w. Returns the latency in ms, or -1 on error. */
static double one_batch(worker_t *w, int64_t k, alma_tensor *in, alma_tensor *out, double *t_done) {
  double t0 = 0;
  const char *what;
  alma_status st = alma__scaling_batch(w->job, w->s, k, in, out, &t0, t_done, &what);
  if (st != ALMA_OK) {
    ws_fail(w, st, what);
    return -1;
  }
  return 1e3 * (*t_done - t0);
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  const alma__scaling_job *j = w->job;
  alma_tensor *in = calloc((size_t)j->n_inputs + 1, sizeof *in), *out = calloc((size_t)j->n_outputs + 1, sizeof *out);
  int64_t k = w->index;
  double t;
  if (!in || !out) ws_fail(w, alma__errorf(ALMA_ERR_NOMEM, "out of memory"), "buffers");
  /* Warm-up before the common start: lazy initialization stays out of the window. */
  int64_t nw = j->cfg->warmup > 0 ? j->cfg->warmup : 1;
  for (int64_t i = 0; i < nw && w->st == ALMA_OK && !atomic_load(&w->sh->stop); i++, k += w->n_workers)
    one_batch(w, k, in, out, &t);
  atomic_fetch_add(&w->sh->ready, 1);
  while (!atomic_load(&w->sh->go) && !atomic_load(&w->sh->stop)) sleep_s(0.0001);
  while (w->st == ALMA_OK && !atomic_load(&w->sh->stop)) {
    double ms = one_batch(w, k, in, out, &t);
    k += w->n_workers;
    if (ms < 0) break;
    if (w->n < w->cap) {
      w->lat[w->n] = ms;
      w->done[w->n++] = t;
    } else {
      w->skipped++;
    }
    atomic_fetch_add(&w->sh->samples, (long long)j->samples_per_batch);
  }
  free(in);
  free(out);
  return NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double alma__peak_rate(const double *t, int64_t n, double window, int64_t samples_per) {
  if (n <= 0 || !(window > 0)) return NAN;
  int64_t best = 0, j = 0;
  for (int64_t i = 0; i < n; i++) {
    while (t[j] <= t[i] - window) j++;
    if (i - j + 1 > best) best = i - j + 1;
  }
  return (double)best * (double)samples_per / window;
}

alma_status alma__scaling_session(const alma__scaling_job *job, int threads_per_instance, int i, int n, alma_session **s,
                                  char *msg, size_t msg_size) {
  alma_session_options so;
  alma_session_options_init(&so);
  so.threads = threads_per_instance;
  so.runtime_options = job->cfg->runtime_options;
  alma_status st = alma_session_create(job->model, job->conversion, &so, s);
  if (st != ALMA_OK) snprintf(msg, msg_size, "creating session %d of %d: %s", i + 1, n, alma_last_error());
  return st;
}

alma_status alma__scaling_run(const alma__scaling_job *job, int instances, int workers, alma_scaling_point *out) {
  const alma_config *cfg = job->cfg;
  int n = instances * workers;
  out->instances = instances;
  out->workers = workers;
  out->threads_per_instance = job->total_threads / instances > 0 ? job->total_threads / instances : 1;
  out->concurrent = n > 1;
  alma_status st = ALMA_OK;
  char msg[800] = "";
  worker_t *w = calloc((size_t)n, sizeof *w);
  pthread_t *tid = calloc((size_t)n, sizeof *tid);
  shared_t sh;
  memset(&sh, 0, sizeof sh);
  int started = 0;
  if (!w || !tid) {
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    snprintf(msg, sizeof msg, "out of memory");
    goto done;
  }
  int64_t cap = MAX_KEPT / n;
  for (int i = 0; i < n; i++) {
    w[i].job = job;
    w[i].sh = &sh;
    w[i].index = i;
    w[i].n_workers = n;
    w[i].cap = cap;
    w[i].lat = malloc((size_t)cap * sizeof(double));
    w[i].done = malloc((size_t)cap * sizeof(double));
    if (!w[i].lat || !w[i].done) {
      st = alma__errorf(ALMA_ERR_NOMEM, "out of memory for %lld latencies", (long long)cap);
      snprintf(msg, sizeof msg, "%s", alma_last_error());
      goto done;
    }
    if ((st = alma__scaling_session(job, out->threads_per_instance, i, n, &w[i].s, msg, sizeof msg)) != ALMA_OK) goto done;
  }
  int prc = 0;
  for (; started < n; started++)
    if ((prc = pthread_create(&tid[started], NULL, worker_main, &w[started])) != 0) break;
  if (started < n) {
    atomic_store(&sh.stop, 1);
    st = alma__errorf(prc == EAGAIN ? ALMA_ERR_NOMEM : ALMA_ERR_RUNTIME, "%scould not start worker thread %d of %d: %s",
                      prc == EAGAIN ? "out of memory: " : "", started + 1, n, strerror(prc));
    snprintf(msg, sizeof msg, "%s", alma_last_error());
  }
  /* Every worker warm, then one common start. */
  while (started == n && atomic_load(&sh.ready) < n && !atomic_load(&sh.stop)) sleep_s(0.0002);
  sh.t0 = alma__bench_now();
  atomic_store(&sh.go, 1);
  double dur = cfg->duration_s > 0 ? cfg->duration_s : cfg->min_time_s;
  double cap_s = cfg->max_time_s > 0 ? fmax(cfg->max_time_s, dur) : 0;
  const char *why = NULL;
  char whybuf[200];
  while (started == n) {
    double el = alma__bench_now() - sh.t0;
    long long got = atomic_load(&sh.samples);
    if (atomic_load(&sh.stop)) break;  /* a worker failed */
    if (el >= dur && got >= cfg->n_samples) {
      snprintf(whybuf, sizeof whybuf, "reached %s (%g s) and n_samples (%lld)", cfg->duration_s > 0 ? "duration_s" : "min_time_s",
               dur, (long long)cfg->n_samples);
      why = whybuf;
      break;
    }
    if (cap_s > 0 && el >= cap_s) {
      snprintf(whybuf, sizeof whybuf, "stopped by max_time_s (%g s) after %lld of %lld samples", cap_s, got,
               (long long)cfg->n_samples);
      why = whybuf;
      break;
    }
    double left = dur - el;
    sleep_s(left > 0.004 ? fmin(left, 0.002) : 0.0005);
  }
  double t_stop = alma__bench_now();
  atomic_store(&sh.stop, 1);
  for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
  for (int i = 0; i < n && st == ALMA_OK; i++)
    if (w[i].st != ALMA_OK) {
      st = w[i].st;
      snprintf(msg, sizeof msg, "%s", w[i].err);
    }
  if (st == ALMA_OK) {
    int64_t total = 0, skipped = 0;
    for (int i = 0; i < n; i++) total += w[i].n, skipped += w[i].skipped;
    double *lat = malloc((size_t)(total ? total : 1) * sizeof *lat), *done = malloc((size_t)(total ? total : 1) * sizeof *done);
    if (!lat || !done) {
      st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      snprintf(msg, sizeof msg, "out of memory merging latencies");
    } else {
      int64_t k = 0;
      /* The window ends at the stop signal or at the last completion after it: a worker preempted
       * after its last batch leaves the machine idle, and that time is the run's too. */
      double last = started == n ? t_stop : sh.t0;
      for (int i = 0; i < n; i++)
        for (int64_t m = 0; m < w[i].n; m++) {
          lat[k] = w[i].lat[m];
          done[k] = w[i].done[m] - sh.t0;
          if (w[i].done[m] > last) last = w[i].done[m];
          k++;
        }
      qsort(done, (size_t)total, sizeof *done, cmp_double);
      out->inferences = total + skipped;
      out->samples = out->inferences * job->samples_per_batch;
      out->duration_s = last - sh.t0;
      out->throughput_avg = out->duration_s > 0 ? (double)out->samples / out->duration_s : NAN;
      /* Skipped completions (past the cap) are not in `done`: the peak then undercounts; the cap
       * is a million batches, reached only by microsecond models over long runs. */
      out->throughput_peak = alma__peak_rate(done, total, fmin(1.0, out->duration_s), job->samples_per_batch);
      alma__latency_stats(lat, total, &out->latency);
      out->stop_reason = alma__strdup(why ? why : "stopped");
    }
    free(lat);
    free(done);
  }
done:
  for (int i = 0; w && i < n; i++) {
    alma_session_free(w[i].s);
    free(w[i].lat);
    free(w[i].done);
  }
  free(w);
  free(tid);
  if (st != ALMA_OK) {
    free((char *)out->error);
    out->error = alma__strdup(msg[0] ? msg : alma_status_str(st));
  }
  return st;
}
