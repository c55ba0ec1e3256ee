/* FUSE rules on Conv/ConvTranspose/Gemm/MatMul prologues and epilogues:
 *   - a constant-zero Pad on spatial axes only folded into the pads of the Conv (alma.FusedConv)
 *     or AveragePool that is its only consumer;
 *   - BatchNormalization (inference) folded into the weights and bias: Conv, ConvTranspose, Gemm,
 *     and 2-D MatMul (which becomes a Gemm);
 *   - Add of a constant bias along the channel (Conv) or last (Gemm/MatMul) axis folded into the
 *     bias; 2-D MatMul + Add -> Gemm; N-D MatMul + bias -> alma.FusedMatMul;
 *   - Conv + Add(residual of the output's shape) -> alma.FusedConv with Z;
 *   - Conv/Gemm/MatMul (or their fused forms without an activation) + activation -> alma.Fused*.
 * Folded constants are computed in double and stored in the weights' dtype. */
#include <float.h>
#include <math.h>

#include "passes/fuse.h"

static const alma_tensor *float_const(const alma__fuse_ctx *c, int v, alma_dtype dt) {
  const alma_tensor *t = alma__fuse_const(c, v);
  return t && t->dtype == dt ? t : NULL;
}

static double ld(const alma_tensor *t, int64_t i) { return alma__get_f64(t->data, t->dtype, i); }
static void st(alma_tensor *t, int64_t i, double v) { alma__set_f64(t->data, t->dtype, i, v); }

static alma_status nomem(void) { return alma__errorf(ALMA_ERR_NOMEM, "out of memory"); }

/* ---- Pad into the Conv/AveragePool after it ---------------------------------------------------- */

/* Begin/end amounts of a constant-mode Pad with value 0 when they are statically known: the
 * attribute (`paddings` at opset 1, `pads` to 10, with `value`), or constant `pads`,
 * `constant_value` and (opset 18) `axes` inputs. r: the data's rank. */
static int zero_pad_amounts(const alma__fuse_ctx *c, const alma_node *P, int r, int64_t *b, int64_t *e) {
  if (strcmp(alma__attr_s(P, "mode", "constant"), "constant")) return 0;
  int64_t pads[2 * ALMA_MAX_RANK];
  int axes[ALMA_MAX_RANK], np, na = r;
  for (int k = 0; k < r; k++) axes[k] = k;
  if (P->since_version < 11) {
    const int64_t *v = NULL;
    if (alma__attr_f(P, "value", 0.0f) != 0.0f) return 0;
    np = alma__attr_ints(P, P->since_version < 2 ? "paddings" : "pads", &v);
    if (np != 2 * r) return 0;
    memcpy(pads, v, sizeof(int64_t) * (size_t)np);
  } else {
    const alma_tensor *pt = P->n_inputs > 1 ? alma__fuse_const(c, P->inputs[1]) : NULL;
    if (!pt || pt->dtype != ALMA_DTYPE_INT64 || pt->rank != 1 || pt->dims[0] > 2 * ALMA_MAX_RANK) return 0;
    np = (int)pt->dims[0];
    memcpy(pads, pt->data, sizeof(int64_t) * (size_t)np);
    if (P->n_inputs > 2 && P->inputs[2] >= 0) { /* constant_value: absent or empty means 0 */
      const alma_tensor *cv = alma__fuse_const(c, P->inputs[2]);
      if (!cv || !alma__dtype_is_float(cv->dtype) || alma_tensor_numel(cv) > 1) return 0;
      if (alma_tensor_numel(cv) == 1 && alma__get_f64(cv->data, cv->dtype, 0) != 0.0) return 0;
    }
    if (P->n_inputs > 3 && P->inputs[3] >= 0) {
      const alma_tensor *at = alma__fuse_const(c, P->inputs[3]);
      if (P->since_version < 18 || !at || !alma__dtype_is_int(at->dtype) || at->rank != 1 || at->dims[0] > r) return 0;
      na = (int)at->dims[0];
      int seen[ALMA_MAX_RANK] = {0};
      for (int k = 0; k < na; k++) {
        int64_t a = alma__get_i64(at->data, at->dtype, k);
        if (a < 0) a += r;
        if (a < 0 || a >= r || seen[a]++) return 0;
        axes[k] = (int)a;
      }
    }
    if (np != 2 * na) return 0;
  }
  for (int k = 0; k < r; k++) b[k] = e[k] = 0;
  for (int k = 0; k < na; k++) {
    b[axes[k]] = pads[k];
    e[axes[k]] = pads[na + k];
  }
  return 1;
}

