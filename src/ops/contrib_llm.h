/* com.microsoft GroupQueryAttention for runtimes that bring their own threads (contrib_llm.c). EAGER
 * runs it on one thread; the BLAS and DNNL runtimes run it (on EAGER's kernel, in their fallback
 * path) with its (batch, KV head) pairs split over their thread pools through this entry point. */
#ifndef ALMA_OPS_CONTRIB_LLM_H
#define ALMA_OPS_CONTRIB_LLM_H

#include "ops/contrib_nbits.h" /* alma__nbits_parfor: the runtimes' parallel loop */

/* GroupQueryAttention's exec with its (batch, KV head) items run by pf (NULL: in order on the calling
 * thread) for `threads` threads. Each item is computed by the same code whatever the split, so the
 * outputs are EAGER's, bit for bit. */
alma_status alma__gqa_exec_par(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout,
                               int threads, alma__nbits_parfor pf, void *pctx);

/* Whether n is a GroupQueryAttention node (com.microsoft). */
int alma__is_gqa(const alma_node *n);

#endif
