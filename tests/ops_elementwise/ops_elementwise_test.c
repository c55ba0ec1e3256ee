/* Unit tests of the elementwise operators (src/ops/elementwise.c activation.c cast.c): the
 * semantics the ONNX node tests do not reach. */
#include <float.h>

#include "op_test_util.h"

/* ---- integer arithmetic -------------------------------------------------------------------- */
static void test_int_div_truncates_and_never_traps(void **s) {
  int32_t a[] = {7, -7, 7, -7, INT32_MIN, 5, 0};
  int32_t b[] = {2, 2, -2, -2, -1, 0, 3};
  alma_tensor ta = T(ALMA_DTYPE_INT32, a, 1, (int64_t)7), tb = T(ALMA_DTYPE_INT32, b, 1, (int64_t)7), out[1];
  const alma_tensor *in[] = {&ta, &tb};
  tnode t;
  tn_init(&t, "Div", 2, 1);
  assert_int_equal(tn_run(&t, 14, in, out), ALMA_OK);
  assert_int_equal(out[0].dtype, ALMA_DTYPE_INT32);
  check_i64(&out[0], (int64_t[]){3, -3, -3, 3, INT32_MIN, 0, 0}, 7);
  free_outs(out, 1);
}

static void test_int_wraps(void **s) {
  int8_t a[] = {127, -128, 100};
  int8_t b[] = {1, -1, 2};
  alma_tensor ta = T(ALMA_DTYPE_INT8, a, 1, (int64_t)3), tb = T(ALMA_DTYPE_INT8, b, 1, (int64_t)3), out[1];
  const alma_tensor *in[] = {&ta, &tb};
  tnode t;
  tn_init(&t, "Add", 2, 1);
  assert_int_equal(tn_run(&t, 14, in, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){-128, 127, 102}, 3);
  free_outs(out, 1);
  tn_init(&t, "Mul", 2, 1);
  assert_int_equal(tn_run(&t, 14, in, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){127, -128, -56}, 3);
  free_outs(out, 1);
  uint8_t u0[] = {0}, u1[] = {1};
  alma_tensor tu0 = T(ALMA_DTYPE_UINT8, u0, 0), tu1 = T(ALMA_DTYPE_UINT8, u1, 0);
  const alma_tensor *uin[] = {&tu0, &tu1};
  tn_init(&t, "Sub", 2, 1);
  assert_int_equal(tn_run(&t, 14, uin, out), ALMA_OK);
  assert_int_equal(out[0].rank, 0);
  check_i64(&out[0], (int64_t[]){255}, 1);
  free_outs(out, 1);
  /* Abs/Neg of the most negative value wrap to itself */
  int64_t m[] = {INT64_MIN, -5};
  alma_tensor tm = T(ALMA_DTYPE_INT64, m, 1, (int64_t)2);
  const alma_tensor *min[] = {&tm};
  tn_init(&t, "Abs", 1, 1);
  assert_int_equal(tn_run(&t, 13, min, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){INT64_MIN, 5}, 2);
  free_outs(out, 1);
  tn_init(&t, "Neg", 1, 1);
  assert_int_equal(tn_run(&t, 13, min, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){INT64_MIN, 5}, 2);
  free_outs(out, 1);
}

static void test_mod_fmod_attribute(void **s) {
  int32_t a[] = {-4, 7, 5, -5, 9};
  int32_t b[] = {3, -3, -3, 0, 3};
  alma_tensor ta = T(ALMA_DTYPE_INT32, a, 1, (int64_t)5), tb = T(ALMA_DTYPE_INT32, b, 1, (int64_t)5), out[1];
  const alma_tensor *in[] = {&ta, &tb};
  tnode t;
  tn_init(&t, "Mod", 2, 1); /* fmod=0: sign of the divisor */
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){2, -2, -1, 0, 0}, 5);
  free_outs(out, 1);
  tn_init(&t, "Mod", 2, 1); /* fmod=1: sign of the dividend (C fmod) */
  attr_i(&t, "fmod", 1);
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){-1, 1, 2, 0, 0}, 5);
  free_outs(out, 1);
  float fa[] = {-4.5f, 4.5f}, fb[] = {2.0f, -2.0f};
  alma_tensor tfa = T(ALMA_DTYPE_FLOAT32, fa, 1, (int64_t)2), tfb = T(ALMA_DTYPE_FLOAT32, fb, 1, (int64_t)2);
  const alma_tensor *fin[] = {&tfa, &tfb};
  assert_int_equal(tn_run(&t, 13, fin, out), ALMA_OK);
  check_f_abs(&out[0], (double[]){-0.5, 0.5}, 2, 0);
  free_outs(out, 1);
  tn_init(&t, "Mod", 2, 1);
  attr_i(&t, "fmod", 2);
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_ERR_INVALID_MODEL);
}

