/* Neural-network operators beyond alma's core set: GroupNormalization, LpNormalization,
 * MeanVarianceNormalization, Hardmax, LpPool, MaxUnpool, Col2Im, DeformConv and the simple RNN.
 *
 * The numeric kernels are written once and compiled for float (float32, and float16/bfloat16
 * through float32 copies) and for double (float64): this file includes itself with XN_REAL set,
 * the way rnn.c does, so the float32 paths are plain typed loops. Statistics (means, variances)
 * accumulate in double in both. */
#ifndef XN_REAL

#include <math.h>
#include <strings.h>

#include "ops/nn_util.h"
#include "ops/op_args.h"
#include "ops/sgemm.h"

static alma_status need_float(const alma_node *n, const alma_tensor *t, const char *what) {
  if (!alma__dtype_is_float(t->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "%s dtype %s (expects a floating-point type)", what, alma_dtype_name(t->dtype));
  return ALMA_OK;
}

static alma_status same_dtype(const alma_node *n, const alma_tensor *a, const alma_tensor *b, const char *what) {
  if (b && b->dtype != a->dtype)
    return alma__op_error(n, ALMA_ERR_TYPE, "%s dtype %s differs from the input's %s", what, alma_dtype_name(b->dtype),
                          alma_dtype_name(a->dtype));
  return ALMA_OK;
}

/* ---- configurations shared by both instantiations ----------------------------------------- */
typedef struct {
  int64_t N, C, G, S; /* batch, channels, groups, spatial elements per channel */
  double eps;
  int per_group; /* opset 18: scale/bias per group; 21: per channel */
} gn_cfg;

typedef struct {
  int64_t outer, len, inner;
} axis_view;

typedef struct {
  alma__nn_geom g;
  int64_t NC;
  double p;
} lpp_cfg;

typedef struct {
  int nsp;
  int64_t NC, img[ALMA_MAX_RANK], blk[ALMA_MAX_RANK], nb[ALMA_MAX_RANK];
  int64_t s[ALMA_MAX_RANK], d[ALMA_MAX_RANK], pb[ALMA_MAX_RANK];
} c2i_cfg;

typedef struct {
  int64_t N, C, H, W, OC, group, og, kh, kw, sh, sw, dh, dw, ph, pw, oH, oW;
  int has_mask, has_bias;
} dc_cfg;

enum {
  ACT_RELU, ACT_TANH, ACT_SIGMOID, ACT_AFFINE, ACT_LEAKYRELU, ACT_THRESHOLDEDRELU, ACT_SCALEDTANH,
  ACT_HARDSIGMOID, ACT_ELU, ACT_SOFTSIGN, ACT_SOFTPLUS
};

typedef struct {
  int kind;
  float alpha, beta;
} rnn_act;

typedef struct {
  int64_t S, B, I, H;
  int ndir, reverse, layout, has_clip;
  float clip;
  rnn_act act[2];
} rnn_cfg;

/* Runs a float kernel on inputs converted to float32 (or double for float64 data): inputs are
 * borrowed when they already have the type, the output goes through a scratch buffer otherwise. */
typedef struct {
  const void *p[6];
  int owned[6];
  void *y[2];
  int y_owned[2];
} xn_bufs;

static alma_status xn_prepare(const alma_node *n, int dbl, const alma_tensor *const *ts, int nt, alma_tensor *ys,
                              int ny, xn_bufs *b) {
  memset(b, 0, sizeof *b);
  for (int i = 0; i < nt; i++) {
    if (!ts[i]) continue;
    b->p[i] = dbl ? (const void *)alma__nn_as_f64(ts[i], &b->owned[i]) : (const void *)alma__nn_as_f32(ts[i], &b->owned[i]);
    if (!b->p[i]) return alma__error_prefix(ALMA_ERR_NOMEM, "node '%s' (%s): ", n->name, n->op_type);
  }
  alma_dtype want = dbl ? ALMA_DTYPE_FLOAT64 : ALMA_DTYPE_FLOAT32;
  for (int k = 0; k < ny; k++) {
    if (!ys[k].data) continue; /* omitted optional output */
    if (ys[k].dtype == want) {
      b->y[k] = ys[k].data;
    } else {
      /* zeroed like the outputs themselves: some kernels accumulate or skip elements */
      int64_t cnt = alma_tensor_numel(&ys[k]);
      b->y[k] = alma__calloc((size_t)(cnt ? cnt : 1), dbl ? sizeof(double) : sizeof(float));
      if (!b->y[k]) return alma__op_error(n, ALMA_ERR_NOMEM, "out of memory for a %lld-element output buffer", (long long)cnt);
      b->y_owned[k] = 1;
    }
  }
  return ALMA_OK;
}

static void xn_finish(int dbl, alma_tensor *ys, int ny, xn_bufs *b, int ok) {
  for (int k = 0; k < ny; k++)
    if (b->y_owned[k]) {
      if (ok) {
        if (dbl) alma__nn_store_f64(&ys[k], b->y[k]);
        else alma__nn_store_f32(&ys[k], b->y[k]);
      }
      free(b->y[k]);
    }
  for (int i = 0; i < 6; i++)
    if (b->owned[i]) free((void *)b->p[i]);
}

#define XN_REAL float
#define XN_IS_DOUBLE 0
#define XN(name) name##_f32
#include "ops/extra_nn.c"
#undef XN_REAL
#undef XN_IS_DOUBLE
#undef XN
#define XN_REAL double
#define XN_IS_DOUBLE 1
#define XN(name) name##_f64
#include "ops/extra_nn.c"
#undef XN_REAL
#undef XN_IS_DOUBLE
#undef XN

/* Calls the float or double kernel NAME with the prepared buffers (ARGS use b.p / b.y). */
#define XN_DISPATCH(dbl, st, name, ...)                  \
  do {                                                   \
    if (dbl) st = name##_f64(__VA_ARGS__);               \
    else st = name##_f32(__VA_ARGS__);                   \
  } while (0)

/* ==== GroupNormalization ========================================================================
 * x [N, C, ...] in num_groups groups of C / num_groups channels; each group of each sample is
 * normalized by its own mean and (population) variance, then scaled and shifted per group
 * (opset 18) or per channel (opset 21). */
static alma_status gn_read(const alma_node *n, const alma_tensor *const *in, int nin, gn_cfg *c) {
  const alma_tensor *x = in[0], *sc = alma__nn_in(in, nin, 1), *bi = alma__nn_in(in, nin, 2);
  if (!sc || !bi) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "scale and bias are required");
  ALMA_TRY(need_float(n, x, "input"));
  ALMA_TRY(same_dtype(n, x, sc, "scale"));
  ALMA_TRY(same_dtype(n, x, bi, "bias"));
  const alma_attr *ng = alma__node_attr(n, "num_groups");
  if (!ng) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "num_groups is required");
  if (x->rank < 2) return alma__op_error(n, ALMA_ERR_SHAPE, "input rank %d (expects [N, C, ...])", x->rank);
  c->N = x->dims[0], c->C = x->dims[1], c->G = ng->i, c->S = alma__numel(x->rank - 2, x->dims + 2);
  if (c->G < 1 || c->C % c->G)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "num_groups=%lld does not divide %lld channels", (long long)c->G,
                          (long long)c->C);
  c->per_group = n->since_version < 21;
  int64_t want = c->per_group ? c->G : c->C;
  if (sc->rank != 1 || sc->dims[0] != want || bi->rank != 1 || bi->dims[0] != want)
    return alma__op_error(n, ALMA_ERR_SHAPE, "scale/bias have %lld/%lld values (expects %lld: one per %s at opset %d)",
                          (long long)alma_tensor_numel(sc), (long long)alma_tensor_numel(bi), (long long)want,
                          c->per_group ? "group" : "channel", n->since_version);
  c->eps = alma__attr_f(n, "epsilon", 1e-5f);
  if (!(c->eps >= 0)) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "epsilon=%g", c->eps);
  /* stash_type names the precision of the statistics; alma keeps them in double, at least as precise */
  int64_t stash = alma__attr_i(n, "stash_type", 1);
  if (stash != 1 && stash != 10 && stash != 11 && stash != 16)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "stash_type=%lld (expects a floating-point type)", (long long)stash);
  return ALMA_OK;
}

