# DNNL runtime: oneDNN 2.x through its C API (Debian's libdnnl-dev). Optional: without
# the library the sources compile empty (they are guarded by ALMA_HAVE_DNNL) and the runtime is not
# registered. Debian's oneDNN ships no pkg-config file, so look for the header and library.
option(ALMA_WITH_DNNL "Build the DNNL (oneDNN) runtime when the library is found" ON)
if(ALMA_WITH_DNNL)
  find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.h)
  find_library(DNNL_LIBRARY NAMES dnnl)
  if(DNNL_INCLUDE_DIR AND DNNL_LIBRARY)
    message(STATUS "DNNL runtime: ${DNNL_LIBRARY}")
    target_include_directories(alma_obj PUBLIC ${DNNL_INCLUDE_DIR})
    target_link_libraries(alma_obj PUBLIC ${DNNL_LIBRARY})
    target_compile_definitions(alma_obj PUBLIC ALMA_HAVE_DNNL)
  else()
    message(STATUS "DNNL runtime: libdnnl not found (install libdnnl-dev); DNNL is not built")
  endif()
endif()
