/* Quantized and recurrent operators: the forms the ONNX node tests do not reach, checked against
 * hand-computed values or naive reference loops written here (direct convolution, plain matrix
 * product, step-by-step LSTM/GRU in double). Nodes are built by hand and run with
 * alma__op_run_node, so no ONNX file is needed. */
#include "op_test_util.h"

static uint32_t rng = 12345;
static uint32_t rnd(void) {
  rng = rng * 1664525u + 1013904223u;
  return rng >> 8;
}
static float rndf(void) { return (float)(rnd() % 20001) / 10000.0f - 1.0f; } /* [-1, 1] */

/* ==== QuantizeLinear ========================================================================== */

static void test_quantize_round_half_even(void **s) {
  (void)s;
  tnode t;
  float x[8] = {0.5f, 1.5f, 2.5f, -0.5f, 3.49f, 300.f, -300.f, 7.5f};
  float sc = 1.0f;
  uint8_t zp = 0;
  int8_t zpi = -1;
  alma_tensor X = TV(ALMA_DTYPE_FLOAT32, x, 8), S = SCALAR(ALMA_DTYPE_FLOAT32, &sc), Z = SCALAR(ALMA_DTYPE_UINT8, &zp), out;
  alma_tensor *in[3] = {&X, &S, &Z};
  tn_make(&t, "QuantizeLinear", 10, 3, 1);
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_OK);
  assert_int_equal(out.dtype, ALMA_DTYPE_UINT8);
  check_i64(&out, (int64_t[]){0, 2, 2, 0, 3, 255, 0, 8}, 8);
  alma_tensor_free_data(&out);
  /* int8 with zero point -1; no zero point gives uint8 */
  alma_tensor Zi = SCALAR(ALMA_DTYPE_INT8, &zpi);
  in[2] = &Zi;
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_OK);
  assert_int_equal(out.dtype, ALMA_DTYPE_INT8);
  check_i64(&out, (int64_t[]){-1, 1, 1, -1, 2, 127, -128, 7}, 8);
  alma_tensor_free_data(&out);
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
  assert_int_equal(out.dtype, ALMA_DTYPE_UINT8);
  alma_tensor_free_data(&out);
  /* int32 input divides in double */
  int32_t xi[3] = {5, -5, 1000};
  float sc2 = 2.0f;
  alma_tensor XI = TV(ALMA_DTYPE_INT32, xi, 3), S2 = SCALAR(ALMA_DTYPE_FLOAT32, &sc2);
  in[0] = &XI;
  in[1] = &S2;
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_OK);
  check_i64(&out, (int64_t[]){1, -3, 127}, 3);
  alma_tensor_free_data(&out);
}

static void test_quantize_per_axis(void **s) {
  (void)s;
  tnode t;
  float x[6] = {1, 2, 3, 4, 5, 6};
  float sc[2] = {1.0f, 2.0f}, sc3[3] = {1, 2, 4};
  int8_t zp[2] = {0, 10}, zp3[3] = {1, 2, 3};
  alma_tensor X = TV(ALMA_DTYPE_FLOAT32, x, 2, 3), S = TV(ALMA_DTYPE_FLOAT32, sc, 2), Z = TV(ALMA_DTYPE_INT8, zp, 2), out;
  alma_tensor *in[3] = {&X, &S, &Z};
  tn_make(&t, "QuantizeLinear", 13, 3, 1);
  attr_i(&t, "axis", 0);
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_OK);
  check_i64(&out, (int64_t[]){1, 2, 3, 12, 12, 13}, 6); /* 4/2=2, 5/2=2.5->2, 6/2=3 */
  alma_tensor_free_data(&out);
  /* default axis 1, negative axis -1 */
  alma_tensor S3 = TV(ALMA_DTYPE_FLOAT32, sc3, 3), Z3 = TV(ALMA_DTYPE_INT8, zp3, 3);
  in[1] = &S3;
  in[2] = &Z3;
  tn_make(&t, "QuantizeLinear", 13, 3, 1);
  attr_i(&t, "axis", -1);
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_OK);
  check_i64(&out, (int64_t[]){2, 3, 4, 5, 4, 5}, 6); /* 3/4 = .75 -> 1 + 3; 5/2=2.5 -> 2 + 2 */
  alma_tensor_free_data(&out);
  /* opset 10 has no per-axis form */
  tn_make(&t, "QuantizeLinear", 10, 3, 1);
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_ERR_SHAPE);
  /* zero point shape must follow the scale */
  tn_make(&t, "QuantizeLinear", 13, 3, 1);
  in[2] = &Z;
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_ERR_SHAPE);
  /* wrong length along axis */
  in[1] = &S;
  in[2] = &Z;
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_ERR_SHAPE);
}

static void test_quantize_blocked(void **s) {
  (void)s;
  tnode t;
  /* x [2, 5], blocks of 2 along axis 1 -> scale [2, 3] (last block has 1 element) */
  float x[10] = {1, 2, 3, 4, 5, -1, -2, -3, -4, -5};
  float sc[6] = {1, 2, 4, 1, 0.5f, 0.25f};
  uint16_t zp[6] = {0, 1, 2, 100, 200, 300};
  alma_tensor X = TV(ALMA_DTYPE_FLOAT32, x, 2, 5), S = TV(ALMA_DTYPE_FLOAT32, sc, 2, 3), Z = TV(ALMA_DTYPE_UINT16, zp, 2, 3), out;
  alma_tensor *in[3] = {&X, &S, &Z};
  tn_make(&t, "QuantizeLinear", 21, 3, 1);
  attr_i(&t, "axis", 1);
  attr_i(&t, "block_size", 2);
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_OK);
  assert_int_equal(out.dtype, ALMA_DTYPE_UINT16);
  check_i64(&out, (int64_t[]){1, 2, 3, 3, 3, 99, 98, 194, 192, 280}, 10);
  alma_tensor_free_data(&out);
  /* block_size 3 makes the scale [2, 2]: shape mismatch */
  tn_make(&t, "QuantizeLinear", 21, 3, 1);
  attr_i(&t, "block_size", 3);
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_ERR_SHAPE);
  /* uint16 is not a quantized type before opset 21 */
  float s1 = 1;
  uint16_t z1 = 0;
  alma_tensor S1 = SCALAR(ALMA_DTYPE_FLOAT32, &s1), Z1 = SCALAR(ALMA_DTYPE_UINT16, &z1);
  in[1] = &S1;
  in[2] = &Z1;
  tn_make(&t, "QuantizeLinear", 19, 3, 1);
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_ERR_UNSUPPORTED);
}

static void test_quantize_output_dtype_and_half(void **s) {
  (void)s;
  tnode t;
  float x[3] = {-1.0f, 0.25f, 1000.0f}, sc = 0.5f;
  alma_tensor X = TV(ALMA_DTYPE_FLOAT32, x, 3), S = SCALAR(ALMA_DTYPE_FLOAT32, &sc), out;
  alma_tensor *in[3] = {&X, &S, NULL};
  tn_make(&t, "QuantizeLinear", 21, 2, 1);
  attr_i(&t, "output_dtype", ALMA_DTYPE_INT16);
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
  assert_int_equal(out.dtype, ALMA_DTYPE_INT16);
  check_i64(&out, (int64_t[]){-2, 0, 2000}, 3);
  alma_tensor_free_data(&out);
  /* output_dtype must agree with the zero point */
  uint8_t zp = 3;
  alma_tensor Z = SCALAR(ALMA_DTYPE_UINT8, &zp);
  in[2] = &Z;
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_ERR_INVALID_MODEL);
  /* float16 input and scale (opset 19) */
  uint16_t xh[3], sh = alma__f32_to_f16(0.5f);
  for (int i = 0; i < 3; i++) xh[i] = alma__f32_to_f16(x[i]);
  alma_tensor XH = TV(ALMA_DTYPE_FLOAT16, xh, 3), SH = SCALAR(ALMA_DTYPE_FLOAT16, &sh);
  in[0] = &XH;
  in[1] = &SH;
  tn_make(&t, "QuantizeLinear", 19, 3, 1);
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_OK);
  check_i64(&out, (int64_t[]){1, 3, 255}, 3);
  alma_tensor_free_data(&out);
  /* float16 input at opset 13 is not allowed */
  tn_make(&t, "QuantizeLinear", 13, 3, 1);
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_ERR_UNSUPPORTED);
}

/* ==== DequantizeLinear ======================================================================== */

