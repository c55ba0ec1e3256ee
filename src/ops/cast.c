/* Cast, CastLike, Identity and Dropout: ops that convert or pass data through. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ops/ew.h"
#include "ops/op_args.h"

static int holdable(alma_dtype t) { return t != ALMA_DTYPE_STRING && alma_dtype_size(t) > 0; }

/* ---- Cast -----------------------------------------------------------------------------------
 * Every pair of alma's dtypes. Values pass through one of two intermediates, chunk by chunk:
 * double for float sources (exact for all of them, float8/float4 included) and int64 for
 * integer/bool sources (uint64 kept as its bit pattern; int4/int2 sign-extended), so each
 * conversion rounds once:
 *  - to float16 and bfloat16 from double: round to odd at float32 precision first, which makes
 *    the final round-to-nearest-even exact (no double rounding);
 *  - to float8 and float4e2m1: round to nearest even from double, out-of-range values per ONNX's
 *    table (saturate to the largest finite value by default; with saturate=0 NaN, or inf for
 *    e5m2); to float8e8m0 ONNX's own algorithm on float32 with `round_mode` (core/lowbit.c);
 *  - float to integer truncates toward zero (C and numpy semantics); values outside the target's
 *    range saturate and NaN gives 0 (ONNX leaves these undefined; this keeps C defined). int4,
 *    uint4, int2 and uint2 instead keep the low bits of the truncated value, as ONNX's reference
 *    (ml_dtypes) and its test data do (8.0 to int4 is -8);
 *  - integer to integer wraps (two's complement), anything to bool is "!= 0" (NaN is true). */
static float round_to_odd_f32(double d) {
  float f = (float)d;
  if (isfinite(f) && (double)f != d) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if (fabs((double)f) > fabs(d)) u--; /* step toward zero: f was rounded up in magnitude */
    u |= 1;
    memcpy(&f, &u, 4);
  }
  return f;
}
static uint16_t d2h(double d) { return alma__f32_to_f16(round_to_odd_f32(d)); }
/* bfloat16 rounds to nearest even, as ONNX's reference and backend data (since 1.18; earlier data
 * truncated), ONNX Runtime and PyTorch do. */
static uint16_t d2bf(double d) { return alma__f32_to_bf16(round_to_odd_f32(d)); }

/* How floats become float8/float8e8m0 (Cast's saturate and round_mode attributes). */
typedef struct {
  int saturate, round_mode;
} cast_mode;

/* Reads Cast's/CastLike's saturate (19+) and round_mode (24+). */
static alma_status cast_mode_of(const alma_node *n, cast_mode *m) {
  m->saturate = 1;
  m->round_mode = ALMA_E8M0_UP;
  if (n->since_version >= 19) {
    int64_t s = alma__attr_i(n, "saturate", 1);
    if (s != 0 && s != 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "saturate must be 0 or 1, got %lld", (long long)s);
    m->saturate = (int)s;
  }
  const alma_attr *rm = n->since_version >= 24 ? alma__node_attr(n, "round_mode") : NULL;
  if (rm) {
    if (rm->type != ALMA_ATTR_STRING || !rm->s)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "round_mode must be a string");
    if (!strcmp(rm->s, "up")) m->round_mode = ALMA_E8M0_UP;
    else if (!strcmp(rm->s, "down")) m->round_mode = ALMA_E8M0_DOWN;
    else if (!strcmp(rm->s, "nearest")) m->round_mode = ALMA_E8M0_NEAREST;
    else
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "round_mode '%s' (expected up, down or nearest)", rm->s);
  }
  return ALMA_OK;
}

/* The first opset whose Cast/CastLike lists type t. */
static int cast_type_since(alma_dtype t) {
  switch (t) {
    case ALMA_DTYPE_FLOAT8E4M3FN: case ALMA_DTYPE_FLOAT8E4M3FNUZ: case ALMA_DTYPE_FLOAT8E5M2:
    case ALMA_DTYPE_FLOAT8E5M2FNUZ:
      return 19;
    case ALMA_DTYPE_INT4: case ALMA_DTYPE_UINT4: return 21;
    case ALMA_DTYPE_FLOAT4E2M1: return 23;
    case ALMA_DTYPE_FLOAT8E8M0: return 24;
    case ALMA_DTYPE_INT2: case ALMA_DTYPE_UINT2: return 25;
    case ALMA_DTYPE_STRING: return 9;
    default: return 1;
  }
}

