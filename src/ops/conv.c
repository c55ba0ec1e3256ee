/* Conv and ConvTranspose, N-d (1 to 6 spatial dims), groups, dilations, strides, pads, auto_pad.
 *
 * Conv lowers each (image, group) to one GEMM: W_g [M/g, C/g*k] x col [C/g*k, out_spatial], where
 * col is the im2col unfolding of the input (skipped for 1x1/stride-1/no-pad kernels, whose input
 * already is that matrix). Depthwise 2-D float32 convolutions (one input channel per group, as in
 * MobileNet) use a direct kernel instead: their GEMM would have one row. ConvTranspose is the
 * adjoint: col = W_g^T x, then col2im scatter-adds the columns into the output.
 * float32 runs on alma__sgemm; float64 on alma__dgemm; float16/bfloat16 compute in float32. */
#include "ops/nn_util.h"
#include "ops/sgemm.h"

typedef struct conv_shape {
  alma__nn_geom g;
  int64_t N, C, M, group, Cg, Mg, kprod, insp, outsp;
  int has_bias;
} conv_shape;

static int64_t fdiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); } /* floor, b > 0 */
static int64_t cdiv(int64_t a, int64_t b) { return -fdiv(-a, b); }                           /* ceil, b > 0 */

static int conv_dtype_ok(alma_dtype t) {
  return t == ALMA_DTYPE_FLOAT32 || t == ALMA_DTYPE_FLOAT16 || t == ALMA_DTYPE_FLOAT64 || t == ALMA_DTYPE_BFLOAT16;
}

/* Shared validation of Conv (transpose = 0) and ConvTranspose (1): everything but output sizes. */
static alma_status conv_common(const alma_node *n, const alma_tensor *const *in, int nin, int transpose,
                               conv_shape *cs) {
  memset(cs, 0, sizeof *cs);
  const alma_tensor *x = in[0], *w = alma__nn_in(in, nin, 1), *b = alma__nn_in(in, nin, 2);
  if (!x || !w) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "X and W are required");
  if (!conv_dtype_ok(x->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s (float32, float16, bfloat16, float64 supported)",
                          alma_dtype_name(x->dtype));
  if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "X, W and B must share a dtype (got %s, %s%s%s)",
                          alma_dtype_name(x->dtype), alma_dtype_name(w->dtype), b ? ", " : "",
                          b ? alma_dtype_name(b->dtype) : "");
  if (x->rank < 3)
    return alma__op_error(n, ALMA_ERR_SHAPE, "X must have rank >= 3 (N, C, spatial...), got rank %d", x->rank);
  if (w->rank != x->rank)
    return alma__op_error(n, ALMA_ERR_SHAPE, "W rank %d differs from X rank %d", w->rank, x->rank);
  int nsp = x->rank - 2;
  cs->N = x->dims[0];
  cs->C = x->dims[1];
  cs->group = alma__attr_i(n, "group", 1);
  if (cs->group < 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "group %lld", (long long)cs->group);
  if (cs->C % cs->group)
    return alma__op_error(n, ALMA_ERR_SHAPE, "%lld input channels not divisible by group %lld", (long long)cs->C,
                          (long long)cs->group);
  cs->Cg = cs->C / cs->group;
  if (!transpose) {
    cs->M = w->dims[0];
    if (w->dims[1] != cs->Cg)
      return alma__op_error(n, ALMA_ERR_SHAPE, "W has %lld input channels per group, X gives %lld (C %lld / group %lld)",
                            (long long)w->dims[1], (long long)cs->Cg, (long long)cs->C, (long long)cs->group);
    if (cs->M % cs->group)
      return alma__op_error(n, ALMA_ERR_SHAPE, "%lld output channels not divisible by group %lld", (long long)cs->M,
                            (long long)cs->group);
    cs->Mg = cs->M / cs->group;
  } else {
    if (w->dims[0] != cs->C)
      return alma__op_error(n, ALMA_ERR_SHAPE, "W has %lld input channels, X has %lld", (long long)w->dims[0],
                            (long long)cs->C);
    cs->Mg = w->dims[1];
    cs->M = cs->Mg * cs->group;
  }
  const int64_t *ks = NULL;
  int nk = alma__attr_ints(n, "kernel_shape", &ks);
  if (nk && nk != nsp)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "kernel_shape has %d values for %d spatial dims", nk, nsp);
  for (int i = 0; i < nk; i++)
    if (ks[i] != w->dims[2 + i])
      return alma__op_error(n, ALMA_ERR_SHAPE, "kernel_shape[%d] = %lld but W has %lld", i, (long long)ks[i],
                            (long long)w->dims[2 + i]);
  if (b) {
    if (b->rank != 1 || b->dims[0] != cs->M)
      return alma__op_error(n, ALMA_ERR_SHAPE, "B must have shape [%lld], got rank %d with %lld elements",
                            (long long)cs->M, b->rank, (long long)alma_tensor_numel(b));
    cs->has_bias = 1;
  }
  ALMA_TRY(alma__nn_geom_read(n, nsp, x->dims + 2, w->dims + 2, 1, &cs->g));
  cs->kprod = alma__numel(nsp, w->dims + 2);
  cs->insp = alma__numel(nsp, x->dims + 2);
  return ALMA_OK;
}

