/* The vectorised tanhf (alma__tanh_row, src/ops/softmax_row.c) against libm's tanhf over every 97th
 * float32 bit pattern (44 million values, both signs): at most 2 ulps apart (measured: 2, in the
 * polynomial range below 0.625; 97.3% equal), odd at zero, exact on denormals, NaN -> NaN, ±1 beyond
 * 9.01; every tail length gives what the full vectors give; alma__gelu_tanh_row against the same
 * formula on tanhf; and alma__sigmoid_row (Sigmoid, SiLU) against the functions in double over the
 * same bit patterns. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/softmax_row.h"

/* float32 values in a monotonic integer order (-0 and +0 adjacent) */
static int64_t ord(float f) {
  int32_t i;
  memcpy(&i, &f, 4);
  return i < 0 ? (int64_t)INT32_MIN - i : i;
}

/* Calls fn on every 97th float32 bit pattern (44 million values, both signs), B at a time. */
static void every_97th(void (*fn)(const float *x, int k, void *ctx), void *ctx) {
  enum { B = 4096 };
  static float x[B];
  int k = 0;
  for (uint64_t u = 0; u < (1ull << 32); u += 97) {
    uint32_t b = (uint32_t)u;
    memcpy(&x[k++], &b, 4);
    if (k < B && u + 97 < (1ull << 32)) continue;
    fn(x, k, ctx);
    k = 0;
  }
}

typedef struct sweep_ctx {
  int silu;           /* sigmoid_block: x sigmoid(x) */
  int64_t worst, n;   /* largest ulp distance over the n values compared */
} sweep_ctx;

static void tanh_block(const float *x, int k, void *ctx) {
  sweep_ctx *c = ctx;
  static float y[4096];
  alma__tanh_row(y, x, k);
  for (int i = 0; i < k; i++) {
    float r = tanhf(x[i]);
    if (isnan(r)) {
      assert_true(isnan(y[i]));
      continue;
    }
    int64_t d = llabs(ord(r) - ord(y[i]));
    if (d > c->worst) c->worst = d;
    c->n++;
  }
}

static void tanh_sweep(void **state) {
  (void)state;
  sweep_ctx c = {0};
  every_97th(tanh_block, &c);
  print_message("tanh: %lld values, at most %lld ulps from tanhf\n", (long long)c.n, (long long)c.worst);
  assert_true(c.worst <= 2);
}

static void tanh_edges(void **state) {
  (void)state;
  const float in[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, -1e-45f, FLT_MIN / 4, -FLT_MIN / 4, 9.02f,
                      -9.02f, 9.5f, 20.0f, -88.0f, FLT_MAX, -FLT_MAX};
  enum { N = sizeof in / sizeof in[0] };
  float out[N];
  alma__tanh_row(out, in, N);
  assert_true(out[0] == 0 && !signbit(out[0]));
  assert_true(out[1] == 0 && signbit(out[1]));
  assert_true(out[2] == 1.0f && out[3] == -1.0f);
  assert_true(isnan(out[4]));
  for (int i = 5; i < 9; i++) assert_true(out[i] == in[i]); /* denormals: tanh(x) = x */
  for (int i = 9; i < N; i++) assert_true(out[i] == copysignf(1.0f, in[i]));
}

/* Lengths 1..40 (every tail) and in place: each element as in one full pass over 64 values. */
static void tails(void **state) {
  (void)state;
  float x[64], full[64], g_full[64], part[64];
  for (int i = 0; i < 64; i++) x[i] = (float)(i - 32) * 0.37f;
  alma__tanh_row(full, x, 64);
  alma__gelu_tanh_row(g_full, x, 64);
  for (int n = 1; n <= 40; n++) {
    memcpy(part, x + 3, sizeof(float) * (size_t)n);
    alma__tanh_row(part, part, n);
    assert_memory_equal(part, full + 3, sizeof(float) * (size_t)n);
    memcpy(part, x + 3, sizeof(float) * (size_t)n);
    alma__gelu_tanh_row(part, part, n);
    assert_memory_equal(part, g_full + 3, sizeof(float) * (size_t)n);
  }
}

