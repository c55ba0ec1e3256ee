/* Activations: Relu LeakyRelu Elu Selu Sigmoid HardSigmoid HardSwish Softplus Softsign Gelu
 * PRelu. Float kernels are written once with tgmath (T = float or double); float16/bfloat16 go
 * through float32 chunks (ew.h). Relu and PRelu also take integers. */
#include <tgmath.h>

#include "ops/ew.h"
#include "ops/op_args.h"
#include "ops/softmax_row.h"

/* v is the element, a/b/g the parameters alpha/beta/gamma converted to T. */
#define ACT(name, EXPR)                                                                          \
  static void name##_f32(const float *x, float *y, int64_t n, const alma__ew_uparam *p) {        \
    typedef float T;                                                                             \
    const T a __attribute__((unused)) = (T)p->alpha, b __attribute__((unused)) = (T)p->beta,     \
              g __attribute__((unused)) = (T)p->gamma;                                           \
    for (int64_t i = 0; i < n; i++) {                                                            \
      T v = x[i];                                                                                \
      y[i] = (EXPR);                                                                             \
    }                                                                                            \
  }                                                                                              \
  static void name##_f64(const double *x, double *y, int64_t n, const alma__ew_uparam *p) {      \
    typedef double T;                                                                            \
    const T a __attribute__((unused)) = (T)p->alpha, b __attribute__((unused)) = (T)p->beta,     \
              g __attribute__((unused)) = (T)p->gamma;                                           \
    for (int64_t i = 0; i < n; i++) {                                                            \
      T v = x[i];                                                                                \
      y[i] = (EXPR);                                                                             \
    }                                                                                            \
  }

ACT(relu_k, v < 0 ? (T)0 : v) /* NaN passes through, as in numpy.maximum(x, 0) */
ACT(leaky_k, v < 0 ? a * v : v)
ACT(elu_k, v < 0 ? a * (exp(v) - 1) : v)
ACT(selu_k, v > 0 ? g * v : g * (a * exp(v) - a))
/* Stable on both sides: exp never overflows. float32 on the vectorised expf (softmax_row.h), the
 * same two-sided formula. */
static void sigmoid_k_f32(const float *x, float *y, int64_t n, const alma__ew_uparam *p) {
  (void)p;
  alma__sigmoid_row(y, x, n, 0);
}
static void sigmoid_k_f64(const double *x, double *y, int64_t n, const alma__ew_uparam *p) {
  (void)p;
  for (int64_t i = 0; i < n; i++) y[i] = x[i] >= 0 ? 1 / (1 + exp(-x[i])) : exp(x[i]) / (1 + exp(x[i]));
}
ACT(hsigmoid_k, fmax((T)0, fmin((T)1, a * v + b)))
ACT(hswish_k, v * fmax((T)0, fmin((T)1, v / 6 + (T)0.5)))
/* log(1+e^v) without overflow for large v. */
ACT(softplus_k, v > 0 ? v + log1p(exp(-v)) : log1p(exp(v)))
ACT(softsign_k, v / (1 + fabs(v)))
ACT(gelu_k, (T)0.5 * v * (1 + erf(v * (T)0.70710678118654752440)))
/* the tanh form: float32 on the vectorised tanhf (softmax_row.h), the same formula */
static void gelu_tanh_k_f32(const float *x, float *y, int64_t n, const alma__ew_uparam *p) {
  (void)p;
  alma__gelu_tanh_row(y, x, n);
}
static void gelu_tanh_k_f64(const double *x, double *y, int64_t n, const alma__ew_uparam *p) {
  (void)p;
  for (int64_t i = 0; i < n; i++) {
    double v = x[i];
    y[i] = 0.5 * v * (1 + tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v)));
  }
}

static alma_status act_infer(INFER_ARGS) { return alma__ew_unary_float_infer(n, in, nin, out, nout); }

#define ACT_OP(Name, fn, setup, ...)                                                           \
  static alma_status Name##_exec(EXEC_ARGS) {                                                  \
    alma__ew_uparam p = {0};                                                                   \
    setup;                                                                                     \
    return alma__ew_unary_float_run(n, in[0], &out[0], fn##_f32, fn##_f64, &p);                \
  }                                                                                            \
  const alma_op_def alma__op_##Name = {.name = #Name,                                          \
                                       .domain = "",                                           \
                                       .flags = ALMA_OP_FILLS_OUTPUTS,                         \
                                       .versions = {__VA_ARGS__},                              \
                                       .min_inputs = 1,                                        \
                                       .max_inputs = 1,                                        \
                                       .min_outputs = 1,                                       \
                                       .max_outputs = 1,                                       \
                                       .infer = act_infer,                                     \
                                       .exec = Name##_exec,                                    \
                                       .cost = alma__ew_cost};

ACT_OP(LeakyRelu, leaky_k, p.alpha = alma__attr_f(n, "alpha", 0.01f), 1, 6, 16)
ACT_OP(Elu, elu_k, p.alpha = alma__attr_f(n, "alpha", 1.0f), 1, 6, 22)
ACT_OP(Selu, selu_k,
       (p.alpha = alma__attr_f(n, "alpha", 1.67326319217681884765625f),
        p.gamma = alma__attr_f(n, "gamma", 1.05070102214813232421875f)),
       1, 6, 22)
ACT_OP(Sigmoid, sigmoid_k, (void)0, 1, 6, 13)
ACT_OP(HardSigmoid, hsigmoid_k,
       (p.alpha = alma__attr_f(n, "alpha", 0.2f), p.beta = alma__attr_f(n, "beta", 0.5f)), 1, 6, 22)
