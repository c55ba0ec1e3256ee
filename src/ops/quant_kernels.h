/* DynamicQuantizeLinear's arithmetic, shared by EAGER's kernel (quant.c) and the DNNL runtime's
 * (dnnl_int8_exec.c), so that both quantize every element the same way: ONNX's definition
 *   range   [min(0, min x), max(0, max x)]  (NaN ignored)
 *   scale = (max - min) / 255 (1 for an all-zero input), zero point = saturate(round(-min / scale))
 *   y     = saturate(round_half_even(x / scale) + zero point), NaN -> 0
 * in float32, vectorized (AVX2 where the CPU has it, chosen at run time; SSE2 on other x86-64;
 * plain loops elsewhere: the same IEEE operations, so the same bytes everywhere). The functions
 * are reentrant: the DNNL runtime calls them on chunks from several threads. */
#ifndef ALMA_OPS_QUANT_KERNELS_H
#define ALMA_OPS_QUANT_KERNELS_H

#include <stdint.h>

/* *mn = min(0, min x), *mx = max(0, max x) over x[0..n). */
void alma__dynq_range(const float *x, int64_t n, float *mn, float *mx);
/* Scale and zero point of the range [mn, mx] (mn <= 0 <= mx). */
void alma__dynq_params(float mn, float mx, float *scale, uint8_t *zp);
/* y[i] = saturate(round_half_even(x[i] / scale) + zp) in [0, 255], NaN -> 0. */
void alma__dynq_apply(const float *x, int64_t n, float scale, uint8_t zp, uint8_t *y);
/* QuantizeLinear per tensor, as ONNX computes it: out[i] = saturate(round_half_even(x[i] / scale)
 * + zp) into uint8 (is_u8) or int8, NaN -> 0 (the DNNL runtime's plain QuantizeLinear too). */
void alma__quantize_f32(const float *x, int64_t n, float scale, int32_t zp, int is_u8, void *out);

#endif
