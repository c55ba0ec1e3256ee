/* Elementwise operators beyond alma's core set, used by models from many exporters:
 * ThresholdedRelu Shrink Celu Mish Sinh Cosh Asinh Acosh Atanh (float unary, ew.h driver),
 * IsInf IsNaN (float -> bool), BitwiseAnd BitwiseOr BitwiseXor BitwiseNot BitShift (integers,
 * numpy broadcasting) and Det (batched determinant). */
#include <tgmath.h>

#include "ops/ew.h"
#include "ops/nn_util.h"
#include "ops/op_args.h"

/* ---- float unary functions (written once with tgmath for float and double) ------------------- */
#define UF(name, EXPR)                                                                           \
  static void name##_f32(const float *x, float *y, int64_t n, const alma__ew_uparam *p) {        \
    typedef float T;                                                                             \
    const T a __attribute__((unused)) = (T)p->alpha, b __attribute__((unused)) = (T)p->beta;     \
    for (int64_t i = 0; i < n; i++) {                                                            \
      T v = x[i];                                                                                \
      y[i] = (EXPR);                                                                             \
    }                                                                                            \
  }                                                                                              \
  static void name##_f64(const double *x, double *y, int64_t n, const alma__ew_uparam *p) {      \
    typedef double T;                                                                            \
    const T a __attribute__((unused)) = (T)p->alpha, b __attribute__((unused)) = (T)p->beta;     \
    for (int64_t i = 0; i < n; i++) {                                                            \
      T v = x[i];                                                                                \
      y[i] = (EXPR);                                                                             \
    }                                                                                            \
  }

UF(sinh_k, sinh(v))
UF(cosh_k, cosh(v))
UF(asinh_k, asinh(v))
UF(acosh_k, acosh(v))
UF(atanh_k, atanh(v))
UF(threlu_k, v > a ? v : (T)0)
/* alpha: lambd, beta: bias */
UF(shrink_k, v < -a ? v + b : v > a ? v - b : (T)0)
UF(celu_k, fmax((T)0, v) + fmin((T)0, a * (exp(v / a) - 1)))
/* x * tanh(softplus(x)), softplus without overflow for large x */
UF(mish_k, v * tanh(v > 0 ? v + log1p(exp(-v)) : log1p(exp(v))))

#define FLOAT_UNARY_OP(Name, fn, setup, ...)                                                   \
  static alma_status Name##_exec(EXEC_ARGS) {                                                  \
    (void)ctx, (void)nin, (void)nout;                                                          \
    alma__ew_uparam p = {0};                                                                   \
    setup;                                                                                     \
    return alma__ew_unary_float_run(n, in[0], &out[0], fn##_f32, fn##_f64, &p);                \
  }                                                                                            \
  const alma_op_def alma__op_##Name = {.name = #Name,                                          \
                                       .domain = "",                                           \
                                       .versions = {__VA_ARGS__},                              \
                                       .min_inputs = 1,                                        \
                                       .max_inputs = 1,                                        \
                                       .min_outputs = 1,                                       \
                                       .max_outputs = 1,                                       \
                                       .infer = alma__ew_unary_float_infer,                    \
                                       .exec = Name##_exec,                                    \
                                       .cost = alma__ew_cost};

FLOAT_UNARY_OP(Sinh, sinh_k, (void)0, 9, 22)
FLOAT_UNARY_OP(Cosh, cosh_k, (void)0, 9, 22)
FLOAT_UNARY_OP(Asinh, asinh_k, (void)0, 9, 22)
FLOAT_UNARY_OP(Acosh, acosh_k, (void)0, 9, 22)
FLOAT_UNARY_OP(Atanh, atanh_k, (void)0, 9, 22)
FLOAT_UNARY_OP(ThresholdedRelu, threlu_k, p.alpha = alma__attr_f(n, "alpha", 1.0f), 10, 22)
FLOAT_UNARY_OP(Mish, mish_k, (void)0, 18, 22)

