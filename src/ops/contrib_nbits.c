/* ONNX Runtime's weight-only block-quantized contrib operators (domain com.microsoft, version 1), which
 * its int4 tooling writes (onnxruntime.quantization.matmul_nbits_quantizer, onnxruntime-genai's model
 * builder):
 *   MatMulNBits           Y = A @ dequant(B)^T (+ bias), B [N, k_blocks, blob] packed 2, 4 or 8 bits
 *   GatherBlockQuantized  Gather of rows of a block-quantized table (uint8-packed form)
 *
 * The meaning is ONNX Runtime's contrib schema (docs/ContribOperators.md) and its CPU kernels (1.32):
 *  - B's element k of output column n sits in block k / block_size at position k % block_size; a byte
 *    holds 8 / bits elements, the first in the low bits. A last block shorter than block_size is padded.
 *  - dequant(B)[n, k] = (q - zp) * scale of the element's block; zp is packed uint8 of the same bit
 *    width ([N, ceil(k_blocks * bits / 8)]), A's float type ([N, k_blocks]), or 2^(bits - 1) when
 *    absent. scales and zero points may be 1-D (ONNX Runtime accepts the flattened forms).
 *  - g_idx (deprecated): the block whose scale and zero point element k uses is g_idx[k].
 *  - B with a zero-sized dimension is an omitted projection: Y is the bias (or 0).
 * alma computes in float32 unless accuracy_level is 4 (the author allows int8 compute): then, for
 * 4-bit B in blocks of 32 or more, A is rounded to int8 per block and the products are integer, as
 * ONNX Runtime does (see "accuracy_level 4" below; docs/quantization.md). Bit widths and forms ONNX Runtime's CPU kernel refuses (3, 5, 6, 7
 * bits, 8 bits with float zero points or g_idx, bfloat16) fail at load naming the node.
 *
 * Speed: B is never expanded whole. Up to 48 rows of A go through a GEMV that unpacks B on the fly,
 * 16 bytes a step, four rows at a time (each code converted once feeds four FMAs), the block's dot
 * products in eight float lanes scaled once per block; zero points enter as zp * scale * sum(A's
 * block). More rows dequantize a panel of B (about 1 MiB of float32) at a time and call alma__sgemm.
 * Both work on a copy of A reordered to match B's packing (a_reorder), so neither shuffles codes.
 * Blocks of fewer than 16 bytes (4-bit blocks of 16, 2-bit blocks of 16 or 32) and g_idx take an
 * element-wise dequantization into panels instead. Vector code is GCC/Clang vector extensions compiled
 * twice (ALMA_MULTIVERSION: AVX2+FMA and baseline x86-64), like sgemm.c. EAGER runs them on one
 * thread; the BLAS and DNNL runtimes split the output columns over theirs (alma__mnb_exec_par in
 * contrib_nbits.h), every column computed by the same code, so their outputs are EAGER's bit for bit. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "ops/contrib_nbits.h"
#include "ops/nn_util.h"
#include "ops/sgemm.h"

typedef alma__v8f v8f;
typedef int32_t v8i __attribute__((vector_size(32)));
#define ld8 ALMA_LD8
#define st8 ALMA_ST8

static int is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

static int f_or_h(alma_dtype t) { return t == ALMA_DTYPE_FLOAT32 || t == ALMA_DTYPE_FLOAT16; }

/* Whether t has exactly one of two shapes: [d0, d1] or the flattened [d0 * d1]. */
static int shape_2d_or_flat(const alma_tensor *t, int64_t d0, int64_t d1) {
  if (t->rank == 2) return t->dims[0] == d0 && t->dims[1] == d1;
  return t->rank == 1 && t->dims[0] == d0 * d1;
}

/* ==== MatMulNBits ============================================================================== */

typedef struct {
  int64_t K, N, bits, bs, kb, blob, zpb; /* zpb: bytes per column of packed zero points */
} mnb_attrs;

static alma_status mnb_attrs_read(const alma_node *n, mnb_attrs *a) {
  static const char *const req[] = {"K", "N", "block_size"};
  for (int i = 0; i < 3; i++)
    if (!alma__node_attr(n, req[i])) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute %s is required", req[i]);
  a->K = alma__attr_i(n, "K", 0);
  a->N = alma__attr_i(n, "N", 0);
  a->bs = alma__attr_i(n, "block_size", 0);
  a->bits = alma__attr_i(n, "bits", 4);
  int64_t acc = alma__attr_i(n, "accuracy_level", 0), pre = alma__attr_i(n, "weight_prepacked", 0);
  /* bounds keep every product below (N * k_blocks * blob, K * N) far from overflowing */
  if (a->K < 1 || a->N < 1 || a->K > INT32_MAX || a->N > INT32_MAX)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "K=%lld, N=%lld (1 to 2^31-1 expected)", (long long)a->K,
                          (long long)a->N);
  if (a->bits != 2 && a->bits != 4 && a->bits != 8)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "bits=%lld (ONNX Runtime's CPU kernel runs 2, 4 and 8)",
                          (long long)a->bits);
  if (!is_pow2(a->bs) || a->bs < 16 || a->bs > (1 << 24))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "block_size=%lld (a power of 2, at least 16)", (long long)a->bs);
  if (acc < 0 || acc > 4)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "accuracy_level=%lld (0 to 4)", (long long)acc);
  if (pre != 0)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "weight_prepacked=%lld: B in a CUDA kernel's own layout", (long long)pre);
  a->kb = (a->K + a->bs - 1) / a->bs;
  a->blob = a->bs * a->bits / 8;
  a->zpb = (a->kb * a->bits + 7) / 8;
  return ALMA_OK;
}

/* B of shape [N, k_blocks, blob], or that shape with one or more dims 0 (an omitted projection). */
static int b_is_empty(const alma_tensor *b) { return alma_tensor_numel(b) == 0; }

static alma_status mnb_check(const alma_node *n, const alma_tensor *const *in, int nin, const mnb_attrs *a) {
  char s1[128];
  const alma_tensor *A = in[0], *B = in[1], *S = in[2], *Z = alma__nn_in(in, nin, 3), *G = alma__nn_in(in, nin, 4),
                    *bias = alma__nn_in(in, nin, 5);
  if (!f_or_h(A->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "A of dtype %s (ONNX Runtime's CPU kernel takes float32 or float16)",
                          alma_dtype_name(A->dtype));
  if (A->rank < 1 || A->dims[A->rank - 1] != a->K)
    return alma__op_error(n, ALMA_ERR_SHAPE, "A of shape %s: its last dimension must be K=%lld",
                          alma__shape_str(A->rank, A->dims, s1, sizeof s1), (long long)a->K);
  if (B->dtype != ALMA_DTYPE_UINT8)
    return alma__op_error(n, ALMA_ERR_TYPE, "B of dtype %s (packed uint8 expected)", alma_dtype_name(B->dtype));
  int64_t want[3] = {a->N, a->kb, a->blob};
  int ok = B->rank == 3, empty = b_is_empty(B);
  for (int i = 0; ok && i < 3; i++) ok = B->dims[i] == want[i] || (empty && B->dims[i] == 0);
  if (!ok)
    return alma__op_error(n, ALMA_ERR_SHAPE,
                          "B of shape %s, expected [N, k_blocks, blob] = [%lld, %lld, %lld] for K=%lld, N=%lld, "
                          "block_size=%lld, bits=%lld",
                          alma__shape_str(B->rank, B->dims, s1, sizeof s1), (long long)a->N, (long long)a->kb,
                          (long long)a->blob, (long long)a->K, (long long)a->N, (long long)a->bs, (long long)a->bits);
  if (S->dtype != A->dtype)
    return alma__op_error(n, ALMA_ERR_TYPE, "scales of dtype %s (A is %s)", alma_dtype_name(S->dtype),
                          alma_dtype_name(A->dtype));
  if (bias) {
    if (bias->dtype != A->dtype)
      return alma__op_error(n, ALMA_ERR_TYPE, "bias of dtype %s (A is %s)", alma_dtype_name(bias->dtype),
                            alma_dtype_name(A->dtype));
    if (bias->rank != 1 || bias->dims[0] != a->N)
      return alma__op_error(n, ALMA_ERR_SHAPE, "bias of shape %s (expected [%lld])",
                            alma__shape_str(bias->rank, bias->dims, s1, sizeof s1), (long long)a->N);
  }
  if (Z && Z->dtype != ALMA_DTYPE_UINT8 && Z->dtype != A->dtype)
    return alma__op_error(n, ALMA_ERR_TYPE, "zero_points of dtype %s (packed uint8, or A's %s)",
                          alma_dtype_name(Z->dtype), alma_dtype_name(A->dtype));
  if (G && G->dtype != ALMA_DTYPE_INT32)
    return alma__op_error(n, ALMA_ERR_TYPE, "g_idx of dtype %s (int32 expected)", alma_dtype_name(G->dtype));
  /* An omitted projection uses none of its quantization parameters: they may be empty. */
  if (empty) return ALMA_OK;
  if (!shape_2d_or_flat(S, a->N, a->kb))
    return alma__op_error(n, ALMA_ERR_SHAPE, "scales of shape %s (expected [N, k_blocks] = [%lld, %lld] or [%lld])",
                          alma__shape_str(S->rank, S->dims, s1, sizeof s1), (long long)a->N, (long long)a->kb,
                          (long long)(a->N * a->kb));
  if (Z) {
    int packed = Z->dtype == ALMA_DTYPE_UINT8;
    int64_t zc = packed ? a->zpb : a->kb;
    if (!packed && a->bits == 8)
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED,
                            "8-bit weights with %s zero points (ONNX Runtime's CPU kernel takes uint8 ones)",
                            alma_dtype_name(Z->dtype));
    if (!shape_2d_or_flat(Z, a->N, zc))
      return alma__op_error(n, ALMA_ERR_SHAPE, "%s zero_points of shape %s (expected [%lld, %lld] or [%lld])",
                            packed ? "packed uint8" : alma_dtype_name(Z->dtype),
                            alma__shape_str(Z->rank, Z->dims, s1, sizeof s1), (long long)a->N, (long long)zc,
                            (long long)(a->N * zc));
  }
  if (G) {
    if (a->bits == 8)
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "g_idx with 8-bit weights (ONNX Runtime's CPU kernel refuses it)");
    if (G->rank != 1 || (G->dims[0] != a->K && G->dims[0] != a->kb * a->bs))
      return alma__op_error(n, ALMA_ERR_SHAPE, "g_idx of shape %s (expected [K] = [%lld] or [%lld])",
                            alma__shape_str(G->rank, G->dims, s1, sizeof s1), (long long)a->K,
                            (long long)(a->kb * a->bs));
    if (G->data) {
      const int32_t *g = G->data;
      for (int64_t k = 0; k < G->dims[0]; k++)
        if (g[k] < 0 || g[k] >= a->kb)
          return alma__op_error(n, ALMA_ERR_INVALID_ARG, "g_idx[%lld] = %d is outside [0, %lld)", (long long)k, g[k],
                                (long long)a->kb);
    }
  }
  return ALMA_OK;
}

