/* Few-row products on packed weights (alma__sgemm_pack / alma__sgemm_packed_rows, ops/sgemm.h):
 *  - bit for bit what the unpacked few-rows kernel gives one row at a time (alma__sgemm_bias with
 *    M = 1 on op(B) stored row-major: scale_c's beta and biases, then the same sum in the same
 *    order), for M 1..17 and 121 (rows taken in chunks), N and K not multiples of 8 or 16, B stored transposed or not, alpha,
 *    beta 0 (NaN in C ignored) / 1 / other, row and column biases; and close to a double-precision
 *    sum;
 *  - the same bits whatever split of the panels (threads take panel ranges);
 *  - alpha = 0 leaves beta * C + biases (no NaN from A);
 *  - a size that overflows is refused without allocating;
 *  - through the ops: a MatMul and a Gemm node whose B is a graph initializer (packed) give the
 *    unpacked kernel's bits for M < 4 and a double-precision sum's value for M up to 16, and the
 *    same bits with the panels split over a runtime's parallel loop;
 *  - recurrent nodes keep their constant W and R packed, within the budget (test_rnn), and
 *    DynamicQuantizeLSTM its weights dequantized and packed (test_dq_lstm). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "ops/gemm_packed.h"
#include "ops/op.h"
#include "ops/qgemm.h"
#include "ops/sgemm.h"

static uint32_t rng = 12345;
static float frand(void) {
  rng = rng * 1664525u + 1013904223u;
  return (float)((rng >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

/* op(B) row-major [K, N] from B stored [K, N] or [N, K] */
static float *op_b(int tb, int K, int N, const float *B) {
  float *o = malloc(sizeof(float) * (size_t)K * (size_t)N);
  for (int k = 0; k < K; k++)
    for (int j = 0; j < N; j++) o[k * N + j] = tb ? B[j * K + k] : B[k * N + j];
  return o;
}

static void check_case(int M, int N, int K, int tb, float alpha, float beta, int use_rb, int use_cb) {
  int ldb = tb ? K : N, lda = K + 3, ldc = N + 5;
  float *A = malloc(sizeof(float) * (size_t)M * lda), *B = malloc(sizeof(float) * (size_t)K * N);
  float *C0 = malloc(sizeof(float) * (size_t)M * ldc), *C = malloc(sizeof(float) * (size_t)M * ldc);
  float *R = malloc(sizeof(float) * (size_t)M * ldc), *S = malloc(sizeof(float) * (size_t)M * ldc);
  float *rb = malloc(sizeof(float) * (size_t)M), *cb = malloc(sizeof(float) * (size_t)N);
  for (int i = 0; i < M * lda; i++) A[i] = frand();
  for (int i = 0; i < K * N; i++) B[i] = frand();
  for (int i = 0; i < M * ldc; i++) C0[i] = beta == 0.0f ? NAN : frand();
  for (int i = 0; i < M; i++) rb[i] = frand();
  for (int j = 0; j < N; j++) cb[j] = frand();
  const float *rbp = use_rb ? rb : NULL, *cbp = use_cb ? cb : NULL;
  alma__sgemm_packed pk;
  assert_int_equal(alma__sgemm_pack(tb, K, N, B, ldb, &pk), ALMA_OK);
  assert_int_equal(pk.panels, (N + ALMA_SGEMM_PANEL - 1) / ALMA_SGEMM_PANEL);
  memcpy(C, C0, sizeof(float) * (size_t)M * ldc);
  alma__sgemm_packed_rows(M, 0, pk.panels, alpha, A, lda, &pk, beta, C, ldc, rbp, cbp);
  /* the unpacked kernel, one row at a time, on op(B) row-major */
  float *Bo = op_b(tb, K, N, B);
  memcpy(R, C0, sizeof(float) * (size_t)M * ldc);
  for (int i = 0; i < M; i++)
    assert_int_equal(alma__sgemm_bias(0, 0, 1, N, K, alpha, A + i * lda, lda, Bo, N, beta, R + i * ldc, ldc,
                                      rbp ? rbp + i : NULL, cbp),
                     ALMA_OK);
  /* panels split in two uneven parts (two threads) */
  memcpy(S, C0, sizeof(float) * (size_t)M * ldc);
  int64_t mid = pk.panels / 3;
  alma__sgemm_packed_rows(M, mid, pk.panels, alpha, A, lda, &pk, beta, S, ldc, rbp, cbp);
  alma__sgemm_packed_rows(M, 0, mid, alpha, A, lda, &pk, beta, S, ldc, rbp, cbp);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < ldc; j++) {
      float c = C[i * ldc + j], r = R[i * ldc + j], s = S[i * ldc + j];
      if (j >= N) { /* padding columns of C untouched */
        assert_memory_equal(&c, &C0[i * ldc + j], sizeof c);
        continue;
      }
      if (memcmp(&c, &r, sizeof c) || memcmp(&c, &s, sizeof c))
        fail_msg("M=%d N=%d K=%d tb=%d alpha=%g beta=%g rb=%d cb=%d: C[%d,%d] packed %.9g, unpacked %.9g, split %.9g", M,
                 N, K, tb, alpha, beta, use_rb, use_cb, i, j, c, r, s);
      double ref = beta == 0.0f ? 0.0 : (double)beta * C0[i * ldc + j], mag = fabs(ref);
      if (rbp) ref += rbp[i], mag += fabs(rbp[i]);
      if (cbp) ref += cbp[j], mag += fabs(cbp[j]);
      for (int k = 0; k < K; k++) {
        double t = (double)alpha * A[i * lda + k] * Bo[k * N + j];
        ref += t;
        mag += fabs(t);
      }
      if (fabs(c - ref) > 1e-6 * (K + 4) * (mag + 1e-30))
        fail_msg("M=%d N=%d K=%d: C[%d,%d] %.9g vs double %.9g", M, N, K, i, j, c, ref);
    }
  alma__sgemm_packed_free(&pk);
  assert_null(pk.p);
  free(Bo);
  free(A), free(B), free(C0), free(C), free(R), free(S), free(rb), free(cb);
}

