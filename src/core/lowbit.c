/* Low-precision element types (ONNX 17-26): float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz), float8e8m0,
 * float4e2m1, int4/uint4, int2/uint2. In memory each element takes one byte (alma.h); this file
 * converts those bytes to and from numbers and packs/unpacks ONNX's sub-byte storage.
 *
 * The float encodings round to nearest even straight from double (one rounding), with the
 * out-of-range rules of ONNX's Cast table; ONNX's reference implementation (ml_dtypes) is what the
 * tests compare with, bit for bit. */
#include <math.h>

#include "core/core.h"

int alma__dtype_is_lowbit(alma_dtype t) { return t >= ALMA_DTYPE_FLOAT8E4M3FN && t <= ALMA_DTYPE_INT2; }

int alma__dtype_is_lowfloat(alma_dtype t) {
  switch (t) {
    case ALMA_DTYPE_FLOAT8E4M3FN: case ALMA_DTYPE_FLOAT8E4M3FNUZ: case ALMA_DTYPE_FLOAT8E5M2:
    case ALMA_DTYPE_FLOAT8E5M2FNUZ: case ALMA_DTYPE_FLOAT4E2M1: case ALMA_DTYPE_FLOAT8E8M0:
      return 1;
    default:
      return 0;
  }
}

int alma__dtype_is_lowint(alma_dtype t) {
  return t == ALMA_DTYPE_INT4 || t == ALMA_DTYPE_UINT4 || t == ALMA_DTYPE_INT2 || t == ALMA_DTYPE_UINT2;
}

int alma__dtype_packed_bits(alma_dtype t) {
  switch (t) {
    case ALMA_DTYPE_INT4: case ALMA_DTYPE_UINT4: case ALMA_DTYPE_FLOAT4E2M1: return 4;
    case ALMA_DTYPE_INT2: case ALMA_DTYPE_UINT2: return 2;
    default: return 8;
  }
}

/* A small float format: sign bit at `sbit`, `mbits` of mantissa, exponent bias, the largest finite
 * value and its code; kind says where NaN/inf live. */
enum { F_FN, F_FNUZ, F_IEEE, F_NONE };
typedef struct {
  int sbit, mbits, bias, kind;
  double maxv;
  uint8_t maxcode;
} lf_fmt;

static const lf_fmt *fmt_of(alma_dtype t) {
  static const lf_fmt e4m3fn = {7, 3, 7, F_FN, 448.0, 0x7e}, e4m3fnuz = {7, 3, 8, F_FNUZ, 240.0, 0x7f},
                      e5m2 = {7, 2, 15, F_IEEE, 57344.0, 0x7b}, e5m2fnuz = {7, 2, 16, F_FNUZ, 57344.0, 0x7f},
                      e2m1 = {3, 1, 1, F_NONE, 6.0, 0x7};
  switch (t) {
    case ALMA_DTYPE_FLOAT8E4M3FN: return &e4m3fn;
    case ALMA_DTYPE_FLOAT8E4M3FNUZ: return &e4m3fnuz;
    case ALMA_DTYPE_FLOAT8E5M2: return &e5m2;
    case ALMA_DTYPE_FLOAT8E5M2FNUZ: return &e5m2fnuz;
    case ALMA_DTYPE_FLOAT4E2M1: return &e2m1;
    default: return NULL;
  }
}

double alma__lowfloat_decode(alma_dtype t, uint8_t b) {
  if (t == ALMA_DTYPE_FLOAT8E8M0) return b == 0xff ? NAN : ldexp(1.0, (int)b - 127);
  const lf_fmt *f = fmt_of(t);
  if (!f) return 0.0;
  int sign = (b >> f->sbit) & 1;
  unsigned mag = b & ((1u << f->sbit) - 1u);
  unsigned emask = (1u << (f->sbit - f->mbits)) - 1u, e = mag >> f->mbits, m = mag & ((1u << f->mbits) - 1u);
  if (f->kind == F_FNUZ && b == 0x80) return -NAN; /* its code has the sign bit: ml_dtypes gives -NaN */
  if (f->kind == F_FN && mag == 0x7f) return sign ? -NAN : NAN;
  if (f->kind == F_IEEE && e == emask) return m ? (sign ? -NAN : NAN) : (sign ? -INFINITY : INFINITY);
  double v = e == 0 ? ldexp((double)m, 1 - f->bias - f->mbits) : ldexp((double)((1u << f->mbits) | m), (int)e - f->bias - f->mbits);
  return sign ? -v : v;
}