static alma_status conv_setup(const alma_node *n, const alma_tensor *const *in, int nin, conv_shape *cs) {
  ALMA_TRY(conv_common(n, in, nin, 0, cs));
  ALMA_TRY(alma__nn_geom_forward(n, &cs->g, 0));
  cs->outsp = alma__numel(cs->g.nsp, cs->g.out);
  return ALMA_OK;
}

static alma_status convt_setup(const alma_node *n, const alma_tensor *const *in, int nin, conv_shape *cs) {
  ALMA_TRY(conv_common(n, in, nin, 1, cs));
  alma__nn_geom *g = &cs->g;
  int nsp = g->nsp;
  const int64_t *op = NULL, *os = NULL, *pads = NULL;
  int nop = alma__attr_ints(n, "output_padding", &op);
  int nos = alma__attr_ints(n, "output_shape", &os);
  int have_pads = alma__attr_ints(n, "pads", &pads) > 0;
  if (nop && nop != nsp)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "output_padding has %d values for %d spatial dims", nop, nsp);
  /* output_shape may list the spatial sizes only or the whole shape (N, C, spatial...). */
  if (nos && nos != nsp && nos != nsp + 2)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "output_shape has %d values for %d spatial dims", nos, nsp);
  if (nos == nsp + 2) os += 2;
  for (int i = 0; i < nsp; i++) {
    int64_t opad = nop ? op[i] : 0;
    if (opad < 0 || opad > ((int64_t)1 << 31))
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "output_padding[%d] = %lld", i, (long long)opad);
    int64_t eff = (g->k[i] - 1) * g->d[i] + 1;
    int64_t natural = g->s[i] * (g->in[i] - 1) + opad + eff;
    int same = g->auto_pad == ALMA__PAD_SAME_UPPER || g->auto_pad == ALMA__PAD_SAME_LOWER;
    if (nos || same) {
      int64_t out = nos ? os[i] : g->in[i] * g->s[i];
      if (out < 1 || out > ((int64_t)1 << 40))
        return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "output_shape[%d] = %lld", i, (long long)out);
      if (nos && have_pads && g->auto_pad == ALMA__PAD_NOTSET) {
        /* explicit pads with output_shape: the pads place the window (as the ONNX reference does) */
      } else {
        /* total padding split as the spec says, with floor division like the reference
         * implementation, so a negative total (output larger than natural) pads the end. */
        int64_t total = natural - out;
        if (g->auto_pad == ALMA__PAD_SAME_UPPER) {
          g->pb[i] = fdiv(total, 2);
          g->pe[i] = total - fdiv(total, 2);
        } else {
          g->pb[i] = total - fdiv(total, 2);
          g->pe[i] = fdiv(total, 2);
        }
      }
      g->out[i] = out;
    } else {
      if (g->auto_pad == ALMA__PAD_VALID) g->pb[i] = g->pe[i] = 0;
      g->out[i] = natural - g->pb[i] - g->pe[i];
      if (g->out[i] < 1)
        return alma__op_error(n, ALMA_ERR_SHAPE, "output size %lld along spatial dim %d (pads exceed the output)",
                              (long long)g->out[i], i);
    }
  }
  cs->outsp = alma__numel(nsp, g->out);
  return ALMA_OK;
}

