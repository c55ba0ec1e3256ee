/* NumPy .npy reader and writer (format versions 1.0, 2.0 and 3.0).
 *
 * Layout: "\x93NUMPY", major, minor, header length (uint16 LE for v1, uint32 LE for v2/v3), then an
 * ASCII (v3: UTF-8) Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * padded with spaces to a 64-byte boundary and ended by '\n', then the raw array bytes.
 *
 * The header is untrusted input: it is parsed by a small bounded parser (never eval'd, never read past
 * its length), and the declared size is checked against the file size before anything is allocated,
 * so a lying header gives ALMA_ERR_PARSE naming the file rather than a huge allocation or a crash.
 * Byte orders '<', '|', '=' and '>' are read (big-endian data is swapped); Fortran-ordered arrays are
 * reordered into the row-major layout alma_tensor uses. Files are always written little-endian, C
 * order, version 1.0 unless the header needs more than 65535 bytes. */
#include <errno.h>
#include <sys/stat.h>

#include "core/core.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
/* numpy itself refuses headers over 10000 bytes by default; 1 MiB leaves room for rank-8 shapes
 * written by other tools while keeping a hostile length from costing memory. */
#define NPY_MAX_HEADER (1u << 20)

static int host_is_le(void) {
  const uint16_t one = 1;
  uint8_t b;
  memcpy(&b, &one, 1);
  return b == 1;
}

