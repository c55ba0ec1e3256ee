/* One row of attention scores through the softmax's exponentials, vectorised: shared by the fused
 * attention kernels of the BLAS and DNNL runtimes. */
#ifndef ALMA_OPS_SOFTMAX_ROW_H
#define ALMA_OPS_SOFTMAX_ROW_H

#include <stdint.h>

/* s[j] += mask[j] (m_col != 0), or += mask[0] (m_col == 0; mask may be NULL), then
 * s[j] = exp(s[j] - max) in place; returns the sum. The maximum skips NaN, as the reference's. */
float alma__softmax_exp_row(float *s, int64_t n, const float *mask, int64_t m_col);

#endif
