/* nn operators: the blocked GEMM and every conv/pool/norm/softmax/einsum path checked against
 * naive double-precision references over many shapes and attribute combinations, the legacy
 * opset forms (Softmax < 13, BatchNormalization spatial/training, MaxPool < 8), non-float32
 * dtypes, and error paths. Nodes are built by hand and run with alma__op_run_node. */
#include "op_test_util.h"
#include "ops/sgemm.h"

/* An owned float tensor of any float dtype filled from doubles (or random in [-1, 1)). */
static uint64_t rng = 88172645463325252ull;
static double urand(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}
static alma_tensor mkt(alma_dtype dt, int rank, const int64_t *dims, const double *vals) {
  alma_tensor t;
  assert_int_equal(alma__tensor_alloc(&t, dt, rank, dims), ALMA_OK);
  int64_t n = alma_tensor_numel(&t);
  for (int64_t i = 0; i < n; i++) alma__set_f64(t.data, dt, i, vals ? vals[i] : urand());
  return t;
}
static double g(const alma_tensor *t, int64_t i) { return alma__get_f64(t->data, t->dtype, i); }

static void expect_close(const alma_tensor *got, const double *want, double tol) {
  check_f_rel(got, want, alma_tensor_numel(got), tol);
}

/* ---- sgemm ------------------------------------------------------------------------------- */

static void test_sgemm_shapes(void **state) {
  (void)state;
  static const int shapes[][3] = {{1, 1, 1},   {1, 37, 19},  {3, 5, 7},    {4, 4, 4},    {5, 1, 33},
                                  {6, 16, 1},  {7, 17, 300}, {13, 2, 9},   {64, 70, 65}, {121, 33, 257},
                                  {2, 2050, 3}, {130, 2049, 5}, {0, 3, 3}, {3, 0, 3}, {3, 3, 0},
                                  {2, 1030, 37}, {3, 515, 64}, {1, 9, 4}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++)
        for (int ab = 0; ab < 6; ab++) { /* alpha/beta variants, the last three with biases */
          int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
          int with_bias = ab >= 3;
          float alpha = ab % 3 == 2 ? -0.5f : 1.0f, beta = ab % 3 == 0 ? 0.0f : ab % 3 == 1 ? 1.0f : 2.0f;
          float *rb = malloc(sizeof(float) * (size_t)(M + 1)), *cb = malloc(sizeof(float) * (size_t)(N + 1));
          for (int64_t i = 0; i < M; i++) rb[i] = (float)urand();
          for (int64_t j = 0; j < N; j++) cb[j] = (float)urand();
          int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2; /* padded strides */
          float *A = malloc(sizeof(float) * (size_t)((ta ? K : M) * lda + 1));
          float *B = malloc(sizeof(float) * (size_t)((tb ? N : K) * ldb + 1));
          float *C = malloc(sizeof(float) * (size_t)(M * ldc + 1));
          double *R = malloc(sizeof(double) * (size_t)(M * N + 1));
          for (int64_t i = 0; i < (ta ? K : M) * lda; i++) A[i] = (float)urand();
          for (int64_t i = 0; i < (tb ? N : K) * ldb; i++) B[i] = (float)urand();
          for (int64_t i = 0; i < M * ldc; i++) C[i] = beta == 0.0f ? NAN : (float)urand();
          for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
              double acc = 0;
              for (int64_t k = 0; k < K; k++)
                acc += (double)(ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
              R[i * N + j] = alpha * acc + (beta == 0.0f ? 0.0 : beta * (double)C[i * ldc + j]) +
                             (with_bias ? (double)rb[i] + cb[j] : 0.0);
            }
          if (with_bias)
            assert_int_equal(alma__sgemm_bias(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, rb, cb), ALMA_OK);
          else
            assert_int_equal(alma__sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), ALMA_OK);
          for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
              if (!(fabs(C[i * ldc + j] - R[i * N + j]) <= 1e-4 * (1 + sqrt((double)K)))) {
                print_error("M=%lld N=%lld K=%lld ta=%d tb=%d ab=%d at (%lld,%lld): %g vs %g\n", (long long)M,
                            (long long)N, (long long)K, ta, tb, ab, (long long)i, (long long)j, C[i * ldc + j],
                            R[i * N + j]);
                fail();
              }
          free(A), free(B), free(C), free(R), free(rb), free(cb);
        }
}

/* alma__sgemm_rows (the few-rows kernel the BLAS runtime calls for 2-4 rows): any row count gives
 * each row exactly what that row alone gives (up to four rows share a pass over B), and M < 4
 * matches alma__sgemm bit for bit. */
static void test_sgemm_rows(void **state) {
  (void)state;
  static const int shapes[][2] = {{5, 3}, {1030, 37}, {515, 64}, {17, 4}, {33, 130}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int tb = 0; tb < 2; tb++)
      for (int64_t M = 1; M <= 9; M++) {
        int64_t N = shapes[s][0], K = shapes[s][1], lda = K + 1, ldb = (tb ? K : N) + 3, ldc = N + 2;
        float beta = M % 2 ? 0.0f : 1.0f, alpha = M % 3 ? 1.0f : 0.75f;
        float *A = malloc(sizeof(float) * (size_t)(M * lda)), *B = malloc(sizeof(float) * (size_t)((tb ? N : K) * ldb));
        float *C = malloc(sizeof(float) * (size_t)(M * ldc)), *C1 = malloc(sizeof(float) * (size_t)ldc);
        float *C2 = malloc(sizeof(float) * (size_t)(M * ldc)), *C0 = malloc(sizeof(float) * (size_t)(M * ldc));
        for (int64_t i = 0; i < M * lda; i++) A[i] = (float)urand();
        for (int64_t i = 0; i < (tb ? N : K) * ldb; i++) B[i] = (float)urand();
        for (int64_t i = 0; i < M * ldc; i++) C[i] = C2[i] = C0[i] = beta == 0.0f ? NAN : (float)urand();
        alma__sgemm_rows(tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        if (M < 4) assert_int_equal(alma__sgemm(0, tb, M, N, K, alpha, A, lda, B, ldb, beta, C2, ldc), ALMA_OK);
        for (int64_t i = 0; i < M; i++) {
          for (int64_t j = 0; j < N; j++) C1[j] = C0[i * ldc + j];
          alma__sgemm_rows(tb, 1, N, K, alpha, A + i * lda, lda, B, ldb, beta, C1, ldc);
          for (int64_t j = 0; j < N; j++) {
            if (memcmp(&C[i * ldc + j], &C1[j], sizeof(float)) || (M < 4 && memcmp(&C[i * ldc + j], &C2[i * ldc + j], sizeof(float)))) {
              print_error("N=%lld K=%lld M=%lld tb=%d row %lld col %lld: %.9g alone %.9g\n", (long long)N, (long long)K,
                          (long long)M, tb, (long long)i, (long long)j, C[i * ldc + j], C1[j]);
              fail();
            }
          }
        }
        free(A), free(B), free(C), free(C1), free(C2), free(C0);
      }
}

/* ---- Conv -------------------------------------------------------------------------------- */

typedef struct {
  int nsp;
  int64_t N, C, M, group;
  int64_t in[3], k[3], s[3], d[3], pb[3], pe[3];
  const char *auto_pad;
  int bias;
} conv_case;

static void conv_naive(const conv_case *c, const int64_t *out, const alma_tensor *x, const alma_tensor *w,
                       const alma_tensor *b, double *y, const int64_t *pb) {
  int64_t Cg = c->C / c->group, Mg = c->M / c->group;
  int64_t in3[3] = {1, 1, 1}, out3[3] = {1, 1, 1}, k3[3] = {1, 1, 1}, s3[3] = {1, 1, 1}, d3[3] = {1, 1, 1},
          p3[3] = {0, 0, 0};
  for (int i = 0; i < c->nsp; i++) {
    int j = 3 - c->nsp + i;
    in3[j] = c->in[i], out3[j] = out[i], k3[j] = c->k[i], s3[j] = c->s[i], d3[j] = c->d[i], p3[j] = pb[i];
  }
  int64_t insp = in3[0] * in3[1] * in3[2], outsp = out3[0] * out3[1] * out3[2], kp = k3[0] * k3[1] * k3[2];
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t m = 0; m < c->M; m++) {
      int64_t grp = m / Mg;
      for (int64_t o = 0; o < outsp; o++) {
        int64_t oz = o / (out3[1] * out3[2]), oy = (o / out3[2]) % out3[1], ox = o % out3[2];
        double acc = b ? g(b, m) : 0;
        for (int64_t ci = 0; ci < Cg; ci++)
          for (int64_t kk = 0; kk < kp; kk++) {
            int64_t kz = kk / (k3[1] * k3[2]), ky = (kk / k3[2]) % k3[1], kx = kk % k3[2];
            int64_t iz = oz * s3[0] - p3[0] + kz * d3[0], iy = oy * s3[1] - p3[1] + ky * d3[1],
                    ix = ox * s3[2] - p3[2] + kx * d3[2];
            if (iz < 0 || iz >= in3[0] || iy < 0 || iy >= in3[1] || ix < 0 || ix >= in3[2]) continue;
            acc += g(x, (n * c->C + grp * Cg + ci) * insp + (iz * in3[1] + iy) * in3[2] + ix) *
                   g(w, (m * Cg + ci) * kp + kk);
          }
        y[(n * c->M + m) * outsp + o] = acc;
      }
    }
}

