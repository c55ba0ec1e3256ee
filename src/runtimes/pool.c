/* A small fork-join pool for the runtimes' own loops. The BLAS runtime parallelises im2col, GEMM
 * blocks and epilogues over these threads and calls the library single-threaded inside each, so one
 * set of threads does all the work: two pools (ours and OpenBLAS's, both spinning) would fight over
 * the cores. The XNNPACK runtime runs alma's kernels between its subgraphs (few-row GEMMs, contrib
 * ops, MatMulNBits) on one, rather than on pthreadpool, whose parallelize calls return only when
 * every worker has checked in (a descheduled worker stalls the caller for a scheduler slice after
 * every node) and whose workers spin about a million iterations after each call.
 *
 * Jobs hand out their work items through an atomic counter (alma__pool_claim), so a thread that
 * is descheduled (the machine is shared) leaves its items to the others, and the caller does not
 * wait for a worker that never started: once the caller has run out of items it closes the job,
 * and a worker that wakes later sees it closed and leaves it alone. The caller then waits only
 * for workers inside the job. Workers spin for a short while after a job, since the next native
 * node usually follows within microseconds, then sleep on a condition variable. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "runtimes/pool.h"

#define SPIN_NS 50000  /* a worker waits this long for the next job before sleeping */
#define YIELD_NS 20000 /* the caller spins this long for workers to finish, then yields the core */

struct alma__pool {
  int n; /* threads including the caller */
  pthread_t *th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  atomic_ullong gen;     /* bumped once per job */
  atomic_ullong closed;  /* the last job the caller closed */
  atomic_int active;     /* workers inside a job */
  alma__pool_task fn;    /* the open job (valid while gen > closed) */
  void *arg;
  int nt;
  atomic_int stop;
};

typedef struct worker_arg {
  alma__pool *p;
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
  alma__pool *p = wa.p;
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
    /* enter, then check the job is still open: the caller closes before it waits for active to
     * drop to 0, so (sequentially consistent) either it sees us or we see it closed */
    atomic_fetch_add(&p->active, 1);
    if (atomic_load(&p->closed) < g && wa.tid < p->nt) p->fn(p->arg, wa.tid, p->nt);
    atomic_fetch_sub(&p->active, 1);
  }
}

alma__pool *alma__pool_new(int nthreads) {
  alma__pool *p = calloc(1, sizeof *p);
  if (!p) {
    alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    return NULL;
  }
  p->n = nthreads < 1 ? 1 : nthreads;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  atomic_init(&p->gen, 0);
  atomic_init(&p->closed, 0);
  atomic_init(&p->active, 0);
  atomic_init(&p->stop, 0);
  if (p->n > 1) {
    p->th = calloc((size_t)p->n, sizeof *p->th);
    if (!p->th) {
      alma__pool_free(p);
      alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      return NULL;
    }
    for (int i = 1; i < p->n; i++) {
      worker_arg *wa = malloc(sizeof *wa);
      int rc = wa ? (wa->p = p, wa->tid = i, pthread_create(&p->th[i], NULL, worker, wa)) : -1;
      if (rc != 0) {
        free(wa);
        p->n = i; /* the workers started so far are joined by free */
        alma__pool_free(p);
        /* EAGAIN: no memory for its stack (a memory limit) or the thread limit reached: a
         * resource ran out, which is no property of the machine's runtimes ("unavailable"). */
        if (rc == EAGAIN || rc == ENOMEM)
          alma__errorf(ALMA_ERR_NOMEM, "out of memory: cannot start thread %d of a runtime's thread pool (%s)", i,
                       strerror(rc));
        else
          alma__errorf(ALMA_ERR_RUNTIME, "cannot start thread %d of a runtime's thread pool: %s", i,
                       rc > 0 ? strerror(rc) : "out of memory");
        return NULL;
      }
    }
  }
  return p;
}

void alma__pool_free(alma__pool *p) {
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

int alma__pool_size(const alma__pool *p) { return p ? p->n : 1; }

void alma__pool_run(alma__pool *p, alma__pool_task fn, void *arg, int nt) {
  if (!p || p->n == 1 || nt <= 1) {
    fn(arg, 0, 1);
    return;
  }
  if (nt > p->n) nt = p->n;
  p->fn = fn;
  p->arg = arg;
  p->nt = nt;
  pthread_mutex_lock(&p->mu);
  unsigned long long g = atomic_fetch_add(&p->gen, 1) + 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  fn(arg, 0, nt);
  atomic_store(&p->closed, g);
  /* a worker still in the job may be waiting for a core (the machine is shared, or this is its
   * SMT sibling): after a short spin, give it ours */
  double t0 = 0;
  for (int i = 0; atomic_load(&p->active) > 0; i++) {
    cpu_relax();
    if ((i & 63) == 63) {
      if (t0 == 0) t0 = alma__now_s();
      else if ((alma__now_s() - t0) * 1e9 > YIELD_NS) sched_yield();
    }
  }
}

int64_t alma__pool_claim(atomic_llong *next, int64_t step, int64_t total, int64_t *end) {
  int64_t s = atomic_fetch_add(next, step);
  if (s >= total) return -1;
  *end = s + step < total ? s + step : total;
  return s;
}

/* alma__pool_parfor: every thread drains the items from one counter */
typedef struct parfor_job {
  atomic_llong next;
  int64_t items;
  alma_exec_item_fn fn;
  void *arg;
} parfor_job;

static void parfor_task(void *arg, int tid, int nt) {
  (void)tid, (void)nt;
  parfor_job *j = arg;
  for (int64_t i; (i = atomic_fetch_add(&j->next, 1)) < j->items;) j->fn(j->arg, i);
}

void alma__pool_parfor(void *pool, int64_t items, alma_exec_item_fn fn, void *arg) {
  alma__pool *p = pool;
  if (items <= 0) return;
  if (!p || p->n == 1 || items == 1) {
    for (int64_t i = 0; i < items; i++) fn(arg, i);
    return;
  }
  parfor_job j = {.items = items, .fn = fn, .arg = arg};
  atomic_init(&j.next, 0);
  alma__pool_run(p, parfor_task, &j, p->n);
}

alma_status alma__address_space_check(size_t need, const char *what) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return ALMA_OK;
  void *p = mmap(NULL, need, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p != MAP_FAILED) {
    munmap(p, need);
    return ALMA_OK;
  }
  return alma__errorf(ALMA_ERR_NOMEM, "out of memory: %s needs %zu MiB of address space, more than the memory limit (%llu MiB) leaves",
                      what, need >> 20, (unsigned long long)(rl.rlim_cur >> 20));
}
