/* Elementwise math: unary functions, binary arithmetic/comparison/logic with numpy broadcasting
 * (and the legacy broadcast/axis attributes of opset < 7), variadic Max/Min/Sum/Mean, Where and
 * Clip. Kernels are typed loops generated per dtype; float16/bfloat16 compute in float32. */
#include <float.h>
#include <tgmath.h>

#include "ops/ew.h"
#include "ops/op_args.h"
#include "ops/softmax_row.h"

/* =============================================================================================
 * Unary float functions. Each kernel is written once with tgmath so it instantiates for float
 * and double; T is the element type inside the loop.
 * ========================================================================================== */
#define UF(name, EXPR)                                                                           \
  static void name##_f32(const float *x, float *y, int64_t n, const alma__ew_uparam *p) {        \
    typedef float T __attribute__((unused));                                                     \
    (void)p;                                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                            \
      T v = x[i];                                                                                \
      y[i] = (EXPR);                                                                             \
    }                                                                                            \
  }                                                                                              \
  static void name##_f64(const double *x, double *y, int64_t n, const alma__ew_uparam *p) {      \
    typedef double T __attribute__((unused));                                                    \
    (void)p;                                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                            \
      T v = x[i];                                                                                \
      y[i] = (EXPR);                                                                             \
    }                                                                                            \
  }

UF(acos_k, acos(v))
UF(asin_k, asin(v))
UF(atan_k, atan(v))
UF(ceil_k, ceil(v))
UF(cos_k, cos(v))
UF(erf_k, erf(v))
UF(exp_k, exp(v))
UF(floor_k, floor(v))
UF(log_k, log(v))
UF(recip_k, (T)1 / v)
UF(round_k, nearbyint(v)) /* default rounding mode: half to even, as ONNX Round requires */
UF(sin_k, sin(v))
UF(sqrt_k, sqrt(v))
UF(tan_k, tan(v))
/* float32 Tanh on the vectorised tanhf of softmax_row.c (libm's does not vectorise; GPT-2's GELU
 * spent 0.1 ms per 4096-element Tanh); double keeps libm's */
static void tanh_k_f32(const float *x, float *y, int64_t n, const alma__ew_uparam *p) {
  (void)p;
  alma__tanh_row(y, x, n);
}
static void tanh_k_f64(const double *x, double *y, int64_t n, const alma__ew_uparam *p) {
  (void)p;
  for (int64_t i = 0; i < n; i++) y[i] = tanh(x[i]);
}

#define UNARY_FLOAT_OP(Name, fn, ...)                                                          \
  static alma_status Name##_exec(EXEC_ARGS) {                                                  \
    return alma__ew_unary_float_run(n, in[0], &out[0], fn##_f32, fn##_f64, NULL);              \
  }                                                                                            \
  const alma_op_def alma__op_##Name = {.name = #Name,                                          \
                                       .domain = "",                                           \
                                       .flags = ALMA_OP_FILLS_OUTPUTS,                         \
                                       .versions = {__VA_ARGS__},                              \
                                       .min_inputs = 1,                                        \
                                       .max_inputs = 1,                                        \
                                       .min_outputs = 1,                                       \
                                       .max_outputs = 1,                                       \
                                       .infer = alma__ew_unary_float_infer,                    \
                                       .exec = Name##_exec,                                    \
                                       .cost = alma__ew_cost};

UNARY_FLOAT_OP(Acos, acos_k, 7, 22)
UNARY_FLOAT_OP(Asin, asin_k, 7, 22)
UNARY_FLOAT_OP(Atan, atan_k, 7, 22)
UNARY_FLOAT_OP(Ceil, ceil_k, 1, 6, 13)
UNARY_FLOAT_OP(Cos, cos_k, 7, 22)
UNARY_FLOAT_OP(Erf, erf_k, 9, 13)
UNARY_FLOAT_OP(Exp, exp_k, 1, 6, 13)
UNARY_FLOAT_OP(Floor, floor_k, 1, 6, 13)
UNARY_FLOAT_OP(Log, log_k, 1, 6, 13)
UNARY_FLOAT_OP(Reciprocal, recip_k, 1, 6, 13)
UNARY_FLOAT_OP(Round, round_k, 11, 22)
UNARY_FLOAT_OP(Sin, sin_k, 7, 22)
UNARY_FLOAT_OP(Sqrt, sqrt_k, 1, 6, 13)
UNARY_FLOAT_OP(Tan, tan_k, 7, 22)
UNARY_FLOAT_OP(Tanh, tanh_k, 1, 6, 13)

/* =============================================================================================
 * Unary numeric (float and integer): Abs, Neg, Sign. Integer results wrap like two's complement
 * (Abs/Neg of the most negative value give itself), never undefined behaviour.
 * ========================================================================================== */
UF(abs_k, fabs(v))
UF(neg_k, -v)
UF(sign_k, v > 0 ? (T)1 : v < 0 ? (T)-1 : v) /* keeps 0 and NaN */