/* Conv(Pad(x, zeros on spatial axes)) = Conv(x) with those amounts added to its pads, since the
 * convolution's own padding is zeros; the same holds for AveragePool when padded zeros count
 * (count_include_pad=1) and ceil_mode=0 (no window extends past the padded input). MaxPool pads
 * with -inf, so a zero Pad before it is not folded. Amounts are kept below the dilated kernel
 * extent on each side, so no window lies entirely in padding (some runtimes reject that). */
alma_status alma__fuse_rule_pad(alma__fuse_ctx *c, int ci) {
  int conv = alma__fuse_is(c, ci, "", "Conv") || alma__fuse_is(c, ci, "alma", "FusedConv");
  int pool = alma__fuse_is(c, ci, "", "AveragePool");
  if (!conv && !pool) return ALMA_OK;
  const alma_node *C = &c->g->nodes[ci];
  if (C->n_inputs < 1 || C->n_inputs > 8 || C->inputs[0] < 0 || (conv && C->n_inputs < 2)) return ALMA_OK;
  int v = C->inputs[0];
  int pi = alma__fuse_producer(c, v, "", "Pad");
  if (pi < 0 || alma__fuse_only_consumer(c, v) != ci) return ALMA_OK;
  const alma_node *P = &c->g->nodes[pi];
  int x = P->n_inputs > 0 ? P->inputs[0] : -1, r = alma__fuse_rank(c, x), nsp = r - 2;
  if (x < 0 || r < 3 || !alma__dtype_is_float(alma__fuse_dtype(c, x))) return ALMA_OK;
  int64_t b[ALMA_MAX_RANK], e[ALMA_MAX_RANK];
  if (!zero_pad_amounts(c, P, r, b, e) || b[0] || e[0] || b[1] || e[1]) return ALMA_OK;
  for (int i = 2; i < r; i++)
    if (b[i] < 0 || e[i] < 0) return ALMA_OK; /* negative amounts crop */

  const char *ap = alma__attr_s(C, "auto_pad", "NOTSET");
  int valid = !strcmp(ap, "VALID");
  if (!valid && strcmp(ap, "NOTSET") && ap[0]) return ALMA_OK; /* SAME_*: pads follow from the input size */
  const int64_t *op = NULL, *ks = NULL, *dl = NULL;
  int nop = valid ? 0 : alma__attr_ints(C, "pads", &op);
  int nks = alma__attr_ints(C, "kernel_shape", &ks);
  int ndl = conv || C->since_version >= 19 ? alma__attr_ints(C, "dilations", &dl) : 0;
  if ((nop && nop != 2 * nsp) || (nks && nks != nsp) || (ndl && ndl != nsp)) return ALMA_OK;
  int include_pad = 0;
  if (pool) {
    if (C->since_version < 7 || nks != nsp) return ALMA_OK; /* count_include_pad exists from opset 7 */
    if (C->since_version >= 10 && alma__attr_i(C, "ceil_mode", 0)) return ALMA_OK;
    include_pad = alma__attr_i(C, "count_include_pad", 0) != 0;
    for (int i = 0; !include_pad && i < nop; i++)
      if (op[i]) return ALMA_OK; /* its own pads are not counted: only a pad-free pool can switch */
  }
  int64_t np[2 * ALMA_MAX_RANK];
  for (int i = 0; i < nsp; i++) {
    int64_t k = nks ? ks[i] : alma__fuse_dim(c, C->inputs[1], 2 + i), d = ndl ? dl[i] : 1;
    if (k < 1 || d < 1) return ALMA_OK;
    int64_t extent = (k - 1) * d + 1;
    np[i] = (nop ? op[i] : 0) + b[2 + i];
    np[nsp + i] = (nop ? op[nsp + i] : 0) + e[2 + i];
    if (np[i] >= extent || np[nsp + i] >= extent) return ALMA_OK;
  }
  ALMA_TRY(alma__fuse_attr_ints(c, ci, "pads", np, 2 * nsp));
  if (valid) ALMA_TRY(alma__fuse_attr_drop(c, ci, "auto_pad"));
  if (pool && !include_pad) ALMA_TRY(alma__fuse_attr_i(c, ci, "count_include_pad", 1));
  C = &c->g->nodes[ci];
  int in[8];
  for (int k = 0; k < C->n_inputs; k++) in[k] = C->inputs[k];
  in[0] = x;
  ALMA_TRY(alma__fuse_set_inputs(c, ci, in, C->n_inputs));
  alma__fuse_kill(c, pi);
  alma__fuse_done(c, ALMA__FUSE_PAD);
  return ALMA_OK;
}

