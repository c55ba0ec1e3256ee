/* Detection and spatial-sampling operators: NonMaxSuppression, RoiAlign, GridSample, AffineGrid.
 *
 * The sampling kernels are written once and compiled for float (float32, and float16/bfloat16
 * through float32 copies) and for double (float64): this file includes itself with XD_REAL set,
 * the way rnn.c does, so the float32 path is a plain typed loop. Semantics follow the ONNX
 * reference implementation (itself onnxruntime's and PyTorch's kernels); the details that matter
 * are noted where they are implemented. */
#ifndef XD_REAL

#include <math.h>

#include "ops/nn_util.h"
#include "ops/op_args.h"

/* ---- configurations shared by both instantiations ----------------------------------------- */
enum { GS_NEAREST, GS_LINEAR, GS_CUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

typedef struct {
  int64_t N, C, P; /* batch, channels, output points per (n, c) */
  int nsp;         /* spatial dims */
  int64_t in[ALMA_MAX_RANK];
  int mode, padding, align;
} gs_cfg;

typedef struct {
  int64_t R, C, H, W, N; /* rois, channels, height, width, batch */
  int64_t ph, pw, sampling;
  double scale;
  int half_pixel, max_mode;
} ra_cfg;

typedef struct {
  int64_t N;
  int nsp; /* 2 or 3 */
  int64_t sz[3];
  int align;
} ag_cfg;

/* Reflects x into [lo, hi] by bouncing off the borders (PyTorch's reflect_coordinates). */
static double xd_reflect(double x, double lo, double hi) {
  double rng = hi - lo;
  if (!(rng > 0)) return lo;
  if (x < lo) {
    double dx = lo - x;
    int64_t k = (int64_t)(dx / rng);
    double r = dx - (double)k * rng;
    return k % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi;
    int64_t k = (int64_t)(dx / rng);
    double r = dx - (double)k * rng;
    return k % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

#define XD_REAL float
#define XD(name) name##_f32
#include "ops/extra_detect.c"
#undef XD_REAL
#undef XD
#define XD_REAL double
#define XD(name) name##_f64
#include "ops/extra_detect.c"
#undef XD_REAL
#undef XD

/* Runs a float kernel on inputs converted to float32 (or double for float64 data): in[k] are
 * borrowed when they already have the type, out is written through a scratch buffer otherwise. */
typedef struct {
  const void *p[4];
  int owned[4];
  void *y;
  int y_owned;
} xd_bufs;

static alma_status xd_prepare(const alma_node *n, int dbl, const alma_tensor *const *ts, int nt, alma_tensor *y,
                              xd_bufs *b) {
  memset(b, 0, sizeof *b);
  for (int i = 0; i < nt; i++) {
    b->p[i] = dbl ? (const void *)alma__nn_as_f64(ts[i], &b->owned[i]) : (const void *)alma__nn_as_f32(ts[i], &b->owned[i]);
    if (!b->p[i]) return alma__error_prefix(ALMA_ERR_NOMEM, "node '%s' (%s): ", n->name, n->op_type);
  }
  alma_dtype want = dbl ? ALMA_DTYPE_FLOAT64 : ALMA_DTYPE_FLOAT32;
  if (y->dtype == want) {
    b->y = y->data;
  } else {
    b->y = alma__nn_alloc(n, (size_t)alma_tensor_numel(y), dbl ? sizeof(double) : sizeof(float));
    if (!b->y) return ALMA_ERR_NOMEM;
    b->y_owned = 1;
  }
  return ALMA_OK;
}

static void xd_finish(int dbl, alma_tensor *y, xd_bufs *b, int ok) {
  if (b->y_owned) {
    if (ok) {
      if (dbl) alma__nn_store_f64(y, b->y);
      else alma__nn_store_f32(y, b->y);
    }
    free(b->y);
  }
  for (int i = 0; i < 4; i++)
    if (b->owned[i]) free((void *)b->p[i]);
}

static int is_float_type(alma_dtype t) { return alma__dtype_is_float(t); }

/* ==== NonMaxSuppression =========================================================================
 * Per batch and class: candidates with score > score_threshold (when given), taken in decreasing
 * score (ties: lower box index first), each kept unless its IoU with a kept box exceeds
 * iou_threshold, up to max_output_boxes_per_class (0 or omitted: none). Output rows are
 * [batch, class, box], in that loop order. IoU is computed in float, as the reference does. */
typedef struct {
  int64_t B, N, C, max_out;
  float iou, score;
  int has_score, center;
} nms_cfg;

static alma_status nms_read(const alma_node *n, const alma_tensor *const *in, int nin, nms_cfg *c, int need_data) {
  const alma_tensor *bx = in[0], *sc = alma__nn_in(in, nin, 1), *mo = alma__nn_in(in, nin, 2), *it = alma__nn_in(in, nin, 3),
                    *st = alma__nn_in(in, nin, 4);
  if (!sc) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "scores is required");
  if (bx->dtype != ALMA_DTYPE_FLOAT32 || sc->dtype != ALMA_DTYPE_FLOAT32)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "boxes/scores dtypes %s/%s (expects float32)",
                          alma_dtype_name(bx->dtype), alma_dtype_name(sc->dtype));
  char s1[128], s2[128];
  if (bx->rank != 3 || bx->dims[2] != 4 || sc->rank != 3 || sc->dims[0] != bx->dims[0] || sc->dims[2] != bx->dims[1])
    return alma__op_error(n, ALMA_ERR_SHAPE, "boxes %s and scores %s (expects [B, N, 4] and [B, C, N])",
                          alma__shape_str(bx->rank, bx->dims, s1, sizeof s1), alma__shape_str(sc->rank, sc->dims, s2, sizeof s2));
  int64_t cp = alma__attr_i(n, "center_point_box", 0);
  if (cp != 0 && cp != 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "center_point_box=%lld (expects 0 or 1)", (long long)cp);
  c->B = bx->dims[0], c->N = bx->dims[1], c->C = sc->dims[1], c->center = (int)cp;
  if (mo && mo->dtype != ALMA_DTYPE_INT64)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "max_output_boxes_per_class dtype %s (expects int64)", alma_dtype_name(mo->dtype));
  if (mo && alma_tensor_numel(mo) > 1)
    return alma__op_error(n, ALMA_ERR_SHAPE, "max_output_boxes_per_class has %lld values (expects one)", (long long)alma_tensor_numel(mo));
  const alma_tensor *th[2] = {it, st};
  for (int k = 0; k < 2; k++) {
    if (!th[k]) continue;
    if (th[k]->dtype != ALMA_DTYPE_FLOAT32)
      return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "%s dtype %s (expects float32)", k ? "score_threshold" : "iou_threshold",
                            alma_dtype_name(th[k]->dtype));
    if (alma_tensor_numel(th[k]) > 1)
      return alma__op_error(n, ALMA_ERR_SHAPE, "%s has %lld values (expects one)", k ? "score_threshold" : "iou_threshold",
                            (long long)alma_tensor_numel(th[k]));
  }
  if (!need_data) return ALMA_OK;
  if ((mo && !mo->data) || (it && !it->data) || (st && !st->data)) return alma__need_value();
  if (c->B * c->N * c->C > 0 && (!bx->data || !sc->data)) return alma__need_value();
  c->max_out = mo && alma_tensor_numel(mo) ? ((const int64_t *)mo->data)[0] : 0;
  if (c->max_out < 0) c->max_out = 0;
  c->iou = it && alma_tensor_numel(it) ? ((const float *)it->data)[0] : 0.0f;
  if (!(c->iou >= 0 && c->iou <= 1))
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "iou_threshold %g outside [0, 1]", c->iou);
  c->has_score = st && alma_tensor_numel(st);
  c->score = c->has_score ? ((const float *)st->data)[0] : 0.0f;
  return ALMA_OK;
}