static alma_status cast_infer(INFER_ARGS) {
  const alma_attr *a = alma__node_attr(n, "to");
  if (!a || a->type != ALMA_ATTR_INT) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute 'to' (int) is required");
  alma_dtype to = (alma_dtype)a->i;
  /* strings: to and from the non-low-bit numeric types and bool (string_cast) */
  int str = to == ALMA_DTYPE_STRING || in[0]->dtype == ALMA_DTYPE_STRING;
  if (str && (alma__dtype_is_lowbit(to) || alma__dtype_is_lowbit(in[0]->dtype)))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "cast between %s and %s", alma_dtype_name(in[0]->dtype),
                          alma_dtype_name(to));
  if (a->i <= 0 || a->i > ALMA_DTYPE_INT2 || (!holdable(to) && to != ALMA_DTYPE_STRING)) {
    const char *nm = alma__onnx_type_name(a->i);
    if (strcmp(nm, "unknown")) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "cast to %s", nm);
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute to=%lld is not a tensor element type", (long long)a->i);
  }
  if (!holdable(in[0]->dtype) && in[0]->dtype != ALMA_DTYPE_STRING)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "cast from %s", alma_dtype_name(in[0]->dtype));
  if (n->since_version < cast_type_since(to) || n->since_version < cast_type_since(in[0]->dtype))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "cast from %s to %s: opset %d's Cast does not have %s",
                          alma_dtype_name(in[0]->dtype), alma_dtype_name(to), n->since_version,
                          alma_dtype_name(n->since_version < cast_type_since(to) ? to : in[0]->dtype));
  cast_mode m;
  ALMA_TRY(cast_mode_of(n, &m));
  alma__set_shape(&out[0], to, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

#define CAST_CHUNK 1024

/* src[off..off+m) into the intermediate */
static void read_f64(const void *src, alma_dtype t, int64_t off, int64_t m, double *buf) {
  switch (t) {
    case ALMA_DTYPE_FLOAT32: for (int64_t j = 0; j < m; j++) buf[j] = ((const float *)src)[off + j]; break;
    case ALMA_DTYPE_FLOAT64: memcpy(buf, (const double *)src + off, (size_t)m * sizeof(double)); break;
    case ALMA_DTYPE_FLOAT16: for (int64_t j = 0; j < m; j++) buf[j] = alma__f16_to_f32(((const uint16_t *)src)[off + j]); break;
    case ALMA_DTYPE_BFLOAT16: for (int64_t j = 0; j < m; j++) buf[j] = alma__bf16_to_f32(((const uint16_t *)src)[off + j]); break;
    default: { /* float8, float4e2m1, float8e8m0: a table of the 256 codes' values */
      double tab[256];
      for (int c = 0; c < 256; c++) tab[c] = alma__lowfloat_decode(t, (uint8_t)c);
      for (int64_t j = 0; j < m; j++) buf[j] = tab[((const uint8_t *)src)[off + j]];
      break;
    }
  }
}
static void read_i64(const void *src, alma_dtype t, int64_t off, int64_t m, int64_t *buf) {
  switch (t) {
#define R(D, T, CT, LD, ST) \
  case D: for (int64_t j = 0; j < m; j++) buf[j] = (int64_t)((const T *)src)[off + j]; break;
    ALMA__EW_SINT_TYPES(R)
    ALMA__EW_UINT_TYPES(R)
#undef R
    case ALMA_DTYPE_INT4: case ALMA_DTYPE_INT2: for (int64_t j = 0; j < m; j++) buf[j] = ((const int8_t *)src)[off + j]; break;
    case ALMA_DTYPE_UINT4: case ALMA_DTYPE_UINT2: for (int64_t j = 0; j < m; j++) buf[j] = ((const uint8_t *)src)[off + j]; break;
    default: for (int64_t j = 0; j < m; j++) buf[j] = ((const uint8_t *)src)[off + j] != 0; break; /* bool */
  }
}

#define SAT(T, lo, hi, d) ((d) != (d) ? (T)0 : (d) <= (double)(lo) ? (T)(lo) : (d) >= (double)(hi) ? (T)(hi) : (T)(d))

/* Truncated toward zero, then wrapped into int4/uint4/int2/uint2 (NaN, inf: 0). Beyond 2^63 the
 * value's low bits are zeros anyway. */
static uint8_t lowint_from_f64(alma_dtype t, double d) {
  d = trunc(d);
  if (!(fabs(d) < 0x1p63)) return 0;
  return alma__lowint_wrap(t, (int64_t)d);
}

static void write_from_f64(void *dst, alma_dtype t, int64_t off, int64_t m, const double *buf, const cast_mode *cm) {
  uint8_t *d8 = (uint8_t *)dst + off;
  if (alma__dtype_is_lowint(t)) {
    for (int64_t j = 0; j < m; j++) d8[j] = lowint_from_f64(t, buf[j]);
    return;
  }
  if (t == ALMA_DTYPE_FLOAT8E8M0) { /* ONNX's algorithm works on float32 */
    for (int64_t j = 0; j < m; j++) d8[j] = alma__e8m0_encode((float)buf[j], cm->saturate, cm->round_mode);
    return;
  }
  if (alma__dtype_is_lowfloat(t)) {
    for (int64_t j = 0; j < m; j++) d8[j] = alma__lowfloat_encode(t, buf[j], cm->saturate);
    return;
  }
  switch (t) {
    case ALMA_DTYPE_FLOAT32: for (int64_t j = 0; j < m; j++) ((float *)dst)[off + j] = (float)buf[j]; break;
    case ALMA_DTYPE_FLOAT64: memcpy((double *)dst + off, buf, (size_t)m * sizeof(double)); break;
    case ALMA_DTYPE_FLOAT16: for (int64_t j = 0; j < m; j++) ((uint16_t *)dst)[off + j] = d2h(buf[j]); break;
    case ALMA_DTYPE_BFLOAT16: for (int64_t j = 0; j < m; j++) ((uint16_t *)dst)[off + j] = d2bf(buf[j]); break;
    case ALMA_DTYPE_BOOL: for (int64_t j = 0; j < m; j++) ((uint8_t *)dst)[off + j] = buf[j] != 0; break;
#define W(D, T, lo, hi) \
  case D: for (int64_t j = 0; j < m; j++) ((T *)dst)[off + j] = SAT(T, lo, hi, buf[j]); break;
    W(ALMA_DTYPE_INT8, int8_t, INT8_MIN, INT8_MAX)
    W(ALMA_DTYPE_INT16, int16_t, INT16_MIN, INT16_MAX)
    W(ALMA_DTYPE_INT32, int32_t, INT32_MIN, INT32_MAX)
    W(ALMA_DTYPE_INT64, int64_t, INT64_MIN, INT64_MAX)
    W(ALMA_DTYPE_UINT8, uint8_t, 0, UINT8_MAX)
    W(ALMA_DTYPE_UINT16, uint16_t, 0, UINT16_MAX)
    W(ALMA_DTYPE_UINT32, uint32_t, 0, UINT32_MAX)
    W(ALMA_DTYPE_UINT64, uint64_t, 0, UINT64_MAX)
#undef W
    default: break;
  }
}

static void write_from_i64(void *dst, alma_dtype t, int64_t off, int64_t m, const int64_t *buf, int is_u64,
                           const cast_mode *cm) {
  uint8_t *d8 = (uint8_t *)dst + off;
  if (alma__dtype_is_lowint(t)) { /* wraps, as integer to integer does */
    for (int64_t j = 0; j < m; j++) d8[j] = alma__lowint_wrap(t, buf[j]);
    return;
  }
  if (alma__dtype_is_lowfloat(t)) { /* every int64 beyond 2^53 is far past these types' range */
    for (int64_t j = 0; j < m; j++) {
      double v = is_u64 ? (double)(uint64_t)buf[j] : (double)buf[j];
      d8[j] = t == ALMA_DTYPE_FLOAT8E8M0 ? alma__e8m0_encode((float)v, cm->saturate, cm->round_mode)
                                         : alma__lowfloat_encode(t, v, cm->saturate);
    }
    return;
  }
  switch (t) {
#define FW(D, T, conv)                                                                    \
  case D:                                                                                 \
    if (is_u64) for (int64_t j = 0; j < m; j++) ((T *)dst)[off + j] = conv((uint64_t)buf[j]); \
    else for (int64_t j = 0; j < m; j++) ((T *)dst)[off + j] = conv(buf[j]);             \
    break;
#define TO_F32(v) ((float)(v))
#define TO_F64(v) ((double)(v))
#define TO_F16(v) d2h((double)(v))
#define TO_BF16(v) d2bf((double)(v))
    FW(ALMA_DTYPE_FLOAT32, float, TO_F32)
    FW(ALMA_DTYPE_FLOAT64, double, TO_F64)
    FW(ALMA_DTYPE_FLOAT16, uint16_t, TO_F16)
    FW(ALMA_DTYPE_BFLOAT16, uint16_t, TO_BF16)
#undef FW
    case ALMA_DTYPE_BOOL: for (int64_t j = 0; j < m; j++) ((uint8_t *)dst)[off + j] = buf[j] != 0; break;
#define IW(D, T, CT, LD, ST) \
  case D: for (int64_t j = 0; j < m; j++) ((T *)dst)[off + j] = (T)buf[j]; break;
    ALMA__EW_SINT_TYPES(IW)
    ALMA__EW_UINT_TYPES(IW)
#undef IW
    default: break;
  }
}

static void do_cast(const alma_tensor *x, alma_tensor *y, const cast_mode *cm) {
  int64_t cnt = alma_tensor_numel(x);
  if (x->dtype == y->dtype) {
    memcpy(y->data, x->data, (size_t)cnt * alma_dtype_size(x->dtype));
    return;
  }
  if (x->dtype == ALMA_DTYPE_FLOAT32 && y->dtype == ALMA_DTYPE_FLOAT16) { /* common in precision passes */
    const float *xs = (const float *)x->data;
    uint16_t *ys = (uint16_t *)y->data;
    for (int64_t i = 0; i < cnt; i++) ys[i] = alma__f32_to_f16(xs[i]);
    return;
  }
  if (y->dtype == ALMA_DTYPE_FLOAT32) { /* masks and indices into float (one-hot, attention masks): one pass */
    float *ys = (float *)y->data;
    switch (x->dtype) {
      case ALMA_DTYPE_BOOL:
      case ALMA_DTYPE_UINT8: {
        const uint8_t *xs = x->data;
        int64_t i = 0;
#if defined(__SSE2__)
        /* 16 bytes widened to four vectors of int32 (bool: min(x, 1)) */
        const __m128i z = _mm_setzero_si128(), one = _mm_set1_epi8(1);
        for (; i + 16 <= cnt; i += 16) {
          __m128i v = _mm_loadu_si128((const __m128i *)(xs + i));
          if (x->dtype == ALMA_DTYPE_BOOL) v = _mm_min_epu8(v, one);
          __m128i lo = _mm_unpacklo_epi8(v, z), hi = _mm_unpackhi_epi8(v, z);
          _mm_storeu_ps(ys + i, _mm_cvtepi32_ps(_mm_unpacklo_epi16(lo, z)));
          _mm_storeu_ps(ys + i + 4, _mm_cvtepi32_ps(_mm_unpackhi_epi16(lo, z)));
          _mm_storeu_ps(ys + i + 8, _mm_cvtepi32_ps(_mm_unpacklo_epi16(hi, z)));
          _mm_storeu_ps(ys + i + 12, _mm_cvtepi32_ps(_mm_unpackhi_epi16(hi, z)));
        }
#endif
        if (x->dtype == ALMA_DTYPE_BOOL)
          for (; i < cnt; i++) ys[i] = xs[i] != 0;
        else
          for (; i < cnt; i++) ys[i] = xs[i];
        return;
      }
      case ALMA_DTYPE_INT8: for (int64_t i = 0; i < cnt; i++) ys[i] = ((const int8_t *)x->data)[i]; return;
      case ALMA_DTYPE_INT32: for (int64_t i = 0; i < cnt; i++) ys[i] = (float)((const int32_t *)x->data)[i]; return;
      default: break;
    }
  }
  union {
    double d[CAST_CHUNK];
    int64_t i[CAST_CHUNK];
  } buf;
  int from_float = alma__dtype_is_float(x->dtype) || alma__dtype_is_lowfloat(x->dtype);
  for (int64_t off = 0; off < cnt; off += CAST_CHUNK) {
    int64_t m = cnt - off < CAST_CHUNK ? cnt - off : CAST_CHUNK;
    if (from_float) {
      read_f64(x->data, x->dtype, off, m, buf.d);
      write_from_f64(y->data, y->dtype, off, m, buf.d, cm);
    } else {
      read_i64(x->data, x->dtype, off, m, buf.i);
      write_from_i64(y->data, y->dtype, off, m, buf.i, x->dtype == ALMA_DTYPE_UINT64, cm);
    }
  }
}

/* Casts to and from strings, as ONNX Runtime writes and reads them (the spec fixes neither format
 * exactly): floats "%.8g" with "INF", "-INF" and "NaN" (onnx.reference instead writes numpy's
 * shortest repr, "1.0", "inf"), integers in decimal, bool "1"/"0". Reading: floats by strtod (so
 * "+INF", "inf", "NaN" and "1e-5" in any case), integers by strtoll or, for "100.5", the float
 * truncated (clamped to the type), bool as a number != 0. A string that is no number is an error
 * naming the element (the spec leaves it undefined). */
static alma_status string_cast(const alma_node *n, const alma_tensor *x, alma_tensor *y) {
  int64_t total = alma_tensor_numel(x);
  if (x->dtype == ALMA_DTYPE_STRING && y->dtype == ALMA_DTYPE_STRING) {
    if (total) memcpy(y->data, x->data, (size_t)total * sizeof(const alma__str *));
    return ALMA_OK;
  }
  if (y->dtype == ALMA_DTYPE_STRING) {
    char buf[64];
    for (int64_t i = 0; i < total; i++) {
      int len;
      if (alma__dtype_is_float(x->dtype)) {
        double v = alma__get_f64(x->data, x->dtype, i);
        len = isnan(v) ? snprintf(buf, sizeof buf, "NaN")
              : isinf(v) ? snprintf(buf, sizeof buf, v > 0 ? "INF" : "-INF")
                         : snprintf(buf, sizeof buf, "%.8g", v);
      } else if (x->dtype == ALMA_DTYPE_UINT64) {
        len = snprintf(buf, sizeof buf, "%llu", (unsigned long long)((const uint64_t *)x->data)[i]);
      } else {
        len = snprintf(buf, sizeof buf, "%lld", (long long)alma__get_i64(x->data, x->dtype, i));
      }
      ALMA_TRY(alma__str_make(buf, (size_t)len, &alma__strs(y)[i]));
    }
    return ALMA_OK;
  }
  for (int64_t i = 0; i < total; i++) {
    const char *s = alma__str_ptr(alma__strs(x)[i]);
    char *end;
    errno = 0;
    if (!alma__dtype_is_float(y->dtype) && y->dtype != ALMA_DTYPE_BOOL) {
      long long v = strtoll(s, &end, 10);
      if (end != s && !*end && errno != ERANGE) {
        if (y->dtype == ALMA_DTYPE_INT64) ((int64_t *)y->data)[i] = v; /* exact beyond 2^53 */
        else if (y->dtype == ALMA_DTYPE_UINT64) ((uint64_t *)y->data)[i] = v < 0 ? 0 : (uint64_t)v;
        else alma__set_f64(y->data, y->dtype, i, (double)v); /* clamped to the narrower type */
        continue;
      }
    }
    double v = strtod(s, &end);
    while (end != s && isspace((unsigned char)*end)) end++;
    if (end == s || *end)
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "element %lld, \"%.60s\", is not a number to cast to %s",
                            (long long)i, s, alma_dtype_name(y->dtype));
    alma__set_f64(y->data, y->dtype, i, v);
  }
  return ALMA_OK;
}