static alma_status gn_infer(INFER_ARGS) {
  gn_cfg c;
  ALMA_TRY(gn_read(n, in, nin, &c));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

static alma_status gn_exec(EXEC_ARGS) {
  gn_cfg c;
  ALMA_TRY(gn_read(n, in, nin, &c));
  int dbl = in[0]->dtype == ALMA_DTYPE_FLOAT64;
  xn_bufs b;
  alma_status st = xn_prepare(n, dbl, in, 3, out, 1, &b);
  if (st == ALMA_OK) XN_DISPATCH(dbl, st, gn_run, &c, b.p[0], b.p[1], b.p[2], b.y[0]);
  xn_finish(dbl, out, 1, &b, st == ALMA_OK);
  return st;
}

const alma_op_def alma__op_GroupNormalization = {.name = "GroupNormalization", .domain = "", .versions = {18, 21},
                                                 .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
                                                 .infer = gn_infer, .exec = gn_exec};

/* ==== LpNormalization ===========================================================================
 * x / ||x||_p along axis (p = 1 or 2). A zero norm gives zeros (as onnxruntime), not NaN. */
static alma_status lpn_read(const alma_node *n, const alma_tensor *x, axis_view *v, int *p) {
  ALMA_TRY(need_float(n, x, "input"));
  int64_t pp = alma__attr_i(n, "p", 2);
  if (pp != 1 && pp != 2) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "p=%lld (expects 1 or 2)", (long long)pp);
  *p = (int)pp;
  int64_t a = alma__attr_i(n, "axis", -1);
  if (x->rank < 1 || a < -x->rank || a >= x->rank)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis=%lld out of range for rank %d", (long long)a, x->rank);
  int ax = (int)(a < 0 ? a + x->rank : a);
  v->outer = alma__numel(ax, x->dims), v->len = x->dims[ax], v->inner = alma__numel(x->rank - ax - 1, x->dims + ax + 1);
  return ALMA_OK;
}

static alma_status lpn_infer(INFER_ARGS) {
  axis_view v;
  int p;
  ALMA_TRY(lpn_read(n, in[0], &v, &p));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

static alma_status lpn_exec(EXEC_ARGS) {
  axis_view v;
  int p;
  ALMA_TRY(lpn_read(n, in[0], &v, &p));
  int dbl = in[0]->dtype == ALMA_DTYPE_FLOAT64;
  xn_bufs b;
  alma_status st = xn_prepare(n, dbl, in, 1, out, 1, &b);
  if (st == ALMA_OK) XN_DISPATCH(dbl, st, lpn_run, &v, p, b.p[0], b.y[0]);
  xn_finish(dbl, out, 1, &b, st == ALMA_OK);
  return st;
}

const alma_op_def alma__op_LpNormalization = {.name = "LpNormalization", .domain = "", .versions = {1, 22},
                                              .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                              .infer = lpn_infer, .exec = lpn_exec};

/* ==== MeanVarianceNormalization =================================================================
 * (x - mean) / (sqrt(var) + 1e-9) over `axes` (default [0, 2, 3]), the ONNX function body. */
static alma_status mvn_read(const alma_node *n, const alma_tensor *x, unsigned *mask) {
  ALMA_TRY(need_float(n, x, "input"));
  const int64_t *ax = NULL;
  int na = alma__attr_ints(n, "axes", &ax);
  static const int64_t dflt[3] = {0, 2, 3};
  if (!alma__node_attr(n, "axes")) ax = dflt, na = 3;
  *mask = 0;
  for (int i = 0; i < na; i++) {
    if (ax[i] < -x->rank || ax[i] >= x->rank)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis %lld out of range for rank %d%s", (long long)ax[i], x->rank,
                            ax == dflt ? " (default axes [0, 2, 3])" : "");
    int a = (int)(ax[i] < 0 ? ax[i] + x->rank : ax[i]);
    if (*mask >> a & 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis %lld repeated", (long long)ax[i]);
    *mask |= 1u << a;
  }
  return ALMA_OK;
}

static alma_status mvn_infer(INFER_ARGS) {
  unsigned m;
  ALMA_TRY(mvn_read(n, in[0], &m));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

static alma_status mvn_exec(EXEC_ARGS) {
  unsigned m;
  ALMA_TRY(mvn_read(n, in[0], &m));
  int dbl = in[0]->dtype == ALMA_DTYPE_FLOAT64;
  xn_bufs b;
  alma_status st = xn_prepare(n, dbl, in, 1, out, 1, &b);
  if (st == ALMA_OK) XN_DISPATCH(dbl, st, mvn_run, n, in[0], m, b.p[0], b.y[0]);
  xn_finish(dbl, out, 1, &b, st == ALMA_OK);
  return st;
}

const alma_op_def alma__op_MeanVarianceNormalization = {.name = "MeanVarianceNormalization", .domain = "",
                                                        .versions = {9, 13}, .min_inputs = 1, .max_inputs = 1,
                                                        .min_outputs = 1, .max_outputs = 1, .infer = mvn_infer,
                                                        .exec = mvn_exec};

/* ==== Hardmax ===================================================================================
 * 1 at the first maximum, 0 elsewhere. Before opset 13 the input is coerced to 2-D at `axis`
 * (default 1) and each row of the flattened [prod(d<axis), prod(d>=axis)] matrix is one group;
 * from 13, along `axis` only (default -1). */
static alma_status hm_read(const alma_node *n, const alma_tensor *x, axis_view *v) {
  ALMA_TRY(need_float(n, x, "input"));
  int r = x->rank, v13 = n->since_version >= 13;
  int64_t a = alma__attr_i(n, "axis", v13 ? -1 : 1);
  int hi = v13 ? r - 1 : r; /* the 2-D coercion also accepts axis = rank (one column) */
  if (a < -r || a > hi || (v13 && r == 0))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis=%lld out of range for rank %d", (long long)a, r);
  int ax = (int)(a < 0 ? a + r : a);
  v->outer = alma__numel(ax, x->dims);
  if (v13) v->len = x->dims[ax], v->inner = alma__numel(r - ax - 1, x->dims + ax + 1);
  else v->len = alma__numel(r - ax, x->dims + ax), v->inner = 1;
  return ALMA_OK;
}

static alma_status hm_infer(INFER_ARGS) {
  axis_view v;
  ALMA_TRY(hm_read(n, in[0], &v));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

static alma_status hm_exec(EXEC_ARGS) {
  axis_view v;
  ALMA_TRY(hm_read(n, in[0], &v));
  const alma_tensor *x = in[0];
  for (int64_t o = 0; o < v.outer; o++)
    for (int64_t i = 0; i < v.inner; i++) {
      if (v.len == 0) continue;
      int64_t base = o * v.len * v.inner + i, best = 0;
      double bv = alma__get_f64(x->data, x->dtype, base);
      for (int64_t k = 1; k < v.len; k++) {
        double e = alma__get_f64(x->data, x->dtype, base + k * v.inner);
        if (e > bv || (isnan(e) && !isnan(bv))) best = k, bv = e; /* a NaN is the maximum, as numpy.argmax */
        if (isnan(bv)) break;
      }
      alma__set_f64(out[0].data, out[0].dtype, base + best * v.inner, 1.0);
    }
  return ALMA_OK;
}

const alma_op_def alma__op_Hardmax = {.name = "Hardmax", .domain = "", .versions = {1, 11, 13}, .min_inputs = 1,
                                      .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .infer = hm_infer,
                                      .exec = hm_exec};

/* ==== LpPool ====================================================================================
 * (sum |x|^p over the window)^(1/p); padding contributes nothing. Opset 1 took p as a float,
 * later opsets as an int; dilations and ceil_mode arrived at 18. */
static alma_status lpp_read(const alma_node *n, const alma_tensor *x, lpp_cfg *c) {
  ALMA_TRY(need_float(n, x, "input"));
  if (x->rank < 3) return alma__op_error(n, ALMA_ERR_SHAPE, "input rank %d (expects [N, C, D1, ...])", x->rank);
  int nsp = x->rank - 2;
  const int64_t *k = NULL;
  if (alma__attr_ints(n, "kernel_shape", &k) != nsp)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "kernel_shape must have %d values", nsp);
  int v18 = n->since_version >= 18;
  ALMA_TRY(alma__nn_geom_read(n, nsp, x->dims + 2, k, v18, &c->g));
  int64_t cm = v18 ? alma__attr_i(n, "ceil_mode", 0) : 0;
  if (cm != 0 && cm != 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "ceil_mode=%lld (expects 0 or 1)", (long long)cm);
  ALMA_TRY(alma__nn_geom_forward(n, &c->g, (int)cm));
  const alma_attr *pa = alma__node_attr(n, "p");
  c->p = !pa ? 2.0 : pa->type == ALMA_ATTR_FLOAT ? (double)pa->f : (double)pa->i;
  if (!(c->p > 0) || !isfinite(c->p)) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "p=%g (expects a positive value)", c->p);
  c->NC = x->dims[0] * x->dims[1];
  return ALMA_OK;
}

static alma_status lpp_infer(INFER_ARGS) {
  lpp_cfg c;
  ALMA_TRY(lpp_read(n, in[0], &c));
  int64_t dims[ALMA_MAX_RANK];
  dims[0] = in[0]->dims[0], dims[1] = in[0]->dims[1];
  for (int d = 0; d < c.g.nsp; d++) dims[d + 2] = c.g.out[d];
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, dims);
  return ALMA_OK;
}

