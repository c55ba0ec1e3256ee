/* Runtimes compiled into this build. Optional runtimes add themselves under ALMA_HAVE_<NAME>
 * (set by their runtime.cmake when the library is found). */
#include <strings.h>

#include "runtimes/runtime.h"

#ifdef ALMA_HAVE_DNNL
extern const alma_runtime alma__runtime_dnnl;
#endif
#ifdef ALMA_HAVE_XNNPACK
extern const alma_runtime alma__runtime_xnnpack;
#endif
#ifdef ALMA_HAVE_BLAS
extern const alma_runtime alma__runtime_blas;
#endif
#ifdef ALMA_HAVE_ORT
extern const alma_runtime alma__runtime_ort;
extern const alma_runtime alma__runtime_ort_extended;
extern const alma_runtime alma__runtime_ort_basic;
#endif
#ifdef ALMA_HAVE_CUDA
extern const alma_runtime alma__runtime_cuda;
#endif
#ifdef ALMA_HAVE_OPENVINO
extern const alma_runtime alma__runtime_openvino;
extern const alma_runtime alma__runtime_openvino_bf16;
#endif

static const alma_runtime *const runtimes[] = {
    &alma__runtime_eager,
#ifdef ALMA_HAVE_DNNL
    &alma__runtime_dnnl,
#endif
#ifdef ALMA_HAVE_XNNPACK
    &alma__runtime_xnnpack,
#endif
#ifdef ALMA_HAVE_BLAS
    &alma__runtime_blas,
#endif
#ifdef ALMA_HAVE_ORT
    &alma__runtime_ort,
    &alma__runtime_ort_extended,
    &alma__runtime_ort_basic,
#endif
#ifdef ALMA_HAVE_OPENVINO
    &alma__runtime_openvino,
    &alma__runtime_openvino_bf16,
#endif
#ifdef ALMA_HAVE_CUDA
    &alma__runtime_cuda,
#endif
};

const char *alma__rt_device_name(alma__rt_device d) { return d == ALMA__DEVICE_CUDA ? "cuda" : "cpu"; }

int alma__runtime_count(void) { return (int)(sizeof runtimes / sizeof runtimes[0]); }
const alma_runtime *alma__runtime_at(int i) { return i >= 0 && i < alma__runtime_count() ? runtimes[i] : NULL; }
const alma_runtime *alma__runtime_find(const char *name) {
  for (int i = 0; i < alma__runtime_count(); i++)
    if (!strcasecmp(runtimes[i]->name, name)) return runtimes[i];
  return NULL;
}
