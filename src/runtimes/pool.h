/* The runtimes' own fork-join thread pool (pool.c): the BLAS runtime's loops and the XNNPACK
 * runtime's kernels between subgraphs. */
#ifndef ALMA_RUNTIMES_POOL_H
#define ALMA_RUNTIMES_POOL_H

#include <stdatomic.h>
#include <stdint.h>

#include "ops/op.h"

/* A job runs fn(arg, tid, nt) on up to nt threads (tid 0 is the caller, tids are distinct); fn
 * takes its work items with alma__pool_claim, so any number of the nt threads may take part. */
typedef struct alma__pool alma__pool;
typedef void (*alma__pool_task)(void *arg, int tid, int nt);

/* nthreads includes the calling thread; NULL with a message on failure. */
alma__pool *alma__pool_new(int nthreads);
void alma__pool_free(alma__pool *p);
int alma__pool_size(const alma__pool *p);
/* Runs the job on min(nt, pool size) threads and returns when all are done. p may be NULL (serial). */
void alma__pool_run(alma__pool *p, alma__pool_task fn, void *arg, int nt);
/* Takes the next `step` items of `total` from a job's counter: the first index (and *end), or -1
 * when none are left. */
int64_t alma__pool_claim(atomic_llong *next, int64_t step, int64_t total, int64_t *end);
/* alma_exec_parfor (ops/op.h) on the pool (pool: an alma__pool, NULL runs the items in order). */
void alma__pool_parfor(void *pool, int64_t items, alma_exec_item_fn fn, void *arg);

/* Under a finite address-space limit (RLIMIT_AS: --memory-limit), whether `need` more bytes of it
 * are free, tried with a reservation that is released at once: ALMA_OK, or ALMA_ERR_NOMEM naming
 * `what`. For libraries that do not report an allocation failure (OpenBLAS retries a failed mmap
 * for ever, XNNPACK's setup can dereference a failed allocation): checked before calling them. */
alma_status alma__address_space_check(size_t need, const char *what);

#endif
