/* Static inference: shapes, dtypes, constant propagation; the memory plan; MAC counts. */
#include "graph/infer.h"

alma_status alma__graph_resolve_ops(alma_graph *g) {
  for (int i = 0; i < g->n_nodes; i++) {
    alma_node *n = &g->nodes[i];
    int64_t opset = alma__graph_opset(g, n->domain);
    /* IR version 1/2 files may omit the import; ONNX reads that as ai.onnx opset 1. */
    if (opset <= 0 && (!n->domain[0] || !strcmp(n->domain, "ai.onnx")) && g->n_opsets == 0) opset = 1;
    if (opset <= 0)
      return alma__errorf(ALMA_ERR_INVALID_MODEL, "node '%s' (%s): its domain '%s' is not imported by the model",
                          n->name, n->op_type, n->domain);
    ALMA_TRY(alma__op_resolve(n, opset));
    for (int a = 0; a < n->n_attrs; a++) {
      if (n->attrs[a].g) ALMA_TRY(alma__graph_resolve_ops(n->attrs[a].g));
      for (int k = 0; n->attrs[a].graphs && k < n->attrs[a].n; k++) ALMA_TRY(alma__graph_resolve_ops(n->attrs[a].graphs[k]));
    }
  }
  return ALMA_OK;
}

void alma__infer_result_free(alma_infer_result *r) {
  if (!r->info) return;
  for (int v = 0; v < r->n_values; v++) alma_tensor_free_data(&r->info[v]);
  free(r->info);
  r->info = NULL;
}

static int is_bound_error(alma_status st) { return st == ALMA_ERR_SHAPE || st == ALMA_ERR_INVALID_ARG; }

/* No real model has a tensor of 2^40 elements (4 TB of float); refusing such shapes up front keeps
 * every later size, cost and memory-plan computation far from int64 overflow. */
#define ALMA__MAX_ELEMS ((int64_t)1 << 40)

static int plausible_shape(const alma_tensor *t) {
  if (t->rank < 0) return 1;
  int64_t n = 1;
  for (int k = 0; k < t->rank; k++)
    if (t->dims[k] < 0 || alma__mul_overflow_i64(n, t->dims[k], &n) || n > ALMA__MAX_ELEMS) return 0;
  return 1;
}

static void add_cost(int64_t *acc, int64_t v) {
  if (*acc < 0) return;
  if (v < 0 || __builtin_add_overflow(*acc, v, acc)) *acc = -1;
}

static alma_status infer_scoped(const alma_graph *g, const alma_tensor *const *input_shapes, int64_t default_dim,
                                int64_t max_fold_elems, const alma_graph *outer, const alma_tensor *outer_info,
                                alma_infer_result *out);

static int is_if(const alma_node *n) { return !n->domain[0] && !strcmp(n->op_type, "If"); }

/* If, as ONNX infers it: each branch is inferred with the outer scope's values (shapes, and data
 * where known: a branch reading a constant computes it). A known condition (constant under this
 * binding) takes its branch's results, data included; otherwise both branches are inferred and an
 * output is known when they agree on dtype, rank and every dim. ONNX keeps the rank and makes a
 * differing dim unknown; static inference here binds every dim to a number, so such an output is
 * unknown as a whole. A branch that fails to infer (the branch not taken may be invalid for these
 * shapes: LLaMA's Squeeze of a dim that is not 1) leaves the outputs unknown, never an error.
 * outs (if_infer's: rank -1) get owned data when the taken branch computed it. */
