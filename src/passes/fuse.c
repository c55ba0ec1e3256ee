/* FUSE: a zero Pad into the next Conv/AveragePool's pads, Conv/Gemm/MatMul epilogues
 * (BatchNormalization, bias, residual, activation) and the GELU, LayerNorm and attention subgraphs
 * into single nodes; see fuse.h for the rules' contract and
 * src/ops/fused.h for the fused ops. This file holds the driver and the graph-editing helpers.
 *
 * Subgraphs (If/Loop bodies) are left as they are; values they read from this graph count as uses,
 * so nothing they see is fused away. */
#include <math.h>

#include "graph/symbind.h"
#include "passes/fuse.h"

/* Constant subgraphs up to this size are evaluated by inference so rules see their values (weights
 * behind Identity nodes, Constant nodes); FOLD folds bigger ones for good. */
#define FUSE_MAX_FOLD_ELEMS ((int64_t)1 << 22)

static int domain_eq(const char *a, const char *b) {
  int oa = !a || !a[0] || !strcmp(a, "ai.onnx"), ob = !b || !b[0] || !strcmp(b, "ai.onnx");
  return oa || ob ? oa && ob : !strcmp(a, b);
}

/* ---- queries ----------------------------------------------------------------------------------- */

int alma__fuse_is(const alma__fuse_ctx *c, int i, const char *domain, const char *op_type) {
  if (i < 0 || i >= c->g->n_nodes) return 0;
  const alma_node *n = &c->g->nodes[i];
  if (n->dead || !domain_eq(n->domain, domain) || strcmp(n->op_type, op_type)) return 0;
  /* Before opset 7 the arithmetic ops broadcast by their own rules (broadcast, axis attributes),
   * which the rules' numpy-style shape checks do not model: such nodes never match. */
  static const char *const legacy[] = {"Add", "Sub", "Mul", "Div", "Pow"};
  for (int k = 0; k < 5; k++)
    if (n->since_version < 7 && !strcmp(n->op_type, legacy[k]) && !n->domain[0]) return 0;
  return 1;
}

int alma__fuse_producer(const alma__fuse_ctx *c, int v, const char *domain, const char *op_type) {
  if (v < 0 || v >= c->g->n_values) return -1;
  int p = c->g->values[v].producer;
  if (p < 0 || p >= c->g->n_nodes || c->g->nodes[p].dead) return -1;
  const alma_node *n = &c->g->nodes[p];
  int owns = 0;
  for (int k = 0; k < n->n_outputs; k++) owns |= n->outputs[k] == v;
  if (!owns) return -1;
  if (op_type && !alma__fuse_is(c, p, domain, op_type)) return -1;
  return p;
}

int alma__fuse_uses(const alma__fuse_ctx *c, int v) { return alma__graph_count_uses(c->g, v); }

int alma__fuse_only_consumer(const alma__fuse_ctx *c, int v) {
  if (v < 0 || c->g->values[v].is_output) return -1;
  const alma_graph *g = c->g;
  int found = -1, uses = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] == v) uses++, found = i;
    for (int k = 0; k < n->n_implicit; k++) uses += n->implicit_inputs[k] == v ? 2 : 0;
  }
  for (int i = 0; i < g->n_outputs; i++) uses += g->outputs[i] == v;
  return uses == 1 ? found : -1;
}

int alma__fuse_other_input(const alma__fuse_ctx *c, int node, int v) {
  const alma_node *n = &c->g->nodes[node];
  if (n->n_inputs != 2) return -1;
  if (n->inputs[0] == v) return n->inputs[1];
  if (n->inputs[1] == v) return n->inputs[0];
  return -1;
}

const alma_tensor *alma__fuse_info(const alma__fuse_ctx *c, int v, int b) {
  if (v < 0 || v >= c->g->n_values) return NULL;
  if (v >= c->r[b].n_values) return c->g->values[v].init; /* a constant made by a rule */
  const alma_tensor *t = &c->r[b].info[v];
  return t->rank < 0 || t->dtype == ALMA_DTYPE_UNDEFINED ? NULL : t;
}

