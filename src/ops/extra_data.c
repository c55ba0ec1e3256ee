/* Data-movement and selection operators beyond alma's core set: Upsample (opsets 7/9/10, the
 * predecessor of Resize that old exporters still emit), OneHot, Compress, Unique, EyeLike,
 * ReverseSequence, CenterCropPad and TensorScatter. Elements move by size (any dtype alma holds) except where
 * values are interpolated or compared. */
#include <math.h>

#include "ops/datamove.h"
#include "ops/ew.h"
#include "ops/nn_util.h"
#include "ops/op_args.h"

/* Reads an optional axis attribute into [0, rank). */
static alma_status read_axis(const alma_node *n, const char *name, int64_t dflt, int rank, int *axis) {
  int64_t a = alma__attr_i(n, name, dflt);
  if (a < -rank || a >= rank)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%s=%lld out of range for rank %d", name, (long long)a, rank);
  *axis = (int)(a < 0 ? a + rank : a);
  return ALMA_OK;
}

/* ==== Upsample ==================================================================================
 * Opset 7: scales attribute; 9 and 10 (deprecated in favour of Resize): scales input. Every scale
 * is >= 1 and the output size is floor(in * scale) (onnxruntime's float product). Coordinates are
 * "asymmetric" (in = out / scale), as onnxruntime and the Resize-10 equivalence define them:
 * nearest takes floor(in), linear interpolates between floor(in) and the next sample, clamped to
 * the last one. */
typedef struct {
  int linear;
  int rank;
  float scales[ALMA_MAX_RANK];
} ups_cfg;

static alma_status ups_read(const alma_node *n, const alma_tensor *const *in, int nin, ups_cfg *c) {
  const alma_tensor *x = in[0];
  const char *mode = alma__attr_s(n, "mode", "nearest");
  if (!strcmp(mode, "nearest")) c->linear = 0;
  else if (!strcmp(mode, "linear") || !strcmp(mode, "bilinear")) c->linear = 1;
  else return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "mode='%s' (expects nearest or linear)", mode);
  c->rank = x->rank;
  if (n->since_version < 9) {
    const float *s = NULL;
    int ns = alma__attr_floats(n, "scales", &s);
    if (ns != x->rank)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "scales attribute has %d values for input rank %d", ns, x->rank);
    memcpy(c->scales, s, sizeof(float) * (size_t)ns);
  } else {
    const alma_tensor *s = alma__nn_in(in, nin, 1);
    if (!s) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "scales input is required from opset 9");
    if (s->dtype != ALMA_DTYPE_FLOAT32)
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "scales dtype %s (expects float32)", alma_dtype_name(s->dtype));
    if (s->rank != 1 || s->dims[0] != x->rank)
      return alma__op_error(n, ALMA_ERR_SHAPE, "scales has %lld values for input rank %d",
                            (long long)alma_tensor_numel(s), x->rank);
    if (!s->data) return alma__need_value();
    memcpy(c->scales, s->data, sizeof(float) * (size_t)x->rank);
  }
  for (int d = 0; d < x->rank; d++)
    if (!(c->scales[d] >= 1.0f) || !isfinite(c->scales[d]))
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "scale %g along dim %d (Upsample expects scales >= 1)",
                            c->scales[d], d);
  if (c->linear && !alma__dtype_is_float(x->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "linear mode on %s input", alma_dtype_name(x->dtype));
  return ALMA_OK;
}

static alma_status ups_infer(INFER_ARGS) {
  const alma_tensor *x = in[0];
  ALMA_TRY(alma__dm_check_dtype(n, x->dtype, "input"));
  ups_cfg c;
  ALMA_TRY(ups_read(n, in, nin, &c));
  int64_t dims[ALMA_MAX_RANK];
  for (int d = 0; d < x->rank; d++) {
    float v = (float)x->dims[d] * c.scales[d];
    if (!(v < 9.0e18f)) return alma__op_error(n, ALMA_ERR_SHAPE, "output size along dim %d overflows", d);
    dims[d] = (int64_t)v;
  }
  alma__set_shape(&out[0], x->dtype, x->rank, dims);
  return ALMA_OK;
}

/* Source coordinate of output index o along a dim: asymmetric, clamped to the last sample. */
static double ups_coord(int64_t o, float scale, int64_t in) {
  double v = (double)o / (double)scale;
  return v > (double)(in - 1) ? (double)(in - 1) : v;
}

