/* Status strings and the per-thread detailed error message. */
#include "core/core.h"

#define ALMA__ERRMSG_CAP 4096
static _Thread_local char alma__errmsg[ALMA__ERRMSG_CAP];

const char *alma_status_name(alma_status s) {
  switch (s) {
#define X(name, desc) \
  case ALMA_##name:   \
    return #name;
    ALMA_STATUS_MAP(X)
#undef X
    default:
      return "UNKNOWN_STATUS";
  }
}

const char *alma_status_str(alma_status s) {
  switch (s) {
#define X(name, desc) \
  case ALMA_##name:   \
    return desc;
    ALMA_STATUS_MAP(X)
#undef X
    default:
      return "unknown status";
  }
}

const char *alma_last_error(void) { return alma__errmsg; }

void alma__error_clear(void) { alma__errmsg[0] = '\0'; }

alma_status alma__errorf(alma_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(alma__errmsg, sizeof alma__errmsg, fmt, ap);
  va_end(ap);
  return s;
}

alma_status alma__error_prefix(alma_status s, const char *fmt, ...) {
  char prefix[1024], old[ALMA__ERRMSG_CAP];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, alma__errmsg, sizeof old);
  const char *rest = old[0] ? old : alma_status_str(s);
  size_t np = strlen(prefix), nr = strlen(rest);
  if (np > ALMA__ERRMSG_CAP - 1) np = ALMA__ERRMSG_CAP - 1;
  if (nr > ALMA__ERRMSG_CAP - 1 - np) nr = ALMA__ERRMSG_CAP - 1 - np;
  memcpy(alma__errmsg, prefix, np);
  memcpy(alma__errmsg + np, rest, nr);
  alma__errmsg[np + nr] = '\0';
  return s;
}

const char *alma_version(void) { return ALMA_VERSION_STRING; }
