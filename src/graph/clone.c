/* Graph cloning for sessions: structure is copied, immutable data (names, initializer bytes,
 * attribute payloads) is shared with the source, so the source must outlive the clone (a session
 * must not outlive its model). Passes replace shared data; they never mutate it. */
#include "graph/graph.h"

#include <stdatomic.h>
#include <stddef.h>

_Static_assert(offsetof(alma_node, prepared) + sizeof(((alma_node *)0)->prepared) == sizeof(alma_node),
               "alma_node.prepared must stay the last member (clone_rec copies the rest)");

static alma_graph *clone_rec(const alma_graph *src, alma_arena *arena, alma_graph *parent);

static int clone_attrs(alma_node *dst, const alma_node *src, alma_arena *arena, alma_graph *owner) {
  dst->attrs = alma__arena_alloc(arena, sizeof(alma_attr) * (size_t)(src->n_attrs + 1));
  if (!dst->attrs) return -1;
  dst->n_attrs = 0;
  for (int a = 0; a < src->n_attrs; a++) {
    alma_attr *at = &dst->attrs[a];
    *at = src->attrs[a];
    if (at->g && !(at->g = clone_rec(src->attrs[a].g, arena, owner))) return -1;
    if (at->graphs) {
      alma_graph **gs = alma__arena_alloc(arena, sizeof(alma_graph *) * (size_t)(at->n + 1));
      if (!gs) return -1;
      for (int k = 0; k < at->n; k++)
        if (!(gs[k] = clone_rec(src->attrs[a].graphs[k], arena, owner))) return -1;
      at->graphs = gs;
    }
    dst->n_attrs = a + 1;
  }
  return 0;
}

static alma_graph *clone_rec(const alma_graph *src, alma_arena *arena, alma_graph *parent) {
  alma_graph *g = alma__graph_new(arena);
  if (!g) return NULL;
  g->name = src->name;
  g->parent = parent;
  g->opsets = src->opsets;
  g->n_opsets = src->n_opsets;
  g->values = malloc(sizeof(alma_value) * (size_t)(src->n_values + 1));
  g->nodes = malloc(sizeof(alma_node) * (size_t)(src->n_nodes + 1));
  g->inputs = malloc(sizeof(int) * (size_t)(src->n_inputs + 1));
  g->outputs = malloc(sizeof(int) * (size_t)(src->n_outputs + 1));
  if (!g->values || !g->nodes || !g->inputs || !g->outputs) goto fail;
  if (src->n_values) memcpy(g->values, src->values, sizeof(alma_value) * (size_t)src->n_values);
  g->n_values = g->cap_values = src->n_values;
  for (int v = 0; v < g->n_values; v++) {
    if (!src->values[v].init) continue;
    alma_tensor *t = alma__arena_alloc(arena, sizeof *t);
    if (!t) goto fail;
    *t = alma__tensor_view(src->values[v].init);
    g->values[v].init = t;
  }
  if (src->n_inputs) memcpy(g->inputs, src->inputs, sizeof(int) * (size_t)src->n_inputs);
  if (src->n_outputs) memcpy(g->outputs, src->outputs, sizeof(int) * (size_t)src->n_outputs);
  g->n_inputs = src->n_inputs;
  g->n_outputs = src->n_outputs;
  g->cap_nodes = src->n_nodes;
  for (int i = 0; i < src->n_nodes; i++) {
    const alma_node *sn = &src->nodes[i];
    alma_node *n = &g->nodes[i];
    /* Everything but `prepared`, the last member: each graph builds its own (alma_prepared), and
     * another thread may be setting the source's while this copies. */
    memcpy(n, sn, offsetof(alma_node, prepared));
    atomic_init(&n->prepared, NULL);
    n->inputs = alma__calloc((size_t)sn->n_inputs, sizeof(int));
    n->outputs = alma__calloc((size_t)sn->n_outputs, sizeof(int));
    n->implicit_inputs = sn->n_implicit ? alma__calloc((size_t)sn->n_implicit, sizeof(int)) : NULL;
    n->attrs = NULL;
    n->n_attrs = 0;
    g->n_nodes = i + 1;
    if (!n->inputs || !n->outputs || (sn->n_implicit && !n->implicit_inputs)) goto fail;
    if (sn->n_inputs) memcpy(n->inputs, sn->inputs, sizeof(int) * (size_t)sn->n_inputs);
    if (sn->n_outputs) memcpy(n->outputs, sn->outputs, sizeof(int) * (size_t)sn->n_outputs);
    if (sn->n_implicit) memcpy(n->implicit_inputs, sn->implicit_inputs, sizeof(int) * (size_t)sn->n_implicit);
    if (clone_attrs(n, sn, arena, g) < 0) goto fail;
  }
  return g;
fail:
  alma__graph_free(g);
  return NULL;
}

