/* Quantized operators: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearConv,
 * QLinearMatMul, MatMulInteger, ConvInteger.
 *
 * Reference kernels: integer products accumulate in 32 bits with wrap-around (the spec allows
 * overflow only there), requantization multiplies the accumulator by the real multiplier
 * (computed in the scales' precision, as the ONNX reference does), rounds half to even and
 * saturates. QuantizeLinear from float32 to 8 bits and DequantizeLinear from 8-bit/int32 to
 * float32, per tensor or per axis, run vector kernels over rows of one scale (the same
 * arithmetic); the other forms (blocked, 16-bit, half types, int32 input, the low-precision types)
 * run element by element. int4/uint4/int2/uint2 (one value a byte in memory) quantize like the
 * 8-bit types with their own ranges; the float8 types and float4e2m1 round x / scale + zero point
 * to nearest even into the type (float8: saturating unless saturate=0), and dequantize by their
 * exact values. float8e8m0 scales (opset 24) are read by their value, 2^(b-127). */
#include <math.h>
#include <stdatomic.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ops/gemm_packed.h"
#include "ops/nn_util.h"
#include "ops/op.h"
#include "ops/qgemm.h"
#include "ops/quant_kernels.h"
#include "ops/sgemm.h"

/* ---- small helpers ------------------------------------------------------------------------- */

/* Saturation range of an integer quantized type; 0 if `t` is not one. */
static int q_range(alma_dtype t, int64_t *lo, int64_t *hi) {
  switch (t) {
    case ALMA_DTYPE_UINT8: *lo = 0; *hi = 255; return 1;
    case ALMA_DTYPE_INT8: *lo = -128; *hi = 127; return 1;
    case ALMA_DTYPE_UINT16: *lo = 0; *hi = 65535; return 1;
    case ALMA_DTYPE_INT16: *lo = -32768; *hi = 32767; return 1;
    case ALMA_DTYPE_INT32: *lo = INT32_MIN; *hi = INT32_MAX; return 1;
    case ALMA_DTYPE_INT4: case ALMA_DTYPE_UINT4: case ALMA_DTYPE_INT2: case ALMA_DTYPE_UINT2:
      alma__lowint_range(t, lo, hi);
      return 1;
    default: *lo = *hi = 0; return 0;
  }
}

static int is_8bit(alma_dtype t) { return t == ALMA_DTYPE_UINT8 || t == ALMA_DTYPE_INT8; }

static int32_t q_get(const void *d, alma_dtype t, int64_t i) {
  switch (t) {
    case ALMA_DTYPE_UINT8: return ((const uint8_t *)d)[i];
    case ALMA_DTYPE_INT8: return ((const int8_t *)d)[i];
    case ALMA_DTYPE_UINT16: return ((const uint16_t *)d)[i];
    case ALMA_DTYPE_INT16: return ((const int16_t *)d)[i];
    case ALMA_DTYPE_INT32: return ((const int32_t *)d)[i];
    case ALMA_DTYPE_INT4: case ALMA_DTYPE_INT2: return ((const int8_t *)d)[i]; /* sign-extended bytes */
    case ALMA_DTYPE_UINT4: case ALMA_DTYPE_UINT2: return ((const uint8_t *)d)[i];
    default: return 0;
  }
}

/* A quantized value as float: integers exactly, float8/float4 codes by their value. */
static float q_getf(const void *d, alma_dtype t, int64_t i) {
  return alma__dtype_is_lowfloat(t) ? (float)alma__lowfloat_decode(t, ((const uint8_t *)d)[i]) : (float)q_get(d, t, i);
}

static void q_set(void *d, alma_dtype t, int64_t i, int64_t v) {
  switch (t) {
    case ALMA_DTYPE_UINT8: ((uint8_t *)d)[i] = (uint8_t)v; break;
    case ALMA_DTYPE_INT8: ((int8_t *)d)[i] = (int8_t)v; break;
    case ALMA_DTYPE_UINT16: ((uint16_t *)d)[i] = (uint16_t)v; break;
    case ALMA_DTYPE_INT16: ((int16_t *)d)[i] = (int16_t)v; break;
    case ALMA_DTYPE_INT32: ((int32_t *)d)[i] = (int32_t)v; break;
    case ALMA_DTYPE_INT4: case ALMA_DTYPE_UINT4: case ALMA_DTYPE_INT2: case ALMA_DTYPE_UINT2:
      ((uint8_t *)d)[i] = alma__lowint_wrap(t, v); /* v is in range: the byte alma keeps */
      break;
    default: break;
  }
}

/* Round half to even. Adding and removing 1.5 * 2^52 rounds in the default to-nearest-even mode
 * (|v| < 2^51), inline, where nearbyint is a libm call on baseline x86-64. (IEEE arithmetic keeps
 * the round trip; alma is not built with -ffast-math, which would fold it away.) */
static inline double q_rne(double v) {
  if (!(fabs(v) < 0x1p51)) return v; /* already integral, inf or NaN */
  return (v + 0x1.8p52) - 0x1.8p52;
}

/* Round half to even then saturate. NaN maps to 0 (the spec leaves NaN undefined). */
static int64_t q_round_sat(double v, int64_t lo, int64_t hi) {
  if (v != v) return lo > 0 ? lo : (hi < 0 ? hi : 0);
  v = q_rne(v);
  if (v <= (double)lo) return lo;
  if (v >= (double)hi) return hi;
  return (int64_t)v;
}

/* A float rounded to the precision of a floating dtype (numpy computes float16 arithmetic in float
 * and rounds each result to half). */
static inline float round_to(alma_dtype t, float v) { return (float)alma__round_to(t, v); }

static int is_scale_dtype(alma_dtype t, int allow_half) {
  return t == ALMA_DTYPE_FLOAT32 || (allow_half && (t == ALMA_DTYPE_FLOAT16 || t == ALMA_DTYPE_BFLOAT16));
}

/* The first opset whose QuantizeLinear/DequantizeLinear has quantized type t; 0 if none does. */
static int q_type_since(alma_dtype t) {
  switch (t) {
    case ALMA_DTYPE_UINT8: case ALMA_DTYPE_INT8: return 10;
    case ALMA_DTYPE_FLOAT8E4M3FN: case ALMA_DTYPE_FLOAT8E4M3FNUZ: case ALMA_DTYPE_FLOAT8E5M2:
    case ALMA_DTYPE_FLOAT8E5M2FNUZ:
      return 19;
    case ALMA_DTYPE_INT16: case ALMA_DTYPE_UINT16: case ALMA_DTYPE_INT4: case ALMA_DTYPE_UINT4: return 21;
    case ALMA_DTYPE_FLOAT4E2M1: return 23;
    case ALMA_DTYPE_INT2: case ALMA_DTYPE_UINT2: return 25;
    default: return 0;
  }
}

/* Scale types: float32 (10+), float16/bfloat16 (19+), float8e8m0 (24+). */
static int q_scale_ok(const alma_node *n, alma_dtype t) {
  return is_scale_dtype(t, n->since_version >= 19) || (n->since_version >= 24 && t == ALMA_DTYPE_FLOAT8E8M0);
}


/* Integer tensor as float (exact: 8-bit and 16-bit values), for the integer kernels' GEMM. */
static float *q_to_f32(const alma_tensor *t) {
  int64_t n = alma_tensor_numel(t);
  float *r = alma__malloc((size_t)(n > 0 ? n : 1) * sizeof *r);
  if (!r) return NULL;
  if (t->dtype == ALMA_DTYPE_UINT8) /* the common cases as plain loops (vectorized), not a switch per element */
    for (int64_t i = 0; i < n; i++) r[i] = (float)((const uint8_t *)t->data)[i];
  else if (t->dtype == ALMA_DTYPE_INT8)
    for (int64_t i = 0; i < n; i++) r[i] = (float)((const int8_t *)t->data)[i];
  else
    for (int64_t i = 0; i < n; i++) r[i] = (float)q_get(t->data, t->dtype, i);
  return r;
}

/* Integer GEMM through the float one: acc[M x N] (int32, wrapping; ldacc) = A[M x K] * B[K x N]
 * for float operands holding integers of at most 255 in magnitude (8-bit values minus their zero
 * points). Their products stay below 2^16, so any float sum of QK_CHUNK of them is below 2^24
 * and exact whatever the order; chunks of K are summed in int32 (with ONNX's wrap-around). tmp
 * holds M x N floats. */
enum { QK_CHUNK = 256 };
static alma_status igemm_exact(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                               int32_t *acc, int64_t ldacc, float *tmp) {
  if (M == 0 || N == 0) return ALMA_OK;
  if (K == 0) {
    for (int64_t i = 0; i < M; i++) memset(acc + i * ldacc, 0, (size_t)N * sizeof *acc);
    return ALMA_OK;
  }
  for (int64_t k0 = 0; k0 < K; k0 += QK_CHUNK) {
    int64_t kc = K - k0 < QK_CHUNK ? K - k0 : QK_CHUNK;
    ALMA_TRY(alma__sgemm(0, 0, M, N, kc, 1.0f, A + k0, lda, B + k0 * ldb, ldb, 0.0f, tmp, N));
    for (int64_t i = 0; i < M; i++) {
      uint32_t *o = (uint32_t *)(acc + i * ldacc);
      const float *t = tmp + i * N;
      if (k0 == 0)
        for (int64_t j = 0; j < N; j++) o[j] = (uint32_t)(int32_t)t[j];
      else
        for (int64_t j = 0; j < N; j++) o[j] += (uint32_t)(int32_t)t[j];
    }
  }
  return ALMA_OK;
}

/* ==== DynamicQuantizeLinear's arithmetic (quant_kernels.h) ================================== */

void alma__dynq_range(const float *x, int64_t n, float *mn, float *mx) {
  float lo = 0.0f, hi = 0.0f;
  int64_t i = 0;
#if defined(__SSE2__)
  /* minps/maxps return their second operand when the first is NaN (or equal): NaN is skipped and
   * the lanes only ever hold 0 or values of x, as the scalar loop below */
  __m128 l0 = _mm_setzero_ps(), l1 = l0, h0 = l0, h1 = l0;
  for (; i + 8 <= n; i += 8) {
    __m128 a = _mm_loadu_ps(x + i), b = _mm_loadu_ps(x + i + 4);
    l0 = _mm_min_ps(a, l0);
    l1 = _mm_min_ps(b, l1);
    h0 = _mm_max_ps(a, h0);
    h1 = _mm_max_ps(b, h1);
  }
  float tl[8], th[8];
  _mm_storeu_ps(tl, l0);
  _mm_storeu_ps(tl + 4, l1);
  _mm_storeu_ps(th, h0);
  _mm_storeu_ps(th + 4, h1);
  for (int k = 0; k < 8; k++) {
    if (tl[k] < lo) lo = tl[k];
    if (th[k] > hi) hi = th[k];
  }
#endif
  for (; i < n; i++) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
  }
  *mn = lo;
  *mx = hi;
}

void alma__dynq_params(float mn, float mx, float *scale, uint8_t *zp) {
  /* all-zero input: scale 1 (zero point 0, y 0) instead of dividing by zero, as the ONNX reference */
  float s = mx == mn ? 1.0f : (mx - mn) / 255.0f;
  float zpf = 0.0f - mn / s;
  zpf = zpf < 0.0f ? 0.0f : zpf > 255.0f ? 255.0f : zpf;
  *scale = s;
  *zp = (uint8_t)q_round_sat(zpf, 0, 255);
}

/* AVX2 where the CPU has it, chosen at run time (alma is built for baseline x86-64): the same
 * IEEE operations, twice as wide. No FMA is enabled, so nothing can be fused differently. */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define Q_X86 1
#include <immintrin.h>
#define Q_AVX2 __attribute__((target("avx2")))
static int q_has_avx2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}
#else
#define Q_X86 0
static int q_has_avx2(void) { return 0; }
#endif

