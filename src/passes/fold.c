/* FOLD: constant folding (including shape subgraphs), Identity/Dropout/same-type Cast removal,
 * removal of Slices that take every element, If nodes of a constant condition replaced by the
 * branch taken, dead nodes.
 *
 * A value is constant when static inference computes it from initializers. Shape subgraphs
 * (Shape -> Gather -> Concat -> Reshape, as PyTorch exports them) depend on symbolic dims, so
 * inference runs twice with the symbolic dims bound to 2 and to 3: a value computed in both runs
 * with identical contents does not depend on them and is folded. Binding every symbol to the same
 * value hides what depends on their differences: an LLM decode graph slices positions
 * [past : total] of its attention_mask, total - past = 0 in both runs, and a dim that is 1 at run
 * time was folded to 0. Two more runs bind the symbols as graph/symbind.h says (distinct values
 * for unrelated symbols, in two orders, and the relations the graph needs, such as total = past
 * + 1), and a third with the free symbols above 500: small bindings all agree on dims that strided
 * layers shrink to 1 (W = 2, 3, 4 through two stride-2 convolutions), which are not constant. A
 * value one of them computes differently is not folded. Where those runs stop early, they say
 * nothing and the first two decide. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/symbind.h"
#include "passes/pass.h"

#define FOLD_MAX_ELEMS ((int64_t)1 << 26) /* values the probing inferences compute (each run holds its own) */
/* A node whose inputs are all constants computes the same tensor on every inference: folded once up
 * to this size (1 GiB), outside the probing runs. The runtime holds that tensor during every
 * inference anyway, so folding it adds no peak memory; what it adds is the copy kept between
 * inferences (and in saved or cached graphs). Above the limit the node is left to run. */
#define FOLD_MAX_CONST_BYTES ((int64_t)1 << 30)

static int same_tensor(const alma_tensor *a, const alma_tensor *b) {
  /* a sequence/optional is never folded: an initializer holds a tensor */
  return a->data && b->data && a->dtype == b->dtype && !alma__dtype_is_container(a->dtype) && alma__same_shape(a, b) && a->nbytes == b->nbytes &&
         !memcmp(a->data, b->data, a->nbytes);
}

static int used_by_subgraph(const alma_graph *g, int v) {
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_implicit; k++)
      if (g->nodes[i].implicit_inputs[k] == v) return 1;
  return 0;
}

static int remove_identities(alma_graph *g, const alma_symbind *sb) {
  int changed = 0;
  /* dtypes of intermediate values come from inference: a model need not declare them (under the
   * symbols' relations when that knows more: past a decode graph's first KV Concat) */
  alma_infer_result r, rs;
  int have_r = alma__graph_infer(g, NULL, 2, 1 << 16, &r) == ALMA_OK;
  if (alma__symbind_infer(g, sb, 0, 1 << 16, &rs)) {
    if (!have_r || rs.n_unknown < r.n_unknown) {
      if (have_r) alma__infer_result_free(&r);
      r = rs, have_r = 1;
    } else {
      alma__infer_result_free(&rs);
    }
  }
  for (int i = 0; i < g->n_nodes; i++) {
    alma_node *n = &g->nodes[i];
    if (n->dead || n->n_inputs < 1 || n->inputs[0] < 0) continue;
    int is_id = !strcmp(n->op_type, "Identity") && !n->domain[0];
    int is_drop = !strcmp(n->op_type, "Dropout") && !n->domain[0] &&
                  (n->n_outputs < 2 || n->outputs[1] < 0 || alma__graph_count_uses(g, n->outputs[1]) == 0);
    /* Dropout in training mode (opset 12+: third input true) is not an identity. */
    if (is_drop && n->n_inputs >= 3 && n->inputs[2] >= 0) {
      const alma_tensor *tm = g->values[n->inputs[2]].init;
      if (!tm || alma__get_i64(tm->data, tm->dtype, 0)) is_drop = 0;
    }
    /* Cast to the type it already has (PyTorch exports `.to(torch.float32)` on float32 tensors as
     * one) is an identity too; removing it lets FUSE see the pattern around it. */
    alma_dtype in_dt = have_r ? r.info[n->inputs[0]].dtype : g->values[n->inputs[0]].dtype;
    int is_cast = !strcmp(n->op_type, "Cast") && !n->domain[0] && in_dt != ALMA_DTYPE_UNDEFINED &&
                  alma__attr_i(n, "to", 0) == (int64_t)in_dt;
    if (!is_id && !is_drop && !is_cast) continue;
    int x = n->inputs[0], y = n->outputs[0];
    if (y < 0 || g->values[y].is_output || used_by_subgraph(g, y)) continue;
    for (int j = 0; j < g->n_nodes; j++)
      for (int k = 0; k < g->nodes[j].n_inputs; k++)
        if (g->nodes[j].inputs[k] == y) g->nodes[j].inputs[k] = x;
    n->dead = 1;
    changed = 1;
  }
  if (have_r) alma__infer_result_free(&r);
  return changed;
}