static void test_dequantize(void **s) {
  (void)s;
  tnode t;
  uint8_t x[6] = {0, 10, 255, 3, 4, 5};
  float sc[3] = {0.5f, 2.0f, 1.0f};
  uint8_t zp[3] = {10, 0, 5};
  alma_tensor X = TV(ALMA_DTYPE_UINT8, x, 2, 3), S = TV(ALMA_DTYPE_FLOAT32, sc, 3), Z = TV(ALMA_DTYPE_UINT8, zp, 3), out;
  alma_tensor *in[3] = {&X, &S, &Z};
  tn_make(&t, "DequantizeLinear", 13, 3, 1);
  attr_i(&t, "axis", -1);
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_OK);
  assert_int_equal(out.dtype, ALMA_DTYPE_FLOAT32);
  check_f_abs(&out, (double[]){-5, 20, 250, -3.5, 8, 0}, 6, 0);
  alma_tensor_free_data(&out);
  /* zero point dtype must match x */
  int8_t zpi[3] = {0, 0, 0};
  alma_tensor ZI = TV(ALMA_DTYPE_INT8, zpi, 3);
  in[2] = &ZI;
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_ERR_TYPE);
  /* int32 input without zero point */
  int32_t xi[2] = {-1000, 7};
  float s1 = 0.25f;
  alma_tensor XI = TV(ALMA_DTYPE_INT32, xi, 2), S1 = SCALAR(ALMA_DTYPE_FLOAT32, &s1);
  alma_tensor *in2[2] = {&XI, &S1};
  tn_make(&t, "DequantizeLinear", 10, 2, 1);
  assert_int_equal(tn_exec(&t, in2, 2, &out, 1), ALMA_OK);
  check_f_abs(&out, (double[]){-250, 1.75}, 2, 0);
  alma_tensor_free_data(&out);
  /* float16 scale gives a float16 output (opset 19) */
  uint16_t sh = alma__f32_to_f16(0.25f);
  alma_tensor SH = SCALAR(ALMA_DTYPE_FLOAT16, &sh);
  in2[1] = &SH;
  tn_make(&t, "DequantizeLinear", 19, 2, 1);
  assert_int_equal(tn_exec(&t, in2, 2, &out, 1), ALMA_OK);
  assert_int_equal(out.dtype, ALMA_DTYPE_FLOAT16);
  check_f_abs(&out, (double[]){-250, 1.75}, 2, 0);
  alma_tensor_free_data(&out);
  tn_make(&t, "DequantizeLinear", 13, 2, 1);
  assert_int_equal(tn_exec(&t, in2, 2, &out, 1), ALMA_ERR_UNSUPPORTED);
}

/* The vector kernels (per tensor and per axis, float32 <-> uint8/int8/int32) against ONNX's
 * definitions computed element by element here: float32 division, round half to even
 * (nearbyint in the default mode), zero point, saturation; NaN gives 0 (alma's choice). Lengths
 * around the vector widths (16, 32) reach every loop and tail; ties at .5 come from
 * power-of-two scales, where x / scale is exact. */
static void test_quantize_vector_paths(void **s) {
  (void)s;
  static const int64_t lens[] = {1, 15, 16, 17, 31, 32, 33, 47, 64, 95, 301};
  const float specials[] = {INFINITY, -INFINITY, NAN, -0.0f, 1e30f, -1e30f, 127.5f, -128.5f, 255.5f};
  for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
    for (int u8 = 0; u8 < 2; u8++)
      for (int per_axis = 0; per_axis < 2; per_axis++) {
        int64_t L = lens[li], n = 2 * 3 * L;
        float *x = malloc((size_t)n * sizeof *x), sc[3] = {0.25f, 0.0371f, 2.0f};
        uint8_t zu[3] = {128, 3, 250};
        int8_t zs[3] = {-5, 0, 100};
        for (int64_t i = 0; i < n; i++) {
          float scl = per_axis ? sc[(i / L) % 3] : sc[0];
          uint32_t r = rnd();
          x[i] = r % 3 == 0 ? ((float)(int)(r % 600) - 300.0f + 0.5f) * scl /* ties (exact for powers of two) */
                            : rndf() * 200.0f * scl;
          if (r % 17 == 0) x[i] = specials[(r / 17) % 9];
        }
        tnode t;
        alma_tensor X = TV(ALMA_DTYPE_FLOAT32, x, 2, 3, L), S = per_axis ? TV(ALMA_DTYPE_FLOAT32, sc, 3) : SCALAR(ALMA_DTYPE_FLOAT32, sc);
        alma_tensor Z = per_axis ? TV(u8 ? ALMA_DTYPE_UINT8 : ALMA_DTYPE_INT8, u8 ? (void *)zu : (void *)zs, 3)
                                 : SCALAR(u8 ? ALMA_DTYPE_UINT8 : ALMA_DTYPE_INT8, u8 ? (void *)zu : (void *)zs);
        alma_tensor *in[3] = {&X, &S, &Z}, out, dq;
        tn_make(&t, "QuantizeLinear", 13, 3, 1);
        attr_i(&t, "axis", 1);
        assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_OK);
        for (int64_t i = 0; i < n; i++) {
          int64_t c = per_axis ? (i / L) % 3 : 0;
          int zp = u8 ? zu[c] : zs[c], lo = u8 ? 0 : -128, hi = u8 ? 255 : 127;
          float q = x[i] / sc[c];
          double r = isnan(q) ? 0 : nearbyint((double)q) + zp;
          int want = (int)(r < lo ? lo : r > hi ? hi : r);
          int got = u8 ? ((uint8_t *)out.data)[i] : ((int8_t *)out.data)[i];
          if (got != want) fail_msg("len %lld %s %s: element %lld (x %.9g, x/s %.9g) gave %d, want %d", (long long)L,
                                    u8 ? "u8" : "s8", per_axis ? "per axis" : "per tensor", (long long)i, x[i], q, got, want);
        }
        /* and back: the quantized values dequantized, (x - zp) * scale in float32 */
        alma_tensor *in2[3] = {&out, &S, &Z};
        tn_make(&t, "DequantizeLinear", 13, 3, 1);
        attr_i(&t, "axis", 1);
        assert_int_equal(tn_exec(&t, in2, 3, &dq, 1), ALMA_OK);
        for (int64_t i = 0; i < n; i++) {
          int64_t c = per_axis ? (i / L) % 3 : 0;
          int v = u8 ? ((uint8_t *)out.data)[i] : ((int8_t *)out.data)[i], zp = u8 ? zu[c] : zs[c];
          float want = ((float)v - (float)zp) * sc[c];
          if (memcmp(&((float *)dq.data)[i], &want, 4))
            fail_msg("dequantize len %lld element %lld: %.9g, want %.9g", (long long)L, (long long)i,
                     ((float *)dq.data)[i], want);
        }
        alma_tensor_free_data(&out);
        alma_tensor_free_data(&dq);
        free(x);
      }
  /* int32 through the vector path: conversions that round (|x| > 2^24) */
  int32_t xi[37];
  for (int i = 0; i < 37; i++) xi[i] = (int32_t)((int64_t)rnd() * 100 - (i % 2 ? 1000000000 : 0));
  xi[5] = INT32_MAX;
  xi[6] = INT32_MIN;
  xi[7] = (1 << 24) + 1;
  float s3 = 0.1f;
  alma_tensor XI = TV(ALMA_DTYPE_INT32, xi, 37), S3 = SCALAR(ALMA_DTYPE_FLOAT32, &s3), out;
  alma_tensor *in3[2] = {&XI, &S3};
  tnode t;
  tn_make(&t, "DequantizeLinear", 13, 2, 1);
  assert_int_equal(tn_exec(&t, in3, 2, &out, 1), ALMA_OK);
  for (int i = 0; i < 37; i++) {
    float want = ((float)xi[i] - 0.0f) * s3;
    if (memcmp(&((float *)out.data)[i], &want, 4)) fail_msg("int32 element %d: %.9g, want %.9g", i, ((float *)out.data)[i], want);
  }
  alma_tensor_free_data(&out);
}