static alma_status mnb_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  mnb_attrs a;
  ALMA_TRY(mnb_attrs_read(n, &a));
  ALMA_TRY(mnb_check(n, in, nin, &a));
  const alma_tensor *A = in[0];
  int64_t d[ALMA_MAX_RANK];
  memcpy(d, A->dims, (size_t)A->rank * sizeof *d);
  d[A->rank - 1] = a.N;
  alma__set_shape(&out[0], A->dtype, A->rank, d);
  return ALMA_OK;
}

/* What the kernels share for one call. */
typedef struct {
  const mnb_attrs *a;
  const uint8_t *b;      /* [N, kb, blob] */
  const float *s;        /* [N, kb] */
  const alma_tensor *z;  /* zero points or NULL */
  const float *zf;       /* float view of float zero points, or NULL */
  const int32_t *g;      /* g_idx or NULL */
  const float *bias;     /* [N] or NULL */
  int64_t rows;          /* rows of A, batch dims included */
} mnb_job;

/* Zero points of output column n, one per block, as floats (bits a constant where inlined). */
static inline __attribute__((always_inline)) void zp_row_bits(const mnb_job *j, const int bits, int64_t n, float *z) {
  const mnb_attrs *a = j->a;
  const int per = 8 / bits, mask = (1 << bits) - 1;
  const int64_t kb = a->kb;
  if (!j->z) {
    for (int64_t b = 0; b < kb; b++) z[b] = (float)(1 << (bits - 1));
  } else if (j->zf) {
    memcpy(z, j->zf + n * kb, (size_t)kb * sizeof *z);
  } else {
    const uint8_t *p = (const uint8_t *)j->z->data + n * a->zpb;
    for (int64_t b = 0; b < kb; b++) z[b] = (float)((p[b / per] >> (bits * (b % per))) & mask);
  }
}

static void zp_row(const mnb_job *j, int64_t n, float *z) {
  switch (j->a->bits) {
    case 2: zp_row_bits(j, 2, n, z); break;
    case 4: zp_row_bits(j, 4, n, z); break;
    default: zp_row_bits(j, 8, n, z); break;
  }
}

/* The zero point of block b of column n (zrow: column n's packed uint8 zero points, or NULL). */
static inline __attribute__((always_inline)) float zp_one(const mnb_job *j, const int bits, const uint8_t *zrow,
                                                          int64_t n, int64_t b) {
  const int per = 8 / bits;
  if (zrow) return (float)((zrow[b / per] >> (bits * (b % per))) & ((1 << bits) - 1));
  if (j->zf) return j->zf[n * j->a->kb + b];
  return (float)(1 << (bits - 1));
}

/* The fast kernels read B 16 bytes at a time as eight 16-bit lanes (GCC and Clang widen those with
 * vpmovzxwd; eight single bytes they widen one by one), each lane holding 2 * per codes (per = 8 /
 * bits). Shift u of the lanes gives 8 codes: lane L is the code u % per of byte 2L + u / per of the
 * chunk, element 2 * per * L + u from the chunk's first. A's rows are reordered to match: in the
 * chunk's 16 * per elements, position 8u + L holds element 2 * per * L + u, zero past K. The sum of
 * each block of A (asum, [rows, kb]) goes with the zero points. Needs blob % 16 == 0. */
static void a_reorder(const mnb_attrs *a, const float *A, int64_t rows, float *ar, float *asum) {
  int64_t kpad = a->kb * a->bs, per = 8 / a->bits, span = 16 * per;
  for (int64_t m = 0; m < rows; m++) {
    const float *x = A + m * a->K;
    float *r = ar + m * kpad;
    for (int64_t b = 0; b < a->kb; b++) {
      float sum = 0.0f;
      for (int64_t c0 = b * a->bs; c0 < (b + 1) * a->bs; c0 += span)
        for (int64_t u = 0; u < 2 * per; u++)
          for (int64_t L = 0; L < 8; L++) {
            int64_t k = c0 + 2 * per * L + u;
            float v = k < a->K ? x[k] : 0.0f;
            r[c0 + 8 * u + L] = v;
            sum += v;
          }
      asum[m * a->kb + b] = sum;
    }
  }
}

typedef uint16_t v8h __attribute__((vector_size(16)));

/* The 16 bytes at p as eight 16-bit lanes in 32-bit ones (a macro: a 32-byte vector passed or
 * returned by a function would change the baseline ABI). */
#define LOAD_LANES(dst, p)                      \
  do {                                          \
    v8h raw_;                                   \
    memcpy(&raw_, (p), sizeof raw_);            \
    (dst) = __builtin_convertvector(raw_, v8i); \
  } while (0)

/* The 8 codes of shift u as floats (the top shift of a 16-bit lane needs no mask). */
#define CODES(v, u, bits) \
  __builtin_convertvector((u) == 16 / (bits) - 1 ? (v) >> ((bits) * (u)) : ((v) >> ((bits) * (u))) & ((1 << (bits)) - 1), v8f)

static inline __attribute__((always_inline)) float hsum(const v8f *v) {
  float s = 0.0f;
  for (int i = 0; i < 8; i++) s += (*v)[i];
  return s;
}

/* Rows m0 .. m0+mr-1 (mr <= 4) of Y [rows, N], columns n0 .. n1-1: per column, each block's codes dot
 * the reordered A in eight lanes per row, scaled by the block's scale once; zero points subtract
 * zp * scale * sum(A's block). bits and mr are constants where inlined. */
static inline __attribute__((always_inline)) void gemv_tile(const mnb_job *j, const int bits, const int mr,
                                                            const float *ar, const float *asum, int64_t m0,
                                                            int64_t n0, int64_t n1, float *y) {
  const mnb_attrs *a = j->a;
  const int lanes = 16 / bits; /* codes per 16-bit lane */
  const int64_t kb = a->kb, blob = a->blob, bs = a->bs, kpad = kb * bs, N = a->N;
  const float *arm[4], *asm_[4];
  for (int m = 0; m < mr; m++) arm[m] = ar + (m0 + m) * kpad, asm_[m] = asum + (m0 + m) * kb;
  for (int64_t n = n0; n < n1; n++) {
    const uint8_t *bp = j->b + n * kb * blob;
    const float *s = j->s + n * kb;
    const uint8_t *zrow = j->z && !j->zf ? (const uint8_t *)j->z->data + n * a->zpb : NULL;
    v8f tot[4];
    float corr[4];
#pragma GCC unroll 4
    for (int m = 0; m < mr; m++) tot[m] = (v8f){0}, corr[m] = 0.0f;
    for (int64_t b = 0; b < kb; b++) {
      /* two partial sums per row (even and odd shifts) when few rows: independent FMA chains */
      v8f acc[4][2];
#pragma GCC unroll 4
      for (int m = 0; m < mr; m++) acc[m][0] = acc[m][mr <= 2] = (v8f){0}; /* not = {0}: a memset of all 4 */
      for (int64_t c = 0; c < blob; c += 16, bp += 16) {
        v8i v;
        LOAD_LANES(v, bp);
        const int64_t ko = b * bs + c * (8 / bits);
        /* unrolled: constant shifts, no loop overhead per 8 codes (-O2 would not) */
#pragma GCC unroll 8
        for (int u = 0; u < lanes; u++) {
          v8f w = CODES(v, u, bits);
#pragma GCC unroll 4
          for (int m = 0; m < mr; m++) acc[m][mr <= 2 ? u & 1 : 0] += w * ld8(arm[m] + ko + 8 * u);
        }
      }
      float sz = s[b] * zp_one(j, bits, zrow, n, b);
#pragma GCC unroll 4
      for (int m = 0; m < mr; m++) {
        tot[m] += (mr <= 2 ? acc[m][0] + acc[m][1] : acc[m][0]) * s[b];
        corr[m] += sz * asm_[m][b];
      }
    }
    float bv = j->bias ? j->bias[n] : 0.0f;
    for (int m = 0; m < mr; m++) y[(m0 + m) * N + n] = hsum(&tot[m]) - corr[m] + bv;
  }
}