/* Box corners as (ymin, xmin, ymax, xmax) whichever way they were given. */
static void nms_corners(const float *b, int center, float *r) {
  if (center) {
    float hw = b[2] / 2, hh = b[3] / 2;
    r[0] = b[1] - hh, r[1] = b[0] - hw, r[2] = b[1] + hh, r[3] = b[0] + hw;
  } else {
    r[0] = fminf(b[0], b[2]), r[1] = fminf(b[1], b[3]), r[2] = fmaxf(b[0], b[2]), r[3] = fmaxf(b[1], b[3]);
  }
}

static int nms_suppress(const float *a, const float *b, float thr) {
  float ix0 = fmaxf(a[1], b[1]), ix1 = fminf(a[3], b[3]);
  if (ix1 <= ix0) return 0;
  float iy0 = fmaxf(a[0], b[0]), iy1 = fminf(a[2], b[2]);
  if (iy1 <= iy0) return 0;
  float inter = (ix1 - ix0) * (iy1 - iy0);
  float a1 = (a[3] - a[1]) * (a[2] - a[0]), a2 = (b[3] - b[1]) * (b[2] - b[0]);
  float uni = a1 + a2 - inter;
  if (inter <= 0 || a1 <= 0 || a2 <= 0 || uni <= 0) return 0;
  return inter / uni > thr;
}

