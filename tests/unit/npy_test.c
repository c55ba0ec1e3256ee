/* .npy and IDX I/O: round trips for every dtype, files as numpy writes them (v1/v2/v3, byte orders,
 * Fortran order), and malformed files, which must fail with ALMA_ERR_PARSE / ALMA_ERR_UNSUPPORTED
 * naming the file and the problem, never crash.
 *
 * usage: npy_test [DIR]   — with DIR, also checks DIR/np_<dtype>.npy written by numpy
 * (tests/unit/npy_interop.py gen) and writes DIR/alma_<dtype>.npy for numpy to check (… check). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alma/alma.h"
#include "core/core.h" /* f16 conversion */

static char tmpdir[256];
static const char *interop_dir;

static const char *tmp(const char *name) {
  static char buf[512];
  snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
  return buf;
}

static void write_bytes(const char *path, const void *b, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  if (n) assert_int_equal(fwrite(b, 1, n, f), n);
  fclose(f);
}

/* A .npy file with the given version, header text (padded as numpy does) and data. */
static void write_npy(const char *path, int major, const char *dict, const void *data, size_t n) {
  size_t lenb = major == 1 ? 2 : 4, pre = 8 + lenb, dl = strlen(dict) + 1;
  size_t total = (pre + dl + 63) / 64 * 64, hlen = total - pre;
  unsigned char *b = calloc(total + n + 1, 1);
  memcpy(b, "\x93NUMPY", 6);
  b[6] = (unsigned char)major;
  b[7] = 0;
  for (size_t i = 0; i < lenb; i++) b[8 + i] = (unsigned char)(hlen >> (8 * i));
  memcpy(b + pre, dict, dl - 1);
  memset(b + pre + dl - 1, ' ', hlen - dl);
  b[total - 1] = '\n';
  if (n) memcpy(b + total, data, n);
  write_bytes(path, b, total + n);
  free(b);
}

static const alma_dtype all_dtypes[] = {
    ALMA_DTYPE_FLOAT16, ALMA_DTYPE_FLOAT32, ALMA_DTYPE_FLOAT64, ALMA_DTYPE_INT8,   ALMA_DTYPE_UINT8,
    ALMA_DTYPE_INT16,   ALMA_DTYPE_UINT16,  ALMA_DTYPE_INT32,   ALMA_DTYPE_UINT32, ALMA_DTYPE_INT64,
    ALMA_DTYPE_UINT64,  ALMA_DTYPE_BOOL,
};
#define N_DTYPES (sizeof all_dtypes / sizeof all_dtypes[0])

/* Deterministic, dtype-representable pattern: byte i of the buffer = f(i), bool 0/1. */
static void fill(alma_tensor *t) {
  uint8_t *p = t->data;
  for (size_t i = 0; i < t->nbytes; i++)
    p[i] = t->dtype == ALMA_DTYPE_BOOL ? (uint8_t)(i % 3 == 0) : (uint8_t)(i * 37 + 11);
}

static void make(alma_tensor *t, alma_dtype dt, int rank, const int64_t *dims) {
  memset(t, 0, sizeof *t);
  t->dtype = dt;
  t->rank = rank;
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= (t->dims[i] = dims[i]);
  t->nbytes = (size_t)n * alma_dtype_size(dt);
  t->data = malloc(t->nbytes ? t->nbytes : 1);
  t->owns_data = 1;
  fill(t);
}

static void assert_same(const alma_tensor *a, const alma_tensor *b) {
  assert_int_equal(a->dtype, b->dtype);
  assert_int_equal(a->rank, b->rank);
  for (int i = 0; i < a->rank; i++) assert_int_equal(a->dims[i], b->dims[i]);
  assert_int_equal(a->nbytes, b->nbytes);
  if (a->nbytes) assert_memory_equal(a->data, b->data, a->nbytes);
}

