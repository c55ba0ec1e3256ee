/* Constant, ConstantOfShape and Range: operators that produce values from attributes or scalars. */
#include <math.h>

#include "ops/datamove.h"

/* ---- Constant ----------------------------------------------------------------------------- */

/* The one value attribute of a Constant node, or an error naming what is wrong. */
static alma_status constant_attr(const alma_node *n, const alma_attr **out) {
  static const char *const unsupported[] = {"sparse_value"};
  static const char *const names[] = {"value", "value_float", "value_floats", "value_int", "value_ints",
                                      "value_string", "value_strings"};
  for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
    if (alma__node_attr(n, unsupported[i]))
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "attribute '%s' is not supported", unsupported[i]);
  const alma_attr *found = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const alma_attr *a = alma__node_attr(n, names[i]);
    if (!a) continue;
    if (found)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "both '%s' and '%s' are given", found->name, a->name);
    found = a;
  }
  if (!found) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "no value attribute");
  static const alma_attr_type types[] = {ALMA_ATTR_TENSOR, ALMA_ATTR_FLOAT, ALMA_ATTR_FLOATS, ALMA_ATTR_INT,
                                         ALMA_ATTR_INTS, ALMA_ATTR_STRING, ALMA_ATTR_STRINGS};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(found->name, names[i]) && found->type != types[i])
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute '%s' has the wrong type (%d)", found->name,
                            (int)found->type);
  if ((found->type == ALMA_ATTR_FLOATS && found->n && !found->floats) ||
      (found->type == ALMA_ATTR_INTS && found->n && !found->ints))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute '%s' has no data", found->name);
  if (!strcmp(found->name, "value")) {
    if (!found->t) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute 'value' has no tensor");
    ALMA_TRY(alma__dm_check_dtype(n, found->t->dtype, "value"));
    if (!found->t->data && alma_tensor_numel(found->t) > 0)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute 'value' has no data");
  }
  *out = found;
  return ALMA_OK;
}

static alma_status constant_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                  int nout) {
  (void)in; (void)nin; (void)nout;
  const alma_attr *a;
  ALMA_TRY(constant_attr(n, &a));
  int64_t len = a->n;
  if (!strcmp(a->name, "value")) alma__set_shape(&out[0], a->t->dtype, a->t->rank, a->t->dims);
  else if (!strcmp(a->name, "value_float")) alma__set_shape(&out[0], ALMA_DTYPE_FLOAT32, 0, NULL);
  else if (!strcmp(a->name, "value_floats")) alma__set_shape(&out[0], ALMA_DTYPE_FLOAT32, 1, &len);
  else if (!strcmp(a->name, "value_int")) alma__set_shape(&out[0], ALMA_DTYPE_INT64, 0, NULL);
  else if (!strcmp(a->name, "value_string")) alma__set_shape(&out[0], ALMA_DTYPE_STRING, 0, NULL);
  else if (!strcmp(a->name, "value_strings")) alma__set_shape(&out[0], ALMA_DTYPE_STRING, 1, &len);
  else alma__set_shape(&out[0], ALMA_DTYPE_INT64, 1, &len);
  return ALMA_OK;
}

static alma_status constant_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                                 alma_tensor *out, int nout) {
  (void)ctx; (void)in; (void)nin; (void)nout;
  const alma_attr *a;
  ALMA_TRY(constant_attr(n, &a));
  if (!strcmp(a->name, "value")) {
    size_t bytes = (size_t)alma_tensor_numel(a->t) * alma_dtype_size(a->t->dtype);
    if (bytes) memcpy(out[0].data, a->t->data, bytes);
  } else if (!strcmp(a->name, "value_float")) {
    *(float *)out[0].data = a->f;
  } else if (!strcmp(a->name, "value_floats")) {
    if (a->n) memcpy(out[0].data, a->floats, sizeof(float) * (size_t)a->n);
  } else if (!strcmp(a->name, "value_int")) {
    *(int64_t *)out[0].data = a->i;
  } else if (!strcmp(a->name, "value_string")) {
    ALMA_TRY(alma__str_make(a->s ? a->s : "", a->s ? a->s_len : 0, alma__strs(&out[0])));
  } else if (!strcmp(a->name, "value_strings")) {
    for (int i = 0; i < a->n; i++) ALMA_TRY(alma__str_make(a->strings[i], strlen(a->strings[i]), alma__strs(&out[0]) + i));
  } else {
    if (a->n) memcpy(out[0].data, a->ints, sizeof(int64_t) * (size_t)a->n);
  }
  return ALMA_OK;
}