ACT_OP(HardSwish, hswish_k, (void)0, 14, 22)
ACT_OP(Softplus, softplus_k, (void)0, 1, 22)
ACT_OP(Softsign, softsign_k, (void)0, 1, 22)

/* ---- Relu: floats, and signed integers from opset 14 ----------------------------------------- */
static alma_status relu_infer(INFER_ARGS) {
  alma_dtype t = in[0]->dtype;
  if (!alma__dtype_is_float(t) && !(alma__dtype_is_int(t) && alma__dtype_is_signed(t)))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(t));
  alma__set_shape(&out[0], t, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

static alma_status relu_exec(EXEC_ARGS) {
  const alma_tensor *x = in[0];
  int64_t cnt = alma_tensor_numel(x);
  switch (x->dtype) {
#define S(D, T, CT, LD, ST)                                               \
  case D: {                                                               \
    const T *xs = (const T *)x->data;                                     \
    T *ys = (T *)out[0].data;                                             \
    for (int64_t i = 0; i < cnt; i++) ys[i] = xs[i] > 0 ? xs[i] : 0;      \
    return ALMA_OK;                                                       \
  }
    ALMA__EW_SINT_TYPES(S)
#undef S
    default: return alma__ew_unary_float_run(n, x, &out[0], relu_k_f32, relu_k_f64, NULL);
  }
}

const alma_op_def alma__op_Relu = {.name = "Relu", .flags = ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 6, 13, 14}, .min_inputs = 1,
                                   .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .infer = relu_infer,
                                   .exec = relu_exec, .cost = alma__ew_cost};

/* ---- Gelu (opset 20): approximate = "none" | "tanh" ------------------------------------------ */
static alma_status gelu_mode(const alma_node *n, int *tanh_mode) {
  const char *m = alma__attr_s(n, "approximate", "none");
  if (!strcmp(m, "none")) *tanh_mode = 0;
  else if (!strcmp(m, "tanh")) *tanh_mode = 1;
  else return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "approximate='%s' (expects 'none' or 'tanh')", m);
  return ALMA_OK;
}
static alma_status gelu_infer(INFER_ARGS) {
  int t;
  ALMA_TRY(gelu_mode(n, &t));
  return alma__ew_unary_float_infer(n, in, nin, out, nout);
}
static alma_status gelu_exec(EXEC_ARGS) {
  int t;
  ALMA_TRY(gelu_mode(n, &t));
  if (t) return alma__ew_unary_float_run(n, in[0], &out[0], gelu_tanh_k_f32, gelu_tanh_k_f64, NULL);
  return alma__ew_unary_float_run(n, in[0], &out[0], gelu_k_f32, gelu_k_f64, NULL);
}
const alma_op_def alma__op_Gelu = {.name = "Gelu", .flags = ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {20}, .min_inputs = 1,
                                   .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .infer = gelu_infer,
                                   .exec = gelu_exec, .cost = alma__ew_cost};

/* ---- PRelu: slope broadcasts onto X (unidirectionally); the output has X's shape ------------- */
static alma_status prelu_infer(INFER_ARGS) {
  const alma_tensor *x = in[0], *s = in[1];
  if (!s) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "slope is required");
  if (!alma__ew_is_numeric(x->dtype) || s->dtype != x->dtype)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtypes %s and %s", alma_dtype_name(x->dtype),
                          alma_dtype_name(s->dtype));
  int r;
  int64_t d[ALMA_MAX_RANK];
  alma_status st = alma__broadcast_shape(x->rank, x->dims, s->rank, s->dims, &r, d);
  if (st != ALMA_OK) return alma__error_prefix(st, "node '%s' (%s): ", n->name, n->op_type);
  if (r != x->rank || memcmp(d, x->dims, sizeof(int64_t) * (size_t)r)) {
    char sx[128], ss[128];
    return alma__op_error(n, ALMA_ERR_SHAPE, "slope %s does not broadcast onto X %s",
                          alma__shape_str(s->rank, s->dims, ss, sizeof ss), alma__shape_str(x->rank, x->dims, sx, sizeof sx));
  }
  alma__set_shape(&out[0], x->dtype, x->rank, x->dims);
  return ALMA_OK;
}

#define PRELU_CASE(D, T, CT, LD, ST, E) \
  case D:                               \
    ALMA__BIN_LOOP(T, CT, LD, T, ST, E); \
    break;
#define PF(D, T, CT, LD, ST) PRELU_CASE(D, T, CT, LD, ST, x < 0 ? x * y : x)
#define PS(D, T, CT, LD, ST) PRELU_CASE(D, T, CT, LD, ST, x < 0 ? (T)((uint64_t)x * (uint64_t)y) : x)
#define PU(D, T, CT, LD, ST) PRELU_CASE(D, T, CT, LD, ST, ((void)y, x)) /* never negative */

static void run_prelu(void *c, char *const *p, const int64_t *s, int64_t n) {
  switch (*(const alma_dtype *)c) {
    ALMA__EW_FLOAT_TYPES(PF)
    ALMA__EW_SINT_TYPES(PS)
    ALMA__EW_UINT_TYPES(PU)
    default: break;
  }
}

static alma_status prelu_exec(EXEC_ARGS) {
  alma_dtype dt = in[0]->dtype;
  alma__ew_binary(in[0], in[1]->rank, in[1]->dims, in[1]->data, in[1]->dtype, &out[0], run_prelu, &dt);
  return ALMA_OK;
}

const alma_op_def alma__op_PRelu = {.name = "PRelu", .flags = ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 6, 7, 9, 16}, .min_inputs = 2,
                                    .max_inputs = 2, .min_outputs = 1, .max_outputs = 1, .infer = prelu_infer,
                                    .exec = prelu_exec, .cost = alma__ew_cost};
