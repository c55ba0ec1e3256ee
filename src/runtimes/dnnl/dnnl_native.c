/* DNNL runtime: kernels of our own, used where oneDNN 2.6's are measurably slower.
 *
 * 2-D MaxPool / AveragePool on float32. oneDNN's jit:avx2 pooling runs the MNIST CNN's 2x2 pool
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
  const float *x;
  float *y;
  float *tmp;       /* per thread: one reduced row, W * B floats */
  size_t tmp_stride;
} pool_job;

/* Row r of the output (r = (n * CB + cb) * OH + oh). */
static void pool_row(const dn_pool_geo *g, const float *x, float *y, float *tmp, int64_t r) {
  const int64_t B = g->B, rowlen = g->W * B;
  const int64_t plane = r / g->OH, oh = r % g->OH;
  const float *xp = x + plane * g->H * rowlen;
  float *yp = y + (plane * g->OH + oh) * g->OW * B;
  /* rows of the window inside the input */
  int64_t nh = 0, first = 1;
  for (int64_t k = 0; k < g->kh; k++) {
    int64_t h = oh * g->sh - g->ph + k * g->dh;
    if (h < 0 || h >= g->H) continue;
    const float *row = xp + h * rowlen;
    nh++;
    if (first) {
      memcpy(tmp, row, (size_t)rowlen * sizeof *tmp);
      first = 0;
    } else if (g->is_max) {
      for (int64_t i = 0; i < rowlen; i++) tmp[i] = row[i] > tmp[i] ? row[i] : tmp[i];
    } else {
      for (int64_t i = 0; i < rowlen; i++) tmp[i] += row[i];
    }
  }
  for (int64_t ow = 0; ow < g->OW; ow++) {
    float *q = yp + ow * B;
    int64_t nw = 0;
    for (int64_t k = 0; k < g->kw; k++) {
      int64_t w = ow * g->sw - g->pw + k * g->dw;
      if (w < 0 || w >= g->W || !nh) continue;
      const float *t = tmp + w * B;
      if (!nw) {
        memcpy(q, t, (size_t)B * sizeof *q);
      } else if (g->is_max) {
        for (int64_t c = 0; c < B; c++) q[c] = t[c] > q[c] ? t[c] : q[c];
      } else {
        for (int64_t c = 0; c < B; c++) q[c] += t[c];
      }
      nw++;
    }
    if (!nw) { /* a window wholly in the padding: EAGER gives 0 (max) or 0/0 */
      for (int64_t c = 0; c < B; c++) q[c] = g->is_max || g->cip ? 0.f : NAN;
      continue;
    }
    if (!g->is_max) {
      float inv = 1.f / (float)(g->cip ? (int64_t)g->kh * g->kw : nh * nw);
      for (int64_t c = 0; c < B; c++) q[c] *= inv;
    }
  }
}

static void pool_worker(void *a, int tid, int nt) {
  pool_job *j = a;
  const dn_pool_geo *g = j->g;
  int64_t rows = g->N * g->CB * g->OH;
  int64_t lo = rows * tid / nt, hi = rows * (tid + 1) / nt;
  float *tmp = j->tmp + (size_t)tid * j->tmp_stride;
  for (int64_t r = lo; r < hi; r++) pool_row(g, j->x, j->y, tmp, r);
}

size_t alma__dn_pool_scratch(const dn_pool_geo *g, int threads) {
  size_t stride = ((size_t)(g->W * g->B) + 15) & ~(size_t)15; /* 64-byte aligned rows */
  return stride * sizeof(float) * (size_t)(threads > 1 ? threads : 1);
}

void alma__dn_pool(const dn_pool_geo *g, int threads, const float *x, float *y, float *scratch) {
  pool_job j = {g, x, y, scratch, ((size_t)(g->W * g->B) + 15) & ~(size_t)15};
  int64_t rows = g->N * g->CB * g->OH;
  if (threads > rows) threads = (int)rows;
  alma__dn_parallel(threads, pool_worker, &j);
}

#endif
