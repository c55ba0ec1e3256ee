/* Pad: modes constant, reflect, edge and wrap (opset 19). Pads come from the attribute `paddings`
 * (opset 1) or `pads` (2..10), or the `pads` input (11 on) with an optional constant_value input
 * and, from opset 18, an optional `axes` input. Negative pads crop. */
#include "ops/datamove.h"

typedef enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } pad_mode;

typedef struct {
  pad_mode mode;
  int64_t begin[ALMA_MAX_RANK], end[ALMA_MAX_RANK];
} pad_plan;

static alma_status pad_plan_make(const alma_node *n, const alma_tensor *const *in, int nin, pad_plan *p) {
  const alma_tensor *x = in[0];
  int r = x->rank;
  const char *m = alma__attr_s(n, "mode", "constant");
  if (!strcmp(m, "constant")) p->mode = PAD_CONSTANT;
  else if (!strcmp(m, "reflect")) p->mode = PAD_REFLECT;
  else if (!strcmp(m, "edge")) p->mode = PAD_EDGE;
  else if (!strcmp(m, "wrap") && n->since_version >= 19) p->mode = PAD_WRAP;
  else return alma__op_error(n, ALMA_ERR_INVALID_ARG, "mode '%s' is not valid at opset %d", m, n->since_version);

  int64_t pads[2 * ALMA_MAX_RANK], axes[ALMA_MAX_RANK];
  int np, na = -1;
  if (n->since_version < 11) {
    const char *name = n->since_version < 2 ? "paddings" : "pads";
    const int64_t *v;
    if (!alma__node_attr(n, name)) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "missing attribute '%s'", name);
    np = alma__attr_ints(n, name, &v);
    if (np > 2 * ALMA_MAX_RANK) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "too many pads (%d)", np);
    memcpy(pads, v, sizeof(int64_t) * (size_t)np);
  } else {
    if (nin < 2 || !in[1]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "missing input 'pads'");
    ALMA_TRY(alma__dm_read_ints(n, in[1], "pads", pads, 2 * ALMA_MAX_RANK, &np));
    if (nin > 3 && in[3]) {
      if (n->since_version < 18) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input 'axes' needs opset 18");
      ALMA_TRY(alma__dm_read_ints(n, in[3], "axes", axes, ALMA_MAX_RANK, &na));
    }
  }
  int cnt = na >= 0 ? na : r;
  if (np != 2 * cnt)
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "%d pads given, expected %d (2 per %s)", np, 2 * cnt,
                          na >= 0 ? "axis in axes" : "input dim");
  for (int k = 0; k < r; k++) p->begin[k] = p->end[k] = 0;
  int seen[ALMA_MAX_RANK] = {0};
  for (int i = 0; i < cnt; i++) {
    int a = i;
    if (na >= 0) {
      if (r == 0 || alma__norm_axis(axes[i], r, &a) != ALMA_OK)
        return alma__op_error(n, ALMA_ERR_INVALID_ARG, "axis %lld out of range for rank %d", (long long)axes[i], r);
      if (seen[a]) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "axis %lld given twice", (long long)axes[i]);
      seen[a] = 1;
    }
    p->begin[a] = pads[i];
    p->end[a] = pads[cnt + i];
  }
  for (int k = 0; k < r; k++) {
    int64_t b = p->begin[k], e = p->end[k], d = x->dims[k];
    if (b < -d || e < -d || b + e < -d || b > ((int64_t)1 << 40) || e > ((int64_t)1 << 40))
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "pads %lld,%lld are invalid for axis %d of size %lld",
                            (long long)b, (long long)e, k, (long long)d);
    if (p->mode != PAD_CONSTANT && (b > 0 || e > 0) && d + (b < 0 ? b : 0) + (e < 0 ? e : 0) <= 0)
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "mode '%s' cannot pad axis %d that has no elements", m, k);
  }
  return ALMA_OK;
}