static void test_pow_mixed_types(void **s) {
  int32_t base[] = {2, -3, 2, 1, -1};
  int64_t ex[] = {10, 3, -1, -5, -3};
  alma_tensor tb = T(ALMA_DTYPE_INT32, base, 1, (int64_t)5), te = T(ALMA_DTYPE_INT64, ex, 1, (int64_t)5), out[1];
  const alma_tensor *in[] = {&tb, &te};
  tnode t;
  tn_init(&t, "Pow", 2, 1);
  assert_int_equal(tn_run(&t, 15, in, out), ALMA_OK);
  assert_int_equal(out[0].dtype, ALMA_DTYPE_INT32);
  check_i64(&out[0], (int64_t[]){1024, -27, 0, 1, -1}, 5);
  free_outs(out, 1);
  uint16_t h[] = {alma__f32_to_f16(1.5f)};
  int8_t e2[] = {2};
  alma_tensor th = T(ALMA_DTYPE_FLOAT16, h, 0), te2 = T(ALMA_DTYPE_INT8, e2, 0);
  const alma_tensor *in2[] = {&th, &te2};
  assert_int_equal(tn_run(&t, 15, in2, out), ALMA_OK);
  assert_int_equal(out[0].dtype, ALMA_DTYPE_FLOAT16);
  check_f_abs(&out[0], (double[]){2.25}, 1, 0);
  free_outs(out, 1);
}

static void test_round_half_even_and_sign(void **s) {
  double x[] = {0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6};
  alma_tensor tx = T(ALMA_DTYPE_FLOAT64, x, 1, (int64_t)7), out[1];
  const alma_tensor *in[] = {&tx};
  tnode t;
  tn_init(&t, "Round", 1, 1);
  assert_int_equal(tn_run(&t, 22, in, out), ALMA_OK);
  check_f_abs(&out[0], (double[]){0, 2, 2, -0.0, -2, 2, -3}, 7, 0);
  free_outs(out, 1);
  int16_t xi[] = {-7, 0, 9};
  alma_tensor ti = T(ALMA_DTYPE_INT16, xi, 1, (int64_t)3);
  const alma_tensor *iin[] = {&ti};
  tn_init(&t, "Sign", 1, 1);
  assert_int_equal(tn_run(&t, 13, iin, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){-1, 0, 1}, 3);
  free_outs(out, 1);
  tn_init(&t, "Sqrt", 1, 1); /* integer input: unsupported, named */
  assert_int_equal(tn_run(&t, 13, iin, out), ALMA_ERR_UNSUPPORTED);
}

