/* Tensors, dtypes, element access and half-precision conversion. */
#include <math.h>
#include <stdatomic.h>
#include <strings.h>

#include "core/core.h"

const char *alma_dtype_name(alma_dtype t) {
  if (t == ALMA__DTYPE_SEQUENCE) return "sequence"; /* internal kinds (core.h), for messages */
  if (t == ALMA__DTYPE_OPTIONAL) return "optional";
  if (t == ALMA__DTYPE_MAP) return "map";
  switch (t) {
    case ALMA_DTYPE_FLOAT32: return "float32";
    case ALMA_DTYPE_UINT8: return "uint8";
    case ALMA_DTYPE_INT8: return "int8";
    case ALMA_DTYPE_UINT16: return "uint16";
    case ALMA_DTYPE_INT16: return "int16";
    case ALMA_DTYPE_INT32: return "int32";
    case ALMA_DTYPE_INT64: return "int64";
    case ALMA_DTYPE_STRING: return "string";
    case ALMA_DTYPE_BOOL: return "bool";
    case ALMA_DTYPE_FLOAT16: return "float16";
    case ALMA_DTYPE_FLOAT64: return "float64";
    case ALMA_DTYPE_UINT32: return "uint32";
    case ALMA_DTYPE_UINT64: return "uint64";
    case ALMA_DTYPE_BFLOAT16: return "bfloat16";
    case ALMA_DTYPE_FLOAT8E4M3FN: return "float8e4m3fn";
    case ALMA_DTYPE_FLOAT8E4M3FNUZ: return "float8e4m3fnuz";
    case ALMA_DTYPE_FLOAT8E5M2: return "float8e5m2";
    case ALMA_DTYPE_FLOAT8E5M2FNUZ: return "float8e5m2fnuz";
    case ALMA_DTYPE_UINT4: return "uint4";
    case ALMA_DTYPE_INT4: return "int4";
    case ALMA_DTYPE_FLOAT4E2M1: return "float4e2m1";
    case ALMA_DTYPE_FLOAT8E8M0: return "float8e8m0";
    case ALMA_DTYPE_UINT2: return "uint2";
    case ALMA_DTYPE_INT2: return "int2";
    default: return "undefined";
  }
}

const char *alma__onnx_type_name(int64_t t) {
  static const char *const names[] = {"undefined", "float32", "uint8", "int8", "uint16", "int16", "int32", "int64",
                                      "string", "bool", "float16", "float64", "uint32", "uint64", "complex64",
                                      "complex128", "bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2",
                                      "float8e5m2fnuz", "uint4", "int4", "float4e2m1", "float8e8m0", "uint2", "int2",
                                      "float6e2m3", "float6e3m2"};
  return t >= 0 && t < (int64_t)(sizeof names / sizeof names[0]) ? names[t] : "unknown";
}

size_t alma_dtype_size(alma_dtype t) {
  switch (t) {
    case ALMA_DTYPE_UINT8: case ALMA_DTYPE_INT8: case ALMA_DTYPE_BOOL: return 1;
    /* one byte per element in memory, packed only in ONNX files (alma.h) */
    case ALMA_DTYPE_FLOAT8E4M3FN: case ALMA_DTYPE_FLOAT8E4M3FNUZ: case ALMA_DTYPE_FLOAT8E5M2:
    case ALMA_DTYPE_FLOAT8E5M2FNUZ: case ALMA_DTYPE_UINT4: case ALMA_DTYPE_INT4: case ALMA_DTYPE_FLOAT4E2M1:
    case ALMA_DTYPE_FLOAT8E8M0: case ALMA_DTYPE_UINT2: case ALMA_DTYPE_INT2:
      return 1;
    case ALMA_DTYPE_UINT16: case ALMA_DTYPE_INT16: case ALMA_DTYPE_FLOAT16: case ALMA_DTYPE_BFLOAT16: return 2;
    case ALMA_DTYPE_FLOAT32: case ALMA_DTYPE_INT32: case ALMA_DTYPE_UINT32: return 4;
    case ALMA_DTYPE_FLOAT64: case ALMA_DTYPE_INT64: case ALMA_DTYPE_UINT64: return 8;
    case ALMA_DTYPE_STRING: return sizeof(const alma__str *); /* interned handles (core.h) */
    default: return 0;
  }
}

