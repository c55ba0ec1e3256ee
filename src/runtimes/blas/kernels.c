/* float32 kernels of the BLAS runtime: convolution as im2col + SGEMM in column chunks, depthwise
 * convolution as a direct loop, Gemm and batched MatMul, each with its epilogue (bias, residual,
 * activation) applied to a block while it is still in cache.
 *
 * Parallelism is ours (pool.c): work is cut into items (conv: group x column chunk x row block;
 * GEMM: row or column blocks; MatMul: batch entries), each thread takes a contiguous run of items
 * and calls the library single-threaded. A conv chunk is im2col'ed by the thread that multiplies
 * it, into its own scratch, so the column block goes from im2col to SGEMM through the cache and the
 * im2col itself runs in parallel. Layout stays NCHW / row-major throughout: no reorders. */
#ifdef ALMA_HAVE_BLAS

#include <limits.h>
#include <math.h>
#include <stdatomic.h>

#include "ops/sgemm.h"
#include "ops/softmax_row.h"
#include "runtimes/blas/internal.h"

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); } /* floor, b > 0 */
static int64_t ceil_divs(int64_t a, int64_t b) { return -floor_div(-a, b); }                           /* ceil, b > 0 */
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Work below this many multiply-adds runs on the calling thread: waking the pool costs more. */
#define PARALLEL_MIN_MACS (1 << 16)

static float *scratch_get(alma__blas_scratch *s, size_t n) {
  if (s->cap >= n) return s->p;
  free(s->p);
  s->p = NULL;
  s->cap = 0;
  void *p = NULL;
  if (n > SIZE_MAX / sizeof(float) || posix_memalign(&p, 64, (n ? n : 1) * sizeof(float))) return NULL;
  s->p = p;
  s->cap = n;
  return s->p;
}

/* ---- epilogue ---------------------------------------------------------------------------------- */

#define EPI_LOOPS(EXPR)                                                                    \
  do {                                                                                     \
    if (cb && res)                                                                         \
      for (int64_t i = 0; i < len; i++) {                                                  \
        float v = src[i] + rb + cb[i] + res[i];                                            \
        dst[i] = (EXPR);                                                                   \
      }                                                                                    \
    else if (cb)                                                                           \
      for (int64_t i = 0; i < len; i++) {                                                  \
        float v = src[i] + rb + cb[i];                                                     \
        dst[i] = (EXPR);                                                                   \
      }                                                                                    \
    else if (res)                                                                          \
      for (int64_t i = 0; i < len; i++) {                                                  \
        float v = src[i] + rb + res[i];                                                    \
        dst[i] = (EXPR);                                                                   \
      }                                                                                    \
    else                                                                                   \
      for (int64_t i = 0; i < len; i++) {                                                  \
        float v = src[i] + rb;                                                             \
        dst[i] = (EXPR);                                                                   \
      }                                                                                    \
  } while (0)

/* The same expressions as the EAGER kernels (NaN passes through Relu and Clip; the two-sided
 * sigmoid never overflows). */
/* dst[i] = act(src[i] + rb + cb[i] + res[i]) over one row segment (cb, res may be NULL; src may be
 * dst). */
ALMA__BLAS_CLONES static void epi_row(float *dst, const float *src, int64_t len, float rb, const float *cb,
                                      const float *res, const alma__blas_act *act) {
  switch (act->kind) {
    case ALMA__BLAS_ACT_RELU: EPI_LOOPS(v < 0 ? 0.0f : v); break;
    case ALMA__BLAS_ACT_CLIP: {
      float lo = act->lo, hi = act->hi;
      EPI_LOOPS((v < lo ? lo : v) > hi ? hi : (v < lo ? lo : v));
      break;
    }
    case ALMA__BLAS_ACT_LEAKY: {
      float a = act->alpha;
      EPI_LOOPS(v < 0 ? a * v : v);
      break;
    }
    case ALMA__BLAS_ACT_SIGMOID:  /* vectorised, the same two-sided formula (EAGER's Sigmoid kernel too) */
      EPI_LOOPS(v);
      alma__sigmoid_row(dst, dst, len, 0);
      break;
    case ALMA__BLAS_ACT_TANH:  /* vectorised (EAGER's Tanh kernel too): libm's tanhf was scalar */
      EPI_LOOPS(v);
      alma__tanh_row(dst, dst, len);
      break;
    case ALMA__BLAS_ACT_OTHER:
      EPI_LOOPS(v);
      alma__fused_act_f32(&act->other, dst, len);
      break;
    default: EPI_LOOPS(v); break;
  }
}

static int epi_needed(const alma__blas_epi *e, int res_in_place) {
  return e->row_bias || e->col_bias || (e->res && !res_in_place) || e->act.kind != ALMA__BLAS_ACT_NONE;
}

/* ---- im2col ------------------------------------------------------------------------------------ */

/* Columns [p0, p1) of one image's (one group's) im2col matrix into col (row stride ldcol): row
 * (c, kidx) column p holds x[c, position(p) * stride - pad + offset(kidx) * dilation], 0 outside. */
