/* The ai.onnx.ml preprocessing operators (version 1 unless noted): ArrayFeatureExtractor,
 * Binarizer, Normalizer, Scaler, Imputer, OneHotEncoder, LabelEncoder (1, 2, 4) and
 * FeatureVectorizer. Behaviour follows the ONNX-ML spec, and onnx.reference (onnx 1.23,
 * reference/ops/aionnxml) where the spec leaves it open; where the two disagree the spec wins and
 * the comment says so. LabelEncoder (keys and values), OneHotEncoder (cats_strings) and
 * ArrayFeatureExtractor take string tensors (core.h's string handles). */
#include <math.h>

#include "ops/ml_common.h"
#include "ops/nn_util.h"
#include "ops/op_args.h"

/* ---- sorted key -> index lookup (OneHotEncoder categories, LabelEncoder keys) ------------------
 * Keys compare as doubles: int64 keys beyond 2^53 would collide, so integer keys are kept as
 * int64 and float keys as double, never mixed in one table. A key given twice maps to its last
 * position (onnx.reference builds a dict, where the last entry wins). */
typedef struct ml_key {
  int64_t ik;
  double fk;
  int64_t idx;
} ml_key;

typedef struct ml_table {
  ml_key *keys;
  int64_t n;
  int is_float;
  int64_t nan_idx; /* float tables: the position of the last NaN key, -1 if none */
} ml_table;

static int key_cmp(const void *pa, const void *pb) {
  const ml_key *a = pa, *b = pb;
  if (a->ik != b->ik) return a->ik < b->ik ? -1 : 1;
  if (a->fk != b->fk) return a->fk < b->fk ? -1 : 1;
  return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* keys[k] for k in [0, n) from ints (is_float 0) or a list of numbers (is_float 1). */
static alma_status table_build(const alma_node *n, const int64_t *ints, const alma_ml_list *nums, int64_t count,
                               int is_float, ml_table *t) {
  memset(t, 0, sizeof *t);
  t->is_float = is_float;
  t->nan_idx = -1;
  t->keys = alma__nn_alloc(n, (size_t)(count ? count : 1), sizeof *t->keys);
  if (!t->keys) return ALMA_ERR_NOMEM;
  for (int64_t k = 0; k < count; k++) {
    ml_key key = {0, 0, k};
    if (!is_float) key.ik = ints ? ints[k] : alma__get_i64(nums->t->data, nums->t->dtype, k);
    else {
      key.fk = alma__ml_at(nums, k);
      if (isnan(key.fk)) { /* NaN keys match any NaN input (LabelEncoder-4) */
        t->nan_idx = k;
        continue;
      }
    }
    t->keys[t->n++] = key;
  }
  qsort(t->keys, (size_t)t->n, sizeof *t->keys, key_cmp);
  return ALMA_OK;
}

/* Position of the key equal to v (the last one given among equal keys), or -1. */
static int64_t table_find_i(const ml_table *t, int64_t v) {
  int64_t lo = 0, hi = t->n; /* first key > v */
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (t->keys[mid].ik <= v) lo = mid + 1;
    else hi = mid;
  }
  return lo > 0 && t->keys[lo - 1].ik == v ? t->keys[lo - 1].idx : -1;
}

static int64_t table_find_f(const ml_table *t, double v) {
  if (isnan(v)) return t->nan_idx;
  int64_t lo = 0, hi = t->n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (t->keys[mid].fk <= v) lo = mid + 1;
    else hi = mid;
  }
  return lo > 0 && t->keys[lo - 1].fk == v ? t->keys[lo - 1].idx : -1;
}

static alma_status need_numeric(const alma_node *n, const alma_tensor *x, const char *what) {
  if (alma__ml_numeric(x->dtype)) return ALMA_OK;
  if (x->dtype == ALMA_DTYPE_STRING)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "unsupported: string %s (alma has no string tensors)", what);
  return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%s dtype %s (float, double, int32 or int64 expected)", what,
                        alma_dtype_name(x->dtype));
}

/* ---- ArrayFeatureExtractor: Z = X[..., Y] ------------------------------------------------------
 * A 1-D X gives [1, len(Y)] (ONNX Runtime and onnx.reference agree); otherwise the last dim is
 * replaced by the number of indices. */
