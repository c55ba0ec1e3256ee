/* FUSE rules for subgraphs PyTorch 1.13 exports for single modules:
 *   GELU       x * 0.5 * (1 + erf(x / sqrt(2)))  (Div, Erf, Add, Mul, Mul; or Mul by 1/sqrt(2), and
 *              the 0.5 applied to x or to the sum)          -> Gelu (opset 20 semantics)
 *   LayerNorm  ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div [, Mul gamma] [, Add beta]
 *                                                           -> LayerNormalization (opset 17)
 *   RMSNorm    Pow 2 | Mul(x, x), ReduceMean, Add eps, Sqrt, Div(x, ·) | Reciprocal + Mul(x, ·)
 *              [, Mul gamma]                                 -> RMSNormalization (opset 23)
 *   attention  MatMul(Q, Kᵀ) [Div|Mul scale] [mask chain] Softmax(last axis) MatMul(·, V), with the
 *              scale possibly applied to Q or Kᵀ instead; the mask chain as transformers writes it
 *              (Add, Where and Max with finfo.min: mask_chain); the scores possibly of [B*H, S, D]
 *              views of Q and K plus zeros, viewed back (GPT-NeoX's baddbmm) -> alma.Attention
 * The ONNX ops created are bound at the version whose semantics they have, even when the model
 * imports an older opset (alma's kernels do not care about the import). */
#include <float.h>
#include <math.h>

#include "passes/fuse.h"

static int near(double a, double b) { return alma__fuse_near(a, b, 1e-5); }

/* The input of a two-input node other than the scalar constant; *k gets the scalar. -1 if neither
 * input (or, when scalar_second, not the second one) is a scalar constant. */
static int with_scalar(const alma__fuse_ctx *c, int node, int scalar_second, double *k) {
  const alma_node *n = &c->g->nodes[node];
  if (n->n_inputs != 2 || n->inputs[0] < 0 || n->inputs[1] < 0) return -1;
  if (alma__fuse_scalar(c, n->inputs[1], k)) return n->inputs[0];
  if (!scalar_second && alma__fuse_scalar(c, n->inputs[0], k)) return n->inputs[1];
  return -1;
}

static int out0(const alma__fuse_ctx *c, int node) {
  const alma_node *n = &c->g->nodes[node];
  return n->n_outputs >= 1 ? n->outputs[0] : -1;
}

/* The node consuming v when it is its only consumer and is domain:op_type; else -1. */
static int next_is(const alma__fuse_ctx *c, int v, const char *op_type) {
  int n = alma__fuse_only_consumer(c, v);
  return n >= 0 && alma__fuse_is(c, n, "", op_type) && out0(c, n) >= 0 ? n : -1;
}

/* ---- GELU -------------------------------------------------------------------------------------- */

alma_status alma__fuse_rule_gelu(alma__fuse_ctx *c, int ei) {
  if (!alma__fuse_is(c, ei, "", "Erf")) return ALMA_OK;
  int d = c->g->nodes[ei].inputs[0], e = out0(c, ei);
  if (d < 0 || e < 0 || alma__fuse_only_consumer(c, d) != ei) return ALMA_OK;
  double k;
  int dp = alma__fuse_producer(c, d, "", NULL), x = -1;
  if (alma__fuse_is(c, dp, "", "Div")) {
    x = with_scalar(c, dp, 1, &k);
    if (!near(k, sqrt(2.0))) x = -1;
  } else if (alma__fuse_is(c, dp, "", "Mul")) {
    x = with_scalar(c, dp, 0, &k);
    if (!near(k, sqrt(0.5))) x = -1;
  }
  if (x < 0 || !alma__dtype_is_float(alma__fuse_dtype(c, x))) return ALMA_OK;
  int ad = next_is(c, e, "Add");
  if (ad < 0 || with_scalar(c, ad, 0, &k) != e || !near(k, 1.0)) return ALMA_OK;
  int m1 = next_is(c, out0(c, ad), "Mul");
  if (m1 < 0) return ALMA_OK;
  int o = alma__fuse_other_input(c, m1, out0(c, ad)), last = -1, half = -1;
  if (o == x) {
    /* (x * (1 + erf)) * 0.5 */
    last = next_is(c, out0(c, m1), "Mul");
    if (last < 0 || with_scalar(c, last, 0, &k) != out0(c, m1) || !near(k, 0.5)) return ALMA_OK;
  } else if (alma__fuse_scalar(c, o, &k) && near(k, 0.5)) {
    /* ((1 + erf) * 0.5) * x */
    last = next_is(c, out0(c, m1), "Mul");
    if (last < 0 || alma__fuse_other_input(c, last, out0(c, m1)) != x) return ALMA_OK;
  } else {
    /* (x * 0.5) * (1 + erf) */
    half = alma__fuse_producer(c, o, "", "Mul");
    if (half < 0 || alma__fuse_only_consumer(c, o) != m1 || with_scalar(c, half, 0, &k) != x || !near(k, 0.5))
      return ALMA_OK;
    last = m1;
  }
  int y = out0(c, last);
  if (!alma__fuse_same_shape(c, y, x)) return ALMA_OK;
  ALMA_TRY(alma__fuse_retype(c, ei, "", "Gelu", 20));
  ALMA_TRY(alma__fuse_attr_clear(c, ei));
  ALMA_TRY(alma__fuse_set_inputs(c, ei, &x, 1));
  ALMA_TRY(alma__fuse_set_output(c, ei, y));
  alma__fuse_kill(c, dp);
  alma__fuse_kill(c, ad);
  alma__fuse_kill(c, m1);
  if (last != m1) alma__fuse_kill(c, last);
  alma__fuse_kill(c, half);
  alma__fuse_done(c, ALMA__FUSE_GELU);
  return ALMA_OK;
}

/* ---- LayerNorm --------------------------------------------------------------------------------- */

/* For a ReduceMean keeping dims over the last k axes of a rank-r input: k; else -1. */
static int trailing_axes(const alma__fuse_ctx *c, int ri, int r) {
  const alma_node *n = &c->g->nodes[ri];
  if (alma__attr_i(n, "keepdims", 1) != 1 || r < 1 || r > 62) return -1;
  const int64_t *ax = NULL;
  int na = 0;
  int64_t buf[ALMA_MAX_RANK];
  if (n->since_version >= 18) {
    if (n->n_inputs > 1 && n->inputs[1] >= 0) {
      const alma_tensor *t = alma__fuse_const(c, n->inputs[1]);
      if (!t || !alma__dtype_is_int(t->dtype) || alma_tensor_numel(t) > ALMA_MAX_RANK) return -1;
      na = (int)alma_tensor_numel(t);
      for (int i = 0; i < na; i++) buf[i] = alma__get_i64(t->data, t->dtype, i);
      ax = buf;
    }
    if (!na && alma__attr_i(n, "noop_with_empty_axes", 0)) return -1;
  } else {
    na = alma__attr_ints(n, "axes", &ax);
  }
  if (!na) return r; /* all axes */
  uint64_t mask = 0;
  for (int i = 0; i < na; i++) {
    int64_t a = ax[i] < 0 ? ax[i] + r : ax[i];
    if (a < 0 || a >= r) return -1;
    mask |= (uint64_t)1 << a;
  }
  int k = __builtin_popcountll(mask);
  uint64_t want = (((uint64_t)1 << k) - 1) << (r - k);
  return mask == want ? k : -1;
}

/* A constant affine parameter of X's dtype that broadcasts onto the normalized (last k) dims of x
 * without changing x's shape. */
static int affine_ok(const alma__fuse_ctx *c, int p, int x, int k, alma_dtype dt) {
  const alma_tensor *t = alma__fuse_const(c, p);
  if (!t || t->dtype != dt || t->rank > k) return 0;
  for (int i = 0; i < t->rank; i++) {
    int64_t w = alma__fuse_dim(c, x, i - t->rank);
    if (t->dims[i] != 1 && t->dims[i] != w) return 0;
  }
  return 1;
}

/* The optional affine step after a normalization: `op` (Mul or Add) consuming *cur with a constant
 * parameter fit for affine_ok. On a match *param gets it, *cur the step's output, and the node is
 * returned; else -1. */
