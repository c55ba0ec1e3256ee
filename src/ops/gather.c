/* Indexing operators: Gather, GatherElements, GatherND, ScatterElements, ScatterND. Data of any
 * dtype alma holds; indices int32 or int64, negative ones counting from the end. Every index is
 * checked before it is used: an out-of-range one fails with ALMA_ERR_INVALID_ARG naming it. */
#include "ops/datamove.h"

/* Normalizes index v for a dimension of size dim, or fails naming where it came from. */
static alma_status norm_index(const alma_node *n, int64_t v, int64_t dim, int64_t pos, int axis, int64_t *out) {
  int64_t w = v < 0 ? v + dim : v;
  if (w < 0 || w >= dim)
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "index %lld (indices element %lld) is out of range [%lld, %lld) for axis %d",
                          (long long)v, (long long)pos, (long long)-dim, (long long)dim, axis);
  *out = w;
  return ALMA_OK;
}

static alma_status check_data_indices(const alma_node *n, const alma_tensor *const *in, int nin) {
  for (int i = 0; i < 2; i++)
    if (i >= nin || !in[i]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "missing input %d", i);
  ALMA_TRY(alma__dm_check_dtype(n, in[0]->dtype, "data"));
  return alma__dm_check_index_dtype(n, in[1], "indices");
}

static alma_status get_axis(const alma_node *n, int rank, int *axis) {
  int64_t a = alma__attr_i(n, "axis", 0);
  if (rank == 0 || alma__norm_axis(a, rank, axis) != ALMA_OK)
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "axis %lld out of range for rank %d", (long long)a, rank);
  return ALMA_OK;
}

/* ---- Gather ------------------------------------------------------------------------------- */

static alma_status gather_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                int nout) {
  (void)nout;
  ALMA_TRY(check_data_indices(n, in, nin));
  const alma_tensor *x = in[0], *ind = in[1];
  int axis;
  ALMA_TRY(get_axis(n, x->rank, &axis));
  int r = x->rank - 1 + ind->rank;
  if (r > ALMA_MAX_RANK)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "output rank %d exceeds alma's maximum of %d", r, ALMA_MAX_RANK);
  int64_t d[ALMA_MAX_RANK];
  int k = 0;
  for (int i = 0; i < axis; i++) d[k++] = x->dims[i];
  for (int i = 0; i < ind->rank; i++) d[k++] = ind->dims[i];
  for (int i = axis + 1; i < x->rank; i++) d[k++] = x->dims[i];
  alma__set_shape(&out[0], x->dtype, r, d);
  return ALMA_OK;
}

static alma_status gather_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                               alma_tensor *out, int nout) {
  (void)ctx; (void)nin; (void)nout;
  const alma_tensor *x = in[0], *ind = in[1];
  int axis;
  ALMA_TRY(get_axis(n, x->rank, &axis));
  int64_t dim = x->dims[axis];
  int64_t outer = alma__numel(axis, x->dims), inner = alma__numel(x->rank - axis - 1, x->dims + axis + 1);
  int64_t ni = alma_tensor_numel(ind);
  size_t esz = alma_dtype_size(x->dtype), chunk = (size_t)inner * esz;
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)(ni ? ni : 1));
  if (!idx) return alma__op_error(n, ALMA_ERR_NOMEM, "out of memory");
  for (int64_t j = 0; j < ni; j++) {
    alma_status st = norm_index(n, alma__get_i64(ind->data, ind->dtype, j), dim, j, axis, &idx[j]);
    if (st != ALMA_OK) {
      free(idx);
      return st;
    }
  }
  uint8_t *o = out[0].data;
  const uint8_t *src = x->data;
  for (int64_t b = 0; b < outer; b++, src += (size_t)dim * chunk)
    for (int64_t j = 0; j < ni; j++, o += chunk) memcpy(o, src + (size_t)idx[j] * chunk, chunk);
  free(idx);
  return ALMA_OK;
}

const alma_op_def alma__op_Gather = {.name = "Gather", .flags = ALMA_OP_STRINGS | ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 11, 13}, .min_inputs = 2,
                                     .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                     .infer = gather_infer, .exec = gather_exec};

/* ---- GatherElements / ScatterElements shared shape rule ----------------------------------- */

/* indices has data's rank and, off the axis, dims no larger than data's (so every coordinate off
 * the axis is in range). */
