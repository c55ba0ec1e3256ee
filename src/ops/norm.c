/* BatchNormalization (inference and training mode, legacy spatial/is_test forms),
 * InstanceNormalization, LayerNormalization and LRN. Statistics accumulate in double; float32
 * tensors are read and written directly, other float types through alma__get_f64/set_f64. */
#include <math.h>

#include "ops/nn_util.h"

static int float_dtype(alma_dtype t) { return alma__dtype_is_float(t); }

static double ld(const alma_tensor *t, int64_t i) {
  return t->dtype == ALMA_DTYPE_FLOAT32 ? (double)((const float *)t->data)[i] : alma__get_f64(t->data, t->dtype, i);
}
static void st(alma_tensor *t, int64_t i, double v) {
  if (t->dtype == ALMA_DTYPE_FLOAT32)
    ((float *)t->data)[i] = (float)v;
  else
    alma__set_f64(t->data, t->dtype, i, v);
}

/* ---- BatchNormalization ---------------------------------------------------------------------- */

typedef struct bn_shape {
  int64_t N, C, inner, P; /* P parameters: C (spatial) or C * inner (per activation, spatial = 0) */
  int spatial, training;
} bn_shape;

static alma_status bn_setup(const alma_node *n, const alma_tensor *const *in, int nin, int nout, bn_shape *bs) {
  const alma_tensor *x = in[0];
  for (int i = 0; i < 5; i++)
    if (!alma__nn_in(in, nin, i))
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input %d (X, scale, B, mean, var) is required", i);
  if (!float_dtype(x->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  for (int i = 1; i < 5; i++)
    if (!float_dtype(in[i]->dtype))
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input %d dtype %s", i, alma_dtype_name(in[i]->dtype));
  if (n->since_version < 15)
    for (int i = 1; i < 5; i++)
      if (in[i]->dtype != x->dtype)
        return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input %d is %s but X is %s (mixed types need opset 15)", i,
                              alma_dtype_name(in[i]->dtype), alma_dtype_name(x->dtype));
  if (x->rank < 2) return alma__op_error(n, ALMA_ERR_SHAPE, "X must have rank >= 2 (N, C, ...), got %d", x->rank);
  bs->N = x->dims[0];
  bs->C = x->dims[1];
  bs->inner = alma__numel(x->rank - 2, x->dims + 2);
  bs->spatial = n->since_version < 9 ? alma__attr_i(n, "spatial", 1) != 0 : 1;
  bs->P = bs->spatial ? bs->C : bs->C * bs->inner;
  for (int i = 1; i < 5; i++)
    if (alma_tensor_numel(in[i]) != bs->P) {
      char s[128];
      return alma__op_error(n, ALMA_ERR_SHAPE, "input %d has shape %s, expected %lld elements (%s)", i,
                            alma__shape_str(in[i]->rank, in[i]->dims, s, sizeof s), (long long)bs->P,
                            bs->spatial ? "one per channel" : "spatial = 0: one per activation of a sample");
    }
  int extra = 0;
  for (int k = 1; k < nout; k++) extra |= alma__nn_out_wanted(n, nout, k);
  if (n->since_version >= 14) {
    bs->training = alma__attr_i(n, "training_mode", 0) != 0;
    if (nout > 3) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%d outputs (at most 3 from opset 14)", nout);
  } else if (n->since_version >= 7) {
    bs->training = extra; /* opsets 7 and 9: the extra outputs are the training mode */
  } else {
    bs->training = extra && alma__attr_i(n, "is_test", 0) == 0;
  }
  return ALMA_OK;
}

static alma_status bn_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  bn_shape bs;
  ALMA_TRY(bn_setup(n, in, nin, nout, &bs));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
  for (int k = 1; k < nout; k++) alma__set_shape(&out[k], in[3]->dtype, in[3]->rank, in[3]->dims);
  return ALMA_OK;
}