static alma_status ups_exec(EXEC_ARGS) {
  const alma_tensor *x = in[0];
  alma_tensor *y = &out[0];
  ups_cfg c;
  ALMA_TRY(ups_read(n, in, nin, &c));
  int r = x->rank;
  int64_t ny = alma_tensor_numel(y);
  if (ny == 0) return ALMA_OK;
  int64_t xs[ALMA_MAX_RANK], tot = 0;
  alma__strides(r, x->dims, xs);
  for (int d = 0; d < r; d++) tot += y->dims[d];
  /* Per output index along each dim: the first source index, the second and its weight. */
  int64_t *lo = alma__nn_alloc(n, (size_t)(tot ? tot : 1), sizeof(int64_t));
  int64_t *hi = alma__nn_alloc(n, (size_t)(tot ? tot : 1), sizeof(int64_t));
  double *w = alma__nn_alloc(n, (size_t)(tot ? tot : 1), sizeof(double));
  if (!lo || !hi || !w) {
    free(lo), free(hi), free(w);
    return ALMA_ERR_NOMEM;
  }
  int64_t off[ALMA_MAX_RANK + 1];
  off[0] = 0;
  for (int d = 0; d < r; d++) {
    off[d + 1] = off[d] + y->dims[d];
    for (int64_t o = 0; o < y->dims[d]; o++) {
      double v = ups_coord(o, c.scales[d], x->dims[d]);
      int64_t i0 = (int64_t)floor(v);
      lo[off[d] + o] = i0;
      hi[off[d] + o] = i0 + 1 < x->dims[d] ? i0 + 1 : x->dims[d] - 1;
      w[off[d] + o] = v - (double)i0;
    }
  }
  int64_t coord[ALMA_MAX_RANK] = {0};
  if (!c.linear) {
    /* one output row (last dim) at a time: its source row, then the gathered columns */
    size_t esz = alma_dtype_size(x->dtype);
    const char *src = x->data;
    char *dst = y->data;
    int64_t W = r ? y->dims[r - 1] : 1, rows = ny / W;
    const int64_t *col = r ? lo + off[r - 1] : lo;
    int64_t zero = 0;
    if (!r) col = &zero;
    for (int64_t i = 0; i < rows; i++, dst += (size_t)W * esz) {
      int64_t s = 0;
      for (int d = 0; d + 1 < r; d++) s += lo[off[d] + coord[d]] * xs[d];
      const char *row = src + (size_t)s * esz;
      switch (esz) {
#define UPS_ROW(T) \
  for (int64_t j = 0; j < W; j++) ((T *)dst)[j] = ((const T *)row)[col[j]]; \
  break;
        case 1: UPS_ROW(uint8_t)
        case 2: UPS_ROW(uint16_t)
        case 4: UPS_ROW(uint32_t)
        case 8: UPS_ROW(uint64_t)
#undef UPS_ROW
        default:
          for (int64_t j = 0; j < W; j++) memcpy(dst + (size_t)j * esz, row + (size_t)col[j] * esz, esz);
      }
      for (int d = r - 2; d >= 0 && ++coord[d] == y->dims[d]; d--) coord[d] = 0;
    }
  } else {
    /* n-linear: 2^k corners over the dims whose two samples differ (weight > 0). */
    int owned;
    const double *xv = alma__nn_as_f64(x, &owned);
    double *yv = alma__nn_alloc(n, (size_t)ny, sizeof(double));
    if (!xv || !yv) {
      if (owned) free((void *)xv);
      free(yv), free(lo), free(hi), free(w);
      return ALMA_ERR_NOMEM;
    }
    for (int64_t i = 0; i < ny; i++) {
      int vd[ALMA_MAX_RANK], k = 0;
      int64_t base = 0;
      for (int d = 0; d < r; d++) {
        int64_t j = off[d] + coord[d];
        base += lo[j] * xs[d];
        if (w[j] > 0 && hi[j] != lo[j]) vd[k++] = d;
      }
      double acc = 0;
      for (int m = 0; m < (1 << k); m++) {
        int64_t s = base;
        double wt = 1;
        for (int b = 0; b < k; b++) {
          int64_t j = off[vd[b]] + coord[vd[b]];
          if (m >> b & 1) {
            s += (hi[j] - lo[j]) * xs[vd[b]];
            wt *= w[j];
          } else {
            wt *= 1 - w[j];
          }
        }
        acc += wt * xv[s];
      }
      yv[i] = acc;
      for (int d = r - 1; d >= 0 && ++coord[d] == y->dims[d]; d--) coord[d] = 0;
    }
    alma__nn_store_f64(y, yv);
    if (owned) free((void *)xv);
    free(yv);
  }
  free(lo), free(hi), free(w);
  return ALMA_OK;
}

const alma_op_def alma__op_Upsample = {.name = "Upsample", .domain = "", .versions = {7, 9, 10}, .min_inputs = 1,
                                       .max_inputs = 2, .min_outputs = 1, .max_outputs = 1, .infer = ups_infer,
                                       .exec = ups_exec};

/* ==== OneHot ====================================================================================
 * indices (any numeric; floats truncate), depth (scalar or one element), values [off, on]. The
 * depth axis is inserted at `axis`. Indices in [-depth, depth) select (negatives count from the
 * end); others give an all-off row. */
