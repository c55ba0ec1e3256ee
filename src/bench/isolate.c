/* Fork isolation: a job runs in a child whose results come back as lines over a pipe (Redis'
 * childinfo), its stderr/stdout over another; the parent waits with a timeout and kills on expiry
 * (libuv's test runner). Crashes, aborts, OOM kills, timeouts and early exits become an outcome
 * with a reason, never the parent's death. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2, sched_getaffinity */
#endif
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <poll.h>
#include <signal.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"

struct alma__chan {
  int fd;         /* >= 0 in a child: the status pipe */
  char *buf;      /* in-process: lines collected here */
  size_t len, cap;
  int failed;     /* out of memory collecting lines */
};

int alma__chan_is_child(const alma__chan *c) { return c->fd >= 0; }

static void write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;  /* parent gone: nothing useful to do */
    }
    p += w;
    n -= (size_t)w;
  }
}

static void chan_put(alma__chan *c, const char *s, size_t n) {
  if (c->fd >= 0) {
    write_all(c->fd, s, n);
    return;
  }
  if (c->failed) return;
  if (c->len + n + 1 > c->cap) {
    size_t cap = c->cap ? c->cap : 4096;
    while (cap < c->len + n + 1) cap *= 2;
    char *nb = realloc(c->buf, cap);
    if (!nb) {
      c->failed = 1;
      return;
    }
    c->buf = nb;
    c->cap = cap;
  }
  memcpy(c->buf + c->len, s, n);
  c->len += n;
  c->buf[c->len] = 0;
}

void alma__chan_line(alma__chan *c, const char *fmt, ...) {
  char small[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  /* Lines are single-line by construction; a stray newline would split the protocol. */
  for (char *p = small; *p; p++)
    if (*p == '\n') *p = ' ';
  chan_put(c, small, strlen(small));
  chan_put(c, "\n", 1);
}

void alma__chan_record(alma__chan *c, const char *json) {
  chan_put(c, "record ", 7);
  chan_put(c, json, strlen(json));  /* unformatted cJSON: escapes newlines, so one line */
  chan_put(c, "\n", 1);
}

/* ---- crash handler ------------------------------------------------------------------------- */
static char altstack[1 << 16];

/* "SEGV", "USR1"... (glibc's table: static strings, so async-signal-safe), NULL when the number
 * has no name. */
static const char *sig_abbrev(int sig) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  return sigabbrev_np(sig);
#else
  switch (sig) {
    case SIGSEGV: return "SEGV";
    case SIGBUS: return "BUS";
    case SIGILL: return "ILL";
    case SIGFPE: return "FPE";
    case SIGABRT: return "ABRT";
    case SIGKILL: return "KILL";
    case SIGTERM: return "TERM";
    case SIGINT: return "INT";
    case SIGHUP: return "HUP";
    case SIGPIPE: return "PIPE";
    case SIGXCPU: return "XCPU";
    case SIGQUIT: return "QUIT";
    case SIGUSR1: return "USR1";
    case SIGUSR2: return "USR2";
    case SIGTRAP: return "TRAP";
    case SIGSYS: return "SYS";
    default: return NULL;
  }
#endif
}

const char *alma__signal_name(int sig, char *buf, size_t n) {
  const char *a = sig_abbrev(sig);
  if (a) snprintf(buf, n, "SIG%s", a);
  else if (sig >= SIGRTMIN && sig <= SIGRTMAX) snprintf(buf, n, "SIGRTMIN+%d", sig - SIGRTMIN);
  else snprintf(buf, n, "signal %d", sig);
  return buf;
}


static void crash_handler(int sig) {
  /* async-signal-safe only: write(2), backtrace_symbols_fd (no malloc once libgcc is loaded). */
  const char *name = sig_abbrev(sig);
  char msg[96];
  int n = 0;
  const char *a = "alma: fatal signal ";
  while (*a) msg[n++] = *a++;
  if (sig >= 10) msg[n++] = (char)('0' + sig / 10);
  msg[n++] = (char)('0' + sig % 10);
  if (name) {
    const char *b = " (SIG";
    while (*b) msg[n++] = *b++;
    while (*name && n < 80) msg[n++] = *name++;
    msg[n++] = ')';
  }
  msg[n++] = '\n';
  write_all(2, msg, (size_t)n);
  static const char head[] = "--- native backtrace ---\n", tail[] = "--- end of backtrace ---\n";
  write_all(2, head, sizeof head - 1);
  void *frames[64];
  int nf = backtrace(frames, 64);
  backtrace_symbols_fd(frames, nf, 2);
  write_all(2, tail, sizeof tail - 1);
  signal(sig, SIG_DFL);
  raise(sig);
}

