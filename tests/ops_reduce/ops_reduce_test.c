/* Unit tests of the reduction / selection / resize operators (src/ops/reduce.c topk.c misc.c
 * resize.c): the opset-specific forms, dtypes and edge cases the ONNX node tests do not reach
 * (attribute axes, integer and empty reductions, TopK-1/ties, Resize-10, bad input). */
#include "op_test_util.h"

static void check_f32(const alma_tensor *t, const float *want, int n) {
  assert_int_equal(t->dtype, ALMA_DTYPE_FLOAT32);
  assert_int_equal(alma_tensor_numel(t), n);
  for (int i = 0; i < n; i++) {
    float g = ((const float *)t->data)[i];
    if (isinf(want[i])) assert_true(g == want[i]);
    else assert_float_equal(g, want[i], 1e-5 + 1e-5 * fabsf(want[i]));
  }
}

/* ---- reductions ----------------------------------------------------------------------------- */

static const float X23[] = {1, 2, 3, 4, 5, 6};

static void test_reduce_sum_attr_axes_opset1(void **s) {
  tnode t;
  tn_init(&t, "ReduceSum", 1, 1);
  int64_t axes[] = {1};
  attr_ints(&t, "axes", axes, 1);
  attr_i(&t, "keepdims", 0);
  alma_tensor x = T(ALMA_DTYPE_FLOAT32, X23, 2, (int64_t)2, (int64_t)3), out[1];
  const alma_tensor *in[] = {&x};
  assert_int_equal(tn_run(&t, 11, in, out), ALMA_OK);
  assert_int_equal(t.n.since_version, 11);
  int64_t d[] = {2};
  check_shape(&out[0], 1, d);
  check_f32(&out[0], (float[]){6, 15}, 2);
  free_outs(out, 1);
}

static void test_reduce_sum_axes_input_rules(void **s) {
  /* opset 13: empty axes input reduces everything unless noop_with_empty_axes */
  tnode t;
  tn_init(&t, "ReduceSum", 2, 1);
  alma_tensor x = T(ALMA_DTYPE_FLOAT32, X23, 2, (int64_t)2, (int64_t)3), ax = T(ALMA_DTYPE_INT64, NULL, 1, (int64_t)0),
              out[1];
  const alma_tensor *in[] = {&x, &ax};
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_OK);
  int64_t d[] = {1, 1};
  check_shape(&out[0], 2, d);
  check_f32(&out[0], (float[]){21}, 1);
  free_outs(out, 1);
  /* the axes attribute is not allowed once axes is an input */
  int64_t axes[] = {0};
  attr_ints(&t, "axes", axes, 1);
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_ERR_INVALID_MODEL);
  /* unknown axes value: the output shape is dynamic */
  tn_init(&t, "ReduceSum", 2, 1);
  int64_t one = 1;
  alma_tensor axu = T(ALMA_DTYPE_INT64, NULL, 1, one);
  const alma_tensor *in2[] = {&x, &axu};
  assert_int_equal(tn_infer(&t, 13, in2, out), ALMA_ERR_DYNAMIC);
}

static void test_reduce_bad_axes(void **s) {
  tnode t;
  tn_init(&t, "ReduceMax", 2, 1);
  int64_t bad[] = {2};
  alma_tensor x = T(ALMA_DTYPE_FLOAT32, X23, 2, (int64_t)2, (int64_t)3), ax = T(ALMA_DTYPE_INT64, bad, 1, (int64_t)1),
              out[1];
  const alma_tensor *in[] = {&x, &ax};
  assert_int_equal(tn_run(&t, 18, in, out), ALMA_ERR_INVALID_MODEL);
  int64_t dup[] = {1, -1};
  alma_tensor ax2 = T(ALMA_DTYPE_INT64, dup, 1, (int64_t)2);
  const alma_tensor *in2[] = {&x, &ax2};
  assert_int_equal(tn_run(&t, 18, in2, out), ALMA_ERR_INVALID_MODEL);
  /* bool is allowed for ReduceMax only from opset 20 */
  static const uint8_t b[] = {1, 0};
  alma_tensor xb = T(ALMA_DTYPE_BOOL, b, 1, (int64_t)2);
  const alma_tensor *in3[] = {&xb};
  tn_init(&t, "ReduceMax", 1, 1);
  assert_int_equal(tn_run(&t, 18, in3, out), ALMA_ERR_UNSUPPORTED);
  assert_int_equal(tn_run(&t, 20, in3, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){1}, 1);
  free_outs(out, 1);
}

