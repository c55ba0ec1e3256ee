/* Loss operators: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (log-softmax over the class
 * axis followed by the same gather-and-reduce). Training-time ops, so one double-precision kernel
 * serves every float dtype: inputs are read through float64 copies and results stored back.
 *
 * Shapes: input/scores (N, C, d1..dk), target/labels (N, d1..dk) int32/int64, optional weight (C).
 * reduction "none" gives the (N, d1..dk) losses, "sum" and "mean" a scalar; "mean" divides by the
 * sum of the weights applied to the samples not ignored (1 per sample without weights), as the
 * spec's formula and PyTorch do. */
#include <math.h>
#include <string.h>

#include "ops/nn_util.h"

enum { RED_NONE, RED_SUM, RED_MEAN };

typedef struct loss_cfg {
  int64_t N, C, D; /* D: product of d1..dk (1 when k = 0) */
  int reduction;
  int has_ii;
  int64_t ii;
} loss_cfg;

static alma_status loss_check(const alma_node *n, const alma_tensor *const *in, int nin, loss_cfg *cfg) {
  const alma_tensor *x = in[0], *t = in[1], *w = alma__nn_in(in, nin, 2);
  const char *red = alma__attr_s(n, "reduction", "mean");
  if (!strcmp(red, "none")) cfg->reduction = RED_NONE;
  else if (!strcmp(red, "sum")) cfg->reduction = RED_SUM;
  else if (!strcmp(red, "mean")) cfg->reduction = RED_MEAN;
  else return alma__op_error(n, ALMA_ERR_INVALID_ARG, "reduction '%s' (expects none, sum or mean)", red);
  const alma_attr *ia = alma__node_attr(n, "ignore_index");
  if (ia && ia->type != ALMA_ATTR_INT) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "ignore_index must be an int");
  cfg->has_ii = ia != NULL;
  cfg->ii = ia ? ia->i : 0;
  if (!alma__dtype_is_float(x->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s (expects a floating-point type)",
                          alma_dtype_name(x->dtype));
  if (t->dtype != ALMA_DTYPE_INT32 && t->dtype != ALMA_DTYPE_INT64)
    return alma__op_error(n, ALMA_ERR_TYPE, "target dtype %s (expects int32 or int64)", alma_dtype_name(t->dtype));
  if (x->rank < 2) return alma__op_error(n, ALMA_ERR_SHAPE, "input must have rank >= 2 (N, C, ...), got %d", x->rank);
  char b1[96], b2[96];
  int ok = t->rank == x->rank - 1 && t->dims[0] == x->dims[0];
  for (int k = 2; ok && k < x->rank; k++) ok = t->dims[k - 1] == x->dims[k];
  if (!ok)
    return alma__op_error(n, ALMA_ERR_SHAPE, "target shape %s does not match input %s (expects (N, d1..dk))",
                          alma__shape_str(t->rank, t->dims, b1, sizeof b1), alma__shape_str(x->rank, x->dims, b2, sizeof b2));
  cfg->N = x->dims[0];
  cfg->C = x->dims[1];
  cfg->D = alma__numel(x->rank - 2, x->dims + 2);
  if (w) {
    if (w->dtype != x->dtype)
      return alma__op_error(n, ALMA_ERR_TYPE, "weight dtype %s differs from the input's %s", alma_dtype_name(w->dtype),
                            alma_dtype_name(x->dtype));
    if (w->rank != 1 || w->dims[0] != cfg->C)
      return alma__op_error(n, ALMA_ERR_SHAPE, "weight shape %s (expects [C] = [%lld])",
                            alma__shape_str(w->rank, w->dims, b1, sizeof b1), (long long)cfg->C);
  }
  return ALMA_OK;
}

static void loss_out_shape(const loss_cfg *cfg, const alma_tensor *x, const alma_tensor *t, alma_tensor *out) {
  if (cfg->reduction == RED_NONE) alma__set_shape(out, x->dtype, t->rank, t->dims);
  else alma__set_shape(out, x->dtype, 0, NULL);
}