static void swap_bytes(void *data, size_t n_elems, size_t esz) {
  uint8_t *p = data;
  if (esz < 2) return;
  for (size_t i = 0; i < n_elems; i++, p += esz)
    for (size_t a = 0, b = esz - 1; a < b; a++, b--) {
      uint8_t t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
}

/* ---- header parsing ------------------------------------------------------------------------- */

typedef struct {
  const char *s, *end;
  const char *path;
} hparser;

static void skip_ws(hparser *p) {
  while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')) p->s++;
}

static alma_status perr(const hparser *p, const char *what) {
  return alma__errorf(ALMA_ERR_PARSE, "'%s': malformed .npy header: %s", p->path, what);
}

/* A quoted Python string ('...' or "..."), without escapes (numpy never writes any in a header). */
static alma_status parse_str(hparser *p, char *buf, size_t cap) {
  if (p->s >= p->end || (*p->s != '\'' && *p->s != '"')) return perr(p, "expected a quoted string");
  char q = *p->s++;
  if (!memchr(p->s, q, (size_t)(p->end - p->s))) return perr(p, "unterminated string");
  size_t n = 0;
  while (p->s < p->end && *p->s != q) {
    if (*p->s == '\\' || *p->s == '\n') return perr(p, "unsupported character in a string");
    if (n + 1 >= cap) return perr(p, "string too long");
    buf[n++] = *p->s++;
  }
  if (p->s >= p->end) return perr(p, "unterminated string");
  p->s++;
  buf[n] = '\0';
  return ALMA_OK;
}

static int match_word(hparser *p, const char *w) {
  size_t n = strlen(w);
  if ((size_t)(p->end - p->s) < n || memcmp(p->s, w, n)) return 0;
  /* the word must not continue as an identifier (e.g. "Truex") */
  if ((size_t)(p->end - p->s) > n) {
    char c = p->s[n];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_') return 0;
  }
  p->s += n;
  return 1;
}

static alma_status parse_shape(hparser *p, int *rank, int64_t *dims) {
  if (p->s >= p->end || *p->s != '(') {
    if (p->s < p->end && *p->s == '[') return perr(p, "'shape' must be a tuple, not a list");
    return perr(p, "expected '(' to start 'shape'");
  }
  p->s++;
  int r = 0;
  for (;;) {
    skip_ws(p);
    if (p->s >= p->end) return perr(p, "unterminated 'shape' tuple");
    if (*p->s == ')') {
      p->s++;
      break;
    }
    if (*p->s < '0' || *p->s > '9') return perr(p, "'shape' must hold non-negative integers");
    int64_t v = 0;
    while (p->s < p->end && *p->s >= '0' && *p->s <= '9') {
      if (v > (INT64_C(1) << 56)) return perr(p, "dimension in 'shape' is too large");
      v = v * 10 + (*p->s++ - '0');
    }
    if (p->s < p->end && (*p->s == 'L' || *p->s == 'l')) p->s++; /* Python 2 long literal */
    if (r >= ALMA_MAX_RANK)
      return alma__errorf(ALMA_ERR_UNSUPPORTED, "'%s': .npy array has more than %d dimensions (alma's maximum)",
                          p->path, ALMA_MAX_RANK);
    dims[r++] = v;
    skip_ws(p);
    if (p->s < p->end && *p->s == ',') {
      p->s++;
      continue;
    }
    skip_ws(p);
    if (p->s >= p->end || *p->s != ')') return perr(p, "expected ',' or ')' in 'shape'");
  }
  *rank = r;
  return ALMA_OK;
}

typedef struct {
  alma_dtype dtype;
  int swap;     /* data byte order differs from the host's */
  int fortran;
  int rank;
  int64_t dims[ALMA_MAX_RANK];
  char str_kind; /* strings: 'S' (bytes) or 'U' (UTF-32 code points), else 0 */
  size_t str_w;  /* strings: bytes per element in the file */
} npy_header;

static alma_status parse_descr(hparser *p, const char *d, npy_header *h) {
  char order = '|';
  const char *k = d;
  if (*k == '<' || *k == '>' || *k == '|' || *k == '=') order = *k++;
  alma_dtype t = ALMA_DTYPE_UNDEFINED;
  if (!strcmp(k, "?") || !strcmp(k, "b1")) t = ALMA_DTYPE_BOOL;
  else if (!strcmp(k, "f2")) t = ALMA_DTYPE_FLOAT16;
  else if (!strcmp(k, "f4")) t = ALMA_DTYPE_FLOAT32;
  else if (!strcmp(k, "f8")) t = ALMA_DTYPE_FLOAT64;
  else if (!strcmp(k, "i1")) t = ALMA_DTYPE_INT8;
  else if (!strcmp(k, "u1")) t = ALMA_DTYPE_UINT8;
  else if (!strcmp(k, "i2")) t = ALMA_DTYPE_INT16;
  else if (!strcmp(k, "u2")) t = ALMA_DTYPE_UINT16;
  else if (!strcmp(k, "i4")) t = ALMA_DTYPE_INT32;
  else if (!strcmp(k, "u4")) t = ALMA_DTYPE_UINT32;
  else if (!strcmp(k, "i8")) t = ALMA_DTYPE_INT64;
  else if (!strcmp(k, "u8")) t = ALMA_DTYPE_UINT64;
  else if ((k[0] == 'S' || k[0] == 'U') && k[1] >= '1' && k[1] <= '9' && strlen(k) < 10) {
    /* numpy bytes ('|S8') and unicode ('<U8') arrays: string tensors (alma_npy_load converts) */
    char *e;
    unsigned long w = strtoul(k + 1, &e, 10);
    if (*e) return perr(p, "malformed string dtype");
    h->dtype = ALMA_DTYPE_STRING;
    h->str_kind = k[0];
    h->str_w = k[0] == 'S' ? w : 4 * w;
    h->swap = k[0] == 'U' && (order == '>' ? host_is_le() : order == '<' ? !host_is_le() : 0);
    return ALMA_OK;
  }
  if (t == ALMA_DTYPE_UNDEFINED)
    return alma__errorf(ALMA_ERR_UNSUPPORTED,
                        "'%s': .npy dtype '%s' is not supported (expected one of f2 f4 f8 i1 u1 i2 u2 i4 u4 "
                        "i8 u8 b1, or strings Sn/Un)", p->path, d);
  size_t esz = alma_dtype_size(t);
  if (order == '|' && esz > 1) return perr(p, "multi-byte dtype with '|' (no) byte order");
  int file_le = order == '<' || (order == '=' && host_is_le());
  h->dtype = t;
  h->swap = esz > 1 && (order == '>' || order == '<' ? file_le != host_is_le() : 0);
  return ALMA_OK;
}

static alma_status parse_header(const char *path, const char *s, size_t n, npy_header *h) {
  hparser p = {s, s + n, path};
  int have_descr = 0, have_fortran = 0, have_shape = 0;
  memset(h, 0, sizeof *h);
  skip_ws(&p);
  if (p.s >= p.end || *p.s != '{') return perr(&p, "expected a '{' dictionary");
  p.s++;
  for (;;) {
    skip_ws(&p);
    if (p.s >= p.end) return perr(&p, "unterminated dictionary");
    if (*p.s == '}') {
      p.s++;
      break;
    }
    char key[32];
    ALMA_TRY(parse_str(&p, key, sizeof key));
    skip_ws(&p);
    if (p.s >= p.end || *p.s != ':') return perr(&p, "expected ':' after a key");
    p.s++;
    skip_ws(&p);
    if (!strcmp(key, "descr")) {
      if (have_descr++) return perr(&p, "duplicate key 'descr'");
      if (p.s < p.end && *p.s == '[')
        return alma__errorf(ALMA_ERR_UNSUPPORTED, "'%s': structured .npy dtypes are not supported", path);
      char d[32];
      ALMA_TRY(parse_str(&p, d, sizeof d));
      ALMA_TRY(parse_descr(&p, d, h));
    } else if (!strcmp(key, "fortran_order")) {
      if (have_fortran++) return perr(&p, "duplicate key 'fortran_order'");
      if (match_word(&p, "True")) h->fortran = 1;
      else if (match_word(&p, "False")) h->fortran = 0;
      else return perr(&p, "'fortran_order' must be True or False");
    } else if (!strcmp(key, "shape")) {
      if (have_shape++) return perr(&p, "duplicate key 'shape'");
      ALMA_TRY(parse_shape(&p, &h->rank, h->dims));
    } else {
      char msg[96];
      snprintf(msg, sizeof msg, "unexpected key '%s'", key);
      return perr(&p, msg);
    }
    skip_ws(&p);
    if (p.s < p.end && *p.s == ',') {
      p.s++;
      continue;
    }
    skip_ws(&p);
    if (p.s >= p.end || *p.s != '}') return perr(&p, "expected ',' or '}' in the dictionary");
  }
  /* only padding may follow the dictionary */
  for (; p.s < p.end; p.s++)
    if (*p.s != ' ' && *p.s != '\n' && *p.s != '\r' && *p.s != '\t' && *p.s != '\0')
      return perr(&p, "unexpected text after the dictionary");
  if (!have_descr) return perr(&p, "missing key 'descr'");
  if (!have_fortran) return perr(&p, "missing key 'fortran_order'");
  if (!have_shape) return perr(&p, "missing key 'shape'");
  return ALMA_OK;
}

/* Column-major data in `src` → row-major in `dst` (same dims). */
static void fortran_to_c(const uint8_t *src, uint8_t *dst, int rank, const int64_t *dims, size_t esz) {
  int64_t fstride[ALMA_MAX_RANK], idx[ALMA_MAX_RANK] = {0}, n = alma__numel(rank, dims);
  int64_t s = 1;
  for (int i = 0; i < rank; i++) {
    fstride[i] = s;
    s *= dims[i];
  }
  int64_t off = 0; /* F-order element offset of idx */
  for (int64_t e = 0; e < n; e++) {
    memcpy(dst + (size_t)e * esz, src + (size_t)off * esz, esz);
    for (int a = rank - 1; a >= 0; a--) { /* C-order increment of idx */
      if (++idx[a] < dims[a]) {
        off += fstride[a];
        break;
      }
      off -= fstride[a] * (dims[a] - 1);
      idx[a] = 0;
    }
  }
}

/* ---- load ----------------------------------------------------------------------------------- */

static alma_status read_exact(FILE *f, void *buf, size_t n, size_t *got) {
  *got = fread(buf, 1, n, f);
  return *got == n ? ALMA_OK : ALMA_ERR_PARSE;
}

/* t holds n fixed-width elements of h's string kind: replaced by a string tensor of h's shape.
 * Trailing NULs are padding (numpy drops them); 'U' code points are written as UTF-8. */
static alma_status npy_strings(const char *path, const npy_header *h, int64_t n, alma_tensor *t) {
  alma_tensor s;
  ALMA_TRY(alma__tensor_alloc(&s, ALMA_DTYPE_STRING, h->rank, h->dims));
  char *buf = malloc(h->str_w + 1);
  alma_status st = buf ? ALMA_OK : alma__errorf(ALMA_ERR_NOMEM, "out of memory reading '%s'", path);
  for (int64_t i = 0; i < n && st == ALMA_OK; i++) {
    const uint8_t *e = (const uint8_t *)t->data + (size_t)i * h->str_w;
    size_t len = 0;
    if (h->str_kind == 'S') {
      len = h->str_w;
      while (len && !e[len - 1]) len--;
      memcpy(buf, e, len);
    } else {
      size_t m = h->str_w / 4;
      while (m && !memcmp(e + 4 * (m - 1), "\0\0\0\0", 4)) m--;
      for (size_t k = 0; k < m && st == ALMA_OK; k++) {
        uint32_t c;
        memcpy(&c, e + 4 * k, 4);
        if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) {
          st = alma__errorf(ALMA_ERR_PARSE, "'%s': element %lld holds U+%X, not a Unicode code point", path,
                            (long long)i, (unsigned)c);
        } else if (c < 0x80) {
          buf[len++] = (char)c;
        } else if (c < 0x800) {
          buf[len++] = (char)(0xc0 | (c >> 6)), buf[len++] = (char)(0x80 | (c & 0x3f));
        } else if (c < 0x10000) {
          buf[len++] = (char)(0xe0 | (c >> 12)), buf[len++] = (char)(0x80 | ((c >> 6) & 0x3f));
          buf[len++] = (char)(0x80 | (c & 0x3f));
        } else {
          buf[len++] = (char)(0xf0 | (c >> 18)), buf[len++] = (char)(0x80 | ((c >> 12) & 0x3f));
          buf[len++] = (char)(0x80 | ((c >> 6) & 0x3f)), buf[len++] = (char)(0x80 | (c & 0x3f));
        }
      }
    }
    if (st == ALMA_OK) st = alma__str_make(buf, len, &alma__strs(&s)[i]);
  }
  free(buf);
  if (st != ALMA_OK) {
    alma_tensor_free_data(&s);
    return st;
  }
  alma_tensor_free_data(t);
  *t = s;
  return ALMA_OK;
}