static void test_shapes(void **state) {
  (void)state;
  static const int Ns[] = {1, 7, 16, 17, 40, 67, 200}, Ks[] = {1, 3, 9, 33, 130};
  for (int M = 1; M <= 6; M++)
    for (size_t a = 0; a < sizeof Ns / sizeof *Ns; a++)
      for (size_t b = 0; b < sizeof Ks / sizeof *Ks; b++)
        for (int tb = 0; tb < 2; tb++) check_case(M, Ns[a], Ks[b], tb, 1.0f, 0.0f, 0, 0);
  for (int M = 7; M <= 17; M += 5) check_case(M, 45, 70, M & 1, 1.0f, 0.0f, 0, 1);
  /* rows in chunks of A (a recurrent node's input projection over all steps) */
  check_case(121, 45, 700, 1, 1.0f, 0.0f, 0, 1);
}

static void test_alpha_beta_bias(void **state) {
  (void)state;
  static const float alphas[] = {1.0f, 0.5f, -1.25f}, betas[] = {0.0f, 1.0f, 0.75f};
  for (int M = 1; M <= 5; M++)
    for (int ai = 0; ai < 3; ai++)
      for (int bi = 0; bi < 3; bi++)
        for (int bias = 0; bias < 4; bias++) check_case(M, 23, 19, bias & 1, alphas[ai], betas[bi], bias & 1, bias >> 1);
}

static void test_alpha_zero(void **state) {
  (void)state;
  float A[2 * 4] = {NAN, 1, 2, 3, 4, 5, 6, INFINITY}, B[4 * 3] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  float C[2 * 3] = {1, 2, 3, 4, 5, 6}, cb[3] = {10, 20, 30};
  alma__sgemm_packed pk;
  assert_int_equal(alma__sgemm_pack(0, 4, 3, B, 3, &pk), ALMA_OK);
  alma__sgemm_packed_rows(2, 0, pk.panels, 0.0f, A, 4, &pk, 2.0f, C, 3, NULL, cb);
  float want[6] = {12, 24, 36, 18, 30, 42};
  assert_memory_equal(C, want, sizeof want);
  alma__sgemm_packed_free(&pk);
}

