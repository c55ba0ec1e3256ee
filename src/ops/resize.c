/* Resize (opsets 10, 11, 13, 18, 19): nearest, N-d linear and cubic interpolation, with antialias
 * filters, every coordinate transformation mode, roi/extrapolation for tf_crop_and_resize, scales or
 * sizes, axes and keep_aspect_ratio_policy.
 *
 * The arithmetic mirrors the ONNX reference implementation (onnx/reference/ops/op_resize.py) that
 * produced the conformance data: per axis, an output coordinate maps to x_ori in the input; its
 * fractional part `ratio` lies in (0, 1] (an integral x_ori counts as ratio 1 from the left
 * neighbour); the mode gives n weights for the n nearest input positions, the input edge-padded by
 * n/2; exclude_outside drops and renormalizes weights of padded positions. Interpolation is
 * separable, so each output element is a sum over the per-axis tap products.
 *
 * Resize-10 has Upsample's semantics: asymmetric coordinates, output = floor(input * scale), and
 * for nearest the rule onnxruntime uses (ceil when downsampling that axis, floor otherwise). */
#include <math.h>

#include "ops/op.h"

enum { M_NEAREST, M_LINEAR, M_CUBIC };
enum { C_HALF_PIXEL, C_HALF_PIXEL_SYM, C_PYTORCH_HALF_PIXEL, C_ALIGN_CORNERS, C_ASYMMETRIC, C_TF_HALF_PIXEL_NN,
       C_TF_CROP_AND_RESIZE };
enum { N_ROUND_PREFER_FLOOR, N_ROUND_PREFER_CEIL, N_FLOOR, N_CEIL };

typedef struct {
  int rank;
  int64_t in[ALMA_MAX_RANK], out[ALMA_MAX_RANK];
  double scale[ALMA_MAX_RANK];
  double roi0[ALMA_MAX_RANK], roi1[ALMA_MAX_RANK];
  int nearest_mode[ALMA_MAX_RANK]; /* per axis (Resize-10 picks per axis) */
  int mode, ctm, antialias, exclude_outside;
  double cubic_a, extrap;
} rs_params;

static int pick(const char *s, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (!strcmp(s, names[i])) return i;
  return -1;
}

/* An input that is omitted or has no elements counts as absent (Resize-11 requires roi and scales
 * as inputs but lets them be empty). */
static const alma_tensor *opt_in(const alma_tensor *const *in, int nin, int i) {
  if (i >= nin || !in[i] || alma_tensor_numel(in[i]) == 0) return NULL;
  return in[i];
}