/* ---- broadcasting ---------------------------------------------------------------------------- */
static void test_legacy_broadcast_axis(void **s) {
  float a[24], b[3] = {100, 200, 300}, c[4] = {1, 2, 3, 4};
  for (int i = 0; i < 24; i++) a[i] = (float)i;
  alma_tensor ta = T(ALMA_DTYPE_FLOAT32, a, 3, (int64_t)2, (int64_t)3, (int64_t)4);
  alma_tensor tb = T(ALMA_DTYPE_FLOAT32, b, 1, (int64_t)3), tc = T(ALMA_DTYPE_FLOAT32, c, 1, (int64_t)4), out[1];
  const alma_tensor *in[] = {&ta, &tb};
  tnode t;
  tn_init(&t, "Add", 2, 1);
  attr_i(&t, "broadcast", 1);
  attr_i(&t, "axis", 1);
  assert_int_equal(tn_run(&t, 6, in, out), ALMA_OK);
  check_shape(&out[0], 3, (int64_t[]){2, 3, 4});
  for (int i = 0; i < 24; i++) assert_true(((float *)out[0].data)[i] == (float)i + b[(i / 4) % 3]);
  free_outs(out, 1);
  /* no axis: suffix alignment */
  const alma_tensor *in2[] = {&ta, &tc};
  tn_init(&t, "Sub", 2, 1);
  attr_i(&t, "broadcast", 1);
  assert_int_equal(tn_run(&t, 1, in2, out), ALMA_OK);
  for (int i = 0; i < 24; i++) assert_true(((float *)out[0].data)[i] == (float)i - c[i % 4]);
  free_outs(out, 1);
  /* broadcast=0 with different shapes, and a misaligned axis, are shape errors */
  tn_init(&t, "Mul", 2, 1);
  assert_int_equal(tn_run(&t, 6, in2, out), ALMA_ERR_SHAPE);
  tn_init(&t, "Mul", 2, 1);
  attr_i(&t, "broadcast", 1);
  attr_i(&t, "axis", 0);
  assert_int_equal(tn_run(&t, 6, in, out), ALMA_ERR_SHAPE);
  /* from opset 7 numpy rules apply: [2,3,4] + [3] does not broadcast */
  tn_init(&t, "Add", 2, 1);
  assert_int_equal(tn_run(&t, 7, in, out), ALMA_ERR_SHAPE);
}

/* Add over random shapes against a reference built on alma__broadcast_index. */
static void test_broadcast_matches_reference(void **s) {
  unsigned seed = 12345;
  for (int iter = 0; iter < 300; iter++) {
    int ra = (int)((seed = seed * 1103515245u + 12345u) >> 16) % 6, rb = (int)((seed = seed * 1103515245u + 12345u) >> 16) % 6;
    int r = ra > rb ? ra : rb;
    int64_t full[ALMA_MAX_RANK], da[ALMA_MAX_RANK], db[ALMA_MAX_RANK];
    for (int d = 0; d < r; d++) full[d] = 1 + (int64_t)(((seed = seed * 1103515245u + 12345u) >> 16) % 4);
    for (int d = 0; d < ra; d++) da[d] = ((seed = seed * 1103515245u + 12345u) >> 16) % 3 ? full[r - ra + d] : 1;
    for (int d = 0; d < rb; d++) db[d] = ((seed = seed * 1103515245u + 12345u) >> 16) % 3 ? full[r - rb + d] : 1;
    int64_t na = alma__numel(ra, da), nb = alma__numel(rb, db);
    float *a = malloc(sizeof(float) * (size_t)na), *b = malloc(sizeof(float) * (size_t)nb);
    for (int64_t i = 0; i < na; i++) a[i] = (float)i;
    for (int64_t i = 0; i < nb; i++) b[i] = (float)(1000 * i);
    alma_tensor ta, tb, out[1];
    memset(&ta, 0, sizeof ta);
    memset(&tb, 0, sizeof tb);
    ta.dtype = tb.dtype = ALMA_DTYPE_FLOAT32;
    ta.rank = ra;
    tb.rank = rb;
    memcpy(ta.dims, da, sizeof da);
    memcpy(tb.dims, db, sizeof db);
    ta.data = a;
    tb.data = b;
    const alma_tensor *in[] = {&ta, &tb};
    tnode t;
    tn_init(&t, "Add", 2, 1);
    assert_int_equal(tn_run(&t, 14, in, out), ALMA_OK);
    int64_t no = alma_tensor_numel(&out[0]);
    for (int64_t i = 0; i < no; i++) {
      float want = a[alma__broadcast_index(i, out[0].rank, out[0].dims, ra, da)] +
                   b[alma__broadcast_index(i, out[0].rank, out[0].dims, rb, db)];
      if (((float *)out[0].data)[i] != want) fail_msg("iter %d element %lld", iter, (long long)i);
    }
    free_outs(out, 1);
    free(a);
    free(b);
  }
}

