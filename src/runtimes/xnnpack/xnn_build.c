/* XNNPACK runtime: constants laid out for XNNPACK (once, at compile) and the XNNPACK subgraph of a
 * partition for one input-shape signature (at the first run with those shapes). */
#ifdef ALMA_HAVE_XNNPACK
#include <math.h>
#include <stdarg.h>

#include "ops/nn_util.h"
#include "runtimes/xnnpack/xnn_rt.h"

/* ---- constants -------------------------------------------------------------------------------- */
static float *static_alloc(xrt_static *s, int rank, const size_t *dims) {
  size_t n = 1;
  s->rank = rank;
  for (int i = 0; i < rank; i++) {
    s->dims[i] = dims[i];
    n *= dims[i];
  }
  void *p = NULL;
  if (posix_memalign(&p, 64, n * sizeof(float) + XNN_EXTRA_BYTES)) p = NULL;
  if (p) memset(p, 0, n * sizeof(float) + XNN_EXTRA_BYTES);
  s->data = p;
  return p;
}

void alma__xrt_static_free(xrt_static *s) {
  free(s->data);
  memset(s, 0, sizeof *s);
}

static const alma_tensor *cinit_p(const xrt_plan *p, const alma_node *n, int k) {
  return k < n->n_inputs ? alma__xrt_cst(p->g, p->cval, n->inputs[k]) : NULL;
}
#define cinit(g, n, k) cinit_p(p, n, k)

alma_status alma__xrt_prepare_statics(xrt_plan *p, int node) {
  const alma_graph *g = p->g;
  const alma_node *n = &g->nodes[node];
  xrt_node *xn = &p->xn[node];
  int nhwc = p->parts[xn->part].nhwc;
  switch (xn->kind) {
    case XK_CONV:
    case XK_DWCONV: {
      const alma_tensor *W = cinit(g, n, 1), *B = cinit(g, n, 2);
      const float *w = W->data;
      /* a 1-D conv's [O, I, K] is [O, I, 1, K] */
      size_t O = (size_t)W->dims[0], Ig = (size_t)W->dims[1], KH = W->rank == 4 ? (size_t)W->dims[2] : 1,
             KW = (size_t)W->dims[W->rank - 1];
      if (xn->kind == XK_CONV) {
        size_t d[4] = {O, KH, KW, Ig};
        float *f = static_alloc(&xn->w, 4, d);
        if (!f) break;
        for (size_t o = 0; o < O; o++)
          for (size_t i = 0; i < Ig; i++)
            for (size_t h = 0; h < KH; h++)
              for (size_t x = 0; x < KW; x++) f[((o * KH + h) * KW + x) * Ig + i] = w[((o * Ig + i) * KH + h) * KW + x];
      } else {
        size_t d[4] = {1, KH, KW, O};
        float *f = static_alloc(&xn->w, 4, d);
        if (!f) break;
        for (size_t o = 0; o < O; o++)
          for (size_t h = 0; h < KH; h++)
            for (size_t x = 0; x < KW; x++) f[(h * KW + x) * O + o] = w[(o * KH + h) * KW + x];
      }
      float *bb = static_alloc(&xn->b, 1, &O);
      if (bb && B) memcpy(bb, B->data, O * sizeof(float));
      break;
    }
    case XK_FC: {
      int gemm = xn->fcg; /* Gemm, FusedGemm; FusedMatMul's bias is a C with beta = 1 */
      const alma_tensor *W = cinit(g, n, 1), *C = gemm || xn->fused_op ? cinit(g, n, 2) : NULL;
      int transB = gemm ? alma__attr_i(n, "transB", 0) != 0 : 0;
      float alpha = gemm ? alma__attr_f(n, "alpha", 1.0f) : 1.0f, beta = gemm ? alma__attr_f(n, "beta", 1.0f) : 1.0f;
      size_t K = (size_t)(transB ? W->dims[1] : W->dims[0]), N = (size_t)(transB ? W->dims[0] : W->dims[1]);
      size_t d[2] = {N, K};
      float *f = static_alloc(&xn->w, 2, d);
      if (!f) break;
      const float *w = W->data;
      /* after a Flatten of NHWC data, column k = c*HW + hw of the ONNX weights reads NHWC
       * position hw*C + c */
      size_t fc = 1, fhw = 1;
      if (xn->flatten_perm) {
        fc = (size_t)xn->flat_c;
        fhw = (size_t)xn->flat_hw;
        if (fc * fhw != K) return alma__op_error(n, ALMA_ERR_INTERNAL, "flattened size %zu is not K = %zu", fc * fhw, K);
      }
      for (size_t o = 0; o < N; o++)
        for (size_t k = 0; k < K; k++) {
          size_t kk = xn->flatten_perm ? (k % fhw) * fc + k / fhw : k;
          f[o * K + kk] = alpha * (transB ? w[o * K + k] : w[k * N + o]);
        }
      if (!C && xn->bias_node >= 0) {
        const xrt_node *an = &p->xn[xn->bias_node];
        C = cinit(g, &g->nodes[xn->bias_node], an->cst_slot);
        beta = 1.0f;
      }
      if (C) {
        float *bb = static_alloc(&xn->b, 1, &N);
        if (!bb) break;
        const float *c = C->data;
        int64_t cn = alma_tensor_numel(C);
        for (size_t o = 0; o < N; o++) bb[o] = beta * c[cn == 1 ? 0 : o];
      }
      break;
    }
    case XK_BINARY: {
      if (xn->cst_slot < 0) return ALMA_OK;
      const alma_tensor *T = cinit(g, n, xn->cst_slot);
      int r = xn->out_rank;
      size_t e[XNN_MAX_TENSOR_DIMS];
      for (int i = 0; i < r; i++) e[i] = 1;
      for (int i = 0; i < T->rank; i++) e[r - T->rank + i] = (size_t)T->dims[i];
      const float *src = T->data;
      if (nhwc && r == 4) {
        size_t d[4] = {e[0], e[2], e[3], e[1]};
        float *f = static_alloc(&xn->w, 4, d);
        if (!f) break;
        for (size_t a = 0; a < e[0]; a++)
          for (size_t c = 0; c < e[1]; c++)
            for (size_t h = 0; h < e[2]; h++)
              for (size_t x = 0; x < e[3]; x++)
                f[((a * e[2] + h) * e[3] + x) * e[1] + c] = src[((a * e[1] + c) * e[2] + h) * e[3] + x];
      } else {
        float *f = static_alloc(&xn->w, r, e);
        if (!f) break;
        memcpy(f, src, (size_t)alma_tensor_numel(T) * sizeof(float));
      }
      break;
    }
    case XK_PRELU: {
      const alma_tensor *S = cinit(g, n, 1);
      size_t C = (size_t)xn->chans;
      float *f = static_alloc(&xn->w, 1, &C);
      if (!f) break;
      const float *s = S->data;
      int one = alma_tensor_numel(S) == 1;
      for (size_t c = 0; c < C; c++) f[c] = s[one ? 0 : c];
      break;
    }
    case XK_BN: {
      const float *sc = cinit(g, n, 1)->data, *bi = cinit(g, n, 2)->data, *mu = cinit(g, n, 3)->data,
                  *var = cinit(g, n, 4)->data;
      double eps = alma__attr_f(n, "epsilon", 1e-5f);
      size_t C = (size_t)xn->chans, d[XNN_MAX_TENSOR_DIMS];
      int r = xn->out_rank, sr = nhwc && r == 4 ? 1 : r - 1;
      d[0] = C;
      for (int i = 1; i < sr; i++) d[i] = 1;
      float *fs = static_alloc(&xn->w, sr, d), *fb = static_alloc(&xn->b, sr, d);
      if (!fs || !fb) break;
      for (size_t c = 0; c < C; c++) {
        double s = sc[c] / sqrt((double)var[c] + eps);
        fs[c] = (float)s;
        fb[c] = (float)(bi[c] - mu[c] * s);
      }
      break;
    }
    default:
      return ALMA_OK;
  }
  int need_w = xn->kind != XK_BINARY || xn->cst_slot >= 0;
  int need_b = xn->kind == XK_CONV || xn->kind == XK_DWCONV || xn->kind == XK_BN ||
               (xn->kind == XK_FC && (((xn->fcg || xn->fused_op) && cinit(g, n, 2)) || xn->bias_node >= 0));
  if ((need_w && !xn->w.data) || (need_b && !xn->b.data))
    return alma__op_error(n, ALMA_ERR_NOMEM, "out of memory laying out constants for XNNPACK");
  return ALMA_OK;
}

