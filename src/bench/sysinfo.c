/* What machine the numbers come from: CPU, ISA, memory, OS, governor, library versions. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2, sched_getaffinity */
#endif
#include <cjson/cJSON.h>
#include <gnu/libc-version.h>
#include <openssl/crypto.h>
#include <protobuf-c/protobuf-c.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bench/bench.h"
#include "conversions/conversions.h"
#include "runtimes/runtime.h"

#ifndef ALMA_BUILD_FLAGS
#define ALMA_BUILD_FLAGS ""
#endif

/* Truncating copy (snprintf would warn about truncation we intend). */
static void copy_str(char *dst, size_t n, const char *src) {
  if (!n) return;
  size_t len = src ? strlen(src) : 0;
  if (len >= n) len = n - 1;
  if (len) memcpy(dst, src, len);
  dst[len] = 0;
}

static void append_str(char *dst, size_t n, const char *src) {
  size_t len = strlen(dst);
  if (len < n) copy_str(dst + len, n - len, src);
}

static void trim(char *s) {
  size_t n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '"')) s[--n] = 0;
  size_t i = 0;
  while (s[i] == ' ' || s[i] == '\t' || s[i] == '"') i++;
  if (i) memmove(s, s + i, strlen(s + i) + 1);
}

/* First line of a small file, trimmed; 0 if unreadable. */
static int read_line(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int ok = fgets(buf, (int)n, f) != NULL;
  fclose(f);
  if (ok) trim(buf);
  return ok;
}

/* The flags worth knowing for ML kernels, in this order when present. */
static const char *const isa_flags[] = {
    "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq",
    "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16",
    /* aarch64 */
    "asimd", "asimdhp", "asimddp", "sve", "sve2", "i8mm", "bf16", NULL};

static int has_word(const char *list, const char *w) {
  size_t n = strlen(w);
  for (const char *p = list; (p = strstr(p, w)) != NULL; p += n) {
    int start = p == list || p[-1] == ' ' || p[-1] == '\t' || p[-1] == ':';
    int end = p[n] == 0 || p[n] == ' ' || p[n] == '\n' || p[n] == '\t';
    if (start && end) return 1;
  }
  return 0;
}

/* Physical cores = distinct (physical id, core id) pairs; falls back to logical CPUs. */
static void cpu_topology(int *physical, int *sockets) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  int pairs[1024][2], np = 0, sock[64], ns = 0, phys = -1, core = -1;
  char line[4096];
  if (f) {
    while (fgets(line, sizeof line, f)) {
      if (!strncmp(line, "physical id", 11)) phys = atoi(strchr(line, ':') ? strchr(line, ':') + 1 : "0");
      else if (!strncmp(line, "core id", 7)) core = atoi(strchr(line, ':') ? strchr(line, ':') + 1 : "0");
      else if (line[0] == '\n') {
        if (phys >= 0 && core >= 0) {
          int seen = 0;
          for (int i = 0; i < np; i++) seen |= pairs[i][0] == phys && pairs[i][1] == core;
          if (!seen && np < 1024) pairs[np][0] = phys, pairs[np][1] = core, np++;
          seen = 0;
          for (int i = 0; i < ns; i++) seen |= sock[i] == phys;
          if (!seen && ns < 64) sock[ns++] = phys;
        }
        phys = core = -1;
      }
    }
    if (phys >= 0 && core >= 0) {  /* no trailing blank line */
      int seen = 0;
      for (int i = 0; i < np; i++) seen |= pairs[i][0] == phys && pairs[i][1] == core;
      if (!seen && np < 1024) pairs[np][0] = phys, pairs[np][1] = core, np++;
      seen = 0;
      for (int i = 0; i < ns; i++) seen |= sock[i] == phys;
      if (!seen && ns < 64) sock[ns++] = phys;
    }
    fclose(f);
  }
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  *physical = np > 0 ? np : (int)(online > 0 ? online : 1);
  *sockets = ns > 0 ? ns : 1;
}

int alma__physical_cores(void) {
  int p, s;
  cpu_topology(&p, &s);
  return p;
}

const char *alma__affinity_str(char *buf, size_t n) {
  cpu_set_t set;
  buf[0] = 0;
  if (n == 0) return buf;
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    snprintf(buf, n, "unknown");
    return buf;
  }
  size_t len = 0;
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, &set)) continue;
    int e = c;
    while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &set)) e++;
    int w = e > c ? snprintf(buf + len, n - len, "%s%d-%d", len ? "," : "", c, e)
                  : snprintf(buf + len, n - len, "%s%d", len ? "," : "", c);
    if (w < 0 || (size_t)w >= n - len) break;
    len += (size_t)w;
    c = e;
  }
  return buf;
}

int64_t alma__peak_rss_bytes(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return -1;
  return (int64_t)ru.ru_maxrss * 1024;  /* Linux reports KiB */
}