/* Clamping x / scale to the output's range first (integer bounds: the same result as saturating
 * after rounding) keeps it far below 2^22, where adding and removing 1.5 * 2^23 rounds half to
 * even in float (rintf would be a libm call per element on baseline x86-64); NaN becomes -zp, so
 * 0 after adding the zero point. The division stays a division: x * (1 / scale) rounds
 * differently near half-integers, and the ONNX reference divides. */
#define Q_BIG 12582912.0f

#if Q_X86
/* 32 values a step; returns how many it did (a multiple of 32). */
Q_AVX2 static int64_t quantize_avx2(const float *x, int64_t n, float scale, int32_t zp, int is_u8, void *out) {
  const float lo = (float)((is_u8 ? 0 : -128) - zp), hi = (float)((is_u8 ? 255 : 127) - zp);
  const __m256 vs = _mm256_set1_ps(scale), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi),
               vnan = _mm256_set1_ps((float)-zp), vbig = _mm256_set1_ps(Q_BIG);
  const __m256i vz = _mm256_set1_epi32(zp), perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i r[4];
    for (int k = 0; k < 4; k++) {
      __m256 q = _mm256_div_ps(_mm256_loadu_ps(x + i + 8 * k), vs);
      q = _mm256_blendv_ps(q, vnan, _mm256_cmp_ps(q, q, _CMP_UNORD_Q));
      q = _mm256_min_ps(_mm256_max_ps(q, vlo), vhi);
      q = _mm256_sub_ps(_mm256_add_ps(q, vbig), vbig);
      r[k] = _mm256_add_epi32(_mm256_cvttps_epi32(q), vz);
    }
    /* the packs work within 128-bit lanes: the permute puts the 4-value groups back in order */
    __m256i a = _mm256_packs_epi32(r[0], r[1]), b = _mm256_packs_epi32(r[2], r[3]);
    __m256i c = is_u8 ? _mm256_packus_epi16(a, b) : _mm256_packs_epi16(a, b);
    _mm256_storeu_si256((__m256i *)((char *)out + i), _mm256_permutevar8x32_epi32(c, perm));
  }
  return i;
}
#endif

static void quantize_row(const float *x, int64_t n, float scale, int32_t zp, int is_u8, void *out, int avx2) {
  const float lo = (float)((is_u8 ? 0 : -128) - zp), hi = (float)((is_u8 ? 255 : 127) - zp);
  int64_t i = 0;
#if Q_X86
  if (avx2 && n >= 32) i = quantize_avx2(x, n, scale, zp, is_u8, out);
#else
  (void)avx2;
#endif
#if defined(__SSE2__)
  /* 16 values a step with SSE2 (every x86-64): the same arithmetic, packed to bytes */
  const __m128 vs = _mm_set1_ps(scale), vlo = _mm_set1_ps(lo), vhi = _mm_set1_ps(hi), vnan = _mm_set1_ps((float)-zp),
               vbig = _mm_set1_ps(Q_BIG);
  const __m128i vz = _mm_set1_epi32(zp);
  for (; i + 16 <= n; i += 16) {
    __m128i r[4];
    for (int k = 0; k < 4; k++) {
      __m128 q = _mm_div_ps(_mm_loadu_ps(x + i + 4 * k), vs);
      __m128 nan = _mm_cmpunord_ps(q, q);
      q = _mm_or_ps(_mm_and_ps(nan, vnan), _mm_andnot_ps(nan, q));
      q = _mm_min_ps(_mm_max_ps(q, vlo), vhi);
      q = _mm_sub_ps(_mm_add_ps(q, vbig), vbig);
      r[k] = _mm_add_epi32(_mm_cvttps_epi32(q), vz);
    }
    __m128i a = _mm_packs_epi32(r[0], r[1]), b = _mm_packs_epi32(r[2], r[3]);
    _mm_storeu_si128((__m128i *)((char *)out + i), is_u8 ? _mm_packus_epi16(a, b) : _mm_packs_epi16(a, b));
  }
#endif
  for (; i < n; i++) {
    float q = x[i] / scale;
    q = q != q ? (float)-zp : q < lo ? lo : q > hi ? hi : q;
    int32_t v = (int32_t)((q + Q_BIG) - Q_BIG) + zp;
    if (is_u8) ((uint8_t *)out)[i] = (uint8_t)v;
    else ((int8_t *)out)[i] = (int8_t)v;
  }
}

void alma__quantize_f32(const float *x, int64_t n, float scale, int32_t zp, int is_u8, void *out) {
  quantize_row(x, n, scale, zp, is_u8, out, n >= 32 && q_has_avx2());
}

/* DequantizeLinear of one row of one scale: y = ((float)x - zp) * scale, two float32 roundings
 * as the reference's (x - zp) * scale in float32 (int32 x converts to float rounding to nearest,
 * as the C conversion and cvtdq2ps both do). */
#if Q_X86
Q_AVX2 static int64_t dequantize_avx2(const void *x, alma_dtype t, int64_t n, float zp, float s, float *y) {
  const __m256 vz = _mm256_set1_ps(zp), vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; k++) {
      int64_t j = i + 8 * k;
      __m256i v = t == ALMA_DTYPE_UINT8  ? _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)((const uint8_t *)x + j)))
                  : t == ALMA_DTYPE_INT8 ? _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)((const int8_t *)x + j)))
                                         : _mm256_loadu_si256((const __m256i *)((const int32_t *)x + j));
      _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(v), vz), vs));
    }
  return i;
}
#endif

static void dequantize_row(const void *x, alma_dtype t, int64_t n, float zp, float s, float *y, int avx2) {
  int64_t i = 0;
#if Q_X86
  if (avx2 && n >= 32) i = dequantize_avx2(x, t, n, zp, s, y);
#else
  (void)avx2;
#endif
#if defined(__SSE2__)
  const __m128 vz = _mm_set1_ps(zp), vs = _mm_set1_ps(s);
  for (; i + 16 <= n; i += 16) {
    __m128i v[4];
    if (t == ALMA_DTYPE_INT32) {
      for (int k = 0; k < 4; k++) v[k] = _mm_loadu_si128((const __m128i *)((const int32_t *)x + i + 4 * k));
    } else {
      /* widen 16 bytes to 4 x 4 int32: zero-extend uint8, sign-extend int8 (duplicate, then
       * shift arithmetically) */
      __m128i b = _mm_loadu_si128((const __m128i *)((const uint8_t *)x + i)), w0, w1;
      if (t == ALMA_DTYPE_UINT8) {
        const __m128i z = _mm_setzero_si128();
        w0 = _mm_unpacklo_epi8(b, z);
        w1 = _mm_unpackhi_epi8(b, z);
        v[0] = _mm_unpacklo_epi16(w0, z);
        v[1] = _mm_unpackhi_epi16(w0, z);
        v[2] = _mm_unpacklo_epi16(w1, z);
        v[3] = _mm_unpackhi_epi16(w1, z);
      } else {
        w0 = _mm_srai_epi16(_mm_unpacklo_epi8(b, b), 8);
        w1 = _mm_srai_epi16(_mm_unpackhi_epi8(b, b), 8);
        v[0] = _mm_srai_epi32(_mm_unpacklo_epi16(w0, w0), 16);
        v[1] = _mm_srai_epi32(_mm_unpackhi_epi16(w0, w0), 16);
        v[2] = _mm_srai_epi32(_mm_unpacklo_epi16(w1, w1), 16);
        v[3] = _mm_srai_epi32(_mm_unpackhi_epi16(w1, w1), 16);
      }
    }
    for (int k = 0; k < 4; k++) _mm_storeu_ps(y + i + 4 * k, _mm_mul_ps(_mm_sub_ps(_mm_cvtepi32_ps(v[k]), vz), vs));
  }
#endif
  if (t == ALMA_DTYPE_UINT8)
    for (; i < n; i++) y[i] = ((float)((const uint8_t *)x)[i] - zp) * s;
  else if (t == ALMA_DTYPE_INT8)
    for (; i < n; i++) y[i] = ((float)((const int8_t *)x)[i] - zp) * s;
  else
    for (; i < n; i++) y[i] = ((float)((const int32_t *)x)[i] - zp) * s;
}

void alma__dynq_apply(const float *x, int64_t n, float scale, uint8_t zp, uint8_t *y) {
  alma__quantize_f32(x, n, scale, zp, 1, y);
}

/* ==== QuantizeLinear / DequantizeLinear: scale layout ======================================= */

/* How a scale/zero point maps onto x, seen as [outer, dim, inner] around `axis`. */
typedef struct {
  int mode;            /* 0 per-tensor, 1 per-axis, 2 blocked */
  int64_t outer, dim, inner;
  int64_t block, sdim; /* blocked: block size and the scale's length along axis */
} q_layout;

static alma_status q_layout_make(const alma_node *n, const alma_tensor *x, const alma_tensor *scale,
                                 const alma_tensor *zp, q_layout *L) {
  char s1[128], s2[128];
  memset(L, 0, sizeof *L);
  int64_t sn = alma_tensor_numel(scale);
  int64_t block = n->since_version >= 21 ? alma__attr_i(n, "block_size", 0) : 0;
  if (block < 0) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "block_size %lld is negative", (long long)block);
  if (zp) {
    int same = zp->rank == scale->rank;
    for (int i = 0; same && i < zp->rank; i++) same = zp->dims[i] == scale->dims[i];
    /* a [1] zero point with a scalar scale (or the reverse) is the same per-tensor layout */
    if (!same && !(alma_tensor_numel(zp) == 1 && sn == 1 && zp->rank <= 1 && scale->rank <= 1))
      return alma__op_error(n, ALMA_ERR_SHAPE, "zero point shape %s differs from scale shape %s",
                            alma__shape_str(zp->rank, zp->dims, s1, sizeof s1),
                            alma__shape_str(scale->rank, scale->dims, s2, sizeof s2));
  }
  /* per tensor: one row of every element (the kernels loop over rows of one scale) */
  L->outer = 1;
  L->dim = 1;
  L->inner = alma_tensor_numel(x);
  if (block == 0 && sn == 1 && scale->rank <= 1) return ALMA_OK;
  if (n->since_version < 13)
    return alma__op_error(n, ALMA_ERR_SHAPE, "opset %d requires a scalar scale, got shape %s", n->since_version,
                          alma__shape_str(scale->rank, scale->dims, s1, sizeof s1));
  int axis;
  if (alma__norm_axis(alma__attr_i(n, "axis", 1), x->rank, &axis) != ALMA_OK)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis %lld out of range for rank %d",
                          (long long)alma__attr_i(n, "axis", 1), x->rank);
  L->outer = alma__numel(axis, x->dims);
  L->dim = x->dims[axis];
  L->inner = alma__numel(x->rank - axis - 1, x->dims + axis + 1);
  if (block == 0) {
    if (scale->rank != 1 || scale->dims[0] != x->dims[axis])
      return alma__op_error(n, ALMA_ERR_SHAPE, "per-axis scale must be 1-D of length %lld (axis %d of %s), got %s",
                            (long long)x->dims[axis], axis, alma__shape_str(x->rank, x->dims, s1, sizeof s1),
                            alma__shape_str(scale->rank, scale->dims, s2, sizeof s2));
    L->mode = 1;
    return ALMA_OK;
  }
  /* blocked: same shape as x except ceil(D/B) along axis */
  int ok = scale->rank == x->rank;
  for (int i = 0; ok && i < x->rank; i++)
    ok = i == axis ? scale->dims[i] == x->dims[i] / block + (x->dims[i] % block != 0) : scale->dims[i] == x->dims[i];
  if (!ok)
    return alma__op_error(n, ALMA_ERR_SHAPE, "blocked scale shape %s does not match x %s with block_size %lld on axis %d",
                          alma__shape_str(scale->rank, scale->dims, s1, sizeof s1),
                          alma__shape_str(x->rank, x->dims, s2, sizeof s2), (long long)block, axis);
  L->mode = 2;
  L->block = block;
  L->sdim = scale->dims[axis];
  return ALMA_OK;
}

