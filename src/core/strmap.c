/* String -> int hash map for names read from files (value names in a model). Keyed SipHash-1-3
 * with a per-process random key, so a crafted file cannot make every name collide and turn
 * lookups back into linear scans. Open addressing, linear probing, load factor <= 1/2. */
#include <pthread.h>
#include <sys/random.h>

#include "core/core.h"

static uint64_t sip_k0, sip_k1;
static pthread_once_t sip_once = PTHREAD_ONCE_INIT;

static void sip_seed(void) {
  uint64_t k[2] = {0x736f6d6570736575ull, 0x646f72616e646f6dull};
  /* No entropy (very early boot, seccomp): a fixed key still gives correct results. */
  if (getrandom(k, sizeof k, GRND_NONBLOCK) != (ssize_t)sizeof k) k[0] ^= (uint64_t)(uintptr_t)&sip_k0;
  sip_k0 = k[0];
  sip_k1 = k[1];
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                           \
  do {                                                                                     \
    v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                              \
    v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                                 \
    v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                                 \
    v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                              \
  } while (0)

static uint64_t siphash13(const char *s, size_t n) {
  uint64_t v0 = 0x736f6d6570736575ull ^ sip_k0, v1 = 0x646f72616e646f6dull ^ sip_k1;
  uint64_t v2 = 0x6c7967656e657261ull ^ sip_k0, v3 = 0x7465646279746573ull ^ sip_k1;
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t m;
    memcpy(&m, p + i, 8); /* little-endian hosts only matter for speed, not correctness */
    v3 ^= m;
    SIPROUND;
    v0 ^= m;
  }
  uint64_t b = (uint64_t)n << 56;
  for (size_t k = 0; i + k < n; k++) b |= (uint64_t)p[i + k] << (8 * k);
  v3 ^= b;
  SIPROUND;
  v0 ^= b;
  v2 ^= 0xff;
  SIPROUND;
  SIPROUND;
  SIPROUND;
  return v0 ^ v1 ^ v2 ^ v3;
}

void alma__strmap_init(alma_strmap *m) { memset(m, 0, sizeof *m); }

void alma__strmap_free(alma_strmap *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

static size_t slot_of(const alma_strmap *m, const char *key, size_t len) {
  size_t mask = m->cap - 1, i = (size_t)siphash13(key, len) & mask;
  while (m->keys[i] && strcmp(m->keys[i], key)) i = (i + 1) & mask;
  return i;
}

int alma__strmap_get(const alma_strmap *m, const char *key) {
  if (!m->cap) return -1;
  size_t i = slot_of(m, key, strlen(key));
  return m->keys[i] ? m->vals[i] : -1;
}

int alma__strmap_put(alma_strmap *m, const char *key, int val) {
  pthread_once(&sip_once, sip_seed);
  if (2 * (m->n + 1) > m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 64;
    alma_strmap nm = {.keys = calloc(cap, sizeof(const char *)), .vals = calloc(cap, sizeof(int)), .cap = cap};
    if (!nm.keys || !nm.vals) {
      free(nm.keys);
      free(nm.vals);
      return -1;
    }
    for (size_t i = 0; i < m->cap; i++)
      if (m->keys[i]) {
        size_t j = slot_of(&nm, m->keys[i], strlen(m->keys[i]));
        nm.keys[j] = m->keys[i];
        nm.vals[j] = m->vals[i];
        nm.n++;
      }
    free(m->keys);
    free(m->vals);
    *m = nm;
  }
  size_t i = slot_of(m, key, strlen(key));
  if (!m->keys[i]) {
    m->keys[i] = key;
    m->n++;
  }
  m->vals[i] = val;
  return 0;
}