alma_status alma_dtype_parse(const char *s, alma_dtype *out) {
  static const struct { const char *name; alma_dtype t; } names[] = {
      {"float32", ALMA_DTYPE_FLOAT32}, {"f32", ALMA_DTYPE_FLOAT32}, {"float", ALMA_DTYPE_FLOAT32},
      {"float16", ALMA_DTYPE_FLOAT16}, {"f16", ALMA_DTYPE_FLOAT16}, {"half", ALMA_DTYPE_FLOAT16},
      {"bfloat16", ALMA_DTYPE_BFLOAT16}, {"bf16", ALMA_DTYPE_BFLOAT16},
      {"float64", ALMA_DTYPE_FLOAT64}, {"f64", ALMA_DTYPE_FLOAT64}, {"double", ALMA_DTYPE_FLOAT64},
      {"int8", ALMA_DTYPE_INT8}, {"i8", ALMA_DTYPE_INT8}, {"uint8", ALMA_DTYPE_UINT8}, {"u8", ALMA_DTYPE_UINT8},
      {"int16", ALMA_DTYPE_INT16}, {"uint16", ALMA_DTYPE_UINT16},
      {"int32", ALMA_DTYPE_INT32}, {"i32", ALMA_DTYPE_INT32}, {"uint32", ALMA_DTYPE_UINT32},
      {"int64", ALMA_DTYPE_INT64}, {"i64", ALMA_DTYPE_INT64}, {"uint64", ALMA_DTYPE_UINT64},
      {"bool", ALMA_DTYPE_BOOL},
      {"float8e4m3fn", ALMA_DTYPE_FLOAT8E4M3FN}, {"float8e4m3fnuz", ALMA_DTYPE_FLOAT8E4M3FNUZ},
      {"float8e5m2", ALMA_DTYPE_FLOAT8E5M2}, {"float8e5m2fnuz", ALMA_DTYPE_FLOAT8E5M2FNUZ},
      {"float8e8m0", ALMA_DTYPE_FLOAT8E8M0}, {"float4e2m1", ALMA_DTYPE_FLOAT4E2M1},
      {"int4", ALMA_DTYPE_INT4}, {"uint4", ALMA_DTYPE_UINT4}, {"int2", ALMA_DTYPE_INT2}, {"uint2", ALMA_DTYPE_UINT2},
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcasecmp(s, names[i].name)) {
      *out = names[i].t;
      return ALMA_OK;
    }
  return alma__errorf(ALMA_ERR_INVALID_ARG,
                      "unknown dtype '%s' (expected float32, float16, bfloat16, float64, int8, uint8, "
                      "int16, uint16, int32, uint32, int64, uint64, bool, float8e4m3fn, float8e4m3fnuz, float8e5m2, "
                      "float8e5m2fnuz, float8e8m0, float4e2m1, int4, uint4, int2 or uint2)", s);
}

int64_t alma__numel(int rank, const int64_t *dims) {
  int64_t n = 1;
  int over = 0;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0) return -1;
    if (dims[i] == 0) return 0;
    over |= __builtin_mul_overflow(n, dims[i], &n);
  }
  return over ? INT64_MAX : n;
}

int64_t alma_tensor_numel(const alma_tensor *t) { return alma__numel(t->rank, t->dims); }

void alma_tensor_free_data(alma_tensor *t) {
  if (!t) return;
  if (t->owns_data) {
    if (alma__dtype_is_container(t->dtype)) alma__container_free(t->data);
    else free(t->data);
  }
  t->data = NULL;
  t->nbytes = 0;
  t->owns_data = 0;
}