static void out_shape(const conv_shape *cs, alma_dtype dt, alma_tensor *out) {
  int64_t dims[ALMA_MAX_RANK];
  dims[0] = cs->N;
  dims[1] = cs->M;
  for (int i = 0; i < cs->g.nsp; i++) dims[2 + i] = cs->g.out[i];
  alma__set_shape(out, dt, cs->g.nsp + 2, dims);
}

/* im2col (gather, Conv) and col2im (scatter-add, ConvTranspose) between an image of `channels`
 * planes with spatial sizes img[] and a matrix [channels * kprod, prod(cols[])], where cols[] are
 * the window positions. Row (c, kidx) column p holds image element
 * position(p) * stride - pad_begin + kernel_offset(kidx) * dilation, or 0 outside the image.
 * o0 shifts the window positions along spatial dim 0 (a slab of output rows; 0 if nsp == 1). */
#define DEFINE_IM2COL(T, SFX)                                                                              \
  static void im2col_##SFX(int scatter, T *img_data, const int64_t channels, const alma__nn_geom *g,        \
                           const int64_t *img, const int64_t *cols, int64_t o0, T *col) {                  \
    int nsp = g->nsp, last = nsp - 1;                                                                      \
    int64_t kprod = alma__numel(nsp, g->k), colsp = alma__numel(nsp, cols), imgsp = alma__numel(nsp, img); \
    int64_t OW = cols[last], IW = img[last], sw = g->s[last];                                              \
    if (colsp == 0 || OW == 0) return;                                                                     \
    int64_t outer = colsp / OW, istride[ALMA_MAX_RANK];                                                    \
    alma__strides(nsp, img, istride);                                                                      \
    for (int64_t c = 0; c < channels; c++) {                                                               \
      T *xc = img_data + c * imgsp;                                                                        \
      for (int64_t kidx = 0; kidx < kprod; kidx++) {                                                       \
        int64_t kk[ALMA_MAX_RANK], r = kidx;                                                               \
        for (int i = last; i >= 0; i--) {                                                                  \
          kk[i] = r % g->k[i];                                                                             \
          r /= g->k[i];                                                                                    \
        }                                                                                                  \
        T *row = col + (c * kprod + kidx) * colsp;                                                         \
        int64_t base = kk[last] * g->d[last] - g->pb[last];                                                \
        int64_t lo = cdiv(-base, sw), hi = fdiv(IW - 1 - base, sw) + 1;                                    \
        if (lo < 0) lo = 0;                                                                                \
        if (hi > OW) hi = OW;                                                                              \
        if (lo > OW) lo = OW;                                                                              \
        if (hi < lo) hi = lo;                                                                              \
        int64_t od[ALMA_MAX_RANK] = {0};                                                                   \
        for (int64_t o = 0; o < outer; o++) {                                                              \
          int64_t off = 0;                                                                                 \
          int valid = 1;                                                                                   \
          for (int i = 0; i < last; i++) {                                                                 \
            int64_t ii = (od[i] + (i ? 0 : o0)) * g->s[i] - g->pb[i] + kk[i] * g->d[i];                    \
            if (ii < 0 || ii >= img[i]) valid = 0;                                                         \
            off += ii * istride[i];                                                                        \
          }                                                                                                \
          T *dst = row + o * OW;                                                                           \
          if (!scatter) {                                                                                  \
            if (!valid) {                                                                                  \
              memset(dst, 0, (size_t)OW * sizeof(T));                                                      \
            } else {                                                                                       \
              const T *src = xc + off + base;                                                              \
              if (lo > 0) memset(dst, 0, (size_t)lo * sizeof(T));                                          \
              if (sw == 1)                                                                                 \
                memcpy(dst + lo, src + lo, (size_t)(hi - lo) * sizeof(T));                                 \
              else                                                                                         \
                for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow * sw];                               \
              if (hi < OW) memset(dst + hi, 0, (size_t)(OW - hi) * sizeof(T));                             \
            }                                                                                              \
          } else if (valid) {                                                                              \
            T *d = xc + off + base;                                                                        \
            for (int64_t ow = lo; ow < hi; ow++) d[ow * sw] += dst[ow];                                    \
          }                                                                                                \
          for (int i = last - 1; i >= 0; i--) { /* odometer over the outer window positions */             \
            if (++od[i] < cols[i]) break;                                                                  \
            od[i] = 0;                                                                                     \
          }                                                                                                \
        }                                                                                                  \
      }                                                                                                    \
    }                                                                                                      \
  }