/* 0.5 x (1 + tanh(w)): the tanh's error (2 ulps of t) scaled by 0.5 |x| plus the formula's roundings */
static void gelu_tanh(void **state) {
  (void)state;
  enum { N = 20001 };
  static float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = -15.0f + 30.0f * (float)i / (N - 1);
  alma__gelu_tanh_row(y, x, N);
  double worst = 0;
  for (int i = 0; i < N; i++) {
    float v = x[i], t = tanhf(0.79788456080286535588f * (v + 0.044715f * v * v * v));
    float r = 0.5f * v * (1.0f + t);
    double bound = 0.5 * fabs(v) * 2.5 * FLT_EPSILON + 2 * FLT_EPSILON * fabs(r);
    double e = fabs((double)y[i] - r);
    if (e / bound > worst) worst = e / bound;
  }
  print_message("gelu tanh: at most %.2f of the bound from the formula on tanhf\n", worst);
  assert_true(worst <= 1.0);
}

/* sigmoid(x) and x sigmoid(x) against double precision: within a few ulps where the sigmoid is a
 * normal float; below that (x < -87: it is denormal or 0) within FLT_MIN (times |x|) absolutely. */
static void sigmoid_block(const float *x, int k, void *ctx) {
  sweep_ctx *c = ctx;
  static float y[4096];
  alma__sigmoid_row(y, x, k, c->silu);
  for (int i = 0; i < k; i++) {
    double v = x[i], sg = v >= 0 ? 1 / (1 + exp(-v)) : exp(v) / (1 + exp(v));
    float r = (float)(c->silu ? v * sg : sg);
    if (isnan(r)) {
      assert_true(isnan(y[i]));
      continue;
    }
    if (fabs(sg) < FLT_MIN) { /* the sigmoid is denormal: x sigmoid(x) within |x| FLT_MIN */
      assert_true(fabs((double)y[i] - r) <= (c->silu ? fabs(v) : 1) * FLT_MIN);
      continue;
    }
    int64_t d = llabs(ord(r) - ord(y[i]));
    if (d > c->worst) c->worst = d;
    c->n++;
  }
}

static void sigmoid_sweep(void **state) {
  (void)state;
  for (int silu = 0; silu <= 1; silu++) {
    sweep_ctx c = {.silu = silu};
    every_97th(sigmoid_block, &c);
    print_message("%s: %lld values, at most %lld ulps from double\n", silu ? "silu" : "sigmoid", (long long)c.n,
                  (long long)c.worst);
    assert_true(c.worst <= 4);
  }
  const float in[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 100.0f, -100.0f, 5.0f, -5.0f};
  enum { N = sizeof in / sizeof in[0] };
  float out[N];
  alma__sigmoid_row(out, in, N, 0);
  assert_true(out[0] == 0.5f && out[1] == 0.5f && out[2] == 1.0f && out[3] == 0.0f && isnan(out[4]));
  assert_true(out[5] == 1.0f && out[6] >= 0 && out[6] < 1e-38f);
  /* odd symmetry up to rounding: sigmoid(-x) = 1 - sigmoid(x) */
  assert_true(fabsf(out[7] + out[8] - 1.0f) <= 2 * FLT_EPSILON);
  alma__sigmoid_row(out, in, N, 1);
  assert_true(out[0] == 0 && out[2] == INFINITY && isnan(out[4]) && out[5] == 100.0f);
  /* every tail length gives what a full pass gives */
  float xs[64], full[64], part[64];
  for (int i = 0; i < 64; i++) xs[i] = (float)(i - 32) * 0.41f;
  alma__sigmoid_row(full, xs, 64, 1);
  for (int m = 1; m <= 40; m++) {
    memcpy(part, xs + 3, sizeof(float) * (size_t)m);
    alma__sigmoid_row(part, part, m, 1);
    assert_memory_equal(part, full + 3, sizeof(float) * (size_t)m);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(tanh_sweep),
      cmocka_unit_test(tanh_edges),
      cmocka_unit_test(tails),
      cmocka_unit_test(gelu_tanh),
      cmocka_unit_test(sigmoid_sweep),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