static void run_conv_case(const conv_case *c, alma_dtype dt) {
  tnode t;
  tn_make(&t, "Conv", 22, c->bias ? 3 : 2, 1);
  int64_t xd[5] = {c->N, c->C}, wd[5] = {c->M, c->C / c->group}, bd[1] = {c->M}, pads[6];
  for (int i = 0; i < c->nsp; i++) {
    xd[2 + i] = c->in[i], wd[2 + i] = c->k[i], pads[i] = c->pb[i], pads[c->nsp + i] = c->pe[i];
  }
  attr_ints(&t, "strides", c->s, c->nsp);
  attr_ints(&t, "dilations", c->d, c->nsp);
  attr_i(&t, "group", c->group);
  if (c->auto_pad)
    attr_s(&t, "auto_pad", c->auto_pad);
  else
    attr_ints(&t, "pads", pads, 2 * c->nsp);
  alma_tensor x = mkt(dt, c->nsp + 2, xd, NULL), w = mkt(dt, c->nsp + 2, wd, NULL), b = mkt(dt, 1, bd, NULL);
  alma_tensor *in[3] = {&x, &w, &b}, out;
  assert_int_equal(tn_exec(&t, in, c->bias ? 3 : 2, &out, 1), ALMA_OK);
  /* expected output sizes and begin pads */
  int64_t osz[3], pb[3];
  for (int i = 0; i < c->nsp; i++) {
    int64_t eff = (c->k[i] - 1) * c->d[i] + 1;
    if (c->auto_pad && strcmp(c->auto_pad, "VALID")) {
      osz[i] = (c->in[i] + c->s[i] - 1) / c->s[i];
      int64_t total = (osz[i] - 1) * c->s[i] + eff - c->in[i];
      if (total < 0) total = 0;
      pb[i] = !strcmp(c->auto_pad, "SAME_UPPER") ? total / 2 : total - total / 2;
    } else if (c->auto_pad) {
      osz[i] = (c->in[i] - eff) / c->s[i] + 1, pb[i] = 0;
    } else {
      osz[i] = (c->in[i] + c->pb[i] + c->pe[i] - eff) / c->s[i] + 1, pb[i] = c->pb[i];
    }
    assert_int_equal(out.dims[2 + i], osz[i]);
  }
  double *ref = malloc(sizeof(double) * (size_t)alma_tensor_numel(&out));
  conv_naive(c, osz, &x, &w, c->bias ? &b : NULL, ref, pb);
  expect_close(&out, ref, dt == ALMA_DTYPE_FLOAT32 ? 1e-4 : dt == ALMA_DTYPE_FLOAT64 ? 1e-12 : 2e-2);
  /* cost: one MAC per weight per output position */
  int64_t macs = 0, flops = 0;
  const alma_tensor *cin[3] = {&x, &w, &b};
  t.n.op->cost(&t.n, cin, c->bias ? 3 : 2, &out, 1, &macs, &flops);
  assert_int_equal(macs, alma_tensor_numel(&out) * alma_tensor_numel(&w) / c->M);
  free(ref);
  alma_tensor_free_data(&x), alma_tensor_free_data(&w), alma_tensor_free_data(&b), alma_tensor_free_data(&out);
}

