/* Shape and layout operators: Reshape, Flatten, Squeeze, Unsqueeze, Shape, Size, Expand, Tile,
 * Transpose, Concat, Split, DepthToSpace, SpaceToDepth. They move bytes (any dtype alma holds). */
#include "ops/datamove.h"

/* ---- shared ------------------------------------------------------------------------------- */

/* Plain copy for ops that only change the shape (row-major order is unchanged). */
static alma_status copy_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  (void)ctx; (void)nin; (void)nout;
  int64_t cnt = alma_tensor_numel(in[0]);
  if (cnt != alma_tensor_numel(&out[0]))
    return alma__op_error(n, ALMA_ERR_INTERNAL, "output size differs from input size");
  if (cnt) memcpy(out[0].data, in[0]->data, (size_t)cnt * alma_dtype_size(in[0]->dtype));
  return ALMA_OK;
}

static alma_status need_input(const alma_node *n, const alma_tensor *const *in, int nin, int i, const char *what) {
  if (i >= nin || !in[i]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "missing input '%s'", what);
  return ALMA_OK;
}

/* ---- Reshape ------------------------------------------------------------------------------ */

static alma_status reshape_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                 int nout) {
  (void)nout;
  const alma_tensor *x = in[0];
  ALMA_TRY(alma__dm_check_dtype(n, x->dtype, "input"));
  int64_t shp[ALMA_MAX_RANK];
  int cnt = 0;
  if (n->since_version < 5) {
    const int64_t *s;
    if (!alma__node_attr(n, "shape")) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "missing attribute 'shape'");
    cnt = alma__attr_ints(n, "shape", &s);
    if (cnt > ALMA_MAX_RANK)
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "target rank %d exceeds alma's maximum of %d", cnt, ALMA_MAX_RANK);
    for (int i = 0; i < cnt; i++) shp[i] = s[i];
  } else {
    ALMA_TRY(need_input(n, in, nin, 1, "shape"));
    ALMA_TRY(alma__dm_read_ints(n, in[1], "shape", shp, ALMA_MAX_RANK, &cnt));
  }
  int allowzero = n->since_version >= 14 ? (int)alma__attr_i(n, "allowzero", 0) : 0;
  int64_t total = alma_tensor_numel(x), prod = 1;
  int neg = -1, has_zero = 0;
  int64_t dims[ALMA_MAX_RANK];
  for (int i = 0; i < cnt; i++) {
    int64_t v = shp[i];
    if (v == 0 && !allowzero) {
      if (i >= x->rank)
        return alma__op_error(n, ALMA_ERR_SHAPE, "shape[%d] = 0 copies a dimension the rank-%d input lacks", i, x->rank);
      v = x->dims[i];
    } else if (v == 0) {
      has_zero = 1;
    }
    if (v == -1) {
      if (neg >= 0) return alma__op_error(n, ALMA_ERR_SHAPE, "shape has more than one -1");
      neg = i;
      dims[i] = -1;
      continue;
    }
    if (v < 0) return alma__op_error(n, ALMA_ERR_SHAPE, "shape[%d] = %lld is invalid", i, (long long)v);
    dims[i] = v;
    if (alma__mul_overflow_i64(prod, v, &prod)) return alma__op_error(n, ALMA_ERR_SHAPE, "shape overflows");
  }
  char sx[128], ss[128];
  if (neg >= 0) {
    if (has_zero) return alma__op_error(n, ALMA_ERR_SHAPE, "shape has both -1 and 0 with allowzero=1");
    if (prod == 0 || total % prod)
      return alma__op_error(n, ALMA_ERR_SHAPE, "cannot reshape %s to %s",
                            alma__shape_str(x->rank, x->dims, sx, sizeof sx), alma__shape_str(cnt, shp, ss, sizeof ss));
    dims[neg] = total / prod;
  } else if (prod != total) {
    return alma__op_error(n, ALMA_ERR_SHAPE, "cannot reshape %s (%lld elements) to %s",
                          alma__shape_str(x->rank, x->dims, sx, sizeof sx), (long long)total,
                          alma__shape_str(cnt, shp, ss, sizeof ss));
  }
  alma__set_shape(&out[0], x->dtype, cnt, dims);
  return ALMA_OK;
}