static alma_status cast_exec(EXEC_ARGS) {
  if (in[0]->dtype == ALMA_DTYPE_STRING || out[0].dtype == ALMA_DTYPE_STRING) return string_cast(n, in[0], &out[0]);
  cast_mode m;
  ALMA_TRY(cast_mode_of(n, &m));
  do_cast(in[0], &out[0], &m);
  return ALMA_OK;
}

/* 19 added the float8 types and `saturate`, 21 int4/uint4, 23 float4e2m1, 24 float8e8m0 with
 * `round_mode` (only for that type), 25 int2/uint2. */
const alma_op_def alma__op_Cast = {.name = "Cast", .flags = ALMA_OP_STRINGS | ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 6, 9, 13, 19, 21, 23, 24, 25}, .min_inputs = 1,
                                   .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .infer = cast_infer,
                                   .exec = cast_exec, .cost = alma__ew_cost};

/* CastLike (15; 19 to 25 as Cast): Cast to the dtype of the second input. */
static alma_status castlike_infer(INFER_ARGS) {
  if (!in[1]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "target_type is required");
  if (!holdable(in[0]->dtype) || !holdable(in[1]->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "cast from %s to %s", alma_dtype_name(in[0]->dtype),
                          alma_dtype_name(in[1]->dtype));
  if (n->since_version < cast_type_since(in[0]->dtype) || n->since_version < cast_type_since(in[1]->dtype))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "cast from %s to %s: opset %d's CastLike does not have %s",
                          alma_dtype_name(in[0]->dtype), alma_dtype_name(in[1]->dtype), n->since_version,
                          alma_dtype_name(n->since_version < cast_type_since(in[0]->dtype) ? in[0]->dtype : in[1]->dtype));
  cast_mode m;
  ALMA_TRY(cast_mode_of(n, &m));
  alma__set_shape(&out[0], in[1]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}
const alma_op_def alma__op_CastLike = {.name = "CastLike", .flags = ALMA_OP_STRINGS | ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {15, 19, 21, 23, 24, 25}, .min_inputs = 2,
                                       .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                       .infer = castlike_infer, .exec = cast_exec, .cost = alma__ew_cost};

/* ---- BitCast (26): the same bits read as another type of the same width (little endian, which
 * is also alma's in-memory order on the hosts it builds for). The 4-bit and 2-bit types hold one
 * element a byte in memory, so between them the code's low bits are re-read (int4/int2
 * sign-extended). */
static size_t type_bits(alma_dtype t) {
  return alma__dtype_is_lowbit(t) ? (size_t)alma__dtype_packed_bits(t) : 8 * alma_dtype_size(t);
}

static alma_status bitcast_infer(INFER_ARGS) {
  const alma_attr *a = alma__node_attr(n, "to");
  if (!a || a->type != ALMA_ATTR_INT) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute 'to' (int) is required");
  const char *nm = alma__onnx_type_name(a->i);
  if (a->i <= 0 || !strcmp(nm, "unknown"))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute to=%lld is not a tensor element type", (long long)a->i);
  alma_dtype to = (alma_dtype)a->i;
  if (a->i > ALMA_DTYPE_INT2 || !holdable(to)) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "bit cast to %s", nm);
  if (!holdable(in[0]->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "bit cast from %s", alma_dtype_name(in[0]->dtype));
  if (type_bits(to) != type_bits(in[0]->dtype))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "bit cast from %s to %s: the widths differ (%zu and %zu bits)",
                          alma_dtype_name(in[0]->dtype), nm, type_bits(in[0]->dtype), type_bits(to));
  alma__set_shape(&out[0], to, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

static alma_status bitcast_exec(EXEC_ARGS) {
  if (out[0].nbytes) memcpy(out[0].data, in[0]->data, out[0].nbytes);
  /* a bool must stay 0 or 1: ONNX leaves other bytes undefined; map them to true */
  if (out[0].dtype == ALMA_DTYPE_BOOL)
    for (size_t i = 0; i < out[0].nbytes; i++) ((uint8_t *)out[0].data)[i] = ((uint8_t *)out[0].data)[i] != 0;
  int bits = alma__dtype_packed_bits(out[0].dtype);
  if (bits < 8)
    for (size_t i = 0; i < out[0].nbytes; i++) {
      uint8_t *b = (uint8_t *)out[0].data + i, code = (uint8_t)(*b & ((1u << bits) - 1u));
      *b = out[0].dtype == ALMA_DTYPE_INT4 || out[0].dtype == ALMA_DTYPE_INT2 ? alma__lowint_wrap(out[0].dtype, code) : code;
    }
  return ALMA_OK;
}

const alma_op_def alma__op_BitCast = {.name = "BitCast", .domain = "", .versions = {26}, .min_inputs = 1,
                                      .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                      .infer = bitcast_infer, .exec = bitcast_exec};

/* ---- Identity ------------------------------------------------------------------------------ */
static alma_status identity_infer(INFER_ARGS) {
  if (alma__dtype_is_container(in[0]->dtype)) {
    if (n->since_version < 14 || (in[0]->dtype == ALMA__DTYPE_OPTIONAL && n->since_version < 16))
      return alma__op_error(n, ALMA_ERR_TYPE, "Identity-%d takes tensors only (sequences from 14, optionals from 16)",
                            n->since_version);
    out[0] = *in[0];
    out[0].data = NULL;
    out[0].nbytes = 0;
    out[0].owns_data = 0;
    return ALMA_OK;
  }
  if (!holdable(in[0]->dtype) && in[0]->dtype != ALMA_DTYPE_STRING) /* string handles copy as values (core.h) */
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(in[0]->dtype));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}
static alma_status identity_exec(EXEC_ARGS) {
  if (alma__dtype_is_container(in[0]->dtype)) return alma__tensor_copy(&out[0], in[0]); /* unallocated: registry.c */
  if (out[0].nbytes) memcpy(out[0].data, in[0]->data, out[0].nbytes);
  return ALMA_OK;
}
/* 14 added sequences, 16 optionals: deep-copied (core.h's containers). */
const alma_op_def alma__op_Identity = {.name = "Identity", .flags = ALMA_OP_STRINGS | ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 13, 14, 16, 19, 21},
                                       .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                       .infer = identity_infer, .exec = identity_exec};