static void test_conv_vs_naive(void **state) {
  (void)state;
  static const conv_case cases[] = {
      /* nsp N C M group in k s d pb pe auto_pad bias */
      {2, 2, 3, 4, 1, {7, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, NULL, 1},
      {2, 1, 4, 6, 2, {8, 7}, {3, 2}, {2, 1}, {1, 2}, {0, 1}, {2, 0}, NULL, 1},
      {2, 1, 8, 8, 8, {9, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, NULL, 1},     /* depthwise */
      {2, 2, 4, 8, 4, {10, 11}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, NULL, 0},   /* depthwise x2, stride */
      {2, 1, 3, 3, 3, {12, 12}, {5, 5}, {2, 3}, {2, 2}, {4, 1}, {0, 2}, NULL, 1},   /* depthwise dilated */
      {2, 1, 16, 24, 1, {6, 5}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, NULL, 1},   /* pointwise */
      {2, 1, 16, 24, 1, {6, 5}, {1, 1}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, NULL, 0},   /* strided 1x1 */
      {1, 2, 3, 5, 1, {20}, {4}, {3}, {2}, {2}, {1}, NULL, 1},
      {3, 1, 2, 3, 1, {5, 6, 7}, {2, 3, 2}, {1, 2, 1}, {2, 1, 1}, {1, 0, 1}, {0, 1, 1}, NULL, 1},
      {2, 1, 2, 3, 1, {7, 8}, {3, 4}, {2, 3}, {1, 1}, {0}, {0}, "SAME_UPPER", 1},
      {2, 1, 2, 3, 1, {7, 8}, {3, 4}, {2, 3}, {1, 1}, {0}, {0}, "SAME_LOWER", 0},
      {2, 1, 2, 3, 1, {7, 8}, {3, 4}, {2, 3}, {1, 1}, {0}, {0}, "VALID", 1},
      {2, 1, 70, 20, 1, {9, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, NULL, 1},   /* K over a block edge */
      {2, 1, 4, 4, 4, {9, 45}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, NULL, 1},    /* depthwise, vector rows */
      {2, 1, 4, 4, 4, {9, 47}, {3, 5}, {2, 2}, {1, 1}, {1, 2}, {1, 2}, NULL, 1},    /* ... stride 2 */
      {2, 1, 2, 2, 2, {6, 50}, {3, 3}, {2, 2}, {1, 2}, {0, 3}, {1, 0}, NULL, 0},    /* ... dilated, stride 2 */
      {2, 1, 2, 2, 2, {5, 40}, {2, 3}, {1, 3}, {1, 1}, {0, 1}, {0, 1}, NULL, 1},    /* ... stride 3 */
      /* im2col beyond 2^24 elements: built in slabs of output rows */
      {2, 1, 64, 2, 1, {345, 200}, {3, 3}, {2, 1}, {1, 1}, {1, 1}, {1, 1}, NULL, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_conv_case(&cases[i], ALMA_DTYPE_FLOAT32);
  run_conv_case(&cases[1], ALMA_DTYPE_FLOAT64);
  run_conv_case(&cases[2], ALMA_DTYPE_FLOAT64);
  run_conv_case(&cases[1], ALMA_DTYPE_FLOAT16);
  run_conv_case(&cases[3], ALMA_DTYPE_BFLOAT16);
}

static void test_conv_errors(void **state) {
  (void)state;
  tnode t;
  int64_t xd[4] = {1, 3, 5, 5}, wd[4] = {4, 2, 3, 3};
  alma_tensor x = mkt(ALMA_DTYPE_FLOAT32, 4, xd, NULL), w = mkt(ALMA_DTYPE_FLOAT32, 4, wd, NULL), out;
  alma_tensor *in[2] = {&x, &w};
  tn_make(&t, "Conv", 11, 2, 1); /* W has 2 channels per group but X has 3 */
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_ERR_SHAPE);
  tn_make(&t, "Conv", 11, 2, 1);
  attr_i(&t, "group", 0);
  assert_int_not_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
  int64_t wd2[4] = {4, 3, 7, 7};
  alma_tensor w2 = mkt(ALMA_DTYPE_FLOAT32, 4, wd2, NULL);
  in[1] = &w2;
  tn_make(&t, "Conv", 11, 2, 1); /* kernel larger than the input */
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_ERR_SHAPE);
  tn_make(&t, "Conv", 11, 2, 1);
  int64_t bad[3] = {1, 1, 1};
  attr_ints(&t, "strides", bad, 3);
  assert_int_not_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
  tn_make(&t, "Conv", 11, 2, 1);
  attr_s(&t, "auto_pad", "SAME");
  assert_int_not_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
  alma_tensor xi;
  assert_int_equal(alma__tensor_alloc(&xi, ALMA_DTYPE_INT32, 4, xd), ALMA_OK);
  in[0] = &xi;
  tn_make(&t, "Conv", 11, 2, 1);
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_ERR_UNSUPPORTED);
  alma_tensor_free_data(&x), alma_tensor_free_data(&w), alma_tensor_free_data(&w2), alma_tensor_free_data(&xi);
}

/* ---- ConvTranspose ----------------------------------------------------------------------- */

static void test_convtranspose_vs_naive(void **state) {
  (void)state;
  struct {
    int64_t N, C, M, group, H, W, kh, kw, sh, sw, dh, dw, p[4], op[2];
    const int64_t *oshape;
    int bias;
  } cases[] = {
      {1, 2, 3, 1, 4, 5, 3, 3, 2, 2, 1, 1, {1, 0, 0, 1}, {1, 0}, NULL, 1},
      {2, 4, 6, 2, 3, 3, 2, 3, 3, 1, 2, 1, {0, 1, 2, 0}, {0, 0}, NULL, 1},
      {1, 3, 3, 3, 5, 4, 3, 3, 1, 2, 1, 2, {1, 1, 1, 1}, {0, 1}, NULL, 0},
      {1, 1, 2, 1, 3, 3, 3, 3, 3, 2, 1, 1, {0, 0, 0, 0}, {0, 0}, (const int64_t[]){10, 8}, 1},
  };
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    __typeof__(cases[0]) *c = &cases[ci];
    tnode t;
    tn_make(&t, "ConvTranspose", 11, c->bias ? 3 : 2, 1);
    int64_t s[2] = {c->sh, c->sw}, d[2] = {c->dh, c->dw};
    attr_ints(&t, "strides", s, 2);
    attr_ints(&t, "dilations", d, 2);
    attr_i(&t, "group", c->group);
    if (c->oshape)
      attr_ints(&t, "output_shape", c->oshape, 2);
    else {
      attr_ints(&t, "pads", c->p, 4);
      attr_ints(&t, "output_padding", c->op, 2);
    }
    int64_t Mg = c->M / c->group, Cg = c->C / c->group;
    int64_t xd[4] = {c->N, c->C, c->H, c->W}, wd[4] = {c->C, Mg, c->kh, c->kw}, bd[1] = {c->M};
    alma_tensor x = mkt(ALMA_DTYPE_FLOAT32, 4, xd, NULL), w = mkt(ALMA_DTYPE_FLOAT32, 4, wd, NULL),
                b = mkt(ALMA_DTYPE_FLOAT32, 1, bd, NULL), out;
    alma_tensor *in[3] = {&x, &w, &b};
    assert_int_equal(tn_exec(&t, in, c->bias ? 3 : 2, &out, 1), ALMA_OK);
    int64_t OH, OW, ph = c->p[0], pw = c->p[1];
    if (c->oshape) {
      OH = c->oshape[0], OW = c->oshape[1];
      int64_t th = c->sh * (c->H - 1) + (c->kh - 1) * c->dh + 1 - OH, tw = c->sw * (c->W - 1) + (c->kw - 1) * c->dw + 1 - OW;
      ph = th - (int64_t)floor(th / 2.0), pw = tw - (int64_t)floor(tw / 2.0);
    } else {
      OH = c->sh * (c->H - 1) + c->op[0] + (c->kh - 1) * c->dh + 1 - c->p[0] - c->p[2];
      OW = c->sw * (c->W - 1) + c->op[1] + (c->kw - 1) * c->dw + 1 - c->p[1] - c->p[3];
    }
    int64_t od[4] = {c->N, c->M, OH, OW};
    check_shape(&out, 4, od);
    double *ref = calloc((size_t)(c->N * c->M * OH * OW), sizeof(double));
    for (int64_t n = 0; n < c->N; n++)
      for (int64_t ch = 0; ch < c->C; ch++)
        for (int64_t ih = 0; ih < c->H; ih++)
          for (int64_t iw = 0; iw < c->W; iw++)
            for (int64_t mg = 0; mg < Mg; mg++)
              for (int64_t kh = 0; kh < c->kh; kh++)
                for (int64_t kw = 0; kw < c->kw; kw++) {
                  int64_t oh = ih * c->sh - ph + kh * c->dh, ow = iw * c->sw - pw + kw * c->dw;
                  if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                  int64_t m = (ch / Cg) * Mg + mg;
                  ref[((n * c->M + m) * OH + oh) * OW + ow] +=
                      g(&x, ((n * c->C + ch) * c->H + ih) * c->W + iw) * g(&w, ((ch * Mg + mg) * c->kh + kh) * c->kw + kw);
                }
    if (c->bias)
      for (int64_t i = 0; i < c->N * c->M * OH * OW; i++) ref[i] += g(&b, (i / (OH * OW)) % c->M);
    expect_close(&out, ref, 1e-4);
    free(ref);
    alma_tensor_free_data(&x), alma_tensor_free_data(&w), alma_tensor_free_data(&b), alma_tensor_free_data(&out);
  }
}

/* ---- pools ------------------------------------------------------------------------------- */

static void test_maxpool_indices_and_versions(void **state) {
  (void)state;
  /* 1 x 2 x 3 x 4, 2x2 window, stride 1, col-major indices */
  int64_t xd[4] = {1, 2, 3, 4};
  double xv[24];
  for (int i = 0; i < 24; i++) xv[i] = (double)((i * 7) % 11);
  alma_tensor x = mkt(ALMA_DTYPE_FLOAT32, 4, xd, xv), out[2];
  alma_tensor *in[1] = {&x};
  tnode t;
  tn_make(&t, "MaxPool", 12, 1, 2);
  int64_t k[2] = {2, 2};
  attr_ints(&t, "kernel_shape", k, 2);
  attr_i(&t, "storage_order", 1);
  assert_int_equal(tn_exec(&t, in, 1, out, 2), ALMA_OK);
  int64_t od[4] = {1, 2, 2, 3};
  check_shape(&out[0], 4, od);
  assert_int_equal(out[1].dtype, ALMA_DTYPE_INT64);
  for (int c = 0; c < 2; c++)
    for (int oh = 0; oh < 2; oh++)
      for (int ow = 0; ow < 3; ow++) {
        double best = -1;
        int64_t bi = -1;
        for (int kh = 0; kh < 2; kh++)
          for (int kw = 0; kw < 2; kw++) {
            int h = oh + kh, w = ow + kw;
            double v = xv[c * 12 + h * 4 + w];
            if (v > best) best = v, bi = c * 12 + h + w * 3;
          }
        int64_t o = (c * 2 + oh) * 3 + ow;
        assert_true(g(&out[0], o) == best);
        assert_int_equal(((int64_t *)out[1].data)[o], bi);
      }
  alma_tensor_free_data(&out[0]), alma_tensor_free_data(&out[1]);
  /* opset 7 has no Indices output; int8 is supported from 12 */
  tn_make(&t, "MaxPool", 7, 1, 2);
  attr_ints(&t, "kernel_shape", k, 2);
  assert_int_not_equal(tn_exec(&t, in, 1, out, 2), ALMA_OK);
  alma_tensor xi = mkt(ALMA_DTYPE_INT8, 4, xd, xv);
  in[0] = &xi;
  tn_make(&t, "MaxPool", 12, 1, 1);
  attr_ints(&t, "kernel_shape", k, 2);
  assert_int_equal(tn_exec(&t, in, 1, out, 1), ALMA_OK);
  assert_int_equal(out[0].dtype, ALMA_DTYPE_INT8);
  assert_int_equal(((int8_t *)out[0].data)[0], 7); /* max of 0, 7 (row 0) and 6, 2 (row 1) */
  alma_tensor_free_data(&out[0]);
  alma_tensor_free_data(&x), alma_tensor_free_data(&xi);
}

static void test_avgpool_versions(void **state) {
  (void)state;
  /* 1x1x3x3 of ones, 2x2 window, pads 1: corner windows hold 1 real element */
  int64_t xd[4] = {1, 1, 3, 3}, k[2] = {2, 2}, p[4] = {1, 1, 1, 1}, s[2] = {2, 2};
  double ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  alma_tensor x = mkt(ALMA_DTYPE_FLOAT64, 4, xd, ones), out;
  alma_tensor *in[1] = {&x};
  tnode t;
  tn_make(&t, "AveragePool", 7, 1, 1);
  attr_ints(&t, "kernel_shape", k, 2);
  attr_ints(&t, "pads", p, 4);
  attr_ints(&t, "strides", s, 2);
  attr_i(&t, "count_include_pad", 1);
  assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  int64_t od[4] = {1, 1, 2, 2};
  check_shape(&out, 4, od);
  assert_true(fabs(g(&out, 0) - 0.25) < 1e-12);
  alma_tensor_free_data(&out);
  tn_make(&t, "AveragePool", 7, 1, 1);
  attr_ints(&t, "kernel_shape", k, 2);
  attr_ints(&t, "pads", p, 4);
  attr_ints(&t, "strides", s, 2);
  assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  assert_true(fabs(g(&out, 0) - 1.0) < 1e-12);
  alma_tensor_free_data(&out);
  /* GlobalAveragePool / GlobalMaxPool on float16 */
  int64_t gd[4] = {2, 3, 2, 2};
  alma_tensor h = mkt(ALMA_DTYPE_FLOAT16, 4, gd, NULL);
  in[0] = &h;
  tn_make(&t, "GlobalAveragePool", 1, 1, 1);
  assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  int64_t god[4] = {2, 3, 1, 1};
  check_shape(&out, 4, god);
  for (int pl = 0; pl < 6; pl++) {
    double m = 0;
    for (int i = 0; i < 4; i++) m += g(&h, pl * 4 + i) / 4;
    assert_true(fabs(g(&out, pl) - m) < 2e-3);
  }
  alma_tensor_free_data(&out);
  alma_tensor_free_data(&x), alma_tensor_free_data(&h);
}

/* ---- BatchNormalization ------------------------------------------------------------------ */

static void test_batchnorm_legacy_and_training(void **state) {
  (void)state;
  int64_t xd[4] = {2, 3, 2, 2}, pd[1] = {3}, pd_ns[3] = {3, 2, 2};
  alma_tensor x = mkt(ALMA_DTYPE_FLOAT32, 4, xd, NULL), out[5];
  /* spatial = 0 (opset 7): one parameter per activation */
  alma_tensor ps[4];
  for (int i = 0; i < 4; i++) ps[i] = mkt(ALMA_DTYPE_FLOAT32, 3, pd_ns, NULL);
  for (int i = 0; i < 12; i++) ((float *)ps[3].data)[i] = (float)fabs(((float *)ps[3].data)[i]) + 0.5f;
  alma_tensor *in[5] = {&x, &ps[0], &ps[1], &ps[2], &ps[3]};
  tnode t;
  tn_make(&t, "BatchNormalization", 7, 5, 1);
  attr_i(&t, "spatial", 0);
  assert_int_equal(tn_exec(&t, in, 5, out, 1), ALMA_OK);
  double ref[24];
  for (int i = 0; i < 24; i++) {
    int p = i % 12;
    ref[i] = g(&ps[0], p) * (g(&x, i) - g(&ps[2], p)) / sqrt(g(&ps[3], p) + 1e-5) + g(&ps[1], p);
  }
  expect_close(&out[0], ref, 1e-5);
  alma_tensor_free_data(&out[0]);
  /* opset 9 with all five outputs: training mode with batch statistics */
  alma_tensor q[4];
  for (int i = 0; i < 4; i++) q[i] = mkt(ALMA_DTYPE_FLOAT32, 1, pd, NULL);
  for (int i = 0; i < 3; i++) ((float *)q[3].data)[i] = 1.0f + (float)i;
  alma_tensor *in2[5] = {&x, &q[0], &q[1], &q[2], &q[3]};
  tn_make(&t, "BatchNormalization", 9, 5, 5);
  attr_f(&t, "momentum", 0.8f);
  assert_int_equal(tn_exec(&t, in2, 5, out, 5), ALMA_OK);
  for (int c = 0; c < 3; c++) {
    double mean = 0, var = 0;
    for (int n = 0; n < 2; n++)
      for (int s = 0; s < 4; s++) mean += g(&x, (n * 3 + c) * 4 + s) / 8;
    for (int n = 0; n < 2; n++)
      for (int s = 0; s < 4; s++) var += pow(g(&x, (n * 3 + c) * 4 + s) - mean, 2) / 8;
    for (int n = 0; n < 2; n++)
      for (int s = 0; s < 4; s++) {
        int i = (n * 3 + c) * 4 + s;
        double want = g(&q[0], c) * (g(&x, i) - mean) / sqrt(var + 1e-5) + g(&q[1], c);
        assert_true(fabs(g(&out[0], i) - want) < 1e-4);
      }
    assert_true(fabs(g(&out[1], c) - (g(&q[2], c) * 0.8 + mean * 0.2)) < 1e-5);
    assert_true(fabs(g(&out[2], c) - (g(&q[3], c) * 0.8 + var * 0.2)) < 1e-5);
    assert_true(fabs(g(&out[3], c) - mean) < 1e-5);
    assert_true(fabs(g(&out[4], c) - var) < 1e-5);
  }
  for (int i = 0; i < 5; i++) alma_tensor_free_data(&out[i]);
  /* opset 14 without training_mode: inference even with 3 outputs declared */
  tn_make(&t, "BatchNormalization", 15, 5, 1);
  assert_int_equal(tn_exec(&t, in2, 5, out, 1), ALMA_OK);
  for (int i = 0; i < 24; i++) {
    int c = (i / 4) % 3;
    double want = g(&q[0], c) * (g(&x, i) - g(&q[2], c)) / sqrt(g(&q[3], c) + 1e-5) + g(&q[1], c);
    assert_true(fabs(g(&out[0], i) - want) < 1e-4);
  }
  alma_tensor_free_data(&out[0]);
  /* wrong parameter size */
  in2[1] = &ps[0];
  tn_make(&t, "BatchNormalization", 15, 5, 1);
  assert_int_equal(tn_exec(&t, in2, 5, out, 1), ALMA_ERR_SHAPE);
  alma_tensor_free_data(&x);
  for (int i = 0; i < 4; i++) alma_tensor_free_data(&ps[i]), alma_tensor_free_data(&q[i]);
}

static void test_layernorm_outputs(void **state) {
  (void)state;
  int64_t xd[3] = {2, 3, 4}, sd[1] = {4}, bd[2] = {1, 4};
  alma_tensor x = mkt(ALMA_DTYPE_FLOAT64, 3, xd, NULL), sc = mkt(ALMA_DTYPE_FLOAT64, 1, sd, NULL),
              b = mkt(ALMA_DTYPE_FLOAT64, 2, bd, NULL), out[3];
  alma_tensor *in[3] = {&x, &sc, &b};
  tnode t;
  tn_make(&t, "LayerNormalization", 17, 3, 3);
  attr_i(&t, "axis", 1);
  attr_f(&t, "epsilon", 1e-3f);
  /* Scale [4] and B [1,4] broadcast to the normalized shape [3,4] */
  assert_int_equal(tn_exec(&t, in, 3, out, 3), ALMA_OK);
  int64_t md[3] = {2, 1, 1};
  check_shape(&out[1], 3, md);
  assert_int_equal(out[1].dtype, ALMA_DTYPE_FLOAT32);
  for (int r = 0; r < 2; r++) {
    double m = 0, v = 0;
    for (int j = 0; j < 12; j++) m += g(&x, r * 12 + j) / 12;
    for (int j = 0; j < 12; j++) v += pow(g(&x, r * 12 + j) - m, 2) / 12;
    double isd = 1 / sqrt(v + (double)1e-3f);
    assert_true(fabs(g(&out[1], r) - m) < 1e-6);
    assert_true(fabs(g(&out[2], r) - isd) < 1e-4 * isd);
    for (int j = 0; j < 12; j++) {
      double want = (g(&x, r * 12 + j) - m) * isd * g(&sc, j % 4) + g(&b, j % 4);
      assert_true(fabs(g(&out[0], r * 12 + j) - want) < 1e-9);
    }
  }
  for (int i = 0; i < 3; i++) alma_tensor_free_data(&out[i]);
  alma_tensor_free_data(&x), alma_tensor_free_data(&sc), alma_tensor_free_data(&b);
}

/* ---- Softmax ----------------------------------------------------------------------------- */

static void test_softmax_legacy_axis(void **state) {
  (void)state;
  int64_t xd[3] = {2, 3, 4};
  alma_tensor x = mkt(ALMA_DTYPE_FLOAT32, 3, xd, NULL), out;
  alma_tensor *in[1] = {&x};
  for (int legacy = 0; legacy < 2; legacy++)
    for (int is_log = 0; is_log < 2; is_log++) {
      tnode t;
      tn_make(&t, is_log ? "LogSoftmax" : "Softmax", legacy ? 11 : 13, 1, 1);
      attr_i(&t, "axis", 1);
      assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
      double ref[24];
      if (legacy) { /* rows of 12 (dims 1 and 2 flattened) */
        for (int r = 0; r < 2; r++) {
          double s = 0;
          for (int j = 0; j < 12; j++) s += exp(g(&x, r * 12 + j));
          for (int j = 0; j < 12; j++) ref[r * 12 + j] = is_log ? g(&x, r * 12 + j) - log(s) : exp(g(&x, r * 12 + j)) / s;
        }
      } else { /* along axis 1 only */
        for (int o = 0; o < 2; o++)
          for (int i = 0; i < 4; i++) {
            double s = 0;
            for (int j = 0; j < 3; j++) s += exp(g(&x, (o * 3 + j) * 4 + i));
            for (int j = 0; j < 3; j++) {
              double v = g(&x, (o * 3 + j) * 4 + i);
              ref[(o * 3 + j) * 4 + i] = is_log ? v - log(s) : exp(v) / s;
            }
          }
      }
      expect_close(&out, ref, 1e-5);
      alma_tensor_free_data(&out);
    }
  /* default axis: 1 before 13, -1 from 13; float16 path */
  alma_tensor h = mkt(ALMA_DTYPE_FLOAT16, 3, xd, NULL);
  in[0] = &h;
  tnode t;
  tn_make(&t, "Softmax", 13, 1, 1);
  assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  for (int r = 0; r < 6; r++) {
    double s = 0;
    for (int j = 0; j < 4; j++) s += g(&out, r * 4 + j);
    assert_true(fabs(s - 1) < 3e-3);
  }
  alma_tensor_free_data(&out);
  tn_make(&t, "Softmax", 13, 1, 1);
  attr_i(&t, "axis", 3);
  assert_int_not_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  alma_tensor_free_data(&x), alma_tensor_free_data(&h);
}

/* Softmax/LogSoftmax along a strided axis (float32: vectorised over the elements after the axis)
 * against a double reference, for inner sizes on both sides of the 8-lane vectors and tails, with
 * large values, a column holding -inf and a column of only -inf (NaN out, as the reference). */
static void test_softmax_strided(void **state) {
  (void)state;
  static const int64_t inners[] = {2, 7, 8, 13, 24, 35};
  for (size_t ii = 0; ii < sizeof inners / sizeof inners[0]; ii++)
    for (int is_log = 0; is_log < 2; is_log++) {
      int64_t inner = inners[ii], N = 5, xd[3] = {3, N, inner}, cnt = 3 * N * inner;
      alma_tensor x = mkt(ALMA_DTYPE_FLOAT32, 3, xd, NULL), out;
      float *xv = x.data;
      for (int64_t k = 0; k < cnt; k++) xv[k] = xv[k] * 40.0f - 20.0f + (k % 11 == 0 ? 60.0f : 0.0f);
      xv[(1 * N + 2) * inner + inner - 1] = -INFINITY; /* one -inf in a column */
      for (int64_t j = 0; j < N; j++) xv[(2 * N + j) * inner + 1] = -INFINITY; /* a column of -inf */
      alma_tensor *in[1] = {&x};
      tnode t;
      tn_make(&t, is_log ? "LogSoftmax" : "Softmax", 13, 1, 1);
      attr_i(&t, "axis", 1);
      assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
      for (int64_t o = 0; o < 3; o++)
        for (int64_t i = 0; i < inner; i++) {
          double m = -INFINITY, s = 0;
          for (int64_t j = 0; j < N; j++) m = fmax(m, xv[(o * N + j) * inner + i]);
          if (m == -INFINITY) m = 0;
          for (int64_t j = 0; j < N; j++) s += exp(xv[(o * N + j) * inner + i] - m);
          for (int64_t j = 0; j < N; j++) {
            int64_t k = (o * N + j) * inner + i;
            double v = xv[k] - m, want = is_log ? v - log(s) : exp(v) / s, got = g(&out, k);
            if (isnan(want)) assert_true(isnan(got));
            else if (isinf(want)) assert_true(got == want);
            else assert_true(fabs(got - want) <= 1e-5 * fmax(1.0, fabs(want)));
          }
        }
      alma_tensor_free_data(&out);
      alma_tensor_free_data(&x);
    }
}

/* ---- Gemm / MatMul ----------------------------------------------------------------------- */

static void test_gemm_broadcast_and_types(void **state) {
  (void)state;
  int64_t ad[2] = {4, 3}, bd[2] = {5, 4}; /* transA: A^T is [3,4]; transB: B^T is [4,5] -> Y [3,5] */
  int64_t cshapes[][2] = {{5, 0}, {3, 1}, {1, 5}, {3, 5}};
  int cranks[] = {1, 2, 2, 2};
  for (int ci = 0; ci < 5; ci++) {
    alma_tensor a = mkt(ALMA_DTYPE_FLOAT32, 2, ad, NULL), b = mkt(ALMA_DTYPE_FLOAT32, 2, bd, NULL), c, out;
    if (ci < 4)
      c = mkt(ALMA_DTYPE_FLOAT32, cranks[ci], cshapes[ci], NULL);
    else
      c = mkt(ALMA_DTYPE_FLOAT32, 0, NULL, NULL);
    alma_tensor *in[3] = {&a, &b, &c};
    tnode t;
    tn_make(&t, "Gemm", 13, 3, 1);
    attr_i(&t, "transA", 1);
    attr_i(&t, "transB", 1);
    attr_f(&t, "alpha", 0.5f);
    attr_f(&t, "beta", -2.0f);
    assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_OK);
    double ref[15];
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 5; j++) {
        double acc = 0;
        for (int k = 0; k < 4; k++) acc += g(&a, k * 3 + i) * g(&b, j * 4 + k);
        int64_t cidx = alma__broadcast_index(i * 5 + j, 2, (int64_t[]){3, 5}, c.rank, c.dims);
        ref[i * 5 + j] = 0.5 * acc - 2.0 * g(&c, cidx);
      }
    expect_close(&out, ref, 1e-5);
    alma_tensor_free_data(&a), alma_tensor_free_data(&b), alma_tensor_free_data(&c), alma_tensor_free_data(&out);
  }
  /* C [2,5] does not broadcast to [3,5]; C is required before opset 11 */
  alma_tensor a = mkt(ALMA_DTYPE_FLOAT32, 2, ad, NULL), b = mkt(ALMA_DTYPE_FLOAT32, 2, bd, NULL), out;
  int64_t bad[2] = {2, 5};
  alma_tensor c = mkt(ALMA_DTYPE_FLOAT32, 2, bad, NULL);
  alma_tensor *in[3] = {&a, &b, &c};
  tnode t;
  tn_make(&t, "Gemm", 13, 3, 1);
  attr_i(&t, "transA", 1);
  attr_i(&t, "transB", 1);
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_ERR_SHAPE);
  tn_make(&t, "Gemm", 9, 2, 1);
  assert_int_not_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
  alma_tensor_free_data(&a), alma_tensor_free_data(&b), alma_tensor_free_data(&c);
  /* int64 Gemm with wrap-free small values, bias added exactly */
  int64_t id[2] = {2, 2};
  double av[4] = {1, 2, 3, 4}, bv[4] = {5, 6, 7, 8}, cv[4] = {100, 200, 300, 400};
  alma_tensor ai = mkt(ALMA_DTYPE_INT64, 2, id, av), bi = mkt(ALMA_DTYPE_INT64, 2, id, bv),
              cii = mkt(ALMA_DTYPE_INT64, 2, id, cv);
  alma_tensor *ini[3] = {&ai, &bi, &cii};
  tn_make(&t, "Gemm", 13, 3, 1);
  assert_int_equal(tn_exec(&t, ini, 3, &out, 1), ALMA_OK);
  int64_t want[4] = {119, 222, 343, 450};
  for (int i = 0; i < 4; i++) assert_int_equal(((int64_t *)out.data)[i], want[i]);
  alma_tensor_free_data(&out);
  alma_tensor_free_data(&ai), alma_tensor_free_data(&bi), alma_tensor_free_data(&cii);
}