static alma_status check_elements_shape(const alma_node *n, const alma_tensor *x, const alma_tensor *ind, int axis) {
  char a[128], b[128];
  if (ind->rank != x->rank)
    return alma__op_error(n, ALMA_ERR_SHAPE, "indices rank %d differs from data rank %d", ind->rank, x->rank);
  for (int k = 0; k < x->rank; k++)
    if (k != axis && ind->dims[k] > x->dims[k])
      return alma__op_error(n, ALMA_ERR_SHAPE, "indices shape %s exceeds data shape %s on axis %d",
                            alma__shape_str(ind->rank, ind->dims, a, sizeof a),
                            alma__shape_str(x->rank, x->dims, b, sizeof b), k);
  return ALMA_OK;
}

/* For element j of indices (row-major over ind dims), the data offset of its coordinates with the
 * axis coordinate left out; iterated with a counter to stay linear. */
typedef struct {
  int rank, axis;
  int64_t dims[ALMA_MAX_RANK], dstride[ALMA_MAX_RANK], ctr[ALMA_MAX_RANK];
  int64_t off;
} elem_iter;

static void elem_iter_init(elem_iter *it, const alma_tensor *x, const alma_tensor *ind, int axis) {
  memset(it, 0, sizeof *it);
  it->rank = ind->rank;
  it->axis = axis;
  for (int k = 0; k < ind->rank; k++) it->dims[k] = ind->dims[k];
  alma__strides(x->rank, x->dims, it->dstride);
}

static void elem_iter_next(elem_iter *it) {
  for (int k = it->rank - 1; k >= 0; k--) {
    int64_t s = k == it->axis ? 0 : it->dstride[k];
    it->off += s;
    if (++it->ctr[k] < it->dims[k]) return;
    it->off -= s * it->dims[k];
    it->ctr[k] = 0;
  }
}

/* ---- GatherElements ----------------------------------------------------------------------- */

static alma_status gather_elements_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                         int nout) {
  (void)nout;
  ALMA_TRY(check_data_indices(n, in, nin));
  int axis;
  ALMA_TRY(get_axis(n, in[0]->rank, &axis));
  ALMA_TRY(check_elements_shape(n, in[0], in[1], axis));
  alma__set_shape(&out[0], in[0]->dtype, in[1]->rank, in[1]->dims);
  return ALMA_OK;
}

static alma_status gather_elements_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in,
                                        int nin, alma_tensor *out, int nout) {
  (void)ctx; (void)nin; (void)nout;
  const alma_tensor *x = in[0], *ind = in[1];
  int axis;
  ALMA_TRY(get_axis(n, x->rank, &axis));
  int64_t ni = alma_tensor_numel(ind), dim = x->dims[axis];
  size_t esz = alma_dtype_size(x->dtype);
  elem_iter it;
  elem_iter_init(&it, x, ind, axis);
  uint8_t *o = out[0].data;
  const uint8_t *src = x->data;
  for (int64_t j = 0; j < ni; j++, elem_iter_next(&it)) {
    int64_t v = 0;
    ALMA_TRY(norm_index(n, alma__get_i64(ind->data, ind->dtype, j), dim, j, axis, &v));
    memcpy(o + (size_t)j * esz, src + (size_t)(it.off + v * it.dstride[axis]) * esz, esz);
  }
  return ALMA_OK;
}

const alma_op_def alma__op_GatherElements = {.name = "GatherElements", .flags = ALMA_OP_STRINGS, .domain = "", .versions = {11, 13},
                                             .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                             .infer = gather_elements_infer, .exec = gather_elements_exec};

/* ---- GatherND ----------------------------------------------------------------------------- */