static alma_status infer_if(const alma_graph *g, const alma_node *n, const alma_tensor *info, const alma_tensor *cond,
                            int64_t default_dim, int64_t max_fold, alma_tensor *outs, int nout) {
  const alma_attr *at = alma__node_attr(n, "then_branch"), *ae = alma__node_attr(n, "else_branch");
  const alma_graph *br[2] = {at ? at->g : NULL, ae ? ae->g : NULL};
  if (!br[0] || !br[1] || br[0]->n_outputs != nout || br[1]->n_outputs != nout) return ALMA_OK;
  int take = -1;
  if (cond && cond->data && alma_tensor_numel(cond) == 1) take = alma__get_f64(cond->data, cond->dtype, 0) != 0.0 ? 0 : 1;
  alma_infer_result r[2];
  int have[2] = {0, 0};
  alma_status st = ALMA_OK;
  for (int b = 0; b < 2; b++) {
    if (take >= 0 && b != take) continue;
    st = infer_scoped(br[b], NULL, default_dim, max_fold, g, info, &r[b]);
    if (st != ALMA_OK) {
      alma__infer_result_free(&r[b]);
      if (st == ALMA_ERR_NOMEM) break;
      ALMA_LOGD("static inference: node '%s' (If): branch '%s' not inferred: %s", n->name, br[b]->name,
                alma_last_error());
      st = ALMA_OK;
      goto done;
    }
    have[b] = 1;
  }
  if (st != ALMA_OK) goto done;
  for (int k = 0; k < nout; k++) {
    if (take >= 0) {
      const alma_tensor *a = &r[take].info[br[take]->outputs[k]];
      if (a->rank < 0 || a->dtype == ALMA_DTYPE_UNDEFINED) continue;
      if (a->data && !alma__dtype_is_container(a->dtype) && alma__numel(a->rank, a->dims) <= max_fold) {
        st = alma__tensor_copy(&outs[k], a);
        if (st != ALMA_OK) goto done;
      } else {
        alma__set_shape(&outs[k], a->dtype, a->rank, a->dims);
      }
      continue;
    }
    const alma_tensor *t = &r[0].info[br[0]->outputs[k]], *e = &r[1].info[br[1]->outputs[k]];
    if (t->rank < 0 || e->rank < 0 || t->dtype != e->dtype || t->dtype == ALMA_DTYPE_UNDEFINED || t->rank != e->rank)
      continue;
    int same = 1;
    for (int d = 0; d < t->rank; d++) same &= t->dims[d] == e->dims[d];
    if (same) alma__set_shape(&outs[k], t->dtype, t->rank, t->dims);
  }
done:
  for (int b = 0; b < 2; b++)
    if (have[b]) alma__infer_result_free(&r[b]);
  return st;
}

alma_status alma__graph_infer(const alma_graph *g, const alma_tensor *const *input_shapes, int64_t default_dim,
                              int64_t max_fold_elems, alma_infer_result *out) {
  return infer_scoped(g, input_shapes, default_dim, max_fold_elems, NULL, NULL, out);
}

/* outer/outer_info: for a subgraph, the enclosing graph and its inference results, which give the
 * subgraph's outer references (by name) their shapes and data. */