/* ---- BatchNormalization ------------------------------------------------------------------------ */

static int bn_inference_mode(const alma_node *n) {
  for (int k = 1; k < n->n_outputs; k++)
    if (n->outputs[k] >= 0) return 0; /* opsets 7-13 read wanted statistics outputs as training */
  if (n->since_version >= 14 && alma__attr_i(n, "training_mode", 0)) return 0;
  if (n->since_version < 9 && alma__attr_i(n, "spatial", 1) == 0) return 0;
  return 1;
}

/* New weights of a Conv (per output channel m = first axis) or ConvTranspose ([Cin, M/group, k...])
 * scaled by s, and bias (B or 0) * s + t. */
static alma_status bn_conv(alma__fuse_ctx *c, int p, int bi, const double *s, const double *t, int64_t C,
                           alma_dtype dt, int transposed, int *done) {
  const alma_node *P = &c->g->nodes[p];
  if (P->n_inputs < 2) return ALMA_OK;
  int x0 = P->inputs[0], w = P->inputs[1], b = P->n_inputs > 2 ? P->inputs[2] : -1;
  const alma_tensor *W = float_const(c, w, dt), *B = b >= 0 ? float_const(c, b, dt) : NULL;
  if (!W || W->rank < 3 || (b >= 0 && !B)) return ALMA_OK;
  int64_t group = transposed ? alma__attr_i(P, "group", 1) : 1;
  int64_t cin = W->dims[0], mg = W->dims[1];
  int64_t M = transposed ? mg * group : W->dims[0];
  if (M != C || group <= 0 || cin % group || (B && alma_tensor_numel(B) != M)) return ALMA_OK;
  int64_t total = alma_tensor_numel(W), kk = total / (cin * mg > 0 ? cin * mg : 1);
  alma_tensor *W2, *B2;
  int wv = alma__fuse_new_const(c, c->g->values[w].name, dt, W->rank, W->dims, &W2);
  if (wv < 0) return ALMA_ERR_NOMEM;
  int64_t bd[1] = {M};
  int bv = alma__fuse_new_const(c, b >= 0 ? c->g->values[b].name : c->g->values[w].name, dt, 1, bd, &B2);
  if (bv < 0) return ALMA_ERR_NOMEM;
  int64_t per = M ? total / M : 0;
  for (int64_t i = 0; i < total; i++) {
    int64_t m;
    if (transposed) {
      int64_t ci = i / (mg * kk), j = (i / kk) % mg;
      m = (ci / (cin / group)) * mg + j;
    } else {
      m = i / per;
    }
    st(W2, i, ld(W, i) * s[m]);
  }
  for (int64_t m = 0; m < M; m++) st(B2, m, (B ? ld(B, m) : 0.0) * s[m] + t[m]);
  int in[3] = {x0, wv, bv};
  ALMA_TRY(alma__fuse_set_inputs(c, p, in, 3));
  ALMA_TRY(alma__fuse_set_output(c, p, c->g->nodes[bi].outputs[0]));
  alma__fuse_kill(c, bi);
  *done = 1;
  return ALMA_OK;
}

