/* Signal-processing operators: HannWindow, HammingWindow, BlackmanWindow, DFT (17: axis attribute,
 * 20: axis input), STFT and MelWeightMatrix.
 *
 * Complex values are the trailing dimension of 2 (real, imaginary); real signals have a trailing 1.
 * Transforms run in double: radix-2 FFT for powers of two, a direct sum for short other lengths
 * and Bluestein's chirp-z (through a power-of-two FFT) for long ones, so any length stays
 * O(n log n). Output sizes depend on scalar inputs (window size, dft_length, frame_step...), so
 * infer returns ALMA_ERR_DYNAMIC while those are unknown. */
#include <math.h>
#include <string.h>

#include "ops/datamove.h"
#include "ops/nn_util.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* Reads a scalar (or one-element) int32/int64 input; ALMA_ERR_DYNAMIC when its value is unknown. */
static alma_status read_scalar(const alma_node *n, const alma_tensor *t, const char *what, int64_t *v) {
  int64_t vals[1];
  int cnt = 0;
  ALMA_TRY(alma__dm_read_ints(n, t, what, vals, 1, &cnt));
  if (cnt != 1) return alma__op_error(n, ALMA_ERR_SHAPE, "%s must hold exactly one value", what);
  *v = vals[0];
  return ALMA_OK;
}

/* Numeric output dtypes for output_datatype (windows, MelWeightMatrix). */
static alma_status out_datatype(const alma_node *n, alma_dtype *dt) {
  int64_t v = alma__attr_i(n, "output_datatype", ALMA_DTYPE_FLOAT32);
  alma_dtype t = (alma_dtype)v;
  if (v <= 0 || v > 64 || alma_dtype_size(t) == 0 || !(alma__dtype_is_float(t) || alma__dtype_is_int(t)))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "output_datatype %lld (expects a numeric tensor type)", (long long)v);
  *dt = t;
  return ALMA_OK;
}

/* ---- windows --------------------------------------------------------------------------------- */
enum { WIN_HANN, WIN_HAMMING, WIN_BLACKMAN };

static alma_status window_common(const alma_node *n, const alma_tensor *size_in, int64_t *size, int *periodic,
                                 alma_dtype *dt) {
  ALMA_TRY(out_datatype(n, dt));
  int64_t p = alma__attr_i(n, "periodic", 1);
  if (p != 0 && p != 1) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "periodic must be 0 or 1, got %lld", (long long)p);
  *periodic = (int)p;
  ALMA_TRY(read_scalar(n, size_in, "size", size));
  if (*size < 0) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "size %lld is negative", (long long)*size);
  return ALMA_OK;
}

static alma_status window_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  (void)nin, (void)nout;
  int64_t size;
  int periodic;
  alma_dtype dt;
  ALMA_TRY(window_common(n, in[0], &size, &periodic, &dt));
  alma__set_shape(&out[0], dt, 1, &size);
  return ALMA_OK;
}

static alma_status window_exec_kind(const alma_node *n, const alma_tensor *const *in, alma_tensor *out, int kind) {
  int64_t size;
  int periodic;
  alma_dtype dt;
  ALMA_TRY(window_common(n, in[0], &size, &periodic, &dt));
  /* Symmetric windows divide by size - 1; a window of one sample is 1 (as torch returns). */
  double N = (double)(periodic ? size : size - 1);
  for (int64_t i = 0; i < size; i++) {
    double v = 1.0, x = 2.0 * M_PI * (double)i;
    if (N > 0) {
      switch (kind) {
      case WIN_HANN: v = 0.5 - 0.5 * cos(x / N); break;
      case WIN_HAMMING: v = 25.0 / 46.0 - (21.0 / 46.0) * cos(x / N); break;
      default: v = 0.42 - 0.5 * cos(x / N) + 0.08 * cos(2.0 * x / N); break;
      }
    }
    alma__set_f64(out[0].data, out[0].dtype, i, v);
  }
  return ALMA_OK;
}