typedef struct {
  float s;
  int64_t i;
} nms_cand;

static int nms_cand_cmp(const void *pa, const void *pb) {
  const nms_cand *a = pa, *b = pb;
  if (a->s != b->s) return a->s > b->s ? -1 : 1;
  return a->i < b->i ? -1 : a->i > b->i;
}

/* Runs NMS; writes rows into sel (when not NULL) and returns the count through *count. */
static alma_status nms_run(const alma_node *n, const nms_cfg *c, const float *boxes, const float *scores, int64_t *sel,
                           int64_t *count) {
  *count = 0;
  if (c->max_out == 0 || c->N == 0) return ALMA_OK;
  nms_cand *cand = alma__nn_alloc(n, (size_t)c->N, sizeof *cand);
  float *corn = alma__nn_alloc(n, (size_t)c->N * 4, sizeof(float));
  int64_t *kept = alma__nn_alloc(n, (size_t)c->N, sizeof(int64_t));
  if (!cand || !corn || !kept) {
    free(cand), free(corn), free(kept);
    return ALMA_ERR_NOMEM;
  }
  int64_t total = 0;
  for (int64_t b = 0; b < c->B; b++) {
    for (int64_t i = 0; i < c->N; i++) nms_corners(boxes + (b * c->N + i) * 4, c->center, corn + i * 4);
    for (int64_t k = 0; k < c->C; k++) {
      const float *s = scores + (b * c->C + k) * c->N;
      int64_t m = 0;
      for (int64_t i = 0; i < c->N; i++)
        if (!c->has_score || s[i] > c->score) cand[m].s = s[i], cand[m++].i = i;
      qsort(cand, (size_t)m, sizeof *cand, nms_cand_cmp);
      int64_t nk = 0;
      for (int64_t j = 0; j < m && nk < c->max_out; j++) {
        int keep = 1;
        for (int64_t q = 0; q < nk && keep; q++)
          if (nms_suppress(corn + cand[j].i * 4, corn + kept[q] * 4, c->iou)) keep = 0;
        if (!keep) continue;
        kept[nk++] = cand[j].i;
        if (sel) sel[total * 3] = b, sel[total * 3 + 1] = k, sel[total * 3 + 2] = cand[j].i;
        total++;
      }
    }
  }
  free(cand), free(corn), free(kept);
  *count = total;
  return ALMA_OK;
}

static alma_status nms_infer(INFER_ARGS) {
  nms_cfg c;
  ALMA_TRY(nms_read(n, in, nin, &c, 0));
  ALMA_TRY(nms_read(n, in, nin, &c, 1));
  int64_t cnt;
  ALMA_TRY(nms_run(n, &c, in[0]->data, in[1]->data, NULL, &cnt));
  int64_t dims[2] = {cnt, 3};
  alma__set_shape(&out[0], ALMA_DTYPE_INT64, 2, dims);
  return ALMA_OK;
}

static alma_status nms_exec(EXEC_ARGS) {
  nms_cfg c;
  ALMA_TRY(nms_read(n, in, nin, &c, 1));
  int64_t cnt;
  ALMA_TRY(nms_run(n, &c, in[0]->data, in[1]->data, out[0].data, &cnt));
  if (cnt != out[0].dims[0]) return alma__op_error(n, ALMA_ERR_INTERNAL, "input changed between infer and exec");
  return ALMA_OK;
}

const alma_op_def alma__op_NonMaxSuppression = {.name = "NonMaxSuppression", .domain = "", .versions = {10, 11},
                                                .min_inputs = 2, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
                                                .infer = nms_infer, .exec = nms_exec};

/* ==== RoiAlign ==================================================================================
 * Opset 10 had no coordinate_transformation_mode and behaved as output_half_pixel; 16 added it
 * with default half_pixel. Max mode takes the maximum of the weighted corner values (w * v), as
 * onnxruntime and the ONNX reference do, not the maximum of the interpolated samples. */
