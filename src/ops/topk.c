/* TopK: the k largest (or smallest) elements along an axis and their indices.
 *
 * k is an attribute before opset 10 and a 1-element int64 input from then on (so the output shape
 * is dynamic unless k is constant); largest/sorted arrive at 11. Ties keep the lower index first,
 * as ONNX specifies; NaN ranks above every number (numpy's sort order). Results are always sorted,
 * which is one valid answer for sorted=0. */
#include <math.h>

#include "ops/op.h"

typedef struct {
  double v;
  int64_t i;
} fkey;
typedef struct {
  int64_t v; /* uint64 stored with the top bit flipped so signed order is unsigned order */
  int64_t i;
} ikey;

/* NaN is the greatest value. */
static int fcmp_asc(const void *a, const void *b) {
  const fkey *x = a, *y = b;
  int xn = isnan(x->v), yn = isnan(y->v);
  if (xn != yn) return xn ? 1 : -1;
  if (!xn && x->v != y->v) return x->v < y->v ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}
static int fcmp_desc(const void *a, const void *b) {
  const fkey *x = a, *y = b;
  int xn = isnan(x->v), yn = isnan(y->v);
  if (xn != yn) return xn ? -1 : 1;
  if (!xn && x->v != y->v) return x->v > y->v ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}
static int icmp_asc(const void *a, const void *b) {
  const ikey *x = a, *y = b;
  if (x->v != y->v) return x->v < y->v ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}
static int icmp_desc(const void *a, const void *b) {
  const ikey *x = a, *y = b;
  if (x->v != y->v) return x->v > y->v ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

static alma_status topk_k(const alma_node *n, const alma_tensor *const *in, int nin, int64_t *k) {
  if (n->since_version < 10) {
    const alma_attr *a = alma__node_attr(n, "k");
    if (!a) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attribute k is required at opset %d", n->since_version);
    *k = a->i;
    return ALMA_OK;
  }
  const alma_tensor *kt = nin > 1 ? in[1] : NULL;
  if (!kt) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input K is required");
  if (kt->dtype != ALMA_DTYPE_INT64)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "K must be int64, got %s", alma_dtype_name(kt->dtype));
  if (alma_tensor_numel(kt) != 1 || kt->rank > 1)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "K must be a 1-D tensor of one element");
  if (!kt->data) return alma__need_value();
  *k = ((const int64_t *)kt->data)[0];
  return ALMA_OK;
}

static alma_status topk_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                              int nout) {
  const alma_tensor *x = in[0];
  if (!alma__dtype_is_float(x->dtype) && !alma__dtype_is_int(x->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  if (x->rank < 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input must have rank >= 1");
  int64_t axis = alma__attr_i(n, "axis", -1);
  if (axis < -x->rank || axis >= x->rank)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis %lld out of range for rank %d", (long long)axis, x->rank);
  int a = (int)(axis < 0 ? axis + x->rank : axis);
  int64_t k = 0;
  alma_status st = topk_k(n, in, nin, &k);
  if (st != ALMA_OK) return st;
  if (k < 0 || k > x->dims[a])
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "k = %lld is out of range for axis %d of size %lld", (long long)k,
                          a, (long long)x->dims[a]);
  int64_t dims[ALMA_MAX_RANK];
  memcpy(dims, x->dims, sizeof dims);
  dims[a] = k;
  alma__set_shape(&out[0], x->dtype, x->rank, dims);
  if (nout > 1) alma__set_shape(&out[1], ALMA_DTYPE_INT64, x->rank, dims);
  return ALMA_OK;
}

static alma_status topk_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  int64_t axis = alma__attr_i(n, "axis", -1);
  int a = (int)(axis < 0 ? axis + x->rank : axis);
  int largest = n->since_version < 11 || alma__attr_i(n, "largest", 1);
  int64_t k = out[0].dims[a];
  int64_t outer = 1, inner = 1, len = x->dims[a];
  for (int i = 0; i < a; i++) outer *= x->dims[i];
  for (int i = a + 1; i < x->rank; i++) inner *= x->dims[i];
  if (k == 0 || outer * inner == 0) return ALMA_OK;
  int fl = alma__dtype_is_float(x->dtype);
  size_t ksz = fl ? sizeof(fkey) : sizeof(ikey);
  void *keys = alma__malloc((size_t)len * ksz);
  if (!keys) return alma__op_error(n, ALMA_ERR_NOMEM, "scratch for %lld keys", (long long)len);
  int (*cmp)(const void *, const void *) = fl ? (largest ? fcmp_desc : fcmp_asc) : (largest ? icmp_desc : icmp_asc);
  size_t esz = alma_dtype_size(x->dtype);
  const char *xd = x->data;
  char *vd = out[0].data;
  int64_t *id = nout > 1 ? out[1].data : NULL;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t in_ = 0; in_ < inner; in_++) {
      int64_t base = o * len * inner + in_;
      if (fl) {
        fkey *f = keys;
        for (int64_t j = 0; j < len; j++) f[j].v = alma__get_f64(xd, x->dtype, base + j * inner), f[j].i = j;
      } else {
        ikey *f = keys;
        for (int64_t j = 0; j < len; j++) {
          int64_t v = alma__get_i64(xd, x->dtype, base + j * inner);
          if (x->dtype == ALMA_DTYPE_UINT64) v = (int64_t)((uint64_t)v ^ (UINT64_C(1) << 63));
          f[j].v = v, f[j].i = j;
        }
      }
      qsort(keys, (size_t)len, ksz, cmp);
      int64_t obase = o * k * inner + in_;
      for (int64_t j = 0; j < k; j++) {
        int64_t src = fl ? ((fkey *)keys)[j].i : ((ikey *)keys)[j].i;
        /* copy the element bytes: exact for every dtype */
        if (vd) memcpy(vd + (size_t)(obase + j * inner) * esz, xd + (size_t)(base + src * inner) * esz, esz);
        if (id) id[obase + j * inner] = src;
      }
    }
  }
  free(keys);
  return ALMA_OK;
}

const alma_op_def alma__op_TopK = {.name = "TopK", .domain = "", .versions = {1, 10, 11},
                                   .min_inputs = 1, .max_inputs = 2, .min_outputs = 2, .max_outputs = 2,
                                   .infer = topk_infer, .exec = topk_exec};
