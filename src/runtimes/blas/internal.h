/* BLAS runtime internals: the loaded CBLAS library (vendor.c), alma's thread pool (pool.c) and the
 * float32 kernels with their fused epilogues (kernels.c). Only compiled with ALMA_HAVE_BLAS. */
#ifndef ALMA_RUNTIMES_BLAS_INTERNAL_H
#define ALMA_RUNTIMES_BLAS_INTERNAL_H

#include <stdatomic.h>

#include "core/core.h"
#include "ops/fused.h"
#include "runtimes/blas/blas.h"
#include "runtimes/pool.h"

/* Loops that vectorise get an AVX2+FMA clone beside the baseline one, picked at load time, so the
 * library needs no -march flags. clang < 15 cannot call such clones across files; elsewhere than
 * x86-64, or with ALMA_NO_MULTIVERSION (ThreadSanitizer builds: ifunc resolvers run before its
 * runtime), there is one version. */
#if defined(__x86_64__) && defined(__has_attribute) && !(defined(__clang__) && __clang_major__ < 15) && \
    !defined(ALMA_NO_MULTIVERSION)
#if __has_attribute(target_clones)
#define ALMA__BLAS_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
#endif
#ifndef ALMA__BLAS_CLONES
#define ALMA__BLAS_CLONES
#endif

/* ---- the library ------------------------------------------------------------------------------ */

typedef struct alma__blas_info {
  const char *vendor;     /* "OpenBLAS" or "BLIS" */
  char library[256];      /* the shared object loaded (dlopen name or path) */
  char config[256];       /* openblas_get_config() or "BLIS 0.9.0" */
  char core[64];          /* kernel set in use: openblas_get_corename() / bli_arch_string() */
  char choice[256];       /* how that kernel set was chosen */
  const char *threading;  /* the library's own threading: "pthreads", "OpenMP", "sequential" */
} alma__blas_info;

/* Loads the library once (thread-safe). Before loading OpenBLAS it picks the kernel set for this
 * CPU (see vendor.c). ALMA_ERR_UNAVAILABLE with the reason if it cannot be loaded. */
alma_status alma__blas_load(void);
/* NULL until alma__blas_load succeeded. */
const alma__blas_info *alma__blas_info_get(void);
/* Row-major C[m,n] = alpha * op(A) * op(B) + beta * C through cblas_sgemm. Sizes must fit in int
 * (callers check) and be >= 1 except k, which may be 0 (then C = beta * C). */
void alma__blas_sgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                      int ldb, float beta, float *c, int ldc);
/* Row-major y = alpha * op(A) * x + beta * y through cblas_sgemv; A is m x n as stored. */
void alma__blas_sgemv(int trans, int m, int n, float alpha, const float *a, int lda, const float *x, int incx,
                      float beta, float *y, int incy);
/* Whether a call above was skipped since the last time this was asked (and clears it): the memory
 * limit left no room for the library's buffers, which it would retry mapping for ever. Results of
 * the run are then garbage and it must fail as out of memory. */
int alma__blas_take_no_room(void);
/* The library's own thread count (process-wide). */
void alma__blas_set_threads(int n);

/* ---- thread pool ------------------------------------------------------------------------------- */

/* runtimes/pool.h: the runtimes' fork-join pool (alma__pool_run, alma__pool_claim) */

/* ---- activation buffers (mem.c) ---------------------------------------------------------------- */

/* One plan's buffers for the values of its runs: an arena laid out from a recorded run, kept across
 * runs, so that steady-state runs map and fault nothing (see mem.c). Only the thread calling run()
 * uses it. */
typedef struct alma__blas_mem_rec {
  size_t size;   /* bytes, a multiple of 64 */
  int64_t t0, t1; /* events at which it was taken and given back (-1: not yet) */
  void *ptr;
  int in_arena;
} alma__blas_mem_rec;