static void test_reduce_mean_int_attr_axes(void **s) {
  /* ReduceMean-13 still takes axes as an attribute; integer means truncate */
  tnode t;
  tn_init(&t, "ReduceMean", 1, 1);
  int64_t axes[] = {-1};
  attr_ints(&t, "axes", axes, 1);
  static const int32_t x[] = {1, 2, 4, -1, -2, -4};
  alma_tensor xt = T(ALMA_DTYPE_INT32, x, 2, (int64_t)2, (int64_t)3), out[1];
  const alma_tensor *in[] = {&xt};
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_OK);
  assert_int_equal(out[0].dtype, ALMA_DTYPE_INT32);
  check_i64(&out[0], (int64_t[]){2, -2}, 2);
  free_outs(out, 1);
}

static void test_reduce_empty_int(void **s) {
  /* a zero-size reduced axis gives each op's identity in the input's type */
  struct {
    const char *op;
    alma_dtype dt;
    int64_t want;
  } cases[] = {{"ReduceMax", ALMA_DTYPE_INT8, INT8_MIN},    {"ReduceMin", ALMA_DTYPE_UINT8, UINT8_MAX},
               {"ReduceMin", ALMA_DTYPE_INT32, INT32_MAX},  {"ReduceProd", ALMA_DTYPE_INT64, 1},
               {"ReduceSum", ALMA_DTYPE_INT64, 0},          {"ReduceSumSquare", ALMA_DTYPE_INT32, 0}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    tnode t;
    tn_init(&t, cases[c].op, 2, 1);
    int64_t ax1[] = {1};
    alma_tensor x = T(cases[c].dt, NULL, 2, (int64_t)2, (int64_t)0), ax = T(ALMA_DTYPE_INT64, ax1, 1, (int64_t)1), out[1];
    const alma_tensor *in[] = {&x, &ax};
    assert_int_equal(tn_run(&t, 20, in, out), ALMA_OK);
    int64_t d[] = {2, 1};
    check_shape(&out[0], 2, d);
    check_i64(&out[0], (int64_t[]){cases[c].want, cases[c].want}, 2);
    free_outs(out, 1);
  }
}

static void test_reduce_uint64_and_logsumexp(void **s) {
  tnode t;
  tn_init(&t, "ReduceMax", 1, 1);
  static const uint64_t x[] = {3, UINT64_C(0x8000000000000005), 7};
  alma_tensor xt = T(ALMA_DTYPE_UINT64, x, 1, (int64_t)3), out[1];
  const alma_tensor *in[] = {&xt};
  attr_i(&t, "keepdims", 0);
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_OK);
  assert_int_equal(out[0].rank, 0);
  assert_true(((uint64_t *)out[0].data)[0] == UINT64_C(0x8000000000000005));
  free_outs(out, 1);
  /* large values stay finite thanks to the max shift */
  tn_init(&t, "ReduceLogSumExp", 1, 1);
  static const float big[] = {1000, 1000, -INFINITY, -INFINITY};
  alma_tensor bt = T(ALMA_DTYPE_FLOAT32, big, 2, (int64_t)2, (int64_t)2);
  const alma_tensor *in2[] = {&bt};
  int64_t axes[] = {1};
  attr_ints(&t, "axes", axes, 1);
  assert_int_equal(tn_run(&t, 13, in2, out), ALMA_OK);
  check_f32(&out[0], (float[]){1000 + logf(2), -INFINITY}, 2);
  free_outs(out, 1);
}