static alma_status afe_infer(INFER_ARGS) {
  const alma_tensor *x = in[0], *y = in[1];
  if (x->dtype != ALMA_DTYPE_STRING) ALMA_TRY(need_numeric(n, x, "input X")); /* strings: handles copy as bytes */
  if (y->dtype != ALMA_DTYPE_INT64)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "Y dtype %s (int64 expected)", alma_dtype_name(y->dtype));
  if (x->rank < 1) return alma__op_error(n, ALMA_ERR_SHAPE, "X must have rank >= 1, got a scalar");
  int64_t dims[ALMA_MAX_RANK], k = alma_tensor_numel(y);
  int r = x->rank == 1 ? 2 : x->rank;
  if (x->rank == 1) dims[0] = 1;
  else
    for (int i = 0; i < x->rank - 1; i++) dims[i] = x->dims[i];
  dims[r - 1] = k;
  alma__set_shape(&out[0], x->dtype, r, dims);
  return ALMA_OK;
}

static alma_status afe_exec(EXEC_ARGS) {
  const alma_tensor *x = in[0], *y = in[1];
  int64_t last = x->dims[x->rank - 1], rows = last ? alma_tensor_numel(x) / last : 0, k = alma_tensor_numel(y);
  const int64_t *idx = y->data;
  for (int64_t j = 0; j < k; j++)
    if (idx[j] < 0 || idx[j] >= last)
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "index Y[%lld] = %lld is out of range [0, %lld)", (long long)j,
                            (long long)idx[j], (long long)last);
  size_t es = alma_dtype_size(x->dtype);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < k; j++)
      memcpy((char *)out[0].data + (size_t)(r * k + j) * es, (const char *)x->data + (size_t)(r * last + idx[j]) * es,
             es);
  return ALMA_OK;
}

const alma_op_def alma__op_MlArrayFeatureExtractor = {
    .name = "ArrayFeatureExtractor", .domain = ALMA_ML_DOMAIN, .versions = {1}, .flags = ALMA_OP_STRINGS, .min_inputs = 2, .max_inputs = 2,
    .min_outputs = 1, .max_outputs = 1, .infer = afe_infer, .exec = afe_exec};

/* ---- Binarizer: Y = X > threshold ? 1 : 0, in X's type (NaN gives 0) --------------------------- */
static alma_status bin_infer(INFER_ARGS) {
  ALMA_TRY(need_numeric(n, in[0], "input X"));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

static alma_status bin_exec(EXEC_ARGS) {
  const alma_tensor *x = in[0];
  double th = alma__attr_f(n, "threshold", 0.0f);
  int64_t total = alma_tensor_numel(x);
  for (int64_t i = 0; i < total; i++)
    alma__set_f64(out[0].data, x->dtype, i, alma__get_f64(x->data, x->dtype, i) > th ? 1.0 : 0.0);
  return ALMA_OK;
}

const alma_op_def alma__op_MlBinarizer = {.name = "Binarizer", .domain = ALMA_ML_DOMAIN, .versions = {1},
                                          .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                          .infer = bin_infer, .exec = bin_exec};

/* ---- Normalizer: each row of [N, C] (or the one row of [C]) divided by its max, L1 or L2 norm ----
 * MAX divides by the largest value, as the spec writes it (X / max(X)) and ONNX Runtime does;
 * onnx.reference divides by the largest magnitude, which differs on rows whose largest magnitude
 * is negative. A zero divisor leaves the row as is (spec). */
enum { NORM_MAX, NORM_L1, NORM_L2 };

static alma_status norm_mode(const alma_node *n, int *mode) {
  const char *s = alma__attr_s(n, "norm", "MAX");
  if (!strcmp(s, "MAX")) *mode = NORM_MAX;
  else if (!strcmp(s, "L1")) *mode = NORM_L1;
  else if (!strcmp(s, "L2")) *mode = NORM_L2;
  else return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "norm '%s' (MAX, L1 or L2 expected)", s);
  return ALMA_OK;
}