static alma_status infer_scoped(const alma_graph *g, const alma_tensor *const *input_shapes, int64_t default_dim,
                                int64_t max_fold_elems, const alma_graph *outer, const alma_tensor *outer_info,
                                alma_infer_result *out) {
  memset(out, 0, sizeof *out);
  out->n_values = g->n_values;
  out->info = calloc((size_t)g->n_values + 1, sizeof(alma_tensor));
  if (!out->info) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  alma_tensor *info = out->info;
  int symbolic = 0;
  for (int v = 0; v < g->n_values; v++) {
    const alma_value *val = &g->values[v];
    info[v].rank = -1;
    if (val->init) {
      info[v] = alma__tensor_view(val->init);
    } else if (val->is_outer) {
      info[v].rank = -1; /* known only inside the enclosing execution, or from its inference */
      int o = outer ? alma__graph_find_value(outer, val->name) : -1;
      if (o >= 0) info[v] = alma__tensor_view(&outer_info[o]);
    }
  }
  for (int i = 0; i < g->n_inputs; i++) {
    int v = g->inputs[i];
    const alma_value *val = &g->values[v];
    const alma_tensor *given = input_shapes ? input_shapes[i] : NULL;
    if (given) {
      alma__set_shape(&info[v], given->dtype ? given->dtype : val->dtype, given->rank, given->dims);
      /* a declared symbolic dim bound by the caller: errors it causes are the binding's (FOLD's
       * probes bind symbols to values that need not agree with each other) */
      for (int k = 0; k < val->rank && val->rank == given->rank; k++) symbolic |= val->dims[k] < 0;
      continue;
    }
    if (val->rank < 0 || val->dtype == ALMA_DTYPE_UNDEFINED) {
      info[v].rank = -1;
      continue;
    }
    info[v].dtype = val->dtype;
    info[v].rank = val->rank;
    for (int k = 0; k < val->rank; k++) {
      info[v].dims[k] = val->dims[k] >= 0 ? val->dims[k] : default_dim;
      symbolic |= val->dims[k] < 0;
    }
  }
  for (int i = 0; i < g->n_inputs; i++)
    if (!plausible_shape(&info[g->inputs[i]]))
      return alma__errorf(ALMA_ERR_SHAPE, "input '%s': shape too large (more than 2^40 elements)", g->values[g->inputs[i]].name);
  out->macs = out->flops = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    const alma_tensor *in[4096];
    alma_tensor outs[64];
    int known = 1, all_data = 1;
    if (n->n_outputs > 64 || n->n_inputs > 4096)
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "too many inputs or outputs");
    for (int k = 0; k < n->n_inputs; k++) {
      int v = n->inputs[k];
      in[k] = v >= 0 ? &info[v] : NULL;
      if (v >= 0 && info[v].rank < 0) known = 0;
      if (v >= 0 && !info[v].data) all_data = 0;
    }
    /* Shape and Size read only their input's dims, so they evaluate without its data: that is what
     * lets shape subgraphs (Shape -> Gather -> Concat -> Reshape) resolve statically. */
    if (!n->domain[0] && (!strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size")) && known) all_data = 1;
    if (n->n_implicit) all_data = 0; /* subgraph ops are not evaluated statically */
    memset(outs, 0, sizeof outs);
    ALMA_TRY(alma__op_check_strings(n, in, n->n_inputs, NULL, 0));
    alma_status st = known ? n->op->infer(n, in, n->n_inputs, outs, n->n_outputs) : ALMA_ERR_DYNAMIC;
    if (st != ALMA_OK && st != ALMA_ERR_DYNAMIC) {
      if (symbolic && is_bound_error(st)) {
        ALMA_LOGD("static inference stopped at node '%s' with symbolic dims bound to %lld: %s", n->name,
                  (long long)default_dim, alma_last_error());
        st = ALMA_ERR_DYNAMIC;
      } else {
        return st;
      }
    }
    if (st == ALMA_ERR_DYNAMIC) {
      if (known) ALMA_LOGD("static inference: node '%s' (%s) has a data-dependent output shape", n->name, n->op_type);
      for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0) {
          info[n->outputs[k]].rank = -1;
          out->n_unknown++;
        }
      if (n->op->cost) out->macs = out->flops = -1;
      continue;
    }
    ALMA_TRY(alma__op_check_strings(n, NULL, 0, outs, n->n_outputs));
    for (int k = 0; k < n->n_outputs; k++)
      if (!plausible_shape(&outs[k]))
        return alma__op_error(n, ALMA_ERR_SHAPE, "output %d too large (more than 2^40 elements)", k);
    if (is_if(n)) { /* its outputs from its branches (infer_if); no cost of its own */
      st = infer_if(g, n, info, in[0], default_dim, max_fold_elems, outs, n->n_outputs);
      for (int k = 0; k < n->n_outputs; k++) {
        if (st == ALMA_OK && n->outputs[k] >= 0 && plausible_shape(&outs[k])) {
          info[n->outputs[k]] = outs[k];
        } else {
          alma_tensor_free_data(&outs[k]);
          if (n->outputs[k] >= 0) info[n->outputs[k]].rank = -1;
        }
      }
      if (st != ALMA_OK) return st;
      continue;
    }
    if (n->op->cost && out->macs >= 0) {
      int64_t m = 0, f = 0;
      n->op->cost(n, in, n->n_inputs, outs, n->n_outputs, &m, &f);
      add_cost(&out->macs, m);
      add_cost(&out->flops, f);
    } else if (out->flops >= 0) {
      for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0 && alma__dtype_is_float(outs[k].dtype))
          add_cost(&out->flops, alma__numel(outs[k].rank, outs[k].dims));
    }
    /* Constant propagation for small values (shape subgraphs). */
    int64_t total = 0;
    for (int k = 0; k < n->n_outputs; k++) total += alma__numel(outs[k].rank, outs[k].dims);
    if (all_data && total <= max_fold_elems) {
      alma_tensor res[64];
      st = alma__op_run_node(NULL, n, in, n->n_inputs, res, n->n_outputs);
      if (st == ALMA_OK) {
        for (int k = 0; k < n->n_outputs; k++) {
          if (n->outputs[k] >= 0) info[n->outputs[k]] = res[k];
          else alma_tensor_free_data(&res[k]);
        }
        continue;
      }
      if (!(symbolic && is_bound_error(st))) return st;
    }
    for (int k = 0; k < n->n_outputs; k++)
      if (n->outputs[k] >= 0) {
        info[n->outputs[k]] = outs[k];
        info[n->outputs[k]].data = NULL;
        info[n->outputs[k]].owns_data = 0;
      }
  }
  return ALMA_OK;
}