DEFINE_IM2COL(float, f32)
DEFINE_IM2COL(double, f64)

/* C = op(A) op(B) + rbias[i] (rbias may be NULL; C's contents are ignored) */
static alma_status gemm_f32(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                            const float *B, int64_t ldb, float *C, int64_t ldc, const float *rbias) {
  return alma__sgemm_bias(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc, rbias, NULL);
}
static alma_status gemm_f64(int ta, int tb, int64_t M, int64_t N, int64_t K, const double *A, int64_t lda,
                            const double *B, int64_t ldb, double *C, int64_t ldc, const double *rbias) {
  if (rbias)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) C[i * ldc + j] = rbias[i];
  alma__dgemm(ta, tb, M, N, K, 1.0, A, lda, B, ldb, rbias ? 1.0 : 0.0, C, ldc);
  return ALMA_OK;
}

/* Eight depthwise outputs yr[ow..ow+8) = bias + taps, all inside the row; stride 1 or 2 (stride 2
 * loads 16 floats and keeps the even lanes). k3 != NULL: the 3x3 window with weights in k3. */
#define DW_EVEN(p) __builtin_shufflevector(ALMA_LD8(p), ALMA_LD8((p) + 8), 0, 2, 4, 6, 8, 10, 12, 14)
static inline __attribute__((always_inline)) void dw_block(float *yr, const float *const *xr,
                                                           const float *const *wr, int nr, const alma__v8f *k3,
                                                           float bias, int64_t KW, int64_t ow, int64_t sw,
                                                           int64_t dw, int64_t pw) {
  alma__v8f acc = (alma__v8f){0} + bias;
  if (k3) {
    const float *x0 = xr[0] - pw + sw * ow, *x1 = xr[1] - pw + sw * ow, *x2 = xr[2] - pw + sw * ow;
    if (sw == 1) {
      acc += k3[0] * ALMA_LD8(x0) + k3[1] * ALMA_LD8(x0 + 1) + k3[2] * ALMA_LD8(x0 + 2);
      acc += k3[3] * ALMA_LD8(x1) + k3[4] * ALMA_LD8(x1 + 1) + k3[5] * ALMA_LD8(x1 + 2);
      acc += k3[6] * ALMA_LD8(x2) + k3[7] * ALMA_LD8(x2 + 1) + k3[8] * ALMA_LD8(x2 + 2);
    } else {
      acc += k3[0] * DW_EVEN(x0) + k3[1] * DW_EVEN(x0 + 1) + k3[2] * DW_EVEN(x0 + 2);
      acc += k3[3] * DW_EVEN(x1) + k3[4] * DW_EVEN(x1 + 1) + k3[5] * DW_EVEN(x1 + 2);
      acc += k3[6] * DW_EVEN(x2) + k3[7] * DW_EVEN(x2 + 1) + k3[8] * DW_EVEN(x2 + 2);
    }
  } else {
    for (int r = 0; r < nr; r++)
      for (int64_t kw = 0; kw < KW; kw++) {
        const float *p = xr[r] + sw * ow - pw + kw * dw;
        if (sw == 1)
          acc += wr[r][kw] * ALMA_LD8(p);
        else
          acc += wr[r][kw] * DW_EVEN(p);
      }
  }
  ALMA_ST8(yr + ow, acc);
}
#undef DW_EVEN

/* One output row of a depthwise 2-D convolution from the nr input rows its taps touch:
 * yr[ow] = bias + sum_r sum_kw wr[r][kw] * xr[r][ow*sw - pw + kw*dw] over the taps inside [0, W).
 * Interior columns (every tap inside) run eight at a time, the last block overlapping the one
 * before (it rewrites the same values) so short rows stay vectorized; borders run scalar. */