static alma_status onehot_depth(const alma_node *n, const alma_tensor *d, int64_t *depth) {
  if (!alma__ew_is_numeric(d->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "depth dtype %s", alma_dtype_name(d->dtype));
  if (alma_tensor_numel(d) != 1 || d->rank > 1)
    return alma__op_error(n, ALMA_ERR_SHAPE, "depth must be a scalar or a one-element 1-D tensor");
  if (!d->data) return alma__need_value();
  double v = alma__dtype_is_float(d->dtype) ? alma__get_f64(d->data, d->dtype, 0) : (double)alma__get_i64(d->data, d->dtype, 0);
  if (!(v >= 1) || v > 1e15) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "depth %g (expects a positive value)", v);
  *depth = (int64_t)v;
  return ALMA_OK;
}

static alma_status onehot_infer(INFER_ARGS) {
  const alma_tensor *ind = in[0], *dep = alma__nn_in(in, nin, 1), *val = alma__nn_in(in, nin, 2);
  if (!dep || !val) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "depth and values are required");
  if (!alma__ew_is_numeric(ind->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "indices dtype %s", alma_dtype_name(ind->dtype));
  ALMA_TRY(alma__dm_check_dtype(n, val->dtype, "values"));
  if (val->rank != 1 || val->dims[0] != 2)
    return alma__op_error(n, ALMA_ERR_SHAPE, "values must be a 1-D tensor of two elements [off, on]");
  if (ind->rank + 1 > ALMA_MAX_RANK) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "output rank above %d", ALMA_MAX_RANK);
  int axis;
  ALMA_TRY(read_axis(n, "axis", -1, ind->rank + 1, &axis));
  int64_t depth;
  ALMA_TRY(onehot_depth(n, dep, &depth));
  int64_t dims[ALMA_MAX_RANK];
  for (int d = 0, k = 0; d <= ind->rank; d++) dims[d] = d == axis ? depth : ind->dims[k++];
  alma__set_shape(&out[0], val->dtype, ind->rank + 1, dims);
  return ALMA_OK;
}

static alma_status onehot_exec(EXEC_ARGS) {
  const alma_tensor *ind = in[0], *val = in[2];
  int axis;
  ALMA_TRY(read_axis(n, "axis", -1, ind->rank + 1, &axis));
  int64_t depth;
  ALMA_TRY(onehot_depth(n, in[1], &depth));
  size_t esz = alma_dtype_size(val->dtype);
  const char *off = val->data, *on = off + esz;
  int64_t outer = alma__numel(axis, ind->dims), inner = alma__numel(ind->rank - axis, ind->dims + axis);
  char *y = out[0].data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t d = 0; d < depth; d++)
      for (int64_t i = 0; i < inner; i++) memcpy(y + (size_t)((o * depth + d) * inner + i) * esz, off, esz);
  int isf = alma__dtype_is_float(ind->dtype);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t k = o * inner + i;
      double fv = isf ? alma__get_f64(ind->data, ind->dtype, k) : 0;
      if (isf && !(fabs(fv) < 9e18)) continue;
      int64_t v = isf ? (int64_t)fv : alma__get_i64(ind->data, ind->dtype, k);
      if (v < 0) v += depth;
      if (v < 0 || v >= depth) continue;
      memcpy(y + (size_t)((o * depth + v) * inner + i) * esz, on, esz);
    }
  return ALMA_OK;
}

const alma_op_def alma__op_OneHot = {.name = "OneHot", .domain = "", .versions = {9, 11}, .min_inputs = 3,
                                     .max_inputs = 3, .min_outputs = 1, .max_outputs = 1, .infer = onehot_infer,
                                     .exec = onehot_exec};

/* ==== Compress ==================================================================================
 * Keeps the slices along `axis` (or the elements of the flattened input when absent) whose
 * condition is true. A condition shorter than the axis drops the rest; a true entry past the end
 * is an error. */
static alma_status compress_count(const alma_node *n, const alma_tensor *x, const alma_tensor *cond, int *axis,
                                  int64_t *len, int64_t *count) {
  if (cond->dtype != ALMA_DTYPE_BOOL)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "condition dtype %s (expects bool)", alma_dtype_name(cond->dtype));
  if (cond->rank != 1) return alma__op_error(n, ALMA_ERR_SHAPE, "condition must be 1-D (rank %d)", cond->rank);
  if (alma__node_attr(n, "axis")) {
    if (x->rank < 1) return alma__op_error(n, ALMA_ERR_SHAPE, "axis given for a scalar input");
    ALMA_TRY(read_axis(n, "axis", 0, x->rank, axis));
    *len = x->dims[*axis];
  } else {
    *axis = -1;
    *len = alma_tensor_numel(x);
  }
  if (!cond->data) return alma__need_value();
  const uint8_t *c = cond->data;
  int64_t cnt = 0;
  for (int64_t i = 0; i < cond->dims[0]; i++) {
    if (!c[i]) continue;
    if (i >= *len)
      return alma__op_error(n, ALMA_ERR_SHAPE, "condition is true at %lld, past the %lld slices", (long long)i,
                            (long long)*len);
    cnt++;
  }
  *count = cnt;
  return ALMA_OK;
}