alma_dtype alma__fuse_dtype(const alma__fuse_ctx *c, int v) {
  const alma_tensor *a = alma__fuse_info(c, v, 0), *b = alma__fuse_info(c, v, 1);
  return a && b && a->dtype == b->dtype ? a->dtype : ALMA_DTYPE_UNDEFINED;
}

int alma__fuse_rank(const alma__fuse_ctx *c, int v) {
  const alma_tensor *a = alma__fuse_info(c, v, 0), *b = alma__fuse_info(c, v, 1);
  return a && b && a->rank == b->rank ? a->rank : -1;
}

int64_t alma__fuse_dim(const alma__fuse_ctx *c, int v, int axis) {
  int r = alma__fuse_rank(c, v);
  if (r < 0) return -1;
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return -1;
  int64_t a = alma__fuse_info(c, v, 0)->dims[axis], b = alma__fuse_info(c, v, 1)->dims[axis];
  return a == b ? a : -1;
}

int alma__fuse_same_shape(const alma__fuse_ctx *c, int v, int w) {
  for (int b = 0; b < 2; b++) {
    const alma_tensor *x = alma__fuse_info(c, v, b), *y = alma__fuse_info(c, w, b);
    if (!x || !y || !alma__same_shape(x, y)) return 0;
  }
  return 1;
}

const alma_tensor *alma__fuse_const(const alma__fuse_ctx *c, int v) {
  if (v < 0 || v >= c->g->n_values) return NULL;
  if (c->g->values[v].init) return c->g->values[v].init;
  if (v >= c->r[0].n_values) return NULL;
  const alma_tensor *a = &c->r[0].info[v], *b = &c->r[1].info[v];
  if (!a->data || !b->data || a->dtype != b->dtype || !alma__same_shape(a, b) || a->nbytes != b->nbytes ||
      memcmp(a->data, b->data, a->nbytes))
    return NULL;
  return a;
}

int alma__fuse_scalar(const alma__fuse_ctx *c, int v, double *x) {
  const alma_tensor *t = alma__fuse_const(c, v);
  if (!t || alma_tensor_numel(t) != 1 || !(alma__dtype_is_float(t->dtype) || alma__dtype_is_int(t->dtype))) return 0;
  *x = alma__get_f64(t->data, t->dtype, 0);
  return 1;
}

int alma__fuse_near(double a, double b, double tol) { return fabs(a - b) <= tol * fabs(b); }

/* ---- edits ------------------------------------------------------------------------------------- */

alma_status alma__fuse_retype(alma__fuse_ctx *c, int i, const char *domain, const char *op_type, int version) {
  alma_node *n = &c->g->nodes[i];
  const alma_op_def *d = alma__op_find(domain, op_type);
  int listed = 0;
  for (int k = 0; d && k < ALMA_OP_MAX_VERSIONS && d->versions[k]; k++) listed |= d->versions[k] == version;
  if (!listed)
    return alma__errorf(ALMA_ERR_INTERNAL, "FUSE: operator %s:%s version %d is not in this build", domain[0] ? domain : "ai.onnx",
                        op_type, version);
  const char *t = alma__arena_strdup(c->g->arena, op_type), *dm = alma__arena_strdup(c->g->arena, domain);
  if (!t || !dm) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  n->op_type = t;
  n->domain = dm;
  n->op = d;
  n->since_version = version;
  return ALMA_OK;
}

alma_status alma__fuse_set_inputs(alma__fuse_ctx *c, int i, const int *inputs, int cnt) {
  alma_node *n = &c->g->nodes[i];
  int *in = alma__calloc((size_t)cnt + 1, sizeof(int));
  if (!in) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  memcpy(in, inputs, sizeof(int) * (size_t)cnt);
  /* trailing omitted inputs are dropped, as ONNX writes them */
  while (cnt > 0 && in[cnt - 1] < 0) cnt--;
  free(n->inputs);
  n->inputs = in;
  n->n_inputs = cnt;
  return ALMA_OK;
}