ALMA_MULTIVERSION
static void dw_row(float *restrict yr, const float *const *xr, const float *const *wr, int nr, float bias,
                   int64_t KW, int64_t W, int64_t OW, int64_t sw, int64_t dw, int64_t pw) {
  int64_t span = (KW - 1) * dw;
  int64_t ilo = cdiv(pw, sw), ihi = fdiv(W - 1 + pw - span, sw) + 1;
  if (ilo > OW) ilo = OW;
  if (ihi > OW) ihi = OW;
  if (ihi < ilo) ihi = ilo;
  alma__v8f k3[9];
  int is3 = KW == 3 && nr == 3 && dw == 1;
  if (is3)
    for (int r = 0; r < 3; r++)
      for (int k = 0; k < 3; k++) k3[r * 3 + k] = (alma__v8f){0} + wr[r][k];
  int64_t ow = 0;
  for (; ow < OW; ow++) {
    if (ow == ilo) { /* interior columns */
      int64_t vmax = -1; /* the last column a vector block may start at */
      if (sw == 1) vmax = ihi - 8;
      if (sw == 2) { /* the 16-float loads stay inside the row */
        vmax = fdiv(W - 2 + pw - span, 2) - 7;
        if (vmax > ihi - 8) vmax = ihi - 8;
      }
      if (vmax >= ilo) {
        for (; ow <= vmax; ow += 8) dw_block(yr, xr, wr, nr, is3 ? k3 : NULL, bias, KW, ow, sw, dw, pw);
        if (ow < vmax + 8) {
          dw_block(yr, xr, wr, nr, is3 ? k3 : NULL, bias, KW, vmax, sw, dw, pw);
          ow = vmax + 8;
        }
      }
      for (; ow < ihi; ow++) {
        float acc = bias;
        for (int r = 0; r < nr; r++)
          for (int64_t kw = 0; kw < KW; kw++) acc += wr[r][kw] * xr[r][ow * sw - pw + kw * dw];
        yr[ow] = acc;
      }
      if (ow >= OW) break;
    }
    float acc = bias; /* border column */
    for (int r = 0; r < nr; r++)
      for (int64_t kw = 0; kw < KW; kw++) {
        int64_t iw = ow * sw - pw + kw * dw;
        if (iw >= 0 && iw < W) acc += wr[r][kw] * xr[r][iw];
      }
    yr[ow] = acc;
  }
}

/* Depthwise 2-D float32: y[n,m] = b[m] + sum_kh,kw w[m,0,kh,kw] * x[n, m / Mg] (shifted), one
 * output row at a time. */
static alma_status depthwise2d_f32(const alma_node *n, const conv_shape *cs, const float *x, const float *w,
                                   const float *b, float *y) {
  const alma__nn_geom *g = &cs->g;
  int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1];
  int64_t KH = g->k[0], KW = g->k[1], sh = g->s[0], dh = g->d[0], ph = g->pb[0];
  const float **rows = alma__nn_alloc(n, (size_t)(2 * KH), sizeof *rows);
  if (!rows) return ALMA_ERR_NOMEM;
  const float **wrs = rows + KH;
  for (int64_t nimg = 0; nimg < cs->N; nimg++)
    for (int64_t m = 0; m < cs->M; m++) {
      const float *xc = x + (nimg * cs->C + m / cs->Mg) * H * W;
      const float *wm = w + m * KH * KW;
      float *yc = y + (nimg * cs->M + m) * OH * OW;
      float bias = b ? b[m] : 0.0f;
      for (int64_t oh = 0; oh < OH; oh++) {
        int nr = 0;
        for (int64_t kh = 0; kh < KH; kh++) {
          int64_t ih = oh * sh - ph + kh * dh;
          if (ih >= 0 && ih < H) rows[nr] = xc + ih * W, wrs[nr++] = wm + kh * KW;
        }
        dw_row(yc + oh * OW, rows, wrs, nr, bias, KW, W, OW, g->s[1], g->d[1], g->pb[1]);
      }
    }
  free(rows);
  return ALMA_OK;
}

#ifndef CONV_COL_LIMIT
#define CONV_COL_LIMIT ((int64_t)1 << 24) /* elements of the im2col buffer (64 MiB of float32) */
#endif