static alma_status ra_read(const alma_node *n, const alma_tensor *const *in, int nin, ra_cfg *c) {
  const alma_tensor *x = in[0], *rois = alma__nn_in(in, nin, 1), *bi = alma__nn_in(in, nin, 2);
  if (!rois || !bi) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "rois and batch_indices are required");
  if (!is_float_type(x->dtype) || rois->dtype != x->dtype)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "X/rois dtypes %s/%s (expects the same float type)",
                          alma_dtype_name(x->dtype), alma_dtype_name(rois->dtype));
  if (bi->dtype != ALMA_DTYPE_INT64)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "batch_indices dtype %s (expects int64)", alma_dtype_name(bi->dtype));
  char s[128];
  if (x->rank != 4) return alma__op_error(n, ALMA_ERR_SHAPE, "X %s (expects [N, C, H, W])", alma__shape_str(x->rank, x->dims, s, sizeof s));
  if (rois->rank != 2 || rois->dims[1] != 4)
    return alma__op_error(n, ALMA_ERR_SHAPE, "rois %s (expects [num_rois, 4])", alma__shape_str(rois->rank, rois->dims, s, sizeof s));
  if (bi->rank != 1 || bi->dims[0] != rois->dims[0])
    return alma__op_error(n, ALMA_ERR_SHAPE, "batch_indices %s for %lld rois", alma__shape_str(bi->rank, bi->dims, s, sizeof s),
                          (long long)rois->dims[0]);
  const char *mode = alma__attr_s(n, "mode", "avg");
  if (strcmp(mode, "avg") && strcmp(mode, "max"))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "mode='%s' (expects avg or max)", mode);
  c->max_mode = !strcmp(mode, "max");
  c->half_pixel = 0;
  if (n->since_version >= 16) {
    const char *ct = alma__attr_s(n, "coordinate_transformation_mode", "half_pixel");
    if (!strcmp(ct, "half_pixel")) c->half_pixel = 1;
    else if (strcmp(ct, "output_half_pixel"))
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "coordinate_transformation_mode='%s' (expects half_pixel or output_half_pixel)", ct);
  }
  c->ph = alma__attr_i(n, "output_height", 1);
  c->pw = alma__attr_i(n, "output_width", 1);
  c->sampling = alma__attr_i(n, "sampling_ratio", 0);
  c->scale = alma__attr_f(n, "spatial_scale", 1.0f);
  if (c->ph < 1 || c->pw < 1 || c->ph > (1 << 20) || c->pw > (1 << 20))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "output size %lldx%lld", (long long)c->ph, (long long)c->pw);
  if (c->sampling < 0 || c->sampling > (1 << 20))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "sampling_ratio=%lld", (long long)c->sampling);
  if (!isfinite(c->scale)) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "spatial_scale=%g", c->scale);
  c->R = rois->dims[0], c->N = x->dims[0], c->C = x->dims[1], c->H = x->dims[2], c->W = x->dims[3];
  return ALMA_OK;
}

static alma_status ra_infer(INFER_ARGS) {
  ra_cfg c;
  ALMA_TRY(ra_read(n, in, nin, &c));
  int64_t dims[4] = {c.R, c.C, c.ph, c.pw};
  alma__set_shape(&out[0], in[0]->dtype, 4, dims);
  return ALMA_OK;
}

static alma_status ra_exec(EXEC_ARGS) {
  ra_cfg c;
  ALMA_TRY(ra_read(n, in, nin, &c));
  const int64_t *bi = in[2]->data;
  for (int64_t r = 0; r < c.R; r++)
    if (bi[r] < 0 || bi[r] >= c.N)
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "batch_indices[%lld]=%lld outside [0, %lld)", (long long)r,
                            (long long)bi[r], (long long)c.N);
  if (alma_tensor_numel(&out[0]) == 0) return ALMA_OK;
  int dbl = in[0]->dtype == ALMA_DTYPE_FLOAT64;
  xd_bufs b;
  const alma_tensor *ts[2] = {in[0], in[1]};
  alma_status st = xd_prepare(n, dbl, ts, 2, &out[0], &b);
  if (st == ALMA_OK) st = dbl ? ra_run_f64(n, &c, b.p[0], b.p[1], bi, b.y) : ra_run_f32(n, &c, b.p[0], b.p[1], bi, b.y);
  xd_finish(dbl, &out[0], &b, st == ALMA_OK);
  return st;
}

const alma_op_def alma__op_RoiAlign = {.name = "RoiAlign", .domain = "", .versions = {10, 16, 22}, .min_inputs = 3,
                                       .max_inputs = 3, .min_outputs = 1, .max_outputs = 1, .infer = ra_infer,
                                       .exec = ra_exec};

/* ==== GridSample ================================================================================
 * Opset 16: 4-D input, modes bilinear|nearest|bicubic; opset 20: N-D, modes linear|nearest|cubic.
 * Grid [N, D1.., Dr, r] holds normalized coordinates in reverse dim order (x first). */