static alma_status numeric_unary_infer(INFER_ARGS) {
  if (!alma__ew_is_numeric(in[0]->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(in[0]->dtype));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

#define INT_UNARY_LOOP(T, E)                                  \
  do {                                                        \
    const T *x_ = (const T *)x->data;                         \
    T *y_ = (T *)y->data;                                     \
    for (int64_t i = 0; i < cnt; i++) {                       \
      T v = x_[i];                                            \
      y_[i] = (T)(E);                                         \
    }                                                         \
  } while (0)

enum { U_ABS, U_NEG, U_SIGN };

static alma_status numeric_unary_run(const alma_node *n, const alma_tensor *x, alma_tensor *y, int op) {
  int64_t cnt = alma_tensor_numel(x);
  if (alma__dtype_is_float(x->dtype)) {
    if (op == U_ABS) return alma__ew_unary_float_run(n, x, y, abs_k_f32, abs_k_f64, NULL);
    if (op == U_NEG) return alma__ew_unary_float_run(n, x, y, neg_k_f32, neg_k_f64, NULL);
    return alma__ew_unary_float_run(n, x, y, sign_k_f32, sign_k_f64, NULL);
  }
  switch (x->dtype) {
#define S(D, T, CT, LD, ST)                                                   \
  case D:                                                                     \
    if (op == U_ABS) INT_UNARY_LOOP(T, v < 0 ? (T)(0 - (uint64_t)v) : v);      \
    else if (op == U_NEG) INT_UNARY_LOOP(T, (T)(0 - (uint64_t)v));             \
    else INT_UNARY_LOOP(T, (v > 0) - (v < 0));                                \
    return ALMA_OK;
    ALMA__EW_SINT_TYPES(S)
#undef S
#define U(D, T, CT, LD, ST)                                                   \
  case D:                                                                     \
    if (op == U_ABS) INT_UNARY_LOOP(T, v);                                    \
    else if (op == U_NEG) INT_UNARY_LOOP(T, (T)(0 - (uint64_t)v));             \
    else INT_UNARY_LOOP(T, v != 0);                                           \
    return ALMA_OK;
    ALMA__EW_UINT_TYPES(U)
#undef U
    default:
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  }
}

#define NUMERIC_UNARY_OP(Name, code, ...)                                                      \
  static alma_status Name##_exec(EXEC_ARGS) { return numeric_unary_run(n, in[0], &out[0], code); } \
  const alma_op_def alma__op_##Name = {.name = #Name,                                          \
                                       .domain = "",                                           \
                                       .flags = ALMA_OP_FILLS_OUTPUTS,                         \
                                       .versions = {__VA_ARGS__},                              \
                                       .min_inputs = 1,                                        \
                                       .max_inputs = 1,                                        \
                                       .min_outputs = 1,                                       \
                                       .max_outputs = 1,                                       \
                                       .infer = numeric_unary_infer,                           \
                                       .exec = Name##_exec,                                    \
                                       .cost = alma__ew_cost};

NUMERIC_UNARY_OP(Abs, U_ABS, 1, 6, 13)
NUMERIC_UNARY_OP(Neg, U_NEG, 1, 6, 13)
NUMERIC_UNARY_OP(Sign, U_SIGN, 9, 13)

/* Not: bool only. */
static alma_status not_infer(INFER_ARGS) {
  if (in[0]->dtype != ALMA_DTYPE_BOOL)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s (Not takes bool)", alma_dtype_name(in[0]->dtype));
  alma__set_shape(&out[0], ALMA_DTYPE_BOOL, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}
static alma_status not_exec(EXEC_ARGS) {
  const uint8_t *x = (const uint8_t *)in[0]->data;
  uint8_t *y = (uint8_t *)out[0].data;
  int64_t cnt = alma_tensor_numel(in[0]);
  for (int64_t i = 0; i < cnt; i++) y[i] = !x[i];
  return ALMA_OK;
}
const alma_op_def alma__op_Not = {.name = "Not", .flags = ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1}, .min_inputs = 1, .max_inputs = 1,
                                  .min_outputs = 1, .max_outputs = 1, .infer = not_infer, .exec = not_exec,
                                  .cost = alma__ew_cost};

/* =============================================================================================
 * Binary kernels. The run functions receive a bctx with the operand dtypes and Mod's fmod.
 * ========================================================================================== */
typedef struct bctx {
  alma_dtype dt, dt2; /* first and second input dtypes (they differ only for Pow) */
  int fmod;
} bctx;

/* Integer division and remainder never trap: x/0 gives 0 (as numpy does) and x/-1 wraps. */
static inline int64_t sdiv(int64_t x, int64_t y) {
  return y == 0 ? 0 : y == -1 ? (int64_t)(0 - (uint64_t)x) : x / y;
}
static inline uint64_t udiv(uint64_t x, uint64_t y) { return y == 0 ? 0 : x / y; }
static inline int64_t srem(int64_t x, int64_t y) { return y == 0 || y == -1 ? 0 : x % y; }
static inline uint64_t urem(uint64_t x, uint64_t y) { return y == 0 ? 0 : x % y; }
/* Mod with fmod=0: the result takes the sign of the divisor (Python's %). */
static inline int64_t smod(int64_t x, int64_t y) {
  int64_t r = srem(x, y);
  return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
}
static inline float fmodpy_f(float x, float y) {
  float r = fmodf(x, y);
  if (r != 0) {
    if ((r < 0) != (y < 0)) r += y;
  } else {
    r = copysignf(0.0f, y);
  }
  return r;
}
static inline double fmodpy_d(double x, double y) {
  double r = fmod(x, y);
  if (r != 0) {
    if ((r < 0) != (y < 0)) r += y;
  } else {
    r = copysign(0.0, y);
  }
  return r;
}
#define FMODPY(x, y) _Generic((x), float: fmodpy_f, default: fmodpy_d)(x, y)
#define FMAX(x, y) ((x) != (x) || (x) > (y) ? (x) : (y)) /* NaN propagates like numpy.maximum */
#define FMIN(x, y) ((x) != (x) || (x) < (y) ? (x) : (y))

/* One run function per op: FE for float types, SE for signed and UE for unsigned integers. */
#define DEF_ARITH(name, FE, SE, UE)                                                      \
  static void name(void *c, char *const *p, const int64_t *s, int64_t n) {               \
    switch (((const bctx *)c)->dt) {                                                     \
      DEF_ARITH_F(FE) DEF_ARITH_S(SE) DEF_ARITH_U(UE)                                   \
      default: break;                                                                    \
    }                                                                                    \
  }
#define ARITH_CASE(D, T, CT, LD, ST, E) \
  case D:                               \
    ALMA__BIN_LOOP(T, CT, LD, T, ST, E); \
    break;
#define DEF_ARITH_F(E)                                                        \
  ARITH_CASE(ALMA_DTYPE_FLOAT32, float, float, ALMA__LD_P, ALMA__ST_P, E)     \
  ARITH_CASE(ALMA_DTYPE_FLOAT64, double, double, ALMA__LD_P, ALMA__ST_P, E)   \
  ARITH_CASE(ALMA_DTYPE_FLOAT16, uint16_t, float, ALMA__LD_H, ALMA__ST_H, E)  \
  ARITH_CASE(ALMA_DTYPE_BFLOAT16, uint16_t, float, ALMA__LD_B, ALMA__ST_B, E)
#define DEF_ARITH_S(E)                                                        \
  ARITH_CASE(ALMA_DTYPE_INT8, int8_t, int8_t, ALMA__LD_P, ALMA__ST_P, E)      \
  ARITH_CASE(ALMA_DTYPE_INT16, int16_t, int16_t, ALMA__LD_P, ALMA__ST_P, E)   \
  ARITH_CASE(ALMA_DTYPE_INT32, int32_t, int32_t, ALMA__LD_P, ALMA__ST_P, E)   \
  ARITH_CASE(ALMA_DTYPE_INT64, int64_t, int64_t, ALMA__LD_P, ALMA__ST_P, E)
#define DEF_ARITH_U(E)                                                        \
  ARITH_CASE(ALMA_DTYPE_UINT8, uint8_t, uint8_t, ALMA__LD_P, ALMA__ST_P, E)   \
  ARITH_CASE(ALMA_DTYPE_UINT16, uint16_t, uint16_t, ALMA__LD_P, ALMA__ST_P, E) \
  ARITH_CASE(ALMA_DTYPE_UINT32, uint32_t, uint32_t, ALMA__LD_P, ALMA__ST_P, E) \
  ARITH_CASE(ALMA_DTYPE_UINT64, uint64_t, uint64_t, ALMA__LD_P, ALMA__ST_P, E)

/* Integer add/sub/mul go through uint64 so overflow wraps instead of being undefined. */
#define WRAP(op) ((uint64_t)x op (uint64_t)y)
DEF_ARITH(run_add, x + y, WRAP(+), WRAP(+))
DEF_ARITH(run_sub, x - y, WRAP(-), WRAP(-))
DEF_ARITH(run_mul, x * y, WRAP(*), WRAP(*))
DEF_ARITH(run_div, x / y, sdiv(x, y), udiv(x, y))
DEF_ARITH(run_max, FMAX(x, y), x > y ? x : y, x > y ? x : y)
DEF_ARITH(run_min, FMIN(x, y), x < y ? x : y, x < y ? x : y)
DEF_ARITH(run_fmod, fmod(x, y), srem(x, y), urem(x, y))
DEF_ARITH(run_pymod, FMODPY(x, y), smod(x, y), urem(x, y))

static void run_mod(void *c, char *const *p, const int64_t *s, int64_t n) {
  if (((const bctx *)c)->fmod) run_fmod(c, p, s, n);
  else run_pymod(c, p, s, n);
}

/* Comparisons write bool. */
#define CMP_CASE(D, T, CT, LD, ST, E) \
  case D:                             \
    ALMA__BIN_LOOP(T, CT, LD, uint8_t, ALMA__ST_P, E); \
    break;
#define DEF_CMP(name, E)                                                            \
  static void name(void *c, char *const *p, const int64_t *s, int64_t n) {          \
    switch (((const bctx *)c)->dt) {                                                \
      ALMA__EW_FLOAT_TYPES(CMP_##name) ALMA__EW_SINT_TYPES(CMP_##name)              \
      ALMA__EW_UINT_TYPES(CMP_##name)                                               \
      case ALMA_DTYPE_BOOL:                                                         \
        ALMA__BIN_LOOP(uint8_t, int, !!, uint8_t, ALMA__ST_P, E);                   \
        break;                                                                      \
      default: break;                                                               \
    }                                                                               \
  }
#define CMP_run_eq(D, T, CT, LD, ST) CMP_CASE(D, T, CT, LD, ST, x == y)
#define CMP_run_gt(D, T, CT, LD, ST) CMP_CASE(D, T, CT, LD, ST, x > y)
#define CMP_run_ge(D, T, CT, LD, ST) CMP_CASE(D, T, CT, LD, ST, x >= y)
#define CMP_run_lt(D, T, CT, LD, ST) CMP_CASE(D, T, CT, LD, ST, x < y)
#define CMP_run_le(D, T, CT, LD, ST) CMP_CASE(D, T, CT, LD, ST, x <= y)
DEF_CMP(run_eq, x == y)
DEF_CMP(run_gt, x > y)
DEF_CMP(run_ge, x >= y)
DEF_CMP(run_lt, x < y)
DEF_CMP(run_le, x <= y)

/* Logic on bool (any nonzero byte reads as true). */
static void run_and(void *c, char *const *p, const int64_t *s, int64_t n) {
  ALMA__BIN_LOOP(uint8_t, int, !!, uint8_t, ALMA__ST_P, x & y);
}
static void run_or(void *c, char *const *p, const int64_t *s, int64_t n) {
  ALMA__BIN_LOOP(uint8_t, int, !!, uint8_t, ALMA__ST_P, x | y);
}
static void run_xor(void *c, char *const *p, const int64_t *s, int64_t n) {
  ALMA__BIN_LOOP(uint8_t, int, !!, uint8_t, ALMA__ST_P, x ^ y);
}

/* Pow: base and exponent may differ in dtype (opset 12+); the output has the base's dtype. */
static int64_t ipow(int64_t b, int64_t e) {
  if (e < 0) return b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0; /* 1/b^|e| truncates to 0 */
  uint64_t r = 1, x = (uint64_t)b;
  while (e) {
    if (e & 1) r *= x;
    x *= x;
    e >>= 1;
  }
  return (int64_t)r;
}
/* float32 x^y for one exponent y (a constant or a run-time scalar broadcast over x) that multiplies,
 * divides or takes a square root instead of calling powf: 0 if y is none of 1, 2, 3, -1, 0.5. x*x and
 * 1/x are correctly rounded (powf is within 1 ulp); x*x*x rounds twice and is within 2 ulps of
 * powf (tests/ops_gelu counts them), as ONNX Runtime's Pow computes x^2 and x^3. sqrtf differs from
 * powf(x, 0.5) at -0 (+0) and -inf (+inf), which are kept. */
static int pow_f32_scalar(const float *x, float y, float *o, int64_t n) {
  if (y == 1.0f)
    for (int64_t i = 0; i < n; i++) o[i] = x[i];
  else if (y == 2.0f)
    for (int64_t i = 0; i < n; i++) o[i] = x[i] * x[i];
  else if (y == 3.0f)
    for (int64_t i = 0; i < n; i++) o[i] = x[i] * x[i] * x[i];
  else if (y == -1.0f)
    for (int64_t i = 0; i < n; i++) o[i] = 1.0f / x[i];
  else if (y == 0.5f)
    for (int64_t i = 0; i < n; i++) o[i] = x[i] == -INFINITY ? INFINITY : sqrtf(x[i] + 0.0f); /* -0 + 0 = +0 */
  else
    return 0;
  return 1;
}

static void run_pow(void *c, char *const *p, const int64_t *s, int64_t n) {
  const bctx *cx = (const bctx *)c;
  if (cx->dt == ALMA_DTYPE_FLOAT32 && s[0] && !s[1]) {
    double y = alma__get_f64(p[1], cx->dt2, 0);
    if ((float)y == y && pow_f32_scalar((const float *)p[0], (float)y, (float *)p[2], n)) return;
  }
  if (cx->dt == cx->dt2 && cx->dt == ALMA_DTYPE_FLOAT32) {
    ALMA__BIN_LOOP(float, float, ALMA__LD_P, float, ALMA__ST_P, powf(x, y));
    return;
  }
  if (cx->dt == cx->dt2 && cx->dt == ALMA_DTYPE_FLOAT64) {
    ALMA__BIN_LOOP(double, double, ALMA__LD_P, double, ALMA__ST_P, pow(x, y));
    return;
  }
  /* Mixed or narrow types: a generic per-element path (Pow is rarely hot outside float32). */
  int bint = !alma__dtype_is_float(cx->dt), eint = !alma__dtype_is_float(cx->dt2);
  for (int64_t i = 0; i < n; i++) {
    if (bint && eint) {
      alma__set_i64(p[2], cx->dt, i, ipow(alma__get_i64(p[0], cx->dt, i * s[0]), alma__get_i64(p[1], cx->dt2, i * s[1])));
    } else {
      double r = pow(alma__get_f64(p[0], cx->dt, i * s[0]), alma__get_f64(p[1], cx->dt2, i * s[1]));
      if (cx->dt == ALMA_DTYPE_FLOAT32) ((float *)p[2])[i] = (float)r; /* single rounding */
      else alma__set_f64(p[2], cx->dt, i, r);
    }
  }
}

/* =============================================================================================
 * Binary ops: shapes (numpy broadcasting; opset < 7 used broadcast/axis attributes), dtype
 * rules and the op table.
 * ========================================================================================== */
enum { BK_ARITH, BK_MOD, BK_POW, BK_CMP, BK_EQ, BK_LOGIC };

/* Effective shape of B (broadcast to A) and the output shape. */
static alma_status bin_shapes(const alma_node *n, const alma_tensor *a, const alma_tensor *b, int *brank,
                              int64_t *bdims, int *orank, int64_t *odims) {
  char sa[128], sb[128];
  if (n->since_version < 7) {
    /* Legacy: B is broadcast onto A only when broadcast=1, either as one element or as a
     * contiguous run of A's dims starting at `axis` (suffix-aligned when axis is absent). */
    int64_t bc = alma__attr_i(n, "broadcast", 0);
    *orank = a->rank;
    memcpy(odims, a->dims, sizeof(int64_t) * (size_t)a->rank);
    if (!bc) {
      if (!alma__same_shape(a, b))
        return alma__op_error(n, ALMA_ERR_SHAPE, "shapes %s and %s differ and broadcast=0 (opset < 7)",
                              alma__shape_str(a->rank, a->dims, sa, sizeof sa),
                              alma__shape_str(b->rank, b->dims, sb, sizeof sb));
      *brank = b->rank;
      memcpy(bdims, b->dims, sizeof(int64_t) * (size_t)b->rank);
      return ALMA_OK;
    }
    if (alma_tensor_numel(b) == 1) {
      *brank = 0;
      return ALMA_OK;
    }
    int64_t axis = a->rank - b->rank;
    const alma_attr *ax = alma__node_attr(n, "axis");
    if (ax) axis = ax->i < 0 ? ax->i + a->rank : ax->i;
    if (b->rank > a->rank || axis < 0 || axis + b->rank > a->rank)
      return alma__op_error(n, ALMA_ERR_SHAPE, "cannot broadcast %s onto %s at axis %lld (opset < 7)",
                            alma__shape_str(b->rank, b->dims, sb, sizeof sb),
                            alma__shape_str(a->rank, a->dims, sa, sizeof sa), (long long)axis);
    *brank = a->rank;
    for (int d = 0; d < a->rank; d++) {
      int64_t v = d >= axis && d < axis + b->rank ? b->dims[d - axis] : 1;
      if (v != 1 && v != a->dims[d])
        return alma__op_error(n, ALMA_ERR_SHAPE, "cannot broadcast %s onto %s at axis %lld (opset < 7)",
                              alma__shape_str(b->rank, b->dims, sb, sizeof sb),
                              alma__shape_str(a->rank, a->dims, sa, sizeof sa), (long long)axis);
      bdims[d] = v;
    }
    return ALMA_OK;
  }
  *brank = b->rank;
  memcpy(bdims, b->dims, sizeof(int64_t) * (size_t)b->rank);
  alma_status st = alma__broadcast_shape(a->rank, a->dims, b->rank, b->dims, orank, odims);
  if (st != ALMA_OK) return alma__error_prefix(st, "node '%s' (%s): ", n->name, n->op_type);
  return ALMA_OK;
}

static alma_status bin_infer(const alma_node *n, const alma_tensor *const *in, alma_tensor *out, int kind) {
  const alma_tensor *a = in[0], *b = in[1];
  if (!a || !b) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "both inputs are required");
  alma_dtype ta = a->dtype, tb = b->dtype;
  int ok;
  switch (kind) {
    case BK_POW: ok = alma__ew_is_numeric(ta) && alma__ew_is_numeric(tb); break;
    case BK_EQ: /* strings from Equal-19 */
      ok = ta == tb && (alma__ew_is_numeric(ta) || ta == ALMA_DTYPE_BOOL || (ta == ALMA_DTYPE_STRING && n->since_version >= 19));
      break;
    case BK_LOGIC: ok = ta == ALMA_DTYPE_BOOL && tb == ALMA_DTYPE_BOOL; break;
    default: ok = ta == tb && alma__ew_is_numeric(ta); break;
  }
  if (!ok)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtypes %s and %s", alma_dtype_name(ta), alma_dtype_name(tb));
  if (kind == BK_MOD) {
    int64_t fm = alma__attr_i(n, "fmod", 0);
    if (fm != 0 && fm != 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "fmod=%lld (expects 0 or 1)", (long long)fm);
  }
  int brank, orank;
  int64_t bdims[ALMA_MAX_RANK], odims[ALMA_MAX_RANK];
  ALMA_TRY(bin_shapes(n, a, b, &brank, bdims, &orank, odims));
  alma_dtype odt = kind == BK_CMP || kind == BK_EQ || kind == BK_LOGIC ? ALMA_DTYPE_BOOL : ta;
  alma__set_shape(&out[0], odt, orank, odims);
  return ALMA_OK;
}

static alma_status bin_exec(const alma_node *n, const alma_tensor *const *in, alma_tensor *out,
                            alma__ew_run_fn run) {
  int brank, orank;
  int64_t bdims[ALMA_MAX_RANK], odims[ALMA_MAX_RANK];
  ALMA_TRY(bin_shapes(n, in[0], in[1], &brank, bdims, &orank, odims));
  if (in[0]->dtype == ALMA_DTYPE_STRING) { /* Equal only (bin_infer): byte-wise, broadcast */
    int64_t total = alma_tensor_numel(&out[0]);
    uint8_t *y = out[0].data;
    for (int64_t i = 0; i < total; i++) {
      const alma__str *x0 = alma__strs(in[0])[alma__broadcast_index(i, orank, odims, in[0]->rank, in[0]->dims)];
      const alma__str *x1 = alma__strs(in[1])[alma__broadcast_index(i, orank, odims, in[1]->rank, in[1]->dims)];
      y[i] = alma__str_cmp(x0, x1) == 0;
    }
    return ALMA_OK;
  }
  bctx c = {in[0]->dtype, in[1]->dtype, (int)alma__attr_i(n, "fmod", 0)};
  alma__ew_binary(in[0], brank, bdims, in[1]->data, in[1]->dtype, &out[0], run, &c);
  return ALMA_OK;
}

#define BINARY_OP(Name, kind, run, ...)                                                           \
  static alma_status Name##_infer(INFER_ARGS) { return bin_infer(n, in, out, kind); }            \
  static alma_status Name##_exec(EXEC_ARGS) { return bin_exec(n, in, out, run); }                \
  const alma_op_def alma__op_##Name = {.name = #Name,                                             \
                                       .domain = "",                                              \
                                       .flags = ALMA_OP_FILLS_OUTPUTS,                            \
                                       .versions = {__VA_ARGS__},                                 \
                                       .min_inputs = 2,                                           \
                                       .max_inputs = 2,                                           \
                                       .min_outputs = 1,                                          \
                                       .max_outputs = 1,                                          \
                                       .infer = Name##_infer,                                     \
                                       .exec = Name##_exec,                                       \
                                       .cost = alma__ew_cost};

BINARY_OP(Add, BK_ARITH, run_add, 1, 6, 7, 13, 14)
BINARY_OP(Sub, BK_ARITH, run_sub, 1, 6, 7, 13, 14)
BINARY_OP(Mul, BK_ARITH, run_mul, 1, 6, 7, 13, 14)
BINARY_OP(Div, BK_ARITH, run_div, 1, 6, 7, 13, 14)
BINARY_OP(Pow, BK_POW, run_pow, 1, 7, 12, 13, 15)
BINARY_OP(Mod, BK_MOD, run_mod, 10, 13, 28)
BINARY_OP(And, BK_LOGIC, run_and, 1, 7)
BINARY_OP(Or, BK_LOGIC, run_or, 1, 7)
BINARY_OP(Xor, BK_LOGIC, run_xor, 1, 7)
static alma_status Equal_infer(INFER_ARGS) { return bin_infer(n, in, out, BK_EQ); }
static alma_status Equal_exec(EXEC_ARGS) { return bin_exec(n, in, out, run_eq); }
const alma_op_def alma__op_Equal = {.name = "Equal", .domain = "", .versions = {1, 7, 11, 13, 19},
                                    .flags = ALMA_OP_STRINGS | ALMA_OP_FILLS_OUTPUTS, /* string inputs from 19 (bin_infer) */
                                    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                    .infer = Equal_infer, .exec = Equal_exec, .cost = alma__ew_cost};
BINARY_OP(Greater, BK_CMP, run_gt, 1, 7, 9, 13)
BINARY_OP(GreaterOrEqual, BK_CMP, run_ge, 12, 16)
BINARY_OP(Less, BK_CMP, run_lt, 1, 7, 9, 13)
BINARY_OP(LessOrEqual, BK_CMP, run_le, 12, 16)

/* =============================================================================================
 * Variadic Max, Min, Sum, Mean: all inputs broadcast together (opset 8+; earlier versions
 * required equal shapes, a special case), folded left to right into the output.
 * ========================================================================================== */
enum { V_MAX, V_MIN, V_SUM, V_MEAN };

static alma_status variadic_infer_k(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                    int kind) {
  if (nin < 1 || !in[0]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "needs at least one input");
  alma_dtype dt = in[0]->dtype;
  if (kind == V_MEAN ? !alma__dtype_is_float(dt) : !alma__ew_is_numeric(dt))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(dt));
  int rank = in[0]->rank;
  int64_t dims[ALMA_MAX_RANK];
  memcpy(dims, in[0]->dims, sizeof(int64_t) * (size_t)rank);
  for (int i = 1; i < nin; i++) {
    if (!in[i]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input %d is missing", i);
    if (in[i]->dtype != dt)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input %d has dtype %s, input 0 has %s", i,
                            alma_dtype_name(in[i]->dtype), alma_dtype_name(dt));
    int64_t nd[ALMA_MAX_RANK];
    int nr;
    alma_status st = alma__broadcast_shape(rank, dims, in[i]->rank, in[i]->dims, &nr, nd);
    if (st != ALMA_OK) return alma__error_prefix(st, "node '%s' (%s): ", n->name, n->op_type);
    rank = nr;
    memcpy(dims, nd, sizeof dims);
  }
  alma__set_shape(&out[0], dt, rank, dims);
  return ALMA_OK;
}