#define WINDOW_OP(NAME, KIND)                                                                                     \
  static alma_status NAME##_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin, \
                                 alma_tensor *out, int nout) {                                                \
    (void)ctx, (void)nin, (void)nout;                                                                         \
    return window_exec_kind(n, in, out, KIND);                                                                \
  }                                                                                                           \
  const alma_op_def alma__op_##NAME = {.name = #NAME, .domain = "", .versions = {17},                         \
                                       .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, \
                                       .infer = window_infer, .exec = NAME##_exec};
WINDOW_OP(HannWindow, WIN_HANN)
WINDOW_OP(HammingWindow, WIN_HAMMING)
WINDOW_OP(BlackmanWindow, WIN_BLACKMAN)

/* ---- 1-D complex transforms ---------------------------------------------------------------------- */
enum { FFT_POW2, FFT_DIRECT, FFT_BLUESTEIN };

typedef struct fft_plan {
  int64_t n, m;          /* transform length; Bluestein's power-of-two length */
  int kind;
  double *cs, *sn;       /* cos/sin(2*pi*k/len) for k < len (len = n, or m for Bluestein) */
  double *chr, *chi;     /* Bluestein: chirp exp(-i*pi*j^2/n), j < n */
  double *bre, *bim;     /* Bluestein: FFT of the conjugate chirp filter (length m) */
  double *wre, *wim;     /* scratch of length max(n, m) */
} fft_plan;

static int is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

static void fft_pow2(int64_t n, double *re, double *im, const double *cs, const double *sn, int64_t tstride, int inverse) {
  for (int64_t i = 1, j = 0; i < n; i++) {
    int64_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      double t = re[i];
      re[i] = re[j], re[j] = t;
      t = im[i];
      im[i] = im[j], im[j] = t;
    }
  }
  for (int64_t len = 2; len <= n; len <<= 1) {
    int64_t half = len >> 1, step = (n / len) * tstride;
    for (int64_t i = 0; i < n; i += len)
      for (int64_t k = 0; k < half; k++) {
        double wr = cs[k * step], wi = inverse ? sn[k * step] : -sn[k * step];
        double *ar = re + i + k, *ai = im + i + k, *br = re + i + k + half, *bi = im + i + k + half;
        double tr = *br * wr - *bi * wi, ti = *br * wi + *bi * wr;
        *br = *ar - tr, *bi = *ai - ti;
        *ar += tr, *ai += ti;
      }
  }
}

static void fft_plan_free(fft_plan *p) {
  free(p->cs), free(p->sn), free(p->chr), free(p->chi), free(p->bre), free(p->bim), free(p->wre), free(p->wim);
  memset(p, 0, sizeof *p);
}

static alma_status fft_plan_init(const alma_node *n, fft_plan *p, int64_t len) {
  memset(p, 0, sizeof *p);
  p->n = len;
  p->kind = is_pow2(len) ? FFT_POW2 : len <= 64 ? FFT_DIRECT : FFT_BLUESTEIN;
  int64_t tl = len;
  if (p->kind == FFT_BLUESTEIN) {
    p->m = 1;
    while (p->m < 2 * len - 1) p->m <<= 1;
    tl = p->m;
  }
  int64_t sc = tl > len ? tl : len;
  p->cs = alma__nn_alloc(n, (size_t)tl, sizeof(double));
  p->sn = alma__nn_alloc(n, (size_t)tl, sizeof(double));
  p->wre = alma__nn_alloc(n, (size_t)sc, sizeof(double));
  p->wim = alma__nn_alloc(n, (size_t)sc, sizeof(double));
  if (!p->cs || !p->sn || !p->wre || !p->wim) goto oom;
  for (int64_t k = 0; k < tl; k++) {
    double a = 2.0 * M_PI * (double)k / (double)tl;
    p->cs[k] = cos(a), p->sn[k] = sin(a);
  }
  if (p->kind == FFT_BLUESTEIN) {
    p->chr = alma__nn_alloc(n, (size_t)len, sizeof(double));
    p->chi = alma__nn_alloc(n, (size_t)len, sizeof(double));
    p->bre = calloc((size_t)p->m, sizeof(double));
    p->bim = calloc((size_t)p->m, sizeof(double));
    if (!p->chr || !p->chi || !p->bre || !p->bim) goto oom;
    /* j^2 mod 2n, stepped as (j+1)^2 = j^2 + 2j + 1, keeps the angle exact for long transforms. */
    for (int64_t j = 0, q = 0; j < len; j++) {
      double a = M_PI * (double)q / (double)len;
      p->chr[j] = cos(a), p->chi[j] = -sin(a);
      q = (q + 2 * j + 1) % (2 * len);
    }
    p->bre[0] = p->chr[0], p->bim[0] = -p->chi[0];
    for (int64_t j = 1; j < len; j++) {
      p->bre[j] = p->bre[p->m - j] = p->chr[j];
      p->bim[j] = p->bim[p->m - j] = -p->chi[j];
    }
    fft_pow2(p->m, p->bre, p->bim, p->cs, p->sn, 1, 0);
  }
  return ALMA_OK;
oom:
  fft_plan_free(p);
  return ALMA_ERR_NOMEM;
}

