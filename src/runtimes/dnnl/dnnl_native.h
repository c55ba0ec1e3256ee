/* DNNL runtime: kernels of our own where oneDNN's are slower (dnnl_native.c). */
#ifndef ALMA_DNNL_NATIVE_H
#define ALMA_DNNL_NATIVE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Runs fn(arg, tid, nt) on up to `threads` threads of the OpenMP team oneDNN uses (or on the
 * calling thread alone, nt = 1, without one). */
void alma__dn_parallel(int threads, void (*fn)(void *arg, int tid, int nt), void *arg);

/* A 2-D pooling over data laid out as [N][CB][H][W][B] (channel c in block c / B, lane c % B):
 * NCHW is B = 1, NHWC is CB = 1 and B = C, oneDNN's aBcd8b B = 8 (channels padded to CB * B). */
enum { DN_POOL_F32 = 0, DN_POOL_U8, DN_POOL_S8 };
typedef struct dn_pool_geo {
  int dt;                                 /* DN_POOL_*: averages are float32 only */
  int64_t N, CB, B, H, W, OH, OW;
  int64_t kh, kw, sh, sw, dh, dw, ph, pw; /* dilations as steps (1 = none), begin pads */
  int is_max, cip;                        /* cip: average divides by the kernel size */
} dn_pool_geo;

/* Scratch bytes alma__dn_pool needs for `threads` threads. */
size_t alma__dn_pool_scratch(const dn_pool_geo *g, int threads);
/* y[N][CB][OH][OW][B] = pool(x); padded lanes of x (zeros) give zeros. */
void alma__dn_pool(const dn_pool_geo *g, int threads, const void *x, void *y, float *scratch);

#endif