alma_status alma_npy_load(const char *path, alma_tensor *out) {
  if (!path || !out) return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_npy_load: NULL argument");
  memset(out, 0, sizeof *out);
  FILE *f;
  ALMA_TRY(alma__fopen_regular(path, &f, NULL)); /* a FIFO or device is refused, not waited on */
  alma_status st = ALMA_OK;
  char *hdr = NULL;
  alma_tensor t = {0};
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    st = alma__errorf(ALMA_ERR_IO, "'%s' is not a regular file", path);
    goto done;
  }
  uint8_t pre[12];
  size_t got;
  if (read_exact(f, pre, 8, &got) != ALMA_OK) {
    st = alma__errorf(ALMA_ERR_PARSE, "'%s' is not a .npy file (%s)", path,
                      got == 0 ? "empty file" : "shorter than the .npy preamble");
    goto done;
  }
  if (memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN)) {
    st = alma__errorf(ALMA_ERR_PARSE, "'%s' is not a .npy file (no \\x93NUMPY magic)", path);
    goto done;
  }
  int major = pre[6], minor = pre[7];
  size_t lenbytes = major == 1 ? 2 : (major == 2 || major == 3) ? 4 : 0;
  if (!lenbytes) {
    st = alma__errorf(ALMA_ERR_UNSUPPORTED, "'%s': .npy format version %d.%d is not supported (1.0, 2.0, 3.0 are)",
                      path, major, minor);
    goto done;
  }
  if (read_exact(f, pre + 8, lenbytes, &got) != ALMA_OK) {
    st = alma__errorf(ALMA_ERR_PARSE, "'%s': .npy file truncated in the header length", path);
    goto done;
  }
  uint32_t hlen = lenbytes == 2 ? (uint32_t)pre[8] | (uint32_t)pre[9] << 8
                                : (uint32_t)pre[8] | (uint32_t)pre[9] << 8 | (uint32_t)pre[10] << 16 |
                                      (uint32_t)pre[11] << 24;
  if (hlen > NPY_MAX_HEADER) {
    st = alma__errorf(ALMA_ERR_PARSE, "'%s': .npy header length %u is implausibly large", path, hlen);
    goto done;
  }
  uint64_t data_off = 8 + lenbytes + hlen;
  if ((uint64_t)sb.st_size < data_off) {
    st = alma__errorf(ALMA_ERR_PARSE, "'%s': .npy file truncated in the header (%lld bytes, header needs %llu)",
                      path, (long long)sb.st_size, (unsigned long long)data_off);
    goto done;
  }
  hdr = malloc(hlen + 1);
  if (!hdr) {
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory reading '%s'", path);
    goto done;
  }
  if (read_exact(f, hdr, hlen, &got) != ALMA_OK) {
    st = alma__errorf(ALMA_ERR_IO, "'%s': short read in the .npy header", path);
    goto done;
  }
  hdr[hlen] = '\0';
  npy_header h;
  if ((st = parse_header(path, hdr, hlen, &h)) != ALMA_OK) goto done;

  size_t esz = h.str_kind ? h.str_w : alma_dtype_size(h.dtype);
  int64_t n = 1, need;
  for (int i = 0; i < h.rank; i++)
    if (alma__mul_overflow_i64(n, h.dims[i], &n)) n = -1;
  if (n < 0 || alma__mul_overflow_i64(n, (int64_t)esz, &need)) {
    st = alma__errorf(ALMA_ERR_PARSE, "'%s': .npy shape is too large", path);
    goto done;
  }
  uint64_t have = (uint64_t)sb.st_size - data_off;
  if (have != (uint64_t)need) {
    char shp[160];
    alma__shape_str(h.rank, h.dims, shp, sizeof shp);
    st = alma__errorf(ALMA_ERR_PARSE, "'%s': .npy %s array of shape %s needs %lld data bytes, the file has %llu%s",
                      path, alma_dtype_name(h.dtype), shp, (long long)need, (unsigned long long)have,
                      have < (uint64_t)need ? " (truncated)" : " (trailing bytes)");
    goto done;
  }
  if (h.str_kind) { /* raw fixed-width elements first; converted to string handles below */
    t.data = malloc(need > 0 ? (size_t)need : 1);
    if (!t.data) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory reading '%s'", path);
    t.owns_data = 1, t.nbytes = (size_t)need, t.dtype = ALMA_DTYPE_UINT8;
  } else {
    st = alma__tensor_alloc(&t, h.dtype, h.rank, h.dims);
  }
  if (st != ALMA_OK) {
    alma__error_prefix(st, "'%s': ", path);
    goto done;
  }
  if (need > 0 && read_exact(f, t.data, (size_t)need, &got) != ALMA_OK) {
    st = alma__errorf(ALMA_ERR_IO, "'%s': short read in the .npy data (%zu of %lld bytes)", path, got,
                      (long long)need);
    goto done;
  }
  if (h.swap) swap_bytes(t.data, h.str_kind ? (size_t)n * esz / 4 : (size_t)n, h.str_kind ? 4 : esz);
  if (h.fortran && h.rank > 1 && n > 0) {
    void *c = malloc((size_t)need);
    if (!c) {
      st = alma__errorf(ALMA_ERR_NOMEM, "out of memory reordering '%s'", path);
      goto done;
    }
    fortran_to_c(t.data, c, h.rank, h.dims, esz);
    free(t.data);
    t.data = c;
  }
  if (h.str_kind && (st = npy_strings(path, &h, n, &t)) != ALMA_OK) goto done;
  if (h.dtype == ALMA_DTYPE_BOOL) /* any nonzero byte is True, as numpy reads it */
    for (int64_t i = 0; i < n; i++) ((uint8_t *)t.data)[i] = ((uint8_t *)t.data)[i] != 0;
  *out = t;
  t.data = NULL;