static alma_status compress_infer(INFER_ARGS) {
  const alma_tensor *x = in[0], *cond = alma__nn_in(in, nin, 1);
  if (!cond) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "condition is required");
  ALMA_TRY(alma__dm_check_dtype(n, x->dtype, "input"));
  int axis;
  int64_t len, cnt;
  ALMA_TRY(compress_count(n, x, cond, &axis, &len, &cnt));
  if (axis < 0) {
    alma__set_shape(&out[0], x->dtype, 1, &cnt);
  } else {
    int64_t dims[ALMA_MAX_RANK];
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    dims[axis] = cnt;
    alma__set_shape(&out[0], x->dtype, x->rank, dims);
  }
  return ALMA_OK;
}

static alma_status compress_exec(EXEC_ARGS) {
  const alma_tensor *x = in[0], *cond = in[1];
  int axis;
  int64_t len, cnt;
  ALMA_TRY(compress_count(n, x, cond, &axis, &len, &cnt));
  size_t esz = alma_dtype_size(x->dtype);
  int64_t outer = axis < 0 ? 1 : alma__numel(axis, x->dims);
  int64_t inner = axis < 0 ? 1 : alma__numel(x->rank - axis - 1, x->dims + axis + 1);
  size_t row = (size_t)inner * esz;
  const uint8_t *c = cond->data;
  int64_t nc = cond->dims[0] < len ? cond->dims[0] : len;
  const char *src = x->data;
  char *dst = out[0].data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < nc; i++)
      if (c[i]) {
        memcpy(dst, src + ((size_t)(o * len + i)) * row, row);
        dst += row;
      }
  return ALMA_OK;
}

const alma_op_def alma__op_Compress = {.name = "Compress", .flags = ALMA_OP_STRINGS, .domain = "", .versions = {9, 11}, .min_inputs = 2,
                                       .max_inputs = 2, .min_outputs = 1, .max_outputs = 1, .infer = compress_infer,
                                       .exec = compress_exec};

/* ==== Unique ====================================================================================
 * Unique elements (or slices along `axis`) with their first-occurrence indices, the inverse map
 * and counts. sorted=1 orders them ascending (slices lexicographically, NaN last and equal to
 * itself, as numpy.unique); sorted=0 keeps the order of first occurrence. */
typedef struct {
  const alma_tensor *x;
  int64_t outer, len, inner; /* x viewed as [outer, len, inner]; slices along len */
  int isf;
} uq_view;

static int uq_cmp_elem(const uq_view *v, int64_t a, int64_t b) {
  if (v->isf) {
    double x = alma__get_f64(v->x->data, v->x->dtype, a), y = alma__get_f64(v->x->data, v->x->dtype, b);
    int nx = isnan(x), ny = isnan(y);
    if (nx || ny) return nx - ny;
    return x < y ? -1 : x > y;
  }
  if (v->x->dtype == ALMA_DTYPE_UINT64) {
    uint64_t x = ((const uint64_t *)v->x->data)[a], y = ((const uint64_t *)v->x->data)[b];
    return x < y ? -1 : x > y;
  }
  int64_t x = alma__get_i64(v->x->data, v->x->dtype, a), y = alma__get_i64(v->x->data, v->x->dtype, b);
  return x < y ? -1 : x > y;
}

/* Lexicographic comparison of slices i and j (row-major over outer, inner). */
static int uq_cmp(const uq_view *v, int64_t i, int64_t j) {
  for (int64_t o = 0; o < v->outer; o++)
    for (int64_t k = 0; k < v->inner; k++) {
      int c = uq_cmp_elem(v, (o * v->len + i) * v->inner + k, (o * v->len + j) * v->inner + k);
      if (c) return c;
    }
  return 0;
}

/* Stable merge sort of idx[0..m) by slice order. */
static void uq_sort(const uq_view *v, int64_t *idx, int64_t *tmp, int64_t m) {
  if (m < 2) return;
  int64_t h = m / 2;
  uq_sort(v, idx, tmp, h);
  uq_sort(v, idx + h, tmp, m - h);
  int64_t a = 0, b = h, k = 0;
  while (a < h && b < m) tmp[k++] = uq_cmp(v, idx[b], idx[a]) < 0 ? idx[b++] : idx[a++];
  while (a < h) tmp[k++] = idx[a++];
  while (b < m) tmp[k++] = idx[b++];
  memcpy(idx, tmp, sizeof(int64_t) * (size_t)m);
}

typedef struct {
  int64_t count;   /* unique slices */
  int64_t *first;  /* [count] first occurrence of each unique slice, in output order */
  int64_t *counts; /* [count] */
  int64_t *inv;    /* [len] output position of each input slice */
} uq_result;

