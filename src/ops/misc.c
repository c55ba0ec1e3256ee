/* NonZero, Trilu, CumSum, CumProd. */
#include <math.h>

#include "ops/op.h"

/* ---- NonZero: int64 [rank, count] coordinates of the non-zero elements, row-major order ------- */

static int is_nonzero(const void *d, alma_dtype t, int64_t i) {
  if (alma__dtype_is_float(t)) return alma__get_f64(d, t, i) != 0.0; /* NaN is non-zero, -0 is zero */
  return alma__get_i64(d, t, i) != 0;
}

static int nz_dtype_ok(alma_dtype t) {
  return alma__dtype_is_float(t) || alma__dtype_is_int(t) || t == ALMA_DTYPE_BOOL;
}

static alma_status nonzero_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                 int nout) {
  const alma_tensor *x = in[0];
  if (!nz_dtype_ok(x->dtype)) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  int64_t ne = alma_tensor_numel(x);
  if (ne > 0 && !x->data) return alma__need_value();
  int64_t cnt = 0;
  for (int64_t i = 0; i < ne; i++) cnt += is_nonzero(x->data, x->dtype, i);
  int64_t dims[2] = {x->rank, cnt};
  alma__set_shape(&out[0], ALMA_DTYPE_INT64, 2, dims);
  return ALMA_OK;
}

static alma_status nonzero_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                                alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  int64_t ne = alma_tensor_numel(x), cnt = out[0].dims[1], k = 0;
  int64_t *o = out[0].data;
  int64_t coord[ALMA_MAX_RANK] = {0};
  for (int64_t i = 0; i < ne; i++) {
    if (is_nonzero(x->data, x->dtype, i)) {
      if (k >= cnt) return alma__op_error(n, ALMA_ERR_INTERNAL, "input changed between infer and exec");
      for (int d = 0; d < x->rank; d++) o[d * cnt + k] = coord[d];
      k++;
    }
    for (int d = x->rank - 1; d >= 0; d--) {
      if (++coord[d] < x->dims[d]) break;
      coord[d] = 0;
    }
  }
  return ALMA_OK;
}

const alma_op_def alma__op_NonZero = {.name = "NonZero", .domain = "", .versions = {9, 13},
                                      .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                      .infer = nonzero_infer, .exec = nonzero_exec};

/* ---- Trilu: keep the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims ---- */

static alma_status trilu_k(const alma_node *n, const alma_tensor *const *in, int nin, int64_t *k) {
  *k = 0;
  const alma_tensor *kt = nin > 1 ? in[1] : NULL;
  if (!kt) return ALMA_OK;
  if (kt->dtype != ALMA_DTYPE_INT64)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "k must be int64, got %s", alma_dtype_name(kt->dtype));
  if (alma_tensor_numel(kt) != 1 || kt->rank > 1)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "k must be a scalar");
  if (kt->data) *k = ((const int64_t *)kt->data)[0];
  return ALMA_OK;
}

static alma_status trilu_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                               int nout) {
  const alma_tensor *x = in[0];
  if (!alma_dtype_size(x->dtype) || x->dtype == ALMA_DTYPE_STRING)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  if (x->rank < 2) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input must have rank >= 2, got %d", x->rank);
  int64_t k;
  ALMA_TRY(trilu_k(n, in, nin, &k));
  alma__set_shape(&out[0], x->dtype, x->rank, x->dims);
  return ALMA_OK;
}

static alma_status trilu_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                              alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  int64_t k;
  ALMA_TRY(trilu_k(n, in, nin, &k));
  int upper = alma__attr_i(n, "upper", 1) != 0;
  int64_t R = x->dims[x->rank - 2], C = x->dims[x->rank - 1];
  int64_t batch = alma__numel(x->rank - 2, x->dims);
  size_t es = alma_dtype_size(x->dtype);
  const char *src = x->data;
  char *dst = out[0].data;
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < R; i++) {
      /* the kept columns of row i are one contiguous range [lo, hi) */
      int64_t lo, hi;
      if (upper) lo = i + k, hi = C;
      else lo = 0, hi = i + k + 1;
      if (lo < 0) lo = 0;
      if (hi > C) hi = C;
      if (lo >= hi) continue;
      size_t off = (size_t)((b * R + i) * C + lo) * es;
      memcpy(dst + off, src + off, (size_t)(hi - lo) * es);
    }
  }
  return ALMA_OK;
}

const alma_op_def alma__op_Trilu = {.name = "Trilu", .domain = "", .versions = {14},
                                    .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                    .infer = trilu_infer, .exec = trilu_exec};

/* ---- CumSum / CumProd: running sum or product along an axis given as an int32/int64 scalar ---- */

