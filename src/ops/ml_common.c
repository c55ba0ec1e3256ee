/* Shared pieces of the ai.onnx.ml operators (see ml_common.h). */
#include "ops/ml_common.h"
#include "ops/nn_util.h"

#include <math.h>

static const char *const post_names[] = {"NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"};

const char *alma__ml_post_name(alma_ml_post pt) {
  return (unsigned)pt < sizeof post_names / sizeof post_names[0] ? post_names[pt] : "?";
}

alma_status alma__ml_post_transform(const alma_node *n, alma_ml_post *pt) {
  const alma_attr *a = alma__node_attr(n, "post_transform");
  *pt = ALMA_ML_PT_NONE;
  if (!a) return ALMA_OK;
  if (a->type != ALMA_ATTR_STRING)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute post_transform must be a string");
  for (int k = 0; k < 5; k++)
    if (!strcmp(a->s, post_names[k])) {
      *pt = (alma_ml_post)k;
      return ALMA_OK;
    }
  return alma__op_error(n, ALMA_ERR_INVALID_MODEL,
                        "post_transform '%s' (NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO or PROBIT expected)", a->s);
}

double alma__ml_logistic(double v) {
  /* exp of a non-positive number only: no overflow for large |v| */
  double e = 1.0 / (1.0 + exp(-fabs(v)));
  return v < 0 ? 1.0 - e : e;
}

/* Winitzki's approximation of erf^-1 (a = 0.147), the one ONNX's reference and ONNX Runtime use:
 * PROBIT scores must match theirs, not the exact inverse. */
static double erf_inv(double x) {
  double sgn = x < 0 ? -1.0 : 1.0;
  x = (1.0 - x) * (1.0 + x);
  if (x == 0) return 0;
  double lg = log(x);
  double v = 2.0 / (M_PI * 0.147) + 0.5 * lg;
  double v2 = 1.0 / 0.147 * lg;
  return sgn * sqrt(-v + sqrt(v * v - v2));
}

double alma__ml_probit(double v) { return 1.41421356 * erf_inv(v * 2 - 1); }

void alma__ml_softmax(double *v, int64_t k) {
  if (k <= 0) return;
  double m = v[0], s = 0;
  for (int64_t i = 1; i < k; i++) m = v[i] > m ? v[i] : m;
  for (int64_t i = 0; i < k; i++) s += (v[i] = exp(v[i] - m));
  for (int64_t i = 0; i < k; i++) v[i] /= s;
}

/* SOFTMAX_ZERO leaves (near-)zero scores near zero: they are scaled by exp(-max) instead of being
 * exponentiated; a row whose sum is zero becomes 0.5 everywhere (onnx.reference). */
void alma__ml_softmax_zero(double *v, int64_t k) {
  if (k <= 0) return;
  double m = v[0], s = 0;
  for (int64_t i = 1; i < k; i++) m = v[i] > m ? v[i] : m;
  double e = exp(-m);
  for (int64_t i = 0; i < k; i++) {
    v[i] = (v[i] > 1e-7 || v[i] < -1e-7) ? exp(v[i] - m) : v[i] * e;
    s += v[i];
  }
  for (int64_t i = 0; i < k; i++) v[i] = s == 0 ? 0.5 : v[i] / s;
}

void alma__ml_apply_post(alma_ml_post pt, double *v, int64_t k) {
  switch (pt) {
    case ALMA_ML_PT_LOGISTIC:
      for (int64_t i = 0; i < k; i++) v[i] = alma__ml_logistic(v[i]);
      break;
    case ALMA_ML_PT_PROBIT:
      for (int64_t i = 0; i < k; i++) v[i] = alma__ml_probit(v[i]);
      break;
    case ALMA_ML_PT_SOFTMAX: alma__ml_softmax(v, k); break;
    case ALMA_ML_PT_SOFTMAX_ZERO: alma__ml_softmax_zero(v, k); break;
    case ALMA_ML_PT_NONE: break;
  }
}

int64_t alma__ml_argmax(const double *v, int64_t k) {
  int64_t b = 0;
  for (int64_t i = 0; i < k; i++) {
    if (isnan(v[i])) return i;
    if (v[i] > v[b]) b = i;
  }
  return b;
}

int alma__ml_numeric(alma_dtype t) {
  return t == ALMA_DTYPE_FLOAT32 || t == ALMA_DTYPE_FLOAT64 || t == ALMA_DTYPE_INT32 || t == ALMA_DTYPE_INT64;
}