/* B scaled along N (columns of op(B)); the bias: Gemm's beta*C (broadcast with [N]) * s + t. */
static alma_status bn_gemm(alma__fuse_ctx *c, int p, int bi, const double *s, const double *t, int64_t C,
                           alma_dtype dt, int is_matmul, int *done) {
  const alma_node *P = &c->g->nodes[p];
  if (P->n_inputs < 2) return ALMA_OK;
  int a = P->inputs[0], b = P->inputs[1], cv = !is_matmul && P->n_inputs > 2 ? P->inputs[2] : -1;
  const alma_tensor *B = float_const(c, b, dt), *Ct = cv >= 0 ? float_const(c, cv, dt) : NULL;
  if (!B || B->rank != 2 || (cv >= 0 && (!Ct || Ct->rank > 2))) return ALMA_OK;
  if (is_matmul && alma__fuse_rank(c, a) != 2) return ALMA_OK; /* BN's channel axis is the last one only in 2-D */
  int tb = !is_matmul && alma__attr_i(P, "transB", 0);
  int64_t N = tb ? B->dims[0] : B->dims[1];
  if (N != C) return ALMA_OK;
  double beta = is_matmul ? 1.0 : alma__attr_f(P, "beta", 1.0f);
  int64_t ndim[1] = {N}, cdims[ALMA_MAX_RANK];
  int crank = 1;
  if (Ct) {
    if (alma__broadcast_shape(Ct->rank, Ct->dims, 1, ndim, &crank, cdims) != ALMA_OK) return ALMA_OK;
  } else {
    cdims[0] = N;
  }
  alma_tensor *B2, *C2;
  int b2 = alma__fuse_new_const(c, c->g->values[b].name, dt, 2, B->dims, &B2);
  if (b2 < 0) return ALMA_ERR_NOMEM;
  int c2 = alma__fuse_new_const(c, cv >= 0 ? c->g->values[cv].name : c->g->values[b].name, dt, crank, cdims, &C2);
  if (c2 < 0) return ALMA_ERR_NOMEM;
  for (int64_t i = 0, n = alma_tensor_numel(B); i < n; i++) {
    int64_t j = tb ? i / B->dims[1] : i % B->dims[1];
    st(B2, i, ld(B, i) * s[j]);
  }
  for (int64_t i = 0, n = alma_tensor_numel(C2); i < n; i++) {
    int64_t j = i % N;
    double cval = Ct ? beta * ld(Ct, alma__broadcast_index(i, crank, cdims, Ct->rank, Ct->dims)) : 0.0;
    st(C2, i, cval * s[j] + t[j]);
  }
  if (is_matmul) {
    ALMA_TRY(alma__fuse_retype(c, p, "", "Gemm", 13));
    ALMA_TRY(alma__fuse_attr_clear(c, p));
  } else {
    ALMA_TRY(alma__fuse_attr_f(c, p, "beta", 1.0f));
    if (c->g->nodes[p].since_version < 7) ALMA_TRY(alma__fuse_attr_i(c, p, "broadcast", 1));
  }
  int in[3] = {a, b2, c2};
  ALMA_TRY(alma__fuse_set_inputs(c, p, in, 3));
  ALMA_TRY(alma__fuse_set_output(c, p, c->g->nodes[bi].outputs[0]));
  alma__fuse_kill(c, bi);
  *done = 1;
  return ALMA_OK;
}

alma_status alma__fuse_rule_bn(alma__fuse_ctx *c, int bi) {
  if (!alma__fuse_is(c, bi, "", "BatchNormalization")) return ALMA_OK;
  const alma_node *bn = &c->g->nodes[bi];
  if (bn->n_inputs < 5 || bn->n_outputs < 1 || bn->outputs[0] < 0 || !bn_inference_mode(bn)) return ALMA_OK;
  int x = bn->inputs[0];
  if (x < 0 || alma__fuse_only_consumer(c, x) != bi) return ALMA_OK;
  int p = alma__fuse_producer(c, x, "", NULL);
  alma_dtype dt = alma__fuse_dtype(c, x);
  if (p < 0 || !alma__dtype_is_float(dt)) return ALMA_OK;
  const alma_tensor *prm[4];
  for (int k = 0; k < 4; k++) {
    prm[k] = bn->inputs[k + 1] >= 0 ? alma__fuse_const(c, bn->inputs[k + 1]) : NULL;
    if (!prm[k] || !alma__dtype_is_float(prm[k]->dtype) || alma_tensor_numel(prm[k]) != alma_tensor_numel(prm[0]))
      return ALMA_OK;
  }
  int64_t C = alma_tensor_numel(prm[0]);
  double eps = alma__attr_f(bn, "epsilon", 1e-5f);
  double *s = malloc(sizeof(double) * (size_t)(2 * C + 1));
  if (!s) return nomem();
  double *t = s + C;
  for (int64_t k = 0; k < C; k++) {
    s[k] = ld(prm[0], k) / sqrt(ld(prm[3], k) + eps);
    t[k] = ld(prm[1], k) - ld(prm[2], k) * s[k];
  }
  int done = 0;
  alma_status r = ALMA_OK;
  if (alma__fuse_is(c, p, "", "Conv")) r = bn_conv(c, p, bi, s, t, C, dt, 0, &done);
  else if (alma__fuse_is(c, p, "", "ConvTranspose")) r = bn_conv(c, p, bi, s, t, C, dt, 1, &done);
  else if (alma__fuse_is(c, p, "", "Gemm")) r = bn_gemm(c, p, bi, s, t, C, dt, 0, &done);
  else if (alma__fuse_is(c, p, "", "MatMul")) r = bn_gemm(c, p, bi, s, t, C, dt, 1, &done);
  free(s);
  if (r == ALMA_OK && done) alma__fuse_done(c, ALMA__FUSE_BN);
  return r;
}