/* ---- Slices that take every element ----
 * tf2onnx writes strided_slice over whole axes (starts 0 and ends INT_MAX, or an end equal to a
 * dim of 1): a copy of the input on every inference. An axis is whole when its step is 1 and its
 * range covers it: by the dim where inference finds the same dim in every probing run (symbols
 * bound to 2, to 3, and as symbind.h says, large ones included), else by the largest dim the axis
 * can have: a tensor fits in a 48-bit address space, so its dim is at most 2^48 bytes over the
 * element size times the other dims known (tf2onnx's end of 1e9 on a batch axis of [N, 512, 256]
 * floats covers N <= 2^29; PyTorch's INT64_MAX covers anything). */

/* Node n's integer list: input k (opset 10+, a constant) or attribute attr (Slice-1); its count,
 * 0 when absent, -1 when not a constant or longer than max. */
static int slice_param(const alma_graph *g, const alma_node *n, int k, const char *attr, int64_t *v, int max) {
  if (n->since_version < 10) {
    const int64_t *a;
    int c = alma__attr_ints(n, attr, &a);
    if (c > max) return -1;
    for (int i = 0; i < c; i++) v[i] = a[i];
    return c;
  }
  if (k >= n->n_inputs || n->inputs[k] < 0) return 0;
  const alma_tensor *t = g->values[n->inputs[k]].init;
  if (!t || (t->dtype != ALMA_DTYPE_INT64 && t->dtype != ALMA_DTYPE_INT32)) return -1;
  int64_t c = alma_tensor_numel(t);
  if (c > max) return -1;
  for (int64_t i = 0; i < c; i++) v[i] = alma__get_i64(t->data, t->dtype, i);
  return (int)c;
}

/* The dim of axis a of value x when every run in rs agrees on it, else -1. */
static int64_t agreed_dim(const alma_infer_result *rs, int nr, int x, int a) {
  int64_t d = -1;
  for (int i = 0; i < nr; i++) {
    const alma_tensor *t = &rs[i].info[x];
    if (t->rank <= a || t->dims[a] < 0 || (i && t->dims[a] != d)) return -1;
    d = t->dims[a];
  }
  return d;
}

/* 1 when Slice node n takes every element of its input (rank from rs[0]). */
static int whole_slice(const alma_graph *g, const alma_node *n, const alma_infer_result *rs, int nr) {
  int64_t st[ALMA_MAX_RANK], en[ALMA_MAX_RANK], ax[ALMA_MAX_RANK], sp[ALMA_MAX_RANK];
  int x = n->inputs[0], R = rs[0].info[x].rank;
  int ns = slice_param(g, n, 1, "starts", st, ALMA_MAX_RANK), ne = slice_param(g, n, 2, "ends", en, ALMA_MAX_RANK);
  int na = slice_param(g, n, 3, "axes", ax, ALMA_MAX_RANK), np = n->since_version < 10 ? 0 : slice_param(g, n, 4, "", sp, ALMA_MAX_RANK);
  if (R < 1 || ns < 0 || ne != ns || na < 0 || np < 0 || (na && na != ns) || (np && np != ns)) return 0;
  int seen[ALMA_MAX_RANK] = {0};
  int64_t known = (int64_t)alma_dtype_size(rs[0].info[x].dtype); /* bytes of an element times the agreed dims */
  if (known < 1) known = 1;
  for (int a = 0; a < R; a++) {
    int64_t d = agreed_dim(rs, nr, x, a);
    if (d == 0) return 0; /* empty: nothing to copy anyway */
    if (d > 0) known = known > ((int64_t)1 << 48) / d ? ((int64_t)1 << 48) : known * d;
  }
  for (int i = 0; i < ns; i++) {
    int64_t a = na ? ax[i] : i;
    if (a < 0) a += R;
    if (a < 0 || a >= R || seen[a]++ || (np && sp[i] != 1)) return 0;
    int64_t d = agreed_dim(rs, nr, x, (int)a), s = st[i], e = en[i];
    if (d > 0) {
      if ((s < 0 ? s + d : s) > 0 || (e < 0 ? e + d : e) < d) return 0;
    } else {
      int64_t most = ((int64_t)1 << 48) / known; /* the largest this unknown dim can be */
      if (!(s == 0 || s <= -most) || e < most) return 0;
    }
  }
  return 1;
}

