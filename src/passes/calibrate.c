/* Calibration for static quantization: runs the float graph over sample batches with EAGER kernels
 * and observes the ranges of chosen values, through the executor's per-node hook (which sees each
 * node's inputs once they are computed: every value that matters is some node's input, or a graph
 * output, observed after the run).
 *
 * One pass over the batches serves every calibrator: min and max are exact, and a histogram of |x|
 * (ALMA__CALIB_BINS bins over [0, R]) is kept where the calibrator needs one. When a batch exceeds
 * R, R doubles as often as needed and neighbouring bins merge (the histogram stays exact, only
 * coarser), so no second pass is needed to fix the range first. */
#include <math.h>
#include <strings.h>

#include "passes/quant.h"
#include "runtimes/exec.h"

alma_status alma__calibrator_parse(const char *name, alma__calibrator *out) {
  if (!name || !name[0] || !strcasecmp(name, "minmax") || !strcasecmp(name, "min-max") || !strcasecmp(name, "max"))
    *out = ALMA__CALIB_MINMAX;
  else if (!strcasecmp(name, "percentile"))
    *out = ALMA__CALIB_PERCENTILE;
  else if (!strcasecmp(name, "entropy") || !strcasecmp(name, "kl"))
    *out = ALMA__CALIB_ENTROPY;
  else
    return alma__errorf(ALMA_ERR_INVALID_ARG, "unknown calibrator '%s' (minmax, percentile, entropy)", name);
  return ALMA_OK;
}

/* ---- calibrators on a histogram of |x| --------------------------------------------------------- */

double alma__calib_percentile(const uint64_t *counts, int nbins, double range, double p) {
  uint64_t total = 0;
  for (int i = 0; i < nbins; i++) total += counts[i];
  if (!total || range <= 0) return range;
  double want = p * (double)total, cum = 0;
  for (int i = 0; i < nbins; i++) {
    cum += (double)counts[i];
    if (cum >= want) return (i + 1) * range / nbins;
  }
  return range;
}

double alma__calib_entropy(const uint64_t *counts, int nbins, double range, int levels) {
  if (range <= 0 || levels < 2 || nbins <= levels) return range;
  double *suffix = malloc(((size_t)nbins + 1) * sizeof *suffix);
  double *p = malloc((size_t)nbins * sizeof *p), *q = malloc((size_t)nbins * sizeof *q);
  if (!suffix || !p || !q) {
    free(suffix);
    free(p);
    free(q);
    return range; /* out of memory: min-max */
  }
  suffix[nbins] = 0;
  for (int i = nbins - 1; i >= 0; i--) suffix[i] = suffix[i + 1] + (double)counts[i];
  double best_kl = INFINITY, best_t = range;
  for (int i = levels; i <= nbins; i++) {
    /* P: the first i bins, the outliers beyond them folded into the last one */
    double psum = 0;
    for (int j = 0; j < i; j++) p[j] = (double)counts[j];
    p[i - 1] += suffix[i];
    psum = suffix[0];
    if (psum <= 0) continue;
    /* Q: the first i bins merged into `levels` groups, each group's mass spread evenly over the
     * bins of the group that were non-empty (the bins a quantized value can stand for) */
    double qsum = 0;
    for (int l = 0; l < levels; l++) {
      int a = (int)((int64_t)l * i / levels), b = (int)((int64_t)(l + 1) * i / levels);
      double s = 0;
      int nz = 0;
      for (int j = a; j < b; j++) {
        s += (double)counts[j];
        nz += counts[j] != 0;
      }
      for (int j = a; j < b; j++) q[j] = counts[j] && nz ? s / nz : 0;
      qsum += s;
    }
    if (qsum <= 0) continue;
    /* KL(P||Q); a bin with P > 0 where Q is empty (only the outlier bin can be) costs as if Q
     * were tiny there, so thresholds that cut off mass are penalized instead of excluded */
    double kl = 0;
    for (int j = 0; j < i; j++) {
      if (p[j] <= 0) continue;
      double pj = p[j] / psum, qj = q[j] > 0 ? q[j] / qsum : 1e-12;
      kl += pj * log(pj / qj);
    }
    if (kl < best_kl) {
      best_kl = kl;
      best_t = (double)i * range / nbins;
    }
  }
  free(suffix);
  free(p);
  free(q);
  return best_t;
}

/* ---- observation ------------------------------------------------------------------------------- */

typedef struct {
  double mn, mx;
  double range;          /* histogram covers |x| in [0, range] */
  uint64_t *hist;        /* NULL for min-max */
  int seen, stamp;
} observer;

typedef struct {
  const alma_graph *g;
  int *slot;             /* value -> observer index or -1 */
  observer *obs;
  int want_hist;
  int batch;
} calib_state;

