/* Shared helpers of the nn operator family (see nn_util.h). */
#include "ops/nn_util.h"

#define ALMA__NN_MAX_EXTENT ((int64_t)1 << 31) /* bound on kernel/stride/pad values: keeps sums exact */

alma_status alma__nn_geom_read(const alma_node *n, int nsp, const int64_t *in_sp, const int64_t *k,
                               int with_dilations, alma__nn_geom *g) {
  memset(g, 0, sizeof *g);
  if (nsp < 1 || nsp > ALMA_MAX_RANK - 2)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "%d spatial dimensions (expected 1 to %d)", nsp, ALMA_MAX_RANK - 2);
  g->nsp = nsp;
  const char *ap = alma__attr_s(n, "auto_pad", "NOTSET");
  if (!strcmp(ap, "NOTSET") || !ap[0])
    g->auto_pad = ALMA__PAD_NOTSET;
  else if (!strcmp(ap, "SAME_UPPER"))
    g->auto_pad = ALMA__PAD_SAME_UPPER;
  else if (!strcmp(ap, "SAME_LOWER"))
    g->auto_pad = ALMA__PAD_SAME_LOWER;
  else if (!strcmp(ap, "VALID"))
    g->auto_pad = ALMA__PAD_VALID;
  else
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "auto_pad '%s' (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)", ap);

  const int64_t *s = NULL, *d = NULL, *p = NULL;
  int ns = alma__attr_ints(n, "strides", &s);
  int nd = with_dilations ? alma__attr_ints(n, "dilations", &d) : 0;
  int np = alma__attr_ints(n, "pads", &p);
  if (ns && ns != nsp)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "strides has %d values for %d spatial dims", ns, nsp);
  if (nd && nd != nsp)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "dilations has %d values for %d spatial dims", nd, nsp);
  if (np && np != 2 * nsp)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "pads has %d values for %d spatial dims (expected %d)", np, nsp,
                          2 * nsp);
  for (int i = 0; i < nsp; i++) {
    g->in[i] = in_sp[i];
    g->k[i] = k[i];
    g->s[i] = ns ? s[i] : 1;
    g->d[i] = nd ? d[i] : 1;
    g->pb[i] = np ? p[i] : 0;
    g->pe[i] = np ? p[i + nsp] : 0;
    if (g->k[i] < 1 || g->k[i] > ALMA__NN_MAX_EXTENT)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "kernel size %lld along spatial dim %d", (long long)g->k[i], i);
    if (g->s[i] < 1 || g->s[i] > ALMA__NN_MAX_EXTENT)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "stride %lld along spatial dim %d", (long long)g->s[i], i);
    if (g->d[i] < 1 || g->d[i] > ALMA__NN_MAX_EXTENT)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "dilation %lld along spatial dim %d", (long long)g->d[i], i);
    if (g->pb[i] < 0 || g->pe[i] < 0 || g->pb[i] > ALMA__NN_MAX_EXTENT || g->pe[i] > ALMA__NN_MAX_EXTENT)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "pads %lld/%lld along spatial dim %d", (long long)g->pb[i],
                            (long long)g->pe[i], i);
  }
  return ALMA_OK;
}

alma_status alma__nn_geom_forward(const alma_node *n, alma__nn_geom *g, int ceil_mode) {
  for (int i = 0; i < g->nsp; i++) {
    int64_t in = g->in[i], s = g->s[i];
    int64_t eff = (g->k[i] - 1) * g->d[i] + 1;
    if (g->auto_pad == ALMA__PAD_SAME_UPPER || g->auto_pad == ALMA__PAD_SAME_LOWER) {
      int64_t out = (in + s - 1) / s;
      int64_t total = (out - 1) * s + eff - in;
      if (total < 0) total = 0;
      if (g->auto_pad == ALMA__PAD_SAME_UPPER) {
        g->pb[i] = total / 2;
        g->pe[i] = total - total / 2;
      } else {
        g->pe[i] = total / 2;
        g->pb[i] = total - total / 2;
      }
      g->out[i] = out;
      continue;
    }
    if (g->auto_pad == ALMA__PAD_VALID) g->pb[i] = g->pe[i] = 0;
    int64_t span = in + g->pb[i] + g->pe[i] - eff;
    if (span < 0)
      return alma__op_error(n, ALMA_ERR_SHAPE,
                            "window of %lld (kernel %lld, dilation %lld) exceeds the padded input %lld along spatial dim %d",
                            (long long)eff, (long long)g->k[i], (long long)g->d[i], (long long)(in + g->pb[i] + g->pe[i]), i);
    int64_t out = ceil_mode ? (span + s - 1) / s + 1 : span / s + 1;
    /* A window starting inside the end padding is dropped (the ONNX reference and PyTorch agree). */
    if (ceil_mode && (out - 1) * s >= in + g->pb[i]) out--;
    g->out[i] = out;
  }
  return ALMA_OK;
}

