/* Unit tests of the extra operators (src/ops/extra_*.c): the opset-specific forms, dtypes, edge
 * cases and validation the ONNX node tests do not reach, and the random generators' contract
 * (reproducible, right shape/dtype/range), which the node tests cannot check. */
#include "op_test_util.h"

/* ==== extra_math.c ============================================================================= */
static void test_bitwise_edges(void **s) {
  tnode t;
  alma_tensor out[1];
  /* shifts by the width or more give 0; left shifts drop the high bits */
  static const uint8_t x[] = {1, 128, 200}, y[] = {8, 1, 2};
  alma_tensor xt = TT(ALMA_DTYPE_UINT8, x, 1, D(3)), yt = TT(ALMA_DTYPE_UINT8, y, 1, D(3));
  const alma_tensor *in[] = {&xt, &yt};
  tn_init(&t, "BitShift", 2, 1);
  attr_s(&t, "direction", "LEFT");
  assert_int_equal(tn_run(&t, 11, in, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){0, 0, 32}, 3);
  free_outs(out, 1);
  tn_init(&t, "BitShift", 2, 1);
  attr_s(&t, "direction", "RIGHT");
  assert_int_equal(tn_run(&t, 11, in, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){0, 64, 50}, 3);
  free_outs(out, 1);
  tn_init(&t, "BitShift", 2, 1);
  attr_s(&t, "direction", "UP");
  assert_int_equal(tn_run(&t, 11, in, out), ALMA_ERR_INVALID_MODEL);
  /* BitShift takes unsigned types only; the Bitwise ops take signed ones too */
  static const int8_t a[] = {-1, -128, 7}, b[] = {5};
  alma_tensor at = TT(ALMA_DTYPE_INT8, a, 1, D(3)), bt = TT(ALMA_DTYPE_INT8, b, 1, D(1));
  const alma_tensor *in2[] = {&at, &bt};
  tn_init(&t, "BitShift", 2, 1);
  attr_s(&t, "direction", "LEFT");
  assert_int_equal(tn_run(&t, 11, in2, out), ALMA_ERR_UNSUPPORTED);
  tn_init(&t, "BitwiseAnd", 2, 1);
  assert_int_equal(tn_run(&t, 18, in2, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){5, 0, 5}, 3);
  free_outs(out, 1);
  tn_init(&t, "BitwiseXor", 2, 1);
  assert_int_equal(tn_run(&t, 18, in2, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){-6, -123, 2}, 3);
  free_outs(out, 1);
  tn_init(&t, "BitwiseNot", 1, 1);
  assert_int_equal(tn_run(&t, 18, in2, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){0, 127, -8}, 3);
  free_outs(out, 1);
  /* float inputs are rejected */
  static const float f[] = {1};
  alma_tensor ft = TT(ALMA_DTYPE_FLOAT32, f, 1, D(1));
  const alma_tensor *in3[] = {&ft, &ft};
  tn_init(&t, "BitwiseOr", 2, 1);
  assert_int_equal(tn_run(&t, 18, in3, out), ALMA_ERR_UNSUPPORTED);
}

static void test_isinf_isnan_double(void **s) {
  tnode t;
  alma_tensor out[1];
  static const double x[] = {1.0, INFINITY, -INFINITY, NAN};
  alma_tensor xt = TT(ALMA_DTYPE_FLOAT64, x, 1, D(4));
  const alma_tensor *in[] = {&xt};
  tn_init(&t, "IsInf", 1, 1);
  attr_i(&t, "detect_negative", 0);
  assert_int_equal(tn_run(&t, 20, in, out), ALMA_OK);
  assert_int_equal(out[0].dtype, ALMA_DTYPE_BOOL);
  check_i64(&out[0], (int64_t[]){0, 1, 0, 0}, 4);
  free_outs(out, 1);
  tn_init(&t, "IsNaN", 1, 1);
  assert_int_equal(tn_run(&t, 9, in, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){0, 0, 0, 1}, 4);
  free_outs(out, 1);
  tn_init(&t, "IsInf", 1, 1);
  attr_i(&t, "detect_positive", 2);
  assert_int_equal(tn_run(&t, 20, in, out), ALMA_ERR_INVALID_MODEL);
}

static void test_shrink_celu_det(void **s) {
  tnode t;
  alma_tensor out[1];
  /* Shrink on integers: x -/+ bias outside [-lambd, lambd] */
  static const int32_t x[] = {-3, -1, 0, 2, 5};
  alma_tensor xt = TT(ALMA_DTYPE_INT32, x, 1, D(5));
  const alma_tensor *in[] = {&xt};
  tn_init(&t, "Shrink", 1, 1);
  attr_f(&t, "lambd", 1.5f);
  attr_f(&t, "bias", 1.0f);
  assert_int_equal(tn_run(&t, 9, in, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){-2, 0, 0, 1, 4}, 5);
  free_outs(out, 1);
  /* Celu divides by alpha */
  static const float f[] = {-1, 2};
  alma_tensor ft = TT(ALMA_DTYPE_FLOAT32, f, 1, D(2));
  const alma_tensor *in2[] = {&ft};
  tn_init(&t, "Celu", 1, 1);
  attr_f(&t, "alpha", 0.0f);
  assert_int_equal(tn_run(&t, 12, in2, out), ALMA_ERR_INVALID_MODEL);
  /* Det: singular, 3x3 through pivoting, non-square rejected */
  static const float m[] = {1, 2, 2, 4, 0, 1, 1, 0};
  alma_tensor mt = TT(ALMA_DTYPE_FLOAT32, m, 3, D(2, 2, 2));
  const alma_tensor *in3[] = {&mt};
  tn_init(&t, "Det", 1, 1);
  assert_int_equal(tn_run(&t, 11, in3, out), ALMA_OK);
  check_shape(&out[0], 1, D(2));
  check_f_rel(&out[0], (double[]){0, -1}, 2, 1e-6);
  free_outs(out, 1);
  static const double m3[] = {0, 2, 1, 1, 3, 2, 1, 1, 2}; /* zero pivot first: needs a row swap */
  alma_tensor m3t = TT(ALMA_DTYPE_FLOAT64, m3, 2, D(3, 3));
  const alma_tensor *in4[] = {&m3t};
  assert_int_equal(tn_run(&t, 22, in4, out), ALMA_OK);
  check_shape(&out[0], 0, NULL);
  check_f_rel(&out[0], (double[]){-2}, 1, 1e-12);
  free_outs(out, 1);
  alma_tensor bad = TT(ALMA_DTYPE_FLOAT32, m, 2, D(2, 4));
  const alma_tensor *in5[] = {&bad};
  assert_int_equal(tn_run(&t, 11, in5, out), ALMA_ERR_SHAPE);
}

