/* com.microsoft contrib operators that runtimes with their own threads (BLAS, DNNL) run in parallel
 * in their EAGER fallback: the encoder ops of ONNX Runtime's transformer optimizer (contrib_bert.c:
 * Attention, MultiHeadAttention, Gelu, BiasGelu, FastGelu, QuickGelu, BiasAdd; contrib_llm.c:
 * SkipLayerNormalization, SkipSimplifiedLayerNormalization) and GroupQueryAttention (contrib_llm.h).
 * EAGER runs the same code on one thread. */
#ifndef ALMA_OPS_CONTRIB_BERT_H
#define ALMA_OPS_CONTRIB_BERT_H

#include "ops/contrib_llm.h" /* alma__nbits_parfor, GroupQueryAttention's entry point */

/* Whether n is one of the operators above (any dtype: alma__contrib_exec_par runs what it does not
 * split, float16 for instance, as EAGER does). */
int alma__contrib_par(const alma_node *n);

/* n's exec (inputs checked as EAGER checks them, outputs allocated with the inferred shapes) with its
 * work split into items run by pf (NULL, or threads <= 1: in order on the calling thread):
 *  - BiasAdd, the skip normalizations: blocks of elements / rows, each computed by EAGER's code, so
 *    the outputs are EAGER's bit for bit;
 *  - float32 Gelu, BiasGelu, FastGelu, QuickGelu: blocks of 4096 elements through the vectorised
 *    alma__gelu_row (softmax_row.h) whenever pf is given, even for one thread; EAGER keeps libm's
 *    erff/tanhf. Within 1e-7 * (1 + |y|) of the exact function (EAGER's libm form is as close
 *    there, but loses relative precision in the negative tail, where 1 + erff cancels);
 *  - Attention: the QKV projection in blocks of 64 output columns (alma__sgemm_bias per block; the
 *    packed kernel sums each element in the same order as EAGER's single call, so the projection is
 *    EAGER's bit for bit when B * S >= 4), then the attention core per (batch, head), as EAGER;
 *  - MultiHeadAttention: the attention core per (batch, head);
 *  - GroupQueryAttention: alma__gqa_exec_par. */
alma_status alma__contrib_exec_par(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                   int nout, int threads, alma__nbits_parfor pf, void *pctx);

/* contrib_llm.c: SkipLayerNormalization (simplified = 0) and SkipSimplifiedLayerNormalization (1) with
 * their rows in blocks run by pf. */
alma_status alma__skip_norm_exec_par(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                     int nout, int simplified, int threads, alma__nbits_parfor pf, void *pctx);

#endif
