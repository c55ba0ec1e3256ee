/* sgemm_peak: the float32 GEMM peak this machine reaches through the BLAS runtime's library, with
 * the same kernel choice (vendor.c), the reference the performance docs compare against.
 *
 *   sgemm_peak [-n SIZE] [-r REPEATS] [-t THREADS,...] [THREADS,...]   (defaults: 2048, 10, 1,2)
 *
 * Times C = A * B (row-major, SIZE^3, 2 * SIZE^3 flops) REPEATS times per thread count after two
 * warm-up calls, using the library's own threading, and prints one line per thread count:
 *   threads=2  median 154.7 GFLOP/s  best 161.4 GFLOP/s  (111.05 ms, 106.46 ms)
 * and, when alma is built with oneDNN, the same through dnnl_sgemm (its own kernels for this CPU:
 * on AVX-512 machines a distribution's OpenBLAS may not reach the peak):
 *   dnnl threads=2  median 221.0 GFLOP/s  best 224.9 GFLOP/s  (77.74 ms, 76.39 ms)
 * (bench/peer_bench.py takes the larger median of the two as the machine's peak). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtimes/blas/internal.h"

#ifdef ALMA_HAVE_DNNL
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#endif

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef int (*gemm_fn)(int n, const float *a, const float *b, float *c);

static int blas_gemm(int n, const float *a, const float *b, float *c) {
  alma__blas_sgemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
  return 0;
}

static void report(const char *tag, gemm_fn f, int th, int n, int reps, const float *a, const float *b, float *c,
                   double *t) {
  double flops = 2.0 * n * (double)n * n;
  for (int w = 0; w < 2; w++)
    if (f(n, a, b, c)) return;
  for (int r = 0; r < reps; r++) {
    double t0 = alma__now_s();
    f(n, a, b, c);
    t[r] = alma__now_s() - t0;
  }
  qsort(t, (size_t)reps, sizeof *t, cmp_double);
  printf("%sthreads=%d  median %.1f GFLOP/s  best %.1f GFLOP/s  (%.2f ms, %.2f ms)\n", tag, th,
         flops / t[reps / 2] / 1e9, flops / t[0] / 1e9, t[reps / 2] * 1e3, t[0] * 1e3);
}

#ifdef ALMA_HAVE_DNNL
static int onednn_gemm(int n, const float *a, const float *b, float *c) {
  return dnnl_sgemm('N', 'N', n, n, n, 1.0f, a, n, b, n, 0.0f, c, n) != dnnl_success;
}

/* oneDNN's OpenMP build takes its thread count from the OpenMP runtime it loaded. */
static void dnnl_threads(int th) {
  void (*fn)(int) = NULL;
  void *sym = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
  memcpy(&fn, &sym, sizeof fn);
  if (fn) fn(th);
}
#endif

int main(int argc, char **argv) {
  int n = 2048, reps = 10;
  const char *tlist = "1,2";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-t") && i + 1 < argc) tlist = argv[++i];
    else if (argv[i][0] >= '0' && argv[i][0] <= '9') tlist = argv[i];
    else {
      fprintf(stderr, "usage: %s [-n SIZE] [-r REPEATS] [-t THREADS,...] [THREADS,...]\n", argv[0]);
      return 2;
    }
  }
  if (n < 1 || n > 16384 || reps < 1 || reps > 10000) {
    fprintf(stderr, "sgemm_peak: SIZE must be 1..16384 and REPEATS 1..10000\n");
    return 2;
  }
  if (alma__blas_load() != ALMA_OK) {
    fprintf(stderr, "sgemm_peak: %s\n", alma_last_error());
    return 1;
  }
  const alma__blas_info *in = alma__blas_info_get();
  printf("library   %s\nkernels   %s (%s)\nthreading %s\nsize      %d^3, %d repeats\n", in->config, in->core,
         in->choice, in->threading, n, reps);
  size_t cnt = (size_t)n * (size_t)n;
  float *a = NULL, *b = NULL, *c = NULL;
  double *t = malloc((size_t)reps * sizeof *t);
  if (posix_memalign((void **)&a, 64, cnt * sizeof *a) || posix_memalign((void **)&b, 64, cnt * sizeof *b) ||
      posix_memalign((void **)&c, 64, cnt * sizeof *c) || !t) {
    fprintf(stderr, "sgemm_peak: out of memory\n");
    return 1;
  }
  unsigned s = 12345;
  for (size_t i = 0; i < cnt; i++) {
    s = s * 1103515245u + 12345u;
    a[i] = (float)((s >> 16) & 0x7fff) / 32768.0f - 0.5f;
    s = s * 1103515245u + 12345u;
    b[i] = (float)((s >> 16) & 0x7fff) / 32768.0f - 0.5f;
  }
  char buf[256];
  snprintf(buf, sizeof buf, "%s", tlist);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int th = atoi(tok);
    if (th < 1) continue;
    alma__blas_set_threads(th);
    report("", blas_gemm, th, n, reps, a, b, c, t);
#ifdef ALMA_HAVE_DNNL
    dnnl_threads(th);
    report("dnnl ", onednn_gemm, th, n, reps, a, b, c, t);
#endif
  }
  free(a);
  free(b);
  free(c);
  free(t);
  return 0;
}