static void test_roundtrip_all_dtypes(void **state) {
  (void)state;
  static const int64_t shapes[][4] = {{0}, {7}, {2, 3, 5}, {1, 1, 1, 4}, {3, 0}};
  static const int ranks[] = {0, 1, 3, 4, 2};
  for (size_t d = 0; d < N_DTYPES; d++)
    for (size_t s = 0; s < sizeof ranks / sizeof ranks[0]; s++) {
      alma_tensor a, b;
      make(&a, all_dtypes[d], ranks[s], shapes[s]);
      assert_int_equal(alma_npy_save(tmp("rt.npy"), &a), ALMA_OK);
      assert_int_equal(alma_npy_load(tmp("rt.npy"), &b), ALMA_OK);
      assert_true(b.owns_data);
      assert_same(&a, &b);
      alma_tensor_free_data(&a);
      alma_tensor_free_data(&b);
    }
}

static void test_saved_header_is_aligned(void **state) {
  (void)state;
  alma_tensor a;
  int64_t dims[] = {2, 3};
  make(&a, ALMA_DTYPE_FLOAT32, 2, dims);
  assert_int_equal(alma_npy_save(tmp("al.npy"), &a), ALMA_OK);
  FILE *f = fopen(tmp("al.npy"), "rb");
  unsigned char b[256];
  size_t n = fread(b, 1, sizeof b, f);
  fclose(f);
  assert_int_equal(n, 128 + 24); /* the 60-char dict + 10-byte preamble pads to 128, as numpy's does */
  assert_int_equal(b[6], 1);
  assert_int_equal(b[8] | b[9] << 8, 128 - 10);
  assert_int_equal(b[127], '\n');
  assert_non_null(strstr((char *)b + 10, "'descr': '<f4'"));
  assert_non_null(strstr((char *)b + 10, "'shape': (2, 3)"));
  alma_tensor_free_data(&a);
}

static void test_one_dim_tuple_has_comma(void **state) {
  (void)state;
  alma_tensor a;
  int64_t dims[] = {5};
  make(&a, ALMA_DTYPE_INT64, 1, dims);
  assert_int_equal(alma_npy_save(tmp("c.npy"), &a), ALMA_OK);
  FILE *f = fopen(tmp("c.npy"), "rb");
  char b[128] = {0};
  assert_true(fread(b, 1, 127, f) > 64);
  fclose(f);
  assert_non_null(strstr(b + 10, "(5,)"));
  alma_tensor_free_data(&a);
}