static void matmul_check(alma_dtype dt, int ra, const int64_t *da, int rb, const int64_t *db, int ro,
                         const int64_t *dout) {
  alma_tensor a = mkt(dt, ra, da, NULL), b = mkt(dt, rb, db, NULL), out;
  if (alma__dtype_is_int(dt)) { /* small integers (non-negative for unsigned types) */
    int sg = alma__dtype_is_signed(dt);
    for (int64_t i = 0; i < alma_tensor_numel(&a); i++) alma__set_i64(a.data, dt, i, (i * 7) % 5 - 2 * sg);
    for (int64_t i = 0; i < alma_tensor_numel(&b); i++) alma__set_i64(b.data, dt, i, (i * 3) % 7 - 3 * sg);
  }
  alma_tensor *in[2] = {&a, &b};
  tnode t;
  tn_make(&t, "MatMul", 13, 2, 1);
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
  check_shape(&out, ro, dout);
  /* reference through numpy's promotion rules */
  int64_t pa[8], pb[8];
  int pra = ra == 1 ? 2 : ra, prb = rb == 1 ? 2 : rb;
  if (ra == 1) pa[0] = 1, pa[1] = da[0];
  else memcpy(pa, da, sizeof(int64_t) * (size_t)ra);
  if (rb == 1) pb[0] = db[0], pb[1] = 1;
  else memcpy(pb, db, sizeof(int64_t) * (size_t)rb);
  int64_t M = pa[pra - 2], K = pa[pra - 1], N = pb[prb - 1];
  int brank;
  int64_t bdims[8];
  assert_int_equal(alma__broadcast_shape(pra - 2, pa, prb - 2, pb, &brank, bdims), ALMA_OK);
  int64_t nb = alma__numel(brank, bdims);
  double *ref = malloc(sizeof(double) * (size_t)(nb * M * N));
  for (int64_t bi = 0; bi < nb; bi++) {
    int64_t ia = alma__broadcast_index(bi, brank, bdims, pra - 2, pa), ib = alma__broadcast_index(bi, brank, bdims, prb - 2, pb);
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double acc = 0;
        for (int64_t k = 0; k < K; k++) acc += g(&a, (ia * M + i) * K + k) * g(&b, (ib * K + k) * N + j);
        ref[(bi * M + i) * N + j] = acc;
      }
  }
  expect_close(&out, ref, dt == ALMA_DTYPE_FLOAT16 ? 1e-2 : 1e-5);
  free(ref);
  alma_tensor_free_data(&a), alma_tensor_free_data(&b), alma_tensor_free_data(&out);
}

