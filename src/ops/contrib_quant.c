/* ONNX Runtime's quantized contrib operators (domain com.microsoft, version 1): the ones its quantizer
 * writes in QOperator format (quantize_static(..., quant_format=QuantFormat.QOperator)) and its graph
 * optimizer writes for dynamically quantized MatMuls:
 *   QGemm, QLinearAdd, QLinearMul, QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat,
 *   QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QLinearWhere, QLinearReduceMean,
 *   MatMulIntegerToFloat, DynamicQuantizeMatMul.
 *
 * These operators have no ONNX reference: their meaning is ONNX Runtime's CPU kernels. Each kernel
 * here repeats that arithmetic on x86-64 to the bit: the same float32 operations in the same order,
 * fused multiply-adds where MLAS's AVX2 kernels use them (QLinearAdd), round half to even, the same
 * saturation, the same lookup tables (QLinearSigmoid/LeakyRelu/Concat/Where, QLinearSoftmax's exp
 * table), checked against onnxruntime 1.32 (tests/ops_contrib/gen_contrib_cases.py). Integer products
 * are exact, as on ARM or x86 with VNNI; MLAS's AVX2 u8s8 kernels without VNNI can saturate 16-bit
 * pair sums, a hardware artefact alma does not reproduce. QLinearReduceMean has no CPU kernel in ONNX
 * Runtime; it uses QLinearGlobalAveragePool's arithmetic over the reduced axes.
 *
 * Scales and zero points are per tensor (one value) everywhere ONNX Runtime requires it; QGemm's B and
 * the MatMul*ToFloat ops' B also take per-column parameters. */
#include <float.h>
#include <math.h>

#include "ops/nn_util.h"

/* A multiply then an add must stay two float32 roundings, as in ONNX Runtime, even where the compiler
 * could fuse them (-march with FMA); the fused ones are written with fmaf. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

/* ==== shared helpers ========================================================================== */


static int is_q8(alma_dtype t) { return t == ALMA_DTYPE_UINT8 || t == ALMA_DTYPE_INT8; }

static void q8_range(alma_dtype t, int32_t *lo, int32_t *hi) {
  *lo = t == ALMA_DTYPE_INT8 ? -128 : 0;
  *hi = t == ALMA_DTYPE_INT8 ? 127 : 255;
}

static inline int32_t q8_get(const void *d, alma_dtype t, int64_t i) {
  return t == ALMA_DTYPE_INT8 ? ((const int8_t *)d)[i] : ((const uint8_t *)d)[i];
}

static inline void q8_set(void *d, alma_dtype t, int64_t i, int32_t v) {
  if (t == ALMA_DTYPE_INT8) ((int8_t *)d)[i] = (int8_t)v;
  else ((uint8_t *)d)[i] = (uint8_t)v;
}

static int one_value(const alma_tensor *t) { return alma_tensor_numel(t) == 1 && t->rank <= 1; }

/* A required per-tensor float32 scale. */
static alma_status chk_scale(const alma_node *n, const alma_tensor *t, const char *what) {
  char s[128];
  if (!t) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%s is required", what);
  if (t->dtype != ALMA_DTYPE_FLOAT32)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "%s of dtype %s (float32 expected)", what, alma_dtype_name(t->dtype));
  if (!one_value(t))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "%s of shape %s: only a per-tensor value (ONNX Runtime's kernel)",
                          what, alma__shape_str(t->rank, t->dims, s, sizeof s));
  return ALMA_OK;
}

/* An optional (required when `need`) per-tensor zero point of dtype `want`. */
static alma_status chk_zp(const alma_node *n, const alma_tensor *t, const char *what, alma_dtype want, int need) {
  char s[128];
  if (!t) return need ? alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%s is required", what) : ALMA_OK;
  if (t->dtype != want)
    return alma__op_error(n, ALMA_ERR_TYPE, "%s of dtype %s (the quantized tensor is %s)", what,
                          alma_dtype_name(t->dtype), alma_dtype_name(want));
  if (!one_value(t))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "%s of shape %s: only a per-tensor value (ONNX Runtime's kernel)",
                          what, alma__shape_str(t->rank, t->dims, s, sizeof s));
  return ALMA_OK;
}

/* A required uint8/int8 tensor (ops whose optional zero points sit between required inputs accept
 * empty names below min_inputs, so the required ones are checked here). */
static alma_status chk_q8(const alma_node *n, const alma_tensor *t, const char *what) {
  if (!t) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%s is required", what);
  if (!is_q8(t->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "%s of dtype %s (uint8 or int8 expected)", what,
                          alma_dtype_name(t->dtype));
  return ALMA_OK;
}

static float scale_of(const alma_tensor *t) { return ((const float *)t->data)[0]; }
static int32_t zp_of(const alma_tensor *t) { return t ? q8_get(t->data, t->dtype, 0) : 0; }

/* Round half to even for |v| < 2^22 (callers clamp first): adding and removing 1.5 * 2^23 rounds in
 * the default rounding mode, inline (nearbyintf is a libm call on baseline x86-64). */
static inline float rne(float v) { return (v + 12582912.0f) - 12582912.0f; }

/* MLAS's requantization of a float: clamp to [lo, hi] (the output range minus the zero point; NaN
 * goes to lo, as MAXPS/MINPS do), round half to even, add the zero point. */
static inline int32_t requant(float v, float lo, float hi, int32_t zp) {
  v = v > lo ? v : lo;
  v = v < hi ? v : hi;
  return (int32_t)rne(v) + zp;
}

/* MlasQuantizeLinear of one value: x / scale, clamped, rounded, plus the zero point. */
static inline int32_t quantize_one(float x, float scale, int32_t zp, int32_t qlo, int32_t qhi) {
  return requant(x / scale, (float)(qlo - zp), (float)(qhi - zp), zp);
}

/* MLAS's logistic (Eigen's rational approximation), as its FMA3 kernel evaluates it. */
static float mlas_logistic(float v) {
  v = v < -18.0f ? -18.0f : v;
  v = v > 18.0f ? 18.0f : v;
  float v2 = v * v;
  float p = fmaf(v2, 4.37031012579801e-11f, 1.15627324459942e-07f);
  p = fmaf(p, v2, 6.08574864600143e-05f);
  p = fmaf(p, v2, 8.51377133304701e-03f);
  p = fmaf(p, v2, 2.48287947061529e-01f);
  p = p * v;
  float q = fmaf(v2, 6.10247389755681e-13f, 5.76102136993427e-09f);
  q = fmaf(q, v2, 6.29106785017040e-06f);
  q = fmaf(q, v2, 1.70198817374094e-03f);
  q = fmaf(q, v2, 1.16817656904453e-01f);
  q = fmaf(q, v2, 9.93151921023180e-01f);
  float r = p / q + 0.5f;
  return r < 0.0f ? 0.0f : r > 1.0f ? 1.0f : r;
}

enum { LUT_IDENTITY, LUT_LEAKY_RELU, LUT_SIGMOID };

/* ONNX Runtime's QlinearBuildLookupTable: for each of the 256 codes (by bit pattern), dequantize
 * (scale * (float)(x - zp)), apply the function, quantize with MlasQuantizeLinear. */
static void lut_build(uint8_t table[256], alma_dtype t, float xs, int32_t xz, float ys, int32_t yz, int kind,
                      float alpha) {
  int32_t lo, hi;
  q8_range(t, &lo, &hi);
  for (int i = 0; i < 256; i++) {
    int32_t x = t == ALMA_DTYPE_INT8 ? (int8_t)i : i;
    float v = xs * (float)(x - xz);
    if (kind == LUT_LEAKY_RELU) v = v >= 0.0f ? v : alpha * v;
    else if (kind == LUT_SIGMOID) v = mlas_logistic(v);
    table[i] = (uint8_t)quantize_one(v, ys, yz, lo, hi);
  }
}

/* Byte strides of an input of shape (rank_in, dims_in) broadcast to (rank, dims), per output dim
 * (0 along broadcast dims), in elements. */
static void bcast_strides(int rank, const int64_t *dims, int rank_in, const int64_t *dims_in, int64_t *st) {
  int64_t s = 1;
  for (int k = rank - 1, j = rank_in - 1; k >= 0; k--, j--) {
    if (j < 0) {
      st[k] = 0;
      continue;
    }
    st[k] = dims_in[j] == 1 && dims[k] != 1 ? 0 : s;
    s *= dims_in[j];
  }
}

/* Iterates a row-major output of (rank, dims) with up to three broadcast inputs: `idx[i]` holds the
 * element offset of input i for the current output element. */
typedef struct {
  int rank, nin;
  int64_t dims[ALMA_MAX_RANK], ctr[ALMA_MAX_RANK];
  int64_t st[3][ALMA_MAX_RANK];
  int64_t idx[3];
} bcast_iter;

static void bcast_init(bcast_iter *it, int rank, const int64_t *dims, int nin, const alma_tensor *const *ins) {
  memset(it, 0, sizeof *it);
  it->rank = rank;
  it->nin = nin;
  memcpy(it->dims, dims, (size_t)rank * sizeof(int64_t));
  for (int i = 0; i < nin; i++) bcast_strides(rank, dims, ins[i]->rank, ins[i]->dims, it->st[i]);
}

static inline void bcast_next(bcast_iter *it) {
  for (int k = it->rank - 1; k >= 0; k--) {
    for (int i = 0; i < it->nin; i++) it->idx[i] += it->st[i][k];
    if (++it->ctr[k] < it->dims[k]) return;
    for (int i = 0; i < it->nin; i++) it->idx[i] -= it->st[i][k] * it->dims[k];
    it->ctr[k] = 0;
  }
}

/* Broadcast shape of several inputs into out (SHAPE error naming them when they do not fit). */
static alma_status bcast_shape(const alma_node *n, int nin, const alma_tensor *const *ins, int *rank, int64_t *dims) {
  *rank = ins[0]->rank;
  memcpy(dims, ins[0]->dims, (size_t)*rank * sizeof(int64_t));
  for (int i = 1; i < nin; i++) {
    int r;
    int64_t d[ALMA_MAX_RANK];
    alma_status st = alma__broadcast_shape(*rank, dims, ins[i]->rank, ins[i]->dims, &r, d);
    if (st != ALMA_OK) return alma__op_error(n, ALMA_ERR_SHAPE, "inputs do not broadcast");
    *rank = r;
    memcpy(dims, d, (size_t)r * sizeof(int64_t));
  }
  return ALMA_OK;
}

static void elementwise_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out,
                             int nout, int64_t *macs, int64_t *flops) {
  *macs = 0;
  *flops = alma_tensor_numel(&out[0]);
}

