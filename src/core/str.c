/* Run-time strings of ONNX string tensors (see core.h): immutable, interned byte strings.
 *
 * Why interned handles rather than owned char* per element: dozens of kernels and every runtime
 * move elements as bytes (Gather, Concat, Transpose, Where, Pad, Scatter, If/Loop results, value
 * transfers, FOLD's initializers). With owned pointers each of those paths would alias and double
 * free; with an immutable interned entry the element is a plain value, so a byte copy *is* a deep
 * copy and a tensor free has nothing extra to release. Equal strings share one entry, so repeated
 * inferences over the same data do not grow memory. Entries live until the process exits (they
 * stay reachable from the table). */
#include <pthread.h>

#include "core/core.h"

static pthread_mutex_t str_mu = PTHREAD_MUTEX_INITIALIZER;
static alma__str **str_tab;   /* buckets, chained through next */
static size_t str_cap, str_count;

static uint64_t str_hash(const char *p, size_t n) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
  return h;
}

alma_status alma__str_make(const char *p, size_t len, const alma__str **out) {
  *out = NULL;
  if (len == 0) return ALMA_OK; /* NULL is "" (zeroed string tensors hold empty strings) */
  uint64_t h = str_hash(p, len);
  pthread_mutex_lock(&str_mu);
  if (str_count + 1 > str_cap / 2) {
    size_t ncap = str_cap ? str_cap * 2 : 1024;
    alma__str **nt = calloc(ncap, sizeof *nt);
    if (!nt) {
      pthread_mutex_unlock(&str_mu);
      return alma__errorf(ALMA_ERR_NOMEM, "out of memory for strings");
    }
    for (size_t i = 0; i < str_cap; i++)
      for (alma__str *e = str_tab[i], *nx; e; e = nx) {
        nx = e->next;
        e->next = nt[e->hash & (ncap - 1)];
        nt[e->hash & (ncap - 1)] = e;
      }
    free(str_tab);
    str_tab = nt;
    str_cap = ncap;
  }
  alma__str **b = &str_tab[h & (str_cap - 1)];
  for (alma__str *e = *b; e; e = e->next)
    if (e->hash == h && e->len == len && !memcmp(e->bytes, p, len)) {
      pthread_mutex_unlock(&str_mu);
      *out = e;
      return ALMA_OK;
    }
  alma__str *e = malloc(sizeof *e + len + 1);
  if (!e) {
    pthread_mutex_unlock(&str_mu);
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory for a string of %zu bytes", len);
  }
  e->len = len;
  e->hash = h;
  memcpy(e->bytes, p, len);
  e->bytes[len] = 0;
  e->next = *b;
  *b = e;
  str_count++;
  pthread_mutex_unlock(&str_mu);
  *out = e;
  return ALMA_OK;
}

int alma__str_cmp(const alma__str *a, const alma__str *b) {
  if (a == b) return 0;
  size_t la = alma__str_len(a), lb = alma__str_len(b);
  int c = memcmp(alma__str_ptr(a), alma__str_ptr(b), la < lb ? la : lb);
  return c ? c : (la < lb ? -1 : la > lb);
}

const char *alma_tensor_string(const alma_tensor *t, int64_t i, size_t *len_out) {
  if (!t || t->dtype != ALMA_DTYPE_STRING || !t->data || i < 0 || i >= alma_tensor_numel(t)) {
    if (len_out) *len_out = 0;
    return NULL;
  }
  const alma__str *s = ((const alma__str *const *)t->data)[i];
  if (len_out) *len_out = alma__str_len(s);
  return alma__str_ptr(s);
}

alma_status alma_tensor_set_string(alma_tensor *t, int64_t i, const char *bytes, size_t len) {
  if (!t || t->dtype != ALMA_DTYPE_STRING || !t->data || i < 0 || i >= alma_tensor_numel(t))
    return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_tensor_set_string: not a string tensor or index %lld out of range",
                        (long long)i);
  const alma__str *s;
  ALMA_TRY(alma__str_make(bytes, len, &s));
  ((const alma__str **)t->data)[i] = s;
  return ALMA_OK;
}