static alma_status norm_infer(INFER_ARGS) {
  int mode;
  int64_t rows, cols;
  ALMA_TRY(need_numeric(n, in[0], "input X"));
  ALMA_TRY(alma__ml_rows(n, in[0], &rows, &cols));
  ALMA_TRY(norm_mode(n, &mode));
  alma__set_shape(&out[0], ALMA_DTYPE_FLOAT32, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

static alma_status norm_exec(EXEC_ARGS) {
  const alma_tensor *x = in[0];
  int mode;
  int64_t rows, cols;
  ALMA_TRY(alma__ml_rows(n, x, &rows, &cols));
  ALMA_TRY(norm_mode(n, &mode));
  float *y = out[0].data;
  for (int64_t r = 0; r < rows; r++) {
    double d = mode == NORM_MAX ? -INFINITY : 0;
    for (int64_t c = 0; c < cols; c++) {
      double v = alma__get_f64(x->data, x->dtype, r * cols + c);
      if (mode == NORM_MAX) d = v > d ? v : d;
      else d += mode == NORM_L1 ? fabs(v) : v * v;
    }
    if (mode == NORM_L2) d = sqrt(d);
    for (int64_t c = 0; c < cols; c++) {
      double v = alma__get_f64(x->data, x->dtype, r * cols + c);
      y[r * cols + c] = (float)(d != 0 ? v / d : v);
    }
  }
  return ALMA_OK;
}

const alma_op_def alma__op_MlNormalizer = {.name = "Normalizer", .domain = ALMA_ML_DOMAIN, .versions = {1},
                                           .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                           .infer = norm_infer, .exec = norm_exec};

/* ---- Scaler: Y = (X - offset) * scale along the last dim, as float ------------------------------
 * offset and scale have one value per feature, or one for all. Both are required: the spec gives
 * no default and ONNX Runtime refuses either one empty. */
static alma_status scaler_setup(const alma_node *n, const alma_tensor *x, const float **off, int64_t *noff,
                                const float **sc, int64_t *nsc, int64_t *feats) {
  ALMA_TRY(need_numeric(n, x, "input X"));
  *feats = x->rank ? x->dims[x->rank - 1] : 1;
  *noff = alma__attr_floats(n, "offset", off);
  *nsc = alma__attr_floats(n, "scale", sc);
  if (!*noff || !*nsc)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attributes offset and scale are required (offset has %lld values, scale %lld)",
                          (long long)*noff, (long long)*nsc);
  if ((*noff != 1 && *noff != *feats) || (*nsc != 1 && *nsc != *feats))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL,
                          "offset has %lld values and scale %lld: 1 or one per feature (%lld) expected", (long long)*noff,
                          (long long)*nsc, (long long)*feats);
  return ALMA_OK;
}

static alma_status scaler_infer(INFER_ARGS) {
  const float *off, *sc;
  int64_t noff, nsc, f;
  ALMA_TRY(scaler_setup(n, in[0], &off, &noff, &sc, &nsc, &f));
  alma__set_shape(&out[0], ALMA_DTYPE_FLOAT32, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

static alma_status scaler_exec(EXEC_ARGS) {
  const alma_tensor *x = in[0];
  const float *off, *sc;
  int64_t noff, nsc, f;
  ALMA_TRY(scaler_setup(n, x, &off, &noff, &sc, &nsc, &f));
  int64_t total = alma_tensor_numel(x);
  float *y = out[0].data;
  for (int64_t i = 0; i < total; i++) {
    int64_t c = f ? i % f : 0;
    double v = alma__get_f64(x->data, x->dtype, i);
    y[i] = (float)((v - off[noff == 1 ? 0 : c]) * sc[nsc == 1 ? 0 : c]);
  }
  return ALMA_OK;
}

const alma_op_def alma__op_MlScaler = {.name = "Scaler", .domain = ALMA_ML_DOMAIN, .versions = {1}, .min_inputs = 1,
                                       .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .infer = scaler_infer,
                                       .exec = scaler_exec};

/* ---- Imputer: elements equal to the replaced value (NaN matches NaN) become the imputed value of
 * their feature (last dim); float inputs use the *_float(s) attributes, integer inputs *_int64(s). */
typedef struct imputer_args {
  int is_float;
  int64_t nvals, feats;
  const float *fv;
  const int64_t *iv;
  double rep_f;
  int64_t rep_i;
} imputer_args;

static alma_status imputer_setup(const alma_node *n, const alma_tensor *x, imputer_args *a) {
  int64_t rows;
  ALMA_TRY(alma__ml_rows(n, x, &rows, &a->feats));
  a->is_float = x->dtype == ALMA_DTYPE_FLOAT32 || x->dtype == ALMA_DTYPE_FLOAT64;
  int64_t nf = alma__attr_floats(n, "imputed_value_floats", &a->fv);
  int64_t ni = alma__attr_ints(n, "imputed_value_int64s", &a->iv);
  a->nvals = a->is_float ? nf : ni;
  if (!a->nvals)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input dtype %s needs attribute %s", alma_dtype_name(x->dtype),
                          a->is_float ? "imputed_value_floats" : "imputed_value_int64s");
  if (a->nvals != 1 && a->nvals != a->feats)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%lld imputed values for %lld features (1 or one per feature expected)",
                          (long long)a->nvals, (long long)a->feats);
  a->rep_f = alma__attr_f(n, "replaced_value_float", 0.0f);
  a->rep_i = alma__attr_i(n, "replaced_value_int64", 0);
  return ALMA_OK;
}

