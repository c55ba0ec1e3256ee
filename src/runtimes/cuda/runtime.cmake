# CUDA runtime: float32 graphs on an NVIDIA GPU, convolutions through cuDNN, products through cuBLAS,
# alma's own CUDA C kernels for the rest; nodes it does not take run on EAGER on the host.
#   -DALMA_WITH_CUDA=OFF leaves it out; it is built whenever nvcc and the toolkit's headers are found.
# cuBLAS and cuDNN are loaded with dlopen when the runtime initializes (in a conversion's child), so
# the binary starts, and every other runtime runs, on machines without them; the CUDA runtime
# library is linked statically and loads the driver itself, so a machine without a GPU gets
# `unavailable: no CUDA device` (or the driver's reason). Sanitizer builds leave it out: nvcc does
# not take the sanitizer flags, and the CUDA driver does not run under AddressSanitizer.
option(ALMA_WITH_CUDA "Build the CUDA runtime when nvcc and the CUDA toolkit are found" ON)
set(ALMA_CUDA_ARCHITECTURES "80;90" CACHE STRING "GPU architectures the CUDA kernels are built for (machine code, plus PTX of the newest)")

set(_alma_cuda_found OFF)
if(ALMA_WITH_CUDA AND NOT ALMA_SANITIZE)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit QUIET)
    find_path(ALMA_CUDNN_H cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} PATHS /usr/local/include /usr/include)
    if(CUDAToolkit_FOUND AND ALMA_CUDNN_H AND EXISTS ${CUDAToolkit_INCLUDE_DIRS}/cublas_v2.h)
      set(_alma_cuda_found ON)
    endif()
  endif()
endif()

if(_alma_cuda_found)
  # machine code for each architecture named, PTX for the newest (later GPUs compile it at load)
  list(GET ALMA_CUDA_ARCHITECTURES -1 _alma_cuda_newest)
  set(_alma_cuda_arch "")
  foreach(a ${ALMA_CUDA_ARCHITECTURES})
    list(APPEND _alma_cuda_arch ${a}-real)
  endforeach()
  list(APPEND _alma_cuda_arch ${_alma_cuda_newest}-virtual)
  set(CMAKE_CUDA_ARCHITECTURES ${_alma_cuda_arch})
  enable_language(CUDA)
  message(STATUS "CUDA runtime: nvcc ${CMAKE_CUDA_COMPILER_VERSION} (architectures ${_alma_cuda_arch}), cuDNN header ${ALMA_CUDNN_H}")
  file(GLOB _alma_cuda_kernels ${CMAKE_CURRENT_LIST_DIR}/*.cu)
  target_sources(alma_obj PRIVATE ${_alma_cuda_kernels})
  # targets made before this file (alma_obj, other runtimes' tools) link these objects too
  get_property(_alma_targets DIRECTORY ${CMAKE_SOURCE_DIR} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t ${_alma_targets})
    set_property(TARGET ${t} PROPERTY CUDA_ARCHITECTURES ${_alma_cuda_arch})
  endforeach()
  set_source_files_properties(${_alma_cuda_kernels} PROPERTIES COMPILE_OPTIONS "-Xcompiler=-fPIC")
  target_include_directories(alma_obj SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS} ${ALMA_CUDNN_H})
  get_filename_component(_alma_cuda_libdir ${CUDAToolkit_LIBRARY_DIR} REALPATH)
  # where dlopen looks first for cuBLAS and cuDNN (then the loader's own search path)
  target_compile_definitions(alma_obj PRIVATE ALMA_CUDA_LIBDIR="${_alma_cuda_libdir}")
  target_compile_definitions(alma_obj PUBLIC ALMA_HAVE_CUDA)
  set(ALMA_HAVE_CUDA ON) # for tests/runtimes/cuda
  target_link_libraries(alma_obj PUBLIC CUDA::cudart_static ${CMAKE_DL_LIBS})
elseif(NOT ALMA_WITH_CUDA)
  message(STATUS "CUDA runtime: off (ALMA_WITH_CUDA=OFF)")
elseif(ALMA_SANITIZE)
  message(STATUS "CUDA runtime: off in sanitizer builds")
else()
  message(STATUS "CUDA runtime: off (nvcc, the CUDA toolkit with cuBLAS, or cuDNN's header not found)")
endif()