static alma_status gs_read(const alma_node *n, const alma_tensor *const *in, int nin, gs_cfg *c) {
  const alma_tensor *x = in[0], *g = alma__nn_in(in, nin, 1);
  if (!g) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "grid is required");
  if (!is_float_type(x->dtype) || !is_float_type(g->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "X/grid dtypes %s/%s (expects float types)", alma_dtype_name(x->dtype),
                          alma_dtype_name(g->dtype));
  const char *mode = alma__attr_s(n, "mode", n->since_version < 20 ? "bilinear" : "linear");
  int v16 = n->since_version < 20;
  if (!strcmp(mode, "nearest")) c->mode = GS_NEAREST;
  else if (!strcmp(mode, v16 ? "bilinear" : "linear")) c->mode = GS_LINEAR;
  else if (!strcmp(mode, v16 ? "bicubic" : "cubic")) c->mode = GS_CUBIC;
  else return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "mode='%s' (expects %s)", mode,
                             v16 ? "bilinear, nearest or bicubic" : "linear, nearest or cubic");
  const char *pm = alma__attr_s(n, "padding_mode", "zeros");
  if (!strcmp(pm, "zeros")) c->padding = GS_ZEROS;
  else if (!strcmp(pm, "border")) c->padding = GS_BORDER;
  else if (!strcmp(pm, "reflection")) c->padding = GS_REFLECTION;
  else return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "padding_mode='%s' (expects zeros, border or reflection)", pm);
  int64_t ac = alma__attr_i(n, "align_corners", 0);
  if (ac != 0 && ac != 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "align_corners=%lld (expects 0 or 1)", (long long)ac);
  c->align = (int)ac;
  char s1[128], s2[128];
  if (x->rank < 3 || (v16 && x->rank != 4) || g->rank != x->rank || g->dims[0] != x->dims[0] || g->dims[g->rank - 1] != x->rank - 2)
    return alma__op_error(n, ALMA_ERR_SHAPE, "X %s and grid %s (expects [N, C, D1..Dr] and [N, H1..Hr, r]%s)",
                          alma__shape_str(x->rank, x->dims, s1, sizeof s1), alma__shape_str(g->rank, g->dims, s2, sizeof s2),
                          v16 ? ", 4-D before opset 20" : "");
  c->nsp = x->rank - 2;
  c->N = x->dims[0], c->C = x->dims[1];
  c->P = alma__numel(g->rank - 2, g->dims + 1);
  for (int d = 0; d < c->nsp; d++) c->in[d] = x->dims[d + 2];
  return ALMA_OK;
}

static alma_status gs_infer(INFER_ARGS) {
  gs_cfg c;
  ALMA_TRY(gs_read(n, in, nin, &c));
  const alma_tensor *x = in[0], *g = in[1];
  int64_t dims[ALMA_MAX_RANK];
  dims[0] = x->dims[0], dims[1] = x->dims[1];
  for (int d = 1; d < g->rank - 1; d++) dims[d + 1] = g->dims[d];
  alma__set_shape(&out[0], x->dtype, x->rank, dims);
  return ALMA_OK;
}

static alma_status gs_exec(EXEC_ARGS) {
  gs_cfg c;
  ALMA_TRY(gs_read(n, in, nin, &c));
  if (alma_tensor_numel(&out[0]) == 0) return ALMA_OK;
  for (int d = 0; d < c.nsp; d++)
    if (c.in[d] == 0) return ALMA_OK; /* nothing to sample: zeros (border/reflection have no pixel either) */
  int dbl = in[0]->dtype == ALMA_DTYPE_FLOAT64;
  xd_bufs b;
  const alma_tensor *ts[2] = {in[0], in[1]};
  alma_status st = xd_prepare(n, dbl, ts, 2, &out[0], &b);
  if (st == ALMA_OK) st = dbl ? gs_run_f64(n, &c, b.p[0], b.p[1], b.y) : gs_run_f32(n, &c, b.p[0], b.p[1], b.y);
  xd_finish(dbl, &out[0], &b, st == ALMA_OK);
  return st;
}

const alma_op_def alma__op_GridSample = {.name = "GridSample", .domain = "", .versions = {16, 20, 22},
                                         .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                         .infer = gs_infer, .exec = gs_exec};

/* ==== AffineGrid ================================================================================
 * theta [N, 2, 3] (2-D) or [N, 3, 4] (3-D) and size [N, C, H, W] or [N, C, D, H, W] give the
 * sampling grid [N, H, W, 2] / [N, D, H, W, 3] of GridSample: base coordinates in [-1, 1] (pixel
 * centres unless align_corners) transformed by theta. */