/* Index of the scale/zero point for x element (o, a, i). */
static inline int64_t q_layout_index(const q_layout *L, int64_t o, int64_t a, int64_t i) {
  switch (L->mode) {
    case 1: return a;
    case 2: return (o * L->sdim + a / L->block) * L->inner + i;
    default: return 0;
  }
}

/* ==== QuantizeLinear ========================================================================= */

static alma_status quantize_out_dtype(const alma_node *n, const alma_tensor *zp, alma_dtype *out) {
  int64_t od = n->since_version >= 21 ? alma__attr_i(n, "output_dtype", 0) : 0;
  alma_dtype t = zp ? zp->dtype : (od ? (alma_dtype)od : ALMA_DTYPE_UINT8);
  if (zp && od && od != (int64_t)zp->dtype)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "output_dtype %lld does not match zero point dtype %s",
                          (long long)od, alma_dtype_name(zp->dtype));
  int since = q_type_since(t), ok = since && n->since_version >= since;
  if (!ok)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "quantized type %s (code %d) at opset %d",
                          alma__onnx_type_name((int64_t)t), (int)t, n->since_version);
  *out = t;
  return ALMA_OK;
}

/* The type x / scale is computed in: x's (opsets 10-21; int32 x in double, as numpy promotes),
 * from 23 the `precision` attribute's, else the scale's (int32 x still in double: the reference's
 * numpy division, which made ONNX's test data). */
static alma_status quantize_precision(const alma_node *n, const alma_tensor *x, const alma_tensor *scale,
                                      alma_dtype *out) {
  int64_t p = n->since_version >= 23 ? alma__attr_i(n, "precision", 0) : 0;
  if (p) {
    if (p != ALMA_DTYPE_FLOAT32 && p != ALMA_DTYPE_FLOAT16 && p != ALMA_DTYPE_BFLOAT16 && p != ALMA_DTYPE_FLOAT64)
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "precision %s (expects a float type)", alma__onnx_type_name(p));
    *out = (alma_dtype)p;
  } else if (x->dtype == ALMA_DTYPE_INT32) {
    *out = ALMA_DTYPE_FLOAT64;
  } else {
    /* a float8e8m0 scale is no arithmetic type: numpy (the reference) divides in x's float32 */
    *out = n->since_version >= 23 && scale->dtype != ALMA_DTYPE_FLOAT8E8M0 ? scale->dtype : x->dtype;
  }
  return ALMA_OK;
}

static alma_status quantize_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                  int nout) {
  const alma_tensor *x = in[0], *scale = in[1], *zp = alma__nn_in(in, nin, 2);
  int v19 = n->since_version >= 19;
  int xok = x->dtype == ALMA_DTYPE_FLOAT32 || x->dtype == ALMA_DTYPE_INT32 ||
            (v19 && (x->dtype == ALMA_DTYPE_FLOAT16 || x->dtype == ALMA_DTYPE_BFLOAT16));
  if (!xok) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  /* opset 10/13: float scale; 19/21: the scale has x's type; 23: any float scale */
  int sok = n->since_version >= 23 ? q_scale_ok(n, scale->dtype)
                                   : v19 ? scale->dtype == x->dtype : scale->dtype == ALMA_DTYPE_FLOAT32;
  if (!sok)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "scale dtype %s with input %s", alma_dtype_name(scale->dtype),
                          alma_dtype_name(x->dtype));
  alma_dtype prec;
  ALMA_TRY(quantize_precision(n, x, scale, &prec));
  int64_t sat = alma__attr_i(n, "saturate", 1);
  if (sat != 0 && sat != 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "saturate must be 0 or 1");
  alma_dtype yt = ALMA_DTYPE_UINT8;
  ALMA_TRY(quantize_out_dtype(n, zp, &yt));
  q_layout L;
  ALMA_TRY(q_layout_make(n, x, scale, zp, &L));
  alma__set_shape(&out[0], yt, x->rank, x->dims);
  return ALMA_OK;
}

static alma_status quantize_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                                 alma_tensor *out, int nout) {
  const alma_tensor *x = in[0], *scale = in[1], *zp = alma__nn_in(in, nin, 2);
  q_layout L;
  ALMA_TRY(q_layout_make(n, x, scale, zp, &L));
  alma_dtype yt = out[0].dtype, prec;
  ALMA_TRY(quantize_precision(n, x, scale, &prec));
  int64_t lo, hi;
  q_range(yt, &lo, &hi);
  int64_t ns = alma_tensor_numel(scale);
  double *sc = alma__malloc((size_t)ns * sizeof *sc);
  float *sf = alma__malloc((size_t)ns * sizeof *sf);
  int32_t *zpv = alma__calloc((size_t)ns, sizeof *zpv);
  float *zpf = alma__calloc((size_t)ns, sizeof *zpf);
  if (!sc || !sf || !zpv || !zpf) {
    free(sc);
    free(sf);
    free(zpv);
    free(zpf);
    return alma__op_error(n, ALMA_ERR_NOMEM, "scale buffers");
  }
  int lowf = alma__dtype_is_lowfloat(yt), sat = (int)alma__attr_i(n, "saturate", 1);
  for (int64_t i = 0; i < ns; i++) {
    sc[i] = alma__get_f64(scale->data, scale->dtype, i);
    sf[i] = (float)sc[i];
    if (zp && lowf) zpf[i] = q_getf(zp->data, zp->dtype, i);
    else if (zp) zpv[i] = q_get(zp->data, zp->dtype, i);
  }
  /* The division runs in prec (quantize_precision), both operands first rounded to it. Along
   * the inner axis the parameter index is constant (per-tensor, per-axis) or steps by one
   * (blocked). */
  int64_t step = L.mode == 2 ? 1 : 0;
  for (int64_t i = 0; i < ns; i++) sf[i] = round_to(prec, sf[i]);
  /* float32 to 8 bits with one scale per row (per tensor, per axis): the vector kernel, which
   * computes the same float quotient and rounds and saturates it to the same integer */
  int fast = x->dtype == ALMA_DTYPE_FLOAT32 && prec == ALMA_DTYPE_FLOAT32 && is_8bit(yt) && L.mode != 2,
      avx2 = fast && q_has_avx2();
  for (int64_t o = 0; o < L.outer; o++)
    for (int64_t a = 0; a < L.dim; a++) {
      int64_t base = (o * L.dim + a) * L.inner, s0 = q_layout_index(&L, o, a, 0);
      if (fast) {
        quantize_row((const float *)x->data + base, L.inner, sf[s0], zpv[s0], yt == ALMA_DTYPE_UINT8,
                     (char *)out[0].data + base, avx2);
        continue;
      }
      for (int64_t i = 0; i < L.inner; i++) {
        int64_t s = s0 + i * step, idx = base + i;
        double q;
        if (prec == ALMA_DTYPE_FLOAT64) q = alma__get_f64(x->data, x->dtype, idx) / sc[s];
        else if (x->dtype == ALMA_DTYPE_FLOAT32 && prec == ALMA_DTYPE_FLOAT32) q = ((const float *)x->data)[idx] / sf[s];
        else q = round_to(prec, round_to(prec, (float)alma__get_f64(x->data, x->dtype, idx)) / sf[s]);
        if (lowf) {
          /* float8/float4: x / scale + zero point (usually 0) in the division's precision, rounded
           * once into the type. ONNX's reference adds float4's zero point always (-0 + 0 is +0) and
           * float8's never: a float8 zero point is added only when it is not zero. */
          if (zp && (zpf[s] != 0.0f || yt == ALMA_DTYPE_FLOAT4E2M1))
            q = prec == ALMA_DTYPE_FLOAT64 ? q + zpf[s] : round_to(prec, (float)q + zpf[s]);
          ((uint8_t *)out[0].data)[idx] = alma__lowfloat_encode(yt, q, sat);
          continue;
        }
        int64_t v = q_round_sat(q != q ? 0.0 : q_rne(q) + zpv[s], lo, hi);
        switch (yt) {
          case ALMA_DTYPE_UINT8: ((uint8_t *)out[0].data)[idx] = (uint8_t)v; break;
          case ALMA_DTYPE_INT8: ((int8_t *)out[0].data)[idx] = (int8_t)v; break;
          default: q_set(out[0].data, yt, idx, v); break;
        }
      }
    }
  free(sc);
  free(sf);
  free(zpv);
  free(zpf);
  return ALMA_OK;
}

/* 19: float8 outputs and `saturate`; 21: int4/uint4, int16/uint16, blocks, output_dtype; 23:
 * `precision`, a scale type independent of x's, float4e2m1; 24: float8e8m0 scales; 25: int2/uint2 */
const alma_op_def alma__op_QuantizeLinear = {.name = "QuantizeLinear", .domain = "", .versions = {10, 13, 19, 21, 23, 24, 25},
  .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
  .infer = quantize_infer, .exec = quantize_exec};

/* ==== DequantizeLinear ======================================================================= */

static alma_status dequantize_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                    int nout) {
  const alma_tensor *x = in[0], *scale = in[1], *zp = alma__nn_in(in, nin, 2);
  int since = x->dtype == ALMA_DTYPE_INT32 ? 10 : q_type_since(x->dtype);
  if (!since || n->since_version < since)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s at opset %d", alma_dtype_name(x->dtype),
                          n->since_version);
  if (!q_scale_ok(n, scale->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "scale dtype %s at opset %d", alma_dtype_name(scale->dtype),
                          n->since_version);
  if (zp && zp->dtype != x->dtype)
    return alma__op_error(n, ALMA_ERR_TYPE, "zero point dtype %s differs from input dtype %s",
                          alma_dtype_name(zp->dtype), alma_dtype_name(x->dtype));
  q_layout L;
  ALMA_TRY(q_layout_make(n, x, scale, zp, &L));
  /* 23: output_dtype, else the scale's type */
  int64_t od = n->since_version >= 23 ? alma__attr_i(n, "output_dtype", 0) : 0;
  if (od && !is_scale_dtype((alma_dtype)od, 1))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "output_dtype %s (expects float32, float16 or bfloat16)",
                          alma__onnx_type_name(od));
  /* the output takes the scale's type unless output_dtype says; float8e8m0 is not an output type */
  if (!od && scale->dtype == ALMA_DTYPE_FLOAT8E8M0)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL,
                          "a float8e8m0 scale needs output_dtype (float32, float16 or bfloat16)");
  alma__set_shape(&out[0], od ? (alma_dtype)od : scale->dtype, x->rank, x->dims);
  return ALMA_OK;
}

static alma_status dequantize_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                                   alma_tensor *out, int nout) {
  const alma_tensor *x = in[0], *scale = in[1], *zp = alma__nn_in(in, nin, 2);
  q_layout L;
  ALMA_TRY(q_layout_make(n, x, scale, zp, &L));
  int64_t ns = alma_tensor_numel(scale);
  float *sc = alma__malloc((size_t)ns * sizeof *sc);
  float *zpv = alma__calloc((size_t)ns, sizeof *zpv);
  if (!sc || !zpv) {
    free(sc);
    free(zpv);
    return alma__op_error(n, ALMA_ERR_NOMEM, "scale buffers");
  }
  for (int64_t i = 0; i < ns; i++) {
    sc[i] = (float)alma__get_f64(scale->data, scale->dtype, i);
    if (zp) zpv[i] = q_getf(zp->data, zp->dtype, i);
  }
  /* (x - zp) * scale in float32, then stored in the output type (the reference's arithmetic);
   * float32 output with one scale per row (per tensor, per axis): the vector kernel */
  alma_dtype yt = out[0].dtype;
  int64_t step = L.mode == 2 ? 1 : 0;
  int fast = yt == ALMA_DTYPE_FLOAT32 && L.mode != 2 && (is_8bit(x->dtype) || x->dtype == ALMA_DTYPE_INT32);
  int avx2 = fast && q_has_avx2(), esz = x->dtype == ALMA_DTYPE_INT32 ? 4 : 1;
  for (int64_t o = 0; o < L.outer; o++)
    for (int64_t a = 0; a < L.dim; a++) {
      int64_t base = (o * L.dim + a) * L.inner, s0 = q_layout_index(&L, o, a, 0);
      const float *zr = zpv + s0, *sr = sc + s0;
      if (fast) {
        dequantize_row((const char *)x->data + base * esz, x->dtype, L.inner, zr[0], sr[0], (float *)out[0].data + base,
                       avx2);
        continue;
      }
      for (int64_t i = 0; i < L.inner; i++) {
        float v = (q_getf(x->data, x->dtype, base + i) - zr[i * step]) * sr[i * step];
        if (yt == ALMA_DTYPE_FLOAT32) ((float *)out[0].data)[base + i] = v;
        else alma__set_f64(out[0].data, yt, base + i, v);
      }
    }
  free(sc);
  free(zpv);
  return ALMA_OK;
}

