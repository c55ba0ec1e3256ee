/* Reductions: ReduceSum/Mean/Prod/Max/Min/L1/L2/SumSquare/LogSum/LogSumExp, ArgMax, ArgMin.
 *
 * Axes come from the `axes` attribute before the version that made them an input (13 for
 * ReduceSum, 18 for the others) and from the optional second input from then on, where
 * noop_with_empty_axes also applies. A reduction over an empty set yields the identity of the
 * operation (0 for sums, 1 for products, the lowest/highest value of the type for Max/Min, -inf for
 * the log forms), as the ONNX reference does.
 *
 * Kernel: the input shape is coalesced into runs of reduced / kept dimensions, then rows of the
 * innermost run are read contiguously (converted once per row into a double or int64 scratch) and
 * folded into an accumulator per output element. Floating inputs accumulate in double; integer
 * inputs accumulate exactly in int64 (except the L2/log forms, computed in double and cast back). */
#include <math.h>

#include "ops/op.h"
#include "ops/sgemm.h" /* ALMA_MULTIVERSION */

typedef enum { R_SUM, R_MEAN, R_PROD, R_MAX, R_MIN, R_L1, R_L2, R_SUMSQ, R_LOGSUM, R_LOGSUMEXP } rkind;

/* ---- typed row loaders ---------------------------------------------------------------------- */

static void load_f64(const void *d, alma_dtype t, int64_t off, int64_t n, double *dst) {
  switch (t) {
    case ALMA_DTYPE_FLOAT32: {
      const float *p = (const float *)d + off;
      for (int64_t i = 0; i < n; i++) dst[i] = p[i];
      break;
    }
    case ALMA_DTYPE_FLOAT64: memcpy(dst, (const double *)d + off, (size_t)n * sizeof(double)); break;
    default:
      for (int64_t i = 0; i < n; i++) dst[i] = alma__get_f64(d, t, off + i);
      break;
  }
}

/* Integers as int64; uint64 is mapped to an order-preserving signed key (flip the top bit) where
 * ordering matters, which the caller undoes when storing. */
static void load_i64(const void *d, alma_dtype t, int64_t off, int64_t n, int64_t *dst, int order_key) {
  switch (t) {
    case ALMA_DTYPE_INT64: memcpy(dst, (const int64_t *)d + off, (size_t)n * sizeof(int64_t)); break;
    case ALMA_DTYPE_INT32: {
      const int32_t *p = (const int32_t *)d + off;
      for (int64_t i = 0; i < n; i++) dst[i] = p[i];
      break;
    }
    case ALMA_DTYPE_UINT64: {
      const uint64_t *p = (const uint64_t *)d + off;
      uint64_t flip = order_key ? (UINT64_C(1) << 63) : 0;
      for (int64_t i = 0; i < n; i++) dst[i] = (int64_t)(p[i] ^ flip);
      break;
    }
    default:
      for (int64_t i = 0; i < n; i++) dst[i] = alma__get_i64(d, t, off + i);
      break;
  }
}

static void store_f64(void *d, alma_dtype t, const double *src, int64_t n) {
  if (t == ALMA_DTYPE_FLOAT32) {
    float *p = d;
    for (int64_t i = 0; i < n; i++) p[i] = (float)src[i];
  } else if (t == ALMA_DTYPE_FLOAT64) {
    memcpy(d, src, (size_t)n * sizeof(double));
  } else if (alma__dtype_is_float(t)) {
    for (int64_t i = 0; i < n; i++) alma__set_f64(d, t, i, src[i]);
  } else {
    /* integer outputs of L2/log forms: truncate toward zero like numpy's astype */
    for (int64_t i = 0; i < n; i++) {
      double v = src[i];
      if (isnan(v)) v = 0;
      alma__set_f64(d, t, i, trunc(v));
    }
  }
}

/* ---- shapes --------------------------------------------------------------------------------- */

static int axes_input_version(const alma_node *n) { return strcmp(n->op_type, "ReduceSum") ? 18 : 13; }

