/* com.microsoft MatMulNBits for runtimes that bring their own threads (contrib_nbits.c). EAGER runs
 * it on one thread; the BLAS and DNNL runtimes claim the node and split its output columns over
 * their thread pools through this entry point. */
#ifndef ALMA_OPS_CONTRIB_NBITS_H
#define ALMA_OPS_CONTRIB_NBITS_H

#include "ops/op.h"

/* A runtime's parallel loop: op.h's alma_exec_parfor (these names predate it). */
typedef alma_exec_item_fn alma__nbits_item_fn;
typedef alma_exec_parfor alma__nbits_parfor;

/* MatMulNBits's exec (inputs checked as EAGER checks them, out allocated with the inferred shape)
 * with the output columns split into items run by pf (NULL: in order on the calling thread) for
 * `threads` threads. Each column is computed by the same code whatever the split, so the result is
 * EAGER's, bit for bit. */
alma_status alma__mnb_exec_par(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                               int threads, alma__nbits_parfor pf, void *pctx);

/* Whether n is a MatMulNBits node (com.microsoft). */
int alma__is_mnb(const alma_node *n);

#endif