static alma_status resize_params(const alma_node *n, const alma_tensor *const *in, int nin, rs_params *p) {
  const alma_tensor *x = in[0];
  int r = x->rank, v = n->since_version;
  memset(p, 0, sizeof *p);
  p->rank = r;
  if (r < 1) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "input must have rank >= 1");
  for (int i = 0; i < r; i++) p->in[i] = x->dims[i];

  static const char *const modes[] = {"nearest", "linear", "cubic"};
  const char *ms = alma__attr_s(n, "mode", "nearest");
  p->mode = pick(ms, modes, v >= 11 ? 3 : 2);
  if (p->mode < 0) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "mode '%s'", ms);
  if (p->mode != M_NEAREST && !(alma__dtype_is_float(x->dtype) || alma__dtype_is_int(x->dtype)))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "%s mode on dtype %s", ms, alma_dtype_name(x->dtype));

  static const char *const ctms[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                     "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  const char *cs = v >= 11 ? alma__attr_s(n, "coordinate_transformation_mode", "half_pixel") : "asymmetric";
  p->ctm = pick(cs, ctms, 7);
  if (p->ctm < 0) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "coordinate_transformation_mode '%s'", cs);

  static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  const char *ns = alma__attr_s(n, "nearest_mode", "round_prefer_floor");
  int nm = pick(ns, nms, 4);
  if (nm < 0) return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "nearest_mode '%s'", ns);
  p->cubic_a = alma__attr_f(n, "cubic_coeff_a", -0.75f);
  p->exclude_outside = v >= 11 && alma__attr_i(n, "exclude_outside", 0) != 0;
  p->extrap = alma__attr_f(n, "extrapolation_value", 0.0f);
  p->antialias = v >= 18 && p->mode != M_NEAREST && alma__attr_i(n, "antialias", 0) != 0;

  /* axes (18): which dims the scales/sizes/roi entries refer to; the others keep their size */
  int axes[ALMA_MAX_RANK], naxes = r;
  for (int i = 0; i < r; i++) axes[i] = i;
  const int64_t *ax = NULL;
  int nax = v >= 18 ? alma__attr_ints(n, "axes", &ax) : 0;
  if (nax > 0) {
    if (nax > r) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%d axes for rank %d", nax, r);
    uint8_t seen[ALMA_MAX_RANK] = {0};
    for (int i = 0; i < nax; i++) {
      if (ax[i] < -r || ax[i] >= r)
        return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis %lld out of range for rank %d", (long long)ax[i], r);
      int a = (int)(ax[i] < 0 ? ax[i] + r : ax[i]);
      if (seen[a]) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis %lld repeated", (long long)ax[i]);
      seen[a] = 1;
      axes[i] = a;
    }
    naxes = nax;
  }

  const alma_tensor *roi = v >= 11 ? opt_in(in, nin, 1) : NULL;
  const alma_tensor *sc = opt_in(in, nin, v >= 11 ? 2 : 1);
  const alma_tensor *sz = v >= 11 ? opt_in(in, nin, 3) : NULL;
  if (!sc == !sz)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, sc ? "both scales and sizes are given" : "neither scales nor sizes is given");

  for (int i = 0; i < r; i++) p->scale[i] = 1.0, p->out[i] = p->in[i], p->roi0[i] = 0.0, p->roi1[i] = 1.0;
  if (sc) {
    if (!alma__dtype_is_float(sc->dtype))
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "scales must be float, got %s", alma_dtype_name(sc->dtype));
    if (alma_tensor_numel(sc) != naxes)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%lld scales for %d axes", (long long)alma_tensor_numel(sc), naxes);
    if (!sc->data) return alma__need_value();
    for (int i = 0; i < naxes; i++) {
      double s = alma__get_f64(sc->data, sc->dtype, i);
      if (!(s > 0) || isinf(s)) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "scale %g must be positive", s);
      /* The product in the scales' own precision, as ONNX Runtime (and Upsample here) computes it:
       * exporters write scale = float32(out / in) and rely on float32(scale * in) giving back out
       * (tf2onnx: 1.55f * 20 rounds to 31.0f; in double it is 30.999999, floored to 30). */
      double o = sc->dtype == ALMA_DTYPE_FLOAT64 ? floor(s * (double)p->in[axes[i]])
                                                 : floor((double)((float)s * (float)p->in[axes[i]]));
      if (o > (double)INT32_MAX * 64)
        return alma__op_error(n, ALMA_ERR_INVALID_ARG, "scale %g makes axis %d too large", s, axes[i]);
      p->scale[axes[i]] = s;
      p->out[axes[i]] = (int64_t)o;
    }
  } else {
    if (sz->dtype != ALMA_DTYPE_INT64)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "sizes must be int64, got %s", alma_dtype_name(sz->dtype));
    if (alma_tensor_numel(sz) != naxes)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%lld sizes for %d axes", (long long)alma_tensor_numel(sz), naxes);
    if (!sz->data) return alma__need_value();
    const int64_t *s = sz->data;
    for (int i = 0; i < naxes; i++) {
      int64_t in_d = p->in[axes[i]];
      if (s[i] < 0 || s[i] > (int64_t)INT32_MAX * 64)
        return alma__op_error(n, ALMA_ERR_INVALID_ARG, "size %lld out of range", (long long)s[i]);
      if (in_d == 0 && s[i] != 0)
        return alma__op_error(n, ALMA_ERR_INVALID_ARG, "cannot resize empty axis %d to %lld", axes[i], (long long)s[i]);
      p->out[axes[i]] = s[i];
      p->scale[axes[i]] = in_d ? (double)s[i] / (double)in_d : 1.0;
    }
    const char *kp = v >= 18 ? alma__attr_s(n, "keep_aspect_ratio_policy", "stretch") : "stretch";
    if (strcmp(kp, "stretch")) {
      int larger = !strcmp(kp, "not_smaller");
      if (!larger && strcmp(kp, "not_larger"))
        return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "keep_aspect_ratio_policy '%s'", kp);
      double s = p->scale[axes[0]];
      for (int i = 1; i < naxes; i++) s = larger ? fmax(s, p->scale[axes[i]]) : fmin(s, p->scale[axes[i]]);
      for (int i = 0; i < naxes; i++) {
        p->scale[axes[i]] = s;
        p->out[axes[i]] = (int64_t)(s * (double)p->in[axes[i]] + 0.5); /* round half up */
      }
    }
  }

  if (p->ctm == C_TF_CROP_AND_RESIZE) {
    if (!roi) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "tf_crop_and_resize needs roi");
    if (!alma__dtype_is_float(roi->dtype))
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "roi must be float, got %s", alma_dtype_name(roi->dtype));
    if (alma_tensor_numel(roi) != 2 * naxes)
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "roi has %lld values, expected %d",
                            (long long)alma_tensor_numel(roi), 2 * naxes);
    if (roi->data) {
      for (int i = 0; i < naxes; i++) {
        p->roi0[axes[i]] = alma__get_f64(roi->data, roi->dtype, i);
        p->roi1[axes[i]] = alma__get_f64(roi->data, roi->dtype, naxes + i);
      }
    }
  }

  for (int i = 0; i < r; i++) {
    p->nearest_mode[i] = nm;
    if (v < 11) p->nearest_mode[i] = p->scale[i] < 1.0 ? N_CEIL : N_FLOOR;
  }
  return ALMA_OK;
}