static void test_variadic_and_where(void **s) {
  float a[] = {1, 2}, b[] = {10, 20, 30}, c[] = {100};
  alma_tensor ta = T(ALMA_DTYPE_FLOAT32, a, 2, (int64_t)2, (int64_t)1), tb = T(ALMA_DTYPE_FLOAT32, b, 1, (int64_t)3);
  alma_tensor tc = T(ALMA_DTYPE_FLOAT32, c, 0), out[1];
  const alma_tensor *in[] = {&ta, &tb, &tc};
  tnode t;
  tn_init(&t, "Sum", 3, 1);
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_OK);
  check_shape(&out[0], 2, (int64_t[]){2, 3});
  check_f_abs(&out[0], (double[]){111, 121, 131, 112, 122, 132}, 6, 0);
  free_outs(out, 1);
  tn_init(&t, "Mean", 3, 1);
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_OK);
  check_f_abs(&out[0], (double[]){37, 121 / 3.0, 131 / 3.0, 112 / 3.0, 122 / 3.0, 44}, 6, 1e-5);
  free_outs(out, 1);
  float nanv[] = {NAN, 1};
  alma_tensor tn = T(ALMA_DTYPE_FLOAT32, nanv, 2, (int64_t)2, (int64_t)1);
  const alma_tensor *in2[] = {&tb, &tn};
  tn_init(&t, "Max", 2, 1); /* NaN propagates */
  assert_int_equal(tn_run(&t, 13, in2, out), ALMA_OK);
  check_f_abs(&out[0], (double[]){NAN, NAN, NAN, 10, 20, 30}, 6, 0);
  free_outs(out, 1);
  int64_t ia[] = {1, 2}, ib[] = {5};
  alma_tensor tia = T(ALMA_DTYPE_INT64, ia, 1, (int64_t)2), tib = T(ALMA_DTYPE_FLOAT32, ib, 1, (int64_t)1);
  const alma_tensor *bad[] = {&tia, &tib};
  tn_init(&t, "Min", 2, 1); /* mixed dtypes are an error */
  assert_int_equal(tn_run(&t, 13, bad, out), ALMA_ERR_INVALID_MODEL);

  uint8_t cond[] = {1, 0};
  int64_t x[] = {1, 2, 3}, y[] = {-1};
  alma_tensor tcnd = T(ALMA_DTYPE_BOOL, cond, 2, (int64_t)2, (int64_t)1), tx = T(ALMA_DTYPE_INT64, x, 2, (int64_t)1, (int64_t)3);
  alma_tensor ty = T(ALMA_DTYPE_INT64, y, 0);
  const alma_tensor *win[] = {&tcnd, &tx, &ty};
  tn_init(&t, "Where", 3, 1);
  assert_int_equal(tn_run(&t, 16, win, out), ALMA_OK);
  check_shape(&out[0], 2, (int64_t[]){2, 3});
  check_i64(&out[0], (int64_t[]){1, 2, 3, -1, -1, -1}, 6);
  free_outs(out, 1);
}

static void test_compare_and_logic(void **s) {
  uint64_t a[] = {UINT64_MAX, 1, 5}, b[] = {1, UINT64_MAX, 5};
  alma_tensor ta = T(ALMA_DTYPE_UINT64, a, 1, (int64_t)3), tb = T(ALMA_DTYPE_UINT64, b, 1, (int64_t)3), out[1];
  const alma_tensor *in[] = {&ta, &tb};
  tnode t;
  tn_init(&t, "Greater", 2, 1);
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_OK);
  assert_int_equal(out[0].dtype, ALMA_DTYPE_BOOL);
  check_i64(&out[0], (int64_t[]){1, 0, 0}, 3);
  free_outs(out, 1);
  tn_init(&t, "LessOrEqual", 2, 1);
  assert_int_equal(tn_run(&t, 16, in, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){0, 1, 1}, 3);
  free_outs(out, 1);
  uint8_t p[] = {1, 1, 0, 0}, q[] = {1, 0, 1, 0};
  alma_tensor tp = T(ALMA_DTYPE_BOOL, p, 1, (int64_t)4), tq = T(ALMA_DTYPE_BOOL, q, 1, (int64_t)4);
  const alma_tensor *bin[] = {&tp, &tq};
  tn_init(&t, "Equal", 2, 1);
  assert_int_equal(tn_run(&t, 13, bin, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){1, 0, 0, 1}, 4);
  free_outs(out, 1);
  tn_init(&t, "Xor", 2, 1);
  assert_int_equal(tn_run(&t, 7, bin, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){0, 1, 1, 0}, 4);
  free_outs(out, 1);
  tn_init(&t, "And", 2, 1); /* And takes bool only */
  assert_int_equal(tn_run(&t, 7, in, out), ALMA_ERR_UNSUPPORTED);
}