static void test_reduce_noncontiguous_axes(void **s) {
  /* axes {0, 2} of [2,3,2]: kept middle axis, reduced inner run */
  float x[12];
  for (int i = 0; i < 12; i++) x[i] = (float)i;
  tnode t;
  tn_init(&t, "ReduceSum", 1, 1);
  int64_t axes[] = {0, 2};
  attr_ints(&t, "axes", axes, 2);
  attr_i(&t, "keepdims", 0);
  alma_tensor xt = T(ALMA_DTYPE_FLOAT32, x, 3, (int64_t)2, (int64_t)3, (int64_t)2), out[1];
  const alma_tensor *in[] = {&xt};
  assert_int_equal(tn_run(&t, 11, in, out), ALMA_OK);
  /* j=0: 0+1+6+7, j=1: 2+3+8+9, j=2: 4+5+10+11 */
  check_f32(&out[0], (float[]){14, 22, 30}, 3);
  free_outs(out, 1);
}

static void test_argmax_int_last_index(void **s) {
  static const int32_t x[] = {5, 1, 5, 2, 2, 0};
  alma_tensor xt = T(ALMA_DTYPE_INT32, x, 2, (int64_t)2, (int64_t)3), out[1];
  const alma_tensor *in[] = {&xt};
  tnode t;
  tn_init(&t, "ArgMax", 1, 1);
  attr_i(&t, "axis", 1);
  attr_i(&t, "select_last_index", 1);
  assert_int_equal(tn_run(&t, 12, in, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){2, 1}, 2);
  free_outs(out, 1);
  /* before opset 12 there is no select_last_index: first occurrence */
  assert_int_equal(tn_run(&t, 11, in, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){0, 0}, 2);
  free_outs(out, 1);
  tn_init(&t, "ArgMin", 1, 1);
  attr_i(&t, "keepdims", 0);
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_OK);
  int64_t d[] = {3};
  check_shape(&out[0], 1, d);
  check_i64(&out[0], (int64_t[]){1, 0, 1}, 3);
  free_outs(out, 1);
}

/* ---- TopK ----------------------------------------------------------------------------------- */

static void test_topk_v1_attr_and_ties(void **s) {
  static const float x[] = {3, 1, 3, 2, 3};
  alma_tensor xt = T(ALMA_DTYPE_FLOAT32, x, 1, (int64_t)5), out[2];
  const alma_tensor *in[] = {&xt};
  tnode t;
  tn_init(&t, "TopK", 1, 2);
  attr_i(&t, "k", 4);
  assert_int_equal(tn_run(&t, 1, in, out), ALMA_OK);
  check_f32(&out[0], (float[]){3, 3, 3, 2}, 4);
  check_i64(&out[1], (int64_t[]){0, 2, 4, 3}, 4);
  free_outs(out, 2);
}

static void test_topk_smallest_int64_axis0(void **s) {
  static const int64_t x[] = {4, -1, 2, 9, 2, 0};
  int64_t two = 2;
  alma_tensor xt = T(ALMA_DTYPE_INT64, x, 2, (int64_t)3, (int64_t)2), k = T(ALMA_DTYPE_INT64, &two, 1, (int64_t)1),
              out[2];
  const alma_tensor *in[] = {&xt, &k};
  tnode t;
  tn_init(&t, "TopK", 2, 2);
  attr_i(&t, "axis", 0);
  attr_i(&t, "largest", 0);
  assert_int_equal(tn_run(&t, 11, in, out), ALMA_OK);
  int64_t d[] = {2, 2};
  check_shape(&out[0], 2, d);
  /* column 0: 4,2,2 -> 2(1),2(2); column 1: -1,9,0 -> -1(0),0(2) */
  check_i64(&out[0], (int64_t[]){2, -1, 2, 0}, 4);
  check_i64(&out[1], (int64_t[]){1, 0, 2, 2}, 4);
  free_outs(out, 2);
  /* k beyond the axis, and an unknown k */
  int64_t big = 4;
  alma_tensor kb = T(ALMA_DTYPE_INT64, &big, 1, (int64_t)1), ku = T(ALMA_DTYPE_INT64, NULL, 1, (int64_t)1);
  const alma_tensor *in2[] = {&xt, &kb}, *in3[] = {&xt, &ku};
  assert_int_equal(tn_run(&t, 11, in2, out), ALMA_ERR_INVALID_ARG);
  assert_int_equal(tn_infer(&t, 11, in3, out), ALMA_ERR_DYNAMIC);
}