static int remove_whole_slices(alma_graph *g, const alma_symbind *sb) {
  int any = 0;
  for (int i = 0; i < g->n_nodes && !any; i++)
    any = !g->nodes[i].dead && !strcmp(g->nodes[i].op_type, "Slice") && !g->nodes[i].domain[0];
  if (!any) return 0;
  alma_infer_result rs[5];
  int nr = 0, changed = 0;
  if (alma__graph_infer(g, NULL, 2, 1 << 16, &rs[nr]) == ALMA_OK) nr++;
  if (nr && alma__graph_infer(g, NULL, 3, 1 << 16, &rs[nr]) == ALMA_OK) nr++;
  for (int v = 0; nr == 2 && v < 3; v++) nr += alma__symbind_infer(g, sb, v, 1 << 16, &rs[nr]);
  for (int i = 0; nr >= 2 && i < g->n_nodes; i++) {
    alma_node *n = &g->nodes[i];
    if (n->dead || strcmp(n->op_type, "Slice") || n->domain[0] || n->n_inputs < 1 || n->inputs[0] < 0 ||
        n->n_outputs < 1 || n->outputs[0] < 0)
      continue;
    int x = n->inputs[0], y = n->outputs[0];
    if (g->values[y].is_output || used_by_subgraph(g, y) || !whole_slice(g, n, rs, nr)) continue;
    for (int j = 0; j < g->n_nodes; j++)
      for (int k = 0; k < g->nodes[j].n_inputs; k++)
        if (g->nodes[j].inputs[k] == y) g->nodes[j].inputs[k] = x;
    n->dead = 1;
    changed = 1;
  }
  for (int i = 0; i < nr; i++) alma__infer_result_free(&rs[i]);
  return changed;
}

static alma_status fold_constants(alma_graph *g, const alma_symbind *sb, int *changed) {
  alma_infer_result r2, r3, rd[3];
  ALMA_TRY(alma__graph_infer(g, NULL, 2, FOLD_MAX_ELEMS, &r2));
  alma_status st = alma__graph_infer(g, NULL, 3, FOLD_MAX_ELEMS, &r3);
  if (st != ALMA_OK) {
    alma__infer_result_free(&r2);
    return st;
  }
  int have[3];
  for (int p = 0; p < 3; p++) have[p] = alma__symbind_infer(g, sb, p, FOLD_MAX_ELEMS, &rd[p]);
  for (int i = 0; i < g->n_nodes && st == ALMA_OK; i++) {
    alma_node *n = &g->nodes[i];
    if (n->dead || n->n_implicit) continue;
    int all_const = 1;
    for (int k = 0; k < n->n_outputs; k++) {
      int v = n->outputs[k];
      if (v >= 0 && !same_tensor(&r2.info[v], &r3.info[v])) all_const = 0;
      for (int p = 0; p < 3 && v >= 0; p++) /* computed there, and differently: it depends on them */
        if (have[p] && rd[p].info[v].data && !same_tensor(&r2.info[v], &rd[p].info[v])) all_const = 0;
    }
    if (!all_const) continue;
    for (int k = 0; k < n->n_outputs && st == ALMA_OK; k++) {
      int v = n->outputs[k];
      if (v < 0) continue;
      alma_tensor *t = alma__arena_alloc(g->arena, sizeof *t);
      if (!t) {
        st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
        break;
      }
      st = alma__tensor_copy(t, &r2.info[v]);
      g->values[v].init = t;
      g->values[v].producer = -1;
      g->values[v].dtype = t->dtype;
      g->values[v].rank = t->rank;
      for (int d = 0; d < t->rank; d++) g->values[v].dims[d] = t->dims[d];
    }
    n->dead = 1;
    *changed = 1;
  }
  alma__infer_result_free(&r2);
  alma__infer_result_free(&r3);
  for (int p = 0; p < 3; p++)
    if (have[p]) alma__infer_result_free(&rd[p]);
  return st;
}