done:
  alma_tensor_free_data(&t);
  free(hdr);
  fclose(f);
  return st;
}

/* ---- save ----------------------------------------------------------------------------------- */

static const char *descr_of(alma_dtype t) {
  switch (t) {
    case ALMA_DTYPE_FLOAT16: return "<f2";
    case ALMA_DTYPE_FLOAT32: return "<f4";
    case ALMA_DTYPE_FLOAT64: return "<f8";
    case ALMA_DTYPE_INT8: return "|i1";
    case ALMA_DTYPE_UINT8: return "|u1";
    case ALMA_DTYPE_INT16: return "<i2";
    case ALMA_DTYPE_UINT16: return "<u2";
    case ALMA_DTYPE_INT32: return "<i4";
    case ALMA_DTYPE_UINT32: return "<u4";
    case ALMA_DTYPE_INT64: return "<i8";
    case ALMA_DTYPE_UINT64: return "<u8";
    case ALMA_DTYPE_BOOL: return "|b1";
    /* numpy has no 4-bit or 2-bit integers: their values (one a byte in alma) exactly as int8/uint8.
     * The float8/float4 types have no numpy descr (ml_dtypes writes '<V1', which does not say which
     * type), so they are refused like bfloat16. */
    case ALMA_DTYPE_INT4: case ALMA_DTYPE_INT2: return "|i1";
    case ALMA_DTYPE_UINT4: case ALMA_DTYPE_UINT2: return "|u1";
    default: return NULL;
  }
}

