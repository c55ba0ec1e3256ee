/* IDX reader (the format of the MNIST / Fashion-MNIST / EMNIST files).
 *
 * Layout: two zero bytes, a type code, the number of dimensions, one big-endian uint32 per dimension,
 * then the big-endian elements in row-major order. Type codes: 0x08 uint8, 0x09 int8, 0x0B int16,
 * 0x0C int32, 0x0D float32, 0x0E float64. The declared size is checked against the file size before
 * allocating, so a corrupt header fails with ALMA_ERR_PARSE naming the file. The files are usually
 * distributed gzip-compressed; those are recognised and refused with a hint rather than misread. */
#include <errno.h>
#include <sys/stat.h>

#include "core/core.h"

static alma_dtype idx_dtype(uint8_t code) {
  switch (code) {
    case 0x08: return ALMA_DTYPE_UINT8;
    case 0x09: return ALMA_DTYPE_INT8;
    case 0x0B: return ALMA_DTYPE_INT16;
    case 0x0C: return ALMA_DTYPE_INT32;
    case 0x0D: return ALMA_DTYPE_FLOAT32;
    case 0x0E: return ALMA_DTYPE_FLOAT64;
    default: return ALMA_DTYPE_UNDEFINED;
  }
}

alma_status alma_idx_load(const char *path, alma_tensor *out) {
  if (!path || !out) return alma__errorf(ALMA_ERR_INVALID_ARG, "alma_idx_load: NULL argument");
  memset(out, 0, sizeof *out);
  FILE *f;
  ALMA_TRY(alma__fopen_regular(path, &f, NULL)); /* a FIFO or device is refused, not waited on */
  alma_status st = ALMA_OK;
  alma_tensor t = {0};
  struct stat sb;
  uint8_t head[4 + 4 * ALMA_MAX_RANK];
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    st = alma__errorf(ALMA_ERR_IO, "'%s' is not a regular file", path);
    goto done;
  }
  size_t got = fread(head, 1, 4, f);
  if (got < 4) {
    st = alma__errorf(ALMA_ERR_PARSE, "'%s' is not an IDX file (%s)", path,
                      got == 0 ? "empty file" : "shorter than the 4-byte magic");
    goto done;
  }
  if (head[0] == 0x1f && head[1] == 0x8b) {
    st = alma__errorf(ALMA_ERR_PARSE, "'%s' is gzip-compressed; decompress it first (gunzip -k '%s')", path, path);
    goto done;
  }
  alma_dtype dt = idx_dtype(head[2]);
  if (head[0] != 0 || head[1] != 0 || dt == ALMA_DTYPE_UNDEFINED) {
    st = alma__errorf(ALMA_ERR_PARSE,
                      "'%s' is not an IDX file (magic %02x %02x %02x %02x; expected 00 00 <type 08/09/0B/0C/0D/0E> "
                      "<ndim>)", path, head[0], head[1], head[2], head[3]);
    goto done;
  }
  int rank = head[3];
  if (rank > ALMA_MAX_RANK) {
    st = alma__errorf(ALMA_ERR_UNSUPPORTED, "'%s': IDX file has %d dimensions (alma's maximum is %d)", path, rank,
                      ALMA_MAX_RANK);
    goto done;
  }
  if (fread(head + 4, 4, (size_t)rank, f) != (size_t)rank) {
    st = alma__errorf(ALMA_ERR_PARSE, "'%s': IDX file truncated in its dimensions", path);
    goto done;
  }
  int64_t dims[ALMA_MAX_RANK], n = 1, need;
  for (int i = 0; i < rank; i++) {
    const uint8_t *d = head + 4 + 4 * i;
    dims[i] = (int64_t)((uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3]);
    if (alma__mul_overflow_i64(n, dims[i], &n)) n = -1;
    if (n < 0) break;
  }
  size_t esz = alma_dtype_size(dt);
  if (n < 0 || alma__mul_overflow_i64(n, (int64_t)esz, &need)) {
    st = alma__errorf(ALMA_ERR_PARSE, "'%s': IDX shape is too large", path);
    goto done;
  }
  uint64_t have = (uint64_t)sb.st_size - (uint64_t)(4 + 4 * rank);
  if (have != (uint64_t)need) {
    char shp[160];
    alma__shape_str(rank, dims, shp, sizeof shp);
    st = alma__errorf(ALMA_ERR_PARSE, "'%s': IDX %s array of shape %s needs %lld data bytes, the file has %llu%s",
                      path, alma_dtype_name(dt), shp, (long long)need, (unsigned long long)have,
                      have < (uint64_t)need ? " (truncated)" : " (trailing bytes)");
    goto done;
  }
  if ((st = alma__tensor_alloc(&t, dt, rank, dims)) != ALMA_OK) {
    alma__error_prefix(st, "'%s': ", path);
    goto done;
  }
  if (need > 0 && fread(t.data, 1, (size_t)need, f) != (size_t)need) {
    st = alma__errorf(ALMA_ERR_IO, "'%s': short read in the IDX data", path);
    goto done;
  }
  /* big-endian on disk → host order */
  const uint16_t one = 1;
  uint8_t host_le;
  memcpy(&host_le, &one, 1);
  if (host_le && esz > 1) {
    uint8_t *p = t.data;
    for (int64_t i = 0; i < n; i++, p += esz)
      for (size_t a = 0, b = esz - 1; a < b; a++, b--) {
        uint8_t x = p[a];
        p[a] = p[b];
        p[b] = x;
      }
  }
  *out = t;
  t.data = NULL;

done:
  alma_tensor_free_data(&t);
  fclose(f);
  return st;
}