ALMA_MULTIVERSION
static void gemv_rows(const mnb_job *j, const float *ar, const float *asum, int64_t m0, int mr, int64_t n0, int64_t n1,
                      float *y) {
  switch (j->a->bits * 8 + mr) {
#define GEMV_CASE(bits, mr) \
  case (bits) * 8 + (mr): gemv_tile(j, bits, mr, ar, asum, m0, n0, n1, y); break;
    GEMV_CASE(2, 1) GEMV_CASE(2, 2) GEMV_CASE(2, 3) GEMV_CASE(2, 4)
    GEMV_CASE(4, 1) GEMV_CASE(4, 2) GEMV_CASE(4, 3) GEMV_CASE(4, 4)
    GEMV_CASE(8, 1) GEMV_CASE(8, 2) GEMV_CASE(8, 3) GEMV_CASE(8, 4)
#undef GEMV_CASE
    default: break;
  }
}

/* Columns n0 .. n0+nb-1 of dequant(B) as float rows of kpad in the reordered layout, for a product
 * with the reordered A. */
static inline __attribute__((always_inline)) void dequant_panel_bits(const mnb_job *j, const int bits, int64_t n0,
                                                                     int64_t nb, float *zs, float *w) {
  const mnb_attrs *a = j->a;
  const int lanes = 16 / bits;
  const int64_t kb = a->kb, blob = a->blob, bs = a->bs, kpad = kb * bs;
  for (int64_t i = 0; i < nb; i++) {
    int64_t n = n0 + i;
    const uint8_t *bp = j->b + n * kb * blob;
    const float *s = j->s + n * kb;
    zp_row_bits(j, bits, n, zs);
    float *wr = w + i * kpad;
    for (int64_t b = 0; b < kb; b++) {
      float sb = s[b], zb = zs[b];
      for (int64_t c = 0; c < blob; c += 16, bp += 16) {
        v8i v;
        LOAD_LANES(v, bp);
        float *wo = wr + b * bs + c * (8 / bits);
#pragma GCC unroll 8
        for (int u = 0; u < lanes; u++) st8(wo + 8 * u, (CODES(v, u, bits) - zb) * sb);
      }
    }
  }
}

ALMA_MULTIVERSION
static void dequant_panel(const mnb_job *j, int64_t n0, int64_t nb, float *zs, float *w) {
  switch (j->a->bits) {
    case 2: dequant_panel_bits(j, 2, n0, nb, zs, w); break;
    case 4: dequant_panel_bits(j, 4, n0, nb, zs, w); break;
    default: dequant_panel_bits(j, 8, n0, nb, zs, w); break;
  }
}

/* Any layout (g_idx, or blocks of fewer than 16 bytes): columns n0 .. n0+nb-1 of dequant(B) in K
 * order, block by block. */
static void dequant_panel_generic(const mnb_job *j, int64_t n0, int64_t nb, float *zs, float *w) {
  const mnb_attrs *a = j->a;
  const int per = 8 / (int)a->bits, bits = (int)a->bits, mask = (1 << bits) - 1;
  for (int64_t i = 0; i < nb; i++) {
    int64_t n = n0 + i;
    const uint8_t *bp = j->b + n * a->kb * a->blob;
    const float *s = j->s + n * a->kb;
    float *wr = w + i * a->K;
    zp_row(j, n, zs);
    for (int64_t b = 0; b < a->kb; b++, bp += a->blob)
      for (int64_t c = 0; c < a->blob; c++)
        for (int t = 0; t < per; t++) {
          int64_t k = b * a->bs + c * per + t;
          if (k >= a->K) break;
          int64_t g = j->g ? j->g[k] : b;
          wr[k] = ((float)((bp[c] >> (bits * t)) & mask) - zs[g]) * s[g];
        }
  }
}

/* ---- accuracy_level 4: int8 activations ------------------------------------------------------- */
/* What ONNX Runtime computes at accuracy_level 4 (MLAS's CompInt8 kernels), for 4-bit B in blocks of
 * 32 codes or more with packed or default zero points: each block of a row of A is rounded to int8
 * with its own scale max|a| / 127 (qa = round-half-even(a / scale), NaN as 0), each block's dot
 * product sum qa * (q - zp) is exact in int32, and the blocks add up in float as
 * dot * scale_a * scale_b. Only the float additions' order differs from ONNX Runtime's (and the zero
 * points' term, which the vector tiles add in float: see i8_tile). B's codes stay unsigned (0..15) in
 * the products, so u8 x s8 vpmaddubsw takes them as they are (ONNX Runtime subtracts the zero point
 * per byte and needs two vpsignb per product instead); the zero points enter once per block and row
 * as a float term. 32 bytes of B (64 codes: two blocks of 32, or part of a longer block) cost one
 * load, two ANDs and a shift, then per row two vpmaddubsw, an add, a vpmaddwd, a conversion and a
 * multiply-add (VNNI: two vpdpbusd, a conversion and a multiply-add). */
typedef struct {
  int8_t *qa;  /* [rows, kpad] in spans (span_pos) */
  float *sa;   /* [rows, kb] */
  int32_t *qs; /* [rows, kb]: sum of the block's qa, for the zero point's term */
  float *qsa;  /* [rows, kb]: qs * sa, the zero point's term in float (the AVX2 and VNNI tiles) */
} mnb_i8;

static int i8_usable(const mnb_job *j) {
  return j->a->bits == 4 && j->a->blob % 16 == 0 && !j->g && !j->zf;
}

/* Where element k of a row of A goes in its int8 copy: K is cut in spans of 64 elements (the codes in
 * 32 bytes of B; 32 for a last span ending at kpad, a lone block of 32), each the span's even elements
 * then its odd ones (position i < L/2 holds element 2i, L/2 + i element 2i + 1). B's low nibbles then
 * meet the span's first half and its high nibbles the second, unshuffled; with blocks of 32 the lower
 * 128-bit lane holds block b and the upper one block b + 1. */
static inline int64_t span_pos(int64_t k, int64_t kpad) {
  int64_t k0 = k & ~(int64_t)63, L = k0 + 64 <= kpad ? 64 : 32, i = k - k0;
  return k0 + (i & 1 ? L / 2 : 0) + i / 2;
}

static inline int zp_int(const uint8_t *zrow, int64_t b) {
  return zrow ? (zrow[b / 2] >> (4 * (b % 2))) & 15 : 8;
}