static alma_status gather_nd_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                   int nout) {
  (void)nout;
  ALMA_TRY(check_data_indices(n, in, nin));
  const alma_tensor *x = in[0], *ind = in[1];
  int64_t b = n->since_version >= 12 ? alma__attr_i(n, "batch_dims", 0) : 0;
  int r = x->rank, q = ind->rank;
  if (r < 1 || q < 1) return alma__op_error(n, ALMA_ERR_SHAPE, "data and indices must have rank >= 1");
  if (b < 0 || b >= (q < r ? q : r))
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "batch_dims %lld must be in [0, min(%d, %d))", (long long)b, q, r);
  for (int k = 0; k < b; k++)
    if (x->dims[k] != ind->dims[k])
      return alma__op_error(n, ALMA_ERR_SHAPE, "batch dim %d differs: data %lld, indices %lld", k,
                            (long long)x->dims[k], (long long)ind->dims[k]);
  int64_t m = ind->dims[q - 1];
  if (m < 1 || m > r - b)
    return alma__op_error(n, ALMA_ERR_SHAPE, "indices last dim %lld must be in [1, %lld]", (long long)m,
                          (long long)(r - b));
  int64_t d[ALMA_MAX_RANK];
  int k = 0;
  for (int i = 0; i < q - 1; i++) d[k++] = ind->dims[i];
  for (int64_t i = b + m; i < r; i++) d[k++] = x->dims[i];
  alma__set_shape(&out[0], x->dtype, k, d);
  return ALMA_OK;
}

/* Data offset (elements) of the index tuple at tuple[0..m) in a batch slice whose dims start at
 * data dim `first`. */
static alma_status nd_offset(const alma_node *n, const alma_tensor *x, const alma_tensor *ind, int64_t pos, int first,
                             int64_t m, const int64_t *xs, int64_t *off) {
  int64_t o = 0;
  for (int64_t k = 0; k < m; k++) {
    int64_t v = 0;
    ALMA_TRY(norm_index(n, alma__get_i64(ind->data, ind->dtype, pos + k), x->dims[first + k], pos + k,
                        (int)(first + k), &v));
    o += v * xs[first + k];
  }
  *off = o;
  return ALMA_OK;
}

static alma_status gather_nd_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                                  alma_tensor *out, int nout) {
  (void)ctx; (void)nin; (void)nout;
  const alma_tensor *x = in[0], *ind = in[1];
  int b = n->since_version >= 12 ? (int)alma__attr_i(n, "batch_dims", 0) : 0;
  int q = ind->rank;
  int64_t m = ind->dims[q - 1];
  int64_t xs[ALMA_MAX_RANK];
  alma__strides(x->rank, x->dims, xs);
  int64_t nb = alma__numel(b, x->dims);
  int64_t bstride = alma__numel(x->rank - b, x->dims + b);
  int64_t nt = alma__numel(q - 1 - b, ind->dims + b); /* tuples per batch */
  int64_t slice = alma__numel(x->rank - b - (int)m, x->dims + b + m);
  size_t esz = alma_dtype_size(x->dtype), chunk = (size_t)slice * esz;
  uint8_t *o = out[0].data;
  const uint8_t *src = x->data;
  for (int64_t bi = 0; bi < nb; bi++)
    for (int64_t t = 0; t < nt; t++, o += chunk) {
      int64_t off;
      ALMA_TRY(nd_offset(n, x, ind, (bi * nt + t) * m, b, m, xs, &off));
      memcpy(o, src + (size_t)(bi * bstride + off) * esz, chunk);
    }
  return ALMA_OK;
}

const alma_op_def alma__op_GatherND = {.name = "GatherND", .flags = ALMA_OP_STRINGS, .domain = "", .versions = {11, 12, 13},
                                       .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                       .infer = gather_nd_infer, .exec = gather_nd_exec};

/* ---- scatter reductions ------------------------------------------------------------------- */

typedef enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN } reduction;

static alma_status get_reduction(const alma_node *n, reduction *r) {
  const char *s = n->since_version >= 16 ? alma__attr_s(n, "reduction", "none") : "none";
  if (!strcmp(s, "none")) *r = RED_NONE;
  else if (!strcmp(s, "add")) *r = RED_ADD;
  else if (!strcmp(s, "mul")) *r = RED_MUL;
  else if (n->since_version >= 18 && !strcmp(s, "max")) *r = RED_MAX;
  else if (n->since_version >= 18 && !strcmp(s, "min")) *r = RED_MIN;
  else
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "reduction '%s' is not valid at opset %d", s, n->since_version);
  return ALMA_OK;
}

/* dst[di..di+cnt) = dst <red> src[si..si+cnt), in the dtype's own arithmetic: float32 directly,
 * other floats through double, integers through int64 (uint64 compared unsigned), bool as or/and. */
