/* FUSE rules for subgraphs PyTorch 1.13 exports for single modules:
 *   GELU       x * 0.5 * (1 + erf(x / sqrt(2)))  (Div, Erf, Add, Mul, Mul; or Mul by 1/sqrt(2), and
 *              the 0.5 applied to x or to the sum)          -> Gelu (opset 20 semantics)
 *   LayerNorm  ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div [, Mul gamma] [, Add beta]
 *                                                           -> LayerNormalization (opset 17)
 *   attention  MatMul(Q, Kᵀ) [Div|Mul scale] [Add mask] Softmax(last axis) MatMul(·, V), with the
 *              scale possibly applied to Q or Kᵀ instead     -> alma.Attention
 * The ONNX ops created are bound at the version whose semantics they have, even when the model
 * imports an older opset (alma's kernels do not care about the import). */
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
  int mm = next_is(c, cur, "Mul"), ab = -1;
  if (mm >= 0) {
    int g = alma__fuse_other_input(c, mm, cur);
    if (g >= 0 && g != cur && affine_ok(c, g, x, k, dt) && alma__fuse_same_shape(c, out0(c, mm), x)) {
      gamma = g;
      cur = out0(c, mm);
    } else {
      mm = -1;
    }
  }
  ab = next_is(c, cur, "Add");
  if (ab >= 0) {
    int b = alma__fuse_other_input(c, ab, cur);
    if (b >= 0 && b != cur && affine_ok(c, b, x, k, dt) && alma__fuse_same_shape(c, out0(c, ab), x)) {
      beta = b;
      cur = out0(c, ab);
    } else {
      ab = -1;
    }
  }
  if (!alma__fuse_same_shape(c, cur, x)) return ALMA_OK;
  if (gamma < 0) {
    /* LayerNormalization needs Scale: ones over the normalized dims */
    int64_t dims[ALMA_MAX_RANK];
    for (int i = 0; i < k; i++)
      if ((dims[i] = alma__fuse_dim(c, x, i - k)) < 0) return ALMA_OK;
    alma_tensor *t;
    gamma = alma__fuse_new_const(c, c->g->values[x].name, dt, k, dims, &t);
    if (gamma < 0) return ALMA_ERR_NOMEM;
    for (int64_t i = 0, n = alma_tensor_numel(t); i < n; i++) alma__set_f64(t->data, dt, i, 1.0);
  }
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

/* ONNX's Attention (opset 23+) -> alma.Attention, whose DNNL kernel is the fast path, when the two
 * mean the same: 4-D Q [B,H,Sq,D], K [B,H,Sk,D], V [B,H,Sk,Dv] in float32 with as many kv heads as
 * query heads; no KV cache, nonpad lengths, softcap, sliding window or extra outputs; softmax in
 * float32. The mask, if any, must be a constant whose every row lets a key through: ONNX gives a
 * fully masked row zeros where alma.Attention's softmax gives NaN. A bool mask becomes 0 / -inf;
 * is_causal (without a mask, static Sq and Sk) becomes a constant [Sq, Sk] mask, top-left aligned
 * as ONNX's is without a cache. */
