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

alma_status alma__graph_infer(const alma_graph *g, const alma_tensor *const *input_shapes, int64_t default_dim,
                              int64_t max_fold_elems, alma_infer_result *out) {
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
      info[v].rank = -1; /* known only inside the enclosing execution */
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

/* Lifetime of each produced value: [def step, last use step]. Graph outputs live to the end. */
int64_t alma__memory_plan_peak(const alma_graph *g, const alma_infer_result *r) {
  int nv = g->n_values, nn = g->n_nodes;
  int *first = malloc(sizeof(int) * (size_t)(nv + 1)), *last = malloc(sizeof(int) * (size_t)(nv + 1));
  int64_t *size = malloc(sizeof(int64_t) * (size_t)(nv + 1)), *offset = malloc(sizeof(int64_t) * (size_t)(nv + 1));
  int *order = malloc(sizeof(int) * (size_t)(nv + 1));
  int64_t peak = 0;
  if (!first || !last || !size || !offset || !order) {
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
    size[v] = alma__numel(r->info[v].rank, r->info[v].dims) * (int64_t)alma_dtype_size(r->info[v].dtype);
    size[v] = (size[v] + 63) & ~(int64_t)63;
    order[n_live++] = v;
  }
  /* Largest first; each buffer takes the lowest offset that does not overlap a placed buffer whose
   * lifetime intersects its own (TFLite's greedy-by-size). O(n^2), fine for planning. */
  for (int i = 1; i < n_live; i++) {
    int x = order[i], j = i - 1;
    while (j >= 0 && size[order[j]] < size[x]) {
      order[j + 1] = order[j];
      j--;
    }
    order[j + 1] = x;
  }
  for (int i = 0; i < n_live; i++) {
    int v = order[i];
    int64_t off = 0;
    int moved = 1;
    while (moved) {
      moved = 0;
      for (int j = 0; j < i; j++) {
        int u = order[j];
        if (last[u] < first[v] || last[v] < first[u]) continue;
        if (off < offset[u] + size[u] && offset[u] < off + size[v]) {
          off = offset[u] + size[u];
          moved = 1;
        }
      }
    }
    offset[v] = off;
    if (off + size[v] > peak) peak = off + size[v];
  }
out:
  free(first);
  free(last);
  free(size);
  free(offset);
  free(order);
  return peak;
}
