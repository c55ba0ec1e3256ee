/* Static shape/type inference with constant propagation, memory planning and cost estimation. */
#ifndef ALMA_INFER_H
#define ALMA_INFER_H

#include "ops/op.h"

/* Per-value result of inference. rank -1 = unknown (data-dependent). data non-NULL when the value
 * is known: initializers (views) and values computed from constants (owned). */
typedef struct alma_infer_result {
  int n_values;
  alma_tensor *info;     /* one per graph value */
  int64_t macs, flops;   /* -1 when some heavy node's shape is unknown */
  int n_unknown;         /* values whose shape could not be inferred */
} alma_infer_result;

/* Binds symbolic dims of graph inputs: dims from `shapes` when given (per input, NULL = use
 * default), otherwise every unknown dim takes `default_dim`. Runs each node's infer in order;
 * small results computed from constants are evaluated (max_fold_elems) so shape subgraphs resolve.
 * Errors from infer that cannot be blamed on the bound symbolic dims are returned. */
alma_status alma__graph_infer(const alma_graph *g, const alma_tensor *const *input_shapes, int64_t default_dim,
                              int64_t max_fold_elems, alma_infer_result *out);
void alma__infer_result_free(alma_infer_result *r);

/* Resolves every node's op for the graph's opsets, recursively into subgraphs. */
alma_status alma__graph_resolve_ops(alma_graph *g);

/* Greedy-by-size offset assignment of activation buffers given lifetimes in topological order;
 * returns the planned peak in bytes (-1 if some shape is unknown). */
int64_t alma__memory_plan_peak(const alma_graph *g, const alma_infer_result *r);

#endif
