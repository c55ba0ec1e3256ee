/* Allocation helpers and the arena. */
#include <time.h>
#include <openssl/evp.h>

#include "core/core.h"

void *alma__malloc(size_t n) { return malloc(n ? n : 1); }

void *alma__calloc(size_t n, size_t sz) {
  if (sz && n > SIZE_MAX / sz) return NULL;
  return calloc(n ? n : 1, sz ? sz : 1);
}

void *alma__realloc(void *p, size_t n) { return realloc(p, n ? n : 1); }

char *alma__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

int alma__mul_overflow_i64(int64_t a, int64_t b, int64_t *out) {
  return __builtin_mul_overflow(a, b, out);
}

typedef struct alma_arena_chunk {
  struct alma_arena_chunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} alma_arena_chunk;

struct alma_arena {
  alma_arena_chunk *head;
  size_t total;
};

alma_arena *alma__arena_new(void) { return calloc(1, sizeof(alma_arena)); }

void alma__arena_free(alma_arena *a) {
  if (!a) return;
  alma_arena_chunk *c = a->head;
  while (c) {
    alma_arena_chunk *n = c->next;
    free(c);
    c = n;
  }
  free(a);
}

void *alma__arena_alloc(alma_arena *a, size_t n) {
  size_t need = (n + 15) & ~(size_t)15;
  if (need < n) return NULL;
  alma_arena_chunk *c = a->head;
  if (!c || c->cap - c->used < need) {
    size_t cap = need > 65536 ? need : 65536;
    if (cap > SIZE_MAX - sizeof(alma_arena_chunk)) return NULL;
    alma_arena_chunk *nc = malloc(sizeof(alma_arena_chunk) + cap);
    if (!nc) return NULL;
    nc->used = 0;
    nc->cap = cap;
    /* Big allocations get their own chunk behind the head so the head's free space is kept. */
    if (c && need > 65536) {
      nc->next = c->next;
      c->next = nc;
    } else {
      nc->next = c;
      a->head = nc;
    }
    c = nc;
  }
  void *p = c->data + c->used;
  c->used += need;
  a->total += need;
  memset(p, 0, n);
  return p;
}

char *alma__arena_strndup(alma_arena *a, const char *s, size_t n) {
  char *d = alma__arena_alloc(a, n + 1);
  if (!d) return NULL;
  if (n) memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

char *alma__arena_strdup(alma_arena *a, const char *s) {
  return alma__arena_strndup(a, s ? s : "", s ? strlen(s) : 0);
}

size_t alma__arena_bytes(const alma_arena *a) { return a->total; }

double alma__now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct alma_sha256 {
  EVP_MD_CTX *ctx;
};

alma_sha256 *alma__sha256_new(void) {
  alma_sha256 *s = malloc(sizeof *s);
  if (!s) return NULL;
  s->ctx = EVP_MD_CTX_new();
  if (!s->ctx || EVP_DigestInit_ex(s->ctx, EVP_sha256(), NULL) != 1) {
    EVP_MD_CTX_free(s->ctx);
    free(s);
    return NULL;
  }
  return s;
}

void alma__sha256_update(alma_sha256 *s, const void *data, size_t n) {
  if (n) EVP_DigestUpdate(s->ctx, data, n);
}

void alma__sha256_final(alma_sha256 *s, char hex_out[65]) {
  unsigned char md[32];
  unsigned int len = 0;
  EVP_DigestFinal_ex(s->ctx, md, &len);
  for (int i = 0; i < 32; i++) sprintf(hex_out + 2 * i, "%02x", md[i]);
  hex_out[64] = '\0';
  EVP_MD_CTX_free(s->ctx);
  free(s);
}