static alma_status imputer_infer(INFER_ARGS) {
  imputer_args a;
  ALMA_TRY(imputer_setup(n, in[0], &a));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

static alma_status imputer_exec(EXEC_ARGS) {
  const alma_tensor *x = in[0];
  imputer_args a;
  ALMA_TRY(imputer_setup(n, x, &a));
  int64_t total = alma_tensor_numel(x);
  memcpy(out[0].data, x->data, x->nbytes < out[0].nbytes ? x->nbytes : out[0].nbytes);
  for (int64_t i = 0; i < total; i++) {
    int64_t c = a.nvals == 1 ? 0 : i % a.feats;
    if (a.is_float) {
      double v = alma__get_f64(x->data, x->dtype, i);
      if (isnan(a.rep_f) ? isnan(v) : v == a.rep_f) alma__set_f64(out[0].data, x->dtype, i, a.fv[c]);
    } else if (alma__get_i64(x->data, x->dtype, i) == a.rep_i) {
      alma__set_i64(out[0].data, x->dtype, i, a.iv[c]);
    }
  }
  return ALMA_OK;
}

const alma_op_def alma__op_MlImputer = {.name = "Imputer", .domain = ALMA_ML_DOMAIN, .versions = {1},
                                        .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                        .infer = imputer_infer, .exec = imputer_exec};

/* ---- OneHotEncoder: Y[..., k] = 1 where X == cats_int64s[k] (float inputs cast to integers
 * first, spec) or, for a string X, X == cats_strings[k]. A value in no category gives a row of
 * zeros when zeros = 1 (default), else an error naming it. String categories are looked up by
 * their interned handles (core.h), so the int64 table serves them. */
typedef struct ohe_args {
  const int64_t *cats;   /* cats_int64s */
  const char *const *scats; /* cats_strings */
  int64_t ncat;
} ohe_args;

static alma_status ohe_setup(const alma_node *n, const alma_tensor *x, ohe_args *a) {
  memset(a, 0, sizeof *a);
  if (x->rank + 1 > ALMA_MAX_RANK)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "unsupported: output rank %d exceeds alma's maximum of %d",
                          x->rank + 1, ALMA_MAX_RANK);
  if (x->dtype == ALMA_DTYPE_STRING) {
    const alma_attr *cs = alma__node_attr(n, "cats_strings");
    if (!cs || cs->type != ALMA_ATTR_STRINGS || !cs->n)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "a string input needs the attribute cats_strings");
    a->scats = cs->strings, a->ncat = cs->n;
    return ALMA_OK;
  }
  ALMA_TRY(need_numeric(n, x, "input X"));
  ALMA_TRY(alma__ml_ints(n, "cats_int64s", &a->cats, &a->ncat));
  if (!a->ncat) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute cats_int64s is required");
  return ALMA_OK;
}

static alma_status ohe_infer(INFER_ARGS) {
  ohe_args a;
  int64_t dims[ALMA_MAX_RANK];
  ALMA_TRY(ohe_setup(n, in[0], &a));
  int64_t ncat = a.ncat;
  for (int i = 0; i < in[0]->rank; i++) dims[i] = in[0]->dims[i];
  dims[in[0]->rank] = ncat;
  alma__set_shape(&out[0], ALMA_DTYPE_FLOAT32, in[0]->rank + 1, dims);
  return ALMA_OK;
}

static alma_status ohe_exec(EXEC_ARGS) {
  const alma_tensor *x = in[0];
  ohe_args a;
  ALMA_TRY(ohe_setup(n, x, &a));
  int64_t ncat = a.ncat;
  int zeros = alma__attr_i(n, "zeros", 1) != 0;
  int strs = x->dtype == ALMA_DTYPE_STRING;
  int64_t *hk = NULL;
  if (strs) {
    hk = alma__nn_alloc(n, (size_t)ncat, sizeof *hk);
    if (!hk) return ALMA_ERR_NOMEM;
    for (int64_t k = 0; k < ncat; k++) {
      const alma__str *h;
      alma_status st = alma__str_make(a.scats[k], strlen(a.scats[k]), &h);
      if (st != ALMA_OK) {
        free(hk);
        return st;
      }
      hk[k] = (int64_t)(intptr_t)h;
    }
  }
  ml_table t;
  alma_status bst = table_build(n, strs ? hk : a.cats, NULL, ncat, 0, &t);
  free(hk);
  if (bst != ALMA_OK) return bst;
  int64_t total = alma_tensor_numel(x);
  float *y = out[0].data;
  int is_float = alma__dtype_is_float(x->dtype);
  for (int64_t i = 0; i < total; i++) {
    int64_t k = -1;
    if (strs) {
      k = table_find_i(&t, (int64_t)(intptr_t)alma__strs(x)[i]);
    } else if (is_float) {
      double v = alma__get_f64(x->data, x->dtype, i);
      /* a value with no int64 (NaN, beyond +-2^63) can match no category */
      if (v > -9.2e18 && v < 9.2e18) k = table_find_i(&t, (int64_t)v);
    } else {
      k = table_find_i(&t, alma__get_i64(x->data, x->dtype, i));
    }
    if (k >= 0) y[i * ncat + k] = 1.0f;
    else if (!zeros) {
      free(t.keys);
      if (strs)
        return alma__op_error(n, ALMA_ERR_INVALID_ARG, "X[%lld] = \"%.60s\" is in no category and zeros is 0",
                              (long long)i, alma__str_ptr(alma__strs(x)[i]));
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "X[%lld] = %g is in no category and zeros is 0", (long long)i,
                            alma__get_f64(x->data, x->dtype, i));
    }
  }
  free(t.keys);
  return ALMA_OK;
}