ALMA__BLAS_CLONES static void im2col_range(const alma__blas_conv *cv, const float *xg, int64_t p0, int64_t p1,
                                           float *col, int64_t ldcol) {
  int nsp = cv->nsp, last = nsp - 1;
  int64_t OW = cv->out[last], IW = cv->in[last], sw = cv->s[last], dw = cv->d[last], pw = cv->pb[last];
  int64_t istride[ALMA_MAX_RANK];
  alma__strides(nsp, cv->in, istride);
  for (int64_t c = 0; c < cv->Cg; c++) {
    const float *xc = xg + c * cv->insp;
    for (int64_t kidx = 0; kidx < cv->kprod; kidx++) {
      int64_t kk[ALMA_MAX_RANK], r = kidx;
      for (int i = last; i >= 0; i--) {
        kk[i] = r % cv->k[i];
        r /= cv->k[i];
      }
      float *row = col + (c * cv->kprod + kidx) * ldcol;
      int64_t base = kk[last] * dw - pw;
      int64_t lo = max64(0, ceil_divs(-base, sw)), hi = min64(OW, floor_div(IW - 1 - base, sw) + 1);
      for (int64_t p = p0; p < p1;) {
        int64_t o = p / OW, ow0 = p % OW, len = min64(OW - ow0, p1 - p);
        int64_t off = 0, rem = o;
        int valid = 1;
        for (int i = last - 1; i >= 0; i--) {
          int64_t od = rem % cv->out[i];
          rem /= cv->out[i];
          int64_t ii = od * cv->s[i] - cv->pb[i] + kk[i] * cv->d[i];
          if (ii < 0 || ii >= cv->in[i]) valid = 0;
          off += ii * istride[i];
        }
        float *dst = row + (p - p0) - ow0; /* dst[ow] for ow in [ow0, ow0 + len) */
        int64_t a = max64(ow0, lo), b = min64(ow0 + len, hi);
        if (!valid || a >= b) {
          memset(dst + ow0, 0, (size_t)len * sizeof(float));
        } else {
          const float *src = xc + off + base;
          if (a > ow0) memset(dst + ow0, 0, (size_t)(a - ow0) * sizeof(float));
          if (sw == 1)
            memcpy(dst + a, src + a, (size_t)(b - a) * sizeof(float));
          else
            for (int64_t ow = a; ow < b; ow++) dst[ow] = src[ow * sw];
          if (b < ow0 + len) memset(dst + b, 0, (size_t)(ow0 + len - b) * sizeof(float));
        }
        p += len;
      }
    }
  }
}

/* The 2-D case walks output rows directly, and copies with 8-float vector moves rather than
 * memcpy calls: rows are short (7 to 112 floats) and there are Cg*KH*KW of them per chunk. */
typedef float v8f __attribute__((vector_size(32), aligned(4), may_alias));

ALMA__BLAS_CLONES static void im2col_2d(const alma__blas_conv *cv, const float *xc0, int64_t p0, int64_t p1,
                                        float *col, int64_t ldcol) {
  int64_t IH = cv->in[0], IW = cv->in[1], OW = cv->out[1];
  int64_t KH = cv->k[0], KW = cv->k[1], sh = cv->s[0], sw = cv->s[1], dh = cv->d[0], dw = cv->d[1];
  int64_t ph = cv->pb[0], pw = cv->pb[1];
  for (int64_t c = 0; c < cv->Cg; c++) {
    const float *xc = xc0 + c * cv->insp;
    for (int64_t kh = 0; kh < KH; kh++)
      for (int64_t kw = 0; kw < KW; kw++) {
        float *row = col + ((c * KH + kh) * KW + kw) * ldcol;
        int64_t base = kw * dw - pw;
        int64_t lo = max64(0, ceil_divs(-base, sw)), hi = min64(OW, floor_div(IW - 1 - base, sw) + 1);
        int64_t oh = p0 / OW, ow0 = p0 % OW;
        for (int64_t p = p0; p < p1; oh++) {
          int64_t e = min64(OW, ow0 + (p1 - p)); /* this segment: ow in [ow0, e) */
          float *d = row + (p - p0);              /* d[ow - ow0] */
          int64_t ih = oh * sh - ph + kh * dh;
          int64_t a = e, b = e; /* copied: [a, b); zeros elsewhere */
          if (ih >= 0 && ih < IH) {
            a = min64(e, max64(ow0, lo));
            b = max64(a, min64(e, hi));
            const float *src = xc + ih * IW; /* element ow is src[ow * sw + base] */
            int64_t ow = a;
            if (sw == 1) {
              for (; ow + 8 <= b; ow += 8) *(v8f *)(d + (ow - ow0)) = *(const v8f *)(src + (ow + base));
              for (; ow < b; ow++) d[ow - ow0] = src[ow + base];
            } else {
              for (; ow < b; ow++) d[ow - ow0] = src[ow * sw + base];
            }
          }
          for (int64_t ow = ow0; ow < a; ow++) d[ow - ow0] = 0.0f;
          for (int64_t ow = b; ow < e; ow++) d[ow - ow0] = 0.0f;
          p += e - ow0;
          ow0 = 0;
        }
      }
  }
}