static alma_status lpp_exec(EXEC_ARGS) {
  lpp_cfg c;
  ALMA_TRY(lpp_read(n, in[0], &c));
  if (alma_tensor_numel(&out[0]) == 0) return ALMA_OK;
  int dbl = in[0]->dtype == ALMA_DTYPE_FLOAT64;
  xn_bufs b;
  alma_status st = xn_prepare(n, dbl, in, 1, out, 1, &b);
  if (st == ALMA_OK) XN_DISPATCH(dbl, st, lpp_run, n, &c, b.p[0], b.y[0]);
  xn_finish(dbl, out, 1, &b, st == ALMA_OK);
  return st;
}

const alma_op_def alma__op_LpPool = {.name = "LpPool", .domain = "", .versions = {1, 2, 11, 18, 22}, .min_inputs = 1,
                                     .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .infer = lpp_infer,
                                     .exec = lpp_exec};

/* ==== MaxUnpool =================================================================================
 * Scatters X into a zero tensor of the inferred shape, (in - 1) * stride + kernel - pads per
 * spatial dim, at the flat indices I (over the whole tensor, as MaxPool's Indices output counts
 * them). A larger output_shape, when given, pads that tensor with zeros at the end of each dim
 * (the ONNX reference; the ONNX test data agrees). */
static alma_status mu_shape(const alma_node *n, const alma_tensor *const *in, int nin, int64_t *dims, int64_t *inferred) {
  const alma_tensor *x = in[0], *ind = alma__nn_in(in, nin, 1), *os = alma__nn_in(in, nin, 2);
  if (!ind) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "indices are required");
  ALMA_TRY(need_float(n, x, "X"));
  if (ind->dtype != ALMA_DTYPE_INT64)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "indices dtype %s (expects int64)", alma_dtype_name(ind->dtype));
  char s1[128], s2[128];
  if (x->rank < 3 || !alma__same_shape(x, ind))
    return alma__op_error(n, ALMA_ERR_SHAPE, "X %s and indices %s (expects the same [N, C, D1, ...] shape)",
                          alma__shape_str(x->rank, x->dims, s1, sizeof s1), alma__shape_str(ind->rank, ind->dims, s2, sizeof s2));
  int nsp = x->rank - 2;
  const int64_t *k = NULL;
  if (alma__attr_ints(n, "kernel_shape", &k) != nsp)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "kernel_shape must have %d values", nsp);
  alma__nn_geom g;
  ALMA_TRY(alma__nn_geom_read(n, nsp, x->dims + 2, k, 0, &g));
  dims[0] = x->dims[0], dims[1] = x->dims[1];
  for (int d = 0; d < nsp; d++) {
    dims[d + 2] = (x->dims[d + 2] - 1) * g.s[d] + g.k[d] - g.pb[d] - g.pe[d];
    if (dims[d + 2] < 0) return alma__op_error(n, ALMA_ERR_SHAPE, "negative output size along spatial dim %d", d);
  }
  memcpy(inferred, dims, sizeof(int64_t) * (size_t)x->rank);
  if (os) {
    ALMA_TRY(os->dtype == ALMA_DTYPE_INT64 ? ALMA_OK
                                           : alma__op_error(n, ALMA_ERR_UNSUPPORTED, "output_shape dtype %s (expects int64)",
                                                            alma_dtype_name(os->dtype)));
    if (os->rank != 1 || os->dims[0] != x->rank)
      return alma__op_error(n, ALMA_ERR_SHAPE, "output_shape has %lld values for rank %d", (long long)alma_tensor_numel(os),
                            x->rank);
    if (!os->data) return alma__need_value();
    const int64_t *v = os->data;
    if (v[0] != x->dims[0] || v[1] != x->dims[1])
      return alma__op_error(n, ALMA_ERR_SHAPE, "output_shape batch/channels %lld/%lld differ from X's", (long long)v[0],
                            (long long)v[1]);
    for (int d = 0; d < x->rank; d++) {
      if (v[d] < inferred[d] || v[d] > ((int64_t)1 << 40))
        return alma__op_error(n, ALMA_ERR_INVALID_ARG, "output_shape[%d]=%lld (expects at least the inferred %lld)", d,
                              (long long)v[d], (long long)inferred[d]);
      dims[d] = v[d];
    }
  }
  return ALMA_OK;
}

static alma_status mu_infer(INFER_ARGS) {
  int64_t dims[ALMA_MAX_RANK], inf[ALMA_MAX_RANK];
  ALMA_TRY(mu_shape(n, in, nin, dims, inf));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, dims);
  return ALMA_OK;
}

static alma_status mu_exec(EXEC_ARGS) {
  const alma_tensor *x = in[0];
  int64_t dims[ALMA_MAX_RANK], inf[ALMA_MAX_RANK], ost[ALMA_MAX_RANK];
  ALMA_TRY(mu_shape(n, in, nin, dims, inf));
  int r = x->rank;
  alma__strides(r, dims, ost);
  const int64_t *ind = in[1]->data;
  int64_t nx = alma_tensor_numel(x), ni = alma__numel(r, inf);
  size_t esz = alma_dtype_size(x->dtype);
  for (int64_t i = 0; i < nx; i++) {
    if (ind[i] < 0 || ind[i] >= ni)
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "index %lld outside the unpooled tensor's %lld elements", (long long)ind[i],
                            (long long)ni);
    /* coordinates in the inferred shape, placed at the same coordinates of the output */
    int64_t rem = ind[i], o = 0;
    for (int d = r - 1; d >= 0; d--) {
      o += rem % inf[d] * ost[d];
      rem /= inf[d];
    }
    memcpy((char *)out[0].data + (size_t)o * esz, (const char *)x->data + (size_t)i * esz, esz);
  }
  return ALMA_OK;
}

