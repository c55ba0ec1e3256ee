/* The ai.onnx.ml linear and kernel models (version 1): LinearClassifier, LinearRegressor,
 * SVMClassifier and SVMRegressor. Scores are computed in double and stored as float (the outputs'
 * type). Label and score rules, including the binary special cases, follow onnx.reference (onnx
 * 1.23, reference/ops/aionnxml) step by step; the comments name where ONNX Runtime differs. Labels
 * are int64 (classlabels_ints) or strings (classlabels_strings: the class index the int form maps
 * through classlabels_ints picks the string). */
#include <math.h>

#include "ops/ml_common.h"
#include "ops/nn_util.h"
#include "ops/op_args.h"

/* a * b == c for counts (>= 0) without forming a * b: the factors come from the file. */
static int mul_is(int64_t a, int64_t b, int64_t c) { return b ? c % b == 0 && c / b == a : c == 0; }

/* X as a malloc'd row-major double copy [rows, feats]. */
static double *load_rows(const alma_node *n, const alma_tensor *x, int64_t rows, int64_t feats) {
  double *v = alma__nn_alloc(n, (size_t)(rows * feats > 0 ? rows * feats : 1), sizeof *v);
  if (v)
    for (int64_t i = 0; i < rows * feats; i++) v[i] = alma__get_f64(x->data, x->dtype, i);
  return v;
}

static void store_row(alma_tensor *z, int64_t r, int64_t cols, const double *s) {
  float *zp = (float *)z->data + r * cols;
  for (int64_t j = 0; j < cols; j++) zp[j] = (float)s[j];
}

/* ---- LinearClassifier: scores = X W^T + b (W: [C, F] from coefficients) -------------------------
 * With one row of coefficients and two class labels the scores become [-s, s] before the
 * transform (onnx.reference; ONNX Runtime writes [1 - s, s] untransformed for NONE and the
 * softmaxes). Labels: the argmax of the transformed scores, mapped through classlabels_ints; a
 * single score column compares with 0 (NONE) or 0.5 and gives classlabels_ints[0] or 0. */
typedef struct lc_args {
  int64_t rows, feats, C, nlab, nint, cols;
  const float *coef, *icpt;
  const int64_t *labels;
  alma_ml_labels lab;
  alma_ml_post pt;
} lc_args;

static alma_status lc_setup(const alma_node *n, const alma_tensor *x, lc_args *a) {
  ALMA_TRY(alma__ml_rows(n, x, &a->rows, &a->feats));
  ALMA_TRY(alma__ml_post_transform(n, &a->pt));
  ALMA_TRY(alma__ml_class_labels(n, "classlabels_ints", &a->lab));
  a->labels = a->lab.ints;
  a->nlab = a->lab.n;
  int64_t nc = alma__attr_floats(n, "coefficients", &a->coef);
  a->nint = alma__attr_floats(n, "intercepts", &a->icpt);
  if (!nc) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute coefficients is required");
  if (!a->feats || nc % a->feats)
    return alma__op_error(n, ALMA_ERR_SHAPE, "%lld coefficients do not split into rows of %lld features", (long long)nc,
                          (long long)a->feats);
  a->C = nc / a->feats;
  if (a->nint && a->nint != 1 && a->nint != a->C)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%lld intercepts for %lld classes", (long long)a->nint, (long long)a->C);
  a->cols = a->C == 1 && a->nlab == 2 ? 2 : a->C;
  if (a->lab.strs && a->cols == 1) /* onnx.reference fails on it, ONNX Runtime refuses it */
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "unsupported: one score column with %lld string class label(s) "
                          "(a string label for the negative side is not defined; two labels are expected)", (long long)a->nlab);
  if (a->cols > 1 && a->nlab && a->nlab < a->cols)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%lld class labels for %lld scores", (long long)a->nlab,
                          (long long)a->cols);
  return ALMA_OK;
}

