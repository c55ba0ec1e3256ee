/* The uint8 x int8 GEMM (src/ops/qgemm.c) against a direct integer sum: uint8 and int8 B, zero
 * points per row and per column (and none), K not a multiple of 4, N not a multiple of the panel,
 * row counts across the 4-row tiles and the 64-row blocks, a panel range; the extreme values
 * (255 - 0) x (0 - 255) and (-128 - 127). Skipped (not failed) on CPUs without AVX-512 VNNI. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "ops/qgemm.h"

static uint32_t rng = 12345;
static uint32_t next(void) {
  rng = rng * 1664525u + 1013904223u;
  return rng >> 8;
}

static void one(int64_t M, int64_t K, int64_t N, int b_u8, int with_za, int with_zb, int extreme) {
  uint8_t *A = malloc((size_t)(M * K + 1));
  uint8_t *B = malloc((size_t)(K * N + 1));
  int32_t *za = malloc((size_t)(M + 1) * 4), *zb = malloc((size_t)(N + 1) * 4);
  int32_t *C = malloc((size_t)(M * N + 1) * 4);
  assert_non_null(A);
  assert_non_null(B);
  assert_non_null(za);
  assert_non_null(zb);
  assert_non_null(C);
  for (int64_t i = 0; i < M * K; i++) A[i] = extreme ? 255 : (uint8_t)next();
  for (int64_t i = 0; i < K * N; i++) B[i] = extreme ? (b_u8 ? 0 : 0x80) : (uint8_t)next();
  for (int64_t i = 0; i < M; i++) za[i] = extreme ? 0 : (int32_t)(next() & 255);
  for (int64_t i = 0; i < N; i++) zb[i] = extreme ? (b_u8 ? 255 : 127) : b_u8 ? (int32_t)(next() & 255) : (int32_t)(int8_t)next();
  alma__qgemm_packed P;
  assert_int_equal(alma__qgemm_pack(B, b_u8, K, N, N, 1, &P), ALMA_OK);
  memset(C, 0x5a, (size_t)(M * N) * 4);
  /* two calls over halves of the panels, as the threaded callers split them */
  int64_t half = P.panels / 2;
  alma__qgemm_run(M, A, K, with_za ? za : NULL, &P, with_zb ? zb : NULL, 0, half, C, N);
  alma__qgemm_run(M, A, K, with_za ? za : NULL, &P, with_zb ? zb : NULL, half, P.panels, C, N);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      int64_t s = 0;
      for (int64_t k = 0; k < K; k++) {
        int64_t a = (int64_t)A[m * K + k] - (with_za ? za[m] : 0);
        int64_t b = (b_u8 ? (int64_t)B[k * N + n] : (int64_t)(int8_t)B[k * N + n]) - (with_zb ? zb[n] : 0);
        s += a * b;
      }
      if ((int32_t)s != C[m * N + n]) {
        print_error("M %lld K %lld N %lld u8 %d: C[%lld][%lld] = %d, expected %lld\n", (long long)M, (long long)K,
                    (long long)N, b_u8, (long long)m, (long long)n, C[m * N + n], (long long)s);
        fail();
      }
    }
  alma__qgemm_free(&P);
  free(A);
  free(B);
  free(za);
  free(zb);
  free(C);
}

static void random_shapes(void **state) {
  (void)state;
  if (!alma__qgemm_available()) skip();
  static const int64_t Ms[] = {1, 2, 3, 4, 5, 7, 64, 67, 130};
  static const int64_t Ks[] = {1, 3, 4, 5, 16, 33, 256, 515};
  static const int64_t Ns[] = {1, 15, 16, 17, 33, 64, 100};
  for (int u = 0; u < 2; u++)
    for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++)
      for (size_t j = 0; j < sizeof Ks / sizeof *Ks; j++) {
        int64_t N = Ns[(i + j) % (sizeof Ns / sizeof *Ns)];
        one(Ms[i], Ks[j], N, u, (int)((i + j) & 1), (int)((i >> 1) & 1) || u, 0);
      }
}

static void extremes(void **state) {
  (void)state;
  if (!alma__qgemm_available()) skip();
  one(5, 1031, 37, 1, 1, 1, 1);
  one(5, 1031, 37, 0, 1, 1, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(random_shapes), cmocka_unit_test(extremes)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
