/* The graph executor shared by every runtime. It walks nodes in topological order, infers each
 * node's output shapes from its actual inputs, allocates them, and runs the node: through the
 * runtime's kernel hook when the runtime takes the node, otherwise through the EAGER reference
 * kernel (the fallback). Intermediates are freed after their last use. */
#ifndef ALMA_EXEC_H
#define ALMA_EXEC_H

#include "ops/op.h"

/* Called for every node with its inputs and allocated (zeroed) outputs. Set *handled = 1 after
 * computing the outputs; leave it 0 to let the EAGER kernel run the node. node_index indexes
 * g->nodes of the top-level graph (subgraph nodes always run on EAGER kernels). */
typedef alma_status (*alma_node_hook)(void *user, int node_index, const alma_node *n, const alma_tensor *const *in,
                                      int nin, alma_tensor *out, int nout, int *handled);

alma_status alma__exec_graph(const alma_graph *g, alma_node_hook hook, void *user, const alma_tensor *inputs,
                             int n_inputs, alma_tensor *outputs, int n_outputs);

/* Per-node timing for runtimes' profiles (profile_start): called after each top-level node with
 * the wall time it took (shape inference, allocation, the hook or the EAGER kernel, releasing its
 * inputs). */
typedef void (*alma_node_timer)(void *user, int node_index, double seconds);

/* alma__exec_graph that reports each node's time to timer (NULL: none, as alma__exec_graph). user
 * goes to both hook and timer. */
alma_status alma__exec_graph_timed(const alma_graph *g, alma_node_hook hook, alma_node_timer timer, void *user,
                                   const alma_tensor *inputs, int n_inputs, alma_tensor *outputs, int n_outputs);

/* Per-node profile counters of n nodes, allocated on first use and zeroed (profile_start of the
 * runtimes with a node loop). On failure both are freed and NULL. */
alma_status alma__prof_counters(int n, double **seconds, int64_t **runs);

/* Like alma__exec_graph_timed, for runtimes that run a group of nodes at once (XNNPACK partitions).
 * The executor neither infers nor allocates the outputs of a node i with defer[i] != 0: the hook
 * gets out[] zeroed (data NULL) and must set *handled = 1; an output it allocates
 * (alma__tensor_alloc) becomes the value, one it leaves empty has no data and only deferred nodes
 * may read it. Inputs of deferred nodes are not checked for data. defer: one flag per g->nodes
 * (NULL: none); timer may be NULL. */
alma_status alma__exec_graph_deferred(const alma_graph *g, alma_node_hook hook, alma_node_timer timer, void *user,
                                      const unsigned char *defer, const alma_tensor *inputs, int n_inputs,
                                      alma_tensor *outputs, int n_outputs);

/* The value an outer-scope name refers to in the executions enclosing ctx (its innermost
 * definition), or NULL when none holds it. */
const alma_tensor *alma__exec_lookup_outer(alma_exec_ctx *ctx, const char *name);

/* Runs an If branch compiled by a session (graph.h's subplan; session.c): its inputs are looked up
 * by name through ctx, its outputs are owned tensors, one per branch output. */
alma_status alma__subplan_run(struct alma__subplan *sp, alma_exec_ctx *ctx, alma_tensor *outputs, int n_outputs);

/* Moves the graph outputs out of an executor's value table `env` (one tensor per value) into
 * `outputs`: owned tensors are moved, views (initializers, inputs) copied. On failure nothing is
 * returned. For runtimes with their own node loop. */
alma_status alma__exec_take_outputs(const alma_graph *g, alma_tensor *env, alma_tensor *outputs, int n_outputs);

#endif
