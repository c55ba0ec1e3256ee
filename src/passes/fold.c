/* FOLD: constant folding (including shape subgraphs), Identity/Dropout/same-type Cast removal, dead
 * nodes.
 *
 * A value is constant when static inference computes it from initializers. Shape subgraphs
 * (Shape -> Gather -> Concat -> Reshape, as PyTorch exports them) depend on symbolic dims, so
 * inference runs twice with the symbolic dims bound to 2 and to 3: a value computed in both runs
 * with identical contents does not depend on them and is folded. Binding every symbol to the same
 * value hides what depends on their differences: an LLM decode graph slices positions
 * [past : total] of its attention_mask, total - past = 0 in both runs, and a dim that is 1 at run
 * time was folded to 0. Two more runs bind the symbols as graph/symbind.h says (distinct values
 * for unrelated symbols, in two orders, and the relations the graph needs, such as total = past
 * + 1); a value one of them computes differently is not folded. Where those runs stop early, they
 * say nothing and the first two decide. */
#include <stdlib.h>
#include <string.h>

#include "graph/symbind.h"
#include "passes/pass.h"

#define FOLD_MAX_ELEMS ((int64_t)1 << 26) /* don't materialize constants above 256 MB of float */

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

static alma_status fold_constants(alma_graph *g, const alma_symbind *sb, int *changed) {
  alma_infer_result r2, r3, rd[2];
  ALMA_TRY(alma__graph_infer(g, NULL, 2, FOLD_MAX_ELEMS, &r2));
  alma_status st = alma__graph_infer(g, NULL, 3, FOLD_MAX_ELEMS, &r3);
  if (st != ALMA_OK) {
    alma__infer_result_free(&r2);
    return st;
  }
  int have[2];
  for (int p = 0; p < 2; p++) have[p] = alma__symbind_infer(g, sb, p, FOLD_MAX_ELEMS, &rd[p]);
  for (int i = 0; i < g->n_nodes && st == ALMA_OK; i++) {
    alma_node *n = &g->nodes[i];
    if (n->dead || n->n_implicit) continue;
    int all_const = 1;
    for (int k = 0; k < n->n_outputs; k++) {
      int v = n->outputs[k];
      if (v >= 0 && !same_tensor(&r2.info[v], &r3.info[v])) all_const = 0;
      for (int p = 0; p < 2 && v >= 0; p++) /* computed there, and differently: it depends on them */
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
  for (int p = 0; p < 2; p++)
    if (have[p]) alma__infer_result_free(&rd[p]);
  return st;
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
    st = fold_constants(g, &sb, &changed);
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
    .description = "constant folding incl. shape subgraphs, Identity/Dropout removal, dead-node elimination",
    .run = fold_run,
};
