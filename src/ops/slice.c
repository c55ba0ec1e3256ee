/* Slice: starts/ends/axes as attributes (opset 1) or inputs with optional axes and steps (10 on).
 * Starts and ends are clamped as the spec says (negative counts from the end, INT64_MAX means "to
 * the end"), negative steps walk backwards. The output is a strided view of the input, copied. */
#include "ops/datamove.h"

/* Per-dimension start, step and output length. */
typedef struct {
  int64_t start[ALMA_MAX_RANK], step[ALMA_MAX_RANK], len[ALMA_MAX_RANK];
} slice_plan;

static alma_status slice_plan_make(const alma_node *n, const alma_tensor *const *in, int nin, slice_plan *p) {
  const alma_tensor *x = in[0];
  int r = x->rank;
  /* Up to rank entries are meaningful; allow a little more so over-long lists get a clear error. */
  int64_t starts[2 * ALMA_MAX_RANK], ends[2 * ALMA_MAX_RANK], axes[2 * ALMA_MAX_RANK], steps[2 * ALMA_MAX_RANK];
  int ns, ne, na = -1, nst = -1;
  const int cap = 2 * ALMA_MAX_RANK;
  if (n->since_version < 10) {
    const int64_t *v;
    if (!alma__node_attr(n, "starts") || !alma__node_attr(n, "ends"))
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "attributes 'starts' and 'ends' are required");
    ns = alma__attr_ints(n, "starts", &v);
    if (ns > cap) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "too many starts (%d)", ns);
    memcpy(starts, v, sizeof(int64_t) * (size_t)ns);
    ne = alma__attr_ints(n, "ends", &v);
    if (ne > cap) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "too many ends (%d)", ne);
    memcpy(ends, v, sizeof(int64_t) * (size_t)ne);
    if (alma__node_attr(n, "axes")) {
      na = alma__attr_ints(n, "axes", &v);
      if (na > cap) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "too many axes (%d)", na);
      memcpy(axes, v, sizeof(int64_t) * (size_t)na);
    }
  } else {
    if (nin < 3 || !in[1] || !in[2])
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "inputs 'starts' and 'ends' are required");
    ALMA_TRY(alma__dm_read_ints(n, in[1], "starts", starts, cap, &ns));
    ALMA_TRY(alma__dm_read_ints(n, in[2], "ends", ends, cap, &ne));
    if (nin > 3 && in[3]) ALMA_TRY(alma__dm_read_ints(n, in[3], "axes", axes, cap, &na));
    if (nin > 4 && in[4]) ALMA_TRY(alma__dm_read_ints(n, in[4], "steps", steps, cap, &nst));
  }
  if (ne != ns) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "%d starts but %d ends", ns, ne);
  if (na >= 0 && na != ns) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "%d starts but %d axes", ns, na);
  if (nst >= 0 && nst != ns) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "%d starts but %d steps", ns, nst);
  for (int k = 0; k < r; k++) {
    p->start[k] = 0;
    p->step[k] = 1;
    p->len[k] = x->dims[k];
  }
  int seen[ALMA_MAX_RANK] = {0};
  for (int i = 0; i < ns; i++) {
    int64_t av = na >= 0 ? axes[i] : i;
    int a;
    if (r == 0 || alma__norm_axis(av, r, &a) != ALMA_OK)
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "axis %lld out of range for rank %d", (long long)av, r);
    if (seen[a]) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "axis %d sliced twice", a);
    seen[a] = 1;
    int64_t step = nst >= 0 ? steps[i] : 1, dim = x->dims[a];
    if (step == 0) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "step for axis %d is 0", a);
    int64_t s = starts[i], e = ends[i], len;
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      s = s < 0 ? 0 : s > dim ? dim : s;
      e = e < 0 ? 0 : e > dim ? dim : e;
      len = e > s ? (e - s - 1) / step + 1 : 0;
    } else {
      s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
      e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
      if (dim == 0 || s <= e) len = 0;
      else if (step == INT64_MIN) len = 1; /* -step would overflow; one element fits */
      else len = (s - e - 1) / -step + 1;
    }
    p->start[a] = len ? s : 0;
    p->step[a] = step;
    p->len[a] = len;
  }
  return ALMA_OK;
}

static alma_status slice_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  (void)nout;
  ALMA_TRY(alma__dm_check_dtype(n, in[0]->dtype, "input"));
  slice_plan p;
  ALMA_TRY(slice_plan_make(n, in, nin, &p));
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, p.len);
  return ALMA_OK;
}

static alma_status slice_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                              alma_tensor *out, int nout) {
  (void)ctx; (void)nout;
  const alma_tensor *x = in[0];
  slice_plan p;
  ALMA_TRY(slice_plan_make(n, in, nin, &p));
  if (alma_tensor_numel(&out[0]) == 0) return ALMA_OK;
  int64_t xs[ALMA_MAX_RANK], st[ALMA_MAX_RANK], base = 0;
  alma__strides(x->rank, x->dims, xs);
  for (int k = 0; k < x->rank; k++) {
    base += p.start[k] * xs[k];
    st[k] = p.len[k] > 1 ? p.step[k] * xs[k] : 0; /* a huge step with one element never advances */
  }
  size_t esz = alma_dtype_size(x->dtype);
  alma__dm_strided_copy(out[0].data, (const uint8_t *)x->data + base * (int64_t)esz, esz, x->rank, p.len, st);
  return ALMA_OK;
}

const alma_op_def alma__op_Slice = {.name = "Slice", .flags = ALMA_OP_STRINGS | ALMA_OP_FILLS_OUTPUTS, .domain = "", .versions = {1, 10, 11, 13}, .min_inputs = 1,
                                    .max_inputs = 5, .min_outputs = 1, .max_outputs = 1, .infer = slice_infer,
                                    .exec = slice_exec};
