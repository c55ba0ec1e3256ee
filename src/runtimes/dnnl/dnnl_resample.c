/* DNNL runtime: Resize / Upsample through the resampling primitive, where ONNX's coordinates are
 * oneDNN's. */
#ifdef ALMA_HAVE_DNNL

#include <math.h>

#include "ops/nn_util.h"
#include "runtimes/dnnl/dnnl_rt.h"

/* ---- Resize / Upsample through the resampling primitive ----------------------------------------------- */
/* oneDNN maps output coordinate o of an axis resized from `in` to `out` to s = (o + 0.5) in / out
 * - 0.5 (in float): nearest takes round(s), linear the two samples around s (clamped). ONNX's map
 * depends on the mode, the scale given (not out / in) and the rounding rule. Rather than listing
 * the combinations that agree, the node runs on oneDNN only when, for its shapes and scales, every
 * output coordinate of every axis reads the same samples with the same weights (within float
 * rounding) both ways; N and C must map to themselves. */
enum { RS_HALF_PIXEL, RS_HALF_PIXEL_SYM, RS_PYTORCH, RS_ALIGN, RS_ASYM, RS_TF_NN, RS_UPSAMPLE };
enum { RS_ROUND_FLOOR, RS_ROUND_CEIL, RS_FLOOR, RS_CEIL };

typedef struct {
  int linear, ctm;
  int nmode[ALMA_MAX_RANK];
  double scale[ALMA_MAX_RANK];
} rs_onnx;

/* The node's mode, coordinate rule and per-axis scales (the forms of Upsample 7/9, Resize 10 and
 * 11+, scales or sizes, axes); 0 when they are not readable here (EAGER decides then). */
static int rs_read(const alma_node *n, dn_val **in, int nin, const alma_tensor *x, const alma_tensor *os, rs_onnx *q) {
  int r = x->rank, v = n->since_version, ups = alma__dn_is_op(n, "Upsample");
  const char *m = alma__attr_s(n, "mode", "nearest");
  q->linear = strcmp(m, "nearest") != 0;
  for (int i = 0; i < r; i++) q->scale[i] = 1.0, q->nmode[i] = RS_FLOOR;
  if (ups && v < 9) {
    const float *fs = NULL;
    if (alma__attr_floats(n, "scales", &fs) != r) return 0;
    for (int i = 0; i < r; i++) q->scale[i] = fs[i];
    q->ctm = RS_UPSAMPLE;
    return 1;
  }
  /* the scales (or, from 11, sizes) input; an empty one counts as absent */
  int si = ups || v < 11 ? 1 : 2;
  dn_val *sc = si < nin && in[si] && alma__numel(in[si]->t.rank, in[si]->t.dims) > 0 ? in[si] : NULL;
  dn_val *sz = !ups && v >= 11 && nin > 3 && in[3] && alma__numel(in[3]->t.rank, in[3]->t.dims) > 0 ? in[3] : NULL;
  if (!sc == !sz || (sc && (!sc->has_plain || !alma__dtype_is_float(sc->t.dtype))) ||
      (sz && (!sz->has_plain || sz->t.dtype != ALMA_DTYPE_INT64)))
    return 0;
  int axes[ALMA_MAX_RANK], na = r;
  for (int i = 0; i < r; i++) axes[i] = i;
  const int64_t *ax = NULL;
  int nax = !ups && v >= 18 ? alma__attr_ints(n, "axes", &ax) : 0;
  if (nax > r) return 0;
  if (nax > 0) {
    na = nax;
    for (int i = 0; i < na; i++) axes[i] = (int)(ax[i] < 0 ? ax[i] + r : ax[i]);
  }
  dn_val *t = sc ? sc : sz;
  if (alma__numel(t->t.rank, t->t.dims) != na) return 0;
  for (int i = 0; i < na; i++) {
    if (axes[i] < 0 || axes[i] >= r) return 0;
    if (sc) q->scale[axes[i]] = alma__get_f64(t->t.data, t->t.dtype, i);
    else q->scale[axes[i]] = x->dims[axes[i]] ? (double)((const int64_t *)t->t.data)[i] / (double)x->dims[axes[i]] : 1.0;
    if (!(q->scale[axes[i]] > 0)) return 0;
  }
  if (ups) {
    q->ctm = RS_UPSAMPLE;
    return 1;
  }
  if (v < 11) { /* Resize-10: asymmetric; nearest rounds up when shrinking an axis, down otherwise */
    q->ctm = RS_ASYM;
    for (int i = 0; i < r; i++) q->nmode[i] = q->scale[i] < 1.0 ? RS_CEIL : RS_FLOOR;
    return 1;
  }
  static const char *const ctms[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                     "asymmetric", "tf_half_pixel_for_nn"};
  static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  const char *cs = alma__attr_s(n, "coordinate_transformation_mode", "half_pixel");
  const char *ns = alma__attr_s(n, "nearest_mode", "round_prefer_floor");
  q->ctm = -1;
  for (int i = 0; i < 6; i++)
    if (!strcmp(cs, ctms[i])) q->ctm = i;
  int nm = -1;
  for (int i = 0; i < 4; i++)
    if (!strcmp(ns, nms[i])) nm = i;
  if (q->ctm < 0 || nm < 0) return 0;
  for (int i = 0; i < r; i++) q->nmode[i] = nm;
  (void)os;
  return 1;
}