static alma_status npy_save_as(const char *path, const alma_tensor *t, const char *descr, size_t esz);

/* String tensors as numpy bytes ('|S<longest>', NUL-padded: numpy drops trailing NULs, so a string
 * ending in NUL reads back shorter). */
static alma_status npy_save_strings(const char *path, const alma_tensor *t) {
  int64_t n = alma_tensor_numel(t);
  size_t w = 1;
  for (int64_t i = 0; i < n; i++)
    if (alma__str_len(alma__strs(t)[i]) > w) w = alma__str_len(alma__strs(t)[i]);
  uint8_t *buf = n > 0 ? calloc((size_t)n, w) : malloc(1);
  if (!buf) return alma__errorf(ALMA_ERR_NOMEM, "cannot save '%s': out of memory", path);
  for (int64_t i = 0; i < n; i++)
    memcpy(buf + (size_t)i * w, alma__str_ptr(alma__strs(t)[i]), alma__str_len(alma__strs(t)[i]));
  alma_tensor b = *t;
  b.data = buf;
  b.nbytes = (size_t)n * w;
  char descr[32];
  snprintf(descr, sizeof descr, "|S%zu", w);
  alma_status st = npy_save_as(path, &b, descr, w);
  free(buf);
  return st;
}

alma_status alma_npy_save(const char *path, const alma_tensor *t) {
  if (!path || !t) return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_npy_save: NULL argument");
  if (t->dtype == ALMA_DTYPE_STRING && t->rank >= 0 && t->rank <= ALMA_MAX_RANK && (t->data || !alma_tensor_numel(t)))
    return npy_save_strings(path, t);
  const char *descr = descr_of(t->dtype);
  if (!descr)
    return alma__errorf(ALMA_ERR_UNSUPPORTED, "cannot save '%s': dtype %s has no .npy equivalent%s", path,
                        alma_dtype_name(t->dtype),
                        t->dtype == ALMA_DTYPE_BFLOAT16 || alma__dtype_is_lowfloat(t->dtype) ? " (cast to float32 first)" : "");
  return npy_save_as(path, t, descr, alma_dtype_size(t->dtype));
}