/* ---- building a partition ------------------------------------------------------------------- */
typedef struct bctx {
  xrt_plan *p;
  xrt_part *P;
  const alma_tensor *shape;
  xrt_build *b;
  xnn_subgraph_t sg;
  uint32_t *id; /* per graph value */
} bctx;

static const char *xs(enum xnn_status s) {
  switch (s) {
    case xnn_status_success: return "success";
    case xnn_status_uninitialized: return "uninitialized";
    case xnn_status_invalid_parameter: return "invalid parameter";
    case xnn_status_invalid_state: return "invalid state";
    case xnn_status_unsupported_parameter: return "unsupported parameter";
    case xnn_status_unsupported_hardware: return "unsupported hardware";
    case xnn_status_out_of_memory: return "out of memory";
    default: return "unknown status";
  }
}

/* Marks the build failed with a reason; returns -1 so callers can `return fail(...)`. */
static int fail(bctx *c, const alma_node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(bctx *c, const alma_node *n, const char *fmt, ...) {
  if (c->b->failed) return -1;
  c->b->failed = 1;
  int o = n ? snprintf(c->b->why, sizeof c->b->why, "node '%s' (%s): ", n->name, n->op_type) : 0;
  if (o < 0 || o >= (int)sizeof c->b->why) o = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->b->why + o, sizeof c->b->why - (size_t)o, fmt, ap);
  va_end(ap);
  return -1;
}