const alma_op_def alma__op_MaxUnpool = {.name = "MaxUnpool", .domain = "", .versions = {9, 11, 22}, .min_inputs = 2,
                                        .max_inputs = 3, .min_outputs = 1, .max_outputs = 1, .infer = mu_infer,
                                        .exec = mu_exec};

/* ==== Col2Im ====================================================================================
 * input [N, C * prod(block), L] -> [N, C, *image_shape]: sums each column's block back into the
 * image (the inverse of im2col), over L = prod(number of block positions) columns. */
static alma_status c2i_read(const alma_node *n, const alma_tensor *const *in, int nin, c2i_cfg *c, int64_t *C) {
  const alma_tensor *x = in[0], *is = alma__nn_in(in, nin, 1), *bs = alma__nn_in(in, nin, 2);
  if (!is || !bs) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "image_shape and block_shape are required");
  ALMA_TRY(need_float(n, x, "input"));
  if (is->dtype != ALMA_DTYPE_INT64 || bs->dtype != ALMA_DTYPE_INT64)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "image_shape/block_shape dtypes %s/%s (expect int64)",
                          alma_dtype_name(is->dtype), alma_dtype_name(bs->dtype));
  if (x->rank != 3) return alma__op_error(n, ALMA_ERR_SHAPE, "input rank %d (expects [N, C * prod(block), L])", x->rank);
  if (is->rank != 1 || bs->rank != 1 || is->dims[0] != bs->dims[0] || is->dims[0] < 1 || is->dims[0] > ALMA_MAX_RANK - 2)
    return alma__op_error(n, ALMA_ERR_SHAPE, "image_shape and block_shape must be 1-D of the same length (1 to %d)",
                          ALMA_MAX_RANK - 2);
  int nsp = (int)is->dims[0];
  c->nsp = nsp;
  const int64_t *s = NULL, *d = NULL, *p = NULL;
  int ns = alma__attr_ints(n, "strides", &s), nd = alma__attr_ints(n, "dilations", &d), np = alma__attr_ints(n, "pads", &p);
  if ((ns && ns != nsp) || (nd && nd != nsp) || (np && np != 2 * nsp))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "strides/dilations/pads have %d/%d/%d values for %d spatial dims", ns, nd,
                          np, nsp);
  if (!is->data || !bs->data) return alma__need_value();
  const int64_t *iv = is->data, *bv = bs->data;
  int64_t kprod = 1, L = 1;
  for (int i = 0; i < nsp; i++) {
    c->img[i] = iv[i], c->blk[i] = bv[i];
    c->s[i] = ns ? s[i] : 1, c->d[i] = nd ? d[i] : 1, c->pb[i] = np ? p[i] : 0;
    int64_t pe = np ? p[i + nsp] : 0;
    if (iv[i] < 1 || bv[i] < 1 || c->s[i] < 1 || c->d[i] < 1 || c->pb[i] < 0 || pe < 0 || iv[i] > ((int64_t)1 << 31) ||
        bv[i] > ((int64_t)1 << 31) || c->s[i] > ((int64_t)1 << 31) || c->d[i] > ((int64_t)1 << 31) ||
        c->pb[i] > ((int64_t)1 << 31) || pe > ((int64_t)1 << 31))
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "image %lld, block %lld, stride %lld, dilation %lld, pads %lld/%lld along dim %d",
                            (long long)iv[i], (long long)bv[i], (long long)c->s[i], (long long)c->d[i], (long long)c->pb[i],
                            (long long)pe, i);
    int64_t span = iv[i] + c->pb[i] + pe - (c->d[i] * (bv[i] - 1) + 1);
    if (span < 0) return alma__op_error(n, ALMA_ERR_SHAPE, "block larger than the padded image along dim %d", i);
    c->nb[i] = span / c->s[i] + 1;
    if (alma__mul_overflow_i64(kprod, bv[i], &kprod) || alma__mul_overflow_i64(L, c->nb[i], &L))
      return alma__op_error(n, ALMA_ERR_SHAPE, "block or image too large");
  }
  if (x->dims[1] % kprod)
    return alma__op_error(n, ALMA_ERR_SHAPE, "input dim 1 (%lld) is not a multiple of the block size %lld", (long long)x->dims[1],
                          (long long)kprod);
  if (x->dims[2] != L)
    return alma__op_error(n, ALMA_ERR_SHAPE, "input has %lld columns, the image has %lld block positions", (long long)x->dims[2],
                          (long long)L);
  *C = x->dims[1] / kprod;
  c->NC = x->dims[0] * *C;
  return ALMA_OK;
}

static alma_status c2i_infer(INFER_ARGS) {
  c2i_cfg c;
  int64_t C;
  ALMA_TRY(c2i_read(n, in, nin, &c, &C));
  int64_t dims[ALMA_MAX_RANK];
  dims[0] = in[0]->dims[0], dims[1] = C;
  for (int i = 0; i < c.nsp; i++) dims[i + 2] = c.img[i];
  alma__set_shape(&out[0], in[0]->dtype, c.nsp + 2, dims);
  return ALMA_OK;
}

static alma_status c2i_exec(EXEC_ARGS) {
  c2i_cfg c;
  int64_t C;
  ALMA_TRY(c2i_read(n, in, nin, &c, &C));
  if (alma_tensor_numel(&out[0]) == 0) return ALMA_OK;
  int dbl = in[0]->dtype == ALMA_DTYPE_FLOAT64;
  xn_bufs b;
  alma_status st = xn_prepare(n, dbl, in, 1, out, 1, &b);
  if (st == ALMA_OK) XN_DISPATCH(dbl, st, c2i_run, &c, b.p[0], b.y[0]);
  xn_finish(dbl, out, 1, &b, st == ALMA_OK);
  return st;
}

const alma_op_def alma__op_Col2Im = {.name = "Col2Im", .domain = "", .versions = {18}, .min_inputs = 3, .max_inputs = 3,
                                     .min_outputs = 1, .max_outputs = 1, .infer = c2i_infer, .exec = c2i_exec};

/* ==== DeformConv ================================================================================
 * Convolution whose kernel taps are displaced per output position by `offset` (and weighted by
 * `mask`): taps are sampled bilinearly (zero outside the image), gathered into columns, then
 * multiplied by W per group. Offsets are laid out [N, offset_group, kH, kW, 2 (dy, dx), oH, oW].
 * 2-D (4-D X) only, as the ONNX reference. */