static alma_status resize_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out,
                                int nout) {
  const alma_tensor *x = in[0];
  if (!alma__dtype_is_float(x->dtype) && !alma__dtype_is_int(x->dtype) && x->dtype != ALMA_DTYPE_BOOL)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s", alma_dtype_name(x->dtype));
  rs_params p;
  alma_status st = resize_params(n, in, nin, &p);
  if (st != ALMA_OK) return st;
  alma__set_shape(&out[0], x->dtype, x->rank, p.out);
  return ALMA_OK;
}

/* ---- per-axis tap tables -------------------------------------------------------------------- */

typedef struct {
  int64_t *start;  /* [out + 1]: taps of coordinate x are [start[x], start[x+1]) */
  int64_t *off;    /* input offset (index * stride) of each tap */
  double *w;       /* weight of each tap */
  uint8_t *extrap; /* [out]: coordinate outside the crop (tf_crop_and_resize) */
} axis_taps;

static double cubic_w(double x, double A) {
  x = fabs(x);
  double x2 = x * x, x3 = x * x2;
  if (x <= 1) return (A + 2) * x3 - (A + 3) * x2 + 1;
  if (x < 2) return A * x3 - 5 * A * x2 + 8 * A * x - 4 * A;
  return 0.0;
}

/* Weights for the n positions nearest to a coordinate with fractional part `ratio` in (0, 1];
 * returns n (<= cap). */