/* Resolves which axes are reduced. *noop is set when noop_with_empty_axes applies (output = input). */
static alma_status reduce_axes(const alma_node *n, const alma_tensor *const *in, int nin, int rank,
                               uint8_t mask[ALMA_MAX_RANK], int *noop) {
  memset(mask, 0, ALMA_MAX_RANK);
  *noop = 0;
  int64_t axes[ALMA_MAX_RANK];
  int naxes = 0;
  int as_input = n->since_version >= axes_input_version(n);
  if (as_input) {
    if (alma__node_attr(n, "axes"))
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axes is an input, not an attribute, at opset %d",
                            n->since_version);
    const alma_tensor *a = nin > 1 ? in[1] : NULL;
    if (a) {
      if (a->dtype != ALMA_DTYPE_INT64 && a->dtype != ALMA_DTYPE_INT32)
        return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axes must be int64, got %s", alma_dtype_name(a->dtype));
      if (a->rank > 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axes must be 1-D, got rank %d", a->rank);
      int64_t cnt = alma_tensor_numel(a);
      if (cnt > 0 && !a->data) return alma__need_value();
      if (cnt > rank)
        return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%lld axes given for rank %d", (long long)cnt, rank);
      for (int64_t i = 0; i < cnt; i++) axes[naxes++] = alma__get_i64(a->data, a->dtype, i);
    }
    if (naxes == 0 && alma__attr_i(n, "noop_with_empty_axes", 0)) {
      *noop = 1;
      return ALMA_OK;
    }
  } else {
    const int64_t *ax = NULL;
    int cnt = alma__attr_ints(n, "axes", &ax);
    if (cnt > rank) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%d axes given for rank %d", cnt, rank);
    for (int i = 0; i < cnt; i++) axes[naxes++] = ax[i];
  }
  if (naxes == 0) {
    for (int i = 0; i < rank; i++) mask[i] = 1;
    return ALMA_OK;
  }
  for (int i = 0; i < naxes; i++) {
    if (axes[i] < -rank || axes[i] >= rank)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis %lld out of range for rank %d", (long long)axes[i], rank);
    int a = (int)(axes[i] < 0 ? axes[i] + rank : axes[i]);
    if (mask[a]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis %lld repeated", (long long)axes[i]);
    mask[a] = 1;
  }
  return ALMA_OK;
}

static rkind kind_of(const alma_node *n) {
  const char *t = n->op_type + 6; /* after "Reduce" */
  if (!strcmp(t, "Sum")) return R_SUM;
  if (!strcmp(t, "Mean")) return R_MEAN;
  if (!strcmp(t, "Prod")) return R_PROD;
  if (!strcmp(t, "Max")) return R_MAX;
  if (!strcmp(t, "Min")) return R_MIN;
  if (!strcmp(t, "L1")) return R_L1;
  if (!strcmp(t, "L2")) return R_L2;
  if (!strcmp(t, "SumSquare")) return R_SUMSQ;
  if (!strcmp(t, "LogSum")) return R_LOGSUM;
  return R_LOGSUMEXP;
}

static int is_numeric(alma_dtype t) { return alma__dtype_is_float(t) || alma__dtype_is_int(t); }

static alma_status reduce_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                int nout) {
  const alma_tensor *x = in[0];
  rkind k = kind_of(n);
  int ok = is_numeric(x->dtype) || (x->dtype == ALMA_DTYPE_BOOL && (k == R_MAX || k == R_MIN) && n->since_version >= 20);
  if (!ok) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  uint8_t mask[ALMA_MAX_RANK];
  int noop;
  alma_status st = reduce_axes(n, in, nin, x->rank, mask, &noop);
  if (st != ALMA_OK) return st;
  int64_t keepdims = alma__attr_i(n, "keepdims", 1);
  if (noop) {
    alma__set_shape(&out[0], x->dtype, x->rank, x->dims);
    return ALMA_OK;
  }
  int64_t dims[ALMA_MAX_RANK];
  int r = 0;
  for (int i = 0; i < x->rank; i++) {
    if (!mask[i]) dims[r++] = x->dims[i];
    else if (keepdims) dims[r++] = 1;
  }
  alma__set_shape(&out[0], x->dtype, r, dims);
  return ALMA_OK;
}