static alma_status variadic_exec_k(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                   int kind) {
  alma__ew_run_fn run = kind == V_MAX ? run_max : kind == V_MIN ? run_min : run_add;
  bctx c = {in[0]->dtype, in[0]->dtype, 0};
  alma_tensor *o = &out[0];
  if (nin == 1) {
    /* one input: a copy, broadcast to the output (which has its shape) */
    memcpy(o->data, in[0]->data, o->nbytes);
  } else {
    alma__ew_binary(in[0], in[1]->rank, in[1]->dims, in[1]->data, in[1]->dtype, o, run, &c);
    for (int i = 2; i < nin; i++) /* in place: each element reads and writes the same index */
      alma__ew_binary(o, in[i]->rank, in[i]->dims, in[i]->data, in[i]->dtype, o, run, &c);
  }
  if (kind == V_MEAN) {
    int64_t cnt = alma_tensor_numel(o);
    switch (o->dtype) {
      case ALMA_DTYPE_FLOAT32: {
        float *y = (float *)o->data, inv = 1.0f / (float)nin;
        for (int64_t i = 0; i < cnt; i++) y[i] *= inv;
        break;
      }
      default:
        for (int64_t i = 0; i < cnt; i++) alma__set_f64(o->data, o->dtype, i, alma__get_f64(o->data, o->dtype, i) / nin);
        break;
    }
  }
  return ALMA_OK;
}