static int affine_step(const alma__fuse_ctx *c, const char *op, int *cur, int x, int k, alma_dtype dt, int *param) {
  int m = next_is(c, *cur, op);
  if (m < 0) return -1;
  int p = alma__fuse_other_input(c, m, *cur);
  if (p < 0 || p == *cur || !affine_ok(c, p, x, k, dt) || !alma__fuse_same_shape(c, out0(c, m), x)) return -1;
  *param = p;
  *cur = out0(c, m);
  return m;
}

/* A new constant of ones over x's last k dims (the scale LayerNormalization and RMSNormalization
 * require); -1 when a dim is unknown, -2 out of memory. */
static int ones_over(alma__fuse_ctx *c, int x, int k, alma_dtype dt) {
  int64_t dims[ALMA_MAX_RANK];
  for (int i = 0; i < k; i++)
    if ((dims[i] = alma__fuse_dim(c, x, i - k)) < 0) return -1;
  alma_tensor *t;
  int v = alma__fuse_new_const(c, c->g->values[x].name, dt, k, dims, &t);
  if (v < 0) return -2;
  for (int64_t i = 0, n = alma_tensor_numel(t); i < n; i++) alma__set_f64(t->data, dt, i, 1.0);
  return v;
}

alma_status alma__fuse_rule_layernorm(alma__fuse_ctx *c, int r1) {
  if (!alma__fuse_is(c, r1, "", "ReduceMean")) return ALMA_OK;
  int x = c->g->nodes[r1].inputs[0], mu = out0(c, r1), R = alma__fuse_rank(c, x);
  alma_dtype dt = alma__fuse_dtype(c, x);
  int k = trailing_axes(c, r1, R);
  if (x < 0 || mu < 0 || k < 1 || !alma__dtype_is_float(dt)) return ALMA_OK;
  int sub = next_is(c, mu, "Sub");
  if (sub < 0 || c->g->nodes[sub].inputs[0] != x || c->g->nodes[sub].inputs[1] != mu) return ALMA_OK;
  int d = out0(c, sub), pw = -1, dv = -1;
  if (alma__fuse_uses(c, d) != 2 || c->g->values[d].is_output) return ALMA_OK;
  for (int i = 0; i < c->g->n_nodes; i++) {
    const alma_node *n = &c->g->nodes[i];
    if (n->dead || n->n_inputs != 2 || n->inputs[0] != d) continue;
    if (alma__fuse_is(c, i, "", "Pow")) pw = i;
    if (alma__fuse_is(c, i, "", "Div")) dv = i;
  }
  double e;
  if (pw < 0 || dv < 0 || with_scalar(c, pw, 1, &e) != d || e != 2.0) return ALMA_OK;
  int r2 = next_is(c, out0(c, pw), "ReduceMean");
  if (r2 < 0 || trailing_axes(c, r2, R) != k) return ALMA_OK;
  int ae = next_is(c, out0(c, r2), "Add");
  double eps;
  if (ae < 0 || with_scalar(c, ae, 0, &eps) != out0(c, r2) || !(eps >= 0)) return ALMA_OK;
  int sq = next_is(c, out0(c, ae), "Sqrt");
  if (sq < 0 || alma__fuse_only_consumer(c, out0(c, sq)) != dv || c->g->nodes[dv].inputs[1] != out0(c, sq))
    return ALMA_OK;
  int cur = out0(c, dv), gamma = -1, beta = -1;
  int mm = affine_step(c, "Mul", &cur, x, k, dt, &gamma), ab = affine_step(c, "Add", &cur, x, k, dt, &beta);
  if (!alma__fuse_same_shape(c, cur, x)) return ALMA_OK;
  if (gamma < 0 && (gamma = ones_over(c, x, k, dt)) < 0) return gamma == -2 ? ALMA_ERR_NOMEM : ALMA_OK;
  int in[3] = {x, gamma, beta};
  ALMA_TRY(alma__fuse_retype(c, r1, "", "LayerNormalization", 17));
  ALMA_TRY(alma__fuse_attr_clear(c, r1));
  ALMA_TRY(alma__fuse_attr_i(c, r1, "axis", -k));
  ALMA_TRY(alma__fuse_attr_f(c, r1, "epsilon", (float)eps));
  ALMA_TRY(alma__fuse_set_inputs(c, r1, in, 3));
  ALMA_TRY(alma__fuse_set_output(c, r1, cur));
  int dead[] = {sub, pw, r2, ae, sq, dv, mm, ab};
  for (int i = 0; i < (int)(sizeof dead / sizeof dead[0]); i++) alma__fuse_kill(c, dead[i]);
  alma__fuse_done(c, ALMA__FUSE_LN);
  return ALMA_OK;
}

/* ---- RMSNorm ----------------------------------------------------------------------------------- */

/* x times v, or x divided by v, as node `m` (Mul in either order, or Div(x, v)); else 0. */
static int scales_x(const alma__fuse_ctx *c, int m, int x, int v, int div) {
  const alma_node *n = &c->g->nodes[m];
  if (div) return n->inputs[0] == x && n->inputs[1] == v;
  return (n->inputs[0] == x && n->inputs[1] == v) || (n->inputs[0] == v && n->inputs[1] == x);
}

/* x * rsqrt(mean(x^2) + eps) as T5, LLaMA and most decoder-only models write it:
 *   Pow(x, 2) | Mul(x, x), ReduceMean (trailing axes), Add eps, Sqrt, then Div(x, ·), or
 *   Reciprocal | Div(1, ·) and Mul(x, ·); then [Mul gamma]   -> RMSNormalization (opset 23)
 * Anchored at the ReduceMean. */
alma_status alma__fuse_rule_rmsnorm(alma__fuse_ctx *c, int r) {
  if (!alma__fuse_is(c, r, "", "ReduceMean")) return ALMA_OK;
  int sqv = c->g->nodes[r].inputs[0], ms = out0(c, r);
  if (sqv < 0 || ms < 0 || alma__fuse_only_consumer(c, sqv) != r) return ALMA_OK;
  int pw = alma__fuse_producer(c, sqv, "", NULL), x = -1;
  double e;
  if (alma__fuse_is(c, pw, "", "Pow")) {
    x = with_scalar(c, pw, 1, &e);
    if (e != 2.0) return ALMA_OK;
  } else if (alma__fuse_is(c, pw, "", "Mul") && c->g->nodes[pw].n_inputs == 2 &&
             c->g->nodes[pw].inputs[0] == c->g->nodes[pw].inputs[1]) {
    x = c->g->nodes[pw].inputs[0];
  }
  int R = x >= 0 ? alma__fuse_rank(c, x) : -1;
  alma_dtype dt = x >= 0 ? alma__fuse_dtype(c, x) : ALMA_DTYPE_UNDEFINED;
  int k = R >= 1 ? trailing_axes(c, r, R) : -1;
  if (k < 1 || !alma__dtype_is_float(dt) || !alma__fuse_same_shape(c, sqv, x)) return ALMA_OK;
  int ae = next_is(c, ms, "Add");
  double eps;
  if (ae < 0 || with_scalar(c, ae, 0, &eps) != ms || !(eps >= 0)) return ALMA_OK;
  int sq = next_is(c, out0(c, ae), "Sqrt");
  if (sq < 0) return ALMA_OK;
  int s = out0(c, sq), m1 = alma__fuse_only_consumer(c, s), inv = -1, mx = -1;
  double one;
  if (alma__fuse_is(c, m1, "", "Div") && scales_x(c, m1, x, s, 1)) {
    mx = m1; /* x / sqrt(·) */
  } else if (alma__fuse_is(c, m1, "", "Reciprocal") ||
             (alma__fuse_is(c, m1, "", "Div") && c->g->nodes[m1].inputs[1] == s &&
              alma__fuse_scalar(c, c->g->nodes[m1].inputs[0], &one) && one == 1.0)) {
    inv = m1; /* x * (1 / sqrt(·)) */
    int m2 = next_is(c, out0(c, inv), "Mul");
    if (m2 >= 0 && scales_x(c, m2, x, out0(c, inv), 0)) mx = m2;
  }
  if (mx < 0 || out0(c, mx) < 0) return ALMA_OK;
  int cur = out0(c, mx), gamma = -1, mg = affine_step(c, "Mul", &cur, x, k, dt, &gamma);
  if (!alma__fuse_same_shape(c, cur, x)) return ALMA_OK;
  if (gamma < 0 && (gamma = ones_over(c, x, k, dt)) < 0) return gamma == -2 ? ALMA_ERR_NOMEM : ALMA_OK;
  int in[2] = {x, gamma};
  ALMA_TRY(alma__fuse_retype(c, r, "", "RMSNormalization", 23));
  ALMA_TRY(alma__fuse_attr_clear(c, r));
  ALMA_TRY(alma__fuse_attr_i(c, r, "axis", -k));
  ALMA_TRY(alma__fuse_attr_f(c, r, "epsilon", (float)eps));
  /* the statistics in float32 (double for double inputs), at least as precise as the subgraph */
  ALMA_TRY(alma__fuse_attr_i(c, r, "stash_type", dt == ALMA_DTYPE_FLOAT64 ? ALMA_DTYPE_FLOAT64 : ALMA_DTYPE_FLOAT32));
  ALMA_TRY(alma__fuse_set_inputs(c, r, in, 2));
  ALMA_TRY(alma__fuse_set_output(c, r, cur));
  int dead[] = {pw, ae, sq, inv, mx, mg};
  for (int i = 0; i < (int)(sizeof dead / sizeof dead[0]); i++) alma__fuse_kill(c, dead[i]);
  alma__fuse_done(c, ALMA__FUSE_RMS);
  return ALMA_OK;
}

