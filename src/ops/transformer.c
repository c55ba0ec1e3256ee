/* Transformer building blocks of opsets 23-28: RMSNormalization (23), RotaryEmbedding (23),
 * Swish (24) and SwiGLU (28).
 *
 * The ONNX spec defines each as a function of primitive ops, every one of which rounds its result
 * to the tensor's type. The kernels follow those function bodies step by step: float32 computes in
 * float32, float64 in double, and float16/bfloat16 compute each step in float32 and round it back
 * to the 16-bit type (products of two 16-bit values are exact in float32, so each step rounds once,
 * as the primitive op would). Reductions accumulate in double: ReduceMean fixes no summation
 * order, and the double sum keeps long rows from losing precision or overflowing midway. */
#include <math.h>

#include "ops/nn_util.h"
#include "ops/op_args.h"

/* the 16-bit paths compute in float32, each result rounded to the type */
static inline float rndf(alma_dtype t, float v) { return (float)alma__round_to(t, v); }
static float ldf(alma_dtype t, const void *p, int64_t i) {
  if (t == ALMA_DTYPE_FLOAT16) return alma__f16_to_f32(((const uint16_t *)p)[i]);
  if (t == ALMA_DTYPE_BFLOAT16) return alma__bf16_to_f32(((const uint16_t *)p)[i]);
  return ((const float *)p)[i];
}
static void stf(alma_dtype t, void *p, int64_t i, float v) {
  if (t == ALMA_DTYPE_FLOAT16) ((uint16_t *)p)[i] = alma__f32_to_f16(v);
  else if (t == ALMA_DTYPE_BFLOAT16) ((uint16_t *)p)[i] = alma__f32_to_bf16(v);
  else ((float *)p)[i] = v;
}

static int is_half(alma_dtype t) { return t == ALMA_DTYPE_FLOAT16 || t == ALMA_DTYPE_BFLOAT16; }

/* ---- RMSNormalization (opset 23) --------------------------------------------------------------
 * Y = Cast<T>(X / sqrt(ReduceMean(X*X, axes [axis, rank)) + epsilon)) * scale, stage one in
 * stash_type. scale broadcasts unidirectionally onto X. */

typedef struct rms_shape {
  int axis;
  int64_t rows, cols;
  alma_dtype stash;
  int scale_per_col; /* scale varies only along the normalized dims (one value per column) */
} rms_shape;

static alma_status rms_setup(const alma_node *n, const alma_tensor *const *in, int nin, rms_shape *rs) {
  const alma_tensor *x = in[0], *sc = alma__nn_in(in, nin, 1);
  if (!x || !sc) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "inputs X and scale are required");
  if (!alma__dtype_is_float(x->dtype))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "X dtype %s (float16, float, double or bfloat16 expected)",
                          alma_dtype_name(x->dtype));
  if (!alma__dtype_is_float(sc->dtype))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "scale dtype %s (float16, float, double or bfloat16 expected)",
                          alma_dtype_name(sc->dtype));
  /* The schema lets T and V differ, but its function body multiplies Cast<T>(Normalized) by scale
   * with Mul, which needs one type: the mixed form has no defined meaning to follow. */
  if (sc->dtype != x->dtype)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED,
                          "scale dtype %s differs from X dtype %s (the spec's function body, Mul(Cast<T>(Normalized), "
                          "scale), is defined only for equal types)",
                          alma_dtype_name(sc->dtype), alma_dtype_name(x->dtype));
  if (x->rank < 1) return alma__op_error(n, ALMA_ERR_SHAPE, "X must have rank >= 1, got a scalar");
  int64_t axis = alma__attr_i(n, "axis", -1);
  if (axis < -x->rank || axis >= x->rank)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis %lld is out of range [%d, %d) for X of rank %d",
                          (long long)axis, -x->rank, x->rank, x->rank);
  rs->axis = (int)(axis < 0 ? axis + x->rank : axis);
  int64_t stash = alma__attr_i(n, "stash_type", 1);
  if (!(stash == ALMA_DTYPE_FLOAT32 || stash == ALMA_DTYPE_FLOAT64 || stash == ALMA_DTYPE_FLOAT16 ||
        stash == ALMA_DTYPE_BFLOAT16))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL,
                          "stash_type %lld (1 float, 10 float16, 11 double or 16 bfloat16 expected)", (long long)stash);
  rs->stash = (alma_dtype)stash;
  /* unidirectional broadcast of scale onto X: trailing-aligned, each dim 1 or X's */
  int ok = sc->rank <= x->rank;
  for (int i = 0; ok && i < sc->rank; i++) {
    int64_t d = sc->dims[i], w = x->dims[x->rank - sc->rank + i];
    if (d != 1 && d != w) ok = 0;
  }
  if (!ok) {
    char s1[128], s2[128];
    return alma__op_error(n, ALMA_ERR_SHAPE, "scale of shape %s does not broadcast unidirectionally to X of shape %s",
                          alma__shape_str(sc->rank, sc->dims, s1, sizeof s1),
                          alma__shape_str(x->rank, x->dims, s2, sizeof s2));
  }
  rs->scale_per_col = 1;
  for (int i = 0; i < sc->rank; i++)
    if (x->rank - sc->rank + i < rs->axis && sc->dims[i] != 1) rs->scale_per_col = 0;
  rs->rows = alma__numel(rs->axis, x->dims);
  rs->cols = alma__numel(x->rank - rs->axis, x->dims + rs->axis);
  return ALMA_OK;
}