static alma_status lc_infer(INFER_ARGS) {
  lc_args a;
  ALMA_TRY(lc_setup(n, in[0], &a));
  int64_t d[2] = {a.rows, a.cols};
  alma__set_shape(&out[0], alma__ml_label_dtype(&a.lab), 1, d);
  if (nout > 1) alma__set_shape(&out[1], ALMA_DTYPE_FLOAT32, 2, d);
  return ALMA_OK;
}

static alma_status lc_exec(EXEC_ARGS) {
  lc_args a;
  ALMA_TRY(lc_setup(n, in[0], &a));
  const alma__str **hs;
  ALMA_TRY(alma__ml_intern_labels(n, &a.lab, &hs));
  double *x = load_rows(n, in[0], a.rows, a.feats), s[2];
  double *sc = alma__nn_alloc(n, (size_t)a.cols, sizeof *sc);
  if (!x || !sc) {
    free(x);
    free(sc);
    free(hs);
    return ALMA_ERR_NOMEM;
  }
  int64_t *y = out[0].data;
  const alma__str **ys = (const alma__str **)out[0].data;
  for (int64_t r = 0; r < a.rows; r++) {
    const double *xr = x + r * a.feats;
    for (int64_t c = 0; c < a.C; c++) {
      double acc = a.nint ? a.icpt[a.nint == 1 ? 0 : c] : 0;
      for (int64_t f = 0; f < a.feats; f++) acc += xr[f] * a.coef[c * a.feats + f];
      sc[c] = acc;
    }
    if (a.cols == 2 && a.C == 1) {
      s[0] = sc[0];
      sc[0] = -s[0];
      sc[1] = s[0];
    }
    alma__ml_apply_post(a.pt, sc, a.cols);
    if (a.cols > 1) {
      int64_t best = alma__ml_argmax(sc, a.cols);
      if (hs) ys[r] = hs[best];
      else y[r] = a.nlab ? a.labels[best] : best;
    } else { /* one score column (int labels only: lc_setup): the first label or 0 */
      double th = a.pt == ALMA_ML_PT_NONE ? 0.0 : 0.5;
      y[r] = sc[0] >= th ? (a.nlab ? a.labels[0] : 1) : 0;
    }
    if (alma__nn_out_wanted(n, nout, 1)) store_row(&out[1], r, a.cols, sc);
  }
  free(x);
  free(sc);
  free(hs);
  return ALMA_OK;
}

const alma_op_def alma__op_MlLinearClassifier = {.name = "LinearClassifier", .domain = ALMA_ML_DOMAIN,
                                                 .versions = {1}, .flags = ALMA_OP_STRINGS, .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
                                                 .max_outputs = 2, .infer = lc_infer, .exec = lc_exec};

/* ---- LinearRegressor: Y = X W^T + b, W: [targets, F] -------------------------------------------
 * onnx.reference implements only post_transform NONE; the others follow ONNX Runtime, which
 * transforms each row of two or more targets and, for one target, applies only PROBIT. */
typedef struct lr_args {
  int64_t rows, feats, T, nint;
  const float *coef, *icpt;
  alma_ml_post pt;
} lr_args;

static alma_status lr_setup(const alma_node *n, const alma_tensor *x, lr_args *a) {
  ALMA_TRY(alma__ml_rows(n, x, &a->rows, &a->feats));
  ALMA_TRY(alma__ml_post_transform(n, &a->pt));
  a->T = alma__attr_i(n, "targets", 1);
  if (a->T < 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "targets %lld (>= 1 expected)", (long long)a->T);
  int64_t nc = alma__attr_floats(n, "coefficients", &a->coef);
  a->nint = alma__attr_floats(n, "intercepts", &a->icpt);
  /* compared by division: targets comes from the file and T * feats could overflow */
  if (!mul_is(a->T, a->feats, nc))
    return alma__op_error(n, ALMA_ERR_SHAPE, "%lld coefficients for %lld targets of %lld features", (long long)nc,
                          (long long)a->T, (long long)a->feats);
  if (a->nint && a->nint != 1 && a->nint != a->T)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%lld intercepts for %lld targets", (long long)a->nint, (long long)a->T);
  return ALMA_OK;
}