static alma_status cumsum_axis(const alma_node *n, const alma_tensor *const *in, int rank, int *axis) {
  const alma_tensor *at = in[1];
  if (!at) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis input is required");
  if (at->dtype != ALMA_DTYPE_INT64 && at->dtype != ALMA_DTYPE_INT32)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis must be int32 or int64, got %s", alma_dtype_name(at->dtype));
  if (alma_tensor_numel(at) != 1 || at->rank > 1)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis must be a scalar");
  if (!at->data) return ALMA_ERR_DYNAMIC;
  int64_t a = alma__get_i64(at->data, at->dtype, 0);
  if (a < -rank || a >= rank)
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "axis %lld out of range for rank %d", (long long)a, rank);
  *axis = (int)(a < 0 ? a + rank : a);
  return ALMA_OK;
}

static alma_status cumsum_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                int nout) {
  const alma_tensor *x = in[0];
  if (!alma__dtype_is_float(x->dtype) && !alma__dtype_is_int(x->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  if (x->rank < 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input must have rank >= 1");
  int axis = 0;
  alma_status st = cumsum_axis(n, in, x->rank, &axis);
  if (st != ALMA_OK && st != ALMA_ERR_DYNAMIC) return st; /* the shape does not depend on the axis */
  alma__set_shape(&out[0], x->dtype, x->rank, x->dims);
  return ALMA_OK;
}

static alma_status cum_run(const alma_node *n, const alma_tensor *const *in, alma_tensor *out, int prod) {
  const alma_tensor *x = in[0];
  int a = 0;
  alma_status st = cumsum_axis(n, in, x->rank, &a);
  if (st != ALMA_OK) return st == ALMA_ERR_DYNAMIC ? alma__op_error(n, ALMA_ERR_INTERNAL, "axis unknown") : st;
  int exclusive = alma__attr_i(n, "exclusive", 0) != 0, reverse = alma__attr_i(n, "reverse", 0) != 0;
  int64_t outer = 1, inner = 1, len = x->dims[a];
  for (int i = 0; i < a; i++) outer *= x->dims[i];
  for (int i = a + 1; i < x->rank; i++) inner *= x->dims[i];
  if (outer * inner * len == 0) return ALMA_OK;
  int fl = alma__dtype_is_float(x->dtype);
  /* one running sum (product) per inner position, walking the axis forward or backward */
  void *acc = alma__calloc((size_t)inner, 8);
  if (!acc) return alma__op_error(n, ALMA_ERR_NOMEM, "scratch");
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      if (fl) ((double *)acc)[i] = prod;
      else ((int64_t *)acc)[i] = prod;
    }
    for (int64_t s = 0; s < len; s++) {
      int64_t j = reverse ? len - 1 - s : s;
      int64_t base = (o * len + j) * inner;
      if (x->dtype == ALMA_DTYPE_FLOAT32) {
        const float *xp = (const float *)x->data + base;
        float *yp = (float *)out[0].data + base;
        double *ac = acc;
        for (int64_t i = 0; i < inner; i++) {
          if (exclusive) yp[i] = (float)ac[i];
          ac[i] = prod ? ac[i] * xp[i] : ac[i] + xp[i];
          if (!exclusive) yp[i] = (float)ac[i];
        }
      } else if (fl) {
        double *ac = acc;
        for (int64_t i = 0; i < inner; i++) {
          double v = alma__get_f64(x->data, x->dtype, base + i), next = prod ? ac[i] * v : ac[i] + v;
          alma__set_f64(out[0].data, x->dtype, base + i, exclusive ? ac[i] : next);
          ac[i] = next;
        }
      } else {
        int64_t *ac = acc; /* wraps like the integer type (computed unsigned to stay defined) */
        for (int64_t i = 0; i < inner; i++) {
          uint64_t v = (uint64_t)alma__get_i64(x->data, x->dtype, base + i);
          int64_t next = (int64_t)(prod ? (uint64_t)ac[i] * v : (uint64_t)ac[i] + v);
          alma__set_i64(out[0].data, x->dtype, base + i, exclusive ? ac[i] : next);
          ac[i] = next;
        }
      }
    }
  }
  free(acc);
  return ALMA_OK;
}

static alma_status cumsum_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                               alma_tensor *out, int nout) {
  return cum_run(n, in, out, 0);
}

static alma_status cumprod_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                                alma_tensor *out, int nout) {
  return cum_run(n, in, out, 1);
}

const alma_op_def alma__op_CumSum = {.name = "CumSum", .domain = "", .versions = {11, 14},
                                     .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                     .infer = cumsum_infer, .exec = cumsum_exec};

const alma_op_def alma__op_CumProd = {.name = "CumProd", .domain = "", .versions = {26},
                                      .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                      .infer = cumsum_infer, .exec = cumprod_exec};