/* ---- NonZero, Trilu, CumSum ----------------------------------------------------------------- */

static void test_nonzero_float(void **s) {
  static const float x[] = {0, -0.0f, NAN, 2, 0, 1};
  alma_tensor xt = T(ALMA_DTYPE_FLOAT32, x, 2, (int64_t)2, (int64_t)3), out[1];
  const alma_tensor *in[] = {&xt};
  tnode t;
  tn_init(&t, "NonZero", 1, 1);
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_OK);
  int64_t d[] = {2, 3};
  check_shape(&out[0], 2, d);
  check_i64(&out[0], (int64_t[]){0, 1, 1, 2, 0, 2}, 6);
  free_outs(out, 1);
  alma_tensor xu = T(ALMA_DTYPE_FLOAT32, NULL, 1, (int64_t)3);
  const alma_tensor *in2[] = {&xu};
  assert_int_equal(tn_infer(&t, 13, in2, out), ALMA_ERR_DYNAMIC);
}

static void test_trilu_bool(void **s) {
  static const uint8_t x[] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  int64_t k1 = 1, km1 = -1;
  alma_tensor xt = T(ALMA_DTYPE_BOOL, x, 2, (int64_t)3, (int64_t)3), kt = T(ALMA_DTYPE_INT64, &k1, 0), out[1];
  const alma_tensor *in[] = {&xt, &kt};
  tnode t;
  tn_init(&t, "Trilu", 2, 1);
  assert_int_equal(tn_run(&t, 14, in, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){0, 1, 1, 0, 0, 1, 0, 0, 0}, 9);
  free_outs(out, 1);
  attr_i(&t, "upper", 0);
  kt.data = &km1;
  assert_int_equal(tn_run(&t, 14, in, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){0, 0, 0, 1, 0, 0, 1, 1, 0}, 9);
  free_outs(out, 1);
  alma_tensor v = T(ALMA_DTYPE_BOOL, x, 1, (int64_t)3);
  const alma_tensor *in2[] = {&v};
  tn_init(&t, "Trilu", 1, 1);
  assert_int_equal(tn_run(&t, 14, in2, out), ALMA_ERR_INVALID_MODEL);
}

static void test_cumsum_int(void **s) {
  static const int64_t x[] = {1, 2, 3, 4, 5, 6};
  int32_t axis = -2;
  alma_tensor xt = T(ALMA_DTYPE_INT64, x, 2, (int64_t)3, (int64_t)2), at = T(ALMA_DTYPE_INT32, &axis, 0), out[1];
  const alma_tensor *in[] = {&xt, &at};
  tnode t;
  tn_init(&t, "CumSum", 2, 1);
  attr_i(&t, "exclusive", 1);
  attr_i(&t, "reverse", 1);
  assert_int_equal(tn_run(&t, 11, in, out), ALMA_OK);
  /* column 0: 1,3,5 -> reverse exclusive 8,5,0; column 1: 2,4,6 -> 10,6,0 */
  check_i64(&out[0], (int64_t[]){8, 10, 5, 6, 0, 0}, 6);
  free_outs(out, 1);
  axis = 2;
  assert_int_equal(tn_run(&t, 11, in, out), ALMA_ERR_INVALID_ARG);
}

/* ---- Resize --------------------------------------------------------------------------------- */

static const float R22[] = {1, 2, 3, 4};

