/* Graph construction, lookup, topological order, validation and compaction. */
#include "graph/graph.h"

#include <limits.h>
#include <stdatomic.h>

alma_graph *alma__graph_new(alma_arena *arena) {
  alma_graph *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  if (arena) {
    g->arena = arena;
  } else {
    g->arena = alma__arena_new();
    g->owns_arena = 1;
    if (!g->arena) {
      free(g);
      return NULL;
    }
  }
  g->name = "";
  return g;
}

static void alma__graph_free_attrs(alma_attr *attrs, int n) {
  for (int a = 0; a < n; a++) {
    if (attrs[a].g) alma__graph_free(attrs[a].g);
    for (int k = 0; attrs[a].graphs && k < attrs[a].n; k++) alma__graph_free(attrs[a].graphs[k]);
  }
}

void alma__node_unprepare(alma_node *n) {
  alma_prepared *p = atomic_exchange_explicit(&n->prepared, NULL, memory_order_acq_rel);
  if (p) p->release(p);
}

void alma__graph_free(alma_graph *g) {
  if (!g) return;
  for (int i = 0; i < g->n_nodes; i++) {
    alma_node *n = &g->nodes[i];
    alma__node_unprepare(n);
    alma__graph_free_attrs(n->attrs, n->n_attrs);
    free(n->inputs);
    free(n->outputs);
    free(n->implicit_inputs);
  }
  /* Tensors with owned data (folded constants) are released; arena data is not owned. */
  for (int i = 0; i < g->n_values; i++)
    if (g->values[i].init) alma_tensor_free_data(g->values[i].init);
  free(g->nodes);
  free(g->values);
  free(g->inputs);
  free(g->outputs);
  if (g->owns_arena) alma__arena_free(g->arena);
  free(g);
}

int alma__graph_add_value(alma_graph *g, const char *name) {
  if (g->n_values == g->cap_values) {
    int cap = g->cap_values ? g->cap_values * 2 : 64;
    alma_value *nv = realloc(g->values, (size_t)cap * sizeof *nv);
    if (!nv) return -1;
    g->values = nv;
    g->cap_values = cap;
  }
  alma_value *v = &g->values[g->n_values];
  memset(v, 0, sizeof *v);
  v->name = alma__arena_strdup(g->arena, name);
  if (!v->name) return -1;
  v->rank = -1;
  v->producer = -1;
  return g->n_values++;
}

int alma__graph_find_value(const alma_graph *g, const char *name) {
  /* Newest first: a pass that renames leaves the latest definition authoritative. */
  for (int i = g->n_values - 1; i >= 0; i--)
    if (!strcmp(g->values[i].name, name)) return i;
  return -1;
}

int alma__graph_add_node(alma_graph *g, const char *op_type, const char *domain, const char *name,
                         const int *inputs, int n_inputs, const int *outputs, int n_outputs) {
  if (g->n_nodes == g->cap_nodes) {
    int cap = g->cap_nodes ? g->cap_nodes * 2 : 64;
    alma_node *nn = realloc(g->nodes, (size_t)cap * sizeof *nn);
    if (!nn) return -1;
    g->nodes = nn;
    g->cap_nodes = cap;
  }
  alma_node *n = &g->nodes[g->n_nodes];
  memset(n, 0, sizeof *n);
  n->op_type = alma__arena_strdup(g->arena, op_type);
  n->domain = alma__arena_strdup(g->arena, domain ? domain : "");
  n->name = alma__arena_strdup(g->arena, name ? name : "");
  n->inputs = alma__calloc((size_t)n_inputs, sizeof(int));
  n->outputs = alma__calloc((size_t)n_outputs, sizeof(int));
  if (!n->op_type || !n->domain || !n->name || !n->inputs || !n->outputs) {
    free(n->inputs);
    free(n->outputs);
    return -1;
  }
  if (n_inputs) memcpy(n->inputs, inputs, (size_t)n_inputs * sizeof(int));
  if (n_outputs) memcpy(n->outputs, outputs, (size_t)n_outputs * sizeof(int));
  n->n_inputs = n_inputs;
  n->n_outputs = n_outputs;
  for (int i = 0; i < n_outputs; i++)
    if (outputs[i] >= 0) g->values[outputs[i]].producer = g->n_nodes;
  return g->n_nodes++;
}

const alma_attr *alma__node_attr(const alma_node *n, const char *name) {
  for (int i = 0; i < n->n_attrs; i++)
    if (!strcmp(n->attrs[i].name, name)) return &n->attrs[i];
  return NULL;
}

int64_t alma__attr_i(const alma_node *n, const char *name, int64_t dflt) {
  const alma_attr *a = alma__node_attr(n, name);
  return a && a->type == ALMA_ATTR_INT ? a->i : dflt;
}

