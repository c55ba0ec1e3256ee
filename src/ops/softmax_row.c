/* The softmax's exponentials over one row of scores, and the Gelu family on the same vector expf
 * (see softmax_row.h), with an AVX2+FMA clone. */
#include <math.h>

#include "ops/sgemm.h"
#include "ops/softmax_row.h"

typedef float sr_v8f __attribute__((vector_size(32), aligned(4), may_alias));
typedef int sr_v8i __attribute__((vector_size(32), aligned(4), may_alias));

/* Lanes of a where m is all ones, of b elsewhere (C has no vector ?:). Macros and pointers rather
 * than vector arguments: those would change the ABI of the baseline (non-AVX) clone. */
#define SR_SEL8(m, a, b) ((sr_v8f)(((sr_v8i)(a) & (m)) | ((sr_v8i)(b) & ~(m))))

/* expf on 8 lanes: Cephes' expf (reduction by ln 2 in two parts, degree-6 polynomial, relative error
 * about 2e-7), as libm's expf does not vectorise. Below -87.33 it gives 0 where expf gives
 * subnormals (an absolute difference under 1.2e-38); NaN stays NaN. */
static inline __attribute__((always_inline)) void exp8(sr_v8f *px) {
  const sr_v8f zero = {0}, lo = zero - 87.3365f, hi = zero + 88.0f;
  sr_v8f x = *px;
  sr_v8i nan = x != x, tiny = x < lo;
  sr_v8f x0 = x;
  x = SR_SEL8(nan | tiny, zero, x);
  x = SR_SEL8(x > hi, hi, x);
  sr_v8f fx = x * 1.44269504088896341f + 0.5f;
  sr_v8i n = __builtin_convertvector(fx, sr_v8i); /* truncates: one less where that rounded up */
  sr_v8f nf = __builtin_convertvector(n, sr_v8f);
  n += (sr_v8i)(nf > fx);
  nf = __builtin_convertvector(n, sr_v8f);
  x = x - nf * 0.693359375f;
  x = x - nf * -2.12194440e-4f;
  sr_v8f y = 1.9875691500e-4f * x + 1.3981999507e-3f;
  y = y * x + 8.3334519073e-3f;
  y = y * x + 4.1665795894e-2f;
  y = y * x + 1.6666665459e-1f;
  y = y * x + 5.0000001201e-1f;
  y = y * (x * x) + x + 1.0f;
  sr_v8i e = (n + 127) << 23; /* n in [-126, 127]: a normal power of two */
  y = y * (sr_v8f)e;
  y = SR_SEL8(tiny, zero, y);
  *px = SR_SEL8(nan, x0, y);
}

/* One row of scores (already scaled): s[j] += mask[j * m_col] (mask may be NULL), then
 * s[j] = exp(s[j] - max) in place; returns the sum. The maximum skips NaN, as the reference's. */
ALMA_MULTIVERSION float alma__softmax_exp_row(float *s, int64_t n, const float *mask, int64_t m_col) {
  if (mask && m_col)
    for (int64_t j = 0; j < n; j++) s[j] += mask[j];
  else if (mask)
    for (int64_t j = 0; j < n; j++) s[j] += mask[0];
  const sr_v8f zero = {0};
  float mx = -INFINITY;
  int64_t j = 0;
  if (n >= 8) {
    sr_v8f vm = zero - INFINITY;
    for (; j + 8 <= n; j += 8) {
      sr_v8f v = *(const sr_v8f *)(s + j);
      vm = SR_SEL8((sr_v8i)(v > vm), v, vm);
    }
    for (int l = 0; l < 8; l++) mx = vm[l] > mx ? vm[l] : mx;
  }
  for (; j < n; j++) mx = s[j] > mx ? s[j] : mx;
  sr_v8f acc = zero, vmx = zero + mx;
  for (j = 0; j + 8 <= n; j += 8) {
    sr_v8f e = *(const sr_v8f *)(s + j) - vmx;
    exp8(&e);
    *(sr_v8f *)(s + j) = e;
    acc += e;
  }
  float sum = 0.0f;
  for (int l = 0; l < 8; l++) sum += acc[l];
  for (; j < n; j++) sum += (s[j] = expf(s[j] - mx));
  return sum;
}

/* y = gelu(x + bias) over n elements: see softmax_row.h. Vectors of 8, the tail in scalar code of the
 * same formulas (expf). erf form: 1 + erf(u) from erfc(|u|) = t exp(-u^2 + P(t)), t = 1 / (1 + |u| / 2)
 * (Numerical Recipes' erfcc, relative error under 1.2e-7 in exact arithmetic): 2 - erfc for u >= 0,
 * erfc for u < 0, so the negative tail keeps its relative precision (no 1 - erf cancellation). Tanh
 * form and QuickGelu: x * sigmoid(2 w) and x * sigmoid(alpha x), 1 + tanh(w) = 2 / (1 + exp(-2 w)). */
