#ifndef ALMA_VERSION_H
#define ALMA_VERSION_H
#define ALMA_VERSION_MAJOR 0
#define ALMA_VERSION_MINOR 1
#define ALMA_VERSION_PATCH 0
#define ALMA_VERSION_STRING "0.1.0"
/* Highest ai.onnx opset whose operator changes alma knows. Newer models load with a warning. */
#define ALMA_MAX_KNOWN_OPSET 28
#ifdef __cplusplus
extern "C" {
#endif
const char *alma_version(void);
/* A hash of the library's sources, compiler and flags (16 hex digits): two builds with the same id
 * compute the same results; the build cache keys on it. */
const char *alma_build_id(void);
#ifdef __cplusplus
}
#endif
#endif