static void test_dequantize_blocked(void **s) {
  (void)s;
  tnode t;
  /* x [4, 2], blocks of 3 along axis 0 -> scale [2, 2] */
  int16_t x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  float sc[4] = {1, 10, 100, 1000};
  int16_t zp[4] = {1, 0, 0, 8};
  alma_tensor X = TV(ALMA_DTYPE_INT16, x, 4, 2), S = TV(ALMA_DTYPE_FLOAT32, sc, 2, 2), Z = TV(ALMA_DTYPE_INT16, zp, 2, 2), out;
  alma_tensor *in[3] = {&X, &S, &Z};
  tn_make(&t, "DequantizeLinear", 21, 3, 1);
  attr_i(&t, "axis", 0);
  attr_i(&t, "block_size", 3);
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_OK);
  check_f_abs(&out, (double[]){0, 20, 2, 40, 4, 60, 700, 0}, 8, 0);
  alma_tensor_free_data(&out);
  /* int16 is not a dequantizable type before opset 21 */
  tn_make(&t, "DequantizeLinear", 19, 3, 1);
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_ERR_UNSUPPORTED);
}

/* ==== DynamicQuantizeLinear =================================================================== */

static void test_dynamic_quantize(void **s) {
  (void)s;
  tnode t;
  float z[4] = {0, 0, 0, 0};
  alma_tensor X = TV(ALMA_DTYPE_FLOAT32, z, 4), out[3];
  alma_tensor *in[1] = {&X};
  tn_make(&t, "DynamicQuantizeLinear", 11, 1, 3);
  assert_int_equal(tn_exec(&t, in, 1, out, 3), ALMA_OK);
  check_i64(&out[0], (int64_t[]){0, 0, 0, 0}, 4);
  assert_float_equal(*(float *)out[1].data, 1.0f, 0);
  assert_int_equal(*(uint8_t *)out[2].data, 0);
  assert_int_equal(out[1].rank, 0);
  free_outs(out, 3);
  /* all negative: max is 0, zero point 255 */
  float neg[3] = {-2.55f, -1.0f, -0.01f};
  alma_tensor XN = TV(ALMA_DTYPE_FLOAT32, neg, 3);
  in[0] = &XN;
  assert_int_equal(tn_exec(&t, in, 1, out, 3), ALMA_OK);
  assert_float_equal(*(float *)out[1].data, 2.55f / 255.0f, 1e-9);
  assert_int_equal(*(uint8_t *)out[2].data, 255);
  check_i64(&out[0], (int64_t[]){0, 155, 254}, 3);
  free_outs(out, 3);
  /* 37 values (the vector loops and their tails): the range, NaN skipped and quantized to 0,
   * half steps rounded to even, as the definition computed here */
  float v[37];
  for (int i = 0; i < 37; i++) v[i] = (float)(i - 10) * 0.5f;
  v[3] = NAN;
  v[36] = -7.0f; /* the minimum, in the scalar tail */
  alma_tensor XV = TV(ALMA_DTYPE_FLOAT32, v, 37);
  in[0] = &XV;
  assert_int_equal(tn_exec(&t, in, 1, out, 3), ALMA_OK);
  float sc = (12.5f - -7.0f) / 255.0f; /* max v[35] = 12.5 */
  assert_float_equal(*(float *)out[1].data, sc, 0);
  uint8_t zp = *(uint8_t *)out[2].data;
  assert_int_equal(zp, (int)nearbyint(7.0f / sc));
  for (int i = 0; i < 37; i++) {
    float q = v[i] / sc;
    double r = i == 3 ? 0 : nearbyint(q) + zp;
    assert_int_equal(((uint8_t *)out[0].data)[i], (int)(r < 0 ? 0 : r > 255 ? 255 : r));
  }
  free_outs(out, 3);
}

/* ==== MatMulInteger / QLinearMatMul =========================================================== */

/* naive [B?, M, K] x [K, N] with per-row / per-column zero points */
static void ref_mm(const int32_t *a, const int32_t *b, int64_t M, int64_t K, int64_t N, const int32_t *azp,
                   const int32_t *bzp, int64_t *out) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      int64_t acc = 0;
      for (int64_t k = 0; k < K; k++) acc += (int64_t)(a[i * K + k] - azp[i]) * (b[k * N + j] - bzp[j]);
      out[i * N + j] = acc;
    }
}

static void test_matmulinteger_per_row_col(void **s) {
  (void)s;
  tnode t;
  enum { Bt = 2, M = 3, K = 4, N = 5 };
  uint8_t a[Bt * M * K];
  int8_t b[K * N];
  uint8_t azp[M] = {1, 100, 255};
  int8_t bzp[N] = {-128, 0, 5, 127, -1};
  for (int i = 0; i < Bt * M * K; i++) a[i] = (uint8_t)(rnd() & 255);
  for (int i = 0; i < K * N; i++) b[i] = (int8_t)(rnd() & 255);
  alma_tensor A = TV(ALMA_DTYPE_UINT8, a, Bt, M, K), B = TV(ALMA_DTYPE_INT8, b, K, N);
  alma_tensor AZ = TV(ALMA_DTYPE_UINT8, azp, M), BZ = TV(ALMA_DTYPE_INT8, bzp, N), out;
  alma_tensor *in[4] = {&A, &B, &AZ, &BZ};
  tn_make(&t, "MatMulInteger", 10, 4, 1);
  assert_int_equal(tn_exec(&t, in, 4, &out, 1), ALMA_OK);
  assert_int_equal(out.dtype, ALMA_DTYPE_INT32);
  check_shape(&out, 3, (int64_t[]){Bt, M, N});
  int64_t want[Bt * M * N];
  int32_t ai[Bt * M * K], bi[K * N], az[M], bz[N];
  for (int i = 0; i < Bt * M * K; i++) ai[i] = a[i];
  for (int i = 0; i < K * N; i++) bi[i] = b[i];
  for (int i = 0; i < M; i++) az[i] = azp[i];
  for (int i = 0; i < N; i++) bz[i] = bzp[i];
  for (int bt = 0; bt < Bt; bt++) ref_mm(ai + bt * M * K, bi, M, K, N, az, bz, want + bt * M * N);
  check_i64(&out, want, Bt * M * N);
  alma_tensor_free_data(&out);

  /* N-D zero point [Bt, M, 1]: a different zero point per batch and row */
  uint8_t azp3[Bt * M] = {0, 1, 2, 3, 4, 5};
  alma_tensor AZ3 = TV(ALMA_DTYPE_UINT8, azp3, Bt, M, 1);
  in[2] = &AZ3;
  in[3] = NULL;
  assert_int_equal(tn_exec(&t, in, 4, &out, 1), ALMA_OK);
  int32_t zero[N] = {0};
  for (int bt = 0; bt < Bt; bt++) {
    for (int i = 0; i < M; i++) az[i] = azp3[bt * M + i];
    ref_mm(ai + bt * M * K, bi, M, K, N, az, zero, want + bt * M * N);
  }
  check_i64(&out, want, Bt * M * N);
  alma_tensor_free_data(&out);

  /* a 1-D vector times b, and bad zero point shapes */
  alma_tensor AV = TV(ALMA_DTYPE_UINT8, a, K);
  alma_tensor *in2[2] = {&AV, &B};
  assert_int_equal(tn_exec(&t, in2, 2, &out, 1), ALMA_OK);
  check_shape(&out, 1, (int64_t[]){N});
  for (int i = 0; i < M; i++) az[i] = 0;
  ref_mm(ai, bi, 1, K, N, az, zero, want);
  check_i64(&out, want, N);
  alma_tensor_free_data(&out);
  uint8_t badz[2] = {0, 0};
  alma_tensor BADZ = TV(ALMA_DTYPE_UINT8, badz, 2);
  in[2] = &BADZ;
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_ERR_SHAPE);
  alma_tensor B2 = TV(ALMA_DTYPE_INT8, b, N, K);
  in[1] = &B2;
  in[2] = NULL;
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_ERR_SHAPE);
}