/* ---- convolution ------------------------------------------------------------------------------ */

/* Columns per chunk: the chunk's im2col block (K x C) and its output block (Mg x C) should stay in
 * L2 (256 KiB together) from im2col through SGEMM to the epilogue. But when the weights are large
 * a chunk has at least 512 columns: each SGEMM call repacks the weights (Mg x K), and packing a
 * weight costs about as much as a hundred multiply-adds. */
static int64_t chunk_target(int64_t K, int64_t Mg, int64_t kb, int64_t mincols) {
  int64_t lo = Mg * K > 65536 ? mincols : 128;
  return min64(8192, max64(lo, kb * 256 / max64(1, K + Mg)));
}

void alma__blas_conv_plan(alma__blas_conv *cv, int T, int64_t chunk_kb, int64_t min_cols) {
  if (T < 1) T = 1;
  cv->mblocks = 1;
  cv->whole_images = 0;
  cv->chunk = cv->outsp;
  cv->chunks_per_group = cv->N;
  if (cv->depthwise) {
    cv->items = cv->N * cv->M;
    return;
  }
  if (cv->N == 0 || cv->outsp == 0 || cv->Mg == 0) {
    cv->items = 0;
    return;
  }
  int64_t target = chunk_target(cv->K, cv->Mg, chunk_kb, min_cols);
  int64_t NG = cv->N * cv->G;
  if (cv->outsp >= target / 2) {
    /* pieces of one image */
    int64_t cpi = ceil_div(cv->outsp, target);
    if (T > 1 && (NG * cpi) % T && NG * cpi < 8 * T)
      while ((NG * cpi) % T && cpi * 16 < cv->outsp) cpi++;
    cv->chunk = min64(cv->outsp, round_up(ceil_div(cv->outsp, cpi), 16));
    cpi = ceil_div(cv->outsp, cv->chunk);
    cv->chunks_per_group = cv->N * cpi;
  } else {
    /* runs of whole images side by side */
    cv->whole_images = 1;
    int64_t ipc = max64(1, target / cv->outsp);
    int64_t nch = ceil_div(cv->N, ipc);
    if (T > 1 && (cv->G * nch) % T && cv->N >= T) {
      nch = min64(cv->N, round_up(nch, T));
      ipc = ceil_div(cv->N, nch);
      nch = ceil_div(cv->N, ipc);
    }
    cv->chunk = ipc;
    cv->chunks_per_group = nch;
  }
  int64_t items = cv->G * cv->chunks_per_group;
  /* too few chunks to keep every thread busy: split the output channels too (each row block
   * repeats its chunk's im2col, cheap next to the GEMM when Mg is large) */
  if (T > 1 && items % T && items < 2 * T && cv->Mg >= 16 * T) cv->mblocks = T;
  cv->items = items * cv->mblocks;
}

typedef struct conv_job {
  const alma__blas_ctx *ctx;
  const alma__blas_conv *cv;
  const float *x, *w;
  float *y;
  const alma__blas_epi *epi;
  atomic_llong next;
  atomic_int failed;
} conv_job;