/* ---- Dropout ---------------------------------------------------------------------------------
 * Inference (the default): the identity, mask all true (bool from opset 10, the input's dtype
 * before). Training mode (opset 12+, training_mode input true): y = x * mask / (1 - ratio) with
 * mask = u >= ratio, u drawn uniformly in [0, 1) in row-major order from numpy's legacy
 * RandomState stream (MT19937 seeded with `seed`, 53-bit doubles), which is how ONNX's
 * reference computes it, so seeded results are reproducible and match it. Without a seed alma
 * uses 0, keeping runs comparable. Opset < 7 training mode (is_test=0, the default there) is an
 * old Caffe2 form alma does not run. */
typedef struct {
  uint32_t mt[624];
  int idx;
} mt19937;

static void mt_seed(mt19937 *m, uint32_t seed) {
  m->mt[0] = seed;
  for (int i = 1; i < 624; i++) m->mt[i] = 1812433253u * (m->mt[i - 1] ^ (m->mt[i - 1] >> 30)) + (uint32_t)i;
  m->idx = 624;
}
static uint32_t mt_next(mt19937 *m) {
  if (m->idx >= 624) {
    for (int i = 0; i < 624; i++) {
      uint32_t y = (m->mt[i] & 0x80000000u) | (m->mt[(i + 1) % 624] & 0x7fffffffu);
      m->mt[i] = m->mt[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1) ? 0x9908b0dfu : 0);
    }
    m->idx = 0;
  }
  uint32_t y = m->mt[m->idx++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}