static void uq_free(uq_result *r) {
  free(r->first), free(r->counts), free(r->inv);
  memset(r, 0, sizeof *r);
}

static alma_status uq_view_make(const alma_node *n, const alma_tensor *x, uq_view *v, int *axis) {
  v->x = x;
  v->isf = alma__dtype_is_float(x->dtype);
  if (alma__node_attr(n, "axis")) {
    if (x->rank < 1) return alma__op_error(n, ALMA_ERR_SHAPE, "axis given for a scalar input");
    ALMA_TRY(read_axis(n, "axis", 0, x->rank, axis));
    v->outer = alma__numel(*axis, x->dims);
    v->len = x->dims[*axis];
    v->inner = alma__numel(x->rank - *axis - 1, x->dims + *axis + 1);
  } else {
    *axis = -1;
    v->outer = v->inner = 1;
    v->len = alma_tensor_numel(x);
  }
  int64_t s = alma__attr_i(n, "sorted", 1);
  if (s != 0 && s != 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "sorted=%lld (expects 0 or 1)", (long long)s);
  return ALMA_OK;
}

static alma_status uq_compute(const alma_node *n, const uq_view *v, int sorted, uq_result *r) {
  memset(r, 0, sizeof *r);
  int64_t m = v->len;
  size_t cap = (size_t)(m ? m : 1);
  int64_t *idx = alma__nn_alloc(n, cap, sizeof(int64_t)), *tmp = alma__nn_alloc(n, cap, sizeof(int64_t));
  r->first = alma__nn_alloc(n, cap, sizeof(int64_t));
  r->counts = alma__nn_alloc(n, cap, sizeof(int64_t));
  r->inv = alma__nn_alloc(n, cap, sizeof(int64_t));
  int64_t *group = alma__nn_alloc(n, cap, sizeof(int64_t));
  if (!idx || !tmp || !r->first || !r->counts || !r->inv || !group) {
    free(idx), free(tmp), free(group);
    uq_free(r);
    return ALMA_ERR_NOMEM;
  }
  for (int64_t i = 0; i < m; i++) idx[i] = i;
  uq_sort(v, idx, tmp, m);
  /* Groups of equal slices in sorted order; stability makes each group's first its earliest. */
  int64_t g = -1;
  for (int64_t k = 0; k < m; k++) {
    if (k == 0 || uq_cmp(v, idx[k - 1], idx[k]) != 0) {
      g++;
      r->first[g] = idx[k];
      r->counts[g] = 0;
    }
    r->counts[g]++;
    group[idx[k]] = g;
  }
  r->count = g + 1;
  if (!sorted) {
    /* Renumber groups by first occurrence: walk the input, giving each new group the next slot. */
    int64_t *slot = tmp, next = 0;
    for (int64_t k = 0; k < r->count; k++) slot[k] = -1;
    int64_t *first2 = idx, *counts2 = alma__nn_alloc(n, cap, sizeof(int64_t));
    if (!counts2) {
      free(idx), free(tmp), free(group);
      uq_free(r);
      return ALMA_ERR_NOMEM;
    }
    for (int64_t i = 0; i < m; i++) {
      int64_t gi = group[i];
      if (slot[gi] < 0) {
        slot[gi] = next;
        first2[next] = r->first[gi];
        counts2[next] = r->counts[gi];
        next++;
      }
      r->inv[i] = slot[gi];
    }
    memcpy(r->first, first2, sizeof(int64_t) * (size_t)r->count);
    memcpy(r->counts, counts2, sizeof(int64_t) * (size_t)r->count);
    free(counts2);
  } else {
    for (int64_t i = 0; i < m; i++) r->inv[i] = group[i];
  }
  free(idx), free(tmp), free(group);
  return ALMA_OK;
}

static alma_status unique_infer(INFER_ARGS) {
  const alma_tensor *x = in[0];
  if (!alma__ew_is_numeric(x->dtype) && x->dtype != ALMA_DTYPE_BOOL)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  uq_view v;
  int axis;
  ALMA_TRY(uq_view_make(n, x, &v, &axis));
  if (!x->data && v.len > 0) return alma__need_value();
  uq_result r;
  ALMA_TRY(uq_compute(n, &v, (int)alma__attr_i(n, "sorted", 1), &r));
  int64_t dims[ALMA_MAX_RANK];
  if (axis < 0) {
    alma__set_shape(&out[0], x->dtype, 1, &r.count);
  } else {
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    dims[axis] = r.count;
    alma__set_shape(&out[0], x->dtype, x->rank, dims);
  }
  if (nout > 1) alma__set_shape(&out[1], ALMA_DTYPE_INT64, 1, &r.count);
  if (nout > 2) alma__set_shape(&out[2], ALMA_DTYPE_INT64, 1, &v.len);
  if (nout > 3) alma__set_shape(&out[3], ALMA_DTYPE_INT64, 1, &r.count);
  uq_free(&r);
  return ALMA_OK;
}