static void test_versions_2_and_3(void **state) {
  (void)state;
  float v[4] = {1, -2, 3.5f, 4};
  for (int major = 1; major <= 3; major++) {
    write_npy(tmp("v.npy"), major, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", v, sizeof v);
    alma_tensor t;
    assert_int_equal(alma_npy_load(tmp("v.npy"), &t), ALMA_OK);
    assert_int_equal(t.rank, 2);
    assert_memory_equal(t.data, v, sizeof v);
    alma_tensor_free_data(&t);
  }
}

static void test_header_variants(void **state) {
  (void)state;
  int32_t v[3] = {1, 2, 3};
  /* key order, double quotes, no trailing comma, extra spaces, python2 long */
  const char *dicts[] = {
      "{'shape': (3,), 'fortran_order': False, 'descr': '<i4'}",
      "{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (3,)}",
      "{ 'descr' : '<i4' , 'fortran_order' : False , 'shape' : ( 3 , ) , }",
      "{'descr': '<i4', 'fortran_order': False, 'shape': (3L,), }",
      "{'descr': '=i4', 'fortran_order': False, 'shape': (3,), }",
  };
  for (size_t i = 0; i < sizeof dicts / sizeof dicts[0]; i++) {
    write_npy(tmp("h.npy"), 1, dicts[i], v, sizeof v);
    alma_tensor t;
    assert_int_equal(alma_npy_load(tmp("h.npy"), &t), ALMA_OK);
    assert_int_equal(t.dtype, ALMA_DTYPE_INT32);
    assert_int_equal(t.dims[0], 3);
    assert_memory_equal(t.data, v, sizeof v);
    alma_tensor_free_data(&t);
  }
}

static void test_scalar(void **state) {
  (void)state;
  double v = 2.5;
  write_npy(tmp("s.npy"), 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", &v, sizeof v);
  alma_tensor t;
  assert_int_equal(alma_npy_load(tmp("s.npy"), &t), ALMA_OK);
  assert_int_equal(t.rank, 0);
  assert_int_equal(alma_tensor_numel(&t), 1);
  assert_true(*(double *)t.data == 2.5);
  alma_tensor_free_data(&t);
}

static void test_big_endian_is_swapped(void **state) {
  (void)state;
  unsigned char be[] = {0x00, 0x01, 0x02, 0x03, 0xff, 0xff, 0xff, 0xfe};
  write_npy(tmp("be.npy"), 1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", be, sizeof be);
  alma_tensor t;
  assert_int_equal(alma_npy_load(tmp("be.npy"), &t), ALMA_OK);
  assert_int_equal(((int32_t *)t.data)[0], 0x00010203);
  assert_int_equal(((int32_t *)t.data)[1], -2);
  alma_tensor_free_data(&t);
}

static void test_fortran_order_is_reordered(void **state) {
  (void)state;
  /* the 2x3 matrix [[0,1,2],[3,4,5]] stored column-major */
  int16_t f[6] = {0, 3, 1, 4, 2, 5};
  write_npy(tmp("fo.npy"), 1, "{'descr': '<i2', 'fortran_order': True, 'shape': (2, 3), }", f, sizeof f);
  alma_tensor t;
  assert_int_equal(alma_npy_load(tmp("fo.npy"), &t), ALMA_OK);
  for (int i = 0; i < 6; i++) assert_int_equal(((int16_t *)t.data)[i], i);
  alma_tensor_free_data(&t);
  /* rank 3: 2x2x2 with value = 4i+2j+k, column-major offset i + 2j + 4k */
  uint8_t g[8];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      for (int k = 0; k < 2; k++) g[i + 2 * j + 4 * k] = (uint8_t)(4 * i + 2 * j + k);
  write_npy(tmp("fo3.npy"), 1, "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 2, 2), }", g, sizeof g);
  assert_int_equal(alma_npy_load(tmp("fo3.npy"), &t), ALMA_OK);
  for (int i = 0; i < 8; i++) assert_int_equal(((uint8_t *)t.data)[i], i);
  alma_tensor_free_data(&t);
}

static void test_bool_nonzero_is_true(void **state) {
  (void)state;
  uint8_t b[3] = {0, 7, 1};
  write_npy(tmp("b.npy"), 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", b, sizeof b);
  alma_tensor t;
  assert_int_equal(alma_npy_load(tmp("b.npy"), &t), ALMA_OK);
  assert_int_equal(t.dtype, ALMA_DTYPE_BOOL);
  assert_int_equal(((uint8_t *)t.data)[1], 1);
  alma_tensor_free_data(&t);
}

/* Expects failure with status st and a message containing the file name and `phrase`. */
static void expect_fail(const char *path, alma_status st, const char *phrase) {
  alma_tensor t;
  memset(&t, 0x5a, sizeof t);
  alma_status got = alma_npy_load(path, &t);
  if (got != st || !strstr(alma_last_error(), phrase) || !strstr(alma_last_error(), path))
    fail_msg("%s: got %s '%s', expected %s containing '%s'", path, alma_status_name(got), alma_last_error(),
             alma_status_name(st), phrase);
  assert_null(t.data); /* nothing handed out on failure */
}

static void test_malformed(void **state) {
  (void)state;
  float v[6] = {0};
  const char *p = tmp("bad.npy");
  struct {
    const char *dict;
    size_t ndata;
    alma_status st;
    const char *phrase;
  } cases[] = {
      {"{'descr': '<f4', 'fortran_order': False}", 24, ALMA_ERR_PARSE, "missing key 'shape'"},
      {"{'descr': '<f4', 'shape': (6,)}", 24, ALMA_ERR_PARSE, "missing key 'fortran_order'"},
      {"{'fortran_order': False, 'shape': (6,)}", 24, ALMA_ERR_PARSE, "missing key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", 24, ALMA_ERR_PARSE, "unexpected key 'x'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", 24, ALMA_ERR_PARSE, "duplicate"},
      {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (6,)}", 24, ALMA_ERR_PARSE, "True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [6]}", 24, ALMA_ERR_PARSE, "not a list"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-6,)}", 24, ALMA_ERR_PARSE, "non-negative"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", 24, ALMA_ERR_PARSE, "expected ',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,", 24, ALMA_ERR_PARSE, "unterminated"},
      {"{'descr': '<f4", 24, ALMA_ERR_PARSE, "unterminated string"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (6,)}", 24, ALMA_ERR_UNSUPPORTED, "'<f4, '"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} junk", 24, ALMA_ERR_PARSE, "after the dictionary"},
      {"['descr', '<f4']", 24, ALMA_ERR_PARSE, "'{'"},
      {"", 24, ALMA_ERR_PARSE, "'{'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", 20, ALMA_ERR_PARSE, "truncated"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", 0, ALMA_ERR_PARSE, "truncated"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (5,)}", 24, ALMA_ERR_PARSE, "trailing bytes"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999, 9999999999)}", 24,
       ALMA_ERR_PARSE, "too large"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (999999999999999999999999,)}", 24, ALMA_ERR_PARSE,
       "too large"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,6)}", 24, ALMA_ERR_UNSUPPORTED,
       "more than 8 dimensions"},
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (3,)}", 24, ALMA_ERR_UNSUPPORTED, "'<c8'"},
      {"{'descr': '|O', 'fortran_order': False, 'shape': (3,)}", 24, ALMA_ERR_UNSUPPORTED, "'|O'"},
      /* strings load (as string tensors), but 3 elements of '<U4' need 48 bytes */
      {"{'descr': '<U4', 'fortran_order': False, 'shape': (3,)}", 24, ALMA_ERR_PARSE, "truncated"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,)}", 24, ALMA_ERR_UNSUPPORTED, "structured"},
      {"{'descr': '|f4', 'fortran_order': False, 'shape': (6,)}", 24, ALMA_ERR_PARSE, "byte order"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    write_npy(p, 1, cases[i].dict, v, cases[i].ndata);
    expect_fail(p, cases[i].st, cases[i].phrase);
  }
}