/* In-place transform of (re, im) of length p->n. inverse: exp(+i...) and division by n. */
static void fft_run(fft_plan *p, double *re, double *im, int inverse) {
  int64_t n = p->n;
  if (p->kind == FFT_POW2) {
    fft_pow2(n, re, im, p->cs, p->sn, 1, inverse);
  } else if (p->kind == FFT_DIRECT) {
    for (int64_t k = 0; k < n; k++) {
      double sr = 0.0, si = 0.0;
      for (int64_t j = 0, idx = 0; j < n; j++, idx = (idx + k) % n) {
        double wr = p->cs[idx], wi = inverse ? p->sn[idx] : -p->sn[idx];
        sr += re[j] * wr - im[j] * wi;
        si += re[j] * wi + im[j] * wr;
      }
      p->wre[k] = sr, p->wim[k] = si;
    }
    memcpy(re, p->wre, (size_t)n * sizeof(double));
    memcpy(im, p->wim, (size_t)n * sizeof(double));
  } else {
    /* The inverse is the conjugate of the forward transform of the conjugate. */
    int64_t m = p->m;
    double *ar = p->wre, *ai = p->wim;
    for (int64_t j = 0; j < n; j++) {
      double xr = re[j], xi = inverse ? -im[j] : im[j];
      ar[j] = xr * p->chr[j] - xi * p->chi[j];
      ai[j] = xr * p->chi[j] + xi * p->chr[j];
    }
    memset(ar + n, 0, (size_t)(m - n) * sizeof(double));
    memset(ai + n, 0, (size_t)(m - n) * sizeof(double));
    fft_pow2(m, ar, ai, p->cs, p->sn, 1, 0);
    for (int64_t j = 0; j < m; j++) {
      double tr = ar[j] * p->bre[j] - ai[j] * p->bim[j];
      ai[j] = ar[j] * p->bim[j] + ai[j] * p->bre[j];
      ar[j] = tr;
    }
    fft_pow2(m, ar, ai, p->cs, p->sn, 1, 1);
    for (int64_t k = 0; k < n; k++) {
      double cr = ar[k] / (double)m, ci = ai[k] / (double)m;
      re[k] = cr * p->chr[k] - ci * p->chi[k];
      im[k] = cr * p->chi[k] + ci * p->chr[k];
      if (inverse) im[k] = -im[k];
    }
  }
  if (inverse)
    for (int64_t k = 0; k < n; k++) re[k] /= (double)n, im[k] /= (double)n;
}

/* ---- DFT ------------------------------------------------------------------------------------------ */
typedef struct dft_cfg {
  int axis, inverse, onesided, cin;
  int64_t len, nfft, nout, outer, inner;
} dft_cfg;

