/* Exact 8-bit integer GEMM for the integer ops (MatMulInteger, ConvInteger, DynamicQuantizeLSTM):
 * C[M x N] (int32) = sum over k of (A[m,k] - za[m]) * (B[k,n] - zb[n]) with A uint8 and B int8 or
 * uint8, B packed once (graph constants keep it). Runs on AVX-512 VNNI (vpdpbusd: four uint8 x int8
 * products summed into int32, no saturation); alma__qgemm_available() is 0 on other CPUs, where the
 * callers keep their float path (exact too: products of at most 255 x 255 summed in chunks below
 * 2^24). Sums wrap in int32 as ONNX's and ONNX Runtime's do. */
#ifndef ALMA_OPS_QGEMM_H
#define ALMA_OPS_QGEMM_H

#include <stdint.h>

#include "alma/status.h"

enum { ALMA_QGEMM_PANEL = 16 }; /* output columns per packed panel */

typedef struct alma__qgemm_packed {
  int64_t K, N, kg, panels; /* kg: groups of 4 along K (the last zero-padded) */
  int8_t *data;             /* [panels][kg][16 columns][4 k]; B - 128 when B is uint8 */
  int32_t *colsum;          /* per column (panels * 16): sum over k of the stored int8 values */
  int32_t shift;            /* 128 when B is uint8, else 0 */
} alma__qgemm_packed;

/* Whether this CPU runs the kernel (AVX-512 F/BW/VNNI; ALMA_QGEMM=0 in the environment turns it off
 * so tests can compare with the float path). */
int alma__qgemm_available(void);
/* Packs B (K x N, element (k, n) at b[k * sk + n * sn]; uint8 when b_u8, else int8). ALMA_ERR_NOMEM. */
alma_status alma__qgemm_pack(const void *b, int b_u8, int64_t K, int64_t N, int64_t sk, int64_t sn,
                             alma__qgemm_packed *out);
void alma__qgemm_free(alma__qgemm_packed *p);
/* Bytes alma__qgemm_pack takes for K x N. */
int64_t alma__qgemm_bytes(int64_t K, int64_t N);
/* Rows 0..M-1 and panels p0..p1-1 of C (ldc): za per row (NULL: 0), zb per column (NULL: 0). Only
 * when alma__qgemm_available(). */
void alma__qgemm_run(int64_t M, const uint8_t *A, int64_t lda, const int32_t *za, const alma__qgemm_packed *B,
                     const int32_t *zb, int64_t p0, int64_t p1, int32_t *C, int64_t ldc);

#endif