/* ONNX's samples and weights for output coordinate o of axis d (as src/ops/resize.c and
 * extra_data.c compute them): two taps, one of weight 0 for nearest. */
static void rs_onnx_taps(const rs_onnx *q, int d, int64_t in, int64_t out, int64_t o, int64_t *i, double *w) {
  double s = q->scale[d], xd = (double)o, fin = (double)in, ow = s * fin, xo;
  if (q->ctm == RS_UPSAMPLE) { /* asymmetric, clamped to the last sample */
    double c = xd / s > fin - 1 ? fin - 1 : xd / s, f = floor(c);
    i[0] = (int64_t)f;
    i[1] = i[0] + 1 < in ? i[0] + 1 : in - 1;
    w[1] = q->linear ? c - f : 0;
    w[0] = 1 - w[1];
    return;
  }
  if (!q->linear) { /* nearest picks its pixel in float32, as resize.c does (ONNX Runtime's rounding) */
    float sf = (float)s, xf = (float)o, inf = (float)in, owf = sf * inf;
    switch (q->ctm) {
      case RS_ALIGN: xo = owf == 1 ? 0.0 : (double)(xf * (inf - 1) / (owf - 1)); break;
      case RS_ASYM: xo = (double)(xf / sf); break;
      case RS_PYTORCH: xo = owf == 1 ? -0.5 : (double)((xf + 0.5f) / sf - 0.5f); break;
      case RS_TF_NN: xo = (double)((xf + 0.5f) / sf); break;
      case RS_HALF_PIXEL_SYM: {
        float adj = (float)out / owf, center = inf / 2;
        xo = (double)(center * (1 - adj) + (xf + 0.5f) / sf - 0.5f);
        break;
      }
      default: xo = (double)((xf + 0.5f) / sf - 0.5f); break;
    }
  } else {
    switch (q->ctm) {
      case RS_ALIGN: xo = ow == 1 ? 0.0 : xd * (fin - 1) / (ow - 1); break;
      case RS_ASYM: xo = xd / s; break;
      case RS_PYTORCH: xo = ow == 1 ? -0.5 : (xd + 0.5) / s - 0.5; break;
      case RS_TF_NN: xo = (xd + 0.5) / s; break;
      case RS_HALF_PIXEL_SYM: {
        double adj = (double)out / ow, center = fin / 2;
        xo = center * (1 - adj) + (xd + 0.5) / s - 0.5;
        break;
      }
      default: xo = (xd + 0.5) / s - 0.5; break;
    }
  }
  double fl = floor(xo), ratio = xo == fl ? 1.0 : xo - fl;
  int64_t base = (int64_t)fl - (xo == fl); /* the left neighbour */
  i[0] = base;
  i[1] = base + 1;
  if (q->linear) {
    w[0] = 1 - ratio;
    w[1] = ratio;
  } else {
    int right = 1;
    if (ratio != 1.0) {
      int mode = q->nmode[d];
      right = mode == RS_ROUND_FLOOR ? ratio > 0.5 : mode == RS_ROUND_CEIL ? ratio >= 0.5 : mode == RS_CEIL;
    }
    w[0] = !right;
    w[1] = right;
  }
  for (int k = 0; k < 2; k++) i[k] = i[k] < 0 ? 0 : i[k] >= in ? in - 1 : i[k];
}

/* oneDNN's samples and weights (its reference and jit kernels share these formulas). */
static void rs_dnnl_taps(int linear, int64_t in, int64_t out, int64_t o, int64_t *i, double *w) {
  float s = ((float)o + 0.5f) * (float)in / (float)out - 0.5f;
  if (!linear) {
    i[0] = i[1] = (int64_t)roundf(s);
    w[0] = 1, w[1] = 0;
    return;
  }
  int64_t t = (int64_t)s;
  i[0] = t < 0 ? 0 : t;
  i[1] = s < 0 ? 0 : (float)t == s ? t : t + 1;
  if (i[1] > in - 1) i[1] = in - 1;
  w[1] = fabsf(s - (float)i[0]);
  w[0] = 1 - w[1];
}

