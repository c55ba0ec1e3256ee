/* Runtime settings given as text ("dnnl.winograd=on,blas.chunk_kb=128"): checked against the
 * options each runtime declares, read with the runtime's defaults, written into the results. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"
#include "runtimes/runtime.h"

/* One "prefix.name=value" entry of the text, as spans into it. */
typedef struct {
  const char *prefix, *name, *value;
  size_t np, nn, nv;
} entry;

static const char *skip_space(const char *s) {
  while (*s == ' ' || *s == '\t' || *s == '\n') s++;
  return s;
}

/* The entry starting at *s (entries are separated by commas); advances *s past it. 0 at the end. */
static int next_entry(const char **s, entry *e, const char **raw, size_t *nraw) {
  const char *p = skip_space(*s);
  while (*p == ',') p = skip_space(p + 1);
  if (!*p) return 0;
  const char *end = p;
  while (*end && *end != ',') end++;
  const char *last = end;
  while (last > p && isspace((unsigned char)last[-1])) last--;
  *raw = p, *nraw = (size_t)(last - p);
  memset(e, 0, sizeof *e);
  const char *dot = memchr(p, '.', *nraw), *eq = memchr(p, '=', *nraw);
  if (dot && (!eq || dot < eq)) {
    e->prefix = p, e->np = (size_t)(dot - p);
    e->name = dot + 1;
  } else {
    e->name = p;
  }
  if (eq) {
    e->nn = (size_t)(eq - e->name);
    e->value = eq + 1, e->nv = (size_t)(last - eq - 1);
  } else {
    e->nn = (size_t)(last - e->name);
  }
  *s = end;
  return 1;
}

static int span_is(const char *s, size_t n, const char *word) { return strlen(word) == n && !strncasecmp(s, word, n); }

static const alma__rt_option *find_option(const alma_runtime *rt, const char *name, size_t n) {
  for (int i = 0; rt && i < rt->n_options; i++)
    if (span_is(name, n, rt->options[i].name)) return &rt->options[i];
  return NULL;
}

/* A runtime in this build with this prefix (the first: the table is shared among them). */
static const alma_runtime *runtime_of_prefix(const char *p, size_t n) {
  for (int i = 0; i < alma__runtime_count(); i++) {
    const alma_runtime *rt = alma__runtime_at(i);
    if (rt->option_prefix && span_is(p, n, rt->option_prefix)) return rt;
  }
  return NULL;
}

static void list_prefixes(char *buf, size_t n) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < alma__runtime_count(); i++) {
    const alma_runtime *rt = alma__runtime_at(i);
    if (!rt->option_prefix || !rt->n_options || runtime_of_prefix(rt->option_prefix, strlen(rt->option_prefix)) != rt)
      continue;
    int w = snprintf(buf + len, n - len, "%s%s", len ? ", " : "", rt->option_prefix);
    if (w < 0 || (size_t)w >= n - len) break;
    len += (size_t)w;
  }
  if (!len) snprintf(buf, n, "none");
}

static void list_options(const alma_runtime *rt, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < rt->n_options; i++) {
    int w = snprintf(buf + len, n - len, "%s%s", i ? ", " : "", rt->options[i].name);
    if (w < 0 || (size_t)w >= n - len) break;
    len += (size_t)w;
  }
}

