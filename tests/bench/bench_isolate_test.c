/* Fork isolation with fake workloads: every failure mode becomes an outcome with the right reason
 * and the parent (this test) survives; ALMA_TEST_FAULT acts through the same path. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <unistd.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "bench/bench.h"

/* RLIMIT_AS cannot apply under ASan (it reserves terabytes of address space). GCC says so with
 * __SANITIZE_ADDRESS__, clang with __has_feature. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

typedef enum { J_OK, J_SEGV, J_ABORT, J_HANG, J_EXIT, J_OOM, J_NOISY, J_FAULT_ENV, J_NO_RECORD, J_SILENT, J_GRANDCHILD } job_kind;

#ifdef UNDER_ASAN
/* ASan would catch SIGSEGV itself and exit 1: leave it to the crash handler under test. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "handle_segv=0:handle_sigbus=0:handle_sigfpe=0"; }
#endif

/* Not NULL (UBSan checks NULL stores and would stop first), but never mapped: a real SIGSEGV. */
static volatile int *volatile null_ptr = (volatile int *)16;

static void job(void *arg, alma__chan *ch) {
  job_kind k = *(job_kind *)arg;
  if (k == J_SILENT) _exit(5); /* dies before its first line: nothing ever reaches the parent */
  alma__chan_line(ch, "step load");
  alma__chan_line(ch, "progress timed 3 10");
  alma__chan_line(ch, "step run");
  switch (k) {
    case J_OK: break;
    case J_SEGV: *null_ptr = 1; break;
    case J_ABORT: abort();
    case J_HANG: for (;;) pause();
    case J_EXIT: _exit(7);
    case J_OOM: {
      for (;;) {
        char *p = malloc(8 << 20);
        if (!p) break;
        memset(p, 1, 8 << 20);
      }
      alma__chan_line(ch, "step oom");
      alma__chan_record(ch, "{\"status\":\"error\",\"error\":\"out of memory\"}");
      return;
    }
    case J_NOISY:
      for (int i = 0; i < 5000; i++) fprintf(stderr, "chatter line %d\n", i);
      printf("stdout chatter is captured too\n");
      break;
    case J_FAULT_ENV: {
      alma_status st = alma__test_fault("FOLD+EAGER", alma__chan_is_child(ch));
      char rec[256];
      snprintf(rec, sizeof rec, "{\"status\":\"%s\",\"error\":\"%s\"}", st == ALMA_OK ? "ok" : "error",
               st == ALMA_OK ? "" : alma_status_name(st));
      alma__chan_record(ch, rec);
      return;
    }
    case J_NO_RECORD:
    case J_SILENT: return;
    case J_GRANDCHILD: {
      /* Starts a process that lets go of every pipe and would run for ever: it must not outlive
       * the job, which exits normally. */
      pid_t g = fork();
      if (g == 0) {
        for (int fd = 0; fd < 1024; fd++) close(fd);
        for (;;) pause();
      }
      char rec[64];
      snprintf(rec, sizeof rec, "{\"pid\":%d}", (int)g);
      alma__chan_record(ch, rec);
      return;
    }
  }
  alma__chan_record(ch, "{\"status\":\"ok\",\"value\":\"line\\nbreak\"}");
}

typedef struct {
  int lines, ticks;
  char last[64];
} seen;

static void on_line(void *user, const char *line, double elapsed) {
  seen *s = user;
  (void)elapsed;
  if (!line) {
    s->ticks++;
    return;
  }
  s->lines++;
  snprintf(s->last, sizeof s->last, "%s", line);
}

static alma__job_outcome run(job_kind k, int isolate, double timeout, int64_t memlimit, seen *s) {
  alma__job_opts o = {.isolate = isolate, .timeout_s = timeout, .memory_limit_bytes = memlimit, .on_line = on_line, .user = s};
  alma__job_outcome oc;
  assert_int_equal(alma__job_run(job, &k, &o, &oc), ALMA_OK);
  return oc;
}

