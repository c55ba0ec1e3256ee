/* A small fork-join pool for the BLAS runtime. The runtime parallelises its own loops (im2col,
 * GEMM blocks, epilogues) over these threads and calls the library single-threaded inside each,
 * so one set of threads does all the work: two pools (ours and OpenBLAS's, both spinning) would
 * fight over the cores. Workers spin for a short while after a job, since the next native node
 * usually follows within microseconds, then sleep on a condition variable. */
#ifdef ALMA_HAVE_BLAS

#include <pthread.h>
#include <stdatomic.h>

#include "runtimes/blas/internal.h"

#define SPIN_NS 200000 /* 0.2 ms */

struct alma__blas_pool {
  int n; /* threads including the caller */
  pthread_t *th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  atomic_uint gen;       /* bumped once per job */
  atomic_int remaining;  /* workers still in the current job */
  alma__blas_task fn;
  void *arg;
  int nt;
  atomic_int stop;
};

typedef struct worker_arg {
  alma__blas_pool *p;
  int tid;
} worker_arg;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static void *worker(void *wa_) {
  worker_arg wa = *(worker_arg *)wa_;
  free(wa_);
  alma__blas_pool *p = wa.p;
  unsigned seen = 0;
  for (;;) {
    unsigned g = atomic_load_explicit(&p->gen, memory_order_acquire);
    if (g == seen) {
      double t0 = alma__now_s();
      for (int i = 0; (g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen; i++) {
        cpu_relax();
        if ((i & 255) == 255 && (alma__now_s() - t0) * 1e9 > SPIN_NS) break;
      }
    }
    if (g == seen) {
      pthread_mutex_lock(&p->mu);
      while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen && !atomic_load(&p->stop))
        pthread_cond_wait(&p->cv, &p->mu);
      int stop = atomic_load(&p->stop);
      pthread_mutex_unlock(&p->mu);
      if (stop) return NULL;
    }
    seen = g;
    if (atomic_load(&p->stop)) return NULL;
    if (wa.tid < p->nt) p->fn(p->arg, wa.tid, p->nt);
    atomic_fetch_sub_explicit(&p->remaining, 1, memory_order_release);
  }
}

alma__blas_pool *alma__blas_pool_new(int nthreads) {
  alma__blas_pool *p = calloc(1, sizeof *p);
  if (!p) {
    alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    return NULL;
  }
  p->n = nthreads < 1 ? 1 : nthreads;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  atomic_init(&p->gen, 0);
  atomic_init(&p->remaining, 0);
  atomic_init(&p->stop, 0);
  if (p->n > 1) {
    p->th = calloc((size_t)p->n, sizeof *p->th);
    if (!p->th) {
      alma__blas_pool_free(p);
      alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      return NULL;
    }
    for (int i = 1; i < p->n; i++) {
      worker_arg *wa = malloc(sizeof *wa);
      int rc = wa ? (wa->p = p, wa->tid = i, pthread_create(&p->th[i], NULL, worker, wa)) : -1;
      if (rc != 0) {
        free(wa);
        p->n = i; /* the workers started so far are joined by free */
        alma__blas_pool_free(p);
        alma__errorf(ALMA_ERR_UNAVAILABLE, "cannot start thread %d of the BLAS runtime's pool", i);
        return NULL;
      }
    }
  }
  return p;
}

void alma__blas_pool_free(alma__blas_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->stop, 1);
  atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  for (int i = 1; p->th && i < p->n; i++) pthread_join(p->th[i], NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  free(p->th);
  free(p);
}

int alma__blas_pool_size(const alma__blas_pool *p) { return p ? p->n : 1; }

void alma__blas_pool_run(alma__blas_pool *p, alma__blas_task fn, void *arg, int nt) {
  if (!p || p->n == 1 || nt <= 1) {
    fn(arg, 0, 1);
    return;
  }
  if (nt > p->n) nt = p->n;
  p->fn = fn;
  p->arg = arg;
  p->nt = nt;
  atomic_store_explicit(&p->remaining, p->n - 1, memory_order_relaxed);
  pthread_mutex_lock(&p->mu);
  atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  fn(arg, 0, nt);
  while (atomic_load_explicit(&p->remaining, memory_order_acquire) > 0) cpu_relax();
}

#endif /* ALMA_HAVE_BLAS */
