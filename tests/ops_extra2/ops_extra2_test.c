/* Unit tests of the loss, signal and Scan operators (src/ops/extra_loss.c, extra_signal.c,
 * scan.c): the forms, dtypes, edge cases and validation the ONNX node tests do not reach —
 * transforms of any length against a direct DFT, DFT-20's axis input, STFT framing, window
 * dtypes, MelWeightMatrix against the ONNX reference's numbers, losses' ignore_index and
 * reductions, and Scan's axes/directions (opset 9+) and sequence_lens (opset 8). */
#include "op_test_util.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* ==== losses =================================================================================== */
/* input (N=2, C=3, d=2) log-probabilities, targets with ignore_index -1 */
static const float nll_x[] = {-1.0f, -2.0f, -0.5f, -1.5f, -3.0f, -0.25f, /* n=0: c0 d0,d1; c1; c2 */
                              -0.1f, -0.2f, -0.3f, -0.4f, -0.6f, -0.7f};
static const int64_t nll_t[] = {2, -1, 0, 1};

static void test_nll_reductions(void **s) {
  (void)s;
  tnode t;
  alma_tensor out[1];
  alma_tensor x = TT(ALMA_DTYPE_FLOAT32, nll_x, 3, D(2, 3, 2)), tg = TT(ALMA_DTYPE_INT64, nll_t, 2, D(2, 2));
  const alma_tensor *in[] = {&x, &tg};
  /* losses: n0d0 -> c2: 3.0; n0d1 ignored; n1d0 -> c0: 0.1; n1d1 -> c1: 0.4 */
  tn_init(&t, "NegativeLogLikelihoodLoss", 2, 1);
  attr_s(&t, "reduction", "none");
  attr_i(&t, "ignore_index", -1);
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_OK);
  check_shape(&out[0], 2, D(2, 2));
  check_f_rel(&out[0], (double[]){3.0, 0.0, 0.1, 0.4}, 4, 1e-6);
  free_outs(out, 1);
  /* mean over the samples not ignored (3), with and without weights */
  tn_init(&t, "NegativeLogLikelihoodLoss", 2, 1);
  attr_i(&t, "ignore_index", -1);
  assert_int_equal(tn_run(&t, 12, in, out), ALMA_OK);
  check_shape(&out[0], 0, NULL);
  check_f_rel(&out[0], (double[]){3.5 / 3}, 1, 1e-6);
  free_outs(out, 1);
  static const float w[] = {2.0f, 0.5f, 1.0f};
  alma_tensor wt = TT(ALMA_DTYPE_FLOAT32, w, 1, D(3));
  const alma_tensor *inw[] = {&x, &tg, &wt};
  tn_init(&t, "NegativeLogLikelihoodLoss", 3, 1);
  attr_i(&t, "ignore_index", -1);
  assert_int_equal(tn_run(&t, 22, inw, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){(3.0 + 0.2 + 0.2) / 3.5}, 1, 1e-6);
  free_outs(out, 1);
  tn_init(&t, "NegativeLogLikelihoodLoss", 3, 1);
  attr_s(&t, "reduction", "sum");
  attr_i(&t, "ignore_index", -1);
  assert_int_equal(tn_run(&t, 13, inw, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){3.4}, 1, 1e-6);
  free_outs(out, 1);
  /* every sample ignored: the mean is 0/0 */
  static const int32_t all_ign[] = {7, 7, 7, 7};
  alma_tensor ti = TT(ALMA_DTYPE_INT32, all_ign, 2, D(2, 2));
  const alma_tensor *ini[] = {&x, &ti};
  tn_init(&t, "NegativeLogLikelihoodLoss", 2, 1);
  attr_i(&t, "ignore_index", 7);
  assert_int_equal(tn_run(&t, 13, ini, out), ALMA_OK);
  assert_true(isnan(alma__get_f64(out[0].data, out[0].dtype, 0)));
  free_outs(out, 1);
}