#define VARIADIC_OP(Name, kind, ...)                                                            \
  static alma_status Name##_infer(INFER_ARGS) { return variadic_infer_k(n, in, nin, out, kind); } \
  static alma_status Name##_exec(EXEC_ARGS) { return variadic_exec_k(n, in, nin, out, kind); }    \
  const alma_op_def alma__op_##Name = {.name = #Name,                                           \
                                       .domain = "",                                            \
                                       .flags = ALMA_OP_FILLS_OUTPUTS,                          \
                                       .versions = {__VA_ARGS__},                               \
                                       .min_inputs = 1,                                         \
                                       .max_inputs = -1,                                        \
                                       .min_outputs = 1,                                        \
                                       .max_outputs = 1,                                        \
                                       .infer = Name##_infer,                                   \
                                       .exec = Name##_exec,                                     \
                                       .cost = alma__ew_cost};

VARIADIC_OP(Max, V_MAX, 1, 6, 8, 12, 13)
VARIADIC_OP(Min, V_MIN, 1, 6, 8, 12, 13)
VARIADIC_OP(Sum, V_SUM, 1, 6, 8, 13)
VARIADIC_OP(Mean, V_MEAN, 1, 6, 8, 13)

/* =============================================================================================
 * Where(cond, X, Y): three-way broadcasting; a byte copy whatever the dtype.
 * ========================================================================================== */