static void hist_add(observer *o, const float *x, int64_t n, double amax) {
  const int nb = ALMA__CALIB_BINS;
  if (amax > o->range) {
    if (o->range <= 0) {
      o->range = amax; /* all earlier values were 0: they stay in bin 0 */
    } else {
      int f = 1;
      while (o->range * f < amax && f < (1 << 30)) f *= 2;
      if (f > 1) {
        /* in place: bin j is written after bins [j*f, j*f+f) are read, and later steps read only
         * bins above j */
        for (int j = 0; j < nb; j++) {
          uint64_t s = 0;
          for (int64_t k = (int64_t)j * f; k < (int64_t)j * f + f && k < nb; k++) s += o->hist[k];
          o->hist[j] = s;
        }
        o->range *= f;
      }
    }
  }
  if (o->range <= 0) {
    o->hist[0] += (uint64_t)n;
    return;
  }
  float scale = (float)(nb / o->range);
  for (int64_t i = 0; i < n; i++) {
    float a = fabsf(x[i]) * scale;
    int b = a < (float)nb ? (int)a : nb - 1;
    o->hist[b]++;
  }
}

static void observe(calib_state *c, int v, const alma_tensor *t) {
  int k = c->slot[v];
  if (k < 0 || !t || t->dtype != ALMA_DTYPE_FLOAT32 || !t->data) return;
  observer *o = &c->obs[k];
  if (o->stamp == c->batch + 1) return; /* a value read by several nodes counts once per batch */
  o->stamp = c->batch + 1;
  const float *x = t->data;
  int64_t n = alma_tensor_numel(t);
  float mn = INFINITY, mx = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    float a = x[i];
    if (a != a) continue; /* NaN: ignored */
    mn = a < mn ? a : mn;
    mx = a > mx ? a : mx;
  }
  if (mn > mx) return;
  if (!o->seen || mn < o->mn) o->mn = mn;
  if (!o->seen || mx > o->mx) o->mx = mx;
  o->seen = 1;
  if (c->want_hist && o->hist) {
    double amax = fabs(mn) > fabs(mx) ? fabs(mn) : fabs(mx);
    if (isfinite(amax)) hist_add(o, x, n, amax);
  }
}

static alma_status calib_hook(void *user, int node_index, const alma_node *n, const alma_tensor *const *in, int nin,
                              alma_tensor *out, int nout, int *handled) {
  calib_state *c = user;
  *handled = 0;
  for (int k = 0; k < nin; k++)
    if (n->inputs[k] >= 0 && in[k]) observe(c, n->inputs[k], in[k]);
  return ALMA_OK;
}

/* ---- random batches when no data is given ------------------------------------------------------ */

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) { return ((double)(splitmix(s) >> 11) + 0.5) * 0x1p-53; }

/* One batch shaped by the graph's declared inputs: symbolic first dims 4, other unknown dims 1;
 * floats ~ N(0, 1), integers uniform in [0, 10), as the benchmark's random data. */
static alma_status random_batch(const alma_graph *g, uint64_t *seed, alma_tensor *inputs) {
  for (int i = 0; i < g->n_inputs; i++) {
    const alma_value *v = &g->values[g->inputs[i]];
    int64_t dims[ALMA_MAX_RANK];
    int rank = v->rank < 0 ? 0 : v->rank;
    for (int d = 0; d < rank; d++) dims[d] = v->dims[d] >= 0 ? v->dims[d] : d == 0 ? 4 : 1;
    alma_dtype dt = v->dtype == ALMA_DTYPE_UNDEFINED ? ALMA_DTYPE_FLOAT32 : v->dtype;
    ALMA_TRY(alma__tensor_alloc(&inputs[i], dt, rank, dims));
    int64_t n = alma_tensor_numel(&inputs[i]);
    for (int64_t k = 0; k < n; k++) {
      if (alma__dtype_is_float(dt)) {
        double r = sqrt(-2.0 * log(uniform01(seed))) * cos(2 * M_PI * uniform01(seed));
        alma__set_f64(inputs[i].data, dt, k, r);
      } else if (dt == ALMA_DTYPE_BOOL) {
        ((uint8_t *)inputs[i].data)[k] = splitmix(seed) & 1;
      } else {
        alma__set_i64(inputs[i].data, dt, k, (int64_t)(splitmix(seed) % 10));
      }
    }
  }
  return ALMA_OK;
}

#define RANDOM_CALIB_BATCHES 8

