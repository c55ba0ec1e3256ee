/* The benchmark clock: CLOCK_MONOTONIC (never jumps with NTP or settimeofday), and what it costs. */
#include <time.h>

#include "bench/bench.h"

double alma__bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double alma__timer_overhead_ns(void) {
  /* A timed batch reads the clock twice; the gap between two back-to-back reads is what the
   * measurement adds to every latency. Median of many pairs so one preemption does not count. */
  enum { N = 2001 };
  double d[N];
  for (int i = 0; i < N; i++) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    clock_gettime(CLOCK_MONOTONIC, &b);
    d[i] = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
  }
  qsort(d, N, sizeof d[0], cmp_d);
  return d[N / 2];
}