#define GELU_ERFC_POLY(t)                                                                               \
  (-1.26551223f +                                                                                       \
   (t) * (1.00002368f +                                                                                 \
          (t) * (0.37409196f +                                                                          \
                 (t) * (0.09678418f +                                                                   \
                        (t) * (-0.18628806f +                                                           \
                               (t) * (0.27886807f +                                                     \
                                      (t) * (-1.13520398f +                                             \
                                             (t) * (1.48851587f + (t) * (-0.82215223f + (t) * 0.17087277f)))))))))

static inline float gelu_one(float v, int kind, float alpha) {
  if (kind == 0) {
    float u = v * 0.70710678118654752f, z = fabsf(u), t = 1.0f / (1.0f + 0.5f * z);
    float e = t * expf(-z * z + GELU_ERFC_POLY(t));
    return 0.5f * v * (u >= 0.0f ? 2.0f - e : e);
  }
  float a = kind == 1 ? 1.5957691216057308f * (v + 0.044715f * v * v * v) : alpha * v;
  return v / (1.0f + expf(-a));
}

ALMA_MULTIVERSION void alma__gelu_row(float *y, const float *x, const float *bias, int64_t n, int kind, float alpha) {
  const sr_v8f zero = {0}, one = zero + 1.0f;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    sr_v8f v = *(const sr_v8f *)(x + j), r;
    if (bias) v += *(const sr_v8f *)(bias + j);
    if (kind == 0) {
      sr_v8f u = v * 0.70710678118654752f;
      sr_v8f z = SR_SEL8((sr_v8i)(u < zero), -u, u);
      sr_v8f t = one / (one + 0.5f * z);
      sr_v8f e = -z * z + GELU_ERFC_POLY(t);
      exp8(&e);
      e *= t;
      r = 0.5f * v * SR_SEL8((sr_v8i)(u >= zero), 2.0f - e, e);
    } else {
      sr_v8f a = kind == 1 ? 1.5957691216057308f * (v + 0.044715f * v * v * v) : alpha * v;
      sr_v8f e = -a;
      exp8(&e);
      r = v / (one + e);
    }
    *(sr_v8f *)(y + j) = r;
  }
  for (; j < n; j++) y[j] = gelu_one(x[j] + (bias ? bias[j] : 0.0f), kind, alpha);
}

static inline __attribute__((always_inline)) void sigmoid8(sr_v8f *pv, int silu) {
  const sr_v8f zero = {0}, one = zero + 1.0f, v = *pv;
  sr_v8f e = (sr_v8f)((sr_v8i)v | (int)0x80000000); /* -|v| */
  exp8(&e);
  sr_v8f r = SR_SEL8((sr_v8i)(v >= zero), one, e) / (one + e); /* NaN: e is NaN, so is r */
  if (silu) r *= v;
  *pv = r;
}

ALMA_MULTIVERSION void alma__sigmoid_row(float *y, const float *x, int64_t n, int silu) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    sr_v8f v = *(const sr_v8f *)(x + j);
    sigmoid8(&v, silu);
    *(sr_v8f *)(y + j) = v;
  }
  if (j < n) { /* the tail through the same lanes, so every element gets the same function */
    sr_v8f v = {0};
    for (int64_t k = j; k < n; k++) v[k - j] = x[k];
    sigmoid8(&v, silu);
    for (int64_t k = j; k < n; k++) y[k] = v[k - j];
  }
}

/* tanhf on 8 lanes, from |x| with the sign put back (odd; -0 stays -0, NaN stays NaN): Cephes'
 * tanhf, an odd degree-11 polynomial below 0.625 and 1 - 2 / (exp(2|x|) + 1) above, |x| clamped to
 * 9.5 (beyond 9.01 tanhf is 1). Within a few ulps of libm's tanhf (tests/ops_gelu measures it); on
 * denormals x * x underflows to 0 and the result is x. */