/* esz: bytes per element (swapped on a big-endian host unless a byte string) */
static alma_status npy_save_as(const char *path, const alma_tensor *t, const char *descr, size_t esz) {
  if (t->rank < 0 || t->rank > ALMA_MAX_RANK)
    return alma__errorf(ALMA_ERR_INVALID_ARG, "cannot save '%s': invalid rank %d", path, t->rank);
  int64_t n = 1, bytes;
  for (int i = 0; i < t->rank; i++) {
    if (t->dims[i] < 0) return alma__errorf(ALMA_ERR_INVALID_ARG, "cannot save '%s': negative dimension", path);
    if (alma__mul_overflow_i64(n, t->dims[i], &n))
      return alma__errorf(ALMA_ERR_INVALID_ARG, "cannot save '%s': shape overflows", path);
  }
  if (alma__mul_overflow_i64(n, (int64_t)esz, &bytes) || (uint64_t)bytes > t->nbytes || (bytes > 0 && !t->data))
    return alma__errorf(ALMA_ERR_INVALID_ARG, "cannot save '%s': tensor holds %zu bytes, its shape needs %lld", path,
                        t->nbytes, (long long)bytes);

  char dict[512];
  int o = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int i = 0; i < t->rank; i++)
    o += snprintf(dict + o, sizeof dict - (size_t)o, "%lld%s", (long long)t->dims[i],
                  t->rank == 1 ? "," : i + 1 < t->rank ? ", " : "");
  o += snprintf(dict + o, sizeof dict - (size_t)o, "), }");
  /* pad with spaces and a final '\n' so the data starts 64-byte aligned, as numpy does */
  size_t pre = 10, dlen = (size_t)o + 1;
  size_t total = (pre + dlen + 63) / 64 * 64;
  size_t hlen = total - pre;
  uint8_t head[10 + 512 + 64];
  memcpy(head, NPY_MAGIC, NPY_MAGIC_LEN);
  head[6] = 1;
  head[7] = 0;
  head[8] = (uint8_t)(hlen & 0xff);
  head[9] = (uint8_t)(hlen >> 8);
  memcpy(head + pre, dict, (size_t)o);
  memset(head + pre + o, ' ', hlen - (size_t)o - 1);
  head[total - 1] = '\n';

  FILE *f = fopen(path, "wb");
  if (!f) return alma__errorf(ALMA_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
  int ok = fwrite(head, 1, total, f) == total;
  if (ok && bytes > 0) {
    if (host_is_le() || esz == 1 || descr[1] == 'S') {
      ok = fwrite(t->data, 1, (size_t)bytes, f) == (size_t)bytes;
    } else { /* swap through a small buffer so the caller's tensor is untouched */
      uint8_t buf[4096];
      const uint8_t *src = t->data;
      for (size_t off = 0; ok && off < (size_t)bytes; off += sizeof buf) {
        size_t m = (size_t)bytes - off < sizeof buf ? (size_t)bytes - off : sizeof buf;
        memcpy(buf, src + off, m);
        swap_bytes(buf, m / esz, esz);
        ok = fwrite(buf, 1, m, f) == m;
      }
    }
  }
  if (fclose(f) != 0) ok = 0;
  if (!ok) {
    int e = errno;
    remove(path);
    return alma__errorf(ALMA_ERR_IO, "error writing '%s': %s", path, strerror(e));
  }
  return ALMA_OK;
}