/* Portable: rows m0 .. m0+mr-1, columns n0 .. n1-1 (byte k / 2 of a column holds elements k, k + 1). */
static void i8_rows_c(const mnb_job *j, const mnb_i8 *q, int64_t m0, int mr, int64_t n0, int64_t n1, float *y) {
  const mnb_attrs *a = j->a;
  const int64_t kb = a->kb, blob = a->blob, bs = a->bs, kpad = kb * bs;
  for (int64_t n = n0; n < n1; n++) {
    const uint8_t *zrow = j->z ? (const uint8_t *)j->z->data + n * a->zpb : NULL;
    const uint8_t *bp = j->b + n * kb * blob;
    for (int m = 0; m < mr; m++) {
      const int8_t *qa = q->qa + (m0 + m) * kpad;
      float acc = 0.0f;
      for (int64_t b = 0; b < kb; b++) {
        int32_t d = 0;
        for (int64_t k = b * bs; k < (b + 1) * bs; k += 2)
          d += (bp[k / 2] & 15) * qa[span_pos(k, kpad)] + (bp[k / 2] >> 4) * qa[span_pos(k + 1, kpad)];
        d -= zp_int(zrow, b) * q->qs[(m0 + m) * kb + b];
        acc += (float)d * (j->s[n * kb + b] * q->sa[(m0 + m) * kb + b]);
      }
      y[(m0 + m) * a->N + n] = acc + (j->bias ? j->bias[n] : 0.0f);
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define I8_X86 1
#define I8_TARGET __attribute__((target("avx2,fma")))
enum { I8_MADDUBS, I8_VNNI_EVEX, I8_VNNI_VEX };

/* dot: I8_MADDUBS (AVX2: u8 x s8 pairs to int16, no saturation with codes <= 15 and |qa| <= 127,
 * then pairs to int32), or vpdpbusd, the same sums in one instruction: EVEX-encoded (AVX512-VNNI
 * with VL) or VEX-encoded (AVX-VNNI). The VNNI forms are written as assembly so the function needs
 * no AVX-512 target, and compilers without AVX-VNNI support still build it. */
#define I8_DPBUSD(dot, acc, u, s)                                                  \
  do {                                                                             \
    if ((dot) == I8_VNNI_EVEX) __asm__("vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s)); \
    else __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));       \
  } while (0)

/* One block of a row of A lying wholly inside K (bs a multiple of 32) to int8 in chunk order (each 32
 * elements as [16 even | 16 odd]; a_quant_i8 then puts them in span order), its scale and the sum of
 * its codes: the scalar loop's values (vcvtps2dq rounds half to even under the default rounding mode,
 * as nearbyintf; NaN masked to 0 before the clamp; a NaN |a| never wins the max, as with fmaxf), about
 * 45 instructions per 32 elements against 15 an element. */
I8_TARGET static void a_quant_block_avx2(const float *x, int64_t bs, int8_t *r, float *sc_out, int32_t *sum_out) {
  __m256 mx = _mm256_setzero_ps();
  for (int64_t k = 0; k < bs; k += 8) mx = _mm256_max_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(x + k)), mx);
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  const float sc = _mm_cvtss_f32(h) / 127.0f, inv = sc != 0.0f ? 1.0f / sc : 0.0f;
  const __m256 vinv = _mm256_set1_ps(inv), lim = _mm256_set1_ps(127.0f), nlim = _mm256_set1_ps(-127.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7); /* packs' lane interleave undone */
  const __m256i deint = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12,
                                         14, 1, 3, 5, 7, 9, 11, 13, 15);
  __m256i sum = _mm256_setzero_si256();
  for (int64_t k = 0; k < bs; k += 32) {
    __m256i v[4];
    for (int i = 0; i < 4; i++) {
      __m256 f = _mm256_mul_ps(_mm256_loadu_ps(x + k + 8 * i), vinv);
      f = _mm256_and_ps(f, _mm256_cmp_ps(f, f, _CMP_ORD_Q));
      v[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(f, nlim), lim));
      sum = _mm256_add_epi32(sum, v[i]);
    }
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
    p = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(p, order), deint); /* per 16: evens, odds */
    _mm256_storeu_si256((__m256i *)(r + k), _mm256_permute4x64_epi64(p, 0xD8));
  }
  __m128i t = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
  *sc_out = sc;
  *sum_out = _mm_cvtsi128_si32(t);
}

/* [p0 x4, p1 x4] from two consecutive floats at any alignment (a scale row's pair starts at an odd
 * index when the block count is odd): the scales of a pair of blocks of 32, matching the int32 lanes
 * of their dot products. memcpy keeps it one vbroadcastsd. */
static inline __attribute__((always_inline)) I8_TARGET __m256 pair_scales(const float *p, __m256i idx) {
  double d;
  memcpy(&d, p, sizeof d);
  return _mm256_permutevar8x32_ps(_mm256_castpd_ps(_mm256_set1_pd(d)), idx);
}

/* 16 zero points (blocks b .. b+15 of a column, b even: the 8 bytes at p) times their scales. */
static inline __attribute__((always_inline)) I8_TARGET void zp16_scaled(const uint8_t *p, const float *s, __m256 *z0,
                                                                        __m256 *z1) {
  uint64_t u;
  memcpy(&u, p, sizeof u);
  __m128i w = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)u)); /* a byte a word: [lo hi] nibbles */
  __m128i nb = _mm_or_si128(_mm_and_si128(w, _mm_set1_epi16(15)), _mm_slli_epi16(_mm_srli_epi16(w, 4), 8));
  *z0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(nb)), _mm256_loadu_ps(s));
  *z1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(nb, nb))), _mm256_loadu_ps(s + 8));
}

/* A register tile of R rows x C columns: each 32 bytes of B unpacked serve R rows and each 64 codes
 * of A C columns. The zero points stay out of the inner loop: sum qa * (q - zp) * sa * s is
 * sum qa * q * sa * s - sum (zp * s) * (sum(qa) * sa), the second term a short float dot per row and
 * column over the blocks, 8 at a time. form I8_PAIRS (blocks of 32): two blocks per 32 bytes of B,
 * their int32 sums in the two 128-bit lanes, scaled by pair_scales; a lone last block takes 128-bit
 * vectors. I8_SHORT (64 to 256 codes) and I8_LONG: with AVX2 up to 4 chunks of 32 bytes add up in
 * int16 (4 * 2 * 2 * 127 * 15 < 2^15) before one vpmaddwd; the block's int32 sum (exact) is converted
 * and added in float times sa * s. Every output element is computed by the same operations whatever
 * R, C and the column split, so results do not depend on the tile or the thread count. */
enum { I8_SHORT, I8_PAIRS, I8_LONG };
static inline __attribute__((always_inline)) I8_TARGET void i8_tile(const mnb_job *j, const mnb_i8 *q, const int R,
                                                                    const int C, const int dot, const int form,
                                                                    int64_t m0, int64_t n, float *y) {
  const mnb_attrs *a = j->a;
  const int64_t kb = a->kb, blob = a->blob, bs = a->bs, kpad = kb * bs, N = a->N;
  const int64_t nch = blob / 32; /* chunks of 32 bytes a block (longer blocks) */
  const __m256i low = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  const __m256i pidx = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  const int8_t *qa[4];
  const float *sa[4];
  const uint8_t *bp[4];
  const float *s[4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) qa[r] = q->qa + (m0 + r) * kpad, sa[r] = q->sa + (m0 + r) * kb;
#pragma GCC unroll 4
  for (int c = 0; c < C; c++) bp[c] = j->b + (n + c) * kb * blob, s[c] = j->s + (n + c) * kb;
  __m256 accf[4][4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int c = 0; c < C; c++) accf[r][c] = _mm256_setzero_ps();
  if (form == I8_PAIRS) {
    int64_t b0 = 0;
    for (; b0 + 2 <= kb; b0 += 2) {
      __m256i lo[4], hi[4];
      __m256 sc[4];
#pragma GCC unroll 4
      for (int c = 0; c < C; c++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(bp[c] + b0 * 16));
        lo[c] = _mm256_and_si256(v, low);
        hi[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
        sc[c] = pair_scales(s[c] + b0, pidx);
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        const __m256i a0 = _mm256_loadu_si256((const __m256i *)(qa[r] + b0 * 32));
        const __m256i a1 = _mm256_loadu_si256((const __m256i *)(qa[r] + b0 * 32 + 32));
        const __m256 sar = pair_scales(sa[r] + b0, pidx);
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
          __m256i d;
          if (dot == I8_MADDUBS) {
            d = _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo[c], a0), _mm256_maddubs_epi16(hi[c], a1)),
                                  ones);
          } else {
            d = _mm256_setzero_si256();
            I8_DPBUSD(dot, d, lo[c], a0);
            I8_DPBUSD(dot, d, hi[c], a1);
          }
          accf[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_mul_ps(sar, sc[c]), accf[r][c]);
        }
      }
    }
    if (b0 < kb) { /* a lone last block: 16 bytes of B, A's span of 32 as [16 even | 16 odd] */
      const __m128i low4 = _mm_set1_epi8(0x0F);
      __m128i lo[4], hi[4];
#pragma GCC unroll 4
      for (int c = 0; c < C; c++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(bp[c] + b0 * 16));
        lo[c] = _mm_and_si128(v, low4);
        hi[c] = _mm_and_si128(_mm_srli_epi16(v, 4), low4);
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        const __m128i a0 = _mm_loadu_si128((const __m128i *)(qa[r] + b0 * 32));
        const __m128i a1 = _mm_loadu_si128((const __m128i *)(qa[r] + b0 * 32 + 16));
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
          __m128i d;
          if (dot == I8_MADDUBS) {
            d = _mm_madd_epi16(_mm_add_epi16(_mm_maddubs_epi16(lo[c], a0), _mm_maddubs_epi16(hi[c], a1)),
                               _mm_set1_epi16(1));
          } else {
            d = _mm_setzero_si128();
            I8_DPBUSD(dot, d, lo[c], a0);
            I8_DPBUSD(dot, d, hi[c], a1);
          }
          /* the upper lane's dot is 0: adding 0 * scale leaves those lanes as they were */
          __m256 sc = _mm256_set1_ps(sa[r][b0] * s[c][b0]);
          accf[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_inserti128_si256(_mm256_setzero_si256(), d, 0)), sc,
                                       accf[r][c]);
        }
      }
    }
  } else {
    for (int64_t b = 0; b < kb; b++) {
      __m256i isum[4][4];
#pragma GCC unroll 4
      for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) isum[r][c] = _mm256_setzero_si256();
      /* blocks of 64 to 256 codes: one group, so the int16 sums go to int32 once and no running int32
       * sums are kept (register pressure: 4 columns' of them spilled) */
      const int64_t groups = form == I8_SHORT ? 1 : (nch + 3) / 4;
      for (int64_t gi = 0; gi < groups; gi++) {
        const int64_t g0 = 4 * gi, g1 = form == I8_SHORT || g0 + 4 > nch ? nch : g0 + 4;
        __m256i i16[4][4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
          for (int c = 0; c < C; c++) i16[r][c] = _mm256_setzero_si256(); /* folded into the first add */
        for (int64_t ch = g0; ch < g1; ch++) {
          __m256i lo[4], hi[4];
#pragma GCC unroll 4
          for (int c = 0; c < C; c++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(bp[c] + b * blob + ch * 32));
            lo[c] = _mm256_and_si256(v, low);
            hi[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
          }
#pragma GCC unroll 4
          for (int r = 0; r < R; r++) {
            const __m256i a0 = _mm256_loadu_si256((const __m256i *)(qa[r] + b * bs + 64 * ch));
            const __m256i a1 = _mm256_loadu_si256((const __m256i *)(qa[r] + b * bs + 64 * ch + 32));
#pragma GCC unroll 4
            for (int c = 0; c < C; c++) {
              if (dot == I8_MADDUBS) {
                i16[r][c] = _mm256_add_epi16(
                    i16[r][c], _mm256_add_epi16(_mm256_maddubs_epi16(lo[c], a0), _mm256_maddubs_epi16(hi[c], a1)));
              } else {
                I8_DPBUSD(dot, isum[r][c], lo[c], a0);
                I8_DPBUSD(dot, isum[r][c], hi[c], a1);
              }
            }
          }
        }
        if (dot == I8_MADDUBS) {
#pragma GCC unroll 4
          for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int c = 0; c < C; c++)
              isum[r][c] = form == I8_SHORT ? _mm256_madd_epi16(i16[r][c], ones)
                                            : _mm256_add_epi32(isum[r][c], _mm256_madd_epi16(i16[r][c], ones));
        }
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        const __m256 sar = _mm256_broadcast_ss(sa[r] + b);
#pragma GCC unroll 4
        for (int c = 0; c < C; c++)
          accf[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][c]), _mm256_mul_ps(sar, _mm256_broadcast_ss(s[c] + b)),
                                       accf[r][c]);
      }
    }
  }
  /* the zero points' term, per column: (zp * s) of 16 (then 8) blocks at a time against each row's qs * sa */