/* ---- Clip ------------------------------------------------------------------------------------ */
static void test_clip_forms(void **s) {
  int8_t x[] = {-100, 0, 3, 100};
  int8_t lo[] = {5}, hi[] = {2};
  alma_tensor tx = T(ALMA_DTYPE_INT8, x, 1, (int64_t)4), tlo = T(ALMA_DTYPE_INT8, lo, 0), thi = T(ALMA_DTYPE_INT8, hi, 1, (int64_t)1);
  alma_tensor out[1];
  const alma_tensor *in[] = {&tx, &tlo, &thi};
  tnode t;
  tn_init(&t, "Clip", 3, 1); /* min > max: everything becomes max */
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){2, 2, 2, 2}, 4);
  free_outs(out, 1);
  const alma_tensor *in_max_only[] = {&tx, NULL, &thi};
  tn_init(&t, "Clip", 3, 1);
  t.ins[1] = -1;
  assert_int_equal(tn_run(&t, 13, in_max_only, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){-100, 0, 2, 2}, 4);
  free_outs(out, 1);
  float fx[] = {-2, 0.5f, 7, INFINITY, NAN};
  alma_tensor tfx = T(ALMA_DTYPE_FLOAT32, fx, 1, (int64_t)5);
  const alma_tensor *fin[] = {&tfx};
  tn_init(&t, "Clip", 1, 1); /* opset 6: attributes */
  attr_f(&t, "min", -1);
  attr_f(&t, "max", 1);
  assert_int_equal(tn_run(&t, 6, fin, out), ALMA_OK);
  check_f_abs(&out[0], (double[]){-1, 0.5, 1, 1, NAN}, 5, 0);
  free_outs(out, 1);
  tn_init(&t, "Clip", 1, 1); /* opset 6 without attributes: the float range */
  assert_int_equal(tn_run(&t, 6, fin, out), ALMA_OK);
  check_f_abs(&out[0], (double[]){-2, 0.5, 7, FLT_MAX, NAN}, 5, 0);
  free_outs(out, 1);
  float two[] = {1, 2};
  alma_tensor ttwo = T(ALMA_DTYPE_FLOAT32, two, 1, (int64_t)2);
  const alma_tensor *bad[] = {&tfx, &ttwo};
  tn_init(&t, "Clip", 2, 1); /* min must be a scalar */
  assert_int_equal(tn_run(&t, 13, bad, out), ALMA_ERR_SHAPE);
}

/* ---- Cast ------------------------------------------------------------------------------------ */
static alma_status cast(alma_tensor *x, alma_dtype to, alma_tensor *out) {
  tnode t;
  tn_init(&t, "Cast", 1, 1);
  attr_i(&t, "to", to);
  const alma_tensor *in[] = {x};
  return tn_run(&t, 21, in, out);
}