static alma_status rms_infer(INFER_ARGS) {
  rms_shape rs;
  ALMA_TRY(rms_setup(n, in, nin, &rs));
  alma__set_shape(&out[0], in[1]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

/* Fills w[0..cols) with the scale values of row r (broadcast onto X). */
static void rms_scale_row(const alma_tensor *x, const alma_tensor *sc, int64_t r, int64_t cols, double *w) {
  for (int64_t j = 0; j < cols; j++)
    w[j] = alma__get_f64(sc->data, sc->dtype, alma__broadcast_index(r * cols + j, x->rank, x->dims, sc->rank, sc->dims));
}

static alma_status rms_exec(EXEC_ARGS) {
  rms_shape rs;
  ALMA_TRY(rms_setup(n, in, nin, &rs));
  const alma_tensor *x = in[0], *sc = in[1];
  int64_t rows = rs.rows, cols = rs.cols;
  if (rows == 0 || cols == 0) return ALMA_OK;
  alma_dtype t = x->dtype, st = rs.stash;
  /* Epsilon = Cast<stash>(float epsilon) */
  double eps = alma__round_to(st, (double)alma__attr_f(n, "epsilon", 1e-5f));
  double *w = alma__nn_alloc(n, (size_t)cols, sizeof *w);
  if (!w) return ALMA_ERR_NOMEM;
  if (rs.scale_per_col) rms_scale_row(x, sc, 0, cols, w);

  if (t == ALMA_DTYPE_FLOAT32 && st == ALMA_DTYPE_FLOAT32) {
    float *wf = alma__nn_alloc(n, (size_t)cols, sizeof *wf);
    if (!wf) {
      free(w);
      return ALMA_ERR_NOMEM;
    }
    float epsf = (float)eps;
    for (int64_t j = 0; j < cols && rs.scale_per_col; j++) wf[j] = (float)w[j];
    for (int64_t r = 0; r < rows; r++) {
      const float *xs = (const float *)x->data + r * cols;
      float *ys = (float *)out[0].data + r * cols;
      if (!rs.scale_per_col) {
        rms_scale_row(x, sc, r, cols, w);
        for (int64_t j = 0; j < cols; j++) wf[j] = (float)w[j];
      }
      double acc = 0;
      for (int64_t j = 0; j < cols; j++) {
        float sq = xs[j] * xs[j]; /* XSquared in float, as Mul would round it */
        acc += sq;
      }
      float rms = sqrtf((float)(acc / (double)cols) + epsf);
      for (int64_t j = 0; j < cols; j++) ys[j] = (xs[j] / rms) * wf[j];
    }
    free(wf);
    free(w);
    return ALMA_OK;
  }

  /* Any other type pair: each function-body step rounded to its type. */
  for (int64_t r = 0; r < rows; r++) {
    int64_t base = r * cols;
    if (!rs.scale_per_col) rms_scale_row(x, sc, r, cols, w);
    double acc = 0;
    for (int64_t j = 0; j < cols; j++) {
      double xu = alma__round_to(st, alma__get_f64(x->data, t, base + j)); /* XU = Cast<stash>(X) */
      acc += alma__round_to(st, xu * xu);
    }
    double ms = alma__round_to(st, acc / (double)cols);
    double rms = alma__round_to(st, sqrt(alma__round_to(st, ms + eps)));
    for (int64_t j = 0; j < cols; j++) {
      double xu = alma__round_to(st, alma__get_f64(x->data, t, base + j));
      double nt = alma__round_to(t, alma__round_to(st, xu / rms)); /* NormalizedT = Cast<T>(Div(XU, RMS)) */
      alma__set_f64(out[0].data, out[0].dtype, base + j, nt * w[j]); /* Mul in T: the store rounds */
    }
  }
  free(w);
  return ALMA_OK;
}

static void rms_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                     int64_t *macs, int64_t *flops) {
  *macs = 0;
  /* square, sum, divide, scale per element */
  *flops = nin > 0 && in[0] ? 4 * alma_tensor_numel(in[0]) : -1;
}

/* ---- RotaryEmbedding (opset 23) ---------------------------------------------------------------
 * X is [B, H, S, D] or [B, S, H*D] (num_heads given). Each head's first rotary_embedding_dim
 * (default D) elements are rotated as pairs (x1, x2), either halves or interleaved:
 *   real = cos*x1 - sin*x2, imag = sin*x1 + cos*x2
 * the rest passes through. cos/sin: [max_pos, rot/2] indexed by position_ids [B, S], or [B, S, rot/2]
 * without position_ids. */

typedef struct rope_shape {
  int64_t B, S, H, D, rot;
  int four_d, interleaved;
} rope_shape;

static alma_status rope_setup(const alma_node *n, const alma_tensor *const *in, int nin, rope_shape *rp) {
  const alma_tensor *x = in[0], *cs = alma__nn_in(in, nin, 1), *sn = alma__nn_in(in, nin, 2),
                    *pid = alma__nn_in(in, nin, 3);
  char s1[128], s2[128];
  if (!x || !cs || !sn) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "inputs X, cos_cache and sin_cache are required");
  if (x->dtype != ALMA_DTYPE_FLOAT32 && !is_half(x->dtype))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "X dtype %s (float, float16 or bfloat16 expected)",
                          alma_dtype_name(x->dtype));
  if (cs->dtype != x->dtype || sn->dtype != x->dtype)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "cos_cache (%s) and sin_cache (%s) must have X's dtype %s",
                          alma_dtype_name(cs->dtype), alma_dtype_name(sn->dtype), alma_dtype_name(x->dtype));
  if (pid && pid->dtype != ALMA_DTYPE_INT64)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "position_ids dtype %s (int64 expected)", alma_dtype_name(pid->dtype));
  int64_t nh = alma__attr_i(n, "num_heads", 0), rot = alma__attr_i(n, "rotary_embedding_dim", 0);
  int64_t il = alma__attr_i(n, "interleaved", 0);
  if (nh < 0) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "num_heads %lld is negative", (long long)nh);
  if (il != 0 && il != 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "interleaved %lld (0 or 1 expected)", (long long)il);
  rp->interleaved = (int)il;
  if (x->rank == 4) {
    rp->four_d = 1;
    rp->B = x->dims[0], rp->H = x->dims[1], rp->S = x->dims[2], rp->D = x->dims[3];
    if (nh && nh != rp->H)
      return alma__op_error(n, ALMA_ERR_SHAPE, "num_heads %lld does not match X's head dimension %lld (X is [B, H, S, D] %s)",
                            (long long)nh, (long long)rp->H, alma__shape_str(x->rank, x->dims, s1, sizeof s1));
  } else if (x->rank == 3) {
    rp->four_d = 0;
    if (!nh) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "num_heads is required for a 3-D X [B, S, hidden]");
    if (x->dims[2] % nh)
      return alma__op_error(n, ALMA_ERR_SHAPE, "hidden size %lld of X is not divisible by num_heads %lld",
                            (long long)x->dims[2], (long long)nh);
    rp->B = x->dims[0], rp->S = x->dims[1], rp->H = nh, rp->D = x->dims[2] / nh;
  } else {
    return alma__op_error(n, ALMA_ERR_SHAPE, "X must be 3-D [B, S, hidden] or 4-D [B, H, S, D], got %s",
                          alma__shape_str(x->rank, x->dims, s1, sizeof s1));
  }
  if (rot < 0) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "rotary_embedding_dim %lld is negative", (long long)rot);
  int rot_given = rot != 0;
  if (rot == 0) rot = rp->D;
  if (rot > rp->D)
    return alma__op_error(n, ALMA_ERR_SHAPE, "rotary_embedding_dim %lld exceeds the head size %lld", (long long)rot,
                          (long long)rp->D);
  if (rot % 2)
    return alma__op_error(n, ALMA_ERR_SHAPE, "rotary dimension %lld is odd (%s; pairs are rotated)", (long long)rot,
                          rot_given ? "rotary_embedding_dim" : "the head size");
  rp->rot = rot;
  int64_t half = rot / 2;
  const alma_tensor *caches[2] = {cs, sn};
  for (int k = 0; k < 2; k++) {
    const alma_tensor *c = caches[k];
    const char *nm = k ? "sin_cache" : "cos_cache";
    int ok;
    if (pid)
      ok = c->rank == 2 && c->dims[1] == half;
    else
      ok = c->rank == 3 && c->dims[0] == rp->B && c->dims[1] == rp->S && c->dims[2] == half;
    if (!ok) {
      if (pid)
        return alma__op_error(n, ALMA_ERR_SHAPE, "%s has shape %s; with position_ids it must be [max_position, %lld]",
                              nm, alma__shape_str(c->rank, c->dims, s1, sizeof s1), (long long)half);
      return alma__op_error(n, ALMA_ERR_SHAPE,
                            "%s has shape %s; without position_ids it must be [batch, sequence, rotary_dim/2] = "
                            "[%lld, %lld, %lld]",
                            nm, alma__shape_str(c->rank, c->dims, s1, sizeof s1), (long long)rp->B, (long long)rp->S,
                            (long long)half);
    }
  }
  if (pid && (cs->dims[0] != sn->dims[0]))
    return alma__op_error(n, ALMA_ERR_SHAPE, "cos_cache %s and sin_cache %s differ in max_position",
                          alma__shape_str(cs->rank, cs->dims, s1, sizeof s1), alma__shape_str(sn->rank, sn->dims, s2, sizeof s2));
  if (pid && (pid->rank != 2 || pid->dims[0] != rp->B || pid->dims[1] != rp->S))
    return alma__op_error(n, ALMA_ERR_SHAPE, "position_ids has shape %s, expected [batch, sequence] = [%lld, %lld]",
                          alma__shape_str(pid->rank, pid->dims, s1, sizeof s1), (long long)rp->B, (long long)rp->S);
  return ALMA_OK;
}