/* Random ops differ between runs: never folded, whatever their inputs. */
static int nondeterministic(const alma_node *n) {
  return !strncmp(n->op_type, "Random", 6) || !strcmp(n->op_type, "Bernoulli") || !strcmp(n->op_type, "Multinomial");
}

/* Nodes of constant inputs only whose outputs are too large for the probing runs (FOLD_MAX_ELEMS)
 * but within FOLD_MAX_CONST_BYTES: evaluated once (a ConstantOfShape building a weight, the Mul or
 * Expand after it on the next round). */
static alma_status fold_large(alma_graph *g, int *changed) {
  for (int i = 0; i < g->n_nodes; i++) {
    alma_node *n = &g->nodes[i];
    if (n->dead || n->n_implicit || !n->op || n->n_inputs > 64 || n->n_outputs > 64 || nondeterministic(n)) continue;
    const alma_tensor *in[64];
    int ok = 1;
    for (int k = 0; k < n->n_inputs && ok; k++) {
      int v = n->inputs[k];
      in[k] = v >= 0 ? g->values[v].init : NULL;
      if (v >= 0 && (!in[k] || !in[k]->data || alma__dtype_is_container(in[k]->dtype))) ok = 0;
    }
    for (int k = 0; k < n->n_outputs && ok; k++)
      if (n->outputs[k] >= 0 && (g->values[n->outputs[k]].is_output || used_by_subgraph(g, n->outputs[k]))) ok = 0;
    if (!ok) continue;
    alma_tensor outs[64];
    memset(outs, 0, sizeof(alma_tensor) * (size_t)n->n_outputs);
    if (n->op->infer(n, in, n->n_inputs, outs, n->n_outputs) != ALMA_OK) {
      alma__error_clear(); /* the runtime reports it when the node runs */
      for (int k = 0; k < n->n_outputs; k++) alma_tensor_free_data(&outs[k]);
      continue;
    }
    int64_t elems = 0, bytes = 0;
    for (int k = 0; k < n->n_outputs; k++) {
      if (alma__dtype_is_container(outs[k].dtype) || outs[k].rank < 0) ok = 0;
      int64_t e = ok ? alma__numel(outs[k].rank, outs[k].dims) : 0;
      elems += e;
      bytes += e * (int64_t)alma_dtype_size(outs[k].dtype);
      alma_tensor_free_data(&outs[k]);
    }
    if (!ok || elems <= FOLD_MAX_ELEMS || bytes > FOLD_MAX_CONST_BYTES) continue; /* small ones: fold_constants */
    alma_tensor res[64];
    if (alma__op_run_node(NULL, n, in, n->n_inputs, res, n->n_outputs) != ALMA_OK) {
      alma__error_clear();
      continue;
    }
    alma_status st = ALMA_OK;
    for (int k = 0; k < n->n_outputs; k++) {
      int v = n->outputs[k];
      alma_tensor *t = v >= 0 && st == ALMA_OK ? alma__arena_alloc(g->arena, sizeof *t) : NULL;
      if (!t) {
        if (v >= 0) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
        alma_tensor_free_data(&res[k]);
        continue;
      }
      *t = res[k]; /* owned: freed with the graph's initializers */
      g->values[v].init = t;
      g->values[v].producer = -1;
      g->values[v].dtype = t->dtype;
      g->values[v].rank = t->rank;
      for (int d = 0; d < t->rank; d++) g->values[v].dims[d] = t->dims[d];
    }
    ALMA_TRY(st);
    ALMA_LOGD("FOLD: node '%s' (%s) folded: %lld MiB of constants", n->name, n->op_type, (long long)(bytes >> 20));
    n->dead = 1;
    *changed = 1;
  }
  return ALMA_OK;
}

