/* Elementwise machinery shared by elementwise.c, activation.c and cast.c (see ew.h). */
#include "ops/ew.h"

void alma__ew_iterate(int nin, const alma__ew_operand *ins, int out_rank, const int64_t *out_dims,
                      void *out_data, size_t out_esz, alma__ew_run_fn run, void *ctx) {
  int nops = nin + 1;
  int64_t total = alma__numel(out_rank, out_dims);
  if (total == 0) return;

  /* Element strides of every operand over the output's dimensions (0 where broadcast). */
  int64_t st[ALMA__EW_MAX_IN + 1][ALMA_MAX_RANK];
  for (int k = 0; k < nin; k++) {
    int64_t s = 1;
    for (int d = out_rank - 1; d >= 0; d--) {
      int j = d - (out_rank - ins[k].rank);
      int64_t dim = j >= 0 ? ins[k].dims[j] : 1;
      st[k][d] = dim == 1 ? 0 : s;
      s *= dim;
    }
  }
  {
    int64_t s = 1;
    for (int d = out_rank - 1; d >= 0; d--) {
      st[nin][d] = s;
      s *= out_dims[d];
    }
  }

  /* Drop size-1 dimensions and merge neighbours that every operand walks the same way, so the
   * innermost run is as long as possible. */
  int64_t dims[ALMA_MAX_RANK], cs[ALMA__EW_MAX_IN + 1][ALMA_MAX_RANK];
  int r = 0;
  for (int d = 0; d < out_rank; d++) {
    if (out_dims[d] == 1) continue;
    int merge = r > 0;
    for (int k = 0; k < nops && merge; k++)
      if (cs[k][r - 1] != st[k][d] * out_dims[d]) merge = 0;
    if (merge) {
      dims[r - 1] *= out_dims[d];
      for (int k = 0; k < nops; k++) cs[k][r - 1] = st[k][d];
    } else {
      dims[r] = out_dims[d];
      for (int k = 0; k < nops; k++) cs[k][r] = st[k][d];
      r++;
    }
  }

  char *base[ALMA__EW_MAX_IN + 1], *ptrs[ALMA__EW_MAX_IN + 1];
  size_t esz[ALMA__EW_MAX_IN + 1];
  int64_t inner_st[ALMA__EW_MAX_IN + 1];
  for (int k = 0; k < nin; k++) {
    base[k] = (char *)ins[k].data;
    esz[k] = ins[k].esz;
  }
  base[nin] = (char *)out_data;
  esz[nin] = out_esz;
  if (r == 0) { /* a single element */
    for (int k = 0; k < nops; k++) inner_st[k] = 0;
    run(ctx, base, inner_st, 1);
    return;
  }
  int64_t n = dims[r - 1];
  for (int k = 0; k < nops; k++) inner_st[k] = cs[k][r - 1];

  int64_t idx[ALMA_MAX_RANK] = {0}, off[ALMA__EW_MAX_IN + 1] = {0};
  int64_t outer = total / n;
  for (int64_t it = 0; it < outer; it++) {
    for (int k = 0; k < nops; k++) ptrs[k] = base[k] + (size_t)off[k] * esz[k];
    run(ctx, ptrs, inner_st, n);
    /* odometer over the outer dimensions */
    for (int d = r - 2; d >= 0; d--) {
      idx[d]++;
      for (int k = 0; k < nops; k++) off[k] += cs[k][d];
      if (idx[d] < dims[d]) break;
      for (int k = 0; k < nops; k++) off[k] -= cs[k][d] * dims[d];
      idx[d] = 0;
    }
  }
}

int alma__ew_is_numeric(alma_dtype t) { return alma__dtype_is_float(t) || alma__dtype_is_int(t); }

alma_status alma__ew_unary_float_infer(const alma_node *n, const alma_tensor *const *in, int nin,
                                       alma_tensor *out, int nout) {
  if (!alma__dtype_is_float(in[0]->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s (expects a floating-point type)",
                          alma_dtype_name(in[0]->dtype));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

#define ALMA__EW_CHUNK 512

alma_status alma__ew_unary_float_run(const alma_node *n, const alma_tensor *x, alma_tensor *y,
                                     alma__ew_uf32 f32, alma__ew_uf64 f64, const alma__ew_uparam *p) {
  static const alma__ew_uparam none = {0};
  if (!p) p = &none;
  int64_t cnt = alma_tensor_numel(x);
  switch (x->dtype) {
    case ALMA_DTYPE_FLOAT32: f32((const float *)x->data, (float *)y->data, cnt, p); return ALMA_OK;
    case ALMA_DTYPE_FLOAT64: f64((const double *)x->data, (double *)y->data, cnt, p); return ALMA_OK;
    case ALMA_DTYPE_FLOAT16:
    case ALMA_DTYPE_BFLOAT16: {
      /* Half types compute in float32, a chunk at a time. */
      const uint16_t *xs = (const uint16_t *)x->data;
      uint16_t *ys = (uint16_t *)y->data;
      int h = x->dtype == ALMA_DTYPE_FLOAT16;
      float a[ALMA__EW_CHUNK], b[ALMA__EW_CHUNK];
      for (int64_t i = 0; i < cnt; i += ALMA__EW_CHUNK) {
        int64_t m = cnt - i < ALMA__EW_CHUNK ? cnt - i : ALMA__EW_CHUNK;
        for (int64_t j = 0; j < m; j++) a[j] = h ? alma__f16_to_f32(xs[i + j]) : alma__bf16_to_f32(xs[i + j]);
        f32(a, b, m, p);
        for (int64_t j = 0; j < m; j++) ys[i + j] = h ? alma__f32_to_f16(b[j]) : alma__f32_to_bf16(b[j]);
      }
      return ALMA_OK;
    }
    default:
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  }
}

void alma__ew_cost(const alma_node *n, const alma_tensor *const *in, int nin, const alma_tensor *out,
                   int nout, int64_t *macs, int64_t *flops) {
  *macs = 0;
  *flops = nout > 0 ? alma_tensor_numel(&out[0]) : 0;
}

void alma__ew_binary(const alma_tensor *a, int b_rank, const int64_t *b_dims, const void *b_data,
                     alma_dtype b_dtype, alma_tensor *out, alma__ew_run_fn run, void *ctx) {
  alma__ew_operand ops[2] = {alma__ew_op(a), {b_rank, b_dims, b_data, alma_dtype_size(b_dtype)}};
  alma__ew_iterate(2, ops, out->rank, out->dims, out->data, alma_dtype_size(out->dtype), run, ctx);
}