static void test_cast_rounding_and_saturation(void **s) {
  /* 1 + 2^-11 + 2^-40 lies just above the midpoint of two float16 values; rounding through
   * float32 first would land exactly on the midpoint and round down to 1.0. */
  double d[] = {1.0 + ldexp(1, -11) + ldexp(1, -40), 65520.0, -1e-9};
  alma_tensor td = T(ALMA_DTYPE_FLOAT64, d, 1, (int64_t)3), out[1];
  assert_int_equal(cast(&td, ALMA_DTYPE_FLOAT16, out), ALMA_OK);
  uint16_t *h = (uint16_t *)out[0].data;
  assert_int_equal(h[0], 0x3c01);
  assert_int_equal(h[1], 0x7c00); /* rounds to inf */
  assert_int_equal(h[2], 0x8000); /* -0 */
  free_outs(out, 1);

  float f[] = {-1.7f, 2.9f, 300.0f, -300.0f, NAN, 0.0f};
  alma_tensor tf = T(ALMA_DTYPE_FLOAT32, f, 1, (int64_t)6);
  assert_int_equal(cast(&tf, ALMA_DTYPE_INT8, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){-1, 2, 127, -128, 0, 0}, 6);
  free_outs(out, 1);
  assert_int_equal(cast(&tf, ALMA_DTYPE_BOOL, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){1, 1, 1, 1, 1, 0}, 6);
  free_outs(out, 1);
  float b16[] = {0.48033667f}; /* bfloat16 rounds to nearest even (truncation gives 0x3ef5) */
  alma_tensor tb = T(ALMA_DTYPE_FLOAT32, b16, 0);
  assert_int_equal(cast(&tb, ALMA_DTYPE_BFLOAT16, out), ALMA_OK);
  assert_int_equal(((uint16_t *)out[0].data)[0], 0x3ef6);
  free_outs(out, 1);

  int64_t i[] = {300, -1, INT64_MAX};
  alma_tensor ti = T(ALMA_DTYPE_INT64, i, 1, (int64_t)3);
  assert_int_equal(cast(&ti, ALMA_DTYPE_UINT8, out), ALMA_OK); /* integers wrap */
  check_i64(&out[0], (int64_t[]){44, 255, 255}, 3);
  free_outs(out, 1);
  uint64_t u[] = {UINT64_MAX};
  alma_tensor tu = T(ALMA_DTYPE_UINT64, u, 0);
  assert_int_equal(cast(&tu, ALMA_DTYPE_FLOAT32, out), ALMA_OK);
  check_f_abs(&out[0], (double[]){18446744073709551616.0}, 1, 0);
  free_outs(out, 1);
  assert_int_equal(cast(&tu, ALMA_DTYPE_FLOAT64, out), ALMA_OK);
  check_f_abs(&out[0], (double[]){18446744073709551616.0}, 1, 0);
  free_outs(out, 1);
  uint16_t hh[] = {alma__f32_to_f16(-3.75f)};
  alma_tensor th = T(ALMA_DTYPE_FLOAT16, hh, 0);
  assert_int_equal(cast(&th, ALMA_DTYPE_INT32, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){-3}, 1);
  free_outs(out, 1);

  /* to string as ONNX Runtime writes floats ("%.8g", "NaN") */
  assert_int_equal(cast(&tf, ALMA_DTYPE_STRING, out), ALMA_OK);
  const char *fs[] = {"-1.7", "2.9000001", "300", "-300", "NaN", "0"};
  for (int i = 0; i < 6; i++) assert_string_equal(alma_tensor_string(&out[0], i, NULL), fs[i]);
  free_outs(out, 1);
  assert_int_equal(cast(&tf, (alma_dtype)27, out), ALMA_ERR_UNSUPPORTED); /* float6e2m3: not held */
  assert_int_equal(cast(&tf, (alma_dtype)99, out), ALMA_ERR_INVALID_MODEL);
}