/* ---- Celu: alpha must be non-zero (it divides x) --------------------------------------------- */
static alma_status celu_infer(INFER_ARGS) {
  float a = alma__attr_f(n, "alpha", 1.0f);
  if (!(a != 0) || !isfinite(a)) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "alpha=%g (expects a non-zero finite value)", a);
  if (in[0]->dtype != ALMA_DTYPE_FLOAT32 && in[0]->dtype != ALMA_DTYPE_FLOAT16 && in[0]->dtype != ALMA_DTYPE_BFLOAT16 &&
      in[0]->dtype != ALMA_DTYPE_FLOAT64)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(in[0]->dtype));
  return alma__ew_unary_float_infer(n, in, nin, out, nout);
}
static alma_status celu_exec(EXEC_ARGS) {
  (void)ctx, (void)nin, (void)nout;
  alma__ew_uparam p = {.alpha = alma__attr_f(n, "alpha", 1.0f)};
  return alma__ew_unary_float_run(n, in[0], &out[0], celu_k_f32, celu_k_f64, &p);
}
const alma_op_def alma__op_Celu = {.name = "Celu", .domain = "", .versions = {12}, .min_inputs = 1, .max_inputs = 1,
                                   .min_outputs = 1, .max_outputs = 1, .infer = celu_infer, .exec = celu_exec,
                                   .cost = alma__ew_cost};

/* ---- Shrink: any numeric type; integers compute x -/+ bias in double and convert back --------- */
static alma_status shrink_infer(INFER_ARGS) {
  (void)nin, (void)nout;
  float l = alma__attr_f(n, "lambd", 0.5f), b = alma__attr_f(n, "bias", 0.0f);
  if (!isfinite(l) || !isfinite(b)) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "lambd=%g bias=%g (expects finite values)", l, b);
  if (!alma__ew_is_numeric(in[0]->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(in[0]->dtype));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}
static alma_status shrink_exec(EXEC_ARGS) {
  (void)ctx, (void)nin, (void)nout;
  alma__ew_uparam p = {.alpha = alma__attr_f(n, "lambd", 0.5f), .beta = alma__attr_f(n, "bias", 0.0f)};
  const alma_tensor *x = in[0];
  if (alma__dtype_is_float(x->dtype)) return alma__ew_unary_float_run(n, x, &out[0], shrink_k_f32, shrink_k_f64, &p);
  int64_t cnt = alma_tensor_numel(x);
  double l = p.alpha, b = p.beta;
  for (int64_t i = 0; i < cnt; i++) {
    double v = (double)alma__get_i64(x->data, x->dtype, i);
    double r = v < -l ? v + b : v > l ? v - b : 0.0;
    alma__set_f64(out[0].data, x->dtype, i, r);
  }
  return ALMA_OK;
}
const alma_op_def alma__op_Shrink = {.name = "Shrink", .domain = "", .versions = {9}, .min_inputs = 1, .max_inputs = 1,
                                     .min_outputs = 1, .max_outputs = 1, .infer = shrink_infer, .exec = shrink_exec,
                                     .cost = alma__ew_cost};