/* 19: float8 inputs; 21: int4/uint4, int16/uint16, blocks; 23: output_dtype, float4e2m1; 24: float8e8m0
 * scales; 25: int2/uint2 */
const alma_op_def alma__op_DequantizeLinear = {.name = "DequantizeLinear", .domain = "", .versions = {10, 13, 19, 21, 23, 24, 25},
  .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
  .infer = dequantize_infer, .exec = dequantize_exec};

/* ==== DynamicQuantizeLinear ================================================================== */

static alma_status dynq_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  if (in[0]->dtype != ALMA_DTYPE_FLOAT32)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(in[0]->dtype));
  alma__set_shape(&out[0], ALMA_DTYPE_UINT8, in[0]->rank, in[0]->dims);
  if (nout > 1) alma__set_shape(&out[1], ALMA_DTYPE_FLOAT32, 0, NULL);
  if (nout > 2) alma__set_shape(&out[2], ALMA_DTYPE_UINT8, 0, NULL);
  return ALMA_OK;
}

static alma_status dynq_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  const float *x = in[0]->data;
  int64_t cnt = alma_tensor_numel(in[0]);
  float mn, mx, scale;
  uint8_t zp;
  alma__dynq_range(x, cnt, &mn, &mx);
  alma__dynq_params(mn, mx, &scale, &zp);
  if (out[0].data) alma__dynq_apply(x, cnt, scale, zp, out[0].data);
  if (nout > 1 && out[1].data) *(float *)out[1].data = scale;
  if (nout > 2 && out[2].data) *(uint8_t *)out[2].data = zp;
  return ALMA_OK;
}

static void dynq_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                      int64_t *macs, int64_t *flops) {
  *macs = 0;
  *flops = 4 * alma_tensor_numel(in[0]);
}

const alma_op_def alma__op_DynamicQuantizeLinear = {.name = "DynamicQuantizeLinear", .domain = "", .versions = {11},
  .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 3,
  .infer = dynq_infer, .exec = dynq_exec, .cost = dynq_cost};

/* ==== integer convolution (ConvInteger, QLinearConv) ========================================= */

typedef struct {
  int nsp;                         /* spatial rank */
  int64_t N, C, M, group;
  int64_t in[ALMA_MAX_RANK], k[ALMA_MAX_RANK], out[ALMA_MAX_RANK];
  int64_t stride[ALMA_MAX_RANK], dil[ALMA_MAX_RANK], pad[ALMA_MAX_RANK]; /* pad: leading pad */
  int64_t P, KS;                   /* output spatial size, kernel spatial size */
} qconv_geom;

#define QCONV_MAX_EXTENT ((int64_t)1 << 31)

/* Conv attributes (auto_pad, dilations, group, kernel_shape, pads, strides) and shapes. */
static alma_status qconv_geom_make(const alma_node *n, const alma_tensor *x, const alma_tensor *w, qconv_geom *g) {
  char s1[128], s2[128];
  memset(g, 0, sizeof *g);
  if (x->rank < 3 || w->rank != x->rank)
    return alma__op_error(n, ALMA_ERR_SHAPE, "input %s and weight %s: need rank >= 3 and equal ranks",
                          alma__shape_str(x->rank, x->dims, s1, sizeof s1), alma__shape_str(w->rank, w->dims, s2, sizeof s2));
  int nsp = g->nsp = x->rank - 2;
  g->N = x->dims[0];
  g->C = x->dims[1];
  g->M = w->dims[0];
  g->group = alma__attr_i(n, "group", 1);
  if (g->group < 1 || g->group > g->C || g->C % g->group || g->M % g->group || w->dims[1] != g->C / g->group)
    return alma__op_error(n, ALMA_ERR_SHAPE, "group %lld does not fit input %s and weight %s", (long long)g->group,
                          alma__shape_str(x->rank, x->dims, s1, sizeof s1), alma__shape_str(w->rank, w->dims, s2, sizeof s2));
  const int64_t *ks, *st, *dl, *pd;
  int nks = alma__attr_ints(n, "kernel_shape", &ks), nst = alma__attr_ints(n, "strides", &st);
  int ndl = alma__attr_ints(n, "dilations", &dl), npd = alma__attr_ints(n, "pads", &pd);
  if ((nks && nks != nsp) || (nst && nst != nsp) || (ndl && ndl != nsp) || (npd && npd != 2 * nsp))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "kernel_shape/strides/dilations/pads lengths do not match %d spatial dims", nsp);
  const char *ap = alma__attr_s(n, "auto_pad", "NOTSET");
  int mode = !strcmp(ap, "NOTSET") ? 0 : !strcmp(ap, "VALID") ? 1 : !strcmp(ap, "SAME_UPPER") ? 2 : !strcmp(ap, "SAME_LOWER") ? 3 : -1;
  if (mode < 0) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "auto_pad '%s'", ap);
  g->P = 1;
  g->KS = 1;
  for (int d = 0; d < nsp; d++) {
    g->in[d] = x->dims[2 + d];
    g->k[d] = w->dims[2 + d];
    if (nks && ks[d] != g->k[d])
      return alma__op_error(n, ALMA_ERR_SHAPE, "kernel_shape[%d]=%lld but weight has %lld", d, (long long)ks[d], (long long)g->k[d]);
    g->stride[d] = nst ? st[d] : 1;
    g->dil[d] = ndl ? dl[d] : 1;
    /* bounded so the output arithmetic below cannot overflow */
    if (g->stride[d] < 1 || g->dil[d] < 1 || g->stride[d] > QCONV_MAX_EXTENT || g->dil[d] > QCONV_MAX_EXTENT)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "strides and dilations must be in [1, 2^31]");
    int64_t ek = (g->k[d] - 1) * g->dil[d] + 1, pb = 0, pe = 0, o;
    if (mode == 0) {
      pb = npd ? pd[d] : 0;
      pe = npd ? pd[d + nsp] : 0;
      if (pb < 0 || pe < 0 || pb > QCONV_MAX_EXTENT || pe > QCONV_MAX_EXTENT)
        return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "pads must be in [0, 2^31]");
      o = g->in[d] + pb + pe - ek < 0 ? -1 : (g->in[d] + pb + pe - ek) / g->stride[d] + 1;
    } else if (mode == 1) {
      o = g->in[d] - ek < 0 ? -1 : (g->in[d] - ek) / g->stride[d] + 1;
    } else {
      o = (g->in[d] + g->stride[d] - 1) / g->stride[d];
      int64_t total = (o - 1) * g->stride[d] + ek - g->in[d];
      if (total < 0) total = 0;
      pb = mode == 2 ? total / 2 : total - total / 2;
    }
    if (o < 0)
      return alma__op_error(n, ALMA_ERR_SHAPE, "kernel %s (dilated) larger than padded input %s",
                            alma__shape_str(w->rank, w->dims, s1, sizeof s1), alma__shape_str(x->rank, x->dims, s2, sizeof s2));
    g->out[d] = o;
    g->pad[d] = pb;
    g->P *= o;
    g->KS *= g->k[d];
  }
  return ALMA_OK;
}

static void qconv_out_shape(const qconv_geom *g, int64_t *dims) {
  dims[0] = g->N;
  dims[1] = g->M;
  for (int d = 0; d < g->nsp; d++) dims[2 + d] = g->out[d];
}

/* Checks a zero point/scale is a scalar (or one element) or, if per_channel, 1-D of length M. */
static alma_status q_param_check(const alma_node *n, const alma_tensor *t, const char *what, int64_t per_len) {
  if (!t) return ALMA_OK;
  int64_t k = alma_tensor_numel(t);
  if (k == 1 && t->rank <= 1) return ALMA_OK;
  if (per_len > 0 && t->rank == 1 && k == per_len) return ALMA_OK;
  char s[128];
  return alma__op_error(n, ALMA_ERR_SHAPE, "%s has shape %s; expected a scalar%s", what,
                        alma__shape_str(t->rank, t->dims, s, sizeof s), per_len > 0 ? " or one value per output channel" : "");
}

/* One im2col row: row[p] = the shifted input under kernel offset kidx for output position p (0 in
 * the padding, which holds the zero point before the shift), from the channel plane xc. The last
 * spatial axis runs in a tight loop; the others step like an odometer. */
static void im2col_row(const qconv_geom *g, const float *xc, const int64_t *kidx, float *row) {
  int last = g->nsp - 1;
  int64_t wout = g->out[last], win = g->in[last], s = g->stride[last], w0 = kidx[last] * g->dil[last] - g->pad[last];
  int64_t outer = wout > 0 ? g->P / wout : 0, oidx[ALMA_MAX_RANK] = {0};
  for (int64_t o = 0; o < outer; o++) {
    int64_t off = 0;
    int inside = 1;
    for (int d = 0; d < last && inside; d++) {
      int64_t ic = oidx[d] * g->stride[d] - g->pad[d] + kidx[d] * g->dil[d];
      inside = ic >= 0 && ic < g->in[d];
      off = off * g->in[d] + ic;
    }
    float *r = row + o * wout;
    if (!inside) {
      memset(r, 0, (size_t)wout * sizeof *r);
    } else {
      const float *src = xc + off * win;
      for (int64_t ow = 0; ow < wout; ow++) {
        int64_t iw = ow * s + w0;
        r[ow] = iw >= 0 && iw < win ? src[iw] : 0.0f;
      }
    }
    for (int d = last - 1; d >= 0; d--) {
      if (++oidx[d] < g->out[d]) break;
      oidx[d] = 0;
    }
  }
}

/* One share of a (image, group)'s output channels: rows [r0, r1) of igemm_exact, with their own
 * rows of tmp (the runtime's parallel loop runs the shares at once). */
typedef struct qconv_job {
  int64_t Mg, P, KK, per;
  const float *w, *col;
  int32_t *acc;
  float *tmp;
  _Atomic int failed;
} qconv_job;

static void qconv_item(void *arg, int64_t item) {
  qconv_job *j = arg;
  int64_t r0 = item * j->per, r1 = r0 + j->per < j->Mg ? r0 + j->per : j->Mg;
  if (r0 < r1 && igemm_exact(r1 - r0, j->P, j->KK, j->w + r0 * j->KK, j->KK, j->col, j->P, j->acc + r0 * j->P, j->P,
                             j->tmp + r0 * j->P) != ALMA_OK)
    atomic_store(&j->failed, 1);
}

/* acc[N, M, P] = conv(x - xzp, w - wzp[m]) with int32 wrap-around accumulation, through im2col:
 * per (image, group) a column matrix [C/group * KS, P] of shifted inputs, times the shifted
 * weights [M/group, C/group * KS] on the float GEMM in exact chunks (igemm_exact). */
static alma_status qconv_accumulate_q8(alma_exec_ctx *ctx, const alma_node *n, const qconv_geom *g,
                                       const alma_tensor *x, int32_t xzp, const alma_tensor *w, const alma_tensor *wzp,
                                       int32_t *acc);