static alma_status unique_exec(EXEC_ARGS) {
  const alma_tensor *x = in[0];
  uq_view v;
  int axis;
  ALMA_TRY(uq_view_make(n, x, &v, &axis));
  uq_result r;
  ALMA_TRY(uq_compute(n, &v, (int)alma__attr_i(n, "sorted", 1), &r));
  if (out[0].data) {
    size_t esz = alma_dtype_size(x->dtype), row = (size_t)v.inner * esz;
    const char *src = x->data;
    char *dst = out[0].data;
    for (int64_t o = 0; o < v.outer; o++)
      for (int64_t k = 0; k < r.count; k++, dst += row) memcpy(dst, src + (size_t)(o * v.len + r.first[k]) * row, row);
  }
  if (nout > 1 && out[1].data) memcpy(out[1].data, r.first, sizeof(int64_t) * (size_t)r.count);
  if (nout > 2 && out[2].data) memcpy(out[2].data, r.inv, sizeof(int64_t) * (size_t)v.len);
  if (nout > 3 && out[3].data) memcpy(out[3].data, r.counts, sizeof(int64_t) * (size_t)r.count);
  uq_free(&r);
  return ALMA_OK;
}

const alma_op_def alma__op_Unique = {.name = "Unique", .domain = "", .versions = {11}, .min_inputs = 1,
                                     .max_inputs = 1, .min_outputs = 1, .max_outputs = 4, .infer = unique_infer,
                                     .exec = unique_exec};

/* ==== EyeLike ===================================================================================
 * A 2-D tensor of the input's shape with ones on the k-th diagonal; dtype attribute or the
 * input's dtype. */
static alma_status eyelike_dtype(const alma_node *n, const alma_tensor *x, alma_dtype *dt) {
  const alma_attr *a = alma__node_attr(n, "dtype");
  *dt = a ? (alma_dtype)a->i : x->dtype;
  if (a && (a->i <= 0 || a->i > 16 || alma_dtype_size((alma_dtype)a->i) == 0))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "dtype %lld", (long long)a->i);
  if (!alma__ew_is_numeric(*dt) && *dt != ALMA_DTYPE_BOOL)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "output dtype %s", alma_dtype_name(*dt));
  return ALMA_OK;
}

static alma_status eyelike_infer(INFER_ARGS) {
  const alma_tensor *x = in[0];
  if (x->rank != 2) return alma__op_error(n, ALMA_ERR_SHAPE, "input rank %d (expects 2)", x->rank);
  ALMA_TRY(alma__dm_check_dtype(n, x->dtype, "input"));
  alma_dtype dt;
  ALMA_TRY(eyelike_dtype(n, x, &dt));
  alma__set_shape(&out[0], dt, 2, x->dims);
  return ALMA_OK;
}

static alma_status eyelike_exec(EXEC_ARGS) {
  int64_t k = alma__attr_i(n, "k", 0), r = out[0].dims[0], c = out[0].dims[1];
  for (int64_t i = 0; i < r; i++) {
    if (k > INT64_MAX - i) break;
    int64_t j = i + k;
    if (j >= 0 && j < c) alma__set_f64(out[0].data, out[0].dtype, i * c + j, 1.0);
  }
  return ALMA_OK;
}

const alma_op_def alma__op_EyeLike = {.name = "EyeLike", .domain = "", .versions = {9, 22}, .min_inputs = 1,
                                      .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .infer = eyelike_infer,
                                      .exec = eyelike_exec};

/* ==== ReverseSequence ===========================================================================
 * Reverses the first sequence_lens[b] steps along time_axis of each batch entry b (batch_axis);
 * later steps are copied as they are. */
static alma_status revseq_axes(const alma_node *n, const alma_tensor *x, int *bax, int *tax) {
  int64_t b = alma__attr_i(n, "batch_axis", 1), t = alma__attr_i(n, "time_axis", 0);
  if (!((b == 0 && t == 1) || (b == 1 && t == 0)))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "batch_axis=%lld time_axis=%lld (expects 0 and 1, distinct)",
                          (long long)b, (long long)t);
  if (x->rank < 2) return alma__op_error(n, ALMA_ERR_SHAPE, "input rank %d (expects at least 2)", x->rank);
  *bax = (int)b, *tax = (int)t;
  return ALMA_OK;
}

static alma_status revseq_infer(INFER_ARGS) {
  const alma_tensor *x = in[0], *l = alma__nn_in(in, nin, 1);
  if (!l) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "sequence_lens is required");
  ALMA_TRY(alma__dm_check_dtype(n, x->dtype, "input"));
  int bax, tax;
  ALMA_TRY(revseq_axes(n, x, &bax, &tax));
  if (l->dtype != ALMA_DTYPE_INT64)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "sequence_lens dtype %s (expects int64)", alma_dtype_name(l->dtype));
  if (l->rank != 1 || l->dims[0] != x->dims[bax])
    return alma__op_error(n, ALMA_ERR_SHAPE, "sequence_lens has %lld values for a batch of %lld",
                          (long long)alma_tensor_numel(l), (long long)x->dims[bax]);
  alma__set_shape(&out[0], x->dtype, x->rank, x->dims);
  return ALMA_OK;
}