alma_status alma__fuse_set_output(alma__fuse_ctx *c, int i, int v) {
  alma_node *n = &c->g->nodes[i];
  int *out = alma__calloc(1, sizeof(int));
  if (!out) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  out[0] = v;
  free(n->outputs);
  n->outputs = out;
  n->n_outputs = 1;
  c->g->values[v].producer = i;
  return ALMA_OK;
}

void alma__fuse_kill(alma__fuse_ctx *c, int i) {
  if (i >= 0) c->g->nodes[i].dead = 1;
}

void alma__fuse_done(alma__fuse_ctx *c, int rule) {
  c->stats[rule]++;
  c->changed = 1;
}

/* A copy of node i's attributes without `name`, with room for one more. */
static alma_attr *attrs_without(alma__fuse_ctx *c, int i, const char *name, int *cnt) {
  alma_node *n = &c->g->nodes[i];
  alma_attr *a = alma__arena_alloc(c->g->arena, sizeof(alma_attr) * (size_t)(n->n_attrs + 1));
  if (!a) return NULL;
  int k = 0;
  for (int j = 0; j < n->n_attrs; j++)
    if (!name || strcmp(n->attrs[j].name, name)) a[k++] = n->attrs[j];
  *cnt = k;
  return a;
}

static alma_status attr_put(alma__fuse_ctx *c, int i, alma_attr at) {
  int k;
  alma_attr *a = attrs_without(c, i, at.name, &k);
  at.name = alma__arena_strdup(c->g->arena, at.name);
  if (!a || !at.name) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  a[k++] = at;
  c->g->nodes[i].attrs = a;
  c->g->nodes[i].n_attrs = k;
  return ALMA_OK;
}

alma_status alma__fuse_attr_clear(alma__fuse_ctx *c, int i) {
  c->g->nodes[i].attrs = NULL;
  c->g->nodes[i].n_attrs = 0;
  return ALMA_OK;
}

alma_status alma__fuse_attr_drop(alma__fuse_ctx *c, int i, const char *name) {
  int k;
  alma_attr *a = attrs_without(c, i, name, &k);
  if (!a) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  c->g->nodes[i].attrs = a;
  c->g->nodes[i].n_attrs = k;
  return ALMA_OK;
}

alma_status alma__fuse_attr_f(alma__fuse_ctx *c, int i, const char *name, float f) {
  return attr_put(c, i, (alma_attr){.name = name, .type = ALMA_ATTR_FLOAT, .f = f});
}

alma_status alma__fuse_attr_i(alma__fuse_ctx *c, int i, const char *name, int64_t v) {
  return attr_put(c, i, (alma_attr){.name = name, .type = ALMA_ATTR_INT, .i = v});
}

alma_status alma__fuse_attr_s(alma__fuse_ctx *c, int i, const char *name, const char *s) {
  char *cp = alma__arena_strdup(c->g->arena, s);
  if (!cp) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  return attr_put(c, i, (alma_attr){.name = name, .type = ALMA_ATTR_STRING, .s = cp, .s_len = strlen(s)});
}

alma_status alma__fuse_attr_floats(alma__fuse_ctx *c, int i, const char *name, const float *f, int cnt) {
  float *cp = alma__arena_alloc(c->g->arena, sizeof(float) * (size_t)(cnt + 1));
  if (!cp) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (cnt) memcpy(cp, f, sizeof(float) * (size_t)cnt);
  return attr_put(c, i, (alma_attr){.name = name, .type = ALMA_ATTR_FLOATS, .floats = cp, .n = cnt});
}

alma_status alma__fuse_attr_ints(alma__fuse_ctx *c, int i, const char *name, const int64_t *v, int cnt) {
  int64_t *cp = alma__arena_alloc(c->g->arena, sizeof(int64_t) * (size_t)(cnt + 1));
  if (!cp) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (cnt) memcpy(cp, v, sizeof(int64_t) * (size_t)cnt);
  return attr_put(c, i, (alma_attr){.name = name, .type = ALMA_ATTR_INTS, .ints = cp, .n = cnt});
}

