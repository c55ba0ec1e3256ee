#include <strings.h>

#include "core/core.h"

static int alma__log_cached = -1;

alma_log_level alma__log_level(void) {
  if (alma__log_cached < 0) {
    const char *e = getenv("ALMA_LOG");
    int lvl = ALMA_LOG_WARN;
    if (e) {
      if (!strcasecmp(e, "error")) lvl = ALMA_LOG_ERROR;
      else if (!strcasecmp(e, "warn") || !strcasecmp(e, "warning")) lvl = ALMA_LOG_WARN;
      else if (!strcasecmp(e, "info")) lvl = ALMA_LOG_INFO;
      else if (!strcasecmp(e, "debug")) lvl = ALMA_LOG_DEBUG;
      else if (*e)  /* a typo would otherwise hide the logging asked for */
        fprintf(stderr, "alma: warning: ALMA_LOG='%s' is not one of error, warn, info, debug: using warn\n", e);
    }
    alma__log_cached = lvl;
  }
  return (alma_log_level)alma__log_cached;
}

void alma__log(alma_log_level lvl, const char *fmt, ...) {
  static const char *names[] = {"error", "warning", "info", "debug"};
  if (lvl > alma__log_level()) return;
  va_list ap;
  va_start(ap, fmt);
  char msg[4096], safe[4096];
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* names from a model may hold terminal escapes or line breaks: one visible line each */
  alma__escape_text(msg, n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1, safe, sizeof safe);
  fprintf(stderr, "alma: %s: %s\n", names[lvl], safe);
}