static void test_nll_validation(void **s) {
  (void)s;
  tnode t;
  alma_tensor out[1];
  alma_tensor x = TT(ALMA_DTYPE_FLOAT32, nll_x, 3, D(2, 3, 2)), tg = TT(ALMA_DTYPE_INT64, nll_t, 2, D(2, 2));
  const alma_tensor *in[] = {&x, &tg};
  /* -1 is out of range when it is not ignore_index */
  tn_init(&t, "NegativeLogLikelihoodLoss", 2, 1);
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_ERR_INVALID_ARG);
  tn_init(&t, "NegativeLogLikelihoodLoss", 2, 1);
  attr_s(&t, "reduction", "avg");
  assert_int_equal(tn_infer(&t, 13, in, out), ALMA_ERR_INVALID_ARG);
  alma_tensor tbad = TT(ALMA_DTYPE_INT64, nll_t, 2, D(2, 1));
  const alma_tensor *inb[] = {&x, &tbad};
  tn_init(&t, "NegativeLogLikelihoodLoss", 2, 1);
  assert_int_equal(tn_infer(&t, 13, inb, out), ALMA_ERR_SHAPE);
  alma_tensor tf = TT(ALMA_DTYPE_FLOAT32, nll_x, 2, D(2, 2));
  const alma_tensor *inf[] = {&x, &tf};
  tn_init(&t, "NegativeLogLikelihoodLoss", 2, 1);
  assert_int_equal(tn_infer(&t, 13, inf, out), ALMA_ERR_TYPE);
  static const float w[] = {1, 1};
  alma_tensor wt = TT(ALMA_DTYPE_FLOAT32, w, 1, D(2));
  const alma_tensor *inw[] = {&x, &tg, &wt};
  tn_init(&t, "NegativeLogLikelihoodLoss", 3, 1);
  assert_int_equal(tn_infer(&t, 13, inw, out), ALMA_ERR_SHAPE);
  alma_tensor x1 = TT(ALMA_DTYPE_FLOAT32, nll_x, 1, D(3));
  const alma_tensor *in1[] = {&x1, &tg};
  tn_init(&t, "NegativeLogLikelihoodLoss", 2, 1);
  assert_int_equal(tn_infer(&t, 13, in1, out), ALMA_ERR_SHAPE);
  /* not before opset 12 */
  tn_init(&t, "NegativeLogLikelihoodLoss", 2, 1);
  assert_int_equal(alma__op_resolve(&t.n, 11), ALMA_ERR_UNSUPPORTED);
}

static void test_sce_log_prob_f64(void **s) {
  (void)s;
  tnode t;
  alma_tensor out[2];
  /* N=2, C=3 scores in float64 */
  static const double x[] = {1.0, 2.0, 3.0, 0.0, 0.0, 0.0};
  static const int32_t lab[] = {2, 5};
  alma_tensor xt = TT(ALMA_DTYPE_FLOAT64, x, 2, D(2, 3)), lt = TT(ALMA_DTYPE_INT32, lab, 1, D(2));
  const alma_tensor *in[] = {&xt, &lt};
  tn_init(&t, "SoftmaxCrossEntropyLoss", 2, 2);
  attr_s(&t, "reduction", "sum");
  attr_i(&t, "ignore_index", 5);
  assert_int_equal(tn_run(&t, 13, in, out), ALMA_OK);
  assert_int_equal(out[0].dtype, ALMA_DTYPE_FLOAT64);
  double lse = log(exp(1.0) + exp(2.0) + exp(3.0));
  check_f_rel(&out[0], (double[]){lse - 3.0}, 1, 1e-12);
  check_shape(&out[1], 2, D(2, 3));
  check_f_rel(&out[1], (double[]){1 - lse, 2 - lse, 3 - lse, -log(3.0), -log(3.0), -log(3.0)}, 6, 1e-12);
  free_outs(out, 2);
  /* the log_prob output omitted: only the loss is written */
  tn_init(&t, "SoftmaxCrossEntropyLoss", 2, 2);
  t.outs[1] = -1;
  attr_i(&t, "ignore_index", 5);
  assert_int_equal(tn_run(&t, 12, in, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){lse - 3.0}, 1, 1e-12);
  assert_null(out[1].data);
  free_outs(out, 2);
  /* float16 scores with large values stay finite (max-shifted) */
  uint16_t xh[4];
  static const float xf[] = {1000.0f, 1001.0f, -1000.0f, -999.0f};
  for (int i = 0; i < 4; i++) xh[i] = alma__f32_to_f16(xf[i]);
  static const int64_t lab2[] = {1, 0};
  alma_tensor ht = TT(ALMA_DTYPE_FLOAT16, xh, 2, D(2, 2)), l2 = TT(ALMA_DTYPE_INT64, lab2, 1, D(2));
  const alma_tensor *inh[] = {&ht, &l2};
  tn_init(&t, "SoftmaxCrossEntropyLoss", 2, 1);
  attr_s(&t, "reduction", "none");
  assert_int_equal(tn_run(&t, 13, inh, out), ALMA_OK);
  assert_int_equal(out[0].dtype, ALMA_DTYPE_FLOAT16);
  double l0 = log1p(exp(-1.0)), l1 = log1p(exp(1.0));
  check_f_rel(&out[0], (double[]){l0, l1}, 2, 2e-3);
  free_outs(out, 1);
}

