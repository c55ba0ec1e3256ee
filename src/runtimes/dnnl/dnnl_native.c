/* DNNL runtime: kernels of our own, used where oneDNN 2.6's are measurably slower.
 *
 * 2-D MaxPool / AveragePool on float32 (MaxPool on uint8/int8 too). oneDNN's jit:avx2 pooling runs the MNIST CNN's 2x2 pool
 * (32x64x24x24) in 0.46 ms and ResNet-18's 3x3/2 pool (32x64x112x112) in 14.7 ms on a 2-core
 * AVX2 machine, its plain-NCHW pooling (simple_nchw) 10x slower still; ONNX Runtime takes 0.26
 * and 6.5 ms. A separable pass does better: per output row, the window's input rows are reduced
 * into one row (contiguous, vectorisable, each input row read once from memory), then the
 * window's columns of that row. It works on the layouts oneDNN hands over, channels blocked
 * innermost by B: aBcd8b / aBcd16b (B = 8, 16), NCHW (B = 1) and NHWC (B = C), so the value keeps
 * its layout and no reorder is added.
 *
 * Semantics are EAGER's (src/ops/pool.c): the max keeps the first tap unless a later one is
 * strictly larger (so a NaN counts only as the window's first tap), padding never contributes,
 * an average divides by the kernel size (count_include_pad) or by the taps inside the input.
 *
 * Threads: the work is shared by the OpenMP team oneDNN itself runs on (GOMP_parallel, looked up
 * in the process as the thread count is), so no second set of spinning threads competes for the
 * cores; without an OpenMP runtime the kernel runs on the calling thread. */
#ifdef ALMA_HAVE_DNNL

#include <dlfcn.h>
#include <math.h>

#include "runtimes/dnnl/dnnl_native.h"

/* ---- threads ---------------------------------------------------------------------------------- */
typedef struct par_ctx {
  void (*fn)(void *, int, int);
  void *arg;
} par_ctx;

static int (*omp_tid)(void);
static int (*omp_nt)(void);

static void par_tramp(void *a) {
  par_ctx *c = a;
  c->fn(c->arg, omp_tid(), omp_nt());
}

void alma__dn_parallel(int threads, void (*fn)(void *arg, int tid, int nt), void *arg) {
  static void (*gomp)(void (*)(void *), void *, unsigned, unsigned);
  static int looked;
  if (!looked) {
    void *s = dlsym(RTLD_DEFAULT, "GOMP_parallel"), *t = dlsym(RTLD_DEFAULT, "omp_get_thread_num"),
         *u = dlsym(RTLD_DEFAULT, "omp_get_num_threads");
    if (s && t && u) {
      memcpy(&gomp, &s, sizeof s);
      memcpy(&omp_tid, &t, sizeof t);
      memcpy(&omp_nt, &u, sizeof u);
    }
    looked = 1;
  }
  if (!gomp || threads <= 1) {
    fn(arg, 0, 1);
    return;
  }
  par_ctx c = {fn, arg};
  gomp(par_tramp, &c, (unsigned)threads, 0);
}

/* ---- pooling ---------------------------------------------------------------------------------- */
typedef struct pool_job {
  const dn_pool_geo *g;
  const void *x;
  void *y;
  float *tmp;       /* per thread: one reduced row, W * B elements */
  size_t tmp_stride;
} pool_job;

/* Output row r (r = (n * CB + cb) * OH + oh) of a pooling with accumulation ACC(acc, v) over element
 * type T: the window's rows reduced into tmp, then its columns; FINISH(q, nh, nw) completes each
 * output from the number of window rows and columns inside the input. */
