/* src/core/lowbit.c: ONNX's packing of 4-bit and 2-bit elements (low bits first, the last byte
 * padded) and its inverse, with int4/int2 sign-extended in memory; the lowint wrap-around; float8 /
 * float4 codes decoded and encoded back to themselves, and the encodings' rounding and overflow
 * rules at a few points worked out by hand from the formats (the python check compares every code
 * with ONNX's reference). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "core/core.h"

static void test_pack_int4(void **state) {
  (void)state;
  /* -8..7 and one more: 17 elements, 9 bytes, the last high nibble zero */
  uint8_t e[17], p[9], back[17];
  for (int i = 0; i < 17; i++) e[i] = (uint8_t)(int8_t)((i % 16) - 8);
  assert_int_equal(alma__packed_size(ALMA_DTYPE_INT4, 17), 9);
  memset(p, 0xaa, sizeof p);
  alma__pack_lowbit(ALMA_DTYPE_INT4, e, 17, p);
  assert_int_equal(p[0], 0x98);       /* -8 (0x8) low, -7 (0x9) high */
  assert_int_equal(p[4], 0x10);       /* 0 low, 1 high */
  assert_int_equal(p[8], 0x08);       /* -8, then padding */
  alma__unpack_lowbit(ALMA_DTYPE_INT4, p, 17, back);
  assert_memory_equal(back, e, 17);   /* sign-extended again */
  assert_int_equal((int8_t)back[0], -8);
}

static void test_pack_2bit(void **state) {
  (void)state;
  uint8_t e[6] = {0, 1, 2, 3, 3, 2}, p[2], back[6];
  assert_int_equal(alma__packed_size(ALMA_DTYPE_UINT2, 6), 2);
  alma__pack_lowbit(ALMA_DTYPE_UINT2, e, 6, p);
  assert_int_equal(p[0], 0xe4);       /* 0 | 1<<2 | 2<<4 | 3<<6 */
  assert_int_equal(p[1], 0x0b);       /* 3 | 2<<2, padded */
  alma__unpack_lowbit(ALMA_DTYPE_UINT2, p, 6, back);
  assert_memory_equal(back, e, 6);
  alma__unpack_lowbit(ALMA_DTYPE_INT2, p, 6, back); /* the same bits as int2: 0, 1, -2, -1, -1, -2 */
  int8_t want[6] = {0, 1, -2, -1, -1, -2};
  assert_memory_equal(back, want, 6);
}

static void test_wrap(void **state) {
  (void)state;
  assert_int_equal((int8_t)alma__lowint_wrap(ALMA_DTYPE_INT4, 8), -8);
  assert_int_equal((int8_t)alma__lowint_wrap(ALMA_DTYPE_INT4, -9), 7);
  assert_int_equal((int8_t)alma__lowint_wrap(ALMA_DTYPE_INT4, 200), -8); /* 200 = 0xc8 */
  assert_int_equal(alma__lowint_wrap(ALMA_DTYPE_UINT4, -1), 15);
  assert_int_equal((int8_t)alma__lowint_wrap(ALMA_DTYPE_INT2, 2), -2);
  assert_int_equal(alma__lowint_wrap(ALMA_DTYPE_UINT2, 5), 1);
  assert_int_equal(alma__lowint_wrap(ALMA_DTYPE_UINT4, INT64_MIN), 0);
}

static void test_lowfloat_roundtrip(void **state) {
  (void)state;
  const alma_dtype ts[] = {ALMA_DTYPE_FLOAT8E4M3FN, ALMA_DTYPE_FLOAT8E4M3FNUZ, ALMA_DTYPE_FLOAT8E5M2,
                           ALMA_DTYPE_FLOAT8E5M2FNUZ, ALMA_DTYPE_FLOAT4E2M1, ALMA_DTYPE_FLOAT8E8M0};
  for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
    int n = ts[k] == ALMA_DTYPE_FLOAT4E2M1 ? 16 : 256;
    for (int c = 0; c < n; c++) {
      double v = alma__lowfloat_decode(ts[k], (uint8_t)c);
      if (isnan(v)) continue;
      /* e8m0: "down" (2^-127 is a float32 subnormal, which ONNX's "up" moves to 2^-126) */
      uint8_t back = ts[k] == ALMA_DTYPE_FLOAT8E8M0 ? alma__e8m0_encode((float)v, 0, ALMA_E8M0_DOWN)
                                                     : alma__lowfloat_encode(ts[k], v, 0);
      if (back != c) fail_msg("%s code 0x%02x (%g) encodes back to 0x%02x", alma_dtype_name(ts[k]), c, v, back);
    }
  }
}

static void test_lowfloat_rules(void **state) {
  (void)state;
  const alma_dtype e4 = ALMA_DTYPE_FLOAT8E4M3FN, e5 = ALMA_DTYPE_FLOAT8E5M2, uz = ALMA_DTYPE_FLOAT8E4M3FNUZ;
  assert_true(alma__lowfloat_decode(e4, 0x7e) == 448.0);
  assert_int_equal(alma__lowfloat_encode(e4, 464.0, 0), 0x7e);    /* a tie: to the even 448 */
  assert_int_equal(alma__lowfloat_encode(e4, 464.5, 0), 0x7f);    /* past it: NaN */
  assert_int_equal(alma__lowfloat_encode(e4, 1e9, 1), 0x7e);      /* saturated */
  assert_int_equal(alma__lowfloat_encode(e4, -INFINITY, 0), 0xff);
  assert_int_equal(alma__lowfloat_encode(e5, INFINITY, 0), 0x7c); /* e5m2 keeps inf */
  assert_int_equal(alma__lowfloat_encode(e5, -1e9, 0), 0xfc);
  assert_int_equal(alma__lowfloat_encode(e5, -1e9, 1), 0xfb);
  assert_int_equal(alma__lowfloat_encode(uz, -0.0, 1), 0x00);     /* fnuz has no -0 */
  assert_int_equal(alma__lowfloat_encode(uz, NAN, 1), 0x80);
  assert_int_equal(alma__lowfloat_encode(e4, ldexp(1.0, -10), 1), 0x00); /* half the least subnormal: even 0 */
  assert_int_equal(alma__lowfloat_encode(e4, ldexp(3.0, -10), 1), 0x02); /* 1.5 subnormal steps: even 2 */
  assert_int_equal(alma__lowfloat_encode(ALMA_DTYPE_FLOAT4E2M1, 5.0, 0), 0x6); /* tie 4|6: even 4 */
  assert_int_equal(alma__lowfloat_encode(ALMA_DTYPE_FLOAT4E2M1, -100.0, 0), 0xf); /* always saturates */
  assert_int_equal(alma__e8m0_encode(3.0f, 1, ALMA_E8M0_UP), 129);     /* 3 -> 4 = 2^(129-127) */
  assert_int_equal(alma__e8m0_encode(3.0f, 1, ALMA_E8M0_DOWN), 128);   /* 3 -> 2 */
  assert_int_equal(alma__e8m0_encode(1.5f, 1, ALMA_E8M0_NEAREST), 128); /* ties round up */
  assert_int_equal(alma__e8m0_encode(3e38f, 1, ALMA_E8M0_UP), 0xfe);
  assert_int_equal(alma__e8m0_encode(3e38f, 0, ALMA_E8M0_UP), 0xff);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pack_int4), cmocka_unit_test(test_pack_2bit), cmocka_unit_test(test_wrap),
      cmocka_unit_test(test_lowfloat_roundtrip), cmocka_unit_test(test_lowfloat_rules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