/* ---- IsInf / IsNaN: float -> bool ------------------------------------------------------------ */
static alma_status isclass_infer(INFER_ARGS) {
  (void)nin, (void)nout;
  if (!alma__dtype_is_float(in[0]->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s (expects a floating-point type)",
                          alma_dtype_name(in[0]->dtype));
  for (int i = 0; i < n->n_attrs; i++) {
    const alma_attr *a = &n->attrs[i];
    if ((!strcmp(a->name, "detect_negative") || !strcmp(a->name, "detect_positive")) && a->i != 0 && a->i != 1)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%s=%lld (expects 0 or 1)", a->name, (long long)a->i);
  }
  alma__set_shape(&out[0], ALMA_DTYPE_BOOL, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

/* mode: 0 NaN, else bit 1 = detect +inf, bit 2 = detect -inf */
#define ISCLASS_LOOP(T, LD)                                                              \
  do {                                                                                   \
    const T *xs = (const T *)x->data;                                                    \
    for (int64_t i = 0; i < cnt; i++) {                                                  \
      float v = LD(xs[i]);                                                               \
      y[i] = mode == 0 ? isnan(v) : isinf(v) && (v > 0 ? (mode & 1) : (mode & 2)) != 0;  \
    }                                                                                    \
  } while (0)

static alma_status isclass_run(const alma_node *n, const alma_tensor *x, alma_tensor *o, int mode) {
  int64_t cnt = alma_tensor_numel(x);
  uint8_t *y = (uint8_t *)o->data;
  switch (x->dtype) {
    case ALMA_DTYPE_FLOAT32: ISCLASS_LOOP(float, ALMA__LD_P); break;
    case ALMA_DTYPE_FLOAT16: ISCLASS_LOOP(uint16_t, ALMA__LD_H); break;
    case ALMA_DTYPE_BFLOAT16: ISCLASS_LOOP(uint16_t, ALMA__LD_B); break;
    case ALMA_DTYPE_FLOAT64: {
      const double *xs = (const double *)x->data;
      for (int64_t i = 0; i < cnt; i++) {
        double v = xs[i];
        y[i] = mode == 0 ? isnan(v) : isinf(v) && (v > 0 ? (mode & 1) : (mode & 2)) != 0;
      }
      break;
    }
    default: return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  }
  return ALMA_OK;
}
static alma_status isnan_exec(EXEC_ARGS) {
  (void)ctx, (void)nin, (void)nout;
  return isclass_run(n, in[0], &out[0], 0);
}
static alma_status isinf_exec(EXEC_ARGS) {
  (void)ctx, (void)nin, (void)nout;
  int mode = (alma__attr_i(n, "detect_positive", 1) ? 1 : 0) | (alma__attr_i(n, "detect_negative", 1) ? 2 : 0);
  if (!mode) return ALMA_OK; /* detects nothing: all false (outputs arrive zeroed) */
  return isclass_run(n, in[0], &out[0], mode);
}
const alma_op_def alma__op_IsNaN = {.name = "IsNaN", .domain = "", .versions = {9, 13, 20}, .min_inputs = 1,
                                    .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .infer = isclass_infer,
                                    .exec = isnan_exec, .cost = alma__ew_cost};
const alma_op_def alma__op_IsInf = {.name = "IsInf", .domain = "", .versions = {10, 20}, .min_inputs = 1,
                                    .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .infer = isclass_infer,
                                    .exec = isinf_exec, .cost = alma__ew_cost};

/* ---- Bitwise ops and BitShift: integers with numpy broadcasting ------------------------------- */
enum { BW_AND, BW_OR, BW_XOR, BW_SHL, BW_SHR };

typedef struct {
  alma_dtype dt;
  int op;
} bw_ctx;

/* Shifts by the operand's bit width or more give 0 (C leaves them undefined). */
#define BW_SHIFT_L(T, x, y) ((uint64_t)(y) >= sizeof(T) * 8 ? (T)0 : (T)((x) << (y)))
#define BW_SHIFT_R(T, x, y) ((uint64_t)(y) >= sizeof(T) * 8 ? (T)0 : (T)((x) >> (y)))

#define BW_CASE(D, T, CT, LD, ST)                                                     \
  case D:                                                                             \
    switch (c->op) {                                                                  \
      case BW_AND: ALMA__BIN_LOOP(T, CT, LD, T, ST, (T)(x & y)); break;               \
      case BW_OR: ALMA__BIN_LOOP(T, CT, LD, T, ST, (T)(x | y)); break;                \
      case BW_XOR: ALMA__BIN_LOOP(T, CT, LD, T, ST, (T)(x ^ y)); break;               \
      case BW_SHL: ALMA__BIN_LOOP(T, CT, LD, T, ST, BW_SHIFT_L(T, x, y)); break;      \
      default: ALMA__BIN_LOOP(T, CT, LD, T, ST, BW_SHIFT_R(T, x, y)); break;          \
    }                                                                                 \
    break;

/* BitShift-28's arithmetic right shift of a signed type: a shift by a negative amount or by the
 * width or more leaves only the sign extension (-1 or 0). */
#define BW_SAR(T, x, y) ((y) < 0 || (uint64_t)(y) >= sizeof(T) * 8 ? (T)((x) < 0 ? -1 : 0) : (T)((x) >> (y)))
#define SAR_CASE(D, T, CT, LD, ST)                       \
  case D:                                                \
    ALMA__BIN_LOOP(T, CT, LD, T, ST, BW_SAR(T, x, y));   \
    break;

static void run_bitwise(void *cv, char *const *p, const int64_t *s, int64_t n) {
  const bw_ctx *c = cv;
  switch (c->dt) {
    ALMA__EW_UINT_TYPES(BW_CASE)
    ALMA__EW_SINT_TYPES(SAR_CASE)
    default: break;
  }
}

/* Signed types through their unsigned twins: the bits are the same, and no signed overflow. */
static alma_dtype bw_unsigned(alma_dtype t) {
  switch (t) {
    case ALMA_DTYPE_INT8: return ALMA_DTYPE_UINT8;
    case ALMA_DTYPE_INT16: return ALMA_DTYPE_UINT16;
    case ALMA_DTYPE_INT32: return ALMA_DTYPE_UINT32;
    case ALMA_DTYPE_INT64: return ALMA_DTYPE_UINT64;
    default: return t;
  }
}

static alma_status bw_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int shift) {
  const alma_tensor *a = in[0], *b = nin > 1 ? in[1] : NULL;
  if (!a || !b) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "both inputs are required");
  /* BitShift takes signed types from opset 28 */
  int uns = shift && n->since_version < 28;
  int ok = a->dtype == b->dtype && alma__dtype_is_int(a->dtype) && (!uns || !alma__dtype_is_signed(a->dtype));
  if (!ok)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtypes %s and %s (expects the same %sinteger type)",
                          alma_dtype_name(a->dtype), alma_dtype_name(b->dtype), uns ? "unsigned " : "");
  if (shift) {
    const char *d = alma__attr_s(n, "direction", "");
    if (strcmp(d, "LEFT") && strcmp(d, "RIGHT"))
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "direction='%s' (expects LEFT or RIGHT)", d);
  }
  int r;
  int64_t d[ALMA_MAX_RANK];
  alma_status st = alma__broadcast_shape(a->rank, a->dims, b->rank, b->dims, &r, d);
  if (st != ALMA_OK) return alma__error_prefix(st, "node '%s' (%s): ", n->name, n->op_type);
  alma__set_shape(&out[0], a->dtype, r, d);
  return ALMA_OK;
}