static alma_status pad_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  (void)nout;
  const alma_tensor *x = in[0];
  ALMA_TRY(alma__dm_check_dtype(n, x->dtype, "data"));
  if (n->since_version >= 11 && nin > 2 && in[2]) {
    if (in[2]->dtype != x->dtype)
      return alma__op_error(n, ALMA_ERR_TYPE, "constant_value is %s, data is %s", alma_dtype_name(in[2]->dtype),
                            alma_dtype_name(x->dtype));
    if (alma_tensor_numel(in[2]) > 1)
      return alma__op_error(n, ALMA_ERR_SHAPE, "constant_value must be a scalar");
  }
  pad_plan p;
  ALMA_TRY(pad_plan_make(n, in, nin, &p));
  int64_t d[ALMA_MAX_RANK];
  for (int k = 0; k < x->rank; k++) d[k] = x->dims[k] + p.begin[k] + p.end[k];
  alma__set_shape(&out[0], x->dtype, x->rank, d);
  return ALMA_OK;
}

/* Input coordinate for output coordinate o along an axis (c = o - begin), or -1 for "constant". */
static int64_t map_coord(int64_t c, int64_t d, pad_mode m) {
  if (c >= 0 && c < d) return c;
  switch (m) {
    case PAD_EDGE: return c < 0 ? 0 : d - 1;
    case PAD_WRAP: return ((c % d) + d) % d;
    case PAD_REFLECT: {
      if (d == 1) return 0;
      int64_t per = 2 * (d - 1); /* numpy's reflect repeats with this period for large pads */
      c = ((c % per) + per) % per;
      return c < d ? c : per - c;
    }
    default: return -1;
  }
}

static alma_status pad_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, int nout) {
  (void)ctx; (void)nout;
  const alma_tensor *x = in[0];
  pad_plan p;
  ALMA_TRY(pad_plan_make(n, in, nin, &p));
  size_t esz = alma_dtype_size(x->dtype);
  uint8_t cval[16] = {0};
  if (n->since_version >= 11) {
    if (nin > 2 && in[2] && alma_tensor_numel(in[2]) == 1) memcpy(cval, in[2]->data, esz);
  } else {
    alma__set_f64(cval, x->dtype, 0, alma__attr_f(n, "value", 0.0f));
  }
  int r = x->rank;
  uint8_t *o = out[0].data;
  const uint8_t *src = x->data;
  if (alma_tensor_numel(&out[0]) == 0) return ALMA_OK;
  if (r == 0) {
    memcpy(o, src, esz);
    return ALMA_OK;
  }
  int64_t xs[ALMA_MAX_RANK], ctr[ALMA_MAX_RANK] = {0};
  alma__strides(r, x->dims, xs);
  const int64_t *od = out[0].dims;
  int64_t wout = od[r - 1], win = x->dims[r - 1], bl = p.begin[r - 1];
  /* In-range span of the last axis: output [lo, hi) copies input [lo - bl, hi - bl). */
  int64_t lo = bl > 0 ? bl : 0, hi = bl + win < wout ? bl + win : wout;
  int64_t nrows = alma_tensor_numel(&out[0]) / wout;
  for (int64_t row = 0; row < nrows; row++, o += wout * (int64_t)esz) {
    int64_t base = 0;
    int valid = 1;
    for (int k = 0; k < r - 1; k++) {
      int64_t c = map_coord(ctr[k] - p.begin[k], x->dims[k], p.mode);
      if (c < 0) valid = 0;
      else base += c * xs[k];
    }
    if (!valid) {
      for (int64_t i = 0; i < wout; i++) memcpy(o + i * (int64_t)esz, cval, esz);
    } else {
      const uint8_t *irow = src + base * (int64_t)esz;
      if (hi > lo) memcpy(o + lo * (int64_t)esz, irow + (lo - bl) * (int64_t)esz, (size_t)(hi - lo) * esz);
      for (int64_t i = 0; i < wout; i++) {
        if (i >= lo && i < hi) {
          i = hi - 1;
          continue;
        }
        int64_t c = map_coord(i - bl, win, p.mode);
        memcpy(o + i * (int64_t)esz, c < 0 ? cval : irow + c * (int64_t)esz, esz);
      }
    }
    for (int k = r - 2; k >= 0; k--) {
      if (++ctr[k] < od[k]) break;
      ctr[k] = 0;
    }
  }
  return ALMA_OK;
}

const alma_op_def alma__op_Pad = {.name = "Pad", .flags = ALMA_OP_STRINGS, .domain = "", .versions = {1, 2, 11, 13, 18, 19, 21},
                                  .min_inputs = 1, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
                                  .infer = pad_infer, .exec = pad_exec};