/* Coalesced view: runs of adjacent dims that are all reduced or all kept (size-1 dims dropped). */
typedef struct {
  int k;
  int64_t size[ALMA_MAX_RANK];
  uint8_t red[ALMA_MAX_RANK];
  int64_t ostride[ALMA_MAX_RANK]; /* output stride of kept runs (0 for reduced) */
} rview;

static void coalesce(int rank, const int64_t *dims, const uint8_t *mask, rview *v) {
  v->k = 0;
  for (int i = 0; i < rank; i++) {
    if (dims[i] == 1) continue;
    if (v->k && v->red[v->k - 1] == mask[i]) {
      v->size[v->k - 1] *= dims[i];
    } else {
      v->size[v->k] = dims[i];
      v->red[v->k] = mask[i];
      v->k++;
    }
  }
  if (v->k == 0) { /* all size-1: one kept run of length 1 */
    v->size[0] = 1;
    v->red[0] = 0;
    v->k = 1;
  }
  int64_t s = 1;
  for (int i = v->k - 1; i >= 0; i--) {
    v->ostride[i] = v->red[i] ? 0 : s;
    if (!v->red[i]) s *= v->size[i];
  }
}

/* Calls body(row_offset_in_input, out_offset) for every innermost row. */
#define FOR_EACH_ROW(v, ROWOFF, OOFF, ...)                                          \
  do {                                                                              \
    int64_t ctr_[ALMA_MAX_RANK] = {0};                                              \
    int64_t L_ = (v)->size[(v)->k - 1];                                             \
    int64_t nrows_ = 1;                                                             \
    for (int q_ = 0; q_ < (v)->k - 1; q_++) nrows_ *= (v)->size[q_];                \
    int64_t OOFF = 0;                                                               \
    for (int64_t r_ = 0; r_ < nrows_; r_++) {                                       \
      int64_t ROWOFF = r_ * L_;                                                     \
      __VA_ARGS__;                                                                  \
      for (int q_ = (v)->k - 2; q_ >= 0; q_--) {                                    \
        OOFF += (v)->ostride[q_];                                                   \
        if (++ctr_[q_] < (v)->size[q_]) break;                                      \
        OOFF -= (v)->ostride[q_] * (v)->size[q_];                                   \
        ctr_[q_] = 0;                                                               \
      }                                                                             \
    }                                                                               \
  } while (0)

static double ident_f(rkind k) {
  switch (k) {
    case R_PROD: return 1.0;
    case R_MAX: case R_LOGSUMEXP: return -INFINITY;
    case R_MIN: return INFINITY;
    default: return 0.0;
  }
}

/* Identity for the integer path in key space (uint64 keys are top-bit flipped). */
static int64_t ident_i(rkind k, alma_dtype t) {
  if (k == R_PROD) return 1;
  if (k != R_MAX && k != R_MIN) return 0;
  int mx = k == R_MIN; /* Min starts from the type's highest value */
  switch (t) {
    case ALMA_DTYPE_INT8: return mx ? INT8_MAX : INT8_MIN;
    case ALMA_DTYPE_UINT8: return mx ? UINT8_MAX : 0;
    case ALMA_DTYPE_INT16: return mx ? INT16_MAX : INT16_MIN;
    case ALMA_DTYPE_UINT16: return mx ? UINT16_MAX : 0;
    case ALMA_DTYPE_INT32: return mx ? INT32_MAX : INT32_MIN;
    case ALMA_DTYPE_UINT32: return mx ? (int64_t)UINT32_MAX : 0;
    case ALMA_DTYPE_INT64: return mx ? INT64_MAX : INT64_MIN;
    case ALMA_DTYPE_UINT64: return mx ? INT64_MAX : INT64_MIN; /* keys of UINT64_MAX and 0 */
    case ALMA_DTYPE_BOOL: return mx ? 1 : 0;
    default: return 0;
  }
}

static inline double fold_f(rkind k, double s, double x) {
  switch (k) {
    case R_PROD: return s * x;
    case R_MAX: return (x > s || isnan(x)) ? x : s;
    case R_MIN: return (x < s || isnan(x)) ? x : s;
    case R_L1: return s + fabs(x);
    case R_L2: case R_SUMSQ: return s + x * x;
    default: return s + x;
  }
}

typedef double red_v4d __attribute__((vector_size(32)));
typedef float red_v4f __attribute__((vector_size(16)));

