/* MaxPool (with the optional Indices output), AveragePool, GlobalAveragePool, GlobalMaxPool, GlobalLpPool; N-d
 * windows with strides, pads, auto_pad, dilations and ceil_mode.
 *
 * Kernels run in float (float32, float16, bfloat16, int8, uint8: all exact in float) or double
 * (float64). Semantics follow the ONNX reference: the max takes the first largest element (NaN
 * never wins over a number), padding never contributes to a max, and an average divides by the
 * window taps inside the input (count_include_pad = 0) or by the taps inside the padded input
 * (count_include_pad = 1): taps a ceil_mode window puts beyond the end padding are not counted, as
 * in ONNX's reference since 1.18 (its earlier test data counted every kernel tap) and ONNX Runtime. */
#include <math.h>

#include "ops/nn_util.h"

typedef struct pool_shape {
  alma__nn_geom g;
  int64_t N, C, insp, outsp;
} pool_shape;

static int pool_dtype_ok(alma_dtype t, int allow_int8) {
  switch (t) {
    case ALMA_DTYPE_FLOAT32: case ALMA_DTYPE_FLOAT16: case ALMA_DTYPE_BFLOAT16: case ALMA_DTYPE_FLOAT64:
      return 1;
    case ALMA_DTYPE_INT8: case ALMA_DTYPE_UINT8:
      return allow_int8;
    default:
      return 0;
  }
}

static alma_status pool_setup(const alma_node *n, const alma_tensor *x, int is_max, pool_shape *ps) {
  memset(ps, 0, sizeof *ps);
  if (!x) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input X is required");
  if (!pool_dtype_ok(x->dtype, is_max))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  if (x->rank < 3) return alma__op_error(n, ALMA_ERR_SHAPE, "X must have rank >= 3 (N, C, spatial...), got %d", x->rank);
  int nsp = x->rank - 2;
  const int64_t *ks = NULL;
  int nk = alma__attr_ints(n, "kernel_shape", &ks);
  if (nk != nsp)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "kernel_shape has %d values for %d spatial dims", nk, nsp);
  /* dilations arrived with MaxPool-10 and AveragePool-19 */
  int with_dil = is_max ? n->since_version >= 10 : n->since_version >= 19;
  ALMA_TRY(alma__nn_geom_read(n, nsp, x->dims + 2, ks, with_dil, &ps->g));
  int ceil_mode = n->since_version >= 10 ? alma__attr_i(n, "ceil_mode", 0) != 0 : 0;
  ALMA_TRY(alma__nn_geom_forward(n, &ps->g, ceil_mode));
  ps->N = x->dims[0];
  ps->C = x->dims[1];
  ps->insp = alma__numel(nsp, x->dims + 2);
  ps->outsp = alma__numel(nsp, ps->g.out);
  return ALMA_OK;
}

static void pool_out_shape(const pool_shape *ps, alma_dtype dt, alma_tensor *out) {
  int64_t dims[ALMA_MAX_RANK];
  dims[0] = ps->N;
  dims[1] = ps->C;
  for (int i = 0; i < ps->g.nsp; i++) dims[2 + i] = ps->g.out[i];
  alma__set_shape(out, dt, ps->g.nsp + 2, dims);
}

/* Per spatial dim i and output coordinate o: the window starts at st = o * s - pb, its taps
 * j in [lo, hi) fall inside the input and its first pc taps inside the padded input (the divisor
 * of count_include_pad). Tabulated once so the loops below do no divisions. */
typedef struct pool_tables {
  int64_t *st[ALMA_MAX_RANK], *lo[ALMA_MAX_RANK], *hi[ALMA_MAX_RANK], *pc[ALMA_MAX_RANK];
  int64_t *buf;
} pool_tables;