static void test_bad_preamble(void **state) {
  (void)state;
  const char *p = tmp("pre.npy");
  write_bytes(p, "", 0);
  expect_fail(p, ALMA_ERR_PARSE, "empty file");
  write_bytes(p, "\x93NUM", 4);
  expect_fail(p, ALMA_ERR_PARSE, "shorter than");
  write_bytes(p, "PK\x03\x04xxxxxxxxxxxx", 16); /* an .npz (zip) */
  expect_fail(p, ALMA_ERR_PARSE, "magic");
  write_bytes(p, "\x93NUMPY\x04\x00\x10\x00", 10);
  expect_fail(p, ALMA_ERR_UNSUPPORTED, "version 4.0");
  write_bytes(p, "\x93NUMPY\x01\x00\x10", 9);
  expect_fail(p, ALMA_ERR_PARSE, "header length");
  write_bytes(p, "\x93NUMPY\x01\x00\x40\x00{'descr'", 17); /* header claims 64 bytes, has 7 */
  expect_fail(p, ALMA_ERR_PARSE, "truncated in the header");
  write_bytes(p, "\x93NUMPY\x02\x00\xff\xff\xff\xff{", 13);
  expect_fail(p, ALMA_ERR_PARSE, "implausibly large");
  /* a NUL inside the header must not end parsing early or be read past */
  write_bytes(p, "\x93NUMPY\x01\x00\x06\x00{\0}   ", 16);
  expect_fail(p, ALMA_ERR_PARSE, "malformed");
  expect_fail(tmp("does-not-exist.npy"), ALMA_ERR_IO, "cannot open");
  expect_fail(tmpdir, ALMA_ERR_IO, "not a regular file");
}