static alma_status where_infer(INFER_ARGS) {
  for (int i = 0; i < 3; i++)
    if (!in[i]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input %d is missing", i);
  if (in[0]->dtype != ALMA_DTYPE_BOOL)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "condition has dtype %s (expects bool)", alma_dtype_name(in[0]->dtype));
  if (in[1]->dtype != in[2]->dtype)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "X and Y dtypes differ (%s, %s)", alma_dtype_name(in[1]->dtype),
                          alma_dtype_name(in[2]->dtype));
  if (alma_dtype_size(in[1]->dtype) == 0)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "dtype %s", alma_dtype_name(in[1]->dtype));
  int r1, r2;
  int64_t d1[ALMA_MAX_RANK], d2[ALMA_MAX_RANK];
  alma_status st = alma__broadcast_shape(in[0]->rank, in[0]->dims, in[1]->rank, in[1]->dims, &r1, d1);
  if (st == ALMA_OK) st = alma__broadcast_shape(r1, d1, in[2]->rank, in[2]->dims, &r2, d2);
  if (st != ALMA_OK) return alma__error_prefix(st, "node '%s' (%s): ", n->name, n->op_type);
  alma__set_shape(&out[0], in[1]->dtype, r2, d2);
  return ALMA_OK;
}

#define WHERE_LOOP(T)                                                              \
  do {                                                                             \
    const uint8_t *c_ = (const uint8_t *)p[0];                                     \
    const T *x_ = (const T *)p[1], *y_ = (const T *)p[2];                          \
    T *o_ = (T *)p[3];                                                             \
    for (int64_t i = 0; i < n; i++) o_[i] = c_[i * s[0]] ? x_[i * s[1]] : y_[i * s[2]]; \
  } while (0)