static alma_status ag_read(const alma_node *n, const alma_tensor *const *in, int nin, ag_cfg *c) {
  const alma_tensor *th = in[0], *sz = alma__nn_in(in, nin, 1);
  if (!sz) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "size is required");
  if (!is_float_type(th->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "theta dtype %s (expects a float type)", alma_dtype_name(th->dtype));
  if (sz->dtype != ALMA_DTYPE_INT64)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "size dtype %s (expects int64)", alma_dtype_name(sz->dtype));
  int64_t ac = alma__attr_i(n, "align_corners", 0);
  if (ac != 0 && ac != 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "align_corners=%lld (expects 0 or 1)", (long long)ac);
  c->align = (int)ac;
  char s[128];
  if (th->rank != 3 || !((th->dims[1] == 2 && th->dims[2] == 3) || (th->dims[1] == 3 && th->dims[2] == 4)))
    return alma__op_error(n, ALMA_ERR_SHAPE, "theta %s (expects [N, 2, 3] or [N, 3, 4])", alma__shape_str(th->rank, th->dims, s, sizeof s));
  c->nsp = (int)th->dims[1];
  c->N = th->dims[0];
  if (sz->rank != 1 || sz->dims[0] != c->nsp + 2)
    return alma__op_error(n, ALMA_ERR_SHAPE, "size has %lld values (expects %d for theta %s)", (long long)alma_tensor_numel(sz),
                          c->nsp + 2, alma__shape_str(th->rank, th->dims, s, sizeof s));
  if (!sz->data) return alma__need_value();
  const int64_t *v = sz->data;
  if (v[0] != c->N) return alma__op_error(n, ALMA_ERR_SHAPE, "size N=%lld but theta has %lld", (long long)v[0], (long long)c->N);
  for (int d = 0; d < c->nsp + 2; d++)
    if (v[d] < 0 || v[d] > ((int64_t)1 << 40))
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "size[%d]=%lld", d, (long long)v[d]);
  for (int d = 0; d < c->nsp; d++) c->sz[d] = v[d + 2];
  return ALMA_OK;
}

static alma_status ag_infer(INFER_ARGS) {
  ag_cfg c;
  ALMA_TRY(ag_read(n, in, nin, &c));
  int64_t dims[5];
  dims[0] = c.N;
  for (int d = 0; d < c.nsp; d++) dims[d + 1] = c.sz[d];
  dims[c.nsp + 1] = c.nsp;
  alma__set_shape(&out[0], in[0]->dtype, c.nsp + 2, dims);
  return ALMA_OK;
}

static alma_status ag_exec(EXEC_ARGS) {
  ag_cfg c;
  ALMA_TRY(ag_read(n, in, nin, &c));
  if (alma_tensor_numel(&out[0]) == 0) return ALMA_OK;
  int dbl = in[0]->dtype == ALMA_DTYPE_FLOAT64;
  xd_bufs b;
  const alma_tensor *ts[1] = {in[0]};
  alma_status st = xd_prepare(n, dbl, ts, 1, &out[0], &b);
  if (st == ALMA_OK) {
    if (dbl) ag_run_f64(&c, b.p[0], b.y);
    else ag_run_f32(&c, b.p[0], b.y);
  }
  xd_finish(dbl, &out[0], &b, st == ALMA_OK);
  return st;
}

const alma_op_def alma__op_AffineGrid = {.name = "AffineGrid", .domain = "", .versions = {20}, .min_inputs = 2,
                                         .max_inputs = 2, .min_outputs = 1, .max_outputs = 1, .infer = ag_infer,
                                         .exec = ag_exec};

#else /* ==== kernels, once per XD_REAL ========================================================= */

typedef XD_REAL XD(real);