const alma_op_def alma__op_Reshape = {.name = "Reshape", .flags = ALMA_OP_STRINGS | ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 5, 13, 14, 19, 21},
                                      .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                      .infer = reshape_infer, .exec = copy_exec};

/* ---- Flatten ------------------------------------------------------------------------------ */

static alma_status flatten_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                 int nout) {
  (void)nin; (void)nout;
  const alma_tensor *x = in[0];
  ALMA_TRY(alma__dm_check_dtype(n, x->dtype, "input"));
  int64_t axis = alma__attr_i(n, "axis", 1);
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis > x->rank)
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "axis %lld out of range for rank %d",
                          (long long)alma__attr_i(n, "axis", 1), x->rank);
  int64_t d[2] = {alma__numel((int)axis, x->dims), alma__numel(x->rank - (int)axis, x->dims + axis)};
  alma__set_shape(&out[0], x->dtype, 2, d);
  return ALMA_OK;
}

const alma_op_def alma__op_Flatten = {.name = "Flatten", .flags = ALMA_OP_STRINGS | ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 9, 11, 13, 21},
                                      .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                      .infer = flatten_infer, .exec = copy_exec};

/* ---- Squeeze / Unsqueeze ------------------------------------------------------------------ */

/* Axes from the attribute (before opset 13) or the optional second input (13 on). *count = -1
 * when absent. */
static alma_status read_axes(const alma_node *n, const alma_tensor *const *in, int nin, int64_t *axes,
                             int max, int *count) {
  *count = -1;
  if (n->since_version < 13) {
    const alma_attr *a = alma__node_attr(n, "axes");
    if (!a) return ALMA_OK;
    const int64_t *v;
    int c = alma__attr_ints(n, "axes", &v);
    if (c > max) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "too many axes (%d)", c);
    for (int i = 0; i < c; i++) axes[i] = v[i];
    *count = c;
    return ALMA_OK;
  }
  if (nin < 2 || !in[1]) return ALMA_OK;
  return alma__dm_read_ints(n, in[1], "axes", axes, max, count);
}

static alma_status squeeze_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                 int nout) {
  (void)nout;
  const alma_tensor *x = in[0];
  ALMA_TRY(alma__dm_check_dtype(n, x->dtype, "input"));
  int64_t axes[ALMA_MAX_RANK];
  int cnt;
  ALMA_TRY(read_axes(n, in, nin, axes, ALMA_MAX_RANK, &cnt));
  int drop[ALMA_MAX_RANK] = {0};
  if (cnt < 0) {
    for (int i = 0; i < x->rank; i++) drop[i] = x->dims[i] == 1;
  } else {
    for (int i = 0; i < cnt; i++) {
      int a;
      if (alma__norm_axis(axes[i], x->rank, &a) != ALMA_OK || x->rank == 0)
        return alma__op_error(n, ALMA_ERR_INVALID_ARG, "axis %lld out of range for rank %d", (long long)axes[i],
                              x->rank);
      if (drop[a]) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "axis %lld given twice", (long long)axes[i]);
      if (x->dims[a] != 1)
        return alma__op_error(n, ALMA_ERR_SHAPE, "cannot squeeze axis %d of size %lld", a, (long long)x->dims[a]);
      drop[a] = 1;
    }
  }
  int64_t d[ALMA_MAX_RANK];
  int r = 0;
  for (int i = 0; i < x->rank; i++)
    if (!drop[i]) d[r++] = x->dims[i];
  alma__set_shape(&out[0], x->dtype, r, d);
  return ALMA_OK;
}

const alma_op_def alma__op_Squeeze = {.name = "Squeeze", .flags = ALMA_OP_STRINGS | ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 11, 13, 21},
                                      .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                      .infer = squeeze_infer, .exec = copy_exec};

