/* DNNL runtime: a Winograd F(4x4, 3x3) float32 convolution of our own (Lavin & Gray, "Fast
 * Algorithms for Convolutional Neural Networks", 2015).
 *
 * oneDNN 2.6 has Winograd kernels for AVX-512 only; on an AVX2 machine its direct jit:avx2
 * convolution already runs near the SGEMM peak, so the only way to be faster on 3x3 stride-1
 * convolutions is to do fewer multiplies. F(4x4, 3x3) computes a 4x4 output tile from a 6x6 input
 * tile with 36 multiplies per (input, output) channel pair instead of 144:
 *
 *   V = B^T d B (input transform, per tile and input channel)
 *   M_p = V_p U_p for each of the 36 positions p: a GEMM [tiles x C] x [C x OC]
 *   Y = A^T M A (output transform, per tile and output channel) + bias, then the post-ops
 *
 * with U = G g G^T computed once from the constant weights (interpolation points 0, +-1, +-2).
 *
 * Data: activations in oneDNN's blocked layouts aBcd8b / aBcd16b ([N][C/B][H][W][B]); one AVX2
 * vector holds 8 channels of one pixel, so the transforms are plain vector arithmetic. Each
 * thread takes chunks of tiles and runs the three stages on a chunk while it sits in its L2
 * (V[36][tiles][C], M[36][tiles][OC]); the GEMM is a 6 tiles x 16 output channels register-blocked
 * microkernel (12 ymm accumulators) over U packed per position as [OC/16][C][16]. With fewer
 * chunks than threads the output channels are split instead.
 *
 * The code is compiled for AVX2+FMA through function attributes only (the library runs on any
 * x86-64); alma__dn_wino_cpu says whether this CPU can run it. */
#ifdef ALMA_HAVE_DNNL

#include <math.h>
#include <string.h>

#include "runtimes/dnnl/dnnl_native.h"