/* ---- attention --------------------------------------------------------------------------------- */

/* If v (consumed only by `user`) is made by a Div/Mul by a scalar constant, multiplies *scale by
 * the factor, records the node and returns its other input; else returns v. */
static int strip_scale(const alma__fuse_ctx *c, int v, int user, double *scale, int *node) {
  *node = -1;
  if (alma__fuse_only_consumer(c, v) != user) return v;
  int p = alma__fuse_producer(c, v, "", NULL);
  double k;
  int x = -1;
  if (alma__fuse_is(c, p, "", "Div")) {
    x = with_scalar(c, p, 1, &k);
    if (x >= 0 && (k == 0 || !isfinite(k))) x = -1;
    if (x >= 0) k = 1.0 / k;
  } else if (alma__fuse_is(c, p, "", "Mul")) {
    x = with_scalar(c, p, 0, &k);
    if (x >= 0 && !isfinite(k)) x = -1;
  }
  if (x < 0) return v;
  *scale *= k;
  *node = p;
  return x;
}

/* ONNX's Attention (opset 23+) -> alma.Attention (onnx_mask=1: ONNX's mask rules), whose DNNL kernel
 * is the fast path, with plain graph nodes for what alma.Attention has no input for:
 *  - 3-D inputs [B, S, H*D]: Reshape to [B, S, H, D] and Transpose to [B, H, S, D]; the output back
 *    the same way (the DNNL runtime reads these transposes in place);
 *  - grouped-query heads (Hq = G * Hkv): Q viewed as [B, Hkv, G, Sq, D] and K, V as
 *    [B, Hkv, 1, T, D], so alma.Attention's batch broadcasting pairs each query head with its kv head
 *    without copying K or V (or, when the mask is the same for every query row, Q as
 *    [B, Hkv, G*Sq, D] against 4-D K, V); the output viewed back as [B, Hq, Sq, Dv];
 *  - the KV cache: present_key/value = Concat(past, new) on the sequence axis, attended over;
 *  - a bool mask: Where(mask, 0, -inf); a constant mask: one float constant padded to T;
 *  - is_causal: alma.Attention's causal mode (the kernels compute the frontier from the run-time
 *    lengths and skip the masked key blocks), offset by the past length as ONNX does: T - Sq when
 *    Sq = Skv is known, else through new_keys = the new K (its dim -2 is Skv), so sequence and past
 *    lengths may be dynamic; dropped when Sq = Skv = 1 (one decoded token sees every key).
 * It stays on the reference kernel for float types other than float32, softcap, sliding windows,
 * softmax in another precision, nonpad_kv_seqlen, the qk_matmul output, head counts or head sizes
 * not known when converting. */
typedef struct attn_rw {
  alma__fuse_ctx *c;
  const char *base; /* names of new nodes and values */
} attn_rw;

/* A new node op(x, extra...) -> fresh value (or `out` when >= 0); returns the value or -1 (error set). */
static int rw_node(attn_rw *w, const char *op, const int *in, int nin, int out) {
  int y = out >= 0 ? out : alma__fuse_new_value(w->c, w->base);
  if (y < 0 || alma__fuse_add_node(w->c, "", op, w->base, in, nin, &y, 1) < 0) return -1;
  return y;
}

static int rw_reshape(attn_rw *w, int x, const int64_t *shape, int rank, int out) {
  int sh = alma__fuse_new_ints(w->c, w->base, shape, rank);
  int in[2] = {x, sh};
  return sh < 0 ? -1 : rw_node(w, "Reshape", in, 2, out);
}

static int rw_transpose(attn_rw *w, int x, const int64_t *perm, int rank, int out) {
  int y = rw_node(w, "Transpose", &x, 1, out);
  if (y >= 0 && alma__fuse_attr_ints(w->c, w->c->g->values[y].producer, "perm", perm, rank) != ALMA_OK) return -1;
  return y;
}

/* 3-D [B, S, H*E] -> [B, H, S, E] or, with G > 1, [B, H, G, S, E] (H heads of G groups). */
static int rw_heads_in(attn_rw *w, int x, int64_t H, int64_t G, int64_t E) {
  int64_t s4[4] = {0, 0, H, E}, s5[5] = {0, 0, H, G, E}, p4[4] = {0, 2, 1, 3}, p5[5] = {0, 2, 3, 1, 4};
  int r = G > 1 ? 5 : 4, t = rw_reshape(w, x, G > 1 ? s5 : s4, r, -1);
  return t < 0 ? -1 : rw_transpose(w, t, G > 1 ? p5 : p4, r, -1);
}

/* A constant mask in alma.Attention's terms: float32 0 / -inf (or the float mask's values), keys past
 * a shorter mask's last dim -inf (ONNX pads it). Its shape is the mask's with the last dim T. */
static int mask_const(attn_rw *w, const alma_tensor *m, int64_t T) {
  int rank = m->rank;
  int64_t d[ALMA_MAX_RANK];
  memcpy(d, m->dims, sizeof(int64_t) * (size_t)rank);
  int64_t ML = m->dims[rank - 1];
  d[rank - 1] = T;
  alma_tensor *t;
  int v = alma__fuse_new_const(w->c, w->base, ALMA_DTYPE_FLOAT32, rank, d, &t);
  if (v < 0) return -1;
  float *o = t->data;
  int64_t n = alma_tensor_numel(t);
  for (int64_t e = 0; e < n; e++) {
    int64_t j = e % T, mi = e / T * ML + j;
    o[e] = j >= ML ? -INFINITY
           : m->dtype == ALMA_DTYPE_BOOL ? (((const uint8_t *)m->data)[mi] ? 0.0f : -INFINITY)
                                        : ((const float *)m->data)[mi];
  }
  return v;
}

