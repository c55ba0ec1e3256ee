/* Placement as data across a session's plans (the model's graph and its compiled If branches):
 * counts, and the results' per-conversion summary (docs/json.md, `placement`). */
#ifndef ALMA_PLACEMENT_H
#define ALMA_PLACEMENT_H

#include "runtimes/runtime.h"

/* One plan's placement: g->n_nodes entries. */
typedef struct alma__place_graph {
  const struct alma_graph *g;
  alma__placement *nodes; /* owned */
} alma__place_graph;

typedef struct alma__place_counts {
  int nodes;
  int by_place[ALMA_PLACE_COUNT];
  int by_reason[ALMA_DECLINE_COUNT];
} alma__place_counts;

void alma__placement_count(const alma__place_graph *graphs, int n, alma__place_counts *c);
/* The summary as one JSON object's text (malloc'd): nodes per placement and per reason, then per
 * op type the same counts and the first declined node's detail. */
alma_status alma__placement_json(const char *runtime, const alma__place_graph *graphs, int n, char **json_out);
void alma__place_graphs_free(alma__place_graph *graphs, int n);
/* nodes[0..n) all at `place`, no reason: a runtime that places every node alike (EAGER, whole-graph ones). */
void alma__placement_fill(alma__placement *nodes, int n, alma__place place);

#endif
