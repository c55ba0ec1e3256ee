/* ONNX Runtime's quantized contrib operators (src/ops/contrib_quant.c, domain com.microsoft).
 *
 * contrib_cases.h holds one-node cases with ONNX Runtime's outputs (gen_contrib_cases.py, onnxruntime
 * 1.32): rounding ties, saturation, zero points, the broadcasting forms ONNX Runtime's kernels treat
 * apart, per-column parameters. Quantized outputs must match to the bit, float outputs to float32
 * rounding. Then hand-checked values, the errors infer gives at load, and a small graph of these ops
 * through every conversion this build can run, against ONNX Runtime's outputs. */
#include "op_test_util.h"

#include "alma/alma.h"

enum { CC_I, CC_F, CC_INTS, CC_S };
typedef struct {
  const char *name;
  int kind;
  int64_t i;
  float f;
  int n;
  int64_t ints[8];
  const char *s;
} cc_attr;
typedef struct {
  int dtype, rank; /* dtype 0: omitted input */
  int64_t dims[8];
  const void *data;
} cc_tensor;
typedef struct {
  const char *test, *op;
  int nin;
  cc_tensor in[14];
  int nattr;
  cc_attr attrs[8];
  cc_tensor y;
} cc_case;

#include "contrib_cases.h"

static alma_tensor cc_view(const cc_tensor *c) { return TT((alma_dtype)c->dtype, c->data, c->rank, c->dims); }

/* A node of the com.microsoft domain with the case's attributes, resolved at version 1. */
static alma_status ms_make(tnode *t, const char *op, int nin, int nout) {
  tn_init(t, op, nin, nout);
  t->n.domain = "com.microsoft";
  return alma__op_resolve(&t->n, 1);
}

static void cc_node(tnode *t, const cc_case *c) {
  assert_int_equal(ms_make(t, c->op, c->nin, 1), ALMA_OK);
  for (int i = 0; i < c->nin; i++)
    if (!c->in[i].dtype) t->ins[i] = -1;
  for (int k = 0; k < c->nattr; k++) {
    const cc_attr *a = &c->attrs[k];
    if (a->kind == CC_I) attr_i(t, a->name, a->i);
    else if (a->kind == CC_F) attr_f(t, a->name, a->f);
    else if (a->kind == CC_INTS) attr_ints(t, a->name, a->ints, a->n);
    else attr_s(t, a->name, a->s);
  }
}

/* Runs a case with `override` replacing input k when given; 0 when the output matches `want`. */
static int cc_run(const cc_case *c, int k, const alma_tensor *override, const cc_tensor *want) {
  tnode t;
  cc_node(&t, c);
  alma_tensor ins[14], out;
  alma_tensor *pin[14];
  for (int i = 0; i < c->nin; i++) {
    ins[i] = cc_view(&c->in[i]);
    pin[i] = c->in[i].dtype ? &ins[i] : NULL;
  }
  if (override) {
    pin[k] = override->dtype ? (alma_tensor *)override : NULL;
    t.ins[k] = override->dtype ? k : -1;
  }
  alma_status st = tn_exec(&t, pin, c->nin, &out, 1);
  if (st != ALMA_OK) {
    print_error("%s: %s\n", c->test, alma_last_error());
    return 1;
  }
  int bad = (int)out.dtype != want->dtype || out.rank != want->rank;
  for (int d = 0; !bad && d < out.rank; d++) bad = out.dims[d] != want->dims[d];
  if (bad) {
    print_error("%s: output dtype %s rank %d, want dtype %d rank %d\n", c->test, alma_dtype_name(out.dtype), out.rank,
                want->dtype, want->rank);
  } else {
    int64_t n = alma_tensor_numel(&out);
    for (int64_t i = 0; i < n && !bad; i++) {
      if (out.dtype == ALMA_DTYPE_FLOAT32) {
        double g = ((const float *)out.data)[i], w = ((const float *)want->data)[i];
        bad = !(fabs(g - w) <= 1e-6 * (1 + fabs(w)));
        if (bad) print_error("%s: element %lld: got %.9g, want %.9g\n", c->test, (long long)i, g, w);
      } else {
        int64_t g = alma__get_i64(out.data, out.dtype, i), w = alma__get_i64(want->data, out.dtype, i);
        bad = g != w;
        if (bad) print_error("%s: element %lld: got %lld, want %lld\n", c->test, (long long)i, (long long)g, (long long)w);
      }
    }
  }
  alma_tensor_free_data(&out);
  return bad;
}