static alma_status rope_infer(INFER_ARGS) {
  rope_shape rp;
  ALMA_TRY(rope_setup(n, in, nin, &rp));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

/* One head vector of length D (float32). c/s: half cos/sin values. */
static void rope_row_f32(const float *x, float *y, const float *c, const float *s, int64_t D, int64_t half,
                         int interleaved) {
  if (interleaved) {
    for (int64_t i = 0; i < half; i++) {
      float x1 = x[2 * i], x2 = x[2 * i + 1];
      y[2 * i] = c[i] * x1 - s[i] * x2;
      y[2 * i + 1] = s[i] * x1 + c[i] * x2;
    }
  } else {
    for (int64_t i = 0; i < half; i++) {
      float x1 = x[i], x2 = x[half + i];
      y[i] = c[i] * x1 - s[i] * x2;
      y[half + i] = s[i] * x1 + c[i] * x2;
    }
  }
  for (int64_t j = 2 * half; j < D; j++) y[j] = x[j];
}

/* The 16-bit form: every Mul, Sub and Add of the function body rounds to T. */
static void rope_row_half(alma_dtype t, const float *x, float *y, const float *c, const float *s, int64_t D,
                          int64_t half, int interleaved) {
  for (int64_t i = 0; i < half; i++) {
    int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : half + i;
    float x1 = x[i1], x2 = x[i2];
    y[i1] = rndf(t, rndf(t, c[i] * x1) - rndf(t, s[i] * x2));
    y[i2] = rndf(t, rndf(t, s[i] * x1) + rndf(t, c[i] * x2));
  }
  for (int64_t j = 2 * half; j < D; j++) y[j] = x[j];
}

static alma_status rope_exec(EXEC_ARGS) {
  rope_shape rp;
  ALMA_TRY(rope_setup(n, in, nin, &rp));
  const alma_tensor *x = in[0], *cs = in[1], *sn = in[2], *pid = alma__nn_in(in, nin, 3);
  alma_dtype t = x->dtype;
  int64_t B = rp.B, S = rp.S, H = rp.H, D = rp.D, half = rp.rot / 2;
  if (pid) {
    /* Indices are checked before any is used (numpy would wrap negatives; the spec gives none). */
    const int64_t *p = pid->data;
    int64_t maxp = cs->dims[0];
    for (int64_t i = 0; i < B * S; i++)
      if (p[i] < 0 || p[i] >= maxp)
        return alma__op_error(n, ALMA_ERR_INVALID_ARG,
                              "position_ids[%lld][%lld] = %lld is out of range [0, %lld) of the cos/sin caches",
                              (long long)(i / S), (long long)(i % S), (long long)p[i], (long long)maxp);
  }
  /* scratch for 16-bit types: one head row of X and Y, and a cos/sin row, in float32 */
  float *buf = NULL;
  if (is_half(t)) {
    buf = alma__nn_alloc(n, (size_t)(2 * D + 2 * half + 1), sizeof *buf);
    if (!buf) return ALMA_ERR_NOMEM;
  }
  for (int64_t b = 0; b < B; b++)
    for (int64_t s = 0; s < S; s++) {
      int64_t crow = (pid ? ((const int64_t *)pid->data)[b * S + s] : b * S + s) * half;
      if (t == ALMA_DTYPE_FLOAT32) {
        const float *c = (const float *)cs->data + crow, *sv = (const float *)sn->data + crow;
        for (int64_t h = 0; h < H; h++) {
          int64_t off = (rp.four_d ? (b * H + h) * S + s : (b * S + s) * H + h) * D;
          rope_row_f32((const float *)x->data + off, (float *)out[0].data + off, c, sv, D, half, rp.interleaved);
        }
      } else {
        float *xr = buf, *yr = buf + D, *c = buf + 2 * D, *sv = c + half;
        for (int64_t i = 0; i < half; i++) c[i] = ldf(t, cs->data, crow + i), sv[i] = ldf(t, sn->data, crow + i);
        for (int64_t h = 0; h < H; h++) {
          int64_t off = (rp.four_d ? (b * H + h) * S + s : (b * S + s) * H + h) * D;
          for (int64_t j = 0; j < D; j++) xr[j] = ldf(t, x->data, off + j);
          rope_row_half(t, xr, yr, c, sv, D, half, rp.interleaved);
          for (int64_t j = 0; j < D; j++) stf(t, out[0].data, off + j, yr[j]);
        }
      }
    }
  free(buf);
  return ALMA_OK;
}

static void rope_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                      int64_t *macs, int64_t *flops) {
  rope_shape rp;
  *macs = 0;
  *flops = -1;
  if (nin < 3 || !in[0] || rope_setup(n, in, nin, &rp) != ALMA_OK) {
    alma__error_clear();
    return;
  }
  /* 4 multiplies and 2 adds per rotated pair */
  *flops = rp.B * rp.S * rp.H * (rp.rot / 2) * 6;
}