const alma_op_def alma__op_MlOneHotEncoder = {.name = "OneHotEncoder", .domain = ALMA_ML_DOMAIN, .versions = {1},
                                              .flags = ALMA_OP_STRINGS,
                                              .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                              .infer = ohe_infer, .exec = ohe_exec};

/* ---- LabelEncoder (1, 2, 4): Y = values[position of X in keys], else the default ---------------
 * Version 1 maps strings to int64 (the position in classes_strings, else default_int64) or int64 to
 * strings (classes_strings[X], else default_string). Versions 2 and 4: keys from keys_int64s,
 * keys_floats, keys_strings (4: keys_tensor) and values likewise, with default_int64 /
 * default_float / default_string (4: default_tensor). String keys are looked up by their interned
 * handle (core.h: equal strings share one), so the int64 table serves them. */
typedef struct le_args {
  alma_dtype kt, vt;    /* key (= input) and value (= output) dtypes */
  int64_t nk;
  const int64_t *ki;    /* keys_int64s */
  alma_ml_list kl;      /* keys_floats / keys_tensor (numbers or strings) */
  const char *const *ks; /* keys_strings */
  const int64_t *vi;    /* values_int64s */
  alma_ml_list vl;      /* values_floats / values_tensor */
  const char *const *vs; /* values_strings */
  double dflt;
  int64_t dflt_i;
  const char *dflt_s;   /* string default (default_string), or */
  const alma_tensor *dflt_st; /* default_tensor of one string */
} le_args;

static int le_dtype_ok(alma_dtype t) {
  return t == ALMA_DTYPE_INT64 || t == ALMA_DTYPE_FLOAT32 || t == ALMA_DTYPE_INT32 || t == ALMA_DTYPE_INT16 ||
         t == ALMA_DTYPE_FLOAT64 || t == ALMA_DTYPE_STRING;
}

/* One of the keys_* (or values_*) forms: exactly one must be given. */
static alma_status le_side(const alma_node *n, const char *side, const int64_t **ints, alma_ml_list *list,
                           const char *const **strs, alma_dtype *dt, int64_t *count) {
  char nm[64];
  int given = 0;
  *strs = NULL;
  snprintf(nm, sizeof nm, "%s_strings", side);
  const alma_attr *sa = alma__node_attr(n, nm);
  if (sa) {
    if (sa->type != ALMA_ATTR_STRINGS)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute %s must be a list of strings", nm);
    given++, *dt = ALMA_DTYPE_STRING, *strs = sa->strings, *count = sa->n;
  }
  snprintf(nm, sizeof nm, "%s_int64s", side);
  const int64_t *iv;
  int64_t ic;
  ALMA_TRY(alma__ml_ints(n, nm, &iv, &ic));
  *ints = iv;
  if (iv) given++, *dt = ALMA_DTYPE_INT64, *count = ic;
  snprintf(nm, sizeof nm, "%s_floats", side);
  memset(list, 0, sizeof *list);
  const alma_attr *fa = alma__node_attr(n, nm);
  if (fa) {
    if (fa->type != ALMA_ATTR_FLOATS)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute %s must be a list of floats", nm);
    given++, *dt = ALMA_DTYPE_FLOAT32, list->f = fa->floats, list->n = fa->n, *count = fa->n;
  }
  if (n->since_version >= 4) {
    snprintf(nm, sizeof nm, "%s_tensor", side);
    const alma_attr *ta = alma__node_attr(n, nm);
    if (ta) {
      if (ta->type != ALMA_ATTR_TENSOR || !ta->t)
        return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute %s must be a tensor", nm);
      if (!le_dtype_ok(ta->t->dtype))
        return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "unsupported: %s of dtype %s (int64, float, int32, int16, double or string expected)", nm,
                              alma_dtype_name(ta->t->dtype));
      given++, *dt = ta->t->dtype, list->t = ta->t, list->n = alma_tensor_numel(ta->t), *count = list->n;
    }
  }
  if (given != 1)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%d of the %s_* attributes given (exactly one expected)", given, side);
  return ALMA_OK;
}