static void run_where(void *c, char *const *p, const int64_t *s, int64_t n) {
  switch (*(const size_t *)c) {
    case 1: WHERE_LOOP(uint8_t); break;
    case 2: WHERE_LOOP(uint16_t); break;
    case 4: WHERE_LOOP(uint32_t); break;
    default: WHERE_LOOP(uint64_t); break;
  }
}

static alma_status where_exec(EXEC_ARGS) {
  alma__ew_operand ops[3] = {alma__ew_op(in[0]), alma__ew_op(in[1]), alma__ew_op(in[2])};
  size_t esz = alma_dtype_size(out[0].dtype);
  alma__ew_iterate(3, ops, out[0].rank, out[0].dims, out[0].data, esz, run_where, &esz);
  return ALMA_OK;
}

const alma_op_def alma__op_Where = {.name = "Where", .flags = ALMA_OP_STRINGS | ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {9, 16}, .min_inputs = 3,
                                    .max_inputs = 3, .min_outputs = 1, .max_outputs = 1, .infer = where_infer,
                                    .exec = where_exec, .cost = alma__ew_cost};

/* =============================================================================================
 * Clip: bounds are float attributes before opset 11 (defaulting to the float range), optional
 * scalar inputs of the input's dtype from 11 (defaulting to the dtype's range). min > max gives
 * max everywhere, as the spec says.
 * ========================================================================================== */
