/* Helpers shared by the data-movement operators (shape.c, gather.c, slice.c, pad.c, constant.c).
 * They move elements by size (alma_dtype_size), so every dtype alma holds works the same way. */
#ifndef ALMA_OPS_DATAMOVE_H
#define ALMA_OPS_DATAMOVE_H

#include "ops/op.h"

/* Ranks of the strided views below: Tile needs two dims per input dim. */
#define ALMA__DM_MAX_RANK (2 * ALMA_MAX_RANK)

/* Copies a strided view of src into contiguous dst: dst is row-major over `dims`; the element at
 * coordinates c is read at src + esz * sum(c[k] * src_strides[k]) (strides in elements, may be 0
 * for broadcast or negative for reversed slices). Merges contiguous dims and copies whole rows
 * with memcpy where it can. */
void alma__dm_strided_copy(void *dst, const void *src, size_t esz, int rank, const int64_t *dims,
                           const int64_t *src_strides);

/* Checks that dtype is one alma can hold (non-zero element size). ALMA_ERR_UNSUPPORTED otherwise,
 * naming the node and `what` ("input", "data"...). */
alma_status alma__dm_check_dtype(const alma_node *n, alma_dtype dt, const char *what);

/* Checks that an index/shape-like input is int32 or int64 (ALMA_ERR_TYPE otherwise). */
alma_status alma__dm_check_index_dtype(const alma_node *n, const alma_tensor *t, const char *what);

/* Reads a 1-D (or scalar) int32/int64 input into vals (at most max entries). Returns the count
 * through *count. ALMA_ERR_DYNAMIC when the data is not known. */
alma_status alma__dm_read_ints(const alma_node *n, const alma_tensor *t, const char *what, int64_t *vals,
                               int max, int *count);

#endif