static void conv_task(void *arg, int tid, int nt) {
  conv_job *j = arg;
  const alma__blas_conv *cv = j->cv;
  const alma__blas_epi *epi = j->epi;
  int stolen = epi->res == j->y;
  int need_epi = epi_needed(epi, stolen);
  int64_t mrows = round_up(ceil_div(cv->Mg, cv->mblocks), 4);
  int64_t K = cv->K, outsp = cv->outsp, M = cv->M, Mg = cv->Mg;
  for (int64_t it, end; (it = alma__pool_claim(&j->next, 1, cv->items, &end)) >= 0;) {
    int64_t mb = it % cv->mblocks, rest = it / cv->mblocks;
    int64_t g = rest / cv->chunks_per_group, c = rest % cv->chunks_per_group;
    int64_t n0, n1, p0, p1;
    if (cv->whole_images) {
      n0 = c * cv->chunk;
      n1 = min64(cv->N, n0 + cv->chunk);
      p0 = 0;
      p1 = outsp;
    } else {
      int64_t cpi = cv->chunks_per_group / cv->N;
      n0 = c / cpi;
      n1 = n0 + 1;
      p0 = (c % cpi) * cv->chunk;
      p1 = min64(outsp, p0 + cv->chunk);
    }
    int64_t m0 = mb * mrows, m1 = min64(Mg, m0 + mrows);
    if (m0 >= m1 || p0 >= p1 || n0 >= n1) continue;
    int64_t pl = p1 - p0, ni = n1 - n0, ncols = pl * ni, mr = m1 - m0;
    const float *B;
    int64_t ldb;
    float *col = NULL;
    int direct_b = cv->pointwise && ni == 1;
    size_t need = (direct_b ? 0 : (size_t)(K * ncols)) + (ni > 1 ? (size_t)(mr * ncols) : 0);
    if (need && !(col = scratch_get(&j->ctx->scratch[tid], need))) {
      atomic_store(&j->failed, 1);
      return;
    }
    if (direct_b) {
      B = j->x + (n0 * cv->C + g * cv->Cg) * cv->insp + p0;
      ldb = cv->insp;
    } else {
      for (int64_t q = 0; q < ni; q++) {
        const float *xg = j->x + ((n0 + q) * cv->C + g * cv->Cg) * cv->insp;
        if (cv->nsp == 2) im2col_2d(cv, xg, p0, p1, col + q * pl, ncols);
        else im2col_range(cv, xg, p0, p1, col + q * pl, ncols);
      }
      B = col;
      ldb = ncols;
    }
    const float *A = j->w + (g * Mg + m0) * K;
    const float *rb = epi->row_bias ? epi->row_bias + g * Mg + m0 : NULL;
    if (ni == 1) {
      /* straight into the output (ldc = plane size), epilogue in place */
      int64_t yoff = (n0 * M + g * Mg + m0) * outsp + p0;
      float *Y = j->y + yoff;
      if (K == 0) {
        if (!stolen)
          for (int64_t r = 0; r < mr; r++) memset(Y + r * outsp, 0, (size_t)pl * sizeof(float));
      } else {
        alma__blas_sgemm(0, 0, (int)mr, (int)pl, (int)K, 1.0f, A, (int)K, B, (int)ldb, stolen ? 1.0f : 0.0f, Y,
                         (int)outsp);
      }
      if (need_epi)
        for (int64_t r = 0; r < mr; r++)
          epi_row(Y + r * outsp, Y + r * outsp, pl, rb ? rb[r] : 0.0f, NULL,
                             epi->res && !stolen ? epi->res + yoff + r * outsp : NULL, &epi->act);
    } else {
      /* several images: multiply into scratch, then scatter each image's block with the epilogue
       * (a residual taken over in place is read back from the output it is about to overwrite) */
      float *tmp = col + (direct_b ? 0 : K * ncols);
      if (K == 0) memset(tmp, 0, (size_t)(mr * ncols) * sizeof(float));
      else alma__blas_sgemm(0, 0, (int)mr, (int)ncols, (int)K, 1.0f, A, (int)K, B, (int)ldb, 0.0f, tmp, (int)ncols);
      for (int64_t q = 0; q < ni; q++)
        for (int64_t r = 0; r < mr; r++) {
          int64_t yoff = ((n0 + q) * M + g * Mg + m0 + r) * outsp;
          epi_row(j->y + yoff, tmp + r * ncols + q * pl, pl, rb ? rb[r] : 0.0f, NULL,
                             epi->res ? epi->res + yoff : NULL, &epi->act);
        }
    }
  }
}

/* Depthwise 2-D (one input channel per group): each output row accumulates its taps in scratch,
 * starting from the bias and adding by kernel row then column as EAGER does, then the epilogue
 * writes the row. */
ALMA__BLAS_CLONES static void depthwise_plane(const alma__blas_conv *cv, const float *xc, const float *wm,
                                              float *acc, float *yc, const float *resc, float rb,
                                              const alma__blas_act *act) {
  int64_t H = cv->in[0], W = cv->in[1], OH = cv->out[0], OW = cv->out[1];
  int64_t KH = cv->k[0], KW = cv->k[1], sh = cv->s[0], sw = cv->s[1], dh = cv->d[0], dw = cv->d[1];
  int64_t ph = cv->pb[0], pw = cv->pb[1];
  for (int64_t oh = 0; oh < OH; oh++) {
    for (int64_t i = 0; i < OW; i++) acc[i] = rb;
    for (int64_t kh = 0; kh < KH; kh++) {
      int64_t ih = oh * sh - ph + kh * dh;
      if (ih < 0 || ih >= H) continue;
      const float *xr = xc + ih * W;
      for (int64_t kw = 0; kw < KW; kw++) {
        float wv = wm[kh * KW + kw];
        int64_t base = kw * dw - pw;
        int64_t lo = max64(0, ceil_divs(-base, sw)), hi = min64(OW, floor_div(W - 1 - base, sw) + 1);
        const float *src = xr + base;
        if (sw == 1)
          for (int64_t ow = lo; ow < hi; ow++) acc[ow] += wv * src[ow];
        else
          for (int64_t ow = lo; ow < hi; ow++) acc[ow] += wv * src[ow * sw];
      }
    }
    epi_row(yc + oh * OW, acc, OW, 0.0f, NULL, resc ? resc + oh * OW : NULL, act);
  }
}

/* 3x3 depthwise, dilation 1 (MobileNet's): all nine taps of an output in one expression, so a
 * vector of outputs is loaded and stored once instead of nine times. A row in the padding reads a
 * row of zeros with zero weights; the edge columns, whose taps leave the image, go tap by tap.
 * The sum runs in the same order as above. */