static double mt_double(mt19937 *m) {
  uint32_t a = mt_next(m) >> 5, b = mt_next(m) >> 6;
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

static alma_status dropout_ratio(const alma_node *n, const alma_tensor *const *in, int nin, int *known, double *ratio) {
  *known = 1;
  *ratio = 0.5;
  if (n->since_version < 12) {
    *ratio = alma__attr_f(n, "ratio", 0.5f);
  } else if (nin > 1 && in[1]) {
    if (!alma__dtype_is_float(in[1]->dtype) || alma_tensor_numel(in[1]) != 1)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "ratio must be a floating-point scalar");
    if (!in[1]->data) *known = 0;
    else *ratio = alma__get_f64(in[1]->data, in[1]->dtype, 0);
  }
  if (*known && !(*ratio >= 0 && *ratio < 1))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "ratio %g is outside [0, 1)", *ratio);
  return ALMA_OK;
}

/* Validates the mode inputs; *training = 1 when training-mode dropout applies (known values). */
static alma_status dropout_mode(const alma_node *n, const alma_tensor *const *in, int nin, int *training,
                                double *ratio) {
  int known;
  *training = 0;
  ALMA_TRY(dropout_ratio(n, in, nin, &known, ratio));
  if (n->since_version < 7) {
    if (!alma__attr_i(n, "is_test", 0) && *ratio > 0)
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "training-mode dropout of opset < 7 (is_test=0, ratio %g)",
                            *ratio);
    return ALMA_OK;
  }
  if (n->since_version >= 12 && nin > 2 && in[2]) {
    const alma_tensor *tm = in[2];
    if (tm->dtype != ALMA_DTYPE_BOOL || alma_tensor_numel(tm) != 1)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "training_mode must be a bool scalar");
    *training = known && tm->data && ((const uint8_t *)tm->data)[0] && *ratio > 0;
  }
  return ALMA_OK;
}