/* The normalized text of value v for option o into buf; 0 if v is not a value of o's kind. */
static int normalize(const alma__rt_option *o, const char *v, size_t nv, char *buf, size_t n) {
  char tmp[128];
  if (nv >= sizeof tmp) return 0;
  memcpy(tmp, v, nv);
  tmp[nv] = 0;
  switch (o->kind) {
    case ALMA__OPT_BOOL: {
      static const char *const yes[] = {"on", "true", "1", "yes"}, *const no[] = {"off", "false", "0", "no"};
      for (int i = 0; i < 4; i++) {
        if (!strcasecmp(tmp, yes[i])) return snprintf(buf, n, "on"), 1;
        if (!strcasecmp(tmp, no[i])) return snprintf(buf, n, "off"), 1;
      }
      return 0;
    }
    case ALMA__OPT_INT: {
      char *end;
      errno = 0;
      long long x = strtoll(tmp, &end, 10);
      if (!nv || *end || errno || x < o->lo || x > o->hi) return 0;
      return snprintf(buf, n, "%lld", x), 1;
    }
    case ALMA__OPT_CHOICE:
      for (const char *c = o->choices; c && *c;) {
        const char *bar = strchr(c, '|');
        size_t len = bar ? (size_t)(bar - c) : strlen(c);
        if (len == nv && !strncasecmp(c, tmp, nv)) {
          snprintf(buf, n, "%.*s", (int)len, c);
          return 1;
        }
        c = bar ? bar + 1 : c + len;
      }
      return 0;
  }
  return 0;
}

static const char *kind_words(const alma__rt_option *o, char *buf, size_t n) {
  if (o->kind == ALMA__OPT_BOOL) return "on or off";
  if (o->kind == ALMA__OPT_INT) return snprintf(buf, n, "an integer in %lld..%lld", o->lo, o->hi), buf;
  return snprintf(buf, n, "one of %s", o->choices), buf;
}

alma_status alma__rt_options_check(const char *text) {
  const char *s = text ? text : "", *raw;
  size_t nraw;
  entry e;
  while (next_entry(&s, &e, &raw, &nraw)) {
    char list[512], norm[128], words[160];
    if (!e.prefix || !e.np || !e.nn || !e.value) {
      return alma__errorf(ALMA_ERR_INVALID_ARG,
                          "runtime option '%.*s': expected RUNTIME.NAME=VALUE, e.g. dnnl.winograd=off "
                          "(`alma list --options` lists them)",
                          (int)nraw, raw);
    }
    const alma_runtime *rt = runtime_of_prefix(e.prefix, e.np);
    if (!rt || !rt->n_options) {
      list_prefixes(list, sizeof list);
      return alma__errorf(ALMA_ERR_INVALID_ARG,
                          "runtime option '%.*s': no runtime in this build takes options as '%.*s.' (those that "
                          "do: %s)",
                          (int)nraw, raw, (int)e.np, e.prefix, list);
    }
    const alma__rt_option *o = find_option(rt, e.name, e.nn);
    if (!o) {
      list_options(rt, list, sizeof list);
      return alma__errorf(ALMA_ERR_INVALID_ARG, "runtime option '%.*s': %s has no option '%.*s' (it has: %s)",
                          (int)nraw, raw, rt->option_prefix, (int)e.nn, e.name, list);
    }
    if (!normalize(o, e.value, e.nv, norm, sizeof norm))
      return alma__errorf(ALMA_ERR_INVALID_ARG, "runtime option '%.*s': the value must be %s", (int)nraw, raw,
                          kind_words(o, words, sizeof words));
  }
  return ALMA_OK;
}

/* The last entry of text that sets rt's option o, normalized into buf; 0 if none does. */
static int value_in(const alma_runtime *rt, const alma__rt_option *o, const char *text, char *buf, size_t n) {
  const char *s = text ? text : "", *raw;
  size_t nraw;
  entry e;
  int found = 0;
  while (next_entry(&s, &e, &raw, &nraw))
    if (e.prefix && e.value && rt->option_prefix && span_is(e.prefix, e.np, rt->option_prefix) &&
        span_is(e.name, e.nn, o->name) && normalize(o, e.value, e.nv, buf, n))
      found = 1;
  return found;
}

const char *alma__rt_opt(const alma_runtime *rt, const alma_runtime_opts *o, const char *name, char *buf, size_t n) {
  const alma__rt_option *opt = find_option(rt, name, strlen(name));
  if (!opt) {
    fprintf(stderr, "alma: internal error: runtime %s declares no option '%s'\n", rt ? rt->name : "?", name);
    return NULL;
  }
  if (!value_in(rt, opt, o ? o->options : NULL, buf, n)) snprintf(buf, n, "%s", opt->def);
  return buf;
}