/* The gather-and-reduce shared by both ops: logp is (N, C, D) log-probabilities in double. */
static alma_status nll_core(const alma_node *n, const loss_cfg *cfg, const double *logp, const alma_tensor *target,
                            const alma_tensor *weight, alma_tensor *out) {
  int wo = 0;
  const double *w = weight ? alma__nn_as_f64(weight, &wo) : NULL;
  if (weight && !w) return ALMA_ERR_NOMEM;
  int64_t ns = cfg->N * cfg->D;
  double *loss = cfg->reduction == RED_NONE ? alma__nn_alloc(n, (size_t)(ns ? ns : 1), sizeof(double)) : NULL;
  alma_status st = ALMA_OK;
  if (cfg->reduction == RED_NONE && !loss) st = ALMA_ERR_NOMEM;
  double sum = 0.0, wsum = 0.0;
  for (int64_t i = 0; st == ALMA_OK && i < ns; i++) {
    int64_t c = alma__get_i64(target->data, target->dtype, i), b = i / cfg->D, d = i % cfg->D;
    double l = 0.0, wt = 0.0;
    if (!(cfg->has_ii && c == cfg->ii)) {
      if (c < 0 || c >= cfg->C) {
        st = alma__op_error(n, ALMA_ERR_INVALID_ARG, "target value %lld at element %lld is outside [0, %lld)%s",
                            (long long)c, (long long)i, (long long)cfg->C, cfg->has_ii ? " and not ignore_index" : "");
        break;
      }
      wt = w ? w[c] : 1.0;
      l = -logp[(b * cfg->C + c) * cfg->D + d] * wt;
    }
    if (loss) loss[i] = l;
    sum += l;
    wsum += wt;
  }
  if (st == ALMA_OK) {
    if (loss) alma__nn_store_f64(out, loss);
    else alma__set_f64(out->data, out->dtype, 0, cfg->reduction == RED_SUM ? sum : sum / wsum);
  }
  free(loss);
  if (wo) free((void *)w);
  return st;
}

/* ---- NegativeLogLikelihoodLoss ------------------------------------------------------------------ */
static alma_status nll_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  (void)nout;
  loss_cfg cfg;
  ALMA_TRY(loss_check(n, in, nin, &cfg));
  loss_out_shape(&cfg, in[0], in[1], &out[0]);
  return ALMA_OK;
}

static alma_status nll_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, int nout) {
  (void)ctx, (void)nout;
  loss_cfg cfg;
  ALMA_TRY(loss_check(n, in, nin, &cfg));
  int xo = 0;
  const double *x = alma__nn_as_f64(in[0], &xo);
  if (!x) return ALMA_ERR_NOMEM;
  alma_status st = nll_core(n, &cfg, x, in[1], alma__nn_in(in, nin, 2), &out[0]);
  if (xo) free((void *)x);
  return st;
}

/* bfloat16 joined the types at 22 (accepted throughout: the kernel is dtype-generic). */
const alma_op_def alma__op_NegativeLogLikelihoodLoss = {
    .name = "NegativeLogLikelihoodLoss", .domain = "", .versions = {12, 13, 22},
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .infer = nll_infer, .exec = nll_exec};

/* ---- SoftmaxCrossEntropyLoss -------------------------------------------------------------------- */
static alma_status sce_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  loss_cfg cfg;
  ALMA_TRY(loss_check(n, in, nin, &cfg));
  loss_out_shape(&cfg, in[0], in[1], &out[0]);
  if (nout > 1) alma__set_shape(&out[1], in[0]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

static alma_status sce_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, int nout) {
  (void)ctx;
  loss_cfg cfg;
  ALMA_TRY(loss_check(n, in, nin, &cfg));
  int xo = 0;
  const double *x = alma__nn_as_f64(in[0], &xo);
  if (!x) return ALMA_ERR_NOMEM;
  int64_t total = cfg.N * cfg.C * cfg.D;
  double *logp = alma__nn_alloc(n, (size_t)(total ? total : 1), sizeof(double));
  if (!logp) {
    if (xo) free((void *)x);
    return ALMA_ERR_NOMEM;
  }
  /* log_softmax over the class axis, max-shifted. */
  for (int64_t b = 0; b < cfg.N; b++)
    for (int64_t d = 0; d < cfg.D; d++) {
      const double *xr = x + b * cfg.C * cfg.D + d;
      double *lr = logp + b * cfg.C * cfg.D + d;
      double mx = -INFINITY, s = 0.0;
      for (int64_t c = 0; c < cfg.C; c++) mx = fmax(mx, xr[c * cfg.D]);
      for (int64_t c = 0; c < cfg.C; c++) s += exp(xr[c * cfg.D] - mx);
      double lse = mx + log(s);
      for (int64_t c = 0; c < cfg.C; c++) lr[c * cfg.D] = xr[c * cfg.D] - lse;
    }
  if (xo) free((void *)x);
  alma_status st = nll_core(n, &cfg, logp, in[1], alma__nn_in(in, nin, 2), &out[0]);
  if (st == ALMA_OK && alma__nn_out_wanted(n, nout, 1)) alma__nn_store_f64(&out[1], logp);
  free(logp);
  return st;
}

const alma_op_def alma__op_SoftmaxCrossEntropyLoss = {
    .name = "SoftmaxCrossEntropyLoss", .domain = "", .versions = {12, 13},
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 2,
    .infer = sce_infer, .exec = sce_exec};