static alma_status dft_check(const alma_node *n, const alma_tensor *const *in, int nin, dft_cfg *c) {
  const alma_tensor *x = in[0], *len_t = alma__nn_in(in, nin, 1), *axis_t = alma__nn_in(in, nin, 2);
  if (!alma__dtype_is_float(x->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input dtype %s (expects a floating-point type)",
                          alma_dtype_name(x->dtype));
  int r = x->rank;
  if (r < 2) return alma__op_error(n, ALMA_ERR_SHAPE, "input must have rank >= 2 ([batch, ..., 1 or 2]), got %d", r);
  if (x->dims[r - 1] != 1 && x->dims[r - 1] != 2)
    return alma__op_error(n, ALMA_ERR_SHAPE, "last dimension must be 1 (real) or 2 (complex), got %lld",
                          (long long)x->dims[r - 1]);
  c->cin = (int)x->dims[r - 1];
  int64_t inv = alma__attr_i(n, "inverse", 0), one = alma__attr_i(n, "onesided", 0);
  if ((inv != 0 && inv != 1) || (one != 0 && one != 1))
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "inverse and onesided must be 0 or 1");
  if (inv && one)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "inverse with onesided=1 (a half-spectrum inverse) is not defined by the spec");
  c->inverse = (int)inv, c->onesided = (int)one;
  int64_t axis;
  if (n->since_version >= 20) {
    if (alma__node_attr(n, "axis"))
      return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "axis is an input since opset 20, not an attribute");
    axis = -2;
    if (axis_t) ALMA_TRY(read_scalar(n, axis_t, "axis", &axis));
  } else {
    if (nin > 2 && axis_t) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "takes at most 2 inputs before opset 20");
    axis = alma__attr_i(n, "axis", 1);
  }
  /* The last dimension holds the complex parts: valid axes are [-r, -2] and [0, r-2]. */
  if (axis < -r || axis > r - 2 || axis == -1)
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "axis %lld is out of range for rank %d (expects [-%d, -2] or [0, %d])",
                          (long long)axis, r, r, r - 2);
  c->axis = (int)(axis < 0 ? axis + r : axis);
  c->len = x->dims[c->axis];
  c->nfft = c->len;
  if (len_t) {
    ALMA_TRY(read_scalar(n, len_t, "dft_length", &c->nfft));
    if (c->nfft < 1) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "dft_length %lld must be >= 1", (long long)c->nfft);
  }
  if (c->nfft < 1) return alma__op_error(n, ALMA_ERR_SHAPE, "the transformed axis %d is empty", c->axis);
  if (c->nfft > ((int64_t)1 << 40))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "dft_length %lld is beyond alma's limit of 2^40", (long long)c->nfft);
  c->nout = c->onesided ? c->nfft / 2 + 1 : c->nfft;
  c->outer = alma__numel(c->axis, x->dims);
  c->inner = alma__numel(r - 2 - c->axis, x->dims + c->axis + 1);
  return ALMA_OK;
}

static alma_status dft_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  (void)nout;
  dft_cfg c;
  ALMA_TRY(dft_check(n, in, nin, &c));
  int64_t dims[ALMA_MAX_RANK];
  memcpy(dims, in[0]->dims, sizeof(int64_t) * (size_t)in[0]->rank);
  dims[c.axis] = c.nout;
  dims[in[0]->rank - 1] = 2;
  alma__set_shape(&out[0], in[0]->dtype, in[0]->rank, dims);
  return ALMA_OK;
}