static void test_onnxruntime_cases(void **s) {
  (void)s;
  int failed = 0, n = (int)(sizeof contrib_cases / sizeof contrib_cases[0]);
  for (int i = 0; i < n; i++) failed += cc_run(&contrib_cases[i], 0, NULL, &contrib_cases[i].y);
  if (failed) fail_msg("%d of %d cases differ from ONNX Runtime", failed, n);
}

static const cc_case *find_case(const char *name) {
  for (size_t i = 0; i < sizeof contrib_cases / sizeof contrib_cases[0]; i++)
    if (!strcmp(contrib_cases[i].test, name)) return &contrib_cases[i];
  fail_msg("no case %s", name);
  return NULL;
}

/* Omitted zero points read as 0 (ONNX Runtime's own type inference refuses them for QLinearAdd, so
 * the ORT case passes explicit zeros). */
static void test_omitted_zero_points(void **s) {
  (void)s;
  const cc_case *c = find_case("add_u8_ties");
  alma_tensor none = {0};
  for (int k = 2; k <= 7; k += (k == 2 ? 3 : 2)) assert_int_equal(cc_run(c, k, &none, &c->y), 0);
  c = find_case("leaky_s8_default_alpha");
  int8_t z = 0;
  alma_tensor zero = SCALAR(ALMA_DTYPE_INT8, &z);
  assert_int_equal(cc_run(c, 2, &zero, &c->y), 0);
}