/* Both taps put the same weight on every sample. */
static int rs_taps_agree(const int64_t *ia, const double *wa, const int64_t *ib, const double *wb, int64_t in) {
  const int64_t all[4] = {ia[0], ia[1], ib[0], ib[1]};
  for (int k = 0; k < 4; k++) {
    if (all[k] < 0 || all[k] >= in) return 0;
    double a = (ia[0] == all[k] ? wa[0] : 0) + (ia[1] == all[k] ? wa[1] : 0);
    double b = (ib[0] == all[k] ? wb[0] : 0) + (ib[1] == all[k] ? wb[1] : 0);
    if (fabs(a - b) > 1e-6) return 0;
  }
  return 1;
}

static int rs_agree(const rs_onnx *q, const alma_tensor *x, const alma_tensor *os) {
  for (int d = 0; d < x->rank; d++) {
    int64_t in = x->dims[d], out = os->dims[d];
    if (d < 2 && in != out) return 0; /* oneDNN resamples only the spatial axes */
    for (int64_t o = 0; o < out; o++) {
      int64_t ia[2], ib[2] = {o, o};
      double wa[2], wb[2] = {1, 0};
      rs_onnx_taps(q, d, in, out, o, ia, wa);
      if (d >= 2) rs_dnnl_taps(q->linear, in, out, o, ib, wb);
      if (!rs_taps_agree(ia, wa, ib, wb, in)) return 0;
    }
  }
  return 1;
}

alma_status alma__dn_run_resample(dn_plan *p, int idx, dn_val **in, int nin, const alma_tensor *os, dn_val **out,
                                  int *done) {
  const alma_node *n = &p->g->nodes[idx];
  dn_node *d = &p->nodes[idx];
  dn_prim *pr = alma__dn_get_prim(d, DN_PRIM_SINGLE);
  if (!pr) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  dn_val *x = in[0];
  int r = x ? x->t.rank : 0;
  if (!alma__dn_is_fp(x) || r < 3 || r > 5 || os[0].rank != r || os[0].dtype != x->t.dtype) return ALMA_OK;
  for (int k = 1; k < nin && k < 4; k++) /* roi, scales, sizes: small, plain */
    if (in[k] && in[k]->live) ALMA_TRY(alma__dn_val_plain(p, in[k], n));
  rs_onnx q;
  if (!rs_read(n, in, nin, &x->t, &os[0], &q)) return ALMA_OK;
  int agree = rs_agree(&q, &x->t, &os[0]);
  dnnl_memory_desc_t key[2];
  int64_t ikey[8] = {q.linear, !agree};
  alma__dn_val_md(x, &key[0]);
  alma__dn_plain_md_of(&key[1], r, os[0].dims, x->t.dtype);
  if (!alma__dn_key_match(pr, 2, key, ikey)) {
    alma__dn_prim_begin(pr, 2, key, ikey);
    if (!agree) return alma__dn_prim_decline(pr, n, "ONNX's sample coordinates are not oneDNN's for these sizes and scales");
    dnnl_dims_t dd;
    for (int i = 0; i < r; i++) dd[i] = os[0].dims[i];
    dnnl_memory_desc_t d_any;
    dnnl_memory_desc_init_by_tag(&d_any, r, dd, alma__dn_dtype(x->t.dtype), dnnl_format_tag_any);
    dnnl_resampling_desc_t rd;
    if (dnnl_resampling_forward_desc_init(&rd, dnnl_forward_inference,
                                          q.linear ? dnnl_resampling_linear : dnnl_resampling_nearest, NULL, &key[0],
                                          &d_any) != dnnl_success)
      return alma__dn_prim_decline(pr, n, "resampling descriptor rejected");
    if (!alma__dn_prim_pd(p, pr, n, &rd, NULL, "resampling") ||
        !alma__dn_prim_args(p, pr, n, 2, (dn_arg[]){{DNNL_ARG_SRC, &key[0]}, {DNNL_ARG_DST, NULL}}))
      return ALMA_OK;
  }
  if (pr->declined) return ALMA_OK;
  dn_buf *db = alma__dn_alloc(p, dnnl_memory_desc_get_size(&pr->dst_md));
  if (!db) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  void *ptrs[DN_MAX_MEM] = {x->has_blk ? x->bbuf->ptr : x->t.data, db->ptr};
  alma_status st = alma__dn_exec(p, pr, pr->p, ptrs, n);
  return alma__dn_finish(p, st, db, out[0], &os[0], &pr->dst_md, done);
}

#endif