void alma__system_info_basic(alma_system_info *s) {
  memset(s, 0, sizeof *s);
  char line[8192];
  FILE *f = fopen("/proc/cpuinfo", "r");
  int logical = 0;
  if (f) {
    while (fgets(line, sizeof line, f)) {
      char *colon = strchr(line, ':');
      if (!colon) continue;
      if (!strncmp(line, "processor", 9)) logical++;
      if (!s->cpu_model[0] && (!strncmp(line, "model name", 10) || !strncmp(line, "Model", 5))) {
        copy_str(s->cpu_model, sizeof s->cpu_model, colon + 1);
        trim(s->cpu_model);
      }
      if (!s->isa[0] && (!strncmp(line, "flags", 5) || !strncmp(line, "Features", 8))) {
        size_t len = 0;
        for (int i = 0; isa_flags[i]; i++) {
          if (!has_word(colon + 1, isa_flags[i])) continue;
          int w = snprintf(s->isa + len, sizeof s->isa - len, "%s%s", len ? " " : "", isa_flags[i]);
          if (w < 0 || (size_t)w >= sizeof s->isa - len) break;
          len += (size_t)w;
        }
        if (!len) copy_str(s->isa, sizeof s->isa, "none");
      }
    }
    fclose(f);
  }
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  s->logical_cores = logical > 0 ? logical : (int)(online > 0 ? online : 1);
  cpu_topology(&s->physical_cores, &s->sockets);
  if (getloadavg(s->load_average, 3) != 3) s->load_average[0] = s->load_average[1] = s->load_average[2] = -1;
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  s->memory_bytes = pages > 0 && psz > 0 ? (int64_t)pages * psz : -1;

  f = fopen("/etc/os-release", "r");
  if (f) {
    while (fgets(line, sizeof line, f))
      if (!strncmp(line, "PRETTY_NAME=", 12)) {
        copy_str(s->os, sizeof s->os, line + 12);
        trim(s->os);
      }
    fclose(f);
  }
  struct utsname u;
  if (uname(&u) == 0) {
    copy_str(s->kernel, sizeof s->kernel, u.sysname);
    append_str(s->kernel, sizeof s->kernel, " ");
    append_str(s->kernel, sizeof s->kernel, u.release);
    append_str(s->kernel, sizeof s->kernel, " ");
    append_str(s->kernel, sizeof s->kernel, u.version);
    copy_str(s->machine, sizeof s->machine, u.machine);
  }
  if (!read_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", s->governor, sizeof s->governor))
    copy_str(s->governor, sizeof s->governor, "unknown (no cpufreq)");

  copy_str(s->alma_version, sizeof s->alma_version, alma_version());
  copy_str(s->protobuf_c_version, sizeof s->protobuf_c_version, protobuf_c_version());
  copy_str(s->cjson_version, sizeof s->cjson_version, cJSON_Version());
  copy_str(s->openssl_version, sizeof s->openssl_version, OpenSSL_version(OPENSSL_VERSION));
  copy_str(s->libc_version, sizeof s->libc_version, gnu_get_libc_version());
#if defined(__clang__)
  snprintf(s->compiler, sizeof s->compiler, "clang %s", __clang_version__);
#elif defined(__GNUC__)
  snprintf(s->compiler, sizeof s->compiler, "gcc %s", __VERSION__);
#else
  copy_str(s->compiler, sizeof s->compiler, "unknown");
#endif
  copy_str(s->build_flags, sizeof s->build_flags, ALMA_BUILD_FLAGS);
  trim(s->build_flags);
  /* What the compiler itself says, whatever the build system passed along. */
  append_str(s->build_flags, sizeof s->build_flags, s->build_flags[0] ? " [" : "[");
#ifdef __OPTIMIZE__
  append_str(s->build_flags, sizeof s->build_flags, "optimized");
#else
  append_str(s->build_flags, sizeof s->build_flags, "unoptimized");
#endif
#ifdef NDEBUG
  append_str(s->build_flags, sizeof s->build_flags, ", NDEBUG");
#endif
#if defined(__SANITIZE_ADDRESS__)
  append_str(s->build_flags, sizeof s->build_flags, ", AddressSanitizer");
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  append_str(s->build_flags, sizeof s->build_flags, ", AddressSanitizer");
#endif
#endif
#if defined(__AVX512F__)
  append_str(s->build_flags, sizeof s->build_flags, ", code for AVX-512");
#elif defined(__AVX2__)
  append_str(s->build_flags, sizeof s->build_flags, ", code for AVX2");
#elif defined(__x86_64__)
  append_str(s->build_flags, sizeof s->build_flags, ", code for baseline x86-64");
#endif
  append_str(s->build_flags, sizeof s->build_flags, "]");
}

void alma__system_info_runtimes(char *out, size_t n) { alma__system_info_runtimes_for(out, n, NULL, -1); }

void alma__system_info_runtimes_for(char *out, size_t n, const alma_conversion *conv, int n_conv) {
  size_t len = 0;
  out[0] = 0;
  int nr = alma__runtime_count();
  for (int i = 0; i < nr; i++) {
    const alma_runtime *rt = alma__runtime_at(i);
    if (!rt) continue;
    int wanted = n_conv < 0;
    for (int c = 0; c < n_conv && !wanted; c++) wanted = conv[c].runtime == rt;
    const char *mark = "(unchecked)";
    if (wanted) mark = !rt->init || rt->init() == ALMA_OK ? "" : "(unavailable)";
    int w = snprintf(out + len, n - len, "%s%s%s", len ? " " : "", rt->name, mark);
    if (w < 0 || (size_t)w >= n - len) break;
    len += (size_t)w;
  }
  alma__error_clear();
}

alma_status alma_system_info_get(alma_system_info *s) {
  alma__system_info_basic(s);
  alma__system_info_runtimes(s->runtimes, sizeof s->runtimes);
  return ALMA_OK;
}