/* Pass 1 of a sum (ReduceSum, ReduceMean, ReduceLogSum) of float32 data, read straight from the
 * floats four at a time (AVX2 where the CPU has it): a reduced last run keeps the scalar loop's
 * four partial sums in the vector's lanes, a kept one adds four outputs at once, so the same bits
 * as the generic loop (no products: nothing for FMA contraction to change). */
ALMA_MULTIVERSION
static void sum_rows_f32(const float *x, const rview *v, double *acc) {
  int64_t L = v->size[v->k - 1];
  int last_red = v->red[v->k - 1];
  FOR_EACH_ROW(v, ro, oo, {
    const float *p = x + ro;
    int64_t j = 0;
    if (last_red) {
      red_v4d s4 = {0, 0, 0, 0};
      for (; j + 4 <= L; j += 4) {
        red_v4f f;
        memcpy(&f, p + j, sizeof f);
        s4 += __builtin_convertvector(f, red_v4d);
      }
      double p0 = s4[0];
      for (; j < L; j++) p0 += p[j];
      acc[oo] += (p0 + s4[1]) + (s4[2] + s4[3]);
    } else {
      double *a = acc + oo;
      for (; j + 4 <= L; j += 4) {
        red_v4f f;
        red_v4d s;
        memcpy(&f, p + j, sizeof f);
        memcpy(&s, a + j, sizeof s);
        s += __builtin_convertvector(f, red_v4d);
        memcpy(a + j, &s, sizeof s);
      }
      for (; j < L; j++) a[j] += p[j];
    }
  });
}

/* sum_rows_f32 over the outer kept run, one item per index of it (each output belongs to one, so
 * the sums and their order are the same however the items are spread over threads). */
typedef struct {
  const float *x;
  rview sub; /* v with its first run cut to one index */
  int64_t xstep, ostep;
  double *acc;
} sum_job;

static void sum_item(void *arg, int64_t i) {
  const sum_job *j = arg;
  sum_rows_f32(j->x + i * j->xstep, &j->sub, j->acc + i * j->ostep);
}

static void sum_f32(alma_exec_ctx *ctx, const float *x, const rview *v, double *acc) {
  alma_exec_parfor pf;
  void *pctx;
  int64_t n = 1;
  for (int q = 0; q < v->k; q++) n *= v->size[q];
  /* below about 64K elements the fork-join costs more than the sums */
  if (v->k < 2 || v->red[0] || v->size[0] < 2 || n < (1 << 16) || alma__exec_parfor(ctx, &pf, &pctx) < 2) {
    sum_rows_f32(x, v, acc);
    return;
  }
  sum_job j = {.x = x, .sub = *v, .xstep = n / v->size[0], .ostep = v->ostride[0], .acc = acc};
  j.sub.size[0] = 1;
  pf(pctx, v->size[0], sum_item, &j);
}

