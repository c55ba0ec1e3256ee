# Writes OUT: a header defining ALMA_BUILD_ID, a hash of everything that makes alma's library code
# (its sources and headers, the ONNX schema, compiler and flags). The build cache keys on it, so
# the CLI and a program linked to libalma.so from the same build share cached builds, and any
# change to the code makes them stale.
# cmake -DSRC=<source dir> -DPROTO=<onnx.proto> -DEXTRA=<compiler and flags> -DOUT=<header> -P build_id.cmake
file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE ${SRC} ${SRC}/src/*.c ${SRC}/src/*.h ${SRC}/include/*.h)
list(SORT files)
set(text "${EXTRA}\n")
foreach(f ${files})
  file(SHA256 ${SRC}/${f} h)
  string(APPEND text "${h} ${f}\n")
endforeach()
file(SHA256 ${PROTO} h)
string(APPEND text "${h} onnx.proto\n")
string(SHA256 id "${text}")
string(SUBSTRING "${id}" 0 16 id)
set(content "#define ALMA_BUILD_ID \"${id}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${content}")  # unchanged: leave the file, nothing recompiles
  file(WRITE ${OUT} "${content}")
endif()