static alma_status dc_read(const alma_node *n, const alma_tensor *const *in, int nin, dc_cfg *c) {
  const alma_tensor *x = in[0], *w = alma__nn_in(in, nin, 1), *off = alma__nn_in(in, nin, 2), *bias = alma__nn_in(in, nin, 3),
                    *mask = alma__nn_in(in, nin, 4);
  if (!w || !off) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "W and offset are required");
  ALMA_TRY(need_float(n, x, "X"));
  ALMA_TRY(same_dtype(n, x, w, "W"));
  ALMA_TRY(same_dtype(n, x, off, "offset"));
  ALMA_TRY(same_dtype(n, x, bias, "B"));
  ALMA_TRY(same_dtype(n, x, mask, "mask"));
  char s1[128], s2[128];
  if (x->rank != 4)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "X %s: only 2-D deformable convolution ([N, C, H, W])",
                          alma__shape_str(x->rank, x->dims, s1, sizeof s1));
  if (w->rank != 4) return alma__op_error(n, ALMA_ERR_SHAPE, "W %s (expects [oC, C / group, kH, kW])", alma__shape_str(w->rank, w->dims, s1, sizeof s1));
  c->group = alma__attr_i(n, "group", 1), c->og = alma__attr_i(n, "offset_group", 1);
  c->N = x->dims[0], c->C = x->dims[1], c->H = x->dims[2], c->W = x->dims[3], c->OC = w->dims[0];
  if (c->group < 1 || c->og < 1 || c->C % c->group || c->OC % c->group || c->C % c->og || w->dims[1] * c->group != c->C)
    return alma__op_error(n, ALMA_ERR_SHAPE, "X %s, W %s, group %lld, offset_group %lld are inconsistent",
                          alma__shape_str(x->rank, x->dims, s1, sizeof s1), alma__shape_str(w->rank, w->dims, s2, sizeof s2),
                          (long long)c->group, (long long)c->og);
  const int64_t *ks = NULL;
  int nk = alma__attr_ints(n, "kernel_shape", &ks);
  if (nk && (nk != 2 || ks[0] != w->dims[2] || ks[1] != w->dims[3]))
    return alma__op_error(n, ALMA_ERR_SHAPE, "kernel_shape does not match W %s", alma__shape_str(w->rank, w->dims, s1, sizeof s1));
  alma__nn_geom g;
  ALMA_TRY(alma__nn_geom_read(n, 2, x->dims + 2, w->dims + 2, 1, &g));
  if (g.auto_pad != ALMA__PAD_NOTSET) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "DeformConv has no auto_pad");
  ALMA_TRY(alma__nn_geom_forward(n, &g, 0));
  c->kh = g.k[0], c->kw = g.k[1], c->sh = g.s[0], c->sw = g.s[1], c->dh = g.d[0], c->dw = g.d[1];
  c->ph = g.pb[0], c->pw = g.pb[1], c->oH = g.out[0], c->oW = g.out[1];
  int64_t od[4] = {c->N, c->og * 2 * c->kh * c->kw, c->oH, c->oW};
  if (off->rank != 4 || memcmp(off->dims, od, sizeof od))
    return alma__op_error(n, ALMA_ERR_SHAPE, "offset %s, expected %s", alma__shape_str(off->rank, off->dims, s1, sizeof s1),
                          alma__shape_str(4, od, s2, sizeof s2));
  if (bias && (bias->rank != 1 || bias->dims[0] != c->OC))
    return alma__op_error(n, ALMA_ERR_SHAPE, "B has %lld values for %lld output channels", (long long)alma_tensor_numel(bias),
                          (long long)c->OC);
  od[1] = c->og * c->kh * c->kw;
  if (mask && (mask->rank != 4 || memcmp(mask->dims, od, sizeof od)))
    return alma__op_error(n, ALMA_ERR_SHAPE, "mask %s, expected %s", alma__shape_str(mask->rank, mask->dims, s1, sizeof s1),
                          alma__shape_str(4, od, s2, sizeof s2));
  c->has_bias = bias != NULL, c->has_mask = mask != NULL;
  return ALMA_OK;
}

static alma_status dc_infer(INFER_ARGS) {
  dc_cfg c;
  ALMA_TRY(dc_read(n, in, nin, &c));
  int64_t dims[4] = {c.N, c.OC, c.oH, c.oW};
  alma__set_shape(&out[0], in[0]->dtype, 4, dims);
  return ALMA_OK;
}

static alma_status dc_exec(EXEC_ARGS) {
  dc_cfg c;
  ALMA_TRY(dc_read(n, in, nin, &c));
  if (alma_tensor_numel(&out[0]) == 0) return ALMA_OK;
  int dbl = in[0]->dtype == ALMA_DTYPE_FLOAT64;
  const alma_tensor *ts[5] = {in[0], in[1], in[2], alma__nn_in(in, nin, 3), alma__nn_in(in, nin, 4)};
  xn_bufs b;
  alma_status st = xn_prepare(n, dbl, ts, 5, out, 1, &b);
  if (st == ALMA_OK) XN_DISPATCH(dbl, st, dc_run, n, &c, b.p[0], b.p[1], b.p[2], b.p[3], b.p[4], b.y[0]);
  xn_finish(dbl, out, 1, &b, st == ALMA_OK);
  return st;
}

static void dc_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                    int64_t *macs, int64_t *flops) {
  *macs = *flops = 0;
  if (nin < 2 || !in[1] || in[1]->rank != 4 || out[0].rank != 4) return;
  int64_t taps = in[1]->dims[1] * in[1]->dims[2] * in[1]->dims[3];
  *macs = alma_tensor_numel(&out[0]) * taps;
  /* bilinear sampling: about 10 flops per tap and input channel */
  *flops = 2 * *macs + 10 * out[0].dims[0] * out[0].dims[2] * out[0].dims[3] * in[0]->dims[1] * in[1]->dims[2] * in[1]->dims[3];
}

const alma_op_def alma__op_DeformConv = {.name = "DeformConv", .domain = "", .versions = {19, 22}, .min_inputs = 3,
                                         .max_inputs = 5, .min_outputs = 1, .max_outputs = 1, .infer = dc_infer,
                                         .exec = dc_exec, .cost = dc_cost};

/* ==== RNN =======================================================================================
 * H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb) per direction (f: activations, default Tanh). Same
 * conventions as LSTM/GRU in rnn.c: clip bounds the activation's input; steps past a batch entry's
 * sequence length leave Y at zero and freeze its state; layout 1 (opset 14) puts batch first. */
static const struct {
  const char *name;
  int kind, has_alpha, has_beta;
  float alpha, beta;
} rnn_acts[] = {
    {"Relu", ACT_RELU, 0, 0, 0.f, 0.f},           {"Tanh", ACT_TANH, 0, 0, 0.f, 0.f},
    {"Sigmoid", ACT_SIGMOID, 0, 0, 0.f, 0.f},     {"Affine", ACT_AFFINE, 1, 1, 1.f, 0.f},
    {"LeakyRelu", ACT_LEAKYRELU, 1, 0, 0.01f, 0.f}, {"ThresholdedRelu", ACT_THRESHOLDEDRELU, 1, 0, 1.f, 0.f},
    {"ScaledTanh", ACT_SCALEDTANH, 1, 1, 1.f, 1.f}, {"HardSigmoid", ACT_HARDSIGMOID, 1, 1, 0.2f, 0.5f},
    {"Elu", ACT_ELU, 1, 0, 1.f, 0.f},             {"Softsign", ACT_SOFTSIGN, 0, 0, 0.f, 0.f},
    {"Softplus", ACT_SOFTPLUS, 0, 0, 0.f, 0.f},
};

static alma_status rnn_check(const alma_node *n, const alma_tensor *t, const char *what, int rank, const int64_t *dims) {
  int ok = t->rank == rank;
  for (int i = 0; ok && i < rank; i++) ok = t->dims[i] == dims[i];
  if (ok) return ALMA_OK;
  char s1[128], s2[128];
  return alma__op_error(n, ALMA_ERR_SHAPE, "%s has shape %s, expected %s", what, alma__shape_str(t->rank, t->dims, s1, sizeof s1),
                        alma__shape_str(rank, dims, s2, sizeof s2));
}

