# ORT runtime: ONNX Runtime from PyPI's onnxruntime wheel, hosted through CPython's C API in the
# conversion's process (the wheel ships no C headers, and no other project's headers are committed).
# Build dependency: Debian's python3-dev (Python.h, libpython3.X). Run-time dependency: a Python
# environment whose interpreter has the same X.Y as that libpython and imports onnxruntime and numpy:
#   -DALMA_ORT_PYTHON=/path/to/venv/bin/python   the default one (scripts/test.sh passes .venv-test;
#                                                 without it, .venv-test when it exists)
#   ALMA_ORT_PYTHON=...                           environment variable, overrides it at run time
#   -DALMA_WITH_ORT=OFF                           leaves the runtime out
# Without python3-dev the sources compile empty (guarded by ALMA_HAVE_ORT) and ORT is not registered.
option(ALMA_WITH_ORT "Build the ORT runtime (ONNX Runtime through an embedded Python) when python3-dev is found" ON)
# Sanitizer builds include it: the interpreter, numpy and onnxruntime are not instrumented, but
# alma's side of the binding is, and the tests run under a narrow leak-suppression list
# (tests/runtimes/lsan-foreign.supp) for what those libraries keep until exit.
if(ALMA_WITH_ORT)
  find_package(Python3 COMPONENTS Development.Embed QUIET)
  if(Python3_Development.Embed_FOUND)
    set(_alma_ort_py "${ALMA_ORT_PYTHON}")
    if(NOT _alma_ort_py AND EXISTS ${CMAKE_SOURCE_DIR}/.venv-test/bin/python)
      set(_alma_ort_py ${CMAKE_SOURCE_DIR}/.venv-test/bin/python) # the venv scripts/test.sh makes
    endif()
    message(STATUS "ORT runtime: libpython ${Python3_VERSION} (${Python3_LIBRARIES}); "
                   "default Python environment: ${_alma_ort_py}")
    file(GLOB _alma_ort_srcs ${CMAKE_CURRENT_LIST_DIR}/*.c)
    # Python.h as a system header, seen by our sources only (it sets feature macros of its own).
    set(_alma_ort_opts "")
    foreach(d ${Python3_INCLUDE_DIRS})
      list(APPEND _alma_ort_opts "-isystem" "${d}")
    endforeach()
    set_source_files_properties(${_alma_ort_srcs} PROPERTIES COMPILE_OPTIONS "${_alma_ort_opts}"
                                COMPILE_DEFINITIONS "ALMA_ORT_DEFAULT_PYTHON=\"${_alma_ort_py}\";ALMA_ORT_LIBPYTHON=\"${Python3_VERSION}\"")
    target_link_libraries(alma_obj PUBLIC Python3::Python)
    target_compile_definitions(alma_obj PUBLIC ALMA_HAVE_ORT)
    set(ALMA_HAVE_ORT ON)
  else()
    message(STATUS "ORT runtime: Python development files not found (install python3-dev); ORT is not built")
  endif()
endif()