/* ==== extra_data.c ============================================================================= */
static void test_upsample(void **s) {
  tnode t;
  alma_tensor out[1];
  static const float x[] = {1, 2, 3, 4};
  alma_tensor xt = TT(ALMA_DTYPE_FLOAT32, x, 4, D(1, 1, 2, 2));
  /* opset 7: scales attribute, nearest */
  tn_init(&t, "Upsample", 1, 1);
  float sc[] = {1, 1, 2, 1.5f};
  attr_floats(&t, "scales", sc, 4);
  const alma_tensor *in[] = {&xt};
  assert_int_equal(tn_run(&t, 7, in, out), ALMA_OK);
  check_shape(&out[0], 4, D(1, 1, 4, 3));
  check_f_rel(&out[0], (double[]){1, 1, 2, 1, 1, 2, 3, 3, 4, 3, 3, 4}, 12, 0);
  free_outs(out, 1);
  /* opset 9: scales input; linear is asymmetric and clamps at the last sample */
  tn_init(&t, "Upsample", 2, 1);
  attr_s(&t, "mode", "linear");
  static const float sc2[] = {1, 1, 2, 2};
  alma_tensor st = TT(ALMA_DTYPE_FLOAT32, sc2, 1, D(4));
  const alma_tensor *in2[] = {&xt, &st};
  assert_int_equal(tn_run(&t, 9, in2, out), ALMA_OK);
  check_shape(&out[0], 4, D(1, 1, 4, 4));
  check_f_rel(&out[0], (double[]){1, 1.5, 2, 2, 2, 2.5, 3, 3, 3, 3.5, 4, 4, 3, 3.5, 4, 4}, 16, 1e-6);
  free_outs(out, 1);
  /* unknown scales: the output shape is dynamic */
  alma_tensor su = TT(ALMA_DTYPE_FLOAT32, NULL, 1, D(4));
  const alma_tensor *in3[] = {&xt, &su};
  assert_int_equal(tn_infer(&t, 9, in3, out), ALMA_ERR_DYNAMIC);
  /* scales below 1 are not Upsample's */
  static const float sc3[] = {1, 1, 0.5f, 1};
  alma_tensor s3 = TT(ALMA_DTYPE_FLOAT32, sc3, 1, D(4));
  const alma_tensor *in4[] = {&xt, &s3};
  assert_int_equal(tn_run(&t, 10, in4, out), ALMA_ERR_INVALID_MODEL);
  /* nearest moves any dtype; linear on integers is refused */
  static const int32_t xi[] = {7, 8};
  alma_tensor xit = TT(ALMA_DTYPE_INT32, xi, 2, D(1, 2));
  static const float sc4[] = {2, 2};
  alma_tensor s4 = TT(ALMA_DTYPE_FLOAT32, sc4, 1, D(2));
  const alma_tensor *in5[] = {&xit, &s4};
  tn_init(&t, "Upsample", 2, 1);
  assert_int_equal(tn_run(&t, 9, in5, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){7, 7, 8, 8, 7, 7, 8, 8}, 8);
  free_outs(out, 1);
  attr_s(&t, "mode", "linear");
  assert_int_equal(tn_run(&t, 9, in5, out), ALMA_ERR_UNSUPPORTED);
}