static alma_status bw_exec(const alma_node *n, const alma_tensor *const *in, alma_tensor *out, int op) {
  bw_ctx c = {bw_unsigned(in[0]->dtype), op};
  if (op == BW_SHL && !strcmp(alma__attr_s(n, "direction", ""), "RIGHT")) {
    c.op = BW_SHR;
    if (alma__dtype_is_signed(in[0]->dtype)) c.dt = in[0]->dtype; /* arithmetic: on the signed type */
  }
  alma__ew_binary(in[0], in[1]->rank, in[1]->dims, in[1]->data, in[1]->dtype, &out[0], run_bitwise, &c);
  return ALMA_OK;
}

#define BW_OP(Name, op, shift, ...)                                                                     \
  static alma_status Name##_infer(INFER_ARGS) {                                                         \
    (void)nout;                                                                                         \
    return bw_infer(n, in, nin, out, shift);                                                            \
  }                                                                                                     \
  static alma_status Name##_exec(EXEC_ARGS) {                                                           \
    (void)ctx, (void)nin, (void)nout;                                                                   \
    return bw_exec(n, in, out, op);                                                                     \
  }                                                                                                     \
  const alma_op_def alma__op_##Name = {.name = #Name, .domain = "", .versions = {__VA_ARGS__},          \
                                       .min_inputs = 2, .max_inputs = 2, .min_outputs = 1,              \
                                       .max_outputs = 1, .infer = Name##_infer, .exec = Name##_exec,    \
                                       .cost = alma__ew_cost};