static alma_status dft_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, int nout) {
  (void)ctx, (void)nout;
  dft_cfg c;
  ALMA_TRY(dft_check(n, in, nin, &c));
  if (alma_tensor_numel(&out[0]) == 0) return ALMA_OK;
  int xo = 0;
  const double *x = alma__nn_as_f64(in[0], &xo);
  if (!x) return ALMA_ERR_NOMEM;
  fft_plan p;
  alma_status st = fft_plan_init(n, &p, c.nfft);
  double *re = alma__nn_alloc(n, (size_t)c.nfft, sizeof(double)), *im = alma__nn_alloc(n, (size_t)c.nfft, sizeof(double));
  double *y = alma__nn_alloc(n, (size_t)alma_tensor_numel(&out[0]), sizeof(double));
  if (st == ALMA_OK && (!re || !im || !y)) st = ALMA_ERR_NOMEM;
  int64_t take = c.len < c.nfft ? c.len : c.nfft;
  for (int64_t o = 0; st == ALMA_OK && o < c.outer; o++)
    for (int64_t i = 0; i < c.inner; i++) {
      for (int64_t j = 0; j < c.nfft; j++) {
        const double *e = x + ((o * c.len + j) * c.inner + i) * c.cin;
        re[j] = j < take ? e[0] : 0.0;
        im[j] = j < take && c.cin == 2 ? e[1] : 0.0;
      }
      fft_run(&p, re, im, c.inverse);
      for (int64_t k = 0; k < c.nout; k++) {
        double *d = y + ((o * c.nout + k) * c.inner + i) * 2;
        d[0] = re[k], d[1] = im[k];
      }
    }
  if (st == ALMA_OK) alma__nn_store_f64(&out[0], y);
  fft_plan_free(&p);
  free(re), free(im), free(y);
  if (xo) free((void *)x);
  return st;
}

const alma_op_def alma__op_DFT = {.name = "DFT", .domain = "", .versions = {17, 20},
                                  .min_inputs = 1, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
                                  .infer = dft_infer, .exec = dft_exec};

/* ---- STFT ----------------------------------------------------------------------------------------- */
typedef struct stft_cfg {
  int64_t B, L, cin, step, flen, wlen, frames, bins;
} stft_cfg;

static alma_status stft_check(const alma_node *n, const alma_tensor *const *in, int nin, stft_cfg *c) {
  const alma_tensor *x = in[0], *w = alma__nn_in(in, nin, 2), *fl = alma__nn_in(in, nin, 3);
  if (!alma__dtype_is_float(x->dtype))
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "signal dtype %s (expects a floating-point type)",
                          alma_dtype_name(x->dtype));
  if (x->rank != 3 || (x->dims[2] != 1 && x->dims[2] != 2)) {
    char b[96];
    return alma__op_error(n, ALMA_ERR_SHAPE, "signal shape %s (expects [batch, length, 1 or 2])",
                          alma__shape_str(x->rank, x->dims, b, sizeof b));
  }
  int64_t one = alma__attr_i(n, "onesided", 1);
  if (one != 0 && one != 1) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "onesided must be 0 or 1");
  c->B = x->dims[0], c->L = x->dims[1], c->cin = x->dims[2];
  if (w) {
    if (w->dtype != x->dtype)
      return alma__op_error(n, ALMA_ERR_TYPE, "window dtype %s differs from the signal's %s", alma_dtype_name(w->dtype),
                            alma_dtype_name(x->dtype));
    if (w->rank != 1) return alma__op_error(n, ALMA_ERR_SHAPE, "window must be 1-D, got rank %d", w->rank);
  }
  ALMA_TRY(read_scalar(n, in[1], "frame_step", &c->step));
  if (c->step < 1) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "frame_step %lld must be >= 1", (long long)c->step);
  if (fl) ALMA_TRY(read_scalar(n, fl, "frame_length", &c->flen));
  else c->flen = w ? w->dims[0] : c->L;
  if (c->flen < 1) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "frame_length %lld must be >= 1", (long long)c->flen);
  /* Frames hold window-length samples (zero-padded past the signal's end), transformed at
   * frame_length points: a shorter window is zero-padded, a longer one truncated. */
  c->wlen = w ? w->dims[0] : c->flen;
  if (c->L < c->flen)
    return alma__op_error(n, ALMA_ERR_SHAPE, "signal length %lld is shorter than frame_length %lld", (long long)c->L,
                          (long long)c->flen);
  c->frames = 1 + (c->L - c->flen) / c->step;
  c->bins = one ? c->flen / 2 + 1 : c->flen;
  return ALMA_OK;
}

static alma_status stft_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  (void)nout;
  stft_cfg c;
  ALMA_TRY(stft_check(n, in, nin, &c));
  int64_t dims[4] = {c.B, c.frames, c.bins, 2};
  alma__set_shape(&out[0], in[0]->dtype, 4, dims);
  return ALMA_OK;
}