static alma_status bn_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                           alma_tensor *out, int nout) {
  bn_shape bs;
  ALMA_TRY(bn_setup(n, in, nin, nout, &bs));
  const alma_tensor *x = in[0];
  double eps = alma__attr_f(n, "epsilon", 1e-5f), momentum = alma__attr_f(n, "momentum", 0.9f);
  int64_t P = bs.P;
  double *buf = alma__nn_alloc(n, (size_t)(4 * (P ? P : 1)), sizeof *buf);
  if (!buf) return ALMA_ERR_NOMEM;
  double *a = buf, *b = buf + P, *bmean = buf + 2 * P, *bvar = buf + 3 * P;
  /* parameter p of element (n, c, s) */
#define BN_P(c, s) (bs.spatial ? (c) : (c) * bs.inner + (s))
  if (bs.training) {
    /* batch statistics over N (and the spatial dims in spatial mode), population variance */
    memset(bmean, 0, 2 * (size_t)P * sizeof *bmean);
    for (int64_t ni = 0; ni < bs.N; ni++)
      for (int64_t c = 0; c < bs.C; c++)
        for (int64_t s = 0; s < bs.inner; s++) bmean[BN_P(c, s)] += ld(x, (ni * bs.C + c) * bs.inner + s);
    double cnt = (double)bs.N * (bs.spatial ? (double)bs.inner : 1.0);
    for (int64_t p = 0; p < P; p++) bmean[p] /= cnt;
    for (int64_t ni = 0; ni < bs.N; ni++)
      for (int64_t c = 0; c < bs.C; c++)
        for (int64_t s = 0; s < bs.inner; s++) {
          double dv = ld(x, (ni * bs.C + c) * bs.inner + s) - bmean[BN_P(c, s)];
          bvar[BN_P(c, s)] += dv * dv;
        }
    for (int64_t p = 0; p < P; p++) bvar[p] /= cnt;
  }
  for (int64_t p = 0; p < P; p++) {
    double mean = bs.training ? bmean[p] : ld(in[3], p), var = bs.training ? bvar[p] : ld(in[4], p);
    a[p] = ld(in[1], p) / sqrt(var + eps);
    b[p] = ld(in[2], p) - mean * a[p];
  }
  if (x->dtype == ALMA_DTYPE_FLOAT32) {
    const float *xs = x->data;
    float *ys = out[0].data;
    for (int64_t ni = 0; ni < bs.N; ni++)
      for (int64_t c = 0; c < bs.C; c++) {
        int64_t base = (ni * bs.C + c) * bs.inner;
        if (bs.spatial) {
          float av = (float)a[c], bv = (float)b[c];
          for (int64_t s = 0; s < bs.inner; s++) ys[base + s] = xs[base + s] * av + bv;
        } else {
          for (int64_t s = 0; s < bs.inner; s++)
            ys[base + s] = (float)(xs[base + s] * a[c * bs.inner + s] + b[c * bs.inner + s]);
        }
      }
  } else {
    for (int64_t ni = 0; ni < bs.N; ni++)
      for (int64_t c = 0; c < bs.C; c++)
        for (int64_t s = 0; s < bs.inner; s++) {
          int64_t i = (ni * bs.C + c) * bs.inner + s;
          st(&out[0], i, ld(x, i) * a[BN_P(c, s)] + b[BN_P(c, s)]);
        }
  }
#undef BN_P
  if (bs.training) {
    /* running statistics; before opset 14 the saved batch mean and variance follow */
    for (int k = 1; k < nout && k < 5; k++) {
      if (!alma__nn_out_wanted(n, nout, k)) continue;
      for (int64_t p = 0; p < P; p++) {
        double v;
        if (k == 1)
          v = ld(in[3], p) * momentum + bmean[p] * (1 - momentum);
        else if (k == 2)
          v = ld(in[4], p) * momentum + bvar[p] * (1 - momentum);
        else
          v = k == 3 ? bmean[p] : bvar[p];
        st(&out[k], p, v);
      }
    }
  } else {
    /* inference: extra outputs (if any) pass the given statistics through */
    for (int k = 1; k < nout && k < 5; k++)
      if (alma__nn_out_wanted(n, nout, k))
        for (int64_t p = 0; p < P; p++) st(&out[k], p, ld(in[(k - 1) % 2 + 3], p));
  }
  free(buf);
  return ALMA_OK;
}

static void norm_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                      int64_t *macs, int64_t *flops) {
  *macs = 0;
  *flops = nin > 0 && in[0] ? 2 * alma_tensor_numel(in[0]) : -1;
}

/* ---- InstanceNormalization ------------------------------------------------------------------- */

static alma_status in_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  const alma_tensor *x = in[0], *sc = alma__nn_in(in, nin, 1), *b = alma__nn_in(in, nin, 2);
  if (!x || !sc || !b) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "X, scale and B are required");
  if (!float_dtype(x->dtype)) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  if (sc->dtype != x->dtype || b->dtype != x->dtype)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "scale and B must have X's dtype %s", alma_dtype_name(x->dtype));
  if (x->rank < 3) return alma__op_error(n, ALMA_ERR_SHAPE, "X must have rank >= 3 (N, C, spatial...), got %d", x->rank);
  if (sc->rank != 1 || b->rank != 1 || sc->dims[0] != x->dims[1] || b->dims[0] != x->dims[1])
    return alma__op_error(n, ALMA_ERR_SHAPE, "scale and B must have shape [%lld]", (long long)x->dims[1]);
  alma__set_shape(&out[0], x->dtype, x->rank, x->dims);
  return ALMA_OK;
}