static void reduce_into(void *dst, int64_t di, const void *src, int64_t si, int64_t cnt, alma_dtype dt, reduction r,
                        size_t esz) {
  if (r == RED_NONE) {
    memcpy((uint8_t *)dst + (size_t)di * esz, (const uint8_t *)src + (size_t)si * esz, (size_t)cnt * esz);
    return;
  }
  if (dt == ALMA_DTYPE_FLOAT32) {
    float *d = (float *)dst + di;
    const float *s = (const float *)src + si;
    for (int64_t i = 0; i < cnt; i++) switch (r) {
        case RED_ADD: d[i] += s[i]; break;
        case RED_MUL: d[i] *= s[i]; break;
        case RED_MAX: d[i] = s[i] > d[i] ? s[i] : d[i]; break;
        default: d[i] = s[i] < d[i] ? s[i] : d[i]; break;
      }
    return;
  }
  if (alma__dtype_is_float(dt)) {
    for (int64_t i = 0; i < cnt; i++) {
      double a = alma__get_f64(dst, dt, di + i), b = alma__get_f64(src, dt, si + i);
      double v = r == RED_ADD ? a + b : r == RED_MUL ? a * b : r == RED_MAX ? (b > a ? b : a) : (b < a ? b : a);
      alma__set_f64(dst, dt, di + i, v);
    }
    return;
  }
  for (int64_t i = 0; i < cnt; i++) {
    int64_t a = alma__get_i64(dst, dt, di + i), b = alma__get_i64(src, dt, si + i), v;
    int b_gt = dt == ALMA_DTYPE_UINT64 ? (uint64_t)b > (uint64_t)a : b > a;
    int b_lt = dt == ALMA_DTYPE_UINT64 ? (uint64_t)b < (uint64_t)a : b < a;
    switch (r) {
      /* unsigned wrap-around arithmetic: same bits as the dtype's own add/mul */
      case RED_ADD: v = (int64_t)((uint64_t)a + (uint64_t)b); break;
      case RED_MUL: v = (int64_t)((uint64_t)a * (uint64_t)b); break;
      case RED_MAX: v = b_gt ? b : a; break;
      default: v = b_lt ? b : a; break;
    }
    if (dt == ALMA_DTYPE_BOOL) v = r == RED_MUL ? (a && b) : r == RED_ADD ? (a || b) : v;
    alma__set_i64(dst, dt, di + i, v);
  }
}

static alma_status check_scatter_common(const alma_node *n, const alma_tensor *const *in, int nin) {
  ALMA_TRY(check_data_indices(n, in, nin));
  if (nin < 3 || !in[2]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "missing input 'updates'");
  if (in[2]->dtype != in[0]->dtype)
    return alma__op_error(n, ALMA_ERR_TYPE, "updates are %s, data is %s", alma_dtype_name(in[2]->dtype),
                          alma_dtype_name(in[0]->dtype));
  reduction r;
  ALMA_TRY(get_reduction(n, &r));
  if (r != RED_NONE && in[0]->dtype == ALMA_DTYPE_STRING)
    return alma__op_error(n, ALMA_ERR_TYPE, "a reduction over string data");
  return ALMA_OK;
}

/* ---- ScatterElements ---------------------------------------------------------------------- */

static alma_status scatter_elements_infer(const alma_node *n, const alma_tensor *const *in, int nin,
                                          alma_tensor *out, int nout) {
  (void)nout;
  ALMA_TRY(check_scatter_common(n, in, nin));
  int axis;
  ALMA_TRY(get_axis(n, in[0]->rank, &axis));
  if (!alma__same_shape(in[1], in[2])) {
    char a[128], b[128];
    return alma__op_error(n, ALMA_ERR_SHAPE, "indices shape %s differs from updates shape %s",
                          alma__shape_str(in[1]->rank, in[1]->dims, a, sizeof a),
                          alma__shape_str(in[2]->rank, in[2]->dims, b, sizeof b));
  }
  ALMA_TRY(check_elements_shape(n, in[0], in[1], axis));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

static alma_status scatter_elements_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in,
                                         int nin, alma_tensor *out, int nout) {
  (void)ctx; (void)nin; (void)nout;
  const alma_tensor *x = in[0], *ind = in[1], *upd = in[2];
  int axis;
  reduction r;
  ALMA_TRY(get_axis(n, x->rank, &axis));
  ALMA_TRY(get_reduction(n, &r));
  size_t esz = alma_dtype_size(x->dtype);
  int64_t ni = alma_tensor_numel(ind), dim = x->dims[axis];
  /* Validate every index before writing so a failure leaves no half-scattered output. */
  for (int64_t j = 0; j < ni; j++) {
    int64_t v = 0;
    ALMA_TRY(norm_index(n, alma__get_i64(ind->data, ind->dtype, j), dim, j, axis, &v));
  }
  memcpy(out[0].data, x->data, (size_t)alma_tensor_numel(x) * esz);
  elem_iter it;
  elem_iter_init(&it, x, ind, axis);
  for (int64_t j = 0; j < ni; j++, elem_iter_next(&it)) {
    int64_t v = alma__get_i64(ind->data, ind->dtype, j);
    if (v < 0) v += dim;
    reduce_into(out[0].data, it.off + v * it.dstride[axis], upd->data, j, 1, x->dtype, r, esz);
  }
  return ALMA_OK;
}