/* ==== QLinearAdd / QLinearMul ================================================================= */

/* Inputs: A, A_scale, A_zero_point?, B, B_scale, B_zero_point?, C_scale, C_zero_point?. */
static alma_status qbin_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  const alma_tensor *a = in[0], *b = in[3];
  ALMA_TRY(chk_q8(n, a, "A"));
  ALMA_TRY(chk_q8(n, b, "B"));
  if (b->dtype != a->dtype)
    return alma__op_error(n, ALMA_ERR_TYPE, "A is %s but B is %s", alma_dtype_name(a->dtype), alma_dtype_name(b->dtype));
  ALMA_TRY(chk_scale(n, in[1], "A_scale"));
  ALMA_TRY(chk_zp(n, alma__nn_in(in, nin, 2), "A_zero_point", a->dtype, 0));
  ALMA_TRY(chk_scale(n, in[4], "B_scale"));
  ALMA_TRY(chk_zp(n, alma__nn_in(in, nin, 5), "B_zero_point", a->dtype, 0));
  ALMA_TRY(chk_scale(n, in[6], "C_scale"));
  ALMA_TRY(chk_zp(n, alma__nn_in(in, nin, 7), "C_zero_point", a->dtype, 0));
  const alma_tensor *ab[2] = {a, b};
  int rank;
  int64_t dims[ALMA_MAX_RANK];
  ALMA_TRY(bcast_shape(n, 2, ab, &rank, dims));
  alma__set_shape(&out[0], a->dtype, rank, dims);
  return ALMA_OK;
}

/* Which operand ONNX Runtime's broadcaster treats as a scalar within each span: the one of size 1 at
 * the innermost output dim larger than 1 (A when the output has one element). Its QLinearAdd
 * arithmetic depends on it. 0: neither, 1: A, 2: B. */
static int span_scalar(const alma_tensor *a, const alma_tensor *b, int rank, const int64_t *dims) {
  for (int k = rank - 1; k >= 0; k--) {
    if (dims[k] <= 1) continue;
    int ja = k - (rank - a->rank), jb = k - (rank - b->rank);
    if (ja < 0 || a->dims[ja] == 1) return 1;
    if (jb < 0 || b->dims[jb] == 1) return 2;
    return 0;
  }
  return 1;
}

static alma_status qadd_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  const alma_tensor *a = in[0], *b = in[3];
  float sa = scale_of(in[1]), sb = scale_of(in[4]), sc = scale_of(in[6]);
  int32_t za = zp_of(alma__nn_in(in, nin, 2)), zb = zp_of(alma__nn_in(in, nin, 5)), zc = zp_of(alma__nn_in(in, nin, 7));
  alma_dtype t = a->dtype;
  int32_t lo, hi;
  q8_range(t, &lo, &hi);
  /* MLAS (AVX2): C = round(fixed + a * (sa/sc) + b * (sb/sc)) with fixed = zc - (za*sa/sc + zb*sb/sc),
   * evaluated with fused multiply-adds, B's term first (a span-scalar B is folded into `fixed` the
   * same way). A span-scalar A is passed to MLAS as its B: the roles swap. */
  int mode = span_scalar(a, b, out[0].rank, out[0].dims);
  bcast_iter it;
  const alma_tensor *ab[2] = {a, b};
  bcast_init(&it, out[0].rank, out[0].dims, 2, ab);
  int ia = 0, ib = 1; /* iterator slots of the kernel's first and second operand */
  if (mode == 1) {
    const alma_tensor *tt = a;
    a = b;
    b = tt;
    float ts = sa;
    sa = sb;
    sb = ts;
    int32_t tz = za;
    za = zb;
    zb = tz;
    ia = 1;
    ib = 0;
  }
  float ra = sa / sc, rb = sb / sc;
  float fixed = (float)zc - fmaf(ra, (float)za, rb * (float)zb);
  float flo = (float)lo, fhi = (float)hi;
  int64_t cnt = alma_tensor_numel(&out[0]);
  for (int64_t e = 0; e < cnt; e++, bcast_next(&it)) {
    float av = (float)q8_get(a->data, t, it.idx[ia]), bv = (float)q8_get(b->data, t, it.idx[ib]);
    q8_set(out[0].data, t, e, requant(fmaf(av, ra, fmaf(bv, rb, fixed)), flo, fhi, 0));
  }
  return ALMA_OK;
}

static alma_status qmul_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  const alma_tensor *a = in[0], *b = in[3];
  float sa = scale_of(in[1]), sb = scale_of(in[4]), sc = scale_of(in[6]);
  int32_t za = zp_of(alma__nn_in(in, nin, 2)), zb = zp_of(alma__nn_in(in, nin, 5)), zc = zp_of(alma__nn_in(in, nin, 7));
  alma_dtype t = a->dtype;
  int32_t lo, hi;
  q8_range(t, &lo, &hi);
  /* MLAS (SSE2): C = round((float)((a - za) * (b - zb)) * (sa*sb/sc) + zc), multiply and add apart. */
  float ratio = sa * sb / sc, fzc = (float)zc;
  bcast_iter it;
  const alma_tensor *ab[2] = {a, b};
  bcast_init(&it, out[0].rank, out[0].dims, 2, ab);
  int64_t cnt = alma_tensor_numel(&out[0]);
  for (int64_t e = 0; e < cnt; e++, bcast_next(&it)) {
    int32_t p = (q8_get(a->data, t, it.idx[0]) - za) * (q8_get(b->data, t, it.idx[1]) - zb);
    float v = (float)p * ratio;
    v = v + fzc;
    q8_set(out[0].data, t, e, requant(v, (float)lo, (float)hi, 0));
  }
  return ALMA_OK;
}

const alma_op_def alma__op_MsQLinearAdd = {.name = "QLinearAdd", .domain = "com.microsoft", .versions = {1},
  .min_inputs = 7, .max_inputs = 8, .min_outputs = 1, .max_outputs = 1, .flags = ALMA_OP_EMPTY_INPUTS_OK,
  .infer = qbin_infer, .exec = qadd_exec, .cost = elementwise_cost};

const alma_op_def alma__op_MsQLinearMul = {.name = "QLinearMul", .domain = "com.microsoft", .versions = {1},
  .min_inputs = 7, .max_inputs = 8, .min_outputs = 1, .max_outputs = 1, .flags = ALMA_OP_EMPTY_INPUTS_OK,
  .infer = qbin_infer, .exec = qmul_exec, .cost = elementwise_cost};

/* ==== QLinearSigmoid / QLinearLeakyRelu (lookup tables) ======================================= */

/* Inputs: X, X_scale, X_zero_point?, Y_scale, Y_zero_point?. */
static alma_status qlut_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  ALMA_TRY(chk_q8(n, x, "X"));
  ALMA_TRY(chk_scale(n, in[1], "X_scale"));
  ALMA_TRY(chk_zp(n, alma__nn_in(in, nin, 2), "X_zero_point", x->dtype, 0));
  ALMA_TRY(chk_scale(n, in[3], "Y_scale"));
  ALMA_TRY(chk_zp(n, alma__nn_in(in, nin, 4), "Y_zero_point", x->dtype, 0));
  alma__set_shape(&out[0], x->dtype, x->rank, x->dims);
  return ALMA_OK;
}

static alma_status qlut_run(const alma_tensor *const *in, int nin, alma_tensor *out, int kind, float alpha) {
  const alma_tensor *x = in[0];
  uint8_t table[256];
  lut_build(table, x->dtype, scale_of(in[1]), zp_of(alma__nn_in(in, nin, 2)), scale_of(in[3]), zp_of(alma__nn_in(in, nin, 4)),
            kind, alpha);
  const uint8_t *xd = x->data;
  uint8_t *yd = out[0].data;
  int64_t cnt = alma_tensor_numel(x);
  for (int64_t i = 0; i < cnt; i++) yd[i] = table[xd[i]];
  return ALMA_OK;
}

static alma_status qsigmoid_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                                 alma_tensor *out, int nout) {
  return qlut_run(in, nin, out, LUT_SIGMOID, 0.0f);
}

static alma_status qleaky_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                               alma_tensor *out, int nout) {
  return qlut_run(in, nin, out, LUT_LEAKY_RELU, alma__attr_f(n, "alpha", 0.01f));
}