static alma_status unsqueeze_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                   int nout) {
  (void)nout;
  const alma_tensor *x = in[0];
  ALMA_TRY(alma__dm_check_dtype(n, x->dtype, "input"));
  int64_t axes[ALMA_MAX_RANK];
  int cnt;
  ALMA_TRY(read_axes(n, in, nin, axes, ALMA_MAX_RANK, &cnt));
  if (cnt < 0) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axes are required");
  int r = x->rank + cnt;
  if (r > ALMA_MAX_RANK)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "output rank %d exceeds alma's maximum of %d", r, ALMA_MAX_RANK);
  int ins[ALMA_MAX_RANK] = {0};
  for (int i = 0; i < cnt; i++) {
    int a;
    if (alma__norm_axis(axes[i], r, &a) != ALMA_OK)
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "axis %lld out of range for output rank %d",
                            (long long)axes[i], r);
    if (ins[a]) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "axis %lld given twice", (long long)axes[i]);
    ins[a] = 1;
  }
  int64_t d[ALMA_MAX_RANK];
  for (int i = 0, j = 0; i < r; i++) d[i] = ins[i] ? 1 : x->dims[j++];
  alma__set_shape(&out[0], x->dtype, r, d);
  return ALMA_OK;
}

const alma_op_def alma__op_Unsqueeze = {.name = "Unsqueeze", .flags = ALMA_OP_STRINGS | ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 11, 13, 21},
                                        .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                        .infer = unsqueeze_infer, .exec = copy_exec};

/* ---- Shape / Size ------------------------------------------------------------------------- */

static void shape_range(const alma_node *n, int rank, int64_t *start, int64_t *end) {
  int64_t s = 0, e = rank;
  if (n->since_version >= 15) {
    s = alma__attr_i(n, "start", 0);
    e = alma__attr_i(n, "end", rank);
    if (s < 0) s += rank;
    if (e < 0) e += rank;
    s = s < 0 ? 0 : s > rank ? rank : s;
    e = e < 0 ? 0 : e > rank ? rank : e;
  }
  *start = s;
  *end = e < s ? s : e;
}

static alma_status shape_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                               int nout) {
  (void)nin; (void)nout;
  int64_t s, e;
  shape_range(n, in[0]->rank, &s, &e);
  int64_t d = e - s;
  alma__set_shape(&out[0], ALMA_DTYPE_INT64, 1, &d);
  return ALMA_OK;
}

static alma_status shape_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                              alma_tensor *out, int nout) {
  (void)ctx; (void)nin; (void)nout;
  int64_t s, e;
  shape_range(n, in[0]->rank, &s, &e);
  int64_t *o = out[0].data;
  for (int64_t i = s; i < e; i++) o[i - s] = in[0]->dims[i];
  return ALMA_OK;
}

const alma_op_def alma__op_Shape = {.name = "Shape", .flags = ALMA_OP_STRINGS | ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 13, 15, 19, 21},
                                    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                    .infer = shape_infer, .exec = shape_exec};

static alma_status size_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                              int nout) {
  (void)n; (void)in; (void)nin; (void)nout;
  alma__set_shape(&out[0], ALMA_DTYPE_INT64, 0, NULL);
  return ALMA_OK;
}

static alma_status size_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  (void)ctx; (void)n; (void)nin; (void)nout;
  *(int64_t *)out[0].data = alma_tensor_numel(in[0]);
  return ALMA_OK;
}

const alma_op_def alma__op_Size = {.name = "Size", .flags = ALMA_OP_STRINGS | ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 13, 19, 21},
                                   .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                   .infer = size_infer, .exec = size_exec};

/* ---- Expand ------------------------------------------------------------------------------- */

static alma_status expand_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                int nout) {
  (void)nout;
  const alma_tensor *x = in[0];
  ALMA_TRY(alma__dm_check_dtype(n, x->dtype, "input"));
  ALMA_TRY(need_input(n, in, nin, 1, "shape"));
  int64_t shp[ALMA_MAX_RANK], d[ALMA_MAX_RANK];
  int cnt, r;
  ALMA_TRY(alma__dm_read_ints(n, in[1], "shape", shp, ALMA_MAX_RANK, &cnt));
  for (int i = 0; i < cnt; i++)
    if (shp[i] < 0) return alma__op_error(n, ALMA_ERR_SHAPE, "shape[%d] = %lld is negative", i, (long long)shp[i]);
  if (alma__broadcast_shape(x->rank, x->dims, cnt, shp, &r, d) != ALMA_OK)
    return alma__error_prefix(ALMA_ERR_SHAPE, "node '%s' (%s): ", n->name, n->op_type);
  alma__set_shape(&out[0], x->dtype, r, d);
  return ALMA_OK;
}