#define DEFINE_CONV_RUN(T, SFX)                                                                              \
  static alma_status conv_run_##SFX(const alma_node *n, const conv_shape *cs, const T *x, const T *w,       \
                                    const T *b, T *y) {                                                     \
    const alma__nn_geom *g = &cs->g;                                                                        \
    int pointwise = 1;                                                                                      \
    for (int i = 0; i < g->nsp; i++)                                                                        \
      if (g->k[i] != 1 || g->s[i] != 1 || g->pb[i] || g->pe[i]) pointwise = 0;                              \
    int64_t kdim = cs->Cg * cs->kprod;                                                                      \
    /* the unfolded matrix is built a slab of output rows (spatial dim 0) at a time, so it stays         \
     * under CONV_COL_LIMIT elements however large the image */                                          \
    int64_t rows0 = g->nsp >= 2 ? g->out[0] : 1, inner = rows0 ? cs->outsp / rows0 : 0, slab = rows0;       \
    if (!pointwise && g->nsp >= 2 && kdim * cs->outsp > CONV_COL_LIMIT) {                                   \
      slab = CONV_COL_LIMIT / (kdim * (inner ? inner : 1));                                                 \
      if (slab < 1) slab = 1;                                                                               \
    }                                                                                                       \
    T *col = NULL;                                                                                          \
    if (!pointwise && !(col = alma__nn_alloc(n, (size_t)(kdim * slab * inner), sizeof(T)))) return ALMA_ERR_NOMEM; \
    alma_status st = ALMA_OK;                                                                               \
    for (int64_t ni = 0; ni < cs->N && st == ALMA_OK; ni++)                                                 \
      for (int64_t gi = 0; gi < cs->group && st == ALMA_OK; gi++) {                                         \
        const T *xg = x + (ni * cs->C + gi * cs->Cg) * cs->insp;                                            \
        T *yg = y + (ni * cs->M + gi * cs->Mg) * cs->outsp;                                                 \
        const T *wg = w + gi * cs->Mg * kdim, *bg = b ? b + gi * cs->Mg : NULL;                              \
        if (pointwise) {                                                                                    \
          st = gemm_##SFX(0, 0, cs->Mg, cs->outsp, kdim, wg, kdim, xg, cs->outsp, yg, cs->outsp, bg);      \
          continue;                                                                                         \
        }                                                                                                   \
        for (int64_t r0 = 0; r0 < rows0 && st == ALMA_OK; r0 += slab) {                                    \
          int64_t cols[ALMA_MAX_RANK];                                                                      \
          memcpy(cols, g->out, sizeof cols);                                                                \
          if (g->nsp >= 2) cols[0] = rows0 - r0 < slab ? rows0 - r0 : slab;                                 \
          int64_t ncol = alma__numel(g->nsp, cols);                                                         \
          im2col_##SFX(0, (T *)xg, cs->Cg, g, g->in, cols, r0, col);                                        \
          st = gemm_##SFX(0, 0, cs->Mg, ncol, kdim, wg, kdim, col, ncol, yg + r0 * inner, cs->outsp, bg);  \
        }                                                                                                   \
      }                                                                                                     \
    free(col);                                                                                              \
    return st;                                                                                              \
  }                                                                                                         \
  static alma_status convt_run_##SFX(const alma_node *n, const conv_shape *cs, const T *x, const T *w,      \
                                     const T *b, T *y) {                                                    \
    const alma__nn_geom *g = &cs->g;                                                                        \
    int64_t rows = cs->Mg * cs->kprod;                                                                      \
    T *col = alma__nn_alloc(n, (size_t)(rows * cs->insp), sizeof(T));                                       \
    if (!col) return ALMA_ERR_NOMEM;                                                                        \
    alma_status st = ALMA_OK;                                                                               \
    for (int64_t ni = 0; ni < cs->N && st == ALMA_OK; ni++)                                                 \
      for (int64_t gi = 0; gi < cs->group && st == ALMA_OK; gi++) {                                         \
        const T *xg = x + (ni * cs->C + gi * cs->Cg) * cs->insp;                                            \
        T *yg = y + (ni * cs->M + gi * cs->Mg) * cs->outsp;                                                 \
        st = gemm_##SFX(1, 0, rows, cs->insp, cs->Cg, w + gi * cs->Cg * rows, rows, xg, cs->insp, col,      \
                        cs->insp, NULL);                                                                    \
        if (st != ALMA_OK) break;                                                                           \
        /* the output is the "image" and the input positions are the window positions */                  \
        im2col_##SFX(1, yg, cs->Mg, g, g->out, g->in, 0, col);                                              \
        if (b)                                                                                              \
          for (int64_t m = 0; m < cs->Mg; m++)                                                              \
            for (int64_t p = 0; p < cs->outsp; p++) yg[m * cs->outsp + p] += b[gi * cs->Mg + m];           \
      }                                                                                                     \
    free(col);                                                                                              \
    return st;                                                                                              \
  }
DEFINE_CONV_RUN(float, f32)
DEFINE_CONV_RUN(double, f64)