static void test_size_refused(void **state) {
  (void)state;
  alma__sgemm_packed pk;
  static const float one = 1.0f;
  /* the byte count overflows: refused before any allocation or read of B */
  assert_int_equal(alma__sgemm_pack(0, INT64_MAX / 8, INT64_MAX / 8, &one, 1, &pk), ALMA_ERR_NOMEM);
  assert_null(pk.p);
  assert_int_equal(alma__sgemm_pack(0, 0, 5, &one, 5, &pk), ALMA_ERR_INVALID_ARG);
  alma__error_clear();
}

/* A parallel loop that runs the items backwards on this thread, counting them. */
static int64_t par_items;
static void reverse_parfor(void *pctx, int64_t items, alma_exec_item_fn fn, void *arg) {
  (void)pctx;
  par_items = items;
  for (int64_t i = items - 1; i >= 0; i--) fn(arg, i);
}

/* One node y = op(x, w [, c]) with w an initializer; runs it through a context that knows the
 * graph's constants (packed) and through none (unpacked), and checks both. */
static void op_case(const char *op, int M, int K, int N, int with_c) {
  alma_graph *g = alma__graph_new(NULL);
  assert_non_null(g);
  int x = alma__graph_add_value(g, "x"), w = alma__graph_add_value(g, "w"), c = alma__graph_add_value(g, "c"),
      y = alma__graph_add_value(g, "y");
  float *X = malloc(sizeof(float) * (size_t)M * K), *W = malloc(sizeof(float) * (size_t)K * N);
  float *Cb = malloc(sizeof(float) * (size_t)N);
  for (int i = 0; i < M * K; i++) X[i] = frand();
  for (int i = 0; i < K * N; i++) W[i] = frand();
  for (int j = 0; j < N; j++) Cb[j] = frand();
  alma_tensor *wt = calloc(1, sizeof *wt);
  *wt = (alma_tensor){.dtype = ALMA_DTYPE_FLOAT32, .rank = 2, .dims = {K, N}, .data = W,
                      .nbytes = sizeof(float) * (size_t)K * N};
  g->values[w].init = wt;
  int ins[3] = {x, w, c};
  assert_int_equal(alma__graph_add_node(g, op, "", "n", ins, with_c ? 3 : 2, &y, 1), 0);
  assert_int_equal(alma__op_resolve(&g->nodes[0], 17), ALMA_OK);
  alma_tensor xt = {.dtype = ALMA_DTYPE_FLOAT32, .rank = 2, .dims = {M, K}, .data = X, .nbytes = sizeof(float) * (size_t)M * K};
  alma_tensor ct = {.dtype = ALMA_DTYPE_FLOAT32, .rank = 1, .dims = {N}, .data = Cb, .nbytes = sizeof(float) * (size_t)N};
  const alma_tensor *in[3] = {&xt, wt, &ct};
  alma_tensor packed, plain;
  assert_int_equal(alma__op_run_node_of(g, &g->nodes[0], in, with_c ? 3 : 2, &packed, 1, 1, NULL, NULL), ALMA_OK);
  assert_non_null(atomic_load(&g->nodes[0].prepared)); /* the packed copy is kept by the node */
  assert_int_equal(alma__op_run_node(NULL, &g->nodes[0], in, with_c ? 3 : 2, &plain, 1), ALMA_OK);
  /* the panels split over a runtime's "threads": the same bits */
  alma_tensor split;
  par_items = 0;
  assert_int_equal(alma__op_run_node_of(g, &g->nodes[0], in, with_c ? 3 : 2, &split, 1, 3, reverse_parfor, NULL),
                   ALMA_OK);
  assert_true(par_items > 1);
  assert_memory_equal(split.data, packed.data, sizeof(float) * (size_t)M * N);
  alma_tensor_free_data(&split);
  const float *P = packed.data, *U = plain.data;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double ref = with_c ? Cb[j] : 0.0, mag = fabs(ref);
      for (int k = 0; k < K; k++) ref += (double)X[i * K + k] * W[k * N + j], mag += fabs((double)X[i * K + k] * W[k * N + j]);
      if (M < 4 && memcmp(&P[i * N + j], &U[i * N + j], sizeof(float)))
        fail_msg("%s M=%d: [%d,%d] packed %.9g unpacked %.9g", op, M, i, j, P[i * N + j], U[i * N + j]);
      if (fabs(P[i * N + j] - ref) > 1e-6 * (K + 4) * (mag + 1e-30))
        fail_msg("%s M=%d: [%d,%d] packed %.9g double %.9g", op, M, i, j, P[i * N + j], ref);
    }
  alma_tensor_free_data(&packed);
  alma_tensor_free_data(&plain);
  g->values[w].init = NULL;
  alma__graph_free(g);
  free(wt), free(X), free(W), free(Cb);
}