BW_OP(BitwiseAnd, BW_AND, 0, 18)
BW_OP(BitwiseOr, BW_OR, 0, 18)
BW_OP(BitwiseXor, BW_XOR, 0, 18)
BW_OP(BitShift, BW_SHL, 1, 11, 28)

static alma_status bwnot_infer(INFER_ARGS) {
  (void)nin, (void)nout;
  if (!alma__dtype_is_int(in[0]->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s (expects an integer type)", alma_dtype_name(in[0]->dtype));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}
static alma_status bwnot_exec(EXEC_ARGS) {
  (void)ctx, (void)nin, (void)nout, (void)n;
  /* Byte-wise complement: the same bits as ~x for every integer width. */
  const uint8_t *x = in[0]->data;
  uint8_t *y = out[0].data;
  size_t nb = (size_t)alma_tensor_numel(in[0]) * alma_dtype_size(in[0]->dtype);
  for (size_t i = 0; i < nb; i++) y[i] = (uint8_t)~x[i];
  return ALMA_OK;
}
const alma_op_def alma__op_BitwiseNot = {.name = "BitwiseNot", .domain = "", .versions = {18}, .min_inputs = 1,
                                         .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .infer = bwnot_infer,
                                         .exec = bwnot_exec, .cost = alma__ew_cost};

/* ---- Det: [*, M, M] -> [*], LU with partial pivoting in double --------------------------------- */
static alma_status det_infer(INFER_ARGS) {
  (void)nin, (void)nout;
  const alma_tensor *x = in[0];
  if (!alma__dtype_is_float(x->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s (expects a floating-point type)", alma_dtype_name(x->dtype));
  char s[128];
  if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
    return alma__op_error(n, ALMA_ERR_SHAPE, "input %s is not a batch of square matrices",
                          alma__shape_str(x->rank, x->dims, s, sizeof s));
  alma__set_shape(&out[0], x->dtype, x->rank - 2, x->dims);
  return ALMA_OK;
}

static double det_lu(double *a, int64_t m) {
  double det = 1.0;
  for (int64_t k = 0; k < m; k++) {
    int64_t piv = k;
    for (int64_t i = k + 1; i < m; i++)
      if (fabs(a[i * m + k]) > fabs(a[piv * m + k])) piv = i;
    if (a[piv * m + k] == 0) return 0.0;
    if (piv != k) {
      for (int64_t j = 0; j < m; j++) {
        double t = a[k * m + j];
        a[k * m + j] = a[piv * m + j];
        a[piv * m + j] = t;
      }
      det = -det;
    }
    double p = a[k * m + k];
    det *= p;
    for (int64_t i = k + 1; i < m; i++) {
      double f = a[i * m + k] / p;
      if (f == 0) continue;
      for (int64_t j = k + 1; j < m; j++) a[i * m + j] -= f * a[k * m + j];
    }
  }
  return det;
}

static alma_status det_exec(EXEC_ARGS) {
  (void)ctx, (void)nin, (void)nout;
  const alma_tensor *x = in[0];
  int64_t m = x->dims[x->rank - 1], batch = alma__numel(x->rank - 2, x->dims);
  if (batch == 0) return ALMA_OK;
  double *a = alma__nn_alloc(n, (size_t)(m * m), sizeof(double));
  if (!a) return ALMA_ERR_NOMEM;
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < m * m; i++) a[i] = alma__get_f64(x->data, x->dtype, b * m * m + i);
    alma__set_f64(out[0].data, out[0].dtype, b, det_lu(a, m));
  }
  free(a);
  return ALMA_OK;
}
const alma_op_def alma__op_Det = {.name = "Det", .domain = "", .versions = {11, 22}, .min_inputs = 1, .max_inputs = 1,
                                  .min_outputs = 1, .max_outputs = 1, .infer = det_infer, .exec = det_exec};