alma_status alma__calibrate(const alma_graph *g, const int *values, int n, const alma_pass_opts *opts, double *lo,
                            double *hi, int *seen) {
  alma__calibrator kind;
  ALMA_TRY(alma__calibrator_parse(opts ? opts->calibrator : NULL, &kind));
  int have_data = opts && opts->calib && opts->n_calib_batches > 0;
  if (have_data && opts->n_inputs != g->n_inputs)
    return alma__errorf(ALMA_ERR_INVALID_ARG, "calibration batches have %d inputs each, the model takes %d",
                        opts->n_inputs, g->n_inputs);
  int nb = have_data ? opts->n_calib_batches : RANDOM_CALIB_BATCHES;
  if (!have_data)
    ALMA_LOGW("static quantization: no calibration data given, calibrating on %d batches of random inputs "
              "(N(0,1) floats), which calibrates poorly: give real samples (calibration_data)",
              nb);
  calib_state c = {.g = g, .want_hist = kind != ALMA__CALIB_MINMAX};
  c.slot = malloc(((size_t)g->n_values + 1) * sizeof *c.slot);
  c.obs = calloc((size_t)n + 1, sizeof *c.obs);
  alma_tensor *rnd = have_data ? NULL : calloc((size_t)g->n_inputs + 1, sizeof *rnd);
  alma_tensor *outs = calloc((size_t)g->n_outputs + 1, sizeof *outs);
  alma_status st = ALMA_OK;
  if (!c.slot || !c.obs || !outs || (!have_data && !rnd)) {
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    goto done;
  }
  for (int v = 0; v < g->n_values; v++) c.slot[v] = -1;
  for (int i = 0; i < n; i++) {
    if (values[i] >= 0 && values[i] < g->n_values) c.slot[values[i]] = i;
    if (c.want_hist && !(c.obs[i].hist = calloc(ALMA__CALIB_BINS, sizeof(uint64_t)))) {
      st = alma__errorf(ALMA_ERR_NOMEM, "out of memory for calibration histograms");
      goto done;
    }
  }
  uint64_t seed = 0x616c6d61ull; /* fixed: the same random batches every time */
  for (int b = 0; b < nb && st == ALMA_OK; b++) {
    const alma_tensor *in = have_data ? opts->calib + (size_t)b * (size_t)g->n_inputs : rnd;
    if (!have_data && (st = random_batch(g, &seed, rnd)) != ALMA_OK) break;
    c.batch = b;
    for (int i = 0; i < g->n_inputs; i++) observe(&c, g->inputs[i], &in[i]);
    st = alma__exec_graph(g, calib_hook, &c, in, g->n_inputs, outs, g->n_outputs);
    if (st != ALMA_OK) {
      alma__error_prefix(st, "calibration batch %d of %d: ", b + 1, nb);
      break;
    }
    for (int i = 0; i < g->n_outputs; i++) {
      observe(&c, g->outputs[i], &outs[i]);
      alma_tensor_free_data(&outs[i]);
    }
    for (int i = 0; rnd && i < g->n_inputs; i++) alma_tensor_free_data(&rnd[i]);
  }
  for (int i = 0; st == ALMA_OK && i < n; i++) {
    observer *o = &c.obs[i];
    seen[i] = o->seen;
    if (!o->seen) {
      lo[i] = hi[i] = 0;
      continue;
    }
    double mn = o->mn < 0 ? o->mn : 0, mx = o->mx > 0 ? o->mx : 0;
    if (kind != ALMA__CALIB_MINMAX && o->hist && o->range > 0) {
      /* the thresholds bound |x|; a side that never reached it keeps its own extreme */
      double t;
      if (kind == ALMA__CALIB_PERCENTILE) {
        t = alma__calib_percentile(o->hist, ALMA__CALIB_BINS, o->range, ALMA__CALIB_PERCENTILE_P);
      } else {
        /* KL on a coarser histogram: with fine bins the sampling noise of sparse tails reads as
         * divergence and drives the threshold far too low (a trained digit CNN calibrated on 256
         * images clipped a layer at 18% of its range with 2048 bins, kept 94% with 512) */
        const int f = ALMA__CALIB_BINS / ALMA__CALIB_ENTROPY_BINS;
        uint64_t coarse[ALMA__CALIB_ENTROPY_BINS];
        for (int j = 0; j < ALMA__CALIB_ENTROPY_BINS; j++) {
          coarse[j] = 0;
          for (int k = 0; k < f; k++) coarse[j] += o->hist[j * f + k];
        }
        t = alma__calib_entropy(coarse, ALMA__CALIB_ENTROPY_BINS, o->range, ALMA__CALIB_ENTROPY_LEVELS);
      }
      if (mn < -t) mn = -t;
      if (mx > t) mx = t;
    }
    lo[i] = mn;
    hi[i] = mx;
  }
done:
  for (int i = 0; rnd && i < g->n_inputs; i++) alma_tensor_free_data(&rnd[i]);
  for (int i = 0; c.obs && i < n; i++) free(c.obs[i].hist);
  free(c.slot);
  free(c.obs);
  free(rnd);
  free(outs);
  return st;
}