/* The timeout's stack dump: the parent sends ALMA__DUMP_SIGNAL to the child's main thread before
 * killing it, and this prints where that thread is, then lets it go on (the kill follows). */
static void dump_handler(int sig) {
  (void)sig;
  int saved = errno;
  static const char head[] = "--- native backtrace ---\n(the main thread when the timeout expired)\n",
                    tail[] = "--- end of backtrace ---\n";
  write_all(2, head, sizeof head - 1);
  void *frames[64];
  int nf = backtrace(frames, 64);
  backtrace_symbols_fd(frames, nf, 2);
  write_all(2, tail, sizeof tail - 1);
  errno = saved;
}

void alma__install_crash_handler(void) {
  void *warm[2];
  backtrace(warm, 2);  /* loads libgcc's unwinder now, not inside the handler */
  stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
  sigaltstack(&ss, NULL);  /* a stack overflow still gets its backtrace */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = crash_handler;
  sa.sa_flags = SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, NULL);
  sa.sa_handler = dump_handler;
  sa.sa_flags = SA_ONSTACK | SA_RESTART;
  sigaction(ALMA__DUMP_SIGNAL, &sa, NULL);
}

/* ---- the running child, for signal handlers ------------------------------------------------ */
/* The process group of the job child now running (0: none) and the first interrupting signal. Read
 * and written from signal handlers: plain sig_atomic_t. */
static volatile sig_atomic_t current_group, interrupted;

void alma__interrupt(int sig) {
  if (!interrupted) interrupted = sig;
  pid_t g = (pid_t)current_group;
  if (g > 0) {
    kill(-g, SIGKILL);
    kill(g, SIGKILL); /* in case it had not joined its group yet */
  }
}

int alma__interrupted(void) { return (int)interrupted; }

/* In a child: SIGINT/SIGTERM/SIGHUP handlers are the parent's (the CLI's, which only take note
 * and stop the sweep); the child dies of them as any process would. Ignored ones stay ignored. */
static void default_stop_signals(void) {
  int sigs[] = {SIGINT, SIGTERM, SIGHUP};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    struct sigaction sa;
    if (sigaction(sigs[i], NULL, &sa) == 0 && sa.sa_handler != SIG_IGN && sa.sa_handler != SIG_DFL)
      signal(sigs[i], SIG_DFL);
  }
}

/* Kills the child and everything it started (its process group), then reaps it. */
static void kill_child(pid_t pid, int *status) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
  while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
  }
  current_group = 0;
}

/* The kernel's count of OOM kills (/proc/vmstat oom_kill, any cgroup), -1 if unknown: whether a
 * SIGKILL nobody in alma sent came from it. */
static long oom_kills(void) {
  FILE *f = fopen("/proc/vmstat", "re");
  if (!f) return -1;
  char line[128];
  long v = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "oom_kill %ld", &v) == 1) break;
  fclose(f);
  return v;
}

/* ---- fault injection ----------------------------------------------------------------------- */
/* A write through it is a real SIGSEGV: the first page is never mapped, and not NULL itself, so
 * that UBSan (which checks NULL stores) lets the signal happen in sanitizer builds. */
volatile uintptr_t alma__fault_address = 16;