static void test_matmul_shapes(void **state) {
  (void)state;
  matmul_check(ALMA_DTYPE_FLOAT32, 1, (int64_t[]){4}, 1, (int64_t[]){4}, 0, NULL);
  matmul_check(ALMA_DTYPE_FLOAT32, 1, (int64_t[]){4}, 3, (int64_t[]){2, 4, 3}, 2, (int64_t[]){2, 3});
  matmul_check(ALMA_DTYPE_FLOAT32, 3, (int64_t[]){2, 5, 4}, 1, (int64_t[]){4}, 2, (int64_t[]){2, 5});
  matmul_check(ALMA_DTYPE_FLOAT32, 4, (int64_t[]){2, 1, 3, 4}, 3, (int64_t[]){5, 4, 2}, 4, (int64_t[]){2, 5, 3, 2});
  matmul_check(ALMA_DTYPE_FLOAT32, 3, (int64_t[]){3, 7, 9}, 2, (int64_t[]){9, 6}, 3, (int64_t[]){3, 7, 6});
  matmul_check(ALMA_DTYPE_FLOAT32, 2, (int64_t[]){7, 9}, 3, (int64_t[]){3, 9, 6}, 3, (int64_t[]){3, 7, 6});
  matmul_check(ALMA_DTYPE_FLOAT64, 3, (int64_t[]){2, 3, 4}, 3, (int64_t[]){1, 4, 5}, 3, (int64_t[]){2, 3, 5});
  matmul_check(ALMA_DTYPE_FLOAT16, 2, (int64_t[]){3, 8}, 2, (int64_t[]){8, 2}, 2, (int64_t[]){3, 2});
  matmul_check(ALMA_DTYPE_INT32, 3, (int64_t[]){2, 3, 4}, 2, (int64_t[]){4, 5}, 3, (int64_t[]){2, 3, 5});
  matmul_check(ALMA_DTYPE_UINT64, 2, (int64_t[]){3, 4}, 2, (int64_t[]){4, 2}, 2, (int64_t[]){3, 2});
  /* mismatched inner dims */
  int64_t da[2] = {2, 3}, db[2] = {4, 2};
  alma_tensor a = mkt(ALMA_DTYPE_FLOAT32, 2, da, NULL), b = mkt(ALMA_DTYPE_FLOAT32, 2, db, NULL), out;
  alma_tensor *in[2] = {&a, &b};
  tnode t;
  tn_make(&t, "MatMul", 13, 2, 1);
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_ERR_SHAPE);
  alma_tensor_free_data(&a), alma_tensor_free_data(&b);
}

