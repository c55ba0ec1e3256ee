/* dlopen of cuBLAS and cuDNN for the CUDA runtime. Linking them would make every alma process load
 * about 600 MB of libraries at start, and fail to start where they are missing; loaded here, only
 * a CUDA conversion's child pays, and a machine without them gets the reason. */
#ifdef ALMA_HAVE_CUDA
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "runtimes/cuda/cuda_lib.h"

#ifndef ALMA_CUDA_LIBDIR
#define ALMA_CUDA_LIBDIR ""
#endif

static alma__cu_lib lib;
static alma_status lib_status = ALMA_ERR_INTERNAL;
static char lib_error[1024];
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

/* The toolkit's directory of the build first, then the loader's search path (LD_LIBRARY_PATH, a
 * PyTorch wheel's nvidia/ folders put there by the user). */
static void *open_lib(const char *soname, char *path, size_t n) {
  void *h = NULL;
  if (ALMA_CUDA_LIBDIR[0]) {
    snprintf(path, n, "%s/%s", ALMA_CUDA_LIBDIR, soname);
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  }
  if (!h) {
    snprintf(path, n, "%s", soname);
    h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  }
  return h;
}

static void load_once(void) {
  char soname[64];
  snprintf(soname, sizeof soname, "libcublas.so.%d", CUBLAS_VER_MAJOR);
  void *hb = open_lib(soname, lib.cublas_path, sizeof lib.cublas_path);
  if (!hb) {
    snprintf(lib_error, sizeof lib_error, "cuBLAS not found (%s): %s", soname, dlerror());
    lib_status = ALMA_ERR_UNAVAILABLE;
    return;
  }
  snprintf(soname, sizeof soname, "libcudnn.so.%d", CUDNN_MAJOR);
  void *hd = open_lib(soname, lib.cudnn_path, sizeof lib.cudnn_path);
  if (!hd) {
    snprintf(lib_error, sizeof lib_error, "cuDNN not found (%s): %s", soname, dlerror());
    lib_status = ALMA_ERR_UNAVAILABLE;
    return;
  }
#define ALMA__CU_SYM(h, path, f)                                                                        \
  if (!(*(void **)&lib.f = dlsym(h, #f))) {                                                             \
    snprintf(lib_error, sizeof lib_error, "%s lacks %s (an older or incompatible library)", path, #f);  \
    lib_status = ALMA_ERR_UNAVAILABLE;                                                                  \
    return;                                                                                             \
  }
#define ALMA__CU_SYM_B(f) ALMA__CU_SYM(hb, lib.cublas_path, f)
#define ALMA__CU_SYM_D(f) ALMA__CU_SYM(hd, lib.cudnn_path, f)
  ALMA_CUBLAS_FNS(ALMA__CU_SYM_B)
  ALMA_CUDNN_FNS(ALMA__CU_SYM_D)
#undef ALMA__CU_SYM_B
#undef ALMA__CU_SYM_D
#undef ALMA__CU_SYM
  lib_status = ALMA_OK;
}

alma_status alma__cu_lib_load(const alma__cu_lib **out) {
  pthread_once(&lib_once, load_once);
  *out = lib_status == ALMA_OK ? &lib : NULL;
  if (lib_status != ALMA_OK) return alma__errorf(lib_status, "%s", lib_error);
  return ALMA_OK;
}
#endif