const alma_op_def alma__op_Constant = {.name = "Constant", .flags = ALMA_OP_STRINGS, .domain = "", .versions = {1, 9, 11, 12, 13, 19, 21},
                                       .min_inputs = 0, .max_inputs = 0, .min_outputs = 1, .max_outputs = 1,
                                       .infer = constant_infer, .exec = constant_exec};

/* ---- ConstantOfShape ---------------------------------------------------------------------- */

/* The fill value: the one-element tensor attribute `value`, or float32 0 by default. */
static alma_status cos_value(const alma_node *n, alma_dtype *dt, const void **data) {
  const alma_attr *a = alma__node_attr(n, "value");
  static const float zero = 0.0f;
  if (!a) {
    *dt = ALMA_DTYPE_FLOAT32;
    *data = &zero;
    return ALMA_OK;
  }
  if (a->type != ALMA_ATTR_TENSOR || !a->t)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute 'value' is not a tensor");
  ALMA_TRY(alma__dm_check_dtype(n, a->t->dtype, "value"));
  if (alma_tensor_numel(a->t) != 1 || !a->t->data)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute 'value' must hold exactly one element");
  *dt = a->t->dtype;
  *data = a->t->data;
  return ALMA_OK;
}

static alma_status cos_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                             int nout) {
  (void)nin; (void)nout;
  alma_dtype dt;
  const void *v;
  ALMA_TRY(cos_value(n, &dt, &v));
  int64_t d[ALMA_MAX_RANK];
  int cnt;
  ALMA_TRY(alma__dm_read_ints(n, in[0], "shape", d, ALMA_MAX_RANK, &cnt));
  for (int i = 0; i < cnt; i++)
    if (d[i] < 0) return alma__op_error(n, ALMA_ERR_SHAPE, "shape[%d] = %lld is negative", i, (long long)d[i]);
  alma__set_shape(&out[0], dt, cnt, d);
  return ALMA_OK;
}

static alma_status cos_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, int nout) {
  (void)ctx; (void)in; (void)nin; (void)nout;
  alma_dtype dt;
  const void *v;
  ALMA_TRY(cos_value(n, &dt, &v));
  size_t esz = alma_dtype_size(dt);
  int64_t cnt = alma_tensor_numel(&out[0]);
  uint8_t *o = out[0].data;
  for (int64_t i = 0; i < cnt; i++) memcpy(o + (size_t)i * esz, v, esz);
  return ALMA_OK;
}

const alma_op_def alma__op_ConstantOfShape = {.name = "ConstantOfShape", .domain = "", .versions = {9, 20, 21},
                                              .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                              .infer = cos_infer, .exec = cos_exec};

/* ---- Range -------------------------------------------------------------------------------- */

/* Largest Range output alma builds: beyond it the size is surely a mistake. */
#define RANGE_MAX ((int64_t)1 << 40)

