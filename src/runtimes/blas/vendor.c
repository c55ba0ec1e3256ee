/* The CBLAS library behind the BLAS runtime, loaded with dlopen on first use.
 *
 * Why dlopen rather than linking: OpenBLAS (DYNAMIC_ARCH builds, as Debian's) chooses its kernel
 * set once, in a library constructor, from OPENBLAS_CORETYPE or its CPU table. OpenBLAS 0.3.21 maps
 * AMD Zen 4 (AVX-512) to its AVX2 "Zen" kernels, half the machine's float32 peak. A linked library
 * has chosen before main() runs; loading it here lets alma set OPENBLAS_CORETYPE=SkylakeX first
 * when the CPU has AVX-512 (unless the user set OPENBLAS_CORETYPE), and report the choice. It also
 * makes a missing library at run time an "unavailable" runtime instead of a failing executable.
 *
 * The vendor is fixed at build time (CMake ALMA_BLAS_VENDOR=openblas|blis); its header gives the
 * function types. */
#ifdef ALMA_HAVE_BLAS

#include <dlfcn.h>
#include <pthread.h>
#include <strings.h>

#include "runtimes/blas/internal.h"

#if defined(ALMA_BLAS_BLIS)
#include <blis.h>
#define VENDOR "BLIS"
static const char *const lib_names[] = {"libblis.so.4", "libblis.so", ALMA_BLAS_LIBRARY_PATH};
#else
#include <cblas.h>
#define VENDOR "OpenBLAS"
static const char *const lib_names[] = {"libopenblas.so.0", "libopenblas.so", ALMA_BLAS_LIBRARY_PATH};
#endif

static struct {
  void *handle;
  __typeof__(cblas_sgemm) *sgemm;
  __typeof__(cblas_sgemv) *sgemv;
#if defined(ALMA_BLAS_BLIS)
  __typeof__(bli_thread_set_num_threads) *set_threads;
#else
  __typeof__(openblas_set_num_threads) *set_threads;
#endif
  alma__blas_info info;
  char error[1024];
  alma_status status;
} lib;

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void *sym(const char *name) {
  dlerror();
  return dlsym(lib.handle, name);
}

#if !defined(ALMA_BLAS_BLIS)
/* Sets OPENBLAS_CORETYPE before OpenBLAS reads it. Returns 1 if alma set it. */
static int choose_openblas_core(char *choice, size_t n) {
  const char *user = getenv("OPENBLAS_CORETYPE");
  if (user && user[0]) {
    snprintf(choice, n, "OPENBLAS_CORETYPE=%s set by the user", user);
    return 0;
  }
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl");
  if (avx512) {
    /* SkylakeX holds OpenBLAS's AVX-512 SGEMM kernels (Cooperlake/SapphireRapids reuse them). */
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
    snprintf(choice, n, "SkylakeX chosen by alma: the CPU has AVX-512 F/CD/BW/DQ/VL, and OpenBLAS up to 0.3.21 "
             "runs AVX2 kernels on AMD Zen 4");
    return 1;
  }
  snprintf(choice, n, "OpenBLAS's own choice: the CPU has %s and no AVX-512 (OPENBLAS_CORETYPE unset)",
           __builtin_cpu_supports("avx2") ? (__builtin_cpu_supports("fma") ? "AVX2+FMA" : "AVX2") : "no AVX2");
#else
  snprintf(choice, n, "OpenBLAS's own choice (OPENBLAS_CORETYPE unset)");
#endif
  return 0;
}
#endif