const alma_op_def alma__op_MsQLinearSigmoid = {.name = "QLinearSigmoid", .domain = "com.microsoft", .versions = {1},
  .min_inputs = 4, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1, .flags = ALMA_OP_EMPTY_INPUTS_OK,
  .infer = qlut_infer, .exec = qsigmoid_exec, .cost = elementwise_cost};

const alma_op_def alma__op_MsQLinearLeakyRelu = {.name = "QLinearLeakyRelu", .domain = "com.microsoft",
  .versions = {1}, .min_inputs = 4, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
  .flags = ALMA_OP_EMPTY_INPUTS_OK, .infer = qlut_infer, .exec = qleaky_exec, .cost = elementwise_cost};

/* ==== QLinearGlobalAveragePool ================================================================ */

/* Largest image ONNX Runtime's kernel accepts (it refuses 2^24 elements and more). */
#define QGAP_MAX_IMAGE ((int64_t)1 << 24)

static alma_status channels_last_attr(const alma_node *n, int *cl) {
  int64_t v = alma__attr_i(n, "channels_last", 0);
  if (v != 0 && v != 1) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "channels_last=%lld (0 or 1)", (long long)v);
  *cl = (int)v;
  return ALMA_OK;
}

/* Inputs: X, x_scale, x_zero_point, y_scale, y_zero_point. */
static alma_status qgap_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  char s[128];
  ALMA_TRY(chk_q8(n, x, "X"));
  ALMA_TRY(chk_scale(n, in[1], "x_scale"));
  ALMA_TRY(chk_zp(n, in[2], "x_zero_point", x->dtype, 1));
  ALMA_TRY(chk_scale(n, in[3], "y_scale"));
  ALMA_TRY(chk_zp(n, in[4], "y_zero_point", x->dtype, 1));
  int cl = 0;
  ALMA_TRY(channels_last_attr(n, &cl));
  if (x->rank < 3)
    return alma__op_error(n, ALMA_ERR_SHAPE, "input %s: rank 3 or more expected", alma__shape_str(x->rank, x->dims, s, sizeof s));
  int64_t dims[ALMA_MAX_RANK];
  memcpy(dims, x->dims, (size_t)x->rank * sizeof(int64_t));
  int64_t image = 1;
  for (int k = cl ? 1 : 2; k < (cl ? x->rank - 1 : x->rank); k++) {
    image *= dims[k];
    dims[k] = 1;
  }
  if (image >= QGAP_MAX_IMAGE)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "image of %lld elements (ONNX Runtime's kernel stops below 2^24)",
                          (long long)image);
  alma__set_shape(&out[0], x->dtype, x->rank, dims);
  return ALMA_OK;
}

/* MLAS's QLinearGlobalAveragePool over `groups` runs of `image` elements at distance `step` (1 for
 * NCHW; C for NHWC, runs starting at consecutive channels): sum - zp * image as an integer, times
 * x_scale / (y_scale * image) in float32, requantized. */
static void gap_run(const alma_tensor *x, float xs, int32_t xz, float ys, int32_t yz, int64_t outer, int64_t image,
                    int64_t chans, int cl, void *yd) {
  alma_dtype t = x->dtype;
  int32_t lo, hi;
  q8_range(t, &lo, &hi);
  float scale = xs / (ys * (float)(int32_t)image);
  float flo = (float)(lo - yz), fhi = (float)(hi - yz);
  int64_t bias = -(int64_t)xz * image;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t c = 0; c < chans; c++) {
      int64_t acc = bias;
      if (cl) {
        int64_t base = o * image * chans + c;
        for (int64_t i = 0; i < image; i++) acc += q8_get(x->data, t, base + i * chans);
      } else {
        int64_t base = (o * chans + c) * image;
        for (int64_t i = 0; i < image; i++) acc += q8_get(x->data, t, base + i);
      }
      q8_set(yd, t, o * chans + c, requant((float)(int32_t)acc * scale, flo, fhi, yz));
    }
}

static alma_status qgap_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  int cl = 0;
  ALMA_TRY(channels_last_attr(n, &cl));
  int64_t chans = cl ? x->dims[x->rank - 1] : x->dims[1];
  int64_t image = alma__numel(x->rank - 2, x->dims + (cl ? 1 : 2));
  gap_run(x, scale_of(in[1]), zp_of(in[2]), scale_of(in[3]), zp_of(in[4]), x->dims[0], image, chans, cl, out[0].data);
  return ALMA_OK;
}

const alma_op_def alma__op_MsQLinearGlobalAveragePool = {.name = "QLinearGlobalAveragePool",
  .domain = "com.microsoft", .versions = {1}, .min_inputs = 5, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
  .infer = qgap_infer, .exec = qgap_exec, .cost = elementwise_cost};

/* ==== QLinearAveragePool ====================================================================== */

typedef struct {
  int cl, cip;           /* channels_last, count_include_pad */
  int64_t N, C;
  alma__nn_geom g;
} qpool_geom;

static alma_status qpool_geom_make(const alma_node *n, const alma_tensor *x, qpool_geom *p) {
  char s[128];
  memset(p, 0, sizeof *p);
  ALMA_TRY(channels_last_attr(n, &p->cl));
  int64_t cip = alma__attr_i(n, "count_include_pad", 0), ceil_mode = alma__attr_i(n, "ceil_mode", 0);
  if ((cip != 0 && cip != 1) || (ceil_mode != 0 && ceil_mode != 1))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "count_include_pad=%lld, ceil_mode=%lld (0 or 1)", (long long)cip,
                          (long long)ceil_mode);
  p->cip = (int)cip;
  const int64_t *ks;
  int nk = alma__attr_ints(n, "kernel_shape", &ks);
  if (nk < 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "kernel_shape is required");
  if (nk > 3)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "%d spatial dims (ONNX Runtime's kernel pools 1 to 3)", nk);
  if (x->rank != nk + 2)
    return alma__op_error(n, ALMA_ERR_SHAPE, "input %s for a %d-D kernel_shape", alma__shape_str(x->rank, x->dims, s, sizeof s), nk);
  p->N = x->dims[0];
  p->C = p->cl ? x->dims[x->rank - 1] : x->dims[1];
  ALMA_TRY(alma__nn_geom_read(n, nk, x->dims + (p->cl ? 1 : 2), ks, 0, &p->g));
  return alma__nn_geom_forward(n, &p->g, (int)ceil_mode);
}

/* Inputs: X, x_scale, x_zero_point?, y_scale, y_zero_point?. */
static alma_status qpool_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  ALMA_TRY(chk_q8(n, x, "X"));
  ALMA_TRY(chk_scale(n, in[1], "x_scale"));
  ALMA_TRY(chk_zp(n, alma__nn_in(in, nin, 2), "x_zero_point", x->dtype, 0));
  ALMA_TRY(chk_scale(n, in[3], "y_scale"));
  ALMA_TRY(chk_zp(n, alma__nn_in(in, nin, 4), "y_zero_point", x->dtype, 0));
  qpool_geom p;
  ALMA_TRY(qpool_geom_make(n, x, &p));
  int64_t dims[ALMA_MAX_RANK];
  dims[0] = p.N;
  int sp0 = p.cl ? 1 : 2;
  dims[p.cl ? x->rank - 1 : 1] = p.C;
  for (int d = 0; d < p.g.nsp; d++) dims[sp0 + d] = p.g.out[d];
  alma__set_shape(&out[0], x->dtype, x->rank, dims);
  return ALMA_OK;
}

static alma_status qpool_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                              alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  qpool_geom p;
  ALMA_TRY(qpool_geom_make(n, x, &p));
  const alma__nn_geom *g = &p.g;
  float xs = scale_of(in[1]), ys = scale_of(in[3]);
  int32_t xz = zp_of(alma__nn_in(in, nin, 2)), yz = zp_of(alma__nn_in(in, nin, 4));
  alma_dtype t = x->dtype;
  int nsp = g->nsp;
  int64_t image = alma__numel(nsp, g->in), oimage = alma__numel(nsp, g->out), ksize = alma__numel(nsp, g->k);
  /* A window covering the whole unpadded image is ONNX Runtime's global average pool (integer sum). */
  int global = 1;
  for (int d = 0; d < nsp; d++) global &= g->k[d] == g->in[d] && g->pb[d] == 0 && g->pe[d] == 0;
  if (global) {
    gap_run(x, xs, xz, ys, yz, p.N, image, p.C, p.cl, out[0].data);
    return ALMA_OK;
  }
  /* Otherwise float32: dequantize, sum the window (h, w, d order), divide by the count, then
   * round(y / y_scale + zero point) clamped. Windows are clipped to the input, not to the pads. */
  float deq[256];
  for (int i = 0; i < 256; i++) deq[i] = xs * (float)((t == ALMA_DTYPE_INT8 ? (int8_t)i : i) - xz);
  int32_t lo, hi;
  q8_range(t, &lo, &hi);
  const uint8_t *xd = x->data;
  int64_t k3[3] = {1, 1, 1}, in3[3] = {1, 1, 1}, out3[3] = {1, 1, 1}, s3[3] = {1, 1, 1}, pb3[3] = {0, 0, 0};
  for (int d = 0; d < nsp; d++) {
    k3[d] = g->k[d];
    in3[d] = g->in[d];
    out3[d] = g->out[d];
    s3[d] = g->s[d];
    pb3[d] = g->pb[d];
  }
  for (int64_t b = 0; b < p.N; b++)
    for (int64_t c = 0; c < p.C; c++) {
      /* element (b, c, h, w, d) at xbase + ((h * in1 + w) * in2 + d) * xstep */
      int64_t xbase = p.cl ? b * image * p.C + c : (b * p.C + c) * image, xstep = p.cl ? p.C : 1;
      int64_t ybase = p.cl ? b * oimage * p.C + c : (b * p.C + c) * oimage, ystep = p.cl ? p.C : 1;
      for (int64_t o0 = 0; o0 < out3[0]; o0++)
        for (int64_t o1 = 0; o1 < out3[1]; o1++)
          for (int64_t o2 = 0; o2 < out3[2]; o2++) {
            int64_t st[3], en[3], oo[3] = {o0, o1, o2};
            for (int d = 0; d < 3; d++) {
              st[d] = oo[d] * s3[d] - pb3[d];
              en[d] = st[d] + k3[d] < in3[d] ? st[d] + k3[d] : in3[d];
              if (st[d] < 0) st[d] = 0;
            }
            float sum = 0.0f;
            for (int64_t h = st[0]; h < en[0]; h++)
              for (int64_t w = st[1]; w < en[1]; w++)
                for (int64_t d = st[2]; d < en[2]; d++) sum += deq[xd[xbase + ((h * in3[1] + w) * in3[2] + d) * xstep]];
            int64_t count = p.cip ? ksize : (en[0] - st[0]) * (en[1] - st[1]) * (en[2] - st[2]);
            float v = sum / (float)count / ys + (float)yz;
            v = v > (float)lo ? v : (float)lo;
            v = v < (float)hi ? v : (float)hi;
            q8_set(out[0].data, t, ybase + ((o0 * out3[1] + o1) * out3[2] + o2) * ystep, (int32_t)rne(v));
          }
    }
  return ALMA_OK;
}

