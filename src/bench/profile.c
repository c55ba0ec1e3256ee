/* The per-node profile of a result (config `profile`): from a runtime's per-node times to entries
 * sorted by time and an op-type table (docs/json.md, `profile`). */
#include <math.h>

#include "bench/bench.h"
#include "runtimes/runtime.h"

alma_status alma__profile_init(alma_profile *p, const char *runtime, const char *reason) {
  memset(p, 0, sizeof *p);
  p->batch_ms = p->nodes_ms = p->overhead = p->seconds = NAN;
  p->runtime = alma__strdup(runtime ? runtime : "");
  if (reason) p->unavailable = alma__strdup(reason);
  if (!p->runtime || (reason && !p->unavailable)) {
    alma__profile_clear(p);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  return ALMA_OK;
}

void alma__profile_clear(alma_profile *p) {
  for (int i = 0; i < p->n_nodes; i++) {
    free((char *)p->nodes[i].name);
    free((char *)p->nodes[i].op_type);
    free((char *)p->nodes[i].placement);
    free((char *)p->nodes[i].place);
    free((char *)p->nodes[i].declined);
  }
  for (int i = 0; i < p->n_ops; i++) free((char *)p->ops[i].op_type);
  free((void *)p->nodes);
  free((void *)p->ops);
  free((char *)p->runtime);
  free((char *)p->unavailable);
  memset(p, 0, sizeof *p);
  p->batch_ms = p->nodes_ms = p->overhead = p->seconds = NAN;
}

alma_status alma__profile_add_node(alma_profile *p, const alma_profile_node *n) {
  alma_profile_node *v = realloc((void *)p->nodes, (size_t)(p->n_nodes + 1) * sizeof *v);
  if (!v) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  p->nodes = v;
  alma_profile_node *e = &v[p->n_nodes];
  *e = *n;
  e->name = alma__strdup(n->name ? n->name : "");
  e->op_type = alma__strdup(n->op_type ? n->op_type : "");
  e->placement = alma__strdup(n->placement ? n->placement : "");
  e->place = alma__strdup(n->place ? n->place : "");
  e->declined = alma__strdup(n->declined ? n->declined : "");
  p->n_nodes++;  /* counted even when a copy failed: clear frees what there is */
  if (!e->name || !e->op_type || !e->placement || !e->place || !e->declined)
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  return ALMA_OK;
}

alma_status alma__profile_add_op(alma_profile *p, const alma_profile_op *o) {
  alma_profile_op *v = realloc((void *)p->ops, (size_t)(p->n_ops + 1) * sizeof *v);
  if (!v) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  p->ops = v;
  v[p->n_ops] = *o;
  v[p->n_ops].op_type = alma__strdup(o->op_type ? o->op_type : "");
  p->n_ops++;
  if (!v[p->n_ops - 1].op_type) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  return ALMA_OK;
}

/* Slowest first; ties in list order (the entries are built in graph order, and qsort is not
 * stable: the index decides). */
typedef struct {
  double s;
  int gi, idx;  /* graph in the list, node in it */
  int key;      /* position in build order */
} by_time;
static int by_time_desc(const void *a, const void *b) {
  const by_time *x = a, *y = b;
  if (x->s != y->s) return x->s < y->s ? 1 : -1;
  return (x->key > y->key) - (x->key < y->key);
}

/* Execution order of every node (out[base[gi] + i]): a graph's nodes in their (topological)
 * order, each If's compiled branch right after the If. */
static void exec_order(const alma__prof_graph *graphs, int n_graphs, const int *base, int gi, int depth, int *next,
                       int *out) {
  for (int i = 0; i < graphs[gi].g->n_nodes; i++) {
    out[base[gi] + i] = (*next)++;
    for (int gj = 1; gj < n_graphs && depth < 64; gj++)
      if (graphs[gj].parent == gi && graphs[gj].parent_node == i) exec_order(graphs, n_graphs, base, gj, depth + 1, next, out);
  }
}

alma_status alma__profile_build(alma_profile *p, const alma__prof_graph *graphs, int n_graphs, int64_t batches,
                                double seconds, double batch_ms, double timed_mean_ms) {
  if (batches < 1) return alma__errorf(ALMA_ERR_INTERNAL, "profile of %lld batches", (long long)batches);
  if (n_graphs < 1 || !graphs) return alma__errorf(ALMA_ERR_INTERNAL, "profile of no graph");
  int total_nodes = 0;
  for (int gi = 0; gi < n_graphs; gi++) total_nodes += graphs[gi].g->n_nodes;
  /* Each entry's op-type label: its own, then its members' in graph order (they follow their head);
   * its time: a branch's If holds the time of the branch's nodes, which are entries of their own,
   * so the If keeps only what is outside them (choosing, looking up and copying values). */
  char (*label)[128] = calloc((size_t)total_nodes + 1, sizeof *label);
  double *secs = calloc((size_t)total_nodes + 1, sizeof *secs);
  int *base = calloc((size_t)n_graphs + 1, sizeof *base);
  by_time *order = calloc((size_t)total_nodes + 1, sizeof *order);
  int *exec = malloc(((size_t)total_nodes + 1) * sizeof *exec);
  if (!label || !secs || !base || !order || !exec) {
    free(label);
    free(secs);
    free(base);
    free(order);
    free(exec);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  }
  for (int gi = 1; gi < n_graphs; gi++) base[gi] = base[gi - 1] + graphs[gi - 1].g->n_nodes;
  for (int i = 0; i < total_nodes; i++) exec[i] = -1;
  int next = 0;
  exec_order(graphs, n_graphs, base, 0, 0, &next, exec);
  for (int i = 0; i < total_nodes; i++)
    if (exec[i] < 0) exec[i] = next++;  /* a branch whose If was not found: last */
  for (int gi = 0; gi < n_graphs; gi++)
    for (int i = 0; i < graphs[gi].g->n_nodes; i++) secs[base[gi] + i] = graphs[gi].nodes[i].seconds;
  for (int gi = 1; gi < n_graphs; gi++) {
    const alma__prof_graph *pg = &graphs[gi];
    if (pg->parent < 0 || pg->parent >= n_graphs || pg->parent_node < 0 ||
        pg->parent_node >= graphs[pg->parent].g->n_nodes)
      continue;
    double inner = 0;
    for (int i = 0; i < pg->g->n_nodes; i++)
      if (pg->nodes[i].head == i && pg->nodes[i].members > 0) inner += pg->nodes[i].seconds;
    double *s = &secs[base[pg->parent] + pg->parent_node];
    *s = *s > inner ? *s - inner : 0;
  }
  int ne = 0;
  for (int gi = 0; gi < n_graphs; gi++) {
    const alma__prof_graph *pg = &graphs[gi];
    int nn = pg->g->n_nodes;
    for (int i = 0; i < nn; i++) {
      int h = pg->nodes[i].head;
      if (h < 0 || h >= nn) h = i;
      char *lb = label[base[gi] + h];
      size_t len = strlen(lb);
      if (len < sizeof label[0] - 1)
        snprintf(lb + len, sizeof label[0] - len, "%s%s", len ? "+" : "", pg->g->nodes[i].op_type);
      /* a branch's nodes that never ran (the branch not taken) are not listed */
      if (h == i && pg->nodes[i].members > 0 && (gi == 0 || pg->nodes[i].runs > 0))
        order[ne] = (by_time){secs[base[gi] + i], gi, i, ne}, ne++;
    }
  }
  qsort(order, (size_t)ne, sizeof *order, by_time_desc);
  alma_status st = ALMA_OK;
  double total = 0;
  p->batches = batches;
  p->seconds = seconds;
  p->batch_ms = batch_ms;
  p->overhead = timed_mean_ms > 0 && isfinite(timed_mean_ms) ? batch_ms / timed_mean_ms - 1 : NAN;
  char *name = NULL;
  size_t name_cap = 0;
  for (int k = 0; k < ne && st == ALMA_OK; k++) {
    const alma__prof_graph *pg = &graphs[order[k].gi];
    const alma__prof_node *e = &pg->nodes[order[k].idx];
    const char *nm = pg->g->nodes[order[k].idx].name, *pre = pg->prefix ? pg->prefix : "";
    size_t need = strlen(pre) + strlen(nm) + 1;
    if (need > name_cap) {
      char *t = realloc(name, need);
      if (!t) {
        st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
        break;
      }
      name = t;
      name_cap = need;
    }
    snprintf(name, need, "%s%s", pre, nm);
    double ms = 1e3 * order[k].s / (double)batches;
    total += ms;
    alma_profile_node pn = {.name = name, .op_type = label[base[order[k].gi] + order[k].idx],
                            .placement = e->where ? e->where : "?", .place = alma__place_name(e->place.place),
                            .declined = alma__decline_name(e->place.reason), .members = e->members, .runs = e->runs, .ms = ms,
                            .share = batch_ms > 0 ? ms / batch_ms : NAN,
                            .order = exec[base[order[k].gi] + order[k].idx]};
    st = alma__profile_add_node(p, &pn);
  }
  free(name);
  free(secs);
  free(base);
  free(exec);
  p->nodes_ms = total;
  /* The op-type table: entries grouped by label, in order of their summed time. */
  for (int k = 0; k < p->n_nodes && st == ALMA_OK; k++) {
    const alma_profile_node *e = &p->nodes[k];
    int j = 0;
    while (j < p->n_ops && strcmp(p->ops[j].op_type, e->op_type)) j++;
    if (j == p->n_ops) {
      alma_profile_op o = {.op_type = e->op_type};
      if ((st = alma__profile_add_op(p, &o)) != ALMA_OK) break;
    }
    alma_profile_op *o = (alma_profile_op *)&p->ops[j];
    o->entries++;
    o->nodes += e->members;
    o->ms += e->ms;
  }
  for (int j = 0; j < p->n_ops; j++) {
    alma_profile_op *o = (alma_profile_op *)&p->ops[j];
    o->share = batch_ms > 0 ? o->ms / batch_ms : NAN;
  }
  /* insertion sort: few op types, and stable for equal times */
  for (int j = 1; j < p->n_ops; j++) {
    alma_profile_op t = p->ops[j];
    int k = j;
    alma_profile_op *ops = (alma_profile_op *)p->ops;
    while (k > 0 && ops[k - 1].ms < t.ms) {
      ops[k] = ops[k - 1];
      k--;
    }
    ops[k] = t;
  }
  free(label);
  free(order);
  return st;
}