/* ==== windows ================================================================================== */
static void test_windows(void **s) {
  (void)s;
  tnode t;
  alma_tensor out[1];
  int64_t one = 1, five = 5, neg = -2, zero = 0;
  alma_tensor t1 = TT(ALMA_DTYPE_INT64, &one, 0, NULL), t5 = TT(ALMA_DTYPE_INT64, &five, 0, NULL);
  alma_tensor tn = TT(ALMA_DTYPE_INT64, &neg, 0, NULL), t0 = TT(ALMA_DTYPE_INT64, &zero, 0, NULL);
  const alma_tensor *in1[] = {&t1}, *in5[] = {&t5}, *inn[] = {&tn}, *in0[] = {&t0};
  /* symmetric window of one sample is 1 (no division by size - 1 = 0) */
  tn_init(&t, "HannWindow", 1, 1);
  attr_i(&t, "periodic", 0);
  assert_int_equal(tn_run(&t, 17, in1, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){1.0}, 1, 0);
  free_outs(out, 1);
  /* double output, symmetric Blackman of 5: 0.42 - 0.5 cos(2 pi n / 4) + 0.08 cos(4 pi n / 4) */
  tn_init(&t, "BlackmanWindow", 1, 1);
  attr_i(&t, "periodic", 0);
  attr_i(&t, "output_datatype", ALMA_DTYPE_FLOAT64);
  assert_int_equal(tn_run(&t, 17, in5, out), ALMA_OK);
  assert_int_equal(out[0].dtype, ALMA_DTYPE_FLOAT64);
  check_f_rel(&out[0], (double[]){0.42 - 0.5 + 0.08, 0.42 - 0.08, 0.42 + 0.5 + 0.08, 0.42 - 0.08, 0.42 - 0.5 + 0.08}, 5, 1e-12);
  free_outs(out, 1);
  /* integer output truncates; periodic Hamming of 5 */
  tn_init(&t, "HammingWindow", 1, 1);
  attr_i(&t, "output_datatype", ALMA_DTYPE_INT32);
  assert_int_equal(tn_run(&t, 17, in5, out), ALMA_OK);
  assert_int_equal(out[0].dtype, ALMA_DTYPE_INT32);
  for (int i = 0; i < 5; i++) assert_int_equal(alma__get_i64(out[0].data, out[0].dtype, i), 0);
  free_outs(out, 1);
  tn_init(&t, "HammingWindow", 1, 1);
  attr_i(&t, "output_datatype", ALMA_DTYPE_FLOAT16);
  assert_int_equal(tn_run(&t, 17, in5, out), ALMA_OK);
  double a = 25.0 / 46.0, b = 21.0 / 46.0, w5[5];
  for (int i = 0; i < 5; i++) w5[i] = a - b * cos(2 * M_PI * i / 5);
  check_f_rel(&out[0], w5, 5, 1e-3);
  free_outs(out, 1);
  tn_init(&t, "HannWindow", 1, 1);
  assert_int_equal(tn_run(&t, 17, in0, out), ALMA_OK);
  check_shape(&out[0], 1, D(0));
  free_outs(out, 1);
  tn_init(&t, "HannWindow", 1, 1);
  assert_int_equal(tn_infer(&t, 17, inn, out), ALMA_ERR_INVALID_ARG);
  tn_init(&t, "HannWindow", 1, 1);
  attr_i(&t, "output_datatype", ALMA_DTYPE_STRING);
  assert_int_equal(tn_infer(&t, 17, in5, out), ALMA_ERR_UNSUPPORTED);
  /* the size's value decides the shape */
  alma_tensor unk = TT(ALMA_DTYPE_INT64, NULL, 0, NULL);
  const alma_tensor *inu[] = {&unk};
  tn_init(&t, "HannWindow", 1, 1);
  assert_int_equal(tn_infer(&t, 17, inu, out), ALMA_ERR_DYNAMIC);
}

/* ==== DFT ====================================================================================== */
/* Direct O(n^2) transform of a complex sequence, for comparison. */
static void direct_dft(const double *re, const double *im, int n, int inverse, double *ore, double *oim) {
  for (int k = 0; k < n; k++) {
    double sr = 0, si = 0;
    for (int j = 0; j < n; j++) {
      double a = (inverse ? 2 : -2) * M_PI * (double)((long long)j * k % n) / n;
      sr += re[j] * cos(a) - im[j] * sin(a);
      si += re[j] * sin(a) + im[j] * cos(a);
    }
    ore[k] = inverse ? sr / n : sr;
    oim[k] = inverse ? si / n : si;
  }
}