static alma_status qconv_accumulate(alma_exec_ctx *ctx, const alma_node *n, const qconv_geom *g, const alma_tensor *x,
                                    int32_t xzp, const alma_tensor *w, const alma_tensor *wzp, int32_t *acc) {
  alma_status q8 = qconv_accumulate_q8(ctx, n, g, x, xzp, w, wzp, acc);
  if (q8 != ALMA_ERR_UNAVAILABLE) return q8;
  alma_exec_parfor pf;
  void *pctx;
  int threads = alma__exec_parfor(ctx, &pf, &pctx);
  int64_t Cg = g->C / g->group, Mg = g->M / g->group, KK = Cg * g->KS, P = g->P;
  int64_t inS = alma__numel(g->nsp, g->in);
  float *wf = q_to_f32(w);
  float *col = alma__malloc((size_t)(KK * P > 0 ? KK * P : 1) * sizeof *col);
  float *xf = alma__malloc((size_t)(g->C * inS > 0 ? g->C * inS : 1) * sizeof *xf);
  float *tmp = alma__malloc((size_t)(Mg * P > 0 ? Mg * P : 1) * sizeof *tmp);
  alma_status st = ALMA_OK;
  if (!wf || !col || !xf || !tmp) {
    st = alma__op_error(n, ALMA_ERR_NOMEM, "im2col buffer of %lld x %lld", (long long)KK, (long long)P);
    goto done;
  }
  int64_t wn = alma_tensor_numel(wzp ? wzp : w);
  for (int64_t m = 0; wzp && m < g->M; m++) {
    float z = (float)q_get(wzp->data, wzp->dtype, wn == 1 ? 0 : m);
    for (int64_t j = 0; j < KK; j++) wf[m * KK + j] -= z;
  }
  for (int64_t b = 0; b < g->N && st == ALMA_OK; b++) {
    int64_t base = b * g->C * inS, cnt = g->C * inS;
    if (x->dtype == ALMA_DTYPE_UINT8)
      for (int64_t i = 0; i < cnt; i++) xf[i] = (float)((int32_t)((const uint8_t *)x->data)[base + i] - xzp);
    else if (x->dtype == ALMA_DTYPE_INT8)
      for (int64_t i = 0; i < cnt; i++) xf[i] = (float)((int32_t)((const int8_t *)x->data)[base + i] - xzp);
    else
      for (int64_t i = 0; i < cnt; i++) xf[i] = (float)(q_get(x->data, x->dtype, base + i) - xzp);
    for (int64_t gr = 0; gr < g->group && st == ALMA_OK; gr++) {
      for (int64_t c = 0; c < Cg; c++)
        for (int64_t kk = 0; kk < g->KS; kk++) {
          int64_t kidx[ALMA_MAX_RANK], rem = kk;
          for (int d = g->nsp - 1; d >= 0; d--) {
            kidx[d] = rem % g->k[d];
            rem /= g->k[d];
          }
          im2col_row(g, xf + (gr * Cg + c) * inS, kidx, col + (c * g->KS + kk) * P);
        }
      /* about two shares a thread, of at least 8 channels (a thread descheduled leaves its share to others) */
      int64_t items = pf && Mg >= 16 ? (2 * threads < Mg / 8 ? 2 * threads : Mg / 8) : 1;
      qconv_job j = {.Mg = Mg, .P = P, .KK = KK, .per = (Mg + items - 1) / items, .w = wf + gr * Mg * KK, .col = col,
                     .acc = acc + (b * g->M + gr * Mg) * P, .tmp = tmp};
      atomic_init(&j.failed, 0);
      if (items > 1) {
        pf(pctx, (Mg + j.per - 1) / j.per, qconv_item, &j);
        if (atomic_load(&j.failed)) st = alma__op_error(n, ALMA_ERR_NOMEM, "integer convolution buffers");
      } else {
        st = igemm_exact(Mg, P, KK, j.w, KK, col, P, j.acc, P, tmp);
      }
    }
  }
done:
  free(wf);
  free(col);
  free(xf);
  free(tmp);
  return st;
}

/* ---- the same on the integer kernel (ops/qgemm.h: AVX-512 VNNI) ----
 * Per (image, group): the transposed im2col [P, C/group * KS] of uint8 inputs (int8 ones flipped
 * to uint8 with the zero point moved by 128, which leaves x - zp as it was; the padding holds the
 * zero point), times the weights' transpose packed [KS * C/group, M/group], rows of P split over
 * the threads; each row block's [rows, M/group] sums go to acc [M, P] transposed. */

/* Rows p0..p1-1 of the transposed im2col of one (image, group): row p holds, for each channel c
 * and kernel offset kk, the input under it (pad outside the image). kofs: the kernel offsets'
 * dilated coordinates, [KS][nsp]. */
static void im2col_rows_u8(const qconv_geom *g, const uint8_t *xg, int64_t Cg, const int64_t *kofs, uint8_t pad,
                           int64_t p0, int64_t p1, uint8_t *col) {
  int nsp = g->nsp;
  int64_t KS = g->KS, KK = Cg * KS, inS = alma__numel(nsp, g->in);
  for (int64_t p = p0; p < p1; p++) {
    int64_t base[ALMA_MAX_RANK], rem = p;
    for (int d = nsp - 1; d >= 0; d--) {
      base[d] = (rem % g->out[d]) * g->stride[d] - g->pad[d];
      rem /= g->out[d];
    }
    uint8_t *row = col + (p - p0) * KK;
    for (int64_t kk = 0; kk < KS; kk++) {
      int64_t off = 0;
      int inside = 1;
      for (int d = 0; d < nsp; d++) {
        int64_t ic = base[d] + kofs[kk * nsp + d];
        inside &= ic >= 0 && ic < g->in[d];
        off = off * g->in[d] + ic;
      }
      if (!inside)
        for (int64_t c = 0; c < Cg; c++) row[c * KS + kk] = pad;
      else
        for (int64_t c = 0; c < Cg; c++) row[c * KS + kk] = xg[c * inS + off];
    }
  }
}

/* The node's weights packed per group for the integer kernel, with their zero points (kept in its
 * prepared state when they are graph constants). */
typedef struct qconv8_pack {
  const void *w, *wzp;
  int64_t groups, bytes;
  alma__qgemm_packed *B; /* [groups] */
  int32_t *zb;           /* [M] */
} qconv8_pack;

typedef struct qconv8_state {
  alma_prepared hdr;
  _Atomic(qconv8_pack *) e;
} qconv8_state;

static void qconv8_pack_free(qconv8_pack *e) {
  if (!e) return;
  for (int64_t gr = 0; e->B && gr < e->groups; gr++) alma__qgemm_free(&e->B[gr]);
  free(e->B);
  free(e->zb);
  free(e);
}

static void qconv8_state_release(alma_prepared *hdr) {
  qconv8_state *s = (qconv8_state *)hdr;
  qconv8_pack *e = atomic_load_explicit(&s->e, memory_order_acquire);
  if (e) alma__packed_gemm_unreserve(e->bytes);
  qconv8_pack_free(e);
  free(s);
}

static alma_status qconv8_state_build(const alma_node *n, alma_prepared **out) {
  qconv8_state *s = calloc(1, sizeof *s);
  if (!s) return alma__op_error(n, ALMA_ERR_NOMEM, "out of memory");
  s->hdr.release = qconv8_state_release;
  atomic_init(&s->e, NULL);
  *out = &s->hdr;
  return ALMA_OK;
}

static qconv8_pack *qconv8_pack_make(const qconv_geom *g, const alma_tensor *w, const alma_tensor *wzp) {
  int64_t Mg = g->M / g->group, KK = g->C / g->group * g->KS, wn = wzp ? alma_tensor_numel(wzp) : 0;
  qconv8_pack *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->w = w->data, e->wzp = wzp ? wzp->data : NULL, e->groups = g->group;
  e->bytes = g->group * alma__qgemm_bytes(KK, Mg) + g->M * (int64_t)sizeof(int32_t);
  e->B = calloc((size_t)g->group, sizeof *e->B);
  e->zb = malloc((size_t)(g->M + 1) * sizeof *e->zb);
  int ok = e->B && e->zb;
  for (int64_t gr = 0; ok && gr < g->group; gr++)
    ok = alma__qgemm_pack((const char *)w->data + gr * Mg * KK, w->dtype == ALMA_DTYPE_UINT8, KK, Mg, 1, KK,
                          &e->B[gr]) == ALMA_OK;
  for (int64_t m = 0; ok && m < g->M; m++) e->zb[m] = wzp ? q_get(wzp->data, wzp->dtype, wn == 1 ? 0 : m) : 0;
  if (!ok) {
    alma__error_clear();
    qconv8_pack_free(e);
    return NULL;
  }
  return e;
}

/* The packed weights: the node's (constant weights, within the packed-weights budget) or made for
 * this call (*mine, the caller frees it); NULL when out of memory. */
static const qconv8_pack *qconv8_packs(alma_exec_ctx *ctx, const alma_node *n, const qconv_geom *g, const alma_tensor *w,
                                       const alma_tensor *wzp, qconv8_pack **mine) {
  *mine = NULL;
  int wi = !strcmp(n->op_type, "QLinearConv") ? 3 : 1, zi = wi == 3 ? 5 : 3;
  const alma_prepared *pp;
  if (alma__packed_gemm_enabled() && alma__exec_input_is_const(ctx, n, wi, w) &&
      (!wzp || alma__exec_input_is_const(ctx, n, zi, wzp)) && alma__node_prepared(n, qconv8_state_build, &pp) == ALMA_OK) {
    qconv8_state *s = (qconv8_state *)pp;
    qconv8_pack *e = atomic_load_explicit(&s->e, memory_order_acquire);
    if (!e) {
      qconv8_pack *p = qconv8_pack_make(g, w, wzp);
      if (p && alma__packed_gemm_reserve(p->bytes)) {
        if (atomic_compare_exchange_strong_explicit(&s->e, &e, p, memory_order_acq_rel, memory_order_acquire)) e = p;
        else {
          alma__packed_gemm_unreserve(p->bytes);
          qconv8_pack_free(p);
        }
      } else {
        qconv8_pack_free(p);
      }
    }
    if (e && e->w == w->data && e->wzp == (wzp ? wzp->data : NULL) && e->groups == g->group) return e;
  }
  alma__error_clear();
  return *mine = qconv8_pack_make(g, w, wzp);
}

typedef struct qconv8_job {
  const qconv_geom *g;
  const alma__qgemm_packed *B;
  const uint8_t *xg;
  const int64_t *kofs;
  const int32_t *zb;
  int32_t *acc; /* this (image, group)'s [Mg, P] */
  uint8_t **col;  /* per thread: [64, KK] */
  int32_t **tmp;  /* per thread: [64, Mg] */
  int32_t za[64];
  int64_t P, KK, Cg, Mg, rows;
  uint8_t pad;
} qconv8_job;

static void qconv8_item(void *arg, int64_t item) {
  qconv8_job *j = arg;
  int64_t p0 = item * j->rows, p1 = p0 + j->rows < j->P ? p0 + j->rows : j->P;
  for (int64_t q = p0; q < p1; q += 64) {
    int64_t m = p1 - q < 64 ? p1 - q : 64;
    uint8_t *col = j->col[item];
    int32_t *tmp = j->tmp[item];
    im2col_rows_u8(j->g, j->xg, j->Cg, j->kofs, j->pad, q, q + m, col);
    alma__qgemm_run(m, col, j->KK, j->za, j->B, j->zb, 0, j->B->panels, tmp, j->Mg);
    for (int64_t c = 0; c < j->Mg; c++)
      for (int64_t r = 0; r < m; r++) j->acc[c * j->P + q + r] = tmp[r * j->Mg + c];
  }
}