static void qpool_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                       int64_t *macs, int64_t *flops) {
  const int64_t *ks;
  int nk = alma__attr_ints(n, "kernel_shape", &ks);
  int64_t k = 1;
  for (int i = 0; i < nk; i++) k *= ks[i];
  *macs = 0;
  *flops = alma_tensor_numel(&out[0]) * k;
}

const alma_op_def alma__op_MsQLinearAveragePool = {.name = "QLinearAveragePool", .domain = "com.microsoft",
  .versions = {1}, .min_inputs = 4, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
  .flags = ALMA_OP_EMPTY_INPUTS_OK, .infer = qpool_infer, .exec = qpool_exec, .cost = qpool_cost};

/* ==== QLinearConcat =========================================================================== */

/* Inputs: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input. */
static alma_status qconcat_check(const alma_node *n, const alma_tensor *const *in, int nin, int *axis_out,
                                 int64_t *dims, int *rank) {
  char s1[128], s2[128];
  if (nin < 5 || (nin - 2) % 3)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%d inputs: Y_scale, Y_zero_point and (X, scale, zero point) triples expected", nin);
  ALMA_TRY(chk_scale(n, in[0], "Y_scale"));
  if (!in[1]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "Y_zero_point is required");
  ALMA_TRY(chk_q8(n, in[1], "Y_zero_point"));
  ALMA_TRY(chk_zp(n, in[1], "Y_zero_point", in[1]->dtype, 1));
  alma_dtype t = in[1]->dtype;
  const alma_tensor *x0 = in[2];
  if (!alma__node_attr(n, "axis")) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis is required");
  int64_t ax = alma__attr_i(n, "axis", 0);
  int axis;
  if (alma__norm_axis(ax, x0->rank, &axis) != ALMA_OK)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis %lld out of range for rank %d", (long long)ax, x0->rank);
  *rank = x0->rank;
  memcpy(dims, x0->dims, (size_t)x0->rank * sizeof(int64_t));
  dims[axis] = 0;
  for (int i = 2; i < nin; i += 3) {
    const alma_tensor *x = in[i];
    if (!x) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input %d is empty", i);
    if (x->dtype != t)
      return alma__op_error(n, ALMA_ERR_TYPE, "input %d is %s but Y_zero_point is %s", i, alma_dtype_name(x->dtype),
                            alma_dtype_name(t));
    ALMA_TRY(chk_scale(n, in[i + 1], "an input scale"));
    ALMA_TRY(chk_zp(n, in[i + 2], "an input zero point", t, 1));
    int same = x->rank == x0->rank;
    for (int k = 0; same && k < x->rank; k++) same = k == axis || x->dims[k] == x0->dims[k];
    if (!same)
      return alma__op_error(n, ALMA_ERR_SHAPE, "input %d of shape %s does not concatenate with %s along axis %d", i,
                            alma__shape_str(x->rank, x->dims, s1, sizeof s1), alma__shape_str(x0->rank, x0->dims, s2, sizeof s2),
                            axis);
    dims[axis] += x->dims[axis];
  }
  *axis_out = axis;
  return ALMA_OK;
}

static alma_status qconcat_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                 int nout) {
  int axis, rank;
  int64_t dims[ALMA_MAX_RANK];
  ALMA_TRY(qconcat_check(n, in, nin, &axis, dims, &rank));
  alma__set_shape(&out[0], in[1]->dtype, rank, dims);
  return ALMA_OK;
}

static alma_status qconcat_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                                alma_tensor *out, int nout) {
  int axis, rank;
  int64_t dims[ALMA_MAX_RANK];
  ALMA_TRY(qconcat_check(n, in, nin, &axis, dims, &rank));
  alma_dtype t = in[1]->dtype;
  float ys = scale_of(in[0]);
  int32_t yz = zp_of(in[1]);
  int64_t outer = alma__numel(axis, dims), inner = alma__numel(rank - axis - 1, dims + axis + 1);
  int64_t opitch = dims[axis] * inner, off = 0;
  uint8_t *yd = out[0].data;
  for (int i = 2; i < nin; i += 3) {
    const alma_tensor *x = in[i];
    /* each input requantized through ONNX Runtime's identity lookup table (a copy when its scale and
     * zero point are the output's, which the table reproduces) */
    uint8_t table[256];
    lut_build(table, t, scale_of(in[i + 1]), zp_of(in[i + 2]), ys, yz, LUT_IDENTITY, 0.0f);
    int64_t ipitch = x->dims[axis] * inner;
    const uint8_t *xd = x->data;
    for (int64_t o = 0; o < outer; o++)
      for (int64_t j = 0; j < ipitch; j++) yd[o * opitch + off + j] = table[xd[o * ipitch + j]];
    off += ipitch;
  }
  return ALMA_OK;
}

const alma_op_def alma__op_MsQLinearConcat = {.name = "QLinearConcat", .domain = "com.microsoft", .versions = {1},
  .min_inputs = 5, .max_inputs = -1, .min_outputs = 1, .max_outputs = 1,
  .infer = qconcat_infer, .exec = qconcat_exec};

/* ==== QLinearSoftmax ========================================================================== */

typedef struct {
  int axis;
  int64_t outer, D, inner; /* softmax over D values at stride `inner` */
} qsm_geom;

static alma_status qsm_geom_make(const alma_node *n, const alma_tensor *x, qsm_geom *g) {
  if (!alma__node_attr(n, "opset")) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute opset is required");
  int64_t opset = alma__attr_i(n, "opset", 0);
  /* the schema's default -1 at every opset (ONNX Runtime fills it in before its kernel's own
   * fallback of 1 below opset 13 could apply) */
  int64_t ax = alma__attr_i(n, "axis", -1);
  if (x->rank < 1) return alma__op_error(n, ALMA_ERR_SHAPE, "scalar input");
  if (alma__norm_axis(ax, x->rank, &g->axis) != ALMA_OK)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis %lld out of range for rank %d", (long long)ax, x->rank);
  g->outer = alma__numel(g->axis, x->dims);
  if (opset < 13) { /* the flattened [outer, rest] form of Softmax-1/11 */
    g->D = alma__numel(x->rank - g->axis, x->dims + g->axis);
    g->inner = 1;
  } else {
    g->D = x->dims[g->axis];
    g->inner = alma__numel(x->rank - g->axis - 1, x->dims + g->axis + 1);
  }
  return ALMA_OK;
}

/* Inputs: X, X_scale, x_zero_point?, y_scale, y_zero_point. */
static alma_status qsm_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  ALMA_TRY(chk_q8(n, x, "X"));
  ALMA_TRY(chk_scale(n, in[1], "X_scale"));
  ALMA_TRY(chk_zp(n, alma__nn_in(in, nin, 2), "x_zero_point", x->dtype, 0));
  ALMA_TRY(chk_scale(n, in[3], "y_scale"));
  ALMA_TRY(chk_zp(n, alma__nn_in(in, nin, 4), "y_zero_point", x->dtype, 1));
  qsm_geom g;
  ALMA_TRY(qsm_geom_make(n, x, &g));
  alma__set_shape(&out[0], x->dtype, x->rank, x->dims);
  return ALMA_OK;
}

