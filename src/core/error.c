/* Status strings and the per-thread detailed error message. */
#include "core/core.h"

#define ALMA__ERRMSG_CAP 4096
static _Thread_local char alma__errmsg[ALMA__ERRMSG_CAP];

const char *alma_status_name(alma_status s) {
  if (s == ALMA_ERR_DYNAMIC) return "ERR_DYNAMIC"; /* internal (core.h): named for messages all the same */
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
  if (s == ALMA_ERR_DYNAMIC) return "value known only at run time";
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

/* Messages name tensors and nodes from the model file: stored with control characters and
 * invalid UTF-8 escaped, so no printer (terminal, JSON, CSV) has to trust them. */
static void store_safe(const char *msg, size_t len) { alma__escape_text(msg, len, alma__errmsg, sizeof alma__errmsg); }

alma_status alma__errorf(alma_status s, const char *fmt, ...) {
  char tmp[ALMA__ERRMSG_CAP];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  store_safe(tmp, n < 0 ? 0 : (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
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
  char joined[ALMA__ERRMSG_CAP];
  memcpy(joined, prefix, np);
  memcpy(joined + np, rest, nr);
  store_safe(joined, np + nr);
  return s;
}

const char *alma_version(void) { return ALMA_VERSION_STRING; }