int alma__fuse_new_const(alma__fuse_ctx *c, const char *base, alma_dtype dt, int rank, const int64_t *dims,
                         alma_tensor **t_out) {
  alma_graph *g = c->g;
  char name[512];
  do snprintf(name, sizeof name, "%s/fused_%d", base && base[0] ? base : "const", c->serial++);
  while (alma__graph_find_value(g, name) >= 0);
  alma_tensor *t = alma__arena_alloc(g->arena, sizeof *t);
  if (!t) {
    alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    return -1;
  }
  if (alma__tensor_alloc(t, dt, rank, dims) != ALMA_OK) return -1;
  int v = alma__graph_add_value(g, name);
  if (v < 0) {
    alma_tensor_free_data(t);
    alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    return -1;
  }
  alma_value *val = &g->values[v];
  val->init = t;
  val->dtype = dt;
  val->rank = rank;
  for (int k = 0; k < rank; k++) val->dims[k] = dims[k];
  *t_out = t;
  return v;
}

int alma__fuse_new_value(alma__fuse_ctx *c, const char *base) {
  char name[512];
  do snprintf(name, sizeof name, "%s/fused_%d", base && base[0] ? base : "value", c->serial++);
  while (alma__graph_find_value(c->g, name) >= 0);
  int v = alma__graph_add_value(c->g, name);
  if (v < 0) alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  return v;
}

int alma__fuse_new_ints(alma__fuse_ctx *c, const char *base, const int64_t *v, int n) {
  alma_tensor *t;
  int64_t d = n;
  int i = alma__fuse_new_const(c, base, ALMA_DTYPE_INT64, 1, &d, &t);
  if (i >= 0 && n > 0) memcpy(t->data, v, sizeof(int64_t) * (size_t)n);
  return i;
}

int alma__fuse_add_node(alma__fuse_ctx *c, const char *domain, const char *op_type, const char *base, const int *in,
                        int nin, const int *out, int nout) {
  alma_graph *g = c->g;
  char name[512];
  snprintf(name, sizeof name, "%s/fused_%s_%d", base && base[0] ? base : "node", op_type, c->serial++);
  int i = alma__graph_add_node(g, op_type, domain, name, in, nin, out, nout);
  if (i < 0) {
    alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    return -1;
  }
  int alma_dom = domain && !strcmp(domain, "alma");
  alma_status st = alma_dom ? alma__fuse_retype(c, i, "alma", op_type, 1)
                            : alma__op_resolve(&g->nodes[i], alma__graph_opset(g, ""));
  if (st != ALMA_OK) {
    g->nodes[i].dead = 1;
    return -1;
  }
  return i;
}

/* ---- driver ------------------------------------------------------------------------------------ */

static const struct {
  const char *name;
  alma__fuse_rule fn;
} rules[ALMA__FUSE_NRULES] = {
    /* Pad into its Conv/AveragePool first (it reads only the consumer's attributes), then
     * BatchNormalization (it needs the plain base ops), the subgraph patterns before the
     * epilogues so that e.g. Gemm + (GELU subgraph) ends as one FusedGemm, bias before residual
     * and residual before activation (Conv -> Add -> Relu). */
    [ALMA__FUSE_PAD] = {"pad", alma__fuse_rule_pad},
    [ALMA__FUSE_BN] = {"batchnorm", alma__fuse_rule_bn},
    [ALMA__FUSE_GELU] = {"gelu", alma__fuse_rule_gelu},
    [ALMA__FUSE_GELU_TANH] = {"gelu_tanh", alma__fuse_rule_gelu_tanh},
    [ALMA__FUSE_LN] = {"layernorm", alma__fuse_rule_layernorm},
    [ALMA__FUSE_RMS] = {"rmsnorm", alma__fuse_rule_rmsnorm},
    [ALMA__FUSE_ATTN] = {"attention", alma__fuse_rule_attention},
    [ALMA__FUSE_BIAS] = {"bias", alma__fuse_rule_bias},
    [ALMA__FUSE_RESID] = {"residual", alma__fuse_rule_residual},
    [ALMA__FUSE_ACT] = {"activation", alma__fuse_rule_activation},
};