ALMA__BLAS_CLONES static void depthwise3x3_plane(const alma__blas_conv *cv, const float *xc, const float *wm,
                                                 const float *zero, float *acc, float *yc, const float *resc,
                                                 float rb, const alma__blas_act *act) {
  int64_t H = cv->in[0], W = cv->in[1], OH = cv->out[0], OW = cv->out[1];
  int64_t sh = cv->s[0], sw = cv->s[1], ph = cv->pb[0], pw = cv->pb[1];
  int64_t lo = min64(OW, max64(0, ceil_divs(pw, sw))), hi = max64(lo, min64(OW, floor_div(W - 3 + pw, sw) + 1));
  for (int64_t oh = 0; oh < OH; oh++) {
    const float *r[3];
    float w[9];
    for (int kh = 0; kh < 3; kh++) {
      int64_t ih = oh * sh - ph + kh;
      int in = ih >= 0 && ih < H;
      r[kh] = in ? xc + ih * W : zero;
      for (int kw = 0; kw < 3; kw++) w[kh * 3 + kw] = in ? wm[kh * 3 + kw] : 0.0f;
    }
    for (int64_t ow = 0; ow < OW; ow++) {
      if (ow == lo) ow = hi; /* the interior comes below */
      if (ow >= OW) break;
      float v = rb;
      for (int kh = 0; kh < 3; kh++)
        for (int kw = 0; kw < 3; kw++) {
          int64_t iw = ow * sw - pw + kw;
          if (iw >= 0 && iw < W && r[kh] != zero) v += w[kh * 3 + kw] * r[kh][iw];
        }
      acc[ow] = v;
    }
    const float *a = r[0], *b = r[1], *c = r[2];
    if (sw == 1) {
      for (int64_t ow = lo; ow < hi; ow++) {
        int64_t i = ow - pw;
        acc[ow] = rb + w[0] * a[i] + w[1] * a[i + 1] + w[2] * a[i + 2] + w[3] * b[i] + w[4] * b[i + 1] +
                  w[5] * b[i + 2] + w[6] * c[i] + w[7] * c[i + 1] + w[8] * c[i + 2];
      }
    } else {
      for (int64_t ow = lo; ow < hi; ow++) {
        int64_t i = ow * sw - pw;
        acc[ow] = rb + w[0] * a[i] + w[1] * a[i + 1] + w[2] * a[i + 2] + w[3] * b[i] + w[4] * b[i + 1] +
                  w[5] * b[i + 2] + w[6] * c[i] + w[7] * c[i + 1] + w[8] * c[i + 2];
      }
    }
    epi_row(yc + oh * OW, acc, OW, 0.0f, NULL, resc ? resc + oh * OW : NULL, act);
  }
}

static void depthwise_task(void *arg, int tid, int nt) {
  conv_job *j = arg;
  const alma__blas_conv *cv = j->cv;
  int k3 = cv->k[0] == 3 && cv->k[1] == 3 && cv->d[0] == 1 && cv->d[1] == 1;
  float *acc = scratch_get(&j->ctx->scratch[tid], (size_t)(cv->out[1] + cv->in[1]));
  if (!acc) {
    atomic_store(&j->failed, 1);
    return;
  }
  float *zero = acc + cv->out[1];
  memset(zero, 0, (size_t)cv->in[1] * sizeof(float));
  int64_t kplane = cv->k[0] * cv->k[1];
  /* planes in runs of a few: one claim per run */
  int64_t step = max64(1, min64(16, cv->items / (8 * nt)));
  for (int64_t s, e; (s = alma__pool_claim(&j->next, step, cv->items, &e)) >= 0;)
    for (int64_t it = s; it < e; it++) {
      int64_t n = it / cv->M, m = it % cv->M, g = m / cv->Mg;
      int64_t yoff = (n * cv->M + m) * cv->outsp;
      const float *xc = j->x + (n * cv->C + g) * cv->insp, *wm = j->w + m * kplane;
      const float *resc = j->epi->res ? j->epi->res + yoff : NULL;
      float rb = j->epi->row_bias ? j->epi->row_bias[m] : 0.0f;
      if (k3) depthwise3x3_plane(cv, xc, wm, zero, acc, j->y + yoff, resc, rb, &j->epi->act);
      else depthwise_plane(cv, xc, wm, acc, j->y + yoff, resc, rb, &j->epi->act);
    }
}