static void test_ok(void **state) {
  (void)state;
  for (int iso = 0; iso <= 1; iso++) {
    seen s = {0};
    alma__job_outcome oc = run(J_OK, iso, 10, 0, &s);
    assert_int_equal(oc.status, ALMA_OK);
    assert_non_null(oc.record);
    assert_string_equal(oc.record, "{\"status\":\"ok\",\"value\":\"line\\nbreak\"}");
    assert_string_equal(oc.last_step, "run");
    assert_int_equal(s.lines, 3);
    assert_int_equal(oc.exit_code, 0);
    alma__job_outcome_free(&oc);
  }
}

static void test_segv_gives_backtrace(void **state) {
  (void)state;
  seen s = {0};
  alma__job_outcome oc = run(J_SEGV, 1, 10, 0, &s);
  assert_int_equal(oc.status, ALMA_ERR_CRASH);
  assert_int_equal(oc.term_signal, SIGSEGV);
  assert_non_null(strstr(oc.reason, "SIGSEGV"));
  assert_non_null(strstr(oc.reason, "step 'run'"));
  assert_null(oc.record);
  assert_non_null(oc.backtrace);
  assert_non_null(strstr(oc.backtrace, "bench_isolate_test"));  /* frames of this program */
  assert_non_null(oc.stderr_tail);
  assert_non_null(strstr(oc.stderr_tail, "fatal signal 11"));
  assert_null(strstr(oc.stderr_tail, "--- native backtrace ---"));  /* not twice */
  alma__job_outcome_free(&oc);
}

static void test_abort(void **state) {
  (void)state;
  seen s = {0};
  alma__job_outcome oc = run(J_ABORT, 1, 10, 0, &s);
  assert_int_equal(oc.status, ALMA_ERR_CRASH);
  assert_int_equal(oc.term_signal, SIGABRT);
  assert_non_null(strstr(oc.reason, "SIGABRT"));
  assert_non_null(oc.backtrace);
  alma__job_outcome_free(&oc);
}

static void test_hang_times_out(void **state) {
  (void)state;
  seen s = {0};
  alma__job_outcome oc = run(J_HANG, 1, 1.0, 0, &s);
  assert_int_equal(oc.status, ALMA_ERR_TIMEOUT);
  assert_int_equal(oc.timed_out, 1);
  assert_non_null(strstr(oc.reason, "timed out after 1 s during step 'run'"));
  assert_true(oc.wall_s >= 1.0 && oc.wall_s < 5.0);
  assert_true(s.ticks >= 2);  /* the parent kept calling back while it waited */
  alma__job_outcome_free(&oc);
}

static void test_hang_backtrace(void **state) {
  (void)state;
  seen s = {0};
  alma__job_outcome oc = run(J_HANG, 1, 0.5, 0, &s);
  assert_int_equal(oc.status, ALMA_ERR_TIMEOUT);
  assert_non_null(oc.backtrace); /* where it hung: the main thread's stack before the kill */
  assert_non_null(strstr(oc.backtrace, "timeout expired"));
  assert_non_null(strstr(oc.backtrace, "bench_isolate_test"));
  alma__job_outcome_free(&oc);
}

static void test_silent_death(void **state) {
  (void)state;
  seen s = {0};
  alma__job_outcome oc = run(J_SILENT, 1, 10, 0, &s);
  assert_int_equal(oc.status, ALMA_ERR_CRASH);
  assert_int_equal(oc.exit_code, 5);
  assert_non_null(strstr(oc.reason, "step 'start'"));
  assert_int_equal(s.lines, 0);
  alma__job_outcome_free(&oc);
}

static int gone(pid_t pid) {
  char p[64], st[512];
  snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(p, "r");
  if (!f) return 1;
  size_t n = fread(st, 1, sizeof st - 1, f);
  fclose(f);
  st[n] = 0;
  const char *e = strrchr(st, ')');
  return e && (e[2] == 'Z' || e[2] == 'X');
}

