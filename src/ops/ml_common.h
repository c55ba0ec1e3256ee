/* Helpers shared by the ai.onnx.ml operators (ml_basic.c, ml_linear.c, ml_tree.c): score
 * post-transforms, the [N, F] view of a feature tensor, and attribute readers for the list forms
 * these ops carry (floats or a double *_as_tensor twin, strings that alma refuses).
 *
 * Classifiers with classlabels_strings write their labels as a string tensor (core.h's string
 * handles): the class index the int form would map through classlabels_ints picks the string.
 * LabelEncoder, CategoryMapper, OneHotEncoder (cats_strings) and ArrayFeatureExtractor take
 * strings; ZipMap (ml_basic.c) makes sequences of maps (core.h). */
#ifndef ALMA_OPS_ML_COMMON_H
#define ALMA_OPS_ML_COMMON_H

#include "ops/op.h"

#define ALMA_ML_DOMAIN "ai.onnx.ml"

typedef enum {
  ALMA_ML_PT_NONE = 0, /* numbers of TreeEnsemble-5's integer post_transform */
  ALMA_ML_PT_SOFTMAX = 1,
  ALMA_ML_PT_LOGISTIC = 2,
  ALMA_ML_PT_SOFTMAX_ZERO = 3,
  ALMA_ML_PT_PROBIT = 4,
} alma_ml_post;

/* The string attribute post_transform (default NONE); an unknown name is an error naming it. */
alma_status alma__ml_post_transform(const alma_node *n, alma_ml_post *pt);
const char *alma__ml_post_name(alma_ml_post pt);

/* The transforms as onnx.reference computes them (aionnxml/_common_classifier.py), in double. */
double alma__ml_logistic(double v);
double alma__ml_probit(double v);
void alma__ml_softmax(double *v, int64_t k);
void alma__ml_softmax_zero(double *v, int64_t k);
/* pt applied to one row of k scores: LOGISTIC and PROBIT elementwise, the softmaxes over the row. */
void alma__ml_apply_post(alma_ml_post pt, double *v, int64_t k);

/* Index of the largest of v[0..k) as numpy.argmax finds it (onnx.reference labels classes with
 * it): the first maximum, or the first NaN when there is one. */
int64_t alma__ml_argmax(const double *v, int64_t k);

/* float, double, int32 or int64: the feature types of the numeric ml ops. */
int alma__ml_numeric(alma_dtype t);
/* X as rows of features: rank 1 is one row [1, F], rank 2 is [N, F]; other ranks and non-numeric
 * dtypes are errors naming the node. */
alma_status alma__ml_rows(const alma_node *n, const alma_tensor *x, int64_t *rows, int64_t *feats);

/* A list attribute of numbers given either as FLOATS `name` or as a double tensor `name_as_tensor`
 * (the *_as_tensor twins of TreeEnsemble*-3), or as a TENSOR attribute of any numeric dtype
 * (TreeEnsemble-5, LabelEncoder-4). n = 0 when absent. */
typedef struct alma_ml_list {
  int64_t n;
  const float *f;        /* FLOATS form */
  const int64_t *i;      /* INTS form */
  const alma_tensor *t;  /* tensor form */
} alma_ml_list;

static inline double alma__ml_at(const alma_ml_list *l, int64_t k) {
  if (l->f) return l->f[k];
  if (l->i) return (double)l->i[k];
  return alma__get_f64(l->t->data, l->t->dtype, k);
}

/* `name` (FLOATS) or `name`_as_tensor (TENSOR, float or double, 1-D); both given is an error. */
alma_status alma__ml_floats_or_tensor(const alma_node *n, const char *name, alma_ml_list *out);
/* A TENSOR attribute `name` of a numeric dtype, read as numbers (n = 0 when absent). */
alma_status alma__ml_tensor_attr(const alma_node *n, const char *name, alma_ml_list *out);
/* INTS attribute `name`; n = 0 when absent; an attribute of another type is an error. */
alma_status alma__ml_ints(const alma_node *n, const char *name, const int64_t **v, int64_t *count);

/* A classifier's class labels: `ints_name` (classlabels_ints / classlabels_int64s, INTS) or
 * classlabels_strings (STRINGS); both non-empty is an error naming the node, n = 0 when neither. */
typedef struct alma_ml_labels {
  int64_t n;
  const int64_t *ints;       /* the int form, else NULL */
  const char *const *strs;   /* the string form (NUL-terminated attribute strings), else NULL */
} alma_ml_labels;
alma_status alma__ml_class_labels(const alma_node *n, const char *ints_name, alma_ml_labels *out);
/* The label output's dtype: STRING for classlabels_strings, else INT64. */
static inline alma_dtype alma__ml_label_dtype(const alma_ml_labels *l) {
  return l->strs ? ALMA_DTYPE_STRING : ALMA_DTYPE_INT64;
}
/* The interned handles of l's strings (malloc'd array of l->n; *out NULL when l has none). */
alma_status alma__ml_intern_labels(const alma_node *n, const alma_ml_labels *l, const alma__str ***out);

#endif