alma_status alma__blas_conv_run(const alma__blas_ctx *ctx, const alma__blas_conv *cv, const float *x, const float *w,
                                float *y, const alma__blas_epi *epi) {
  if (cv->items == 0) return ALMA_OK;
  conv_job j = {.ctx = ctx, .cv = cv, .x = x, .w = w, .y = y, .epi = epi};
  atomic_init(&j.next, 0);
  atomic_init(&j.failed, 0);
  int64_t macs = cv->N * cv->M * cv->outsp * cv->Cg * cv->kprod;
  int nt = macs < PARALLEL_MIN_MACS ? 1 : (int)min64(ctx->threads, cv->items);
  alma__pool_run(ctx->pool, cv->depthwise ? depthwise_task : conv_task, &j, nt);
  if (atomic_load(&j.failed)) return alma__errorf(ALMA_ERR_NOMEM, "out of memory for convolution scratch");
  return ALMA_OK;
}

/* ---- Gemm -------------------------------------------------------------------------------------- */

typedef struct gemm_job {
  const alma__blas_gemm *g;
  const float *a, *b;
  float *y;
  const alma__blas_epi *epi;
  int by_rows;
  int64_t block, blocks;
  atomic_llong next;
} gemm_job;

static void gemm_block(const alma__blas_gemm *g, const float *a, const float *b, float *y, const alma__blas_epi *epi,
                       int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  int64_t rows = r1 - r0, cols = c1 - c0, N = g->N;
  if (rows <= 0 || cols <= 0) return;
  int in_place = epi->res == y;
  int acc = g->accumulate || in_place;
  const float *A = g->ta ? a + r0 : a + r0 * g->lda;
  const float *B = g->tb ? b + c0 * g->ldb : b + c0;
  float *Y = y + r0 * N + c0;
  int lda = (int)max64(1, g->lda), ldb = (int)max64(1, g->ldb), K = (int)g->K;
  float beta = acc ? 1.0f : 0.0f;
  if (g->K == 0) {
    if (!acc)
      for (int64_t r = 0; r < rows; r++) memset(Y + r * N, 0, (size_t)cols * sizeof(float));
  } else if (g->pk) {
    /* few rows on a constant weight packed in column panels: one sequential stream over B (c0 and
     * c1 are panel boundaries or N) */
    alma__sgemm_packed_rows(rows, c0 / ALMA_SGEMM_PANEL, ceil_div(c1, ALMA_SGEMM_PANEL), g->alpha, A, lda, g->pk,
                            beta, y + r0 * N, N, NULL, NULL);
  } else if (rows == 1) {
    /* a single row (batch-1 Linear): y = op(B)^T a as a GEMV; OpenBLAS's GEMM would repack all of B */
    if (g->tb) alma__blas_sgemv(0, (int)cols, K, g->alpha, B, ldb, A, g->ta ? lda : 1, beta, Y, 1);
    else alma__blas_sgemv(1, K, (int)cols, g->alpha, B, ldb, A, g->ta ? lda : 1, beta, Y, 1);
  } else if (rows <= 4 && !g->ta) {
    /* a few rows (decode steps, batch-2 Linears): OpenBLAS's GEMM would repack all of B for them
     * (3-4x the time of one pass over B); alma's few-rows kernel reads B once for up to four rows */
    alma__sgemm_rows(g->tb, rows, cols, K, g->alpha, A, lda, B, ldb, beta, Y, N);
  } else if (cols == 1) {
    if (g->ta) alma__blas_sgemv(1, K, (int)rows, g->alpha, A, lda, B, g->tb ? 1 : ldb, beta, Y, (int)N);
    else alma__blas_sgemv(0, (int)rows, K, g->alpha, A, lda, B, g->tb ? 1 : ldb, beta, Y, (int)N);
  } else {
    alma__blas_sgemm(g->ta, g->tb, (int)rows, (int)cols, K, g->alpha, A, lda, B, ldb, beta, Y, (int)N);
  }
  if (epi_needed(epi, in_place))
    for (int64_t r = 0; r < rows; r++)
      epi_row(Y + r * N, Y + r * N, cols, epi->row_bias ? epi->row_bias[r0 + r] : 0.0f,
                         epi->col_bias ? epi->col_bias + c0 : NULL,
                         epi->res && !in_place ? epi->res + (r0 + r) * N + c0 : NULL, &epi->act);
}

static void gemm_task(void *arg, int tid, int nt) {
  gemm_job *j = arg;
  const alma__blas_gemm *g = j->g;
  for (int64_t b, end; (b = alma__pool_claim(&j->next, 1, j->blocks, &end)) >= 0;) {
    int64_t s = j->block * b, e = j->block * (b + 1);
    if (j->by_rows) gemm_block(g, j->a, j->b, j->y, j->epi, min64(s, g->M), min64(e, g->M), 0, g->N);
    else gemm_block(g, j->a, j->b, j->y, j->epi, 0, g->M, min64(s, g->N), min64(e, g->N));
  }
}

/* Splits along the larger of M and N (each thread then repacks the other operand's block, the
 * smaller one). */