/* ALMA_ERR_UNAVAILABLE (nothing set) where the integer kernel does not serve: the float path runs. */
static alma_status qconv_accumulate_q8(alma_exec_ctx *ctx, const alma_node *n, const qconv_geom *g,
                                       const alma_tensor *x, int32_t xzp, const alma_tensor *w, const alma_tensor *wzp,
                                       int32_t *acc) {
  if (!alma__qgemm_available() || !is_8bit(x->dtype) || !is_8bit(w->dtype) || g->P < 1) return ALMA_ERR_UNAVAILABLE;
  int flip = x->dtype == ALMA_DTYPE_INT8; /* int8 x: x + 128 with zero point + 128 */
  int32_t zx = xzp + (flip ? 128 : 0);
  if (zx < 0 || zx > 255) return ALMA_ERR_UNAVAILABLE;
  alma_exec_parfor pf;
  void *pctx;
  int threads = alma__exec_parfor(ctx, &pf, &pctx);
  int64_t Cg = g->C / g->group, Mg = g->M / g->group, KK = Cg * g->KS, P = g->P;
  int64_t inS = alma__numel(g->nsp, g->in);
  /* row blocks of at least 64 rows, about two a thread */
  int64_t items = pf && P >= 128 ? (2 * threads < P / 64 ? 2 * threads : P / 64) : 1;
  if (items > 64) items = 64;
  qconv8_pack *mine;
  const qconv8_pack *pk = qconv8_packs(ctx, n, g, w, wzp, &mine);
  uint8_t *xu = flip ? malloc((size_t)(g->C * inS + 1)) : NULL;
  int64_t *kofs = malloc((size_t)(g->KS * g->nsp + 1) * sizeof *kofs);
  uint8_t *cols = malloc((size_t)(items * 64 * KK + 1));
  int32_t *tmps = malloc((size_t)(items * 64 * Mg + 1) * sizeof *tmps);
  alma_status st = pk && kofs && cols && tmps && (!flip || xu) ? ALMA_OK
                                                               : alma__op_error(n, ALMA_ERR_NOMEM, "integer convolution buffers");
  uint8_t *colp[64];
  int32_t *tmpp[64];
  for (int64_t i = 0; st == ALMA_OK && i < items; i++) colp[i] = cols + i * 64 * KK, tmpp[i] = tmps + i * 64 * Mg;
  for (int64_t kk = 0; st == ALMA_OK && kk < g->KS; kk++) {
    int64_t rem = kk;
    for (int d = g->nsp - 1; d >= 0; d--) {
      kofs[kk * g->nsp + d] = (rem % g->k[d]) * g->dil[d];
      rem /= g->k[d];
    }
  }
  for (int64_t b = 0; b < g->N && st == ALMA_OK; b++) {
    const uint8_t *xb = (const uint8_t *)x->data + b * g->C * inS;
    if (flip) {
      for (int64_t i = 0; i < g->C * inS; i++) xu[i] = (uint8_t)(xb[i] ^ 0x80);
      xb = xu;
    }
    for (int64_t gr = 0; gr < g->group; gr++) {
      qconv8_job j = {.g = g, .B = &pk->B[gr], .xg = xb + gr * Cg * inS, .kofs = kofs, .zb = pk->zb + gr * Mg,
                      .acc = acc + (b * g->M + gr * Mg) * P, .col = colp, .tmp = tmpp, .P = P, .KK = KK, .Cg = Cg,
                      .Mg = Mg, .rows = (P + items - 1) / items, .pad = (uint8_t)zx};
      for (int i = 0; i < 64; i++) j.za[i] = zx;
      if (items > 1) pf(pctx, (P + j.rows - 1) / j.rows, qconv8_item, &j);
      else qconv8_item(&j, 0);
    }
  }
  qconv8_pack_free(mine);
  free(xu);
  free(kofs);
  free(cols);
  free(tmps);
  return st;
}

static void qconv_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                       int64_t *macs, int64_t *flops) {
  /* weight is input 1 (ConvInteger) or 3 (QLinearConv) */
  const alma_tensor *w = in[!strcmp(n->op_type, "QLinearConv") ? 3 : 1];
  int64_t per_out = w && w->rank >= 2 ? alma__numel(w->rank - 1, w->dims + 1) : 0;
  *macs = alma_tensor_numel(&out[0]) * per_out;
  *flops = 2 * *macs;
}

/* ---- ConvInteger ---- */

static alma_status convint_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                 int nout) {
  const alma_tensor *x = in[0], *w = in[1], *xzp = alma__nn_in(in, nin, 2), *wzp = alma__nn_in(in, nin, 3);
  if (!is_8bit(x->dtype) || !is_8bit(w->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtypes %s, %s", alma_dtype_name(x->dtype), alma_dtype_name(w->dtype));
  if ((xzp && xzp->dtype != x->dtype) || (wzp && wzp->dtype != w->dtype))
    return alma__op_error(n, ALMA_ERR_TYPE, "zero point dtype differs from its input's");
  qconv_geom g;
  ALMA_TRY(qconv_geom_make(n, x, w, &g));
  ALMA_TRY(q_param_check(n, xzp, "x_zero_point", 0));
  ALMA_TRY(q_param_check(n, wzp, "w_zero_point", g.M));
  int64_t dims[ALMA_MAX_RANK];
  qconv_out_shape(&g, dims);
  alma__set_shape(&out[0], ALMA_DTYPE_INT32, x->rank, dims);
  return ALMA_OK;
}

static alma_status convint_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                                alma_tensor *out, int nout) {
  const alma_tensor *x = in[0], *w = in[1], *xzp = alma__nn_in(in, nin, 2), *wzp = alma__nn_in(in, nin, 3);
  qconv_geom g;
  ALMA_TRY(qconv_geom_make(n, x, w, &g));
  return qconv_accumulate(ctx, n, &g, x, xzp ? q_get(xzp->data, xzp->dtype, 0) : 0, w, wzp, out[0].data);
}

const alma_op_def alma__op_ConvInteger = {.name = "ConvInteger", .domain = "", .versions = {10},
  .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
  .infer = convint_infer, .exec = convint_exec, .cost = qconv_cost};

/* ---- QLinearConv ---- */

static alma_status qlconv_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                int nout) {
  const alma_tensor *x = in[0], *xs = in[1], *xzp = in[2], *w = in[3], *ws = in[4], *wzp = in[5];
  const alma_tensor *ys = in[6], *yzp = in[7], *B = alma__nn_in(in, nin, 8);
  if (!x || !w || !xs || !ws || !ys)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "x, w and the three scales are required");
  if (!is_8bit(x->dtype) || !is_8bit(w->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtypes %s, %s", alma_dtype_name(x->dtype), alma_dtype_name(w->dtype));
  if (xs->dtype != ALMA_DTYPE_FLOAT32 || ws->dtype != ALMA_DTYPE_FLOAT32 || ys->dtype != ALMA_DTYPE_FLOAT32)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "scales must be float32");
  if ((xzp && xzp->dtype != x->dtype) || (wzp && wzp->dtype != w->dtype) || (yzp && !is_8bit(yzp->dtype)))
    return alma__op_error(n, ALMA_ERR_TYPE, "zero point dtypes must match their tensors (8-bit)");
  qconv_geom g;
  ALMA_TRY(qconv_geom_make(n, x, w, &g));
  ALMA_TRY(q_param_check(n, xs, "x_scale", 0));
  ALMA_TRY(q_param_check(n, xzp, "x_zero_point", 0));
  ALMA_TRY(q_param_check(n, ws, "w_scale", g.M));
  ALMA_TRY(q_param_check(n, wzp, "w_zero_point", g.M));
  ALMA_TRY(q_param_check(n, ys, "y_scale", 0));
  ALMA_TRY(q_param_check(n, yzp, "y_zero_point", 0));
  if (B && (B->dtype != ALMA_DTYPE_INT32 || B->rank != 1 || B->dims[0] != g.M))
    return alma__op_error(n, ALMA_ERR_SHAPE, "bias must be int32 of shape [%lld]", (long long)g.M);
  int64_t dims[ALMA_MAX_RANK];
  qconv_out_shape(&g, dims);
  alma__set_shape(&out[0], yzp ? yzp->dtype : x->dtype, x->rank, dims);
  return ALMA_OK;
}

static alma_status qlconv_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                               alma_tensor *out, int nout) {
  const alma_tensor *x = in[0], *xs = in[1], *xzp = in[2], *w = in[3], *ws = in[4], *wzp = in[5];
  const alma_tensor *ys = in[6], *yzp = in[7], *B = alma__nn_in(in, nin, 8);
  qconv_geom g;
  ALMA_TRY(qconv_geom_make(n, x, w, &g));
  int64_t total = g.N * g.M * g.P;
  int32_t *acc = alma__calloc((size_t)(total > 0 ? total : 1), sizeof *acc);
  if (!acc) return alma__op_error(n, ALMA_ERR_NOMEM, "accumulator");
  alma_status st = qconv_accumulate(ctx, n, &g, x, xzp ? q_get(xzp->data, xzp->dtype, 0) : 0, w, wzp, acc);
  if (st != ALMA_OK) {
    free(acc);
    return st;
  }
  alma_dtype yt = out[0].dtype;
  int64_t lo, hi;
  q_range(yt, &lo, &hi);
  float xsv = ((const float *)xs->data)[0], ysv = ((const float *)ys->data)[0];
  int64_t nws = alma_tensor_numel(ws);
  double yz = yzp ? q_get(yzp->data, yzp->dtype, 0) : 0;
  for (int64_t b = 0; b < g.N; b++)
    for (int64_t m = 0; m < g.M; m++) {
      /* real multiplier in float32, applied to the int32 accumulator in double (numpy's promotion) */
      float mult = xsv * ((const float *)ws->data)[nws == 1 ? 0 : m] / ysv;
      int32_t bias = B ? ((const int32_t *)B->data)[m] : 0;
      int64_t base = (b * g.M + m) * g.P;
      for (int64_t p = 0; p < g.P; p++) {
        int32_t a = (int32_t)((uint32_t)acc[base + p] + (uint32_t)bias);
        q_set(out[0].data, yt, base + p, q_round_sat((double)a * mult + yz, lo, hi));
      }
    }
  free(acc);
  return ALMA_OK;
}

const alma_op_def alma__op_QLinearConv = {.name = "QLinearConv", .domain = "", .versions = {10},
  .min_inputs = 8, .max_inputs = 9, .min_outputs = 1, .max_outputs = 1,
  .infer = qlconv_infer, .exec = qlconv_exec, .cost = qconv_cost};

/* ==== integer matrix product (MatMulInteger, QLinearMatMul) ================================== */

typedef struct {
  int64_t M, K, N;
  int a_vec, b_vec;                    /* 1-D operands (numpy matmul promotion) */
  int ra, rb, rbat;                    /* batch ranks of a, b and the broadcast batch */
  int64_t ad[ALMA_MAX_RANK], bd[ALMA_MAX_RANK], batd[ALMA_MAX_RANK];
  int64_t abatch, bbatch, batch;
  int rank;                            /* output */
  int64_t dims[ALMA_MAX_RANK];
} qmm_plan;

static alma_status qmm_plan_make(const alma_node *n, const alma_tensor *a, const alma_tensor *b, qmm_plan *p) {
  char s1[128], s2[128];
  memset(p, 0, sizeof *p);
  if (a->rank < 1 || b->rank < 1)
    return alma__op_error(n, ALMA_ERR_SHAPE, "matmul of scalars");
  p->a_vec = a->rank == 1;
  p->b_vec = b->rank == 1;
  p->M = p->a_vec ? 1 : a->dims[a->rank - 2];
  p->K = a->dims[a->rank - 1];
  int64_t kb = p->b_vec ? b->dims[0] : b->dims[b->rank - 2];
  p->N = p->b_vec ? 1 : b->dims[b->rank - 1];
  if (kb != p->K)
    return alma__op_error(n, ALMA_ERR_SHAPE, "inner dimensions differ: %s x %s",
                          alma__shape_str(a->rank, a->dims, s1, sizeof s1), alma__shape_str(b->rank, b->dims, s2, sizeof s2));
  p->ra = p->a_vec ? 0 : a->rank - 2;
  p->rb = p->b_vec ? 0 : b->rank - 2;
  memcpy(p->ad, a->dims, (size_t)p->ra * sizeof(int64_t));
  memcpy(p->bd, b->dims, (size_t)p->rb * sizeof(int64_t));
  if (alma__broadcast_shape(p->ra, p->ad, p->rb, p->bd, &p->rbat, p->batd) != ALMA_OK)
    return alma__op_error(n, ALMA_ERR_SHAPE, "batch dimensions of %s and %s do not broadcast",
                          alma__shape_str(a->rank, a->dims, s1, sizeof s1), alma__shape_str(b->rank, b->dims, s2, sizeof s2));
  p->abatch = alma__numel(p->ra, p->ad);
  p->bbatch = alma__numel(p->rb, p->bd);
  p->batch = alma__numel(p->rbat, p->batd);
  p->rank = p->rbat;
  memcpy(p->dims, p->batd, (size_t)p->rbat * sizeof(int64_t));
  if (!p->a_vec) p->dims[p->rank++] = p->M;
  if (!p->b_vec) p->dims[p->rank++] = p->N;
  return ALMA_OK;
}