static void load_once(void) {
  alma__blas_info *in = &lib.info;
  in->vendor = VENDOR;
  int forced = 0;
#if !defined(ALMA_BLAS_BLIS)
  forced = choose_openblas_core(in->choice, sizeof in->choice);
#else
  const char *arch = getenv("BLIS_ARCH_TYPE");
  if (arch && arch[0]) snprintf(in->choice, sizeof in->choice, "BLIS_ARCH_TYPE=%s set by the user", arch);
  else snprintf(in->choice, sizeof in->choice, "BLIS's own choice (BLIS_ARCH_TYPE unset)");
#endif
  char tried[512] = "";
  for (size_t i = 0; i < sizeof lib_names / sizeof lib_names[0] && !lib.handle; i++) {
    if (!lib_names[i][0]) continue;
    lib.handle = dlopen(lib_names[i], RTLD_NOW | RTLD_LOCAL);
    if (lib.handle) snprintf(in->library, sizeof in->library, "%s", lib_names[i]);
    else if (!tried[0]) snprintf(tried, sizeof tried, "%s", dlerror());
  }
  if (forced) unsetenv("OPENBLAS_CORETYPE"); /* read by the constructor; keep children's environment */
  if (!lib.handle) {
    snprintf(lib.error, sizeof lib.error, "cannot load %s: %s", VENDOR, tried);
    lib.status = ALMA_ERR_UNAVAILABLE;
    return;
  }
  lib.sgemm = (__typeof__(lib.sgemm))sym("cblas_sgemm");
  lib.sgemv = (__typeof__(lib.sgemv))sym("cblas_sgemv");
#if defined(ALMA_BLAS_BLIS)
  lib.set_threads = (__typeof__(lib.set_threads))sym("bli_thread_set_num_threads");
  __typeof__(bli_info_get_version_str) *ver = (__typeof__(ver))sym("bli_info_get_version_str");
  __typeof__(bli_arch_query_id) *arch_id = (__typeof__(arch_id))sym("bli_arch_query_id");
  __typeof__(bli_arch_string) *arch_str = (__typeof__(arch_str))sym("bli_arch_string");
  __typeof__(bli_info_get_enable_openmp) *omp = (__typeof__(omp))sym("bli_info_get_enable_openmp");
  __typeof__(bli_info_get_enable_pthreads) *pth = (__typeof__(pth))sym("bli_info_get_enable_pthreads");
  int ok = lib.sgemm && lib.sgemv && lib.set_threads && ver && arch_id && arch_str;
  if (ok) {
    snprintf(in->config, sizeof in->config, "BLIS %s", ver());
    snprintf(in->core, sizeof in->core, "%s", arch_str(arch_id()));
    in->threading = omp && omp() ? "OpenMP" : pth && pth() ? "pthreads" : "sequential";
  }
#else
  lib.set_threads = (__typeof__(lib.set_threads))sym("openblas_set_num_threads");
  __typeof__(openblas_get_config) *cfg = (__typeof__(cfg))sym("openblas_get_config");
  __typeof__(openblas_get_corename) *core = (__typeof__(core))sym("openblas_get_corename");
  __typeof__(openblas_get_parallel) *par = (__typeof__(par))sym("openblas_get_parallel");
  int ok = lib.sgemm && lib.sgemv && lib.set_threads && cfg && core;
  if (ok) {
    snprintf(in->config, sizeof in->config, "%s", cfg());
    snprintf(in->core, sizeof in->core, "%s", core());
    int p = par ? par() : -1;
    in->threading = p == 0 ? "sequential" : p == 1 ? "pthreads" : p == 2 ? "OpenMP" : "unknown";
    if (forced && strcasecmp(in->core, "SkylakeX")) {
      size_t len = strlen(in->choice);
      snprintf(in->choice + len, sizeof in->choice - len, " (but the library reports %s)", in->core);
    }
  }
#endif
  if (!ok) {
    snprintf(lib.error, sizeof lib.error, "%s (%s) lacks cblas_sgemm, cblas_sgemv or its information functions", VENDOR,
             in->library);
    lib.status = ALMA_ERR_UNAVAILABLE;
    return;
  }
  lib.status = ALMA_OK;
}

alma_status alma__blas_load(void) {
  pthread_once(&once, load_once);
  if (lib.status != ALMA_OK) return alma__errorf(lib.status, "%s", lib.error);
  return ALMA_OK;
}

const alma__blas_info *alma__blas_info_get(void) { return lib.status == ALMA_OK && lib.sgemm ? &lib.info : NULL; }

/* OpenBLAS (0.3.21) maps its buffers at a thread's first call and retries a failed mmap for ever:
 * under a tight memory limit a run would spin until the timeout instead of failing. Measured with
 * a 512x512 sgemm: the process's first call adds 256 MiB of address space, another calling
 * thread's 128 MiB, and under a 200 MB ulimit the call never returns. So a thread's first call
 * checks for that much room (once; the buffers stay mapped) and, without it, skips the call and
 * raises the flag the runtime turns into an out-of-memory error. First calls run one at a time
 * (first_call): two threads' checks side by side both saw room for one of them, and OpenBLAS's
 * own threads map theirs inside a call, so a check made while another first call runs is stale. */
static _Thread_local int thread_mapped;
static atomic_int process_mapped, no_room;
static pthread_mutex_t first_call = PTHREAD_MUTEX_INITIALIZER;

static int room_for_buffers(void) {
#if defined(ALMA_BLAS_BLIS)
  return 1; /* the endless retry is OpenBLAS's */
#endif
  if (thread_mapped) return 1;
  size_t need = (size_t)(atomic_load(&process_mapped) ? 128 : 256) << 20;
  if (alma__address_space_check(need, "the BLAS library's buffers") != ALMA_OK) {
    alma__error_clear();
    atomic_store(&no_room, 1);
    return 0;
  }
  thread_mapped = 1;
  atomic_store(&process_mapped, 1);
  return 1;
}

int alma__blas_take_no_room(void) { return atomic_exchange(&no_room, 0); }

void alma__blas_sgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                      int ldb, float beta, float *c, int ldc) {
  int first = !thread_mapped;
  if (first) pthread_mutex_lock(&first_call);
  if (room_for_buffers())
    lib.sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
              ldb, beta, c, ldc);
  if (first) pthread_mutex_unlock(&first_call);
}

void alma__blas_sgemv(int trans, int m, int n, float alpha, const float *a, int lda, const float *x, int incx,
                      float beta, float *y, int incy) {
  int first = !thread_mapped;
  if (first) pthread_mutex_lock(&first_call);
  if (room_for_buffers()) lib.sgemv(CblasRowMajor, trans ? CblasTrans : CblasNoTrans, m, n, alpha, a, lda, x, incx, beta, y, incy);
  if (first) pthread_mutex_unlock(&first_call);
}

void alma__blas_set_threads(int n) { lib.set_threads(n); }

int alma__blas_version(char *buf, size_t n) {
  if (!buf || !n) return -1;
  if (alma__blas_load() != ALMA_OK) {
    snprintf(buf, n, "%s", lib.error);
    return -1;
  }
  const alma__blas_info *in = &lib.info;
  snprintf(buf, n, "%s; kernels %s (%s); library threading %s; loaded from %s", in->config, in->core, in->choice,
           in->threading, in->library);
  return 0;
}

#endif /* ALMA_HAVE_BLAS */
