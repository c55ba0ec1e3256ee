/* One row of attention scores through the softmax's exponentials, vectorised: shared by the fused
 * attention kernels of the BLAS and DNNL runtimes; the Gelu family on the same exponential. */
#ifndef ALMA_OPS_SOFTMAX_ROW_H
#define ALMA_OPS_SOFTMAX_ROW_H

#include <stdint.h>

/* s[j] += mask[j] (m_col != 0), or += mask[0] (m_col == 0; mask may be NULL), then
 * s[j] = exp(s[j] - max) in place; returns the sum. The maximum skips NaN, as the reference's. */
float alma__softmax_exp_row(float *s, int64_t n, const float *mask, int64_t m_col);

/* y[j] = gelu(x[j] + bias[j]) for j < n (bias may be NULL; y may be x), vectorised on the expf above:
 * kind 0 the erf form (Gelu, BiasGelu), 1 the tanh approximation (FastGelu), 2 x * sigmoid(alpha x)
 * (QuickGelu). Not libm's erff/tanhf: within a few float ulps of them relative to the result
 * (tests/ops_bert measures it); the BLAS and DNNL runtimes use it, EAGER keeps libm's. */
void alma__gelu_row(float *y, const float *x, const float *bias, int64_t n, int kind, float alpha);

/* y[j] = sigmoid(x[j]) (silu = 0), or x[j] * sigmoid(x[j]) (silu = 1), for j < n (y may be x),
 * vectorised: the reference's two-sided form, e = exp(-|x|), 1 / (1 + e) or e / (1 + e), so neither
 * side overflows or loses its tail; within a few float ulps of it with libm's expf, NaN -> NaN.
 * Sigmoid and the Sigmoid/SiLU activations fused into Conv/Gemm (EAGER's and BLAS's epilogues). */
void alma__sigmoid_row(float *y, const float *x, int64_t n, int silu);

/* y[j] = tanh(x[j]) for j < n (y may be x), vectorised: within a few float ulps of libm's tanhf,
 * odd (-0 -> -0), NaN -> NaN. EAGER's Tanh (float32) and the Tanh/Gelu(tanh) activations. */
void alma__tanh_row(float *y, const float *x, int64_t n);

/* y[j] = 0.5 x (1 + tanh(0.7978845608 (x + 0.044715 x^3))) with x = x[j], on the tanh above (y may
 * be x): Gelu(approximate="tanh") in float32, as EAGER's formula with libm's tanhf. */
void alma__gelu_tanh_row(float *y, const float *x, int64_t n);

/* Softmax (is_log 0) or LogSoftmax (1) down the columns of x [n, inner] into y (y may be x),
 * vectorised over the columns on the expf above: the strided case (an axis
 * other than the last, YOLO's DFL head). mx and sum are scratch of inner floats each. */
void alma__softmax_cols(const float *x, float *y, int64_t n, int64_t inner, int is_log, float *mx, float *sum);

#endif