static void test_grandchild_killed(void **state) {
  (void)state;
  seen s = {0};
  alma__job_outcome oc = run(J_GRANDCHILD, 1, 10, 0, &s);
  assert_int_equal(oc.status, ALMA_OK);
  int pid = 0;
  assert_int_equal(sscanf(oc.record, "{\"pid\":%d}", &pid), 1);
  assert_true(pid > 0);
  int dead = 0;
  for (int i = 0; i < 200 && !(dead = gone(pid)); i++) usleep(10000);
  if (!dead) kill(pid, SIGKILL);
  assert_true(dead);
  alma__job_outcome_free(&oc);
}

static void test_signal_named(void **state) {
  (void)state;
  seen s = {0};
  setenv("ALMA_TEST_FAULT", "usr1", 1);
  alma__job_outcome oc = run(J_FAULT_ENV, 1, 10, 0, &s);
  unsetenv("ALMA_TEST_FAULT");
  assert_int_equal(oc.status, ALMA_ERR_CRASH);
  assert_int_equal(oc.term_signal, SIGUSR1);
  assert_non_null(strstr(oc.reason, "signal 10 (SIGUSR1)"));
  alma__job_outcome_free(&oc);
  char buf[32];
  assert_string_equal(alma__signal_name(SIGHUP, buf, sizeof buf), "SIGHUP");
  assert_string_equal(alma__signal_name(SIGRTMIN + 2, buf, sizeof buf), "SIGRTMIN+2");
  assert_string_equal(alma__signal_name(200, buf, sizeof buf), "signal 200");
}

static void *interrupt_later(void *arg) {
  (void)arg;
  usleep(300000);
  alma__interrupt(SIGTERM);
  return NULL;
}

/* Last: the interruption stays for the rest of the process, as it does for alma's sweep. */
static void test_interrupt(void **state) {
  (void)state;
  seen s = {0};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, interrupt_later, NULL), 0);
  alma__job_outcome oc = run(J_HANG, 1, 30, 0, &s);
  pthread_join(th, NULL);
  assert_int_equal(alma__interrupted(), SIGTERM);
  assert_int_equal(oc.status, ALMA_ERR_RUNTIME);
  assert_non_null(strstr(oc.reason, "interrupted (alma got SIGTERM) during step 'run'"));
  assert_true(oc.wall_s < 10);
  alma__job_outcome_free(&oc);
  oc = run(J_OK, 1, 30, 0, &s);
  assert_non_null(strstr(oc.reason, "not started"));
  assert_null(oc.record);
  alma__job_outcome_free(&oc);
}

static void test_exit_without_result(void **state) {
  (void)state;
  seen s = {0};
  alma__job_outcome oc = run(J_EXIT, 1, 10, 0, &s);
  assert_int_equal(oc.status, ALMA_ERR_CRASH);
  assert_int_equal(oc.exit_code, 7);
  assert_non_null(strstr(oc.reason, "exited with status 7"));
  alma__job_outcome_free(&oc);
  oc = run(J_NO_RECORD, 1, 10, 0, &s);
  assert_int_equal(oc.status, ALMA_ERR_CRASH);
  assert_non_null(strstr(oc.reason, "without a result"));
  alma__job_outcome_free(&oc);
  oc = run(J_NO_RECORD, 0, 10, 0, &s);
  assert_int_equal(oc.status, ALMA_ERR_INTERNAL);
  alma__job_outcome_free(&oc);
}

static void test_memory_limit(void **state) {
  (void)state;
#ifdef UNDER_ASAN
  skip();
#endif
  seen s = {0};
  alma__job_outcome oc = run(J_OOM, 1, 30, (int64_t)256 << 20, &s);
  assert_int_equal(oc.status, ALMA_OK);  /* the job caught its own allocation failure */
  assert_non_null(strstr(oc.record, "out of memory"));
  assert_string_equal(oc.last_step, "oom");
  alma__job_outcome_free(&oc);
}