/* ---- RoiAlign ---- */
static alma_status XD(ra_run)(const alma_node *n, const ra_cfg *c, const XD(real) *X, const XD(real) *rois,
                              const int64_t *bi, XD(real) *Y) {
  typedef XD(real) R;
  int64_t H = c->H, W = c->W;
  for (int64_t r = 0; r < c->R; r++) {
    const R *roi = rois + r * 4;
    R off = c->half_pixel ? (R)0.5 : (R)0;
    R sw = roi[0] * (R)c->scale - off, sh = roi[1] * (R)c->scale - off;
    R ew = roi[2] * (R)c->scale - off, eh = roi[3] * (R)c->scale - off;
    R rw = ew - sw, rh = eh - sh;
    if (!c->half_pixel) {
      /* malformed rois forced to 1x1 */
      if (rw < 1) rw = 1;
      if (rh < 1) rh = 1;
    }
    R bh = rh / (R)c->ph, bw = rw / (R)c->pw;
    /* adaptive grid: checked in double before the conversion (huge or NaN rois) */
    double dgh = c->sampling > 0 ? (double)c->sampling : ceil((double)rh / (double)c->ph);
    double dgw = c->sampling > 0 ? (double)c->sampling : ceil((double)rw / (double)c->pw);
    if (!(dgh <= (1 << 20)) || !(dgw <= (1 << 20)))
      return alma__op_error(n, ALMA_ERR_INVALID_ARG, "roi %lld needs a %gx%g sampling grid per bin", (long long)r, dgh, dgw);
    int64_t gh = dgh > 0 ? (int64_t)dgh : 0, gw = dgw > 0 ? (int64_t)dgw : 0;
    R count = (R)(gh * gw > 1 ? gh * gw : 1);
    const R *base = X + bi[r] * c->C * H * W;
    for (int64_t ch = 0; ch < c->C; ch++) {
      const R *img = base + ch * H * W;
      R *y = Y + (r * c->C + ch) * c->ph * c->pw;
      for (int64_t ph = 0; ph < c->ph; ph++)
        for (int64_t pw = 0; pw < c->pw; pw++) {
          R acc = 0;
          int first = 1;
          for (int64_t iy = 0; iy < gh; iy++) {
            R yy = sh + (R)ph * bh + ((R)iy + (R)0.5) * bh / (R)gh;
            for (int64_t ix = 0; ix < gw; ix++) {
              R xx = sw + (R)pw * bw + ((R)ix + (R)0.5) * bw / (R)gw;
              R v1 = 0, v2 = 0, v3 = 0, v4 = 0;
              /* samples more than one pixel outside the map contribute zero */
              if (yy >= -1 && yy <= (R)H && xx >= -1 && xx <= (R)W) { /* false for NaN too */
                R yv = yy < 0 ? 0 : yy, xv = xx < 0 ? 0 : xx;
                int64_t yl = (int64_t)yv, xl = (int64_t)xv, yh, xh;
                if (yl >= H - 1) yh = yl = H - 1, yv = (R)yl;
                else yh = yl + 1;
                if (xl >= W - 1) xh = xl = W - 1, xv = (R)xl;
                else xh = xl + 1;
                R ly = yv - (R)yl, lx = xv - (R)xl, hy = 1 - ly, hx = 1 - lx;
                v1 = hy * hx * img[yl * W + xl], v2 = hy * lx * img[yl * W + xh];
                v3 = ly * hx * img[yh * W + xl], v4 = ly * lx * img[yh * W + xh];
              }
              if (c->max_mode) {
                R m = fmax(fmax(v1, v2), fmax(v3, v4));
                acc = first ? m : fmax(acc, m);
                first = 0;
              } else {
                acc += v1 + v2 + v3 + v4;
              }
            }
          }
          y[ph * c->pw + pw] = c->max_mode ? acc : acc / count;
        }
    }
  }
  return ALMA_OK;
}

/* ---- GridSample ---- */

/* Index of tap i along a dim of length L under the padding mode; -1 reads as zero. */
static int64_t XD(gs_tap)(const gs_cfg *c, int64_t i, int64_t L, double lo, double hi) {
  if (c->padding == GS_ZEROS) return i >= 0 && i < L ? i : -1;
  if (c->padding == GS_BORDER) return i < 0 ? 0 : i >= L ? L - 1 : i;
  int64_t r = (int64_t)xd_reflect((double)i, lo, hi);
  return r < 0 ? 0 : r >= L ? L - 1 : r;
}

static void XD(gs_cubic)(XD(real) t, XD(real) *w) {
  typedef XD(real) R;
  const R A = (R)-0.75;
  R x = t + 1;
  w[0] = ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  x = t;
  w[1] = ((A + 2) * x - (A + 3)) * x * x + 1;
  x = 1 - t;
  w[2] = ((A + 2) * x - (A + 3)) * x * x + 1;
  x = 2 - t;
  w[3] = ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
}