static int coeffs(const rs_params *p, int axis, double ratio, double scale, double *c, int cap) {
  switch (p->mode) {
    case M_NEAREST: {
      int right; /* ratio 1 means an integral coordinate: the right position is exact */
      if (ratio == 1.0) right = 1;
      else {
        switch (p->nearest_mode[axis]) {
          case N_ROUND_PREFER_FLOOR: right = ratio > 0.5; break;
          case N_ROUND_PREFER_CEIL: right = ratio >= 0.5; break;
          case N_FLOOR: right = 0; break;
          default: right = 1; break;
        }
      }
      c[0] = !right, c[1] = right;
      return 2;
    }
    case M_LINEAR: {
      if (!p->antialias) {
        c[0] = 1 - ratio, c[1] = ratio;
        return 2;
      }
      double s = fmin(scale, 1.0);
      int start = (int)(floor(-1 / s) + 1);
      int nfoot = 2 - 2 * start;
      if (nfoot > cap) return -1;
      double sum = 0;
      for (int i = 0; i < nfoot; i++) {
        double a = ((double)(start + i) - ratio) * s;
        double w = 1 - fabs(a);
        c[i] = w < 0 ? 0 : w > 1 ? 1 : w;
        sum += c[i];
      }
      for (int i = 0; i < nfoot; i++) c[i] /= sum;
      return nfoot;
    }
    default: {
      double A = p->cubic_a;
      if (!p->antialias) {
        double r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
        c[0] = ((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A;
        c[1] = ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1;
        c[2] = ((A + 2) * q - (A + 3)) * q * q + 1;
        c[3] = ((A * q1 - 5 * A) * q1 + 8 * A) * q1 - 4 * A;
        return 4;
      }
      double s = fmin(scale, 1.0);
      int i0 = (int)(floor(-2 / s) + 1), i1 = 2 - i0;
      if (i1 - i0 > cap) return -1;
      double sum = 0;
      for (int i = i0; i < i1; i++) sum += (c[i - i0] = cubic_w(s * ((double)i - ratio), A));
      for (int i = 0; i < i1 - i0; i++) c[i] /= sum;
      return i1 - i0;
    }
  }
}

/* x_original in float32 arithmetic, for nearest mode: it floors or rounds the coordinate, so one
 * that is integral in exact arithmetic (13.5 / 1.35f) picks a different pixel in float64 (9.99..)
 * than in float32 (10.0f). ONNX Runtime and TensorFlow's own kernels compute in float32, and
 * exporters' graphs (tf2onnx's scale = float32(out / in)) rely on it. Same formulas as below. */
static double x_original_f32(const rs_params *p, int d, int64_t x) {
  float s = (float)p->scale[d], in = (float)p->in[d], ow = s * in, xd = (float)x;
  switch (p->ctm) {
    case C_ALIGN_CORNERS: return ow == 1 ? 0.0 : (double)(xd * (in - 1) / (ow - 1));
    case C_ASYMMETRIC: return (double)(xd / s);
    case C_TF_CROP_AND_RESIZE: {
      float r0 = (float)p->roi0[d], r1 = (float)p->roi1[d], xo;
      if (ow == 1) xo = (r1 - r0) * (in - 1) / 2;
      else xo = xd * (r1 - r0) * (in - 1) / (ow - 1);
      return (double)(xo + r0 * (in - 1));
    }
    case C_PYTORCH_HALF_PIXEL: return ow == 1 ? -0.5 : (double)((xd + 0.5f) / s - 0.5f);
    case C_TF_HALF_PIXEL_NN: return (double)((xd + 0.5f) / s);
    case C_HALF_PIXEL_SYM: {
      float adj = (float)p->out[d] / ow, center = in / 2, offset = center * (1 - adj);
      return (double)(offset + (xd + 0.5f) / s - 0.5f);
    }
    default: return (double)((xd + 0.5f) / s - 0.5f);
  }
}

/* The input coordinate of output coordinate x along one axis (the reference's formulas, including
 * its use of scale * input_size, not the rounded output size, as the output width). */
static double x_original(const rs_params *p, int d, int64_t x) {
  if (p->mode == M_NEAREST) return x_original_f32(p, d, x);
  double s = p->scale[d], in = (double)p->in[d], ow = s * in, xd = (double)x;
  switch (p->ctm) {
    case C_ALIGN_CORNERS: return ow == 1 ? 0.0 : xd * (in - 1) / (ow - 1);
    case C_ASYMMETRIC: return xd / s;
    case C_TF_CROP_AND_RESIZE: {
      double r0 = p->roi0[d], r1 = p->roi1[d], xo;
      if (ow == 1) xo = (r1 - r0) * (in - 1) / 2;
      else xo = xd * (r1 - r0) * (in - 1) / (ow - 1);
      return xo + r0 * (in - 1);
    }
    case C_PYTORCH_HALF_PIXEL: return ow == 1 ? -0.5 : (xd + 0.5) / s - 0.5;
    case C_TF_HALF_PIXEL_NN: return (xd + 0.5) / s;
    case C_HALF_PIXEL_SYM: {
      double adj = (double)p->out[d] / ow, center = in / 2, offset = center * (1 - adj);
      return offset + (xd + 0.5) / s - 0.5;
    }
    default: return (xd + 0.5) / s - 0.5;
  }
}

#define RS_MAX_TAPS 4096

static alma_status build_axis(const rs_params *p, int d, int64_t stride, axis_taps *t) {
  int64_t out = p->out[d], in = p->in[d];
  double c[RS_MAX_TAPS];
  /* first pass sizes the tables: taps per coordinate are bounded by the filter footprint */
  int64_t ntaps = 0;
  t->start = alma__malloc((size_t)(out + 1) * sizeof(int64_t));
  t->extrap = alma__calloc((size_t)out + 1, 1);
  if (!t->start || !t->extrap) return ALMA_ERR_NOMEM;
  int foot = coeffs(p, d, 0.5, p->scale[d], c, RS_MAX_TAPS);
  if (foot < 0) return alma__errorf(ALMA_ERR_UNSUPPORTED, "antialias filter wider than %d taps", RS_MAX_TAPS);
  t->off = alma__malloc((size_t)(out * foot + 1) * sizeof(int64_t));
  t->w = alma__malloc((size_t)(out * foot + 1) * sizeof(double));
  if (!t->off || !t->w) return ALMA_ERR_NOMEM;
  for (int64_t x = 0; x < out; x++) {
    t->start[x] = ntaps;
    double xo = x_original(p, d, x);
    if (p->ctm == C_TF_CROP_AND_RESIZE && (xo < 0 || xo > (double)(in - 1))) {
      t->extrap[x] = 1;
      continue;
    }
    double fl = floor(xo);
    double ratio = xo == fl ? 1.0 : xo - fl;
    int nc = coeffs(p, d, ratio, p->scale[d], c, RS_MAX_TAPS);
    if (nc < 0 || nc > foot) return alma__errorf(ALMA_ERR_INTERNAL, "resize filter footprint changed");
    int64_t m = nc / 2;
    int64_t base = (int64_t)fl - (xo == fl); /* the left neighbour: xo - ratio */
    /* the n nearest positions of the edge-padded axis (pad n/2), preferring lower ones */
    int64_t lo = base - m + 1;
    if (lo < -m) lo = -m;
    if (lo + nc - 1 > in - 1 + m) lo = in - 1 + m - (nc - 1);
    if (p->exclude_outside) {
      double sum = 0;
      for (int k = 0; k < nc; k++) {
        int64_t i = lo + k;
        if (i < 0 || i >= in) c[k] = 0;
        sum += c[k];
      }
      if (sum != 0)
        for (int k = 0; k < nc; k++) c[k] /= sum;
    }
    for (int k = 0; k < nc; k++) {
      if (c[k] == 0) continue; /* zero weights contribute nothing */
      int64_t i = lo + k;
      i = i < 0 ? 0 : i >= in ? in - 1 : i;
      /* merge taps that land on the same clamped position (edge padding) */
      if (ntaps > t->start[x] && t->off[ntaps - 1] == i * stride) {
        t->w[ntaps - 1] += c[k];
        continue;
      }
      t->off[ntaps] = i * stride;
      t->w[ntaps] = c[k];
      ntaps++;
    }
  }
  t->start[out] = ntaps;
  return ALMA_OK;
}

/* Output rows (all coordinates but the last) share their outer-axis taps: the product of those
 * taps is expanded once per row into (offset, weight) combinations, then every element of the row
 * sums its last-axis taps over them. */
static alma_status resize_rows(const rs_params *p, const axis_taps *t, const alma_tensor *x, alma_tensor *y) {
  int r = p->rank, last = r - 1;
  int64_t W = p->out[last];
  int64_t ncomb_max = 1;
  for (int d = 0; d < last; d++) {
    int64_t m = 0;
    for (int64_t c = 0; c < p->out[d]; c++) m = t[d].start[c + 1] - t[d].start[c] > m ? t[d].start[c + 1] - t[d].start[c] : m;
    if (m == 0) m = 1;
    if (ncomb_max > (INT64_C(1) << 24) / m) return alma__errorf(ALMA_ERR_UNSUPPORTED, "interpolation filter too large");
    ncomb_max *= m;
  }
  int64_t *coff = alma__malloc((size_t)ncomb_max * sizeof(int64_t));
  double *cw = alma__malloc((size_t)ncomb_max * sizeof(double));
  if (!coff || !cw) {
    free(coff), free(cw);
    return ALMA_ERR_NOMEM;
  }
  const axis_taps *tl = &t[last];
  int gather = 1; /* every last-axis coordinate reads one position with weight 1 */
  for (int64_t c = 0; c < W && gather; c++)
    if (tl->extrap[c] || tl->start[c + 1] - tl->start[c] != 1 || tl->w[tl->start[c]] != 1.0) gather = 0;
  size_t es = alma_dtype_size(x->dtype);
  const char *src = x->data;
  char *dst = y->data;
  int f32 = x->dtype == ALMA_DTYPE_FLOAT32, isf = alma__dtype_is_float(x->dtype);
  int64_t rows = alma__numel(last, p->out);
  int64_t c[ALMA_MAX_RANK] = {0};
  for (int64_t row = 0; row < rows; row++) {
    int64_t obase = row * W;
    /* expand the outer taps of this row */
    int ext = 0;
    for (int d = 0; d < last; d++) ext |= t[d].extrap[c[d]];
    int64_t nc = 0;
    if (!ext) {
      int64_t k[ALMA_MAX_RANK];
      for (int d = 0; d < last; d++) k[d] = t[d].start[c[d]];
      for (;;) {
        int64_t off = 0;
        double w = 1;
        for (int d = 0; d < last; d++) off += t[d].off[k[d]], w *= t[d].w[k[d]];
        coff[nc] = off, cw[nc] = w, nc++;
        int d = last - 1;
        for (; d >= 0; d--) {
          if (++k[d] < t[d].start[c[d] + 1]) break;
          k[d] = t[d].start[c[d]];
        }
        if (d < 0) break;
      }
    }
    if (!ext && gather && nc == 1 && cw[0] == 1.0) {
      /* pure index copy (nearest, or identity axes): exact for every dtype */
      const char *s0 = src + (size_t)coff[0] * es;
      if (es == 4) {
        uint32_t *o = (uint32_t *)(dst + (size_t)obase * es);
        for (int64_t xo = 0; xo < W; xo++) memcpy(&o[xo], s0 + (size_t)tl->off[tl->start[xo]] * 4, 4);
      } else {
        for (int64_t xo = 0; xo < W; xo++)
          memcpy(dst + (size_t)(obase + xo) * es, s0 + (size_t)tl->off[tl->start[xo]] * es, es);
      }
    } else {
      for (int64_t xo = 0; xo < W; xo++) {
        double acc;
        if (ext || tl->extrap[xo]) {
          acc = p->extrap;
        } else {
          acc = 0;
          for (int64_t q = tl->start[xo]; q < tl->start[xo + 1]; q++) {
            double s = 0;
            int64_t lo = tl->off[q];
            if (f32) {
              const float *sf = (const float *)src + lo;
              for (int64_t m = 0; m < nc; m++) s += cw[m] * sf[coff[m]];
            } else {
              for (int64_t m = 0; m < nc; m++) s += cw[m] * alma__get_f64(src, x->dtype, lo + coff[m]);
            }
            acc += tl->w[q] * s;
          }
        }
        if (f32) ((float *)dst)[obase + xo] = (float)acc;
        else if (isf) alma__set_f64(dst, x->dtype, obase + xo, acc);
        else alma__set_f64(dst, x->dtype, obase + xo, isnan(acc) ? 0 : trunc(acc)); /* numpy astype truncates */
      }
    }
    for (int d = last - 1; d >= 0; d--) {
      if (++c[d] < p->out[d]) break;
      c[d] = 0;
    }
  }
  free(coff), free(cw);
  return ALMA_OK;
}

static alma_status resize_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                               alma_tensor *out, int nout) {
  const alma_tensor *x = in[0];
  rs_params p;
  alma_status st = resize_params(n, in, nin, &p);
  if (st != ALMA_OK) return st == ALMA_ERR_DYNAMIC ? alma__op_error(n, ALMA_ERR_INTERNAL, "inputs unknown") : st;
  int r = p.rank;
  if (alma_tensor_numel(&out[0]) == 0) return ALMA_OK;
  if (alma_tensor_numel(x) == 0) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "cannot resize an empty tensor");
  int64_t istr[ALMA_MAX_RANK];
  alma__strides(r, x->dims, istr);
  axis_taps t[ALMA_MAX_RANK];
  memset(t, 0, sizeof t);
  for (int d = 0; d < r && st == ALMA_OK; d++) st = build_axis(&p, d, istr[d], &t[d]);
  if (st == ALMA_OK) st = resize_rows(&p, t, x, &out[0]);
  for (int d = 0; d < r; d++) free(t[d].start), free(t[d].off), free(t[d].w), free(t[d].extrap);
  if (st == ALMA_ERR_NOMEM) return alma__op_error(n, st, "out of memory for interpolation tables");
  if (st != ALMA_OK) return alma__error_prefix(st, "node '%s' (%s): ", n->name, n->op_type);
  return ALMA_OK;
}

const alma_op_def alma__op_Resize = {.name = "Resize", .domain = "", .versions = {10, 11, 13, 18, 19},
                                     .min_inputs = 1, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
                                     .infer = resize_infer, .exec = resize_exec};