const alma_op_def alma__op_ScatterElements = {.name = "ScatterElements", .flags = ALMA_OP_STRINGS, .domain = "", .versions = {11, 13, 16, 18},
                                              .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
                                              .infer = scatter_elements_infer, .exec = scatter_elements_exec};

/* ---- ScatterND ---------------------------------------------------------------------------- */

static alma_status scatter_nd_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                    int nout) {
  (void)nout;
  ALMA_TRY(check_scatter_common(n, in, nin));
  const alma_tensor *x = in[0], *ind = in[1], *upd = in[2];
  int r = x->rank, q = ind->rank;
  if (r < 1 || q < 1) return alma__op_error(n, ALMA_ERR_SHAPE, "data and indices must have rank >= 1");
  int64_t k = ind->dims[q - 1];
  if (k < 1 || k > r)
    return alma__op_error(n, ALMA_ERR_SHAPE, "indices last dim %lld must be in [1, %d]", (long long)k, r);
  /* updates.shape == indices.shape[:-1] + data.shape[k:] */
  int ok = upd->rank == q - 1 + r - (int)k;
  for (int i = 0; ok && i < q - 1; i++) ok = upd->dims[i] == ind->dims[i];
  for (int i = 0; ok && i < r - k; i++) ok = upd->dims[q - 1 + i] == x->dims[k + i];
  if (!ok) {
    char a[128];
    return alma__op_error(n, ALMA_ERR_SHAPE, "updates shape %s must be indices.shape[:-1] + data.shape[%lld:]",
                          alma__shape_str(upd->rank, upd->dims, a, sizeof a), (long long)k);
  }
  alma__set_shape(&out[0], x->dtype, x->rank, x->dims);
  return ALMA_OK;
}

static alma_status scatter_nd_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                                   alma_tensor *out, int nout) {
  (void)ctx; (void)nin; (void)nout;
  const alma_tensor *x = in[0], *ind = in[1], *upd = in[2];
  reduction r;
  ALMA_TRY(get_reduction(n, &r));
  int q = ind->rank;
  int64_t k = ind->dims[q - 1];
  int64_t xs[ALMA_MAX_RANK];
  alma__strides(x->rank, x->dims, xs);
  int64_t nt = alma__numel(q - 1, ind->dims);
  int64_t slice = alma__numel(x->rank - (int)k, x->dims + k);
  size_t esz = alma_dtype_size(x->dtype);
  int64_t off;
  for (int64_t t = 0; t < nt; t++) ALMA_TRY(nd_offset(n, x, ind, t * k, 0, k, xs, &off));
  memcpy(out[0].data, x->data, (size_t)alma_tensor_numel(x) * esz);
  for (int64_t t = 0; t < nt; t++) {
    nd_offset(n, x, ind, t * k, 0, k, xs, &off);
    reduce_into(out[0].data, off, upd->data, t * slice, slice, x->dtype, r, esz);
  }
  return ALMA_OK;
}

const alma_op_def alma__op_ScatterND = {.name = "ScatterND", .flags = ALMA_OP_STRINGS, .domain = "", .versions = {11, 13, 16, 18},
                                        .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
                                        .infer = scatter_nd_infer, .exec = scatter_nd_exec};

/* Scatter (opsets 9 and 11, deprecated in favour of ScatterElements): the same op without
 * reduction. */
const alma_op_def alma__op_Scatter = {.name = "Scatter", .flags = ALMA_OP_STRINGS, .domain = "", .versions = {9, 11}, .min_inputs = 3,
                                      .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
                                      .infer = scatter_elements_infer, .exec = scatter_elements_exec};