static alma_status rnn_read(const alma_node *n, const alma_tensor *const *in, int nin, rnn_cfg *c) {
  memset(c, 0, sizeof *c);
  const alma_tensor *X = in[0], *W = alma__nn_in(in, nin, 1), *R = alma__nn_in(in, nin, 2), *B = alma__nn_in(in, nin, 3),
                    *L = alma__nn_in(in, nin, 4), *h0 = alma__nn_in(in, nin, 5);
  if (!W || !R) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "X, W and R are required");
  ALMA_TRY(need_float(n, X, "X"));
  ALMA_TRY(same_dtype(n, X, W, "W"));
  ALMA_TRY(same_dtype(n, X, R, "R"));
  ALMA_TRY(same_dtype(n, X, B, "B"));
  ALMA_TRY(same_dtype(n, X, h0, "initial_h"));
  if (L && L->dtype != ALMA_DTYPE_INT32)
    return alma__op_error(n, ALMA_ERR_TYPE, "sequence_lens must be int32, got %s", alma_dtype_name(L->dtype));
  c->layout = n->since_version >= 14 ? (int)alma__attr_i(n, "layout", 0) : 0;
  if (c->layout != 0 && c->layout != 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "layout=%d (expects 0 or 1)", c->layout);
  const char *dir = alma__attr_s(n, "direction", "forward");
  if (!strcmp(dir, "forward")) c->ndir = 1;
  else if (!strcmp(dir, "reverse")) c->ndir = 1, c->reverse = 1;
  else if (!strcmp(dir, "bidirectional")) c->ndir = 2;
  else return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "direction='%s' (expects forward, reverse or bidirectional)", dir);
  char s[128];
  if (X->rank != 3) return alma__op_error(n, ALMA_ERR_SHAPE, "X has shape %s (expects rank 3)", alma__shape_str(X->rank, X->dims, s, sizeof s));
  c->S = X->dims[c->layout ? 1 : 0], c->B = X->dims[c->layout ? 0 : 1], c->I = X->dims[2];
  if (R->rank != 3) return alma__op_error(n, ALMA_ERR_SHAPE, "R has shape %s (expects rank 3)", alma__shape_str(R->rank, R->dims, s, sizeof s));
  c->H = R->dims[2];
  const alma_attr *hs = alma__node_attr(n, "hidden_size");
  if (hs && hs->i != c->H)
    return alma__op_error(n, ALMA_ERR_SHAPE, "hidden_size %lld but R has %lld columns", (long long)hs->i, (long long)c->H);
  int64_t nd = c->ndir;
  ALMA_TRY(rnn_check(n, W, "W", 3, (int64_t[]){nd, c->H, c->I}));
  ALMA_TRY(rnn_check(n, R, "R", 3, (int64_t[]){nd, c->H, c->H}));
  if (B) ALMA_TRY(rnn_check(n, B, "B", 2, (int64_t[]){nd, 2 * c->H}));
  if (L) ALMA_TRY(rnn_check(n, L, "sequence_lens", 1, (int64_t[]){c->B}));
  int64_t sd[3] = {nd, c->B, c->H};
  if (c->layout) sd[0] = c->B, sd[1] = nd;
  if (h0) ALMA_TRY(rnn_check(n, h0, "initial_h", 3, sd));
  const alma_attr *cl = alma__node_attr(n, "clip");
  if (cl) {
    if (!(cl->f > 0.f)) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "clip %g must be positive", (double)cl->f);
    c->has_clip = 1, c->clip = cl->f;
  }
  /* activations: one per direction (names case-insensitive); alpha/beta consumed in order */
  const alma_attr *aa = alma__node_attr(n, "activations");
  if (aa && aa->type != ALMA_ATTR_STRINGS) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "activations must be a list of strings");
  int cnt = aa ? aa->n : 0;
  if (cnt && cnt != c->ndir && !(c->ndir == 2 && cnt == 1))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%d activations given, expected %d", cnt, c->ndir);
  const float *al, *be;
  int nal = alma__attr_floats(n, "activation_alpha", &al), nbe = alma__attr_floats(n, "activation_beta", &be), ia = 0, ib = 0;
  for (int d = 0; d < c->ndir; d++) {
    const char *name = cnt ? aa->strings[cnt == 1 ? 0 : d] : "Tanh";
    size_t j = 0, nt = sizeof rnn_acts / sizeof rnn_acts[0];
    while (j < nt && strcasecmp(name, rnn_acts[j].name)) j++;
    if (j == nt) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "activation function '%s'", name);
    c->act[d].kind = rnn_acts[j].kind, c->act[d].alpha = rnn_acts[j].alpha, c->act[d].beta = rnn_acts[j].beta;
    if (rnn_acts[j].has_alpha && ia < nal) c->act[d].alpha = al[ia++];
    if (rnn_acts[j].has_beta && ib < nbe) c->act[d].beta = be[ib++];
  }
  return ALMA_OK;
}

static alma_status rnn_infer(INFER_ARGS) {
  rnn_cfg c;
  ALMA_TRY(rnn_read(n, in, nin, &c));
  int64_t yd[4] = {c.S, c.ndir, c.B, c.H}, hd[3] = {c.ndir, c.B, c.H};
  if (c.layout) yd[0] = c.B, yd[1] = c.S, yd[2] = c.ndir, hd[0] = c.B, hd[1] = c.ndir;
  if (nout > 0) alma__set_shape(&out[0], in[0]->dtype, 4, yd);
  if (nout > 1) alma__set_shape(&out[1], in[0]->dtype, 3, hd);
  return ALMA_OK;
}

static alma_status rnn_exec(EXEC_ARGS) {
  rnn_cfg c;
  ALMA_TRY(rnn_read(n, in, nin, &c));
  const alma_tensor *L = alma__nn_in(in, nin, 4);
  const int32_t *lens = L ? L->data : NULL;
  for (int64_t b = 0; lens && b < c.B; b++)
    if (lens[b] < 0 || lens[b] > c.S)
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "sequence_lens[%lld] = %d outside [0, %lld]", (long long)b, lens[b],
                            (long long)c.S);
  int dbl = in[0]->dtype == ALMA_DTYPE_FLOAT64;
  const alma_tensor *ts[6] = {in[0], in[1], in[2], alma__nn_in(in, nin, 3), NULL, alma__nn_in(in, nin, 5)};
  int ny = nout < 2 ? nout : 2;
  xn_bufs b;
  alma_status st = xn_prepare(n, dbl, ts, 6, out, ny, &b);
  if (st == ALMA_OK) XN_DISPATCH(dbl, st, rnn_run, n, &c, b.p[0], b.p[1], b.p[2], b.p[3], lens, b.p[5], b.y[0], b.y[1]);
  xn_finish(dbl, out, ny, &b, st == ALMA_OK);
  return st;
}

static void rnn_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                     int64_t *macs, int64_t *flops) {
  *macs = *flops = 0;
  if (nin < 3 || !in[0] || !in[2] || in[0]->rank != 3 || in[2]->rank != 3) return;
  int64_t H = in[2]->dims[2], nd = in[2]->dims[0], steps = in[0]->dims[0] * in[0]->dims[1];
  *macs = nd * steps * H * (in[0]->dims[2] + H);
  *flops = 2 * *macs + nd * steps * H * 4;
}

const alma_op_def alma__op_RNN = {.name = "RNN", .domain = "", .versions = {1, 7, 14, 22}, .min_inputs = 3,
                                  .max_inputs = 6, .min_outputs = 0, .max_outputs = 2, .infer = rnn_infer,
                                  .exec = rnn_exec, .cost = rnn_cost};

#else /* ==== kernels, once per XN_REAL ========================================================= */

typedef XN_REAL XN(real);