static alma_status in_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                           alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  double eps = alma__attr_f(n, "epsilon", 1e-5f);
  int64_t N = x->dims[0], C = x->dims[1], sp = alma__numel(x->rank - 2, x->dims + 2);
  for (int64_t ni = 0; ni < N; ni++)
    for (int64_t c = 0; c < C; c++) {
      int64_t base = (ni * C + c) * sp;
      double mean = 0, var = 0;
      for (int64_t s = 0; s < sp; s++) mean += ld(x, base + s);
      mean /= (double)sp;
      for (int64_t s = 0; s < sp; s++) {
        double d = ld(x, base + s) - mean;
        var += d * d;
      }
      var /= (double)sp;
      double a = ld(in[1], c) / sqrt(var + eps), b = ld(in[2], c);
      for (int64_t s = 0; s < sp; s++) st(&out[0], base + s, (ld(x, base + s) - mean) * a + b);
    }
  return ALMA_OK;
}

/* ---- LayerNormalization ---------------------------------------------------------------------- */

typedef struct ln_shape {
  int axis;
  int64_t rows, cols;
  alma_dtype stash;
} ln_shape;

static alma_status ln_setup(const alma_node *n, const alma_tensor *const *in, int nin, ln_shape *ls) {
  const alma_tensor *x = in[0], *sc = alma__nn_in(in, nin, 1), *b = alma__nn_in(in, nin, 2);
  if (!x || !sc) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "X and Scale are required");
  if (!float_dtype(x->dtype)) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  if (sc->dtype != x->dtype || (b && b->dtype != x->dtype))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "Scale and B must have X's dtype %s", alma_dtype_name(x->dtype));
  if (x->rank < 1) return alma__op_error(n, ALMA_ERR_SHAPE, "X must have rank >= 1");
  alma_status s = alma__norm_axis(alma__attr_i(n, "axis", -1), x->rank, &ls->axis);
  if (s != ALMA_OK) return alma__error_prefix(s, "node '%s' (%s): ", n->name, n->op_type);
  int64_t stash = alma__attr_i(n, "stash_type", 1);
  ls->stash = (alma_dtype)stash;
  if (!(stash == ALMA_DTYPE_FLOAT32 || stash == ALMA_DTYPE_FLOAT64 || stash == ALMA_DTYPE_FLOAT16 ||
        stash == ALMA_DTYPE_BFLOAT16))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "stash_type %lld (a float type expected)", (long long)stash);
  int nr = x->rank - ls->axis;
  const alma_tensor *ps[2] = {sc, b};
  for (int k = 0; k < 2; k++) {
    const alma_tensor *p = ps[k];
    if (!p) continue;
    int ok = p->rank <= nr;
    for (int i = 0; ok && i < p->rank; i++) {
      int64_t d = p->dims[i], w = x->dims[x->rank - p->rank + i];
      if (d != 1 && d != w) ok = 0;
    }
    if (!ok) {
      char s1[128], s2[128];
      return alma__op_error(n, ALMA_ERR_SHAPE, "%s of shape %s does not broadcast to the normalized shape %s",
                            k ? "B" : "Scale", alma__shape_str(p->rank, p->dims, s1, sizeof s1),
                            alma__shape_str(nr, x->dims + ls->axis, s2, sizeof s2));
    }
  }
  ls->rows = alma__numel(ls->axis, x->dims);
  ls->cols = alma__numel(nr, x->dims + ls->axis);
  return ALMA_OK;
}

static alma_status ln_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  ln_shape ls;
  ALMA_TRY(ln_setup(n, in, nin, &ls));
  const alma_tensor *x = in[0];
  alma__set_shape(&out[0], x->dtype, x->rank, x->dims);
  int64_t sd[ALMA_MAX_RANK];
  for (int i = 0; i < x->rank; i++) sd[i] = i < ls.axis ? x->dims[i] : 1;
  for (int k = 1; k < nout && k < 3; k++) alma__set_shape(&out[k], ls.stash, x->rank, sd);
  return ALMA_OK;
}