static void test_save_errors(void **state) {
  (void)state;
  alma_tensor a;
  int64_t dims[] = {4};
  make(&a, ALMA_DTYPE_BFLOAT16, 1, dims);
  assert_int_equal(alma_npy_save(tmp("x.npy"), &a), ALMA_ERR_UNSUPPORTED);
  assert_non_null(strstr(alma_last_error(), "bfloat16"));
  a.dtype = ALMA_DTYPE_FLOAT32; /* 8 bytes for a shape needing 16 */
  assert_int_equal(alma_npy_save(tmp("x.npy"), &a), ALMA_ERR_INVALID_ARG);
  a.dtype = ALMA_DTYPE_INT16;
  assert_int_equal(alma_npy_save("/nonexistent-dir/x.npy", &a), ALMA_ERR_IO);
  assert_non_null(strstr(alma_last_error(), "/nonexistent-dir/x.npy"));
  alma_tensor_free_data(&a);
}

/* ---- IDX ------------------------------------------------------------------------------------ */

static void test_idx(void **state) {
  (void)state;
  const char *p = tmp("t.idx");
  /* 2x3 uint8 (MNIST label/image style) */
  unsigned char u8[] = {0, 0, 0x08, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 255};
  write_bytes(p, u8, sizeof u8);
  alma_tensor t;
  assert_int_equal(alma_idx_load(p, &t), ALMA_OK);
  assert_int_equal(t.dtype, ALMA_DTYPE_UINT8);
  assert_int_equal(t.rank, 2);
  assert_int_equal(t.dims[0], 2);
  assert_int_equal(t.dims[1], 3);
  assert_int_equal(((uint8_t *)t.data)[5], 255);
  alma_tensor_free_data(&t);
  /* big-endian int32 and float32 */
  unsigned char i32[] = {0, 0, 0x0C, 1, 0, 0, 0, 2, 0xff, 0xff, 0xff, 0xfe, 0, 0, 1, 0};
  write_bytes(p, i32, sizeof i32);
  assert_int_equal(alma_idx_load(p, &t), ALMA_OK);
  assert_int_equal(((int32_t *)t.data)[0], -2);
  assert_int_equal(((int32_t *)t.data)[1], 256);
  alma_tensor_free_data(&t);
  unsigned char f32[] = {0, 0, 0x0D, 1, 0, 0, 0, 1, 0x3f, 0xc0, 0, 0};
  write_bytes(p, f32, sizeof f32);
  assert_int_equal(alma_idx_load(p, &t), ALMA_OK);
  assert_true(((float *)t.data)[0] == 1.5f);
  alma_tensor_free_data(&t);
}

static void expect_idx_fail(const void *b, size_t n, alma_status st, const char *phrase) {
  const char *p = tmp("bad.idx");
  write_bytes(p, b, n);
  alma_tensor t;
  alma_status got = alma_idx_load(p, &t);
  if (got != st || !strstr(alma_last_error(), phrase) || !strstr(alma_last_error(), p))
    fail_msg("got %s '%s', expected %s containing '%s'", alma_status_name(got), alma_last_error(),
             alma_status_name(st), phrase);
}