/* ---- Einsum ------------------------------------------------------------------------------ */

/* Naive einsum over up to 3 operands of the letters a..h (no ellipsis), for cross-checking. */
static void einsum_naive(const char *const *terms, int nops, const char *outt, alma_tensor *const *ops, double *ref,
                         const int64_t *size /* per letter a..h */) {
  int nl = 8, used[8] = {0};
  for (int o = 0; o < nops; o++)
    for (const char *p = terms[o]; *p; p++) used[*p - 'a'] = 1;
  int64_t total = 1;
  for (int l = 0; l < nl; l++) total *= used[l] ? size[l] : 1;
  int64_t on = 1;
  for (const char *p = outt; *p; p++) on *= size[*p - 'a'];
  for (int64_t i = 0; i < on; i++) ref[i] = 0;
  for (int64_t it = 0; it < total; it++) {
    int64_t idx[8], r = it;
    for (int l = nl - 1; l >= 0; l--) {
      int64_t s = used[l] ? size[l] : 1;
      idx[l] = r % s;
      r /= s;
    }
    double prod = 1;
    for (int o = 0; o < nops; o++) {
      int64_t off = 0;
      for (const char *p = terms[o]; *p; p++) off = off * size[*p - 'a'] + idx[*p - 'a'];
      prod *= g(ops[o], off);
    }
    int64_t oo = 0;
    for (const char *p = outt; *p; p++) oo = oo * size[*p - 'a'] + idx[*p - 'a'];
    ref[oo] += prod;
  }
}