static void test_onehot_compress(void **s) {
  tnode t;
  alma_tensor out[1];
  static const int32_t ind[] = {-1, 3, 5};
  static const int64_t depth = 4;
  static const float vals[] = {0, 1};
  alma_tensor it = TT(ALMA_DTYPE_INT32, ind, 1, D(3)), dt = TT(ALMA_DTYPE_INT64, &depth, 0, NULL),
              vt = TT(ALMA_DTYPE_FLOAT32, vals, 1, D(2));
  const alma_tensor *in[] = {&it, &dt, &vt};
  tn_init(&t, "OneHot", 3, 1);
  assert_int_equal(tn_run(&t, 11, in, out), ALMA_OK);
  check_shape(&out[0], 2, D(3, 4));
  check_f_rel(&out[0], (double[]){0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0}, 12, 0);
  free_outs(out, 1);
  alma_tensor du = TT(ALMA_DTYPE_INT64, NULL, 0, NULL);
  const alma_tensor *in2[] = {&it, &du, &vt};
  assert_int_equal(tn_infer(&t, 11, in2, out), ALMA_ERR_DYNAMIC);
  attr_i(&t, "axis", 2);
  assert_int_equal(tn_run(&t, 11, in, out), ALMA_ERR_INVALID_MODEL);

  static const float x[] = {1, 2, 3, 4, 5, 6};
  static const uint8_t c1[] = {1, 0}, c2[] = {0, 0, 0, 1};
  alma_tensor xt = TT(ALMA_DTYPE_FLOAT32, x, 2, D(2, 3)), ct = TT(ALMA_DTYPE_BOOL, c1, 1, D(2));
  const alma_tensor *in3[] = {&xt, &ct};
  tn_init(&t, "Compress", 2, 1);
  attr_i(&t, "axis", 1);
  assert_int_equal(tn_run(&t, 11, in3, out), ALMA_OK); /* a short condition drops the rest */
  check_shape(&out[0], 2, D(2, 1));
  check_f_rel(&out[0], (double[]){1, 4}, 2, 0);
  free_outs(out, 1);
  alma_tensor ct2 = TT(ALMA_DTYPE_BOOL, c2, 1, D(4));
  const alma_tensor *in4[] = {&xt, &ct2};
  assert_int_equal(tn_run(&t, 11, in4, out), ALMA_ERR_SHAPE); /* true past the end */
  alma_tensor cu = TT(ALMA_DTYPE_BOOL, NULL, 1, D(2));
  const alma_tensor *in5[] = {&xt, &cu};
  assert_int_equal(tn_infer(&t, 11, in5, out), ALMA_ERR_DYNAMIC);
}

static void test_unique(void **s) {
  tnode t;
  alma_tensor out[4];
  static const float x[] = {2, 1, 2, NAN, 1, NAN};
  alma_tensor xt = TT(ALMA_DTYPE_FLOAT32, x, 1, D(6));
  const alma_tensor *in[] = {&xt};
  /* sorted: NaN last and equal to itself, as numpy.unique */
  tn_init(&t, "Unique", 1, 4);
  assert_int_equal(tn_run(&t, 11, in, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){1, 2, NAN}, 3, 0);
  check_i64(&out[1], (int64_t[]){1, 0, 3}, 3);
  check_i64(&out[2], (int64_t[]){1, 0, 1, 2, 0, 2}, 6);
  check_i64(&out[3], (int64_t[]){2, 2, 2}, 3);
  free_outs(out, 4);
  /* unsorted: order of first occurrence */
  attr_i(&t, "sorted", 0);
  assert_int_equal(tn_run(&t, 11, in, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){2, 1, NAN}, 3, 0);
  check_i64(&out[1], (int64_t[]){0, 1, 3}, 3);
  check_i64(&out[2], (int64_t[]){0, 1, 0, 2, 1, 2}, 6);
  check_i64(&out[3], (int64_t[]){2, 2, 2}, 3);
  free_outs(out, 4);
  /* slices along an axis, int64, with only Y and counts wanted */
  static const int64_t xi[] = {1, 2, 1, 2, 0, 5};
  alma_tensor xit = TT(ALMA_DTYPE_INT64, xi, 2, D(3, 2));
  const alma_tensor *in2[] = {&xit};
  tn_init(&t, "Unique", 1, 4);
  t.outs[1] = t.outs[2] = -1;
  attr_i(&t, "axis", 0);
  assert_int_equal(tn_run(&t, 11, in2, out), ALMA_OK);
  check_shape(&out[0], 2, D(2, 2));
  check_i64(&out[0], (int64_t[]){0, 5, 1, 2}, 4);
  assert_null(out[1].data);
  check_i64(&out[3], (int64_t[]){1, 2}, 2);
  free_outs(out, 4);
  /* unknown input: the shapes are dynamic */
  alma_tensor xu = TT(ALMA_DTYPE_INT64, NULL, 2, D(3, 2));
  const alma_tensor *in3[] = {&xu};
  assert_int_equal(tn_infer(&t, 11, in3, out), ALMA_ERR_DYNAMIC);
}

static void test_eyelike_revseq_ccp(void **s) {
  tnode t;
  alma_tensor out[1];
  static const float x[9] = {0};
  alma_tensor xt = TT(ALMA_DTYPE_FLOAT32, x, 2, D(3, 3));
  const alma_tensor *in[] = {&xt};
  tn_init(&t, "EyeLike", 1, 1);
  attr_i(&t, "k", -1);
  attr_i(&t, "dtype", ALMA_DTYPE_BOOL);
  assert_int_equal(tn_run(&t, 9, in, out), ALMA_OK);
  assert_int_equal(out[0].dtype, ALMA_DTYPE_BOOL);
  check_i64(&out[0], (int64_t[]){0, 0, 0, 1, 0, 0, 0, 1, 0}, 9);
  free_outs(out, 1);
  /* ReverseSequence: a length past the time axis is an error */
  static const int64_t lens[] = {3, 1, 0};
  alma_tensor lt = TT(ALMA_DTYPE_INT64, lens, 1, D(3));
  const alma_tensor *in2[] = {&xt, &lt};
  tn_init(&t, "ReverseSequence", 2, 1);
  attr_i(&t, "batch_axis", 0);
  attr_i(&t, "time_axis", 1);
  assert_int_equal(tn_run(&t, 10, in2, out), ALMA_OK);
  free_outs(out, 1);
  static const int64_t lens2[] = {4, 1, 0};
  alma_tensor lt2 = TT(ALMA_DTYPE_INT64, lens2, 1, D(3));
  const alma_tensor *in3[] = {&xt, &lt2};
  assert_int_equal(tn_run(&t, 10, in3, out), ALMA_ERR_INVALID_ARG);
  /* CenterCropPad: an odd difference puts the extra element at the end */
  static const int32_t v[] = {1, 2, 3};
  static const int64_t six = 6, two = 2;
  alma_tensor vt = TT(ALMA_DTYPE_INT32, v, 1, D(3)), s6 = TT(ALMA_DTYPE_INT64, &six, 1, D(1)),
              s2 = TT(ALMA_DTYPE_INT64, &two, 1, D(1));
  const alma_tensor *in4[] = {&vt, &s6}, *in5[] = {&vt, &s2};
  tn_init(&t, "CenterCropPad", 2, 1);
  assert_int_equal(tn_run(&t, 18, in4, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){0, 1, 2, 3, 0, 0}, 6);
  free_outs(out, 1);
  assert_int_equal(tn_run(&t, 18, in5, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){1, 2}, 2);
  free_outs(out, 1);
}

