/* NCHW <-> NHWC reorders at partition boundaries: batched 2-D transposes in cache-sized tiles,
 * split over the thread pool by (batch, block of source rows). */
#ifdef ALMA_HAVE_XNNPACK
#include "runtimes/xnnpack/xnn_rt.h"

#define ROWS_PER_TASK 32
#define TILE 8

typedef struct tctx {
  const void *src;
  void *dst;
  size_t rows, cols;
} tctx;

/* One task: rows [rb * ROWS_PER_TASK, +ROWS_PER_TASK) of batch b, for element type T. */
#define TRANSPOSE_TASK(NAME, T)                                                                        \
  static void NAME(void *arg, size_t b, size_t rb) {                                                  \
    const tctx *t = arg;                                                                              \
    size_t rows = t->rows, cols = t->cols;                                                            \
    const T *s = (const T *)t->src + b * rows * cols;                                                 \
    T *d = (T *)t->dst + b * rows * cols;                                                             \
    size_t r0 = rb * ROWS_PER_TASK, r1 = r0 + ROWS_PER_TASK < rows ? r0 + ROWS_PER_TASK : rows;       \
    for (size_t c0 = 0; c0 < cols; c0 += TILE) {                                                      \
      size_t c1 = c0 + TILE < cols ? c0 + TILE : cols;                                                \
      for (size_t r = r0; r < r1; r += TILE) {                                                        \
        size_t re = r + TILE < r1 ? r + TILE : r1;                                                    \
        if (re - r == TILE && c1 - c0 == TILE) {                                                      \
          /* full tile: fixed trip counts let the compiler unroll and keep it in registers */         \
          for (size_t c = 0; c < TILE; c++)                                                           \
            for (size_t i = 0; i < TILE; i++) d[(c0 + c) * rows + r + i] = s[(r + i) * cols + c0 + c]; \
        } else {                                                                                      \
          for (size_t c = c0; c < c1; c++)                                                            \
            for (size_t i = r; i < re; i++) d[c * rows + i] = s[i * cols + c];                        \
        }                                                                                             \
      }                                                                                               \
    }                                                                                                 \
  }
TRANSPOSE_TASK(transpose_task32, uint32_t)
TRANSPOSE_TASK(transpose_task8, uint8_t)

void alma__xrt_transpose(pthreadpool_t pool, const void *src, void *dst, size_t es, size_t batch, size_t rows, size_t cols,
                         uint32_t flags) {
  if (rows == 1 || cols == 1) {
    /* the same order either way */
    memcpy(dst, src, batch * rows * cols * es);
    return;
  }
  tctx t = {src, dst, rows, cols};
  size_t blocks = (rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
  pthreadpool_task_2d_t task = es == 1 ? transpose_task8 : transpose_task32;
  if (!pool || batch * rows * cols < 16384) {
    for (size_t b = 0; b < batch; b++)
      for (size_t rb = 0; rb < blocks; rb++) task(&t, b, rb);
    return;
  }
  pthreadpool_parallelize_2d(pool, task, &t, batch, blocks, flags);
}

#endif