static void test_idx_malformed(void **state) {
  (void)state;
  expect_idx_fail("", 0, ALMA_ERR_PARSE, "empty file");
  expect_idx_fail("\x1f\x8b\x08\x00", 4, ALMA_ERR_PARSE, "gzip");
  expect_idx_fail("\x00\x00\x07\x01\x00\x00\x00\x01x", 9, ALMA_ERR_PARSE, "not an IDX file");
  expect_idx_fail("\x00\x00\x08\x09", 4, ALMA_ERR_UNSUPPORTED, "9 dimensions");
  expect_idx_fail("\x00\x00\x08\x02\x00\x00\x00\x02", 8, ALMA_ERR_PARSE, "truncated in its dimensions");
  expect_idx_fail("\x00\x00\x08\x01\x00\x00\x00\x04xy", 10, ALMA_ERR_PARSE, "truncated");
  expect_idx_fail("\x00\x00\x08\x01\x00\x00\x00\x01xy", 10, ALMA_ERR_PARSE, "trailing bytes");
  expect_idx_fail("\x00\x00\x0E\x03\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 16, ALMA_ERR_PARSE,
                  "too large");
}

/* ---- numpy interop (only with a DIR argument) --------------------------------------------- */

static const char *short_name(alma_dtype t) {
  switch (t) {
    case ALMA_DTYPE_FLOAT16: return "f2";
    case ALMA_DTYPE_FLOAT32: return "f4";
    case ALMA_DTYPE_FLOAT64: return "f8";
    case ALMA_DTYPE_INT8: return "i1";
    case ALMA_DTYPE_UINT8: return "u1";
    case ALMA_DTYPE_INT16: return "i2";
    case ALMA_DTYPE_UINT16: return "u2";
    case ALMA_DTYPE_INT32: return "i4";
    case ALMA_DTYPE_UINT32: return "u4";
    case ALMA_DTYPE_INT64: return "i8";
    case ALMA_DTYPE_UINT64: return "u8";
    default: return "b1";
  }
}

/* numpy wrote np_<dt>.npy = (arange(24) % 7 == 0 for bool, else arange(24) - 5 for signed,
 * arange(24) for unsigned, times 0.5 for floats).reshape(2,3,4), plus np_f4_fortran.npy (asfortranarray),
 * np_f4_v2.npy / np_f4_v3.npy and np_f8_be.npy (big-endian). */
static double expected_value(alma_dtype t, int i) {
  switch (t) {
    case ALMA_DTYPE_BOOL: return i % 7 == 0;
    case ALMA_DTYPE_UINT8: case ALMA_DTYPE_UINT16: case ALMA_DTYPE_UINT32: case ALMA_DTYPE_UINT64: return i;
    case ALMA_DTYPE_FLOAT16: case ALMA_DTYPE_FLOAT32: case ALMA_DTYPE_FLOAT64: return (i - 5) * 0.5;
    default: return i - 5;
  }
}

static double value_at(const alma_tensor *t, int i) {
  const void *d = t->data;
  switch (t->dtype) {
    case ALMA_DTYPE_FLOAT32: return ((const float *)d)[i];
    case ALMA_DTYPE_FLOAT64: return ((const double *)d)[i];
    case ALMA_DTYPE_FLOAT16: return alma__f16_to_f32(((const uint16_t *)d)[i]);
    case ALMA_DTYPE_INT8: return ((const int8_t *)d)[i];
    case ALMA_DTYPE_UINT8: case ALMA_DTYPE_BOOL: return ((const uint8_t *)d)[i];
    case ALMA_DTYPE_INT16: return ((const int16_t *)d)[i];
    case ALMA_DTYPE_UINT16: return ((const uint16_t *)d)[i];
    case ALMA_DTYPE_INT32: return ((const int32_t *)d)[i];
    case ALMA_DTYPE_UINT32: return ((const uint32_t *)d)[i];
    case ALMA_DTYPE_INT64: return (double)((const int64_t *)d)[i];
    case ALMA_DTYPE_UINT64: return (double)((const uint64_t *)d)[i];
    default: return -1e300;
  }
}