static alma_status revseq_exec(EXEC_ARGS) {
  const alma_tensor *x = in[0];
  int bax, tax;
  ALMA_TRY(revseq_axes(n, x, &bax, &tax));
  const int64_t *lens = in[1]->data;
  int64_t B = x->dims[bax], T = x->dims[tax], inner = alma__numel(x->rank - 2, x->dims + 2);
  for (int64_t b = 0; b < B; b++)
    if (lens[b] < 0 || lens[b] > T)
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "sequence_lens[%lld]=%lld outside [0, %lld]", (long long)b,
                            (long long)lens[b], (long long)T);
  size_t row = (size_t)inner * alma_dtype_size(x->dtype);
  const char *src = x->data;
  char *dst = out[0].data;
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++) {
      int64_t st = t < lens[b] ? lens[b] - 1 - t : t;
      int64_t di = bax == 0 ? b * T + t : t * B + b, si = bax == 0 ? b * T + st : st * B + b;
      memcpy(dst + (size_t)di * row, src + (size_t)si * row, row);
    }
  return ALMA_OK;
}

const alma_op_def alma__op_ReverseSequence = {.name = "ReverseSequence", .flags = ALMA_OP_STRINGS, .domain = "", .versions = {10},
                                              .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                              .infer = revseq_infer, .exec = revseq_exec};

/* ==== CenterCropPad =============================================================================
 * Crops or zero-pads each listed axis to the target size around the centre; an odd difference
 * puts the extra element at the end (the start offset is floor(diff / 2)). */
static alma_status ccp_target(const alma_node *n, const alma_tensor *x, const alma_tensor *shape, int64_t *dims) {
  ALMA_TRY(alma__dm_check_index_dtype(n, shape, "shape"));
  const int64_t *ax = NULL;
  int nax = alma__attr_ints(n, "axes", &ax);
  int cnt_axes = ax ? nax : x->rank;
  if (shape->rank != 1 || shape->dims[0] != cnt_axes)
    return alma__op_error(n, ALMA_ERR_SHAPE, "shape has %lld values for %d axes", (long long)alma_tensor_numel(shape),
                          cnt_axes);
  int seen[ALMA_MAX_RANK] = {0};
  int axes[ALMA_MAX_RANK];
  for (int i = 0; i < cnt_axes; i++) {
    int64_t a = ax ? ax[i] : i;
    if (a < -x->rank || a >= x->rank)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis %lld out of range for rank %d", (long long)a, x->rank);
    axes[i] = (int)(a < 0 ? a + x->rank : a);
    if (seen[axes[i]]++) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis %lld repeated", (long long)a);
  }
  if (!shape->data) return alma__need_value();
  memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  for (int i = 0; i < cnt_axes; i++) {
    int64_t v = alma__get_i64(shape->data, shape->dtype, i);
    if (v < 0) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "target size %lld along axis %d", (long long)v, axes[i]);
    dims[axes[i]] = v;
  }
  return ALMA_OK;
}

static alma_status ccp_infer(INFER_ARGS) {
  const alma_tensor *x = in[0], *s = alma__nn_in(in, nin, 1);
  if (!s) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "shape is required");
  ALMA_TRY(alma__dm_check_dtype(n, x->dtype, "input"));
  int64_t dims[ALMA_MAX_RANK];
  ALMA_TRY(ccp_target(n, x, s, dims));
  alma__set_shape(&out[0], x->dtype, x->rank, dims);
  return ALMA_OK;
}

static alma_status ccp_exec(EXEC_ARGS) {
  const alma_tensor *x = in[0];
  alma_tensor *y = &out[0];
  int r = x->rank;
  /* Copy the common window: src starts at the crop offset, dst at the pad offset. */
  int64_t win[ALMA_MAX_RANK], xs[ALMA_MAX_RANK], ys[ALMA_MAX_RANK], so = 0, dof = 0;
  alma__strides(r, x->dims, xs);
  alma__strides(r, y->dims, ys);
  for (int d = 0; d < r; d++) {
    int64_t a = x->dims[d], b = y->dims[d];
    win[d] = a < b ? a : b;
    if (a > b) so += (a - b) / 2 * xs[d];
    else dof += (b - a) / 2 * ys[d];
  }
  int64_t nw = alma__numel(r, win);
  if (nw == 0) return ALMA_OK;
  size_t esz = alma_dtype_size(x->dtype);
  int64_t coord[ALMA_MAX_RANK] = {0};
  const char *src = x->data;
  char *dst = y->data;
  for (int64_t i = 0; i < nw; i++) {
    int64_t s = so, t = dof;
    for (int d = 0; d < r; d++) s += coord[d] * xs[d], t += coord[d] * ys[d];
    memcpy(dst + (size_t)t * esz, src + (size_t)s * esz, esz);
    for (int d = r - 1; d >= 0 && ++coord[d] == win[d]; d--) coord[d] = 0;
  }
  return ALMA_OK;
}

