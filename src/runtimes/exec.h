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

#endif