/* Lengths on every path: power of two, short direct, long Bluestein (prime and composite). */
static void test_dft_lengths(void **s) {
  (void)s;
  static const int lens[] = {1, 2, 3, 8, 12, 63, 64, 97, 100, 256, 300};
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    int n = lens[li];
    for (int inverse = 0; inverse < 2; inverse++) {
      double *x = malloc(sizeof(double) * 2 * n), *re = malloc(sizeof(double) * n), *im = malloc(sizeof(double) * n);
      double *wr = malloc(sizeof(double) * n), *wi = malloc(sizeof(double) * n), *want = malloc(sizeof(double) * 2 * n);
      for (int j = 0; j < n; j++) {
        re[j] = x[2 * j] = sin(0.37 * j * j + 0.1) + 0.01 * j;
        im[j] = x[2 * j + 1] = cos(1.3 * j) - 0.5;
      }
      direct_dft(re, im, n, inverse, wr, wi);
      for (int k = 0; k < n; k++) want[2 * k] = wr[k], want[2 * k + 1] = wi[k];
      tnode t;
      alma_tensor out[1];
      alma_tensor xt = TT(ALMA_DTYPE_FLOAT64, x, 3, D(1, n, 2));
      const alma_tensor *in[] = {&xt};
      tn_init(&t, "DFT", 1, 1);
      attr_i(&t, "inverse", inverse);
      assert_int_equal(tn_run(&t, 17, in, out), ALMA_OK);
      check_shape(&out[0], 3, D(1, n, 2));
      check_f_rel(&out[0], want, 2 * n, 1e-9 * n);
      free_outs(out, 1);
      free(x), free(re), free(im), free(wr), free(wi), free(want);
    }
  }
}

static void test_dft_forms(void **s) {
  (void)s;
  tnode t;
  alma_tensor out[1];
  /* [2, 3, 1] real input; DFT-20 along axis 1 (the default -2) with dft_length 4 (zero-padded) and
   * onesided: 4 / 2 + 1 = 3 bins */
  static const float x[] = {1, 2, 3, 4, 5, 6};
  int64_t len4 = 4, len2 = 2, axm2 = -2, ax0 = 0, axm1 = -1;
  alma_tensor xt = TT(ALMA_DTYPE_FLOAT32, x, 3, D(2, 3, 1)), l4 = TT(ALMA_DTYPE_INT64, &len4, 0, NULL);
  alma_tensor a2 = TT(ALMA_DTYPE_INT64, &axm2, 0, NULL);
  const alma_tensor *in[] = {&xt, &l4, &a2};
  tn_init(&t, "DFT", 3, 1);
  attr_i(&t, "onesided", 1);
  assert_int_equal(tn_run(&t, 20, in, out), ALMA_OK);
  check_shape(&out[0], 3, D(2, 3, 2));
  /* [1,2,3,0]: X0 = 6, X1 = 1 - 3 + i(-2) = -2 - 2i, X2 = 1 - 2 + 3 = 2 */
  check_f_rel(&out[0], (double[]){6, 0, -2, -2, 2, 0, 15, 0, -2, -5, 5, 0}, 12, 1e-6);
  free_outs(out, 1);
  /* DFT-20 axis 0 (the batch axis is an ordinary axis), dft_length 2 truncates nothing here */
  alma_tensor l2 = TT(ALMA_DTYPE_INT64, &len2, 0, NULL), a0 = TT(ALMA_DTYPE_INT64, &ax0, 0, NULL);
  const alma_tensor *in0[] = {&xt, &l2, &a0};
  tn_init(&t, "DFT", 3, 1);
  assert_int_equal(tn_run(&t, 20, in0, out), ALMA_OK);
  check_shape(&out[0], 3, D(2, 3, 2));
  check_f_rel(&out[0], (double[]){5, 0, 7, 0, 9, 0, -3, 0, -3, 0, -3, 0}, 12, 1e-6);
  free_outs(out, 1);
  /* DFT-17: axis attribute; dft_length 2 truncates [1,2,3] to [1,2] */
  const alma_tensor *in17[] = {&xt, &l2};
  tn_init(&t, "DFT", 2, 1);
  attr_i(&t, "axis", 1);
  assert_int_equal(tn_run(&t, 17, in17, out), ALMA_OK);
  check_shape(&out[0], 3, D(2, 2, 2));
  check_f_rel(&out[0], (double[]){3, 0, -1, 0, 9, 0, -1, 0}, 8, 1e-6);
  free_outs(out, 1);
  /* the complex axis is not a valid axis; nor is an axis attribute at 20 */
  alma_tensor am1 = TT(ALMA_DTYPE_INT64, &axm1, 0, NULL);
  const alma_tensor *inm1[] = {&xt, NULL, &am1};
  tn_init(&t, "DFT", 3, 1);
  t.ins[1] = -1;
  assert_int_equal(tn_infer(&t, 20, inm1, out), ALMA_ERR_INVALID_ARG);
  tn_init(&t, "DFT", 1, 1);
  attr_i(&t, "axis", 2);
  assert_int_equal(tn_infer(&t, 17, in, out), ALMA_ERR_INVALID_ARG);
  tn_init(&t, "DFT", 1, 1);
  attr_i(&t, "axis", 1);
  assert_int_equal(tn_infer(&t, 20, in, out), ALMA_ERR_INVALID_MODEL);
  /* inverse with onesided is refused; a last dimension of 3 too */
  tn_init(&t, "DFT", 1, 1);
  attr_i(&t, "inverse", 1);
  attr_i(&t, "onesided", 1);
  assert_int_equal(tn_infer(&t, 17, in, out), ALMA_ERR_UNSUPPORTED);
  alma_tensor x3 = TT(ALMA_DTYPE_FLOAT32, x, 2, D(2, 3));
  const alma_tensor *in3[] = {&x3};
  tn_init(&t, "DFT", 1, 1);
  attr_i(&t, "axis", 0);
  assert_int_equal(tn_infer(&t, 17, in3, out), ALMA_ERR_SHAPE);
  /* unknown dft_length or axis values: the shape waits for them */
  alma_tensor unk = TT(ALMA_DTYPE_INT64, NULL, 0, NULL);
  const alma_tensor *inu[] = {&xt, &unk};
  tn_init(&t, "DFT", 2, 1);
  assert_int_equal(tn_infer(&t, 17, inu, out), ALMA_ERR_DYNAMIC);
  const alma_tensor *inua[] = {&xt, NULL, &unk};
  tn_init(&t, "DFT", 3, 1);
  t.ins[1] = -1;
  assert_int_equal(tn_infer(&t, 20, inua, out), ALMA_ERR_DYNAMIC);
  /* round trip: inverse(forward(x)) == x, in bfloat16-free float64 */
  static const double c[] = {1, -1, 0.5, 2, -3, 0, 4, 1, 0, 0, 7, -2, 3, 3};
  alma_tensor ct = TT(ALMA_DTYPE_FLOAT64, c, 3, D(1, 7, 2));
  const alma_tensor *inc[] = {&ct};
  alma_tensor fwd[1], back[1];
  tn_init(&t, "DFT", 1, 1);
  assert_int_equal(tn_run(&t, 17, inc, fwd), ALMA_OK);
  const alma_tensor *inf[] = {&fwd[0]};
  tn_init(&t, "DFT", 1, 1);
  attr_i(&t, "inverse", 1);
  assert_int_equal(tn_run(&t, 17, inf, back), ALMA_OK);
  check_f_rel(&back[0], c, 14, 1e-12);
  free_outs(fwd, 1);
  free_outs(back, 1);
}