/* Values worked out by hand, independent of ONNX Runtime. */
static void test_hand_checked(void **s) {
  (void)s;
  tnode t;
  alma_tensor out;
  /* QLinearAdd: (a + b) / 2 with unit output scale: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, 255 + 255 -> 255 */
  uint8_t a[4] = {1, 3, 5, 255}, b[4] = {0, 0, 0, 255}, z = 0;
  float half = 0.5f, one = 1.0f;
  alma_tensor A = TV(ALMA_DTYPE_UINT8, a, 4), B = TV(ALMA_DTYPE_UINT8, b, 4), H = SCALAR(ALMA_DTYPE_FLOAT32, &half),
              O = SCALAR(ALMA_DTYPE_FLOAT32, &one), Z = SCALAR(ALMA_DTYPE_UINT8, &z);
  alma_tensor *in[8] = {&A, &H, &Z, &B, &H, &Z, &O, &Z};
  assert_int_equal(ms_make(&t, "QLinearAdd", 8, 1), ALMA_OK);
  assert_int_equal(tn_exec(&t, in, 8, &out, 1), ALMA_OK);
  check_i64(&out, (int64_t[]){0, 2, 2, 255}, 4);
  alma_tensor_free_data(&out);
  /* QLinearMul int8: (a - 1) * (b + 1) * 0.5 / 1 + 0: 3*3/2 = 4.5 -> 4, 5*(-3)/2 = -7.5 -> -8, saturates at 127 */
  int8_t sa[3] = {4, 6, 127}, sb[3] = {2, -4, 127}, za = 1, zb = -1, zc = 0;
  alma_tensor SA = TV(ALMA_DTYPE_INT8, sa, 3), SB = TV(ALMA_DTYPE_INT8, sb, 3), ZA = SCALAR(ALMA_DTYPE_INT8, &za),
              ZB = SCALAR(ALMA_DTYPE_INT8, &zb), ZC = SCALAR(ALMA_DTYPE_INT8, &zc);
  alma_tensor *min[8] = {&SA, &H, &ZA, &SB, &O, &ZB, &O, &ZC};
  assert_int_equal(ms_make(&t, "QLinearMul", 8, 1), ALMA_OK);
  assert_int_equal(tn_exec(&t, min, 8, &out, 1), ALMA_OK);
  check_i64(&out, (int64_t[]){4, -8, 127}, 3);
  alma_tensor_free_data(&out);
  /* QGemm u8u8, float output: [1 2; 3 4] (zp 1) x [1; 2] (zp 0) * 0.5 * 2 = [0*1 + 1*2, 2*1 + 3*2] + C */
  uint8_t ga[4] = {1, 2, 3, 4}, gb[2] = {1, 2}, gz = 0;
  int32_t gc[2] = {10, -10};
  float two = 2.0f;
  alma_tensor GA = TV(ALMA_DTYPE_UINT8, ga, 2, 2), GB = TV(ALMA_DTYPE_UINT8, gb, 2, 1), GC = TV(ALMA_DTYPE_INT32, gc, 2, 1),
              GZ = SCALAR(ALMA_DTYPE_UINT8, &gz), GT = SCALAR(ALMA_DTYPE_FLOAT32, &two);
  uint8_t one_u8 = 1;
  alma_tensor AZ = SCALAR(ALMA_DTYPE_UINT8, &one_u8);
  alma_tensor *gin[7] = {&GA, &H, &AZ, &GB, &GT, &GZ, &GC};
  assert_int_equal(ms_make(&t, "QGemm", 7, 1), ALMA_OK);
  assert_int_equal(tn_exec(&t, gin, 7, &out, 1), ALMA_OK);
  assert_int_equal(out.dtype, ALMA_DTYPE_FLOAT32);
  check_f_abs(&out, (double[]){12, -2}, 2, 0);
  alma_tensor_free_data(&out);
  /* QLinearGlobalAveragePool: mean of {0, 1, 2, 4} - zp 1 = 0.75, scale 1 -> 1 (0.75 rounds up); zp 10 -> 11 */
  uint8_t gx[4] = {0, 1, 2, 4}, g1 = 1, g10 = 10;
  alma_tensor GX = TV(ALMA_DTYPE_UINT8, gx, 1, 1, 2, 2), G1 = SCALAR(ALMA_DTYPE_UINT8, &g1), G10 = SCALAR(ALMA_DTYPE_UINT8, &g10);
  alma_tensor *gpin[5] = {&GX, &O, &G1, &O, &G10};
  assert_int_equal(ms_make(&t, "QLinearGlobalAveragePool", 5, 1), ALMA_OK);
  assert_int_equal(tn_exec(&t, gpin, 5, &out, 1), ALMA_OK);
  check_shape(&out, 4, D(1, 1, 1, 1));
  check_i64(&out, (int64_t[]){11}, 1);
  alma_tensor_free_data(&out);
  /* QLinearReduceMean over all axes (empty list) without keepdims: a scalar */
  const int64_t no_axes[1] = {0};
  assert_int_equal(ms_make(&t, "QLinearReduceMean", 5, 1), ALMA_OK);
  attr_ints(&t, "axes", no_axes, 0);
  attr_i(&t, "keepdims", 0);
  assert_int_equal(tn_exec(&t, gpin, 5, &out, 1), ALMA_OK);
  assert_int_equal(out.rank, 0);
  check_i64(&out, (int64_t[]){11}, 1);
  alma_tensor_free_data(&out);
}

