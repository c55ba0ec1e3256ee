/* Dense matrix-multiply kernels shared by the nn operators (Gemm, MatMul, Conv, ConvTranspose,
 * Einsum) and anyone else who needs one (recurrent ops, quantized ops). No external BLAS: these are
 * EAGER's reference kernels, but the float32 one is cache-blocked and register-tiled because real
 * models (ResNet, Transformers) run through EAGER.
 *
 * All matrices are row-major. C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, where op(X) is
 * X or X^T (trans_* != 0). lda/ldb/ldc are row strides in elements of the matrices as stored
 * (for a transposed A stored as [K,M], lda >= M). beta == 0 ignores C's prior contents (NaN-safe).
 * ALMA_ERR_NOMEM (with a message) if a packing buffer cannot be allocated. */
#ifndef ALMA_OPS_SGEMM_H
#define ALMA_OPS_SGEMM_H

#include "core/core.h"

/* Vector helpers for float32 kernels: 8-float GCC/Clang vectors (lowered to SSE pairs without
 * AVX) and function multiversioning, an AVX2+FMA clone beside the baseline one chosen at load
 * time on x86-64, so the library needs no -march flags. */
#if defined(__x86_64__) && defined(__has_attribute)
/* clang < 15 emits no callable symbol for a target_clones function used from another file, so
 * there the portable version is the only one. */
#if defined(__clang__) && __clang_major__ < 15 && !defined(ALMA_NO_MULTIVERSION)
#define ALMA_NO_MULTIVERSION
#endif
#if __has_attribute(target_clones) && !defined(ALMA_NO_MULTIVERSION)
#define ALMA_MULTIVERSION __attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
#endif
#ifndef ALMA_MULTIVERSION
#define ALMA_MULTIVERSION
#endif
typedef float alma__v8f __attribute__((vector_size(32)));
/* unaligned, aliasing view of 8 floats in a float array */
typedef float alma__v8fu __attribute__((vector_size(32), aligned(4), may_alias));
#define ALMA_LD8(p) (*(const alma__v8fu *)(p))
#define ALMA_ST8(p, v) (*(alma__v8fu *)(p) = (v))

alma_status alma__sgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                        int64_t ldc);

/* Same, plus optional biases broadcast along the product: C[i,j] += row_bias[i] + col_bias[j]
 * (either may be NULL). They fold into the kernel's first store, sparing a pass over C. */
alma_status alma__sgemm_bias(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                             const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                             int64_t ldc, const float *row_bias, const float *col_bias);

/* C = beta * C + alpha * A * op(B) for a few rows of a non-transposed A (decode steps, small
 * batches): up to four rows share each pass over B, so B is read once per four rows; no allocation.
 * What alma__sgemm does for M < 4, for callers that pick the kernel themselves (the BLAS runtime). */
void alma__sgemm_rows(int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* op(B) [K, N] packed once for few-row products (decode steps): column panels of
 * ALMA_SGEMM_PANEL columns, [panels][K][ALMA_SGEMM_PANEL] (64-byte aligned; columns past N are
 * zero), so a pass over B is one sequential stream however B was stored (transposed or not). A
 * row-major B read four rows at a time over 512-column blocks is 4 streams at an 8 KB stride and
 * reaches 8-10 GB/s from DRAM on Zen 3 where one stream reaches 12-13. */
#define ALMA_SGEMM_PANEL 16
typedef struct alma__sgemm_packed {
  int64_t K, N, panels;
  float *p;
} alma__sgemm_packed;
/* Packs op(B) (trans_b: B is stored [N, K]); K, N >= 1. ALMA_ERR_NOMEM (with a message) when it
 * cannot be allocated or its size overflows. */
alma_status alma__sgemm_pack(int trans_b, int64_t K, int64_t N, const float *B, int64_t ldb, alma__sgemm_packed *out);
void alma__sgemm_packed_free(alma__sgemm_packed *pk);
/* Rows kernel on packed B, over panels [p0, p1) (columns p0 * PANEL .. min(N, p1 * PANEL)):
 * C = beta * C + row_bias[i] + col_bias[j] (beta == 0 ignores C; either bias may be NULL; col_bias
 * is indexed by column from 0), then C += (alpha * A[i, k]) * op(B)[k, j] for k = 0..K-1 in order,
 * each C element in a register over all of K. Bit for bit alma__sgemm_rows(0, ...) (scale_c, then
 * the same sum in the same order) on op(B) stored row-major, whatever M is and however the panels
 * are split among threads. Up to six rows and four panels per pass (few rows take several panels,
 * for enough independent sums); more rows take the panels again while they are in L2, and many
 * rows go in chunks of A that stay in L2. AVX-512 where the CPU has it (the same bits). */
void alma__sgemm_packed_rows(int64_t M, int64_t p0, int64_t p1, float alpha, const float *A, int64_t lda,
                             const alma__sgemm_packed *B, float beta, float *C, int64_t ldc, const float *row_bias,
                             const float *col_bias);

/* y[0..n) += a * x[0..n) and the dot product of x and y, vectorized (AVX2 where available). */
void alma__saxpy(int64_t n, float a, const float *x, float *y);
float alma__sdot(int64_t n, const float *x, const float *y);

/* Plain loops in double precision (float64 tensors, and float16/bfloat16 paths that want it). */
void alma__dgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
                 int64_t lda, const double *B, int64_t ldb, double beta, double *C, int64_t ldc);

/* Integer matrix multiply with two's-complement wrap-around (uint64 arithmetic gives the same bits
 * for signed and unsigned 64-bit values); no alpha/beta: C = op(A)*op(B) (+ C if accumulate). */
void alma__igemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const uint64_t *A, int64_t lda,
                 const uint64_t *B, int64_t ldb, int accumulate, uint64_t *C, int64_t ldc);

#endif