/* G (6x3) of F(4x4, 3x3) with points 0, 1, -1, 2, -2 (and infinity). */
static const double wino_G[6][3] = {{1.0 / 4, 0, 0},
                                     {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                     {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                     {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                     {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                     {0, 0, 1}};

size_t alma__dn_wino_wsize(const dn_wino_geo *g) { return (size_t)36 * (size_t)g->Cp * (size_t)g->OC16 * sizeof(float); }

void alma__dn_wino_weights(const dn_wino_geo *g, const float *w, float *U) {
  /* U[p][oc / 16][c][oc % 16]; padded channels stay 0 so they add nothing */
  memset(U, 0, alma__dn_wino_wsize(g));
  int64_t nj = g->OC16 / 16;
  for (int64_t oc = 0; oc < g->OC; oc++)
    for (int64_t c = 0; c < g->C; c++) {
      const float *k = w + (oc * g->C + c) * 9;
      double t[6][3];
      for (int i = 0; i < 6; i++)
        for (int j = 0; j < 3; j++)
          t[i][j] = wino_G[i][0] * k[j] + wino_G[i][1] * k[3 + j] + wino_G[i][2] * k[6 + j];
      for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
          double u = t[i][0] * wino_G[j][0] + t[i][1] * wino_G[j][1] + t[i][2] * wino_G[j][2];
          U[(((int64_t)(i * 6 + j) * nj + oc / 16) * g->Cp + c) * 16 + oc % 16] = (float)u;
        }
    }
}

/* The order of a chunk's GEMMs and output transform. Up to 128 input channels: per 16 output
 * channels, the 36 GEMMs and at once their output transform, so that block's M is still in L1/L2
 * and only V (small for few channels) stays in L2 across blocks. More: per position, all output
 * channels (V's panel for that position stays in cache while U streams by), then the transform. */
static int wino_by16(const dn_wino_geo *g) { return g->Cp <= 128; }

/* Work split: tile chunks of nt tiles (a multiple of the microkernel's 6), and the output
 * channels in `parts` pieces of 16-channel blocks when there are fewer chunks than threads. */
static void wino_split(const dn_wino_geo *g, int threads, int64_t *nt, int64_t *chunks, int64_t *parts, int64_t *ocw) {
  int64_t T = g->N * g->TH * g->TW, nj = g->OC16 / 16;
  if (threads < 1) threads = 1;
  int64_t n;
  if (wino_by16(g)) {
    /* the chunk's V in about 192 KiB of the 512 KiB L2, no more than a thread's share */
    n = (192 * 1024 / (36 * 4 * g->Cp)) / 6 * 6;
    if (n < 6) n = 6;
    if (n > 96) n = 96;
    int64_t need = ((T + threads - 1) / threads + 5) / 6 * 6;
    if (n > need) n = need;
  } else {
    /* U (36 x C x OC floats, megabytes) is streamed from memory once per chunk: as few chunks as
     * keep the threads busy, up to 96 tiles each, as many per thread; with few tiles one chunk
     * whose output channels the threads share (each reads its part of U) */
    int64_t k = (T + 95) / 96;
    if (T >= 12 * threads) k = (k + threads - 1) / threads * threads;
    n = ((T + k - 1) / k + 5) / 6 * 6;
  }
  *nt = n;
  *chunks = (T + n - 1) / n;
  *parts = 1;
  if (*chunks < threads) *parts = nj < threads ? nj : threads;
  *ocw = (nj + *parts - 1) / *parts * 16;
}

/* Floats between two positions' blocks of V or M: an odd number of cache lines, so the 36 blocks a
 * tile's transform reads or writes fall into different L1 sets (a stride of a multiple of 2 KiB
 * would put them all into one or two sets and thrash). */
static int64_t pos_stride(int64_t floats) {
  int64_t lines = (floats + 15) / 16;
  return (lines | 1) * 16;
}

/* Scratch floats per thread: a chunk's V (nt tiles x Cp) and M (nt tiles x ocw) at 36 positions. */
static size_t wino_per_thread(const dn_wino_geo *g, int64_t nt, int64_t ocw) {
  return (size_t)36 * (size_t)(pos_stride(nt * g->Cp) + pos_stride(nt * ocw)) + 16;
}

size_t alma__dn_wino_scratch(const dn_wino_geo *g, int threads) {
  int64_t nt, chunks, parts, ocw;
  wino_split(g, threads, &nt, &chunks, &parts, &ocw);
  size_t per = wino_per_thread(g, nt, ocw);
  return ((size_t)g->OC16 + 16 + per * (size_t)(threads > 1 ? threads : 1)) * sizeof(float);
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define WT __attribute__((target("avx2,fma")))

int alma__dn_wino_cpu(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

int alma__dn_wino_avx512(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

typedef struct wino_job {
  const dn_wino_geo *g;
  const float *U, *bias, *x;
  float *y, *scr;
  size_t per; /* floats of scratch per thread */
  int64_t nt, chunks, parts, ocw;
} wino_job;

/* B^T d of one 6-vector column (stride s between its elements) into o[0..5] (stride os). */
#define BT6(d, s, o, os)                                                                             \
  do {                                                                                               \
    __m256 d0 = (d)[0], d1 = (d)[s], d2 = (d)[2 * (s)], d3 = (d)[3 * (s)], d4 = (d)[4 * (s)],         \
           d5 = (d)[5 * (s)];                                                                        \
    __m256 f4 = _mm256_set1_ps(4.f), f5 = _mm256_set1_ps(5.f), f2 = _mm256_set1_ps(2.f);             \
    __m256 a = _mm256_fnmadd_ps(f4, d2, d4), b = _mm256_fnmadd_ps(f4, d1, d3);                       \
    __m256 c = _mm256_sub_ps(d4, d2), e = _mm256_mul_ps(f2, _mm256_sub_ps(d3, d1));                  \
    (o)[0] = _mm256_fnmadd_ps(f5, d2, _mm256_fmadd_ps(f4, d0, d4));                                  \
    (o)[os] = _mm256_add_ps(a, b);                                                                   \
    (o)[2 * (os)] = _mm256_sub_ps(a, b);                                                             \
    (o)[3 * (os)] = _mm256_add_ps(c, e);                                                             \
    (o)[4 * (os)] = _mm256_sub_ps(c, e);                                                             \
    (o)[5 * (os)] = _mm256_fnmadd_ps(f5, d3, _mm256_fmadd_ps(f4, d1, d5));                           \
  } while (0)

/* A^T m of one 6-vector column into o[0..3]. */
#define AT4(m, s, o, os)                                                                             \
  do {                                                                                               \
    __m256 m0 = (m)[0], m1 = (m)[s], m2 = (m)[2 * (s)], m3 = (m)[3 * (s)], m4 = (m)[4 * (s)],         \
           m5 = (m)[5 * (s)];                                                                        \
    __m256 p12 = _mm256_add_ps(m1, m2), n12 = _mm256_sub_ps(m1, m2);                                 \
    __m256 p34 = _mm256_add_ps(m3, m4), n34 = _mm256_sub_ps(m3, m4);                                 \
    (o)[0] = _mm256_add_ps(_mm256_add_ps(m0, p12), p34);                                             \
    (o)[os] = _mm256_fmadd_ps(_mm256_set1_ps(2.f), n34, n12);                                        \
    (o)[2 * (os)] = _mm256_fmadd_ps(_mm256_set1_ps(4.f), p34, p12);                                  \
    (o)[3 * (os)] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.f), n34, n12), m5);               \
  } while (0)

/* Input transform of tiles [t0, t0 + cnt) into V[36][Cp / 8][nt][8] (per position, 8-channel
 * blocks of the tiles' rows: the microkernel's 6 tiles x 8 channels are 192 contiguous bytes);
 * rows up to the chunk's multiple of 6 are zeroed (the microkernel always takes 6 tiles). One
 * channel block at a time, so the input is read as a few sequential rows of one plane. */
WT static void wino_in(const dn_wino_geo *g, const float *x, float *V, int64_t nt, int64_t pstride, int64_t t0,
                       int64_t cnt) {
  const int64_t B = g->B, K8 = g->Cp / 8, H = g->H, W = g->W, tpi = g->TH * g->TW;
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t cb = 0; cb < g->CB; cb++)
    for (int64_t h = 0; h < B; h += 8) {
      int64_t k8 = cb * (B / 8) + h / 8;
      for (int64_t t = 0; t < cnt; t++) {
        int64_t gt = t0 + t, n = gt / tpi, ty = gt % tpi / g->TW, tx = gt % g->TW;
        int64_t y0 = ty * 4 - g->ph, x0 = tx * 4 - g->pw;
        const float *xb = x + (n * g->CB + cb) * H * W * B + h;
        __m256 d[36], tt[36];
        if (y0 >= 0 && y0 + 6 <= H && x0 >= 0 && x0 + 6 <= W) {
          for (int i = 0; i < 6; i++)
            for (int j = 0; j < 6; j++) d[i * 6 + j] = _mm256_loadu_ps(xb + ((y0 + i) * W + x0 + j) * B);
        } else {
          for (int i = 0; i < 6; i++)
            for (int j = 0; j < 6; j++) {
              int64_t yy = y0 + i, xx = x0 + j;
              d[i * 6 + j] = yy >= 0 && yy < H && xx >= 0 && xx < W ? _mm256_loadu_ps(xb + (yy * W + xx) * B) : zero;
            }
        }
        for (int j = 0; j < 6; j++) BT6(d + j, 6, tt + j, 6);          /* columns: tt = B^T d */
        for (int i = 0; i < 6; i++) BT6(tt + i * 6, 1, d + i * 6, 1); /* rows: d = tt B */
        float *v = V + (k8 * nt + t) * 8;
        for (int p = 0; p < 36; p++) _mm256_storeu_ps(v + p * pstride, d[p]);
      }
    }
  int64_t pad = (cnt + 5) / 6 * 6;
  for (int64_t p = 0; p < 36 && pad > cnt; p++)
    for (int64_t k8 = 0; k8 < K8; k8++) memset(V + p * pstride + (k8 * nt + cnt) * 8, 0, (size_t)((pad - cnt) * 8) * sizeof(float));
}

/* Six tiles' 16 output channels: c0[6][8] and c1[6][8] (channels 0-7 and 8-15, rows of 8) = a * u,
 * a: K8 blocks of [tiles][8] floats, blocks astride apart; u: [K8 * 8][16]. */
WT static void wino_mk(const float *a, int64_t astride, int64_t K8, const float *u, float *c0, float *c1) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
         c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t kb = 0; kb < K8; kb++, a += astride)
    for (int k = 0; k < 8; k++, u += 16) {
      __m256 u0 = _mm256_loadu_ps(u), u1 = _mm256_loadu_ps(u + 8), b;
      b = _mm256_broadcast_ss(a + k);
      c00 = _mm256_fmadd_ps(b, u0, c00);
      c01 = _mm256_fmadd_ps(b, u1, c01);
      b = _mm256_broadcast_ss(a + 8 + k);
      c10 = _mm256_fmadd_ps(b, u0, c10);
      c11 = _mm256_fmadd_ps(b, u1, c11);
      b = _mm256_broadcast_ss(a + 16 + k);
      c20 = _mm256_fmadd_ps(b, u0, c20);
      c21 = _mm256_fmadd_ps(b, u1, c21);
      b = _mm256_broadcast_ss(a + 24 + k);
      c30 = _mm256_fmadd_ps(b, u0, c30);
      c31 = _mm256_fmadd_ps(b, u1, c31);
      b = _mm256_broadcast_ss(a + 32 + k);
      c40 = _mm256_fmadd_ps(b, u0, c40);
      c41 = _mm256_fmadd_ps(b, u1, c41);
      b = _mm256_broadcast_ss(a + 40 + k);
      c50 = _mm256_fmadd_ps(b, u0, c50);
      c51 = _mm256_fmadd_ps(b, u1, c51);
    }
  _mm256_storeu_ps(c0, c00);
  _mm256_storeu_ps(c1, c01);
  _mm256_storeu_ps(c0 + 8, c10);
  _mm256_storeu_ps(c1 + 8, c11);
  _mm256_storeu_ps(c0 + 16, c20);
  _mm256_storeu_ps(c1 + 16, c21);
  _mm256_storeu_ps(c0 + 24, c30);
  _mm256_storeu_ps(c1 + 24, c31);
  _mm256_storeu_ps(c0 + 32, c40);
  _mm256_storeu_ps(c1 + 32, c41);
  _mm256_storeu_ps(c0 + 40, c50);
  _mm256_storeu_ps(c1 + 40, c51);
}