static alma_status XD(gs_run)(const alma_node *n, const gs_cfg *c, const XD(real) *X, const XD(real) *G,
                              XD(real) *Y) {
  typedef XD(real) R;
  int nsp = c->nsp;
  int ntap = c->mode == GS_NEAREST ? 1 : c->mode == GS_LINEAR ? 2 : 4;
  int64_t ncomb = 1, plane = 1, xs[ALMA_MAX_RANK];
  for (int d = nsp - 1; d >= 0; d--) xs[d] = plane, plane *= c->in[d];
  for (int d = 0; d < nsp; d++) ncomb *= ntap;
  int64_t *coff = alma__nn_alloc(n, (size_t)ncomb, sizeof(int64_t));
  R *cw = alma__nn_alloc(n, (size_t)ncomb, sizeof(R));
  if (!coff || !cw) {
    free(coff), free(cw);
    return ALMA_ERR_NOMEM;
  }
  for (int64_t b = 0; b < c->N; b++)
    for (int64_t p = 0; p < c->P; p++) {
      const R *g = G + (b * c->P + p) * nsp;
      int64_t tidx[ALMA_MAX_RANK][4];
      R tw[ALMA_MAX_RANK][4];
      for (int d = 0; d < nsp; d++) {
        R v = g[nsp - 1 - d];
        int64_t L = c->in[d];
        R x = c->align ? (v + 1) / 2 * (R)(L - 1) : ((v + 1) * (R)L - 1) / 2;
        double lo = c->align ? 0.0 : -0.5, hi = c->align ? (double)(L - 1) : (double)L - 0.5;
        if (c->mode == GS_NEAREST) {
          /* half to even (std::nearbyint), in every rank: the ONNX test data for 3-D agrees */
          x = nearbyint(x);
        }
        if (isnan(x)) {
          /* NaN coordinates sample nothing */
          for (int t = 0; t < ntap; t++) tidx[d][t] = -1, tw[d][t] = 0;
          continue;
        }
        if (x < lo || x > hi) {
          if (c->padding == GS_BORDER) x = x < 0 ? 0 : x > (R)(L - 1) ? (R)(L - 1) : x;
          else if (c->padding == GS_REFLECTION) x = (R)xd_reflect((double)x, lo, hi);
        }
        /* far outside coordinates (zeros padding) read nothing; keeps the int conversion defined */
        if (!(fabs((double)x) < 4e18)) {
          for (int t = 0; t < ntap; t++) tidx[d][t] = -1, tw[d][t] = 0;
          continue;
        }
        if (c->mode == GS_NEAREST) {
          tidx[d][0] = XD(gs_tap)(c, (int64_t)x, L, lo, hi);
          tw[d][0] = 1;
        } else {
          int64_t x0 = (int64_t)floor(x);
          R t = x - (R)x0;
          if (c->mode == GS_LINEAR) {
            tw[d][0] = 1 - t, tw[d][1] = t;
            for (int k = 0; k < 2; k++) tidx[d][k] = XD(gs_tap)(c, x0 + k, L, lo, hi);
          } else {
            XD(gs_cubic)(t, tw[d]);
            for (int k = 0; k < 4; k++) tidx[d][k] = XD(gs_tap)(c, x0 - 1 + k, L, lo, hi);
          }
        }
      }
      /* the tensor product of the per-dim taps: offsets and weights, zero taps dropped */
      int64_t m = 0;
      for (int64_t k = 0; k < ncomb; k++) {
        int64_t r = k, off = 0;
        R w = 1;
        for (int d = nsp - 1; d >= 0; d--) {
          int t = (int)(r % ntap);
          r /= ntap;
          if (tidx[d][t] < 0) {
            off = -1;
            break;
          }
          off += tidx[d][t] * xs[d];
          w *= tw[d][t];
        }
        if (off >= 0) coff[m] = off, cw[m++] = w;
      }
      for (int64_t ch = 0; ch < c->C; ch++) {
        const R *img = X + (b * c->C + ch) * plane;
        R acc = 0;
        for (int64_t k = 0; k < m; k++) acc += cw[k] * img[coff[k]];
        Y[(b * c->C + ch) * c->P + p] = acc;
      }
    }
  free(coff), free(cw);
  return ALMA_OK;
}

/* ---- AffineGrid ---- */
static void XD(ag_run)(const ag_cfg *c, const XD(real) *theta, XD(real) *Y) {
  typedef XD(real) R;
  int nsp = c->nsp;
  int64_t cnt = 1;
  for (int d = 0; d < nsp; d++) cnt *= c->sz[d];
  for (int64_t b = 0; b < c->N; b++) {
    const R *th = theta + b * nsp * (nsp + 1);
    int64_t coord[3] = {0, 0, 0};
    for (int64_t i = 0; i < cnt; i++) {
      /* homogeneous base point in (x, y[, z]) order: x runs along the last dim */
      R h[4];
      for (int d = 0; d < nsp; d++) {
        int64_t L = c->sz[d], k = coord[d];
        R v = c->align ? (L > 1 ? (R)-1 + (R)2 * (R)k / (R)(L - 1) : (R)-1) : (R)-1 + (R)(2 * k + 1) / (R)L;
        h[nsp - 1 - d] = v;
      }
      h[nsp] = 1;
      for (int r = 0; r < nsp; r++) {
        R acc = 0;
        for (int k = 0; k <= nsp; k++) acc += th[r * (nsp + 1) + k] * h[k];
        Y[(b * cnt + i) * nsp + r] = acc;
      }
      for (int d = nsp - 1; d >= 0 && ++coord[d] == c->sz[d]; d--) coord[d] = 0;
    }
  }
}

#endif