static alma_status tables_make(const alma_node *n, const alma__nn_geom *g, pool_tables *t) {
  int64_t total = 0;
  for (int i = 0; i < g->nsp; i++) total += g->out[i];
  t->buf = alma__nn_alloc(n, (size_t)(4 * total), sizeof(int64_t));
  if (!t->buf) return ALMA_ERR_NOMEM;
  int64_t *p = t->buf;
  for (int i = 0; i < g->nsp; i++) {
    t->st[i] = p, t->lo[i] = p + g->out[i], t->hi[i] = p + 2 * g->out[i], t->pc[i] = p + 3 * g->out[i];
    p += 4 * g->out[i];
    int64_t d = g->d[i];
    for (int64_t o = 0; o < g->out[i]; o++) {
      int64_t st = o * g->s[i] - g->pb[i];
      int64_t lo = st >= 0 ? 0 : (-st + d - 1) / d;
      int64_t last = g->in[i] - 1 - st; /* the largest j * d still inside */
      int64_t hi = last < 0 ? 0 : last / d + 1;
      if (hi > g->k[i]) hi = g->k[i];
      if (lo > hi) lo = hi;
      int64_t plast = g->in[i] + g->pe[i] - 1 - st; /* st >= -pb: every window starts in the padded input */
      int64_t pc = plast < 0 ? 0 : plast / d + 1;
      t->st[i][o] = st, t->lo[i][o] = lo, t->hi[i][o] = hi, t->pc[i][o] = pc < g->k[i] ? pc : g->k[i];
    }
  }
  return ALMA_OK;
}

/* Flat row-major position within a plane -> column-major (storage_order = 1). */
static int64_t to_colmajor(const alma__nn_geom *g, int64_t pos) {
  int64_t cm = 0, cstride = 1, rstride = alma__numel(g->nsp, g->in);
  for (int i = 0; i < g->nsp; i++) {
    rstride /= g->in[i];
    cm += (pos / rstride) * cstride;
    pos %= rstride;
    cstride *= g->in[i];
  }
  return cm;
}

/* is_max: y = first largest tap (and its flat index into idx when idx != NULL); else the average.
 * A window with no tap inside the input gives 0 and index -1 for max, NaN for an average that
 * counts only real taps. 2-D has its own loop nest; other ranks walk the taps with an odometer. */