#pragma GCC unroll 4
  for (int c = 0; c < C; c++) {
    const uint8_t *zrow = j->z ? (const uint8_t *)j->z->data + (n + c) * a->zpb : NULL;
    __m256 cz[4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) cz[r] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 16 <= kb; b += 16) { /* 16 blocks a step: their zero points' unpacking is one load */
      __m256 z0, z1;
      if (zrow) {
        zp16_scaled(zrow + b / 2, s[c] + b, &z0, &z1);
      } else {
        z0 = _mm256_mul_ps(_mm256_set1_ps(8.0f), _mm256_loadu_ps(s[c] + b));
        z1 = _mm256_mul_ps(_mm256_set1_ps(8.0f), _mm256_loadu_ps(s[c] + b + 8));
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        cz[r] = _mm256_fmadd_ps(z0, _mm256_loadu_ps(q->qsa + (m0 + r) * kb + b), cz[r]);
        cz[r] = _mm256_fmadd_ps(z1, _mm256_loadu_ps(q->qsa + (m0 + r) * kb + b + 8), cz[r]);
      }
    }
    if (b + 8 <= kb) { /* then 8 */
      __m256 z0 = _mm256_mul_ps(_mm256_set1_ps(8.0f), _mm256_loadu_ps(s[c] + b));
      if (zrow) {
        uint32_t u;
        memcpy(&u, zrow + b / 2, sizeof u);
        __m128i w = _mm_cvtepu8_epi16(_mm_cvtsi32_si128((int)u));
        __m128i nb = _mm_or_si128(_mm_and_si128(w, _mm_set1_epi16(15)), _mm_slli_epi16(_mm_srli_epi16(w, 4), 8));
        z0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(nb)), _mm256_loadu_ps(s[c] + b));
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) cz[r] = _mm256_fmadd_ps(z0, _mm256_loadu_ps(q->qsa + (m0 + r) * kb + b), cz[r]);
      b += 8;
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      __m128 h = _mm_add_ps(_mm256_castps256_ps128(accf[r][c]), _mm256_extractf128_ps(accf[r][c], 1));
      h = _mm_hadd_ps(h, h);
      h = _mm_hadd_ps(h, h);
      __m128 hz = _mm_add_ps(_mm256_castps256_ps128(cz[r]), _mm256_extractf128_ps(cz[r], 1));
      hz = _mm_hadd_ps(hz, hz);
      hz = _mm_hadd_ps(hz, hz);
      float corr = _mm_cvtss_f32(hz);
      for (int64_t t = b; t < kb; t++) corr = fmaf((float)zp_int(zrow, t) * s[c][t], q->qsa[(m0 + r) * kb + t], corr);
      y[(m0 + r) * N + n + c] = _mm_cvtss_f32(h) - corr + (j->bias ? j->bias[n + c] : 0.0f);
    }
  }
}

/* Each tile shape its own function: inlined all into one, the compiler's register allocation over
 * the whole switch spilled the accumulators of the hot loop (74 instructions a pair of blocks for
 * 4 columns instead of 57, counted with callgrind). */
typedef void (*i8_tile_fn)(const mnb_job *j, const mnb_i8 *q, int64_t m0, int64_t n, float *y);
#define I8_FN(d, f, r, c)                                                                                    \
  __attribute__((noinline)) I8_TARGET static void i8_tile_##d##f##r##c(const mnb_job *j, const mnb_i8 *q, \
                                                                      int64_t m0, int64_t n, float *y) {   \
    i8_tile(j, q, r, c, d, f, m0, n, y);                                                                   \
  }
#define I8_FNS(d, f) I8_FN(d, f, 1, 1) I8_FN(d, f, 1, 4) I8_FN(d, f, 2, 1) I8_FN(d, f, 2, 2) \
  I8_FN(d, f, 3, 1) I8_FN(d, f, 3, 2) I8_FN(d, f, 4, 1) I8_FN(d, f, 4, 2)