/* ---- Swish (opset 24) and SwiGLU (opset 28) ----------------------------------------------------
 * Swish(x) = x * Sigmoid(CastLike(alpha, x) * x); SwiGLU(a, b) = Swish(a) * b. Each step rounds
 * to T (the 16-bit types through float32). */

#define SIGMOID(T, v) ((v) >= 0 ? (T)1 / ((T)1 + exp_##T(-(v))) : exp_##T(v) / ((T)1 + exp_##T(v)))
static inline float exp_float(float v) { return expf(v); }
static inline double exp_double(double v) { return exp(v); }

static alma_status swish_check(const alma_node *n, const alma_tensor *x, const char *what) {
  if (!alma__dtype_is_float(x->dtype))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%s dtype %s (float16, float, double or bfloat16 expected)", what,
                          alma_dtype_name(x->dtype));
  return ALMA_OK;
}

static alma_status swish_infer(INFER_ARGS) {
  ALMA_TRY(swish_check(n, in[0], "X"));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

/* y = swish(a) (b == NULL) or swish(a) * b, over cnt elements of dtype t */
static void swish_run(alma_dtype t, float alpha, const void *a, const void *b, void *y, int64_t cnt) {
  if (t == ALMA_DTYPE_FLOAT32) {
    const float *as = a, *bs = b;
    float *ys = y;
    for (int64_t i = 0; i < cnt; i++) {
      float v = as[i], ax = alpha * v;
      float sw = v * SIGMOID(float, ax);
      ys[i] = bs ? sw * bs[i] : sw;
    }
  } else if (t == ALMA_DTYPE_FLOAT64) {
    const double *as = a, *bs = b;
    double *ys = y, al = alpha;
    for (int64_t i = 0; i < cnt; i++) {
      double v = as[i], ax = al * v;
      double sw = v * SIGMOID(double, ax);
      ys[i] = bs ? sw * bs[i] : sw;
    }
  } else {
    float al = rndf(t, alpha); /* CastLike(alpha, X) */
    for (int64_t i = 0; i < cnt; i++) {
      float v = ldf(t, a, i), ax = rndf(t, al * v);
      float sg = rndf(t, SIGMOID(float, ax));
      float sw = rndf(t, v * sg);
      stf(t, y, i, b ? sw * ldf(t, b, i) : sw);
    }
  }
}

static alma_status swish_exec(EXEC_ARGS) {
  swish_run(in[0]->dtype, alma__attr_f(n, "alpha", 1.0f), in[0]->data, NULL, out[0].data, alma_tensor_numel(in[0]));
  return ALMA_OK;
}

static alma_status swiglu_infer(INFER_ARGS) {
  const alma_tensor *a = in[0], *b = alma__nn_in(in, nin, 1);
  if (!a || !b) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "inputs A and B are required");
  ALMA_TRY(swish_check(n, a, "A"));
  if (b->dtype != a->dtype)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "B dtype %s differs from A dtype %s", alma_dtype_name(b->dtype),
                          alma_dtype_name(a->dtype));
  if (!alma__same_shape(a, b)) {
    char s1[128], s2[128];
    return alma__op_error(n, ALMA_ERR_SHAPE, "A %s and B %s must have the same shape (SwiGLU does not broadcast)",
                          alma__shape_str(a->rank, a->dims, s1, sizeof s1), alma__shape_str(b->rank, b->dims, s2, sizeof s2));
  }
  alma__set_shape(&out[0], a->dtype, a->rank, a->dims);
  return ALMA_OK;
}