/* ---- bias Add ---------------------------------------------------------------------------------- */

/* Conv/ConvTranspose: a constant that varies at most along the channel axis (1) joins B. */
static alma_status bias_conv(alma__fuse_ctx *c, int ai, int p, int x, int b, alma_dtype dt, int *done) {
  const alma_tensor *bt = float_const(c, b, dt);
  int R = alma__fuse_rank(c, x);
  int64_t M = alma__fuse_dim(c, x, 1);
  const alma_node *P = &c->g->nodes[p];
  if (!bt || R < 3 || M <= 0 || bt->rank > R || P->n_inputs < 2) return ALMA_OK;
  int vary = 0;
  for (int i = 0; i < bt->rank; i++) {
    int j = R - bt->rank + i;
    int64_t d = bt->dims[i];
    if (d == 1) continue;
    if (j != 1 || d != M) return ALMA_OK;
    vary = 1;
  }
  int ob = P->n_inputs > 2 ? P->inputs[2] : -1;
  const alma_tensor *old = ob >= 0 ? float_const(c, ob, dt) : NULL;
  if (ob >= 0 && (!old || alma_tensor_numel(old) != M)) return ALMA_OK;
  alma_tensor *nb;
  int64_t dims[1] = {M};
  int nv = alma__fuse_new_const(c, c->g->values[ob >= 0 ? ob : b].name, dt, 1, dims, &nb);
  if (nv < 0) return ALMA_ERR_NOMEM;
  for (int64_t m = 0; m < M; m++) st(nb, m, (old ? ld(old, m) : 0.0) + ld(bt, vary ? m : 0));
  int in[3] = {c->g->nodes[p].inputs[0], c->g->nodes[p].inputs[1], nv};
  ALMA_TRY(alma__fuse_set_inputs(c, p, in, 3));
  ALMA_TRY(alma__fuse_set_output(c, p, c->g->nodes[ai].outputs[0]));
  alma__fuse_kill(c, ai);
  *done = 1;
  return ALMA_OK;
}

/* Gemm: a constant of rank <= 2 that varies at most along N joins C (beta * C + bias, beta = 1). */
static alma_status bias_gemm(alma__fuse_ctx *c, int ai, int p, int x, int b, alma_dtype dt, int *done) {
  const alma_tensor *bt = float_const(c, b, dt);
  int64_t N = alma__fuse_dim(c, x, 1);
  const alma_node *P = &c->g->nodes[p];
  if (!bt || bt->rank > 2 || N <= 0 || P->n_inputs < 2) return ALMA_OK;
  if (bt->rank == 2 && bt->dims[0] != 1) return ALMA_OK;
  if (bt->rank >= 1 && bt->dims[bt->rank - 1] != 1 && bt->dims[bt->rank - 1] != N) return ALMA_OK;
  int cv = P->n_inputs > 2 ? P->inputs[2] : -1, nc = b;
  if (cv >= 0) {
    const alma_tensor *ct = float_const(c, cv, dt);
    int rank;
    int64_t dims[ALMA_MAX_RANK];
    if (!ct || alma__broadcast_shape(ct->rank, ct->dims, bt->rank, bt->dims, &rank, dims) != ALMA_OK) return ALMA_OK;
    double beta = alma__attr_f(P, "beta", 1.0f);
    alma_tensor *t;
    nc = alma__fuse_new_const(c, c->g->values[cv].name, dt, rank, dims, &t);
    if (nc < 0) return ALMA_ERR_NOMEM;
    for (int64_t i = 0, n = alma_tensor_numel(t); i < n; i++)
      st(t, i, beta * ld(ct, alma__broadcast_index(i, rank, dims, ct->rank, ct->dims)) +
                   ld(bt, alma__broadcast_index(i, rank, dims, bt->rank, bt->dims)));
  }
  ALMA_TRY(alma__fuse_attr_f(c, p, "beta", 1.0f));
  if (c->g->nodes[p].since_version < 7) ALMA_TRY(alma__fuse_attr_i(c, p, "broadcast", 1));
  int in[3] = {c->g->nodes[p].inputs[0], c->g->nodes[p].inputs[1], nc};
  ALMA_TRY(alma__fuse_set_inputs(c, p, in, 3));
  ALMA_TRY(alma__fuse_set_output(c, p, c->g->nodes[ai].outputs[0]));
  alma__fuse_kill(c, ai);
  *done = 1;
  return ALMA_OK;
}