static alma_status reduce_float(alma_exec_ctx *ctx, const alma_tensor *x, alma_tensor *y, const rview *v, rkind k,
                                int64_t count) {
  int64_t on = alma_tensor_numel(y);
  int64_t L = v->size[v->k - 1];
  int last_red = v->red[v->k - 1];
  double *acc = alma__malloc((size_t)on * sizeof(double));
  double *mx = k == R_LOGSUMEXP ? alma__malloc((size_t)on * sizeof(double)) : NULL;
  double *row = alma__malloc((size_t)L * sizeof(double));
  if (!acc || !row || (k == R_LOGSUMEXP && !mx)) {
    free(acc), free(mx), free(row);
    return alma__errorf(ALMA_ERR_NOMEM, "reduction scratch");
  }
  rkind k1 = k == R_LOGSUMEXP ? R_MAX : k;
  for (int64_t i = 0; i < on; i++) acc[i] = ident_f(k1);
  if (count > 0 && x->dtype == ALMA_DTYPE_FLOAT32 && (k == R_SUM || k == R_MEAN || k == R_LOGSUM)) {
    sum_f32(ctx, x->data, v, acc);
  } else if (count > 0) {
    /* Pass 1 (every kind; LogSumExp finds the per-output maximum here for stability). */
    FOR_EACH_ROW(v, ro, oo, {
      load_f64(x->data, x->dtype, ro, L, row);
      if (last_red) {
        double s = acc[oo];
        switch (k1) { /* kind hoisted out of the hot loop */
          case R_SUM: case R_MEAN: case R_LOGSUM: { /* 4 partial sums: no serial add latency */
            double p0 = 0, p1 = 0, p2 = 0, p3 = 0;
            int64_t j = 0;
            for (; j + 4 <= L; j += 4) p0 += row[j], p1 += row[j + 1], p2 += row[j + 2], p3 += row[j + 3];
            for (; j < L; j++) p0 += row[j];
            s += (p0 + p1) + (p2 + p3);
            break;
          }
          case R_L2: case R_SUMSQ: {
            double p0 = 0, p1 = 0, p2 = 0, p3 = 0;
            int64_t j = 0;
            for (; j + 4 <= L; j += 4)
              p0 += row[j] * row[j], p1 += row[j + 1] * row[j + 1], p2 += row[j + 2] * row[j + 2],
                  p3 += row[j + 3] * row[j + 3];
            for (; j < L; j++) p0 += row[j] * row[j];
            s += (p0 + p1) + (p2 + p3);
            break;
          }
          default:
            for (int64_t j = 0; j < L; j++) s = fold_f(k1, s, row[j]);
            break;
        }
        acc[oo] = s;
      } else {
        double *a = acc + oo;
        switch (k1) {
          case R_SUM: case R_MEAN: case R_LOGSUM:
            for (int64_t j = 0; j < L; j++) a[j] += row[j];
            break;
          default:
            for (int64_t j = 0; j < L; j++) a[j] = fold_f(k1, a[j], row[j]);
            break;
        }
      }
    });
    if (k == R_LOGSUMEXP) {
      for (int64_t i = 0; i < on; i++) {
        mx[i] = isinf(acc[i]) ? 0.0 : acc[i]; /* all -inf (or +inf present): no shift */
        acc[i] = 0.0;
      }
      FOR_EACH_ROW(v, ro, oo, {
        load_f64(x->data, x->dtype, ro, L, row);
        if (last_red) {
          double s = 0, m = mx[oo];
          for (int64_t j = 0; j < L; j++) s += exp(row[j] - m);
          acc[oo] += s;
        } else {
          for (int64_t j = 0; j < L; j++) acc[oo + j] += exp(row[j] - mx[oo + j]);
        }
      });
    }
  } else if (k == R_LOGSUMEXP) {
    for (int64_t i = 0; i < on; i++) acc[i] = mx[i] = 0.0; /* empty: log(0) + 0 = -inf */
  }
  for (int64_t i = 0; i < on; i++) {
    switch (k) {
      case R_MEAN: acc[i] = acc[i] / (double)count; break;
      case R_L2: acc[i] = sqrt(acc[i]); break;
      case R_LOGSUM: acc[i] = log(acc[i]); break;
      case R_LOGSUMEXP: acc[i] = log(acc[i]) + (mx ? mx[i] : 0.0); break;
      default: break;
    }
  }
  store_f64(y->data, y->dtype, acc, on);
  free(acc), free(mx), free(row);
  return ALMA_OK;
}

