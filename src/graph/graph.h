/* The graph IR: values, nodes, initializers, subgraphs. Everything refers to values and nodes by
 * index (arrays may grow when passes add to them). Names, attributes and initializer data live in
 * the graph's arena; the node/value arrays are owned by the graph. */
#ifndef ALMA_GRAPH_H
#define ALMA_GRAPH_H

#include "core/core.h"

struct alma_op_def;
struct alma_graph;

/* Numbers follow ONNX AttributeProto.AttributeType. */
typedef enum {
  ALMA_ATTR_UNDEFINED = 0,
  ALMA_ATTR_FLOAT = 1,
  ALMA_ATTR_INT = 2,
  ALMA_ATTR_STRING = 3,
  ALMA_ATTR_TENSOR = 4,
  ALMA_ATTR_GRAPH = 5,
  ALMA_ATTR_FLOATS = 6,
  ALMA_ATTR_INTS = 7,
  ALMA_ATTR_STRINGS = 8,
  ALMA_ATTR_TENSORS = 9,
  ALMA_ATTR_GRAPHS = 10,
  /* Optional's `type`: ints[0..2] = dtype (a tensor dtype or ALMA__DTYPE_SEQUENCE/OPTIONAL), element
   * dtype, element-is-sequence (the container encoding of core.h); n = 3. */
  ALMA_ATTR_TYPE_PROTO = 13
} alma_attr_type;

typedef struct alma_attr {
  const char *name;
  alma_attr_type type;
  float f;
  int64_t i;
  const char *s;          /* NUL-terminated copy (bytes may contain NUL; s_len is exact) */
  size_t s_len;
  alma_tensor *t;
  struct alma_graph *g;
  int n;                  /* element count of the list forms */
  float *floats;
  int64_t *ints;
  const char **strings;
  alma_tensor *tensors;
  struct alma_graph **graphs;
} alma_attr;

#define ALMA_DIM_UNKNOWN (-1)

/* A sequence or optional value has dtype ALMA__DTYPE_SEQUENCE/OPTIONAL, rank 0 and its element
 * type in dims[0..1] (core.h's container encoding). */
typedef struct alma_value {
  const char *name;
  alma_dtype dtype;                       /* UNDEFINED while unknown */
  int rank;                               /* -1 while unknown */
  int64_t dims[ALMA_MAX_RANK];            /* ALMA_DIM_UNKNOWN where symbolic/unknown (declared shape) */
  const char *dim_params[ALMA_MAX_RANK];  /* declared symbolic names ("batch") or NULL */
  alma_tensor *init;                      /* constant data (initializer, folded constant) or NULL */
  int producer;                           /* node index, -1 for graph inputs/initializers/outer refs */
  int is_input;                           /* graph input fed by the caller (not an initializer) */
  int is_output;                          /* graph output */
  int is_outer;                           /* subgraph only: refers to an enclosing graph's value by name */
} alma_value;

/* Prepared per-node state: what an op derives from a node's attributes alone (a tree ensemble's
 * node tables), built once on first use instead of on every infer/exec call. An op's state struct
 * starts with this header; alma__node_prepared (ops/op.h) builds and caches it.
 *  - Lifetime: owned by the node; freed by alma__graph_free and by alma__graph_compact when it
 *    drops the node. alma__graph_clone does not copy it (each graph builds its own), so a clone
 *    never shares state with the model it came from.
 *  - Staleness: the header keeps the key the state was built from (op, since_version, the attrs
 *    array and its length). Passes never mutate attribute payloads (clone.c); they replace the
 *    attrs array or retype the node, so a key mismatch means the node was edited and the state is
 *    rebuilt on next use. Editing a node while another thread runs it is not allowed anyway.
 *  - A temporary copy of a node (fused.c's as_base runs a base op's kernel on one) must set
 *    `prepared` to NULL: the copy must neither free nor replace the original node's state. */
typedef struct alma_prepared {
  void (*release)(struct alma_prepared *self); /* frees the whole state */
  const struct alma_op_def *op;                /* the key: set by alma__node_prepared */
  int since_version;
  const struct alma_attr *attrs;
  int n_attrs;
} alma_prepared;

typedef struct alma_node {
  const char *name;               /* may be "" in the file; alma gives unnamed nodes "<op>_<index>" */
  const char *op_type;
  const char *domain;             /* "" for ai.onnx */
  int n_inputs, n_outputs;
  int *inputs;                    /* value indices; -1 = optional input omitted ("") */
  int *outputs;                   /* value indices; -1 = optional output omitted */
  int n_attrs;
  alma_attr *attrs;
  int n_implicit;                 /* If/Loop: outer values their subgraphs read (this graph's indices) */
  int *implicit_inputs;
  const struct alma_op_def *op;   /* resolved at load */
  int since_version;              /* the op's schema version in force for this model's opset */
  int dead;                       /* removed by a pass; alma__graph_compact drops it */
  /* Prepared state or NULL (see alma_prepared). Atomic: threads running one graph may build it
   * concurrently on first use; the first compare-and-swap wins. Zeroed nodes start with NULL. */
  _Atomic(alma_prepared *) prepared;
} alma_node;