static void test_qlinearmatmul_per_row_col(void **s) {
  (void)s;
  tnode t;
  enum { M = 2, K = 3, N = 2 };
  int8_t a[M * K] = {10, -20, 30, 127, -128, 0};
  uint8_t b[K * N] = {0, 255, 128, 10, 200, 50};
  float as[M] = {0.1f, 0.02f}, bs[N] = {0.05f, 0.01f}, ys = 0.2f;
  int8_t az[M] = {0, -5}, yz = 3;
  uint8_t bz[N] = {128, 0};
  alma_tensor A = TV(ALMA_DTYPE_INT8, a, M, K), AS = TV(ALMA_DTYPE_FLOAT32, as, M), AZ = TV(ALMA_DTYPE_INT8, az, M);
  alma_tensor B = TV(ALMA_DTYPE_UINT8, b, K, N), BS = TV(ALMA_DTYPE_FLOAT32, bs, 1, N), BZ = TV(ALMA_DTYPE_UINT8, bz, 1, N);
  alma_tensor YS = SCALAR(ALMA_DTYPE_FLOAT32, &ys), YZ = SCALAR(ALMA_DTYPE_INT8, &yz), out;
  alma_tensor *in[8] = {&A, &AS, &AZ, &B, &BS, &BZ, &YS, &YZ};
  tn_make(&t, "QLinearMatMul", 10, 8, 1);
  assert_int_equal(tn_exec(&t, in, 8, &out, 1), ALMA_OK);
  assert_int_equal(out.dtype, ALMA_DTYPE_INT8);
  int64_t want[M * N];
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      int64_t acc = 0;
      for (int k = 0; k < K; k++) acc += (int64_t)(a[i * K + k] - az[i]) * (b[k * N + j] - bz[j]);
      float mult = as[i] * bs[j] / ys;
      double v = nearbyint((double)acc * mult + yz);
      want[i * N + j] = v < -128 ? -128 : v > 127 ? 127 : (int64_t)v;
    }
  check_i64(&out, want, M * N);
  alma_tensor_free_data(&out);
  /* float16 scales only from opset 21 */
  uint16_t h = alma__f32_to_f16(0.5f);
  alma_tensor HS = SCALAR(ALMA_DTYPE_FLOAT16, &h);
  in[1] = in[4] = in[6] = &HS;
  in[2] = in[5] = NULL;
  assert_int_equal(tn_exec(&t, in, 8, &out, 1), ALMA_ERR_UNSUPPORTED);
  tn_make(&t, "QLinearMatMul", 21, 8, 1);
  assert_int_equal(tn_exec(&t, in, 8, &out, 1), ALMA_OK);
  alma_tensor_free_data(&out);
}

/* The ONNX node test test_qlinearmatmul_2D_int8_float32 expects 20 where the exact result is -236:
 * its data wraps around instead of saturating as the spec (and ONNX's own reference) says. alma
 * saturates; this pins that decision. */
static void test_qlinearmatmul_saturates(void **s) {
  (void)s;
  tnode t;
  int8_t a[8] = {81, 109, -127, 111, -124, 87, -128, -98}, az = -14, bz = -13, yz = -9;
  int8_t b[12] = {25, -76, 117, -67, -101, -128, -127, 0, 119, 0, 127, 120};
  float as = 0.0066f, bs = 0.00705f, ys = 0.0107f;
  alma_tensor A = TV(ALMA_DTYPE_INT8, a, 2, 4), AS = TV(ALMA_DTYPE_FLOAT32, &as, 1), AZ = TV(ALMA_DTYPE_INT8, &az, 1);
  alma_tensor B = TV(ALMA_DTYPE_INT8, b, 4, 3), BS = TV(ALMA_DTYPE_FLOAT32, &bs, 1), BZ = TV(ALMA_DTYPE_INT8, &bz, 1);
  alma_tensor YS = TV(ALMA_DTYPE_FLOAT32, &ys, 1), YZ = TV(ALMA_DTYPE_INT8, &yz, 1), out;
  alma_tensor *in[8] = {&A, &AS, &AZ, &B, &BS, &BZ, &YS, &YZ};
  tn_make(&t, "QLinearMatMul", 21, 8, 1);
  assert_int_equal(tn_exec(&t, in, 8, &out, 1), ALMA_OK);
  check_i64(&out, (int64_t[]){41, -12, -9, 1, -75, -128}, 6);
  alma_tensor_free_data(&out);
}

/* The integer products run on the float GEMM in chunks of 256 along K, exact because every chunk's
 * sum stays below 2^24 (quant.c, igemm_exact): the extremes, 255 * 255 products on a deep K, a
 * random deep K against the naive loop, and ONNX's int32 wrap-around beyond 2^31. */
static void test_matmulinteger_deep_exact(void **s) {
  (void)s;
  tnode t;
  enum { M = 3, K = 1000, N = 4, KW = 33100 };
  static uint8_t a[M * K], aw[KW];
  static int8_t b[K * N], bw[KW];
  uint8_t azp = 0;
  int8_t bzp = 127;
  for (int i = 0; i < M * K; i++) a[i] = i < K ? 255 : (uint8_t)(rnd() & 255);
  for (int i = 0; i < K * N; i++) b[i] = i % N == 0 ? -128 : (int8_t)(rnd() & 255);
  alma_tensor A = TV(ALMA_DTYPE_UINT8, a, M, K), B = TV(ALMA_DTYPE_INT8, b, K, N);
  alma_tensor AZ = SCALAR(ALMA_DTYPE_UINT8, &azp), BZ = SCALAR(ALMA_DTYPE_INT8, &bzp), out;
  alma_tensor *in[4] = {&A, &B, &AZ, &BZ};
  tn_make(&t, "MatMulInteger", 10, 4, 1);
  assert_int_equal(tn_exec(&t, in, 4, &out, 1), ALMA_OK);
  static int32_t ai[M * K], bi[K * N];
  int64_t want[M * N];
  int32_t az[M] = {0, 0, 0}, bz[N] = {127, 127, 127, 127};
  for (int i = 0; i < M * K; i++) ai[i] = a[i];
  for (int i = 0; i < K * N; i++) bi[i] = b[i];
  ref_mm(ai, bi, M, K, N, az, bz, want);
  assert_int_equal(want[0], -65025LL * K); /* row 0, column 0: 255 * (-128 - 127), K times */
  check_i64(&out, want, M * N);
  alma_tensor_free_data(&out);
  /* 33100 products of 255 * 255 overflow int32: the result wraps */
  for (int i = 0; i < KW; i++) aw[i] = 255, bw[i] = -128;
  alma_tensor AW = TV(ALMA_DTYPE_UINT8, aw, 1, KW), BW = TV(ALMA_DTYPE_INT8, bw, KW, 1);
  in[0] = &AW;
  in[1] = &BW;
  assert_int_equal(tn_exec(&t, in, 4, &out, 1), ALMA_OK);
  assert_int_equal(((int32_t *)out.data)[0], (int32_t)(uint32_t)(uint64_t)(-65025LL * KW));
  alma_tensor_free_data(&out);
}

/* ==== ConvInteger / QLinearConv =============================================================== */

/* Direct 2-D convolution of zero-point-shifted data; pads given explicitly. */
static void ref_conv2d(const int32_t *x, int N, int C, int H, int W, const int32_t *w, int M, int KH, int KW, int group,
                       int sh, int sw, int dh, int dw, int pt, int pl, int OH, int OW, int64_t *out) {
  int Cg = C / group, Mg = M / group;
  for (int n = 0; n < N; n++)
    for (int m = 0; m < M; m++)
      for (int oh = 0; oh < OH; oh++)
        for (int ow = 0; ow < OW; ow++) {
          int64_t acc = 0;
          int g = m / Mg;
          for (int c = 0; c < Cg; c++)
            for (int kh = 0; kh < KH; kh++)
              for (int kw = 0; kw < KW; kw++) {
                int ih = oh * sh - pt + kh * dh, iw = ow * sw - pl + kw * dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += (int64_t)x[((n * C + g * Cg + c) * H + ih) * W + iw] * w[((m * Cg + c) * KH + kh) * KW + kw];
              }
          out[((n * M + m) * OH + oh) * OW + ow] = acc;
        }
}