static inline __attribute__((always_inline)) void tanh8(sr_v8f *px) {
  const sr_v8f zero = {0}, one = zero + 1.0f, small = zero + 0.625f, big = zero + 9.5f;
  const sr_v8i sign = (sr_v8i)*px & (int)0x80000000;
  sr_v8f a = (sr_v8f)((sr_v8i)*px & (int)0x7fffffff);
  sr_v8f z = a * a;
  sr_v8f p = (((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z + 1.33314422036e-1f) * z -
             3.33332819422e-1f;
  p = p * z * a + a;
  sr_v8f e = SR_SEL8((sr_v8i)(a > big), big, a); /* NaN stays NaN */
  e = e + e;
  exp8(&e);
  sr_v8f q = one - 2.0f / (e + one);
  sr_v8f r = SR_SEL8((sr_v8i)(a < small), p, q);
  *px = (sr_v8f)((sr_v8i)r | sign);
}

ALMA_MULTIVERSION void alma__tanh_row(float *y, const float *x, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    sr_v8f v = *(const sr_v8f *)(x + j);
    tanh8(&v);
    *(sr_v8f *)(y + j) = v;
  }
  if (j < n) { /* the tail through the same lanes, so every element gets the same function */
    sr_v8f v = {0};
    for (int64_t k = j; k < n; k++) v[k - j] = x[k];
    tanh8(&v);
    for (int64_t k = j; k < n; k++) y[k] = v[k - j];
  }
}

/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the ONNX formula of Gelu(approximate="tanh") in
 * float arithmetic, on tanh8. */
ALMA_MULTIVERSION void alma__gelu_tanh_row(float *y, const float *x, int64_t n) {
  int64_t j = 0;
  sr_v8f v = {0};
  for (; j < n; j += 8) {
    int64_t m = n - j < 8 ? n - j : 8;
    if (m == 8) v = *(const sr_v8f *)(x + j);
    else
      for (int64_t k = 0; k < m; k++) v[k] = x[j + k];
    sr_v8f t = 0.79788456080286535588f * (v + 0.044715f * v * v * v);
    tanh8(&t);
    sr_v8f r = 0.5f * v * (1.0f + t);
    if (m == 8) *(sr_v8f *)(y + j) = r;
    else
      for (int64_t k = 0; k < m; k++) y[j + k] = r[k];
  }
}

/* Softmax (or log-softmax) along a strided axis: x and y are [n, inner] row-major, the reduction
 * runs down each column, eight columns a vector (the tail on libm's expf/logf). mx and sum hold
 * inner floats each. The maximum skips NaN and an all -inf column takes 0, as the reference's. */
ALMA_MULTIVERSION void alma__softmax_cols(const float *x, float *y, int64_t n, int64_t inner, int is_log, float *mx,
                                          float *sum) {
  const sr_v8f zero = {0};
  int64_t i = 0;
  for (; i + 8 <= inner; i += 8) {
    sr_v8f m = zero - INFINITY, s = zero;
    for (int64_t j = 0; j < n; j++) {
      sr_v8f v = *(const sr_v8f *)(x + j * inner + i);
      m = SR_SEL8((sr_v8i)(v > m), v, m);
    }
    m = SR_SEL8((sr_v8i)(m == zero - INFINITY), zero, m);
    for (int64_t j = 0; j < n; j++) {
      sr_v8f e = *(const sr_v8f *)(x + j * inner + i) - m;
      exp8(&e);
      s += e;
      if (!is_log) *(sr_v8f *)(y + j * inner + i) = e;
    }
    if (is_log) {
      for (int l = 0; l < 8; l++) s[l] = m[l] + logf(s[l]); /* y = x - (max + log(sum)) */
      for (int64_t j = 0; j < n; j++) *(sr_v8f *)(y + j * inner + i) = *(const sr_v8f *)(x + j * inner + i) - s;
    } else {
      sr_v8f inv = (zero + 1.0f) / s;
      for (int64_t j = 0; j < n; j++) *(sr_v8f *)(y + j * inner + i) *= inv;
    }
  }
  if (i == inner) return;
  for (int64_t k = i; k < inner; k++) mx[k] = -INFINITY, sum[k] = 0.0f;
  for (int64_t j = 0; j < n; j++)
    for (int64_t k = i; k < inner; k++) mx[k] = x[j * inner + k] > mx[k] ? x[j * inner + k] : mx[k];
  for (int64_t k = i; k < inner; k++)
    if (mx[k] == -INFINITY) mx[k] = 0.0f;
  for (int64_t j = 0; j < n; j++)
    for (int64_t k = i; k < inner; k++) {
      float e = expf(x[j * inner + k] - mx[k]);
      sum[k] += e;
      if (!is_log) y[j * inner + k] = e;
    }
  for (int64_t k = i; k < inner; k++) sum[k] = is_log ? mx[k] + logf(sum[k]) : 1.0f / sum[k];
  for (int64_t j = 0; j < n; j++)
    for (int64_t k = i; k < inner; k++)
      y[j * inner + k] = is_log ? x[j * inner + k] - sum[k] : y[j * inner + k] * sum[k];
}