static alma_status onnx_attention(alma__fuse_ctx *c, int ai) {
  const alma_node *n = &c->g->nodes[ai];
  int in[7];
  for (int i = 0; i < 7; i++) in[i] = i < n->n_inputs ? n->inputs[i] : -1;
  int q = in[0], k = in[1], v = in[2], mask = in[3], pk = in[4], pv = in[5];
  if (in[6] >= 0 || (pk >= 0) != (pv >= 0)) return ALMA_OK; /* nonpad_kv_seqlen */
  int y = out0(c, ai), pres[2] = {-1, -1};
  for (int o = 1; o < n->n_outputs && o < 3; o++) pres[o - 1] = n->outputs[o];
  if (n->n_outputs > 3 && n->outputs[3] >= 0 && alma__fuse_uses(c, n->outputs[3])) return ALMA_OK;
  for (int o = 0; o < 2; o++) /* present without past is K (V) itself: not worth a rewrite */
    if (pk < 0 && pres[o] >= 0 && alma__fuse_uses(c, pres[o])) return ALMA_OK;
  if (q < 0 || k < 0 || v < 0 || y < 0) return ALMA_OK;
  if (alma__attr_f(n, "softcap", 0.0f) != 0.0f || alma__attr_i(n, "softmax_precision", 1) != 1 ||
      alma__attr_i(n, "left_window_size", -1) != -1 || alma__attr_i(n, "right_window_size", -1) != -1)
    return ALMA_OK;
  int r = alma__fuse_rank(c, q);
  const int vals[5] = {q, k, v, pk, pv};
  for (int i = 0; i < 5; i++)
    if (vals[i] >= 0 && (alma__fuse_rank(c, vals[i]) != (i < 3 ? r : 4) || alma__fuse_dtype(c, vals[i]) != ALMA_DTYPE_FLOAT32))
      return ALMA_OK;
  int64_t Hq, Hkv, D, Dv, Sq, Skv;
  if (r == 4) {
    Hq = alma__fuse_dim(c, q, 1), Hkv = alma__fuse_dim(c, k, 1), D = alma__fuse_dim(c, q, 3);
    Dv = alma__fuse_dim(c, v, 3), Sq = alma__fuse_dim(c, q, 2), Skv = alma__fuse_dim(c, k, 2);
    if (alma__fuse_dim(c, v, 1) != Hkv) return ALMA_OK;
  } else if (r == 3) {
    Hq = alma__attr_i(n, "q_num_heads", 0), Hkv = alma__attr_i(n, "kv_num_heads", 0);
    int64_t hq = alma__fuse_dim(c, q, 2), hk = alma__fuse_dim(c, k, 2), hv = alma__fuse_dim(c, v, 2);
    if (Hq < 1 || Hkv < 1 || hq < 1 || hk < 1 || hv < 1 || hq % Hq || hk % Hkv || hv % Hkv || hq / Hq != hk / Hkv)
      return ALMA_OK;
    D = hq / Hq, Dv = hv / Hkv, Sq = alma__fuse_dim(c, q, 1), Skv = alma__fuse_dim(c, k, 1);
  } else
    return ALMA_OK;
  if (Hq < 1 || Hkv < 1 || Hq % Hkv || D < 1 || Dv < 1) return ALMA_OK;
  int64_t G = Hq / Hkv, P = pk >= 0 ? alma__fuse_dim(c, pk, 2) : 0;
  if (pk >= 0 && (alma__fuse_dim(c, pk, 1) != Hkv || alma__fuse_dim(c, pv, 1) != Hkv ||
                  alma__fuse_dim(c, pk, 3) != D || alma__fuse_dim(c, pv, 3) != Dv))
    return ALMA_OK;
  int64_t T = P >= 0 && Skv >= 0 ? P + Skv : -1; /* total keys, -1: not known */
  int causal = alma__attr_i(n, "is_causal", 0) != 0;
  const alma_tensor *mc = mask >= 0 ? alma__fuse_const(c, mask) : NULL;
  alma_dtype mdt = mask >= 0 ? alma__fuse_dtype(c, mask) : ALMA_DTYPE_FLOAT32;
  int mrank = mask >= 0 ? alma__fuse_rank(c, mask) : 0;
  if (mask >= 0 && ((mdt != ALMA_DTYPE_FLOAT32 && mdt != ALMA_DTYPE_BOOL) || mrank < 1 || mrank > 4)) return ALMA_OK;
  /* One query over one new key sees every key (j <= 0 + past length): decoding's is_causal is a no-op */
  if (causal && Sq == 1 && Skv == 1) causal = 0;
  /* is_causal becomes alma.Attention's causal mode, computed by the kernels from the run-time lengths
   * (skipping the masked key blocks), not a constant [Sq, T] mask; ONNX's offset is the past length
   * T - Skv, which is the kernel's T - Sq when Sq = Skv is known, else given by new_keys' shape. */
  int64_t Sknew = pk >= 0 ? Skv : T;
  int nk = causal && !(Sq >= 1 && Sq == Sknew) ? k : -1;
  if (mc && (mc->rank < 1 || mc->dims[mc->rank - 1] < 1 || (T >= 0 && mc->dims[mc->rank - 1] > T))) return ALMA_OK;
  int fold = mc && T >= 1; /* the mask becomes a new constant, padded to T */
  /* With G > 1 a mask of rank >= 3 has its head axis split like Q's heads by a Reshape, which needs
   * the mask's query dim: all checked here, before any node is added. */
  int mr = mrank;
  int64_t mh = mr >= 3 ? (mc ? mc->dims[mc->rank - 3] : alma__fuse_dim(c, mask, mr - 3)) : 1;
  int64_t mq = mr >= 2 ? (mc ? mc->dims[mc->rank - 2] : alma__fuse_dim(c, mask, mr - 2)) : 1;
  if (G > 1 && mr >= 3 && mh != 1 && (mh != Hq || mq < 1)) return ALMA_OK;
  /* With a mask the same for every head and query (or none), the G query heads of a kv head are
   * just more rows: Q [B, Hkv, G*Sq, D] against K, V [B, Hkv, T, D], a plain 4-D attention (decoding
   * one token, [.., 1, D] per head, is otherwise G tiny products per kv head). Not under causal,
   * whose frontier moves with the query row. */
  int flat = G > 1 && !causal && (mask < 0 || (mq == 1 && (mr < 3 || mh == 1)));

  attn_rw w = {c, c->g->values[y].name};
  /* Q, K, V in [B, H(, G), S, E] */
  int64_t q5[5] = {0, Hkv, G, -1, D}, kv5[5] = {0, Hkv, 1, -1, 0};
  int Q = q, K = k, V = v;
  if (r == 3) {
    if ((Q = rw_heads_in(&w, q, Hkv, G, D)) < 0 || (K = rw_heads_in(&w, k, Hkv, 1, D)) < 0 ||
        (V = rw_heads_in(&w, v, Hkv, 1, Dv)) < 0)
      return ALMA_ERR_NOMEM;
  } else if (G > 1 && (Q = rw_reshape(&w, q, q5, 5, -1)) < 0)
    return ALMA_ERR_NOMEM;
  int64_t q4[4] = {0, Hkv, -1, D};
  if (flat && (Q = rw_reshape(&w, Q, q4, 4, -1)) < 0) return ALMA_ERR_NOMEM;
  if (pk >= 0) { /* present = Concat(past, new) on the sequence axis, in the 4-D layout */
    int64_t ax = 2;
    int ck[2] = {pk, K}, cv[2] = {pv, V};
    if ((K = rw_node(&w, "Concat", ck, 2, pres[0])) < 0 || (V = rw_node(&w, "Concat", cv, 2, pres[1])) < 0)
      return ALMA_ERR_NOMEM;
    if (alma__fuse_attr_i(c, c->g->values[K].producer, "axis", ax) != ALMA_OK ||
        alma__fuse_attr_i(c, c->g->values[V].producer, "axis", ax) != ALMA_OK)
      return ALMA_ERR_NOMEM;
  }
  if (G > 1 && !flat) { /* K, V [B, Hkv, T, E] -> [B, Hkv, 1, T, E] */
    kv5[4] = D;
    if ((K = rw_reshape(&w, K, kv5, 5, -1)) < 0) return ALMA_ERR_NOMEM;
    kv5[4] = Dv;
    if ((V = rw_reshape(&w, V, kv5, 5, -1)) < 0) return ALMA_ERR_NOMEM;
  }
  /* the mask, additive float32, broadcasting against [B, Hq (or Hkv, G), Sq, T] */
  int M = mask;
  if (fold) {
    if ((M = mask_const(&w, mc, T)) < 0) return ALMA_ERR_NOMEM;
  } else if (mask >= 0 && mdt == ALMA_DTYPE_BOOL) {
    alma_tensor *t0, *t1;
    int z = alma__fuse_new_const(c, w.base, ALMA_DTYPE_FLOAT32, 0, NULL, &t0);
    int ninf = z < 0 ? -1 : alma__fuse_new_const(c, w.base, ALMA_DTYPE_FLOAT32, 0, NULL, &t1);
    if (ninf < 0) return ALMA_ERR_NOMEM;
    *(float *)t1->data = -INFINITY;
    int wi[3] = {mask, z, ninf};
    if ((M = rw_node(&w, "Where", wi, 3, -1)) < 0) return ALMA_ERR_NOMEM;
  }
  if (M >= 0 && G > 1 && !flat && mr >= 3) {
    /* [.., 1, Sq', T'] -> [.., 1, 1, Sq', T'] (Unsqueeze), [.., Hq, Sq', T'] -> [.., Hkv, G, Sq', T']
     * (Reshape, whose 0 keeps a leading dim) */
    int64_t sh[ALMA_MAX_RANK], ax = mr - 2;
    for (int i = 0; i < mr - 3; i++) sh[i] = 0;
    sh[mr - 3] = Hkv, sh[mr - 2] = G, sh[mr - 1] = mq, sh[mr] = -1;
    int axes = mh == 1 ? alma__fuse_new_ints(c, w.base, &ax, 1) : -1, ui[2] = {M, axes};
    if (mh == 1 ? axes < 0 || (M = rw_node(&w, "Unsqueeze", ui, 2, -1)) < 0 : (M = rw_reshape(&w, M, sh, mr + 1, -1)) < 0)
      return ALMA_ERR_NOMEM;
  }
  /* the output [B, Hkv(, G), Sq, Dv] back to y's layout */
  int Y = y;
  if (r == 3 || G > 1) Y = alma__fuse_new_value(c, w.base);
  if (Y < 0) return ALMA_ERR_NOMEM;
  if (r == 3) {
    int64_t p4[4] = {0, 2, 1, 3}, p5[5] = {0, 3, 1, 2, 4}, s3[3] = {0, 0, Hq * Dv}, y5[5] = {0, Hkv, G, -1, Dv};
    int t = flat ? rw_reshape(&w, Y, y5, 5, -1) : Y;
    if (t >= 0) t = rw_transpose(&w, t, G > 1 ? p5 : p4, G > 1 ? 5 : 4, -1);
    if (t < 0 || rw_reshape(&w, t, s3, 3, y) < 0) return ALMA_ERR_NOMEM;
  } else if (G > 1) {
    int64_t s4[4] = {0, Hq, -1, Dv};
    if (rw_reshape(&w, Y, s4, 4, y) < 0) return ALMA_ERR_NOMEM;
  }
  n = &c->g->nodes[ai]; /* nodes may have moved */
  const alma_attr *sa = alma__node_attr(n, "scale");
  float scale = sa && sa->type == ALMA_ATTR_FLOAT ? sa->f : 0.0f;
  ALMA_TRY(alma__fuse_retype(c, ai, "alma", "Attention", 1));
  ALMA_TRY(alma__fuse_attr_clear(c, ai));
  if (sa) ALMA_TRY(alma__fuse_attr_f(c, ai, "scale", scale)); /* else both default to 1/sqrt(D) */
  ALMA_TRY(alma__fuse_attr_i(c, ai, "onnx_mask", 1));
  if (causal) ALMA_TRY(alma__fuse_attr_i(c, ai, "causal", 1));
  int ain[5] = {Q, K, V, M, nk};
  ALMA_TRY(alma__fuse_set_inputs(c, ai, ain, 5));
  ALMA_TRY(alma__fuse_set_output(c, ai, Y));
  alma__fuse_done(c, ALMA__FUSE_ATTN);
  return ALMA_OK;
}