/* ==== extra_detect.c =========================================================================== */
static void test_nms_rules(void **s) {
  tnode t;
  alma_tensor out[1];
  static const float boxes[] = {0, 0, 1, 1, 0, 0.1f, 1, 1.1f};
  static const float scores[] = {0.9f, 0.8f};
  alma_tensor bt = TT(ALMA_DTYPE_FLOAT32, boxes, 3, D(1, 2, 4)), st = TT(ALMA_DTYPE_FLOAT32, scores, 3, D(1, 1, 2));
  /* max_output_boxes_per_class omitted: no boxes */
  const alma_tensor *in[] = {&bt, &st};
  tn_init(&t, "NonMaxSuppression", 2, 1);
  assert_int_equal(tn_run(&t, 11, in, out), ALMA_OK);
  check_shape(&out[0], 2, D(0, 3));
  free_outs(out, 1);
  static const int64_t mo = 5;
  static const float iou = 0.5f, bad_iou = 1.5f;
  alma_tensor mt = TT(ALMA_DTYPE_INT64, &mo, 1, D(1)), it = TT(ALMA_DTYPE_FLOAT32, &iou, 1, D(1)),
              bit = TT(ALMA_DTYPE_FLOAT32, &bad_iou, 1, D(1));
  const alma_tensor *in2[] = {&bt, &st, &mt, &it};
  tn_init(&t, "NonMaxSuppression", 4, 1);
  assert_int_equal(tn_run(&t, 11, in2, out), ALMA_OK); /* IoU 0.818 > 0.5: the second box goes */
  check_i64(&out[0], (int64_t[]){0, 0, 0}, 3);
  free_outs(out, 1);
  const alma_tensor *in3[] = {&bt, &st, &mt, &bit};
  assert_int_equal(tn_run(&t, 11, in3, out), ALMA_ERR_INVALID_ARG);
  /* unknown boxes at load: the output shape is dynamic */
  alma_tensor bu = TT(ALMA_DTYPE_FLOAT32, NULL, 3, D(1, 2, 4));
  const alma_tensor *in4[] = {&bu, &st, &mt, &it};
  assert_int_equal(tn_infer(&t, 11, in4, out), ALMA_ERR_DYNAMIC);
  attr_i(&t, "center_point_box", 2);
  assert_int_equal(tn_run(&t, 11, in2, out), ALMA_ERR_INVALID_MODEL);
}

static void test_roialign_versions(void **s) {
  tnode t;
  alma_tensor out[1];
  float x[16];
  for (int i = 0; i < 16; i++) x[i] = (float)i;
  static const float roi[] = {0, 0, 3, 3};
  static const int64_t bi[] = {0}, bad_bi[] = {1};
  alma_tensor xt = TT(ALMA_DTYPE_FLOAT32, x, 4, D(1, 1, 4, 4)), rt = TT(ALMA_DTYPE_FLOAT32, roi, 2, D(1, 4)),
              bt = TT(ALMA_DTYPE_INT64, bi, 1, D(1)), bbt = TT(ALMA_DTYPE_INT64, bad_bi, 1, D(1));
  const alma_tensor *in[] = {&xt, &rt, &bt};
  tn_init(&t, "RoiAlign", 3, 1);
  attr_i(&t, "sampling_ratio", 1);
  /* opset 10: no half-pixel shift, one sample at the roi centre (1.5, 1.5) */
  assert_int_equal(tn_run(&t, 10, in, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){7.5}, 1, 1e-6);
  free_outs(out, 1);
  /* opset 16 defaults to half_pixel: the centre moves to (1, 1) */
  assert_int_equal(tn_run(&t, 16, in, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){5}, 1, 1e-6);
  free_outs(out, 1);
  const alma_tensor *in2[] = {&xt, &rt, &bbt};
  assert_int_equal(tn_run(&t, 16, in2, out), ALMA_ERR_INVALID_ARG);
}