static void test_convinteger_group_stride_pads(void **s) {
  (void)s;
  tnode t;
  enum { N = 2, C = 4, H = 5, W = 6, M = 6, G = 2, KH = 3, KW = 2 };
  uint8_t x[N * C * H * W];
  int8_t w[M * (C / G) * KH * KW];
  int8_t wzp[M] = {0, 1, -1, 2, -2, 3};
  uint8_t xzp = 7;
  for (size_t i = 0; i < sizeof x; i++) x[i] = (uint8_t)(rnd() & 255);
  for (size_t i = 0; i < sizeof w; i++) w[i] = (int8_t)(rnd() & 255);
  int32_t xs[N * C * H * W], ws[sizeof w];
  for (size_t i = 0; i < sizeof x; i++) xs[i] = x[i] - xzp;
  for (size_t i = 0; i < sizeof w; i++) ws[i] = w[i] - wzp[i / ((C / G) * KH * KW)];
  alma_tensor X = TV(ALMA_DTYPE_UINT8, x, N, C, H, W), Wt = TV(ALMA_DTYPE_INT8, w, M, C / G, KH, KW);
  alma_tensor XZ = SCALAR(ALMA_DTYPE_UINT8, &xzp), WZ = TV(ALMA_DTYPE_INT8, wzp, M), out;
  alma_tensor *in[4] = {&X, &Wt, &XZ, &WZ};
  static int64_t want[N * M * 64];

  /* explicit asymmetric pads, strides 2x1, dilations 2x1 */
  int64_t pads[4] = {1, 0, 2, 1}, strides[2] = {2, 1}, dil[2] = {2, 1};
  tn_make(&t, "ConvInteger", 10, 4, 1);
  attr_i(&t, "group", G);
  attr_ints(&t, "pads", pads, 4);
  attr_ints(&t, "strides", strides, 2);
  attr_ints(&t, "dilations", dil, 2);
  assert_int_equal(tn_exec(&t, in, 4, &out, 1), ALMA_OK);
  /* OH = (5 + 3 - 5) / 2 + 1 = 2, OW = (6 + 1 - 2) / 1 + 1 = 6 */
  check_shape(&out, 4, (int64_t[]){N, M, 2, 6});
  ref_conv2d(xs, N, C, H, W, ws, M, KH, KW, G, 2, 1, 2, 1, 1, 0, 2, 6, want);
  check_i64(&out, want, N * M * 2 * 6);
  alma_tensor_free_data(&out);

  /* SAME_UPPER / SAME_LOWER with stride 1: total pad KH-1 = 2 (rows), KW-1 = 1 (cols) */
  const char *modes[2] = {"SAME_UPPER", "SAME_LOWER"};
  for (int mi = 0; mi < 2; mi++) {
    tn_make(&t, "ConvInteger", 10, 4, 1);
    attr_i(&t, "group", G);
    attr_s(&t, "auto_pad", modes[mi]);
    assert_int_equal(tn_exec(&t, in, 4, &out, 1), ALMA_OK);
    check_shape(&out, 4, (int64_t[]){N, M, H, W});
    ref_conv2d(xs, N, C, H, W, ws, M, KH, KW, G, 1, 1, 1, 1, 1, mi == 0 ? 0 : 1, H, W, want);
    check_i64(&out, want, N * M * H * W);
    alma_tensor_free_data(&out);
  }
  /* VALID */
  tn_make(&t, "ConvInteger", 10, 4, 1);
  attr_i(&t, "group", G);
  attr_s(&t, "auto_pad", "VALID");
  assert_int_equal(tn_exec(&t, in, 4, &out, 1), ALMA_OK);
  check_shape(&out, 4, (int64_t[]){N, M, 3, 5});
  ref_conv2d(xs, N, C, H, W, ws, M, KH, KW, G, 1, 1, 1, 1, 0, 0, 3, 5, want);
  check_i64(&out, want, N * M * 3 * 5);
  alma_tensor_free_data(&out);

  /* errors: group that does not divide, kernel_shape disagreeing, bad auto_pad */
  tn_make(&t, "ConvInteger", 10, 4, 1);
  attr_i(&t, "group", 3);
  assert_int_equal(tn_exec(&t, in, 4, &out, 1), ALMA_ERR_SHAPE);
  tn_make(&t, "ConvInteger", 10, 4, 1);
  attr_i(&t, "group", G);
  int64_t ks[2] = {3, 3};
  attr_ints(&t, "kernel_shape", ks, 2);
  assert_int_equal(tn_exec(&t, in, 4, &out, 1), ALMA_ERR_SHAPE);
  tn_make(&t, "ConvInteger", 10, 4, 1);
  attr_i(&t, "group", G);
  attr_s(&t, "auto_pad", "SAME");
  assert_int_equal(tn_exec(&t, in, 4, &out, 1), ALMA_ERR_INVALID_MODEL);
}

static void test_convinteger_deep_exact(void **s) {
  (void)s;
  tnode t;
  enum { N = 1, C = 64, H = 4, W = 5, M = 4, G = 2, KH = 3, KW = 3 }; /* 32 * 9 = 288 > 256 per group */
  static uint8_t x[N * C * H * W];
  static int8_t w[M * (C / G) * KH * KW];
  uint8_t xzp = 0;
  int8_t wzp = -128;
  for (size_t i = 0; i < sizeof x; i++) x[i] = i % 3 ? (uint8_t)(rnd() & 255) : 255;
  for (size_t i = 0; i < sizeof w; i++) w[i] = i % 2 ? (int8_t)(rnd() & 255) : 127;
  static int32_t xs[sizeof x], ws[sizeof w];
  for (size_t i = 0; i < sizeof x; i++) xs[i] = x[i] - xzp;
  for (size_t i = 0; i < sizeof w; i++) ws[i] = w[i] - wzp;
  alma_tensor X = TV(ALMA_DTYPE_UINT8, x, N, C, H, W), Wt = TV(ALMA_DTYPE_INT8, w, M, C / G, KH, KW);
  alma_tensor XZ = SCALAR(ALMA_DTYPE_UINT8, &xzp), WZ = SCALAR(ALMA_DTYPE_INT8, &wzp), out;
  alma_tensor *in[4] = {&X, &Wt, &XZ, &WZ};
  int64_t pads[4] = {1, 1, 1, 1};
  tn_make(&t, "ConvInteger", 10, 4, 1);
  attr_i(&t, "group", G);
  attr_ints(&t, "pads", pads, 4);
  assert_int_equal(tn_exec(&t, in, 4, &out, 1), ALMA_OK);
  static int64_t want[N * M * H * W];
  ref_conv2d(xs, N, C, H, W, ws, M, KH, KW, G, 1, 1, 1, 1, 1, 1, H, W, want);
  check_i64(&out, want, N * M * H * W);
  alma_tensor_free_data(&out);
}

static void test_convinteger_1d_3d(void **s) {
  (void)s;
  tnode t;
  /* 1-D: x [1, 1, 5], w [1, 1, 2] */
  int8_t x[5] = {1, 2, 3, 4, 5}, w[2] = {1, -1};
  alma_tensor X = TV(ALMA_DTYPE_INT8, x, 1, 1, 5), Wt = TV(ALMA_DTYPE_INT8, w, 1, 1, 2), out;
  alma_tensor *in[2] = {&X, &Wt};
  tn_make(&t, "ConvInteger", 10, 2, 1);
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
  check_i64(&out, (int64_t[]){-1, -1, -1, -1}, 4);
  alma_tensor_free_data(&out);
  /* 3-D: x [1, 1, 2, 2, 2] all ones, w [1, 1, 2, 2, 2] all twos -> 16 */
  int8_t x3[8] = {1, 1, 1, 1, 1, 1, 1, 1}, w3[8] = {2, 2, 2, 2, 2, 2, 2, 2};
  alma_tensor X3 = TV(ALMA_DTYPE_INT8, x3, 1, 1, 2, 2, 2), W3 = TV(ALMA_DTYPE_INT8, w3, 1, 1, 2, 2, 2);
  in[0] = &X3;
  in[1] = &W3;
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
  check_shape(&out, 5, (int64_t[]){1, 1, 1, 1, 1});
  check_i64(&out, (int64_t[]){16}, 1);
  alma_tensor_free_data(&out);
}

