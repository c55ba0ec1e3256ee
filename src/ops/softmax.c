/* Softmax and LogSoftmax. Before opset 13 the input is coerced to 2-D at `axis` (default 1) and
 * the op runs over each row of prod(dims[axis:]) elements; from 13 it runs along `axis` alone
 * (default -1). Both reduce to [outer, n, inner] with the reduction over n. Max-subtracted for
 * stability; float32 computes in float (vectorised expf down a strided axis), the other float types
 * in double. */
#include <math.h>

#include "ops/nn_util.h"
#include "ops/softmax_row.h"

typedef struct sm_shape {
  int64_t outer, n, inner;
} sm_shape;

static alma_status sm_setup(const alma_node *n, const alma_tensor *x, sm_shape *ss) {
  if (!x) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "the input is required");
  if (!alma__dtype_is_float(x->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  int legacy = n->since_version < 13;
  if (x->rank < 1) return alma__op_error(n, ALMA_ERR_SHAPE, "input must have rank >= 1");
  int axis;
  alma_status st = alma__norm_axis(alma__attr_i(n, "axis", legacy ? 1 : -1), x->rank, &axis);
  if (st != ALMA_OK) return alma__error_prefix(st, "node '%s' (%s): ", n->name, n->op_type);
  ss->outer = alma__numel(axis, x->dims);
  if (legacy) {
    ss->n = alma__numel(x->rank - axis, x->dims + axis);
    ss->inner = 1;
  } else {
    ss->n = x->dims[axis];
    ss->inner = alma__numel(x->rank - axis - 1, x->dims + axis + 1);
  }
  return ALMA_OK;
}

static alma_status sm_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  sm_shape ss;
  ALMA_TRY(sm_setup(n, in[0], &ss));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

/* Contiguous rows (inner == 1), float32: the hot case of attention scores and classifiers. */
static void sm_rows_f32(const float *x, float *y, int64_t rows, int64_t n, int is_log) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * n;
    float *yr = y + r * n;
    float m = -INFINITY;
    for (int64_t j = 0; j < n; j++) m = xr[j] > m ? xr[j] : m;
    if (m == -INFINITY) m = 0; /* all -inf: exp gives 0s and the division NaNs, as the reference */
    double sum = 0; /* double: rows can be long (vocabularies) */
    if (is_log) {
      for (int64_t j = 0; j < n; j++) sum += expf(xr[j] - m);
      float ls = (float)log(sum);
      for (int64_t j = 0; j < n; j++) yr[j] = xr[j] - m - ls;
    } else {
      for (int64_t j = 0; j < n; j++) sum += (yr[j] = expf(xr[j] - m));
      float inv = (float)(1.0 / sum);
      for (int64_t j = 0; j < n; j++) yr[j] *= inv;
    }
  }
}

static alma_status sm_run(const alma_node *n, const alma_tensor *const *in, alma_tensor *out, int is_log) {
  sm_shape ss;
  ALMA_TRY(sm_setup(n, in[0], &ss));
  const alma_tensor *x = in[0];
  if (x->dtype == ALMA_DTYPE_FLOAT32 && ss.inner == 1) {
    sm_rows_f32(x->data, out[0].data, ss.outer, ss.n, is_log);
    return ALMA_OK;
  }
  if (x->dtype == ALMA_DTYPE_FLOAT32) { /* strided: vectorised across inner, one [n, inner] block at a time */
    float *buf = alma__nn_alloc(n, (size_t)(2 * ss.inner + 1), sizeof *buf);
    if (!buf) return ALMA_ERR_NOMEM;
    for (int64_t o = 0; o < ss.outer; o++)
      alma__softmax_cols((const float *)x->data + o * ss.n * ss.inner, (float *)out[0].data + o * ss.n * ss.inner,
                         ss.n, ss.inner, is_log, buf, buf + ss.inner);
    free(buf);
    return ALMA_OK;
  }
  /* other dtypes, in double: per outer block, column-wise max and sums */
  double *buf = alma__nn_alloc(n, (size_t)(2 * (ss.inner ? ss.inner : 1)), sizeof *buf);
  if (!buf) return ALMA_ERR_NOMEM;
  double *mx = buf, *sum = buf + ss.inner;
  for (int64_t o = 0; o < ss.outer; o++) {
    int64_t base = o * ss.n * ss.inner;
    for (int64_t i = 0; i < ss.inner; i++) mx[i] = -INFINITY, sum[i] = 0;
    for (int64_t j = 0; j < ss.n; j++)
      for (int64_t i = 0; i < ss.inner; i++) {
        double v = alma__get_f64(x->data, x->dtype, base + j * ss.inner + i);
        if (v > mx[i]) mx[i] = v;
      }
    for (int64_t i = 0; i < ss.inner; i++)
      if (mx[i] == -INFINITY) mx[i] = 0;
    for (int64_t j = 0; j < ss.n; j++)
      for (int64_t i = 0; i < ss.inner; i++)
        sum[i] += exp(alma__get_f64(x->data, x->dtype, base + j * ss.inner + i) - mx[i]);
    for (int64_t j = 0; j < ss.n; j++)
      for (int64_t i = 0; i < ss.inner; i++) {
        int64_t k = base + j * ss.inner + i;
        double d = alma__get_f64(x->data, x->dtype, k) - mx[i];
        alma__set_f64(out[0].data, out[0].dtype, k, is_log ? d - log(sum[i]) : exp(d) / sum[i]);
      }
  }
  free(buf);
  return ALMA_OK;
}

static alma_status softmax_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                                alma_tensor *out, int nout) {
  return sm_run(n, in, out, 0);
}
static alma_status logsoftmax_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                                   alma_tensor *out, int nout) {
  return sm_run(n, in, out, 1);
}

static void sm_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                    int64_t *macs, int64_t *flops) {
  *macs = 0;
  *flops = nin > 0 && in[0] ? 4 * alma_tensor_numel(in[0]) : -1; /* max, exp, sum, scale */
}

const alma_op_def alma__op_Softmax = {.name = "Softmax", .flags = ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 11, 13},
                                      .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                      .infer = sm_infer, .exec = softmax_exec, .cost = sm_cost};

const alma_op_def alma__op_LogSoftmax = {.name = "LogSoftmax", .flags = ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 11, 13},
                                         .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                         .infer = sm_infer, .exec = logsoftmax_exec, .cost = sm_cost};
