/* Shared helpers of the operator unit tests (tests/ops_*): nodes built by hand, tensor views over
 * test data, running a node with alma__op_run_node, and output checks. Header-only (static inline)
 * so each test stays one translation unit; include it instead of cmocka.h. */
#ifndef ALMA_TESTS_OP_TEST_UTIL_H
#define ALMA_TESTS_OP_TEST_UTIL_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ops/op.h"

/* ---- nodes ------------------------------------------------------------------------------------ */

/* A node with room for the largest operator signatures the tests build (LSTM: 8 inputs, Loop
 * bodies, Einsum operand lists) and a tensor an ATTR_TENSOR attribute can point at. */
typedef struct {
  alma_node n;
  alma_attr attrs[12];
  int ins[16], outs[8];
  alma_tensor attr_t;
} tnode;

/* Value ids are only checked for sign (negative = omitted), so every slot gets a valid one: a test
 * may raise n_inputs later or mark one omitted with -1. Not resolved: see tn_make. */
static inline void tn_init(tnode *t, const char *op, int nin, int nout) {
  memset(t, 0, sizeof *t);
  t->n.name = "t";
  t->n.op_type = op;
  t->n.domain = "";
  t->n.n_inputs = nin;
  t->n.n_outputs = nout;
  for (int i = 0; i < (int)(sizeof t->ins / sizeof t->ins[0]); i++) t->ins[i] = i;
  for (int i = 0; i < (int)(sizeof t->outs / sizeof t->outs[0]); i++) t->outs[i] = 100 + i;
  t->n.inputs = t->ins;
  t->n.outputs = t->outs;
  t->n.attrs = t->attrs;
}

/* tn_init, then resolve the operator at `opset`; attributes added afterwards are still read, since
 * operators read them when they run. */
static inline alma_status tn_make_st(tnode *t, const char *op, int opset, int nin, int nout) {
  tn_init(t, op, nin, nout);
  return alma__op_resolve(&t->n, opset);
}
static inline void tn_make(tnode *t, const char *op, int opset, int nin, int nout) {
  assert_int_equal(tn_make_st(t, op, opset, nin, nout), ALMA_OK);
}

static inline alma_attr *tn_attr(tnode *t, const char *name, alma_attr_type ty) {
  assert_true(t->n.n_attrs < (int)(sizeof t->attrs / sizeof t->attrs[0]));
  alma_attr *a = &t->attrs[t->n.n_attrs++];
  memset(a, 0, sizeof *a);
  a->name = name;
  a->type = ty;
  return a;
}
static inline void attr_i(tnode *t, const char *name, int64_t v) { tn_attr(t, name, ALMA_ATTR_INT)->i = v; }
static inline void attr_f(tnode *t, const char *name, float v) { tn_attr(t, name, ALMA_ATTR_FLOAT)->f = v; }
static inline void attr_s(tnode *t, const char *name, const char *s) {
  alma_attr *a = tn_attr(t, name, ALMA_ATTR_STRING);
  a->s = s;
  a->s_len = strlen(s);
}
static inline void attr_ints(tnode *t, const char *name, const int64_t *v, int n) {
  alma_attr *a = tn_attr(t, name, ALMA_ATTR_INTS);
  a->ints = (int64_t *)v;
  a->n = n;
}
static inline void attr_floats(tnode *t, const char *name, const float *v, int n) {
  alma_attr *a = tn_attr(t, name, ALMA_ATTR_FLOATS);
  a->floats = (float *)v;
  a->n = n;
}
static inline void attr_strings(tnode *t, const char *name, const char **v, int n) {
  alma_attr *a = tn_attr(t, name, ALMA_ATTR_STRINGS);
  a->strings = v;
  a->n = n;
}
static inline void attr_g(tnode *t, const char *name, alma_graph *g) { tn_attr(t, name, ALMA_ATTR_GRAPH)->g = g; }

/* ---- tensors (views over the caller's data, never freed) ---------------------------------------- */

