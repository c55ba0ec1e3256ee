/* cuBLAS and cuDNN, loaded with dlopen when the CUDA runtime initializes (cuda_lib.c): the function
 * pointers the runtime calls, typed from the libraries' own headers. */
#ifndef ALMA_CUDA_LIB_H
#define ALMA_CUDA_LIB_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "core/core.h"

#define ALMA_CUBLAS_FNS(X)                                                                                        \
  X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2) X(cublasSetMathMode) X(cublasGetVersion_v2)       \
  X(cublasSgemm_v2) X(cublasSgemmStridedBatched) X(cublasSetWorkspace_v2)

#define ALMA_CUDNN_FNS(X)                                                                                          \
  X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream)                      \
  X(cudnnCreateTensorDescriptor) X(cudnnSetTensor4dDescriptor) X(cudnnDestroyTensorDescriptor)                    \
  X(cudnnCreateFilterDescriptor) X(cudnnSetFilter4dDescriptor) X(cudnnDestroyFilterDescriptor)                    \
  X(cudnnCreateConvolutionDescriptor) X(cudnnSetConvolution2dDescriptor) X(cudnnSetConvolutionGroupCount)         \
  X(cudnnSetConvolutionMathType) X(cudnnDestroyConvolutionDescriptor) X(cudnnGetConvolutionForwardAlgorithm_v7)   \
  X(cudnnFindConvolutionForwardAlgorithm) X(cudnnGetConvolutionForwardWorkspaceSize) X(cudnnConvolutionForward)   \
  X(cudnnAddTensor)

typedef struct alma__cu_lib {
#define ALMA__CU_PTR(f) __typeof__(f) *f;
  ALMA_CUBLAS_FNS(ALMA__CU_PTR)
  ALMA_CUDNN_FNS(ALMA__CU_PTR)
#undef ALMA__CU_PTR
  char cublas_path[512], cudnn_path[512];
} alma__cu_lib;

/* Loads both libraries once per process (ALMA_OK), or ALMA_ERR_UNAVAILABLE naming the library that
 * is missing and the loader's words. */
alma_status alma__cu_lib_load(const alma__cu_lib **out);

#endif