void *alma__nn_alloc(const alma_node *n, size_t count, size_t elem) {
  if (elem && count > SIZE_MAX / elem) {
    alma__op_error_set(n, ALMA_ERR_NOMEM, "scratch buffer of %zu x %zu bytes overflows", count, elem);
    return NULL;
  }
  size_t bytes = count * elem;
  void *p = malloc(bytes ? bytes : 1);
  if (!p) alma__op_error_set(n, ALMA_ERR_NOMEM, "out of memory for a scratch buffer of %zu bytes", count * elem);
  return p;
}

const float *alma__nn_as_f32(const alma_tensor *t, int *owned) {
  *owned = 0;
  if (t->dtype == ALMA_DTYPE_FLOAT32) return (const float *)t->data;
  int64_t n = alma_tensor_numel(t);
  float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
  if (!p) {
    alma__errorf(ALMA_ERR_NOMEM, "out of memory converting %lld elements to float32", (long long)n);
    return NULL;
  }
  if (t->dtype == ALMA_DTYPE_FLOAT16) {
    const uint16_t *s = t->data;
    for (int64_t i = 0; i < n; i++) p[i] = alma__f16_to_f32(s[i]);
  } else if (t->dtype == ALMA_DTYPE_BFLOAT16) {
    const uint16_t *s = t->data;
    for (int64_t i = 0; i < n; i++) p[i] = alma__bf16_to_f32(s[i]);
  } else {
    for (int64_t i = 0; i < n; i++) p[i] = (float)alma__get_f64(t->data, t->dtype, i);
  }
  *owned = 1;
  return p;
}

const double *alma__nn_as_f64(const alma_tensor *t, int *owned) {
  *owned = 0;
  if (t->dtype == ALMA_DTYPE_FLOAT64) return (const double *)t->data;
  int64_t n = alma_tensor_numel(t);
  double *p = malloc((size_t)(n ? n : 1) * sizeof *p);
  if (!p) {
    alma__errorf(ALMA_ERR_NOMEM, "out of memory converting %lld elements to float64", (long long)n);
    return NULL;
  }
  for (int64_t i = 0; i < n; i++) p[i] = alma__get_f64(t->data, t->dtype, i);
  *owned = 1;
  return p;
}

void alma__nn_store_f32(alma_tensor *out, const float *src) {
  int64_t n = alma_tensor_numel(out);
  switch (out->dtype) {
    case ALMA_DTYPE_FLOAT32: memcpy(out->data, src, (size_t)n * sizeof *src); break;
    case ALMA_DTYPE_FLOAT16: {
      uint16_t *d = out->data;
      for (int64_t i = 0; i < n; i++) d[i] = alma__f32_to_f16(src[i]);
      break;
    }
    case ALMA_DTYPE_BFLOAT16: {
      uint16_t *d = out->data;
      for (int64_t i = 0; i < n; i++) d[i] = alma__f32_to_bf16(src[i]);
      break;
    }
    default:
      for (int64_t i = 0; i < n; i++) alma__set_f64(out->data, out->dtype, i, src[i]);
  }
}

void alma__nn_store_f64(alma_tensor *out, const double *src) {
  int64_t n = alma_tensor_numel(out);
  if (out->dtype == ALMA_DTYPE_FLOAT64) {
    memcpy(out->data, src, (size_t)n * sizeof *src);
    return;
  }
  for (int64_t i = 0; i < n; i++) alma__set_f64(out->data, out->dtype, i, src[i]);
}