/* ---- GroupNormalization ---- */
static alma_status XN(gn_run)(const gn_cfg *c, const XN(real) *x, const XN(real) *scale, const XN(real) *bias,
                              XN(real) *y) {
  typedef XN(real) R;
  int64_t cpg = c->C / c->G, cnt = cpg * c->S;
  for (int64_t b = 0; b < c->N; b++)
    for (int64_t g = 0; g < c->G; g++) {
      const R *xg = x + (b * c->C + g * cpg) * c->S;
      R *yg = y + (b * c->C + g * cpg) * c->S;
      double sum = 0, sq = 0;
      for (int64_t i = 0; i < cnt; i++) sum += xg[i];
      double mean = cnt ? sum / (double)cnt : 0;
      for (int64_t i = 0; i < cnt; i++) {
        double d = xg[i] - mean;
        sq += d * d;
      }
      double inv = 1.0 / sqrt((cnt ? sq / (double)cnt : 0) + c->eps);
      for (int64_t k = 0; k < cpg; k++) {
        int64_t ch = g * cpg + k;
        double sc = c->per_group ? scale[g] : scale[ch], bi = c->per_group ? bias[g] : bias[ch];
        R a = (R)(sc * inv), o = (R)(bi - mean * sc * inv);
        const R *xs = xg + k * c->S;
        R *ys = yg + k * c->S;
        for (int64_t i = 0; i < c->S; i++) ys[i] = xs[i] * a + o;
      }
    }
  return ALMA_OK;
}

/* ---- LpNormalization ---- */
static alma_status XN(lpn_run)(const axis_view *v, int p, const XN(real) *x, XN(real) *y) {
  typedef XN(real) R;
  for (int64_t o = 0; o < v->outer; o++)
    for (int64_t i = 0; i < v->inner; i++) {
      const R *xs = x + o * v->len * v->inner + i;
      R *ys = y + o * v->len * v->inner + i;
      double acc = 0;
      for (int64_t k = 0; k < v->len; k++) {
        double e = xs[k * v->inner];
        acc += p == 1 ? fabs(e) : e * e;
      }
      double norm = p == 1 ? acc : sqrt(acc);
      for (int64_t k = 0; k < v->len; k++) ys[k * v->inner] = norm != 0 ? (R)(xs[k * v->inner] / norm) : (R)0;
    }
  return ALMA_OK;
}

/* ---- MeanVarianceNormalization ---- */
static alma_status XN(mvn_run)(const alma_node *n, const alma_tensor *xt, unsigned mask, const XN(real) *x, XN(real) *y) {
  typedef XN(real) R;
  int r = xt->rank;
  int64_t nel = alma_tensor_numel(xt), kept = 1, kst[ALMA_MAX_RANK];
  /* strides of the kept (not reduced) dims: each element's group index */
  for (int d = r - 1; d >= 0; d--) {
    kst[d] = mask >> d & 1 ? 0 : kept;
    if (!(mask >> d & 1)) kept *= xt->dims[d];
  }
  if (nel == 0) return ALMA_OK;
  double *sum = alma__nn_alloc(n, (size_t)kept, sizeof(double)), *sq = alma__nn_alloc(n, (size_t)kept, sizeof(double));
  int64_t *grp = alma__nn_alloc(n, (size_t)nel, sizeof(int64_t));
  if (!sum || !sq || !grp) {
    free(sum), free(sq), free(grp);
    return ALMA_ERR_NOMEM;
  }
  memset(sum, 0, sizeof(double) * (size_t)kept);
  memset(sq, 0, sizeof(double) * (size_t)kept);
  int64_t coord[ALMA_MAX_RANK] = {0};
  for (int64_t i = 0; i < nel; i++) {
    int64_t gi = 0;
    for (int d = 0; d < r; d++) gi += coord[d] * kst[d];
    grp[i] = gi;
    sum[gi] += x[i];
    for (int d = r - 1; d >= 0 && ++coord[d] == xt->dims[d]; d--) coord[d] = 0;
  }
  double per = (double)(nel / kept);
  for (int64_t g = 0; g < kept; g++) sum[g] /= per;
  for (int64_t i = 0; i < nel; i++) {
    double d = x[i] - sum[grp[i]];
    sq[grp[i]] += d * d;
  }
  for (int64_t g = 0; g < kept; g++) sq[g] = sqrt(sq[g] / per) + 1e-9;
  for (int64_t i = 0; i < nel; i++) y[i] = (R)((x[i] - sum[grp[i]]) / sq[grp[i]]);
  free(sum), free(sq), free(grp);
  return ALMA_OK;
}

/* ---- LpPool ---- */
static alma_status XN(lpp_run)(const alma_node *n, const lpp_cfg *c, const XN(real) *x, XN(real) *y) {
  typedef XN(real) R;
  const alma__nn_geom *g = &c->g;
  int nsp = g->nsp;
  int64_t in_plane = alma__numel(nsp, g->in), out_plane = alma__numel(nsp, g->out), ktot = alma__numel(nsp, g->k);
  int64_t ist[ALMA_MAX_RANK];
  alma__strides(nsp, g->in, ist);
  int64_t *kc = alma__nn_alloc(n, (size_t)(ktot * nsp), sizeof(int64_t)); /* window offsets per dim */
  if (!kc) return ALMA_ERR_NOMEM;
  int64_t kk[ALMA_MAX_RANK] = {0};
  for (int64_t k = 0; k < ktot; k++) {
    for (int d = 0; d < nsp; d++) kc[k * nsp + d] = kk[d] * g->d[d];
    for (int d = nsp - 1; d >= 0 && ++kk[d] == g->k[d]; d--) kk[d] = 0;
  }
  double p = c->p, ip = 1.0 / p;
  int p2 = p == 2.0, p1 = p == 1.0;
  for (int64_t nc = 0; nc < c->NC; nc++) {
    const R *xs = x + nc * in_plane;
    R *ys = y + nc * out_plane;
    int64_t oc[ALMA_MAX_RANK] = {0};
    for (int64_t o = 0; o < out_plane; o++) {
      double acc = 0;
      for (int64_t k = 0; k < ktot; k++) {
        int64_t off = 0;
        int inside = 1;
        for (int d = 0; d < nsp && inside; d++) {
          int64_t ic = oc[d] * g->s[d] - g->pb[d] + kc[k * nsp + d];
          if (ic < 0 || ic >= g->in[d]) inside = 0;
          off += ic * ist[d];
        }
        if (!inside) continue;
        double v = fabs((double)xs[off]);
        acc += p2 ? v * v : p1 ? v : pow(v, p);
      }
      ys[o] = (R)(p2 ? sqrt(acc) : p1 ? acc : pow(acc, ip));
      for (int d = nsp - 1; d >= 0 && ++oc[d] == g->out[d]; d--) oc[d] = 0;
    }
  }
  free(kc);
  return ALMA_OK;
}

/* ---- Col2Im ---- */
static alma_status XN(c2i_run)(const c2i_cfg *c, const XN(real) *x, XN(real) *y) {
  typedef XN(real) R;
  int nsp = c->nsp;
  int64_t kprod = alma__numel(nsp, c->blk), L = alma__numel(nsp, c->nb), plane = alma__numel(nsp, c->img);
  int64_t ist[ALMA_MAX_RANK];
  alma__strides(nsp, c->img, ist);
  for (int64_t nc = 0; nc < c->NC; nc++) {
    const R *xs = x + nc * kprod * L;
    R *ys = y + nc * plane;
    int64_t kk[ALMA_MAX_RANK] = {0};
    for (int64_t k = 0; k < kprod; k++) {
      int64_t lc[ALMA_MAX_RANK] = {0};
      for (int64_t l = 0; l < L; l++) {
        int64_t off = 0;
        int inside = 1;
        for (int d = 0; d < nsp && inside; d++) {
          int64_t ic = lc[d] * c->s[d] - c->pb[d] + kk[d] * c->d[d];
          if (ic < 0 || ic >= c->img[d]) inside = 0;
          off += ic * ist[d];
        }
        if (inside) ys[off] += xs[k * L + l];
        for (int d = nsp - 1; d >= 0 && ++lc[d] == c->nb[d]; d--) lc[d] = 0;
      }
      for (int d = nsp - 1; d >= 0 && ++kk[d] == c->blk[d]; d--) kk[d] = 0;
    }
  }
  return ALMA_OK;
}