#define I8_FNS_LONG(d) I8_FN(d, 2, 1, 1) I8_FN(d, 2, 2, 1) I8_FN(d, 2, 3, 1) I8_FN(d, 2, 4, 1)
I8_FNS(0, 0) I8_FNS(0, 1) I8_FNS_LONG(0) I8_FNS(1, 0) I8_FNS(1, 1) I8_FNS_LONG(1) I8_FNS(2, 0) I8_FNS(2, 1)
I8_FNS_LONG(2)
#define I8_ROW(d, f) \
  {{i8_tile_##d##f##11, i8_tile_##d##f##14}, {i8_tile_##d##f##21, i8_tile_##d##f##22}, \
   {i8_tile_##d##f##31, i8_tile_##d##f##32}, {i8_tile_##d##f##41, i8_tile_##d##f##42}}
/* blocks of 512 codes or more (rare): one column at a time */
#define I8_ROW_LONG(d) \
  {{i8_tile_##d##211, i8_tile_##d##211}, {i8_tile_##d##221, i8_tile_##d##221}, \
   {i8_tile_##d##231, i8_tile_##d##231}, {i8_tile_##d##241, i8_tile_##d##241}}
/* [dot][form][rows - 1][one column, or the whole tile (4 columns for one row, 2 for more)] */
static const i8_tile_fn i8_tiles[3][3][4][2] = {{I8_ROW(0, 0), I8_ROW(0, 1), I8_ROW_LONG(0)},
                                                {I8_ROW(1, 0), I8_ROW(1, 1), I8_ROW_LONG(1)},
                                                {I8_ROW(2, 0), I8_ROW(2, 1), I8_ROW_LONG(2)}};
#undef I8_ROW_LONG
#undef I8_ROW
#undef I8_FNS_LONG
#undef I8_FNS
#undef I8_FN

/* Rows m0 .. m0+mr-1 (mr <= I8_ROWS), columns n0 .. n1-1: one row in tiles of 4 columns (A's codes
 * loaded once for 4), more in tiles of mr x 2; column tails one at a time. */
#define I8_ROWS 4
static void i8_rows_x86(const mnb_job *j, const mnb_i8 *q, int dot, int64_t m0, int mr, int64_t n0, int64_t n1,
                        float *y) {
  const int form = j->a->blob == 16 ? I8_PAIRS : j->a->blob <= 128 ? I8_SHORT : I8_LONG;
  const int64_t cw = form == I8_LONG ? 1 : mr == 1 ? 4 : 2;
  const i8_tile_fn whole = i8_tiles[dot][form][mr - 1][1], one = i8_tiles[dot][form][mr - 1][0];
  int64_t n = n0;
  for (; n + cw <= n1; n += cw) whole(j, q, m0, n, y);
  for (; n < n1; n++) one(j, q, m0, n, y);
}
#else
#define I8_X86 0
#endif

/* Each row of A to int8 per block (vec: the AVX2 quantizer for blocks wholly inside K), written in
 * chunk order (each 32 elements as [16 even | 16 odd]), then turned into span order (span_pos) by
 * swapping the middle 16-byte quarters of every 64-element span. */
static void a_quant_i8(const mnb_attrs *a, const float *A, int64_t rows, mnb_i8 *q, int vec) {
  const int64_t kpad = a->kb * a->bs;
  (void)vec;
  for (int64_t m = 0; m < rows; m++) {
    const float *x = A + m * a->K;
    int8_t *r = q->qa + m * kpad;
    for (int64_t b = 0; b < a->kb; b++) {
      const int64_t k0 = b * a->bs, k1 = k0 + a->bs < a->K ? k0 + a->bs : a->K;
      float sc = 0.0f;
      int32_t sum = 0;
#if I8_X86
      if (vec && k1 == k0 + a->bs) a_quant_block_avx2(x + k0, a->bs, r + k0, &sc, &sum);
      else
#endif
      {
        float mx = 0.0f;
        for (int64_t k = k0; k < k1; k++) mx = fmaxf(mx, fabsf(x[k]));
        sc = mx / 127.0f;
        const float inv = sc != 0.0f ? 1.0f / sc : 0.0f;
        for (int64_t k = k0; k < k0 + a->bs; k++) {
          float f = k < a->K ? x[k] * inv : 0.0f;
          f = f != f ? 0.0f : f > 127.0f ? 127.0f : f < -127.0f ? -127.0f : f; /* NaN, and Inf's 0 * Inf */
          int v = (int)nearbyintf(f), t = (int)(k & 31);
          r[(k & ~(int64_t)31) + (t & 1 ? 16 : 0) + t / 2] = (int8_t)v;
          sum += v;
        }
      }
      q->sa[m * a->kb + b] = sc;
      q->qs[m * a->kb + b] = sum;
      q->qsa[m * a->kb + b] = (float)sum * sc;
    }
    for (int64_t k0 = 0; k0 + 64 <= kpad; k0 += 64) {
      int8_t t[16];
      memcpy(t, r + k0 + 16, 16);
      memcpy(r + k0 + 16, r + k0 + 32, 16);
      memcpy(r + k0 + 32, t, 16);
    }
  }
}

/* The int8 kernel for this CPU: 0 portable, 1 AVX2, 2 AVX512-VNNI, 3 AVX-VNNI. ALMA_NBITS_ISA=c or
 * avx2 caps it (tests compare the forms). */
enum { I8_ISA_C, I8_ISA_AVX2, I8_ISA_VNNI512, I8_ISA_AVXVNNI };
static int i8_isa(void) {
  const char *cap = getenv("ALMA_NBITS_ISA");
  int max = cap && !strcmp(cap, "c") ? I8_ISA_C : cap && !strcmp(cap, "avx2") ? I8_ISA_AVX2 : I8_ISA_AVXVNNI;
#if I8_X86
  __builtin_cpu_init();
  if (max == I8_ISA_C || !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return I8_ISA_C;
  if (max == I8_ISA_AVX2) return I8_ISA_AVX2;
  if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl")) return I8_ISA_VNNI512;
  unsigned ea, eb, ec, ed;
  if (__get_cpuid_count(7, 1, &ea, &eb, &ec, &ed) && (ea >> 4 & 1)) return I8_ISA_AVXVNNI; /* CPUID.(7,1):EAX[4] */
  return I8_ISA_AVX2;
#else
  (void)max;
  return I8_ISA_C;
#endif
}

/* Columns n0 .. n1-1, all rows. The vector tiles take a panel of B's columns (about 64 KiB, kept in
 * L2) through every row tile (its rows of A in L1), so B is not streamed from memory once per tile
 * of rows. */
static int64_t i8_panel(const mnb_attrs *a) {
  int64_t cols = ((int64_t)1 << 16) / (a->kb * a->blob) / 4 * 4;
  return cols < 4 ? 4 : cols;
}

static void i8_cols(const mnb_job *j, const mnb_i8 *q, int isa, int64_t n0, int64_t n1, float *y) {
#if I8_X86
  if (isa != I8_ISA_C) {
    const int dot = isa == I8_ISA_AVX2 ? I8_MADDUBS : isa == I8_ISA_VNNI512 ? I8_VNNI_EVEX : I8_VNNI_VEX;
    const int64_t panel = i8_panel(j->a);
    for (int64_t p0 = n0; p0 < n1; p0 += panel) {
      int64_t p1 = p0 + panel < n1 ? p0 + panel : n1;
      for (int64_t m0 = 0; m0 < j->rows; m0 += I8_ROWS) {
        int mr = j->rows - m0 < I8_ROWS ? (int)(j->rows - m0) : I8_ROWS;
        i8_rows_x86(j, q, dot, m0, mr, p0, p1, y);
      }
    }
    return;
  }
#endif
  (void)isa;
  for (int64_t m0 = 0; m0 < j->rows; m0 += 4) i8_rows_c(j, q, m0, j->rows - m0 < 4 ? (int)(j->rows - m0) : 4, n0, n1, y);
}

/* ---- running it, on one thread or a runtime's ------------------------------------------------- */

/* Up to this many rows of A go through the GEMV (reading and unpacking B once per 4 rows); more
 * through panels, whose dequantization and sgemm packing cost as much as about 40 GEMV rows (measured
 * for K = N = 4096: the GEMV is ahead up to about 64 rows). The int8 tiles serve any number of rows
 * (its products are cheaper than a float GEMM's). */
#define MNB_GEMV_ROWS 48

enum { MODE_GEMV, MODE_I8, MODE_PANEL };

/* One call's work, split into items of `chunk` output columns. */
typedef struct {
  const mnb_job *j;
  int mode, isa;
  const float *A, *ar, *asum; /* MODE_PANEL with ar NULL: K-ordered (generic) panels of A itself */
  const mnb_i8 *q;
  float *y;
  int64_t chunk, kw;
  atomic_int failed;
} mnb_par;

static void mnb_item(void *arg, int64_t item) {
  mnb_par *p = arg;
  const mnb_job *j = p->j;
  const mnb_attrs *a = j->a;
  int64_t n0 = item * p->chunk, n1 = n0 + p->chunk < a->N ? n0 + p->chunk : a->N;
  if (p->mode == MODE_I8) {
    i8_cols(j, p->q, p->isa, n0, n1, p->y);
    return;
  }
  if (p->mode == MODE_GEMV) {
    for (int64_t m0 = 0; m0 < j->rows; m0 += 4) {
      int mr = j->rows - m0 < 4 ? (int)(j->rows - m0) : 4;
      gemv_rows(j, p->ar, p->asum, m0, mr, n0, n1, p->y);
    }
    return;
  }
  /* a panel of dequant(B), float32, into alma__sgemm (each thread its own) */
  int generic = p->ar == NULL;
  float *w = malloc((size_t)((n1 - n0) * p->kw) * sizeof *w), *zs = malloc((size_t)a->kb * sizeof *zs);
  if (w && zs) {
    if (generic) dequant_panel_generic(j, n0, n1 - n0, zs, w);
    else dequant_panel(j, n0, n1 - n0, zs, w);
    if (alma__sgemm_bias(0, 1, j->rows, n1 - n0, p->kw, 1.0f, generic ? p->A : p->ar, p->kw, w, p->kw, 0.0f,
                         p->y + n0, a->N, NULL, j->bias ? j->bias + n0 : NULL) != ALMA_OK)
      atomic_store(&p->failed, 1);
  } else {
    atomic_store(&p->failed, 1);
  }
  free(w);
  free(zs);
}

int alma__is_mnb(const alma_node *n) {
  return n->domain && !strcmp(n->domain, "com.microsoft") && !strcmp(n->op_type, "MatMulNBits");
}

alma_status alma__mnb_exec_par(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                               int threads, alma__nbits_parfor pf, void *pctx) {
  mnb_attrs a;
  ALMA_TRY(mnb_attrs_read(n, &a));
  ALMA_TRY(mnb_check(n, in, nin, &a)); /* g_idx's values, when they were not known at load */
  const alma_tensor *A = in[0], *B = in[1], *Z = alma__nn_in(in, nin, 3), *G = alma__nn_in(in, nin, 4),
                    *bias = alma__nn_in(in, nin, 5);
  int64_t rows = alma_tensor_numel(A) / a.K;
  if (rows == 0) return ALMA_OK;
  int own_a = 0, own_s = 0, own_z = 0, own_b = 0;
  const float *af = NULL, *sf = NULL, *zf = NULL, *bf = NULL;
  float *y = NULL, *ar = NULL, *asum = NULL;
  mnb_i8 q = {0};
  alma_status st = ALMA_ERR_NOMEM;
  y = out[0].dtype == ALMA_DTYPE_FLOAT32 ? out[0].data : alma__nn_alloc(n, (size_t)(rows * a.N), sizeof *y);
  if (!y) goto done;
  if (bias && !(bf = alma__nn_as_f32(bias, &own_b))) goto done;
  if (b_is_empty(B)) { /* an omitted projection: the bias alone */
    for (int64_t m = 0; m < rows; m++)
      for (int64_t c = 0; c < a.N; c++) y[m * a.N + c] = bf ? bf[c] : 0.0f;
    st = ALMA_OK;
    goto done;
  }
  if (!(af = alma__nn_as_f32(A, &own_a)) || !(sf = alma__nn_as_f32(in[2], &own_s))) goto done;
  if (Z && Z->dtype != ALMA_DTYPE_UINT8 && !(zf = alma__nn_as_f32(Z, &own_z))) goto done;
  mnb_job j = {.a = &a, .b = B->data, .s = sf, .z = Z, .zf = zf, .g = G ? G->data : NULL, .bias = bf, .rows = rows};
  /* a g_idx that maps every element to its own block changes nothing */
  if (j.g) {
    int64_t k = 0;
    while (k < a.K && j.g[k] == k / a.bs) k++;
    if (k == a.K) j.g = NULL;
  }
  mnb_par p = {.j = &j, .A = af, .y = y, .kw = a.K};
  int64_t kpad = a.kb * a.bs;
  if (alma__attr_i(n, "accuracy_level", 0) == 4 && i8_usable(&j)) {
    /* the model's author allows int8 arithmetic: ONNX Runtime's level 4 */
    p.mode = MODE_I8;
    p.isa = i8_isa();
    q.qa = alma__nn_alloc(n, (size_t)(rows * kpad), sizeof *q.qa);
    q.sa = alma__nn_alloc(n, (size_t)(rows * a.kb), sizeof *q.sa);
    q.qs = alma__nn_alloc(n, (size_t)(rows * a.kb), sizeof *q.qs);
    q.qsa = alma__nn_alloc(n, (size_t)(rows * a.kb), sizeof *q.qsa);
    if (!q.qa || !q.sa || !q.qs || !q.qsa) goto done;
    a_quant_i8(&a, af, rows, &q, p.isa != I8_ISA_C);
    p.q = &q;
  } else if (j.g || a.blob % 16) {
    p.mode = MODE_PANEL;
  } else {
    ar = alma__nn_alloc(n, (size_t)(rows * kpad), sizeof *ar);
    asum = alma__nn_alloc(n, (size_t)(rows * a.kb), sizeof *asum);
    if (!ar || !asum) goto done;
    a_reorder(&a, af, rows, ar, asum);
    p.mode = rows <= MNB_GEMV_ROWS ? MODE_GEMV : MODE_PANEL;
    p.ar = ar;
    p.asum = asum;
    p.kw = kpad;
  }
  if (p.mode == MODE_PANEL) {
    /* panels of about 1 MiB (at least 16 columns): the whole weight in float32 would be 8x the int4 */
    int64_t nbp = ((int64_t)1 << 18) / p.kw / 16 * 16;
    p.chunk = nbp < 16 ? 16 : nbp;
  } else {
    /* about 8 items a thread, so that a thread that is descheduled (a shared machine) leaves its
     * share to the others; 16-column multiples */
    p.chunk = threads > 1 ? (a.N / ((int64_t)threads * 8) + 15) / 16 * 16 : a.N;
    p.chunk = p.chunk < 16 ? 16 : p.chunk;
  }
  int64_t items = (a.N + p.chunk - 1) / p.chunk;
  if (pf && threads > 1 && items > 1) {
    pf(pctx, items, mnb_item, &p);
  } else {
    for (int64_t i = 0; i < items; i++) mnb_item(&p, i);
  }
  st = atomic_load(&p.failed) ? alma__op_error(n, ALMA_ERR_NOMEM, "out of memory for a dequantized panel of B") : ALMA_OK;
done:
  if (st == ALMA_OK && y != out[0].data) alma__nn_store_f32(&out[0], y);
  if (y != out[0].data) free(y);
  if (own_a) free((void *)af);
  if (own_s) free((void *)sf);
  if (own_z) free((void *)zf);
  if (own_b) free((void *)bf);
  free(ar);
  free(asum);
  free(q.qa);
  free(q.sa);
  free(q.qs);
  free(q.qsa);
  return st;
}

static alma_status mnb_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, int nout) {
  (void)ctx;
  (void)nout;
  return alma__mnb_exec_par(n, in, nin, out, 1, NULL, NULL);
}
static void mnb_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                     int64_t *macs, int64_t *flops) {
  (void)in, (void)nin, (void)nout;
  *macs = alma_tensor_numel(&out[0]) * alma__attr_i(n, "K", 0);
  *flops = 2 * *macs;
}

const alma_op_def alma__op_MsMatMulNBits = {.name = "MatMulNBits", .domain = "com.microsoft", .versions = {1},
  .min_inputs = 3, .max_inputs = 6, .min_outputs = 1, .max_outputs = 1,
  .infer = mnb_infer, .exec = mnb_exec, .cost = mnb_cost};

/* ==== GatherBlockQuantized ===================================================================== */
/* data [D0, ..., Dr-1] uint8 with 8 / bits codes a byte along the last axis (the quantized one,
 * blocks of block_size codes), gathered along axis 0; scales [D0, ..., ceil(Dr-1 * 8 / bits /
 * block_size)]; zero points uint8 packed like the codes along the last axis, default 2^(bits - 1).
 * output[..] = (q - zp) * scale in the scales' dtype; an index outside [-D0, D0) gives zeros (ONNX
 * Runtime's kernel). int4/uint4 data (what ONNX Runtime's quantizer writes for a Gather) holds one code
 * per element, any gather_axis and quantize_axis, zero points of the data's type (default 0): see
 * gbq4_*. float8/float4 data is not supported. */

typedef struct {
  int64_t bits, bs;
  int rank;
  int64_t lines;  /* quantized lines per gathered row */
  int64_t L;      /* codes per line (last dim * 8 / bits) */
  int64_t sl;     /* scales per line */
  int64_t zl;     /* zero point bytes per line */
} gbq_geom;

/* Checks both GatherBlockQuantized forms share: index type, output rank, scale type. */
static alma_status gbq_check_common(const alma_node *n, const alma_tensor *I, const alma_tensor *S, int r) {
  if (I->dtype != ALMA_DTYPE_INT32 && I->dtype != ALMA_DTYPE_INT64)
    return alma__op_error(n, ALMA_ERR_TYPE, "indices of dtype %s (int32 or int64 expected)", alma_dtype_name(I->dtype));
  if (I->rank + r - 1 > ALMA_MAX_RANK)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "output of rank %d (at most %d)", I->rank + r - 1, ALMA_MAX_RANK);
  if (!f_or_h(S->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "scales of dtype %s (float32 or float16; the output takes it)",
                          alma_dtype_name(S->dtype));
  return ALMA_OK;
}

static alma_status gbq_check(const alma_node *n, const alma_tensor *const *in, int nin, gbq_geom *g) {
  char s1[128], s2[128];
  const alma_tensor *D = in[0], *I = in[1], *S = in[2], *Z = alma__nn_in(in, nin, 3);
  g->bits = alma__attr_i(n, "bits", 4);
  g->bs = alma__attr_i(n, "block_size", 128);
  int64_t ga = alma__attr_i(n, "gather_axis", 0), qa = alma__attr_i(n, "quantize_axis", 1);
  if (g->bits != 2 && g->bits != 4 && g->bits != 8)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "bits=%lld (2, 4 or 8 for uint8 data)", (long long)g->bits);
  if (!is_pow2(g->bs) || g->bs < 16 || g->bs > (1 << 24))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "block_size=%lld (a power of 2, at least 16)", (long long)g->bs);
  if (D->dtype != ALMA_DTYPE_UINT8)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED,
                          "data of dtype %s: alma runs uint8-packed, int4 and uint4 data (float8/float4 data is not "
                          "supported)",
                          alma_dtype_name(D->dtype));
  int r = D->rank;
  if (ga < -r || ga >= r || qa < -r || qa >= r)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "gather_axis=%lld, quantize_axis=%lld out of range for rank %d",
                          (long long)ga, (long long)qa, r);
  ga = ga < 0 ? ga + r : ga;
  qa = qa < 0 ? qa + r : qa;
  if (ga != 0 || qa != r - 1 || r < 2)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED,
                          "gather_axis=%lld, quantize_axis=%lld on rank %d: uint8 data gathers along axis 0 and is "
                          "quantized along its last axis (ONNX Runtime's kernel)",
                          (long long)ga, (long long)qa, r);
  ALMA_TRY(gbq_check_common(n, I, S, r));
  int comp = 8 / (int)g->bits;
  g->rank = r;
  g->L = D->dims[r - 1] * comp;
  g->sl = (g->L + g->bs - 1) / g->bs;
  g->zl = (g->sl + comp - 1) / comp;
  g->lines = 1;
  for (int i = 1; i < r - 1; i++) g->lines *= D->dims[i];
  int ok = S->rank == r;
  for (int i = 0; ok && i < r; i++) ok = S->dims[i] == (i == r - 1 ? g->sl : D->dims[i]);
  if (!ok)
    return alma__op_error(n, ALMA_ERR_SHAPE, "scales of shape %s for data %s (bits=%lld, block_size=%lld)",
                          alma__shape_str(S->rank, S->dims, s1, sizeof s1), alma__shape_str(r, D->dims, s2, sizeof s2),
                          (long long)g->bits, (long long)g->bs);
  if (Z) {
    if (Z->dtype != D->dtype)
      return alma__op_error(n, ALMA_ERR_TYPE, "zero_points of dtype %s (data is %s)", alma_dtype_name(Z->dtype),
                            alma_dtype_name(D->dtype));
    ok = Z->rank == r;
    for (int i = 0; ok && i < r; i++) ok = Z->dims[i] == (i == r - 1 ? g->zl : S->dims[i]);
    if (!ok)
      return alma__op_error(n, ALMA_ERR_SHAPE, "zero_points of shape %s for scales %s (bits=%lld: %d per byte)",
                            alma__shape_str(Z->rank, Z->dims, s1, sizeof s1),
                            alma__shape_str(S->rank, S->dims, s2, sizeof s2), (long long)g->bits, comp);
  }
  return ALMA_OK;
}