static void test_qlinearconv_per_channel_bias(void **s) {
  (void)s;
  tnode t;
  enum { N = 1, C = 3, H = 4, W = 4, M = 2, K = 3 };
  int8_t x[N * C * H * W], w[M * C * K * K];
  for (size_t i = 0; i < sizeof x; i++) x[i] = (int8_t)(rnd() & 255);
  for (size_t i = 0; i < sizeof w; i++) w[i] = (int8_t)(rnd() & 255);
  float xs = 0.05f, wsc[M] = {0.01f, 0.002f}, ys = 0.3f;
  int8_t xz = -3, wz[M] = {0, 4}, yz = -10;
  int32_t bias[M] = {1000, -70000};
  alma_tensor X = TV(ALMA_DTYPE_INT8, x, N, C, H, W), XS = SCALAR(ALMA_DTYPE_FLOAT32, &xs), XZ = SCALAR(ALMA_DTYPE_INT8, &xz);
  alma_tensor Wt = TV(ALMA_DTYPE_INT8, w, M, C, K, K), WS = TV(ALMA_DTYPE_FLOAT32, wsc, M), WZ = TV(ALMA_DTYPE_INT8, wz, M);
  alma_tensor YS = SCALAR(ALMA_DTYPE_FLOAT32, &ys), YZ = SCALAR(ALMA_DTYPE_INT8, &yz), Bt = TV(ALMA_DTYPE_INT32, bias, M), out;
  alma_tensor *in[9] = {&X, &XS, &XZ, &Wt, &WS, &WZ, &YS, &YZ, &Bt};
  int64_t pads[4] = {1, 1, 1, 1};
  tn_make(&t, "QLinearConv", 10, 9, 1);
  attr_ints(&t, "pads", pads, 4);
  assert_int_equal(tn_exec(&t, in, 9, &out, 1), ALMA_OK);
  assert_int_equal(out.dtype, ALMA_DTYPE_INT8);
  check_shape(&out, 4, (int64_t[]){N, M, H, W});
  int32_t xsh[sizeof x], wsh[sizeof w];
  for (size_t i = 0; i < sizeof x; i++) xsh[i] = x[i] - xz;
  for (size_t i = 0; i < sizeof w; i++) wsh[i] = w[i] - wz[i / (C * K * K)];
  int64_t acc[N * M * H * W], want[N * M * H * W];
  ref_conv2d(xsh, N, C, H, W, wsh, M, K, K, 1, 1, 1, 1, 1, 1, 1, H, W, acc);
  for (int m = 0; m < M; m++)
    for (int p = 0; p < H * W; p++) {
      float mult = xs * wsc[m] / ys;
      double v = nearbyint((double)(acc[m * H * W + p] + bias[m]) * mult + yz);
      want[m * H * W + p] = v < -128 ? -128 : v > 127 ? 127 : (int64_t)v;
    }
  check_i64(&out, want, N * M * H * W);
  alma_tensor_free_data(&out);
  /* bias of the wrong length */
  alma_tensor B1 = TV(ALMA_DTYPE_INT32, bias, 1);
  in[8] = &B1;
  assert_int_equal(tn_exec(&t, in, 9, &out, 1), ALMA_ERR_SHAPE);
}

/* ==== LSTM / GRU ============================================================================== */

typedef double (*act_fn)(double x, double a, double b);
static double a_sigmoid(double x, double a, double b) { (void)a, (void)b; return 1 / (1 + exp(-x)); }
static double a_tanh(double x, double a, double b) { (void)a, (void)b; return tanh(x); }
static double a_hardsig(double x, double a, double b) { double y = a * x + b; return y < 0 ? 0 : y > 1 ? 1 : y; }
static double a_leaky(double x, double a, double b) { (void)b; return x >= 0 ? x : a * x; }
static double a_affine(double x, double a, double b) { return a * x + b; }

typedef struct {
  act_fn f, g, h;
  double fa, fb, ga, gb, ha, hb;
  double clip; /* 0: none */
  int input_forget, lbr;
} ref_opts;

static double clipv(const ref_opts *o, double v) {
  return o->clip > 0 ? (v < -o->clip ? -o->clip : v > o->clip ? o->clip : v) : v;
}

/* One direction of an LSTM (G = 4) or GRU (G = 3), layout 0, step by step in double.
 * X [S, B, I]; W [G*H, I]; R [G*H, H]; Bv [2*G*H] or NULL; P [3H] or NULL; h, c [B, H] in/out;
 * Y [S, ndir, B, H] at direction slot d (NULL to skip). */
static void ref_rnn(int lstm, int S, int Bn, int I, int H, const float *X, const float *W, const float *R,
                    const float *Bv, const float *P, const int *lens, int backwards, const ref_opts *o, double *h, double *c,
                    double *Y, int ndir, int d) {
  int G = lstm ? 4 : 3;
  double *gt = calloc((size_t)(G * H), sizeof *gt), *hn = calloc((size_t)H, sizeof *hn);
  for (int b = 0; b < Bn; b++) {
    int len = lens ? lens[b] : S;
    for (int s = 0; s < len; s++) {
      int t = backwards ? len - 1 - s : s;
      double *hb = h + b * H, *cb = c ? c + b * H : NULL;
      for (int j = 0; j < G * H; j++) {
        double v = Bv ? Bv[j] : 0;
        for (int k = 0; k < I; k++) v += (double)X[(t * Bn + b) * I + k] * W[j * I + k];
        gt[j] = v;
      }
      if (lstm) {
        for (int j = 0; j < 4 * H; j++) {
          gt[j] += Bv ? Bv[4 * H + j] : 0;
          for (int k = 0; k < H; k++) gt[j] += hb[k] * R[j * H + k];
        }
        for (int k = 0; k < H; k++) {
          double gi = gt[k] + (P ? P[k] * cb[k] : 0), gf = gt[2 * H + k] + (P ? P[2 * H + k] * cb[k] : 0);
          double i = o->f(clipv(o, gi), o->fa, o->fb);
          double f = o->input_forget ? 1 - i : o->f(clipv(o, gf), o->fa, o->fb);
          double cc = o->g(clipv(o, gt[3 * H + k]), o->ga, o->gb);
          cb[k] = f * cb[k] + i * cc;
          double oo = o->f(clipv(o, gt[H + k] + (P ? P[H + k] * cb[k] : 0)), o->fa, o->fb);
          hn[k] = oo * o->h(cb[k], o->ha, o->hb);
        }
      } else {
        for (int k = 0; k < H; k++) {
          double rz = Bv ? Bv[3 * H + k] : 0, rr = Bv ? Bv[4 * H + k] : 0, rh = Bv ? Bv[5 * H + k] : 0;
          for (int m = 0; m < H; m++) {
            rz += hb[m] * R[k * H + m];
            rr += hb[m] * R[(H + k) * H + m];
          }
          double z = o->f(clipv(o, gt[k] + rz), o->fa, o->fb);
          double r = o->f(clipv(o, gt[H + k] + rr), o->fa, o->fb);
          double hh;
          if (o->lbr) {
            for (int m = 0; m < H; m++) rh += hb[m] * R[(2 * H + k) * H + m];
            hh = gt[2 * H + k] + r * rh;
          } else {
            /* (r . h) R_h^T: needs every r, so recompute them here */
            double acc = rh;
            for (int m = 0; m < H; m++) {
              double rrm = Bv ? Bv[4 * H + m] : 0;
              for (int q = 0; q < H; q++) rrm += hb[q] * R[(H + m) * H + q];
              double rm = o->f(clipv(o, gt[H + m] + rrm), o->fa, o->fb);
              acc += rm * hb[m] * R[(2 * H + k) * H + m];
            }
            hh = gt[2 * H + k] + acc;
          }
          double hc = o->g(clipv(o, hh), o->ga, o->gb);
          hn[k] = (1 - z) * hc + z * hb[k];
        }
      }
      memcpy(hb, hn, (size_t)H * sizeof *hn);
      if (Y) memcpy(Y + ((t * ndir + d) * Bn + b) * H, hb, (size_t)H * sizeof *hb);
    }
  }
  free(gt);
  free(hn);
}

static float *rand_buf(int64_t n, float scale) {
  float *p = malloc((size_t)n * sizeof *p);
  for (int64_t i = 0; i < n; i++) p[i] = rndf() * scale;
  return p;
}

static const ref_opts std_lstm = {a_sigmoid, a_tanh, a_tanh, 0, 0, 0, 0, 0, 0, 0, 0, 0};