/* The two inferences the rules read: the symbols bound under the relations the graph needs
 * (graph/symbind.h; a decode graph's attention_mask is one longer than its past) when that knows
 * more values than binding all of them to 2 and to 3, else those two. */
static alma_status fuse_infer(alma__fuse_ctx *c, const alma_symbind *sb) {
  alma_graph *g = c->g;
  alma_infer_result p[2];
  int have = alma__symbind_infer(g, sb, 0, FUSE_MAX_FOLD_ELEMS, &p[0]);
  if (have && !(have = alma__symbind_infer(g, sb, 1, FUSE_MAX_FOLD_ELEMS, &p[1]))) alma__infer_result_free(&p[0]);
  alma_status st = alma__graph_infer(g, NULL, 2, FUSE_MAX_FOLD_ELEMS, &c->r[0]);
  if (st == ALMA_OK && (st = alma__graph_infer(g, NULL, 3, FUSE_MAX_FOLD_ELEMS, &c->r[1])) != ALMA_OK)
    alma__infer_result_free(&c->r[0]);
  if (have && (st != ALMA_OK || p[0].n_unknown + p[1].n_unknown < c->r[0].n_unknown + c->r[1].n_unknown)) {
    if (st == ALMA_OK)
      for (int b = 0; b < 2; b++) alma__infer_result_free(&c->r[b]);
    c->r[0] = p[0], c->r[1] = p[1];
    return ALMA_OK;
  }
  if (have)
    for (int b = 0; b < 2; b++) alma__infer_result_free(&p[b]);
  return st;
}

static alma_status fuse_iteration(alma__fuse_ctx *c, const alma_symbind *sb) {
  alma_graph *g = c->g;
  alma_status st = fuse_infer(c, sb);
  if (st != ALMA_OK) return st;
  /* Rules edit in place and keep every surviving value's shape, so one inference serves them all. */
  for (int r = 0; st == ALMA_OK && r < ALMA__FUSE_NRULES; r++)
    for (int i = 0; st == ALMA_OK && i < g->n_nodes; i++)
      if (!g->nodes[i].dead) st = rules[r].fn(c, i);
  alma__infer_result_free(&c->r[0]);
  alma__infer_result_free(&c->r[1]);
  if (st == ALMA_OK) st = alma__graph_compact(g);
  return st;
}

static alma_status fuse_run(alma_graph *g, const alma_pass_opts *opts) {
  alma__fuse_ctx c;
  memset(&c, 0, sizeof c);
  c.g = g;
  int before = g->n_nodes;
  alma_symbind sb;
  ALMA_TRY(alma__symbind_discover(g, FUSE_MAX_FOLD_ELEMS, &sb));
  /* A rewrite can enable another (Conv + BN + BN, MatMul + Add -> Gemm + activation): repeat until
   * nothing changes. */
  alma_status st = ALMA_OK;
  for (int iter = 0; iter < 4 && st == ALMA_OK; iter++) {
    c.changed = 0;
    st = fuse_iteration(&c, &sb);
    if (!c.changed) break;
  }
  alma__symbind_free(&sb);
  ALMA_TRY(st);
  if (opts && opts->verbose) {
    fprintf(stderr, "FUSE: %d -> %d nodes (", before, g->n_nodes);
    for (int r = 0; r < ALMA__FUSE_NRULES; r++) fprintf(stderr, "%s%s %d", r ? ", " : "", rules[r].name, c.stats[r]);
    fprintf(stderr, ")\n");
  }
  return ALMA_OK;
}

const alma_pass alma__pass_fuse = {
    .name = "FUSE",
    .description = "zero Pad -> Conv/AveragePool pads, Conv/Gemm/MatMul + BatchNormalization/bias/residual/activation, "
                   "MatMul+Add -> Gemm, LayerNorm/RMSNorm/GELU/attention subgraphs -> single nodes",
    .run = fuse_run,
    .emits_alma_ops = 1,
};
