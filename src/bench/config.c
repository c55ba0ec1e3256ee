/* alma_config: defaults, dictionary-style setting with validation, and iteration for reports. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <strings.h>

#include "bench/bench.h"
#include "runtimes/runtime.h"

void alma_config_init(alma_config *c) {
  memset(c, 0, sizeof *c);
  c->n_samples = 100;
  c->batch_size = 1;
  snprintf(c->device, sizeof c->device, "cpu");
  c->multiprocessing = 1;
  c->fail_on_error = 1;
  c->allow_device_override = 1;
  c->allow_cuda = 1;
  c->non_blocking = 0;
  c->warmup = 5;
  c->warmup_s = 0.1;
  c->min_time_s = 1.0;
  c->max_time_s = 60.0;
  c->target_rel_ci = 0;
  c->threads = 0;
  c->seed = 0;
  c->timeout_s = 600;
  c->memory_limit_mb = -1;
  c->check_outputs = 1;
  c->rtol = 1e-3;
  c->atol = 1e-4;
  c->verbose = 1;
  snprintf(c->instances, sizeof c->instances, "1,MAX");
  snprintf(c->workers, sizeof c->workers, "1,2");
  c->cache = 1;
  snprintf(c->rebuild, sizeof c->rebuild, "if_needed");
  snprintf(c->calibrator, sizeof c->calibrator, "minmax");
  c->calibration_batches = 8;
  c->profile = 0;
  c->profile_time_s = 1.0;
  c->repeat = 1;
  snprintf(c->scenario, sizeof c->scenario, "single_stream");
  c->target_qps = 0;
  c->latency_bound_ms = 0;
  c->latency_percentile = 99;
}

/* K_STR: free text (a path); K_LIST: a comma list of integers >= 1 (lo = 1: MAX allowed);
 * K_CHOICE: one of the words in choices. Strings: hi is the field's size. */
typedef enum { K_I64, K_INT, K_U64, K_F64, K_BOOL, K_DEVICE, K_STR, K_LIST, K_CHOICE } ktype;

typedef struct {
  const char *key;
  ktype type;
  size_t off;
  double lo, hi;   /* inclusive range for numbers */
  const char *doc;
} kdesc;

/* K_CHOICE keys' words. */
static const char *choices_of(const char *key) {
  if (!strcmp(key, "rebuild")) return "if_needed|always|never";
  if (!strcmp(key, "calibrator")) return "minmax|percentile|entropy";
  if (!strcmp(key, "scenario")) return "single_stream|offline|server";
  return "";
}