static alma_status stft_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                             alma_tensor *out, int nout) {
  (void)ctx, (void)nout;
  stft_cfg c;
  ALMA_TRY(stft_check(n, in, nin, &c));
  if (alma_tensor_numel(&out[0]) == 0) return ALMA_OK;
  const alma_tensor *wt = alma__nn_in(in, nin, 2);
  int xo = 0, wo = 0;
  const double *x = alma__nn_as_f64(in[0], &xo);
  const double *w = x && wt ? alma__nn_as_f64(wt, &wo) : NULL;
  fft_plan p = {0};
  alma_status st = !x || (wt && !w) ? ALMA_ERR_NOMEM : fft_plan_init(n, &p, c.flen);
  double *re = alma__nn_alloc(n, (size_t)c.flen, sizeof(double)), *im = alma__nn_alloc(n, (size_t)c.flen, sizeof(double));
  double *y = alma__nn_alloc(n, (size_t)alma_tensor_numel(&out[0]), sizeof(double));
  if (st == ALMA_OK && (!re || !im || !y)) st = ALMA_ERR_NOMEM;
  for (int64_t b = 0; st == ALMA_OK && b < c.B; b++)
    for (int64_t f = 0; f < c.frames; f++) {
      int64_t begin = f * c.step;
      for (int64_t j = 0; j < c.flen; j++) {
        re[j] = im[j] = 0.0;
        if (j < c.wlen && begin + j < c.L) {
          double wv = w ? w[j] : 1.0;
          const double *e = x + (b * c.L + begin + j) * c.cin;
          re[j] = e[0] * wv;
          if (c.cin == 2) im[j] = e[1] * wv;
        }
      }
      fft_run(&p, re, im, 0);
      for (int64_t k = 0; k < c.bins; k++) {
        double *d = y + ((b * c.frames + f) * c.bins + k) * 2;
        d[0] = re[k], d[1] = im[k];
      }
    }
  if (st == ALMA_OK) alma__nn_store_f64(&out[0], y);
  fft_plan_free(&p);
  free(re), free(im), free(y);
  if (xo) free((void *)x);
  if (wo) free((void *)w);
  return st;
}

const alma_op_def alma__op_STFT = {.name = "STFT", .domain = "", .versions = {17},
                                   .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
                                   .infer = stft_infer, .exec = stft_exec};

/* ---- MelWeightMatrix -------------------------------------------------------------------------------
 * Triangular filters between mel-spaced points, as the ONNX reference builds them: num_mel_bins + 2
 * points evenly spaced in mel (2595 * log10(1 + hz / 700)) from lower to upper edge, mapped back to
 * DFT bins floor((dft_length + 1) * hz / sample_rate); filter i rises from point i to point i+1 and
 * falls to point i+2. Output [dft_length / 2 + 1, num_mel_bins]. */
typedef struct mel_cfg {
  int64_t nmel, dftlen, rate, nspec;
  double lo, hi;
  alma_dtype dt;
} mel_cfg;

static alma_status mel_check(const alma_node *n, const alma_tensor *const *in, mel_cfg *c) {
  ALMA_TRY(out_datatype(n, &c->dt));
  for (int i = 3; i < 5; i++) {
    if (!alma__dtype_is_float(in[i]->dtype))
      return alma__op_error(n, ALMA_ERR_TYPE, "%s dtype %s (expects a floating-point type)",
                            i == 3 ? "lower_edge_hertz" : "upper_edge_hertz", alma_dtype_name(in[i]->dtype));
    if (alma_tensor_numel(in[i]) != 1)
      return alma__op_error(n, ALMA_ERR_SHAPE, "%s must hold exactly one value", i == 3 ? "lower_edge_hertz" : "upper_edge_hertz");
  }
  ALMA_TRY(alma__dm_check_index_dtype(n, in[2], "sample_rate"));
  ALMA_TRY(read_scalar(n, in[0], "num_mel_bins", &c->nmel));
  ALMA_TRY(read_scalar(n, in[1], "dft_length", &c->dftlen));
  if (c->nmel < 0) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "num_mel_bins %lld is negative", (long long)c->nmel);
  if (c->dftlen < 1) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "dft_length %lld must be >= 1", (long long)c->dftlen);
  c->nspec = c->dftlen / 2 + 1;
  return ALMA_OK;
}

