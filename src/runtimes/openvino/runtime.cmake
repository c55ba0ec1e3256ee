# OPENVINO runtime: Intel's OpenVINO through its C API (openvino/c/openvino.h), from PyPI's
# `openvino` wheel (scripts/setup.sh installs it into .venv-openvino) or an installed OpenVINO.
# Optional: without it the sources compile empty (guarded by ALMA_HAVE_OPENVINO) and the runtime is
# not registered. Only the headers are used at build time: the runtime loads libopenvino_c with
# dlopen in the conversion's child process, so alma itself does not depend on the library at load
# time, `alma list` can say why it is missing, and nothing of OpenVINO (its TBB threads) exists in
# the process that forks the conversions.
# ALMA_OPENVINO_DIR: the wheel's `openvino` package directory (with include/ and libs/) or an
# OpenVINO install prefix (include/ or runtime/include, lib/ or runtime/lib/intel64).
option(ALMA_WITH_OPENVINO "Build the OPENVINO runtime when OpenVINO's C API is found" ON)
set(ALMA_OPENVINO_DIR "" CACHE PATH "OpenVINO's wheel package directory or install prefix (default: the project's .venv-openvino)")
# Sanitizer builds include it: OpenVINO's libraries are not instrumented, but alma's side of the C
# API is; what OpenVINO keeps until exit is suppressed for its tests only
# (tests/runtimes/lsan-foreign.supp), and TBB is told it runs under a sanitizer (openvino.c).
if(ALMA_WITH_OPENVINO)
  set(_ov_roots ${ALMA_OPENVINO_DIR})
  file(GLOB _ov_venv ${CMAKE_SOURCE_DIR}/.venv-openvino/lib/python3*/site-packages/openvino)
  list(APPEND _ov_roots ${_ov_venv})
  set(_ov_inc_hints "")
  set(_ov_lib_hints "")
  foreach(r ${_ov_roots})
    list(APPEND _ov_inc_hints ${r}/include ${r}/runtime/include)
    list(APPEND _ov_lib_hints ${r}/libs ${r}/lib ${r}/runtime/lib/intel64)
  endforeach()
  unset(OPENVINO_C_INCLUDE_DIR CACHE)
  find_path(OPENVINO_C_INCLUDE_DIR openvino/c/openvino.h HINTS ${_ov_inc_hints})
  # The wheel ships only the versioned name (libopenvino_c.so.2641): look for both.
  set(OPENVINO_C_LIBRARY "")
  foreach(d ${_ov_lib_hints} /usr/lib/x86_64-linux-gnu /usr/lib /usr/local/lib)
    file(GLOB _ov_c ${d}/libopenvino_c.so ${d}/libopenvino_c.so.*)
    if(_ov_c)
      list(SORT _ov_c)
      list(GET _ov_c 0 OPENVINO_C_LIBRARY)
      break()
    endif()
  endforeach()
  if(OPENVINO_C_INCLUDE_DIR AND OPENVINO_C_LIBRARY)
    # The version the headers belong to: the runtime refuses a library of another release (the C
    # API's enum values, element types among them, change between releases).
    file(STRINGS ${OPENVINO_C_INCLUDE_DIR}/openvino/core/version.hpp _ov_ver REGEX "^#define OPENVINO_VERSION_(MAJOR|MINOR|PATCH) ")
    set(_ov_v "")
    foreach(l ${_ov_ver})
      string(REGEX REPLACE ".* ([0-9]+)$" "\\1" n "${l}")
      list(APPEND _ov_v ${n})
    endforeach()
    string(REPLACE ";" "." OPENVINO_HEADER_VERSION "${_ov_v}")
    message(STATUS "OPENVINO runtime: ${OPENVINO_C_LIBRARY} (headers ${OPENVINO_HEADER_VERSION} in ${OPENVINO_C_INCLUDE_DIR})")
    # SYSTEM: its headers are not alma's to keep warning-free.
    target_include_directories(alma_obj SYSTEM PUBLIC ${OPENVINO_C_INCLUDE_DIR})
    target_compile_definitions(alma_obj PUBLIC ALMA_HAVE_OPENVINO)
    target_compile_definitions(alma_obj PRIVATE ALMA_OPENVINO_C_LIBRARY="${OPENVINO_C_LIBRARY}"
                                                ALMA_OPENVINO_HEADER_VERSION="${OPENVINO_HEADER_VERSION}")
  else()
    message(STATUS "OPENVINO runtime: OpenVINO's C API not found (scripts/setup.sh installs the openvino wheel into "
                   ".venv-openvino; or set ALMA_OPENVINO_DIR); OPENVINO is not built")
  endif()
endif()