/* One output vector's post-ops, in order; sum adds the destination's old value at q. */
WT static inline __m256 wino_post(const dn_wino_geo *g, __m256 v, const float *q) {
  for (int s = 0; s < g->npost; s++) {
    const dn_wino_post *o = &g->post[s];
    switch (o->kind) {
      case DN_WP_RELU:
        if (o->a == 0.f) v = _mm256_max_ps(v, _mm256_setzero_ps());
        else v = _mm256_blendv_ps(_mm256_mul_ps(v, _mm256_set1_ps(o->a)), v, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ));
        break;
      case DN_WP_CLIP: v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(o->a)), _mm256_set1_ps(o->b)); break;
      case DN_WP_LINEAR: v = _mm256_fmadd_ps(v, _mm256_set1_ps(o->a), _mm256_set1_ps(o->b)); break;
      default: v = _mm256_add_ps(v, _mm256_loadu_ps(q)); break; /* DN_WP_SUM */
    }
  }
  return v;
}

/* Output transform of the chunk's tiles for output channels [oc0, oc1) from M[36][ocw / 8][nt][8]
 * (positions pstride floats apart); one output channel block at a time, so the output is written
 * as a few rows of one plane. */
WT static void wino_out(const dn_wino_geo *g, const float *M, int64_t nt, int64_t pstride, int64_t t0, int64_t cnt,
                        int64_t oc0, int64_t oc1, const float *bias, float *y) {
  const int64_t B = g->B, OH = g->OH, OW = g->OW, tpi = g->TH * g->TW;
  int64_t ob1 = (oc1 + B - 1) / B;
  if (ob1 > g->OCB) ob1 = g->OCB;
  for (int64_t ob = oc0 / B; ob < ob1; ob++)
    for (int64_t h = 0; h < B; h += 8) {
      int64_t c = ob * B + h; /* first channel of this vector */
      const float *m = M + ((c - oc0) / 8 * nt) * 8;
      __m256 bv = _mm256_loadu_ps(bias + c);
      /* channels past OC (the layout's padding) must stay 0 whatever the post-ops make of 0 */
      __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)(g->OC - c)),
                                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
      for (int64_t t = 0; t < cnt; t++) {
        int64_t gt = t0 + t, n = gt / tpi, ty = gt % tpi / g->TW, tx = gt % g->TW;
        int64_t oy0 = ty * 4, ox0 = tx * 4, ny = OH - oy0 < 4 ? OH - oy0 : 4, nx = OW - ox0 < 4 ? OW - ox0 : 4;
        __m256 mm[36], s[24], o[16];
        for (int p = 0; p < 36; p++) mm[p] = _mm256_loadu_ps(m + p * pstride + t * 8);
        for (int j = 0; j < 6; j++) AT4(mm + j, 6, s + j, 6);        /* s[4][6] = A^T m */
        for (int i = 0; i < 4; i++) AT4(s + i * 6, 1, o + i * 4, 1); /* o[4][4] = s A */
        float *yb = y + (n * g->OCB + ob) * OH * OW * B + h;
        for (int64_t i = 0; i < ny; i++)
          for (int64_t j = 0; j < nx; j++) {
            float *q = yb + ((oy0 + i) * OW + ox0 + j) * B;
            __m256 v = wino_post(g, _mm256_add_ps(o[i * 4 + j], bv), q);
            _mm256_storeu_ps(q, _mm256_and_ps(v, keep));
          }
      }
    }
}