static alma_status le_setup(const alma_node *n, const alma_tensor *x, le_args *a) {
  memset(a, 0, sizeof *a);
  if (n->since_version < 2) {
    /* classes_strings: string -> its position (int64), or int64 -> the string at that position */
    const alma_attr *cs = alma__node_attr(n, "classes_strings");
    if (!cs || cs->type != ALMA_ATTR_STRINGS)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "LabelEncoder-1 needs the list of strings classes_strings");
    a->nk = cs->n;
    if (x->dtype == ALMA_DTYPE_STRING) {
      a->kt = ALMA_DTYPE_STRING, a->ks = cs->strings, a->vt = ALMA_DTYPE_INT64;
      a->dflt_i = alma__attr_i(n, "default_int64", -1);
    } else if (x->dtype == ALMA_DTYPE_INT64) {
      a->kt = ALMA_DTYPE_INT64, a->vt = ALMA_DTYPE_STRING, a->vs = cs->strings;
      a->dflt_s = alma__attr_s(n, "default_string", "_Unused");
    } else {
      return alma__op_error(n, ALMA_ERR_TYPE, "LabelEncoder-1 takes string or int64 input, got %s", alma_dtype_name(x->dtype));
    }
    return ALMA_OK;
  }
  int64_t nv;
  ALMA_TRY(le_side(n, "keys", &a->ki, &a->kl, &a->ks, &a->kt, &a->nk));
  ALMA_TRY(le_side(n, "values", &a->vi, &a->vl, &a->vs, &a->vt, &nv));
  if (nv != a->nk)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%lld keys and %lld values (the same number expected)",
                          (long long)a->nk, (long long)nv);
  if (x->dtype != a->kt)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input dtype %s differs from the keys' dtype %s",
                          alma_dtype_name(x->dtype), alma_dtype_name(a->kt));
  /* defaults: default_tensor (4) for values_tensor, else default_int64 / default_float /
   * default_string; the spec's defaults are -1 for integers, -0.0 for floats, "_Unused" */
  const alma_attr *dt = alma__node_attr(n, "default_tensor");
  if (a->vl.t) {
    if (dt) {
      if (dt->type != ALMA_ATTR_TENSOR || !dt->t || alma_tensor_numel(dt->t) != 1 || dt->t->dtype != a->vt)
        return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "default_tensor must hold one %s value", alma_dtype_name(a->vt));
      if (a->vt == ALMA_DTYPE_STRING) a->dflt_st = dt->t;
      else {
        a->dflt = alma__get_f64(dt->t->data, dt->t->dtype, 0);
        a->dflt_i = alma__dtype_is_float(a->vt) ? 0 : alma__get_i64(dt->t->data, dt->t->dtype, 0);
      }
    } else {
      a->dflt = alma__dtype_is_float(a->vt) ? -0.0 : -1.0;
      a->dflt_i = -1;
      a->dflt_s = "_Unused";
    }
  } else if (a->vt == ALMA_DTYPE_INT64) {
    a->dflt_i = alma__attr_i(n, "default_int64", -1);
  } else if (a->vt == ALMA_DTYPE_STRING) {
    a->dflt_s = alma__attr_s(n, "default_string", "_Unused");
  } else {
    a->dflt = alma__attr_f(n, "default_float", -0.0f);
  }
  return ALMA_OK;
}