float alma__attr_f(const alma_node *n, const char *name, float dflt) {
  const alma_attr *a = alma__node_attr(n, name);
  if (!a) return dflt;
  if (a->type == ALMA_ATTR_FLOAT) return a->f;
  if (a->type == ALMA_ATTR_INT) return (float)a->i;
  return dflt;
}

const char *alma__attr_s(const alma_node *n, const char *name, const char *dflt) {
  const alma_attr *a = alma__node_attr(n, name);
  return a && a->type == ALMA_ATTR_STRING ? a->s : dflt;
}

int alma__attr_ints(const alma_node *n, const char *name, const int64_t **ints) {
  const alma_attr *a = alma__node_attr(n, name);
  *ints = NULL;
  if (!a || a->type != ALMA_ATTR_INTS) return 0;
  *ints = a->ints;
  return a->n;
}

int alma__attr_floats(const alma_node *n, const char *name, const float **floats) {
  const alma_attr *a = alma__node_attr(n, name);
  *floats = NULL;
  if (!a || a->type != ALMA_ATTR_FLOATS) return 0;
  *floats = a->floats;
  return a->n;
}

int64_t alma__graph_opset(const alma_graph *g, const char *domain) {
  int onnx = !domain || !domain[0] || !strcmp(domain, "ai.onnx");
  for (int i = 0; i < g->n_opsets; i++) {
    const char *d = g->opsets[i].domain;
    int donnx = !d || !d[0] || !strcmp(d, "ai.onnx");
    if (onnx ? donnx : (d && !strcmp(d, domain))) return g->opsets[i].version;
  }
  return 0;
}

int alma__graph_count_uses(const alma_graph *g, int v) {
  int uses = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->n_inputs; k++) uses += n->inputs[k] == v;
    for (int k = 0; k < n->n_implicit; k++) uses += n->implicit_inputs[k] == v;
  }
  for (int i = 0; i < g->n_outputs; i++) uses += g->outputs[i] == v;
  return uses;
}

/* Min-heap of node indices (toposort's ready set). */
static void heap_push(int *h, int *n, int x) {
  int i = (*n)++;
  while (i > 0 && h[(i - 1) / 2] > x) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = x;
}

static int heap_pop(int *h, int *n) {
  int top = h[0], x = h[--(*n)], i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && h[c + 1] < h[c]) c++;
    if (h[c] >= x) break;
    h[i] = h[c];
    i = c;
  }
  if (*n) h[i] = x;
  return top;
}

/* Kahn's algorithm, picking the lowest original index among ready nodes to keep file order:
 * consumer lists per value and a heap of ready nodes, O((nodes + edges) log nodes). */