/* ---- DeformConv ---- */
/* Bilinear sample of img (H x W) at (h, w); corners outside the image read zero. */
static XN(real) XN(dc_sample)(const XN(real) *img, int64_t H, int64_t W, XN(real) h, XN(real) w) {
  typedef XN(real) R;
  if (!(h > -1 && h < (R)H && w > -1 && w < (R)W)) return 0;
  int64_t h0 = (int64_t)floor(h), w0 = (int64_t)floor(w), h1 = h0 + 1, w1 = w0 + 1;
  R lh = h - (R)h0, lw = w - (R)w0, hh = 1 - lh, hw = 1 - lw;
  R v1 = h0 >= 0 && w0 >= 0 ? img[h0 * W + w0] : 0, v2 = h0 >= 0 && w1 < W ? img[h0 * W + w1] : 0;
  R v3 = h1 < H && w0 >= 0 ? img[h1 * W + w0] : 0, v4 = h1 < H && w1 < W ? img[h1 * W + w1] : 0;
  return hh * hw * v1 + hh * lw * v2 + lh * hw * v3 + lh * lw * v4;
}

static alma_status XN(dc_gemm)(int64_t M, int64_t N, int64_t K, const XN(real) *A, const XN(real) *B, XN(real) *C) {
#if XN_IS_DOUBLE
  alma__dgemm(0, 0, M, N, K, 1.0, A, K, B, N, 0.0, C, N);
  return ALMA_OK;
#else
  return alma__sgemm(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
#endif
}

static alma_status XN(dc_run)(const alma_node *n, const dc_cfg *c, const XN(real) *X, const XN(real) *Wt,
                              const XN(real) *off, const XN(real) *bias, const XN(real) *mask, XN(real) *Y) {
  typedef XN(real) R;
  int64_t P = c->oH * c->oW, KK = c->kh * c->kw, cpo = c->C / c->og;
  int64_t Cg = c->C / c->group, OCg = c->OC / c->group, K = Cg * KK;
  R *cols = alma__nn_alloc(n, (size_t)(c->C * KK * P), sizeof(R));
  if (!cols) return ALMA_ERR_NOMEM;
  alma_status st = ALMA_OK;
  for (int64_t b = 0; b < c->N && st == ALMA_OK; b++) {
    for (int64_t ch = 0; ch < c->C; ch++) {
      int64_t og = ch / cpo;
      const R *img = X + (b * c->C + ch) * c->H * c->W;
      for (int64_t i = 0; i < c->kh; i++)
        for (int64_t j = 0; j < c->kw; j++) {
          int64_t t = i * c->kw + j;
          const R *dy = off + ((b * c->og + og) * KK * 2 + 2 * t) * P, *dx = dy + P;
          const R *mk = mask ? mask + ((b * c->og + og) * KK + t) * P : NULL;
          R *col = cols + (ch * KK + t) * P;
          for (int64_t oh = 0; oh < c->oH; oh++)
            for (int64_t ow = 0; ow < c->oW; ow++) {
              int64_t p = oh * c->oW + ow;
              R h = (R)(oh * c->sh - c->ph + i * c->dh) + dy[p], w = (R)(ow * c->sw - c->pw + j * c->dw) + dx[p];
              R v = XN(dc_sample)(img, c->H, c->W, h, w);
              col[p] = mk ? v * mk[p] : v;
            }
        }
    }
    for (int64_t g = 0; g < c->group && st == ALMA_OK; g++) {
      R *yg = Y + (b * c->OC + g * OCg) * P;
      st = XN(dc_gemm)(OCg, P, K, Wt + g * OCg * K, cols + g * K * P, yg);
      if (st != ALMA_OK) break;
      if (bias)
        for (int64_t o = 0; o < OCg; o++)
          for (int64_t p = 0; p < P; p++) yg[o * P + p] += bias[g * OCg + o];
    }
  }
  free(cols);
  return st;
}

/* ---- RNN ---- */
static XN(real) XN(rnn_f)(const rnn_act *a, XN(real) v) {
  typedef XN(real) R;
  R al = (R)a->alpha, be = (R)a->beta;
  switch (a->kind) {
    case ACT_RELU: return v > 0 ? v : 0;
    case ACT_TANH: return (R)tanh(v);
    case ACT_SIGMOID: return v >= 0 ? (R)(1 / (1 + exp(-v))) : (R)(exp(v) / (1 + exp(v)));
    case ACT_AFFINE: return al * v + be;
    case ACT_LEAKYRELU: return v >= 0 ? v : al * v;
    case ACT_THRESHOLDEDRELU: return v > al ? v : 0;
    case ACT_SCALEDTANH: return al * (R)tanh(be * v);
    case ACT_HARDSIGMOID: {
      R t = al * v + be;
      return t < 0 ? 0 : t > 1 ? 1 : t;
    }
    case ACT_ELU: return v >= 0 ? v : al * (R)(exp(v) - 1);
    case ACT_SOFTSIGN: return v / (1 + (R)fabs(v));
    default: return v > 0 ? v + (R)log1p(exp(-v)) : (R)log1p(exp(v));
  }
}

static alma_status XN(rnn_run)(const alma_node *n, const rnn_cfg *c, const XN(real) *X, const XN(real) *W,
                               const XN(real) *Rw, const XN(real) *Bias, const int32_t *lens, const XN(real) *h0,
                               XN(real) *Y, XN(real) *Yh) {
  typedef XN(real) R;
  int64_t S = c->S, B = c->B, I = c->I, H = c->H, nd = c->ndir;
  R *h = alma__nn_alloc(n, (size_t)(B * H), sizeof(R)), *hn = alma__nn_alloc(n, (size_t)(H ? H : 1), sizeof(R));
  if (!h || !hn) {
    free(h), free(hn);
    return ALMA_ERR_NOMEM;
  }
  for (int64_t d = 0; d < nd; d++) {
    int back = d == 1 || c->reverse;
    const R *Wd = W + d * H * I, *Rd = Rw + d * H * H, *wb = Bias ? Bias + d * 2 * H : NULL, *rb = wb ? wb + H : NULL;
    for (int64_t b = 0; b < B; b++)
      for (int64_t k = 0; k < H; k++)
        h[b * H + k] = h0 ? (c->layout ? h0[(b * nd + d) * H + k] : h0[(d * B + b) * H + k]) : 0;
    for (int64_t t = 0; t < S; t++)
      for (int64_t b = 0; b < B; b++) {
        int64_t len = lens ? lens[b] : S;
        if (t >= len) continue;
        int64_t tt = back ? len - 1 - t : t;
        const R *x = X + (c->layout ? b * S + tt : tt * B + b) * I;
        R *hb = h + b * H;
        for (int64_t k = 0; k < H; k++) {
          R acc = wb ? wb[k] + rb[k] : 0;
          const R *wr = Wd + k * I, *rr = Rd + k * H;
          for (int64_t j = 0; j < I; j++) acc += wr[j] * x[j];
          for (int64_t j = 0; j < H; j++) acc += rr[j] * hb[j];
          if (c->has_clip) acc = acc < -c->clip ? -c->clip : acc > c->clip ? c->clip : acc;
          hn[k] = XN(rnn_f)(&c->act[d], acc);
        }
        memcpy(hb, hn, sizeof(R) * (size_t)H);
        if (Y) memcpy(Y + (c->layout ? (b * S + tt) * nd + d : (tt * nd + d) * B + b) * H, hn, sizeof(R) * (size_t)H);
      }
    if (Yh)
      for (int64_t b = 0; b < B; b++)
        memcpy(Yh + (c->layout ? b * nd + d : d * B + b) * H, h + b * H, sizeof(R) * (size_t)H);
  }
  free(h), free(hn);
  return ALMA_OK;
}

#endif