/* Copies x broadcast to out's shape (numpy rules; x's rank <= out's rank). */
static void broadcast_copy(const alma_tensor *x, alma_tensor *out) {
  int64_t xs[ALMA_MAX_RANK], st[ALMA_MAX_RANK];
  alma__strides(x->rank, x->dims, xs);
  int off = out->rank - x->rank;
  for (int k = 0; k < out->rank; k++) st[k] = k < off || x->dims[k - off] == 1 ? 0 : xs[k - off];
  alma__dm_strided_copy(out->data, x->data, alma_dtype_size(x->dtype), out->rank, out->dims, st);
}

static alma_status expand_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                               alma_tensor *out, int nout) {
  (void)ctx; (void)n; (void)nin; (void)nout;
  broadcast_copy(in[0], &out[0]);
  return ALMA_OK;
}

const alma_op_def alma__op_Expand = {.name = "Expand", .flags = ALMA_OP_STRINGS | ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {8, 13}, .min_inputs = 2,
                                     .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                     .infer = expand_infer, .exec = expand_exec};

/* ---- Tile --------------------------------------------------------------------------------- */

static alma_status tile_repeats(const alma_node *n, const alma_tensor *const *in, int nin, int64_t *rep) {
  const alma_tensor *x = in[0];
  if (n->since_version < 6) {
    /* Tile-1: scalar `tiles` copies along scalar `axis`. */
    if (nin < 3 || !in[1] || !in[2]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "Tile-1 needs tiles and axis");
    int64_t t, a;
    int c;
    ALMA_TRY(alma__dm_read_ints(n, in[1], "tiles", &t, 1, &c));
    if (c != 1) return alma__op_error(n, ALMA_ERR_SHAPE, "tiles must hold one value");
    ALMA_TRY(alma__dm_read_ints(n, in[2], "axis", &a, 1, &c));
    if (c != 1) return alma__op_error(n, ALMA_ERR_SHAPE, "axis must hold one value");
    int ax;
    if (alma__norm_axis(a, x->rank, &ax) != ALMA_OK || x->rank == 0)
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "axis %lld out of range for rank %d", (long long)a, x->rank);
    for (int i = 0; i < x->rank; i++) rep[i] = i == ax ? t : 1;
  } else {
    ALMA_TRY(need_input(n, in, nin, 1, "repeats"));
    if (nin > 2 && in[2]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "Tile takes two inputs from opset 6");
    int c;
    ALMA_TRY(alma__dm_read_ints(n, in[1], "repeats", rep, ALMA_MAX_RANK, &c));
    if (c != x->rank)
      return alma__op_error(n, ALMA_ERR_SHAPE, "repeats has %d entries for an input of rank %d", c, x->rank);
  }
  for (int i = 0; i < x->rank; i++)
    if (rep[i] < 0) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "repeats[%d] = %lld is negative", i, (long long)rep[i]);
  return ALMA_OK;
}

static alma_status tile_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                              int nout) {
  (void)nout;
  const alma_tensor *x = in[0];
  ALMA_TRY(alma__dm_check_dtype(n, x->dtype, "input"));
  int64_t rep[ALMA_MAX_RANK], d[ALMA_MAX_RANK];
  ALMA_TRY(tile_repeats(n, in, nin, rep));
  for (int i = 0; i < x->rank; i++)
    if (alma__mul_overflow_i64(x->dims[i], rep[i], &d[i])) return alma__op_error(n, ALMA_ERR_SHAPE, "output too large");
  alma__set_shape(&out[0], x->dtype, x->rank, d);
  return ALMA_OK;
}

static alma_status tile_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  (void)ctx; (void)nout;
  const alma_tensor *x = in[0];
  int64_t rep[ALMA_MAX_RANK], xs[ALMA_MAX_RANK], d[ALMA__DM_MAX_RANK], st[ALMA__DM_MAX_RANK];
  ALMA_TRY(tile_repeats(n, in, nin, rep));
  alma__strides(x->rank, x->dims, xs);
  /* Output viewed as (rep_0, d_0, rep_1, d_1, ...): the repeat dims read with stride 0. */
  for (int k = 0; k < x->rank; k++) {
    d[2 * k] = rep[k];
    st[2 * k] = 0;
    d[2 * k + 1] = x->dims[k];
    st[2 * k + 1] = xs[k];
  }
  alma__dm_strided_copy(out[0].data, x->data, alma_dtype_size(x->dtype), 2 * x->rank, d, st);
  return ALMA_OK;
}

