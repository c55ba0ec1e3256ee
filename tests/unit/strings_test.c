/* src/core/str.c: string tensors' interned handles. Equal bytes (NUL included) give one handle,
 * different bytes different ones; "" is NULL, so a zeroed tensor holds empty strings; the order
 * is byte-wise with the shorter first on a common prefix; a byte copy of a string tensor
 * (alma__tensor_copy, what every data-movement kernel does) shares handles and frees cleanly (the
 * ASan build runs this); the public accessors; .npy save/load round trip with NUL and UTF-8. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"

static void test_intern(void **state) {
  (void)state;
  const alma__str *a, *b, *c, *e;
  assert_int_equal(alma__str_make("a\0b", 3, &a), ALMA_OK);
  char buf[3] = {'a', 0, 'b'};
  assert_int_equal(alma__str_make(buf, 3, &b), ALMA_OK);
  assert_ptr_equal(a, b); /* same bytes, same handle */
  assert_int_equal(alma__str_make("a", 1, &c), ALMA_OK);
  assert_ptr_not_equal(a, c);
  assert_int_equal(alma__str_len(a), 3);
  assert_memory_equal(alma__str_ptr(a), buf, 3);
  assert_int_equal(alma__str_make("", 0, &e), ALMA_OK);
  assert_null(e);
  assert_string_equal(alma__str_ptr(e), "");
  assert_true(alma__str_cmp(c, a) < 0);  /* "a" before "a\0b" */
  assert_true(alma__str_cmp(e, c) < 0);  /* "" first */
  assert_int_equal(alma__str_cmp(a, b), 0);
  /* many strings: the table grows and keeps every handle */
  const alma__str *h[3000];
  for (int i = 0; i < 3000; i++) {
    char s[32];
    int n = snprintf(s, sizeof s, "k%d", i);
    assert_int_equal(alma__str_make(s, (size_t)n, &h[i]), ALMA_OK);
  }
  for (int i = 0; i < 3000; i += 7) {
    char s[32];
    int n = snprintf(s, sizeof s, "k%d", i);
    const alma__str *again;
    assert_int_equal(alma__str_make(s, (size_t)n, &again), ALMA_OK);
    assert_ptr_equal(again, h[i]);
  }
}

static void test_tensor_copy(void **state) {
  (void)state;
  alma_tensor t, u;
  int64_t dims[2] = {2, 2};
  assert_int_equal(alma__tensor_alloc(&t, ALMA_DTYPE_STRING, 2, dims), ALMA_OK);
  assert_int_equal(t.nbytes, 4 * alma_dtype_size(ALMA_DTYPE_STRING));
  size_t len;
  assert_string_equal(alma_tensor_string(&t, 3, &len), ""); /* zeroed: "" */
  assert_int_equal(alma_tensor_set_string(&t, 1, "h\xc3\xa9", 3), ALMA_OK);
  assert_int_not_equal(alma_tensor_set_string(&t, 4, "x", 1), ALMA_OK); /* out of range */
  assert_int_equal(alma__tensor_copy(&u, &t), ALMA_OK);
  alma_tensor_free_data(&t); /* the copy stays valid: handles are not owned by a tensor */
  assert_string_equal(alma_tensor_string(&u, 1, &len), "h\xc3\xa9");
  assert_int_equal(len, 3);
  assert_null(alma_tensor_string(&u, 4, NULL));
  alma_tensor_free_data(&u);
}

static void test_npy_roundtrip(void **state) {
  (void)state;
  char path[] = "/tmp/alma_strings_testXXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  alma_tensor t, back;
  int64_t dims[1] = {3};
  assert_int_equal(alma__tensor_alloc(&t, ALMA_DTYPE_STRING, 1, dims), ALMA_OK);
  assert_int_equal(alma_tensor_set_string(&t, 0, "a\0b", 3), ALMA_OK);
  assert_int_equal(alma_tensor_set_string(&t, 2, "\xc3\xbc" "ber", 5), ALMA_OK);
  assert_int_equal(alma_npy_save(path, &t), ALMA_OK);
  assert_int_equal(alma_npy_load(path, &back), ALMA_OK);
  assert_int_equal(back.dtype, ALMA_DTYPE_STRING);
  assert_int_equal(back.rank, 1);
  assert_int_equal(back.dims[0], 3);
  for (int i = 0; i < 3; i++) assert_ptr_equal(alma__strs(&back)[i], alma__strs(&t)[i]);
  alma_tensor_free_data(&t);
  alma_tensor_free_data(&back);
  remove(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_intern), cmocka_unit_test(test_tensor_copy), cmocka_unit_test(test_npy_roundtrip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