static void test_resize10_nearest(void **s) {
  float sc[] = {1, 1, 2, 2};
  alma_tensor x = T(ALMA_DTYPE_FLOAT32, R22, 4, (int64_t)1, (int64_t)1, (int64_t)2, (int64_t)2),
              st = T(ALMA_DTYPE_FLOAT32, sc, 1, (int64_t)4), out[1];
  const alma_tensor *in[] = {&x, &st};
  tnode t;
  tn_init(&t, "Resize", 2, 1);
  assert_int_equal(tn_run(&t, 10, in, out), ALMA_OK);
  int64_t d[] = {1, 1, 4, 4};
  check_shape(&out[0], 4, d);
  check_f32(&out[0], (float[]){1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, 16);
  free_outs(out, 1);
  /* downsampling rounds up (onnxruntime's rule for Resize-10) */
  static const float x24[] = {1, 2, 3, 4, 5, 6, 7, 8};
  float sd[] = {1, 1, 0.6f, 0.6f};
  alma_tensor xd = T(ALMA_DTYPE_FLOAT32, x24, 4, (int64_t)1, (int64_t)1, (int64_t)2, (int64_t)4),
              sdt = T(ALMA_DTYPE_FLOAT32, sd, 1, (int64_t)4);
  const alma_tensor *in2[] = {&xd, &sdt};
  assert_int_equal(tn_run(&t, 10, in2, out), ALMA_OK);
  int64_t d2[] = {1, 1, 1, 2};
  check_shape(&out[0], 4, d2);
  check_f32(&out[0], (float[]){1, 3}, 2);
  free_outs(out, 1);
}

static void test_resize10_linear(void **s) {
  float sc[] = {1, 1, 2, 4};
  alma_tensor x = T(ALMA_DTYPE_FLOAT32, R22, 4, (int64_t)1, (int64_t)1, (int64_t)2, (int64_t)2),
              st = T(ALMA_DTYPE_FLOAT32, sc, 1, (int64_t)4), out[1];
  const alma_tensor *in[] = {&x, &st};
  tnode t;
  tn_init(&t, "Resize", 2, 1);
  attr_s(&t, "mode", "linear");
  assert_int_equal(tn_run(&t, 10, in, out), ALMA_OK);
  float want[32] = {1, 1.25f, 1.5f, 1.75f, 2, 2, 2, 2, 2, 2.25f, 2.5f, 2.75f, 3, 3, 3, 3,
                    3, 3.25f, 3.5f, 3.75f, 4, 4, 4, 4, 3, 3.25f, 3.5f, 3.75f, 4, 4, 4, 4};
  check_f32(&out[0], want, 32);
  free_outs(out, 1);
  /* cubic did not exist at opset 10 */
  tn_init(&t, "Resize", 2, 1);
  attr_s(&t, "mode", "cubic");
  assert_int_equal(tn_run(&t, 10, in, out), ALMA_ERR_UNSUPPORTED);
}

static void test_resize11_sizes_uint8(void **s) {
  /* Resize-11 takes roi and scales as (empty) inputs; integer results truncate */
  static const uint8_t x[] = {0, 3, 6, 9};
  int64_t sizes[] = {1, 3};
  alma_tensor xt = T(ALMA_DTYPE_UINT8, x, 2, (int64_t)1, (int64_t)4), roi = T(ALMA_DTYPE_FLOAT32, NULL, 1, (int64_t)0),
              sc = T(ALMA_DTYPE_FLOAT32, NULL, 1, (int64_t)0), sz = T(ALMA_DTYPE_INT64, sizes, 1, (int64_t)2), out[1];
  const alma_tensor *in[] = {&xt, &roi, &sc, &sz};
  tnode t;
  tn_init(&t, "Resize", 4, 1);
  attr_s(&t, "mode", "linear");
  assert_int_equal(tn_run(&t, 11, in, out), ALMA_OK);
  assert_int_equal(out[0].dtype, ALMA_DTYPE_UINT8);
  /* half_pixel, scale 3/4: x_ori = 1/6, 1.5, 17/6 -> 0.5, 4.5, 8.5 -> 0, 4, 8 */
  check_i64(&out[0], (int64_t[]){0, 4, 8}, 3);
  free_outs(out, 1);
}

static void test_resize_bad_inputs(void **s) {
  float sc[] = {1, 1, 2, 2};
  int64_t sizes[] = {1, 1, 4, 4};
  alma_tensor x = T(ALMA_DTYPE_FLOAT32, R22, 4, (int64_t)1, (int64_t)1, (int64_t)2, (int64_t)2),
              st = T(ALMA_DTYPE_FLOAT32, sc, 1, (int64_t)4), sz = T(ALMA_DTYPE_INT64, sizes, 1, (int64_t)4), out[1];
  tnode t;
  tn_init(&t, "Resize", 4, 1);
  t.ins[1] = -1;
  const alma_tensor *both[] = {&x, NULL, &st, &sz};
  assert_int_equal(tn_run(&t, 13, both, out), ALMA_ERR_INVALID_MODEL);
  const alma_tensor *none[] = {&x, NULL, NULL, NULL};
  assert_int_equal(tn_run(&t, 13, none, out), ALMA_ERR_INVALID_MODEL);
  float neg[] = {1, 1, -2, 2};
  alma_tensor nt = T(ALMA_DTYPE_FLOAT32, neg, 1, (int64_t)4);
  const alma_tensor *negs[] = {&x, NULL, &nt, NULL};
  assert_int_equal(tn_run(&t, 13, negs, out), ALMA_ERR_INVALID_ARG);
  alma_tensor short_sc = T(ALMA_DTYPE_FLOAT32, sc, 1, (int64_t)2);
  const alma_tensor *shorts[] = {&x, NULL, &short_sc, NULL};
  assert_int_equal(tn_run(&t, 13, shorts, out), ALMA_ERR_INVALID_MODEL);
  alma_tensor unk = T(ALMA_DTYPE_FLOAT32, NULL, 1, (int64_t)4);
  const alma_tensor *dyn[] = {&x, NULL, &unk, NULL};
  assert_int_equal(tn_infer(&t, 13, dyn, out), ALMA_ERR_DYNAMIC);
  tn_init(&t, "Resize", 4, 1);
  attr_s(&t, "coordinate_transformation_mode", "tf_crop_and_resize");
  const alma_tensor *noroi[] = {&x, NULL, &st, NULL};
  assert_int_equal(tn_run(&t, 13, noroi, out), ALMA_ERR_INVALID_MODEL);
  tn_init(&t, "Resize", 4, 1);
  attr_s(&t, "mode", "bilinear");
  const alma_tensor *ok[] = {&x, NULL, &st, NULL};
  assert_int_equal(tn_run(&t, 13, ok, out), ALMA_ERR_UNSUPPORTED);
}

static void test_resize_nearest_bool_axes(void **s) {
  /* nearest copies elements, so any dtype works; axes (18) names the resized dims */
  static const uint8_t x[] = {1, 0, 0, 1};
  float sc[] = {2};
  int64_t axes[] = {-1};
  alma_tensor xt = T(ALMA_DTYPE_BOOL, x, 2, (int64_t)2, (int64_t)2), st = T(ALMA_DTYPE_FLOAT32, sc, 1, (int64_t)1),
              out[1];
  const alma_tensor *in[] = {&xt, NULL, &st};
  tnode t;
  tn_init(&t, "Resize", 3, 1);
  t.ins[1] = -1;
  attr_ints(&t, "axes", axes, 1);
  assert_int_equal(tn_run(&t, 18, in, out), ALMA_OK);
  int64_t d[] = {2, 4};
  check_shape(&out[0], 2, d);
  check_i64(&out[0], (int64_t[]){1, 1, 0, 0, 0, 0, 1, 1}, 8);
  free_outs(out, 1);
  tn_init(&t, "Resize", 3, 1);
  t.ins[1] = -1;
  attr_ints(&t, "axes", axes, 1);
  attr_s(&t, "mode", "linear");
  assert_int_equal(tn_run(&t, 18, in, out), ALMA_ERR_UNSUPPORTED);
}

static void test_resize_cubic_antialias_constant(void **s) {
  /* every filter's weights sum to one: a constant image stays constant */
  float x[64];
  for (int i = 0; i < 64; i++) x[i] = 2.5f;
  float sc[] = {1, 1, 0.3f, 0.45f};
  alma_tensor xt = T(ALMA_DTYPE_FLOAT32, x, 4, (int64_t)1, (int64_t)1, (int64_t)8, (int64_t)8),
              st = T(ALMA_DTYPE_FLOAT32, sc, 1, (int64_t)4), out[1];
  const alma_tensor *in[] = {&xt, NULL, &st};
  const char *modes[] = {"linear", "cubic"};
  for (int m = 0; m < 2; m++) {
    tnode t;
    tn_init(&t, "Resize", 3, 1);
    t.ins[1] = -1;
    attr_s(&t, "mode", modes[m]);
    attr_i(&t, "antialias", 1);
    attr_i(&t, "exclude_outside", 1);
    attr_f(&t, "cubic_coeff_a", -0.5f);
    assert_int_equal(tn_run(&t, 19, in, out), ALMA_OK);
    int64_t d[] = {1, 1, 2, 3};
    check_shape(&out[0], 4, d);
    check_f32(&out[0], (float[]){2.5f, 2.5f, 2.5f, 2.5f, 2.5f, 2.5f}, 6);
    free_outs(out, 1);
  }
}

static void test_resize_float32_scales_as_exported(void **s) {
  /* tf2onnx writes scale = float32(out / in) and expects ONNX Runtime's float32 arithmetic:
   * 1.55f * 20 rounds to 31 (30.999999 in double), and tf_half_pixel_for_nn's (13 + 0.5) / 1.35f
   * is 10.0f (9.9999998 in double, floored to 9). Expected values from ONNX Runtime 1.32. */
  float x[400];
  for (int i = 0; i < 400; i++) x[i] = (float)i;
  float sc[] = {1, 1, 1.55f, 1.35f};
  alma_tensor xt = T(ALMA_DTYPE_FLOAT32, x, 4, (int64_t)1, (int64_t)1, (int64_t)20, (int64_t)20),
              st = T(ALMA_DTYPE_FLOAT32, sc, 1, (int64_t)4), out[1];
  const alma_tensor *in[] = {&xt, NULL, &st};
  tnode t;
  tn_init(&t, "Resize", 3, 1);
  t.ins[1] = -1;
  attr_s(&t, "coordinate_transformation_mode", "tf_half_pixel_for_nn");
  attr_s(&t, "nearest_mode", "floor");
  assert_int_equal(tn_run(&t, 11, in, out), ALMA_OK);
  int64_t d[] = {1, 1, 31, 27};
  check_shape(&out[0], 4, d);
  static const int rows[31] = {0, 0, 1, 2, 2, 3, 4, 4, 5, 6, 6, 7, 8, 8, 9, 10,
                               10, 11, 11, 12, 13, 13, 14, 15, 15, 16, 17, 17, 18, 19, 19};
  static const int cols[27] = {0, 1, 1, 2, 3, 4, 4, 5, 6, 7, 7, 8, 9, 10, 10, 11, 12, 12, 13, 14, 15, 15, 16, 17, 18, 18, 19};
  float want[31 * 27];
  for (int i = 0; i < 31; i++)
    for (int j = 0; j < 27; j++) want[i * 27 + j] = (float)(rows[i] * 20 + cols[j]);
  check_f32(&out[0], want, 31 * 27);
  free_outs(out, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reduce_sum_attr_axes_opset1),
      cmocka_unit_test(test_reduce_sum_axes_input_rules),
      cmocka_unit_test(test_reduce_bad_axes),
      cmocka_unit_test(test_reduce_mean_int_attr_axes),
      cmocka_unit_test(test_reduce_empty_int),
      cmocka_unit_test(test_reduce_uint64_and_logsumexp),
      cmocka_unit_test(test_reduce_noncontiguous_axes),
      cmocka_unit_test(test_argmax_int_last_index),
      cmocka_unit_test(test_topk_v1_attr_and_ties),
      cmocka_unit_test(test_topk_smallest_int64_axis0),
      cmocka_unit_test(test_nonzero_float),
      cmocka_unit_test(test_trilu_bool),
      cmocka_unit_test(test_cumsum_int),
      cmocka_unit_test(test_resize10_nearest),
      cmocka_unit_test(test_resize10_linear),
      cmocka_unit_test(test_resize11_sizes_uint8),
      cmocka_unit_test(test_resize_bad_inputs),
      cmocka_unit_test(test_resize_nearest_bool_axes),
      cmocka_unit_test(test_resize_cubic_antialias_constant),
      cmocka_unit_test(test_resize_float32_scales_as_exported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