/* Bidirectional LSTM with every optional input, sequence lengths and layout 0 or 1. */
static void lstm_case(int layout, int opset) {
  tnode t;
  enum { S = 4, Bn = 3, I = 2, H = 3, D = 2 };
  float *X = rand_buf(S * Bn * I, 1), *W = rand_buf(D * 4 * H * I, 0.8f), *R = rand_buf(D * 4 * H * H, 0.8f);
  float *Bv = rand_buf(D * 8 * H, 0.5f), *P = rand_buf(D * 3 * H, 0.5f), *h0 = rand_buf(D * Bn * H, 0.5f);
  float *c0 = rand_buf(D * Bn * H, 0.5f);
  int32_t lens[Bn] = {4, 2, 0};
  int rl[Bn] = {4, 2, 0};
  /* layout 1 inputs are the transposes */
  float Xl[S * Bn * I], h0l[D * Bn * H], c0l[D * Bn * H];
  for (int s = 0; s < S; s++)
    for (int b = 0; b < Bn; b++)
      for (int k = 0; k < I; k++) Xl[(b * S + s) * I + k] = X[(s * Bn + b) * I + k];
  for (int d = 0; d < D; d++)
    for (int b = 0; b < Bn; b++)
      for (int k = 0; k < H; k++) {
        h0l[(b * D + d) * H + k] = h0[(d * Bn + b) * H + k];
        c0l[(b * D + d) * H + k] = c0[(d * Bn + b) * H + k];
      }
  alma_tensor tX = layout ? TV(ALMA_DTYPE_FLOAT32, Xl, Bn, S, I) : TV(ALMA_DTYPE_FLOAT32, X, S, Bn, I);
  alma_tensor tW = TV(ALMA_DTYPE_FLOAT32, W, D, 4 * H, I), tR = TV(ALMA_DTYPE_FLOAT32, R, D, 4 * H, H);
  alma_tensor tB = TV(ALMA_DTYPE_FLOAT32, Bv, D, 8 * H), tL = TV(ALMA_DTYPE_INT32, lens, Bn);
  alma_tensor th = layout ? TV(ALMA_DTYPE_FLOAT32, h0l, Bn, D, H) : TV(ALMA_DTYPE_FLOAT32, h0, D, Bn, H);
  alma_tensor tc = layout ? TV(ALMA_DTYPE_FLOAT32, c0l, Bn, D, H) : TV(ALMA_DTYPE_FLOAT32, c0, D, Bn, H);
  alma_tensor tP = TV(ALMA_DTYPE_FLOAT32, P, D, 3 * H), out[3];
  alma_tensor *in[8] = {&tX, &tW, &tR, &tB, &tL, &th, &tc, &tP};
  tn_make(&t, "LSTM", opset, 8, 3);
  attr_s(&t, "direction", "bidirectional");
  attr_i(&t, "hidden_size", H);
  if (layout) attr_i(&t, "layout", 1);
  assert_int_equal(tn_exec(&t, in, 8, out, 3), ALMA_OK);

  double Y[S * D * Bn * H] = {0}, hs[D * Bn * H], cs[D * Bn * H];
  for (int i = 0; i < D * Bn * H; i++) hs[i] = h0[i], cs[i] = c0[i];
  for (int d = 0; d < D; d++)
    ref_rnn(1, S, Bn, I, H, X, W + d * 4 * H * I, R + d * 4 * H * H, Bv + d * 8 * H, P + d * 3 * H, rl, d, &std_lstm,
            hs + d * Bn * H, cs + d * Bn * H, Y, D, d);
  double Yw[S * D * Bn * H], hw[D * Bn * H], cw[D * Bn * H];
  for (int s = 0; s < S; s++)
    for (int d = 0; d < D; d++)
      for (int b = 0; b < Bn; b++)
        for (int k = 0; k < H; k++)
          Yw[(layout ? ((b * S + s) * D + d) : ((s * D + d) * Bn + b)) * H + k] = Y[((s * D + d) * Bn + b) * H + k];
  for (int d = 0; d < D; d++)
    for (int b = 0; b < Bn; b++)
      for (int k = 0; k < H; k++) {
        int dst = (layout ? (b * D + d) : (d * Bn + b)) * H + k;
        hw[dst] = hs[(d * Bn + b) * H + k];
        cw[dst] = cs[(d * Bn + b) * H + k];
      }
  check_f_abs(&out[0], Yw, S * D * Bn * H, 1e-5);
  check_f_abs(&out[1], hw, D * Bn * H, 1e-5);
  check_f_abs(&out[2], cw, D * Bn * H, 1e-5);
  free_outs(out, 3);
  free(X), free(W), free(R), free(Bv), free(P), free(h0), free(c0);
}

static void test_lstm_bidirectional_layout0(void **s) { (void)s; lstm_case(0, 7); }
static void test_lstm_bidirectional_layout1(void **s) { (void)s; lstm_case(1, 14); }

/* Reverse direction, clip, input_forget and non-default activations with alpha/beta lists. */
static void test_lstm_activations_clip(void **s) {
  (void)s;
  tnode t;
  enum { S = 3, Bn = 2, I = 3, H = 2 };
  float *X = rand_buf(S * Bn * I, 3), *W = rand_buf(4 * H * I, 1), *R = rand_buf(4 * H * H, 1);
  alma_tensor tX = TV(ALMA_DTYPE_FLOAT32, X, S, Bn, I), tW = TV(ALMA_DTYPE_FLOAT32, W, 1, 4 * H, I);
  alma_tensor tR = TV(ALMA_DTYPE_FLOAT32, R, 1, 4 * H, H), out[3];
  alma_tensor *in[3] = {&tX, &tW, &tR};
  const char *acts[3] = {"HardSigmoid", "leakyrelu", "Affine"};
  float alpha[3] = {0.3f, 0.2f, 2.0f}, beta[2] = {0.4f, -0.5f};
  tn_make(&t, "LSTM", 22, 3, 3);
  t.outs[0] = -1; /* Y omitted */
  attr_s(&t, "direction", "reverse");
  attr_f(&t, "clip", 0.7f);
  attr_i(&t, "input_forget", 1);
  attr_strings(&t, "activations", acts, 3);
  attr_floats(&t, "activation_alpha", alpha, 3);
  attr_floats(&t, "activation_beta", beta, 2);
  assert_int_equal(tn_exec(&t, in, 3, out, 3), ALMA_OK);
  assert_null(out[0].data);
  ref_opts o = {a_hardsig, a_leaky, a_affine, 0.3, 0.4, 0.2, 0, 2.0, -0.5, 0.7f, 1, 0};
  double h[Bn * H] = {0}, c[Bn * H] = {0};
  ref_rnn(1, S, Bn, I, H, X, W, R, NULL, NULL, NULL, 1, &o, h, c, NULL, 1, 0);
  check_f_abs(&out[1], h, Bn * H, 1e-5);
  check_f_abs(&out[2], c, Bn * H, 1e-5);
  free_outs(out, 3);
  /* unknown activation, wrong count, bad direction, hidden_size mismatch */
  const char *bad[3] = {"Sigmoid", "Tanh", "Swish"};
  tn_make(&t, "LSTM", 22, 3, 3);
  attr_strings(&t, "activations", bad, 3);
  assert_int_equal(tn_exec(&t, in, 3, out, 3), ALMA_ERR_UNSUPPORTED);
  tn_make(&t, "LSTM", 22, 3, 3);
  attr_strings(&t, "activations", acts, 2);
  assert_int_equal(tn_exec(&t, in, 3, out, 3), ALMA_ERR_INVALID_MODEL);
  tn_make(&t, "LSTM", 22, 3, 3);
  attr_s(&t, "direction", "sideways");
  assert_int_equal(tn_exec(&t, in, 3, out, 3), ALMA_ERR_INVALID_MODEL);
  tn_make(&t, "LSTM", 22, 3, 3);
  attr_i(&t, "hidden_size", H + 1);
  assert_int_equal(tn_exec(&t, in, 3, out, 3), ALMA_ERR_SHAPE);
  free(X), free(W), free(R);
}

static void test_lstm_float64_and_errors(void **s) {
  (void)s;
  tnode t;
  enum { S = 2, Bn = 1, I = 2, H = 2 };
  float *X = rand_buf(S * Bn * I, 1), *W = rand_buf(4 * H * I, 1), *R = rand_buf(4 * H * H, 1);
  double Xd[S * Bn * I], Wd[4 * H * I], Rd[4 * H * H];
  for (int i = 0; i < S * Bn * I; i++) Xd[i] = X[i];
  for (int i = 0; i < 4 * H * I; i++) Wd[i] = W[i];
  for (int i = 0; i < 4 * H * H; i++) Rd[i] = R[i];
  alma_tensor tX = TV(ALMA_DTYPE_FLOAT64, Xd, S, Bn, I), tW = TV(ALMA_DTYPE_FLOAT64, Wd, 1, 4 * H, I);
  alma_tensor tR = TV(ALMA_DTYPE_FLOAT64, Rd, 1, 4 * H, H), out[2];
  alma_tensor *in[5] = {&tX, &tW, &tR, NULL, NULL};
  tn_make(&t, "LSTM", 14, 3, 2);
  assert_int_equal(tn_exec(&t, in, 3, out, 2), ALMA_OK);
  assert_int_equal(out[0].dtype, ALMA_DTYPE_FLOAT64);
  double Y[S * Bn * H], h[Bn * H] = {0}, c[Bn * H] = {0};
  ref_rnn(1, S, Bn, I, H, X, W, R, NULL, NULL, NULL, 0, &std_lstm, h, c, Y, 1, 0);
  check_f_abs(&out[0], Y, S * Bn * H, 1e-12);
  check_f_abs(&out[1], h, Bn * H, 1e-12);
  free_outs(out, 2);
  /* mixed dtypes; sequence_lens beyond seq_length */
  alma_tensor tWf = TV(ALMA_DTYPE_FLOAT32, W, 1, 4 * H, I);
  in[1] = &tWf;
  assert_int_equal(tn_exec(&t, in, 3, out, 2), ALMA_ERR_TYPE);
  in[1] = &tW;
  int32_t lens[1] = {3};
  alma_tensor tL = TV(ALMA_DTYPE_INT32, lens, 1);
  in[4] = &tL;
  tn_make(&t, "LSTM", 14, 5, 2);
  assert_int_equal(tn_exec(&t, in, 5, out, 2), ALMA_ERR_INVALID_ARG);
  /* layout is an opset-14 attribute: ignored (0) before */
  tn_make(&t, "LSTM", 7, 3, 2);
  attr_i(&t, "layout", 1);
  assert_int_equal(tn_exec(&t, in, 3, out, 2), ALMA_OK);
  check_shape(&out[0], 4, (int64_t[]){S, 1, Bn, H});
  free_outs(out, 2);
  free(X), free(W), free(R);
}