/* Position p's GEMM for output channels [16 b, 16 b + 16): the chunk's `rows` tiles of vp (V at p)
 * times U's block into c0 (channels 0-7, [rows][8]) and c0 + nt * 8 (channels 8-15). */
WT static void wino_gemm(const wino_job *j, int p, int64_t b, const float *vp, float *c0, int64_t rows) {
  const dn_wino_geo *g = j->g;
  const float *u = j->U + ((int64_t)p * (g->OC16 / 16) + b) * g->Cp * 16;
  for (int64_t r = 0; r < rows; r += 6) wino_mk(vp + r * 8, j->nt * 8, g->Cp / 8, u, c0 + r * 8, c0 + j->nt * 8 + r * 8);
}

static void wino_worker(void *arg, int tid, int nth) {
  wino_job *j = arg;
  const dn_wino_geo *g = j->g;
  int64_t T = g->N * g->TH * g->TW, nj = g->OC16 / 16, items = j->chunks * j->parts;
  int64_t vs = pos_stride(j->nt * g->Cp);
  float *V = j->scr + (size_t)tid * j->per, *M = V + 36 * vs;
  int64_t have = -1; /* chunk whose V is in place (the OC parts of a chunk follow each other) */
  for (int64_t it = items * tid / nth; it < items * (tid + 1) / nth; it++) {
    int64_t ch = it / j->parts, part = it % j->parts;
    int64_t t0 = ch * j->nt, cnt = T - t0 < j->nt ? T - t0 : j->nt, rows = (cnt + 5) / 6 * 6;
    int64_t j0 = nj * part / j->parts, j1 = nj * (part + 1) / j->parts, ms = pos_stride(j->nt * (j1 - j0) * 16);
    if (have != ch) wino_in(g, j->x, V, j->nt, vs, t0, cnt);
    have = ch;
    if (wino_by16(g)) {
      int64_t m16 = pos_stride(j->nt * 16);
      for (int64_t b = j0; b < j1; b++) {
        for (int p = 0; p < 36; p++) wino_gemm(j, p, b, V + p * vs, M + p * m16, rows);
        wino_out(g, M, j->nt, m16, t0, cnt, b * 16, b * 16 + 16, j->bias, j->y);
      }
      continue;
    }
    for (int p = 0; p < 36; p++)
      for (int64_t b = j0; b < j1; b++) wino_gemm(j, p, b, V + p * vs, M + p * ms + (b - j0) * 2 * j->nt * 8, rows);
    wino_out(g, M, j->nt, ms, t0, cnt, j0 * 16, j1 * 16, j->bias, j->y);
  }
}

