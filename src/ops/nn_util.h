/* Helpers shared by the nn operator family (conv.c, pool.c, norm.c, gemm.c, softmax.c, einsum.c; the
 * optional-input accessor by every op file):
 * convolution/pooling window geometry and float32/float64 working copies of tensors. */
#ifndef ALMA_OPS_NN_UTIL_H
#define ALMA_OPS_NN_UTIL_H

#include "ops/op.h"

/* Optional input i, or NULL when omitted or not given. */
static inline const alma_tensor *alma__nn_in(const alma_tensor *const *in, int nin, int i) {
  return i < nin ? in[i] : NULL;
}
/* Whether optional output k is wanted by the graph. */
static inline int alma__nn_out_wanted(const alma_node *n, int nout, int k) {
  return k < nout && (!n->outputs || (k < n->n_outputs && n->outputs[k] >= 0));
}

enum { ALMA__PAD_NOTSET = 0, ALMA__PAD_SAME_UPPER, ALMA__PAD_SAME_LOWER, ALMA__PAD_VALID };

/* Window geometry over nsp spatial dims: input and output sizes, kernel, strides, dilations and
 * begin/end pads (end pads may be negative for ConvTranspose with an explicit output_shape). */
typedef struct alma__nn_geom {
  int nsp;
  int auto_pad;
  int64_t in[ALMA_MAX_RANK], out[ALMA_MAX_RANK], k[ALMA_MAX_RANK], s[ALMA_MAX_RANK], d[ALMA_MAX_RANK];
  int64_t pb[ALMA_MAX_RANK], pe[ALMA_MAX_RANK];
} alma__nn_geom;

/* Reads auto_pad, strides, dilations (when with_dilations; else all 1) and pads for nsp spatial
 * dims with input sizes in_sp and kernel sizes k, validating counts and ranges (errors name n).
 * Output sizes are not computed. */
alma_status alma__nn_geom_read(const alma_node *n, int nsp, const int64_t *in_sp, const int64_t *k,
                               int with_dilations, alma__nn_geom *g);
/* Conv/pool output sizes (and pads for SAME_* / VALID). ceil_mode per the pooling ops: output
 * rounded up, dropping a last window that would start in the end padding. */
alma_status alma__nn_geom_forward(const alma_node *n, alma__nn_geom *g, int ceil_mode);

/* float32 / float64 views of a float tensor: t's own data when it already has that dtype
 * (*owned = 0), else a converted malloc'd copy (*owned = 1). NULL with a message on OOM. */
const float *alma__nn_as_f32(const alma_tensor *t, int *owned);
const double *alma__nn_as_f64(const alma_tensor *t, int *owned);
/* Converts numel(out) values into out's dtype. */
void alma__nn_store_f32(alma_tensor *out, const float *src);
void alma__nn_store_f64(alma_tensor *out, const double *src);
/* malloc'd scratch with an error message on failure. */
void *alma__nn_alloc(const alma_node *n, size_t count, size_t elem);

#endif