static void einsum_case(const char *eq, int nops, const char *const *terms, const char *outt, const int64_t *size,
                        alma_dtype dt) {
  alma_tensor ops[3], out;
  alma_tensor *in[3];
  for (int o = 0; o < nops; o++) {
    int64_t d[8];
    int r = 0;
    for (const char *p = terms[o]; *p; p++) d[r++] = size[*p - 'a'];
    ops[o] = mkt(dt, r, d, NULL);
    if (alma__dtype_is_int(dt))
      for (int64_t i = 0; i < alma_tensor_numel(&ops[o]); i++) alma__set_i64(ops[o].data, dt, i, (i * 5 + o) % 7 - 3);
    in[o] = &ops[o];
  }
  tnode t;
  tn_make(&t, "Einsum", 12, nops, 1);
  attr_s(&t, "equation", eq);
  alma_status st = tn_exec(&t, in, nops, &out, 1);
  if (st != ALMA_OK) print_error("%s: %s\n", eq, alma_last_error());
  assert_int_equal(st, ALMA_OK);
  assert_int_equal(out.rank, (int)strlen(outt));
  double ref[4096];
  einsum_naive(terms, nops, outt, in, ref, size);
  if (!alma__dtype_is_int(dt)) expect_close(&out, ref, dt == ALMA_DTYPE_FLOAT16 ? 1e-2 : 1e-5);
  else
    for (int64_t i = 0; i < alma_tensor_numel(&out); i++) assert_int_equal(alma__get_i64(out.data, dt, i), (int64_t)ref[i]);
  for (int o = 0; o < nops; o++) alma_tensor_free_data(&ops[o]);
  alma_tensor_free_data(&out);
}