/* ==== STFT ===================================================================================== */
static void test_stft(void **s) {
  (void)s;
  tnode t;
  alma_tensor out[1];
  /* complex signal of 6 samples, frames of 4 every 2 -> 2 frames; window [1, 1, 0.5] shorter than
   * frame_length 4 (zero-padded); onesided 0 -> 4 bins */
  static const float x[] = {1, 0, 2, 1, 3, 0, 4, -1, 5, 0, 6, 2};
  static const float w[] = {1.0f, 1.0f, 0.5f};
  int64_t step = 2, flen = 4;
  alma_tensor xt = TT(ALMA_DTYPE_FLOAT32, x, 3, D(1, 6, 2)), st = TT(ALMA_DTYPE_INT64, &step, 0, NULL);
  alma_tensor wt = TT(ALMA_DTYPE_FLOAT32, w, 1, D(3)), ft = TT(ALMA_DTYPE_INT64, &flen, 0, NULL);
  const alma_tensor *in[] = {&xt, &st, &wt, &ft};
  tn_init(&t, "STFT", 4, 1);
  attr_i(&t, "onesided", 0);
  assert_int_equal(tn_run(&t, 17, in, out), ALMA_OK);
  check_shape(&out[0], 4, D(1, 2, 4, 2));
  double want[16];
  for (int f = 0; f < 2; f++) {
    double re[4] = {0}, im[4] = {0}, orr[4], oi[4];
    for (int j = 0; j < 3; j++) re[j] = x[2 * (2 * f + j)] * w[j], im[j] = x[2 * (2 * f + j) + 1] * w[j];
    direct_dft(re, im, 4, 0, orr, oi);
    for (int k = 0; k < 4; k++) want[f * 8 + 2 * k] = orr[k], want[f * 8 + 2 * k + 1] = oi[k];
  }
  check_f_rel(&out[0], want, 16, 1e-6);
  free_outs(out, 1);
  /* no window, no frame_length: one frame of the whole signal, onesided by default */
  const alma_tensor *in2[] = {&xt, &st};
  tn_init(&t, "STFT", 2, 1);
  assert_int_equal(tn_infer(&t, 17, in2, out), ALMA_OK);
  check_shape(&out[0], 4, D(1, 1, 4, 2));
  /* frame longer than the signal, zero step */
  int64_t big = 7, zstep = 0;
  alma_tensor bt = TT(ALMA_DTYPE_INT64, &big, 0, NULL), zt = TT(ALMA_DTYPE_INT64, &zstep, 0, NULL);
  const alma_tensor *in3[] = {&xt, &st, NULL, &bt}, *in4[] = {&xt, &zt};
  tn_init(&t, "STFT", 4, 1);
  t.ins[2] = -1;
  assert_int_equal(tn_infer(&t, 17, in3, out), ALMA_ERR_SHAPE);
  tn_init(&t, "STFT", 2, 1);
  assert_int_equal(tn_infer(&t, 17, in4, out), ALMA_ERR_INVALID_ARG);
  alma_tensor unk = TT(ALMA_DTYPE_INT64, NULL, 0, NULL);
  const alma_tensor *in5[] = {&xt, &unk};
  tn_init(&t, "STFT", 2, 1);
  assert_int_equal(tn_infer(&t, 17, in5, out), ALMA_ERR_DYNAMIC);
}