#define DEFINE_POOL(T, SFX)                                                                                   \
  static void pool_##SFX(const pool_shape *ps, const pool_tables *tb, int is_max, int cip, int colmajor,     \
                         const T *x, T *y, int64_t *idx) {                                                  \
    const alma__nn_geom *g = &ps->g;                                                                        \
    int nsp = g->nsp;                                                                                       \
    if (nsp == 2) {                                                                                         \
      int64_t W = g->in[1], OH = g->out[0], OW = g->out[1], d0 = g->d[0], d1 = g->d[1];                     \
      for (int64_t nc = 0; nc < ps->N * ps->C; nc++) {                                                      \
        const T *xc = x + nc * ps->insp;                                                                    \
        T *yc = y + nc * ps->outsp;                                                                         \
        for (int64_t oh = 0; oh < OH; oh++) {                                                               \
          int64_t hs = tb->st[0][oh], hl = tb->lo[0][oh], hh = tb->hi[0][oh];                               \
          for (int64_t ow = 0; ow < OW; ow++) {                                                             \
            int64_t ws = tb->st[1][ow], wl = tb->lo[1][ow], wh = tb->hi[1][ow];                             \
            if (is_max && !idx && hl < hh && wl < wh) { /* value only: no position bookkeeping */           \
              T best = xc[(hs + hl * d0) * W + ws + wl * d1];                                               \
              for (int64_t kh = hl; kh < hh; kh++) {                                                        \
                const T *row = xc + (hs + kh * d0) * W + ws;                                                \
                for (int64_t kw = wl; kw < wh; kw++) best = row[kw * d1] > best ? row[kw * d1] : best;      \
              }                                                                                             \
              yc[oh * OW + ow] = best;                                                                      \
            } else if (is_max) {                                                                            \
              T best = 0;                                                                                   \
              int64_t bp = -1;                                                                              \
              for (int64_t kh = hl; kh < hh; kh++) {                                                        \
                int64_t rowp = (hs + kh * d0) * W + ws;                                                     \
                for (int64_t kw = wl; kw < wh; kw++) {                                                      \
                  T v = xc[rowp + kw * d1];                                                                 \
                  if (bp < 0 || v > best) best = v, bp = rowp + kw * d1;                                    \
                }                                                                                           \
              }                                                                                             \
              yc[oh * OW + ow] = best;                                                                      \
              if (idx)                                                                                      \
                idx[nc * ps->outsp + oh * OW + ow] =                                                        \
                    bp < 0 ? -1 : nc * ps->insp + (colmajor ? to_colmajor(g, bp) : bp);                     \
            } else {                                                                                        \
              double sum = 0;                                                                               \
              for (int64_t kh = hl; kh < hh; kh++) {                                                        \
                const T *row = xc + (hs + kh * d0) * W + ws;                                                \
                for (int64_t kw = wl; kw < wh; kw++) sum += row[kw * d1];                                   \
              }                                                                                             \
              int64_t div = cip ? tb->pc[0][oh] * tb->pc[1][ow] : (hh - hl) * (wh - wl);                    \
              yc[oh * OW + ow] = div ? (T)(sum / (double)div) : (T)NAN;                                     \
            }                                                                                               \
          }                                                                                                 \
        }                                                                                                   \
      }                                                                                                     \
      return;                                                                                               \
    }                                                                                                       \
    int64_t istr[ALMA_MAX_RANK];                                                                            \
    alma__strides(nsp, g->in, istr);                                                                        \
    for (int64_t nc = 0; nc < ps->N * ps->C; nc++) {                                                        \
      const T *xc = x + nc * ps->insp;                                                                      \
      int64_t od[ALMA_MAX_RANK] = {0};                                                                      \
      for (int64_t o = 0; o < ps->outsp; o++) {                                                             \
        int64_t lo[ALMA_MAX_RANK], hi[ALMA_MAX_RANK], j[ALMA_MAX_RANK], base = 0, padcnt = 1;               \
        int empty = 0;                                                                                      \
        for (int i = 0; i < nsp; i++) {                                                                     \
          lo[i] = j[i] = tb->lo[i][od[i]], hi[i] = tb->hi[i][od[i]];                                        \
          padcnt *= tb->pc[i][od[i]];                                                                       \
          base += tb->st[i][od[i]] * istr[i];                                                               \
          if (lo[i] == hi[i]) empty = 1;                                                                    \
        }                                                                                                   \
        T best = 0;                                                                                         \
        double sum = 0;                                                                                     \
        int64_t cnt = 0, bp = -1;                                                                           \
        while (!empty) {                                                                                    \
          int64_t off = base;                                                                               \
          for (int i = 0; i < nsp; i++) off += j[i] * g->d[i] * istr[i];                                    \
          T v = xc[off];                                                                                    \
          if (is_max) {                                                                                     \
            if (bp < 0 || v > best) best = v, bp = off;                                                     \
          } else {                                                                                          \
            sum += v;                                                                                       \
          }                                                                                                 \
          cnt++;                                                                                            \
          int i = nsp - 1;                                                                                  \
          for (; i >= 0; i--) {                                                                             \
            if (++j[i] < hi[i]) break;                                                                      \
            j[i] = lo[i];                                                                                   \
          }                                                                                                 \
          if (i < 0) break;                                                                                 \
        }                                                                                                   \
        int64_t yo = nc * ps->outsp + o;                                                                    \
        if (is_max) {                                                                                       \
          y[yo] = best;                                                                                     \
          if (idx) idx[yo] = bp < 0 ? -1 : nc * ps->insp + (colmajor ? to_colmajor(g, bp) : bp);            \
        } else {                                                                                            \
          int64_t div = cip ? padcnt : cnt;                                                                 \
          y[yo] = div ? (T)(sum / (double)div) : (T)NAN;                                                    \
        }                                                                                                   \
        for (int i = nsp - 1; i >= 0; i--) {                                                                \
          if (++od[i] < g->out[i]) break;                                                                   \
          od[i] = 0;                                                                                        \
        }                                                                                                   \
      }                                                                                                     \
    }                                                                                                       \
  }