typedef struct alma__blas_mem {
  /* the layout: the recorded events (a request's size, or -(k+1) for request k given back), the
   * offset of each request, and the arena */
  int64_t *plan_ev;
  int n_plan_ev, plan_ev_cap;
  size_t *plan_off;
  unsigned char *arena;
  size_t arena_size;
  int has_plan;
  /* the current run */
  alma__blas_mem_rec *rec;
  int n_rec, rec_cap;
  int64_t *ev;
  int n_ev, ev_cap;
  int *live; /* requests not given back */
  int n_live, live_cap;
  int at;        /* events of the layout followed so far */
  int following; /* every event so far was the layout's */
  size_t live_bytes;
  /* statistics */
  size_t peak;        /* most bytes requested and not given back at once, in the current (or last) run */
  size_t planned;     /* the layout's arena size, and the peak of the run it was made from */
  size_t plan_peak;
  long allocs;        /* allocations since the plan was compiled: outside the arena, and the arena */
  long run_allocs;    /* of those, in the current (or last) run: 0 in a steady state */
  long layouts;       /* layouts made */
  long runs;
  long outputs;       /* graph outputs allocated for the caller (outside the arena, every run) */
  long output_copies; /* graph outputs copied out of the arena (the caller must not get it) */
} alma__blas_mem;

/* A buffer of at least `bytes` (64-byte aligned, contents undefined); NULL when out of memory. */
void *alma__blas_mem_get(alma__blas_mem *m, size_t bytes);
/* Gives ptr back: 1 if it is one of m's (taken and not given back), 0 otherwise (the caller frees
 * it). */
int alma__blas_mem_put(alma__blas_mem *m, void *ptr);
/* The size of m's buffer at ptr (taken and not given back), 0 if ptr is not one. */
size_t alma__blas_mem_size(const alma__blas_mem *m, const void *ptr);
/* Around each run: begin starts following the layout; end (ok: the run succeeded and gave every
 * buffer back) makes a new layout from the run when it did not follow the last one to its end. */
void alma__blas_mem_begin(alma__blas_mem *m);
void alma__blas_mem_end(alma__blas_mem *m, int ok);
void alma__blas_mem_free(alma__blas_mem *m);
/* The buffers of a BLAS plan (from alma__runtime_blas.compile), for tests and the plan text. */
const alma__blas_mem *alma__blas_plan_mem(const void *plan);

/* ---- kernels ----------------------------------------------------------------------------------- */

/* OTHER: any other activation of the FUSE pass's fused nodes, applied by alma__fused_act_f32. */
enum { ALMA__BLAS_ACT_NONE, ALMA__BLAS_ACT_RELU, ALMA__BLAS_ACT_CLIP, ALMA__BLAS_ACT_LEAKY,
       ALMA__BLAS_ACT_SIGMOID, ALMA__BLAS_ACT_TANH, ALMA__BLAS_ACT_OTHER };

typedef struct alma__blas_act {
  int kind;
  float lo, hi;         /* Clip bounds */
  float alpha;          /* LeakyRelu slope */
  alma_fused_act other; /* ALMA__BLAS_ACT_OTHER */
} alma__blas_act;

/* Per-thread scratch, grown on demand by the thread that owns it. */
typedef struct alma__blas_scratch {
  float *p;
  size_t cap; /* floats */
} alma__blas_scratch;

/* What runs a kernel: the pool (NULL = serial), its size, and one scratch per thread. */
typedef struct alma__blas_ctx {
  alma__pool *pool;
  int threads;
  alma__blas_scratch *scratch; /* [threads] */
} alma__blas_ctx;

/* Everything after the GEMM, applied while the result is in cache:
 *   y = act(acc + row_bias[row] + col_bias[col] + res)
 * row_bias is per output channel (Conv) or per row (Gemm's C of shape [M,1] or scalar); col_bias is
 * per column (Gemm's C of shape [N], a fused bias Add); res has the output's shape (fused residual
 * Add). res may be the output buffer itself (the residual's buffer taken over): then the GEMM
 * accumulates onto it (beta = 1) and res is not read again. */
typedef struct alma__blas_epi {
  const float *row_bias;
  const float *col_bias;
  const float *res;
  alma__blas_act act;
} alma__blas_epi;