static void test_gridsample_versions(void **s) {
  tnode t;
  alma_tensor out[1];
  static const float x[] = {1, 2, 3, 4};
  static const float g[] = {0, 0};
  alma_tensor xt = TT(ALMA_DTYPE_FLOAT32, x, 4, D(1, 1, 2, 2)), gt = TT(ALMA_DTYPE_FLOAT32, g, 4, D(1, 1, 1, 2));
  const alma_tensor *in[] = {&xt, &gt};
  tn_init(&t, "GridSample", 2, 1);
  attr_s(&t, "mode", "bilinear");
  assert_int_equal(tn_run(&t, 16, in, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){2.5}, 1, 1e-6);
  free_outs(out, 1);
  assert_int_equal(tn_run(&t, 20, in, out), ALMA_ERR_INVALID_MODEL); /* opset 20 calls it linear */
  tn_init(&t, "GridSample", 2, 1);
  attr_s(&t, "mode", "linear");
  assert_int_equal(tn_run(&t, 16, in, out), ALMA_ERR_INVALID_MODEL);
  /* volumetric input only from opset 20; float64 through the double kernels */
  static const double x5[8] = {1, 2, 3, 4, 5, 6, 7, 8}, g5[3] = {0, 0, 0};
  alma_tensor x5t = TT(ALMA_DTYPE_FLOAT64, x5, 5, D(1, 1, 2, 2, 2)), g5t = TT(ALMA_DTYPE_FLOAT64, g5, 5, D(1, 1, 1, 1, 3));
  const alma_tensor *in2[] = {&x5t, &g5t};
  tn_init(&t, "GridSample", 2, 1);
  assert_int_equal(tn_run(&t, 16, in2, out), ALMA_ERR_SHAPE);
  assert_int_equal(tn_run(&t, 20, in2, out), ALMA_OK);
  assert_int_equal(out[0].dtype, ALMA_DTYPE_FLOAT64);
  check_f_rel(&out[0], (double[]){4.5}, 1, 1e-12);
  free_outs(out, 1);
}

/* ==== extra_nn.c =============================================================================== */
static void test_hardmax_versions(void **s) {
  tnode t;
  alma_tensor out[1];
  static const float x[] = {1, 3, 3, 0, 0, -1};
  alma_tensor xt = TT(ALMA_DTYPE_FLOAT32, x, 2, D(2, 3));
  const alma_tensor *in[] = {&xt};
  tn_init(&t, "Hardmax", 1, 1);
  attr_i(&t, "axis", 0);
  /* opset 11 coerces to 2-D at axis 0: one row of six, first maximum wins */
  assert_int_equal(tn_run(&t, 11, in, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){0, 1, 0, 0, 0, 0}, 6, 0);
  free_outs(out, 1);
  /* opset 13: along axis 0 only */
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){1, 1, 1, 0, 0, 0}, 6, 0);
  free_outs(out, 1);
  tn_init(&t, "Hardmax", 1, 1);
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){0, 1, 0, 1, 0, 0}, 6, 0);
  free_outs(out, 1);
  attr_i(&t, "axis", 2);
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_ERR_INVALID_MODEL);
}

static void test_groupnorm_versions(void **s) {
  tnode t;
  alma_tensor out[1];
  static const float x[] = {1, 2, 3, 4, 5, 6, 7, 8};
  alma_tensor xt = TT(ALMA_DTYPE_FLOAT32, x, 4, D(1, 4, 1, 2));
  double eps = 1e-5, inv = 1 / sqrt(1.25 + eps), z[8];
  for (int i = 0; i < 8; i++) z[i] = (x[i] - (i < 4 ? 2.5 : 6.5)) * inv;
  /* opset 18: scale and bias per group */
  static const float sg[] = {2, 1}, bg[] = {0, 1};
  alma_tensor sgt = TT(ALMA_DTYPE_FLOAT32, sg, 1, D(2)), bgt = TT(ALMA_DTYPE_FLOAT32, bg, 1, D(2));
  const alma_tensor *in[] = {&xt, &sgt, &bgt};
  tn_init(&t, "GroupNormalization", 3, 1);
  attr_i(&t, "num_groups", 2);
  assert_int_equal(tn_run(&t, 18, in, out), ALMA_OK);
  double w18[8];
  for (int i = 0; i < 8; i++) w18[i] = i < 4 ? 2 * z[i] : z[i] + 1;
  check_f_rel(&out[0], w18, 8, 1e-5);
  free_outs(out, 1);
  assert_int_equal(tn_run(&t, 21, in, out), ALMA_ERR_SHAPE); /* opset 21 wants one per channel */
  /* opset 21: per channel, float16 through float32 */
  static const float sc[] = {1, 2, 3, 4}, bc[] = {0, 0, 0, 1};
  uint16_t xh[8], sh[4], bh[4];
  for (int i = 0; i < 8; i++) xh[i] = alma__f32_to_f16(x[i]);
  for (int i = 0; i < 4; i++) sh[i] = alma__f32_to_f16(sc[i]), bh[i] = alma__f32_to_f16(bc[i]);
  alma_tensor xht = TT(ALMA_DTYPE_FLOAT16, xh, 4, D(1, 4, 1, 2)), sht = TT(ALMA_DTYPE_FLOAT16, sh, 1, D(4)),
              bht = TT(ALMA_DTYPE_FLOAT16, bh, 1, D(4));
  const alma_tensor *in2[] = {&xht, &sht, &bht};
  assert_int_equal(tn_run(&t, 21, in2, out), ALMA_OK);
  assert_int_equal(out[0].dtype, ALMA_DTYPE_FLOAT16);
  double w21[8];
  for (int i = 0; i < 8; i++) w21[i] = z[i] * sc[i / 2] + bc[i / 2];
  check_f_rel(&out[0], w21, 8, 2e-3);
  free_outs(out, 1);
  tn_init(&t, "GroupNormalization", 3, 1);
  attr_i(&t, "num_groups", 3);
  assert_int_equal(tn_run(&t, 21, in2, out), ALMA_ERR_INVALID_MODEL);
}