static void test_stderr_captured(void **state) {
  (void)state;
  seen s = {0};
  alma__job_outcome oc = run(J_NOISY, 1, 10, 0, &s);
  assert_int_equal(oc.status, ALMA_OK);
  assert_non_null(oc.stderr_tail);
  assert_non_null(strstr(oc.stderr_tail, "chatter line 4999"));
  assert_null(strstr(oc.stderr_tail, "chatter line 10\n"));  /* only the tail is kept */
  assert_non_null(strstr(oc.stderr_tail, "stdout chatter"));
  alma__job_outcome_free(&oc);
}

static void test_fault_env(void **state) {
  (void)state;
  seen s = {0};
  alma__job_outcome oc;
  setenv("ALMA_TEST_FAULT", "segv@FOLD+EAGER", 1);
  oc = run(J_FAULT_ENV, 1, 10, 0, &s);
  assert_int_equal(oc.status, ALMA_ERR_CRASH);
  assert_int_equal(oc.term_signal, SIGSEGV);
  alma__job_outcome_free(&oc);
  setenv("ALMA_TEST_FAULT", "segv@EAGER", 1);  /* another conversion: nothing happens */
  oc = run(J_FAULT_ENV, 1, 10, 0, &s);
  assert_int_equal(oc.status, ALMA_OK);
  assert_non_null(strstr(oc.record, "\"ok\""));
  alma__job_outcome_free(&oc);
  setenv("ALMA_TEST_FAULT", "abort", 1);
  oc = run(J_FAULT_ENV, 1, 10, 0, &s);
  assert_int_equal(oc.term_signal, SIGABRT);
  alma__job_outcome_free(&oc);
  setenv("ALMA_TEST_FAULT", "hang", 1);
  oc = run(J_FAULT_ENV, 1, 0.5, 0, &s);
  assert_int_equal(oc.status, ALMA_ERR_TIMEOUT);
  alma__job_outcome_free(&oc);
  setenv("ALMA_TEST_FAULT", "exit", 1);
  oc = run(J_FAULT_ENV, 1, 10, 0, &s);
  assert_int_equal(oc.exit_code, 3);
  alma__job_outcome_free(&oc);
#ifndef UNDER_ASAN
  setenv("ALMA_TEST_FAULT", "oom", 1);
  oc = run(J_FAULT_ENV, 1, 30, (int64_t)256 << 20, &s);
  assert_int_equal(oc.status, ALMA_OK);
  assert_non_null(strstr(oc.record, "ERR_NOMEM"));
  alma__job_outcome_free(&oc);
#endif
  setenv("ALMA_TEST_FAULT", "error", 1);
  oc = run(J_FAULT_ENV, 0, 10, 0, &s);  /* the non-crashing kind works in-process too */
  assert_non_null(strstr(oc.record, "ERR_RUNTIME"));
  alma__job_outcome_free(&oc);
  setenv("ALMA_TEST_FAULT", "segv", 1);
  oc = run(J_FAULT_ENV, 0, 10, 0, &s);  /* crashing kinds are ignored in-process */
  assert_non_null(strstr(oc.record, "\"ok\""));
  alma__job_outcome_free(&oc);
  setenv("ALMA_TEST_FAULT", "explode", 1);
  oc = run(J_FAULT_ENV, 1, 10, 0, &s);
  assert_non_null(strstr(oc.record, "ERR_INVALID_ARG"));
  alma__job_outcome_free(&oc);
  unsetenv("ALMA_TEST_FAULT");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ok),          cmocka_unit_test(test_segv_gives_backtrace),
      cmocka_unit_test(test_abort),       cmocka_unit_test(test_hang_times_out),
      cmocka_unit_test(test_exit_without_result), cmocka_unit_test(test_memory_limit),
      cmocka_unit_test(test_stderr_captured), cmocka_unit_test(test_fault_env),
      cmocka_unit_test(test_hang_backtrace), cmocka_unit_test(test_silent_death),
      cmocka_unit_test(test_grandchild_killed), cmocka_unit_test(test_signal_named),
      cmocka_unit_test(test_interrupt),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