/* ---- Dropout, Identity ----------------------------------------------------------------------- */
static void test_dropout_modes(void **s) {
  float x[] = {1, -2, 3};
  float r0[] = {0}, r5[] = {0.5f};
  uint8_t tr[] = {1};
  alma_tensor tx = T(ALMA_DTYPE_FLOAT32, x, 1, (int64_t)3), tr0 = T(ALMA_DTYPE_FLOAT32, r0, 0);
  alma_tensor tr5 = T(ALMA_DTYPE_FLOAT32, r5, 0), ttr = T(ALMA_DTYPE_BOOL, tr, 0), out[2];
  tnode t;
  const alma_tensor *in0[] = {&tx, &tr0, &ttr};
  tn_init(&t, "Dropout", 3, 2); /* training with ratio 0 is the identity */
  assert_int_equal(tn_run(&t, 13, in0, out), ALMA_OK);
  check_f_abs(&out[0], (double[]){1, -2, 3}, 3, 0);
  assert_int_equal(out[1].dtype, ALMA_DTYPE_BOOL);
  check_i64(&out[1], (int64_t[]){1, 1, 1}, 3);
  free_outs(out, 2);
  /* training with ratio 0.5: kept elements doubled, the rest 0, the mask saying which; the same
   * seed gives the same mask */
  const alma_tensor *in5[] = {&tx, &tr5, &ttr};
  tn_init(&t, "Dropout", 3, 2);
  attr_i(&t, "seed", 7);
  assert_int_equal(tn_run(&t, 13, in5, out), ALMA_OK);
  uint8_t first[3];
  for (int i = 0; i < 3; i++) {
    float y = ((float *)out[0].data)[i];
    first[i] = ((uint8_t *)out[1].data)[i];
    assert_true(y == (first[i] ? 2 * x[i] : 0.0f));
  }
  free_outs(out, 2);
  assert_int_equal(tn_run(&t, 13, in5, out), ALMA_OK);
  assert_memory_equal(out[1].data, first, 3);
  free_outs(out, 2);
  const alma_tensor *in1[] = {&tx};
  tn_init(&t, "Dropout", 1, 2); /* opset 7: inference, mask in the input's dtype */
  assert_int_equal(tn_run(&t, 7, in1, out), ALMA_OK);
  assert_int_equal(out[1].dtype, ALMA_DTYPE_FLOAT32);
  check_f_abs(&out[1], (double[]){1, 1, 1}, 3, 0);
  free_outs(out, 2);
  tn_init(&t, "Dropout", 1, 1); /* opset 6 defaults to is_test=0: training */
  assert_int_equal(tn_run(&t, 6, in1, out), ALMA_ERR_UNSUPPORTED);
  tn_init(&t, "Dropout", 1, 1);
  attr_i(&t, "is_test", 1);
  assert_int_equal(tn_run(&t, 6, in1, out), ALMA_OK);
  free_outs(out, 1);
  int32_t ix[] = {4, 5};
  alma_tensor tix = T(ALMA_DTYPE_INT32, ix, 1, (int64_t)2);
  const alma_tensor *iin[] = {&tix};
  tn_init(&t, "Identity", 1, 1);
  assert_int_equal(tn_run(&t, 21, iin, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){4, 5}, 2);
  free_outs(out, 1);
}