static void test_ops(void **state) {
  (void)state;
  for (int M = 1; M <= ALMA_PACKED_MAX_ROWS; M += 3) {
    op_case("MatMul", M, 37, 50, 0);
    op_case("Gemm", M, 37, 50, 1);
  }
}

/* The budget: a node whose copy would pass it gets none (NULL: its caller runs the unpacked kernel),
 * nodes multiplying by the same constant share one copy (its bytes counted once), and the last node
 * of a copy gives its bytes back. */
static void test_budget(void **state) {
  (void)state;
  enum { K = 40, N = 20 }; /* 40 x 32 floats once padded to panels of 16 */
  static float W[K * N], W2[K * N];
  for (int i = 0; i < K * N; i++) W[i] = frand(), W2[i] = frand();
  alma_tensor w = {.dtype = ALMA_DTYPE_FLOAT32, .rank = 2, .dims = {K, N}, .data = W, .nbytes = sizeof W};
  alma_tensor w2 = {.dtype = ALMA_DTYPE_FLOAT32, .rank = 2, .dims = {K, N}, .data = W2, .nbytes = sizeof W2};
  alma_graph *g = alma__graph_new(NULL);
  assert_non_null(g);
  int x = alma__graph_add_value(g, "x"), wv = alma__graph_add_value(g, "w"), y1 = alma__graph_add_value(g, "y1"),
      y2 = alma__graph_add_value(g, "y2"), y3 = alma__graph_add_value(g, "y3");
  int in[2] = {x, wv};
  assert_int_equal(alma__graph_add_node(g, "MatMul", "", "a", in, 2, &y1, 1), 0);
  assert_int_equal(alma__graph_add_node(g, "MatMul", "", "b", in, 2, &y2, 1), 1);
  assert_int_equal(alma__graph_add_node(g, "MatMul", "", "c", in, 2, &y3, 1), 2);
  for (int i = 0; i < 3; i++) assert_int_equal(alma__op_resolve(&g->nodes[i], 17), ALMA_OK);
  int64_t before = alma__packed_gemm_bytes(), one = K * 32 * (int64_t)sizeof(float);
  alma__packed_gemm_set_budget(before + one + one / 2);
  const alma__sgemm_packed *pa = alma__gemm_packed_b(&g->nodes[0], 0, &w);
  assert_non_null(pa);
  assert_int_equal(alma__packed_gemm_bytes(), before + one);
  assert_ptr_equal(alma__gemm_packed_b(&g->nodes[1], 0, &w), pa); /* the same constant: the same copy */
  assert_int_equal(alma__packed_gemm_bytes(), before + one);
  const alma__sgemm_packed *pc = alma__gemm_packed_b(&g->nodes[2], 0, &w2); /* another: over the budget */
  alma__packed_gemm_set_budget((int64_t)1 << 40);
  assert_null(pc);
  assert_int_equal(alma__packed_gemm_bytes(), before + one);
  alma__graph_free(g);
  assert_int_equal(alma__packed_gemm_bytes(), before);
}

/* Recurrent nodes (ops/rnn.c): a bidirectional LSTM or GRU whose W and R are initializers keeps them
 * packed (the bytes taken from the budget once, on the first run; none again on later runs), gives
 * the same bits on every run and with its directions on a runtime's parallel loop, and agrees with
 * the path that packs per run (no context: W and R not known constant) to float rounding; past the
 * budget it takes that path, bit for bit. */