void alma__strides(int rank, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    strides[i] = s;
    s *= dims[i];
  }
}

/* Sanitizer builds (and ALMA_POISON_UNINIT=1 in any build) fill uninitialised tensors with 0xFF
 * bytes (NaN in every float type, -1 in the integers), so a kernel that leaves an element unwritten
 * or accumulates into its output shows in the tests instead of reading calloc's zeros by luck. */
#if defined(__SANITIZE_ADDRESS__)
#define ALMA__POISON_DEFAULT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define ALMA__POISON_DEFAULT 1
#endif
#endif
#ifndef ALMA__POISON_DEFAULT
#define ALMA__POISON_DEFAULT 0
#endif

int alma__poison_uninit(void) {
  static _Atomic int on = -1;
  int v = atomic_load_explicit(&on, memory_order_relaxed);
  if (v < 0) {
    const char *e = getenv("ALMA_POISON_UNINIT");
    v = e && e[0] ? e[0] != '0' : ALMA__POISON_DEFAULT;
    atomic_store_explicit(&on, v, memory_order_relaxed);
  }
  return v;
}

static alma_status tensor_alloc(alma_tensor *t, alma_dtype dt, int rank, const int64_t *dims, int zero) {
  size_t esz = alma_dtype_size(dt);
  if (esz == 0) return alma__errorf(ALMA_ERR_UNSUPPORTED, "cannot allocate a tensor of dtype %s", alma_dtype_name(dt));
  if (rank < 0 || rank > ALMA_MAX_RANK)
    return alma__errorf(ALMA_ERR_UNSUPPORTED, "tensor rank %d exceeds alma's maximum of %d", rank, ALMA_MAX_RANK);
  int64_t n = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0) return alma__errorf(ALMA_ERR_SHAPE, "negative dimension %lld", (long long)dims[i]);
    if (alma__mul_overflow_i64(n, dims[i], &n)) return alma__errorf(ALMA_ERR_NOMEM, "tensor size overflows");
  }
  int64_t bytes;
  if (alma__mul_overflow_i64(n, (int64_t)esz, &bytes) || (uint64_t)bytes > (uint64_t)1 << 46)
    return alma__errorf(ALMA_ERR_NOMEM, "tensor of %lld elements is too large", (long long)n);
  /* string tensors hold handles that free and copy read: always zeroed (NULL = empty string) */
  if (dt == ALMA_DTYPE_STRING) zero = 1;
  size_t sz = (size_t)(bytes ? bytes : 1);
  void *data = zero ? calloc(sz, 1) : malloc(sz);
  if (!data) return alma__errorf(ALMA_ERR_NOMEM, "out of memory allocating %lld bytes", (long long)bytes);
  if (!zero && alma__poison_uninit()) memset(data, 0xFF, sz);
  memset(t, 0, sizeof *t);
  t->dtype = dt;
  t->rank = rank;
  for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
  t->data = data;
  t->nbytes = (size_t)bytes;
  t->owns_data = 1;
  return ALMA_OK;
}

alma_status alma__tensor_alloc(alma_tensor *t, alma_dtype dt, int rank, const int64_t *dims) {
  return tensor_alloc(t, dt, rank, dims, 1);
}

alma_status alma__tensor_alloc_uninit(alma_tensor *t, alma_dtype dt, int rank, const int64_t *dims) {
  return tensor_alloc(t, dt, rank, dims, 0);
}

alma_status alma__tensor_alloc_like(alma_tensor *t, const alma_tensor *src) {
  return alma__tensor_alloc(t, src->dtype, src->rank, src->dims);
}