static void test_einsum_equations(void **state) {
  (void)state;
  const int64_t sz[8] = {2, 3, 4, 5, 3, 0, 0, 0}; /* a b c d e */
  einsum_case("ab,bc,cd->ad", 3, (const char *[]){"ab", "bc", "cd"}, "ad", sz, ALMA_DTYPE_FLOAT32);
  einsum_case("ab,bc,cd", 3, (const char *[]){"ab", "bc", "cd"}, "ad", sz, ALMA_DTYPE_FLOAT64);
  einsum_case("ba", 1, (const char *[]){"ba"}, "ab", sz, ALMA_DTYPE_FLOAT32);          /* implicit: sorted */
  einsum_case("be,eb", 2, (const char *[]){"be", "eb"}, "", sz, ALMA_DTYPE_FLOAT32);    /* full contraction */
  einsum_case("bb->b", 1, (const char *[]){"bb"}, "b", sz, ALMA_DTYPE_FLOAT32);         /* diagonal */
  einsum_case("bb", 1, (const char *[]){"bb"}, "", sz, ALMA_DTYPE_FLOAT64);             /* trace */
  einsum_case("a,c->ca", 2, (const char *[]){"a", "c"}, "ca", sz, ALMA_DTYPE_FLOAT32);  /* outer */
  einsum_case("abc,abd->acd", 2, (const char *[]){"abc", "abd"}, "acd", sz, ALMA_DTYPE_FLOAT32);
  einsum_case("abc,cd,ad->b", 3, (const char *[]){"abc", "cd", "ad"}, "b", sz, ALMA_DTYPE_FLOAT32);
  einsum_case("abc,bd->dca", 2, (const char *[]){"abc", "bd"}, "dca", sz, ALMA_DTYPE_INT64);
  einsum_case("abc->", 1, (const char *[]){"abc"}, "", sz, ALMA_DTYPE_INT32);
  einsum_case("ab,ab->ab", 2, (const char *[]){"ab", "ab"}, "ab", sz, ALMA_DTYPE_FLOAT16);
}

static void test_einsum_ellipsis_and_errors(void **state) {
  (void)state;
  /* "...ij,...jk->...ik" with broadcast batch dims [2,1] x [3] -> [2,3] */
  int64_t da[4] = {2, 1, 3, 4}, db[3] = {3, 4, 2};
  alma_tensor a = mkt(ALMA_DTYPE_FLOAT32, 4, da, NULL), b = mkt(ALMA_DTYPE_FLOAT32, 3, db, NULL), out;
  alma_tensor *in[2] = {&a, &b};
  tnode t;
  tn_make(&t, "Einsum", 12, 2, 1);
  attr_s(&t, "equation", "...ij, ...jk -> ...ik");
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
  int64_t od[4] = {2, 3, 3, 2};
  check_shape(&out, 4, od);
  for (int x = 0; x < 2; x++)
    for (int y = 0; y < 3; y++)
      for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++) {
          double acc = 0;
          for (int j = 0; j < 4; j++) acc += g(&a, (x * 3 + i) * 4 + j) * g(&b, (y * 4 + j) * 2 + k);
          assert_true(fabs(g(&out, ((x * 3 + y) * 3 + i) * 2 + k) - acc) < 1e-5);
        }
  alma_tensor_free_data(&out);
  /* implicit output with ellipsis: "...ij,...jk" -> "...ik" */
  tn_make(&t, "Einsum", 12, 2, 1);
  attr_s(&t, "equation", "...ij,...jk");
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
  check_shape(&out, 4, od);
  alma_tensor_free_data(&out);
  static const char *bad[] = {"ij,jk->q", "ij->ii", "i.j,jk", "ijk,jk", "ij,jk,kl", "ij,jk->i?", "ij,ik->ijj"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tn_make(&t, "Einsum", 12, 2, 1);
    attr_s(&t, "equation", bad[i]);
    assert_int_not_equal(tn_exec(&t, in, 2, &out, 1), ALMA_OK);
  }
  /* label size mismatch */
  tn_make(&t, "Einsum", 12, 2, 1);
  attr_s(&t, "equation", "...ij,...ij");
  assert_int_equal(tn_exec(&t, in, 2, &out, 1), ALMA_ERR_SHAPE);
  alma_tensor_free_data(&a), alma_tensor_free_data(&b);
}

/* ---- LRN / InstanceNormalization --------------------------------------------------------- */

static void test_lrn_instancenorm(void **state) {
  (void)state;
  int64_t xd[4] = {1, 5, 2, 2}, pd[1] = {5};
  alma_tensor x = mkt(ALMA_DTYPE_FLOAT64, 4, xd, NULL), out;
  alma_tensor *in[3] = {&x};
  tnode t;
  tn_make(&t, "LRN", 13, 1, 1);
  attr_i(&t, "size", 4);
  attr_f(&t, "alpha", 0.5f);
  attr_f(&t, "beta", 0.6f);
  attr_f(&t, "bias", 1.5f);
  assert_int_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  for (int c = 0; c < 5; c++)
    for (int s = 0; s < 4; s++) {
      double sq = 0;
      for (int k = c - 1; k <= c + 2; k++) /* floor(3/2) = 1 below, ceil(3/2) = 2 above */
        if (k >= 0 && k < 5) sq += pow(g(&x, k * 4 + s), 2);
      double want = g(&x, c * 4 + s) / pow(1.5 + 0.5 / 4 * sq, 0.6);
      assert_true(fabs(g(&out, c * 4 + s) - want) < 1e-6);
    }
  alma_tensor_free_data(&out);
  tn_make(&t, "LRN", 13, 1, 1); /* size is required */
  assert_int_not_equal(tn_exec(&t, in, 1, &out, 1), ALMA_OK);
  alma_tensor sc = mkt(ALMA_DTYPE_FLOAT64, 1, pd, NULL), b = mkt(ALMA_DTYPE_FLOAT64, 1, pd, NULL);
  in[1] = &sc, in[2] = &b;
  tn_make(&t, "InstanceNormalization", 6, 3, 1);
  assert_int_equal(tn_exec(&t, in, 3, &out, 1), ALMA_OK);
  for (int c = 0; c < 5; c++) {
    double m = 0, v = 0;
    for (int s = 0; s < 4; s++) m += g(&x, c * 4 + s) / 4;
    for (int s = 0; s < 4; s++) v += pow(g(&x, c * 4 + s) - m, 2) / 4;
    for (int s = 0; s < 4; s++)
      assert_true(fabs(g(&out, c * 4 + s) - (g(&sc, c) * (g(&x, c * 4 + s) - m) / sqrt(v + 1e-5) + g(&b, c))) < 1e-6);
  }
  alma_tensor_free_data(&out);
  alma_tensor_free_data(&x), alma_tensor_free_data(&sc), alma_tensor_free_data(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sgemm_shapes),
      cmocka_unit_test(test_sgemm_rows),
      cmocka_unit_test(test_conv_vs_naive),
      cmocka_unit_test(test_conv_errors),
      cmocka_unit_test(test_convtranspose_vs_naive),
      cmocka_unit_test(test_maxpool_indices_and_versions),
      cmocka_unit_test(test_avgpool_versions),
      cmocka_unit_test(test_batchnorm_legacy_and_training),
      cmocka_unit_test(test_layernorm_outputs),
      cmocka_unit_test(test_softmax_legacy_axis),
      cmocka_unit_test(test_softmax_strided),
      cmocka_unit_test(test_gemm_broadcast_and_types),
      cmocka_unit_test(test_matmul_shapes),
      cmocka_unit_test(test_einsum_equations),
      cmocka_unit_test(test_einsum_ellipsis_and_errors),
      cmocka_unit_test(test_lrn_instancenorm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
