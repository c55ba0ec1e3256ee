/* Shared helpers of the data-movement operators: strided copies and index-input reading. */
#include "ops/datamove.h"

/* One row: n elements from src with stride st (elements) into contiguous dst. Fixed-size memcpy
 * lets the compiler emit plain loads/stores without breaking strict aliasing. */
#define DM_ROW(SZ)                                                            \
  do {                                                                        \
    for (int64_t i = 0; i < n; i++) memcpy(d + i * (SZ), s + i * st * (SZ), (SZ)); \
  } while (0)

static void dm_row(uint8_t *d, const uint8_t *s, size_t esz, int64_t n, int64_t st) {
  if (st == 1) {
    memcpy(d, s, (size_t)n * esz);
    return;
  }
  switch (esz) {
    case 1: DM_ROW(1); break;
    case 2: DM_ROW(2); break;
    case 4: DM_ROW(4); break;
    case 8: DM_ROW(8); break;
    default:
      for (int64_t i = 0; i < n; i++) memcpy(d + i * (int64_t)esz, s + i * st * (int64_t)esz, esz);
  }
}

void alma__dm_strided_copy(void *dst, const void *src, size_t esz, int rank, const int64_t *dims,
                           const int64_t *src_strides) {
  int64_t d[ALMA__DM_MAX_RANK], s[ALMA__DM_MAX_RANK];
  int r = 0;
  for (int k = 0; k < rank; k++)
    if (dims[k] == 0) return;
  /* Drop unit dims and merge a dim into its outer neighbour when they are contiguous in src. */
  for (int k = 0; k < rank; k++) {
    if (dims[k] == 1) continue;
    if (r > 0 && s[r - 1] == src_strides[k] * dims[k]) {
      d[r - 1] *= dims[k];
      s[r - 1] = src_strides[k];
    } else {
      d[r] = dims[k];
      s[r] = src_strides[k];
      r++;
    }
  }
  uint8_t *out = dst;
  const uint8_t *in = src;
  if (r == 0) {
    memcpy(out, in, esz);
    return;
  }
  int64_t n = d[r - 1], st = s[r - 1];
  int64_t row_bytes = n * (int64_t)esz;
  int64_t ctr[ALMA__DM_MAX_RANK] = {0};
  int64_t off = 0; /* src offset in elements of the current row */
  for (;;) {
    dm_row(out, in + off * (int64_t)esz, esz, n, st);
    out += row_bytes;
    int k = r - 2;
    for (; k >= 0; k--) {
      off += s[k];
      if (++ctr[k] < d[k]) break;
      off -= s[k] * d[k];
      ctr[k] = 0;
    }
    if (k < 0) break;
  }
}

alma_status alma__dm_check_dtype(const alma_node *n, alma_dtype dt, const char *what) {
  if (alma_dtype_size(dt) == 0)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "%s dtype %s is not supported", what, alma_dtype_name(dt));
  return ALMA_OK;
}

alma_status alma__dm_check_index_dtype(const alma_node *n, const alma_tensor *t, const char *what) {
  if (t->dtype != ALMA_DTYPE_INT64 && t->dtype != ALMA_DTYPE_INT32)
    return alma__op_error(n, ALMA_ERR_TYPE, "%s must be int32 or int64, got %s", what, alma_dtype_name(t->dtype));
  return ALMA_OK;
}

alma_status alma__dm_read_ints(const alma_node *n, const alma_tensor *t, const char *what, int64_t *vals,
                               int max, int *count) {
  ALMA_TRY(alma__dm_check_index_dtype(n, t, what));
  if (t->rank > 1) return alma__op_error(n, ALMA_ERR_SHAPE, "%s must be 1-D, got rank %d", what, t->rank);
  int64_t cnt = alma_tensor_numel(t);
  if (cnt > max)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "%s has %lld entries, more than alma's maximum of %d", what,
                          (long long)cnt, max);
  if (!t->data) return alma__need_value();
  for (int64_t i = 0; i < cnt; i++) vals[i] = alma__get_i64(t->data, t->dtype, i);
  *count = (int)cnt;
  return ALMA_OK;
}