const alma_op_def alma__op_CenterCropPad = {.name = "CenterCropPad", .domain = "", .versions = {18},
                                            .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                            .infer = ccp_infer, .exec = ccp_exec};

/* ==== TensorScatter (24) ========================================================================
 * A KV-cache update: the output is past_cache with, for every batch row b, update's `axis` slices
 * written from position write_indices[b] (0 when omitted) on; mode "circular" wraps the positions
 * modulo the cache length, "linear" requires them to fit (an index that does not is an error
 * naming it: ONNX leaves it undefined). */
static alma_status tscatter_infer(INFER_ARGS) {
  const alma_tensor *c = in[0], *u = in[1], *w = nin > 2 ? in[2] : NULL;
  if (!u) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input 'update' is required");
  if (c->dtype == ALMA_DTYPE_STRING || alma_dtype_size(c->dtype) == 0)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "dtype %s", alma_dtype_name(c->dtype));
  if (u->dtype != c->dtype)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "update is %s, past_cache %s", alma_dtype_name(u->dtype),
                          alma_dtype_name(c->dtype));
  const char *mode = alma__attr_s(n, "mode", "linear");
  if (strcmp(mode, "linear") && strcmp(mode, "circular"))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "mode='%s' (expects linear or circular)", mode);
  if (c->rank < 2) return alma__op_error(n, ALMA_ERR_SHAPE, "past_cache must have rank >= 2, got %d", c->rank);
  int axis;
  ALMA_TRY(read_axis(n, "axis", -2, c->rank, &axis));
  if (axis == 0) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis must not be the batch axis 0");
  char s1[128], s2[128];
  int ok = u->rank == c->rank;
  for (int i = 0; ok && i < c->rank; i++) ok = i == axis ? u->dims[i] <= c->dims[i] : u->dims[i] == c->dims[i];
  if (!ok)
    return alma__op_error(n, ALMA_ERR_SHAPE, "update %s does not fit past_cache %s (equal dims except axis %d, "
                          "where it may be shorter)", alma__shape_str(u->rank, u->dims, s1, sizeof s1),
                          alma__shape_str(c->rank, c->dims, s2, sizeof s2), axis);
  if (w && (w->dtype != ALMA_DTYPE_INT64 || w->rank != 1 || w->dims[0] != c->dims[0]))
    return alma__op_error(n, ALMA_ERR_SHAPE, "write_indices must be int64 [%lld], got %s %s", (long long)c->dims[0],
                          alma_dtype_name(w->dtype), alma__shape_str(w->rank, w->dims, s1, sizeof s1));
  alma__set_shape(&out[0], c->dtype, c->rank, c->dims);
  return ALMA_OK;
}

static alma_status tscatter_exec(EXEC_ARGS) {
  const alma_tensor *c = in[0], *u = in[1], *w = nin > 2 ? in[2] : NULL;
  int axis;
  ALMA_TRY(read_axis(n, "axis", -2, c->rank, &axis));
  int circular = !strcmp(alma__attr_s(n, "mode", "linear"), "circular");
  size_t es = alma_dtype_size(c->dtype);
  int64_t inner = alma__numel(c->rank - axis - 1, c->dims + axis + 1) * (int64_t)es;
  int64_t per_batch = alma__numel(axis - 1, c->dims + 1), L = c->dims[axis], S = u->dims[axis];
  if (out[0].nbytes) memcpy(out[0].data, c->data, out[0].nbytes);
  for (int64_t b = 0; b < c->dims[0]; b++) {
    int64_t start = w ? ((const int64_t *)w->data)[b] : 0;
    if (S == 0) continue;
    if (!circular && (start < 0 || start > L - S))
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "write_indices[%lld] = %lld: %lld slices do not fit the cache "
                            "length %lld (mode linear)", (long long)b, (long long)start, (long long)S, (long long)L);
    if (circular && L == 0) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "circular write into an empty cache");
    for (int64_t p = 0; p < per_batch; p++) {
      int64_t row = b * per_batch + p;
      char *dst = (char *)out[0].data + row * L * inner;
      const char *src = (const char *)u->data + row * S * inner;
      for (int64_t s = 0; s < S; s++) {
        int64_t pos = start + s;
        if (circular) pos = ((pos % L) + L) % L;
        memcpy(dst + pos * inner, src + s * inner, (size_t)inner);
      }
    }
  }
  return ALMA_OK;
}

const alma_op_def alma__op_TensorScatter = {.name = "TensorScatter", .domain = "", .versions = {24}, .min_inputs = 2,
                                            .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
                                            .infer = tscatter_infer, .exec = tscatter_exec};