static void test_lpnorm_lppool(void **s) {
  tnode t;
  alma_tensor out[1];
  static const float x[] = {3, -4, 0, 0};
  alma_tensor xt = TT(ALMA_DTYPE_FLOAT32, x, 2, D(2, 2));
  const alma_tensor *in[] = {&xt};
  tn_init(&t, "LpNormalization", 1, 1);
  assert_int_equal(tn_run(&t, 1, in, out), ALMA_OK); /* a zero norm gives zeros */
  check_f_rel(&out[0], (double[]){0.6, -0.8, 0, 0}, 4, 1e-6);
  free_outs(out, 1);
  attr_i(&t, "p", 1);
  attr_i(&t, "axis", 0);
  assert_int_equal(tn_run(&t, 22, in, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){1, -1, 0, 0}, 4, 1e-6);
  free_outs(out, 1);
  tn_init(&t, "LpNormalization", 1, 1);
  attr_i(&t, "p", 3);
  assert_int_equal(tn_run(&t, 1, in, out), ALMA_ERR_INVALID_MODEL);
  /* LpPool: opset 1 takes p as a float, later opsets as an int */
  static const float y[] = {1, -2, 3};
  alma_tensor yt = TT(ALMA_DTYPE_FLOAT32, y, 3, D(1, 1, 3));
  const alma_tensor *in2[] = {&yt};
  int64_t k[] = {2};
  tn_init(&t, "LpPool", 1, 1);
  attr_ints(&t, "kernel_shape", k, 1);
  attr_f(&t, "p", 1.0f);
  assert_int_equal(tn_run(&t, 1, in2, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){3, 5}, 2, 1e-6);
  free_outs(out, 1);
  tn_init(&t, "LpPool", 1, 1);
  attr_ints(&t, "kernel_shape", k, 1);
  assert_int_equal(tn_run(&t, 11, in2, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){sqrt(5), sqrt(13)}, 2, 1e-6);
  free_outs(out, 1);
  /* MVN's default axes [0, 2, 3] need rank 4 */
  tn_init(&t, "MeanVarianceNormalization", 1, 1);
  assert_int_equal(tn_run(&t, 13, in2, out), ALMA_ERR_INVALID_MODEL);
}

static void test_maxunpool_col2im_checks(void **s) {
  tnode t;
  alma_tensor out[1];
  static const float x[] = {1, 2};
  static const int64_t ind[] = {0, 4};
  alma_tensor xt = TT(ALMA_DTYPE_FLOAT32, x, 3, D(1, 1, 2)), it = TT(ALMA_DTYPE_INT64, ind, 3, D(1, 1, 2));
  const alma_tensor *in[] = {&xt, &it};
  int64_t k[] = {2};
  tn_init(&t, "MaxUnpool", 2, 1);
  attr_ints(&t, "kernel_shape", k, 1);
  attr_ints(&t, "strides", k, 1);
  assert_int_equal(tn_run(&t, 11, in, out), ALMA_ERR_INVALID_ARG); /* index 4 of a 4-element output */
  static const int64_t ind2[] = {1, 2};
  alma_tensor it2 = TT(ALMA_DTYPE_INT64, ind2, 3, D(1, 1, 2));
  const alma_tensor *in2[] = {&xt, &it2};
  assert_int_equal(tn_run(&t, 11, in2, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){0, 1, 2, 0}, 4, 0);
  free_outs(out, 1);
  /* Col2Im needs the values of image_shape and block_shape for its output shape */
  static const float c[4] = {1, 2, 3, 4};
  static const int64_t blk[] = {1, 2};
  alma_tensor ct = TT(ALMA_DTYPE_FLOAT32, c, 3, D(1, 2, 2)), iu = TT(ALMA_DTYPE_INT64, NULL, 1, D(2)),
              bt = TT(ALMA_DTYPE_INT64, blk, 1, D(2));
  const alma_tensor *in3[] = {&ct, &iu, &bt};
  tn_init(&t, "Col2Im", 3, 1);
  assert_int_equal(tn_infer(&t, 18, in3, out), ALMA_ERR_DYNAMIC);
  static const int64_t img[] = {1, 3};
  alma_tensor imt = TT(ALMA_DTYPE_INT64, img, 1, D(2));
  const alma_tensor *in4[] = {&ct, &imt, &bt};
  assert_int_equal(tn_run(&t, 18, in4, out), ALMA_OK); /* overlapping blocks add up */
  check_shape(&out[0], 4, D(1, 1, 1, 3));
  check_f_rel(&out[0], (double[]){1, 2 + 3, 4}, 3, 0);
  free_outs(out, 1);
}