/* An int list per segment-tree node or per step (the plan's lookups). */
typedef struct ilist {
  int *v;
  int n, cap;
} ilist;

static int ilist_push(ilist *l, int x) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 4;
    int *nv = realloc(l->v, (size_t)cap * sizeof *nv);
    if (!nv) return -1;
    l->v = nv;
    l->cap = cap;
  }
  l->v[l->n++] = x;
  return 0;
}

static int cmp_by_offset(const void *a, const void *b, void *key) {
  const int64_t *off = key;
  int64_t x = off[*(const int *)a], y = off[*(const int *)b];
  return (x > y) - (x < y);
}

static int cmp_by_size_desc(const void *a, const void *b, void *key) {
  const int64_t *size = key;
  int u = *(const int *)a, v = *(const int *)b;
  if (size[u] != size[v]) return size[u] < size[v] ? 1 : -1;
  return (u > v) - (u < v); /* equal sizes keep value order */
}

/* Lifetime of each produced value: [def step, last use step]. Graph outputs live to the end.
 * Largest first; each buffer takes the lowest offset that does not overlap a placed buffer whose
 * lifetime intersects its own (TFLite's greedy-by-size). The placed buffers live at a step are
 * found through a segment tree over steps (those alive where this one starts) and per-step lists
 * (those starting during its life), so a long chain plans in O(n log n). Graphs where most
 * buffers live at once make the greedy plan itself quadratic: past a work budget (steps, conflicts
 * and their sorting, ~0.1 s) the plan is given up (-1, unknown) rather than taking minutes. */
