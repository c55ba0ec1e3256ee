/* Text that came from a file (tensor, node and graph names) written where a person or a parser
 * reads it: control characters would drive the terminal (escape sequences, CR overwriting a
 * line), and bytes that are not UTF-8 make JSON invalid. */
#include "core/core.h"

/* Length of the valid UTF-8 sequence at s (1-4), 0 if s does not start one. Rejects overlong
 * forms, surrogates and code points past U+10FFFF, as RFC 3629 does. */
static int utf8_len(const unsigned char *s, size_t avail, uint32_t *cp) {
  unsigned char c = s[0];
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  int n;
  uint32_t v, min;
  if (c >= 0xC2 && c <= 0xDF) n = 2, v = c & 0x1F, min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, v = c & 0x0F, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, v = c & 0x07, min = 0x10000;
  else return 0;
  if ((size_t)n > avail) return 0;
  for (int i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    v = v << 6 | (s[i] & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return n;
}

size_t alma__escape_text(const char *s, size_t len, char *out, size_t cap) {
  size_t w = 0;
  const unsigned char *p = (const unsigned char *)s;
  if (!cap) return 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp = 0;
    int n = utf8_len(p + i, len - i, &cp);
    char esc[8];
    const char *src = (const char *)p + i;
    size_t sn = (size_t)n;
    if (n == 0) { /* not UTF-8: the byte, visibly */
      snprintf(esc, sizeof esc, "\\x%02X", p[i]);
      src = esc;
      sn = 4;
      n = 1;
    } else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F)) { /* C0, DEL, C1 controls */
      const char *named = cp == '\n' ? "\\n" : cp == '\r' ? "\\r" : cp == '\t' ? "\\t" : NULL;
      if (named) snprintf(esc, sizeof esc, "%s", named);
      else snprintf(esc, sizeof esc, "\\x%02X", (unsigned)cp);
      src = esc;
      sn = strlen(esc);
    }
    if (w + sn + 1 > cap) break; /* whole characters or escapes only */
    memcpy(out + w, src, sn);
    w += sn;
    i += (size_t)n;
  }
  out[w] = '\0';
  return w;
}

int alma__text_is_safe(const char *s, size_t len) {
  const unsigned char *p = (const unsigned char *)s;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    int n = utf8_len(p + i, len - i, &cp);
    if (!n || cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F)) return 0;
    i += (size_t)n;
  }
  return 1;
}

size_t alma__utf8_fix(const char *s, size_t len, char *out, size_t cap) {
  size_t w = 0;
  const unsigned char *p = (const unsigned char *)s;
  if (!cap) return 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    int n = utf8_len(p + i, len - i, &cp);
    const char *src = n ? (const char *)p + i : "\xEF\xBF\xBD"; /* U+FFFD */
    size_t sn = n ? (size_t)n : 3;
    if (w + sn + 1 > cap) break;
    memcpy(out + w, src, sn);
    w += sn;
    i += n ? (size_t)n : 1;
  }
  out[w] = '\0';
  return w;
}

const char *alma__safe(const char *s) {
  enum { SLOTS = 16, CAP = 1024 };
  static _Thread_local char ring[SLOTS][CAP];
  static _Thread_local unsigned next;
  if (!s) return "(null)";
  size_t len = strlen(s);
  if (alma__text_is_safe(s, len)) return s;
  char *out = ring[next++ % SLOTS];
  size_t w = alma__escape_text(s, len, out, CAP - 4);
  /* escape_text stops at a whole escape: mark a cut name */
  char tmp[CAP];
  if (alma__escape_text(s, len, tmp, sizeof tmp) > w) memcpy(out + w, "...", 4);
  return out;
}

char *alma__utf8_fix_owned(char *text) {
  if (!text) return NULL;
  size_t len = strlen(text);
  const unsigned char *p = (const unsigned char *)text;
  int valid = 1;
  for (size_t i = 0; i < len && valid;) {
    uint32_t cp;
    int n = utf8_len(p + i, len - i, &cp);
    valid = n > 0;
    i += n > 0 ? (size_t)n : 1;
  }
  if (valid) return text;
  char *out = malloc(3 * len + 1);
  if (!out) {
    free(text);
    return NULL;
  }
  alma__utf8_fix(text, len, out, 3 * len + 1);
  free(text);
  return out;
}