/* 2-D MatMul + Add -> Gemm(A, B, addend) when the addend broadcasts to [M, N] in both bindings
 * (constant or not); N-D MatMul + constant bias along the last axis -> FusedMatMul(A, B, bias[N]). */
static alma_status bias_matmul(alma__fuse_ctx *c, int ai, int p, int x, int b, alma_dtype dt, int *done) {
  const alma_node *P = &c->g->nodes[p];
  if (P->n_inputs != 2) return ALMA_OK;
  int A = P->inputs[0], B = P->inputs[1];
  int R = alma__fuse_rank(c, x);
  if (alma__fuse_rank(c, A) == 2 && alma__fuse_rank(c, B) == 2) {
    for (int k = 0; k < 2; k++) {
      const alma_tensor *bi = alma__fuse_info(c, b, k), *xi = alma__fuse_info(c, x, k);
      if (!bi || !xi || bi->rank > 2 || bi->dtype != dt) return ALMA_OK;
      for (int i = 0; i < bi->rank; i++) {
        int64_t d = bi->dims[i], w = xi->dims[2 - bi->rank + i];
        if (d != 1 && d != w) return ALMA_OK;
      }
    }
    ALMA_TRY(alma__fuse_retype(c, p, "", "Gemm", 13));
    ALMA_TRY(alma__fuse_attr_clear(c, p));
    int in[3] = {A, B, b};
    ALMA_TRY(alma__fuse_set_inputs(c, p, in, 3));
  } else {
    const alma_tensor *bt = float_const(c, b, dt);
    int64_t N = alma__fuse_dim(c, x, -1);
    if (!bt || R < 1 || N <= 0 || bt->rank > R || bt->rank < 1) return ALMA_OK;
    int64_t last = bt->dims[bt->rank - 1];
    if (last != 1 && last != N) return ALMA_OK;
    for (int i = 0; i + 1 < bt->rank; i++)
      if (bt->dims[i] != 1) return ALMA_OK;
    int bv = b;
    if (bt->rank != 1) {
      alma_tensor *t;
      int64_t dims[1] = {last};
      bv = alma__fuse_new_const(c, c->g->values[b].name, dt, 1, dims, &t);
      if (bv < 0) return ALMA_ERR_NOMEM;
      memcpy(t->data, bt->data, t->nbytes);
    }
    ALMA_TRY(alma__fuse_retype(c, p, "alma", "FusedMatMul", 1));
    int in[3] = {A, B, bv};
    ALMA_TRY(alma__fuse_set_inputs(c, p, in, 3));
  }
  ALMA_TRY(alma__fuse_set_output(c, p, c->g->nodes[ai].outputs[0]));
  alma__fuse_kill(c, ai);
  *done = 1;
  return ALMA_OK;
}

