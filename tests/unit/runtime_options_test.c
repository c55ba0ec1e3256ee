/* Runtime options (--runtime-option RUNTIME.NAME=VALUE; src/runtimes/options.c): what is accepted
 * and what is refused with which words, the values the runtimes read (defaults, normalization, the
 * last entry winning, other runtimes' entries ignored), the results' JSON and "given" text, and the
 * same checks through alma_config_set and alma_session_create. Parts that need DNNL or BLAS skip
 * when this build lacks them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include <cjson/cJSON.h>
#include "graph/model.h"
#include "runtimes/runtime.h"

static void refused(const char *text, const char *words) {
  alma_status st = alma__rt_options_check(text);
  if (st != ALMA_ERR_INVALID_ARG || !strstr(alma_last_error(), words))
    fail_msg("'%s': status %d, message '%s', expected to contain '%s'", text, st, alma_last_error(), words);
}

static void test_syntax(void **state) {
  (void)state;
  assert_int_equal(alma__rt_options_check(NULL), ALMA_OK);
  assert_int_equal(alma__rt_options_check(""), ALMA_OK);
  assert_int_equal(alma__rt_options_check(" , ,"), ALMA_OK);
  refused("winograd=off", "expected RUNTIME.NAME=VALUE");
  refused("dnnl.winograd", "expected RUNTIME.NAME=VALUE");
  refused(".winograd=on", "expected RUNTIME.NAME=VALUE");
  refused("nosuch.opt=1", "no runtime in this build takes options as 'nosuch.'");
  /* EAGER declares none */
  refused("eager.x=1", "no runtime in this build takes options as 'eager.'");
}

static void test_dnnl(void **state) {
  (void)state;
  const alma_runtime *rt = alma__runtime_find("DNNL");
  if (!rt) skip();
  assert_int_equal(alma__rt_options_check("dnnl.winograd=off, DNNL.strided=FALSE ,dnnl.int8=fallback"), ALMA_OK);
  refused("dnnl.winograd=maybe", "'dnnl.winograd=maybe': the value must be one of auto|on|off");
  refused("dnnl.strided=2", "the value must be on or off");
  refused("dnnl.nosuch=1", "dnnl has no option 'nosuch' (it has: winograd, native_pool");
  refused("dnnl.winograd=on,dnnl.bad", "'dnnl.bad': expected RUNTIME.NAME=VALUE");

  char buf[64];
  alma_runtime_opts none = {.threads = 1}, o = {.threads = 1, .options = "dnnl.winograd=on,blas.threading=library,"
                                                                          "dnnl.strided=0,dnnl.winograd=OFF"};
  assert_string_equal(alma__rt_opt(rt, &none, "winograd", buf, sizeof buf), "auto");
  assert_true(alma__rt_opt_on(rt, &none, "strided"));
  assert_string_equal(alma__rt_opt(rt, &o, "winograd", buf, sizeof buf), "off"); /* the last entry wins */
  assert_false(alma__rt_opt_on(rt, &o, "strided"));                               /* "0" is off */
  assert_true(alma__rt_opt_is(rt, &o, "int8", "on"));                              /* untouched: default */
  assert_null(alma__rt_opt(rt, &o, "nosuch", buf, sizeof buf));
  /* a choice as its position in "auto|on|off", "on|off|fallback" */
  assert_int_equal(alma__rt_opt_index(rt, &none, "winograd"), 0);
  assert_int_equal(alma__rt_opt_index(rt, &o, "winograd"), 2);
  alma_runtime_opts fb = {.threads = 1, .options = "dnnl.int8=fallback"};
  assert_int_equal(alma__rt_opt_index(rt, &fb, "int8"), 2);
  assert_int_equal(alma__rt_opt_index(rt, &o, "int8"), 0);
  assert_int_equal(alma__rt_opt_index(rt, &o, "strided"), -1); /* a bool: no index */

  char json[2048];
  int n_set = -1;
  int len = alma__rt_options_json(rt, o.options, json, sizeof json, &n_set);
  assert_int_equal(len, (int)strlen(json));
  assert_int_equal(n_set, 2);
  cJSON *j = cJSON_Parse(json);
  assert_non_null(j);
  assert_int_equal(cJSON_GetArraySize(j), rt->n_options);
  assert_string_equal(cJSON_GetObjectItem(j, "winograd")->valuestring, "off");
  assert_string_equal(cJSON_GetObjectItem(j, "strided")->valuestring, "off");
  assert_string_equal(cJSON_GetObjectItem(j, "tiny_eager")->valuestring, "on");
  cJSON_Delete(j);
  /* a short buffer: cut, still terminated, the full length returned */
  char small[8];
  assert_int_equal(alma__rt_options_json(rt, o.options, small, sizeof small, NULL), len);
  assert_int_equal(strlen(small), sizeof small - 1);

  alma__rt_options_given(rt, o.options, json, sizeof json);
  assert_string_equal(json, "winograd=off,strided=off"); /* the runtime's order, normalized */
  alma__rt_options_given(rt, NULL, json, sizeof json);
  assert_string_equal(json, "");
}