/* ==== MelWeightMatrix ========================================================================== */
static void test_mel(void **s) {
  (void)s;
  tnode t;
  alma_tensor out[1];
  /* 5 mel bins, dft_length 32, 8 kHz, 100..3500 Hz: the ONNX reference gives points
   * [0 1 2 3 5 7 10] and these rows (the other 7 rows are zero) */
  int32_t nmel = 5, dft = 32, rate = 8000;
  float lo = 100.0f, hi = 3500.0f;
  alma_tensor a = TT(ALMA_DTYPE_INT32, &nmel, 0, NULL), b = TT(ALMA_DTYPE_INT32, &dft, 0, NULL);
  alma_tensor c = TT(ALMA_DTYPE_INT32, &rate, 0, NULL), d = TT(ALMA_DTYPE_FLOAT32, &lo, 0, NULL);
  alma_tensor e = TT(ALMA_DTYPE_FLOAT32, &hi, 0, NULL);
  const alma_tensor *in[] = {&a, &b, &c, &d, &e};
  tn_init(&t, "MelWeightMatrix", 5, 1);
  attr_i(&t, "output_datatype", ALMA_DTYPE_FLOAT64);
  assert_int_equal(tn_run(&t, 17, in, out), ALMA_OK);
  check_shape(&out[0], 2, D(17, 5));
  double want[85] = {0};
  static const double rows[10][5] = {{0, 0, 0, 0, 0},   {1, 0, 0, 0, 0},     {0, 1, 0, 0, 0},         {0, 0, 1, 0, 0},
                                     {0, 0, .5, .5, 0}, {0, 0, 0, 1, 0},     {0, 0, 0, .5, .5},       {0, 0, 0, 0, 1},
                                     {0, 0, 0, 0, 2.0 / 3}, {0, 0, 0, 0, 1.0 / 3}};
  memcpy(want, rows, sizeof rows);
  check_f_rel(&out[0], want, 85, 1e-12);
  free_outs(out, 1);
  /* an upper edge above Nyquist puts points past the last bin */
  float hi2 = 8000.0f;
  alma_tensor e2 = TT(ALMA_DTYPE_FLOAT32, &hi2, 0, NULL);
  const alma_tensor *in2[] = {&a, &b, &c, &d, &e2};
  tn_init(&t, "MelWeightMatrix", 5, 1);
  assert_int_equal(tn_run(&t, 17, in2, out), ALMA_ERR_INVALID_ARG);
  int32_t zero_rate = 0;
  alma_tensor c0 = TT(ALMA_DTYPE_INT32, &zero_rate, 0, NULL);
  const alma_tensor *in3[] = {&a, &b, &c0, &d, &e};
  tn_init(&t, "MelWeightMatrix", 5, 1);
  assert_int_equal(tn_run(&t, 17, in3, out), ALMA_ERR_INVALID_ARG);
}

/* ==== Scan ===================================================================================== */
/* Body: (s, x) -> (s + x, (s + x) * x): one state and one scan output. The state and element have
 * shape elt (declared, so a zero-length scan knows its output shape). */
static alma_graph *make_body(int rank, const int64_t *elt) {
  alma_graph *g = alma__graph_new(NULL);
  int sv = alma__graph_add_value(g, "s"), xv = alma__graph_add_value(g, "x");
  int so = alma__graph_add_value(g, "s_out"), yo = alma__graph_add_value(g, "y");
  int vals[] = {sv, xv, so, yo};
  for (int i = 0; i < 4; i++) {
    alma_value *v = &g->values[vals[i]];
    v->dtype = ALMA_DTYPE_FLOAT32;
    v->rank = rank;
    for (int d = 0; d < rank; d++) v->dims[d] = elt[d];
  }
  g->values[sv].is_input = g->values[xv].is_input = 1;
  g->values[so].is_output = g->values[yo].is_output = 1;
  int ai[] = {sv, xv}, mi[] = {so, xv};
  int k = alma__graph_add_node(g, "Add", "", "add", ai, 2, &so, 1);
  assert_int_equal(alma__op_resolve(&g->nodes[k], 16), ALMA_OK);
  k = alma__graph_add_node(g, "Mul", "", "mul", mi, 2, &yo, 1);
  assert_int_equal(alma__op_resolve(&g->nodes[k], 16), ALMA_OK);
  g->values[so].producer = 0;
  g->values[yo].producer = 1;
  g->inputs = malloc(sizeof(int) * 2);
  g->outputs = malloc(sizeof(int) * 2);
  g->inputs[0] = sv, g->inputs[1] = xv;
  g->outputs[0] = so, g->outputs[1] = yo;
  g->n_inputs = g->n_outputs = 2;
  return g;
}