static alma_status lr_infer(INFER_ARGS) {
  lr_args a;
  ALMA_TRY(lr_setup(n, in[0], &a));
  int64_t d[2] = {a.rows, a.T};
  alma__set_shape(&out[0], ALMA_DTYPE_FLOAT32, 2, d);
  return ALMA_OK;
}

static alma_status lr_exec(EXEC_ARGS) {
  lr_args a;
  ALMA_TRY(lr_setup(n, in[0], &a));
  double *x = load_rows(n, in[0], a.rows, a.feats);
  double *sc = alma__nn_alloc(n, (size_t)a.T, sizeof *sc);
  if (!x || !sc) {
    free(x);
    free(sc);
    return ALMA_ERR_NOMEM;
  }
  alma_ml_post pt = a.T == 1 && a.pt != ALMA_ML_PT_PROBIT ? ALMA_ML_PT_NONE : a.pt;
  for (int64_t r = 0; r < a.rows; r++) {
    for (int64_t t = 0; t < a.T; t++) {
      double acc = a.nint ? a.icpt[a.nint == 1 ? 0 : t] : 0;
      for (int64_t f = 0; f < a.feats; f++) acc += x[r * a.feats + f] * a.coef[t * a.feats + f];
      sc[t] = acc;
    }
    alma__ml_apply_post(pt, sc, a.T);
    store_row(&out[0], r, a.T, sc);
  }
  free(x);
  free(sc);
  return ALMA_OK;
}

const alma_op_def alma__op_MlLinearRegressor = {.name = "LinearRegressor", .domain = ALMA_ML_DOMAIN,
                                                .versions = {1}, .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
                                                .max_outputs = 1, .infer = lr_infer, .exec = lr_exec};

/* ---- SVM kernels ------------------------------------------------------------------------------ */
enum { K_LINEAR, K_POLY, K_RBF, K_SIGMOID };

typedef struct svm_kernel {
  int type;
  double gamma, coef0;
  int64_t degree;
} svm_kernel;

static alma_status kernel_read(const alma_node *n, svm_kernel *k) {
  const char *s = alma__attr_s(n, "kernel_type", "LINEAR");
  if (!strcasecmp(s, "LINEAR")) k->type = K_LINEAR;
  else if (!strcasecmp(s, "POLY")) k->type = K_POLY;
  else if (!strcasecmp(s, "RBF")) k->type = K_RBF;
  else if (!strcasecmp(s, "SIGMOID")) k->type = K_SIGMOID;
  else return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "kernel_type '%s' (LINEAR, POLY, RBF or SIGMOID expected)", s);
  const float *p;
  int np = alma__attr_floats(n, "kernel_params", &p);
  if (np && np < 3)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "kernel_params has %d values (gamma, coef0, degree expected)", np);
  /* the degree is read as an integer (truncated, as onnx.reference's int() and ONNX Runtime do) */
  if (np && !(fabs(p[2]) < 1e9))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "kernel_params degree %g is not a usable integer", p[2]);
  k->gamma = np ? p[0] : 0;
  k->coef0 = np ? p[1] : 0;
  k->degree = np ? (int64_t)p[2] : 0;
  return ALMA_OK;
}

static double kernel_dot(const svm_kernel *k, const double *a, const float *b, int64_t f) {
  double s = 0;
  if (k->type == K_RBF) {
    for (int64_t i = 0; i < f; i++) s += (a[i] - b[i]) * (a[i] - b[i]);
    return exp(-k->gamma * s);
  }
  for (int64_t i = 0; i < f; i++) s += a[i] * b[i];
  if (k->type == K_POLY) return pow(s * k->gamma + k->coef0, (double)k->degree);
  if (k->type == K_SIGMOID) return tanh(s * k->gamma + k->coef0);
  return s;
}