static void test_blas_int(void **state) {
  (void)state;
  const alma_runtime *rt = alma__runtime_find("BLAS");
  if (!rt) skip();
  assert_int_equal(alma__rt_options_check("blas.chunk_kb=128"), ALMA_OK);
  refused("blas.chunk_kb=8", "an integer in 16..1048576");
  refused("blas.chunk_kb=12x", "an integer in 16..1048576");
  refused("blas.chunk_kb=", "an integer in 16..1048576");
  refused("blas.chunk_kb=99999999999999999999", "an integer in 16..1048576");
  alma_runtime_opts o = {.threads = 1, .options = "blas.chunk_kb=0128"};
  assert_int_equal(alma__rt_opt_int(rt, &o, "chunk_kb"), 128);
  assert_int_equal(alma__rt_opt_int(rt, NULL, "min_cols"), 512);
  char json[512];
  alma__rt_options_json(rt, o.options, json, sizeof json, NULL);
  cJSON *j = cJSON_Parse(json);
  assert_non_null(j);
  assert_true(cJSON_IsNumber(cJSON_GetObjectItem(j, "chunk_kb"))); /* integers as JSON numbers */
  assert_int_equal(cJSON_GetObjectItem(j, "chunk_kb")->valueint, 128);
  cJSON_Delete(j);
}

/* The configuration key and the session refuse what the check refuses, naming it. */
static void test_config_session(void **state) {
  (void)state;
  alma_config c;
  alma_config_init(&c);
  assert_int_equal(alma_config_set(&c, "runtime_options", ""), ALMA_OK);
  assert_int_equal(alma_config_set(&c, "runtime_options", "nosuch.x=1"), ALMA_ERR_INVALID_ARG);
  assert_non_null(strstr(alma_last_error(), "config key 'runtime_options': runtime option 'nosuch.x=1'"));
  assert_string_equal(c.runtime_options, "");

  alma_model *m = NULL;
  assert_int_equal(alma_model_load(ALMA_TEST_MODEL, &m), ALMA_OK);
  alma_session_options so;
  alma_session_options_init(&so);
  so.runtime_options = "nosuch.x=1";
  alma_session *s = NULL;
  assert_int_equal(alma_session_create(m, "EAGER", &so, &s), ALMA_ERR_INVALID_ARG);
  assert_null(s);
  assert_non_null(strstr(alma_last_error(), "nosuch.x=1"));
  if (alma__runtime_find("DNNL")) { /* another runtime's entries are checked, then left to it */
    so.runtime_options = "dnnl.winograd=off";
    assert_int_equal(alma_session_create(m, "EAGER", &so, &s), ALMA_OK);
    alma_session_free(s);
  }
  alma_model_free(m);
}

/* The runtime table's data: every runtime on the host but CUDA, which is on the device; a
 * spinning runtime's advice only where threads can spin, and none once its option avoids it. */
static void test_runtime_data(void **state) {
  (void)state;
  assert_string_equal(alma__rt_device_name(ALMA__DEVICE_HOST), "cpu");
  assert_string_equal(alma__rt_device_name(ALMA__DEVICE_CUDA), "cuda");
  unsetenv("OMP_WAIT_POLICY");
  for (int i = 0; i < alma__runtime_count(); i++) {
    const alma_runtime *rt = alma__runtime_at(i);
    assert_int_equal(rt->device, !strcmp(rt->name, "CUDA") ? ALMA__DEVICE_CUDA : ALMA__DEVICE_HOST);
    if (!rt->spin_advice) continue;
    alma_runtime_opts o = {.threads = 1};
    assert_null(rt->spin_advice(&o, 1));
    o.threads = 2;
    assert_non_null(rt->spin_advice(&o, 2));
  }
  const alma_runtime *ort = alma__runtime_find("ORT_BASIC");
  if (ort) {
    alma_runtime_opts o = {.threads = 2, .options = "ort.spinning=off"};
    assert_null(ort->spin_advice(&o, 2));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_syntax),
      cmocka_unit_test(test_dnnl),
      cmocka_unit_test(test_blas_int),
      cmocka_unit_test(test_config_session),
      cmocka_unit_test(test_runtime_data),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