static void test_scan9_axes_directions(void **s) {
  (void)s;
  alma_graph *body = make_body(1, D(2));
  tnode t;
  alma_tensor out[2];
  /* x [2, 3] scanned along axis 1 backwards: elements x[:,2], x[:,1], x[:,0] */
  static const float s0[] = {0, 10}, x[] = {1, 2, 3, 4, 5, 6};
  alma_tensor st = TT(ALMA_DTYPE_FLOAT32, s0, 1, D(2)), xt = TT(ALMA_DTYPE_FLOAT32, x, 2, D(2, 3));
  const alma_tensor *in[] = {&st, &xt};
  int64_t ax1[] = {1}, dir1[] = {1}, axm1[] = {-1};
  tn_init(&t, "Scan", 2, 2);
  attr_g(&t, "body", body);
  attr_i(&t, "num_scan_inputs", 1);
  attr_ints(&t, "scan_input_axes", ax1, 1);
  attr_ints(&t, "scan_input_directions", dir1, 1);
  attr_ints(&t, "scan_output_axes", axm1, 1);
  attr_ints(&t, "scan_output_directions", dir1, 1);
  assert_int_equal(tn_run(&t, 16, in, out), ALMA_OK);
  /* iterations: e=(3,6): s=(3,16), y=(9,96); e=(2,5): s=(5,21), y=(10,105); e=(1,4): s=(6,25), y=(6,100) */
  check_shape(&out[0], 1, D(2));
  check_f_rel(&out[0], (double[]){6, 25}, 2, 0);
  /* outputs stacked on the last axis, prepended: iteration order reversed */
  check_shape(&out[1], 2, D(2, 3));
  check_f_rel(&out[1], (double[]){6, 10, 9, 100, 105, 96}, 6, 0);
  free_outs(out, 2);
  /* defaults (opset 9): axis 0 forwards, appended on axis 0 */
  alma_tensor xt2 = TT(ALMA_DTYPE_FLOAT32, x, 2, D(3, 2));
  const alma_tensor *in2[] = {&st, &xt2};
  tn_init(&t, "Scan", 2, 2);
  attr_g(&t, "body", body);
  attr_i(&t, "num_scan_inputs", 1);
  assert_int_equal(tn_run(&t, 9, in2, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){9, 22}, 2, 0);
  check_shape(&out[1], 2, D(3, 2));
  check_f_rel(&out[1], (double[]){1, 24, 12, 64, 45, 132}, 6, 0);
  free_outs(out, 2);
  /* zero iterations: the state passes through; the scan output has the declared element shape */
  alma_tensor xe = TT(ALMA_DTYPE_FLOAT32, x, 2, D(0, 2));
  const alma_tensor *ine[] = {&st, &xe};
  tn_init(&t, "Scan", 2, 2);
  attr_g(&t, "body", body);
  attr_i(&t, "num_scan_inputs", 1);
  assert_int_equal(tn_run(&t, 21, ine, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){0, 10}, 2, 0);
  check_shape(&out[1], 2, D(0, 2));
  free_outs(out, 2);
  /* validation: scan lengths differ (two scan inputs, no state); num_scan_inputs missing or too large;
   * bad axis and direction */
  alma_tensor xb = TT(ALMA_DTYPE_FLOAT32, x, 2, D(2, 3));
  const alma_tensor *inb[] = {&xt2, &xb};
  tn_init(&t, "Scan", 2, 2);
  attr_g(&t, "body", body);
  attr_i(&t, "num_scan_inputs", 2);
  assert_int_equal(tn_infer(&t, 16, inb, out), ALMA_ERR_SHAPE); /* lengths 3 and 2 */
  tn_init(&t, "Scan", 2, 2);
  attr_g(&t, "body", body);
  assert_int_equal(tn_infer(&t, 16, in, out), ALMA_ERR_INVALID_MODEL);
  tn_init(&t, "Scan", 2, 2);
  attr_g(&t, "body", body);
  attr_i(&t, "num_scan_inputs", 3);
  assert_int_equal(tn_infer(&t, 16, in, out), ALMA_ERR_INVALID_MODEL);
  int64_t ax5[] = {5}, dir2[] = {2};
  tn_init(&t, "Scan", 2, 2);
  attr_g(&t, "body", body);
  attr_i(&t, "num_scan_inputs", 1);
  attr_ints(&t, "scan_input_axes", ax5, 1);
  assert_int_equal(tn_infer(&t, 16, in, out), ALMA_ERR_INVALID_ARG);
  tn_init(&t, "Scan", 2, 2);
  attr_g(&t, "body", body);
  attr_i(&t, "num_scan_inputs", 1);
  attr_ints(&t, "scan_output_directions", dir2, 1);
  assert_int_equal(tn_infer(&t, 16, in, out), ALMA_ERR_INVALID_ARG);
  tn_init(&t, "Scan", 2, 2);
  attr_g(&t, "body", body);
  attr_i(&t, "num_scan_inputs", 1);
  attr_ints(&t, "scan_output_axes", ax5, 1);
  assert_int_equal(tn_run(&t, 16, in2, out), ALMA_ERR_INVALID_ARG);
  alma__graph_free(body);
}