/* Expands a per-row (side 0: one value per (a-batch, row m)) or per-column (side 1: per (b-batch,
 * column n)) parameter into `dst` [batch * len]. Accepted shapes: one element; 1-D of length len
 * (M rows or N columns, the 2-D form of the spec); or the operand's shape with the reduced axis
 * (K) set to 1, broadcastable ([D1, D2, M, 1] / [D1, D2, 1, N]). With dst NULL only validates. */
static alma_status qmm_param(const alma_node *n, const alma_tensor *t, const char *what, int vec, int rbat,
                             const int64_t *bdims, int64_t len, int side, double *dst) {
  if (!t) return ALMA_OK;
  int64_t k = alma_tensor_numel(t), batch = alma__numel(rbat, bdims);
  if (k == 1) {
    for (int64_t i = 0; dst && i < batch * len; i++) dst[i] = alma__get_f64(t->data, t->dtype, 0);
    return ALMA_OK;
  }
  if (!vec && t->rank == 1 && k == len) {
    for (int64_t i = 0; dst && i < batch * len; i++) dst[i] = alma__get_f64(t->data, t->dtype, i % len);
    return ALMA_OK;
  }
  /* full form: drop the K axis (which must be 1) and broadcast against [batch..., len] */
  int64_t tgt[ALMA_MAX_RANK + 1], red[ALMA_MAX_RANK];
  int rt = rbat + 1, rr = 0, kax = side == 0 ? t->rank - 1 : t->rank - 2;
  memcpy(tgt, bdims, (size_t)rbat * sizeof(int64_t));
  tgt[rbat] = len;
  int ok = !vec && t->rank >= 2 && t->rank <= rt + 1 && t->dims[kax] == 1;
  for (int i = 0; ok && i < t->rank; i++)
    if (i != kax) red[rr++] = t->dims[i];
  for (int i = 0; ok && i < rr; i++) {
    int64_t d = red[rr - 1 - i], want = tgt[rt - 1 - i];
    ok = d == 1 || d == want;
  }
  if (!ok) {
    char s[128];
    return alma__op_error(n, ALMA_ERR_SHAPE, "%s has shape %s: expected a scalar, %lld values, or the %s shape with %s", what,
                          alma__shape_str(t->rank, t->dims, s, sizeof s), (long long)len, side ? "b" : "a",
                          side ? "K set to 1 ([..., 1, N])" : "K set to 1 ([..., M, 1])");
  }
  for (int64_t i = 0; dst && i < batch * len; i++)
    dst[i] = alma__get_f64(t->data, t->dtype, alma__broadcast_index(i, rt, tgt, rr, red));
  return ALMA_OK;
}

/* A constant 2-D b kept by the node as (b - bzp) in float, packed (gemm_packed.h) in chunks of
 * QK_CHUNK rows of K, so that each chunk's float sums stay exact: made on the first run, within the
 * packed-weights budget, keyed by the data it was made from (ONNX Runtime's dynamic quantizer
 * leaves a 1024 x 8210 uint8 classifier in OCR models, which was converted and repacked per call). */
typedef struct qmm_pack {
  const void *b, *bzp;     /* what it was made from */
  int64_t K, N, bytes;
  int nchunks;
  alma__sgemm_packed *pk;  /* nchunks: rows [c * QK_CHUNK, ...) of K */
  int integer;             /* b packed for the integer kernel (ops/qgemm.h) in q instead, bzp per column in zb */
  alma__qgemm_packed q;
  int32_t *zb;
} qmm_pack;

typedef struct qmm_state {
  alma_prepared hdr;
  _Atomic(qmm_pack *) e;   /* written once (compare-and-swap), freed with the node */
} qmm_state;

static void qmm_pack_free(qmm_pack *e) {
  if (!e) return;
  for (int c = 0; e->pk && c < e->nchunks; c++) alma__sgemm_packed_free(&e->pk[c]);
  free(e->pk);
  alma__qgemm_free(&e->q);
  free(e->zb);
  free(e);
}

static void qmm_state_release(alma_prepared *hdr) {
  qmm_state *s = (qmm_state *)hdr;
  qmm_pack *e = atomic_load_explicit(&s->e, memory_order_acquire);
  if (e) alma__packed_gemm_unreserve(e->bytes);
  qmm_pack_free(e);
  free(s);
}

static alma_status qmm_state_build(const alma_node *n, alma_prepared **out) {
  qmm_state *s = calloc(1, sizeof *s);
  if (!s) return alma__op_error(n, ALMA_ERR_NOMEM, "out of memory");
  s->hdr.release = qmm_state_release;
  atomic_init(&s->e, NULL);
  *out = &s->hdr;
  return ALMA_OK;
}

static qmm_pack *qmm_pack_make(const alma_node *n, const qmm_plan *p, const alma_tensor *b, const alma_tensor *bzp) {
  int64_t K = p->K, N = p->N, nch = (K + QK_CHUNK - 1) / QK_CHUNK;
  if (alma__qgemm_available() && is_8bit(b->dtype)) {
    int64_t qbytes = alma__qgemm_bytes(K, N) + N * (int64_t)sizeof(int32_t);
    if (!alma__packed_gemm_reserve(qbytes)) return NULL;
    qmm_pack *e = calloc(1, sizeof *e);
    double *zd = alma__calloc((size_t)N + 1, sizeof *zd);
    int ok = e && zd && (e->zb = malloc((size_t)(N + 1) * sizeof *e->zb)) != NULL &&
             qmm_param(n, bzp, "b_zero_point", p->b_vec, p->rb, p->bd, N, 1, zd) == ALMA_OK &&
             alma__qgemm_pack(b->data, b->dtype == ALMA_DTYPE_UINT8, K, N, N, 1, &e->q) == ALMA_OK;
    for (int64_t j = 0; ok && j < N; j++) e->zb[j] = (int32_t)zd[j];
    free(zd);
    if (!ok) {
      alma__error_clear();
      qmm_pack_free(e);
      alma__packed_gemm_unreserve(qbytes);
      return NULL;
    }
    e->integer = 1;
    e->b = b->data, e->bzp = bzp ? bzp->data : NULL, e->K = K, e->N = N, e->bytes = qbytes;
    return e;
  }
  int64_t bytes = K * ((N + ALMA_SGEMM_PANEL - 1) / ALMA_SGEMM_PANEL * ALMA_SGEMM_PANEL) * 4;
  if (!alma__packed_gemm_reserve(bytes)) return NULL;
  qmm_pack *e = calloc(1, sizeof *e);
  float *bf = q_to_f32(b);
  double *zb = alma__calloc((size_t)N + 1, sizeof *zb);
  int ok = e && bf && zb && (e->pk = calloc((size_t)nch, sizeof *e->pk)) != NULL &&
           qmm_param(n, bzp, "b_zero_point", p->b_vec, p->rb, p->bd, N, 1, zb) == ALMA_OK;
  if (ok) {
    e->nchunks = (int)nch;
    for (int64_t k = 0; k < K; k++)
      for (int64_t j = 0; j < N; j++) bf[k * N + j] -= (float)zb[j];
    for (int64_t c = 0; ok && c < nch; c++) {
      int64_t k0 = c * QK_CHUNK, kc = K - k0 < QK_CHUNK ? K - k0 : QK_CHUNK;
      ok = alma__sgemm_pack(0, kc, N, bf + k0 * N, N, &e->pk[c]) == ALMA_OK;
    }
  }
  free(bf);
  free(zb);
  if (!ok) {
    alma__error_clear();
    qmm_pack_free(e);
    alma__packed_gemm_unreserve(bytes);
    return NULL;
  }
  e->b = b->data, e->bzp = bzp ? bzp->data : NULL, e->K = K, e->N = N, e->bytes = bytes;
  return e;
}

/* The node's packed (b - bzp), or NULL: b not a constant 2-D matrix (or bzp not constant), the
 * packed path off or over its budget. */
static const qmm_pack *qmm_packed_b(alma_exec_ctx *ctx, const alma_node *n, const qmm_plan *p, const alma_tensor *b,
                                    int bi, const alma_tensor *bzp, int zi) {
  if (!alma__packed_gemm_enabled() || p->b_vec || p->bbatch != 1 || p->K < 1 || p->N < 1 ||
      !alma__exec_input_is_const(ctx, n, bi, b) || (bzp && !alma__exec_input_is_const(ctx, n, zi, bzp)))
    return NULL;
  const alma_prepared *pp;
  if (alma__node_prepared(n, qmm_state_build, &pp) != ALMA_OK) {
    alma__error_clear();
    return NULL;
  }
  qmm_state *s = (qmm_state *)pp;
  qmm_pack *e = atomic_load_explicit(&s->e, memory_order_acquire);
  if (!e) {
    qmm_pack *mine = qmm_pack_make(n, p, b, bzp);
    if (!mine) return NULL;
    if (atomic_compare_exchange_strong_explicit(&s->e, &e, mine, memory_order_acq_rel, memory_order_acquire)) {
      e = mine;
    } else { /* another thread packed first: e is its copy */
      alma__packed_gemm_unreserve(mine->bytes);
      qmm_pack_free(mine);
    }
  }
  return e->b == b->data && e->bzp == (bzp ? bzp->data : NULL) && e->K == p->K && e->N == p->N ? e : NULL;
}

/* qmm_accumulate on the integer kernel: every batch's rows of a (int8 ones flipped to uint8, their
 * zero points moved by 128) against the node's packed b, its panels split over the threads. */
typedef struct qmm8_job {
  const alma__qgemm_packed *B;
  const uint8_t *A;
  const int32_t *za, *zb;
  int32_t *acc;
  int64_t rows, per;
} qmm8_job;

static void qmm8_item(void *arg, int64_t item) {
  qmm8_job *j = arg;
  int64_t p0 = item * j->per, p1 = p0 + j->per < j->B->panels ? p0 + j->per : j->B->panels;
  alma__qgemm_run(j->rows, j->A, j->B->K, j->za, j->B, j->zb, p0, p1, j->acc, j->B->N);
}

static alma_status qmm_accumulate_q8(alma_exec_ctx *ctx, const alma_node *n, const qmm_plan *p, const alma_tensor *a,
                                     const alma_tensor *azp, const qmm_pack *pk, int32_t *acc) {
  int64_t rows = p->abatch * p->M, K = p->K;
  int flip = a->dtype == ALMA_DTYPE_INT8;
  uint8_t *au = flip ? malloc((size_t)(rows * K + 1)) : NULL;
  double *zd = alma__calloc((size_t)(rows + 1), sizeof *zd);
  int32_t *za = malloc((size_t)(rows + 1) * sizeof *za);
  alma_status st = zd && za && (!flip || au) ? qmm_param(n, azp, "a_zero_point", p->a_vec, p->ra, p->ad, p->M, 0, zd)
                                             : alma__op_error(n, ALMA_ERR_NOMEM, "integer matmul buffers");
  if (st == ALMA_OK) {
    for (int64_t r = 0; r < rows; r++) za[r] = (int32_t)zd[r] + (flip ? 128 : 0);
    if (flip)
      for (int64_t i = 0; i < rows * K; i++) au[i] = (uint8_t)(((const uint8_t *)a->data)[i] ^ 0x80);
    alma_exec_parfor pf;
    void *pctx;
    int threads = alma__exec_parfor(ctx, &pf, &pctx);
    int64_t np = pk->q.panels, items = pf && np >= 4 ? (2 * threads < np / 2 ? 2 * threads : np / 2) : 1;
    qmm8_job j = {.B = &pk->q, .A = flip ? au : a->data, .za = za, .zb = pk->zb, .acc = acc, .rows = rows,
                  .per = (np + items - 1) / items};
    if (items > 1) pf(pctx, (np + j.per - 1) / j.per, qmm8_item, &j);
    else qmm8_item(&j, 0);
  }
  free(au);
  free(zd);
  free(za);
  return st;
}