static alma_status clip_infer(INFER_ARGS) {
  const alma_tensor *x = in[0];
  if (!alma__ew_is_numeric(x->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  if (n->since_version < 11) {
    if (!alma__dtype_is_float(x->dtype))
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s (Clip before opset 11 takes floats)",
                            alma_dtype_name(x->dtype));
  } else {
    for (int i = 1; i < nin && i < 3; i++) {
      if (!in[i]) continue;
      if (in[i]->dtype != x->dtype)
        return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%s has dtype %s, input has %s", i == 1 ? "min" : "max",
                              alma_dtype_name(in[i]->dtype), alma_dtype_name(x->dtype));
      if (alma_tensor_numel(in[i]) != 1)
        return alma__op_error(n, ALMA_ERR_SHAPE, "%s must be a scalar (has %lld elements)", i == 1 ? "min" : "max",
                              (long long)alma_tensor_numel(in[i]));
    }
  }
  alma__set_shape(&out[0], x->dtype, x->rank, x->dims);
  return ALMA_OK;
}

#define CLIP_LOOP(T, CT, LD, ST)                          \
  do {                                                    \
    const T *x_ = (const T *)x->data;                     \
    T *y_ = (T *)y->data;                                 \
    for (int64_t i = 0; i < cnt; i++) {                   \
      CT v = LD(x_[i]);                                   \
      v = v < lo ? lo : v;                                \
      v = v > hi ? hi : v;                                \
      ST(y_[i], v);                                       \
    }                                                     \
  } while (0)