alma_status alma__graph_clone(const alma_graph *src, alma_graph **out) {
  *out = NULL;
  alma_arena *arena = alma__arena_new();
  if (!arena) return alma__errorf(ALMA_ERR_NOMEM, "out of memory cloning the graph");
  alma_graph *g = clone_rec(src, arena, NULL);
  if (!g) {
    alma__arena_free(arena);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory cloning the graph");
  }
  g->owns_arena = 1;
  *out = g;
  return ALMA_OK;
}

/* The value an outer-scope name refers to: its definition in the nearest enclosing graph. */
static const alma_value *outer_def(const alma_graph *parent, const char *name) {
  for (const alma_graph *p = parent; p; p = p->parent) {
    int u = alma__graph_find_value(p, name);
    if (u >= 0 && !p->values[u].is_outer) return &p->values[u];
  }
  return NULL;
}

alma_status alma__graph_clone_standalone(const alma_graph *sub, alma_graph **out) {
  ALMA_TRY(alma__graph_clone(sub, out));
  alma_graph *g = *out;
  g->parent = NULL;
  int n_outer = 0;
  for (int v = 0; v < g->n_values; v++) n_outer += g->values[v].is_outer;
  int *inputs = malloc(sizeof(int) * (size_t)(g->n_inputs + n_outer + 1));
  if (!inputs) goto nomem;
  if (g->n_inputs) memcpy(inputs, g->inputs, sizeof(int) * (size_t)g->n_inputs);
  free(g->inputs);
  g->inputs = inputs;
  for (int v = 0; v < g->n_values; v++) {
    alma_value *val = &g->values[v];
    if (!val->is_outer) continue;
    const alma_value *def = outer_def(sub->parent, val->name);
    if (!def) {
      alma__graph_free(g);
      *out = NULL;
      return alma__errorf(ALMA_ERR_INVALID_MODEL, "subgraph '%s' reads '%s', which no enclosing graph defines", sub->name,
                          val->name);
    }
    const char *name = val->name;
    int is_output = val->is_output;
    *val = *def; /* its declared type and shape (symbolic names are arena strings shared read-only) */
    val->name = name;
    val->is_output = is_output;
    val->is_outer = 0;
    val->producer = -1;
    val->init = NULL;
    val->is_input = 0;
    if (def->init) {
      alma_tensor *t = alma__arena_alloc(g->arena, sizeof *t);
      if (!t) goto nomem;
      *t = alma__tensor_view(def->init);
      val->init = t;
    } else {
      val->is_input = 1;
      g->inputs[g->n_inputs++] = v;
    }
  }
  return ALMA_OK;
nomem:
  alma__graph_free(g);
  *out = NULL;
  return alma__errorf(ALMA_ERR_NOMEM, "out of memory outlining a subgraph");
}

alma_status alma__graph_clone_into(const alma_graph *standalone, alma_graph *parent, alma_graph **out) {
  *out = clone_rec(standalone, parent->arena, parent);
  if (!*out) return alma__errorf(ALMA_ERR_NOMEM, "out of memory cloning a subgraph");
  alma_graph *g = *out;
  g->owns_arena = 0;
  for (int v = 0; v < g->n_values; v++) {
    alma_value *val = &g->values[v];
    if (val->producer >= 0 || (!val->is_input && !val->init)) continue;
    const alma_value *def = outer_def(parent, val->name);
    if (!def) continue;
    if (val->init && !(def->init && def->init->data == val->init->data)) continue; /* the branch's own */
    val->is_outer = 1;
    val->is_input = 0;
    val->init = NULL; /* a view in the arena: nothing to free */
  }
  int k = 0;
  for (int i = 0; i < g->n_inputs; i++)
    if (!g->values[g->inputs[i]].is_outer) g->inputs[k++] = g->inputs[i];
  g->n_inputs = k;
  return ALMA_OK;
}