alma_status alma__test_fault(const char *conversion, int in_child) {
  const char *env = getenv("ALMA_TEST_FAULT");
  if (!env || !*env) return ALMA_OK;
  char kind[32];
  const char *at = strchr(env, '@');
  size_t kn = at ? (size_t)(at - env) : strlen(env);
  if (kn >= sizeof kind) kn = sizeof kind - 1;
  memcpy(kind, env, kn);
  kind[kn] = 0;
  if (at && conversion && strcasecmp(at + 1, conversion)) return ALMA_OK;
  if (!strcmp(kind, "error"))
    return alma__errorf(ALMA_ERR_RUNTIME, "injected failure (ALMA_TEST_FAULT=%s)", env);
  if (!in_child) {
    ALMA_LOGW("ALMA_TEST_FAULT=%s ignored: crashing faults act only in an isolated child", env);
    return ALMA_OK;
  }
  if (!strcmp(kind, "segv")) {
    *(volatile int *)alma__fault_address = 1;
  } else if (!strcmp(kind, "abort")) {
    abort();
  } else if (!strcmp(kind, "usr1")) {
    raise(SIGUSR1); /* a signal outside the crash handler's: it must still be named */
  } else if (!strcmp(kind, "hang")) {
    for (;;) pause();
  } else if (!strcmp(kind, "exit")) {
    fflush(NULL);
    _exit(3);
  } else if (!strcmp(kind, "oom")) {
    /* Runaway allocation, touched so it is real. Never more than 512 MiB (the default limit, the
     * machine's memory, is no bound for a test). */
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > ((rlim_t)512 << 20))) {
      rl.rlim_cur = rl.rlim_max = (rlim_t)512 << 20;
      setrlimit(RLIMIT_AS, &rl);
    }
    size_t total = 0, chunk = (size_t)16 << 20;
    for (;;) {
      char *p = malloc(chunk);
      if (!p) break;
      memset(p, 1, chunk);
      total += chunk;
    }
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory after allocating %zu MiB (injected runaway allocation)",
                        total >> 20);
  } else {
    return alma__errorf(ALMA_ERR_INVALID_ARG, "ALMA_TEST_FAULT=%s: unknown kind '%s' (segv, abort, usr1, hang, oom, exit, error)",
                        env, kind);
  }
  return ALMA_OK;
}

/* ---- running a job ------------------------------------------------------------------------- */
static void limit_memory(int64_t bytes);
static int limit_below_footprint(int64_t limit, alma__job_outcome *out);
static void enter_child(pid_t parent);
typedef struct {
  char *buf;
  size_t len, cap;
} sbuf;

static int sbuf_put(sbuf *b, const char *p, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1) cap *= 2;
    char *nb = realloc(b->buf, cap);
    if (!nb) return 0;
    b->buf = nb;
    b->cap = cap;
  }
  memcpy(b->buf + b->len, p, n);
  b->len += n;
  b->buf[b->len] = 0;
  return 1;
}

/* Handles every complete line of b (status protocol), keeping a partial last line. */
static void consume_lines(sbuf *b, const alma__job_opts *o, alma__job_outcome *out, double t0, int final) {
  size_t start = 0;
  for (;;) {
    char *nl = b->len > start ? memchr(b->buf + start, '\n', b->len - start) : NULL;
    if (!nl && !(final && start < b->len)) break;
    size_t end = nl ? (size_t)(nl - b->buf) : b->len;
    b->buf[end] = 0;
    char *line = b->buf + start;
    if (!strncmp(line, "record ", 7)) {
      free(out->record);
      out->record = alma__strdup(line + 7);
    } else if (!strncmp(line, "mark ", 5)) {
      size_t l = strlen(out->marks);
      snprintf(out->marks + l, sizeof out->marks - l, "%s%s", l ? " " : "", line + 5);
    } else {
      if (!strncmp(line, "step ", 5)) snprintf(out->last_step, sizeof out->last_step, "%s", line + 5);
      if (o->on_line) o->on_line(o->user, line, alma__bench_now() - t0);
    }
    start = nl ? end + 1 : b->len;
  }
  if (!b->buf) return; /* nothing came (a child that died before its first line) */
  memmove(b->buf, b->buf + start, b->len - start);
  b->len -= start;
  b->buf[b->len] = 0;
}

#define STDERR_KEEP (64 * 1024)

static void keep_tail(sbuf *e, const char *p, size_t n) {
  sbuf_put(e, p, n);
  if (e->len > 2 * STDERR_KEEP) {
    memmove(e->buf, e->buf + e->len - STDERR_KEEP, STDERR_KEEP);
    e->len = STDERR_KEEP;
    e->buf[e->len] = 0;
  }
}

/* backtrace_symbols_fd names only exported symbols; a frame in the executable reads
 * "/path/alma(+0x16831)[0x55...]". addr2line (binutils), when installed, turns the offset into a
 * function and file:line from the debug info. Runs in the parent, after the child is gone. */