/* The mask chain of an attention's scores: the ops between the scores (MatMul, possibly scaled) and
 * the Softmax, nearest the Softmax first, each reading the running scores in one input:
 *   Add(x, m)             an additive mask or bias (float, e.g. ALiBi, a padding mask);
 *   Where(b, x, c), Where(b, c, x)   the causal or padding mask as transformers applies it, c the
 *                         dtype's lowest value (finfo.min) or -inf;
 *   Max(x, c)             the clamp OPT and LLaMA (4.30) apply after adding their mask, same c.
 * Each is f(x) = x + f(0) for the scores x: exactly for Add, and for the others because x + c is c
 * once rounded (float32's lowest is -3.4e38, whose ulp is 2^104; scores below 1e31 in magnitude
 * vanish in it), and exp(c - max) = exp(-inf - max) = 0 in a row with any score above c. A row whose
 * every score is masked is where the forms differ, and there x + c = c still holds: the original
 * gives the same (uniform) softmax over the same values. Float16's lowest (-65504) does not absorb
 * scores, so only float32 and double chains are taken beyond plain Adds. */
typedef struct attn_chain {
  int n, node[8], slot[8]; /* nodes (nearest the Softmax first) and the input holding the scores */
  int scores;               /* the value entering the chain */
} attn_chain;

/* c is -inf or the lowest finite value of float type dt. */
static int absorbing(const alma__fuse_ctx *c, int v, alma_dtype dt) {
  double k;
  if (!alma__fuse_scalar(c, v, &k) || alma__fuse_dtype(c, v) != dt) return 0;
  return k == -INFINITY || (dt == ALMA_DTYPE_FLOAT32 && k == -(double)FLT_MAX) ||
         (dt == ALMA_DTYPE_FLOAT64 && k == -DBL_MAX);
}

/* Whether v comes (through scales, chain ops and views, single consumers) from a MatMul: the scores side. */
static int from_scores(const alma__fuse_ctx *c, int v, int depth) {
  int p = alma__fuse_producer(c, v, "", NULL);
  if (p < 0 || depth > 10) return 0;
  if (alma__fuse_is(c, p, "", "MatMul")) return 1;
  static const char *const through[] = {"Add", "Where", "Max", "Div", "Mul", "Reshape"};
  int ok = 0;
  for (int k = 0; k < 6; k++) ok |= alma__fuse_is(c, p, "", through[k]);
  if (!ok) return 0;
  const alma_node *n = &c->g->nodes[p];
  for (int i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] >= 0 && alma__fuse_only_consumer(c, n->inputs[i]) == p && from_scores(c, n->inputs[i], depth + 1))
      return 1;
  return 0;
}

static int mask_chain(const alma__fuse_ctx *c, int cur, int user, alma_dtype dt, attn_chain *ch) {
  memset(ch, 0, sizeof *ch);
  int absorb_ok = dt == ALMA_DTYPE_FLOAT32 || dt == ALMA_DTYPE_FLOAT64, out = cur;
  for (;;) {
    if (alma__fuse_only_consumer(c, cur) != user) return 0;
    int p = alma__fuse_producer(c, cur, "", NULL), slot = -1;
    if (p < 0 || ch->n == 8) break;
    const alma_node *n = &c->g->nodes[p];
    if (alma__fuse_is(c, p, "", "Add") && n->n_inputs == 2) {
      for (int side = 0; side < 2; side++) {
        int t = n->inputs[side], m = n->inputs[1 - side];
        if (t < 0 || m < 0 || t == m || alma__fuse_only_consumer(c, t) != p || !from_scores(c, t, 0)) continue;
        if (alma__fuse_dtype(c, m) != dt || slot >= 0) return 0; /* both sides look like scores */
        slot = side;
      }
    } else if (absorb_ok && alma__fuse_is(c, p, "", "Where") && n->n_inputs == 3) {
      if (alma__fuse_dtype(c, n->inputs[0]) != ALMA_DTYPE_BOOL) return 0;
      if (absorbing(c, n->inputs[2], dt)) slot = 1;
      else if (absorbing(c, n->inputs[1], dt)) slot = 2;
      else return 0; /* a mask value that does not absorb the scores */
    } else if (absorb_ok && alma__fuse_is(c, p, "", "Max") && n->n_inputs == 2) {
      if (absorbing(c, n->inputs[1], dt)) slot = 0;
      else if (absorbing(c, n->inputs[0], dt)) slot = 1;
      else return 0;
    }
    if (slot < 0) break;
    ch->node[ch->n] = p, ch->slot[ch->n++] = slot;
    user = p, cur = n->inputs[slot];
  }
  ch->scores = cur;
  /* the chain keeps the scores' shape (a mask does not broadcast them up) and dtype */
  return !ch->n || (alma__fuse_same_shape(c, cur, out) && alma__fuse_dtype(c, cur) == dt);
}

/* Whether a one-node chain is Where(b, x, c) (or Where(!b, c, x)) with b, in both bindings, known
 * and exactly the causal pattern: query i of Sq sees key j of Sk iff j <= i + Sk - Sq (what
 * transformers slices out of its lower-triangular buffer, at [past : past + Sq, : past + Sq]),
 * with Sk >= Sq so that no row is fully masked. alma.Attention's causal mode is then the same. */
