/* FUSE rule for the tanh approximation of GELU, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
 * as exporters write it -> Gelu (opset 20, approximate = "tanh"):
 *   transformers' NewGELU (GPT-2, GPT-J, CodeGen)  0.5*x*(1+tanh(k*(x+0.044715*pow(x,3))))
 *   torch F.gelu(approximate='tanh') before opset 20  0.5*(x*(1+tanh(k*(x+0.044715*(x*(x*x))))))
 *   transformers' FastGELU                           0.5*x*(1+tanh(x*k*(1+0.044715*x*x)))
 *   BLOOM                                            x*0.5*(1+tanh(k*x*(1+0.044715*x*x)))
 *   Keras/TF/jax                                     the NewGELU form, 0.5 on the sum and x last
 * Rather than list the trees (operand orders, where the constants sit, pow vs products), the rule
 * reads the Tanh's argument as a polynomial in x and the nodes after the Tanh as a polynomial in x
 * and t = tanh(...): a chain of Mul/Add/Sub/Div-by-constant/Pow-by-1,2,3/Neg whose leaves are one
 * value x and scalar constants, every intermediate used once (by the next node of the chain), must
 * come to k x + k c x^3 with k = sqrt(2/pi) and c = 0.044715 (relative 1e-4: exports round k to
 * 0.7978846 or 0.79788456; 1e-3 for float16 constants, 8e-3 for bfloat16), and after the Tanh to
 * 0.5 x + 0.5 x t. The expressions are then equal as real polynomials; only the roundings of the
 * unfused graph differ from the Gelu kernel's. */
#include <math.h>

#include "passes/fuse.h"

#define GT_MAX_NODES 24 /* the forms above use at most 11 */
#define GT_TOL 1e-4 /* relative, on the constants' products */

/* c[i][j]: the coefficient of x^i t^j */
typedef struct gt_poly {
  double c[4][2];
} gt_poly;

typedef struct gt_walk {
  alma__fuse_ctx *c;
  int x;    /* the variable: the first non-constant leaf, -1 before */
  int t;    /* the Tanh's output while reading the nodes after it, else -1 */
  int n;    /* nodes absorbed */
  int nodes[GT_MAX_NODES];
} gt_walk;

static int gt_mul(gt_poly *r, const gt_poly *a, const gt_poly *b) {
  gt_poly p;
  memset(&p, 0, sizeof p);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 2; j++)
      for (int k = 0; k < 4; k++)
        for (int l = 0; l < 2; l++) {
          double v = a->c[i][j] * b->c[k][l];
          if (v == 0) continue;
          if (i + k > 3 || j + l > 1) return 0; /* beyond any GELU term */
          p.c[i + k][j + l] += v;
        }
  *r = p;
  return 1;
}

static void gt_axpy(gt_poly *r, double s, const gt_poly *b) {
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 2; j++) r->c[i][j] += s * b->c[i][j];
}

/* Whether p is k0 x^i0 t^j0 + k1 x^i1 t^j1 (the two terms within tol of k0 and k1, every other
 * exactly 0). */
static int gt_is(const gt_poly *p, double tol, int i0, int j0, double k0, int i1, int j1, double k1) {
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 2; j++) {
      double v = p->c[i][j];
      if (i == i0 && j == j0) {
        if (!alma__fuse_near(v, k0, tol)) return 0;
      } else if (i == i1 && j == j1) {
        if (!alma__fuse_near(v, k1, tol)) return 0;
      } else if (v != 0) {
        return 0;
      }
    }
  return 1;
}

static int gt_out(const alma__fuse_ctx *c, int node) {
  const alma_node *n = &c->g->nodes[node];
  return n->n_outputs == 1 ? n->outputs[0] : -1;
}

static int gt_eval(gt_walk *w, int v, int consumer, gt_poly *r);

/* The polynomial of node p's result, given the polynomials of the inputs it reads (a: input 0,
 * b: input 1; Div and Pow need a scalar constant second input, which gt_eval read as a constant). */
static int gt_apply(gt_walk *w, int p, const gt_poly *a, const gt_poly *b, gt_poly *r) {
  alma__fuse_ctx *c = w->c;
  const alma_node *n = &c->g->nodes[p];
  double k;
  if (alma__fuse_is(c, p, "", "Neg")) {
    memset(r, 0, sizeof *r);
    gt_axpy(r, -1, a);
    return 1;
  }
  if (alma__fuse_is(c, p, "", "Mul")) return gt_mul(r, a, b);
  if (alma__fuse_is(c, p, "", "Add") || alma__fuse_is(c, p, "", "Sub")) {
    *r = *a;
    gt_axpy(r, alma__fuse_is(c, p, "", "Add") ? 1 : -1, b);
    return 1;
  }
  if (alma__fuse_is(c, p, "", "Div")) {
    if (!alma__fuse_scalar(c, n->inputs[1], &k) || !(k != 0) || !isfinite(k)) return 0;
    memset(r, 0, sizeof *r);
    gt_axpy(r, 1 / k, a);
    return 1;
  }
  if (alma__fuse_is(c, p, "", "Pow")) {
    if (!alma__fuse_scalar(c, n->inputs[1], &k) || !(k == 1 || k == 2 || k == 3)) return 0;
    *r = *a;
    for (int e = 1; e < (int)k; e++)
      if (!gt_mul(r, r, a)) return 0;
    return 1;
  }
  return 0;
}

