# XNNPACK runtime: Debian's libxnnpack-dev (snapshot 2022-02-16) through its subgraph API,
# with pthreadpool for threads. Optional: without the library the sources compile empty (guarded by
# ALMA_HAVE_XNNPACK) and the runtime is not registered. Neither package ships a pkg-config file.
option(ALMA_WITH_XNNPACK "Build the XNNPACK runtime when the library is found" ON)
if(ALMA_WITH_XNNPACK)
  find_path(XNNPACK_INCLUDE_DIR xnnpack.h)
  find_path(PTHREADPOOL_INCLUDE_DIR pthreadpool.h)
  find_library(XNNPACK_LIBRARY NAMES XNNPACK xnnpack)
  find_library(PTHREADPOOL_LIBRARY NAMES pthreadpool)
  if(XNNPACK_INCLUDE_DIR AND PTHREADPOOL_INCLUDE_DIR AND XNNPACK_LIBRARY AND PTHREADPOOL_LIBRARY)
    message(STATUS "XNNPACK runtime: ${XNNPACK_LIBRARY} with ${PTHREADPOOL_LIBRARY}")
    target_include_directories(alma_obj PUBLIC ${XNNPACK_INCLUDE_DIR} ${PTHREADPOOL_INCLUDE_DIR})
    target_link_libraries(alma_obj PUBLIC ${XNNPACK_LIBRARY} ${PTHREADPOOL_LIBRARY})
    target_compile_definitions(alma_obj PUBLIC ALMA_HAVE_XNNPACK)
  else()
    message(STATUS "XNNPACK runtime: libXNNPACK or pthreadpool not found (install libxnnpack-dev and "
                   "libpthreadpool-dev); XNNPACK is not built")
  endif()
endif()