static void gru_case(int lbr, const char *direction, int opset) {
  tnode t;
  enum { S = 3, Bn = 2, I = 2, H = 3 };
  int D = strcmp(direction, "bidirectional") ? 1 : 2;
  float *X = rand_buf(S * Bn * I, 1), *W = rand_buf(D * 3 * H * I, 1), *R = rand_buf(D * 3 * H * H, 1);
  float *Bv = rand_buf(D * 6 * H, 0.5f), *h0 = rand_buf(D * Bn * H, 0.5f);
  int32_t lens[Bn] = {3, 1};
  int rl[Bn] = {3, 1};
  alma_tensor tX = TV(ALMA_DTYPE_FLOAT32, X, S, Bn, I), tW = TV(ALMA_DTYPE_FLOAT32, W, D, 3 * H, I);
  alma_tensor tR = TV(ALMA_DTYPE_FLOAT32, R, D, 3 * H, H), tB = TV(ALMA_DTYPE_FLOAT32, Bv, D, 6 * H);
  alma_tensor tL = TV(ALMA_DTYPE_INT32, lens, Bn), th = TV(ALMA_DTYPE_FLOAT32, h0, D, Bn, H), out[2];
  alma_tensor *in[6] = {&tX, &tW, &tR, &tB, &tL, &th};
  tn_make(&t, "GRU", opset, 6, 2);
  attr_s(&t, "direction", direction);
  if (lbr) attr_i(&t, "linear_before_reset", 1);
  assert_int_equal(tn_exec(&t, in, 6, out, 2), ALMA_OK);
  double Y[S * 2 * Bn * H] = {0}, h[2 * Bn * H];
  for (int i = 0; i < D * Bn * H; i++) h[i] = h0[i];
  ref_opts o = {a_sigmoid, a_tanh, NULL, 0, 0, 0, 0, 0, 0, 0, 0, lbr};
  for (int d = 0; d < D; d++)
    ref_rnn(0, S, Bn, I, H, X, W + d * 3 * H * I, R + d * 3 * H * H, Bv + d * 6 * H, NULL, rl,
            D == 2 ? d : !strcmp(direction, "reverse"), &o, h + d * Bn * H, NULL, Y, D, d);
  check_shape(&out[0], 4, (int64_t[]){S, D, Bn, H});
  check_f_abs(&out[0], Y, S * D * Bn * H, 1e-5);
  check_f_abs(&out[1], h, D * Bn * H, 1e-5);
  free_outs(out, 2);
  free(X), free(W), free(R), free(Bv), free(h0);
}

static void test_gru_forms(void **s) {
  (void)s;
  gru_case(0, "forward", 7);
  gru_case(1, "forward", 14);
  gru_case(1, "reverse", 22);
  gru_case(0, "bidirectional", 3);
  gru_case(1, "bidirectional", 22);
}

static void test_gru_errors(void **s) {
  (void)s;
  tnode t;
  float X[6] = {0}, W[9 * 2] = {0}, R[9 * 3] = {0}, Bv[17] = {0};
  alma_tensor tX = TV(ALMA_DTYPE_FLOAT32, X, 3, 1, 2), tW = TV(ALMA_DTYPE_FLOAT32, W, 1, 9, 2);
  alma_tensor tR = TV(ALMA_DTYPE_FLOAT32, R, 1, 9, 3), tB = TV(ALMA_DTYPE_FLOAT32, Bv, 1, 17), out[2];
  alma_tensor *in[4] = {&tX, &tW, &tR, &tB};
  tn_make(&t, "GRU", 14, 4, 2);
  assert_int_equal(tn_exec(&t, in, 4, out, 2), ALMA_ERR_SHAPE); /* B must be [1, 18] */
  alma_tensor tW2 = TV(ALMA_DTYPE_FLOAT32, W, 1, 6, 3);
  in[1] = &tW2;
  assert_int_equal(tn_exec(&t, in, 3, out, 2), ALMA_ERR_SHAPE);
  /* bidirectional weights with a forward node */
  alma_tensor tW3 = TV(ALMA_DTYPE_FLOAT32, W, 2, 9, 1);
  in[1] = &tW3;
  assert_int_equal(tn_exec(&t, in, 3, out, 2), ALMA_ERR_SHAPE);
  /* bfloat16 only from opset 22 */
  uint16_t xb[6] = {0}, wb[18] = {0}, rb[27] = {0};
  alma_tensor bX = TV(ALMA_DTYPE_BFLOAT16, xb, 3, 1, 2), bW = TV(ALMA_DTYPE_BFLOAT16, wb, 1, 9, 2);
  alma_tensor bR = TV(ALMA_DTYPE_BFLOAT16, rb, 1, 9, 3);
  alma_tensor *inb[3] = {&bX, &bW, &bR};
  assert_int_equal(tn_exec(&t, inb, 3, out, 2), ALMA_ERR_UNSUPPORTED);
  tn_make(&t, "GRU", 22, 3, 2);
  assert_int_equal(tn_exec(&t, inb, 3, out, 2), ALMA_OK);
  assert_int_equal(out[0].dtype, ALMA_DTYPE_BFLOAT16);
  free_outs(out, 2);
}

static void test_costs(void **s) {
  (void)s;
  tnode t;
  float X[2 * 3 * 4] = {0}, W[4 * 5 * 4] = {0}, R[4 * 5 * 5] = {0};
  alma_tensor tX = TV(ALMA_DTYPE_FLOAT32, X, 2, 3, 4), tW = TV(ALMA_DTYPE_FLOAT32, W, 1, 20, 4);
  alma_tensor tR = TV(ALMA_DTYPE_FLOAT32, R, 1, 20, 5), out[1];
  const alma_tensor *in[3] = {&tX, &tW, &tR};
  tn_make(&t, "LSTM", 22, 3, 1);
  memset(out, 0, sizeof out);
  assert_int_equal(t.n.op->infer(&t.n, in, 3, out, 1), ALMA_OK);
  int64_t macs = 0, flops = 0;
  t.n.op->cost(&t.n, in, 3, out, 1, &macs, &flops);
  assert_int_equal(macs, 2 * 3 * 20 * (4 + 5));
  assert_true(flops > 2 * macs);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quantize_round_half_even),
      cmocka_unit_test(test_quantize_per_axis),
      cmocka_unit_test(test_quantize_blocked),
      cmocka_unit_test(test_quantize_output_dtype_and_half),
      cmocka_unit_test(test_dequantize),
      cmocka_unit_test(test_dequantize_blocked),
      cmocka_unit_test(test_quantize_vector_paths),
      cmocka_unit_test(test_dynamic_quantize),
      cmocka_unit_test(test_matmulinteger_per_row_col),
      cmocka_unit_test(test_matmulinteger_deep_exact),
      cmocka_unit_test(test_qlinearmatmul_per_row_col),
      cmocka_unit_test(test_qlinearmatmul_saturates),
      cmocka_unit_test(test_convinteger_group_stride_pads),
      cmocka_unit_test(test_convinteger_1d_3d),
      cmocka_unit_test(test_convinteger_deep_exact),
      cmocka_unit_test(test_qlinearconv_per_channel_bias),
      cmocka_unit_test(test_lstm_bidirectional_layout0),
      cmocka_unit_test(test_lstm_bidirectional_layout1),
      cmocka_unit_test(test_lstm_activations_clip),
      cmocka_unit_test(test_lstm_float64_and_errors),
      cmocka_unit_test(test_gru_forms),
      cmocka_unit_test(test_gru_errors),
      cmocka_unit_test(test_costs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