static void rnn_case(const char *op, int S, int B, int I, int H, int lbr) {
  int G = strcmp(op, "LSTM") ? 3 : 4, GH = G * H;
  alma_graph *g = alma__graph_new(NULL);
  assert_non_null(g);
  int x = alma__graph_add_value(g, "x"), w = alma__graph_add_value(g, "w"), r = alma__graph_add_value(g, "r"),
      b = alma__graph_add_value(g, "b"), y = alma__graph_add_value(g, "y");
  float *X = malloc(sizeof(float) * (size_t)S * B * I), *W = malloc(sizeof(float) * 2 * GH * I);
  float *R = malloc(sizeof(float) * 2 * GH * H), *Bv = malloc(sizeof(float) * 4 * GH);
  for (int i = 0; i < S * B * I; i++) X[i] = frand();
  for (int i = 0; i < 2 * GH * I; i++) W[i] = frand() * 0.3f;
  for (int i = 0; i < 2 * GH * H; i++) R[i] = frand() * 0.3f;
  for (int i = 0; i < 4 * GH; i++) Bv[i] = frand() * 0.3f;
  alma_tensor *wt = calloc(1, sizeof *wt), *rt = calloc(1, sizeof *rt);
  *wt = (alma_tensor){.dtype = ALMA_DTYPE_FLOAT32, .rank = 3, .dims = {2, GH, I}, .data = W,
                      .nbytes = sizeof(float) * 2 * (size_t)GH * I};
  *rt = (alma_tensor){.dtype = ALMA_DTYPE_FLOAT32, .rank = 3, .dims = {2, GH, H}, .data = R,
                      .nbytes = sizeof(float) * 2 * (size_t)GH * H};
  g->values[w].init = wt;
  g->values[r].init = rt;
  int ins[4] = {x, w, r, b};
  assert_int_equal(alma__graph_add_node(g, op, "", "n", ins, 4, &y, 1), 0);
  alma_node *n = &g->nodes[0];
  alma_attr at[3] = {{.name = "hidden_size", .type = ALMA_ATTR_INT, .i = H},
                     {.name = "direction", .type = ALMA_ATTR_STRING, .s = "bidirectional", .s_len = 13},
                     {.name = "linear_before_reset", .type = ALMA_ATTR_INT, .i = lbr}};
  n->attrs = at;
  n->n_attrs = G == 3 ? 3 : 2;
  assert_int_equal(alma__op_resolve(n, 14), ALMA_OK);
  alma_tensor xt = {.dtype = ALMA_DTYPE_FLOAT32, .rank = 3, .dims = {S, B, I}, .data = X,
                    .nbytes = sizeof(float) * (size_t)S * B * I};
  alma_tensor bt = {.dtype = ALMA_DTYPE_FLOAT32, .rank = 2, .dims = {2, 2 * GH}, .data = Bv,
                    .nbytes = sizeof(float) * 4 * (size_t)GH};
  const alma_tensor *in[4] = {&xt, wt, rt, &bt};
  size_t ny = sizeof(float) * (size_t)S * 2 * B * H;
  int64_t pad = 16, before = alma__packed_gemm_bytes();
  int64_t want = 2 * (int64_t)sizeof(float) *
                 ((int64_t)I * ((GH + pad - 1) / pad * pad) + (int64_t)H * (((G == 4 ? GH : 2 * H) + pad - 1) / pad * pad) +
                  (G == 4 ? 0 : (int64_t)H * ((H + pad - 1) / pad * pad)));
  alma_tensor first, again, par, plain, over;
  assert_int_equal(alma__op_run_node_of(g, n, in, 4, &first, 1, 1, NULL, NULL), ALMA_OK);
  assert_int_equal(alma__packed_gemm_bytes(), before + want);
  assert_int_equal(alma__op_run_node_of(g, n, in, 4, &again, 1, 1, NULL, NULL), ALMA_OK);
  assert_int_equal(alma__packed_gemm_bytes(), before + want);
  par_items = 0;
  assert_int_equal(alma__op_run_node_of(g, n, in, 4, &par, 1, 2, reverse_parfor, NULL), ALMA_OK);
  assert_int_equal(par_items, 2); /* one item per direction */
  assert_memory_equal(first.data, again.data, ny);
  assert_memory_equal(first.data, par.data, ny);
  assert_int_equal(alma__op_run_node(NULL, n, in, 4, &plain, 1), ALMA_OK);
  const float *P = first.data, *U = plain.data;
  for (size_t i = 0; i < ny / sizeof(float); i++)
    if (fabsf(P[i] - U[i]) > 1e-5f) fail_msg("%s: Y[%zu] packed %.9g, per run %.9g", op, i, P[i], U[i]);
  /* a second graph of the same node past the budget: no copy, the per-run path's bits */
  n->attrs = NULL, n->n_attrs = 0;
  g->values[w].init = g->values[r].init = NULL; /* the test's, not the graph's */
  alma__graph_free(g);
  assert_int_equal(alma__packed_gemm_bytes(), before);
  g = alma__graph_new(NULL);
  x = alma__graph_add_value(g, "x"), w = alma__graph_add_value(g, "w"), r = alma__graph_add_value(g, "r");
  b = alma__graph_add_value(g, "b"), y = alma__graph_add_value(g, "y");
  g->values[w].init = wt;
  g->values[r].init = rt;
  assert_int_equal(alma__graph_add_node(g, op, "", "n", ins, 4, &y, 1), 0);
  n = &g->nodes[0];
  n->attrs = at;
  n->n_attrs = G == 3 ? 3 : 2;
  assert_int_equal(alma__op_resolve(n, 14), ALMA_OK);
  alma__packed_gemm_set_budget(before + want - 1);
  assert_int_equal(alma__op_run_node_of(g, n, in, 4, &over, 1, 1, NULL, NULL), ALMA_OK);
  assert_int_equal(alma__packed_gemm_bytes(), before);
  assert_memory_equal(over.data, plain.data, ny);
  alma__packed_gemm_set_budget((int64_t)1 << 40);
  n->attrs = NULL, n->n_attrs = 0;
  g->values[w].init = g->values[r].init = NULL;
  alma__graph_free(g);
  alma_tensor *outs[] = {&first, &again, &par, &plain, &over};
  for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) alma_tensor_free_data(outs[i]);
  free(wt), free(rt), free(X), free(W), free(R), free(Bv);
}

