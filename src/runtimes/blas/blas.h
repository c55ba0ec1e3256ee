/* The BLAS runtime's one accessor for the rest of alma (`alma version`). Defined only when the
 * runtime is built (ALMA_HAVE_BLAS). */
#ifndef ALMA_RUNTIMES_BLAS_H
#define ALMA_RUNTIMES_BLAS_H

#include <stddef.h>

/* Writes the CBLAS library in use, its build configuration, the kernel set it runs and why, and its
 * threading, e.g. "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64; kernels
 * Zen (OpenBLAS's own choice: ...); library threading pthreads". Loads the library if needed; when
 * it cannot be loaded, writes the reason and returns -1 (0 on success). */
int alma__blas_version(char *buf, size_t n);

#endif