static alma_status onnx_attention(alma__fuse_ctx *c, int ai) {
  const alma_node *n = &c->g->nodes[ai];
  int q = n->n_inputs > 0 ? n->inputs[0] : -1, k = n->n_inputs > 1 ? n->inputs[1] : -1,
      v = n->n_inputs > 2 ? n->inputs[2] : -1, mask = n->n_inputs > 3 ? n->inputs[3] : -1;
  for (int i = 4; i < n->n_inputs; i++)
    if (n->inputs[i] >= 0) return ALMA_OK; /* past_key, past_value, nonpad_kv_seqlen */
  for (int o = 1; o < n->n_outputs; o++)
    if (n->outputs[o] >= 0 && alma__fuse_uses(c, n->outputs[o])) return ALMA_OK;
  int y = out0(c, ai);
  if (q < 0 || k < 0 || v < 0 || y < 0) return ALMA_OK;
  if (alma__attr_f(n, "softcap", 0.0f) != 0.0f || alma__attr_i(n, "softmax_precision", 1) != 1 ||
      alma__attr_i(n, "left_window_size", -1) != -1 || alma__attr_i(n, "right_window_size", -1) != -1)
    return ALMA_OK;
  const int vals[3] = {q, k, v};
  for (int i = 0; i < 3; i++)
    if (alma__fuse_rank(c, vals[i]) != 4 || alma__fuse_dtype(c, vals[i]) != ALMA_DTYPE_FLOAT32) return ALMA_OK;
  int64_t H = alma__fuse_dim(c, q, 1), Sq = alma__fuse_dim(c, q, 2), Sk = alma__fuse_dim(c, k, 2);
  if (H < 1 || alma__fuse_dim(c, k, 1) != H || alma__fuse_dim(c, v, 1) != H) return ALMA_OK;
  int causal = alma__attr_i(n, "is_causal", 0) != 0, newmask = -1;
  if (causal) {
    if (mask >= 0 || Sq < 1 || Sk < 1) return ALMA_OK;
    alma_tensor *t;
    int64_t d[2] = {Sq, Sk};
    if ((newmask = alma__fuse_new_const(c, c->g->values[q].name, ALMA_DTYPE_FLOAT32, 2, d, &t)) < 0)
      return ALMA_ERR_NOMEM;
    for (int64_t i = 0; i < Sq; i++)
      for (int64_t j = 0; j < Sk; j++) ((float *)t->data)[i * Sk + j] = j > i ? -INFINITY : 0.0f;
  } else if (mask >= 0) {
    const alma_tensor *m = alma__fuse_const(c, mask);
    if (!m || m->rank < 1 || m->dims[m->rank - 1] < 1) return ALMA_OK;
    int is_bool = m->dtype == ALMA_DTYPE_BOOL;
    if (!is_bool && m->dtype != ALMA_DTYPE_FLOAT32) return ALMA_OK;
    int64_t cols = m->dims[m->rank - 1], rows = alma_tensor_numel(m) / cols;
    if (cols != Sk && cols != 1) return ALMA_OK; /* shorter masks (opset 24) pad with -inf; Sk may be unknown */
    for (int64_t r = 0; r < rows; r++) {
      int open = 0;
      for (int64_t j = 0; j < cols; j++) {
        float x = is_bool ? 0.0f : ((const float *)m->data)[r * cols + j];
        if (x != x) return ALMA_OK;
        open |= is_bool ? ((const uint8_t *)m->data)[r * cols + j] != 0 : x > -INFINITY;
      }
      if (!open) return ALMA_OK;
    }
    if (is_bool) {
      alma_tensor *t;
      if ((newmask = alma__fuse_new_const(c, c->g->values[mask].name, ALMA_DTYPE_FLOAT32, m->rank, m->dims, &t)) < 0)
        return ALMA_ERR_NOMEM;
      for (int64_t i = 0; i < rows * cols; i++) ((float *)t->data)[i] = ((const uint8_t *)m->data)[i] ? 0.0f : -INFINITY;
    }
  }
  const alma_attr *sa = alma__node_attr(n, "scale");
  float scale = sa && sa->type == ALMA_ATTR_FLOAT ? sa->f : 0.0f;
  ALMA_TRY(alma__fuse_retype(c, ai, "alma", "Attention", 1));
  ALMA_TRY(alma__fuse_attr_clear(c, ai));
  if (sa) ALMA_TRY(alma__fuse_attr_f(c, ai, "scale", scale)); /* else both default to 1/sqrt(D) */
  int in[4] = {q, k, v, newmask >= 0 ? newmask : mask};
  ALMA_TRY(alma__fuse_set_inputs(c, ai, in, 4));
  ALMA_TRY(alma__fuse_set_output(c, ai, y));
  alma__fuse_done(c, ALMA__FUSE_ATTN);
  return ALMA_OK;
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
  int m2 = next_is(c, p, "MatMul");
  if (m2 < 0 || c->g->nodes[m2].inputs[0] != p || c->g->nodes[m2].inputs[1] == p) return ALMA_OK;
  int v = c->g->nodes[m2].inputs[1];
  double scale = 1.0;
  int cur = s, user = smi, mask = -1, ad = -1, sc = -1, qs = -1, ks = -1, tp = -1;
  if (alma__fuse_only_consumer(c, cur) != user) return ALMA_OK;
  /* [Add mask]: the scores side is the one coming from the MatMul (possibly through a scale) */
  int a = alma__fuse_producer(c, cur, "", "Add");
  if (a >= 0) {
    for (int side = 0; side < 2 && ad < 0; side++) {
      int t = c->g->nodes[a].inputs[side], m = c->g->nodes[a].inputs[1 - side], dummy;
      double sdummy = 1;
      if (t < 0 || m < 0 || t == m || alma__fuse_only_consumer(c, t) != a) continue;
      int inner = strip_scale(c, t, a, &sdummy, &dummy);
      if (alma__fuse_producer(c, inner, "", "MatMul") < 0) continue;
      if (!alma__fuse_same_shape(c, t, cur) || alma__fuse_dtype(c, m) != dt) continue;
      ad = a, mask = m, user = a, cur = t;
    }
    if (ad < 0) return ALMA_OK;
  }
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
  if (alma__fuse_rank(c, q) < 2 || alma__fuse_rank(c, key) < 2 || alma__fuse_rank(c, v) < 2) return ALMA_OK;
  if (alma__fuse_dtype(c, q) != dt || alma__fuse_dtype(c, key) != dt || alma__fuse_dtype(c, v) != dt) return ALMA_OK;
  int y = out0(c, m2);
  ALMA_TRY(alma__fuse_retype(c, smi, "alma", "Attention", 1));
  ALMA_TRY(alma__fuse_attr_clear(c, smi));
  ALMA_TRY(alma__fuse_attr_f(c, smi, "scale", (float)scale));
  ALMA_TRY(alma__fuse_attr_i(c, smi, "k_transposed", k_transposed));
  int in[4] = {q, key, v, mask};
  ALMA_TRY(alma__fuse_set_inputs(c, smi, in, 4));
  ALMA_TRY(alma__fuse_set_output(c, smi, y));
  int dead[] = {m1, m2, ad, sc, qs, ks, tp};
  for (int i = 0; i < (int)(sizeof dead / sizeof dead[0]); i++) alma__fuse_kill(c, dead[i]);
  alma__fuse_done(c, ALMA__FUSE_ATTN);
  return ALMA_OK;
}