/* DeformConv with zero offsets is a plain Conv; a mask scales each tap. */
static void test_deformconv_vs_conv(void **s) {
  enum { C = 2, H = 4, W = 5, OC = 4, K = 2 };
  float x[C * H * W], w[OC * (C / 2) * K * K], b[OC];
  for (int i = 0; i < C * H * W; i++) x[i] = (float)((i * 7) % 11) - 5.0f;
  for (int i = 0; i < OC * (C / 2) * K * K; i++) w[i] = (float)((i * 5) % 7) * 0.25f - 0.5f;
  for (int i = 0; i < OC; i++) b[i] = (float)i;
  int64_t pads[] = {1, 0, 0, 1}, strides[] = {1, 2}, dil[] = {1, 1};
  alma_tensor xt = TT(ALMA_DTYPE_FLOAT32, x, 4, D(1, C, H, W)), wt = TT(ALMA_DTYPE_FLOAT32, w, 4, D(OC, C / 2, K, K)),
              bt = TT(ALMA_DTYPE_FLOAT32, b, 1, D(OC)), ref[1], got[1];
  tnode t;
  tn_init(&t, "Conv", 3, 1);
  attr_ints(&t, "pads", pads, 4);
  attr_ints(&t, "strides", strides, 2);
  attr_i(&t, "group", 2);
  const alma_tensor *cin[] = {&xt, &wt, &bt};
  assert_int_equal(tn_run(&t, 11, cin, ref), ALMA_OK);
  int64_t oh = ref[0].dims[2], ow = ref[0].dims[3];
  /* two offset groups, all offsets zero; mask 0.5 everywhere */
  size_t noff = (size_t)(2 * 2 * K * K * oh * ow), nmask = (size_t)(2 * K * K * oh * ow);
  float *off = calloc(noff, sizeof(float)), *mask = malloc(nmask * sizeof(float));
  for (size_t i = 0; i < nmask; i++) mask[i] = 0.5f;
  alma_tensor ot = TT(ALMA_DTYPE_FLOAT32, off, 4, D(1, 2 * 2 * K * K, oh, ow)),
              mt = TT(ALMA_DTYPE_FLOAT32, mask, 4, D(1, 2 * K * K, oh, ow));
  tn_init(&t, "DeformConv", 5, 1);
  attr_ints(&t, "pads", pads, 4);
  attr_ints(&t, "strides", strides, 2);
  attr_ints(&t, "dilations", dil, 2);
  attr_i(&t, "group", 2);
  attr_i(&t, "offset_group", 2);
  t.ins[4] = -1;
  const alma_tensor *din[] = {&xt, &wt, &ot, &bt, NULL};
  assert_int_equal(tn_run(&t, 19, din, got), ALMA_OK);
  check_shape(&got[0], 4, ref[0].dims);
  int64_t ne = alma_tensor_numel(&ref[0]);
  double *want = malloc((size_t)ne * sizeof(double));
  for (int64_t i = 0; i < ne; i++) want[i] = ((const float *)ref[0].data)[i];
  check_f_rel(&got[0], want, (int)ne, 1e-5);
  free_outs(got, 1);
  t.ins[4] = 4;
  const alma_tensor *din2[] = {&xt, &wt, &ot, &bt, &mt};
  assert_int_equal(tn_run(&t, 22, din2, got), ALMA_OK);
  for (int64_t i = 0; i < ne; i++) want[i] = (want[i] - b[(i / (oh * ow)) % OC]) * 0.5 + b[(i / (oh * ow)) % OC];
  check_f_rel(&got[0], want, (int)ne, 1e-5);
  free_outs(got, 1);
  /* a wrong offset shape is refused */
  alma_tensor obad = TT(ALMA_DTYPE_FLOAT32, off, 4, D(1, 2 * K * K, oh, ow));
  const alma_tensor *din3[] = {&xt, &wt, &obad, &bt, &mt};
  assert_int_equal(tn_run(&t, 22, din3, got), ALMA_ERR_SHAPE);
  free(want), free(off), free(mask);
  free_outs(ref, 1);
}

static void test_rnn_bidirectional_lens(void **s) {
  /* I = H = 1, all weights 1, no bias: h_t = tanh(x_t + h_{t-1}) */
  static const float X[] = {1, 0.5f, 2, 9}; /* [seq 2, batch 2, 1]; batch 1 has length 1 */
  static const float Wt[] = {1, 1}, Rt[] = {1, 1};
  static const int32_t lens[] = {2, 1};
  alma_tensor xt = TT(ALMA_DTYPE_FLOAT32, X, 3, D(2, 2, 1)), wt = TT(ALMA_DTYPE_FLOAT32, Wt, 3, D(2, 1, 1)),
              rt = TT(ALMA_DTYPE_FLOAT32, Rt, 3, D(2, 1, 1)), lt = TT(ALMA_DTYPE_INT32, lens, 1, D(2)), out[2];
  tnode t;
  tn_init(&t, "RNN", 5, 2);
  t.ins[3] = -1;
  attr_s(&t, "direction", "bidirectional");
  attr_i(&t, "hidden_size", 1);
  const alma_tensor *in[] = {&xt, &wt, &rt, NULL, &lt};
  assert_int_equal(tn_run(&t, 14, in, out), ALMA_OK);
  check_shape(&out[0], 4, D(2, 2, 2, 1));
  double f1 = tanh(1.0), f2 = tanh(2 + f1), r1 = tanh(2.0), r0 = tanh(1 + r1), h = tanh(0.5);
  check_f_rel(&out[0], (double[]){f1, h, r0, h, f2, 0, r1, 0}, 8, 1e-6);
  check_f_rel(&out[1], (double[]){f2, h, r0, h}, 4, 1e-6);
  free_outs(out, 2);
  /* float64 and layout 1 (batch first): X and the outputs transpose */
  static const double Xb[] = {1, 2, 0.5, 9};
  static const double Wd[] = {1, 1}, Rd[] = {1, 1};
  alma_tensor xbt = TT(ALMA_DTYPE_FLOAT64, Xb, 3, D(2, 2, 1)), wdt = TT(ALMA_DTYPE_FLOAT64, Wd, 3, D(2, 1, 1)),
              rdt = TT(ALMA_DTYPE_FLOAT64, Rd, 3, D(2, 1, 1));
  attr_i(&t, "layout", 1);
  const alma_tensor *in2[] = {&xbt, &wdt, &rdt, NULL, &lt};
  assert_int_equal(tn_run(&t, 14, in2, out), ALMA_OK);
  check_shape(&out[0], 4, D(2, 2, 2, 1));
  check_f_rel(&out[0], (double[]){f1, r0, f2, r1, h, h, 0, 0}, 8, 1e-12);
  check_f_rel(&out[1], (double[]){f2, r0, h, h}, 4, 1e-12);
  free_outs(out, 2);
  assert_int_equal(tn_run(&t, 7, in2, out), ALMA_OK); /* layout is ignored before opset 14 */
  free_outs(out, 2);
  /* lengths past the sequence are refused */
  static const int32_t bad[] = {3, 1};
  alma_tensor blt = TT(ALMA_DTYPE_INT32, bad, 1, D(2));
  const alma_tensor *in3[] = {&xt, &wt, &rt, NULL, &blt};
  tn_init(&t, "RNN", 5, 2);
  t.ins[3] = -1;
  attr_s(&t, "direction", "bidirectional");
  assert_int_equal(tn_run(&t, 14, in3, out), ALMA_ERR_INVALID_ARG);
  attr_i(&t, "hidden_size", 2);
  assert_int_equal(tn_run(&t, 14, in, out), ALMA_ERR_SHAPE);
}

