/* alma_config: defaults, dictionary-style setting, errors naming the key; conversion parsing. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "bench/bench.h"
#include "conversions/conversions.h"
#include "runtimes/runtime.h"

static void test_defaults(void **state) {
  (void)state;
  alma_config c;
  alma_config_init(&c);
  assert_int_equal(c.n_samples, 100);
  assert_int_equal(c.batch_size, 1);
  assert_string_equal(c.device, "cpu");
  assert_int_equal(c.multiprocessing, 1);
  assert_int_equal(c.fail_on_error, 1);
  assert_int_equal(c.check_outputs, 1);
  assert_int_equal(c.threads, 0);
  assert_true(c.rtol == 1e-3 && c.atol == 1e-4 && c.timeout_s == 600);
  /* INT8_STATIC calibrates on the first 8 batches of the benchmark data unless told otherwise */
  assert_int_equal(c.calibration_batches, 8);
  assert_string_equal(c.save_converted, "");
  assert_string_equal(c.labels, "");
  char buf[64];
  assert_int_equal(alma_config_get(&c, "warmup_s", buf, sizeof buf), ALMA_OK);
  assert_string_equal(buf, "0.1");
  assert_int_equal(alma_config_get(&c, "multiprocessing", buf, sizeof buf), ALMA_OK);
  assert_string_equal(buf, "true");
  /* every key has documentation and reads back what it holds */
  for (int i = 0; alma_config_key(i); i++) {
    assert_non_null(alma_config_key_doc(alma_config_key(i)));
    assert_int_equal(alma_config_get(&c, alma_config_key(i), buf, sizeof buf), ALMA_OK);
    alma_config d = c;
    assert_int_equal(alma_config_set(&d, alma_config_key(i), buf), ALMA_OK);
    assert_memory_equal(&c, &d, sizeof c);
  }
}

static void test_set(void **state) {
  (void)state;
  alma_config c;
  alma_config_init(&c);
  assert_int_equal(alma_config_set(&c, "n_samples", "500"), ALMA_OK);
  assert_int_equal(c.n_samples, 500);
  assert_int_equal(alma_config_set(&c, "rtol", "1e-2"), ALMA_OK);
  assert_true(c.rtol == 1e-2);
  assert_int_equal(alma_config_set(&c, "multiprocessing", "off"), ALMA_OK);
  assert_int_equal(c.multiprocessing, 0);
  assert_int_equal(alma_config_set(&c, "multiprocessing", "TRUE"), ALMA_OK);
  assert_int_equal(c.multiprocessing, 1);
  assert_int_equal(alma_config_set(&c, "device", "CUDA"), ALMA_OK);
  assert_string_equal(c.device, "cuda");
  assert_int_equal(alma_config_set(&c, "seed", "18446744073709551615"), ALMA_OK);
  assert_true(c.seed == UINT64_MAX);
  assert_int_equal(alma_config_set(&c, "threads", "8"), ALMA_OK);
  assert_int_equal(c.threads, 8);
  assert_int_equal(alma_config_set(&c, "save_converted", "out/converted"), ALMA_OK);
  assert_string_equal(c.save_converted, "out/converted");
  assert_int_equal(alma_config_set(&c, "labels", "digits/test_labels.npy"), ALMA_OK);
  assert_string_equal(c.labels, "digits/test_labels.npy");
  assert_int_equal(alma_config_set(&c, "calibration_batches", "0"), ALMA_OK);
  assert_int_equal(c.calibration_batches, 0);
  char big[600];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = 0;
  assert_int_equal(alma_config_set(&c, "labels", big), ALMA_ERR_INVALID_ARG);  /* longer than the field */
}

static void expect_error(const char *key, const char *value, const char *needle) {
  alma_config c;
  alma_config_init(&c);
  alma_config before = c;
  assert_int_equal(alma_config_set(&c, key, value), ALMA_ERR_INVALID_ARG);
  const char *msg = alma_last_error();
  if (!strstr(msg, needle)) fail_msg("message '%s' lacks '%s'", msg, needle);
  assert_memory_equal(&c, &before, sizeof c);  /* a rejected value changes nothing */
}