static char *symbolize(const char *bt) {
  sbuf out = {0};
  const char *p = bt;
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), p);
    sbuf_put(&out, line, strlen(line));
    char *open = strstr(line, "(+0x"), *close = open ? strchr(open, ')') : NULL;
    if (open && close && open > line && access("/usr/bin/addr2line", X_OK) == 0) {
      *open = 0;
      *close = 0;
      const char *bin = line, *off = open + 2;
      int safe = 1;  /* the path goes to a shell: refuse anything but plain path characters */
      for (const char *q = bin; *q; q++) safe &= strchr("/._-+", *q) || (*q >= '0' && *q <= '9') || ((*q | 32) >= 'a' && (*q | 32) <= 'z');
      char cmd[1200], res[512];
      snprintf(cmd, sizeof cmd, "/usr/bin/addr2line -C -f -p -e '%s' %s 2>/dev/null", bin, off);
      FILE *f = safe ? popen(cmd, "r") : NULL;
      if (f) {
        if (fgets(res, sizeof res, f) && !strstr(res, "??")) {
          res[strcspn(res, "\n")] = 0;
          sbuf_put(&out, "  ", 2);
          sbuf_put(&out, res, strlen(res));
        }
        pclose(f);
      }
    }
    sbuf_put(&out, "\n", 1);
    p += len + (nl ? 1 : 0);
  }
  return out.buf;
}

/* Splits the crash handler's section out of the stderr text (into out->backtrace, symbolized),
 * and keeps the last 40 lines of the rest. */
static void finish_stderr(sbuf *e, alma__job_outcome *out) {
  if (!e->buf || !e->len) return;
  char *bt = strstr(e->buf, "--- native backtrace ---\n");
  if (bt) {
    char *body = bt + strlen("--- native backtrace ---\n");
    char *end = strstr(body, "--- end of backtrace ---");
    size_t n = end ? (size_t)(end - body) : strlen(body);
    char *raw = malloc(n + 1);
    if (raw) {
      memcpy(raw, body, n);
      raw[n] = 0;
      out->backtrace = symbolize(raw);
      if (!out->backtrace) out->backtrace = raw;
      else free(raw);
    }
    /* Drop the section from the stderr text so it is not shown twice. */
    char *after = end ? strchr(end, '\n') : NULL;
    size_t keep = after ? strlen(after + 1) : 0;
    memmove(bt, after ? after + 1 : bt, keep);
    bt[keep] = 0;
    e->len = (size_t)(bt - e->buf) + keep;
  }
  const char *p = e->buf + e->len;
  int lines = 0;
  while (p > e->buf) {
    if (p[-1] == '\n' && p != e->buf + e->len && ++lines >= 40) break;
    p--;
  }
  out->stderr_tail = alma__strdup(p);
}

static int set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static alma_status run_in_process(alma__job_fn fn, void *arg, const alma__job_opts *o, alma__job_outcome *out) {
  alma__chan ch = {.fd = -1};
  double t0 = alma__bench_now();
  fn(arg, &ch);
  out->wall_s = alma__bench_now() - t0;
  out->exit_code = 0;
  if (ch.failed) {
    free(ch.buf);
    snprintf(out->reason, sizeof out->reason, "out of memory collecting the job's output");
    out->status = ALMA_ERR_NOMEM;
    return ALMA_OK;
  }
  sbuf b = {ch.buf, ch.len, ch.cap};
  consume_lines(&b, o, out, t0, 1);
  free(b.buf);
  if (!out->record) {
    snprintf(out->reason, sizeof out->reason, "the job wrote no result (last step '%s')", out->last_step);
    out->status = ALMA_ERR_INTERNAL;
    return ALMA_OK;
  }
  out->status = ALMA_OK;
  return ALMA_OK;
}