/* int4/uint4 data [D0, ..., Dr-1], one code per element (alma keeps them a byte each), gathered along
 * gather_axis; scales have data's shape with quantize_axis's dim ceil(dim / block_size); zero points
 * (int4/uint4 like data) scales' shape, default 0. output = data's shape with the gather axis replaced
 * by indices' shape, (q - zp) * scale in the scales' dtype. */
typedef struct {
  int ga, qa;
  int64_t bs, outer, dga, inner;  /* dims before, at and after the gather axis */
  int64_t qstride, qdim, qsdim;   /* elements after the quantize axis; its dim in data and in scales */
} gbq4_geom;

static int is_4bit(alma_dtype t) { return t == ALMA_DTYPE_INT4 || t == ALMA_DTYPE_UINT4; }

static alma_status gbq4_check(const alma_node *n, const alma_tensor *const *in, int nin, gbq4_geom *g) {
  char s1[128], s2[128];
  const alma_tensor *D = in[0], *I = in[1], *S = in[2], *Z = alma__nn_in(in, nin, 3);
  int64_t bits = alma__attr_i(n, "bits", 4), ga = alma__attr_i(n, "gather_axis", 0), qa = alma__attr_i(n, "quantize_axis", 1);
  g->bs = alma__attr_i(n, "block_size", 128);
  int r = D->rank;
  if (bits != 4)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "bits=%lld with %s data (4 expected)", (long long)bits,
                          alma_dtype_name(D->dtype));
  if (!is_pow2(g->bs) || g->bs < 16 || g->bs > (1 << 24))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "block_size=%lld (a power of 2, at least 16)", (long long)g->bs);
  if (r < 1 || ga < -r || ga >= r || qa < -r || qa >= r)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "gather_axis=%lld, quantize_axis=%lld out of range for rank %d",
                          (long long)ga, (long long)qa, r);
  g->ga = (int)(ga < 0 ? ga + r : ga);
  g->qa = (int)(qa < 0 ? qa + r : qa);
  ALMA_TRY(gbq_check_common(n, I, S, r));
  g->qdim = D->dims[g->qa];
  g->qsdim = (g->qdim + g->bs - 1) / g->bs;
  int ok = S->rank == r;
  for (int i = 0; ok && i < r; i++) ok = S->dims[i] == (i == g->qa ? g->qsdim : D->dims[i]);
  if (!ok)
    return alma__op_error(n, ALMA_ERR_SHAPE, "scales of shape %s for data %s (quantize_axis=%d, block_size=%lld)",
                          alma__shape_str(S->rank, S->dims, s1, sizeof s1), alma__shape_str(r, D->dims, s2, sizeof s2),
                          g->qa, (long long)g->bs);
  if (Z) {
    if (Z->dtype != D->dtype)
      return alma__op_error(n, ALMA_ERR_TYPE, "zero_points of dtype %s (data is %s)", alma_dtype_name(Z->dtype),
                            alma_dtype_name(D->dtype));
    if (!alma__same_shape(Z, S))
      return alma__op_error(n, ALMA_ERR_SHAPE, "zero_points of shape %s (scales are %s)",
                            alma__shape_str(Z->rank, Z->dims, s1, sizeof s1),
                            alma__shape_str(S->rank, S->dims, s2, sizeof s2));
  }
  g->outer = g->inner = g->qstride = 1;
  for (int i = 0; i < g->ga; i++) g->outer *= D->dims[i];
  for (int i = g->ga + 1; i < r; i++) g->inner *= D->dims[i];
  for (int i = g->qa + 1; i < r; i++) g->qstride *= D->dims[i];
  g->dga = D->dims[g->ga];
  return ALMA_OK;
}

