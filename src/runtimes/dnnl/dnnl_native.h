/* DNNL runtime: kernels of our own where oneDNN's are slower (dnnl_native.c). */
#ifndef ALMA_DNNL_NATIVE_H
#define ALMA_DNNL_NATIVE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Runs fn(arg, tid, nt) on up to `threads` threads of the OpenMP team oneDNN uses (or on the
 * calling thread alone, nt = 1, without one). */
void alma__dn_parallel(int threads, void (*fn)(void *arg, int tid, int nt), void *arg);

/* A 2-D pooling over data laid out as [N][CB][H][W][B] (channel c in block c / B, lane c % B):
 * NCHW is B = 1, NHWC is CB = 1 and B = C, oneDNN's aBcd8b B = 8 (channels padded to CB * B). */
enum { DN_POOL_F32 = 0, DN_POOL_U8, DN_POOL_S8 };
typedef struct dn_pool_geo {
  int dt;                                 /* DN_POOL_*: averages are float32 only */
  int64_t N, CB, B, H, W, OH, OW;
  int64_t kh, kw, sh, sw, dh, dw, ph, pw; /* dilations as steps (1 = none), begin pads */
  int is_max, cip;                        /* cip: average divides by the kernel size */
} dn_pool_geo;

/* Scratch bytes alma__dn_pool needs for `threads` threads. */
size_t alma__dn_pool_scratch(const dn_pool_geo *g, int threads);
/* y[N][CB][OH][OW][B] = pool(x); padded lanes of x (zeros) give zeros. */
void alma__dn_pool(const dn_pool_geo *g, int threads, const void *x, void *y, float *scratch);

/* alma.Attention by blocks of query rows, two dnnl_sgemm calls per block (dnnl_attn.c). Batch entry
 * b reads Q rows at q + q_off[b] (row i at + i * q_ld), K rows (keys; with kt, K's D rows of Sk) at
 * k + k_off[b] with stride k_ld, V rows at v + v_off[b] with stride v_ld, mask row i at mask +
 * m_off[b] + i * m_row (element j at j * m_col; 0 where it broadcasts), and writes output row i at
 * y + y_off[b] + i * y_ld. The last dim of each is contiguous. causal: query i sees keys
 * j <= i + coff only, and the later keys' scores are never computed. zero_masked: a query with
 * every key masked gives zeros (ONNX Attention), else NaN (Softmax's). */
typedef struct dn_attn_geo {
  int64_t batch, Sq, Sk, D, Dv;
  int kt, causal, zero_masked;
  int64_t coff;
  float scale;
  const float *q, *k, *v, *mask;
  float *y;
  const int64_t *q_off, *k_off, *v_off, *m_off, *y_off;
  int64_t q_ld, k_ld, v_ld, y_ld, m_row, m_col;
  int64_t rows, blocks; /* set by alma__dn_attn_plan */
} dn_attn_geo;
/* Chooses the blocks of query rows for `threads` threads (geometry set). */
void alma__dn_attn_plan(dn_attn_geo *a, int threads);
/* Scratch bytes alma__dn_attn needs (planned). */
size_t alma__dn_attn_scratch(const dn_attn_geo *a, int threads);
/* Runs it; 0 if oneDNN's sgemm failed. */
int alma__dn_attn(const dn_attn_geo *a, int threads, float *scratch);

/* A Winograd F(4x4, 3x3) float32 convolution (dnnl_wino.c): stride 1, no dilation, one group, on
 * data laid out as [N][C/B][H][W][B] with B = 8 or 16 (oneDNN's aBcd8b / aBcd16b), the output in
 * the same layout. Post-ops run in order on conv + bias; sum adds the destination's old value. */
enum { DN_WP_RELU = 1, DN_WP_CLIP, DN_WP_LINEAR, DN_WP_SUM };
enum { DN_WINO_MAX_POST = 16 };
typedef struct dn_wino_post {
  int kind;   /* DN_WP_*: relu (a: negative slope), clip to [a, b], linear a * x + b, sum */
  float a, b;
} dn_wino_post;
typedef struct dn_wino_geo {
  int64_t N, C, OC, H, W, OH, OW, ph, pw; /* begin pads; the end pads follow from OH, OW */
  int64_t B, CB, OCB, Cp, OC16, TH, TW;   /* Cp = CB * B; OC16: OC rounded up to 16; 4x4 tiles */
  int npost;
  dn_wino_post post[DN_WINO_MAX_POST];
} dn_wino_geo;

/* Fills the derived sizes of g from N, C, OC, H, W, OH, OW, B. */
static inline void alma__dn_wino_geo_fill(dn_wino_geo *g) {
  g->CB = (g->C + g->B - 1) / g->B;
  g->OCB = (g->OC + g->B - 1) / g->B;
  g->Cp = g->CB * g->B;
  g->OC16 = (g->OC + 15) / 16 * 16;
  g->TH = (g->OH + 3) / 4;
  g->TW = (g->OW + 3) / 4;
}
/* 1 when this CPU runs the kernel (AVX2 and FMA); whether it has AVX-512F. */
int alma__dn_wino_cpu(void);
int alma__dn_wino_avx512(void);
/* Bytes of the transformed weights; U from w ([OC][C][3][3] float32). */
size_t alma__dn_wino_wsize(const dn_wino_geo *g);
void alma__dn_wino_weights(const dn_wino_geo *g, const float *w, float *U);
/* Scratch bytes alma__dn_wino needs for `threads` threads. */
size_t alma__dn_wino_scratch(const dn_wino_geo *g, int threads);
/* y = post-ops(conv(x, U) + bias); bias may be NULL (OC floats otherwise). */
void alma__dn_wino(const dn_wino_geo *g, int threads, const float *U, const float *bias, const float *x, float *y,
                   float *scratch);

#endif