/* acc[batch, M, N] (int32, wrapping) of (a - azp_row) x (b - bzp_col), on the float GEMM in exact
 * chunks (igemm_exact), or on the node's packed b (qmm_packed_b: every batch's rows at once). */
static alma_status qmm_accumulate(alma_exec_ctx *ctx, const alma_node *n, const qmm_plan *p, const alma_tensor *a,
                                  const alma_tensor *azp, const alma_tensor *b, int bi, const alma_tensor *bzp, int zi,
                                  int32_t *acc) {
  int64_t M = p->M, K = p->K, N = p->N;
  const qmm_pack *pk = qmm_packed_b(ctx, n, p, b, bi, bzp, zi);
  if (pk && pk->integer && is_8bit(a->dtype)) return qmm_accumulate_q8(ctx, n, p, a, azp, pk, acc);
  if (pk && !pk->integer) {
    int64_t rows = p->abatch * M; /* b has no batch: the output's batch is a's */
    float *A = q_to_f32(a), *tmp = alma__malloc((size_t)(rows * N > 0 ? rows * N : 1) * sizeof *tmp);
    double *za = alma__calloc((size_t)(rows + 1), sizeof *za);
    alma_status st = A && tmp && za ? qmm_param(n, azp, "a_zero_point", p->a_vec, p->ra, p->ad, M, 0, za)
                                    : alma__op_error(n, ALMA_ERR_NOMEM, "integer matmul buffers");
    for (int64_t r = 0; st == ALMA_OK && r < rows; r++)
      for (int64_t k = 0; k < K; k++) A[r * K + k] -= (float)za[r];
    for (int c = 0; st == ALMA_OK && c < pk->nchunks; c++) {
      alma__gemm_packed_run(ctx, rows, 1.0f, A + (int64_t)c * QK_CHUNK, K, &pk->pk[c], 0.0f, tmp, N, NULL, NULL);
      uint32_t *o = (uint32_t *)acc;
      if (c == 0)
        for (int64_t i = 0; i < rows * N; i++) o[i] = (uint32_t)(int32_t)tmp[i];
      else
        for (int64_t i = 0; i < rows * N; i++) o[i] += (uint32_t)(int32_t)tmp[i];
    }
    free(A);
    free(tmp);
    free(za);
    return st;
  }
  float *A = q_to_f32(a), *Bm = q_to_f32(b);
  double *za = alma__calloc((size_t)(p->abatch * M + 1), sizeof *za);
  double *zb = alma__calloc((size_t)(p->bbatch * N + 1), sizeof *zb);
  float *tmp = alma__malloc((size_t)(M * N > 0 ? M * N : 1) * sizeof *tmp);
  alma_status st = ALMA_OK;
  if (!A || !Bm || !za || !zb || !tmp) {
    st = alma__op_error(n, ALMA_ERR_NOMEM, "integer matmul buffers");
    goto done;
  }
  if ((st = qmm_param(n, azp, "a_zero_point", p->a_vec, p->ra, p->ad, M, 0, za)) != ALMA_OK) goto done;
  if ((st = qmm_param(n, bzp, "b_zero_point", p->b_vec, p->rb, p->bd, N, 1, zb)) != ALMA_OK) goto done;
  for (int64_t r = 0; r < p->abatch * M; r++)
    for (int64_t k = 0; k < K; k++) A[r * K + k] -= (float)za[r];
  for (int64_t bb = 0; bb < p->bbatch; bb++)
    for (int64_t k = 0; k < K; k++)
      for (int64_t j = 0; j < N; j++) Bm[(bb * K + k) * N + j] -= (float)zb[bb * N + j];
  for (int64_t o = 0; o < p->batch && st == ALMA_OK; o++) {
    int64_t ia = alma__broadcast_index(o, p->rbat, p->batd, p->ra, p->ad);
    int64_t ib = alma__broadcast_index(o, p->rbat, p->batd, p->rb, p->bd);
    st = igemm_exact(M, N, K, A + ia * M * K, K, Bm + ib * K * N, N, acc + o * M * N, N, tmp);
  }
done:
  free(A);
  free(Bm);
  free(za);
  free(zb);
  free(tmp);
  return st;
}

static void qmm_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                     int64_t *macs, int64_t *flops) {
  const alma_tensor *a = in[0];
  int64_t K = a && a->rank >= 1 ? a->dims[a->rank - 1] : 0;
  *macs = alma_tensor_numel(&out[0]) * K;
  *flops = 2 * *macs;
}

/* ---- MatMulInteger ---- */

static alma_status mmint_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  const alma_tensor *a = in[0], *b = in[1], *azp = alma__nn_in(in, nin, 2), *bzp = alma__nn_in(in, nin, 3);
  if (!is_8bit(a->dtype) || !is_8bit(b->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtypes %s, %s", alma_dtype_name(a->dtype), alma_dtype_name(b->dtype));
  if ((azp && azp->dtype != a->dtype) || (bzp && bzp->dtype != b->dtype))
    return alma__op_error(n, ALMA_ERR_TYPE, "zero point dtype differs from its input's");
  qmm_plan p;
  ALMA_TRY(qmm_plan_make(n, a, b, &p));
  ALMA_TRY(qmm_param(n, azp, "a_zero_point", p.a_vec, p.ra, p.ad, p.M, 0, NULL));
  ALMA_TRY(qmm_param(n, bzp, "b_zero_point", p.b_vec, p.rb, p.bd, p.N, 1, NULL));
  alma__set_shape(&out[0], ALMA_DTYPE_INT32, p.rank, p.dims);
  return ALMA_OK;
}

static alma_status mmint_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                              alma_tensor *out, int nout) {
  qmm_plan p;
  ALMA_TRY(qmm_plan_make(n, in[0], in[1], &p));
  return qmm_accumulate(ctx, n, &p, in[0], alma__nn_in(in, nin, 2), in[1], 1, alma__nn_in(in, nin, 3), 3, out[0].data);
}

const alma_op_def alma__op_MatMulInteger = {.name = "MatMulInteger", .domain = "", .versions = {10},
  .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
  .infer = mmint_infer, .exec = mmint_exec, .cost = qmm_cost};

/* ---- QLinearMatMul ---- */

static alma_status qlmm_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  const alma_tensor *a = in[0], *as = in[1], *azp = in[2], *b = in[3], *bs = in[4], *bzp = in[5];
  const alma_tensor *ys = in[6], *yzp = in[7];
  if (!a || !b || !as || !bs || !ys) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "a, b and the three scales are required");
  if (!is_8bit(a->dtype) || !is_8bit(b->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtypes %s, %s", alma_dtype_name(a->dtype), alma_dtype_name(b->dtype));
  int half = n->since_version >= 21;
  if (!is_scale_dtype(as->dtype, half) || bs->dtype != as->dtype || ys->dtype != as->dtype)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "scale dtypes %s, %s, %s (one float type%s)", alma_dtype_name(as->dtype),
                          alma_dtype_name(bs->dtype), alma_dtype_name(ys->dtype), half ? "" : ": float32 before opset 21");
  if ((azp && azp->dtype != a->dtype) || (bzp && bzp->dtype != b->dtype) || (yzp && !is_8bit(yzp->dtype)))
    return alma__op_error(n, ALMA_ERR_TYPE, "zero point dtypes must match their tensors (8-bit)");
  qmm_plan p;
  ALMA_TRY(qmm_plan_make(n, a, b, &p));
  ALMA_TRY(qmm_param(n, as, "a_scale", p.a_vec, p.ra, p.ad, p.M, 0, NULL));
  ALMA_TRY(qmm_param(n, azp, "a_zero_point", p.a_vec, p.ra, p.ad, p.M, 0, NULL));
  ALMA_TRY(qmm_param(n, bs, "b_scale", p.b_vec, p.rb, p.bd, p.N, 1, NULL));
  ALMA_TRY(qmm_param(n, bzp, "b_zero_point", p.b_vec, p.rb, p.bd, p.N, 1, NULL));
  /* the output's parameters are per row of y, like a's */
  ALMA_TRY(qmm_param(n, ys, "y_scale", p.a_vec, p.rbat, p.batd, p.M, 0, NULL));
  ALMA_TRY(qmm_param(n, yzp, "y_zero_point", p.a_vec, p.rbat, p.batd, p.M, 0, NULL));
  alma__set_shape(&out[0], yzp ? yzp->dtype : a->dtype, p.rank, p.dims);
  return ALMA_OK;
}

static alma_status qlmm_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  const alma_tensor *a = in[0], *as = in[1], *azp = in[2], *b = in[3], *bs = in[4], *bzp = in[5];
  const alma_tensor *ys = in[6], *yzp = in[7];
  qmm_plan p;
  ALMA_TRY(qmm_plan_make(n, a, b, &p));
  int64_t M = p.M, N = p.N, total = p.batch * M * N;
  int32_t *acc = alma__calloc((size_t)(total > 0 ? total : 1), sizeof *acc);
  double *sa = alma__calloc((size_t)(p.abatch * M + 1), sizeof *sa);
  double *sb = alma__calloc((size_t)(p.bbatch * N + 1), sizeof *sb);
  double *sy = alma__calloc((size_t)(p.batch * M + 1), sizeof *sy);
  double *zy = alma__calloc((size_t)(p.batch * M + 1), sizeof *zy);
  alma_status st = ALMA_OK;
  if (!acc || !sa || !sb || !sy || !zy) {
    st = alma__op_error(n, ALMA_ERR_NOMEM, "QLinearMatMul buffers");
    goto done;
  }
  if ((st = qmm_param(n, as, "a_scale", p.a_vec, p.ra, p.ad, M, 0, sa)) != ALMA_OK) goto done;
  if ((st = qmm_param(n, bs, "b_scale", p.b_vec, p.rb, p.bd, N, 1, sb)) != ALMA_OK) goto done;
  if ((st = qmm_param(n, ys, "y_scale", p.a_vec, p.rbat, p.batd, M, 0, sy)) != ALMA_OK) goto done;
  if ((st = qmm_param(n, yzp, "y_zero_point", p.a_vec, p.rbat, p.batd, M, 0, zy)) != ALMA_OK) goto done;
  if ((st = qmm_accumulate(ctx, n, &p, a, azp, b, 3, bzp, 5, acc)) != ALMA_OK) goto done;
  alma_dtype yt = out[0].dtype, sdt = as->dtype;
  int64_t lo, hi;
  q_range(yt, &lo, &hi);
  for (int64_t o = 0; o < p.batch; o++) {
    int64_t ia = alma__broadcast_index(o, p.rbat, p.batd, p.ra, p.ad);
    int64_t ib = alma__broadcast_index(o, p.rbat, p.batd, p.rb, p.bd);
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        /* multiplier a_scale * b_scale / y_scale in the scales' own precision */
        float mult = round_to(sdt, round_to(sdt, (float)sa[ia * M + i] * (float)sb[ib * N + j]) / (float)sy[o * M + i]);
        int64_t e = (o * M + i) * N + j;
        q_set(out[0].data, yt, e, q_round_sat((double)acc[e] * mult + zy[o * M + i], lo, hi));
      }
  }
done:
  free(acc);
  free(sa);
  free(sb);
  free(sy);
  free(zy);
  return st;
}

const alma_op_def alma__op_QLinearMatMul = {.name = "QLinearMatMul", .domain = "", .versions = {10, 21},
  .min_inputs = 8, .max_inputs = 8, .min_outputs = 1, .max_outputs = 1,
  .infer = qlmm_infer, .exec = qlmm_exec, .cost = qmm_cost};