/* ---- SVMRegressor: s = sum_j coef_j K(x, sv_j) + rho (n_supports > 0), else the linear
 * s = x . coefficients + rho; one_class gives +1 / -1. post_transform: NONE, or PROBIT (ONNX
 * Runtime; onnx.reference has only NONE). */
typedef struct svr_args {
  int64_t rows, feats, nsv;
  const float *coef, *sv, *rho;
  int one_class;
  svm_kernel k;
  alma_ml_post pt;
} svr_args;

static alma_status svr_setup(const alma_node *n, const alma_tensor *x, svr_args *a) {
  ALMA_TRY(alma__ml_rows(n, x, &a->rows, &a->feats));
  ALMA_TRY(alma__ml_post_transform(n, &a->pt));
  ALMA_TRY(kernel_read(n, &a->k));
  a->nsv = alma__attr_i(n, "n_supports", 0);
  a->one_class = alma__attr_i(n, "one_class", 0) != 0;
  int64_t nc = alma__attr_floats(n, "coefficients", &a->coef);
  int64_t ns = alma__attr_floats(n, "support_vectors", &a->sv);
  int64_t nr = alma__attr_floats(n, "rho", &a->rho);
  if (a->nsv < 0) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "n_supports %lld is negative", (long long)a->nsv);
  if (nr < 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute rho is required");
  if (a->nsv > 0 && (nc != a->nsv || !mul_is(a->nsv, a->feats, ns)))
    return alma__op_error(n, ALMA_ERR_SHAPE,
                          "%lld support vectors of %lld features: %lld support_vectors values and %lld coefficients given",
                          (long long)a->nsv, (long long)a->feats, (long long)ns, (long long)nc);
  if (a->nsv == 0 && nc != a->feats)
    return alma__op_error(n, ALMA_ERR_SHAPE, "linear SVM (n_supports 0): %lld coefficients for %lld features",
                          (long long)nc, (long long)a->feats);
  if (a->pt != ALMA_ML_PT_NONE && a->pt != ALMA_ML_PT_PROBIT)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "unsupported: post_transform %s on a single regression score",
                          alma__ml_post_name(a->pt));
  return ALMA_OK;
}

static alma_status svr_infer(INFER_ARGS) {
  svr_args a;
  ALMA_TRY(svr_setup(n, in[0], &a));
  int64_t d[2] = {a.rows, 1};
  alma__set_shape(&out[0], ALMA_DTYPE_FLOAT32, 2, d);
  return ALMA_OK;
}

static alma_status svr_exec(EXEC_ARGS) {
  svr_args a;
  ALMA_TRY(svr_setup(n, in[0], &a));
  double *x = load_rows(n, in[0], a.rows, a.feats);
  if (!x) return ALMA_ERR_NOMEM;
  svm_kernel lin = {K_LINEAR, 0, 0, 0};
  float *y = out[0].data;
  for (int64_t r = 0; r < a.rows; r++) {
    const double *xr = x + r * a.feats;
    double s = 0;
    if (a.nsv > 0)
      for (int64_t j = 0; j < a.nsv; j++) s += a.coef[j] * kernel_dot(&a.k, xr, a.sv + j * a.feats, a.feats);
    else
      s = kernel_dot(&lin, xr, a.coef, a.feats);
    s += a.rho[0];
    if (a.one_class) s = s > 0 ? 1 : -1;
    if (a.pt == ALMA_ML_PT_PROBIT) s = alma__ml_probit(s);
    y[r] = (float)s;
  }
  free(x);
  return ALMA_OK;
}

const alma_op_def alma__op_MlSVMRegressor = {.name = "SVMRegressor", .domain = ALMA_ML_DOMAIN, .versions = {1},
                                             .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                             .infer = svr_infer, .exec = svr_exec};

/* ---- SVMClassifier ----------------------------------------------------------------------------
 * SVC mode (vectors_per_class given): one-vs-one votes over the class pairs, scores are the pair
 * decision values, or with prob_a/prob_b the probabilities from libsvm's pairwise coupling. Linear
 * mode: one score per class. The label and the binary score forms follow onnx.reference's
 * set_score_svm / write_scores. */