alma_status alma__job_run(alma__job_fn fn, void *arg, const alma__job_opts *o, alma__job_outcome *out) {
  memset(out, 0, sizeof *out);
  out->exit_code = -1;
  if (interrupted) {
    char sn[32];
    out->status = ALMA_ERR_RUNTIME;
    snprintf(out->reason, sizeof out->reason, "not started: alma was interrupted (%s)",
             alma__signal_name(interrupted, sn, sizeof sn));
    return ALMA_OK;
  }
  if (!o->isolate) return run_in_process(fn, arg, o, out);
  if (limit_below_footprint(o->memory_limit_bytes, out)) return ALMA_OK;

  int sp[2], ep[2];
  if (pipe2(sp, O_CLOEXEC) != 0) return alma__errorf(ALMA_ERR_IO, "pipe: %s", strerror(errno));
  if (pipe2(ep, O_CLOEXEC) != 0) {
    close(sp[0]), close(sp[1]);
    return alma__errorf(ALMA_ERR_IO, "pipe: %s", strerror(errno));
  }
  fflush(NULL);  /* or the child would flush our buffered output a second time */
  double t0 = alma__bench_now();
  long oom0 = oom_kills();
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(sp[0]), close(sp[1]), close(ep[0]), close(ep[1]);
    return alma__errorf(ALMA_ERR_RUNTIME, "fork: %s", strerror(errno));
  }
  if (pid == 0) {
    enter_child(parent);
    /* Child: stdout and stderr both go to the parent's capture (runtime chatter stays hidden). */
    close(sp[0]);
    close(ep[0]);
    dup2(ep[1], 2);
    dup2(ep[1], 1);
    close(ep[1]);
    setvbuf(stderr, NULL, _IONBF, 0);
    limit_memory(o->memory_limit_bytes);
    alma__install_crash_handler();
#ifdef __GLIBC__
    /* Outputs are fresh buffers each run. glibc would mmap the large ones and unmap them on free,
     * so every run paid page faults on its outputs (a KV-cache decode: most of its time), while
     * ONNX Runtime and other peers keep freed memory in an arena. Keep it here too: blocks up to
     * 32 MiB (glibc's maximum) come from the heap, and freed heap stays mapped. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    alma__chan ch = {.fd = sp[1]};
    fn(arg, &ch);
    fflush(NULL);
    _exit(0);  /* not exit(): the parent's atexit handlers are not ours to run */
  }
  setpgid(pid, pid); /* both sides set it: whichever runs first, the group exists before a kill */
  current_group = pid;
  if (interrupted) kill(-pid, SIGKILL), kill(pid, SIGKILL); /* came between fork and here */
  close(sp[1]);
  close(ep[1]);
  set_nonblock(sp[0]);
  set_nonblock(ep[0]);
  sbuf lines = {0}, err = {0};
  int open_s = 1, open_e = 1, status = 0, reaped = 0;
  double deadline = o->timeout_s > 0 ? t0 + o->timeout_s : 0, last_tick = t0, dump_until = 0;
  char buf[65536];
  while (!reaped) {
    double now = alma__bench_now();
    if (interrupted) {
      kill_child(pid, &status);
      reaped = 1;
      break;
    }
    if (deadline && now >= deadline && !dump_until) {
      /* Where it hangs: the main thread prints its stack (crash handler's format) on our capture,
       * then it is killed; at most 2 s for that. */
      out->timed_out = 1;
      dump_until = now + 2;
      syscall(SYS_tgkill, pid, pid, ALMA__DUMP_SIGNAL);
    }
    if (dump_until && (now >= dump_until || !open_e ||
                       (err.buf && strstr(err.buf, "--- end of backtrace ---")))) {
      kill_child(pid, &status);
      reaped = 1;
      break;
    }
    if (!open_s && !open_e) {
      /* Both pipes closed: the child is exiting (or closed them itself; the deadline still holds). */
      siginfo_t si;
      si.si_pid = 0;
      if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) {
        /* Exited but not yet reaped, so its group id cannot be anyone else's: end whatever it
         * started and left running, then reap. */
        kill(-pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        reaped = 1;
        break;
      }
      usleep(2000);
      continue;
    }
    struct pollfd pf[2];
    int np = 0;
    if (open_s) pf[np].fd = sp[0], pf[np].events = POLLIN, np++;
    if (open_e) pf[np].fd = ep[0], pf[np].events = POLLIN, np++;
    int wait_ms = dump_until ? 20 : 250;
    if (deadline && !dump_until) {
      double left = (deadline - now) * 1000;
      if (left < wait_ms) wait_ms = left < 1 ? 1 : (int)left;
    }
    int pr = poll(pf, (nfds_t)np, wait_ms);
    if (pr < 0 && errno != EINTR) break;
    for (int i = 0; pr > 0 && i < np; i++) {
      if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(pf[i].fd, buf, sizeof buf);
      if (n > 0) {
        if (pf[i].fd == sp[0]) {
          sbuf_put(&lines, buf, (size_t)n);
          consume_lines(&lines, o, out, t0, 0);
        } else {
          keep_tail(&err, buf, (size_t)n);
          if (o->echo_stderr) write_all(2, buf, (size_t)n);
        }
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        if (pf[i].fd == sp[0]) open_s = 0;
        else open_e = 0;
      }
    }
    now = alma__bench_now();
    if (o->on_line && now - last_tick >= 0.25) {
      last_tick = now;
      o->on_line(o->user, NULL, now - t0);
    }
  }
  if (!reaped) kill_child(pid, &status); /* poll failed: do not leave the child behind */
  current_group = 0;
  /* Whatever is still buffered in the pipes. */
  ssize_t n;
  while (open_s && (n = read(sp[0], buf, sizeof buf)) > 0) sbuf_put(&lines, buf, (size_t)n);
  while (open_e && (n = read(ep[0], buf, sizeof buf)) > 0) keep_tail(&err, buf, (size_t)n);
  close(sp[0]);
  close(ep[0]);
  consume_lines(&lines, o, out, t0, 1);
  free(lines.buf);
  finish_stderr(&err, out);
  free(err.buf);
  out->wall_s = alma__bench_now() - t0;

  const char *step = out->last_step[0] ? out->last_step : "start";
  char sn[32];
  if (interrupted && !out->record) {
    out->term_signal = SIGKILL;
    snprintf(out->reason, sizeof out->reason, "interrupted (alma got %s) during step '%s': the child was killed",
             alma__signal_name(interrupted, sn, sizeof sn), step);
    out->status = ALMA_ERR_RUNTIME;
    return ALMA_OK;
  }
  if (out->timed_out) {
    out->term_signal = SIGKILL;
    snprintf(out->reason, sizeof out->reason, "timed out after %.3g s during step '%s' (killed with SIGKILL)",
             o->timeout_s, step);
    out->status = ALMA_ERR_TIMEOUT;
    return ALMA_OK;
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    out->term_signal = sig;
    long oom1 = sig == SIGKILL ? oom_kills() : -1;
    if (sig == SIGKILL)
      snprintf(out->reason, sizeof out->reason, "killed by signal 9 (SIGKILL, not sent by alma: %s) during step '%s'",
               oom0 < 0 || oom1 < 0 ? "the kernel's OOM killer or another process"
               : oom1 > oom0        ? "the kernel's OOM killer acted meanwhile (/proc/vmstat oom_kill)"
                                    : "another process; the kernel's OOM killer did not act meanwhile",
               step);
    else
      snprintf(out->reason, sizeof out->reason, "crashed: signal %d (%s) during step '%s'%s", sig,
               alma__signal_name(sig, sn, sizeof sn), step,
               sig == SIGABRT && o->memory_limit_bytes > 0
                   ? " (a memory limit was set: a failed allocation can abort)" : "");
    out->status = ALMA_ERR_CRASH;
    return ALMA_OK;
  }
  out->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (out->record && out->exit_code == 0) {
    out->status = ALMA_OK;
    return ALMA_OK;
  }
  if (out->record) {
    snprintf(out->reason, sizeof out->reason, "exited with status %d after writing its result", out->exit_code);
    out->status = ALMA_OK;
    return ALMA_OK;
  }
  snprintf(out->reason, sizeof out->reason, "exited with status %d during step '%s' without a result",
           out->exit_code, step);
  out->status = ALMA_ERR_CRASH;
  return ALMA_OK;
}

