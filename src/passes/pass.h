/* Graph passes: pure graph -> graph transforms (FOLD, FUSE, ...), each tested for numeric
 * equivalence before/after. A pass edits g in place (g is a private copy) and leaves it valid and
 * topologically sorted (call alma__graph_compact at the end). */
#ifndef ALMA_PASS_H
#define ALMA_PASS_H

#include "graph/graph.h"

typedef struct alma_pass_opts {
  int verbose;
} alma_pass_opts;

typedef struct alma_pass {
  const char *name;          /* "FOLD" */
  const char *description;
  alma_status (*run)(alma_graph *g, const alma_pass_opts *opts);
} alma_pass;

int alma__pass_count(void);
const alma_pass *alma__pass_at(int i);
const alma_pass *alma__pass_find(const char *name);

#endif
