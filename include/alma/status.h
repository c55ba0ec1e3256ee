/* alma — status codes. Every public function returns alma_status; details of the last failure on
 * this thread are in alma_last_error(). */
#ifndef ALMA_STATUS_H
#define ALMA_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(NAME, short description). One list generates the enum and both string tables (libuv style). */
#define ALMA_STATUS_MAP(X)                                                    \
  X(OK, "success")                                                            \
  X(ERR_INVALID_ARG, "invalid argument")                                      \
  X(ERR_NOMEM, "out of memory")                                               \
  X(ERR_IO, "I/O error")                                                      \
  X(ERR_PARSE, "malformed input")                                             \
  X(ERR_INVALID_MODEL, "invalid model")                                       \
  X(ERR_UNSUPPORTED, "unsupported")                                           \
  X(ERR_SHAPE, "shape mismatch")                                              \
  X(ERR_TYPE, "type mismatch")                                                \
  X(ERR_NOT_FOUND, "not found")                                               \
  X(ERR_UNAVAILABLE, "unavailable on this machine")                           \
  X(ERR_RUNTIME, "runtime failure")                                           \
  X(ERR_TIMEOUT, "timed out")                                                 \
  X(ERR_CRASH, "crashed")                                                     \
  X(ERR_CHECK, "output check failed")                                         \
  X(ERR_INTERNAL, "internal error")

typedef enum {
#define ALMA__STATUS_ENUM(name, desc) ALMA_##name,
  ALMA_STATUS_MAP(ALMA__STATUS_ENUM)
#undef ALMA__STATUS_ENUM
  ALMA_STATUS_COUNT
} alma_status;

/* "ERR_SHAPE" etc. Never NULL. */
const char *alma_status_name(alma_status s);
/* "shape mismatch" etc. Never NULL. */
const char *alma_status_str(alma_status s);
/* Detailed message of the last failure on this thread (what, where, why); "" if none.
 * Valid until the next alma call on this thread. */
const char *alma_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