typedef struct svc_args {
  int64_t rows, feats, nlab, ncls, nvec, npairs, nrho, nprob, raw, cols;
  const int64_t *labels, *vpc;
  alma_ml_labels lab;
  const float *coef, *sv, *rho, *pa, *pb;
  int64_t ncoef;
  int svc, all_pos, add2;
  svm_kernel k;
  alma_ml_post pt;
} svc_args;

static alma_status svc_setup(const alma_node *n, const alma_tensor *x, svc_args *a) {
  ALMA_TRY(alma__ml_rows(n, x, &a->rows, &a->feats));
  ALMA_TRY(alma__ml_post_transform(n, &a->pt));
  ALMA_TRY(kernel_read(n, &a->k));
  ALMA_TRY(alma__ml_class_labels(n, "classlabels_ints", &a->lab));
  a->labels = a->lab.ints;
  a->nlab = a->lab.n;
  if (a->nlab < 1)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute classlabels_ints or classlabels_strings is required");
  int64_t nvpc;
  ALMA_TRY(alma__ml_ints(n, "vectors_per_class", &a->vpc, &nvpc));
  a->ncoef = alma__attr_floats(n, "coefficients", &a->coef);
  int64_t nsv = alma__attr_floats(n, "support_vectors", &a->sv);
  a->nrho = alma__attr_floats(n, "rho", &a->rho);
  a->nprob = alma__attr_floats(n, "prob_a", &a->pa);
  int64_t npb = alma__attr_floats(n, "prob_b", &a->pb);
  a->ncls = a->nlab;
  a->nvec = 0;
  for (int64_t i = 0; i < nvpc; i++) {
    /* bounded by the support vectors given, so the sum cannot overflow */
    if (a->vpc[i] < 0 || a->vpc[i] > nsv)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "vectors_per_class[%lld] = %lld is out of range [0, %lld]",
                            (long long)i, (long long)a->vpc[i], (long long)nsv);
    a->nvec += a->vpc[i];
  }
  a->svc = a->nvec > 0;
  a->npairs = a->ncls * (a->ncls - 1) / 2;
  if (a->nrho < 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute rho is required");
  if (a->svc) {
    if (a->ncls < 2) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "an SVC needs two or more class labels");
    if (nvpc != a->ncls)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "vectors_per_class has %lld values for %lld classes",
                            (long long)nvpc, (long long)a->ncls);
    if (!mul_is(a->nvec, a->feats, nsv))
      return alma__op_error(n, ALMA_ERR_SHAPE, "%lld support_vectors values for %lld vectors of %lld features",
                            (long long)nsv, (long long)a->nvec, (long long)a->feats);
    if (!mul_is(a->ncls - 1, a->nvec, a->ncoef))
      return alma__op_error(n, ALMA_ERR_SHAPE, "%lld coefficients for %lld classes and %lld vectors ((classes - 1) x vectors expected)",
                            (long long)a->ncoef, (long long)a->ncls, (long long)a->nvec);
    if (a->nrho < a->npairs)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%lld rho values for %lld class pairs", (long long)a->nrho,
                            (long long)a->npairs);
    if (a->nprob && (a->nprob < a->npairs || npb < a->npairs))
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "prob_a (%lld) and prob_b (%lld) need one value per class pair (%lld)",
                            (long long)a->nprob, (long long)npb, (long long)a->npairs);
  } else if (!mul_is(a->ncls, a->feats, a->ncoef)) {
    return alma__op_error(n, ALMA_ERR_SHAPE, "linear SVM: %lld coefficients for %lld classes of %lld features",
                          (long long)a->ncoef, (long long)a->ncls, (long long)a->feats);
  }
  a->all_pos = 1;
  for (int64_t i = 0; i < a->ncoef; i++)
    if (!(a->coef[i] >= 0)) a->all_pos = 0;
  a->raw = !a->svc || a->nprob ? a->ncls : a->npairs;
  /* one raw score: binary forms of write_scores (add_second_class 2 when rho has one value and
   * there are two labels, else none) */
  a->add2 = a->nrho == 1 && a->nlab == 2;
  a->cols = a->raw >= 2 ? a->raw : (a->pt != ALMA_ML_PT_PROBIT && a->add2 ? 2 : 1);
  return ALMA_OK;
}