const alma_op_def alma__op_Tile = {.name = "Tile", .flags = ALMA_OP_STRINGS | ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 6, 13}, .min_inputs = 2,
                                   .max_inputs = 3, .min_outputs = 1, .max_outputs = 1, .infer = tile_infer,
                                   .exec = tile_exec};

/* ---- Transpose ---------------------------------------------------------------------------- */

static alma_status transpose_perm(const alma_node *n, int rank, int *perm) {
  const int64_t *p;
  int c = alma__attr_ints(n, "perm", &p);
  if (!alma__node_attr(n, "perm")) {
    for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
    return ALMA_OK;
  }
  if (c != rank) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "perm has %d entries for rank %d", c, rank);
  int seen[ALMA_MAX_RANK] = {0};
  for (int i = 0; i < c; i++) {
    if (p[i] < 0 || p[i] >= rank || seen[p[i]])
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "perm is not a permutation of 0..%d", rank - 1);
    seen[p[i]] = 1;
    perm[i] = (int)p[i];
  }
  return ALMA_OK;
}

static alma_status transpose_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                   int nout) {
  (void)nin; (void)nout;
  const alma_tensor *x = in[0];
  ALMA_TRY(alma__dm_check_dtype(n, x->dtype, "input"));
  int perm[ALMA_MAX_RANK];
  int64_t d[ALMA_MAX_RANK];
  ALMA_TRY(transpose_perm(n, x->rank, perm));
  for (int i = 0; i < x->rank; i++) d[i] = x->dims[perm[i]];
  alma__set_shape(&out[0], x->dtype, x->rank, d);
  return ALMA_OK;
}

static alma_status transpose_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                                  alma_tensor *out, int nout) {
  (void)ctx; (void)nin; (void)nout;
  const alma_tensor *x = in[0];
  int perm[ALMA_MAX_RANK];
  int64_t xs[ALMA_MAX_RANK], st[ALMA_MAX_RANK];
  ALMA_TRY(transpose_perm(n, x->rank, perm));
  alma__strides(x->rank, x->dims, xs);
  for (int i = 0; i < x->rank; i++) st[i] = xs[perm[i]];
  alma__dm_strided_copy(out[0].data, x->data, alma_dtype_size(x->dtype), x->rank, out[0].dims, st);
  return ALMA_OK;
}

const alma_op_def alma__op_Transpose = {.name = "Transpose", .flags = ALMA_OP_STRINGS | ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 13, 21},
                                        .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                        .infer = transpose_infer, .exec = transpose_exec};

/* ---- Concat ------------------------------------------------------------------------------- */

static alma_status concat_axis(const alma_node *n, int rank, int *axis) {
  const alma_attr *a = alma__node_attr(n, "axis");
  if (!a && n->since_version >= 4) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "missing attribute 'axis'");
  int64_t v = a ? a->i : 1; /* Concat-1 defaulted to axis 1 */
  if (rank == 0 || alma__norm_axis(v, rank, axis) != ALMA_OK)
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "axis %lld out of range for rank %d", (long long)v, rank);
  return ALMA_OK;
}

static alma_status concat_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                int nout) {
  (void)nout;
  if (nin < 1 || !in[0]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "no inputs");
  const alma_tensor *x = in[0];
  ALMA_TRY(alma__dm_check_dtype(n, x->dtype, "input"));
  int axis;
  ALMA_TRY(concat_axis(n, x->rank, &axis));
  int64_t d[ALMA_MAX_RANK];
  for (int k = 0; k < x->rank; k++) d[k] = x->dims[k];
  for (int i = 1; i < nin; i++) {
    const alma_tensor *t = in[i];
    if (!t) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input %d is missing", i);
    if (t->dtype != x->dtype)
      return alma__op_error(n, ALMA_ERR_TYPE, "input %d is %s, input 0 is %s", i, alma_dtype_name(t->dtype),
                            alma_dtype_name(x->dtype));
    if (t->rank != x->rank)
      return alma__op_error(n, ALMA_ERR_SHAPE, "input %d has rank %d, input 0 has rank %d", i, t->rank, x->rank);
    for (int k = 0; k < x->rank; k++) {
      if (k == axis) continue;
      if (t->dims[k] != x->dims[k]) {
        char a[128], b[128];
        return alma__op_error(n, ALMA_ERR_SHAPE, "input %d shape %s does not match input 0 shape %s off axis %d", i,
                              alma__shape_str(t->rank, t->dims, a, sizeof a),
                              alma__shape_str(x->rank, x->dims, b, sizeof b), axis);
      }
    }
    d[axis] += t->dims[axis];
  }
  alma__set_shape(&out[0], x->dtype, x->rank, d);
  return ALMA_OK;
}