static alma_status range_count(const alma_node *n, const alma_tensor *const *in, int nin, int64_t *count) {
  const char *names[3] = {"start", "limit", "delta"};
  for (int i = 0; i < 3; i++) {
    if (i >= nin || !in[i]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "missing input '%s'", names[i]);
    if (alma_tensor_numel(in[i]) != 1)
      return alma__op_error(n, ALMA_ERR_SHAPE, "'%s' must be a scalar", names[i]);
    if (in[i]->dtype != in[0]->dtype)
      return alma__op_error(n, ALMA_ERR_TYPE, "'%s' is %s, start is %s", names[i], alma_dtype_name(in[i]->dtype),
                            alma_dtype_name(in[0]->dtype));
  }
  alma_dtype dt = in[0]->dtype;
  if (!alma__dtype_is_float(dt) && !alma__dtype_is_int(dt))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "dtype %s", alma_dtype_name(dt));
  int64_t stash = alma__attr_i(n, "stash_type", 1);
  if (n->since_version >= 27 && stash != 1 && stash != 11)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "stash_type=%lld (expects 1 = float or 11 = double)",
                          (long long)stash);
  for (int i = 0; i < 3; i++)
    if (!in[i]->data) return alma__need_value();
  int64_t cnt;
  if (alma__dtype_is_float(dt)) {
    double s = alma__get_f64(in[0]->data, dt, 0), l = alma__get_f64(in[1]->data, dt, 0),
           d = alma__get_f64(in[2]->data, dt, 0);
    if (d == 0) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "delta is 0");
    double c = ceil((l - s) / d);
    if (!(c < (double)RANGE_MAX)) /* also catches NaN and infinities */
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "range %g to %g by %g has too many elements", s, l, d);
    cnt = c > 0 ? (int64_t)c : 0;
  } else if (dt == ALMA_DTYPE_UINT64) {
    uint64_t s = (uint64_t)alma__get_i64(in[0]->data, dt, 0), l = (uint64_t)alma__get_i64(in[1]->data, dt, 0),
             d = (uint64_t)alma__get_i64(in[2]->data, dt, 0);
    if (d == 0) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "delta is 0");
    uint64_t c = l > s ? (l - s - 1) / d + 1 : 0;
    if (c >= (uint64_t)RANGE_MAX) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "range has too many elements");
    cnt = (int64_t)c;
  } else {
    int64_t s = alma__get_i64(in[0]->data, dt, 0), l = alma__get_i64(in[1]->data, dt, 0),
            d = alma__get_i64(in[2]->data, dt, 0), diff;
    if (d == 0) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "delta is 0");
    if (__builtin_sub_overflow(l, s, &diff))
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "range has too many elements");
    /* ceil(diff / d) for d of either sign, without overflow */
    uint64_t c = 0;
    if (d > 0 && diff > 0) c = (uint64_t)(diff - 1) / (uint64_t)d + 1;
    else if (d < 0 && diff < 0) c = ((uint64_t)(-(diff + 1))) / ((uint64_t)(-(d + 1)) + 1) + 1;
    if (c >= (uint64_t)RANGE_MAX) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "range has too many elements");
    cnt = (int64_t)c;
  }
  *count = cnt;
  return ALMA_OK;
}

static alma_status range_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                               int nout) {
  (void)nout;
  int64_t cnt;
  ALMA_TRY(range_count(n, in, nin, &cnt));
  alma__set_shape(&out[0], in[0]->dtype, 1, &cnt);
  return ALMA_OK;
}

static alma_status range_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                              alma_tensor *out, int nout) {
  (void)ctx; (void)nout;
  int64_t cnt;
  ALMA_TRY(range_count(n, in, nin, &cnt));
  alma_dtype dt = in[0]->dtype;
  void *o = out[0].data;
  if (dt == ALMA_DTYPE_FLOAT32) {
    float s = *(const float *)in[0]->data, d = *(const float *)in[2]->data;
    for (int64_t i = 0; i < cnt; i++) ((float *)o)[i] = s + (float)i * d;
  } else if (alma__dtype_is_float(dt)) {
    double s = alma__get_f64(in[0]->data, dt, 0), d = alma__get_f64(in[2]->data, dt, 0);
    /* float16/bfloat16 (opset 27): the values are computed in stash_type, float32 by default */
    if (dt != ALMA_DTYPE_FLOAT64 && alma__attr_i(n, "stash_type", 1) == 1)
      for (int64_t i = 0; i < cnt; i++) alma__set_f64(o, dt, i, (float)s + (float)i * (float)d);
    else
      for (int64_t i = 0; i < cnt; i++) alma__set_f64(o, dt, i, s + (double)i * d);
  } else {
    /* wrap-around arithmetic in uint64 gives the right bits for every integer width */
    uint64_t s = (uint64_t)alma__get_i64(in[0]->data, dt, 0), d = (uint64_t)alma__get_i64(in[2]->data, dt, 0);
    for (int64_t i = 0; i < cnt; i++) alma__set_i64(o, dt, i, (int64_t)(s + (uint64_t)i * d));
  }
  return ALMA_OK;
}

/* 27 added float16/bfloat16 (alma takes them at 11 too) and stash_type, their compute type */
const alma_op_def alma__op_Range = {.name = "Range", .domain = "", .versions = {11, 27}, .min_inputs = 3,
                                    .max_inputs = 3, .min_outputs = 1, .max_outputs = 1, .infer = range_infer,
                                    .exec = range_exec};