alma_status alma__ml_rows(const alma_node *n, const alma_tensor *x, int64_t *rows, int64_t *feats) {
  if (!alma__ml_numeric(x->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "unsupported: input dtype %s (float, double, int32 or int64 expected)",
                          alma_dtype_name(x->dtype));
  if (x->rank == 1) {
    *rows = 1;
    *feats = x->dims[0];
  } else if (x->rank == 2) {
    *rows = x->dims[0];
    *feats = x->dims[1];
  } else {
    char s[128];
    return alma__op_error(n, ALMA_ERR_SHAPE, "input of shape %s: [N, F] or [F] expected",
                          alma__shape_str(x->rank, x->dims, s, sizeof s));
  }
  return ALMA_OK;
}

static int numeric_tensor_dtype(alma_dtype t) {
  return alma__dtype_is_float(t) || alma__dtype_is_int(t);
}

alma_status alma__ml_tensor_attr(const alma_node *n, const char *name, alma_ml_list *out) {
  memset(out, 0, sizeof *out);
  const alma_attr *a = alma__node_attr(n, name);
  if (!a) return ALMA_OK;
  if (a->type != ALMA_ATTR_TENSOR || !a->t)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute %s must be a tensor", name);
  if (!numeric_tensor_dtype(a->t->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "unsupported: attribute %s holds %s values (numbers expected)",
                          name, alma_dtype_name(a->t->dtype));
  out->t = a->t;
  out->n = alma_tensor_numel(a->t);
  return ALMA_OK;
}

alma_status alma__ml_floats_or_tensor(const alma_node *n, const char *name, alma_ml_list *out) {
  char tname[96];
  snprintf(tname, sizeof tname, "%s_as_tensor", name);
  const alma_attr *a = alma__node_attr(n, name);
  ALMA_TRY(alma__ml_tensor_attr(n, tname, out));
  if (a) {
    if (out->t)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attributes %s and %s are both given (one is expected)", name,
                            tname);
    if (a->type != ALMA_ATTR_FLOATS)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute %s must be a list of floats", name);
    out->f = a->floats;
    out->n = a->n;
  }
  return ALMA_OK;
}

alma_status alma__ml_ints(const alma_node *n, const char *name, const int64_t **v, int64_t *count) {
  const alma_attr *a = alma__node_attr(n, name);
  *v = NULL;
  *count = 0;
  if (!a) return ALMA_OK;
  if (a->type != ALMA_ATTR_INTS)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute %s must be a list of ints", name);
  *v = a->ints;
  *count = a->n;
  return ALMA_OK;
}

alma_status alma__ml_class_labels(const alma_node *n, const char *ints_name, alma_ml_labels *out) {
  memset(out, 0, sizeof *out);
  int64_t ni;
  ALMA_TRY(alma__ml_ints(n, ints_name, &out->ints, &ni));
  const alma_attr *a = alma__node_attr(n, "classlabels_strings");
  int64_t ns = 0;
  if (a) {
    if (a->type != ALMA_ATTR_STRINGS && !(a->n == 0 && (a->type == ALMA_ATTR_INTS || a->type == ALMA_ATTR_FLOATS)))
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute classlabels_strings must be a list of strings");
    ns = a->n;
  }
  if (ni && ns)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attributes %s and classlabels_strings are both given (one is expected)",
                          ints_name);
  if (ns) {
    out->ints = NULL;
    out->strs = (const char *const *)a->strings;
    out->n = ns;
  } else {
    out->n = ni;
    if (!ni) out->ints = NULL;
  }
  return ALMA_OK;
}

alma_status alma__ml_intern_labels(const alma_node *n, const alma_ml_labels *l, const alma__str ***out) {
  *out = NULL;
  if (!l->strs) return ALMA_OK;
  const alma__str **h = alma__nn_alloc(n, (size_t)(l->n > 0 ? l->n : 1), sizeof *h);
  if (!h) return ALMA_ERR_NOMEM;
  for (int64_t k = 0; k < l->n; k++) {
    alma_status st = alma__str_make(l->strs[k], strlen(l->strs[k]), &h[k]);
    if (st != ALMA_OK) {
      free(h);
      return st;
    }
  }
  *out = h;
  return ALMA_OK;
}