/* Shapes come from infer alone, without data (at load, for values computed upstream). */
static void test_infer_without_data(void **s) {
  (void)s;
  tnode t;
  float sc = 1.0f;
  uint8_t z = 0;
  alma_tensor A = TT(ALMA_DTYPE_UINT8, NULL, 4, D(2, 3, 4, 5)), B = TT(ALMA_DTYPE_UINT8, NULL, 3, D(3, 1, 1)),
              S = SCALAR(ALMA_DTYPE_FLOAT32, &sc), Z = SCALAR(ALMA_DTYPE_UINT8, &z), out[1];
  const alma_tensor *in[8] = {&A, &S, &Z, &B, &S, &Z, &S, &Z};
  tn_init(&t, "QLinearAdd", 8, 1);
  t.n.domain = "com.microsoft";
  assert_int_equal(tn_infer(&t, 1, in, out), ALMA_OK);
  check_shape(&out[0], 4, D(2, 3, 4, 5));
  tn_init(&t, "QLinearAveragePool", 5, 1);
  t.n.domain = "com.microsoft";
  attr_ints(&t, "kernel_shape", D(3, 3), 2);
  attr_ints(&t, "strides", D(2, 2), 2);
  attr_i(&t, "ceil_mode", 1);
  const alma_tensor *pin[5] = {&A, &S, &Z, &S, &Z};
  assert_int_equal(tn_infer(&t, 1, pin, out), ALMA_OK);
  check_shape(&out[0], 4, D(2, 3, 2, 2));
}