static alma_status qsm_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  qsm_geom g;
  ALMA_TRY(qsm_geom_make(n, x, &g));
  if (alma_tensor_numel(x) == 0) return ALMA_OK;
  alma_dtype t = x->dtype;
  float xs = scale_of(in[1]);
  int32_t yz = zp_of(in[4]);
  /* ONNX Runtime's table: exp((d + shift) * x_scale) for d = x - max(x) in [-255, 0], where the shift
   * keeps the sum of D terms below FLT_MAX (in double, stored as float); the zero point cancels. The
   * arithmetic after it follows onnxruntime 1.32's MLAS kernel. */
  double shift = log((double)(FLT_MAX / (float)(size_t)g.D)) - 5.0;
  shift = (shift > 0.0 ? shift : 0.0) / (double)xs;
  float table[256];
  for (int i = 0; i < 256; i++) table[i] = (float)exp(((double)i - 255 + shift) * (double)xs);
  /* MLAS's AVX2 kernel: the sum in eight float lanes over blocks of 16 (then the tail in order, then
   * the lanes added to it), scale = (1 / sum) * floor(1 / y_scale), y = round(e * scale + zero point)
   * saturated to the output type */
  float yscale = floorf(1.0f / scale_of(in[3])), fyz = (float)yz;
  int32_t lo, hi;
  q8_range(t, &lo, &hi);
  float *e = alma__nn_alloc(n, (size_t)(g.D > 0 ? g.D : 1), sizeof *e);
  if (!e) return ALMA_ERR_NOMEM;
  for (int64_t o = 0; o < g.outer; o++)
    for (int64_t i = 0; i < g.inner; i++) {
      int64_t base = o * g.D * g.inner + i;
      int32_t mx = q8_get(x->data, t, base);
      for (int64_t d = 1; d < g.D; d++) {
        int32_t v = q8_get(x->data, t, base + d * g.inner);
        mx = v > mx ? v : mx;
      }
      for (int64_t d = 0; d < g.D; d++) e[d] = table[255 + q8_get(x->data, t, base + d * g.inner) - mx];
      float lane[8] = {0}, sum = 0.0f;
      int64_t d = 0;
      for (; d + 16 <= g.D; d += 16)
        for (int l = 0; l < 16; l++) lane[l & 7] += e[d + l];
      for (; d < g.D; d++) sum += e[d];
      for (int l = 0; l < 8; l++) sum += lane[l];
      float scale = (1.0f / sum) * yscale;
      for (d = 0; d < g.D; d++)
        q8_set(out[0].data, t, base + d * g.inner, requant(fmaf(e[d], scale, fyz), (float)lo, (float)hi, 0));
    }
  free(e);
  return ALMA_OK;
}

const alma_op_def alma__op_MsQLinearSoftmax = {.name = "QLinearSoftmax", .domain = "com.microsoft", .versions = {1},
  .min_inputs = 5, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1, .flags = ALMA_OP_EMPTY_INPUTS_OK,
  .infer = qsm_infer, .exec = qsm_exec, .cost = elementwise_cost};

/* ==== QLinearWhere ============================================================================ */

/* Inputs: condition, X, x_scale, x_zero_point, Y, y_scale, y_zero_point, z_scale, z_zero_point. */
static alma_status qwhere_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                int nout) {
  const alma_tensor *c = in[0], *x = in[1], *y = in[4];
  if (c->dtype != ALMA_DTYPE_BOOL)
    return alma__op_error(n, ALMA_ERR_TYPE, "condition of dtype %s (bool expected)", alma_dtype_name(c->dtype));
  ALMA_TRY(chk_q8(n, x, "X"));
  if (y->dtype != x->dtype)
    return alma__op_error(n, ALMA_ERR_TYPE, "X is %s but Y is %s", alma_dtype_name(x->dtype), alma_dtype_name(y->dtype));
  ALMA_TRY(chk_scale(n, in[2], "x_scale"));
  ALMA_TRY(chk_zp(n, in[3], "x_zero_point", x->dtype, 1));
  ALMA_TRY(chk_scale(n, in[5], "y_scale"));
  ALMA_TRY(chk_zp(n, in[6], "y_zero_point", x->dtype, 1));
  ALMA_TRY(chk_scale(n, in[7], "z_scale"));
  ALMA_TRY(chk_zp(n, in[8], "z_zero_point", x->dtype, 1));
  const alma_tensor *cxy[3] = {c, x, y};
  int rank;
  int64_t dims[ALMA_MAX_RANK];
  ALMA_TRY(bcast_shape(n, 3, cxy, &rank, dims));
  alma__set_shape(&out[0], x->dtype, rank, dims);
  return ALMA_OK;
}

static alma_status qwhere_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                               alma_tensor *out, int nout) {
  const alma_tensor *c = in[0], *x = in[1], *y = in[4];
  alma_dtype t = x->dtype;
  float zs = scale_of(in[7]);
  int32_t zz = zp_of(in[8]);
  /* both branches requantized to z through identity lookup tables, then selected */
  uint8_t tx[256], ty[256];
  lut_build(tx, t, scale_of(in[2]), zp_of(in[3]), zs, zz, LUT_IDENTITY, 0.0f);
  lut_build(ty, t, scale_of(in[5]), zp_of(in[6]), zs, zz, LUT_IDENTITY, 0.0f);
  const alma_tensor *cxy[3] = {c, x, y};
  bcast_iter it;
  bcast_init(&it, out[0].rank, out[0].dims, 3, cxy);
  const uint8_t *cd = c->data, *xd = x->data, *yd = y->data;
  uint8_t *zd = out[0].data;
  int64_t cnt = alma_tensor_numel(&out[0]);
  for (int64_t e = 0; e < cnt; e++, bcast_next(&it)) zd[e] = cd[it.idx[0]] ? tx[xd[it.idx[1]]] : ty[yd[it.idx[2]]];
  return ALMA_OK;
}

const alma_op_def alma__op_MsQLinearWhere = {.name = "QLinearWhere", .domain = "com.microsoft", .versions = {1},
  .min_inputs = 9, .max_inputs = 9, .min_outputs = 1, .max_outputs = 1,
  .infer = qwhere_infer, .exec = qwhere_exec, .cost = elementwise_cost};

/* ==== QLinearReduceMean ======================================================================= */

/* Reduced-axis mask from the required axes attribute (empty: all axes). */
static alma_status qrm_axes(const alma_node *n, int rank, int *mask) {
  const int64_t *ax;
  if (!alma__node_attr(n, "axes") || !alma__node_attr(n, "keepdims"))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attributes axes and keepdims are required");
  int na = alma__attr_ints(n, "axes", &ax);
  for (int k = 0; k < rank; k++) mask[k] = na == 0;
  for (int i = 0; i < na; i++) {
    int a;
    if (alma__norm_axis(ax[i], rank, &a) != ALMA_OK)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis %lld out of range for rank %d", (long long)ax[i], rank);
    if (mask[a]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis %lld repeated", (long long)ax[i]);
    mask[a] = 1;
  }
  int64_t kd = alma__attr_i(n, "keepdims", 1);
  if (kd != 0 && kd != 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "keepdims=%lld (0 or 1)", (long long)kd);
  return ALMA_OK;
}

/* Inputs: data, data_scale, data_zero_point?, reduced_scale, reduced_zero_point?. */
static alma_status qrm_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  ALMA_TRY(chk_q8(n, x, "data"));
  ALMA_TRY(chk_scale(n, in[1], "data_scale"));
  ALMA_TRY(chk_zp(n, alma__nn_in(in, nin, 2), "data_zero_point", x->dtype, 0));
  ALMA_TRY(chk_scale(n, in[3], "reduced_scale"));
  ALMA_TRY(chk_zp(n, alma__nn_in(in, nin, 4), "reduced_zero_point", x->dtype, 0));
  int mask[ALMA_MAX_RANK];
  ALMA_TRY(qrm_axes(n, x->rank, mask));
  int keep = (int)alma__attr_i(n, "keepdims", 1), r = 0;
  int64_t dims[ALMA_MAX_RANK], count = 1;
  for (int k = 0; k < x->rank; k++) {
    if (mask[k]) count *= x->dims[k];
    if (!mask[k]) dims[r++] = x->dims[k];
    else if (keep) dims[r++] = 1;
  }
  if (count >= QGAP_MAX_IMAGE)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "mean of %lld elements (2^24 or more)", (long long)count);
  alma__set_shape(&out[0], x->dtype, r, dims);
  return ALMA_OK;
}

static alma_status qrm_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  int mask[ALMA_MAX_RANK];
  ALMA_TRY(qrm_axes(n, x->rank, mask));
  alma_dtype t = x->dtype;
  float xs = scale_of(in[1]), ys = scale_of(in[3]);
  int32_t xz = zp_of(alma__nn_in(in, nin, 2)), yz = zp_of(alma__nn_in(in, nin, 4));
  int32_t lo, hi;
  q8_range(t, &lo, &hi);
  /* ONNX Runtime has no CPU kernel: QLinearGlobalAveragePool's arithmetic (an integer sum minus
   * zp * count, times x_scale / (y_scale * count) in float32, requantized) over the reduced axes */
  int64_t count = 1, ocount = alma_tensor_numel(&out[0]);
  for (int k = 0; k < x->rank; k++)
    if (mask[k]) count *= x->dims[k];
  float scale = xs / (ys * (float)(int32_t)count);
  int64_t *acc = alma__nn_alloc(n, (size_t)(ocount > 0 ? ocount : 1), sizeof *acc);
  if (!acc) return ALMA_ERR_NOMEM;
  for (int64_t o = 0; o < ocount; o++) acc[o] = -(int64_t)xz * count;
  /* walk x in order; the output index drops (or pins to 0) the reduced dims */
  int64_t ctr[ALMA_MAX_RANK] = {0}, ost[ALMA_MAX_RANK], s = 1, oi = 0;
  for (int k = x->rank - 1; k >= 0; k--) {
    ost[k] = mask[k] ? 0 : s;
    if (!mask[k]) s *= x->dims[k];
  }
  int64_t cnt = alma_tensor_numel(x);
  for (int64_t e = 0; e < cnt; e++) {
    acc[oi] += q8_get(x->data, t, e);
    for (int k = x->rank - 1; k >= 0; k--) {
      oi += ost[k];
      if (++ctr[k] < x->dims[k]) break;
      oi -= ost[k] * x->dims[k];
      ctr[k] = 0;
    }
  }
  for (int64_t o = 0; o < ocount; o++)
    q8_set(out[0].data, t, o, requant((float)(int32_t)acc[o] * scale, (float)(lo - yz), (float)(hi - yz), yz));
  free(acc);
  return ALMA_OK;
}