alma_status alma__fuse_rule_bias(alma__fuse_ctx *c, int ai) {
  if (!alma__fuse_is(c, ai, "", "Add")) return ALMA_OK;
  const alma_node *a = &c->g->nodes[ai];
  if (a->n_inputs != 2 || a->n_outputs != 1 || a->outputs[0] < 0) return ALMA_OK;
  int out = a->outputs[0];
  alma_dtype dt = alma__fuse_dtype(c, out);
  if (!alma__dtype_is_float(dt)) return ALMA_OK;
  for (int side = 0; side < 2; side++) {
    a = &c->g->nodes[ai];
    int x = a->inputs[side], b = a->inputs[1 - side];
    if (x < 0 || b < 0 || x == b || alma__fuse_only_consumer(c, x) != ai || !alma__fuse_same_shape(c, out, x)) continue;
    int p = alma__fuse_producer(c, x, "", NULL), done = 0;
    if (p < 0) continue;
    alma_status r = ALMA_OK;
    if (alma__fuse_is(c, p, "", "Conv") || alma__fuse_is(c, p, "", "ConvTranspose"))
      r = bias_conv(c, ai, p, x, b, dt, &done);
    else if (alma__fuse_is(c, p, "", "Gemm"))
      r = bias_gemm(c, ai, p, x, b, dt, &done);
    else if (alma__fuse_is(c, p, "", "MatMul"))
      r = bias_matmul(c, ai, p, x, b, dt, &done);
    if (r != ALMA_OK) return r;
    if (done) {
      alma__fuse_done(c, ALMA__FUSE_BIAS);
      return ALMA_OK;
    }
  }
  return ALMA_OK;
}

/* ---- residual Add into the conv ---------------------------------------------------------------- */

/* A Conv, or a FusedConv with neither Z nor activation yet. */
static int plain_conv(const alma__fuse_ctx *c, int p) {
  if (alma__fuse_is(c, p, "", "Conv")) return 1;
  return alma__fuse_is(c, p, "alma", "FusedConv") && c->g->nodes[p].n_inputs <= 3 &&
         !alma__node_attr(&c->g->nodes[p], "activation");
}

alma_status alma__fuse_rule_residual(alma__fuse_ctx *c, int ai) {
  if (!alma__fuse_is(c, ai, "", "Add")) return ALMA_OK;
  const alma_node *a = &c->g->nodes[ai];
  if (a->n_inputs != 2 || a->n_outputs != 1 || a->outputs[0] < 0) return ALMA_OK;
  int out = a->outputs[0];
  alma_dtype dt = alma__fuse_dtype(c, out);
  if (!alma__dtype_is_float(dt)) return ALMA_OK;
  for (int side = 0; side < 2; side++) {
    int y = a->inputs[side], z = a->inputs[1 - side];
    if (y < 0 || z < 0 || y == z) continue;
    int p = alma__fuse_producer(c, y, NULL, NULL);
    if (p < 0 || !plain_conv(c, p) || alma__fuse_only_consumer(c, y) != ai) continue;
    if (!alma__fuse_same_shape(c, z, y) || !alma__fuse_same_shape(c, out, y) || alma__fuse_dtype(c, z) != dt) continue;
    const alma_node *P = &c->g->nodes[p];
    int in[4] = {P->inputs[0], P->n_inputs > 1 ? P->inputs[1] : -1, P->n_inputs > 2 ? P->inputs[2] : -1, z};
    if (alma__fuse_is(c, p, "", "Conv")) ALMA_TRY(alma__fuse_retype(c, p, "alma", "FusedConv", 1));
    ALMA_TRY(alma__fuse_set_inputs(c, p, in, 4));
    ALMA_TRY(alma__fuse_set_output(c, p, out));
    alma__fuse_kill(c, ai);
    alma__fuse_done(c, ALMA__FUSE_RESID);
    return ALMA_OK;
  }
  return ALMA_OK;
}

/* ---- activation -------------------------------------------------------------------------------- */

static int near(double a, double b) { return alma__fuse_near(a, b, 1e-5); }