static alma_status swiglu_exec(EXEC_ARGS) {
  swish_run(in[0]->dtype, alma__attr_f(n, "alpha", 1.0f), in[0]->data, in[1]->data, out[0].data,
            alma_tensor_numel(in[0]));
  return ALMA_OK;
}

static void swish_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                       int64_t *macs, int64_t *flops) {
  *macs = 0;
  /* alpha*x, exp, add, divide, multiply (+ the gate multiply for SwiGLU) */
  *flops = nout > 0 && out ? (nin > 1 ? 6 : 5) * alma_tensor_numel(&out[0]) : -1;
}

const alma_op_def alma__op_RMSNormalization = {
    .name = "RMSNormalization", .domain = "", .versions = {23},
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .infer = rms_infer, .exec = rms_exec, .cost = rms_cost};

const alma_op_def alma__op_RotaryEmbedding = {
    .name = "RotaryEmbedding", .domain = "", .versions = {23},
    .min_inputs = 3, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .infer = rope_infer, .exec = rope_exec, .cost = rope_cost};

const alma_op_def alma__op_Swish = {
    .name = "Swish", .domain = "", .versions = {24},
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .infer = swish_infer, .exec = swish_exec, .cost = swish_cost};

const alma_op_def alma__op_SwiGLU = {
    .name = "SwiGLU", .domain = "", .versions = {28},
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .infer = swiglu_infer, .exec = swiglu_exec, .cost = swish_cost};
