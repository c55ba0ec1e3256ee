/* The exact uint8 x int8 GEMM of qgemm.h. */
#include "ops/qgemm.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QG_X86 1
#include <immintrin.h>
#else
#define QG_X86 0
#endif

int alma__qgemm_available(void) {
  static int avail = -1; /* a benign race: every thread computes the same */
  if (avail < 0) {
    const char *e = getenv("ALMA_QGEMM");
    int on = !(e && !strcmp(e, "0"));
#if QG_X86
    __builtin_cpu_init();
    on = on && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni");
#else
    on = 0;
#endif
    avail = on;
  }
  return avail;
}

static int64_t qg_kg(int64_t K) { return (K + 3) / 4; }
static int64_t qg_panels(int64_t N) { return (N + ALMA_QGEMM_PANEL - 1) / ALMA_QGEMM_PANEL; }

int64_t alma__qgemm_bytes(int64_t K, int64_t N) {
  int64_t p = qg_panels(N);
  return p * qg_kg(K) * ALMA_QGEMM_PANEL * 4 + p * ALMA_QGEMM_PANEL * 4;
}

alma_status alma__qgemm_pack(const void *b, int b_u8, int64_t K, int64_t N, int64_t sk, int64_t sn,
                             alma__qgemm_packed *out) {
  memset(out, 0, sizeof *out);
  int64_t kg = qg_kg(K), np = qg_panels(N);
  out->K = K, out->N = N, out->kg = kg, out->panels = np, out->shift = b_u8 ? 128 : 0;
  size_t bytes = (size_t)(np * kg * ALMA_QGEMM_PANEL * 4);
  out->data = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
  out->colsum = calloc((size_t)(np * ALMA_QGEMM_PANEL), sizeof *out->colsum);
  if (!out->data || !out->colsum) {
    alma__qgemm_free(out);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory (packed integer weights)");
  }
  memset(out->data, 0, bytes); /* the padding: columns past N, k past K */
  const uint8_t *bu = b;
  const int8_t *bs = b;
  for (int64_t k = 0; k < K; k++)
    for (int64_t n = 0; n < N; n++) {
      int v = b_u8 ? (int)bu[k * sk + n * sn] - 128 : (int)bs[k * sk + n * sn];
      int64_t p = n / ALMA_QGEMM_PANEL, c = n % ALMA_QGEMM_PANEL;
      out->data[((p * kg + k / 4) * ALMA_QGEMM_PANEL + c) * 4 + k % 4] = (int8_t)v;
      out->colsum[n] += v;
    }
  return ALMA_OK;
}

void alma__qgemm_free(alma__qgemm_packed *p) {
  free(p->data);
  free(p->colsum);
  memset(p, 0, sizeof *p);
}

#if QG_X86
/* Four bytes of row a from k (zeros past K). */
static inline int32_t qg_a4(const uint8_t *a, int64_t k, int64_t K) {
  uint32_t v = 0;
  if (k + 4 <= K) memcpy(&v, a + k, 4);
  else
    for (int64_t i = 0; k + i < K; i++) v |= (uint32_t)a[k + i] << (8 * i);
  return (int32_t)v;
}

#define QG_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))

/* sum (a - za)(b - zb) = acc + shift * ra - za * (colsum + K * shift) - zb * ra + K * za * zb,
 * with ra the row's byte sum and b = stored + shift. In uint32: wraps as int32 should. */
QG_TARGET static inline __attribute__((always_inline)) void qg_store(int MR, int NP, __m512i acc[4][2], const int32_t *ra,
                                                                       const int32_t *za, const alma__qgemm_packed *B,
                                                                       const int32_t *zb, int64_t p, int32_t *C, int64_t ldc) {
  const int32_t K = (int32_t)B->K, sh = B->shift;
#pragma GCC unroll 2
  for (int q = 0; q < NP; q++) {
    int64_t n0 = (p + q) * ALMA_QGEMM_PANEL, nv = B->N - n0 < ALMA_QGEMM_PANEL ? B->N - n0 : ALMA_QGEMM_PANEL;
    __mmask16 m = (__mmask16)((1u << nv) - 1u);
    __m512i cs = _mm512_loadu_si512((const void *)(B->colsum + n0));
    cs = _mm512_add_epi32(cs, _mm512_set1_epi32(K * sh));
    __m512i zbv = zb ? _mm512_maskz_loadu_epi32(m, zb + n0) : _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int r = 0; r < MR; r++) {
      int32_t zr = za ? za[r] : 0;
      __m512i v = _mm512_add_epi32(acc[r][q], _mm512_set1_epi32(sh * ra[r]));
      v = _mm512_sub_epi32(v, _mm512_mullo_epi32(_mm512_set1_epi32(zr), cs));
      v = _mm512_sub_epi32(v, _mm512_mullo_epi32(zbv, _mm512_set1_epi32(ra[r] - K * zr)));
      _mm512_mask_storeu_epi32(C + r * ldc + n0, m, v);
    }
  }
}