static alma_status le_infer(INFER_ARGS) {
  le_args a;
  ALMA_TRY(le_setup(n, in[0], &a));
  alma__set_shape(&out[0], a.vt, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

static int64_t le_handle_key(const alma__str *h) { return (int64_t)(intptr_t)h; }

static alma_status le_exec(EXEC_ARGS) {
  const alma_tensor *x = in[0];
  le_args a;
  ALMA_TRY(le_setup(n, x, &a));
  int kf = alma__dtype_is_float(a.kt), vf = alma__dtype_is_float(a.vt);
  int ks = a.kt == ALMA_DTYPE_STRING, vs = a.vt == ALMA_DTYPE_STRING;
  int64_t *hk = NULL; /* string keys as handle values */
  const alma__str *dflt_h = NULL;
  alma_status st = ALMA_OK;
  if (ks) {
    hk = alma__nn_alloc(n, (size_t)(a.nk ? a.nk : 1), sizeof *hk);
    if (!hk) return ALMA_ERR_NOMEM;
    for (int64_t k = 0; k < a.nk && st == ALMA_OK; k++) {
      const alma__str *h = NULL;
      if (a.ks) st = alma__str_make(a.ks[k], strlen(a.ks[k]), &h);
      else h = alma__strs(a.kl.t)[k];
      hk[k] = le_handle_key(h);
    }
  }
  if (vs && st == ALMA_OK) {
    if (a.dflt_st) dflt_h = alma__strs(a.dflt_st)[0];
    else st = alma__str_make(a.dflt_s, strlen(a.dflt_s), &dflt_h);
  }
  ml_table t;
  /* LabelEncoder-1 from int64 indexes classes_strings directly: no table */
  int64_t nkt = n->since_version < 2 && !ks ? 0 : a.nk;
  if (st == ALMA_OK) st = table_build(n, ks ? hk : a.ki, &a.kl, nkt, kf, &t);
  free(hk);
  if (st != ALMA_OK) return st;
  int64_t total = alma_tensor_numel(x);
  for (int64_t i = 0; i < total && st == ALMA_OK; i++) {
    int64_t k;
    if (ks) k = table_find_i(&t, le_handle_key(alma__strs(x)[i]));
    else if (kf) k = table_find_f(&t, alma__get_f64(x->data, x->dtype, i));
    else k = table_find_i(&t, alma__get_i64(x->data, x->dtype, i));
    if (n->since_version < 2 && !ks) { /* LabelEncoder-1, int64 -> classes_strings[x] */
      int64_t v = alma__get_i64(x->data, x->dtype, i);
      k = v >= 0 && v < a.nk ? v : -1;
    }
    if (n->since_version < 2 && ks) { /* LabelEncoder-1, string -> position */
      ((int64_t *)out[0].data)[i] = k >= 0 ? k : a.dflt_i;
      continue;
    }
    if (vs) {
      const alma__str *h = dflt_h;
      if (k >= 0) {
        if (a.vs) st = alma__str_make(a.vs[k], strlen(a.vs[k]), &h);
        else h = alma__strs(a.vl.t)[k];
      }
      alma__strs(&out[0])[i] = h;
    } else if (vf) {
      alma__set_f64(out[0].data, a.vt, i, k >= 0 ? alma__ml_at(&a.vl, k) : a.dflt);
    } else {
      int64_t v = a.dflt_i;
      if (k >= 0) v = a.vi ? a.vi[k] : alma__get_i64(a.vl.t->data, a.vl.t->dtype, k);
      alma__set_i64(out[0].data, a.vt, i, v);
    }
  }
  free(t.keys);
  return st;
}

const alma_op_def alma__op_MlLabelEncoder = {.name = "LabelEncoder", .domain = ALMA_ML_DOMAIN, .versions = {1, 2, 4},
                                             .flags = ALMA_OP_STRINGS, .min_inputs = 1, .max_inputs = 1,
                                             .min_outputs = 1, .max_outputs = 1, .infer = le_infer, .exec = le_exec};

/* ---- FeatureVectorizer: inputs side by side as float columns -----------------------------------
 * Input i is [N, C_i] (more dims flatten into C_i; 1-D is [1, C], spec), cut or zero-padded to
 * inputdimensions[i] columns; every input must have the same N. */
static alma_status fv_setup(const alma_node *n, const alma_tensor *const *in, int nin, const int64_t **dims,
                            int64_t *rows, int64_t *width) {
  int64_t nd;
  ALMA_TRY(alma__ml_ints(n, "inputdimensions", dims, &nd));
  if (nd != nin)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "inputdimensions has %lld values for %d inputs", (long long)nd, nin);
  *width = 0;
  *rows = -1;
  for (int i = 0; i < nin; i++) {
    const alma_tensor *x = in[i];
    if (!x) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input %d is empty", i);
    ALMA_TRY(need_numeric(n, x, "input"));
    if (x->rank < 1) return alma__op_error(n, ALMA_ERR_SHAPE, "input %d is a scalar ([N, C] or [C] expected)", i);
    int64_t r = x->rank == 1 ? 1 : x->dims[0];
    if (*rows >= 0 && r != *rows)
      return alma__op_error(n, ALMA_ERR_SHAPE, "input %d has %lld rows, input 0 has %lld", i, (long long)r, (long long)*rows);
    *rows = r;
    if ((*dims)[i] < 0 || (*dims)[i] > ((int64_t)1 << 40))
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "inputdimensions[%d] = %lld is out of range", i, (long long)(*dims)[i]);
    *width += (*dims)[i];
  }
  return ALMA_OK;
}

static alma_status fv_infer(INFER_ARGS) {
  const int64_t *dims;
  int64_t rows, width;
  ALMA_TRY(fv_setup(n, in, nin, &dims, &rows, &width));
  int64_t od[2] = {rows, width};
  alma__set_shape(&out[0], ALMA_DTYPE_FLOAT32, 2, od);
  return ALMA_OK;
}