static void test_rnn(void **state) {
  (void)state;
  rnn_case("LSTM", 7, 1, 21, 19, 0);
  rnn_case("LSTM", 3, 20, 5, 8, 0); /* a batch past ALMA_PACKED_MAX_ROWS: the per-step product packed too */
  rnn_case("GRU", 6, 3, 10, 17, 0);
  rnn_case("GRU", 5, 2, 9, 12, 1);
}

/* com.microsoft.DynamicQuantizeLSTM with int8 initializers: the node keeps its weights dequantized
 * and packed, or packed for the integer kernel where the CPU runs it (the bytes taken once, on the
 * first run), and every run, and a run without
 * a context (weights not known constant: dequantized and packed for that call), gives the same
 * bits. */
static void test_dq_lstm(void **state) {
  (void)state;
  enum { S = 5, B = 2, I = 13, H = 11, G4 = 44, D = 2 };
  static float X[S * B * I], Bv[D * 8 * H], wsc[D] = {0.02f, 0.03f}, rsc[D] = {0.025f, 0.015f};
  static int8_t W[D * I * G4], R[D * H * G4], wzp[D] = {3, -2}, rzp[D] = {0, 1};
  for (int i = 0; i < S * B * I; i++) X[i] = frand();
  for (int i = 0; i < D * 8 * H; i++) Bv[i] = frand() * 0.2f;
  for (int i = 0; i < D * I * G4; i++) W[i] = (int8_t)(frand() * 100);
  for (int i = 0; i < D * H * G4; i++) R[i] = (int8_t)(frand() * 100);
  alma_tensor wt = {.dtype = ALMA_DTYPE_INT8, .rank = 3, .dims = {D, I, G4}, .data = W, .nbytes = sizeof W};
  alma_tensor rt = {.dtype = ALMA_DTYPE_INT8, .rank = 3, .dims = {D, H, G4}, .data = R, .nbytes = sizeof R};
  alma_tensor xt = {.dtype = ALMA_DTYPE_FLOAT32, .rank = 3, .dims = {S, B, I}, .data = X, .nbytes = sizeof X};
  alma_tensor bt = {.dtype = ALMA_DTYPE_FLOAT32, .rank = 2, .dims = {D, 8 * H}, .data = Bv, .nbytes = sizeof Bv};
  alma_tensor ws = {.dtype = ALMA_DTYPE_FLOAT32, .rank = 1, .dims = {D}, .data = wsc, .nbytes = sizeof wsc};
  alma_tensor wz = {.dtype = ALMA_DTYPE_INT8, .rank = 1, .dims = {D}, .data = wzp, .nbytes = sizeof wzp};
  alma_tensor rs = {.dtype = ALMA_DTYPE_FLOAT32, .rank = 1, .dims = {D}, .data = rsc, .nbytes = sizeof rsc};
  alma_tensor rz = {.dtype = ALMA_DTYPE_INT8, .rank = 1, .dims = {D}, .data = rzp, .nbytes = sizeof rzp};
  alma_graph *g = alma__graph_new(NULL);
  assert_non_null(g);
  int v[12], y = 0;
  static const char *const names[12] = {"x", "w", "r", "b", "", "", "", "", "ws", "wz", "rs", "rz"};
  for (int k = 0; k < 12; k++) v[k] = names[k][0] ? alma__graph_add_value(g, names[k]) : -1;
  y = alma__graph_add_value(g, "y");
  g->values[v[1]].init = &wt;
  g->values[v[2]].init = &rt;
  assert_int_equal(alma__graph_add_node(g, "DynamicQuantizeLSTM", "com.microsoft", "n", v, 12, &y, 1), 0);
  alma_node *n = &g->nodes[0];
  alma_attr at[2] = {{.name = "hidden_size", .type = ALMA_ATTR_INT, .i = H},
                     {.name = "direction", .type = ALMA_ATTR_STRING, .s = "bidirectional", .s_len = 13}};
  n->attrs = at;
  n->n_attrs = 2;
  assert_int_equal(alma__op_resolve(n, 1), ALMA_OK);
  const alma_tensor *in[12] = {&xt, &wt, &rt, &bt, NULL, NULL, NULL, NULL, &ws, &wz, &rs, &rz};
  int64_t before = alma__packed_gemm_bytes();
  int64_t packs = 2 * (int64_t)sizeof(float) * ((int64_t)I * 48 + (int64_t)H * 48), deq = 2 * (int64_t)sizeof(float) * G4 * (I + H);
  if (alma__qgemm_available()) /* the integer kernel's packs instead (qgemm.h) */
    packs = D * (alma__qgemm_bytes(I, G4) + alma__qgemm_bytes(H, G4)), deq = 0;
  alma_tensor r1, r2, r3;
  assert_int_equal(alma__op_run_node_of(g, n, in, 12, &r1, 1, 1, NULL, NULL), ALMA_OK);
  assert_int_equal(alma__packed_gemm_bytes(), before + packs + deq);
  assert_int_equal(alma__op_run_node_of(g, n, in, 12, &r2, 1, 1, NULL, NULL), ALMA_OK);
  assert_int_equal(alma__packed_gemm_bytes(), before + packs + deq);
  assert_int_equal(alma__op_run_node(NULL, n, in, 12, &r3, 1), ALMA_OK);
  assert_int_equal(alma__packed_gemm_bytes(), before + packs + deq);
  assert_memory_equal(r1.data, r2.data, r1.nbytes);
  assert_memory_equal(r1.data, r3.data, r1.nbytes);
  n->attrs = NULL, n->n_attrs = 0;
  g->values[v[1]].init = g->values[v[2]].init = NULL;
  alma__graph_free(g);
  assert_int_equal(alma__packed_gemm_bytes(), before);
  alma_tensor_free_data(&r1), alma_tensor_free_data(&r2), alma_tensor_free_data(&r3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_alpha_beta_bias),
      cmocka_unit_test(test_alpha_zero),
      cmocka_unit_test(test_size_refused),
      cmocka_unit_test(test_ops),
      cmocka_unit_test(test_budget),
      cmocka_unit_test(test_rnn),
      cmocka_unit_test(test_dq_lstm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