static void check_np_file(const char *name, alma_dtype dt) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", interop_dir, name);
  alma_tensor t;
  if (alma_npy_load(path, &t) != ALMA_OK) fail_msg("%s: %s", path, alma_last_error());
  assert_int_equal(t.dtype, dt);
  assert_int_equal(t.rank, 3);
  assert_int_equal(t.dims[0] * 100 + t.dims[1] * 10 + t.dims[2], 234);
  for (int i = 0; i < 24; i++)
    if (value_at(&t, i) != expected_value(dt, i))
      fail_msg("%s[%d] = %g, expected %g", path, i, value_at(&t, i), expected_value(dt, i));
  alma_tensor_free_data(&t);
}

static void test_numpy_interop(void **state) {
  (void)state;
  if (!interop_dir) skip();
  char name[64];
  for (size_t d = 0; d < N_DTYPES; d++) {
    alma_dtype dt = all_dtypes[d];
    snprintf(name, sizeof name, "np_%s.npy", short_name(dt));
    check_np_file(name, dt);
    /* and write the same values for numpy to check */
    alma_tensor t;
    int64_t dims[] = {2, 3, 4};
    make(&t, dt, 3, dims);
    for (int i = 0; i < 24; i++) {
      double v = expected_value(dt, i);
      switch (dt) {
        case ALMA_DTYPE_FLOAT32: ((float *)t.data)[i] = (float)v; break;
        case ALMA_DTYPE_FLOAT64: ((double *)t.data)[i] = v; break;
        case ALMA_DTYPE_FLOAT16: ((uint16_t *)t.data)[i] = alma__f32_to_f16((float)v); break;
        case ALMA_DTYPE_INT8: ((int8_t *)t.data)[i] = (int8_t)v; break;
        case ALMA_DTYPE_UINT8: case ALMA_DTYPE_BOOL: ((uint8_t *)t.data)[i] = (uint8_t)v; break;
        case ALMA_DTYPE_INT16: ((int16_t *)t.data)[i] = (int16_t)v; break;
        case ALMA_DTYPE_UINT16: ((uint16_t *)t.data)[i] = (uint16_t)v; break;
        case ALMA_DTYPE_INT32: ((int32_t *)t.data)[i] = (int32_t)v; break;
        case ALMA_DTYPE_UINT32: ((uint32_t *)t.data)[i] = (uint32_t)v; break;
        case ALMA_DTYPE_INT64: ((int64_t *)t.data)[i] = (int64_t)v; break;
        case ALMA_DTYPE_UINT64: ((uint64_t *)t.data)[i] = (uint64_t)v; break;
        default: break;
      }
    }
    char path[512];
    snprintf(path, sizeof path, "%s/alma_%s.npy", interop_dir, short_name(dt));
    assert_int_equal(alma_npy_save(path, &t), ALMA_OK);
    alma_tensor_free_data(&t);
  }
  check_np_file("np_f4_fortran.npy", ALMA_DTYPE_FLOAT32);
  check_np_file("np_f4_v2.npy", ALMA_DTYPE_FLOAT32);
  check_np_file("np_f4_v3.npy", ALMA_DTYPE_FLOAT32);
  check_np_file("np_f8_be.npy", ALMA_DTYPE_FLOAT64);
}

static int rm_tmpdir(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : 0;
}

int main(int argc, char **argv) {
  if (argc > 1) interop_dir = argv[1];
  snprintf(tmpdir, sizeof tmpdir, "%s/alma-npy-test-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip_all_dtypes),
      cmocka_unit_test(test_saved_header_is_aligned),
      cmocka_unit_test(test_one_dim_tuple_has_comma),
      cmocka_unit_test(test_versions_2_and_3),
      cmocka_unit_test(test_header_variants),
      cmocka_unit_test(test_scalar),
      cmocka_unit_test(test_big_endian_is_swapped),
      cmocka_unit_test(test_fortran_order_is_reordered),
      cmocka_unit_test(test_bool_nonzero_is_true),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_bad_preamble),
      cmocka_unit_test(test_save_errors),
      cmocka_unit_test(test_idx),
      cmocka_unit_test(test_idx_malformed),
      cmocka_unit_test(test_numpy_interop),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  rm_tmpdir();
  return rc;
}