static alma_status reduce_int(const alma_tensor *x, alma_tensor *y, const rview *v, rkind k, int64_t count) {
  int64_t on = alma_tensor_numel(y);
  int64_t L = v->size[v->k - 1];
  int last_red = v->red[v->k - 1];
  int key = (k == R_MAX || k == R_MIN) && x->dtype == ALMA_DTYPE_UINT64;
  int64_t *acc = alma__malloc((size_t)on * sizeof(int64_t));
  int64_t *row = alma__malloc((size_t)L * sizeof(int64_t));
  if (!acc || !row) {
    free(acc), free(row);
    return alma__errorf(ALMA_ERR_NOMEM, "reduction scratch");
  }
  int64_t id = ident_i(k, x->dtype);
  for (int64_t i = 0; i < on; i++) acc[i] = id;
  /* Sums and products wrap like the integer type does (computed unsigned to stay defined). */
#define FOLD_I(s, xv)                                                                     \
  switch (k) {                                                                            \
    case R_PROD: s = (int64_t)((uint64_t)s * (uint64_t)(xv)); break;                      \
    case R_MAX: if ((xv) > s) s = (xv); break;                                            \
    case R_MIN: if ((xv) < s) s = (xv); break;                                            \
    case R_L1: s = (int64_t)((uint64_t)s + (uint64_t)((xv) < 0 ? -(uint64_t)(xv) : (uint64_t)(xv))); break; \
    case R_SUMSQ: s = (int64_t)((uint64_t)s + (uint64_t)(xv) * (uint64_t)(xv)); break;   \
    default: s = (int64_t)((uint64_t)s + (uint64_t)(xv)); break;                          \
  }
  if (count > 0) {
    FOR_EACH_ROW(v, ro, oo, {
      load_i64(x->data, x->dtype, ro, L, row, key);
      if (last_red) {
        int64_t s = acc[oo];
        for (int64_t j = 0; j < L; j++) { FOLD_I(s, row[j]) }
        acc[oo] = s;
      } else {
        for (int64_t j = 0; j < L; j++) { FOLD_I(acc[oo + j], row[j]) }
      }
    });
  }
#undef FOLD_I
  for (int64_t i = 0; i < on; i++) {
    int64_t s = acc[i];
    if (key) s = (int64_t)((uint64_t)s ^ (UINT64_C(1) << 63));
    if (k == R_MEAN) {
      if (count == 0) s = 0;
      else if (x->dtype == ALMA_DTYPE_UINT64) s = (int64_t)((uint64_t)s / (uint64_t)count);
      else s = s / count;
    }
    alma__set_i64(y->data, y->dtype, i, s);
  }
  free(acc), free(row);
  return ALMA_OK;
}

static alma_status reduce_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                               alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  uint8_t mask[ALMA_MAX_RANK];
  int noop;
  alma_status st = reduce_axes(n, in, nin, x->rank, mask, &noop);
  if (st != ALMA_OK) return st == ALMA_ERR_DYNAMIC ? alma__op_error(n, ALMA_ERR_INTERNAL, "axes unknown") : st;
  rkind k = kind_of(n);
  if (noop) { /* noop_with_empty_axes: the spec says the output equals the input */
    size_t nb = (size_t)alma_tensor_numel(x) * alma_dtype_size(x->dtype);
    if (nb) memcpy(out[0].data, x->data, nb);
    return ALMA_OK;
  }
  int64_t count = 1;
  for (int i = 0; i < x->rank; i++)
    if (mask[i]) count *= x->dims[i];
  if (alma_tensor_numel(out) == 0) return ALMA_OK;
  rview v;
  if (alma_tensor_numel(x) == 0) {
    /* empty reduction set: every output element is the identity; view it as one reduced run */
    v.k = 1;
    v.size[0] = 0;
    v.red[0] = 1;
    v.ostride[0] = 0;
    count = 0;
  } else {
    coalesce(x->rank, x->dims, mask, &v);
  }
  int int_path = !alma__dtype_is_float(x->dtype) && k != R_L2 && k != R_LOGSUM && k != R_LOGSUMEXP;
  st = int_path ? reduce_int(x, &out[0], &v, k, count) : reduce_float(ctx, x, &out[0], &v, k, count);
  return st == ALMA_OK ? st : alma__error_prefix(st, "node '%s' (%s): ", n->name, n->op_type);
}

#define REDUCE_OP(NAME, ...)                                                                     \
  const alma_op_def alma__op_##NAME = {.name = #NAME, .domain = "", .versions = {__VA_ARGS__},  \
                                       .min_inputs = 1, .max_inputs = 2, .min_outputs = 1,      \
                                       .max_outputs = 1, .infer = reduce_infer, .exec = reduce_exec};
REDUCE_OP(ReduceSum, 1, 11, 13)
REDUCE_OP(ReduceMean, 1, 11, 13, 18)
REDUCE_OP(ReduceProd, 1, 11, 13, 18)
REDUCE_OP(ReduceMax, 1, 11, 12, 13, 18, 20)
REDUCE_OP(ReduceMin, 1, 11, 12, 13, 18, 20)
REDUCE_OP(ReduceL1, 1, 11, 13, 18)
REDUCE_OP(ReduceL2, 1, 11, 13, 18)
REDUCE_OP(ReduceSumSquare, 1, 11, 13, 18)
REDUCE_OP(ReduceLogSum, 1, 11, 13, 18)
REDUCE_OP(ReduceLogSumExp, 1, 11, 13, 18)