static void gemm_split(const alma__blas_ctx *ctx, const alma__blas_gemm *g, const float *a, const float *b, float *y,
                       const alma__blas_epi *epi) {
  int nt = ctx->threads;
  if (g->M * g->N * max64(1, g->K) < PARALLEL_MIN_MACS) nt = 1;
  gemm_job j = {.g = g, .a = a, .b = b, .y = y, .epi = epi, .by_rows = g->M >= g->N && !g->pk};
  if (j.by_rows) {
    j.block = round_up(ceil_div(g->M, nt), 4);
    j.blocks = ceil_div(g->M, j.block);
  } else {
    j.block = round_up(ceil_div(g->N, nt), 16);
    j.blocks = ceil_div(g->N, j.block);
  }
  atomic_init(&j.next, 0);
  nt = (int)max64(1, min64(nt, j.blocks));
  alma__pool_run(ctx->pool, gemm_task, &j, nt);
}

alma_status alma__blas_gemm_run(const alma__blas_ctx *ctx, const alma__blas_gemm *g, const float *a, const float *b,
                                float *y, const alma__blas_epi *epi) {
  if (g->M == 0 || g->N == 0) return ALMA_OK;
  gemm_split(ctx, g, a, b, y, epi);
  return ALMA_OK;
}

/* ---- batched MatMul ---------------------------------------------------------------------------- */

typedef struct matmul_job {
  int64_t batch, M, N, K;
  const float *a, *b;
  const int64_t *a_off, *b_off;
  float *y;
  const alma__blas_epi *epi;
  atomic_llong next;
} matmul_job;

static void matmul_task(void *arg, int tid, int nt) {
  matmul_job *j = arg;
  alma__blas_gemm g = {.M = j->M, .N = j->N, .K = j->K, .lda = j->K, .ldb = j->N, .alpha = 1.0f};
  for (int64_t i, end; (i = alma__pool_claim(&j->next, 1, j->batch, &end)) >= 0;) {
    float *yi = j->y + i * j->M * j->N;
    alma__blas_epi e = *j->epi;
    if (e.res) e.res = e.res == j->y ? yi : e.res + i * j->M * j->N;
    gemm_block(&g, j->a + j->a_off[i], j->b + j->b_off[i], yi, &e, 0, j->M, 0, j->N);
  }
}

alma_status alma__blas_matmul_run(const alma__blas_ctx *ctx, int64_t batch, int64_t M, int64_t N, int64_t K,
                                  const float *a, const int64_t *a_off, const float *b, const int64_t *b_off, float *y,
                                  const alma__blas_epi *epi) {
  if (batch == 0 || M == 0 || N == 0) return ALMA_OK;
  int nt = ctx->threads;
  if (batch * M * N * max64(1, K) < PARALLEL_MIN_MACS) nt = 1;
  if (batch >= nt || nt == 1) {
    matmul_job j = {.batch = batch, .M = M, .N = N, .K = K, .a = a, .b = b, .a_off = a_off, .b_off = b_off,
                    .y = y, .epi = epi};
    atomic_init(&j.next, 0);
    alma__pool_run(ctx->pool, matmul_task, &j, (int)min64(nt, batch));
    return ALMA_OK;
  }
  /* fewer products than threads: split inside each */
  alma__blas_gemm g = {.M = M, .N = N, .K = K, .lda = K, .ldb = N, .alpha = 1.0f};
  for (int64_t i = 0; i < batch; i++) {
    float *yi = y + i * M * N;
    alma__blas_epi e = *epi;
    if (e.res) e.res = e.res == y ? yi : e.res + i * M * N;
    gemm_split(ctx, &g, a + a_off[i], b + b_off[i], yi, &e);
  }
  return ALMA_OK;
}

/* ---- attention --------------------------------------------------------------------------------- */

/* y[r, :] *= f[r]: the softmax's normalisation applied to the output (Dv per row) instead of the
 * probabilities (Sk per row). */
ALMA__BLAS_CLONES static void scale_rows(float *y, int64_t rows, int64_t cols, const float *f) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) y[r * cols + c] *= f[r];
}

void alma__blas_attn_plan(alma__blas_attn *a, int T) {
  if (T < 1) T = 1;
  a->rows = a->blocks = 0;
  if (a->Sq <= 0) return;
  /* a block's scores (rows x Sk) stay in L2 beside K and V; each block repacks K and V, so not
   * fewer than 16 rows unless the threads need the items */
  int64_t rows = min64(a->Sq, max64(16, 32768 / max64(1, a->Sk)));
  int64_t blocks = ceil_div(a->Sq, rows);
  while (T > 1 && (a->batch * blocks) % T && a->batch * blocks < 4 * T && ceil_div(a->Sq, blocks + 1) >= 16) blocks++;
  a->rows = ceil_div(a->Sq, blocks);
  a->blocks = ceil_div(a->Sq, a->rows);
}

typedef struct attn_job {
  const alma__blas_ctx *ctx;
  const alma__blas_attn *a;
  float *y;
  atomic_llong next;
  atomic_int failed;
} attn_job;

/* The keys query row i sees: [0, limit), clamped to [0, Sk]. */
static int64_t attn_limit(const alma__blas_attn *a, int64_t i) {
  return a->causal ? min64(a->Sk, max64(0, i + a->coff + 1)) : a->Sk;
}