/* ==== extra_random.c =========================================================================== */
static void test_random_contract(void **s) {
  tnode t;
  alma_tensor a[1], b[1];
  int64_t shape[] = {4000};
  tn_init(&t, "RandomUniform", 0, 1);
  attr_ints(&t, "shape", shape, 1);
  attr_f(&t, "low", -1.0f);
  attr_f(&t, "high", 3.0f);
  attr_f(&t, "seed", 3.0f);
  assert_int_equal(tn_run(&t, 1, NULL, a), ALMA_OK);
  assert_int_equal(tn_run(&t, 22, NULL, b), ALMA_OK);
  assert_int_equal(a[0].dtype, ALMA_DTYPE_FLOAT32);
  check_shape(&a[0], 1, shape);
  assert_memory_equal(a[0].data, b[0].data, a[0].nbytes); /* reproducible */
  double sum = 0;
  for (int i = 0; i < 4000; i++) {
    float v = ((const float *)a[0].data)[i];
    assert_true(v >= -1.0f && v < 3.0f);
    sum += v;
  }
  assert_true(fabs(sum / 4000 - 1.0) < 0.1);
  free_outs(b, 1);
  t.attrs[3].f = 4.0f; /* another seed, another stream */
  assert_int_equal(tn_run(&t, 22, NULL, b), ALMA_OK);
  assert_true(memcmp(a[0].data, b[0].data, a[0].nbytes) != 0);
  free_outs(a, 1), free_outs(b, 1);
  /* normals: float64 by dtype, moments close to mean/scale */
  tn_init(&t, "RandomNormal", 0, 1);
  attr_ints(&t, "shape", shape, 1);
  attr_i(&t, "dtype", ALMA_DTYPE_FLOAT64);
  attr_f(&t, "mean", 2.0f);
  attr_f(&t, "scale", 0.5f);
  assert_int_equal(tn_run(&t, 22, NULL, a), ALMA_OK);
  assert_int_equal(a[0].dtype, ALMA_DTYPE_FLOAT64);
  double m = 0, v = 0;
  for (int i = 0; i < 4000; i++) m += ((const double *)a[0].data)[i];
  m /= 4000;
  for (int i = 0; i < 4000; i++) v += pow(((const double *)a[0].data)[i] - m, 2);
  v /= 4000;
  assert_true(fabs(m - 2.0) < 0.05 && fabs(v - 0.25) < 0.03);
  free_outs(a, 1);
  t.attrs[1].i = ALMA_DTYPE_INT32; /* normals are float only */
  assert_int_equal(tn_run(&t, 22, NULL, a), ALMA_ERR_UNSUPPORTED);
  /* *Like: the input's shape; an integer input needs a float dtype */
  static const int32_t xi[6] = {0};
  alma_tensor xt = TT(ALMA_DTYPE_INT32, xi, 2, D(2, 3));
  const alma_tensor *in[] = {&xt};
  tn_init(&t, "RandomUniformLike", 1, 1);
  assert_int_equal(tn_run(&t, 22, in, a), ALMA_ERR_UNSUPPORTED);
  attr_i(&t, "dtype", ALMA_DTYPE_FLOAT16);
  assert_int_equal(tn_run(&t, 22, in, a), ALMA_OK);
  assert_int_equal(a[0].dtype, ALMA_DTYPE_FLOAT16);
  check_shape(&a[0], 2, D(2, 3));
  free_outs(a, 1);
  /* Bernoulli: probabilities 0 and 1 are certain; bool output by dtype */
  static const float p[] = {0, 1, 0, 1, 1};
  alma_tensor pt = TT(ALMA_DTYPE_FLOAT32, p, 1, D(5));
  const alma_tensor *in2[] = {&pt};
  tn_init(&t, "Bernoulli", 1, 1);
  attr_i(&t, "dtype", ALMA_DTYPE_BOOL);
  assert_int_equal(tn_run(&t, 15, in2, a), ALMA_OK);
  assert_int_equal(a[0].dtype, ALMA_DTYPE_BOOL);
  check_i64(&a[0], (int64_t[]){0, 1, 0, 1, 1}, 5);
  free_outs(a, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bitwise_edges),
      cmocka_unit_test(test_isinf_isnan_double),
      cmocka_unit_test(test_shrink_celu_det),
      cmocka_unit_test(test_upsample),
      cmocka_unit_test(test_onehot_compress),
      cmocka_unit_test(test_unique),
      cmocka_unit_test(test_eyelike_revseq_ccp),
      cmocka_unit_test(test_nms_rules),
      cmocka_unit_test(test_roialign_versions),
      cmocka_unit_test(test_gridsample_versions),
      cmocka_unit_test(test_hardmax_versions),
      cmocka_unit_test(test_groupnorm_versions),
      cmocka_unit_test(test_lpnorm_lppool),
      cmocka_unit_test(test_maxunpool_col2im_checks),
      cmocka_unit_test(test_deformconv_vs_conv),
      cmocka_unit_test(test_rnn_bidirectional_lens),
      cmocka_unit_test(test_random_contract),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