/* ---- ArgMax / ArgMin -------------------------------------------------------------------------- */

static alma_status arg_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                             int nout) {
  const alma_tensor *x = in[0];
  if (!is_numeric(x->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  if (x->rank < 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input must have rank >= 1");
  int64_t axis = alma__attr_i(n, "axis", 0);
  if (axis < -x->rank || axis >= x->rank)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis %lld out of range for rank %d", (long long)axis, x->rank);
  int a = (int)(axis < 0 ? axis + x->rank : axis);
  if (x->dims[a] == 0)
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "cannot take %s over an empty axis %d", n->op_type, a);
  int64_t keepdims = alma__attr_i(n, "keepdims", 1);
  int64_t dims[ALMA_MAX_RANK];
  int r = 0;
  for (int i = 0; i < x->rank; i++) {
    if (i != a) dims[r++] = x->dims[i];
    else if (keepdims) dims[r++] = 1;
  }
  alma__set_shape(&out[0], ALMA_DTYPE_INT64, r, dims);
  return ALMA_OK;
}

static alma_status arg_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  int64_t axis = alma__attr_i(n, "axis", 0);
  int a = (int)(axis < 0 ? axis + x->rank : axis);
  int is_max = !strcmp(n->op_type, "ArgMax");
  int last = n->since_version >= 12 && alma__attr_i(n, "select_last_index", 0);
  int64_t outer = 1, inner = 1, len = x->dims[a];
  for (int i = 0; i < a; i++) outer *= x->dims[i];
  for (int i = a + 1; i < x->rank; i++) inner *= x->dims[i];
  if (outer * inner == 0) return ALMA_OK;
  int64_t *idx = out[0].data;
  int fl = alma__dtype_is_float(x->dtype);
  void *best = alma__malloc((size_t)inner * 8), *row = alma__malloc((size_t)inner * 8);
  if (!best || !row) {
    free(best), free(row);
    return alma__op_error(n, ALMA_ERR_NOMEM, "scratch");
  }
  /* Scan the axis row by row so the inner dimension is read contiguously. A strictly better value
   * wins, an equal one only with select_last_index; NaN counts as the extreme (numpy's rule). */
  for (int64_t o = 0; o < outer; o++) {
    int64_t *bi = idx + o * inner;
    for (int64_t j = 0; j < len; j++) {
      int64_t off = (o * len + j) * inner;
      if (fl) {
        double *b = best, *r = row;
        load_f64(x->data, x->dtype, off, inner, j ? r : b);
        if (!j) {
          for (int64_t i = 0; i < inner; i++) bi[i] = 0;
          continue;
        }
        for (int64_t i = 0; i < inner; i++) {
          double v = r[i], c = b[i];
          int take;
          if (isnan(c)) take = 0;
          else if (isnan(v)) take = 1;
          else take = is_max ? (v > c || (last && v == c)) : (v < c || (last && v == c));
          if (take) b[i] = v, bi[i] = j;
        }
      } else {
        int64_t *b = best, *r = row;
        load_i64(x->data, x->dtype, off, inner, j ? r : b, 1);
        if (!j) {
          for (int64_t i = 0; i < inner; i++) bi[i] = 0;
          continue;
        }
        for (int64_t i = 0; i < inner; i++) {
          int64_t v = r[i], c = b[i];
          if (is_max ? (v > c || (last && v == c)) : (v < c || (last && v == c))) b[i] = v, bi[i] = j;
        }
      }
    }
  }
  free(best), free(row);
  return ALMA_OK;
}

const alma_op_def alma__op_ArgMax = {.name = "ArgMax", .domain = "", .versions = {1, 11, 12, 13},
                                     .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                     .infer = arg_infer, .exec = arg_exec};
const alma_op_def alma__op_ArgMin = {.name = "ArgMin", .domain = "", .versions = {1, 11, 12, 13},
                                     .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                     .infer = arg_infer, .exec = arg_exec};