/* Convolution geometry for float32 NCHW (any number of spatial dims), with its work split. */
typedef struct alma__blas_conv {
  int nsp;
  int64_t N, C, M, G, Cg, Mg, K, kprod, insp, outsp;
  int64_t in[ALMA_MAX_RANK], out[ALMA_MAX_RANK], k[ALMA_MAX_RANK], s[ALMA_MAX_RANK], d[ALMA_MAX_RANK],
      pb[ALMA_MAX_RANK];
  int pointwise;  /* 1x1, stride 1, no pads: the input planes already are the GEMM's B */
  int depthwise;  /* 2-D, one input channel per group: direct loop instead of a 1-row GEMM */
  /* work items: (group, column chunk, row block) */
  int whole_images;   /* chunks are runs of whole images (small planes) or pieces of one image */
  int64_t chunk;      /* columns per chunk (pieces) or images per chunk (whole images) */
  int64_t chunks_per_group;
  int64_t mblocks;    /* row blocks per chunk: > 1 when there are too few chunks for the threads */
  int64_t items;
} alma__blas_conv;

/* Fills the work split of cv (geometry already set) for `threads` threads; chunk_kb and min_cols
 * are the blas.chunk_kb and blas.min_cols options. */
void alma__blas_conv_plan(alma__blas_conv *cv, int threads, int64_t chunk_kb, int64_t min_cols);
/* y [N, M, out...] = conv(x, w) with the epilogue (row_bias per output channel). */
alma_status alma__blas_conv_run(const alma__blas_ctx *ctx, const alma__blas_conv *cv, const float *x,
                                const float *w, float *y, const alma__blas_epi *epi);

/* Row-major GEMM on a whole matrix with its epilogue, split over threads by rows or columns:
 * y[M,N] = alpha * op(A) * op(B) (+ y when y holds a prefilled addend: accumulate = 1). */
typedef struct alma__blas_gemm {
  int ta, tb;
  int64_t M, N, K, lda, ldb;
  float alpha;
  int accumulate;
  /* op(B) packed (a constant weight, few rows: ops/gemm_packed.h) or NULL; then A is not
   * transposed and the threads split the columns by panels */
  const struct alma__sgemm_packed *pk;
} alma__blas_gemm;
alma_status alma__blas_gemm_run(const alma__blas_ctx *ctx, const alma__blas_gemm *g, const float *a, const float *b,
                                float *y, const alma__blas_epi *epi);

/* Batched MatMul: batch products of [M,K] x [K,N]; a_off/b_off give each product's operand
 * offsets in elements. Split over threads by batch entries (or inside each when batch < threads). */
alma_status alma__blas_matmul_run(const alma__blas_ctx *ctx, int64_t batch, int64_t M, int64_t N, int64_t K,
                                  const float *a, const int64_t *a_off, const float *b, const int64_t *b_off,
                                  float *y, const alma__blas_epi *epi);

/* alma.Attention, softmax(scale * Q Kᵀ + mask) V, as two GEMMs per block of query rows with the
 * scaled scores, mask, softmax and normalisation applied between them while the block's scores
 * are in cache. Batch entry b (of the output's batch dims) reads Q [Sq,D] at q + q_off[b], K
 * [Sk,D] (or [D,Sk] when kt) at k + k_off[b], V [Sk,Dv] at v + v_off[b], and mask row i at
 * mask + m_off[b] + i * m_row, its element j at j * m_col (m_row, m_col 0 where it broadcasts); it
 * writes y + b * Sq * Dv. Work items: (batch entry, block of `rows` query rows). */
typedef struct alma__blas_attn {
  int64_t batch, Sq, Sk, D, Dv;
  int kt;
  float scale;
  const float *q, *k, *v, *mask;
  const int64_t *q_off, *k_off, *v_off, *m_off;
  int64_t m_row, m_col;
  int zero_masked; /* a query whose mask row is -inf throughout outputs zeros (ONNX Attention), not NaN */
  int causal;       /* query i sees keys j <= i + coff only: later key columns are never computed */
  int64_t coff;
  int64_t rows, blocks; /* set by alma__blas_attn_plan */
} alma__blas_attn;

/* Chooses the row blocks of a (geometry set) for `threads` threads. */
void alma__blas_attn_plan(alma__blas_attn *a, int threads);
/* Runs it (planned); ALMA_ERR_NOMEM if scratch cannot be had. Sizes must fit in int (callers
 * check). */
alma_status alma__blas_attn_run(const alma__blas_ctx *ctx, const alma__blas_attn *a, float *y);

#endif