DEFINE_POOL(float, f32)
DEFINE_POOL(double, f64)

static alma_status pool_run(const alma_node *n, const pool_shape *ps, int is_max, int cip, int colmajor,
                            const alma_tensor *x, alma_tensor *y, int64_t *idx) {
  pool_tables tb;
  ALMA_TRY(tables_make(n, &ps->g, &tb));
  alma_status st = ALMA_OK;
  if (x->dtype == ALMA_DTYPE_FLOAT64) {
    pool_f64(ps, &tb, is_max, cip, colmajor, x->data, y->data, idx);
  } else {
    int ox = 0;
    const float *xf = alma__nn_as_f32(x, &ox);
    float *yf = !xf ? NULL
                : y->dtype == ALMA_DTYPE_FLOAT32 ? y->data
                                                 : alma__nn_alloc(n, (size_t)alma_tensor_numel(y), sizeof *yf);
    if (xf && yf) {
      pool_f32(ps, &tb, is_max, cip, colmajor, xf, yf, idx);
      if (yf != y->data) alma__nn_store_f32(y, yf);
    } else {
      st = ALMA_ERR_NOMEM;
    }
    if (yf && yf != y->data) free(yf);
    if (ox) free((void *)xf);
  }
  free(tb.buf);
  return st;
}

/* ---- MaxPool / AveragePool ------------------------------------------------------------------- */

static alma_status maxpool_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                 int nout) {
  pool_shape ps;
  if (nout > 1 && n->since_version < 8)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "the Indices output needs opset 8");
  ALMA_TRY(pool_setup(n, in[0], 1, &ps));
  int64_t so = alma__attr_i(n, "storage_order", 0);
  if (so != 0 && so != 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "storage_order %lld", (long long)so);
  pool_out_shape(&ps, in[0]->dtype, &out[0]);
  if (nout > 1) pool_out_shape(&ps, ALMA_DTYPE_INT64, &out[1]);
  return ALMA_OK;
}

static alma_status maxpool_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                                alma_tensor *out, int nout) {
  pool_shape ps;
  ALMA_TRY(pool_setup(n, in[0], 1, &ps));
  int64_t *idx = alma__nn_out_wanted(n, nout, 1) ? out[1].data : NULL;
  return pool_run(n, &ps, 1, 0, alma__attr_i(n, "storage_order", 0) == 1, in[0], &out[0], idx);
}

static alma_status avgpool_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                 int nout) {
  pool_shape ps;
  ALMA_TRY(pool_setup(n, in[0], 0, &ps));
  pool_out_shape(&ps, in[0]->dtype, &out[0]);
  return ALMA_OK;
}

static alma_status avgpool_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                                alma_tensor *out, int nout) {
  pool_shape ps;
  ALMA_TRY(pool_setup(n, in[0], 0, &ps));
  int cip = n->since_version >= 7 && alma__attr_i(n, "count_include_pad", 0) != 0;
  return pool_run(n, &ps, 0, cip, 0, in[0], &out[0], NULL);
}

/* ---- GlobalAveragePool / GlobalMaxPool ------------------------------------------------------- */

static alma_status global_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                int nout) {
  const alma_tensor *x = in[0];
  if (!x) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input X is required");
  if (!pool_dtype_ok(x->dtype, 0))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  if (x->rank < 2) return alma__op_error(n, ALMA_ERR_SHAPE, "X must have rank >= 2 (N, C, ...), got %d", x->rank);
  int64_t dims[ALMA_MAX_RANK];
  for (int i = 0; i < x->rank; i++) dims[i] = i < 2 ? x->dims[i] : 1;
  alma__set_shape(&out[0], x->dtype, x->rank, dims);
  return ALMA_OK;
}