uint8_t alma__lowfloat_encode(alma_dtype t, double v, int saturate) {
  if (t == ALMA_DTYPE_FLOAT8E8M0) return alma__e8m0_encode((float)v, saturate, ALMA_E8M0_UP);
  const lf_fmt *f = fmt_of(t);
  if (!f) return 0;
  int neg = signbit(v) != 0;
  uint8_t s = (uint8_t)(neg << f->sbit);
  if (isnan(v)) {
    switch (f->kind) {
      case F_FN: return s | 0x7f;
      case F_IEEE: return s | 0x7e;
      case F_FNUZ: return 0x80;
      default: return neg ? 0x0 : 0x8; /* ml_dtypes' (and so ONNX's reference and data) float4 NaN */
    }
  }
  if (f->kind == F_NONE) saturate = 1; /* float4e2m1 has nothing else to give */
  double a = fabs(v);
  uint8_t over = saturate ? (uint8_t)(s | f->maxcode)
                 : f->kind == F_FN ? (uint8_t)(s | 0x7f) : f->kind == F_IEEE ? (uint8_t)(s | 0x7c) : 0x80;
  if (isinf(a)) return over;
  if (a == 0.0) return f->kind == F_FNUZ ? 0 : s;
  /* the exponent of a, floored at the smallest normal's (below it the subnormal spacing holds) */
  int k, emin = 1 - f->bias;
  (void)frexp(a, &k);
  int e = k - 1 < emin ? emin : k - 1;
  double r = rint(ldexp(a, f->mbits - e)); /* in [0, 2^(mbits+1)]: exact, rint rounds half even */
  if (ldexp(r, e - f->mbits) > f->maxv) return over;
  if (r == 0.0) return f->kind == F_FNUZ ? 0 : s;
  unsigned ri = (unsigned)r, one = 1u << f->mbits;
  if (ri >= 2 * one) { /* rounded up into the next binade */
    e++;
    ri = one;
  }
  unsigned code = ri >= one ? ((unsigned)(e + f->bias) << f->mbits) | (ri - one) : ri;
  return (uint8_t)(s | code);
}

uint8_t alma__e8m0_encode(float v, int saturate, int round_mode) {
  uint32_t bits;
  memcpy(&bits, &v, 4);
  unsigned e = (bits >> 23) & 0xff;
  if (e == 0xff) return 0xff;
  int up = 0;
  if (round_mode == ALMA_E8M0_NEAREST) {
    /* the reference's guard/round/sticky test, with "lsb" the exponent being non-zero */
    int g = (bits & 0x400000u) != 0, r = (bits & 0x200000u) != 0, st = (bits & 0x1fffffu) != 0, lsb = e > 0;
    up = g && (r || st || lsb);
  } else if (round_mode == ALMA_E8M0_UP) {
    up = (bits & 0x7fffffu) != 0;
  }
  if (up && saturate && e == 0xfe) up = 0;
  return (uint8_t)(e + (unsigned)up); /* 0xfe + 1: 0xff, NaN, without saturation */
}

uint8_t alma__lowint_wrap(alma_dtype t, int64_t v) {
  int bits = t == ALMA_DTYPE_INT4 || t == ALMA_DTYPE_UINT4 ? 4 : t == ALMA_DTYPE_INT2 || t == ALMA_DTYPE_UINT2 ? 2 : 8;
  int low = (int)((uint64_t)v & ((1u << bits) - 1u)); /* the low bits, as two's complement keeps them */
  if ((t == ALMA_DTYPE_INT4 || t == ALMA_DTYPE_INT2) && low >= 1 << (bits - 1)) low -= 1 << bits;
  return (uint8_t)(int8_t)low;
}

void alma__lowint_range(alma_dtype t, int64_t *lo, int64_t *hi) {
  switch (t) {
    case ALMA_DTYPE_INT4: *lo = -8; *hi = 7; break;
    case ALMA_DTYPE_UINT4: *lo = 0; *hi = 15; break;
    case ALMA_DTYPE_INT2: *lo = -2; *hi = 1; break;
    case ALMA_DTYPE_UINT2: *lo = 0; *hi = 3; break;
    default: *lo = *hi = 0; break;
  }
}

size_t alma__packed_size(alma_dtype t, int64_t n) {
  int per = 8 / alma__dtype_packed_bits(t);
  return (size_t)((n + per - 1) / per);
}

void alma__pack_lowbit(alma_dtype t, const uint8_t *elems, int64_t n, uint8_t *packed) {
  int bits = alma__dtype_packed_bits(t), per = 8 / bits;
  unsigned mask = (1u << bits) - 1u;
  if (bits == 8) {
    if (n) memcpy(packed, elems, (size_t)n);
    return;
  }
  memset(packed, 0, alma__packed_size(t, n)); /* an odd count's last byte is padded with zeros */
  for (int64_t i = 0; i < n; i++) packed[i / per] |= (uint8_t)((elems[i] & mask) << (bits * (int)(i % per)));
}

void alma__unpack_lowbit(alma_dtype t, const uint8_t *packed, int64_t n, uint8_t *elems) {
  int bits = alma__dtype_packed_bits(t), per = 8 / bits;
  if (bits == 8) {
    if (n) memcpy(elems, packed, (size_t)n);
    return;
  }
  unsigned mask = (1u << bits) - 1u;
  for (int64_t i = 0; i < n; i++) {
    unsigned c = (packed[i / per] >> (bits * (int)(i % per))) & mask;
    /* signed types sign-extend into their byte; the others keep the code */
    elems[i] = t == ALMA_DTYPE_INT4 || t == ALMA_DTYPE_INT2 ? alma__lowint_wrap(t, (int64_t)c) : (uint8_t)c;
  }
}