#define OFF(f) offsetof(alma_config, f)
static const kdesc keys[] = {
    {"n_samples", K_I64, OFF(n_samples), 1, 1e15, "integer >= 1, default 100: samples timed at least"},
    {"batch_size", K_I64, OFF(batch_size), 1, 1e9, "integer >= 1, default 1: samples per batch"},
    {"device", K_DEVICE, OFF(device), 0, 0, "cpu | cuda, default cpu"},
    {"multiprocessing", K_BOOL, OFF(multiprocessing), 0, 1, "bool, default true: one forked child per conversion"},
    {"fail_on_error", K_BOOL, OFF(fail_on_error), 0, 1, "bool, default true: stop at the first failed conversion"},
    {"allow_device_override", K_BOOL, OFF(allow_device_override), 0, 1,
     "bool, default true: run conversions on their runtime's device even if it is not `device`"},
    {"allow_cuda", K_BOOL, OFF(allow_cuda), 0, 1, "bool, default true: false makes CUDA conversions unavailable"},
    {"non_blocking", K_BOOL, OFF(non_blocking), 0, 1, "bool, default false: GPU pinned memory + async copies"},
    {"warmup", K_I64, OFF(warmup), 0, 1e12, "integer >= 0, default 5: warm-up batches at least"},
    {"warmup_s", K_F64, OFF(warmup_s), 0, 1e6, "seconds >= 0, default 0.1: warm-up lasts at least"},
    {"min_time_s", K_F64, OFF(min_time_s), 0, 1e7, "seconds >= 0, default 1: timed phase lasts at least"},
    {"max_time_s", K_F64, OFF(max_time_s), 0, 1e7, "seconds >= 0, default 60: timed phase cap (0 = none)"},
    {"target_rel_ci", K_F64, OFF(target_rel_ci), 0, 1,
     "0..1, default 0 (off): also time until the median's 95% CI is within +-this fraction"},
    {"threads", K_INT, OFF(threads), 0, 4096, "integer >= 0, default 0 = physical cores"},
    {"seed", K_U64, OFF(seed), 0, 0, "unsigned integer, default 0: random input seed"},
    {"timeout_s", K_F64, OFF(timeout_s), 0, 1e7, "seconds >= 0, default 600: per conversion (0 = none)"},
    {"memory_limit_mb", K_I64, OFF(memory_limit_mb), -1, 1e9,
     "MiB, default -1 = the machine's physical memory (none in sanitizer builds), 0 = none: child address-space limit"},
    {"check_outputs", K_BOOL, OFF(check_outputs), 0, 1, "bool, default true: compare outputs with EAGER"},
    {"rtol", K_F64, OFF(rtol), 0, 1e6, "float >= 0, default 1e-3: relative tolerance of the check"},
    {"atol", K_F64, OFF(atol), 0, 1e6, "float >= 0, default 1e-4: absolute tolerance of the check"},
    {"verbose", K_INT, OFF(verbose), 0, 2, "0 quiet | 1 normal | 2 verbose, default 1"},
    {"batch_sizes", K_LIST, OFF(batch_sizes), 0, sizeof(((alma_config *)0)->batch_sizes),
     "comma list of integers >= 1, default \"\" (only batch_size): a batch-size sweep"},
    {"throughput", K_BOOL, OFF(throughput), 0, 1,
     "bool, default false: also run the throughput mode (instances x workers)"},
    {"instances", K_LIST, OFF(instances), 1, sizeof(((alma_config *)0)->instances),
     "comma list of integers >= 1 or MAX (physical cores), default 1,MAX: model copies"},
    {"workers", K_LIST, OFF(workers), 0, sizeof(((alma_config *)0)->workers),
     "comma list of integers >= 1, default 1,2: threads feeding each copy"},
    {"duration_s", K_F64, OFF(duration_s), 0, 1e7,
     "seconds >= 0, default 0 (off): each timed phase lasts this long (n_samples still met)"},
    {"cache", K_BOOL, OFF(cache), 0, 1, "bool, default true: store and reuse conversion builds"},
    {"cache_dir", K_STR, OFF(cache_dir), 0, sizeof(((alma_config *)0)->cache_dir),
     "path, default \"\" = $ALMA_CACHE_DIR, else ~/.cache/alma"},
    {"rebuild", K_CHOICE, OFF(rebuild), 0, sizeof(((alma_config *)0)->rebuild),
     "if_needed | always | never, default if_needed"},
    {"build_only", K_BOOL, OFF(build_only), 0, 1, "bool, default false: convert (and cache) without timing"},
    {"lean_cache", K_BOOL, OFF(lean_cache), 0, 1, "bool, default false: keep only state files and logs"},
    {"calibrator", K_CHOICE, OFF(calibrator), 0, sizeof(((alma_config *)0)->calibrator),
     "minmax | percentile | entropy, default minmax: INT8_STATIC calibration"},
    {"runtime_options", K_STR, OFF(runtime_options), 0, sizeof(((alma_config *)0)->runtime_options),
     "comma list of RUNTIME.NAME=VALUE, default \"\" (the runtimes' defaults): runtime settings, e.g. "
     "dnnl.winograd=off (alma list --options)"},
    {"calibration_batches", K_I64, OFF(calibration_batches), 0, 1e6,
     "integer >= 0, default 8: INT8_STATIC calibrates on the first N batches of the data (0 = the pass's own random batches)"},
    {"save_converted", K_STR, OFF(save_converted), 0, sizeof(((alma_config *)0)->save_converted),
     "directory, default \"\" (off): write each conversion's final graph there as <conversion>.onnx"},
    {"labels", K_STR, OFF(labels), 0, sizeof(((alma_config *)0)->labels),
     "path, default \"\" (none): .npy or IDX integer class ids per data sample: top-1 accuracy per conversion"},
    {"profile", K_I64, OFF(profile), 0, 1e9,
     "integer >= 0, default 0 (off): after timing, profile at least N batches node by node"},
    {"profile_time_s", K_F64, OFF(profile_time_s), 0, 1e7,
     "seconds >= 0, default 1: the per-node profile lasts at least this long (max_time_s caps)"},
    {"repeat", K_INT, OFF(repeat), 0, 100,
     "integer 0..100, default 1 (0 = 1): each conversion in this many processes, interleaved; >= 2 adds "
     "between-process figures"},
    {"scenario", K_CHOICE, OFF(scenario), 0, sizeof(((alma_config *)0)->scenario),
     "single_stream | offline | server, default single_stream: offline adds the throughput mode, server the "
     "Poisson-arrival server scenario"},
    {"target_qps", K_F64, OFF(target_qps), 0, 1e7,
     "queries/s >= 0, default 0 = search: the server scenario's arrival rate"},
    {"latency_bound_ms", K_F64, OFF(latency_bound_ms), 0, 1e9,
     "ms >= 0, default 0 (required by scenario server): the server's latency bound"},
    {"latency_percentile", K_F64, OFF(latency_percentile), 50, 99.999,
     "50..99.999, default 99: the percentile of server latency held to latency_bound_ms"},
};
#define N_KEYS ((int)(sizeof keys / sizeof keys[0]))