const alma_op_def alma__op_MsQLinearReduceMean = {.name = "QLinearReduceMean", .domain = "com.microsoft",
  .versions = {1}, .min_inputs = 4, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
  .flags = ALMA_OP_EMPTY_INPUTS_OK, .infer = qrm_infer, .exec = qrm_exec, .cost = elementwise_cost};

/* ==== QGemm =================================================================================== */

typedef struct {
  int ta, tb;
  int64_t M, K, N;
  int c_mode; /* bias C: 0 none, 1 one value, 2 per column (N), 3 per row (M, 1), 4 full (M, N) */
} qgemm_geom;

/* Inputs: A, a_scale, a_zero_point, B, b_scale, b_zero_point, C?, y_scale?, y_zero_point?. */
static alma_status qgemm_geom_make(const alma_node *n, const alma_tensor *const *in, int nin, qgemm_geom *g) {
  char s1[128], s2[128];
  const alma_tensor *a = in[0], *b = in[3], *c = alma__nn_in(in, nin, 6);
  memset(g, 0, sizeof *g);
  int64_t ta = alma__attr_i(n, "transA", 0), tb = alma__attr_i(n, "transB", 0);
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "transA=%lld, transB=%lld (0 or 1)", (long long)ta, (long long)tb);
  if (a->rank != 2 || b->rank != 2)
    return alma__op_error(n, ALMA_ERR_SHAPE, "A %s and B %s must be matrices", alma__shape_str(a->rank, a->dims, s1, sizeof s1),
                          alma__shape_str(b->rank, b->dims, s2, sizeof s2));
  g->ta = (int)ta;
  g->tb = (int)tb;
  g->M = a->dims[ta ? 1 : 0];
  g->K = a->dims[ta ? 0 : 1];
  g->N = b->dims[tb ? 0 : 1];
  if (b->dims[tb ? 1 : 0] != g->K)
    return alma__op_error(n, ALMA_ERR_SHAPE, "inner dimensions of A %s and B %s differ (transA=%d, transB=%d)",
                          alma__shape_str(a->rank, a->dims, s1, sizeof s1), alma__shape_str(b->rank, b->dims, s2, sizeof s2),
                          g->ta, g->tb);
  if (c) {
    if (c->dtype != ALMA_DTYPE_INT32)
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "C of dtype %s (int32 expected)", alma_dtype_name(c->dtype));
    int64_t cn = alma_tensor_numel(c);
    if (cn == 1 && c->rank <= 2) g->c_mode = 1;
    else if ((c->rank == 1 && c->dims[0] == g->N) || (c->rank == 2 && c->dims[0] == 1 && c->dims[1] == g->N)) g->c_mode = 2;
    else if (c->rank == 2 && c->dims[0] == g->M && c->dims[1] == 1) g->c_mode = 3;
    else if (c->rank == 2 && c->dims[0] == g->M && c->dims[1] == g->N) g->c_mode = 4;
    else
      return alma__op_error(n, ALMA_ERR_SHAPE, "C of shape %s does not broadcast to [%lld,%lld]",
                            alma__shape_str(c->rank, c->dims, s1, sizeof s1), (long long)g->M, (long long)g->N);
  }
  return ALMA_OK;
}

/* B's scale or zero point: one value or one per column of Y ([N]). */
static alma_status chk_col_param(const alma_node *n, const alma_tensor *t, const char *what, int64_t N) {
  char s[128];
  if (one_value(t) || (t->rank == 1 && t->dims[0] == N)) return ALMA_OK;
  return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "%s of shape %s: one value or one per output column ([%lld])", what,
                        alma__shape_str(t->rank, t->dims, s, sizeof s), (long long)N);
}

static alma_status qgemm_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  const alma_tensor *a = in[0], *b = in[3], *ys = alma__nn_in(in, nin, 7), *yz = alma__nn_in(in, nin, 8);
  ALMA_TRY(chk_q8(n, a, "A"));
  ALMA_TRY(chk_q8(n, b, "B"));
  if (a->dtype == ALMA_DTYPE_INT8 && b->dtype == ALMA_DTYPE_UINT8)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "int8 A with uint8 B (ONNX Runtime has no such kernel)");
  ALMA_TRY(chk_scale(n, in[1], "a_scale"));
  ALMA_TRY(chk_zp(n, in[2], "a_zero_point", a->dtype, 1));
  qgemm_geom g;
  ALMA_TRY(qgemm_geom_make(n, in, nin, &g));
  const alma_tensor *bs = in[4], *bz = in[5];
  if (!bs || !bz) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "b_scale and b_zero_point are required");
  if (bs->dtype != ALMA_DTYPE_FLOAT32)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "b_scale of dtype %s (float32 expected)", alma_dtype_name(bs->dtype));
  if (bz->dtype != b->dtype)
    return alma__op_error(n, ALMA_ERR_TYPE, "b_zero_point of dtype %s (B is %s)", alma_dtype_name(bz->dtype),
                          alma_dtype_name(b->dtype));
  ALMA_TRY(chk_col_param(n, bs, "b_scale", g.N));
  ALMA_TRY(chk_col_param(n, bz, "b_zero_point", g.N));
  if (alma_tensor_numel(bs) != alma_tensor_numel(bz))
    return alma__op_error(n, ALMA_ERR_SHAPE, "b_scale and b_zero_point have different sizes");
  int64_t dims[2] = {g.M, g.N};
  if (ys) {
    ALMA_TRY(chk_scale(n, ys, "y_scale"));
    ALMA_TRY(chk_zp(n, yz, "y_zero_point", a->dtype, 0));
    alma__set_shape(&out[0], a->dtype, 2, dims);
  } else {
    if (yz) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "y_zero_point without y_scale");
    alma__set_shape(&out[0], ALMA_DTYPE_FLOAT32, 2, dims);
  }
  return ALMA_OK;
}

/* Integer matrix product acc[M, N] (int32, wrapping) of (a - a_zp) and (b - b_zp[n]), added to `acc`'s
 * initial content. A is [M, K] (lda K, or transposed), B [K, N] (or transposed); `bz` holds N zero
 * points. */
static alma_status int_matmul(const alma_node *n, const void *ad, alma_dtype at, int ta, int32_t az, const void *bd,
                              alma_dtype bt, int tb, const int32_t *bz, int64_t M, int64_t K, int64_t N, int32_t *acc) {
  int32_t *A = alma__nn_alloc(n, (size_t)(M * K > 0 ? M * K : 1), sizeof *A);
  int32_t *B = alma__nn_alloc(n, (size_t)(K * N > 0 ? K * N : 1), sizeof *B);
  if (!A || !B) {
    free(A);
    free(B);
    return ALMA_ERR_NOMEM;
  }
  for (int64_t i = 0; i < M; i++)
    for (int64_t k = 0; k < K; k++) A[i * K + k] = q8_get(ad, at, ta ? k * M + i : i * K + k) - az;
  for (int64_t k = 0; k < K; k++)
    for (int64_t j = 0; j < N; j++) B[k * N + j] = q8_get(bd, bt, tb ? j * K + k : k * N + j) - bz[j];
  for (int64_t i = 0; i < M; i++) {
    uint32_t *c = (uint32_t *)(acc + i * N);
    for (int64_t k = 0; k < K; k++) {
      int32_t av = A[i * K + k];
      if (!av) continue;
      const int32_t *br = B + k * N;
      for (int64_t j = 0; j < N; j++) c[j] += (uint32_t)(av * br[j]);
    }
  }
  free(A);
  free(B);
  return ALMA_OK;
}