static alma_status concat_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                               alma_tensor *out, int nout) {
  (void)ctx; (void)nout;
  int axis;
  ALMA_TRY(concat_axis(n, out[0].rank, &axis));
  size_t esz = alma_dtype_size(out[0].dtype);
  int64_t outer = alma__numel(axis, out[0].dims);
  int64_t inner = alma__numel(out[0].rank - axis - 1, out[0].dims + axis + 1);
  uint8_t *o = out[0].data;
  for (int64_t b = 0; b < outer; b++)
    for (int i = 0; i < nin; i++) {
      size_t chunk = (size_t)(in[i]->dims[axis] * inner) * esz;
      if (!chunk) continue;
      memcpy(o, (const uint8_t *)in[i]->data + (size_t)b * chunk, chunk);
      o += chunk;
    }
  return ALMA_OK;
}

const alma_op_def alma__op_Concat = {.name = "Concat", .flags = ALMA_OP_STRINGS | ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 4, 11, 13},
                                     .min_inputs = 1, .max_inputs = -1, .min_outputs = 1, .max_outputs = 1,
                                     .infer = concat_infer, .exec = concat_exec};

/* ---- Split -------------------------------------------------------------------------------- */

#define SPLIT_MAX 4096

/* Sizes of the nout pieces along *axis (sizes holds SPLIT_MAX entries). Sources by version:
 * attribute `split` (<13; Split-1 also accepted a second input), input `split` (13 on), attribute
 * `num_outputs` (18 on, uneven last chunk), else equal parts. */
static alma_status split_sizes(const alma_node *n, const alma_tensor *const *in, int nin, int nout, int *axis,
                               int64_t *sizes) {
  const alma_tensor *x = in[0];
  int64_t a = alma__attr_i(n, "axis", 0);
  if (x->rank == 0 || alma__norm_axis(a, x->rank, axis) != ALMA_OK)
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "axis %lld out of range for rank %d", (long long)a, x->rank);
  if (nout > SPLIT_MAX) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "more than %d outputs", SPLIT_MAX);
  int64_t dim = x->dims[*axis];
  int cnt = -1;
  const alma_tensor *split_in = nin > 1 ? in[1] : NULL;
  if (n->since_version < 13 && alma__node_attr(n, "split")) {
    const int64_t *s;
    cnt = alma__attr_ints(n, "split", &s);
    if (cnt != nout)
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "split has %d entries for %d outputs", cnt, nout);
    for (int i = 0; i < cnt; i++) sizes[i] = s[i];
  } else if (split_in && (n->since_version >= 13 || n->since_version == 1)) {
    ALMA_TRY(alma__dm_read_ints(n, split_in, "split", sizes, SPLIT_MAX, &cnt));
    if (cnt != nout)
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "split has %d entries for %d outputs", cnt, nout);
  } else if (split_in) {
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "Split-%d takes split as an attribute, not an input",
                          n->since_version);
  }
  const alma_attr *no = n->since_version >= 18 ? alma__node_attr(n, "num_outputs") : NULL;
  if (no && cnt >= 0) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "both split and num_outputs are given");
  if (no && no->i != nout)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "num_outputs = %lld but the node has %d outputs",
                          (long long)no->i, nout);
  if (cnt < 0) {
    if (no) {
      int64_t chunk = (dim + nout - 1) / nout;
      if (chunk * (nout - 1) > dim)
        return alma__op_error(n, ALMA_ERR_SHAPE, "cannot split %lld into %d parts", (long long)dim, nout);
      for (int i = 0; i < nout; i++) sizes[i] = i < nout - 1 ? chunk : dim - chunk * (nout - 1);
    } else {
      if (dim % nout)
        return alma__op_error(n, ALMA_ERR_SHAPE, "axis %d of size %lld does not split into %d equal parts", *axis,
                              (long long)dim, nout);
      for (int i = 0; i < nout; i++) sizes[i] = dim / nout;
    }
  }
  int64_t sum = 0;
  for (int i = 0; i < nout; i++) {
    if (sizes[i] < 0) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "split[%d] = %lld is negative", i, (long long)sizes[i]);
    if (sizes[i] > dim) /* also keeps the sum from overflowing */
      return alma__op_error(n, ALMA_ERR_SHAPE, "split[%d] = %lld exceeds the axis size %lld", i, (long long)sizes[i],
                            (long long)dim);
    sum += sizes[i];
    if (sum > dim) break;
  }
  if (sum != dim)
    return alma__op_error(n, ALMA_ERR_SHAPE, "split sizes sum to %lld, axis %d has size %lld", (long long)sum, *axis,
                          (long long)dim);
  return ALMA_OK;
}