static void test_errors_name_the_key(void **state) {
  (void)state;
  expect_error("n_sample", "5", "unknown config key 'n_sample'");
  expect_error("n_sample", "5", "n_samples");  /* the valid keys are listed */
  expect_error("n_samples", "abc", "config key 'n_samples': expected an integer");
  expect_error("n_samples", "0", "config key 'n_samples': out of range");
  expect_error("n_samples", "12x", "'n_samples'");
  expect_error("batch_size", "-1", "'batch_size': out of range");
  expect_error("rtol", "nan", "'rtol': expected a number");
  expect_error("rtol", "-1", "'rtol': out of range");
  expect_error("multiprocessing", "maybe", "'multiprocessing': expected a boolean");
  expect_error("device", "tpu", "'device': expected cpu or cuda");
  expect_error("seed", "-3", "'seed': expected an unsigned integer");
  expect_error("timeout_s", "", "'timeout_s': a value is required");
  expect_error("verbose", "3", "'verbose': out of range");
  char buf[8];
  alma_config c;
  alma_config_init(&c);
  assert_int_equal(alma_config_get(&c, "nope", buf, sizeof buf), ALMA_ERR_NOT_FOUND);
}

static void test_conversion_parse(void **state) {
  (void)state;
  alma_conversion c;
  assert_int_equal(alma__conversion_parse("EAGER", &c), ALMA_OK);
  assert_string_equal(c.name, "EAGER");
  assert_int_equal(c.id, 0);
  assert_int_equal(c.n_passes, 0);
  assert_int_equal(alma__conversion_parse(" fold+eager ", &c), ALMA_OK);
  assert_string_equal(c.name, "FOLD+EAGER");
  assert_int_equal(c.id, 1);
  assert_int_equal(c.n_passes, 1);
  assert_string_equal(c.runtime->name, "EAGER");
  assert_int_equal(alma__conversion_parse("1", &c), ALMA_OK);
  assert_string_equal(c.name, "FOLD+EAGER");
  /* a chain that is no preset is accepted by name, with no ID */
  assert_int_equal(alma__conversion_parse("FOLD+FOLD+EAGER", &c), ALMA_OK);
  assert_int_equal(c.id, -1);
  assert_int_equal(c.n_passes, 2);
  /* every preset whose runtime is in this build parses to itself (OPENVINO, ORT ... are optional) */
  for (int i = 0; i < alma__preset_count(); i++) {
    const char *rt = strrchr(alma__preset_at(i)->name, '+');
    if (!alma__runtime_find(rt ? rt + 1 : alma__preset_at(i)->name)) continue;
    assert_int_equal(alma__conversion_parse(alma__preset_at(i)->name, &c), ALMA_OK);
    assert_string_equal(c.name, alma__preset_at(i)->name);
    assert_int_equal(c.id, alma__preset_at(i)->id);
  }
}

static void expect_parse_error(const char *spec, const char *needle) {
  alma_conversion c;
  assert_int_equal(alma__conversion_parse(spec, &c), ALMA_ERR_INVALID_ARG);
  if (!strstr(alma_last_error(), needle)) fail_msg("parse('%s'): '%s' lacks '%s'", spec, alma_last_error(), needle);
}

static void test_conversion_errors(void **state) {
  (void)state;
  expect_parse_error("EAGR", "did you mean EAGER?");
  expect_parse_error("FOLD+EAGR", "did you mean FOLD+EAGER");
  expect_parse_error("FLOD+EAGER", "unknown step 'FLOD'");
  expect_parse_error("FLOD+EAGER", "did you mean FOLD+EAGER");
  expect_parse_error("FOLD", "must end with a runtime");
  expect_parse_error("EAGER+FOLD", "must end with a runtime");
  expect_parse_error("EAGER+EAGER", "must be the last step");
  expect_parse_error("FOLD++EAGER", "empty step");
  expect_parse_error("+EAGER", "empty step");
  expect_parse_error("", "empty");
  expect_parse_error("999", "unknown conversion ID 999");
  expect_parse_error("XYZZY", "unknown runtime 'XYZZY'");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults),        cmocka_unit_test(test_set),
      cmocka_unit_test(test_errors_name_the_key), cmocka_unit_test(test_conversion_parse),
      cmocka_unit_test(test_conversion_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