#define DEFINE_POOL_ROW(name, T, ACC, FINISH)                                                           \
  static void name(const dn_pool_geo *g, const T *x, T *y, T *tmp, int64_t r) {                         \
    const int64_t B = g->B, rowlen = g->W * B;                                                          \
    const int64_t plane = r / g->OH, oh = r % g->OH;                                                    \
    const T *xp = x + plane * g->H * rowlen;                                                            \
    T *yp = y + (plane * g->OH + oh) * g->OW * B;                                                       \
    int64_t nh = 0;                                                                                     \
    for (int64_t k = 0; k < g->kh; k++) {                                                               \
      int64_t h = oh * g->sh - g->ph + k * g->dh;                                                       \
      if (h < 0 || h >= g->H) continue;                                                                 \
      const T *row = xp + h * rowlen;                                                                   \
      if (!nh++) memcpy(tmp, row, (size_t)rowlen * sizeof *tmp);                                        \
      else                                                                                              \
        for (int64_t i = 0; i < rowlen; i++) tmp[i] = ACC(tmp[i], row[i]);                              \
    }                                                                                                   \
    for (int64_t ow = 0; ow < g->OW; ow++) {                                                            \
      T *q = yp + ow * B;                                                                               \
      int64_t nw = 0;                                                                                   \
      for (int64_t k = 0; k < g->kw && nh; k++) {                                                       \
        int64_t w = ow * g->sw - g->pw + k * g->dw;                                                     \
        if (w < 0 || w >= g->W) continue;                                                               \
        const T *t = tmp + w * B;                                                                       \
        if (!nw++) memcpy(q, t, (size_t)B * sizeof *q);                                                 \
        else                                                                                            \
          for (int64_t c = 0; c < B; c++) q[c] = ACC(q[c], t[c]);                                       \
      }                                                                                                 \
      FINISH(q, nh, nw);                                                                                \
    }                                                                                                   \
  }

/* Max keeps the first tap unless a later one is larger, as EAGER does (a NaN counts only as a
 * window's first tap); a window wholly in the padding gives 0, as in EAGER. */
#define MAX_ACC(acc, v) ((v) > (acc) ? (v) : (acc))
#define MAX_FINISH(q, nh, nw) \
  if (!(nw)) memset(q, 0, (size_t)B * sizeof *q)
/* Averages divide by the kernel size (cip) or the taps inside the input; an empty window gives 0
 * (cip) or 0/0, as in EAGER. */
#define SUM_ACC(acc, v) ((acc) + (v))
#define AVG_FINISH(q, nh, nw)                                                                  \
  do {                                                                                         \
    float inv = (nw) ? 1.f / (float)(g->cip ? g->kh * g->kw : (nh) * (nw)) : 0.f;            \
    for (int64_t c = 0; c < B; c++) q[c] = (nw) ? q[c] * inv : g->cip ? 0.f : NAN;             \
  } while (0)
DEFINE_POOL_ROW(max_row_f32, float, MAX_ACC, MAX_FINISH)
DEFINE_POOL_ROW(max_row_u8, uint8_t, MAX_ACC, MAX_FINISH)
DEFINE_POOL_ROW(max_row_s8, int8_t, MAX_ACC, MAX_FINISH)
DEFINE_POOL_ROW(avg_row, float, SUM_ACC, AVG_FINISH)

static void pool_worker(void *a, int tid, int nt) {
  pool_job *j = a;
  const dn_pool_geo *g = j->g;
  int64_t rows = g->N * g->CB * g->OH;
  int64_t lo = rows * tid / nt, hi = rows * (tid + 1) / nt;
  void *tmp = j->tmp + (size_t)tid * j->tmp_stride;
  for (int64_t r = lo; r < hi; r++) {
    if (!g->is_max) avg_row(g, j->x, j->y, tmp, r);
    else if (g->dt == DN_POOL_U8) max_row_u8(g, j->x, j->y, tmp, r);
    else if (g->dt == DN_POOL_S8) max_row_s8(g, j->x, j->y, tmp, r);
    else max_row_f32(g, j->x, j->y, tmp, r);
  }
}

size_t alma__dn_pool_scratch(const dn_pool_geo *g, int threads) {
  size_t stride = ((size_t)(g->W * g->B) + 15) & ~(size_t)15; /* 64-byte aligned rows */
  return stride * sizeof(float) * (size_t)(threads > 1 ? threads : 1);
}

void alma__dn_pool(const dn_pool_geo *g, int threads, const void *x, void *y, float *scratch) {
  pool_job j = {g, x, y, scratch, ((size_t)(g->W * g->B) + 15) & ~(size_t)15};
  int64_t rows = g->N * g->CB * g->OH;
  if (threads > rows) threads = (int)rows;
  alma__dn_parallel(threads, pool_worker, &j);
}

#endif