static const kdesc *find_key(const char *key) {
  for (int i = 0; key && i < N_KEYS; i++)
    if (!strcmp(keys[i].key, key)) return &keys[i];
  return NULL;
}

const char *alma_config_key(int i) { return i >= 0 && i < N_KEYS ? keys[i].key : NULL; }

const char *alma_config_key_doc(const char *key) {
  const kdesc *k = find_key(key);
  return k ? k->doc : NULL;
}

static alma_status bad(const kdesc *k, const char *value, const char *why) {
  return alma__errorf(ALMA_ERR_INVALID_ARG, "config key '%s': %s, got '%s' (%s)", k->key, why, value, k->doc);
}

alma_status alma_config_set(alma_config *c, const char *key, const char *value) {
  if (!c || !key) return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_config_set: NULL config or key");
  const kdesc *k = find_key(key);
  if (!k) {
    /* Name the closest keys so a typo is easy to fix. */
    char list[1024];
    size_t len = 0;
    for (int i = 0; i < N_KEYS; i++) {
      int w = snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", keys[i].key);
      if (w < 0 || (size_t)w >= sizeof list - len) break;
      len += (size_t)w;
    }
    return alma__errorf(ALMA_ERR_INVALID_ARG, "unknown config key '%s' (valid keys: %s)", key, list);
  }
  /* "" is a value only where it means "the default": cache_dir, batch_sizes. */
  if (!value || (!*value && k->type != K_STR && strcmp(k->key, "batch_sizes")))
    return bad(k, value ? value : "(null)", "a value is required");
  char *p = (char *)c + k->off;
  char *end = NULL;
  switch (k->type) {
    case K_I64:
    case K_INT: {
      errno = 0;
      long long v = strtoll(value, &end, 10);
      if (errno || *end || end == value) return bad(k, value, "expected an integer");
      if ((double)v < k->lo || (double)v > k->hi) return bad(k, value, "out of range");
      if (k->type == K_I64) *(int64_t *)p = v;
      else *(int *)p = (int)v;
      return ALMA_OK;
    }
    case K_U64: {
      if (value[0] == '-') return bad(k, value, "expected an unsigned integer");
      errno = 0;
      unsigned long long v = strtoull(value, &end, 0);
      if (errno || *end || end == value) return bad(k, value, "expected an unsigned integer");
      *(uint64_t *)p = v;
      return ALMA_OK;
    }
    case K_F64: {
      errno = 0;
      double v = strtod(value, &end);
      if (errno || *end || end == value || !isfinite(v)) return bad(k, value, "expected a number");
      if (v < k->lo || v > k->hi) return bad(k, value, "out of range");
      *(double *)p = v;
      return ALMA_OK;
    }
    case K_BOOL: {
      int v;
      if (!strcasecmp(value, "1") || !strcasecmp(value, "true") || !strcasecmp(value, "on") ||
          !strcasecmp(value, "yes"))
        v = 1;
      else if (!strcasecmp(value, "0") || !strcasecmp(value, "false") || !strcasecmp(value, "off") ||
               !strcasecmp(value, "no"))
        v = 0;
      else
        return bad(k, value, "expected a boolean (true/false, on/off, 1/0)");
      *(int *)p = v;
      return ALMA_OK;
    }
    case K_DEVICE:
      if (strcasecmp(value, "cpu") && strcasecmp(value, "cuda")) return bad(k, value, "expected cpu or cuda");
      snprintf(c->device, sizeof c->device, "%s", !strcasecmp(value, "cpu") ? "cpu" : "cuda");
      return ALMA_OK;
    case K_STR:
      if (strlen(value) >= (size_t)k->hi) return bad(k, value, "too long");
      if (!strcmp(k->key, "runtime_options") && alma__rt_options_check(value) != ALMA_OK) {
        alma__error_prefix(ALMA_ERR_INVALID_ARG, "config key 'runtime_options': ");
        return ALMA_ERR_INVALID_ARG;
      }
      snprintf(p, (size_t)k->hi, "%s", value);
      return ALMA_OK;
    case K_LIST: {
      if (strlen(value) >= (size_t)k->hi) return bad(k, value, "too long");
      int64_t tmp[64];
      if (*value && alma__config_list(k->key, value, k->lo == 1 ? 1 : 0, tmp, 64) < 0) return ALMA_ERR_INVALID_ARG;
      snprintf(p, (size_t)k->hi, "%s", value);
      return ALMA_OK;
    }
    case K_CHOICE: {
      size_t len = strlen(value);
      for (const char *ch = choices_of(k->key); *ch;) {
        const char *e = strchr(ch, '|');
        size_t n = e ? (size_t)(e - ch) : strlen(ch);
        if (n == len && !strncasecmp(ch, value, n)) {
          snprintf(p, (size_t)k->hi, "%.*s", (int)n, ch);
          return ALMA_OK;
        }
        ch += n + (e ? 1 : 0);
      }
      return bad(k, value, "not one of the choices");
    }
  }
  return alma__errorf(ALMA_ERR_INTERNAL, "config key '%s': unhandled type", key);
}