static alma_status svc_infer(INFER_ARGS) {
  svc_args a;
  ALMA_TRY(svc_setup(n, in[0], &a));
  int64_t d[2] = {a.rows, a.cols};
  alma__set_shape(&out[0], alma__ml_label_dtype(&a.lab), 1, d);
  if (nout > 1) alma__set_shape(&out[1], ALMA_DTYPE_FLOAT32, 2, d);
  return ALMA_OK;
}

/* libsvm's multiclass_probability (pairwise coupling, Wu, Lin and Weng 2004): p from the pairwise
 * probabilities r[i][j] (k x k). Q[t][j] = -r[j][t] r[t][j] as libsvm and ONNX Runtime compute it
 * (onnx.reference's vectorized form writes a dot product there instead). */
static void multiclass_probability(int64_t k, const double *r, double *p, double *Q, double *Qp) {
  double eps = 0.005 / (double)k;
  for (int64_t t = 0; t < k; t++) {
    p[t] = 1.0 / (double)k;
    Q[t * k + t] = 0;
    for (int64_t j = 0; j < t; j++) {
      Q[t * k + t] += r[j * k + t] * r[j * k + t];
      Q[t * k + j] = Q[j * k + t];
    }
    for (int64_t j = t + 1; j < k; j++) {
      Q[t * k + t] += r[j * k + t] * r[j * k + t];
      Q[t * k + j] = -r[j * k + t] * r[t * k + j];
    }
  }
  int64_t iters = k > 100 ? k : 100;
  for (int64_t it = 0; it < iters; it++) {
    double pQp = 0, max_err = 0;
    for (int64_t t = 0; t < k; t++) {
      Qp[t] = 0;
      for (int64_t j = 0; j < k; j++) Qp[t] += Q[t * k + j] * p[j];
      pQp += p[t] * Qp[t];
    }
    for (int64_t t = 0; t < k; t++) {
      double e = fabs(Qp[t] - pQp);
      max_err = e > max_err ? e : max_err;
    }
    if (max_err < eps) break;
    for (int64_t t = 0; t < k; t++) {
      double diff = (-Qp[t] + pQp) / Q[t * k + t];
      p[t] += diff;
      pQp = (pQp + diff * (diff * Q[t * k + t] + 2 * Qp[t])) / (1 + diff) / (1 + diff);
      for (int64_t j = 0; j < k; j++) {
        Qp[j] = (Qp[j] + diff * Q[t * k + j]) / (1 + diff);
        p[j] /= (1 + diff);
      }
    }
  }
}