static alma_status qgemm_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                              alma_tensor *out, int nout) {
  const alma_tensor *a = in[0], *b = in[3], *bs = in[4], *bzt = in[5], *c = alma__nn_in(in, nin, 6);
  const alma_tensor *ys = alma__nn_in(in, nin, 7), *yzt = alma__nn_in(in, nin, 8);
  qgemm_geom g;
  ALMA_TRY(qgemm_geom_make(n, in, nin, &g));
  int64_t M = g.M, N = g.N, K = g.K;
  int32_t *acc = alma__nn_alloc(n, (size_t)(M * N > 0 ? M * N : 1), sizeof *acc);
  int32_t *bz = alma__nn_alloc(n, (size_t)(N > 0 ? N : 1), sizeof *bz);
  float *scale = alma__nn_alloc(n, (size_t)(N > 0 ? N : 1), sizeof *scale);
  alma_status st = ALMA_OK;
  if (!acc || !bz || !scale) {
    st = ALMA_ERR_NOMEM;
    goto done;
  }
  /* the int32 bias starts the accumulator */
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      const int32_t *cd = c ? c->data : NULL;
      acc[i * N + j] = g.c_mode == 1 ? cd[0] : g.c_mode == 2 ? cd[j] : g.c_mode == 3 ? cd[i] : g.c_mode == 4 ? cd[i * N + j] : 0;
    }
  float alpha = alma__attr_f(n, "alpha", 1.0f), as = scale_of(in[1]);
  for (int64_t j = 0; j < N; j++) {
    int64_t jj = alma_tensor_numel(bs) > 1 ? j : 0;
    bz[j] = q8_get(bzt->data, bzt->dtype, alma_tensor_numel(bzt) > 1 ? j : 0);
    /* ONNX Runtime's output scale: alpha * a_scale * b_scale, divided by y_scale when quantizing */
    scale[j] = alpha * as * ((const float *)bs->data)[jj];
    if (ys) scale[j] /= scale_of(ys);
  }
  if ((st = int_matmul(n, a->data, a->dtype, g.ta, zp_of(in[2]), b->data, b->dtype, g.tb, bz, M, K, N, acc)) != ALMA_OK)
    goto done;
  if (ys) {
    alma_dtype t = out[0].dtype;
    int32_t lo, hi, yz = zp_of(yzt);
    q8_range(t, &lo, &hi);
    float flo = (float)(lo - yz), fhi = (float)(hi - yz);
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) q8_set(out[0].data, t, i * N + j, requant((float)acc[i * N + j] * scale[j], flo, fhi, yz));
  } else {
    float *y = out[0].data;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) y[i * N + j] = (float)acc[i * N + j] * scale[j];
  }
done:
  free(acc);
  free(bz);
  free(scale);
  return st;
}

static void qgemm_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                       int64_t *macs, int64_t *flops) {
  const alma_tensor *a = in[0];
  int64_t K = a && a->rank == 2 ? a->dims[alma__attr_i(n, "transA", 0) ? 0 : 1] : 0;
  *macs = alma_tensor_numel(&out[0]) * K;
  *flops = 2 * *macs;
}

const alma_op_def alma__op_MsQGemm = {.name = "QGemm", .domain = "com.microsoft", .versions = {1},
  .min_inputs = 6, .max_inputs = 9, .min_outputs = 1, .max_outputs = 1,
  .infer = qgemm_infer, .exec = qgemm_exec, .cost = qgemm_cost};

/* ==== MatMulIntegerToFloat / DynamicQuantizeMatMul ============================================ */

/* numpy matmul shapes (1-D operands promoted, batch dims broadcast), as ONNX Runtime's helper. */
typedef struct {
  int64_t M, K, N;
  int ra, rb, rbat;                                       /* batch ranks */
  int64_t ad[ALMA_MAX_RANK], bd[ALMA_MAX_RANK], batd[ALMA_MAX_RANK];
  int64_t bbatch, batch;
  int rank;
  int64_t dims[ALMA_MAX_RANK];
} mm_plan;

static alma_status mm_plan_make(const alma_node *n, const alma_tensor *a, const alma_tensor *b, mm_plan *p) {
  char s1[128], s2[128];
  memset(p, 0, sizeof *p);
  if (a->rank < 1 || b->rank < 1) return alma__op_error(n, ALMA_ERR_SHAPE, "matrix product of a scalar");
  int av = a->rank == 1, bv = b->rank == 1;
  p->M = av ? 1 : a->dims[a->rank - 2];
  p->K = a->dims[a->rank - 1];
  p->N = bv ? 1 : b->dims[b->rank - 1];
  if ((bv ? b->dims[0] : b->dims[b->rank - 2]) != p->K)
    return alma__op_error(n, ALMA_ERR_SHAPE, "inner dimensions of %s and %s differ",
                          alma__shape_str(a->rank, a->dims, s1, sizeof s1), alma__shape_str(b->rank, b->dims, s2, sizeof s2));
  p->ra = av ? 0 : a->rank - 2;
  p->rb = bv ? 0 : b->rank - 2;
  memcpy(p->ad, a->dims, (size_t)p->ra * sizeof(int64_t));
  memcpy(p->bd, b->dims, (size_t)p->rb * sizeof(int64_t));
  if (alma__broadcast_shape(p->ra, p->ad, p->rb, p->bd, &p->rbat, p->batd) != ALMA_OK)
    return alma__op_error(n, ALMA_ERR_SHAPE, "batch dimensions of %s and %s do not broadcast",
                          alma__shape_str(a->rank, a->dims, s1, sizeof s1), alma__shape_str(b->rank, b->dims, s2, sizeof s2));
  p->bbatch = alma__numel(p->rb, p->bd);
  p->batch = alma__numel(p->rbat, p->batd);
  p->rank = p->rbat;
  memcpy(p->dims, p->batd, (size_t)p->rbat * sizeof(int64_t));
  if (!av) p->dims[p->rank++] = p->M;
  if (!bv) p->dims[p->rank++] = p->N;
  return ALMA_OK;
}

/* ONNX Runtime's per-column forms of B's scale and zero point: one value (0), [N] for a 2-D B (1), or
 * B's shape with K set to 1, one row of N per batch matrix of B (2). -1: none of these. */
static int b_param_form(const alma_tensor *t, const alma_tensor *b) {
  if (one_value(t)) return 0;
  if (t->rank == 1 && b->rank == 2 && t->dims[0] == b->dims[1]) return 1;
  if (t->rank != b->rank || t->rank <= 1 || t->dims[t->rank - 2] != 1) return -1;
  for (int k = 0; k < t->rank; k++)
    if (k != t->rank - 2 && t->dims[k] != b->dims[k]) return -1;
  return 2;
}

/* A scale ONNX Runtime applies after the product, broadcast over the output (ScaleOutput). */
static alma_status chk_post_scale(const alma_node *n, const alma_tensor *t, const char *what, const mm_plan *p) {
  char s1[128], s2[128];
  int r;
  int64_t d[ALMA_MAX_RANK];
  int ok = alma__broadcast_shape(t->rank, t->dims, p->rank, p->dims, &r, d) == ALMA_OK && r == p->rank;
  for (int k = 0; ok && k < r; k++) ok = d[k] == p->dims[k];
  if (!ok)
    return alma__op_error(n, ALMA_ERR_SHAPE, "%s of shape %s does not broadcast to the output %s", what,
                          alma__shape_str(t->rank, t->dims, s1, sizeof s1), alma__shape_str(p->rank, p->dims, s2, sizeof s2));
  return ALMA_OK;
}

typedef struct {
  const alma_tensor *a, *b, *bz, *bias;
  float a_scale;            /* per-tensor multiplier part from A */
  const alma_tensor *bs;    /* B scale in a per-column form, or NULL */
  const alma_tensor *post[2]; /* scales applied afterwards (ScaleOutput), or NULL */
  int32_t az;
} mmf_args;

/* Inputs' checks shared by both ops: B, its scale/zero point forms, bias. */
static alma_status mmf_check_b(const alma_node *n, const alma_tensor *b, const alma_tensor *bs, const alma_tensor *bz,
                               const alma_tensor *bias, const mm_plan *p, int *bs_form) {
  char s[128];
  ALMA_TRY(chk_q8(n, b, "B"));
  if (bs->dtype != ALMA_DTYPE_FLOAT32)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "b_scale of dtype %s (float32 expected)", alma_dtype_name(bs->dtype));
  *bs_form = b_param_form(bs, b);
  if (*bs_form < 0) ALMA_TRY(chk_post_scale(n, bs, "b_scale", p));
  if (bz) {
    if (bz->dtype != b->dtype)
      return alma__op_error(n, ALMA_ERR_TYPE, "b_zero_point of dtype %s (B is %s)", alma_dtype_name(bz->dtype),
                            alma_dtype_name(b->dtype));
    if (b_param_form(bz, b) < 0)
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED,
                            "b_zero_point of shape %s: one value, [N] for a 2-D B, or B's shape with K set to 1",
                            alma__shape_str(bz->rank, bz->dims, s, sizeof s));
  }
  if (bias) {
    if (bias->dtype != ALMA_DTYPE_FLOAT32)
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "bias of dtype %s (float32 expected)", alma_dtype_name(bias->dtype));
    if (bias->rank != 1 || bias->dims[0] != p->N)
      return alma__op_error(n, ALMA_ERR_SHAPE, "bias of shape %s (expected [%lld])",
                            alma__shape_str(bias->rank, bias->dims, s, sizeof s), (long long)p->N);
  }
  return ALMA_OK;
}

/* y = (float)acc * (a_scale * b_scale[col]) + bias[col], per batch matrix, then ScaleOutput's
 * broadcast multiplications: ONNX Runtime's MatMulIntegerToFloatBase. */
