# BLAS runtime: im2col+SGEMM convolution, Gemm and MatMul through a CBLAS library.
#   -DALMA_BLAS_VENDOR=openblas (default; Debian's libopenblas-dev) or blis (libblis-dev)
#   -DALMA_BLAS=OFF leaves the runtime out.
# The library is loaded at run time with dlopen (see vendor.c: OpenBLAS picks its kernel set when it
# loads, and alma chooses it first); here we only need its header, and its path as a fallback for
# dlopen. The sources are globbed into alma_obj by the top level and guarded by ALMA_HAVE_BLAS.
option(ALMA_BLAS "Build the BLAS runtime when a CBLAS library is found" ON)
set(ALMA_BLAS_VENDOR "openblas" CACHE STRING "CBLAS library behind the BLAS runtime: openblas or blis")
set_property(CACHE ALMA_BLAS_VENDOR PROPERTY STRINGS openblas blis)

set(_alma_blas_found OFF)
if(ALMA_BLAS AND ALMA_BLAS_VENDOR STREQUAL "openblas")
  pkg_check_modules(ALMA_OPENBLAS QUIET openblas)
  find_path(ALMA_OPENBLAS_CBLAS_H cblas.h
            HINTS ${ALMA_OPENBLAS_INCLUDE_DIRS}
            PATH_SUFFIXES openblas-pthread openblas-openmp openblas-serial openblas
            PATHS /usr/include/x86_64-linux-gnu /usr/include/aarch64-linux-gnu)
  find_library(ALMA_OPENBLAS_LIB NAMES openblas HINTS ${ALMA_OPENBLAS_LIBRARY_DIRS})
  if(ALMA_OPENBLAS_CBLAS_H AND ALMA_OPENBLAS_LIB AND EXISTS ${ALMA_OPENBLAS_CBLAS_H}/openblas_config.h)
    set(_alma_blas_found ON)
    set(_alma_blas_inc ${ALMA_OPENBLAS_CBLAS_H})
    set(_alma_blas_lib ${ALMA_OPENBLAS_LIB})
    set(_alma_blas_defs "")
  endif()
elseif(ALMA_BLAS AND ALMA_BLAS_VENDOR STREQUAL "blis")
  find_path(ALMA_BLIS_H blis.h
            PATH_SUFFIXES blis-openmp blis-pthread blis-serial blis
            PATHS /usr/include/x86_64-linux-gnu /usr/include/aarch64-linux-gnu)
  find_library(ALMA_BLIS_LIB NAMES blis)
  if(ALMA_BLIS_H AND ALMA_BLIS_LIB)
    set(_alma_blas_found ON)
    set(_alma_blas_inc ${ALMA_BLIS_H})
    set(_alma_blas_lib ${ALMA_BLIS_LIB})
    set(_alma_blas_defs ALMA_BLAS_BLIS)
  endif()
elseif(ALMA_BLAS)
  message(FATAL_ERROR "ALMA_BLAS_VENDOR must be openblas or blis, not '${ALMA_BLAS_VENDOR}'")
endif()

if(_alma_blas_found)
  get_filename_component(_alma_blas_real ${_alma_blas_lib} REALPATH)
  message(STATUS "BLAS runtime: ${ALMA_BLAS_VENDOR} (header ${_alma_blas_inc}, library ${_alma_blas_real})")
  file(GLOB _alma_blas_srcs ${CMAKE_CURRENT_LIST_DIR}/*.c)
  # Only our sources see the vendor's header (another runtime may bring its own cblas.h), as a
  # system header: blis.h does not compile clean under -Wextra -Werror.
  set_source_files_properties(${_alma_blas_srcs} PROPERTIES
                              COMPILE_OPTIONS "-isystem;${_alma_blas_inc}"
                              COMPILE_DEFINITIONS "ALMA_BLAS_LIBRARY_PATH=\"${_alma_blas_real}\";${_alma_blas_defs}")
  target_compile_definitions(alma_obj PUBLIC ALMA_HAVE_BLAS)
  set(ALMA_HAVE_BLAS ON) # for tests/runtimes/blas
  target_link_libraries(alma_obj PUBLIC ${CMAKE_DL_LIBS} Threads::Threads)

  # SGEMM peak of this machine through the same library and kernel choice (docs/performance.md).
  add_executable(sgemm_peak ${CMAKE_SOURCE_DIR}/bench/sgemm_peak.c)
  target_link_libraries(sgemm_peak PRIVATE alma_internal)
else()
  message(STATUS "BLAS runtime: off (ALMA_BLAS=${ALMA_BLAS}, vendor ${ALMA_BLAS_VENDOR} not found)")
endif()