/* Address space this process maps now (libraries, heap, thread stacks): a forked child starts
 * with all of it. 0 when /proc does not say. */
static int64_t mapped_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long long pages = 0;
  if (!f) return 0;
  if (fscanf(f, "%lld", &pages) != 1) pages = 0;
  fclose(f);
  return (int64_t)pages * sysconf(_SC_PAGESIZE);
}

/* A memory limit (RLIMIT_AS) at or below what the child inherits leaves it no room even to grow
 * its stack: it died in the loader with SIGSEGV, reported as a crash. Refuse such a job up front
 * with the figures; 32 MiB is the least room a conversion of the smallest model needs here. */
static int limit_below_footprint(int64_t limit, alma__job_outcome *out) {
  int64_t have = mapped_bytes(), room = (int64_t)32 << 20;
  if (limit <= 0 || have <= 0 || limit >= have + room) return 0;
  out->status = ALMA_ERR_NOMEM;
  snprintf(out->reason, sizeof out->reason,
           "memory limit %lld MiB is below what the conversion's process starts with: %lld MiB already mapped "
           "(libraries, heap, thread stacks) plus %lld MiB to run; raise --memory-limit",
           (long long)(limit >> 20), (long long)(have >> 20), (long long)(room >> 20));
  return 1;
}