static int chain_causal(const alma__fuse_ctx *c, const attn_chain *ch, int s) {
  const alma_node *n = &c->g->nodes[ch->node[0]];
  if (!alma__fuse_is(c, ch->node[0], "", "Where")) return 0;
  int keep = ch->slot[0] == 1; /* true keeps the score */
  for (int b = 0; b < 2; b++) {
    const alma_tensor *m = alma__fuse_info(c, n->inputs[0], b), *st = alma__fuse_info(c, s, b);
    if (!m || !st || !m->data || m->dtype != ALMA_DTYPE_BOOL || m->rank < 2 || st->rank < 2) return 0;
    int64_t Sq = st->dims[st->rank - 2], Sk = st->dims[st->rank - 1];
    if (Sk < Sq || m->dims[m->rank - 2] != Sq || m->dims[m->rank - 1] != Sk || alma_tensor_numel(m) != Sq * Sk) return 0;
    const uint8_t *d = m->data;
    for (int64_t i = 0; i < Sq; i++)
      for (int64_t j = 0; j < Sk; j++)
        if ((d[i * Sk + j] != 0) != (keep == (j <= i + Sk - Sq))) return 0;
  }
  return 1;
}


/* x [B*H, S, E] is y [B, H, S, E] with its first two dims merged, in both bindings. */
static int splits_heads(const alma__fuse_ctx *c, int x, int y) {
  for (int b = 0; b < 2; b++) {
    const alma_tensor *a = alma__fuse_info(c, x, b), *t = alma__fuse_info(c, y, b);
    if (!a || !t || a->rank != 3 || t->rank != 4 || a->dims[0] != t->dims[0] * t->dims[1] || a->dims[1] != t->dims[2] ||
        a->dims[2] != t->dims[3])
      return 0;
  }
  return 1;
}

/* x [B, S*H, E] is y [B, S, H, E] with its second dim split, in both bindings (GPTBigCode's
 * multi-query scores, one row per query position and head). */
static int splits_rows(const alma__fuse_ctx *c, int x, int y) {
  for (int b = 0; b < 2; b++) {
    const alma_tensor *a = alma__fuse_info(c, x, b), *t = alma__fuse_info(c, y, b);
    if (!a || !t || a->rank != 3 || t->rank != 4 || a->dims[0] != t->dims[0] || a->dims[1] != t->dims[1] * t->dims[2] ||
        a->dims[2] != t->dims[3])
      return 0;
  }
  return 1;
}

/* x's first two dims are y's, in both bindings. */
static int same_batch(const alma__fuse_ctx *c, int x, int y) {
  for (int b = 0; b < 2; b++) {
    const alma_tensor *a = alma__fuse_info(c, x, b), *t = alma__fuse_info(c, y, b);
    if (!a || !t || a->rank < 2 || t->rank < 2 || a->dims[0] != t->dims[0] || a->dims[1] != t->dims[1]) return 0;
  }
  return 1;
}

/* x is 3-D with dim 0 equal to y's, in both bindings. */
static int same_dim0(const alma__fuse_ctx *c, int x, int y) {
  for (int b = 0; b < 2; b++) {
    const alma_tensor *a = alma__fuse_info(c, x, b), *t = alma__fuse_info(c, y, b);
    if (!a || !t || a->rank != 3 || t->rank < 1 || a->dims[0] != t->dims[0]) return 0;
  }
  return 1;
}

/* v is known, in both bindings, to be float zeros (baddbmm's zero input, whatever its shape). */
static int all_zero(const alma__fuse_ctx *c, int v) {
  for (int b = 0; b < 2; b++) {
    const alma_tensor *t = alma__fuse_info(c, v, b);
    if (!t || !t->data || !alma__dtype_is_float(t->dtype)) return 0;
    for (int64_t i = 0, n = alma_tensor_numel(t); i < n; i++)
      if (alma__get_f64(t->data, t->dtype, i) != 0.0) return 0;
  }
  return 1;
}

/* z, added to the 3-D scores x [B*H, S, T] by baddbmm, is a bias the attention can take as (part
 * of) its mask once viewed as [B, H, ., .]: 3-D, dim 0 B*H, the others 1 or x's (BLOOM's ALiBi
 * [B*H, 1, T]), in both bindings, and not computed from the scores. */
static int heads_bias(const alma__fuse_ctx *c, int z, int x, alma_dtype dt) {
  if (alma__fuse_dtype(c, z) != dt || from_scores(c, z, 0)) return 0;
  for (int b = 0; b < 2; b++) {
    const alma_tensor *a = alma__fuse_info(c, z, b), *t = alma__fuse_info(c, x, b);
    if (!a || !t || a->rank != 3 || t->rank != 3 || a->dims[0] != t->dims[0] || (a->dims[1] != 1 && a->dims[1] != t->dims[1]) ||
        (a->dims[2] != 1 && a->dims[2] != t->dims[2]))
      return 0;
  }
  return 1;
}

/* Unsqueeze(x, [ax]) in the model's opset's form (axes an attribute before opset 13, an input from it). */
static int rw_unsqueeze(attn_rw *w, int x, int64_t ax) {
  int in[2] = {x, -1}, nin = 1;
  if (alma__graph_opset(w->c->g, "") >= 13) {
    if ((in[1] = alma__fuse_new_ints(w->c, w->base, &ax, 1)) < 0) return -1;
    nin = 2;
  }
  int y = rw_node(w, "Unsqueeze", in, nin, -1);
  if (y >= 0 && nin == 1 && alma__fuse_attr_ints(w->c, w->c->g->values[y].producer, "axes", &ax, 1) != ALMA_OK) return -1;
  return y;
}

/* x [B*H, M, N] viewed as [B, H, M, N]: Unsqueeze to [B*H, 1, M, N], then Reshape [-1, H, 0, 0]
 * (its zeros copy M and N, whatever they are at run time; no shape subgraph needed). */
static int rw_split_heads(attn_rw *w, int x, int64_t H) {
  int64_t s[4] = {-1, H, 0, 0};
  int u = rw_unsqueeze(w, x, 1);
  return u < 0 ? -1 : rw_reshape(w, u, s, 4, -1);
}

/* The 4-D [B, H, ., .] form of x [B*H, ., .] as the attention reads it: the 4-D tensor x is a view
 * of (*src; *view is that Reshape when x has no other reader, to be removed), or x to be viewed
 * (*src = -1) when it is 3-D with the scores' dim 0 (checked against x3 [B*H, S, T]). */
static int heads_source(const alma__fuse_ctx *c, int x, int reader, int s4, int x3, int *src, int *view) {
  *src = -1, *view = -1;
  int r = alma__fuse_producer(c, x, "", "Reshape");
  if (r >= 0) {
    int x4 = c->g->nodes[r].inputs[0];
    if (splits_heads(c, x, x4) && same_batch(c, x4, s4)) {
      *src = x4;
      if (alma__fuse_only_consumer(c, x) == reader) *view = r; /* else still read elsewhere: kept */
      return 1;
    }
  }
  return same_dim0(c, x, x3);
}

/* The Reshape reading v (as its data) when v's other readers are all Shape nodes (*n_shapes of
 * them: BLOOM's _merge_heads reads the product's shape), v is no graph output and no subgraph
 * reads it; else -1. */
static int reshape_besides_shapes(const alma__fuse_ctx *c, int v, int *n_shapes) {
  const alma_graph *g = c->g;
  int r = -1;
  *n_shapes = 0;
  if (v < 0 || g->values[v].is_output) return -1;
  for (int i = 0; i < g->n_nodes; i++) {
    const alma_node *n = &g->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->n_implicit; k++)
      if (n->implicit_inputs[k] == v) return -1;
    int reads = 0;
    for (int k = 0; k < n->n_inputs; k++) reads += n->inputs[k] == v;
    if (!reads) continue;
    if (alma__fuse_is(c, i, "", "Shape") && reads == 1) {
      (*n_shapes)++;
    } else if (alma__fuse_is(c, i, "", "Reshape") && reads == 1 && n->inputs[0] == v && r < 0 && out0(c, i) >= 0) {
      r = i;
    } else {
      return -1;
    }
  }
  return r;
}