static alma_status clip_exec(EXEC_ARGS) {
  const alma_tensor *x = in[0];
  alma_tensor *y = &out[0];
  int64_t cnt = alma_tensor_numel(x);
  const alma_tensor *tmin = n->since_version >= 11 && nin > 1 ? in[1] : NULL;
  const alma_tensor *tmax = n->since_version >= 11 && nin > 2 ? in[2] : NULL;
  if (alma__dtype_is_float(x->dtype)) {
    double dlo = -INFINITY, dhi = INFINITY;
    if (n->since_version < 11) {
      dlo = alma__attr_f(n, "min", -FLT_MAX);
      dhi = alma__attr_f(n, "max", FLT_MAX);
    }
    if (tmin) dlo = alma__get_f64(tmin->data, tmin->dtype, 0);
    if (tmax) dhi = alma__get_f64(tmax->data, tmax->dtype, 0);
    switch (x->dtype) {
#define F(D, T, CT, LD, ST)            \
  case D: {                            \
    CT lo = (CT)dlo, hi = (CT)dhi;     \
    CLIP_LOOP(T, CT, LD, ST);          \
    break;                             \
  }
      ALMA__EW_FLOAT_TYPES(F)
#undef F
      default: break;
    }
  } else if (alma__dtype_is_signed(x->dtype)) {
    int64_t lo = tmin ? alma__get_i64(tmin->data, tmin->dtype, 0) : INT64_MIN;
    int64_t hi = tmax ? alma__get_i64(tmax->data, tmax->dtype, 0) : INT64_MAX;
    switch (x->dtype) {
#define S(D, T, CT, LD, ST)               \
  case D:                                 \
    CLIP_LOOP(T, int64_t, LD, ST);        \
    break;
      ALMA__EW_SINT_TYPES(S)
#undef S
      default: break;
    }
  } else {
    uint64_t lo = tmin ? (uint64_t)alma__get_i64(tmin->data, tmin->dtype, 0) : 0;
    uint64_t hi = tmax ? (uint64_t)alma__get_i64(tmax->data, tmax->dtype, 0) : UINT64_MAX;
    switch (x->dtype) {
#define U(D, T, CT, LD, ST)               \
  case D:                                 \
    CLIP_LOOP(T, uint64_t, LD, ST);       \
    break;
      ALMA__EW_UINT_TYPES(U)
#undef U
      default: break;
    }
  }
  return ALMA_OK;
}

const alma_op_def alma__op_Clip = {.name = "Clip", .flags = ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 6, 11, 12, 13}, .min_inputs = 1,
                                   .max_inputs = 3, .min_outputs = 1, .max_outputs = 1, .infer = clip_infer,
                                   .exec = clip_exec, .cost = alma__ew_cost};