typedef struct alma_opset_import {
  const char *domain;
  int64_t version;
} alma_opset_import;

typedef struct alma_graph {
  alma_arena *arena;               /* shared with subgraphs; owned by the top-level graph */
  int owns_arena;
  const char *name;
  alma_value *values;
  int n_values, cap_values;
  alma_node *nodes;                /* topologically sorted after load and after every pass */
  int n_nodes, cap_nodes;
  int *inputs;                     /* caller-fed graph inputs, in declaration order */
  int n_inputs;
  int *outputs;
  int n_outputs;
  struct alma_graph *parent;       /* enclosing graph for subgraphs, NULL at top level */
  alma_opset_import *opsets;       /* shared with subgraphs */
  int n_opsets;
  /* An If branch of a session's graph compiled for the session's runtime (session.c), which
   * alma__exec_subgraph runs instead of walking the branch on EAGER; NULL otherwise (never cloned). */
  struct alma__subplan *subplan;
} alma_graph;

alma_graph *alma__graph_new(alma_arena *arena /* NULL: create and own one */);
void alma__graph_free(alma_graph *g);
/* Deep copy (new arena): passes work on a copy so the loaded model stays pristine. */
alma_status alma__graph_clone(const alma_graph *g, alma_graph **out);

/* A subgraph (an If branch) as a top-level graph of its own (new arena, shares immutable data with
 * the source like alma__graph_clone): each outer-scope name it reads becomes an initializer (a view)
 * when the enclosing graph's value is constant, otherwise a graph input with the enclosing value's
 * declared type, in value order. ALMA_ERR_INVALID_MODEL naming an outer name no enclosing graph defines. */
alma_status alma__graph_clone_standalone(const alma_graph *sub, alma_graph **out);

/* The reverse, for a standalone graph made by alma__graph_clone_standalone (and then converted by
 * passes): a copy of it as a subgraph of `parent` (in parent's arena), its inputs and the
 * initializers that are views of an enclosing graph's constants outer references again. */
alma_status alma__graph_clone_into(const alma_graph *standalone, alma_graph *parent, alma_graph **out);

/* Adds a value named `name` (copied into the arena); returns its index or -1 on OOM. */
int alma__graph_add_value(alma_graph *g, const char *name);
/* Index of the value with this name, or -1 (newest definition first). */
int alma__graph_find_value(const alma_graph *g, const char *name);
/* Adds a node; inputs/outputs copied. Returns the node index or -1 on OOM. */
int alma__graph_add_node(alma_graph *g, const char *op_type, const char *domain, const char *name,
                         const int *inputs, int n_inputs, const int *outputs, int n_outputs);
/* Drops dead nodes and values no longer referenced (keeping graph inputs/outputs), then sorts
 * topologically; fixes `producer`. */
alma_status alma__graph_compact(alma_graph *g);
/* Topological sort of g->nodes (stable: keeps file order where possible). ALMA_ERR_INVALID_MODEL
 * naming a node on a cycle. */
alma_status alma__graph_toposort(alma_graph *g);
/* Dangling inputs, duplicate producers, missing outputs, cycles; errors name the node. */
alma_status alma__graph_validate(const alma_graph *g);
/* Number of nodes consuming value v (counting graph outputs as a consumer), over g only. */
int alma__graph_count_uses(const alma_graph *g, int v);

/* Frees n's prepared state (if any) and clears the slot. Not thread-safe: for graph teardown and
 * passes, when nothing runs the node. */
void alma__node_unprepare(alma_node *n);

/* Attribute lookup; NULL if absent. */
const alma_attr *alma__node_attr(const alma_node *n, const char *name);
int64_t alma__attr_i(const alma_node *n, const char *name, int64_t dflt);
float alma__attr_f(const alma_node *n, const char *name, float dflt);
const char *alma__attr_s(const alma_node *n, const char *name, const char *dflt);
/* List attribute: returns count (0 if absent) and sets the list pointer. */
int alma__attr_ints(const alma_node *n, const char *name, const int64_t **ints);
int alma__attr_floats(const alma_node *n, const char *name, const float **floats);

/* Opset version imported for a domain ("" and "ai.onnx" are the same); 0 if not imported. */
int64_t alma__graph_opset(const alma_graph *g, const char *domain);

#endif