/* A fresh value name in g: `name` itself when free, else name/inlined_N. */
static int fresh_value(alma_graph *g, const char *name, int *serial) {
  char buf[512];
  if (alma__graph_find_value(g, name) < 0) return alma__graph_add_value(g, name);
  do snprintf(buf, sizeof buf, "%s/inlined_%d", name, (*serial)++);
  while (alma__graph_find_value(g, buf) >= 0);
  return alma__graph_add_value(g, buf);
}

/* An If whose condition is constant (folded above: the same under every binding FOLD probes, as
 * LLaMA's `Equal(Shape(cos)[0], 1)` of torch's conditional squeeze) is replaced by the nodes of the
 * branch it takes, which then fold, fuse and plan like the rest of the graph. The branch's outer
 * references become the values they name here, its initializers this graph's, and each If output an
 * Identity of the branch output (removed by the next round). A branch whose nodes hold subgraphs
 * stays an If: their outer references would name the branch's values. *done = 1 when inlined. */
static alma_status inline_if(alma_graph *g, int ni, int *serial, int *done) {
  *done = 0;
  const alma_node *n = &g->nodes[ni];
  const alma_tensor *c = n->n_inputs == 1 && n->inputs[0] >= 0 ? g->values[n->inputs[0]].init : NULL;
  if (!c || !c->data || alma_tensor_numel(c) != 1 || alma__dtype_is_container(c->dtype)) return ALMA_OK;
  const alma_attr *a = alma__node_attr(n, alma__get_f64(c->data, c->dtype, 0) != 0.0 ? "then_branch" : "else_branch");
  const alma_graph *b = a && a->type == ALMA_ATTR_GRAPH ? a->g : NULL;
  if (!b || b->n_inputs || b->n_outputs != n->n_outputs) return ALMA_OK;
  for (int i = 0; i < b->n_nodes; i++) {
    if (b->nodes[i].n_implicit || !b->nodes[i].op) return ALMA_OK;
    for (int k = 0; k < b->nodes[i].n_attrs; k++)
      if (b->nodes[i].attrs[k].g || b->nodes[i].attrs[k].graphs) return ALMA_OK;
  }
  int *map = malloc(sizeof(int) * ((size_t)b->n_values + 1));
  if (!map) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  alma_status st = ALMA_OK;
  for (int v = 0; v < b->n_values; v++) {
    map[v] = -1;
    if (b->values[v].is_outer && (map[v] = alma__graph_find_value(g, b->values[v].name)) < 0) {
      free(map);
      return ALMA_OK; /* not this graph's: nothing changed yet */
    }
  }
  /* from here on g changes: values and nodes are added, the If dies */
  for (int v = 0; v < b->n_values && st == ALMA_OK; v++) {
    const alma_value *bv = &b->values[v];
    if (bv->is_outer || !bv->init) continue; /* produced values are added with their nodes */
    int x = fresh_value(g, bv->name, serial);
    alma_tensor *t = x >= 0 ? alma__arena_alloc(g->arena, sizeof *t) : NULL;
    if (!t) {
      st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      break;
    }
    /* the branch (freed with the If by compaction) may own its data: copy it then */
    if (bv->init->owns_data) st = alma__tensor_copy(t, bv->init);
    else *t = alma__tensor_view(bv->init);
    g->values[x].init = t;
    g->values[x].dtype = t->dtype;
    g->values[x].rank = t->rank;
    for (int d = 0; d < t->rank; d++) g->values[x].dims[d] = t->dims[d];
    map[v] = x;
  }
  for (int i = 0; i < b->n_nodes && st == ALMA_OK; i++) {
    const alma_node *bn = &b->nodes[i];
    int ins[64], outs[64];
    if (bn->n_inputs > 64 || bn->n_outputs > 64) {
      st = alma__errorf(ALMA_ERR_UNSUPPORTED, "node '%s': too many inputs or outputs to inline", bn->name);
      break;
    }
    for (int k = 0; k < bn->n_inputs; k++) ins[k] = bn->inputs[k] >= 0 ? map[bn->inputs[k]] : -1;
    for (int k = 0; k < bn->n_outputs && st == ALMA_OK; k++) {
      outs[k] = -1;
      if (bn->outputs[k] < 0) continue;
      if ((outs[k] = map[bn->outputs[k]] = fresh_value(g, b->values[bn->outputs[k]].name, serial)) < 0)
        st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    }
    int k = st == ALMA_OK ? alma__graph_add_node(g, bn->op_type, bn->domain, bn->name, ins, bn->n_inputs, outs, bn->n_outputs) : -1;
    if (st == ALMA_OK && k < 0) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    if (st != ALMA_OK) break;
    alma_node *nn = &g->nodes[k];
    nn->attrs = bn->attrs; /* arena payloads, never mutated (no subgraphs: checked above) */
    nn->n_attrs = bn->n_attrs;
    nn->op = bn->op;
    nn->since_version = bn->since_version;
  }
  for (int k = 0; k < b->n_outputs && st == ALMA_OK; k++) {
    int y = g->nodes[ni].outputs[k], x = map[b->outputs[k]];
    if (y < 0) continue;
    if (x < 0) {
      st = alma__errorf(ALMA_ERR_INVALID_MODEL, "node '%s' (If): branch output '%s' is never produced", g->nodes[ni].name,
                        b->values[b->outputs[k]].name);
      break;
    }
    int id = alma__graph_add_node(g, "Identity", "", g->nodes[ni].name, &x, 1, &y, 1);
    if (id < 0) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    else st = alma__op_resolve(&g->nodes[id], alma__graph_opset(g, ""));
  }
  free(map);
  if (st == ALMA_OK) g->nodes[ni].dead = 1, *done = 1;
  return st;
}