void alma__dn_wino(const dn_wino_geo *g, int threads, const float *U, const float *bias, const float *x, float *y,
                   float *scratch) {
  if (threads < 1) threads = 1;
  wino_job j = {.g = g, .U = U, .x = x, .y = y};
  wino_split(g, threads, &j.nt, &j.chunks, &j.parts, &j.ocw);
  /* the bias padded to OC16 (+16: a vector load may start at any block) with zeros */
  float *bp = scratch;
  memset(bp, 0, (size_t)(g->OC16 + 16) * sizeof(float));
  if (bias) memcpy(bp, bias, (size_t)g->OC * sizeof(float));
  j.bias = bp;
  j.per = wino_per_thread(g, j.nt, j.ocw);
  j.scr = scratch + g->OC16 + 16;
  int64_t items = j.chunks * j.parts;
  if (threads > items) threads = (int)items;
  alma__dn_parallel(threads, wino_worker, &j);
}

#else /* not x86: never used (alma__dn_wino_cpu says no) */
int alma__dn_wino_cpu(void) { return 0; }
int alma__dn_wino_avx512(void) { return 0; }
void alma__dn_wino(const dn_wino_geo *g, int threads, const float *U, const float *bias, const float *x, float *y,
                   float *scratch) {
  (void)g, (void)threads, (void)U, (void)bias, (void)x, (void)y, (void)scratch;
}
#endif

#endif
