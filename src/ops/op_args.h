/* The parameter lists of alma_infer_fn and alma_exec_fn (op.h), for op files that define many
 * kernels: `static alma_status relu_infer(INFER_ARGS)`, `static alma_status relu_exec(EXEC_ARGS)`.
 * Internal to src/ops and meant for its .c files: the short names would clash elsewhere. */
#ifndef ALMA_OPS_OP_ARGS_H
#define ALMA_OPS_OP_ARGS_H

#include "ops/op.h"

#define EXEC_ARGS                                                                                \
  alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, \
      int nout
#define INFER_ARGS \
  const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout

#endif