int alma__rt_opt_on(const alma_runtime *rt, const alma_runtime_opts *o, const char *name) {
  char buf[128];
  const char *v = alma__rt_opt(rt, o, name, buf, sizeof buf);
  return v && !strcmp(v, "on");
}

long long alma__rt_opt_int(const alma_runtime *rt, const alma_runtime_opts *o, const char *name) {
  char buf[128];
  const char *v = alma__rt_opt(rt, o, name, buf, sizeof buf);
  return v ? strtoll(v, NULL, 10) : 0;
}

int alma__rt_opt_is(const alma_runtime *rt, const alma_runtime_opts *o, const char *name, const char *value) {
  char buf[128];
  const char *v = alma__rt_opt(rt, o, name, buf, sizeof buf);
  return v && !strcmp(v, value);
}

int alma__rt_opt_index(const alma_runtime *rt, const alma_runtime_opts *o, const char *name) {
  char buf[128];
  const char *v = alma__rt_opt(rt, o, name, buf, sizeof buf);
  const alma__rt_option *d = NULL;
  for (int i = 0; v && i < rt->n_options; i++)
    if (!strcmp(rt->options[i].name, name)) d = &rt->options[i];
  if (!d || d->kind != ALMA__OPT_CHOICE) {
    fprintf(stderr, "alma: internal: %s option '%s' is not a choice\n", rt->name, name);
    return -1;
  }
  size_t vl = strlen(v);
  int idx = 0;
  for (const char *c = d->choices; *c; idx++) {
    const char *e = strchr(c, '|');
    size_t len = e ? (size_t)(e - c) : strlen(c);
    if (len == vl && !strncmp(c, v, len)) return idx;
    if (!e) break;
    c = e + 1;
  }
  return -1;
}

/* snprintf at buf[*len] that keeps *len within n (the text is cut, its length still counted by w) */
static void append(char *buf, size_t n, size_t *len, int *total, const char *fmt, const char *a, const char *b,
                   const char *c) {
  size_t at = *len < n ? *len : (n ? n - 1 : 0);
  int w = snprintf(n ? buf + at : NULL, n ? n - at : 0, fmt, a, b, c);
  if (w < 0) return;
  *total += w;
  *len = at + (size_t)w;
}

int alma__rt_options_json(const alma_runtime *rt, const char *text, char *buf, size_t n, int *n_set) {
  size_t len = 0;
  int total = 0, set = 0;
  append(buf, n, &len, &total, "{%s%s%s", "", "", "");
  for (int i = 0; rt && i < rt->n_options; i++) {
    char v[128];
    const alma__rt_option *o = &rt->options[i];
    if (value_in(rt, o, text, v, sizeof v)) set++;
    else snprintf(v, sizeof v, "%s", o->def);
    /* names and values are identifiers, digits or choice words: no JSON escaping needed */
    append(buf, n, &len, &total, o->kind == ALMA__OPT_INT ? "%s\"%s\":%s" : "%s\"%s\":\"%s\"", i ? "," : "",
           o->name, v);
  }
  append(buf, n, &len, &total, "}%s%s%s", "", "", "");
  if (n_set) *n_set = set;
  return total;
}

int alma__rt_options_given(const alma_runtime *rt, const char *text, char *buf, size_t n) {
  size_t len = 0;
  int total = 0, k = 0;
  if (n) buf[0] = 0;
  for (int i = 0; rt && i < rt->n_options; i++) {
    char v[128];
    if (value_in(rt, &rt->options[i], text, v, sizeof v))
      append(buf, n, &len, &total, "%s%s=%s", k++ ? "," : "", rt->options[i].name, v);
  }
  return total;
}