int64_t alma__memory_plan_peak(const alma_graph *g, const alma_infer_result *r) {
  int nv = g->n_values, nn = g->n_nodes, T = nn + 1, P = 1;
  while (P < T) P *= 2;
  int *first = malloc(sizeof(int) * (size_t)(nv + 1)), *last = malloc(sizeof(int) * (size_t)(nv + 1));
  int64_t *size = malloc(sizeof(int64_t) * (size_t)(nv + 1)), *offset = malloc(sizeof(int64_t) * (size_t)(nv + 1));
  int *order = malloc(sizeof(int) * (size_t)(nv + 1)), *conf = malloc(sizeof(int) * (size_t)(nv + 1));
  ilist *tree = calloc(2 * (size_t)P, sizeof *tree), *starts = calloc((size_t)T, sizeof *starts);
  uint64_t *has_start = calloc((size_t)T / 64 + 1, sizeof *has_start);
  int64_t peak = 0, work = 0;
  const int64_t budget = 20 * 1000 * 1000;
  if (!first || !last || !size || !offset || !order || !conf || !tree || !starts || !has_start) {
    peak = -1;
    goto out;
  }
  for (int v = 0; v < nv; v++) {
    first[v] = -1;
    last[v] = -1;
  }
  for (int i = 0; i < nn; i++) {
    const alma_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_outputs; k++)
      if (n->outputs[k] >= 0) first[n->outputs[k]] = last[n->outputs[k]] = i;
    for (int k = 0; k < n->n_inputs + n->n_implicit; k++) {
      int v = k < n->n_inputs ? n->inputs[k] : n->implicit_inputs[k - n->n_inputs];
      if (v >= 0 && first[v] >= 0) last[v] = i;
    }
  }
  for (int i = 0; i < g->n_outputs; i++)
    if (first[g->outputs[i]] >= 0) last[g->outputs[i]] = nn;
  int n_live = 0;
  for (int v = 0; v < nv; v++) {
    if (first[v] < 0) continue;
    if (r->info[v].rank < 0) {
      peak = -1;
      goto out;
    }
    int64_t ne = alma__numel(r->info[v].rank, r->info[v].dims), bytes;
    if (ne < 0 || alma__mul_overflow_i64(ne, (int64_t)alma_dtype_size(r->info[v].dtype), &bytes) ||
        bytes > INT64_MAX / 4) {
      peak = -1;
      goto out;
    }
    size[v] = (bytes + 63) & ~(int64_t)63;
    order[n_live++] = v;
  }
  qsort_r(order, (size_t)n_live, sizeof *order, cmp_by_size_desc, size);
  for (int i = 0; i < n_live; i++) {
    int v = order[i], a = first[v], b = last[v], k = 0;
    /* placed buffers alive at step a: stored at the tree nodes on a's leaf-to-root path */
    for (int t = a + P; t >= 1; t >>= 1)
      for (int q = 0; q < tree[t].n; q++) conf[k++] = tree[t].v[q];
    /* placed buffers starting in (a, b] */
    for (int s = a + 1; s <= b;) {
      if (!(s & 63) && !has_start[s >> 6] && s + 64 <= b + 1) {
        s += 64;
        work++;
        continue;
      }
      if (has_start[s >> 6] >> (s & 63) & 1)
        for (int q = 0; q < starts[s].n; q++) conf[k++] = starts[s].v[q];
      s++;
      work++;
    }
    /* the sort below costs k log k */
    for (int m = k; m > 1; m >>= 1) work += k;
    work += k;
    if (work > budget) {
      peak = -1;
      goto out;
    }
    qsort_r(conf, (size_t)k, sizeof *conf, cmp_by_offset, offset);
    int64_t off = 0;
    for (int q = 0; q < k; q++) {
      int u = conf[q];
      if (offset[u] >= off + size[v]) break;
      if (offset[u] + size[u] > off) off = offset[u] + size[u];
    }
    offset[v] = off;
    if (off + size[v] > peak) peak = off + size[v];
    /* place v: into the tree's canonical nodes for [a, b], and its start step's list */
    for (int l = a + P, h = b + P + 1; l < h; l >>= 1, h >>= 1) {
      if ((l & 1) && ilist_push(&tree[l++], v)) peak = -1;
      if ((h & 1) && ilist_push(&tree[--h], v)) peak = -1;
    }
    if (ilist_push(&starts[a], v)) peak = -1;
    has_start[a >> 6] |= (uint64_t)1 << (a & 63);
    if (peak < 0) goto out;
  }
out:
  if (tree)
    for (int t = 0; t < 2 * P; t++) free(tree[t].v);
  if (starts)
    for (int t = 0; t < T; t++) free(starts[t].v);
  free(tree);
  free(starts);
  free(has_start);
  free(first);
  free(last);
  free(size);
  free(offset);
  free(order);
  free(conf);
  return peak;
}