/* Whether p is one of the nodes gt_apply reads, with its inputs present. */
static int gt_op(const alma__fuse_ctx *c, int p) {
  static const char *const ops[] = {"Mul", "Add", "Sub", "Div", "Pow", "Neg"};
  for (int k = 0; k < 6; k++)
    if (alma__fuse_is(c, p, "", ops[k])) {
      const alma_node *n = &c->g->nodes[p];
      int arity = k == 5 ? 1 : 2;
      if (n->n_inputs != arity || n->n_outputs != 1) return 0;
      for (int i = 0; i < arity; i++)
        if (n->inputs[i] < 0) return 0;
      return 1;
    }
  return 0;
}

/* v, read by `consumer`, as a polynomial: a scalar constant, the Tanh's output, an intermediate
 * (one of the ops above, read only by `consumer`) or else the variable x. */
static int gt_eval(gt_walk *w, int v, int consumer, gt_poly *r) {
  alma__fuse_ctx *c = w->c;
  double k;
  memset(r, 0, sizeof *r);
  if (v < 0) return 0;
  if (alma__fuse_scalar(c, v, &k)) {
    if (!isfinite(k)) return 0;
    r->c[0][0] = k;
    return 1;
  }
  if (v == w->t) {
    r->c[0][1] = 1;
    return 1;
  }
  int p = alma__fuse_producer(c, v, "", NULL);
  if (v != w->x && p >= 0 && gt_op(c, p) && alma__fuse_only_consumer(c, v) == consumer) {
    if (w->n == GT_MAX_NODES) return 0;
    w->nodes[w->n++] = p;
    const alma_node *n = &c->g->nodes[p];
    gt_poly a, b;
    memset(&b, 0, sizeof b);
    if (!gt_eval(w, n->inputs[0], p, &a)) return 0;
    /* Div and Pow read their constant second input in gt_apply */
    if (n->n_inputs > 1 && !alma__fuse_is(c, p, "", "Div") && !alma__fuse_is(c, p, "", "Pow") &&
        !gt_eval(w, n->inputs[1], p, &b))
      return 0;
    return gt_apply(w, p, &a, &b, r);
  }
  /* a leaf: x has more uses (it appears inside and outside the Tanh), so it is never expanded */
  if (w->x < 0) w->x = v;
  if (v != w->x) return 0;
  r->c[1][0] = 1;
  return 1;
}

alma_status alma__fuse_rule_gelu_tanh(alma__fuse_ctx *c, int ti) {
  if (!alma__fuse_is(c, ti, "", "Tanh")) return ALMA_OK;
  const alma_node *tn = &c->g->nodes[ti];
  if (tn->n_inputs != 1 || gt_out(c, ti) < 0) return ALMA_OK;
  gt_walk w = {.c = c, .x = -1, .t = -1};
  int u = tn->inputs[0];
  gt_poly p;
  const double k = 0.79788456080286535588; /* sqrt(2/pi) */
  if (!gt_eval(&w, u, ti, &p) || w.x < 0) return ALMA_OK;
  int x = w.x;
  alma_dtype dt = alma__fuse_dtype(c, x);
  /* float16 constants hold sqrt(2/pi) and 0.044715 only to 2^-11 (bfloat16: 2^-8) */
  double tol = dt == ALMA_DTYPE_FLOAT16 ? 1e-3 : dt == ALMA_DTYPE_BFLOAT16 ? 8e-3 : GT_TOL;
  if (!alma__dtype_is_float(dt) || !gt_is(&p, tol, 1, 0, k, 3, 0, k * 0.044715) || !alma__fuse_same_shape(c, u, x))
    return ALMA_OK;
  /* After the Tanh: a chain of single-use values from t to y = 0.5 x (1 + t), each step combining
   * the running value with an operand read as a polynomial in x. */
  w.t = gt_out(c, ti);
  int cur = w.t, y = -1;
  gt_poly run;
  memset(&run, 0, sizeof run);
  run.c[0][1] = 1;
  for (int step = 0; step < 8 && y < 0; step++) {
    int nx = alma__fuse_only_consumer(c, cur);
    if (nx < 0 || !gt_op(c, nx) || w.n == GT_MAX_NODES) return ALMA_OK;
    const alma_node *n = &c->g->nodes[nx];
    int side = n->inputs[0] == cur ? 0 : 1; /* only_consumer: cur is read once */
    gt_poly other, a, b, r;
    memset(&other, 0, sizeof other);
    w.nodes[w.n++] = nx;
    if (n->n_inputs == 2) {
      if (side == 1 && (alma__fuse_is(c, nx, "", "Div") || alma__fuse_is(c, nx, "", "Pow"))) return ALMA_OK;
      if (!alma__fuse_is(c, nx, "", "Div") && !alma__fuse_is(c, nx, "", "Pow") &&
          !gt_eval(&w, n->inputs[1 - side], nx, &other))
        return ALMA_OK;
    }
    a = side == 0 ? run : other;
    b = side == 0 ? other : run;
    if (!gt_apply(&w, nx, &a, &b, &r)) return ALMA_OK;
    run = r;
    cur = gt_out(c, nx);
    if (gt_is(&run, GT_TOL, 1, 0, 0.5, 1, 1, 0.5)) y = cur;
  }
  if (y < 0 || w.x != x || !alma__fuse_same_shape(c, y, x) || alma__fuse_dtype(c, y) != dt) return ALMA_OK;
  ALMA_TRY(alma__fuse_retype(c, ti, "", "Gelu", 20));
  ALMA_TRY(alma__fuse_attr_clear(c, ti));
  ALMA_TRY(alma__fuse_attr_s(c, ti, "approximate", "tanh"));
  ALMA_TRY(alma__fuse_set_inputs(c, ti, &x, 1));
  ALMA_TRY(alma__fuse_set_output(c, ti, y));
  for (int i = 0; i < w.n; i++) alma__fuse_kill(c, w.nodes[i]);
  alma__fuse_done(c, ALMA__FUSE_GELU_TANH);
  return ALMA_OK;
}