alma_status alma__tensor_copy(alma_tensor *dst, const alma_tensor *src) {
  if (alma__dtype_is_container(src->dtype)) { /* deep: the items are owned by the container */
    const alma__seq *s = src->data;
    ALMA_TRY(alma__container_alloc(dst, src->dtype, alma__container_elem(src), alma__container_elem_is_seq(src)));
    memcpy(dst->dims, src->dims, sizeof dst->dims); /* a map's key/value dtypes (core.h) too */
    for (int i = 0; s && i < s->n; i++) {
      alma_tensor item;
      alma_status st = alma__tensor_copy(&item, &s->items[i]);
      if (st == ALMA_OK && (st = alma__container_insert(dst, -1, &item)) != ALMA_OK) alma_tensor_free_data(&item);
      if (st != ALMA_OK) {
        alma_tensor_free_data(dst);
        return st;
      }
    }
    return ALMA_OK;
  }
  ALMA_TRY(alma__tensor_alloc_like(dst, src));
  if (src->data && dst->nbytes) memcpy(dst->data, src->data, dst->nbytes);
  return ALMA_OK;
}

alma_tensor alma__tensor_view(const alma_tensor *t) {
  alma_tensor v = *t;
  v.owns_data = 0;
  return v;
}

int alma__same_shape(const alma_tensor *a, const alma_tensor *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

const char *alma__shape_str(int rank, const int64_t *dims, char *buf, size_t n) {
  size_t o = 0;
  if (n == 0) return buf;
  buf[0] = '\0';
  o += (size_t)snprintf(buf + o, n - o, "[");
  for (int i = 0; i < rank && o < n; i++)
    o += (size_t)snprintf(buf + o, n - o, i ? ",%lld" : "%lld", (long long)dims[i]);
  if (o < n) snprintf(buf + o, n - o, "]");
  return buf;
}

alma_status alma__norm_axis(int64_t axis, int rank, int *out) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= (rank > 0 ? rank : 1))
    return alma__errorf(ALMA_ERR_INVALID_ARG, "axis %lld out of range for rank %d", (long long)axis, rank);
  *out = (int)a;
  return ALMA_OK;
}

int alma__dtype_is_float(alma_dtype t) {
  return t == ALMA_DTYPE_FLOAT32 || t == ALMA_DTYPE_FLOAT16 || t == ALMA_DTYPE_BFLOAT16 || t == ALMA_DTYPE_FLOAT64;
}

int alma__dtype_is_int(alma_dtype t) {
  switch (t) {
    case ALMA_DTYPE_INT8: case ALMA_DTYPE_UINT8: case ALMA_DTYPE_INT16: case ALMA_DTYPE_UINT16:
    case ALMA_DTYPE_INT32: case ALMA_DTYPE_UINT32: case ALMA_DTYPE_INT64: case ALMA_DTYPE_UINT64:
      return 1;
    default:
      return 0;
  }
}

int alma__dtype_is_signed(alma_dtype t) {
  return t == ALMA_DTYPE_INT8 || t == ALMA_DTYPE_INT16 || t == ALMA_DTYPE_INT32 || t == ALMA_DTYPE_INT64 ||
         alma__dtype_is_float(t);
}

/* ---- half precision (bit exact, round to nearest even) --------------------------------------- */
float alma__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else { /* subnormal: normalize */
      int e = -1;
      do {
        e++;
        man <<= 1;
      } while (!(man & 0x400));
      bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t alma__f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) /* inf or nan */
    return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 | ((absx >> 13) & 0x3ff) : 0));
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to inf */
  if (absx < 0x38800000u) { /* result subnormal or zero */
    if (absx < 0x33000000u) return (uint16_t)sign;
    uint32_t e = absx >> 23;
    uint32_t man = (absx & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e; /* 14 + (113 - e) - 1 */
    uint32_t q = man >> (shift);
    uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return (uint16_t)(sign | q);
  }
  uint32_t r = absx - 0x38000000u; /* rebias exponent 127 -> 15 */
  uint32_t q = r >> 13, rem = r & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) q++;
  return (uint16_t)(sign | q);
}