alma_status alma__graph_toposort(alma_graph *g) {
  int n = g->n_nodes, nv = g->n_values;
  if (n <= 0) return ALMA_OK;
  size_t n_slots = 0;
  for (int i = 0; i < n; i++) n_slots += (size_t)g->nodes[i].n_inputs + (size_t)g->nodes[i].n_implicit;
  int *indeg = calloc((size_t)n, sizeof(int)), *order = malloc((size_t)n * sizeof(int));
  int *producer = malloc((size_t)nv * sizeof(int) + 1), *heap = malloc((size_t)n * sizeof(int));
  int *cstart = calloc((size_t)nv + 1, sizeof(int)), *cons = malloc(n_slots * sizeof(int) + 1);
  char *done = calloc((size_t)n, 1);
  alma_status st = ALMA_OK;
  if (!indeg || !order || !producer || !heap || !cstart || !cons || !done || n_slots > INT_MAX) {
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory sorting the graph");
    goto out;
  }
  for (int v = 0; v < nv; v++) producer[v] = -1;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < g->nodes[i].n_outputs; k++)
      if (g->nodes[i].outputs[k] >= 0) producer[g->nodes[i].outputs[k]] = i;
  /* Edges are counted per (input slot); the same predecessor may count several times. */
  for (int i = 0; i < n; i++) {
    const alma_node *nd = &g->nodes[i];
    for (int k = 0; k < nd->n_inputs + nd->n_implicit; k++) {
      int v = k < nd->n_inputs ? nd->inputs[k] : nd->implicit_inputs[k - nd->n_inputs];
      if (v >= 0 && producer[v] >= 0) {
        indeg[i]++;
        cstart[v + 1]++;
      }
    }
  }
  for (int v = 0; v < nv; v++) cstart[v + 1] += cstart[v];
  {
    int *pos = malloc((size_t)nv * sizeof(int) + 1);
    if (!pos) {
      st = alma__errorf(ALMA_ERR_NOMEM, "out of memory sorting the graph");
      goto out;
    }
    memcpy(pos, cstart, (size_t)nv * sizeof(int));
    for (int i = 0; i < n; i++) {
      const alma_node *nd = &g->nodes[i];
      for (int k = 0; k < nd->n_inputs + nd->n_implicit; k++) {
        int v = k < nd->n_inputs ? nd->inputs[k] : nd->implicit_inputs[k - nd->n_inputs];
        if (v >= 0 && producer[v] >= 0) cons[pos[v]++] = i;
      }
    }
    free(pos);
  }
  int n_heap = 0, placed = 0;
  for (int i = 0; i < n; i++)
    if (indeg[i] == 0) heap_push(heap, &n_heap, i);
  while (n_heap > 0) {
    int pick = heap_pop(heap, &n_heap);
    if (done[pick]) continue;
    done[pick] = 1;
    order[placed++] = pick;
    for (int k = 0; k < g->nodes[pick].n_outputs; k++) {
      int v = g->nodes[pick].outputs[k];
      if (v < 0) continue;
      for (int q = cstart[v]; q < cstart[v + 1]; q++) {
        int j = cons[q];
        if (done[j]) continue;
        if (--indeg[j] == 0) heap_push(heap, &n_heap, j);
      }
    }
  }
  if (placed < n) {
    for (int i = 0; i < n; i++)
      if (!done[i]) {
        st = alma__errorf(ALMA_ERR_INVALID_MODEL, "the graph has a cycle through node '%s' (%s)", g->nodes[i].name,
                          g->nodes[i].op_type);
        break;
      }
    goto out;
  }
  {
    alma_node *sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted) {
      st = alma__errorf(ALMA_ERR_NOMEM, "out of memory sorting the graph");
      goto out;
    }
    for (int i = 0; i < n; i++) sorted[i] = g->nodes[order[i]];
    memcpy(g->nodes, sorted, (size_t)n * sizeof *sorted);
    free(sorted);
    for (int i = 0; i < n; i++)
      for (int k = 0; k < g->nodes[i].n_outputs; k++)
        if (g->nodes[i].outputs[k] >= 0) g->values[g->nodes[i].outputs[k]].producer = i;
  }
out:
  free(indeg);
  free(order);
  free(producer);
  free(heap);
  free(cstart);
  free(cons);
  free(done);
  return st;
}

alma_status alma__graph_validate(const alma_graph *g) {
  char *defined = calloc((size_t)g->n_values + 1, 1);
  if (!defined) return alma__errorf(ALMA_ERR_NOMEM, "out of memory validating the graph");
  alma_status st = ALMA_OK;
  for (int v = 0; v < g->n_values; v++)
    if (g->values[v].is_input || g->values[v].init || g->values[v].is_outer) defined[v] = 1;
  for (int i = 0; i < g->n_nodes && st == ALMA_OK; i++) {
    const alma_node *n = &g->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->n_inputs + n->n_implicit; k++) {
      int v = k < n->n_inputs ? n->inputs[k] : n->implicit_inputs[k - n->n_inputs];
      if (v >= 0 && !defined[v]) {
        st = alma__errorf(ALMA_ERR_INVALID_MODEL,
                          "node '%s' (%s): input '%s' is not produced by any earlier node, initializer or graph input",
                          n->name, n->op_type, g->values[v].name);
        break;
      }
    }
    for (int k = 0; k < n->n_outputs && st == ALMA_OK; k++) {
      int v = n->outputs[k];
      if (v < 0) continue;
      if (defined[v])
        st = alma__errorf(ALMA_ERR_INVALID_MODEL, "node '%s' (%s): output '%s' is already defined elsewhere",
                          n->name, n->op_type, g->values[v].name);
      defined[v] = 1;
    }
  }
  for (int i = 0; i < g->n_outputs && st == ALMA_OK; i++)
    if (!defined[g->outputs[i]])
      st = alma__errorf(ALMA_ERR_INVALID_MODEL, "graph output '%s' is never produced", g->values[g->outputs[i]].name);
  free(defined);
  return st;
}

alma_status alma__graph_compact(alma_graph *g) {
  int w = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].dead) {
      alma__node_unprepare(&g->nodes[i]);
      alma__graph_free_attrs(g->nodes[i].attrs, g->nodes[i].n_attrs);
      free(g->nodes[i].inputs);
      free(g->nodes[i].outputs);
      free(g->nodes[i].implicit_inputs);
      continue;
    }
    g->nodes[w++] = g->nodes[i];
  }
  g->n_nodes = w;
  for (int v = 0; v < g->n_values; v++) g->values[v].producer = -1;
  ALMA_TRY(alma__graph_toposort(g));
  return alma__graph_validate(g);
}