/* MR rows x NP panels: MR * NP accumulators, B's two panels loaded once per group of 4 k. */
QG_TARGET static inline __attribute__((always_inline)) void qg_tile(int MR, int NP, const uint8_t *A, int64_t lda,
                                                                      const alma__qgemm_packed *B, int64_t p,
                                                                      const int32_t *ra, const int32_t *za,
                                                                      const int32_t *zb, int32_t *C, int64_t ldc) {
  __m512i acc[4][2]; /* local, so that they stay in registers */
  const int64_t K = B->K, kg = B->kg, kfull = K / 4;
  const int8_t *b0 = B->data + p * kg * ALMA_QGEMM_PANEL * 4, *b1 = b0 + kg * ALMA_QGEMM_PANEL * 4;
#pragma GCC unroll 4
  for (int r = 0; r < MR; r++)
#pragma GCC unroll 2
    for (int q = 0; q < NP; q++) acc[r][q] = _mm512_setzero_si512();
  int64_t g0 = 0;
  if (MR == 1) {
    /* one row (a recurrent step's product): four chains per panel over alternate groups of k, so
     * the sums do not wait on vpdpbusd's latency */
    __m512i e[2][3];
#pragma GCC unroll 2
    for (int q = 0; q < 2; q++) e[q][0] = e[q][1] = e[q][2] = _mm512_setzero_si512();
    for (; g0 + 4 <= kfull; g0 += 4) {
#pragma GCC unroll 4
      for (int u = 0; u < 4; u++) {
        int32_t v;
        memcpy(&v, A + (g0 + u) * 4, 4);
        __m512i av = _mm512_set1_epi32(v);
        __m512i *t0 = u == 0 ? &acc[0][0] : &e[0][u - 1], *t1 = u == 0 ? &acc[0][1] : &e[1][u - 1];
        *t0 = _mm512_dpbusd_epi32(*t0, av, _mm512_load_si512((const void *)(b0 + (g0 + u) * 64)));
        if (NP > 1) *t1 = _mm512_dpbusd_epi32(*t1, av, _mm512_load_si512((const void *)(b1 + (g0 + u) * 64)));
      }
    }
#pragma GCC unroll 2
    for (int q = 0; q < NP; q++)
      acc[0][q] = _mm512_add_epi32(_mm512_add_epi32(acc[0][q], e[q][0]), _mm512_add_epi32(e[q][1], e[q][2]));
  }
  for (int64_t g = g0; g < kfull; g++) {
    __m512i w0 = _mm512_load_si512((const void *)(b0 + g * 64)), w1 = w0;
    if (NP > 1) w1 = _mm512_load_si512((const void *)(b1 + g * 64));
#pragma GCC unroll 4
    for (int r = 0; r < MR; r++) {
      int32_t v;
      memcpy(&v, A + r * lda + g * 4, 4);
      __m512i av = _mm512_set1_epi32(v);
      acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], av, w0);
      if (NP > 1) acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], av, w1);
    }
  }
  if (kfull < kg) {
    __m512i w0 = _mm512_load_si512((const void *)(b0 + kfull * 64)), w1 = w0;
    if (NP > 1) w1 = _mm512_load_si512((const void *)(b1 + kfull * 64));
#pragma GCC unroll 4
    for (int r = 0; r < MR; r++) {
      __m512i av = _mm512_set1_epi32(qg_a4(A + r * lda, kfull * 4, K));
      acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], av, w0);
      if (NP > 1) acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], av, w1);
    }
  }
  qg_store(MR, NP, acc, ra, za, B, zb, p, C, ldc);
}

#define QG_CASE(MR, NP)                                                  \
  do {                                                                   \
    qg_tile(MR, NP, A + m0 * lda, lda, B, p, ra + m0, za ? za + m0 : NULL, zb, C + m0 * ldc, ldc); \
  } while (0)

QG_TARGET static void qg_run(int64_t M, const uint8_t *A, int64_t lda, const int32_t *za, const alma__qgemm_packed *B,
                             const int32_t *zb, int64_t p0, int64_t p1, int32_t *C, int64_t ldc, const int32_t *ra) {
  for (int64_t p = p0; p < p1; p += 2) {
    int np = p + 1 < p1 ? 2 : 1;
    for (int64_t m0 = 0; m0 < M; m0 += 4) {
      int mr = M - m0 < 4 ? (int)(M - m0) : 4;
      if (np == 2) {
        switch (mr) {
          case 4: QG_CASE(4, 2); break;
          case 3: QG_CASE(3, 2); break;
          case 2: QG_CASE(2, 2); break;
          default: QG_CASE(1, 2); break;
        }
      } else {
        switch (mr) {
          case 4: QG_CASE(4, 1); break;
          case 3: QG_CASE(3, 1); break;
          case 2: QG_CASE(2, 1); break;
          default: QG_CASE(1, 1); break;
        }
      }
    }
  }
}
#endif

void alma__qgemm_run(int64_t M, const uint8_t *A, int64_t lda, const int32_t *za, const alma__qgemm_packed *B,
                     const int32_t *zb, int64_t p0, int64_t p1, int32_t *C, int64_t ldc) {
#if QG_X86
  if (M < 1 || p0 >= p1) return;
  int32_t ra[64]; /* the rows' byte sums, 64 rows at a time */
  for (int64_t m0 = 0; m0 < M; m0 += 64) {
    int64_t mb = M - m0 < 64 ? M - m0 : 64;
    for (int64_t m = 0; m < mb; m++) {
      uint32_t s = 0;
      for (int64_t k = 0; k < B->K; k++) s += A[(m0 + m) * lda + k];
      ra[m] = (int32_t)s;
    }
    qg_run(mb, A + m0 * lda, lda, za ? za + m0 : NULL, B, zb, p0, p1, C + m0 * ldc, ldc, ra);
  }
#else
  (void)M, (void)A, (void)lda, (void)za, (void)B, (void)zb, (void)p0, (void)p1, (void)C, (void)ldc;
#endif
}