alma_status alma__fuse_rule_attention(alma__fuse_ctx *c, int smi) {
  if (alma__fuse_is(c, smi, "", "Attention")) return onnx_attention(c, smi);
  if (!alma__fuse_is(c, smi, "", "Softmax")) return ALMA_OK;
  const alma_node *sm = &c->g->nodes[smi];
  int s = sm->inputs[0], p = out0(c, smi), r = alma__fuse_rank(c, s);
  alma_dtype dt = alma__fuse_dtype(c, s);
  if (s < 0 || p < 0 || r < 2 || !alma__dtype_is_float(dt)) return ALMA_OK;
  int64_t axis = alma__attr_i(sm, "axis", sm->since_version >= 13 ? -1 : 1);
  if (axis != r - 1 && axis != -1) return ALMA_OK;
  /* Casts of the probabilities to the type they have (LLaMA's and BLOOM's softmax(dtype=float32)
   * .to(dtype)), which FOLD would remove, are seen through: FUSE alone fuses these exports too */
  int casts[4], ncast = 0;
  for (int ci; ncast < 4 && (ci = next_is(c, p, "Cast")) >= 0 && alma__fuse_dtype(c, out0(c, ci)) == dt;)
    casts[ncast++] = ci, p = out0(c, ci);
  /* The probabilities may reach the product with V through a 3-D view (pform): [B, H, S, T] as
   * [B*H, S, T] (BLOOM, 1) or [B, S, H, T] as [B, S*H, T] (GPTBigCode's multi-query heads, 2). */
  int m2 = next_is(c, p, "MatMul"), pview = -1, pform = 0, pin = p, oview = -1, yshapes = 0;
  if (m2 < 0) {
    int pr = next_is(c, p, "Reshape");
    if (pr < 0 || c->g->nodes[pr].inputs[0] != p) return ALMA_OK;
    pin = out0(c, pr);
    if ((m2 = next_is(c, pin, "MatMul")) < 0) return ALMA_OK;
    /* BLOOM's product [B*H, S, Dv] is viewed back as [B, H, S, Dv]: the attention writes that view.
     * With one query position both views of the probabilities hold: that Reshape tells them apart. */
    int y3 = out0(c, m2), yo = reshape_besides_shapes(c, y3, &yshapes);
    if (splits_heads(c, pin, p) && yo >= 0 && splits_heads(c, y3, out0(c, yo)) && same_batch(c, out0(c, yo), p))
      pform = 1, oview = yo;
    else if (splits_rows(c, pin, p))
      pform = 2;
    else
      return ALMA_OK;
    pview = pr;
  }
  if (c->g->nodes[m2].inputs[0] != pin || c->g->nodes[m2].inputs[1] == pin) return ALMA_OK;
  int v = c->g->nodes[m2].inputs[1];
  double scale = 1.0;
  int cur = s, user = smi, mask = -1, sc = -1, qs = -1, ks = -1, tp = -1, causal = 0;
  if (alma__fuse_only_consumer(c, cur) != user) return ALMA_OK;
  /* OPT's bmm form: the Softmax over a [B*H, S, T] view of the masked 4-D scores [B, H, S, T]
   * (the rows are the same, so is their softmax), times V viewed as [B*H, T, Dv], the product
   * viewed back as [B, H, S, Dv]: attended in 4-D (V's view read through, the output written as
   * the 4-D view) */
  int s4 = s, mview = -1, vview = -1;
  int rs = pform ? -1 : alma__fuse_producer(c, s, "", "Reshape");
  if (rs >= 0 && splits_heads(c, s, c->g->nodes[rs].inputs[0])) {
    int yo = alma__fuse_only_consumer(c, out0(c, m2)), vr = alma__fuse_producer(c, v, "", "Reshape");
    if (!alma__fuse_is(c, yo, "", "Reshape") || vr < 0 || out0(c, yo) < 0) return ALMA_OK;
    int v4 = c->g->nodes[vr].inputs[0], s4c = c->g->nodes[rs].inputs[0];
    if (!splits_heads(c, v, v4) || !splits_heads(c, out0(c, m2), out0(c, yo)) || !same_batch(c, v4, s4c) ||
        !same_batch(c, out0(c, yo), s4c))
      return ALMA_OK;
    mview = rs, oview = yo, s4 = cur = s4c, user = rs;
    vview = alma__fuse_only_consumer(c, v) == m2 ? vr : -1; /* still read elsewhere: kept */
    v = v4;
    if (alma__fuse_only_consumer(c, cur) != user) return ALMA_OK;
  }
  /* The mask chain between the scores and the Softmax (mask_chain says which forms). */
  attn_chain ch;
  if (!mask_chain(c, cur, user, dt, &ch)) return ALMA_OK;
  if (ch.n) cur = ch.scores, user = ch.node[ch.n - 1];
  /* baddbmm: the scores of 3-D Q and K (plus baddbmm's input) viewed as 4-D: [B*H, S, T] as
   * [B, H, S, T] (sform 1: GPT-NeoX with zeros added, OPT, BLOOM with its ALiBi added) or
   * [B, S*H, T] as [B, S, H, T] (2: GPTBigCode, zeros added). Attended in 4-D (see below). */
  int view = -1, sform = 0, zadd = -1, zterm = -1, bias = -1;
  int rv = alma__fuse_producer(c, cur, "", "Reshape");
  if (rv >= 0 && alma__fuse_only_consumer(c, cur) == user) {
    int x3 = c->g->nodes[rv].inputs[0];
    sform = pform == 2 ? (splits_rows(c, x3, cur) ? 2 : 0) : splits_heads(c, x3, cur) ? 1 : 0;
    if (sform) view = rv, user = rv, s4 = cur, cur = x3;
  }
  if (pform && sform != pform) return ALMA_OK; /* a 3-D product with V needs 3-D scores of the same view */
  if (sform) {
    int x3 = cur, za = alma__fuse_producer(c, cur, "", "Add");
    for (int side = 0; za >= 0 && zadd < 0 && side < 2 && alma__fuse_only_consumer(c, cur) == user; side++) {
      int x = c->g->nodes[za].inputs[side], z = c->g->nodes[za].inputs[1 - side];
      if (x < 0 || z < 0 || x == z || !alma__fuse_same_shape(c, x, x3)) continue;
      if (all_zero(c, z)) zadd = za, zterm = z, user = za, cur = x;
      else if (sform == 1 && heads_bias(c, z, x, dt)) zadd = za, bias = z, user = za, cur = x;
    }
  }
  int x3 = cur; /* the 3-D scores [B*H, S, T] (sform 1), before baddbmm's input is added */
  int next = strip_scale(c, cur, user, &scale, &sc);
  if (sc >= 0) user = sc, cur = next;
  int m1 = alma__fuse_producer(c, cur, "", "MatMul");
  if (m1 < 0 || alma__fuse_only_consumer(c, cur) != user || c->g->nodes[m1].n_inputs != 2) return ALMA_OK;
  int q = c->g->nodes[m1].inputs[0], kt = c->g->nodes[m1].inputs[1];
  if (q < 0 || kt < 0 || q == kt) return ALMA_OK;
  q = strip_scale(c, q, m1, &scale, &qs);
  kt = strip_scale(c, kt, m1, &scale, &ks);
  int key = kt, k_transposed = 1;
  int t = alma__fuse_producer(c, kt, "", "Transpose");
  if (t >= 0 && alma__fuse_only_consumer(c, kt) == (ks >= 0 ? ks : m1)) {
    int src = c->g->nodes[t].inputs[0], rk = alma__fuse_rank(c, src);
    const int64_t *perm;
    int np = alma__attr_ints(&c->g->nodes[t], "perm", &perm), swap = rk >= 2 && np == rk;
    for (int i = 0; swap && i < rk; i++) swap = perm[i] == (i < rk - 2 ? i : i == rk - 2 ? rk - 1 : rk - 2);
    if (swap) key = src, k_transposed = 0, tp = t;
  }
  /* Q, K (and, for BLOOM, V) in 4-D: a 4-D tensor they are views of, or new views of them */
  int qv = -1, kv = -1, vv = -1, q4 = -1, k4 = -1, v4 = -1, mqa_tr = 0;
  int64_t Hs = sform ? alma__fuse_dim(c, s4, sform == 1 ? 1 : 2) : 0; /* heads, known */
  if (sform && Hs < 1) return ALMA_OK;
  if (sform == 1) {
    if (!heads_source(c, q, qs >= 0 ? qs : m1, s4, x3, &q4, &qv) ||
        !heads_source(c, key, tp >= 0 ? tp : ks >= 0 ? ks : m1, s4, x3, &k4, &kv) ||
        (pform == 1 && !heads_source(c, v, m2, s4, x3, &v4, &vv)))
      return ALMA_OK;
    if (q4 >= 0) q = q4;
    if (k4 >= 0) key = k4;
    if (v4 >= 0) v = v4;
  } else if (sform == 2) {
    /* Q [B, S*H, D] viewed as [B, S, H, D]; the one K and V [B, T, .] as [B, 1, T, .], which the
     * attention's batch dims broadcast over the query positions */
    if (alma__fuse_rank(c, q) != 3 || alma__fuse_rank(c, key) != 3 || alma__fuse_rank(c, v) != 3 ||
        alma__fuse_dim(c, q, 2) < 1 || alma__fuse_dim(c, v, 2) < 1 || !same_dim0(c, q, s4))
      return ALMA_OK;
    /* Unless one query position is known (decoding: the H rows of a position are one product),
     * the heads go before the positions: Q and the output transposed, [B, H, S, .], so each head
     * is one product of S rows against the shared K (as [B, S, H, .], B*S products of H rows each
     * ran at half the speed of the unfused bmm in prefill), the mask's axes 1 and 2 swapped too,
     * which needs the mask 4-D: otherwise the positions stay first. */
    int mr = 0;
    for (int k = 0; k < ch.n; k++)
      for (int i = 0; i < c->g->nodes[ch.node[k]].n_inputs; i++) {
        int r = i == ch.slot[k] ? 0 : alma__fuse_rank(c, c->g->nodes[ch.node[k]].inputs[i]);
        mr = r < 0 || mr < 0 ? -1 : r > mr ? r : mr;
      }
    mqa_tr = alma__fuse_dim(c, s4, 1) != 1 && (ch.n == 0 || mr == 4);
  }
  if (alma__fuse_rank(c, q) < 2 || alma__fuse_rank(c, key) < 2 || alma__fuse_rank(c, v) < 2) return ALMA_OK;
  if (mview >= 0 && (!same_batch(c, q, s4) || !same_batch(c, key, s4))) return ALMA_OK; /* 4-D, the scores' batch */
  if (alma__fuse_dtype(c, q) != dt || alma__fuse_dtype(c, key) != dt || alma__fuse_dtype(c, v) != dt) return ALMA_OK;
  int y = out0(c, oview >= 0 ? oview : m2), ad = -1;
  /* Checks done: from here on the graph changes. New views first (they may move the nodes). */
  attn_rw w = {c, c->g->values[y].name};
  if (yshapes && pform == 1) {
    /* the product [B*H, S, Dv] stays for its Shape readers, now a view of the attention's output
     * (Flatten to [B*H, S*Dv], Reshape to [B*H, S, Dv]: no copies where Reshapes are views) */
    int64_t s3[3] = {0, -1, alma__fuse_dim(c, out0(c, m2), 2)};
    int fl = rw_node(&w, "Flatten", &y, 1, -1);
    if (fl < 0 || alma__fuse_attr_i(c, c->g->values[fl].producer, "axis", 2) != ALMA_OK) return ALMA_ERR_NOMEM;
    int y3 = out0(c, m2);
    alma__fuse_kill(c, m2); /* y3 gets its new producer */
    m2 = -1;
    if (rw_reshape(&w, fl, s3, 3, y3) < 0) return ALMA_ERR_NOMEM;
  }
  if (sform == 1) {
    if ((q4 < 0 && (q = rw_split_heads(&w, q, Hs)) < 0) || (k4 < 0 && (key = rw_split_heads(&w, key, Hs)) < 0) ||
        (pform == 1 && v4 < 0 && (v = rw_split_heads(&w, v, Hs)) < 0) || (bias >= 0 && (bias = rw_split_heads(&w, bias, Hs)) < 0))
      return ALMA_ERR_NOMEM;
  } else if (sform == 2) {
    int64_t qs4[4] = {0, -1, Hs, alma__fuse_dim(c, q, 2)}, ys3[3] = {0, -1, alma__fuse_dim(c, v, 2)}, sw[4] = {0, 2, 1, 3};
    int Y = alma__fuse_new_value(c, w.base), Yt = mqa_tr ? alma__fuse_new_value(c, w.base) : Y;
    if ((q = rw_reshape(&w, q, qs4, 4, -1)) < 0 || (mqa_tr && (q = rw_transpose(&w, q, sw, 4, -1)) < 0) ||
        (key = rw_unsqueeze(&w, key, 1)) < 0 || (v = rw_unsqueeze(&w, v, 1)) < 0 || Y < 0 || Yt < 0 ||
        (mqa_tr && rw_transpose(&w, Y, sw, 4, Yt) < 0) || rw_reshape(&w, Yt, ys3, 3, y) < 0)
      return ALMA_ERR_NOMEM;
    y = Y; /* the attention writes [B, S, H, Dv] (or [B, H, S, Dv]), viewed as the product [B, S*H, Dv] */
  }
  if (bias < 0 && ch.n == 1 && alma__fuse_is(c, ch.node[0], "", "Add")) {
    mask = alma__fuse_other_input(c, ch.node[0], ch.scores), ad = ch.node[0]; /* the mask as it is */
  } else if (bias < 0 && sform != 2 && ch.n == 1 && chain_causal(c, &ch, s4)) { /* sform 2: rows are no positions */
    causal = 1, ad = ch.node[0];
  } else if (ch.n) {
    /* f(s) = s + f(0) (see mask_chain): the chain now computes f(0), at the mask's size, or
     * f(bias) = bias + f(0) with baddbmm's bias (BLOOM's ALiBi) viewed as [B, H, ., T] */
    int prev = bias;
    if (prev < 0) {
      alma_tensor *z;
      if ((prev = alma__fuse_new_const(c, c->g->values[y].name, dt, 0, NULL, &z)) < 0) return ALMA_ERR_NOMEM;
    }
    for (int k = ch.n - 1; k >= 0; k--) {
      alma_node *nk = &c->g->nodes[ch.node[k]];
      int in[3];
      for (int i = 0; i < nk->n_inputs && i < 3; i++) in[i] = i == ch.slot[k] ? prev : nk->inputs[i];
      int nv = alma__fuse_new_value(c, c->g->values[y].name);
      if (nv < 0) return ALMA_ERR_NOMEM;
      ALMA_TRY(alma__fuse_set_inputs(c, ch.node[k], in, nk->n_inputs));
      ALMA_TRY(alma__fuse_set_output(c, ch.node[k], nv));
      prev = nv;
    }
    mask = prev;
  } else {
    mask = bias; /* the bias alone, or none */
  }
  if (mqa_tr && mask >= 0) { /* [B, S, 1 or H, T] -> [B, 1 or H, S, T] like the scores */
    int64_t sw[4] = {0, 2, 1, 3};
    if ((mask = rw_transpose(&w, mask, sw, 4, -1)) < 0) return ALMA_ERR_NOMEM;
  }
  ALMA_TRY(alma__fuse_retype(c, smi, "alma", "Attention", 1));
  ALMA_TRY(alma__fuse_attr_clear(c, smi));
  ALMA_TRY(alma__fuse_attr_f(c, smi, "scale", (float)scale));
  ALMA_TRY(alma__fuse_attr_i(c, smi, "k_transposed", k_transposed));
  if (causal) ALMA_TRY(alma__fuse_attr_i(c, smi, "causal", 1));
  int in[4] = {q, key, v, mask};
  ALMA_TRY(alma__fuse_set_inputs(c, smi, in, 4));
  ALMA_TRY(alma__fuse_set_output(c, smi, y));
  int dead[] = {m1, m2, ad, sc, qs, ks, tp, view, zadd, qv, kv, vv, mview, vview, oview, pview};
  /* the zeros added (ConstantOfShape, Mul by beta) when nothing else reads them */
  for (int z = zterm, k = 0; z >= 0 && k < 4 && alma__fuse_uses(c, z) == (k ? 0 : 1); k++) { /* the killed reader aside */
    int pz = alma__fuse_producer(c, z, "", NULL);
    if (pz < 0 || c->g->nodes[pz].n_outputs != 1) break;
    alma__fuse_kill(c, pz);
    int nz = -1;
    for (int i = 0; i < c->g->nodes[pz].n_inputs; i++) {
      int in = c->g->nodes[pz].inputs[i];
      if (in >= 0 && !alma__fuse_const(c, in) && alma__fuse_producer(c, in, "", NULL) >= 0) nz = nz < 0 ? in : -2;
    }
    z = nz; /* the one computed input, if one */
  }
  for (int i = 0; i < (int)(sizeof dead / sizeof dead[0]); i++) alma__fuse_kill(c, dead[i]);
  for (int i = 0; i < ncast; i++) alma__fuse_kill(c, casts[i]);
  alma__fuse_done(c, ALMA__FUSE_ATTN);
  return ALMA_OK;
}
