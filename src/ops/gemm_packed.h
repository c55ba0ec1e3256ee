/* Few-row products on constant weights (decode steps): a Gemm/MatMul node whose B is an initializer
 * keeps a copy of op(B) packed in column panels (sgemm.h, alma__sgemm_packed) in its prepared state,
 * made the first time the node runs with at most ALMA_PACKED_MAX_ROWS rows (a prefill-only graph
 * never pays the memory), within a budget. EAGER's Gemm/MatMul kernels, the BLAS runtime and the DNNL runtime's
 * few-row path use it, and LSTM/GRU nodes keep their W and R packed the same way (ops/rnn.c); the
 * original stays in the graph (other runtimes, output checks), so weights that are used take twice
 * their size in memory. ALMA_PACKED_GEMM=0 turns the path off (A/B
 * measurements of one build). */
#ifndef ALMA_OPS_GEMM_PACKED_H
#define ALMA_OPS_GEMM_PACKED_H

#include "ops/op.h"
#include "ops/sgemm.h"

/* Up to this many rows the packed kernel (B from memory once, each row group re-reading the panel
 * from L2) beats repacking B per call (alma's blocked SGEMM, OpenBLAS); see docs/performance.md. */
#define ALMA_PACKED_MAX_ROWS 16

/* Packed copies stop (nodes run the unpacked kernel) once all of them together would pass a budget:
 * a quarter of physical memory, ALMA_PACKED_GEMM_MAX_MB, or what tests set; the bytes held now. */
void alma__packed_gemm_set_budget(int64_t bytes);
int64_t alma__packed_gemm_bytes(void);

/* Takes bytes from that budget for a packed copy: 1 when they fit (give them back with
 * alma__packed_gemm_unreserve when the copy is freed), 0 when they do not (nothing taken). */
int alma__packed_gemm_reserve(int64_t bytes);
void alma__packed_gemm_unreserve(int64_t bytes);

/* 0 when ALMA_PACKED_GEMM=0 is set (read once). */
int alma__packed_gemm_enabled(void);

/* The packed op(B) of node `owner` (the graph's node, never a temporary copy: its prepared slot
 * holds the copy) for B = b, a float32 matrix the caller knows to be a graph constant; NULL when it
 * cannot be had (not float32 2-D, empty, out of memory, or the node's copy was made from another
 * tensor): the caller then runs the unpacked kernel. Thread-safe (racing first calls each pack,
 * one copy is kept). */
const alma__sgemm_packed *alma__gemm_packed_b(const alma_node *owner, int trans_b, const alma_tensor *b);

/* C = beta * C + row_bias + col_bias + alpha * A * pk over all of pk's panels (sgemm.h,
 * alma__sgemm_packed_rows), split among the threads of the context's parallel loop when it has one
 * (the same bits whatever the split). ctx may be NULL. */
void alma__gemm_packed_run(alma_exec_ctx *ctx, int64_t M, float alpha, const float *A, int64_t lda,
                           const alma__sgemm_packed *pk, float beta, float *C, int64_t ldc, const float *rb,
                           const float *cb);

/* Gemm or MatMul's exec (base->op) for a node run as `base` (fused.c's copy bound to the base op)
 * whose packed weights belong to `owner` (the fused node itself). */
alma_status alma__gemm_exec_owned(alma_exec_ctx *ctx, const alma_node *base, const alma_node *owner,
                                  const alma_tensor *const *in, int nin, alma_tensor *out, int nout);

#endif