#define XTRY(c, n, call)                                                  \
  do {                                                                    \
    enum xnn_status xs_ = (call);                                         \
    if (xs_ != xnn_status_success) return fail(c, n, #call ": %s", xs(xs_)); \
  } while (0)

/* XNNPACK dims of value v: its executor shape, permuted to NHWC for rank 4 in NHWC mode. */
static int xdims(const bctx *c, int v, size_t *dims) {
  const alma_tensor *t = &c->shape[v];
  if (t->rank < 1 || t->rank > XNN_MAX_TENSOR_DIMS) return -1;
  for (int i = 0; i < t->rank; i++) {
    if (t->dims[i] <= 0) return -1;
    dims[i] = (size_t)t->dims[i];
  }
  if (c->P->nhwc && t->rank == 4) {
    dims[1] = (size_t)t->dims[2];
    dims[2] = (size_t)t->dims[3];
    dims[3] = (size_t)t->dims[1];
  }
  if (c->P->nhwc && t->rank == 3) {
    /* NCL as NHWC with H = 1: XNNPACK's 2-D convolution takes it */
    dims[1] = 1;
    dims[2] = (size_t)t->dims[2];
    dims[3] = (size_t)t->dims[1];
    return 4;
  }
  return t->rank;
}

/* Defines value v (fp32, or its 8-bit form) with the given external id and flags. */
static enum xnn_status define_value(bctx *c, int v, size_t r, const size_t *d, uint32_t ext, uint32_t flags, uint32_t *out) {
  const xrt_vq *q = &c->p->vq[v];
  if (!q->q) return xnn_define_tensor_value(c->sg, xnn_datatype_fp32, r, d, NULL, ext, flags, out);
  return xnn_define_quantized_tensor_value(c->sg, q->dom == XQ_S8 ? xnn_datatype_qint8 : xnn_datatype_quint8, q->zp,
                                           q->scale, r, d, NULL, ext, flags, out);
}

static int vid(bctx *c, const alma_node *n, int v, uint32_t *out) {
  if (c->id[v] == XNN_INVALID_VALUE_ID) {
    size_t d[XNN_MAX_TENSOR_DIMS];
    int r = xdims(c, v, d);
    if (r < 0) return fail(c, n, "value '%s': rank 1 to %d with non-empty dims needed", c->p->g->values[v].name, XNN_MAX_TENSOR_DIMS);
    XTRY(c, n, define_value(c, v, (size_t)r, d, XNN_INVALID_VALUE_ID, 0, &c->id[v]));
  }
  *out = c->id[v];
  return 0;
}

static int sid(bctx *c, const alma_node *n, const xrt_static *s, uint32_t *out) {
  XTRY(c, n, xnn_define_tensor_value(c->sg, xnn_datatype_fp32, (size_t)s->rank, s->dims, s->data, XNN_INVALID_VALUE_ID, 0, out));
  return 0;
}

/* Pool/conv geometry from the executor's shapes: pads (with ceil_mode's extra end padding folded
 * in) such that XNNPACK's floor-rounded output size equals ONNX's. */
typedef struct geo2 {
  uint32_t pt, pl, pb, pr, kh, kw, sh, sw, dh, dw;
} geo2;

static int geometry(bctx *c, const alma_node *n, int x, int y, const int64_t *k, int with_dil, int ceil_mode, geo2 *o) {
  alma__nn_geom gm;
  const alma_tensor *X = &c->shape[x], *Y = &c->shape[y];
  if (X->rank != Y->rank || (X->rank != 4 && X->rank != 3)) return fail(c, n, "rank-4 or rank-3 input and output needed");
  int nsp = X->rank - 2;
  if (alma__nn_geom_read(n, nsp, X->dims + 2, k, with_dil, &gm) != ALMA_OK ||
      alma__nn_geom_forward(n, &gm, ceil_mode) != ALMA_OK)
    return fail(c, n, "%s", alma_last_error());
  if (nsp == 1) {
    /* 1-D: the only spatial dim is W, H = 1 with a 1-tap window */
    gm.in[1] = gm.in[0], gm.out[1] = gm.out[0], gm.k[1] = gm.k[0], gm.s[1] = gm.s[0], gm.d[1] = gm.d[0];
    gm.pb[1] = gm.pb[0], gm.pe[1] = gm.pe[0];
    gm.in[0] = gm.out[0] = gm.k[0] = gm.s[0] = gm.d[0] = 1;
    gm.pb[0] = gm.pe[0] = 0;
  }
  int64_t pe[2];
  for (int i = 0; i < 2; i++) {
    int64_t eff = (gm.k[i] - 1) * gm.d[i] + 1;
    int64_t extra = (gm.out[i] - 1) * gm.s[i] + eff - (gm.in[i] + gm.pb[i] + gm.pe[i]);
    pe[i] = gm.pe[i] + (extra > 0 ? extra : 0);
    int64_t xo = (gm.in[i] + gm.pb[i] + pe[i] - eff) / gm.s[i] + 1;
    int64_t yd = nsp == 1 ? (i == 0 ? 1 : Y->dims[2]) : Y->dims[2 + i];
    if (gm.out[i] != yd || xo != gm.out[i])
      return fail(c, n, "output size %lld along spatial dim %d is not XNNPACK's %lld", (long long)yd, i,
                  (long long)xo);
    if (gm.pb[i] > UINT32_MAX || pe[i] > UINT32_MAX || gm.k[i] > UINT32_MAX || gm.s[i] > UINT32_MAX || gm.d[i] > UINT32_MAX)
      return fail(c, n, "window parameters too large");
  }
  o->pt = (uint32_t)gm.pb[0], o->pl = (uint32_t)gm.pb[1], o->pb = (uint32_t)pe[0], o->pr = (uint32_t)pe[1];
  o->kh = (uint32_t)gm.k[0], o->kw = (uint32_t)gm.k[1], o->sh = (uint32_t)gm.s[0], o->sw = (uint32_t)gm.s[1];
  o->dh = (uint32_t)gm.d[0], o->dw = (uint32_t)gm.d[1];
  return 0;
}

/* NCHW order == NHWC order for this shape (a layout-free reshape in NHWC mode). */
static int layout_free(const bctx *c, int v) {
  const alma_tensor *t = &c->shape[v];
  if (c->P->nhwc && t->rank == 3) return t->dims[1] == 1 || t->dims[2] == 1;
  return !c->P->nhwc || t->rank != 4 || t->dims[1] == 1 || t->dims[2] * t->dims[3] == 1;
}

static int define_qnode(bctx *c, int ni);
static int define_qadd(bctx *c, int ni);

/* A fused node's epilogue (FusedConv's + Z, an activation XNNPACK computes as a node of its own):
 * epilogue_in gives the value the conv/fc writes (a new internal one when an epilogue follows,
 * else y itself) and the clamp that conv/fc applies (none when an epilogue op takes it);
 * epilogue then defines the ops from that value t to y. */
static int has_epilogue(const xrt_node *xn) { return xn->zslot >= 0 || (xn->fact.kind != ALMA_ACT_NONE && !xn->act_clamp); }

static int temp_like(bctx *c, const alma_node *n, int y, uint32_t *out) {
  size_t d[XNN_MAX_TENSOR_DIMS];
  int r = xdims(c, y, d);
  if (r < 0) return fail(c, n, "output: rank 1 to %d with non-empty dims needed", XNN_MAX_TENSOR_DIMS);
  XTRY(c, n, xnn_define_tensor_value(c->sg, xnn_datatype_fp32, (size_t)r, d, NULL, XNN_INVALID_VALUE_ID, 0, out));
  return 0;
}

static int epilogue_in(bctx *c, const alma_node *n, const xrt_node *xn, int y, uint32_t *t, float *lo, float *hi) {
  if (!has_epilogue(xn)) return 0;
  if (temp_like(c, n, y, t)) return -1;
  *lo = -INFINITY;
  *hi = INFINITY;
  return 0;
}

static int epilogue(bctx *c, const alma_node *n, const xrt_node *xn, int y, uint32_t t, uint32_t yi) {
  if (!has_epilogue(xn)) return 0;
  int act_op = xn->fact.kind != ALMA_ACT_NONE && !xn->act_clamp;
  if (xn->zslot >= 0) {
    /* + Z, with the clamp when the activation is one (or none follows) */
    uint32_t zi, si = yi;
    int zv = n->inputs[xn->zslot];
    if (vid(c, n, zv, &zi)) return -1;
    if (c->shape[zv].rank != 4) return fail(c, n, "residual of rank %d", c->shape[zv].rank);
    if (act_op && temp_like(c, n, y, &si)) return -1;
    XTRY(c, n, xnn_define_add2(c->sg, act_op ? -INFINITY : xn->out_min, act_op ? INFINITY : xn->out_max, t, zi, si, 0));
    if (!act_op) return 0;
    t = si;
  }
  switch (xn->fact.kind) {
    case ALMA_ACT_HARDSWISH: XTRY(c, n, xnn_define_hardswish(c->sg, t, yi, 0)); break;
    case ALMA_ACT_SIGMOID: XTRY(c, n, xnn_define_sigmoid(c->sg, t, yi, 0)); break;
    case ALMA_ACT_LEAKYRELU: XTRY(c, n, xnn_define_leaky_relu(c->sg, xn->fact.p0, t, yi, 0)); break;
    case ALMA_ACT_SILU: {
      uint32_t s;
      if (temp_like(c, n, y, &s)) return -1;
      XTRY(c, n, xnn_define_sigmoid(c->sg, t, s, 0));
      XTRY(c, n, xnn_define_multiply2(c->sg, -INFINITY, INFINITY, t, s, yi, 0));
      break;
    }
    default: return fail(c, n, "activation without an XNNPACK node");
  }
  return 0;
}

static int define_node(bctx *c, int ni) {
  const alma_graph *g = c->p->g;
  const alma_node *n = &g->nodes[ni];
  const xrt_node *xn = &c->p->xn[ni];
  if (xn->q) return define_qnode(c, ni);
  if (xn->qadd) return define_qadd(c, ni);
  int x = xn->qpass ? g->nodes[xn->qdq].inputs[0] : n->inputs[0]; /* qpass: the 8-bit value itself */
  int y = xn->fused_act >= 0 ? g->nodes[xn->fused_act].outputs[0] : n->outputs[0];
  float lo = xn->out_min, hi = xn->out_max;
  uint32_t xi = XNN_INVALID_VALUE_ID, yi, wi, bi = XNN_INVALID_VALUE_ID;
  if (xn->kind != XK_BINARY && vid(c, n, x, &xi)) return -1;
  if (vid(c, n, y, &yi)) return -1;
  if (c->shape[n->outputs[0]].rank != xn->out_rank && xn->kind != XK_NONE)
    return fail(c, n, "output rank %d differs from the rank %d the partition was planned with", c->shape[n->outputs[0]].rank,
                xn->out_rank);
  switch (xn->kind) {
    case XK_CONV:
    case XK_DWCONV: {
      const alma_tensor *W = alma__xrt_cst(g, c->p->cval, n->inputs[1]);
      int64_t k[2] = {W->dims[2], W->rank == 4 ? W->dims[3] : 1}; /* rank 3: k[0] alone is read */
      geo2 o;
      if (geometry(c, n, x, n->outputs[0], k, 1, 0, &o)) return -1;
      if (sid(c, n, &xn->w, &wi) || sid(c, n, &xn->b, &bi)) return -1;
      int64_t G = alma__attr_i(n, "group", 1), O = W->dims[0], Ig = W->dims[1];
      if (c->shape[x].dims[1] != Ig * G) return fail(c, n, "input has %lld channels, the weights need %lld",
                                                     (long long)c->shape[x].dims[1], (long long)(Ig * G));
      uint32_t ti = yi;
      if (epilogue_in(c, n, xn, y, &ti, &lo, &hi)) return -1;
      if (xn->kind == XK_CONV)
        XTRY(c, n, xnn_define_convolution_2d(c->sg, o.pt, o.pr, o.pb, o.pl, o.kh, o.kw, o.sh, o.sw, o.dh, o.dw, (uint32_t)G,
                                             (size_t)Ig, (size_t)(O / G), lo, hi, xi, wi, bi, ti, 0));
      else
        XTRY(c, n, xnn_define_depthwise_convolution_2d(c->sg, o.pt, o.pr, o.pb, o.pl, o.kh, o.kw, o.sh, o.sw, o.dh, o.dw,
                                                       (uint32_t)(O / G), (size_t)G, lo, hi, xi, wi, bi, ti, 0));
      return epilogue(c, n, xn, y, ti, yi);
    }
    case XK_FC: {
      if (sid(c, n, &xn->w, &wi) || (xn->b.data && sid(c, n, &xn->b, &bi))) return -1;
      uint32_t ti = yi;
      if (epilogue_in(c, n, xn, y, &ti, &lo, &hi)) return -1;
      XTRY(c, n, xnn_define_fully_connected(c->sg, lo, hi, xi, wi, bi, ti, 0));
      return epilogue(c, n, xn, y, ti, yi);
    }
    case XK_MAXPOOL:
    case XK_AVGPOOL: {
      const int64_t *ks = NULL;
      alma__attr_ints(n, "kernel_shape", &ks);
      int is_max = xn->kind == XK_MAXPOOL;
      int with_dil = is_max ? n->since_version >= 10 : n->since_version >= 19;
      int ceil_mode = n->since_version >= 10 ? alma__attr_i(n, "ceil_mode", 0) != 0 : 0;
      geo2 o;
      if (geometry(c, n, x, n->outputs[0], ks, with_dil, ceil_mode, &o)) return -1;
      int padded = (o.pt | o.pl | o.pb | o.pr) != 0;
      if (is_max) {
        /* XNNPACK reads the nearest edge pixel for a padded tap, which leaves a max unchanged
         * only without dilation and when every window holds an input pixel */
        if (padded && (o.dh > 1 || o.dw > 1)) return fail(c, n, "dilated max pooling with padding");
        if (o.pt >= o.kh || o.pb >= o.kh || o.pl >= o.kw || o.pr >= o.kw) return fail(c, n, "padding as large as the window");
        XTRY(c, n, xnn_define_max_pooling_2d(c->sg, o.pt, o.pr, o.pb, o.pl, o.kh, o.kw, o.sh, o.sw, o.dh, o.dw, lo, hi, xi, yi, 0));
      } else {
        /* XNNPACK averages over the taps inside the input: count_include_pad = 0 */
        if (padded && alma__attr_i(n, "count_include_pad", 0)) return fail(c, n, "count_include_pad with padding");
        if (o.dh > 1 || o.dw > 1) return fail(c, n, "dilated average pooling");
        XTRY(c, n, xnn_define_average_pooling_2d(c->sg, o.pt, o.pr, o.pb, o.pl, o.kh, o.kw, o.sh, o.sw, lo, hi, xi, yi, 0));
      }
      return 0;
    }
    case XK_GAP:
      XTRY(c, n, xnn_define_global_average_pooling_2d(c->sg, lo, hi, xi, yi, 0));
      return 0;
    case XK_BINARY: {
      uint32_t a[2];
      for (int k = 0; k < 2; k++)
        if (k == xn->cst_slot ? sid(c, n, &xn->w, &a[k]) : vid(c, n, n->inputs[k], &a[k])) return -1;
      for (int k = 0; k < 2; k++)
        if (k != xn->cst_slot && c->P->nhwc && xn->out_rank == 4 && c->shape[n->inputs[k]].rank != 4)
          return fail(c, n, "operand of rank %d in an NHWC partition", c->shape[n->inputs[k]].rank);
      switch (xn->sub) {
        case XB_ADD: XTRY(c, n, xnn_define_add2(c->sg, lo, hi, a[0], a[1], yi, 0)); break;
        case XB_SUB: XTRY(c, n, xnn_define_subtract(c->sg, lo, hi, a[0], a[1], yi, 0)); break;
        case XB_MUL: XTRY(c, n, xnn_define_multiply2(c->sg, lo, hi, a[0], a[1], yi, 0)); break;
        case XB_DIV: XTRY(c, n, xnn_define_divide(c->sg, lo, hi, a[0], a[1], yi, 0)); break;
        case XB_MAX: XTRY(c, n, xnn_define_maximum2(c->sg, a[0], a[1], yi, 0)); break;
        case XB_MIN: XTRY(c, n, xnn_define_minimum2(c->sg, a[0], a[1], yi, 0)); break;
      }
      return 0;
    }
    case XK_UNARY:
      switch (xn->sub) {
        case XU_ABS: XTRY(c, n, xnn_define_abs(c->sg, xi, yi, 0)); break;
        case XU_NEG: XTRY(c, n, xnn_define_negate(c->sg, xi, yi, 0)); break;
        case XU_FLOOR: XTRY(c, n, xnn_define_floor(c->sg, xi, yi, 0)); break;
        case XU_CEIL: XTRY(c, n, xnn_define_ceiling(c->sg, xi, yi, 0)); break;
        case XU_SQRT: XTRY(c, n, xnn_define_square_root(c->sg, xi, yi, 0)); break;
        case XU_ROUND: XTRY(c, n, xnn_define_bankers_rounding(c->sg, xi, yi, 0)); break;
        case XU_SIGMOID: XTRY(c, n, xnn_define_sigmoid(c->sg, xi, yi, 0)); break;
        case XU_HARDSWISH: XTRY(c, n, xnn_define_hardswish(c->sg, xi, yi, 0)); break;
      }
      return 0;
    case XK_CLAMP:
      XTRY(c, n, xnn_define_clamp(c->sg, lo, hi, xi, yi, 0));
      return 0;
    case XK_LEAKY:
      XTRY(c, n, xnn_define_leaky_relu(c->sg, xn->alpha, xi, yi, 0));
      return 0;
    case XK_ELU:
      XTRY(c, n, xnn_define_elu(c->sg, xn->alpha, xi, yi, 0));
      return 0;
    case XK_SOFTMAX:
      XTRY(c, n, xnn_define_softmax(c->sg, xi, yi, 0));
      return 0;
    case XK_RESHAPE: {
      /* sub 1: a Flatten whose readers take the NHWC order (their weights are reordered) */
      int perm_ok = xn->sub == 1 && c->shape[x].rank == 4 && c->shape[x].dims[1] == xn->flat_c &&
                    c->shape[x].dims[2] * c->shape[x].dims[3] == xn->flat_hw;
      if (!perm_ok && (!layout_free(c, x) || !layout_free(c, y))) return fail(c, n, "the reshape reorders NHWC data");
      size_t d[XNN_MAX_TENSOR_DIMS];
      int r = xdims(c, y, d);
      XTRY(c, n, xnn_define_static_reshape(c->sg, (size_t)r, d, xi, yi, 0));
      return 0;
    }
    case XK_PRELU:
      if (c->shape[x].rank != 4 || c->shape[x].dims[1] != xn->chans) return fail(c, n, "slope does not match the channels");
      if (sid(c, n, &xn->w, &wi)) return -1;
      XTRY(c, n, xnn_define_prelu(c->sg, xi, wi, yi, 0));
      return 0;
    case XK_BN: {
      uint32_t t, bb;
      if (c->shape[x].dims[1] != xn->chans) return fail(c, n, "input channels differ from the statistics'");
      size_t d[XNN_MAX_TENSOR_DIMS];
      int r = xdims(c, x, d);
      XTRY(c, n, xnn_define_tensor_value(c->sg, xnn_datatype_fp32, (size_t)r, d, NULL, XNN_INVALID_VALUE_ID, 0, &t));
      if (sid(c, n, &xn->w, &wi) || sid(c, n, &xn->b, &bb)) return -1;
      XTRY(c, n, xnn_define_multiply2(c->sg, -INFINITY, INFINITY, xi, wi, t, 0));
      XTRY(c, n, xnn_define_add2(c->sg, lo, hi, t, bb, yi, 0));
      return 0;
    }
    case XK_QUANT:
    case XK_DEQUANT:
      XTRY(c, n, xnn_define_convert(c->sg, xi, yi, 0));
      return 0;
    case XK_PAD: {
      size_t pre[XNN_MAX_TENSOR_DIMS], post[XNN_MAX_TENSOR_DIMS];
      int r = c->shape[x].rank;
      for (int i = 0; i < r; i++) {
        /* NHWC: ONNX axis 1 (C) is XNNPACK's last */
        int s = c->P->nhwc && r == 4 ? (i == 0 ? 0 : i == 3 ? 1 : i + 1) : i;
        pre[i] = (size_t)xn->pad_pre[s];
        post[i] = (size_t)xn->pad_post[s];
      }
      XTRY(c, n, xnn_define_static_constant_pad(c->sg, pre, post, xn->alpha, xi, yi, 0));
      return 0;
    }
  }
  return fail(c, n, "not an XNNPACK node");
}

/* A convolution or fully-connected node computed in 8 bits: a QLinearConv / QLinearMatMul, or the
 * head of a QDQ cluster, which reads the DequantizeLinear's 8-bit input and writes the
 * QuantizeLinear's output (or, before a MaxPool, its own clamped output in Q's parameters). A
 * fully-connected node is a 1x1 convolution over [M, 1, 1, K]. */
static int define_qnode(bctx *c, int ni) {
  const xrt_plan *p = c->p;
  const alma_graph *g = p->g;
  const alma_node *n = &g->nodes[ni];
  const xrt_node *xn = &p->xn[ni];
  const xrt_qstatic *s = &xn->qw;
  int xq = xn->qlin ? n->inputs[0] : g->nodes[xn->qdq].inputs[0];
  int y = xn->fused_act >= 0 ? g->nodes[xn->fused_act].outputs[0] : n->outputs[0];
  const xrt_vq *vx = &p->vq[xq], *vy = &p->vq[y];
  if (!vx->q || !vy->q || vx->dom != xn->q || vy->dom != xn->q) return fail(c, n, "8-bit values in another XNNPACK type");
  uint32_t xi, yi, wi, bi = XNN_INVALID_VALUE_ID;
  if (vid(c, n, xq, &xi) || vid(c, n, y, &yi)) return -1;
  size_t bd[1] = {s->chans};
  if (xn->q == XQ_S8) {
    XTRY(c, n, xnn_define_channelwise_quantized_tensor_value(c->sg, xnn_datatype_qcint8, s->ws, 4, xn->kind == XK_DWCONV ? 3 : 0,
                                                             s->dims, s->w, XNN_INVALID_VALUE_ID, 0, &wi));
    if (s->b)
      XTRY(c, n, xnn_define_channelwise_quantized_tensor_value(c->sg, xnn_datatype_qcint32, s->bs, 1, 0, bd, s->b,
                                                               XNN_INVALID_VALUE_ID, 0, &bi));
  } else {
    XTRY(c, n, xnn_define_quantized_tensor_value(c->sg, xnn_datatype_quint8, s->wzp, s->ws1, 4, s->dims, s->w,
                                                 XNN_INVALID_VALUE_ID, 0, &wi));
    if (s->b)
      XTRY(c, n, xnn_define_quantized_tensor_value(c->sg, xnn_datatype_qint32, 0, s->bs[0], 1, bd, s->b, XNN_INVALID_VALUE_ID,
                                                   0, &bi));
  }
  float lo, hi;
  alma__xrt_qclamp(vy, xn->out_min, xn->out_max, &lo, &hi);
  enum xnn_datatype qt = xn->q == XQ_S8 ? xnn_datatype_qint8 : xnn_datatype_quint8;
  if (xn->kind == XK_FC) {
    /* [..., K] -> [M, 1, 1, K] -> conv -> [M, 1, 1, N] -> [..., N] */
    const alma_tensor *X = &c->shape[xq], *Y = &c->shape[y];
    size_t K = s->dims[3], N = s->chans, M = (size_t)alma_tensor_numel(X) / (K ? K : 1);
    if (X->rank < 1 || (size_t)X->dims[X->rank - 1] != K || Y->rank < 1 || (size_t)Y->dims[Y->rank - 1] != N ||
        (size_t)alma_tensor_numel(Y) != M * N || M == 0)
      return fail(c, n, "matrix shapes do not match the weights");
    size_t d4[4] = {M, 1, 1, K}, o4[4] = {M, 1, 1, N};
    uint32_t x4, y4;
    XTRY(c, n, xnn_define_quantized_tensor_value(c->sg, qt, vx->zp, vx->scale, 4, d4, NULL, XNN_INVALID_VALUE_ID, 0, &x4));
    XTRY(c, n, xnn_define_quantized_tensor_value(c->sg, qt, vy->zp, vy->scale, 4, o4, NULL, XNN_INVALID_VALUE_ID, 0, &y4));
    XTRY(c, n, xnn_define_static_reshape(c->sg, 4, d4, xi, x4, 0));
    XTRY(c, n, xnn_define_convolution_2d(c->sg, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, K, N, lo, hi, x4, wi, bi, y4, 0));
    size_t yd[XNN_MAX_TENSOR_DIMS];
    int r = xdims(c, y, yd);
    XTRY(c, n, xnn_define_static_reshape(c->sg, (size_t)r, yd, y4, yi, 0));
    return 0;
  }
  int64_t k[2] = {s->dims[1], s->dims[2]};
  geo2 o;
  /* the geometry from the node's own input and output shapes (8-bit or float: the same dims) */
  if (geometry(c, n, n->inputs[0], n->outputs[0], k, 1, 0, &o)) return -1;
  int64_t G = alma__attr_i(n, "group", 1), O = (int64_t)s->chans;
  int64_t Ig = xn->kind == XK_DWCONV ? 1 : (int64_t)s->dims[3];
  if (c->shape[xq].dims[1] != Ig * G)
    return fail(c, n, "input has %lld channels, the weights need %lld", (long long)c->shape[xq].dims[1], (long long)(Ig * G));
  if (xn->kind == XK_CONV)
    XTRY(c, n, xnn_define_convolution_2d(c->sg, o.pt, o.pr, o.pb, o.pl, o.kh, o.kw, o.sh, o.sw, o.dh, o.dw, (uint32_t)G,
                                         (size_t)Ig, (size_t)(O / G), lo, hi, xi, wi, bi, yi, 0));
  else
    XTRY(c, n, xnn_define_depthwise_convolution_2d(c->sg, o.pt, o.pr, o.pb, o.pl, o.kh, o.kw, o.sh, o.sw, o.dh, o.dw,
                                                   (uint32_t)(O / G), (size_t)G, lo, hi, xi, wi, bi, yi, 0));
  return 0;
}

/* The Add of a quantized residual: XNNPACK's add of the two 8-bit operands (each with its own scale
 * and zero point, numpy broadcasting) writing the QuantizeLinear's output, with the folded
 * Relu/Clip as its quantized clamp. */
static int define_qadd(bctx *c, int ni) {
  const xrt_plan *p = c->p;
  const alma_graph *g = p->g;
  const alma_node *n = &g->nodes[ni];
  const xrt_node *xn = &p->xn[ni];
  int a = g->nodes[xn->qdq].inputs[0], b = g->nodes[xn->qdq2].inputs[0], y = g->nodes[xn->qquant].outputs[0];
  const xrt_vq *va = &p->vq[a], *vb = &p->vq[b], *vy = &p->vq[y];
  if (!va->q || !vb->q || !vy->q || va->dom != vy->dom || vb->dom != vy->dom)
    return fail(c, n, "8-bit values in different XNNPACK types");
  if (c->P->nhwc && c->shape[y].rank == 4 && (c->shape[a].rank != 4 || c->shape[b].rank != 4))
    return fail(c, n, "operand of rank %d in an NHWC partition", c->shape[a].rank != 4 ? c->shape[a].rank : c->shape[b].rank);
  uint32_t ai, bi, yi;
  if (vid(c, n, a, &ai) || vid(c, n, b, &bi) || vid(c, n, y, &yi)) return -1;
  float lo, hi;
  alma__xrt_qclamp(vy, xn->out_min, xn->out_max, &lo, &hi);
  XTRY(c, n, xnn_define_add2(c->sg, lo, hi, ai, bi, yi, 0));
  return 0;
}

static void *buf_alloc(size_t bytes) {
  void *p = NULL;
  if (posix_memalign(&p, 64, bytes + XNN_EXTRA_BYTES)) return NULL;
  memset((char *)p + bytes, 0, XNN_EXTRA_BYTES);
  return p;
}

void alma__xrt_build_free(xrt_build *b) {
  if (!b) return;
  if (b->rt) xnn_delete_runtime(b->rt);
  b->rt = NULL;
  free(b->sig);
  b->sig = NULL;
  for (int i = 0; b->in_buf && i < b->n_in; i++) free(b->in_buf[i]);
  for (int i = 0; b->out_buf && i < b->n_out; i++) free(b->out_buf[i]);
  free(b->in_buf);
  free(b->out_buf);
  free(b->ext);
  b->in_buf = b->out_buf = NULL;
  b->ext = NULL;
}

/* A partition of element-wise and data-movement nodes whose values hold at most XRT_TINY_ELEMS
 * elements together (a decode step's [2, hidden] Adds and Muls): split over the pool it costs more
 * in the hand-off (waking a worker, waiting for it on a shared core) than it saves, so its runtime
 * runs on the calling thread. */
#define XRT_TINY_ELEMS 16384
static int tiny(const xrt_plan *p, const xrt_part *P, const alma_tensor *shape) {
  int64_t total = 0;
  for (int k = 0; k < P->n_nodes; k++) {
    int ni = P->nodes[k], kind = p->xn[ni].kind;
    if (kind == XK_CONV || kind == XK_DWCONV || kind == XK_FC || kind == XK_MAXPOOL || kind == XK_AVGPOOL ||
        kind == XK_GAP || p->xn[ni].q || p->xn[ni].qlin)
      return 0;
    const alma_node *n = &p->g->nodes[ni];
    for (int o = 0; o < n->n_outputs; o++)
      if (n->outputs[o] >= 0) total += alma__numel(shape[n->outputs[o]].rank, shape[n->outputs[o]].dims);
  }
  return total <= XRT_TINY_ELEMS;
}

alma_status alma__xrt_build(xrt_plan *p, xrt_part *P, const alma_tensor *shape, xrt_build *b) {
  const alma_graph *g = p->g;
  bctx c = {.p = p, .P = P, .shape = shape, .b = b};
  c.id = malloc(sizeof(uint32_t) * ((size_t)g->n_values + 1));
  b->in_buf = calloc((size_t)P->n_in + 1, sizeof(void *));
  b->out_buf = calloc((size_t)P->n_out + 1, sizeof(void *));
  b->ext = calloc((size_t)(P->n_in + P->n_out) + 1, sizeof *b->ext);
  b->n_in = P->n_in;
  b->n_out = P->n_out;
  if (!c.id || !b->in_buf || !b->out_buf || !b->ext) {
    free(c.id);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory building an XNNPACK partition");
  }
  for (int v = 0; v < g->n_values; v++) c.id[v] = XNN_INVALID_VALUE_ID;
  enum xnn_status xst = xnn_create_subgraph((uint32_t)(P->n_in + P->n_out), 0, &c.sg);
  if (xst != xnn_status_success) {
    fail(&c, NULL, "xnn_create_subgraph: %s", xs(xst));
    c.sg = NULL;
  }
  int bad = c.sg == NULL;
  for (int i = 0; !bad && i < P->n_in + P->n_out; i++) {
    int in = i < P->n_in, v = in ? P->in[i] : P->out[i - P->n_in];
    size_t d[XNN_MAX_TENSOR_DIMS];
    int r = xdims(&c, v, d);
    if (r < 0) {
      bad = fail(&c, NULL, "boundary value '%s': rank 1 to %d with non-empty dims needed", g->values[v].name, XNN_MAX_TENSOR_DIMS);
      break;
    }
    xst = define_value(&c, v, (size_t)r, d, (uint32_t)i, in ? XNN_VALUE_FLAG_EXTERNAL_INPUT : XNN_VALUE_FLAG_EXTERNAL_OUTPUT,
                       &c.id[v]);
    if (xst != xnn_status_success) bad = fail(&c, NULL, "defining boundary value '%s': %s", g->values[v].name, xs(xst));
    b->ext[i].id = (uint32_t)i;
    size_t numel = p->vq[v].q ? 1 : sizeof(float); /* bytes */
    for (int k = 0; k < r; k++) numel *= d[k];
    /* inputs always go through a padded buffer (XNNPACK reads up to XNN_EXTRA_BYTES past the
     * end); NHWC outputs are staged and reordered, other outputs are written in place */
    if (in) {
      if (!(b->in_buf[i] = buf_alloc(numel))) bad = 1;
    } else if (P->nhwc && r == 4) {
      if (!(b->out_buf[i - P->n_in] = buf_alloc(numel))) bad = 1;
    }
    if (bad && !b->failed) {
      free(c.id);
      xnn_delete_subgraph(c.sg);
      return alma__errorf(ALMA_ERR_NOMEM, "out of memory building an XNNPACK partition");
    }
  }
  for (int k = 0; !bad && k < P->n_nodes; k++)
    if (p->xn[P->nodes[k]].fused_into < 0 && define_node(&c, P->nodes[k])) bad = 1;
  if (!bad) {
    /* pthreadpool's workers sleep after the subgraph's last operator instead of spinning while
     * alma's kernels (EAGER nodes, the plan's own pool: runtimes/pool.c) run between subgraphs */
    xst = xnn_create_runtime_v2(c.sg, tiny(p, P, shape) ? NULL : p->pool, XNN_FLAG_YIELD_WORKERS, &b->rt);
    if (xst == xnn_status_out_of_memory) { /* not a shape XNNPACK rejects: EAGER would need it too */
      b->rt = NULL;
      xnn_delete_subgraph(c.sg);
      free(c.id);
      return alma__errorf(ALMA_ERR_NOMEM, "out of memory creating an XNNPACK runtime (xnn_create_runtime_v2)");
    }
    if (xst != xnn_status_success) {
      b->rt = NULL;
      fail(&c, NULL, "xnn_create_runtime_v2: %s", xs(xst));
    }
  }
  if (c.sg) xnn_delete_subgraph(c.sg);
  free(c.id);
  return ALMA_OK;
}

#endif
