/* The XNNPACK runtime's own parallel loop for the work alma does itself between XNNPACK subgraphs:
 * EAGER's kernels of few-row Gemm/MatMul nodes (the packed kernel's column panels), ONNX Runtime's
 * contrib ops and MatMulNBits (their items). XNNPACK's operators keep pthreadpool, which XNNPACK
 * requires; their runtimes are created with XNN_FLAG_YIELD_WORKERS so pthreadpool's workers sleep
 * after each subgraph instead of spinning beside these threads (xnn_build.c).
 *
 * Why not pthreadpool for this too: pthreadpool_parallelize_* returns only when every worker has
 * checked in, so a worker that is descheduled (another process holds the core) stalls the caller
 * for a scheduler slice after every node, and its workers spin for about a million iterations after
 * each call (measured: 60 % of a GPT-2 decode step's CPU samples in pthreadpool's wait loops). Here,
 * as in the BLAS runtime's pool (src/runtimes/blas/pool.c, the same design): items are claimed from
 * an atomic counter, the caller closes the job once none are left and waits only for workers that
 * entered it; workers spin SPIN_NS for the next job, then sleep on a condition variable. */
#ifdef ALMA_HAVE_XNNPACK

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/core.h"
#include "runtimes/xnnpack/xnn_rt.h"

#define SPIN_NS 50000  /* a worker waits this long for the next job before sleeping */
#define YIELD_NS 20000 /* the caller spins this long for workers still in a job, then yields the core */

struct alma__xrt_pool {
  int n; /* threads including the caller */
  pthread_t *th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  atomic_ullong gen;    /* bumped once per job */
  atomic_ullong closed; /* the last job the caller closed */
  atomic_int active;    /* workers inside a job */
  atomic_llong next;    /* the open job's next item */
  int64_t items;
  alma_exec_item_fn fn;
  void *arg;
  atomic_int stop;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static void drain(alma__xrt_pool *p) {
  for (int64_t i; (i = atomic_fetch_add(&p->next, 1)) < p->items;) p->fn(p->arg, i);
}

static void *worker(void *arg) {
  alma__xrt_pool *p = arg;
  unsigned long long seen = 0;
  for (;;) {
    unsigned long long g = atomic_load(&p->gen);
    if (g == seen) {
      double t0 = alma__now_s();
      for (int i = 0; (g = atomic_load(&p->gen)) == seen; i++) {
        cpu_relax();
        if ((i & 255) == 255 && (alma__now_s() - t0) * 1e9 > SPIN_NS) break;
      }
    }
    if (g == seen) {
      pthread_mutex_lock(&p->mu);
      while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv, &p->mu);
      pthread_mutex_unlock(&p->mu);
    }
    if (atomic_load(&p->stop)) return NULL;
    seen = g;
    /* enter, then check the job is still open: the caller closes before it waits for active to drop
     * to 0, so (sequentially consistent) either it sees us or we see it closed */
    atomic_fetch_add(&p->active, 1);
    if (atomic_load(&p->closed) < g) drain(p);
    atomic_fetch_sub(&p->active, 1);
  }
}

alma__xrt_pool *alma__xrt_pool_new(int nthreads) {
  alma__xrt_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->n = nthreads < 1 ? 1 : nthreads;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  atomic_init(&p->gen, 0);
  atomic_init(&p->closed, 0);
  atomic_init(&p->active, 0);
  atomic_init(&p->next, 0);
  atomic_init(&p->stop, 0);
  if (p->n > 1) {
    p->th = calloc((size_t)p->n, sizeof *p->th);
    if (!p->th) {
      p->n = 1;
      alma__xrt_pool_free(p);
      return NULL;
    }
    for (int i = 1; i < p->n; i++) {
      if (pthread_create(&p->th[i], NULL, worker, p) != 0) {
        p->n = i; /* the workers started so far are joined by free */
        alma__xrt_pool_free(p);
        return NULL;
      }
    }
  }
  return p;
}

void alma__xrt_pool_free(alma__xrt_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->stop, 1);
  atomic_fetch_add(&p->gen, 1);
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  for (int i = 1; p->th && i < p->n; i++) pthread_join(p->th[i], NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  free(p->th);
  free(p);
}

void alma__xrt_pool_parfor(void *pctx, int64_t items, alma_exec_item_fn fn, void *arg) {
  alma__xrt_pool *p = pctx;
  if (items <= 0) return;
  if (!p || p->n == 1 || items == 1) {
    for (int64_t i = 0; i < items; i++) fn(arg, i);
    return;
  }
  p->fn = fn;
  p->arg = arg;
  p->items = items;
  atomic_store(&p->next, 0);
  pthread_mutex_lock(&p->mu);
  unsigned long long g = atomic_fetch_add(&p->gen, 1) + 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  drain(p);
  atomic_store(&p->closed, g);
  /* a worker still in the job may be waiting for a core (the machine is shared): after a short
   * spin, give it ours */
  double t0 = 0;
  for (int i = 0; atomic_load(&p->active) > 0; i++) {
    cpu_relax();
    if ((i & 63) == 63) {
      if (t0 == 0) t0 = alma__now_s();
      else if ((alma__now_s() - t0) * 1e9 > YIELD_NS) sched_yield();
    }
  }
}

#endif /* ALMA_HAVE_XNNPACK */