alma_status alma__fuse_rule_activation(alma__fuse_ctx *c, int ai) {
  const alma_node *a = &c->g->nodes[ai];
  if (a->dead || a->n_outputs != 1 || a->outputs[0] < 0 || a->n_inputs < 1 || !(!a->domain[0] || !strcmp(a->domain, "ai.onnx")))
    return ALMA_OK;
  const char *act = NULL;
  float prm[2];
  int np = 0, y = a->inputs[0], extra = -1;
  const char *t = a->op_type;
  if (!strcmp(t, "Relu") || !strcmp(t, "Sigmoid") || !strcmp(t, "Tanh") || !strcmp(t, "HardSwish")) {
    act = t;
  } else if (!strcmp(t, "LeakyRelu")) {
    act = t;
    prm[np++] = alma__attr_f(a, "alpha", 0.01f);
  } else if (!strcmp(t, "HardSigmoid")) {
    act = t;
    prm[np++] = alma__attr_f(a, "alpha", 0.2f);
    prm[np++] = alma__attr_f(a, "beta", 0.5f);
  } else if (!strcmp(t, "Gelu")) {
    const char *m = alma__attr_s(a, "approximate", "none");
    if (strcmp(m, "none") && strcmp(m, "tanh")) return ALMA_OK;
    act = t;
    if (!strcmp(m, "tanh")) prm[np++] = 1;
  } else if (!strcmp(t, "Clip")) {
    double lo = -INFINITY, hi = INFINITY;
    if (a->since_version < 11) {
      lo = alma__attr_f(a, "min", -FLT_MAX);
      hi = alma__attr_f(a, "max", FLT_MAX);
    } else {
      if (a->n_inputs > 1 && a->inputs[1] >= 0 && !alma__fuse_scalar(c, a->inputs[1], &lo)) return ALMA_OK;
      if (a->n_inputs > 2 && a->inputs[2] >= 0 && !alma__fuse_scalar(c, a->inputs[2], &hi)) return ALMA_OK;
    }
    act = t;
    prm[np++] = (float)lo;
    prm[np++] = (float)hi;
  } else if (!strcmp(t, "Mul") && a->n_inputs == 2) {
    /* x * Sigmoid(x) = SiLU; x * HardSigmoid(x; 1/6, 1/2) = HardSwish */
    for (int side = 0; side < 2 && !act; side++) {
      int x = a->inputs[side], s = a->inputs[1 - side];
      int sp = alma__fuse_producer(c, s, "", NULL);
      if (x < 0 || sp < 0 || c->g->nodes[sp].n_inputs < 1 || c->g->nodes[sp].inputs[0] != x) continue;
      if (alma__fuse_only_consumer(c, s) != ai || alma__fuse_uses(c, x) != 2 || c->g->values[x].is_output) continue;
      const alma_node *S = &c->g->nodes[sp];
      if (alma__fuse_is(c, sp, "", "Sigmoid")) act = "SiLU";
      else if (alma__fuse_is(c, sp, "", "HardSigmoid") && near(alma__attr_f(S, "alpha", 0.2f), 1.0 / 6) &&
               near(alma__attr_f(S, "beta", 0.5f), 0.5))
        act = "HardSwish";
      if (act) y = x, extra = sp;
    }
    if (!act) return ALMA_OK;
  } else {
    return ALMA_OK;
  }
  if (y < 0 || !alma__dtype_is_float(alma__fuse_dtype(c, y))) return ALMA_OK;
  if (extra < 0 && alma__fuse_only_consumer(c, y) != ai) return ALMA_OK;
  int p = alma__fuse_producer(c, y, NULL, NULL);
  if (p < 0) return ALMA_OK;
  static const char *const base[3] = {"Conv", "Gemm", "MatMul"}, *const fused[3] = {"FusedConv", "FusedGemm", "FusedMatMul"};
  int kind = -1;
  for (int k = 0; k < 3; k++) {
    if (alma__fuse_is(c, p, "", base[k])) kind = k;
    if (alma__fuse_is(c, p, "alma", fused[k]) && !alma__node_attr(&c->g->nodes[p], "activation")) kind = k;
  }
  if (kind < 0) return ALMA_OK;
  if (alma__fuse_is(c, p, "", base[kind])) ALMA_TRY(alma__fuse_retype(c, p, "alma", fused[kind], 1));
  ALMA_TRY(alma__fuse_attr_s(c, p, "activation", act));
  if (np) ALMA_TRY(alma__fuse_attr_floats(c, p, "activation_params", prm, np));
  ALMA_TRY(alma__fuse_set_output(c, p, c->g->nodes[ai].outputs[0]));
  alma__fuse_kill(c, ai);
  alma__fuse_kill(c, extra);
  alma__fuse_done(c, ALMA__FUSE_ACT);
  return ALMA_OK;
}