static alma_status ln_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                           alma_tensor *out, int nout) {
  ln_shape ls;
  ALMA_TRY(ln_setup(n, in, nin, &ls));
  const alma_tensor *x = in[0], *sc = in[1], *b = alma__nn_in(in, nin, 2);
  double eps = alma__attr_f(n, "epsilon", 1e-5f);
  int64_t cols = ls.cols;
  int nr = x->rank - ls.axis;
  const int64_t *ndims = x->dims + ls.axis;
  /* Scale and B expanded to one value per normalized element */
  double *wb = alma__nn_alloc(n, (size_t)(2 * (cols ? cols : 1)), sizeof *wb);
  if (!wb) return ALMA_ERR_NOMEM;
  for (int64_t j = 0; j < cols; j++) {
    wb[j] = ld(sc, alma__broadcast_index(j, nr, ndims, sc->rank, sc->dims));
    wb[cols + j] = b ? ld(b, alma__broadcast_index(j, nr, ndims, b->rank, b->dims)) : 0.0;
  }
  int want_mean = alma__nn_out_wanted(n, nout, 1), want_isd = alma__nn_out_wanted(n, nout, 2);
  for (int64_t r = 0; r < ls.rows; r++) {
    int64_t base = r * cols;
    double mean = 0, var = 0;
    if (x->dtype == ALMA_DTYPE_FLOAT32) {
      const float *xs = (const float *)x->data + base;
      float *ys = (float *)out[0].data + base;
      for (int64_t j = 0; j < cols; j++) mean += xs[j];
      mean /= (double)cols;
      for (int64_t j = 0; j < cols; j++) {
        double d = xs[j] - mean;
        var += d * d;
      }
      var /= (double)cols;
      double isd = 1.0 / sqrt(var + eps);
      for (int64_t j = 0; j < cols; j++) ys[j] = (float)((xs[j] - mean) * isd * wb[j] + wb[cols + j]);
    } else {
      for (int64_t j = 0; j < cols; j++) mean += ld(x, base + j);
      mean /= (double)cols;
      for (int64_t j = 0; j < cols; j++) {
        double d = ld(x, base + j) - mean;
        var += d * d;
      }
      var /= (double)cols;
      double isd = 1.0 / sqrt(var + eps);
      for (int64_t j = 0; j < cols; j++) st(&out[0], base + j, (ld(x, base + j) - mean) * isd * wb[j] + wb[cols + j]);
    }
    if (want_mean) st(&out[1], r, mean);
    if (want_isd) st(&out[2], r, 1.0 / sqrt(var + eps));
  }
  free(wb);
  return ALMA_OK;
}

/* ---- LRN ------------------------------------------------------------------------------------- */

static alma_status lrn_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  if (!x) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input X is required");
  if (!float_dtype(x->dtype)) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  if (x->rank < 2) return alma__op_error(n, ALMA_ERR_SHAPE, "X must have rank >= 2 (N, C, ...), got %d", x->rank);
  const alma_attr *sz = alma__node_attr(n, "size");
  if (!sz || sz->type != ALMA_ATTR_INT || sz->i < 1)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute size (a positive int) is required");
  alma__set_shape(&out[0], x->dtype, x->rank, x->dims);
  return ALMA_OK;
}

static alma_status lrn_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  double alpha = alma__attr_f(n, "alpha", 1e-4f), beta = alma__attr_f(n, "beta", 0.75f);
  double bias = alma__attr_f(n, "bias", 1.0f);
  int64_t size = alma__attr_i(n, "size", 1);
  int64_t N = x->dims[0], C = x->dims[1], sp = alma__numel(x->rank - 2, x->dims + 2);
  int64_t lo_off = (size - 1) / 2, hi_off = size / 2; /* floor((size-1)/2), ceil((size-1)/2) */
  for (int64_t ni = 0; ni < N; ni++)
    for (int64_t c = 0; c < C; c++) {
      int64_t c0 = c - lo_off < 0 ? 0 : c - lo_off, c1 = c + hi_off >= C ? C - 1 : c + hi_off;
      for (int64_t s = 0; s < sp; s++) {
        double sq = 0;
        for (int64_t k = c0; k <= c1; k++) {
          double v = ld(x, (ni * C + k) * sp + s);
          sq += v * v;
        }
        int64_t i = (ni * C + c) * sp + s;
        st(&out[0], i, ld(x, i) / pow(bias + alpha / (double)size * sq, beta));
      }
    }
  return ALMA_OK;
}

const alma_op_def alma__op_BatchNormalization = {
    .name = "BatchNormalization", .domain = "", .versions = {1, 6, 7, 9, 14, 15},
    .min_inputs = 5, .max_inputs = 5, .min_outputs = 1, .max_outputs = 5,
    .infer = bn_infer, .exec = bn_exec, .cost = norm_cost};

const alma_op_def alma__op_InstanceNormalization = {
    .name = "InstanceNormalization", .domain = "", .versions = {1, 6, 22},
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .infer = in_infer, .exec = in_exec, .cost = norm_cost};

/* Version 1 is ONNX Runtime's: it registers its LayerNormalization kernel in the ONNX domain from
 * version 1, and its transformer optimizer writes the node into opset < 17 models (GPT-2's first
 * LayerNorm). Same attributes and meaning as 17. */
const alma_op_def alma__op_LayerNormalization = {
    .name = "LayerNormalization", .flags = ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 17},
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 3,
    .infer = ln_infer, .exec = ln_exec, .cost = norm_cost};

const alma_op_def alma__op_LRN = {.name = "LRN", .domain = "", .versions = {1, 13},
                                  .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                  .infer = lrn_infer, .exec = lrn_exec, .cost = norm_cost};