static void attn_task(void *arg, int tid, int nt) {
  (void)nt;
  attn_job *j = arg;
  const alma__blas_attn *a = j->a;
  int64_t Sq = a->Sq, Sk = a->Sk, D = a->D, Dv = a->Dv;
  float *s = scratch_get(&j->ctx->scratch[tid], (size_t)(a->rows * (Sk + 1)));
  if (!s) {
    atomic_store(&j->failed, 1);
    return;
  }
  float *inv = s + a->rows * Sk;
  for (int64_t it, end; (it = alma__pool_claim(&j->next, 1, a->batch * a->blocks, &end)) >= 0;) {
    /* causal: the last blocks (most keys) first, so the short ones fill in at the end */
    int64_t b = it / a->blocks, blk = a->causal ? a->blocks - 1 - it % a->blocks : it % a->blocks;
    int64_t r0 = blk * a->rows, nr = min64(Sq, r0 + a->rows) - r0;
    if (nr <= 0) continue;
    const float *Q = a->q + a->q_off[b] + r0 * D, *K = a->k + a->k_off[b], *V = a->v + a->v_off[b];
    float *Y = j->y + (b * Sq + r0) * Dv;
    /* the block's keys: up to its last row's causal frontier; the columns after are never computed */
    int64_t L = attn_limit(a, r0 + nr - 1);
    if (L == 0) { /* softmax over nothing (Sk = 0: the reference's sum of no rows of V; or all masked) */
      float z = a->causal && Sk > 0 && !a->zero_masked ? NAN : 0.0f;
      for (int64_t e = 0; e < nr * Dv; e++) Y[e] = z;
      continue;
    }
    /* scores = scale * Q Kᵀ, [nr, L] with row stride L */
    if (D == 0) memset(s, 0, (size_t)(nr * L) * sizeof(float));
    else if (nr == 1 && a->kt) alma__blas_sgemv(1, (int)D, (int)L, a->scale, K, (int)Sk, Q, 1, 0.0f, s, 1);
    else if (nr == 1) alma__blas_sgemv(0, (int)L, (int)D, a->scale, K, (int)D, Q, 1, 0.0f, s, 1);
    else
      alma__blas_sgemm(0, !a->kt, (int)nr, (int)L, (int)D, a->scale, Q, (int)D, K, (int)(a->kt ? Sk : D), 0.0f, s,
                       (int)L);
    for (int64_t r = 0; r < nr; r++) {
      const float *mrow = a->mask ? a->mask + a->m_off[b] + (r0 + r) * a->m_row : NULL;
      float *sr = s + r * L;
      int64_t Lr = attn_limit(a, r0 + r); /* <= L; the row's keys after it weigh 0 */
      if (Lr < L) memset(sr + Lr, 0, sizeof(float) * (size_t)(L - Lr));
      if (Lr == 0) {
        inv[r] = a->zero_masked ? 0.0f : NAN;
        continue;
      }
      inv[r] = 1.0f / alma__softmax_exp_row(sr, Lr, mrow, a->m_col);
      if (a->zero_masked && mrow && inv[r] != inv[r]) { /* NaN: maybe every key masked */
        int closed = 1;
        for (int64_t c = 0; closed && c < (a->m_col ? Lr : 1); c++) closed = mrow[c] == -INFINITY;
        if (closed) {
          memset(sr, 0, sizeof(float) * (size_t)Lr);
          inv[r] = 0.0f;
        }
      }
    }
    /* Y = exp(scores) V, then each row divided by its sum */
    if (nr == 1) alma__blas_sgemv(1, (int)L, (int)Dv, 1.0f, V, (int)Dv, s, 1, 0.0f, Y, 1);
    else alma__blas_sgemm(0, 0, (int)nr, (int)Dv, (int)L, 1.0f, s, (int)L, V, (int)Dv, 0.0f, Y, (int)Dv);
    scale_rows(Y, nr, Dv, inv);
  }
}

alma_status alma__blas_attn_run(const alma__blas_ctx *ctx, const alma__blas_attn *a, float *y) {
  if (a->batch == 0 || a->Sq == 0 || a->Dv == 0 || a->blocks == 0) return ALMA_OK;
  attn_job j = {.ctx = ctx, .a = a, .y = y};
  atomic_init(&j.next, 0);
  atomic_init(&j.failed, 0);
  int64_t items = a->batch * a->blocks;
  int64_t macs = a->batch * a->Sq * max64(1, a->causal ? a->Sk / 2 : a->Sk) * (a->D + a->Dv + 1);
  int nt = macs < PARALLEL_MIN_MACS ? 1 : (int)min64(ctx->threads, items);
  alma__pool_run(ctx->pool, attn_task, &j, nt);
  if (atomic_load(&j.failed)) return alma__errorf(ALMA_ERR_NOMEM, "out of memory for attention scores");
  return ALMA_OK;
}

#endif /* ALMA_HAVE_BLAS */