static alma_status dropout_infer(INFER_ARGS) {
  const alma_tensor *x = in[0];
  if (!alma__dtype_is_float(x->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  int training;
  double ratio;
  ALMA_TRY(dropout_mode(n, in, nin, &training, &ratio));
  alma__set_shape(&out[0], x->dtype, x->rank, x->dims);
  if (nout > 1)
    alma__set_shape(&out[1], n->since_version >= 10 ? ALMA_DTYPE_BOOL : x->dtype, x->rank, x->dims);
  return ALMA_OK;
}

static alma_status dropout_exec(EXEC_ARGS) {
  int training;
  double ratio;
  ALMA_TRY(dropout_mode(n, in, nin, &training, &ratio));
  const alma_tensor *x = in[0];
  alma_tensor *mask = nout > 1 && out[1].data ? &out[1] : NULL;
  int64_t cnt = alma_tensor_numel(x);
  if (!training) {
    if (out[0].nbytes) memcpy(out[0].data, x->data, out[0].nbytes);
    if (mask)
      for (int64_t i = 0; i < cnt; i++) alma__set_f64(mask->data, mask->dtype, i, 1.0);
    return ALMA_OK;
  }
  mt19937 *rng = malloc(sizeof *rng);
  if (!rng) return alma__op_error(n, ALMA_ERR_NOMEM, "out of memory");
  mt_seed(rng, (uint32_t)alma__attr_i(n, "seed", 0));
  double scale = 1.0 / (1.0 - ratio);
  for (int64_t i = 0; i < cnt; i++) {
    int keep = mt_double(rng) >= ratio;
    double v = keep ? alma__get_f64(x->data, x->dtype, i) * scale : 0.0;
    alma__set_f64(out[0].data, out[0].dtype, i, v);
    if (mask) ((uint8_t *)mask->data)[i] = (uint8_t)keep;
  }
  free(rng);
  return ALMA_OK;
}

const alma_op_def alma__op_Dropout = {.name = "Dropout", .domain = "", .versions = {1, 6, 7, 10, 12, 13, 22},
                                      .min_inputs = 1, .max_inputs = 3, .min_outputs = 1, .max_outputs = 2,
                                      .infer = dropout_infer, .exec = dropout_exec};