/* A forked child's first steps: its own process group, so that the parent kills whatever it
 * starts too; death with the parent (a SIGKILL'ed parent included) instead of running on,
 * re-parented to init (the parent may have died before prctl: then getppid() is no longer it);
 * default stop signals, since the interrupt handlers' state is the parent's. */
static void enter_child(pid_t parent) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  current_group = 0;
  default_stop_signals();
}

/* The job's memory limit in the child: RLIMIT_AS, both soft and hard. */
static void limit_memory(int64_t bytes) {
  if (bytes <= 0) return;
  struct rlimit rl = {(rlim_t)bytes, (rlim_t)bytes};
  if (setrlimit(RLIMIT_AS, &rl) != 0) fprintf(stderr, "alma: setrlimit(RLIMIT_AS): %s\n", strerror(errno));
}

int alma__fork_supervised(const alma__job_opts *o, alma__job_outcome *out) {
  memset(out, 0, sizeof *out);
  out->exit_code = -1;
  fflush(NULL);
  double t0 = alma__bench_now();
  long oom0 = oom_kills();
  pid_t parent = getpid();
  if (limit_below_footprint(o->memory_limit_bytes, out)) return 1;
  pid_t pid = fork();
  if (pid < 0) {
    alma__errorf(ALMA_ERR_RUNTIME, "fork: %s", strerror(errno));
    return -1;
  }
  if (pid == 0) {
    enter_child(parent);
    limit_memory(o->memory_limit_bytes);
    alma__install_crash_handler();
    return 0;
  }
  setpgid(pid, pid);
  current_group = pid;
  if (interrupted) kill(-pid, SIGKILL), kill(pid, SIGKILL);
  int status = 0;
  double deadline = o->timeout_s > 0 ? t0 + o->timeout_s : 0, dump_until = 0;
  for (;;) {
    siginfo_t si;
    si.si_pid = 0;
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) {
      kill(-pid, SIGKILL); /* what it started and left running */
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      current_group = 0;
      break;
    }
    double now = alma__bench_now();
    if (interrupted || (dump_until && now >= dump_until)) {
      kill_child(pid, &status);
      break;
    }
    if (deadline && now >= deadline && !dump_until) {
      out->timed_out = 1;
      dump_until = now + 1;
      syscall(SYS_tgkill, pid, pid, ALMA__DUMP_SIGNAL);
    }
    usleep(10000);
  }
  out->wall_s = alma__bench_now() - t0;
  char sn[32];
  if (interrupted) {
    out->status = ALMA_ERR_RUNTIME;
    snprintf(out->reason, sizeof out->reason, "interrupted (alma got %s): the child was killed",
             alma__signal_name(interrupted, sn, sizeof sn));
  } else if (out->timed_out) {
    out->term_signal = SIGKILL;
    out->status = ALMA_ERR_TIMEOUT;
    snprintf(out->reason, sizeof out->reason, "timed out after %.3g s (killed with SIGKILL)", o->timeout_s);
  } else if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    long oom1 = sig == SIGKILL ? oom_kills() : -1;
    out->term_signal = sig;
    out->status = ALMA_ERR_CRASH;
    if (sig == SIGKILL)
      snprintf(out->reason, sizeof out->reason, "killed by signal 9 (SIGKILL, not sent by alma: %s)",
               oom0 < 0 || oom1 < 0 ? "the kernel's OOM killer or another process"
               : oom1 > oom0        ? "the kernel's OOM killer acted meanwhile (/proc/vmstat oom_kill)"
                                    : "another process; the kernel's OOM killer did not act meanwhile");
    else
      snprintf(out->reason, sizeof out->reason, "crashed: signal %d (%s)%s", sig, alma__signal_name(sig, sn, sizeof sn),
               o->memory_limit_bytes > 0 ? " (a memory limit was set: a failed allocation can crash a library)" : "");
  } else {
    out->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    out->status = ALMA_OK;
  }
  return 1;
}

int64_t alma__default_memory_limit(void) {
#if defined(__SANITIZE_ADDRESS__)
  return 0; /* ASan reserves terabytes of address space for its shadow */
#else
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) || __has_feature(thread_sanitizer)
  return 0;
#endif
#endif
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? (int64_t)pages * size : 0;
#endif
}

void alma__job_outcome_free(alma__job_outcome *o) {
  free(o->record);
  free(o->stderr_tail);
  free(o->backtrace);
  o->record = o->stderr_tail = o->backtrace = NULL;
}