/* Dispatch on dtype: float32 direct, float64 in double, float16/bfloat16 through float32 copies. */
static alma_status conv_dispatch(const alma_node *n, const conv_shape *cs, const alma_tensor *const *in, int nin,
                                 alma_tensor *out, int transpose) {
  const alma_tensor *x = in[0], *w = in[1], *b = alma__nn_in(in, nin, 2);
  alma_status st = ALMA_ERR_NOMEM;
  if (x->dtype == ALMA_DTYPE_FLOAT64) {
    const double *bd = b ? b->data : NULL;
    return transpose ? convt_run_f64(n, cs, x->data, w->data, bd, out->data)
                     : conv_run_f64(n, cs, x->data, w->data, bd, out->data);
  }
  int ox = 0, ow = 0, ob = 0;
  const float *xf = alma__nn_as_f32(x, &ox), *wf = xf ? alma__nn_as_f32(w, &ow) : NULL;
  const float *bf = (wf && b) ? alma__nn_as_f32(b, &ob) : NULL;
  float *yf = out->dtype == ALMA_DTYPE_FLOAT32 ? out->data : NULL;
  if (!yf && xf && wf) yf = alma__nn_alloc(n, (size_t)alma_tensor_numel(out), sizeof(float));
  if (xf && wf && (bf || !b) && yf) {
    if (yf != out->data) memset(yf, 0, (size_t)alma_tensor_numel(out) * sizeof(float));
    if (transpose)
      st = convt_run_f32(n, cs, xf, wf, bf, yf);
    else if (cs->g.nsp == 2 && cs->Cg == 1 && cs->group > 1)
      st = depthwise2d_f32(n, cs, xf, wf, bf, yf);
    else
      st = conv_run_f32(n, cs, xf, wf, bf, yf);
    if (st == ALMA_OK && yf != out->data) alma__nn_store_f32(out, yf);
  }
  if (ox) free((void *)xf);
  if (ow) free((void *)wf);
  if (ob) free((void *)bf);
  if (yf && yf != out->data) free(yf);
  return st;
}

static alma_status conv_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  conv_shape cs;
  ALMA_TRY(conv_setup(n, in, nin, &cs));
  out_shape(&cs, in[0]->dtype, &out[0]);
  return ALMA_OK;
}

static alma_status conv_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  conv_shape cs;
  ALMA_TRY(conv_setup(n, in, nin, &cs));
  return conv_dispatch(n, &cs, in, nin, &out[0], 0);
}

static void conv_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                      int64_t *macs, int64_t *flops) {
  conv_shape cs;
  if (conv_setup(n, in, nin, &cs) != ALMA_OK) {
    alma__error_clear();
    *macs = *flops = -1;
    return;
  }
  *macs = cs.N * cs.M * cs.outsp * cs.Cg * cs.kprod;
  *flops = 2 * *macs + (cs.has_bias ? cs.N * cs.M * cs.outsp : 0);
}

static alma_status convt_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                               int nout) {
  conv_shape cs;
  ALMA_TRY(convt_setup(n, in, nin, &cs));
  out_shape(&cs, in[0]->dtype, &out[0]);
  return ALMA_OK;
}

static alma_status convt_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                              alma_tensor *out, int nout) {
  conv_shape cs;
  ALMA_TRY(convt_setup(n, in, nin, &cs));
  return conv_dispatch(n, &cs, in, nin, &out[0], 1);
}

static void convt_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                       int64_t *macs, int64_t *flops) {
  conv_shape cs;
  if (convt_setup(n, in, nin, &cs) != ALMA_OK) {
    alma__error_clear();
    *macs = *flops = -1;
    return;
  }
  *macs = cs.N * cs.C * cs.insp * cs.Mg * cs.kprod;
  *flops = 2 * *macs + (cs.has_bias ? cs.N * cs.M * cs.outsp : 0);
}

const alma_op_def alma__op_Conv = {.name = "Conv", .domain = "", .versions = {1, 11, 22},
                                   .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
                                   .infer = conv_infer, .exec = conv_exec, .cost = conv_cost};

const alma_op_def alma__op_ConvTranspose = {.name = "ConvTranspose", .domain = "", .versions = {1, 11, 22},
                                            .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
                                            .infer = convt_infer, .exec = convt_exec, .cost = convt_cost};