static alma_status gbq4_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out) {
  gbq4_geom g;
  ALMA_TRY(gbq4_check(n, in, nin, &g));
  const alma_tensor *D = in[0], *I = in[1];
  int64_t d[ALMA_MAX_RANK];
  int r = 0;
  for (int i = 0; i < g.ga; i++) d[r++] = D->dims[i];
  for (int i = 0; i < I->rank; i++) d[r++] = I->dims[i];
  for (int i = g.ga + 1; i < D->rank; i++) d[r++] = D->dims[i];
  alma__set_shape(&out[0], in[2]->dtype, r, d);
  return ALMA_OK;
}

/* The code at element p of a 4-bit tensor (a byte each: int4 sign-extended, uint4 0..15). */
static inline int code4(const alma_tensor *t, int64_t p) {
  return t->dtype == ALMA_DTYPE_INT4 ? ((const int8_t *)t->data)[p] : ((const uint8_t *)t->data)[p];
}

static alma_status gbq4_exec(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out) {
  gbq4_geom g;
  ALMA_TRY(gbq4_check(n, in, nin, &g));
  const alma_tensor *D = in[0], *I = in[1], *S = in[2], *Z = alma__nn_in(in, nin, 3);
  int64_t cnt = alma_tensor_numel(I);
  int f16 = S->dtype == ALMA_DTYPE_FLOAT16;
  for (int64_t o = 0; o < g.outer; o++)
    for (int64_t i = 0; i < cnt; i++) {
      int64_t idx = alma__get_i64(I->data, I->dtype, i);
      int valid = idx >= -g.dga && idx < g.dga; /* outside: zeros, as the uint8 form */
      idx = idx < 0 ? idx + g.dga : idx;
      int64_t base = (o * g.dga + idx) * g.inner, ob = (o * cnt + i) * g.inner;
      for (int64_t e = 0; e < g.inner; e++) {
        float v = 0.0f;
        if (valid) {
          int64_t p = base + e, c = p / g.qstride % g.qdim;
          int64_t ps = (p / (g.qstride * g.qdim) * g.qsdim + c / g.bs) * g.qstride + p % g.qstride;
          float sc = f16 ? alma__f16_to_f32(((const uint16_t *)S->data)[ps]) : ((const float *)S->data)[ps];
          v = (float)(code4(D, p) - (Z ? code4(Z, ps) : 0)) * sc;
        }
        if (f16) ((uint16_t *)out[0].data)[ob + e] = alma__f32_to_f16(v);
        else ((float *)out[0].data)[ob + e] = v;
      }
    }
  return ALMA_OK;
}

static alma_status gbq_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  (void)nout;
  if (is_4bit(in[0]->dtype)) return gbq4_infer(n, in, nin, out);
  gbq_geom g;
  ALMA_TRY(gbq_check(n, in, nin, &g));
  const alma_tensor *D = in[0], *I = in[1];
  int64_t d[ALMA_MAX_RANK];
  int r = 0;
  for (int i = 0; i < I->rank; i++) d[r++] = I->dims[i];
  for (int i = 1; i < D->rank; i++) d[r++] = D->dims[i];
  d[r - 1] = g.L;
  alma__set_shape(&out[0], in[2]->dtype, r, d);
  return ALMA_OK;
}

static alma_status gbq_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, int nout) {
  (void)ctx;
  (void)nout;
  if (is_4bit(in[0]->dtype)) return gbq4_exec(n, in, nin, out);
  gbq_geom g;
  ALMA_TRY(gbq_check(n, in, nin, &g));
  const alma_tensor *D = in[0], *I = in[1], *S = in[2], *Z = alma__nn_in(in, nin, 3);
  int64_t cnt = alma_tensor_numel(I), row = g.lines * g.L, d0 = D->dims[0];
  int64_t per = 8 / g.bits, mask = (1 << g.bits) - 1, zdef = (int64_t)1 << (g.bits - 1);
  int64_t bpl = D->dims[g.rank - 1]; /* bytes per line */
  const uint8_t *data = D->data, *zp = Z ? Z->data : NULL;
  int f16 = S->dtype == ALMA_DTYPE_FLOAT16;
  const float *sf = f16 ? NULL : S->data;
  const uint16_t *sh = f16 ? S->data : NULL;
  for (int64_t i = 0; i < cnt; i++) {
    int64_t idx = alma__get_i64(I->data, I->dtype, i);
    int valid = idx >= -d0 && idx < d0;
    idx = idx < 0 ? idx + d0 : idx;
    for (int64_t l = 0; l < g.lines; l++) {
      int64_t line = idx * g.lines + l, o = i * row + l * g.L;
      for (int64_t e = 0; e < g.L; e++) {
        float v = 0.0f;
        if (valid) {
          int64_t q = (data[line * bpl + e / per] >> (g.bits * (e % per))) & mask, sb = e / g.bs;
          int64_t z = zp ? (zp[line * g.zl + sb / per] >> (g.bits * (sb % per))) & mask : zdef;
          float s = f16 ? alma__f16_to_f32(sh[line * g.sl + sb]) : sf[line * g.sl + sb];
          v = (float)(q - z) * s;
        }
        if (f16) ((uint16_t *)out[0].data)[o + e] = alma__f32_to_f16(v);
        else ((float *)out[0].data)[o + e] = v;
      }
    }
  }
  return ALMA_OK;
}

const alma_op_def alma__op_MsGatherBlockQuantized = {.name = "GatherBlockQuantized", .domain = "com.microsoft",
  .versions = {1}, .min_inputs = 3, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
  .infer = gbq_infer, .exec = gbq_exec};