/* Shortest of %.15g / %.17g that reads back exactly (0.1, not 0.10000000000000001). */
static void format_double(double v, char *buf, size_t n) {
  snprintf(buf, n, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, n, "%.17g", v);
}

static void format_value(const alma_config *c, const kdesc *k, char *buf, size_t n, char *type) {
  const char *p = (const char *)c + k->off;
  switch (k->type) {
    case K_I64: snprintf(buf, n, "%lld", (long long)*(const int64_t *)p); *type = 'i'; break;
    case K_INT: snprintf(buf, n, "%d", *(const int *)p); *type = 'i'; break;
    case K_U64: snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)p); *type = 'i'; break;
    case K_F64: format_double(*(const double *)p, buf, n); *type = 'f'; break;
    case K_BOOL: snprintf(buf, n, "%s", *(const int *)p ? "true" : "false"); *type = 'b'; break;
    case K_DEVICE: snprintf(buf, n, "%s", c->device); *type = 's'; break;
    case K_STR:
    case K_LIST:
    case K_CHOICE: snprintf(buf, n, "%s", p); *type = 's'; break;
  }
}

alma_status alma_config_get(const alma_config *c, const char *key, char *buf, size_t n) {
  const kdesc *k = find_key(key);
  if (!k) return alma__errorf(ALMA_ERR_NOT_FOUND, "unknown config key '%s'", key ? key : "(null)");
  char t;
  format_value(c, k, buf, n, &t);
  return ALMA_OK;
}

int alma__config_entry(const alma_config *c, int i, const char **key, char *buf, size_t n, char *type) {
  if (i < 0 || i >= N_KEYS) return 0;
  *key = keys[i].key;
  format_value(c, &keys[i], buf, n, type);
  return 1;
}

/* max_value > 0 allows MAX (it must then be resolvable: with max_value == 1 at validation time only
 * the syntax is checked). */
int alma__config_list(const char *key, const char *text, int64_t max_value, int64_t *out, int cap) {
  int n = 0;
  const char *p = text;
  if (!text || !*text) {
    alma__errorf(ALMA_ERR_INVALID_ARG, "config key '%s': an empty list", key);
    return -1;
  }
  while (*p) {
    while (*p == ' ') p++;
    const char *e = p + strcspn(p, ",");
    int64_t v;
    if (max_value > 0 && (size_t)(e - p) == 3 && !strncasecmp(p, "MAX", 3)) {
      v = max_value;
    } else {
      char *end;
      errno = 0;
      long long x = strtoll(p, &end, 10);
      while (end < e && *end == ' ') end++;
      if (errno || end != e || e == p || x < 1 || x > 1000000000) {
        alma__errorf(ALMA_ERR_INVALID_ARG, "config key '%s': '%.*s' in '%s' is not an integer >= 1%s", key, (int)(e - p), p,
                     text, max_value > 0 ? " or MAX" : "");
        return -1;
      }
      v = x;
    }
    int dup = 0;
    for (int i = 0; i < n; i++) dup |= out[i] == v;
    if (!dup) {
      if (n == cap) {
        alma__errorf(ALMA_ERR_INVALID_ARG, "config key '%s': more than %d values in '%s'", key, cap, text);
        return -1;
      }
      int i = n++;
      while (i > 0 && out[i - 1] > v) {  /* ascending */
        out[i] = out[i - 1];
        i--;
      }
      out[i] = v;
    }
    p = *e ? e + 1 : e;
  }
  return n;
}