static alma_status fv_exec(EXEC_ARGS) {
  const int64_t *dims;
  int64_t rows, width, col = 0;
  ALMA_TRY(fv_setup(n, in, nin, &dims, &rows, &width));
  float *y = out[0].data;
  for (int i = 0; i < nin; i++) {
    const alma_tensor *x = in[i];
    int64_t c = rows ? alma_tensor_numel(x) / rows : 0, use = c < dims[i] ? c : dims[i];
    for (int64_t r = 0; r < rows; r++)
      for (int64_t j = 0; j < use; j++) y[r * width + col + j] = (float)alma__get_f64(x->data, x->dtype, r * c + j);
    col += dims[i];
  }
  return ALMA_OK;
}

const alma_op_def alma__op_MlFeatureVectorizer = {.name = "FeatureVectorizer", .domain = ALMA_ML_DOMAIN,
                                                  .versions = {1}, .min_inputs = 1, .max_inputs = -1,
                                                  .min_outputs = 1, .max_outputs = 1, .infer = fv_infer,
                                                  .exec = fv_exec};

/* ---- ZipMap: each row of X [N, C] (or [C]: one row) becomes a map from the class labels
 * (classlabels_int64s or classlabels_strings, C of them) to the row's scores: seq(map(int64|string,
 * float)) (core.h's map container: keys and values tensors in label order). ONNX Runtime also takes
 * only float X. */
typedef struct zm_args {
  alma_ml_labels lab;
  int64_t rows, C;
} zm_args;

static alma_status zm_setup(const alma_node *n, const alma_tensor *x, zm_args *a) {
  ALMA_TRY(alma__ml_class_labels(n, "classlabels_int64s", &a->lab));
  if (!a->lab.n)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute classlabels_int64s or classlabels_strings is required");
  if (x->dtype != ALMA_DTYPE_FLOAT32)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "X dtype %s (float expected)", alma_dtype_name(x->dtype));
  if (x->rank != 1 && x->rank != 2) {
    char s[128];
    return alma__op_error(n, ALMA_ERR_SHAPE, "X of shape %s ([N, C] or [C] expected)",
                          alma__shape_str(x->rank, x->dims, s, sizeof s));
  }
  a->rows = x->rank == 2 ? x->dims[0] : 1;
  a->C = x->dims[x->rank - 1];
  if (a->C != a->lab.n)
    return alma__op_error(n, ALMA_ERR_SHAPE, "%lld class labels for %lld scores per row", (long long)a->lab.n,
                          (long long)a->C);
  return ALMA_OK;
}

static alma_status zm_infer(INFER_ARGS) {
  zm_args a;
  ALMA_TRY(zm_setup(n, in[0], &a));
  (void)nout;
  alma__set_container_type(&out[0], ALMA__DTYPE_SEQUENCE, ALMA__DTYPE_MAP, 0);
  out[0].dims[2] = alma__ml_label_dtype(&a.lab);
  out[0].dims[3] = ALMA_DTYPE_FLOAT32;
  return ALMA_OK;
}

static alma_status zm_exec(EXEC_ARGS) {
  zm_args a;
  ALMA_TRY(zm_setup(n, in[0], &a));
  (void)nout;
  (void)ctx;
  const alma__str **hs;
  ALMA_TRY(alma__ml_intern_labels(n, &a.lab, &hs));
  alma_dtype kd = alma__ml_label_dtype(&a.lab);
  alma_status st = alma__container_alloc(&out[0], ALMA__DTYPE_SEQUENCE, ALMA__DTYPE_MAP, 0);
  if (st == ALMA_OK) out[0].dims[2] = kd, out[0].dims[3] = ALMA_DTYPE_FLOAT32;
  const float *x = in[0]->data;
  for (int64_t r = 0; st == ALMA_OK && r < a.rows; r++) {
    alma_tensor m;
    if ((st = alma__map_alloc(&m, kd, ALMA_DTYPE_FLOAT32, a.C)) != ALMA_OK) break;
    alma__seq *kv = alma__container(&m);
    if (hs) memcpy(kv->items[0].data, hs, (size_t)a.C * sizeof *hs);
    else memcpy(kv->items[0].data, a.lab.ints, (size_t)a.C * sizeof *a.lab.ints);
    memcpy(kv->items[1].data, x + r * a.C, (size_t)a.C * sizeof *x);
    if ((st = alma__container_insert(&out[0], -1, &m)) != ALMA_OK) alma_tensor_free_data(&m);
  }
  free(hs);
  return st; /* on failure the caller frees out[0] */
}

const alma_op_def alma__op_MlZipMap = {.name = "ZipMap", .domain = ALMA_ML_DOMAIN, .versions = {1},
                                       .flags = ALMA_OP_ALLOCS_OUTPUTS | ALMA_OP_CONTAINERS | ALMA_OP_STRINGS,
                                       .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                       .infer = zm_infer, .exec = zm_exec};
