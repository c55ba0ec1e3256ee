/* alma's own CUDA C kernels (cuda_kernels.cu), as plain C launchers for the runtime (cuda.c). Each
 * enqueues on `stream` and returns cudaGetLastError()'s value as an int (0: launched). float32. */
#ifndef ALMA_CUDA_KERNELS_H
#define ALMA_CUDA_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ALMA_CU_MAX_RANK 8

/* Elementwise ops with one input (a, b: the op's parameters). */
typedef enum {
  ALMA_CU_RELU, ALMA_CU_SIGMOID, ALMA_CU_TANH, ALMA_CU_CLIP /* a = min, b = max */, ALMA_CU_LEAKY /* a = alpha */,
  ALMA_CU_HARDSIGMOID /* a = alpha, b = beta */, ALMA_CU_HARDSWISH, ALMA_CU_ERF, ALMA_CU_EXP, ALMA_CU_LOG,
  ALMA_CU_SQRT, ALMA_CU_NEG, ALMA_CU_ABS, ALMA_CU_RECIPROCAL, ALMA_CU_GELU /* a = 1: tanh approximation */,
  ALMA_CU_ELU /* a = alpha */, ALMA_CU_SOFTPLUS, ALMA_CU_SILU /* x * sigmoid(x) */
} alma_cu_unary_op;

/* Elementwise ops with two inputs, numpy broadcasting. */
typedef enum { ALMA_CU_ADD, ALMA_CU_SUB, ALMA_CU_MUL, ALMA_CU_DIV, ALMA_CU_POW, ALMA_CU_MAX, ALMA_CU_MIN } alma_cu_binary_op;

/* Output dims and, per input, its element strides in the output's index space (0 on a broadcast dim). */
typedef struct alma_cu_bcast {
  int rank;
  int64_t dims[ALMA_CU_MAX_RANK];
  int64_t sa[ALMA_CU_MAX_RANK], sb[ALMA_CU_MAX_RANK];
} alma_cu_bcast;

int alma_cu_unary(alma_cu_unary_op op, const float *x, float *y, int64_t n, float a, float b, void *stream);
int alma_cu_binary(alma_cu_binary_op op, const float *a, const float *b, float *y, const alma_cu_bcast *bc, int64_t n,
                   void *stream);
/* y[i] = scale * x[broadcast index of i] (strides in bc->sa): Gemm's beta * C. */
int alma_cu_expand(const float *x, float *y, const alma_cu_bcast *bc, int64_t n, float scale, void *stream);
/* y = x * scale[c] + shift[c] over NCHW-like data: n_outer x C x inner. */
int alma_cu_channel_affine(const float *x, float *y, const float *scale, const float *shift, int64_t n_outer, int64_t c,
                           int64_t inner, void *stream);
/* y[r] = mean or max over x[r, 0..cols) for each of rows. */
int alma_cu_row_reduce(const float *x, float *y, int64_t rows, int64_t cols, int is_max, void *stream);
/* Softmax (log_softmax when is_log) along the last of rows x cols. */
int alma_cu_softmax(const float *x, float *y, int64_t rows, int64_t cols, int is_log, void *stream);
/* LayerNormalization along the last cols: y = (x - mean) / sqrt(var + eps) * gamma + beta (beta may be NULL). */
int alma_cu_layernorm(const float *x, float *y, const float *gamma, const float *beta, int64_t rows, int64_t cols,
                      float eps, void *stream);
/* y[out index] = x[sum of out coordinates * in_strides]: Transpose (in_strides permuted), n = numel. */
int alma_cu_permute(const float *x, float *y, int rank, const int64_t *out_dims, const int64_t *in_strides, int64_t n,
                    void *stream);

/* 2-D pooling, NCHW; pads begin (pt, pl) and end (pb, pr); output dims given (ceil_mode included). */
typedef struct alma_cu_pool {
  int64_t n, c, h, w, oh, ow;
  int kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  int is_max, count_include_pad;
} alma_cu_pool;
int alma_cu_pool2d(const float *x, float *y, const alma_cu_pool *p, void *stream);

#ifdef __cplusplus
}
#endif
#endif