static inline alma_tensor TT(alma_dtype dt, const void *data, int rank, const int64_t *dims) {
  alma_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.rank = rank;
  for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
  t.data = (void *)data;
  t.nbytes = (size_t)alma__numel(rank, t.dims) * alma_dtype_size(dt);
  return t;
}
/* The same with the dims as int64_t varargs: T(ALMA_DTYPE_FLOAT32, x, 2, (int64_t)2, (int64_t)3). */
static inline alma_tensor T(alma_dtype dt, const void *data, int rank, ...) {
  int64_t dims[ALMA_MAX_RANK] = {0};
  va_list ap;
  va_start(ap, rank);
  for (int i = 0; i < rank && i < ALMA_MAX_RANK; i++) dims[i] = va_arg(ap, int64_t);
  va_end(ap);
  return TT(dt, data, rank, dims);
}
static inline alma_tensor tv(alma_dtype dt, int rank, const int64_t *dims, const void *data) {
  return TT(dt, data, rank, dims);
}
#define D(...) ((const int64_t[]){__VA_ARGS__})
#define TV(dt, data, ...) tv(dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}, data)
#define SCALAR(dt, data) tv(dt, 0, NULL, data)

/* ---- running ---------------------------------------------------------------------------------- */

/* Resolves at `opset` and runs with the node's n_inputs/n_outputs; outputs owned by the caller
 * (free_outs). */
static inline alma_status tn_run(tnode *t, int opset, const alma_tensor *const *in, alma_tensor *out) {
  alma_status st = alma__op_resolve(&t->n, opset);
  if (st != ALMA_OK) return st;
  return alma__op_run_node(NULL, &t->n, in, t->n.n_inputs, out, t->n.n_outputs);
}

/* Resolves at `opset` and runs only shape inference (outputs' dtype and dims, no data). */
static inline alma_status tn_infer(tnode *t, int opset, const alma_tensor *const *in, alma_tensor *out) {
  alma_status st = alma__op_resolve(&t->n, opset);
  if (st != ALMA_OK) return st;
  memset(out, 0, sizeof(alma_tensor) * (size_t)t->n.n_outputs);
  return t->n.op->infer(&t->n, in, t->n.n_inputs, out, t->n.n_outputs);
}

/* Runs an already resolved node (tn_make) with `nin` inputs (NULL entries = omitted). */
static inline alma_status tn_exec(tnode *t, alma_tensor **in, int nin, alma_tensor *out, int nout) {
  const alma_tensor *cin[sizeof t->ins / sizeof t->ins[0]];
  assert_true(nin <= (int)(sizeof cin / sizeof cin[0]));
  for (int i = 0; i < nin; i++) cin[i] = in[i];
  return alma__op_run_node(NULL, &t->n, cin, nin, out, nout);
}

static inline void free_outs(alma_tensor *out, int n) {
  for (int i = 0; i < n; i++) alma_tensor_free_data(&out[i]);
}

/* ---- checks ----------------------------------------------------------------------------------- */

static inline void check_shape(const alma_tensor *t, int rank, const int64_t *dims) {
  assert_int_equal(t->rank, rank);
  for (int i = 0; i < rank; i++) assert_int_equal(t->dims[i], dims[i]);
}

/* Any integer (or bool) dtype, read through int64. */
static inline void check_i64(const alma_tensor *t, const int64_t *want, int64_t n) {
  assert_int_equal(alma_tensor_numel(t), n);
  for (int64_t i = 0; i < n; i++)
    if (alma__get_i64(t->data, t->dtype, i) != want[i])
      fail_msg("element %lld: got %lld, want %lld", (long long)i, (long long)alma__get_i64(t->data, t->dtype, i),
               (long long)want[i]);
}

/* Any float dtype read through double, within tol + rel * |want|. A NaN wanted must be NaN; a NaN
 * got where a number is wanted fails. */
static inline void check_f_tol(const alma_tensor *t, const double *want, int64_t n, double tol, double rel) {
  assert_int_equal(alma_tensor_numel(t), n);
  for (int64_t i = 0; i < n; i++) {
    double g = alma__get_f64(t->data, t->dtype, i);
    if (isnan(want[i])) {
      if (!isnan(g)) fail_msg("element %lld: got %.9g, want nan", (long long)i, g);
    } else if (!(fabs(g - want[i]) <= tol + rel * fabs(want[i]))) {
      fail_msg("element %lld: got %.9g, want %.9g", (long long)i, g, want[i]);
    }
  }
}
/* Absolute tolerance. */
static inline void check_f_abs(const alma_tensor *t, const double *want, int64_t n, double tol) {
  check_f_tol(t, want, n, tol, 0);
}
/* Tolerance relative to the wanted magnitude (absolute near zero): |got - want| <= tol * (1 + |want|). */
static inline void check_f_rel(const alma_tensor *t, const double *want, int64_t n, double tol) {
  check_f_tol(t, want, n, tol, tol);
}

#endif