/* ---- activations ---------------------------------------------------------------------------- */
static void test_activations(void **s) {
  float x[] = {-3, -0.5f, 0, 0.5f, 3, 100, -100};
  alma_tensor tx = T(ALMA_DTYPE_FLOAT32, x, 1, (int64_t)7), out[1];
  const alma_tensor *in[] = {&tx};
  tnode t;
  tn_init(&t, "Gelu", 1, 1);
  attr_s(&t, "approximate", "tanh");
  assert_int_equal(tn_run(&t, 20, in, out), ALMA_OK);
  for (int i = 0; i < 7; i++) {
    double v = x[i], want = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    assert_true(fabs(((float *)out[0].data)[i] - want) < 1e-5 * (1 + fabs(want)));
  }
  free_outs(out, 1);
  tn_init(&t, "Gelu", 1, 1);
  attr_s(&t, "approximate", "fast");
  assert_int_equal(tn_run(&t, 20, in, out), ALMA_ERR_INVALID_MODEL);
  tn_init(&t, "Sigmoid", 1, 1); /* no overflow at the extremes */
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_OK);
  check_f_abs(&out[0], (double[]){1 / (1 + exp(3.0)), 1 / (1 + exp(0.5)), 0.5, 1 / (1 + exp(-0.5)), 1 / (1 + exp(-3.0)), 1, 0}, 7, 1e-6);
  free_outs(out, 1);
  tn_init(&t, "Softplus", 1, 1);
  assert_int_equal(tn_run(&t, 22, in, out), ALMA_OK);
  check_f_abs(&out[0], (double[]){log1p(exp(-3.0)), log1p(exp(-0.5)), log(2.0), log1p(exp(0.5)), log1p(exp(3.0)), 100, 0}, 7, 1e-5);
  free_outs(out, 1);
  int8_t xi[] = {-5, 0, 7};
  alma_tensor ti = T(ALMA_DTYPE_INT8, xi, 1, (int64_t)3);
  const alma_tensor *iin[] = {&ti};
  tn_init(&t, "Relu", 1, 1);
  assert_int_equal(tn_run(&t, 14, iin, out), ALMA_OK);
  check_i64(&out[0], (int64_t[]){0, 0, 7}, 3);
  free_outs(out, 1);
  tn_init(&t, "Elu", 1, 1); /* float only */
  assert_int_equal(tn_run(&t, 22, iin, out), ALMA_ERR_UNSUPPORTED);

  /* PRelu: slope [C,1,1] onto [N,C,H,W]; bfloat16 computes through float32 */
  float px[2 * 2 * 2] = {-1, 1, -2, 2, -3, 3, -4, 4}, sl[2] = {0.5f, 0.25f};
  alma_tensor tpx = T(ALMA_DTYPE_FLOAT32, px, 4, (int64_t)1, (int64_t)2, (int64_t)2, (int64_t)2);
  alma_tensor tsl = T(ALMA_DTYPE_FLOAT32, sl, 3, (int64_t)2, (int64_t)1, (int64_t)1);
  const alma_tensor *pin[] = {&tpx, &tsl};
  tn_init(&t, "PRelu", 2, 1);
  assert_int_equal(tn_run(&t, 16, pin, out), ALMA_OK);
  check_f_abs(&out[0], (double[]){-0.5, 1, -1, 2, -0.75, 3, -1, 4}, 8, 0);
  free_outs(out, 1);
  const alma_tensor *pbad[] = {&tsl, &tpx}; /* slope must broadcast onto X, not the reverse */
  tn_init(&t, "PRelu", 2, 1);
  assert_int_equal(tn_run(&t, 16, pbad, out), ALMA_ERR_SHAPE);
  uint16_t hb[] = {alma__f32_to_bf16(-2.0f), alma__f32_to_bf16(1.5f)};
  alma_tensor thb = T(ALMA_DTYPE_BFLOAT16, hb, 1, (int64_t)2);
  const alma_tensor *bin[] = {&thb};
  tn_init(&t, "LeakyRelu", 1, 1);
  attr_f(&t, "alpha", 0.5f);
  assert_int_equal(tn_run(&t, 16, bin, out), ALMA_OK);
  check_f_abs(&out[0], (double[]){-1, 1.5}, 2, 0);
  free_outs(out, 1);
}

static void test_empty_tensors(void **s) {
  float dummy[1] = {0};
  alma_tensor ta = T(ALMA_DTYPE_FLOAT32, dummy, 2, (int64_t)0, (int64_t)3), tb = T(ALMA_DTYPE_FLOAT32, dummy, 1, (int64_t)3);
  alma_tensor out[1];
  const alma_tensor *in[] = {&ta, &tb};
  tnode t;
  tn_init(&t, "Add", 2, 1);
  assert_int_equal(tn_run(&t, 14, in, out), ALMA_OK);
  check_shape(&out[0], 2, (int64_t[]){0, 3});
  free_outs(out, 1);
  const alma_tensor *in1[] = {&ta};
  tn_init(&t, "Exp", 1, 1);
  assert_int_equal(tn_run(&t, 13, in1, out), ALMA_OK);
  free_outs(out, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_int_div_truncates_and_never_traps),
      cmocka_unit_test(test_int_wraps),
      cmocka_unit_test(test_mod_fmod_attribute),
      cmocka_unit_test(test_pow_mixed_types),
      cmocka_unit_test(test_round_half_even_and_sign),
      cmocka_unit_test(test_legacy_broadcast_axis),
      cmocka_unit_test(test_broadcast_matches_reference),
      cmocka_unit_test(test_variadic_and_where),
      cmocka_unit_test(test_compare_and_logic),
      cmocka_unit_test(test_clip_forms),
      cmocka_unit_test(test_cast_rounding_and_saturation),
      cmocka_unit_test(test_dropout_modes),
      cmocka_unit_test(test_activations),
      cmocka_unit_test(test_empty_tensors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