static alma_status svc_exec(EXEC_ARGS) {
  svc_args a;
  ALMA_TRY(svc_setup(n, in[0], &a));
  int64_t K = a.ncls;
  /* scratch: kernels [nvec], votes [K], scores [max(K, npairs) + 2], r/Q [K*K] each, Qp [K] */
  int64_t ns = (K > a.npairs ? K : a.npairs) + 2;
  size_t total = (size_t)(a.nvec + K + ns + 2 * K * K + K);
  const alma__str **hs;
  ALMA_TRY(alma__ml_intern_labels(n, &a.lab, &hs));
  double *x = load_rows(n, in[0], a.rows, a.feats), *buf = alma__nn_alloc(n, total, sizeof(double));
  if (!x || !buf) {
    free(x);
    free(buf);
    free(hs);
    return ALMA_ERR_NOMEM;
  }
  double *kern = buf, *votes = kern + a.nvec, *sc = votes + K, *R = sc + ns, *Q = R + K * K, *Qp = Q + K * K;
  svm_kernel lin = {K_LINEAR, 0, 0, 0};
  int64_t *y = out[0].data;
  for (int64_t r = 0; r < a.rows; r++) {
    const double *xr = x + r * a.feats;
    int64_t nsc;
    if (!a.svc) {
      for (int64_t c = 0; c < K; c++) sc[c] = a.rho[0] + kernel_dot(&lin, xr, a.coef + c * a.feats, a.feats);
      nsc = K;
    } else {
      for (int64_t j = 0; j < a.nvec; j++) kern[j] = kernel_dot(&a.k, xr, a.sv + j * a.feats, a.feats);
      for (int64_t c = 0; c < K; c++) votes[c] = 0;
      int64_t e = 0, si = 0;
      for (int64_t i = 0; i < K; i++) {
        int64_t sj = si + a.vpc[i];
        for (int64_t j = i + 1; j < K; j++) {
          double s1 = 0, s2 = 0;
          for (int64_t v = 0; v < a.vpc[i]; v++) s1 += a.coef[(j - 1) * a.nvec + si + v] * kern[si + v];
          for (int64_t v = 0; v < a.vpc[j]; v++) s2 += a.coef[i * a.nvec + sj + v] * kern[sj + v];
          double s = a.rho[e] + s1 + s2;
          sc[e++] = s;
          votes[s > 0 ? i : j] += 1;
          sj += a.vpc[j];
        }
        si += a.vpc[i];
      }
      nsc = a.npairs;
      if (a.nprob) { /* pairwise probabilities, clipped away from 0 and 1, then coupled */
        int64_t idx = 0;
        for (int64_t i = 0; i < K; i++)
          for (int64_t j = i + 1; j < K; j++, idx++) {
            double v = 1.0 - alma__ml_logistic(sc[idx] * a.pa[idx] + a.pb[idx]);
            v = v < 1e-7 ? 1e-7 : v > 1 - 1e-7 ? 1 - 1e-7 : v;
            R[i * K + j] = v;
            R[j * K + i] = 1 - v;
          }
        multiclass_probability(K, R, sc, Q, Qp);
        nsc = K;
      }
    }
    int64_t best;
    double best_w;
    if (a.svc) best = alma__ml_argmax(votes, K), best_w = votes[best];
    else best = alma__ml_argmax(sc, nsc), best_w = sc[best];
    /* the label as a class index (ci >= 0) or, for set_score_svm's posclass/negclass, the value */
    int64_t ci = -1, label = 0;
    if (a.nrho == 1) { /* set_score_svm */
      if (a.nlab == 2)
        ci = !a.nprob && a.all_pos && best_w >= 0.5 ? 1 : best;
      else
        label = best_w > 0 ? 1 : 0;
    } else {
      ci = best;
    }
    if (hs) /* posclass/negclass: the class of that index when there is one, else "" */
      ((const alma__str **)out[0].data)[r] = ci >= 0 ? hs[ci] : label < a.nlab ? hs[label] : NULL;
    else
      y[r] = ci >= 0 ? a.labels[ci] : label;
    if (nsc >= 2) {
      alma__ml_apply_post(a.pt, sc, nsc);
    } else if (a.pt == ALMA_ML_PT_PROBIT) {
      sc[0] = alma__ml_probit(sc[0]);
    } else if (a.add2) {
      double s = sc[0];
      sc[0] = -s;
      sc[1] = s;
      if (a.pt == ALMA_ML_PT_LOGISTIC) sc[0] = alma__ml_logistic(-s), sc[1] = alma__ml_logistic(s);
      else alma__ml_apply_post(a.pt, sc, 2);
    }
    if (alma__nn_out_wanted(n, nout, 1)) store_row(&out[1], r, a.cols, sc);
  }
  free(x);
  free(buf);
  free(hs);
  return ALMA_OK;
}

const alma_op_def alma__op_MlSVMClassifier = {.name = "SVMClassifier", .domain = ALMA_ML_DOMAIN, .versions = {1},
                                              .flags = ALMA_OP_STRINGS,
                                              .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 2,
                                              .infer = svc_infer, .exec = svc_exec};