static alma_status split_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                               int nout) {
  const alma_tensor *x = in[0];
  ALMA_TRY(alma__dm_check_dtype(n, x->dtype, "input"));
  int64_t *sizes = malloc(sizeof(int64_t) * SPLIT_MAX); /* room for any split input split_sizes accepts */
  if (!sizes) return alma__op_error(n, ALMA_ERR_NOMEM, "out of memory");
  int axis;
  alma_status st = split_sizes(n, in, nin, nout, &axis, sizes);
  if (st == ALMA_OK)
    for (int i = 0; i < nout; i++) {
      alma__set_shape(&out[i], x->dtype, x->rank, x->dims);
      out[i].dims[axis] = sizes[i];
    }
  free(sizes);
  return st;
}

static alma_status split_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                              alma_tensor *out, int nout) {
  (void)ctx; (void)nin;
  const alma_tensor *x = in[0];
  int64_t a = alma__attr_i(n, "axis", 0);
  int axis;
  ALMA_TRY(alma__norm_axis(a, x->rank, &axis));
  size_t esz = alma_dtype_size(x->dtype);
  int64_t outer = alma__numel(axis, x->dims);
  int64_t inner = alma__numel(x->rank - axis - 1, x->dims + axis + 1);
  const uint8_t *src = x->data;
  for (int64_t b = 0; b < outer; b++)
    for (int i = 0; i < nout; i++) {
      size_t chunk = (size_t)(out[i].dims[axis] * inner) * esz;
      if (out[i].data && chunk) memcpy((uint8_t *)out[i].data + (size_t)b * chunk, src, chunk);
      src += chunk;
    }
  return ALMA_OK;
}

const alma_op_def alma__op_Split = {.name = "Split", .flags = ALMA_OP_STRINGS | ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 2, 11, 13, 18},
                                    .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = -1,
                                    .infer = split_infer, .exec = split_exec};

/* ---- DepthToSpace / SpaceToDepth ---------------------------------------------------------- */

static alma_status block_params(const alma_node *n, const alma_tensor *x, int64_t *b) {
  ALMA_TRY(alma__dm_check_dtype(n, x->dtype, "input"));
  if (x->rank != 4) return alma__op_error(n, ALMA_ERR_SHAPE, "input must be 4-D (N,C,H,W), got rank %d", x->rank);
  if (!alma__node_attr(n, "blocksize")) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "missing attribute 'blocksize'");
  *b = alma__attr_i(n, "blocksize", 0);
  if (*b <= 0 || *b > (1 << 20))
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "blocksize %lld is invalid", (long long)*b);
  return ALMA_OK;
}

/* 1 for CRD, 0 for DCR (DepthToSpace has `mode` from opset 11, SpaceToDepth from 28). */
static alma_status d2s_mode(const alma_node *n, int *crd) {
  int since = !strcmp(n->op_type, "SpaceToDepth") ? 28 : 11;
  const char *m = n->since_version >= since ? alma__attr_s(n, "mode", "DCR") : "DCR";
  if (!strcmp(m, "DCR")) *crd = 0;
  else if (!strcmp(m, "CRD")) *crd = 1;
  else return alma__op_error(n, ALMA_ERR_INVALID_ARG, "mode '%s' (expected DCR or CRD)", m);
  return ALMA_OK;
}