static alma_status mmf_run(const alma_node *n, const mm_plan *p, const mmf_args *g, float *y) {
  int64_t M = p->M, K = p->K, N = p->N;
  if (p->batch * M * N == 0) return ALMA_OK;
  int64_t nz = g->bz ? alma_tensor_numel(g->bz) : 1, ns = g->bs ? alma_tensor_numel(g->bs) : 1;
  /* rows of per-column parameters: 1, or one per B batch matrix */
  int64_t zrows = nz == 1 ? 1 : nz / N, srows = ns == 1 ? 1 : ns / N;
  int64_t nbz = nz == 1 ? N : nz, nmu = ns == 1 ? N : ns;
  int32_t *acc = alma__nn_alloc(n, (size_t)(M * N), sizeof *acc);
  int32_t *bz = alma__nn_alloc(n, (size_t)nbz, sizeof *bz);
  float *mult = alma__nn_alloc(n, (size_t)nmu, sizeof *mult);
  alma_status st = ALMA_OK;
  if (!acc || !bz || !mult) {
    st = ALMA_ERR_NOMEM;
    goto done;
  }
  /* per-column parameters are laid out [rows, N]: one row, or one per B batch matrix */
  for (int64_t i = 0; i < nbz; i++) bz[i] = g->bz ? q8_get(g->bz->data, g->bz->dtype, nz == 1 ? 0 : i) : 0;
  for (int64_t i = 0; i < nmu; i++) mult[i] = g->bs ? g->a_scale * ((const float *)g->bs->data)[ns == 1 ? 0 : i] : g->a_scale;
  const float *bias = g->bias ? g->bias->data : NULL;
  size_t asz = alma_dtype_size(g->a->dtype), bsz = alma_dtype_size(g->b->dtype);
  for (int64_t o = 0; o < p->batch; o++) {
    int64_t ia = alma__broadcast_index(o, p->rbat, p->batd, p->ra, p->ad);
    int64_t ib = alma__broadcast_index(o, p->rbat, p->batd, p->rb, p->bd);
    memset(acc, 0, (size_t)(M * N) * sizeof *acc);
    const int32_t *bzr = bz + (ib % zrows) * N;
    if ((st = int_matmul(n, (const char *)g->a->data + (size_t)(ia * M * K) * asz, g->a->dtype, 0, g->az,
                         (const char *)g->b->data + (size_t)(ib * K * N) * bsz, g->b->dtype, 0, bzr, M, K, N, acc)) != ALMA_OK)
      goto done;
    const float *mr = mult + (ib % srows) * N;
    float *yo = y + o * M * N;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        float v = (float)acc[i * N + j] * mr[j];
        if (bias) v = v + bias[j];
        yo[i * N + j] = v;
      }
  }
  for (int k = 0; k < 2; k++) {
    const alma_tensor *s = g->post[k];
    if (!s) continue;
    bcast_iter it;
    alma_tensor shape = {.rank = p->rank};
    memcpy(shape.dims, p->dims, (size_t)p->rank * sizeof(int64_t));
    const alma_tensor *one[1] = {s};
    bcast_init(&it, shape.rank, shape.dims, 1, one);
    int64_t cnt = p->batch * M * N;
    for (int64_t e = 0; e < cnt; e++, bcast_next(&it)) y[e] = ((const float *)s->data)[it.idx[0]] * y[e];
  }
done:
  free(acc);
  free(bz);
  free(mult);
  return st;
}

static void mmf_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out, int nout,
                     int64_t *macs, int64_t *flops) {
  const alma_tensor *a = in[0];
  int64_t K = a && a->rank >= 1 ? a->dims[a->rank - 1] : 0;
  *macs = alma_tensor_numel(&out[0]) * K;
  *flops = 2 * *macs;
}

/* ---- MatMulIntegerToFloat: A, B, a_scale, b_scale, a_zero_point?, b_zero_point?, bias? ---- */

/* ONNX Runtime's FixupScaleTensor: its fusion may swap a_scale and b_scale; a non-scalar a_scale that
 * is not per row ([..., M, 1]), or a b_scale that is per row, is taken as the other one. */
static void mmitf_scales(const alma_tensor *const *in, const alma_tensor **as, const alma_tensor **bs) {
  *as = in[2];
  *bs = in[3];
  const alma_tensor *t;
  if (!one_value(*as)) {
    if ((*as)->rank == 1 || (*as)->dims[(*as)->rank - 1] != 1) {
      t = *as;
      *as = *bs;
      *bs = t;
    }
  } else if (!one_value(*bs) && (*bs)->rank > 1 && (*bs)->dims[(*bs)->rank - 2] != 1) {
    t = *as;
    *as = *bs;
    *bs = t;
  }
}

static alma_status mmitf_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  const alma_tensor *a = in[0], *b = in[1], *as, *bs;
  ALMA_TRY(chk_q8(n, a, "A"));
  if (in[2]->dtype != ALMA_DTYPE_FLOAT32 || in[3]->dtype != ALMA_DTYPE_FLOAT32)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "scales of dtype %s and %s (float32 expected)",
                          alma_dtype_name(in[2]->dtype), alma_dtype_name(in[3]->dtype));
  ALMA_TRY(chk_zp(n, alma__nn_in(in, nin, 4), "a_zero_point", a->dtype, 0));
  mm_plan p;
  ALMA_TRY(mm_plan_make(n, a, b, &p));
  mmitf_scales(in, &as, &bs);
  if (!one_value(as)) ALMA_TRY(chk_post_scale(n, as, "a_scale", &p));
  int form;
  ALMA_TRY(mmf_check_b(n, b, bs, alma__nn_in(in, nin, 5), alma__nn_in(in, nin, 6), &p, &form));
  alma__set_shape(&out[0], ALMA_DTYPE_FLOAT32, p.rank, p.dims);
  return ALMA_OK;
}

static alma_status mmitf_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                              alma_tensor *out, int nout) {
  mm_plan p;
  ALMA_TRY(mm_plan_make(n, in[0], in[1], &p));
  const alma_tensor *as, *bs;
  mmitf_scales(in, &as, &bs);
  int form = b_param_form(bs, in[1]);
  mmf_args g = {.a = in[0], .b = in[1], .bz = alma__nn_in(in, nin, 5), .bias = alma__nn_in(in, nin, 6),
                .a_scale = one_value(as) ? scale_of(as) : 1.0f, .bs = form >= 0 ? bs : NULL,
                .post = {one_value(as) ? NULL : as, form >= 0 ? NULL : bs}, .az = zp_of(alma__nn_in(in, nin, 4))};
  return mmf_run(n, &p, &g, out[0].data);
}

const alma_op_def alma__op_MsMatMulIntegerToFloat = {.name = "MatMulIntegerToFloat", .domain = "com.microsoft",
  .versions = {1}, .min_inputs = 4, .max_inputs = 7, .min_outputs = 1, .max_outputs = 1,
  .infer = mmitf_infer, .exec = mmitf_exec, .cost = mmf_cost};

/* ---- DynamicQuantizeMatMul: A (float), B, b_scale, b_zero_point?, bias? ---- */

static alma_status dqmm_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  const alma_tensor *a = in[0], *b = in[1];
  if (a->dtype != ALMA_DTYPE_FLOAT32)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "A of dtype %s (float32 expected)", alma_dtype_name(a->dtype));
  mm_plan p;
  ALMA_TRY(mm_plan_make(n, a, b, &p));
  int form;
  ALMA_TRY(mmf_check_b(n, b, in[2], alma__nn_in(in, nin, 3), alma__nn_in(in, nin, 4), &p, &form));
  alma__set_shape(&out[0], ALMA_DTYPE_FLOAT32, p.rank, p.dims);
  return ALMA_OK;
}

static alma_status dqmm_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  const alma_tensor *a = in[0], *bs = in[2];
  mm_plan p;
  ALMA_TRY(mm_plan_make(n, a, in[1], &p));
  /* A quantized to uint8 over its whole range (widened to include 0), as ONNX Runtime's
   * GetQuantizationParameter and MlasQuantizeLinear do */
  int64_t cnt = alma_tensor_numel(a);
  const float *x = a->data;
  float mn = FLT_MAX, mx = -FLT_MAX;
  for (int64_t i = 0; i < cnt; i++) {
    mn = x[i] < mn ? x[i] : mn;
    mx = x[i] > mx ? x[i] : mx;
  }
  mn = mn < 0.0f ? mn : 0.0f;
  mx = mx > 0.0f ? mx : 0.0f;
  float scale = mx == mn ? 1.0f : (mx - mn) / 255.0f;
  /* std::max(0, std::min(255, zp)) as ONNX Runtime writes it: a NaN (infinite inputs) gives 255 */
  float zpf = 0.0f - mn / scale;
  zpf = zpf < 255.0f ? zpf : 255.0f;
  zpf = 0.0f < zpf ? zpf : 0.0f;
  int32_t zp = (int32_t)rne(zpf);
  alma_tensor aq = {.dtype = ALMA_DTYPE_UINT8, .rank = a->rank};
  memcpy(aq.dims, a->dims, (size_t)a->rank * sizeof(int64_t));
  uint8_t *q = alma__nn_alloc(n, (size_t)(cnt > 0 ? cnt : 1), 1);
  if (!q) return ALMA_ERR_NOMEM;
  for (int64_t i = 0; i < cnt; i++) q[i] = (uint8_t)quantize_one(x[i], scale, zp, 0, 255);
  aq.data = q;
  int form = b_param_form(bs, in[1]);
  mmf_args g = {.a = &aq, .b = in[1], .bz = alma__nn_in(in, nin, 3), .bias = alma__nn_in(in, nin, 4), .a_scale = scale,
                .bs = form >= 0 ? bs : NULL, .post = {NULL, form >= 0 ? NULL : bs}, .az = zp};
  alma_status st = mmf_run(n, &p, &g, out[0].data);
  free(q);
  return st;
}

const alma_op_def alma__op_MsDynamicQuantizeMatMul = {.name = "DynamicQuantizeMatMul", .domain = "com.microsoft",
  .versions = {1}, .min_inputs = 3, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
  .infer = dqmm_infer, .exec = dqmm_exec, .cost = mmf_cost};