static void test_scan8_sequence_lens(void **s) {
  (void)s;
  alma_graph *body = make_body(1, D(2));
  tnode t;
  alma_tensor out[2];
  /* batch 2, max length 3, elements of 2; batch 1 stops after 1 step; scanned backwards */
  static const float s0[] = {0, 0, 100, 100}, x[] = {1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6};
  static const int64_t lens[] = {3, 1};
  alma_tensor lt = TT(ALMA_DTYPE_INT64, lens, 1, D(2)), st = TT(ALMA_DTYPE_FLOAT32, s0, 2, D(2, 2));
  alma_tensor xt = TT(ALMA_DTYPE_FLOAT32, x, 3, D(2, 3, 2));
  const alma_tensor *in[] = {&lt, &st, &xt};
  int64_t dir1[] = {1};
  tn_init(&t, "Scan", 3, 2);
  attr_g(&t, "body", body);
  attr_i(&t, "num_scan_inputs", 1);
  attr_ints(&t, "directions", dir1, 1);
  assert_int_equal(tn_run(&t, 8, in, out), ALMA_OK);
  /* batch 0: e=3: s=3, y=9; e=2: s=5, y=10; e=1: s=6, y=6. batch 1 (length 1): e=4: s=104, y=416 */
  check_shape(&out[0], 2, D(2, 2));
  check_f_rel(&out[0], (double[]){6, 6, 104, 104}, 4, 0);
  check_shape(&out[1], 3, D(2, 3, 2));
  check_f_rel(&out[1], (double[]){9, 9, 10, 10, 6, 6, 416, 416, 0, 0, 0, 0}, 12, 0);
  free_outs(out, 2);
  /* sequence_lens omitted (an empty name) runs the full length */
  const alma_tensor *in2[] = {NULL, &st, &xt};
  tn_init(&t, "Scan", 3, 2);
  t.ins[0] = -1;
  attr_g(&t, "body", body);
  attr_i(&t, "num_scan_inputs", 1);
  assert_int_equal(tn_run(&t, 8, in2, out), ALMA_OK);
  check_f_rel(&out[0], (double[]){6, 6, 115, 115}, 4, 0);
  free_outs(out, 2);
  /* a length past the maximum; a state without the batch axis */
  static const int64_t bad[] = {4, 1};
  alma_tensor bt = TT(ALMA_DTYPE_INT64, bad, 1, D(2));
  const alma_tensor *in3[] = {&bt, &st, &xt};
  tn_init(&t, "Scan", 3, 2);
  attr_g(&t, "body", body);
  attr_i(&t, "num_scan_inputs", 1);
  assert_int_equal(tn_run(&t, 8, in3, out), ALMA_ERR_INVALID_ARG);
  alma_tensor s1 = TT(ALMA_DTYPE_FLOAT32, s0, 1, D(2));
  alma_tensor x1 = TT(ALMA_DTYPE_FLOAT32, x, 3, D(1, 3, 2));
  const alma_tensor *in4[] = {NULL, &s1, &x1};
  tn_init(&t, "Scan", 3, 2);
  t.ins[0] = -1;
  attr_g(&t, "body", body);
  attr_i(&t, "num_scan_inputs", 1);
  assert_int_equal(tn_infer(&t, 8, in4, out), ALMA_ERR_SHAPE);
  alma__graph_free(body);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nll_reductions),  cmocka_unit_test(test_nll_validation),
      cmocka_unit_test(test_sce_log_prob_f64), cmocka_unit_test(test_windows),
      cmocka_unit_test(test_dft_lengths),     cmocka_unit_test(test_dft_forms),
      cmocka_unit_test(test_stft),            cmocka_unit_test(test_mel),
      cmocka_unit_test(test_scan9_axes_directions), cmocka_unit_test(test_scan8_sequence_lens),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