float alma__bf16_to_f32(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

uint16_t alma__f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet nan */
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

/* ---- generic element access ------------------------------------------------------------------ */
double alma__get_f64(const void *d, alma_dtype t, int64_t i) {
  switch (t) {
    case ALMA_DTYPE_FLOAT32: return ((const float *)d)[i];
    case ALMA_DTYPE_FLOAT64: return ((const double *)d)[i];
    case ALMA_DTYPE_FLOAT16: return alma__f16_to_f32(((const uint16_t *)d)[i]);
    case ALMA_DTYPE_BFLOAT16: return alma__bf16_to_f32(((const uint16_t *)d)[i]);
    case ALMA_DTYPE_INT8: return ((const int8_t *)d)[i];
    case ALMA_DTYPE_UINT8: return ((const uint8_t *)d)[i];
    case ALMA_DTYPE_INT16: return ((const int16_t *)d)[i];
    case ALMA_DTYPE_UINT16: return ((const uint16_t *)d)[i];
    case ALMA_DTYPE_INT32: return ((const int32_t *)d)[i];
    case ALMA_DTYPE_UINT32: return ((const uint32_t *)d)[i];
    case ALMA_DTYPE_INT64: return (double)((const int64_t *)d)[i];
    case ALMA_DTYPE_UINT64: return (double)((const uint64_t *)d)[i];
    case ALMA_DTYPE_BOOL: return ((const uint8_t *)d)[i] ? 1.0 : 0.0;
    case ALMA_DTYPE_INT4: case ALMA_DTYPE_INT2: return ((const int8_t *)d)[i];
    case ALMA_DTYPE_UINT4: case ALMA_DTYPE_UINT2: return ((const uint8_t *)d)[i];
    default:
      return alma__dtype_is_lowfloat(t) ? alma__lowfloat_decode(t, ((const uint8_t *)d)[i]) : 0.0;
  }
}

/* Float -> int follows C conversion (truncation), as ONNX Cast does; out-of-range values are
 * clamped first so the conversion is defined behaviour. */
#define ALMA__CLAMP_CAST(T, lo, hi, v) \
  ((v) != (v) ? (T)0 : (v) <= (double)(lo) ? (T)(lo) : (v) >= (double)(hi) ? (T)(hi) : (T)(v))

void alma__set_f64(void *d, alma_dtype t, int64_t i, double v) {
  switch (t) {
    case ALMA_DTYPE_FLOAT32: ((float *)d)[i] = (float)v; break;
    case ALMA_DTYPE_FLOAT64: ((double *)d)[i] = v; break;
    case ALMA_DTYPE_FLOAT16: ((uint16_t *)d)[i] = alma__f32_to_f16((float)v); break;
    case ALMA_DTYPE_BFLOAT16: ((uint16_t *)d)[i] = alma__f32_to_bf16((float)v); break;
    case ALMA_DTYPE_INT8: ((int8_t *)d)[i] = ALMA__CLAMP_CAST(int8_t, INT8_MIN, INT8_MAX, v); break;
    case ALMA_DTYPE_UINT8: ((uint8_t *)d)[i] = ALMA__CLAMP_CAST(uint8_t, 0, UINT8_MAX, v); break;
    case ALMA_DTYPE_INT16: ((int16_t *)d)[i] = ALMA__CLAMP_CAST(int16_t, INT16_MIN, INT16_MAX, v); break;
    case ALMA_DTYPE_UINT16: ((uint16_t *)d)[i] = ALMA__CLAMP_CAST(uint16_t, 0, UINT16_MAX, v); break;
    case ALMA_DTYPE_INT32: ((int32_t *)d)[i] = ALMA__CLAMP_CAST(int32_t, INT32_MIN, INT32_MAX, v); break;
    case ALMA_DTYPE_UINT32: ((uint32_t *)d)[i] = ALMA__CLAMP_CAST(uint32_t, 0, UINT32_MAX, v); break;
    case ALMA_DTYPE_INT64: ((int64_t *)d)[i] = ALMA__CLAMP_CAST(int64_t, INT64_MIN, INT64_MAX, v); break;
    case ALMA_DTYPE_UINT64: ((uint64_t *)d)[i] = ALMA__CLAMP_CAST(uint64_t, 0, UINT64_MAX, v); break;
    case ALMA_DTYPE_BOOL: ((uint8_t *)d)[i] = v != 0.0; break;
    case ALMA_DTYPE_INT4: ((int8_t *)d)[i] = ALMA__CLAMP_CAST(int8_t, -8, 7, v); break;
    case ALMA_DTYPE_UINT4: ((uint8_t *)d)[i] = ALMA__CLAMP_CAST(uint8_t, 0, 15, v); break;
    case ALMA_DTYPE_INT2: ((int8_t *)d)[i] = ALMA__CLAMP_CAST(int8_t, -2, 1, v); break;
    case ALMA_DTYPE_UINT2: ((uint8_t *)d)[i] = ALMA__CLAMP_CAST(uint8_t, 0, 3, v); break;
    default:
      if (alma__dtype_is_lowfloat(t)) ((uint8_t *)d)[i] = alma__lowfloat_encode(t, v, 1);
      break;
  }
}

int64_t alma__get_i64(const void *d, alma_dtype t, int64_t i) {
  switch (t) {
    case ALMA_DTYPE_INT8: return ((const int8_t *)d)[i];
    case ALMA_DTYPE_UINT8: return ((const uint8_t *)d)[i];
    case ALMA_DTYPE_INT16: return ((const int16_t *)d)[i];
    case ALMA_DTYPE_UINT16: return ((const uint16_t *)d)[i];
    case ALMA_DTYPE_INT32: return ((const int32_t *)d)[i];
    case ALMA_DTYPE_UINT32: return ((const uint32_t *)d)[i];
    case ALMA_DTYPE_INT64: return ((const int64_t *)d)[i];
    case ALMA_DTYPE_UINT64: return (int64_t)((const uint64_t *)d)[i];
    case ALMA_DTYPE_BOOL: return ((const uint8_t *)d)[i] != 0;
    case ALMA_DTYPE_INT4: case ALMA_DTYPE_INT2: return ((const int8_t *)d)[i];
    case ALMA_DTYPE_UINT4: case ALMA_DTYPE_UINT2: return ((const uint8_t *)d)[i];
    default: {
      double v = alma__get_f64(d, t, i);
      return ALMA__CLAMP_CAST(int64_t, INT64_MIN, INT64_MAX, v);
    }
  }
}

void alma__set_i64(void *d, alma_dtype t, int64_t i, int64_t v) {
  switch (t) {
    case ALMA_DTYPE_INT8: ((int8_t *)d)[i] = (int8_t)v; break;
    case ALMA_DTYPE_UINT8: ((uint8_t *)d)[i] = (uint8_t)v; break;
    case ALMA_DTYPE_INT16: ((int16_t *)d)[i] = (int16_t)v; break;
    case ALMA_DTYPE_UINT16: ((uint16_t *)d)[i] = (uint16_t)v; break;
    case ALMA_DTYPE_INT32: ((int32_t *)d)[i] = (int32_t)v; break;
    case ALMA_DTYPE_UINT32: ((uint32_t *)d)[i] = (uint32_t)v; break;
    case ALMA_DTYPE_INT64: ((int64_t *)d)[i] = v; break;
    case ALMA_DTYPE_UINT64: ((uint64_t *)d)[i] = (uint64_t)v; break;
    case ALMA_DTYPE_BOOL: ((uint8_t *)d)[i] = v != 0; break;
    case ALMA_DTYPE_INT4: case ALMA_DTYPE_UINT4: case ALMA_DTYPE_INT2: case ALMA_DTYPE_UINT2:
      ((uint8_t *)d)[i] = alma__lowint_wrap(t, v); /* wraps, as the other integer types do here */
      break;
    default: alma__set_f64(d, t, i, (double)v); break;
  }
}