static alma_status mel_infer(const alma_node *n, const alma_tensor *const *in, int nin, alma_tensor *out, int nout) {
  (void)nin, (void)nout;
  mel_cfg c;
  ALMA_TRY(mel_check(n, in, &c));
  int64_t dims[2] = {c.nspec, c.nmel};
  alma__set_shape(&out[0], c.dt, 2, dims);
  return ALMA_OK;
}

static alma_status mel_exec(alma_exec_ctx *ctx, const alma_node *n, const alma_tensor *const *in, int nin,
                            alma_tensor *out, int nout) {
  (void)ctx, (void)nin, (void)nout;
  mel_cfg c;
  ALMA_TRY(mel_check(n, in, &c));
  ALMA_TRY(read_scalar(n, in[2], "sample_rate", &c.rate));
  if (c.rate <= 0) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "sample_rate %lld must be positive", (long long)c.rate);
  if (!in[3]->data || !in[4]->data) return alma__op_error(n, ALMA_ERR_INVALID_ARG, "edge frequencies have no data");
  c.lo = alma__get_f64(in[3]->data, in[3]->dtype, 0);
  c.hi = alma__get_f64(in[4]->data, in[4]->dtype, 0);
  if (!(c.lo >= 0.0) || !(c.hi >= c.lo) || isinf(c.hi))
    return alma__op_error(n, ALMA_ERR_INVALID_ARG, "edge frequencies [%g, %g] must satisfy 0 <= lower <= upper", c.lo, c.hi);
  int64_t npts = c.nmel + 2;
  int64_t *pt = alma__nn_alloc(n, (size_t)npts, sizeof(int64_t));
  double *w = alma__nn_alloc(n, (size_t)(c.nspec * c.nmel > 0 ? c.nspec * c.nmel : 1), sizeof(double));
  alma_status st = pt && w ? ALMA_OK : ALMA_ERR_NOMEM;
  double lo_mel = 2595.0 * log10(1.0 + c.lo / 700.0), hi_mel = 2595.0 * log10(1.0 + c.hi / 700.0);
  double step = (hi_mel - lo_mel) / (double)npts;
  for (int64_t i = 0; st == ALMA_OK && i < npts; i++) {
    double hz = 700.0 * (pow(10.0, ((double)i * step + lo_mel) / 2595.0) - 1.0);
    double b = floor((double)(c.dftlen + 1) * hz / (double)c.rate);
    if (!(b >= 0.0) || b >= (double)c.nspec)
      st = alma__op_error(n, ALMA_ERR_INVALID_ARG, "mel point %lld falls on DFT bin %g, outside [0, %lld)", (long long)i, b,
                          (long long)c.nspec);
    else pt[i] = (int64_t)b;
  }
  if (st == ALMA_OK) {
    memset(w, 0, (size_t)(c.nspec * c.nmel) * sizeof(double));
    for (int64_t i = 0; i < c.nmel; i++) {
      int64_t l = pt[i], m = pt[i + 1], h = pt[i + 2];
      if (m == l) w[m * c.nmel + i] = 1.0;
      else
        for (int64_t j = l; j <= m; j++) w[j * c.nmel + i] = (double)(j - l) / (double)(m - l);
      for (int64_t j = m; j < h; j++) w[j * c.nmel + i] = (double)(h - j) / (double)(h - m);
    }
    alma__nn_store_f64(&out[0], w);
  }
  free(pt), free(w);
  return st;
}

const alma_op_def alma__op_MelWeightMatrix = {.name = "MelWeightMatrix", .domain = "", .versions = {17},
                                              .min_inputs = 5, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
                                              .infer = mel_infer, .exec = mel_exec};