static alma_status d2s_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  (void)nin; (void)nout;
  const alma_tensor *x = in[0];
  int64_t b;
  int crd;
  ALMA_TRY(block_params(n, x, &b));
  ALMA_TRY(d2s_mode(n, &crd));
  if (x->dims[1] % (b * b))
    return alma__op_error(n, ALMA_ERR_SHAPE, "channels %lld not divisible by blocksize^2 = %lld",
                          (long long)x->dims[1], (long long)(b * b));
  int64_t d[4] = {x->dims[0], x->dims[1] / (b * b), x->dims[2] * b, x->dims[3] * b};
  alma__set_shape(&out[0], x->dtype, 4, d);
  return ALMA_OK;
}

static alma_status d2s_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, int nout) {
  (void)ctx; (void)nin; (void)nout;
  const alma_tensor *x = in[0];
  int64_t b = alma__attr_i(n, "blocksize", 1);
  int crd;
  ALMA_TRY(d2s_mode(n, &crd));
  int64_t C = x->dims[1], H = x->dims[2], W = x->dims[3], Co = C / (b * b);
  /* Output viewed as [N, C', H, b(i), W, b(j)]: out[n,c',h*b+i,w*b+j] reads channel
   * (i*b+j)*C'+c' (DCR) or c'*b*b+i*b+j (CRD). */
  int64_t d[6] = {x->dims[0], Co, H, b, W, b};
  int64_t sc = H * W;
  int64_t st[6] = {C * sc, crd ? b * b * sc : sc, W, crd ? b * sc : b * Co * sc, 1, crd ? sc : Co * sc};
  alma__dm_strided_copy(out[0].data, x->data, alma_dtype_size(x->dtype), 6, d, st);
  return ALMA_OK;
}

const alma_op_def alma__op_DepthToSpace = {.name = "DepthToSpace", .domain = "", .versions = {1, 11, 13},
                                           .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                           .infer = d2s_infer, .exec = d2s_exec};

static alma_status s2d_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  (void)nin; (void)nout;
  const alma_tensor *x = in[0];
  int64_t b;
  int crd;
  ALMA_TRY(block_params(n, x, &b));
  ALMA_TRY(d2s_mode(n, &crd));
  if (x->dims[2] % b || x->dims[3] % b)
    return alma__op_error(n, ALMA_ERR_SHAPE, "spatial dims %lldx%lld not divisible by blocksize %lld",
                          (long long)x->dims[2], (long long)x->dims[3], (long long)b);
  int64_t d[4] = {x->dims[0], x->dims[1] * b * b, x->dims[2] / b, x->dims[3] / b};
  alma__set_shape(&out[0], x->dtype, 4, d);
  return ALMA_OK;
}

static alma_status s2d_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, int nout) {
  (void)ctx; (void)nin; (void)nout;
  const alma_tensor *x = in[0];
  int64_t b = alma__attr_i(n, "blocksize", 1);
  int crd;
  ALMA_TRY(d2s_mode(n, &crd));
  int64_t C = x->dims[1], H = x->dims[2], W = x->dims[3];
  /* Output viewed as [N, b(i), b(j), C, H/b, W/b] (DCR: out[n,(i*b+j)*C+c,h,w] = in[n,c,h*b+i,w*b+j])
   * or [N, C, b(i), b(j), H/b, W/b] (CRD: out[n,c*b*b+i*b+j,h,w]). */
  int64_t d[6] = {x->dims[0], b, b, C, H / b, W / b};
  int64_t st[6] = {C * H * W, W, 1, H * W, b * W, b};
  if (crd) {
    int64_t dc[6] = {x->dims[0], C, b, b, H / b, W / b}, sc[6] = {C * H * W, H * W, W, 1, b * W, b};
    memcpy(d, dc, sizeof d);
    memcpy(st, sc, sizeof st);
  }
  alma__dm_strided_copy(out[0].data, x->data, alma_dtype_size(x->dtype), 6, d, st);
  return ALMA_OK;
}

const alma_op_def alma__op_SpaceToDepth = {.name = "SpaceToDepth", .domain = "", .versions = {1, 13, 28},
                                           .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                           .infer = s2d_infer, .exec = s2d_exec};