static alma_status inline_ifs(alma_graph *g, int *changed) {
  int serial = 0, n0 = g->n_nodes;
  for (int i = 0; i < n0; i++) {
    if (g->nodes[i].dead || g->nodes[i].domain[0] || strcmp(g->nodes[i].op_type, "If")) continue;
    int done;
    ALMA_TRY(inline_if(g, i, &serial, &done));
    *changed |= done;
  }
  return ALMA_OK;
}

static int remove_dead(alma_graph *g) {
  int changed = 0;
  for (int i = g->n_nodes - 1; i >= 0; i--) {
    alma_node *n = &g->nodes[i];
    if (n->dead) continue;
    int used = 0;
    for (int k = 0; k < n->n_outputs && !used; k++)
      used = n->outputs[k] >= 0 && alma__graph_count_uses(g, n->outputs[k]) > 0;
    if (!used) {
      n->dead = 1;
      changed = 1;
    }
  }
  return changed;
}

static alma_status fold_run(alma_graph *g, const alma_pass_opts *opts) {
  int before = g->n_nodes;
  alma_symbind sb;
  alma_status st = alma__symbind_discover(g, FOLD_MAX_ELEMS, &sb);
  for (int iter = 0; iter < 8 && st == ALMA_OK; iter++) {
    int changed = remove_identities(g, &sb);
    changed |= remove_whole_slices(g, &sb);
    st = fold_constants(g, &sb, &changed);
    if (st == ALMA_OK) st = fold_large(g, &changed);
    if (st == ALMA_OK) st = inline_ifs(g, &changed);
    changed |= remove_dead(g);
    if (st == ALMA_OK) st = alma__graph_compact(g);
    if (!changed) break;
  }
  alma__symbind_free(&sb);
  ALMA_TRY(st);
  if (opts && opts->verbose) fprintf(stderr, "FOLD: %d -> %d nodes\n", before, g->n_nodes);
  return ALMA_OK;
}

const alma_pass alma__pass_fold = {
    .name = "FOLD",
    .description = "constant folding incl. shape subgraphs, Identity/Dropout/whole-Slice removal, dead-node elimination",
    .run = fold_run,
};