static alma_status global_exec(const alma_node *n, const alma_tensor *x, alma_tensor *y, int is_max) {
  int64_t planes = x->dims[0] * x->dims[1], sp = alma__numel(x->rank - 2, x->dims + 2);
  for (int64_t p = 0; p < planes; p++) {
    double m = NAN, s = 0;
    if (x->dtype == ALMA_DTYPE_FLOAT32) {
      const float *xs = (const float *)x->data + p * sp;
      if (sp) m = xs[0];
      for (int64_t i = 0; i < sp; i++) {
        if (xs[i] > m) m = xs[i];
        s += xs[i];
      }
    } else {
      if (sp) m = alma__get_f64(x->data, x->dtype, p * sp);
      for (int64_t i = 0; i < sp; i++) {
        double v = alma__get_f64(x->data, x->dtype, p * sp + i);
        if (v > m) m = v;
        s += v;
      }
    }
    alma__set_f64(y->data, y->dtype, p, is_max ? m : s / (double)sp);
  }
  (void)n;
  return ALMA_OK;
}

static alma_status gavg_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  return global_exec(n, in[0], &out[0], 0);
}
static alma_status gmax_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  return global_exec(n, in[0], &out[0], 1);
}

/* GlobalLpPool: (sum |x|^p over the spatial dims)^(1/p) per plane, in double. Opset 1 takes p as a
 * float, 2 on as an int (default 2 either way). */
static alma_status glp_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  const alma_attr *pa = alma__node_attr(n, "p");
  double p = !pa ? 2.0 : pa->type == ALMA_ATTR_FLOAT ? (double)pa->f : (double)pa->i;
  if (!(p > 0) || !isfinite(p)) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "p=%g (expects a positive value)", p);
  int64_t planes = x->dims[0] * x->dims[1], sp = alma__numel(x->rank - 2, x->dims + 2);
  for (int64_t q = 0; q < planes; q++) {
    double s = 0;
    for (int64_t i = 0; i < sp; i++) {
      double v = fabs(alma__get_f64(x->data, x->dtype, q * sp + i));
      s += p == 1 ? v : p == 2 ? v * v : pow(v, p);
    }
    alma__set_f64(out[0].data, out[0].dtype, q, p == 1 ? s : p == 2 ? sqrt(s) : pow(s, 1.0 / p));
  }
  return ALMA_OK;
}

static void pool_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                      int64_t *macs, int64_t *flops) {
  pool_shape ps;
  int is_max = !strcmp(n->op_type, "MaxPool");
  *macs = 0;
  if (pool_setup(n, in[0], is_max, &ps) != ALMA_OK) {
    alma__error_clear();
    *flops = -1;
    return;
  }
  *flops = ps.N * ps.C * ps.outsp * alma__numel(ps.g.nsp, ps.g.k);
}

static void global_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                        int64_t *macs, int64_t *flops) {
  *macs = 0;
  *flops = nin > 0 && in[0] ? alma_tensor_numel(in[0]) : -1;
}

const alma_op_def alma__op_MaxPool = {.name = "MaxPool", .domain = "", .versions = {1, 8, 10, 11, 12, 22},
                                      .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 2,
                                      .infer = maxpool_infer, .exec = maxpool_exec, .cost = pool_cost};

const alma_op_def alma__op_AveragePool = {.name = "AveragePool", .domain = "", .versions = {1, 7, 10, 11, 19, 22},
                                          .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                          .infer = avgpool_infer, .exec = avgpool_exec, .cost = pool_cost};

const alma_op_def alma__op_GlobalAveragePool = {.name = "GlobalAveragePool", .domain = "", .versions = {1, 22},
                                                .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                                .infer = global_infer, .exec = gavg_exec, .cost = global_cost};

const alma_op_def alma__op_GlobalLpPool = {.name = "GlobalLpPool", .domain = "", .versions = {1, 2, 22},
                                           .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                           .infer = global_infer, .exec = glp_exec, .cost = global_cost};

const alma_op_def alma__op_GlobalMaxPool = {.name = "GlobalMaxPool", .domain = "", .versions = {1, 22},
                                            .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                            .infer = global_infer, .exec = gmax_exec, .cost = global_cost};