/* Everything alma cannot run fails in infer, at load, naming what. */
static void test_errors(void **s) {
  (void)s;
  tnode t;
  float sc = 1.0f, sc2[2] = {1, 2};
  uint16_t h = 0x3c00;
  uint8_t z = 0, xd[8] = {0};
  int8_t zs = 0;
  int16_t x16[4] = {0};
  alma_tensor X = TV(ALMA_DTYPE_UINT8, xd, 2, 4), X16 = TV(ALMA_DTYPE_INT16, x16, 4), S = SCALAR(ALMA_DTYPE_FLOAT32, &sc),
              S2 = TV(ALMA_DTYPE_FLOAT32, sc2, 2), SH = SCALAR(ALMA_DTYPE_FLOAT16, &h), Z = SCALAR(ALMA_DTYPE_UINT8, &z),
              ZS = SCALAR(ALMA_DTYPE_INT8, &zs), out[1];
  /* the registry: com.microsoft only, version 1 */
  assert_non_null(alma__op_find("com.microsoft", "QGemm"));
  assert_null(alma__op_find("", "QGemm"));
  assert_null(alma__op_find("com.microsoft", "QLinearConv"));
  /* int16 data, per-axis and float16 scales, zero point dtype mismatch */
  const alma_tensor *lin[5] = {&X16, &S, NULL, &S, NULL};
  tn_init(&t, "QLinearSigmoid", 5, 1);
  t.n.domain = "com.microsoft";
  assert_int_equal(tn_infer(&t, 1, lin, out), ALMA_ERR_UNSUPPORTED);
  assert_non_null(strstr(alma_last_error(), "int16"));
  lin[0] = &X;
  lin[1] = &S2;
  assert_int_equal(tn_infer(&t, 1, lin, out), ALMA_ERR_UNSUPPORTED);
  assert_non_null(strstr(alma_last_error(), "X_scale"));
  lin[1] = &SH;
  assert_int_equal(tn_infer(&t, 1, lin, out), ALMA_ERR_UNSUPPORTED);
  assert_non_null(strstr(alma_last_error(), "float16"));
  lin[1] = &S;
  lin[2] = &ZS;
  assert_int_equal(tn_infer(&t, 1, lin, out), ALMA_ERR_TYPE);
  lin[2] = &Z;
  assert_int_equal(tn_infer(&t, 1, lin, out), ALMA_OK);
  /* a missing required input given as an empty name */
  lin[1] = NULL;
  assert_int_equal(tn_infer(&t, 1, lin, out), ALMA_ERR_INVALID_MODEL);
  lin[1] = &S;
  /* attributes */
  tn_init(&t, "QLinearGlobalAveragePool", 5, 1);
  t.n.domain = "com.microsoft";
  attr_i(&t, "channels_last", 2);
  alma_tensor X4 = TV(ALMA_DTYPE_UINT8, xd, 1, 2, 2, 2);
  const alma_tensor *gin[5] = {&X4, &S, &Z, &S, &Z};
  assert_int_equal(tn_infer(&t, 1, gin, out), ALMA_ERR_UNSUPPORTED);
  assert_non_null(strstr(alma_last_error(), "channels_last=2"));
  tn_init(&t, "QLinearAveragePool", 5, 1);
  t.n.domain = "com.microsoft";
  attr_ints(&t, "kernel_shape", D(1, 1, 1, 1), 4);
  alma_tensor X6 = TT(ALMA_DTYPE_UINT8, NULL, 6, D(1, 1, 2, 2, 2, 2));
  gin[0] = &X6;
  assert_int_equal(tn_infer(&t, 1, gin, out), ALMA_ERR_UNSUPPORTED);
  tn_init(&t, "QLinearSoftmax", 5, 1);
  t.n.domain = "com.microsoft";
  gin[0] = &X;
  assert_int_equal(tn_infer(&t, 1, gin, out), ALMA_ERR_INVALID_MODEL); /* opset attribute required */
  /* QGemm: int8 A with uint8 B has no ONNX Runtime kernel; B's per-column scale must be [N] */
  int8_t ad[8] = {0};
  alma_tensor AS8 = TV(ALMA_DTYPE_INT8, ad, 2, 4), B = TV(ALMA_DTYPE_UINT8, xd, 4, 2);
  const alma_tensor *qin[6] = {&AS8, &S, &ZS, &B, &S, &Z};
  tn_init(&t, "QGemm", 6, 1);
  t.n.domain = "com.microsoft";
  assert_int_equal(tn_infer(&t, 1, qin, out), ALMA_ERR_UNSUPPORTED);
  qin[0] = &X;
  qin[2] = &Z;
  assert_int_equal(tn_infer(&t, 1, qin, out), ALMA_OK);
  float s3[3] = {1, 1, 1};
  alma_tensor S3 = TV(ALMA_DTYPE_FLOAT32, s3, 3);
  qin[4] = &S3;
  assert_int_equal(tn_infer(&t, 1, qin, out), ALMA_ERR_UNSUPPORTED);
  assert_non_null(strstr(alma_last_error(), "b_scale"));
  /* MatMulIntegerToFloat: the bias has one value per column */
  alma_tensor BIAS = TV(ALMA_DTYPE_FLOAT32, s3, 3);
  const alma_tensor *min[7] = {&X, &B, &S, &S, NULL, NULL, &BIAS};
  tn_init(&t, "MatMulIntegerToFloat", 7, 1);
  t.n.domain = "com.microsoft";
  assert_int_equal(tn_infer(&t, 1, min, out), ALMA_ERR_SHAPE);
  min[6] = NULL;
  assert_int_equal(tn_infer(&t, 1, min, out), ALMA_OK);
  check_shape(&out[0], 2, D(2, 2));
  /* DynamicQuantizeLSTM (rnn.c): X [S=2, N=1, I=3], W [1, 3, 4H=8], R [1, 2, 8]; the scales and
   * zero points are required, per direction [1] or per gate row [1, 8], of W's type */
  float xf[6] = {0};
  int8_t wq[24] = {0}, rq[16] = {0};
  float s8[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  alma_tensor LX = TV(ALMA_DTYPE_FLOAT32, xf, 2, 1, 3), LW = TV(ALMA_DTYPE_INT8, wq, 1, 3, 8),
              LR = TV(ALMA_DTYPE_INT8, rq, 1, 2, 8), LS = TV(ALMA_DTYPE_FLOAT32, &sc, 1),
              LZ = TV(ALMA_DTYPE_INT8, &zs, 1), LS8 = TV(ALMA_DTYPE_FLOAT32, s8, 1, 8), LS3 = TV(ALMA_DTYPE_FLOAT32, s3, 3);
  const alma_tensor *lq[12] = {&LX, &LW, &LR, NULL, NULL, NULL, NULL, NULL, &LS, &LZ, &LS, &LZ};
  alma_tensor lout[3];
  tn_init(&t, "DynamicQuantizeLSTM", 12, 3);
  t.n.domain = "com.microsoft";
  assert_int_equal(alma__op_resolve(&t.n, 1), ALMA_OK);
  assert_int_equal(tn_infer(&t, 3, lq, lout), ALMA_OK);
  check_shape(&lout[0], 4, D(2, 1, 1, 2));
  check_shape(&lout[2], 3, D(1, 1, 2));
  lq[8] = &LS8; /* per gate row */
  assert_int_equal(tn_infer(&t, 3, lq, lout), ALMA_OK);
  lq[8] = &LS3;
  assert_int_equal(tn_infer(&t, 3, lq, lout), ALMA_ERR_SHAPE);
  assert_non_null(strstr(alma_last_error(), "W_scale"));
  lq[8] = NULL;
  assert_int_equal(tn_infer(&t, 3, lq, lout), ALMA_ERR_INVALID_MODEL);
  assert_non_null(strstr(alma_last_error(), "W_scale is required"));
  lq[8] = &LS;
  lq[11] = &Z; /* uint8 zero point for int8 R */
  assert_int_equal(tn_infer(&t, 3, lq, lout), ALMA_ERR_TYPE);
  assert_non_null(strstr(alma_last_error(), "R_zero_point"));
  lq[11] = &LZ;
  float wf[24] = {0};
  alma_tensor LWF = TV(ALMA_DTYPE_FLOAT32, wf, 1, 3, 8);
  lq[1] = &LWF; /* float W */
  assert_int_equal(tn_infer(&t, 3, lq, lout), ALMA_ERR_TYPE);
  assert_non_null(strstr(alma_last_error(), "int8 or uint8"));
}

/* The small graph through every conversion this build can run (the optimized runtimes run these
 * ops on EAGER kernels), against ONNX Runtime. */
static void test_small_model_conversions(void **s) {
  (void)s;
  alma_model *m = NULL;
  assert_int_equal(alma_model_load_from_memory(model_bytes, sizeof model_bytes, NULL, &m), ALMA_OK);
  const char *convs[] = {"EAGER", "FOLD+EAGER", "FOLD+FUSE+EAGER", "DNNL", "XNNPACK", "BLAS"};
  int ran = 0;
  for (size_t c = 0; c < sizeof convs / sizeof convs[0]; c++) {
    alma_session_options so;
    alma_session_options_init(&so);
    so.threads = 1;
    alma_session *se = NULL;
    alma_status st = alma_session_create(m, convs[c], &so, &se);
    if (st == ALMA_ERR_UNAVAILABLE) {
      print_message("  %s unavailable here: %s\n", convs[c], alma_last_error());
      continue;
    }
    if (st != ALMA_OK) fail_msg("%s: %s", convs[c], alma_last_error());
    alma_tensor x = TT(ALMA_DTYPE_FLOAT32, model_x, 4, D(2, 4, 6, 6)), y[3];
    memset(y, 0, sizeof y);
    if (alma_session_run(se, &x, 1, y, 3) != ALMA_OK) fail_msg("%s: %s", convs[c], alma_last_error());
    for (int k = 0; k < 3; k++) {
      check_shape(&y[k], model_ys[k].rank, model_ys[k].dims);
      int64_t n = alma_tensor_numel(&y[k]);
      double want[16];
      for (int64_t i = 0; i < n; i++) want[i] = ((const float *)model_ys[k].data)[i];
      check_f_rel(&y[k], want, n, 1e-6);
      alma_tensor_free_data(&y[k]);
    }
    alma_session_free(se);
    ran++;
  }
  assert_true(ran >= 2);
  alma_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_onnxruntime_cases),
      cmocka_unit_test(test_omitted_zero_points),
      cmocka_unit_test(test_hand_checked),
      cmocka_unit_test(test_infer_without_data),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_small_model_conversions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
